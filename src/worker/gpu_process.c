/*-------------------------------------------------------------------------
 *
 * gpu_process.c
 *	  The GPU process: the GPU worker's child that holds the CUDA context
 *	  and runs the jobs the worker starts (why it is a process of its own,
 *	  and its messages: worker/gpu_process.h).
 *
 * It probes each of its GPUs once (creating a CUDA context on each) and
 * says READY; then its main thread waits on the socket for START
 * messages.  Each job runs on a thread of its own (signals blocked), with
 * its GPU made current there, through its algorithm's run (the registry's
 * record, common/algorithm.h: the core entry point a backend would call),
 * on a CUDA stream of its own; the contexts, the pinned staging rings
 * (transfer.cu, one a device) and device memory (each device's
 * stream-ordered pool, kept up to its budget: gc_cuda_keep_memory) stay
 * from job to job, and after GC_PROC_TRIM_MS without jobs the pools go
 * back to the driver.  A job that fails with a CUDA error is followed by
 * a look at its GPU: when its context is gone (a sticky error), the GPU
 * is reported LOST before the job's DONE, and this process gives it no
 * more work.  A job's thread maps the job's segments, writes the
 * outputs there and the status and results into the job's slot (publish),
 * unmaps them and says DONE.
 *
 * Nothing here calls PostgreSQL (but set_ps_display, which writes this
 * process's own title): no elog, no palloc, no lock, no latch;
 * the process ends with _exit, so that none of the worker's exit callbacks
 * runs in it.  It ends on SIGTERM (its jobs cancelled, waited for up to
 * GC_PROC_STOP_MS), when the worker's end of the socket closes, and, by
 * PR_SET_PDEATHSIG, with the worker.  In a test build (GC_TESTING), under
 * gpuclust.gpu_worker_emulate the algorithms' CPU stand-ins (their
 * records') run in place of the GPU's entry points, on a "device" of that
 * many MB, so that the whole path is tested where no GPU is; a product
 * build has no such setting.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "storage/dsm_impl.h"
#include "utils/ps_status.h"
#ifdef USE_DSM_SYSV
#include <sys/ipc.h>
#include <sys/shm.h>
#endif

#include "common/algorithm.h"
#include "common/gpuclust.h"
#include "worker/gpu_process.h"
#include "worker/queue.h"

/* after this long without jobs the pooled GPU memory goes back to the driver */
#define GC_PROC_TRIM_MS 5000

/* how often the main thread wakes without messages (free memory, trim) */
#define GC_PROC_TICK_MS 1000

/* A segment as this process maps it. */
typedef struct Mapping
{
	char	   *addr;
	Size		size;
	bool		mapped;			/* by mmap here (else inherited or shmat) */
	bool		attached;		/* by shmat here */
} Mapping;

/* One job, owned by its thread: what its algorithm sees, its slot and mappings. */
typedef struct ProcJob
{
	GcProcJob	pub;
	GcJob	   *job;
	int			slot;
	int			gpu;			/* index into proc_devices: its first GPU */
	int			devices[GC_WORKER_MAX_GPUS];	/* every GPU's CUDA number
												 * (ctx.gpus), the first first */
	Mapping		x,
				out;
} ProcJob;

static int	proc_sock = -1;
static int	proc_devices[GC_WORKER_MAX_GPUS];	/* CUDA device numbers */
static int	proc_ngpus;
static volatile sig_atomic_t proc_lost[GC_WORKER_MAX_GPUS];
static pthread_mutex_t lost_mu = PTHREAD_MUTEX_INITIALIZER;
static volatile sig_atomic_t stop_requested = 0;	/* SIGTERM */
static volatile sig_atomic_t stopping = 0;	/* every job's second cancel flag */
static pg_atomic_uint32 jobs_running;

size_t
gc_proc_device_memory(const gc_cuda_device_info *info)
{
	if (!info->usable)
		return 0;
	if (GC_PROC_EMULATED)
		return info->free_mem;
	return info->free_mem > GC_WORKER_HEADROOM ?
		info->free_mem - GC_WORKER_HEADROOM : 0;
}

static void
send_msg(GcProcMsgKind kind, int slot, int gpu, uint64 value)
{
	GcProcMsg	m;

	memset(&m, 0, sizeof(m));
	m.kind = kind;
	m.slot = slot;
	m.gpu = gpu;
	m.value = value;
	/* a datagram each: threads never interleave; a gone worker ends us anyway */
	while (send(proc_sock, &m, sizeof(m), MSG_NOSIGNAL) < 0 && errno == EINTR)
		;
}

/* ---------------------------------------------------------------------
 * A job's segments
 * --------------------------------------------------------------------- */

/* Maps a segment by its handle, as dsm_impl.c names it; false with errno set. */
static bool
map_by_handle(const GcProcSegment *s, Mapping *m)
{
	char		name[64];
	int			fd = -1;

	switch (dynamic_shared_memory_type)
	{
#ifdef USE_DSM_POSIX
		case DSM_IMPL_POSIX:
			snprintf(name, sizeof(name), "/PostgreSQL.%u", s->handle);
			fd = shm_open(name, O_RDWR, 0);
			break;
#endif
#ifdef USE_DSM_MMAP
		case DSM_IMPL_MMAP:
			/* relative to the data directory, this process's working directory */
			snprintf(name, sizeof(name),
					 PG_DYNSHMEM_DIR "/" PG_DYNSHMEM_MMAP_FILE_PREFIX "%u",
					 s->handle);
			fd = open(name, O_RDWR, 0);
			break;
#endif
#ifdef USE_DSM_SYSV
		case DSM_IMPL_SYSV:
			{
				key_t		key = (key_t) s->handle;
				int			ident;
				void	   *addr;

				if (key < 1)
					key = -key;
				if ((ident = shmget(key, 0, 0)) < 0)
					return false;
				if ((addr = shmat(ident, NULL, 0)) == (void *) -1)
					return false;
				m->addr = addr;
				m->attached = true;
				return true;
			}
#endif
		default:
			errno = ENOTSUP;
			return false;
	}
	if (fd < 0)
		return false;
	m->addr = mmap(NULL, s->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (m->addr == MAP_FAILED)
	{
		m->addr = NULL;
		return false;
	}
	m->mapped = true;
	return true;
}

static bool
map_segment(const GcProcSegment *s, Mapping *m)
{
	memset(m, 0, sizeof(*m));
	m->size = s->size;
	if (s->addr != NULL)
	{
		m->addr = s->addr;		/* in the main shared memory, inherited */
		return true;
	}
	return map_by_handle(s, m);
}

static void
unmap_segment(Mapping *m)
{
#ifdef USE_DSM_SYSV
	if (m->attached)
		(void) shmdt(m->addr);
#endif
	if (m->mapped)
		(void) munmap(m->addr, m->size);
	memset(m, 0, sizeof(*m));
}

/* ---------------------------------------------------------------------
 * The jobs
 * --------------------------------------------------------------------- */

/* Progress of a job, for its backend (change-counted, odd while written). */
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

/* What the GPU process does for j's algorithm (its record's), NULL when none. */
static const GcProcSteps *
proc_steps(const GcJob *j)
{
	const GcAlgorithm *a = gc_algorithm_find(j->algo);

	return a != NULL ? a->proc : NULL;
}

/*
 * The job's run: its algorithm's (the record's), or in a test
 * build under gpuclust.gpu_worker_emulate its CPU stand-in.
 */
static void
run_job(GcProcJob *r, GcJob *j)
{
	const GcProcSteps *steps = proc_steps(j);
	GcProcStep	run;

	if (steps == NULL)
	{
		gc_fail(&r->status, GC_EINTERNAL, "GPU job of unknown algorithm %d",
				(int) j->algo);
		return;
	}
	run = steps->run;
#ifdef GC_TESTING
	if (GC_PROC_EMULATED)
		run = steps->stand_in;
#endif
	run(r, j);
}

/*
 * The job's results (its scalars, as its run laid them out) and status into
 * its slot (its arrays are in the segment).
 */
static void
publish(GcProcJob *r, GcJob *j)
{
	j->results = r->results;
	j->status = r->status;
	pg_write_barrier();
}

/*
 * Whether job j makes its emulated GPU fail (a test build's
 * gpuclust.gpu_worker_emulate_lose_gpu): on its first run only, so that the
 * worker can redo it on another.
 */
static bool
loses_emulated_gpu(const GcJob *j)
{
	return GC_PROC_EMULATED && j->lose_gpu && j->lost_on < 0;
}

/*
 * After job j failed on GPU gpu with st: whether the GPU's context is gone
 * (a sticky error fails every later call; emulated, loses_emulated_gpu),
 * and then LOST, with how in its probe.
 */
static void
check_lost(const GcJob *j, int gpu, const gc_status *st)
{
	gc_cuda_device_info info;

	if (st->code != GC_EDEVICE)
		return;
	memset(&info, 0, sizeof(info));
	info.device_id = proc_devices[gpu];
	if (GC_PROC_EMULATED)
	{
		info.usable = !loses_emulated_gpu(j);
		snprintf(info.reason, sizeof(info.reason), "%s", st->message);
	}
	else
		gc_cuda_probe_cached(proc_devices[gpu], &info);
	if (info.usable)
		return;
	pthread_mutex_lock(&lost_mu);
	proc_lost[gpu] = 1;
	gc_worker->probes[gpu] = info;
	pg_write_barrier();
	pthread_mutex_unlock(&lost_mu);
	send_msg(GC_PROC_LOST, -1, gpu, 0);
}

/* A job's thread: the core call on its GPU(s), the results, DONE. */
static void *
job_thread(void *arg)
{
	ProcJob    *r = (ProcJob *) arg;
	GcJob	   *j = r->job;
	gc_cuda_device_info info;
	int			lost = -1;

	memset(&info, 0, sizeof(info));
	info.usable = true;
	for (int g = 0; g < proc_ngpus; g++)
		if (gc_job_on_gpu(j, g) && proc_lost[g] && lost < 0)
			lost = g;
	/* the CUDA device is per thread: make the job's first current */
	if (lost < 0 && !GC_PROC_EMULATED)
		gc_cuda_probe_cached(proc_devices[r->gpu], &info);
	if (lost >= 0)
		gc_fail(&r->pub.status, GC_EDEVICE, "GPU %d failed during an earlier job",
				proc_devices[lost]);
	else if (!info.usable)
		gc_fail(&r->pub.status, GC_EDEVICE, "%s", info.reason);
	else if (loses_emulated_gpu(j))
		gc_fail(&r->pub.status, GC_EDEVICE,
				"the emulated GPU %d failed (gpuclust.gpu_worker_emulate_lose_gpu)",
				proc_devices[r->gpu]);
	else
		run_job(&r->pub, j);
	for (int g = 0; g < proc_ngpus; g++)
		if (gc_job_on_gpu(j, g))
			check_lost(j, g, &r->pub.status);
	publish(&r->pub, j);
	unmap_segment(&r->out);
	unmap_segment(&r->x);
	send_msg(GC_PROC_DONE, r->slot, r->gpu, 0);
	free(r);
	pg_atomic_fetch_sub_u32(&jobs_running, 1);
	return NULL;
}

/* Fails the job in slot at once: its status, then DONE. */
static void
fail_job(GcJob *j, int slot, gc_code code, const char *what)
{
	gc_status	st;

	gc_fail(&st, code, "the gpuclust GPU process could not %s: %s", what,
			strerror(errno));
	j->status = st;
	pg_write_barrier();
	send_msg(GC_PROC_DONE, slot, -1, 0);
}

/* START: the job in m->slot on a thread of its own. */
static void
start_job(const GcProcMsg *m)
{
	GcJob	   *j;
	ProcJob    *r;
	sigset_t	all,
				old;
	pthread_t	thread;
	pthread_attr_t attr;
	int			rc;

	if (m->slot < 0 || m->slot >= gc_worker->njobs)
		return;
	j = &gc_worker->jobs[m->slot];
	pg_read_barrier();
	if (m->gpu < 0 || m->gpu >= proc_ngpus)
	{
		errno = EINVAL;
		fail_job(j, m->slot, GC_EINTERNAL, "run a job on an unknown GPU");
		return;
	}
	if ((r = calloc(1, sizeof(ProcJob))) == NULL)
	{
		fail_job(j, m->slot, GC_ENOMEM, "allocate a job");
		return;
	}
	r->job = j;
	r->slot = m->slot;
	r->gpu = m->gpu;
	/* split (the worker set the job's other GPUs before START): the core
	 * splits it over every one, the first gathering (ctx.gpus) */
	r->devices[0] = proc_devices[m->gpu];
	r->pub.ctx.n_gpus = 1;
	for (int g = 0; g < proc_ngpus; g++)
		if (g != m->gpu && gc_job_on_gpu(j, g))
			r->devices[r->pub.ctx.n_gpus++] = proc_devices[g];
	r->pub.ctx.gpus = r->devices;
	if (!map_segment(&m->out, &r->out) ||
		(m->x.handle != m->out.handle && !map_segment(&m->x, &r->x)))
	{
		unmap_segment(&r->out);
		free(r);
		fail_job(j, m->slot, GC_EDEVICE, "map the job's shared memory");
		return;
	}
	r->pub.o = r->out.addr;
	r->pub.X = (const float *) ((m->x.handle == m->out.handle ? r->out.addr : r->x.addr) +
								j->x_off);
	r->pub.ctx.n_threads = j->threads;
	r->pub.ctx.cancel_flags[0] = &j->cancel;
	r->pub.ctx.cancel_flags[1] = &stopping;
	r->pub.ctx.progress = job_progress;
	r->pub.ctx.progress_arg = j;

	/* the thread and CUDA's own threads take no signal */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pg_atomic_fetch_add_u32(&jobs_running, 1);
	rc = pthread_create(&thread, &attr, job_thread, r);
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0)
	{
		pg_atomic_fetch_sub_u32(&jobs_running, 1);
		unmap_segment(&r->out);
		unmap_segment(&r->x);
		free(r);
		errno = rc;
		fail_job(j, m->slot, GC_EDEVICE, "start a thread");
	}
}

/* ---------------------------------------------------------------------
 * The process
 * --------------------------------------------------------------------- */

static void
handle_sigterm(int signo)
{
	(void) signo;
	stop_requested = 1;
}

/*
 * The signals of a process that runs no PostgreSQL code: SIGTERM stops it,
 * the others that PostgreSQL's handlers took are ignored, and it dies with
 * the worker.
 */
static void
proc_signals(pid_t worker)
{
	struct sigaction sa;
	sigset_t	allow;
	static const int ignored[] = {SIGHUP, SIGINT, SIGUSR1, SIGUSR2, SIGALRM,
	SIGPIPE, SIGURG};

	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = SIG_IGN;
	for (int i = 0; i < lengthof(ignored); i++)
		(void) sigaction(ignored[i], &sa, NULL);
	sa.sa_handler = SIG_DFL;
	(void) sigaction(SIGQUIT, &sa, NULL);
	(void) sigaction(SIGCHLD, &sa, NULL);
	sa.sa_handler = handle_sigterm;
	(void) sigaction(SIGTERM, &sa, NULL);
#ifdef __linux__
	(void) prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
	if (getppid() != worker)
		_exit(1);				/* the worker died before the line above */
	sigemptyset(&allow);
	sigaddset(&allow, SIGTERM);
	sigaddset(&allow, SIGQUIT);
	pthread_sigmask(SIG_UNBLOCK, &allow, NULL);
}

/* Device device, probed (creating its CUDA context) or, in tests, emulated. */
static void
probe(int device, gc_cuda_device_info *info)
{
	memset(info, 0, sizeof(*info));
	if (!GC_PROC_EMULATED)
	{
		gc_cuda_probe_cached(device, info);
		/* the probe's own words name a backend's setting */
		if (!info->usable && info->device_count > 0 && device >= info->device_count)
			snprintf(info->reason, sizeof(info->reason),
					 "CUDA has no device %d: it sees %d (gpuclust.gpu_devices lists it)",
					 device, info->device_count);
		return;
	}
#ifdef GC_TESTING
	info->usable = true;
	info->device_count = proc_ngpus;
	info->device_id = device;
	snprintf(info->name, sizeof(info->name),
			 "the CPU (gpuclust.gpu_worker_emulate)");
	info->total_mem = info->free_mem = (size_t) gpuclust_gpu_worker_emulate << 20;
#endif
}

/*
 * The GPUs, each probed into gc_worker->probes, their pools kept: those
 * listed, or every visible one (an emulated worker: one).  With no device
 * at all, the one probe that says why.
 */
static void
probe_all(const int *devices, int ndevices)
{
	gc_cuda_device_info first;

	if (ndevices > 0)
	{
		memcpy(proc_devices, devices, sizeof(int) * ndevices);
		proc_ngpus = ndevices;
	}
	else
	{
		proc_devices[0] = 0;
		proc_ngpus = 1;
		if (!GC_PROC_EMULATED)
		{
			gc_cuda_probe_cached(0, &first);	/* device 0 below: a lookup */
			proc_ngpus = Min(Max(first.device_count, 1), GC_WORKER_MAX_GPUS);
			for (int g = 0; g < proc_ngpus; g++)
				proc_devices[g] = g;
		}
	}
	for (int g = 0; g < proc_ngpus; g++)
	{
		gc_cuda_device_info *info = &gc_worker->probes[g];

		probe(proc_devices[g], info);
		if (info->usable && !GC_PROC_EMULATED)
			gc_cuda_keep_memory(gc_proc_device_memory(info));
	}
	gc_worker->nprobes = proc_ngpus;
	pg_write_barrier();
}

/*
 * Once a tick: each GPU's free memory to the worker when it changed, and
 * the pooled memory back to the driver after GC_PROC_TRIM_MS without jobs.
 */
static void
tick(double *busy_at, bool *trimmed, size_t *free_mem)
{
	double		now = gc_now_ms();
	bool		trim = false;

	if (pg_atomic_read_u32(&jobs_running) > 0)
	{
		*busy_at = now;
		*trimmed = false;
	}
	else if (!*trimmed && now - *busy_at >= GC_PROC_TRIM_MS)
	{
		trim = true;
		*trimmed = true;
	}
	for (int g = 0; g < proc_ngpus; g++)
	{
		gc_cuda_device_info info;

		if (!gc_worker->probes[g].usable || proc_lost[g])
			continue;
		gc_cuda_probe_cached(proc_devices[g], &info);	/* makes it current */
		if (trim)
			gc_cuda_trim_memory();
		if (info.usable && info.free_mem != free_mem[g])
		{
			free_mem[g] = info.free_mem;
			send_msg(GC_PROC_FREE_MEM, -1, g, info.free_mem);
		}
	}
}

/* Stops: cancels the running jobs and waits up to GC_PROC_STOP_MS for them. */
pg_noreturn static void
proc_stop(void)
{
	double		until = gc_now_ms() + GC_PROC_STOP_MS;

	stopping = 1;
	while (pg_atomic_read_u32(&jobs_running) > 0 && gc_now_ms() < until)
		(void) poll(NULL, 0, 10);
	_exit(0);
}

void
gc_gpu_process_main(int sock, const int *devices, int ndevices)
{
	double		busy_at = 0;
	bool		trimmed = true;
	size_t		free_mem[GC_WORKER_MAX_GPUS];

	proc_sock = sock;
	pg_atomic_init_u32(&jobs_running, 0);
	proc_signals(getppid());
	/* "gpuclust GPU worker GPU process" in ps: this process's own memory */
	set_ps_display("GPU process");

	probe_all(devices, ndevices);
	send_msg(GC_PROC_READY, -1, -1, 0);
	for (int g = 0; g < proc_ngpus; g++)
		free_mem[g] = gc_worker->probes[g].free_mem;

	while (!stop_requested)
	{
		struct pollfd pfd = {sock, POLLIN, 0};
		int			rc = poll(&pfd, 1, GC_PROC_TICK_MS);

		if (rc > 0)
		{
			GcProcMsg	m;
			ssize_t		got = recv(sock, &m, sizeof(m), MSG_DONTWAIT);

			if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN))
				break;			/* the worker has gone */
			if (got == sizeof(m) && m.kind == GC_PROC_START)
				start_job(&m);
		}
		if (!GC_PROC_EMULATED)
			tick(&busy_at, &trimmed, free_mem);
	}
	proc_stop();
}
