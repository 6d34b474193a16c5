/*
 * kmeans_gpu.cuh — internal to the CUDA k-means (kmeans.cu, kmeans_pp.cu):
 * the per-iteration status record, error plumbing and the launchers shared
 * by the two files.  Not a public header.
 */
#ifndef GPUCLUST_KMEANS_GPU_CUH
#define GPUCLUST_KMEANS_GPU_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "gpu.h"
extern "C" {
#include "kmeans_internal.h"
}

/* Points per fixed-order block: the CPU's blocking (kmeans_internal.h). */
#define KM_BLOCK GC_KM_BLOCK

/* Most local trials k-means++ draws (2 + ln k, k < 2^31: 23). */
#define KM_PP_LMAX 24

/* The one small record read back per Lloyd iteration. */
struct km_info
{
	unsigned long long changed;	/* rows whose label changed */
	double		shift;			/* sum of squared centre moves */
	int			n_empty;		/* clusters with no row */
	int			moved;			/* some centre coordinate changed */
	unsigned	n_fallback;		/* tiled path: rows re-ranked exactly */
	unsigned	pad;
};

/* A CUDA error as a gc_code: allocation failures are GC_ENOMEM. */
static inline gc_code
km_cuda_fail(gc_status *st, cudaError_t e, const char *what)
{
	gc_code		c = (e == cudaErrorMemoryAllocation) ? GC_ENOMEM : GC_EDEVICE;

	cudaGetLastError();			/* clear a non-sticky error */
	return gc_fail(st, c, "GPU k-means: %s: %s (%s)",
				   c == GC_ENOMEM ? "out of GPU memory" : "CUDA error",
				   cudaGetErrorString(e), what);
}

/* In a function returning gc_code with gc_status *st in scope. */
#define KM_CK(expr) \
	do { \
		cudaError_t km_e_ = (expr); \
		if (km_e_ != cudaSuccess) \
			return km_cuda_fail(st, km_e_, #expr); \
	} while (0)
#define KM_LAUNCHED() KM_CK(cudaGetLastError())

/*
 * k-means++ seeding on the device, bit for bit the CPU's
 * gc_km_init_kmeanspp (same draws, same float distances, same blocked double
 * sums): XT is the d x n transposed data; C (k x d, device) receives the
 * centres, chosen (k, device, may be NULL) the rows.
 */
gc_code		km_pp_device(const gc_ctx *ctx, cudaStream_t s, const float *XT,
						 int64_t n, int d, int k, uint64_t seed,
						 uint64_t stream, float *C, int64_t *chosen,
						 gc_status *st);

/* Mean over features of the population variance, as gc_km_mean_variance. */
gc_code		km_mean_variance_device(cudaStream_t s, const float *XT, int64_t n,
									int d, double *out, gc_status *st);

#endif
