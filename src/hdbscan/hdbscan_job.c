/*-------------------------------------------------------------------------
 *
 * hdbscan_job.c
 *	  The GPU job of HDBSCAN: the backend's side (worker/job.h) and the GPU
 *	  process's (worker/gpu_process.h), which calls no PostgreSQL function.
 *	  The job is phases 1 and 2 (gc_hdbscan_mst_on_gpu): its output, the
 *	  n - 1 edges of the minimum spanning tree, has a size known in
 *	  advance, in the outputs' segment; its phase times come back in the
 *	  job's results.  The backend then runs phase 3 itself
 *	  (hdbscan_run.c), so gpu_hdbscan, gpu_hdbscan_tree and
 *	  gpu_minimum_spanning_tree share this one job.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "hdbscan/hdbscan_glue.h"
#include "worker/gpu_process.h"
#include "worker/job.h"

GC_JOB_AREA_FITS(gc_hdbscan_params);
GC_JOB_AREA_FITS(gc_hdbscan_gpu_phases);

static gc_hdbscan_gpu_phases last_hdbscan;
static bool hdbscan_by_worker;

gc_code
gc_gpu_run_hdbscan_mst(const gc_ctx *ctx, const GcInput *in,
					   const gc_hdbscan_params *p, gc_mst_edge *edges,
					   gc_status *st)
{
	GcJob	   *j;
	dsm_segment *out;

	hdbscan_by_worker = gc_job_by_worker();
	if (!hdbscan_by_worker)
		return gc_hdbscan_mst_on_gpu(ctx, in->X, in->n, in->d, p, NULL, edges,
									 st);

	j = gc_job_begin(GC_ALGO_HDBSCAN, ctx, in);
	*GC_JOB_AREA(j->params, gc_hdbscan_params) = *p;
	if ((out = gc_job_array(j, in,
							gc_hdbscan_gpu_mem_bytes(in->n, in->d, p->min_samples),
							NULL, 0, edges,
							(Size) (in->n - 1) * sizeof(gc_mst_edge), st)) == NULL)
		return st->code;
	if (st->code == GC_OK)
		last_hdbscan = *GC_JOB_AREA(j->results, gc_hdbscan_gpu_phases);
	gc_job_release(j, out);
	return st->code;
}

void
gc_gpu_last_hdbscan_phases(gc_hdbscan_gpu_phases *out)
{
	if (hdbscan_by_worker)
		*out = last_hdbscan;
	else
		gc_hdbscan_gpu_last_phases(out);
}

/*
 * The GPU process's side: the GPU's entry point, or in a test build the
 * CPU's, which takes the same arguments; the edges at out_second.
 */
static void
hdbscan_call(GcProcJob *r, GcJob *j,
			 __typeof__(gc_hdbscan_mst_on_gpu) *mst)
{
	(void) mst(&r->ctx, r->X, j->n, j->d,
			   GC_JOB_AREA(j->params, gc_hdbscan_params), NULL,
			   (gc_mst_edge *) (r->o + j->out_second), &r->status);
	gc_hdbscan_gpu_last_phases(GC_JOB_AREA(r->results, gc_hdbscan_gpu_phases));
}

GC_PROC_RUN_AND_STAND_IN(hdbscan, hdbscan_call, gc_hdbscan_mst_on_gpu,
						 gc_hdbscan_mst_cpu)

const GcProcSteps gc_hdbscan_proc =
GC_PROC_STEPS(hdbscan_run, hdbscan_stand_in);
