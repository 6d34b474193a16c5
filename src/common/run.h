/*-------------------------------------------------------------------------
 *
 * run.h
 *	  What every algorithm's run function shares (each algorithm's is in its
 *	  folder: kmeans/kmeans_run.c ...): the fallback after a failed GPU
 *	  run, the result arrays, the names of rows in errors.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GPUCLUST_RUN_H
#define GPUCLUST_RUN_H

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
 * After a failed GPU run.  Under 'auto', lack of GPU memory or a CUDA error
 * is a NOTICE and the call is redone on the CPU (the result); anything
 * else, or any failure under 'gpu', is the error (gpu_hint: see
 * gc_glue_report_hint).  what names the algorithm.
 */
extern gc_device gc_glue_gpu_failed(gc_device requested, gc_status *st,
									const char *what, const char *gpu_hint);

/* n elements of size bytes each, in cxt (huge: more than 1 GB works). */
extern void *gc_glue_alloc_array(MemoryContext cxt, Size n, Size size);

/* Under the cosine metric: no row of X may be all 0 (22000, naming it). */
extern void gc_glue_check_no_zero_row(const GcInput *in);

#endif							/* GPUCLUST_RUN_H */
