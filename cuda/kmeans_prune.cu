/*
 * kmeans_prune.cu — the bounds that keep most rows out of the GPU k-means'
 * assignment once the centres settle (Hamerly's bounds, kept exact), so
 * that an iteration screens only the rows whose nearest centre may have
 * changed.  Labels stay the CPU's, bit for bit: a row is kept only when its
 * label is surely still the CPU's argmin.
 *
 * Per row i with label a, two floats about the centres Cbase (the centres
 * of the last assignment):
 *   ub[i] >= ||x_i - c_a||,  lb[i] <= ||x_i - c_j|| for every j != a
 * (real distances between the float vectors).  They come from the screen
 * that decided the row:
 *   - the screens (kmeans_screen.cu, kmeans_wgmma.cu) decide a row when
 *     s2 - b > T (b, s2 its best and second-best screened scores, T the
 *     bound of the screen's header).  That T is 2 (|s^_j - s_j| + the
 *     error of ||x'||² (xn2) + the shift's 2.01 u M²) or more: the header
 *     adds (d + 4) u M² for the CPU's own rounding on each side, where
 *     these take (d + 1) u M² (xn2, an fma chain) + 2.01 u M² (the shift,
 *     ||(x' - c') - (x - c)|| <= u M (1 + u)).  So for every centre j
 *       | ||x - c_j||² - (xn2 + s^_j) | <= T / 2,
 *     and screen_bounds (screen.cuh) takes ub = sqrt(xn2 + b + T/2),
 *     lb = sqrt(xn2 + s2 - T/2), rounded outwards;
 *   - a row the exact re-rank decides gets ub = +inf: it was a near tie,
 *     and is screened again next time.
 * When the centres move from Cbase to C, drift[j] >= ||C_j - Cbase_j||
 * (double sums, rounded up) and the triangle inequality give
 *   ub += drift[a],  lb -= max_j drift[j]
 * (k_prune, rounded outwards).  The CPU's distance D_j = gc_dist2(x, c_j)
 * is within g = (d + 2) u of ||x - c_j||² (relative: its float sum of
 * squares, kmeans_screen.cu's header), so when
 *   (1 + g) ub² < (1 - g) lb²
 * every D_j (j != a) is strictly above D_a: the CPU's label is a, with no
 * tie, and the row is kept.  The others are listed (pr_rows) and go
 * through the screen, the 3xTF32 re-screen and the exact re-rank as
 * before, which write their new bounds.
 *
 * Cost: 16 bytes per row (label, ub, lb, the list) against the screen's
 * 4d + 4k d / 128 per row: nothing where rows stay, which they do once the
 * centres settle.  The first assignment of a run screens every row; when
 * the bounds keep fewer than three rows in four the whole screen runs
 * (km_assign).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kmeans_dev.cuh"

/* drift[j] >= ||C_j - Cbase_j|| (rounded up), one warp per centre; the
 * largest into drift[k] (float bits of values >= 0 order as unsigned). */
__global__ void
k_drift(const float *__restrict__ C, const float *__restrict__ Cb, int k, int d,
		float *drift)
{
	const int64_t w = ((int64_t) blockIdx.x * blockDim.x + threadIdx.x) >> 5;
	const int	lane = threadIdx.x & 31;

	if (w < k)
	{
		double		s = 0.0;

		for (int t = lane; t < d; t += 32)
		{
			const double e = (double) C[w * d + t] - (double) Cb[w * d + t];

			s = fma(e, e, s);
		}
#pragma unroll
		for (int off = 16; off >= 1; off >>= 1)
			s += __shfl_xor_sync(0xffffffffu, s, off);
		if (lane == 0)
		{
			/* the double sum's relative error, < (d + 2) 2^-53, is far
			 * below the 2^-40 added */
			const float v = __double2float_ru(sqrt(s) * (1.0 + 0x1.0p-40));

			drift[w] = v;
			atomicMax((unsigned *) drift + k, __float_as_uint(v));
		}
	}
}

/* The bounds moved by the drift; the rows they cannot keep appended to
 * rows / *n_rows (warp-aggregated). */
__global__ void
k_prune(const int32_t *__restrict__ labels, int64_t n, const float *__restrict__ drift,
		int k, float g_hi, float g_lo, float *__restrict__ ub, float *__restrict__ lb,
		int32_t *__restrict__ rows, unsigned *n_rows)
{
	const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
	bool		list = false;

	if (i < n)
	{
		const int	a = labels[i];

		list = true;
		if (a >= 0 && a < k)
		{
			const float u = __fadd_ru(ub[i], drift[a]),
						l = fmaxf(__fsub_rd(lb[i], drift[k]), 0.0f);

			ub[i] = u;
			lb[i] = l;
			list = !(__fmul_ru(__fmul_ru(u, u), g_hi) < __fmul_rd(__fmul_rd(l, l), g_lo));
		}
	}
	{
		const unsigned m = __ballot_sync(0xffffffffu, list);
		const int	lane = threadIdx.x & 31;
		unsigned	base = 0;

		if (m == 0)
			return;
		if (lane == __ffs(m) - 1)
			base = atomicAdd(n_rows, (unsigned) __popc(m));
		base = __shfl_sync(0xffffffffu, base, __ffs(m) - 1);
		if (list)
			rows[base + __popc(m & ((1u << lane) - 1))] = (int32_t) i;
	}
}

/* ---- host side ---- */

void
km_prune_plan(km_dev &D)
{
	const char *env = getenv("GPUCLUST_KM_PRUNE");

	D.prune_ok = !D.streamed && !D.small && D.screen != 0 &&
		!(env && strcmp(env, "0") == 0);
}

gc_code
km_prune_alloc(km_dev &D, gc_status *st)
{
	KM_ALLOC(D.ub, D.n);
	KM_ALLOC(D.lb, D.n);
	KM_ALLOC(D.pr_rows, D.n);
	KM_ALLOC(D.Cbase, (int64_t) D.k * D.d);
	KM_ALLOC(D.drift, D.k + 1);
	return GC_OK;
}

gc_code
km_prune(km_dev &D, unsigned *listed, gc_status *st)
{
	const double u = 0x1.0p-24,
				g = 1.05 * (D.d + 2) * u;
	const float g_hi = (float) (1.0 + 2 * g),	/* float rounding of the factors */
				g_lo = (float) (1.0 - 2 * g);

	KM_CK(cudaMemsetAsync(D.drift + D.k, 0, sizeof(float), D.s));
	KM_CK(cudaMemsetAsync(&D.info->n_listed, 0, sizeof(unsigned), D.s));
	k_drift<<<blocks_for((int64_t) D.k * 32, 256), 256, 0, D.s>>>(D.Cprep, D.Cbase, D.k, D.d,
																	D.drift);
	KM_LAUNCHED();
	k_prune<<<blocks_for(D.n, 256), 256, 0, D.s>>>(D.labels, D.n, D.drift, D.k, g_hi, g_lo,
												   D.ub, D.lb, D.pr_rows, &D.info->n_listed);
	KM_LAUNCHED();
	KM_CK(cudaMemcpyAsync(D.Cbase, D.Cprep, sizeof(float) * (size_t) D.k * D.d,
						  cudaMemcpyDeviceToDevice, D.s));
	KM_CK(cudaMemcpyAsync(&D.h_info->n_listed, &D.info->n_listed, sizeof(unsigned),
						  cudaMemcpyDeviceToHost, D.s));
	KM_CK(cudaStreamSynchronize(D.s));
	*listed = D.h_info->n_listed;
	return GC_OK;
}
