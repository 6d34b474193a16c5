/*-------------------------------------------------------------------------
 *
 * run.h
 *	  Running each algorithm on the rows of a call: one run function per
 *	  algorithm, shared by every SQL form (set-returning, window, model).
 *
 *-------------------------------------------------------------------------
 */
#ifndef GPUCLUST_CLUSTER_RUN_H
#define GPUCLUST_CLUSTER_RUN_H

#include "common/gpuclust.h"
#include "common/ingest.h"

/*
 * The run functions cluster in's rows with features (in->n >= 1; the
 * caller has checked the parameters against the rows), allocating the
 * result arrays (in->n long; k-means: the centroids too) in cxt.  Each
 * runs on the device the set-returning form would use for this problem,
 * with its fallback: under 'auto', a GPU run that fails for lack of
 * memory or with a CUDA error is redone on the CPU with a NOTICE.  They
 * return the device that ran.  Errors are raised.
 */
/*
 * k-means also checks the initial centroids' d against the rows' (22023)
 * and, with sample weights (in->weights, passed to the core), that k rows
 * have a positive weight (22023); under the cosine metric no row and no
 * initial centroid may be all 0 (22000, naming it; DBSCAN's rows too).
 */
extern gc_device gc_glue_run_kmeans(gc_device requested, const GcInput *in,
									const gc_kmeans_params *params,
									MemoryContext cxt, gc_kmeans_result *res);
/*
 * k-means's init given as a query (gc_glue_kmeans_params's init_query):
 * runs it (gc_ingest_centroids) and sets p's initial centroids, in cxt;
 * an ERROR unless it returns k rows.  The set-returning form and the model
 * fit call it after reading the source; the window form refuses an init
 * query.
 */
extern void gc_glue_kmeans_init_query(const char *init_query,
									  gc_kmeans_params *p, MemoryContext cxt);

/*
 * The labels of in's rows (in->n >= 1) for the k given centres C (k x d),
 * into labels (in->n): gc_kmeans_labels_cpu's, on the device gpu_kmeans
 * would take for these rows with n_init 1 (fewer rows than centres: the
 * CPU), with the same fallback.  The kmeans_step aggregate labels each
 * block of its rows so.  Returns the device that ran.
 */
extern gc_device gc_glue_kmeans_labels(gc_device requested, const GcInput *in,
									   const float *C, int k, int32 *labels);

extern gc_device gc_glue_run_dbscan(gc_device requested, const GcInput *in,
									const gc_dbscan_params *params,
									MemoryContext cxt, int32 **labels,
									uint8 **is_core);

/*
 * Affinity propagation runs where dispatch says (gc_choose_device_ap; the
 * argument reader has turned a float4 call's 'auto' into the GPU), with
 * the same fallback, after checking, before anything is allocated, that
 * its n x n matrices fit gpuclust.matrix_memory (at most
 * gpuclust.max_matrix_memory) on either device, the GPU's memory on the
 * GPU and the server's memory on the CPU: too large is an error naming
 * the largest n that fits, but under 'auto' too large for the GPU runs on
 * the CPU when it fits there (a NOTICE says so when the GPU's memory was
 * the reason).  A NOTICE says when it did not iterate or did not converge.
 */
extern gc_device gc_glue_run_ap(gc_device requested, const GcInput *in,
								const gc_ap_params *params,
								MemoryContext cxt, gc_ap_result *res);

/*
 * The tools run the same way: on the device dispatch chooses
 * (gc_choose_device_kdistance, gc_choose_device_silhouette; under 'auto'
 * a NOTICE when a usable GPU was passed over for lack of memory), through
 * worker/job.c on the GPU, with the same fallback.  gpu_kdistance's
 * k-distances (1 <= k <= in->n, checked by the caller) into kdist2 (in->n
 * floats, the caller's); gpu_silhouette's score of labels (0 .. m - 1, -1
 * noise), sample_size 0 for every labelled row, into res: fewer than 2
 * clusters, or as many as the rows scored, is 22023 on either device.
 * Both show the device that runs in gpuclust_progress.
 */
extern gc_device gc_glue_run_kdistance(gc_device requested, const GcInput *in,
									   int64 k, float *kdist2);
extern gc_device gc_glue_run_silhouette(gc_device requested, const GcInput *in,
										const int32 *labels, int32 m,
										int64 sample_size, uint64 seed,
										gc_silhouette_result *res);

#endif							/* GPUCLUST_CLUSTER_RUN_H */
