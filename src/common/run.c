/*-------------------------------------------------------------------------
 *
 * run.c
 *	  What every algorithm's run function shares (each algorithm's is in its
 *	  folder: kmeans/kmeans_run.c, dbscan/dbscan_run.c, affinity/affinity_run.c,
 *	  tools/tools_run.c): the fallback to the CPU after a failed GPU run
 *	  under 'auto', the result arrays, and the names of rows in errors.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "miscadmin.h"
#include "utils/memutils.h"

#include "common/run.h"
#include "core/common/gpu.h"

/*
 * After a failed GPU run.  Under 'auto', lack of GPU memory or a CUDA error
 * is a NOTICE and the call is redone on the CPU (the result); anything
 * else, or any failure under 'gpu', is the error (gpu_hint: see
 * gc_glue_report_hint).  (A build without CUDA never chooses the GPU:
 * dispatch refuses it first.)  A DBSCAN dclust call, or an affinity
 * propagation in float4, never comes here under 'auto': its request is
 * the GPU (gc_glue_dbscan_params, gc_glue_ap_params).
 */
gc_device
gc_glue_gpu_failed(gc_device requested, gc_status *st, const char *what,
		   const char *gpu_hint)
{
	if (requested != GC_DEVICE_AUTO ||
		(st->code != GC_ENOMEM && st->code != GC_EDEVICE))
		gc_glue_report_hint(st, what, gpu_hint);
	ereport(NOTICE,
			(errmsg("%s falls back to the CPU", what),
			 errdetail("%s.", st->message)));
	st->code = GC_OK;
	st->message[0] = '\0';
	return GC_DEVICE_CPU;
}

/* n elements of size bytes each, in cxt (huge: more than 1 GB works) */
void *
gc_glue_alloc_array(MemoryContext cxt, Size n, Size size)
{
	return MemoryContextAllocHuge(cxt, n * size);
}

/*
 * How errors name the input row of row j of X: "row with id 7", "source
 * row 12" (ids of another type: the id is not printed), "partition row 3".
 */
static char *
row_name(const GcInput *in, int64 j)
{
	int64		i,
				seen = -1;

	for (i = 0; i < in->n_rows - 1; i++)
		if (in->has_features[i] && ++seen == j)
			break;
	if (in->ids == NULL)
		return psprintf("partition row %lld", (long long) i + 1);
	if (in->keys != NULL)
		return psprintf("source row %lld", (long long) i + 1);
	return psprintf("row with id %lld", (long long) in->ids[i]);
}

/* Under the cosine metric: no row of X may be all 0 (22000, naming it). */
void
gc_glue_check_no_zero_row(const GcInput *in)
{
	int64		zero = gc_first_zero_row(in->X, in->n, in->d);

	if (zero >= 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("features of %s are all 0: the cosine distance is undefined",
						row_name(in, zero)),
				 errhint("Leave zero vectors out of the source, or use metric => 'euclidean'.")));
}

