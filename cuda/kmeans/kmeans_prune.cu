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
 * (real distances between the float vectors).  They come from the
 * screen that decided the row:
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
 *   - a row the exact re-rank decides gets ub = +inf, lb = 0: it was a
 *     near tie, and is screened again next time.
 * When the centres move from Cbase to C, drift[j] >= ||C_j - Cbase_j||
 * (double sums, rounded up) and the triangle inequality give
 *   ub += drift[a],  lb -= max_j drift[j]
 * (k_prune, rounded outwards).  Where k² d is small enough (SEP_MAX_WORK),
 * each centre's half distance to its nearest other centre,
 * sep[a] <= min_{j != a} ||c_a - c_j|| / 2 (k_centre_sep: float sums of
 * squares, whose rounding (d + 2) u is taken off), gives another lower
 * bound that does not decay with the drift (Elkan's):
 *   ||x - c_j|| >= ||c_a - c_j|| - ||x - c_a|| >= 2 sep[a] - ub,
 * so lb = max(lb, 2 sep[a] - ub), which k_prune also stores.  The CPU's
 * distance D_j = gc_dist2(x, c_j) is within g = (d + 2) u of ||x - c_j||²
 * (relative: its float sum of squares, kmeans_screen.cu's header), so when
 *   (1 + g) ub² < (1 - g) lb²
 * every D_j (j != a) is strictly above D_a: the CPU's label is a, with no
 * tie, and the row is kept.  The others are listed (pr_rows) and go
 * through the screen, the 3xTF32 re-screen and the exact re-rank as
 * before, which write their new bounds.
 *
 * Not on the exact small-d path (d <= 8): there, keeping the second-nearest
 * distance too and listing rows made iterations slower (10M x 2, k = 100,
 * H100: 1.0 ms an iteration against 0.43 with every row assigned); at
 * d <= 3 the grid of candidate centres cuts that path's work instead
 * (kmeans_grid.cu).
 *
 * Cost: 20 bytes per row (label, ub and lb read and written) against the
 * assignment's 4d bytes and 2kd FLOPs per row.  The first assignment of a
 * run takes every row, and so does any where the bounds keep fewer than
 * three rows in four (km_assign).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cub/block/block_scan.cuh>

#include "kmeans_dev.cuh"

/* The centre-separation bound costs 3 k² d float operations an
 * assignment (k_centre_sep): it is taken while k² d is at most this (k =
 * 1000 at d = 128 is 1.3e8; FAISS's k = 20000 at d = 256 is 1e11). */
#define SEP_MAX_WORK 1.1e9

/*
 * sep[a] <= min_{j != a} ||c_a - c_j|| / 2 from CTo (the unshifted centres,
 * d x kp: a warp's reads are contiguous): block (x, a) takes centres
 * j = x * 256 + thread; float sums of squares (sub, mul, add: relative
 * rounding <= (d + 2) u), lowered by 1.1 (d + 2) u and rounded down; the
 * minimum over j by atomicMin on the bits (values >= 0).  sep: set to
 * 0x7f7f7f7f (3.4e38) before.
 */
__global__ void
k_centre_sep(const float *__restrict__ CTo, int kp, int k, int d, float shrink,
			 float *sep)
{
	const int	a = blockIdx.y,
				j = blockIdx.x * blockDim.x + threadIdx.x;
	float		v = INFINITY;

	if (j < k && j != a)
	{
		float		s = 0.0f;

		for (int t = 0; t < d; t++)
		{
			const float e = __fsub_rn(CTo[(int64_t) t * kp + a], CTo[(int64_t) t * kp + j]);

			s = __fadd_rn(s, __fmul_rn(e, e));
		}
		v = __fmul_rd(__fsqrt_rd(__fmul_rd(s, shrink)), 0.5f);
	}
	for (int off = 16; off >= 1; off >>= 1)
		v = fminf(v, __shfl_xor_sync(0xffffffffu, v, off));
	if ((threadIdx.x & 31) == 0 && v < INFINITY)
		atomicMin((unsigned *) sep + a, __float_as_uint(v));
}

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

/*
 * The bounds moved by the drift; the rows they cannot keep appended to
 * rows / *n_rows.  A block takes PR_ROWS rows a thread (coalesced: row
 * r0 + p * PR_THREADS + thread) and appends its rows with one atomic: a
 * per-warp atomic on the one counter serialises (10M rows, H100: an
 * iteration 0.1 ms longer).
 */
#define PR_THREADS 256
#define PR_ROWS 8

__global__ void __launch_bounds__(PR_THREADS)
k_prune(const int32_t *__restrict__ labels, int64_t n, const float *__restrict__ drift,
		const float *__restrict__ sep, int k, float g_hi, float g_lo,
		float *__restrict__ ub, float *__restrict__ lb, int32_t *__restrict__ rows,
		unsigned *n_rows)
{
	typedef cub::BlockScan<int, PR_THREADS> scan_t;
	__shared__ typename scan_t::TempStorage tmp;
	__shared__ unsigned base;
	const int64_t r0 = (int64_t) blockIdx.x * (PR_THREADS * PR_ROWS) + threadIdx.x;
	bool		list[PR_ROWS];
	int			cnt = 0,
				off,
				total;

#pragma unroll
	for (int p = 0; p < PR_ROWS; p++)
	{
		const int64_t i = r0 + p * PR_THREADS;

		list[p] = false;
		if (i < n)
		{
			const int	a = labels[i];

			list[p] = true;
			if (a >= 0 && a < k)
			{
				const float u = __fadd_ru(ub[i], drift[a]);
				float		l = fmaxf(__fsub_rd(lb[i], drift[k]), 0.0f);

				if (sep)
					l = fmaxf(l, __fsub_rd(2.0f * sep[a], u));
				ub[i] = u;
				lb[i] = l;
				list[p] = !(__fmul_ru(__fmul_ru(u, u), g_hi) < __fmul_rd(__fmul_rd(l, l), g_lo));
			}
		}
		cnt += list[p];
	}
	scan_t(tmp).ExclusiveSum(cnt, off, total);
	if (threadIdx.x == 0 && total > 0)
		base = atomicAdd(n_rows, (unsigned) total);
	__syncthreads();
	if (total == 0)
		return;
#pragma unroll
	for (int p = 0; p < PR_ROWS; p++)
		if (list[p])
			rows[base + off++] = (int32_t) (r0 + p * PR_THREADS);
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
	if ((double) D.k * D.k * D.d <= SEP_MAX_WORK)
		KM_ALLOC(D.csep, D.k);
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
	if (D.csep)
	{
		const float shrink = (float) (1.0 - 1.1 * (D.d + 2) * u);

		KM_CK(cudaMemsetAsync(D.csep, 0x7f, sizeof(float) * D.k, D.s));	/* 3.4e38 */
		k_centre_sep<<<dim3(blocks_for(D.k, 256), D.k), 256, 0, D.s>>>(D.CTo, D.kp, D.k, D.d,
																	  shrink, D.csep);
		KM_LAUNCHED();
	}
	KM_CK(cudaMemsetAsync(&D.info->n_listed, 0, sizeof(unsigned), D.s));
	k_drift<<<blocks_for((int64_t) D.k * 32, 256), 256, 0, D.s>>>(D.Cprep, D.Cbase, D.k, D.d,
																	D.drift);
	KM_LAUNCHED();
	k_prune<<<blocks_for(D.n, PR_THREADS * PR_ROWS), PR_THREADS, 0, D.s>>>(
		D.labels, D.n, D.drift, D.csep, D.k, g_hi, g_lo, D.ub, D.lb, D.pr_rows, &D.info->n_listed);
	KM_LAUNCHED();
	KM_CK(cudaMemcpyAsync(&D.h_info->n_listed, &D.info->n_listed, sizeof(unsigned),
						  cudaMemcpyDeviceToHost, D.s));
	KM_CK(cudaStreamSynchronize(D.s));
	*listed = D.h_info->n_listed;
	return GC_OK;
}
