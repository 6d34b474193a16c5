/*
 * transfer.cu — host <-> device copies of large pageable buffers.
 *
 * A copy from pageable memory goes through the driver's own staging, one
 * thread at a time: 80 MB took 15 ms on the H100 machine, as long as the
 * clustering.  Here the host copies each 4 MiB chunk into one slot of a
 * pinned ring (gc_copy: the call's own OpenMP threads) while the copy
 * engine moves the chunk before it, so the two overlap and each runs near
 * its own speed.  A download of several arrays (gc_xfer_d2h_many) is one
 * such pipeline: the engine goes on from one array's last chunk to the
 * next array's first without waiting for the host.
 *
 * Each device has its ring (XFER_SLOTS x XFER_SLOT bytes), allocated on its
 * first use and kept for the life of the process (the GPU worker's process
 * copies to several devices at once); each slot has an event recorded after the
 * copy that uses it, and a copy into a slot first waits for it
 * (gc_event_wait: asked for half a millisecond, as every wait of a call
 * is, then slept on; the events are blocking-sync, so a long wait never
 * holds a core that another backend wants).  Small copies, a second thread of the process
 * that finds its device's ring busy, a device numbered XFER_DEVICES or
 * more, and a device whose pinned allocation failed use one plain
 * cudaMemcpyAsync.
 */
#include <mutex>

#include <cuda_runtime.h>

#include "common/gpu.h"
#include "common/check.cuh"
#include "transfer.cuh"

#define XFER_SLOT ((size_t) 4 << 20)
#define XFER_SLOTS 4
#define XFER_DIRECT ((size_t) 1 << 20)	/* below this, one plain copy */
#define XFER_MAX_THREADS 8		/* host copy bandwidth is saturated by then */
#define XFER_DEVICES 16			/* devices with a ring */

struct xfer_ring
{
	char	   *buf;			/* XFER_SLOTS * XFER_SLOT pinned bytes */
	cudaEvent_t ev[XFER_SLOTS];	/* of the ring's device */
	bool		tried;			/* allocation attempted (ok or not) */
	std::mutex	mu;				/* one copy at a time */
};
static xfer_ring rings[XFER_DEVICES];

/* The current device's ring (nullptr: none), allocated on its first use. */
static xfer_ring *
ring_of_device(void)
{
	int			dev = -1;

	if (cudaGetDevice(&dev) != cudaSuccess)
	{
		cudaGetLastError();
		return nullptr;
	}
	return dev >= 0 && dev < XFER_DEVICES ? &rings[dev] : nullptr;
}

/* Whether ring r (locked by the caller) has its buffer and events. */
static bool
ring_ready(xfer_ring *r)
{
	if (!r->tried)
	{
		r->tried = true;
		if (cudaHostAlloc((void **) &r->buf, XFER_SLOTS * XFER_SLOT,
						  cudaHostAllocPortable) != cudaSuccess)
		{
			cudaGetLastError();
			r->buf = nullptr;
			return false;
		}
		for (int b = 0; b < XFER_SLOTS; b++)
			if (cudaEventCreateWithFlags(&r->ev[b], cudaEventBlockingSync |
										 cudaEventDisableTiming) != cudaSuccess)
			{
				cudaGetLastError();
				for (int c = 0; c < b; c++)
					cudaEventDestroy(r->ev[c]);
				cudaFreeHost(r->buf);
				r->buf = nullptr;
				return false;
			}
	}
	return r->buf != nullptr;
}

/* The current device's ring, locked in lock, when it is free and ready. */
static xfer_ring *
take_ring(std::unique_lock<std::mutex> &lock)
{
	xfer_ring  *r = ring_of_device();

	if (r == nullptr)
		return nullptr;
	lock = std::unique_lock<std::mutex>(r->mu, std::try_to_lock);
	return lock.owns_lock() && ring_ready(r) ? r : nullptr;
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
	std::unique_lock<std::mutex> lock;
	xfer_ring  *ring = bytes < XFER_DIRECT ? nullptr : take_ring(lock);
	const int	T = copy_threads(host_threads);
	cudaError_t e = cudaSuccess;

	if (ring == nullptr)
		return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s);
	for (size_t off = 0, i = 0; off < bytes && e == cudaSuccess; off += XFER_SLOT, i++)
	{
		const int	b = (int) (i % XFER_SLOTS);
		const size_t len = bytes - off < XFER_SLOT ? bytes - off : XFER_SLOT;
		char	   *slot = ring->buf + (size_t) b * XFER_SLOT;

		e = gc_event_wait(ring->ev[b]);	/* the slot's last copy is done */
		if (e != cudaSuccess)
			break;
		gc_copy(slot, (const char *) src + off, len, T);
		e = cudaMemcpyAsync((char *) dst + off, slot, len, cudaMemcpyHostToDevice, s);
		if (e == cudaSuccess)
			e = cudaEventRecord(ring->ev[b], s);
	}
	return e;
}

/*
 * A place in a list of segments: segment seg, offset off; norm moves it
 * past the segments it has used up (and the empty ones) to the next chunk.
 */
struct xfer_pos
{
	int			seg = 0;
	size_t		off = 0;

	void		norm(const gc_xfer_seg *sg, int nseg)
	{
		while (seg < nseg && off >= sg[seg].bytes)
		{
			seg++;
			off = 0;
		}
	}

	bool		more(int nseg) const
	{
		return seg < nseg;
	}

	/* the length of the chunk here: the rest of the segment, at most a slot */
	size_t		len(const gc_xfer_seg *sg) const
	{
		return sg[seg].bytes - off < XFER_SLOT ? sg[seg].bytes - off : XFER_SLOT;
	}
};

cudaError_t
gc_xfer_d2h_many(const gc_xfer_seg *sg, int nseg, cudaStream_t s, int host_threads)
{
	std::unique_lock<std::mutex> lock;
	xfer_ring  *ring = nullptr;
	const int	T = copy_threads(host_threads);
	size_t		total = 0;
	cudaError_t e = cudaSuccess;

	for (int g = 0; g < nseg; g++)
		total += sg[g].bytes;
	if (total >= XFER_DIRECT)
		ring = take_ring(lock);
	if (ring == nullptr)
	{
		for (int g = 0; g < nseg && e == cudaSuccess; g++)
			if (sg[g].bytes > 0)
				e = cudaMemcpyAsync(sg[g].dst, sg[g].src, sg[g].bytes,
									cudaMemcpyDeviceToHost, s);
		return e == cudaSuccess ? cudaStreamSynchronize(s) : e;
	}

	/*
	 * The chunks of every segment in turn (none spans two), the i-th into
	 * slot i % XFER_SLOTS: put walks the chunks the copy engine is given,
	 * get the ones the host copies out, XFER_SLOTS behind put once the
	 * ring is full.  Chunk i + XFER_SLOTS is queued as soon as chunk i is
	 * out of its slot, so the engine always has the next ones, across the
	 * segments' boundaries too.
	 */
	xfer_pos	put,
				get;
	size_t		np = 0,
				ng = 0;
	auto		enqueue = [&]() -> cudaError_t {
		const int	b = (int) (np % XFER_SLOTS);
		const size_t len = put.len(sg);
		cudaError_t ee = gc_event_wait(ring->ev[b]);	/* the slot is free */

		if (ee == cudaSuccess)
			ee = cudaMemcpyAsync(ring->buf + (size_t) b * XFER_SLOT,
								 (const char *) sg[put.seg].src + put.off, len,
								 cudaMemcpyDeviceToHost, s);
		if (ee == cudaSuccess)
			ee = cudaEventRecord(ring->ev[b], s);
		put.off += len;
		put.norm(sg, nseg);
		np++;
		return ee;
	};

	put.norm(sg, nseg);
	get.norm(sg, nseg);
	while (np < XFER_SLOTS && put.more(nseg) && e == cudaSuccess)
		e = enqueue();
	while (get.more(nseg) && e == cudaSuccess)
	{
		const int	b = (int) (ng % XFER_SLOTS);
		const size_t len = get.len(sg);

		e = gc_event_wait(ring->ev[b]);
		if (e != cudaSuccess)
			break;
		gc_copy((char *) sg[get.seg].dst + get.off, ring->buf + (size_t) b * XFER_SLOT, len, T);
		get.off += len;
		get.norm(sg, nseg);
		ng++;
		if (put.more(nseg))
			e = enqueue();		/* chunk ng - 1 + XFER_SLOTS, into slot b */
	}
	return e;
}

cudaError_t
gc_xfer_d2h(void *dst, const void *src, size_t bytes, cudaStream_t s,
			int host_threads)
{
	const gc_xfer_seg one = {dst, src, bytes};

	return gc_xfer_d2h_many(&one, 1, s, host_threads);
}
