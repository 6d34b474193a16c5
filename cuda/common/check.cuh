/*
 * check.cuh — the one mapping of a CUDA error to the core's gc_code, for
 * every GPU algorithm (internal to cuda/): an allocation failure is
 * GC_ENOMEM, anything else GC_EDEVICE, and the message names the algorithm,
 * the error and the call.  A non-sticky error is cleared, so the process
 * can go on using the GPU.  Also each call's device resources (gc_dev),
 * its stop flag, and the wait for its stream that polls the cancel flags
 * (gc_sync_poll; stop.cu).
 */
#ifndef GPUCLUST_CHECK_CUH
#define GPUCLUST_CHECK_CUH

#include <stdint.h>
#include <vector>

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

/*
 * Device memory of a call comes from the device's memory pool, in the
 * order of the call's stream s (cudaMallocAsync / cudaFreeAsync): no
 * allocation or release waits for the whole device, so calls on other
 * streams (the GPU worker's jobs) run on, and a process that asked to keep
 * memory (gc_cuda_keep_memory: the worker) reuses it from call to call.
 * Every use of such memory is on s, or on the host after s synchronised.
 */
static inline cudaError_t
gc_dalloc(void **p, size_t bytes, cudaStream_t s)
{
	return cudaMallocAsync(p, bytes > 0 ? bytes : 1, s);
}

static inline void
gc_dfree(void *p, cudaStream_t s)
{
	if (p != nullptr)
		cudaFreeAsync(p, s);
}

/*
 * Lets kernel func take on the current device as much dynamic shared
 * memory as the device allows it (its opt-in maximum less the kernel's
 * static shared memory), before a launch with more than 48 KiB.  A
 * kernel's attribute is one for the whole process: calls that each set
 * the size they launch with would lower it under one another's launches
 * (the GPU worker runs several calls at once), so every call sets this
 * one value, and the size of each launch is its own.
 */
static inline cudaError_t
gc_allow_dynamic_smem(const void *func)
{
	cudaFuncAttributes fa;
	int			dev = 0,
				optin = 0;
	cudaError_t e = cudaGetDevice(&dev);

	if (e == cudaSuccess)
		e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
	if (e == cudaSuccess)
		e = cudaFuncGetAttributes(&fa, func);
	if (e == cudaSuccess)
		e = cudaFuncSetAttribute(func, cudaFuncAttributeMaxDynamicSharedMemorySize,
								 optin - (int) fa.sharedSizeBytes);
	return e;
}

#pragma GCC visibility push(hidden)

/*
 * A call's stop flag: an int in device memory, 0 from the call's start,
 * that its long kernels read while they run (gc_stopped, in L2), raised by
 * a copy on a stream of its own (s), which the copy engine runs
 * beside the call's kernels.
 */
struct gc_stop
{
	int		   *flag = nullptr;
	cudaStream_t s = nullptr;
};

/*
 * Wait for stream s without holding a CPU core, polling ctx's cancel flags
 * about every millisecond while it runs; when they are raised, raise stop's
 * flag (when it has one), set *cancelled and go on waiting: the kernels
 * that read it end early, the rest run out.  The stream's status
 * (stop.cu).
 */
cudaError_t gc_stream_wait(cudaStream_t s, const gc_ctx *ctx,
						   const gc_stop *stop, bool *cancelled);

/*
 * Wait for event ev (created blocking-sync): asked for GC_WAIT_SPIN_MS, as
 * gc_stream_wait does, then slept on, so a short wait ends when the work
 * does and not when the thread is woken (stop.cu).
 */
cudaError_t gc_event_wait(cudaEvent_t ev);

/*
 * The pinned 1 that raises a stop flag, allocated at the first call of the
 * process (stop.cu): made before a call's kernels run, since a page-locked
 * allocation waits for them.  Pageable memory when none can be pinned.
 */
const int  *gc_stop_one(void);

/*
 * A slot of GC_PIN_WORDS pinned 64-bit words for one call, allocated with
 * the pinned 1 (stop.cu); NULL when none is free or none could be pinned.
 * gc_pin_release gives it back once nothing copies into it.
 */
#define GC_PIN_WORDS 8
uint64_t   *gc_pin_claim(void);
void		gc_pin_release(uint64_t *w);

#pragma GCC visibility pop

/*
 * The device resources of one call, released on every path out of it
 * (release(), or the destructor after an error): the stream, each
 * allocation, the CUB scratch, the stop flag, the pinned words.  Time
 * spent allocating is added to *ms_alloc when the call sets it.  drop()
 * releases one allocation early.
 */
struct gc_dev
{
	cudaStream_t s = nullptr;
	std::vector<void *> allocs;
	void	   *cub_tmp = nullptr;
	size_t		cub_bytes = 0;
	int			host_threads = 1;	/* for the host side of transfers */
	double	   *ms_alloc = nullptr;
	gc_stop		stop;			/* the stop flag, once asked for */
	bool		stop_none = false;	/* none could be had */
	uint64_t   *pin = nullptr;	/* the call's pinned words, once asked for */
	bool		pin_asked = false;

	~gc_dev()
	{
		release();
	}

	void		release()
	{
		if (s)
			cudaStreamSynchronize(s);
		if (stop.s)
		{
			cudaStreamSynchronize(stop.s);
			cudaStreamDestroy(stop.s);
		}
		stop = gc_stop();
		gc_pin_release(pin);
		pin = nullptr;
		pin_asked = false;
		for (void *p : allocs)
			gc_dfree(p, s);
		allocs.clear();
		gc_dfree(cub_tmp, s);
		cub_tmp = nullptr;
		cub_bytes = 0;
		if (s)
			cudaStreamDestroy(s);
		s = nullptr;
	}

	/*
	 * The call's stop flag for its kernels (gc_stopped), made at the
	 * first ask, 0 in stream order; gc_sync_poll raises it on a cancel.
	 * NULL when it cannot be had: the kernels then run to their end, and
	 * the cancel is seen between launches.
	 */
	const volatile int *stop_flag()
	{
		if (stop.flag == nullptr && !stop_none)
		{
			/* the pinned 1 first: a page-locked allocation waits for kernels */
			(void) gc_stop_one();
			if (alloc(stop.flag, 1) != cudaSuccess ||
				cudaMemsetAsync(stop.flag, 0, sizeof(int), s) != cudaSuccess ||
				cudaStreamCreateWithFlags(&stop.s, cudaStreamNonBlocking) != cudaSuccess)
			{
				cudaGetLastError();
				if (stop.s)
					cudaStreamDestroy(stop.s);
				stop = gc_stop();
				stop_none = true;
			}
		}
		return stop.flag;
	}

	/*
	 * The call's GC_PIN_WORDS pinned words (gc_pin_claim), claimed at the
	 * first ask: ask before the call's first launch, since the process's
	 * first ask pins memory, which waits for the device.  NULL when none.
	 */
	uint64_t   *pinned()
	{
		if (!pin_asked)
		{
			pin_asked = true;
			pin = gc_pin_claim();
		}
		return pin;
	}

	template <typename T>
	cudaError_t alloc(T *&p, int64_t count)
	{
		void	   *v = nullptr;
		double		t0 = gc_now_ms();
		cudaError_t e = gc_dalloc(&v, sizeof(T) * (size_t) (count > 0 ? count : 1), s);

		timed(t0);
		if (e == cudaSuccess)
			allocs.push_back(v);
		p = (T *) v;
		return e;
	}

	void		drop(void *p)
	{
		for (size_t x = 0; x < allocs.size(); x++)
			if (allocs[x] == p)
			{
				gc_dfree(p, s);
				allocs.erase(allocs.begin() + x);
				return;
			}
	}

	/* CUB scratch of at least bytes. */
	cudaError_t scratch(size_t bytes)
	{
		if (bytes <= cub_bytes)
			return cudaSuccess;
		double		t0 = gc_now_ms();

		gc_dfree(cub_tmp, s);
		cub_tmp = nullptr;
		cub_bytes = 0;
		cudaError_t e = gc_dalloc(&cub_tmp, bytes, s);

		timed(t0);
		if (e == cudaSuccess)
			cub_bytes = bytes;
		return e;
	}

private:
	void		timed(double t0)
	{
		if (ms_alloc != nullptr)
			*ms_alloc += gc_now_ms() - t0;
	}
};

/*
 * Wait for D's stream, polling the cancel flags while it runs and once
 * more at its end: what a call does between its phases and launches.  A
 * cancel raises D's stop flag, waits for the stream to drain (the kernels
 * that read the flag end early, their results partial) and returns
 * GC_ECANCEL, so the caller returns at once and reads nothing of them.
 * who names the algorithm in a CUDA error's message.
 */
static inline gc_code
gc_sync_poll(gc_dev &D, const gc_ctx *ctx, const char *who, gc_status *st)
{
	bool		cancelled;

	GC_CUDA_CK(who, gc_stream_wait(D.s, ctx, &D.stop, &cancelled));
	if (cancelled || gc_cancelled(ctx))
		return gc_fail(st, GC_ECANCEL, "canceled");
	return GC_OK;
}

/*
 * In a kernel: whether the call's stop flag (gc_dev::stop_flag; NULL:
 * never) is raised.  A read of L2 past the L1: once per many steps of a
 * walk, not per step.
 */
__device__ __forceinline__ bool
gc_stopped(const volatile int *flag)
{
	return flag != nullptr && *flag != 0;
}

/*
 * gc_stopped, the same answer on every lane of the warp (every lane calls
 * it), so the warp can leave a loop whose steps it syncs as one.
 */
__device__ __forceinline__ bool
gc_warp_stopped(const volatile int *flag)
{
	return flag != nullptr && __any_sync(0xffffffffu, gc_stopped(flag));
}

#endif							/* GPUCLUST_CHECK_CUH */
