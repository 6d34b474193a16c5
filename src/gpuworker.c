/*-------------------------------------------------------------------------
 *
 * gpuworker.c
 *	  The GPU worker: a background worker that owns the GPU and runs every
 *	  backend's GPU jobs (the protocol is in gpuworker.h).
 *
 * The worker probes the GPU once (creating the CUDA context), then loops on
 * its latch: it reaps the jobs whose threads have ended, and starts queued
 * jobs in arrival order while the oldest one's GPU memory fits what running
 * jobs leave of the budget (the free memory at start, less
 * GC_WORKER_HEADROOM) and fewer than gpuclust.gpu_worker_jobs run.  Each
 * job runs on a thread of its own (signals blocked) through the same core
 * entry points as a backend would call (gc_kmeans_gpu, gc_dbscan_on_gpu,
 * gc_ap_gpu, gc_kdistance_gpu, gc_silhouette_gpu), on a CUDA stream of its
 * own; the context, the pinned staging ring
 * (transfer.cu) and device memory (CUDA's stream-ordered pool, kept up to
 * the budget: gc_cuda_keep_memory) stay from job to job.  Only
 * the main thread calls PostgreSQL (latches, DSM, the job slots' states);
 * a job's thread writes its result into its Running entry and sets the
 * main thread's latch.
 *
 * SIGTERM (a shutdown, or pg_terminate_backend) raises the cancel flag of
 * every running job, waits up to GC_WORKER_STOP_MS for their threads, and
 * exits with status 1, failing every job still queued or running; the
 * postmaster restarts the worker GC_WORKER_RESTART_S seconds later (but
 * not at shutdown).  A worker with no usable GPU stays up and says why
 * (gpuclust_info), so that 'auto' runs on the CPU at once and 'gpu' fails
 * with the reason.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <pthread.h>
#include <signal.h>

#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "gpuclust.h"
#include "gpuworker.h"
#include "pg_compat.h"

/* after this long without jobs the worker gives its pooled GPU memory back */
#define GC_WORKER_TRIM_MS 5000

/* how long a stopping worker waits for its running jobs to see the cancel */
#define GC_WORKER_STOP_MS 5000

GcWorkerShared *gc_worker = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static Size
worker_shmem_size(void)
{
	return add_size(offsetof(GcWorkerShared, jobs),
					mul_size(MaxBackends, sizeof(GcJob)));
}

static void
worker_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(worker_shmem_size());
}

static void
worker_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	gc_worker = ShmemInitStruct("gpuclust GPU worker", worker_shmem_size(),
								&found);
	if (!found)
	{
		memset(gc_worker, 0, worker_shmem_size());
		SpinLockInit(&gc_worker->mutex);
		gc_worker->state = GC_WORKER_NONE;
		gc_worker->njobs = MaxBackends;
		pg_atomic_init_u64(&gc_worker->next_seq, 1);
		for (int i = 0; i < MaxBackends; i++)
		{
			pg_atomic_init_u32(&gc_worker->jobs[i].state, GC_JOB_FREE);
			pg_atomic_init_u32(&gc_worker->jobs[i].abandoned, 0);
			pg_atomic_init_u32(&gc_worker->jobs[i].progress_count, 0);
		}
	}
	LWLockRelease(AddinShmemInitLock);
}

void
gc_worker_init(void)
{
	BackgroundWorker bgw;

	if (!process_shared_preload_libraries_in_progress || !gpuclust_gpu_worker)
		return;
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = worker_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = worker_shmem_startup;

	memset(&bgw, 0, sizeof(bgw));
	bgw.bgw_flags = BGWORKER_SHMEM_ACCESS;
	bgw.bgw_start_time = BgWorkerStart_PostmasterStart;
	bgw.bgw_restart_time = GC_WORKER_RESTART_S;
	strlcpy(bgw.bgw_library_name, "gpuclust", BGW_MAXLEN);
	strlcpy(bgw.bgw_function_name, "gpuclust_gpu_worker_main", BGW_MAXLEN);
	strlcpy(bgw.bgw_name, "gpuclust GPU worker", BGW_MAXLEN);
	strlcpy(bgw.bgw_type, "gpuclust GPU worker", BGW_MAXLEN);
	RegisterBackgroundWorker(&bgw);
}

/* ---------------------------------------------------------------------
 * Progress of a job (its thread writes, the backend reads)
 * --------------------------------------------------------------------- */

static void
job_progress(void *arg, const gc_progress *p)
{
	GcJob	   *j = (GcJob *) arg;

	pg_atomic_fetch_add_u32(&j->progress_count, 1);
	pg_write_barrier();
	j->progress = *p;
	pg_write_barrier();
	pg_atomic_fetch_add_u32(&j->progress_count, 1);
}

bool
gc_job_read_progress(GcJob *j, gc_progress *out)
{
	for (int tries = 0; tries < 1000; tries++)
	{
		uint32		before = pg_atomic_read_u32(&j->progress_count);

		pg_read_barrier();
		*out = j->progress;
		pg_read_barrier();
		if (before == pg_atomic_read_u32(&j->progress_count) &&
			(before & 1) == 0)
			return before != 0;
	}
	return false;
}

/* ---------------------------------------------------------------------
 * The jobs this worker runs
 * --------------------------------------------------------------------- */

typedef struct Running
{
	bool		used;
	pthread_t	thread;
	GcJob	   *job;
	dsm_segment *x_seg,
			   *out_seg;
	const float *X;
	char	   *out;
	gc_ctx		ctx;
	/* written by the thread, read by the main thread once it has ended */
	gc_status	status;
	gc_kmeans_result kmeans;
	gc_ap_result ap;
	gc_silhouette_result silhouette;
	gc_kmeans_gpu_phases km_phases;
	gc_dbscan_gpu_phases db_phases;
	pg_atomic_uint32 ended;
} Running;

static Running *runs;			/* njobs of them, by slot */
static size_t device_mem;		/* the device's memory for jobs at start */
static volatile sig_atomic_t stopping = 0;	/* every job's second cancel flag */
static int	device_id;

static Latch *
proc_latch(int procno)
{
	return &ProcGlobal->allProcs[procno].procLatch;
}

/*
 * The core calls of a job's thread, one per algorithm.  Under
 * gpuclust.gpu_worker_emulate the CPU's stand in for the GPU's.
 */
static void
run_kmeans(Running *r, GcJob *j)
{
	gc_kmeans_params p = j->p.kmeans;

	/* the weights and initial centroids the backend put in the outputs' segment */
	if (j->in_weights != 0)
		p.weights = (const double *) (r->out + j->in_weights);
	if (j->in_centroids != 0)
		p.init_centroids = (const float *) (r->out + j->in_centroids);
	memset(&r->kmeans, 0, sizeof(r->kmeans));
	r->kmeans.labels = (int32_t *) (r->out + j->out_labels);
	r->kmeans.distance = (double *) (r->out + j->out_second);
	r->kmeans.centroids = (float *) (r->out + j->out_centroids);
	if (gpuclust_gpu_worker_emulate)
		(void) gc_kmeans_cpu(&r->ctx, r->X, j->n, j->d, &p, &r->kmeans,
							 &r->status);
	else
	{
		(void) gc_kmeans_gpu(&r->ctx, r->X, j->n, j->d, &p, &r->kmeans,
							 &r->status);
		gc_kmeans_gpu_last_phases(&r->km_phases);
	}
}

static void
run_dbscan(Running *r, GcJob *j)
{
	int32_t    *labels = (int32_t *) (r->out + j->out_labels);
	uint8_t    *is_core = (uint8_t *) (r->out + j->out_second);

	if (gpuclust_gpu_worker_emulate)
	{
		/*
		 * the CPU stands in for the GPU: dclust, which runs only there, by
		 * union-find (the same labels)
		 */
		gc_dbscan_params p = j->p.dbscan;

		p.algorithm = GC_DBSCAN_UNION_FIND;
		(void) gc_dbscan_cpu(&r->ctx, r->X, j->n, j->d, &p, labels, is_core,
							 &r->status);
	}
	else
	{
		(void) gc_dbscan_on_gpu(&r->ctx, r->X, j->n, j->d, &j->p.dbscan,
								labels, is_core, &r->status);
		gc_dbscan_gpu_last_phases(&r->db_phases);
	}
}

static void
run_ap(Running *r, GcJob *j)
{
	memset(&r->ap, 0, sizeof(r->ap));
	r->ap.labels = (int32_t *) (r->out + j->out_labels);
	r->ap.is_exemplar = (uint8_t *) (r->out + j->out_second);
	if (!gpuclust_gpu_worker_emulate)
		(void) gc_ap_gpu(&r->ctx, r->X, j->n, j->d, &j->p.ap, &r->ap,
						 &r->status);
	else if (j->p.ap.precision == GC_AP_FLOAT8)
		(void) gc_ap_cpu(&r->ctx, r->X, j->n, j->d, &j->p.ap, &r->ap,
						 &r->status);
	else
	{
		/* no CPU path to stand in: float4 is the GPU's own arithmetic */
		gc_fail(&r->status, GC_EDEVICE,
				"affinity propagation in %s runs only on a real GPU, and gpuclust.gpu_worker_emulate runs the GPU worker's jobs on the CPU",
				gc_ap_precision_name(j->p.ap.precision));
	}
}

/* the k-distances and the silhouette: the CPU's take the GPU's arguments */
static void
run_kdistance(Running *r, GcJob *j)
{
	(void) (gpuclust_gpu_worker_emulate ? gc_kdistance_cpu : gc_kdistance_gpu)
		(&r->ctx, r->X, j->n, j->d, j->p.kdistance.k,
		 (float *) (r->out + j->out_second), &r->status);
}

static void
run_silhouette(Running *r, GcJob *j)
{
	memset(&r->silhouette, 0, sizeof(r->silhouette));
	/* the labels the backend put in the outputs' segment */
	(void) (gpuclust_gpu_worker_emulate ? gc_silhouette_cpu : gc_silhouette_gpu)
		(&r->ctx, r->X, j->n, j->d, (const int32_t *) (r->out + j->in_array),
		 j->p.silhouette.m, j->p.silhouette.sample_size, j->p.silhouette.seed,
		 &r->silhouette, &r->status);
}

/* a kmeans_step block's labels: the centres the backend put in the outputs' segment */
static void
run_kmeans_labels(Running *r, GcJob *j)
{
	(void) (gpuclust_gpu_worker_emulate ? gc_kmeans_labels_cpu : gc_kmeans_labels_gpu)
		(&r->ctx, r->X, j->n, j->d, (const float *) (r->out + j->in_array),
		 j->p.kmeans.k, (int32_t *) (r->out + j->out_second), &r->status);
}

/* A job's thread: the core call, then the main thread's latch. */
static void *
job_thread(void *arg)
{
	Running    *r = (Running *) arg;
	GcJob	   *j = r->job;
	gc_cuda_device_info info;

	memset(&r->status, 0, sizeof(r->status));
	memset(&info, 0, sizeof(info));
	info.usable = true;
	/* the CUDA device is per thread: make the worker's current */
	if (!gpuclust_gpu_worker_emulate)
		gc_cuda_probe_cached(device_id, &info);
	if (!info.usable)
		gc_fail(&r->status, GC_EDEVICE, "%s", info.reason);
	else
		switch (j->algo)
		{
			case GC_ALGO_KMEANS:
				run_kmeans(r, j);
				break;
			case GC_ALGO_DBSCAN:
				run_dbscan(r, j);
				break;
			case GC_ALGO_AP:
				run_ap(r, j);
				break;
			case GC_ALGO_KDISTANCE:
				run_kdistance(r, j);
				break;
			case GC_ALGO_SILHOUETTE:
				run_silhouette(r, j);
				break;
			case GC_ALGO_KMEANS_LABELS:
				run_kmeans_labels(r, j);
				break;
			default:
				gc_fail(&r->status, GC_EINTERNAL, "GPU job of unknown algorithm %d",
						(int) j->algo);
				break;
		}
	pg_write_barrier();
	pg_atomic_write_u32(&r->ended, 1);
	SetLatch(MyLatch);
	return NULL;
}

/*
 * The end of job j: its status, then DONE (the backend's latch is set) or,
 * when the backend has stopped waiting, FREE.
 */
static void
finish_job(GcJob *j, const gc_status *st)
{
	j->status = *st;
	pg_write_barrier();
	if (pg_atomic_read_u32(&j->abandoned))
	{
		uint32		running = GC_JOB_RUNNING;

		if (pg_atomic_compare_exchange_u32(&j->state, &running, GC_JOB_FREE))
			return;
	}
	{
		uint32		running = GC_JOB_RUNNING;

		if (!pg_atomic_compare_exchange_u32(&j->state, &running, GC_JOB_DONE))
			return;
	}
	SetLatch(proc_latch(j->procno));
	pg_memory_barrier();
	if (pg_atomic_read_u32(&j->abandoned))
	{
		uint32		done = GC_JOB_DONE;

		/* the backend may have freed it first: one of the two CAS wins */
		(void) pg_atomic_compare_exchange_u32(&j->state, &done, GC_JOB_FREE);
	}
}

/* Unmaps the segments of running job r (X may live in the outputs' one). */
static void
detach_segments(Running *r)
{
	if (r->x_seg != NULL && r->x_seg != r->out_seg)
		dsm_detach(r->x_seg);
	if (r->out_seg != NULL)
		dsm_detach(r->out_seg);
	r->x_seg = r->out_seg = NULL;
}

static void
release_memory(size_t mem)
{
	SpinLockAcquire(&gc_worker->mutex);
	gc_worker->reserved -= mem;
	gc_worker->running--;
	SpinLockRelease(&gc_worker->mutex);
}

/* The jobs whose threads have ended: results to their slots. */
static void
reap(void)
{
	for (int i = 0; i < gc_worker->njobs; i++)
	{
		Running    *r = &runs[i];
		GcJob	   *j = r->job;

		if (!r->used || !pg_atomic_read_u32(&r->ended))
			continue;
		pg_read_barrier();
		pthread_join(r->thread, NULL);
		/* cancelled by the worker's exit, not by its backend */
		if (r->status.code == GC_ECANCEL && stopping && !j->cancel)
			gc_fail(&r->status, GC_EDEVICE, "the gpuclust GPU worker exited");
		switch (j->algo)
		{
			case GC_ALGO_KMEANS:
				j->kmeans.inertia = r->kmeans.inertia;
				j->kmeans.iterations = r->kmeans.iterations;
				j->kmeans.converged = r->kmeans.converged;
				j->phases.kmeans = r->km_phases;
				break;
			case GC_ALGO_DBSCAN:
				j->phases.dbscan = r->db_phases;
				break;
			case GC_ALGO_AP:
				j->ap = r->ap;
				j->ap.labels = NULL;
				j->ap.is_exemplar = NULL;
				break;
			case GC_ALGO_KDISTANCE:
				break;			/* kdist2 is in the outputs' segment */
			case GC_ALGO_SILHOUETTE:
				j->silhouette = r->silhouette;
				break;
			case GC_ALGO_KMEANS_LABELS:
				break;			/* the labels are in the outputs' segment */
		}
		detach_segments(r);
		r->used = false;
		release_memory(j->mem);
		finish_job(j, &r->status);
	}
}

/* The queued job that arrived first, or NULL. */
static GcJob *
oldest_queued(void)
{
	GcJob	   *best = NULL;

	for (int i = 0; i < gc_worker->njobs; i++)
	{
		GcJob	   *j = &gc_worker->jobs[i];

		if (pg_atomic_read_u32(&j->state) == GC_JOB_QUEUED)
		{
			pg_read_barrier();
			if (best == NULL || j->seq < best->seq)
				best = j;
		}
	}
	return best;
}

/* Takes queued job j (false: its backend took it back). */
static bool
take(GcJob *j)
{
	uint32		queued = GC_JOB_QUEUED;

	if (!pg_atomic_compare_exchange_u32(&j->state, &queued, GC_JOB_RUNNING))
		return false;
	j->started_at = GetCurrentTimestamp();
	j->generation = gc_worker->generation;
	return true;
}

/* Fails queued job j at once with st. */
static void
refuse(GcJob *j, const gc_status *st)
{
	if (take(j))
		finish_job(j, st);
}

/*
 * Starts queued jobs in arrival order while the oldest fits (memory and
 * gpuclust.gpu_worker_jobs); with no usable GPU, fails them with the
 * reason.
 */
static void
admit(void)
{
	GcJob	   *j;

	while ((j = oldest_queued()) != NULL)
	{
		gc_status	st = {GC_OK, ""};
		Running    *r = &runs[j - gc_worker->jobs];
		sigset_t	old;
		bool		fits;

		if (gc_worker->state != GC_WORKER_READY)
		{
			gc_fail(&st, GC_EDEVICE, "the gpuclust GPU worker has no usable GPU: %s",
					gc_worker->info.reason);
			refuse(j, &st);
			continue;
		}
		if (j->mem > gc_worker->budget)
		{
			gc_fail(&st, GC_ENOMEM,
					"%s needs about %zu MiB of GPU memory, but the GPU worker's GPU %d has %zu MiB for jobs",
					gc_algorithm_name(j->algo), j->mem >> 20, device_id,
					gc_worker->budget >> 20);
			refuse(j, &st);
			continue;
		}
		SpinLockAcquire(&gc_worker->mutex);
		fits = gc_worker->running < gpuclust_gpu_worker_jobs &&
			gc_worker->reserved + j->mem <= gc_worker->budget;
		SpinLockRelease(&gc_worker->mutex);
		if (!fits || r->used)
			return;				/* arrival order: the others wait too */
		if (!take(j))
			continue;

		memset(r, 0, sizeof(*r));
		r->job = j;
		r->out_seg = dsm_attach(j->out_seg);
		r->x_seg = j->x_seg == j->out_seg ? r->out_seg : dsm_attach(j->x_seg);
		if (r->out_seg == NULL || r->x_seg == NULL)
		{
			/* the backend has gone, its segments with it */
			detach_segments(r);
			gc_fail(&st, GC_ECANCEL, "the job's data are gone");
			finish_job(j, &st);
			continue;
		}
		r->X = (const float *) ((char *) dsm_segment_address(r->x_seg) + j->x_off);
		r->out = dsm_segment_address(r->out_seg);
		r->ctx.n_threads = j->threads;
		r->ctx.cancel_flags[0] = &j->cancel;
		r->ctx.cancel_flags[1] = &stopping;
		r->ctx.progress = job_progress;
		r->ctx.progress_arg = j;
		pg_atomic_init_u32(&r->ended, 0);
		r->used = true;

		SpinLockAcquire(&gc_worker->mutex);
		gc_worker->reserved += j->mem;
		gc_worker->running++;
		SpinLockRelease(&gc_worker->mutex);

		/* the thread and CUDA's own threads must not take our signals */
		gc_glue_signals_block(&old);
		if (pthread_create(&r->thread, NULL, job_thread, r) != 0)
		{
			gc_glue_signals_restore(&old);
			r->used = false;
			detach_segments(r);
			release_memory(j->mem);
			gc_fail(&st, GC_EDEVICE, "the gpuclust GPU worker could not start a thread");
			finish_job(j, &st);
			continue;
		}
		gc_glue_signals_restore(&old);
	}
}

/*
 * gpuclust.gpu_worker_emulate (tests on machines without a GPU): the
 * worker runs its jobs with the CPU's core functions, on a "device" of
 * that many MB, so that the hand-off, the queue, cancel and
 * the worker's exit are tested where no GPU is.
 */
static void
emulated_device(gc_cuda_device_info *info)
{
	memset(info, 0, sizeof(*info));
	info->usable = true;
	info->device_count = 1;
	info->device_id = device_id;
	snprintf(info->name, sizeof(info->name),
			 "the CPU (gpuclust.gpu_worker_emulate)");
	info->total_mem = info->free_mem = (size_t) gpuclust_gpu_worker_emulate << 20;
}

/* The GPU memory jobs may hold: the device's, at most gpuclust.gpu_worker_memory. */
static size_t
budget(void)
{
	size_t		cap = (size_t) gpuclust_gpu_worker_memory << 20;

	return gpuclust_gpu_worker_memory > 0 && cap < device_mem ? cap : device_mem;
}

/*
 * Device memory stays in CUDA's pool while jobs follow one another; after
 * GC_WORKER_TRIM_MS without any, it goes back to the driver, so that an
 * idle server holds little more than the context.
 */
static void
trim_when_idle(void)
{
	static TimestampTz busy_at = 0;
	static bool trimmed = true;
	TimestampTz now = GetCurrentTimestamp();
	sigset_t	old;

	if (gc_worker->running > 0 || oldest_queued() != NULL)
	{
		busy_at = now;
		trimmed = false;
		return;
	}
	if (trimmed || !TimestampDifferenceExceeds(busy_at, now, GC_WORKER_TRIM_MS))
		return;
	gc_glue_signals_block(&old);
	gc_cuda_trim_memory();
	gc_glue_signals_restore(&old);
	trimmed = true;
}

/* The free memory of the device, for gpuclust_info. */
static void
read_free_memory(void)
{
	gc_cuda_device_info info;
	sigset_t	old;

	gc_glue_signals_block(&old);
	gc_cuda_probe_cached(device_id, &info);
	gc_glue_signals_restore(&old);
	SpinLockAcquire(&gc_worker->mutex);
	gc_worker->free_mem = info.usable ? info.free_mem : 0;
	SpinLockRelease(&gc_worker->mutex);
}

/*
 * At exit (SIGTERM, postmaster death, an error): every job still queued
 * or running fails, so that no backend waits for a worker that is gone.
 */
static void
worker_exit(int code, Datum arg)
{
	gc_status	st;

	stopping = 1;
	gc_fail(&st, GC_EDEVICE, "the gpuclust GPU worker exited");
	SpinLockAcquire(&gc_worker->mutex);
	gc_worker->state = GC_WORKER_EXITED;
	gc_worker->pid = 0;
	SpinLockRelease(&gc_worker->mutex);
	for (int i = 0; i < gc_worker->njobs; i++)
	{
		GcJob	   *j = &gc_worker->jobs[i];
		uint32		s = pg_atomic_read_u32(&j->state);

		if (s == GC_JOB_QUEUED)
			refuse(j, &st);
		else if (s == GC_JOB_RUNNING)
			finish_job(j, &st);
	}
}

/* Waits up to GC_WORKER_STOP_MS for the running jobs to end. */
static void
stop_jobs(void)
{
	TimestampTz until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													GC_WORKER_STOP_MS);

	stopping = 1;
	for (;;)
	{
		bool		any = false;

		reap();
		for (int i = 0; i < gc_worker->njobs; i++)
			any |= runs[i].used;
		if (!any || GetCurrentTimestamp() >= until)
			return;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 10, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

void
gpuclust_gpu_worker_main(Datum arg)
{
	gc_cuda_device_info info;
	sigset_t	old;

	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	BackgroundWorkerUnblockSignals();

	device_id = gpuclust_gpu_device_id;
	runs = MemoryContextAllocZero(TopMemoryContext,
								  sizeof(Running) * gc_worker->njobs);
	SpinLockAcquire(&gc_worker->mutex);
	gc_worker->state = GC_WORKER_STARTING;
	gc_worker->pid = MyProcPid;
	gc_worker->procno = gc_my_procno();
	gc_worker->generation++;
	gc_worker->started_at = GetCurrentTimestamp();
	gc_worker->reserved = 0;
	gc_worker->running = 0;
	SpinLockRelease(&gc_worker->mutex);
	before_shmem_exit(worker_exit, (Datum) 0);

	if (gpuclust_gpu_worker_emulate)
		emulated_device(&info);
	else
	{
		/* CUDA starts threads of its own: they must not take our signals */
		gc_glue_signals_block(&old);
		gc_cuda_probe_cached(device_id, &info);
		gc_glue_signals_restore(&old);
	}

	SpinLockAcquire(&gc_worker->mutex);
	gc_worker->info = info;
	gc_worker->free_mem = info.usable ? info.free_mem : 0;
	device_mem = gpuclust_gpu_worker_emulate ? info.free_mem :
		info.usable && info.free_mem > GC_WORKER_HEADROOM ?
		info.free_mem - GC_WORKER_HEADROOM : 0;
	gc_worker->budget = budget();
	gc_worker->state = info.usable ? GC_WORKER_READY : GC_WORKER_NO_GPU;
	SpinLockRelease(&gc_worker->mutex);
	if (info.usable && !gpuclust_gpu_worker_emulate)
	{
		/* device buffers stay in CUDA's pool from job to job */
		gc_glue_signals_block(&old);
		gc_cuda_keep_memory(device_mem);
		gc_glue_signals_restore(&old);
	}
	if (info.usable)
		ereport(LOG,
				(errmsg("gpuclust GPU worker started on GPU %d (%s), %zu MiB for jobs",
						device_id, info.name, gc_worker->budget >> 20)));
	else
		ereport(LOG,
				(errmsg("gpuclust GPU worker started without a GPU: %s",
						info.reason)));

	for (;;)
	{
		if (ShutdownRequestPending)
			break;
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			SpinLockAcquire(&gc_worker->mutex);
			gc_worker->budget = budget();
			SpinLockRelease(&gc_worker->mutex);
		}
		reap();
		admit();
		if (gc_worker->state == GC_WORKER_READY && !gpuclust_gpu_worker_emulate)
		{
			trim_when_idle();
			read_free_memory();
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 1000, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
	stop_jobs();
	proc_exit(1);				/* restarted after GC_WORKER_RESTART_S */
}
