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
#include <atomic>
#include <mutex>
#include <sys/prctl.h>
#include <time.h>

#include "common/check.cuh"

#pragma GCC visibility push(hidden)

/*
 * The pinned words: GC_PIN_SLOTS slots of GC_PIN_WORDS 64-bit words after
 * the pinned 1, in the same allocation, a slot a call (gc_pin_claim) for
 * the small counts it reads between its phases: a copy into pinned memory
 * is queued before the wait that polls the cancel flags and has landed
 * when it ends, where a copy into pageable memory waits for the stream
 * by itself, after it.
 */
#define GC_PIN_SLOTS 64
static int *pin_block = nullptr;	/* the 1, then the slots */
static std::atomic<uint64_t> pin_free{~(uint64_t) 0};

const int *
gc_stop_one(void)
{
	static std::once_flag once;
	static const int pageable = 1;

	std::call_once(once, [] {
		if (cudaHostAlloc((void **) &pin_block,
						  sizeof(uint64_t) * (1 + (size_t) GC_PIN_SLOTS * GC_PIN_WORDS),
						  cudaHostAllocPortable) != cudaSuccess)
		{
			cudaGetLastError();
			pin_block = nullptr;
		}
		else
			*pin_block = 1;
	});
	return pin_block != nullptr ? pin_block : &pageable;
}

static uint64_t *
pin_slot(int b)
{
	return (uint64_t *) pin_block + 1 + (size_t) b * GC_PIN_WORDS;
}

uint64_t *
gc_pin_claim(void)
{
	uint64_t	f;

	(void) gc_stop_one();
	if (pin_block == nullptr)
		return nullptr;
	f = pin_free.load();
	while (f != 0)
	{
		const int	b = __builtin_ctzll(f);

		if (pin_free.compare_exchange_weak(f, f & ~((uint64_t) 1 << b)))
			return pin_slot(b);
	}
	return nullptr;
}

void
gc_pin_release(uint64_t *w)
{
	if (w != nullptr)
		pin_free.fetch_or((uint64_t) 1 << ((w - pin_slot(0)) / GC_PIN_WORDS));
}

/*
 * How the wait waits: it asks the stream for GC_WAIT_SPIN_MS (a kernel
 * that ends that soon is seen as soon as cudaStreamSynchronize would), then
 * sleeps between two questions a 64th of the time waited so far, from
 * GC_WAIT_NAP_MIN_MS to GC_WAIT_NAP_MAX_MS: a wait ends at most about 1.6%
 * (and the nap's timer slack) after its work, and the cancel flags are
 * polled at least every GC_WAIT_NAP_MAX_MS.  While it sleeps the thread's
 * timer slack is GC_WAIT_SLACK_NS, its own again when it ends: Linux's
 * default slack is longer than the shortest naps, which would then end
 * well after the work.
 */
#define GC_WAIT_SPIN_MS 0.5
#define GC_WAIT_NAP_MIN_MS 0.02
#define GC_WAIT_NAP_MAX_MS 1.0
#define GC_WAIT_SLACK_NS 2000

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
	int			slack = -1;		/* the thread's own, once asked */
	bool		asked = false;
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
		if (!asked)
		{
			asked = true;
			if ((slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0)) >= 0)
				prctl(PR_SET_TIMERSLACK, GC_WAIT_SLACK_NS, 0, 0, 0);
		}
		nap_ms(nap < GC_WAIT_NAP_MIN_MS ? GC_WAIT_NAP_MIN_MS :
			   nap > GC_WAIT_NAP_MAX_MS ? GC_WAIT_NAP_MAX_MS : nap);
	}
	if (slack >= 0)
		prctl(PR_SET_TIMERSLACK, slack, 0, 0, 0);
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
