/*-------------------------------------------------------------------------
 *
 * tools_job.c
 *	  The GPU jobs of gpu_kdistance's k-distances and of gpu_silhouette:
 *	  the backend's side (worker/job.h) and the GPU process's
 *	  (worker/gpu_process.h), which calls no PostgreSQL function.  The
 *	  k-distances come back in the outputs' segment; the silhouette's
 *	  labels go to the GPU process there and its result comes back in the
 *	  job's results (also when it fails: GC_EINVAL's rows and clusters).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "tools/tools_glue.h"
#include "worker/gpu_process.h"
#include "worker/job.h"

typedef struct KdistanceParams
{
	int64		k;
} KdistanceParams;

typedef struct SilhouetteParams
{
	int32		m;				/* labels 0 .. m - 1 */
	int64		sample_size;
	uint64		seed;
} SilhouetteParams;

GC_JOB_AREA_FITS(KdistanceParams);
GC_JOB_AREA_FITS(SilhouetteParams);
GC_JOB_AREA_FITS(gc_silhouette_result);

/* ---------------------------------------------------------------------
 * The backend's side
 * --------------------------------------------------------------------- */

gc_code
gc_gpu_run_kdistance(const gc_ctx *ctx, const GcInput *in, int64 k,
					 float *kdist2, gc_status *st)
{
	GcJob	   *j;
	dsm_segment *out;

	if (!gc_job_by_worker())
		return gc_kdistance_on_gpu(ctx, in->X, in->n, in->d, k, kdist2, st);

	j = gc_job_begin(GC_ALGO_KDISTANCE, ctx, in);
	GC_JOB_AREA(j->params, KdistanceParams)->k = k;
	if ((out = gc_job_array(j, in, gc_kdistance_gpu_mem_bytes(in->n, in->d, k),
							NULL, 0, kdist2, in->n * sizeof(float), st)) == NULL)
		return st->code;
	gc_job_release(j, out);
	return st->code;
}

gc_code
gc_gpu_run_silhouette(const gc_ctx *ctx, const GcInput *in,
					  const int32 *labels, int32 m, int64 sample_size,
					  uint64 seed, int64 rows, gc_silhouette_result *res,
					  gc_status *st)
{
	GcJob	   *j;
	SilhouetteParams *jp;
	dsm_segment *out;

	if (!gc_job_by_worker())
		return gc_silhouette_on_gpu(ctx, in->X, in->n, in->d, labels, m,
								 sample_size, seed, res, st);

	j = gc_job_begin(GC_ALGO_SILHOUETTE, ctx, in);
	jp = GC_JOB_AREA(j->params, SilhouetteParams);
	jp->m = m;
	jp->sample_size = sample_size;
	jp->seed = seed;
	memset(GC_JOB_AREA(j->results, gc_silhouette_result), 0,
		   sizeof(gc_silhouette_result));
	if ((out = gc_job_array(j, in, gc_silhouette_gpu_mem_bytes(rows, in->d, m),
							labels, in->n * sizeof(int32), NULL, 0, st)) == NULL)
		return st->code;
	/* the scalars, also of a failure (GC_EINVAL names the rows, clusters) */
	*res = *GC_JOB_AREA(j->results, gc_silhouette_result);
	gc_job_release(j, out);
	return st->code;
}

/* ---------------------------------------------------------------------
 * The GPU process's side: the GPU's entry points, or in a test build the
 * CPU's, which take the same arguments
 * --------------------------------------------------------------------- */

static void
kdistance_call(GcProcJob *r, GcJob *j,
			   __typeof__(gc_kdistance_on_gpu) *kdistance)
{
	(void) kdistance(&r->ctx, r->X, j->n, j->d,
					 GC_JOB_AREA(j->params, KdistanceParams)->k,
					 (float *) (r->o + j->out_second), &r->status);
}

GC_PROC_RUN_AND_STAND_IN(kdistance, kdistance_call, gc_kdistance_on_gpu,
						 gc_kdistance_cpu)

const GcProcSteps gc_kdistance_proc =
GC_PROC_STEPS(kdistance_run, kdistance_stand_in);

/* the labels the backend put in the outputs' segment */
static void
silhouette_call(GcProcJob *r, GcJob *j,
				__typeof__(gc_silhouette_on_gpu) *silhouette)
{
	const SilhouetteParams *p = GC_JOB_AREA(j->params, SilhouetteParams);

	(void) silhouette(&r->ctx, r->X, j->n, j->d,
					  (const int32_t *) (r->o + j->in_array),
					  p->m, p->sample_size, p->seed,
					  GC_JOB_AREA(r->results, gc_silhouette_result), &r->status);
}

GC_PROC_RUN_AND_STAND_IN(silhouette, silhouette_call, gc_silhouette_on_gpu,
						 gc_silhouette_cpu)

const GcProcSteps gc_silhouette_proc =
GC_PROC_STEPS(silhouette_run, silhouette_stand_in);
