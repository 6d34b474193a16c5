/*-------------------------------------------------------------------------
 *
 * srf.c
 *	  The frame of the set-returning clustering functions: arguments,
 *	  ingest of the source query into the call's working memory, the one
 *	  emitter of (id, cluster_id, is_core | is_exemplar | distance |
 *	  probability and outlier_score) rows, and the phase timings of
 *	  gpuclust.log_timing.  See common/srf.h.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "executor/tuptable.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/tuplestore.h"

#include "common/srf.h"
#include "common/progress.h"

/* ms since call->t_mark, which restarts */
static double
lap(GcSrfCall *call)
{
	double		now = gc_now_ms();
	double		ms = now - call->t_mark;

	call->t_mark = now;
	return ms;
}

void
gc_glue_srf_args(FunctionCallInfo fcinfo, const GcSignature *sig,
				 GcSrfCall *call)
{
	memset(call, 0, sizeof(*call));
	call->fcinfo = fcinfo;
	gc_glue_args_of_call(fcinfo, sig, &call->args);
}

void
gc_glue_srf_ingest(GcSrfCall *call)
{
	char	   *source = TextDatumGetCString(call->args.value[GC_ARG_ROWS]);

	gc_progress_begin(get_func_name(call->fcinfo->flinfo->fn_oid));
	InitMaterializedSRF(call->fcinfo, 0);
	call->cxt = AllocSetContextCreate(CurrentMemoryContext,
									  "gpuclust set-returning function",
									  ALLOCSET_DEFAULT_SIZES);
	call->t_mark = gc_now_ms();
	gc_ingest(source, call->args.id_type,
			  gc_ingest_flags_for(call->args.sig->ingest_flags, call->requested),
			  call->cxt, &call->in);
	call->ms_ingest = lap(call);
}

/*
 * The columns after (id, cluster_id) of a labelling's rows: one flag as a
 * boolean (is_core, is_exemplar), or one or two float8 columns (k-means's
 * distance; HDBSCAN's probability and outlier score).
 */
typedef struct SrfExtra
{
	int			n;				/* 1 or 2 */
	const uint8 *flags;			/* the one column, or NULL */
	const double *value[2];		/* the float8 columns (flags NULL) */
} SrfExtra;

/* the most columns of a labelling's row */
#define SRF_MAX_COLS 4

/*
 * The result rows are built in place: one minimal tuple per pattern of
 * NULLs (a row with features and a cluster, a noise row, a row without
 * features), formed once; each row overwrites its values and the
 * tuplestore copies it.  That is one allocation per row (the
 * tuplestore's own copy) and no per-row forming.
 */
typedef struct RowTemplate
{
	MinimalTuple tup;
	char	   *data;			/* where its values start */
	int			off[SRF_MAX_COLS];	/* offset of each value in data; -1: NULL */
} RowTemplate;

/* Forms the template of desc's rows with the given NULLs. */
static void
make_template(RowTemplate *t, TupleDesc desc, const bool *nulls)
{
	Datum		zeros[SRF_MAX_COLS] = {0};
	uintptr_t	off = 0;

	t->tup = gc_form_minimal_tuple(desc, zeros, (bool *) nulls);
	t->data = (char *) t->tup + t->tup->t_hoff - MINIMAL_TUPLE_OFFSET;
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		t->off[i] = -1;
		if (nulls[i])
			continue;
		/* as heap_fill_tuple places a fixed-width value */
		off = att_align_nominal(off, att->attalign);
		t->off[i] = (int) off;
		off += att->attlen;
	}
}

/*
 * True when desc's columns are (int8, int4, then bool or float8 as x has
 * them), by value.
 */
static bool
templates_apply(TupleDesc desc, const SrfExtra *x)
{
	if (desc->natts != 2 + x->n)
		return false;
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (!att->attbyval || att->attlen <= 0)
			return false;
		if (i >= 2 &&
			att->atttypid != (x->flags != NULL ? BOOLOID : FLOAT8OID))
			return false;
	}
	return TupleDescAttr(desc, 0)->atttypid == INT8OID &&
		TupleDescAttr(desc, 1)->atttypid == INT4OID;
}

/* Extra column c of feature row j as a Datum. */
static Datum
extra_datum(const SrfExtra *x, int c, int64 j)
{
	return x->flags ? BoolGetDatum(x->flags[j] != 0) :
		Float8GetDatum(x->value[c][j]);
}

/*
 * The emitter: the rows (id, cluster_id, x's columns) of a labelling in
 * input order (see gc_glue_srf_emit).
 */
static void
emit_labelling(GcSrfCall *call, const int32 *labels, const SrfExtra *x)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) call->fcinfo->resultinfo;
	TupleDesc	desc = rsinfo->setDesc;
	Tuplestorestate *store = rsinfo->setResult;
	const GcInput *in = &call->in;
	/* a row in a cluster, noise, no features */
	static const bool pattern_nulls[3][SRF_MAX_COLS] = {
		{false, false, false, false},
		{false, true, false, false},
		{false, true, true, true}
	};
	RowTemplate tpl[3];
	TupleTableSlot *slot;
	MemoryContext oldcxt;

	Assert(in->n == 0 || labels != NULL);
	Assert(x->n >= 1 && x->n <= SRF_MAX_COLS - 2);
	gc_glue_srf_emit_begin(call);

	if (in->keys != NULL || !templates_apply(desc, x))
	{
		/*
		 * A keyed call (ids of the source's own type), or a declaration
		 * other than the install script's: the general way
		 */
		for (int64 i = 0, j = 0; i < in->n_rows; i++)
		{
			Datum		values[SRF_MAX_COLS] = {0};
			bool		nulls[SRF_MAX_COLS] = {false, true, true, true};

			values[0] = gc_glue_srf_id(in, i);
			if (in->has_features[i])
			{
				nulls[1] = labels[j] == GC_NOISE;
				if (!nulls[1])
					values[1] = Int32GetDatum(labels[j]);
				for (int c = 0; c < x->n; c++)
				{
					nulls[2 + c] = false;
					values[2 + c] = extra_datum(x, c, j);
				}
				j++;
			}
			gc_glue_srf_put(call, values, nulls, i);
		}
		gc_glue_srf_emit_end(call);
		return;
	}

	oldcxt = MemoryContextSwitchTo(call->cxt);
	for (int p = 0; p < 3; p++)
		make_template(&tpl[p], desc, pattern_nulls[p]);
	slot = MakeSingleTupleTableSlot(desc, &TTSOpsMinimalTuple);
	MemoryContextSwitchTo(oldcxt);

	for (int64 i = 0, j = 0; i < in->n_rows; i++)
	{
		RowTemplate *t;
		int64		id = in->ids[i];

		if (!in->has_features[i])
			t = &tpl[2];
		else
		{
			int32		label = labels[j];

			if (label == GC_NOISE)
				t = &tpl[1];
			else
			{
				t = &tpl[0];
				memcpy(t->data + t->off[1], &label, sizeof(int32));
			}
			if (x->flags)
				t->data[t->off[2]] = x->flags[j] != 0;
			else
				for (int c = 0; c < x->n; c++)
					memcpy(t->data + t->off[2 + c], &x->value[c][j],
						   sizeof(double));
			j++;
		}
		memcpy(t->data + t->off[0], &id, sizeof(int64));
		ExecStoreMinimalTuple(t->tup, slot, false);
		tuplestore_puttupleslot(store, slot);
		if ((i & 0xFFFF) == 0xFFFF)
			CHECK_FOR_INTERRUPTS();
	}
	ExecDropSingleTupleTableSlot(slot);
	gc_glue_srf_emit_end(call);
}

void
gc_glue_srf_emit(GcSrfCall *call, const int32 *labels, const uint8 *flags,
				 const double *distance)
{
	SrfExtra	x = {1, flags, {distance, NULL}};

	Assert(call->in.n == 0 || (flags == NULL) != (distance == NULL));
	emit_labelling(call, labels, &x);
}

void
gc_glue_srf_emit_scores(GcSrfCall *call, const int32 *labels,
						const double *first, const double *second)
{
	SrfExtra	x = {2, NULL, {first, second}};

	emit_labelling(call, labels, &x);
}

Datum
gc_glue_srf_id(const GcInput *in, int64 i)
{
	return in->keys != NULL ? in->keys[i] : Int64GetDatum(in->ids[i]);
}

void
gc_glue_srf_put(GcSrfCall *call, Datum *values, bool *nulls, int64 r)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) call->fcinfo->resultinfo;

	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	if ((r & 0xFFFF) == 0xFFFF)
		CHECK_FOR_INTERRUPTS();
}

void
gc_glue_srf_emit_begin(GcSrfCall *call)
{
	call->ms_compute = lap(call);
	gc_progress_phase(GC_PHASE_EMIT);
}

void
gc_glue_srf_emit_end(GcSrfCall *call)
{
	call->ms_emit = lap(call);
}

void
gc_glue_srf_end(GcSrfCall *call)
{
	gc_progress_end();
	MemoryContextDelete(call->cxt);
	call->cxt = NULL;
}

void
gc_glue_srf_log_timing(const GcSrfCall *call, const char *head,
					   const char *compute_detail)
{
	ereport(INFO,
			(errmsg("%s; ingest %.1f ms, compute %.1f ms%s, emit %.1f ms",
					head, call->ms_ingest, call->ms_compute, compute_detail,
					call->ms_emit)));
}
