/*
 * stop.cu — waiting for a call's stream without holding a CPU core, and
 * stopping its kernels while they run (check.cuh).
 *
 * A call's stop flag lives in device memory, where its kernels read it
 * for the price of an L2 access; the host raises it by copying a 1 from
 * pinned memory on a stream of the call's own, which the copy engine runs
 * beside the kernels.  The pinned 1 is allocated once for the process: a
 * page-locked allocation waits for the whole device, every stream, which
 * a call must not do while others run (the GPU worker's jobs).
 */
#include <mutex>
#include <time.h>

#include "common/check.cuh"

#pragma GCC visibility push(hidden)

const int *
gc_stop_one(void)
{
	static std::once_flag once;
	static int *pinned = nullptr;
	static const int pageable = 1;

	std::call_once(once, [] {
		if (cudaHostAlloc((void **) &pinned, sizeof(int), cudaHostAllocPortable) != cudaSuccess)
		{
			cudaGetLastError();
			pinned = nullptr;
		}
		else
			*pinned = 1;
	});
	return pinned != nullptr ? pinned : &pageable;
}

/*
 * How the wait waits: it asks the stream for GC_WAIT_SPIN_MS (a kernel
 * that ends that soon is seen as soon as cudaStreamSynchronize would), then
 * sleeps between two questions a 64th of the time waited so far, from
 * GC_WAIT_NAP_MIN_MS to GC_WAIT_NAP_MAX_MS: a wait ends at most about 1.6%
 * (and the nap's timer slack) after its work, and the cancel flags are
 * polled at least every GC_WAIT_NAP_MAX_MS.
 */
#define GC_WAIT_SPIN_MS 0.5
#define GC_WAIT_NAP_MIN_MS 0.05
#define GC_WAIT_NAP_MAX_MS 1.0

static void
nap_ms(double ms)
{
	struct timespec ts = {0, (long) (ms * 1e6)};

	nanosleep(&ts, NULL);
}

cudaError_t
gc_stream_wait(cudaStream_t s, const gc_ctx *ctx, const gc_stop *stop,
			   bool *cancelled)
{
	const double t0 = gc_now_ms();
	cudaError_t e;

	*cancelled = false;
	while ((e = cudaStreamQuery(s)) == cudaErrorNotReady)
	{
		const double t = gc_now_ms() - t0;
		double		nap = t / 64;

		if (t < GC_WAIT_SPIN_MS)
			continue;
		if (!*cancelled && gc_cancelled(ctx))
		{
			/* the kernels that read the flag end early; the rest run out */
			*cancelled = true;
			if (stop != nullptr && stop->flag != nullptr &&
				cudaMemcpyAsync(stop->flag, gc_stop_one(), sizeof(int),
								cudaMemcpyHostToDevice, stop->s) != cudaSuccess)
				cudaGetLastError();	/* the kernels then run out */
		}
		nap_ms(nap < GC_WAIT_NAP_MIN_MS ? GC_WAIT_NAP_MIN_MS :
			   nap > GC_WAIT_NAP_MAX_MS ? GC_WAIT_NAP_MAX_MS : nap);
	}
	return e;
}

cudaError_t
gc_event_wait(cudaEvent_t ev)
{
	const double t0 = gc_now_ms();
	cudaError_t e;

	while ((e = cudaEventQuery(ev)) == cudaErrorNotReady)
		if (gc_now_ms() - t0 >= GC_WAIT_SPIN_MS)
			return cudaEventSynchronize(ev);
	return e;
}

#pragma GCC visibility pop
