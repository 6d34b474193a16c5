/*-------------------------------------------------------------------------
 *
 * ingest.c
 *	  Read a source query of (id, features) rows into one float32 matrix.
 *
 * The source must be one statement that only reads: it is prepared first,
 * and a statement that writes (INSERT, UPDATE, DELETE or MERGE, with or
 * without RETURNING), a data-modifying WITH clause, a locking clause (FOR
 * UPDATE / SHARE) or a utility statement is refused before anything runs.
 * It then runs read-only (SPI's read_only execution, which refuses such a
 * statement again, inside a read-only transaction state, which stops
 * functions it calls from writing too).
 *
 * The query runs to completion into a DestReceiver of ours, which packs
 * each row straight from the executor's slot into the matrix: no tuple is
 * copied or materialised by SPI, features stored inline are read in place
 * (short ones through one reused buffer), only compressed or out-of-line
 * ones are detoasted (and freed at once), and nothing is allocated per row
 * otherwise.  Run to completion, the query may use a parallel plan where
 * the planner finds it safe.  The matrix, ids and NULL-feature flags grow
 * by doubling with huge allocations, so inputs beyond 1 GB work.
 *
 * The id column may be smallint, integer or bigint (or a domain over one),
 * or, when the caller asks for it (a keyed call: gpu_dbscan(source,
 * NULL::uuid, ...)), of any type: such ids are copied as they are and
 * carried back, and the errors name their row by its ordinal;
 * the features column real[] or double precision[] (or a domain over one),
 * or any type with a cast to real[] (numeric[], integer[], pgvector's
 * vector ...), which is applied to each row with an expression built once.
 *
 * Every row is validated; a bad one raises an ERROR naming its id.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <ctype.h>
#include <float.h>
#include <math.h>

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "common/shortest_dec.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "nodes/params.h"
#include "optimizer/optimizer.h"
#include "parser/parse_coerce.h"
#include "tcop/dest.h"
#include "tcop/utility.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/float.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/plancache.h"
#include "utils/syscache.h"

#include "core/common/metric.h"
#include "common/shared_memory.h"
#include "common/ingest.h"

/* rows between interrupt checks in the receiver */
#define GC_CHECK_ROWS		4096
/* initial capacities, without an estimate of the rows */
#define GC_INITIAL_ROWS		1024
#define GC_INITIAL_X_BYTES	((Size) 1024 * 1024)

typedef enum FeatureKind
{
	FEATURES_FLOAT4,			/* real[]: copied */
	FEATURES_FLOAT8,			/* double precision[]: narrowed, checked */
	FEATURES_CAST				/* another type: cast to real[] first */
} FeatureKind;

typedef struct IngestState
{
	DestReceiver pub;			/* first: the executor sends rows here */
	GcInput    *in;
	MemoryContext outcxt;		/* where the GcInput arrays live */
	MemoryContext workcxt;		/* the cast's state; deleted at the end */
	int64		rows_cap;		/* capacity of ids and has_features */
	int64		x_cap;			/* capacity of X, in rows */
	bool		started;		/* the receiver's startup ran */
	Oid			id_type;		/* INT2OID, INT4OID or INT8OID; or the
								 * id_type asked for (gc_ingest) */
	bool		by_ordinal;		/* ids not integers: ordinals in ids */
	int16		key_len;		/* keys: the id type's length */
	bool		key_byval;		/* ... and whether by value */
	Oid			key_out;		/* its output function, for errors */
	Datum		cur_key;		/* by_ordinal: the row being read's id */
	const char *what;			/* "row with id", "source row", "init row" */
	bool		centroids;		/* gc_ingest_centroids: (features) rows */
	int			flags;			/* GC_INGEST_* */
	int			fcol;			/* the features' column */
	int			wcol;			/* the weights' column, or -1 */
	Oid			wtype;			/* its base type */
	FeatureKind kind;
	GcFeatureCast cast;			/* FEATURES_CAST: column -> real[] */
	double		est_rows;		/* the planner's estimate of the rows */
	ErrorContextCallback *base_context; /* gc_ingest's caller's */
	/* a short-header (1-byte) array, given a 4-byte header and aligned */
	union
	{
		double		align;
		char		bytes[VARHDRSZ + VARATT_SHORT_MAX];
	}			shortbuf;
} IngestState;

/* ---------------------------------------------------------------------
 * Column checks
 * --------------------------------------------------------------------- */

/*
 * The keyed form for a key that is not an integer (uuid, text ...): a NULL
 * of its type after the source query makes the results' id that type.
 */
static int
id_hint(Form_pg_attribute idatt)
{
	char	   *type = format_type_be(idatt->atttypid);

	return errhint("For ids of type %s, pass NULL::%s right after the source query, as in gpu_dbscan('SELECT %s, features FROM t', NULL::%s, eps, min_pts): the results' id is then of type %s.",
				   type, type, quote_identifier(NameStr(idatt->attname)),
				   type, type);
}

/* ERROR (42804) unless the id column is of an integer type. */
static void
check_integer_id(Form_pg_attribute idatt)
{
	Oid			base = getBaseType(idatt->atttypid);

	if (base != INT2OID && base != INT4OID && base != INT8OID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("first column of the source query must be of type smallint, integer or bigint"),
				 errdetail("Column \"%s\" is of type %s.",
						   NameStr(idatt->attname),
						   format_type_be(idatt->atttypid)),
				 id_hint(idatt)));
}

/* The weight column (the third), of a numeric type. */
static void
check_weight_column(IngestState *st, TupleDesc td)
{
	Form_pg_attribute watt = TupleDescAttr(td, 2);
	Oid			base = getBaseType(watt->atttypid);

	if (base != INT2OID && base != INT4OID && base != INT8OID &&
		base != FLOAT4OID && base != FLOAT8OID && base != NUMERICOID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("third column of the source query, the sample weight, must be of a numeric type"),
				 errdetail("Column \"%s\" is of type %s.",
						   NameStr(watt->attname),
						   format_type_be(watt->atttypid)),
				 errhint("Cast it to double precision in the source query.")));
	st->wcol = 2;
	st->wtype = base;
}

static void
check_columns(IngestState *st, TupleDesc td)
{
	Form_pg_attribute idatt;
	Form_pg_attribute fatt;
	Oid			base;
	bool		is_integer;

	st->fcol = 1;
	st->wcol = -1;
	if (st->centroids)
	{
		if (td->natts != 1)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("init query must return exactly one column, the features of each initial centroid"),
					 errdetail_plural("The query returns %d column.",
									  "The query returns %d columns.",
									  td->natts, td->natts),
					 errhint("Pass a query such as 'SELECT features FROM centres ORDER BY id'.")));
		st->fcol = 0;
		fatt = TupleDescAttr(td, 0);
		goto features;
	}
	if (td->natts == 3 && (st->flags & GC_INGEST_WEIGHTS))
		check_weight_column(st, td);
	else if (td->natts != 2 && (st->flags & GC_INGEST_WEIGHTS))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("source query must return two columns, (id, features), or three, (id, features, weight)"),
				 errdetail_plural("The query returns %d column.",
								  "The query returns %d columns.",
								  td->natts, td->natts)));
	else if (td->natts != 2)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("source query must return exactly two columns, (id, features)"),
				 errdetail_plural("The query returns %d column.",
								  "The query returns %d columns.",
								  td->natts, td->natts)));

	idatt = TupleDescAttr(td, 0);
	base = getBaseType(idatt->atttypid);
	is_integer = base == INT2OID || base == INT4OID || base == INT8OID;
	/* integer ids name their rows, also where any type will do */
	if (st->id_type == InvalidOid || (st->id_type == ANYOID && is_integer))
	{
		check_integer_id(idatt);
		st->id_type = base;
	}
	else
	{
		bool		isvarlena;

		if (st->id_type != ANYOID && idatt->atttypid != st->id_type &&
			base != st->id_type)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("first column of the source query must be of type %s, as id_type is",
							format_type_be(st->id_type)),
					 errdetail("Column \"%s\" is of type %s.",
							   NameStr(idatt->attname),
							   format_type_be(idatt->atttypid)),
					 errhint("Pass NULL::%s as id_type, or cast the column in the source query.",
							 format_type_be(idatt->atttypid))));
		st->by_ordinal = true;
		st->what = "source row";
		get_typlenbyval(idatt->atttypid, &st->key_len, &st->key_byval);
		getTypeOutputInfo(idatt->atttypid, &st->key_out, &isvarlena);
	}

	fatt = TupleDescAttr(td, 1);
features:
	base = getBaseType(fatt->atttypid);
	if (base == FLOAT4ARRAYOID)
		st->kind = FEATURES_FLOAT4;
	else if (base == FLOAT8ARRAYOID)
		st->kind = FEATURES_FLOAT8;
	else if (gc_feature_cast_init(&st->cast, fatt->atttypid, fatt->atttypmod,
								  st->what))
		st->kind = FEATURES_CAST;
	else
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 st->centroids ?
				 errmsg("the column of the init query must be of type real[] or double precision[]") :
				 errmsg("second column of the source query must be of type real[] or double precision[]"),
				 errdetail("Column \"%s\" is of type %s, which has no cast to real[].",
						   NameStr(fatt->attname),
						   format_type_be(fatt->atttypid)),
				 gc_no_cast_hint(fatt->atttypid)));
}

int
gc_no_cast_hint(Oid type)
{
	HeapTuple	tup = SearchSysCache1(TYPEOID, ObjectIdGetDatum(getBaseType(type)));
	bool		postgis = false;

	if (HeapTupleIsValid(tup))
	{
		const char *name = NameStr(((Form_pg_type) GETSTRUCT(tup))->typname);

		postgis = strcmp(name, "geometry") == 0 || strcmp(name, "geography") == 0;
		ReleaseSysCache(tup);
	}
	if (postgis)
		return errhint("CREATE EXTENSION gpuclust_postgis adds the casts of PostGIS points to real[].");
	return 0;
}

/* ---------------------------------------------------------------------
 * Features of another type: the cast to real[]
 * --------------------------------------------------------------------- */

bool
gc_feature_cast_init(GcFeatureCast *c, Oid type, int32 typmod,
					 const char *what)
{
	Param	   *placeholder = makeNode(Param);
	Node	   *cast;

	/*
	 * Each value stands in for the placeholder: "$1::real[]".  A Param,
	 * not a CaseTestExpr, so that the planner inlines a cast function
	 * written in SQL (gpuclust_postgis's), which it never does around a
	 * CaseTestExpr.
	 */
	placeholder->paramkind = PARAM_EXTERN;
	placeholder->paramid = 1;
	placeholder->paramtype = type;
	placeholder->paramtypmod = typmod;
	placeholder->paramcollid = get_typcollation(type);
	placeholder->location = -1;
	cast = coerce_to_target_type(NULL, (Node *) placeholder, type,
								 FLOAT4ARRAYOID, -1, COERCION_EXPLICIT,
								 COERCE_EXPLICIT_CAST, -1);
	if (cast == NULL)
		return false;
	memset(c, 0, sizeof(*c));
	c->type = type;
	c->what = what;
	cast = (Node *) expression_planner((Expr *) cast);
	c->params = makeParamList(1);
	c->params->params[0].ptype = type;
	c->params->params[0].pflags = PARAM_FLAG_CONST;
	c->state = ExecInitExprWithParams((Expr *) cast, c->params);
	c->econtext = CreateStandaloneExprContext();
	c->econtext->ecxt_param_list_info = c->params;
	return true;
}

static void
cast_error_callback(void *arg)
{
	GcFeatureCast *c = (GcFeatureCast *) arg;

	errcontext("casting features of type %s of %s %lld to real[]",
			   format_type_be(c->type), c->what, (long long) c->rowno);
}

Datum
gc_feature_cast(GcFeatureCast *c, int64 rowno, Datum value, bool *isnull)
{
	ErrorContextCallback errcb;
	Datum		result;

	/* the previous row's result and scratch go */
	ResetExprContext(c->econtext);
	c->rowno = rowno;
	errcb.callback = cast_error_callback;
	errcb.arg = c;
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;

	c->params->params[0].value = value;
	c->params->params[0].isnull = false;
	result = ExecEvalExprSwitchContext(c->state, c->econtext, isnull);

	error_context_stack = errcb.previous;
	return result;
}

void
gc_feature_cast_end(GcFeatureCast *c)
{
	if (c->econtext != NULL)
		FreeExprContext(c->econtext, true);
	c->econtext = NULL;
}

/* ---------------------------------------------------------------------
 * Growth of the output arrays
 * --------------------------------------------------------------------- */

/*
 * The first allocation of an output array of rowbytes per row: for the
 * rows the planner expects (with a margin), when it expects more than
 * small_rows and the memory can be had, so that a table's matrix is
 * allocated once and in huge pages; else for small_rows.  Capped at
 * maxrows.  Growth beyond doubles.
 */
static void *
first_alloc(IngestState *st, Size rowbytes, int64 small_rows, int64 maxrows,
			int64 *cap)
{
	double		want = st->est_rows + st->est_rows / 16 + 16;

	if (want > (double) small_rows)
	{
		int64		rows = want < (double) maxrows ? (int64) want : maxrows;
		void	   *p = MemoryContextAllocExtended(st->outcxt, (Size) rows * rowbytes,
												   MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM);

		if (p != NULL)
		{
			*cap = rows;
			return p;
		}
	}
	*cap = Min(small_rows, maxrows);
	return MemoryContextAllocHuge(st->outcxt, (Size) *cap * rowbytes);
}

static void
grow_rows(IngestState *st)
{
	GcInput    *in = st->in;
	int64		maxrows = (int64) (MaxAllocHugeSize / sizeof(int64));
	int64		newcap;

	if (st->rows_cap == 0)
	{
		in->ids = first_alloc(st, sizeof(int64), GC_INITIAL_ROWS, maxrows,
							  &newcap);
		in->has_features = MemoryContextAllocExtended(st->outcxt, newcap * sizeof(bool),
													  MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM);
		if (in->has_features == NULL)
		{
			/* the estimate's allocation fits once but not twice */
			pfree(in->ids);
			newcap = GC_INITIAL_ROWS;
			in->ids = MemoryContextAllocHuge(st->outcxt, newcap * sizeof(int64));
			in->has_features = MemoryContextAllocHuge(st->outcxt, newcap * sizeof(bool));
		}
	}
	else
	{
		newcap = Min(st->rows_cap * 2, maxrows);
		if (newcap <= st->rows_cap)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("source query returns too many rows")));
		in->ids = repalloc_huge(in->ids, newcap * sizeof(int64));
		in->has_features = repalloc_huge(in->has_features, newcap * sizeof(bool));
	}
	if (st->by_ordinal && st->id_type != ANYOID)
		in->keys = in->keys == NULL ?
			MemoryContextAllocHuge(st->outcxt, newcap * sizeof(Datum)) :
			repalloc_huge(in->keys, newcap * sizeof(Datum));
	st->rows_cap = newcap;
	gc_advise_huge_pages(in->ids, newcap * sizeof(int64));
}

/*
 * X in shared memory when the GPU worker takes jobs (gc_shared_alloc):
 * the worker reads it where ingest wrote it.  The first segment is sized
 * as first_alloc sizes X; a larger one replaces it as X grows.  NULL (X
 * stays private) when there is no room.
 */
static float *
shared_x(IngestState *st, int64 rows)
{
	GcInput    *in = st->in;
	GcShared   *old = in->x_shared;
	float	   *X;

	X = gc_shared_alloc(st->outcxt, (Size) rows * (Size) in->d * sizeof(float),
							&in->x_shared);
	if (X == NULL)
	{
		in->x_shared = old;
		return NULL;
	}
	if (old != NULL)
	{
		memcpy(X, in->X, (Size) in->n * (Size) in->d * sizeof(float));
		gc_shared_free(old);
	}
	st->x_cap = rows;
	in->X = X;
	return X;
}

/* The weights (with a weight column) as long as X's capacity. */
static void
grow_weights(IngestState *st)
{
	GcInput    *in = st->in;

	if (st->wcol < 0)
		return;
	in->weights = in->weights == NULL ?
		MemoryContextAllocHuge(st->outcxt, (Size) st->x_cap * sizeof(double)) :
		repalloc_huge(in->weights, (Size) st->x_cap * sizeof(double));
}

static void
grow_x(IngestState *st)
{
	GcInput    *in = st->in;
	Size		rowbytes = (Size) in->d * sizeof(float);
	int64		maxrows = (int64) (MaxAllocHugeSize / rowbytes);
	int64		newcap;

	if (st->x_cap == 0)
	{
		double		want = st->est_rows + st->est_rows / 16 + 16;
		int64		small = Max((int64) 16, (int64) (GC_INITIAL_X_BYTES / rowbytes));

		/* (an init query's few centroids stay private) */
		if (!st->centroids && (st->flags & GC_INGEST_PRIVATE) == 0 &&
			shared_x(st, want > (double) small && want < (double) maxrows ?
					 (int64) want : small) != NULL)
		{
			grow_weights(st);
			return;
		}
		in->X = first_alloc(st, rowbytes, small, maxrows, &newcap);
	}
	else
	{
		newcap = Min(st->x_cap * 2, maxrows);
		if (newcap <= st->x_cap)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("features of the source query exceed the maximum size of %zu bytes",
							(Size) MaxAllocHugeSize)));
		if (in->x_shared != NULL && shared_x(st, newcap) != NULL)
		{
			grow_weights(st);
			return;
		}
		if (in->x_shared != NULL)
		{
			/* no room for a larger segment: on in private memory */
			float	   *X = MemoryContextAllocHuge(st->outcxt, (Size) newcap * rowbytes);

			memcpy(X, in->X, (Size) in->n * rowbytes);
			gc_shared_free(in->x_shared);
			in->x_shared = NULL;
			in->X = X;
		}
		else
			in->X = repalloc_huge(in->X, (Size) newcap * rowbytes);
	}
	st->x_cap = newcap;
	grow_weights(st);
	/* huge pages: filling the matrix then takes one page fault per 2 MB,
	 * which is most of what copying the rows costs */
	gc_advise_huge_pages(in->X, (Size) newcap * rowbytes);
}

/* ---------------------------------------------------------------------
 * One row
 * --------------------------------------------------------------------- */

/* "features of row with id 7", "features of partition row 3", "features" */
static char *
subject(const char *what, int64 rowno)
{
	if (what != NULL)
		return psprintf("features of %s %lld", what, (long long) rowno);
	return pstrdup("features");
}

/* The error for the NaN or infinite value v at 0-based position j. */
pg_noreturn static void
report_nonfinite(const char *what, int64 rowno, int j, double v)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_EXCEPTION),
			 isnan(v) ?
			 errmsg("%s contain NaN at position %d", subject(what, rowno), j + 1) :
			 errmsg("%s contain an infinite value at position %d", subject(what, rowno), j + 1),
			 errdetail("Features must be finite numbers.")));
	pg_unreachable();
}

float
gc_feature_bound(int d)
{
	static int	last_d = -1;
	static float last_bound;

	if (d != last_d)
	{
		double		limit = gc_feature_limit(d);
		float		b = (float) limit;

		/* the largest float <= limit: |v| <= b exactly when |v| <= limit */
		if ((double) b > limit)
			b = nextafterf(b, 0.0f);
		last_bound = b;
		last_d = d;
	}
	return last_bound;
}

void
gc_report_out_of_range(const char *subj, const char *where, float v, int d)
{
	char		value[FLOAT_SHORTEST_DECIMAL_LEN];
	char		limit[FLOAT_SHORTEST_DECIMAL_LEN];

	/* as real prints them: the value, and the largest one allowed */
	float_to_shortest_decimal_buf(fabsf(v), value);
	float_to_shortest_decimal_buf(gc_feature_bound(d), limit);
	ereport(ERROR,
			(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
			 errmsg("%s contain a value out of range at %s", subj, where),
			 errdetail("|%s| exceeds %s, the largest magnitude of a feature in %d dimension%s (2^62/sqrt(%d)), beyond which squared distances overflow single precision.",
					   value, limit, d, d == 1 ? "" : "s", d),
			 errhint("Scale the features down, for example divide them all by a constant.")));
	pg_unreachable();
}

/*
 * The error for the first bad value of src (len values of type float8 or
 * float4): NaN or infinite, beyond the range of real, or beyond bound.
 */
pg_noreturn static void
report_bad_value(const void *src, bool is_float8, int len, float bound,
				 const char *what, int64 rowno)
{
	for (int j = 0; j < len; j++)
	{
		double		v = is_float8 ? ((const float8 *) src)[j] :
			(double) ((const float4 *) src)[j];
		float		f = (float) v;

		if (!isfinite(v))
			report_nonfinite(what, rowno, j, v);
		if (isinf(f))
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("%s contain a value out of range for type real at position %d",
							subject(what, rowno), j + 1),
					 errdetail("Features are computed in single precision; %g exceeds its largest value.",
							   v)));
		if (!gc_feature_ok(f, bound))
			gc_report_out_of_range(subject(what, rowno),
								   psprintf("position %d", j + 1), f, len);
	}
	elog(ERROR, "no bad value in %s", subject(what, rowno));
	pg_unreachable();
}

/* The largest bit pattern of |v[j]|, j < n (sign bits cleared). */
static inline uint32
max_abs_bits(const float *v, int n)
{
	const uint32 *bits = (const uint32 *) v;
	uint32		m = 0;

	for (int j = 0; j < n; j++)
	{
		uint32		b = bits[j] & 0x7fffffffu;

		m = b > m ? b : m;
	}
	return m;
}

int
gc_features(ArrayType *arr, int *d, float *dst, const char *what,
				 int64 rowno)
{
	int			ndim = ARR_NDIM(arr);
	Oid			elemtype = ARR_ELEMTYPE(arr);
	int			len;
	float		bound;
	uint32		bound_bits;
	uint32		max_bits = 0;

	if (elemtype != FLOAT4OID && elemtype != FLOAT8OID)
		elog(ERROR, "unexpected element type %u in %s", elemtype,
			 subject(what, rowno));
	if (ndim == 0 || (ndim == 1 && ARR_DIMS(arr)[0] == 0))
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("%s are an empty array", subject(what, rowno)),
				 errdetail("Each row needs at least one feature; use NULL features to leave a row unclustered.")));
	if (ndim != 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("%s must be a one-dimensional array", subject(what, rowno)),
				 errdetail("The array has %d dimensions.", ndim)));
	len = ARR_DIMS(arr)[0];
	if (*d == 0)
		*d = len;
	else if (len != *d)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("%s have %d elements, expected %d",
						subject(what, rowno), len, *d),
				 errdetail("All rows must have as many features as the first row with features.")));

	if (ARR_HASNULL(arr))
	{
		bits8	   *bitmap = ARR_NULLBITMAP(arr);

		for (int j = 0; j < len; j++)
			if ((bitmap[j / 8] & (1 << (j % 8))) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						 errmsg("%s contain a NULL at position %d",
								subject(what, rowno), j + 1),
						 errhint("Use NULL for the whole features value to leave a row unclustered.")));
	}

	/*
	 * Every value passes gc_feature_ok (|v| <= bound; NaN, infinities and
	 * double values beyond real, which narrow to infinity, fail) exactly
	 * when the largest bit pattern of the |v| as float is at most bound's:
	 * for non-negative floats the patterns order as the values do, and
	 * infinity's and every NaN's lie above every finite one's.  So one
	 * integer maximum over the row, which vectorises, tests it; the first
	 * failure is then found and told apart.
	 */
	bound = gc_feature_bound(len);
	memcpy(&bound_bits, &bound, sizeof(bound_bits));
	if (elemtype == FLOAT8OID)
	{
		const float8 *src = (const float8 *) ARR_DATA_PTR(arr);
		float		buf[64];

		for (int j0 = 0; j0 < len; j0 += lengthof(buf))
		{
			int			m = Min(len - j0, (int) lengthof(buf));
			float	   *f = dst ? dst + j0 : buf;

			for (int j = 0; j < m; j++)
				f[j] = (float) src[j0 + j];
			max_bits = Max(max_bits, max_abs_bits(f, m));
		}
		if (max_bits > bound_bits)
			report_bad_value(src, true, len, bound, what, rowno);
	}
	else
	{
		const float4 *src = (const float4 *) ARR_DATA_PTR(arr);

		max_bits = max_abs_bits(src, len);
		if (max_bits > bound_bits)
			report_bad_value(src, false, len, bound, what, rowno);
		if (dst)
			memcpy(dst, src, (Size) len * sizeof(float));
	}
	return len;
}

/*
 * The features value as a flat array: in place when it is stored inline
 * with a 4-byte header; a short (1-byte header) one copied into st's
 * buffer; a compressed, out-of-line or expanded one detoasted (a copy the
 * caller frees).
 */
static ArrayType *
flat_array(IngestState *st, Datum value)
{
	struct varlena *v = (struct varlena *) DatumGetPointer(value);

	if (!VARATT_IS_EXTENDED(v))
		return (ArrayType *) v;
	/* (a TOAST pointer has a 1-byte header too) */
	if (VARATT_IS_SHORT(v) && !VARATT_IS_EXTERNAL(v))
	{
		Size		len = VARSIZE_SHORT(v) - VARHDRSZ_SHORT;
		struct varlena *buf = (struct varlena *) st->shortbuf.bytes;

		SET_VARSIZE(buf, len + VARHDRSZ);
		memcpy(VARDATA(buf), VARDATA_SHORT(v), len);
		return (ArrayType *) buf;
	}
	return DatumGetArrayTypeP(value);
}

/* Append the features of the row with id id to X, checking them. */
static void
add_features(IngestState *st, int64 id, Datum value)
{
	GcInput    *in = st->in;
	ArrayType  *arr = flat_array(st, value);

	/* the first row with features fixes d, which sizes X */
	if (in->d == 0)
		(void) gc_features(arr, &in->d, NULL, st->what, id);
	if (in->n >= st->x_cap)
		grow_x(st);
	gc_features(arr, &in->d, in->X + (Size) in->n * (Size) in->d,
				st->what, id);
	in->n++;
	if ((Pointer) arr != DatumGetPointer(value) &&
		(Pointer) arr != st->shortbuf.bytes)
		pfree(arr);
}

/* ---------------------------------------------------------------------
 * The receiver: the executor sends it the source's rows
 * --------------------------------------------------------------------- */

static void
ingest_startup(DestReceiver *self, int operation, TupleDesc typeinfo)
{
	IngestState *st = (IngestState *) self;
	MemoryContext oldcxt;

	/*
	 * SPI reports errors with the statement as their context; ours name
	 * the row, and the source's own errors while it runs read as they did
	 * through a cursor: without it.  (The callbacks above gc_ingest stay.)
	 */
	error_context_stack = st->base_context;

	oldcxt = MemoryContextSwitchTo(st->workcxt);
	check_columns(st, typeinfo);
	MemoryContextSwitchTo(oldcxt);
	st->started = true;
}

/* The context of an error about a row whose id is not an integer. */
static void
key_error_callback(void *arg)
{
	IngestState *st = (IngestState *) arg;

	errcontext("source row %lld has id %s", (long long) st->in->n_rows + 1,
			   quote_literal_cstr(OidOutputFunctionCall(st->key_out,
														st->cur_key)));
}

/* A copy of the id value in outcxt (detoasted: it outlives the scan). */
static Datum
copy_key(IngestState *st, Datum value)
{
	MemoryContext oldcxt;
	Datum		copy;

	if (st->key_byval)
		return value;
	oldcxt = MemoryContextSwitchTo(st->outcxt);
	if (st->key_len == -1)
		copy = PointerGetDatum(PG_DETOAST_DATUM_COPY(value));
	else
		copy = datumCopy(value, false, st->key_len);
	MemoryContextSwitchTo(oldcxt);
	return copy;
}

/* The sample weight of the row just added to X (row rowno, for errors). */
static void
add_weight(IngestState *st, int64 rowno, Datum value, bool isnull)
{
	double		w;

	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("source query returned a NULL weight"),
				 errdetail("The %s %lld has features but a NULL weight.",
						   st->what, (long long) rowno),
				 errhint("Weigh it 0 to leave it out of the centres, or NULL its features to leave it unclustered.")));
	switch (st->wtype)
	{
		case INT2OID:
			w = DatumGetInt16(value);
			break;
		case INT4OID:
			w = DatumGetInt32(value);
			break;
		case INT8OID:
			w = (double) DatumGetInt64(value);
			break;
		case FLOAT4OID:
			w = DatumGetFloat4(value);
			break;
		case FLOAT8OID:
			w = DatumGetFloat8(value);
			break;
		default:
			w = DatumGetFloat8(DirectFunctionCall1(numeric_float8, value));
			break;
	}
	if (!(w >= 0.0 && w <= FLT_MAX))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid weight %s of the %s %lld",
						float8out_internal(w), st->what, (long long) rowno),
				 errdetail("Sample weights must be finite numbers from 0 to %g (the largest real), as scikit-learn's sample_weight; a row of weight 0 is clustered but moves no centre.",
						   (double) FLT_MAX)));
	st->in->weights[st->in->n - 1] = w;
}

static bool
ingest_receive(TupleTableSlot *slot, DestReceiver *self)
{
	IngestState *st = (IngestState *) self;
	GcInput    *in = st->in;
	Datum		value;
	bool		isnull;
	int64		id;
	ErrorContextCallback errcb;

	if (in->n_rows >= st->rows_cap)
		grow_rows(st);
	if (st->centroids)
	{
		/* (features): numbered 1, 2 ...; NULL features are an error below */
		slot_getsomeattrs(slot, 1);
		id = in->n_rows + 1;
		goto features;
	}
	slot_getsomeattrs(slot, st->wcol >= 0 ? 3 : 2);
	if (slot->tts_isnull[0])
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("source query returned a NULL id"),
				 errdetail("Row %lld of the source query has a NULL id.",
						   (long long) (in->n_rows + 1))));
	value = slot->tts_values[0];
	if (st->by_ordinal)
	{
		/* an error names the row by its ordinal, and says its id */
		id = in->n_rows + 1;
		st->cur_key = value;
		errcb.callback = key_error_callback;
		errcb.arg = st;
		errcb.previous = error_context_stack;
		error_context_stack = &errcb;
	}
	else if (st->id_type == INT2OID)
		id = DatumGetInt16(value);
	else if (st->id_type == INT4OID)
		id = DatumGetInt32(value);
	else
		id = DatumGetInt64(value);

	in->ids[in->n_rows] = id;
	if (in->keys != NULL)
		in->keys[in->n_rows] = copy_key(st, value);

features:
	value = slot->tts_values[st->fcol];
	isnull = slot->tts_isnull[st->fcol];
	if (!isnull && st->kind == FEATURES_CAST)
		value = gc_feature_cast(&st->cast, id, value, &isnull);
	if (!isnull)
	{
		add_features(st, id, value);
		if (st->wcol >= 0)
			add_weight(st, id, slot->tts_values[st->wcol],
					   slot->tts_isnull[st->wcol]);
	}
	else if (st->centroids)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("init query returned NULL features"),
				 errdetail("Row %lld of the init query is NULL.", (long long) id)));
	in->has_features[in->n_rows] = !isnull;
	if (st->by_ordinal)
		error_context_stack = errcb.previous;
	in->n_rows++;

	if (in->n_rows % GC_CHECK_ROWS == 0)
		CHECK_FOR_INTERRUPTS();
	return true;
}

static void
ingest_shutdown(DestReceiver *self)
{
}

static void
ingest_destroy(DestReceiver *self)
{
}

/* ---------------------------------------------------------------------
 * The query
 * --------------------------------------------------------------------- */

/* The rows the plan of plan is expected to return, 0 if unknown. */
static double
estimate_rows(SPIPlanPtr plan)
{
	CachedPlan *cplan = SPI_plan_get_cached_plan(plan);
	double		rows = 0;

	if (cplan == NULL)
		return 0;
	if (list_length(cplan->stmt_list) == 1)
	{
		PlannedStmt *stmt = linitial_node(PlannedStmt, cplan->stmt_list);

		if (stmt->planTree != NULL && stmt->planTree->plan_rows > 0)
			rows = stmt->planTree->plan_rows;
	}
	/* the plan was not saved: no resource owner holds it */
	ReleaseCachedPlan(cplan, NULL);
	return rows;
}

/*
 * source as a table name (an identifier, maybe schema-qualified or quoted,
 * maybe followed by a semicolon), or NULL when it is not one.
 */
static char *
as_table_name(const char *source)
{
	const char *p = source;
	const char *end;
	char	   *name;

	while (isspace((unsigned char) *p))
		p++;
	end = p + strlen(p);
	while (end > p && (isspace((unsigned char) end[-1]) || end[-1] == ';'))
		end--;
	if (end == p || isdigit((unsigned char) *p) || *p == '.')
		return NULL;
	for (const char *c = p; c < end; c++)
		if (!(isalnum((unsigned char) *c) || *c == '_' || *c == '$' ||
			  *c == '.' || *c == '"' || IS_HIGHBIT_SET(*c)))
			return NULL;
	name = pnstrdup(p, end - p);
	return name;
}

/*
 * Whether source is a geometry's text form (hex EWKB: a byte order 00 or
 * 01, a type, coordinates), which is what a geometry passed to the
 * set-returning form becomes through PostGIS's implicit cast to text.
 */
static bool
is_hex_geometry(const char *source)
{
	size_t		len = strlen(source);

	/* the shortest geometry, an empty collection, has 9 bytes */
	if (len < 18 || len % 2 != 0 || source[0] != '0' ||
		(source[1] != '0' && source[1] != '1'))
		return false;
	for (size_t i = 0; i < len; i++)
		if (!isxdigit((unsigned char) source[i]))
			return false;
	return true;
}

/*
 * What a query given as text is for, in messages: a source query of (id,
 * features), a labels query of (id, label), or k-means' init query of
 * (features).
 */
typedef struct QueryRole
{
	const char *name;
	const char *example;		/* a query that does it */
} QueryRole;

static const QueryRole source_role = {"source query", "SELECT id, features FROM t"};
static const QueryRole labels_role = {"labels query", "SELECT id, cluster_id FROM gpu_dbscan(...)"};
static const QueryRole init_role = {"init query", "SELECT features FROM centres ORDER BY id"};

/*
 * SPI_prepare of a query, allowing a parallel plan.  A syntax error of a
 * source that is a table name, or a geometry, gets a hint showing the form
 * to use.
 */
static SPIPlanPtr
prepare_source(const char *source, const QueryRole *role)
{
	MemoryContext cxt = CurrentMemoryContext;
	SPIPlanPtr	plan = NULL;

	PG_TRY();
	{
		plan = SPI_prepare_cursor(source, 0, NULL, CURSOR_OPT_PARALLEL_OK);
	}
	PG_CATCH();
	{
		ErrorData  *edata;
		char	   *name;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		if (edata->sqlerrcode != ERRCODE_SYNTAX_ERROR || edata->hint != NULL ||
			role != &source_role)
			PG_RE_THROW();
		if ((name = as_table_name(source)) != NULL)
			edata->hint = psprintf("The source is a query, not a table name: pass a query such as 'SELECT id, features FROM %s'.",
								   name);
		else if (is_hex_geometry(source))
			edata->hint = pstrdup("The source is a PostGIS geometry in text form: a geometry given to a clustering function without OVER is taken for its source query. "
								  "Cluster a geometry column with the window form, such as gpu_dbscan(geom, eps, min_pts) OVER (), after CREATE EXTENSION gpuclust_postgis; "
								  "or pass a query such as 'SELECT id, geom FROM t'.");
		else
			PG_RE_THROW();
		FlushErrorState();
		ReThrowError(edata);
	}
	PG_END_TRY();

	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed: %s",
			 SPI_result_code_string(SPI_result));
	return plan;
}

/* A Query, anywhere in the tree, that locks the rows it reads. */
static bool
find_locking(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, Query))
	{
		Query	   *q = (Query *) node;

		if (q->rowMarks != NIL)
		{
			*(Query **) context = q;
			return true;
		}
		return query_tree_walker(q, find_locking, context, 0);
	}
	return expression_tree_walker(node, find_locking, context);
}

pg_noreturn static void
refuse_source(const QueryRole *role, const char *what, const char *tag)
{
	ereport(ERROR,
			(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
			 errmsg("%s must only read, but %s (%s)", role->name, what, tag),
			 errdetail("A clustering function reads its rows from a query that changes nothing."),
			 errhint("Pass a query such as '%s'.", role->example)));
	pg_unreachable();
}

pg_noreturn static void
refuse_not_single(const QueryRole *role)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("%s must be a single statement that returns rows",
					role->name),
			 errhint("Pass a query such as '%s'.", role->example)));
	pg_unreachable();
}

/*
 * ERROR unless plan is one statement that returns rows and only reads:
 * checked on its analysed and rewritten queries, before anything runs.
 */
static void
check_source(SPIPlanPtr plan, const QueryRole *role)
{
	List	   *sources = SPI_plan_get_plan_sources(plan);
	CachedPlanSource *ps;
	ListCell   *lc;

	if (list_length(sources) != 1)
		refuse_not_single(role);
	ps = (CachedPlanSource *) linitial(sources);
	foreach(lc, ps->query_list)
	{
		Query	   *q = lfirst_node(Query, lc);
		Query	   *locking = NULL;

		if (q->commandType == CMD_UTILITY)
			refuse_source(role, "it is a utility statement", CreateCommandName(q->utilityStmt));
		if (q->commandType != CMD_SELECT)
			refuse_source(role, "it is a statement that writes", CreateCommandName((Node *) q));
		if (q->hasModifyingCTE)
		{
			const char *tag = "INSERT, UPDATE or DELETE";
			ListCell   *c;

			foreach(c, q->cteList)
			{
				Node	   *cq = ((CommonTableExpr *) lfirst(c))->ctequery;

				if (IsA(cq, Query) && ((Query *) cq)->commandType != CMD_SELECT)
				{
					tag = CreateCommandName(cq);
					break;
				}
			}
			refuse_source(role, "it has a data-modifying WITH clause", tag);
		}
		if (find_locking((Node *) q, &locking))
			refuse_source(role, "it locks the rows it reads", CreateCommandName((Node *) locking));
	}
	if (!SPI_is_cursor_plan(plan))
		refuse_not_single(role);
}

/*
 * Runs plan (checked by check_source) to completion into dest: read-only
 * (SPI's read_only execution), in a read-only transaction state.  That
 * state is set in a GUC nest level of its own and rolled back at its end,
 * which restores the previous value (an error's abort rolls it back too).
 * It is set, not saved as a function's SET clause would save it: from
 * PostgreSQL 16 on, transaction_read_only refuses the latter.  A setting
 * that the source query itself changes is rolled back with it.  ERROR when
 * SPI fails.
 */
static void
run_readonly(SPIPlanPtr plan, ParamListInfo params, DestReceiver *dest)
{
	SPIExecuteOptions options;
	int			nestlevel;
	int			ret;

	memset(&options, 0, sizeof(options));
	options.read_only = true;
	options.params = params;
	options.dest = dest;
	nestlevel = NewGUCNestLevel();
	(void) set_config_option("transaction_read_only", "on",
							 PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SET, true, 0, false);
	ret = SPI_execute_plan_extended(plan, &options);
	AtEOXact_GUC(false, nestlevel);
	if (ret < 0)
		elog(ERROR, "SPI_execute_plan_extended failed: %s",
			 SPI_result_code_string(ret));
}

void
gc_run_labels_query(const char *query, DestReceiver *dest)
{
	SPIPlanPtr	plan = prepare_source(query, &labels_role);

	check_source(plan, &labels_role);
	run_readonly(plan, NULL, dest);
}

/*
 * The text of plan's one statement to embed as a subquery: without a ';'
 * after it, in parentheses on lines of their own, so that a trailing
 * "-- comment" ends before the closing one.
 */
static char *
source_subquery(const CachedPlanSource *ps)
{
	const RawStmt *raw = ps->raw_parse_tree;

	/* a length of 0: up to the end of the text (no ';' after it) */
	int			len = raw->stmt_len > 0 ? raw->stmt_len :
		(int) strlen(ps->query_string) - raw->stmt_location;

	return psprintf("(\n%.*s\n)", len, ps->query_string + raw->stmt_location);
}

int
gc_check_source_query(const char *source, char **subquery)
{
	SPIPlanPtr	plan = prepare_source(source, &source_role);
	CachedPlanSource *ps;
	TupleDesc	td;

	check_source(plan, &source_role);
	ps = (CachedPlanSource *) linitial(SPI_plan_get_plan_sources(plan));
	*subquery = source_subquery(ps);
	td = ps->resultDesc;
	if (td == NULL)
		return 0;
	if (td->natts >= 2)
		check_integer_id(TupleDescAttr(td, 0));
	return td->natts;
}

void
gc_run_readonly(SPIPlanPtr plan, ParamListInfo params, DestReceiver *dest)
{
	run_readonly(plan, params, dest);
}

static void ingest_run(const char *source, Oid id_type, int flags,
					   bool centroids, MemoryContext outcxt, GcInput *in);

int
gc_ingest_flags_for(int flags, gc_device requested)
{
	return requested == GC_DEVICE_CPU ? flags | GC_INGEST_PRIVATE : flags;
}

void
gc_ingest(const char *source, Oid id_type, int flags, MemoryContext outcxt,
		  GcInput *in)
{
	ingest_run(source, id_type, flags, false, outcxt, in);
}

void
gc_ingest_centroids(const char *init_query, MemoryContext outcxt, GcInput *in)
{
	ingest_run(init_query, ANYOID, 0, true, outcxt, in);
}

static void
ingest_run(const char *source, Oid id_type, int flags, bool centroids,
		   MemoryContext outcxt, GcInput *in)
{
	IngestState st;
	SPIPlanPtr	plan;
	int			ret;

	memset(in, 0, sizeof(*in));
	memset(&st, 0, sizeof(st));
	st.pub.receiveSlot = ingest_receive;
	st.pub.rStartup = ingest_startup;
	st.pub.rShutdown = ingest_shutdown;
	st.pub.rDestroy = ingest_destroy;
	st.pub.mydest = DestNone;
	st.in = in;
	st.outcxt = outcxt;
	st.id_type = id_type;
	st.flags = flags;
	st.centroids = centroids;
	st.what = centroids ? "init row" : "row with id";
	st.workcxt = AllocSetContextCreate(outcxt, "gpuclust ingest",
									   ALLOCSET_SMALL_SIZES);
	st.base_context = error_context_stack;

	if ((ret = SPI_connect()) != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed: %s", SPI_result_code_string(ret));

	/* syntax errors and the like are raised here, as usual */
	plan = prepare_source(source, centroids ? &init_role : &source_role);
	check_source(plan, centroids ? &init_role : &source_role);
	/* planned here (generic plan, kept for the run): sizes the matrix */
	st.est_rows = estimate_rows(plan);

	/* run to completion into the receiver */
	run_readonly(plan, NULL, &st.pub);
	error_context_stack = st.base_context;
	if (!st.started)
		elog(ERROR, "source query returned no result description");

	gc_feature_cast_end(&st.cast);
	SPI_finish();
	MemoryContextDelete(st.workcxt);

	/* give back the unused tails (of an estimate, or of a doubling) */
	if (in->n > 0 && st.x_cap > in->n && in->x_shared == NULL)
		in->X = repalloc_huge(in->X, (Size) in->n * (Size) in->d * sizeof(float));
	if (in->n_rows > 0 && st.rows_cap > in->n_rows)
	{
		in->ids = repalloc_huge(in->ids, in->n_rows * sizeof(int64));
		in->has_features = repalloc_huge(in->has_features, in->n_rows * sizeof(bool));
		if (in->keys != NULL)
			in->keys = repalloc_huge(in->keys, in->n_rows * sizeof(Datum));
	}
	if (in->weights != NULL && st.x_cap > in->n)
		in->weights = repalloc_huge(in->weights, Max(in->n, 1) * sizeof(double));
}
