/*-------------------------------------------------------------------------
 *
 * kmeans_rank_counts.c
 *	  kmeans_rank_counts(id, pivots) -> bigint[]: per pivot, the rows whose
 *	  id is below it, the ranks the distributed seeding draws rows by.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "utils/array.h"
#include "utils/memutils.h"

#include "distributed/passes.h"

PG_FUNCTION_INFO_V1(kmeans_rank_counts_transfn);
PG_FUNCTION_INFO_V1(kmeans_rank_counts_combine);
PG_FUNCTION_INFO_V1(kmeans_rank_counts_final);


/*
 * The positional draw of the distributed seeding (kmd_fetch_rows) needs the
 * ranks of ids among the rows: for each pivot, the rows whose id is below
 * it.  The state is an int8[], a real type, so that Citus runs the partial
 * aggregate on the shards and ships a few numbers back (as dbscan_bounds'
 * float8[]): {pivots[P], bins[P + 1]}, bin j counting the rows with j
 * pivots at or below their id, so that a row costs one binary search; the
 * final function adds the bins up.  The pivots are kept in the state so
 * that two parts over other pivots are an error, not a wrong sum.
 */

/* The length of an int8[] (0 when empty); ERROR unless flat, without NULLs. */
static int
int8_len(ArrayType *a, const char *what)
{
	if (ARR_NDIM(a) > 1 || ARR_HASNULL(a) || ARR_ELEMTYPE(a) != INT8OID)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be a one-dimensional bigint[] without NULLs", what)));
	return ARR_NDIM(a) == 0 ? 0 : ARR_DIMS(a)[0];
}

/* ERROR unless the n pivots p are in ascending order (ties allowed). */
static void
check_pivots(const int64 *p, int n)
{
	for (int j = 1; j < n; j++)
		if (p[j] < p[j - 1])
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("kmeans_rank_counts needs its pivots in ascending order"),
					 errdetail("Pivot %d is %lld, after %lld.", j + 1,
							   (long long) p[j], (long long) p[j - 1])));
}

/* The P of a state {pivots[P], bins[P + 1]}; ERROR unless it is one. */
static int
rank_state_p(ArrayType *a)
{
	int			len = int8_len(a, "a state of kmeans_rank_counts");

	if (len % 2 != 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("malformed state of kmeans_rank_counts"),
				 errdetail("A state is {pivots[P], bins[P + 1]}, an int8[] of odd length.")));
	check_pivots((const int64 *) ARR_DATA_PTR(a), len / 2);
	return len / 2;
}

/* ERROR unless the pivots p[np] are the state's (P of them, first). */
static void
same_pivots(const int64 *state, int P, const int64 *p, int np)
{
	if (np != P || memcmp(state, p, sizeof(int64) * P) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("kmeans_rank_counts needs the same pivots in every row")));
}

Datum
kmeans_rank_counts_transfn(PG_FUNCTION_ARGS)
{
	ArrayType  *state = PG_ARGISNULL(0) ? NULL : PG_GETARG_ARRAYTYPE_P(0);
	ArrayType  *pa;
	const int64 *p;
	int64	   *v;
	int64		id;
	int			P,
				lo,
				hi;

	if (!AggCheckCallContext(fcinfo, NULL))
		elog(ERROR, "kmeans_rank_counts_transfn called in non-aggregate context");
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("kmeans_rank_counts got a NULL id"),
				 errdetail("A rank among the rows needs every row's id.")));
	if (PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("the pivots of kmeans_rank_counts must not be NULL")));
	id = PG_GETARG_INT64(1);
	pa = PG_GETARG_ARRAYTYPE_P(2);
	P = int8_len(pa, "the pivots of kmeans_rank_counts");
	p = (const int64 *) ARR_DATA_PTR(pa);
	if (state == NULL)
	{
		/*
		 * the first row: a new state, in the per-row context (the executor
		 * copies it into the aggregate's)
		 */
		if ((Size) P > (MaxAllocSize - ARR_OVERHEAD_NONULLS(1)) / (2 * sizeof(int64)) - 1)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("kmeans_rank_counts got too many pivots (%d)", P)));
		check_pivots(p, P);
		state = gc_flat_array(INT8OID, sizeof(int64), NULL, 2 * P + 1);
		memcpy(ARR_DATA_PTR(state), p, sizeof(int64) * P);
	}
	else
	{
		/* the state is this aggregate's own, checked when it was made */
		same_pivots((const int64 *) ARR_DATA_PTR(state),
					(ARR_DIMS(state)[0] - 1) / 2, p, P);
	}

	/* the row's bin: how many pivots are at or below its id */
	lo = 0;
	hi = P;
	while (lo < hi)
	{
		int			mid = lo + (hi - lo) / 2;

		if (p[mid] <= id)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* changed in place: the aggregate's own, or the new one */
	v = (int64 *) ARR_DATA_PTR(state);
	v[P + lo]++;
	PG_RETURN_ARRAYTYPE_P(state);
}

/* b's bins added to a's, over the same pivots. */
Datum
kmeans_rank_counts_combine(PG_FUNCTION_ARGS)
{
	ArrayType  *a = PG_ARGISNULL(0) ? NULL : PG_GETARG_ARRAYTYPE_P(0);
	ArrayType  *b = PG_ARGISNULL(1) ? NULL : PG_GETARG_ARRAYTYPE_P(1);
	int			P;
	int64	   *va;
	const int64 *vb;

	if (b == NULL)
	{
		if (a == NULL)
			PG_RETURN_NULL();
		(void) rank_state_p(a);
		PG_RETURN_ARRAYTYPE_P(a);
	}
	P = rank_state_p(b);
	if (a == NULL)
		PG_RETURN_ARRAYTYPE_P(b);	/* the executor copies it to its context */
	same_pivots((const int64 *) ARR_DATA_PTR(a), rank_state_p(a),
				(const int64 *) ARR_DATA_PTR(b), P);
	a = gc_agg_writable_array(fcinfo, a);
	va = (int64 *) ARR_DATA_PTR(a);
	vb = (const int64 *) ARR_DATA_PTR(b);
	for (int j = 0; j <= P; j++)
		va[P + j] += vb[P + j];
	PG_RETURN_ARRAYTYPE_P(a);
}

/* The counts below each pivot: the bins added up; NULL over no rows. */
Datum
kmeans_rank_counts_final(PG_FUNCTION_ARGS)
{
	ArrayType  *s;
	const int64 *v;
	int64	   *counts;
	int64		below = 0;
	int			P;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	s = PG_GETARG_ARRAYTYPE_P(0);
	P = rank_state_p(s);
	v = (const int64 *) ARR_DATA_PTR(s);
	counts = palloc(sizeof(int64) * Max(P, 1));
	for (int j = 0; j < P; j++)
		counts[j] = below += v[P + j];
	PG_RETURN_ARRAYTYPE_P(gc_flat_array(INT8OID, sizeof(int64), counts, P));
}
