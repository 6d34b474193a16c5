/*
 * dbscan_kdtree.c — DBSCAN on the kd-tree of kdtree.h, for any d.
 *
 * A node is "dense" when the float-exact bound gc_dist2(lo, hi) <= eps2
 * proves all its points mutual neighbours.  Each leaf's block of pts is kept
 * dimension-major, so leaf_dist2 computes a whole leaf's exact gc_dist2
 * values several points at a time; query points are read from X via perm.
 * Phases, parallel over leaves:
 *   core:   a leaf under a dense node of >= min_pts points is all core;
 *           otherwise the leaf lists once the leaves whose box is within eps
 *           of its box (nearest first), and each point counts over that
 *           list (point/box bounds, then block_hits: AVX-512 or AVX2 when
 *           the CPU has it), stopping at min_pts.  A non-core point's
 *           count saw all its (< min_pts) neighbours: they are kept;
 *   chain:  the core points of each maximal dense node are united, so any
 *           dense node's core points form one component;
 *   union:  pairs inside each leaf; then each leaf searches the tree once
 *           for all its core points (union_leaf), leaves in bit-reversed
 *           batches (spread over the tree, doubling) with a refresh between
 *           batches of which nodes have their core points in one component
 *           ("conn": skipped outright when that is the searcher's, one edge
 *           needed otherwise) or in one component but for <= EXC_MAX listed
 *           exceptions; in a candidate leaf only the core points not yet in
 *           the searching leaf's main component look for an edge;
 *   border: each non-core point picks its nearest core neighbour from its
 *           kept list (or searches, when min_pts > NB_MAX_MINPTS).
 * Subtrees without core points are skipped in the last three phases.
 * Every neighbour decision is gc_dist2 <= eps2 or a float-monotone box bound
 * of metric.h; skipping work relies only on union-find facts.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/metric.h"
#include "dbscan/dbscan_internal.h"
#include "common/kdtree.h"
#include "common/union_find.h"
#include <omp.h>

#ifdef GC_KDTREE_PROFILE
#include <stdio.h>
#include <omp.h>
#define PHASE(name) do { _Pragma("omp master") { double now_ = omp_get_wtime(); \
	fprintf(stderr, "  %-8s %8.3f s\n", name, now_ - prof_t0); prof_t0 = now_; } } while (0)
static double prof_t0;
#else
#define PHASE(name) ((void) 0)
#endif

/*
 * Leaves are scanned with the vectorised leaf_dist2, while every node visit
 * costs a scalar box bound in d dimensions: so leaves grow with d (measured
 * on Gaussian blobs, 2 threads: d=4 best at 64, d >= 8 at 128..256).
 */
static int
leaf_size_for(int d)
{
#ifdef LEAF_SIZE
	(void) d;
	return LEAF_SIZE;
#else
	return d <= 4 ? 64 : d <= 8 ? 128 : 256;
#endif
}
#define FULL_SEARCH_SHIFT 3		/* the first nleaf / 8 leaves search fully */
#define STACK_MAX 130			/* > 2 * (max depth + 1) */

typedef struct tree_state
{
	gc_kdtree	t;
	uint8_t    *dense;			/* nnodes */
	uint8_t    *small;			/* nnodes: diagonal <= 2 eps, so a point may
								 * have the whole node within eps (a hint
								 * only: it just gates the maxdist test) */
	uint8_t    *conn;			/* nnodes: its core points are known to be
								 * in one component (never reset) */
	int64_t    *ncore;			/* nnodes: core points under the node */
	int64_t    *rep;			/* nnodes: first core position, or -1 */
	int64_t    *top_dense;		/* leaves: highest dense ancestor, or -1 */
	int64_t		maxleaf;		/* most points in a leaf */
	int32_t    *nexc;			/* nnodes: >= 0 when all its core points but
								 * nexc "exceptions" were in rep's component
								 * at the last refresh (0 iff conn); else -1 */
	int64_t    *exc;			/* leaves: EXC_MAX slots, the exceptions */
} tree_state;

#define EXC_MAX 8

/* Point at position s, as a contiguous row (pts is stored leaf-transposed). */
static inline const float *
row_of(const gc_dbscan_job *j, int64_t s)
{
	return j->X + j->perm[s] * j->d;
}

/*
 * out[i] = gc_dist2(x, point i of blk) for the m points of a leaf block
 * (stored dimension-major: coordinate k of point i at blk[k * m + i]) when
 * it is <= eps2, otherwise some value > eps2.  Each lane sums the same
 * rounded terms in the same dimension order as gc_dist2, only 8 points at a
 * time; a group of 8 stops once all its partial sums exceed eps2 (partial
 * sums of non-negative terms never decrease in float).  Cloned for AVX2
 * (no FMA: the file is built with -ffp-contract=off, and AVX2 alone does
 * not enable it).
 */
#define LANES 8
#define CHECK_EVERY 16

typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));

__attribute__((target_clones("avx2", "default"), noinline))
static void
block_dist2(const float *restrict x, const float *restrict blk, int64_t m,
			int d, float eps2, float *restrict out)
{
	int64_t		i0 = 0;

	for (; i0 + LANES <= m; i0 += LANES)
	{
		v8f			acc = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
		int			k = 0;

		while (k < d)
		{
			int			stop = k + CHECK_EVERY < d ? k + CHECK_EVERY : d;
			v8i			far;

			for (; k < stop; k++)
			{
				v8f			r;

				memcpy(&r, blk + k * m + i0, sizeof(r));
				acc = GC_L2_STEP_V(acc, x[k], r);
			}
			far = acc > eps2;
			if ((far[0] & far[1] & far[2] & far[3] &
				 far[4] & far[5] & far[6] & far[7]) != 0)
				break;
		}
		memcpy(out + i0, &acc, sizeof(acc));
	}
	for (; i0 < m; i0++)
	{
		float		s = 0.0f;

		for (int k = 0; k < d; k++)
			s = gc_l2_step(s, x[k], blk[k * m + i0]);
		out[i0] = s;
	}
}

/*
 * The offsets i (ascending) of the points of a leaf block (as block_dist2)
 * with gc_dist2(x, point i) <= eps2, in hit[]; returns how many.  The same
 * sums as block_dist2, so the same decisions; for the core count, where
 * hits are rare and a value per point would only be scanned.
 */
static int64_t
block_hits_generic(const float *restrict x, const float *restrict blk,
				   int64_t m, int d, float eps2, int32_t *restrict hit)
{
	int64_t		n = 0;
	int64_t		i0 = 0;

	for (; i0 + LANES <= m; i0 += LANES)
	{
		v8f			acc = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
		v8i			near = {0, 0, 0, 0, 0, 0, 0, 0};
		int			k = 0;

		while (k < d)
		{
			int			stop = k + CHECK_EVERY < d ? k + CHECK_EVERY : d;

			for (; k < stop; k++)
			{
				v8f			r;

				memcpy(&r, blk + k * m + i0, sizeof(r));
				acc = GC_L2_STEP_V(acc, x[k], r);
			}
			near = acc <= eps2;
			if ((near[0] | near[1] | near[2] | near[3] |
				 near[4] | near[5] | near[6] | near[7]) == 0)
				break;
		}
		if (k >= d)
			for (int l = 0; l < LANES; l++)
				if (near[l])
					hit[n++] = (int32_t) (i0 + l);
	}
	for (; i0 < m; i0++)
	{
		float		s = 0.0f;

		for (int k = 0; k < d; k++)
			s = gc_l2_step(s, x[k], blk[k * m + i0]);
		if (s <= eps2)
			hit[n++] = (int32_t) i0;
	}
	return n;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* block_hits_generic with AVX2 intrinsics: separate sub, mul, add (no FMA). */
__attribute__((target("avx2")))
static int64_t
block_hits_avx2(const float *restrict x, const float *restrict blk,
				int64_t m, int d, float eps2, int32_t *restrict hit)
{
	int64_t		n = 0;
	int64_t		i0 = 0;
	__m256		e = _mm256_set1_ps(eps2);

	/* two groups at a time, for two independent chains of additions */
	for (; i0 + 16 <= m; i0 += 16)
	{
		__m256		a0 = _mm256_setzero_ps(),
					a1 = _mm256_setzero_ps();
		unsigned	mask;

		for (int k = 0; k < d; k++)
		{
			__m256		xk = _mm256_set1_ps(x[k]);

			a0 = GC_L2_STEP_V(a0, xk, _mm256_loadu_ps(blk + k * m + i0));
			a1 = GC_L2_STEP_V(a1, xk, _mm256_loadu_ps(blk + k * m + i0 + 8));
		}
		mask = (unsigned) _mm256_movemask_ps(_mm256_cmp_ps(a0, e, _CMP_LE_OQ)) |
			((unsigned) _mm256_movemask_ps(_mm256_cmp_ps(a1, e, _CMP_LE_OQ)) << 8);
		while (mask != 0)
		{
			hit[n++] = (int32_t) (i0 + __builtin_ctz(mask));
			mask &= mask - 1;
		}
	}
	for (; i0 + 8 <= m; i0 += 8)
	{
		__m256		acc = _mm256_setzero_ps();
		int			k = 0;

		for (;;)
		{
			int			stop = k + CHECK_EVERY < d ? k + CHECK_EVERY : d;
			unsigned	mask;

			for (; k < stop; k++)
				acc = GC_L2_STEP_V(acc, _mm256_set1_ps(x[k]),
								   _mm256_loadu_ps(blk + k * m + i0));
			mask = (unsigned) _mm256_movemask_ps(_mm256_cmp_ps(acc, e, _CMP_LE_OQ));
			if (mask == 0)
				break;
			if (k >= d)
			{
				while (mask != 0)
				{
					hit[n++] = (int32_t) (i0 + __builtin_ctz(mask));
					mask &= mask - 1;
				}
				break;
			}
		}
	}
	for (; i0 < m; i0++)
	{
		float		s = 0.0f;

		for (int k = 0; k < d; k++)
			s = gc_l2_step(s, x[k], blk[k * m + i0]);
		if (s <= eps2)
			hit[n++] = (int32_t) i0;
	}
	return n;
}

/* block_hits_avx2 with 16 lanes: 32 points at a time, then 16, then a masked tail */
__attribute__((target("avx512f,avx2")))
static int64_t
block_hits_avx512(const float *restrict x, const float *restrict blk,
				  int64_t m, int d, float eps2, int32_t *restrict hit)
{
	int64_t		n = 0;
	int64_t		i0 = 0;
	__m512		e = _mm512_set1_ps(eps2);

	for (; i0 + 32 <= m; i0 += 32)
	{
		__m512		a0 = _mm512_setzero_ps(),
					a1 = _mm512_setzero_ps();
		uint32_t	mask;

		for (int k = 0; k < d; k++)
		{
			const float *r = blk + k * m + i0;
			__m512		xk = _mm512_set1_ps(x[k]);

			a0 = GC_L2_STEP_V(a0, xk, _mm512_loadu_ps(r));
			a1 = GC_L2_STEP_V(a1, xk, _mm512_loadu_ps(r + 16));
		}
		mask = (uint32_t) _mm512_cmp_ps_mask(a0, e, _CMP_LE_OQ) |
			((uint32_t) _mm512_cmp_ps_mask(a1, e, _CMP_LE_OQ) << 16);
		while (mask != 0)
		{
			hit[n++] = (int32_t) (i0 + __builtin_ctz(mask));
			mask &= mask - 1;
		}
	}
	for (; i0 + 16 <= m; i0 += 16)
	{
		__m512		a0 = _mm512_setzero_ps();
		uint32_t	mask;

		for (int k = 0; k < d; k++)
			a0 = GC_L2_STEP_V(a0, _mm512_set1_ps(x[k]), _mm512_loadu_ps(blk + k * m + i0));
		mask = (uint32_t) _mm512_cmp_ps_mask(a0, e, _CMP_LE_OQ);
		while (mask != 0)
		{
			hit[n++] = (int32_t) (i0 + __builtin_ctz(mask));
			mask &= mask - 1;
		}
	}
	if (i0 < m)
	{
		/* the last m - i0 < 16 points: masked lanes, never loaded */
		__mmask16	valid = (__mmask16) ((1u << (m - i0)) - 1);
		__m512		a0 = _mm512_setzero_ps();
		uint32_t	mask;

		for (int k = 0; k < d; k++)
			a0 = GC_L2_STEP_V(a0, _mm512_set1_ps(x[k]),
							  _mm512_maskz_loadu_ps(valid, blk + k * m + i0));
		mask = (uint32_t) _mm512_mask_cmp_ps_mask(valid, a0, e, _CMP_LE_OQ);
		while (mask != 0)
		{
			hit[n++] = (int32_t) (i0 + __builtin_ctz(mask));
			mask &= mask - 1;
		}
	}
	return n;
}
#endif

#ifdef GC_TESTING
/* tests set this to run the plain-C kernel on machines with AVX2 */
bool		gc_dbscan_force_generic = false;

/* tests set this to run the AVX2 kernel on machines with AVX-512 */
bool		gc_dbscan_force_avx2 = false;
#endif

static inline int64_t
block_hits(const float *x, const float *blk, int64_t m, int d, float eps2,
		   int32_t *hit)
{
#if defined(__x86_64__) && defined(__GNUC__)
	if (!gc_dbscan_force_generic && !gc_dbscan_force_avx2 &&
		__builtin_cpu_supports("avx512f"))
		return block_hits_avx512(x, blk, m, d, eps2, hit);
	if (!gc_dbscan_force_generic && __builtin_cpu_supports("avx2"))
		return block_hits_avx2(x, blk, m, d, eps2, hit);
#endif
	return block_hits_generic(x, blk, m, d, eps2, hit);
}

/*
 * out[i] = gc_dist2(x, point begin[v] + i) for every point of leaf v when it
 * is <= eps2, else some value > eps2 (callers compare with eps2 or less).
 */
static inline void
leaf_dist2(const tree_state *ts, const gc_dbscan_job *j, const float *x,
		   int64_t v, float *restrict out)
{
	int64_t		b = ts->t.begin[v];

	block_dist2(x, j->pts + b * j->d, ts->t.end[v] - b, j->d, j->eps2, out);
}

static inline int64_t
node_size(const gc_kdtree *t, int64_t u)
{
	return t->end[u] - t->begin[u];
}

/* The child of u on x's side first: pushed last, so popped first. */
static inline void
push_children(const gc_kdtree *t, int64_t u, const float *x,
			  int64_t *stack, int *sp)
{
	int64_t		l = 2 * u + 1,
				r = 2 * u + 2;

	if (x[t->split_dim[u]] < t->split_val[u])
	{
		stack[(*sp)++] = r;
		stack[(*sp)++] = l;
	}
	else
	{
		stack[(*sp)++] = l;
		stack[(*sp)++] = r;
	}
}

/* The low `bits` bits of i in reverse order. */
static inline int64_t
bit_reverse(int64_t i, int bits)
{
	int64_t		r = 0;

	for (int b = 0; b < bits; b++)
		r |= ((i >> b) & 1) << (bits - 1 - b);
	return r;
}

/*
 * The leaves whose box is within eps of leaf v's box (every neighbour of a
 * point of v lies in one), nearest box first: cand[0..return).  bd is
 * scratch of the same size (nleaf).
 */
static int64_t
leaf_candidates(const tree_state *ts, const gc_dbscan_job *j, int64_t v,
				int64_t *cand, float *bd)
{
	const gc_kdtree *t = &ts->t;
	int			d = j->d;
	float		eps2 = j->eps2;
	const float *vlo = t->lo + v * d,
			   *vhi = t->hi + v * d;
	int64_t		stack[STACK_MAX];
	int			sp = 0;
	int64_t		nc = 0;

	stack[sp++] = 0;
	while (sp > 0)
	{
		int64_t		u = stack[--sp];
		float		b = gc_boxbox_mindist2(vlo, vhi, t->lo + u * d,
										   t->hi + u * d, d);

		if (b > eps2)
			continue;
		if (gc_kdtree_is_leaf(t, u))
		{
			/* insertion by box distance (lists are short) */
			int64_t		i = nc++;

			while (i > 0 && bd[i - 1] > b)
			{
				bd[i] = bd[i - 1];
				cand[i] = cand[i - 1];
				i--;
			}
			bd[i] = b;
			cand[i] = u;
		}
		else
		{
			stack[sp++] = 2 * u + 2;
			stack[sp++] = 2 * u + 1;
		}
	}
	return nc;
}

/*
 * Number of neighbours of x (a point of the leaf whose candidate list is
 * cand[0..nc)), counting stops once it reaches min_pts.  When nb is not NULL
 * (room for min_pts - 1 positions) and the count ends below min_pts, nb
 * holds every neighbour of x: then the search was complete, and leaves
 * counted whole are listed too (they are small).
 */
static int64_t
count_listed(const tree_state *ts, const gc_dbscan_job *j, const float *x,
			 const int64_t *cand, int64_t nc, int64_t *nb, float *dist)
{
	const gc_kdtree *t = &ts->t;
	int			d = j->d;
	float		eps2 = j->eps2;
	int64_t		minp = j->min_pts;
	int64_t		cnt = 0;
	int32_t    *hit = (int32_t *) dist;	/* room for a leaf */

	for (int64_t c = 0; c < nc && cnt < minp; c++)
	{
		int64_t		u = cand[c],
					h;
		const float *lo = t->lo + u * d,
				   *hi = t->hi + u * d;
		int64_t		b = t->begin[u];

		if (gc_box_mindist2_nb(x, lo, hi, d) > eps2)
			continue;
		if (ts->small[u] && gc_box_maxdist2(x, lo, hi, d) <= eps2)
		{
			if (nb != NULL && cnt + node_size(t, u) < minp)
				for (int64_t s = b; s < t->end[u]; s++)
					nb[cnt++] = s;
			else
				cnt += node_size(t, u);
			continue;
		}
		h = block_hits(x, j->pts + b * d, t->end[u] - b, d, eps2, hit);
		for (int64_t i = 0; i < h && cnt < minp; i++)
		{
			if (nb != NULL && cnt < minp - 1)
				nb[cnt] = b + hit[i];
			cnt++;
		}
	}
	return cnt;
}

/* Some core point under node v within eps of x, or -1. */
static int64_t
any_core_neighbour(const tree_state *ts, const gc_dbscan_job *j,
				   const float *x, int64_t v, float *dist)
{
	const gc_kdtree *t = &ts->t;
	int			d = j->d;
	float		eps2 = j->eps2;
	int64_t		stack[STACK_MAX];
	int			sp = 0;

	stack[sp++] = v;
	while (sp > 0)
	{
		int64_t		u = stack[--sp];
		const float *lo = t->lo + u * d,
				   *hi = t->hi + u * d;

		if (ts->ncore[u] == 0 || gc_box_mindist2_nb(x, lo, hi, d) > eps2)
			continue;
		if (ts->small[u] && gc_box_maxdist2(x, lo, hi, d) <= eps2)
			return ts->rep[u];
		if (gc_kdtree_is_leaf(t, u))
		{
			int64_t		b = t->begin[u];

			leaf_dist2(ts, j, x, u, dist);
			for (int64_t s = ts->rep[u]; s < t->end[u]; s++)
				if (j->core[s] && dist[s - b] <= eps2)
					return s;
		}
		else
			push_children(t, u, x, stack, &sp);
	}
	return -1;
}

/*
 * Unites the core points of leaf v with their core neighbours outside v (see
 * the file comment; pairs inside v were united before the searches).  One
 * walk lists the nodes that can hold a neighbour of a point of v (box within
 * eps of v's box), stopping at connected nodes and dropping those known to
 * be in v's component when all v's core points are in one.  v's core points
 * are split once into G, those in the component most of them were in, and
 * the rest E.  Then for each listed node u:
 *   connected: one edge is enough; each core point a of v not yet in u's
 *     component looks for any core neighbour under u;
 *   a leaf: each core point s of u not in G's component scans v's block,
 *     and is united with its first hit in G (one edge: then s is connected
 *     to all of G; G is fixed at the start, as roots may change under a
 *     concurrent union, while G stays in one component); each point of E scans u's block
 *     (only the exceptions when u's core points but those are in a's
 *     component) and is united with every core hit not in its component.
 * Without full, the unconnected leaves u < v (positions below v's: leaves
 * hold ascending runs of positions) are left to u's own search, whose pass
 * covers the same pairs.  Components only merge, so "in the component of"
 * tested earlier stays true, and a stale root costs at most a needless test.
 */
static void
union_leaf(const tree_state *ts, gc_dbscan_job *j, int64_t v, bool full,
		   float *dist, int64_t *list, uint8_t *inG)
{
	const gc_kdtree *t = &ts->t;
	int			d = j->d;
	float		eps2 = j->eps2;
	int64_t    *parent = j->parent;
	const float *vlo = t->lo + v * d,
			   *vhi = t->hi + v * d;
	int64_t		bv = t->begin[v],
				mv = t->end[v] - bv;
	int64_t		rg = -1,
				votes = 0,
				nE = 0;
	int64_t		stack[STACK_MAX];
	int			sp = 0;
	int64_t		nl = 0;
	int32_t    *hit = (int32_t *) dist;

	/* G: the majority root's points (Boyer-Moore vote), E: the others */
	for (int64_t a = ts->rep[v]; a < t->end[v]; a++)
		if (j->core[a])
		{
			int64_t		r = gc_uf_find(parent, a);

			if (votes == 0)
			{
				rg = r;
				votes = 1;
			}
			else
				votes += r == rg ? 1 : -1;
		}
	for (int64_t a = bv; a < t->end[v]; a++)
	{
		inG[a - bv] = j->core[a] && gc_uf_find(parent, a) == rg;
		if (j->core[a] && !inG[a - bv])
			nE++;
	}

	stack[sp++] = 0;
	while (sp > 0)
	{
		int64_t		u = stack[--sp];

		if (u == v || ts->ncore[u] == 0 ||
			gc_boxbox_mindist2(vlo, vhi, t->lo + u * d, t->hi + u * d, d) > eps2)
			continue;
		if (ts->conn[u])
		{
			if (nE == 0 && gc_uf_find(parent, ts->rep[u]) == gc_uf_find(parent, rg))
				continue;
			list[nl++] = u;
		}
		else if (gc_kdtree_is_leaf(t, u))
		{
			if (full || u > v)
				list[nl++] = u;
		}
		else
		{
			stack[sp++] = 2 * u + 2;
			stack[sp++] = 2 * u + 1;
		}
	}

	for (int64_t c = 0; c < nl; c++)
	{
		int64_t		u = list[c];
		const float *lo = t->lo + u * d,
				   *hi = t->hi + u * d;
		int64_t		bu = t->begin[u],
					mu = t->end[u] - bu;

		if (ts->conn[u])
		{
			for (int64_t a = ts->rep[v]; a < t->end[v]; a++)
			{
				const float *x;
				int64_t		ra,
							b;

				if (!j->core[a])
					continue;
				ra = gc_uf_find(parent, a);
				if (gc_uf_find(parent, ts->rep[u]) == ra)
				{
					if (nE == 0)
						break;	/* all of v is in u's component */
					continue;
				}
				x = row_of(j, a);
				if (gc_box_mindist2_nb(x, lo, hi, d) > eps2)
					continue;
				if (ts->small[u] && gc_box_maxdist2(x, lo, hi, d) <= eps2)
					b = ts->rep[u];
				else
					b = any_core_neighbour(ts, j, x, u, dist);
				if (b >= 0)
					gc_uf_union(parent, a, b);
			}
			continue;
		}
		/* E: each point scans u */
		for (int64_t a = ts->rep[v]; nE > 0 && a < t->end[v]; a++)
		{
			const float *x;
			int64_t		ra,
						h;

			if (!j->core[a] || inG[a - bv])
				continue;
			x = row_of(j, a);
			if (gc_box_mindist2_nb(x, lo, hi, d) > eps2)
				continue;
			ra = gc_uf_find(parent, a);
			if (ts->nexc[u] > 0 && gc_uf_find(parent, ts->rep[u]) == ra)
			{
				for (int k = 0; k < ts->nexc[u]; k++)
				{
					int64_t		s = ts->exc[(u - t->first_leaf) * EXC_MAX + k];

					if (gc_uf_find(parent, s) != ra &&
						gc_dist2(x, row_of(j, s), d) <= eps2)
					{
						gc_uf_union(parent, a, s);
						ra = gc_uf_find(parent, a);
					}
				}
				continue;
			}
			h = block_hits(x, j->pts + bu * d, mu, d, eps2, hit);
			for (int64_t i = 0; i < h; i++)
			{
				int64_t		s = bu + hit[i];

				if (j->core[s] && gc_uf_find(parent, s) != ra)
				{
					gc_uf_union(parent, a, s);
					ra = gc_uf_find(parent, a);
				}
			}
		}
		/* G: each point of u not in G's component scans v */
		if (rg < 0)
			continue;
		for (int64_t s = ts->rep[u]; s < t->end[u]; s++)
		{
			const float *y;
			int64_t		h,
						r;

			if (!j->core[s])
				continue;
			r = gc_uf_find(parent, rg);
			if (gc_uf_find(parent, s) == r)
				continue;
			y = row_of(j, s);
			if (gc_box_mindist2_nb(y, vlo, vhi, d) > eps2)
				continue;
			h = block_hits(y, j->pts + bv * d, mv, d, eps2, hit);
			for (int64_t i = 0; i < h; i++)
				if (inG[hit[i]])
				{
					gc_uf_union(parent, s, bv + hit[i]);
					break;
				}
		}
	}
}

/* Nearest core neighbour of x (ties: lowest input row), or -1. */
static int64_t
nearest_core(const tree_state *ts, const gc_dbscan_job *j, const float *x,
			 float *dist)
{
	const gc_kdtree *t = &ts->t;
	int			d = j->d;
	const int64_t *perm = j->perm;
	float		bestd = j->eps2;
	int64_t		best = -1;
	int64_t		stack[STACK_MAX];
	int			sp = 0;

	stack[sp++] = 0;
	while (sp > 0)
	{
		int64_t		u = stack[--sp];

		if (ts->ncore[u] == 0 ||
			gc_box_mindist2_nb(x, t->lo + u * d, t->hi + u * d, d) > bestd)
			continue;
		if (gc_kdtree_is_leaf(t, u))
		{
			leaf_dist2(ts, j, x, u, dist);
			for (int64_t s = ts->rep[u]; s < t->end[u]; s++)
			{
				float		dd = dist[s - t->begin[u]];

				if (!j->core[s])
					continue;
				if (dd <= bestd &&
					(best < 0 || dd < bestd || perm[s] < perm[best]))
				{
					best = s;
					bestd = dd;
				}
			}
		}
		else
			push_children(t, u, x, stack, &sp);
	}
	return best;
}

/*
 * Neighbour lists of non-core points, one growing array per thread.  A list
 * is named by nb_pack: thread in bits 48..62, offset in bits 8..47, length in
 * bits 0..7.
 */
#define NB_MAX_MINPTS 64		/* lists kept only for min_pts <= this */
#define NB_MAX_THREADS 32767

typedef struct nb_list
{
	int64_t    *a;
	int64_t		len,
				cap;
} nb_list;

/* Keeps nb[0..c) (c < 64) in the calling thread's list: its name, or -1. */
static int64_t
nb_keep(nb_list *L, const int64_t *nb, int64_t c)
{
	int			tid = omp_get_thread_num();
	int64_t		off = L->len;

	if (L->len + c > L->cap)
	{
		int64_t		cap = L->cap < 1024 ? 1024 : 2 * L->cap;
		int64_t    *a;

		while (cap < L->len + c)
			cap *= 2;
		a = realloc(L->a, sizeof(int64_t) * (size_t) cap);
		if (a == NULL)
			return -1;			/* the border pass searches instead */
		L->a = a;
		L->cap = cap;
	}
	if (off + c >= (INT64_C(1) << 40))
		return -1;
	memcpy(L->a + off, nb, sizeof(int64_t) * (size_t) c);
	L->len += c;
	return ((int64_t) tid << 48) | (off << 8) | c;
}

/* nearest_core over a kept list: the same answer (the list is complete). */
static int64_t
nearest_core_listed(const gc_dbscan_job *j, const nb_list *nbl, int64_t name,
					const float *x)
{
	const int64_t *list = nbl[name >> 48].a + ((name >> 8) & ((INT64_C(1) << 40) - 1));
	int			c = (int) (name & 0xff);
	int64_t		best = -1;
	float		bestd = 0.0f;

	for (int i = 0; i < c; i++)
	{
		int64_t		s = list[i];
		float		dd;

		if (!j->core[s])
			continue;
		dd = gc_dist2(x, row_of(j, s), j->d);
		if (best < 0 || dd < bestd ||
			(dd == bestd && j->perm[s] < j->perm[best]))
		{
			best = s;
			bestd = dd;
		}
	}
	return best;
}

/*
 * Marks more nodes connected: a leaf whose core points now share one root, an
 * internal node whose children are connected and share a root.  Components
 * only merge, so a mark stays true.  Called by all threads of a team.
 */
static void
refresh_conn(tree_state *ts, gc_dbscan_job *j)
{
	gc_kdtree  *t = &ts->t;

#pragma omp for schedule(dynamic, 64)
	for (int64_t v = t->first_leaf; v < t->nnodes; v++)
	{
		int64_t		r,
				   *ex = ts->exc + (v - t->first_leaf) * EXC_MAX;
		int			k = 0;

		if (ts->conn[v] || ts->ncore[v] == 0)
		{
			ts->nexc[v] = 0;
			continue;
		}
		r = gc_uf_find(j->parent, ts->rep[v]);
		for (int64_t s = ts->rep[v] + 1; s < t->end[v] && k <= EXC_MAX; s++)
			if (j->core[s] && gc_uf_find(j->parent, s) != r)
			{
				if (k < EXC_MAX)
					ex[k] = s;
				k++;
			}
		ts->conn[v] = k == 0;
		ts->nexc[v] = k <= EXC_MAX ? k : -1;
	}
	for (int level = t->depth - 1; level >= 0; level--)
	{
		int64_t		first = (INT64_C(1) << level) - 1,
					last = (INT64_C(2) << level) - 1;

#pragma omp for schedule(static)
		for (int64_t u = first; u < last; u++)
		{
			int64_t		l = 2 * u + 1,
						r = 2 * u + 2;

			int64_t		e;

			if (ts->conn[u] || ts->ncore[u] == 0)
			{
				ts->nexc[u] = 0;
				continue;
			}
			if (ts->ncore[l] == 0 || ts->ncore[r] == 0)
				e = ts->ncore[l] == 0 ? ts->nexc[r] : ts->nexc[l];
			else if (ts->nexc[l] >= 0 && ts->nexc[r] >= 0 &&
					 gc_uf_find(j->parent, ts->rep[l]) ==
					 gc_uf_find(j->parent, ts->rep[r]))
				e = (int64_t) ts->nexc[l] + ts->nexc[r];
			else
				e = -1;
			if (e > INT32_MAX)
				e = -1;
			ts->nexc[u] = (int32_t) e;
			ts->conn[u] = e == 0;
		}
	}
}

static void
tree_state_free(tree_state *ts)
{
	gc_kdtree_free(&ts->t);
	free(ts->dense);
	free(ts->small);
	free(ts->nexc);
	free(ts->exc);
	free(ts->conn);
	free(ts->ncore);
	free(ts->rep);
	free(ts->top_dense);
}

gc_code
gc_dbscan_kdtree_run(gc_dbscan_job *j)
{
	tree_state	ts;
	gc_kdtree  *t = &ts.t;
	nb_list    *nbl;
	float	   *scratch;
	int64_t    *candbuf;
	int			d = j->d;
	int			T = j->nthreads;
	int64_t		nleaf;
	gc_code		rc;

	memset(&ts, 0, sizeof(ts));
#ifdef GC_KDTREE_PROFILE
	prof_t0 = omp_get_wtime();
#endif
	rc = gc_kdtree_build(t, j->X, j->n, d, leaf_size_for(d), T, j->ctx, j->perm,
						 j->pts, j->st);
	if (rc != GC_OK)
		return rc;
	nleaf = t->nnodes - t->first_leaf;
	ts.dense = malloc((size_t) t->nnodes);
	ts.small = malloc((size_t) t->nnodes);
	ts.nexc = malloc(sizeof(int32_t) * (size_t) t->nnodes);
	ts.exc = malloc(sizeof(int64_t) * EXC_MAX * (size_t) (t->nnodes - t->first_leaf));
	ts.conn = malloc((size_t) t->nnodes);
	ts.ncore = malloc(sizeof(int64_t) * (size_t) t->nnodes);
	ts.rep = malloc(sizeof(int64_t) * (size_t) t->nnodes);
	ts.top_dense = malloc(sizeof(int64_t) * (size_t) nleaf);
	nbl = calloc((size_t) T, sizeof(nb_list));
	/* per thread: a leaf's candidate leaves, then their box distances */
	candbuf = malloc((sizeof(int64_t) + sizeof(float)) * (size_t) T *
					 (size_t) nleaf);
	ts.maxleaf = 1;
	for (int64_t v = t->first_leaf; v < t->nnodes; v++)
		if (node_size(t, v) > ts.maxleaf)
			ts.maxleaf = node_size(t, v);
	/* per thread: leaf distances, then a leaf's rows for the transposition */
	scratch = malloc(sizeof(float) * (size_t) T * (size_t) ts.maxleaf *
					 (size_t) (d + 1));
	if (!ts.dense || !ts.small || !ts.nexc || !ts.exc || !ts.conn || !ts.ncore || !ts.rep || !ts.top_dense ||
		!nbl || !scratch || !candbuf)
	{
		free(candbuf);
		free(nbl);
		free(scratch);
		tree_state_free(&ts);
		return gc_fail(j->st, GC_ENOMEM, "out of memory for the kd-tree");
	}

#pragma omp parallel num_threads(T)
	{
		float	   *dist = scratch + (size_t) omp_get_thread_num() *
			(size_t) ts.maxleaf * (size_t) (d + 1);
		float	   *rows = dist + ts.maxleaf;

		/* each leaf's block of pts: from row-major to dimension-major */
#pragma omp for schedule(static)
		for (int64_t v = t->first_leaf; v < t->nnodes; v++)
		{
			int64_t		m = node_size(t, v);
			float	   *blk = j->pts + t->begin[v] * d;

			memcpy(rows, blk, sizeof(float) * (size_t) (m * d));
			for (int64_t i = 0; i < m; i++)
				for (int k = 0; k < d; k++)
					blk[k * m + i] = rows[i * d + k];
		}
#pragma omp for schedule(static)
		for (int64_t u = 0; u < t->nnodes; u++)
		{
			float		diag2 = gc_dist2(t->lo + u * d, t->hi + u * d, d);

			ts.dense[u] = diag2 <= j->eps2;
			ts.small[u] = diag2 <= 4.0f * j->eps2;
			ts.conn[u] = ts.dense[u];
		}
#pragma omp for schedule(static)
		for (int64_t s = 0; s < j->n; s++)
			j->parent[s] = s;
		/* implicit barrier: dense[] complete */
#pragma omp for schedule(static)
		for (int64_t l = 0; l < nleaf; l++)
		{
			int64_t		top = -1;

			for (int64_t u = t->first_leaf + l;; u = (u - 1) / 2)
			{
				if (ts.dense[u])
					top = u;
				if (u == 0)
					break;
			}
			ts.top_dense[l] = top;
		}

		PHASE("build");
		/*
		 * core.  A non-core point's neighbours were all enumerated by its
		 * count; they are kept (when min_pts is small) for the border pass,
		 * in the thread's list nbl[tid], and croot[perm[s]] (unused until
		 * the border pass) says where: nb_pack(), or -1 for "search again".
		 */
		{
			int			tid = omp_get_thread_num();
			bool		rec = j->min_pts >= 2 && j->min_pts <= NB_MAX_MINPTS &&
				tid < NB_MAX_THREADS;
			int64_t		nb[NB_MAX_MINPTS];
			int64_t    *cand = candbuf + (size_t) tid * (size_t) nleaf;
			float	   *cbd = (float *) (candbuf + (size_t) T * (size_t) nleaf) +
				(size_t) tid * (size_t) nleaf;

#pragma omp for schedule(dynamic, 4)
			for (int64_t l = 0; l < nleaf; l++)
			{
				int64_t		v = t->first_leaf + l;
				bool		all = false;
				int64_t		nc = -1;

				if (gc_job_stopped(j))
					continue;
				for (int64_t u = v;; u = (u - 1) / 2)
				{
					if (ts.dense[u] && node_size(t, u) >= j->min_pts)
					{
						all = true;
						break;
					}
					if (u == 0)
						break;
				}
				for (int64_t s = t->begin[v]; s < t->end[v]; s++)
				{
					int64_t		c;

					if (all)
					{
						j->core[s] = 1;
						continue;
					}
					if (nc < 0)
						nc = leaf_candidates(&ts, j, v, cand, cbd);
					c = count_listed(&ts, j, row_of(j, s), cand, nc,
									 rec ? nb : NULL, dist);
					j->core[s] = c >= j->min_pts;
					if (!j->core[s])
						j->croot[j->perm[s]] =
							rec ? nb_keep(&nbl[tid], nb, c) : -1;
				}
			}
		}

		PHASE("core");
		/* core counts and representatives, leaves then upwards */
#pragma omp for schedule(static)
		for (int64_t l = 0; l < nleaf; l++)
		{
			int64_t		v = t->first_leaf + l,
						k = 0,
						first = -1;

			for (int64_t s = t->begin[v]; s < t->end[v]; s++)
				if (j->core[s])
				{
					if (first < 0)
						first = s;
					k++;
				}
			ts.ncore[v] = k;
			ts.rep[v] = first;
		}
		for (int level = t->depth - 1; level >= 0; level--)
		{
			int64_t		first = (INT64_C(1) << level) - 1,
						last = (INT64_C(2) << level) - 1;

#pragma omp for schedule(static)
			for (int64_t u = first; u < last; u++)
			{
				ts.ncore[u] = ts.ncore[2 * u + 1] + ts.ncore[2 * u + 2];
				ts.rep[u] = ts.rep[2 * u + 1] >= 0 ? ts.rep[2 * u + 1]
					: ts.rep[2 * u + 2];
			}
		}

		/* chain the core points of each maximal dense node */
#pragma omp for schedule(static)
		for (int64_t l = 0; l < nleaf; l++)
		{
			int64_t		v = t->first_leaf + l,
						top = ts.top_dense[l];

			if (top < 0 || ts.ncore[v] == 0 || j->stop)
				continue;
			for (int64_t s = ts.rep[v]; s < t->end[v]; s++)
				if (j->core[s])
					gc_uf_union(j->parent, ts.rep[top], s);
		}

		PHASE("chain");
		/* pairs inside each leaf first, so that leaves become connected */
#pragma omp for schedule(dynamic, 16)
		for (int64_t l = 0; l < nleaf; l++)
		{
			int64_t		v = t->first_leaf + l;

			if (ts.ncore[v] < 2 || ts.conn[v] || gc_job_stopped(j))
				continue;
			for (int64_t a = ts.rep[v]; a < t->end[v]; a++)
				if (j->core[a])
				{
					leaf_dist2(&ts, j, row_of(j, a), v, dist);
					for (int64_t b = a + 1; b < t->end[v]; b++)
						if (j->core[b] && dist[b - t->begin[v]] <= j->eps2)
							gc_uf_union(j->parent, a, b);
				}
		}
		/*
		 * Then the searches, in batches of leaves taken in bit-reversed
		 * order, so that every batch is spread over the whole tree and the
		 * batches double in size: between batches more nodes are marked
		 * connected, and a connected node is skipped whole once the
		 * searching point is in its component.  The first, small batches
		 * search fully (they do the connecting); the rest only look after
		 * themselves in unconnected leaves.
		 */
		for (int batch = 0; batch <= t->depth; batch++)
		{
			int64_t		lo = batch == 0 ? 0 : INT64_C(1) << (batch - 1),
						hi = INT64_C(1) << batch;
			bool		full = hi <= (nleaf >> FULL_SEARCH_SHIFT);

			refresh_conn(&ts, j);
#pragma omp for schedule(dynamic, 1)
			for (int64_t i = lo; i < hi; i++)
			{
				int64_t		v = t->first_leaf + bit_reverse(i, t->depth);

				if (ts.ncore[v] == 0 || gc_job_stopped(j))
					continue;
				union_leaf(&ts, j, v, full, dist,
						   candbuf + (size_t) omp_get_thread_num() * (size_t) nleaf,
						   (uint8_t *) rows);
			}
		}
		PHASE("union");
		/* border */
#pragma omp for schedule(dynamic, 4)
		for (int64_t l = 0; l < nleaf; l++)
		{
			int64_t		v = t->first_leaf + l;

			if (ts.ncore[v] == node_size(t, v) || gc_job_stopped(j))
				continue;
			for (int64_t s = t->begin[v]; s < t->end[v]; s++)
				if (!j->core[s])
				{
					int64_t    *cr = &j->croot[j->perm[s]];
					int64_t		b;

					if (*cr >= 0)
						b = nearest_core_listed(j, nbl, *cr, row_of(j, s));
					else
						b = nearest_core(&ts, j, row_of(j, s), dist);
					*cr = b >= 0 ? gc_uf_find(j->parent, b) : -1;
				}
		}
	}
	PHASE("border");
	for (int i = 0; i < T; i++)
		free(nbl[i].a);
	free(nbl);
	free(scratch);
	free(candbuf);
	tree_state_free(&ts);
	if (j->stop)
		return gc_fail(j->st, GC_ECANCEL, "canceled");
	return GC_OK;
}
