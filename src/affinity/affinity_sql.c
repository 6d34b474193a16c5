/*-------------------------------------------------------------------------
 *
 * affinity_sql.c
 *	  gpu_affinity_propagation(source, damping, preference, max_iter,
 *							   convergence_iter, device, precision)
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
 * Memory: the core keeps three n x n matrices (double; float4: float, on
 * the GPU).  Before anything is allocated, they are checked against
 * gpuclust.matrix_memory / gpuclust.max_matrix_memory on either device
 * (PROGRAM_LIMIT_EXCEEDED), the GPU's memory on the GPU and the server's
 * available memory on the CPU (OUT_OF_MEMORY); the error says how many
 * rows would fit.
 *
 * Device: the CPU, or the GPU (through the GPU worker when the library is
 * preloaded); 'auto' runs on the GPU from GC_AP_GPU_MIN_ROWS rows when it
 * fits there, and a GPU failure under 'auto' is redone on the CPU.
 * precision 'float8' gives the same result on both; 'float4' runs only on
 * the GPU ('cpu' is an error before the source runs, 'auto' means the GPU,
 * and a GPU failure is the error).  An empty source still fails where the
 * device cannot run.
 *
 * Arguments: gc_glue_ap_params (affinity_args.c); ingest and emitter:
 * common/srf.c; run, memory check and notices: gc_glue_run_ap
 * (affinity_run.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"

#include "common/srf.h"
#include "affinity/affinity_glue.h"

PG_FUNCTION_INFO_V1(gpu_affinity_propagation);

Datum
gpu_affinity_propagation(PG_FUNCTION_ARGS)
{
	GcSrfCall	call;
	gc_ap_params params;
	/* an empty source: nothing left unconverged */
	gc_ap_result res = {.converged = true};

	/* cheap checks first: nothing runs when an argument is bad */
	gc_glue_srf_args(fcinfo, &gc_ap_signature, &call);
	gc_glue_ap_params(&call.args, &params, &call.requested);

	gc_glue_srf_ingest(&call);
	if (call.in.n > 0)
		call.ran = gc_glue_run_ap(call.requested, &call.in, &params, call.cxt,
								  &res);
	else
	{
		char	   *note;

		/*
		 * nothing to cluster, but 'gpu' (or float4) on a machine without
		 * one still fails
		 */
		call.ran = gc_glue_choose_ap_device(call.requested, params.precision,
											0, 0, &note);
	}
	gc_glue_srf_emit(&call, res.labels, res.is_exemplar, NULL);

	if (gpuclust_log_timing)
		gc_glue_srf_log_timing(&call,
							   psprintf("gpu_affinity_propagation: device %s, precision %s, n %lld, d %d, iterations %d (%s), clusters %lld, preference %g",
										gc_device_name(call.ran),
										gc_ap_precision_name(params.precision),
										(long long) call.in.n, call.in.d,
										res.iterations,
										res.converged ? "converged" : "not converged",
										(long long) res.n_clusters,
										res.preference),
							   psprintf(" (similarities %.1f, preference %.1f, iterations %.1f, labels %.1f)",
										res.ms_similarity, res.ms_preference,
										res.ms_iterations, res.ms_labels));
	gc_glue_srf_end(&call);
	return (Datum) 0;
}
