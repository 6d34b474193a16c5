/*-------------------------------------------------------------------------
 *
 * tools_run.c
 *	  Running the tools for choosing parameters on the rows of a call:
 *	  gpu_kdistance's k-distances and gpu_silhouette's score, each on the
 *	  device dispatch chooses, on the GPU through tools_job.c's runs
 *	  (gc_gpu_run_*, over worker/job.c), with the algorithms' fallback to
 *	  the CPU under 'auto'.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/progress.h"
#include "tools/tools_glue.h"
#include "worker/device.h"
#include "worker/job.h"

/*
 * The device of a tool's call, as k-means's: algo GC_ALGO_KDISTANCE
 * (gc_choose_device_kdistance; param k) on n rows, or GC_ALGO_SILHOUETTE
 * (gc_choose_device_silhouette; param m) scoring n rows; a failure under
 * 'gpu' raised (0A000 with the reason, 53200 when the GPU's memory is too
 * small), a usable GPU passed over under 'auto' for lack of memory said in
 * a NOTICE.
 */
static gc_device
choose_tool_device(gc_algorithm algo, gc_device requested, int64 n, int d,
				   int64 param)
{
	gc_status	st = {GC_OK, ""};
	gc_device	chosen = GC_DEVICE_CPU;
	char		note[256];
	gc_gpu		gpu;

	Assert(algo == GC_ALGO_KDISTANCE || algo == GC_ALGO_SILHOUETTE);
	gc_glue_gpu(&gpu);
	gc_glue_chosen_or_report(algo == GC_ALGO_KDISTANCE ?
					 gc_choose_device_kdistance(requested, n, d, param, &gpu,
												&chosen, note, sizeof(note),
												&st) :
					 gc_choose_device_silhouette(requested, n, d,
												 (int32) param, &gpu, &chosen,
												 note, sizeof(note), &st),
					 &st, note, algo);
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

/* c's core call on in's rows on device (the GPU's: tools_job.c's runs). */
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
 * gpuclust_progress, with the algorithms' fallback (gc_glue_gpu_failed);
 * a GPU run's GC_EINVAL (the input, which the CPU would refuse too) is
 * not redone.  Returns the device that ran; a failure is left in st.
 */
static gc_device
run_tool(gc_device requested, const GcInput *in, int64 rows, int64 param,
		 const ToolCall *c, gc_status *st)
{
	gc_device	chosen;
	gc_ctx		ctx;

	chosen = choose_tool_device(c->algo, requested, rows, in->d, param);
	gc_progress_compute(chosen, in->n);
	gc_glue_ctx(&ctx);
	if (chosen == GC_DEVICE_GPU &&
		tool_call(&ctx, in, GC_DEVICE_GPU, c, st) != GC_OK &&
		st->code != GC_EINVAL)
	{
		chosen = gc_glue_gpu_failed(requested, st, gc_algorithm_name(c->algo), NULL);
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
