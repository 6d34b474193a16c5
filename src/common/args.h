/*-------------------------------------------------------------------------
 *
 * args.h
 *	  The arguments of the clustering functions: one signature per
 *	  algorithm, shared by all its SQL forms, and one reader per algorithm
 *	  that checks the parameters and fills the core's parameter struct.
 *
 * Every SQL form of an algorithm takes the same arguments at the same
 * positions: 0 is the rows (the source query of a set-returning function
 * or a model fit, the features of a window function; each form reads them
 * its own way), then the parameters, device after the first ones and
 * those added later (metric, init_centroids, algorithm, precision) after
 * device, so that older calls keep their positions.  The values come from
 * the call itself (gc_glue_args_of_call) or, for a window function, from
 * its partition's first row (common/window_sql.c); the same reader checks them
 * either way, so every form raises the same errors in the same order.
 *
 * The defaults are not here: the install script declares them, and
 * PostgreSQL passes every argument (defaults inserted by the planner, for
 * window functions too).
 *
 *-------------------------------------------------------------------------
 */
#ifndef GPUCLUST_CLUSTER_ARGS_H
#define GPUCLUST_CLUSTER_ARGS_H

#include "fmgr.h"

#include "common/gpuclust.h"

/* position of the rows (source query or features) */
#define GC_ARG_ROWS		0

/*
 * A set-returning function's keyed form (the install script declares one
 * for each) takes one more argument, id_type anyelement, right after the
 * source: the results' id is then of the source's own id type (uuid, text
 * ...).  Its position in the call; the others follow it shifted by one.
 */
#define GC_ARG_ID_TYPE	1

/* the most arguments any clustering function takes */
#define GC_MAX_ARGS		10

/* One argument of an algorithm's SQL functions. */
typedef struct GcArgDef
{
	const char *name;
	bool		nullable;		/* NULL has a meaning (device, preference) */
} GcArgDef;

/* The arguments an algorithm's SQL functions share, by position. */
typedef struct GcSignature
{
	int			nargs;
	GcArgDef	arg[GC_MAX_ARGS];
} GcSignature;

extern const GcSignature gc_kmeans_signature;
extern const GcSignature gc_dbscan_signature;
extern const GcSignature gc_ap_signature;
extern const GcSignature gc_kdistance_signature;
extern const GcSignature gc_silhouette_signature;
extern const GcSignature gc_centers_signature;
extern const GcSignature gc_elbow_signature;

/* The values of one call's arguments. */
typedef struct GcArgs
{
	const GcSignature *sig;
	Oid			id_type;		/* a keyed call's id type, else InvalidOid */
	Datum		value[GC_MAX_ARGS];
	bool		isnull[GC_MAX_ARGS];
} GcArgs;

/*
 * ERROR unless fcinfo passes sig's arguments: a call with another number
 * of them (a declaration that is not the install script's).
 */
extern void gc_glue_check_nargs(FunctionCallInfo fcinfo,
								const GcSignature *sig);

/* ERROR when argument argno is NULL and sig does not allow it. */
extern void gc_glue_check_arg_null(const GcSignature *sig, int argno,
								   bool isnull);

/*
 * The arguments of a set-returning function or model fit: a's values are
 * fcinfo's, every NULL checked in order (the source query first).  A keyed
 * call (GC_ARG_ID_TYPE) sets a->id_type; its values are still by sig's
 * positions.
 */
extern void gc_glue_args_of_call(FunctionCallInfo fcinfo,
								 const GcSignature *sig, GcArgs *a);

/*
 * The readers: the parameters of a (NULLs already checked) into *p and the
 * device requested (NULL: gpuclust.device) into *device, each value
 * checked, with the same errors for every SQL form.
 *
 * k-means: init_centroids (a k x d real[]) are read and checked here
 * (gc_glue_parse_centroids; p->init GC_INIT_CENTROIDS, in the current
 * context); init given as a query sets p->init to GC_INIT_CENTROIDS with
 * no centroids yet and *init_query to the query (else NULL), which the
 * caller runs (gc_glue_kmeans_init_query) or refuses.
 *
 * DBSCAN: p->algorithm is 'union_find' or 'dclust' (another name is 22023),
 * and *device the device that algorithm asks for (gc_dbscan_device_request):
 * dclust asks for the GPU under 'auto' too, and dclust on the CPU ('cpu',
 * or gpuclust.device 'cpu' when device is NULL) is 0A000 here, before the
 * source runs.
 *
 * Affinity propagation: p->precision is 'float8' or 'float4' (another
 * name is 22023), and *device the device that precision asks for
 * (gc_ap_device_request), as DBSCAN's dclust: float4 asks for the GPU
 * under 'auto' too, and float4 on the CPU is 0A000 here, before the
 * source runs.
 */
/*
 * The metric of k-means (kmeans_assign's too): 'euclidean' or 'cosine';
 * 'inner_product' is refused (0A000), any other name is 22023.
 */
extern gc_metric gc_glue_kmeans_metric(Datum value);
extern void gc_glue_kmeans_params(const GcArgs *a, gc_kmeans_params *p,
								  gc_device *device, char **init_query);
extern void gc_glue_dbscan_params(const GcArgs *a, gc_dbscan_params *p,
								  gc_device *device);
/* A device argument ('auto', 'cpu', 'gpu'; NULL: gpuclust.device), or 22023. */
extern gc_device gc_glue_device(Datum value, bool isnull);
/*
 * DBSCAN's eps, min_pts and device (NULL when device_null: gpuclust.device)
 * given as values, checked as gpu_dbscan checks them, with the Euclidean
 * metric and union-find (the distributed forms: gpu_dbscan_distributed and
 * its partition aggregate).
 */
extern void gc_glue_dbscan_values(Datum eps, Datum min_pts, Datum device,
								  bool device_null, gc_dbscan_params *p,
								  gc_device *requested);
extern void gc_glue_ap_params(const GcArgs *a, gc_ap_params *p,
							  gc_device *device);

/*
 * The tools for choosing parameters (tools/kdistance_sql.c, tools/labelled_rows_sql.c,
 * kmeans/kmeans_elbow_sql.c).  gpu_kdistance: k >= 1, quantiles NULL (every row: 0) or
 * >= 1.  gpu_silhouette: sample_size NULL (0: the default rule) or >= 2,
 * and the seed; *device as the argument asks (NULL: gpuclust.device), the
 * GPU's own checks left to dispatch.  gpu_kmeans_elbow: 1 <= k_min <= k_max, and the k-means
 * parameters after k, checked by gc_glue_kmeans_params as for gpu_kmeans
 * (p->k is k_max), metric included, less initial centroids (the elbow
 * has no init_centroids, and an init query is 22023: centroids fix k).
 */
extern void gc_glue_kdistance_params(const GcArgs *a, int64 *k,
									 int32 *quantiles, gc_device *device);
extern void gc_glue_silhouette_params(const GcArgs *a, int64 *sample_size,
									  uint64 *seed, gc_device *device);
extern void gc_glue_elbow_params(const GcArgs *a, int *k_min, int *k_max,
								 gc_kmeans_params *p, gc_device *device);

/* Where the rows of a call came from, for messages. */
typedef enum GcRowsOrigin
{
	GC_ROWS_QUERY,				/* the source query */
	GC_ROWS_PARTITION			/* a window function's partition */
} GcRowsOrigin;

/* ERROR unless k <= n, the rows with features; hint may be NULL */
extern void gc_glue_check_k_rows(int k, int64 n, GcRowsOrigin origin,
								 const char *hint);

#endif							/* GPUCLUST_CLUSTER_ARGS_H */
