/*-------------------------------------------------------------------------
 *
 * window.c
 *	  The window forms of the clustering functions, PostGIS-style:
 *
 *	  gpu_dbscan(features, eps, min_pts [, device, metric, algorithm])
 *		  OVER (...)  -> int
 *	  gpu_kmeans(features, k [, max_iter, tol, init, n_init, seed, device,
 *		  init_centroids, metric]) OVER (...)  -> int
 *
 * features is real[] or double precision[], or any type with a cast to
 * real[], cast as the source query's features are (common/ingest.c: the cast
 * expression is built once per partition); gpuclust_postgis declares the
 * forms for geometry and geography points.  Each partition is clustered
 * on its own.  The first call in a partition reads the whole partition once
 * (WinGetPartitionRowCount, then WinGetFuncArgInPartition row by row from
 * the head), validates and packs the features into one float32 matrix,
 * clusters it on the device the set-returning form would use (the
 * algorithm's run function), and keeps one label per partition row in the
 * partition-local memory; every call then returns the label of its row
 * (WinGetCurrentPosition).  The frame is ignored: the result depends on the
 * whole partition, in its order.
 *
 * Labels equal those of the set-returning form over the same rows in the
 * same order: with ORDER BY in the window, give the SRF's source the same
 * ORDER BY.  NULL features and DBSCAN noise give NULL.
 *
 * The parameters (eps, k, ...) are read from the partition's first row
 * and checked by the set-returning form's reader (its folder's *_args.c), with its
 * errors; when an argument is not a constant it is evaluated on every row
 * and must not change within the partition.  A NULL parameter other than
 * device is an error.  The defaults are the install script's: PostgreSQL
 * passes every argument to a window function too.  Errors about features
 * name the 1-based row number within the partition, in the window's order
 * (there is no id).
 *
 * gc_glue_window_label is the one driver; each algorithm gives it its
 * signature, its reader, its run and its parameters' part of the timing
 * line (WinAlgo).  With gpuclust.log_timing on, each partition logs one
 * INFO line: the device, its rows, and the ms spent
 * reading the partition (ingest) and clustering it (compute); there is no
 * emit phase, each row's call returns its label.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "windowapi.h"

#include "common/progress.h"
#include "common/window.h"

/* label of a row with no cluster (NULL features, DBSCAN noise) */
#define WIN_NO_LABEL	(-1)

/* rows read between resets of the scratch memory and interrupt checks */
#define WIN_BATCH		1024

/* What a partition keeps (partition-local memory, zeroed at first). */
typedef struct WinPartition
{
	bool		ready;			/* labels computed */
	int64		n_rows;
	int32	   *labels;			/* n_rows, in the partition's memory */
} WinPartition;

/* Whether a (the value of argument argno on some row) equals row 1's. */
static bool
param_equal(const WinArgs *wa, int argno, Datum a, bool anull)
{
	Datum		first = wa->args.value[argno];

	if (anull || wa->args.isnull[argno])
		return anull == wa->args.isnull[argno];
	if (wa->byval[argno])
		return a == first;
	if (wa->type[argno] == TEXTOID || wa->type[argno] == FLOAT4ARRAYOID)
	{
		/* text, or init_centroids: the same bytes (detoasted) */
		struct varlena *x = pg_detoast_datum_packed((struct varlena *) DatumGetPointer(a));
		struct varlena *y = pg_detoast_datum_packed((struct varlena *) DatumGetPointer(first));

		return VARSIZE_ANY_EXHDR(x) == VARSIZE_ANY_EXHDR(y) &&
			memcmp(VARDATA_ANY(x), VARDATA_ANY(y), VARSIZE_ANY_EXHDR(x)) == 0;
	}
	elog(ERROR, "unexpected type %u of window function argument \"%s\"",
		 wa->type[argno], wa->args.sig->arg[argno].name);
	return false;
}

/*
 * Reads the parameters of sig from the partition's first row (in memory
 * that lasts for the computation: the caller's context), checking their
 * NULLs as the set-returning forms do.
 */
static void
params_init(WindowObject winobj, FunctionCallInfo fcinfo,
			const GcSignature *sig, WinArgs *wa)
{
	gc_glue_check_nargs(fcinfo, sig);
	memset(wa, 0, sizeof(*wa));
	wa->args.sig = sig;
	for (int argno = GC_ARG_ROWS + 1; argno < sig->nargs; argno++)
	{
		bool		isout;
		int16		typlen;

		wa->type[argno] = get_fn_expr_argtype(fcinfo->flinfo, argno);
		get_typlenbyval(wa->type[argno], &typlen, &wa->byval[argno]);
		wa->varies[argno] = !get_fn_expr_arg_stable(fcinfo->flinfo, argno);
		wa->args.value[argno] =
			WinGetFuncArgInPartition(winobj, argno, 0, WINDOW_SEEK_HEAD,
									 false, &wa->args.isnull[argno], &isout);
		if (isout)
			elog(ERROR, "partition of a window function has no first row");
		gc_glue_check_arg_null(sig, argno, wa->args.isnull[argno]);
		if (!wa->args.isnull[argno] && !wa->byval[argno])
			wa->args.value[argno] = datumCopy(wa->args.value[argno], false,
											  typlen);
	}
}

/* Checks on partition row rowno (0-based) the parameters that may vary. */
static void
params_check_row(WindowObject winobj, const WinArgs *wa, int64 rowno)
{
	const GcSignature *sig = wa->args.sig;

	for (int argno = GC_ARG_ROWS + 1; argno < sig->nargs; argno++)
	{
		Datum		v;
		bool		isnull,
					isout;

		if (!wa->varies[argno])
			continue;
		v = WinGetFuncArgInPartition(winobj, argno, rowno,
									 WINDOW_SEEK_HEAD, false, &isnull, &isout);
		gc_glue_check_arg_null(sig, argno, isnull);
		if (!param_equal(wa, argno, v, isnull))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("argument \"%s\" must be the same for every row of a partition",
							sig->arg[argno].name),
					 errdetail("It differs between partition rows 1 and %lld.",
							   (long long) rowno + 1),
					 errhint("The window function clusters the whole partition with one \"%s\"; use PARTITION BY to cluster groups with different parameters.",
							 sig->arg[argno].name)));
	}
}

/*
 * Whether the features argument (of fcinfo's function) needs a cast to
 * real[]; when it does, *cast is built (in the current memory context).
 */
static bool
features_cast(FunctionCallInfo fcinfo, GcFeatureCast *cast)
{
	Oid			type = get_fn_expr_argtype(fcinfo->flinfo, GC_ARG_ROWS);
	Oid			base = getBaseType(type);

	if (base == FLOAT4ARRAYOID || base == FLOAT8ARRAYOID)
		return false;
	if (!gc_feature_cast_init(cast, type, -1, "partition row"))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("features of a window function must be of type real[] or double precision[]"),
				 errdetail("Argument \"features\" is of type %s, which has no cast to real[].",
						   format_type_be(type)),
				 gc_no_cast_hint(type)));
	return true;
}

/*
 * Reads argument 0 (the features) of every row of the partition into *in
 * (ids NULL: a partition row has none), with the arrays in workcxt,
 * checking the varying parameters on the way.  Features of another type
 * than real[] or double precision[] are cast to real[] first.
 */
static void
read_partition(WindowObject winobj, FunctionCallInfo fcinfo,
			   const WinArgs *wa, MemoryContext workcxt, GcInput *in)
{
	MemoryContext batchcxt;
	MemoryContext oldcxt;
	GcFeatureCast cast;
	bool		casting = features_cast(fcinfo, &cast);

	memset(in, 0, sizeof(*in));
	in->n_rows = WinGetPartitionRowCount(winobj);
	in->has_features = MemoryContextAllocHuge(workcxt,
											  (Size) Max(in->n_rows, 1) * sizeof(bool));
	batchcxt = AllocSetContextCreate(workcxt, "gpuclust window batch",
									 ALLOCSET_DEFAULT_SIZES);

	for (int64 i = 0; i < in->n_rows; i++)
	{
		Datum		value;
		bool		isnull,
					isout;

		if (i % WIN_BATCH == 0)
		{
			CHECK_FOR_INTERRUPTS();
			MemoryContextReset(batchcxt);
		}
		/* argument evaluation and detoasting allocate in the batch context */
		oldcxt = MemoryContextSwitchTo(batchcxt);
		value = WinGetFuncArgInPartition(winobj, GC_ARG_ROWS, i,
										 WINDOW_SEEK_HEAD, false, &isnull,
										 &isout);
		if (isout)
			elog(ERROR, "window partition has no row %lld of %lld",
				 (long long) i + 1, (long long) in->n_rows);
		if (!isnull && casting)
			value = gc_feature_cast(&cast, i + 1, value, &isnull);
		if (!isnull)
		{
			ArrayType  *arr = DatumGetArrayTypeP(value);

			if (in->X == NULL)
			{
				/* the first row with features sets the dimension */
				gc_features(arr, &in->d, NULL, "partition row", i + 1);
				if ((Size) in->d * sizeof(float) > MaxAllocHugeSize / (Size) in->n_rows)
					ereport(ERROR,
							(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
							 errmsg("features of the partition exceed the maximum size of %zu bytes",
									(Size) MaxAllocHugeSize)));
				in->X = MemoryContextAllocHuge(workcxt, (Size) in->n_rows *
											   (Size) in->d * sizeof(float));
			}
			gc_features(arr, &in->d, in->X + (Size) in->n * (Size) in->d,
						"partition row", i + 1);
			in->n++;
		}
		in->has_features[i] = !isnull;
		params_check_row(winobj, wa, i);
		MemoryContextSwitchTo(oldcxt);
	}
	MemoryContextDelete(batchcxt);
	if (casting)
		gc_feature_cast_end(&cast);
}

/*
 * Spreads the in->n labels of the feature rows over the partition's rows
 * (labels NULL when there are none).
 */
static void
store_labels(WinPartition *part, const GcInput *in, const int32 *labels)
{
	for (int64 i = 0, j = 0; i < in->n_rows; i++)
	{
		if (in->has_features[i])
		{
			part->labels[i] = labels[j] == GC_NOISE ? WIN_NO_LABEL : labels[j];
			j++;
		}
		else
			part->labels[i] = WIN_NO_LABEL;
	}
}

/* The partition's state, with labels[] allocated but not yet computed. */
static WinPartition *
partition_state(WindowObject winobj)
{
	WinPartition *part;

	part = (WinPartition *) WinGetPartitionLocalMemory(winobj, sizeof(WinPartition));
	if (!part->ready && part->labels == NULL)
	{
		/* the labels live as long as the partition-local memory */
		part->n_rows = WinGetPartitionRowCount(winobj);
		part->labels = MemoryContextAllocHuge(GetMemoryChunkContext(part),
											  (Size) Max(part->n_rows, 1) * sizeof(int32));
	}
	return part;
}

static Datum
result_of_row(WindowObject winobj, WinPartition *part, FunctionCallInfo fcinfo)
{
	int64		pos = WinGetCurrentPosition(winobj);

	if (pos < 0 || pos >= part->n_rows)
		elog(ERROR, "window function row %lld outside its partition of %lld rows",
			 (long long) pos, (long long) part->n_rows);
	if (part->labels[pos] == WIN_NO_LABEL)
		PG_RETURN_NULL();
	PG_RETURN_INT32(part->labels[pos]);
}

/*
 * gpuclust.log_timing's INFO for one partition: as the set-returning
 * forms' (common/srf.c), without an emit phase.
 */
static void
log_partition_timing(const WinAlgo *algo, const WinCall *call,
					 double ms_ingest, double ms_compute)
{
	StringInfoData head;

	initStringInfo(&head);
	appendStringInfo(&head, "%s window: device %s, partition rows %lld, n %lld, d %d",
					 gc_algorithm_function(algo->algo),
					 call->in.n > 0 ? gc_device_name(call->ran) : "none",
					 (long long) call->in.n_rows, (long long) call->in.n,
					 call->in.d);
	algo->timing(call, &head);
	ereport(INFO,
			(errmsg("%s; ingest %.1f ms, compute %.1f ms%s",
					head.data, ms_ingest, ms_compute,
					gc_algorithm_gpu_phases(algo->algo, call->ran,
											call->in.n))));
}

void
gc_glue_window_small_partition(const WinCall *call, const char *name,
							   int64 value, const char *outcome,
							   const char *hint)
{
	ereport(NOTICE,
			(errmsg("partition has fewer rows with features than %s: %s",
					name, outcome),
			 errdetail_plural("%s is %lld, but the partition has %lld row with non-NULL features (of %lld rows).",
							  "%s is %lld, but the partition has %lld rows with non-NULL features (of %lld rows).",
							  (unsigned long) call->in.n,
							  name, (long long) value, (long long) call->in.n,
							  (long long) call->in.n_rows),
			 hint ? errhint("%s", hint) : 0));
}

int32 *
gc_glue_window_all_noise(const WinCall *call)
{
	int32	   *labels = MemoryContextAllocHuge(call->workcxt,
												(Size) call->in.n * sizeof(int32));

	for (int64 i = 0; i < call->in.n; i++)
		labels[i] = GC_NOISE;
	return labels;
}

/*
 * The label of the current row: the first call in a partition clusters
 * the partition with algo and keeps its labels.
 */
Datum
gc_glue_window_label(FunctionCallInfo fcinfo, const WinAlgo *algo)
{
	WindowObject winobj = PG_WINDOW_OBJECT();
	WinPartition *part = partition_state(winobj);

	if (!part->ready)
	{
		WinCall		call;
		const int32 *labels = NULL;
		MemoryContext oldcxt;

		memset(&call, 0, sizeof(call));
		call.workcxt = AllocSetContextCreate(CurrentMemoryContext,
											 "gpuclust window partition",
											 ALLOCSET_DEFAULT_SIZES);
		double		t0,
					t1;

		oldcxt = MemoryContextSwitchTo(call.workcxt);
		t0 = gc_now_ms();
		gc_progress_begin(get_func_name(fcinfo->flinfo->fn_oid));
		params_init(winobj, fcinfo, algo->sig, &call.params);
		algo->read_params(&call);
		read_partition(winobj, fcinfo, &call.params, call.workcxt, &call.in);
		t1 = gc_now_ms();
		if (call.in.n > 0)
			labels = algo->run(&call);
		store_labels(part, &call.in, labels);
		gc_progress_end();
		if (gpuclust_log_timing)
			log_partition_timing(algo, &call, t1 - t0, gc_now_ms() - t1);
		MemoryContextSwitchTo(oldcxt);
		MemoryContextDelete(call.workcxt);
		part->ready = true;
	}
	return result_of_row(winobj, part, fcinfo);
}
