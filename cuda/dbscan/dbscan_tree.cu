/*
 * dbscan_tree.cu — the GPU DBSCAN's kd-tree, for any d: the index above
 * d = 3 (and below it where the grid's cell numbers would overflow), and
 * the passes that both algorithms run on it.
 *
 * The tree is common/kdtree.cuh's (balanced, implicit, every node's exact
 * box, leaves of 32 to 64 points in position order; common/kdtree.cu
 * builds it on the GPU).
 *
 * Queries run by node one level above the leaves (64 to 128 points, one
 * thread each; tr_query).  A node's candidate leaves are those whose box
 * lies within eps of its box (metric.h's box-box bound, exact in float): a
 * thread per node walks the tree with a stack, nearer child first, and
 * writes them into a list; when all lists would exceed a budget of about 8
 * entries a point they are written and used a chunk of nodes at a time.
 * Every pass then loads each candidate leaf's rows into shared memory in
 * tiles of 32 rows, as the brute force does; a thread skips a leaf whose
 * box is farther than eps from its point, and a warp whose threads all
 * skip does not compute the tile.  Each decision is gc_dist2 <= eps2, the
 * CPU's own, so the tree changes the speed, never the labels.
 *
 * The passes:
 *   count   neighbours of each point, stopping at min_pts (a block stops
 *           when all its points have min_pts): the nearest leaves of each
 *           list first, then the points still short (tr_count_gathered);
 *           from 16 dimensions its tiles' decisions come from the
 *           tensor-core screen (dbscan_screen.cuh), the same decisions;
 *   union   (union-find) each core point with every core neighbour of
 *           higher position, skipping pairs whose roots are already the
 *           same (a tile no lane needs is not computed); before it, each
 *           core point joins the core points among the neighbours its
 *           count kept, with no distance computed; on the screen from 16
 *           to 32 dimensions;
 *   border  each non-core point's nearest core neighbour, ties to the
 *           lowest input row (the CPU's rule), as the least (dist2 bits,
 *           row);
 *   expand  (dclust, dbscan_dclust.cu) each frontier point's core
 *           neighbours claimed for its chain, collisions recorded.
 */
#include <algorithm>
#include <stdlib.h>
#include <string.h>

#include <cub/device/device_scan.cuh>

#include "dbscan_gpu.cuh"
#include "dbscan_screen.cuh"

#define TR_TJ 32				/* candidate rows per tile */
#define TR_STACK 128			/* > 2 (depth + 1) for depth <= 31 */
#define TR_LIST_PER_POINT 8		/* list budget: entries a point */
#define TR_LIST_MIN (8 << 20)	/* ... and at least this many */
#define TR_LIST_MIN_GATHER (1 << 20)	/* the count's gathered lists: at least */
#define TR_LAUNCH_NODES 8192	/* query nodes a launch (cancel polls) */
#define TR_NEAR 8				/* count: leaves of the first pass */
#define TR_NB_MAX 32			/* neighbours kept a point, at most */
#define TR_SPREAD 16			/* union: every 16th node goes first */
#define TR_GATHER_LEVELS 4		/* count: its short points' subtrees, at most */

/* ------------------------------------------------------------------ */
/* the candidate lists                                                 */
/* ------------------------------------------------------------------ */

/*
 * gc_boxbox_mindist2(q's box, node h's box) and the same for node g, bit
 * for bit, computed by a warp: each lane forms the terms of its dimensions
 * (lane, lane + 32, ...), and the sums take them in dimension order, each
 * addition rounded on its own, through shuffles.  ch - cg: the squared
 * distance of h's box centre to q's less g's (in any order of rounding:
 * it only orders the children when both bounds are equal, as they are, 0,
 * for every box that overlaps q's).
 */
__device__ __forceinline__ void
tr_boxbox2_warp(const float *__restrict__ qlo, const float *__restrict__ qhi,
				const float *__restrict__ lo, const float *__restrict__ hi,
				int64_t h, int64_t g, int d, int lane, float &sh, float &sg,
				float &cdiff)
{
	float		c = 0.0f;

	sh = 0.0f;
	sg = 0.0f;
	for (int c0 = 0; c0 < d; c0 += 32)
	{
		const int	j = c0 + lane,
					m = d - c0 < 32 ? d - c0 : 32;
		float		th = 0.0f,
					tg = 0.0f;

		if (j < d)
		{
			const float alo = qlo[j],
						ahi = qhi[j];
			const float hlo = lo[h * d + j],
						hhi = hi[h * d + j],
						glo = lo[g * d + j],
						ghi = hi[g * d + j];
			float		t = 0.0f,
						u = 0.0f;

			if (hhi < alo)
				t = gc_fsub(alo, hhi);
			else if (ahi < hlo)
				t = gc_fsub(hlo, ahi);
			if (ghi < alo)
				u = gc_fsub(alo, ghi);
			else if (ahi < glo)
				u = gc_fsub(glo, ahi);
			th = __fmul_rn(t, t);
			tg = __fmul_rn(u, u);

			/* twice the centres' offsets from q's centre */
			const float qc = alo + ahi,
						eh = hlo + hhi - qc,
						eg = glo + ghi - qc;

			c += eh * eh - eg * eg;
		}
		for (int k = 0; k < m; k++)
		{
			sh = __fadd_rn(sh, __shfl_sync(0xffffffffu, th, k));
			sg = __fadd_rn(sg, __shfl_sync(0xffffffffu, tg, k));
		}
	}
	for (int o = 16; o > 0; o >>= 1)
		c += __shfl_xor_sync(0xffffffffu, c, o);
	cdiff = __shfl_sync(0xffffffffu, c, 0);	/* lane 0's: one decision a warp */
}

#define TR_LIST_WARPS 4			/* query nodes a block of k_tr_list */

/*
 * List q's candidate leaves (box-box bound <= eps2), nearer child first:
 * of query node q, or of node hs[q] when hs is given; counted (out ==
 * NULL) or written from out[at[q] - base].  A warp a node, walking the
 * tree with a stack in shared memory, its lanes sharing each bound's
 * dimensions (tr_boxbox2_warp): a node with a long list takes 32 threads'
 * work, not one thread's.
 */
__global__ void __launch_bounds__(32 * TR_LIST_WARPS)
k_tr_list(db_tree T, float eps2, int64_t q0, int64_t q1, const int *__restrict__ hs,
		  const int64_t *__restrict__ at, int64_t base, int *cnt, int *out)
{
	__shared__ int s_stack[TR_LIST_WARPS][TR_STACK];
	const int	lane = threadIdx.x & 31,
				w = threadIdx.x >> 5;
	const int64_t q = q0 + (int64_t) blockIdx.x * TR_LIST_WARPS + w;

	if (q >= q1)
		return;					/* the whole warp */
	const int	d = T.d;
	const int64_t hq = hs ? hs[q] : T.nq - 1 + q;
	const float *qlo = T.lo + hq * d,
			   *qhi = T.hi + hq * d;
	const int64_t first_leaf = T.nleaf - 1;
	int		   *stack = s_stack[w];
	int			top = 0,
				found = 0;
	int		   *o = out ? out + (at[q] - base) : nullptr;
	float		r0,
				r1,
				cd;

	/* the root (its bound computed twice: the pair's second is unused) */
	tr_boxbox2_warp(qlo, qhi, T.lo, T.hi, 0, 0, d, lane, r0, r1, cd);
	if (r0 <= eps2)
	{
		if (lane == 0)
			stack[0] = 0;
		top = 1;
	}
	__syncwarp();
	while (top > 0)
	{
		int			h = stack[--top];

		__syncwarp();			/* every lane has read it before a push */
		if (h >= first_leaf)
		{
			if (o && lane == 0)
				o[found] = (int) (h - first_leaf);
			found++;
			continue;
		}
		int			a = 2 * h + 1,
					b = 2 * h + 2;
		float		da,
					db;

		tr_boxbox2_warp(qlo, qhi, T.lo, T.hi, a, b, d, lane, da, db, cd);
		/*
		 * the nearer child is pushed last, popped first: by the bound, and
		 * between equal bounds by the centres (then the first leaves of a
		 * list hold most of a point's neighbours, and the count's first
		 * pass, over TR_NEAR leaves, settles more points)
		 */
		if (da > db || (da == db && cd > 0.0f))
		{
			int			t = a;
			float		u = da;

			a = b;
			b = t;
			da = db;
			db = u;
		}
		if (lane == 0)
		{
			if (db <= eps2)
				stack[top] = b;
			if (da <= eps2)
				stack[top + (db <= eps2)] = a;
		}
		top += (db <= eps2) + (da <= eps2);
		__syncwarp();
	}
	if (cnt && lane == 0)
		cnt[q] = found;
}

/* at[q] = the sum of cnt[0 .. q), for q <= nq (in 64 bits). */
__global__ void
k_tr_widen(const int *__restrict__ cnt, int64_t nq, int64_t *w)
{
	int64_t		q = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (q <= nq)
		w[q] = q < nq ? cnt[q] : 0;
}

gc_code
db_tree_lists(db_dev &D, const gc_ctx *ctx, const db_tree &T, float eps2,
			  db_lists &L, gc_status *st, const int *hs, int64_t m)
{
	int		   *cnt;

	L.hs = hs;
	if (hs == nullptr)
		m = T.nq;

	std::vector<int64_t> at((size_t) m + 1);

	DB_ALLOC(cnt, m);
	DB_ALLOC(L.at, m + 1);
	DB_CK(gc_launch(k_tr_list, m, TR_LIST_WARPS, 32 * TR_LIST_WARPS, D.s, T, eps2, (int64_t) 0,
					m, hs, (const int64_t *) nullptr, (int64_t) 0, cnt, (int *) nullptr));
	DB_CK(gc_launch(k_tr_widen, m + 1, DB_THREADS, DB_THREADS, D.s, (const int *) cnt, m, L.at));
	D.drop(cnt);
	{
		size_t		bytes = 0;

		DB_CK(cub::DeviceScan::ExclusiveSum(nullptr, bytes, L.at, L.at, m + 1, D.s));
		DB_CK(D.scratch(bytes));
		bytes = D.cub_bytes;
		DB_CK(cub::DeviceScan::ExclusiveSum(D.cub_tmp, bytes, L.at, L.at, m + 1, D.s));
	}
	DB_CK(cudaMemcpyAsync(at.data(), L.at, sizeof(int64_t) * at.size(),
						  cudaMemcpyDeviceToHost, D.s));
	gc_code		rc = db_sync_poll(D, ctx, st);

	if (rc != GC_OK)
		return rc;

	/*
	 * chunks of lists that fit the budget (gc_dbscan_gpu_mem_bytes counts
	 * both sets: the count's gathered lists at least TR_LIST_MIN_GATHER)
	 */
	int64_t		budget = (int64_t) TR_LIST_PER_POINT * T.n;
	const int64_t least = hs ? TR_LIST_MIN_GATHER : TR_LIST_MIN;

	if (budget < least)
		budget = least;
	L.cut.clear();
	L.cut.push_back(0);
	for (int64_t q = 0; q < m; q++)
		if (q > L.cut.back() && at[(size_t) q + 1] - at[(size_t) L.cut.back()] > budget)
			L.cut.push_back(q);
	L.cut.push_back(m);
	L.host_at.swap(at);
	L.written = -1;
	int64_t		cap = 1;

	for (size_t c = 0; c + 1 < L.cut.size(); c++)
	{
		int64_t		e = L.host_at[(size_t) L.cut[c + 1]] - L.host_at[(size_t) L.cut[c]];

		cap = e > cap ? e : cap;
	}
	DB_ALLOC(L.leaf, cap);
	if (!hs)
		db_phases.pairs = L.host_at[(size_t) m];
	return GC_OK;
}

void
db_tree_cuts(const db_lists &L, const int *qs, int64_t m, int64_t *qs_cut)
{
	for (size_t c = 0; c < L.cut.size(); c++)
		qs_cut[c] = std::lower_bound(qs, qs + m, (int) L.cut[c]) - qs;
}

/* Writes chunk c's lists (unless they are there already). */
gc_code
db_tree_chunk(db_dev &D, const db_tree &T, float eps2, db_lists &L, int c,
			  gc_status *st)
{
	if (L.written == c)
		return GC_OK;
	int64_t		q0 = L.cut[(size_t) c],
				q1 = L.cut[(size_t) c + 1];

	DB_CK(gc_launch(k_tr_list, q1 - q0, TR_LIST_WARPS, 32 * TR_LIST_WARPS, D.s, T, eps2, q0, q1,
					L.hs, (const int64_t *) L.at, L.host_at[(size_t) q0], (int *) nullptr,
					L.leaf));
	L.written = c;
	return GC_OK;
}

/* ------------------------------------------------------------------ */
/* the passes                                                          */
/* ------------------------------------------------------------------ */

/*
 * The block's active points a (of TR_Q threads, each with its point's
 * offset from the node's first) appended in order to s_slot after the tot
 * already there; returns the new total.  Every thread calls it (it
 * synchronises); s_w: a word a warp.
 */
__device__ __forceinline__ int
tr_slot(bool a, int off, int tot, int *s_w, short *s_slot)
{
	const int	tid = threadIdx.x,
				lane = tid & 31;
	const unsigned bal = __ballot_sync(0xffffffffu, a);
	int			at = tot + __popc(bal & ((1u << lane) - 1));

	if (lane == 0)
		s_w[tid >> 5] = __popc(bal);
	__syncthreads();
	for (int w = 0; w < TR_Q / 32; w++)
	{
		at += w < (tid >> 5) ? s_w[w] : 0;
		tot += s_w[w];
	}
	if (a && at < TR_Q)
		s_slot[at] = (short) off;
	__syncthreads();			/* s_w read, s_slot written */
	return tot < TR_Q ? tot : TR_Q;
}

/*
 * Whether a pass at d dimensions takes its decisions from the tensor-core
 * screen: the count from TR_SCREEN_D_MIN to TR_SCREEN_D_MAX, the union to
 * TR_SCREEN_XQ_MAX (above it, where the block's rows are not kept in
 * shared memory, its fewer blocks an SM made it slower: 1M 64-d, 128 ms
 * against the exact tiles' 120).  GPUCLUST_DB_SCREEN=0 never (tests and
 * benchmarks), =all from d = 1 (tests).  The border pass needs the
 * distances themselves and keeps the exact tiles.
 */
static bool
tr_screen_use(int d, int mode)
{
	const char *env = getenv("GPUCLUST_DB_SCREEN");
	const int	top = mode == TR_COUNT ? TR_SCREEN_D_MAX : mode == TR_UNION ? TR_SCREEN_XQ_MAX : 0;

	if (env && strcmp(env, "0") == 0)
		return false;
	if (env && strcmp(env, "all") == 0)
		return d <= top;
	return d >= TR_SCREEN_D_MIN && d <= top;
}

/*
 * One pass over the query nodes qs[0 .. nqs) (or q0 + blockIdx.x when qs
 * is NULL), a block each, a thread a point.  DC: dimensions a shared
 * tile holds; SCR: the decisions from the tensor-core screen
 * (dbscan_screen.cuh; its shared memory dynamic, tr_scr_bytes), for the
 * count and the union (tr_screen_use).
 */
template <int DC, int MODE, bool SCR>
__global__ void __launch_bounds__(TR_Q)
k_tr_pass(db_tree T, db_pass A, int64_t q0, const int *__restrict__ qs,
		  const int *__restrict__ leaf, int64_t base, float coef)
{
	static_assert(!SCR || MODE == TR_COUNT || MODE == TR_UNION,
				  "the screen decides the count's and the union's pairs");
	__shared__ float4 sh[SCR ? 1 : TR_TJ * DC / 4];
	extern __shared__ float4 tr_dyn[];
	__shared__ int ctag[TR_TJ];	/* union: root; expand: chain; -2: skip */
	__shared__ short s_slot[TR_Q];	/* the block's active points, first */
	__shared__ int s_w[TR_Q / 32];
	const int	tid = threadIdx.x;
	const int64_t q = qs ? qs[blockIdx.x] : q0 + blockIdx.x;
	const bool	gath = MODE == TR_COUNT && A.hs;	/* the count's gathered pass */
	const int64_t h = gath ? A.hs[q] : T.nq - 1 + q;	/* the block's node */
	const int	n = T.n,
				d = T.d;
	const int	lev = gath ? 63 - __clzll(h + 1) : T.qlevel;
	const int64_t hj = gath ? h + 1 - ((int64_t) 1 << lev) : q;	/* its index in its level */
	const int	qb = tr_off(hj, n, lev),
				qe = tr_off(hj + 1, n, lev);
	const float eps2 = A.eps2;
	const int64_t first_leaf = T.nleaf - 1;
	bool		act = false;
	int			i = qb;
	unsigned	cnt = 0;
	unsigned long long best = ~0ULL;
	int			tag = -1;		/* union: own root; expand: own chain */

	/*
	 * The active points go to the first threads (in order), so that warps
	 * of inactive ones compute nothing: a block of core points with a few
	 * noise points among them counts with one warp, not four.  A node of a
	 * higher level (A.hs: the count's gathered pass) is read TR_Q points at
	 * a time; it has at most TR_Q active points (tr_gather_nodes).
	 */
	int			tot_active = 0;

	if constexpr (MODE == TR_COUNT)
	{
		const int	c1 = gath ? qe : qb + 1;	/* else a query node: TR_Q points at most */

		for (int c0 = qb; c0 < c1; c0 += TR_Q)
		{
			const int	p = c0 + tid;

			tot_active = tr_slot(p < qe && A.cnt[p] < A.minp, p - qb, tot_active, s_w, s_slot);
		}
	}
	else
	{
		const int	p = qb + tid;
		bool		a = p < qe;

		if (a)
			a = MODE == TR_UNION ? A.core[p] : MODE == TR_BORDER ? !A.core[p] : A.front[p];
		tot_active = tr_slot(a, tid, 0, s_w, s_slot);
	}
	if (tot_active == 0)
		return;
	act = tid < tot_active;
	i = qb + (act ? s_slot[tid] : 0);
	if (MODE == TR_COUNT)
		cnt = act && !gath ? A.cnt[i] : 0;
	const float *xi = T.Xs + (int64_t) i * d;
	tr_scr		S;
	float		an = 0.0f,
				ea = 0.0f;
	auto		pos = [&](int s) { return qb + s_slot[s]; };

	const float *xb = xi;		/* the point for the box bounds */

	if constexpr (SCR)
	{
		S = tr_scr_carve<TR_Q, TR_TJ>((void *) tr_dyn, d);
		tr_scr_rows<TR_Q>(S, T.Xs, d, T.lo + h * d, T.hi + h * d, tot_active, pos, coef, &an,
						  &ea);
		if (S.xq)
			xb = S.xq + tid * S.xld;
	}

	if (MODE == TR_UNION && act)
		tag = uf_find(A.parent, i);
	if (MODE == TR_EXPAND && act)
		tag = A.state[i];

	/* count: candidate leaves [A.lbeg, A.lend) of the list (nearest first) */
	const int64_t lb = A.at[q] - base + (MODE == TR_COUNT ? A.lbeg : 0);
	int64_t		le = A.at[q + 1] - base;

	if (MODE == TR_COUNT && A.lend - A.lbeg < le - lb)
		le = lb + (A.lend - A.lbeg);

	for (int64_t li = lb; li < le; li++)
	{
		const int	L = leaf[li];
		const int	cb = tr_off(L, n, T.depth),
					ce = tr_off(L + 1, n, T.depth);
		const float *llo = T.lo + (first_leaf + L) * d,
				   *lhi = T.hi + (first_leaf + L) * d;
		bool		need = MODE == TR_COUNT ? act && cnt < A.minp : act;

		if (MODE != TR_COUNT && A.lcore[L] == 0)
			continue;			/* no core point to meet (block-uniform) */
		if (MODE == TR_UNION && ce - 1 <= i)
			need = false;		/* pairs i < j only */
		if (need)
		{
			float		lim = eps2;

			if (MODE == TR_BORDER && best != ~0ULL)
			{
				float		bd = __uint_as_float((unsigned) (best >> 32));

				lim = bd < lim ? bd : lim;
			}
			need = gc_box_mindist2(xb, llo, lhi, d) <= lim;
		}
		if (!__syncthreads_or(need))
			continue;

		for (int j0 = cb; j0 < ce; j0 += TR_TJ)
		{
			float		acc[TR_TJ];
			bool		wneed = need;

			if (MODE == TR_UNION || MODE == TR_EXPAND)
			{
				__syncthreads();	/* the last tile's ctag is read */
				if (tid < TR_TJ)
				{
					int			j = j0 + tid,
								t = -2;

					if (j < ce && A.core[j])
						t = MODE == TR_UNION ? uf_find(A.parent, j) : A.state[j];
					ctag[tid] = t;
				}
				__syncthreads();
				if (wneed)
				{
					bool		any = false;

#pragma unroll 4
					for (int jj = 0; jj < TR_TJ; jj++)
					{
						int			t = ctag[jj];

						any |= t != -2 && t != tag && (MODE == TR_EXPAND || j0 + jj > i);
					}
					wneed = any;
				}
			}
			const bool	mine = wneed && need;
			unsigned	nbr = 0;	/* the screen's: this point's neighbours */

			wneed = __any_sync(0xffffffffu, wneed);
			if constexpr (SCR)
				nbr = tr_scr_tile<TR_Q, TR_TJ>(S, wneed, mine, T.Xs, d, j0, ce, eps2, coef, an,
											   ea, pos);
			else
				db_tile_dist2<TR_TJ, DC, TR_Q>(acc, xi, wneed, T.Xs, j0, ce, d, A.dpad, sh);
			if (!(wneed && need))
				continue;
			if constexpr (SCR && MODE == TR_UNION)
			{
				/* as below, from the bits */
				for (; nbr; nbr &= nbr - 1)
				{
					const int	jj = __ffs(nbr) - 1,
								t = ctag[jj];

					if (t != -2 && j0 + jj > i && t != tag)
					{
						uf_union(A.parent, tag, t);
						tag = uf_find(A.parent, tag);
					}
				}
			}
			else if constexpr (SCR)
			{
				/* as below, from the bits */
				while (nbr && cnt < A.nbk)
				{
					A.nb[(int64_t) i * A.nbk + cnt] = j0 + __ffs(nbr) - 1;
					cnt++;
					nbr &= nbr - 1;
				}
				cnt += __popc(nbr);
			}
			else if (MODE == TR_COUNT)
			{
				/*
				 * the first nbk neighbours kept: all of a non-core point's
				 * (its border, k_tr_border_nb), a core point's first unions
				 * (k_tr_union_nb)
				 */
#pragma unroll
				for (int jj = 0; jj < TR_TJ; jj++)
					if (j0 + jj < ce && acc[jj] <= eps2)
					{
						if (cnt < A.nbk)
							A.nb[(int64_t) i * A.nbk + cnt] = j0 + jj;
						cnt++;
					}
			}
			else if (MODE == TR_UNION)
			{
#pragma unroll
				for (int jj = 0; jj < TR_TJ; jj++)
				{
					int			j = j0 + jj,
								t = ctag[jj];

					if (t != -2 && j > i && t != tag && acc[jj] <= eps2)
					{
						uf_union(A.parent, tag, t);
						tag = uf_find(A.parent, tag);
					}
				}
			}
			else if (MODE == TR_BORDER)
			{
#pragma unroll
				for (int jj = 0; jj < TR_TJ; jj++)
				{
					int			j = j0 + jj;

					if (j < ce && acc[jj] <= eps2 && A.core[j])
					{
						unsigned long long key =
							((unsigned long long) __float_as_uint(acc[jj]) << 32) |
							(unsigned) T.perm[j];

						best = key < best ? key : best;
					}
				}
			}
			else
			{
#pragma unroll
				for (int jj = 0; jj < TR_TJ; jj++)
				{
					int			j = j0 + jj,
								t = ctag[jj];

					if (t == -2 || t == tag || !(acc[jj] <= eps2))
						continue;
					if (t == -1)
					{
						t = atomicCAS(&A.state[j], -1, tag);
						if (t == -1)
						{
							A.next[j] = 1;
							continue;
						}
						if (t == tag)
							continue;
					}
					dc_collide(A, tag, t);
				}
			}
		}
		if (MODE == TR_COUNT && __syncthreads_and(!act || cnt >= A.minp))
			break;
	}
	if (MODE == TR_COUNT && act)
		A.cnt[i] = cnt;
	if (MODE == TR_BORDER && act)
		A.best[i] = best;
	if constexpr (SCR)
		tr_scr_flush(S, A.stats);
}

template <int MODE>
gc_code
db_tree_pass(db_dev &D, const gc_ctx *ctx, const db_tree &T, db_lists &L,
			 const db_pass &A, const int *qs, const int64_t *qs_cut, gc_status *st)
{
	const int	DC = db_tile_dc(T.d);
	const bool	scr = tr_screen_use(T.d, MODE);
	void		(*kern) (db_tree, db_pass, int64_t, const int *, const int *, int64_t, float) =
		scr ? k_tr_pass<4, MODE, MODE == TR_COUNT || MODE == TR_UNION> :
		DC == 4 ? k_tr_pass<4, MODE, false> : DC == 8 ? k_tr_pass<8, MODE, false> :
		k_tr_pass<16, MODE, false>;
	const size_t smem = scr ? tr_scr_bytes<TR_Q, TR_TJ>(T.d) : 0;
	const float coef = scr ? tr_scr_coef(T.d) : 0.0f;
	gc_code		rc;

	if (scr)
		DB_CK(gc_allow_dynamic_smem((const void *) kern));

	for (int c = 0; c + 1 < (int) L.cut.size(); c++)
	{
		/* query nodes [k0, k1): of the tree, or indexes into qs */
		int64_t		k0 = qs ? qs_cut[c] : L.cut[(size_t) c],
					k1 = qs ? qs_cut[c + 1] : L.cut[(size_t) c + 1];
		int64_t		base = L.host_at[(size_t) L.cut[(size_t) c]];

		if (k0 >= k1)
			continue;
		if ((rc = db_tree_chunk(D, T, A.eps2, L, c, st)) != GC_OK)
			return rc;
		for (int64_t k = k0; k < k1; k += TR_LAUNCH_NODES)
		{
			int64_t		m = k1 - k < TR_LAUNCH_NODES ? k1 - k : TR_LAUNCH_NODES;

			DB_CK(gc_launch_smem(kern, m, 1, TR_Q, smem, D.s, T, A, k,
								 qs ? qs + k : (const int *) nullptr, (const int *) L.leaf,
								 base, coef));
			if ((rc = db_sync_poll(D, ctx, st)) != GC_OK)
				return rc;
		}
	}
	return GC_OK;
}

template gc_code db_tree_pass<TR_EXPAND>(db_dev &, const gc_ctx *, const db_tree &, db_lists &,
										 const db_pass &, const int *, const int64_t *,
										 gc_status *);

/* ------------------------------------------------------------------ */
/* the call                                                            */
/* ------------------------------------------------------------------ */

__global__ void
k_tr_core(const unsigned *__restrict__ cnt, int n, unsigned minp, uint8_t *core)
{
	int			p = blockIdx.x * blockDim.x + threadIdx.x;

	if (p < n)
		core[p] = cnt[p] >= minp;
}

/* core points a leaf */
__global__ void
k_tr_lcore(const uint8_t *__restrict__ core, int n, int depth, int64_t nleaf,
		   int *lcore)
{
	int64_t		L = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (L >= nleaf)
		return;
	int			c = 0;

	for (int p = tr_off(L, n, depth); p < tr_off(L + 1, n, depth); p++)
		c += core[p];
	lcore[L] = c;
}

__global__ void
k_tr_root_uf(int *parent, const uint8_t *__restrict__ core, int n, int *rp)
{
	int			p = blockIdx.x * blockDim.x + threadIdx.x;

	if (p < n)
		rp[p] = core[p] ? uf_find(parent, p) : -1;
}

/*
 * Unions along the neighbours each core point's count kept (within eps,
 * so these are edges of the answer): most of a leaf's core points join
 * before the union pass, whose tiles then find their roots equal, and skip,
 * more often.
 */
__global__ void
k_tr_union_nb(db_pass A, int n)
{
	int			p = blockIdx.x * blockDim.x + threadIdx.x;

	if (p >= n || !A.core[p])
		return;
	unsigned	k = A.cnt[p] < A.nbk ? A.cnt[p] : A.nbk;

	for (unsigned t = 0; t < k; t++)
	{
		int			j = A.nb[(int64_t) p * A.nbk + t];

		if (j != p && A.core[j])
			uf_union(A.parent, p, j);
	}
}

/*
 * A non-core point's nearest core neighbour from the neighbours its count
 * kept (all of them: fewer than min_pts), as the border pass would find it.
 */
__global__ void
k_tr_border_nb(db_tree T, db_pass A)
{
	int			p = blockIdx.x * blockDim.x + threadIdx.x;

	if (p >= T.n || A.core[p])
		return;
	const float *xp = T.Xs + (int64_t) p * T.d;
	unsigned long long best = ~0ULL;

	for (unsigned t = 0; t < A.cnt[p]; t++)
	{
		int			j = A.nb[(int64_t) p * A.nbk + t];

		if (A.core[j])
		{
			float		d2 = gc_dist2(xp, T.Xs + (int64_t) j * T.d, T.d);
			unsigned long long key =
				((unsigned long long) __float_as_uint(d2) << 32) | (unsigned) T.perm[j];

			best = key < best ? key : best;
		}
	}
	A.best[p] = best;
}

/* a non-core point: its nearest core neighbour's root, or -1 */
__global__ void
k_tr_root_border(const uint8_t *__restrict__ core,
				 const unsigned long long *__restrict__ best,
				 const int *__restrict__ pos_of_row, int n, int *rp)
{
	int			p = blockIdx.x * blockDim.x + threadIdx.x;

	if (p < n && !core[p])
		rp[p] = best[p] == ~0ULL ? -1 : rp[pos_of_row[(int) (best[p] & 0xffffffffu)]];
}

/* sc[node of level l] += each point of it still short of min_pts */
__global__ void
k_tr_short(const unsigned *__restrict__ cnt, int n, unsigned minp, int l, int *sc)
{
	int			p = blockIdx.x * blockDim.x + threadIdx.x;

	if (p < n && cnt[p] < minp)
		atomicAdd(&sc[tr_node_of(p, n, l)], 1);
}

/*
 * Whether the count's second pass gathers its points (tr_count_gathered);
 * GPUCLUST_DB_GATHER=0: not, each query node's points then go on through
 * the rest of its own list.
 */
static bool
tr_gather_use(void)
{
	return db_env_on("GPUCLUST_DB_GATHER");
}

/*
 * The subtrees that take the short points, appended to hs (heap order):
 * below node j of level l (pre: the prefix sums of the query nodes'
 * short points), the highest nodes with at most TR_Q of them; a query
 * node has at most TR_Q points.
 */
static void
tr_gather_nodes(const std::vector<int64_t> &pre, int qlevel, int l, int64_t j,
				std::vector<int> &hs)
{
	const int	k = qlevel - l;
	const int64_t s = pre[(size_t) ((j + 1) << k)] - pre[(size_t) (j << k)];

	if (s == 0)
		return;
	if (s <= TR_Q || k == 0)
	{
		hs.push_back((int) (((int64_t) 1 << l) - 1 + j));
		return;
	}
	tr_gather_nodes(pre, qlevel, l + 1, 2 * j, hs);
	tr_gather_nodes(pre, qlevel, l + 1, 2 * j + 1, hs);
}

/*
 * The count's second pass.  Where the points still short of min_pts after
 * the first are few in a query node (noise, a blob's border: common at
 * low d), a pass by query node would run their tiles on warps of mostly
 * idle lanes.  So they are gathered: the highest subtrees, up to
 * TR_GATHER_LEVELS above the query nodes, with at most TR_Q short points
 * (tr_gather_nodes).  A query node that is such a subtree goes on through
 * the rest of its own list, as without gathering; a higher one takes a
 * block over the candidate leaves of its box (a superset of each of its
 * query nodes' lists: its box holds theirs), its points counting from
 * zero so that the leaves of their first pass count once.  (At 16-d and
 * above, on blobs, most points are still short after the first pass and
 * every subtree is a query node.)
 */
static gc_code
tr_count_gathered(db_dev &D, const gc_ctx *ctx, const db_tree &T, db_lists &L,
				  const db_pass &A, gc_status *st)
{
	const int	top = T.qlevel > TR_GATHER_LEVELS ? T.qlevel - TR_GATHER_LEVELS : 0;
	std::vector<int> sc((size_t) T.nq),
				nodes,
				qn,
				up;
	std::vector<int64_t> pre((size_t) T.nq + 1),
				qcut(L.cut.size());
	int		   *dsc,
			   *dq;
	gc_code		rc;

	DB_ALLOC(dsc, T.nq);
	DB_CK(cudaMemsetAsync(dsc, 0, sizeof(int) * (size_t) T.nq, D.s));
	DB_CK(gc_launch(k_tr_short, T.n, DB_THREADS, DB_THREADS, D.s, (const unsigned *) A.cnt, T.n,
					A.minp, T.qlevel, dsc));
	DB_CK(cudaMemcpyAsync(sc.data(), dsc, sizeof(int) * sc.size(), cudaMemcpyDeviceToHost, D.s));
	if ((rc = db_sync_poll(D, ctx, st)) != GC_OK)
		return rc;
	D.drop(dsc);
	pre[0] = 0;
	for (size_t q = 0; q < sc.size(); q++)
		pre[q + 1] = pre[q] + sc[q];
	for (int64_t j = 0; j < ((int64_t) 1 << top); j++)
		tr_gather_nodes(pre, T.qlevel, top, j, nodes);
	for (int h : nodes)
		if (h >= T.nq - 1)
			qn.push_back((int) (h - (T.nq - 1)));	/* increasing: nodes is in tree order */
		else
			up.push_back(h);
	db_trace("count: points short after its first pass", (long long) pre[(size_t) T.nq]);
	db_trace("count: query nodes going on", (long long) qn.size());
	db_trace("count: higher subtrees", (long long) up.size());

	if (!qn.empty())
	{
		DB_ALLOC(dq, (int64_t) qn.size());
		DB_CK(cudaMemcpyAsync(dq, qn.data(), sizeof(int) * qn.size(), cudaMemcpyHostToDevice,
							  D.s));
		db_tree_cuts(L, qn.data(), (int64_t) qn.size(), qcut.data());
		if ((rc = db_tree_pass<TR_COUNT>(D, ctx, T, L, A, dq, qcut.data(), st)) != GC_OK)
			return rc;
		D.drop(dq);
	}
	if (!up.empty())
	{
		db_lists	G;
		db_pass		B = A;

		DB_ALLOC(dq, (int64_t) up.size());
		DB_CK(cudaMemcpyAsync(dq, up.data(), sizeof(int) * up.size(), cudaMemcpyHostToDevice,
							  D.s));
		if ((rc = db_tree_lists(D, ctx, T, A.eps2, G, st, dq, (int64_t) up.size())) != GC_OK)
			return rc;
		B.at = G.at;
		B.hs = dq;
		B.lbeg = 0;
		B.lend = INT64_MAX;
		if ((rc = db_tree_pass<TR_COUNT>(D, ctx, T, G, B, nullptr, nullptr, st)) != GC_OK)
			return rc;
		D.drop(G.leaf);
		D.drop(G.at);
		D.drop(dq);
	}
	return GC_OK;
}

gc_code
db_tree_run(db_dev &D, const gc_ctx *ctx, const float *X, int n, int d,
			float eps2, unsigned minp, gc_dbscan_algorithm algorithm,
			bool cyclic, const db_out &out, gc_status *st)
{
	db_tree		T;
	db_lists	L;
	db_pass		A;
	int		   *rp;
	double		t0 = gc_now_ms();
	gc_code		rc;

	memset(&A, 0, sizeof(A));
	db_phases.grid = 0;
	db_phases.tree = 1;
	if ((rc = gc_kdtree_build(D, ctx, X, n, d, GC_KDTREE_LEAF, cyclic, true, T, st)) != GC_OK)
		return rc;
	db_trace("tree built; leaves", T.nleaf);
	{
		double		t1 = gc_now_ms();

		if ((rc = db_tree_lists(D, ctx, T, eps2, L, st)) != GC_OK)
			return rc;
		db_phases.ms_lists = gc_now_ms() - t1;
	}
	db_phases.ncell = T.nleaf;
	db_phases.ms_index = gc_now_ms() - t0;
	db_trace("candidate lists counted; entries", db_phases.pairs);

	/* core counts */
	t0 = gc_now_ms();
	A.eps2 = eps2;
	A.minp = minp;
	A.dpad = db_tile_dpad(d);
	A.at = L.at;
	A.nbk = minp - 1 <= TR_NB_MAX ? minp - 1 : 0;
	DB_ALLOC(A.cnt, n);
	DB_ALLOC(A.core, n);
	DB_ALLOC(A.lcore, T.nleaf);
	DB_ALLOC(A.nb, (int64_t) n * A.nbk);
	DB_ALLOC(A.stats, 2);
	DB_CK(cudaMemsetAsync(A.stats, 0, sizeof(unsigned long long) * 2, D.s));
	DB_CK(cudaMemsetAsync(A.cnt, 0, sizeof(unsigned) * (size_t) n, D.s));

	/*
	 * Two passes: the nearest TR_NEAR leaves of each list, which make most
	 * points core, then the points still short, gathered from several query
	 * nodes into full blocks (tr_count_gathered).
	 */
	A.lbeg = 0;
	A.lend = TR_NEAR;
	if ((rc = db_tree_pass<TR_COUNT>(D, ctx, T, L, A, nullptr, nullptr, st)) != GC_OK)
		return rc;
	A.lbeg = TR_NEAR;
	A.lend = INT64_MAX;
	if (tr_gather_use())
		rc = tr_count_gathered(D, ctx, T, L, A, st);
	else
		rc = db_tree_pass<TR_COUNT>(D, ctx, T, L, A, nullptr, nullptr, st);
	if (rc != GC_OK)
		return rc;
	DB_CK(gc_launch(k_tr_core, n, DB_THREADS, DB_THREADS, D.s, (const unsigned *) A.cnt,
					n, minp, A.core));
	DB_CK(gc_launch(k_tr_lcore, T.nleaf, DB_THREADS, DB_THREADS, D.s,
					(const uint8_t *) A.core, n, T.depth, T.nleaf, A.lcore));
	if ((rc = db_sync_poll(D, ctx, st)) != GC_OK)
		return rc;
	db_phases.ms_core = gc_now_ms() - t0;

	/* components of the core points: rp, the root position of each */
	t0 = gc_now_ms();
	DB_ALLOC(rp, n);
	if (algorithm == GC_DBSCAN_DCLUST)
	{
		if ((rc = db_dclust(D, ctx, T, L, A, rp, st)) != GC_OK)
			return rc;
	}
	else
	{
		/*
		 * The unions along the kept neighbours first (k_tr_union_nb), then
		 * every TR_SPREAD-th query node: spread over the data, its unions
		 * join most of each cluster, so that the others find their tiles'
		 * roots already equal and skip them.
		 */
		std::vector<int> order((size_t) T.nq);
		std::vector<int64_t> cut_a(L.cut.size()),
					cut_b(L.cut.size());
		int64_t		na = 0;
		int		   *qs;

		for (int64_t q = 0; q < T.nq; q += TR_SPREAD)
			order[(size_t) na++] = (int) q;
		for (int64_t q = 0, k = na; q < T.nq; q++)
			if (q % TR_SPREAD != 0)
				order[(size_t) k++] = (int) q;
		db_tree_cuts(L, order.data(), na, cut_a.data());
		db_tree_cuts(L, order.data() + na, T.nq - na, cut_b.data());
		for (int64_t &c : cut_b)
			c += na;			/* indexes into order, as qs */
		DB_ALLOC(qs, T.nq);
		DB_CK(cudaMemcpyAsync(qs, order.data(), sizeof(int) * (size_t) T.nq,
							  cudaMemcpyHostToDevice, D.s));
		DB_ALLOC(A.parent, n);
		DB_CK(gc_launch(k_iota, n, DB_THREADS, DB_THREADS, D.s, A.parent, n));
		if (A.nbk > 0)
			DB_CK(gc_launch(k_tr_union_nb, n, DB_THREADS, DB_THREADS, D.s, A, n));
		if ((rc = db_tree_pass<TR_UNION>(D, ctx, T, L, A, qs, cut_a.data(), st)) != GC_OK ||
			(rc = db_tree_pass<TR_UNION>(D, ctx, T, L, A, qs, cut_b.data(), st)) != GC_OK)
			return rc;
		DB_CK(gc_launch(k_tr_root_uf, n, DB_THREADS, DB_THREADS, D.s, A.parent,
						(const uint8_t *) A.core, n, rp));
	}
	if ((rc = db_sync_poll(D, ctx, st)) != GC_OK)
		return rc;
	db_phases.ms_union = gc_now_ms() - t0;

	/* border points: the nearest core neighbour's cluster */
	t0 = gc_now_ms();
	DB_ALLOC(A.best, n);
	DB_CK(cudaMemsetAsync(A.best, 0xff, sizeof(unsigned long long) * (size_t) n, D.s));
	if (A.nbk > 0)
		DB_CK(gc_launch(k_tr_border_nb, n, DB_THREADS, DB_THREADS, D.s, T, A));
	else if ((rc = db_tree_pass<TR_BORDER>(D, ctx, T, L, A, nullptr, nullptr, st)) != GC_OK)
		return rc;
	DB_CK(gc_launch(k_tr_root_border, n, DB_THREADS, DB_THREADS, D.s,
					(const uint8_t *) A.core, (const unsigned long long *) A.best,
					(const int *) T.pos_of_row, n, rp));
	if ((rc = db_sync_poll(D, ctx, st)) != GC_OK)
		return rc;
	db_phases.ms_border = gc_now_ms() - t0;

	if (tr_screen_use(d, TR_COUNT))
	{
		unsigned long long h[2];

		DB_CK(cudaMemcpyAsync(h, A.stats, sizeof(h), cudaMemcpyDeviceToHost, D.s));
		if ((rc = db_sync_poll(D, ctx, st)) != GC_OK)
			return rc;
		db_phases.screened = (int64_t) h[0];
		db_phases.exact = (int64_t) h[1];
	}
	return db_finish(D, n, rp, T.perm, A.core, out, st);
}
