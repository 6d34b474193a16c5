/*-------------------------------------------------------------------------
 *
 * kmeans_algorithm.c
 *	  The records of k-means and of its labelling of given centres (the
 *	  kmeans_step aggregate's blocks) in the registry (common/algorithm.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/algorithm.h"
#include "kmeans/kmeans_glue.h"
#include "worker/device.h"

/* where the last GPU run of n rows spent its time (gpuclust.log_timing) */
static const char *
kmeans_gpu_phases(int64 n)
{
	gc_kmeans_gpu_phases ph;

	gc_gpu_last_kmeans_phases(&ph);
	if (ph.chunks > 0)
		return psprintf(" (upload %.1f, init %.1f, lloyd %.1f, download %.1f; streamed in %lld chunks of %lld rows, %d passes, %.1f GB in %.1f ms)",
						ph.ms_upload, ph.ms_init, ph.ms_lloyd, ph.ms_download,
						(long long) ph.chunks, (long long) ph.chunk_rows,
						ph.passes, ph.gb_streamed, ph.ms_passes);
	return psprintf(" (upload %.1f, init %.1f, lloyd %.1f, download %.1f; %d iterations, %.1f%% of their rows assigned%s)",
					ph.ms_upload, ph.ms_init, ph.ms_lloyd, ph.ms_download,
					ph.total_iterations,
					ph.total_iterations > 0 ?
					100.0 * ph.rows_screened / ((double) n * ph.total_iterations) : 100.0,
					ph.grid_cells > 0 ? psprintf(", %d of them through a grid of %d cells",
												 ph.grid_iterations, ph.grid_cells) : "");
}

/* gpuclust_info(): where it runs under 'auto', from which n·k·d */
static void
kmeans_info(GcInfoPart part, GcInfoSink *sink)
{
	if (part == GC_INFO_DEVICES)
		sink->put(sink, "auto_device_kmeans",
				  gc_glue_auto_device_name(GC_ALGO_KMEANS, 0));
	else if (part == GC_INFO_CROSSOVERS)
		sink->put(sink, "auto_kmeans_gpu_min_work",
				  psprintf("%.0f", (double) GC_KMEANS_GPU_MIN_WORK));
}

const GcAlgorithm gc_kmeans_record = {
	.algo = GC_ALGO_KMEANS,
	.name = "k-means",
	.function = "gpu_kmeans",
	.gpu_phases = kmeans_gpu_phases,
	.proc = &gc_kmeans_proc,
	.info = kmeans_info,
};

const GcAlgorithm gc_kmeans_labels_record = {
	.algo = GC_ALGO_KMEANS_LABELS,
	.name = "k-means assignment",
	.function = "kmeans_step",
	.proc = &gc_kmeans_labels_proc,
};
