/*-------------------------------------------------------------------------
 *
 * labelled_rows_sql.c
 *	  Reading a labelling of a source query's rows (any: gpu_kmeans's,
 *	  gpu_dbscan's with its noise, a user's own):
 *
 *	  gpu_silhouette(source, labels_query, sample_size, seed, device)
 *		RETURNS (silhouette float8, rows bigint, clusters bigint,
 *				 sampled boolean)
 *	  gpu_cluster_centers(source, labels_query)
 *		RETURNS TABLE (cluster_id bigint, size bigint, centroid float8[],
 *					   radius float8, mean_distance float8)
 *	  gpu_cluster_scores(source, labels_query, sample_size, seed, device)
 *		RETURNS (silhouette float8, davies_bouldin float8,
 *				 calinski_harabasz float8, inertia float8, n bigint,
 *				 clusters bigint, sampled boolean)
 *
 * The labels query returns (id, label) and is joined to the source on id
 * (tools/labels_query.c); rows with a NULL label, or with no row in the labels query,
 * are noise and left out of both.  gpu_silhouette is scikit-learn's
 * silhouette_score over the labelled rows (silhouette.c): exact when
 * sample_size is NULL and there are at most GC_SILHOUETTE_EXACT_ROWS
 * labelled rows, or sample_size is at least their number; otherwise on a
 * sample of sample_size (NULL: GC_SILHOUETTE_EXACT_ROWS) rows drawn by
 * seed.  gpu_cluster_centers returns one row per label, in ascending order
 * (cluster_summary.c).  gpu_cluster_scores gives gpu_silhouette's score
 * (the same arguments and device) beside the Davies-Bouldin and
 * Calinski-Harabasz indices and the inertia of every labelled row
 * (cluster_scores.c, O(n d + m^2 d) on the CPU).  gpu_silhouette runs on the device dispatch chooses
 * for the rows it scores once the labels are read (gc_glue_run_silhouette:
 * 'auto' the GPU from GC_SILHOUETTE_GPU_MIN_ROWS rows scored when its
 * memory fits, 'gpu' the GPU or the reason), the GPU's score equal to the
 * CPU's bit for bit; gpu_cluster_centers, O(n d), runs on the CPU and has
 * no device argument.  gpuclust_progress shows both: ingest (the source,
 * then the labels), iterate (the silhouette: rows scored of total; on the
 * GPU upload first), emit, and the device used.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/tuplestore.h"

#include "common/gpuclust.h"
#include "tools/labels_query.h"
#include "common/progress.h"
#include "tools/tools_glue.h"

PG_FUNCTION_INFO_V1(gpu_silhouette);
PG_FUNCTION_INFO_V1(gpu_cluster_centers);
PG_FUNCTION_INFO_V1(gpu_cluster_scores);

/*
 * The source's rows and their labels, in cxt, for the call of function
 * on the device requested (its progress starts here).
 */
static void
read_labelling(const char *function, const GcArgs *args, gc_device requested,
			   MemoryContext cxt, GcInput *in, int32 **labels, int32 *m,
			   int64 **values)
{
	gc_progress_begin(function);
	gc_ingest(TextDatumGetCString(args->value[GC_ARG_ROWS]), InvalidOid,
			  gc_ingest_flags_for(0, requested), cxt, in);
	gc_read_labels(TextDatumGetCString(args->value[1]), in, cxt, labels, m,
				   values);
}

/*
 * A call of gpu_silhouette or gpu_cluster_scores (function): their
 * arguments (one list), the row they return, the labelling read in its
 * own memory, and when it began.
 */
typedef struct ScoreCall
{
	const char *function;
	GcArgs		args;
	int64		sample_size;
	uint64		seed;
	gc_device	device;
	TupleDesc	tupdesc;
	MemoryContext cxt;
	GcInput		in;
	int32	   *labels;
	int32		m;
	int64	   *values;
	double		t0;
} ScoreCall;

/* Reads c's arguments and labelling (its progress starts here). */
static void
score_call_begin(FunctionCallInfo fcinfo, const char *function, ScoreCall *c)
{
	c->function = function;
	c->t0 = gc_now_ms();
	gc_glue_args_of_call(fcinfo, &gc_silhouette_signature, &c->args);
	gc_glue_silhouette_params(&c->args, &c->sample_size, &c->seed,
							  &c->device);
	if (get_call_result_type(fcinfo, NULL, &c->tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type of %s must be a row type", function);
	c->tupdesc = BlessTupleDesc(c->tupdesc);
	c->cxt = AllocSetContextCreate(CurrentMemoryContext, "gpuclust scores",
								   ALLOCSET_DEFAULT_SIZES);
	read_labelling(function, &c->args, c->device, c->cxt, &c->in, &c->labels,
				   &c->m, &c->values);
}

/*
 * The silhouette of c's labelling on the device c asks for, with
 * gpu_silhouette's rule: sample_size 0 scores every labelled row up to
 * GC_SILHOUETTE_EXACT_ROWS of them, and a sample of that many beyond.
 * Returns the device that ran.
 */
static gc_device
score_silhouette(const ScoreCall *c, gc_silhouette_result *res)
{
	int64		sample_size = c->sample_size;

	if (sample_size == 0 &&
		gc_silhouette_rows(c->labels, c->in.n, 0) > GC_SILHOUETTE_EXACT_ROWS)
		sample_size = GC_SILHOUETTE_EXACT_ROWS;
	return gc_glue_run_silhouette(c->device, &c->in, c->labels, c->m,
								  sample_size, c->seed, res);
}

/*
 * c's result row out, its progress ended and its memory freed; with
 * gpuclust.log_timing, the device the silhouette ran on (ran) and the time.
 */
static Datum
score_call_end(ScoreCall *c, Datum *out, bool *nulls, gc_device ran,
			   const gc_silhouette_result *res)
{
	HeapTuple	tuple = heap_form_tuple(c->tupdesc, out, nulls);

	gc_progress_end();
	if (gpuclust_log_timing)
		ereport(INFO,
				(errmsg("%s: device %s, n %lld, d %d, rows scored %lld; %.1f ms",
						c->function, gc_device_name(ran), (long long) c->in.n,
						c->in.d, (long long) res->rows, gc_now_ms() - c->t0)));
	MemoryContextDelete(c->cxt);
	return HeapTupleGetDatum(tuple);
}

Datum
gpu_silhouette(PG_FUNCTION_ARGS)
{
	ScoreCall	c;
	gc_silhouette_result res;
	gc_device	ran;
	Datum		out[4];
	bool		nulls[4] = {false, false, false, false};

	score_call_begin(fcinfo, "gpu_silhouette", &c);
	ran = score_silhouette(&c, &res);
	out[0] = Float8GetDatum(res.score);
	out[1] = Int64GetDatum(res.rows);
	out[2] = Int64GetDatum(res.clusters);
	out[3] = BoolGetDatum(res.sampled);
	PG_RETURN_DATUM(score_call_end(&c, out, nulls, ran, &res));
}

Datum
gpu_cluster_centers(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	GcArgs		args;
	MemoryContext cxt,
				oldcxt;
	GcInput		in;
	int32	   *labels;
	int32		m;
	int64	   *values;
	int64	   *sizes;
	double	   *centres,
			   *radius,
			   *mean_dist;
	Datum	   *elems;
	gc_ctx		ctx;
	gc_status	st = {GC_OK, ""};

	gc_glue_args_of_call(fcinfo, &gc_centers_signature, &args);
	InitMaterializedSRF(fcinfo, 0);
	cxt = AllocSetContextCreate(CurrentMemoryContext, "gpu_cluster_centers",
								ALLOCSET_DEFAULT_SIZES);
	read_labelling("gpu_cluster_centers", &args, GC_DEVICE_CPU, cxt, &in,
				   &labels, &m, &values);
	gc_progress_compute(GC_DEVICE_CPU, in.n);
	gc_glue_ctx(&ctx);
	if (m == 0)
	{
		gc_progress_end();
		MemoryContextDelete(cxt);
		return (Datum) 0;
	}
	oldcxt = MemoryContextSwitchTo(cxt);
	sizes = palloc_extended(m * sizeof(int64), MCXT_ALLOC_HUGE);
	centres = palloc_extended((Size) m * in.d * sizeof(double), MCXT_ALLOC_HUGE);
	radius = palloc_extended(m * sizeof(double), MCXT_ALLOC_HUGE);
	mean_dist = palloc_extended(m * sizeof(double), MCXT_ALLOC_HUGE);
	elems = palloc(in.d * sizeof(Datum));
	MemoryContextSwitchTo(oldcxt);

	if (gc_cluster_summary_cpu(&ctx, in.X, in.n, in.d, labels, m, sizes,
							   centres, radius, mean_dist, NULL, &st) != GC_OK)
		gc_glue_report(&st, "cluster summary");
	gc_progress_phase(GC_PHASE_EMIT);

	for (int32 c = 0; c < m; c++)
	{
		Datum		out[5];
		bool		nulls[5] = {false, false, false, false, false};

		for (int j = 0; j < in.d; j++)
			elems[j] = Float8GetDatum(centres[(int64) c * in.d + j]);
		out[0] = Int64GetDatum(values[c]);
		out[1] = Int64GetDatum(sizes[c]);
		out[2] = PointerGetDatum(construct_array(elems, in.d, FLOAT8OID,
												 sizeof(float8), FLOAT8PASSBYVAL,
												 TYPALIGN_DOUBLE));
		out[3] = Float8GetDatum(radius[c]);
		out[4] = Float8GetDatum(mean_dist[c]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, out, nulls);
	}
	gc_progress_end();
	MemoryContextDelete(cxt);
	return (Datum) 0;
}

Datum
gpu_cluster_scores(PG_FUNCTION_ARGS)
{
	ScoreCall	c;
	gc_ctx		ctx;
	gc_status	st = {GC_OK, ""};
	gc_cluster_scores sc;
	gc_silhouette_result res;
	gc_device	ran;
	Datum		out[7];
	bool		nulls[7] = {false, false, false, false, false, false, false};

	score_call_begin(fcinfo, "gpu_cluster_scores", &c);
	gc_progress_compute(GC_DEVICE_CPU, c.in.n);
	gc_glue_ctx(&ctx);
	if (gc_cluster_scores_cpu(&ctx, c.in.X, c.in.n, c.in.d, c.labels, c.m,
							  &sc, &st) != GC_OK)
	{
		if (st.code == GC_EINVAL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("cluster scores need at least 2 clusters and at most one fewer than the labelled rows"),
					 errdetail("%lld labelled row%s, in %lld cluster%s.",
							   (long long) sc.rows, sc.rows == 1 ? "" : "s",
							   (long long) sc.clusters,
							   sc.clusters == 1 ? "" : "s"),
					 errhint("Rows with a NULL label, or none, are noise and not scored.")));
		gc_glue_report(&st, "cluster scores");
	}
	ran = score_silhouette(&c, &res);
	out[0] = Float8GetDatum(res.score);
	out[1] = Float8GetDatum(sc.davies_bouldin);
	out[2] = Float8GetDatum(sc.calinski_harabasz);
	out[3] = Float8GetDatum(sc.inertia);
	out[4] = Int64GetDatum(sc.rows);
	out[5] = Int64GetDatum(sc.clusters);
	out[6] = BoolGetDatum(res.sampled);
	PG_RETURN_DATUM(score_call_end(&c, out, nulls, ran, &res));
}
