/*
 * hdbscan/hdbscan.h — HDBSCAN's public interface (Campello, Moulavi and
 * Sander; scikit-learn's sklearn.cluster.HDBSCAN is the reference): the
 * call (gc_hdbscan_cpu), its phases as separate entries (core distances,
 * the minimum spanning tree, the tree and the flat clusters), its device
 * choice.
 *
 * The pipeline, each phase exact:
 *   1. core distances: core[i] = the distance from row i to its
 *      min_samples-th nearest row, the row itself counted (so min_samples 1
 *      gives 0), as scikit-learn's NearestNeighbors.kneighbors on the
 *      training set;
 *   2. the minimum spanning tree of the mutual-reachability graph,
 *      w(i, j) = max(core[i], core[j], dist(i, j) / alpha), found by
 *      Borůvka's algorithm over a kd-tree without forming the n² graph;
 *   3. the single-linkage tree from the MST's edges in ascending order,
 *      the condensed tree (clusters of at least min_cluster_size rows),
 *      the stabilities, and the selection (excess of mass or leaf, with
 *      cluster_selection_epsilon and allow_single_cluster), then each
 *      row's label, membership probability and GLOSH outlier score.
 *
 * Distances are double: dist(i, j) = sqrt(gc_dist2_f64(x_i, x_j)) for
 * the Euclidean metric (the sum of squared differences of the float32
 * features widened to double, in dimension order, every operation rounded
 * on its own: scikit-learn's Euclidean rdist and its root, bit for bit),
 * and gc_dist2_f64(u_i, u_j) / 2 on the unit rows for the cosine metric
 * (metric.h's cosine).  Both devices compute each weight with the same
 * operations, so they agree bit for bit.
 *
 * Ties.  Where equal weights make the MST not unique, edges are ordered by
 * (w, a, b), a < b the two rows' input positions: Borůvka takes, for each
 * component, its least outgoing edge in that order, so the tree is the
 * unique minimum spanning tree under the order, on every device and with
 * any thread count; the single-linkage tree merges the edges in that order.
 *
 * Memory: O(n) on both devices (the rows, the index, a few arrays of n).
 */
#ifndef GPUCLUST_HDBSCAN_H
#define GPUCLUST_HDBSCAN_H

#include "common/core.h"
#include "common/metric.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How the flat clusters are chosen from the condensed tree. */
typedef enum gc_hdbscan_method
{
	GC_HDBSCAN_EOM = 0,			/* excess of mass */
	GC_HDBSCAN_LEAF				/* the leaves of the condensed tree */
} gc_hdbscan_method;

/* "eom" | "leaf" (case-insensitive); false for any other name or NULL. */
bool		gc_parse_hdbscan_method(const char *s, gc_hdbscan_method *out);
const char *gc_hdbscan_method_name(gc_hdbscan_method method);

typedef struct gc_hdbscan_params
{
	int64_t		min_cluster_size;	/* >= 2 */
	int64_t		min_samples;	/* 1 .. n, the row itself counted */
	double		epsilon;		/* cluster_selection_epsilon: >= 0, finite */
	gc_hdbscan_method method;
	bool		allow_single_cluster;
	double		alpha;			/* >= GC_HDBSCAN_MIN_ALPHA, finite */
	gc_metric	metric;			/* euclidean or cosine */
} gc_hdbscan_params;

/*
 * The smallest alpha: float32 rows are at most about 1e39 sqrt(d) apart,
 * so every weight dist / alpha stays finite.
 */
#define GC_HDBSCAN_MIN_ALPHA 1e-200

/* One edge of the minimum spanning tree: rows a < b (input positions). */
typedef struct gc_mst_edge
{
	int64_t		a,
				b;
	double		w;				/* the mutual-reachability distance */
} gc_mst_edge;

/*
 * Node n + i of the single-linkage tree (scikit-learn's
 * single_linkage_tree_ row i): edge i of the spanning tree in (w, a, b)
 * order joins, at distance w, the current cluster of its a (left) and that
 * of its b (right), each a row (below n) or an earlier node, of lsize and
 * rsize rows.  The size of an edge, so the GPU's job returns either.
 */
typedef struct gc_linkage_node
{
	uint32_t	left,
				right;
	int32_t		lsize,
				rsize;
	double		w;
} gc_linkage_node;

/*
 * The clusters of the condensed tree as phase 3 numbers them: 0 the root,
 * the two children of a split numbered together, after every cluster of
 * the splits above (the order a pass over the single-linkage nodes from
 * the root meets the splits in); arrays of n.
 */
typedef struct gc_hdbscan_clusters
{
	int64_t		n;
	int64_t    *parent;			/* the parent cluster (-1 for the root) */
	int64_t    *child;			/* the first of its two children, or -1 */
	double	   *birth;			/* the lambda of its own row (root: 0) */
	double	   *stab;			/* the stability, then EOM's subtree sum */
	double	   *death;			/* the largest lambda of its direct rows */
} gc_hdbscan_clusters;

/* Where a row leaves the condensed tree: cluster c, at lambda. */
typedef struct gc_hdbscan_place
{
	int32_t		c;
	double		lambda;
} gc_hdbscan_place;

/*
 * What each row's label needs from the flat selection (gc_hdbscan_select):
 * per cluster its nearest selected cluster at or above it (else the root,
 * 0) and the largest lambda in its subtree; whether the root was selected
 * alone under allow_single_cluster, then taking the rows whose lambda
 * reaches threshold.
 */
typedef struct gc_hdbscan_selection
{
	int64_t    *top;
	double	   *lmax;
	bool		single_root;
	double		threshold;
} gc_hdbscan_selection;

/*
 * One row of the condensed tree.  Nodes are numbered as scikit-learn's
 * condensed_tree_ numbers them: 0 .. n-1 the rows (input positions), n the
 * root cluster, then the clusters in the order the tree is walked from the
 * root breadth first.  child_size is 1 for a row.  lambda = 1 / the
 * distance at which the child leaves the parent (+inf at distance 0).
 */
typedef struct gc_hdbscan_tree_row
{
	int64_t		parent,
				child;
	double		lambda;
	int64_t		child_size;
} gc_hdbscan_tree_row;

/* The condensed tree of a call (rows malloc'ed by the core). */
typedef struct gc_hdbscan_tree
{
	gc_hdbscan_tree_row *rows;
	int64_t		nrows;			/* at most 2n - 1 */
	/*
	 * selected[c - n] for cluster node c: the flat cluster (0, 1, ...) it
	 * was selected as, or GC_NOISE (nclusters = the cluster nodes)
	 */
	int32_t    *selected;
	int64_t		nclusters;
} gc_hdbscan_tree;

void		gc_hdbscan_tree_free(gc_hdbscan_tree *t);

/*
 * What one HDBSCAN call returns; arrays of n, caller-allocated.  labels:
 * the flat clusters 0, 1, 2 ... numbered by their lowest input position,
 * or GC_NOISE.  probability: scikit-learn's probabilities_ (the row's
 * lambda in its cluster, capped at the cluster's largest, over that
 * largest; 0 for noise).  outlier: the GLOSH score (Campello et al. 2015):
 * (lambda_max - lambda) / lambda_max, lambda the row's lambda when it
 * leaves the tree and lambda_max the largest lambda of any row of the
 * cluster it leaves, over that cluster's whole subtree; 0 where
 * lambda_max is 0 or lambda is infinite, 1 where lambda_max is infinite
 * (duplicates below) and lambda finite (the formula's limit, never NaN).
 * tree, when not NULL, receives
 * the condensed tree (free it with gc_hdbscan_tree_free).
 */
typedef struct gc_hdbscan_result
{
	int32_t    *labels;
	double	   *probability;
	double	   *outlier;
	int32_t		clusters;		/* out: the flat clusters */
	gc_hdbscan_tree *tree;		/* NULL: not wanted */
} gc_hdbscan_result;

/*
 * HDBSCAN on the CPU (hdbscan.c).  GC_EINVAL for a bad parameter (messages
 * name it: min_cluster_size < 2, min_samples outside 1 .. n, epsilon,
 * alpha, metric, a zero row under cosine), GC_ENOMEM, GC_ECANCEL.  n = 0
 * returns at once; n = 1 gives one noise row (probability 0, outlier 0).
 */
gc_code		gc_hdbscan_cpu(const gc_ctx *ctx, const float *X, int64_t n,
						   int d, const gc_hdbscan_params *p,
						   gc_hdbscan_result *res, gc_status *st);

/*
 * The minimum spanning tree alone (gpu_minimum_spanning_tree): the n - 1
 * edges of the mutual-reachability MST with p's min_samples, alpha and
 * metric (min_cluster_size and the selection are not used), sorted by
 * (w, a, b).  core (n, may be NULL) receives the core distances.
 */
gc_code		gc_hdbscan_mst_cpu(const gc_ctx *ctx, const float *X, int64_t n,
							   int d, const gc_hdbscan_params *p,
							   double *core, gc_mst_edge *edges,
							   gc_status *st);

/*
 * The checks every HDBSCAN entry makes first (both devices, the MST
 * alone: mst_only skips min_cluster_size and the selection's).
 */
gc_code		gc_hdbscan_check(const gc_ctx *ctx, const float *X, int64_t n,
							 int d, const gc_hdbscan_params *p, bool mst_only,
							 gc_status *st);

/* ---- the phases, for the tests and the GPU's driver ---- */

/*
 * Phase 1 on the CPU: core[i] as above, on the rows R as given (the unit
 * rows under cosine); metric only maps the squared distance to the
 * distance (sqrt, or / 2).
 */
gc_code		gc_hdbscan_core_cpu(const gc_ctx *ctx, const float *R, int64_t n,
								int d, int64_t min_samples, gc_metric metric,
								double *core, gc_status *st);

/* Phase 2 on the CPU: the MST of R given core, edges sorted by (w, a, b). */
gc_code		gc_hdbscan_mst_edges_cpu(const gc_ctx *ctx, const float *R,
									 int64_t n, int d, double alpha,
									 gc_metric metric, const double *core,
									 gc_mst_edge *edges, gc_status *st);

/*
 * Phase 3 (hdbscan_tree.c): from the n - 1 edges sorted by (w, a, b) to
 * res (labels, probability, outlier, clusters, tree), in two steps: the
 * single-linkage tree (gc_hdbscan_linkage: a union-find over the edges in
 * order, near-linear; on the GPU, gc_hdbscan_linkage_gpu), then the
 * condensed tree and the rest (gc_hdbscan_from_linkage: walks of the
 * trees, linear).  O(n) memory.  n <= GC_HDBSCAN_TREE_MAX_N.
 */
gc_code		gc_hdbscan_from_mst(const gc_ctx *ctx, int64_t n,
								const gc_mst_edge *edges,
								const gc_hdbscan_params *p,
								gc_hdbscan_result *res, gc_status *st);
gc_code		gc_hdbscan_linkage(const gc_ctx *ctx, int64_t n,
							   const gc_mst_edge *edges,
							   gc_linkage_node *nodes, gc_status *st);
gc_code		gc_hdbscan_from_linkage(const gc_ctx *ctx, int64_t n,
									const gc_linkage_node *nodes,
									const gc_hdbscan_params *p,
									gc_hdbscan_result *res, gc_status *st);

/*
 * Phase 3's steps after the condensed tree, which the GPU's run shares:
 * the flat selection of p's method, epsilon and allow_single_cluster into
 * sel (top and lmax of cl->n each; cl->stab becomes EOM's subtree sums),
 * and the flat numbers 0, 1, ... of the clusters some row joined, in the
 * order of their lowest rows (first[c], n for none), into flat (GC_NOISE
 * for the others), returning how many (scratch: cl->n).
 */
gc_code		gc_hdbscan_select(gc_hdbscan_clusters *cl,
							  const gc_hdbscan_params *p,
							  gc_hdbscan_selection *sel, gc_status *st);
int32_t		gc_hdbscan_flat(int64_t nclu, const int64_t *first, int64_t n,
							int32_t *flat, int64_t *scratch);

/*
 * The condensed tree of the single-linkage nodes at min_cluster_size mcs
 * on the CPU (hdbscan_tree.c's pass from the root): its clusters (arrays
 * malloc'ed here: gc_hdbscan_clusters_free) and each row's place (leave,
 * n); what the GPU's condensing is tested against.
 */
gc_code		gc_hdbscan_condense(const gc_ctx *ctx, int64_t n,
								const gc_linkage_node *nodes, int64_t mcs,
								gc_hdbscan_clusters *out,
								gc_hdbscan_place *leave, gc_status *st);
void		gc_hdbscan_clusters_free(gc_hdbscan_clusters *cl);

/* scikit-learn's lambda of a merge at distance w. */
GC_HD double
gc_hdbscan_lambda(double w)
{
	return w > 0.0 ? 1.0 / w : INFINITY;
}

/* get_probabilities: a row at lambda in a cluster whose rows reach mx. */
GC_HD double
gc_hdbscan_probability(double mx, double lambda)
{
	if (mx == 0.0 || isinf(lambda))
		return 1.0;
	return (lambda < mx ? lambda : mx) / mx;
}

/* GLOSH: a row at lambda leaving a cluster whose subtree reaches lmax. */
GC_HD double
gc_hdbscan_glosh(double lmax, double lambda)
{
	if (lmax == 0.0 || !isfinite(lambda))
		return 0.0;
	if (isinf(lmax))
		return 1.0;
	return (lmax - lambda) / lmax;
}

/*
 * A row's label (the provisional number of its selected cluster, or
 * GC_NOISE), membership probability and outlier score from its place pl
 * and the selection (_do_labelling, get_probabilities, GLOSH), on either
 * device; death: the clusters' largest direct lambdas.
 */
GC_HD void
gc_hdbscan_row(gc_hdbscan_place pl, const int64_t *top, const double *death,
			   const double *lmax, bool single_root, double threshold,
			   int32_t *label, double *probability, double *outlier)
{
	const int64_t cl = top[pl.c];

	if (cl == 0 && !(single_root && pl.lambda >= threshold))
	{
		*label = GC_NOISE;
		*probability = 0.0;
	}
	else
	{
		*label = (int32_t) cl;
		*probability = gc_hdbscan_probability(death[cl], pl.lambda);
	}
	*outlier = gc_hdbscan_glosh(lmax[pl.c], pl.lambda);
}

/*
 * Phases 1 and 2 and the single-linkage tree (what phase 3 goes on from):
 * nodes (n - 1) as gc_hdbscan_linkage's of gc_hdbscan_mst_cpu's edges, on
 * the CPU, or (gc_hdbscan_linkage_on_gpu) all on the GPU, bit for bit the
 * same.  gc_hdbscan_cpu's checks.
 */
gc_code		gc_hdbscan_linkage_cpu(const gc_ctx *ctx, const float *X,
								   int64_t n, int d,
								   const gc_hdbscan_params *p,
								   gc_linkage_node *nodes, gc_status *st);

/* The weight of a pair from its squared distance s (gc_dist2_f64). */
GC_HD double
gc_hdbscan_dist(gc_metric metric, double s)
{
	return metric == GC_METRIC_COSINE ? s / 2.0 : sqrt(s);
}

/* ---- device choice (common/dispatch.c) ---- */

/*
 * Under 'auto' HDBSCAN runs on the GPU from GC_HDBSCAN_GPU_MIN_ROWS rows
 * when CUDA already runs in the process (the GPU worker's always does),
 * from the _COLD count when the call would start it.
 */
#define GC_HDBSCAN_GPU_MIN_ROWS 20000
#define GC_HDBSCAN_GPU_MIN_ROWS_COLD 200000

/*
 * The device of one HDBSCAN call (or MST) on n rows of d features, as
 * gc_choose_device_kdistance's rule: CPU: always.  GPU: the GPU when one
 * is usable, n <= GC_HDBSCAN_GPU_MAX_N and gc_hdbscan_gpu_mem_bytes(n, d,
 * min_samples) fits the memory a call may use, else GC_EDEVICE or
 * GC_ENOMEM with the reason.  AUTO: the CPU below the crossover or
 * without a usable GPU; the CPU with a note when the GPU's memory is too
 * small; else the GPU.
 */
gc_code		gc_choose_device_hdbscan(gc_device requested, int64_t n, int d,
									 int64_t min_samples, const gc_gpu *gpu,
									 gc_device *chosen, char *note,
									 size_t note_len, gc_status *st);

/* The most rows the GPU's HDBSCAN takes (int32 positions). */
#define GC_HDBSCAN_GPU_MAX_N (INT32_MAX - 1)

/*
 * The most rows phase 3 takes on either device (hdbscan_tree.c's 32-bit
 * entries: single-linkage nodes below 2^32); gc_hdbscan_check refuses more
 * unless the call is the spanning tree alone.
 */
#define GC_HDBSCAN_TREE_MAX_N (INT32_MAX - 1)

#ifdef __cplusplus
}
#endif

#endif							/* GPUCLUST_HDBSCAN_H */
