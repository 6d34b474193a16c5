/*-------------------------------------------------------------------------
 *
 * kmeans_sql.c
 *	  gpu_kmeans(source, k, max_iter, tol, init, n_init, seed, device,
 *				 init_centroids, metric)
 *	  RETURNS TABLE (id bigint, cluster_id int, distance float8)
 *
 * The source returns (id, features) or (id, features, weight): sample
 * weights weigh the centres and the inertia (the CPU k-means only).  init
 * may be a query returning the initial centroids, run after the source.
 * metric 'cosine' is spherical k-means (the CPU k-means only).
 *
 * Rows come back in the source's order; a row with NULL features has NULL
 * cluster_id and distance.  A NULL argument other than device is an error.
 * An empty source, or one whose rows all have NULL features, returns its
 * rows unclustered (none for an empty source) without checking k against
 * the row count.
 *
 * Arguments: gc_glue_kmeans_params (kmeans_args.c); ingest and emitter:
 * common/srf.c.  Device and run: gc_glue_run_kmeans (kmeans_run.c):
 * under 'auto', a GPU run that fails for lack of GPU memory or with a CUDA
 * error is redone on the CPU, with a NOTICE; under 'gpu' that failure is
 * the error.  gpuclust.log_timing = on reports ingest / compute / emit
 * times in an INFO.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"

#include "common/srf.h"
#include "kmeans/kmeans_glue.h"

PG_FUNCTION_INFO_V1(gpu_kmeans);

Datum
gpu_kmeans(PG_FUNCTION_ARGS)
{
	GcSrfCall	call;
	gc_kmeans_params params;
	gc_kmeans_result res = {0};
	char	   *init_query;

	/* cheap checks first: nothing runs when an argument is bad */
	gc_glue_srf_args(fcinfo, &gc_kmeans_signature, &call);
	gc_glue_kmeans_params(&call.args, &params, &call.requested, &init_query);

	gc_glue_srf_ingest(&call);
	if (call.in.n > 0)
	{
		gc_glue_check_k_rows(params.k, call.in.n, NULL);
		if (init_query != NULL)
			gc_glue_kmeans_init_query(init_query, &params, call.cxt);
		call.ran = gc_glue_run_kmeans(call.requested, &call.in, &params,
									  call.cxt, &res);
	}
	else
	{
		/* nothing to cluster, but 'gpu' on a machine without one still fails */
		call.ran = gc_glue_choose_kmeans_device(call.requested, 0, 0,
												params.k,
												gc_kmeans_runs(&params),
												params.weights != NULL, NULL);
	}
	gc_glue_srf_emit(&call, res.labels, NULL, res.distance);

	if (gpuclust_log_timing)
		gc_glue_srf_log_timing(&call,
							   psprintf("gpu_kmeans: device %s, n %lld, d %d, k %d, iterations %d",
										gc_device_name(call.ran),
										(long long) call.in.n, call.in.d,
										params.k, res.iterations),
							   gc_algorithm_gpu_phases(GC_ALGO_KMEANS,
													   call.ran, call.in.n));
	gc_glue_srf_end(&call);
	return (Datum) 0;
}
