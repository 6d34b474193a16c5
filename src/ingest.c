/*-------------------------------------------------------------------------
 *
 * ingest.c
 *	  Read a source query of (id, features) rows into one float32 matrix.
 *
 * The query runs through an SPI cursor fetched in batches, so the whole
 * result is never materialised by SPI: each batch is packed into the
 * matrix and freed.  The matrix, ids and NULL-feature flags grow by
 * doubling with huge allocations, so inputs beyond 1 GB work.
 *
 * The id column may be smallint, integer or bigint (or a domain over one);
 * the features column real[] or double precision[] (or a domain over one),
 * or any type with a cast to real[] (numeric[], integer[], pgvector's
 * vector ...), which is applied to each row with an expression built once.
 *
 * Every row is validated; a bad one raises an ERROR naming its id.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <float.h>
#include <math.h>

#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_coerce.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "core/metric.h"
#include "ingest.h"

/* rows fetched from the cursor at a time */
#define GC_FETCH_BATCH		10000
/* initial capacities */
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
	GcInput    *in;
	MemoryContext outcxt;		/* where the GcInput arrays live */
	int64		rows_cap;		/* capacity of ids and has_features */
	int64		x_cap;			/* capacity of X, in rows */
	Oid			id_type;		/* INT2OID, INT4OID or INT8OID */
	FeatureKind kind;
	Oid			feature_type;	/* the column's declared type */
	ExprState  *cast_state;		/* FEATURES_CAST: column -> real[] */
	ExprContext *cast_econtext;
	int64		cur_id;			/* for the cast's error context */
} IngestState;

/* ---------------------------------------------------------------------
 * Column checks
 * --------------------------------------------------------------------- */

static void
check_columns(IngestState *st, TupleDesc td)
{
	Form_pg_attribute idatt;
	Form_pg_attribute fatt;
	Oid			base;

	if (td->natts != 2)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("source query must return exactly two columns, (id, features)"),
				 errdetail_plural("The query returns %d column.",
								  "The query returns %d columns.",
								  td->natts, td->natts)));

	idatt = TupleDescAttr(td, 0);
	base = getBaseType(idatt->atttypid);
	if (base != INT2OID && base != INT4OID && base != INT8OID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("first column of the source query must be of type smallint, integer or bigint"),
				 errdetail("Column \"%s\" is of type %s.",
						   NameStr(idatt->attname),
						   format_type_be(idatt->atttypid))));
	st->id_type = base;

	fatt = TupleDescAttr(td, 1);
	st->feature_type = fatt->atttypid;
	base = getBaseType(fatt->atttypid);
	if (base == FLOAT4ARRAYOID)
		st->kind = FEATURES_FLOAT4;
	else if (base == FLOAT8ARRAYOID)
		st->kind = FEATURES_FLOAT8;
	else
	{
		/* cast each value to real[], as "features::real[]" would */
		CaseTestExpr *placeholder = makeNode(CaseTestExpr);
		Node	   *cast;

		placeholder->typeId = fatt->atttypid;
		placeholder->typeMod = fatt->atttypmod;
		placeholder->collation = get_typcollation(fatt->atttypid);
		cast = coerce_to_target_type(NULL, (Node *) placeholder,
									 fatt->atttypid, FLOAT4ARRAYOID, -1,
									 COERCION_EXPLICIT,
									 COERCE_EXPLICIT_CAST, -1);
		if (cast == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("second column of the source query must be of type real[] or double precision[]"),
					 errdetail("Column \"%s\" is of type %s, which has no cast to real[].",
							   NameStr(fatt->attname),
							   format_type_be(fatt->atttypid))));
		cast = (Node *) expression_planner((Expr *) cast);
		st->cast_state = ExecInitExpr((Expr *) cast, NULL);
		st->cast_econtext = CreateStandaloneExprContext();
		st->kind = FEATURES_CAST;
	}
}

/* ---------------------------------------------------------------------
 * Growth of the output arrays
 * --------------------------------------------------------------------- */

static void
grow_rows(IngestState *st)
{
	GcInput    *in = st->in;
	int64		newcap;

	newcap = st->rows_cap == 0 ? GC_INITIAL_ROWS : st->rows_cap * 2;
	if ((Size) newcap > MaxAllocHugeSize / sizeof(int64))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("source query returns too many rows")));

	if (st->rows_cap == 0)
	{
		in->ids = MemoryContextAllocHuge(st->outcxt, newcap * sizeof(int64));
		in->has_features = MemoryContextAllocHuge(st->outcxt, newcap * sizeof(bool));
	}
	else
	{
		in->ids = repalloc_huge(in->ids, newcap * sizeof(int64));
		in->has_features = repalloc_huge(in->has_features, newcap * sizeof(bool));
	}
	st->rows_cap = newcap;
}

static void
grow_x(IngestState *st)
{
	GcInput    *in = st->in;
	Size		rowbytes = (Size) in->d * sizeof(float);
	int64		maxrows = (int64) (MaxAllocHugeSize / rowbytes);
	int64		newcap;

	if (st->x_cap == 0)
		newcap = Max((int64) 16, (int64) (GC_INITIAL_X_BYTES / rowbytes));
	else
		newcap = st->x_cap * 2;
	if (newcap > maxrows)
		newcap = maxrows;
	if (newcap <= st->x_cap)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("features of the source query exceed the maximum size of %zu bytes",
						(Size) MaxAllocHugeSize)));

	if (st->x_cap == 0)
		in->X = MemoryContextAllocHuge(st->outcxt, (Size) newcap * rowbytes);
	else
		in->X = repalloc_huge(in->X, (Size) newcap * rowbytes);
	st->x_cap = newcap;
}

/* ---------------------------------------------------------------------
 * One row
 * --------------------------------------------------------------------- */

static void
cast_error_callback(void *arg)
{
	IngestState *st = (IngestState *) arg;

	errcontext("casting features of type %s of row with id %lld to real[]",
			   format_type_be(st->feature_type), (long long) st->cur_id);
}

static Datum
cast_features(IngestState *st, int64 id, Datum value, bool *isnull)
{
	ErrorContextCallback errcb;
	Datum		result;

	st->cur_id = id;
	errcb.callback = cast_error_callback;
	errcb.arg = st;
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;

	st->cast_econtext->caseValue_datum = value;
	st->cast_econtext->caseValue_isNull = false;
	result = ExecEvalExprSwitchContext(st->cast_state, st->cast_econtext, isnull);

	error_context_stack = errcb.previous;
	return result;
}

/* "features of row with id 7", "features of partition row 3", "features" */
static char *
subject(const char *what, int64 rowno)
{
	if (what != NULL)
		return psprintf("features of %s %lld", what, (long long) rowno);
	return pstrdup("features");
}

/* The error for the NaN or infinite value v at 0-based position j. */
static void
pg_attribute_noreturn()
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
gc_report_out_of_range(const char *subj, const char *where, double v, int d)
{
	ereport(ERROR,
			(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
			 errmsg("%s contain a value out of range at %s", subj, where),
			 errdetail("|%g| exceeds %g, the largest magnitude of a feature in %d dimension%s (2^62/sqrt(%d)), beyond which squared distances overflow single precision.",
					   fabs(v), gc_feature_limit(d), d, d == 1 ? "" : "s", d),
			 errhint("Scale the features down, for example divide them all by a constant.")));
	pg_unreachable();
}

/*
 * The error for the first bad value of src (len values of type float8 or
 * float4): NaN or infinite, beyond the range of real, or beyond bound.
 */
static void
pg_attribute_noreturn()
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

int
gc_features(ArrayType *arr, int *d, float *dst, const char *what,
				 int64 rowno)
{
	int			ndim = ARR_NDIM(arr);
	Oid			elemtype = ARR_ELEMTYPE(arr);
	int			len;
	float		bound;
	bool		ok = true;

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
	 * One test per value, gc_feature_ok, which fails for NaN, infinities,
	 * double values beyond real (they narrow to infinity) and values beyond
	 * the bound alike; the first failure is then told apart.
	 */
	bound = gc_feature_bound(len);
	if (elemtype == FLOAT8OID)
	{
		const float8 *src = (const float8 *) ARR_DATA_PTR(arr);

		for (int j = 0; j < len; j++)
		{
			float		f = (float) src[j];

			ok &= gc_feature_ok(f, bound);
			if (dst)
				dst[j] = f;
		}
		if (!ok)
			report_bad_value(src, true, len, bound, what, rowno);
	}
	else
	{
		const float4 *src = (const float4 *) ARR_DATA_PTR(arr);

		for (int j = 0; j < len; j++)
			ok &= gc_feature_ok(src[j], bound);
		if (!ok)
			report_bad_value(src, false, len, bound, what, rowno);
		if (dst)
			memcpy(dst, src, (Size) len * sizeof(float));
	}
	return len;
}

/* Append the features of the row with id id to X, checking them. */
static void
add_features(IngestState *st, int64 id, Datum value)
{
	GcInput    *in = st->in;
	ArrayType  *arr = DatumGetArrayTypeP(value);

	/* the first row with features fixes d, which sizes X */
	if (in->d == 0)
		(void) gc_features(arr, &in->d, NULL, "row with id", id);
	if (in->n >= st->x_cap)
		grow_x(st);
	gc_features(arr, &in->d, in->X + (Size) in->n * (Size) in->d,
				"row with id", id);
	in->n++;
}

static void
add_row(IngestState *st, HeapTuple tuple, TupleDesc td)
{
	GcInput    *in = st->in;
	Datum		value;
	bool		isnull;
	int64		id;

	value = SPI_getbinval(tuple, td, 1, &isnull);
	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("source query returned a NULL id"),
				 errdetail("Row %lld of the source query has a NULL id.",
						   (long long) (in->n_rows + 1))));
	switch (st->id_type)
	{
		case INT2OID:
			id = DatumGetInt16(value);
			break;
		case INT4OID:
			id = DatumGetInt32(value);
			break;
		default:
			id = DatumGetInt64(value);
			break;
	}

	if (in->n_rows >= st->rows_cap)
		grow_rows(st);
	in->ids[in->n_rows] = id;

	value = SPI_getbinval(tuple, td, 2, &isnull);
	if (!isnull && st->kind == FEATURES_CAST)
		value = cast_features(st, id, value, &isnull);
	if (isnull)
		in->has_features[in->n_rows] = false;
	else
	{
		add_features(st, id, value);
		in->has_features[in->n_rows] = true;
	}
	in->n_rows++;
}

/* ---------------------------------------------------------------------
 * The query
 * --------------------------------------------------------------------- */

void
gc_ingest(const char *source, MemoryContext outcxt, GcInput *in)
{
	IngestState st;
	MemoryContext batchcxt;
	MemoryContext oldcxt;
	SPIPlanPtr	plan;
	Portal		portal;
	int			ret;

	memset(in, 0, sizeof(*in));
	memset(&st, 0, sizeof(st));
	st.in = in;
	st.outcxt = outcxt;

	/* per-batch scratch memory: detoasted arrays */
	batchcxt = AllocSetContextCreate(outcxt, "gpuclust ingest batch",
									 ALLOCSET_DEFAULT_SIZES);

	if ((ret = SPI_connect()) != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed: %s", SPI_result_code_string(ret));

	/* syntax errors and the like are raised here, as usual */
	plan = SPI_prepare(source, 0, NULL);
	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed: %s",
			 SPI_result_code_string(SPI_result));
	if (!SPI_is_cursor_plan(plan))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("source query must be a single statement that returns rows"),
				 errhint("Pass a query such as 'SELECT id, features FROM t'.")));

	portal = SPI_cursor_open(NULL, plan, NULL, NULL, false);
	check_columns(&st, portal->tupDesc);

	for (;;)
	{
		SPITupleTable *tuptable;
		uint64		nfetched;

		CHECK_FOR_INTERRUPTS();
		SPI_cursor_fetch(portal, true, GC_FETCH_BATCH);
		tuptable = SPI_tuptable;
		nfetched = SPI_processed;
		if (tuptable == NULL || nfetched == 0)
			break;

		oldcxt = MemoryContextSwitchTo(batchcxt);
		for (uint64 i = 0; i < nfetched; i++)
			add_row(&st, tuptable->vals[i], tuptable->tupdesc);
		MemoryContextSwitchTo(oldcxt);

		SPI_freetuptable(tuptable);
		MemoryContextReset(batchcxt);
		if (st.cast_econtext != NULL)
			ResetExprContext(st.cast_econtext);
	}

	SPI_cursor_close(portal);
	if (st.cast_econtext != NULL)
		FreeExprContext(st.cast_econtext, true);
	SPI_finish();
	MemoryContextDelete(batchcxt);

	/* give back the unused tail of the doubled matrix */
	if (in->n > 0 && st.x_cap > in->n)
		in->X = repalloc_huge(in->X, (Size) in->n * (Size) in->d * sizeof(float));
}
