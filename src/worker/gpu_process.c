/*-------------------------------------------------------------------------
 *
 * gpu_process.c
 *	  The GPU process: the GPU worker's child that holds the CUDA context
 *	  and runs the jobs the worker starts (why it is a process of its own,
 *	  and its messages: worker/gpu_process.h).
 *
 * It probes the GPU once (creating the CUDA context) and says READY; then
 * its main thread waits on the socket for START messages.  Each job runs
 * on a thread of its own (signals blocked) through the core entry points a
 * backend would call (gc_kmeans_gpu, gc_dbscan_on_gpu, gc_ap_gpu,
 * gc_kdistance_gpu, gc_silhouette_gpu, gc_kmeans_labels_gpu), on a CUDA
 * stream of its own; the context, the pinned staging ring (transfer.cu)
 * and device memory (CUDA's stream-ordered pool, kept up to the budget:
 * gc_cuda_keep_memory) stay from job to job, and after GC_PROC_TRIM_MS
 * without jobs the pool goes back to the driver.  A job's thread maps the
 * job's segments, writes the outputs there and the status, scalars and
 * phase times into the job's slot, unmaps them and says DONE.
 *
 * Nothing here calls PostgreSQL (but set_ps_display, which writes this
 * process's own title): no elog, no palloc, no lock, no latch;
 * the process ends with _exit, so that none of the worker's exit callbacks
 * runs in it.  It ends on SIGTERM (its jobs cancelled, waited for up to
 * GC_PROC_STOP_MS), when the worker's end of the socket closes, and, by
 * PR_SET_PDEATHSIG, with the worker.  In a test build (GC_TESTING), under
 * gpuclust.gpu_worker_emulate the CPU's core functions stand in for the
 * GPU's, on a "device" of that many MB, so that the whole path is tested
 * where no GPU is; a product build has no such setting.
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

/* One job, owned by its thread. */
typedef struct ProcJob
{
	GcJob	   *job;
	int			slot;
	Mapping		x,
				out;
	const float *X;
	char	   *o;				/* the outputs' segment */
	gc_ctx		ctx;
	gc_status	status;
	gc_kmeans_result kmeans;
	gc_ap_result ap;
	gc_silhouette_result silhouette;
	gc_kmeans_gpu_phases km_phases;
	gc_dbscan_gpu_phases db_phases;
} ProcJob;

static int	proc_sock = -1;
static int	proc_device_id;
static volatile sig_atomic_t stop_requested = 0;	/* SIGTERM */
/*
 * Whether the CPU stands in for the GPU (test builds only), and the core
 * entry point f_gpu, or f_cpu in its stead, for the calls whose CPU entry
 * point takes the GPU's arguments.
 */
#ifdef GC_TESTING
#define EMULATED (gpuclust_gpu_worker_emulate != 0)
#define GPU_OR_STAND_IN(f) (EMULATED ? f##_cpu : f##_gpu)
#else
#define EMULATED false
#define GPU_OR_STAND_IN(f) f##_gpu
#endif

static volatile sig_atomic_t stopping = 0;	/* every job's second cancel flag */
static pg_atomic_uint32 jobs_running;

size_t
gc_proc_device_memory(const gc_cuda_device_info *info)
{
	if (!info->usable)
		return 0;
	if (EMULATED)
		return info->free_mem;
	return info->free_mem > GC_WORKER_HEADROOM ?
		info->free_mem - GC_WORKER_HEADROOM : 0;
}

static void
send_msg(GcProcMsgKind kind, int slot, uint64 value)
{
	GcProcMsg	m;

	memset(&m, 0, sizeof(m));
	m.kind = kind;
	m.slot = slot;
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

/*
 * The core calls of a job's thread, one per algorithm: the GPU's entry
 * points, their inputs and outputs in the job's segments.
 */
typedef void (*ProcRun) (ProcJob *r, GcJob *j);

/* the k-means arrays the backend put in the outputs' segment, and its results there */
static gc_kmeans_params
kmeans_job(ProcJob *r, GcJob *j)
{
	gc_kmeans_params p = j->p.kmeans;

	if (j->in_weights != 0)
		p.weights = (const double *) (r->o + j->in_weights);
	if (j->in_centroids != 0)
		p.init_centroids = (const float *) (r->o + j->in_centroids);
	r->kmeans.labels = (int32_t *) (r->o + j->out_labels);
	r->kmeans.distance = (double *) (r->o + j->out_second);
	r->kmeans.centroids = (float *) (r->o + j->out_centroids);
	return p;
}

static void
run_kmeans(ProcJob *r, GcJob *j)
{
	gc_kmeans_params p = kmeans_job(r, j);

	(void) gc_kmeans_on_gpu(&r->ctx, r->X, j->n, j->d, &p, &r->kmeans,
						 &r->status);
	gc_kmeans_gpu_last_phases(&r->km_phases);
}

static void
run_dbscan(ProcJob *r, GcJob *j)
{
	(void) gc_dbscan_on_gpu(&r->ctx, r->X, j->n, j->d, &j->p.dbscan,
							(int32_t *) (r->o + j->out_labels),
							(uint8_t *) (r->o + j->out_second), &r->status);
	gc_dbscan_gpu_last_phases(&r->db_phases);
}

static void
ap_job(ProcJob *r, GcJob *j)
{
	r->ap.labels = (int32_t *) (r->o + j->out_labels);
	r->ap.is_exemplar = (uint8_t *) (r->o + j->out_second);
}

static void
run_ap(ProcJob *r, GcJob *j)
{
	ap_job(r, j);
	(void) gc_ap_gpu(&r->ctx, r->X, j->n, j->d, &j->p.ap, &r->ap, &r->status);
}

/*
 * The k-distances, the silhouette and a kmeans_step block's labels: in a
 * test build the CPU's entry points, which take the same arguments, may
 * stand in (GPU_OR_STAND_IN).
 */
static void
run_kdistance(ProcJob *r, GcJob *j)
{
	(void) GPU_OR_STAND_IN(gc_kdistance) (&r->ctx, r->X, j->n, j->d,
										  j->p.kdistance.k,
										  (float *) (r->o + j->out_second),
										  &r->status);
}

/* the labels the backend put in the outputs' segment */
static void
run_silhouette(ProcJob *r, GcJob *j)
{
	(void) GPU_OR_STAND_IN(gc_silhouette) (&r->ctx, r->X, j->n, j->d,
										   (const int32_t *) (r->o + j->in_array),
										   j->p.silhouette.m,
										   j->p.silhouette.sample_size,
										   j->p.silhouette.seed,
										   &r->silhouette, &r->status);
}

/* the centres the backend put in the outputs' segment */
static void
run_kmeans_labels(ProcJob *r, GcJob *j)
{
	(void) GPU_OR_STAND_IN(gc_kmeans_labels) (&r->ctx, r->X, j->n, j->d,
											  (const float *) (r->o + j->in_array),
											  j->p.kmeans.k,
											  (int32_t *) (r->o + j->out_second),
											  &r->status);
}

/*
 * The job's scalars into its slot (its arrays are in the segment), for the
 * algorithms that have some.
 */
static void
publish_kmeans(ProcJob *r, GcJob *j)
{
	j->kmeans.inertia = r->kmeans.inertia;
	j->kmeans.iterations = r->kmeans.iterations;
	j->kmeans.converged = r->kmeans.converged;
	j->phases.kmeans = r->km_phases;
}

static void
publish_dbscan(ProcJob *r, GcJob *j)
{
	j->phases.dbscan = r->db_phases;
}

static void
publish_ap(ProcJob *r, GcJob *j)
{
	j->ap = r->ap;
	j->ap.labels = NULL;
	j->ap.is_exemplar = NULL;
}

static void
publish_silhouette(ProcJob *r, GcJob *j)
{
	j->silhouette = r->silhouette;
}

/* What the GPU process does for each algorithm: its run, what it publishes. */
typedef struct ProcAlgo
{
	ProcRun		run;
	ProcRun		publish;		/* NULL: the outputs are all in the segment */
} ProcAlgo;

static const ProcAlgo proc_algos[GC_ALGO_COUNT] = {
	[GC_ALGO_KMEANS] = {run_kmeans, publish_kmeans},
	[GC_ALGO_DBSCAN] = {run_dbscan, publish_dbscan},
	[GC_ALGO_AP] = {run_ap, publish_ap},
	[GC_ALGO_KDISTANCE] = {run_kdistance, NULL},
	[GC_ALGO_SILHOUETTE] = {run_silhouette, publish_silhouette},
	[GC_ALGO_KMEANS_LABELS] = {run_kmeans_labels, NULL},
};

/* the entry of a job's algorithm, NULL when it is unknown */
static const ProcAlgo *
proc_algo(const GcJob *j)
{
	if (j->algo < 0 || j->algo >= GC_ALGO_COUNT || proc_algos[j->algo].run == NULL)
		return NULL;
	return &proc_algos[j->algo];
}

#ifdef GC_TESTING
/*
 * Test builds: the CPU's entry points stand in for the GPU's
 * (gpuclust.gpu_worker_emulate).
 */
static void
emulate_kmeans(ProcJob *r, GcJob *j)
{
	gc_kmeans_params p = kmeans_job(r, j);

	(void) gc_kmeans_cpu(&r->ctx, r->X, j->n, j->d, &p, &r->kmeans,
						 &r->status);
}

/* dclust, which runs only on the GPU, by union-find (the same labels) */
static void
emulate_dbscan(ProcJob *r, GcJob *j)
{
	gc_dbscan_params p = j->p.dbscan;

	p.algorithm = GC_DBSCAN_UNION_FIND;
	(void) gc_dbscan_cpu(&r->ctx, r->X, j->n, j->d, &p,
						 (int32_t *) (r->o + j->out_labels),
						 (uint8_t *) (r->o + j->out_second), &r->status);
}

/* float4 is the GPU's own arithmetic: no CPU path stands in for it */
static void
emulate_ap(ProcJob *r, GcJob *j)
{
	ap_job(r, j);
	if (j->p.ap.precision == GC_AP_FLOAT8)
		(void) gc_ap_cpu(&r->ctx, r->X, j->n, j->d, &j->p.ap, &r->ap,
						 &r->status);
	else
		gc_fail(&r->status, GC_EDEVICE,
				"affinity propagation in %s runs only on a real GPU, and gpuclust.gpu_worker_emulate runs the GPU worker's jobs on the CPU",
				gc_ap_precision_name(j->p.ap.precision));
}

/* the calls whose CPU entry point differs (the others: GPU_OR_STAND_IN) */
static const ProcRun emulated_runs[GC_ALGO_COUNT] = {
	[GC_ALGO_KMEANS] = emulate_kmeans,
	[GC_ALGO_DBSCAN] = emulate_dbscan,
	[GC_ALGO_AP] = emulate_ap,
};
#endif

static void
run_job(ProcJob *r, GcJob *j)
{
	const ProcAlgo *a = proc_algo(j);
	ProcRun		run;

	if (a == NULL)
	{
		gc_fail(&r->status, GC_EINTERNAL, "GPU job of unknown algorithm %d",
				(int) j->algo);
		return;
	}
	run = a->run;
#ifdef GC_TESTING
	if (EMULATED && emulated_runs[j->algo] != NULL)
		run = emulated_runs[j->algo];
#endif
	run(r, j);
}

/* The job's scalars and status into its slot (its arrays are in the segment). */
static void
publish(ProcJob *r, GcJob *j)
{
	const ProcAlgo *a = proc_algo(j);

	if (a != NULL && a->publish != NULL)
		a->publish(r, j);
	j->status = r->status;
	pg_write_barrier();
}

/* A job's thread: the core call, the results, DONE. */
static void *
job_thread(void *arg)
{
	ProcJob    *r = (ProcJob *) arg;
	GcJob	   *j = r->job;
	gc_cuda_device_info info;

	memset(&info, 0, sizeof(info));
	info.usable = true;
	/* the CUDA device is per thread: make the process's current */
	if (!EMULATED)
		gc_cuda_probe_cached(proc_device_id, &info);
	if (!info.usable)
		gc_fail(&r->status, GC_EDEVICE, "%s", info.reason);
	else
		run_job(r, j);
	publish(r, j);
	unmap_segment(&r->out);
	unmap_segment(&r->x);
	send_msg(GC_PROC_DONE, r->slot, 0);
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
	send_msg(GC_PROC_DONE, slot, 0);
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
	if ((r = calloc(1, sizeof(ProcJob))) == NULL)
	{
		fail_job(j, m->slot, GC_ENOMEM, "allocate a job");
		return;
	}
	r->job = j;
	r->slot = m->slot;
	if (!map_segment(&m->out, &r->out) ||
		(m->x.handle != m->out.handle && !map_segment(&m->x, &r->x)))
	{
		unmap_segment(&r->out);
		free(r);
		fail_job(j, m->slot, GC_EDEVICE, "map the job's shared memory");
		return;
	}
	r->o = r->out.addr;
	r->X = (const float *) ((m->x.handle == m->out.handle ? r->out.addr : r->x.addr) +
							j->x_off);
	r->ctx.n_threads = j->threads;
	r->ctx.cancel_flags[0] = &j->cancel;
	r->ctx.cancel_flags[1] = &stopping;
	r->ctx.progress = job_progress;
	r->ctx.progress_arg = j;

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

/* The device, probed (creating the CUDA context) or, in tests, emulated. */
static void
probe(gc_cuda_device_info *info)
{
	memset(info, 0, sizeof(*info));
	if (!EMULATED)
	{
		gc_cuda_probe_cached(proc_device_id, info);
		return;
	}
#ifdef GC_TESTING
	info->usable = true;
	info->device_count = 1;
	info->device_id = proc_device_id;
	snprintf(info->name, sizeof(info->name),
			 "the CPU (gpuclust.gpu_worker_emulate)");
	info->total_mem = info->free_mem = (size_t) gpuclust_gpu_worker_emulate << 20;
#endif
}

/*
 * Once a tick: the device's free memory to the worker when it changed, and
 * the pooled memory back to the driver after GC_PROC_TRIM_MS without jobs.
 */
static void
tick(double *busy_at, bool *trimmed, size_t *free_mem)
{
	gc_cuda_device_info info;
	double		now = gc_now_ms();

	if (pg_atomic_read_u32(&jobs_running) > 0)
	{
		*busy_at = now;
		*trimmed = false;
	}
	else if (!*trimmed && now - *busy_at >= GC_PROC_TRIM_MS)
	{
		gc_cuda_trim_memory();
		*trimmed = true;
	}
	gc_cuda_probe_cached(proc_device_id, &info);
	if (info.usable && info.free_mem != *free_mem)
	{
		*free_mem = info.free_mem;
		send_msg(GC_PROC_FREE_MEM, -1, info.free_mem);
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
gc_gpu_process_main(int sock, int device_id)
{
	gc_cuda_device_info info;
	double		busy_at = 0;
	bool		trimmed = true;
	size_t		free_mem = 0;

	proc_sock = sock;
	proc_device_id = device_id;
	pg_atomic_init_u32(&jobs_running, 0);
	proc_signals(getppid());
	/* "gpuclust GPU worker GPU process" in ps: this process's own memory */
	set_ps_display("GPU process");

	probe(&info);
	gc_worker->probe = info;
	pg_write_barrier();
	if (info.usable && !EMULATED)
		gc_cuda_keep_memory(gc_proc_device_memory(&info));
	send_msg(GC_PROC_READY, -1, 0);
	free_mem = info.free_mem;

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
		if (info.usable && !EMULATED)
			tick(&busy_at, &trimmed, &free_mem);
	}
	proc_stop();
}
