/*-------------------------------------------------------------------------
 *
 * args.c
 *	  The arguments of the clustering functions: each algorithm's signature
 *	  (names and positions, which may be NULL), the NULL checks, and one
 *	  reader per algorithm that checks its parameters and the device.
 *	  Shared by the set-returning functions (kmeans/kmeans_sql.c, dbscan/dbscan_sql.c,
 *	  affinity/affinity_sql.c), the window functions (common/window_sql.c) and the model fit
 *	  (kmeans/kmeans_model_sql.c); see common/args.h.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "common/args.h"

/* the positions of the parameters (0 is the rows) */
enum
{
	KM_K = 1,
	KM_MAX_ITER,
	KM_TOL,
	KM_INIT,
	KM_N_INIT,
	KM_SEED,
	KM_DEVICE,
	KM_INIT_CENTROIDS,			/* after device: older calls keep their positions */
	KM_METRIC
};

enum
{
	DB_EPS = 1,
	DB_MIN_PTS,
	DB_DEVICE,
	DB_METRIC,
	DB_ALGORITHM
};

enum
{
	AP_DAMPING = 1,
	AP_PREFERENCE,
	AP_MAX_ITER,
	AP_CONVERGENCE_ITER,
	AP_DEVICE,
	AP_PRECISION				/* after device: older calls keep their positions */
};

enum
{
	KD_K = 1,
	KD_QUANTILES,
	KD_DEVICE
};

enum
{
	SIL_LABELS = 1,
	SIL_SAMPLE_SIZE,
	SIL_SEED,
	SIL_DEVICE
};

enum
{
	EL_K_MIN = 1,
	EL_K_MAX,
	EL_MAX_ITER,
	EL_TOL,
	EL_INIT,
	EL_N_INIT,
	EL_SEED,
	EL_DEVICE,
	EL_METRIC					/* k-means' KM_METRIC (no init_centroids between) */
};

/*
 * Position 0 is named for the set-returning forms (a window function's
 * features may be NULL: the row is left unclustered).
 */
const GcSignature gc_kmeans_signature = {
	.nargs = KM_METRIC + 1,
	.arg = {
		[GC_ARG_ROWS] = {"source"},
		[KM_K] = {"k"},
		[KM_MAX_ITER] = {"max_iter"},
		[KM_TOL] = {"tol"},
		[KM_INIT] = {"init"},
		[KM_N_INIT] = {"n_init"},
		[KM_SEED] = {"seed"},
		[KM_DEVICE] = {"device", true},
		[KM_INIT_CENTROIDS] = {"init_centroids", true},
		[KM_METRIC] = {"metric"},
	},
};

const GcSignature gc_dbscan_signature = {
	.nargs = DB_ALGORITHM + 1,
	.arg = {
		[GC_ARG_ROWS] = {"source"},
		[DB_EPS] = {"eps"},
		[DB_MIN_PTS] = {"min_pts"},
		[DB_DEVICE] = {"device", true},
		[DB_METRIC] = {"metric"},
		[DB_ALGORITHM] = {"algorithm"},
	},
};

const GcSignature gc_ap_signature = {
	.nargs = AP_PRECISION + 1,
	.arg = {
		[GC_ARG_ROWS] = {"source"},
		[AP_DAMPING] = {"damping"},
		[AP_PREFERENCE] = {"preference", true},
		[AP_MAX_ITER] = {"max_iter"},
		[AP_CONVERGENCE_ITER] = {"convergence_iter"},
		[AP_DEVICE] = {"device", true},
		[AP_PRECISION] = {"precision"},
	},
};

const GcSignature gc_kdistance_signature = {
	.nargs = KD_DEVICE + 1,
	.arg = {
		[GC_ARG_ROWS] = {"source"},
		[KD_K] = {"k"},
		[KD_QUANTILES] = {"quantiles", true},
		[KD_DEVICE] = {"device", true},
	},
};

const GcSignature gc_silhouette_signature = {
	.nargs = SIL_DEVICE + 1,
	.arg = {
		[GC_ARG_ROWS] = {"source"},
		[SIL_LABELS] = {"labels_query"},
		[SIL_SAMPLE_SIZE] = {"sample_size", true},
		[SIL_SEED] = {"seed"},
		[SIL_DEVICE] = {"device", true},
	},
};

const GcSignature gc_centers_signature = {
	.nargs = SIL_LABELS + 1,
	.arg = {
		[GC_ARG_ROWS] = {"source"},
		[SIL_LABELS] = {"labels_query"},
	},
};

const GcSignature gc_elbow_signature = {
	.nargs = EL_METRIC + 1,
	.arg = {
		[GC_ARG_ROWS] = {"source"},
		[EL_K_MIN] = {"k_min"},
		[EL_K_MAX] = {"k_max"},
		[EL_MAX_ITER] = {"max_iter"},
		[EL_TOL] = {"tol"},
		[EL_INIT] = {"init"},
		[EL_N_INIT] = {"n_init"},
		[EL_SEED] = {"seed"},
		[EL_DEVICE] = {"device", true},
		[EL_METRIC] = {"metric"},
	},
};

void
gc_glue_check_nargs(FunctionCallInfo fcinfo, const GcSignature *sig)
{
	if (PG_NARGS() != sig->nargs)
		elog(ERROR, "function %s called with %d arguments, declared with %d",
			 get_func_name(fcinfo->flinfo->fn_oid), PG_NARGS(), sig->nargs);
}

/*
 * The SQL functions are not STRICT (device defaults to NULL), so required
 * arguments are checked here: a NULL one is an error, never a silent empty
 * result.
 */
void
gc_glue_check_arg_null(const GcSignature *sig, int argno, bool isnull)
{
	if (isnull && !sig->arg[argno].nullable)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("argument \"%s\" must not be NULL",
						sig->arg[argno].name)));
}

void
gc_glue_args_of_call(FunctionCallInfo fcinfo, const GcSignature *sig,
					 GcArgs *a)
{
	/* the keyed form: id_type (its value unused, NULL as a rule) after the source */
	bool		keyed = PG_NARGS() == sig->nargs + 1;

	if (!keyed)
		gc_glue_check_nargs(fcinfo, sig);
	a->sig = sig;
	a->id_type = InvalidOid;
	if (keyed)
	{
		a->id_type = get_fn_expr_argtype(fcinfo->flinfo, GC_ARG_ID_TYPE);
		if (!OidIsValid(a->id_type))
			elog(ERROR, "could not determine the type of argument id_type");
	}
	for (int i = 0; i < sig->nargs; i++)
	{
		int			argno = keyed && i >= GC_ARG_ID_TYPE ? i + 1 : i;

		a->isnull[i] = PG_ARGISNULL(argno);
		a->value[i] = PG_GETARG_DATUM(argno);
		gc_glue_check_arg_null(sig, i, a->isnull[i]);
	}
}

/* A device argument: NULL means the gpuclust.device setting. */
gc_device
gc_glue_device(Datum value, bool isnull)
{
	char	   *s;
	gc_device	dev;

	if (isnull)
		return (gc_device) gpuclust_device;

	s = text_to_cstring(DatumGetTextPP(value));
	if (!gc_parse_device(s, &dev))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid device \"%s\"", s),
				 errhint("Valid devices are \"auto\", \"cpu\" and \"gpu\"; NULL uses the gpuclust.device setting.")));
	pfree(s);
	return dev;
}

/* The device argument at argno. */
static gc_device
arg_device(const GcArgs *a, int argno)
{
	return gc_glue_device(a->value[argno], a->isnull[argno]);
}

/* metric text, by pgvector's names, or an ERROR */
static gc_metric
parse_metric(Datum value)
{
	char	   *s = text_to_cstring(DatumGetTextPP(value));

	if (pg_strcasecmp(s, "euclidean") == 0)
		return GC_METRIC_EUCLIDEAN;
	if (pg_strcasecmp(s, "cosine") == 0)
		return GC_METRIC_COSINE;
	if (pg_strcasecmp(s, "inner_product") == 0)
		return GC_METRIC_INNER_PRODUCT;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid metric \"%s\"", s),
			 errhint("Valid metrics are \"euclidean\", \"cosine\" and \"inner_product\" (pgvector's names).")));
	pg_unreachable();
}

/* ERROR (22023): s is not a valid what; hint lists the valid ones */
pg_noreturn static void invalid_name(const char *what, const char *s, const char *hint);

static void
invalid_name(const char *what, const char *s, const char *hint)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid %s \"%s\"", what, s),
			 errhint("%s", hint)));
	pg_unreachable();
}

/* DBSCAN's algorithm text, by the core's names (gc_parse_dbscan_algorithm), or an ERROR */
static gc_dbscan_algorithm
parse_dbscan_algorithm(Datum value)
{
	char	   *s = text_to_cstring(DatumGetTextPP(value));
	gc_dbscan_algorithm algorithm;

	if (!gc_parse_dbscan_algorithm(s, &algorithm))
		invalid_name("DBSCAN algorithm", s,
					 "Valid algorithms are \"union_find\" (the default, on every device) and \"dclust\" (CUDA-DClust, on the GPU only); both give the same labels.");
	pfree(s);
	return algorithm;
}

/* affinity propagation's precision text, by the core's names (gc_parse_ap_precision), or an ERROR */
static gc_ap_precision
parse_ap_precision(Datum value)
{
	char	   *s = text_to_cstring(DatumGetTextPP(value));
	gc_ap_precision precision;

	if (!gc_parse_ap_precision(s, &precision))
		invalid_name("affinity propagation precision", s,
					 "Valid precisions are \"float8\" (the default, on every device) and \"float4\" (the similarities and messages stored as float, on the GPU only).");
	pfree(s);
	return precision;
}

/*
 * A call whose parameters the CPU cannot run (st's message: DBSCAN's
 * dclust, affinity propagation in float4) asked for the CPU, by the
 * device argument at argno or, when that is NULL, by gpuclust.device
 * (requested): 0A000, before the source runs.  other is the parameter's
 * value that runs everywhere, for the hint.
 */
static void
refuse_on_cpu(const GcArgs *a, int argno, gc_device requested,
			  const gc_status *st, const char *other)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("%s", st->message),
			 a->isnull[argno] ?
			 errdetail("device is NULL, and the gpuclust.device setting is \"%s\".",
					   gc_device_name(requested)) :
			 errdetail("device is \"%s\".", gc_device_name(requested)),
			 errhint("Use device => 'gpu' or 'auto'%s, or %s.",
					 a->isnull[argno] ? " (or set gpuclust.device to one of them)" : "",
					 other)));
}

/*
 * init text of k-means: 'k-means++' | 'random' | 'k-means||' | 'auto' (the
 * core resolves it: gc_km_init_resolve), or a query returning the
 * initial centroids (GC_INIT_CENTROIDS, the query in *query): text with a
 * space or a parenthesis in it.  Anything else is an ERROR.
 */
static gc_kmeans_init
parse_kmeans_init(Datum value, char **query)
{
	char	   *s = text_to_cstring(DatumGetTextPP(value));

	*query = NULL;
	if (pg_strcasecmp(s, "k-means++") == 0)
		return GC_INIT_KMEANSPP;
	if (pg_strcasecmp(s, "random") == 0)
		return GC_INIT_RANDOM;
	if (pg_strcasecmp(s, "k-means||") == 0)
		return GC_INIT_KMEANS_PARALLEL;
	if (pg_strcasecmp(s, "auto") == 0)
		return GC_INIT_AUTO;
	if (strpbrk(s, " \t\n\r(") != NULL)
	{
		*query = s;
		return GC_INIT_CENTROIDS;
	}
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid init method \"%s\"", s),
			 errhint("Valid methods are \"k-means++\", \"k-means||\", \"random\" and \"auto\"; to start from given centroids, pass init_centroids => a k x d real[], or init => a query returning them, as in init => 'SELECT features FROM centres ORDER BY id'.")));
	pg_unreachable();
}

/* ERROR unless argument argno of a, whose value is value, is at least 1 */
static void
check_at_least_1(const GcArgs *a, int argno, int64 value)
{
	if (value < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be at least 1", a->sig->arg[argno].name)));
}

gc_metric
gc_glue_kmeans_metric(Datum value)
{
	gc_metric	metric = parse_metric(value);

	if (metric == GC_METRIC_INNER_PRODUCT)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("k-means does not support the inner_product metric"),
				 errdetail("Its distance -a.b is not a metric: a row need not be nearest to itself, and no centre minimises it (a centre moved farther out along the cluster's mean always lowers it), so k-means with it is ill-defined."),
				 errhint("For embeddings, metric => 'cosine' is spherical k-means: the inner product of unit-length rows with unit-length centres.")));
	return metric;
}

void
gc_glue_kmeans_params(const GcArgs *a, gc_kmeans_params *p, gc_device *device,
					  char **init_query)
{
	Assert(a->sig == &gc_kmeans_signature);
	memset(p, 0, sizeof(*p));
	p->k = DatumGetInt32(a->value[KM_K]);
	p->max_iter = DatumGetInt32(a->value[KM_MAX_ITER]);
	p->tol = DatumGetFloat8(a->value[KM_TOL]);
	p->n_init = DatumGetInt32(a->value[KM_N_INIT]);
	p->seed = (uint64) DatumGetInt64(a->value[KM_SEED]);
	check_at_least_1(a, KM_K, p->k);
	check_at_least_1(a, KM_MAX_ITER, p->max_iter);
	if (isnan(p->tol) || isinf(p->tol) || p->tol < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("tol must be a finite number greater than or equal to 0")));
	check_at_least_1(a, KM_N_INIT, p->n_init);
	p->metric = gc_glue_kmeans_metric(a->value[KM_METRIC]);
	p->init = parse_kmeans_init(a->value[KM_INIT], init_query);
	*device = arg_device(a, KM_DEVICE);
	if (!a->isnull[KM_INIT_CENTROIDS])
	{
		ArrayType  *arr = DatumGetArrayTypeP(a->value[KM_INIT_CENTROIDS]);
		float	   *C;

		if (p->init != GC_INIT_KMEANSPP)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("init and init_centroids cannot both be given"),
					 errdetail("init_centroids are the initial centres; init is \"%s\".",
							   TextDatumGetCString(a->value[KM_INIT])),
					 errhint("Leave init at its default with init_centroids.")));
		(void) gc_glue_parse_centroids(arr, "init_centroids", p->k,
									   &p->init_d, &C, CurrentMemoryContext);
		p->init = GC_INIT_CENTROIDS;
		p->init_centroids = C;
	}
}

void
gc_glue_dbscan_params(const GcArgs *a, gc_dbscan_params *p, gc_device *device)
{
	gc_status	st = {GC_OK, ""};
	gc_device	requested;

	Assert(a->sig == &gc_dbscan_signature);
	memset(p, 0, sizeof(*p));
	p->eps = DatumGetFloat8(a->value[DB_EPS]);
	p->min_pts = DatumGetInt32(a->value[DB_MIN_PTS]);
	if (isnan(p->eps) || isinf(p->eps) || p->eps <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("eps must be a finite number greater than 0")));
	check_at_least_1(a, DB_MIN_PTS, p->min_pts);
	p->metric = parse_metric(a->value[DB_METRIC]);
	if (p->metric == GC_METRIC_INNER_PRODUCT)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("DBSCAN does not support the inner_product metric"),
				 errdetail("Its distance -a.b is not a metric: a row need not be its own neighbour, and no index can bound it."),
				 errhint("For unit-length vectors, -a.b <= eps is cosine distance <= eps + 1: use metric => 'cosine'.")));
	requested = arg_device(a, DB_DEVICE);
	p->algorithm = parse_dbscan_algorithm(a->value[DB_ALGORITHM]);
	/*
	 * The device the algorithm asks for (dispatch's rule): dclust asks for
	 * the GPU under 'auto' too, and cannot run on the CPU, which is refused
	 * here, before the source runs.
	 */
	if (gc_dbscan_device_request(requested, p->algorithm, device, &st) != GC_OK)
		refuse_on_cpu(a, DB_DEVICE, requested, &st,
					  "algorithm => 'union_find', which gives the same labels on every device");
}

void
gc_glue_dbscan_values(Datum eps, Datum min_pts, Datum device, bool device_null,
					  gc_dbscan_params *p, gc_device *requested)
{
	GcArgs		a;

	memset(&a, 0, sizeof(a));
	a.sig = &gc_dbscan_signature;
	a.value[DB_EPS] = eps;
	a.value[DB_MIN_PTS] = min_pts;
	a.value[DB_DEVICE] = device;
	a.isnull[DB_DEVICE] = device_null;
	a.value[DB_METRIC] = CStringGetTextDatum("euclidean");
	a.value[DB_ALGORITHM] = CStringGetTextDatum("union_find");
	gc_glue_dbscan_params(&a, p, requested);
}

void
gc_glue_ap_params(const GcArgs *a, gc_ap_params *p, gc_device *device)
{
	gc_status	st = {GC_OK, ""};
	gc_device	requested;

	Assert(a->sig == &gc_ap_signature);
	memset(p, 0, sizeof(*p));
	p->damping = DatumGetFloat8(a->value[AP_DAMPING]);
	p->has_preference = !a->isnull[AP_PREFERENCE];
	p->preference = p->has_preference ?
		DatumGetFloat8(a->value[AP_PREFERENCE]) : 0.0;
	p->max_iter = DatumGetInt32(a->value[AP_MAX_ITER]);
	p->convergence_iter = DatumGetInt32(a->value[AP_CONVERGENCE_ITER]);

	if (isnan(p->damping) || p->damping < 0.5 || p->damping >= 1.0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("damping must be at least 0.5 and less than 1")));
	if (p->has_preference && (isnan(p->preference) || isinf(p->preference)))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("preference must be a finite number"),
				 errhint("NULL uses the median of the similarities.")));
	check_at_least_1(a, AP_MAX_ITER, p->max_iter);
	check_at_least_1(a, AP_CONVERGENCE_ITER, p->convergence_iter);
	requested = arg_device(a, AP_DEVICE);
	p->precision = parse_ap_precision(a->value[AP_PRECISION]);
	/* the device the precision asks for: float4's as dclust's (above) */
	if (gc_ap_device_request(requested, p->precision, device, &st) != GC_OK)
		refuse_on_cpu(a, AP_DEVICE, requested, &st,
					  "\"precision\" => 'float8', which runs on every device");
}

void
gc_glue_kdistance_params(const GcArgs *a, int64 *k, int32 *quantiles,
						 gc_device *device)
{
	Assert(a->sig == &gc_kdistance_signature);
	*k = DatumGetInt32(a->value[KD_K]);
	check_at_least_1(a, KD_K, *k);
	*quantiles = 0;
	if (!a->isnull[KD_QUANTILES])
	{
		*quantiles = DatumGetInt32(a->value[KD_QUANTILES]);
		if (*quantiles < 1)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("quantiles must be at least 1"),
					 errhint("NULL returns every row's k-distance; q returns the q + 1 quantiles 0, 1/q, ..., 1.")));
	}
	*device = arg_device(a, KD_DEVICE);
}

void
gc_glue_silhouette_params(const GcArgs *a, int64 *sample_size, uint64 *seed,
						  gc_device *device)
{
	Assert(a->sig == &gc_silhouette_signature);
	*sample_size = 0;
	if (!a->isnull[SIL_SAMPLE_SIZE])
	{
		*sample_size = DatumGetInt32(a->value[SIL_SAMPLE_SIZE]);
		if (*sample_size < 2)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("sample_size must be at least 2"),
					 errhint("NULL scores every row up to %d rows and a sample of that many beyond.",
							 GC_SILHOUETTE_EXACT_ROWS)));
	}
	*seed = (uint64) DatumGetInt64(a->value[SIL_SEED]);
	*device = arg_device(a, SIL_DEVICE);
}

void
gc_glue_elbow_params(const GcArgs *a, int *k_min, int *k_max,
					 gc_kmeans_params *p, gc_device *device)
{
	GcArgs		km;
	char	   *init_query;

	Assert(a->sig == &gc_elbow_signature);
	*k_min = DatumGetInt32(a->value[EL_K_MIN]);
	*k_max = DatumGetInt32(a->value[EL_K_MAX]);
	check_at_least_1(a, EL_K_MIN, *k_min);
	if (*k_max < *k_min)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("k_max must be at least k_min"),
				 errdetail("k_min is %d, k_max %d.", *k_min, *k_max)));
	/* the k-means parameters, read as gpu_kmeans reads them, k = k_max */
	memset(&km, 0, sizeof(km));
	km.sig = &gc_kmeans_signature;
	km.id_type = InvalidOid;
	km.value[GC_ARG_ROWS] = a->value[GC_ARG_ROWS];
	km.value[KM_K] = a->value[EL_K_MAX];
	for (int i = EL_MAX_ITER; i <= EL_DEVICE; i++)
	{
		km.value[i - 1] = a->value[i];
		km.isnull[i - 1] = a->isnull[i];
	}
	/* no initial centroids: k of them fix k, and the elbow runs every k */
	km.isnull[KM_INIT_CENTROIDS] = true;
	km.value[KM_METRIC] = a->value[EL_METRIC];
	gc_glue_kmeans_params(&km, p, device, &init_query);
	if (init_query != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("gpu_kmeans_elbow takes no init query"),
				 errdetail("Initial centroids fix k; the elbow runs every k from k_min to k_max."),
				 errhint("Use init => 'k-means++', 'k-means||', 'random' or 'auto'.")));
}

void
gc_glue_check_k_rows(int k, int64 n, GcRowsOrigin origin, const char *hint)
{
	if (k <= n)
		return;
	if (origin == GC_ROWS_PARTITION)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("k must not exceed the number of rows with features"),
				 errdetail_plural("k is %d, but the partition has %lld row with non-NULL features.",
								  "k is %d, but the partition has %lld rows with non-NULL features.",
								  (unsigned long) n,
								  k, (long long) n),
				 hint ? errhint("%s", hint) : 0));
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("k must not exceed the number of rows with features"),
			 errdetail_plural("k is %d, but the source query returned %lld row with non-NULL features.",
							  "k is %d, but the source query returned %lld rows with non-NULL features.",
							  (unsigned long) n,
							  k, (long long) n),
			 hint ? errhint("%s", hint) : 0));
}
