/*
 * kdistance.c — the k-distance of every row (Ester et al.'s "sorted
 * k-dist graph" for choosing DBSCAN's eps) and the knee of that curve.
 *
 * kdist2[i] is the k-th smallest gc_dist2(X_i, X_j) over all rows j, the
 * row itself included (j = i gives 0, so k = 1 gives 0, as scikit-learn's
 * NearestNeighbors.kneighbors on its training set lists the row itself
 * first).  DBSCAN counts the point itself in min_pts, so row i is core at
 * (eps, min_pts = k) exactly when kdist2[i] <= gc_eps2(eps): the same
 * float32 distance, the same comparison.
 *
 * The index is the kd-tree of kdtree.h (DBSCAN's index for d > 3).  The
 * grid DBSCAN uses for d <= 3 has cells of side eps/sqrt(d), and a
 * k-distance has no eps to size them by, so the kd-tree serves every d.
 * Each query walks the tree depth first, nearer child first, keeping the
 * k smallest distances seen in a max-heap (max_heap.h), and skips a node whose box is
 * farther (gc_box_mindist2, an exact lower bound of gc_dist2) than the
 * heap's largest when the heap is full.  A skipped node holds no distance
 * below the k-th, so the result is exact, whatever the thread count.
 *
 * The cancel flags are polled before every query (a query costs far more
 * than the poll, and with a large k one query may take milliseconds);
 * progress: the index phase, then the queries as points done of n.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tools/tools.h"
#include "common/gpu.h"
#include "common/kdtree.h"
#include "common/max_heap.h"

#define KD_LEAF_SIZE 16
#define KD_CHUNK 128			/* queries a thread takes at a time */

/* The k-th smallest distance from q to the points of t (pts in position order). */
static float
kth_distance(const gc_kdtree *t, const float *pts, const float *q, int64_t k,
			 float *heap, int64_t *stack)
{
	int			d = t->d;
	int64_t		size = 0,
				top = 0;

	stack[top++] = 0;
	while (top > 0)
	{
		int64_t		node = stack[--top];

		if (size == k &&
			gc_box_mindist2(q, t->lo + node * d, t->hi + node * d, d) > heap[0])
			continue;
		if (gc_kdtree_is_leaf(t, node))
		{
			for (int64_t s = t->begin[node]; s < t->end[node]; s++)
			{
				if (size < k)
					gc_heap_push(heap, 1, &size, gc_dist2(q, pts + s * d, d));
				else
				{
					float		v = gc_dist2_upto(q, pts + s * d, d, heap[0]);

					if (v < heap[0])
						gc_heap_replace_top(heap, 1, k, v);
				}
			}
		}
		else
		{
			int64_t		a = 2 * node + 1,
						b = 2 * node + 2;
			float		da = gc_box_mindist2(q, t->lo + a * d, t->hi + a * d, d),
						db = gc_box_mindist2(q, t->lo + b * d, t->hi + b * d, d);

			/* the nearer child is popped first */
			if (da <= db)
			{
				stack[top++] = b;
				stack[top++] = a;
			}
			else
			{
				stack[top++] = a;
				stack[top++] = b;
			}
		}
	}
	return heap[0];
}

/* The checks of both devices' k-distances (GC_EINVAL, GC_ECANCEL). */
static gc_code
kdistance_check(const gc_ctx *ctx, const float *X, int64_t n, int d,
				int64_t k, const float *kdist2, gc_status *st)
{
	st->code = GC_OK;
	st->message[0] = '\0';
	if (n < 1 || d < 1 || X == NULL || kdist2 == NULL)
		return gc_fail(st, GC_EINVAL, "no rows");
	if (k < 1 || k > n)
		return gc_fail(st, GC_EINVAL, "k = %lld must be between 1 and the number of rows (%lld)",
					   (long long) k, (long long) n);
	if (gc_cancelled(ctx))
		return gc_fail(st, GC_ECANCEL, "canceled");
	return GC_OK;
}

gc_code
gc_kdistance_on_gpu(const gc_ctx *ctx, const float *X, int64_t n, int d,
					int64_t k, float *kdist2, gc_status *st)
{
	gc_code		rc;

	if ((rc = kdistance_check(ctx, X, n, d, k, kdist2, st)) != GC_OK)
		return rc;
	return gc_kdistance_gpu(ctx, X, n, d, k, kdist2, st);
}

typedef struct kdist_query
{
	const gc_kdtree *t;
	const float *pts;
	int64_t		k;
	const int64_t *perm;
	float	   *kdist2;
} kdist_query;

static void
kdist_of(void *arg, int64_t s, void *heap, int64_t *stack)
{
	const kdist_query *q = arg;

	q->kdist2[q->perm[s]] = kth_distance(q->t, q->pts, q->pts + s * q->t->d,
										 q->k, heap, stack);
}

gc_code
gc_kdistance_cpu(const gc_ctx *ctx, const float *X, int64_t n, int d,
				 int64_t k, float *kdist2, gc_status *st)
{
	gc_kdtree	t;
	int64_t    *perm;
	float	   *pts;
	gc_code		rc;

	if ((rc = kdistance_check(ctx, X, n, d, k, kdist2, st)) != GC_OK)
		return rc;
	perm = malloc(sizeof(int64_t) * (size_t) n);
	pts = malloc(sizeof(float) * (size_t) n * (size_t) d);
	if (perm == NULL || pts == NULL)
	{
		free(perm);
		free(pts);
		return gc_fail(st, GC_ENOMEM, "out of memory for the k-distances");
	}
	gc_report(ctx, GC_PHASE_INDEX, 0, 0, 0, n, NAN);
	rc = gc_kdtree_build(&t, X, n, d, KD_LEAF_SIZE, gc_team_adapt(ctx), ctx,
						 perm, pts, st);
	if (rc == GC_OK)
	{
		kdist_query q = {&t, pts, k, perm, kdist2};

		rc = gc_kdtree_query_all(ctx, &t,
								 gc_region_threads(gc_team_adapt(ctx), n / KD_CHUNK),
								 KD_CHUNK, sizeof(float) * (size_t) k,
								 GC_PHASE_ITERATE, kdist_of, &q);
		gc_kdtree_free(&t);
		if (rc == GC_ENOMEM)
			gc_fail(st, GC_ENOMEM, "out of memory for the k-distance heaps (k = %lld)",
					(long long) k);
		else if (rc == GC_ECANCEL)
			gc_fail(st, GC_ECANCEL, "canceled");
	}
	free(perm);
	free(pts);
	return rc;
}

int64_t
gc_knee_index(const double *y, int64_t n)
{
	double		span,
				best = 0.0;
	int64_t		knee = 0;

	if (n <= 2)
		return 0;
	span = y[n - 1] - y[0];
	if (!(span > 0.0))
		return 0;
	for (int64_t i = 0; i < n; i++)
	{
		double		gap = (double) i / (double) (n - 1) - (y[i] - y[0]) / span;

		if (gap > best)
		{
			best = gap;
			knee = i;
		}
	}
	return knee;
}
