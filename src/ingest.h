/*-------------------------------------------------------------------------
 *
 * ingest.h
 *	  Read a source query of (id, features) rows into the core's input.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GPUCLUST_INGEST_H
#define GPUCLUST_INGEST_H

#include "utils/array.h"

/*
 * The rows of a source query.  Row i of the query (0-based, input order)
 * has id ids[i]; when has_features[i] it is row j of X, where j counts the
 * earlier rows with features.  Rows with NULL features are kept (they come
 * back with a NULL cluster) but are not rows of X.
 */
typedef struct GcInput
{
	int64		n_rows;			/* rows the source returned */
	int64		n;				/* rows with features = rows of X */
	int			d;				/* dimension; 0 when n == 0 */
	float	   *X;				/* n x d float32, row-major; NULL if n == 0 */
	int64	   *ids;			/* n_rows ids */
	bool	   *has_features;	/* n_rows flags */
} GcInput;

/*
 * Run source (one statement returning (id, features)) and fill *in, with
 * every array allocated in outcxt (huge allocations, so more than 1 GB
 * works).  Every row is validated; bad input raises an ERROR naming the
 * row's id.
 */
extern void gc_ingest(const char *source, MemoryContext outcxt, GcInput *in);

/*
 * Validates one features array (real[] or double precision[]) and writes
 * its values as float32 to dst (when dst is not NULL).  *d is the expected
 * length, or 0 for "any" (then set to the array's length).  Errors name
 * the row as "features of <what> <rowno>" (what = "row with id",
 * "partition row"), or "features" when what is NULL.  Returns the length.
 */
extern int	gc_features(ArrayType *arr, int *d, float *dst, const char *what,
						int64 rowno);

#endif							/* GPUCLUST_INGEST_H */
