/*
 * hdbscan_boruvka.cu — the minimum spanning tree of the mutual-reachability
 * graph, w(i, j) = max(core_i, core_j, dist(i, j) / alpha), on the GPU by
 * Borůvka's rounds over the kd-tree (as ArborX's), without the n² graph:
 * the unique tree under the total order (w, a, b), a < b the rows, so bit
 * for bit gc_hdbscan_mst_edges_cpu's edges.
 *
 * Components are named by a position of theirs, the root: label[p] for
 * every position.  Before the first round each row's best is its least
 * edge to its nearest rows, from the core distances' search (k_hb_from_knn,
 * hb_seeds), and exact when that edge weighs the row's core distance and
 * the list holds every row within it; such a row does not search in
 * round 1.  A round:
 *   1. seeds (k_hb_seed): a row whose last edge still leaves its component
 *      keeps it, and when that edge was its exact least it does not search
 *      again (its component only grew); each component's bound cw[c] starts
 *      at the least of those edges and of the edges between neighbouring
 *      positions of different components.  Every value cw[c] ever holds is
 *      the weight of an edge leaving c.
 *   2. search: a row that searches but lies inside a node of its
 *      component's alone whose box's faces all lie beyond its bound would
 *      open nothing (hb_inside): from round 2 k_hb_go settles such rows
 *      without a walk, and the others, listed in position order (CUB's
 *      select; not in round 1, whose few lie far apart), walk the tree
 *      (k_hb_search) for their least edge to another component in
 *      (w, a, b) order, a warp for 32 consecutive rows of the list with
 *      one stack, uniform across its lanes.  A lane skips a node whose
 *      rows all lie in its component (the node's label), and one whose
 *      lower bound max(core_i, the node's least core, the box's distance /
 *      alpha) exceeds min(its best w, cw[c]), or equals its best w while
 *      the node's least row makes every pair of it order after its best.
 *      It publishes its best into cw[c] (atomicMin on the bits:
 *      non-negative doubles order as their bits).  Nothing skipped holds
 *      an edge of weight at most c's least, so the row that holds c's
 *      least edge finds it exactly.
 *   3. pick (k_hb_pick): among the rows whose best weighs cw[c], the least
 *      pair, cab[c] (atomicMin on a << 32 | b).
 *   4. hook (k_hb_hook): each component hangs under the component at the
 *      other end of its edge and appends the edge; two that chose the same
 *      edge keep it once, the lower root staying a root.  Pointer jumping
 *      (k_hb_jump, ceil(log2(components)) + 1 times: each at least halves
 *      every path) then takes every old root to its new root, and each row
 *      is relabelled.
 *   5. the nodes' labels (k_hb_nlab_*: a leaf's rows' common label or -1,
 *      then each level from its children's, the top levels in one block).
 * Each round at least halves the components, so there are at most
 * log2(n) + 1 rounds.  The round is queued whole and the host waits once,
 * at its end, polling the cancel flags meanwhile.  A cancel raises the
 * call's stop flag, which each warp of the search reads after every
 * HB_STOP_EVERY leaves it opens (a short walk never: it ends soon),
 * leaving when it is raised with its rows' bests unwritten (what it
 * published into cw is an edge's weight all the same); the round's other
 * kernels then run on those partial bests, where they can neither hang nor
 * write out of bounds (fixed launch counts, the edge count checked), and
 * the call returns GC_ECANCEL, launching nothing more.
 * A round that adds no edge, an edge count past n - 1 or a component
 * without an edge is an internal error (GC_EDEVICE), never a hang.
 *
 * Memory: 50 bytes a row and 16 a node, besides the tree, the core
 * distances and the edges.
 */
#include <math.h>

#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>

#include "hdbscan_gpu.cuh"

#pragma GCC visibility push(hidden)

#define HB_SEARCH_ROWS (1 << 20)	/* positions a search launch, at most */
#define HB_MAX_ROUNDS 64		/* at most 32 can happen (n < 2^31) */

enum
{
	HB_ERR_EDGES = 1,			/* more than n - 1 edges */
	HB_ERR_NOEDGE = 2,			/* a component without an edge */
	HB_ERR_PAIR = 4,			/* an edge not leaving its component */
	HB_ERR_SPLIT = 8			/* more than one component at the end */
};

/* What the kernels read and write; device arrays. */
struct hb_mst
{
	gc_kdtree	T;
	gc_metric	metric;
	double		alpha;
	const double *core;			/* n: by position */
	double	   *ncore;			/* nnode: the least core of the node */
	int		   *nrow;			/* nnode: the least row of the node */
	int		   *nlab;			/* nnode: the node's component, or -1 */
	int		   *label;			/* n: the component (root) of a position */
	unsigned long long *bw;		/* n: the row's best edge: weight bits */
	unsigned long long *bab;	/* and pair */
	int		   *bo;				/* and other end (position), or -1 */
	uint8_t    *exact;			/* n: the best is the row's least edge out */
	uint8_t    *go;				/* n: the row searches this round */
	int		   *list;			/* the positions that search, in order */
	const int  *nlist;			/* and their count (device) */
	unsigned long long *cw;		/* by root: the bound, then the least weight */
	unsigned long long *cab;	/* by root: the least pair of that weight */
	int		   *parent;			/* by root: the component it hangs under */
	unsigned long long *ew;		/* n - 1: the edges' weights (bits) */
	unsigned long long *eab;	/* and pairs */
	unsigned   *info;			/* [0]: edges so far, [1]: HB_ERR_* bits */
	unsigned long long *stats;	/* [0]: nodes opened, [1]: distances */
	const volatile int *stop;	/* the call's stop flag (device memory), or NULL */
};

/* ------------------------------------------------------------------ */
/* the nodes                                                           */
/* ------------------------------------------------------------------ */

/* Each leaf's least core and least row. */
__global__ void
k_hb_nodes_leaf(hb_mst S)
{
	const int64_t L = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (L >= S.T.nleaf)
		return;
	const int	b = tr_off(L, S.T.n, S.T.depth),
				e = tr_off(L + 1, S.T.n, S.T.depth);
	const int64_t h = S.T.nleaf - 1 + L;
	double		c = INFINITY;
	int			r = INT32_MAX;

	for (int p = b; p < e; p++)
	{
		c = S.core[p] < c ? S.core[p] : c;
		r = S.T.perm[p] < r ? S.T.perm[p] : r;
	}
	S.ncore[h] = c;
	S.nrow[h] = r;
}

/* The nodes of level l from their children. */
__global__ void
k_hb_nodes_up(hb_mst S, int l)
{
	const int64_t j = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (j >= ((int64_t) 1 << l))
		return;
	const int64_t h = ((int64_t) 1 << l) - 1 + j,
				a = 2 * h + 1,
				b = a + 1;

	S.ncore[h] = S.ncore[a] < S.ncore[b] ? S.ncore[a] : S.ncore[b];
	S.nrow[h] = S.nrow[a] < S.nrow[b] ? S.nrow[a] : S.nrow[b];
}

/* Each leaf's label: its rows' common component, or -1. */
__global__ void
k_hb_nlab_leaf(hb_mst S)
{
	const int64_t L = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (L >= S.T.nleaf)
		return;
	const int	b = tr_off(L, S.T.n, S.T.depth),
				e = tr_off(L + 1, S.T.n, S.T.depth);
	int			lab = S.label[b];

	for (int p = b + 1; p < e && lab >= 0; p++)
		if (S.label[p] != lab)
			lab = -1;
	S.nlab[S.T.nleaf - 1 + L] = lab;
}

/* Node j of level l: its children's common label, or -1. */
__device__ __forceinline__ void
hb_nlab_node(const hb_mst &S, int l, int64_t j)
{
	const int64_t h = ((int64_t) 1 << l) - 1 + j;
	const int	a = S.nlab[2 * h + 1],
				b = S.nlab[2 * h + 2];

	S.nlab[h] = a == b ? a : -1;
}

__global__ void
k_hb_nlab_up(hb_mst S, int l)
{
	const int64_t j = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (j < ((int64_t) 1 << l))
		hb_nlab_node(S, l, j);
}

/* Levels top - 1 .. 0 in one block, a barrier between levels. */
#define HB_NLAB_TOP 12			/* levels of at most 2048 nodes */
#define HB_NLAB_T 1024

__global__ void __launch_bounds__(HB_NLAB_T)
k_hb_nlab_top(hb_mst S, int top)
{
	for (int l = top - 1; l >= 0; l--)
	{
		for (int64_t j = threadIdx.x; j < ((int64_t) 1 << l); j += blockDim.x)
			hb_nlab_node(S, l, j);
		__syncthreads();
	}
}

/* The leaves', then each level's up to the root: the small ones at once. */
static gc_code
hb_node_labels(gc_dev &D, const hb_mst &S, gc_status *st)
{
	const int	top = S.T.depth < HB_NLAB_TOP ? S.T.depth : HB_NLAB_TOP;

	HB_CK(gc_launch(k_hb_nlab_leaf, S.T.nleaf, HB_THREADS, HB_THREADS, D.s, S));
	for (int l = S.T.depth - 1; l >= top; l--)
		HB_CK(gc_launch(k_hb_nlab_up, (int64_t) 1 << l, HB_THREADS, HB_THREADS, D.s, S, l));
	if (top > 0)
		HB_CK(gc_launch(k_hb_nlab_top, HB_NLAB_T, HB_NLAB_T, HB_NLAB_T, D.s, S, top));
	return GC_OK;
}

/* ------------------------------------------------------------------ */
/* a round                                                             */
/* ------------------------------------------------------------------ */

__global__ void
k_hb_init(hb_mst S)
{
	const int	p = blockIdx.x * blockDim.x + threadIdx.x;

	if (p >= S.T.n)
		return;
	S.label[p] = p;
	S.bw[p] = HB_INF_BITS;
	S.bab[p] = HB_NO_PAIR;
	S.bo[p] = -1;
	S.exact[p] = 0;
}

/*
 * Round 1's seeds (hb_seeds): each row's least edge to the rows of its
 * list, and whether it is exact, the row's least edge of all.  Every edge
 * of row p weighs at least core_p; one that weighs core_p joins it to a
 * row within core_p * alpha, so for alpha <= 1 within core_p, all of them
 * in the list when it is tight.  So an edge of the list that weighs
 * core_p, the least pair of them, is p's least.  Distances as the
 * search's (gc_dist2_f64 is hb_query::dist2).  A position out of range
 * is skipped: a warp of the core distances' search that saw the stop flag
 * left its rows' lists unwritten, and the call ends cancelled.
 */
__global__ void
k_hb_from_knn(hb_mst S, const int *__restrict__ nbr, const uint8_t *__restrict__ tight,
			  int k1)
{
	const int	p = blockIdx.x * blockDim.x + threadIdx.x;
	const int	n = S.T.n,
				d = S.T.d;

	if (p >= n)
		return;
	const double ci = S.core[p];
	const int	ri = S.T.perm[p];
	const float *xp = S.T.Xs + (int64_t) p * d;
	double		bw = INFINITY;
	unsigned long long bab = HB_NO_PAIR;
	int			bo = -1;

	for (int j = 0; j < k1; j++)
	{
		const int	s = nbr[(int64_t) j * n + p];

		/* none (-1), itself, or never written: a cancelled search's warp */
		if (s < 0 || s >= n || s == p)
			continue;

		const double w = hb_weight(S.metric, S.alpha, ci, S.core[s],
								   gc_dist2_f64(xp, S.T.Xs + (int64_t) s * d, d));
		const unsigned long long ab = hb_pair(ri, S.T.perm[s]);

		if (w < bw || (w == bw && ab < bab))
		{
			bw = w;
			bab = ab;
			bo = s;
		}
	}
	if (bo < 0)
		return;
	S.bw[p] = hb_bits(bw);
	S.bab[p] = bab;
	S.bo[p] = bo;
	S.exact[p] = tight[p] && S.alpha <= 1.0 && bw == ci;
}

/* Each root's bound and pair cleared, and its parent itself. */
__global__ void
k_hb_reset(hb_mst S)
{
	const int	p = blockIdx.x * blockDim.x + threadIdx.x;

	if (p >= S.T.n || S.label[p] != p)
		return;
	S.cw[p] = HB_INF_BITS;
	S.cab[p] = HB_NO_PAIR;
	S.parent[p] = p;
}

/*
 * Step 1: the rows' last edges kept where they still leave the component
 * (and searched again unless they were exact), the others cleared; the
 * components' bounds from those and from each pair of neighbouring
 * positions of different components.
 */
__global__ void
k_hb_seed(hb_mst S)
{
	const int	p = blockIdx.x * blockDim.x + threadIdx.x;
	const int	n = S.T.n,
				d = S.T.d;

	if (p >= n)
		return;
	const int	c = S.label[p],
				o = S.bo[p];

	if (o >= 0 && S.label[o] != c)
	{
		atomicMin(&S.cw[c], S.bw[p]);
		S.go[p] = !S.exact[p];
	}
	else
	{
		S.bw[p] = HB_INF_BITS;
		S.bab[p] = HB_NO_PAIR;
		S.bo[p] = -1;
		S.exact[p] = 0;
		S.go[p] = 1;
	}
	if (p + 1 < n && S.label[p + 1] != c)
	{
		const double s = gc_dist2_f64(S.T.Xs + (int64_t) p * d,
									  S.T.Xs + (int64_t) (p + 1) * d, d);
		const unsigned long long w =
			hb_bits(hb_weight(S.metric, S.alpha, S.core[p], S.core[p + 1], s));

		atomicMin(&S.cw[c], w);
		atomicMin(&S.cw[S.label[p + 1]], w);
	}
}

/* cw[c] as it is now (it only falls, and 64-bit loads are whole). */
__device__ __forceinline__ double
hb_load_cw(const hb_mst &S, int c)
{
	return hb_dbl(*(volatile const unsigned long long *) &S.cw[c]);
}

/*
 * Whether a lane with best (bw, bab), bound = min(bw, cw), must open node
 * h: false when no edge of the node can come before its best, nor weigh at
 * most cw.  *exact is cleared when only cw closed it.
 */
template <int DQ>
__device__ __forceinline__ bool
hb_open(const hb_mst &S, const hb_query<DQ> &q, int64_t h, double ci, int ri,
		double bw, unsigned long long bab, double bound, bool *exact)
{
	const int	d = S.T.d;
	double		lb = S.ncore[h];

	lb = ci > lb ? ci : lb;
	if (!(lb > bound))
	{
		const double s = q.box2(S.T.lo + h * d, S.T.hi + h * d),
					dl = gc_hdbscan_dist(S.metric, s) / S.alpha;

		lb = dl > lb ? dl : lb;
	}
	if (lb > bound)
	{
		*exact = *exact && lb > bw;
		return false;
	}
	/* weights tie with the best at best: then only a lesser pair helps */
	return !(lb == bw && hb_pair(ri, S.nrow[h]) > bab);
}

/*
 * Whether row p of component c (core ci), inside the largest node A whose
 * rows all lie in c, has every edge out of c heavier than bound: each row
 * of another component lies beyond a plane of a split above A, so past a
 * face of A's box, and its weight is at least max(ci, that face's
 * distance).  Then the row needs no walk, and as the root's bound would,
 * this clears *exact unless the bound was its own best.
 */
template <int DQ>
__device__ __forceinline__ bool
hb_inside(const hb_mst &S, const hb_query<DQ> &q, int p, int c, double ci,
		  double bound, double bw, bool *exact)
{
	const int	d = S.T.d;
	int64_t		h = S.T.nleaf - 1 + tr_node_of(p, S.T.n, S.T.depth);
	double		lb;

	if (S.nlab[h] != c)
		return false;
	while (h > 0 && S.nlab[(h - 1) / 2] == c)
		h = (h - 1) / 2;
	lb = gc_hdbscan_dist(S.metric, q.out2(S.T.lo + h * d, S.T.hi + h * d)) / S.alpha;
	lb = ci > lb ? ci : lb;
	if (!(lb > bound))
		return false;
	*exact = *exact && lb > bw;
	return true;
}

/*
 * Step 2a: which rows search.  A row that searches (go) but lies inside a
 * node of its component's alone, beyond the bound min(its best, cw[c]) as
 * seeding left it, would open nothing (hb_inside): its exact flag is set
 * here and it does not search.  Not needed in round 1: every leaf holds
 * rows of several components then.
 */
template <int DQ>
__global__ void
k_hb_go(hb_mst S)
{
	const int	p = blockIdx.x * blockDim.x + threadIdx.x;

	if (p >= S.T.n || !S.go[p])
		return;

	const int	c = S.label[p];
	const hb_query<DQ> q(S.T.Xs + (int64_t) p * S.T.d, S.T.d);
	const double bw = hb_dbl(S.bw[p]),
				cw = hb_load_cw(S, c);
	bool		exact = true;

	if (hb_inside(S, q, p, c, S.core[p], bw < cw ? bw : cw, bw, &exact))
	{
		S.exact[p] = exact;
		S.go[p] = 0;
	}
}

/*
 * Step 2b: the least edge to another component of each row of list[i0 ..
 * i0 + cnt - 1] (those past the list's count: none), from its seed; the
 * list keeps the positions' order, so a warp's rows lie near each other.
 * Not listed: positions i0 .. i0 + cnt - 1, those with go set.  A warp
 * that sees the stop flag raised leaves, writing none of its rows' bests.
 */
template <int DQ>
__global__ void __launch_bounds__(HB_T)
k_hb_search(hb_mst S, int i0, int cnt, bool listed)
{
	const unsigned FULL = 0xffffffffu;
	const int	t = blockIdx.x * HB_T + threadIdx.x;
	const int	d = S.T.d;
	const int64_t first_leaf = S.T.nleaf - 1;
	const int	rest = listed ? *S.nlist - i0 : cnt,
				lim = cnt < rest ? cnt : rest;

	if ((t & ~31) >= lim)
		return;					/* the whole warp is past the batch */

	const int	i = i0 + (t < lim ? t : 0),
				p = listed ? S.list[i] : i;
	const bool	active = t < lim && (listed || S.go[p]);

	if (!__any_sync(FULL, active))
		return;

	const int	c = S.label[p],
				ri = S.T.perm[p];
	const double ci = S.core[p];
	const hb_query<DQ> q(S.T.Xs + (int64_t) p * d, d);
	double		bw = hb_dbl(S.bw[p]);
	unsigned long long bab = S.bab[p];
	int			bo = S.bo[p];
	double		cw = hb_load_cw(S, c);
	double		bound = bw < cw ? bw : cw;
	bool		exact = true;
	unsigned long long opened = 0,
				dists = 0;
	int			stack[HB_STACK];
	int			sp = 0;
	unsigned	leaves = 0;		/* opened by the warp */

	stack[sp++] = 0;
	while (sp > 0)
	{
		const int	node = stack[--sp];
		bool		need = active && S.nlab[node] != c;

		if (need)
			need = hb_open<DQ>(S, q, node, ci, ri, bw, bab, bound, &exact);
		if (!__any_sync(FULL, need))
			continue;
		if (node >= first_leaf)
		{
			if (++leaves % HB_STOP_EVERY == 0 && gc_warp_stopped(S.stop))
				return;
			if (!need)
				continue;
			const int64_t leaf = node - first_leaf;
			const int	b = tr_off(leaf, S.T.n, S.T.depth),
						e = tr_off(leaf + 1, S.T.n, S.T.depth);

			opened++;
			for (int s = b; s < e; s++)
			{
				if (S.label[s] == c)
					continue;

				const double cs = S.core[s],
							m = ci > cs ? ci : cs;

				if (m > bound)
				{
					exact = exact && m > bw;
					continue;
				}

				const double w = hb_weight(S.metric, S.alpha, ci, cs,
										   q.dist2(S.T.Xs + (int64_t) s * d));
				const unsigned long long ab = hb_pair(ri, S.T.perm[s]);

				dists++;
				if (w < bw || (w == bw && ab < bab))
				{
					bw = w;
					bab = ab;
					bo = s;
					bound = w < bound ? w : bound;
				}
			}
			/* publish the best, and learn the component's */
			if (bw < cw)
				cw = hb_dbl(atomicMin(&S.cw[c], hb_bits(bw)));
			else
				cw = hb_load_cw(S, c);
			cw = bw < cw ? bw : cw;
			bound = bw < cw ? bw : cw;
		}
		else
		{
			const int	a = 2 * node + 1,
						b = a + 1;
			bool		a_near = false;

			if (need)
			{
				const double da = q.box2(S.T.lo + (int64_t) a * d, S.T.hi + (int64_t) a * d),
							db = q.box2(S.T.lo + (int64_t) b * d, S.T.hi + (int64_t) b * d);

				a_near = da < db || (da == db && S.nrow[a] <= S.nrow[b]);
				opened++;
			}

			hb_push_children(stack, sp, a, b, a_near, need);
		}
	}
	if (active)
	{
		S.bw[p] = hb_bits(bw);
		S.bab[p] = bab;
		S.bo[p] = bo;
		S.exact[p] = exact;
		if (bw < cw)
			atomicMin(&S.cw[c], hb_bits(bw));
	}
	if (S.stats != nullptr)
	{
		/* one atomic a warp */
		for (int o = 16; o > 0; o >>= 1)
		{
			opened += __shfl_xor_sync(FULL, opened, o);
			dists += __shfl_xor_sync(FULL, dists, o);
		}
		if ((threadIdx.x & 31) == 0)
		{
			atomicAdd(&S.stats[0], opened);
			atomicAdd(&S.stats[1], dists);
		}
	}
}

/* Step 3: each component's least pair among its rows of the least weight. */
__global__ void
k_hb_pick(hb_mst S)
{
	const int	p = blockIdx.x * blockDim.x + threadIdx.x;

	if (p >= S.T.n)
		return;
	const int	c = S.label[p];
	const unsigned long long w = S.bw[p];

	if (w != HB_INF_BITS && w == S.cw[c])
		atomicMin(&S.cab[c], S.bab[p]);
}

/*
 * Step 4: each root c hangs under the component at the other end of its
 * edge, which it appends, unless that component chose the same edge and
 * has the higher root (it hangs under c and appends it).
 */
__global__ void
k_hb_hook(hb_mst S)
{
	const int	c = blockIdx.x * blockDim.x + threadIdx.x;
	const int	n = S.T.n;

	if (c >= n || S.label[c] != c)
		return;

	const unsigned long long ab = S.cab[c];

	if (ab == HB_NO_PAIR)
	{
		atomicOr(&S.info[1], HB_ERR_NOEDGE);
		return;
	}

	const unsigned ra = (unsigned) (ab >> 32),
				rb = (unsigned) (ab & 0xffffffffu);

	if (ra >= (unsigned) n || rb >= (unsigned) n)
	{
		atomicOr(&S.info[1], HB_ERR_PAIR);
		return;
	}

	const int	la = S.label[S.T.pos_of_row[ra]],
				lb = S.label[S.T.pos_of_row[rb]];
	const int	other = la == c ? lb : la;

	if ((la != c && lb != c) || other == c)
	{
		atomicOr(&S.info[1], HB_ERR_PAIR);
		return;
	}
	if (S.cab[other] == ab && c < other)
		return;					/* the same edge: other appends it */
	S.parent[c] = other;

	const unsigned e = atomicAdd(&S.info[0], 1u);

	if (e >= (unsigned) (n - 1))
	{
		atomicOr(&S.info[1], HB_ERR_EDGES);
		return;
	}
	S.ew[e] = S.cw[c];
	S.eab[e] = ab;
}

/*
 * One step of pointer jumping over the roots of the round (their labels
 * are still their own): parent[c] = parent[parent[c]].  A parent read
 * while another thread writes it is its old or its new value, both above
 * c, so each launch at least halves every path to a root.
 */
__global__ void
k_hb_jump(hb_mst S)
{
	const int	c = blockIdx.x * blockDim.x + threadIdx.x;

	if (c >= S.T.n || S.label[c] != c)
		return;

	volatile int *par = S.parent;
	const int	p = par[c],
				pp = par[p];

	if (pp != p)
		par[c] = pp;
}

/* Every position relabelled: its old root's new root. */
__global__ void
k_hb_relabel(hb_mst S)
{
	const int	p = blockIdx.x * blockDim.x + threadIdx.x;

	if (p < S.T.n)
		S.label[p] = S.parent[S.label[p]];
}

/* At the end: every position in position 0's component. */
__global__ void
k_hb_check_one(hb_mst S)
{
	const int	p = blockIdx.x * blockDim.x + threadIdx.x;

	if (p < S.T.n && S.label[p] != S.label[0])
		atomicOr(&S.info[1], HB_ERR_SPLIT);
}

/* ------------------------------------------------------------------ */
/* the rounds                                                          */
/* ------------------------------------------------------------------ */

/*
 * Steps 2a and 2b: the rows that search into S.list (in order: CUB's
 * select over the go flags), then their searches, HB_SEARCH_ROWS of the
 * list a launch (n in all: those past its count leave at once).  Not in
 * round 1 (listed false), whose few searching rows lie apart, one in many
 * warps: packed, a warp's 32 would walk 32 distant paths.
 */
template <int DQ>
static gc_code
hb_search(gc_dev &D, const hb_mst &S, int *nlist, bool listed, gc_status *st)
{
	const int	n = S.T.n;
	size_t		bytes = D.cub_bytes;

	if (listed)
	{
		HB_CK(gc_launch(k_hb_go<DQ>, n, HB_THREADS, HB_THREADS, D.s, S));
		HB_CK(cub::DeviceSelect::Flagged(D.cub_tmp, bytes, thrust::counting_iterator<int>(0),
										 S.go, S.list, nlist, n, D.s));
	}
	for (int64_t i0 = 0; i0 < n; i0 += HB_SEARCH_ROWS)
	{
		const int	cnt = (int) (n - i0 < HB_SEARCH_ROWS ? n - i0 : HB_SEARCH_ROWS);

		HB_CK(gc_launch(k_hb_search<DQ>, cnt, HB_T, HB_T, D.s, S, (int) i0, cnt, listed));
	}
	return GC_OK;
}

size_t
hb_boruvka_bytes(int64_t n, int d)
{
	/*
	 * label, bo, parent, list 4 each; bw, bab, cw, cab 8 each; exact, go 1
	 * each: 50 a row; per node ncore 8, nrow and nlab 4 (nodes < 2 n /
	 * leaf)
	 */
	return (size_t) n * 50 + (size_t) (2 * n / hb_leaf(d) + 2) * 16 + 64;
}

gc_code
hb_boruvka(gc_dev &D, const gc_ctx *ctx, const gc_kdtree &T,
		   const double *core, const hb_seeds &Sd, double alpha, gc_metric metric,
		   unsigned long long *ew, unsigned long long *eab, int *rounds,
		   gc_status *st)
{
	const int	n = T.n;
	const int	dq = hb_dq(T.d);
	hb_mst		S;
	int		   *nlist;
	unsigned	info[2] = {0, 0};
	int64_t		edges = 0;
	gc_code		rc;

	*rounds = 0;
	if (T.depth > HB_MAX_DEPTH)
		return gc_fail(st, GC_EDEVICE, "%s: tree too deep (%d)", HB_WHO, T.depth);
	memset(&S, 0, sizeof(S));
	S.T = T;
	S.metric = metric;
	S.alpha = alpha;
	S.core = core;
	S.ew = ew;
	S.eab = eab;
	S.stop = D.stop_flag();
	HB_ALLOC(S.ncore, T.nnode);
	HB_ALLOC(S.nrow, T.nnode);
	HB_ALLOC(S.nlab, T.nnode);
	HB_ALLOC(S.label, n);
	HB_ALLOC(S.bw, n);
	HB_ALLOC(S.bab, n);
	HB_ALLOC(S.bo, n);
	HB_ALLOC(S.exact, n);
	HB_ALLOC(S.go, n);
	HB_ALLOC(S.cw, n);
	HB_ALLOC(S.cab, n);
	HB_ALLOC(S.parent, n);
	HB_ALLOC(S.list, n);
	HB_ALLOC(nlist, 1);
	S.nlist = nlist;
	{
		size_t		bytes = 0;

		HB_CK(cub::DeviceSelect::Flagged(nullptr, bytes, thrust::counting_iterator<int>(0),
										 S.go, S.list, nlist, n, D.s));
		HB_CK(D.scratch(bytes));
	}
	HB_ALLOC(S.info, 2);
	HB_CK(cudaMemsetAsync(S.info, 0, 2 * sizeof(unsigned), D.s));
	if (hb_tracing())
	{
		HB_ALLOC(S.stats, 2);
		HB_CK(cudaMemsetAsync(S.stats, 0, 2 * sizeof(unsigned long long), D.s));
	}

	/* the nodes' least cores and rows; every row its own component */
	HB_CK(gc_launch(k_hb_nodes_leaf, T.nleaf, HB_THREADS, HB_THREADS, D.s, S));
	for (int l = T.depth - 1; l >= 0; l--)
		HB_CK(gc_launch(k_hb_nodes_up, (int64_t) 1 << l, HB_THREADS, HB_THREADS, D.s, S, l));
	HB_CK(gc_launch(k_hb_init, n, HB_THREADS, HB_THREADS, D.s, S));
	if (Sd.nbr != nullptr)
	{
		HB_CK(gc_launch(k_hb_from_knn, n, HB_THREADS, HB_THREADS, D.s, S,
						(const int *) Sd.nbr, (const uint8_t *) Sd.tight, Sd.k1));
		D.drop(Sd.nbr);
		D.drop(Sd.tight);
	}
	if ((rc = hb_node_labels(D, S, st)) != GC_OK)
		return rc;

	while (edges < n - 1)
	{
		const int64_t comps = n - edges;
		double		t0 = gc_now_ms();
		int			jumps = 1;
		bool		listed;

		if (*rounds >= HB_MAX_ROUNDS)
			return gc_fail(st, GC_EDEVICE, "%s: internal error: %d rounds", HB_WHO, *rounds);
		++*rounds;
		gc_report(ctx, GC_PHASE_ITERATE, *rounds, 0, edges, n - 1, NAN);

		HB_CK(gc_launch(k_hb_reset, n, HB_THREADS, HB_THREADS, D.s, S));
		HB_CK(gc_launch(k_hb_seed, n, HB_THREADS, HB_THREADS, D.s, S));
		listed = *rounds > 1;
		rc = dq == 4 ? hb_search<4>(D, S, nlist, listed, st) :
			dq == 8 ? hb_search<8>(D, S, nlist, listed, st) :
			dq == 16 ? hb_search<16>(D, S, nlist, listed, st) :
			hb_search<0>(D, S, nlist, listed, st);
		if (rc != GC_OK)
			return rc;
		HB_CK(gc_launch(k_hb_pick, n, HB_THREADS, HB_THREADS, D.s, S));
		HB_CK(gc_launch(k_hb_hook, n, HB_THREADS, HB_THREADS, D.s, S));
		while (((int64_t) 1 << (jumps - 1)) < comps)
			jumps++;			/* ceil(log2(comps)) + 1 */
		for (int j = 0; j < jumps; j++)
			HB_CK(gc_launch(k_hb_jump, n, HB_THREADS, HB_THREADS, D.s, S));
		HB_CK(gc_launch(k_hb_relabel, n, HB_THREADS, HB_THREADS, D.s, S));
		if ((rc = hb_node_labels(D, S, st)) != GC_OK ||
			(rc = hb_read_counts(D, ctx, S.info, info, 2, 1, "Borůvka's rounds", st)) != GC_OK)
			return rc;
		if ((int64_t) info[0] <= edges)
			return gc_fail(st, GC_EDEVICE, "%s: internal error: round %d added no edge",
						   HB_WHO, *rounds);
		edges = info[0];
		if (hb_tracing())
		{
			unsigned long long stats[2];
			int			searched;

			HB_CK(cudaMemcpy(stats, S.stats, sizeof(stats), cudaMemcpyDeviceToHost));
			searched = -1;		/* not counted unless listed */
			if (listed)
				HB_CK(cudaMemcpy(&searched, nlist, sizeof(int), cudaMemcpyDeviceToHost));
			hb_trace("round %d: %lld components -> %lld, %.2f ms, rows searched %d, nodes opened %llu, distances %llu",
					 *rounds, (long long) comps, (long long) (n - edges),
					 gc_now_ms() - t0, searched, stats[0], stats[1]);
			HB_CK(cudaMemsetAsync(S.stats, 0, sizeof(stats), D.s));
		}
	}
	HB_CK(gc_launch(k_hb_check_one, n, HB_THREADS, HB_THREADS, D.s, S));
	if ((rc = hb_read_counts(D, ctx, S.info, info, 2, 1, "Borůvka's rounds", st)) != GC_OK)
		return rc;
	/* the sort reuses this memory */
	for (void *a : {(void *) S.ncore, (void *) S.nrow, (void *) S.nlab, (void *) S.label,
			(void *) S.bw, (void *) S.bab, (void *) S.bo, (void *) S.exact, (void *) S.go,
			(void *) S.cw, (void *) S.cab, (void *) S.parent, (void *) S.list,
			(void *) nlist, (void *) S.info, (void *) S.stats})
		if (a != nullptr)
			D.drop(a);
	return GC_OK;
}

#pragma GCC visibility pop
