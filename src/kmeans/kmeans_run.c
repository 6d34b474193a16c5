/*-------------------------------------------------------------------------
 *
 * kmeans_run.c
 *	  Running k-means on the rows of a call, shared by every SQL form
 *	  (set-returning, window, model fit, elbow) and by the kmeans_step
 *	  aggregate's blocks: the device, the GPU run (kmeans_job.c's
 *	  gc_gpu_run_kmeans and gc_gpu_run_kmeans_labels, over worker/job.c),
 *	  the fallback to the CPU under 'auto', and the notice of fewer
 *	  distinct clusters than k.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"

#include "common/progress.h"
#include "kmeans/kmeans_glue.h"
#include "worker/device.h"
#include "worker/job.h"

gc_device
gc_glue_choose_kmeans_device(gc_device requested, int64 n, int d, int k,
							 int runs, bool weighted, gc_kmeans_gpu_plan *plan)
{
	gc_status	st = {GC_OK, ""};
	gc_device	chosen = GC_DEVICE_CPU;
	char		note[256];
	gc_gpu		gpu;

	gc_glue_gpu(&gpu);
	gc_glue_chosen_or_report(gc_choose_device_kmeans(requested, n, d, k, runs,
													 weighted, &gpu, &chosen,
													 plan, note, sizeof(note),
													 &st),
							 &st, note, GC_ALGO_KMEANS);
	return chosen;
}

/*
 * scikit-learn's warning after a fit, as a NOTICE: fewer clusters have rows
 * than k (rows with fewer than k distinct feature vectors leave the spare
 * centres on duplicates, where the lower-numbered centre takes every row).
 * Every k-means form runs through gc_glue_run_kmeans, hence says it.
 */
static void
kmeans_distinct_notice(const int32 *labels, int64 n, int k)
{
	bool	   *used;
	int			m = 0;

	if (k <= 1)
		return;
	used = palloc0(k * sizeof(bool));
	for (int64 i = 0; i < n && m < k; i++)
		if (labels[i] >= 0 && labels[i] < k && !used[labels[i]])
		{
			used[labels[i]] = true;
			m++;
		}
	pfree(used);
	if (m < k)
		ereport(NOTICE,
				(errmsg("number of distinct clusters (%d) found smaller than k (%d)",
						m, k),
				 errdetail_plural("%d cluster has no rows. Possibly due to duplicate rows: k-means finds at most as many clusters as there are distinct feature vectors.",
								  "%d clusters have no rows. Possibly due to duplicate rows: k-means finds at most as many clusters as there are distinct feature vectors.",
								  k - m, k - m),
				 errhint("Use a smaller k.")));
}

void
gc_glue_kmeans_init_query(const char *init_query, gc_kmeans_params *p,
						  MemoryContext cxt)
{
	GcInput		cin;

	gc_ingest_centroids(init_query, cxt, &cin);
	if (cin.n != p->k)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("init query returned %lld row%s, but k is %d",
						(long long) cin.n, cin.n == 1 ? "" : "s", p->k),
				 errdetail("The init query returns the k initial centroids, one row of features each.")));
	p->init = GC_INIT_CENTROIDS;
	p->init_centroids = cin.X;
	p->init_d = cin.d;
}

/* With weights, the rows of positive weight must be at least k: their count. */
static int64
check_k_weights(int k, const GcInput *in)
{
	int64		positive = 0;

	for (int64 i = 0; i < in->n; i++)
		positive += in->weights[i] > 0.0;
	if (positive < k)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("k must not exceed the number of rows with a positive weight"),
				 errdetail_plural("k is %d, but %lld row with features has a positive weight.",
								  "k is %d, but %lld rows with features have a positive weight.",
								  (unsigned long) positive, k, (long long) positive)));
	return positive;
}

gc_device
gc_glue_run_kmeans(gc_device requested, const GcInput *in,
				   const gc_kmeans_params *params_in, MemoryContext cxt,
				   gc_kmeans_result *res)
{
	gc_device	chosen;
	gc_ctx		ctx;
	gc_status	st = {GC_OK, ""};
	gc_kmeans_params p = *params_in;
	const gc_kmeans_params *params = &p;
	int64		zero;

	Assert(in->n >= 1 && params->k <= in->n);
	if (p.init == GC_INIT_CENTROIDS)
	{
		if (p.init_centroids == NULL)
			elog(ERROR, "k-means: the init query was not run");
		if (p.init_d != in->d)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("the initial centroids have %d feature%s, but the rows have %d",
							p.init_d, p.init_d == 1 ? "" : "s", in->d),
					 errdetail("The initial centroids are k rows of as many features as the rows to cluster.")));
	}
	if (p.metric == GC_METRIC_COSINE)
	{
		gc_glue_check_no_zero_row(in);
		if (p.init == GC_INIT_CENTROIDS &&
			(zero = gc_first_zero_row(p.init_centroids, p.k, p.init_d)) >= 0)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_EXCEPTION),
					 errmsg("initial centroid %lld is all 0: the cosine distance is undefined",
							(long long) zero + 1),
					 errdetail("Under metric => 'cosine' every initial centroid needs a direction.")));
	}
	p.weights = in->weights;
	if (p.weights != NULL)
		p.positive_weights = check_k_weights(p.k, in);
	p.rows_checked = true;		/* the weights as read, the zero rows above */
	memset(res, 0, sizeof(*res));
	res->labels = gc_glue_alloc_array(cxt, in->n, sizeof(int32));
	/* every form asks for the distances: the same core path runs */
	res->distance = gc_glue_alloc_array(cxt, in->n, sizeof(double));
	res->centroids = gc_glue_alloc_array(cxt, (Size) params->k * (Size) in->d,
								 sizeof(float));

	/* the GPU's plan, made with the device choice, goes to the run */
	chosen = gc_glue_choose_kmeans_device(requested, in->n, in->d, p.k,
										  gc_kmeans_runs(&p), p.weights != NULL,
										  &p.gpu_plan);
	gc_progress_compute(chosen, in->n);
	gc_glue_ctx(&ctx);
	ctx.n_threads = gc_kmeans_threads(&ctx, in->n, in->d, params->k);
	/* the GPU worker's device, or gpuclust.gpu_device_id made current by the probe */
	if (chosen == GC_DEVICE_GPU &&
		gc_gpu_run_kmeans(&ctx, in, params, res, &st) != GC_OK)
	{
		chosen = gc_glue_gpu_failed(requested, &st, gc_algorithm_name(GC_ALGO_KMEANS),
							NULL);
		gc_progress_compute(chosen, in->n);
	}
	if (chosen == GC_DEVICE_CPU &&
		gc_kmeans_cpu(&ctx, in->X, in->n, in->d, params, res, &st) != GC_OK)
		gc_glue_report(&st, gc_algorithm_name(GC_ALGO_KMEANS));
	kmeans_distinct_notice(res->labels, in->n, params->k);
	return chosen;
}

gc_device
gc_glue_kmeans_labels(gc_device requested, const GcInput *in, const float *C,
					  int k, int32 *labels)
{
	gc_device	chosen = GC_DEVICE_CPU;
	gc_ctx		ctx;
	gc_status	st = {GC_OK, ""};
	const char *what = gc_algorithm_name(GC_ALGO_KMEANS_LABELS);

	Assert(in->n >= 1);
	/*
	 * 'gpu' fails without one; 'auto' takes it from
	 * GC_KMEANS_LABELS_GPU_MIN_K centres up; the GPU's takes 1 <= k <= n,
	 * fewer rows the CPU
	 */
	if (gc_kmeans_labels_gpu_wanted(requested, k))
		chosen = gc_glue_choose_kmeans_device(requested, in->n, in->d, k, 1,
											  false, NULL);
	if (in->n < k)
		chosen = GC_DEVICE_CPU;
	gc_glue_ctx(&ctx);
	ctx.n_threads = gc_kmeans_threads(&ctx, in->n, in->d, k);
	if (chosen == GC_DEVICE_GPU &&
		gc_gpu_run_kmeans_labels(&ctx, in, C, k, labels, &st) != GC_OK)
		chosen = gc_glue_gpu_failed(requested, &st, what, NULL);
	if (chosen == GC_DEVICE_CPU &&
		gc_kmeans_labels_cpu(&ctx, in->X, in->n, in->d, C, k, labels,
							 &st) != GC_OK)
		gc_glue_report(&st, what);
	return chosen;
}
