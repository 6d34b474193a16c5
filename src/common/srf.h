/*-------------------------------------------------------------------------
 *
 * srf.h
 *	  The frame of the set-returning clustering functions (kmeans/kmeans_sql.c,
 *	  dbscan/dbscan_sql.c, affinity/affinity_sql.c, hdbscan/hdbscan_sql.c): their
 *	  arguments, the source query's rows, the one emitter of their result
 *	  rows, and their timings.
 *
 * A set-returning function reads its arguments (gc_glue_srf_args, then
 * its algorithm's reader), ingests the source query (gc_glue_srf_ingest),
 * runs its algorithm (common/run.h) and emits the labels
 * (gc_glue_srf_emit), then reports its timings when gpuclust.log_timing is
 * on (gc_glue_srf_log_timing) and ends (gc_glue_srf_end).
 *
 *-------------------------------------------------------------------------
 */
#ifndef GPUCLUST_CLUSTER_SRF_H
#define GPUCLUST_CLUSTER_SRF_H

#include "fmgr.h"

#include "common/args.h"
#include "common/ingest.h"

/* One call of a set-returning clustering function. */
typedef struct GcSrfCall
{
	FunctionCallInfo fcinfo;
	GcArgs		args;
	gc_device	requested;		/* the device argument, or the setting */
	gc_device	ran;			/* the device that ran (or would have) */
	MemoryContext cxt;			/* the call's working memory */
	GcInput		in;				/* the source query's rows, in cxt */
	/* milliseconds, for gpuclust.log_timing */
	double		ms_ingest;
	double		ms_compute;
	double		ms_emit;
	double		t_mark;			/* gc_now_ms() at the start of the phase */
} GcSrfCall;

/* fcinfo's arguments by sig, every NULL checked (gc_glue_args_of_call) */
extern void gc_glue_srf_args(FunctionCallInfo fcinfo, const GcSignature *sig,
							 GcSrfCall *call);

/*
 * Sets up the materialised result, creates the working memory and reads
 * the source query (argument 0) into call->in; the compute phase starts.
 */
extern void gc_glue_srf_ingest(GcSrfCall *call);

/*
 * The emitter: ends the compute phase, then returns the rows (id,
 * cluster_id, third) of a labelling in input order.  third is flags[j] as
 * a boolean (is_core, is_exemplar) or distance[j] as a float8 (k-means),
 * whichever is given.  GC_NOISE and rows without features get a NULL
 * cluster_id; rows without features a NULL third column too.
 */
extern void gc_glue_srf_emit(GcSrfCall *call, const int32 *labels,
							 const uint8 *flags, const double *distance);

/*
 * The same for rows (id, cluster_id, first[j], second[j]) with two
 * float8 columns (HDBSCAN's probability and outlier score): rows without
 * features get NULL in both.
 */
extern void gc_glue_srf_emit_scores(GcSrfCall *call, const int32 *labels,
									const double *first, const double *second);

/*
 * Around a function's own emitter of rows of another shape (a tree, the
 * edges of a graph): begin ends the compute phase and shows the emit
 * phase, end ends the emit phase (gc_glue_srf_emit calls both).
 */
extern void gc_glue_srf_emit_begin(GcSrfCall *call);
extern void gc_glue_srf_emit_end(GcSrfCall *call);

/* The id of source row i as a result's id column has it (keys or ids). */
extern Datum gc_glue_srf_id(const GcInput *in, int64 i);

/* Result row r of the call (interrupts checked every 64k rows). */
extern void gc_glue_srf_put(GcSrfCall *call, Datum *values, bool *nulls,
							int64 r);

/*
 * gpuclust.log_timing's INFO: "<head>; ingest .. ms, compute .. ms<detail>,
 * emit .. ms", where detail itemises the compute phase (or is empty: the
 * GPU's phases, gc_algorithm_gpu_phases).
 */
extern void gc_glue_srf_log_timing(const GcSrfCall *call, const char *head,
								   const char *compute_detail);

/* Frees the working memory. */
extern void gc_glue_srf_end(GcSrfCall *call);

#endif							/* GPUCLUST_CLUSTER_SRF_H */
