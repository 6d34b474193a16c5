/*-------------------------------------------------------------------------
 *
 * worker.c
 *	  The GPU worker: a background worker that queues every backend's GPU
 *	  jobs and has its GPU process run them (the protocol is in
 *	  worker/queue.h, the GPU process in worker/gpu_process.h).
 *
 * The worker forks its GPU process, which probes the GPUs of
 * gpuclust.gpu_devices (creating a CUDA context on each) and says READY.
 * Then the worker loops on its latch and the process's socket: it
 * finishes the jobs the process says are done, and starts queued jobs in
 * arrival order while the oldest one fits a usable GPU: its GPU memory
 * within what running jobs leave of that GPU's budget (its free memory at
 * the probe, less GC_WORKER_HEADROOM) and fewer than
 * gpuclust.gpu_worker_jobs running there.  Of the GPUs it fits, the one
 * with the fewest running jobs takes it (then the least memory held, then
 * the lowest number).  The worker itself never calls CUDA.
 *
 * A GPU that the process reports lost (LOST: its context failed during a
 * job) takes no more jobs, and the jobs that failed on it are queued again
 * on the others, once.  When none runs and GC_GPU_RETRY_MS have passed,
 * the worker stops its GPU process and forks a new one, which creates
 * every context anew; jobs wait meanwhile.
 *
 * When the GPU process ends, for whatever reason, the worker fails the
 * jobs it ran, says why in gpuclust_info, and forks a new one
 * GC_PROC_RESTART_MS later (twice as long each time it ends within a
 * minute of its start, up to a minute); no other process notices.
 *
 * SIGTERM (a shutdown, or pg_terminate_backend) stops the GPU process,
 * which cancels its jobs, waits up to GC_PROC_STOP_MS for them, and
 * exits; the worker exits with status 1, failing every job still queued
 * or running, and the postmaster restarts it GC_WORKER_RESTART_S seconds
 * later (but not at shutdown).  A worker with no usable GPU stays up and
 * says why (gpuclust_info), so that 'auto' runs on the CPU at once and
 * 'gpu' fails with the reason.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

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

#include "common/gpuclust.h"
#include "worker/gpu_process.h"
#include "worker/queue.h"
#include "worker/worker.h"
#include "common/pg_compat.h"

/* a GPU process that ran this long before it ended is restarted at once */
#define GC_PROC_STABLE_MS 60000

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
 * The jobs the GPU process runs
 * --------------------------------------------------------------------- */

/* A running job's segments, attached here until it ends. */
typedef struct Running
{
	bool		used;
	GcJob	   *job;
	dsm_segment *x_seg,
			   *out_seg;
} Running;

static Running *runs;			/* njobs of them, by slot */
static bool stopping = false;	/* the worker is exiting */

/* gpuclust.gpu_devices, read at start (ndevices 0: every visible GPU) */
static int	devices[GC_WORKER_MAX_GPUS];
static int	ndevices;
static void gpu_ended(void);

static bool restarting = false; /* a planned restart of the GPU process */
static TimestampTz restart_deadline;	/* when it is made to end */

/* The GPU process: its socket (-1: none) and pid, and when to fork the next. */
static int	gpu_sock = -1;
static pid_t gpu_pid = 0;
static TimestampTz gpu_started_at = 0;
static TimestampTz gpu_restart_at = 0;
static int	gpu_restart_ms = 0;	/* the last delay (0: none yet) */

static Latch *
proc_latch(int procno)
{
	return &ProcGlobal->allProcs[procno].procLatch;
}

/*
 * The end of job j: its status, then DONE (the backend's latch is set) or,
 * when the backend has stopped waiting, FREE.
 */
static void
finish_job(GcJob *j, const gc_status *st)
{
	gc_status	copy = *st;		/* st may be j's own */

	j->status = copy;
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

/* Job j holds GPU g, one of its GPUs (j->gpu and j->gpus_more set). */
static void
hold_gpu(GcJob *j, int g)
{
	GcWorkerGpu *gpu = &gc_worker->gpus[g];

	gpu->reserved += gc_job_mem(j);
	gpu->running++;
}

/* Running job r lets go of its GPUs' memory and its segments. */
static void
leave_gpu(Running *r)
{
	GcJob	   *j = r->job;

	detach_segments(r);
	r->used = false;
	SpinLockAcquire(&gc_worker->mutex);
	for (int g = 0; g < gc_worker->ngpus; g++)
	{
		GcWorkerGpu *gpu = &gc_worker->gpus[g];

		if (!gc_job_on_gpu(j, g))
			continue;
		gpu->reserved -= gc_job_mem(j);
		gpu->running--;
		gpu->done++;
	}
	SpinLockRelease(&gc_worker->mutex);
}

/* The first of job j's GPUs that is lost (-1: none). */
static int
lost_gpu_of(const GcJob *j)
{
	for (int g = 0; g < gc_worker->ngpus; g++)
		if (gc_job_on_gpu(j, g) && gc_worker->gpus[g].state == GC_GPU_LOST)
			return g;
	return -1;
}

/* Running job r has ended with st: its segments, memory and slot let go. */
static void
end_run(Running *r, const gc_status *st)
{
	leave_gpu(r);
	finish_job(r->job, st);
}

/* Whether a GPU but number skip takes jobs. */
static bool
other_gpu_ready(int skip)
{
	for (int g = 0; g < gc_worker->ngpus; g++)
		if (g != skip && gc_worker->gpus[g].state == GC_GPU_READY)
			return true;
	return false;
}

/*
 * Running job r failed with st on a GPU that is lost: queued again, with
 * its arrival number, when it may run elsewhere (once, not cancelled, not
 * abandoned, not pinned to that GPU, another GPU usable).
 */
static bool
queue_again(Running *r, const gc_status *st)
{
	GcJob	   *j = r->job;
	const int	lost = lost_gpu_of(j);
	uint32		running = GC_JOB_RUNNING;

	if (st->code == GC_OK || st->code == GC_ECANCEL || lost < 0 ||
		j->lost_on >= 0 || j->cancel || pg_atomic_read_u32(&j->abandoned) ||
		j->want_device >= 0 || !other_gpu_ready(lost))
		return false;
	ereport(LOG,
			(errmsg("gpuclust GPU worker: the %s job of PID %d failed on lost GPU %d; it runs again on another GPU",
					gc_algorithm_name(j->algo), j->pid, gc_worker->gpus[lost].device_id),
			 errdetail("%s", st->message)));
	if (!pg_atomic_compare_exchange_u32(&j->state, &running, GC_JOB_QUEUED))
		return false;
	/* the worker alone takes queued jobs: these are read after this */
	leave_gpu(r);
	j->lost_on = lost;
	j->gpu = -1;
	j->gpus_more = 0;
	return true;
}

/* DONE from the GPU process: the job in slot has ended, its status in it. */
static void
job_done(int slot)
{
	Running    *r;
	GcJob	   *j;
	gc_status	st;

	if (slot < 0 || slot >= gc_worker->njobs || !runs[slot].used)
		return;
	r = &runs[slot];
	j = r->job;
	pg_read_barrier();
	st = j->status;
	/* cancelled by the worker's exit, not by its backend */
	if (st.code == GC_ECANCEL && stopping && !j->cancel)
		gc_fail(&st, GC_EDEVICE, "the gpuclust GPU worker exited");
	if (queue_again(r, &st))
		return;
	if (st.code != GC_OK && st.code != GC_ECANCEL && lost_gpu_of(j) >= 0)
	{
		gc_status	lost = st;

		gc_fail(&lost, st.code, "GPU %d of the gpuclust GPU worker failed during the job: %s",
				gc_worker->gpus[lost_gpu_of(j)].device_id, st.message);
		st = lost;
	}
	end_run(r, &st);
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
	j->gpu = -1;
	j->gpus_more = 0;
	return true;
}

/* Fails queued job j at once with st. */
static void
refuse(GcJob *j, const gc_status *st)
{
	if (take(j))
		finish_job(j, st);
}

/* How the GPU process finds segment seg of the worker's. */
static void
proc_segment(dsm_segment *seg, GcProcSegment *out)
{
	void	   *addr = dsm_segment_address(seg);

	out->handle = dsm_segment_handle(seg);
	out->size = dsm_segment_map_length(seg);
	/* a segment in the main shared memory is at the same address there */
	out->addr = ShmemAddrIsValid(addr) ? addr : NULL;
}

/*
 * Hands running job r to the GPU process, its segments attached here
 * first so that they outlive a backend that exits meanwhile.  False with
 * st set when it could not.
 */
static bool
start_run(Running *r, gc_status *st)
{
	GcJob	   *j = r->job;
	GcProcMsg	m;

	r->out_seg = dsm_attach(j->out_seg);
	r->x_seg = j->x_seg == j->out_seg ? r->out_seg : dsm_attach(j->x_seg);
	if (r->out_seg == NULL || r->x_seg == NULL)
	{
		/* the backend has gone, its segments with it */
		gc_fail(st, GC_ECANCEL, "the job's data are gone");
		return false;
	}
	memset(&m, 0, sizeof(m));
	m.kind = GC_PROC_START;
	m.slot = j - gc_worker->jobs;
	m.gpu = j->gpu;
	proc_segment(r->x_seg, &m.x);
	proc_segment(r->out_seg, &m.out);
	if (send(gpu_sock, &m, sizeof(m), MSG_NOSIGNAL | MSG_DONTWAIT) != sizeof(m))
	{
		gc_fail(st, GC_EDEVICE, "the gpuclust GPU process did not take the job: %s",
				strerror(errno));
		return false;
	}
	return true;
}

/* The GPUs job j may run on: those of its device when it is pinned, else all. */
static bool
gpu_allowed(const GcJob *j, int g)
{
	return j->want_device < 0 || gc_worker->gpus[g].device_id == j->want_device;
}

/* "GPU 0 has 512 MiB, ..." of the GPUs job j may use that are ready. */
static void
usable_budgets(const GcJob *j, char *buf, size_t size)
{
	buf[0] = '\0';
	for (int g = 0; g < gc_worker->ngpus; g++)
	{
		const GcWorkerGpu *gpu = &gc_worker->gpus[g];
		size_t		len = strlen(buf);

		if (gpu_allowed(j, g) && gpu->state == GC_GPU_READY)
			snprintf(buf + len, size - len, "%sGPU %d has %zu MiB",
					 len > 0 ? ", " : "", gpu->device_id, gpu->budget >> 20);
	}
}

/*
 * Why job j can run on no GPU now or later (st), or GC_OK: no GPU it may
 * use is usable, or its memory exceeds every such GPU's budget, or, one
 * that must split over j->split_min GPUs or more, fewer such GPUs have
 * j->split_mem within their budget.
 */
static gc_code
never_fits(const GcJob *j, gc_status *st)
{
	size_t		largest = 0;
	int			usable = 0,
				roomy = 0,
				at = -1;
	char		usable_list[32 * GC_WORKER_MAX_GPUS];

	for (int g = 0; g < gc_worker->ngpus; g++)
	{
		GcWorkerGpu *gpu = &gc_worker->gpus[g];

		if (!gpu_allowed(j, g) || gpu->state != GC_GPU_READY)
			continue;
		usable++;
		if (gpu->budget >= j->split_mem)
			roomy++;
		if (gpu->budget >= largest)
		{
			largest = gpu->budget;
			at = gpu->device_id;
		}
	}
	if (usable == 0 && j->want_device >= 0)
		return gc_fail(st, GC_EDEVICE,
					   "GPU %d of the gpuclust GPU worker is not usable now (gpuclust_gpus says why)",
					   j->want_device);
	if (usable == 0)
		return gc_fail(st, GC_EDEVICE,
					   "no GPU of the gpuclust GPU worker is usable now (gpuclust_gpus says why)");
	if (j->split_min > 1 && roomy < j->split_min)
	{
		usable_budgets(j, usable_list, sizeof(usable_list));
		return gc_fail(st, GC_ENOMEM,
					   "%s must split over %d GPUs and needs about %zu MiB of GPU memory on each, but fewer of the GPU worker's usable GPUs have that much for jobs (%s)",
					   gc_algorithm_name(j->algo), j->split_min,
					   (j->split_mem >> 20) + 1, usable_list);
	}
	if (j->mem > largest)
		return gc_fail(st, GC_ENOMEM,
					   "%s needs about %zu MiB of GPU memory, but the GPU worker's GPU %d has %zu MiB for jobs",
					   gc_algorithm_name(j->algo), j->mem >> 20, at, largest >> 20);
	return GC_OK;
}

/*
 * The GPU that takes job j now (-1: none): of those it may use where its
 * memory fits and fewer than gpuclust.gpu_worker_jobs run, the one with
 * the fewest jobs, then the least memory held, then the first; the GPU it
 * failed on last only when no other fits.
 */
static int
pick_gpu(const GcJob *j)
{
	int			best = -1;

	SpinLockAcquire(&gc_worker->mutex);
	for (int pass = 0; pass < 2 && best < 0; pass++)
		for (int g = 0; g < gc_worker->ngpus; g++)
		{
			GcWorkerGpu *gpu = &gc_worker->gpus[g];
			GcWorkerGpu *b = best >= 0 ? &gc_worker->gpus[best] : NULL;

			if (!gpu_allowed(j, g) || gpu->state != GC_GPU_READY ||
				(pass == 0 && g == j->lost_on) ||
				gpu->running >= gpuclust_gpu_worker_jobs ||
				gpu->reserved + j->mem > gpu->budget)
				continue;
			if (b == NULL || gpu->running < b->running ||
				(gpu->running == b->running && gpu->reserved < b->reserved))
				best = g;
		}
	SpinLockRelease(&gc_worker->mutex);
	return best;
}

/*
 * The GPUs a job that may split (j->split_max > 1) takes now, when at least
 * two it may use (j->split_min, when more) are idle (no job running) and
 * j->split_mem fits each: the first in *first, the others' bits in *more,
 * at most j->split_max in all.
 * False: not that many such GPUs; it takes one as any job does, or, too
 * large for one (split_min >= 2), waits.
 */
static bool
pick_split(const GcJob *j, int *first, uint32 *more)
{
	int			count = 0;

	*first = -1;
	*more = 0;
	SpinLockAcquire(&gc_worker->mutex);
	for (int g = 0; g < gc_worker->ngpus && count < j->split_max; g++)
	{
		GcWorkerGpu *gpu = &gc_worker->gpus[g];

		/* the GPU it failed on last too when it cannot run on fewer */
		if (!gpu_allowed(j, g) || gpu->state != GC_GPU_READY ||
			(g == j->lost_on && j->split_min < 2) || gpu->running > 0)
			continue;
		if (gpu->reserved + j->split_mem > gpu->budget)
			continue;
		if (*first < 0)
			*first = g;
		else
			*more |= (uint32) 1 << g;
		count++;
	}
	SpinLockRelease(&gc_worker->mutex);
	return *first >= 0 && *more != 0 && count >= j->split_min;
}

/*
 * Starts queued jobs in arrival order while the oldest fits a GPU (memory
 * and gpuclust.gpu_worker_jobs), or, one that may split, every idle GPU
 * (pick_split; one too large for one GPU only so, at least j->split_min);
 * fails those that fit none it may use, and with no usable GPU, every one,
 * with the reason.
 */
static void
admit(void)
{
	GcJob	   *j;

	while ((j = oldest_queued()) != NULL)
	{
		gc_status	st = {GC_OK, ""};
		Running    *r = &runs[j - gc_worker->jobs];
		int			g;
		uint32		more;

		if (gc_worker->state == GC_WORKER_STARTING || restarting)
			return;				/* they wait for the probe */
		if (gc_worker->state != GC_WORKER_READY)
		{
			if (gc_worker->state == GC_WORKER_NO_GPU)
				gc_fail(&st, GC_EDEVICE, "the gpuclust GPU worker has no usable GPU: %s",
						gc_worker->info.reason);
			else
				gc_fail(&st, GC_EDEVICE, "%s", gc_worker->info.reason);
			refuse(j, &st);
			continue;
		}
		if (never_fits(j, &st) != GC_OK)
		{
			refuse(j, &st);
			continue;
		}
		if (r->used)
			return;
		if (j->split_max < 2 || !pick_split(j, &g, &more))
		{
			more = 0;
			/* too large for one GPU: it waits for enough idle ones */
			if (j->split_min > 1 || (g = pick_gpu(j)) < 0)
				return;			/* arrival order: the others wait too */
		}
		if (!take(j))
			continue;

		memset(r, 0, sizeof(*r));
		r->job = j;
		r->used = true;
		j->gpu = g;
		j->gpus_more = more;
		SpinLockAcquire(&gc_worker->mutex);
		for (int o = 0; o < gc_worker->ngpus; o++)
			if (gc_job_on_gpu(j, o))
				hold_gpu(j, o);
		SpinLockRelease(&gc_worker->mutex);
		if (!start_run(r, &st))
			end_run(r, &st);
	}
}

/* The GPU memory jobs may hold on gpu: its own, at most gpuclust.gpu_worker_memory. */
static size_t
budget(const GcWorkerGpu *gpu)
{
	size_t		device_mem = gc_proc_device_memory(&gpu->info);
	size_t		cap = (size_t) gpuclust_gpu_worker_memory << 20;

	return gpuclust_gpu_worker_memory > 0 && cap < device_mem ? cap : device_mem;
}

/* Each GPU's budget (gpuclust.gpu_worker_memory at its start or a reload). */
static void
set_budgets(void)
{
	SpinLockAcquire(&gc_worker->mutex);
	for (int g = 0; g < gc_worker->ngpus; g++)
		gc_worker->gpus[g].budget = budget(&gc_worker->gpus[g]);
	SpinLockRelease(&gc_worker->mutex);
}

void
gc_worker_gpu_list(const GcWorkerGpu *gpus, int n, char *buf, size_t size)
{
	buf[0] = '\0';
	for (int g = 0; g < n; g++)
	{
		size_t		len = strlen(buf);

		snprintf(buf + len, size - len, "%s%d", g > 0 ? ", " : "", gpus[g].device_id);
	}
}

int
gc_worker_devices(const char *spec, int *out, char *err, size_t errsize)
{
	static const char *const not_list =
		"expected a comma-separated list of CUDA device numbers (0 to 1024), such as '0,1', or nothing for every visible GPU";
	const char *p = spec != NULL ? spec : "";
	int			n = 0;

	for (;;)
	{
		char	   *end;
		long		v;

		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '\0' && n == 0)
			return 0;
		errno = 0;
		v = strtol(p, &end, 10);
		if (end == p || errno != 0 || v < 0 || v > 1024)
		{
			snprintf(err, errsize, "%s", not_list);
			return -1;
		}
		for (int i = 0; i < n; i++)
			if (out[i] == (int) v)
			{
				snprintf(err, errsize, "GPU %ld is listed twice", v);
				return -1;
			}
		if (n == GC_WORKER_MAX_GPUS)
		{
			snprintf(err, errsize, "at most %d GPUs can be listed", GC_WORKER_MAX_GPUS);
			return -1;
		}
		out[n++] = (int) v;
		p = end;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '\0')
			return n;
		if (*p++ != ',')
		{
			snprintf(err, errsize, "%s", not_list);
			return -1;
		}
	}
}

/* ---------------------------------------------------------------------
 * The GPU process's life
 * --------------------------------------------------------------------- */

/*
 * The GPU side is down for reason: jobs are refused with it meanwhile
 * (GC_WORKER_RECOVERING) or wait (GC_WORKER_STARTING).
 */
static void
gpu_down(GcWorkerState state, const char *reason)
{
	SpinLockAcquire(&gc_worker->mutex);
	gc_worker->state = state;
	gc_worker->gpu_pid = 0;
	gc_worker->info.usable = false;
	strlcpy(gc_worker->info.reason, reason, sizeof(gc_worker->info.reason));
	for (int g = 0; g < gc_worker->ngpus; g++)
	{
		gc_worker->gpus[g].state = GC_GPU_STARTING;
		gc_worker->gpus[g].info.usable = false;
		strlcpy(gc_worker->gpus[g].info.reason, reason,
				sizeof(gc_worker->gpus[g].info.reason));
	}
	SpinLockRelease(&gc_worker->mutex);
}

/* Forks the GPU process; on failure, tries again later. */
static void
gpu_start(void)
{
	int			sv[2];
	sigset_t	old;
	pid_t		pid;
	char		reason[200];

	if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) != 0)
		pid = -1;
	else
	{
		/* the child starts with every signal blocked, then sets its own */
		gc_glue_signals_block(&old);
		pid = fork();
		if (pid == 0)
		{
			close(sv[0]);
			gc_gpu_process_main(sv[1], devices, ndevices);
		}
		gc_glue_signals_restore(&old);
		close(sv[1]);
		if (pid < 0)
			close(sv[0]);
	}
	if (pid < 0)
	{
		snprintf(reason, sizeof(reason),
				 "the gpuclust GPU worker could not start its GPU process: %m");
		ereport(LOG, (errmsg("%s", reason)));
		gpu_down(GC_WORKER_RECOVERING, reason);
		gpu_restart_at = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													 GC_PROC_RESTART_MS);
		return;
	}
	gpu_sock = sv[0];
	gpu_pid = pid;
	gpu_started_at = GetCurrentTimestamp();
	SpinLockAcquire(&gc_worker->mutex);
	gc_worker->gpu_pid = pid;
	SpinLockRelease(&gc_worker->mutex);
}

/*
 * READY: the probes the GPU process wrote, one a GPU; the worker's own
 * line is the first usable GPU's probe, or the reasons none is usable.
 */
static void
gpu_ready(void)
{
	int			n,
				usable = 0;
	char		reasons[sizeof(gc_worker->info.reason)] = "";

	pg_read_barrier();
	n = Min(gc_worker->nprobes, GC_WORKER_MAX_GPUS);
	SpinLockAcquire(&gc_worker->mutex);
	for (int g = 0; g < n; g++)
	{
		GcWorkerGpu *gpu = &gc_worker->gpus[g];
		const gc_cuda_device_info *info = &gc_worker->probes[g];

		if (g >= gc_worker->ngpus || gpu->device_id != info->device_id)
			gpu->done = 0;		/* another GPU than before */
		gpu->device_id = info->device_id;
		gpu->info = *info;
		gpu->state = info->usable ? GC_GPU_READY : GC_GPU_UNUSABLE;
		gpu->free_mem = info->usable ? info->free_mem : 0;
		gpu->budget = budget(gpu);
		gpu->reserved = 0;
		gpu->running = 0;
		if (info->usable && usable++ == 0)
			gc_worker->info = *info;
		else if (!info->usable)
		{
			size_t		len = strlen(reasons);

			snprintf(reasons + len, sizeof(reasons) - len, "%sGPU %d: %s",
					 len > 0 ? "; " : "", info->device_id, info->reason);
		}
	}
	gc_worker->ngpus = n;
	if (usable == 0)
	{
		if (n > 0)
			gc_worker->info = gc_worker->probes[0];
		gc_worker->info.usable = false;
		strlcpy(gc_worker->info.reason, n == 1 ? gc_worker->probes[0].reason : reasons,
				sizeof(gc_worker->info.reason));
	}
	gc_worker->state = usable > 0 ? GC_WORKER_READY : GC_WORKER_NO_GPU;
	SpinLockRelease(&gc_worker->mutex);

	for (int g = 0; g < n; g++)
	{
		GcWorkerGpu *gpu = &gc_worker->gpus[g];

		if (gpu->state == GC_GPU_READY)
			ereport(LOG,
					(errmsg("gpuclust GPU worker started on GPU %d (%s), %zu MiB for jobs",
							gpu->device_id, gpu->info.name, gpu->budget >> 20),
					 errdetail("Its GPU process has PID %d.", (int) gpu_pid)));
		else if (usable > 0)
			ereport(LOG,
					(errmsg("gpuclust GPU worker cannot use GPU %d: %s",
							gpu->device_id, gpu->info.reason)));
	}
	if (usable == 0)
		ereport(LOG,
				(errmsg("gpuclust GPU worker started without a GPU: %s",
						gc_worker->info.reason)));
}

/* LOST: GPU g failed during a job; its probe says how. */
static void
gpu_lost(int g)
{
	GcWorkerGpu *gpu;
	bool		first;

	if (g < 0 || g >= gc_worker->ngpus)
		return;
	gpu = &gc_worker->gpus[g];
	pg_read_barrier();
	SpinLockAcquire(&gc_worker->mutex);
	first = gpu->state != GC_GPU_LOST;
	gpu->state = GC_GPU_LOST;
	gpu->info.usable = false;
	strlcpy(gpu->info.reason, gc_worker->probes[g].reason, sizeof(gpu->info.reason));
	gpu->lost_at = GetCurrentTimestamp();
	SpinLockRelease(&gc_worker->mutex);
	if (first)
		ereport(LOG,
				(errmsg("gpuclust GPU worker: GPU %d failed and takes no more jobs: %s",
						gpu->device_id, gpu->info.reason),
				 errhint("The worker restarts its GPU process to use it again once no job runs, after %d ms.",
						 GC_GPU_RETRY_MS)));
}

/*
 * A lost GPU comes back with a new GPU process (a context can not be made
 * anew beside others that run): once no job runs, GC_GPU_RETRY_MS after
 * the loss, the worker stops the process; gpu_ended forks the next at once.
 */
static void
restart_for_lost(void)
{
	TimestampTz now = GetCurrentTimestamp();
	bool		due = false;

	if (restarting || gpu_pid == 0 || gc_worker->state != GC_WORKER_READY)
		return;
	for (int g = 0; g < gc_worker->ngpus; g++)
	{
		const GcWorkerGpu *gpu = &gc_worker->gpus[g];

		if (gpu->running > 0)
			return;
		if (gpu->state == GC_GPU_LOST &&
			TimestampDifferenceExceeds(gpu->lost_at, now, GC_GPU_RETRY_MS))
			due = true;
	}
	if (!due)
		return;
	ereport(LOG,
			(errmsg("gpuclust GPU worker restarts its GPU process to use its lost GPU again")));
	restarting = true;
	restart_deadline = TimestampTzPlusMilliseconds(now, GC_PROC_STOP_MS + 1000);
	(void) kill(gpu_pid, SIGTERM);
}

/* A GPU process that has not ended in time for a planned restart is killed. */
static void
restart_overdue(void)
{
	if (restarting && gpu_sock >= 0 && GetCurrentTimestamp() >= restart_deadline)
		gpu_ended();			/* SIGKILL, and the next at once */
}

/* How process pid ended, from waitpid's status: "was killed by signal 9". */
static void
describe_end(int status, char *buf, size_t size)
{
	if (WIFSIGNALED(status))
		snprintf(buf, size, "was killed by signal %d (%s)", WTERMSIG(status),
				 pg_strsignal(WTERMSIG(status)));
	else if (WIFEXITED(status))
		snprintf(buf, size, "exited with code %d", WEXITSTATUS(status));
	else
		snprintf(buf, size, "ended");
}

/*
 * The GPU process has ended (its socket closed): the jobs it ran fail,
 * and unless the worker is stopping, a new one is forked after a delay.
 */
static void
gpu_ended(void)
{
	int			status = 0;
	char		how[100],
				reason[200];
	gc_status	crashed,
				exited;
	TimestampTz now = GetCurrentTimestamp();

	/* it has closed its socket: it is exiting, or made to */
	(void) kill(gpu_pid, SIGKILL);
	while (waitpid(gpu_pid, &status, 0) < 0 && errno == EINTR)
		;
	describe_end(status, how, sizeof(how));
	gc_fail(&crashed, GC_EDEVICE, "the gpuclust GPU process %s during the job",
			how);
	close(gpu_sock);
	gpu_sock = -1;
	if (restarting && !stopping)
	{
		/* planned: no job ran; the next starts at once and jobs wait */
		restarting = false;
		for (int i = 0; i < gc_worker->njobs; i++)
			if (runs[i].used)
				end_run(&runs[i], &crashed);
		gpu_pid = 0;
		gpu_restart_at = now;
		gpu_down(GC_WORKER_STARTING, "the gpuclust GPU worker is restarting its GPU process");
		return;
	}

	gc_fail(&exited, GC_EDEVICE, "the gpuclust GPU worker exited");
	for (int i = 0; i < gc_worker->njobs; i++)
		if (runs[i].used)
			end_run(&runs[i], stopping ? &exited : &crashed);
	if (stopping)
	{
		gpu_pid = 0;
		return;
	}

	/* GC_PROC_RESTART_MS after a long life; twice the last delay after a short one */
	if (gpu_restart_ms == 0 ||
		TimestampDifferenceExceeds(gpu_started_at, now, GC_PROC_STABLE_MS))
		gpu_restart_ms = GC_PROC_RESTART_MS;
	else
		gpu_restart_ms = Min(gpu_restart_ms * 2, GC_PROC_STABLE_MS);
	gpu_restart_at = TimestampTzPlusMilliseconds(now, gpu_restart_ms);
	ereport(LOG,
			(errmsg("gpuclust GPU process (PID %d) %s; the GPU worker starts another in %d ms",
					(int) gpu_pid, how, gpu_restart_ms)));
	snprintf(reason, sizeof(reason),
			 "the gpuclust GPU process %s; a new one starts within %d ms",
			 how, gpu_restart_ms);
	gpu_pid = 0;
	gpu_down(GC_WORKER_RECOVERING, reason);
}

/* Reads the GPU process's messages until none is waiting, or its end. */
static void
gpu_read(void)
{
	GcProcMsg	m;

	while (gpu_sock >= 0)
	{
		ssize_t		got = recv(gpu_sock, &m, sizeof(m), MSG_DONTWAIT);

		if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
			return;
		if (got <= 0)
		{
			gpu_ended();
			return;
		}
		if (got != sizeof(m))
			continue;
		switch (m.kind)
		{
			case GC_PROC_READY:
				gpu_ready();
				break;
			case GC_PROC_DONE:
				job_done(m.slot);
				break;
			case GC_PROC_LOST:
				gpu_lost(m.gpu);
				break;
			case GC_PROC_FREE_MEM:
				if (m.gpu >= 0 && m.gpu < gc_worker->ngpus)
				{
					SpinLockAcquire(&gc_worker->mutex);
					gc_worker->gpus[m.gpu].free_mem = m.value;
					SpinLockRelease(&gc_worker->mutex);
				}
				break;
		}
	}
}

/* Waits for the latch, a message, or timeout_ms. */
static void
wait_event(long timeout_ms)
{
	if (gpu_sock >= 0)
		(void) WaitLatchOrSocket(MyLatch,
								 WL_LATCH_SET | WL_SOCKET_READABLE | WL_TIMEOUT |
								 WL_EXIT_ON_PM_DEATH,
								 gpu_sock, timeout_ms, PG_WAIT_EXTENSION);
	else
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 timeout_ms, PG_WAIT_EXTENSION);
	ResetLatch(MyLatch);
}

/*
 * Stops the GPU process (it cancels its jobs) and waits up to
 * GC_PROC_STOP_MS and a second for its jobs' ends and its own.
 */
static void
gpu_stop(void)
{
	TimestampTz until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													GC_PROC_STOP_MS + 1000);

	stopping = true;
	if (gpu_pid == 0)
		return;
	(void) kill(gpu_pid, SIGTERM);
	while (gpu_sock >= 0 && GetCurrentTimestamp() < until)
	{
		wait_event(10);
		gpu_read();
	}
	if (gpu_sock >= 0)
		gpu_ended();			/* SIGKILL */
}

/*
 * At exit (SIGTERM, postmaster death, an error): the GPU process goes too,
 * and every job still queued or running fails, so that no backend waits
 * for a worker that is gone.
 */
static void
worker_exit(int code, Datum arg)
{
	gc_status	st;

	stopping = true;
	if (gpu_pid > 0)
		(void) kill(gpu_pid, SIGKILL);
	gc_fail(&st, GC_EDEVICE, "the gpuclust GPU worker exited");
	SpinLockAcquire(&gc_worker->mutex);
	gc_worker->state = GC_WORKER_EXITED;
	gc_worker->pid = 0;
	gc_worker->gpu_pid = 0;
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

/* How long the main loop may sleep: until the GPU process is due, or a second. */
static long
sleep_ms(void)
{
	long		secs;
	int			usecs;

	if (gpu_pid != 0)
		return 1000;
	TimestampDifference(GetCurrentTimestamp(), gpu_restart_at, &secs, &usecs);
	return Min(1000, secs * 1000 + usecs / 1000);
}

void
gpuclust_gpu_worker_main(Datum arg)
{
	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	BackgroundWorkerUnblockSignals();

	{
		char		err[200];

		/* checked when the server started: cannot fail here */
		ndevices = Max(gc_worker_devices(gpuclust_gpu_devices, devices, err,
										 sizeof(err)), 0);
	}
	runs = MemoryContextAllocZero(TopMemoryContext,
								  sizeof(Running) * gc_worker->njobs);
	SpinLockAcquire(&gc_worker->mutex);
	gc_worker->state = GC_WORKER_STARTING;
	gc_worker->server_device_id = gpuclust_gpu_device_id;
	gc_worker->pid = MyProcPid;
	gc_worker->procno = gc_my_procno();
	gc_worker->generation++;
	gc_worker->started_at = GetCurrentTimestamp();
	for (int g = 0; g < gc_worker->ngpus; g++)
	{
		gc_worker->gpus[g].reserved = 0;
		gc_worker->gpus[g].running = 0;
		gc_worker->gpus[g].done = 0;
	}
	SpinLockRelease(&gc_worker->mutex);
	before_shmem_exit(worker_exit, (Datum) 0);
	gpu_start();

	for (;;)
	{
		if (ShutdownRequestPending)
			break;
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			set_budgets();
			SpinLockAcquire(&gc_worker->mutex);
			gc_worker->server_device_id = gpuclust_gpu_device_id;
			SpinLockRelease(&gc_worker->mutex);
		}
		if (gpu_pid == 0 && GetCurrentTimestamp() >= gpu_restart_at)
			gpu_start();
		restart_for_lost();
		restart_overdue();
		admit();
		wait_event(sleep_ms());
		gpu_read();
	}
	gpu_stop();
	proc_exit(1);				/* restarted after GC_WORKER_RESTART_S */
}
