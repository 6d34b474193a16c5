/*
 * kmeans_pp.cu — k-means++ seeding on the GPU, unweighted and weighted.
 *
 * It reproduces the CPU's gc_km_init_kmeanspp(_w) (kmeans_init.c) bit for
 * bit: the same counter-based draws (rng.h), the same float32 distances
 * summed in dimension order with separate multiply and add, and the same
 * step grid, on which every sum is an exact integer sum (kmeans_internal.h),
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
 *              row by a block scan of its KM_BLOCK terms; the trial's row
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
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <type_traits>

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "kmeans_dev.cuh"
#include "rng.h"

#define PP_THREADS 256
#define PP_ITEMS (KM_BLOCK / PP_THREADS)	/* rows a thread of a block scan */
#define PP_TERMS_DC 8			/* pp_terms: dimensions loaded at once */
#define PP_CS_DIMS 64			/* pp_terms: candidates' dimensions in shared memory */
#define PP_RPT_MAX_D 32			/* pp_terms: rows a thread above 1 up to this d */
#define PP_SELECT_REGRID_NB 16	/* up to this many blocks pp_select regrids */

typedef cub::BlockScan<uint64_t, PP_THREADS> pp_scan_t;
typedef cub::BlockReduce<uint64_t, PP_THREADS> pp_reduce_t;

namespace
{
/* The grid of the step (kmeans_internal.h), on the device. */
struct pp_grid
{
	double		S;				/* the draws' and the potentials' */
	int			regrid;			/* pp_regrid recomputes the draws' sums */
	unsigned	done;			/* pp_regrid's blocks done */
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
	float	   *terms;			/* L x n */
	unsigned long long *bs;		/* L x nb block sums of q (pp_terms) */
	unsigned long long *tmax;	/* L: the largest term's bits */
	uint64_t   *bq;				/* nb block sums (pp_regrid) */
	uint64_t   *off;			/* nb + 1: the draws' prefix sums */
	pp_grid    *g;
	int64_t    *cid;			/* LMAX trial rows */
	float	   *cand;			/* d x LMAX */
	int		   *best;			/* the last winner */
};
}

/* off[0] = 0, off[b+1] = off[b] + in[b] (b < nb): the whole block. */
__device__ void
pp_prefix(const uint64_t *in, int64_t nb, uint64_t *off, pp_scan_t::TempStorage &ts)
{
	__shared__ uint64_t carry;

	if (threadIdx.x == 0)
	{
		off[0] = 0;
		carry = 0;
	}
	__syncthreads();
	for (int64_t b0 = 0; b0 < nb; b0 += PP_THREADS)
	{
		const int64_t b = b0 + threadIdx.x;
		uint64_t	v = b < nb ? __ldcg(in + b) : 0,
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
}

/* The sum of q over block b of the terms of trial best, on the grid S. */
__device__ __forceinline__ uint64_t
pp_block_q(const pp_state &P, int64_t b, int best, double S, pp_reduce_t::TempStorage &ts)
{
	const float *closest = P.terms + (int64_t) best * P.n;
	uint64_t	s = 0;

	for (int u = 0; u < PP_ITEMS; u++)
	{
		const int64_t i = b * KM_BLOCK + (int64_t) u * PP_THREADS + threadIdx.x;

		if (i < P.n)
			s += gc_km_pot_q(gc_km_pot_term(P.w, i, closest[i]), S);
	}
	return pp_reduce_t(ts).Sum(s);	/* thread 0's */
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
	s = pp_block_q(P, blockIdx.x, *P.best, P.g->S, ts.r);
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
	pp_prefix(P.bq, P.nb, P.off, ts.s);
	if (threadIdx.x == 0)
	{
		P.g->done = 0;
		P.g->regrid = 0;
	}
}

/*
 * Trial t of centre c (c >= 1) draws counter 1+(c-1)L+t; for c == 0 the
 * single candidate is row `first`.  Block t also clears its trial's sums
 * for pp_terms.
 */
__global__ void __launch_bounds__(PP_THREADS)
pp_draw(pp_state P, uint64_t seed, uint64_t stream, int c, int L, int64_t first)
{
	__shared__ pp_scan_t::TempStorage ts;
	__shared__ int	hit;
	const int	t = blockIdx.x;
	int64_t		row = first;

	for (int64_t b = threadIdx.x; b < P.nb; b += PP_THREADS)
		P.bs[(int64_t) t * P.nb + b] = 0;
	if (threadIdx.x == 0)
		P.tmax[t] = 0;
	if (c > 0)
	{
		const uint64_t T = P.off[P.nb];

		row = P.w == nullptr ? P.n - 1 : P.wlast;
		if (T > 0)
		{
			const uint64_t R = gc_km_pot_draw(seed, stream, 1 + (uint64_t) (c - 1) * L + t, T);
			const int64_t b = gc_km_pp_block(P.off, P.nb, R),
						i0 = b * KM_BLOCK + (int64_t) threadIdx.x * PP_ITEMS;
			const float *closest = P.terms + (int64_t) *P.best * P.n;
			const double S = P.g->S;
			uint64_t	q[PP_ITEMS],
						s = 0,
						acc;

			for (int u = 0; u < PP_ITEMS; u++)
			{
				q[u] = i0 + u < P.n ? gc_km_pot_q(gc_km_pot_term(P.w, i0 + u, closest[i0 + u]), S) : 0;
				s += q[u];
			}
			if (threadIdx.x == 0)
				hit = KM_BLOCK;
			pp_scan_t(ts).ExclusiveSum(s, acc);
			acc += P.off[b];
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
		}
	}
	if (threadIdx.x == 0)
		P.cid[t] = row;
	for (int j = threadIdx.x; j < P.d; j += PP_THREADS)
		P.cand[j * KM_PP_LMAX + t] = P.XT[(int64_t) j * P.n + row];
	/* every column written: pp_terms computes whole groups of 4 trials */
	if (t == 0)
		for (int e = threadIdx.x; e < P.d * (KM_PP_LMAX - L); e += PP_THREADS)
			P.cand[(e / (KM_PP_LMAX - L)) * KM_PP_LMAX + L + e % (KM_PP_LMAX - L)] = 0.0f;
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
#pragma unroll
		for (int u = 0; u < PP_TERMS_DC; u++)
			if (j0 + u < dc)
			{
#pragma unroll
				for (int v = 0; v < LT / 4; v++)
				{
					const float4 cc = cs[j0 + u][v];

					q[4 * v] = gc_l2_step(q[4 * v], x[u], cc.x);
					q[4 * v + 1] = gc_l2_step(q[4 * v + 1], x[u], cc.y);
					q[4 * v + 2] = gc_l2_step(q[4 * v + 2], x[u], cc.z);
					q[4 * v + 3] = gc_l2_step(q[4 * v + 3], x[u], cc.w);
				}
			}
	}
}

/*
 * terms[t][i] = min(closest[i], gc_dist2(x_i, cand_t)) for t < L, where
 * closest is terms[best] (c > 0) or +inf (c == 0): the thread of row i
 * reads its closest before it writes its row's terms.  LT (a multiple of
 * 4, >= L) trials are computed, a dimension's candidates read as float4:
 * no test of L in the inner loop, and the loop's instructions stay under
 * the pass's memory time.  Then each trial's q on the step's grid, summed
 * per block of KM_BLOCK rows (a CUDA block's rpt x blockDim rows lie in
 * one), and its largest term.
 */
template <int LT, bool W, bool RPT>
__global__ void __launch_bounds__(PP_THREADS)
pp_terms(pp_state P, int L, int c, int rpt_)
{
	const int	rpt = RPT ? rpt_ : 1;	/* 1: no registers held across rows */
	/* the largest term's bits: a float's unweighted (ordered as the double) */
	typedef typename std::conditional<W, unsigned long long, unsigned>::type max_t;
	__shared__ float4 cs[PP_CS_DIMS][LT / 4];	/* a chunk of the candidates */
	__shared__ unsigned long long red[2][LT];
	const int64_t r0 = (int64_t) blockIdx.x * blockDim.x * rpt;
	const double S = P.g->S;
	unsigned long long s[LT];
	max_t		mx[LT];

#pragma unroll
	for (int t = 0; t < LT; t++)
		s[t] = mx[t] = 0;
	if (threadIdx.x < 2 * LT)
		red[threadIdx.x / LT][threadIdx.x % LT] = 0;
	for (int r = 0; r < rpt; r++)
	{
		const int64_t i = r0 + (int64_t) r * blockDim.x + threadIdx.x;
		const bool	row = i < P.n;
		const float cl = c == 0 || !row ? INFINITY : P.terms[(int64_t) *P.best * P.n + i];
		float		q[LT];

#pragma unroll
		for (int t = 0; t < LT; t++)
			q[t] = 0.0f;
		for (int jc = 0; jc < P.d; jc += PP_CS_DIMS)
		{
			const int	dc = P.d - jc < PP_CS_DIMS ? P.d - jc : PP_CS_DIMS;

			if (r > 0 && P.d <= PP_CS_DIMS)
				break;			/* jc = 0, the one chunk, is in place */
			__syncthreads();
			for (int e = threadIdx.x; e < dc * (LT / 4); e += blockDim.x)
				cs[e / (LT / 4)][e % (LT / 4)] =
					((const float4 *) (P.cand + (int64_t) (jc + e / (LT / 4)) * KM_PP_LMAX))[e % (LT / 4)];
			__syncthreads();
			if (!row)
				continue;
			pp_terms_chunk<LT>(P, i, jc, dc, cs, q);
		}
		if (r > 0 && P.d <= PP_CS_DIMS && row)
			pp_terms_chunk<LT>(P, i, 0, P.d, cs, q);
#pragma unroll
		for (int t = 0; t < LT; t++)
			if (t < L && row)
			{
				const float m = q[t] < cl ? q[t] : cl;
				const double tm = gc_km_pot_term(W ? P.w : nullptr, i, m);
				const max_t b = W ? (max_t) __double_as_longlong(tm) : (max_t) __float_as_uint(m);	/* >= 0: ordered */

				P.terms[(int64_t) t * P.n + i] = m;
				s[t] += gc_km_pot_q(tm, S);
				mx[t] = b > mx[t] ? b : mx[t];
			}
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

template <bool W, bool RPT>
static void
pp_terms_lt(const pp_state &P, int L, int c, int rpt, unsigned grid, int bt, cudaStream_t s)
{
	if (L <= 4)
		pp_terms<4, W, RPT><<<grid, bt, 0, s>>>(P, L, c, rpt);
	else if (L <= 8)
		pp_terms<8, W, RPT><<<grid, bt, 0, s>>>(P, L, c, rpt);
	else if (L <= 12)
		pp_terms<12, W, RPT><<<grid, bt, 0, s>>>(P, L, c, rpt);
	else if (L <= 16)
		pp_terms<16, W, RPT><<<grid, bt, 0, s>>>(P, L, c, rpt);
	else
		pp_terms<KM_PP_LMAX, W, RPT><<<grid, bt, 0, s>>>(P, L, c, rpt);
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
	if (P.w != nullptr)
		rpt > 1 ? pp_terms_lt<true, true>(P, L, c, rpt, grid, bt, s)
			: pp_terms_lt<true, false>(P, L, c, rpt, grid, bt, s);
	else
		rpt > 1 ? pp_terms_lt<false, true>(P, L, c, rpt, grid, bt, s)
			: pp_terms_lt<false, false>(P, L, c, rpt, grid, bt, s);
}

/*
 * The potentials, the winner (centre c and its row), the next grid, and,
 * on the same grid, the next draws' prefix sums; on a new grid, with
 * regrid_here (a few blocks of rows), the block sums too, in place of
 * pp_regrid's launch.
 */
__global__ void __launch_bounds__(PP_THREADS)
pp_select(pp_state P, int L, float *C, int c, int64_t *chosen, bool regrid_here)
{
	__shared__ union
	{
		pp_reduce_t::TempStorage r;
		pp_scan_t::TempStorage s;
	}			ts;
	__shared__ uint64_t pot[KM_PP_LMAX];
	__shared__ int best_s;
	__shared__ bool same;
	const int	warp = threadIdx.x / 32,
				lane = threadIdx.x % 32;

	for (int t = warp; t < L; t += PP_THREADS / 32)
	{
		uint64_t	s = 0;

		for (int64_t b = lane; b < P.nb; b += 32)
			s += P.bs[(int64_t) t * P.nb + b];
		for (int o = 16; o > 0; o /= 2)
			s += __shfl_xor_sync(0xffffffffu, s, o);
		if (lane == 0)
			pot[t] = s;
	}
	__syncthreads();
	if (threadIdx.x == 0)
	{
		int			best = 0;
		double		S;

		for (int u = 1; u < L; u++)
			if (pot[u] < pot[best])
				best = u;
		best_s = best;
		*P.best = best;
		if (chosen)
			chosen[c] = P.cid[best];
		S = gc_km_pot_scale(__longlong_as_double((long long) P.tmax[best]), P.n);
		same = c > 0 && S == P.g->S;
		P.g->S = S;
		P.g->regrid = !same && !regrid_here;
	}
	__syncthreads();
	for (int j = threadIdx.x; j < P.d; j += PP_THREADS)
		C[(int64_t) c * P.d + j] = P.cand[j * KM_PP_LMAX + best_s];
	if (same)
		pp_prefix((const uint64_t *) P.bs + (int64_t) best_s * P.nb, P.nb, P.off, ts.s);
	else if (regrid_here)
	{
		for (int64_t b = 0; b < P.nb; b++)
		{
			const uint64_t q = pp_block_q(P, b, best_s, P.g->S, ts.r);

			if (threadIdx.x == 0)
				P.bq[b] = q;
			__syncthreads();
		}
		pp_prefix(P.bq, P.nb, P.off, ts.s);
	}
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
	}
};
}

static gc_code
pp_run(const gc_ctx *ctx, cudaStream_t s, const float *XT, int64_t n, int d,
	   int k, const double *w, const double *w_host, uint64_t seed,
	   uint64_t stream, float *C, int64_t *chosen, gc_status *st)
{
	const int	L = gc_km_n_local_trials(k);
	const int64_t nb = (n + KM_BLOCK - 1) / KM_BLOCK;
	const bool	regrid_here = nb <= PP_SELECT_REGRID_NB;
	int			dev = 0,
				nsm = 1;
	pp_buffers	B;
	pp_state   &P = B.P;
	int64_t		first;

	if (L > KM_PP_LMAX)
		return gc_fail(st, GC_EINTERNAL, "k-means++: %d local trials exceed %d", L, KM_PP_LMAX);
	B.s = s;
	P.XT = XT;
	P.n = n;
	P.d = d;
	P.nb = nb;
	P.w = w;
	P.wlast = n - 1;
	KM_CK(gc_dalloc((void **) &P.terms, sizeof(float) * (size_t) n * L, s));
	KM_CK(gc_dalloc((void **) &P.bs, sizeof(unsigned long long) * (size_t) nb * L, s));
	KM_CK(gc_dalloc((void **) &P.tmax, sizeof(unsigned long long) * KM_PP_LMAX, s));
	KM_CK(gc_dalloc((void **) &P.bq, sizeof(uint64_t) * (size_t) nb, s));
	KM_CK(gc_dalloc((void **) &P.off, sizeof(uint64_t) * (size_t) (nb + 1), s));
	KM_CK(gc_dalloc((void **) &P.g, sizeof(pp_grid), s));
	KM_CK(cudaMemsetAsync(P.g, 0, sizeof(pp_grid), s));
	KM_CK(gc_dalloc((void **) &P.cid, sizeof(int64_t) * KM_PP_LMAX, s));
	KM_CK(gc_dalloc((void **) &P.cand, sizeof(float) * (size_t) d * KM_PP_LMAX, s));
	KM_CK(gc_dalloc((void **) &P.best, sizeof(int), s));
	KM_CK(cudaMemsetAsync(P.best, 0, sizeof(int), s));

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

	KM_CK(cudaGetDevice(&dev));
	KM_CK(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev));

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
		pp_terms_launch(P, Lc, c, nsm, s);
		KM_LAUNCHED();
		pp_select<<<1, PP_THREADS, 0, s>>>(P, Lc, C, c, chosen, regrid_here);
		KM_LAUNCHED();
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
km_pp_device(const gc_ctx *ctx, cudaStream_t s, const float *XT, int64_t n,
			 int d, int k, uint64_t seed, uint64_t stream, float *C,
			 int64_t *chosen, gc_status *st)
{
	return pp_run(ctx, s, XT, n, d, k, nullptr, nullptr, seed, stream, C,
				  chosen, st);
}

gc_code
km_pp_device_w(const gc_ctx *ctx, cudaStream_t s, const float *XT, int64_t n,
			   int d, int k, const double *w, const double *w_host,
			   uint64_t seed, uint64_t stream, float *C, int64_t *chosen,
			   gc_status *st)
{
	return pp_run(ctx, s, XT, n, d, k, w, w_host, seed, stream, C, chosen, st);
}
