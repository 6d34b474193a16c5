/*-------------------------------------------------------------------------
 *
 * labels_query.h
 *	  A labelling of a source query's rows, read from a labels query:
 *	  gpu_silhouette and gpu_cluster_centers (tools/labelled_rows_sql.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef GPUCLUST_LABELS_H
#define GPUCLUST_LABELS_H

#include "common/ingest.h"

/*
 * The labels of in's rows of X.  labels_query returns (id, label): id of
 * an integer type, as the source's; label smallint, integer or bigint, or
 * NULL for noise.  labels[j] (in->n long) is the dense number 0 .. m-1 of
 * the label of row j of X, in ascending order of the labels (values[c] is
 * label c's value), or -1 when the row's label is NULL or the labels
 * query has no row for its id.  Errors: duplicate ids in the source
 * (21000) or the labels (21000), an id of the labels query that the
 * source did not return (22023), columns of the wrong types (42804).
 * Rows of the labels query for source rows with NULL features are
 * ignored.  Everything is allocated in cxt.
 */
extern void gc_read_labels(const char *labels_query, const GcInput *in,
						   MemoryContext cxt, int32 **labels, int32 *m,
						   int64 **values);

#endif							/* GPUCLUST_LABELS_H */
