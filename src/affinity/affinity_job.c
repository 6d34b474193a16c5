/*-------------------------------------------------------------------------
 *
 * affinity_job.c
 *	  The GPU job of affinity propagation: the backend's side (worker/job.h)
 *	  and the GPU process's (worker/gpu_process.h), which calls no
 *	  PostgreSQL function.  Its outputs, the labels and is_exemplar, are in
 *	  the outputs' segment; its result's scalars and phase times come back
 *	  in the job's results.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "affinity/affinity_glue.h"
#include "worker/gpu_process.h"
#include "worker/job.h"

GC_JOB_AREA_FITS(gc_ap_params);
GC_JOB_AREA_FITS(gc_ap_result);

/*
 * Whether job j may split over several GPUs (cuda/affinity/affinity.cu: S,
 * R and A by rows): at least gc_ap_split_rows(gpuclust.gpu_worker_split_rows)
 * rows, and the session's gpuclust.gpu_worker_gpus_per_call not 1.  Each
 * GPU, the first too, then holds a part of a two GPUs' split, the largest
 * any split makes.  A call too large for one GPU must split
 * (gc_job_split_min): each GPU then holds a part of the fewest GPUs' split
 * that fits.  Returns the memory of the job's first GPU.
 */
static size_t
ap_split(GcJob *j, const GcInput *in, gc_ap_precision precision)
{
	size_t		one = gc_ap_gpu_mem_bytes(in->n, in->d, precision),
				part[GC_WORKER_MAX_GPUS + 1];

	if (gpuclust_gpu_worker_gpus_per_call == 1)
		return one;
	for (int g = 2; g <= GC_WORKER_MAX_GPUS; g++)
		part[g] = gc_ap_gpu_split_mem_bytes(in->n, in->d, precision, g);
	if (in->n >= gc_ap_split_rows(gpuclust_gpu_worker_split_rows))
	{
		j->split_max = gc_job_split_most();
		j->split_mem = part[2];
	}
	return gc_job_split_min(j, one, part);
}

gc_code
gc_gpu_run_ap(const gc_ctx *ctx, const GcInput *in, const gc_ap_params *p,
			  gc_ap_result *res, gc_status *st)
{
	GcJob	   *j;
	dsm_segment *out;
	int32	   *labels = res->labels;
	uint8	   *is_exemplar = res->is_exemplar;

	if (!gc_job_by_worker())
		return gc_ap_on_gpu(ctx, in->X, in->n, in->d, p, res, st);

	j = gc_job_begin(GC_ALGO_AP, ctx, in);
	*GC_JOB_AREA(j->params, gc_ap_params) = *p;
	if ((out = gc_job_labelling(j, in, ap_split(j, in, p->precision),
								labels, is_exemplar, st)) == NULL)
		return st->code;
	if (st->code == GC_OK)
	{
		/*
		 * the scalars and phase times; the arrays are this backend's (the
		 * pointers in the slot are the GPU process's)
		 */
		*res = *GC_JOB_AREA(j->results, gc_ap_result);
		res->labels = labels;
		res->is_exemplar = is_exemplar;
	}
	gc_job_release(j, out);
	return st->code;
}

/* the outputs in the segment */
static gc_ap_result *
ap_job(GcProcJob *r, GcJob *j)
{
	gc_ap_result *res = GC_JOB_AREA(r->results, gc_ap_result);

	res->labels = (int32_t *) (r->o + j->out_labels);
	res->is_exemplar = (uint8_t *) (r->o + j->out_second);
	return res;
}

static void
ap_run(GcProcJob *r, GcJob *j)
{
	(void) gc_ap_on_gpu(&r->ctx, r->X, j->n, j->d,
					 GC_JOB_AREA(j->params, gc_ap_params), ap_job(r, j),
					 &r->status);
}

#ifdef GC_TESTING
/* test builds: float8 on the CPU; float4 is the GPU's own arithmetic */
static void
ap_stand_in(GcProcJob *r, GcJob *j)
{
	const gc_ap_params *p = GC_JOB_AREA(j->params, gc_ap_params);
	gc_ap_result *res = ap_job(r, j);

	if (p->precision == GC_AP_FLOAT8)
		(void) gc_ap_cpu(&r->ctx, r->X, j->n, j->d, p, res, &r->status);
	else
		gc_fail(&r->status, GC_EDEVICE,
				"affinity propagation in %s runs only on a real GPU, and gpuclust.gpu_worker_emulate runs the GPU worker's jobs on the CPU",
				gc_ap_precision_name(p->precision));
}
#endif

const GcProcSteps gc_ap_proc =
GC_PROC_STEPS(ap_run, ap_stand_in);
