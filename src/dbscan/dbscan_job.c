/*-------------------------------------------------------------------------
 *
 * dbscan_job.c
 *	  The GPU job of DBSCAN: the backend's side (worker/job.h) and the GPU
 *	  process's (worker/gpu_process.h), which calls no PostgreSQL function.
 *	  Its outputs, the labels and is_core, are in the outputs' segment; its
 *	  phase times come back in the job's results.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "dbscan/dbscan_glue.h"
#include "worker/gpu_process.h"
#include "worker/job.h"

GC_JOB_AREA_FITS(gc_dbscan_params);
GC_JOB_AREA_FITS(gc_dbscan_gpu_phases);

static gc_dbscan_gpu_phases last_dbscan;
static bool dbscan_by_worker;

/*
 * Whether job j may split over several GPUs (cuda/dbscan/dbscan_multi.cu):
 * at least gc_dbscan_split_rows(gpuclust.gpu_worker_split_rows, d) rows,
 * and the session's gpuclust.gpu_worker_gpus_per_call not 1.  Each GPU
 * holds one GPU's plan of the whole call: a slab's rows, halo included,
 * are fewer.
 */
static void
dbscan_split(GcJob *j, const GcInput *in)
{
	if (in->n < gc_dbscan_split_rows(gpuclust_gpu_worker_split_rows, in->d) ||
		gpuclust_gpu_worker_gpus_per_call == 1)
		return;
	j->split_max = gc_job_split_most();
	j->split_mem = gc_dbscan_gpu_mem_bytes(in->n, in->d);
}

gc_code
gc_gpu_run_dbscan(const gc_ctx *ctx, const GcInput *in,
				  const gc_dbscan_params *p, int32 *labels, uint8 *is_core,
				  gc_status *st)
{
	GcJob	   *j;
	dsm_segment *out;

	dbscan_by_worker = gc_job_by_worker();
	if (!dbscan_by_worker)
		return gc_dbscan_on_gpu(ctx, in->X, in->n, in->d, p, labels, is_core,
								st);

	j = gc_job_begin(GC_ALGO_DBSCAN, ctx, in);
	*GC_JOB_AREA(j->params, gc_dbscan_params) = *p;
	dbscan_split(j, in);
	if ((out = gc_job_labelling(j, in, gc_dbscan_gpu_mem_bytes(in->n, in->d),
								labels, is_core, st)) == NULL)
		return st->code;
	if (st->code == GC_OK)
		last_dbscan = *GC_JOB_AREA(j->results, gc_dbscan_gpu_phases);
	gc_job_release(j, out);
	return st->code;
}

void
gc_gpu_last_dbscan_phases(gc_dbscan_gpu_phases *out)
{
	if (dbscan_by_worker)
		*out = last_dbscan;
	else
		gc_dbscan_gpu_last_phases(out);
}

static void
dbscan_run(GcProcJob *r, GcJob *j)
{
	(void) gc_dbscan_on_gpu(&r->ctx, r->X, j->n, j->d,
							GC_JOB_AREA(j->params, gc_dbscan_params),
							(int32_t *) (r->o + j->out_labels),
							(uint8_t *) (r->o + j->out_second), &r->status);
	gc_dbscan_gpu_last_phases(GC_JOB_AREA(r->results, gc_dbscan_gpu_phases));
}

#ifdef GC_TESTING
/* test builds: dclust, which runs only on the GPU, by union-find (the same labels) */
static void
dbscan_stand_in(GcProcJob *r, GcJob *j)
{
	gc_dbscan_params p = *GC_JOB_AREA(j->params, gc_dbscan_params);

	p.algorithm = GC_DBSCAN_UNION_FIND;
	(void) gc_dbscan_cpu(&r->ctx, r->X, j->n, j->d, &p,
						 (int32_t *) (r->o + j->out_labels),
						 (uint8_t *) (r->o + j->out_second), &r->status);
}
#endif

const GcProcSteps gc_dbscan_proc =
GC_PROC_STEPS(dbscan_run, dbscan_stand_in);
