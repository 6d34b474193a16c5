/*-------------------------------------------------------------------------
 *
 * algorithm.h
 *	  The registry of algorithms: what the shared mechanism needs to know of
 *	  each, one record per algorithm (GcAlgorithm), defined once in the
 *	  algorithm's folder (kmeans/kmeans_algorithm.c ...) and found by its
 *	  gc_algorithm (registry.c).  The shared mechanism (src/common) names
 *	  no algorithm: it asks the record.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GPUCLUST_ALGORITHM_H
#define GPUCLUST_ALGORITHM_H

#include "common/gpuclust.h"

typedef struct GcAlgorithm
{
	gc_algorithm algo;
	const char *name;			/* in messages: "k-means" */
	const char *function;		/* its SQL function (jobs, timings): "gpu_kmeans" */

	/*
	 * gpuclust.log_timing's itemisation of this backend's last GPU run of
	 * n rows: where it spent its time, " (upload ..., ...)"; NULL when the
	 * algorithm has none (affinity propagation's result carries its own).
	 */
	const char *(*gpu_phases) (int64 n);
} GcAlgorithm;

/* The records, one per algorithm (each in its folder). */
extern const GcAlgorithm gc_kmeans_record;
extern const GcAlgorithm gc_kmeans_labels_record;
extern const GcAlgorithm gc_dbscan_record;
extern const GcAlgorithm gc_ap_record;
extern const GcAlgorithm gc_kdistance_record;
extern const GcAlgorithm gc_silhouette_record;

/* The record of algo. */
extern const GcAlgorithm *gc_algorithm_of(gc_algorithm algo);

#endif							/* GPUCLUST_ALGORITHM_H */
