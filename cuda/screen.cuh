/*
 * screen.cuh — the device pieces both tensor-core screens of the GPU
 * k-means share (kmeans_screen.cu: mma.sync; kmeans_wgmma.cu: Hopper's
 * wgmma): TF32 rounding, 16-byte asynchronous copies, and the running best
 * and second best of a row.  Internal to cuda/.
 */
#ifndef GPUCLUST_SCREEN_CUH
#define GPUCLUST_SCREEN_CUH

#include <stdint.h>

__device__ __forceinline__ uint32_t
to_tf32(float x)
{
	uint32_t	r;

	asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
	return r;
}

__device__ __forceinline__ void
cp_async16(float *smem, const float *gmem)
{
	unsigned	s = (unsigned) __cvta_generic_to_shared(smem);

	asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(s), "l"(gmem));
}

__device__ __forceinline__ void
cp_async_commit()
{
	asm volatile("cp.async.commit_group;");
}

template <int N>
__device__ __forceinline__ void
cp_async_wait()
{
	asm volatile("cp.async.wait_group %0;" :: "n"(N));
}

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

#endif							/* GPUCLUST_SCREEN_CUH */
