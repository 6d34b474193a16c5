/*-------------------------------------------------------------------------
 *
 * queue.h
 *	  The GPU worker's queue of jobs, in shared memory: one background
 *	  worker owns the GPU for the whole server (worker/worker.c), backends
 *	  hand it their GPU jobs (worker/job.c), and its GPU process runs them
 *	  (worker/gpu_process.c).
 *
 * With shared_preload_libraries = 'gpuclust' and gpuclust.gpu_worker = on
 * (the default), the worker runs every backend's k-means, DBSCAN, affinity
 * propagation, k-distance and silhouette GPU jobs in its GPU process
 * (worker/gpu_process.h), which creates the CUDA context once; no backend initialises
 * CUDA.  Without preloading, each backend uses its own context, lazily.
 *
 * The hand-off, through the shared memory of this header:
 *	  - a backend owns one job slot (gc_my_slot()).  It puts the float32
 *		matrix in a DSM segment (ingest writes it there directly), the
 *		outputs' segment beside it, the parameters in the slot, and queues
 *		the job (FREE -> QUEUED, an arrival number, the worker's latch);
 *	  - the worker starts queued jobs in arrival order when their GPU memory
 *		fits its budget (QUEUED -> RUNNING): it attaches their segments and
 *		hands them to the GPU process, which runs each on a thread of its
 *		own with its own CUDA stream, so jobs overlap when memory allows;
 *	  - when the GPU process says a job has ended (its status and outputs
 *		written), the worker detaches its segments, marks it DONE and sets
 *		the backend's latch; the backend reads the outputs and frees the
 *		slot (DONE -> FREE).
 * A backend that stops waiting (cancel, statement timeout, exit) takes its
 * queued job back (QUEUED -> FREE) or raises the job's cancel flag, which
 * the core polls between iterations, and leaves the slot "abandoned": the
 * worker frees it when the job has ended.  Every state change is a
 * compare-and-swap, so the two sides never both own a slot.
 *
 * The GPU process's end (a CUDA fault, kill -9) fails the jobs it was
 * running ("the gpuclust GPU process ... during the job": 'auto' redoes
 * them on the CPU) and nothing else; the worker forks a new one after
 * GC_PROC_RESTART_MS (doubled while it keeps ending within a minute), and
 * meanwhile 'auto' runs on the CPU and 'gpu' fails with that reason.  A
 * worker that exits fails every queued and running job ("the gpuclust GPU
 * worker exited") and the postmaster starts a new one after
 * GC_WORKER_RESTART_S seconds.  A backend's wait honours cancel,
 * statement_timeout and a lost client whatever the worker does.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GPUCLUST_QUEUE_H
#define GPUCLUST_QUEUE_H

#include "datatype/timestamp.h"
#include "port/atomics.h"
#include "storage/dsm.h"
#include "storage/spin.h"

#include "core/common/gpu.h"

/* seconds before the postmaster restarts a worker that exited */
#define GC_WORKER_RESTART_S 2

/* GPU memory the worker leaves unbudgeted (other processes, the allocator) */
#define GC_WORKER_HEADROOM ((size_t) 256 << 20)

/* how long after its GPU process ended the worker forks a new one, at first */
#define GC_PROC_RESTART_MS 1000

/* the most jobs the worker runs at once (gpuclust.gpu_worker_jobs) */
#define GC_WORKER_MAX_JOBS 64

typedef enum GcWorkerState
{
	GC_WORKER_NONE = 0,			/* not started (or not configured) */
	GC_WORKER_STARTING,			/* probing the GPU */
	GC_WORKER_READY,			/* owns a usable GPU, takes jobs */
	GC_WORKER_NO_GPU,			/* running, but no usable GPU: reason says why */
	GC_WORKER_RECOVERING,		/* its GPU process ended: it starts another
								 * (reason says why) */
	GC_WORKER_EXITED			/* exited; the postmaster restarts it */
} GcWorkerState;

typedef enum GcJobState
{
	GC_JOB_FREE = 0,
	GC_JOB_QUEUED,
	GC_JOB_RUNNING,
	GC_JOB_DONE
} GcJobState;

/*
 * A job's parameters and scalar results, laid out by its algorithm: each
 * algorithm's job file (src/<algorithm>/<algorithm>_job.c) defines the
 * structs it keeps there, reads and writes them through GC_JOB_AREA, and
 * asserts with GC_JOB_AREA_FITS that they fit.  A byte area rather than a
 * union of every algorithm's structs: the worker then needs no algorithm's
 * header (the algorithms sit above it), and adding one touches only its
 * own folder.
 */
#define GC_JOB_AREA_BYTES 256

typedef union GcJobArea
{
	char		bytes[GC_JOB_AREA_BYTES];
	double		align_double;
	int64		align_int64;
	void	   *align_pointer;
} GcJobArea;

/* area (a GcJobArea) as a type */
#define GC_JOB_AREA(area, type) ((type *) (area).bytes)

/* type fits a GcJobArea: at file level in the job file that uses it */
#define GC_JOB_AREA_FITS(type) \
	StaticAssertDecl(sizeof(type) <= GC_JOB_AREA_BYTES, \
					 CppAsString(type) " does not fit a GPU job's area")

/* One backend's job. */
typedef struct GcJob
{
	pg_atomic_uint32 state;		/* a GcJobState; changed by CAS only */
	pg_atomic_uint32 abandoned; /* the backend stopped waiting */
	volatile sig_atomic_t cancel;	/* polled by the core */

	/* set by the backend before QUEUED */
	uint64		seq;			/* arrival number */
	int			pid;			/* the backend's */
	Oid			userid;
	int			procno;			/* the backend's PGPROC, for its latch */
	gc_algorithm algo;
	int64		n;
	int			d;
	int			threads;		/* host threads (copies) */
	size_t		mem;			/* GPU memory it needs (bytes) */
	TimestampTz queued_at;
	dsm_handle	x_seg;			/* X (n x d float32) at x_off */
	Size		x_off;
	dsm_handle	out_seg;		/* the outputs, at out_* offsets */
	Size		out_labels,
				out_second,		/* a second output (one value a row), or
								 * an array job's only one */
				out_centroids,	/* a third output (k-means: centroids) */
				in_weights,		/* inputs of this backend's there too (0:
								 * none): k-means' sample weights and */
				in_centroids,	/* initial centroids */
				in_array;		/* an array job's one input */
	GcJobArea	params;		/* the algorithm's parameters */

	/* set by the worker */
	TimestampTz started_at;
	uint32		generation;		/* of the worker that took it */
	/* set by the GPU process before it says DONE */
	gc_status	status;
	GcJobArea	results;	/* the algorithm's scalar results (its arrays
								 * are in the outputs' segment) */
	/* progress from the job's thread (change-counted; odd while written) */
	pg_atomic_uint32 progress_count;
	gc_progress progress;
} GcJob;

typedef struct GcWorkerShared
{
	slock_t		mutex;			/* protects the worker fields below */
	GcWorkerState state;
	int			pid;
	int			procno;			/* its PGPROC, for its latch */
	uint32		generation;		/* worker starts so far */
	TimestampTz started_at;
	int			gpu_pid;		/* its GPU process (0: none) */
	gc_cuda_device_info info;	/* the probe at start (reason when no GPU or
								 * recovering) */
	gc_cuda_device_info probe;	/* written by the GPU process before READY */
	size_t		budget;			/* GPU memory for jobs */
	size_t		reserved;		/* of it, held by running jobs */
	size_t		free_mem;		/* cudaMemGetInfo, last read */
	int			running;
	int			max_jobs;

	pg_atomic_uint64 next_seq;	/* arrival numbers */
	int			njobs;			/* MaxBackends */
	GcJob		jobs[FLEXIBLE_ARRAY_MEMBER];
} GcWorkerShared;

/* worker/worker.c: the shared state (NULL when the worker is not configured) */
extern GcWorkerShared *gc_worker;

#endif							/* GPUCLUST_QUEUE_H */
