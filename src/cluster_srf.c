/*-------------------------------------------------------------------------
 *
 * cluster_srf.c
 *	  The frame of the set-returning clustering functions: arguments,
 *	  ingest of the source query into the call's working memory, the one
 *	  emitter of (id, cluster_id, is_core | is_exemplar | distance) rows,
 *	  and the phase timings of gpuclust.log_timing.  See cluster_srf.h.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/tuplestore.h"

#include "cluster_srf.h"
#include "core/gpu.h"

/* ms since call->t_mark, which restarts */
static double
lap(GcSrfCall *call)
{
	double		now = gc_now_ms();
	double		ms = now - call->t_mark;

	call->t_mark = now;
	return ms;
}

void
gc_glue_srf_args(FunctionCallInfo fcinfo, const GcSignature *sig,
				 GcSrfCall *call)
{
	memset(call, 0, sizeof(*call));
	call->fcinfo = fcinfo;
	gc_glue_args_of_call(fcinfo, sig, &call->args);
}

void
gc_glue_srf_ingest(GcSrfCall *call)
{
	char	   *source = TextDatumGetCString(call->args.value[GC_ARG_ROWS]);

	InitMaterializedSRF(call->fcinfo, 0);
	call->cxt = AllocSetContextCreate(CurrentMemoryContext,
									  "gpuclust set-returning function",
									  ALLOCSET_DEFAULT_SIZES);
	call->t_mark = gc_now_ms();
	gc_ingest(source, call->cxt, &call->in);
	call->ms_ingest = lap(call);
}

void
gc_glue_srf_emit(GcSrfCall *call, const int32 *labels, const uint8 *flags,
				 const double *distance)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) call->fcinfo->resultinfo;
	const GcInput *in = &call->in;

	Assert(in->n == 0 ||
		   (labels != NULL && (flags == NULL) != (distance == NULL)));
	call->ms_compute = lap(call);
	for (int64 i = 0, j = 0; i < in->n_rows; i++)
	{
		Datum		values[3] = {0, 0, 0};
		bool		nulls[3] = {false, true, true};

		values[0] = Int64GetDatum(in->ids[i]);
		if (in->has_features[i])
		{
			nulls[1] = labels[j] == GC_NOISE;
			if (!nulls[1])
				values[1] = Int32GetDatum(labels[j]);
			nulls[2] = false;
			values[2] = flags ? BoolGetDatum(flags[j] != 0) :
				Float8GetDatum(distance[j]);
			j++;
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		if ((i & 0xFFFF) == 0xFFFF)
			CHECK_FOR_INTERRUPTS();
	}
	call->ms_emit = lap(call);
}

void
gc_glue_srf_end(GcSrfCall *call)
{
	MemoryContextDelete(call->cxt);
	call->cxt = NULL;
}

const char *
gc_glue_srf_gpu_phases(const GcSrfCall *call, gc_algorithm algo)
{
	if (call->in.n == 0 || call->ran != GC_DEVICE_GPU)
		return "";
	if (algo == GC_ALGO_KMEANS)
	{
		gc_kmeans_gpu_phases ph;

		gc_kmeans_gpu_last_phases(&ph);
		return psprintf(" (upload %.1f, init %.1f, lloyd %.1f, download %.1f)",
						ph.ms_upload, ph.ms_init, ph.ms_lloyd, ph.ms_download);
	}
	else
	{
		gc_dbscan_gpu_phases ph;

		gc_dbscan_gpu_last_phases(&ph);
		return psprintf(" (upload %.1f, cluster %.1f, number %.1f, download %.1f, free %.1f; %s index)",
						ph.ms_upload, ph.ms_index + ph.ms_core + ph.ms_union + ph.ms_border,
						ph.ms_number, ph.ms_download, ph.ms_free,
						ph.grid ? "grid" : "brute-force");
	}
}

void
gc_glue_srf_log_timing(const GcSrfCall *call, const char *head,
					   const char *compute_detail)
{
	ereport(INFO,
			(errmsg("%s; ingest %.1f ms, compute %.1f ms%s, emit %.1f ms",
					head, call->ms_ingest, call->ms_compute, compute_detail,
					call->ms_emit)));
}
