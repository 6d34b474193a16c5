/*
 * hdbscan_core.c — HDBSCAN's phase 1 on the CPU: the core distances, and
 * the kd-tree index phases 1 and 2 share.
 *
 * core[i] = gc_hdbscan_dist(metric, the min_samples-th smallest
 * gc_dist2_f64 from row i to every row, itself counted).  As the float
 * k-distances of tools/kdistance.c, each query walks the kd-tree (kdtree.h)
 * depth first, nearer child first, keeping the k smallest squared
 * distances seen in a max-heap (max_heap.h, in double), and skips a node
 * whose box is no nearer (gc_box_mindist2_f64, an exact lower bound of
 * gc_dist2_f64) than the heap's largest once the heap is full: no point of
 * it can lower the k-th smallest.  So the result is exact, whatever the
 * thread count.
 *
 * The cancel flags are polled before every query; progress: the index
 * phase, then GC_PHASE_INIT with the rows done of n.
 */
#include <math.h>
#include <stdlib.h>

#include "hdbscan/hdbscan_internal.h"
#include "common/max_heap.h"

#define HD_LEAF_SIZE 16
#define HD_CHUNK 128			/* queries a thread takes at a time */
#define HD_HEAP_BYTES ((int64_t) 256 << 20)	/* the threads' heaps, at most */

gc_code
gc_hd_index_build(const gc_ctx *ctx, const float *R, int64_t n, int d,
				  gc_hd_index *ix, gc_status *st)
{
	gc_code		rc;

	ix->n = n;
	ix->d = d;
	ix->perm = malloc(sizeof(int64_t) * (size_t) n);
	ix->pts = malloc(sizeof(float) * (size_t) n * (size_t) d);
	if (ix->perm == NULL || ix->pts == NULL)
	{
		free(ix->perm);
		free(ix->pts);
		return gc_fail(st, GC_ENOMEM, "out of memory for the kd-tree of %lld rows",
					   (long long) n);
	}
	gc_report(ctx, GC_PHASE_INDEX, 0, 0, 0, n, NAN);
	rc = gc_kdtree_build(&ix->t, R, n, d, HD_LEAF_SIZE, gc_team_adapt(ctx), ctx,
						 ix->perm, ix->pts, st);
	if (rc != GC_OK)
	{
		free(ix->perm);
		free(ix->pts);
	}
	return rc;
}

void
gc_hd_index_free(gc_hd_index *ix)
{
	gc_kdtree_free(&ix->t);
	free(ix->perm);
	free(ix->pts);
	ix->perm = NULL;
	ix->pts = NULL;
}

/* The k-th smallest gc_dist2_f64 from q to the rows of ix. */
static double
kth_dist2(const gc_hd_index *ix, const float *q, int64_t k, double *heap,
		  int64_t *stack)
{
	const gc_kdtree *t = &ix->t;
	int			d = ix->d;
	int64_t		size = 0,
				top = 0;

	stack[top++] = 0;
	while (top > 0)
	{
		int64_t		node = stack[--top];

		if (size == k &&
			gc_box_mindist2_f64(q, t->lo + node * d, t->hi + node * d, d) >= heap[0])
			continue;
		if (!gc_kdtree_is_leaf(t, node))
		{
			gc_hd_push_children(t, q, node, true, stack, &top);
			continue;
		}
		for (int64_t s = t->begin[node]; s < t->end[node]; s++)
		{
			double		v = gc_dist2_f64(q, ix->pts + s * d, d);

			if (size < k)
				gc_heap_push_f64(heap, 1, &size, v);
			else if (v < heap[0])
				gc_heap_replace_top_f64(heap, 1, k, v);
		}
	}
	return heap[0];
}

/*
 * team, fewer where the threads' heaps (min_samples doubles each) would
 * take more than HD_HEAP_BYTES or the n doubles of the core distances:
 * memory stays O(n) whatever min_samples and the cores.
 */
static int
heap_threads(int team, int64_t n, int64_t min_samples)
{
	const double budget = fmax((double) HD_HEAP_BYTES, 8.0 * (double) n);
	const double fit = budget / (8.0 * (double) min_samples);

	return fit < 1.0 ? 1 : fit < (double) team ? (int) fit : team;
}

typedef struct core_query
{
	const gc_hd_index *ix;
	int64_t		min_samples;
	gc_metric	metric;
	double	   *core;
} core_query;

static void
core_of(void *arg, int64_t s, void *heap, int64_t *stack)
{
	const core_query *q = arg;
	const gc_hd_index *ix = q->ix;

	q->core[ix->perm[s]] =
		gc_hdbscan_dist(q->metric, kth_dist2(ix, ix->pts + s * ix->d,
											 q->min_samples, heap, stack));
}

gc_code
gc_hd_core(const gc_ctx *ctx, const gc_hd_index *ix, int64_t min_samples,
		   gc_metric metric, double *core, gc_status *st)
{
	const int64_t nchunks = (ix->n + HD_CHUNK - 1) / HD_CHUNK;
	const int	team = heap_threads(gc_region_threads(gc_team_adapt(ctx), nchunks),
									ix->n, min_samples);
	core_query	q = {ix, min_samples, metric, core};
	gc_code		rc;

	rc = gc_kdtree_query_all(ctx, &ix->t, team, HD_CHUNK,
							 sizeof(double) * (size_t) min_samples,
							 GC_PHASE_INIT, core_of, &q);
	if (rc == GC_ENOMEM)
		return gc_fail(st, GC_ENOMEM, "out of memory for the core distances' heaps (min_samples = %lld)",
					   (long long) min_samples);
	if (rc == GC_ECANCEL)
		return gc_fail(st, GC_ECANCEL, "canceled");
	return GC_OK;
}
