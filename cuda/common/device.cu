/*
 * device.cu — probing the CUDA device: is there a driver, a device, how much
 * memory.  The first call initialises CUDA in the calling process.  Also
 * the devices' memory pools and the peer access between the GPUs of a
 * split call.
 */
#include <mutex>

#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#include "common/gpu.h"
#include "common/multi.cuh"

static bool cuda_started = false;	/* a context exists in this process */

extern "C" bool
gc_cuda_started(void)
{
	return cuda_started;
}

extern "C" void
gc_cuda_keep_memory(size_t bytes)
{
	int			dev;
	cudaMemPool_t pool;
	uint64_t	threshold = bytes;

	if (cudaGetDevice(&dev) != cudaSuccess ||
		cudaDeviceGetDefaultMemPool(&pool, dev) != cudaSuccess ||
		cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold,
								&threshold) != cudaSuccess)
		cudaGetLastError();		/* no pool: memory is released as before */
}

void
gc_gpus_connect(int S, const int *dev)
{
	static std::mutex mu;
	static bool done[GC_GPUS_MAX][GC_GPUS_MAX];
	std::lock_guard<std::mutex> lock(mu);

	for (int a = 0; a < S; a++)
		for (int b = 0; b < S; b++)
		{
			const int	x = dev[a],		/* whose memory */
						y = dev[b];		/* reaches it */
			int			can = 0;
			cudaMemPool_t pool;
			cudaMemAccessDesc desc = {};

			if (x == y || x < 0 || y < 0 || x >= GC_GPUS_MAX || y >= GC_GPUS_MAX || done[x][y])
				continue;
			done[x][y] = true;
			if (cudaDeviceCanAccessPeer(&can, y, x) != cudaSuccess || !can)
			{
				cudaGetLastError();
				continue;
			}
			desc.location.type = cudaMemLocationTypeDevice;
			desc.location.id = y;
			desc.flags = cudaMemAccessFlagsProtReadWrite;
			if (cudaDeviceGetDefaultMemPool(&pool, x) != cudaSuccess ||
				cudaMemPoolSetAccess(pool, &desc, 1) != cudaSuccess)
				cudaGetLastError();
		}
}

extern "C" void
gc_cuda_trim_memory(void)
{
	int			dev;
	cudaMemPool_t pool;

	if (cudaGetDevice(&dev) != cudaSuccess ||
		cudaDeviceGetDefaultMemPool(&pool, dev) != cudaSuccess ||
		cudaMemPoolTrimTo(pool, 0) != cudaSuccess)
		cudaGetLastError();
}

extern "C" void
gc_cuda_probe(int device_id, gc_cuda_device_info *info)
{
	memset(info, 0, sizeof(*info));
	info->device_id = device_id;
	cudaRuntimeGetVersion(&info->runtime_version);
	cudaDriverGetVersion(&info->driver_version);	/* 0 when no driver */

	cudaError_t err = cudaGetDeviceCount(&info->device_count);
	if (err != cudaSuccess)
	{
		info->device_count = 0;
		/*
		 * Without libcuda.so.1 the runtime says "CUDA driver version is
		 * insufficient for CUDA runtime version", which reads as if an
		 * upgrade would help; a driver version of 0 means there is none.
		 */
		if (info->driver_version == 0)
			snprintf(info->reason, sizeof(info->reason),
					 "no CUDA driver found (libcuda.so.1)");
		else
			snprintf(info->reason, sizeof(info->reason), "CUDA reports: %s",
					 cudaGetErrorString(err));
		cudaGetLastError();		/* clear the sticky-free error */
		return;
	}
	if (info->device_count == 0)
	{
		snprintf(info->reason, sizeof(info->reason), "no CUDA device found");
		return;
	}
	if (device_id < 0 || device_id >= info->device_count)
	{
		snprintf(info->reason, sizeof(info->reason),
				 "gpuclust.gpu_device_id is %d but only %d CUDA device(s) exist",
				 device_id, info->device_count);
		return;
	}

	cudaDeviceProp prop;
	err = cudaGetDeviceProperties(&prop, device_id);
	if (err == cudaSuccess)
		err = cudaSetDevice(device_id);
	if (err == cudaSuccess)
		err = cudaMemGetInfo(&info->free_mem, &info->total_mem);
	if (err != cudaSuccess)
	{
		snprintf(info->reason, sizeof(info->reason), "CUDA device %d: %s",
				 device_id, cudaGetErrorString(err));
		cudaGetLastError();
		return;
	}
	cuda_started = true;
	snprintf(info->name, sizeof(info->name), "%s", prop.name);
	info->cc_major = prop.major;
	info->cc_minor = prop.minor;
	info->usable = true;
}

/* the most devices whose probes a process caches (more: probed each time) */
#define PROBE_CACHE 16

/*
 * The probe of device_id, cached for the life of the process (a backend,
 * or the GPU worker's process with a probe a device): the driver, device
 * count, name and compute capability are read once; the free and total
 * memory are read again on every call (cheap once CUDA is initialised),
 * and the device is made current.  A failure is cached too: a backend
 * that found no driver does not try again.  A device whose context has
 * failed (a sticky error) answers every later call with it: then the
 * copy says so, not usable.
 */
extern "C" void
gc_cuda_probe_cached(int device_id, gc_cuda_device_info *info)
{
	static std::mutex mu;
	static int	have = 0;
	static gc_cuda_device_info cache[PROBE_CACHE];
	int			c;

	{
		std::lock_guard<std::mutex> lock(mu);

		for (c = 0; c < have && cache[c].device_id != device_id; c++)
			;
		if (c == have)
		{
			gc_cuda_probe(device_id, info);
			if (have < PROBE_CACHE)
				cache[have++] = *info;
			return;
		}
		*info = cache[c];
	}
	if (info->usable)
	{
		cudaError_t err = cudaSetDevice(device_id);

		if (err == cudaSuccess)
			err = cudaMemGetInfo(&info->free_mem, &info->total_mem);
		if (err != cudaSuccess)
		{
			info->usable = false;
			snprintf(info->reason, sizeof(info->reason), "CUDA device %d: %s",
					 device_id, cudaGetErrorString(err));
			cudaGetLastError();
		}
	}
}
