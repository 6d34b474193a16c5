/*
 * stop.cu — stopping a call's kernels while they run, and waiting for a
 * stream without holding a CPU core (check.cuh).
 *
 * The stop flags are ints in one page of pinned host memory mapped into
 * the device's address space: a kernel reads its call's flag while it runs
 * (gc_stopped, gc_warp_stopped), the host raises it (gc_stream_wait).  The
 * page is allocated on first use and kept for the process, a slot handed
 * to each call that asks (gc_dev::stop_flag), because a page-locked
 * allocation or release waits for the whole device, every stream, which a
 * call must not do while others run (the GPU worker's jobs).  Portable: its
 * one device address (unified addressing) serves every device.
 */
#include <mutex>
#include <time.h>

#include "common/check.cuh"

#pragma GCC visibility push(hidden)

#define STOP_SLOTS 64			/* calls that can hold a flag at once */
#define STOP_STRIDE 16			/* ints between two flags: one 64-byte line each */

static struct
{
	int		   *host;			/* STOP_SLOTS * STOP_STRIDE ints, or NULL */
	bool		tried;			/* allocation attempted (ok or not) */
	bool		used[STOP_SLOTS];
} stop_page;
static std::mutex stop_mu;

/* The page, allocated on first use; false when it cannot be had. */
static bool
stop_page_ready(void)
{
	if (!stop_page.tried)
	{
		stop_page.tried = true;
		if (cudaHostAlloc((void **) &stop_page.host,
						  sizeof(int) * STOP_SLOTS * STOP_STRIDE,
						  cudaHostAllocMapped | cudaHostAllocPortable) != cudaSuccess)
		{
			cudaGetLastError();
			stop_page.host = nullptr;
		}
	}
	return stop_page.host != nullptr;
}

volatile int *
gc_stop_take(const volatile int **dev)
{
	std::lock_guard<std::mutex> lock(stop_mu);

	*dev = nullptr;
	if (!stop_page_ready())
		return nullptr;
	for (int i = 0; i < STOP_SLOTS; i++)
		if (!stop_page.used[i])
		{
			int		   *h = stop_page.host + i * STOP_STRIDE;
			void	   *d = nullptr;

			if (cudaHostGetDevicePointer(&d, h, 0) != cudaSuccess)
			{
				cudaGetLastError();
				return nullptr;
			}
			stop_page.used[i] = true;
			*(volatile int *) h = 0;
			*dev = (const volatile int *) d;
			return h;
		}
	return nullptr;
}

void
gc_stop_give(volatile int *flag)
{
	std::lock_guard<std::mutex> lock(stop_mu);

	if (flag != nullptr)
		stop_page.used[((int *) flag - stop_page.host) / STOP_STRIDE] = false;
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
gc_stream_wait(cudaStream_t s, const gc_ctx *ctx, volatile int *stop,
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
			if (stop != nullptr)
				*stop = 1;
		}
		nap_ms(nap < GC_WAIT_NAP_MIN_MS ? GC_WAIT_NAP_MIN_MS :
			   nap > GC_WAIT_NAP_MAX_MS ? GC_WAIT_NAP_MAX_MS : nap);
	}
	return e;
}

#pragma GCC visibility pop
