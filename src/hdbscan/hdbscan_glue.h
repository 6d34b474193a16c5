/*-------------------------------------------------------------------------
 *
 * hdbscan_glue.h
 *	  HDBSCAN in the glue: its arguments (hdbscan_args.c), its device and
 *	  runs (hdbscan_run.c), its GPU job (hdbscan_job.c), shared by its SQL
 *	  forms: gpu_hdbscan, gpu_hdbscan_tree and gpu_minimum_spanning_tree
 *	  (hdbscan_sql.c) and the window form (hdbscan_window_sql.c).
 *
 * Every form computes phases 1 and 2 (the core distances and the minimum
 * spanning tree of the mutual-reachability graph) on the device dispatch
 * chooses, and phase 3 (the trees, the flat clusters) on the CPU: on the
 * GPU the job (in the GPU worker's process when there is one) is the
 * whole call for gpu_hdbscan and its window form (gc_hdbscan_on_gpu: all
 * on the GPU but the flat selection), phases 1 and 2 and the
 * single-linkage tree for gpu_hdbscan_tree (gc_hdbscan_linkage_on_gpu),
 * whose n - 1 nodes this backend turns into the condensed tree
 * (gc_hdbscan_from_linkage), and the n - 1 edges alone for
 * gpu_minimum_spanning_tree (gc_hdbscan_mst_on_gpu); on the CPU the core's
 * gc_hdbscan_cpu does the three.  Both give the same result bit for bit.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GPUCLUST_HDBSCAN_GLUE_H
#define GPUCLUST_HDBSCAN_GLUE_H

#include "common/algorithm.h"
#include "common/args.h"
#include "common/ingest.h"
#include "common/run.h"
#include "core/common/gpu.h"

/* gpu_hdbscan, gpu_hdbscan_tree and the window form; gpu_minimum_spanning_tree */
extern const GcSignature gc_hdbscan_signature;
extern const GcSignature gc_mst_signature;

/*
 * The readers: the parameters of a (NULLs already checked) into *p and the
 * device requested (NULL: gpuclust.device) into *device, each value
 * checked (22023; the inner_product metric 0A000), with the same errors
 * for every SQL form.  HDBSCAN: min_samples NULL is min_cluster_size
 * (scikit-learn's rule).  The MST: min_samples, alpha and metric; the
 * other fields as HDBSCAN's defaults (unused).
 */
extern void gc_glue_hdbscan_params(const GcArgs *a, gc_hdbscan_params *p,
								   gc_device *device);
extern void gc_glue_mst_params(const GcArgs *a, gc_hdbscan_params *p,
							   gc_device *device);

/*
 * ERROR (22023) unless p's min_samples is at most n, the rows with
 * features the source query returned, as a's function counts it.
 */
extern void gc_glue_hdbscan_check_rows(const GcArgs *a,
									   const gc_hdbscan_params *p, int64 n);

/*
 * The hint for a min_samples larger than the rows when a's min_samples is
 * NULL (so min_cluster_size), else NULL.
 */
extern const char *gc_glue_hdbscan_min_samples_hint(const GcArgs *a);

/*
 * The device of an HDBSCAN or MST call on n rows of d features
 * (gc_choose_device_hdbscan), or an ERROR with the reason; under 'auto' a
 * usable GPU passed over for lack of memory is said in a NOTICE.
 */
extern gc_device gc_glue_choose_hdbscan_device(gc_device requested,
											   const gc_hdbscan_params *p,
											   int64 n, int d);

/* What an HDBSCAN run returns (arrays of in->n, in the caller's memory). */
typedef struct GcHdbscanOut
{
	int32	   *labels;
	double	   *probability;
	double	   *outlier;
	int32		clusters;
	/*
	 * the condensed tree, when asked for: its rows and selected[] copied
	 * into the caller's memory (the core's freed)
	 */
	gc_hdbscan_tree tree;
} GcHdbscanOut;

/*
 * The runs (see common/run.h for what every run function does): HDBSCAN's
 * labels, probabilities and outlier scores, and with want_tree the
 * condensed tree; or the n - 1 edges of the minimum spanning tree alone
 * (*edges, sorted by (w, a, b)).  in->n >= 1 and min_samples <= in->n,
 * checked by the caller.
 */
extern gc_device gc_glue_run_hdbscan(gc_device requested, const GcInput *in,
									 const gc_hdbscan_params *p,
									 MemoryContext cxt, bool want_tree,
									 GcHdbscanOut *out);
extern gc_device gc_glue_run_mst(gc_device requested, const GcInput *in,
								 const gc_hdbscan_params *p,
								 MemoryContext cxt, gc_mst_edge **edges);

/*
 * The rows' results of one call in one block of GC_HDBSCAN_OUT_BYTES a
 * row, what the GPU job returns: the probabilities, the outlier scores,
 * the labels; res's arrays pointed into block (its tree NULL).
 */
#define GC_HDBSCAN_OUT_BYTES (sizeof(double) + sizeof(double) + sizeof(int32))

static inline void
gc_glue_hdbscan_arrays(void *block, int64 n, gc_hdbscan_result *res)
{
	memset(res, 0, sizeof(*res));
	res->probability = (double *) block;
	res->outlier = res->probability + n;
	res->labels = (int32 *) (res->outlier + n);
}

/*
 * HDBSCAN's GPU job (hdbscan_job.c), one of: with res (its arrays laid out
 * by gc_glue_hdbscan_arrays), the whole call, the contract of
 * gc_hdbscan_on_gpu; with nodes, phases 1 and 2 and the single-linkage
 * tree, that of gc_hdbscan_linkage_on_gpu; with edges, phases 1 and 2
 * alone, that of gc_hdbscan_mst_on_gpu (core distances not kept).  Through
 * the GPU worker when the server has one (worker/job.h), else in this
 * backend.
 */
extern gc_code gc_gpu_run_hdbscan(const gc_ctx *ctx, const GcInput *in,
								  const gc_hdbscan_params *p,
								  gc_mst_edge *edges, gc_linkage_node *nodes,
								  gc_hdbscan_result *res, gc_status *st);

/* The phases of this backend's last GPU run of HDBSCAN's phases 1 and 2. */
extern void gc_gpu_last_hdbscan_phases(gc_hdbscan_gpu_phases *out);

/* Its GPU job in the GPU process, for its record (hdbscan_algorithm.c). */
extern const GcProcSteps gc_hdbscan_proc;

#endif							/* GPUCLUST_HDBSCAN_GLUE_H */
