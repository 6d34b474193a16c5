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
 *    w = 0).  The result is computed in another order (below) and equals
 *    this walk's, rows, numbers and sums;
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
 * The work, O(n) but for the near-linear union-find, O(n) memory (about
 * 60 bytes a row, 125 with the tree), everything iterative (a chain of
 * 10M rows is a tree 10M deep):
 *
 *  - the single-linkage tree (gc_hdbscan_linkage) by a union-find by size
 *    over the rows, sequential in the edges' order, the two finds of an
 *    edge in step; the GPU builds the same nodes itself
 *    (cuda/hdbscan/hdbscan_linkage.cu), and the rest
 *    (gc_hdbscan_from_linkage) goes on from them;
 *  - the condensed tree in one pass over the single-linkage nodes from
 *    the root down in index order (a parent's index is above its
 *    children's), each node handing its place to its two sides: the
 *    cluster it carries, or the cluster and lambda its rows fell out at.
 *    A cluster's rows all come from the nodes of one path down the tree
 *    (where a node does not split its cluster, at most one side carries
 *    it on), so this order adds them to its stability in the order the
 *    breadth-first walk does; the clusters get provisional numbers, each
 *    after its parent and beside its sibling, which is all the selection
 *    and the labelling need;
 *  - when the tree is wanted, the breadth-first order: the nodes that
 *    carry a cluster sorted by (depth, preorder position), which is the
 *    order a breadth-first walk visits them in, by two counting sorts;
 *    from it scikit-learn's cluster numbers and each node's place among
 *    the rows, which the team then writes, a side that falls walked
 *    breadth first;
 *  - the selection over the clusters (gc_hdbscan_select), then the
 *    labels, probabilities and outlier scores of the rows on the team
 *    (gc_hdbscan_row), each cluster's lowest row on the team, and the flat
 *    numbers in the order of those rows (gc_hdbscan_flat).  The GPU's run
 *    (cuda/hdbscan/hdbscan_condense.cu) condenses the tree and labels the
 *    rows itself with the same definitions, the selection made here; it
 *    numbers the clusters on the device in the same order (by lowest row,
 *    then cluster).
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
 * union-find entries of the edges to come, the places the condensing
 * pass writes.
 */
#define HD_AHEAD 16

/* A place's lambda while its node still carries the cluster. */
#define HD_CARRIED (-1.0)

/*
 * A row (below n) or single-linkage node n + i: below 2^32 with n at most
 * GC_HDBSCAN_TREE_MAX_N.  Rows, sizes and clusters fit int32_t.  The
 * compact entries keep the random reads of the sequential passes in fewer
 * cache lines.
 */
typedef uint32_t hd_id;

/* A row's union-find entry; at a root, the set's node and rows. */
typedef struct hd_set
{
	int32_t		parent;
	hd_id		node;
	int32_t		size;
} hd_set;

/*
 * Where a single-linkage node or a row sits in the condensed tree
 * (gc_hdbscan_place): in cluster c, which it carries (lambda HD_CARRIED)
 * or which its rows left at lambda.
 */
typedef gc_hdbscan_place hd_place;

/*
 * A carrying node's breadth-first key, its depth and its position in the
 * preorder of the single-linkage nodes (below n - 1), and the
 * condensed-tree rows it writes (a split: -2).
 */
typedef struct hd_bfs
{
	int32_t		depth;
	uint32_t	pre;
	int32_t		rows;
} hd_bfs;

/* A carrying node in the breadth-first sort (node -1: an empty slot). */
typedef struct hd_key
{
	int32_t		node,
				depth,
				rows;
} hd_key;

/* The state of one call; cluster c is condensed-tree node n + c. */
typedef struct hd_tree
{
	const gc_ctx *ctx;
	int64_t		n;
	int64_t		mcs;			/* min_cluster_size */
	const gc_linkage_node *node;	/* the single-linkage tree, n - 1 */
	hd_place   *place;			/* each node's, n - 1 */
	bool		lent_place;		/* place is the caller's room */
	hd_place   *leave;			/* each row's */

	/* the condensed tree's clusters (at most kmax), provisional numbers */
	gc_hdbscan_clusters cl;
	int64_t		kmax;

	/* when the tree is wanted */
	hd_bfs	   *bfs;			/* each carrying node's, n - 1 */
	int64_t		maxdepth,
				maxfall;		/* the most rows of a side of several */
	int64_t    *number;			/* scikit-learn's number of each cluster */
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
	if (!t->lent_place)
		free(t->place);
	free(t->leave);
	free(t->cl.parent);
	free(t->cl.child);
	free(t->cl.birth);
	free(t->cl.stab);
	free(t->cl.death);
	free(t->bfs);
	free(t->number);
	free(t->rows);
}

/* ---- the single-linkage tree ---- */

/* The root of x's set, halving the path. */
static inline int32_t
hd_find(hd_set *set, int32_t x)
{
	while (set[x].parent != x)
	{
		set[x].parent = set[set[x].parent].parent;
		x = set[x].parent;
	}
	return x;
}

/*
 * The roots of a's and b's sets, both paths halved in step so that the
 * loads of the two are in flight together.  (Where the paths meet, each
 * step still points an entry at one of its ancestors.)
 */
static inline void
hd_find2(hd_set *set, int32_t a, int32_t b, int32_t *ra, int32_t *rb)
{
	for (;;)
	{
		int32_t		pa = set[a].parent,
					pb = set[b].parent;

		if (pa == a || pb == b)
			break;
		set[a].parent = set[pa].parent;
		set[b].parent = set[pb].parent;
		a = set[a].parent;
		b = set[b].parent;
	}
	*ra = hd_find(set, a);
	*rb = hd_find(set, b);
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
hd_single_linkage(const gc_ctx *ctx, int64_t n, const gc_mst_edge *e,
				  hd_set *set, gc_linkage_node *node, gc_status *st)
{
	for (int64_t i = 0; i < n; i++)
		set[i] = (hd_set) {(int32_t) i, (hd_id) i, 1};
	for (int64_t i = 0; i < n - 1; i++)
	{
		int32_t		ra,
					rb,
					big,
					small;

		if (i + HD_AHEAD < n - 1)
			hd_prefetch_sets(set, n, &e[i + HD_AHEAD]);
		if (e[i].a < 0 || e[i].a >= n || e[i].b < 0 || e[i].b >= n)
			return gc_fail(st, GC_EINVAL, "HDBSCAN's edge %lld joins a row outside 0 .. %lld",
						   (long long) i, (long long) n - 1);
		hd_find2(set, (int32_t) e[i].a, (int32_t) e[i].b, &ra, &rb);
		if (ra == rb)
			return gc_fail(st, GC_EINVAL, "HDBSCAN's edges do not form a spanning tree (edge %lld closes a cycle)",
						   (long long) i);
		node[i] = (gc_linkage_node) {set[ra].node, set[rb].node,
		set[ra].size, set[rb].size, e[i].w};
		big = set[ra].size >= set[rb].size ? ra : rb;
		small = big == ra ? rb : ra;
		set[small].parent = big;
		set[big].size = set[ra].size + set[rb].size;
		set[big].node = (hd_id) (n + i);
		if ((i & HD_POLL_MASK) == HD_POLL_MASK && gc_cancelled(ctx))
			return gc_fail(st, GC_ECANCEL, "canceled");
	}
	return GC_OK;
}

/* ---- the condensed tree ---- */

/*
 * Cluster c's bookkeeping for count rows of size each leaving it at
 * lambda, in the rows' order: its stability (_compute_stability's sum,
 * row by row) and its largest lambda.
 */
static inline void
hd_account(hd_tree *t, int64_t c, double lambda, int64_t size, int64_t count)
{
	for (int64_t k = 0; k < count; k++)
		t->cl.stab[c] += (lambda - t->cl.birth[c]) * (double) size;
	if (lambda > t->cl.death[c])
		t->cl.death[c] = lambda;
}

/* A new cluster, child of c, born at lambda with size rows. */
static int32_t
hd_new_cluster(hd_tree *t, int64_t c, double lambda, int64_t size)
{
	int32_t		k = (int32_t) t->cl.n++;

	t->cl.parent[k] = c;
	t->cl.child[k] = -1;
	t->cl.birth[k] = lambda;
	t->cl.stab[k] = 0.0;
	t->cl.death[k] = 0.0;
	hd_account(t, c, lambda, size, 1);
	return k;
}

/* Hands single-linkage node or row x its place. */
static inline void
hd_hand(hd_tree *t, int64_t x, int32_t c, double lambda)
{
	if (x < t->n)
		t->leave[x] = (hd_place) {c, lambda};
	else
		t->place[x - t->n] = (hd_place) {c, lambda};
}

/* Prefetches, for writing, the places node i will hand its sides. */
static inline void
hd_prefetch_hand(const hd_tree *t, int64_t i)
{
	const gc_linkage_node *nd = &t->node[i];
	int64_t		side[2] = {nd->left, nd->right};

	for (int j = 0; j < 2; j++)
		__builtin_prefetch(side[j] < t->n ? (const void *) &t->leave[side[j]]
						   : (const void *) &t->place[side[j] - t->n], 1);
}

/*
 * Node i carries cluster c: it splits c in two new clusters, or lets its
 * smaller sides fall out (left first), the other carrying c on.  With the
 * tree wanted, a carried side's breadth-first key from node i's.
 */
static void
hd_carry(hd_tree *t, int64_t i, int32_t c)
{
	const gc_linkage_node *nd = &t->node[i];
	int64_t		side[2] = {nd->left, nd->right},
				size[2] = {nd->lsize, nd->rsize};
	double		lambda = gc_hdbscan_lambda(nd->w);
	bool		split = size[0] >= t->mcs && size[1] >= t->mcs;

	if (split)
		t->cl.child[c] = t->cl.n;
	if (t->bfs != NULL)
		t->bfs[i].rows = split ? -2 : (size[0] < t->mcs ? size[0] : 0) +
			(size[1] < t->mcs ? size[1] : 0);
	for (int j = 0; j < 2; j++)
	{
		if (split)
			hd_hand(t, side[j], hd_new_cluster(t, c, lambda, size[j]), HD_CARRIED);
		else if (size[j] >= t->mcs)
			hd_hand(t, side[j], c, HD_CARRIED);
		else
		{
			hd_account(t, c, lambda, 1, size[j]);
			hd_hand(t, side[j], c, lambda);
			if (size[j] > t->maxfall)
				t->maxfall = size[j];
		}
		if (t->bfs != NULL && size[j] >= t->mcs)
		{
			hd_bfs		b = t->bfs[i];

			/* the left side's subtree holds lsize - 1 nodes */
			t->bfs[side[j] - t->n] = (hd_bfs) {b.depth + 1,
			b.pre + 1 + (uint32_t) (j == 0 ? 0 : size[0] - 1), 0};
			if (b.depth + 1 > t->maxdepth)
				t->maxdepth = b.depth + 1;
		}
	}
}

/*
 * The condensed tree (_condense_tree) in one pass from the root down, in
 * index order: a node that carries a cluster splits it or lets sides fall
 * (hd_carry); a node whose rows fell hands the same place to its sides.
 * Every row ends with the cluster it leaves and the lambda it leaves at.
 */
static gc_code
hd_condense(hd_tree *t, gc_status *st)
{
	int64_t		n = t->n;

	t->cl.n = 1;
	t->cl.parent[0] = -1;
	t->cl.child[0] = -1;
	t->cl.birth[0] = 0.0;
	t->cl.stab[0] = 0.0;
	t->cl.death[0] = 0.0;
	t->place[n - 2] = (hd_place) {0, HD_CARRIED};
	if (t->bfs != NULL)
		t->bfs[n - 2] = (hd_bfs) {0, 0, 0};
	for (int64_t i = n - 2; i >= 0; i--)
	{
		hd_place	pl = t->place[i];

		if (i >= HD_AHEAD)
			hd_prefetch_hand(t, i - HD_AHEAD);
		if (pl.lambda == HD_CARRIED)
			hd_carry(t, i, pl.c);
		else
		{
			hd_hand(t, t->node[i].left, pl.c, pl.lambda);
			hd_hand(t, t->node[i].right, pl.c, pl.lambda);
		}
		if (hd_poll(t))
			return gc_fail(st, GC_ECANCEL, "canceled");
	}
	return GC_OK;
}

/* ---- the selection ---- */

/*
 * Excess of mass (_get_clusters' 'eom'): the clusters from the highest
 * number down (children before parents), each kept unless its children's
 * stabilities sum to more than its own, which then becomes its stability;
 * the root takes part only with allow_single_cluster.  A kept cluster
 * unselects everything under it, so the selected ones are those kept with
 * no kept ancestor.
 */
static void
hd_select_eom(gc_hdbscan_clusters *cl, bool allow_single, uint8_t *sel)
{
	int64_t		k = cl->n,
				last = allow_single ? 0 : 1;

	for (int64_t c = k - 1; c >= last; c--)
	{
		int64_t		ch = cl->child[c];
		double		sub = ch < 0 ? 0.0 : cl->stab[ch] + cl->stab[ch + 1];

		sel[c] = !(sub > cl->stab[c]);
		if (!sel[c])
			cl->stab[c] = sub;
	}
	if (!allow_single)
		sel[0] = 0;
	/* sel[c] | 2: under a kept cluster; the root's parent is none */
	for (int64_t c = 1; c < k; c++)
		if (sel[cl->parent[c]] != 0)
			sel[c] |= 2;
	for (int64_t c = 0; c < k; c++)
		sel[c] = sel[c] == 1;
}

/* leaf: the clusters with no children (none when the root never splits). */
static void
hd_select_leaf(const gc_hdbscan_clusters *cl, uint8_t *sel)
{
	for (int64_t c = 0; c < cl->n; c++)
		sel[c] = cl->n > 1 && cl->child[c] < 0;
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
hd_epsilon_search(const gc_hdbscan_clusters *cl, double epsilon,
				  bool allow_single, uint8_t *sel, int64_t *climb)
{
	int64_t		k = cl->n;

	climb[0] = 0;
	for (int64_t c = 1; c < k; c++)
	{
		int64_t		p = cl->parent[c];

		if (p == 0)
			climb[c] = allow_single ? 0 : c;
		else
			climb[c] = 1.0 / cl->birth[p] > epsilon ? p : climb[p];
	}
	/* sel[c] | 2: selected by the search */
	for (int64_t c = 1; c < k; c++)
		if (sel[c] & 1)
			sel[1.0 / cl->birth[c] < epsilon ? climb[c] : c] |= 2;
	for (int64_t c = 0; c < k; c++)
		sel[c] = (sel[c] & 2) != 0;
}

gc_code
gc_hdbscan_select(gc_hdbscan_clusters *cl, const gc_hdbscan_params *p,
				  gc_hdbscan_selection *out, gc_status *st)
{
	int64_t		k = cl->n,
				nsel = 0;
	uint8_t    *sel = malloc((size_t) k);
	int64_t    *top = out->top;
	double	   *lmax = out->lmax;

	if (sel == NULL)
		return gc_fail(st, GC_ENOMEM, "out of memory for HDBSCAN's clusters");
	/* the flat selection of p's method (top: the epsilon search's scratch) */
	if (p->method == GC_HDBSCAN_LEAF)
		hd_select_leaf(cl, sel);
	else
		hd_select_eom(cl, p->allow_single_cluster, sel);
	/*
	 * epsilon: not without a split, nor when EOM selected the root (then
	 * alone)
	 */
	if (p->epsilon != 0.0 && k > 1 && !sel[0])
		hd_epsilon_search(cl, p->epsilon, p->allow_single_cluster, sel, top);

	/* top[c]: the nearest selected cluster at or above c, else the root */
	top[0] = 0;
	for (int64_t c = 1; c < k; c++)
		top[c] = sel[c] ? c : top[cl->parent[c]];
	for (int64_t c = 0; c < k; c++)
		nsel += sel[c];
	/* the root selected alone with allow_single_cluster takes rows by lambda */
	out->single_root = p->allow_single_cluster && nsel == 1 && sel[0];
	out->threshold = p->epsilon != 0.0 ? 1.0 / p->epsilon : cl->death[0];
	/* lmax[c]: the largest lambda in c's subtree, children before parents */
	memcpy(lmax, cl->death, sizeof(double) * (size_t) k);
	for (int64_t c = k - 1; c >= 1; c--)
		if (lmax[c] > lmax[cl->parent[c]])
			lmax[cl->parent[c]] = lmax[c];
	free(sel);
	return GC_OK;
}

int32_t
gc_hdbscan_flat(int64_t nclu, const int64_t *first, int64_t n, int32_t *flat,
				int64_t *scratch)
{
	int64_t		nflat = 0;

	/* rows and clusters are below 2^31: (first row, cluster) in one key */
	for (int64_t c = 0; c < nclu; c++)
	{
		flat[c] = GC_NOISE;
		if (first[c] < n)
			scratch[nflat++] = first[c] << 32 | c;
	}
	qsort(scratch, (size_t) nflat, sizeof(int64_t), gc_cmp_int64);
	for (int64_t j = 0; j < nflat; j++)
		flat[scratch[j] & 0xffffffffu] = (int32_t) j;
	return (int32_t) nflat;
}

/* ---- the rows' results ---- */

/* What the rows' labelling reads and writes. */
typedef struct hd_labelling
{
	const gc_hdbscan_selection *sel;
	int64_t    *first;			/* each cluster's lowest row (n: none) */
	const int32_t *flat;		/* each cluster's flat number */
	gc_hdbscan_result *res;
} hd_labelling;

/*
 * Rows [i0, i1): the label as the provisional number of the row's
 * selected cluster (or GC_NOISE), the probability, the outlier score.
 */
static void
hd_label_rows(const hd_tree *t, hd_labelling *lb, int64_t i0, int64_t i1)
{
	const gc_hdbscan_selection *sel = lb->sel;
	gc_hdbscan_result *res = lb->res;

	for (int64_t i = i0; i < i1; i++)
		gc_hdbscan_row(t->leave[i], sel->top, t->cl.death, sel->lmax,
					   sel->single_root, sel->threshold, &res->labels[i],
					   &res->probability[i], &res->outlier[i]);
}

/* Rows [i0, i1): each labelled row lowers its cluster's first row. */
static void
hd_first_rows(const hd_tree *t, hd_labelling *lb, int64_t i0, int64_t i1)
{
	(void) t;
	for (int64_t i = i0; i < i1; i++)
	{
		int32_t		cl = lb->res->labels[i];
		int64_t		seen;

		if (cl == GC_NOISE)
			continue;
		seen = __atomic_load_n(&lb->first[cl], __ATOMIC_RELAXED);
		while (i < seen &&
			   !__atomic_compare_exchange_n(&lb->first[cl], &seen, i, false,
											__ATOMIC_RELAXED, __ATOMIC_RELAXED))
			;
	}
}

/* Rows [i0, i1): the flat number in place of the provisional one. */
static void
hd_flat_rows(const hd_tree *t, hd_labelling *lb, int64_t i0, int64_t i1)
{
	(void) t;
	for (int64_t i = i0; i < i1; i++)
		if (lb->res->labels[i] != GC_NOISE)
			lb->res->labels[i] = lb->flat[lb->res->labels[i]];
}

/*
 * fn over every row on the team, in blocks of 2^20 rows, the caller's
 * thread polling for a cancel between its blocks.  The results do not
 * depend on the team.
 */
static gc_code
hd_team_rows(hd_tree *t, hd_labelling *lb,
			 void (*fn) (const hd_tree *, hd_labelling *, int64_t, int64_t),
			 gc_status *st)
{
	int64_t		block = HD_POLL_MASK + 1,
				nb = (t->n + block - 1) / block;
	int			stop = 0;

#pragma omp parallel for num_threads(gc_region_threads(gc_team_adapt(t->ctx), nb)) schedule(dynamic, 1)
	for (int64_t b = 0; b < nb; b++)
	{
		if (__atomic_load_n(&stop, __ATOMIC_RELAXED))
			continue;
		if (omp_get_thread_num() == 0 && gc_cancelled(t->ctx))
			__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
		else
			fn(t, lb, b * block, (b + 1) * block < t->n ? (b + 1) * block : t->n);
	}
	if (stop || gc_cancelled(t->ctx))
		return gc_fail(st, GC_ECANCEL, "canceled");
	return GC_OK;
}

/*
 * Each row's label, probability and outlier score from the selection
 * (gc_hdbscan_row) on the team; then flat[c] receives cluster c's flat
 * number (gc_hdbscan_flat), and the labels take them.  first: scratch of
 * nclu; key: of nclu.
 */
static gc_code
hd_label(hd_tree *t, const gc_hdbscan_selection *sel, int64_t *first,
		 int32_t *flat, int64_t *key, gc_hdbscan_result *res, gc_status *st)
{
	hd_labelling lb = {.sel = sel, .first = first, .flat = flat, .res = res};
	gc_code		rc;

	for (int64_t c = 0; c < t->cl.n; c++)
		first[c] = t->n;
	if ((rc = hd_team_rows(t, &lb, hd_label_rows, st)) != GC_OK ||
		(rc = hd_team_rows(t, &lb, hd_first_rows, st)) != GC_OK)
		return rc;
	res->clusters = gc_hdbscan_flat(t->cl.n, first, t->n, flat, key);
	return hd_team_rows(t, &lb, hd_flat_rows, st);
}

/* ---- the condensed tree's rows, when wanted ---- */

/*
 * The nodes that carry a cluster in breadth-first order into order[]
 * (returns how many): within a depth a breadth-first walk meets the nodes
 * in preorder, so a scatter by the preorder positions (distinct, below
 * n - 1) then a stable counting sort by depth.  slot: scratch of n - 1,
 * count: of maxdepth + 2.
 */
static int64_t
hd_bfs_order(const hd_tree *t, hd_key *slot, int64_t *count, hd_key *order)
{
	int64_t		n = t->n,
				m = 0;

	for (int64_t s = 0; s < n - 1; s++)
		slot[s].node = -1;
	memset(count, 0, sizeof(int64_t) * (size_t) (t->maxdepth + 2));
	for (int64_t i = 0; i < n - 1; i++)
		if (t->place[i].lambda == HD_CARRIED)
		{
			hd_bfs		b = t->bfs[i];

			slot[b.pre] = (hd_key) {(int32_t) i, b.depth, b.rows};
			count[b.depth + 1]++;
		}
	for (int64_t d = 1; d <= t->maxdepth + 1; d++)
		count[d] += count[d - 1];
	for (int64_t s = 0; s < n - 1; s++)
		if (slot[s].node >= 0)
		{
			order[count[slot[s].depth]++] = slot[s];
			m++;
		}
	return m;
}

/*
 * The rows of side s falling out of cluster number c at lambda, breadth
 * first (bfs_from_hierarchy), from place row on; queue has room for its
 * internal nodes.  Returns the next place.
 */
static int64_t
hd_fall_rows(const hd_tree *t, int64_t s, int64_t c, double lambda,
			 int64_t row, int64_t *queue)
{
	int64_t		n = t->n,
				head = 0,
				tail = 0;

	if (s < n)
	{
		t->rows[row] = (gc_hdbscan_tree_row) {n + c, s, lambda, 1};
		return row + 1;
	}
	queue[tail++] = s;
	while (head < tail)
	{
		const gc_linkage_node *nd = &t->node[queue[head++] - n];
		int64_t		side[2] = {nd->left, nd->right};

		for (int j = 0; j < 2; j++)
		{
			if (side[j] >= n)
				queue[tail++] = side[j];
			else
				t->rows[row++] = (gc_hdbscan_tree_row) {n + c, side[j], lambda, 1};
		}
	}
	return row;
}

/* The rows carrying node i writes from place row on. */
static void
hd_node_rows(const hd_tree *t, int64_t i, int64_t row, int64_t *queue)
{
	const gc_linkage_node *nd = &t->node[i];
	int64_t		side[2] = {nd->left, nd->right},
				size[2] = {nd->lsize, nd->rsize},
				c = t->number[t->place[i].c];
	double		lambda = gc_hdbscan_lambda(nd->w);
	bool		split = size[0] >= t->mcs && size[1] >= t->mcs;

	for (int j = 0; j < 2; j++)
	{
		if (split)
			t->rows[row++] = (gc_hdbscan_tree_row) {t->n + c,
				t->n + t->number[t->place[side[j] - t->n].c], lambda, size[j]};
		else if (size[j] < t->mcs)
			row = hd_fall_rows(t, side[j], c, lambda, row, queue);
	}
}

/*
 * The condensed tree's rows in scikit-learn's order and its cluster
 * numbers: the carrying nodes in breadth-first order number the clusters
 * of their splits and take their places among the rows (at[j], the count
 * before them), then the team writes each node's rows.
 */
static gc_code
hd_tree_rows(hd_tree *t, gc_status *st)
{
	int64_t		n = t->n,
				m,
				next = 1;
	int			team = gc_team_adapt(t->ctx);
	hd_key	   *slot = gc_malloc_touched(sizeof(hd_key) * (size_t) (n - 1), team),
			   *order = gc_malloc_touched(sizeof(hd_key) * (size_t) (n - 1), team);
	int64_t    *count = malloc(sizeof(int64_t) * (size_t) (t->maxdepth + 2)),
			   *at;
	int			stop = 0;
	int64_t		most = t->maxfall > 1 ? t->maxfall : 1;

	t->number = malloc(sizeof(int64_t) * (size_t) t->cl.n);
	t->rows = gc_malloc_touched(sizeof(gc_hdbscan_tree_row) * (size_t) (n + t->cl.n), team);
	if (slot == NULL || count == NULL || order == NULL || t->number == NULL ||
		t->rows == NULL)
	{
		free(slot);
		free(count);
		free(order);
		return gc_fail(st, GC_ENOMEM, "out of memory for HDBSCAN's condensed tree (%lld rows)",
					   (long long) n);
	}
	m = hd_bfs_order(t, slot, count, order);
	free(count);
	/* each node's place among the rows, in the slots' room (12 bytes each) */
	at = (int64_t *) slot;
	t->number[0] = 0;
	t->nrows = 0;
	for (int64_t j = 0; j < m; j++)
	{
		at[j] = t->nrows;
		if (order[j].rows < 0)
		{
			const gc_linkage_node *nd = &t->node[order[j].node];

			t->number[t->place[nd->left - n].c] = next++;
			t->number[t->place[nd->right - n].c] = next++;
		}
		t->nrows += order[j].rows < 0 ? 2 : order[j].rows;
	}

	/* each thread's queue holds a falling side's internal nodes */
#pragma omp parallel num_threads(gc_region_threads(team, m / 4096 + 1))
	{
		int64_t    *queue = malloc(sizeof(int64_t) * (size_t) most);

		if (queue == NULL)
			__atomic_store_n(&stop, 2, __ATOMIC_RELAXED);
#pragma omp for schedule(dynamic, 4096)
		for (int64_t j = 0; j < m; j++)
		{
			if (__atomic_load_n(&stop, __ATOMIC_RELAXED))
				continue;
			if ((j & 4095) == 0 && omp_get_thread_num() == 0 && gc_cancelled(t->ctx))
				__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
			else
				hd_node_rows(t, order[j].node, at[j], queue);
		}
		free(queue);
	}
	free(slot);
	free(order);
	if (stop == 2)
		return gc_fail(st, GC_ENOMEM, "out of memory for HDBSCAN's condensed tree");
	if (stop == 1 || gc_cancelled(t->ctx))
		return gc_fail(st, GC_ECANCEL, "canceled");
	return GC_OK;
}

/* ---- the call ---- */

/*
 * The arrays of one call: the places, the clusters; the large ones touched
 * on the team (gc_malloc_touched).
 */
static gc_code
hd_alloc(hd_tree *t, bool want_tree, gc_status *st)
{
	size_t		n = (size_t) t->n,
				k = (size_t) t->kmax;
	int			team = gc_team_adapt(t->ctx);

	if (t->place == NULL)
		t->place = gc_malloc_touched(sizeof(hd_place) * (n - 1), team);
	t->leave = gc_malloc_touched(sizeof(hd_place) * n, team);
	t->cl.parent = malloc(sizeof(int64_t) * k);
	t->cl.child = malloc(sizeof(int64_t) * k);
	t->cl.birth = malloc(sizeof(double) * k);
	t->cl.stab = malloc(sizeof(double) * k);
	t->cl.death = malloc(sizeof(double) * k);
	if (want_tree)
		t->bfs = gc_malloc_touched(sizeof(hd_bfs) * (n - 1), team);
	if (t->place == NULL || t->leave == NULL ||
		t->cl.parent == NULL || t->cl.child == NULL || t->cl.birth == NULL ||
		t->cl.stab == NULL || t->cl.death == NULL || (want_tree && t->bfs == NULL))
		return gc_fail(st, GC_ENOMEM, "out of memory for HDBSCAN's tree (%lld rows)",
					   (long long) t->n);
	return GC_OK;
}

/*
 * t set up for n >= 2 rows of the single-linkage nodes at min_cluster_size
 * mcs, its arrays allocated (the places in room when given, n - 1 of them),
 * and the condensed tree built (hd_condense).
 */
static gc_code
hd_build(hd_tree *t, const gc_ctx *ctx, int64_t n, int64_t mcs,
		 const gc_linkage_node *nodes, bool want_tree, hd_place *room,
		 gc_status *st)
{
	gc_code		rc;

	memset(t, 0, sizeof(*t));
	t->ctx = ctx;
	t->n = n;
	t->mcs = mcs;
	t->node = nodes;
	t->place = room;
	t->lent_place = room != NULL;
	/* at most n / mcs leaves of a binary tree */
	t->kmax = 2 * (n / mcs) + 1;
	if ((rc = hd_alloc(t, want_tree, st)) != GC_OK)
		return rc;
	return hd_condense(t, st);
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

/* The tree for the caller: its rows, and selected[] by cluster number. */
static void
hd_give_tree(hd_tree *t, const int32_t *flat, int32_t *selected,
			 gc_hdbscan_tree *out)
{
	gc_hdbscan_tree_row *fit = realloc(t->rows, sizeof(gc_hdbscan_tree_row) * (size_t) t->nrows);

	for (int64_t c = 0; c < t->cl.n; c++)
		selected[t->number[c]] = flat[c];
	out->rows = fit != NULL ? fit : t->rows;
	out->nrows = t->nrows;
	out->selected = selected;
	out->nclusters = t->cl.n;
	t->rows = NULL;
}

/* The checks of phase 3's parameters and row count, the result cleared. */
static gc_code
hd_check(int64_t n, const gc_hdbscan_params *p, gc_hdbscan_result *res,
		 gc_status *st)
{
	res->clusters = 0;
	if (res->tree != NULL)
		memset(res->tree, 0, sizeof(*res->tree));
	if (p->min_cluster_size < 2)
		return gc_fail(st, GC_EINVAL, "min_cluster_size must be at least 2");
	if (p->method != GC_HDBSCAN_EOM && p->method != GC_HDBSCAN_LEAF)
		return gc_fail(st, GC_EINVAL, "unknown cluster_selection_method");
	if (!(p->epsilon >= 0.0) || isinf(p->epsilon))
		return gc_fail(st, GC_EINVAL, "cluster_selection_epsilon must be finite and at least 0");
	if (n > GC_HDBSCAN_TREE_MAX_N)
		return gc_fail(st, GC_EINVAL, "HDBSCAN takes at most %lld rows, got %lld",
					   (long long) GC_HDBSCAN_TREE_MAX_N, (long long) n);
	return GC_OK;
}

gc_code
gc_hdbscan_linkage(const gc_ctx *ctx, int64_t n, const gc_mst_edge *edges,
				   gc_linkage_node *nodes, gc_status *st)
{
	hd_set	   *set;
	gc_code		rc;

	if (n > GC_HDBSCAN_TREE_MAX_N)
		return gc_fail(st, GC_EINVAL, "HDBSCAN takes at most %lld rows, got %lld",
					   (long long) GC_HDBSCAN_TREE_MAX_N, (long long) n);
	if (n <= 1)
		return GC_OK;
	set = gc_malloc_touched(sizeof(hd_set) * (size_t) n, gc_team_adapt(ctx));
	if (set == NULL)
		return gc_fail(st, GC_ENOMEM, "out of memory for HDBSCAN's single-linkage tree (%lld rows)",
					   (long long) n);
	rc = hd_single_linkage(ctx, n, edges, set, nodes, st);
	free(set);
	return rc;
}

static gc_code hd_from_linkage(const gc_ctx *ctx, int64_t n,
								const gc_linkage_node *nodes,
								const gc_hdbscan_params *p,
								gc_hdbscan_result *res, hd_place *room,
								gc_status *st);

gc_code
gc_hdbscan_from_mst(const gc_ctx *ctx, int64_t n, const gc_mst_edge *edges,
					const gc_hdbscan_params *p, gc_hdbscan_result *res,
					gc_status *st)
{
	size_t		sets,
				places;
	int			team = gc_team_adapt(ctx);
	gc_linkage_node *nodes;
	void	   *room;
	gc_code		rc;

	if ((rc = hd_check(n, p, res, st)) != GC_OK)
		return rc;
	if (n <= 1)
		return gc_hdbscan_from_linkage(ctx, n, NULL, p, res, st);
	/* the union-find's entries, then in their room the nodes' places */
	sets = sizeof(hd_set) * (size_t) n;
	places = sizeof(hd_place) * (size_t) (n - 1);
	nodes = gc_malloc_touched(sizeof(gc_linkage_node) * (size_t) (n - 1), team);
	room = gc_malloc_touched(sets > places ? sets : places, team);
	if (nodes == NULL || room == NULL)
		rc = gc_fail(st, GC_ENOMEM, "out of memory for HDBSCAN's single-linkage tree (%lld rows)",
					 (long long) n);
	else if ((rc = hd_single_linkage(ctx, n, edges, room, nodes, st)) == GC_OK)
		rc = hd_from_linkage(ctx, n, nodes, p, res, room, st);
	free(nodes);
	free(room);
	return rc;
}

gc_code
gc_hdbscan_from_linkage(const gc_ctx *ctx, int64_t n,
						const gc_linkage_node *nodes,
						const gc_hdbscan_params *p, gc_hdbscan_result *res,
						gc_status *st)
{
	int64_t		bad = INT64_MAX;

	/* the pass indexes by the children: each a row or an earlier node */
#pragma omp parallel for num_threads(gc_region_threads(gc_team_adapt(ctx), n / 65536 + 1)) reduction(min:bad)
	for (int64_t i = 0; i < n - 1; i++)
		if ((int64_t) nodes[i].left >= n + i || (int64_t) nodes[i].right >= n + i)
			bad = i < bad ? i : bad;
	if (bad != INT64_MAX)
		return gc_fail(st, GC_EINVAL, "HDBSCAN's single-linkage node %lld joins a later node",
					   (long long) bad);
	return hd_from_linkage(ctx, n, nodes, p, res, NULL, st);
}

/* gc_hdbscan_from_linkage, the places in room when given (n - 1). */
static gc_code
hd_from_linkage(const gc_ctx *ctx, int64_t n, const gc_linkage_node *nodes,
				const gc_hdbscan_params *p, gc_hdbscan_result *res,
				hd_place *room, gc_status *st)
{
	hd_tree		t;
	gc_hdbscan_selection sel = {0};
	int64_t    *first = NULL,
			   *key = NULL;
	int32_t    *flat = NULL,
			   *selected = NULL;
	gc_code		rc;

	if ((rc = hd_check(n, p, res, st)) != GC_OK || n <= 0)
		return rc;
	if (n == 1)
		return hd_one_row(res);

	if ((rc = hd_build(&t, ctx, n, p->min_cluster_size, nodes, res->tree != NULL,
					   room, st)) != GC_OK ||
		(res->tree != NULL && (rc = hd_tree_rows(&t, st)) != GC_OK))
		goto done;
	/* the single-linkage tree's places are done with */
	if (!t.lent_place)
		free(t.place);
	free(t.bfs);
	t.node = NULL;
	t.place = NULL;
	t.bfs = NULL;

	sel.top = malloc(sizeof(int64_t) * (size_t) t.cl.n);
	sel.lmax = malloc(sizeof(double) * (size_t) t.cl.n);
	first = malloc(sizeof(int64_t) * (size_t) t.cl.n);
	key = malloc(sizeof(int64_t) * (size_t) t.cl.n);
	flat = malloc(sizeof(int32_t) * (size_t) t.cl.n);
	if (res->tree != NULL)
		selected = malloc(sizeof(int32_t) * (size_t) t.cl.n);
	if (sel.top == NULL || sel.lmax == NULL || first == NULL || key == NULL ||
		flat == NULL || (res->tree != NULL && selected == NULL))
	{
		rc = gc_fail(st, GC_ENOMEM, "out of memory for HDBSCAN's clusters");
		goto done;
	}
	if ((rc = gc_hdbscan_select(&t.cl, p, &sel, st)) != GC_OK ||
		(rc = hd_label(&t, &sel, first, flat, key, res, st)) != GC_OK)
		goto done;
	if (res->tree != NULL)
	{
		hd_give_tree(&t, flat, selected, res->tree);
		selected = NULL;
	}
done:
	if (rc != GC_OK)
		res->clusters = 0;
	hd_free(&t);
	free(sel.top);
	free(sel.lmax);
	free(first);
	free(key);
	free(flat);
	free(selected);
	return rc;
}

gc_code
gc_hdbscan_condense(const gc_ctx *ctx, int64_t n, const gc_linkage_node *nodes,
					int64_t mcs, gc_hdbscan_clusters *out,
					gc_hdbscan_place *leave, gc_status *st)
{
	hd_tree		t;
	gc_code		rc;

	memset(out, 0, sizeof(*out));
	if (mcs < 2 || n < 2 || n > GC_HDBSCAN_TREE_MAX_N)
		return gc_fail(st, GC_EINVAL, "HDBSCAN's condensed tree of %lld rows, min_cluster_size %lld",
					   (long long) n, (long long) mcs);
	if ((rc = hd_build(&t, ctx, n, mcs, nodes, false, NULL, st)) == GC_OK)
	{
		memcpy(leave, t.leave, sizeof(gc_hdbscan_place) * (size_t) n);
		*out = t.cl;
		memset(&t.cl, 0, sizeof(t.cl));
	}
	hd_free(&t);
	return rc;
}

void
gc_hdbscan_clusters_free(gc_hdbscan_clusters *cl)
{
	free(cl->parent);
	free(cl->child);
	free(cl->birth);
	free(cl->stab);
	free(cl->death);
	memset(cl, 0, sizeof(*cl));
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
