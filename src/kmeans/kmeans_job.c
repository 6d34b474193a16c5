/*-------------------------------------------------------------------------
 *
 * kmeans_job.c
 *	  The GPU jobs of k-means and of its labelling of given centres (the
 *	  kmeans_step aggregate's blocks): the backend's side (the parameters,
 *	  the arrays in the outputs' segment, the results read back; worker/job.h)
 *	  and the GPU process's (the core call, its scalars and phase times in
 *	  the job's results; worker/gpu_process.h), which calls no PostgreSQL
 *	  function.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "kmeans/kmeans_glue.h"
#include "worker/gpu_process.h"
#include "worker/job.h"

/* k-means' results: the scalars (its arrays are in the segment), the phases */
typedef struct KmeansResults
{
	gc_kmeans_result kmeans;
	gc_kmeans_gpu_phases phases;
} KmeansResults;

/* the labelling's parameter: the number of centres */
typedef struct KmeansLabelsParams
{
	int			k;
} KmeansLabelsParams;

GC_JOB_AREA_FITS(gc_kmeans_params);
GC_JOB_AREA_FITS(KmeansResults);
GC_JOB_AREA_FITS(KmeansLabelsParams);

static gc_kmeans_gpu_phases last_kmeans;
static bool kmeans_by_worker;

/* ---------------------------------------------------------------------
 * The backend's side
 * --------------------------------------------------------------------- */

/*
 * Whether job j may split over several GPUs (cuda/kmeans/kmeans_multi.cu):
 * without weights, at least gpuclust.gpu_worker_split_rows rows, resident
 * on one GPU by its plan (a job pinned to a device has one GPU to run on:
 * the worker does not split it).  Each GPU, the first too, holds the plan
 * of a shard of two GPUs' split, the largest any split makes (seeding runs
 * over the shards or on the host).
 */
static void
kmeans_split(GcJob *j, const gc_kmeans_params *p, const GcInput *in)
{
	if (p->weights != NULL || in->n < gpuclust_gpu_worker_split_rows ||
		p->gpu_plan.streamed || gpuclust_gpu_worker_gpus_per_call == 1)
		return;
	j->split_max = gc_job_split_most();
	j->split_mem = gc_kmeans_gpu_mem_bytes(gc_kmeans_gpu_shard_rows(in->n, 2), in->d, p->k,
										   gc_kmeans_runs(p), false);
}

gc_code
gc_gpu_run_kmeans(const gc_ctx *ctx, const GcInput *in,
				  const gc_kmeans_params *p, gc_kmeans_result *res,
				  gc_status *st)
{
	GcJob	   *j;
	gc_kmeans_params *jp;
	KmeansResults *jr;
	dsm_segment *out;
	char	   *o;
	Size		k = p->k,
				n = in->n,
				end;			/* the outputs' segment's size */

	/* the plan of the device choice (gc_glue_run_kmeans) */
	Assert(p->gpu_plan.fits && p->gpu_plan.bytes > 0);
	kmeans_by_worker = gc_job_by_worker();
	if (!kmeans_by_worker)
		return gc_kmeans_on_gpu(ctx, in->X, in->n, in->d, p, res, st);

	j = gc_job_begin(GC_ALGO_KMEANS, ctx, in);
	jp = GC_JOB_AREA(j->params, gc_kmeans_params);
	/* the worker admits what the plan allocates, and the run uses it */
	*jp = *p;
	j->mem = p->gpu_plan.bytes;
	kmeans_split(j, p, in);
	j->out_labels = 0;
	j->out_second = MAXALIGN(n * sizeof(int32));
	j->out_centroids = j->out_second + MAXALIGN(n * sizeof(double));

	/*
	 * The weights and initial centroids are this backend's memory: they go
	 * to the worker in the outputs' segment, after the centroids
	 */
	jp->weights = NULL;
	jp->init_centroids = NULL;
	end = MAXALIGN(j->out_centroids + k * in->d * sizeof(float));
	j->in_weights = p->weights != NULL ? end : 0;
	end += p->weights != NULL ? MAXALIGN(n * sizeof(double)) : 0;
	j->in_centroids = p->init == GC_INIT_CENTROIDS ? end : 0;
	end += p->init == GC_INIT_CENTROIDS ? k * in->d * sizeof(float) : 0;
	if ((out = gc_job_segments(j, in, end, st)) == NULL)
		return st->code;
	o = dsm_segment_address(out);
	if (j->in_weights != 0)
		memcpy(o + j->in_weights, p->weights, n * sizeof(double));
	if (j->in_centroids != 0)
		memcpy(o + j->in_centroids, p->init_centroids, k * in->d * sizeof(float));
	if (gc_job_submit(j, st) == GC_OK)
	{
		jr = GC_JOB_AREA(j->results, KmeansResults);
		memcpy(res->labels, o + j->out_labels, n * sizeof(int32));
		if (res->distance != NULL)
			memcpy(res->distance, o + j->out_second, n * sizeof(double));
		memcpy(res->centroids, o + j->out_centroids, k * in->d * sizeof(float));
		res->inertia = jr->kmeans.inertia;
		res->iterations = jr->kmeans.iterations;
		res->converged = jr->kmeans.converged;
		last_kmeans = jr->phases;
	}
	gc_job_release(j, out);
	return st->code;
}

gc_code
gc_gpu_run_kmeans_labels(const gc_ctx *ctx, const GcInput *in, const float *C,
						 int k, int32 *labels, gc_status *st)
{
	GcJob	   *j;
	dsm_segment *out;

	if (!gc_job_by_worker())
		return gc_kmeans_labels_on_gpu(ctx, in->X, in->n, in->d, C, k, labels,
									   st);

	j = gc_job_begin(GC_ALGO_KMEANS_LABELS, ctx, in);
	GC_JOB_AREA(j->params, KmeansLabelsParams)->k = k;
	if ((out = gc_job_array(j, in, gc_kmeans_gpu_mem_bytes(in->n, in->d, k, 1, false),
							C, (Size) k * in->d * sizeof(float),
							labels, in->n * sizeof(int32), st)) == NULL)
		return st->code;
	gc_job_release(j, out);
	return st->code;
}

void
gc_gpu_last_kmeans_phases(gc_kmeans_gpu_phases *out)
{
	if (kmeans_by_worker)
		*out = last_kmeans;
	else
		gc_kmeans_gpu_last_phases(out);
}

/* ---------------------------------------------------------------------
 * The GPU process's side
 * --------------------------------------------------------------------- */

/* the GPU's entry point, or in a test build the CPU's */
typedef gc_code (*KmeansCall) (const gc_ctx *, const float *, int64_t, int,
							   const gc_kmeans_params *, gc_kmeans_result *,
							   gc_status *);

/*
 * k-means on the arrays the backend put in the outputs' segment (weights,
 * initial centroids), its arrays written there
 */
static void
kmeans_call(GcProcJob *r, GcJob *j, KmeansCall kmeans)
{
	KmeansResults *res = GC_JOB_AREA(r->results, KmeansResults);
	gc_kmeans_params p = *GC_JOB_AREA(j->params, gc_kmeans_params);

	if (j->in_weights != 0)
		p.weights = (const double *) (r->o + j->in_weights);
	if (j->in_centroids != 0)
		p.init_centroids = (const float *) (r->o + j->in_centroids);
	/* split over GPUs (r->ctx.n_gpus): each within what the worker holds */
	if (r->ctx.n_gpus > 1)
		p.gpu_mem = j->split_mem;
	res->kmeans.labels = (int32_t *) (r->o + j->out_labels);
	res->kmeans.distance = (double *) (r->o + j->out_second);
	res->kmeans.centroids = (float *) (r->o + j->out_centroids);
	(void) kmeans(&r->ctx, r->X, j->n, j->d, &p, &res->kmeans, &r->status);
}

static void
kmeans_run(GcProcJob *r, GcJob *j)
{
	kmeans_call(r, j, gc_kmeans_on_gpu);
	gc_kmeans_gpu_last_phases(&GC_JOB_AREA(r->results, KmeansResults)->phases);
}

#ifdef GC_TESTING
static void
kmeans_stand_in(GcProcJob *r, GcJob *j)
{
	kmeans_call(r, j, gc_kmeans_cpu);
}
#endif

const GcProcSteps gc_kmeans_proc =
GC_PROC_STEPS(kmeans_run, kmeans_stand_in);

/* the labels for the centres the backend put in the outputs' segment */
static void
kmeans_labels_call(GcProcJob *r, GcJob *j,
				   __typeof__(gc_kmeans_labels_on_gpu) *labels)
{
	(void) labels(&r->ctx, r->X, j->n, j->d,
				  (const float *) (r->o + j->in_array),
				  GC_JOB_AREA(j->params, KmeansLabelsParams)->k,
				  (int32_t *) (r->o + j->out_second), &r->status);
}

GC_PROC_RUN_AND_STAND_IN(kmeans_labels, kmeans_labels_call,
						 gc_kmeans_labels_on_gpu, gc_kmeans_labels_cpu)

const GcProcSteps gc_kmeans_labels_proc =
GC_PROC_STEPS(kmeans_labels_run, kmeans_labels_stand_in);
