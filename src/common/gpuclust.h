/*-------------------------------------------------------------------------
 *
 * gpuclust.h
 *	  Declarations shared by the PostgreSQL glue of gpuclust: the GUC
 *	  variables (src/gpuclust.c), the core call's context and the mapping
 *	  of its failures to ereport (context.c), the algorithms' names
 *	  (registry.c).
 *
 * Only the backend's own thread ever calls PostgreSQL.  The core
 * (core/gpuclust_core.h) may run OpenMP threads; it is called from the glue
 * with a gc_ctx built by gc_glue_ctx() and reports failure through a
 * gc_status that gc_glue_report() turns into an ereport().
 *
 * The glue, by folder (headers included by path from src: "common/...");
 * a folder includes only its own headers and those of the layers below it:
 *	  src/gpuclust.c	the module: magic, GUCs, _PG_init (sees every layer)
 *	  distributed/		rows where they are (Citus, parallel query):
 *						kmeans_step and its driver gpu_kmeans_distributed,
 *						DBSCAN over partitions, the drivers' passes over SPI
 *	  kmeans/ dbscan/ hdbscan/ affinity/ tools/
 *						one thin path per algorithm: its SQL functions
 *						(*_sql.c), argument reader (*_args.c), device and
 *						run (*_run.c), GPU job on both sides of the worker
 *						(*_job.c), registry record (*_algorithm.c), all
 *						declared in its *_glue.h
 *	  worker/			the GPU as a backend sees it: the device choice
 *						(device.c), a backend's job (job.c), the queue in
 *						shared memory (queue.h), the background worker
 *						(worker.c), its GPU process (gpu_process.c), and
 *						gpuclust_info() (info_sql.c)
 *	  common/			the shared mechanism, which names no algorithm:
 *						this header and context.c, argument helpers
 *						(args.c), ingest of the source (ingest.c), shared
 *						memory for the worker (shared_memory.c), what runs
 *						share (run.c), the set-returning frame (srf.c), the
 *						window frame (window.c), progress (progress.c), the
 *						registry of algorithms (algorithm.h, registry.c)
 * A new parameter goes into the install script (sql/gpuclust--*.sql, its
 * default there only) and the algorithm's signature and reader (its
 * *_args.c); a new algorithm adds a folder with the same pieces and its
 * record in the registry (docs/architecture.md walks through it).
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
extern int	gpuclust_gpu_worker_split_rows;	/* a k-means job this large may split */
extern int	gpuclust_gpu_worker_gpus_per_call;	/* most GPUs a job splits over; 0: any */
extern char *gpuclust_gpu_devices;	/* the worker's GPUs ("": every one) */
#ifdef GC_TESTING
extern int	gpuclust_gpu_worker_emulate;	/* MB; tests: its jobs on the CPU */
extern bool gpuclust_gpu_worker_emulate_lose_gpu;	/* tests: jobs fail their GPU */
#endif
extern int	gpuclust_gpu_memory_limit;	/* MB; 0: no limit (the free memory) */

/* the number of gc_algorithm values: the size of tables indexed by one */
#define GC_ALGO_COUNT ((int) GC_ALGO_HDBSCAN + 1)

/* the largest value of the thread settings (the cores bound them anyway) */
#define GC_MAX_THREADS_SETTING 1024

/* context.c */
extern int	gc_glue_cpu_threads(void);
extern int	gc_glue_matrix_memory_mb(const char **setting);
extern bool gc_glue_sees_all_sessions(void);
extern void gc_glue_ctx(gc_ctx *ctx);
extern void gc_glue_signals_block(sigset_t *old);
extern void gc_glue_signals_restore(const sigset_t *old);
pg_noreturn extern void gc_glue_report(const gc_status *st, const char *what);
pg_noreturn extern void gc_glue_report_hint(const gc_status *st, const char *what,
								const char *gpu_hint);
extern const char *gc_device_name(gc_device dev);

/* registry.c: algo's name in messages, and its SQL function */
extern const char *gc_algorithm_name(gc_algorithm algo);
extern const char *gc_algorithm_function(gc_algorithm algo);

/*
 * gpuclust.log_timing's itemisation of a call of algo on n rows that ran
 * on ran: where its GPU run spent its time, " (upload ..., ...)"; empty
 * when nothing ran on the GPU, and for an algorithm without one (affinity
 * propagation, whose result carries its phases' times).
 */
extern const char *gc_algorithm_gpu_phases(gc_algorithm algo, gc_device ran,
										   int64 n);

#endif							/* GPUCLUST_H */
