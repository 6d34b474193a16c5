/*
 * hdbscan_tree.c — HDBSCAN's phase 3 on the CPU: from the minimum spanning
 * tree's edges, sorted by (w, a, b), to the single-linkage tree, the
 * condensed tree, the stabilities, the selection of the flat clusters and
 * each row's label, membership probability and GLOSH outlier score.
 *
 * The semantics are scikit-learn 1.9.1's (sklearn/cluster/_hdbscan/
 * _tree.pyx and _linkage.pyx), with every floating-point formula computed
 * with the same operations in the same order, so that stabilities,
 * probabilities, infinities and NaNs come out as scikit-learn's:
 *
 *  - single linkage: edge i makes node n + i, joining the current cluster
 *    of a (left) and that of b (right) at distance w;
 *  - condensing (_condense_tree): the single-linkage nodes are visited
 *    breadth first from the root; a node whose two sides both have at
 *    least min_cluster_size rows splits its cluster in two new clusters,
 *    numbered in the order of the visit; a smaller side falls out of the
 *    cluster, its rows listed breadth first with lambda = 1 / w (+inf at
 *    w = 0).  Only the nodes that still carry a cluster are visited, and
 *    each side that falls out is walked once, so this is O(n) where
 *    scikit-learn re-walks subtrees; the rows come out in scikit-learn's
 *    order (a breadth-first walk restricted to a subtree that contains the
 *    root, or to the subtree of one node, visits its nodes in the order
 *    the whole walk does), and the stabilities are summed in that order;
 *  - stability: the sum over a cluster's rows of (lambda - its birth
 *    lambda) * the row's size;
 *  - excess of mass: a cluster is kept when the sum of its two children's
 *    stabilities is not greater than its own (the root only with
 *    allow_single_cluster), and selected when kept with no kept ancestor;
 *  - leaf: the clusters with no children; none (no split) selects none;
 *  - cluster_selection_epsilon (epsilon_search, traverse_upwards): a
 *    selected cluster born at a distance 1 / lambda below epsilon is
 *    replaced by its lowest ancestor born at a distance above epsilon, or
 *    the child of the root it lies under (the root with
 *    allow_single_cluster).  scikit-learn 1.9.1 raises a TypeError when
 *    that climb passes a parent other than the root; this does what its
 *    code means: the parent's distance is 1 / the lambda of its own row;
 *  - labelling (_do_labelling): a row takes its nearest selected cluster
 *    above it; a row under none is noise, except when allow_single_cluster
 *    selected exactly the root: then it joins it when its lambda reaches
 *    1 / epsilon (epsilon > 0) or the largest lambda of the root's own
 *    rows;
 *  - probability (get_probabilities): min(lambda, max) / max with max the
 *    largest lambda of the rows of the row's selected cluster (its direct
 *    children), 1 when max is 0 or lambda is infinite, 0 for noise
 *    (scikit-learn's max_lambdas keeps the largest of the last run of a
 *    cluster's rows, which come from its deepest single-linkage node and
 *    so hold its largest lambda);
 *  - GLOSH (the hdbscan package's outlier_scores): (lambda_max - lambda) /
 *    lambda_max with lambda_max the largest lambda of any row in the whole
 *    subtree of the cluster the row leaves, 0 when lambda_max is 0 or
 *    lambda is infinite; where lambda_max is infinite and lambda is not,
 *    1 (the limit, which the formula would make NaN).
 *
 * The flat clusters are numbered 0, 1, ... by their lowest input position
 * (not scikit-learn's numbering).  A selected cluster that no row joins
 * (the root, selected by epsilon beside a cluster under it) has no
 * number: the tree's selected[] holds GC_NOISE for it and clusters does
 * not count it.
 *
 * The work: the single-linkage tree by a union-find by size over the
 * rows (sequential, in the edges' order); the condensed tree's skeleton
 * breadth first, which places every row of the tree and sums the
 * stabilities; the sides of several rows that fall out walked on the
 * team, each into its own places; then the selection over the clusters
 * and one pass over the rows.  Everything is iterative (a chain of 10M
 * rows is a tree 10M deep), O(n) time but for the near-linear
 * union-find, O(n) memory (about 90 bytes a row, 120 with the tree).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>

#include "hdbscan/hdbscan.h"

/* How often the loops poll for a cancel: every 2^20 items. */
#define HD_POLL_MASK ((INT64_C(1) << 20) - 1)

/*
 * How many items ahead the loops over random places prefetch: the
 * union-find entries of the edges to come, the single-linkage nodes of
 * the queue.
 */
#define HD_AHEAD 16

/* Single-linkage node n + i: the sides it joins at distance w, its rows. */
typedef struct hd_node
{
	int64_t		left,
				right,
				size;
	double		w;
} hd_node;

/* A row's union-find entry; at a root, the set's node and rows. */
typedef struct hd_set
{
	int64_t		parent,
				node,
				size;
} hd_set;

/* A single-linkage node that carries cluster c, waiting in the queue. */
typedef struct hd_visit
{
	int64_t		x,
				c;
} hd_visit;

/*
 * A side of more than one row falling out of cluster c at lambda: its
 * rows are listed from the tree's row `row` on, breadth first.
 */
typedef struct hd_fall
{
	int64_t		s,
				c,
				row;
	double		lambda;
} hd_fall;

/* Where an input row leaves the condensed tree: cluster c at lambda. */
typedef struct hd_leave
{
	int64_t		c;
	double		lambda;
} hd_leave;

/* The state of one call; cluster c is condensed-tree node n + c. */
typedef struct hd_tree
{
	const gc_ctx *ctx;
	int64_t		n;
	int64_t		mcs;			/* min_cluster_size */
	const gc_mst_edge *edges;

	hd_node    *node;			/* the single-linkage tree, n - 1 */
	void	   *scratch;		/* union-find entries, then the queue */

	/* the condensed tree's clusters (at most kmax) */
	int64_t		nclu,
				kmax;
	int64_t    *cparent;		/* the parent cluster (-1 for the root) */
	int64_t    *cchild;			/* the first of its two children, or -1 */
	double	   *birth;			/* the lambda of its own row (root: 0) */
	double	   *stab;			/* the stability, then EOM's subtree sum */
	double	   *death;			/* the largest lambda of its direct rows */

	hd_leave   *leave;			/* per input row */
	hd_fall    *fall;			/* the sides of several rows that fall */
	int64_t		nfall,
				maxfall;		/* the most rows of one */

	/* the condensed tree's rows, when the caller wants them */
	gc_hdbscan_tree_row *rows;
	int64_t		nrows;

	int64_t		work;			/* items done since the last poll */
} hd_tree;

/* Counts one item; true (cancelled) at most every 2^20 items. */
static inline bool
hd_poll(hd_tree *t)
{
	return (++t->work & HD_POLL_MASK) == 0 && gc_cancelled(t->ctx);
}

static void
hd_free(hd_tree *t)
{
	free(t->node);
	free(t->scratch);
	free(t->cparent);
	free(t->cchild);
	free(t->birth);
	free(t->stab);
	free(t->death);
	free(t->leave);
	free(t->fall);
	free(t->rows);
}

/* The rows under single-linkage node x (a row: 1). */
static inline int64_t
hd_count(const hd_tree *t, int64_t x)
{
	return x >= t->n ? t->node[x - t->n].size : 1;
}

/* scikit-learn's lambda of a merge at distance w. */
static inline double
hd_lambda(double w)
{
	return w > 0.0 ? 1.0 / w : INFINITY;
}

/* The root of x's set, halving the path. */
static inline int64_t
hd_find(hd_set *set, int64_t x)
{
	while (set[x].parent != x)
	{
		set[x].parent = set[set[x].parent].parent;
		x = set[x].parent;
	}
	return x;
}

/* Prefetches the union-find entries of edge e's rows (when in range). */
static inline void
hd_prefetch_sets(const hd_set *set, int64_t n, const gc_mst_edge *e)
{
	if (e->a >= 0 && e->a < n && e->b >= 0 && e->b < n)
	{
		__builtin_prefetch(&set[e->a]);
		__builtin_prefetch(&set[e->b]);
	}
}

/*
 * The single-linkage tree (make_single_linkage): edge i joins the current
 * clusters of a and b as node n + i.  A union-find by size over the rows
 * keeps, at each root, the node its set is now and its rows.
 */
static gc_code
hd_single_linkage(hd_tree *t, gc_status *st)
{
	int64_t		n = t->n;
	hd_set	   *set = t->scratch;
	const gc_mst_edge *e = t->edges;

	for (int64_t i = 0; i < n; i++)
		set[i] = (hd_set) {i, i, 1};
	for (int64_t i = 0; i < n - 1; i++)
	{
		int64_t		ra,
					rb,
					big,
					small;

		if (i + HD_AHEAD < n - 1)
			hd_prefetch_sets(set, n, &e[i + HD_AHEAD]);
		if (e[i].a < 0 || e[i].a >= n || e[i].b < 0 || e[i].b >= n)
			return gc_fail(st, GC_EINVAL, "HDBSCAN's edge %lld joins a row outside 0 .. %lld",
						   (long long) i, (long long) n - 1);
		ra = hd_find(set, e[i].a);
		rb = hd_find(set, e[i].b);
		if (ra == rb)
			return gc_fail(st, GC_EINVAL, "HDBSCAN's edges do not form a spanning tree (edge %lld closes a cycle)",
						   (long long) i);
		t->node[i] = (hd_node) {set[ra].node, set[rb].node,
		set[ra].size + set[rb].size, e[i].w};
		big = set[ra].size >= set[rb].size ? ra : rb;
		small = big == ra ? rb : ra;
		set[small].parent = big;
		set[big].size = t->node[i].size;
		set[big].node = n + i;
		if (hd_poll(t))
			return gc_fail(st, GC_ECANCEL, "canceled");
	}
	return GC_OK;
}

/*
 * Row bookkeeping of the condensed tree, in the rows' order: cluster c's
 * stability (_compute_stability's sum, row by row) and largest lambda for
 * count rows of size each at lambda.
 */
static inline void
hd_account(hd_tree *t, int64_t c, double lambda, int64_t size, int64_t count)
{
	for (int64_t k = 0; k < count; k++)
		t->stab[c] += (lambda - t->birth[c]) * (double) size;
	if (lambda > t->death[c])
		t->death[c] = lambda;
}

static inline void
hd_put_row(hd_tree *t, int64_t at, int64_t c, int64_t child, double lambda,
		   int64_t size)
{
	if (t->rows != NULL)
		t->rows[at] = (gc_hdbscan_tree_row) {t->n + c, child, lambda, size};
}

/* A new cluster, child of c, born at lambda with size rows. */
static int64_t
hd_new_cluster(hd_tree *t, int64_t c, double lambda, int64_t size)
{
	int64_t		k = t->nclu++;

	t->cparent[k] = c;
	t->cchild[k] = -1;
	t->birth[k] = lambda;
	t->stab[k] = 0.0;
	t->death[k] = 0.0;
	hd_account(t, c, lambda, size, 1);
	hd_put_row(t, t->nrows++, c, t->n + k, lambda, size);
	return k;
}

/*
 * Side s (count rows) falls out of cluster c at lambda: its rows take
 * the next count places; a single row is placed now, larger sides are
 * listed for hd_walk_falls.
 */
static void
hd_fall_out(hd_tree *t, int64_t s, int64_t count, int64_t c, double lambda)
{
	hd_account(t, c, lambda, 1, count);
	if (s < t->n)
	{
		t->leave[s] = (hd_leave) {c, lambda};
		hd_put_row(t, t->nrows, c, s, lambda, 1);
	}
	else
	{
		t->fall[t->nfall++] = (hd_fall) {s, c, t->nrows, lambda};
		if (count > t->maxfall)
			t->maxfall = count;
	}
	t->nrows += count;
}

/* Prefetches the single-linkage node of x and, when ready, its sides'. */
static inline void
hd_prefetch_visit(const hd_tree *t, int64_t x, bool sides)
{
	const hd_node *nd = &t->node[x - t->n];

	__builtin_prefetch(nd);
	if (sides)
	{
		if (nd->left >= t->n)
			__builtin_prefetch(&t->node[nd->left - t->n]);
		if (nd->right >= t->n)
			__builtin_prefetch(&t->node[nd->right - t->n]);
	}
}

/*
 * The condensed tree (_condense_tree), first its skeleton: the
 * single-linkage nodes that carry a cluster, breadth first from the root
 * (the queue in scratch), each splitting its cluster in two new ones or
 * letting one or both sides fall out.  The rows are counted and placed in
 * scikit-learn's order as they come; the sides of several rows that fall
 * are walked afterwards (hd_walk_falls), into their places.
 */
static gc_code
hd_condense(hd_tree *t, gc_status *st)
{
	int64_t		n = t->n,
				head = 0,
				tail = 0;
	hd_visit   *queue = t->scratch;

	t->nclu = 1;
	t->cparent[0] = -1;
	t->cchild[0] = -1;
	t->birth[0] = 0.0;
	t->stab[0] = 0.0;
	t->death[0] = 0.0;
	queue[tail++] = (hd_visit) {2 * n - 2, 0};
	while (head < tail)
	{
		hd_visit	v = queue[head++];
		const hd_node *nd = &t->node[v.x - n];
		int64_t		lc = hd_count(t, nd->left),
					rc = hd_count(t, nd->right);
		double		lambda = hd_lambda(nd->w);

		if (head + HD_AHEAD < tail)
			hd_prefetch_visit(t, queue[head + HD_AHEAD].x, false);
		if (head + HD_AHEAD / 2 < tail)
			hd_prefetch_visit(t, queue[head + HD_AHEAD / 2].x, true);
		if (lc >= t->mcs && rc >= t->mcs)
		{
			int64_t		kl = hd_new_cluster(t, v.c, lambda, lc);
			int64_t		kr = hd_new_cluster(t, v.c, lambda, rc);

			t->cchild[v.c] = kl;
			queue[tail++] = (hd_visit) {nd->left, kl};
			queue[tail++] = (hd_visit) {nd->right, kr};
		}
		else
		{
			if (lc < t->mcs)
				hd_fall_out(t, nd->left, lc, v.c, lambda);
			if (rc < t->mcs)
				hd_fall_out(t, nd->right, rc, v.c, lambda);
			if (lc >= t->mcs)
				queue[tail++] = (hd_visit) {nd->left, v.c};
			if (rc >= t->mcs)
				queue[tail++] = (hd_visit) {nd->right, v.c};
		}
		if (hd_poll(t))
			return gc_fail(st, GC_ECANCEL, "canceled");
	}
	return GC_OK;
}

/*
 * The rows of one falling side, breadth first (bfs_from_hierarchy) into
 * their places; queue has room for its internal nodes.  The caller's
 * thread polls every 2^20 nodes: true when cancelled.
 */
static bool
hd_walk_fall(const hd_tree *t, const hd_fall *f, int64_t *queue, bool caller)
{
	int64_t		n = t->n,
				head = 0,
				tail = 0,
				row = f->row;
	gc_hdbscan_tree_row *rows = t->rows;

	queue[tail++] = f->s;
	while (head < tail)
	{
		const hd_node *nd = &t->node[queue[head++] - n];
		int64_t		side[2] = {nd->left, nd->right};

		if (caller && (head & HD_POLL_MASK) == 0 && gc_cancelled(t->ctx))
			return true;
		if (head + HD_AHEAD / 4 < tail)
			__builtin_prefetch(&t->node[queue[head + HD_AHEAD / 4] - n]);
		for (int j = 0; j < 2; j++)
		{
			if (side[j] >= n)
				queue[tail++] = side[j];
			else
			{
				t->leave[side[j]] = (hd_leave) {f->c, f->lambda};
				if (rows != NULL)
					rows[row] = (gc_hdbscan_tree_row) {n + f->c, side[j], f->lambda, 1};
				row++;
			}
		}
	}
	return false;
}

/*
 * Every falling side of several rows, on the team: each writes its own
 * rows and places only, so the result does not depend on the threads.
 * Each thread's queue holds the internal nodes of the largest side.
 */
static gc_code
hd_walk_falls(hd_tree *t, gc_status *st)
{
	int			team = gc_team_adapt(t->ctx);
	int			stop = 0;
	int64_t		most = t->maxfall > 0 ? t->maxfall : 1;
	/* blocks of about 2^20 rows at most: the caller polls between them */
	int64_t		block = (HD_POLL_MASK + 1) / most > 4096 ? 4096 :
		(HD_POLL_MASK + 1) / most > 1 ? (HD_POLL_MASK + 1) / most : 1;

	/* the queues take n entries at most */
	if ((int64_t) team > t->n / most)
		team = (int) (t->n / most > 1 ? t->n / most : 1);
#pragma omp parallel num_threads(gc_region_threads(team, t->nfall))
	{
		int64_t    *queue = malloc(sizeof(int64_t) * (size_t) most);
		const bool	caller = omp_get_thread_num() == 0;

		if (queue == NULL)
			__atomic_store_n(&stop, 2, __ATOMIC_RELAXED);
#pragma omp for schedule(dynamic, 1)
		for (int64_t b = 0; b < (t->nfall + block - 1) / block; b++)
		{
			int64_t		f1 = (b + 1) * block < t->nfall ? (b + 1) * block : t->nfall;

			if (__atomic_load_n(&stop, __ATOMIC_RELAXED))
				continue;
			if (caller && gc_cancelled(t->ctx))
			{
				__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
				continue;
			}
			for (int64_t f = b * block; f < f1; f++)
			{
				if (f + HD_AHEAD < f1)
					__builtin_prefetch(&t->node[t->fall[f + HD_AHEAD].s - t->n]);
				if (hd_walk_fall(t, &t->fall[f], queue, caller))
				{
					__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
					break;
				}
			}
		}
		free(queue);
	}
	if (stop == 2)
		return gc_fail(st, GC_ENOMEM, "out of memory for HDBSCAN's condensed tree");
	if (stop == 1 || gc_cancelled(t->ctx))
		return gc_fail(st, GC_ECANCEL, "canceled");
	return GC_OK;
}

/*
 * Excess of mass (_get_clusters' 'eom'): the clusters from the highest
 * number down (children before parents, the numbering being breadth
 * first), each kept unless its children's stabilities sum to more than
 * its own, which then becomes its stability; the root takes part only
 * with allow_single_cluster.  A kept cluster unselects everything under
 * it, so the selected ones are those kept with no kept ancestor.
 */
static void
hd_select_eom(hd_tree *t, bool allow_single, uint8_t *sel)
{
	int64_t		k = t->nclu,
				last = allow_single ? 0 : 1;

	for (int64_t c = k - 1; c >= last; c--)
	{
		int64_t		ch = t->cchild[c];
		double		sub = ch < 0 ? 0.0 : t->stab[ch] + t->stab[ch + 1];

		sel[c] = !(sub > t->stab[c]);
		if (!sel[c])
			t->stab[c] = sub;
	}
	if (!allow_single)
		sel[0] = 0;
	/* sel[c] | 2: under a kept cluster; the root's parent is none */
	for (int64_t c = 1; c < k; c++)
		if (sel[t->cparent[c]] != 0)
			sel[c] |= 2;
	for (int64_t c = 0; c < k; c++)
		sel[c] = sel[c] == 1;
}

/* leaf: the clusters with no children (none when the root never splits). */
static void
hd_select_leaf(const hd_tree *t, uint8_t *sel)
{
	for (int64_t c = 0; c < t->nclu; c++)
		sel[c] = t->nclu > 1 && t->cchild[c] < 0;
}

/*
 * epsilon_search over the selected clusters: one born at a distance
 * 1 / birth below epsilon gives way to climb[c] (traverse_upwards from
 * c): its lowest ancestor other than the root born at a distance above
 * epsilon, else the child of the root it lies under, or the root with
 * allow_single_cluster.  climb[] is filled from the root down; the result
 * does not depend on the order scikit-learn visits the clusters in, since
 * every cluster under a climb's result climbs to it too.
 */
static void
hd_epsilon_search(const hd_tree *t, double epsilon, bool allow_single,
				  uint8_t *sel, int64_t *climb)
{
	int64_t		k = t->nclu;

	climb[0] = 0;
	for (int64_t c = 1; c < k; c++)
	{
		int64_t		p = t->cparent[c];

		if (p == 0)
			climb[c] = allow_single ? 0 : c;
		else
			climb[c] = 1.0 / t->birth[p] > epsilon ? p : climb[p];
	}
	/* sel[c] | 2: selected by the search */
	for (int64_t c = 1; c < k; c++)
		if (sel[c] & 1)
			sel[1.0 / t->birth[c] < epsilon ? climb[c] : c] |= 2;
	for (int64_t c = 0; c < k; c++)
		sel[c] = (sel[c] & 2) != 0;
}

/*
 * The flat selection of p's method, epsilon and allow_single_cluster into
 * sel (climb: scratch of nclu).
 */
static void
hd_select(hd_tree *t, const gc_hdbscan_params *p, uint8_t *sel,
		  int64_t *climb)
{
	if (p->method == GC_HDBSCAN_LEAF)
		hd_select_leaf(t, sel);
	else
		hd_select_eom(t, p->allow_single_cluster, sel);
	/*
	 * epsilon: not without a split, nor when EOM selected the root (then
	 * alone)
	 */
	if (p->epsilon != 0.0 && t->nclu > 1 && !sel[0])
		hd_epsilon_search(t, p->epsilon, p->allow_single_cluster, sel, climb);
}

/* get_probabilities: a row at lambda in a cluster whose rows reach mx. */
static inline double
hd_probability(double mx, double lambda)
{
	if (mx == 0.0 || isinf(lambda))
		return 1.0;
	return (lambda < mx ? lambda : mx) / mx;
}

/* GLOSH: a row at lambda leaving a cluster whose subtree reaches lmax. */
static inline double
hd_glosh(double lmax, double lambda)
{
	if (lmax == 0.0 || !isfinite(lambda))
		return 0.0;
	if (isinf(lmax))
		return 1.0;
	return (lmax - lambda) / lmax;
}

/*
 * Each row's label, probability and outlier score from the selection sel
 * (_do_labelling, get_probabilities, GLOSH); flat[c] receives cluster c's
 * flat number or GC_NOISE.  top and lmax: scratch of nclu.
 */
static gc_code
hd_label(hd_tree *t, const gc_hdbscan_params *p, const uint8_t *sel,
		 int64_t *top, double *lmax, int32_t *flat, gc_hdbscan_result *res,
		 gc_status *st)
{
	int64_t		k = t->nclu,
				nsel = 0;
	int32_t		nflat = 0;
	bool		single_root;
	double		threshold;

	/* top[c]: the nearest selected cluster at or above c, else the root */
	top[0] = 0;
	for (int64_t c = 1; c < k; c++)
		top[c] = sel[c] ? c : top[t->cparent[c]];
	for (int64_t c = 0; c < k; c++)
	{
		nsel += sel[c];
		flat[c] = GC_NOISE;
	}
	/* the root selected alone with allow_single_cluster takes rows by lambda */
	single_root = p->allow_single_cluster && nsel == 1 && sel[0];
	threshold = p->epsilon != 0.0 ? 1.0 / p->epsilon : t->death[0];
	/* lmax[c]: the largest lambda in c's subtree, children before parents */
	memcpy(lmax, t->death, sizeof(double) * (size_t) k);
	for (int64_t c = k - 1; c >= 1; c--)
		if (lmax[c] > lmax[t->cparent[c]])
			lmax[t->cparent[c]] = lmax[c];

	for (int64_t i = 0; i < t->n; i++)
	{
		int64_t		c = t->leave[i].c,
					cl = top[c];
		double		lambda = t->leave[i].lambda;

		if (cl == 0 && !(single_root && lambda >= threshold))
		{
			res->labels[i] = GC_NOISE;
			res->probability[i] = 0.0;
		}
		else
		{
			if (flat[cl] == GC_NOISE)
				flat[cl] = nflat++;
			res->labels[i] = flat[cl];
			res->probability[i] = hd_probability(t->death[cl], lambda);
		}
		res->outlier[i] = hd_glosh(lmax[c], lambda);
		if (hd_poll(t))
			return gc_fail(st, GC_ECANCEL, "canceled");
	}
	res->clusters = nflat;
	return GC_OK;
}

/* The arrays of one call: the single-linkage tree, clusters, rows. */
static gc_code
hd_alloc(hd_tree *t, bool want_rows, gc_status *st)
{
	size_t		n = (size_t) t->n,
				k = (size_t) t->kmax;

	t->node = malloc(sizeof(hd_node) * (n - 1));
	/* the union-find entries, then the queue: at most n - 1 visits */
	t->scratch = malloc(sizeof(hd_set) * n);
	t->cparent = malloc(sizeof(int64_t) * k);
	t->cchild = malloc(sizeof(int64_t) * k);
	t->birth = malloc(sizeof(double) * k);
	t->stab = malloc(sizeof(double) * k);
	t->death = malloc(sizeof(double) * k);
	t->leave = malloc(sizeof(hd_leave) * n);
	/* a side of several rows has two at least */
	t->fall = malloc(sizeof(hd_fall) * (n / 2 + 1));
	if (want_rows)
		t->rows = malloc(sizeof(gc_hdbscan_tree_row) * (n + k));
	if (t->node == NULL || t->scratch == NULL || t->cparent == NULL ||
		t->cchild == NULL || t->birth == NULL || t->stab == NULL ||
		t->death == NULL || t->leave == NULL || t->fall == NULL ||
		(want_rows && t->rows == NULL))
		return gc_fail(st, GC_ENOMEM, "out of memory for HDBSCAN's tree (%lld rows)",
					   (long long) t->n);
	return GC_OK;
}

/* One row alone: noise, and a tree with no rows. */
static gc_code
hd_one_row(gc_hdbscan_result *res)
{
	res->labels[0] = GC_NOISE;
	res->probability[0] = 0.0;
	res->outlier[0] = 0.0;
	res->clusters = 0;
	return GC_OK;
}

gc_code
gc_hdbscan_from_mst(const gc_ctx *ctx, int64_t n, const gc_mst_edge *edges,
					const gc_hdbscan_params *p, gc_hdbscan_result *res,
					gc_status *st)
{
	hd_tree		t;
	uint8_t    *sel = NULL;
	int64_t    *climb = NULL;
	double	   *lmax = NULL;
	int32_t    *flat = NULL;
	gc_code		rc;

	res->clusters = 0;
	if (res->tree != NULL)
		memset(res->tree, 0, sizeof(*res->tree));
	if (p->min_cluster_size < 2)
		return gc_fail(st, GC_EINVAL, "min_cluster_size must be at least 2");
	if (p->method != GC_HDBSCAN_EOM && p->method != GC_HDBSCAN_LEAF)
		return gc_fail(st, GC_EINVAL, "unknown cluster_selection_method");
	if (!(p->epsilon >= 0.0) || isinf(p->epsilon))
		return gc_fail(st, GC_EINVAL, "cluster_selection_epsilon must be finite and at least 0");
	if (n <= 0)
		return GC_OK;
	if (n == 1)
		return hd_one_row(res);

	memset(&t, 0, sizeof(t));
	t.ctx = ctx;
	t.n = n;
	t.mcs = p->min_cluster_size;
	t.edges = edges;
	/* at most n / mcs leaves of a binary tree */
	t.kmax = 2 * (n / t.mcs) + 1;
	if ((rc = hd_alloc(&t, res->tree != NULL, st)) != GC_OK ||
		(rc = hd_single_linkage(&t, st)) != GC_OK ||
		(rc = hd_condense(&t, st)) != GC_OK ||
		(rc = hd_walk_falls(&t, st)) != GC_OK)
		goto done;
	/* the single-linkage tree is done with */
	free(t.node);
	free(t.scratch);
	free(t.fall);
	t.node = NULL;
	t.scratch = NULL;
	t.fall = NULL;

	sel = malloc((size_t) t.nclu);
	climb = malloc(sizeof(int64_t) * (size_t) t.nclu);
	lmax = malloc(sizeof(double) * (size_t) t.nclu);
	flat = malloc(sizeof(int32_t) * (size_t) t.nclu);
	if (sel == NULL || climb == NULL || lmax == NULL || flat == NULL)
	{
		rc = gc_fail(st, GC_ENOMEM, "out of memory for HDBSCAN's clusters");
		goto done;
	}
	hd_select(&t, p, sel, climb);
	if ((rc = hd_label(&t, p, sel, climb, lmax, flat, res, st)) != GC_OK)
		goto done;
	if (res->tree != NULL)
	{
		gc_hdbscan_tree_row *fit = realloc(t.rows, sizeof(gc_hdbscan_tree_row) * (size_t) t.nrows);

		res->tree->rows = fit != NULL ? fit : t.rows;
		res->tree->nrows = t.nrows;
		res->tree->selected = flat;
		res->tree->nclusters = t.nclu;
		t.rows = NULL;
		flat = NULL;
	}
done:
	if (rc != GC_OK)
		res->clusters = 0;
	hd_free(&t);
	free(sel);
	free(climb);
	free(lmax);
	free(flat);
	return rc;
}

void
gc_hdbscan_tree_free(gc_hdbscan_tree *t)
{
	if (t == NULL)
		return;
	free(t->rows);
	free(t->selected);
	t->rows = NULL;
	t->selected = NULL;
	t->nrows = t->nclusters = 0;
}
