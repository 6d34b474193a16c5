/*-------------------------------------------------------------------------
 *
 * algorithm.h
 *	  The registry of algorithms: what the shared mechanism needs to know of
 *	  each, one record per algorithm (GcAlgorithm), defined once in the
 *	  algorithm's folder (kmeans/kmeans_algorithm.c ...) and found by its
 *	  gc_algorithm (registry.c).  The shared mechanism (src/common) names
 *	  no algorithm: it asks the record.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GPUCLUST_ALGORITHM_H
#define GPUCLUST_ALGORITHM_H

#include "common/gpuclust.h"

struct GcJob;					/* worker/queue.h */
struct GcProcJob;				/* worker/gpu_process.h */

/* A GPU job's step in the GPU process (worker/gpu_process.h). */
typedef void (*GcProcStep) (struct GcProcJob *r, struct GcJob *j);

/*
 * What the GPU process does for an algorithm's job, defined in its job
 * file (src/<algorithm>/<algorithm>_job.c) with GC_PROC_STEPS: the run (the
 * core's GPU entry point on the job's inputs, its arrays written into the
 * segment, its scalars into the GcProcJob's results, which the GPU process
 * then copies whole into the job's slot); in test builds also its
 * stand-in, the run with the CPU's entry point, under
 * gpuclust.gpu_worker_emulate (every algorithm has one).  A product build
 * names no stand-in.
 */
typedef struct GcProcSteps
{
	GcProcStep	run;
#ifdef GC_TESTING
	GcProcStep	stand_in;
#endif
} GcProcSteps;

#ifdef GC_TESTING
#define GC_PROC_STEPS(run, stand_in) {run, stand_in}
#else
#define GC_PROC_STEPS(run, stand_in) {run}
#endif

/*
 * The run and the stand-in of a job whose step is call(r, j, entry), with
 * the core's GPU entry point (gpu) or, in test builds, the CPU's (cpu),
 * which take the same arguments: static name##_run and name##_stand_in.
 */
#ifdef GC_TESTING
#define GC_PROC_RUN_AND_STAND_IN(name, call, gpu, cpu) \
	static void name##_run(struct GcProcJob *r, struct GcJob *j) \
	{ call(r, j, gpu); } \
	static void name##_stand_in(struct GcProcJob *r, struct GcJob *j) \
	{ call(r, j, cpu); }
#else
#define GC_PROC_RUN_AND_STAND_IN(name, call, gpu, cpu) \
	static void name##_run(struct GcProcJob *r, struct GcJob *j) \
	{ call(r, j, gpu); }
#endif

/*
 * The parts of gpuclust_info()'s lines about algorithms, in this order,
 * each part's lines in the order of the registry: where each runs, its
 * crossovers (between them the lines of no algorithm), what fits.  One
 * exception: the tools (tools/tools_algorithm.c) put where they run
 * (auto_device_kdistance, auto_device_silhouette) in CROSSOVERS, each just
 * before its crossover: gpuclust_info()'s order of lines is part of its
 * output, and this keeps it.
 */
typedef enum GcInfoPart
{
	GC_INFO_DEVICES,
	GC_INFO_CROSSOVERS,
	GC_INFO_CAPACITY
} GcInfoPart;

/* Where an algorithm's gpuclust_info() lines go. */
typedef struct GcInfoSink
{
	void		(*put) (struct GcInfoSink *sink, const char *key,
						const char *value);
	bool		all;			/* the caller sees the server's memory */
} GcInfoSink;

typedef struct GcAlgorithm
{
	gc_algorithm algo;
	const char *name;			/* in messages: "k-means" */
	const char *function;		/* its SQL function (jobs, timings): "gpu_kmeans" */

	/*
	 * gpuclust.log_timing's itemisation of this backend's last GPU run of
	 * n rows: where it spent its time, " (upload ..., ...)"; NULL when the
	 * algorithm has none (affinity propagation's result carries its own).
	 */
	const char *(*gpu_phases) (int64 n);

	/* its GPU job in the GPU process (NULL: it has none) */
	const GcProcSteps *proc;

	/* its lines of gpuclust_info() in part (NULL: none) */
	void		(*info) (GcInfoPart part, GcInfoSink *sink);
} GcAlgorithm;

/* The records, one per algorithm (each in its folder). */
extern const GcAlgorithm gc_kmeans_record;
extern const GcAlgorithm gc_kmeans_labels_record;
extern const GcAlgorithm gc_dbscan_record;
extern const GcAlgorithm gc_ap_record;
extern const GcAlgorithm gc_kdistance_record;
extern const GcAlgorithm gc_silhouette_record;
extern const GcAlgorithm gc_hdbscan_record;

/* The record of algo. */
extern const GcAlgorithm *gc_algorithm_of(gc_algorithm algo);

/*
 * The record of algo, NULL when there is none: callable where PostgreSQL
 * is not (the GPU process), and to go through the records in order.
 */
extern const GcAlgorithm *gc_algorithm_find(int algo);

#endif							/* GPUCLUST_ALGORITHM_H */
