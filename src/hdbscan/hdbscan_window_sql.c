/*-------------------------------------------------------------------------
 *
 * hdbscan_window_sql.c
 *	  gpu_hdbscan as a window function (common/window.c runs it).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"

#include "common/window.h"
#include "hdbscan/hdbscan_glue.h"

PG_FUNCTION_INFO_V1(gpu_hdbscan_window);

/*
 * gpu_hdbscan(features, min_cluster_size, min_samples,
 * cluster_selection_epsilon, cluster_selection_method,
 * allow_single_cluster, alpha, metric, device) OVER (...)
 */
static void
hdbscan_read_params(WinCall *call)
{
	gc_hdbscan_params *p = palloc(sizeof(gc_hdbscan_params));

	gc_glue_hdbscan_params(&call->params.args, p, &call->requested);
	call->p = p;
}

static const int32 *
hdbscan_run(WinCall *call)
{
	const gc_hdbscan_params *p = call->p;
	GcHdbscanOut out;

	/* no row has min_samples neighbours: all noise, as DBSCAN's would be */
	if (p->min_samples > call->in.n)
	{
		gc_glue_window_small_partition(call, "min_samples", p->min_samples,
									   "every row is noise",
									   gc_glue_hdbscan_min_samples_hint(&call->params.args));
		call->ran = GC_DEVICE_CPU;
		return gc_glue_window_all_noise(call);
	}
	call->ran = gc_glue_run_hdbscan(call->requested, &call->in, p,
									call->workcxt, false, &out);
	return out.labels;
}

/* gpuclust.log_timing's parameters of a partition */
static void
hdbscan_timing(const WinCall *call, StringInfo line)
{
	const gc_hdbscan_params *p = call->p;

	appendStringInfo(line, ", min_cluster_size %lld, min_samples %lld, method %s",
					 (long long) p->min_cluster_size,
					 (long long) p->min_samples,
					 gc_hdbscan_method_name(p->method));
}

static const WinAlgo win_hdbscan = {
	.sig = &gc_hdbscan_signature,
	.read_params = hdbscan_read_params,
	.run = hdbscan_run,
	.timing = hdbscan_timing,
	.algo = GC_ALGO_HDBSCAN
};

Datum
gpu_hdbscan_window(PG_FUNCTION_ARGS)
{
	return gc_glue_window_label(fcinfo, &win_hdbscan);
}
