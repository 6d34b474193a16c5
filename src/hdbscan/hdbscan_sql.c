/*-------------------------------------------------------------------------
 *
 * hdbscan_sql.c
 *	  gpu_hdbscan(source, min_cluster_size, min_samples,
 *				  cluster_selection_epsilon, cluster_selection_method,
 *				  allow_single_cluster, alpha, metric, device)
 *	  RETURNS TABLE (id bigint, cluster_id int, probability float8,
 *					 outlier_score float8)
 *
 *	  gpu_hdbscan_tree(<gpu_hdbscan's arguments>)
 *	  RETURNS TABLE (parent int, child int, id bigint, lambda float8,
 *					 child_size bigint, cluster_id int)
 *
 *	  gpu_minimum_spanning_tree(source, min_samples, alpha, metric, device)
 *	  RETURNS TABLE (id_a bigint, id_b bigint, distance float8)
 *
 * gpu_hdbscan: rows in the source's order; noise has a NULL cluster_id
 * (probability 0); a row with NULL features NULL in all three.
 * gpu_hdbscan_tree: the condensed tree in the core's order, one row per
 * edge: parent the cluster node (the core's numbering less n: 0 is the
 * root), a row's edge with child NULL and the row's id, a cluster's with
 * child its node, id NULL and cluster_id its gpu_hdbscan cluster when it
 * was selected.  gpu_minimum_spanning_tree: the n - 1 edges sorted by
 * (distance, a, b), id_a the row of the lower input position a.  Rows
 * with NULL features are in neither tree.  The keyed forms (id_type after
 * the source) return the ids with the source's own type.  A NULL argument
 * other than min_samples (gpu_hdbscan, gpu_hdbscan_tree: NULL is
 * min_cluster_size) and device is an error; an empty source returns no
 * rows.
 *
 * Arguments: hdbscan_args.c; ingest and the frame: common/srf.c.  Device
 * and run: hdbscan_run.c, with the fallback to the CPU under 'auto'.
 * gpuclust.log_timing = on reports ingest / compute / emit times in an
 * INFO, with the GPU's phases when it ran there.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/lsyscache.h"

#include "common/srf.h"
#include "hdbscan/hdbscan_glue.h"

PG_FUNCTION_INFO_V1(gpu_hdbscan);
PG_FUNCTION_INFO_V1(gpu_hdbscan_tree);
PG_FUNCTION_INFO_V1(gpu_minimum_spanning_tree);

/*
 * An HDBSCAN call up to its run: the arguments by sig (cheap checks
 * first: nothing runs when one is bad), the source, min_samples against
 * its rows.  Returns whether there are rows to run on; with none, the
 * device is still chosen ('gpu' without a GPU fails as it would with
 * rows) and call->ran set.
 */
static bool
hdbscan_begin(FunctionCallInfo fcinfo, const GcSignature *sig,
			  GcSrfCall *call, gc_hdbscan_params *p)
{
	gc_glue_srf_args(fcinfo, sig, call);
	if (sig == &gc_mst_signature)
		gc_glue_mst_params(&call->args, p, &call->requested);
	else
		gc_glue_hdbscan_params(&call->args, p, &call->requested);
	gc_glue_srf_ingest(call);
	if (call->in.n == 0)
	{
		call->ran = gc_glue_choose_hdbscan_device(call->requested, p, 0, 0);
		return false;
	}
	gc_glue_hdbscan_check_rows(&call->args, p, call->in.n);
	return true;
}

/* gpu_hdbscan's or gpu_hdbscan_tree's call up to its result, *out. */
static void
hdbscan_run_call(FunctionCallInfo fcinfo, GcSrfCall *call,
				 gc_hdbscan_params *p, bool want_tree, GcHdbscanOut *out)
{
	memset(out, 0, sizeof(*out));
	if (hdbscan_begin(fcinfo, &gc_hdbscan_signature, call, p))
		call->ran = gc_glue_run_hdbscan(call->requested, &call->in, p,
										call->cxt, want_tree, out);
}

/* gpuclust.log_timing's line, and the end of the call. */
static void
hdbscan_end(GcSrfCall *call, const gc_hdbscan_params *p, const char *what)
{
	if (gpuclust_log_timing)
		gc_glue_srf_log_timing(call,
							   psprintf("%s: device %s, n %lld, d %d, min_samples %lld%s",
										get_func_name(call->fcinfo->flinfo->fn_oid),
										gc_device_name(call->ran),
										(long long) call->in.n, call->in.d,
										(long long) p->min_samples, what),
							   gc_algorithm_gpu_phases(GC_ALGO_HDBSCAN,
													   call->ran, call->in.n));
	gc_glue_srf_end(call);
}

/* ", min_cluster_size 5, method eom, clusters 3" */
static const char *
hdbscan_timing(const gc_hdbscan_params *p, int32 clusters)
{
	return psprintf(", min_cluster_size %lld, method %s, clusters %d",
					(long long) p->min_cluster_size,
					gc_hdbscan_method_name(p->method), clusters);
}

/*
 * The row of the source query (0 .. n_rows - 1) of each row of X: the
 * trees name rows by their position in X.
 */
static int64 *
feature_rows(const GcInput *in, MemoryContext cxt)
{
	int64	   *rows = gc_glue_alloc_array(cxt, Max(in->n, 1), sizeof(int64));

	for (int64 i = 0, j = 0; i < in->n_rows; i++)
		if (in->has_features[i])
			rows[j++] = i;
	return rows;
}

Datum
gpu_hdbscan(PG_FUNCTION_ARGS)
{
	GcSrfCall	call;
	gc_hdbscan_params params;
	GcHdbscanOut out;

	hdbscan_run_call(fcinfo, &call, &params, false, &out);
	gc_glue_srf_emit_scores(&call, out.labels, out.probability, out.outlier);
	hdbscan_end(&call, &params, hdbscan_timing(&params, out.clusters));
	return (Datum) 0;
}

Datum
gpu_hdbscan_tree(PG_FUNCTION_ARGS)
{
	GcSrfCall	call;
	gc_hdbscan_params params;
	GcHdbscanOut out;
	int64	   *rows;

	hdbscan_run_call(fcinfo, &call, &params, true, &out);
	gc_glue_srf_emit_begin(&call);
	rows = feature_rows(&call.in, call.cxt);
	for (int64 r = 0; r < out.tree.nrows; r++)
	{
		const gc_hdbscan_tree_row *t = &out.tree.rows[r];
		int64		n = call.in.n;
		Datum		values[6];
		bool		nulls[6] = {false, false, false, false, false, false};

		values[0] = Int32GetDatum((int32) (t->parent - n));
		if (t->child < n)
		{
			/* a row leaves the cluster */
			nulls[1] = nulls[5] = true;
			values[2] = gc_glue_srf_id(&call.in, rows[t->child]);
		}
		else
		{
			int32		selected = out.tree.selected[t->child - n];

			values[1] = Int32GetDatum((int32) (t->child - n));
			nulls[2] = true;
			nulls[5] = selected == GC_NOISE;
			values[5] = Int32GetDatum(selected);
		}
		values[3] = Float8GetDatum(t->lambda);
		values[4] = Int64GetDatum(t->child_size);
		gc_glue_srf_put(&call, values, nulls, r);
	}
	gc_glue_srf_emit_end(&call);
	hdbscan_end(&call, &params, hdbscan_timing(&params, out.clusters));
	return (Datum) 0;
}

Datum
gpu_minimum_spanning_tree(PG_FUNCTION_ARGS)
{
	GcSrfCall	call;
	gc_hdbscan_params params;
	gc_mst_edge *edges = NULL;
	int64		nedges = 0;
	int64	   *rows;

	if (hdbscan_begin(fcinfo, &gc_mst_signature, &call, &params))
	{
		call.ran = gc_glue_run_mst(call.requested, &call.in, &params,
								   call.cxt, &edges);
		nedges = call.in.n - 1;
	}
	gc_glue_srf_emit_begin(&call);
	rows = feature_rows(&call.in, call.cxt);
	for (int64 e = 0; e < nedges; e++)
	{
		Datum		values[3];
		bool		nulls[3] = {false, false, false};

		values[0] = gc_glue_srf_id(&call.in, rows[edges[e].a]);
		values[1] = gc_glue_srf_id(&call.in, rows[edges[e].b]);
		values[2] = Float8GetDatum(edges[e].w);
		gc_glue_srf_put(&call, values, nulls, e);
	}
	gc_glue_srf_emit_end(&call);
	hdbscan_end(&call, &params, psprintf(", alpha %g", params.alpha));
	return (Datum) 0;
}
