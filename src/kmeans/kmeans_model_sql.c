/*-------------------------------------------------------------------------
 *
 * kmeans_model_sql.c
 *	  k-means models: fit once, score rows later.
 *
 *	  gpu_kmeans_fit(source, k, max_iter, tol, init, n_init, seed, device,
 *					 init_centroids, metric)
 *		RETURNS (centroids real[], inertia float8, iterations int,
 *				 converged boolean, n bigint, d int)
 *	  kmeans_assign(features, centroids, metric) RETURNS int
 *	  kmeans_assign_distance(features, centroids, metric) RETURNS float8
 *
 * gpu_kmeans_fit runs exactly what gpu_kmeans runs (same ingest, checks,
 * device choice and core call) and returns the model instead of the
 * labels: centroids is a two-dimensional k x d real[] (row c is the centre
 * of cluster c).  Unlike gpu_kmeans it needs at least k rows with features
 * (an empty source is an error: there is no model to return).
 *
 * kmeans_assign returns the 0-based index of the nearest centroid, by the
 * core's own distance (gc_dist2: float32 sum of squared differences in
 * dimension order, no FMA) with ties to the lowest index, so for the rows
 * a model was fitted on it returns the fit's labels (on the CPU: bit for
 * bit).  kmeans_assign_distance returns the distance to that centroid,
 * computed in double as gpu_kmeans's distance column is.  Under metric
 * 'cosine' both compare the unit rows of the features and of the centroids
 * (gc_unit_row), as spherical k-means assigns: a cosine model's rows get
 * the fit's labels when scored with 'cosine'.
 *
 * The parsed centroids are cached in fn_extra, keyed by the argument's
 * bytes (an inline value, or the TOAST pointer of an out-of-line one), so
 * scoring a table against one model validates and detoasts it once.
 *
 * gpuclust.log_timing: gpu_kmeans_fit logs one INFO line per call, as
 * gpu_kmeans does (emit: building the centroids array).  kmeans_assign and
 * kmeans_assign_distance log nothing: they are per-row scalars (a line per
 * row would flood the client, and a scalar has no end-of-statement hook
 * for a summary; in a parallel plan each worker calls them); time them with
 * EXPLAIN ANALYZE.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "common/progress.h"
#include "common/ingest.h"
#include "kmeans/kmeans_glue.h"
#include "core/gpuclust_core.h"
#include "core/common/rng.h"

PG_FUNCTION_INFO_V1(gpu_kmeans_fit);
PG_FUNCTION_INFO_V1(kmeans_assign);
PG_FUNCTION_INFO_V1(kmeans_assign_distance);
PG_FUNCTION_INFO_V1(kmeans_parallel_sample);

/* ---------------------------------------------------------------------
 * gpu_kmeans_fit
 * --------------------------------------------------------------------- */

/*
 * The k x d centroids C as a two-dimensional real[] (in the current
 * context; scratch in workcxt).
 */
static ArrayType *
centroids_array(const float *C, int k, int d, MemoryContext workcxt)
{
	Datum	   *elems;
	int			dims[2] = {k, d};
	int			lbs[2] = {1, 1};
	MemoryContext oldcxt;

	if ((Size) k * (Size) d > MaxArraySize)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("centroids of %d clusters of %d features exceed the maximum array size",
						k, d)));
	oldcxt = MemoryContextSwitchTo(workcxt);
	elems = palloc((Size) k * (Size) d * sizeof(Datum));
	for (Size i = 0; i < (Size) k * (Size) d; i++)
		elems[i] = Float4GetDatum(C[i]);
	MemoryContextSwitchTo(oldcxt);
	return construct_md_array(elems, NULL, 2, dims, lbs, FLOAT4OID,
							  sizeof(float4), true, TYPALIGN_INT);
}

Datum
gpu_kmeans_fit(PG_FUNCTION_ARGS)
{
	GcArgs		args;
	gc_kmeans_params params;
	gc_device	requested;
	TupleDesc	tupdesc;
	MemoryContext workcxt;
	GcInput		in;
	gc_kmeans_result res;
	Datum		values[6];
	bool		nulls[6] = {false, false, false, false, false, false};
	HeapTuple	tuple;
	gc_device	ran;
	double		t0,
				t1,
				t2;
	char	   *init_query;

	/* cheap checks first: nothing runs when an argument is bad */
	gc_glue_args_of_call(fcinfo, &gc_kmeans_signature, &args);
	gc_glue_kmeans_params(&args, &params, &requested, &init_query);

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type of gpu_kmeans_fit must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);

	workcxt = AllocSetContextCreate(CurrentMemoryContext, "gpu_kmeans_fit",
									ALLOCSET_DEFAULT_SIZES);
	t0 = gc_now_ms();
	/* the ids are not used: any type will do */
	gc_progress_begin("gpu_kmeans_fit");
	gc_ingest(TextDatumGetCString(args.value[GC_ARG_ROWS]), ANYOID,
			  gc_ingest_flags_for(GC_INGEST_WEIGHTS, requested), workcxt, &in);
	t1 = gc_now_ms();

	gc_glue_check_k_rows(params.k, in.n, in.n == 0 ? "gpu_kmeans_fit needs rows to fit a model to." : NULL);
	if (init_query != NULL)
		gc_glue_kmeans_init_query(init_query, &params, workcxt);
	ran = gc_glue_run_kmeans(requested, &in, &params, workcxt, &res);
	gc_progress_end();
	t2 = gc_now_ms();

	/* the result: k x d centroids and the fit's statistics */
	values[0] = PointerGetDatum(centroids_array(res.centroids, params.k, in.d,
												workcxt));
	values[1] = Float8GetDatum(res.inertia);
	values[2] = Int32GetDatum(res.iterations);
	values[3] = BoolGetDatum(res.converged);
	values[4] = Int64GetDatum(in.n);
	values[5] = Int32GetDatum(in.d);
	tuple = heap_form_tuple(tupdesc, values, nulls);

	if (gpuclust_log_timing)
		ereport(INFO,
				(errmsg("gpu_kmeans_fit: device %s, n %lld, d %d, k %d, iterations %d; ingest %.1f ms, compute %.1f ms%s, emit %.1f ms",
						gc_device_name(ran), (long long) in.n, in.d, params.k,
						res.iterations, t1 - t0, t2 - t1,
						gc_algorithm_gpu_phases(GC_ALGO_KMEANS, ran, in.n),
						gc_now_ms() - t2)));
	MemoryContextDelete(workcxt);
	PG_RETURN_DATUM(HeapTupleGetDatum(tuple));
}

/* ---------------------------------------------------------------------
 * kmeans_assign, kmeans_assign_distance
 * --------------------------------------------------------------------- */

/* The parsed centroids of the last call, in fn_mcxt. */
typedef struct CentroidCache
{
	Size		keylen;			/* 0: empty */
	char	   *key;			/* the argument's raw bytes */
	int			k;
	int			d;
	float	   *C;				/* k x d, row-major */
	float	   *U;				/* their unit rows (cosine), or NULL: not yet */
} CentroidCache;

/* The centroids of argument argno, from the cache when it holds them. */
static CentroidCache *
get_centroids(FunctionCallInfo fcinfo, int argno)
{
	struct varlena *raw = (struct varlena *) PG_GETARG_POINTER(argno);
	CentroidCache *cache = (CentroidCache *) fcinfo->flinfo->fn_extra;
	/* expanded or indirect values may change behind the same bytes */
	bool		cacheable = !VARATT_IS_EXTERNAL(raw) || VARATT_IS_EXTERNAL_ONDISK(raw);
	Size		rawlen = VARSIZE_ANY(raw);
	MemoryContext cxt = fcinfo->flinfo->fn_mcxt;
	ArrayType  *arr;

	if (cache == NULL)
	{
		cache = MemoryContextAllocZero(cxt, sizeof(CentroidCache));
		fcinfo->flinfo->fn_extra = cache;
	}
	else if (cacheable && cache->keylen == rawlen &&
			 memcmp(cache->key, raw, rawlen) == 0)
		return cache;

	/* parse anew */
	if (cache->key)
		pfree(cache->key);
	if (cache->C)
		pfree(cache->C);
	if (cache->U)
		pfree(cache->U);
	cache->key = NULL;
	cache->C = NULL;
	cache->U = NULL;
	cache->keylen = 0;

	arr = DatumGetArrayTypeP(PointerGetDatum(raw));
	cache->k = gc_glue_parse_centroids(arr, "centroids", 0, &cache->d,
									   &cache->C, cxt);
	if (cacheable)
	{
		cache->key = MemoryContextAlloc(cxt, rawlen);
		memcpy(cache->key, raw, rawlen);
		cache->keylen = rawlen;
	}
	if ((Pointer) arr != (Pointer) raw)
		pfree(arr);
	return cache;
}

/*
 * The unit rows of the centroids (cosine), made once per cached model; a
 * centroid whose values are all 0 has no direction (22000).
 */
static const float *
unit_centroids(FunctionCallInfo fcinfo, CentroidCache *m)
{
	if (m->U == NULL)
	{
		float	   *U = MemoryContextAlloc(fcinfo->flinfo->fn_mcxt,
										   Max((Size) m->k * m->d, 1) * sizeof(float));

		for (int c = 0; c < m->k; c++)
			if (gc_unit_row(m->C + (Size) c * m->d, m->d, U + (Size) c * m->d) == 0.0)
			{
				pfree(U);
				ereport(ERROR,
						(errcode(ERRCODE_DATA_EXCEPTION),
						 errmsg("centroid row %d is all 0: the cosine distance is undefined", c + 1),
						 errdetail("Under metric => 'cosine' every centroid needs a direction.")));
			}
		m->U = U;
	}
	return m->U;
}

/*
 * The nearest centroid to the features of argument 0 (real[] or double
 * precision[]) under the metric of argument metric_arg (< 0: euclidean);
 * *x receives the features as float32 (d long; under cosine their unit
 * row), *C the centroids compared (under cosine their unit rows), *d2 the
 * float distance² to the nearest.
 */
static int
nearest(FunctionCallInfo fcinfo, int metric_arg, const CentroidCache **model,
		float **x, const float **C, gc_metric *metric, float *d2)
{
	CentroidCache *m = get_centroids(fcinfo, 1);
	ArrayType  *arr = PG_GETARG_ARRAYTYPE_P(0);
	int			len = 0;
	float	   *f;
	const float *cc = m->C;
	int			best;

	*metric = metric_arg < 0 ? GC_METRIC_EUCLIDEAN :
		gc_glue_kmeans_metric(PG_GETARG_DATUM(metric_arg));
	if (ARR_NDIM(arr) == 1 && ARR_DIMS(arr)[0] != m->d)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("features have %d elements, but the centroids have %d columns",
						ARR_DIMS(arr)[0], m->d),
				 errdetail("Features must have as many elements as the model was fitted with.")));
	f = palloc(Max(m->d, 1) * sizeof(float));
	len = gc_features(arr, &len, f, NULL, 0);
	Assert(len == m->d);
	if (*metric == GC_METRIC_COSINE)
	{
		/* spherical k-means assigns unit rows to unit centres */
		cc = unit_centroids(fcinfo, m);
		if (gc_unit_row(f, m->d, f) == 0.0)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_EXCEPTION),
					 errmsg("features are all 0: the cosine distance is undefined"),
					 errhint("Leave zero vectors out, or use metric => 'euclidean'.")));
	}

	/* exactly the core's assignment: gc_dist2, strict <, lowest index */
	best = gc_km_nearest(f, cc, m->k, m->d, d2);
	*model = m;
	*x = f;
	*C = cc;
	return best;
}

Datum
kmeans_assign(PG_FUNCTION_ARGS)
{
	const CentroidCache *m;
	float	   *x;
	const float *C;
	gc_metric	metric;
	float		d2;
	int			c = nearest(fcinfo, 2, &m, &x, &C, &metric, &d2);

	pfree(x);
	PG_RETURN_INT32(c);
}

Datum
kmeans_assign_distance(PG_FUNCTION_ARGS)
{
	const CentroidCache *m;
	float	   *x;
	const float *C;
	gc_metric	metric;
	float		d2;
	int			c = nearest(fcinfo, 2, &m, &x, &C, &metric, &d2);
	/* as the core computes gpu_kmeans's distance column */
	double		dist = gc_km_distance(gc_dist2_f64(x, C + (Size) c * m->d, m->d),
									  metric);

	pfree(x);
	PG_RETURN_FLOAT8(dist);
}

/*
 * kmeans_parallel_sample(features, centroids, id, seed, round, n, ell, phi):
 * whether k-means|| keeps the row in this round, by the core's rule
 * (gc_km_par_keep, stream GC_KM_STREAM_KMEANSPAR) with the row's id in
 * place of its position and D² its float distance² to the nearest
 * centroid: the row's own draw, wherever it is scanned.
 */
Datum
kmeans_parallel_sample(PG_FUNCTION_ARGS)
{
	const CentroidCache *m;
	float	   *x;
	const float *C;
	gc_metric	metric;
	float		d2;

	(void) nearest(fcinfo, -1, &m, &x, &C, &metric, &d2);
	pfree(x);
	PG_RETURN_BOOL(gc_km_par_keep((uint64) PG_GETARG_INT64(3), GC_KM_STREAM_KMEANSPAR,
								  PG_GETARG_INT32(4), PG_GETARG_INT64(5),
								  PG_GETARG_INT64(2), PG_GETARG_FLOAT8(6),
								  (double) d2, PG_GETARG_FLOAT8(7)));
}
