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

const GcAlgorithm gc_dbscan_record = {
	.algo = GC_ALGO_DBSCAN,
	.name = "DBSCAN",
	.function = "gpu_dbscan",
	.gpu_phases = dbscan_gpu_phases,
	.proc = &gc_dbscan_proc,
};
