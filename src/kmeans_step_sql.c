/*-------------------------------------------------------------------------
 *
 * kmeans_step_sql.c
 *	  k-means as a combinable aggregate, and the driver that iterates it.
 *
 *	  kmeans_step(features, centroids [, id]) -> kmeans_step_result
 *		(centroids real[], counts bigint[], inertia float8, shift float8,
 *		 n bigint, members bigint[])
 *	  gpu_kmeans_distributed(source, k, max_iter, tol, init, seed,
 *							 init_centroids)
 *		RETURNS (centroids, inertia, iterations, converged, n, d)
 *
 * One Lloyd iteration is one aggregate over the rows, given the current
 * centres: each row goes to its nearest centre by the core's own
 * assignment (gc_km_nearest: float32 gc_dist2, ties to the lowest index,
 * as kmeans_assign and gc_km_assign), and the state keeps per centre the
 * row count, the double sums of the features, an order-independent hash of
 * its rows (members), and the double inertia (gc_dist2_f64, as the core's
 * inertia).  The state is internal with serialize / deserialize (a bytea)
 * and a combine function, all PARALLEL SAFE: parallel query (and Citus)
 * run the partial aggregate where the rows are and combine the partials.
 * The final function divides: the new centres, their squared shift, the
 * counts and hashes.  A centre with no row is re-seeded as the core
 * re-seeds it (gc_km_update): the state also keeps the k rows farthest
 * from their centres (ties: the lowest id; only rows off their centre, as
 * one on its centre would seed a duplicate of it), and the farthest moves
 * to the lowest empty cluster; a cluster left with no row keeps its
 * centre.
 *
 * Centroids NULL: one centre at the origin of the rows' dimension (the
 * driver's first pass, the rows' count and mean).
 *
 * Exactness: the labels are the core's; the sums are double, as the core's
 * update, but in the order the rows arrive (per worker, then combined),
 * where the core sums in a fixed order.  Both round the same double mean
 * to float32, so the centres are equal or one float32 step apart (when the
 * exact mean lies within the two sums' rounding errors, at most
 * (n - 1) 2^-53 sum|x| each, of a rounding boundary of float32).
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

#include <math.h>

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/params.h"
#include "nodes/primnodes.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "cluster_args.h"
#include "gpuclust.h"
#include "ingest.h"
#include "core/kmeans_internal.h"
#include "core/rng.h"

PG_FUNCTION_INFO_V1(kmeans_step_transfn);
PG_FUNCTION_INFO_V1(kmeans_step_combine);
PG_FUNCTION_INFO_V1(kmeans_step_serialize);
PG_FUNCTION_INFO_V1(kmeans_step_deserialize);
PG_FUNCTION_INFO_V1(kmeans_step_final);
PG_FUNCTION_INFO_V1(gpu_kmeans_distributed);

/*
 * A candidate for re-seeding an empty cluster: a row, its distance² to its
 * centre (float, as the core's d2) and its label; features in far_x[slot].
 */
typedef struct FarRow
{
	float		d2;
	int32		label;
	int32		slot;
	int32		pad;
	int64		id;
} FarRow;

/* The aggregate's state, in the aggregate context. */
typedef struct KmStep
{
	int32		k;
	int32		d;
	bool		origin;			/* centroids NULL: one centre at 0 */
	bool		fixed;			/* centroids a constant or query parameter */
	int64		n;				/* rows aggregated */
	double		inertia;
	double		cost;			/* sum of the float d2 (k-means++'s potential) */
	float	   *C;				/* k x d given centres */
	double	   *sums;			/* k x d */
	int64	   *counts;			/* k */
	uint64	   *members;		/* k: sums of the rows' hashes, mod 2^64 */
	int32		nfar;			/* the k rows farthest from their centres: */
	FarRow	   *far;			/* a min-heap, the least far at the root */
	float	   *far_x;			/* k x d */
	float	   *x;				/* d: the row */
} KmStep;

static KmStep *
step_new(MemoryContext cxt, int k, int d, bool origin)
{
	KmStep	   *s = MemoryContextAllocZero(cxt, sizeof(KmStep));

	s->k = k;
	s->d = d;
	s->origin = origin;
	s->C = MemoryContextAllocZero(cxt, sizeof(float) * (Size) k * d);
	s->sums = MemoryContextAllocZero(cxt, sizeof(double) * (Size) k * d);
	s->counts = MemoryContextAllocZero(cxt, sizeof(int64) * k);
	s->members = MemoryContextAllocZero(cxt, sizeof(uint64) * k);
	s->far = MemoryContextAllocZero(cxt, sizeof(FarRow) * k);
	s->far_x = MemoryContextAllocZero(cxt, sizeof(float) * (Size) k * d);
	s->x = MemoryContextAllocZero(cxt, sizeof(float) * d);
	return s;
}

/*
 * a is farther than b: the core's rule (kmeans_update.c), larger d2, ties
 * to the lower row; here the lower id (the row order of a source in id
 * order).
 */
static inline bool
farther(const FarRow *a, const FarRow *b)
{
	return a->d2 > b->d2 || (a->d2 == b->d2 && a->id < b->id);
}

/*
 * Offer a row to the k farthest: kept when fewer than k are, or when it is
 * farther than the least far (replacing it); never a row on its centre
 * (d2 0: no candidate, as in the core).
 */
static void
far_offer(KmStep *s, float d2, int label, int64 id, const float *x)
{
	FarRow		r = {d2, label, 0, 0, id};
	int			p;

	if (!(d2 > 0.0f))
		return;
	if (s->nfar < s->k)
	{
		r.slot = s->nfar;
		p = s->nfar++;
		while (p > 0 && farther(&s->far[(p - 1) / 2], &r))
		{
			s->far[p] = s->far[(p - 1) / 2];
			p = (p - 1) / 2;
		}
	}
	else if (farther(&r, &s->far[0]))
	{
		r.slot = s->far[0].slot;
		p = 0;
		for (;;)
		{
			int			c = 2 * p + 1;

			if (c >= s->nfar)
				break;
			if (c + 1 < s->nfar && farther(&s->far[c], &s->far[c + 1]))
				c++;
			if (!farther(&r, &s->far[c]))
				break;
			s->far[p] = s->far[c];
			p = c;
		}
	}
	else
		return;
	s->far[p] = r;
	memcpy(s->far_x + (Size) r.slot * s->d, x, sizeof(float) * s->d);
}

static int
cmp_farthest_first(const void *pa, const void *pb)
{
	const FarRow *a = pa,
			   *b = pb;

	return farther(a, b) ? -1 : farther(b, a) ? 1 : 0;
}

/* The hash of a row's float32 features (its members term). */
static uint64
row_hash(const float *x, int d)
{
	uint64		h = UINT64CONST(0x8a5cd789635d2dff);

	for (int j = 0; j < d; j++)
	{
		uint32		bits;

		memcpy(&bits, &x[j], sizeof(bits));
		h = gc_mix64(h ^ bits);
	}
	return h;
}

static void
pg_attribute_noreturn()
centroids_differ(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("kmeans_step needs the same centroids in every row"),
			 errdetail("One aggregate is one k-means iteration from one set of centres.")));
}

/* The row's features into s->x, checked; the row named by its id if given. */
static void
step_features(KmStep *s, ArrayType *arr, bool has_id, int64 id)
{
	int			d = s->d;

	if (ARR_NDIM(arr) == 1 && ARR_DIMS(arr)[0] != s->d && !s->origin)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 has_id ?
				 errmsg("features of row with id %lld have %d elements, but the centroids have %d columns",
						(long long) id, ARR_DIMS(arr)[0], s->d) :
				 errmsg("features have %d elements, but the centroids have %d columns",
						ARR_DIMS(arr)[0], s->d)));
	(void) gc_features(arr, &d, s->x, has_id ? "row with id" : NULL, id);
}

/*
 * Whether the centroids argument is the same in every row by construction:
 * a constant, or a parameter of the query (the driver's $1); then it is
 * read once, otherwise compared in every row.
 */
static bool
centroids_fixed(FunctionCallInfo fcinfo)
{
	Aggref	   *ag = AggGetAggref(fcinfo);
	Node	   *e;

	if (ag == NULL || list_length(ag->args) < 2)
		return false;
	e = (Node *) ((TargetEntry *) lsecond(ag->args))->expr;
	return IsA(e, Const) ||
		(IsA(e, Param) && ((Param *) e)->paramkind == PARAM_EXTERN);
}

Datum
kmeans_step_transfn(PG_FUNCTION_ARGS)
{
	MemoryContext aggcxt;
	KmStep	   *s = PG_ARGISNULL(0) ? NULL : (KmStep *) PG_GETARG_POINTER(0);
	bool		has_id = PG_NARGS() > 3;
	int64		id = 0;
	ArrayType  *arr;
	int			c;
	float		d2;

	if (!AggCheckCallContext(fcinfo, &aggcxt))
		elog(ERROR, "kmeans_step_transfn called in non-aggregate context");
	if (PG_ARGISNULL(1))
		PG_RETURN_POINTER(s);	/* NULL features: not clustered */
	if (has_id)
	{
		if (PG_ARGISNULL(3))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("source query returned a NULL id"),
					 errdetail("A row with features has a NULL id.")));
		id = PG_GETARG_INT64(3);
	}
	arr = PG_GETARG_ARRAYTYPE_P(1);

	if (s == NULL)
	{
		if (PG_ARGISNULL(2))
		{
			int			d = 0;

			/* the first row gives the dimension */
			(void) gc_features(arr, &d, NULL, has_id ? "row with id" : NULL, id);
			s = step_new(aggcxt, 1, d, true);
		}
		else
		{
			float	   *C;
			int			d;
			int			k = gc_glue_parse_centroids(PG_GETARG_ARRAYTYPE_P(2),
													"centroids", 0, &d, &C,
													aggcxt);

			s = step_new(aggcxt, k, d, false);
			memcpy(s->C, C, sizeof(float) * (Size) k * d);
			pfree(C);
		}
		s->fixed = centroids_fixed(fcinfo);
	}
	else if (PG_ARGISNULL(2) != s->origin)
		centroids_differ();
	else if (!s->origin && !s->fixed)
	{
		/*
		 * The same centres in every row: compared by value (a pointer may be
		 * reused for another value in a per-row context).
		 */
		ArrayType  *ca = PG_GETARG_ARRAYTYPE_P(2);

		if (ARR_NDIM(ca) != 2 || ARR_DIMS(ca)[0] != s->k ||
			ARR_DIMS(ca)[1] != s->d || ARR_HASNULL(ca) ||
			memcmp(ARR_DATA_PTR(ca), s->C, sizeof(float) * (Size) s->k * s->d) != 0)
			centroids_differ();
	}

	step_features(s, arr, has_id, id);
	c = gc_km_nearest(s->x, s->C, s->k, s->d, &d2);
	for (int j = 0; j < s->d; j++)
		s->sums[(Size) c * s->d + j] += (double) s->x[j];
	s->counts[c]++;
	s->members[c] += row_hash(s->x, s->d);
	s->inertia += gc_dist2_f64(s->x, s->C + (Size) c * s->d, s->d);
	s->cost += (double) d2;
	s->n++;
	far_offer(s, d2, c, id, s->x);
	PG_RETURN_POINTER(s);
}

Datum
kmeans_step_combine(PG_FUNCTION_ARGS)
{
	MemoryContext aggcxt;
	KmStep	   *a = PG_ARGISNULL(0) ? NULL : (KmStep *) PG_GETARG_POINTER(0);
	KmStep	   *b = PG_ARGISNULL(1) ? NULL : (KmStep *) PG_GETARG_POINTER(1);

	if (!AggCheckCallContext(fcinfo, &aggcxt))
		elog(ERROR, "kmeans_step_combine called in non-aggregate context");
	if (b == NULL)
		PG_RETURN_POINTER(a);
	if (a == NULL)
	{
		/* a copy of b in the aggregate context */
		a = step_new(aggcxt, b->k, b->d, b->origin);
		a->n = b->n;
		a->inertia = b->inertia;
		a->cost = b->cost;
		memcpy(a->C, b->C, sizeof(float) * (Size) b->k * b->d);
		memcpy(a->sums, b->sums, sizeof(double) * (Size) b->k * b->d);
		memcpy(a->counts, b->counts, sizeof(int64) * b->k);
		memcpy(a->members, b->members, sizeof(uint64) * b->k);
		a->nfar = b->nfar;
		memcpy(a->far, b->far, sizeof(FarRow) * b->nfar);
		memcpy(a->far_x, b->far_x, sizeof(float) * (Size) b->k * b->d);
		PG_RETURN_POINTER(a);
	}
	if (a->origin != b->origin || a->k != b->k)
		centroids_differ();
	if (a->d != b->d)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("features have %d elements in one part of kmeans_step and %d in another",
						b->d, a->d),
				 errdetail("All rows must have as many features as the first row with features.")));
	if (memcmp(a->C, b->C, sizeof(float) * (Size) a->k * a->d) != 0)
		centroids_differ();
	for (Size i = 0; i < (Size) a->k * a->d; i++)
		a->sums[i] += b->sums[i];
	for (int c = 0; c < a->k; c++)
	{
		a->counts[c] += b->counts[c];
		a->members[c] += b->members[c];
	}
	a->n += b->n;
	a->inertia += b->inertia;
	a->cost += b->cost;
	for (int i = 0; i < b->nfar; i++)
		far_offer(a, b->far[i].d2, b->far[i].label, b->far[i].id,
				  b->far_x + (Size) b->far[i].slot * b->d);
	PG_RETURN_POINTER(a);
}

/*
 * Serialized: k, d, origin, nfar, n, inertia, cost, then C, sums, counts,
 * members, the nfar far rows and their features (in heap order).
 */
#define KM_HEADER (4 * sizeof(int32) + sizeof(int64) + 2 * sizeof(double))
static inline Size
serial_size(int k, int d, int nfar)
{
	return KM_HEADER + (Size) k * d * (sizeof(float) + sizeof(double)) +
		(Size) k * 2 * sizeof(int64) +
		(Size) nfar * (sizeof(FarRow) + sizeof(float) * d);
}

Datum
kmeans_step_serialize(PG_FUNCTION_ARGS)
{
	KmStep	   *s = (KmStep *) PG_GETARG_POINTER(0);
	Size		kd = (Size) s->k * s->d;
	Size		len = serial_size(s->k, s->d, s->nfar);
	bytea	   *out = palloc(VARHDRSZ + len);
	char	   *p = VARDATA(out);
	int32		origin = s->origin;

#define PUT(src, bytes) (memcpy(p, (src), (bytes)), p += (bytes))
	PUT(&s->k, sizeof(int32));
	PUT(&s->d, sizeof(int32));
	PUT(&origin, sizeof(int32));
	PUT(&s->nfar, sizeof(int32));
	PUT(&s->n, sizeof(int64));
	PUT(&s->inertia, sizeof(double));
	PUT(&s->cost, sizeof(double));
	PUT(s->C, kd * sizeof(float));
	PUT(s->sums, kd * sizeof(double));
	PUT(s->counts, (Size) s->k * sizeof(int64));
	PUT(s->members, (Size) s->k * sizeof(uint64));
	PUT(s->far, (Size) s->nfar * sizeof(FarRow));
	for (int i = 0; i < s->nfar; i++)
		PUT(s->far_x + (Size) s->far[i].slot * s->d, sizeof(float) * s->d);
#undef PUT
	SET_VARSIZE(out, VARHDRSZ + len);
	PG_RETURN_BYTEA_P(out);
}

Datum
kmeans_step_deserialize(PG_FUNCTION_ARGS)
{
	MemoryContext aggcxt;
	bytea	   *in = PG_GETARG_BYTEA_PP(0);
	const char *p = VARDATA_ANY(in);
	Size		len = VARSIZE_ANY_EXHDR(in);
	int32		k,
				d,
				origin,
				nfar;
	KmStep	   *s;
	Size		kd;

	if (!AggCheckCallContext(fcinfo, &aggcxt))
		elog(ERROR, "kmeans_step_deserialize called in non-aggregate context");
	if (len < KM_HEADER)
		elog(ERROR, "invalid kmeans_step state");
	memcpy(&k, p, sizeof(int32));
	memcpy(&d, p + sizeof(int32), sizeof(int32));
	memcpy(&origin, p + 2 * sizeof(int32), sizeof(int32));
	memcpy(&nfar, p + 3 * sizeof(int32), sizeof(int32));
	if (k < 1 || d < 1 || nfar < 0 || nfar > k ||
		len != serial_size(k, d, nfar))
		elog(ERROR, "invalid kmeans_step state");
	kd = (Size) k * d;
	s = step_new(aggcxt, k, d, origin != 0);
	s->nfar = nfar;
	p += 4 * sizeof(int32);
#define GET(dst, bytes) (memcpy((dst), p, (bytes)), p += (bytes))
	GET(&s->n, sizeof(int64));
	GET(&s->inertia, sizeof(double));
	GET(&s->cost, sizeof(double));
	GET(s->C, kd * sizeof(float));
	GET(s->sums, kd * sizeof(double));
	GET(s->counts, (Size) k * sizeof(int64));
	GET(s->members, (Size) k * sizeof(uint64));
	GET(s->far, (Size) nfar * sizeof(FarRow));
	for (int i = 0; i < nfar; i++)
	{
		s->far[i].slot = i;
		GET(s->far_x + (Size) i * d, sizeof(float) * d);
	}
#undef GET
	PG_RETURN_POINTER(s);
}

/* A one-dimensional bigint[] of n values. */
static ArrayType *
int8_array(const int64 *v, int n)
{
	Datum	   *e = palloc(sizeof(Datum) * n);

	for (int i = 0; i < n; i++)
		e[i] = Int64GetDatum(v[i]);
	return construct_array(e, n, INT8OID, sizeof(int64), FLOAT8PASSBYVAL,
						   TYPALIGN_DOUBLE);
}

/* The float32 rows of a k x d real[] (checked when it was made). */
static const float *
array_rows(ArrayType *a)
{
	return (const float *) ARR_DATA_PTR(a);
}

/* A k x d real[] of the k x d floats C. */
static ArrayType *
rows_array(const float *C, int k, int d)
{
	Datum	   *e = palloc(sizeof(Datum) * (Size) k * d);
	int			dims[2] = {k, d};
	int			lbs[2] = {1, 1};

	for (Size i = 0; i < (Size) k * d; i++)
		e[i] = Float4GetDatum(C[i]);
	return construct_md_array(e, NULL, 2, dims, lbs, FLOAT4OID, sizeof(float4),
							  true, TYPALIGN_INT);
}

/*
 * The new centres: the double mean of each centre's rows rounded to
 * float32 (the core's gc_km_update), the given centre when it has none.
 */
Datum
kmeans_step_final(PG_FUNCTION_ARGS)
{
	KmStep	   *s;
	TupleDesc	tupdesc;
	Datum		values[7];
	bool		nulls[7] = {false, false, false, false, false, false, false};
	float	   *Cn;
	double		shift = 0.0;
	int64	   *cnt;
	double	   *sums;
	FarRow	   *far;
	int			j = 0;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	s = (KmStep *) PG_GETARG_POINTER(0);
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type of kmeans_step_final must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);

	/*
	 * Empty clusters re-seeded as the core's gc_km_update does: the rows
	 * farthest from their centres, the farthest to the lowest empty
	 * cluster, move there (their old cluster loses them).
	 */
	cnt = palloc(sizeof(int64) * s->k);
	memcpy(cnt, s->counts, sizeof(int64) * s->k);
	sums = s->sums;
	far = palloc(sizeof(FarRow) * Max(s->nfar, 1));
	memcpy(far, s->far, sizeof(FarRow) * s->nfar);	/* the state stays as is */
	qsort(far, s->nfar, sizeof(FarRow), cmp_farthest_first);
	for (int c = 0; c < s->k && j < s->nfar; c++)
		if (s->counts[c] == 0)
		{
			const FarRow *r = &far[j++];
			const float *x = s->far_x + (Size) r->slot * s->d;

			if (sums == s->sums)
			{
				sums = palloc(sizeof(double) * (Size) s->k * s->d);
				memcpy(sums, s->sums, sizeof(double) * (Size) s->k * s->d);
			}
			for (int t = 0; t < s->d; t++)
			{
				sums[(Size) r->label * s->d + t] -= (double) x[t];
				sums[(Size) c * s->d + t] = (double) x[t];
			}
			cnt[r->label]--;
			cnt[c] = 1;
		}

	Cn = palloc(sizeof(float) * (Size) s->k * s->d);
	for (int c = 0; c < s->k; c++)
		for (int t = 0; t < s->d; t++)
		{
			Size		i = (Size) c * s->d + t;
			double		dv;

			Cn[i] = cnt[c] > 0 ? (float) (sums[i] / (double) cnt[c]) : s->C[i];
			dv = (double) Cn[i] - (double) s->C[i];
			shift += dv * dv;
		}
	values[0] = PointerGetDatum(rows_array(Cn, s->k, s->d));
	values[1] = PointerGetDatum(int8_array(s->counts, s->k));
	values[2] = Float8GetDatum(s->inertia);
	values[3] = Float8GetDatum(shift);
	values[4] = Int64GetDatum(s->n);
	values[5] = PointerGetDatum(int8_array((const int64 *) s->members, s->k));
	values[6] = Float8GetDatum(s->cost);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/* ---------------------------------------------------------------------
 * gpu_kmeans_distributed
 * --------------------------------------------------------------------- */

/* One pass of kmeans_step over the source: its result, copied to cxt. */
typedef struct StepOut
{
	bool		empty;			/* no row with features */
	ArrayType  *centroids;
	int64	   *counts;
	uint64	   *members;
	double		inertia;
	double		cost;
	double		shift;
	int64		n;
	int			k;
} StepOut;

static void
run_step(SPIPlanPtr plan, ArrayType *C, MemoryContext cxt, StepOut *out)
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
	gc_run_readonly(plan, params);
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
	MemoryContextSwitchTo(old);
	SPI_freetuptable(SPI_tuptable);
}

/*
 * The k rows at positions rows[] among the source's rows with features, in
 * its order, or by_id in the order of their ids (then of their features).
 */
static ArrayType *
fetch_rows(const char *source, bool by_id, const int64 *rows, int k, int d,
		   MemoryContext cxt)
{
	char	   *q = psprintf("SELECT q.o, q.f FROM (SELECT row_number() OVER (%s) - 1 AS o, s.f "
							 "FROM (%s) AS s(id, f) WHERE s.f IS NOT NULL) q WHERE q.o = ANY ($1)",
							 by_id ? "ORDER BY s.id, s.f" : "", source);
	Oid			types[1] = {INT8ARRAYOID};
	SPIPlanPtr	plan = SPI_prepare_cursor(q, 1, types, CURSOR_OPT_PARALLEL_OK);
	ParamListInfo params = makeParamList(1);
	float	   *C = MemoryContextAllocZero(cxt, sizeof(float) * (Size) k * d);
	ArrayType  *result;
	MemoryContext old;

	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
	params->params[0].value = PointerGetDatum(int8_array(rows, k));
	params->params[0].isnull = false;
	params->params[0].pflags = PARAM_FLAG_CONST;
	params->params[0].ptype = INT8ARRAYOID;
	gc_run_readonly(plan, params);
	if (SPI_processed != (uint64) k)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the source query returned other rows when read again"),
				 errdetail("Random seeding reads %d chosen rows again, and found %llu.",
						   k, (unsigned long long) SPI_processed),
				 errhint("Give the source an ORDER BY, and run it on data that does not change meanwhile.")));
	for (uint64 t = 0; t < SPI_processed; t++)
	{
		bool		isnull;
		int64		o = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[t],
													SPI_tuptable->tupdesc, 1, &isnull));
		ArrayType  *f = DatumGetArrayTypeP(SPI_getbinval(SPI_tuptable->vals[t],
														 SPI_tuptable->tupdesc, 2, &isnull));
		int			dd = d;

		/* the centre of every draw of that row (rows are distinct) */
		for (int c = 0; c < k; c++)
			if (rows[c] == o)
				(void) gc_features(f, &dd, C + (Size) c * d, "source row", o + 1);
	}
	SPI_freetuptable(SPI_tuptable);
	old = MemoryContextSwitchTo(cxt);
	result = rows_array(C, k, d);
	MemoryContextSwitchTo(old);
	return result;
}

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
 * this is the core's k-means|| (up to the order of phi's double sum).
 */
static ArrayType *
kmeans_parallel_init(const char *source, SPIPlanPtr step, int64 n, int d,
					 int k, int64 seed, MemoryContext cxt)
{
	Oid			types[6] = {FLOAT4ARRAYOID, INT8OID, INT4OID, INT8OID, FLOAT8OID, FLOAT8OID};
	char	   *q = psprintf("SELECT s.f FROM (%s) AS s(id, f) WHERE s.f IS NOT NULL AND "
							 "kmeans_parallel_sample(s.f, $1, s.id, $2, $3, $4, $5, $6) ORDER BY s.id, s.f",
							 source);
	SPIPlanPtr	pick = SPI_prepare_cursor(q, 6, types, CURSOR_OPT_PARALLEL_OK);
	const uint64 stream = GC_KM_STREAM_KMEANSPAR;
	int64		first;
	gc_status	gs = {GC_OK, ""};
	gc_ctx		ctx;
	StepOut		st;
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
	cand = fetch_rows(source, true, &first, 1, d, cxt);
	run_step(step, cand, cxt, &st);
	for (int r = 1; r <= GC_KM_PAR_MAX_ROUNDS; r++)
	{
		ParamListInfo params = makeParamList(6);
		MemoryContext old;

		if ((r > GC_KM_PAR_ROUNDS && m >= k) || !(st.cost > 0.0))
			break;
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
		gc_run_readonly(pick, params);
		if (SPI_processed == 0)
			continue;
		if ((uint64) m + SPI_processed > (uint64) (MaxAllocSize / sizeof(float) / d))
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("k-means|| sampled too many candidates")));
		old = MemoryContextSwitchTo(cxt);
		Cc = palloc(sizeof(float) * (Size) (m + SPI_processed) * d);
		MemoryContextSwitchTo(old);
		memcpy(Cc, array_rows(cand), sizeof(float) * (Size) m * d);
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
		cand = rows_array(Cc, m, d);
		MemoryContextSwitchTo(old);
		run_step(step, cand, cxt, &st);
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
	if (gc_km_init_kmeanspp_w(&ctx, array_rows(cand), m, d, k, w, (uint64) seed,
							  stream + GC_KM_PAR_REDUCE_STREAM, out, NULL, &gs) != GC_OK)
		gc_glue_report(&gs, "k-means");
	{
		MemoryContext old = MemoryContextSwitchTo(cxt);
		ArrayType  *C = rows_array(out, k, d);

		MemoryContextSwitchTo(old);
		return C;
	}
}

/*
 * Whether the step from centres C re-seeded a cluster: one with no row
 * whose centre changed.  A re-seeded centre is a row off its nearest
 * centre (d2 > 0), so it differs from centre c (its distance to c would
 * be 0); an empty cluster not re-seeded keeps its centre bit for bit.
 */
static bool
step_reseeded(const StepOut *st, ArrayType *C, int d)
{
	const float *in = array_rows(C),
			   *out = array_rows(st->centroids);

	for (int c = 0; c < st->k; c++)
		if (st->counts[c] == 0 &&
			memcmp(in + (Size) c * d, out + (Size) c * d, sizeof(float) * d) != 0)
			return true;
	return false;
}

/* ERROR when argument i is NULL. */
static void
not_null(FunctionCallInfo fcinfo, int i, const char *name)
{
	if (PG_ARGISNULL(i))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be NULL", name)));
}

Datum
gpu_kmeans_distributed(PG_FUNCTION_ARGS)
{
	char	   *source;
	int			k,
				max_iter,
				it;
	double		tol,
				tol_scaled = 0.0;
	char	   *init;
	int64		seed;
	TupleDesc	tupdesc;
	MemoryContext callcxt = CurrentMemoryContext,
				cxt;
	char	   *q;
	Oid			types[1] = {FLOAT4ARRAYOID};
	SPIPlanPtr	plan;
	StepOut		st,
				prev;
	ArrayType  *C,
			   *given = NULL;
	int64		n;
	int			d;
	bool		converged = false;
	Datum		values[6];
	bool		nulls[6] = {false, false, false, false, false, false};

	not_null(fcinfo, 0, "source");
	not_null(fcinfo, 1, "k");
	not_null(fcinfo, 2, "max_iter");
	not_null(fcinfo, 3, "tol");
	not_null(fcinfo, 4, "init");
	not_null(fcinfo, 5, "seed");
	source = text_to_cstring(PG_GETARG_TEXT_PP(0));
	k = PG_GETARG_INT32(1);
	max_iter = PG_GETARG_INT32(2);
	tol = PG_GETARG_FLOAT8(3);
	init = text_to_cstring(PG_GETARG_TEXT_PP(4));
	seed = PG_GETARG_INT64(5);
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
	if (gc_check_source_query(source) != 2)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("the source query of gpu_kmeans_distributed must return two columns, (id, features)"),
				 errdetail("It has no sample weights yet.")));
	q = psprintf("SELECT kmeans_step(s.f, $1, s.id) FROM (%s) AS s(id, f)", source);
	plan = SPI_prepare_cursor(q, 1, types, CURSOR_OPT_PARALLEL_OK);
	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));

	/* the rows' count and mean, then the variance about the mean */
	run_step(plan, NULL, cxt, &st);
	n = st.empty ? 0 : st.n;
	gc_glue_check_k_rows(k, n, GC_ROWS_QUERY,
						 n == 0 ? "gpu_kmeans_distributed needs rows to fit a model to." : NULL);
	d = ARR_DIMS(st.centroids)[1];
	if (given != NULL && ARR_DIMS(given)[1] != d)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("init_centroids have %d columns, but the rows have %d features",
						ARR_DIMS(given)[1], d)));
	if (tol > 0.0)
	{
		run_step(plan, st.centroids, cxt, &st);
		tol_scaled = tol * (st.inertia / ((double) n * d));
	}

	if (given != NULL)
		C = given;
	else if (strcmp(init, "k-means||") == 0)
		C = kmeans_parallel_init(source, plan, n, d, k, seed, cxt);
	else
	{
		int64	   *rows = palloc(sizeof(int64) * k);
		gc_status	gs = {GC_OK, ""};
		gc_ctx		ctx;

		gc_glue_ctx(&ctx);
		if (gc_km_random_rows(&ctx, n, k, (uint64) seed, GC_KM_STREAM_RANDOM,
							  rows, &gs) != GC_OK)
			gc_glue_report(&gs, "k-means");
		C = fetch_rows(source, false, rows, k, d, cxt);
	}

	/*
	 * Lloyd's iterations, stopping as the core's kmeans_run stops: labels
	 * unchanged and no cluster re-seeded, or a shift within tol
	 */
	memset(&prev, 0, sizeof(prev));
	for (it = 0; it < max_iter; it++)
	{
		bool		changed;

		run_step(plan, C, cxt, &st);
		changed = it == 0 ||
			memcmp(st.counts, prev.counts, sizeof(int64) * k) != 0 ||
			memcmp(st.members, prev.members, sizeof(uint64) * k) != 0 ||
			step_reseeded(&st, C, d);
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
	run_step(plan, C, cxt, &st);
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
