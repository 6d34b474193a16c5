/*-------------------------------------------------------------------------
 *
 * worker.c
 *	  The GPU worker: a background worker that queues every backend's GPU
 *	  jobs and has its GPU process run them (the protocol is in
 *	  worker/queue.h, the GPU process in worker/gpu_process.h).
 *
 * The worker forks its GPU process, which probes the GPU (creating the
 * CUDA context) and says READY.  Then the worker loops on its latch and
 * the process's socket: it finishes the jobs the process says are done,
 * and starts queued jobs in arrival order while the oldest one's GPU
 * memory fits what running jobs leave of the budget (the free memory at
 * the probe, less GC_WORKER_HEADROOM) and fewer than
 * gpuclust.gpu_worker_jobs run.  The worker itself never calls CUDA.
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
static int	device_id;

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

static void
release_memory(size_t mem)
{
	SpinLockAcquire(&gc_worker->mutex);
	gc_worker->reserved -= mem;
	gc_worker->running--;
	SpinLockRelease(&gc_worker->mutex);
}

/* Running job r has ended with st: its segments, memory and slot let go. */
static void
end_run(Running *r, const gc_status *st)
{
	GcJob	   *j = r->job;

	detach_segments(r);
	r->used = false;
	release_memory(j->mem);
	finish_job(j, st);
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
		bool		fits;

		if (gc_worker->state == GC_WORKER_STARTING)
			return;				/* they wait for the first probe */
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
		r->used = true;
		SpinLockAcquire(&gc_worker->mutex);
		gc_worker->reserved += j->mem;
		gc_worker->running++;
		SpinLockRelease(&gc_worker->mutex);
		if (!start_run(r, &st))
			end_run(r, &st);
	}
}

/* The GPU memory jobs may hold: the device's, at most gpuclust.gpu_worker_memory. */
static size_t
budget(void)
{
	size_t		device_mem = gc_proc_device_memory(&gc_worker->info);
	size_t		cap = (size_t) gpuclust_gpu_worker_memory << 20;

	return gpuclust_gpu_worker_memory > 0 && cap < device_mem ? cap : device_mem;
}

/* ---------------------------------------------------------------------
 * The GPU process's life
 * --------------------------------------------------------------------- */

/* The GPU side is down for reason: jobs are refused with it meanwhile. */
static void
gpu_down(GcWorkerState state, const char *reason)
{
	SpinLockAcquire(&gc_worker->mutex);
	gc_worker->state = state;
	gc_worker->gpu_pid = 0;
	gc_worker->info.usable = false;
	strlcpy(gc_worker->info.reason, reason, sizeof(gc_worker->info.reason));
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
			gc_gpu_process_main(sv[1], device_id);
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

/* READY: the probe the GPU process wrote. */
static void
gpu_ready(void)
{
	gc_cuda_device_info info;

	pg_read_barrier();
	info = gc_worker->probe;
	SpinLockAcquire(&gc_worker->mutex);
	gc_worker->info = info;
	gc_worker->free_mem = info.usable ? info.free_mem : 0;
	gc_worker->budget = budget();
	gc_worker->state = info.usable ? GC_WORKER_READY : GC_WORKER_NO_GPU;
	SpinLockRelease(&gc_worker->mutex);
	if (info.usable)
		ereport(LOG,
				(errmsg("gpuclust GPU worker started on GPU %d (%s), %zu MiB for jobs",
						device_id, info.name, gc_worker->budget >> 20),
				 errdetail("Its GPU process has PID %d.", (int) gpu_pid)));
	else
		ereport(LOG,
				(errmsg("gpuclust GPU worker started without a GPU: %s",
						info.reason)));
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
	close(gpu_sock);
	gpu_sock = -1;

	gc_fail(&crashed, GC_EDEVICE, "the gpuclust GPU process %s during the job",
			how);
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
			case GC_PROC_FREE_MEM:
				SpinLockAcquire(&gc_worker->mutex);
				gc_worker->free_mem = m.value;
				SpinLockRelease(&gc_worker->mutex);
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
	gpu_start();

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
		if (gpu_pid == 0 && GetCurrentTimestamp() >= gpu_restart_at)
			gpu_start();
		admit();
		wait_event(sleep_ms());
		gpu_read();
	}
	gpu_stop();
	proc_exit(1);				/* restarted after GC_WORKER_RESTART_S */
}
