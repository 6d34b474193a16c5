/*-------------------------------------------------------------------------
 *
 * kmeans_glue.h
 *	  k-means in the glue: its arguments (kmeans_args.c), its device and
 *	  run (kmeans_run.c), shared by its SQL forms (kmeans_sql.c, the window
 *	  form, kmeans_model_sql.c, kmeans_elbow_sql.c) and the kmeans_step
 *	  aggregate.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GPUCLUST_KMEANS_GLUE_H
#define GPUCLUST_KMEANS_GLUE_H

#include "common/algorithm.h"
#include "common/args.h"
#include "common/ingest.h"
#include "common/run.h"
#include "core/common/gpu.h"

extern const GcSignature gc_kmeans_signature;
extern const GcSignature gc_elbow_signature;

/*
 * The reader: the parameters of a (NULLs already checked) into *p and the
 * device requested (NULL: gpuclust.device) into *device, each value
 * checked, with the same errors for every SQL form.
 *
 * k-means: init_centroids (a k x d real[]) are read and checked here
 * (gc_glue_parse_centroids; p->init GC_INIT_CENTROIDS, in the current
 * context); init given as a query sets p->init to GC_INIT_CENTROIDS with
 * no centroids yet and *init_query to the query (else NULL), which the
 * caller runs (gc_glue_kmeans_init_query) or refuses.
 */
extern void gc_glue_kmeans_params(const GcArgs *a, gc_kmeans_params *p,
								  gc_device *device, char **init_query);

/*
 * The metric of k-means (kmeans_assign's too): 'euclidean' or 'cosine';
 * 'inner_product' is refused (0A000), any other name is 22023.
 */
extern gc_metric gc_glue_kmeans_metric(Datum value);

/*
 * gpu_kmeans_elbow: 1 <= k_min <= k_max, and the k-means parameters after
 * k, checked by gc_glue_kmeans_params as for gpu_kmeans (p->k is k_max),
 * metric included, less initial centroids (the elbow has no
 * init_centroids, and an init query is 22023: centroids fix k).
 */
extern void gc_glue_elbow_params(const GcArgs *a, int *k_min, int *k_max,
								 gc_kmeans_params *p, gc_device *device);

/*
 * The k x d centroids of arr (a two-dimensional real[]) into *C_out
 * (allocated in cxt), d into *d_out; returns k.  what names them in the
 * errors ("centroids", "init_centroids"); expect_k > 0 requires k rows.
 */
extern int	gc_glue_parse_centroids(ArrayType *arr, const char *what,
									int expect_k, int *d_out, float **C_out,
									MemoryContext cxt);

/*
 * The device of a k-means call of runs fits (gc_choose_device_kmeans):
 * 'auto' weighs the problem's size and the GPU's free memory, and says in
 * a NOTICE when a usable GPU was passed over for lack of memory (weighted:
 * the call has sample weights, whose GPU run keeps its rows resident).
 * plan (may be NULL): the GPU's plan when the GPU is chosen, for the run.
 */
extern gc_device gc_glue_choose_kmeans_device(gc_device requested, int64 n,
											  int d, int k, int runs,
											  bool weighted,
											  gc_kmeans_gpu_plan *plan);

/* The run (see common/run.h for what every run function does). */
/*
 * k-means also checks the initial centroids' d against the rows' (22023)
 * and, with sample weights (in->weights, passed to the core), that k rows
 * have a positive weight (22023); under the cosine metric no row and no
 * initial centroid may be all 0 (22000, naming it; DBSCAN's rows too).
 */
extern gc_device gc_glue_run_kmeans(gc_device requested, const GcInput *in,
									const gc_kmeans_params *params,
									MemoryContext cxt, gc_kmeans_result *res);
/*
 * k-means's init given as a query (gc_glue_kmeans_params's init_query):
 * runs it (gc_ingest_centroids) and sets p's initial centroids, in cxt;
 * an ERROR unless it returns k rows.  The set-returning form and the model
 * fit call it after reading the source; the window form refuses an init
 * query.
 */
extern void gc_glue_kmeans_init_query(const char *init_query,
									  gc_kmeans_params *p, MemoryContext cxt);

/*
 * The labels of in's rows (in->n >= 1) for the k given centres C (k x d),
 * into labels (in->n): gc_kmeans_labels_cpu's, on the device gpu_kmeans
 * would take for these rows with n_init 1 (fewer rows than centres: the
 * CPU), with the same fallback.  The kmeans_step aggregate labels each
 * block of its rows so.  Returns the device that ran.
 */
extern gc_device gc_glue_kmeans_labels(gc_device requested, const GcInput *in,
									   const float *C, int k, int32 *labels);

/*
 * The GPU runs of k-means and of the labels of in's rows for the k given
 * centres C (kmeans_job.c), the contracts of gc_kmeans_on_gpu and
 * gc_kmeans_labels_on_gpu: through the GPU worker when the server has one
 * (worker/job.h), else in this backend.  The k-means run's p->gpu_plan
 * is its device choice's (gc_glue_choose_kmeans_device), which the
 * worker's admission counts.
 */
extern gc_code gc_gpu_run_kmeans(const gc_ctx *ctx, const GcInput *in,
								 const gc_kmeans_params *p,
								 gc_kmeans_result *res, gc_status *st);
extern gc_code gc_gpu_run_kmeans_labels(const gc_ctx *ctx, const GcInput *in,
										const float *C, int k, int32 *labels,
										gc_status *st);

/* The phases of this backend's last GPU run of k-means. */
extern void gc_gpu_last_kmeans_phases(gc_kmeans_gpu_phases *out);

/* Their GPU jobs in the GPU process, for their records (kmeans_algorithm.c). */
extern const GcProcSteps gc_kmeans_proc;
extern const GcProcSteps gc_kmeans_labels_proc;

#endif							/* GPUCLUST_KMEANS_GLUE_H */
