/*-------------------------------------------------------------------------
 *
 * job.c
 *	  A backend's side of the GPU: what dispatch sees, and the hand-off of
 *	  a job to the GPU worker (protocol: worker/queue.h), which each
 *	  algorithm's GPU run uses (src/<algorithm>/<algorithm>_job.c).
 *
 * With the worker, a GPU run puts the job in this backend's slot: the
 * matrix stays where ingest wrote it (a DSM segment, gc_shared_alloc)
 * or, from a window partition, is copied once into the outputs' segment;
 * the parameters go into the slot.  The backend then sleeps on its latch
 * (wait event Extension), waking every GC_JOB_POLL_MS to copy the job's
 * progress into gpuclust_progress and to notice a worker that is gone.
 * Cancel, statement_timeout and termination take the job back or cancel
 * it (abandon), and raise as usual.  The outputs are copied from the
 * segment into the caller's arrays.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"


#include "miscadmin.h"
#include "pgstat.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "worker/job.h"
#include "worker/queue.h"
#include "worker/worker.h"
#include "common/pg_compat.h"
#include "common/ingest.h"
#include "common/progress.h"

/* how often a waiting backend looks at its job besides its latch */
#define GC_JOB_POLL_MS 250

/*
 * How long a call waits for a worker that is starting or restarting
 * (the postmaster restarts it GC_WORKER_RESTART_S seconds after an exit)
 */
#define GC_WORKER_SETTLE_MS ((GC_WORKER_RESTART_S + 3) * 1000)


/* ---------------------------------------------------------------------
 * The GPU dispatch sees
 * --------------------------------------------------------------------- */

static bool
worker_warm(const gc_gpu *gpu)
{
	(void) gpu;
	return true;				/* the worker's context is up */
}

GcWorkerState
gc_job_worker_settled(void)
{
	GcWorkerState state;
	int			waited = 0;

	for (;;)
	{
		SpinLockAcquire(&gc_worker->mutex);
		state = gc_worker->state;
		SpinLockRelease(&gc_worker->mutex);
		if (state == GC_WORKER_READY || state == GC_WORKER_NO_GPU ||
			state == GC_WORKER_RECOVERING || waited >= GC_WORKER_SETTLE_MS)
			return state;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 50, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		waited += 50;
	}
}

/*
 * The CUDA device this session's jobs must run on: device_id (its
 * gpuclust.gpu_device_id) when that differs from the server's, else -1
 * (any of the worker's).
 */
static int
wanted_device(int device_id)
{
	int			server;

	SpinLockAcquire(&gc_worker->mutex);
	server = gc_worker->server_device_id;
	SpinLockRelease(&gc_worker->mutex);
	return device_id != server ? device_id : -1;
}

int
gc_job_split_most(void)
{
	return gpuclust_gpu_worker_gpus_per_call > 0 ?
		gpuclust_gpu_worker_gpus_per_call : GC_WORKER_MAX_GPUS;
}

/*
 * The worker's GPUs as dispatch sees them: usable when one this session
 * may use takes jobs; mem the largest budget of those (a job runs on one);
 * gpus how many of them one call may split over.
 */
static void
worker_gpus(int want, gc_gpu_state *out)
{
	bool		owned = false;
	char		owns[GC_WORKER_GPU_LIST_BYTES];
	int			ready = 0;

	for (int g = 0; g < gc_worker->ngpus; g++)
	{
		const GcWorkerGpu *gpu = &gc_worker->gpus[g];

		if (want >= 0 && gpu->device_id != want)
			continue;
		owned = true;
		if (gpu->state == GC_GPU_READY)
		{
			out->usable = true;
			out->mem = Max(out->mem, gpu->budget);
			ready++;
		}
		else
		{
			size_t		len = strlen(out->reason);

			snprintf(out->reason + len, sizeof(out->reason) - len,
					 "%sGPU %d of the gpuclust GPU worker is %s: %s",
					 len > 0 ? "; " : "", gpu->device_id,
					 gpu->state == GC_GPU_LOST ? "lost" : "not usable",
					 gpu->info.reason);
		}
	}
	out->gpus = Max(Min(gc_job_split_most(), ready), 1);
	if (out->usable)
		out->reason[0] = '\0';
	else if (want >= 0 && !owned)
	{
		gc_worker_gpu_list(gc_worker->gpus, gc_worker->ngpus, owns, sizeof(owns));
		snprintf(out->reason, sizeof(out->reason),
				 "gpuclust.gpu_device_id is %d, but the GPUs of the gpuclust GPU worker are %s (gpuclust.gpu_devices, read at the server's start)",
				 want, owns);
	}
}

static void
worker_probe(const gc_gpu *gpu, gc_gpu_state *out)
{
	GcWorkerState state;
	int			want = wanted_device(gpu->device_id);

	memset(out, 0, sizeof(*out));
	out->gpus = 1;
	(void) gc_job_worker_settled();
	SpinLockAcquire(&gc_worker->mutex);
	state = gc_worker->state;
	if (state == GC_WORKER_READY)
		worker_gpus(want, out);
	else if (state == GC_WORKER_NO_GPU)
		snprintf(out->reason, sizeof(out->reason),
				 "the gpuclust GPU worker has no usable GPU: %s",
				 gc_worker->info.reason);
	else if (state == GC_WORKER_RECOVERING)
		strlcpy(out->reason, gc_worker->info.reason, sizeof(out->reason));
	SpinLockRelease(&gc_worker->mutex);
	if (state != GC_WORKER_READY && state != GC_WORKER_NO_GPU &&
		state != GC_WORKER_RECOVERING)
		snprintf(out->reason, sizeof(out->reason),
				 "the gpuclust GPU worker is not running (it restarts within %d seconds)",
				 GC_WORKER_RESTART_S + 1);
}

void
gc_glue_gpu(gc_gpu *gpu)
{
	if (gc_worker == NULL)
		gc_gpu_local(gpu, gpuclust_gpu_device_id);
	else
	{
		gpu->device_id = gpuclust_gpu_device_id;
		gpu->warm = worker_warm;
		gpu->probe = worker_probe;
	}
	gpu->mem_limit = (size_t) gpuclust_gpu_memory_limit << 20;
}

/*
 * Whether the worker takes jobs; also whether ingest should put a matrix
 * in shared memory (gc_shared_wanted).
 */
static bool
worker_ready(void)
{
	GcWorkerState s;

	if (gc_worker == NULL)
		return false;
	SpinLockAcquire(&gc_worker->mutex);
	s = gc_worker->state;
	SpinLockRelease(&gc_worker->mutex);
	return s == GC_WORKER_READY;
}

void
gc_job_init(void)
{
	gc_shared_wanted = worker_ready;
}

/* ---------------------------------------------------------------------
 * The hand-off
 * --------------------------------------------------------------------- */

static bool exit_callback_registered = false;

static GcJob *
my_job(void)
{
	Assert(gc_my_slot() >= 0 && gc_my_slot() < gc_worker->njobs);
	return &gc_worker->jobs[gc_my_slot()];
}

static void
set_worker_latch(void)
{
	int			procno;
	bool		running;

	SpinLockAcquire(&gc_worker->mutex);
	procno = gc_worker->procno;
	running = gc_worker->pid != 0;
	SpinLockRelease(&gc_worker->mutex);
	if (running)
		SetLatch(&ProcGlobal->allProcs[procno].procLatch);
}

/*
 * This backend stops waiting for its job: takes it back while queued,
 * frees it when done, else cancels it and leaves it to the worker.
 */
static void
abandon(GcJob *j)
{
	uint32		s;

	if (j->pid != MyProcPid)
		return;
	pg_atomic_write_u32(&j->abandoned, 1);
	j->cancel = 1;
	pg_memory_barrier();
	s = GC_JOB_QUEUED;
	if (pg_atomic_compare_exchange_u32(&j->state, &s, GC_JOB_FREE))
		return;
	s = GC_JOB_DONE;
	if (pg_atomic_compare_exchange_u32(&j->state, &s, GC_JOB_FREE))
		return;
	set_worker_latch();			/* running: the worker frees it */
}

static void
backend_exit(int code, Datum arg)
{
	if (gc_worker != NULL && gc_my_slot() >= 0 &&
		pg_atomic_read_u32(&my_job()->state) != GC_JOB_FREE)
		abandon(my_job());
}

/*
 * A consistent copy of job j's progress, which its thread in the GPU
 * process writes (change-counted: odd while written); false when none
 * was reported.
 */
static bool
read_progress(GcJob *j, gc_progress *out)
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

/* Sleeps until the latch is set or GC_JOB_POLL_MS pass; raises interrupts. */
static void
job_sleep(void)
{
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					 GC_JOB_POLL_MS, PG_WAIT_EXTENSION);
	ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
}

/* Interrupts raise after abandon: the job taken back, or cancelled. */
gc_code
gc_job_submit(GcJob *j, gc_status *st)
{
	uint32		s = GC_JOB_FREE;
	gc_progress last = {0};

	if (!exit_callback_registered)
	{
		before_shmem_exit(backend_exit, (Datum) 0);
		exit_callback_registered = true;
	}
	j->pid = MyProcPid;
	j->userid = GetUserId();
	j->procno = gc_my_procno();
	j->cancel = 0;
	pg_atomic_write_u32(&j->abandoned, 0);
	pg_atomic_write_u32(&j->progress_count, 0);
	j->want_device = wanted_device(gpuclust_gpu_device_id);
#ifdef GC_TESTING
	j->lose_gpu = gpuclust_gpu_worker_emulate_lose_gpu;
#else
	j->lose_gpu = false;
#endif
	j->gpu = -1;
	j->gpus_more = 0;
	j->lost_on = -1;
	j->queued_at = GetCurrentTimestamp();
	j->seq = pg_atomic_fetch_add_u64(&gc_worker->next_seq, 1);
	pg_write_barrier();
	if (!pg_atomic_compare_exchange_u32(&j->state, &s, GC_JOB_QUEUED))
		elog(ERROR, "gpuclust: GPU job slot of backend %d is busy", MyProcPid);
	set_worker_latch();

	PG_TRY();
	{
		for (;;)
		{
			gc_progress p;

			s = pg_atomic_read_u32(&j->state);
			if (s == GC_JOB_DONE)
				break;
			if (s == GC_JOB_QUEUED && !worker_ready())
			{
				uint32		queued = GC_JOB_QUEUED;

				if (pg_atomic_compare_exchange_u32(&j->state, &queued, GC_JOB_FREE))
					return gc_fail(st, GC_EDEVICE,
								   "the gpuclust GPU worker is not running");
			}
			if (read_progress(j, &p) &&
				memcmp(&p, &last, sizeof(p)) != 0)
			{
				gc_progress_sink(NULL, &p);
				last = p;
			}
			job_sleep();
		}
	}
	PG_CATCH();
	{
		abandon(j);
		PG_RE_THROW();
	}
	PG_END_TRY();
	pg_read_barrier();
	*st = j->status;
	return st->code;
}

/* Waits (interruptibly) until the worker has let go of an abandoned job. */
static void
wait_slot_free(GcJob *j)
{
	while (pg_atomic_read_u32(&j->state) != GC_JOB_FREE)
	{
		if (!worker_ready() && j->pid == MyProcPid)
			abandon(j);
		job_sleep();
	}
}

dsm_segment *
gc_job_segments(GcJob *j, const GcInput *in, Size out_bytes, gc_status *st)
{
	Size		x_bytes = (Size) in->n * (Size) in->d * sizeof(float);
	Size		x_off = MAXALIGN(out_bytes);
	dsm_segment *out;

	dsm_segment *xs = in->x_shared != NULL ? in->x_shared->seg : NULL;
	Size		bytes = xs != NULL ? out_bytes : x_off + x_bytes;

	if ((out = gc_shared_segment(bytes)) == NULL)
	{
		gc_fail(st, GC_ENOMEM,
				"no room in shared memory for the GPU worker's job (%zu MiB; posix shared memory lives in /dev/shm)",
				(bytes >> 20) + 1);
		return NULL;
	}
	j->out_seg = dsm_segment_handle(out);
	if (xs != NULL)
	{
		j->x_seg = dsm_segment_handle(xs);
		j->x_off = (char *) in->X - (char *) dsm_segment_address(xs);
	}
	else
	{
		j->x_seg = j->out_seg;
		j->x_off = x_off;
		memcpy((char *) dsm_segment_address(out) + x_off, in->X, x_bytes);
	}
	return out;
}

bool
gc_job_by_worker(void)
{
	return gc_worker != NULL;
}

GcJob *
gc_job_begin(gc_algorithm algo, const gc_ctx *ctx, const GcInput *in)
{
	GcJob	   *j = my_job();

	wait_slot_free(j);
	j->algo = algo;
	j->n = in->n;
	j->d = in->d;
	j->threads = ctx->n_threads;
	j->mem = 0;
	j->split_max = 1;
	j->split_min = 1;
	j->split_mem = 0;
	j->out_labels = j->out_second = j->out_centroids = 0;
	j->in_weights = j->in_centroids = j->in_array = 0;
	return j;
}

/* for qsort: budgets largest first */
static int
budget_cmp(const void *a, const void *b)
{
	size_t		x = *(const size_t *) a,
				y = *(const size_t *) b;

	return x < y ? 1 : x > y ? -1 : 0;
}

size_t
gc_job_split_min(GcJob *j, size_t one, const size_t *part)
{
	size_t		budgets[GC_WORKER_MAX_GPUS];
	size_t		limit = (size_t) gpuclust_gpu_memory_limit << 20;
	int			want = wanted_device(gpuclust_gpu_device_id),
				count = 0,
				most;

	SpinLockAcquire(&gc_worker->mutex);
	for (int g = 0; g < gc_worker->ngpus; g++)
	{
		const GcWorkerGpu *gpu = &gc_worker->gpus[g];

		if ((want < 0 || gpu->device_id == want) && gpu->state == GC_GPU_READY)
			budgets[count++] = limit > 0 ? Min(gpu->budget, limit) : gpu->budget;
	}
	SpinLockRelease(&gc_worker->mutex);
	qsort(budgets, count, sizeof(size_t), budget_cmp);
	most = Min(gc_job_split_most(), count);
	/* fits one GPU (or none is usable: the worker says so) */
	if (count == 0 || one <= budgets[0])
		return one;
	/* G GPUs: G parts, each within the G-th largest budget */
	for (int g = 2; g <= most; g++)
	{
		size_t		each = part[g];

		if (each <= budgets[g - 1])
		{
			j->split_min = g;
			j->split_max = Max(j->split_max, gc_job_split_most());
			j->split_mem = each;
			return each;
		}
	}
	return one;
}

void
gc_job_release(GcJob *j, dsm_segment *out)
{
	uint32		done = GC_JOB_DONE;

	(void) pg_atomic_compare_exchange_u32(&j->state, &done, GC_JOB_FREE);
	dsm_detach(out);
}

dsm_segment *
gc_job_labelling(GcJob *j, const GcInput *in, size_t mem, int32 *labels,
				 uint8 *flags, gc_status *st)
{
	dsm_segment *out;
	char	   *o;
	Size		n = in->n;

	j->mem = mem;
	j->out_labels = 0;
	j->out_second = MAXALIGN(n * sizeof(int32));
	j->out_centroids = 0;
	if ((out = gc_job_segments(j, in, j->out_second + n, st)) == NULL)
		return NULL;
	if (gc_job_submit(j, st) == GC_OK)
	{
		o = dsm_segment_address(out);
		memcpy(labels, o + j->out_labels, n * sizeof(int32));
		memcpy(flags, o + j->out_second, n);
	}
	return out;
}

dsm_segment *
gc_job_array(GcJob *j, const GcInput *in, size_t mem, const void *input,
			 Size in_bytes, void *output, Size out_bytes, gc_status *st)
{
	dsm_segment *out;
	char	   *o;

	j->mem = mem;
	j->in_array = MAXALIGN(out_bytes);
	if ((out = gc_job_segments(j, in, j->in_array + in_bytes, st)) == NULL)
		return NULL;
	o = dsm_segment_address(out);
	if (input != NULL)
		memcpy(o + j->in_array, input, in_bytes);
	if (gc_job_submit(j, st) == GC_OK && output != NULL)
		memcpy(output, o + j->out_second, out_bytes);
	return out;
}
