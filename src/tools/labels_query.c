/*-------------------------------------------------------------------------
 *
 * labels_query.c
 *	  Reading a labelling of a source query's rows from a labels query
 *	  (see tools/labels_query.h): the join on id is a sort of the source's ids and a
 *	  binary search per label row, O(n log n), with no hash table to size.
 *	  The labels query runs to completion into a DestReceiver of ours that
 *	  joins each row as it comes: nothing is materialised but the labels.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "common/gpuclust.h"
#include "tools/labels_query.h"

typedef struct IdRow
{
	int64		id;
	int64		xrow;			/* row of X, or -1: NULL features */
} IdRow;

static int
cmp_idrow(const void *a, const void *b)
{
	int64		x = ((const IdRow *) a)->id,
				y = ((const IdRow *) b)->id;

	return x < y ? -1 : x > y;
}

static bool
is_int_type(Oid t)
{
	return t == INT2OID || t == INT4OID || t == INT8OID;
}

static int64
int_datum(Datum v, Oid t)
{
	return t == INT2OID ? DatumGetInt16(v) :
		t == INT4OID ? DatumGetInt32(v) : DatumGetInt64(v);
}

/* The labels query's rows, joined on id as they come. */
typedef struct LabelsReceiver
{
	DestReceiver pub;
	const IdRow *byid;			/* the source's ids, sorted */
	int64		nid;
	bool	   *seen;			/* nid: the id came already */
	int64	   *raw;			/* rows of X: the label's value */
	int32	   *labels;			/* rows of X: 0 when labelled, else -1 */
	Oid			tid,
				tlab;
	bool		started;
} LabelsReceiver;

static void
labels_startup(DestReceiver *self, int operation, TupleDesc td)
{
	LabelsReceiver *r = (LabelsReceiver *) self;

	if (td->natts != 2)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("labels query must return 2 columns (id, label), not %d",
						td->natts),
				 errhint("Pass a query such as 'SELECT id, cluster_id FROM gpu_dbscan(...)'.")));
	r->tid = getBaseType(TupleDescAttr(td, 0)->atttypid);
	r->tlab = getBaseType(TupleDescAttr(td, 1)->atttypid);
	if (!is_int_type(r->tid) || !is_int_type(r->tlab))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("labels query must return (id, label) of integer types, not (%s, %s)",
						format_type_be(TupleDescAttr(td, 0)->atttypid),
						format_type_be(TupleDescAttr(td, 1)->atttypid)),
				 errdetail("id is a smallint, integer or bigint, as the source's; label a smallint, integer or bigint (NULL: noise).")));
	r->started = true;
}

static bool
labels_receive(TupleTableSlot *slot, DestReceiver *self)
{
	LabelsReceiver *r = (LabelsReceiver *) self;
	bool		isnull;
	Datum		v = slot_getattr(slot, 1, &isnull);
	IdRow		key;
	const IdRow *hit;
	int64		pos;

	CHECK_FOR_INTERRUPTS();
	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("labels query returned a NULL id")));
	key.id = int_datum(v, r->tid);
	hit = bsearch(&key, r->byid, r->nid, sizeof(IdRow), cmp_idrow);
	if (hit == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("labels query returned id %lld, which the source query did not",
						(long long) key.id)));
	pos = hit - r->byid;
	if (r->seen[pos])
		ereport(ERROR,
				(errcode(ERRCODE_CARDINALITY_VIOLATION),
				 errmsg("labels query returned id %lld more than once",
						(long long) key.id)));
	r->seen[pos] = true;
	v = slot_getattr(slot, 2, &isnull);
	if (!isnull && hit->xrow >= 0)
	{
		r->raw[hit->xrow] = int_datum(v, r->tlab);
		r->labels[hit->xrow] = 0;	/* labelled; numbered after */
	}
	return true;
}

static void
labels_shutdown(DestReceiver *self)
{
}

static void
labels_destroy(DestReceiver *self)
{
}

void
gc_read_labels(const char *labels_query, const GcInput *in, MemoryContext cxt,
			   int32 **labels_out, int32 *m_out, int64 **values_out)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(cxt);
	LabelsReceiver r;
	IdRow	   *byid;
	int64		nid = in->n_rows;
	int64	   *raw;
	int64	   *vals;
	int64		nv = 0,
				m = 0;
	int32	   *labels;
	int			ret;

	/* the source's ids, sorted, each once */
	byid = palloc_extended(Max(nid, 1) * sizeof(IdRow), MCXT_ALLOC_HUGE);
	for (int64 i = 0, j = 0; i < nid; i++)
	{
		byid[i].id = in->ids[i];
		byid[i].xrow = in->has_features[i] ? j++ : -1;
	}
	qsort(byid, nid, sizeof(IdRow), cmp_idrow);
	for (int64 i = 1; i < nid; i++)
		if (byid[i].id == byid[i - 1].id)
			ereport(ERROR,
					(errcode(ERRCODE_CARDINALITY_VIOLATION),
					 errmsg("source query returned id %lld more than once",
							(long long) byid[i].id),
					 errdetail("A labels query labels the source's rows by id, so the ids must be unique.")));
	raw = palloc_extended(Max(in->n, 1) * sizeof(int64), MCXT_ALLOC_HUGE);
	labels = palloc_extended(Max(in->n, 1) * sizeof(int32), MCXT_ALLOC_HUGE);
	for (int64 j = 0; j < in->n; j++)
		labels[j] = -1;

	memset(&r, 0, sizeof(r));
	r.pub.receiveSlot = labels_receive;
	r.pub.rStartup = labels_startup;
	r.pub.rShutdown = labels_shutdown;
	r.pub.rDestroy = labels_destroy;
	r.pub.mydest = DestNone;
	r.byid = byid;
	r.nid = nid;
	r.seen = palloc_extended(Max(nid, 1) * sizeof(bool), MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	r.raw = raw;
	r.labels = labels;

	if ((ret = SPI_connect()) != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed: %s", SPI_result_code_string(ret));
	gc_run_labels_query(labels_query, &r.pub);
	if (!r.started)
		elog(ERROR, "labels query returned no result description");
	SPI_finish();

	/* the distinct labels, ascending, and each row's number among them */
	vals = palloc_extended(Max(in->n, 1) * sizeof(int64), MCXT_ALLOC_HUGE);
	for (int64 j = 0; j < in->n; j++)
		if (labels[j] == 0)
			vals[nv++] = raw[j];
	qsort(vals, nv, sizeof(int64), gc_cmp_int64);
	for (int64 i = 0; i < nv; i++)
		if (m == 0 || vals[i] != vals[m - 1])
			vals[m++] = vals[i];
	for (int64 j = 0; j < in->n; j++)
		if (labels[j] == 0)
			labels[j] = (int32) ((int64 *) bsearch(&raw[j], vals, m, sizeof(int64),
												   gc_cmp_int64) - vals);
	pfree(byid);
	pfree(raw);
	pfree(r.seen);
	MemoryContextSwitchTo(oldcxt);
	*labels_out = labels;
	*m_out = (int32) m;
	*values_out = vals;
}
