/*
 * gpuclust_core.h — the clustering core: plain C, no PostgreSQL header.
 *
 * The PostgreSQL glue in src/ packs a query's rows into one row-major
 * float32 matrix X (n rows, d columns) and calls these functions.  The core
 * may use OpenMP threads, allocates its working memory with malloc, never
 * calls palloc/elog, and reports failure through gc_status.  Output arrays
 * are allocated by the caller.
 */
#ifndef GPUCLUST_CORE_H
#define GPUCLUST_CORE_H

#include "common/core.h"
#include "common/metric.h"
#include "kmeans/kmeans.h"
#include "dbscan/dbscan.h"
#include "affinity/affinity.h"
#include "tools/tools.h"

#endif							/* GPUCLUST_CORE_H */
