/*
 * kmeans_pp.cu — k-means++ seeding on the GPU, unweighted and weighted.
 *
 * It reproduces the CPU's gc_km_init_kmeanspp(_w) (kmeans_init.c) bit for
 * bit: the same counter-based draws (rng.h), the same float32 distances
 * summed in dimension order with separate multiply and add, and every
 * double sum over the same fixed blocks of GC_KM_BLOCK rows in the same
 * order.  A double sum in a fixed order is one dependent chain; the work
 * here is to run nothing but those chains serially, from on-chip memory,
 * and everything else in parallel.  Per centre, four kernels:
 *
 *   pp_draw    the L trials: r = u * pot; the block by binary search of
 *              the offsets, then the running sum's checkpoint (every 32
 *              rows, kept by pp_bsums) by binary search, then at most 32
 *              steps of the chain from that checkpoint; the trials' rows
 *              gathered as the candidates (d x LMAX).
 *   pp_terms   terms[t][i] = min(closest[i], gc_dist2(x_i, cand_t)), one
 *              thread per row (one pass over X for all L trials), in place:
 *              closest is the row terms[best] of the previous centre (the
 *              winner's terms are the new D²), read by the thread that
 *              then overwrites its own row's terms.
 *   pp_bsums   one thread per (fixed block, trial) adds the block's
 *              terms in row order (km_block_chains: 32 chains a warp, from
 *              shared memory, the next rows copied in ahead), and keeps the
 *              checkpoints; the chains of the centre run at once.
 *   pp_select  one warp per trial: the prefix of its block sums (which is
 *              the potential, and the next centre's offsets if it wins),
 *              then the lowest potential wins (ties: the earliest trial);
 *              the winner's index stays on the device for the next centre.
 *
 * The host only enqueues; it synchronises every 16 centres to poll the
 * cancel flags.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "kmeans_dev.cuh"
#include "rng.h"

#define PP_THREADS 256
#define PP_TERMS_DC 8			/* pp_terms: dimensions loaded at once */
#define PP_CS_DIMS 64			/* pp_terms: candidates' dimensions in shared memory */

namespace
{
/* The device state of one seeding, shared by its kernels. */
struct pp_state
{
	const float *XT;
	int64_t		n;
	int			d;
	int64_t		nb;
	const double *w;			/* NULL: unweighted */
	int64_t		wlast;			/* the last row of positive weight */
	int64_t		ld;				/* terms' row stride: n rounded up to 4 */
	float	   *terms;			/* L x ld (the padding 0) */
	double	   *bs;				/* L x nb block sums */
	double	   *ck;				/* L x nb x KM_CK_PER_BLOCK checkpoints */
	double	   *offc;			/* L x (nb + 1) prefix sums */
	int64_t    *cid;			/* LMAX trial rows */
	float	   *cand;			/* d x LMAX */
	int		   *best;			/* the last winner */
};
}

/* The term of row i: w_i * (double) D²_i, or (double) D²_i. */
__device__ __forceinline__ double
pp_term(const pp_state &P, const float *closest, int64_t i)
{
	return P.w != nullptr ? P.w[i] * (double) closest[i] : (double) closest[i];
}

/*
 * The trial of r: gc_km_pp_search (unweighted) or pp_search_w (weighted)
 * of kmeans_init.c, over the winner's offsets, checkpoints and terms.
 */
__device__ int64_t
pp_search(const pp_state &P, int best, double r)
{
	const double *off = P.offc + (int64_t) best * (P.nb + 1);
	const float *closest = P.terms + (int64_t) best * P.ld;

	if (off[P.nb] > r)
	{
		const int64_t lo = gc_km_pp_block(off, P.nb, r),
					i0 = lo * KM_BLOCK,
					i1 = i0 + KM_BLOCK < P.n ? i0 + KM_BLOCK : P.n;
		const double *ck = P.ck + ((int64_t) best * P.nb + lo) * KM_CK_PER_BLOCK;
		const int	nck = (int) ((i1 - i0 + KM_CK_ROWS - 1) / KM_CK_ROWS);
		int			a = 0,
					b = nck - 1;	/* first checkpoint s with off + ck[s] > r */

		while (a < b)
		{
			int			mid = (a + b) / 2;

			if (off[lo] + ck[mid] > r)
				b = mid;
			else
				a = mid + 1;
		}
		{
			double		local = a > 0 ? ck[a - 1] : 0.0;
			int64_t		j0 = i0 + (int64_t) a * KM_CK_ROWS,
						j1 = j0 + KM_CK_ROWS < i1 ? j0 + KM_CK_ROWS : i1;

			for (int64_t i = j0; i < j1; i++)
			{
				local += pp_term(P, closest, i);
				if ((P.w == nullptr || P.w[i] > 0.0) && off[lo] + local > r)
					return i;
			}
		}
		if (P.w == nullptr)
			return i1 - 1;		/* unreachable: prefix(i1-1) == off[lo+1] */
	}
	return P.w == nullptr ? P.n - 1 : P.wlast;
}

/*
 * Candidates of centre c (c >= 1): lane t < L draws counter 1+(c-1)L+t.
 * For c == 0 the single candidate is row `first`.
 */
__global__ void __launch_bounds__(PP_THREADS)
pp_draw(pp_state P, uint64_t seed, uint64_t stream, int c, int L, int64_t first)
{
	__shared__ int64_t rows[KM_PP_LMAX];

	if (threadIdx.x < L)
	{
		const int	t = threadIdx.x;
		int64_t		row = first;

		if (c > 0)
		{
			const int	best = *P.best;
			uint64_t	ctr = 1 + (uint64_t) (c - 1) * L + t;
			double		r = gc_rng_uniform(seed, stream, ctr) *
				P.offc[(int64_t) best * (P.nb + 1) + P.nb];

			row = pp_search(P, best, r);
		}
		rows[t] = row;
		P.cid[t] = row;
	}
	__syncthreads();
	/* every column written: pp_terms computes whole groups of 4 trials */
	for (int e = threadIdx.x; e < P.d * KM_PP_LMAX; e += blockDim.x)
	{
		const int	j = e / KM_PP_LMAX,
					t = e % KM_PP_LMAX;

		P.cand[e] = t < L ? P.XT[(int64_t) j * P.n + rows[t]] : 0.0f;
	}
}

/*
 * terms[t][i] = min(closest[i], gc_dist2(x_i, cand_t)) for t < L, where
 * closest is terms[best] (c > 0) or +inf (c == 0): the thread of row i
 * reads its closest before it writes its row's terms.  LT (a multiple of
 * 4, >= L) trials are computed, a dimension's candidates read as float4:
 * no test of L in the inner loop, and the loop's instructions stay under
 * the pass's memory time.
 */
template <int LT>
__global__ void __launch_bounds__(PP_THREADS)
pp_terms(pp_state P, int L, int c)
{
	__shared__ float4 cs[PP_CS_DIMS][LT / 4];	/* a chunk of the candidates */
	const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
	const bool	row = i < P.n;
	const float cl = c == 0 || !row ? INFINITY : P.terms[(int64_t) *P.best * P.ld + i];
	float		q[LT];

#pragma unroll
	for (int t = 0; t < LT; t++)
		q[t] = 0.0f;
	for (int jc = 0; jc < P.d; jc += PP_CS_DIMS)
	{
		const int	dc = P.d - jc < PP_CS_DIMS ? P.d - jc : PP_CS_DIMS;

		__syncthreads();
		for (int e = threadIdx.x; e < dc * (LT / 4); e += blockDim.x)
			cs[e / (LT / 4)][e % (LT / 4)] =
				((const float4 *) (P.cand + (int64_t) (jc + e / (LT / 4)) * KM_PP_LMAX))[e % (LT / 4)];
		__syncthreads();
		if (!row)
			continue;
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
	if (row)
	{
#pragma unroll
		for (int t = 0; t < LT; t++)
			if (t < L)
				P.terms[(int64_t) t * P.ld + i] = q[t] < cl ? q[t] : cl;
	}
}

/* pp_terms for the smallest LT that covers L trials; blocks of 64 rows
 * when 256 would leave SMs idle (k-means||'s candidates). */
static void
pp_terms_launch(const pp_state &P, int L, int c, int nsm, cudaStream_t s)
{
	const int	bt = P.n < (int64_t) nsm * PP_THREADS * 2 ? 64 : PP_THREADS;
	const unsigned grid = blocks_for(P.n, bt);

	if (L <= 4)
		pp_terms<4><<<grid, bt, 0, s>>>(P, L, c);
	else if (L <= 8)
		pp_terms<8><<<grid, bt, 0, s>>>(P, L, c);
	else if (L <= 12)
		pp_terms<12><<<grid, bt, 0, s>>>(P, L, c);
	else if (L <= 16)
		pp_terms<16><<<grid, bt, 0, s>>>(P, L, c);
	else
		pp_terms<KM_PP_LMAX><<<grid, bt, 0, s>>>(P, L, c);
}

/*
 * bs[t][b] and its checkpoints: one CUDA block (a warp) per 32 fixed
 * blocks of one trial, a lane per chain (km_block_chains).
 */
template <bool W>
__global__ void __launch_bounds__(32)
pp_bsums(pp_state P, int L)
{
	extern __shared__ __align__(16) unsigned char pp_chain_buf[];
	const int64_t wpt = (P.nb + 31) / 32;	/* warps per trial */
	const int	t = (int) (blockIdx.x / wpt);
	const int64_t b0 = (blockIdx.x % wpt) * 32,
				e = (int64_t) t * P.nb + b0;	/* the first chain */
	const double sum = km_block_chains<W>(P.terms + (int64_t) t * P.ld, P.w, P.n, P.nb, b0,
										  P.ck + e * KM_CK_PER_BLOCK, pp_chain_buf);

	if (b0 + threadIdx.x < P.nb)
		P.bs[e + threadIdx.x] = sum;
}

/*
 * Warp t: offc[t][0] = 0, offc[t][b+1] = offc[t][b] + bs[t][b] (the
 * potential is offc[t][nb]); then the winner, centre c and its row.
 */
__global__ void
pp_select(pp_state P, int L, float *C, int c, int64_t *chosen)
{
	__shared__ double stage[KM_PP_LMAX][2][32];
	__shared__ int best_s;
	const int	t = threadIdx.x / 32,
				lane = threadIdx.x % 32;

	if (t < L)
	{
		const double *bs = P.bs + (int64_t) t * P.nb;
		double	   *off = P.offc + (int64_t) t * (P.nb + 1);
		double		acc = 0.0;

		if (lane == 0)
			off[0] = 0.0;
		/* 32 block sums at a time, the next 32 copied in while lane 0 adds */
		if (lane < P.nb)
			__pipeline_memcpy_async(&stage[t][0][lane], bs + lane, sizeof(double));
		__pipeline_commit();
		for (int64_t b0 = 0, h = 0; b0 < P.nb; b0 += 32, h ^= 1)
		{
			const int	m = P.nb - b0 < 32 ? (int) (P.nb - b0) : 32;

			if (b0 + 32 + lane < P.nb)
				__pipeline_memcpy_async(&stage[t][1 - h][lane], bs + b0 + 32 + lane, sizeof(double));
			__pipeline_commit();
			__pipeline_wait_prior(1);
			__syncwarp();
			if (lane == 0)
				for (int u = 0; u < m; u++)
				{
					acc += stage[t][h][u];
					off[b0 + u + 1] = acc;
				}
			__syncwarp();
		}
	}
	__syncthreads();
	if (threadIdx.x == 0)
	{
		int			best = 0;
		double		bp = P.offc[P.nb];

		for (int u = 1; u < L; u++)
		{
			double		p = P.offc[(int64_t) u * (P.nb + 1) + P.nb];

			if (p < bp)
			{
				best = u;
				bp = p;
			}
		}
		best_s = best;
		*P.best = best;
		if (chosen)
			chosen[c] = P.cid[best];
	}
	__syncthreads();
	for (int j = threadIdx.x; j < P.d; j += blockDim.x)
		C[(int64_t) c * P.d + j] = P.cand[j * KM_PP_LMAX + best_s];
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
		gc_dfree(P.ck, s);
		gc_dfree(P.offc, s);
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
	const size_t chain_smem = KM_CHAIN_SMEM(w != nullptr);
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
	P.ld = (n + 3) / 4 * 4;
	KM_CK(gc_dalloc((void **) &P.terms, sizeof(float) * (size_t) P.ld * L, s));
	if (P.ld > n)				/* each trial's padding (km_block_chains copies it) */
		KM_CK(cudaMemset2DAsync(P.terms + n, sizeof(float) * P.ld, 0,
								sizeof(float) * (P.ld - n), L, s));
	KM_CK(gc_dalloc((void **) &P.bs, sizeof(double) * (size_t) nb * L, s));
	KM_CK(gc_dalloc((void **) &P.ck, sizeof(double) * (size_t) nb * L * KM_CK_PER_BLOCK, s));
	KM_CK(gc_dalloc((void **) &P.offc, sizeof(double) * (size_t) (nb + 1) * L, s));
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
	if (chain_smem > 48 * 1024)
		KM_CK(cudaFuncSetAttribute(pp_bsums<true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
								   (int) chain_smem));

	/* Centre 0: one "candidate", row first, against closest = +inf. */
	for (int c = 0; c < k; c++)
	{
		const int	Lc = c == 0 ? 1 : L;

		pp_draw<<<1, PP_THREADS, 0, s>>>(P, seed, stream, c, Lc, first);
		KM_LAUNCHED();
		pp_terms_launch(P, Lc, c, nsm, s);
		KM_LAUNCHED();
		(w != nullptr ? pp_bsums<true> : pp_bsums<false>)
			<<<(unsigned) (Lc * ((nb + 31) / 32)), 32, chain_smem, s>>>(P, Lc);
		KM_LAUNCHED();
		pp_select<<<1, 32 * KM_PP_LMAX, 0, s>>>(P, Lc, C, c, chosen);
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
