/*
 * transfer.cuh — copies between pageable host memory and the device through
 * a small pinned ring kept for the life of the process (transfer.cu).
 * Internal to cuda/.
 */
#ifndef GPUCLUST_TRANSFER_CUH
#define GPUCLUST_TRANSFER_CUH

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(hidden)	/* internal to cuda/ */

/*
 * bytes from host src to device dst on stream s.  host_threads threads copy
 * each chunk into the ring while the copy engine moves the one before.
 * Returns once every byte of src has been read; the device copy completes
 * in stream order.
 */
cudaError_t gc_xfer_h2d(void *dst, const void *src, size_t bytes,
						cudaStream_t s, int host_threads);

/* One piece of a download: bytes from device src to host dst. */
struct gc_xfer_seg
{
	void	   *dst;
	const void *src;
	size_t		bytes;
};

/*
 * The nseg segments (any sizes, 0 too) from the device after the work
 * queued on s, in one pipeline: their chunks follow each other through
 * the ring, so the copy engine moves the next ones, the next segment's
 * too, while host_threads threads copy one out.  Returns once every dst
 * holds its bytes.
 */
cudaError_t gc_xfer_d2h_many(const gc_xfer_seg *seg, int nseg,
							 cudaStream_t s, int host_threads);

/*
 * A flagged word: a value >= -1 plus one in its low 31 bits and a flag in
 * bit 31 (the GPU DBSCAN's label or root and core flag of a row).
 */
__host__ __device__ __forceinline__ uint32_t
gc_flagged_word(int32_t value, bool flag)
{
	return (uint32_t) (value + 1) | (flag ? 0x80000000u : 0u);
}

__host__ __device__ __forceinline__ int32_t
gc_flagged_value(uint32_t w)
{
	return (int32_t) (w & 0x7fffffffu) - 1;
}

__host__ __device__ __forceinline__ bool
gc_flagged_flag(uint32_t w)
{
	return (w >> 31) != 0;
}

/*
 * n flagged words from device src down into values and flags (0 or 1),
 * in one pipeline: a fifth fewer bytes over the bus than the two arrays.
 * Returns once both hold every row.
 */
cudaError_t gc_xfer_d2h_flagged(int32_t *values, uint8_t *flags,
								const uint32_t *src, size_t n, cudaStream_t s,
								int host_threads);

/* gc_xfer_d2h_many of one segment: bytes from device src to host dst. */
cudaError_t gc_xfer_d2h(void *dst, const void *src, size_t bytes,
						cudaStream_t s, int host_threads);

/* Tests: on false, copies go as when their ring is busy (plain copies). */
void		gc_xfer_rings_on(bool on);

#pragma GCC visibility pop

#endif							/* GPUCLUST_TRANSFER_CUH */
