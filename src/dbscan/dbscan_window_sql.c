/*-------------------------------------------------------------------------
 *
 * dbscan_window_sql.c
 *	  gpu_dbscan as a window function (common/window.c runs it).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"

#include "common/window.h"
#include "dbscan/dbscan_glue.h"

PG_FUNCTION_INFO_V1(gpu_dbscan_window);

/* gpu_dbscan(features, eps, min_pts, device, metric, algorithm) OVER (...) */
static void
dbscan_read_params(WinCall *call)
{
	gc_dbscan_params *p = palloc(sizeof(gc_dbscan_params));

	gc_glue_dbscan_params(&call->params.args, p, &call->requested);
	call->p = p;
}

static const int32 *
dbscan_run(WinCall *call)
{
	const gc_dbscan_params *p = call->p;
	int32	   *labels;
	uint8	   *is_core;

	if (p->min_pts > call->in.n)
		gc_glue_window_small_partition(call, "min_pts", p->min_pts,
									   "every row is noise", NULL);
	call->ran = gc_glue_run_dbscan(call->requested, &call->in,
								   call->p, call->workcxt, &labels,
								   &is_core);
	return labels;
}

/* gpuclust.log_timing's parameters of a partition */
static void
dbscan_timing(const WinCall *call, StringInfo line)
{
	const gc_dbscan_params *p = call->p;

	appendStringInfo(line, ", algorithm %s",
					 gc_dbscan_algorithm_name(p->algorithm));
}

static const WinAlgo win_dbscan = {
	.sig = &gc_dbscan_signature,
	.read_params = dbscan_read_params,
	.run = dbscan_run,
	.timing = dbscan_timing,
	.algo = GC_ALGO_DBSCAN
};

Datum
gpu_dbscan_window(PG_FUNCTION_ARGS)
{
	return gc_glue_window_label(fcinfo, &win_dbscan);
}

