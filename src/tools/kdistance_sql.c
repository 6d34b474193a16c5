/*-------------------------------------------------------------------------
 *
 * kdistance_sql.c
 *	  gpu_kdistance(source, k, quantiles, device)
 *	  RETURNS TABLE (rank bigint, fraction float8, kdistance float8,
 *					 is_knee boolean)
 *
 * Choosing DBSCAN's eps (Ester et al., 1996): every row's distance to its
 * k-th nearest row, the row itself counted first (kdistance.c), sorted
 * ascending; rank 1 .. n, fraction (rank - 1) / (n - 1).  A row is a core
 * point of gpu_dbscan(eps => kdistance, min_pts => k) exactly when its
 * k-distance is at most eps: kdistance is sqrt of the float32 gc_dist2,
 * computed in double, so that eps * eps rounds back to it.  is_knee marks
 * one row: the knee of the sorted curve, gc_knee_index (the point farthest
 * below the chord from the first to the last, in the unit square), the
 * suggested eps.  With quantiles q, only the rows at ranks
 * 1 + round(i (n - 1) / q), i = 0 .. q (each once), and the knee's row.
 * An empty source returns no rows; rows with NULL features are left out.
 * The k-distances run on the device dispatch chooses once the rows are
 * read (gc_glue_run_kdistance: 'auto' the GPU from
 * GC_KDISTANCE_GPU_MIN_ROWS rows when its memory fits, 'gpu' the GPU or
 * the reason), the GPU's (the GPU DBSCAN's kd-tree, through the GPU worker
 * when there is one) equal to the CPU's bit for bit; the sort and the
 * knee on the CPU.  gpuclust_progress shows the call: ingest, index (the
 * kd-tree; on the GPU upload first), iterate (the queries, points done of
 * total), label (the sort and the knee), emit, and the device used.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/tuplestore.h"

#include "common/gpuclust.h"
#include "common/ingest.h"
#include "common/progress.h"
#include "tools/tools_glue.h"

PG_FUNCTION_INFO_V1(gpu_kdistance);

static int
cmp_float(const void *a, const void *b)
{
	float		x = *(const float *) a,
				y = *(const float *) b;

	return x < y ? -1 : x > y;
}

static void
put_row(ReturnSetInfo *rsinfo, int64 pos, int64 n, double dist, bool knee)
{
	Datum		values[4];
	bool		nulls[4] = {false, false, false, false};

	values[0] = Int64GetDatum(pos + 1);
	values[1] = Float8GetDatum(n > 1 ? (double) pos / (double) (n - 1) : 0.0);
	values[2] = Float8GetDatum(dist);
	values[3] = BoolGetDatum(knee);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

Datum
gpu_kdistance(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	GcArgs		args;
	int64		k;
	int32		quantiles;
	gc_device	device;
	MemoryContext cxt;
	GcInput		in;
	float	   *kd2;
	double	   *y;
	int64		knee;
	double		t0,
				t1,
				t2;

	/* cheap checks first: nothing runs when an argument is bad */
	gc_glue_args_of_call(fcinfo, &gc_kdistance_signature, &args);
	gc_glue_kdistance_params(&args, &k, &quantiles, &device);

	InitMaterializedSRF(fcinfo, 0);
	cxt = AllocSetContextCreate(CurrentMemoryContext, "gpu_kdistance",
								ALLOCSET_DEFAULT_SIZES);
	t0 = gc_now_ms();
	gc_progress_begin("gpu_kdistance");
	/* the ids are not used: any type will do */
	gc_ingest(TextDatumGetCString(args.value[GC_ARG_ROWS]), ANYOID,
			  gc_ingest_flags_for(0, device), cxt, &in);
	t1 = gc_now_ms();
	if (in.n == 0)
	{
		gc_progress_end();
		MemoryContextDelete(cxt);
		return (Datum) 0;
	}
	gc_glue_check_k_rows((int) k, in.n, NULL);

	kd2 = MemoryContextAllocHuge(cxt, in.n * sizeof(float));
	y = MemoryContextAllocHuge(cxt, in.n * sizeof(double));
	device = gc_glue_run_kdistance(device, &in, k, kd2);
	gc_progress_phase(GC_PHASE_LABEL);
	qsort(kd2, in.n, sizeof(float), cmp_float);
	for (int64 i = 0; i < in.n; i++)
		y[i] = sqrt((double) kd2[i]);
	knee = gc_knee_index(y, in.n);
	t2 = gc_now_ms();
	gc_progress_phase(GC_PHASE_EMIT);

	/*
	 * From n - 1 quantiles up, every rank is a quantile's (consecutive ones
	 * are at most one rank apart): all rows, so that the rows, not the
	 * argument, bound the loop.
	 */
	if (quantiles == 0 || quantiles >= in.n - 1)
	{
		for (int64 i = 0; i < in.n; i++)
		{
			CHECK_FOR_INTERRUPTS();
			put_row(rsinfo, i, in.n, y[i], i == knee);
		}
	}
	else
	{
		int64		last = -1;

		for (int64 q = 0; q <= quantiles; q++)
		{
			int64		pos = (int64) floor((double) q * (double) (in.n - 1) /
											(double) quantiles + 0.5);

			CHECK_FOR_INTERRUPTS();
			if (knee > last && knee < pos)
				put_row(rsinfo, knee, in.n, y[knee], true);
			if (pos > last)
				put_row(rsinfo, pos, in.n, y[pos], pos == knee);
			last = Max(last, pos);
		}
	}
	if (gpuclust_log_timing)
		ereport(INFO,
				(errmsg("gpu_kdistance: device %s, n %lld, d %d, k %lld; ingest %.1f ms, compute %.1f ms, emit %.1f ms",
						gc_device_name(device), (long long) in.n, in.d,
						(long long) k, t1 - t0,
						t2 - t1, gc_now_ms() - t2)));
	gc_progress_end();
	MemoryContextDelete(cxt);
	return (Datum) 0;
}
