/*-------------------------------------------------------------------------
 *
 * kmeans_elbow_sql.c
 *	  gpu_kmeans_elbow(source, k_min, k_max, max_iter, tol, init, n_init,
 *					   seed, device, metric)
 *	  RETURNS TABLE (k int, inertia float8, iterations int,
 *					 converged boolean)
 *
 * Choosing k by the elbow of the inertia: the source is read once, then
 * k-means runs for every k from k_min to k_max through the same run as
 * gpu_kmeans_fit (gc_glue_run_kmeans: device choice per k, the core's
 * public k-means), with the same parameters and seed, so the row for k is
 * what gpu_kmeans_fit(source, k, ...) returns, sample weights (a third
 * source column) included; initial centroids, which fix k, are not taken
 * (no init_centroids; an init query is an error).  Each k is one core call,
 * which polls the cancel flags; k values above the rows with features are
 * an error before anything runs.  An empty source returns no rows.
 * gpuclust_progress shows the call as gpu_kmeans_elbow: its ingest, then
 * each k's k-means (init, iterate: iteration of max_iter), emit.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/tuplestore.h"

#include "common/progress.h"
#include "kmeans/kmeans_glue.h"

PG_FUNCTION_INFO_V1(gpu_kmeans_elbow);

Datum
gpu_kmeans_elbow(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	GcArgs		args;
	gc_kmeans_params params;
	gc_device	requested;
	int			k_min,
				k_max;
	MemoryContext cxt,
				runcxt;
	GcInput		in;

	/* cheap checks first: nothing runs when an argument is bad */
	gc_glue_args_of_call(fcinfo, &gc_elbow_signature, &args);
	gc_glue_elbow_params(&args, &k_min, &k_max, &params, &requested);

	InitMaterializedSRF(fcinfo, 0);
	cxt = AllocSetContextCreate(CurrentMemoryContext, "gpu_kmeans_elbow",
								ALLOCSET_DEFAULT_SIZES);
	gc_progress_begin("gpu_kmeans_elbow");
	/* the ids are not used: any type will do */
	/* weighted as gpu_kmeans_fit weighs them (a third column) */
	gc_ingest(TextDatumGetCString(args.value[GC_ARG_ROWS]), ANYOID,
			  gc_ingest_flags_for(GC_INGEST_WEIGHTS, requested), cxt, &in);
	if (in.n == 0)
	{
		/* nothing to fit, but 'gpu' on a machine without one still fails */
		(void) gc_glue_choose_kmeans_device(requested, 0, 0, k_max,
											gc_kmeans_runs(&params),
											params.weights != NULL, NULL);
		gc_progress_end();
		MemoryContextDelete(cxt);
		return (Datum) 0;
	}
	gc_glue_check_k_rows(k_max, in.n, "Lower k_max to at most the number of rows.");

	runcxt = AllocSetContextCreate(cxt, "gpu_kmeans_elbow run",
								   ALLOCSET_DEFAULT_SIZES);
	/* int64: k_max may be INT_MAX (with as many rows), and k must not wrap */
	for (int64 k = k_min; k <= k_max; k++)
	{
		gc_kmeans_result res;
		Datum		out[4];
		bool		nulls[4] = {false, false, false, false};

		CHECK_FOR_INTERRUPTS();
		params.k = (int) k;
		(void) gc_glue_run_kmeans(requested, &in, &params, runcxt, &res);
		out[0] = Int32GetDatum((int32) k);
		out[1] = Float8GetDatum(res.inertia);
		out[2] = Int32GetDatum(res.iterations);
		out[3] = BoolGetDatum(res.converged);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, out, nulls);
		MemoryContextReset(runcxt);
	}
	gc_progress_end();
	MemoryContextDelete(cxt);
	return (Datum) 0;
}
