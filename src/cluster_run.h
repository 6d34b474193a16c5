/*-------------------------------------------------------------------------
 *
 * cluster_run.h
 *	  Running each algorithm on the rows of a call: one run function per
 *	  algorithm, shared by every SQL form (set-returning, window, model).
 *
 *-------------------------------------------------------------------------
 */
#ifndef GPUCLUST_CLUSTER_RUN_H
#define GPUCLUST_CLUSTER_RUN_H

#include "gpuclust.h"
#include "ingest.h"

/*
 * The run functions cluster in's rows with features (in->n >= 1; the
 * caller has checked the parameters against the rows), allocating the
 * result arrays (in->n long; k-means: the centroids too) in cxt.  k-means
 * and DBSCAN run on the device the set-returning form would use for this
 * problem, with its fallback: under 'auto', a GPU run that fails for lack
 * of memory or with a CUDA error is redone on the CPU with a NOTICE.  They
 * return the device that ran.  Errors are raised.
 */
extern gc_device gc_glue_run_kmeans(gc_device requested, const GcInput *in,
									const gc_kmeans_params *params,
									MemoryContext cxt, gc_kmeans_result *res);
extern gc_device gc_glue_run_dbscan(gc_device requested, const GcInput *in,
									const gc_dbscan_params *params,
									MemoryContext cxt, int32 **labels,
									uint8 **is_core);

/*
 * Affinity propagation runs on the CPU (the argument reader refused
 * 'gpu'), after checking that its n x n matrices fit
 * gpuclust.max_matrix_memory and the server's memory; a NOTICE says when
 * it did not iterate or did not converge.
 */
extern gc_device gc_glue_run_ap(gc_device requested, const GcInput *in,
								const gc_ap_params *params,
								MemoryContext cxt, gc_ap_result *res);

#endif							/* GPUCLUST_CLUSTER_RUN_H */
