/*-------------------------------------------------------------------------
 *
 * affinity_args.c
 *	  The arguments of affinity propagation: its signature and reader; see
 *	  affinity_glue.h.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "utils/builtins.h"

#include "affinity/affinity_glue.h"

/* the positions of the parameters (0 is the rows) */
enum
{
	AP_DAMPING = 1,
	AP_PREFERENCE,
	AP_MAX_ITER,
	AP_CONVERGENCE_ITER,
	AP_DEVICE,
	AP_PRECISION				/* after device: older calls keep their positions */
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

/* affinity propagation's precision text, by the core's names (gc_parse_ap_precision), or an ERROR */
static gc_ap_precision
parse_ap_precision(Datum value)
{
	char	   *s = text_to_cstring(DatumGetTextPP(value));
	gc_ap_precision precision;

	if (!gc_parse_ap_precision(s, &precision))
		gc_glue_invalid_name("affinity propagation precision", s,
					 "Valid precisions are \"float8\" (the default, on every device) and \"float4\" (the similarities and messages stored as float, on the GPU only).");
	pfree(s);
	return precision;
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
	gc_glue_check_at_least_1(a, AP_MAX_ITER, p->max_iter);
	gc_glue_check_at_least_1(a, AP_CONVERGENCE_ITER, p->convergence_iter);
	requested = gc_glue_arg_device(a, AP_DEVICE);
	p->precision = parse_ap_precision(a->value[AP_PRECISION]);
	/*
	 * the device the precision asks for: float4's as dclust's
	 * (dbscan/dbscan_args.c)
	 */
	if (gc_ap_device_request(requested, p->precision, device, &st) != GC_OK)
		gc_glue_refuse_on_cpu(a, AP_DEVICE, requested, &st,
					  "\"precision\" => 'float8', which runs on every device");
}
