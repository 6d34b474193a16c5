/*-------------------------------------------------------------------------
 *
 * tools_algorithm.c
 *	  The records of the k-distances and the silhouette in the registry
 *	  (common/algorithm.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/algorithm.h"
#include "tools/tools_glue.h"
#include "worker/device.h"

/*
 * gpuclust_info(): where a tool runs under 'auto' from its crossover
 * (CUDA running) up, min_rows rows, and that crossover.  Both lines go in
 * the CROSSOVERS part, the device line too, though the other algorithms
 * put theirs in DEVICES (common/algorithm.h): gpuclust_info() shows each
 * tool's two lines together, after the other algorithms' crossovers, and
 * its order of lines is part of its output.
 */
static void
tool_lines(GcInfoPart part, GcInfoSink *sink, gc_algorithm algo,
		   const char *tool, int min_rows)
{
	if (part != GC_INFO_CROSSOVERS)
		return;
	sink->put(sink, psprintf("auto_device_%s", tool),
			  gc_glue_auto_device_name(algo, min_rows));
	sink->put(sink, psprintf("auto_%s_gpu_min_rows", tool),
			  psprintf("%d", min_rows));
}

static void
kdistance_info(GcInfoPart part, GcInfoSink *sink)
{
	tool_lines(part, sink, GC_ALGO_KDISTANCE, "kdistance",
			   GC_KDISTANCE_GPU_MIN_ROWS);
}

static void
silhouette_info(GcInfoPart part, GcInfoSink *sink)
{
	tool_lines(part, sink, GC_ALGO_SILHOUETTE, "silhouette",
			   GC_SILHOUETTE_GPU_MIN_ROWS);
}

const GcAlgorithm gc_kdistance_record = {
	.algo = GC_ALGO_KDISTANCE,
	.name = "k-distance",
	.function = "gpu_kdistance",
	.proc = &gc_kdistance_proc,
	.info = kdistance_info,
};

const GcAlgorithm gc_silhouette_record = {
	.algo = GC_ALGO_SILHOUETTE,
	.name = "silhouette",
	.function = "gpu_silhouette",
	.proc = &gc_silhouette_proc,
	.info = silhouette_info,
};
