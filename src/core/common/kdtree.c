/*
 * kdtree.c — building the fixed-depth kd-tree of kdtree.h.
 *
 * Level by level, every node of the level (in parallel) picks the dimension
 * of largest spread on a strided sample of its points and moves its median
 * into place with quickselect, on a scratch array of that coordinate.  The
 * shape depends only on n, so it and the result are the same whatever the
 * thread count.
 *
 * And the parallel loop of queries over the built tree (gc_kdtree_query_all:
 * the k-distances' and HDBSCAN's core distances').
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>

#include "common/metric.h"
#include "common/kdtree.h"

#define SPREAD_SAMPLE 64

void
gc_kdtree_free(gc_kdtree *t)
{
	free(t->begin);
	free(t->end);
	free(t->lo);
	free(t->hi);
	free(t->split_dim);
	free(t->split_val);
	memset(t, 0, sizeof(*t));
}

/* Puts the k-th smallest key at k, smaller ones before, larger after. */
static void
select_kth(float *key, int64_t *idx, int64_t lo, int64_t hi, int64_t k)
{
	while (hi > lo)
	{
		int64_t		mid = lo + (hi - lo) / 2;
		float		a = key[lo],
					b = key[mid],
					c = key[hi];
		float		pivot = a < b ? (b < c ? b : (a < c ? c : a))
			: (a < c ? a : (b < c ? c : b));
		int64_t		i = lo,
					j = hi;

		while (i <= j)
		{
			while (key[i] < pivot)
				i++;
			while (key[j] > pivot)
				j--;
			if (i <= j)
			{
				float		tk = key[i];
				int64_t		ti = idx[i];

				key[i] = key[j];
				idx[i] = idx[j];
				key[j] = tk;
				idx[j] = ti;
				i++;
				j--;
			}
		}
		if (k <= j)
			hi = j;
		else if (k >= i)
			lo = i;
		else
			return;
	}
}

static void
split_node(gc_kdtree *t, const float *X, float *key, int64_t *perm, int64_t node)
{
	int			d = t->d;
	int64_t		b = t->begin[node],
				e = t->end[node],
				m = b + (e - b) / 2;
	int64_t		step = (e - b) > SPREAD_SAMPLE ? (e - b) / SPREAD_SAMPLE : 1;
	float		best = -1.0f;
	int			dim = 0;

	for (int k = 0; k < d; k++)
	{
		float		mn = INFINITY,
					mx = -INFINITY;

		for (int64_t i = b; i < e; i += step)
		{
			float		v = X[perm[i] * d + k];

			mn = gc_fmin(mn, v);
			mx = gc_fmax(mx, v);
		}
		if (mx - mn > best)
		{
			best = mx - mn;
			dim = k;
		}
	}
	for (int64_t i = b; i < e; i++)
		key[i] = X[perm[i] * d + dim];
	if (e - b >= 2)
		select_kth(key, perm, b, e - 1, m);
	t->split_dim[node] = (int32_t) dim;
	t->split_val[node] = e > b ? key[m] : 0.0f;
}

gc_code
gc_kdtree_build(gc_kdtree *t, const float *X, int64_t n, int d, int leaf_size,
				int nthreads, const gc_ctx *ctx, int64_t *perm, float *pts,
				gc_status *st)
{
	float	   *key;
	bool		cancelled = false;

	memset(t, 0, sizeof(*t));
	t->n = n;
	t->d = d;
	if (leaf_size < 2)
		leaf_size = 2;
	while ((n >> t->depth) > leaf_size)
		t->depth++;
	t->nnodes = (INT64_C(2) << t->depth) - 1;
	t->first_leaf = (INT64_C(1) << t->depth) - 1;
	t->begin = malloc(sizeof(int64_t) * (size_t) t->nnodes);
	t->end = malloc(sizeof(int64_t) * (size_t) t->nnodes);
	t->lo = malloc(sizeof(float) * (size_t) t->nnodes * d);
	t->hi = malloc(sizeof(float) * (size_t) t->nnodes * d);
	t->split_dim = malloc(sizeof(int32_t) * (size_t) t->nnodes);
	t->split_val = malloc(sizeof(float) * (size_t) t->nnodes);
	key = malloc(sizeof(float) * (size_t) n);
	if (!t->begin || !t->end || !t->lo || !t->hi || !t->split_dim ||
		!t->split_val || !key)
	{
		free(key);
		gc_kdtree_free(t);
		return gc_fail(st, GC_ENOMEM, "out of memory for the kd-tree");
	}

	t->begin[0] = 0;
	t->end[0] = n;
	for (int64_t i = 0; i < t->first_leaf; i++)
	{
		int64_t		m = t->begin[i] + (t->end[i] - t->begin[i]) / 2;

		t->begin[2 * i + 1] = t->begin[i];
		t->end[2 * i + 1] = m;
		t->begin[2 * i + 2] = m;
		t->end[2 * i + 2] = t->end[i];
	}

#pragma omp parallel for num_threads(nthreads) schedule(static)
	for (int64_t i = 0; i < n; i++)
		perm[i] = i;

	for (int level = 0; level < t->depth && !cancelled; level++)
	{
		int64_t		first = (INT64_C(1) << level) - 1,
					last = (INT64_C(2) << level) - 1;

#pragma omp parallel for num_threads(nthreads) schedule(dynamic, 1)
		for (int64_t node = first; node < last; node++)
			split_node(t, X, key, perm, node);
		cancelled = gc_cancelled(ctx);
	}
	free(key);
	if (cancelled)
	{
		gc_kdtree_free(t);
		return gc_fail(st, GC_ECANCEL, "canceled");
	}

#pragma omp parallel num_threads(nthreads)
	{
#pragma omp for schedule(static)
		for (int64_t s = 0; s < n; s++)
			memcpy(pts + s * d, X + perm[s] * d, sizeof(float) * d);
#pragma omp for schedule(dynamic, 64)
		for (int64_t node = t->first_leaf; node < t->nnodes; node++)
		{
			float	   *lo = t->lo + node * d,
					   *hi = t->hi + node * d;

			for (int k = 0; k < d; k++)
			{
				lo[k] = INFINITY;
				hi[k] = -INFINITY;
			}
			for (int64_t s = t->begin[node]; s < t->end[node]; s++)
				for (int k = 0; k < d; k++)
				{
					lo[k] = gc_fmin(lo[k], pts[s * d + k]);
					hi[k] = gc_fmax(hi[k], pts[s * d + k]);
				}
		}
	}
	for (int level = t->depth - 1; level >= 0; level--)
	{
		int64_t		first = (INT64_C(1) << level) - 1,
					last = (INT64_C(2) << level) - 1;

#pragma omp parallel for num_threads(nthreads) schedule(static)
		for (int64_t node = first; node < last; node++)
			for (int k = 0; k < d; k++)
			{
				t->lo[node * d + k] = gc_fmin(t->lo[(2 * node + 1) * d + k],
											t->lo[(2 * node + 2) * d + k]);
				t->hi[node * d + k] = gc_fmax(t->hi[(2 * node + 1) * d + k],
											t->hi[(2 * node + 2) * d + k]);
			}
	}
	return GC_OK;
}

gc_code
gc_kdtree_query_all(const gc_ctx *ctx, const gc_kdtree *t, int team,
					int64_t chunk, size_t heap_bytes, gc_phase phase,
					gc_kdtree_query_fn query, void *arg)
{
	const int64_t n = t->n;
	const int64_t nchunks = (n + chunk - 1) / chunk;
	int			stop = 0;
	bool		nomem = false;
	gc_loop_progress lp;

	gc_loop_progress_start(&lp, ctx, phase, n);
#pragma omp parallel num_threads(team)
	{
		void	   *heap = malloc(heap_bytes);
		int64_t    *stack = malloc(sizeof(int64_t) * (size_t) (2 * t->depth + 4));
		const bool	caller = omp_get_thread_num() == 0;

		if (heap == NULL || stack == NULL)
		{
			__atomic_store_n(&nomem, true, __ATOMIC_RELAXED);
			__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
		}
#pragma omp for schedule(dynamic, 1)
		for (int64_t c = 0; c < nchunks; c++)
		{
			int64_t		s0 = c * chunk,
						s1 = s0 + chunk < n ? s0 + chunk : n;

			for (int64_t s = s0; s < s1; s++)
			{
				if (__atomic_load_n(&stop, __ATOMIC_RELAXED))
					break;
				if (gc_cancelled(ctx))
				{
					__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
					break;
				}
				query(arg, s, heap, stack);
			}
			gc_loop_progress_add(&lp, s1 - s0, caller);
		}
		free(heap);
		free(stack);
	}
	if (nomem)
		return GC_ENOMEM;
	if (stop)
		return GC_ECANCEL;
	gc_loop_progress_end(&lp);
	return GC_OK;
}
