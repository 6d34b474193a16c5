/*-------------------------------------------------------------------------
 *
 * kmeans_step.c
 *	  k-means as a combinable aggregate: one Lloyd iteration over rows
 *	  wherever they are (gpu_kmeans_distributed iterates it:
 *	  kmeans_distributed_sql.c).
 *
 *	  kmeans_step(features, centroids [, id [, device]]) -> kmeans_step_result
 *		(centroids real[], counts bigint[], inertia float8, shift float8,
 *		 n bigint, members bigint[])
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

#include "distributed/kmeans_distributed.h"
#include "common/gpuclust.h"
#include "common/shared_memory.h"
#include "common/ingest.h"
#include "kmeans/kmeans_glue.h"
#include "core/gpuclust_core.h"
#include "core/common/rng.h"

PG_FUNCTION_INFO_V1(kmeans_step_transfn);
PG_FUNCTION_INFO_V1(kmeans_step_combine);
PG_FUNCTION_INFO_V1(kmeans_step_state_in);
PG_FUNCTION_INFO_V1(kmeans_step_state_out);
PG_FUNCTION_INFO_V1(kmeans_step_final);

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
	if (cap == most && gc_kmeans_labels_gpu_wanted(x->device, x->s->k))
		X = gc_shared_alloc(cxt, bytes, &shared);
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
const float *
kmd_array_rows(ArrayType *a)
{
	return (const float *) ARR_DATA_PTR(a);
}

/* A k x d real[] of the k x d floats C. */
ArrayType *
kmd_rows_array(const float *C, int k, int d)
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
	values[0] = PointerGetDatum(kmd_rows_array(Cn, s->k, s->d));
	values[1] = PointerGetDatum(gc_flat_array(INT8OID, sizeof(int64), counts, s->k));
	values[2] = Float8GetDatum(s->inertia);
	values[3] = Float8GetDatum(shift);
	values[4] = Int64GetDatum(s->n);
	values[5] = PointerGetDatum(gc_flat_array(INT8OID, sizeof(int64), (const int64 *) km_members(s), s->k));
	values[6] = Float8GetDatum(s->cost);
	values[7] = Int32GetDatum(j);	/* the clusters re-seeded */
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

