/*
 * multi.cuh — what a call split over several GPUs of the host needs
 * (internal to cuda/): running one step on every GPU at once, each on a
 * host thread of its own with its device current, and the caller's device
 * made current again on the way out.  The k-means (cuda/kmeans/
 * kmeans_multi.cu) and DBSCAN (cuda/dbscan/dbscan_multi.cu) splits use it.
 */
#ifndef GPUCLUST_MULTI_CUH
#define GPUCLUST_MULTI_CUH

#include <string.h>
#include <thread>

#include <cuda_runtime.h>

#include "common/check.cuh"

/* The most GPUs one call splits over. */
#define GC_GPUS_MAX 16

#pragma GCC visibility push(hidden)	/* internal to cuda/ */

/*
 * The devices dev[0 .. S) made to reach one another's memory pools (where
 * gc_dalloc allocates), once per pair in the process, so a
 * cudaMemcpyPeerAsync between their allocations goes device to device
 * (NVLink or PCIe) rather than through host memory.  A pair that cannot
 * reach each other is left as it is: the driver stages its copies
 * (device.cu).
 */
void		gc_gpus_connect(int S, const int *dev);

#pragma GCC visibility pop

/* The caller's current device (dev, which the caller reads with
 * cudaGetDevice), made current again when this goes. */
struct gc_device_kept
{
	int			dev = 0;

	~gc_device_kept()
	{
		cudaSetDevice(dev);
	}
};

/*
 * A T of each of a call's S GPUs (dev), made by its user with new; each
 * deleted with its GPU current, and dev[0] current after.
 */
template <class T>
struct gc_per_gpu
{
	int			S = 0;
	const int  *dev = nullptr;
	T		   *P[GC_GPUS_MAX] = {};

	~gc_per_gpu()
	{
		for (int s = 0; s < S; s++)
			if (P[s] != nullptr)
			{
				cudaSetDevice(dev[s]);
				delete P[s];
			}
		if (S > 0)
			cudaSetDevice(dev[0]);
	}
};

/*
 * f(s, st_s) for s = 0 .. S - 1 at once, each on a host thread of its own
 * with device dev[s] current (s = 0 on the caller's thread, which is left
 * with dev[0] current); the first failing one's status.  who names the
 * algorithm in a CUDA error's message.
 */
template <class F>
static gc_code
gc_each_gpu(int S, const int *dev, const char *who, F &&f, gc_status *st)
{
	gc_code		rc[GC_GPUS_MAX];
	gc_status	sts[GC_GPUS_MAX];
	std::thread th[GC_GPUS_MAX];
	auto		one = [&](int s) {
		cudaError_t e = cudaSetDevice(dev[s]);

		memset(&sts[s], 0, sizeof(sts[s]));
		rc[s] = e != cudaSuccess ? gc_cuda_fail(&sts[s], e, who, "selecting a GPU") : f(s, &sts[s]);
	};

	for (int s = 1; s < S; s++)
	{
		try
		{
			th[s] = std::thread(one, s);
		}
		catch (...)
		{
			one(s);				/* no thread to be had: in turn */
		}
	}
	one(0);
	for (int s = 1; s < S; s++)
		if (th[s].joinable())
			th[s].join();
	for (int s = 0; s < S; s++)
		if (rc[s] != GC_OK)
		{
			*st = sts[s];
			return rc[s];
		}
	return GC_OK;
}

#endif							/* GPUCLUST_MULTI_CUH */
