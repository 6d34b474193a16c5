/*-------------------------------------------------------------------------
 *
 * job.h
 *	  A backend's side of the GPU (worker/job.c): the GPU that dispatch sees,
 *	  the GPU runs themselves (through the GPU worker when the server has
 *	  one, else in this backend), the shared memory that ingest writes the
 *	  matrix into, and the phases of the last GPU run.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GPUCLUST_GPUJOB_H
#define GPUCLUST_GPUJOB_H

#include "storage/dsm.h"

#include "common/gpuclust.h"
#include "common/shared_memory.h"
#include "worker/queue.h"
#include "core/common/gpu.h"

struct GcInput;

/*
 * The worker's state once it is settled: while it starts or restarts, the
 * caller waits (interruptibly) a few seconds for it to run.
 */
extern GcWorkerState gc_job_worker_settled(void);

/*
 * The GPU as dispatch sees it: the worker's (its state, its device's
 * memory budget; always warm), or this backend's own CUDA when there is
 * no worker.  Neither initialises CUDA here until a call needs it, and the
 * worker's never does in a backend.
 */
extern void gc_glue_gpu(gc_gpu *gpu);

/* Sets gc_shared_wanted: ingest writes matrices into DSM while the worker takes jobs. */
extern void gc_job_init(void);

/*
 * The GPU runs of k-means, DBSCAN and affinity propagation on in's rows,
 * the contract of gc_kmeans_gpu / gc_dbscan_on_gpu / gc_ap_gpu: through
 * the worker when configured (waiting interruptibly; cancel and
 * statement_timeout cancel the job), else in this backend.  Affinity
 * propagation's phase times come back in res either way.
 */
extern gc_code gc_gpu_run_kmeans(const gc_ctx *ctx, const struct GcInput *in,
								 const gc_kmeans_params *p,
								 gc_kmeans_result *res, gc_status *st);
extern gc_code gc_gpu_run_dbscan(const gc_ctx *ctx, const struct GcInput *in,
								 const gc_dbscan_params *p, int32 *labels,
								 uint8 *is_core, gc_status *st);
extern gc_code gc_gpu_run_ap(const gc_ctx *ctx, const struct GcInput *in,
							 const gc_ap_params *p, gc_ap_result *res,
							 gc_status *st);

/*
 * The GPU runs of gpu_kdistance's k-distances and gpu_silhouette, the
 * contract of gc_kdistance_gpu / gc_silhouette_gpu, the same way: with the
 * worker, the silhouette's labels go to it in the job's outputs' segment,
 * the k-distances come back there and the silhouette's result in the job
 * (also when it fails: GC_EINVAL's rows and clusters).  rows: the rows
 * the silhouette scores (gc_silhouette_rows), which its GPU memory counts.
 */
extern gc_code gc_gpu_run_kdistance(const gc_ctx *ctx, const struct GcInput *in,
									int64 k, float *kdist2, gc_status *st);
extern gc_code gc_gpu_run_silhouette(const gc_ctx *ctx,
									 const struct GcInput *in,
									 const int32 *labels, int32 m,
									 int64 sample_size, uint64 seed,
									 int64 rows, gc_silhouette_result *res,
									 gc_status *st);

/*
 * The labels of in's rows for the k given centres C (the kmeans_step
 * aggregate's block), the contract of gc_kmeans_labels_gpu, the same way:
 * with the worker, C goes to it in the job's outputs' segment and the
 * labels come back there.
 */
extern gc_code gc_gpu_run_kmeans_labels(const gc_ctx *ctx,
										const struct GcInput *in,
										const float *C, int k, int32 *labels,
										gc_status *st);

/* The phases of this backend's last GPU run of each algorithm. */
extern void gc_gpu_last_kmeans_phases(gc_kmeans_gpu_phases *out);
extern void gc_gpu_last_dbscan_phases(gc_dbscan_gpu_phases *out);

#endif							/* GPUCLUST_GPUJOB_H */
