/*-------------------------------------------------------------------------
 *
 * worker.h
 *	  The GPU worker (worker.c): the background worker that owns the GPU
 *	  and runs the queue of jobs (queue.h) through its GPU process.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GPUCLUST_WORKER_H
#define GPUCLUST_WORKER_H

#include "fmgr.h"

/* In _PG_init: registers the worker and its shared memory when preloaded. */
extern void gc_worker_init(void);

/* The worker's entry point (bgw_function_name). */
extern PGDLLEXPORT void gpuclust_gpu_worker_main(Datum arg);

#endif							/* GPUCLUST_WORKER_H */
