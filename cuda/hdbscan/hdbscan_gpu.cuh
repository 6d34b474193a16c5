/*
 * hdbscan_gpu.cuh — what the GPU HDBSCAN's files share (internal to cuda/):
 * the error plumbing, the phase timings, the double distance of a lane's
 * query row to a row and to a box, the mutual-reachability weight, and the
 * phases each file provides:
 *   hdbscan.cu          the entry points: upload, the phases, the sort of
 *                       the edges, the download, the memory bound;
 *   hdbscan_core.cu     the core distances: an exact k-nearest-neighbour
 *                       search in double on the kd-tree;
 *   hdbscan_boruvka.cu  the minimum spanning tree: Borůvka's rounds on the
 *                       kd-tree;
 *   hdbscan_linkage.cu  the single-linkage tree of its edges;
 *   hdbscan_condense.cu the condensed tree, the labels.
 * The tree is common/kdtree.cuh's; positions are its order of the rows, and
 * every edge is reported by input rows.
 *
 * Every weight is computed as the CPU computes it (hdbscan.h): s =
 * gc_dist2_f64 (metric.h: each difference of the widened floats, its
 * square and the sum rounded on their own, in dimension order; the build's
 * -fmad=false and the _rn steps keep them apart), the distance
 * gc_hdbscan_dist(metric, s) (IEEE sqrt, or / 2), divided by alpha (IEEE
 * division), and the maximum with the two core distances.
 */
#ifndef GPUCLUST_HDBSCAN_GPU_CUH
#define GPUCLUST_HDBSCAN_GPU_CUH

#include <stdint.h>

#include <cuda_runtime.h>

#include "common/check.cuh"
#include "common/gpu.h"
#include "common/kdtree.cuh"
#include "common/launch.cuh"
#include "common/metric.h"
#include "hdbscan/hdbscan.h"

#pragma GCC visibility push(hidden)

#define HB_THREADS 256			/* simple kernels */
#define HB_T 128				/* search kernels: 4 warps of queries */
#define HB_STACK 32				/* > depth + 1: depth <= 27 (n < 2^31, leaves of 8+) */
#define HB_MAX_DEPTH 30
#define HB_STOP_EVERY 32		/* leaves a walk opens between reads of the stop flag */

#define HB_WHO "GPU HDBSCAN"
#define HB_CK(expr) GC_CUDA_CK(HB_WHO, expr)
#define HB_ALLOC(p, count) HB_CK(D.alloc((p), (count)))

/* The phases of the current (or last) call of this thread (hdbscan.cu). */
extern thread_local gc_hdbscan_gpu_phases hb_phases;

/*
 * GPUCLUST_HB_TRACE=1: each round's figures on stderr (hdbscan.cu); what
 * the benchmark reads to count rounds, nodes and distances.
 */
bool		hb_tracing(void);
void		hb_trace(const char *fmt,...) __attribute__((format(printf, 1, 2)));

/*
 * Wait for the stream, polling the cancel flags (check.cuh's gc_sync_poll:
 * a cancel stops the walks that read D's stop flag).
 */
static inline gc_code
hb_sync_poll(gc_dev &D, const gc_ctx *ctx, gc_status *st)
{
	return gc_sync_poll(D, ctx, HB_WHO, st);
}

/*
 * count counters at dev (device memory) into host once D's stream is done
 * (hb_sync_poll: a cancel is GC_ECANCEL); GC_EDEVICE, "internal error in
 * <what>", when host[err] is not 0: the error flags of a phase's kernels,
 * which only a malformed input could raise (hdbscan.cu).
 */
gc_code		hb_read_counts(gc_dev &D, const gc_ctx *ctx, const unsigned *dev,
						   unsigned *host, int count, int err, const char *what,
						   gc_status *st);

/* non-negative doubles order as their bits do */
__device__ __forceinline__ unsigned long long
hb_bits(double w)
{
	return (unsigned long long) __double_as_longlong(w);
}

__device__ __forceinline__ double
hb_dbl(unsigned long long u)
{
	return __longlong_as_double((long long) u);
}

#define HB_INF_BITS 0x7ff0000000000000ULL	/* +inf: no edge yet */
#define HB_NO_PAIR (~0ULL)

/* The pair of rows r and s as (a << 32 | b), a < b: the edges' tie order. */
__device__ __forceinline__ unsigned long long
hb_pair(int r, int s)
{
	unsigned	a = (unsigned) (r < s ? r : s),
				b = (unsigned) (r < s ? s : r);

	return ((unsigned long long) a << 32) | b;
}

/* The weight of the edge of squared distance s between cores ci and cj. */
__device__ __forceinline__ double
hb_weight(gc_metric metric, double alpha, double ci, double cj, double s)
{
	double		w = gc_hdbscan_dist(metric, s) / alpha,
				c = ci > cj ? ci : cj;

	return c > w ? c : w;
}

/*
 * The least of g and the gaps from x, in its box [lo, hi], to the box's two
 * faces along one dimension, each the rounded difference of the widened
 * floats as gc_l2_step_f64 forms it (so never above the difference to a
 * row beyond that face).
 */
__device__ __forceinline__ double
hb_out_step(double g, float x, float lo, float hi)
{
	const double a = __dsub_rn((double) x, (double) lo),
				b = __dsub_rn((double) hi, (double) x),
				m = a < b ? a : b;

	return m < g ? m : g;
}

/*
 * A lane's query row: in registers for d <= DQ (4, 8 or 16), else read from
 * the tree's rows (DQ 0).  dist2 is gc_dist2_f64 bit for bit; box2 is the
 * exact lower bound of gc_dist2_f64 from the row to any row of a float box
 * [lo, hi]: per dimension the gap (lo - x, x - hi or 0) formed from the
 * widened floats by gc_l2_step_f64's operations, squared and summed in
 * dimension order.  Rounding is monotone, so each gap is at most the
 * rounded difference to any row in the box, and the sum at most the
 * distance: metric.h's gc_box_mindist2_f64, a step at a time
 * (gc_box_step_f64).  out2, for a row inside the box, is the square of its
 * least gap to a face (hb_out_step): no more than gc_dist2_f64 to any row
 * the box's planes separate from it, since that sum holds the rounded
 * square of a difference at least that gap.
 */
template <int DQ>
struct hb_query
{
	float		x[DQ];
	int			d;

	__device__ __forceinline__ hb_query(const float *__restrict__ q, int dd)
	{
		d = dd;
#pragma unroll
		for (int j = 0; j < DQ; j++)
			x[j] = j < d ? q[j] : 0.0f;
	}

	__device__ __forceinline__ double dist2(const float *__restrict__ p) const
	{
		double		s = 0.0;

#pragma unroll
		for (int j = 0; j < DQ; j++)
			if (j < d)
				s = gc_l2_step_f64(s, (double) x[j], (double) p[j]);
		return s;
	}

	__device__ __forceinline__ double box2(const float *__restrict__ lo,
										   const float *__restrict__ hi) const
	{
		double		s = 0.0;

#pragma unroll
		for (int j = 0; j < DQ; j++)
			if (j < d)
				s = gc_box_step_f64(s, x[j], lo[j], hi[j]);
		return s;
	}

	__device__ __forceinline__ double out2(const float *__restrict__ lo,
										   const float *__restrict__ hi) const
	{
		double		g = INFINITY;

#pragma unroll
		for (int j = 0; j < DQ; j++)
			if (j < d)
				g = hb_out_step(g, x[j], lo[j], hi[j]);
		return __dmul_rn(g, g);
	}
};

template <>
struct hb_query<0>
{
	const float *x;
	int			d;

	__device__ __forceinline__ hb_query(const float *__restrict__ q, int dd)
	{
		x = q;
		d = dd;
	}

	__device__ __forceinline__ double dist2(const float *__restrict__ p) const
	{
		return gc_dist2_f64(x, p, d);
	}

	__device__ __forceinline__ double box2(const float *__restrict__ lo,
										   const float *__restrict__ hi) const
	{
		double		s = 0.0;

		for (int j = 0; j < d; j++)
			s = gc_box_step_f64(s, x[j], lo[j], hi[j]);
		return s;
	}

	__device__ __forceinline__ double out2(const float *__restrict__ lo,
										   const float *__restrict__ hi) const
	{
		double		g = INFINITY;

		for (int j = 0; j < d; j++)
			g = hb_out_step(g, x[j], lo[j], hi[j]);
		return __dmul_rn(g, g);
	}
};

/*
 * A warp's walk: node a's and b's children pushed on the warp's stack, the
 * one nearer to most of the lanes that need their parent (near_a: a is
 * nearer to this lane) last, so popped first.  Every lane calls it.
 */
__device__ __forceinline__ void
hb_push_children(int *stack, int &sp, int a, int b, bool near_a, bool need)
{
	const unsigned FULL = 0xffffffffu;
	const int	votes = __popc(__ballot_sync(FULL, near_a && need)),
				voters = __popc(__ballot_sync(FULL, need));

	if (2 * votes >= voters)
	{
		stack[sp++] = b;
		stack[sp++] = a;
	}
	else
	{
		stack[sp++] = a;
		stack[sp++] = b;
	}
}

/*
 * The least points of a leaf of the tree (common/kdtree.cuh) for d: 8 up
 * to HB_LEAF_MAX_D dimensions, where a warp's 32 queries, walking as one,
 * otherwise scan many rows none of them needs; the shared 32 above.
 */
#define HB_LEAF_MAX_D 16

static inline int
hb_leaf(int d)
{
	return d <= HB_LEAF_MAX_D ? 8 : GC_KDTREE_LEAF;
}

/* The query path for d: its registers (4, 8, 16) or memory (0). */
static inline int
hb_dq(int d)
{
	return d <= 4 ? 4 : d <= 8 ? 8 : d <= 16 ? 16 : 0;
}

/*
 * Borůvka's first seeds, from the core distances' search: each position's
 * k + 1 nearest positions (itself among them unless more than k + 1 rows
 * share its point; -1 where fewer rows exist), element j of position p at
 * nbr[j n + p], and tight[p]: whether every row outside them lies farther
 * than p's core distance (the (k + 1)-th's distance exceeds the k-th's),
 * so that the rows within it are all in the list.  Kept for 2 <= k <
 * HB_SEED_K1 (nbr NULL otherwise); k1 = k + 1.
 */
#define HB_SEED_K1 16

struct hb_seeds
{
	int		   *nbr = nullptr;
	uint8_t    *tight = nullptr;
	int			k1 = 0;
};

/*
 * Phase 1 (hdbscan_core.cu): core[p] for every position p of T, the
 * distance to its k-th nearest row (itself counted), in double, queued on
 * D's stream and not waited for (min_samples 1: every core distance 0,
 * waited for): the next wait polls the cancel flags while the walks run,
 * and a cancel stops them.  *Sd: the seeds, allocated on D.
 */
gc_code		hb_core(gc_dev &D, const gc_ctx *ctx, const gc_kdtree &T, int64_t k,
					gc_metric metric, double *core, hb_seeds *Sd, gc_status *st);

/* The bytes hb_core allocates for n rows at k: heaps and seeds (an upper bound). */
size_t		hb_core_bytes(int64_t n, int64_t k);

/*
 * Phase 2 (hdbscan_boruvka.cu): the n - 1 edges of the minimum spanning
 * tree of the mutual-reachability graph over T with core (by position),
 * unsorted: ew[e] the weight's bits, eab[e] the pair of rows (hb_pair).
 * *rounds: Borůvka's rounds.
 */
gc_code		hb_boruvka(gc_dev &D, const gc_ctx *ctx, const gc_kdtree &T,
					   const double *core, const hb_seeds &Sd, double alpha,
					   gc_metric metric,
					   unsigned long long *ew, unsigned long long *eab,
					   int *rounds, gc_status *st);

/* The bytes hb_boruvka allocates for n rows (an upper bound; not the edges). */
size_t		hb_boruvka_bytes(int64_t n, int d);

/*
 * Phase 3's first step (hdbscan_linkage.cu): the single-linkage tree of
 * the n - 1 edges sorted by (w, a, b) (ew the weights' bits, eab the
 * pairs), into out (device, n - 1 nodes), bit for bit gc_hdbscan_linkage's.
 * With par (else NULL), each node's parent n + i (rows and nodes, 2n - 1;
 * the root's 0xffffffff) and side (0 left, 1 right) handed out, in D.
 * 2 <= n < 2^30.
 */
gc_code		hb_linkage(gc_dev &D, const gc_ctx *ctx, int n,
					   const unsigned long long *ew,
					   const unsigned long long *eab, gc_linkage_node *out,
					   unsigned **par, uint8_t **side, gc_status *st);

/* The bytes hb_linkage allocates for n rows (an upper bound; not out). */
size_t		hb_linkage_bytes(int64_t n);

/*
 * The condensed tree's clusters on the device: one block (in D) of the n
 * clusters' five arrays of gc_hdbscan_clusters, in its order: parent,
 * child (int64_t), birth, stab, death (double), n each.
 */
struct hb_clusters_dev
{
	int64_t		n;
	int64_t    *block;
};

/*
 * The condensed tree of the single-linkage tree (node, par and side as
 * hb_linkage hands them out; hdbscan_condense.cu) at min_cluster_size
 * mcs: each row's place into leave (device, n) and the clusters into out
 * (device), bit for bit gc_hdbscan_condense's.
 */
gc_code		hb_condense_dev(gc_dev &D, const gc_ctx *ctx, int n, int64_t mcs,
							const gc_linkage_node *node, const unsigned *par,
							const uint8_t *side, gc_hdbscan_place *leave,
							hb_clusters_dev *out, gc_status *st);


/*
 * The clusters C (hb_condense_dev's) down, the flat selection of p on
 * the host (gc_hdbscan_select), then each row's label, probability and
 * outlier score and the flat numbers on the device from its place (leave:
 * device): res's arrays and clusters filled, bit for bit the CPU's.
 */
gc_code		hb_label(gc_dev &D, const gc_ctx *ctx, int n,
					 const gc_hdbscan_params *p,
					 const gc_hdbscan_place *leave, const hb_clusters_dev &C,
					 gc_hdbscan_result *res, gc_status *st);

/* The bytes hb_condense_dev and hb_label allocate (an upper bound). */
size_t		hb_condense_bytes(int64_t n, int64_t mcs);

#pragma GCC visibility pop

#endif							/* GPUCLUST_HDBSCAN_GPU_CUH */
