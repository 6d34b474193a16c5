/*-------------------------------------------------------------------------
 *
 * affinity_glue.h
 *	  Affinity propagation in the glue: its arguments (affinity_args.c),
 *	  its device and run (affinity_run.c), for gpu_affinity_propagation
 *	  (affinity_sql.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef GPUCLUST_AFFINITY_GLUE_H
#define GPUCLUST_AFFINITY_GLUE_H

#include "common/algorithm.h"
#include "common/args.h"
#include "common/ingest.h"
#include "common/run.h"

extern const GcSignature gc_ap_signature;

/*
 * The reader: the parameters of a (NULLs already checked) into *p and the
 * device requested (NULL: gpuclust.device) into *device, each value
 * checked, with the same errors for every SQL form.
 *
 * Affinity propagation: p->precision is 'float8' or 'float4' (another
 * name is 22023), and *device the device that precision asks for
 * (gc_ap_device_request), as DBSCAN's dclust: float4 asks for the GPU
 * under 'auto' too, and float4 on the CPU is 0A000 here, before the
 * source runs.
 */
extern void gc_glue_ap_params(const GcArgs *a, gc_ap_params *p,
							  gc_device *device);

/* The hint of a call the GPU cannot run: float4's way to the CPU, or NULL. */
extern const char *gc_glue_ap_gpu_hint(gc_ap_precision precision);

/*
 * The device of an affinity propagation call in precision on n rows of d
 * features (gc_choose_device_ap), or an ERROR; *note (NULL when none)
 * says why 'auto' passed a usable GPU over for lack of memory.
 */
extern gc_device gc_glue_choose_ap_device(gc_device requested,
										  gc_ap_precision precision,
										  int64 n, int d, char **note);

/* The run (see common/run.h for what every run function does). */
/*
 * Affinity propagation runs where dispatch says (gc_choose_device_ap; the
 * argument reader has turned a float4 call's 'auto' into the GPU), with
 * the same fallback, after checking, before anything is allocated, that
 * its n x n matrices fit gpuclust.matrix_memory (at most
 * gpuclust.max_matrix_memory) on either device, the GPU's memory on the
 * GPU and the server's memory on the CPU: too large is an error naming
 * the largest n that fits, but under 'auto' too large for the GPU runs on
 * the CPU when it fits there (a NOTICE says so when the GPU's memory was
 * the reason).  A NOTICE says when it did not iterate or did not converge.
 */
extern gc_device gc_glue_run_ap(gc_device requested, const GcInput *in,
								const gc_ap_params *params,
								MemoryContext cxt, gc_ap_result *res);

/*
 * The GPU run of affinity propagation (affinity_job.c), the contract of
 * gc_ap_on_gpu: through the GPU worker when the server has one
 * (worker/job.h), else in this backend; its phase times come back in res
 * either way.
 */
extern gc_code gc_gpu_run_ap(const gc_ctx *ctx, const GcInput *in,
							 const gc_ap_params *p, gc_ap_result *res,
							 gc_status *st);

/* Its GPU job in the GPU process, for its record (affinity_algorithm.c). */
extern const GcProcSteps gc_ap_proc;

#endif							/* GPUCLUST_AFFINITY_GLUE_H */
