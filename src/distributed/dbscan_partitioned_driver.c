/*-------------------------------------------------------------------------
 *
 * dbscan_partitioned_driver.c
 *	  gpu_dbscan_distributed(source, eps, min_pts, partitions, device)
 *	  RETURNS TABLE (id bigint, cluster_id int, is_core boolean)
 *
 * DBSCAN over the rows where they live (the method: src/core/dbscan/dbscan.h).
 * The driver never reads the rows; it runs, through SPI:
 *  1. dbscan_bounds over the source: the rows' count and the bounds of each
 *     feature (a combinable aggregate: parallel workers, Citus shards);
 *  2. dbscan_histogram of the widest feature, from which it cuts P slabs of
 *     about equal counts (gc_dbscan_cuts);
 *  3. the partitions' local DBSCANs: dbscan_partition grouped by the
 *     partition over dbscan_partitions' rows (each row in its home slab and
 *     in those within a halo of two eps).  Without Citus, one query over
 *     the source, which parallel query runs in parallel workers.  With
 *     Citus, the rows first go into a work table distributed by a key that
 *     spreads the partitions over the workers (a repartitioning INSERT ...
 *     SELECT, worker to worker), and the aggregate, grouped by key and
 *     partition, runs whole on the workers, each on its GPU or CPUs: only
 *     the summaries come back;
 *  4. the merge of the summaries (gc_dbscan_merge: a union-find of the core
 *     rows that partitions share), then the rows' labels from the kept
 *     summaries.
 * The labels are gpu_dbscan's over the source in id order, bit for bit
 * (ids unique; core/dbscan/dbscan.h says why).  Rows come back in no particular
 * order; noise has a NULL cluster_id and is_core false; a row with NULL
 * features has NULL cluster_id and is_core.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "access/tupdesc.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "optimizer/cost.h"
#include "portability/instr_time.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/tuplestore.h"
#include "lib/stringinfo.h"

#include "distributed/passes.h"
#include "common/gpuclust.h"
#include "common/ingest.h"
#include "dbscan/dbscan_glue.h"
#include "core/gpuclust_core.h"

PG_FUNCTION_INFO_V1(gpu_dbscan_distributed);

#define DB_PASS(what_) ((GcPass) {"gpu_dbscan_distributed", (what_), 0})

/*
 * Rows a partition holds at most by default: its summary (about 17 bytes a
 * home row) stays far below a value's 1 GB.
 */
#define DB_PART_ROWS_DEFAULT ((int64) 1 << 24)

/* Histogram bins per partition, and their bounds. */
#define DB_BINS_PER_PART 64
#define DB_BINS_MIN 1024

/*
 * The most rows the default partitions hold together, home and halo, as a
 * multiple of the rows (gc_dbscan_held's estimate).
 */
#define DB_HELD_MAX 1.5

/*
 * The receiver of the partitions' summaries (part int, summary bytea): each
 * is read (checked), merged, and kept for the labels.
 */
typedef struct SummaryReceiver
{
	DestReceiver pub;
	gc_dbscan_merge *merge;
	Tuplestorestate *kept;
	TupleDesc	keptdesc;
	int			parts;			/* the plan's */
	int			seen;
	int64		rows;			/* home rows with features, all summaries */
	int64		links;
	int64		bytes;
} SummaryReceiver;

/*
 * The summary in a bytea, in an 8-aligned copy (a varlena's data is not)
 * allocated in the current context, read into *s.
 */
static void *
read_summary(Datum value, gc_dbscan_summary *s, Size *bytes)
{
	bytea	   *b = DatumGetByteaPP(value);
	Size		len = VARSIZE_ANY_EXHDR(b);
	void	   *buf = palloc(Max(len, 1));
	gc_status	st = {GC_OK, ""};

	if (bytes)
		*bytes = len;
	memcpy(buf, VARDATA_ANY(b), len);
	if (gc_dbscan_summary_read(buf, len, s, &st) != GC_OK)
		gc_glue_report(&st, "gpu_dbscan_distributed");
	return buf;
}

static bool
summary_receive(TupleTableSlot *slot, DestReceiver *self)
{
	SummaryReceiver *r = (SummaryReceiver *) self;
	gc_dbscan_summary s;
	gc_status	st = {GC_OK, ""};
	bool		isnull;
	Datum		value = slot_getattr(slot, 2, &isnull);
	void	   *buf;
	Size		len;
	int64		featured;

	if (isnull)
		elog(ERROR, "dbscan_partition returned NULL");
	buf = read_summary(value, &s, &len);
	if (s.part >= r->parts)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("malformed partition summary: partition %d of %d", s.part, r->parts)));
	if (gc_dbscan_merge_add(r->merge, &s, &st) != GC_OK)
		gc_glue_report(&st, "gpu_dbscan_distributed");
	/* the home rows with features (those without come last) */
	for (featured = s.rows; featured > 0; featured--)
		if (s.row_comp[featured - 1] != GC_DBP_NO_FEATURES)
			break;
	r->seen++;
	r->rows += featured;
	r->links += s.links;
	r->bytes += len;
	tuplestore_putvalues(r->kept, r->keptdesc, &value, &isnull);
	pfree(buf);
	return true;
}

static void
summary_startup(DestReceiver *self, int operation, TupleDesc typeinfo)
{
	if (typeinfo->natts != 2 || TupleDescAttr(typeinfo, 1)->atttypid != BYTEAOID)
		elog(ERROR, "the partitions' query must return (part, summary bytea)");
}

static void
summary_shutdown(DestReceiver *self)
{
}

static void
summary_destroy(DestReceiver *self)
{
}

/* The float8[] result of a one-row aggregate pass, or NULL. */
static double *
pass_array(const GcPass *pass, SPIPlanPtr plan, ParamListInfo params,
		   int *n)
{
	bool		isnull;
	Datum		v;
	ArrayType  *a;
	double	   *out;

	gc_run_pass(pass, plan, params, NULL);
	if (SPI_processed != 1)
		elog(ERROR, "%s returned %llu rows", pass->what,
			 (unsigned long long) SPI_processed);
	v = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (isnull)
		return NULL;
	a = DatumGetArrayTypeP(v);
	if (ARR_NDIM(a) != 1 || ARR_HASNULL(a) || ARR_ELEMTYPE(a) != FLOAT8OID)
		elog(ERROR, "%s returned a malformed array", pass->what);
	*n = ARR_DIMS(a)[0];
	out = palloc(sizeof(double) * Max(*n, 1));
	memcpy(out, ARR_DATA_PTR(a), sizeof(double) * *n);
	SPI_freetuptable(SPI_tuptable);
	return out;
}

static SPIPlanPtr
prepare(const char *q, int nargs, Oid *types)
{
	SPIPlanPtr	plan = SPI_prepare_cursor(q, nargs, types, CURSOR_OPT_PARALLEL_OK);

	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
	return plan;
}

static ParamListInfo
params_of(int n, const Datum *values, const bool *nulls, const Oid *types)
{
	ParamListInfo params = makeParamList(n);

	for (int i = 0; i < n; i++)
	{
		params->params[i].value = values[i];
		params->params[i].isnull = nulls[i];
		params->params[i].pflags = PARAM_FLAG_CONST;
		params->params[i].ptype = types[i];
	}
	return params;
}

/*
 * Whether Citus's route is taken: Citus is in this database.  On a Citus
 * worker it is an error (0A000): Citus would ship the source's rows there.
 */
static bool
citus_route(void)
{
	bool		isnull;
	Datum		v;

	if (SPI_execute("SELECT EXISTS (SELECT FROM pg_catalog.pg_extension "
					"WHERE extname OPERATOR(pg_catalog.=) 'citus'::pg_catalog.name)",
					true, 1) != SPI_OK_SELECT)
		elog(ERROR, "SPI_execute failed");
	v = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (!DatumGetBool(v))
		return false;
	if (SPI_execute("SELECT pg_catalog.citus_is_coordinator()", true, 1) != SPI_OK_SELECT)
		elog(ERROR, "SPI_execute failed");
	v = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (isnull || !DatumGetBool(v))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("gpu_dbscan_distributed runs on the Citus coordinator"),
				 errhint("Connect to the coordinator.")));
	return true;
}

/* The default number of partitions (README). */
static int
default_parts(bool citus, int64 n)
{
	int64		p = (n + DB_PART_ROWS_DEFAULT - 1) / DB_PART_ROWS_DEFAULT;
	int64		base;

	if (citus)
	{
		const char *s = GetConfigOption("citus.shard_count", true, false);

		base = s ? pg_strtoint32(s) : 32;
	}
	else
		base = max_parallel_workers_per_gather + 1;
	return (int) Min(Max(p, base), GC_DBP_MAX_PARTS);
}

/* The SQL text of a constant float8[] (exact: shortest round-trip form). */
static char *
float8_array_literal(ArrayType *a)
{
	Oid			out;
	bool		isvarlena;

	getTypeOutputInfo(FLOAT8ARRAYOID, &out, &isvarlena);
	return quote_literal_cstr(OidOutputFunctionCall(out, PointerGetDatum(a)));
}

/*
 * One key per partition for Citus's work table (distributed by key): the
 * work table's shards, taken in turn from each worker (by node group),
 * each named by the lowest key that hashes into it (Citus's worker_hash),
 * and partition i gets the key of shard i mod shards; hashing the
 * partition numbers themselves would put several on one worker and none
 * on another.  As an int[] literal.
 */
static char *
partition_keys(const char *work, int parts)
{
	GcPass		pass = DB_PASS("the work table's shards");
	char	   *q = psprintf("WITH sh AS (SELECT s.shardid, s.shardminvalue::int AS lo, s.shardmaxvalue::int AS hi, "
							 "p.groupid, pg_catalog.row_number() OVER (PARTITION BY p.groupid ORDER BY s.shardminvalue::int) AS r "
							 "FROM pg_catalog.pg_dist_shard s JOIN pg_catalog.pg_dist_placement p USING (shardid) "
							 "WHERE s.logicalrelid OPERATOR(pg_catalog.=) %s::pg_catalog.regclass), "
							 "k AS (SELECT sh.shardid, pg_catalog.min(v) AS key FROM sh JOIN pg_catalog.generate_series(0, 999999) v "
							 "ON pg_catalog.worker_hash(v) OPERATOR(pg_catalog.>=) sh.lo "
							 "AND pg_catalog.worker_hash(v) OPERATOR(pg_catalog.<=) sh.hi GROUP BY sh.shardid) "
							 "SELECT k.key FROM sh JOIN k USING (shardid) ORDER BY sh.r, sh.groupid",
							 quote_literal_cstr(work));
	StringInfoData keys;
	uint64		shards;

	/*
	 * Not read-only: a read-only SPI run keeps the call's snapshot, which
	 * does not see the shards create_distributed_table just made.
	 */
	gc_exec_pass(&pass, q, SPI_OK_SELECT);
	shards = SPI_processed;
	if (shards == 0)
		elog(ERROR, "the work table %s has no shards", work);
	initStringInfo(&keys);
	appendStringInfoChar(&keys, '{');
	for (int i = 0; i < parts; i++)
	{
		bool		isnull;
		Datum		v = SPI_getbinval(SPI_tuptable->vals[i % shards],
									  SPI_tuptable->tupdesc, 1, &isnull);

		appendStringInfo(&keys, "%s%d", i ? "," : "", DatumGetInt32(v));
	}
	appendStringInfoChar(&keys, '}');
	SPI_freetuptable(SPI_tuptable);
	return quote_literal_cstr(keys.data);
}

/*
 * Citus's route: the partitions' rows into an unlogged work table
 * distributed by a key that spreads the partitions over the workers
 * (CREATE TABLE, create_distributed_table, a repartitioning INSERT ...
 * SELECT: rows go worker to worker, with the plan and keys as literals,
 * which Citus needs there), then the local runs grouped by key and
 * partition, so whole on the workers (one backend per shard), into recv;
 * the work table dropped after.  An error aborts the transaction, which
 * drops it on every node.
 */
static void
partitions_citus(const char *nsp, const char *source, ArrayType *plan, int parts,
				 double eps, int32 min_pts, text *device, DestReceiver *recv)
{
	static uint32 calls = 0;
	char	   *name = psprintf("gpuclust_dbscan_%d_%u", MyProcPid, ++calls);
	Oid			worknsp = RangeVarGetCreationNamespace(makeRangeVar(NULL, name, -1));
	char	   *work = quote_qualified_identifier(get_namespace_name(worknsp), name);
	char	   *devlit = device ? quote_literal_cstr(text_to_cstring(device)) : "NULL";
	GcPass		pass = DB_PASS("the work table");

	gc_exec_pass(&pass, psprintf("CREATE UNLOGGED TABLE %s (key int, part int, id bigint, "
								 "home int, shared boolean, x real[])", work),
				 SPI_OK_UTILITY);
	gc_exec_pass(&pass, psprintf("SELECT pg_catalog.create_distributed_table(%s, 'key', colocate_with => 'none')",
								 quote_literal_cstr(work)),
				 SPI_OK_SELECT);
	pass = DB_PASS("the repartition");
	gc_exec_pass(&pass, psprintf("INSERT INTO %s (key, part, id, home, shared, x) "
								 "SELECT (%s::int[])[p.part OPERATOR(pg_catalog.+) 1], p.part, s.id, p.home, p.shared, p.x "
								 "FROM %s AS s(id, f) "
								 "CROSS JOIN LATERAL %s.dbscan_partitions(s.f, %s::pg_catalog.float8[]) AS p",
								 work, partition_keys(work, parts), source, nsp,
								 float8_array_literal(plan)),
				 SPI_OK_INSERT);
	pass = DB_PASS("the partitions' DBSCAN");
	gc_run_pass(&pass,
				prepare(psprintf("SELECT part, %s.dbscan_partition(part, id, x, home, shared, "
								 "%s::pg_catalog.float8, %d, %s::pg_catalog.text) FROM %s GROUP BY key, part",
								 nsp, float8out_internal(eps), min_pts, devlit, work),
						0, NULL),
				NULL, recv);
	pass = DB_PASS("dropping the work table");
	gc_exec_pass(&pass, psprintf("DROP TABLE %s", work), SPI_OK_UTILITY);
}

/* Without Citus: one query over the source, parallel where the plan is. */
static void
partitions_local(const char *nsp, const char *source, ArrayType *plan, double eps,
				 int32 min_pts, text *device, DestReceiver *recv)
{
	Oid			types[4] = {FLOAT8OID, INT4OID, TEXTOID, FLOAT8ARRAYOID};
	Datum		values[4] = {Float8GetDatum(eps), Int32GetDatum(min_pts),
	PointerGetDatum(device), PointerGetDatum(plan)};
	bool		nulls[4] = {false, false, device == NULL, false};
	GcPass		pass = DB_PASS("the partitions' DBSCAN");
	char	   *q = psprintf("SELECT p.part, %s.dbscan_partition(p.part, s.id, p.x, p.home, p.shared, "
							 "$1, $2, $3) FROM %s AS s(id, f) "
							 "CROSS JOIN LATERAL %s.dbscan_partitions(s.f, $4) AS p GROUP BY p.part",
							 nsp, source, nsp);

	gc_run_pass(&pass, prepare(q, 4, types), params_of(4, values, nulls, types),
				recv);
}

/* Every row of a source with no features: (id, NULL, NULL). */
static void
emit_featureless(const char *source, ReturnSetInfo *rsinfo)
{
	GcPass		pass = DB_PASS("the rows' ids");
	SPIPlanPtr	plan = prepare(psprintf("SELECT s.id::bigint FROM %s AS s(id, f)", source),
							   0, NULL);

	gc_run_pass(&pass, plan, NULL, NULL);
	for (uint64 t = 0; t < SPI_processed; t++)
	{
		Datum		values[3] = {0, 0, 0};
		bool		nulls[3] = {false, true, true};

		values[0] = SPI_getbinval(SPI_tuptable->vals[t], SPI_tuptable->tupdesc, 1, &nulls[0]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	SPI_freetuptable(SPI_tuptable);
}

/* The rows' labels: each kept summary's home rows, through the merge. */
static void
emit_labels(SummaryReceiver *r, ReturnSetInfo *rsinfo)
{
	TupleTableSlot *slot = MakeSingleTupleTableSlot(r->keptdesc, &TTSOpsMinimalTuple);

	tuplestore_rescan(r->kept);
	while (tuplestore_gettupleslot(r->kept, true, false, slot))
	{
		bool		isnull;
		gc_dbscan_summary s;
		void	   *buf = read_summary(slot_getattr(slot, 1, &isnull), &s, NULL);

		for (int64 i = 0; i < s.rows; i++)
		{
			Datum		values[3];
			bool		nulls[3] = {false, true, true};
			int32		label = gc_dbscan_merge_label(r->merge, s.part, s.row_comp[i]);

			values[0] = Int64GetDatum(s.row_id[i]);
			if (label != GC_DBP_NO_FEATURES)
			{
				nulls[1] = label == GC_NOISE;
				values[1] = Int32GetDatum(label);
				nulls[2] = false;
				values[2] = BoolGetDatum(s.row_core[i] != 0);
			}
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
			if ((i & 0xFFFF) == 0xFFFF)
				CHECK_FOR_INTERRUPTS();
		}
		pfree(buf);
	}
	ExecDropSingleTupleTableSlot(slot);
}

static double
ms_since(instr_time *t)
{
	instr_time	now;
	double		ms;

	INSTR_TIME_SET_CURRENT(now);
	ms = INSTR_TIME_GET_MILLISEC(now) - INSTR_TIME_GET_MILLISEC(*t);
	*t = now;
	return ms;
}

Datum
gpu_dbscan_distributed(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	const char *nsp = gc_driver_schema(fcinfo);
	char	   *source;
	gc_dbscan_params params;
	gc_device	requested;
	text	   *device = PG_ARGISNULL(4) ? NULL : PG_GETARG_TEXT_PP(4);
	int			parts = 0,
				nb,
				d,
				dim,
				bins = 0;
	double	   *bounds,
			   *cuts,
			   *plan;
	int64		n;
	bool		citus;
	SummaryReceiver recv;
	gc_status	st = {GC_OK, ""};
	gc_ctx		ctx;
	MemoryContext callcxt = CurrentMemoryContext;
	GcPass		pass;
	instr_time	t;
	double		ms[5] = {0, 0, 0, 0, 0};
	int32		clusters = 0;
	bool		by_default;
	double		halo,
				held;

	INSTR_TIME_SET_CURRENT(t);
	gc_driver_not_null(fcinfo, 0, "source");
	gc_driver_not_null(fcinfo, 1, "eps");
	gc_driver_not_null(fcinfo, 2, "min_pts");
	gc_glue_dbscan_values(PG_GETARG_DATUM(1), PG_GETARG_DATUM(2),
						  PG_GETARG_DATUM(4), PG_ARGISNULL(4), &params, &requested);
	if (!PG_ARGISNULL(3))
	{
		parts = PG_GETARG_INT32(3);
		if (parts < 1 || parts > GC_DBP_MAX_PARTS)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("partitions must be between 1 and %d, got %d",
							GC_DBP_MAX_PARTS, parts)));
	}
	source = text_to_cstring(PG_GETARG_TEXT_PP(0));
	InitMaterializedSRF(fcinfo, 0);

	SPI_connect();
	if (gc_check_source_query(source, &source) != 2)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the source query of gpu_dbscan_distributed must return two columns, (id, features)")));
	citus = citus_route();

	/* 1. the rows' count and bounds */
	pass = DB_PASS("the pass for the rows' bounds");
	bounds = pass_array(&pass,
						prepare(psprintf("SELECT %s.dbscan_bounds(s.f, s.id) FROM %s AS s(id, f)",
										 nsp, source), 0, NULL),
						NULL, &nb);
	if (bounds == NULL)
	{
		emit_featureless(source, rsinfo);
		SPI_finish();
		PG_RETURN_NULL();
	}
	n = (int64) bounds[0];
	d = (nb - 1) / 2;
	dim = gc_dbscan_split_dim(bounds + 1, bounds + 1 + d, d);
	by_default = parts == 0;
	if (by_default)
		parts = default_parts(citus, n);
	halo = gc_dbscan_halo(params.eps);
	held = (double) n;
	ms[0] = ms_since(&t);

	/* 2. the slabs, of about equal counts */
	plan = palloc(sizeof(double) * (3 + parts));
	cuts = plan + 3;
	if (parts > 1 && bounds[1 + dim] < bounds[1 + d + dim])
	{
		Oid			types[4] = {INT4OID, FLOAT8OID, FLOAT8OID, INT4OID};
		Datum		values[4];
		bool		nulls[4] = {false, false, false, false};
		double	   *counts;
		int			nc;

		bins = Min(GC_DBP_MAX_BINS, Max(DB_BINS_MIN, DB_BINS_PER_PART * parts));
		values[0] = Int32GetDatum(dim);
		values[1] = Float8GetDatum(bounds[1 + dim]);
		values[2] = Float8GetDatum(bounds[1 + d + dim]);
		values[3] = Int32GetDatum(bins);
		pass = DB_PASS("the pass for the slabs' histogram");
		counts = pass_array(&pass,
							prepare(psprintf("SELECT %s.dbscan_histogram(s.f, $1, $2, $3, $4) "
											 "FROM %s AS s(id, f)", nsp, source), 4, types),
							params_of(4, values, nulls, types), &nc);
		if (counts == NULL || nc != bins)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("the source query returned other rows when read again"),
					 errhint("Run it on data that does not change meanwhile.")));

		/*
		 * By default, halve the partitions while their halos would hold
		 * more than DB_HELD_MAX times the rows: each partition's halo is
		 * about 4 eps wide, which narrow slabs pay again and again
		 */
		for (;;)
		{
			int			asked = parts;

			parts = gc_dbscan_cuts(counts, bins, bounds[1 + dim], bounds[1 + d + dim],
								   asked, cuts);
			held = gc_dbscan_held(counts, bins, bounds[1 + dim], bounds[1 + d + dim],
								  cuts, parts, halo);
			if (!by_default || parts == 1 || held <= DB_HELD_MAX * (double) n)
				break;
			parts = Max(1, Min(parts, asked) / 2);
		}
	}
	else
		parts = 1;
	plan[0] = d;
	plan[1] = dim;
	plan[2] = halo;
	ms[1] = ms_since(&t);

	/* 3. the partitions' local runs, their summaries merged as they come */
	memset(&recv, 0, sizeof(recv));
	recv.pub.receiveSlot = summary_receive;
	recv.pub.rStartup = summary_startup;
	recv.pub.rShutdown = summary_shutdown;
	recv.pub.rDestroy = summary_destroy;
	recv.pub.mydest = DestNone;
	recv.parts = parts;
	recv.merge = gc_dbscan_merge_new(parts);
	if (recv.merge == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory for the merge of %d partitions", parts)));
	PG_TRY();
	{
		MemoryContext old = MemoryContextSwitchTo(callcxt);
		ArrayType  *plan_arr = gc_flat_array(FLOAT8OID, sizeof(float8), plan, 2 + parts);

		recv.keptdesc = CreateTemplateTupleDesc(1);
		TupleDescInitEntry(recv.keptdesc, 1, "summary", BYTEAOID, -1, 0);
		recv.kept = tuplestore_begin_heap(true, false, work_mem);
		MemoryContextSwitchTo(old);

		if (citus)
			partitions_citus(nsp, source, plan_arr, parts, params.eps,
							 (int32) params.min_pts, device, &recv.pub);
		else
			partitions_local(nsp, source, plan_arr, params.eps,
							 (int32) params.min_pts, device, &recv.pub);
		ms[2] = ms_since(&t);

		/* 4. the merge, then the labels */
		if (recv.rows != n)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("the source query returned other rows when read again"),
					 errdetail("The partitions hold %lld rows with features; the first pass counted %lld.",
							   (long long) recv.rows, (long long) n),
					 errhint("Run it on data that does not change meanwhile.")));
		gc_glue_ctx(&ctx);
		if (gc_dbscan_merge_finish(&ctx, recv.merge, &st) != GC_OK)
			gc_glue_report(&st, "gpu_dbscan_distributed");
		clusters = gc_dbscan_merge_clusters(recv.merge);
		ms[3] = ms_since(&t);
		emit_labels(&recv, rsinfo);
		ms[4] = ms_since(&t);
	}
	PG_FINALLY();
	{
		gc_dbscan_merge_free(recv.merge);
	}
	PG_END_TRY();

	if (gpuclust_log_timing)
		ereport(INFO,
				(errmsg("gpu_dbscan_distributed: %s, n %lld, d %d, %d partitions along feature %d (%d bins), halo %g, rows held at most %.2f n",
						citus ? "Citus" : "one server", (long long) n, d, parts, dim + 1,
						bins, plan[2], held / (double) n),
				 errdetail("bounds %.1f ms, slabs %.1f ms, partitions %.1f ms, merge %.1f ms, emit %.1f ms; "
						   "%d summaries of %lld bytes, %lld shared core rows, %d clusters.",
						   ms[0], ms[1], ms[2], ms[3], ms[4], recv.seen, (long long) recv.bytes,
						   (long long) recv.links, clusters)));
	tuplestore_end(recv.kept);
	SPI_finish();
	PG_RETURN_NULL();
}
