/*-------------------------------------------------------------------------
 *
 * dbscan_glue.h
 *	  DBSCAN in the glue: its arguments (dbscan_args.c), its device and run
 *	  (dbscan_run.c), shared by its SQL forms (dbscan_sql.c, the window
 *	  form) and DBSCAN over partitions (src/distributed).
 *
 *-------------------------------------------------------------------------
 */
#ifndef GPUCLUST_DBSCAN_GLUE_H
#define GPUCLUST_DBSCAN_GLUE_H

#include "common/algorithm.h"
#include "common/args.h"
#include "common/ingest.h"
#include "common/run.h"
#include "core/common/gpu.h"

extern const GcSignature gc_dbscan_signature;

/*
 * The reader: the parameters of a (NULLs already checked) into *p and the
 * device requested (NULL: gpuclust.device) into *device, each value
 * checked, with the same errors for every SQL form.
 *
 * DBSCAN: p->algorithm is 'union_find' or 'dclust' (another name is 22023),
 * and *device the device that algorithm asks for (gc_dbscan_device_request):
 * dclust asks for the GPU under 'auto' too, and dclust on the CPU ('cpu',
 * or gpuclust.device 'cpu' when device is NULL) is 0A000 here, before the
 * source runs.
 */
extern void gc_glue_dbscan_params(const GcArgs *a, gc_dbscan_params *p,
								  gc_device *device);

/*
 * DBSCAN's eps, min_pts and device (NULL when device_null: gpuclust.device)
 * given as values, checked as gpu_dbscan checks them, with the Euclidean
 * metric and union-find (the distributed forms: gpu_dbscan_distributed and
 * its partition aggregate).
 */
extern void gc_glue_dbscan_values(Datum eps, Datum min_pts, Datum device,
								  bool device_null, gc_dbscan_params *p,
								  gc_device *requested);

/* The hint of a call the GPU cannot run: dclust's way to the CPU, or NULL. */
extern const char *gc_glue_dbscan_gpu_hint(gc_dbscan_algorithm algorithm);

/*
 * The device of a DBSCAN call of algorithm (gc_choose_device_dbscan), or
 * an ERROR with the reason.
 */
extern gc_device gc_glue_choose_dbscan_device(gc_device requested,
											  gc_dbscan_algorithm algorithm,
											  int64 n, int d);

/* The run (see common/run.h for what every run function does). */
extern gc_device gc_glue_run_dbscan(gc_device requested, const GcInput *in,
									const gc_dbscan_params *params,
									MemoryContext cxt, int32 **labels,
									uint8 **is_core);

/*
 * The GPU run of DBSCAN (dbscan_job.c), the contract of gc_dbscan_on_gpu:
 * through the GPU worker when the server has one (worker/job.h), else in
 * this backend.
 */
extern gc_code gc_gpu_run_dbscan(const gc_ctx *ctx, const GcInput *in,
								 const gc_dbscan_params *p, int32 *labels,
								 uint8 *is_core, gc_status *st);

/* The phases of this backend's last GPU run of DBSCAN. */
extern void gc_gpu_last_dbscan_phases(gc_dbscan_gpu_phases *out);

/* Its GPU job in the GPU process, for its record (dbscan_algorithm.c). */
extern const GcProcSteps gc_dbscan_proc;

#endif							/* GPUCLUST_DBSCAN_GLUE_H */
