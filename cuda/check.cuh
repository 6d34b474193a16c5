/*
 * check.cuh — the one mapping of a CUDA error to the core's gc_code, for
 * every GPU algorithm (internal to cuda/): an allocation failure is
 * GC_ENOMEM, anything else GC_EDEVICE, and the message names the algorithm,
 * the error and the call.  A non-sticky error is cleared, so the process
 * can go on using the GPU.
 */
#ifndef GPUCLUST_CHECK_CUH
#define GPUCLUST_CHECK_CUH

#include <cuda_runtime.h>

#include "gpuclust_core.h"

static inline gc_code
gc_cuda_fail(gc_status *st, cudaError_t e, const char *who, const char *what)
{
	gc_code		c = (e == cudaErrorMemoryAllocation) ? GC_ENOMEM : GC_EDEVICE;

	cudaGetLastError();
	return gc_fail(st, c, "%s: %s: %s (%s)", who,
				   c == GC_ENOMEM ? "out of GPU memory" : "CUDA error",
				   cudaGetErrorString(e), what);
}

/* In a function returning gc_code with gc_status *st in scope. */
#define GC_CUDA_CK(who, expr) \
	do { \
		cudaError_t gc_e_ = (expr); \
		if (gc_e_ != cudaSuccess) \
			return gc_cuda_fail(st, gc_e_, who, #expr); \
	} while (0)

#endif							/* GPUCLUST_CHECK_CUH */
