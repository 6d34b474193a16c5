/*-------------------------------------------------------------------------
 *
 * cluster_run.h
 *	  Running the core on the chosen device, and emitting labels: shared by
 *	  every SQL function.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GPUCLUST_CLUSTER_RUN_H
#define GPUCLUST_CLUSTER_RUN_H

#include "fmgr.h"
#include "nodes/execnodes.h"
#include "utils/array.h"

#include "gpuclust.h"

/*
 * k-means of X (n >= 1 rows, d columns) on the device gpu_kmeans would use
 * for this problem (gc_glue_choose_kmeans_device), with its fallback: under
 * 'auto', a GPU run that fails for lack of memory or with a CUDA error is
 * redone on the CPU with a NOTICE.  res's arrays are caller-allocated as
 * for gc_kmeans_cpu.  Returns the device that ran.  Errors are raised.
 */
extern gc_device gc_glue_run_kmeans(gc_device requested, const float *X,
									int64 n, int d,
									const gc_kmeans_params *params,
									gc_kmeans_result *res);

/*
 * DBSCAN of X (n >= 1 rows) on the device gpu_dbscan would use
 * (gc_glue_choose_device), with its fallback to the CPU under 'auto';
 * labels and is_core are n long.  Returns the device that ran.
 */
extern gc_device gc_glue_run_dbscan(gc_device requested, const float *X,
									int64 n, int d,
									const gc_dbscan_params *params,
									int32 *labels, uint8 *is_core);

/*
 * For gpuclust.log_timing: where the last GPU run of algo spent its time,
 * as " (upload ..., ...)" into buf; empty when the run was not on the GPU.
 */
extern void gc_glue_gpu_phases(gc_algorithm algo, gc_device ran, char *buf,
							   size_t len);

/*
 * Emits the rows (id, cluster_id, flag) of a labelling in input order into
 * the materialised SRF's tuplestore: GC_NOISE and rows without features
 * get a NULL cluster_id; rows without features a NULL flag too.
 */
struct GcInput;
extern void gc_glue_emit_labels(ReturnSetInfo *rsinfo, const struct GcInput *in,
								const int32 *labels, const uint8 *flags);

#endif							/* GPUCLUST_CLUSTER_RUN_H */
