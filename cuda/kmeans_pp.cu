/*
 * kmeans_pp.cu — k-means++ seeding on the GPU.
 *
 * It reproduces the CPU's gc_km_init_kmeanspp (kmeans_init.c) bit for bit:
 * the same counter-based draws (rng.h), the same float32 distances summed
 * in dimension order with separate multiply and add, and every double sum
 * over the same fixed blocks of GC_KM_BLOCK rows in the same order.  The
 * sequential parts (a double sum inside one block, the running offsets
 * over blocks) run on one thread each; everything else is parallel.  The
 * seeding loop runs entirely on the device: the host only enqueues, and
 * synchronises every few centres to poll the cancel flags.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "kmeans_dev.cuh"
#include "rng.h"

#define PP_THREADS 256

/* gc_dist2 of row i (of XT) and centre c: float, dimension order, no FMA. */
__device__ __forceinline__ float
pp_dist2(const float *__restrict__ XT, int64_t n, int64_t i, int d,
		 const float *__restrict__ c, int cstride)
{
	float		s = 0.0f;

	for (int j = 0; j < d; j++)
		s = gc_l2_step(s, XT[(int64_t) j * n + i], c[(int64_t) j * cstride]);
	return s;
}

/*
 * Candidates of centre c (c >= 1): lane t < L draws counter 1+(c-1)L+t.
 * For c == 0 the single candidate is row `first`.  cand is d x LMAX.
 */
__global__ void
pp_draw(const float *XT, int64_t n, int d, const double *off, int64_t nb,
		const float *closest, uint64_t seed, uint64_t stream, int c, int L,
		int64_t first, int64_t *cid, float *cand)
{
	int			t = threadIdx.x;

	if (t < L)
	{
		int64_t		row;

		if (c == 0)
			row = first;
		else
		{
			uint64_t	ctr = 1 + (uint64_t) (c - 1) * L + t;
			double		r = gc_rng_uniform(seed, stream, ctr) * off[nb];

			row = gc_km_pp_search(off, nb, closest, n, r);
		}
		cid[t] = row;
		for (int j = 0; j < d; j++)
			cand[j * KM_PP_LMAX + t] = XT[(int64_t) j * n + row];
	}
}

/*
 * q[t] = gc_dist2(x_i, cand_t) for the L candidates (cand: d x LMAX), the
 * CPU's float sums.
 */
__device__ __forceinline__ void
pp_row_dist2(const float *__restrict__ XT, int64_t n, int d, int64_t i,
			 const float *__restrict__ cand, int L, float *q)
{
#pragma unroll
	for (int t = 0; t < KM_PP_LMAX; t++)
		q[t] = 0.0f;
	for (int j = 0; j < d; j++)
	{
		const float x = XT[(int64_t) j * n + i];

#pragma unroll
		for (int t = 0; t < KM_PP_LMAX; t++)
			if (t < L)
				q[t] = gc_l2_step(q[t], x, cand[j * KM_PP_LMAX + t]);
	}
}

/*
 * bs[b*LMAX + t] = sequential double sum, over the rows of block b, of
 * min(closest[i], dist2(X_i, candidate t)).  One CUDA block per block of
 * GC_KM_BLOCK rows: the float terms are computed in parallel, chunk by
 * chunk, into shared memory, and lane t adds them up in row order.
 */
__global__ void __launch_bounds__(PP_THREADS)
pp_pots(const float *__restrict__ XT, int64_t n, int d,
		const float *__restrict__ cand, int L,
		const float *__restrict__ closest, double *bs)
{
	__shared__ float term[KM_PP_LMAX][PP_THREADS];
	const int64_t i0 = (int64_t) blockIdx.x * KM_BLOCK;
	const int64_t i1 = i0 + KM_BLOCK < n ? i0 + KM_BLOCK : n;
	double		acc = 0.0;

	for (int64_t ch = i0; ch < i1; ch += PP_THREADS)
	{
		int64_t		i = ch + threadIdx.x;

		if (i < i1)
		{
			float		q[KM_PP_LMAX];
			const float cl = closest[i];

			pp_row_dist2(XT, n, d, i, cand, L, q);
#pragma unroll
			for (int t = 0; t < KM_PP_LMAX; t++)
				if (t < L)
					term[t][threadIdx.x] = q[t] < cl ? q[t] : cl;
		}
		__syncthreads();
		if (threadIdx.x < L)
		{
			int			m = (int) (i1 - ch < PP_THREADS ? i1 - ch : PP_THREADS);

			for (int r = 0; r < m; r++)
				acc += (double) term[threadIdx.x][r];
		}
		__syncthreads();
	}
	if (threadIdx.x < L)
		bs[(int64_t) blockIdx.x * KM_PP_LMAX + threadIdx.x] = acc;
}

/*
 * The same potentials in two fully parallel steps (pp_pots runs only
 * n / GC_KM_BLOCK blocks, too few to fill the GPU, and serialises each
 * chunk's sum): pp_terms writes every row's term for every candidate,
 * terms[t*n + i] = min(closest[i], gc_dist2(x_i, cand_t)) computed exactly
 * as pp_pots does; pp_bsums has one thread per (block, candidate) add the
 * block's terms in row order, in double, as pp_pots's lane t does.  Same
 * bits, about n*L*4 bytes of scratch.
 */
__global__ void __launch_bounds__(256)
pp_terms(const float *__restrict__ XT, int64_t n, int d,
		 const float *__restrict__ cand, int L,
		 const float *__restrict__ closest, float *__restrict__ terms)
{
	const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
	{
		float		q[KM_PP_LMAX];
		const float cl = closest[i];

		pp_row_dist2(XT, n, d, i, cand, L, q);
#pragma unroll
		for (int t = 0; t < KM_PP_LMAX; t++)
			if (t < L)
				terms[(int64_t) t * n + i] = q[t] < cl ? q[t] : cl;
	}
}

__global__ void
pp_bsums(const float *__restrict__ terms, int64_t n, int64_t nb, int L,
		 double *bs)
{
	const int64_t e = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (e < nb * L)
	{
		const int	t = (int) (e / nb);
		const int64_t b = e % nb;
		const int64_t i0 = b * KM_BLOCK,
					i1 = i0 + KM_BLOCK < n ? i0 + KM_BLOCK : n;
		const float *p = terms + (int64_t) t * n;
		double		acc = 0.0;

		for (int64_t i = i0; i < i1; i++)
			acc += (double) p[i];
		bs[b * KM_PP_LMAX + t] = acc;
	}
}

/*
 * Potential of each candidate (blocks summed in order), the best one
 * (lowest; ties: earliest trial), the new offsets, and centre c.
 */
__global__ void
pp_select(const double *bs, int64_t nb, int L, double *off, const int64_t *cid,
		  const float *cand, int d, float *C, int c, int64_t *chosen,
		  int *best_out)
{
	__shared__ double pot[KM_PP_LMAX];
	__shared__ int best_s;
	int			t = threadIdx.x;

	if (t < L)
	{
		double		p = 0.0;

		for (int64_t b = 0; b < nb; b++)
			p += bs[b * KM_PP_LMAX + t];
		pot[t] = p;
	}
	__syncthreads();
	if (t == 0)
	{
		int			best = 0;
		double		bp = pot[0];

		for (int u = 1; u < L; u++)
			if (pot[u] < bp)
			{
				best = u;
				bp = pot[u];
			}
		best_s = best;
		*best_out = best;
		if (chosen)
			chosen[c] = cid[best];
		off[0] = 0.0;
		for (int64_t b = 0; b < nb; b++)
			off[b + 1] = off[b] + bs[b * KM_PP_LMAX + best];
	}
	__syncthreads();
	for (int j = t; j < d; j += blockDim.x)
		C[(int64_t) c * d + j] = cand[j * KM_PP_LMAX + best_s];
}

/* closest[i] = min(closest[i], gc_dist2(X_i, C_c)). */
__global__ void
pp_closest(const float *__restrict__ XT, int64_t n, int d,
		   const float *__restrict__ Cc, float *closest)
{
	int64_t		i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
	{
		float		q = pp_dist2(XT, n, i, d, Cc, 1);

		if (q < closest[i])
			closest[i] = q;
	}
}

__global__ void
fill_float(float *p, int64_t n, float v)
{
	int64_t		i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		p[i] = v;
}

namespace
{
struct pp_buffers
{
	float	   *closest = nullptr;
	double	   *off = nullptr;
	double	   *bs = nullptr;
	int64_t    *cid = nullptr;
	float	   *cand = nullptr;
	int		   *best = nullptr;
	float	   *terms = nullptr;	/* L x n, the two-step potentials */
	cudaStream_t s = nullptr;	/* the call's: frees in its order */

	~pp_buffers()
	{
		gc_dfree(terms, s);
		gc_dfree(closest, s);
		gc_dfree(off, s);
		gc_dfree(bs, s);
		gc_dfree(cid, s);
		gc_dfree(cand, s);
		gc_dfree(best, s);
	}
};
}

gc_code
km_pp_device(const gc_ctx *ctx, cudaStream_t s, const float *XT, int64_t n,
			 int d, int k, uint64_t seed, uint64_t stream, float *C,
			 int64_t *chosen, gc_status *st)
{
	const int	L = gc_km_n_local_trials(k);
	const int64_t nb = (n + KM_BLOCK - 1) / KM_BLOCK;
	const unsigned nblk = (unsigned) ((n + 255) / 256);
	pp_buffers	b;
	int64_t		first;

	if (L > KM_PP_LMAX)
		return gc_fail(st, GC_EINTERNAL, "k-means++: %d local trials exceed %d", L, KM_PP_LMAX);
	b.s = s;
	KM_CK(gc_dalloc((void **) &b.closest, sizeof(float) * n, s));
	KM_CK(gc_dalloc((void **) &b.off, sizeof(double) * (nb + 1), s));
	KM_CK(gc_dalloc((void **) &b.bs, sizeof(double) * nb * KM_PP_LMAX, s));
	KM_CK(gc_dalloc((void **) &b.cid, sizeof(int64_t) * KM_PP_LMAX, s));
	KM_CK(gc_dalloc((void **) &b.cand, sizeof(float) * (size_t) d * KM_PP_LMAX, s));
	KM_CK(gc_dalloc((void **) &b.best, sizeof(int), s));
	/*
	 * The two-step potentials when pp_pots's n / GC_KM_BLOCK blocks would
	 * not fill the GPU (measured on an H200: 1M rows, d = 128, k = 1000,
	 * k-means++ 1.80 -> 1.48 s; with 4M and 10M rows, slightly slower than
	 * pp_pots) and their scratch can be had.
	 */
	{
		int			dev = 0,
					nsm = 0;

		KM_CK(cudaGetDevice(&dev));
		KM_CK(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev));
		if (nb < 4 * (int64_t) nsm && !getenv("GPUCLUST_KM_PP_FUSED") &&
			gc_dalloc((void **) &b.terms, sizeof(float) * (size_t) n * L, s) != cudaSuccess)
		{
			cudaGetLastError();
			b.terms = nullptr;
		}
	}

	first = (int64_t) (gc_rng_uniform(seed, stream, 0) * (double) n);
	if (first >= n)
		first = n - 1;

	/* Centre 0: one "candidate" against closest = +inf gives D² and sums. */
	fill_float<<<nblk, 256, 0, s>>>(b.closest, n, INFINITY);
	KM_LAUNCHED();
	for (int c = 0; c < k; c++)
	{
		const int	Lc = c == 0 ? 1 : L;

		pp_draw<<<1, 32, 0, s>>>(XT, n, d, b.off, nb, b.closest, seed, stream,
								 c, Lc, first, b.cid, b.cand);
		KM_LAUNCHED();
		if (b.terms)
		{
			pp_terms<<<nblk, 256, 0, s>>>(XT, n, d, b.cand, Lc, b.closest, b.terms);
			KM_LAUNCHED();
			pp_bsums<<<(unsigned) ((nb * Lc + 127) / 128), 128, 0, s>>>(b.terms, n, nb,
																		 Lc, b.bs);
		}
		else
			pp_pots<<<(unsigned) nb, PP_THREADS, 0, s>>>(XT, n, d, b.cand, Lc,
														  b.closest, b.bs);
		KM_LAUNCHED();
		pp_select<<<1, 128, 0, s>>>(b.bs, nb, Lc, b.off, b.cid, b.cand, d, C,
									c, chosen, b.best);
		KM_LAUNCHED();
		if (c + 1 < k)
		{
			pp_closest<<<nblk, 256, 0, s>>>(XT, n, d, C + (size_t) c * d,
											b.closest);
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
