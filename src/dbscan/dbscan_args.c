/*-------------------------------------------------------------------------
 *
 * dbscan_args.c
 *	  The arguments of DBSCAN: its signature and reader, shared by every SQL
 *	  form (set-returning, window, the distributed forms); see dbscan_glue.h.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "utils/builtins.h"

#include "dbscan/dbscan_glue.h"

/* the positions of the parameters (0 is the rows) */
enum
{
	DB_EPS = 1,
	DB_MIN_PTS,
	DB_DEVICE,
	DB_METRIC,
	DB_ALGORITHM
};

/*
 * Position 0 is named for the set-returning forms (a window function's
 * features may be NULL: the row is left unclustered).
 */
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

/* DBSCAN's algorithm text, by the core's names (gc_parse_dbscan_algorithm), or an ERROR */
static gc_dbscan_algorithm
parse_dbscan_algorithm(Datum value)
{
	char	   *s = text_to_cstring(DatumGetTextPP(value));
	gc_dbscan_algorithm algorithm;

	if (!gc_parse_dbscan_algorithm(s, &algorithm))
		gc_glue_invalid_name("DBSCAN algorithm", s,
					 "Valid algorithms are \"union_find\" (the default, on every device) and \"dclust\" (CUDA-DClust, on the GPU only); both give the same labels.");
	pfree(s);
	return algorithm;
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
	gc_glue_check_at_least_1(a, DB_MIN_PTS, p->min_pts);
	p->metric = gc_glue_parse_metric(a->value[DB_METRIC]);
	if (p->metric == GC_METRIC_INNER_PRODUCT)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("DBSCAN does not support the inner_product metric"),
				 errdetail("Its distance -a.b is not a metric: a row need not be its own neighbour, and no index can bound it."),
				 errhint("For unit-length vectors, -a.b <= eps is cosine distance <= eps + 1: use metric => 'cosine'.")));
	requested = gc_glue_arg_device(a, DB_DEVICE);
	p->algorithm = parse_dbscan_algorithm(a->value[DB_ALGORITHM]);
	/*
	 * The device the algorithm asks for (dispatch's rule): dclust asks for
	 * the GPU under 'auto' too, and cannot run on the CPU, which is refused
	 * here, before the source runs.
	 */
	if (gc_dbscan_device_request(requested, p->algorithm, device, &st) != GC_OK)
		gc_glue_refuse_on_cpu(a, DB_DEVICE, requested, &st,
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
