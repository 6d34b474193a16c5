/*-------------------------------------------------------------------------
 *
 * kmeans_parallel_init.c
 *	  k-means|| seeding for gpu_kmeans_distributed, over the rows where
 *	  they are.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "nodes/params.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "common/gpuclust.h"
#include "common/ingest.h"
#include "distributed/kmeans_distributed.h"
#include "core/gpuclust_core.h"
#include "core/common/rng.h"


/*
 * k-means|| as the core defines it (kmeans_internal.h, gc_km_init_kmeans_par),
 * over the rows where they are: candidate 0 is the row at k-means++'s first
 * draw (stream GC_KM_STREAM_KMEANSPAR, counter 0) among the rows in id
 * order; each round r keeps a row when gc_km_par_keep(seed, stream, r, n,
 * id, ell, D², phi) says so (kmeans_parallel_sample, per row: the row's id
 * in place of its position), phi being kmeans_step's cost (the sum of the
 * float D²) over the candidates so far, and adds the kept rows in id
 * order; the rounds run while r <= GC_KM_PAR_ROUNDS, or while fewer than k
 * candidates are found and r <= GC_KM_PAR_MAX_ROUNDS.  The candidates weigh
 * their nearest rows (kmeans_step's counts, ties to the lowest index, as
 * the core's lab) and the core's weighted k-means++ picks k of them (stream
 * + GC_KM_PAR_REDUCE_STREAM).  When the ids are the rows' 0-based positions
 * this is the core's k-means|| (up to phi's rounding: the core's is the
 * exact sum on its grid, kmeans_step's a double sum).
 */
ArrayType *
kmd_parallel_init(const char *nsp, const char *source, SPIPlanPtr step,
					 int64 n, int d, int k, int64 seed, MemoryContext cxt)
{
	GcPass		pass = KM_PASS("k-means|| seeding, its first candidate", 0);

	Oid			types[6] = {FLOAT4ARRAYOID, INT8OID, INT4OID, INT8OID, FLOAT8OID, FLOAT8OID};
	char	   *q = psprintf("SELECT s.f FROM %s AS s(id, f) WHERE s.f IS NOT NULL AND "
							 "%s.kmeans_parallel_sample(s.f, $1, s.id, $2, $3, $4, $5, $6) ORDER BY s.id, s.f",
							 source, nsp);
	SPIPlanPtr	pick = SPI_prepare_cursor(q, 6, types, CURSOR_OPT_PARALLEL_OK);
	const uint64 stream = GC_KM_STREAM_KMEANSPAR;
	int64		first;
	gc_status	gs = {GC_OK, ""};
	gc_ctx		ctx;
	KmdStepOut		st;
	ArrayType  *cand;
	int			m = 1;
	float	   *Cc,
			   *out;
	double	   *w;
	int			positive = 0;

	if (pick == NULL)
		elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
	gc_glue_ctx(&ctx);
	if (gc_km_random_rows(&ctx, n, 1, (uint64) seed, stream, &first, &gs) != GC_OK)
		gc_glue_report(&gs, "k-means");
	cand = kmd_fetch_rows("k-means|| seeding, its first candidate", nsp, source, n, &first, 1, d, cxt);
	kmd_run_step(&pass, step, cand, cxt, &st);
	for (int r = 1; r <= GC_KM_PAR_MAX_ROUNDS; r++)
	{
		ParamListInfo params = makeParamList(6);
		MemoryContext old;

		if ((r > GC_KM_PAR_ROUNDS && m >= k) || !(st.cost > 0.0))
			break;
		pass = KM_PASS("k-means|| seeding, round", r);
		params->params[0].value = PointerGetDatum(cand);
		params->params[0].ptype = FLOAT4ARRAYOID;
		params->params[1].value = Int64GetDatum(seed);
		params->params[1].ptype = INT8OID;
		params->params[2].value = Int32GetDatum(r);
		params->params[2].ptype = INT4OID;
		params->params[3].value = Int64GetDatum(n);
		params->params[3].ptype = INT8OID;
		params->params[4].value = Float8GetDatum(GC_KM_PAR_OVERSAMPLE * (double) k);
		params->params[4].ptype = FLOAT8OID;
		params->params[5].value = Float8GetDatum(st.cost);
		params->params[5].ptype = FLOAT8OID;
		for (int i = 0; i < 6; i++)
		{
			params->params[i].isnull = false;
			params->params[i].pflags = PARAM_FLAG_CONST;
		}
		CHECK_FOR_INTERRUPTS();
		gc_run_pass(&pass, pick, params, NULL);
		if (SPI_processed == 0)
			continue;
		if ((uint64) m + SPI_processed > (uint64) (MaxAllocSize / sizeof(float) / d))
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("k-means|| sampled too many candidates")));
		old = MemoryContextSwitchTo(cxt);
		Cc = palloc(sizeof(float) * (Size) (m + SPI_processed) * d);
		MemoryContextSwitchTo(old);
		memcpy(Cc, kmd_array_rows(cand), sizeof(float) * (Size) m * d);
		for (uint64 t = 0; t < SPI_processed; t++)
		{
			bool		isnull;
			ArrayType  *f = DatumGetArrayTypeP(SPI_getbinval(SPI_tuptable->vals[t],
															 SPI_tuptable->tupdesc, 1, &isnull));
			int			dd = d;

			(void) gc_features(f, &dd, Cc + (Size) (m + t) * d, NULL, 0);
		}
		m += (int) SPI_processed;
		SPI_freetuptable(SPI_tuptable);
		old = MemoryContextSwitchTo(cxt);
		cand = kmd_rows_array(Cc, m, d);
		MemoryContextSwitchTo(old);
		kmd_run_step(&pass, step, cand, cxt, &st);
	}

	/* the candidates weighted by their rows, and k of them by k-means++ */
	w = palloc(sizeof(double) * m);
	for (int c = 0; c < m; c++)
		positive += (w[c] = (double) st.counts[c]) > 0.0;
	if (positive < k)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("k-means|| found %d distinct candidate centres, fewer than k (%d)",
						positive, k),
				 errhint("Use init => 'random', or a smaller k.")));
	out = palloc(sizeof(float) * (Size) k * d);
	if (gc_km_init_kmeanspp_w(&ctx, kmd_array_rows(cand), m, d, k, w, (uint64) seed,
							  stream + GC_KM_PAR_REDUCE_STREAM, out, NULL, &gs) != GC_OK)
		gc_glue_report(&gs, "k-means");
	{
		MemoryContext old = MemoryContextSwitchTo(cxt);
		ArrayType  *C = kmd_rows_array(out, k, d);

		MemoryContextSwitchTo(old);
		return C;
	}
}
