/*-------------------------------------------------------------------------
 *
 * cluster_run.c
 *	  Running the core on the chosen device (choice, GPU call, fallback to
 *	  the CPU under 'auto') and emitting labels: shared by the
 *	  set-returning functions (kmeans_sql.c, dbscan_sql.c), the window
 *	  functions (window_sql.c) and the models (model_sql.c), so that each
 *	  runs where the others would for the same problem and returns the
 *	  same labels.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/tuplestore.h"

#include "cluster_run.h"
#include "ingest.h"
#include "core/gpu.h"

/*
 * After a failed GPU run.  Under 'auto', lack of GPU memory or a CUDA error
 * is a NOTICE and the call is redone on the CPU (the result); anything
 * else, or any failure under 'gpu', is the error.  (A build without CUDA
 * never chooses the GPU: dispatch refuses it first.)
 */
static gc_device
gpu_failed(gc_device requested, gc_status *st, const char *what)
{
	if (requested != GC_DEVICE_AUTO ||
		(st->code != GC_ENOMEM && st->code != GC_EDEVICE))
		gc_glue_report(st, what);
	ereport(NOTICE,
			(errmsg("%s falls back to the CPU", what),
			 errdetail("%s.", st->message)));
	st->code = GC_OK;
	st->message[0] = '\0';
	return GC_DEVICE_CPU;
}

gc_device
gc_glue_run_kmeans(gc_device requested, const float *X, int64 n, int d,
				   const gc_kmeans_params *params, gc_kmeans_result *res)
{
	gc_device	chosen;
	gc_ctx		ctx;
	gc_status	st = {GC_OK, ""};

	Assert(n >= 1);
	chosen = gc_glue_choose_kmeans_device(requested, n, d, params->k,
										  params->n_init);
	gc_glue_ctx(&ctx);
	ctx.n_threads = gc_kmeans_threads(&ctx, n, d, params->k);
	/* random init and the host side of the GPU path use OpenMP too */
	gc_glue_prepare_threads(&ctx);
	/* the device is gpuclust.gpu_device_id, made current by the probe */
	if (chosen == GC_DEVICE_GPU &&
		gc_kmeans_gpu(&ctx, X, n, d, params, res, &st) != GC_OK)
		chosen = gpu_failed(requested, &st, gc_algorithm_name(GC_ALGO_KMEANS));
	if (chosen == GC_DEVICE_CPU)
	{
		if (gc_kmeans_cpu(&ctx, X, n, d, params, res, &st) != GC_OK)
			gc_glue_report(&st, gc_algorithm_name(GC_ALGO_KMEANS));
	}
	return chosen;
}

gc_device
gc_glue_run_dbscan(gc_device requested, const float *X, int64 n, int d,
				   const gc_dbscan_params *params, int32 *labels,
				   uint8 *is_core)
{
	gc_device	chosen;
	gc_ctx		ctx;
	gc_status	st = {GC_OK, ""};

	Assert(n >= 1);
	chosen = gc_glue_choose_device(requested, GC_ALGO_DBSCAN, n, d);
	gc_glue_ctx(&ctx);
	ctx.n_threads = gc_dbscan_threads(&ctx, n);
	gc_glue_prepare_threads(&ctx);
	if (chosen == GC_DEVICE_GPU &&
		gc_dbscan_gpu(&ctx, X, n, d, params, labels, is_core, &st) != GC_OK)
		chosen = gpu_failed(requested, &st, gc_algorithm_name(GC_ALGO_DBSCAN));
	if (chosen == GC_DEVICE_CPU &&
		gc_dbscan_cpu(&ctx, X, n, d, params, labels, is_core, &st) != GC_OK)
		gc_glue_report(&st, gc_algorithm_name(GC_ALGO_DBSCAN));
	return chosen;
}

void
gc_glue_gpu_phases(gc_algorithm algo, gc_device ran, char *buf, size_t len)
{
	buf[0] = '\0';
	if (ran != GC_DEVICE_GPU)
		return;
	if (algo == GC_ALGO_KMEANS)
	{
		gc_kmeans_gpu_phases ph;

		gc_kmeans_gpu_last_phases(&ph);
		snprintf(buf, len, " (upload %.1f, init %.1f, lloyd %.1f, download %.1f)",
				 ph.ms_upload, ph.ms_init, ph.ms_lloyd, ph.ms_download);
	}
	else
	{
		gc_dbscan_gpu_phases ph;

		gc_dbscan_gpu_last_phases(&ph);
		snprintf(buf, len,
				 " (upload %.1f, cluster %.1f, number %.1f, download %.1f, free %.1f; %s index)",
				 ph.ms_upload, ph.ms_index + ph.ms_core + ph.ms_union + ph.ms_border,
				 ph.ms_number, ph.ms_download, ph.ms_free, ph.grid ? "grid" : "brute-force");
	}
}

void
gc_glue_emit_labels(ReturnSetInfo *rsinfo, const GcInput *in,
					const int32 *labels, const uint8 *flags)
{
	for (int64 i = 0, j = 0; i < in->n_rows; i++)
	{
		Datum		values[3];
		bool		nulls[3] = {false, false, false};

		values[0] = Int64GetDatum(in->ids[i]);
		if (in->has_features[i])
		{
			if (labels[j] == GC_NOISE)
			{
				values[1] = (Datum) 0;
				nulls[1] = true;
			}
			else
				values[1] = Int32GetDatum(labels[j]);
			values[2] = BoolGetDatum(flags[j] != 0);
			j++;
		}
		else
		{
			values[1] = values[2] = (Datum) 0;
			nulls[1] = nulls[2] = true;
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		if ((i & 0xFFFF) == 0xFFFF)
			CHECK_FOR_INTERRUPTS();
	}
}
