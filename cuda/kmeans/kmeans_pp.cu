/*
 * kmeans_pp.cu — k-means++ seeding on the GPU, unweighted and weighted.
 *
 * It reproduces the CPU's gc_km_init_kmeanspp(_w) (kmeans_init.c) bit for
 * bit: the same counter-based draws (rng.h), the same float32 distances
 * summed in dimension order with separate multiply and add, and the same
 * step grid, on which every sum is an exact integer sum (kmeans/kmeans.h),
 * so that blocks and atomics add in any order.  Per centre, four kernels:
 *
 *   pp_regrid  when the step's grid changed (the largest term crossed a
 *              power of two): the block sums of the D² terms on the new
 *              grid, a CUDA block per block of KM_BLOCK rows, and the last
 *              block done their prefix sums; otherwise nothing (the
 *              winner's sums, on the unchanged grid, are those terms').
 *              Up to PP_SELECT_REGRID_NB blocks (k-means||'s candidates)
 *              pp_select does it instead: one launch fewer a centre.
 *   pp_draw    a CUDA block per trial: R = gc_km_pot_draw(.., T); the
 *              block of rows by binary search of the prefix sums, then the
 *              row by a block scan of its KM_BLOCK terms (loaded coalesced,
 *              cub::BlockLoad); the trial's row
 *              gathered as candidate column t (d x LMAX).
 *   pp_terms   terms[t][i] = min(closest[i], gc_dist2(x_i, cand_t)), one
 *              thread per row (one pass over X for all L trials), in place:
 *              closest is the row terms[best] of the previous centre (the
 *              winner's terms are the new D²), read by the thread that
 *              then overwrites its own row's terms; with them each trial's
 *              block sums on the step's grid and its largest term.
 *   pp_select  the potentials (sums of the block sums), the lowest wins
 *              (ties: the earliest trial); its largest term gives the next
 *              grid; if that is the same, the prefix sums of the winner's
 *              block sums are the next draws'.
 *
 * The host only enqueues; it synchronises every 16 centres to poll the
 * cancel flags.
 *
 * Lean (up to PP_LEAN_MAX_D dimensions): the trials' terms are not stored.
 * terms holds each row's D² against the centres before the last winner
 * (n floats), and the winner's coordinates are kept (wc).  pp_terms
 * computes the winner's distance as one more candidate column, so its
 * term min(D², distance) is the stored term's float, updates the D² rows
 * it lowers, and writes nothing else; pp_draw and pp_regrid compute the
 * winner's terms of the rows they read the same way.  A step then moves
 * 4d + 4 bytes a row and the D² it changes, where storing every trial's
 * term wrote 4L more (at d = 2, L = 6: 12 against 36 bytes a row).
 *
 * Screened (from KM_PP_SCREEN_MIN_D dimensions, unweighted): terms holds
 * the D², and pp_terms's place is taken by a screen of FP16 dot products on
 * the tensor cores, which proves most rows' terms unchanged, and the exact
 * distances of the rows it leaves (pp_scr_pass, pp_scr_exact); after
 * pp_select, pp_scr_apply and pp_scr_rescan write the winner's D² and the
 * next grid.  kmeans_pp_screen.cuh says how, and why the centres are the
 * same.
 *
 * Few rows (k-means||'s candidates, small tables): pp_persist runs the
 * same steps (the same draws, choice and terms' operations) in one
 * cooperative launch per PP_PERSIST_STEPS centres (below), where the four
 * launches' latency was most of a step.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <new>
#include <type_traits>

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_load.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/warp/warp_scan.cuh>
#include <cub/iterator/cache_modified_input_iterator.cuh>
#include <cuda/functional>
#include <cuda_fp16.h>
#include <cooperative_groups.h>

#include "kmeans_dev.cuh"
#include "common/multi.cuh"
#include "common/rng.h"

#define PP_THREADS 256
#define PP_ITEMS (KM_BLOCK / PP_THREADS)	/* rows a thread of a block scan */
#define PP_TERMS_DC 8			/* pp_terms: dimensions loaded at once */
#define PP_GROUP 2				/* pp_terms: rows a thread loads at once ... */
#define PP_GROUP_DC 4			/* ... up to this d */
#define PP_LEAN_MAX_D 4		/* lean up to this d (below) */
#define PP_CS_DIMS 64			/* pp_terms: candidates' dimensions in shared memory */
#define PP_RPT_MAX_D 32			/* pp_terms: rows a thread above 1 up to this d */
#define PP_SELECT_REGRID_NB 16	/* up to this many blocks pp_select regrids */
#define PP_PERSIST_NB 8		/* pp_persist by default up to this many blocks of rows ... */
#define PP_PERSIST_ND (1 << 22)	/* ... and n x d floats */
#define PP_PERSIST_NB_MAX 16	/* pp_persist: at most this many blocks of rows ... */
#define PP_PERSIST_TI (PP_PERSIST_NB_MAX * KM_BLOCK / 32 / PP_THREADS)	/* ... their tiles a lane of its scan */
#define PP_PERSIST_STEPS 64		/* pp_persist: centres a launch (the cancel poll) */
#define PP_PERSIST_SETS 3		/* pp_persist: sets of the buffers a step writes */
#define PP_PERSIST_LT 2			/* pp_persist: trials a thread of its terms (a group) */

typedef cub::BlockScan<uint64_t, PP_THREADS> pp_scan_t;
typedef cub::BlockReduce<uint64_t, PP_THREADS> pp_reduce_t;
typedef cub::WarpScan<uint64_t> pp_wscan_t;
/* a block of KM_BLOCK terms, coalesced, PP_ITEMS consecutive a thread */
typedef cub::BlockLoad<float, PP_THREADS, PP_ITEMS, cub::BLOCK_LOAD_TRANSPOSE> pp_load_t;

/* pp_draw_row's shared memory */
union pp_draw_ts
{
	pp_load_t::TempStorage l;
	pp_scan_t::TempStorage s;
};

namespace
{
/* The grid of the step (kmeans/kmeans.h), on the device. */
struct pp_grid
{
	double		S;				/* the draws' and the potentials' */
	int			regrid;			/* pp_regrid recomputes the draws' sums */
	unsigned	done;			/* pp_regrid's blocks done */
};

/*
 * The screen's state (screened: below): the rows as FP16 mma fragments of
 * (x - mu) s, their norms, and the step's queue of rows it left to the
 * exact distances.
 */
struct pp_scr
{
	uint4	   *XH;				/* ntile x ks x 32 lanes: A fragments */
	const float *XR;			/* n x d: the rows, row-major (the caller's or XRown) */
	float	   *XRown;			/* the rows, row-major, where the caller had none */
	float	   *nx;				/* n: ||x - mu||² in float */
	float	   *mu;				/* d: the shift, the rows' mean */
	float	   *sc;				/* s, 1 / s², the fragments' absolute error */
	unsigned   *amax;			/* the largest |x - mu|'s bits */
	unsigned   *qrow;			/* n: the rows queued this step */
	float	   *qd;				/* n x L: their distances² to the trials */
	unsigned   *qn;				/* how many */
	unsigned   *bmx;			/* nb: each block's largest D²'s bits */
	unsigned char *dirty;		/* nb: the winner changed a D² of the block */
	unsigned   *done;			/* pp_scr_rescan's blocks done */
	int			ks;				/* k-steps of 16 dimensions */
	int64_t		ntile;			/* tiles of 16 rows */
};

/* The device state of one seeding, shared by its kernels. */
struct pp_state
{
	const float *XT;
	int64_t		n;
	int			d;
	int64_t		nb;
	const double *w;			/* NULL: unweighted */
	int64_t		wlast;			/* the last row of positive weight */
	float	   *terms;			/* L x n; lean: n, the D² before the last winner */
	unsigned long long *bs;		/* L x nb block sums of q (pp_terms) */
	unsigned long long *tmax;	/* L: the largest term's bits */
	uint64_t   *bq;				/* nb block sums (pp_regrid) */
	uint64_t   *off;			/* nb + 1: the draws' prefix sums */
	pp_grid    *g;
	int64_t    *cid;			/* LMAX trial rows */
	float	   *cand;			/* d x LMAX */
	int		   *best;			/* the last winner */
	float	   *wc;				/* lean: the last winner's coordinates (d) */
	uint64_t   *tq;				/* persistent: np x L x ntile sums a tile of 32 rows */
	bool		lean;
	bool		scr;			/* screened: terms holds the D², Z the screen */
	pp_scr		Z;
};
}

/*
 * Row i's term of the last winner, from t, its stored term, or (wc, the
 * winner's coordinates: lean) its D² before the winner: min(t, distance²),
 * the distance in pp_terms's operations and order, so the same float.
 */
__device__ __forceinline__ float
pp_won(const pp_state &P, const float *wc, int64_t i, float t)
{
	if (wc != nullptr)
	{
		float		q = 0.0f;

		for (int j = 0; j < P.d; j++)
			q = gc_l2_step(q, P.XT[(int64_t) j * P.n + i], wc[j]);
		t = q < t ? q : t;
	}
	return t;
}

/* The last winner's terms: its row of stored terms, or lean the D² (with wc) */
__device__ __forceinline__ const float *
pp_won_terms(const pp_state &P)
{
	return P.lean || P.scr ? P.terms : P.terms + (int64_t) *P.best * P.n;
}

/*
 * off[0] = 0, off[b+1] = off[b] + in(b) (b < nb): the whole block.  in(b)
 * may read off[b+1] itself (in place): a chunk's reads come before its
 * scan, its writes after.
 */
template <typename In>
__device__ void
pp_prefix(In in, int64_t nb, uint64_t *off, pp_scan_t::TempStorage &ts)
{
	__shared__ uint64_t carry;

	if (threadIdx.x == 0)
		carry = 0;
	__syncthreads();
	for (int64_t b0 = 0; b0 < nb; b0 += PP_THREADS)
	{
		const int64_t b = b0 + threadIdx.x;
		uint64_t	v = b < nb ? in(b) : 0,
					incl,
					total;

		pp_scan_t(ts).InclusiveSum(v, incl, total);
		if (b < nb)
			off[b + 1] = carry + incl;
		__syncthreads();
		if (threadIdx.x == 0)
			carry += total;
		__syncthreads();
	}
	if (threadIdx.x == 0)
		off[0] = 0;
	__syncthreads();
}

/* pp_prefix's inputs: sums in global memory (written by other blocks) ... */
struct pp_in_global
{
	const uint64_t *p;

	__device__ uint64_t operator() (int64_t b) const
	{
		return __ldcg(p + b);
	}
};

/* ... or off[b+1] itself */
struct pp_in_place
{
	const uint64_t *off;

	__device__ uint64_t operator() (int64_t b) const
	{
		return off[b + 1];
	}
};

__device__ void
pp_prefix_of(const uint64_t *in, int64_t nb, uint64_t *off, pp_scan_t::TempStorage &ts)
{
	pp_prefix(pp_in_global {in}, nb, off, ts);
}

/* The sum of q over block b of the terms closest (n; with wc: pp_won's), on the grid S. */
__device__ __forceinline__ uint64_t
pp_block_q(const pp_state &P, const float *closest, const float *wc, int64_t b, double S,
		   pp_reduce_t::TempStorage &ts)
{
	uint64_t	s = 0;

	for (int u = 0; u < PP_ITEMS; u++)
	{
		const int64_t i = b * KM_BLOCK + (int64_t) u * PP_THREADS + threadIdx.x;

		if (i < P.n)
			s += gc_km_pot_q(gc_km_pot_term(P.w, i, pp_won(P, wc, i, __ldcg(closest + i))), S);
	}
	return pp_reduce_t(ts).Sum(s);	/* thread 0's */
}

/*
 * The draws' prefix sums off (nb + 1) of the terms closest on the grid S,
 * by one block: each block's sum into off[b+1], then the prefix in place
 * (a few blocks of rows: pp_select).
 */
__device__ void
pp_regrid_here(const pp_state &P, const float *closest, const float *wc, double S, uint64_t *off,
			   pp_reduce_t::TempStorage &tr, pp_scan_t::TempStorage &ts)
{
	for (int64_t b = 0; b < P.nb; b++)
	{
		const uint64_t q = pp_block_q(P, closest, wc, b, S, tr);

		if (threadIdx.x == 0)
			off[b + 1] = q;
		__syncthreads();
	}
	pp_prefix(pp_in_place {off}, P.nb, off, ts);
}

/*
 * The draws' block sums of the winner's terms on the grid S, when the grid
 * changed: block b of KM_BLOCK rows per CUDA block; the last one done
 * writes their prefix sums and clears the flag.
 */
__global__ void __launch_bounds__(PP_THREADS)
pp_regrid(pp_state P)
{
	__shared__ union
	{
		pp_reduce_t::TempStorage r;
		pp_scan_t::TempStorage s;
	}			ts;
	__shared__ bool last;
	uint64_t	s;

	if (!P.g->regrid)
		return;
	s = pp_block_q(P, pp_won_terms(P), P.lean ? P.wc : nullptr, blockIdx.x, P.g->S, ts.r);
	if (threadIdx.x == 0)
	{
		P.bq[blockIdx.x] = s;
		__threadfence();
		last = atomicAdd(&P.g->done, 1u) == gridDim.x - 1;
	}
	__syncthreads();
	if (!last)
		return;
	__threadfence();
	pp_prefix_of(P.bq, P.nb, P.off, ts.s);
	if (threadIdx.x == 0)
	{
		P.g->done = 0;
		P.g->regrid = 0;
	}
}

/*
 * The row of draw R over the terms closest (with wc: pp_won's) on the grid
 * S, whose block sums' prefix is off (nb + 1), off[nb] > R (the whole
 * block): the block by binary search of off, then the row by a block scan
 * of its terms.
 */
__device__ int64_t
pp_draw_in(const pp_state &P, const float *closest, const float *wc, const uint64_t *off,
		   double S, uint64_t R, pp_draw_ts &ts)
{
	__shared__ int hit;
	const int64_t b = gc_km_pp_block(off, P.nb, R),
				i0 = b * KM_BLOCK + (int64_t) threadIdx.x * PP_ITEMS,
				rows = P.n - b * KM_BLOCK < KM_BLOCK ? P.n - b * KM_BLOCK : KM_BLOCK;
	/* through L2: the terms may be another block's, this kernel's */
	cub::CacheModifiedInputIterator<cub::LOAD_CG, float> in(closest + b * KM_BLOCK);
	float		d2[PP_ITEMS];
	uint64_t	q[PP_ITEMS],
				s = 0,
				acc;
	int64_t		row;

	pp_load_t(ts.l).Load(in, d2, (int) rows, 0.0f);
	__syncthreads();			/* ts.l is ts.s */
	if (wc != nullptr)
	{
		/* the winner's distances, a dimension at a time (pp_won's order), coalesced */
		float		w2[PP_ITEMS] = {};

		for (int j = 0; j < P.d; j++)
		{
			float		x[PP_ITEMS];

			pp_load_t(ts.l).Load(P.XT + (int64_t) j * P.n + b * KM_BLOCK, x, (int) rows, 0.0f);
			__syncthreads();
			for (int u = 0; u < PP_ITEMS; u++)
				w2[u] = gc_l2_step(w2[u], x[u], wc[j]);
		}
		for (int u = 0; u < PP_ITEMS; u++)
			d2[u] = w2[u] < d2[u] ? w2[u] : d2[u];
	}
	for (int u = 0; u < PP_ITEMS; u++)
	{
		q[u] = i0 + u < P.n ? gc_km_pot_q(gc_km_pot_term(P.w, i0 + u, d2[u]), S) : 0;
		s += q[u];
	}
	if (threadIdx.x == 0)
		hit = KM_BLOCK;
	pp_scan_t(ts.s).ExclusiveSum(s, acc);
	acc += off[b];
	for (int u = 0; u < PP_ITEMS; u++)
	{
		acc += q[u];
		if (acc > R)
		{
			atomicMin(&hit, (int) threadIdx.x * PP_ITEMS + u);
			break;
		}
	}
	__syncthreads();
	/* R < off[b+1]: a row of the block is hit */
	row = b * KM_BLOCK + hit < P.n ? b * KM_BLOCK + hit : P.n - 1;
	__syncthreads();
	return row;
}

/*
 * The row of trial t of centre c (the whole block): c >= 1 draws counter
 * 1+(c-1)L+t over the terms closest (with wc: pp_won's) on the grid S,
 * whose block sums' prefix is off (nb + 1); for c == 0 the single
 * candidate is row `first`.
 */
__device__ int64_t
pp_draw_row(const pp_state &P, const float *closest, const float *wc, const uint64_t *off,
			double S, uint64_t seed, uint64_t stream, int c, int L, int t, int64_t first,
			pp_draw_ts &ts)
{
	int64_t		row = first;

	if (c > 0)
	{
		const uint64_t T = off[P.nb];

		row = P.w == nullptr ? P.n - 1 : P.wlast;
		if (T > 0)
			row = pp_draw_in(P, closest, wc, off, S,
							 gc_km_pot_draw(seed, stream, 1 + (uint64_t) (c - 1) * L + t, T), ts);
	}
	return row;
}

/* Trial t's row as candidate column t (d x KM_PP_LMAX) and its index. */
__device__ void
pp_take(const pp_state &P, int64_t row, int t, float *cand, int64_t *cid)
{
	if (threadIdx.x == 0)
		cid[t] = row;
	for (int j = threadIdx.x; j < P.d; j += PP_THREADS)
		cand[j * KM_PP_LMAX + t] = P.XT[(int64_t) j * P.n + row];
}

/*
 * Trial t of centre c; block t also clears its trial's sums for pp_terms.
 */
__global__ void __launch_bounds__(PP_THREADS)
pp_draw(pp_state P, uint64_t seed, uint64_t stream, int c, int L, int64_t first)
{
	__shared__ pp_draw_ts ts;
	const int	t = blockIdx.x;
	int64_t		row;

	/* screened, each trial's sums start from the D²'s and lose its gains */
	for (int64_t b = threadIdx.x; b < P.nb; b += PP_THREADS)
		P.bs[(int64_t) t * P.nb + b] = P.scr && c > 0 ? P.bq[b] : 0;
	if (threadIdx.x == 0)
		P.tmax[t] = 0;
	if (P.scr && t == 0 && threadIdx.x == 0)
		*P.Z.qn = 0;
	row = pp_draw_row(P, c > 0 ? pp_won_terms(P) : nullptr, P.lean ? P.wc : nullptr, P.off,
					  P.g->S, seed, stream, c, L, t, first, ts);
	pp_take(P, row, t, P.cand, P.cid);
	/* every column written: pp_terms computes whole groups of 4 trials */
	if (t == 0)
		for (int e = threadIdx.x; e < P.d * (KM_PP_LMAX - L); e += PP_THREADS)
			P.cand[(e / (KM_PP_LMAX - L)) * KM_PP_LMAX + L + e % (KM_PP_LMAX - L)] = 0.0f;
}

/* q[t] += the distance² of x (its first nd <= DC dimensions) to
 * candidate t over those dimensions of cs. */
template <int LT, int DC>
__device__ __forceinline__ void
pp_terms_dims(const float *x, int nd, const float4 (*cs)[LT / 4], float *q)
{
#pragma unroll
	for (int u = 0; u < DC; u++)
		if (u < nd)
		{
#pragma unroll
			for (int v = 0; v < LT / 4; v++)
			{
				const float4 cc = cs[u][v];

				q[4 * v] = gc_l2_step(q[4 * v], x[u], cc.x);
				q[4 * v + 1] = gc_l2_step(q[4 * v + 1], x[u], cc.y);
				q[4 * v + 2] = gc_l2_step(q[4 * v + 2], x[u], cc.z);
				q[4 * v + 3] = gc_l2_step(q[4 * v + 3], x[u], cc.w);
			}
		}
}

/* q[t] += the chunk jc .. jc+dc-1 of row i's distance² to candidate t. */
template <int LT>
__device__ __forceinline__ void
pp_terms_chunk(const pp_state &P, int64_t i, int jc, int dc,
			   const float4 (*cs)[LT / 4], float *q)
{
	/* PP_TERMS_DC dimensions' loads in flight at once per thread: the
	 * pass is bound by memory, and for a few rows by its latency */
	for (int j0 = 0; j0 < dc; j0 += PP_TERMS_DC)
	{
		float		x[PP_TERMS_DC];

#pragma unroll
		for (int u = 0; u < PP_TERMS_DC; u++)
			x[u] = j0 + u < dc ? P.XT[(int64_t) (jc + j0 + u) * P.n + i] : 0.0f;
		pp_terms_dims<LT, PP_TERMS_DC>(x, dc - j0, cs + j0, q);
	}
}

/*
 * The candidates' dimensions jc .. jc+dc-1 into cs (the whole block; the
 * caller synchronises), their columns as float4s; lean, from the second
 * step, the last column (LT - 1 >= L) is the last winner's (wc).
 */
template <int LT>
__device__ __forceinline__ void
pp_load_cands(const pp_state &P, int c, int jc, int dc, float4 (*cs)[LT / 4])
{
	for (int e = threadIdx.x; e < dc * (LT / 4); e += blockDim.x)
	{
		const int	j = jc + e / (LT / 4),
					v = e % (LT / 4);
		float4		f = ((const float4 *) (P.cand + (int64_t) j * KM_PP_LMAX))[v];

		if (P.lean && c > 0 && v == LT / 4 - 1)
			f.w = P.wc[j];
		cs[e / (LT / 4)][v] = f;
	}
}

/*
 * Row i's step, given its distances q to the LT candidate columns and cl,
 * its last winner's term (stored) or its D² before that winner (lean).
 * Lean: the D² lowered by the winner's distance (column LT - 1; c > 0) and
 * written where that changed it (c == 0: +inf, for the next draws); else
 * every trial's term stored.  Each trial's term joins the thread's sums s
 * on the grid S and its largest mx.
 */
template <int LT, bool W, typename max_t>
__device__ __forceinline__ void
pp_row_terms(const pp_state &P, int L, int c, double S, int64_t i, const float *q,
			 float cl, unsigned long long *s, max_t *mx)
{
	if (P.lean)
	{
		const float qw = c > 0 && q[LT - 1] < cl ? q[LT - 1] : cl;

		if (c == 0 || qw != cl)
			P.terms[i] = qw;
		cl = qw;
	}
#pragma unroll
	for (int t = 0; t < LT; t++)
		if (t < L)
		{
			const float m = q[t] < cl ? q[t] : cl;
			const double tm = gc_km_pot_term(W ? P.w : nullptr, i, m);
			const max_t b = W ? (max_t) __double_as_longlong(tm) : (max_t) __float_as_uint(m);	/* >= 0: ordered */

			if (!P.lean)
				P.terms[(int64_t) t * P.n + i] = m;
			s[t] += gc_km_pot_q(tm, S);
			mx[t] = b > mx[t] ? b : mx[t];
		}
}

/* The rows r .. r+PP_GROUP-1 of a thread (pp_terms, RM 2): their first
 * PP_GROUP_DC dimensions and their last winner's terms (cls) or +inf. */
__device__ __forceinline__ void
pp_group_load(const pp_state &P, const float *cls, int64_t r0, int r, int rpt,
			  float (&x)[PP_GROUP][PP_GROUP_DC], float (&cl)[PP_GROUP])
{
#pragma unroll
	for (int g = 0; g < PP_GROUP; g++)
	{
		const int64_t i = r0 + (int64_t) (r + g) * blockDim.x + threadIdx.x;
		const bool	row = r + g < rpt && i < P.n;

#pragma unroll
		for (int u = 0; u < PP_GROUP_DC; u++)
			x[g][u] = row && u < P.d ? P.XT[(int64_t) u * P.n + i] : 0.0f;
		cl[g] = row && cls != nullptr ? cls[i] : INFINITY;
	}
}

/* Those rows' steps (pp_row_terms) */
template <int LT, bool W, typename max_t>
__device__ __forceinline__ void
pp_group_terms(const pp_state &P, int L, int c, double S, int64_t r0, int r, int rpt,
			   const float (&x)[PP_GROUP][PP_GROUP_DC], const float (&cl)[PP_GROUP],
			   const float4 (*cs)[LT / 4], unsigned long long *s, max_t *mx)
{
#pragma unroll
	for (int g = 0; g < PP_GROUP; g++)
	{
		const int64_t i = r0 + (int64_t) (r + g) * blockDim.x + threadIdx.x;
		float		q[LT];

		if (r + g >= rpt || i >= P.n)
			break;
#pragma unroll
		for (int t = 0; t < LT; t++)
			q[t] = 0.0f;
		pp_terms_dims<LT, PP_GROUP_DC>(x[g], P.d, cs, q);
		pp_row_terms<LT, W>(P, L, c, S, i, q, cl[g], s, mx);
	}
}

/*
 * pp_terms's least blocks an SM, rows a thread (RM > 0) and up to 8
 * columns: its loads' latency bounds it, and more warps hide it (H200,
 * 10M x 2, k = 100, k-means++ 20.8 ms at 2 blocks, 16.4 at 3, 14.5 at 4
 * with two rows loaded at once; 4M x 32, k = 256: 86 -> 76 ms at 4).
 * Weighted, or with more columns, those registers would spill.
 */
constexpr int
pp_terms_blocks(int LT, bool W, int RM)
{
	return RM == 0 || LT > 8 ? 1 : W ? 3 : 4;
}

/*
 * One step's pass over the rows: for t < L, min(cl, gc_dist2(x_i, cand_t)),
 * where cl is the row's term of the last winner (+inf at c == 0), stored
 * in place of the step's terms (the thread of row i reads its cl before
 * it writes), or lean computed from the D² and the last column
 * (pp_row_terms).  LT (a multiple of 4, > L lean, else >= L) columns are
 * computed, a dimension's candidates read as float4: no test of L in the
 * inner loop.  Then each trial's q on the step's grid, summed per block
 * of KM_BLOCK rows (a CUDA block's rpt x blockDim rows lie in one), and
 * its largest term.  RM: 0 a row a thread; 1 rpt rows a thread; 2
 * likewise, d <= PP_GROUP_DC, PP_GROUP rows loaded at once, as the pass
 * is bound by its loads' latency there (its own instance: the registers
 * it holds would cost the others occupancy).
 */
template <int LT, bool W, int RM>
__global__ void __launch_bounds__(PP_THREADS, pp_terms_blocks(LT, W, RM))
pp_terms(pp_state P, int L, int c, int rpt_)
{
	const int	rpt = RM > 0 ? rpt_ : 1;	/* 1: no registers held across rows */
	/* the largest term's bits: a float's unweighted (ordered as the double) */
	typedef typename std::conditional<W, unsigned long long, unsigned>::type max_t;
	__shared__ float4 cs[PP_CS_DIMS][LT / 4];	/* a chunk of the candidates */
	__shared__ unsigned long long red[2][LT];
	const int64_t r0 = (int64_t) blockIdx.x * blockDim.x * rpt;
	const double S = P.g->S;
	const float *cls = c == 0 ? nullptr : pp_won_terms(P);
	unsigned long long s[LT];
	max_t		mx[LT];

#pragma unroll
	for (int t = 0; t < LT; t++)
		s[t] = mx[t] = 0;
	if (threadIdx.x < 2 * LT)
		red[threadIdx.x / LT][threadIdx.x % LT] = 0;
	if (RM == 2)
	{
		float		x[PP_GROUP][PP_GROUP_DC],
					cl[PP_GROUP];

		pp_load_cands<LT>(P, c, 0, P.d, cs);
		__syncthreads();
		for (int r = 0; r < rpt; r += PP_GROUP)
		{
			pp_group_load(P, cls, r0, r, rpt, x, cl);
			pp_group_terms<LT, W>(P, L, c, S, r0, r, rpt, x, cl, cs, s, mx);
		}
	}
	else
		for (int r = 0; r < rpt; r++)
		{
			const int64_t i = r0 + (int64_t) r * blockDim.x + threadIdx.x;
			const bool	row = i < P.n;
			const float cl = cls == nullptr || !row ? INFINITY : cls[i];
			float		q[LT];

#pragma unroll
			for (int t = 0; t < LT; t++)
				q[t] = 0.0f;
			for (int jc = 0; jc < P.d; jc += PP_CS_DIMS)
			{
				const int	dc = P.d - jc < PP_CS_DIMS ? P.d - jc : PP_CS_DIMS;

				if (r > 0 && P.d <= PP_CS_DIMS)
					break;		/* jc = 0, the one chunk, is in place */
				__syncthreads();
				pp_load_cands<LT>(P, c, jc, dc, cs);
				__syncthreads();
				if (!row)
					continue;
				pp_terms_chunk<LT>(P, i, jc, dc, cs, q);
			}
			if (r > 0 && P.d <= PP_CS_DIMS && row)
				pp_terms_chunk<LT>(P, i, 0, P.d, cs, q);
			if (row)
				pp_row_terms<LT, W>(P, L, c, S, i, q, cl, s, mx);
		}
#pragma unroll
	for (int t = 0; t < LT; t++)
		if (t < L)
		{
			for (int o = 16; o > 0; o /= 2)
			{
				const unsigned long long so = __shfl_xor_sync(0xffffffffu, s[t], o);
				const max_t	mo = __shfl_xor_sync(0xffffffffu, mx[t], o);

				s[t] += so;
				mx[t] = mo > mx[t] ? mo : mx[t];
			}
			if ((threadIdx.x & 31) == 0)
			{
				atomicAdd(&red[0][t], s[t]);
				atomicMax(&red[1][t], W ? (unsigned long long) mx[t] :
						  (unsigned long long) __double_as_longlong((double) __uint_as_float((unsigned) mx[t])));
			}
		}
	__syncthreads();
	if (threadIdx.x < L)
	{
		const int64_t b = r0 / KM_BLOCK;

		atomicAdd(P.bs + (int64_t) threadIdx.x * P.nb + b, red[0][threadIdx.x]);
		atomicMax(P.tmax + threadIdx.x, red[1][threadIdx.x]);
	}
}

/* pp_terms with the least LT > L (lean: the last column the last winner's) or >= L */
template <bool W, int RM>
static void
pp_terms_lt(const pp_state &P, int L, int c, int rpt, unsigned grid, int bt, cudaStream_t s)
{
	const int	cols = P.lean ? L + 1 : L;

	if (cols <= 4)
		pp_terms<4, W, RM><<<grid, bt, 0, s>>>(P, L, c, rpt);
	else if (cols <= 8)
		pp_terms<8, W, RM><<<grid, bt, 0, s>>>(P, L, c, rpt);
	else if (cols <= 12)
		pp_terms<12, W, RM><<<grid, bt, 0, s>>>(P, L, c, rpt);
	else if (cols <= 16)
		pp_terms<16, W, RM><<<grid, bt, 0, s>>>(P, L, c, rpt);
	else
		pp_terms<KM_PP_LMAX, W, RM><<<grid, bt, 0, s>>>(P, L, c, rpt);
}

/*
 * pp_terms for the smallest LT that covers L trials.  Blocks of 64 rows
 * when 256 would leave SMs idle (k-means||'s candidates); else each thread
 * takes rpt rows (a power of two, a block's rows within one of KM_BLOCK),
 * while that leaves 8 blocks an SM, so that the sums' reduction is paid
 * once per rpt rows: where d <= PP_RPT_MAX_D, as there the reduction is
 * most of a row's work; at larger d the sums held across rows cost
 * registers, hence occupancy (1M x 128, k = 1000: k-means++ 284 -> 321 ms).
 */
static void
pp_terms_launch(const pp_state &P, int L, int c, int nsm, cudaStream_t s)
{
	const int	bt = P.n < (int64_t) nsm * PP_THREADS * 2 ? 64 : PP_THREADS;
	int			rpt = 1;
	unsigned	grid;

	while (bt == PP_THREADS && P.d <= PP_RPT_MAX_D && rpt < KM_BLOCK / PP_THREADS &&
		   P.n >= (int64_t) nsm * 8 * PP_THREADS * rpt * 2)
		rpt *= 2;
	grid = blocks_for(P.n, bt * rpt);
	if (rpt > 1 && P.d <= PP_GROUP_DC)
		P.w != nullptr ? pp_terms_lt<true, 2>(P, L, c, rpt, grid, bt, s)
			: pp_terms_lt<false, 2>(P, L, c, rpt, grid, bt, s);
	else if (rpt > 1)
		P.w != nullptr ? pp_terms_lt<true, 1>(P, L, c, rpt, grid, bt, s)
			: pp_terms_lt<false, 1>(P, L, c, rpt, grid, bt, s);
	else
		P.w != nullptr ? pp_terms_lt<true, 0>(P, L, c, rpt, grid, bt, s)
			: pp_terms_lt<false, 0>(P, L, c, rpt, grid, bt, s);
}

/*
 * The winner of a step's L trials (the whole block; every thread gets
 * it): the lowest potential, the sum of its nb block sums bs[t][.], ties
 * the earliest trial; *S the grid of its terms, from its largest term
 * tmax[t] (a double's bits).
 */
__device__ int
pp_choose(const unsigned long long *bs, const unsigned long long *tmax, int64_t nb,
		  int L, int64_t n, double *S)
{
	__shared__ uint64_t pot[KM_PP_LMAX];
	__shared__ unsigned long long tm[KM_PP_LMAX];
	__shared__ int best_s;
	const int	warp = threadIdx.x / 32,
				lane = threadIdx.x % 32;
	int			best;

	/* every trial's largest term with its sums: one round trip */
	if (threadIdx.x < L)
		tm[threadIdx.x] = __ldcg(tmax + threadIdx.x);
	for (int t = warp; t < L; t += PP_THREADS / 32)
	{
		uint64_t	s = 0;

		for (int64_t b = lane; b < nb; b += 32)
			s += __ldcg(bs + (int64_t) t * nb + b);
		for (int o = 16; o > 0; o /= 2)
			s += __shfl_xor_sync(0xffffffffu, s, o);
		if (lane == 0)
			pot[t] = s;
	}
	__syncthreads();
	if (threadIdx.x == 0)
	{
		best = 0;
		for (int u = 1; u < L; u++)
			if (pot[u] < pot[best])
				best = u;
		best_s = best;
	}
	__syncthreads();
	best = best_s;
	*S = gc_km_pot_scale(__longlong_as_double((long long) tm[best]), n);
	__syncthreads();			/* pot, tm and best_s free again */
	return best;
}

/* Centre c = trial best (its column of cand, its row cid[best]). */
__device__ void
pp_put(const pp_state &P, const float *cand, const int64_t *cid, int best, int c,
	   float *C, int64_t *chosen)
{
	if (threadIdx.x == 0 && chosen)
		chosen[c] = __ldcg(cid + best);
	for (int j = threadIdx.x; j < P.d; j += PP_THREADS)
		C[(int64_t) c * P.d + j] = __ldcg(cand + j * KM_PP_LMAX + best);
}

/* Lean: the winner's coordinates (column best of the candidates) into wc */
__device__ void
pp_keep_winner(const pp_state &P, int best)
{
	if (P.lean)
		for (int j = threadIdx.x; j < P.d; j += PP_THREADS)
			P.wc[j] = __ldcg(P.cand + j * KM_PP_LMAX + best);
}

/*
 * The potentials, the winner (centre c and its row), the next grid, and,
 * on the same grid, the next draws' prefix sums; on a new grid, with
 * regrid_here (a few blocks of rows), the block sums too, in place of
 * pp_regrid's launch.  Screened after the first centre, the winner only:
 * its D² are not written yet (pp_scr_apply, pp_scr_rescan).
 */
__global__ void __launch_bounds__(PP_THREADS)
pp_select(pp_state P, int L, float *C, int c, int64_t *chosen, bool regrid_here)
{
	__shared__ union
	{
		pp_reduce_t::TempStorage r;
		pp_scan_t::TempStorage s;
	}			ts;
	__shared__ bool same;
	double		S;
	const int	best = pp_choose(P.bs, P.tmax, P.nb, L, P.n, &S);

	if (P.scr && c > 0)
	{
		if (threadIdx.x == 0)
			*P.best = best;
		pp_put(P, P.cand, P.cid, best, c, C, chosen);
		return;
	}
	if (threadIdx.x == 0)
	{
		*P.best = best;
		same = c > 0 && S == P.g->S;
		P.g->S = S;
		P.g->regrid = !same && !regrid_here;
	}
	__syncthreads();
	pp_put(P, P.cand, P.cid, best, c, C, chosen);
	pp_keep_winner(P, best);
	__syncthreads();
	if (same)
		pp_prefix_of((const uint64_t *) P.bs + (int64_t) best * P.nb, P.nb, P.off, ts.s);
	else if (regrid_here)
		pp_regrid_here(P, P.lean ? P.terms : P.terms + (int64_t) best * P.n,
					   P.lean ? P.wc : nullptr, S, P.off, ts.r, ts.s);
}

#include "kmeans_pp_screen.cuh"

/*
 * The persistent path: k-means++ over few rows (k-means||'s candidates,
 * small tables), where a step is microseconds of latency-bound work and
 * four launches a step cost more than the step.  One cooperative launch
 * runs steps c0 .. c1-1 with one grid barrier a step (two where the grid
 * changes), with the four kernels' draws and choice and their terms'
 * operations in their order, hence the same centres bit for bit
 * (test_kmeans_gpu: test_seed runs both paths against the CPU).
 *
 * Each block keeps its R tiles of 32 rows (tiles b, b + G, b + 2G ...) in
 * shared memory for the launch, and each step:
 *   chooses the last step's winner from its block sums and the grid from
 *     its largest term (pp_choose: the same in every block);
 *   on a new grid, gives its own tiles' sums of the winner's terms on it,
 *     then a grid barrier;
 *   draws every trial itself, a warp a trial: the prefix of the winner's
 *     sums a tile (pp_persist_prefix), the tile by binary search, the row
 *     by a warp's scan of the tile's terms, which is pp_draw_in's row (the
 *     same prefix over the rows);
 *   loads the trials' rows and computes the terms of its tiles, a warp a
 *     tile and PP_PERSIST_LT trials, a lane a row (the rows and trials in
 *     shared memory, the next dimension's loaded before this one's steps):
 *     each trial's sums a tile (stored) and a block of KM_BLOCK rows
 *     (atomics), and its largest term.
 * So the trials need no barrier of their own: every block draws the same
 * rows.  The buffers a step writes rotate over PP_PERSIST_SETS sets (step
 * c writes set c mod 3, reads set c - 1's and clears set c + 1's sums), so
 * that no step writes what another block may still read.
 */
namespace
{
struct pp_par
{
	float	   *terms[PP_PERSIST_SETS];	/* L x n */
	unsigned long long *bs[PP_PERSIST_SETS];	/* L x nb */
	unsigned long long *tmax[PP_PERSIST_SETS];	/* KM_PP_LMAX */
	uint64_t   *tq[PP_PERSIST_SETS];	/* L x ntile: the sums a tile */
	float	   *cand[PP_PERSIST_SETS];	/* d x KM_PP_LMAX (block 0's copy) */
	int64_t    *cid[PP_PERSIST_SETS];	/* KM_PP_LMAX */
};

/* A launch of pp_persist: G blocks of R tiles each, smem bytes of dynamic shared memory */
struct pp_plan
{
	int			G,
				R;
	size_t		smem;
};
}

/* The trials' columns of pp_persist's candidates: L rounded up to whole groups */
__host__ __device__ __forceinline__ int
pp_persist_lp(int L)
{
	return (L + PP_PERSIST_LT - 1) / PP_PERSIST_LT * PP_PERSIST_LT;
}

/* Its tiles' prefix's words in shared memory (ntile + 1, even: the rows after it 16-byte aligned) */
__host__ __device__ __forceinline__ int64_t
pp_persist_tpw(int64_t ntile)
{
	return (ntile + 2) / 2 * 2;
}

/* pp_persist's dynamic shared memory: the tiles' prefix, the trials' rows, the block's tiles */
static size_t
pp_persist_smem(int64_t ntile, int d, int L, int R)
{
	return sizeof(uint64_t) * (size_t) pp_persist_tpw(ntile) +
		sizeof(float) * ((size_t) d * pp_persist_lp(L) + (size_t) R * d * 32);
}

/*
 * tp[0 .. ntile] = the prefix sums of tq (ntile <= PP_PERSIST_TI x
 * PP_THREADS), tp[0] = 0: the whole block, each warp its segment of ntile
 * / 8 of them, 32 at a time (all its loads at once, coalesced), then the
 * totals of the segments before it.
 */
__device__ void
pp_persist_prefix(const uint64_t *tq, int64_t ntile, uint64_t *tp)
{
	__shared__ uint64_t tot[PP_THREADS / 32];
	__shared__ pp_wscan_t::TempStorage ws[PP_THREADS / 32];
	const int	warp = threadIdx.x / 32,
				lane = threadIdx.x % 32;
	const int64_t seg = (ntile + PP_THREADS / 32 - 1) / (PP_THREADS / 32),
				e0 = warp * seg,
				e1 = e0 + seg < ntile ? e0 + seg : ntile;
	uint64_t	v[PP_PERSIST_TI],
				carry = 0,
				add = 0;

#pragma unroll
	for (int u = 0; u < PP_PERSIST_TI; u++)
	{
		const int64_t e = e0 + u * 32 + lane;

		v[u] = e < e1 ? __ldcg(tq + e) : 0;
	}
#pragma unroll
	for (int u = 0; u < PP_PERSIST_TI; u++)
	{
		const int64_t e = e0 + u * 32 + lane;
		uint64_t	a,
					all;

		pp_wscan_t(ws[warp]).InclusiveSum(v[u], a, all);
		if (e < e1)
			tp[e + 1] = carry + a;
		carry += all;
	}
	if (lane == 0)
		tot[warp] = carry;
	__syncthreads();
	for (int w = 0; w < warp; w++)
		add += tot[w];
	if (add != 0)
		for (int64_t e = e0 + lane; e < e1; e += 32)
			tp[e + 1] += add;
	if (threadIdx.x == 0)
		tp[0] = 0;
	__syncthreads();
}

/*
 * The row of draw R < tp[ntile] (a warp): the first tile whose prefix
 * passes R, then the first of its rows whose prefix does, the terms
 * closest (n) on the grid S, as in pp_draw_in.
 */
__device__ int64_t
pp_persist_draw(const pp_state &P, const float *closest, const uint64_t *tp, int64_t ntile,
				double S, uint64_t R)
{
	__shared__ pp_wscan_t::TempStorage ws[PP_THREADS / 32];
	const int	lane = threadIdx.x % 32;
	const int64_t tile = gc_km_pp_block(tp, ntile, R),
				i = tile * 32 + lane;
	uint64_t	acc = tile < ntile && i < P.n ?
		gc_km_pot_q(gc_km_pot_term(P.w, i, __ldcg(closest + i)), S) : 0;
	unsigned	hit;

	pp_wscan_t(ws[threadIdx.x / 32]).InclusiveSum(acc, acc);
	hit = __ballot_sync(0xffffffffu, tile < ntile && tp[tile] + acc > R);
	return hit != 0 ? tile * 32 + __ffs(hit) - 1 : P.n - 1;
}

/*
 * The terms of tile `tile` (rows tile * 32 + lane) for the trials t = g *
 * PP_PERSIST_LT + u < Lc, from their distances q[u] and the rows' D² cl:
 * stored in set cur with the tile's sums on the grid S; the block sums
 * (atomics) and the trials' largest terms (mx_s).
 */
__device__ __forceinline__ void
pp_persist_tile(const pp_state &P, const pp_par &Q, int cur, int64_t ntile, int Lc, double S,
				int64_t tile, int g, const float (&q)[PP_PERSIST_LT], float cl,
				unsigned long long *mx_s)
{
	const int	lane = threadIdx.x % 32;
	const int64_t i = tile * 32 + lane;

#pragma unroll
	for (int u = 0; u < PP_PERSIST_LT; u++)
	{
		const int	t = g * PP_PERSIST_LT + u;
		uint64_t	s = 0,
					mb = 0;

		if (t >= Lc)
			break;
		if (i < P.n)
		{
			const float m = q[u] < cl ? q[u] : cl;
			const double tm = gc_km_pot_term(P.w, i, m);

			Q.terms[cur][(int64_t) t * P.n + i] = m;
			s = gc_km_pot_q(tm, S);
			mb = (uint64_t) __double_as_longlong(tm);	/* >= 0: ordered */
		}
		for (int o = 16; o > 0; o /= 2)
		{
			const uint64_t so = __shfl_xor_sync(0xffffffffu, s, o),
						mo = __shfl_xor_sync(0xffffffffu, mb, o);

			s += so;
			mb = mo > mb ? mo : mb;
		}
		if (lane == 0)
		{
			Q.tq[cur][(int64_t) t * ntile + tile] = s;
			atomicAdd(Q.bs[cur] + (int64_t) t * P.nb + tile * 32 / KM_BLOCK, (unsigned long long) s);
			atomicMax(mx_s + t, (unsigned long long) mb);
		}
	}
}

__global__ void __launch_bounds__(PP_THREADS)
pp_persist(pp_state P, pp_par Q, uint64_t seed, uint64_t stream, int L, int c0,
		   int c1, int k, int64_t first, float *C, int64_t *chosen, int R)
{
	namespace cg = cooperative_groups;
	cg::grid_group grid = cg::this_grid();
	extern __shared__ uint64_t pp_pm[];
	__shared__ int64_t rows[KM_PP_LMAX];
	__shared__ unsigned long long mx_s[KM_PP_LMAX];
	const int	d = P.d,
				warp = threadIdx.x / 32,
				lane = threadIdx.x % 32;
	const int64_t n = P.n,
				nb = P.nb,
				ntile = (n + 31) / 32;
	const int	Lp = pp_persist_lp(L);
	uint64_t   *const tp = pp_pm;	/* ntile + 1: the winner's prefix a tile */
	float	   *const cs = (float *) (tp + pp_persist_tpw(ntile));	/* d x Lp: the trials' rows */
	float	   *const xs = cs + (size_t) d * Lp;	/* R x d x 32: the block's tiles */
	double		S = c0 == 0 ? 0.0 : P.g->S;	/* the grid of step c's sums */

	for (int64_t e = threadIdx.x; e < (int64_t) R * d * 32; e += PP_THREADS)
	{
		const int64_t tile = blockIdx.x + e / ((int64_t) d * 32) * gridDim.x,
					i = tile * 32 + e % 32;

		xs[e] = i < n ? P.XT[(e / 32 % d) * n + i] : 0.0f;
	}
	for (int c = c0; c < c1; c++)
	{
		const int	cur = c % PP_PERSIST_SETS,
					prv = (c + PP_PERSIST_SETS - 1) % PP_PERSIST_SETS,
					nxt = (c + 1) % PP_PERSIST_SETS,
					Lc = c == 0 ? 1 : L,
					ng = (Lc + PP_PERSIST_LT - 1) / PP_PERSIST_LT;	/* groups of trials */
		const float *closest = nullptr;

		/* the next step's sums, last read by the step before this one */
		for (int64_t e = (int64_t) blockIdx.x * PP_THREADS + threadIdx.x; e < (int64_t) L * nb;
			 e += (int64_t) gridDim.x * PP_THREADS)
			Q.bs[nxt][e] = 0;
		if (blockIdx.x == 0 && threadIdx.x < KM_PP_LMAX)
			Q.tmax[nxt][threadIdx.x] = 0;
		if (threadIdx.x < KM_PP_LMAX)
			mx_s[threadIdx.x] = 0;
		if (c > 0)
		{
			double		Sn;
			const int	best = pp_choose(Q.bs[prv], Q.tmax[prv], nb, c == 1 ? 1 : L, n, &Sn);
			uint64_t   *const tw = Q.tq[prv] + (int64_t) best * ntile;

			closest = Q.terms[prv] + (int64_t) best * n;
			if (blockIdx.x == 0)
				pp_put(P, Q.cand[prv], Q.cid[prv], best, c - 1, C, chosen);
			if (c == 1 || Sn != S)
			{
				/* a new grid: this block's tiles' sums of the winner on it */
				for (int r = warp; r < R; r += PP_THREADS / 32)
				{
					const int64_t tile = blockIdx.x + (int64_t) r * gridDim.x,
								i = tile * 32 + lane;
					uint64_t	s = i < n ? gc_km_pot_q(gc_km_pot_term(P.w, i, __ldcg(closest + i)), Sn) : 0;

					for (int o = 16; o > 0; o /= 2)
						s += __shfl_xor_sync(0xffffffffu, s, o);
					if (lane == 0 && tile < ntile)
						tw[tile] = s;
				}
				grid.sync();
			}
			S = Sn;
			pp_persist_prefix(tw, ntile, tp);
		}

		/* every trial's row, a warp a trial, then their coordinates */
		for (int t = warp; t < Lc; t += PP_THREADS / 32)
		{
			int64_t		row = first;

			if (c > 0)
			{
				const uint64_t T = tp[ntile];

				row = P.w == nullptr ? n - 1 : P.wlast;
				if (T > 0)
					row = pp_persist_draw(P, closest, tp, ntile, S,
										  gc_km_pot_draw(seed, stream, 1 + (uint64_t) (c - 1) * L + t, T));
			}
			if (lane == 0)
				rows[t] = row;
		}
		__syncthreads();
		for (int t = warp; t < Lp; t += PP_THREADS / 32)
			for (int j0 = 0; j0 < d; j0 += 4 * 32)
			{
				float		v[4];

				/* four loads in flight before the stores (cand may alias XT) */
#pragma unroll
				for (int u = 0; u < 4; u++)
				{
					const int	j = j0 + u * 32 + lane;

					v[u] = t < Lc && j < d ? P.XT[(int64_t) j * n + rows[t]] : 0.0f;
				}
#pragma unroll
				for (int u = 0; u < 4; u++)
				{
					const int	j = j0 + u * 32 + lane;

					if (j >= d)
						break;
					cs[j * Lp + t] = v[u];
					if (blockIdx.x == 0 && t < Lc)
						Q.cand[cur][j * KM_PP_LMAX + t] = v[u];
				}
			}
		if (blockIdx.x == 0 && threadIdx.x < Lc)
			Q.cid[cur][threadIdx.x] = rows[threadIdx.x];
		__syncthreads();

		/* the terms of this block's tiles: a warp a tile and group of trials, a lane a row */
		for (int task = warp; task < R * ng; task += PP_THREADS / 32)
		{
			const int	r = task / ng,
						g = task % ng;
			const int64_t tile = blockIdx.x + (int64_t) r * gridDim.x,
						i = tile * 32 + lane;
			const float *x = xs + (size_t) r * d * 32 + lane;
			const float2 *cv = (const float2 *) (cs + g * PP_PERSIST_LT);
			const int	ldc = Lp / PP_PERSIST_LT;
			float		q[PP_PERSIST_LT] = {0.0f, 0.0f};
			float		cl,
						a;
			float2		cc;

			if (tile >= ntile)
				break;
			cl = closest == nullptr || i >= n ? INFINITY : __ldcg(closest + i);
			a = x[0];
			cc = cv[0];
#pragma unroll 4
			for (int j = 0; j < d; j++)
			{
				/* the next dimension's operands loaded before this one's steps */
				const float an = j + 1 < d ? x[(j + 1) * 32] : 0.0f;
				const float2 cn = j + 1 < d ? cv[(j + 1) * ldc] : make_float2(0.0f, 0.0f);

				q[0] = gc_l2_step(q[0], a, cc.x);
				q[1] = gc_l2_step(q[1], a, cc.y);
				a = an;
				cc = cn;
			}
			pp_persist_tile(P, Q, cur, ntile, Lc, S, tile, g, q, cl, mx_s);
		}
		__syncthreads();
		if (threadIdx.x < Lc)
			atomicMax(Q.tmax[cur] + threadIdx.x, mx_s[threadIdx.x]);
		grid.sync();
	}
	if (c1 == k && blockIdx.x == 0)
	{
		const int	last = (k - 1) % PP_PERSIST_SETS;
		double		Sn;
		const int	best = pp_choose(Q.bs[last], Q.tmax[last], nb, k == 1 ? 1 : L, n, &Sn);

		pp_put(P, Q.cand[last], Q.cid[last], best, k - 1, C, chosen);
	}
	if (blockIdx.x == 0 && threadIdx.x == 0)
		P.g->S = S;
}

namespace
{
struct pp_buffers
{
	pp_state	P = {};
	cudaStream_t s = nullptr;	/* the call's: frees in its order */

	~pp_buffers()
	{
		gc_dfree(P.terms, s);
		gc_dfree(P.bs, s);
		gc_dfree(P.tmax, s);
		gc_dfree(P.bq, s);
		gc_dfree(P.off, s);
		gc_dfree(P.g, s);
		gc_dfree(P.cid, s);
		gc_dfree(P.cand, s);
		gc_dfree(P.best, s);
		gc_dfree(P.wc, s);
		gc_dfree(P.tq, s);
		gc_dfree(P.Z.XH, s);
		gc_dfree(P.Z.XRown, s);
		gc_dfree(P.Z.nx, s);
		gc_dfree(P.Z.mu, s);
		gc_dfree(P.Z.sc, s);
		gc_dfree(P.Z.amax, s);
		gc_dfree(P.Z.qrow, s);
		gc_dfree(P.Z.qd, s);
		gc_dfree(P.Z.qn, s);
		gc_dfree(P.Z.bmx, s);
		gc_dfree(P.Z.dirty, s);
		gc_dfree(P.Z.done, s);
	}
};
}

/*
 * Whether k-means++ over d dimensions with L trials runs lean (the
 * header): GPUCLUST_KM_PP_LEAN=0 never, =1 always (tests, benchmarks),
 * else up to PP_LEAN_MAX_D dimensions.  There the L terms it does not
 * write are most of a step's bytes (H200, 10M x 2, k = 100: k-means++
 * 20.8 -> 19.6 ms); above, the winner's distances cost more than the
 * writes they save (4M x 32, k = 256: 77 -> 86 ms; 1M x 128, k = 1000,
 * a third more columns: 249 -> 515 ms).  Not on the persistent path.
 */
static bool
pp_lean_wanted(int d, int L)
{
	const char *env = getenv("GPUCLUST_KM_PP_LEAN");

	if (L + 1 > KM_PP_LMAX || (env && atoi(env) == 0))
		return false;
	return (env && atoi(env) == 1) || d <= PP_LEAN_MAX_D;
}

/*
 * Whether k-means++ over n rows (nb blocks) of d dimensions runs
 * persistent: GPUCLUST_KM_PP_PERSIST=0 never, =1 whenever it can (the
 * tests), else up to PP_PERSIST_NB blocks and PP_PERSIST_ND floats, where
 * it measured faster (bench_kmeans BENCH_SEED_PATHS=1); and only where
 * pp_persist_plan finds its blocks room.
 */
static bool
pp_persist_wanted(int64_t n, int64_t nb, int d)
{
	const char *env = getenv("GPUCLUST_KM_PP_PERSIST");

	if ((env && atoi(env) == 0) || nb > PP_PERSIST_NB_MAX)
		return false;
	return (env && atoi(env) == 1) || (nb <= PP_PERSIST_NB && n * d <= PP_PERSIST_ND);
}

/*
 * pp_persist's launch for n rows of d dimensions and L trials: every block
 * resident with its tiles in shared memory, 2 an SM where they fit, else
 * 1; as few blocks as take the tiles in as many rounds.  G = 0: it cannot
 * run here.  The function's largest dynamic shared memory is always set to
 * the device's whole (the same value from every thread of the process).
 */
static pp_plan
pp_persist_plan(int64_t n, int d, int L, int nsm)
{
	const int64_t ntile = (n + 31) / 32;
	pp_plan		p = {0, 0, 0};
	cudaFuncAttributes fa;
	int			dev = 0,
				optin = 0;

	if (cudaGetDevice(&dev) != cudaSuccess ||
		cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess ||
		cudaFuncGetAttributes(&fa, pp_persist) != cudaSuccess ||
		cudaFuncSetAttribute(pp_persist, cudaFuncAttributeMaxDynamicSharedMemorySize,
							 optin - (int) fa.sharedSizeBytes) != cudaSuccess)
	{
		(void) cudaGetLastError();
		return p;
	}
	for (int per = 2; per >= 1; per--)
	{
		const int64_t R = (ntile + (int64_t) per * nsm - 1) / ((int64_t) per * nsm),
					G = (ntile + R - 1) / R;
		const size_t smem = pp_persist_smem(ntile, d, L, (int) R);
		int			occ = 0;

		if (smem + fa.sharedSizeBytes > (size_t) optin)
			continue;
		if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, pp_persist, PP_THREADS, smem) != cudaSuccess)
		{
			(void) cudaGetLastError();
			return p;
		}
		if ((int64_t) occ * nsm >= G)
		{
			p.G = (int) G;
			p.R = (int) R;
			p.smem = smem;
			return p;
		}
	}
	return p;
}

/* k-means++ on the persistent path: PP_PERSIST_STEPS centres a launch. */
static gc_code
pp_run_persist(const gc_ctx *ctx, cudaStream_t s, pp_state &P, int L, int k,
			   const pp_plan &plan, uint64_t seed, uint64_t stream, int64_t first, float *C,
			   int64_t *chosen, gc_status *st)
{
	const int64_t ntile = (P.n + 31) / 32;
	pp_par		Q;

	for (int p = 0; p < PP_PERSIST_SETS; p++)
	{
		Q.terms[p] = P.terms + (size_t) p * P.n * L;
		Q.bs[p] = P.bs + (size_t) p * P.nb * L;
		Q.tmax[p] = P.tmax + (size_t) p * KM_PP_LMAX;
		Q.tq[p] = P.tq + (size_t) p * ntile * L;
		Q.cand[p] = P.cand + (size_t) p * P.d * KM_PP_LMAX;
		Q.cid[p] = P.cid + (size_t) p * KM_PP_LMAX;
	}
	/* step 0's sums start from 0 (each step clears the next's) */
	KM_CK(cudaMemsetAsync(P.bs, 0, sizeof(unsigned long long) * P.nb * L * PP_PERSIST_SETS, s));
	KM_CK(cudaMemsetAsync(P.tmax, 0, sizeof(unsigned long long) * KM_PP_LMAX * PP_PERSIST_SETS, s));
	for (int c0 = 0; c0 < k; c0 += PP_PERSIST_STEPS)
	{
		int			c1 = k - c0 < PP_PERSIST_STEPS ? k : c0 + PP_PERSIST_STEPS,
					Lv = L,
					kv = k,
					R = plan.R;
		void	   *args[] = {&P, &Q, &seed, &stream, &Lv, &c0, &c1, &kv, &first, &C, &chosen, &R};

		KM_CK(cudaLaunchCooperativeKernel((const void *) pp_persist, plan.G, PP_THREADS, args,
										  plan.smem, s));
		KM_CK(cudaStreamSynchronize(s));
		if (gc_cancelled(ctx))
			return gc_fail(st, GC_ECANCEL, "canceled");
	}
	return GC_OK;
}

/*
 * B's state over n rows (XT, d x n; weights w or NULL) for L trials, its
 * buffers allocated on s, np sets of those a step writes (the persistent
 * path's PP_PERSIST_SETS, with its sums a tile); lean: the rows' D² in
 * place of the terms;
 * screened (scr), the D² and the screen's buffers (XR: the rows row-major,
 * or NULL).
 */
static gc_code
pp_open(pp_buffers &B, cudaStream_t s, const float *XT, const float *XR, int64_t n, int d,
		const double *w, int L, int np, bool lean, bool scr, gc_status *st)
{
	pp_state   &P = B.P;
	const int64_t nb = (n + KM_BLOCK - 1) / KM_BLOCK;

	B.s = s;
	P.XT = XT;
	P.n = n;
	P.d = d;
	P.nb = nb;
	P.w = w;
	P.wlast = n - 1;
	P.lean = lean;
	P.scr = scr;
	KM_CK(gc_dalloc((void **) &P.terms, sizeof(float) * (size_t) n * (lean || scr ? 1 : L * np), s));
	KM_CK(gc_dalloc((void **) &P.wc, sizeof(float) * (size_t) d, s));
	KM_CK(gc_dalloc((void **) &P.bs, sizeof(unsigned long long) * (size_t) nb * L * np, s));
	KM_CK(gc_dalloc((void **) &P.tmax, sizeof(unsigned long long) * KM_PP_LMAX * np, s));
	KM_CK(gc_dalloc((void **) &P.bq, sizeof(uint64_t) * (size_t) nb, s));
	KM_CK(gc_dalloc((void **) &P.off, sizeof(uint64_t) * (size_t) (nb + 1), s));
	KM_CK(gc_dalloc((void **) &P.g, sizeof(pp_grid), s));
	KM_CK(cudaMemsetAsync(P.g, 0, sizeof(pp_grid), s));
	KM_CK(gc_dalloc((void **) &P.cid, sizeof(int64_t) * KM_PP_LMAX * np, s));
	KM_CK(gc_dalloc((void **) &P.cand, sizeof(float) * (size_t) d * KM_PP_LMAX * np, s));
	KM_CK(gc_dalloc((void **) &P.best, sizeof(int), s));
	KM_CK(cudaMemsetAsync(P.best, 0, sizeof(int), s));
	if (np > 1)
		KM_CK(gc_dalloc((void **) &P.tq, sizeof(uint64_t) * (size_t) ((n + 31) / 32) * L * np, s));
	return scr ? pp_scr_open(P, s, XR, L, st) : GC_OK;
}

static gc_code
pp_run(const gc_ctx *ctx, cudaStream_t s, const float *XT, const float *XR, int64_t n, int d,
	   int k, const double *w, const double *w_host, uint64_t seed,
	   uint64_t stream, float *C, int64_t *chosen, gc_status *st)
{
	const int	L = gc_km_n_local_trials(k);
	const int64_t nb = (n + KM_BLOCK - 1) / KM_BLOCK;
	int			dev = 0,
				nsm = 1,
				coop = 0;
	pp_plan		plan = {0, 0, 0};
	bool		persist,
				scr,
				regrid_here;
	pp_buffers	B;
	pp_state   &P = B.P;
	int64_t		first;
	gc_code		rc;

	if (L > KM_PP_LMAX)
		return gc_fail(st, GC_EINTERNAL, "k-means++: %d local trials exceed %d", L, KM_PP_LMAX);
	KM_CK(cudaGetDevice(&dev));
	KM_CK(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev));
	KM_CK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev));
	if (coop && pp_persist_wanted(n, nb, d))
		plan = pp_persist_plan(n, d, L, nsm);
	persist = plan.G > 0;
	scr = pp_scr_wanted(n, d, L, w, persist);
	regrid_here = nb <= PP_SELECT_REGRID_NB && !scr;	/* screened, pp_regrid's launch */
	if ((rc = pp_open(B, s, XT, XR, n, d, w, L, persist ? PP_PERSIST_SETS : 1,
					  !persist && !scr && pp_lean_wanted(d, L), scr, st)) != GC_OK)
		return rc;

	if (w != nullptr)
	{
		first = gc_km_weighted_first(w_host, n, seed, stream);
		for (int64_t i = n - 1; i >= 0; i--)
			if (w_host[i] > 0.0)
			{
				P.wlast = i;
				break;
			}
	}
	else
	{
		first = (int64_t) (gc_rng_uniform(seed, stream, 0) * (double) n);
		if (first >= n)
			first = n - 1;
	}

	if (persist)
		return pp_run_persist(ctx, s, P, L, k, plan, seed, stream, first, C, chosen, st);

	/* Centre 0: one "candidate", row first, against closest = +inf. */
	for (int c = 0; c < k; c++)
	{
		const int	Lc = c == 0 ? 1 : L;

		if (c > 0 && !regrid_here)
		{
			pp_regrid<<<(unsigned) nb, PP_THREADS, 0, s>>>(P);
			KM_LAUNCHED();
		}
		pp_draw<<<Lc, PP_THREADS, 0, s>>>(P, seed, stream, c, Lc, first);
		KM_LAUNCHED();
		if (scr && c > 0)
			pp_scr_launch(P, Lc, nsm, s);
		else
			pp_terms_launch(P, Lc, c, nsm, s);
		KM_LAUNCHED();
		pp_select<<<1, PP_THREADS, 0, s>>>(P, Lc, C, c, chosen, regrid_here);
		KM_LAUNCHED();
		if (scr && c > 0 && c < k - 1)
		{
			pp_scr_apply<<<nsm * 2, PP_THREADS, 0, s>>>(P, Lc);
			KM_LAUNCHED();
			pp_scr_rescan<<<(unsigned) nb, PP_THREADS, 0, s>>>(P);
			KM_LAUNCHED();
		}
		if ((c & 15) == 15)
		{
			KM_CK(cudaStreamSynchronize(s));
			if (gc_cancelled(ctx))
				return gc_fail(st, GC_ECANCEL, "canceled");
		}
	}
	KM_CK(cudaStreamSynchronize(s));
	return GC_OK;
}

gc_code
km_pp_device_w(const gc_ctx *ctx, cudaStream_t s, const float *XT, const float *XR,
			   int64_t n, int d, int k, const double *w, const double *w_host,
			   uint64_t seed, uint64_t stream, float *C, int64_t *chosen,
			   gc_status *st)
{
	return pp_run(ctx, s, XT, XR, n, d, k, w, w_host, seed, stream, C, chosen, st);
}

/* ---- k-means++ over the shards of a split fit ---- */

#define PP_ROW_DRAW (-1)		/* pp_draws: the row of draw R[t] */
#define PP_ROW_NONE (-2)		/* pp_draws: another shard's trial */

namespace
{
/* A step's trials on one shard: per trial its row (local), PP_ROW_DRAW
 * (the row of the local draw R[t]) or PP_ROW_NONE. */
struct pp_draws
{
	uint64_t	R[KM_PP_LMAX];
	int64_t		row[KM_PP_LMAX];
};

/* One shard's k-means++: its state, and on its device a step's
 * potentials, largest terms and draws' total for the host. */
struct pp_shard
{
	pp_buffers	B;
	unsigned long long *dout = nullptr;	/* 2 x KM_PP_LMAX + 1 */
	int			nsm = 1;

	~pp_shard()
	{
		gc_dfree(dout, B.s);
	}
};

/* Every shard's, and the host's pinned buffers: per shard its outputs
 * (2 x KM_PP_LMAX + 1) and its candidates' matrix, then the step's
 * candidates. */
struct pp_shards : gc_per_gpu<pp_shard>
{
	unsigned long long *hout = nullptr;
	float	   *hcand = nullptr;

	~pp_shards()
	{
		cudaFreeHost(hout);
		cudaFreeHost(hcand);
	}
};
}

/* The shard's trials of a step (block t: trial t) as candidate columns. */
__global__ void __launch_bounds__(PP_THREADS)
pp_draw_at(pp_state P, pp_draws W)
{
	__shared__ pp_draw_ts ts;
	const int	t = blockIdx.x;
	int64_t		row = W.row[t];

	if (row == PP_ROW_NONE)
		return;
	if (row == PP_ROW_DRAW)
		row = pp_draw_in(P, pp_won_terms(P), P.lean ? P.wc : nullptr, P.off, P.g->S, W.R[t], ts);
	pp_take(P, row, t, P.cand, P.cid);
}

/* out[t]: trial t's potential over the shard's rows (its block sums'
 * sum); out[L + t]: its largest term's bits. */
__global__ void __launch_bounds__(PP_THREADS)
pp_pots(pp_state P, int L, unsigned long long *out)
{
	const int	warp = threadIdx.x / 32,
				lane = threadIdx.x % 32;

	for (int t = warp; t < L; t += PP_THREADS / 32)
	{
		unsigned long long s = 0;

		for (int64_t b = lane; b < P.nb; b += 32)
			s += P.bs[(int64_t) t * P.nb + b];
		for (int o = 16; o > 0; o /= 2)
			s += __shfl_xor_sync(0xffffffffu, s, o);
		if (lane == 0)
		{
			out[t] = s;
			out[L + t] = P.tmax[t];
		}
	}
}

/* The step's winner best and its grid S, lean its coordinates; on the
 * same grid (same) the next draws' prefix sums of its block sums, else
 * pp_regrid's next. */
__global__ void __launch_bounds__(PP_THREADS)
pp_next(pp_state P, int best, double S, bool same)
{
	__shared__ pp_scan_t::TempStorage ts;

	if (threadIdx.x == 0)
	{
		*P.best = best;
		P.g->S = S;
		P.g->regrid = !same;
	}
	pp_keep_winner(P, best);
	if (same)
		pp_prefix_of((const uint64_t *) P.bs + (int64_t) best * P.nb, P.nb, P.off, ts);
}

/* Every shard synchronised, each with its device current. */
static gc_code
pp_shards_sync(const pp_shards &PS, gc_status *st)
{
	for (int s = 0; s < PS.S; s++)
	{
		KM_CK(cudaSetDevice(PS.dev[s]));
		KM_CK(cudaStreamSynchronize(PS.P[s]->B.s));
	}
	return GC_OK;
}

/* The shards' states over their rows, the host's buffers. */
static gc_code
pp_shards_open(pp_shards &PS, km_dev *const *D, int L, gc_status *st)
{
	const int	d = D[0]->d;
	gc_code		rc;

	KM_CK(cudaHostAlloc((void **) &PS.hout,
						sizeof(unsigned long long) * (2 * KM_PP_LMAX + 1) * PS.S,
						cudaHostAllocPortable));
	KM_CK(cudaHostAlloc((void **) &PS.hcand, sizeof(float) * (size_t) d * KM_PP_LMAX * (PS.S + 1),
						cudaHostAllocPortable));
	for (int s = 0; s < PS.S; s++)
	{
		km_dev	   &Ds = *D[s];
		pp_shard   *P;

		KM_CK(cudaSetDevice(PS.dev[s]));
		if ((PS.P[s] = P = new (std::nothrow) pp_shard) == nullptr)
			return gc_fail(st, GC_ENOMEM, "GPU k-means: out of memory");
		KM_CK(cudaDeviceGetAttribute(&P->nsm, cudaDevAttrMultiProcessorCount, PS.dev[s]));
		if ((rc = pp_open(P->B, Ds.s, Ds.XT, nullptr, Ds.n, d, nullptr, L, 1, pp_lean_wanted(d, L), false,
						  st)) != GC_OK)
			return rc;
		/* the candidates' matrix comes down whole, its other shards' columns too */
		KM_CK(cudaMemsetAsync(P->B.P.cand, 0, sizeof(float) * (size_t) d * KM_PP_LMAX, Ds.s));
		KM_CK(gc_dalloc((void **) &P->dout, sizeof(unsigned long long) * (2 * KM_PP_LMAX + 1),
						Ds.s));
	}
	return GC_OK;
}

/*
 * The rows of step c's Lc trials into W (per shard): c = 0 the row first;
 * else each trial's draw over the problem's T, the sum of the shards'
 * totals Ts (the terms of the last winner), found in the first shard whose
 * running total exceeds it, as one GPU's search of the whole blocking
 * finds it; with T = 0 the problem's last row.
 */
static void
pp_shards_draws(const int64_t *r0, int S, const uint64_t *Ts, uint64_t seed,
				uint64_t stream, int c, int Lc, int64_t first, pp_draws *W)
{
	uint64_t	T = 0;

	for (int s = 0; s < S; s++)
	{
		for (int t = 0; t < KM_PP_LMAX; t++)
			W[s].row[t] = PP_ROW_NONE;
		T += Ts[s];
	}
	for (int t = 0; t < Lc; t++)
	{
		uint64_t	R,
					before = 0;
		int			s = 0;

		if (c == 0)
		{
			while (first >= r0[s + 1])
				s++;
			W[s].row[t] = first - r0[s];
			continue;
		}
		if (T == 0)
		{
			W[S - 1].row[t] = r0[S] - r0[S - 1] - 1;
			continue;
		}
		R = gc_km_pot_draw(seed, stream, 1 + (uint64_t) (c - 1) * Lc + t, T);
		while (before + Ts[s] <= R)
			before += Ts[s++];
		W[s].row[t] = PP_ROW_DRAW;
		W[s].R[t] = R - before;
	}
}

gc_code
km_pp_shards(km_dev *const *D, const int *dev, const int64_t *r0, int S,
			 const gc_ctx *ctx, uint64_t seed, uint64_t stream, float *C,
			 gc_status *st)
{
	const int64_t n = r0[S];
	const int	d = D[0]->d,
				k = D[0]->k,
				L = gc_km_n_local_trials(k);
	const size_t cw = (size_t) d * KM_PP_LMAX;	/* a candidates' matrix */
	const size_t ow = 2 * KM_PP_LMAX + 1;	/* a shard's outputs */
	pp_shards	PS;
	pp_draws	W[GC_GPUS_MAX];
	uint64_t	Ts[GC_GPUS_MAX] = {};
	double		grid = 0.0;		/* the shards' P.g->S */
	float	   *cand;
	int64_t		first;
	gc_code		rc;

	if (L > KM_PP_LMAX)
		return gc_fail(st, GC_EINTERNAL, "k-means++: %d local trials exceed %d", L, KM_PP_LMAX);
	PS.S = S;
	PS.dev = dev;
	if ((rc = pp_shards_open(PS, D, L, st)) != GC_OK)
		return rc;
	cand = PS.hcand + (size_t) S * cw;
	first = (int64_t) (gc_rng_uniform(seed, stream, 0) * (double) n);
	if (first >= n)
		first = n - 1;

	for (int c = 0; c < k; c++)
	{
		const int	Lc = c == 0 ? 1 : L;
		unsigned long long pot[KM_PP_LMAX] = {},
					tmax;
		int			best = 0;
		double		Sn;
		bool		same;

		/* the trials' rows, as candidate columns on their shards, down */
		pp_shards_draws(r0, S, Ts, seed, stream, c, Lc, first, W);
		for (int s = 0; s < S; s++)
		{
			pp_shard   &P = *PS.P[s];
			bool		mine = false;

			for (int t = 0; t < Lc; t++)
				mine |= W[s].row[t] != PP_ROW_NONE;
			if (!mine)
				continue;
			KM_CK(cudaSetDevice(dev[s]));
			pp_draw_at<<<Lc, PP_THREADS, 0, P.B.s>>>(P.B.P, W[s]);
			KM_LAUNCHED();
			KM_CK(cudaMemcpyAsync(PS.hcand + s * cw, P.B.P.cand, sizeof(float) * cw,
								  cudaMemcpyDeviceToHost, P.B.s));
		}
		if ((rc = pp_shards_sync(PS, st)) != GC_OK)
			return rc;
		memset(cand, 0, sizeof(float) * cw);
		for (int s = 0; s < S; s++)
			for (int t = 0; t < Lc; t++)
				if (W[s].row[t] != PP_ROW_NONE)
					for (int j = 0; j < d; j++)
						cand[(size_t) j * KM_PP_LMAX + t] = PS.hcand[s * cw + (size_t) j * KM_PP_LMAX + t];

		/* every shard: the candidates up, the terms, the trials' potentials down */
		for (int s = 0; s < S; s++)
		{
			pp_shard   &P = *PS.P[s];
			pp_state   &Q = P.B.P;

			KM_CK(cudaSetDevice(dev[s]));
			KM_CK(cudaMemcpyAsync(Q.cand, cand, sizeof(float) * cw, cudaMemcpyHostToDevice, P.B.s));
			KM_CK(cudaMemsetAsync(Q.bs, 0, sizeof(unsigned long long) * (size_t) Lc * Q.nb, P.B.s));
			KM_CK(cudaMemsetAsync(Q.tmax, 0, sizeof(unsigned long long) * Lc, P.B.s));
			pp_terms_launch(Q, Lc, c, P.nsm, P.B.s);
			KM_LAUNCHED();
			pp_pots<<<1, PP_THREADS, 0, P.B.s>>>(Q, Lc, P.dout);
			KM_LAUNCHED();
			KM_CK(cudaMemcpyAsync(PS.hout + s * ow, P.dout, sizeof(unsigned long long) * 2 * Lc,
								  cudaMemcpyDeviceToHost, P.B.s));
		}
		if ((rc = pp_shards_sync(PS, st)) != GC_OK)
			return rc;

		/* the winner (pp_choose's): the lowest potential, ties the earliest */
		for (int t = 0; t < Lc; t++)
			for (int s = 0; s < S; s++)
				pot[t] += PS.hout[s * ow + t];
		for (int t = 1; t < Lc; t++)
			if (pot[t] < pot[best])
				best = t;
		tmax = 0;
		for (int s = 0; s < S; s++)
			tmax = std::max(tmax, PS.hout[s * ow + Lc + best]);
		{
			double		m;

			memcpy(&m, &tmax, sizeof(m));
			Sn = gc_km_pot_scale(m, n);
		}
		same = c > 0 && Sn == grid;
		grid = Sn;
		for (int j = 0; j < d; j++)
			C[(size_t) c * d + j] = cand[(size_t) j * KM_PP_LMAX + best];
		if (c == k - 1)
			break;

		/* the next draws' prefix sums on every shard, their totals down */
		for (int s = 0; s < S; s++)
		{
			pp_shard   &P = *PS.P[s];
			pp_state   &Q = P.B.P;

			KM_CK(cudaSetDevice(dev[s]));
			pp_next<<<1, PP_THREADS, 0, P.B.s>>>(Q, best, Sn, same);
			KM_LAUNCHED();
			if (!same)
			{
				pp_regrid<<<(unsigned) Q.nb, PP_THREADS, 0, P.B.s>>>(Q);
				KM_LAUNCHED();
			}
			KM_CK(cudaMemcpyAsync(PS.hout + s * ow + 2 * KM_PP_LMAX, Q.off + Q.nb,
								  sizeof(unsigned long long), cudaMemcpyDeviceToHost, P.B.s));
		}
		if ((rc = pp_shards_sync(PS, st)) != GC_OK)
			return rc;
		for (int s = 0; s < S; s++)
			Ts[s] = PS.hout[s * ow + 2 * KM_PP_LMAX];
		if ((c & 15) == 15 && gc_cancelled(ctx))
			return gc_fail(st, GC_ECANCEL, "canceled");
	}
	return GC_OK;
}
