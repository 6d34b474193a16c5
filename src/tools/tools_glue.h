/*-------------------------------------------------------------------------
 *
 * tools_glue.h
 *	  The tools for choosing parameters in the glue: their arguments
 *	  (tools_args.c), devices and runs (tools_run.c), for gpu_kdistance
 *	  (kdistance_sql.c), gpu_silhouette and gpu_cluster_centers
 *	  (labelled_rows_sql.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef GPUCLUST_TOOLS_GLUE_H
#define GPUCLUST_TOOLS_GLUE_H

#include "common/algorithm.h"
#include "common/args.h"
#include "common/ingest.h"
#include "common/run.h"

extern const GcSignature gc_kdistance_signature;
extern const GcSignature gc_silhouette_signature;
extern const GcSignature gc_centers_signature;

/*
 * The readers.  gpu_kdistance: k >= 1, quantiles NULL (every row: 0) or
 * >= 1.  gpu_silhouette: sample_size NULL (0: the default rule) or >= 2,
 * and the seed; *device as the argument asks (NULL: gpuclust.device), the
 * GPU's own checks left to dispatch.
 */
extern void gc_glue_kdistance_params(const GcArgs *a, int64 *k,
									 int32 *quantiles, gc_device *device);
extern void gc_glue_silhouette_params(const GcArgs *a, int64 *sample_size,
									  uint64 *seed, gc_device *device);

/*
 * The tools run the same way: on the device dispatch chooses
 * (gc_choose_device_kdistance, gc_choose_device_silhouette; under 'auto'
 * a NOTICE when a usable GPU was passed over for lack of memory), on the
 * GPU through tools_job.c's runs (gc_gpu_run_kdistance,
 * gc_gpu_run_silhouette, over worker/job.c), with the same fallback.
 * gpu_kdistance's k-distances (1 <= k <= in->n, checked by the caller)
 * into kdist2 (in->n floats, the caller's); gpu_silhouette's score of
 * labels (0 .. m - 1, -1 noise), sample_size 0 for every labelled row,
 * into res: fewer than 2 clusters, or as many as the rows scored, is
 * 22023 on either device.  Both show the device that runs in
 * gpuclust_progress.
 */
extern gc_device gc_glue_run_kdistance(gc_device requested, const GcInput *in,
									   int64 k, float *kdist2);
extern gc_device gc_glue_run_silhouette(gc_device requested, const GcInput *in,
										const int32 *labels, int32 m,
										int64 sample_size, uint64 seed,
										gc_silhouette_result *res);

/*
 * The GPU runs of the k-distances and the silhouette (tools_job.c), the
 * contracts of gc_kdistance_on_gpu and gc_silhouette_on_gpu: through the GPU
 * worker when the server has one (worker/job.h), else in this backend.
 * rows: the rows the silhouette scores (gc_silhouette_rows), which its GPU
 * memory counts.
 */
extern gc_code gc_gpu_run_kdistance(const gc_ctx *ctx, const GcInput *in,
									int64 k, float *kdist2, gc_status *st);
extern gc_code gc_gpu_run_silhouette(const gc_ctx *ctx, const GcInput *in,
									 const int32 *labels, int32 m,
									 int64 sample_size, uint64 seed,
									 int64 rows, gc_silhouette_result *res,
									 gc_status *st);

/* Their GPU jobs in the GPU process, for their records (tools_algorithm.c). */
extern const GcProcSteps gc_kdistance_proc;
extern const GcProcSteps gc_silhouette_proc;

#endif							/* GPUCLUST_TOOLS_GLUE_H */
