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
 * its partition's first row (common/window.c); the same reader checks them
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
	int			ingest_flags;	/* how its source is read (GC_INGEST_*) */
	GcArgDef	arg[GC_MAX_ARGS];
} GcSignature;


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

/* A device argument ('auto', 'cpu', 'gpu'; NULL: gpuclust.device), or 22023. */
extern gc_device gc_glue_device(Datum value, bool isnull);

/* The device argument at argno of a. */
extern gc_device gc_glue_arg_device(const GcArgs *a, int argno);

/* A metric, by pgvector's names ('euclidean', 'cosine', 'inner_product'), or 22023. */
extern gc_metric gc_glue_parse_metric(Datum value);

/* ERROR (22023): s is not a valid what; hint lists the valid ones. */
pg_noreturn extern void gc_glue_invalid_name(const char *what, const char *s,
											 const char *hint);

/*
 * A call whose parameters the CPU cannot run (st's message: DBSCAN's
 * dclust, affinity propagation in float4) asked for the CPU, by the
 * device argument at argno or, when that is NULL, by gpuclust.device
 * (requested): 0A000, before the source runs.  other is the parameter's
 * value that runs everywhere, for the hint.
 */
pg_noreturn extern void gc_glue_refuse_on_cpu(const GcArgs *a, int argno,
											  gc_device requested,
											  const gc_status *st,
											  const char *other);

/* ERROR unless argument argno of a, whose value is value, is at least 1. */
extern void gc_glue_check_at_least_1(const GcArgs *a, int argno, int64 value);

/*
 * ERROR unless k <= n, the rows with features the source query returned;
 * hint may be NULL.  (A window partition of fewer rows is no error: its
 * form says what it gets, gc_glue_window_small_partition.)
 */
extern void gc_glue_check_k_rows(int k, int64 n, const char *hint);

/* The same for the argument name, whose value is value (HDBSCAN's min_samples). */
extern void gc_glue_check_rows_for(const char *name, int64 value, int64 n,
								   const char *hint);

#endif							/* GPUCLUST_CLUSTER_ARGS_H */
