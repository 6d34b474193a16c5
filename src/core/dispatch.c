/*
 * dispatch.c — which device runs a call.
 *
 * The GPU paths of k-means and DBSCAN arrive in later releases; until then
 * 'auto' runs on the CPU and 'gpu' says why it cannot run: no CUDA in this
 * build, no driver, no device, or no GPU path for the algorithm yet.
 */
#include <strings.h>

#include "gpuclust_core.h"
#ifdef GPUCLUST_CUDA
#include "../../cuda/gpuclust_cuda.h"
#endif

bool
gc_parse_device(const char *s, gc_device *out)
{
	if (s == NULL)
		return false;
	if (strcasecmp(s, "auto") == 0)
		*out = GC_DEVICE_AUTO;
	else if (strcasecmp(s, "cpu") == 0)
		*out = GC_DEVICE_CPU;
	else if (strcasecmp(s, "gpu") == 0)
		*out = GC_DEVICE_GPU;
	else
		return false;
	return true;
}

/* Why the GPU cannot run algo; false when it can. */
static bool
gpu_unusable(gc_algorithm algo, int gpu_device_id, gc_status *why)
{
#ifndef GPUCLUST_CUDA
	(void) algo;
	(void) gpu_device_id;
	gc_fail(why, GC_EDEVICE, "gpuclust was built without CUDA");
	return true;
#else
	gc_cuda_device_info info;

	gc_cuda_probe(gpu_device_id, &info);
	if (!info.usable)
	{
		gc_fail(why, GC_EDEVICE, "no usable GPU: %s", info.reason);
		return true;
	}
	gc_fail(why, GC_EDEVICE, "no GPU implementation of %s in this release",
			algo == GC_ALGO_KMEANS ? "k-means" : "DBSCAN");
	return true;
#endif
}

gc_code
gc_choose_device(gc_device requested, gc_algorithm algo, int64_t n, int d,
				 int gpu_device_id, gc_device *chosen, gc_status *st)
{
	gc_status	why = {GC_OK, ""};

	(void) n;
	(void) d;
	switch (requested)
	{
		case GC_DEVICE_CPU:
			*chosen = GC_DEVICE_CPU;
			return GC_OK;
		case GC_DEVICE_GPU:
			if (gpu_unusable(algo, gpu_device_id, &why))
				return gc_fail(st, GC_EDEVICE, "%s", why.message);
			*chosen = GC_DEVICE_GPU;
			return GC_OK;
		case GC_DEVICE_AUTO:
		default:
			*chosen = GC_DEVICE_CPU;
			return GC_OK;
	}
}
