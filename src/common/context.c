/*-------------------------------------------------------------------------
 *
 * context.c
 *	  The context of a core call: the effective resource limits (a
 *	  session's setting capped by the superuser's), the gc_ctx a core call
 *	  runs with and its threads, the signal mask around the core and CUDA,
 *	  and the mapping of the core's gc_status to ereport() (gc_glue_report,
 *	  the only one).  The device choice is worker/device.c's.
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

