/*
 * hdbscan/hdbscan_internal.h — private to hdbscan/: the kd-tree index that
 * phases 1 (hdbscan_core.c) and 2 (hdbscan_mst.c) search, built once by the
 * driver (hdbscan.c) for both.
 */
#ifndef GPUCLUST_HDBSCAN_INTERNAL_H
#define GPUCLUST_HDBSCAN_INTERNAL_H

#include "hdbscan/hdbscan.h"
#include "common/kdtree.h"

/*
 * The rows R in the kd-tree's order: position s holds row perm[s], its
 * features at pts + s * d.
 */
typedef struct gc_hd_index
{
	gc_kdtree	t;
	int64_t		n;
	int			d;
	int64_t    *perm;
	float	   *pts;
} gc_hd_index;

/* Builds the index of R (n >= 1) with progress GC_PHASE_INDEX. */
gc_code		gc_hd_index_build(const gc_ctx *ctx, const float *R, int64_t n,
							  int d, gc_hd_index *ix, gc_status *st);
void		gc_hd_index_free(gc_hd_index *ix);

/* gc_hdbscan_core_cpu on a built index (core in input order). */
gc_code		gc_hd_core(const gc_ctx *ctx, const gc_hd_index *ix,
					   int64_t min_samples, gc_metric metric, double *core,
					   gc_status *st);

/* gc_hdbscan_mst_edges_cpu on a built index (core in input order). */
gc_code		gc_hd_mst(const gc_ctx *ctx, const gc_hd_index *ix, double alpha,
					  gc_metric metric, const double *core, gc_mst_edge *edges,
					  gc_status *st);

/*
 * The two children of node pushed on a depth-first walk's stack from q,
 * the one to walk first last: the one on q's side of the split, or when q
 * lies on it, the left one if tie_left.
 */
static inline void
gc_hd_push_children(const gc_kdtree *t, const float *q, int64_t node,
					bool tie_left, int64_t *stack, int64_t *top)
{
	const int64_t l = 2 * node + 1;
	const float v = q[t->split_dim[node]],
				sv = t->split_val[node];
	const bool	left_first = v < sv || (v == sv && tie_left);

	stack[(*top)++] = left_first ? l + 1 : l;
	stack[(*top)++] = left_first ? l : l + 1;
}

#endif							/* GPUCLUST_HDBSCAN_INTERNAL_H */
