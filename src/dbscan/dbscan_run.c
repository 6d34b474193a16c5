/*-------------------------------------------------------------------------
 *
 * dbscan_run.c
 *	  Running DBSCAN on the rows of a call, shared by every SQL form
 *	  (set-returning, window, the partition aggregate): the device (dclust
 *	  only on the GPU), the GPU run (dbscan_job.c's gc_gpu_run_dbscan, over
 *	  worker/job.c), the fallback to the CPU under 'auto'.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/progress.h"
#include "dbscan/dbscan_glue.h"
#include "worker/device.h"
#include "worker/job.h"

/* DBSCAN's: dclust runs only on the GPU, so its way to the CPU is union-find. */
const char *
gc_glue_dbscan_gpu_hint(gc_dbscan_algorithm algorithm)
{
	return gc_glue_gpu_only_hint(algorithm != GC_DBSCAN_UNION_FIND,
						 psprintf("DBSCAN algorithm %s", gc_dbscan_algorithm_name(algorithm)),
						 "algorithm => 'union_find' gives the same labels on the CPU");
}

/*
 * The device of a DBSCAN call of algorithm (gc_choose_device_dbscan), or
 * an ERROR with the reason (for dclust, whose request is the GPU even
 * under 'auto', with gc_glue_dbscan_gpu_hint's hint).
 */
gc_device
gc_glue_choose_dbscan_device(gc_device requested,
							 gc_dbscan_algorithm algorithm, int64 n, int d)
{
	gc_status	st = {GC_OK, ""};
	gc_device	chosen = GC_DEVICE_CPU;
	gc_gpu		gpu;

	gc_glue_gpu(&gpu);
	if (gc_choose_device_dbscan(requested, algorithm, n, d, &gpu, &chosen,
								&st) != GC_OK)
		gc_glue_report_hint(&st, gc_algorithm_name(GC_ALGO_DBSCAN),
							gc_glue_dbscan_gpu_hint(algorithm));
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
		gc_glue_check_no_zero_row(in);
	*labels = gc_glue_alloc_array(cxt, in->n, sizeof(int32));
	*is_core = gc_glue_alloc_array(cxt, in->n, sizeof(uint8));

	chosen = gc_glue_choose_dbscan_device(requested, params->algorithm,
										  in->n, in->d);
	gc_progress_compute(chosen, in->n);
	gc_glue_ctx(&ctx);
	ctx.n_threads = gc_dbscan_threads(&ctx, in->n);
	if (chosen == GC_DEVICE_GPU &&
		gc_gpu_run_dbscan(&ctx, in, params, *labels, *is_core, &st) != GC_OK)
	{
		chosen = gc_glue_gpu_failed(requested, &st, gc_algorithm_name(GC_ALGO_DBSCAN),
							gc_glue_dbscan_gpu_hint(params->algorithm));
		gc_progress_compute(chosen, in->n);
	}
	if (chosen == GC_DEVICE_CPU &&
		gc_dbscan_cpu(&ctx, in->X, in->n, in->d, params, *labels, *is_core,
					  &st) != GC_OK)
		gc_glue_report(&st, gc_algorithm_name(GC_ALGO_DBSCAN));
	return chosen;
}
