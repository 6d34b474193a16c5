/*-------------------------------------------------------------------------
 *
 * progress.c
 *	  The gpuclust_progress view: what each running clustering call is
 *	  doing, in the spirit of pg_stat_progress_create_index.  See common/progress.h.
 *
 * Each backend owns one slot (gc_my_slot()) of an array in shared
 * memory, created when the library is preloaded (shared_preload_libraries).
 * Only the owner writes it, and only from the backend's own thread: the
 * glue at phase changes, the core through gc_ctx.progress at most once per
 * iteration or phase.  Writes are bracketed by a change counter, as
 * PostgreSQL's own backend status is (pgstat_bestart): the counter is odd
 * while a write is under way, and a reader copies a slot until it sees the
 * same even count before and after.  So writing costs a few stores and two
 * barriers, and no reader ever blocks a writer.
 *
 * A slot is cleared when its call returns and at the end of the
 * transaction, so a call that fails leaves nothing behind.
 *
 * A call made inside another's query (gpu_silhouette's labels query of
 * gpu_dbscan, a source query that calls gpu_kmeans) is not shown: the slot
 * stays the outer call's, which shows phase ingest meanwhile, and the
 * inner call neither writes nor clears it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/xact.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "common/gpuclust.h"
#include "common/pg_compat.h"
#include "common/progress.h"

#define ALGO_LEN 32

typedef struct ProgressSlot
{
	uint32		changecount;	/* odd while being written */
	int			pid;			/* 0: no call */
	Oid			userid;
	char		algorithm[ALGO_LEN];
	int			device;			/* a gc_device, -1 before the choice */
	int			phase;			/* a gc_phase */
	int64		rows;
	int64		iteration;
	int64		max_iter;
	int64		done;
	int64		total;
	double		inertia;		/* NaN: none yet */
	TimestampTz start;
} ProgressSlot;

static ProgressSlot *slots = NULL;	/* MaxBackends of them, or NULL */
static ProgressSlot *mine = NULL;	/* this backend's, while a call runs */
static int	depth = 0;			/* calls running, the outer one first */
static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;
static bool xact_callback_registered = false;

static Size
slots_size(void)
{
	return mul_size(MaxBackends, sizeof(ProgressSlot));
}

static void
progress_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(slots_size());
}

static void
progress_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	slots = ShmemInitStruct("gpuclust progress", slots_size(), &found);
	if (!found)
		memset(slots, 0, slots_size());
	LWLockRelease(AddinShmemInitLock);
}

void
gc_progress_init(void)
{
	if (!process_shared_preload_libraries_in_progress)
		return;
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = progress_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = progress_shmem_startup;
}

/* Bracket a write of *mine (the change counter, as pgstat_bestart). */
#define BEGIN_WRITE() \
	do { mine->changecount++; pg_write_barrier(); } while (0)
#define END_WRITE() \
	do { pg_write_barrier(); mine->changecount++; } while (0)

static void
progress_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_COMMIT ||
		event == XACT_EVENT_PARALLEL_ABORT || event == XACT_EVENT_PARALLEL_COMMIT)
	{
		depth = 1;				/* nested calls end with the outer one */
		gc_progress_end();
	}
}

void
gc_progress_begin(const char *algorithm)
{
	if (slots == NULL || gc_my_slot() < 0)
		return;
	if (mine != NULL)
	{
		depth++;				/* a call inside the outer one's query */
		return;
	}
	if (!xact_callback_registered)
	{
		RegisterXactCallback(progress_xact_callback, NULL);
		xact_callback_registered = true;
	}
	mine = &slots[gc_my_slot()];
	depth = 1;
	BEGIN_WRITE();
	mine->pid = MyProcPid;
	mine->userid = GetUserId();
	strlcpy(mine->algorithm, algorithm, ALGO_LEN);
	mine->device = -1;
	mine->phase = GC_PHASE_INGEST;
	mine->rows = 0;
	mine->iteration = 0;
	mine->max_iter = 0;
	mine->done = 0;
	mine->total = 0;
	mine->inertia = NAN;
	mine->start = GetCurrentTimestamp();
	END_WRITE();
}

void
gc_progress_compute(gc_device device, int64 rows)
{
	if (mine == NULL || depth > 1)
		return;
	BEGIN_WRITE();
	mine->device = device;
	mine->rows = rows;
	/* a GPU call starts with the upload; its code reports the rest */
	mine->phase = device == GC_DEVICE_GPU ? GC_PHASE_UPLOAD : GC_PHASE_INIT;
	END_WRITE();
}

void
gc_progress_phase(gc_phase phase)
{
	if (mine == NULL || depth > 1)
		return;
	BEGIN_WRITE();
	mine->phase = phase;
	END_WRITE();
}

void
gc_progress_sink(void *arg, const gc_progress *p)
{
	(void) arg;
	if (mine == NULL || depth > 1)
		return;
	BEGIN_WRITE();
	mine->phase = p->phase;
	mine->iteration = p->iteration;
	mine->max_iter = p->max_iter;
	mine->done = p->done;
	mine->total = p->total;
	if (!isnan(p->inertia))
		mine->inertia = p->inertia;
	END_WRITE();
}

bool
gc_progress_active(void)
{
	return mine != NULL && depth == 1;
}

void
gc_progress_end(void)
{
	if (mine == NULL)
		return;
	if (depth > 1)
	{
		depth--;
		return;
	}
	BEGIN_WRITE();
	mine->pid = 0;
	END_WRITE();
	mine = NULL;
	depth = 0;
}

/* A consistent copy of slot s into *out (the change-counter protocol). */
static void
read_slot(volatile ProgressSlot *s, ProgressSlot *out)
{
	for (int tries = 0;; tries++)
	{
		uint32		before = s->changecount,
					after;

		pg_read_barrier();
		memcpy(out, (const ProgressSlot *) s, sizeof(*out));
		pg_read_barrier();
		after = s->changecount;
		if (before == after && (before & 1) == 0)
			return;
		if (tries % 100 == 99)
			CHECK_FOR_INTERRUPTS();
	}
}

PG_FUNCTION_INFO_V1(gpuclust_progress);

/*
 * The running calls: every session's for roles with pg_read_all_stats,
 * else the caller's own (as pg_stat_progress_*: other users' rows are
 * left out here rather than shown empty).
 */
Datum
gpuclust_progress(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	bool		all = gc_glue_sees_all_sessions();
	TimestampTz now = GetCurrentTimestamp();

	InitMaterializedSRF(fcinfo, 0);
	if (slots == NULL)
		return (Datum) 0;
	for (int i = 0; i < MaxBackends; i++)
	{
		ProgressSlot s;
		Datum		values[12];
		bool		nulls[12] = {0};

		read_slot(&slots[i], &s);
		if (s.pid == 0 || (!all && s.userid != GetUserId()))
			continue;
		values[0] = Int32GetDatum(s.pid);
		values[1] = CStringGetTextDatum(s.algorithm);
		nulls[2] = s.device < 0;
		values[2] = nulls[2] ? (Datum) 0 :
			CStringGetTextDatum(gc_device_name((gc_device) s.device));
		values[3] = CStringGetTextDatum(gc_phase_name((gc_phase) s.phase));
		nulls[4] = s.max_iter == 0;
		values[4] = Int64GetDatum(s.iteration);
		nulls[5] = s.max_iter == 0;
		values[5] = Int64GetDatum(s.max_iter);
		nulls[6] = s.device < 0;
		values[6] = Int64GetDatum(s.rows);
		nulls[7] = s.total == 0 || s.max_iter != 0;
		values[7] = Int64GetDatum(s.done);
		nulls[8] = nulls[7];
		values[8] = Int64GetDatum(s.total);
		nulls[9] = isnan(s.inertia);
		values[9] = Float8GetDatum(s.inertia);
		values[10] = Float8GetDatum((double) (now - s.start) / 1000.0);
		values[11] = ObjectIdGetDatum(s.userid);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
