/*-------------------------------------------------------------------------
 *
 * dbscan_sql.c
 *	  gpu_dbscan(source, eps, min_pts, device, metric, algorithm)
 *	  RETURNS TABLE (id bigint, cluster_id int, is_core boolean)
 *
 * Rows come back in the source's order.  Noise has a NULL cluster_id and
 * is_core false; a row with NULL features has NULL cluster_id and is_core.
 * A NULL argument other than device is an error.
 *
 * Arguments: gc_glue_dbscan_params (dbscan_args.c); ingest and emitter:
 * common/srf.c.  Device and run: gc_glue_run_dbscan (dbscan_run.c), with
 * the fallback to the CPU under 'auto'.  gpuclust.log_timing = on reports
 * ingest / compute / emit times in an INFO.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"

#include "common/srf.h"
#include "dbscan/dbscan_glue.h"

PG_FUNCTION_INFO_V1(gpu_dbscan);

Datum
gpu_dbscan(PG_FUNCTION_ARGS)
{
	GcSrfCall	call;
	gc_dbscan_params params;
	int32	   *labels = NULL;
	uint8	   *is_core = NULL;

	/* cheap checks first: nothing runs when an argument is bad */
	gc_glue_srf_args(fcinfo, &gc_dbscan_signature, &call);
	gc_glue_dbscan_params(&call.args, &params, &call.requested);

	gc_glue_srf_ingest(&call);
	if (call.in.n > 0)
		call.ran = gc_glue_run_dbscan(call.requested, &call.in, &params,
									  call.cxt, &labels, &is_core);
	else
	{
		/*
		 * nothing to cluster, but 'gpu' (or dclust) on a machine without
		 * one still fails
		 */
		call.ran = gc_glue_choose_dbscan_device(call.requested,
												params.algorithm, 0, 0);
	}
	gc_glue_srf_emit(&call, labels, is_core, NULL);

	if (gpuclust_log_timing)
		gc_glue_srf_log_timing(&call,
							   psprintf("gpu_dbscan: device %s, n %lld, d %d, algorithm %s",
										gc_device_name(call.ran),
										(long long) call.in.n, call.in.d,
										gc_dbscan_algorithm_name(params.algorithm)),
							   gc_algorithm_gpu_phases(GC_ALGO_DBSCAN,
													   call.ran, call.in.n));
	gc_glue_srf_end(&call);
	return (Datum) 0;
}
