/*-------------------------------------------------------------------------
 *
 * context.c
 *	  Helpers shared by the SQL-callable functions: the effective resource
 *	  limits (a session's setting capped by the superuser's), the gc_ctx a
 *	  core call runs with and its threads, the signal mask around the core and CUDA,
 *	  device selection, and the mapping of the core's gc_status to
 *	  ereport() (gc_glue_report, the only one).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <pthread.h>
#include <signal.h>

#include "catalog/pg_authid.h"
#include "libpq/libpq.h"
#include "miscadmin.h"
#include "tcop/tcopprot.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/timeout.h"

#include "common/gpuclust.h"
#include "worker/job.h"
#include "common/progress.h"

/*
 * The threads a call may use: gpuclust.cpu_threads (the session's wish),
 * at most gpuclust.max_cpu_threads (the superuser's ceiling), and never
 * more than the cores this process may use (gc_cores_available: its CPU
 * affinity and cgroup quota); 0 in either setting means "no bound of its
 * own".  The core then uses at most this many, fewer while other tasks
 * keep cores busy (gc_team_adapt).  More threads than
 * cores never speed a CPU-bound call up, and each one delays the polls of
 * the cancel flags.
 */
int
gc_glue_cpu_threads(void)
{
	int			t = gc_cores_available();

	if (gpuclust_cpu_threads > 0 && gpuclust_cpu_threads < t)
		t = gpuclust_cpu_threads;
	if (gpuclust_max_cpu_threads > 0 && gpuclust_max_cpu_threads < t)
		t = gpuclust_max_cpu_threads;
	return Max(t, 1);
}

/*
 * The memory limit in MB of an O(n^2) call: gpuclust.matrix_memory (0:
 * none of the session's own), at most gpuclust.max_matrix_memory.
 * *setting names the setting that imposes it, for messages.
 */
int
gc_glue_matrix_memory_mb(const char **setting)
{
	if (gpuclust_matrix_memory > 0 &&
		gpuclust_matrix_memory < gpuclust_max_matrix_memory)
	{
		*setting = "gpuclust.matrix_memory";
		return gpuclust_matrix_memory;
	}
	*setting = "gpuclust.max_matrix_memory";
	return gpuclust_max_matrix_memory;
}

/*
 * Whether this role sees other roles' calls, jobs and the server's free
 * memory (gpuclust_progress, gpuclust_gpu_jobs, gpuclust_info), as
 * pg_stat_activity shows other sessions: with pg_read_all_stats.
 */
bool
gc_glue_sees_all_sessions(void)
{
	return has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS);
}

/* The backend's own thread, the one that builds every core call's gc_ctx. */
static pthread_t backend_thread;

/*
 * What ProcessInterrupts (postgres.c) does for CheckClientConnectionPending,
 * the same in every release gpuclust builds on: ask the socket whether the
 * client is still there; when it is gone, ClientConnectionLost (which the
 * next CHECK_FOR_INTERRUPTS turns into FATAL "connection to client lost"),
 * otherwise the check re-armed for client_connection_check_interval from
 * now.  ProcessInterrupts skips both while the backend reads a command
 * (DoingCommandRead); a core call runs while it executes one, so never
 * then.
 */
static void
check_client_connection(void)
{
	CheckClientConnectionPending = false;
	if (client_connection_check_interval > 0)
	{
		if (!pq_check_connection())
		{
			ClientConnectionLost = true;
			InterruptPending = true;
		}
		else
			enable_timeout_after(CLIENT_CONNECTION_CHECK_TIMEOUT,
								 client_connection_check_interval);
	}
}

/*
 * The core's poll (gc_ctx.poll): true once the client is known to be gone.
 * The check itself runs on the backend's thread only (it calls into libpq
 * and the timeout machinery), and, as ProcessInterrupts, not while
 * interrupts are held off; the core's other threads read the flag.
 */
static bool
glue_poll(void *arg)
{
	if (CheckClientConnectionPending &&
		InterruptHoldoffCount == 0 && CritSectionCount == 0 &&
		pthread_equal(pthread_self(), backend_thread))
		check_client_connection();
	return ClientConnectionLost != 0;
}

/*
 * The context of a core call: the thread count (gc_glue_cpu_threads; left
 * 0, "all cores" to the core, when neither setting bounds it), the flags
 * the backend's signal handlers raise for a query cancel
 * (statement_timeout included) or a termination request, and glue_poll,
 * which runs the check of client_connection_check_interval.  The core
 * polls them and returns GC_ECANCEL; gc_glue_report() then lets
 * CHECK_FOR_INTERRUPTS() raise the proper error.  Every core call builds
 * its gc_ctx here, on the backend's thread.
 */
void
gc_glue_ctx(gc_ctx *ctx)
{
	memset(ctx, 0, sizeof(*ctx));
	ctx->n_threads = gpuclust_cpu_threads == 0 && gpuclust_max_cpu_threads == 0 ?
		0 : gc_glue_cpu_threads();
	ctx->cancel_flags[0] = &QueryCancelPending;
	ctx->cancel_flags[1] = &ProcDiePending;
	backend_thread = pthread_self();
	ctx->poll = glue_poll;
	/* reports only while a call has a slot (the library preloaded) */
	ctx->progress = gc_progress_active() ? gc_progress_sink : NULL;
}

/*
 * Block every signal on the calling (backend) thread, saving the old mask
 * in *old; gc_glue_signals_restore() puts it back.  Threads created in
 * between (OpenMP workers, the CUDA driver's helper threads when CUDA
 * initialises) inherit the blocked mask, so PostgreSQL's signal handlers
 * only ever run on the backend's own thread.  Signals that arrive
 * meanwhile stay pending and are handled on restore.
 */
void
gc_glue_signals_block(sigset_t *old)
{
	sigset_t	all;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, old);
}

void
gc_glue_signals_restore(const sigset_t *old)
{
	pthread_sigmask(SIG_SETMASK, old, NULL);
}

/*
 * Turn a failed core call into an ERROR.  "what" names the algorithm for
 * the message (gc_algorithm_name, or "affinity propagation").
 */
void
gc_glue_report(const gc_status *st, const char *what)
{
	gc_glue_report_hint(st, what, NULL);
}

/*
 * gc_glue_report, with gpu_hint (when not NULL) as the hint of a call the
 * GPU could not run (GC_EDEVICE) in place of "use the CPU": for a call that
 * cannot run on the CPU as it stands (gc_glue_dbscan_gpu_hint).
 */
void
gc_glue_report_hint(const gc_status *st, const char *what,
					const char *gpu_hint)
{
	switch (st->code)
	{
		case GC_ECANCEL:
			/* raises "canceling statement due to ..." as appropriate */
			CHECK_FOR_INTERRUPTS();
			ereport(ERROR,
					(errcode(ERRCODE_QUERY_CANCELED),
					 errmsg("canceling %s", what)));
			break;
		case GC_ENOMEM:
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory"),
					 errdetail("%s could not allocate its working memory: %s.",
							   what, st->message)));
			break;
		case GC_EINVAL:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid argument to %s: %s", what, st->message)));
			break;
		case GC_EDEVICE:
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot run %s on the GPU", what),
					 errdetail("%s.", st->message),
					 gpu_hint != NULL ? errhint("%s", gpu_hint) :
					 errhint("Use device => 'cpu' or 'auto', or set gpuclust.device to 'cpu' or 'auto'.")));
			break;
		case GC_EINTERNAL:
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("internal error in %s: %s", what, st->message)));
			break;
		case GC_OK:
		default:
			break;
	}
	elog(ERROR, "unexpected status %d from %s: %s",
		 (int) st->code, what, st->message);
	pg_unreachable();
}

const char *
gc_device_name(gc_device dev)
{
	switch (dev)
	{
		case GC_DEVICE_AUTO:
			return "auto";
		case GC_DEVICE_CPU:
			return "cpu";
		case GC_DEVICE_GPU:
			return "gpu";
	}
	return "unknown";
}

/* The name of algo in messages. */
const char *
gc_algorithm_name(gc_algorithm algo)
{
	switch (algo)
	{
		case GC_ALGO_KMEANS:
			return "k-means";
		case GC_ALGO_DBSCAN:
			return "DBSCAN";
		case GC_ALGO_AP:
			return "affinity propagation";
		case GC_ALGO_KDISTANCE:
			return "k-distance";
		case GC_ALGO_SILHOUETTE:
			return "silhouette";
		case GC_ALGO_KMEANS_LABELS:
			return "k-means assignment";
	}
	return "unknown algorithm";
}

/* The set-returning function of algo, by its SQL name (jobs, timings). */
const char *
gc_algorithm_function(gc_algorithm algo)
{
	switch (algo)
	{
		case GC_ALGO_KMEANS:
			return "gpu_kmeans";
		case GC_ALGO_DBSCAN:
			return "gpu_dbscan";
		case GC_ALGO_AP:
			return "gpu_affinity_propagation";
		case GC_ALGO_KDISTANCE:
			return "gpu_kdistance";
		case GC_ALGO_SILHOUETTE:
			return "gpu_silhouette";
		case GC_ALGO_KMEANS_LABELS:
			return "kmeans_step";
	}
	return "unknown";
}

/*
 * Resolve the requested device to CPU or GPU (gc_choose_device) into
 * *chosen, or return the failure in *st.  The GPU is gc_glue_gpu's: a
 * probe of this backend's own CUDA blocks signals while CUDA starts; the
 * worker's may wait, interruptibly, for the worker to start.
 */
gc_code
gc_glue_try_choose_device(gc_device requested, gc_algorithm algo, int64 n,
						  int d, gc_device *chosen, gc_status *st)
{
	gc_gpu		gpu;

	*chosen = GC_DEVICE_CPU;
	gc_glue_gpu(&gpu);
	return gc_choose_device(requested, algo, n, d, &gpu, chosen, st);
}

/* Resolve the requested device to CPU or GPU, or fail with the reason. */
gc_device
gc_glue_choose_device(gc_device requested, gc_algorithm algo, int64 n, int d)
{
	gc_status	st = {GC_OK, ""};
	gc_device	chosen;

	if (gc_glue_try_choose_device(requested, algo, n, d, &chosen, &st) != GC_OK)
		gc_glue_report(&st, gc_algorithm_name(algo));
	return chosen;
}

/*
 * The hint of a call the GPU cannot run that uses what runs only on the
 * GPU (what names it; gpu_only false: NULL, gc_glue_report's "use the
 * CPU"), and the way to the CPU (cpu_way).
 */
static const char *
gpu_only_hint(bool gpu_only, const char *what, const char *cpu_way)
{
	return gpu_only ? psprintf("%s runs only on the GPU; %s.", what, cpu_way) : NULL;
}

/* DBSCAN's: dclust runs only on the GPU, so its way to the CPU is union-find. */
const char *
gc_glue_dbscan_gpu_hint(gc_dbscan_algorithm algorithm)
{
	return gpu_only_hint(algorithm != GC_DBSCAN_UNION_FIND,
						 psprintf("DBSCAN algorithm %s", gc_dbscan_algorithm_name(algorithm)),
						 "algorithm => 'union_find' gives the same labels on the CPU");
}

/*
 * The device of a DBSCAN call of algorithm (gc_choose_device_dbscan), or
 * an ERROR with the reason (for dclust, whose request is the GPU even
 * under 'auto', with gc_glue_dbscan_gpu_hint's hint).
 */
gc_device
gc_glue_choose_dbscan_device(gc_device requested,
							 gc_dbscan_algorithm algorithm, int64 n, int d)
{
	gc_status	st = {GC_OK, ""};
	gc_device	chosen = GC_DEVICE_CPU;
	gc_gpu		gpu;

	gc_glue_gpu(&gpu);
	if (gc_choose_device_dbscan(requested, algorithm, n, d, &gpu, &chosen,
								&st) != GC_OK)
		gc_glue_report_hint(&st, gc_algorithm_name(GC_ALGO_DBSCAN),
							gc_glue_dbscan_gpu_hint(algorithm));
	return chosen;
}

/* Affinity propagation's: float4 runs only on the GPU, float8 on the CPU too. */
const char *
gc_glue_ap_gpu_hint(gc_ap_precision precision)
{
	return gpu_only_hint(precision != GC_AP_FLOAT8,
						 psprintf("Affinity propagation in %s", gc_ap_precision_name(precision)),
						 "\"precision\" => 'float8' runs on the CPU too");
}

/*
 * The device of an affinity propagation call in precision on n rows of d
 * features (gc_choose_device_ap), or an ERROR: the GPU's reason (0A000,
 * for float4 with gc_glue_ap_gpu_hint's hint), or, when the GPU's memory
 * is too small under 'gpu' (float4: under 'auto' too), 53200 naming the
 * largest n that fits.  *note (NULL when none) says why 'auto' passed a
 * usable GPU over for lack of memory; the caller shows it once it knows
 * the CPU can take the call.
 */
gc_device
gc_glue_choose_ap_device(gc_device requested, gc_ap_precision precision,
						 int64 n, int d, char **note)
{
	gc_status	st = {GC_OK, ""};
	gc_device	chosen = GC_DEVICE_CPU;
	char		buf[256];
	gc_gpu		gpu;

	*note = NULL;
	gc_glue_gpu(&gpu);
	switch (gc_choose_device_ap(requested, precision, n, d, &gpu, &chosen,
								buf, sizeof(buf), &st))
	{
		case GC_OK:
			break;
		case GC_ENOMEM:
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("affinity propagation of %lld rows does not fit the GPU's memory",
							(long long) n),
					 errdetail("%s.", st.message),
					 precision == GC_AP_FLOAT8 ?
					 errhint("Cluster fewer rows, use \"precision\" => 'float4' (half the GPU memory), or device => 'cpu'.") :
					 errhint("Cluster fewer rows, or use \"precision\" => 'float8' on the CPU.")));
			break;
		default:
			gc_glue_report_hint(&st, gc_algorithm_name(GC_ALGO_AP),
								gc_glue_ap_gpu_hint(precision));
	}
	if (buf[0] != '\0')
		*note = pstrdup(buf);
	return chosen;
}

/*
 * After a choice that may pass a usable GPU over for lack of memory (rc,
 * st; note empty or why): the failure raised, or the note as a NOTICE
 * that what runs on the CPU.
 */
static void
chosen_or_report(gc_code rc, const gc_status *st, const char *note,
				 gc_algorithm algo)
{
	if (rc != GC_OK)
		gc_glue_report(st, gc_algorithm_name(algo));
	if (note[0] != '\0')
		ereport(NOTICE,
				(errmsg("%s runs on the CPU", gc_algorithm_name(algo)),
				 errdetail("%s.", note)));
}

/*
 * The device of a k-means call (gc_choose_device_kmeans): 'auto' weighs the
 * problem's size and the GPU's free memory, and says in a NOTICE when a
 * usable GPU was passed over for lack of memory (weighted: the call has
 * sample weights, whose GPU run keeps its rows resident).
 */
gc_device
gc_glue_choose_kmeans_device(gc_device requested, int64 n, int d, int k,
							 int n_init, bool weighted)
{
	gc_status	st = {GC_OK, ""};
	gc_device	chosen = GC_DEVICE_CPU;
	char		note[256];
	gc_gpu		gpu;

	gc_glue_gpu(&gpu);
	chosen_or_report(gc_choose_device_kmeans(requested, n, d, k, n_init,
											 weighted, &gpu, &chosen, note,
											 sizeof(note), &st),
					 &st, note, GC_ALGO_KMEANS);
	return chosen;
}

/*
 * The device of a tool's call, as k-means's: algo GC_ALGO_KDISTANCE
 * (gc_choose_device_kdistance; param k) on n rows, or GC_ALGO_SILHOUETTE
 * (gc_choose_device_silhouette; param m) scoring n rows; a failure under
 * 'gpu' raised (0A000 with the reason, 53200 when the GPU's memory is too
 * small), a usable GPU passed over under 'auto' for lack of memory said in
 * a NOTICE.
 */
gc_device
gc_glue_choose_tool_device(gc_algorithm algo, gc_device requested, int64 n,
						   int d, int64 param)
{
	gc_status	st = {GC_OK, ""};
	gc_device	chosen = GC_DEVICE_CPU;
	char		note[256];
	gc_gpu		gpu;

	Assert(algo == GC_ALGO_KDISTANCE || algo == GC_ALGO_SILHOUETTE);
	gc_glue_gpu(&gpu);
	chosen_or_report(algo == GC_ALGO_KDISTANCE ?
					 gc_choose_device_kdistance(requested, n, d, param, &gpu,
												&chosen, note, sizeof(note),
												&st) :
					 gc_choose_device_silhouette(requested, n, d,
												 (int32) param, &gpu, &chosen,
												 note, sizeof(note), &st),
					 &st, note, algo);
	return chosen;
}
