/*
 * dbscan/dbscan.h — DBSCAN's public interface: the call (gc_dbscan_cpu),
 * its parameters, the algorithms and their device choice, and DBSCAN over
 * partitions of space (dbscan_partitioned.c).
 */
#ifndef GPUCLUST_DBSCAN_H
#define GPUCLUST_DBSCAN_H

#include "common/core.h"
#include "common/metric.h"		/* gc_dist2, gc_eps2: the one distance */

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* DBSCAN                                                              */
/* ------------------------------------------------------------------ */

/*
 * How DBSCAN forms the clusters of its core points; both give the same
 * labels.  Union-find runs on every device; CUDA-DClust (Böhm et al.'s
 * chains of seeds, expanded in parallel by blocks, merged through a
 * collision matrix) on the GPU only.
 */
typedef enum gc_dbscan_algorithm
{
	GC_DBSCAN_UNION_FIND = 0,
	GC_DBSCAN_DCLUST
} gc_dbscan_algorithm;

typedef struct gc_dbscan_params
{
	double		eps;			/* > 0, finite */
	int64_t		min_pts;		/* >= 1, the point itself counts */
	gc_metric	metric;			/* euclidean (0) or cosine (metric.h) */
	gc_dbscan_algorithm algorithm;	/* union-find (0) or dclust (GPU only) */
} gc_dbscan_params;

/*
 * labels[i]: cluster 0, 1, 2 ... numbered by lowest input position, or
 * GC_NOISE.  is_core[i]: 1 for core points.  Both n long, caller-allocated.
 */
gc_code		gc_dbscan_cpu(const gc_ctx *ctx, const float *X, int64_t n, int d,
						  const gc_dbscan_params *p, int32_t *labels,
						  uint8_t *is_core, gc_status *st);

/*
 * The checks (and messages) every DBSCAN path makes before it starts:
 * clears st, validates the parameters and, for n > 0, the arrays and the
 * cancel flags.
 */
gc_code		gc_dbscan_check(const gc_ctx *ctx, const float *X, int64_t n,
							int d, const gc_dbscan_params *p,
							const int32_t *labels, const uint8_t *is_core,
							gc_status *st);

/* The CPU DBSCAN's spatial indexes, one forced by tests and benchmarks. */
typedef enum gc_dbscan_index
{
	GC_DBSCAN_INDEX_AUTO = 0,	/* grid for d <= 3 when it fits, else kd-tree */
	GC_DBSCAN_INDEX_GRID,		/* d <= 3 only; falls back to the kd-tree when
								 * the grid's cell numbers would overflow */
	GC_DBSCAN_INDEX_KDTREE
} gc_dbscan_index;

/* gc_dbscan_cpu with a chosen index; *used (may be NULL) says which ran. */
gc_code		gc_dbscan_cpu_index(const gc_ctx *ctx, const float *X, int64_t n,
								int d, const gc_dbscan_params *p,
								gc_dbscan_index index, gc_dbscan_index *used,
								int32_t *labels, uint8_t *is_core,
								gc_status *st);

/* ---- algorithms and device choice (common/dispatch.c) ---- */

/*
 * The DBSCAN algorithms by name, as SQL spells them: "union_find" and
 * "dclust".  gc_parse_dbscan_algorithm is case-insensitive; false for any
 * other name (or NULL).
 */
const char *gc_dbscan_algorithm_name(gc_dbscan_algorithm algorithm);
bool		gc_parse_dbscan_algorithm(const char *s, gc_dbscan_algorithm *out);

/*
 * Where each DBSCAN algorithm may run, the one rule (dispatch.c): the
 * device a call of algorithm asks for when requested is asked, in *out.
 * Union-find runs on every device: requested itself.  Dclust runs only on
 * the GPU: 'gpu' and 'auto' ask for the GPU ('auto' too, whatever the
 * problem's size, since the call asked for the GPU algorithm; so without
 * a usable GPU it fails with the reason as 'gpu' does, and a failed GPU
 * run is never redone on the CPU), and 'cpu' is GC_EINVAL "DBSCAN
 * algorithm dclust runs only on the GPU" (*out is then the CPU).
 */
gc_code		gc_dbscan_device_request(gc_device requested,
									 gc_dbscan_algorithm algorithm,
									 gc_device *out, gc_status *st);

/*
 * The device of one DBSCAN call of algorithm on n rows of d features:
 * first gc_dbscan_device_request, then CPU: always.  GPU: the GPU, or
 * GC_EDEVICE / GC_ENOMEM with the reason.  AUTO (union-find only): the CPU
 * when the GPU would not win (no CUDA touched), when no GPU is usable or
 * its free memory is too small; else the GPU (dispatch.c says what was
 * measured).  gc_choose_device(GC_ALGO_DBSCAN) is this for union-find.
 */
gc_code		gc_choose_device_dbscan(gc_device requested,
									gc_dbscan_algorithm algorithm,
									int64_t n, int d, const gc_gpu *gpu,
									gc_device *chosen, gc_status *st);

/*
 * The rows from which a DBSCAN call of d features may split over several
 * GPUs, given those of a k-means call (the GPU worker's
 * gpuclust.gpu_worker_split_rows); dispatch.c says what was measured.
 */
int64_t		gc_dbscan_split_rows(int64_t split_rows, int d);

/* ---- DBSCAN over partitions ---- */

/*
 * DBSCAN over partitions of space (dbscan_partitioned.c), the pieces of a
 * distributed run (gpu_dbscan_distributed) with no PostgreSQL in them.
 *
 * The rows are cut into P slabs along one dimension ("dim").  Slab i holds
 * the rows whose coordinate x (the float32 feature, compared as a double)
 * has cuts[i-1] <= x < cuts[i] (cuts[-1] = -inf, cuts[P-1] = +inf): its
 * home rows.  It is clustered on its own, with a halo: every row with
 * cuts[i-1] - halo <= x < cuts[i] + halo, halo = gc_dbscan_halo(eps), the
 * width of TWO neighbourhoods.  The local run is the single-node DBSCAN
 * (any device) over those rows in id order.  Then, for the partition's
 * box B (its slab) and a row's "local" flags (counted over the rows the
 * partition holds, so never above the true count):
 *  - a row within one eps of B has every neighbour within 2 eps of B, all
 *    of them present: its core flag is exact, and so is every home row's;
 *  - a row marked core locally is core (a count only grows);
 *  - two neighbouring core rows of which one is home: the other lies
 *    within eps of B, both flags exact, so the partition of the home one
 *    links them;
 *  - a home border row: its core neighbours lie within eps of B, exact, all
 *    present, so its nearest (ties to the lowest id, as the single node's
 *    lowest position over a source in id order) is the single node's.
 * So a local cluster is part of one true cluster, and the true clusters
 * are the local clusters joined wherever one row is core in two partitions
 * (a union-find over (partition, local cluster) on the coordinator, keyed
 * by the row's (id, home partition)).  Numbering by each cluster's lowest
 * id of a member, core or border, gives gc_dbscan_cpu's labels and core
 * flags over the rows in id order, bit for bit (ids unique).
 *
 * Shared by the SQL building blocks (dbscan_partitioned_agg.c), the
 * driver (dbscan_partitioned_driver.c) and the unit test
 * (test_dbscan_partitioned.c), which runs the whole pipeline against
 * gc_dbscan_cpu.
 */
/* The most partitions of one run. */
#define GC_DBP_MAX_PARTS 65536

/* The most histogram bins of a plan. */
#define GC_DBP_MAX_BINS (1 << 20)

/* row_comp of a home row whose features are NULL (no cluster, no flag). */
#define GC_DBP_NO_FEATURES (-2)

/*
 * The halo, as a double: 2 gc_l2_axis_bound(gc_eps2(eps)) (metric.h), twice
 * a bound on |x_j - y_j| for any two neighbours, with a margin that also
 * covers the one rounding of the double difference x - cut in
 * gc_dbscan_span.  +inf when gc_eps2(eps) is +inf.  Euclidean only.
 */
double		gc_dbscan_halo(double eps);

/* The slabs of a run. */
typedef struct gc_dbscan_plan
{
	int			d;				/* features of every row */
	int			dim;			/* the split dimension, 0-based, < d */
	int			parts;			/* P, 1 .. GC_DBP_MAX_PARTS */
	double		halo;			/* gc_dbscan_halo(eps), >= 0, may be +inf */
	const double *cuts;			/* P - 1 finite values, strictly increasing */
} gc_dbscan_plan;

/*
 * GC_EINVAL (with a message) unless p is as described above; the checks
 * the SQL functions make on a plan given to them.
 */
gc_code		gc_dbscan_plan_check(const gc_dbscan_plan *p, gc_status *st);

/*
 * The partitions of a row whose split coordinate is x (finite): *home, and
 * the range *first .. *last of those that hold it (home or halo; always
 * contains *home).  The row is "shared" when *first < *last.  In doubles:
 * partition i holds x when x - cuts[i-1] >= -halo and x - cuts[i] < halo;
 * it is x's home when x >= cuts[i-1] and x < cuts[i].
 *
 * Three binary searches.  x - cuts[i] is rounded once in double, and
 * rounding is monotone, so as i grows the rounded difference never grows:
 * "x - cuts[i-1] >= -halo" holds for a prefix of the partitions and
 * "x - cuts[i] < halo" for a suffix, and home satisfies both.  (x is
 * finite and the cuts are, so no difference is NaN; cuts[-1] and cuts[P-1]
 * are infinite only by convention and never read.)
 *
 * Host and device (hostdevice.h): a split GPU call (cuda/dbscan/
 * dbscan_multi.cu) places its rows with it.
 */
GC_HD void
gc_dbscan_span(const gc_dbscan_plan *p, float x, int32_t *home,
			   int32_t *first, int32_t *last)
{
	const double *cuts = p->cuts;
	const double v = x;
	const double halo = p->halo;
	int32_t		lo,
				hi;

	/* home: the number of cuts <= v */
	lo = 0;
	hi = p->parts - 1;
	while (lo < hi)
	{
		int32_t		mid = lo + (hi - lo) / 2;

		if (v >= cuts[mid])
			lo = mid + 1;
		else
			hi = mid;
	}
	*home = lo;

	/* first: the lowest i <= home with v - cuts[i] < halo */
	lo = 0;
	hi = *home;
	while (lo < hi)
	{
		int32_t		mid = lo + (hi - lo) / 2;

		if (v - cuts[mid] < halo)
			hi = mid;
		else
			lo = mid + 1;
	}
	*first = lo;

	/* last: the highest i >= home with v - cuts[i-1] >= -halo */
	lo = *home;
	hi = p->parts - 1;
	while (lo < hi)
	{
		int32_t		mid = lo + (hi - lo + 1) / 2;

		if (v - cuts[mid - 1] >= -halo)
			lo = mid;
		else
			hi = mid - 1;
	}
	*last = lo;
}


/*
 * Histogram bin of x among bins of equal width over [lo, hi] (lo <= hi,
 * finite): 0 .. bins - 1, x outside clamped; every x in bin 0 when lo ==
 * hi.  The one definition the histogram aggregate and gc_dbscan_cuts use.
 */
int			gc_dbscan_bin(double x, double lo, double hi, int bins);

/*
 * Up to parts - 1 cuts from the histogram counts[bins] over [lo, hi]: cut j
 * is the lower edge of the first bin at which the running count reaches
 * j * total / parts, so the slabs hold about equal counts; repeated edges
 * are dropped.  Returns the number of partitions (1 .. parts; 1 when lo ==
 * hi or total is 0); cuts needs room for parts - 1.
 */
int			gc_dbscan_cuts(const double *counts, int bins, double lo,
						   double hi, int parts, double *cuts);

/*
 * An upper bound on the rows the partitions of cuts[parts - 1] hold
 * together, home and halo, from the histogram counts[bins] over [lo, hi]:
 * each partition counts every bin that meets [cuts[i-1] - halo, cuts[i] +
 * halo].  The driver's default partitions keep it within 1.5 n.  +inf when
 * out of memory.
 */
double		gc_dbscan_held(const double *counts, int bins, double lo, double hi,
						   const double *cuts, int parts, double halo);

/*
 * The largest split dimension: the one of widest hi - lo (ties to the
 * lowest index), over d bounds.
 */
int			gc_dbscan_split_dim(const double *lo, const double *hi, int d);

/* ------------------------------------------------------------------ */
/* One partition's result: the summary                                  */
/* ------------------------------------------------------------------ */

/*
 * A partition's summary, one flat byte string in the host's byte order
 * (its header names the layout, checked when read back): views into it.
 *  - comps local clusters, numbered as the local run numbered them;
 *    comp_min[c] is the lowest id of a home member (core or border), or
 *    INT64_MAX when none is home;
 *  - rows home rows, in id order, those with NULL features last:
 *    row_comp the local cluster, GC_NOISE, or GC_DBP_NO_FEATURES;
 *    row_core 1 for core rows (exact);
 *  - links: the rows marked core locally that are held elsewhere too (halo
 *    rows, and shared home rows), keyed by (link_id, link_home), with
 *    their local cluster link_comp.
 */
typedef struct gc_dbscan_summary
{
	int32_t		part;
	int32_t		comps;
	int64_t		rows;
	int64_t		links;
	int64_t    *comp_min;
	int64_t    *row_id;
	int32_t    *row_comp;
	uint8_t    *row_core;
	int64_t    *link_id;
	int32_t    *link_home;
	int32_t    *link_comp;
} gc_dbscan_summary;

/*
 * The local run's input and output, in id order: n rows with features,
 * ids strictly increasing, home[i] the row's home partition (part: a home
 * row), shared[i] 1 when the row is held by more than one partition;
 * labels / is_core as gc_dbscan_cpu returned them for these rows in this
 * order.  nf home rows with NULL features (ids nf_ids, any order).
 */
typedef struct gc_dbscan_local
{
	int32_t		part;
	int64_t		n;
	const int64_t *ids;
	const int32_t *home;
	const uint8_t *shared;
	const int32_t *labels;
	const uint8_t *is_core;
	int64_t		nf;
	const int64_t *nf_ids;
} gc_dbscan_local;

/*
 * The sizes of loc's summary: *bytes for gc_dbscan_summarize's buffer.
 * GC_EINVAL when loc is inconsistent (a label out of range, an id not
 * above the previous one: "id 7 appears twice in partition 3" / "ids
 * out of order"), GC_ENOMEM beyond SIZE_MAX / 2.
 */
gc_code		gc_dbscan_summary_bytes(const gc_dbscan_local *loc, size_t *bytes,
									gc_status *st);

/* Writes loc's summary into buf (*bytes from gc_dbscan_summary_bytes). */
void		gc_dbscan_summarize(const gc_dbscan_local *loc, void *buf);

/*
 * Views s into the summary buf of len bytes (not copied: buf must live as
 * long as s is used; aligned to 8).  GC_EINVAL "malformed partition
 * summary: ..." when the header, the sizes or any value does not hold
 * (a row_comp or link_comp out of range, rows not in id order, ...).
 */
gc_code		gc_dbscan_summary_read(const void *buf, size_t len,
								   gc_dbscan_summary *s, gc_status *st);

/* ------------------------------------------------------------------ */
/* The merge, on the coordinator                                       */
/* ------------------------------------------------------------------ */

typedef struct gc_dbscan_merge gc_dbscan_merge;

/* A merge for partitions 0 .. parts - 1; NULL when out of memory. */
gc_dbscan_merge *gc_dbscan_merge_new(int32_t parts);

/*
 * Takes in one partition's clusters and links (copied; its rows are the
 * caller's to keep).  GC_EINVAL when s.part is out of range or came
 * before, or a link names a home partition out of range; GC_ENOMEM.
 */
gc_code		gc_dbscan_merge_add(gc_dbscan_merge *m, const gc_dbscan_summary *s,
								gc_status *st);

/*
 * Joins the clusters that share a core row, and numbers the joined ones
 * 0, 1, 2 ... by their lowest home member's id (ties: the lowest
 * partition, then local cluster).  Polls ctx's cancel flag (GC_ECANCEL);
 * GC_ENOMEM.  Call once, after every add.
 */
gc_code		gc_dbscan_merge_finish(const gc_ctx *ctx, gc_dbscan_merge *m,
								   gc_status *st);

/* Number of clusters after gc_dbscan_merge_finish. */
int32_t		gc_dbscan_merge_clusters(const gc_dbscan_merge *m);

/*
 * The final label of local cluster comp of partition part (a row_comp of
 * its summary): GC_NOISE and GC_DBP_NO_FEATURES map to themselves.
 */
int32_t		gc_dbscan_merge_label(const gc_dbscan_merge *m, int32_t part,
								  int32_t comp);

void		gc_dbscan_merge_free(gc_dbscan_merge *m);


#ifdef __cplusplus
}
#endif

#endif							/* GPUCLUST_DBSCAN_H */
