/*
 * dbscan_partitioned.c — DBSCAN over partitions of space: the slabs, the
 * partition summary and the merge (dbscan/dbscan.h says why the merged
 * labels are gc_dbscan_cpu's, bit for bit).
 *
 * The summary is a byte string that crosses a network between the node
 * that clustered a partition and the coordinator, so gc_dbscan_summary_read
 * trusts nothing in it: every count, offset and value is checked before a
 * view into it is handed out.  The merge is a union-find over the local
 * clusters of all partitions (nodes, in partition order), whose edges are
 * the link records that name the same row; the joined clusters are then
 * numbered by their lowest home member's id.
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dbscan/dbscan.h"
#include "common/radix_sort.h"
#include "common/union_find.h"

/* Poll the cancel flags once per this many items of a loop. */
#define POLL_MASK ((int64_t) 0xffff)

/* ------------------------------------------------------------------ */
/* The slabs                                                           */
/* ------------------------------------------------------------------ */

double
gc_dbscan_halo(double eps)
{
	float		eps2 = gc_eps2(eps);

	if (isinf(eps2))
		return INFINITY;
	return 2.0 * gc_l2_axis_bound(eps2);
}

gc_code
gc_dbscan_plan_check(const gc_dbscan_plan *p, gc_status *st)
{
	if (p == NULL)
		return gc_fail(st, GC_EINVAL, "partition plan missing");
	if (p->d < 1)
		return gc_fail(st, GC_EINVAL,
					   "partition plan: dimension must be at least 1, got %d",
					   p->d);
	if (p->dim < 0 || p->dim >= p->d)
		return gc_fail(st, GC_EINVAL,
					   "partition plan: split dimension %d is not among the %d dimensions (0-based)",
					   p->dim, p->d);
	if (p->parts < 1 || p->parts > GC_DBP_MAX_PARTS)
		return gc_fail(st, GC_EINVAL,
					   "partition plan: partitions must be between 1 and %d, got %d",
					   GC_DBP_MAX_PARTS, p->parts);
	if (!(p->halo >= 0.0))
		return gc_fail(st, GC_EINVAL,
					   "partition plan: halo must be non-negative, got %g",
					   p->halo);
	if (p->parts > 1 && p->cuts == NULL)
		return gc_fail(st, GC_EINVAL, "partition plan: cuts missing");
	for (int i = 0; i < p->parts - 1; i++)
	{
		if (!isfinite(p->cuts[i]))
			return gc_fail(st, GC_EINVAL,
						   "partition plan: cut %d is not finite", i + 1);
		if (i > 0 && !(p->cuts[i] > p->cuts[i - 1]))
			return gc_fail(st, GC_EINVAL,
						   "partition plan: cuts must be strictly increasing, but cut %d (%.17g) is not above cut %d (%.17g)",
						   i + 1, p->cuts[i], i, p->cuts[i - 1]);
	}
	return GC_OK;
}

/*
 * Written so that nothing is undefined for any input: a NaN position (x
 * or a range that overflows to infinity) lands in bin 0, never in a cast
 * of NaN to int.
 */
int
gc_dbscan_bin(double x, double lo, double hi, int bins)
{
	double		t;

	if (bins <= 1 || !(hi > lo))
		return 0;
	t = (x - lo) / (hi - lo) * bins;
	if (!(t > 0.0))
		return 0;
	if (t >= bins)
		return bins - 1;
	return (int) t;
}

/* A histogram count as the cuts use it: anything not a positive count is 0. */
static double
bin_count(double c)
{
	return c > 0.0 && isfinite(c) ? c : 0.0;
}

/*
 * The running count at bin b is the count of the bins below it, so that a
 * cut at b's lower edge leaves about j / parts of the rows below it.  A
 * cut is made only while some rows lie above it (run < total): no slab is
 * empty by the histogram, and the degenerate histograms (everything in one
 * bin) give one partition.  Each accepted edge is above the previous cut
 * (and above lo), so the cuts are strictly increasing; an edge that
 * reaches several quantiles at once is one cut.
 */
int
gc_dbscan_cuts(const double *counts, int bins, double lo, double hi,
			   int parts, double *cuts)
{
	double		total = 0.0,
				run = 0.0,
				prev = lo;
	int			ncuts = 0,
				j = 1;

	if (parts > GC_DBP_MAX_PARTS)
		parts = GC_DBP_MAX_PARTS;
	if (parts <= 1 || bins < 2 || counts == NULL ||
		!isfinite(lo) || !isfinite(hi) || !(hi > lo))
		return 1;
	for (int b = 0; b < bins; b++)
		total += bin_count(counts[b]);
	if (!(total > 0.0) || !isfinite(total))
		return 1;

	for (int b = 1; b < bins && j < parts; b++)
	{
		double		edge;

		run += bin_count(counts[b - 1]);
		if (run < (double) j * total / parts)
			continue;
		if (run >= total)
			break;
		edge = lo + (hi - lo) * ((double) b / bins);
		if (isfinite(edge) && edge > prev)
		{
			cuts[ncuts++] = edge;
			prev = edge;
		}
		while (j < parts && run >= (double) j * total / parts)
			j++;
	}
	return ncuts + 1;
}

double
gc_dbscan_held(const double *counts, int bins, double lo, double hi,
			   const double *cuts, int parts, double halo)
{
	double	   *below = malloc(sizeof(double) * ((size_t) bins + 1));
	double		held = 0.0;

	if (below == NULL)
		return INFINITY;
	below[0] = 0.0;
	for (int b = 0; b < bins; b++)
		below[b + 1] = below[b] + bin_count(counts[b]);
	for (int i = 0; i < parts; i++)
	{
		int			first = i == 0 ? 0 : gc_dbscan_bin(cuts[i - 1] - halo, lo, hi, bins);
		int			last = i == parts - 1 ? bins - 1 :
			gc_dbscan_bin(cuts[i] + halo, lo, hi, bins);

		held += below[last + 1] - below[first];
	}
	free(below);
	return held;
}

int
gc_dbscan_split_dim(const double *lo, const double *hi, int d)
{
	int			best = 0;
	double		width = -INFINITY;

	for (int j = 0; j < d; j++)
	{
		double		w = hi[j] - lo[j];

		if (w > width)
		{
			width = w;
			best = j;
		}
	}
	return best;
}

/* ------------------------------------------------------------------ */
/* The summary                                                         */
/* ------------------------------------------------------------------ */

/*
 * The layout, in the host's byte order: this header, then comp_min
 * int64[comps], row_id int64[rows], link_id int64[links], row_comp
 * int32[rows], link_home int32[links], link_comp int32[links], row_core
 * uint8[rows], each array starting at a multiple of 8 bytes (padded with
 * zeros).  The version is a 32-bit integer, so a summary written in the
 * other byte order reads as another version and is refused.
 */
#define SUMMARY_MAGIC "GCDP"
#define SUMMARY_VERSION 1

typedef struct summary_header
{
	char		magic[4];
	uint32_t	version;
	int32_t		part;
	int32_t		comps;
	int64_t		rows;
	int64_t		links;
} summary_header;

_Static_assert(sizeof(summary_header) == 32, "summary header is 32 bytes");

/* Byte offsets of the arrays, and the whole length. */
typedef struct summary_layout
{
	size_t		comp_min,
				row_id,
				link_id,
				row_comp,
				link_home,
				link_comp,
				row_core,
				bytes;
} summary_layout;

/* The most entries of any one array: keeps every sum below 2^62. */
#define SUMMARY_MAX_COUNT ((int64_t) 1 << 56)

static uint64_t
align8(uint64_t x)
{
	return (x + 7) & ~(uint64_t) 7;
}

/*
 * The layout of a summary of these counts; false when a count is
 * negative or the length would pass SIZE_MAX / 2.  The one definition the
 * writer and the reader share.
 */
static bool
summary_layout_of(int64_t comps, int64_t rows, int64_t links,
				  summary_layout *l)
{
	uint64_t	off = sizeof(summary_header);

	if (comps < 0 || rows < 0 || links < 0 ||
		comps > SUMMARY_MAX_COUNT || rows > SUMMARY_MAX_COUNT ||
		links > SUMMARY_MAX_COUNT)
		return false;
	l->comp_min = off;
	off += 8 * (uint64_t) comps;
	l->row_id = off;
	off += 8 * (uint64_t) rows;
	l->link_id = off;
	off += 8 * (uint64_t) links;
	l->row_comp = off;
	off += align8(4 * (uint64_t) rows);
	l->link_home = off;
	off += align8(4 * (uint64_t) links);
	l->link_comp = off;
	off += align8(4 * (uint64_t) links);
	l->row_core = off;
	off += align8((uint64_t) rows);
	if (off > SIZE_MAX / 2)
		return false;
	l->bytes = off;
	return true;
}

/* A row of loc that is also a link: core here and held elsewhere too. */
static bool
local_is_link(const gc_dbscan_local *loc, int64_t i)
{
	return loc->is_core[i] && (loc->home[i] != loc->part || loc->shared[i]);
}

/* The counts of loc's summary (loc checked). */
static void
local_counts(const gc_dbscan_local *loc, int32_t *comps, int64_t *rows,
			 int64_t *links)
{
	int32_t		maxlabel = -1;

	*rows = loc->nf;
	*links = 0;
	for (int64_t i = 0; i < loc->n; i++)
	{
		if (loc->labels[i] > maxlabel)
			maxlabel = loc->labels[i];
		if (loc->home[i] == loc->part)
			(*rows)++;
		if (local_is_link(loc, i))
			(*links)++;
	}
	*comps = maxlabel + 1;
}

gc_code
gc_dbscan_summary_bytes(const gc_dbscan_local *loc, size_t *bytes,
						gc_status *st)
{
	int32_t		comps;
	int64_t		rows,
				links;
	summary_layout l;

	*bytes = 0;
	if (loc == NULL)
		return gc_fail(st, GC_EINVAL, "partition input missing");
	if (loc->part < 0 || loc->part >= GC_DBP_MAX_PARTS)
		return gc_fail(st, GC_EINVAL, "partition %d out of range 0 .. %d",
					   loc->part, GC_DBP_MAX_PARTS - 1);
	if (loc->n < 0 || loc->nf < 0)
		return gc_fail(st, GC_EINVAL,
					   "partition %d: row counts must not be negative",
					   loc->part);
	if ((loc->n > 0 && (loc->ids == NULL || loc->home == NULL ||
						loc->shared == NULL || loc->labels == NULL ||
						loc->is_core == NULL)) ||
		(loc->nf > 0 && loc->nf_ids == NULL))
		return gc_fail(st, GC_EINVAL, "partition %d: input arrays missing",
					   loc->part);

	for (int64_t i = 0; i < loc->n; i++)
	{
		long long	id = (long long) loc->ids[i];

		if (i > 0 && loc->ids[i] == loc->ids[i - 1])
			return gc_fail(st, GC_EINVAL, "id %lld appears twice in partition %d",
						   id, loc->part);
		if (i > 0 && loc->ids[i] < loc->ids[i - 1])
			return gc_fail(st, GC_EINVAL,
						   "ids out of order in partition %d: %lld after %lld",
						   loc->part, id, (long long) loc->ids[i - 1]);
		if (loc->home[i] < 0 || loc->home[i] >= GC_DBP_MAX_PARTS)
			return gc_fail(st, GC_EINVAL,
						   "partition %d: id %lld has home partition %d, out of range",
						   loc->part, id, loc->home[i]);
		if (loc->shared[i] > 1 || loc->is_core[i] > 1)
			return gc_fail(st, GC_EINVAL,
						   "partition %d: id %lld has a shared or core flag that is not 0 or 1",
						   loc->part, id);
		if (loc->home[i] != loc->part && !loc->shared[i])
			return gc_fail(st, GC_EINVAL,
						   "partition %d holds id %lld of partition %d, which is not marked shared",
						   loc->part, id, loc->home[i]);
		if (loc->labels[i] < GC_NOISE || loc->labels[i] == INT32_MAX)
			return gc_fail(st, GC_EINVAL,
						   "partition %d: id %lld has label %d, out of range",
						   loc->part, id, loc->labels[i]);
		if (loc->is_core[i] && loc->labels[i] == GC_NOISE)
			return gc_fail(st, GC_EINVAL,
						   "partition %d: id %lld is core but noise",
						   loc->part, id);
	}
	local_counts(loc, &comps, &rows, &links);
	if (!summary_layout_of(comps, rows, links, &l))
		return gc_fail(st, GC_ENOMEM,
					   "partition %d: its summary of %lld rows would be too large",
					   loc->part, (long long) rows);
	*bytes = l.bytes;
	return GC_OK;
}

void
gc_dbscan_summarize(const gc_dbscan_local *loc, void *buf)
{
	char	   *b = buf;
	summary_header h;
	summary_layout l;
	int64_t    *comp_min,
			   *row_id,
			   *link_id;
	int32_t    *row_comp,
			   *link_home,
			   *link_comp;
	uint8_t    *row_core;
	int64_t		r = 0,
				k = 0;

	memset(&h, 0, sizeof(h));
	memcpy(h.magic, SUMMARY_MAGIC, 4);
	h.version = SUMMARY_VERSION;
	h.part = loc->part;
	local_counts(loc, &h.comps, &h.rows, &h.links);
	summary_layout_of(h.comps, h.rows, h.links, &l);	/* checked by _bytes */

	/* zeros first: the padding is deterministic */
	memset(b, 0, l.bytes);
	memcpy(b, &h, sizeof(h));
	comp_min = (int64_t *) (b + l.comp_min);
	row_id = (int64_t *) (b + l.row_id);
	link_id = (int64_t *) (b + l.link_id);
	row_comp = (int32_t *) (b + l.row_comp);
	link_home = (int32_t *) (b + l.link_home);
	link_comp = (int32_t *) (b + l.link_comp);
	row_core = (uint8_t *) (b + l.row_core);

	for (int32_t c = 0; c < h.comps; c++)
		comp_min[c] = INT64_MAX;
	for (int64_t i = 0; i < loc->n; i++)
	{
		int32_t		c = loc->labels[i];

		if (loc->home[i] == loc->part)
		{
			row_id[r] = loc->ids[i];
			row_comp[r] = c;
			row_core[r] = loc->is_core[i];
			r++;
			if (c >= 0 && loc->ids[i] < comp_min[c])
				comp_min[c] = loc->ids[i];
		}
		if (local_is_link(loc, i))
		{
			link_id[k] = loc->ids[i];
			link_home[k] = loc->home[i];
			link_comp[k] = c;
			k++;
		}
	}
	for (int64_t i = 0; i < loc->nf; i++)
	{
		row_id[r] = loc->nf_ids[i];
		row_comp[r] = GC_DBP_NO_FEATURES;
		row_core[r] = 0;
		r++;
	}
}

#define MALFORMED(...) \
	gc_fail(st, GC_EINVAL, "malformed partition summary: " __VA_ARGS__)

/*
 * Every value is checked, so that the merge and the caller can index by
 * them without a second thought: the layout, the ranges, the order, and
 * comp_min against the rows it summarizes.
 */
gc_code
gc_dbscan_summary_read(const void *buf, size_t len, gc_dbscan_summary *s,
					   gc_status *st)
{
	const char *b = buf;
	summary_header h;
	summary_layout l;
	gc_dbscan_summary v;
	int64_t		featured = 0,
				with_min = 0,
				matched = 0;

	memset(s, 0, sizeof(*s));
	if (buf == NULL)
		return MALFORMED("no data");
	if ((uintptr_t) buf % 8 != 0)
		return MALFORMED("not aligned to 8 bytes in memory");
	if (len < sizeof(h))
		return MALFORMED("%zu bytes, shorter than its header", len);
	memcpy(&h, b, sizeof(h));
	if (memcmp(h.magic, SUMMARY_MAGIC, 4) != 0)
		return MALFORMED("bad magic");
	if (h.version != SUMMARY_VERSION)
		return MALFORMED("layout version %u, expected %d (or another byte order)",
						 h.version, SUMMARY_VERSION);
	if (h.part < 0 || h.part >= GC_DBP_MAX_PARTS)
		return MALFORMED("partition %d out of range", h.part);
	if (h.comps < 0 || h.rows < 0 || h.links < 0)
		return MALFORMED("a negative count");
	/* each entry takes at least 8 bytes: no count can pass len / 8 */
	if ((uint64_t) h.comps > len / 8 || (uint64_t) h.rows > len / 8 ||
		(uint64_t) h.links > len / 8 ||
		!summary_layout_of(h.comps, h.rows, h.links, &l))
		return MALFORMED("counts beyond its %zu bytes", len);
	if (l.bytes != len)
		return MALFORMED("%zu bytes, but its counts make %zu", len, l.bytes);

	v.part = h.part;
	v.comps = h.comps;
	v.rows = h.rows;
	v.links = h.links;
	v.comp_min = (int64_t *) (b + l.comp_min);
	v.row_id = (int64_t *) (b + l.row_id);
	v.link_id = (int64_t *) (b + l.link_id);
	v.row_comp = (int32_t *) (b + l.row_comp);
	v.link_home = (int32_t *) (b + l.link_home);
	v.link_comp = (int32_t *) (b + l.link_comp);
	v.row_core = (uint8_t *) (b + l.row_core);

	/* rows: those with features, in id order, then those without */
	while (featured < v.rows && v.row_comp[featured] != GC_DBP_NO_FEATURES)
		featured++;
	for (int64_t r = 0; r < v.rows; r++)
	{
		int32_t		c = v.row_comp[r];

		if (c < GC_DBP_NO_FEATURES || c >= v.comps)
			return MALFORMED("row %lld names cluster %d of %d",
							 (long long) r, c, v.comps);
		if (r >= featured)
		{
			if (c != GC_DBP_NO_FEATURES || v.row_core[r] != 0)
				return MALFORMED("row %lld with features after those without, or core without features",
								 (long long) r);
			continue;
		}
		if (r > 0 && v.row_id[r] <= v.row_id[r - 1])
			return MALFORMED("row ids not strictly increasing at row %lld",
							 (long long) r);
		if (v.row_core[r] > 1 || (v.row_core[r] == 1 && c == GC_NOISE))
			return MALFORMED("row %lld has core flag %d in cluster %d",
							 (long long) r, v.row_core[r], c);
		/* the rows of cluster c are at or above its minimum, one on it */
		if (c >= 0)
		{
			if (v.row_id[r] < v.comp_min[c])
				return MALFORMED("row id %lld below the lowest id of its cluster %d",
								 (long long) v.row_id[r], c);
			if (v.row_id[r] == v.comp_min[c] && v.row_id[r] != INT64_MAX)
				matched++;
		}
	}

	/*
	 * Each row that matched its cluster's minimum matched a different
	 * cluster (ids are unique), so as many matches as clusters with a
	 * minimum means every minimum is a row's.  (INT64_MAX means "no home
	 * member"; a row of that id proves nothing either way.)
	 */
	for (int32_t c = 0; c < v.comps; c++)
		if (v.comp_min[c] != INT64_MAX)
			with_min++;
	if (matched != with_min)
		return MALFORMED("a cluster's lowest id is none of its rows");

	for (int64_t k = 0; k < v.links; k++)
	{
		if (v.link_comp[k] < 0 || v.link_comp[k] >= v.comps ||
			v.link_home[k] < 0 || v.link_home[k] >= GC_DBP_MAX_PARTS)
			return MALFORMED("link %lld names cluster %d, home partition %d",
							 (long long) k, v.link_comp[k], v.link_home[k]);
		if (k > 0 && v.link_id[k] <= v.link_id[k - 1])
			return MALFORMED("link ids not strictly increasing at link %lld",
							 (long long) k);
	}
	*s = v;
	return GC_OK;
}

/* ------------------------------------------------------------------ */
/* The merge                                                           */
/* ------------------------------------------------------------------ */

typedef struct merge_link
{
	int64_t		id;
	int32_t		home;
	int32_t		part;			/* the partition that sent it */
	int32_t		comp;			/* its local cluster there */
} merge_link;

/*
 * Partitions arrive in any order, so nodes are numbered only when
 * finishing: partition by partition, cluster by cluster, which makes the
 * union-find's roots (its lowest node) and the tie rule of the numbering
 * independent of the arrival order.  A partition that never arrived
 * counts as one with no clusters and no links: one that held no rows at
 * all (slab and halo empty) sends nothing, since the aggregate that
 * computes a summary has no group for it.  So finishing does not insist
 * on every partition; the caller knows which it expected.
 */
struct gc_dbscan_merge
{
	int32_t		parts;
	int64_t		nodes;			/* local clusters of the partitions added */
	int32_t    *comps;			/* [parts]: -1 until the partition is added */
	int64_t   **comp_min;		/* [parts]: copies of the summaries' */
	int64_t    *offset;			/* [parts]: its first node (finish) */
	merge_link *links;
	int64_t		nlinks,
				cap;
	bool		finished;
	int32_t		clusters;
	int32_t    *label;			/* [nodes]: the final labels (finish) */
};

gc_dbscan_merge *
gc_dbscan_merge_new(int32_t parts)
{
	gc_dbscan_merge *m;

	if (parts < 1 || parts > GC_DBP_MAX_PARTS)
		return NULL;
	m = calloc(1, sizeof(*m));
	if (m == NULL)
		return NULL;
	m->parts = parts;
	m->comps = malloc(sizeof(int32_t) * (size_t) parts);
	m->comp_min = calloc((size_t) parts, sizeof(int64_t *));
	m->offset = calloc((size_t) parts, sizeof(int64_t));
	if (m->comps == NULL || m->comp_min == NULL || m->offset == NULL)
	{
		gc_dbscan_merge_free(m);
		return NULL;
	}
	for (int32_t p = 0; p < parts; p++)
		m->comps[p] = -1;
	return m;
}

void
gc_dbscan_merge_free(gc_dbscan_merge *m)
{
	if (m == NULL)
		return;
	if (m->comp_min != NULL)
		for (int32_t p = 0; p < m->parts; p++)
			free(m->comp_min[p]);
	free(m->comp_min);
	free(m->comps);
	free(m->offset);
	free(m->links);
	free(m->label);
	free(m);
}

/* Everything is checked before anything changes: a failed add leaves m as it was. */
gc_code
gc_dbscan_merge_add(gc_dbscan_merge *m, const gc_dbscan_summary *s,
					gc_status *st)
{
	int64_t    *cmin;

	if (m == NULL || s == NULL)
		return gc_fail(st, GC_EINVAL, "merge or partition summary missing");
	if (m->finished)
		return gc_fail(st, GC_EINVAL, "the merge is finished: no partition can be added");
	if (s->part < 0 || s->part >= m->parts)
		return gc_fail(st, GC_EINVAL,
					   "partition %d out of range 0 .. %d",
					   s->part, m->parts - 1);
	if (m->comps[s->part] >= 0)
		return gc_fail(st, GC_EINVAL, "partition %d sent its summary twice",
					   s->part);
	if (s->comps < 0 || s->links < 0 ||
		(s->comps > 0 && s->comp_min == NULL) ||
		(s->links > 0 && (s->link_id == NULL || s->link_home == NULL ||
						  s->link_comp == NULL)))
		return gc_fail(st, GC_EINVAL, "partition %d: summary inconsistent",
					   s->part);
	/* the nodes are numbered in int32 (so are the final labels) */
	if (s->comps > INT32_MAX - m->nodes)
		return gc_fail(st, GC_EINVAL,
					   "the partitions have more than %d clusters in all",
					   INT32_MAX);
	for (int64_t k = 0; k < s->links; k++)
		if (s->link_home[k] < 0 || s->link_home[k] >= m->parts ||
			s->link_comp[k] < 0 || s->link_comp[k] >= s->comps)
			return gc_fail(st, GC_EINVAL,
						   "partition %d: a link names cluster %d of home partition %d, out of range",
						   s->part, s->link_comp[k], s->link_home[k]);

	if (s->links > m->cap - m->nlinks)
	{
		int64_t		cap = m->cap > 0 ? m->cap : 1024;
		merge_link *grown;

		while (cap - m->nlinks < s->links)
		{
			if (cap > (int64_t) (SIZE_MAX / sizeof(merge_link) / 2))
				return gc_fail(st, GC_ENOMEM,
							   "out of memory for the merge's cluster links");
			cap *= 2;
		}
		grown = realloc(m->links, sizeof(merge_link) * (size_t) cap);
		if (grown == NULL)
			return gc_fail(st, GC_ENOMEM,
						   "out of memory for %lld cluster links of the merge",
						   (long long) cap);
		m->links = grown;
		m->cap = cap;
	}
	cmin = malloc(sizeof(int64_t) * (size_t) (s->comps > 0 ? s->comps : 1));
	if (cmin == NULL)
		return gc_fail(st, GC_ENOMEM,
					   "out of memory for the %d clusters of partition %d",
					   s->comps, s->part);
	if (s->comps > 0)
		memcpy(cmin, s->comp_min, sizeof(int64_t) * (size_t) s->comps);

	for (int64_t k = 0; k < s->links; k++)
	{
		merge_link *e = &m->links[m->nlinks + k];

		e->id = s->link_id[k];
		e->home = s->link_home[k];
		e->part = s->part;
		e->comp = s->link_comp[k];
	}
	m->nlinks += s->links;
	m->comp_min[s->part] = cmin;
	m->comps[s->part] = s->comps;
	m->nodes += s->comps;
	return GC_OK;
}

/* An int64 as a radix key of the same order. */
static uint64_t
key_of(int64_t v)
{
	return (uint64_t) v ^ ((uint64_t) 1 << 63);
}

static int64_t
link_node(const gc_dbscan_merge *m, const merge_link *e)
{
	return m->offset[e->part] + e->comp;
}

gc_code
gc_dbscan_merge_finish(const gc_ctx *ctx, gc_dbscan_merge *m, gc_status *st)
{
	int64_t		N,
				L,
				scratch,
				roots = 0;
	int64_t    *parent = NULL,
			   *minid = NULL,
			   *vals = NULL,
			   *tmpv = NULL;
	uint64_t   *keys = NULL,
			   *tmpk = NULL;
	int			team;
	bool		sorted,
				nomem;
	gc_code		rc = GC_OK;

	if (m == NULL)
		return gc_fail(st, GC_EINVAL, "merge missing");
	if (m->finished)
		return gc_fail(st, GC_EINVAL, "the merge is finished already");
	if (gc_cancelled(ctx))
		return gc_fail(st, GC_ECANCEL, "canceled");

	/* the nodes, in partition order */
	N = 0;
	for (int32_t p = 0; p < m->parts; p++)
	{
		m->offset[p] = N;
		N += m->comps[p] > 0 ? m->comps[p] : 0;
	}
	L = m->nlinks;
	scratch = (L > N ? L : N) + 1;
	parent = malloc(sizeof(int64_t) * (size_t) (N + 1));
	minid = malloc(sizeof(int64_t) * (size_t) (N + 1));
	m->label = malloc(sizeof(int32_t) * (size_t) (N + 1));
	keys = malloc(sizeof(uint64_t) * (size_t) scratch);
	tmpk = malloc(sizeof(uint64_t) * (size_t) scratch);
	vals = malloc(sizeof(int64_t) * (size_t) scratch);
	tmpv = malloc(sizeof(int64_t) * (size_t) scratch);
	if (parent == NULL || minid == NULL || m->label == NULL ||
		keys == NULL || tmpk == NULL || vals == NULL || tmpv == NULL)
	{
		rc = gc_fail(st, GC_ENOMEM,
					 "out of memory for the merge of %lld clusters and %lld links",
					 (long long) N, (long long) L);
		goto out;
	}
	/* threads only for large merges: a small one leaves the pool alone */
	team = scratch > POLL_MASK ? gc_team_adapt(ctx) : 1;
	for (int64_t i = 0; i < N; i++)
		parent[i] = i;

	/*
	 * The links in (id, home) order: a stable LSD sort by home, then by
	 * id.  (Ids are unique, so home only ever separates records of a
	 * corrupt run; it is part of the key all the same.)
	 */
	for (int64_t k = 0; k < L; k++)
	{
		keys[k] = (uint64_t) m->links[k].home;
		vals[k] = k;
	}
	sorted = gc_radix_sort_kv(keys, vals, L, 16, tmpk, tmpv, team, ctx,
							  &nomem);
	if (sorted)
	{
		for (int64_t k = 0; k < L; k++)
			keys[k] = key_of(m->links[vals[k]].id);
		sorted = gc_radix_sort_kv(keys, vals, L, 64, tmpk, tmpv, team, ctx,
								  &nomem);
	}
	if (!sorted)
	{
		rc = nomem ? gc_fail(st, GC_ENOMEM, "out of memory sorting the merge's links")
			: gc_fail(st, GC_ECANCEL, "canceled");
		goto out;
	}

	/* join the clusters of each run of records that name the same row */
	for (int64_t k = 1; k < L; k++)
	{
		const merge_link *a = &m->links[vals[k - 1]],
				   *b = &m->links[vals[k]];

		if ((k & POLL_MASK) == 0 && gc_cancelled(ctx))
			break;
		if (a->id == b->id && a->home == b->home)
			gc_uf_union(parent, link_node(m, a), link_node(m, b));
	}
	if (gc_cancelled(ctx))
	{
		rc = gc_fail(st, GC_ECANCEL, "canceled");
		goto out;
	}

	/* each root's lowest home member, over its nodes' */
	for (int64_t i = 0; i < N; i++)
		minid[i] = INT64_MAX;
	for (int32_t p = 0; p < m->parts; p++)
	{
		if (gc_cancelled(ctx))
		{
			rc = gc_fail(st, GC_ECANCEL, "canceled");
			goto out;
		}
		for (int32_t c = 0; c < m->comps[p]; c++)
		{
			int64_t		r = gc_uf_find(parent, m->offset[p] + c);
			int64_t		v = m->comp_min[p][c];

			if (v < minid[r])
				minid[r] = v;
		}
	}

	/*
	 * Number the roots by their lowest id; the roots are listed in node
	 * order and the sort is stable, so equal ids (only INT64_MAX, "no home
	 * member", can repeat) go by the lowest partition, then cluster.
	 */
	for (int64_t i = 0; i < N; i++)
		if (parent[i] == i)
		{
			keys[roots] = key_of(minid[i]);
			vals[roots] = i;
			roots++;
		}
	if (!gc_radix_sort_kv(keys, vals, roots, 64, tmpk, tmpv, team, ctx,
						  &nomem))
	{
		rc = nomem ? gc_fail(st, GC_ENOMEM, "out of memory numbering the merged clusters")
			: gc_fail(st, GC_ECANCEL, "canceled");
		goto out;
	}
	for (int64_t r = 0; r < roots; r++)
		m->label[vals[r]] = (int32_t) r;
	for (int64_t i = 0; i < N; i++)
	{
		if ((i & POLL_MASK) == 0 && gc_cancelled(ctx))
		{
			rc = gc_fail(st, GC_ECANCEL, "canceled");
			goto out;
		}
		m->label[i] = m->label[gc_uf_find(parent, i)];
	}
	m->clusters = (int32_t) roots;
	m->finished = true;

out:
	if (rc != GC_OK)
	{
		free(m->label);
		m->label = NULL;
	}
	free(parent);
	free(minid);
	free(keys);
	free(tmpk);
	free(vals);
	free(tmpv);
	return rc;
}

int32_t
gc_dbscan_merge_clusters(const gc_dbscan_merge *m)
{
	return m != NULL && m->finished ? m->clusters : 0;
}

/*
 * A (part, comp) that no summary added names no cluster: GC_NOISE, so that
 * a caller's slip never reads out of bounds (a validated summary's
 * row_comp of an added partition always names one).
 */
int32_t
gc_dbscan_merge_label(const gc_dbscan_merge *m, int32_t part, int32_t comp)
{
	if (comp == GC_NOISE || comp == GC_DBP_NO_FEATURES)
		return comp;
	if (m == NULL || !m->finished || part < 0 || part >= m->parts ||
		comp < 0 || comp >= m->comps[part])
		return GC_NOISE;
	return m->label[m->offset[part] + comp];
}
