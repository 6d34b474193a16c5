/*-------------------------------------------------------------------------
 *
 * hdbscan_algorithm.c
 *	  The record of HDBSCAN (and of its minimum spanning tree, which shares
 *	  its device choice and GPU job) in the registry (common/algorithm.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/algorithm.h"
#include "hdbscan/hdbscan_glue.h"
#include "worker/device.h"

/* where the last GPU run of phases 1 and 2 spent its time (gpuclust.log_timing) */
static const char *
hdbscan_gpu_phases(int64 n)
{
	gc_hdbscan_gpu_phases ph;

	gc_gpu_last_hdbscan_phases(&ph);
	return psprintf(" (upload %.1f, index %.1f, core %.1f, mst %.1f in %d rounds, sort %.1f, linkage %.1f, labels %.1f, download %.1f)",
					ph.ms_upload, ph.ms_index, ph.ms_core, ph.ms_mst,
					ph.rounds, ph.ms_sort, ph.ms_linkage, ph.ms_labels,
					ph.ms_download);
}

/*
 * gpuclust_info(): where it runs under 'auto' from its crossover (CUDA
 * running) up, and that crossover.
 */
static void
hdbscan_info(GcInfoPart part, GcInfoSink *sink)
{
	if (part == GC_INFO_DEVICES)
		sink->put(sink, "auto_device_hdbscan",
				  gc_glue_auto_device_name(GC_ALGO_HDBSCAN,
										   GC_HDBSCAN_GPU_MIN_ROWS));
	else if (part == GC_INFO_CROSSOVERS)
		sink->put(sink, "auto_hdbscan_gpu_min_rows",
				  psprintf("%d", GC_HDBSCAN_GPU_MIN_ROWS));
}

const GcAlgorithm gc_hdbscan_record = {
	.algo = GC_ALGO_HDBSCAN,
	.name = "HDBSCAN",
	.function = "gpu_hdbscan",
	.gpu_phases = hdbscan_gpu_phases,
	.proc = &gc_hdbscan_proc,
	.info = hdbscan_info,
};
