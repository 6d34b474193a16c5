/*-------------------------------------------------------------------------
 *
 * job.h
 *	  A backend's side of the GPU (worker/job.c): the GPU that dispatch sees,
 *	  the shared memory that ingest writes the matrix into, and the hand-off
 *	  of a GPU job to the GPU worker, which each algorithm's GPU run uses
 *	  when the server has one (else it runs in this backend).
 *
 *-------------------------------------------------------------------------
 */
#ifndef GPUCLUST_GPUJOB_H
#define GPUCLUST_GPUJOB_H

#include "storage/dsm.h"

#include "common/gpuclust.h"
#include "common/shared_memory.h"
#include "worker/queue.h"
#include "core/common/gpu.h"

struct GcInput;

/*
 * The worker's state once it is settled: while it starts or restarts, the
 * caller waits (interruptibly) a few seconds for it to run.
 */
extern GcWorkerState gc_job_worker_settled(void);

/*
 * The GPU as dispatch sees it: the worker's (its state, its device's
 * memory budget; always warm), or this backend's own CUDA when there is
 * no worker.  Neither initialises CUDA here until a call needs it, and the
 * worker's never does in a backend.
 */
extern void gc_glue_gpu(gc_gpu *gpu);

/* Sets gc_shared_wanted: ingest writes matrices into DSM while the worker takes jobs. */
extern void gc_job_init(void);

/*
 * The hand-off of a GPU job to the worker, for each algorithm's job file
 * (src/<algorithm>/<algorithm>_job.c), which lays out its parameters and
 * results (GcJob's params and results, queue.h) and its arrays in the
 * job's outputs' segment.  A run goes:
 *
 *	  if (!gc_job_by_worker())
 *		  return <the core's GPU entry point, in this backend>;
 *	  j = gc_job_begin(algo, ctx, in);
 *	  <its parameters into j->params>
 *	  out = gc_job_labelling(j, ...) or gc_job_array(j, ...), or
 *	  gc_job_segments and gc_job_submit for other outputs;
 *	  <its results from j->results and the segment, when st is GC_OK>
 *	  gc_job_release(j, out);
 *
 * Interrupts (cancel, statement_timeout) raise, after taking the job back.
 */

/* Whether this server's GPU runs go to the worker (else to this backend). */
extern bool gc_job_by_worker(void);

/*
 * This backend's job slot, once the worker has let go of its last job,
 * set for a job of algo on in's rows: no outputs, no inputs, no memory.
 */
extern GcJob *gc_job_begin(gc_algorithm algo, const gc_ctx *ctx,
						   const struct GcInput *in);

/*
 * The outputs' segment of j (out_bytes, the offsets the caller set), with
 * in's matrix copied in after them unless it already lives in a segment;
 * NULL with st set when there is no room.
 */
extern dsm_segment *gc_job_segments(GcJob *j, const struct GcInput *in,
									Size out_bytes, gc_status *st);

/*
 * Queues j and waits for its end: GC_OK or the job's failure in st;
 * GC_EDEVICE when the worker is not running.
 */
extern gc_code gc_job_submit(GcJob *j, gc_status *st);

/*
 * The most GPUs one job of this session may split over:
 * gpuclust.gpu_worker_gpus_per_call, 0 (any) being GC_WORKER_MAX_GPUS.
 */
extern int	gc_job_split_most(void);

/*
 * For a job j (after gc_job_begin) that needs one bytes on one GPU and
 * part[G] on each of G GPUs when it splits (2 <= G <= GC_WORKER_MAX_GPUS):
 * when one fits none of the worker's GPUs this session may use (their
 * budgets, each at most gpuclust.gpu_memory_limit), but part[G] fits each
 * of G of them, for the fewest G from 2 up to
 * gpuclust.gpu_worker_gpus_per_call (0: every such GPU), j must split over
 * at least G (split_min; split_max raised to that setting's most), each
 * GPU holding part[G]; returns the memory its first GPU holds: part[G],
 * else one (j unchanged: it fits one GPU, or nothing fits and the worker
 * refuses it).
 */
extern size_t gc_job_split_min(GcJob *j, size_t one, const size_t *part);

/* After the results are read: the slot freed, the outputs' segment unmapped. */
extern void gc_job_release(GcJob *j, dsm_segment *out);

/*
 * j run with labels and one flag a row as outputs (at out_labels and
 * out_second), needing mem bytes of GPU memory: its outputs copied into
 * labels and flags when it succeeded.  Returns the outputs' segment, for
 * gc_job_release once the caller has read j's results; NULL (st set) when
 * there was no room for it.
 */
extern dsm_segment *gc_job_labelling(GcJob *j, const struct GcInput *in,
									 size_t mem, int32 *labels, uint8 *flags,
									 gc_status *st);

/*
 * j run with at most one input array of this backend's (input, in_bytes;
 * at in_array) and one output array (output, out_bytes; at out_second),
 * needing mem bytes of GPU memory: the output copied when it succeeded.
 * Returns the outputs' segment as gc_job_labelling does.
 */
extern dsm_segment *gc_job_array(GcJob *j, const struct GcInput *in,
								 size_t mem, const void *input, Size in_bytes,
								 void *output, Size out_bytes, gc_status *st);

#endif							/* GPUCLUST_GPUJOB_H */
