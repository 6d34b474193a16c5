/*
 * hdbscan_mst.c — HDBSCAN's phase 2 on the CPU: the minimum spanning tree
 * of the mutual-reachability graph, w(i, j) = max(core_i, core_j,
 * dist(i, j) / alpha), by Borůvka's algorithm over the kd-tree, without
 * forming the n² graph.
 *
 * Edges are ordered by (w, a, b), a < b their rows: a total order, so the
 * minimum spanning tree under it is unique, and each round of Borůvka's
 * algorithm adds, for every component, its least outgoing edge in that
 * order.  For one row i, the edges (i, j) of equal w come in the order of
 * j alone (every j < i gives (j, i), before every j > i, which gives
 * (i, j)): a query keeps the least (w, j).
 *
 * A round: every position s (rows in the kd-tree's order) walks the tree
 * depth first for its least edge to another component, skipping a node
 * when
 *   - all its rows lie in s's component (the node's component label,
 *     recomputed bottom-up after each round), or
 *   - its lower bound max(core_s, the node's smallest core,
 *     dist(box) / alpha) (dist of gc_boxbox_mindist2_f64, exact as every
 *     step is monotone) exceeds the component's bound (the least weight
 *     any of its rows has found this round), or exceeds s's best so far,
 *     or equals it while the node's smallest row is no smaller than s's
 *     best j, or equals the component's bound while the edge already
 *     offered to the component comes before (a, b) >= (min, max) of s's
 *     row and the node's smallest row.
 * The children of a node are walked the one on s's side of the split
 * first, or where s lies on the split (duplicates), the one with the
 * smaller row first (the equal weights' tie is then settled soon).
 * A skipped node holds no edge of s before the component's least edge, so
 * the row that owns that edge always finds it; each component keeps the
 * least edge its rows offer (a compare-and-swap in the same order), and
 * the round unites them.  The bound is only ever a weight found, shared
 * between threads: it prunes more or less with the timing, never the
 * result, which is the unique tree whatever the thread count.  Each round
 * starts the bounds from the pairs of neighbouring positions in different
 * components (near in space, as the tree orders them).  A leaf whose rows
 * all lie in one component first walks the tree as one query, with its
 * box and its smallest core: when no node may hold an edge within the
 * bound, none of its rows queries (in the late rounds, most leaves).
 *
 * Finally the n - 1 edges are sorted by (w, a, b) (sort_edges).
 *
 * The cancel flags are polled before every query and every round;
 * progress: GC_PHASE_ITERATE at each round (iteration = the round, the
 * edges found so far of n - 1).  Memory: a few arrays of n.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>

#include "hdbscan/hdbscan_internal.h"
#include "common/radix_sort.h"
#include "common/union_find.h"

#define MST_CHUNK 8				/* leaves a thread takes at a time */
#define MST_LONG_RUN 4096		/* equal weights radix-sorted by (a, b) */
#define MST_POLL_EDGES (1 << 18)	/* edges between polls in the tie sort */

typedef struct mst_run
{
	const gc_ctx *ctx;
	const gc_hd_index *ix;
	gc_metric	metric;
	double		alpha;
	double	   *pcore;			/* per position: its core distance */
	double	   *ncore;			/* per node: the smallest core */
	int64_t    *nrow;			/* per node: the smallest row */
	int64_t    *ncomp;			/* per node: its rows' component, or -1 */
	int64_t    *comp;			/* per position: union-find parent (the
								 * root, the lowest position, between
								 * rounds) */
	double	   *bw;				/* per position: its least edge's weight */
	int64_t    *bo;				/* per position: its other end, or -1 */
	uint64_t   *bound;			/* per root: the bits of the least weight
								 * found this round */
	int64_t    *cbest;			/* per root: the position of its least
								 * edge, or -1 */
	int			stop;			/* shared: 1 a cancel was seen, 2 no memory */
} mst_run;

static inline double
from_bits(uint64_t u)
{
	double		w;

	memcpy(&w, &u, sizeof(w));
	return w;
}

static inline uint64_t
to_bits(double w)
{
	uint64_t	u;

	memcpy(&u, &w, sizeof(u));
	return u;
}

/* The bound of root c lowered to w (non-negative doubles order as their
 * bits). */
static inline void
bound_min(uint64_t *b, double w)
{
	uint64_t	v = to_bits(w),
				cur = __atomic_load_n(b, __ATOMIC_RELAXED);

	while (v < cur &&
		   !__atomic_compare_exchange_n(b, &cur, v, true, __ATOMIC_RELAXED,
										__ATOMIC_RELAXED))
		;
}

static inline double
bound_of(const mst_run *m, int64_t c)
{
	return from_bits(__atomic_load_n(&m->bound[c], __ATOMIC_RELAXED));
}

static inline double
dmax(double a, double b)
{
	return a > b ? a : b;
}

static inline double
dmin(double a, double b)
{
	return a < b ? a : b;
}

/*
 * dist / alpha from the squared distance s, as the weight divides it (a
 * division by 1 is exact: skipped).
 */
static inline double
reach(const mst_run *m, double s)
{
	double		dist = gc_hdbscan_dist(m->metric, s);

	return m->alpha == 1.0 ? dist : dist / m->alpha;
}

/* w of positions s and t. */
static inline double
pair_weight(const mst_run *m, int64_t s, int64_t t)
{
	const int	d = m->ix->d;

	return dmax(dmax(m->pcore[s], m->pcore[t]),
				reach(m, gc_dist2_f64(m->ix->pts + s * d, m->ix->pts + t * d, d)));
}

/*
 * Whether an edge of weight at least lb to a row at least row may still
 * come before both the component's bound and the query's best (w_o, j_o).
 */
static inline bool
may_beat(double lb, int64_t row, double bound, double w_o, int64_t j_o)
{
	return lb <= bound && (lb < w_o || (lb == w_o && row < j_o));
}

/* Whether the edge of position s comes before that of position t. */
static bool
edge_less(const mst_run *m, int64_t s, int64_t t)
{
	const int64_t *perm = m->ix->perm;
	int64_t		is = perm[s],
				js = perm[m->bo[s]],
				it = perm[t],
				jt = perm[m->bo[t]];
	int64_t		as = is < js ? is : js,
				at = it < jt ? it : jt;

	if (m->bw[s] != m->bw[t])
		return m->bw[s] < m->bw[t];
	if (as != at)
		return as < at;
	return is + js - as < it + jt - at;
}

/*
 * Whether the least edge offered to c so far comes before every edge of
 * weight at least w between a row at least r1 and a row at least r2 (whose
 * (a, b) is at least (min(r1, r2), max(r1, r2))): among equal weights, a
 * skip the bound cannot make.
 */
static bool
offered_before(const mst_run *m, int64_t c, double w, int64_t r1, int64_t r2)
{
	int64_t		cb = __atomic_load_n(&m->cbest[c], __ATOMIC_ACQUIRE),
				i,
				j,
				a;

	if (cb < 0)
		return false;
	if (m->bw[cb] != w)
		return m->bw[cb] < w;
	i = m->ix->perm[cb];
	j = m->ix->perm[m->bo[cb]];
	a = i < j ? i : j;
	if (a != (r1 < r2 ? r1 : r2))
		return a < (r1 < r2 ? r1 : r2);
	return i + j - a < (r1 < r2 ? r2 : r1);
}

/* Position s's edge offered to its component (cbest: the least so far). */
static void
offer(mst_run *m, int64_t c, int64_t s)
{
	int64_t		cur = __atomic_load_n(&m->cbest[c], __ATOMIC_ACQUIRE);

	while (cur < 0 || edge_less(m, s, cur))
		if (__atomic_compare_exchange_n(&m->cbest[c], &cur, s, true,
										__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			return;
}

/*
 * The rows of leaf node (another component's than c) scanned for the least
 * edge of position s: *w_o, *o and *j_o its weight, other end and row so
 * far, *bound c's bound as last read.
 */
static void
scan_leaf(mst_run *m, int64_t s, int64_t c, int64_t node, double *w_o,
		  int64_t *o, int64_t *j_o, double *bound)
{
	const gc_hd_index *ix = m->ix;
	const int	d = ix->d;
	const float *q = ix->pts + s * d;
	const double cs = m->pcore[s];

	for (int64_t u = ix->t.begin[node]; u < ix->t.end[node]; u++)
	{
		int64_t		row = ix->perm[u];
		double		w = dmax(cs, m->pcore[u]);

		if (m->comp[u] == c || !may_beat(w, row, *bound, *w_o, *j_o))
			continue;
		w = dmax(w, reach(m, gc_dist2_f64(q, ix->pts + u * d, d)));
		if (!may_beat(w, row, *bound, *w_o, *j_o))
			continue;
		*w_o = w;
		*o = u;
		*j_o = row;
		if (w < *bound)
		{
			bound_min(&m->bound[c], w);
			*bound = w;
		}
	}
}

/*
 * The header's walk from the box [qlo, qhi] of rows of component c whose
 * smallest core is cq and smallest row qrow, in the header's order and
 * with its skips.  From a position s (qlo = qhi = its row, cq its core)
 * it scans the leaves it reaches and offers s's least edge to c.  From a
 * leaf's box (s = -1), whose rows all lie in c, it stops at the first leaf
 * it reaches: it returns whether any node may hold an edge of the box
 * before c's bound (when none may, no row of the leaf holds c's least
 * edge).
 */
static bool
walk(mst_run *m, int64_t c, double cq, int64_t qrow, const float *qlo,
	 const float *qhi, int64_t s, int64_t *stack)
{
	const gc_kdtree *t = &m->ix->t;
	const int	d = m->ix->d;
	double		w_o = INFINITY;
	int64_t		o = -1,
				j_o = INT64_MAX,
				top = 0;

	stack[top++] = 0;
	while (top > 0)
	{
		int64_t		node = stack[--top];
		double		bound,
					lb;

		if (m->ncomp[node] == c)
			continue;
		bound = bound_of(m, c);
		lb = dmax(cq, m->ncore[node]);
		if (!may_beat(lb, m->nrow[node], bound, w_o, j_o))
			continue;
		lb = dmax(lb, reach(m, gc_boxbox_mindist2_f64(qlo, qhi, t->lo + node * d,
													  t->hi + node * d, d)));
		if (!may_beat(lb, m->nrow[node], bound, w_o, j_o) ||
			(lb == bound &&
			 offered_before(m, c, lb, qrow, m->nrow[node])))
			continue;
		if (!gc_kdtree_is_leaf(t, node))
			gc_hd_push_children(t, qlo, node,
								m->nrow[2 * node + 1] < m->nrow[2 * node + 2],
								stack, &top);
		else if (s < 0)
			return true;
		else
			scan_leaf(m, s, c, node, &w_o, &o, &j_o, &bound);
	}
	if (s >= 0)
	{
		m->bw[s] = w_o;
		m->bo[s] = o;
		if (o >= 0)
			offer(m, c, s);
	}
	return false;
}

/*
 * Each position's component made its root (comp fully compressed), and
 * per node its rows' component, or -1; with minima, also its smallest core
 * and row (fixed for the call).
 */
static void
summarize(mst_run *m, int team, bool minima)
{
	const gc_kdtree *t = &m->ix->t;
	const int64_t n = m->ix->n;

#pragma omp parallel num_threads(team)
	{
#pragma omp for schedule(static)
		for (int64_t s = 0; s < n; s++)
			(void) gc_uf_find(m->comp, s);
#pragma omp for schedule(static)
		for (int64_t node = t->first_leaf; node < t->nnodes; node++)
		{
			int64_t		b = t->begin[node],
						lab = b < t->end[node] ? m->comp[b] : -1;

			for (int64_t u = b + 1; u < t->end[node] && lab >= 0; u++)
				if (m->comp[u] != lab)
					lab = -1;
			m->ncomp[node] = lab;
			if (!minima)
				continue;
			m->ncore[node] = INFINITY;
			m->nrow[node] = INT64_MAX;
			for (int64_t u = b; u < t->end[node]; u++)
			{
				m->ncore[node] = dmin(m->ncore[node], m->pcore[u]);
				if (m->ix->perm[u] < m->nrow[node])
					m->nrow[node] = m->ix->perm[u];
			}
		}
	}
	for (int64_t node = t->first_leaf - 1; node >= 0; node--)
	{
		int64_t		l = 2 * node + 1;

		m->ncomp[node] = m->ncomp[l] == m->ncomp[l + 1] ? m->ncomp[l] : -1;
		if (!minima)
			continue;
		m->ncore[node] = dmin(m->ncore[l], m->ncore[l + 1]);
		m->nrow[node] = m->nrow[l] < m->nrow[l + 1] ? m->nrow[l] : m->nrow[l + 1];
	}
}

/*
 * One round's queries, leaf by leaf: every position's least edge, every
 * root's least.
 */
static void
round_queries(mst_run *m, int team)
{
	const gc_kdtree *t = &m->ix->t;
	const int64_t n = m->ix->n;
	const int	d = m->ix->d;
	const int64_t nleaves = t->nnodes - t->first_leaf;
	const int64_t nchunks = (nleaves + MST_CHUNK - 1) / MST_CHUNK;

#pragma omp parallel num_threads(team)
	{
		int64_t    *stack = malloc(sizeof(int64_t) * (size_t) (2 * t->depth + 4));

		if (stack == NULL)
			__atomic_store_n(&m->stop, 2, __ATOMIC_RELAXED);
#pragma omp for schedule(static)
		for (int64_t s = 0; s < n; s++)
		{
			m->bound[s] = to_bits(INFINITY);
			m->cbest[s] = -1;
		}
		/* the bounds from neighbouring positions (implicit barrier above) */
#pragma omp for schedule(static)
		for (int64_t s = 0; s < n - 1; s++)
			if (m->comp[s] != m->comp[s + 1])
			{
				double		w = pair_weight(m, s, s + 1);

				bound_min(&m->bound[m->comp[s]], w);
				bound_min(&m->bound[m->comp[s + 1]], w);
			}
#pragma omp for schedule(dynamic, 1)
		for (int64_t ch = 0; ch < nchunks; ch++)
		{
			int64_t		l0 = t->first_leaf + ch * MST_CHUNK,
						l1 = l0 + MST_CHUNK < t->nnodes ? l0 + MST_CHUNK : t->nnodes;

			for (int64_t leaf = l0; leaf < l1; leaf++)
			{
				bool		skip;

				if (__atomic_load_n(&m->stop, __ATOMIC_RELAXED))
					break;
				skip = m->ncomp[leaf] >= 0 &&
					!walk(m, m->ncomp[leaf], m->ncore[leaf], m->nrow[leaf],
						  t->lo + leaf * d, t->hi + leaf * d, -1, stack);
				for (int64_t s = t->begin[leaf]; s < t->end[leaf]; s++)
				{
					if (gc_cancelled(m->ctx))
					{
						__atomic_store_n(&m->stop, 1, __ATOMIC_RELAXED);
						break;
					}
					if (skip)
						m->bo[s] = -1;
					else
						(void) walk(m, m->comp[s], m->pcore[s], m->ix->perm[s],
									m->ix->pts + s * d, m->ix->pts + s * d, s, stack);
				}
			}
		}
		free(stack);
	}
}

/*
 * The roots' least edges united, in parallel; each new edge appended to
 * edges at *nedges (in no fixed order: they are sorted at the end).
 * Returns the components left, or -1 when a root found no edge.  Two
 * components whose least edges reach each other chose the same edge (each
 * is the least edge between them): the lower root adds it.
 */
static int64_t
unite(mst_run *m, int64_t ncomps, gc_mst_edge *edges, int64_t *nedges,
	  int team)
{
	const int64_t n = m->ix->n;
	const int64_t *perm = m->ix->perm;
	/* per root: the root its edge reaches (the bounds are done with) */
	int64_t    *reached = (int64_t *) m->bound;
	int64_t		offered = 0,
				added = 0,
				next = *nedges;

#pragma omp parallel num_threads(team)
	{
#pragma omp for schedule(static) reduction(+:offered)
		for (int64_t c = 0; c < n; c++)
			if (m->cbest[c] >= 0)
			{
				reached[c] = m->comp[m->bo[m->cbest[c]]];
				offered++;
			}
#pragma omp for schedule(static) reduction(+:added)
		for (int64_t c = 0; c < n; c++)
		{
			int64_t		s = m->cbest[c],
						r,
						i,
						j,
						k;

			if (s < 0)
				continue;
			r = reached[c];
			if (r < c && m->cbest[r] >= 0 && reached[r] == c)
				continue;
			gc_uf_union(m->comp, c, r);
			i = perm[s];
			j = perm[m->bo[s]];
			k = __atomic_fetch_add(&next, 1, __ATOMIC_RELAXED);
			edges[k].a = i < j ? i : j;
			edges[k].b = i < j ? j : i;
			edges[k].w = m->bw[s];
			added++;
		}
	}
	*nedges = next;
	return offered == ncomps ? ncomps - added : -1;
}

static int
edge_ab_cmp(const void *x, const void *y)
{
	const gc_mst_edge *e = x,
			   *f = y;

	if (e->a != f->a)
		return e->a < f->a ? -1 : 1;
	return e->b < f->b ? -1 : e->b > f->b;
}

/* Scratch of m entries each for sorting m edges. */
typedef struct sort_scratch
{
	uint64_t   *keys,
			   *tmpk;
	int64_t    *vals,
			   *tmpv;
	gc_mst_edge *tmpe;
} sort_scratch;

/*
 * The m edges e put in the order of their keys (stable): a radix sort of
 * key_bits bits.  False on cancel or no memory (*nomem).
 */
static bool
sort_by_keys(const gc_ctx *ctx, gc_mst_edge *e, int64_t m, int key_bits,
			 const sort_scratch *x, int team, bool *nomem)
{
	if (!gc_radix_sort_kv(x->keys, x->vals, m, key_bits, x->tmpk, x->tmpv, team,
						  ctx, nomem))
		return false;
#pragma omp parallel for num_threads(team) schedule(static)
	for (int64_t k = 0; k < m; k++)
		x->tmpe[k] = e[x->vals[k]];
	gc_copy(e, x->tmpe, sizeof(gc_mst_edge) * (size_t) m, team);
	return true;
}

/*
 * The m edges of n rows sorted by (w, a, b): by the bits of w (w >= 0,
 * so they order as w does), then each run of equal w by (a, b): a long one
 * (a lattice's) by the radix sort of a * n + b, the others by qsort.
 * False on cancel (polled between runs) or no memory (*nomem).
 */
static bool
sort_edges(const gc_ctx *ctx, gc_mst_edge *edges, int64_t m, int64_t n,
		   const sort_scratch *x, int team, bool *nomem)
{
	int			ab_bits = 0;

	while (ab_bits < 64 && (UINT64_C(1) << ab_bits) / (uint64_t) n < (uint64_t) n)
		ab_bits++;				/* n * n <= 2^ab_bits */
#pragma omp parallel for num_threads(team) schedule(static)
	for (int64_t k = 0; k < m; k++)
	{
		x->keys[k] = to_bits(edges[k].w);
		x->vals[k] = k;
	}
	if (!sort_by_keys(ctx, edges, m, 63, x, team, nomem))
		return false;
	for (int64_t k = 0, polled = 0; k < m;)
	{
		int64_t		r = k + 1;

		while (r < m && edges[r].w == edges[k].w)
			r++;
		if (r - polled >= MST_POLL_EDGES)
		{
			if (gc_cancelled(ctx))
				return false;
			polled = r;
		}
		if (r - k >= MST_LONG_RUN && ab_bits < 64)
		{
#pragma omp parallel for num_threads(team) schedule(static)
			for (int64_t i = k; i < r; i++)
			{
				x->keys[i - k] = (uint64_t) edges[i].a * (uint64_t) n +
					(uint64_t) edges[i].b;
				x->vals[i - k] = i - k;
			}
			if (!sort_by_keys(ctx, edges + k, r - k, ab_bits, x, team, nomem))
				return false;
		}
		else if (r - k > 1)
			qsort(edges + k, (size_t) (r - k), sizeof(gc_mst_edge), edge_ab_cmp);
		k = r;
	}
	return true;
}

static void
mst_free(mst_run *m)
{
	free(m->pcore);
	free(m->ncore);
	free(m->nrow);
	free(m->ncomp);
	free(m->comp);
	free(m->bw);
	free(m->bo);
	free(m->bound);
	free(m->cbest);
}

/* Borůvka's rounds: the n - 1 edges, unsorted. */
static gc_code
mst_rounds(mst_run *m, const double *core, gc_mst_edge *edges, gc_status *st)
{
	const int64_t n = m->ix->n;
	/* the regions' work: the chunks of leaves (one thread for one) */
	const int64_t nleaves = m->ix->t.nnodes - m->ix->t.first_leaf,
				nchunks = (nleaves + MST_CHUNK - 1) / MST_CHUNK;
	int64_t		ncomps = n,
				nedges = 0;
	int			team = gc_region_threads(gc_team_adapt(m->ctx), nchunks);

#pragma omp parallel for num_threads(team) schedule(static)
	for (int64_t s = 0; s < n; s++)
	{
		m->pcore[s] = core[m->ix->perm[s]];
		m->comp[s] = s;
	}
	summarize(m, team, true);
	for (int64_t round = 1; ncomps > 1; round++)
	{
		gc_report(m->ctx, GC_PHASE_ITERATE, round, 0, nedges, n - 1, NAN);
		if (gc_cancelled(m->ctx))
			return gc_fail(st, GC_ECANCEL, "canceled");
		team = gc_region_threads(gc_team_adapt(m->ctx), nchunks);
		round_queries(m, team);
		if (m->stop == 2)
			return gc_fail(st, GC_ENOMEM, "out of memory for the MST's search stacks");
		if (m->stop)
			return gc_fail(st, GC_ECANCEL, "canceled");
		ncomps = unite(m, ncomps, edges, &nedges, team);
		if (ncomps < 0)
			return gc_fail(st, GC_EINTERNAL, "a component of the MST found no edge in round %lld",
						   (long long) round);
		if (gc_cancelled(m->ctx))
			return gc_fail(st, GC_ECANCEL, "canceled");
		summarize(m, team, false);
	}
	return GC_OK;
}

gc_code
gc_hd_mst(const gc_ctx *ctx, const gc_hd_index *ix, double alpha,
		  gc_metric metric, const double *core, gc_mst_edge *edges,
		  gc_status *st)
{
	const int64_t n = ix->n,
				nn = ix->t.nnodes;
	mst_run		m = {.ctx = ctx, .ix = ix, .metric = metric, .alpha = alpha};
	sort_scratch x;
	bool		nomem;
	gc_code		rc;

	m.pcore = malloc(sizeof(double) * (size_t) n);
	m.ncore = malloc(sizeof(double) * (size_t) nn);
	m.nrow = malloc(sizeof(int64_t) * (size_t) nn);
	m.ncomp = malloc(sizeof(int64_t) * (size_t) nn);
	m.comp = malloc(sizeof(int64_t) * (size_t) n);
	m.bw = malloc(sizeof(double) * (size_t) n);
	m.bo = malloc(sizeof(int64_t) * (size_t) n);
	m.bound = malloc(sizeof(uint64_t) * (size_t) n);
	m.cbest = malloc(sizeof(int64_t) * (size_t) n);
	if (!m.pcore || !m.ncore || !m.nrow || !m.ncomp || !m.comp || !m.bw ||
		!m.bo || !m.bound || !m.cbest)
	{
		mst_free(&m);
		return gc_fail(st, GC_ENOMEM, "out of memory for the MST of %lld rows",
					   (long long) n);
	}
	rc = mst_rounds(&m, core, edges, st);
	/*
	 * the sort's scratch: the rounds' arrays of n, done with (bw's storage
	 * taken as uint64_t from here on), and one more
	 */
	x.keys = m.bound;
	x.vals = m.cbest;
	x.tmpk = (uint64_t *) m.bw;
	x.tmpv = m.bo;
	x.tmpe = rc == GC_OK ? malloc(sizeof(gc_mst_edge) * (size_t) n) : NULL;
	if (rc == GC_OK && x.tmpe == NULL)
		rc = gc_fail(st, GC_ENOMEM, "out of memory for sorting the MST's %lld edges",
					 (long long) n - 1);
	if (rc == GC_OK &&
		!sort_edges(ctx, edges, n - 1, n, &x,
					gc_region_threads(gc_team_adapt(ctx), (n - 1) / 4096), &nomem))
		rc = nomem ? gc_fail(st, GC_ENOMEM, "out of memory for sorting the MST's edges")
			: gc_fail(st, GC_ECANCEL, "canceled");
	free(x.tmpe);
	mst_free(&m);
	return rc;
}
