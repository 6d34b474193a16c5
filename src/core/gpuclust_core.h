/*
 * gpuclust_core.h — the clustering core: plain C, no PostgreSQL header.
 *
 * The PostgreSQL glue in src/ packs a query's rows into one row-major
 * float32 matrix X (n rows, d columns) and calls these functions.  The core
 * may use OpenMP threads, allocates its working memory with malloc, never
 * calls palloc/elog, and reports failure through gc_status.  Output arrays
 * are allocated by the caller.
 *
 * Who validates what.  The glue validates what the user typed and raises
 * the SQLSTATE with the row id.  The core checks its contract once, at its
 * public entry (an algorithm's CPU and GPU entries share one check: cheap
 * checks, no second O(n) scan of what the caller has already checked: a
 * caller that checked k-means' rows and counted the positive weights says
 * so in gc_kmeans_params.rows_checked).
 * CUDA trusts the core: every GPU run goes through the core's entry for it
 * (gc_kmeans_on_gpu, gc_kmeans_labels_on_gpu, gc_dbscan_on_gpu,
 * gc_ap_on_gpu, gc_kdistance_on_gpu, gc_silhouette_on_gpu,
 * gc_hdbscan_on_gpu, gc_hdbscan_mst_on_gpu: the CPU entry's
 * check, then cuda/); the CUDA code
 * checks only what is the GPU's own (row limits, memory).  Derived values
 * are computed once and passed down (eps², the count of positive weights,
 * k-means' GPU memory plan: made by gc_choose_device_kmeans, admitted by
 * the GPU worker, used by the run).
 *
 * The folders: common/ (what every algorithm shares), kmeans/, dbscan/,
 * hdbscan/, affinity/, tools/, each with one public header, included here.  A
 * folder's *_internal.h is its own.
 */
#ifndef GPUCLUST_CORE_H
#define GPUCLUST_CORE_H

#include "common/core.h"
#include "common/metric.h"
#include "kmeans/kmeans.h"
#include "dbscan/dbscan.h"
#include "hdbscan/hdbscan.h"
#include "affinity/affinity.h"
#include "tools/tools.h"

#endif							/* GPUCLUST_CORE_H */
