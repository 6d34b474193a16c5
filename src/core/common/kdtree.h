/*
 * kdtree.h — a balanced kd-tree of fixed depth, stored implicitly: node i has
 * children 2i+1 and 2i+2, every leaf is at depth `depth`, and each node
 * splits its positions at the median of its widest dimension (as estimated
 * on a sample).  Positions are the points reordered so that each node covers
 * a contiguous range; each node keeps the exact bounding box of its points.
 */
#ifndef GPUCLUST_KDTREE_H
#define GPUCLUST_KDTREE_H

#include <stdint.h>

#include "common/core.h"

typedef struct gc_kdtree
{
	int64_t		n;
	int			d;
	int			depth;
	int64_t		nnodes;			/* 2^(depth+1) - 1 */
	int64_t		first_leaf;		/* 2^depth - 1 */
	int64_t    *begin,
			   *end;			/* node i covers positions [begin, end) */
	float	   *lo,
			   *hi;				/* nnodes * d: bounding box of the points */
	int32_t    *split_dim;		/* internal nodes: the split dimension */
	float	   *split_val;		/* internal nodes: left <= split_val <= right */
} gc_kdtree;

/*
 * Builds the tree over X (n rows, d columns) with leaves of at most about
 * leaf_size points, and writes perm (position -> row) and pts (rows in
 * position order).  Returns GC_OK, GC_ENOMEM or GC_ECANCEL (via st).
 */
gc_code		gc_kdtree_build(gc_kdtree *t, const float *X, int64_t n, int d,
							int leaf_size, int nthreads, const gc_ctx *ctx,
							int64_t *perm, float *pts, gc_status *st);

void		gc_kdtree_free(gc_kdtree *t);

/*
 * One query from every position s of t (0 <= s < t->n), in chunks of chunk
 * positions over team threads: query(arg, s, heap, stack), where heap is
 * the thread's heap_bytes and stack its room for a depth-first walk of t
 * (2 depth + 4 nodes).  The cancel flags are polled before every query;
 * progress: phase, with the positions done of t->n.  Returns GC_OK,
 * GC_ENOMEM (a thread's heap or stack not allocated) or GC_ECANCEL, and
 * leaves the message to the caller (st untouched).
 */
typedef void (*gc_kdtree_query_fn) (void *arg, int64_t s, void *heap,
									int64_t *stack);

gc_code		gc_kdtree_query_all(const gc_ctx *ctx, const gc_kdtree *t,
								int team, int64_t chunk, size_t heap_bytes,
								gc_phase phase, gc_kdtree_query_fn query,
								void *arg);

static inline int
gc_kdtree_is_leaf(const gc_kdtree *t, int64_t node)
{
	return node >= t->first_leaf;
}

#endif							/* GPUCLUST_KDTREE_H */
