/*-------------------------------------------------------------------------
 *
 * gpuclust.c
 *	  Module entry point: PG_MODULE_MAGIC, the gpuclust.* GUCs and
 *	  _PG_init, the one file that sees every layer of the glue (the map:
 *	  common/gpuclust.h).
 *
 * _PG_init never touches CUDA: the library may be loaded into the
 * postmaster (shared_preload_libraries), and CUDA is not fork-safe.  When
 * preloaded it registers the GPU worker (worker/worker.c), which alone creates
 * a CUDA context; otherwise the GPU is probed lazily, by the backend that
 * first needs it.
 *
 * Resource ceilings are superuser settings (PGC_SUSET: postgresql.conf,
 * ALTER SYSTEM, ALTER ROLE/DATABASE by a superuser, or a role granted SET
 * on the parameter): gpuclust.max_cpu_threads, gpuclust.max_matrix_memory,
 * gpuclust.gpu_device_id and gpuclust.gpu_memory_limit.  Any session may lower the first two for
 * itself with gpuclust.cpu_threads and gpuclust.matrix_memory (PGC_USERSET),
 * never raise them: the glue uses the smaller of each pair (common/context.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/guc.h"

#include "common/gpuclust.h"
#include "worker/job.h"
#include "worker/worker.h"
#include "common/progress.h"

PG_MODULE_MAGIC;

int			gpuclust_device = GC_DEVICE_AUTO;
int			gpuclust_cpu_threads = 0;
int			gpuclust_max_cpu_threads = 0;
int			gpuclust_gpu_device_id = 0;
bool		gpuclust_log_timing = false;
int			gpuclust_matrix_memory = 0;	/* MB */
int			gpuclust_max_matrix_memory = 4096;	/* MB */
bool		gpuclust_gpu_worker = true;
int			gpuclust_gpu_worker_jobs = 4;
int			gpuclust_gpu_worker_split_rows = GC_WORKER_SPLIT_ROWS;
int			gpuclust_gpu_worker_gpus_per_call = 0;
char	   *gpuclust_gpu_devices = NULL;
#ifdef GC_TESTING
int			gpuclust_gpu_worker_emulate = 0;	/* MB */
bool		gpuclust_gpu_worker_emulate_lose_gpu = false;
#endif
int			gpuclust_gpu_worker_memory = 0;	/* MB */
int			gpuclust_gpu_memory_limit = 0;	/* MB */

static const struct config_enum_entry device_options[] = {
	{"auto", GC_DEVICE_AUTO, false},
	{"gpu", GC_DEVICE_GPU, false},
	{"cpu", GC_DEVICE_CPU, false},
	{NULL, 0, false}
};

void		_PG_init(void);

/* gpuclust.gpu_devices: a list gc_worker_devices can read */
static bool
check_gpu_devices(char **newval, void **extra, GucSource source)
{
	int			devices[GC_WORKER_MAX_GPUS];
	char		err[200];

	if (gc_worker_devices(*newval, devices, err, sizeof(err)) < 0)
	{
		GUC_check_errdetail("%s", err);
		return false;
	}
	return true;
}

/*
 * The GPU worker's settings.  PostgreSQL accepts PGC_POSTMASTER settings
 * only while shared_preload_libraries is processed, and the worker exists
 * only then; loaded any other way (CREATE EXTENSION, LOAD,
 * session_preload_libraries) the library defines none of them, and each
 * backend that uses the GPU holds its own context.
 */
static void
define_worker_settings(void)
{
	DefineCustomBoolVariable("gpuclust.gpu_worker",
							 "Runs every backend's GPU jobs in one background worker.",
							 "With shared_preload_libraries = 'gpuclust', a "
							 "background worker creates the CUDA context once and "
							 "runs the GPU work of all backends, which then hold "
							 "no CUDA context of their own.  Off, or without "
							 "preloading, each backend that uses the GPU creates "
							 "its own context.",
							 &gpuclust_gpu_worker,
							 true,
							 PGC_POSTMASTER,
							 0,
							 NULL, NULL, NULL);

	DefineCustomStringVariable("gpuclust.gpu_devices",
							   "The CUDA devices the GPU worker owns.",
							   "A comma-separated list of CUDA device numbers "
							   "(as CUDA numbers them, after CUDA_VISIBLE_DEVICES); "
							   "empty (the default) owns every visible GPU.  The "
							   "worker holds a context on each and runs each job "
							   "on one of them.",
							   &gpuclust_gpu_devices,
							   "",
							   PGC_POSTMASTER,
							   0,
							   check_gpu_devices, NULL, NULL);

	DefineCustomIntVariable("gpuclust.gpu_worker_jobs",
							"Most GPU jobs the GPU worker runs at once on one GPU.",
							"Queued jobs start in arrival order when one of "
							"these is free on a GPU where their memory fits.",
							&gpuclust_gpu_worker_jobs,
							4, 1, GC_WORKER_MAX_JOBS,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("gpuclust.gpu_worker_memory",
							"Most GPU memory the GPU worker's jobs may hold at once on one GPU.",
							"0 (the default) allows each device's free memory when "
							"the worker started, less a margin.  Jobs wait in "
							"arrival order until theirs fits on a GPU; a job that "
							"needs more than any GPU allows fails under device "
							"'gpu' and runs on the CPU under 'auto'.",
							&gpuclust_gpu_worker_memory,
							0, 0, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MB,
							NULL, NULL, NULL);

	DefineCustomIntVariable("gpuclust.gpu_worker_split_rows",
							"Rows from which one k-means call may split over several GPUs of the GPU worker; DBSCAN and affinity propagation scale them.",
							"A k-means call without sample weights, of at least "
							"this many rows, whose rows fit each GPU, runs split "
							"over every GPU of the worker that is idle when it "
							"starts (at most gpuclust.gpu_worker_gpus_per_call), "
							"with the result of one GPU bit for bit; with one "
							"idle GPU it runs there.  A DBSCAN call splits from "
							"8 times as many rows at 1 or 2 features, twice as "
							"many at 3, a quarter above; an affinity propagation "
							"call from a 256th as many (at least 2), and one too "
							"large for one GPU over as many GPUs as it needs.",
							&gpuclust_gpu_worker_split_rows,
							GC_WORKER_SPLIT_ROWS, 1, INT_MAX,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("gpuclust.gpu_worker_gpus_per_call",
							"Most GPUs of the GPU worker one call of this session splits over.",
							"0 (the default): every idle GPU of the worker; 1: "
							"one GPU, never split (gpuclust.gpu_worker_split_rows "
							"says which calls may).",
							&gpuclust_gpu_worker_gpus_per_call,
							0, 0, GC_WORKER_MAX_GPUS,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);

#ifdef GC_TESTING
	/* test builds only (make GC_TESTING=1) */
	DefineCustomIntVariable("gpuclust.gpu_worker_emulate",
							"For tests: the GPU worker runs its jobs on the CPU, on a GPU of this much memory.",
							"0 (the default) uses the real GPU.  Otherwise the "
							"worker acts as if it owned a GPU of this size whose "
							"jobs run the CPU's code, so that the hand-off, the "
							"queue and cancellation can be tested on a machine "
							"without a GPU.",
							&gpuclust_gpu_worker_emulate,
							0, 0, INT_MAX,
							PGC_POSTMASTER,
							GUC_UNIT_MB | GUC_NOT_IN_SAMPLE,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("gpuclust.gpu_worker_emulate_lose_gpu",
							 "For tests: this session's jobs make the emulated GPU they run on fail.",
							 "A GPU that fails during a job is marked lost; the "
							 "worker redoes the job on another GPU when one is "
							 "usable.",
							 &gpuclust_gpu_worker_emulate_lose_gpu,
							 false,
							 PGC_SUSET,
							 GUC_NOT_IN_SAMPLE,
							 NULL, NULL, NULL);
#endif
}

void
_PG_init(void)
{
	DefineCustomEnumVariable("gpuclust.device",
							 "Selects the device that runs clustering functions.",
							 "auto runs on the GPU when one is usable and has a "
							 "path for the algorithm, and on the CPU otherwise; "
							 "gpu fails when no GPU can be used; cpu always "
							 "runs on the CPU.  A function's device argument "
							 "overrides this setting.",
							 &gpuclust_device,
							 GC_DEVICE_AUTO,
							 device_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("gpuclust.cpu_threads",
							"Number of CPU threads a clustering function uses.",
							"0 uses as many as allowed.  A call never uses more "
							"threads than gpuclust.max_cpu_threads allows or "
							"than there are cores.",
							&gpuclust_cpu_threads,
							0, 0, GC_MAX_THREADS_SETTING,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("gpuclust.max_cpu_threads",
							"Most CPU threads one clustering call may use.",
							"0 allows all cores.  gpuclust.cpu_threads may "
							"lower it for a session, never raise it.",
							&gpuclust_max_cpu_threads,
							0, 0, GC_MAX_THREADS_SETTING,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("gpuclust.gpu_device_id",
							"CUDA device number used when running on the GPU.",
							"With the GPU worker, jobs run on any GPU of "
							"gpuclust.gpu_devices; a session whose value differs "
							"from the server's runs its jobs on this GPU.",
							&gpuclust_gpu_device_id,
							0, 0, 1024,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("gpuclust.log_timing",
							 "Reports where a clustering call spent its time.",
							 "When on, each call emits an INFO line naming the "
							 "device, the problem's size and iterations, and "
							 "the milliseconds spent reading the rows (ingest), "
							 "clustering (compute, GPU transfers included and "
							 "itemised) and returning the rows (emit).",
							 &gpuclust_log_timing,
							 false,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("gpuclust.max_matrix_memory",
							"Largest working memory of an O(n^2) clustering function.",
							"gpu_affinity_propagation keeps three n x n double "
							"precision matrices (24 n^2 bytes; on the GPU in "
							"float4, 12 n^2) on either device; a call that needs "
							"more fails before allocating them, saying how many "
							"rows fit.  gpuclust.matrix_memory may lower it for "
							"a session, never raise it.",
							&gpuclust_max_matrix_memory,
							4096, 1, INT_MAX,
							PGC_SUSET,
							GUC_UNIT_MB,
							NULL, NULL, NULL);

	DefineCustomIntVariable("gpuclust.matrix_memory",
							"A session's own, lower limit on the working memory of an O(n^2) clustering function.",
							"0 uses gpuclust.max_matrix_memory; a larger value "
							"than that is capped by it.",
							&gpuclust_matrix_memory,
							0, 0, INT_MAX,
							PGC_USERSET,
							GUC_UNIT_MB,
							NULL, NULL, NULL);

	DefineCustomIntVariable("gpuclust.gpu_memory_limit",
							"Most GPU memory one clustering call may use.",
							"0 (the default) allows the GPU's free memory (with "
							"the GPU worker, its budget for jobs).  A k-means "
							"whose data do not fit streams its rows to the GPU "
							"in chunks on every iteration, with the same results; "
							"a call that does not fit even so, and a DBSCAN that "
							"does not fit, runs on the CPU under device 'auto' "
							"and fails under 'gpu'.",
							&gpuclust_gpu_memory_limit,
							0, 0, INT_MAX,
							PGC_SUSET,
							GUC_UNIT_MB,
							NULL, NULL, NULL);

	if (process_shared_preload_libraries_in_progress)
		define_worker_settings();

	MarkGUCPrefixReserved("gpuclust");

	gc_progress_init();
	gc_worker_init();
	gc_job_init();
}
