/*-------------------------------------------------------------------------
 *
 * kmeans_args.c
 *	  The arguments of k-means and its elbow: their signatures and readers,
 *	  and the initial centroids given as an array.  Shared by every SQL
 *	  form (set-returning, window, model fit, elbow); see kmeans_glue.h.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "utils/builtins.h"

#include "common/ingest.h"
#include "kmeans/kmeans_glue.h"

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
	.ingest_flags = GC_INGEST_WEIGHTS,	/* sample weights, a third column */
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

gc_metric
gc_glue_kmeans_metric(Datum value)
{
	gc_metric	metric = gc_glue_parse_metric(value);

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
	gc_glue_check_at_least_1(a, KM_K, p->k);
	gc_glue_check_at_least_1(a, KM_MAX_ITER, p->max_iter);
	if (isnan(p->tol) || isinf(p->tol) || p->tol < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("tol must be a finite number greater than or equal to 0")));
	gc_glue_check_at_least_1(a, KM_N_INIT, p->n_init);
	p->metric = gc_glue_kmeans_metric(a->value[KM_METRIC]);
	p->init = parse_kmeans_init(a->value[KM_INIT], init_query);
	*device = gc_glue_arg_device(a, KM_DEVICE);
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
gc_glue_elbow_params(const GcArgs *a, int *k_min, int *k_max,
					 gc_kmeans_params *p, gc_device *device)
{
	GcArgs		km;
	char	   *init_query;

	Assert(a->sig == &gc_elbow_signature);
	*k_min = DatumGetInt32(a->value[EL_K_MIN]);
	*k_max = DatumGetInt32(a->value[EL_K_MAX]);
	gc_glue_check_at_least_1(a, EL_K_MIN, *k_min);
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

/*
 * The k x d centroids of arr (a two-dimensional real[]) into *C_out
 * (allocated in cxt), d into *d_out; returns k.  what names them in the
 * errors ("centroids", "init_centroids"); expect_k > 0 requires k rows.
 * Errors: not two-dimensional (2202E), NULLs (22004), NaN or infinities
 * (22000), values beyond the features' range (22003, gc_feature_ok), a k
 * other than expect_k (22023).
 */
int
gc_glue_parse_centroids(ArrayType *arr, const char *what, int expect_k,
						int *d_out, float **C_out, MemoryContext cxt)
{
	int			ndim = ARR_NDIM(arr);
	int			k,
				d;
	const float4 *src;
	bits8	   *bitmap = ARR_NULLBITMAP(arr);
	float	   *C;
	float		bound;

	if (ARR_ELEMTYPE(arr) != FLOAT4OID)
		elog(ERROR, "unexpected element type %u in centroids", ARR_ELEMTYPE(arr));
	if (ndim == 0)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("%s are an empty array", what),
				 errdetail("Centroids are a two-dimensional array of k rows of d features, as gpu_kmeans_fit returns them.")));
	if (ndim != 2)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("%s must be a two-dimensional array", what),
				 errdetail("The array has %d dimension%s; centroids are k rows of d features, as gpu_kmeans_fit returns them, e.g. '{{0,0},{10,0}}'.",
						   ndim, ndim == 1 ? "" : "s")));
	k = ARR_DIMS(arr)[0];
	d = ARR_DIMS(arr)[1];
	if (expect_k > 0 && k != expect_k)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s have %d row%s, but k is %d", what, k,
						k == 1 ? "" : "s", expect_k),
				 errdetail("The initial centroids are k rows of d features, one per cluster.")));
	src = (const float4 *) ARR_DATA_PTR(arr);
	bound = gc_feature_bound(d);
	C = MemoryContextAlloc(cxt, (Size) k * (Size) d * sizeof(float));
	for (int c = 0; c < k; c++)
		for (int j = 0; j < d; j++)
		{
			Size		idx = (Size) c * d + j;

			if (bitmap && (bitmap[idx / 8] & (1 << (idx % 8))) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						 errmsg("%s contain a NULL at row %d, column %d",
								what, c + 1, j + 1)));
			/* without NULLs the data is dense: the idx-th value */
			C[idx] = src[idx];
			/* the features' own range test: no distance overflows */
			if (!gc_feature_ok(C[idx], bound))
			{
				if (isnan(C[idx]) || isinf(C[idx]))
					ereport(ERROR,
							(errcode(ERRCODE_DATA_EXCEPTION),
							 errmsg("%s contain %s at row %d, column %d", what,
									isnan(C[idx]) ? "NaN" : "an infinite value",
									c + 1, j + 1),
							 errdetail("Centroids must be finite numbers.")));
				gc_report_out_of_range(what,
									   psprintf("row %d, column %d", c + 1, j + 1),
									   C[idx], d);
			}
		}
	*d_out = d;
	*C_out = C;
	return k;
}
