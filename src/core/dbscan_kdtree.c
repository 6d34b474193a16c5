/*
 * dbscan_kdtree.c — DBSCAN on the kd-tree of kdtree.h, for any d.
 *
 * A node is "dense" when the float-exact bound gc_dist2(lo, hi) <= eps2
 * proves all its points mutual neighbours.  Phases, parallel over leaves:
 *   core:   a leaf under a dense node of >= min_pts points is all core;
 *           otherwise a range count per point, whole nodes at a time where
 *           the box bounds decide, stopping at min_pts;
 *   chain:  the core points of each maximal dense node are united, so any
 *           dense node's core points form one component;
 *   union:  each core point a searches the tree: a dense node needs one core
 *           neighbour of a (skipped outright when already in a's component),
 *           other leaves are scanned for core neighbours after a;
 *   border: each non-core point finds its nearest core neighbour.
 * Subtrees without core points are skipped in the last three phases.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "box_dist.h"
#include "dbscan_internal.h"
#include "kdtree.h"
#include "union_find.h"

#define LEAF_SIZE 32
#define UNION_BATCHES 16
#define STACK_MAX 130			/* > 2 * (max depth + 1) */

typedef struct tree_state
{
	gc_kdtree	t;
	uint8_t    *dense;			/* nnodes */
	uint8_t    *conn;			/* nnodes: its core points are known to be
								 * in one component (never reset) */
	int64_t    *ncore;			/* nnodes: core points under the node */
	int64_t    *rep;			/* nnodes: first core position, or -1 */
	int64_t    *top_dense;		/* leaves: highest dense ancestor, or -1 */
} tree_state;

static inline int64_t
node_size(const gc_kdtree *t, int64_t u)
{
	return t->end[u] - t->begin[u];
}

/* The child of u on x's side first: pushed last, so popped first. */
static inline void
push_children(const gc_kdtree *t, int64_t u, const float *x,
			  int64_t *stack, int *sp)
{
	int64_t		l = 2 * u + 1,
				r = 2 * u + 2;

	if (x[t->split_dim[u]] < t->split_val[u])
	{
		stack[(*sp)++] = r;
		stack[(*sp)++] = l;
	}
	else
	{
		stack[(*sp)++] = l;
		stack[(*sp)++] = r;
	}
}

/* Number of neighbours of x, counting stops once it reaches min_pts. */
static int64_t
count_neighbours(const tree_state *ts, const gc_dbscan_job *j, const float *x)
{
	const gc_kdtree *t = &ts->t;
	int			d = j->d;
	float		eps2 = j->eps2;
	int64_t		minp = j->min_pts;
	int64_t		cnt = 0;
	int64_t		stack[STACK_MAX];
	int			sp = 0;

	stack[sp++] = 0;
	while (sp > 0 && cnt < minp)
	{
		int64_t		u = stack[--sp];
		const float *lo = t->lo + u * d,
				   *hi = t->hi + u * d;

		if (gc_box_mindist2(x, lo, hi, d) > eps2)
			continue;
		if (gc_box_maxdist2(x, lo, hi, d) <= eps2)
		{
			cnt += node_size(t, u);
			continue;
		}
		if (gc_kdtree_is_leaf(t, u))
		{
			for (int64_t s = t->begin[u]; s < t->end[u] && cnt < minp; s++)
				cnt += gc_dist2_upto(x, j->pts + s * d, d, eps2) <= eps2;
		}
		else
			push_children(t, u, x, stack, &sp);
	}
	return cnt;
}

/* Some core point under node v within eps of x, or -1. */
static int64_t
any_core_neighbour(const tree_state *ts, const gc_dbscan_job *j,
				   const float *x, int64_t v)
{
	const gc_kdtree *t = &ts->t;
	int			d = j->d;
	float		eps2 = j->eps2;
	int64_t		stack[STACK_MAX];
	int			sp = 0;

	stack[sp++] = v;
	while (sp > 0)
	{
		int64_t		u = stack[--sp];
		const float *lo = t->lo + u * d,
				   *hi = t->hi + u * d;

		if (ts->ncore[u] == 0 || gc_box_mindist2(x, lo, hi, d) > eps2)
			continue;
		if (gc_box_maxdist2(x, lo, hi, d) <= eps2)
			return ts->rep[u];
		if (gc_kdtree_is_leaf(t, u))
		{
			for (int64_t s = ts->rep[u]; s < t->end[u]; s++)
				if (j->core[s] &&
					gc_dist2_upto(x, j->pts + s * d, d, eps2) <= eps2)
					return s;
		}
		else
			push_children(t, u, x, stack, &sp);
	}
	return -1;
}

/* Unites core point a with every core neighbour (see the file comment). */
static void
union_from(const tree_state *ts, gc_dbscan_job *j, int64_t a)
{
	const gc_kdtree *t = &ts->t;
	int			d = j->d;
	float		eps2 = j->eps2;
	const float *x = j->pts + a * d;
	int64_t    *parent = j->parent;
	int64_t		stack[STACK_MAX];
	int			sp = 0;

	stack[sp++] = 0;
	while (sp > 0)
	{
		int64_t		u = stack[--sp];
		const float *lo = t->lo + u * d,
				   *hi = t->hi + u * d;

		if (ts->ncore[u] == 0 || gc_box_mindist2(x, lo, hi, d) > eps2)
			continue;
		if (ts->conn[u])
		{
			int64_t		b;

			if (gc_uf_find(parent, a) == gc_uf_find(parent, ts->rep[u]))
				continue;
			if (gc_box_maxdist2(x, lo, hi, d) <= eps2)
				b = ts->rep[u];
			else
				b = any_core_neighbour(ts, j, x, u);
			if (b >= 0)
				gc_uf_union(parent, a, b);
			continue;
		}
		if (gc_kdtree_is_leaf(t, u))
		{
			int64_t		s = ts->rep[u] > a ? ts->rep[u] : a + 1;

			for (; s < t->end[u]; s++)
				if (j->core[s] &&
					gc_dist2_upto(x, j->pts + s * d, d, eps2) <= eps2)
					gc_uf_union(parent, a, s);
		}
		else
			push_children(t, u, x, stack, &sp);
	}
}

/* Nearest core neighbour of x (ties: lowest input row), or -1. */
static int64_t
nearest_core(const tree_state *ts, const gc_dbscan_job *j, const float *x)
{
	const gc_kdtree *t = &ts->t;
	int			d = j->d;
	const int64_t *perm = j->perm;
	float		bestd = j->eps2;
	int64_t		best = -1;
	int64_t		stack[STACK_MAX];
	int			sp = 0;

	stack[sp++] = 0;
	while (sp > 0)
	{
		int64_t		u = stack[--sp];

		if (ts->ncore[u] == 0 ||
			gc_box_mindist2(x, t->lo + u * d, t->hi + u * d, d) > bestd)
			continue;
		if (gc_kdtree_is_leaf(t, u))
		{
			for (int64_t s = ts->rep[u]; s < t->end[u]; s++)
			{
				float		dd;

				if (!j->core[s])
					continue;
				dd = gc_dist2_upto(x, j->pts + s * d, d, bestd);
				if (dd <= bestd &&
					(best < 0 || dd < bestd || perm[s] < perm[best]))
				{
					best = s;
					bestd = dd;
				}
			}
		}
		else
			push_children(t, u, x, stack, &sp);
	}
	return best;
}

/*
 * Marks more nodes connected: a leaf whose core points now share one root, an
 * internal node whose children are connected and share a root.  Components
 * only merge, so a mark stays true.  Called by all threads of a team.
 */
static void
refresh_conn(tree_state *ts, gc_dbscan_job *j)
{
	gc_kdtree  *t = &ts->t;

#pragma omp for schedule(dynamic, 64)
	for (int64_t v = t->first_leaf; v < t->nnodes; v++)
	{
		int64_t		r;
		bool		one = true;

		if (ts->conn[v] || ts->ncore[v] == 0)
			continue;
		r = gc_uf_find(j->parent, ts->rep[v]);
		for (int64_t s = ts->rep[v] + 1; s < t->end[v] && one; s++)
			if (j->core[s] && gc_uf_find(j->parent, s) != r)
				one = false;
		ts->conn[v] = one;
	}
	for (int level = t->depth - 1; level >= 0; level--)
	{
		int64_t		first = (INT64_C(1) << level) - 1,
					last = (INT64_C(2) << level) - 1;

#pragma omp for schedule(static)
		for (int64_t u = first; u < last; u++)
		{
			int64_t		l = 2 * u + 1,
						r = 2 * u + 2;

			if (ts->conn[u] || ts->ncore[u] == 0)
				continue;
			if ((ts->ncore[l] == 0 || ts->conn[l]) &&
				(ts->ncore[r] == 0 || ts->conn[r]) &&
				(ts->ncore[l] == 0 || ts->ncore[r] == 0 ||
				 gc_uf_find(j->parent, ts->rep[l]) ==
				 gc_uf_find(j->parent, ts->rep[r])))
				ts->conn[u] = 1;
		}
	}
}

static void
tree_state_free(tree_state *ts)
{
	gc_kdtree_free(&ts->t);
	free(ts->dense);
	free(ts->conn);
	free(ts->ncore);
	free(ts->rep);
	free(ts->top_dense);
}

gc_code
gc_dbscan_kdtree_run(gc_dbscan_job *j)
{
	tree_state	ts;
	gc_kdtree  *t = &ts.t;
	int			d = j->d;
	int			T = j->nthreads;
	int64_t		nleaf;
	gc_code		rc;

	memset(&ts, 0, sizeof(ts));
	rc = gc_kdtree_build(t, j->X, j->n, d, LEAF_SIZE, T, j->ctx, j->perm,
						 j->pts, j->st);
	if (rc != GC_OK)
		return rc;
	nleaf = t->nnodes - t->first_leaf;
	ts.dense = malloc((size_t) t->nnodes);
	ts.conn = malloc((size_t) t->nnodes);
	ts.ncore = malloc(sizeof(int64_t) * (size_t) t->nnodes);
	ts.rep = malloc(sizeof(int64_t) * (size_t) t->nnodes);
	ts.top_dense = malloc(sizeof(int64_t) * (size_t) nleaf);
	if (!ts.dense || !ts.conn || !ts.ncore || !ts.rep || !ts.top_dense)
	{
		tree_state_free(&ts);
		return gc_fail(j->st, GC_ENOMEM, "out of memory for the kd-tree");
	}

#pragma omp parallel num_threads(T)
	{
#pragma omp for schedule(static)
		for (int64_t u = 0; u < t->nnodes; u++)
		{
			ts.dense[u] = gc_dist2(t->lo + u * d, t->hi + u * d, d) <= j->eps2;
			ts.conn[u] = ts.dense[u];
		}
#pragma omp for schedule(static)
		for (int64_t s = 0; s < j->n; s++)
			j->parent[s] = s;
		/* implicit barrier: dense[] complete */
#pragma omp for schedule(static)
		for (int64_t l = 0; l < nleaf; l++)
		{
			int64_t		top = -1;

			for (int64_t u = t->first_leaf + l;; u = (u - 1) / 2)
			{
				if (ts.dense[u])
					top = u;
				if (u == 0)
					break;
			}
			ts.top_dense[l] = top;
		}

		/* core */
#pragma omp for schedule(dynamic, 4)
		for (int64_t l = 0; l < nleaf; l++)
		{
			int64_t		v = t->first_leaf + l;
			bool		all = false;

			if (gc_job_stopped(j))
				continue;
			for (int64_t u = v;; u = (u - 1) / 2)
			{
				if (ts.dense[u] && node_size(t, u) >= j->min_pts)
				{
					all = true;
					break;
				}
				if (u == 0)
					break;
			}
			for (int64_t s = t->begin[v]; s < t->end[v]; s++)
				j->core[s] = all ||
					count_neighbours(&ts, j, j->pts + s * d) >= j->min_pts;
		}

		/* core counts and representatives, leaves then upwards */
#pragma omp for schedule(static)
		for (int64_t l = 0; l < nleaf; l++)
		{
			int64_t		v = t->first_leaf + l,
						k = 0,
						first = -1;

			for (int64_t s = t->begin[v]; s < t->end[v]; s++)
				if (j->core[s])
				{
					if (first < 0)
						first = s;
					k++;
				}
			ts.ncore[v] = k;
			ts.rep[v] = first;
		}
		for (int level = t->depth - 1; level >= 0; level--)
		{
			int64_t		first = (INT64_C(1) << level) - 1,
						last = (INT64_C(2) << level) - 1;

#pragma omp for schedule(static)
			for (int64_t u = first; u < last; u++)
			{
				ts.ncore[u] = ts.ncore[2 * u + 1] + ts.ncore[2 * u + 2];
				ts.rep[u] = ts.rep[2 * u + 1] >= 0 ? ts.rep[2 * u + 1]
					: ts.rep[2 * u + 2];
			}
		}

		/* chain the core points of each maximal dense node */
#pragma omp for schedule(static)
		for (int64_t l = 0; l < nleaf; l++)
		{
			int64_t		v = t->first_leaf + l,
						top = ts.top_dense[l];

			if (top < 0 || ts.ncore[v] == 0 || j->stop)
				continue;
			for (int64_t s = ts.rep[v]; s < t->end[v]; s++)
				if (j->core[s])
					gc_uf_union(j->parent, ts.rep[top], s);
		}

		/* pairs inside each leaf first, so that leaves become connected */
#pragma omp for schedule(dynamic, 16)
		for (int64_t l = 0; l < nleaf; l++)
		{
			int64_t		v = t->first_leaf + l;

			if (ts.ncore[v] < 2 || ts.conn[v] || gc_job_stopped(j))
				continue;
			for (int64_t a = ts.rep[v]; a < t->end[v]; a++)
				if (j->core[a])
					for (int64_t b = a + 1; b < t->end[v]; b++)
						if (j->core[b] &&
							gc_dist2_upto(j->pts + a * d, j->pts + b * d, d,
										  j->eps2) <= j->eps2)
							gc_uf_union(j->parent, a, b);
		}
		/*
		 * Then the searches, in batches of leaves: between batches more
		 * nodes are marked connected, and a connected node is skipped
		 * whole once the searching point is in its component.
		 */
		for (int batch = 0; batch < UNION_BATCHES; batch++)
		{
			/* geometric batches: the first ones connect the most */
			int64_t		lo = batch == 0 ? 0 : nleaf >> (UNION_BATCHES - batch),
						hi = batch == UNION_BATCHES - 1 ? nleaf
				: nleaf >> (UNION_BATCHES - 1 - batch);

			refresh_conn(&ts, j);
#pragma omp for schedule(dynamic, 4)
			for (int64_t l = lo; l < hi; l++)
			{
				int64_t		v = t->first_leaf + l;

				if (ts.ncore[v] == 0 || gc_job_stopped(j))
					continue;
				for (int64_t s = ts.rep[v]; s < t->end[v]; s++)
					if (j->core[s])
						union_from(&ts, j, s);
			}
		}

		/* border */
#pragma omp for schedule(dynamic, 4)
		for (int64_t l = 0; l < nleaf; l++)
		{
			int64_t		v = t->first_leaf + l;

			if (ts.ncore[v] == node_size(t, v) || gc_job_stopped(j))
				continue;
			for (int64_t s = t->begin[v]; s < t->end[v]; s++)
				if (!j->core[s])
				{
					int64_t		b = nearest_core(&ts, j, j->pts + s * d);

					j->croot[j->perm[s]] = b >= 0 ? gc_uf_find(j->parent, b) : -1;
				}
		}
	}
	tree_state_free(&ts);
	if (j->stop)
		return gc_fail(j->st, GC_ECANCEL, "canceled");
	return GC_OK;
}
