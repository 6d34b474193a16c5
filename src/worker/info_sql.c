/*-------------------------------------------------------------------------
 *
 * info_sql.c
 *	  gpuclust_info() RETURNS TABLE (key text, value text), and the GPU
 *	  worker's views: gpuclust_gpus (its GPUs) and gpuclust_gpu_jobs (its
 *	  jobs, and the GPU each runs on)
 *
 * Says whether this build has CUDA, whether the GPU is usable (and why
 * not), the device's name, memory and compute capability, the GPU worker's
 * state, and each algorithm's lines (its record's info, common/algorithm.h:
 * which device 'auto' picks for a problem big enough for the GPU, from
 * which size, where its GPU-only forms run, what fits).  The GPU
 * is probed here, lazily, in the calling backend: never in _PG_init or the
 * postmaster; the probe is cached per backend, the free memory read anew.
 * cpu_threads is the effective thread count of a call (gpuclust.cpu_threads
 * capped by gpuclust.max_cpu_threads and the cores); memory_available_bytes
 * the memory the O(n^2) check compares with (MemAvailable, or less under a
 * cgroup limit).  The set of keys is the same on every build; values that do
 * not apply are NULL.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "common/algorithm.h"
#include "common/gpuclust.h"
#include "worker/job.h"
#include "worker/queue.h"
#include "worker/worker.h"
#include "core/common/gpu.h"

PG_FUNCTION_INFO_V1(gpuclust_info);
PG_FUNCTION_INFO_V1(gpuclust_gpu_jobs);
PG_FUNCTION_INFO_V1(gpuclust_gpus);

/*
 * A copy of the worker's state, and its queue's length: every backend's
 * jobs when all, else the caller's own.
 */
typedef struct WorkerInfo
{
	GcWorkerState state;
	int			pid,
				gpu_pid;		/* its GPU process's */
	gc_cuda_device_info info;
	size_t		budget,
				free_mem;
	int			queued,
				running;
	int			ngpus;
	GcWorkerGpu gpus[GC_WORKER_MAX_GPUS];
} WorkerInfo;

static bool
worker_info(WorkerInfo *w, bool all)
{
	int			g;

	memset(w, 0, sizeof(*w));
	if (gc_worker == NULL)
		return false;
	(void) gc_job_worker_settled();
	SpinLockAcquire(&gc_worker->mutex);
	w->state = gc_worker->state;
	w->pid = gc_worker->pid;
	w->gpu_pid = gc_worker->gpu_pid;
	w->info = gc_worker->info;
	w->ngpus = gc_worker->ngpus;
	memcpy(w->gpus, gc_worker->gpus, sizeof(GcWorkerGpu) * w->ngpus);
	SpinLockRelease(&gc_worker->mutex);
	/* the first usable GPU's line (the one info describes), or why none is */
	for (g = 0; g < w->ngpus && w->gpus[g].state != GC_GPU_READY; g++)
		;
	if (g < w->ngpus)
	{
		w->budget = w->gpus[g].budget;
		w->free_mem = w->gpus[g].free_mem;
	}
	else if (w->state == GC_WORKER_READY)
	{
		w->info.usable = false;
		snprintf(w->info.reason, sizeof(w->info.reason),
				 "no GPU of the gpuclust GPU worker is usable now (gpuclust_gpus says why)");
	}
	for (int i = 0; i < gc_worker->njobs; i++)
	{
		uint32		s = pg_atomic_read_u32(&gc_worker->jobs[i].state);

		if (!all && gc_worker->jobs[i].userid != GetUserId())
			continue;
		w->queued += s == GC_JOB_QUEUED;
		w->running += s == GC_JOB_RUNNING;
	}
	return true;
}

static const char *
worker_state_name(GcWorkerState s)
{
	switch (s)
	{
		case GC_WORKER_READY:
			return "running";
		case GC_WORKER_NO_GPU:
			return "running, no GPU";
		case GC_WORKER_STARTING:
			return "starting";
		case GC_WORKER_RECOVERING:
			return "running, restarting its GPU process";
		case GC_WORKER_NONE:
		case GC_WORKER_EXITED:
			break;
	}
	return "not running";
}

static void
put(ReturnSetInfo *rsinfo, const char *key, const char *value)
{
	Datum		values[2];
	bool		nulls[2] = {false, value == NULL};

	values[0] = CStringGetTextDatum(key);
	values[1] = value ? CStringGetTextDatum(value) : (Datum) 0;
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/* gpuclust_info()'s sink for the algorithms' lines */
typedef struct InfoSink
{
	GcInfoSink	sink;
	ReturnSetInfo *rsinfo;
} InfoSink;

static void
info_put(GcInfoSink *sink, const char *key, const char *value)
{
	put(((InfoSink *) sink)->rsinfo, key, value);
}

/* Every algorithm's lines of part, in the registry's order. */
static void
algorithm_lines(GcInfoPart part, InfoSink *sink)
{
	for (int a = 0; a < GC_ALGO_COUNT; a++)
	{
		const GcAlgorithm *algo = gc_algorithm_find(a);

		if (algo != NULL && algo->info != NULL)
			algo->info(part, &sink->sink);
	}
}

Datum
gpuclust_info(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	gc_ctx		ctx;

	/*
	 * The server's free memory (the GPU's and the host's, and the sizes
	 * derived from them) and other roles' jobs: NULL, and the caller's own
	 * jobs, to a role that does not see all sessions.
	 */
	bool		all = gc_glue_sees_all_sessions();
	InfoSink	sink = {{info_put, all}, rsinfo};

	InitMaterializedSRF(fcinfo, 0);
	gc_glue_ctx(&ctx);

	{
		gc_cuda_device_info info;
		WorkerInfo	w;

		memset(&info, 0, sizeof(info));
		if (worker_info(&w, all))
		{
			/* the worker's probe: a backend never starts CUDA then */
			info = w.info;
			info.free_mem = w.free_mem;
			if (w.state != GC_WORKER_READY && w.state != GC_WORKER_NO_GPU &&
				w.state != GC_WORKER_RECOVERING)
			{
				info.usable = false;
				snprintf(info.reason, sizeof(info.reason),
						 "the gpuclust GPU worker is not running");
			}
		}
		else
		{
			sigset_t	old;

			/* the probe may initialise CUDA, which starts threads */
			gc_glue_signals_block(&old);
			gc_cuda_probe_cached(gpuclust_gpu_device_id, &info);
			gc_glue_signals_restore(&old);
		}

		put(rsinfo, "cuda_build", GC_CUDA_BUILD ? "true" : "false");
		put(rsinfo, "cuda_runtime_version",
			info.runtime_version > 0 ?
			psprintf("%d.%d", info.runtime_version / 1000,
					 (info.runtime_version % 1000) / 10) : NULL);
		put(rsinfo, "cuda_driver_version",
			info.driver_version > 0 ?
			psprintf("%d.%d", info.driver_version / 1000,
					 (info.driver_version % 1000) / 10) : NULL);
		put(rsinfo, "gpu_device_count",
			GC_CUDA_BUILD ? psprintf("%d", info.device_count) : NULL);
		put(rsinfo, "gpu_device_id", psprintf("%d", gpuclust_gpu_device_id));
		put(rsinfo, "gpu_usable", info.usable ? "true" : "false");
		put(rsinfo, "gpu_reason", info.usable ? NULL : pstrdup(info.reason));
		put(rsinfo, "gpu_name", info.usable ? pstrdup(info.name) : NULL);
		put(rsinfo, "gpu_memory_total_bytes",
			info.usable ? psprintf("%zu", info.total_mem) : NULL);
		put(rsinfo, "gpu_memory_free_bytes",
			info.usable && all ? psprintf("%zu", info.free_mem) : NULL);
		put(rsinfo, "gpu_compute_capability",
			info.usable ? psprintf("%d.%d", info.cc_major, info.cc_minor) : NULL);

		put(rsinfo, "gpu_worker", gc_worker == NULL ?
			(gpuclust_gpu_worker ? "off (gpuclust is not in shared_preload_libraries)" :
			 "off (gpuclust.gpu_worker = off)") : worker_state_name(w.state));
		put(rsinfo, "gpu_worker_pid",
			gc_worker != NULL && w.pid != 0 ? psprintf("%d", w.pid) : NULL);
		put(rsinfo, "gpu_worker_gpu_process_pid",
			gc_worker != NULL && w.gpu_pid != 0 ? psprintf("%d", w.gpu_pid) : NULL);
		if (gc_worker != NULL && w.ngpus > 0)
		{
			char	   *list = palloc(GC_WORKER_GPU_LIST_BYTES);

			gc_worker_gpu_list(w.gpus, w.ngpus, list, GC_WORKER_GPU_LIST_BYTES);
			put(rsinfo, "gpu_worker_devices", list);
		}
		else
			put(rsinfo, "gpu_worker_devices", NULL);
		put(rsinfo, "gpu_worker_memory_budget_bytes",
			gc_worker != NULL && w.state == GC_WORKER_READY ?
			psprintf("%zu", w.budget) : NULL);
		put(rsinfo, "gpu_worker_jobs_queued",
			gc_worker != NULL ? psprintf("%d", w.queued) : NULL);
		put(rsinfo, "gpu_worker_jobs_running",
			gc_worker != NULL ? psprintf("%d", w.running) : NULL);
	}

	put(rsinfo, "device_setting", gc_device_name((gc_device) gpuclust_device));
	put(rsinfo, "gpu_memory_limit_bytes", gpuclust_gpu_memory_limit > 0 ?
		psprintf("%zu", (size_t) gpuclust_gpu_memory_limit << 20) : NULL);
	algorithm_lines(GC_INFO_DEVICES, &sink);
	algorithm_lines(GC_INFO_CROSSOVERS, &sink);
	/* the threads a call may use: the settings, capped by the ceiling and the cores */
	put(rsinfo, "cpu_threads", psprintf("%d", gc_threads(&ctx)));
	{
		size_t		avail = gc_host_memory();

		/* what the O(n^2) memory checks see */
		put(rsinfo, "memory_available_bytes",
			avail == SIZE_MAX || !all ? NULL : psprintf("%zu", avail));
	}
	algorithm_lines(GC_INFO_CAPACITY, &sink);

	return (Datum) 0;
}

/*
 * gpuclust_gpu_jobs(): the GPU worker's queued and running jobs, in arrival
 * order: every backend's for roles with pg_read_all_stats, else the
 * caller's own (as gpuclust_progress).
 */
Datum
gpuclust_gpu_jobs(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	bool		all = gc_glue_sees_all_sessions();
	TimestampTz now = GetCurrentTimestamp();

	InitMaterializedSRF(fcinfo, 0);
	if (gc_worker == NULL)
		return (Datum) 0;
	for (int i = 0; i < gc_worker->njobs; i++)
	{
		GcJob	   *j = &gc_worker->jobs[i];
		uint32		s = pg_atomic_read_u32(&j->state);
		Datum		values[9];
		bool		nulls[9] = {0};
		int			pid,
					gpu;
		Oid			userid;
		gc_algorithm algo;
		int64		n;
		int			d;
		size_t		mem;
		TimestampTz queued_at,
					started_at;

		if (s != GC_JOB_QUEUED && s != GC_JOB_RUNNING)
			continue;
		pg_read_barrier();
		pid = j->pid;
		userid = j->userid;
		algo = j->algo;
		n = j->n;
		d = j->d;
		mem = gc_job_mem(j);
		queued_at = j->queued_at;
		started_at = j->started_at;
		gpu = j->gpu;
		pg_read_barrier();
		if (pg_atomic_read_u32(&j->state) != s)
			continue;			/* changed while read: it is gone or moved on */
		if (!all && userid != GetUserId())
			continue;
		values[0] = Int32GetDatum(pid);
		values[1] = CStringGetTextDatum(gc_algorithm_function(algo));
		values[2] = Int64GetDatum(n);
		values[3] = Int32GetDatum(d);
		values[4] = CStringGetTextDatum(s == GC_JOB_QUEUED ? "queued" : "running");
		values[5] = Int64GetDatum((int64) mem);
		values[6] = Float8GetDatum((double) (now - queued_at) / 1000.0);
		if (s == GC_JOB_RUNNING)
			values[7] = Float8GetDatum((double) (now - started_at) / 1000.0);
		else
			nulls[7] = true;
		/* its GPU's CUDA number (a column the view of version 0.1 lacks) */
		if (s == GC_JOB_RUNNING && gpu >= 0 && gpu < gc_worker->ngpus)
			values[8] = Int32GetDatum(gc_worker->gpus[gpu].device_id);
		else
			nulls[8] = true;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

static const char *
gpu_state_name(GcGpuState s)
{
	switch (s)
	{
		case GC_GPU_READY:
			return "ready";
		case GC_GPU_UNUSABLE:
			return "unusable";
		case GC_GPU_LOST:
			return "lost";
		case GC_GPU_STARTING:
			break;
	}
	return "starting";
}

/*
 * gpuclust_gpus(): the GPU worker's GPUs, one row each: its CUDA number,
 * name, state and why it takes no jobs, its memory, and its jobs.  The
 * free and held memory are NULL to roles without pg_read_all_stats (as
 * gpuclust_info's free memory).
 */
Datum
gpuclust_gpus(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	bool		all = gc_glue_sees_all_sessions();
	WorkerInfo	w;

	InitMaterializedSRF(fcinfo, 0);
	if (!worker_info(&w, all))
		return (Datum) 0;
	for (int g = 0; g < w.ngpus; g++)
	{
		const GcWorkerGpu *gpu = &w.gpus[g];
		bool		has = gpu->info.name[0] != '\0';
		Datum		values[10];
		bool		nulls[10] = {0};

		values[0] = Int32GetDatum(gpu->device_id);
		values[1] = has ? CStringGetTextDatum(gpu->info.name) : (Datum) 0;
		nulls[1] = !has;
		values[2] = CStringGetTextDatum(gpu_state_name(gpu->state));
		values[3] = gpu->state != GC_GPU_READY ?
			CStringGetTextDatum(gpu->info.reason) : (Datum) 0;
		nulls[3] = gpu->state == GC_GPU_READY;
		values[4] = Int64GetDatum((int64) gpu->info.total_mem);
		nulls[4] = !has;
		values[5] = Int64GetDatum((int64) gpu->free_mem);
		nulls[5] = !has || !all;
		values[6] = Int64GetDatum((int64) gpu->budget);
		values[7] = Int64GetDatum((int64) gpu->reserved);
		nulls[7] = !all;
		values[8] = Int32GetDatum(gpu->running);
		values[9] = Int64GetDatum((int64) gpu->done);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
