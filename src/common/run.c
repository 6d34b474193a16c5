/*-------------------------------------------------------------------------
 *
 * run.c
 *	  Running each algorithm on the rows of a call (device choice, GPU
 *	  call, fallback to the CPU under 'auto'; k-means's notice of fewer
 *	  distinct clusters than k; affinity propagation's memory check and
 *	  notices): one run function per algorithm, shared by the
 *	  set-returning functions (kmeans/kmeans_sql.c, dbscan/dbscan_sql.c, affinity/affinity_sql.c), the
 *	  window functions (common/window_sql.c) and the models (kmeans/kmeans_model_sql.c), so that
 *	  each runs where the others would for the same problem and returns the
 *	  same labels; and the same for the tools gpu_kdistance
 *	  (tools/kdistance_sql.c) and gpu_silhouette (tools/labelled_rows_sql.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "miscadmin.h"
#include "utils/memutils.h"

#include "common/run.h"
#include "worker/job.h"
#include "common/progress.h"
#include "core/gpu.h"

/*
 * After a failed GPU run.  Under 'auto', lack of GPU memory or a CUDA error
 * is a NOTICE and the call is redone on the CPU (the result); anything
 * else, or any failure under 'gpu', is the error (gpu_hint: see
 * gc_glue_report_hint).  (A build without CUDA never chooses the GPU:
 * dispatch refuses it first.)  A DBSCAN dclust call, or an affinity
 * propagation in float4, never comes here under 'auto': its request is
 * the GPU (gc_glue_dbscan_params, gc_glue_ap_params).
 */
static gc_device
gpu_failed(gc_device requested, gc_status *st, const char *what,
		   const char *gpu_hint)
{
	if (requested != GC_DEVICE_AUTO ||
		(st->code != GC_ENOMEM && st->code != GC_EDEVICE))
		gc_glue_report_hint(st, what, gpu_hint);
	ereport(NOTICE,
			(errmsg("%s falls back to the CPU", what),
			 errdetail("%s.", st->message)));
	st->code = GC_OK;
	st->message[0] = '\0';
	return GC_DEVICE_CPU;
}

/* n elements of size bytes each, in cxt (huge: more than 1 GB works) */
static void *
alloc_array(MemoryContext cxt, Size n, Size size)
{
	return MemoryContextAllocHuge(cxt, n * size);
}

/*
 * How errors name the input row of row j of X: "row with id 7", "source
 * row 12" (ids of another type: the id is not printed), "partition row 3".
 */
static char *
x_row_name(const GcInput *in, int64 j)
{
	int64		i,
				seen = -1;

	for (i = 0; i < in->n_rows - 1; i++)
		if (in->has_features[i] && ++seen == j)
			break;
	if (in->ids == NULL)
		return psprintf("partition row %lld", (long long) i + 1);
	if (in->keys != NULL)
		return psprintf("source row %lld", (long long) i + 1);
	return psprintf("row with id %lld", (long long) in->ids[i]);
}

/* Under the cosine metric: no row of X may be all 0 (22000, naming it). */
static void
check_no_zero_row(const GcInput *in)
{
	int64		zero = gc_first_zero_row(in->X, in->n, in->d);

	if (zero >= 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("features of %s are all 0: the cosine distance is undefined",
						x_row_name(in, zero)),
				 errhint("Leave zero vectors out of the source, or use metric => 'euclidean'.")));
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

/* With weights, the rows of positive weight must be at least k. */
static void
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
		check_no_zero_row(in);
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
		check_k_weights(p.k, in);
	memset(res, 0, sizeof(*res));
	res->labels = alloc_array(cxt, in->n, sizeof(int32));
	/* every form asks for the distances: the same core path runs */
	res->distance = alloc_array(cxt, in->n, sizeof(double));
	res->centroids = alloc_array(cxt, (Size) params->k * (Size) in->d,
								 sizeof(float));

	chosen = gc_glue_choose_kmeans_device(requested, in->n, in->d, params->k,
										  params->n_init,
										  params->weights != NULL);
	gc_progress_compute(chosen, in->n);
	gc_glue_ctx(&ctx);
	ctx.n_threads = gc_kmeans_threads(&ctx, in->n, in->d, params->k);
	/* the GPU worker's device, or gpuclust.gpu_device_id made current by the probe */
	if (chosen == GC_DEVICE_GPU &&
		gc_gpu_run_kmeans(&ctx, in, params, res, &st) != GC_OK)
	{
		chosen = gpu_failed(requested, &st, gc_algorithm_name(GC_ALGO_KMEANS),
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
											  false);
	if (in->n < k)
		chosen = GC_DEVICE_CPU;
	gc_glue_ctx(&ctx);
	ctx.n_threads = gc_kmeans_threads(&ctx, in->n, in->d, k);
	if (chosen == GC_DEVICE_GPU &&
		gc_gpu_run_kmeans_labels(&ctx, in, C, k, labels, &st) != GC_OK)
		chosen = gpu_failed(requested, &st, what, NULL);
	if (chosen == GC_DEVICE_CPU &&
		gc_kmeans_labels_cpu(&ctx, in->X, in->n, in->d, C, k, labels,
							 &st) != GC_OK)
		gc_glue_report(&st, what);
	return chosen;
}

gc_device
gc_glue_run_dbscan(gc_device requested, const GcInput *in,
				   const gc_dbscan_params *params, MemoryContext cxt,
				   int32 **labels, uint8 **is_core)
{
	gc_device	chosen;
	gc_ctx		ctx;
	gc_status	st = {GC_OK, ""};

	Assert(in->n >= 1);
	if (params->metric == GC_METRIC_COSINE)
		check_no_zero_row(in);
	*labels = alloc_array(cxt, in->n, sizeof(int32));
	*is_core = alloc_array(cxt, in->n, sizeof(uint8));

	chosen = gc_glue_choose_dbscan_device(requested, params->algorithm,
										  in->n, in->d);
	gc_progress_compute(chosen, in->n);
	gc_glue_ctx(&ctx);
	ctx.n_threads = gc_dbscan_threads(&ctx, in->n);
	if (chosen == GC_DEVICE_GPU &&
		gc_gpu_run_dbscan(&ctx, in, params, *labels, *is_core, &st) != GC_OK)
	{
		chosen = gpu_failed(requested, &st, gc_algorithm_name(GC_ALGO_DBSCAN),
							gc_glue_dbscan_gpu_hint(params->algorithm));
		gc_progress_compute(chosen, in->n);
	}
	if (chosen == GC_DEVICE_CPU &&
		gc_dbscan_cpu(&ctx, in->X, in->n, in->d, params, *labels, *is_core,
					  &st) != GC_OK)
		gc_glue_report(&st, gc_algorithm_name(GC_ALGO_DBSCAN));
	return chosen;
}

/*
 * bytes as MB with one decimal, for messages: rounded up for what is
 * needed, down for what is there, so "needs" always prints above "has"
 */
static double
mb_up(size_t bytes)
{
	return ceil((double) bytes / (1024.0 * 1024.0) * 10.0) / 10.0;
}

static double
mb_down(size_t bytes)
{
	return floor((double) bytes / (1024.0 * 1024.0) * 10.0) / 10.0;
}

/*
 * The error of an affinity propagation whose matrices (need bytes; device
 * says where they live) exceed the session's matrix memory limit
 * (gpuclust.matrix_memory, at most gpuclust.max_matrix_memory: setting
 * names the one that imposes it, limit_mb): at most max_rows rows fit.
 */
static void
ap_matrix_limit_error(int64 n, size_t need, gc_device device,
					  gc_ap_precision precision, int64 max_rows,
					  const char *setting, int limit_mb)
{
	ereport(ERROR,
			(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
			 errmsg("affinity propagation of %lld rows needs %.1f MB%s, more than %s (%d MB)",
					(long long) n, mb_up(need),
					device == GC_DEVICE_GPU ? " of GPU memory" : "",
					setting, limit_mb),
			 device == GC_DEVICE_CPU ?
			 errdetail("It keeps three n x n double precision matrices (24 n^2 bytes); at most %lld rows fit in %s.",
					   (long long) max_rows, setting) :
			 errdetail("On the GPU in %s it keeps three n x n %s matrices (about %d n^2 bytes); at most %lld rows fit in %s.",
					   gc_ap_precision_name(precision),
					   precision == GC_AP_FLOAT4 ? "single precision" : "double precision",
					   precision == GC_AP_FLOAT4 ? 12 : 24,
					   (long long) max_rows, setting),
			 strcmp(setting, "gpuclust.matrix_memory") == 0 ?
			 errhint("Raise gpuclust.matrix_memory (up to gpuclust.max_matrix_memory, %d MB), or cluster fewer rows.",
					 gpuclust_max_matrix_memory) :
			 superuser() ?
			 errhint("Raise gpuclust.max_matrix_memory, or cluster fewer rows.") :
			 errhint("gpuclust.max_matrix_memory is a superuser setting: ask an administrator to raise it, or cluster fewer rows.")));
}

/*
 * Fail unless affinity propagation of n rows on the CPU fits both the
 * session's matrix memory limit and the memory the server has available.
 * gpu_note (NULL if none): why the GPU did not take the call, for the
 * error's detail.
 */
static void
check_ap_cpu_memory(int64 n, const char *gpu_note)
{
	const char *setting;
	int			limit_mb = gc_glue_matrix_memory_mb(&setting);
	size_t		need = gc_ap_mem_bytes(n);
	size_t		limit = (size_t) limit_mb * 1024 * 1024;
	size_t		avail;

	if (need > limit)
		ap_matrix_limit_error(n, need, GC_DEVICE_CPU, GC_AP_FLOAT8,
							  gc_ap_max_rows(limit), setting, limit_mb);

	/* MemAvailable, or less under a cgroup (v1 or v2) memory limit */
	avail = gc_host_memory();
	if (need > avail)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("affinity propagation of %lld rows needs %.1f MB, more than the %.1f MB of memory available on the server",
						(long long) n, mb_up(need), mb_down(avail)),
				 errdetail("It keeps three n x n double precision matrices (24 n^2 bytes); at most %lld rows fit in the available memory (the host's MemAvailable, or the room left under the server's cgroup memory limit when that is less).%s%s",
						   (long long) gc_ap_max_rows(avail),
						   gpu_note ? " The GPU could not take it either: " : "",
						   gpu_note ? psprintf("%s.", gpu_note) : ""),
				 errhint("Cluster fewer rows.")));
}

/*
 * The device of an affinity propagation call (requested as the precision
 * asks, gc_glue_ap_params), its memory checked before anything is
 * allocated: the matrix memory limit bounds the matrices on either device
 * (the GPU's: gc_ap_gpu_mem_bytes), the GPU's memory is dispatch's
 * (gc_glue_choose_ap_device), the server's memory the CPU's.  Under
 * 'auto' a call whose matrices do not fit the GPU (the limit, or its
 * memory: then a NOTICE) runs on the CPU when they fit there.
 */
static gc_device
ap_device(gc_device requested, const GcInput *in, const gc_ap_params *p)
{
	const char *setting;
	int			limit_mb = gc_glue_matrix_memory_mb(&setting);
	size_t		limit = (size_t) limit_mb * 1024 * 1024;
	gc_device	chosen = GC_DEVICE_CPU;
	char	   *note = NULL;

	if (requested != GC_DEVICE_CPU)
	{
		size_t		need = gc_ap_gpu_mem_bytes(in->n, in->d, p->precision);

		if (need > limit)
		{
			if (requested == GC_DEVICE_GPU)
				ap_matrix_limit_error(in->n, need, GC_DEVICE_GPU, p->precision,
									  gc_ap_gpu_max_rows(limit, in->d, p->precision),
									  setting, limit_mb);
			/* 'auto', float8: the CPU's matrices may still fit */
			requested = GC_DEVICE_CPU;
		}
	}
	if (requested != GC_DEVICE_CPU)
		chosen = gc_glue_choose_ap_device(requested, p->precision, in->n,
										  in->d, &note);
	if (chosen == GC_DEVICE_CPU)
		check_ap_cpu_memory(in->n, note);
	if (note != NULL)
		ereport(NOTICE,
				(errmsg("affinity propagation runs on the CPU"),
				 errdetail("%s.", note)));
	return chosen;
}

/* The NOTICE of a run that did not iterate, or did not converge. */
static void
ap_notice(int64 n, const gc_ap_result *res)
{
	if (res->equal_similarities && n > 1)
		ereport(NOTICE,
				(errmsg("all rows are at the same distance from each other"),
				 res->n_clusters > 1
				 ? errdetail("Affinity propagation does not iterate: the preference is at least the similarity, so every row is its own exemplar.")
				 : errdetail("Affinity propagation does not iterate: the preference is below the similarity, so the first row is the one exemplar.")));
	else if (!res->converged)
		ereport(NOTICE,
				(errmsg_plural("affinity propagation did not converge in %d iteration",
							   "affinity propagation did not converge in %d iterations",
							   res->iterations, res->iterations),
				 res->n_clusters > 0
				 ? errdetail_plural("The %lld exemplar of the last iteration labels the rows; the clusters may be degenerate.",
									"The %lld exemplars of the last iteration label the rows; the clusters may be degenerate.",
									(unsigned long) res->n_clusters,
									(long long) res->n_clusters)
				 : errdetail("No row became an exemplar: every cluster_id is NULL and every is_exemplar false."),
				 errhint("Raise max_iter, or damping (up to 0.99) when the messages oscillate.")));
}

gc_device
gc_glue_run_ap(gc_device requested, const GcInput *in,
			   const gc_ap_params *params, MemoryContext cxt,
			   gc_ap_result *res)
{
	gc_device	chosen;
	gc_ctx		ctx;
	gc_status	st = {GC_OK, ""};

	Assert(in->n >= 1);
	chosen = ap_device(requested, in, params);
	memset(res, 0, sizeof(*res));
	res->labels = alloc_array(cxt, in->n, sizeof(int32));
	res->is_exemplar = alloc_array(cxt, in->n, sizeof(uint8));

	gc_glue_ctx(&ctx);
	gc_progress_compute(chosen, in->n);
	if (chosen == GC_DEVICE_GPU &&
		gc_gpu_run_ap(&ctx, in, params, res, &st) != GC_OK)
	{
		/* float4 never comes back: its request is the GPU */
		chosen = gpu_failed(requested, &st, gc_algorithm_name(GC_ALGO_AP),
							gc_glue_ap_gpu_hint(params->precision));
		check_ap_cpu_memory(in->n, NULL);
		gc_progress_compute(chosen, in->n);
	}
	if (chosen == GC_DEVICE_CPU &&
		gc_ap_cpu(&ctx, in->X, in->n, in->d, params, res, &st) != GC_OK)
		gc_glue_report(&st, gc_algorithm_name(GC_ALGO_AP));
	ap_notice(in->n, res);
	return chosen;
}

/* One call of a tool (algo): its parameters and where its results go. */
typedef struct ToolCall
{
	gc_algorithm algo;			/* GC_ALGO_KDISTANCE or GC_ALGO_SILHOUETTE */
	int64		k;				/* the k-distances' */
	float	   *kdist2;
	const int32 *labels;		/* the silhouette's */
	int32		m;
	int64		sample_size;
	uint64		seed;
	int64		rows;			/* it scores (gc_silhouette_rows) */
	gc_silhouette_result *res;
} ToolCall;

/* c's core call on in's rows on device (the GPU's: worker/job.c's runs). */
static gc_code
tool_call(const gc_ctx *ctx, const GcInput *in, gc_device device,
		  const ToolCall *c, gc_status *st)
{
	gc_ctx		cpu = *ctx;

	if (c->algo == GC_ALGO_KDISTANCE)
	{
		if (device == GC_DEVICE_GPU)
			return gc_gpu_run_kdistance(ctx, in, c->k, c->kdist2, st);
		cpu.n_threads = gc_dbscan_threads(ctx, in->n);
		return gc_kdistance_cpu(&cpu, in->X, in->n, in->d, c->k, c->kdist2,
								st);
	}
	if (device == GC_DEVICE_GPU)
		return gc_gpu_run_silhouette(ctx, in, c->labels, c->m, c->sample_size,
									 c->seed, c->rows, c->res, st);
	return gc_silhouette_cpu(ctx, in->X, in->n, in->d, c->labels, c->m,
							 c->sample_size, c->seed, c->res, st);
}

/*
 * Tool call c on the device dispatch chooses for rows rows (the
 * silhouette's: those it scores) and param (k, or m), shown in
 * gpuclust_progress, with the algorithms' fallback (gpu_failed); a GPU
 * run's GC_EINVAL (the input, which the CPU would refuse too) is not
 * redone.  Returns the device that ran; a failure is left in st.
 */
static gc_device
run_tool(gc_device requested, const GcInput *in, int64 rows, int64 param,
		 const ToolCall *c, gc_status *st)
{
	gc_device	chosen;
	gc_ctx		ctx;

	chosen = gc_glue_choose_tool_device(c->algo, requested, rows, in->d,
										param);
	gc_progress_compute(chosen, in->n);
	gc_glue_ctx(&ctx);
	if (chosen == GC_DEVICE_GPU &&
		tool_call(&ctx, in, GC_DEVICE_GPU, c, st) != GC_OK &&
		st->code != GC_EINVAL)
	{
		chosen = gpu_failed(requested, st, gc_algorithm_name(c->algo), NULL);
		gc_progress_compute(chosen, in->n);
	}
	if (chosen == GC_DEVICE_CPU)
		(void) tool_call(&ctx, in, GC_DEVICE_CPU, c, st);
	return chosen;
}

gc_device
gc_glue_run_kdistance(gc_device requested, const GcInput *in, int64 k,
					  float *kdist2)
{
	gc_status	st = {GC_OK, ""};
	ToolCall	c = {.algo = GC_ALGO_KDISTANCE, .k = k, .kdist2 = kdist2};
	gc_device	chosen;

	Assert(in->n >= 1 && k <= in->n);
	chosen = run_tool(requested, in, in->n, k, &c, &st);
	if (st.code != GC_OK)
		gc_glue_report(&st, gc_algorithm_name(GC_ALGO_KDISTANCE));
	return chosen;
}

gc_device
gc_glue_run_silhouette(gc_device requested, const GcInput *in,
					   const int32 *labels, int32 m, int64 sample_size,
					   uint64 seed, gc_silhouette_result *res)
{
	gc_status	st = {GC_OK, ""};
	ToolCall	c = {.algo = GC_ALGO_SILHOUETTE, .labels = labels, .m = m,
		.sample_size = sample_size, .seed = seed,
	.rows = gc_silhouette_rows(labels, in->n, sample_size), .res = res};
	gc_device	chosen;

	memset(res, 0, sizeof(*res));
	chosen = run_tool(requested, in, c.rows, m, &c, &st);
	if (st.code == GC_EINVAL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the silhouette needs at least 2 clusters and at most one fewer than the rows scored"),
				 errdetail("%lld labelled row%s%s, in %lld cluster%s.",
						   (long long) res->rows, res->rows == 1 ? "" : "s",
						   res->sampled ? " sampled" : "",
						   (long long) res->clusters,
						   res->clusters == 1 ? "" : "s"),
				 errhint("Rows with a NULL label, or none, are noise and not scored.")));
	if (st.code != GC_OK)
		gc_glue_report(&st, gc_algorithm_name(GC_ALGO_SILHOUETTE));
	return chosen;
}
