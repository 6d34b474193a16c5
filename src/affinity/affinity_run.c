/*-------------------------------------------------------------------------
 *
 * affinity_run.c
 *	  Running affinity propagation on the rows of a call: the device (float4
 *	  only on the GPU), the check that its n x n matrices fit the memory
 *	  limits, the GPU run (affinity_job.c's gc_gpu_run_ap, over
 *	  worker/job.c), the fallback to the CPU under 'auto', and the notices
 *	  of a run that did not iterate or converge.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "common/progress.h"
#include "affinity/affinity_glue.h"
#include "worker/device.h"
#include "worker/job.h"

/* Affinity propagation's: float4 runs only on the GPU, float8 on the CPU too. */
const char *
gc_glue_ap_gpu_hint(gc_ap_precision precision)
{
	return gc_glue_gpu_only_hint(precision != GC_AP_FLOAT8,
						 psprintf("Affinity propagation in %s", gc_ap_precision_name(precision)),
						 "\"precision\" => 'float8' runs on the CPU too");
}

/*
 * The device of an affinity propagation call in precision on n rows of d
 * features (gc_choose_device_ap), or an ERROR: the GPU's reason (0A000,
 * for float4 with gc_glue_ap_gpu_hint's hint), or, when the GPU's memory
 * is too small under 'gpu' (float4: under 'auto' too), 53200 naming the
 * largest n that fits.  *note (NULL when none) says why 'auto' passed a
 * usable GPU over for lack of memory; the caller shows it once it knows
 * the CPU can take the call.
 */
gc_device
gc_glue_choose_ap_device(gc_device requested, gc_ap_precision precision,
						 int64 n, int d, char **note)
{
	gc_status	st = {GC_OK, ""};
	gc_device	chosen = GC_DEVICE_CPU;
	char		buf[256];
	gc_gpu		gpu;

	*note = NULL;
	gc_glue_gpu(&gpu);
	switch (gc_choose_device_ap(requested, precision, n, d, &gpu, &chosen,
								buf, sizeof(buf), &st))
	{
		case GC_OK:
			break;
		case GC_ENOMEM:
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("affinity propagation of %lld rows does not fit the GPU's memory",
							(long long) n),
					 errdetail("%s.", st.message),
					 precision == GC_AP_FLOAT8 ?
					 errhint("Cluster fewer rows, use \"precision\" => 'float4' (half the GPU memory), or device => 'cpu'.") :
					 errhint("Cluster fewer rows, or use \"precision\" => 'float8' on the CPU.")));
			break;
		default:
			gc_glue_report_hint(&st, gc_algorithm_name(GC_ALGO_AP),
								gc_glue_ap_gpu_hint(precision));
	}
	if (buf[0] != '\0')
		*note = pstrdup(buf);
	return chosen;
}

/*
 * bytes as MB with one decimal, for messages: rounded up for what is
 * needed, down for what is there, so "needs" always prints above "has"
 */
static double
mb_up(size_t bytes)
{
	return ceil((double) bytes / (1024.0 * 1024.0) * 10.0) / 10.0;
}

static double
mb_down(size_t bytes)
{
	return floor((double) bytes / (1024.0 * 1024.0) * 10.0) / 10.0;
}

/*
 * The error of an affinity propagation whose matrices (need bytes; device
 * says where they live) exceed the session's matrix memory limit
 * (gpuclust.matrix_memory, at most gpuclust.max_matrix_memory: setting
 * names the one that imposes it, limit_mb): at most max_rows rows fit.
 */
static void
ap_matrix_limit_error(int64 n, size_t need, gc_device device,
					  gc_ap_precision precision, int64 max_rows,
					  const char *setting, int limit_mb)
{
	ereport(ERROR,
			(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
			 errmsg("affinity propagation of %lld rows needs %.1f MB%s, more than %s (%d MB)",
					(long long) n, mb_up(need),
					device == GC_DEVICE_GPU ? " of GPU memory" : "",
					setting, limit_mb),
			 device == GC_DEVICE_CPU ?
			 errdetail("It keeps three n x n double precision matrices (24 n^2 bytes); at most %lld rows fit in %s.",
					   (long long) max_rows, setting) :
			 errdetail("On the GPU in %s it keeps three n x n %s matrices (about %d n^2 bytes); at most %lld rows fit in %s.",
					   gc_ap_precision_name(precision),
					   precision == GC_AP_FLOAT4 ? "single precision" : "double precision",
					   precision == GC_AP_FLOAT4 ? 12 : 24,
					   (long long) max_rows, setting),
			 strcmp(setting, "gpuclust.matrix_memory") == 0 ?
			 errhint("Raise gpuclust.matrix_memory (up to gpuclust.max_matrix_memory, %d MB), or cluster fewer rows.",
					 gpuclust_max_matrix_memory) :
			 superuser() ?
			 errhint("Raise gpuclust.max_matrix_memory, or cluster fewer rows.") :
			 errhint("gpuclust.max_matrix_memory is a superuser setting: ask an administrator to raise it, or cluster fewer rows.")));
}

/*
 * Fail unless affinity propagation of n rows on the CPU fits both the
 * session's matrix memory limit and the memory the server has available.
 * gpu_note (NULL if none): why the GPU did not take the call, for the
 * error's detail.
 */
static void
check_ap_cpu_memory(int64 n, const char *gpu_note)
{
	const char *setting;
	int			limit_mb = gc_glue_matrix_memory_mb(&setting);
	size_t		need = gc_ap_mem_bytes(n);
	size_t		limit = (size_t) limit_mb * 1024 * 1024;
	size_t		avail;

	if (need > limit)
		ap_matrix_limit_error(n, need, GC_DEVICE_CPU, GC_AP_FLOAT8,
							  gc_ap_max_rows(limit), setting, limit_mb);

	/* MemAvailable, or less under a cgroup (v1 or v2) memory limit */
	avail = gc_host_memory();
	if (need > avail)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("affinity propagation of %lld rows needs %.1f MB, more than the %.1f MB of memory available on the server",
						(long long) n, mb_up(need), mb_down(avail)),
				 errdetail("It keeps three n x n double precision matrices (24 n^2 bytes); at most %lld rows fit in the available memory (the host's MemAvailable, or the room left under the server's cgroup memory limit when that is less).%s%s",
						   (long long) gc_ap_max_rows(avail),
						   gpu_note ? " The GPU could not take it either: " : "",
						   gpu_note ? psprintf("%s.", gpu_note) : ""),
				 errhint("Cluster fewer rows.")));
}

/*
 * The device of an affinity propagation call (requested as the precision
 * asks, gc_glue_ap_params), its memory checked before anything is
 * allocated: the matrix memory limit bounds the matrices on either device
 * (the GPU's: gc_ap_gpu_mem_bytes), the GPU's memory is dispatch's
 * (gc_glue_choose_ap_device), the server's memory the CPU's.  Under
 * 'auto' a call whose matrices do not fit the GPU (the limit, or its
 * memory: then a NOTICE) runs on the CPU when they fit there.
 */
static gc_device
ap_device(gc_device requested, const GcInput *in, const gc_ap_params *p)
{
	const char *setting;
	int			limit_mb = gc_glue_matrix_memory_mb(&setting);
	size_t		limit = (size_t) limit_mb * 1024 * 1024;
	gc_device	chosen = GC_DEVICE_CPU;
	char	   *note = NULL;

	if (requested != GC_DEVICE_CPU)
	{
		size_t		need = gc_ap_gpu_mem_bytes(in->n, in->d, p->precision);

		if (need > limit)
		{
			if (requested == GC_DEVICE_GPU)
				ap_matrix_limit_error(in->n, need, GC_DEVICE_GPU, p->precision,
									  gc_ap_gpu_max_rows(limit, in->d, p->precision),
									  setting, limit_mb);
			/* 'auto', float8: the CPU's matrices may still fit */
			requested = GC_DEVICE_CPU;
		}
	}
	if (requested != GC_DEVICE_CPU)
		chosen = gc_glue_choose_ap_device(requested, p->precision, in->n,
										  in->d, &note);
	if (chosen == GC_DEVICE_CPU)
		check_ap_cpu_memory(in->n, note);
	if (note != NULL)
		ereport(NOTICE,
				(errmsg("affinity propagation runs on the CPU"),
				 errdetail("%s.", note)));
	return chosen;
}

/* The NOTICE of a run that did not iterate, or did not converge. */
static void
ap_notice(int64 n, const gc_ap_result *res)
{
	if (res->equal_similarities && n > 1)
		ereport(NOTICE,
				(errmsg("all rows are at the same distance from each other"),
				 res->n_clusters > 1
				 ? errdetail("Affinity propagation does not iterate: the preference is at least the similarity, so every row is its own exemplar.")
				 : errdetail("Affinity propagation does not iterate: the preference is below the similarity, so the first row is the one exemplar.")));
	else if (!res->converged)
		ereport(NOTICE,
				(errmsg_plural("affinity propagation did not converge in %d iteration",
							   "affinity propagation did not converge in %d iterations",
							   res->iterations, res->iterations),
				 res->n_clusters > 0
				 ? errdetail_plural("The %lld exemplar of the last iteration labels the rows; the clusters may be degenerate.",
									"The %lld exemplars of the last iteration label the rows; the clusters may be degenerate.",
									(unsigned long) res->n_clusters,
									(long long) res->n_clusters)
				 : errdetail("No row became an exemplar: every cluster_id is NULL and every is_exemplar false."),
				 errhint("Raise max_iter, or damping (up to 0.99) when the messages oscillate.")));
}

gc_device
gc_glue_run_ap(gc_device requested, const GcInput *in,
			   const gc_ap_params *params, MemoryContext cxt,
			   gc_ap_result *res)
{
	gc_device	chosen;
	gc_ctx		ctx;
	gc_status	st = {GC_OK, ""};

	Assert(in->n >= 1);
	chosen = ap_device(requested, in, params);
	memset(res, 0, sizeof(*res));
	res->labels = gc_glue_alloc_array(cxt, in->n, sizeof(int32));
	res->is_exemplar = gc_glue_alloc_array(cxt, in->n, sizeof(uint8));

	gc_glue_ctx(&ctx);
	gc_progress_compute(chosen, in->n);
	if (chosen == GC_DEVICE_GPU &&
		gc_gpu_run_ap(&ctx, in, params, res, &st) != GC_OK)
	{
		/* float4 never comes back: its request is the GPU */
		chosen = gc_glue_gpu_failed(requested, &st, gc_algorithm_name(GC_ALGO_AP),
							gc_glue_ap_gpu_hint(params->precision));
		check_ap_cpu_memory(in->n, NULL);
		gc_progress_compute(chosen, in->n);
	}
	if (chosen == GC_DEVICE_CPU &&
		gc_ap_cpu(&ctx, in->X, in->n, in->d, params, res, &st) != GC_OK)
		gc_glue_report(&st, gc_algorithm_name(GC_ALGO_AP));
	ap_notice(in->n, res);
	return chosen;
}
