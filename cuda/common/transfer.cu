/*
 * transfer.cu — host <-> device copies of large pageable buffers.
 *
 * A copy from pageable memory goes through the driver's own staging, one
 * thread at a time: 80 MB took 15 ms on the H100 machine, as long as the
 * clustering.  Here the host copies each 4 MiB chunk into one slot of a
 * pinned ring (gc_copy: the call's own OpenMP threads) while the copy
 * engine moves the chunk before it, so the two overlap and each runs near
 * its own speed.
 *
 * The ring (XFER_SLOTS x XFER_SLOT bytes) is allocated on first use and kept
 * for the life of the process; each slot has an event recorded after the
 * copy that uses it, and a copy into a slot first waits for it.  The events
 * are blocking-sync: a waiting thread sleeps, never spins on a core that
 * another backend wants.  Small copies, a second thread of the process
 * that finds the ring busy, a device other than the ring's, and a process
 * where the pinned allocation failed use one plain cudaMemcpyAsync.
 */
#include <mutex>

#include <cuda_runtime.h>

#include "common/gpu.h"
#include "transfer.cuh"

#define XFER_SLOT ((size_t) 4 << 20)
#define XFER_SLOTS 4
#define XFER_DIRECT ((size_t) 1 << 20)	/* below this, one plain copy */
#define XFER_MAX_THREADS 8		/* host copy bandwidth is saturated by then */

static struct
{
	char	   *buf;			/* XFER_SLOTS * XFER_SLOT pinned bytes */
	cudaEvent_t ev[XFER_SLOTS];
	int			device;
	bool		tried;			/* allocation attempted (ok or not) */
} ring;
static std::mutex ring_mu;

/* The ring, allocated on first use; false when it cannot be had. */
static bool
ring_ready(void)
{
	int			dev = -1;

	if (cudaGetDevice(&dev) != cudaSuccess)
	{
		cudaGetLastError();
		return false;
	}
	if (!ring.tried)
	{
		ring.tried = true;
		ring.device = dev;
		if (cudaHostAlloc((void **) &ring.buf, XFER_SLOTS * XFER_SLOT,
						  cudaHostAllocPortable) != cudaSuccess)
		{
			cudaGetLastError();
			ring.buf = nullptr;
			return false;
		}
		for (int b = 0; b < XFER_SLOTS; b++)
			if (cudaEventCreateWithFlags(&ring.ev[b], cudaEventBlockingSync |
										 cudaEventDisableTiming) != cudaSuccess)
			{
				cudaGetLastError();
				for (int c = 0; c < b; c++)
					cudaEventDestroy(ring.ev[c]);
				cudaFreeHost(ring.buf);
				ring.buf = nullptr;
				return false;
			}
	}
	return ring.buf != nullptr && ring.device == dev;
}

static int
copy_threads(int host_threads)
{
	if (host_threads < 1)
		return 1;
	return host_threads < XFER_MAX_THREADS ? host_threads : XFER_MAX_THREADS;
}

cudaError_t
gc_xfer_h2d(void *dst, const void *src, size_t bytes, cudaStream_t s,
			int host_threads)
{
	std::unique_lock<std::mutex> lock(ring_mu, std::try_to_lock);
	const int	T = copy_threads(host_threads);
	cudaError_t e = cudaSuccess;

	if (bytes < XFER_DIRECT || !lock.owns_lock() || !ring_ready())
		return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s);
	for (size_t off = 0, i = 0; off < bytes && e == cudaSuccess; off += XFER_SLOT, i++)
	{
		const int	b = (int) (i % XFER_SLOTS);
		const size_t len = bytes - off < XFER_SLOT ? bytes - off : XFER_SLOT;
		char	   *slot = ring.buf + (size_t) b * XFER_SLOT;

		e = cudaEventSynchronize(ring.ev[b]);	/* the slot's last copy is done */
		if (e != cudaSuccess)
			break;
		gc_copy(slot, (const char *) src + off, len, T);
		e = cudaMemcpyAsync((char *) dst + off, slot, len, cudaMemcpyHostToDevice, s);
		if (e == cudaSuccess)
			e = cudaEventRecord(ring.ev[b], s);
	}
	return e;
}

cudaError_t
gc_xfer_d2h(void *dst, const void *src, size_t bytes, cudaStream_t s,
			int host_threads)
{
	std::unique_lock<std::mutex> lock(ring_mu, std::try_to_lock);
	const int	T = copy_threads(host_threads);
	const size_t nchunks = (bytes + XFER_SLOT - 1) / XFER_SLOT;
	cudaError_t e = cudaSuccess;

	if (bytes < XFER_DIRECT || !lock.owns_lock() || !ring_ready())
	{
		e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s);
		return e == cudaSuccess ? cudaStreamSynchronize(s) : e;
	}

	/* chunk i into slot i % XFER_SLOTS, once that slot's last copy is done */
	auto		enqueue = [&](size_t i) -> cudaError_t {
		const int	b = (int) (i % XFER_SLOTS);
		const size_t off = i * XFER_SLOT;
		const size_t len = bytes - off < XFER_SLOT ? bytes - off : XFER_SLOT;
		cudaError_t ee = cudaEventSynchronize(ring.ev[b]);

		if (ee == cudaSuccess)
			ee = cudaMemcpyAsync(ring.buf + (size_t) b * XFER_SLOT,
								 (const char *) src + off, len,
								 cudaMemcpyDeviceToHost, s);
		if (ee == cudaSuccess)
			ee = cudaEventRecord(ring.ev[b], s);
		return ee;
	};

	for (size_t i = 0; i < nchunks && i < XFER_SLOTS && e == cudaSuccess; i++)
		e = enqueue(i);
	for (size_t i = 0; i < nchunks && e == cudaSuccess; i++)
	{
		const int	b = (int) (i % XFER_SLOTS);
		const size_t off = i * XFER_SLOT;
		const size_t len = bytes - off < XFER_SLOT ? bytes - off : XFER_SLOT;

		e = cudaEventSynchronize(ring.ev[b]);
		if (e != cudaSuccess)
			break;
		gc_copy((char *) dst + off, ring.buf + (size_t) b * XFER_SLOT, len, T);
		if (i + XFER_SLOTS < nchunks)
			e = enqueue(i + XFER_SLOTS);
	}
	return e;
}
