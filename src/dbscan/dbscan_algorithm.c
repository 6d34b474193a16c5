/*-------------------------------------------------------------------------
 *
 * dbscan_algorithm.c
 *	  The record of DBSCAN in the registry (common/algorithm.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/algorithm.h"
#include "dbscan/dbscan_glue.h"
#include "worker/device.h"
#include "worker/job.h"

/* where the last GPU run spent its time (gpuclust.log_timing) */
static const char *
dbscan_gpu_phases(int64 n)
{
	gc_dbscan_gpu_phases ph;

	gc_gpu_last_dbscan_phases(&ph);
	return psprintf(" (upload %.1f, cluster %.1f, number %.1f, download %.1f, free %.1f; %s index)",
					ph.ms_upload, ph.ms_index + ph.ms_core + ph.ms_union + ph.ms_border,
					ph.ms_number, ph.ms_download, ph.ms_free,
					ph.grid ? "grid" : ph.tree ? "kd-tree" : "brute-force");
}

/*
 * Where DBSCAN with algorithm => 'dclust' runs (GPU only, whatever the
 * size): "gpu", or "none (why)".
 */
static const char *
dclust_device(void)
{
	gc_status	st = {GC_OK, ""};
	gc_device	chosen;
	gc_gpu		gpu;
	gc_code		rc;

	gc_glue_gpu(&gpu);
	rc = gc_choose_device_dbscan(GC_DEVICE_AUTO, GC_DBSCAN_DCLUST, 0, 0, &gpu,
								 &chosen, &st);
	return gc_glue_device_or_none(rc, chosen, &st);
}

/* gpuclust_info(): where it runs under 'auto', and where dclust does */
static void
dbscan_info(GcInfoPart part, GcInfoSink *sink)
{
	if (part != GC_INFO_DEVICES)
		return;
	sink->put(sink, "auto_device_dbscan",
			  gc_glue_auto_device_name(GC_ALGO_DBSCAN, 0));
	sink->put(sink, "dbscan_dclust_device", dclust_device());
}

const GcAlgorithm gc_dbscan_record = {
	.algo = GC_ALGO_DBSCAN,
	.name = "DBSCAN",
	.function = "gpu_dbscan",
	.gpu_phases = dbscan_gpu_phases,
	.proc = &gc_dbscan_proc,
	.info = dbscan_info,
};
