/*
 * transfer.cu — host <-> device copies of large pageable buffers.
 *
 * A copy from pageable memory goes through the driver's own staging, one
 * thread at a time: 80 MB took 15 ms on the H100 machine, as long as the
 * clustering.  Here the copy is cut into chunks of XFER_SLOT bytes, each
 * going through one slot of a pinned ring, and the call's team of host
 * threads (gc_team_run) moves them: thread t takes chunks t, t + W, t + 2W
 * ... (W working threads) and its own slots of the ring, copies a chunk
 * between the pageable buffer and its slot while the copy engine moves
 * the others, and itself queues the engine's copy of the chunk and the
 * slot's event after it.  So no thread waits for another, the host side
 * runs at the memory bandwidth of W threads, and the engine always has
 * chunks queued.  A download of
 * several arrays (gc_xfer_d2h_many) is one such pipeline: the chunks of
 * every array in turn; a download of flagged words (gc_xfer_d2h_flagged)
 * splits each chunk into its values and flags as it leaves the ring.
 *
 * Each device has its ring (XFER_SLOTS x XFER_SLOT bytes), allocated on its
 * first use and kept for the life of the process (the GPU worker's process
 * copies to several devices at once); each slot has an event recorded after the
 * copy that uses it, and a copy into a slot first waits for it
 * (gc_event_wait: asked for half a millisecond, as every wait of a call
 * is, then slept on; the events are blocking-sync, so a long wait never
 * holds a core that another backend wants).  Small copies (but flagged
 * words, which go through the ring on the calling thread alone), a second
 * thread of the process that finds its device's ring busy, a device
 * numbered XFER_DEVICES or more, and a device whose pinned allocation
 * failed use one plain cudaMemcpyAsync.
 */
#include <atomic>
#include <mutex>
#include <vector>

#include <string.h>

#include <cuda_runtime.h>

#include "common/gpu.h"
#include "common/check.cuh"
#include "transfer.cuh"

#define XFER_SLOT ((size_t) 1 << 20)
#define XFER_SLOTS 32
#define XFER_DIRECT ((size_t) 1 << 20)	/* below this, one plain copy */
/*
 * Working threads of a copy: uploads are bound by the host's memory
 * bandwidth from about 8, but a download into fresh memory also takes its
 * page faults, which more threads share (two H200s, 32 cores: a DBSCAN
 * call split over both brought 200M rows' labels and flags down in 19-20
 * ms with 16 a GPU, 26 with 8; one GPU a k-means's 200M labels and
 * distances in 64 ms against 101); two slots a thread.
 */
#define XFER_MAX_THREADS 16
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
ring_of_device(int *device)
{
	int			dev = -1;

	if (cudaGetDevice(&dev) != cudaSuccess)
	{
		cudaGetLastError();
		return nullptr;
	}
	*device = dev;
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

/* Whether copies take the rings (tests: false, as if every ring were busy) */
static std::atomic<bool> rings_on {true};

void
gc_xfer_rings_on(bool on)
{
	rings_on.store(on);
}

/* The current device's ring, locked in lock, when it is free and ready. */
static xfer_ring *
take_ring(std::unique_lock<std::mutex> &lock, int *device)
{
	xfer_ring  *r = ring_of_device(device);

	if (r == nullptr || !rings_on.load(std::memory_order_relaxed))
		return nullptr;
	lock = std::unique_lock<std::mutex>(r->mu, std::try_to_lock);
	return lock.owns_lock() && ring_ready(r) ? r : nullptr;
}

/*
 * One chunk of a copy: bytes from src to dst, one side on the device.  A
 * chunk of flagged words (gc_xfer_d2h_flagged) also has flags: its words
 * are split on the way out, the values to dst and the flags there.
 */
struct xfer_chunk
{
	char	   *dst;
	const char *src;
	size_t		len;
	uint8_t    *flags;
};

/* n flagged words into their values and flags; w may be values itself */
static void
xfer_unflag(int32_t *values, uint8_t *flags, const uint32_t *w, size_t n)
{
	for (size_t i = 0; i < n; i++)
	{
		const uint32_t x = w[i];

		values[i] = gc_flagged_value(x);
		flags[i] = gc_flagged_flag(x);
	}
}

/*
 * The chunks of a copy, at most XFER_SLOT bytes each (none spans two
 * segments), and the threads that move them through a locked ring:
 * working thread t (t < W) takes chunks t, t + W ... and slots t, t + W
 * ... (S of them in all, a multiple of W), so chunk i goes through slot
 * i % S and a slot's last use was the same thread's.
 */
struct xfer_job
{
	xfer_ring  *ring;
	int			device;
	cudaStream_t s;
	bool		up;				/* host to device */
	std::vector<xfer_chunk> chunks;
	int			W;				/* working threads */
	int			S;				/* slots used */
	std::atomic<int> err{cudaSuccess};	/* the first error */

	xfer_job(xfer_ring *r, int dev, cudaStream_t st, bool h2d)
		: ring(r), device(dev), s(st), up(h2d), W(0), S(0)
	{
	}

	/* flags: where the flags of words go (gc_xfer_d2h_flagged), or nullptr */
	void		add(void *dst, const void *src, size_t bytes, uint8_t *flags = nullptr)
	{
		for (size_t off = 0; off < bytes; off += XFER_SLOT)
			chunks.push_back({(char *) dst + off, (const char *) src + off,
							  bytes - off < XFER_SLOT ? bytes - off : XFER_SLOT,
			flags ? flags + off / sizeof(uint32_t) : nullptr});
	}

	/* W and S for a team of threads */
	void		plan(int team)
	{
		const size_t nc = chunks.size();

		W = team < XFER_MAX_THREADS ? team : XFER_MAX_THREADS;
		if (W < 1)
			W = 1;
		if ((size_t) W > nc)
			W = (int) (nc > 0 ? nc : 1);
		S = XFER_SLOTS / W * W;
	}

	char	   *slot(size_t i) const
	{
		return ring->buf + (i % (size_t) S) * XFER_SLOT;
	}

	cudaEvent_t ev(size_t i) const
	{
		return ring->ev[i % (size_t) S];
	}

	/* the engine's copy of chunk i (through its slot), then the slot's event */
	cudaError_t queue(size_t i) const
	{
		const xfer_chunk &c = chunks[i];
		cudaError_t e = up ?
			cudaMemcpyAsync(c.dst, slot(i), c.len, cudaMemcpyHostToDevice, s) :
			cudaMemcpyAsync(slot(i), c.src, c.len, cudaMemcpyDeviceToHost, s);

		return e == cudaSuccess ? cudaEventRecord(ev(i), s) : e;
	}

	void		fail(cudaError_t e)
	{
		int			ok = cudaSuccess;

		err.compare_exchange_strong(ok, (int) e);
	}

	bool		failed() const
	{
		return err.load() != cudaSuccess;
	}

	/*
	 * Thread t's chunks up: wait for the slot, fill it, queue its copy.
	 * Down: its first S / W chunks queued at once, then each in turn
	 * waited for, copied out of its slot, and the slot given the thread's
	 * chunk S / W further on.
	 */
	void		run(int t)
	{
		const size_t nc = chunks.size(),
					step = (size_t) W,
					ahead = (size_t) S;
		cudaError_t e;

		if ((e = cudaSetDevice(device)) != cudaSuccess)
		{
			fail(e);
			return;
		}
		if (up)
		{
			for (size_t i = t; i < nc && !failed(); i += step)
			{
				if ((e = gc_event_wait(ev(i))) == cudaSuccess)
				{
					memcpy(slot(i), chunks[i].src, chunks[i].len);
					e = queue(i);
				}
				if (e != cudaSuccess)
					fail(e);
			}
			return;
		}
		for (size_t i = t; i < nc && i < ahead && !failed(); i += step)
			if ((e = gc_event_wait(ev(i))) != cudaSuccess || (e = queue(i)) != cudaSuccess)
				fail(e);
		for (size_t i = t; i < nc && !failed(); i += step)
		{
			if ((e = gc_event_wait(ev(i))) == cudaSuccess)
			{
				const xfer_chunk &c = chunks[i];

				if (c.flags != nullptr)
					xfer_unflag((int32_t *) c.dst, c.flags, (const uint32_t *) slot(i),
								c.len / sizeof(uint32_t));
				else
					memcpy(c.dst, slot(i), c.len);
				if (i + ahead < nc)
					e = queue(i + ahead);
			}
			if (e != cudaSuccess)
				fail(e);
		}
	}

	static void run_thread(void *arg, int t, int team)
	{
		xfer_job   *j = (xfer_job *) arg;

		(void) team;
		if (t < j->W)
			j->run(t);
	}
};

/*
 * The copy of job's chunks through its ring on a region of team threads
 * (the team itself, so libgomp's pool keeps its size: core.h's
 * gc_team_adapt; at most XFER_MAX_THREADS of them work).  A failed copy
 * leaves the stream's later work to see the error; the slots' events are
 * waited for before the ring is given back, so no later copy overwrites a
 * slot the engine still reads or writes.
 */
static cudaError_t
xfer_run(xfer_job &job, int team)
{
	cudaError_t e;

	job.plan(team);
	gc_team_run(team < 1 ? 1 : team, xfer_job::run_thread, &job);
	e = (cudaError_t) job.err.load();
	if (e != cudaSuccess)
		for (int b = 0; b < job.S; b++)
			(void) gc_event_wait(job.ring->ev[b]);
	return e;
}

cudaError_t
gc_xfer_h2d(void *dst, const void *src, size_t bytes, cudaStream_t s,
			int host_threads)
{
	std::unique_lock<std::mutex> lock;
	int			dev = -1;
	xfer_ring  *ring = bytes < XFER_DIRECT ? nullptr : take_ring(lock, &dev);

	if (ring == nullptr)
		return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s);

	xfer_job	job(ring, dev, s, true);

	job.add(dst, src, bytes);
	return xfer_run(job, host_threads);
}

cudaError_t
gc_xfer_d2h_many(const gc_xfer_seg *sg, int nseg, cudaStream_t s, int host_threads)
{
	std::unique_lock<std::mutex> lock;
	int			dev = -1;
	xfer_ring  *ring = nullptr;
	size_t		total = 0;
	cudaError_t e = cudaSuccess;

	/*
	 * huge pages for the destinations: a caller's fresh buffer then takes
	 * a fault per 2 MB (one H200: a k-means's 10M labels and distances,
	 * 120 MB into fresh memory, came down in 8.4 ms against 10.4, medians
	 * of five)
	 */
	for (int g = 0; g < nseg; g++)
	{
		total += sg[g].bytes;
		gc_advise_huge_pages(sg[g].dst, sg[g].bytes);
	}
	if (total >= XFER_DIRECT)
		ring = take_ring(lock, &dev);
	if (ring == nullptr)
	{
		for (int g = 0; g < nseg && e == cudaSuccess; g++)
			if (sg[g].bytes > 0)
				e = cudaMemcpyAsync(sg[g].dst, sg[g].src, sg[g].bytes,
									cudaMemcpyDeviceToHost, s);
		return e == cudaSuccess ? cudaStreamSynchronize(s) : e;
	}

	xfer_job	job(ring, dev, s, false);

	for (int g = 0; g < nseg; g++)
		job.add(sg[g].dst, sg[g].src, sg[g].bytes);
	return xfer_run(job, host_threads);
}

cudaError_t
gc_xfer_d2h_flagged(int32_t *values, uint8_t *flags, const uint32_t *src,
					size_t n, cudaStream_t s, int host_threads)
{
	std::unique_lock<std::mutex> lock;
	int			dev = -1;
	const size_t bytes = n * sizeof(uint32_t);
	xfer_ring  *ring = nullptr;

	gc_advise_huge_pages(values, bytes);
	gc_advise_huge_pages(flags, n);
	/* a small download too goes through the ring (its pinned slots hold the words), on this thread alone */
	if (n > 0)
		ring = take_ring(lock, &dev);
	if (ring == nullptr)
	{
		/* the ring busy: the words into values (as many bytes), split in place */
		cudaError_t e = n == 0 ? cudaSuccess :
			cudaMemcpyAsync(values, src, bytes, cudaMemcpyDeviceToHost, s);

		if (e == cudaSuccess)
			e = cudaStreamSynchronize(s);
		if (e == cudaSuccess)
			xfer_unflag(values, flags, (const uint32_t *) values, n);
		return e;
	}

	xfer_job	job(ring, dev, s, false);

	job.add(values, src, bytes, flags);
	return xfer_run(job, bytes < XFER_DIRECT ? 1 : host_threads);
}

cudaError_t
gc_xfer_d2h(void *dst, const void *src, size_t bytes, cudaStream_t s,
			int host_threads)
{
	const gc_xfer_seg one = {dst, src, bytes};

	return gc_xfer_d2h_many(&one, 1, s, host_threads);
}
