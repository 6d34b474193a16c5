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

#include "worker/queue.h"

/* In _PG_init: registers the worker and its shared memory when preloaded. */
extern void gc_worker_init(void);

/*
 * The devices of a gpuclust.gpu_devices value (spec) into devices (at most
 * GC_WORKER_MAX_GPUS): their count, 0 for an empty spec (every visible
 * GPU), or -1 with err set when spec is not a list of distinct device
 * numbers.
 */
extern int	gc_worker_devices(const char *spec, int *devices, char *err,
							  size_t errsize);

/* The CUDA numbers of gpus (n of them) as a list, "0, 1", into buf. */
#define GC_WORKER_GPU_LIST_BYTES (8 * GC_WORKER_MAX_GPUS)
extern void gc_worker_gpu_list(const GcWorkerGpu *gpus, int n, char *buf,
							   size_t size);

/* The worker's entry point (bgw_function_name). */
extern PGDLLEXPORT void gpuclust_gpu_worker_main(Datum arg);

#endif							/* GPUCLUST_WORKER_H */
