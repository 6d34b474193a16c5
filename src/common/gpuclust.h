/*-------------------------------------------------------------------------
 *
 * gpuclust.h
 *	  Declarations shared by the PostgreSQL glue of gpuclust: the GUC
 *	  variables (gpuclust.c) and the helpers of common/context.c.
 *
 * Only the backend's own thread ever calls PostgreSQL.  The core
 * (core/gpuclust_core.h) may run OpenMP threads; it is called from the glue
 * with a gc_ctx built by gc_glue_ctx() and reports failure through a
 * gc_status that gc_glue_report() turns into an ereport().
 *
 * The glue, by what it owns:
 *	  gpuclust.c		module magic, GUCs
 *	  common/context.c		core context and threads, signal mask, device
 *						choice, gc_glue_report
 *	  common/ingest.c			source query (SPI) -> float32 matrix, feature checks
 *	  common/args.c	each algorithm's arguments: one reader, all forms
 *	  common/run.c		each algorithm's run: device, fallback, notices
 *	  common/srf.c		the set-returning frame and its one emitter
 *	  kmeans/kmeans_sql.c, dbscan/dbscan_sql.c, affinity/affinity_sql.c	the set-returning functions
 *	  common/window_sql.c		the window functions
 *	  kmeans/kmeans_model_sql.c		gpu_kmeans_fit, kmeans_assign[_distance]
 *	  worker/info_sql.c		gpuclust_info()
 *	  worker/worker.c		the GPU worker (background worker) and its jobs
 *	  worker/job.c			a backend's GPU: dispatch's view, runs, the hand-off
 * A new parameter goes into the install script (sql/gpuclust--*.sql, its
 * default there only) and the algorithm's signature and reader in
 * common/args.c; a new algorithm adds a signature and reader, a run
 * function, and its SQL forms over them.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GPUCLUST_H
#define GPUCLUST_H

#include <signal.h>

#include "fmgr.h"
#include "utils/array.h"

#include "core/gpuclust_core.h"
#include "common/pg_compat.h"

/*
 * GUC variables (gpuclust.c).  Each resource has a superuser ceiling
 * (max_*) and a session's wish that can only lower it; use the effective
 * values (gc_glue_cpu_threads, gc_glue_matrix_memory_mb), never the
 * variables alone.
 */
extern int	gpuclust_device;		/* a gc_device */
extern int	gpuclust_cpu_threads;	/* 0 = as many as allowed */
extern int	gpuclust_max_cpu_threads;	/* 0 = all cores */
extern int	gpuclust_gpu_device_id;
extern bool gpuclust_log_timing;
extern int	gpuclust_matrix_memory;	/* MB; 0 = the ceiling */
extern int	gpuclust_max_matrix_memory;	/* MB */
extern bool gpuclust_gpu_worker;	/* preloaded: a GPU worker (postmaster) */
extern int	gpuclust_gpu_worker_jobs;	/* jobs it runs at once */
extern int	gpuclust_gpu_worker_memory;	/* MB; 0: the free memory */
#ifdef GC_TESTING
extern int	gpuclust_gpu_worker_emulate;	/* MB; tests: its jobs on the CPU */
#endif
extern int	gpuclust_gpu_memory_limit;	/* MB; 0: no limit (the free memory) */

/* the number of gc_algorithm values: the size of tables indexed by one */
#define GC_ALGO_COUNT ((int) GC_ALGO_KMEANS_LABELS + 1)

/* the largest value of the thread settings (the cores bound them anyway) */
#define GC_MAX_THREADS_SETTING 1024

/* common/context.c */
extern int	gc_glue_cpu_threads(void);
extern int	gc_glue_matrix_memory_mb(const char **setting);
extern bool gc_glue_sees_all_sessions(void);
extern void gc_glue_ctx(gc_ctx *ctx);
extern void gc_glue_signals_block(sigset_t *old);
extern void gc_glue_signals_restore(const sigset_t *old);
pg_noreturn extern void gc_glue_report(const gc_status *st, const char *what);
pg_noreturn extern void gc_glue_report_hint(const gc_status *st, const char *what,
								const char *gpu_hint);
extern gc_code gc_glue_try_choose_device(gc_device requested,
										 gc_algorithm algo, int64 n, int d,
										 gc_device *chosen, gc_status *st);
extern gc_device gc_glue_choose_device(gc_device requested, gc_algorithm algo,
									   int64 n, int d);
extern gc_device gc_glue_choose_kmeans_device(gc_device requested, int64 n,
											  int d, int k, int n_init,
											  bool weighted);
extern gc_device gc_glue_choose_tool_device(gc_algorithm algo,
											gc_device requested, int64 n,
											int d, int64 param);
extern const char *gc_glue_dbscan_gpu_hint(gc_dbscan_algorithm algorithm);
extern gc_device gc_glue_choose_dbscan_device(gc_device requested,
											  gc_dbscan_algorithm algorithm,
											  int64 n, int d);
extern const char *gc_glue_ap_gpu_hint(gc_ap_precision precision);
extern gc_device gc_glue_choose_ap_device(gc_device requested,
										  gc_ap_precision precision,
										  int64 n, int d, char **note);
extern const char *gc_device_name(gc_device dev);

/* kmeans/kmeans_model_sql.c: a k x d real[] of centroids, checked (see there) */
extern int	gc_glue_parse_centroids(ArrayType *arr, const char *what,
									int expect_k, int *d_out, float **C_out,
									MemoryContext cxt);
extern const char *gc_algorithm_name(gc_algorithm algo);
extern const char *gc_algorithm_function(gc_algorithm algo);

#endif							/* GPUCLUST_H */
