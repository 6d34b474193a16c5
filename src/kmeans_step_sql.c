/*-------------------------------------------------------------------------
 *
 * kmeans_step_sql.c
 *	  k-means as a combinable aggregate, and the driver that iterates it.
 *
 *	  kmeans_step(features, centroids [, id [, device]]) -> kmeans_step_result
 *		(centroids real[], counts bigint[], inertia float8, shift float8,
 *		 n bigint, members bigint[])
 *	  kmeans_rank_counts(id, pivots) -> bigint[]
 *		per pivot, the rows whose id is below it (the seeding's draw)
 *	  gpu_kmeans_distributed(source, k, max_iter, tol, init, seed,
 *							 init_centroids, device)
 *		RETURNS (centroids, inertia, iterations, converged, n, d)
 *
 * One Lloyd iteration is one aggregate over the rows, given the current
 * centres: each row goes to its nearest centre by the core's own
 * assignment (gc_km_nearest: float32 gc_dist2, ties to the lowest index,
 * as kmeans_assign and gc_km_assign), and the state keeps per centre the
 * row count, the double sums of the features, an order-independent hash of
 * its rows (members), and the double inertia (gc_dist2_f64, as the core's
 * inertia).  The state is one flat value of the SQL type kmeans_step_state
 * (a varlena; its text form is base64), with a combine function, all
 * PARALLEL SAFE: parallel query ships it from its workers as any value,
 * and Citus, which moves only states of a real type (its
 * worker_partial_agg sends the state type's text form from each shard to
 * the coordinator, whose coord_combine_agg reads it back and combines; an
 * internal state makes it pull every row to the coordinator instead), runs
 * the partial aggregate on the shards.  While rows arrive the transition
 * function keeps the state as an expanded object that buffers them and
 * labels them a block at a time, on the CPU or the GPU (the rows in
 * transit, below); the combine function changes a state in place, as
 * float8_accum does, in the aggregate context only.  The final function divides: the new centres,
 * their squared shift, the counts and hashes.  A centre with no row is
 * re-seeded as the core re-seeds it (gc_km_update): the state also keeps
 * the k rows farthest from their centres (ties: the lowest id; only rows
 * off their centre, as one on its centre would seed a duplicate of it),
 * and the farthest moves to the lowest empty cluster; a cluster left with
 * no row keeps its centre.
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
#include "common/base64.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/params.h"
#include "nodes/primnodes.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/expandeddatum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "cluster_args.h"
#include "cluster_run.h"
#include "driver.h"
#include "gpuclust.h"
#include "gpujob.h"
#include "ingest.h"
#include "core/gpuclust_core.h"
#include "core/common/rng.h"

PG_FUNCTION_INFO_V1(kmeans_step_transfn);
PG_FUNCTION_INFO_V1(kmeans_step_combine);
PG_FUNCTION_INFO_V1(kmeans_step_state_in);
PG_FUNCTION_INFO_V1(kmeans_step_state_out);
PG_FUNCTION_INFO_V1(kmeans_step_final);
PG_FUNCTION_INFO_V1(kmeans_rank_counts_transfn);
PG_FUNCTION_INFO_V1(kmeans_rank_counts_combine);
PG_FUNCTION_INFO_V1(kmeans_rank_counts_final);
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

/*
 * The aggregate's state, one varlena (kmeans_step_state): this header,
 * then (8-aligned, in this order) double sums[k x d], int64 counts[k],
 * uint64 members[k] (sums of the rows' hashes, mod 2^64), FarRow far[k]
 * (the k rows farthest from their centres, a min-heap with the least far
 * at the root, nfar of them), float C[k x d] (the given centres) and
 * float far_x[k x d] (the far rows' features, by slot).
 */
typedef struct KmStep
{
	int32		vl_len_;		/* varlena header (do not touch directly) */
	int32		version;		/* KM_STATE_VERSION */
	int32		k;
	int32		d;
	int32		flags;			/* KM_ORIGIN | KM_FIXED */
	int32		nfar;
	int64		n;				/* rows aggregated */
	double		inertia;
	double		cost;			/* sum of the float d2 (k-means++'s potential) */
} KmStep;

#define KM_STATE_VERSION 1
#define KM_ORIGIN	0x1			/* centroids NULL: one centre at 0 */
#define KM_FIXED	0x2			/* centroids a constant or query parameter */

static inline double *km_sums(KmStep *s) { return (double *) (s + 1); }
static inline int64 *km_counts(KmStep *s) { return (int64 *) (km_sums(s) + (Size) s->k * s->d); }
static inline uint64 *km_members(KmStep *s) { return (uint64 *) (km_counts(s) + s->k); }
static inline FarRow *km_far(KmStep *s) { return (FarRow *) (km_members(s) + s->k); }
static inline float *km_C(KmStep *s) { return (float *) (km_far(s) + s->k); }
static inline float *km_far_x(KmStep *s) { return km_C(s) + (Size) s->k * s->d; }

/* The state's size for k centres of d features; 0 beyond a varlena's. */
static Size
km_size(int k, int d)
{
	double		bytes = sizeof(KmStep) +
		(double) k * d * (sizeof(double) + 2 * sizeof(float)) +
		(double) k * (2 * sizeof(int64) + sizeof(FarRow));

	return bytes <= (double) MaxAllocSize ? (Size) bytes : 0;
}

/* A new state, zeroed, in the current memory context. */
static KmStep *
step_new(int k, int d, int flags)
{
	Size		size = km_size(k, d);
	KmStep	   *s;

	if (size == 0)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("kmeans_step's state for %d centroids of %d features exceeds 1 GB", k, d)));
	s = palloc0(size);
	SET_VARSIZE(s, size);
	s->version = KM_STATE_VERSION;
	s->k = k;
	s->d = d;
	s->flags = flags;
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
	FarRow	   *far = km_far(s);
	FarRow		r = {d2, label, 0, 0, id};
	int			p;

	if (!(d2 > 0.0f))
		return;
	if (s->nfar < s->k)
	{
		r.slot = s->nfar;
		p = s->nfar++;
		while (p > 0 && farther(&far[(p - 1) / 2], &r))
		{
			far[p] = far[(p - 1) / 2];
			p = (p - 1) / 2;
		}
	}
	else if (farther(&r, &far[0]))
	{
		r.slot = far[0].slot;
		p = 0;
		for (;;)
		{
			int			c = 2 * p + 1;

			if (c >= s->nfar)
				break;
			if (c + 1 < s->nfar && farther(&far[c], &far[c + 1]))
				c++;
			if (!farther(&r, &far[c]))
				break;
			far[p] = far[c];
			p = c;
		}
	}
	else
		return;
	far[p] = r;
	memcpy(km_far_x(s) + (Size) r.slot * s->d, x, sizeof(float) * s->d);
}

static int
cmp_farthest_first(const void *pa, const void *pb)
{
	const FarRow *a = pa,
			   *b = pb;

	return farther(a, b) ? -1 : farther(b, a) ? 1 : 0;
}

pg_noreturn static void
centroids_differ(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("kmeans_step needs the same centroids in every row"),
			 errdetail("One aggregate is one k-means iteration from one set of centres.")));
}

/* The row's features into x, checked; the row named by its id if given. */
static void
step_features(const KmStep *s, ArrayType *arr, bool has_id, int64 id, float *x)
{
	int			d = s->d;

	if (ARR_NDIM(arr) == 1 && ARR_DIMS(arr)[0] != s->d && !(s->flags & KM_ORIGIN))
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 has_id ?
				 errmsg("features of row with id %lld have %d elements, but the centroids have %d columns",
						(long long) id, ARR_DIMS(arr)[0], s->d) :
				 errmsg("features have %d elements, but the centroids have %d columns",
						ARR_DIMS(arr)[0], s->d)));
	(void) gc_features(arr, &d, x, has_id ? "row with id" : NULL, id);
}

/*
 * Whether the centroids argument is the same in every row by construction:
 * a constant, or a parameter of the query (the driver's $1); then it is
 * read once, otherwise compared in every row.  On a Citus worker the
 * aggregate runs inside worker_partial_agg(kmeans_step, ROW(features,
 * centroids [, id])), whose Aggref this is: the row's second field.
 */
static bool
centroids_fixed(FunctionCallInfo fcinfo)
{
	Aggref	   *ag = AggGetAggref(fcinfo);
	Node	   *e;

	if (ag == NULL || list_length(ag->args) < 2)
		return false;
	e = (Node *) ((TargetEntry *) lsecond(ag->args))->expr;
	if (IsA(e, RowExpr))
	{
		List	   *fields = ((RowExpr *) e)->args;

		if (list_length(fields) < 2)
			return false;
		e = (Node *) lsecond(fields);
	}
	return IsA(e, Const) ||
		(IsA(e, Param) && ((Param *) e)->paramkind == PARAM_EXTERN);
}

/* ---------------------------------------------------------------------
 * The rows in transit
 *
 * While rows arrive, the state is an expanded object (utils/expandeddatum.h)
 * over the flat KmStep: the rows are only read and checked one at a time
 * (errors name the row), and buffered; a block of them is labelled at once
 * (gc_glue_kmeans_labels: the blocked CPU kernel on the call's threads, or
 * the GPU, where gpuclust.device or the device argument sends it), then
 * added to the state as one row at a time would be: the labels are
 * gc_km_nearest's, each cluster's double sums take its rows in arrival
 * order, and the inertia, cost and farthest rows too, so the state does
 * not depend on the device or the block size, bit for bit.  The buffer starts at
 * KM_BUFFER_BYTES0 of features and doubles up to KM_BUFFER_BYTES, so a
 * group of few rows costs little; at that size it lives in shared memory
 * when the GPU worker may take the blocks (the job reads it in place;
 * like any DSM segment, outside work_mem's accounting: one per state that
 * reached full size).
 *
 * Whatever lets the state out flushes the buffer first: the final, combine
 * and text output functions (step_datum), and PostgreSQL itself when it
 * flattens the object (get_flat_size) to put it in a tuple (a parallel
 * worker's partial state on its way to the leader) or copy it.  The flat
 * form, which is the type's, never holds rows.
 * --------------------------------------------------------------------- */

#define KM_BUFFER_BYTES ((Size) 64 << 20)
#define KM_BUFFER_BYTES0 ((Size) 32 << 10)

typedef struct KmStepX
{
	ExpandedObjectHeader hdr;
	KmStep	   *s;				/* the flat state, in hdr.eoh_context */
	gc_device	device;			/* requested (argument or gpuclust.device) */
	GcInput		in;				/* the rows not yet added: in.n of in.d
								 * features in in.X, their ids in in.ids */
	int32	   *labels;			/* scratch: their labels, distances² (float */
	float	   *d2;				/* and double) and hashes */
	double	   *dist;
	uint64	   *hash;
	int64		cap;			/* rows the buffer holds */
} KmStepX;

/*
 * The buffered rows labelled and added, in arrival order (the per-row
 * terms and each cluster's sums on the call's threads, gc_kmeans_block_terms);
 * the buffer emptied.
 */
static void
step_flush(KmStepX *x)
{
	KmStep	   *s = x->s;
	int64	   *counts = km_counts(s);
	uint64	   *members = km_members(s);
	gc_ctx		ctx;

	if (x->in.n == 0)
		return;
	(void) gc_glue_kmeans_labels(x->device, &x->in, km_C(s), s->k, x->labels);
	gc_glue_ctx(&ctx);
	gc_kmeans_block_terms(&ctx, x->in.X, x->in.n, s->d, km_C(s), s->k,
						  x->labels, km_sums(s), x->d2, x->dist, x->hash);
	for (int64 i = 0; i < x->in.n; i++)
	{
		int			c = x->labels[i];

		counts[c]++;
		members[c] += x->hash[i];
		s->inertia += x->dist[i];
		s->cost += (double) x->d2[i];
		far_offer(s, x->d2[i], c, x->in.ids[i], x->in.X + i * s->d);
	}
	s->n += x->in.n;
	x->in.n = 0;
}

/* p (NULL: none yet) as bytes in cxt, its contents kept */
static void *
grow(MemoryContext cxt, void *p, Size bytes)
{
	return p == NULL ? MemoryContextAllocHuge(cxt, bytes) : repalloc_huge(p, bytes);
}

/* A full buffer: twice as large, up to KM_BUFFER_BYTES; else flushed. */
static void
step_make_room(KmStepX *x)
{
	MemoryContext cxt = x->hdr.eoh_context;
	int			d = x->s->d;
	int64		most = Max((int64) 1, (int64) (KM_BUFFER_BYTES / (sizeof(float) * d)));
	int64		first = Max((int64) 1, (int64) (KM_BUFFER_BYTES0 / (sizeof(float) * d)));
	int64		cap = Min(most, x->cap == 0 ? first : 2 * x->cap);
	Size		bytes = (Size) cap * d * sizeof(float);
	float	   *X = NULL;
	GcShared   *shared = NULL;

	if (x->cap == most)
	{
		step_flush(x);
		return;
	}
	if (cap == most && gc_worker != NULL &&
		gc_kmeans_labels_gpu_wanted(x->device, x->s->k))
		X = gc_job_shared_alloc(cxt, bytes, &shared);
	if (X == NULL)
		X = MemoryContextAllocHuge(cxt, bytes);
	if (x->in.n > 0)
		memcpy(X, x->in.X, (Size) x->in.n * d * sizeof(float));
	if (x->in.X != NULL)
		pfree(x->in.X);
	x->in.X = X;
	x->in.x_shared = shared;
	x->in.ids = grow(cxt, x->in.ids, sizeof(int64) * cap);
	x->labels = grow(cxt, x->labels, sizeof(int32) * cap);
	x->d2 = grow(cxt, x->d2, sizeof(float) * cap);
	x->dist = grow(cxt, x->dist, sizeof(double) * cap);
	x->hash = grow(cxt, x->hash, sizeof(uint64) * cap);
	x->cap = cap;
}

static Size
step_get_flat_size(ExpandedObjectHeader *eohptr)
{
	KmStepX    *x = (KmStepX *) eohptr;

	step_flush(x);
	return VARSIZE(x->s);
}

static void
step_flatten_into(ExpandedObjectHeader *eohptr, void *result, Size allocated_size)
{
	KmStepX    *x = (KmStepX *) eohptr;

	Assert(x->in.n == 0 && allocated_size == VARSIZE(x->s));
	memcpy(result, x->s, allocated_size);
}

static const ExpandedObjectMethods step_methods = {
	step_get_flat_size,
	step_flatten_into
};

/* The flat state s as an expanded object (a copy), a child of parent. */
static KmStepX *
step_expand(const KmStep *s, gc_device device, MemoryContext parent)
{
	MemoryContext cxt = AllocSetContextCreate(parent, "kmeans_step state",
											  ALLOCSET_DEFAULT_SIZES);
	KmStepX    *x = MemoryContextAllocZero(cxt, sizeof(KmStepX));

	EOH_init_header(&x->hdr, &step_methods, cxt);
	x->s = MemoryContextAlloc(cxt, VARSIZE(s));
	memcpy(x->s, s, VARSIZE(s));
	x->device = device;
	x->in.d = s->d;
	return x;
}

/* A state value, flat: an expanded one flushed (NULL when SQL NULL). */
static KmStep *
step_datum(Datum d)
{
	if (VARATT_IS_EXTERNAL_EXPANDED(DatumGetPointer(d)))
	{
		KmStepX    *x = (KmStepX *) DatumGetEOHP(d);

		step_flush(x);
		return x->s;
	}
	return (KmStep *) PG_DETOAST_DATUM(d);
}

/* The state argument i, flat (NULL when SQL NULL). */
static KmStep *
step_arg(FunctionCallInfo fcinfo, int i)
{
	return PG_ARGISNULL(i) ? NULL : step_datum(PG_GETARG_DATUM(i));
}

/* The device argument (the fifth), else gpuclust.device. */
static gc_device
step_device(FunctionCallInfo fcinfo)
{
	bool		isnull = PG_NARGS() <= 4 || PG_ARGISNULL(4);

	return gc_glue_device(isnull ? (Datum) 0 : PG_GETARG_DATUM(4), isnull);
}

/*
 * The transition function: kmeans_step(features, centroids [, id
 * [, device]]).  The state is made at the first row with features, as an
 * expanded object in the aggregate's context (which the executor keeps as
 * it is), then changed in place; a flat state given back (a copy the
 * executor made) is expanded again.  The device is the first row's, as
 * the centroids are (one value for the whole aggregate).
 */
Datum
kmeans_step_transfn(PG_FUNCTION_ARGS)
{
	KmStepX    *x = NULL;
	KmStep	   *s;
	MemoryContext aggcxt;
	bool		has_id = PG_NARGS() > 3;
	int64		id = 0;
	ArrayType  *arr;

	if (!AggCheckCallContext(fcinfo, &aggcxt))
		elog(ERROR, "kmeans_step_transfn called in non-aggregate context");
	if (PG_ARGISNULL(1))
	{
		if (PG_ARGISNULL(0))
			PG_RETURN_NULL();
		PG_RETURN_DATUM(PG_GETARG_DATUM(0));	/* NULL features: not clustered */
	}
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

	if (!PG_ARGISNULL(0))
	{
		Datum		d = PG_GETARG_DATUM(0);

		if (VARATT_IS_EXTERNAL_EXPANDED_RW(DatumGetPointer(d)))
			x = (KmStepX *) DatumGetEOHP(d);
		else
			x = step_expand(step_datum(d), step_device(fcinfo), aggcxt);
	}
	if (x == NULL)
	{
		int			fixed = centroids_fixed(fcinfo) ? KM_FIXED : 0;

		if (PG_ARGISNULL(2))
		{
			int			d = 0;

			/* the first row gives the dimension */
			(void) gc_features(arr, &d, NULL, has_id ? "row with id" : NULL, id);
			s = step_new(1, d, KM_ORIGIN | fixed);
		}
		else
		{
			float	   *Cg;
			int			d;
			int			k = gc_glue_parse_centroids(PG_GETARG_ARRAYTYPE_P(2),
													"centroids", 0, &d, &Cg,
													CurrentMemoryContext);

			s = step_new(k, d, fixed);
			memcpy(km_C(s), Cg, sizeof(float) * (Size) k * d);
			pfree(Cg);
		}
		x = step_expand(s, step_device(fcinfo), aggcxt);
		pfree(s);
	}
	else if (PG_ARGISNULL(2) != ((x->s->flags & KM_ORIGIN) != 0))
		centroids_differ();
	else if (!(x->s->flags & (KM_ORIGIN | KM_FIXED)))
	{
		/*
		 * The same centres in every row: compared by value (a pointer may be
		 * reused for another value in a per-row context).
		 */
		ArrayType  *ca = PG_GETARG_ARRAYTYPE_P(2);

		s = x->s;
		if (ARR_NDIM(ca) != 2 || ARR_DIMS(ca)[0] != s->k ||
			ARR_DIMS(ca)[1] != s->d || ARR_HASNULL(ca) ||
			ARR_ELEMTYPE(ca) != FLOAT4OID ||
			memcmp(ARR_DATA_PTR(ca), km_C(s), sizeof(float) * (Size) s->k * s->d) != 0)
			centroids_differ();
	}

	if (x->in.n == x->cap)
		step_make_room(x);
	step_features(x->s, arr, has_id, id, x->in.X + x->in.n * x->s->d);
	x->in.ids[x->in.n++] = id;
	PG_RETURN_DATUM(EOHPGetRWDatum(&x->hdr));
}

/* The combine function: b added to a, in place. */
Datum
kmeans_step_combine(PG_FUNCTION_ARGS)
{
	KmStep	   *a,
			   *b;
	FarRow	   *far;
	float	   *far_x;

	if (!AggCheckCallContext(fcinfo, NULL))
		elog(ERROR, "kmeans_step_combine called in non-aggregate context");
	a = step_arg(fcinfo, 0);
	b = step_arg(fcinfo, 1);
	if (b == NULL)
	{
		if (a == NULL)
			PG_RETURN_NULL();
		PG_RETURN_POINTER(a);
	}
	if (a == NULL)
		PG_RETURN_POINTER(b);	/* the executor copies it to its context */
	if ((a->flags & KM_ORIGIN) != (b->flags & KM_ORIGIN) || a->k != b->k)
		centroids_differ();
	if (a->d != b->d)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("features have %d elements in one part of kmeans_step and %d in another",
						b->d, a->d),
				 errdetail("All rows must have as many features as the first row with features.")));
	if (memcmp(km_C(a), km_C(b), sizeof(float) * (Size) a->k * a->d) != 0)
		centroids_differ();
	for (Size i = 0; i < (Size) a->k * a->d; i++)
		km_sums(a)[i] += km_sums(b)[i];
	for (int c = 0; c < a->k; c++)
	{
		km_counts(a)[c] += km_counts(b)[c];
		km_members(a)[c] += km_members(b)[c];
	}
	a->n += b->n;
	a->inertia += b->inertia;
	a->cost += b->cost;
	far = km_far(b);
	far_x = km_far_x(b);
	for (int i = 0; i < b->nfar; i++)
		far_offer(a, far[i].d2, far[i].label, far[i].id,
				  far_x + (Size) far[i].slot * b->d);
	/* the same value when a was one (an expanded state), else a's copy */
	if (VARATT_IS_EXTERNAL_EXPANDED_RW(DatumGetPointer(PG_GETARG_DATUM(0))))
		PG_RETURN_DATUM(PG_GETARG_DATUM(0));
	PG_RETURN_POINTER(a);
}

/*
 * kmeans_step_state's text form: "kms1:" and the state's bytes after its
 * varlena header in base64 (in the server's byte order), what Citus's
 * worker_partial_agg sends to the coordinator.
 */
#define KM_TEXT_PREFIX "kms1:"

Datum
kmeans_step_state_out(PG_FUNCTION_ARGS)
{
	KmStep	   *s = step_datum(PG_GETARG_DATUM(0));
	int			len = VARSIZE(s) - VARHDRSZ;
	int			plen = strlen(KM_TEXT_PREFIX);
	char	   *out = palloc(plen + pg_b64_enc_len(len) + 1);
	int			n;

	memcpy(out, KM_TEXT_PREFIX, plen);
	/* bytes as void *: char * before PostgreSQL 18, uint8 * since */
	n = pg_b64_encode((const void *) ((const char *) s + VARHDRSZ), len, out + plen,
					  pg_b64_enc_len(len));
	if (n < 0)
		elog(ERROR, "could not encode a kmeans_step state");
	out[plen + n] = '\0';
	PG_RETURN_CSTRING(out);
}

pg_noreturn static void
bad_state(const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
			 errmsg("invalid kmeans_step state: %s", why),
			 errdetail("A kmeans_step_state is one made by kmeans_step (its text form, as Citus sends it between nodes) of this gpuclust build and byte order.")));
}

/*
 * Reads a state back, and checks everything the functions index by (k, d,
 * nfar, the far rows' slots and labels, the heap order), so that no value
 * of the type can make them read or write outside it.
 */
Datum
kmeans_step_state_in(PG_FUNCTION_ARGS)
{
	const char *str = PG_GETARG_CSTRING(0);
	int			plen = strlen(KM_TEXT_PREFIX);
	int			slen;
	int			cap;
	char	   *buf;
	int			len;
	KmStep		h;
	KmStep	   *s;
	FarRow	   *far;
	bool	   *used;

	if (strncmp(str, KM_TEXT_PREFIX, plen) != 0)
		bad_state("it does not start with \"" KM_TEXT_PREFIX "\"");
	str += plen;
	slen = strlen(str);
	cap = pg_b64_dec_len(slen);
	buf = palloc(VARHDRSZ + cap + 1);
	len = pg_b64_decode(str, slen, (void *) (buf + VARHDRSZ), cap);
	if (len < 0)
		bad_state("not base64");
	if (len < (int) (sizeof(KmStep) - VARHDRSZ))
		bad_state("too short");
	memcpy((char *) &h + VARHDRSZ, buf + VARHDRSZ, sizeof(KmStep) - VARHDRSZ);
	if (h.version != KM_STATE_VERSION)
		bad_state("another version");
	if (h.k < 1 || h.d < 1 || (h.flags & ~(KM_ORIGIN | KM_FIXED)) != 0 ||
		((h.flags & KM_ORIGIN) && h.k != 1) || h.nfar < 0 || h.nfar > h.k ||
		h.n < 0 || km_size(h.k, h.d) != (Size) len + VARHDRSZ)
		bad_state("inconsistent sizes");
	/* the varlena, aligned (palloc's) */
	s = palloc(VARHDRSZ + len);
	memcpy((char *) s + VARHDRSZ, buf + VARHDRSZ, len);
	SET_VARSIZE(s, VARHDRSZ + len);
	pfree(buf);
	far = km_far(s);
	used = palloc0(sizeof(bool) * s->k);
	for (int i = 0; i < s->nfar; i++)
	{
		if (far[i].slot < 0 || far[i].slot >= s->k || used[far[i].slot] ||
			far[i].label < 0 || far[i].label >= s->k ||
			(i > 0 && farther(&far[(i - 1) / 2], &far[i])))
			bad_state("its farthest rows are inconsistent");
		used[far[i].slot] = true;
	}
	pfree(used);
	PG_RETURN_POINTER(s);
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
 * The state stays as it is (a window aggregate goes on with it).
 */
Datum
kmeans_step_final(PG_FUNCTION_ARGS)
{
	KmStep	   *s = step_arg(fcinfo, 0);
	TupleDesc	tupdesc;
	Datum		values[8];
	bool		nulls[8] = {false, false, false, false, false, false, false, false};
	float	   *Cn;
	const float *C,
			   *far_x;
	double		shift = 0.0;
	const int64 *counts;
	int64	   *cnt;
	double	   *sums;
	FarRow	   *far;
	int			j = 0;

	if (s == NULL)
		PG_RETURN_NULL();
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type of kmeans_step_final must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);
	C = km_C(s);
	far_x = km_far_x(s);
	counts = km_counts(s);

	/*
	 * Empty clusters re-seeded as the core's gc_km_update does: the rows
	 * farthest from their centres, the farthest to the lowest empty
	 * cluster, move there (their old cluster loses them).
	 */
	cnt = palloc(sizeof(int64) * s->k);
	memcpy(cnt, counts, sizeof(int64) * s->k);
	sums = km_sums(s);
	far = palloc(sizeof(FarRow) * Max(s->nfar, 1));
	memcpy(far, km_far(s), sizeof(FarRow) * s->nfar);
	qsort(far, s->nfar, sizeof(FarRow), cmp_farthest_first);
	for (int c = 0; c < s->k && j < s->nfar; c++)
		if (counts[c] == 0)
		{
			const FarRow *r = &far[j++];
			const float *x = far_x + (Size) r->slot * s->d;

			if (sums == km_sums(s))
			{
				sums = palloc(sizeof(double) * (Size) s->k * s->d);
				memcpy(sums, km_sums(s), sizeof(double) * (Size) s->k * s->d);
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

			Cn[i] = cnt[c] > 0 ? (float) (sums[i] / (double) cnt[c]) : C[i];
			dv = (double) Cn[i] - (double) C[i];
			shift += dv * dv;
		}
	values[0] = PointerGetDatum(rows_array(Cn, s->k, s->d));
	values[1] = PointerGetDatum(gc_flat_array(INT8OID, sizeof(int64), counts, s->k));
	values[2] = Float8GetDatum(s->inertia);
	values[3] = Float8GetDatum(shift);
	values[4] = Int64GetDatum(s->n);
	values[5] = PointerGetDatum(gc_flat_array(INT8OID, sizeof(int64), (const int64 *) km_members(s), s->k));
	values[6] = Float8GetDatum(s->cost);
	values[7] = Int32GetDatum(j);	/* the clusters re-seeded */
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/* ---------------------------------------------------------------------
 * kmeans_rank_counts
 *
 * The positional draw of the distributed seeding (fetch_rows) needs the
 * ranks of ids among the rows: for each pivot, the rows whose id is below
 * it.  The state is an int8[], a real type, so that Citus runs the partial
 * aggregate on the shards and ships a few numbers back (as dbscan_bounds'
 * float8[]): {pivots[P], bins[P + 1]}, bin j counting the rows with j
 * pivots at or below their id, so that a row costs one binary search; the
 * final function adds the bins up.  The pivots are kept in the state so
 * that two parts over other pivots are an error, not a wrong sum.
 * --------------------------------------------------------------------- */

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
	int			reseeded;		/* clusters re-seeded in this step */
} StepOut;

/* A pass of gpu_kmeans_distributed (driver.h). */
#define KM_PASS(what_, round_) ((GcPass) {"gpu_kmeans_distributed", (what_), (round_)})

static void
run_step(const GcPass *pass, SPIPlanPtr plan, ArrayType *C,
		 MemoryContext cxt, StepOut *out)
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
static ArrayType *
fetch_rows(const char *what, const char *nsp, const char *source, int64 n,
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
	 * into the query), in the order of the window this replaces
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
 * this is the core's k-means|| (up to phi's rounding: the core's is the
 * exact sum on its grid, kmeans_step's a double sum).
 */
static ArrayType *
kmeans_parallel_init(const char *nsp, const char *source, SPIPlanPtr step,
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
	cand = fetch_rows("k-means|| seeding, its first candidate", nsp, source, n, &first, 1, d, cxt);
	run_step(&pass, step, cand, cxt, &st);
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
		run_step(&pass, step, cand, cxt, &st);
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
	StepOut		st,
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
	run_step(&pass, plan, NULL, cxt, &st);
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
		pass = KM_PASS("the pass for the rows' variance", 0);
		run_step(&pass, plan, st.centroids, cxt, &st);
		tol_scaled = tol * (st.inertia / ((double) n * d));
	}

	if (given != NULL)
		C = given;
	else if (strcmp(init, "k-means||") == 0)
		C = kmeans_parallel_init(nsp, source, plan, n, d, k, seed, cxt);
	else
	{
		int64	   *rows = palloc(sizeof(int64) * k);
		gc_status	gs = {GC_OK, ""};
		gc_ctx		ctx;

		gc_glue_ctx(&ctx);
		if (gc_km_random_rows(&ctx, n, k, (uint64) seed, GC_KM_STREAM_RANDOM,
							  rows, &gs) != GC_OK)
			gc_glue_report(&gs, "k-means");
		C = fetch_rows("random seeding", nsp, source, n, rows, k, d, cxt);
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
		run_step(&pass, plan, C, cxt, &st);
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
	run_step(&pass, plan, C, cxt, &st);
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
