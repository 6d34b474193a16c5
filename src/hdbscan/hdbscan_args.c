/*-------------------------------------------------------------------------
 *
 * hdbscan_args.c
 *	  The arguments of HDBSCAN: its signatures and readers, shared by every
 *	  SQL form (gpu_hdbscan, gpu_hdbscan_tree, the window form;
 *	  gpu_minimum_spanning_tree); see hdbscan_glue.h.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "utils/builtins.h"

#include "hdbscan/hdbscan_glue.h"

/* the positions of the parameters (0 is the rows) */
enum
{
	HD_MIN_CLUSTER_SIZE = 1,
	HD_MIN_SAMPLES,
	HD_EPSILON,
	HD_METHOD,
	HD_ALLOW_SINGLE,
	HD_ALPHA,
	HD_METRIC,
	HD_DEVICE
};

enum
{
	MST_MIN_SAMPLES = 1,
	MST_ALPHA,
	MST_METRIC,
	MST_DEVICE
};

/*
 * Position 0 is named for the set-returning forms (a window function's
 * features may be NULL: the row is left unclustered).
 */
const GcSignature gc_hdbscan_signature = {
	.nargs = HD_DEVICE + 1,
	.arg = {
		[GC_ARG_ROWS] = {"source"},
		[HD_MIN_CLUSTER_SIZE] = {"min_cluster_size"},
		[HD_MIN_SAMPLES] = {"min_samples", true},
		[HD_EPSILON] = {"cluster_selection_epsilon"},
		[HD_METHOD] = {"cluster_selection_method"},
		[HD_ALLOW_SINGLE] = {"allow_single_cluster"},
		[HD_ALPHA] = {"alpha"},
		[HD_METRIC] = {"metric"},
		[HD_DEVICE] = {"device", true},
	},
};

const GcSignature gc_mst_signature = {
	.nargs = MST_DEVICE + 1,
	.arg = {
		[GC_ARG_ROWS] = {"source"},
		[MST_MIN_SAMPLES] = {"min_samples"},
		[MST_ALPHA] = {"alpha"},
		[MST_METRIC] = {"metric"},
		[MST_DEVICE] = {"device", true},
	},
};

/* The selection method, by the core's names (gc_parse_hdbscan_method), or an ERROR */
static gc_hdbscan_method
parse_method(Datum value)
{
	char	   *s = text_to_cstring(DatumGetTextPP(value));
	gc_hdbscan_method method;

	if (!gc_parse_hdbscan_method(s, &method))
		gc_glue_invalid_name("cluster selection method", s,
							 "Valid methods are \"eom\" (excess of mass, the default) and \"leaf\" (the leaves of the condensed tree).");
	pfree(s);
	return method;
}

/* What every form checks after min_samples: alpha, metric, device. */
static void
read_common(const GcArgs *a, int alpha, int metric, int device,
			gc_hdbscan_params *p, gc_device *requested)
{
	p->alpha = DatumGetFloat8(a->value[alpha]);
	if (isnan(p->alpha) || isinf(p->alpha) || p->alpha < GC_HDBSCAN_MIN_ALPHA)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("alpha must be a finite number of at least %g",
						GC_HDBSCAN_MIN_ALPHA)));
	p->metric = gc_glue_parse_metric(a->value[metric]);
	if (p->metric == GC_METRIC_INNER_PRODUCT)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("HDBSCAN does not support the inner_product metric"),
				 errdetail("Its distance -a.b is not a metric: a row need not be its own nearest neighbour, which the core distances count first."),
				 errhint("For unit-length vectors, -a.b is the cosine distance - 1: use metric => 'cosine'.")));
	*requested = gc_glue_arg_device(a, device);
}

void
gc_glue_hdbscan_params(const GcArgs *a, gc_hdbscan_params *p,
					   gc_device *device)
{
	Assert(a->sig == &gc_hdbscan_signature);
	memset(p, 0, sizeof(*p));
	p->min_cluster_size = DatumGetInt32(a->value[HD_MIN_CLUSTER_SIZE]);
	if (p->min_cluster_size < 2)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("min_cluster_size must be at least 2")));
	/* NULL: min_cluster_size, scikit-learn's rule */
	p->min_samples = p->min_cluster_size;
	if (!a->isnull[HD_MIN_SAMPLES])
	{
		p->min_samples = DatumGetInt32(a->value[HD_MIN_SAMPLES]);
		gc_glue_check_at_least_1(a, HD_MIN_SAMPLES, p->min_samples);
	}
	p->epsilon = DatumGetFloat8(a->value[HD_EPSILON]);
	if (isnan(p->epsilon) || isinf(p->epsilon) || p->epsilon < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cluster_selection_epsilon must be a finite number, 0 or greater")));
	p->method = parse_method(a->value[HD_METHOD]);
	p->allow_single_cluster = DatumGetBool(a->value[HD_ALLOW_SINGLE]);
	read_common(a, HD_ALPHA, HD_METRIC, HD_DEVICE, p, device);
}

void
gc_glue_mst_params(const GcArgs *a, gc_hdbscan_params *p, gc_device *device)
{
	Assert(a->sig == &gc_mst_signature);
	memset(p, 0, sizeof(*p));
	/* not used by the MST: HDBSCAN's smallest, and its default method */
	p->min_cluster_size = 2;
	p->method = GC_HDBSCAN_EOM;
	p->min_samples = DatumGetInt32(a->value[MST_MIN_SAMPLES]);
	gc_glue_check_at_least_1(a, MST_MIN_SAMPLES, p->min_samples);
	read_common(a, MST_ALPHA, MST_METRIC, MST_DEVICE, p, device);
}

const char *
gc_glue_hdbscan_min_samples_hint(const GcArgs *a)
{
	bool		defaulted = a->sig == &gc_hdbscan_signature &&
		a->isnull[HD_MIN_SAMPLES];

	return defaulted ?
		"min_samples is NULL, so it is min_cluster_size: give a smaller min_cluster_size, or min_samples." :
		NULL;
}

void
gc_glue_hdbscan_check_rows(const GcArgs *a, const gc_hdbscan_params *p,
						   int64 n)
{
	gc_glue_check_rows_for("min_samples", p->min_samples, n,
						   gc_glue_hdbscan_min_samples_hint(a));
}
