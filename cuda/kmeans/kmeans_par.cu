/*
 * kmeans_par.cu — k-means|| seeding on the GPU (Bahmani et al. 2012).
 *
 * It reproduces the CPU's gc_km_init_kmeans_par (kmeans_init.c, defined
 * in kmeans/kmeans.h) bit for bit, unweighted:
 *
 *   par_merge   the first candidate: D² of every row, the exact float32
 *               gc_dist2 (dimension order, separate multiply and add).
 *   par_max,    phi: the round's largest D² gives its grid, par_qsum the
 *   par_qsum    exact integer sum of the D² on it (kmeans/kmeans.h).
 *   par_flags   round r's draws, one thread per row (gc_km_par_keep, the
 *               counter 1 + (r-1) n + i).
 *   the kept rows in row order: cub::DeviceSelect::Flagged.
 *   a round's new candidates, in sub-batches of at most k: the fit's own
 *               assignment step (km_prep + km_assign: the tensor-core
 *               screen, its bound and the exact re-rank, or the exact
 *               small-d kernel) gives every row its nearest candidate of
 *               the sub-batch, the lowest on ties; par_merge takes its
 *               exact gc_dist2 and keeps it where it is strictly smaller
 *               than the row's D² so far, so that the lowest nearest
 *               candidate over all of them wins ties, as the CPU's argmin
 *               in index order.
 *   par_count   the rows nearest each candidate (integer atomics: exact).
 *
 * Then weighted k-means++ over the candidates, on the device too
 * (km_pp_device_w, bit for bit gc_km_init_kmeanspp_w), from the
 * candidates' rows gathered into their own d x m transposed matrix.
 * With fewer than k candidates: km_pp_device over all the rows, as the
 * CPU falls back.
 *
 * About 10k candidates (5 rounds of 2k) against every row: 1M x 128,
 * k = 1000 is 2.6 TFLOP, which the screen does at tensor-core rates where
 * exact FP32 on the CUDA cores (three operations per term) is bounded at
 * 115 ms.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cub/block/block_reduce.cuh>
#include <cub/device/device_select.cuh>
#include <cuda/functional>
#include <thrust/iterator/counting_iterator.h>

#include "kmeans_dev.cuh"
#include "common/rng.h"

#define PAR_THREADS 256

/*
 * After km_assign over candidates m0 .. m0+mc-1 (their coordinates Cc,
 * mc x d, row-major; sub: each row's nearest of them, NULL: candidate
 * m0 alone): the row takes it where its exact distance is strictly below
 * its D² so far (init: always).
 */
__global__ void
par_merge(const float *__restrict__ XT, int64_t n, int d,
		  const float *__restrict__ Cc, const int32_t *__restrict__ sub,
		  int m0, bool init, float *__restrict__ D2, int32_t *__restrict__ lab)
{
	const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
	{
		const int	c = sub != nullptr ? sub[i] : 0;
		const float *cc = Cc + (int64_t) c * d;
		float		q = 0.0f;

		for (int j = 0; j < d; j++)
			q = gc_l2_step(q, XT[(int64_t) j * n + i], cc[j]);
		if (init || q < D2[i])
		{
			D2[i] = q;
			lab[i] = m0 + c;
		}
	}
}

/* *mx = the largest D² (its bits: non-negative floats order as integers). */
__global__ void __launch_bounds__(PAR_THREADS)
par_max(const float *__restrict__ D2, int64_t n, unsigned long long *mx)
{
	typedef cub::BlockReduce<unsigned, PAR_THREADS> reduce_t;
	__shared__ reduce_t::TempStorage ts;
	unsigned	m = 0;

	for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < n;
		 i += (int64_t) gridDim.x * blockDim.x)
		m = max(m, __float_as_uint(D2[i]));
	m = reduce_t(ts).Reduce(m, ::cuda::maximum<unsigned>());
	if (threadIdx.x == 0)
		atomicMax(mx, (unsigned long long) m);
}

/* *sum += the q of every D² on the grid S. */
__global__ void __launch_bounds__(PAR_THREADS)
par_qsum(const float *__restrict__ D2, int64_t n, double S, unsigned long long *sum)
{
	typedef cub::BlockReduce<unsigned long long, PAR_THREADS> reduce_t;
	__shared__ reduce_t::TempStorage ts;
	unsigned long long s = 0;

	for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < n;
		 i += (int64_t) gridDim.x * blockDim.x)
		s += gc_km_pot_q(gc_km_pot_term(nullptr, i, D2[i]), S);
	s = reduce_t(ts).Sum(s);
	if (threadIdx.x == 0)
		atomicAdd(sum, s);
}

/* Round r's draws. */
__global__ void
par_flags(const float *__restrict__ D2, int64_t n, uint64_t seed,
		  uint64_t stream, int r, double ell, double phi, uint8_t *flags)
{
	const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		flags[i] = (uint8_t) gc_km_par_keep(seed, stream, r, n, i, ell,
											gc_km_pot_term(nullptr, i, D2[i]), phi);
}

/*
 * The coordinates of rows[0 .. m-1]: out[c * cs + j * js] = XT[j][rows[c]]
 * (cs = d, js = 1: m x d row-major, as km_prep reads centres; cs = 1,
 * js = m: d x m transposed, as k-means++ reads rows).
 */
__global__ void
par_gather(const float *__restrict__ XT, int64_t n, int d,
		   const int32_t *__restrict__ rows, int m, float *out, int cs, int64_t js)
{
	const int64_t e = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (e < (int64_t) m * d)
	{
		const int	j = (int) (e / m),
					c = (int) (e % m);

		out[(int64_t) c * cs + j * js] = XT[(int64_t) j * n + rows[c]];
	}
}

__global__ void
par_count(const int32_t *__restrict__ lab, int64_t n, unsigned *cnt)
{
	const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		atomicAdd(cnt + lab[i], 1u);
}

/* chosen[c] = rows[local[c]]. */
__global__ void
par_rows(const int64_t *__restrict__ local, const int32_t *__restrict__ rows,
		 int k, int64_t *chosen)
{
	const int	c = blockIdx.x * blockDim.x + threadIdx.x;

	if (c < k)
		chosen[c] = rows[local[c]];
}

namespace
{
struct par_buffers
{
	cudaStream_t s = nullptr;
	float	   *D2 = nullptr;
	int32_t    *lab = nullptr;
	uint8_t    *flags = nullptr;
	int32_t    *sel = nullptr;	/* the kept rows of a round */
	int32_t    *nsel = nullptr;
	int32_t    *rows = nullptr;	/* every candidate's row */
	unsigned long long *red = nullptr;	/* phi: the largest D², the sum */
	void	   *tmp = nullptr;
	float	   *CT = nullptr;	/* all candidates' coordinates, d x m */
	unsigned   *cnt = nullptr;
	double	   *w = nullptr;
	int64_t    *local = nullptr;

	~par_buffers()
	{
		gc_dfree(D2, s);
		gc_dfree(lab, s);
		gc_dfree(flags, s);
		gc_dfree(sel, s);
		gc_dfree(nsel, s);
		gc_dfree(rows, s);
		gc_dfree(red, s);
		gc_dfree(tmp, s);
		gc_dfree(CT, s);
		gc_dfree(cnt, s);
		gc_dfree(w, s);
		gc_dfree(local, s);
	}
};
}

/*
 * Candidates rows[m0 .. m0+mc-1] against every row, in sub-batches of at
 * most D.k (the buffers of D's assignment are the fit's): the sub-batch's
 * coordinates into D.C[1] (free until the fit starts), D's assignment with
 * D.k and D.kp set to the sub-batch's, then par_merge.
 */
static gc_code
par_take(km_dev &D, par_buffers &B, int m0, int mc, gc_status *st)
{
	const int	k = D.k,
				kp = D.kp;
	float	   *Cc = D.C[1];
	gc_code		rc = GC_OK;

	for (int s0 = 0; s0 < mc && rc == GC_OK; s0 += k)
	{
		const int	sc = mc - s0 < k ? mc - s0 : k;

		par_gather<<<blocks_for((int64_t) sc * D.d, 256), 256, 0, D.s>>>(
			D.XT, D.n, D.d, B.rows + m0 + s0, sc, Cc, D.d, 1);
		KM_LAUNCHED();
		D.k = sc;
		D.kp = (sc + TILE - 1) / TILE * TILE;
		rc = km_prep(D, Cc, st);
		if (rc == GC_OK)
			rc = km_assign(D, st);
		D.k = k;
		D.kp = kp;
		if (rc == GC_OK)
		{
			par_merge<<<blocks_for(D.n, PAR_THREADS), PAR_THREADS, 0, D.s>>>(
				D.XT, D.n, D.d, Cc, D.labels, m0 + s0, false, B.D2, B.lab);
			KM_LAUNCHED();
		}
	}
	return rc;
}

gc_code
km_par_device(km_dev &D, const gc_ctx *ctx, uint64_t seed, uint64_t stream,
			  float *C, int64_t *chosen, gc_status *st)
{
	const float *XT = D.XT;
	const int64_t n = D.n;
	const int	d = D.d,
				k = D.k;
	cudaStream_t s = D.s;
	const double ell = GC_KM_PAR_OVERSAMPLE * (double) k;
	const unsigned nblk = blocks_for(n, PAR_THREADS);
	const unsigned rgrid = nblk < 1024 ? nblk : 1024;	/* par_max, par_qsum */
	par_buffers B;
	int32_t		first;
	int			m = 1;
	size_t		tmp_bytes = 0;
	gc_code		rc;

	B.s = s;
	KM_CK(gc_dalloc((void **) &B.D2, sizeof(float) * (size_t) n, s));
	KM_CK(gc_dalloc((void **) &B.lab, sizeof(int32_t) * (size_t) n, s));
	KM_CK(gc_dalloc((void **) &B.flags, (size_t) n, s));
	KM_CK(gc_dalloc((void **) &B.sel, sizeof(int32_t) * (size_t) n, s));
	KM_CK(gc_dalloc((void **) &B.nsel, sizeof(int32_t), s));
	KM_CK(gc_dalloc((void **) &B.rows, sizeof(int32_t) * (size_t) n, s));
	KM_CK(gc_dalloc((void **) &B.red, sizeof(unsigned long long) * 2, s));
	KM_CK(cub::DeviceSelect::Flagged(nullptr, tmp_bytes, thrust::counting_iterator<int32_t>(0),
									 B.flags, B.sel, B.nsel, (int64_t) n, s));
	KM_CK(gc_dalloc(&B.tmp, tmp_bytes, s));

	/* the assignment compares with the labels and counts into the info
	 * record: both set (the fit resets them after seeding) */
	KM_CK(cudaMemsetAsync(D.labels, 0xff, sizeof(int32_t) * (size_t) n, s));
	KM_CK(cudaMemsetAsync(D.info, 0, sizeof(km_info), s));

	/* Candidate 0: k-means++'s first centre; D² = its distance. */
	first = (int32_t) (gc_rng_uniform(seed, stream, 0) * (double) n);
	if (first >= n)
		first = (int32_t) (n - 1);
	KM_CK(cudaMemcpyAsync(B.rows, &first, sizeof(int32_t), cudaMemcpyHostToDevice, s));
	par_gather<<<blocks_for(d, 256), 256, 0, s>>>(XT, n, d, B.rows, 1, D.C[1], d, 1);
	KM_LAUNCHED();
	par_merge<<<nblk, PAR_THREADS, 0, s>>>(XT, n, d, D.C[1], nullptr, 0, true, B.D2, B.lab);
	KM_LAUNCHED();

	for (int r = 1; r <= GC_KM_PAR_MAX_ROUNDS; r++)
	{
		double		phi = 0.0,
					S;
		unsigned long long hred[2] = {0, 0};
		float		mx;
		int32_t		ns = 0;

		if (r > GC_KM_PAR_ROUNDS && m >= k)
			break;
		/* phi on the round's grid: its largest D², then the sum */
		KM_CK(cudaMemsetAsync(B.red, 0, sizeof(unsigned long long) * 2, s));
		par_max<<<rgrid, PAR_THREADS, 0, s>>>(B.D2, n, B.red);
		KM_LAUNCHED();
		KM_CK(cudaMemcpyAsync(hred, B.red, sizeof(unsigned long long), cudaMemcpyDeviceToHost, s));
		KM_CK(cudaStreamSynchronize(s));
		if (gc_cancelled(ctx))
			return gc_fail(st, GC_ECANCEL, "canceled");
		{
			const uint32_t bits = (uint32_t) hred[0];

			memcpy(&mx, &bits, sizeof(float));
		}
		S = gc_km_pot_scale((double) mx, n);
		if (S > 0.0)
		{
			par_qsum<<<rgrid, PAR_THREADS, 0, s>>>(B.D2, n, S, B.red + 1);
			KM_LAUNCHED();
			KM_CK(cudaMemcpyAsync(hred + 1, B.red + 1, sizeof(unsigned long long),
								  cudaMemcpyDeviceToHost, s));
			KM_CK(cudaStreamSynchronize(s));
			phi = (double) hred[1] / S;
		}
		if (!(phi > 0.0))
			break;
		par_flags<<<nblk, PAR_THREADS, 0, s>>>(B.D2, n, seed, stream, r, ell, phi, B.flags);
		KM_LAUNCHED();
		KM_CK(cub::DeviceSelect::Flagged(B.tmp, tmp_bytes, thrust::counting_iterator<int32_t>(0),
										 B.flags, B.sel, B.nsel, (int64_t) n, s));
		KM_CK(cudaMemcpyAsync(&ns, B.nsel, sizeof(int32_t), cudaMemcpyDeviceToHost, s));
		KM_CK(cudaStreamSynchronize(s));
		if (ns == 0)
			continue;
		if ((int64_t) m + ns > n)
			return gc_fail(st, GC_EINTERNAL, "k-means||: more candidates than rows");
		KM_CK(cudaMemcpyAsync(B.rows + m, B.sel, sizeof(int32_t) * (size_t) ns,
							  cudaMemcpyDeviceToDevice, s));
		if ((rc = par_take(D, B, m, ns, st)) != GC_OK)
			return rc;
		m += ns;
	}

	if (m < k)
		return km_pp_device(ctx, s, XT, n, d, k, seed, stream, C, chosen, st);

	/* The candidates' weights, and weighted k-means++ over them. */
	{
		unsigned   *hcnt = (unsigned *) malloc(sizeof(unsigned) * (size_t) m);
		double	   *hw = (double *) malloc(sizeof(double) * (size_t) m);
		cudaError_t e;

		if (hcnt == NULL || hw == NULL)
		{
			free(hcnt);
			free(hw);
			return gc_fail(st, GC_ENOMEM, "GPU k-means: out of memory");
		}
		e = gc_dalloc((void **) &B.cnt, sizeof(unsigned) * (size_t) m, s);
		if (e == cudaSuccess)
			e = cudaMemsetAsync(B.cnt, 0, sizeof(unsigned) * (size_t) m, s);
		if (e == cudaSuccess)
		{
			par_count<<<nblk, PAR_THREADS, 0, s>>>(B.lab, n, B.cnt);
			e = cudaGetLastError();
		}
		if (e == cudaSuccess)
			e = cudaMemcpyAsync(hcnt, B.cnt, sizeof(unsigned) * (size_t) m,
								cudaMemcpyDeviceToHost, s);
		if (e == cudaSuccess)
			e = cudaStreamSynchronize(s);
		for (int c = 0; e == cudaSuccess && c < m; c++)
			hw[c] = (double) hcnt[c];
		if (e == cudaSuccess)
			e = gc_dalloc((void **) &B.w, sizeof(double) * (size_t) m, s);
		if (e == cudaSuccess)
			e = cudaMemcpyAsync(B.w, hw, sizeof(double) * (size_t) m, cudaMemcpyHostToDevice, s);
		/* the candidates' rows, transposed, for k-means++ */
		if (e == cudaSuccess)
			e = gc_dalloc((void **) &B.CT, sizeof(float) * (size_t) m * d, s);
		if (e == cudaSuccess)
		{
			par_gather<<<blocks_for((int64_t) m * d, 256), 256, 0, s>>>(XT, n, d, B.rows, m,
																		  B.CT, 1, m);
			e = cudaGetLastError();
		}
		free(hcnt);
		if (e != cudaSuccess)
		{
			free(hw);
			return km_cuda_fail(st, e, "k-means|| candidate weights");
		}
		if (chosen != nullptr &&
			(e = gc_dalloc((void **) &B.local, sizeof(int64_t) * (size_t) k, s)) != cudaSuccess)
		{
			free(hw);
			return km_cuda_fail(st, e, "k-means|| chosen rows");
		}
		rc = km_pp_device_w(ctx, s, B.CT, m, d, k, B.w, hw, seed,
							stream + GC_KM_PAR_REDUCE_STREAM, C, B.local, st);
		/* km_pp_device_w synchronised: hw is no longer read */
		free(hw);
		if (rc != GC_OK)
			return rc;
		if (chosen != nullptr)
		{
			par_rows<<<blocks_for(k, 256), 256, 0, s>>>(B.local, B.rows, k, chosen);
			KM_LAUNCHED();
			KM_CK(cudaStreamSynchronize(s));
		}
	}
	return GC_OK;
}
