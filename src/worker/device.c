/*-------------------------------------------------------------------------
 *
 * device.c
 *	  The device of a call: the requested device resolved to the CPU or
 *	  the GPU as dispatch sees it (gc_glue_gpu: the worker's, or this
 *	  backend's own CUDA), with the reason when the GPU cannot take it.
 *	  Each algorithm's chooser (kmeans/kmeans_run.c ...) builds on these.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "worker/device.h"
#include "worker/job.h"

/*
 * Resolve the requested device to CPU or GPU (gc_choose_device) into
 * *chosen, or return the failure in *st.  The GPU is gc_glue_gpu's: a
 * probe of this backend's own CUDA blocks signals while CUDA starts; the
 * worker's may wait, interruptibly, for the worker to start.
 */
static gc_code
try_choose_device(gc_device requested, gc_algorithm algo, int64 n, int d,
				  gc_device *chosen, gc_status *st)
{
	gc_gpu		gpu;

	*chosen = GC_DEVICE_CPU;
	gc_glue_gpu(&gpu);
	return gc_choose_device(requested, algo, n, d, &gpu, chosen, st);
}

const char *
gc_glue_device_or_none(gc_code rc, gc_device chosen, const gc_status *st)
{
	if (rc != GC_OK)
		return psprintf("none (%s)", st->message);
	return gc_device_name(chosen);
}

const char *
gc_glue_auto_device_name(gc_algorithm algo, int64 n)
{
	gc_status	st = {GC_OK, ""};
	gc_device	chosen;
	gc_code		rc;

	rc = try_choose_device(GC_DEVICE_AUTO, algo, n, n > 0 ? 2 : 0, &chosen,
						   &st);
	return gc_glue_device_or_none(rc, chosen, &st);
}

/*
 * The hint of a call the GPU cannot run that uses what runs only on the
 * GPU (what names it; gpu_only false: NULL, gc_glue_report's "use the
 * CPU"), and the way to the CPU (cpu_way).
 */
const char *
gc_glue_gpu_only_hint(bool gpu_only, const char *what, const char *cpu_way)
{
	return gpu_only ? psprintf("%s runs only on the GPU; %s.", what, cpu_way) : NULL;
}

/*
 * After a choice that may pass a usable GPU over for lack of memory (rc,
 * st; note empty or why): the failure raised, or the note as a NOTICE
 * that what runs on the CPU.
 */
void
gc_glue_chosen_or_report(gc_code rc, const gc_status *st, const char *note,
				 gc_algorithm algo)
{
	if (rc != GC_OK)
		gc_glue_report(st, gc_algorithm_name(algo));
	if (note[0] != '\0')
		ereport(NOTICE,
				(errmsg("%s runs on the CPU", gc_algorithm_name(algo)),
				 errdetail("%s.", note)));
}
