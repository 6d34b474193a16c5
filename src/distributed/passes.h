/*-------------------------------------------------------------------------
 *
 * passes.h
 *	  What the distributed drivers (gpu_kmeans_distributed,
 *	  gpu_dbscan_distributed) share: their passes over the source, each
 *	  named in the context of an error raised in it (a Citus worker lost
 *	  mid-run, a cancel): "gpu_kmeans_distributed: Lloyd iteration 7";
 *	  their NULL checks; and the flat array states of the aggregates they
 *	  run (a real type, so that Citus runs them on the shards).
 *
 *-------------------------------------------------------------------------
 */
#ifndef GPUCLUST_DRIVER_H
#define GPUCLUST_DRIVER_H

#include "fmgr.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "tcop/dest.h"

typedef struct GcPass
{
	const char *func;			/* the driver: "gpu_dbscan_distributed" */
	const char *what;			/* the pass: "Lloyd iteration" */
	int			round;			/* 1-based, or 0 */
} GcPass;

/*
 * Runs plan (over a source checked by gc_check_source_query) read-only,
 * as sources run (gc_run_readonly), its rows into dest (NULL: into
 * SPI_tuptable), with pass as the error context.
 */
extern void gc_run_pass(const GcPass *pass, SPIPlanPtr plan,
						ParamListInfo params, DestReceiver *dest);

/*
 * Runs one statement that writes (a work table's DDL, its INSERT), with
 * pass as the error context: ERROR unless sql is a single statement
 * whose result is expected (an SPI_OK_* code).
 */
extern void gc_exec_pass(const GcPass *pass, const char *sql, int expected);

/*
 * An array state of an aggregate (dbscan_bounds, kmeans_rank_counts), to
 * be changed: a itself when called as a transition or combine function (a
 * is the aggregate's own, in its context, changed in place as float8_accum
 * changes its), else a copy (a direct call must not change its argument).
 */
extern ArrayType *gc_agg_writable_array(FunctionCallInfo fcinfo, ArrayType *a);

/*
 * A one-dimensional array of len values of a fixed-width, pass-by-value
 * type (real, float8, bigint: elemsize bytes each, copied from values, or
 * zeros when values is NULL), in the current context: the aggregates' flat
 * states, their results, the drivers' parameters.
 */
extern ArrayType *gc_flat_array(Oid elemtype, Size elemsize, const void *values,
								int len);

/*
 * The schema of the driver's own function (the extension's), quoted, with
 * which the SQL a driver builds qualifies the extension's objects, as it
 * qualifies built-ins with pg_catalog: no function, aggregate, operator
 * or type of another schema on the caller's search_path is run instead.
 * Takes a share lock on the extension first, held to the end of the
 * transaction, so that DROP EXTENSION waits for the call instead of
 * removing the aggregates and types its passes use.
 */
extern const char *gc_driver_schema(FunctionCallInfo fcinfo);

/* ERROR (22004) when argument i, called name, is NULL. */
extern void gc_driver_not_null(FunctionCallInfo fcinfo, int i, const char *name);

#endif							/* GPUCLUST_DRIVER_H */
