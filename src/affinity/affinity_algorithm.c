/*-------------------------------------------------------------------------
 *
 * affinity_algorithm.c
 *	  The record of affinity propagation in the registry
 *	  (common/algorithm.h); its result carries its GPU phases' times.  Its
 *	  lines of gpuclust_info(): where it runs (under 'auto' in float8, and
 *	  in float4, which runs only on the GPU), from how many rows, and the
 *	  most rows a call of this session may take on each device (the CPU's:
 *	  gpuclust.matrix_memory's limit and the server's memory; the GPU's,
 *	  in float8 and float4, for 2-d rows: that limit and the memory a GPU
 *	  call may use; more features take O(n d) more).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "affinity/affinity_glue.h"
#include "common/algorithm.h"
#include "worker/device.h"
#include "worker/job.h"

/*
 * Where affinity propagation runs: under 'auto' in float8 for a problem
 * big enough for the GPU, and in float4 (GPU only, whatever the size):
 * "gpu", "cpu", or "none (why)".
 */
static const char *
ap_device(gc_ap_precision precision)
{
	gc_status	st = {GC_OK, ""};
	gc_device	chosen;
	gc_gpu		gpu;
	gc_code		rc;

	gc_glue_gpu(&gpu);
	rc = gc_choose_device_ap(GC_DEVICE_AUTO, precision, GC_AP_GPU_MIN_ROWS, 2,
							 &gpu, &chosen, NULL, 0, &st);
	return gc_glue_device_or_none(rc, chosen, &st);
}

/*
 * The most rows of 2-d affinity propagation that fit this session's
 * matrix memory limit and, in precision on the GPU (gpu_budget bytes on
 * each of gpus GPUs a call may split over: 0 when unusable, then NULL),
 * the GPUs' memory, or on the CPU the server's.
 */
static const char *
ap_max_rows(gc_device device, gc_ap_precision precision, size_t gpu_budget,
			int gpus)
{
	const char *setting;
	size_t		limit = (size_t) gc_glue_matrix_memory_mb(&setting) << 20;
	size_t		host = gc_host_memory();

	if (device == GC_DEVICE_CPU)
		return psprintf("%lld", (long long) gc_ap_max_rows(Min(limit, host)));
	if (gpu_budget == 0)
		return NULL;
	return psprintf("%lld", (long long)
					Min(gc_ap_gpu_max_rows(limit, 2, precision),
						gc_ap_gpu_split_max_rows(gpu_budget, 2, precision, gpus)));
}

static void
ap_info(GcInfoPart part, GcInfoSink *sink)
{
	gc_gpu		gpu;
	gc_gpu_state state;
	size_t		budget;
	int			gpus;
	bool		all = sink->all;

	switch (part)
	{
		case GC_INFO_DEVICES:
			sink->put(sink, "auto_device_ap", ap_device(GC_AP_FLOAT8));
			sink->put(sink, "ap_float4_device", ap_device(GC_AP_FLOAT4));
			break;
		case GC_INFO_CROSSOVERS:
			sink->put(sink, "auto_ap_gpu_min_rows",
					  psprintf("%d", GC_AP_GPU_MIN_ROWS));
			break;
		case GC_INFO_CAPACITY:
			/* the server's memory: NULL to a role that does not see it */
			gc_glue_gpu(&gpu);
			budget = gc_gpu_budget(&gpu);
			/* the GPUs one call may split over (the GPU worker's) */
			gpu.probe(&gpu, &state);
			gpus = Max(state.gpus, 1);
			sink->put(sink, "ap_max_rows_cpu",
					  all ? ap_max_rows(GC_DEVICE_CPU, GC_AP_FLOAT8, 0, 1) : NULL);
			sink->put(sink, "ap_max_rows_gpu_float8",
					  all ? ap_max_rows(GC_DEVICE_GPU, GC_AP_FLOAT8, budget, gpus) : NULL);
			sink->put(sink, "ap_max_rows_gpu_float4",
					  all ? ap_max_rows(GC_DEVICE_GPU, GC_AP_FLOAT4, budget, gpus) : NULL);
			break;
	}
}

const GcAlgorithm gc_ap_record = {
	.algo = GC_ALGO_AP,
	.name = "affinity propagation",
	.function = "gpu_affinity_propagation",
	.proc = &gc_ap_proc,
	.info = ap_info,
};
