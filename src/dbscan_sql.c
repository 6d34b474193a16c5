/*-------------------------------------------------------------------------
 *
 * dbscan_sql.c
 *	  gpu_dbscan(source, eps, min_pts, device)
 *	  RETURNS TABLE (id bigint, cluster_id int, is_core boolean)
 *
 * Rows come back in the source's order.  Noise has a NULL cluster_id and
 * is_core false; a row with NULL features has NULL cluster_id and is_core.
 * A NULL argument other than device is an error.
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

#include "gpuclust.h"
#include "ingest.h"
#ifdef GPUCLUST_CUDA
#include "../cuda/gpuclust_cuda.h"
#endif

PG_FUNCTION_INFO_V1(gpu_dbscan);

enum
{
	ARG_SOURCE = 0,
	ARG_EPS,
	ARG_MIN_PTS,
	ARG_DEVICE
};

Datum
gpu_dbscan(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	gc_dbscan_params params;
	gc_device	requested;
	gc_device	chosen;
	char	   *source;
	MemoryContext workcxt;
	GcInput		in;
	int32	   *labels = NULL;
	uint8	   *is_core = NULL;

	gc_glue_require_arg(fcinfo, ARG_SOURCE, "source");
	gc_glue_require_arg(fcinfo, ARG_EPS, "eps");
	gc_glue_require_arg(fcinfo, ARG_MIN_PTS, "min_pts");

	memset(&params, 0, sizeof(params));
	params.eps = PG_GETARG_FLOAT8(ARG_EPS);
	params.min_pts = PG_GETARG_INT32(ARG_MIN_PTS);

	if (isnan(params.eps) || isinf(params.eps) || params.eps <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("eps must be a finite number greater than 0")));
	if (params.min_pts < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("min_pts must be at least 1")));
	requested = gc_glue_parse_device(fcinfo, ARG_DEVICE);

	InitMaterializedSRF(fcinfo, 0);

	workcxt = AllocSetContextCreate(CurrentMemoryContext, "gpu_dbscan",
									ALLOCSET_DEFAULT_SIZES);
	source = text_to_cstring(PG_GETARG_TEXT_PP(ARG_SOURCE));
	gc_ingest(source, workcxt, &in);

	chosen = gc_glue_choose_device(requested, GC_ALGO_DBSCAN, in.n, in.d);

	if (in.n > 0)
	{
		gc_ctx		ctx;
		gc_status	st = {GC_OK, ""};

		labels = MemoryContextAllocHuge(workcxt, (Size) in.n * sizeof(int32));
		is_core = MemoryContextAllocHuge(workcxt, (Size) in.n * sizeof(uint8));

		gc_glue_ctx(&ctx);
		gc_glue_prepare_threads(&ctx);
		if (chosen == GC_DEVICE_GPU)
		{
#ifdef GPUCLUST_CUDA
			/*
			 * The device is gpuclust.gpu_device_id, made current by the
			 * probe.  Under 'auto' a CUDA error or lack of GPU memory
			 * redoes the call on the CPU, with a NOTICE.
			 */
			if (gc_dbscan_gpu(&ctx, in.X, in.n, in.d, &params, labels,
							  is_core, &st) != GC_OK)
			{
				if (requested != GC_DEVICE_AUTO ||
					(st.code != GC_ENOMEM && st.code != GC_EDEVICE))
					gc_glue_report(&st, "DBSCAN");
				ereport(NOTICE,
						(errmsg("DBSCAN falls back to the CPU"),
						 errdetail("%s.", st.message)));
				chosen = GC_DEVICE_CPU;
				st.code = GC_OK;
				st.message[0] = '\0';
			}
#else
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot run DBSCAN on the GPU"),
					 errdetail("gpuclust was built without CUDA.")));
#endif
		}
		if (chosen == GC_DEVICE_CPU &&
			gc_dbscan_cpu(&ctx, in.X, in.n, in.d, &params, labels, is_core,
						  &st) != GC_OK)
			gc_glue_report(&st, "DBSCAN");
	}

	/* the result, in input order */
	for (int64 i = 0, j = 0; i < in.n_rows; i++)
	{
		Datum		values[3];
		bool		nulls[3] = {false, false, false};

		values[0] = Int64GetDatum(in.ids[i]);
		if (in.has_features[i])
		{
			if (labels[j] == GC_NOISE)
			{
				values[1] = (Datum) 0;
				nulls[1] = true;
			}
			else
				values[1] = Int32GetDatum(labels[j]);
			values[2] = BoolGetDatum(is_core[j] != 0);
			j++;
		}
		else
		{
			values[1] = values[2] = (Datum) 0;
			nulls[1] = nulls[2] = true;
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		if ((i & 0xFFFF) == 0xFFFF)
			CHECK_FOR_INTERRUPTS();
	}

	MemoryContextDelete(workcxt);
	return (Datum) 0;
}
