/*-------------------------------------------------------------------------
 *
 * kmeans_distributed_passes.c
 *	  The passes of gpu_kmeans_distributed over its source: one Lloyd step
 *	  (kmeans_step over every row, given the centres) and the seeding's
 *	  draw of rows by their rank in id order (kmeans_rank_counts).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/params.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "common/gpuclust.h"
#include "common/ingest.h"
#include "distributed/kmeans_distributed.h"


void
kmd_run_step(const GcPass *pass, SPIPlanPtr plan, ArrayType *C,
		 MemoryContext cxt, KmdStepOut *out)
{
	ParamListInfo params = makeParamList(1);
	HeapTupleHeader r;
	bool		isnull;
	Datum		v;
	MemoryContext old;
	ArrayType  *a;
	int			nc;
	Datum	   *ev;

	CHECK_FOR_INTERRUPTS();
	params->params[0].value = PointerGetDatum(C);
	params->params[0].isnull = C == NULL;
	params->params[0].pflags = PARAM_FLAG_CONST;
	params->params[0].ptype = FLOAT4ARRAYOID;
	gc_run_pass(pass, plan, params, NULL);
	if (SPI_processed != 1)
		elog(ERROR, "kmeans_step returned %llu rows", (unsigned long long) SPI_processed);
	v = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	memset(out, 0, sizeof(*out));
	if (isnull)
	{
		out->empty = true;
		SPI_freetuptable(SPI_tuptable);
		return;
	}
	r = DatumGetHeapTupleHeader(v);
	old = MemoryContextSwitchTo(cxt);
	out->centroids = DatumGetArrayTypePCopy(GetAttributeByNum(r, 1, &isnull));
	a = DatumGetArrayTypeP(GetAttributeByNum(r, 2, &isnull));
	deconstruct_array(a, INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE,
					  &ev, NULL, &nc);
	out->k = nc;
	out->counts = palloc(sizeof(int64) * nc);
	for (int c = 0; c < nc; c++)
		out->counts[c] = DatumGetInt64(ev[c]);
	a = DatumGetArrayTypeP(GetAttributeByNum(r, 6, &isnull));
	deconstruct_array(a, INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE,
					  &ev, NULL, &nc);
	out->members = palloc(sizeof(uint64) * nc);
	for (int c = 0; c < nc; c++)
		out->members[c] = (uint64) DatumGetInt64(ev[c]);
	out->inertia = DatumGetFloat8(GetAttributeByNum(r, 3, &isnull));
	out->shift = DatumGetFloat8(GetAttributeByNum(r, 4, &isnull));
	out->n = DatumGetInt64(GetAttributeByNum(r, 5, &isnull));
	out->cost = DatumGetFloat8(GetAttributeByNum(r, 7, &isnull));
	out->reseeded = DatumGetInt32(GetAttributeByNum(r, 8, &isnull));
	MemoryContextSwitchTo(old);
	SPI_freetuptable(SPI_tuptable);
}

/*
 * The positional draw.  The rows at given positions among the source's
 * rows with features, in (id, features) order, found without reading the
 * rows out: a window's row_number() over the whole source would (Citus
 * cannot run it on the shards; its coordinator reads every id and
 * feature).  Instead the ranks narrow by id: each pass counts, with
 * kmeans_rank_counts on the shards, the rows below up to KM_RANK_PIVOTS
 * pivots spread over every id range still holding a wanted position, and
 * keeps the pieces that hold one; a range is done when it holds at most
 * KM_RANK_FETCH / m rows (m positions wanted) or one id.  One query then
 * reads the rows of the ranges left, a filter on the id that runs on the
 * shards, in (id, features) order: the rank of a row is the rows below its
 * range plus its place in it, as row_number() over (id, features) gives.
 * Pivots are spread evenly over each range's ids, so rows of evenly spread
 * ids take about log(n) / log(KM_RANK_PIVOTS / m) passes, and skewed ids
 * at most as many as halving 2^64 ids takes.
 */
#define KM_RANK_PIVOTS	1000
#define KM_RANK_FETCH	1000

/* An id range [lo, hi], below: rows with a smaller id, n: rows in it. */
typedef struct IdRange
{
	int64		lo;
	int64		hi;
	int64		below;
	int64		n;
} IdRange;

pg_noreturn static void
source_changed(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("the source query returned other rows when read again"),
			 errdetail("Seeding counts the rows by id over several passes to find the rows it draws, and the counts changed between them."),
			 errhint("Run it on data that does not change meanwhile.")));
	pg_unreachable();
}

static int
cmp_int64(const void *a, const void *b)
{
	int64		x = *(const int64 *) a;
	int64		y = *(const int64 *) b;

	return x < y ? -1 : x > y;
}

/* Runs plan (one row) with params; its first column, or NULL. */
static Datum
one_value(const GcPass *pass, SPIPlanPtr plan, ParamListInfo params,
		  bool *isnull)
{
	CHECK_FOR_INTERRUPTS();
	gc_run_pass(pass, plan, params, NULL);
	if (SPI_processed != 1)
		elog(ERROR, "a pass of seeding returned %llu rows",
			 (unsigned long long) SPI_processed);
	return SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, isnull);
}

/*
 * The k rows at positions rows[] among the n source rows with features in
 * the order of their ids (then of their features), the draws of seeding
 * what (its passes are named after it).  Not the source's own order: a
 * plan need not keep it (Citus concatenates its shards' rows, each shard
 * sorted by the source's ORDER BY), the ids' order is the same whatever
 * the plan.
 */
ArrayType *
kmd_fetch_rows(const char *what, const char *nsp, const char *source, int64 n,
		   const int64 *rows, int k, int d, MemoryContext cxt)
{
	GcPass		pass = KM_PASS(psprintf("%s, the ids' range", what), 0);
	int64	   *want = palloc(sizeof(int64) * k);
	int			m = 0;
	int64		cap;
	IdRange    *ranges;
	int			nranges = 1;
	Oid			types[1] = {INT8ARRAYOID};
	SPIPlanPtr	plan;
	bool		isnull;
	StringInfoData q;
	float	   *C = MemoryContextAllocZero(cxt, sizeof(float) * (Size) k * d);
	ArrayType  *result;
	MemoryContext old;
	int			ri;
	int64		off;

	/* the wanted positions, ascending, once each */
	memcpy(want, rows, sizeof(int64) * k);
	qsort(want, k, sizeof(int64), cmp_int64);
	for (int c = 0; c < k; c++)
		if (m == 0 || want[c] != want[m - 1])
			want[m++] = want[c];
	cap = Max(KM_RANK_FETCH / m, 1);

	/* the ids' range */
	plan = SPI_prepare_cursor(psprintf("SELECT pg_catalog.count(*), pg_catalog.min(s.id::bigint), "
									   "pg_catalog.max(s.id::bigint) "
									   "FROM %s AS s(id, f) WHERE s.f IS NOT NULL", source),
							  0, NULL, CURSOR_OPT_PARALLEL_OK);
	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
	ranges = palloc(sizeof(IdRange));
	ranges[0].below = 0;
	ranges[0].n = DatumGetInt64(one_value(&pass, plan, NULL, &isnull));
	if (ranges[0].n != n)
		source_changed();
	ranges[0].lo = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
											   SPI_tuptable->tupdesc, 2, &isnull));
	ranges[0].hi = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
											   SPI_tuptable->tupdesc, 3, &isnull));
	SPI_freetuptable(SPI_tuptable);
	SPI_freeplan(plan);

	plan = SPI_prepare_cursor(psprintf("SELECT %s.kmeans_rank_counts(s.id, $1) FROM %s AS s(id, f) "
									   "WHERE s.f IS NOT NULL", nsp, source),
							  1, types, CURSOR_OPT_PARALLEL_OK);
	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
	for (int round = 1;; round++)
	{
		int			open = 0,
					np = 0,
					nnew = 0,
					w = 0,
					j = 0;
		int64	   *pivots,
				   *counts;
		int		   *q_of = palloc(sizeof(int) * nranges);
		IdRange    *next;
		ParamListInfo params;
		ArrayType  *a;

		/* the pivots: q evenly spread over each range still too wide */
		for (int i = 0; i < nranges; i++)
			open += ranges[i].n > cap && ranges[i].lo < ranges[i].hi;
		if (open == 0)
			break;
		pivots = palloc(sizeof(int64) * Max(KM_RANK_PIVOTS, open));
		for (int i = 0; i < nranges; i++)
		{
			uint64		span = (uint64) ranges[i].hi - (uint64) ranges[i].lo;
			uint64		nq = Max(KM_RANK_PIVOTS / open, 1);

			q_of[i] = 0;
			if (ranges[i].n <= cap || span == 0)
				continue;
			nq = Min(nq, span);
			q_of[i] = (int) nq;

			/*
			 * pivot t (1..nq): lo + 1 + floor(span t / (nq + 1)), ascending
			 * in (lo, hi] as nq <= span; in two parts, as span t would
			 * overflow
			 */
			for (uint64 t = 1; t <= nq; t++)
				pivots[np++] = (int64) ((uint64) ranges[i].lo + 1 +
										span / (nq + 1) * t + span % (nq + 1) * t / (nq + 1));
		}

		pass = KM_PASS(psprintf("%s, narrowing by id", what), round);
		params = makeParamList(1);
		params->params[0].value = PointerGetDatum(gc_flat_array(INT8OID, sizeof(int64), pivots, np));
		params->params[0].isnull = false;
		params->params[0].pflags = PARAM_FLAG_CONST;
		params->params[0].ptype = INT8ARRAYOID;
		a = DatumGetArrayTypeP(one_value(&pass, plan, params, &isnull));
		if (isnull || ARR_NDIM(a) != 1 || ARR_DIMS(a)[0] != np)
			source_changed();
		counts = (int64 *) ARR_DATA_PTR(a);

		/* the pieces that hold a wanted position */
		next = palloc(sizeof(IdRange) * ((Size) nranges + np));
		for (int i = 0; i < nranges; i++)
		{
			const IdRange *o = &ranges[i];

			for (int t = 0; t <= q_of[i]; t++)
			{
				IdRange		p;
				int64		end = t < q_of[i] ? counts[j + t] : o->below + o->n;

				p.lo = t == 0 ? o->lo : pivots[j + t - 1];
				p.hi = t < q_of[i] ? pivots[j + t] - 1 : o->hi;
				p.below = t == 0 ? o->below : counts[j + t - 1];
				p.n = end - p.below;
				if (p.n < 0 || end > o->below + o->n)
					source_changed();
				while (w < m && want[w] < p.below)
					w++;
				if (w < m && want[w] < p.below + p.n)
					next[nnew++] = p;
			}
			j += q_of[i];
		}
		SPI_freetuptable(SPI_tuptable);
		ranges = next;
		nranges = nnew;
	}
	SPI_freeplan(plan);
	if (nranges == 0)
		source_changed();

	/*
	 * the rows of the ranges left (ids are numbers: the ranges are written
	 * into the query), in (id, features) order, the order their ranks count
	 */
	initStringInfo(&q);
	appendStringInfo(&q, "SELECT s.id::bigint, s.f FROM %s AS s(id, f) WHERE s.f IS NOT NULL AND (",
					 source);
	for (int i = 0; i < nranges; i++)
		appendStringInfo(&q, "%ss.id OPERATOR(pg_catalog.>=) '" INT64_FORMAT "'::bigint"
						 " AND s.id OPERATOR(pg_catalog.<=) '" INT64_FORMAT "'::bigint",
						 i > 0 ? " OR " : "", ranges[i].lo, ranges[i].hi);
	appendStringInfoString(&q, ") ORDER BY s.id, s.f");
	plan = SPI_prepare_cursor(q.data, 0, NULL, CURSOR_OPT_PARALLEL_OK);
	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
	pass = KM_PASS(psprintf("%s, the rows", what), 0);
	CHECK_FOR_INTERRUPTS();
	gc_run_pass(&pass, plan, NULL, NULL);
	ri = 0;
	off = 0;
	for (uint64 t = 0; t < SPI_processed; t++)
	{
		int64		id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[t],
													 SPI_tuptable->tupdesc, 1, &isnull));
		int64		o;

		/* rows in id order, ranges too: each range exactly its count */
		while (ri < nranges && id > ranges[ri].hi)
		{
			if (off != ranges[ri].n)
				source_changed();
			ri++;
			off = 0;
		}
		if (ri == nranges || id < ranges[ri].lo || off == ranges[ri].n)
			source_changed();
		o = ranges[ri].below + off++;
		for (int c = 0; c < k; c++)
			if (rows[c] == o)
			{
				ArrayType  *f = DatumGetArrayTypeP(SPI_getbinval(SPI_tuptable->vals[t],
																 SPI_tuptable->tupdesc, 2, &isnull));
				int			dd = d;

				/* the centre of every draw of that row */
				(void) gc_features(f, &dd, C + (Size) c * d, "source row", o + 1);
			}
	}
	if (nranges > 0 && (ri != nranges - 1 || off != ranges[ri].n))
		source_changed();
	SPI_freetuptable(SPI_tuptable);
	SPI_freeplan(plan);
	old = MemoryContextSwitchTo(cxt);
	result = kmd_rows_array(C, k, d);
	MemoryContextSwitchTo(old);
	return result;
}
