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
 * The worker owns the GPUs of gpuclust.gpu_devices (every visible one by
 * default), each with its own memory budget and job count; its GPU process
 * holds a CUDA context on each.  A job runs on one of them: the least
 * loaded one where its memory fits, or the one its session's
 * gpuclust.gpu_device_id names when that differs from the server's.
 *
 * The hand-off, through the shared memory of this header:
 *	  - a backend owns one job slot (gc_my_slot()).  It puts the float32
 *		matrix in a DSM segment (ingest writes it there directly), the
 *		outputs' segment beside it, the parameters in the slot, and queues
 *		the job (FREE -> QUEUED, an arrival number, the worker's latch);
 *	  - the worker starts queued jobs in arrival order when their GPU memory
 *		fits the budget of one of its GPUs (QUEUED -> RUNNING): it attaches
 *		their segments and hands them to the GPU process, which runs each on
 *		a thread of its own with its own CUDA stream on the job's GPU, so
 *		jobs overlap when memory allows;
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
 * A GPU that fails during a job (its context lost: an Xid, a fault) is
 * marked lost and takes no more jobs; the jobs that failed on it are
 * queued again, once, when another GPU is usable (else they fail, and
 * 'auto' redoes them on the CPU).  The worker restarts its GPU process to
 * bring a lost GPU back once no job runs, GC_GPU_RETRY_MS after the loss.
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

/* the most jobs the worker runs at once on one GPU (gpuclust.gpu_worker_jobs) */
#define GC_WORKER_MAX_JOBS 64

/* the most GPUs the worker owns (gpuclust.gpu_devices) */
#define GC_WORKER_MAX_GPUS 16

/*
 * gpuclust.gpu_worker_split_rows' default: the k-means calls that gain
 * from two GPUs (docs/benchmarks.md: at 1M rows one GPU is as fast, from
 * 4M rows two take 0.44-0.80 of its time)
 */
#define GC_WORKER_SPLIT_ROWS (1 << 22)

/* how long after a GPU was lost the worker may restart its GPU process for it */
#define GC_GPU_RETRY_MS 5000

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

/* One of the worker's GPUs. */
typedef enum GcGpuState
{
	GC_GPU_STARTING = 0,		/* its GPU process probes it */
	GC_GPU_READY,				/* takes jobs */
	GC_GPU_UNUSABLE,			/* the probe failed: info.reason says why */
	GC_GPU_LOST					/* failed during a job: info.reason says how */
} GcGpuState;

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
	int			want_device;	/* the CUDA device it must run on (-1: any) */
	int			split_max;		/* the most GPUs it may split over (1: one) */
	int			split_min;		/* the fewest it runs on (2 or more: too
								 * large for one GPU; mem = split_mem) */
	size_t		split_mem;		/* GPU memory of each of its GPUs when it
								 * splits (bytes; mem: on one GPU) */
	bool		lose_gpu;		/* test builds: its first run makes its
								 * emulated GPU fail */
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
	int			gpu;			/* the GPU it runs on (index into gpus; -1) */
	uint32		gpus_more;		/* split: the other GPUs it runs on (bit g:
								 * index g), each holding split_mem */
	int			lost_on;		/* the GPU it failed on when that was lost,
								 * before it was queued again (-1: none) */
	/* set by the GPU process before it says DONE */
	gc_status	status;
	GcJobArea	results;	/* the algorithm's scalar results (its arrays
								 * are in the outputs' segment) */
	/* progress from the job's thread (change-counted; odd while written) */
	pg_atomic_uint32 progress_count;
	gc_progress progress;
} GcJob;

/* Whether job j runs on the worker's GPU g: its first, or split, another. */
static inline bool
gc_job_on_gpu(const GcJob *j, int g)
{
	return g == j->gpu || (j->gpus_more & ((uint32) 1 << g)) != 0;
}

/* The GPU memory job j holds on each of its GPUs (j->gpus_more set). */
static inline size_t
gc_job_mem(const GcJob *j)
{
	return j->gpus_more != 0 ? j->split_mem : j->mem;
}

typedef struct GcWorkerGpu
{
	int			device_id;		/* its CUDA device number */
	GcGpuState	state;
	gc_cuda_device_info info;	/* its probe (reason when unusable or lost) */
	size_t		budget;			/* GPU memory for jobs */
	size_t		reserved;		/* of it, held by running jobs */
	size_t		free_mem;		/* cudaMemGetInfo, last read */
	int			running;		/* jobs */
	uint64		done;			/* jobs ended on it since the worker started */
	TimestampTz lost_at;
} GcWorkerGpu;

typedef struct GcWorkerShared
{
	slock_t		mutex;			/* protects the worker fields below */
	GcWorkerState state;
	int			pid;
	int			procno;			/* its PGPROC, for its latch */
	uint32		generation;		/* worker starts so far */
	TimestampTz started_at;
	int			gpu_pid;		/* its GPU process (0: none) */
	gc_cuda_device_info info;	/* the first usable GPU's probe (the reason
								 * when there is none or while recovering) */
	int			server_device_id;	/* gpuclust.gpu_device_id of the server */
	int			ngpus;
	GcWorkerGpu gpus[GC_WORKER_MAX_GPUS];

	/* written by the GPU process: its probes before READY, a loss before LOST */
	int			nprobes;
	gc_cuda_device_info probes[GC_WORKER_MAX_GPUS];

	pg_atomic_uint64 next_seq;	/* arrival numbers */
	int			njobs;			/* MaxBackends */
	GcJob		jobs[FLEXIBLE_ARRAY_MEMBER];
} GcWorkerShared;

/* worker/worker.c: the shared state (NULL when the worker is not configured) */
extern GcWorkerShared *gc_worker;

#endif							/* GPUCLUST_QUEUE_H */
