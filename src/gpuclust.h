/*-------------------------------------------------------------------------
 *
 * gpuclust.h
 *	  Declarations shared by the PostgreSQL glue of gpuclust: the GUC
 *	  variables (gpuclust.c) and the helpers of common_sql.c.
 *
 * Only the backend's own thread ever calls PostgreSQL.  The core
 * (core/gpuclust_core.h) may run OpenMP threads; it is called from the glue
 * with a gc_ctx built by gc_glue_ctx() and reports failure through a
 * gc_status that gc_glue_report() turns into an ereport().
 *
 *-------------------------------------------------------------------------
 */
#ifndef GPUCLUST_H
#define GPUCLUST_H

#include <signal.h>

#include "fmgr.h"

#include "core/gpuclust_core.h"

/* GUC variables (gpuclust.c) */
extern int	gpuclust_device;		/* a gc_device */
extern int	gpuclust_cpu_threads;	/* 0 = all cores */
extern int	gpuclust_gpu_device_id;
extern bool gpuclust_log_timing;
extern int	gpuclust_max_matrix_memory;	/* MB */

/* common_sql.c */
extern void gc_glue_ctx(gc_ctx *ctx);
extern void gc_glue_prepare_threads(const gc_ctx *ctx);
extern void gc_glue_signals_block(sigset_t *old);
extern void gc_glue_signals_restore(const sigset_t *old);
extern void gc_glue_report(const gc_status *st, const char *what) pg_attribute_noreturn();
extern gc_code gc_glue_try_choose_device(gc_device requested,
										 gc_algorithm algo, int64 n, int d,
										 gc_device *chosen, gc_status *st);
extern gc_device gc_glue_choose_device(gc_device requested, gc_algorithm algo,
									   int64 n, int d);
extern gc_device gc_glue_choose_kmeans_device(gc_device requested, int64 n,
											  int d, int k, int n_init);
extern const char *gc_device_name(gc_device dev);
extern const char *gc_algorithm_name(gc_algorithm algo);

#endif							/* GPUCLUST_H */
