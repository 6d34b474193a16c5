/*-------------------------------------------------------------------------
 *
 * window.h
 *	  The frame of the window forms (window.c): one driver, to which each
 *	  algorithm gives its signature, reader, run and timing line (WinAlgo).
 *
 *-------------------------------------------------------------------------
 */
#ifndef GPUCLUST_WINDOW_H
#define GPUCLUST_WINDOW_H

#include "lib/stringinfo.h"

#include "common/args.h"
#include "common/ingest.h"

/*
 * The parameters of a window function call (every argument but the
 * features), read from the partition's first row.
 */
typedef struct WinArgs
{
	GcArgs		args;			/* row 1's values, as the readers take them */
	bool		varies[GC_MAX_ARGS];	/* not a constant: checked on every row */
	Oid			type[GC_MAX_ARGS];
	bool		byval[GC_MAX_ARGS];
} WinArgs;

/*
 * The computation of one partition's labels, in its own memory: the
 * parameters (read from row 1), the features, and the run's results.
 */
typedef struct WinCall
{
	MemoryContext workcxt;
	WinArgs		params;
	gc_device	requested;
	void	   *p;				/* the algorithm's parameters (its reader's) */
	GcInput		in;
	/* what ran, for gpuclust.log_timing */
	gc_device	ran;
	int			iterations;		/* k-means': 0 when nothing ran */
} WinCall;

/* What a window function clusters with. */
typedef struct WinAlgo
{
	const GcSignature *sig;
	/* call->p and call->requested from call->params (the reader) */
	void		(*read_params) (WinCall *call);
	/*
	 * the labels of call->in's rows with features (call->in.n >= 1); sets
	 * call->ran (and what timing reads)
	 */
	const int32 *(*run) (WinCall *call);
	/*
	 * appends the call's parameters to gpuclust.log_timing's line, ", k 3,
	 * iterations 7" (called only when the line is logged)
	 */
	void		(*timing) (const WinCall *call, StringInfo line);
	gc_algorithm algo;
} WinAlgo;

/*
 * The NOTICE of a partition with fewer rows with features (call->in.n)
 * than the parameter name asks for (value): the partition is not an
 * error, outcome says what it gets instead ("each distinct row is its own
 * cluster"); hint may be NULL.
 */
extern void gc_glue_window_small_partition(const WinCall *call,
										   const char *name, int64 value,
										   const char *outcome,
										   const char *hint);

/*
 * Labels for call->in's rows with features, every one noise (GC_NOISE),
 * in call->workcxt.
 */
extern int32 *gc_glue_window_all_noise(const WinCall *call);

/*
 * The label of the current row: the first call in a partition clusters
 * the partition with algo and keeps its labels.
 */
extern Datum gc_glue_window_label(FunctionCallInfo fcinfo, const WinAlgo *algo);

#endif							/* GPUCLUST_WINDOW_H */
