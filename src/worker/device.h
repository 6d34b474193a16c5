/*-------------------------------------------------------------------------
 *
 * device.h
 *	  The device of a call (device.c): the requested device resolved with
 *	  the GPU as dispatch sees it (gc_glue_gpu, worker/job.h).
 *
 *-------------------------------------------------------------------------
 */
#ifndef GPUCLUST_WORKER_DEVICE_H
#define GPUCLUST_WORKER_DEVICE_H

#include "common/gpuclust.h"

/*
 * A device choice for gpuclust_info(): the name of the device chosen, or
 * "none (why)" when the choice failed (rc, st).
 */
extern const char *gc_glue_device_or_none(gc_code rc, gc_device chosen,
										  const gc_status *st);

/*
 * Where algo runs under 'auto' for n rows of 2 features (n = 0: a problem
 * big enough, for the algorithms whose crossover is not a number of rows):
 * "gpu", "cpu", or "none (why)"; gpuclust_info()'s auto_device_* lines.
 */
extern const char *gc_glue_auto_device_name(gc_algorithm algo, int64 n);

/*
 * The hint of a call the GPU cannot run that uses what runs only on the
 * GPU (what names it; gpu_only false: NULL, gc_glue_report's "use the
 * CPU"), and the way to the CPU (cpu_way).
 */
extern const char *gc_glue_gpu_only_hint(bool gpu_only, const char *what,
										 const char *cpu_way);

/*
 * After a choice that may pass a usable GPU over for lack of memory (rc,
 * st; note empty or why): the failure raised, or the note as a NOTICE
 * that what runs on the CPU.
 */
extern void gc_glue_chosen_or_report(gc_code rc, const gc_status *st,
									 const char *note, gc_algorithm algo);

#endif							/* GPUCLUST_WORKER_DEVICE_H */
