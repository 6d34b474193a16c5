/*-------------------------------------------------------------------------
 *
 * hdbscan_job.c
 *	  The GPU job of HDBSCAN: the backend's side (worker/job.h) and the GPU
 *	  process's (worker/gpu_process.h), which calls no PostgreSQL function.
 *	  The job is phases 1 and 2 and the single-linkage tree
 *	  (gc_hdbscan_linkage_on_gpu), or for the minimum spanning tree alone
 *	  phases 1 and 2 (gc_hdbscan_mst_on_gpu): its output, n - 1 nodes or
 *	  edges of the same size, known in advance, is in the outputs'
 *	  segment; its phase times come back in the job's results.  The
 *	  backend then runs the rest of phase 3 itself (hdbscan_run.c), so
 *	  gpu_hdbscan, gpu_hdbscan_tree and gpu_minimum_spanning_tree share
 *	  this one job.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "hdbscan/hdbscan_glue.h"
#include "worker/gpu_process.h"
#include "worker/job.h"

/* The job's parameters: HDBSCAN's, and whether it wants the nodes. */
typedef struct GcHdbscanJob
{
	gc_hdbscan_params p;
	bool		linkage;
} GcHdbscanJob;

GC_JOB_AREA_FITS(GcHdbscanJob);
GC_JOB_AREA_FITS(gc_hdbscan_gpu_phases);
StaticAssertDecl(sizeof(gc_linkage_node) == sizeof(gc_mst_edge),
				 "the job's output holds nodes or edges");

static gc_hdbscan_gpu_phases last_hdbscan;
static bool hdbscan_by_worker;

gc_code
gc_gpu_run_hdbscan(const gc_ctx *ctx, const GcInput *in,
				   const gc_hdbscan_params *p, gc_mst_edge *edges,
				   gc_linkage_node *nodes, gc_status *st)
{
	GcJob	   *j;
	GcHdbscanJob *params;
	dsm_segment *out;

	hdbscan_by_worker = gc_job_by_worker();
	if (!hdbscan_by_worker)
		return nodes != NULL ?
			gc_hdbscan_linkage_on_gpu(ctx, in->X, in->n, in->d, p, nodes, st) :
			gc_hdbscan_mst_on_gpu(ctx, in->X, in->n, in->d, p, NULL, edges, st);

	j = gc_job_begin(GC_ALGO_HDBSCAN, ctx, in);
	params = GC_JOB_AREA(j->params, GcHdbscanJob);
	params->p = *p;
	params->linkage = nodes != NULL;
	if ((out = gc_job_array(j, in,
							gc_hdbscan_gpu_mem_bytes(in->n, in->d, p->min_samples),
							NULL, 0, nodes != NULL ? (void *) nodes : (void *) edges,
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

/* The job's two entry points on one device. */
typedef struct GcHdbscanEntries
{
	__typeof__(gc_hdbscan_linkage_on_gpu) *linkage;
	__typeof__(gc_hdbscan_mst_on_gpu) *mst;
} GcHdbscanEntries;

static const GcHdbscanEntries hdbscan_gpu = {gc_hdbscan_linkage_on_gpu,
gc_hdbscan_mst_on_gpu};

#ifdef GC_TESTING
static const GcHdbscanEntries hdbscan_cpu = {gc_hdbscan_linkage_cpu,
gc_hdbscan_mst_cpu};
#endif

/*
 * The GPU process's side: the GPU's entry points, or in a test build the
 * CPU's, which take the same arguments; the nodes or edges at out_second.
 */
static void
hdbscan_call(GcProcJob *r, GcJob *j, const GcHdbscanEntries *on)
{
	const GcHdbscanJob *params = GC_JOB_AREA(j->params, GcHdbscanJob);
	void	   *o = r->o + j->out_second;

	if (params->linkage)
		(void) on->linkage(&r->ctx, r->X, j->n, j->d, &params->p,
						   (gc_linkage_node *) o, &r->status);
	else
		(void) on->mst(&r->ctx, r->X, j->n, j->d, &params->p, NULL,
					   (gc_mst_edge *) o, &r->status);
	gc_hdbscan_gpu_last_phases(GC_JOB_AREA(r->results, gc_hdbscan_gpu_phases));
}

GC_PROC_RUN_AND_STAND_IN(hdbscan, hdbscan_call, &hdbscan_gpu, &hdbscan_cpu)

const GcProcSteps gc_hdbscan_proc =
GC_PROC_STEPS(hdbscan_run, hdbscan_stand_in);
