/*-------------------------------------------------------------------------
 *
 * tools_args.c
 *	  The arguments of the tools for choosing parameters: gpu_kdistance,
 *	  gpu_silhouette and gpu_cluster_centers; see tools_glue.h.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "tools/tools_glue.h"

/* the positions of the parameters (0 is the rows) */
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

void
gc_glue_kdistance_params(const GcArgs *a, int64 *k, int32 *quantiles,
						 gc_device *device)
{
	Assert(a->sig == &gc_kdistance_signature);
	*k = DatumGetInt32(a->value[KD_K]);
	gc_glue_check_at_least_1(a, KD_K, *k);
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
	*device = gc_glue_arg_device(a, KD_DEVICE);
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
	*device = gc_glue_arg_device(a, SIL_DEVICE);
}
