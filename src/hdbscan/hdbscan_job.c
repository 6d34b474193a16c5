/*-------------------------------------------------------------------------
 *
 * hdbscan_job.c
 *	  The GPU job of HDBSCAN: the backend's side (worker/job.h) and the GPU
 *	  process's (worker/gpu_process.h), which calls no PostgreSQL function.
 *	  The job is, for gpu_hdbscan, the whole call (gc_hdbscan_on_gpu:
 *	  its output the rows' probabilities, outlier scores and labels, in
 *	  GC_HDBSCAN_OUT_BYTES a row laid out as gc_glue_hdbscan_arrays lays
 *	  them); for gpu_hdbscan_tree phases 1 and 2 and the single-linkage
 *	  tree (gc_hdbscan_linkage_on_gpu: n - 1 nodes), the backend going on
 *	  with phase 3 (hdbscan_run.c); for gpu_minimum_spanning_tree phases 1
 *	  and 2 (gc_hdbscan_mst_on_gpu: n - 1 edges).  Each output's size is
 *	  known in advance, in the outputs' segment; the phase times and the
 *	  clusters come back in the job's results.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "hdbscan/hdbscan_glue.h"
#include "worker/gpu_process.h"
#include "worker/job.h"

/* What the job returns. */
typedef enum GcHdbscanJobOut
{
	GC_HDBSCAN_JOB_EDGES,
	GC_HDBSCAN_JOB_NODES,
	GC_HDBSCAN_JOB_ROWS
} GcHdbscanJobOut;

/* The job's parameters: HDBSCAN's, and what it returns. */
typedef struct GcHdbscanJob
{
	gc_hdbscan_params p;
	GcHdbscanJobOut out;
} GcHdbscanJob;

/* Its results: the phases, and the clusters of the rows' labels. */
typedef struct GcHdbscanJobResults
{
	gc_hdbscan_gpu_phases phases;
	int32		clusters;
} GcHdbscanJobResults;

GC_JOB_AREA_FITS(GcHdbscanJob);
GC_JOB_AREA_FITS(GcHdbscanJobResults);
StaticAssertDecl(sizeof(gc_linkage_node) == sizeof(gc_mst_edge),
				 "the job's output holds nodes or edges");

static gc_hdbscan_gpu_phases last_hdbscan;
static bool hdbscan_by_worker;

gc_code
gc_gpu_run_hdbscan(const gc_ctx *ctx, const GcInput *in,
				   const gc_hdbscan_params *p, gc_mst_edge *edges,
				   gc_linkage_node *nodes, gc_hdbscan_result *res,
				   gc_status *st)
{
	GcJob	   *j;
	GcHdbscanJob *params;
	dsm_segment *out;
	void	   *o = res != NULL ? (void *) res->probability :
		nodes != NULL ? (void *) nodes : (void *) edges;
	Size		bytes = res != NULL ? (Size) in->n * GC_HDBSCAN_OUT_BYTES :
		(Size) (in->n - 1) * sizeof(gc_mst_edge);

	hdbscan_by_worker = gc_job_by_worker();
	if (!hdbscan_by_worker)
		return res != NULL ?
			gc_hdbscan_on_gpu(ctx, in->X, in->n, in->d, p, res, st) :
			nodes != NULL ?
			gc_hdbscan_linkage_on_gpu(ctx, in->X, in->n, in->d, p, nodes, st) :
			gc_hdbscan_mst_on_gpu(ctx, in->X, in->n, in->d, p, NULL, edges, st);

	/* the rows' results come back as one block (gc_glue_hdbscan_arrays) */
	Assert(res == NULL || (res->outlier == res->probability + in->n &&
						   res->labels == (int32 *) (res->outlier + in->n)));
	j = gc_job_begin(GC_ALGO_HDBSCAN, ctx, in);
	params = GC_JOB_AREA(j->params, GcHdbscanJob);
	params->p = *p;
	params->out = res != NULL ? GC_HDBSCAN_JOB_ROWS :
		nodes != NULL ? GC_HDBSCAN_JOB_NODES : GC_HDBSCAN_JOB_EDGES;
	if ((out = gc_job_array(j, in,
							gc_hdbscan_gpu_mem_bytes(in->n, in->d, p->min_samples),
							NULL, 0, o, bytes, st)) == NULL)
		return st->code;
	if (st->code == GC_OK)
	{
		const GcHdbscanJobResults *r = GC_JOB_AREA(j->results, GcHdbscanJobResults);

		last_hdbscan = r->phases;
		if (res != NULL)
			res->clusters = r->clusters;
	}
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

/* The job's entry points on one device. */
typedef struct GcHdbscanEntries
{
	__typeof__(gc_hdbscan_on_gpu) *rows;
	__typeof__(gc_hdbscan_linkage_on_gpu) *linkage;
	__typeof__(gc_hdbscan_mst_on_gpu) *mst;
} GcHdbscanEntries;

static const GcHdbscanEntries hdbscan_gpu = {gc_hdbscan_on_gpu,
gc_hdbscan_linkage_on_gpu, gc_hdbscan_mst_on_gpu};

#ifdef GC_TESTING
static const GcHdbscanEntries hdbscan_cpu = {gc_hdbscan_cpu,
gc_hdbscan_linkage_cpu, gc_hdbscan_mst_cpu};
#endif

/*
 * The GPU process's side: the GPU's entry points, or in a test build the
 * CPU's, which take the same arguments; the output at out_second.
 */
static void
hdbscan_call(GcProcJob *r, GcJob *j, const GcHdbscanEntries *on)
{
	const GcHdbscanJob *params = GC_JOB_AREA(j->params, GcHdbscanJob);
	GcHdbscanJobResults *results = GC_JOB_AREA(r->results, GcHdbscanJobResults);
	void	   *o = r->o + j->out_second;
	gc_hdbscan_result res;

	results->clusters = 0;
	switch (params->out)
	{
		case GC_HDBSCAN_JOB_ROWS:
			gc_glue_hdbscan_arrays(o, j->n, &res);
			(void) on->rows(&r->ctx, r->X, j->n, j->d, &params->p, &res, &r->status);
			results->clusters = res.clusters;
			break;
		case GC_HDBSCAN_JOB_NODES:
			(void) on->linkage(&r->ctx, r->X, j->n, j->d, &params->p,
							   (gc_linkage_node *) o, &r->status);
			break;
		case GC_HDBSCAN_JOB_EDGES:
			(void) on->mst(&r->ctx, r->X, j->n, j->d, &params->p, NULL,
						   (gc_mst_edge *) o, &r->status);
			break;
	}
	gc_hdbscan_gpu_last_phases(&results->phases);
}

GC_PROC_RUN_AND_STAND_IN(hdbscan, hdbscan_call, &hdbscan_gpu, &hdbscan_cpu)

const GcProcSteps gc_hdbscan_proc =
GC_PROC_STEPS(hdbscan_run, hdbscan_stand_in);
