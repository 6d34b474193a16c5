/*-------------------------------------------------------------------------
 *
 * ingest.h
 *	  Read a source query of (id, features) rows into the core's input.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GPUCLUST_INGEST_H
#define GPUCLUST_INGEST_H

#include <math.h>

#include "tcop/dest.h"
#include "utils/array.h"
#include "common/gpuclust.h"
#include "common/pg_compat.h"

/*
 * The rows of a source query.  Row i of the query (0-based, input order)
 * has id ids[i]; when has_features[i] it is row j of X, where j counts the
 * earlier rows with features.  Rows with NULL features are kept (they come
 * back with a NULL cluster) but are not rows of X.
 *
 * Ids of another type than an integer (see gc_ingest's id_type) are kept
 * as they are in keys[i], and ids[i] is then the row's ordinal (i + 1).
 */
typedef struct GcInput
{
	int64		n_rows;			/* rows the source returned */
	int64		n;				/* rows with features = rows of X */
	int			d;				/* dimension; 0 when n == 0 */
	float	   *X;				/* n x d float32, row-major; NULL if n == 0 */
	int64	   *ids;			/* n_rows ids (or ordinals) */
	Datum	   *keys;			/* n_rows ids of type id_type, or NULL */
	bool	   *has_features;	/* n_rows flags */
	struct GcShared *x_shared;	/* X's shared memory for the GPU worker
								 * (worker/job.h), or NULL: X is private */
	double	   *weights;		/* n sample weights (rows of X), or NULL */
} GcInput;

/* gc_ingest's flags */
#define GC_INGEST_WEIGHTS	0x01	/* (id, features, weight) allowed */
#define GC_INGEST_PRIVATE	0x02	/* X in private memory, never shared */

/*
 * flags for a call that asked for the device requested (its device
 * argument, or gpuclust.device): with GC_INGEST_PRIVATE when that is the
 * CPU.  Otherwise X goes into shared memory while the GPU worker takes
 * jobs, where the worker reads it in place; a call for the CPU would only
 * pay for that: a fresh shared segment's pages cost several times the
 * private huge pages that hold X otherwise.
 */
extern int	gc_ingest_flags_for(int flags, gc_device requested);

/*
 * Run source (one statement returning (id, features)) and fill *in, with
 * every array allocated in outcxt (huge allocations, so more than 1 GB
 * works).  Every row is validated; bad input raises an ERROR naming the
 * row's id.
 *
 * id_type is InvalidOid for integer ids (smallint, integer or bigint, into
 * ids); a type, for ids of that type (or a domain over it), kept in keys;
 * ANYOID, for ids of any type that are not kept (a model fit).  Errors name
 * a row whose id is not an integer by its ordinal, "source row 12", with
 * its id in the context.
 */
extern void gc_ingest(const char *source, Oid id_type, int flags,
					  MemoryContext outcxt, GcInput *in);

/*
 * With GC_INGEST_WEIGHTS (k-means), the source may return a third column,
 * the rows' sample weights (smallint, integer, bigint, real, double
 * precision or numeric): in->weights then holds one per row of X.  A row
 * with features and a NULL weight (22004), or a negative, NaN, infinite
 * or larger-than-real weight (22023), is an error naming the row.
 */

/*
 * The initial centroids of k-means from init_query, a query of one column
 * of features (types as the source's): in->X holds them in its row order,
 * in->n of them, every one checked as a source row's features ("features
 * of init row 2"); a NULL is an error.  Run as the source is, read-only.
 */
extern void gc_ingest_centroids(const char *init_query, MemoryContext outcxt,
								GcInput *in);

/*
 * Runs a labels query (tools/labels_query.c) to completion into dest, SPI connected by
 * the caller: refused as a source query is unless it is one statement that
 * only reads, and run read-only in a read-only transaction state.
 */
extern void gc_run_labels_query(const char *query, DestReceiver *dest);

/*
 * The checks of a source query (one statement that only reads), for a
 * caller that then runs its own queries over it (the distributed drivers):
 * gc_check_source_query raises the errors gc_ingest raises before running,
 * an id column (the first of two or more) not of an integer type
 * included, and returns the number of columns and, in *subquery, the text
 * such a caller embeds: the source's one statement, without a ';' after
 * it, in parentheses on lines of their own (a trailing "-- comment" ends
 * before the closing one), as in "SELECT ... FROM <subquery> AS s(id, f)".
 * gc_run_readonly runs a prepared plan with params read-only, as sources
 * run, its rows into dest, or into SPI_tuptable when dest is NULL (SPI
 * connected by the caller).
 */
struct _SPI_plan;
struct ParamListInfoData;
extern int	gc_check_source_query(const char *source, char **subquery);
extern void gc_run_readonly(struct _SPI_plan *plan, struct ParamListInfoData *params,
							DestReceiver *dest);

/*
 * The cast of features of another type to real[] (numeric[], pgvector's
 * vector, PostGIS's geometry through gpuclust_postgis ...), as
 * "features::real[]" would cast them: the expression is built once (per
 * source query, per window partition) and evaluated per row.  An error
 * raised by the cast names the row in its context: "casting features of
 * type geometry of <what> <rowno> to real[]" (what as for gc_features).
 */
typedef struct GcFeatureCast
{
	Oid			type;			/* the type cast from */
	const char *what;
	int64		rowno;			/* the row being cast */
	struct ParamListInfoData *params;	/* $1, the value */
	struct ExprState *state;
	struct ExprContext *econtext;
} GcFeatureCast;

/*
 * Builds the cast of type (typmod) to real[] in the current memory
 * context; false when there is none.
 */
extern bool gc_feature_cast_init(GcFeatureCast *c, Oid type, int32 typmod,
								 const char *what);

/*
 * The non-NULL value of row rowno cast to real[] (*isnull when the cast
 * gives NULL), valid until the next call or gc_feature_cast_end.
 */
extern Datum gc_feature_cast(GcFeatureCast *c, int64 rowno, Datum value,
							 bool *isnull);

extern void gc_feature_cast_end(GcFeatureCast *c);

/*
 * The hint of the error for features of a type with no cast to real[]
 * (errhint's value, or 0 for none): PostGIS's types get theirs from
 * gpuclust_postgis.
 */
extern int	gc_no_cast_hint(Oid type);

/*
 * Validates one features array (real[] or double precision[]) and writes
 * its values as float32 to dst (when dst is not NULL): one dimension, the
 * expected length, no NULL, every value finite, within real's range
 * (double precision) and within gc_feature_bound.  *d is the expected
 * length, or 0 for "any" (then set to the array's length).  Errors name
 * the row as "features of <what> <rowno>" (what = "row with id",
 * "partition row"), or "features" when what is NULL.  Returns the length.
 */
extern int	gc_features(ArrayType *arr, int *d, float *dst, const char *what,
						int64 rowno);

/*
 * The range of a feature in d dimensions: |v| <= gc_feature_bound(d), the
 * largest float not above gc_feature_limit(d) = 2^62/sqrt(d) (core/common/metric.h),
 * so that no squared distance and no bound of the core overflows float32.
 * gc_feature_ok is the one test of a value (false for NaN and infinities
 * too); gc_features applies it to every features array (every SQL form),
 * and kmeans_assign to its centroids.
 */
extern float gc_feature_bound(int d);

static inline bool
gc_feature_ok(float v, float bound)
{
	return fabsf(v) <= bound;
}

/*
 * The error (SQLSTATE 22003) for the value v beyond the range of a feature
 * in d dimensions: "<subj> contain a value out of range at <where>", with
 * |v| and the bound in the detail (as real prints them) and a hint.
 */
pg_noreturn extern void gc_report_out_of_range(const char *subj, const char *where,
								   float v, int d);

#endif							/* GPUCLUST_INGEST_H */
