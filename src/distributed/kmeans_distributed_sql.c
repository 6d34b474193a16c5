/*-------------------------------------------------------------------------
 *
 * kmeans_distributed_sql.c
 *	  gpu_kmeans_distributed(source, k, max_iter, tol, init, seed,
 *							 init_centroids, device)
 *		RETURNS (centroids, inertia, iterations, converged, n, d)
 *	  k-means over rows where they are (Citus shards, parallel workers):
 *	  the driver that iterates the kmeans_step aggregate (kmeans_step.c).
 *
 * The driver checks the source as gc_ingest does (one statement that only
 * reads), runs every query through SPI read-only with a parallel plan
 * allowed, and checks for interrupts between passes (and the executor in
 * them).  Labels unchanged is detected as counts and member hashes
 * unchanged (a false "unchanged" needs a 64-bit hash collision).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "common/gpuclust.h"
#include "common/ingest.h"
#include "distributed/kmeans_distributed.h"
#include "kmeans/kmeans_glue.h"
#include "core/gpuclust_core.h"
#include "core/common/rng.h"

PG_FUNCTION_INFO_V1(gpu_kmeans_distributed);

Datum
gpu_kmeans_distributed(PG_FUNCTION_ARGS)
{
	const char *nsp = gc_driver_schema(fcinfo);
	char	   *source;
	int			k,
				max_iter,
				it;
	double		tol,
				tol_scaled = 0.0;
	char	   *init;
	char	   *device = NULL;
	int64		seed;
	TupleDesc	tupdesc;
	MemoryContext callcxt = CurrentMemoryContext,
				cxt;
	char	   *q;
	Oid			types[1] = {FLOAT4ARRAYOID};
	SPIPlanPtr	plan;
	KmdStepOut		st,
				prev;
	ArrayType  *C,
			   *given = NULL;
	int64		n;
	int			d;
	bool		converged = false;
	Datum		values[6];
	bool		nulls[6] = {false, false, false, false, false, false};
	GcPass		pass = KM_PASS("the pass for the rows' count and mean", 0);

	gc_driver_not_null(fcinfo, 0, "source");
	gc_driver_not_null(fcinfo, 1, "k");
	gc_driver_not_null(fcinfo, 2, "max_iter");
	gc_driver_not_null(fcinfo, 3, "tol");
	gc_driver_not_null(fcinfo, 4, "init");
	gc_driver_not_null(fcinfo, 5, "seed");
	source = text_to_cstring(PG_GETARG_TEXT_PP(0));
	k = PG_GETARG_INT32(1);
	max_iter = PG_GETARG_INT32(2);
	tol = PG_GETARG_FLOAT8(3);
	init = text_to_cstring(PG_GETARG_TEXT_PP(4));
	seed = PG_GETARG_INT64(5);
	if (!PG_ARGISNULL(7))
	{
		device = text_to_cstring(PG_GETARG_TEXT_PP(7));
		(void) gc_glue_device(PG_GETARG_DATUM(7), false);	/* checked now */
	}
	if (k < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("k must be at least 1, got %d", k)));
	if (max_iter < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_iter must be at least 1, got %d", max_iter)));
	if (!(tol >= 0.0) || isinf(tol))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("tol must be a finite number >= 0, got %g", tol)));
	if (strcmp(init, "random") != 0 && strcmp(init, "k-means||") != 0)
		ereport(ERROR,
				(errcode(strcmp(init, "k-means++") == 0 ?
						 ERRCODE_FEATURE_NOT_SUPPORTED : ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("gpu_kmeans_distributed has no init '%s'", init),
				 errdetail("It seeds with init => 'k-means||' (k-means++ in a few rounds of sampling, each one pass over the rows) or 'random' (the rows gpu_kmeans's random init draws from the same seed), or starts from init_centroids; k-means++ is sequential (one pass per centre).")));
	if (!PG_ARGISNULL(6) && strcmp(init, "k-means||") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("init and init_centroids both choose the initial centroids"),
				 errhint("Leave init at its default ('k-means||') with init_centroids.")));
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type of gpu_kmeans_distributed must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);
	cxt = AllocSetContextCreate(callcxt, "gpu_kmeans_distributed",
								ALLOCSET_DEFAULT_SIZES);
	if (!PG_ARGISNULL(6))
	{
		float	   *Cg;
		int			gd;

		/* checked now: nothing runs with bad centroids */
		(void) gc_glue_parse_centroids(PG_GETARG_ARRAYTYPE_P(6), "init_centroids",
									   k, &gd, &Cg, cxt);
		given = DatumGetArrayTypePCopy(PG_GETARG_DATUM(6));
		pfree(Cg);
	}

	SPI_connect();
	if (gc_check_source_query(source, &source) != 2)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("the source query of gpu_kmeans_distributed must return two columns, (id, features)"),
				 errdetail("It has no sample weights yet.")));
	/*
	 * the device a constant, so that Citus's shard queries carry it; none:
	 * each server's gpuclust.device
	 */
	q = psprintf("SELECT %s.kmeans_step(s.f, $1, s.id%s) FROM %s AS s(id, f)",
				 nsp, device == NULL ? "" :
				 psprintf(", %s::pg_catalog.text", quote_literal_cstr(device)),
				 source);
	plan = SPI_prepare_cursor(q, 1, types, CURSOR_OPT_PARALLEL_OK);
	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));

	/* the rows' count and mean, then the variance about the mean */
	kmd_run_step(&pass, plan, NULL, cxt, &st);
	n = st.empty ? 0 : st.n;
	gc_glue_check_k_rows(k, n, n == 0 ? "gpu_kmeans_distributed needs rows to fit a model to." : NULL);
	d = ARR_DIMS(st.centroids)[1];
	if (given != NULL && ARR_DIMS(given)[1] != d)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("init_centroids have %d columns, but the rows have %d features",
						ARR_DIMS(given)[1], d)));
	if (tol > 0.0)
	{
		pass = KM_PASS("the pass for the rows' variance", 0);
		kmd_run_step(&pass, plan, st.centroids, cxt, &st);
		tol_scaled = tol * (st.inertia / ((double) n * d));
	}

	if (given != NULL)
		C = given;
	else if (strcmp(init, "k-means||") == 0)
		C = kmd_parallel_init(nsp, source, plan, n, d, k, seed, cxt);
	else
	{
		int64	   *rows = palloc(sizeof(int64) * k);
		gc_status	gs = {GC_OK, ""};
		gc_ctx		ctx;

		gc_glue_ctx(&ctx);
		if (gc_km_random_rows(&ctx, n, k, (uint64) seed, GC_KM_STREAM_RANDOM,
							  rows, &gs) != GC_OK)
			gc_glue_report(&gs, "k-means");
		C = kmd_fetch_rows("random seeding", nsp, source, n, rows, k, d, cxt);
	}

	/*
	 * Lloyd's iterations, stopping as the core's kmeans_run stops: labels
	 * unchanged and no cluster re-seeded, or a shift within tol
	 */
	memset(&prev, 0, sizeof(prev));
	for (it = 0; it < max_iter; it++)
	{
		bool		changed;

		pass = KM_PASS("Lloyd iteration", it + 1);
		kmd_run_step(&pass, plan, C, cxt, &st);
		changed = it == 0 ||
			memcmp(st.counts, prev.counts, sizeof(int64) * k) != 0 ||
			memcmp(st.members, prev.members, sizeof(uint64) * k) != 0 ||
			st.reseeded > 0;
		C = st.centroids;
		prev = st;
		if (!changed || st.shift <= tol_scaled)
		{
			converged = true;
			it++;
			break;
		}
	}

	/* the inertia of the returned centres */
	pass = KM_PASS("the pass for the final inertia", 0);
	kmd_run_step(&pass, plan, C, cxt, &st);
	SPI_finish();

	MemoryContextSwitchTo(callcxt);
	values[0] = PointerGetDatum(DatumGetArrayTypePCopy(PointerGetDatum(C)));
	values[1] = Float8GetDatum(st.inertia);
	values[2] = Int32GetDatum(it);
	values[3] = BoolGetDatum(converged);
	values[4] = Int64GetDatum(n);
	values[5] = Int32GetDatum(d);
	{
		HeapTuple	tuple = heap_form_tuple(tupdesc, values, nulls);

		MemoryContextDelete(cxt);
		PG_RETURN_DATUM(HeapTupleGetDatum(tuple));
	}
}
