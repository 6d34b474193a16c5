/*-------------------------------------------------------------------------
 *
 * dbscan_partitioned_agg.c
 *	  The building blocks of gpu_dbscan_distributed (the method:
 *	  core/dbscan/dbscan.h), each one runnable where the rows are: in
 *	  parallel workers, and on the nodes of a Citus cluster.
 *
 *	  dbscan_bounds(features, id) -> float8[]
 *		{n, lo_1 .. lo_d, hi_1 .. hi_d} of the rows with features, as real
 *	  dbscan_histogram(features, dim, lo, hi, bins) -> float8[]
 *		counts[bins] of feature dim over [lo, hi] (gc_dbscan_bin)
 *	  dbscan_partitions(features, plan) -> SETOF (part, home, shared, x)
 *		the partitions of a plan {d, dim, halo, cut_1 .. cut_(P-1)} that
 *		hold a row (gc_dbscan_span)
 *	  dbscan_partition(part, id, x, home, shared, eps, min_pts, device)
 *		-> bytea, one partition's local DBSCAN and its summary
 *
 * dbscan_bounds and dbscan_histogram keep their state in a float8[], a
 * real type, so that Citus pushes the partial aggregate down to the shards
 * (it ships a state's text form, and float8's is exact); the transition
 * and combine functions change it in place in the aggregate's context, as
 * float8_accum and float8_combine do (a combine function called directly
 * changes a copy).
 *
 * dbscan_partition's state is internal: the rows of one partition, in
 * growing huge arrays in the aggregate's context (more than 1 GB works);
 * parallel query moves a worker's part of it as a bytea (serialize /
 * deserialize; each part is then limited to 1 GB).  On Citus the driver
 * first moves the rows into a table distributed by partition, so that the
 * whole aggregate of a partition runs on one node.  Its final function
 * sorts the rows by id, clusters them with the single-node DBSCAN
 * (gc_glue_run_dbscan: this node's GPU when it has one, its CPUs
 * otherwise, with gpu_dbscan's fallback), and returns the partition's
 * summary (gc_dbscan_summarize), which the coordinator merges.
 *
 * Every features array is read by gc_features, the one check of a row's
 * features; eps, min_pts and device are read by gpu_dbscan's own reader
 * (gc_glue_dbscan_values), so bad ones get gpu_dbscan's messages.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/tuplestore.h"

#include "distributed/passes.h"
#include "common/shared_memory.h"
#include "common/progress.h"
#include "dbscan/dbscan_glue.h"
#include "core/gpuclust_core.h"

PG_FUNCTION_INFO_V1(dbscan_bounds_transfn);
PG_FUNCTION_INFO_V1(dbscan_bounds_combine);
PG_FUNCTION_INFO_V1(dbscan_histogram_transfn);
PG_FUNCTION_INFO_V1(dbscan_histogram_combine);
PG_FUNCTION_INFO_V1(dbscan_partitions);
PG_FUNCTION_INFO_V1(dbscan_partition_transfn);
PG_FUNCTION_INFO_V1(dbscan_partition_combine);
PG_FUNCTION_INFO_V1(dbscan_partition_serialize);
PG_FUNCTION_INFO_V1(dbscan_partition_deserialize);
PG_FUNCTION_INFO_V1(dbscan_partition_final);

/* rows between interrupt checks in the final function's loops */
#define DBP_CHECK_ROWS		65536

/* features of at most this many dimensions are converted on the stack */
#define DBP_STACK_D			128

/* gc_ingest's error for a NULL id: every source row needs one */
pg_noreturn static void
null_id(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
			 errmsg("source query returned a NULL id"),
			 errdetail("gpu_dbscan_distributed names every row by its id.")));
	pg_unreachable();
}

/* ---------------------------------------------------------------------
 * float8[] states (dbscan_bounds, dbscan_histogram)
 * --------------------------------------------------------------------- */

/*
 * The float8[] state argument i (NULL when SQL NULL), checked: a state
 * another node sent (Citus: its text form) is read back as any array, so
 * a malformed one is an error, not a read out of bounds.
 */
static ArrayType *
float8_state(FunctionCallInfo fcinfo, int i, const char *agg)
{
	ArrayType  *a;

	if (PG_ARGISNULL(i))
		return NULL;
	a = PG_GETARG_ARRAYTYPE_P(i);
	if (ARR_NDIM(a) != 1 || ARR_HASNULL(a) || ARR_ELEMTYPE(a) != FLOAT8OID ||
		ARR_DIMS(a)[0] < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("malformed state of %s", agg),
				 errdetail("A state is a one-dimensional float8[] without NULLs.")));
	return a;
}

/* The length of a checked float8[] state. */
static inline int
state_len(ArrayType *a)
{
	return ARR_DIMS(a)[0];
}

/* ---------------------------------------------------------------------
 * dbscan_bounds
 * --------------------------------------------------------------------- */

/* The d of a bounds state {n, lo[d], hi[d]}; ERROR unless it is one. */
static int
bounds_d(ArrayType *a)
{
	int			len = state_len(a);
	const float8 *v = (const float8 *) ARR_DATA_PTR(a);

	if (len < 3 || len % 2 != 1 || !(v[0] >= 1.0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("malformed state of dbscan_bounds"),
				 errdetail("A state is {n, lo_1 .. lo_d, hi_1 .. hi_d} with n >= 1.")));
	return (len - 1) / 2;
}

Datum
dbscan_bounds_transfn(PG_FUNCTION_ARGS)
{
	ArrayType  *state;
	ArrayType  *arr;
	int64		id;
	int			d = 0;
	float		xbuf[DBP_STACK_D];
	float	   *x;
	float8	   *v;

	if (!AggCheckCallContext(fcinfo, NULL))
		elog(ERROR, "dbscan_bounds_transfn called in non-aggregate context");
	state = float8_state(fcinfo, 0, "dbscan_bounds");
	if (PG_ARGISNULL(2))
		null_id();
	id = PG_GETARG_INT64(2);
	if (PG_ARGISNULL(1))
	{
		/* NULL features: not clustered, not counted */
		if (state == NULL)
			PG_RETURN_NULL();
		PG_RETURN_ARRAYTYPE_P(state);
	}
	arr = PG_GETARG_ARRAYTYPE_P(1);
	if (state != NULL)
		d = bounds_d(state);
	else
		(void) gc_features(arr, &d, NULL, "row with id", id);
	x = d <= DBP_STACK_D ? xbuf : palloc(sizeof(float) * d);
	/* the row checked and converted; a d other than the state's names it */
	(void) gc_features(arr, &d, x, "row with id", id);

	if (state == NULL)
	{
		/*
		 * the first row: a new state, in the per-row context (the executor
		 * copies it into the aggregate's)
		 */
		state = gc_flat_array(FLOAT8OID, sizeof(float8), NULL, 1 + 2 * d);
		v = (float8 *) ARR_DATA_PTR(state);
		v[0] = 1.0;
		for (int j = 0; j < d; j++)
			v[1 + j] = v[1 + d + j] = (float8) x[j];
		PG_RETURN_ARRAYTYPE_P(state);
	}

	/* then changed in place: it lives in the aggregate's context */
	v = (float8 *) ARR_DATA_PTR(state);
	v[0] += 1.0;
	for (int j = 0; j < d; j++)
	{
		float8		xj = (float8) x[j];

		if (xj < v[1 + j])
			v[1 + j] = xj;
		if (xj > v[1 + d + j])
			v[1 + d + j] = xj;
	}
	PG_RETURN_ARRAYTYPE_P(state);
}

/* b's count and bounds added to a's. */
Datum
dbscan_bounds_combine(PG_FUNCTION_ARGS)
{
	ArrayType  *a,
			   *b;
	int			da,
				db;
	float8	   *va;
	const float8 *vb;

	a = float8_state(fcinfo, 0, "dbscan_bounds");
	b = float8_state(fcinfo, 1, "dbscan_bounds");
	if (b == NULL)
	{
		if (a == NULL)
			PG_RETURN_NULL();
		PG_RETURN_ARRAYTYPE_P(a);
	}
	db = bounds_d(b);
	if (a == NULL)
		PG_RETURN_ARRAYTYPE_P(b);	/* the executor copies it to its context */
	da = bounds_d(a);
	if (da != db)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("features have %d elements in one part of dbscan_bounds and %d in another",
						db, da),
				 errdetail("All rows must have as many features as the first row with features.")));
	a = gc_agg_writable_array(fcinfo, a);
	va = (float8 *) ARR_DATA_PTR(a);
	vb = (const float8 *) ARR_DATA_PTR(b);
	va[0] += vb[0];
	for (int j = 0; j < da; j++)
	{
		va[1 + j] = Min(va[1 + j], vb[1 + j]);
		va[1 + da + j] = Max(va[1 + da + j], vb[1 + da + j]);
	}
	PG_RETURN_ARRAYTYPE_P(a);
}

/* ---------------------------------------------------------------------
 * dbscan_histogram
 * --------------------------------------------------------------------- */

Datum
dbscan_histogram_transfn(PG_FUNCTION_ARGS)
{
	ArrayType  *state;
	ArrayType  *arr;
	int			dim,
				bins,
				d = 0;
	float8		lo,
				hi;
	float		xbuf[DBP_STACK_D];
	float	   *x;

	if (!AggCheckCallContext(fcinfo, NULL))
		elog(ERROR, "dbscan_histogram_transfn called in non-aggregate context");
	state = float8_state(fcinfo, 0, "dbscan_histogram");
	gc_driver_not_null(fcinfo, 2, "dim");
	gc_driver_not_null(fcinfo, 3, "lo");
	gc_driver_not_null(fcinfo, 4, "hi");
	gc_driver_not_null(fcinfo, 5, "bins");
	dim = PG_GETARG_INT32(2);
	lo = PG_GETARG_FLOAT8(3);
	hi = PG_GETARG_FLOAT8(4);
	bins = PG_GETARG_INT32(5);
	if (bins < 1 || bins > GC_DBP_MAX_BINS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("bins must be between 1 and %d, got %d", GC_DBP_MAX_BINS, bins)));
	if (!isfinite(lo) || !isfinite(hi) || !(lo <= hi))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the histogram's range must be finite with lo <= hi, got [%g, %g]", lo, hi)));
	if (dim < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("dim must be at least 0, got %d", dim),
				 errdetail("dim is the 0-based index of a feature.")));
	if (state != NULL && state_len(state) != bins)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("dbscan_histogram needs the same bins in every row"),
				 errdetail("A state has %d bins, this row asks for %d.", state_len(state), bins)));
	if (PG_ARGISNULL(1))
	{
		if (state == NULL)
			PG_RETURN_NULL();
		PG_RETURN_ARRAYTYPE_P(state);
	}
	arr = PG_GETARG_ARRAYTYPE_P(1);
	(void) gc_features(arr, &d, NULL, NULL, 0);
	if (dim >= d)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("dim %d is out of range for features of %d elements", dim, d),
				 errdetail("dim is the 0-based index of a feature.")));
	x = d <= DBP_STACK_D ? xbuf : palloc(sizeof(float) * d);
	(void) gc_features(arr, &d, x, NULL, 0);

	if (state == NULL)
		state = gc_flat_array(FLOAT8OID, sizeof(float8), NULL, bins);		/* copied by the executor */
	((float8 *) ARR_DATA_PTR(state))[gc_dbscan_bin((double) x[dim], lo, hi, bins)] += 1.0;
	PG_RETURN_ARRAYTYPE_P(state);
}

/* b's counts added to a's. */
Datum
dbscan_histogram_combine(PG_FUNCTION_ARGS)
{
	ArrayType  *a,
			   *b;
	float8	   *va;
	const float8 *vb;

	a = float8_state(fcinfo, 0, "dbscan_histogram");
	b = float8_state(fcinfo, 1, "dbscan_histogram");
	if (b == NULL)
	{
		if (a == NULL)
			PG_RETURN_NULL();
		PG_RETURN_ARRAYTYPE_P(a);
	}
	if (a == NULL)
		PG_RETURN_ARRAYTYPE_P(b);
	if (state_len(a) != state_len(b))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("dbscan_histogram needs the same bins in every row"),
				 errdetail("One part has %d bins, another %d.", state_len(b), state_len(a))));
	a = gc_agg_writable_array(fcinfo, a);
	va = (float8 *) ARR_DATA_PTR(a);
	vb = (const float8 *) ARR_DATA_PTR(b);
	for (int i = 0; i < state_len(a); i++)
		va[i] += vb[i];
	PG_RETURN_ARRAYTYPE_P(a);
}

/* ---------------------------------------------------------------------
 * dbscan_partitions
 * --------------------------------------------------------------------- */

/*
 * What dbscan_partitions keeps between rows (fn_extra, in fn_mcxt): the
 * plan read and checked once while its argument stays the same (a constant
 * or a query parameter, as in the driver's query, is compared never; any
 * other expression by value in each row), and the result's row type.
 */
typedef struct PartitionsCache
{
	TupleDesc	tupdesc;
	bool		plan_stable;	/* plan is a Const or an extern Param */
	ArrayType  *plan_arr;		/* the plan read, a copy; NULL before */
	gc_dbscan_plan plan;		/* its cuts point into plan_arr */
} PartitionsCache;

/* *v as an int when it is an integer in [lo, hi]; else false */
static bool
plan_int(float8 v, int lo, int hi, int *out)
{
	if (!(v >= (float8) lo && v <= (float8) hi) || v != floor(v))
		return false;
	*out = (int) v;
	return true;
}

pg_noreturn static void
bad_plan(const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid plan for dbscan_partitions: %s", why),
			 errdetail("A plan is {d, dim, halo, cut_1 .. cut_(P-1)}: the features, the 0-based split dimension, the halo (gpu_dbscan_distributed's, for its eps) and P - 1 increasing cuts.")));
	pg_unreachable();
}

/* The plan arr, read and checked (gc_dbscan_plan_check) into c. */
static void
read_plan(PartitionsCache *c, ArrayType *arr, MemoryContext cxt)
{
	const float8 *v;
	int			len;
	gc_status	st = {GC_OK, ""};

	if (ARR_NDIM(arr) != 1 || ARR_HASNULL(arr) || ARR_ELEMTYPE(arr) != FLOAT8OID)
		bad_plan("it must be a one-dimensional float8[] without NULLs");
	len = ARR_DIMS(arr)[0];
	if (len < 3)
		bad_plan(psprintf("it has %d elements, fewer than 3", len));
	if (len - 2 > GC_DBP_MAX_PARTS)
		bad_plan(psprintf("it has %d partitions, more than %d", len - 2, GC_DBP_MAX_PARTS));
	v = (const float8 *) ARR_DATA_PTR(arr);
	if (c->plan_arr != NULL)
		pfree(c->plan_arr);
	c->plan_arr = NULL;
	if (!plan_int(v[0], 1, INT_MAX, &c->plan.d))
		bad_plan(psprintf("d must be an integer of at least 1, got %g", v[0]));
	if (!plan_int(v[1], 0, INT_MAX, &c->plan.dim))
		bad_plan(psprintf("dim must be an integer of at least 0, got %g", v[1]));
	c->plan.halo = v[2];
	c->plan.parts = len - 2;
	c->plan.cuts = v + 3;
	if (gc_dbscan_plan_check(&c->plan, &st) != GC_OK)
		gc_glue_report(&st, "dbscan_partitions");
	/* kept once checked: a failed plan is read again next time */
	c->plan_arr = (ArrayType *) MemoryContextAlloc(cxt, VARSIZE(arr));
	memcpy(c->plan_arr, arr, VARSIZE(arr));
	c->plan.cuts = (const float8 *) ARR_DATA_PTR(c->plan_arr) + 3;
}

/*
 * Materialize mode: a row's few result rows go into a tuplestore of their
 * own, which a FunctionScan would build for a value-per-call function all
 * the same, and there is no state to reset when a caller stops early.
 */
Datum
dbscan_partitions(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	PartitionsCache *c = (PartitionsCache *) fcinfo->flinfo->fn_extra;
	MemoryContext old;
	Tuplestorestate *ts;
	ArrayType  *plan_arr;
	Datum		values[4];
	bool		nulls[4] = {false, false, false, false};

	if (rsinfo == NULL || !IsA(rsinfo, ReturnSetInfo) ||
		!(rsinfo->allowedModes & SFRM_Materialize))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("set-valued function called in context that cannot accept a set")));
	gc_driver_not_null(fcinfo, 1, "plan");

	if (c == NULL)
	{
		TupleDesc	tupdesc;

		old = MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);
		c = palloc0(sizeof(PartitionsCache));
		if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
			elog(ERROR, "return type of dbscan_partitions must be a row type");
		c->tupdesc = BlessTupleDesc(CreateTupleDescCopy(tupdesc));
		c->plan_stable = get_fn_expr_arg_stable(fcinfo->flinfo, 1);
		MemoryContextSwitchTo(old);
		fcinfo->flinfo->fn_extra = c;
	}
	if (c->plan_arr == NULL || !c->plan_stable)
	{
		plan_arr = PG_GETARG_ARRAYTYPE_P(1);
		if (c->plan_arr == NULL || VARSIZE(plan_arr) != VARSIZE(c->plan_arr) ||
			memcmp(plan_arr, c->plan_arr, VARSIZE(plan_arr)) != 0)
			read_plan(c, plan_arr, fcinfo->flinfo->fn_mcxt);
	}

	old = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
	ts = tuplestore_begin_heap(false, false, work_mem);
	MemoryContextSwitchTo(old);
	rsinfo->returnMode = SFRM_Materialize;
	rsinfo->setResult = ts;
	rsinfo->setDesc = NULL;		/* the declared row type: c->tupdesc */

	if (PG_ARGISNULL(0))
	{
		/* not clustered: a home row of partition 0, for its NULL label */
		values[0] = Int32GetDatum(0);
		values[1] = Int32GetDatum(0);
		values[2] = BoolGetDatum(false);
		nulls[3] = true;
		tuplestore_putvalues(ts, c->tupdesc, values, nulls);
	}
	else
	{
		ArrayType  *arr = PG_GETARG_ARRAYTYPE_P(0);
		const gc_dbscan_plan *p = &c->plan;
		float		xbuf[DBP_STACK_D];
		float	   *x;
		int			d = p->d;
		int32		home,
					first,
					last;

		if (ARR_NDIM(arr) == 1 && ARR_DIMS(arr)[0] != p->d)
			ereport(ERROR,
					(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
					 errmsg("features have %d elements, but the plan of dbscan_partitions is for %d",
							ARR_DIMS(arr)[0], p->d),
					 errdetail("The plan was made from the source query's rows in an earlier pass: the rows changed since, or the row does not belong to the plan's source."),
					 errhint("Run gpu_dbscan_distributed on data that does not change meanwhile.")));
		if (ARR_ELEMTYPE(arr) == FLOAT4OID)
		{
			/* checked only: the row's real[] is its own x */
			(void) gc_features(arr, &d, NULL, NULL, 0);
			x = (float *) ARR_DATA_PTR(arr);
			values[3] = PointerGetDatum(arr);
		}
		else
		{
			x = d <= DBP_STACK_D ? xbuf : palloc(sizeof(float) * d);
			(void) gc_features(arr, &d, x, NULL, 0);
			values[3] = PointerGetDatum(gc_flat_array(FLOAT4OID, sizeof(float), x, d));
		}
		gc_dbscan_span(p, x[p->dim], &home, &first, &last);
		values[1] = Int32GetDatum(home);
		values[2] = BoolGetDatum(first < last);
		for (int32 part = first; part <= last; part++)
		{
			values[0] = Int32GetDatum(part);
			tuplestore_putvalues(ts, c->tupdesc, values, nulls);
		}
	}
	return (Datum) 0;
}

/* ---------------------------------------------------------------------
 * dbscan_partition: the aggregate's state
 * --------------------------------------------------------------------- */

/*
 * The rows of one partition: n rows with features (ids, home, shared, X
 * n x d float32, in the order they came) and nf without (nf_ids), in
 * huge arrays of cxt, grown by doubling.  eps, min_pts and device as the
 * first row gave them (device_len -1: NULL), and as gpu_dbscan's reader
 * read them.  deserialized: made by the deserialize function for one
 * combine call, which may take it over or free it.
 */
typedef struct DbpState
{
	MemoryContext cxt;
	int32		part;
	int			d;				/* 0 until a row with features */
	double		eps;
	int32		min_pts;
	int			device_len;		/* -1: NULL */
	char	   *device;			/* device_len bytes */
	gc_dbscan_params params;
	gc_device	requested;
	bool		deserialized;
	int64		n;
	int64		cap;
	int64	   *ids;
	int32	   *home;
	uint8	   *shared;
	float	   *X;				/* NULL until d is known */
	int64		nf;
	int64		nf_cap;
	int64	   *nf_ids;
} DbpState;

/*
 * eps, min_pts and device (device_len -1: NULL) read as gpu_dbscan reads
 * them, with the same checks and messages, and the metric and algorithm
 * the method is made for (gc_glue_dbscan_values): Euclidean, union-find.
 */
static void
dbp_read_params(DbpState *s)
{
	gc_glue_dbscan_values(Float8GetDatum(s->eps), Int32GetDatum(s->min_pts),
						  s->device_len < 0 ? (Datum) 0 :
						  PointerGetDatum(cstring_to_text_with_len(s->device, s->device_len)),
						  s->device_len < 0, &s->params, &s->requested);
}

/* A new state in cxt, for partition part and the given parameters. */
static DbpState *
dbp_new(MemoryContext cxt, int32 part, double eps, int32 min_pts,
		const char *device, int device_len)
{
	DbpState   *s = MemoryContextAllocZero(cxt, sizeof(DbpState));

	s->cxt = cxt;
	s->part = part;
	s->eps = eps;
	s->min_pts = min_pts;
	s->device_len = device_len;
	if (device_len >= 0)
	{
		s->device = MemoryContextAlloc(cxt, device_len + 1);
		memcpy(s->device, device, device_len);
		s->device[device_len] = '\0';
	}
	dbp_read_params(s);
	return s;
}

pg_noreturn static void
params_differ(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("dbscan_partition needs the same eps, min_pts and device in every row"),
			 errdetail("One aggregate is one partition's DBSCAN with one set of parameters.")));
	pg_unreachable();
}

pg_noreturn static void
parts_differ(int32 a, int32 b)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("dbscan_partition got rows of partitions %d and %d in one group", a, b),
			 errdetail("One aggregate clusters one partition: GROUP BY the partition.")));
	pg_unreachable();
}

/* ERROR unless b's parameters are a's */
static void
same_params(const DbpState *a, double eps, int32 min_pts, const char *device,
			int device_len)
{
	if (a->eps != eps || a->min_pts != min_pts || a->device_len != device_len ||
		(device_len > 0 && memcmp(a->device, device, device_len) != 0))
		params_differ();
}

static void
same_d(const DbpState *a, const DbpState *b)
{
	if (a->d != 0 && b->d != 0 && a->d != b->d)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("features have %d elements in one part of dbscan_partition and %d in another",
						b->d, a->d),
				 errdetail("All rows must have as many features as the first row with features.")));
}

/* n elements of size bytes, in cxt, huge; ERROR beyond MaxAllocHugeSize */
static void *
grow_array(MemoryContext cxt, void *p, int64 n, Size size)
{
	if (n > (int64) (MaxAllocHugeSize / size))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a partition of dbscan_partition exceeds the maximum size of %zu bytes",
						(Size) MaxAllocHugeSize),
				 errhint("Use more partitions.")));
	return p == NULL ? MemoryContextAllocHuge(cxt, (Size) n * size) :
		repalloc_huge(p, (Size) n * size);
}

/* Room for need rows with features (X too once d is known). */
static void
dbp_reserve(DbpState *s, int64 need)
{
	int64		cap;

	if (need <= s->cap && (s->X != NULL || s->d == 0))
		return;
	cap = Max(need, Max(s->cap * 2, (int64) 1024));
	s->ids = grow_array(s->cxt, s->ids, cap, sizeof(int64));
	s->home = grow_array(s->cxt, s->home, cap, sizeof(int32));
	s->shared = grow_array(s->cxt, s->shared, cap, sizeof(uint8));
	if (s->d > 0)
		s->X = grow_array(s->cxt, s->X, cap, sizeof(float) * (Size) s->d);
	s->cap = cap;
}

static void
dbp_reserve_nf(DbpState *s, int64 need)
{
	int64		cap;

	if (need <= s->nf_cap)
		return;
	cap = Max(need, Max(s->nf_cap * 2, (int64) 64));
	s->nf_ids = grow_array(s->cxt, s->nf_ids, cap, sizeof(int64));
	s->nf_cap = cap;
}

/* b's rows appended to a's (the same partition, parameters and d). */
static void
dbp_append(DbpState *a, const DbpState *b)
{
	if (b->n > 0)
	{
		if (a->d == 0)
			a->d = b->d;
		dbp_reserve(a, a->n + b->n);
		memcpy(a->ids + a->n, b->ids, sizeof(int64) * b->n);
		memcpy(a->home + a->n, b->home, sizeof(int32) * b->n);
		memcpy(a->shared + a->n, b->shared, sizeof(uint8) * b->n);
		memcpy(a->X + (Size) a->n * a->d, b->X, sizeof(float) * (Size) b->n * b->d);
		a->n += b->n;
	}
	if (b->nf > 0)
	{
		dbp_reserve_nf(a, a->nf + b->nf);
		memcpy(a->nf_ids + a->nf, b->nf_ids, sizeof(int64) * b->nf);
		a->nf += b->nf;
	}
}

static void
dbp_free(DbpState *s)
{
	if (s->ids)
		pfree(s->ids);
	if (s->home)
		pfree(s->home);
	if (s->shared)
		pfree(s->shared);
	if (s->X)
		pfree(s->X);
	if (s->nf_ids)
		pfree(s->nf_ids);
	if (s->device)
		pfree(s->device);
	pfree(s);
}

/* arguments of dbscan_partition(part, id, x, home, shared, eps, min_pts, device) */
enum
{
	DBP_STATE = 0,
	DBP_PART,
	DBP_ID,
	DBP_X,
	DBP_HOME,
	DBP_SHARED,
	DBP_EPS,
	DBP_MIN_PTS,
	DBP_DEVICE
};

Datum
dbscan_partition_transfn(PG_FUNCTION_ARGS)
{
	MemoryContext aggcxt;
	DbpState   *s;
	int32		part;
	int64		id;
	double		eps;
	int32		min_pts;
	text	   *dev = NULL;
	const char *device = NULL;
	int			device_len = -1;
	ArrayType  *arr;

	if (!AggCheckCallContext(fcinfo, &aggcxt))
		elog(ERROR, "dbscan_partition_transfn called in non-aggregate context");
	s = PG_ARGISNULL(DBP_STATE) ? NULL : (DbpState *) PG_GETARG_POINTER(DBP_STATE);
	gc_driver_not_null(fcinfo, DBP_PART, "part");
	if (PG_ARGISNULL(DBP_ID))
		null_id();
	part = PG_GETARG_INT32(DBP_PART);
	id = PG_GETARG_INT64(DBP_ID);

	/* the parameters: read once, then only compared */
	gc_driver_not_null(fcinfo, DBP_EPS, "eps");
	gc_driver_not_null(fcinfo, DBP_MIN_PTS, "min_pts");
	eps = PG_GETARG_FLOAT8(DBP_EPS);
	min_pts = PG_GETARG_INT32(DBP_MIN_PTS);
	if (!PG_ARGISNULL(DBP_DEVICE))
	{
		dev = PG_GETARG_TEXT_PP(DBP_DEVICE);
		device = VARDATA_ANY(dev);
		device_len = VARSIZE_ANY_EXHDR(dev);
	}
	if (s == NULL)
	{
		if (part < 0 || part >= GC_DBP_MAX_PARTS)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("partition %d is out of range", part),
					 errdetail("Partitions are numbered 0 to %d.", GC_DBP_MAX_PARTS - 1)));
		s = dbp_new(aggcxt, part, eps, min_pts, device, device_len);
	}
	else
	{
		if (part != s->part)
			parts_differ(s->part, part);
		same_params(s, eps, min_pts, device, device_len);
	}

	if (PG_ARGISNULL(DBP_X))
	{
		/* no features: a home row of its partition, with no label */
		dbp_reserve_nf(s, s->nf + 1);
		s->nf_ids[s->nf++] = id;
		PG_RETURN_POINTER(s);
	}
	gc_driver_not_null(fcinfo, DBP_HOME, "home");
	gc_driver_not_null(fcinfo, DBP_SHARED, "shared");
	if (PG_GETARG_INT32(DBP_HOME) < 0 || PG_GETARG_INT32(DBP_HOME) >= GC_DBP_MAX_PARTS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("home partition %d of row with id %lld is out of range",
						PG_GETARG_INT32(DBP_HOME), (long long) id),
				 errdetail("Partitions are numbered 0 to %d.", GC_DBP_MAX_PARTS - 1)));
	if (PG_GETARG_INT32(DBP_HOME) != part && !PG_GETARG_BOOL(DBP_SHARED))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("row with id %lld of partition %d is held by partition %d but not marked shared",
						(long long) id, PG_GETARG_INT32(DBP_HOME), part),
				 errdetail("A row held by a partition other than its home is held by more than one.")));
	arr = PG_GETARG_ARRAYTYPE_P(DBP_X);
	if (s->d == 0)
		(void) gc_features(arr, &s->d, NULL, "row with id", id);
	dbp_reserve(s, s->n + 1);
	(void) gc_features(arr, &s->d, s->X + (Size) s->n * s->d, "row with id", id);
	s->ids[s->n] = id;
	s->home[s->n] = PG_GETARG_INT32(DBP_HOME);
	s->shared[s->n] = PG_GETARG_BOOL(DBP_SHARED) ? 1 : 0;
	s->n++;
	PG_RETURN_POINTER(s);
}

/*
 * b's rows added to a's.  A state of another node of the plan (a partial
 * aggregate below this one, not in parallel) stays its own: copied, never
 * changed; one our deserialize made for this call is taken over or freed.
 */
Datum
dbscan_partition_combine(PG_FUNCTION_ARGS)
{
	MemoryContext aggcxt;
	DbpState   *a,
			   *b;

	if (!AggCheckCallContext(fcinfo, &aggcxt))
		elog(ERROR, "dbscan_partition_combine called in non-aggregate context");
	a = PG_ARGISNULL(0) ? NULL : (DbpState *) PG_GETARG_POINTER(0);
	b = PG_ARGISNULL(1) ? NULL : (DbpState *) PG_GETARG_POINTER(1);
	if (b == NULL)
	{
		if (a == NULL)
			PG_RETURN_NULL();
		PG_RETURN_POINTER(a);
	}
	if (a == NULL)
	{
		if (b->deserialized && b->cxt == aggcxt)
		{
			b->deserialized = false;
			PG_RETURN_POINTER(b);
		}
		a = dbp_new(aggcxt, b->part, b->eps, b->min_pts, b->device, b->device_len);
	}
	else
	{
		if (a->part != b->part)
			parts_differ(a->part, b->part);
		same_params(a, b->eps, b->min_pts, b->device, b->device_len);
		same_d(a, b);
	}
	dbp_append(a, b);
	if (b->deserialized)
		dbp_free(b);
	PG_RETURN_POINTER(a);
}

/*
 * The serialized state, one bytea for parallel query (the same server:
 * the host's byte order): this header, then ids[n], nf_ids[nf], X[n x d],
 * home[n], shared[n] and the device's bytes, unaligned (memcpy).
 */
typedef struct DbpWire
{
	int32		version;
	int32		part;
	int32		d;
	int32		min_pts;
	double		eps;
	int64		n;
	int64		nf;
	int32		device_len;
	int32		pad;
} DbpWire;

#define DBP_WIRE_VERSION 1

/* bytes of the serialized rows of s (with the header), as a double */
static double
wire_bytes(int64 n, int64 nf, int d, int device_len)
{
	return (double) sizeof(DbpWire) +
		(double) n * (sizeof(int64) + sizeof(int32) + sizeof(uint8) + sizeof(float) * (double) d) +
		(double) nf * sizeof(int64) + Max(device_len, 0);
}

Datum
dbscan_partition_serialize(PG_FUNCTION_ARGS)
{
	DbpState   *s;
	DbpWire		w;
	double		bytes;
	bytea	   *out;
	char	   *p;

	if (!AggCheckCallContext(fcinfo, NULL))
		elog(ERROR, "dbscan_partition_serialize called in non-aggregate context");
	s = (DbpState *) PG_GETARG_POINTER(0);
	bytes = wire_bytes(s->n, s->nf, s->d, s->device_len);
	if (bytes > (double) (MaxAllocSize - VARHDRSZ))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a parallel worker's part of partition %d (%lld rows) exceeds 1 GB",
						s->part, (long long) s->n),
				 errdetail("Parallel query moves each worker's rows of a partition as one bytea."),
				 errhint("Use more partitions, or run without parallel query (max_parallel_workers_per_gather = 0).")));
	memset(&w, 0, sizeof(w));
	w.version = DBP_WIRE_VERSION;
	w.part = s->part;
	w.d = s->d;
	w.min_pts = s->min_pts;
	w.eps = s->eps;
	w.n = s->n;
	w.nf = s->nf;
	w.device_len = s->device_len;
	out = palloc(VARHDRSZ + (Size) bytes);
	SET_VARSIZE(out, VARHDRSZ + (Size) bytes);
	p = VARDATA(out);
#define PUT(src, len) do { memcpy(p, (src), (len)); p += (len); } while (0)
	PUT(&w, sizeof(w));
	if (s->n > 0)
	{
		PUT(s->ids, sizeof(int64) * s->n);
		PUT(s->X, sizeof(float) * (Size) s->n * s->d);
		PUT(s->home, sizeof(int32) * s->n);
		PUT(s->shared, sizeof(uint8) * s->n);
	}
	if (s->nf > 0)
		PUT(s->nf_ids, sizeof(int64) * s->nf);
	if (s->device_len > 0)
		PUT(s->device, s->device_len);
#undef PUT
	Assert(p == (char *) out + VARSIZE(out));
	PG_RETURN_BYTEA_P(out);
}

/*
 * The state, in the aggregate's context (so that the combine function can
 * take it over as it is), marked as made for the one combine call.
 */
Datum
dbscan_partition_deserialize(PG_FUNCTION_ARGS)
{
	bytea	   *in;
	MemoryContext cxt;
	DbpWire		w;
	const char *p;
	Size		len;
	DbpState   *s;

	if (!AggCheckCallContext(fcinfo, &cxt))
		elog(ERROR, "dbscan_partition_deserialize called in non-aggregate context");
	in = PG_GETARG_BYTEA_PP(0);
	p = VARDATA_ANY(in);
	len = VARSIZE_ANY_EXHDR(in);
	if (len >= sizeof(w))
		memcpy(&w, p, sizeof(w));
	if (len < sizeof(w) || w.version != DBP_WIRE_VERSION || w.n < 0 || w.nf < 0 ||
		w.d < 0 || (w.n > 0 && w.d == 0) || w.device_len < -1 ||
		wire_bytes(w.n, w.nf, w.d, w.device_len) != (double) len)
		elog(ERROR, "malformed serialized state of dbscan_partition");
	p += sizeof(w);
	s = dbp_new(cxt, w.part, w.eps, w.min_pts, p + len - sizeof(w) - Max(w.device_len, 0),
				w.device_len);
	s->d = w.d;
	s->deserialized = true;
#define GET(dst, len) do { memcpy((dst), p, (len)); p += (len); } while (0)
	if (w.n > 0)
	{
		dbp_reserve(s, w.n);
		GET(s->ids, sizeof(int64) * w.n);
		GET(s->X, sizeof(float) * (Size) w.n * w.d);
		GET(s->home, sizeof(int32) * w.n);
		GET(s->shared, sizeof(uint8) * w.n);
		s->n = w.n;
	}
	if (w.nf > 0)
	{
		dbp_reserve_nf(s, w.nf);
		GET(s->nf_ids, sizeof(int64) * w.nf);
		s->nf = w.nf;
	}
#undef GET
	PG_RETURN_POINTER(s);
}

/* ---------------------------------------------------------------------
 * dbscan_partition: the final function
 * --------------------------------------------------------------------- */

/* a row of the partition, for ordering by id (the sorts are cancellable) */
typedef struct IdPos
{
	int64		id;
	int64		pos;
} IdPos;

#define ST_SORT sort_id_pos
#define ST_ELEMENT_TYPE IdPos
#define ST_COMPARE(a, b) \
	((a)->id < (b)->id ? -1 : (a)->id > (b)->id ? 1 : \
	 (a)->pos < (b)->pos ? -1 : (a)->pos > (b)->pos ? 1 : 0)
#define ST_SCOPE static
#define ST_CHECK_FOR_INTERRUPTS
#define ST_DEFINE
#include "lib/sort_template.h"

#define ST_SORT sort_int64
#define ST_ELEMENT_TYPE int64
#define ST_COMPARE(a, b) (*(a) < *(b) ? -1 : *(a) > *(b) ? 1 : 0)
#define ST_SCOPE static
#define ST_CHECK_FOR_INTERRUPTS
#define ST_DEFINE
#include "lib/sort_template.h"

pg_noreturn static void
id_twice(int64 id, int32 part)
{
	ereport(ERROR,
			(errcode(ERRCODE_UNIQUE_VIOLATION),
			 errmsg("id %lld appears twice in partition %d", (long long) id, part),
			 errdetail("gpu_dbscan_distributed names every row by its id, so the ids of the source query must be unique.")));
	pg_unreachable();
}

/*
 * The rows of s with features in id order, into in (arrays in cxt; X in
 * memory the GPU worker can read when there is one), with their home and
 * shared flags; an id twice is an error.
 */
static void
rows_in_id_order(const DbpState *s, MemoryContext cxt, GcInput *in,
				 int32 **home, uint8 **shared)
{
	int64		n = s->n;
	int			d = s->d;
	Size		rowbytes = sizeof(float) * (Size) d;
	bool		sorted = true;
	IdPos	   *order = NULL;
	MemoryContext old = MemoryContextSwitchTo(cxt);

	memset(in, 0, sizeof(*in));
	in->n_rows = in->n = n;
	in->d = d;
	*home = NULL;
	*shared = NULL;
	if (n == 0)
	{
		MemoryContextSwitchTo(old);
		return;
	}
	for (int64 i = 1; i < n && sorted; i++)
		sorted = s->ids[i - 1] < s->ids[i];
	if (!sorted)
	{
		order = MemoryContextAllocHuge(cxt, sizeof(IdPos) * (Size) n);
		for (int64 i = 0; i < n; i++)
		{
			order[i].id = s->ids[i];
			order[i].pos = i;
		}
		sort_id_pos(order, n);
		for (int64 i = 1; i < n; i++)
			if (order[i - 1].id == order[i].id)
				id_twice(order[i].id, s->part);
	}
	in->ids = MemoryContextAllocHuge(cxt, sizeof(int64) * (Size) n);
	in->has_features = MemoryContextAllocHuge(cxt, sizeof(bool) * (Size) n);
	memset(in->has_features, true, sizeof(bool) * (Size) n);
	*home = MemoryContextAllocHuge(cxt, sizeof(int32) * (Size) n);
	*shared = MemoryContextAllocHuge(cxt, sizeof(uint8) * (Size) n);
	in->X = gc_shared_alloc(cxt, rowbytes * (Size) n, &in->x_shared);
	if (in->X == NULL)
		in->X = MemoryContextAllocHuge(cxt, rowbytes * (Size) n);
	for (int64 i = 0; i < n; i++)
	{
		int64		j = order ? order[i].pos : i;

		if ((i & (DBP_CHECK_ROWS - 1)) == 0)
			CHECK_FOR_INTERRUPTS();
		in->ids[i] = s->ids[j];
		(*home)[i] = s->home[j];
		(*shared)[i] = s->shared[j];
		memcpy(in->X + (Size) i * d, s->X + (Size) j * d, rowbytes);
	}
	if (order)
		pfree(order);
	MemoryContextSwitchTo(old);
}

/*
 * The ids of the rows without features, sorted, in cxt; an id twice, or
 * one that a row with features has too (ids: sorted, n), is an error.
 */
static int64 *
featureless_ids(const DbpState *s, const int64 *ids, int64 n, MemoryContext cxt)
{
	int64	   *nf_ids;
	int64		j = 0;

	if (s->nf == 0)
		return NULL;
	nf_ids = MemoryContextAllocHuge(cxt, sizeof(int64) * (Size) s->nf);
	memcpy(nf_ids, s->nf_ids, sizeof(int64) * (Size) s->nf);
	sort_int64(nf_ids, s->nf);
	for (int64 i = 0; i < s->nf; i++)
	{
		if (i > 0 && nf_ids[i - 1] == nf_ids[i])
			id_twice(nf_ids[i], s->part);
		while (j < n && ids[j] < nf_ids[i])
			j++;
		if (j < n && ids[j] == nf_ids[i])
			id_twice(nf_ids[i], s->part);
	}
	return nf_ids;
}

Datum
dbscan_partition_final(PG_FUNCTION_ARGS)
{
	DbpState   *s;
	MemoryContext callcxt = CurrentMemoryContext,
				cxt;
	GcInput		in;
	int32	   *home;
	uint8	   *shared;
	int32	   *labels = NULL;
	uint8	   *is_core = NULL;
	gc_dbscan_local loc;
	gc_status	st = {GC_OK, ""};
	size_t		bytes;
	void	   *buf;
	bytea	   *out;

	if (!AggCheckCallContext(fcinfo, NULL))
		elog(ERROR, "dbscan_partition_final called in non-aggregate context");
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();		/* no rows */
	s = (DbpState *) PG_GETARG_POINTER(0);

	/*
	 * The state is left as it is (a final function may be called again on
	 * it): the rows are ordered into arrays of the call's own.
	 */
	cxt = AllocSetContextCreate(callcxt, "dbscan_partition", ALLOCSET_DEFAULT_SIZES);
	rows_in_id_order(s, cxt, &in, &home, &shared);

	gc_progress_begin("dbscan_partition");
	if (in.n > 0)
		(void) gc_glue_run_dbscan(s->requested, &in, &s->params, cxt,
								  &labels, &is_core);
	else
	{
		/* nothing to cluster, but 'gpu' without one fails, as gpu_dbscan */
		(void) gc_glue_choose_dbscan_device(s->requested, s->params.algorithm, 0, 0);
	}
	gc_progress_end();

	memset(&loc, 0, sizeof(loc));
	loc.part = s->part;
	loc.n = in.n;
	loc.ids = in.ids;
	loc.home = home;
	loc.shared = shared;
	loc.labels = labels;
	loc.is_core = is_core;
	loc.nf = s->nf;
	loc.nf_ids = featureless_ids(s, in.ids, in.n, cxt);
	if (gc_dbscan_summary_bytes(&loc, &bytes, &st) != GC_OK)
		gc_glue_report(&st, gc_algorithm_name(GC_ALGO_DBSCAN));
	if (bytes > MaxAllocSize - VARHDRSZ)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the summary of partition %d (%lld rows) exceeds 1 GB",
						s->part, (long long) (in.n + s->nf)),
				 errhint("Use more partitions.")));
	/* written 8-aligned, as the summary's layout wants, then copied */
	buf = MemoryContextAlloc(cxt, Max(bytes, 1));
	gc_dbscan_summarize(&loc, buf);
	out = MemoryContextAlloc(callcxt, VARHDRSZ + bytes);
	SET_VARSIZE(out, VARHDRSZ + bytes);
	memcpy(VARDATA(out), buf, bytes);
	MemoryContextDelete(cxt);
	PG_RETURN_BYTEA_P(out);
}
