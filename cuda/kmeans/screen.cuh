/*
 * screen.cuh — the device pieces both tensor-core screens of the GPU
 * k-means share (kmeans_screen.cu: mma.sync; kmeans_wgmma.cu: Hopper's
 * wgmma): the running best and second best of a row, the near ties'
 * queue and windows, the bounds and the cut.  Internal to cuda/; after
 * kmeans_dev.cuh.
 */
#ifndef GPUCLUST_SCREEN_CUH
#define GPUCLUST_SCREEN_CUH

#include <stdint.h>

#include "common/tf32.cuh"

/* (score, index) running best and second best; ties keep the lower index
 * (the first seen, as columns arrive in increasing order per thread). */
__device__ __forceinline__ void
keep_best(float s, int col, float &best, float &sec, int &bidx)
{
	sec = fminf(sec, fmaxf(s, best));
	bidx = s < best ? col : bidx;
	best = fminf(best, s);
}

__device__ __forceinline__ void
merge_best(float os, float o2, int oi, float &best, float &sec, int &bidx)
{
	if (os < best || (os == best && oi < bidx))
	{
		sec = fminf(best, o2);
		best = os;
		bidx = oi;
	}
	else
		sec = fminf(sec, os);
}

/* The running best of a row held by the 4 lanes of a quad (lane % 4 = 0..3,
 * the mma accumulators' column groups): every lane ends with the merge. */
__device__ __forceinline__ void
merge_quad(float &best, float &sec, int &bidx)
{
#pragma unroll
	for (int off = 1; off <= 2; off <<= 1)
	{
		const float os = __shfl_xor_sync(0xffffffffu, best, off),
					o2 = __shfl_xor_sync(0xffffffffu, sec, off);
		const int	oi = __shfl_xor_sync(0xffffffffu, bidx, off);

		merge_best(os, o2, oi, best, sec, bidx);
	}
}

/* A row the screen cannot decide: queued in rows_out, with (for the
 * windows' slots) its best screened score plus half its bound T
 * (kmeans_dev.cuh's km_ties). */
__device__ __forceinline__ void
queue_tie(int64_t gi, float best, float T, int32_t *rows_out, unsigned *n_out,
		  const km_ties &ties)
{
	const unsigned q = atomicAdd(n_out, 1u);

	rows_out[q] = (int32_t) gi;
	if (q < (unsigned) ties.cap)
		ties.thr[q] = __fadd_ru(best, 0.5f * T);
}

/* Centre col is in the window of queue slot q (the window pass). */
__device__ __forceinline__ void
list_tie(const km_ties &ties, int64_t q, int col)
{
	const unsigned c = atomicAdd(&ties.ccnt[q], 1u);

	if (c < KM_TIE_CAP)
		ties.cand[q * KM_TIE_CAP + c] = col;
}

/*
 * The bounds a row the screen decides keeps for the next iterations
 * (kmeans_prune.cu): xn2 = ||x'||², b and s2 its best and second-best
 * screened scores, T the decision bound (s2 - b > T).  Every centre j has
 * | ||x - c_j||² - (xn2 + s^_j) | <= T/2 (kmeans_prune.cu's header), so
 * ||x - c_b|| <= sqrt(xn2 + b + T/2) and every other centre is at least
 * sqrt(xn2 + s2 - T/2) away; rounded outwards.
 */
__device__ __forceinline__ void
screen_bounds(float xn2, float b, float s2, float T, float *ub, float *lb)
{
	const float h = 0.5f * T;	/* exact */
	const float u2 = __fadd_ru(__fadd_ru(xn2, b), h),
				l2 = __fsub_rd(__fadd_rd(xn2, s2), h);

	*ub = __fsqrt_ru(fmaxf(u2, 0.0f));
	*lb = l2 > 0.0f ? __fsqrt_rd(l2) : 0.0f;
}

/*
 * Whether the screen leaves out row gi (km_cut): every centre j has
 * ||x - c_j||² >= xn2 + b - T/2 (b the row's best screened score, T its
 * bound: screen_bounds' inequality) and the CPU's D_j >= (1 - (d + 2) u)
 * ||x - c_j||² (kmeans_prune.cu's header), rounded down here; when that
 * is at least the row's D² so far (d2), no centre of the screen is
 * strictly nearer than the row's candidate, and k-means|| keeps it.
 */
__device__ __forceinline__ bool
screen_cut_d2(const km_cut &cut, float d2, float xn2, float b, float T)
{
	return cut.d2 != nullptr &&
		__fmul_rd(__fsub_rd(__fadd_rd(xn2, b), 0.5f * T), cut.keep) >= d2;
}

/* screen_cut_d2 with row gi's D² read here (a kernel that loads it early
 * passes it itself) */
__device__ __forceinline__ bool
screen_cut(const km_cut &cut, int64_t gi, float xn2, float b, float T)
{
	return cut.d2 != nullptr && screen_cut_d2(cut, cut.d2[gi], xn2, b, T);
}

#endif							/* GPUCLUST_SCREEN_CUH */
