/*-------------------------------------------------------------------------
 *
 * gpu_process.h
 *	  The GPU process (worker/gpu_process.c): the child of the GPU worker that holds
 *	  the CUDA context and runs the worker's jobs, and the messages the two
 *	  exchange.
 *
 * The postmaster takes the abnormal exit of any process attached to
 * shared memory for a possible corruption of it: it ends every session
 * and runs crash recovery.  A fault in CUDA (a driver error, a bug in host
 * code, kill -9) must not do that, so CUDA lives in a process the
 * postmaster does not know: the worker forks it, and it calls no
 * PostgreSQL function, takes no PostgreSQL lock and writes only its jobs'
 * outputs (their DSM segments, mapped by itself), results and progress
 * (their slots, with barriers and atomics).  Its end, whatever the
 * cause, closes the socket between the two: the worker fails the jobs it
 * ran and forks another one.
 *
 * Messages, one datagram each on a SOCK_SEQPACKET socket pair:
 *	  worker -> GPU process   GC_PROC_START: run the job in slot on GPU gpu
 *							  (queued there, its segments attached by the
 *							  worker, which keeps them until GC_PROC_DONE)
 *	  GPU process -> worker   GC_PROC_READY: the probes are in
 *							  gc_worker->probes, one a GPU; GC_PROC_DONE:
 *							  the job in slot has ended, its status and
 *							  results in the slot; GC_PROC_LOST: GPU gpu
 *							  failed during a job (before that job's DONE;
 *							  how, in its probe); GC_PROC_FREE_MEM: GPU
 *							  gpu's free memory
 *
 *-------------------------------------------------------------------------
 */
#ifndef GPUCLUST_GPUPROC_H
#define GPUCLUST_GPUPROC_H

#include "storage/dsm.h"

#include "common/gpuclust.h"
#include "common/pg_compat.h"
#include "worker/queue.h"
#include "core/common/gpu.h"

/* how long a stopping GPU process waits for its running jobs to see the cancel */
#define GC_PROC_STOP_MS 5000

typedef enum GcProcMsgKind
{
	GC_PROC_START = 1,
	GC_PROC_READY,
	GC_PROC_DONE,
	GC_PROC_LOST,
	GC_PROC_FREE_MEM
} GcProcMsgKind;

/*
 * A job's segment as the GPU process finds it: by its handle, or, when the
 * worker's mapping lies in the main shared memory (which the GPU process
 * inherited at the same address), at addr.
 */
typedef struct GcProcSegment
{
	dsm_handle	handle;
	void	   *addr;			/* NULL: map it by its handle */
	Size		size;			/* the mapping's length */
} GcProcSegment;

typedef struct GcProcMsg
{
	int32		kind;			/* a GcProcMsgKind */
	int32		slot;			/* START, DONE: the job's */
	int32		gpu;			/* START, LOST, FREE_MEM: the GPU (index
								 * into gc_worker->gpus) */
	uint64		value;			/* FREE_MEM: bytes */
	GcProcSegment x,			/* START: the job's matrix and outputs */
				out;
} GcProcMsg;

/*
 * A job as its thread in the GPU process sees it, for the algorithm's run
 * (its record, common/algorithm.h): it calls the core with ctx (the job's
 * threads, cancel flags and progress) on X, takes its inputs from and
 * writes its arrays into the outputs' segment o (at the job's offsets),
 * keeps its scalar results in results, and sets status.  Then the GPU
 * process copies results and status into the job's slot (GcJob's) and
 * says DONE.  The run may not call PostgreSQL.
 */
typedef struct GcProcJob
{
	const float *X;
	char	   *o;
	gc_ctx		ctx;
	gc_status	status;
	GcJobArea	results;		/* zeroed at the start */
} GcProcJob;

/*
 * Whether the CPU stands in for the GPU (test builds only:
 * gpuclust.gpu_worker_emulate): the records' stand-in steps then run.
 */
#ifdef GC_TESTING
#define GC_PROC_EMULATED (gpuclust_gpu_worker_emulate != 0)
#else
#define GC_PROC_EMULATED false
#endif

/*
 * The GPU memory jobs may use on a device that the probe found (less
 * GC_WORKER_HEADROOM; all of an emulated one's).
 */
extern size_t gc_proc_device_memory(const gc_cuda_device_info *info);

/*
 * The GPU process's entry point, in the worker's child right after
 * fork(): sock is its end of the socket pair, devices the CUDA devices
 * it probes (ndevices 0: every visible one).  Never returns.
 */
pg_noreturn extern void gc_gpu_process_main(int sock, const int *devices,
											int ndevices);

#endif							/* GPUCLUST_GPUPROC_H */
