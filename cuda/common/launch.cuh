/*
 * launch.cuh — the one way the GPU DBSCAN (cuda/dbscan*.cu) launches a
 * kernel over a range of work items, and two small fill kernels.  Internal
 * to cuda/.
 *
 * gc_launch: blocks of per_block items, threads threads each (gc_launch_smem:
 * with smem bytes of dynamic shared memory); an empty
 * range launches nothing (a zero-sized grid is a CUDA error, "invalid
 * argument"), so no caller has to remember the empty case.  The k-means
 * kernels (cuda/kmeans*.cu) size every grid from n >= k >= 1, d >= 1 or the
 * multiprocessor count, never from a count that can be zero.
 */
#ifndef GPUCLUST_LAUNCH_CUH
#define GPUCLUST_LAUNCH_CUH

#include <cuda_runtime.h>
#include <stdint.h>

template <typename... P, typename... A>
static inline cudaError_t
gc_launch_smem(void (*kernel)(P...), int64_t items, int per_block, int threads,
			   size_t smem, cudaStream_t s, A... args)
{
	int64_t		blocks;

	if (items <= 0)
		return cudaSuccess;
	blocks = (items + per_block - 1) / per_block;
	if (blocks > INT32_MAX)
		return cudaErrorInvalidConfiguration;
	kernel<<<(unsigned) blocks, threads, smem, s>>>(args...);
	return cudaGetLastError();
}

template <typename... P, typename... A>
static inline cudaError_t
gc_launch(void (*kernel)(P...), int64_t items, int per_block, int threads,
		  cudaStream_t s, A... args)
{
	return gc_launch_smem(kernel, items, per_block, threads, 0, s, args...);
}

/* Small kernels (each file that launches them has its own copy). */
static __global__ void
k_iota(int *a, int n)
{
	int			i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		a[i] = i;
}

static __global__ void
k_fill(int *a, int n, int v)
{
	int			i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		a[i] = v;
}

#endif							/* GPUCLUST_LAUNCH_CUH */
