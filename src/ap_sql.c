/*-------------------------------------------------------------------------
 *
 * ap_sql.c
 *	  gpu_affinity_propagation(source, damping, preference, max_iter,
 *							   convergence_iter, device)
 *	  RETURNS TABLE (id bigint, cluster_id int, is_exemplar boolean)
 *
 * Affinity propagation with scikit-learn 1.2's semantics (core/affinity.c).
 * Rows come back in the source's order; clusters are numbered 0, 1, ... by
 * the input position of their exemplars.  A row with NULL features has NULL
 * cluster_id and is_exemplar.  preference NULL means the median of the
 * similarities; device NULL means gpuclust.device; any other NULL argument
 * is an error.
 *
 * Not converged within max_iter: a NOTICE, and (as scikit-learn, which
 * warns) the exemplars of the last iteration still label the rows; when
 * there are none, every cluster_id is NULL and every is_exemplar false.
 *
 * Memory: the core keeps three n x n double matrices.  Before anything is
 * allocated, gc_ap_mem_bytes(n) is checked against gpuclust.max_matrix_memory
 * (PROGRAM_LIMIT_EXCEEDED) and the server's available memory
 * (OUT_OF_MEMORY); the error says how many rows would fit.
 *
 * Device: CPU only for now.  'gpu' (argument or gpuclust.device) is an
 * error; 'auto' runs on the CPU.
 *
 * Arguments and their checks: gc_glue_ap_params (cluster_args.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/tuplestore.h"

#include "cluster_args.h"
#include "cluster_run.h"
#include "ingest.h"

PG_FUNCTION_INFO_V1(gpu_affinity_propagation);

/*
 * bytes as MB with one decimal, for messages: rounded up for what is
 * needed, down for what is there, so "needs" always prints above "has"
 */
static double
mb_up(size_t bytes)
{
	return ceil((double) bytes / (1024.0 * 1024.0) * 10.0) / 10.0;
}

static double
mb_down(size_t bytes)
{
	return floor((double) bytes / (1024.0 * 1024.0) * 10.0) / 10.0;
}

/*
 * Fail unless n rows fit both gpuclust.max_matrix_memory and the memory
 * the server has available.
 */
static void
check_memory(int64 n)
{
	size_t		need = gc_ap_mem_bytes(n);
	size_t		limit = (size_t) gpuclust_max_matrix_memory * 1024 * 1024;
	size_t		avail;

	if (need > limit)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("affinity propagation of %lld rows needs %.1f MB, more than gpuclust.max_matrix_memory (%d MB)",
						(long long) n, mb_up(need), gpuclust_max_matrix_memory),
				 errdetail("It keeps three n x n double precision matrices (24 n^2 bytes); at most %lld rows fit in gpuclust.max_matrix_memory.",
						   (long long) gc_ap_max_rows(limit)),
				 errhint("Raise gpuclust.max_matrix_memory, or cluster fewer rows.")));

	avail = gc_ap_host_memory();
	if (avail > 0 && need > avail)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("affinity propagation of %lld rows needs %.1f MB, more than the %.1f MB of memory available on the server",
						(long long) n, mb_up(need), mb_down(avail)),
				 errdetail("It keeps three n x n double precision matrices (24 n^2 bytes); at most %lld rows fit in the available memory.",
						   (long long) gc_ap_max_rows(avail)),
				 errhint("Cluster fewer rows.")));
}

Datum
gpu_affinity_propagation(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	GcArgs		args;
	gc_ap_params params;
	gc_ap_result res;
	gc_device	requested;
	char	   *source;
	MemoryContext workcxt;
	GcInput		in;
	int32	   *labels = NULL;
	uint8	   *is_exemplar = NULL;
	double		t_start,
				t_ingest = 0,
				t_compute = 0;

	/* cheap checks first: nothing runs when an argument is bad */
	gc_glue_args_of_call(fcinfo, &gc_ap_signature, &args);
	gc_glue_ap_params(&args, &params, &requested);

	InitMaterializedSRF(fcinfo, 0);

	workcxt = AllocSetContextCreate(CurrentMemoryContext, "gpu_affinity_propagation",
									ALLOCSET_DEFAULT_SIZES);
	source = TextDatumGetCString(args.value[GC_ARG_ROWS]);
	t_start = gc_now_ms();
	gc_ingest(source, workcxt, &in);
	t_ingest = gc_now_ms() - t_start;

	memset(&res, 0, sizeof(res));
	res.converged = true;
	if (in.n > 0)
	{
		gc_ctx		ctx;
		gc_status	st = {GC_OK, ""};

		check_memory(in.n);

		labels = MemoryContextAllocHuge(workcxt, (Size) in.n * sizeof(int32));
		is_exemplar = MemoryContextAllocHuge(workcxt, (Size) in.n * sizeof(uint8));
		res.labels = labels;
		res.is_exemplar = is_exemplar;

		gc_glue_ctx(&ctx);
		gc_glue_prepare_threads(&ctx);
		t_start = gc_now_ms();
		if (gc_ap_cpu(&ctx, in.X, in.n, in.d, &params, &res, &st) != GC_OK)
			gc_glue_report(&st, "affinity propagation");
		t_compute = gc_now_ms() - t_start;

		if (res.equal_similarities && in.n > 1)
			ereport(NOTICE,
					(errmsg("all rows are at the same distance from each other"),
					 res.n_clusters > 1
					 ? errdetail("Affinity propagation does not iterate: the preference is at least the similarity, so every row is its own exemplar.")
					 : errdetail("Affinity propagation does not iterate: the preference is below the similarity, so the first row is the one exemplar.")));
		else if (!res.converged)
			ereport(NOTICE,
					(errmsg_plural("affinity propagation did not converge in %d iteration",
								   "affinity propagation did not converge in %d iterations",
								   res.iterations, res.iterations),
					 res.n_clusters > 0
					 ? errdetail_plural("The %lld exemplar of the last iteration labels the rows; the clusters may be degenerate.",
										"The %lld exemplars of the last iteration label the rows; the clusters may be degenerate.",
										(unsigned long) res.n_clusters,
										(long long) res.n_clusters)
					 : errdetail("No row became an exemplar: every cluster_id is NULL and every is_exemplar false."),
					 errhint("Raise max_iter, or damping (up to 0.99) when the messages oscillate.")));
	}
	t_start = gc_now_ms();

	/* the result, in input order */
	gc_glue_emit_labels(rsinfo, &in, labels, is_exemplar);

	if (gpuclust_log_timing)
		ereport(INFO,
				(errmsg("gpu_affinity_propagation: device cpu, n %lld, d %d, iterations %d (%s), "
						"clusters %lld, preference %g; ingest %.1f ms, compute %.1f ms "
						"(similarities %.1f, preference %.1f, iterations %.1f, labels %.1f), emit %.1f ms",
						(long long) in.n, in.d, res.iterations,
						res.converged ? "converged" : "not converged",
						(long long) res.n_clusters, res.preference,
						t_ingest, t_compute, res.ms_similarity, res.ms_preference,
						res.ms_iterations, res.ms_labels,
						gc_now_ms() - t_start)));

	MemoryContextDelete(workcxt);
	return (Datum) 0;
}
