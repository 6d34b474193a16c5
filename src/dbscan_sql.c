/*-------------------------------------------------------------------------
 *
 * dbscan_sql.c
 *	  gpu_dbscan(source, eps, min_pts, device)
 *	  RETURNS TABLE (id bigint, cluster_id int, is_core boolean)
 *
 * Rows come back in the source's order.  Noise has a NULL cluster_id and
 * is_core false; a row with NULL features has NULL cluster_id and is_core.
 * A NULL argument other than device is an error (gc_glue_dbscan_params,
 * cluster_args.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/tuplestore.h"

#include "cluster_args.h"
#include "cluster_run.h"
#include "ingest.h"

PG_FUNCTION_INFO_V1(gpu_dbscan);

Datum
gpu_dbscan(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	GcArgs		args;
	gc_dbscan_params params;
	gc_device	requested;
	char	   *source;
	MemoryContext workcxt;
	GcInput		in;
	int32	   *labels = NULL;
	uint8	   *is_core = NULL;
	gc_device	chosen;
	double		t_start,
				t_ingest,
				t_compute = 0;

	/* cheap checks first: nothing runs when an argument is bad */
	gc_glue_args_of_call(fcinfo, &gc_dbscan_signature, &args);
	gc_glue_dbscan_params(&args, &params, &requested);

	InitMaterializedSRF(fcinfo, 0);

	workcxt = AllocSetContextCreate(CurrentMemoryContext, "gpu_dbscan",
									ALLOCSET_DEFAULT_SIZES);
	source = TextDatumGetCString(args.value[GC_ARG_ROWS]);
	t_start = gc_now_ms();
	gc_ingest(source, workcxt, &in);
	t_ingest = gc_now_ms() - t_start;

	if (in.n > 0)
	{
		labels = MemoryContextAllocHuge(workcxt, (Size) in.n * sizeof(int32));
		is_core = MemoryContextAllocHuge(workcxt, (Size) in.n * sizeof(uint8));
		t_start = gc_now_ms();
		chosen = gc_glue_run_dbscan(requested, in.X, in.n, in.d, &params,
									labels, is_core);
		t_compute = gc_now_ms() - t_start;
	}
	else
	{
		/* nothing to cluster, but 'gpu' on a machine without one still fails */
		chosen = gc_glue_choose_device(requested, GC_ALGO_DBSCAN, 0, 0);
	}

	t_start = gc_now_ms();

	/* the result, in input order */
	gc_glue_emit_labels(rsinfo, &in, labels, is_core);

	if (gpuclust_log_timing)
	{
		char		detail[200];

		gc_glue_gpu_phases(GC_ALGO_DBSCAN, in.n > 0 ? chosen : GC_DEVICE_CPU,
						   detail, sizeof(detail));
		ereport(INFO,
				(errmsg("gpu_dbscan: device %s, n %lld, d %d; "
						"ingest %.1f ms, compute %.1f ms%s, emit %.1f ms",
						gc_device_name(chosen), (long long) in.n, in.d,
						t_ingest, t_compute, detail, gc_now_ms() - t_start)));
	}

	MemoryContextDelete(workcxt);
	return (Datum) 0;
}
