/*-------------------------------------------------------------------------
 *
 * kmeans_sql.c
 *	  gpu_kmeans(source, k, max_iter, tol, init, n_init, seed, device)
 *	  RETURNS TABLE (id bigint, cluster_id int, distance float8)
 *
 * Rows come back in the source's order; a row with NULL features has NULL
 * cluster_id and distance.  A NULL argument other than device is an error.
 * An empty source, or one whose rows all have NULL features, returns its
 * rows unclustered (none for an empty source) without checking k against
 * the row count.
 *
 * Arguments: gc_glue_kmeans_params (cluster_args.c).  Device:
 * gc_glue_choose_kmeans_device (dispatch.c).  Under 'auto', a GPU
 * run that fails for lack of GPU memory or with a CUDA error is redone on
 * the CPU, with a NOTICE; under 'gpu' that failure is the error.
 * gpuclust.log_timing = on reports ingest / compute / emit times in an INFO.
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

PG_FUNCTION_INFO_V1(gpu_kmeans);


Datum
gpu_kmeans(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	GcArgs		args;
	gc_kmeans_params params;
	gc_device	requested;
	gc_device	chosen;
	char	   *source;
	MemoryContext workcxt;
	GcInput		in;
	int32	   *labels = NULL;
	double	   *distance = NULL;
	double		t_start,
				t_ingest = 0,
				t_compute = 0;
	int			iterations = 0;

	/* cheap checks first: nothing runs when an argument is bad */
	gc_glue_args_of_call(fcinfo, &gc_kmeans_signature, &args);
	gc_glue_kmeans_params(&args, &params, &requested);

	InitMaterializedSRF(fcinfo, 0);

	workcxt = AllocSetContextCreate(CurrentMemoryContext, "gpu_kmeans",
									ALLOCSET_DEFAULT_SIZES);
	source = TextDatumGetCString(args.value[GC_ARG_ROWS]);
	t_start = gc_now_ms();
	gc_ingest(source, workcxt, &in);
	t_ingest = gc_now_ms() - t_start;

	if (in.n > 0)
	{
		gc_kmeans_result res;

		gc_glue_check_k_rows(params.k, in.n, GC_ROWS_QUERY, NULL);
		labels = MemoryContextAllocHuge(workcxt, (Size) in.n * sizeof(int32));
		distance = MemoryContextAllocHuge(workcxt, (Size) in.n * sizeof(double));
		memset(&res, 0, sizeof(res));
		res.labels = labels;
		res.distance = distance;
		res.centroids = MemoryContextAllocHuge(workcxt,
											   (Size) params.k * (Size) in.d * sizeof(float));
		t_start = gc_now_ms();
		chosen = gc_glue_run_kmeans(requested, in.X, in.n, in.d, &params, &res);
		t_compute = gc_now_ms() - t_start;
		iterations = res.iterations;
	}
	else
	{
		/* nothing to cluster, but 'gpu' on a machine without one still fails */
		chosen = gc_glue_choose_kmeans_device(requested, 0, 0, params.k,
											  params.n_init);
	}
	t_start = gc_now_ms();

	/* the result, in input order */
	for (int64 i = 0, j = 0; i < in.n_rows; i++)
	{
		Datum		values[3];
		bool		nulls[3] = {false, false, false};

		values[0] = Int64GetDatum(in.ids[i]);
		if (in.has_features[i])
		{
			values[1] = Int32GetDatum(labels[j]);
			values[2] = Float8GetDatum(distance[j]);
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

	if (gpuclust_log_timing)
	{
		char		detail[200];

		gc_glue_gpu_phases(GC_ALGO_KMEANS, in.n > 0 ? chosen : GC_DEVICE_CPU,
						   detail, sizeof(detail));
		ereport(INFO,
				(errmsg("gpu_kmeans: device %s, n %lld, d %d, k %d, iterations %d; "
						"ingest %.1f ms, compute %.1f ms%s, emit %.1f ms",
						gc_device_name(chosen), (long long) in.n, in.d, params.k,
						iterations, t_ingest, t_compute, detail,
						gc_now_ms() - t_start)));
	}

	MemoryContextDelete(workcxt);
	return (Datum) 0;
}
