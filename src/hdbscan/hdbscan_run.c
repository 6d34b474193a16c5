/*-------------------------------------------------------------------------
 *
 * hdbscan_run.c
 *	  Running HDBSCAN on the rows of a call, shared by every SQL form
 *	  (gpu_hdbscan, gpu_hdbscan_tree, the window form) and by
 *	  gpu_minimum_spanning_tree: the device, the GPU run of phases 1 and 2
 *	  and the single-linkage tree (hdbscan_job.c's gc_gpu_run_hdbscan, over
 *	  worker/job.c) followed by the rest of phase 3 here, the CPU's whole
 *	  call, the fallback to the CPU under 'auto'.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/progress.h"
#include "hdbscan/hdbscan_glue.h"
#include "worker/device.h"
#include "worker/job.h"

gc_device
gc_glue_choose_hdbscan_device(gc_device requested, const gc_hdbscan_params *p,
							  int64 n, int d)
{
	gc_status	st = {GC_OK, ""};
	gc_device	chosen = GC_DEVICE_CPU;
	char		note[256];
	gc_gpu		gpu;

	gc_glue_gpu(&gpu);
	gc_glue_chosen_or_report(gc_choose_device_hdbscan(requested, n, d,
													  p->min_samples, &gpu,
													  &chosen, note,
													  sizeof(note), &st),
							 &st, note, GC_ALGO_HDBSCAN);
	return chosen;
}

/* The CPU's whole call: the MST alone into edges (res NULL), or res. */
static gc_code
cpu_call(const gc_ctx *ctx, const GcInput *in, const gc_hdbscan_params *p,
		 gc_mst_edge *edges, gc_hdbscan_result *res, gc_status *st)
{
	return res == NULL ?
		gc_hdbscan_mst_cpu(ctx, in->X, in->n, in->d, p, NULL, edges, st) :
		gc_hdbscan_cpu(ctx, in->X, in->n, in->d, p, res, st);
}

/* A failure of the core raised, the tree it may have returned freed. */
static void
report(gc_status *st, gc_hdbscan_result *res)
{
	if (res != NULL)
		gc_hdbscan_tree_free(res->tree);
	gc_glue_report(st, gc_algorithm_name(GC_ALGO_HDBSCAN));
}

/*
 * The GPU's run (hdbscan_job.c): for the MST alone (res NULL), phases 1
 * and 2 into edges (in->n - 1 of them); for HDBSCAN the whole call into
 * res; for the condensed tree, phases 1 and 2 and the single-linkage tree
 * there, then the rest of phase 3 here.  Returns false when the GPU's work
 * failed (st says why), for the fallback; a failure on the host is raised
 * as the CPU's is.
 */
static bool
gpu_run(const gc_ctx *ctx, const GcInput *in, const gc_hdbscan_params *p,
		gc_mst_edge *edges, gc_hdbscan_result *res, gc_status *st)
{
	gc_linkage_node *nodes;

	if (res == NULL)
		return gc_gpu_run_hdbscan(ctx, in, p, edges, NULL, NULL, st) == GC_OK;
	if (res->tree == NULL)
		return gc_gpu_run_hdbscan(ctx, in, p, NULL, NULL, res, st) == GC_OK;
	nodes = gc_glue_alloc_array(CurrentMemoryContext, Max(in->n - 1, 1),
								sizeof(gc_linkage_node));
	if (gc_gpu_run_hdbscan(ctx, in, p, NULL, nodes, NULL, st) != GC_OK)
	{
		pfree(nodes);
		return false;
	}
	gc_progress_phase(GC_PHASE_LABEL);
	if (gc_hdbscan_from_linkage(ctx, in->n, nodes, p, res, st) != GC_OK)
		report(st, res);
	pfree(nodes);
	return true;
}

/*
 * The run of a call on the device dispatch chooses (edges and res as
 * gpu_run's), shown in gpuclust_progress, with the algorithms' fallback
 * (gc_glue_gpu_failed) when the GPU's phases fail.  Returns the device
 * that ran; a failure is raised.
 */
static gc_device
run(gc_device requested, const GcInput *in, const gc_hdbscan_params *p,
	gc_mst_edge *edges, gc_hdbscan_result *res)
{
	gc_status	st = {GC_OK, ""};
	gc_device	chosen;
	gc_ctx		ctx;

	Assert(in->n >= 1 && p->min_samples <= in->n);
	if (p->metric == GC_METRIC_COSINE)
		gc_glue_check_no_zero_row(in);
	chosen = gc_glue_choose_hdbscan_device(requested, p, in->n, in->d);
	gc_progress_compute(chosen, in->n);
	gc_glue_ctx(&ctx);
	ctx.n_threads = gc_dbscan_threads(&ctx, in->n);
	if (chosen == GC_DEVICE_GPU && !gpu_run(&ctx, in, p, edges, res, &st))
	{
		chosen = gc_glue_gpu_failed(requested, &st,
									gc_algorithm_name(GC_ALGO_HDBSCAN), NULL);
		gc_progress_compute(chosen, in->n);
	}
	if (chosen == GC_DEVICE_CPU && cpu_call(&ctx, in, p, edges, res, &st) != GC_OK)
		report(&st, res);
	return chosen;
}

/*
 * The core's condensed tree copied into cxt (*dst), then freed (also when
 * the copy's allocation fails).
 */
static void
keep_tree(MemoryContext cxt, gc_hdbscan_tree *src, gc_hdbscan_tree *dst)
{
	*dst = *src;
	PG_TRY();
	{
		dst->rows = gc_glue_alloc_array(cxt, Max(src->nrows, 1),
										sizeof(gc_hdbscan_tree_row));
		dst->selected = gc_glue_alloc_array(cxt, Max(src->nclusters, 1),
											sizeof(int32));
		if (src->nrows > 0)
			memcpy(dst->rows, src->rows,
				   src->nrows * sizeof(gc_hdbscan_tree_row));
		if (src->nclusters > 0)
			memcpy(dst->selected, src->selected,
				   src->nclusters * sizeof(int32));
	}
	PG_FINALLY();
	{
		gc_hdbscan_tree_free(src);
	}
	PG_END_TRY();
}

gc_device
gc_glue_run_hdbscan(gc_device requested, const GcInput *in,
					const gc_hdbscan_params *p, MemoryContext cxt,
					bool want_tree, GcHdbscanOut *out)
{
	gc_hdbscan_result res;
	gc_hdbscan_tree tree;
	gc_device	chosen;

	memset(out, 0, sizeof(*out));
	memset(&tree, 0, sizeof(tree));
	/* one block, which the GPU job fills whole */
	gc_glue_hdbscan_arrays(gc_glue_alloc_array(cxt, in->n, GC_HDBSCAN_OUT_BYTES),
						   in->n, &res);
	out->labels = res.labels;
	out->probability = res.probability;
	out->outlier = res.outlier;
	res.tree = want_tree ? &tree : NULL;

	chosen = run(requested, in, p, NULL, &res);
	out->clusters = res.clusters;
	if (want_tree)
		keep_tree(cxt, &tree, &out->tree);
	return chosen;
}

gc_device
gc_glue_run_mst(gc_device requested, const GcInput *in,
				const gc_hdbscan_params *p, MemoryContext cxt,
				gc_mst_edge **edges)
{
	*edges = gc_glue_alloc_array(cxt, Max(in->n - 1, 1), sizeof(gc_mst_edge));
	return run(requested, in, p, *edges, NULL);
}
