/*-------------------------------------------------------------------------
 *
 * kmeans_window_sql.c
 *	  gpu_kmeans as a window function (common/window.c runs it).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"

#include "common/window.h"
#include "kmeans/kmeans_glue.h"

PG_FUNCTION_INFO_V1(gpu_kmeans_window);

/*
 * gpu_kmeans(features, k, max_iter, tol, init, n_init, seed, device,
 *			  init_centroids, metric) OVER (...)
 */

/*
 * init_centroids (an array) work here; an init query does not: a window
 * function runs no query (it is PARALLEL SAFE and reads only its
 * partition).
 */
static void
kmeans_read_params(WinCall *call)
{
	gc_kmeans_params *p = palloc(sizeof(gc_kmeans_params));
	char	   *init_query;

	gc_glue_kmeans_params(&call->params.args, p, &call->requested,
						  &init_query);
	call->p = p;
	if (init_query != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("the window form of gpu_kmeans takes no init query"),
				 errdetail("init is \"%s\".", init_query),
				 errhint("Pass the centroids as an array: init_centroids => (SELECT array_agg(features ORDER BY id) FROM centres).")));
}

/*
 * A partition of fewer rows than k, as PostGIS's ST_ClusterKMeans takes
 * it: not an error, but fewer clusters, one per distinct row (the
 * clustering of inertia 0), with a NOTICE; on the CPU, in O(n log n).
 */
static const int32 *
kmeans_few_rows(WinCall *call)
{
	const gc_kmeans_params *p = call->p;
	int32	   *labels;
	int64		clusters;
	gc_ctx		ctx;
	gc_status	st = {GC_OK, ""};

	if (p->metric == GC_METRIC_COSINE)
		gc_glue_check_no_zero_row(&call->in);
	gc_glue_window_small_partition(call, "k", p->k,
								   "each distinct row is its own cluster",
								   NULL);
	labels = MemoryContextAllocHuge(call->workcxt,
									(Size) call->in.n * sizeof(int32));
	gc_glue_ctx(&ctx);
	if (gc_kmeans_distinct_labels(&ctx, call->in.X, call->in.n, call->in.d,
								  p->metric, labels, &clusters, &st) != GC_OK)
		gc_glue_report(&st, gc_algorithm_name(GC_ALGO_KMEANS));
	call->ran = GC_DEVICE_CPU;
	return labels;
}

static const int32 *
kmeans_run(WinCall *call)
{
	const gc_kmeans_params *p = call->p;
	gc_kmeans_result res;

	if (p->k > call->in.n)
		return kmeans_few_rows(call);
	call->ran = gc_glue_run_kmeans(call->requested, &call->in, p,
								   call->workcxt, &res);
	call->iterations = res.iterations;
	return res.labels;
}

/* gpuclust.log_timing's parameters of a partition (an empty one: 0 iterations) */
static void
kmeans_timing(const WinCall *call, StringInfo line)
{
	const gc_kmeans_params *p = call->p;

	appendStringInfo(line, ", k %d, iterations %d", p->k, call->iterations);
}

static const WinAlgo win_kmeans = {
	.sig = &gc_kmeans_signature,
	.read_params = kmeans_read_params,
	.run = kmeans_run,
	.timing = kmeans_timing,
	.algo = GC_ALGO_KMEANS
};

Datum
gpu_kmeans_window(PG_FUNCTION_ARGS)
{
	return gc_glue_window_label(fcinfo, &win_kmeans);
}
