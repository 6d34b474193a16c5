/*
 * hdbscan.c — HDBSCAN's driver (hdbscan.h): the checks, the rows of the
 * metric, phases 1 and 2 on the chosen device (hdbscan_core.c and
 * hdbscan_mst.c on the CPU, gc_hdbscan_mst_gpu on the GPU), then phase 3
 * (hdbscan_tree.c); on the GPU phase 3 runs there too but for the flat
 * selection (gc_hdbscan_gpu), or, for the condensed tree's rows, its first
 * step (gc_hdbscan_linkage_gpu), the rest on the CPU.
 */
#include <math.h>
#include <stdlib.h>
#include <strings.h>

#include "hdbscan/hdbscan_internal.h"
#include "common/gpu.h"

bool
gc_parse_hdbscan_method(const char *s, gc_hdbscan_method *out)
{
	if (s == NULL)
		return false;
	if (strcasecmp(s, "eom") == 0)
		*out = GC_HDBSCAN_EOM;
	else if (strcasecmp(s, "leaf") == 0)
		*out = GC_HDBSCAN_LEAF;
	else
		return false;
	return true;
}

const char *
gc_hdbscan_method_name(gc_hdbscan_method method)
{
	return method == GC_HDBSCAN_LEAF ? "leaf" : "eom";
}

static void
clear_status(gc_status *st)
{
	if (st != NULL)
	{
		st->code = GC_OK;
		st->message[0] = '\0';
	}
}

gc_code
gc_hdbscan_check(const gc_ctx *ctx, const float *X, int64_t n, int d,
				 const gc_hdbscan_params *p, bool mst_only, gc_status *st)
{
	clear_status(st);
	if (p == NULL)
		return gc_fail(st, GC_EINVAL, "HDBSCAN parameters missing");
	if (n < 0)
		return gc_fail(st, GC_EINVAL, "number of rows must not be negative");
	if (d < 1)
		return gc_fail(st, GC_EINVAL, "dimension must be at least 1, got %d", d);
	if (!mst_only && n > GC_HDBSCAN_TREE_MAX_N)
		return gc_fail(st, GC_EINVAL, "HDBSCAN takes at most %lld rows, got %lld",
					   (long long) GC_HDBSCAN_TREE_MAX_N, (long long) n);
	if (!mst_only && p->min_cluster_size < 2)
		return gc_fail(st, GC_EINVAL, "min_cluster_size must be at least 2, got %lld",
					   (long long) p->min_cluster_size);
	if (p->min_samples < 1)
		return gc_fail(st, GC_EINVAL, "min_samples must be at least 1, got %lld",
					   (long long) p->min_samples);
	if (n > 0 && p->min_samples > n)
		return gc_fail(st, GC_EINVAL, "min_samples = %lld exceeds the number of rows (%lld)",
					   (long long) p->min_samples, (long long) n);
	if (!mst_only && !(p->epsilon >= 0.0 && isfinite(p->epsilon)))
		return gc_fail(st, GC_EINVAL, "cluster_selection_epsilon must be non-negative and finite, got %g",
					   p->epsilon);
	if (!mst_only && p->method != GC_HDBSCAN_EOM && p->method != GC_HDBSCAN_LEAF)
		return gc_fail(st, GC_EINVAL, "unknown cluster_selection_method %d",
					   (int) p->method);
	if (!(p->alpha >= GC_HDBSCAN_MIN_ALPHA && isfinite(p->alpha)))
		return gc_fail(st, GC_EINVAL, "alpha must be finite and at least %g, got %g",
					   GC_HDBSCAN_MIN_ALPHA, p->alpha);
	if (p->metric == GC_METRIC_INNER_PRODUCT)
		return gc_fail(st, GC_EINVAL, "HDBSCAN supports the euclidean and cosine metrics: the inner product is not a distance");
	if (p->metric != GC_METRIC_EUCLIDEAN && p->metric != GC_METRIC_COSINE)
		return gc_fail(st, GC_EINVAL, "unknown metric %d", (int) p->metric);
	if (n == 0)
		return GC_OK;
	if (X == NULL)
		return gc_fail(st, GC_EINVAL, "HDBSCAN input array missing");
	if (gc_cancelled(ctx))
		return gc_fail(st, GC_ECANCEL, "canceled");
	return GC_OK;
}

/* Phases 1 and 2 on the CPU, one index for both. */
static gc_code
phases_cpu(const gc_ctx *ctx, const float *R, int64_t n, int d,
		   const gc_hdbscan_params *p, double *core, gc_mst_edge *edges,
		   gc_status *st)
{
	gc_hd_index ix;
	gc_code		rc;

	if ((rc = gc_hd_index_build(ctx, R, n, d, &ix, st)) != GC_OK)
		return rc;
	rc = gc_hd_core(ctx, &ix, p->min_samples, p->metric, core, st);
	if (rc == GC_OK)
		rc = gc_hd_mst(ctx, &ix, p->alpha, p->metric, core, edges, st);
	gc_hd_index_free(&ix);
	return rc;
}

/*
 * Phases 1 and 2 of checked input (n >= 1) on device dev: core (n, may be
 * NULL) and the n - 1 edges sorted by (w, a, b); on the GPU instead, with
 * nodes, the single-linkage tree of those edges, or with res, the whole
 * call's result.  One row has core distance 0 and no edge on either
 * device.
 */
static gc_code
phases(const gc_ctx *ctx, const float *X, int64_t n, int d,
	   const gc_hdbscan_params *p, gc_device dev, double *core,
	   gc_mst_edge *edges, gc_linkage_node *nodes, gc_hdbscan_result *res,
	   gc_status *st)
{
	const float *rows = X;	/* the rows phases 1 and 2 search */
	float	   *own = NULL;
	gc_code		rc;

	if (dev == GC_DEVICE_GPU && n > GC_HDBSCAN_GPU_MAX_N)
		return gc_fail(st, GC_EINVAL, "HDBSCAN on the GPU takes at most %lld rows, got %lld",
					   (long long) GC_HDBSCAN_GPU_MAX_N, (long long) n);
	if (p->metric == GC_METRIC_COSINE &&
		(rc = gc_cosine_rows(ctx, X, n, d, &rows, &own, st)) != GC_OK)
		return rc;
	if (n == 1 && res != NULL)
		rc = gc_hdbscan_from_linkage(ctx, 1, NULL, p, res, st);
	else if (n == 1)
	{
		if (core != NULL)
			core[0] = gc_hdbscan_dist(p->metric, 0.0);
	}
	else if (dev == GC_DEVICE_GPU && res != NULL)
		rc = gc_hdbscan_gpu(ctx, rows, n, d, p, res, st);
	else if (dev == GC_DEVICE_GPU && nodes != NULL)
		rc = gc_hdbscan_linkage_gpu(ctx, rows, n, d, p->min_samples, p->alpha,
									p->metric, nodes, st);
	else if (dev == GC_DEVICE_GPU)
		rc = gc_hdbscan_mst_gpu(ctx, rows, n, d, p->min_samples, p->alpha,
								p->metric, core, edges, st);
	else
		rc = phases_cpu(ctx, rows, n, d, p, core, edges, st);
	free(own);
	return rc;
}

/*
 * Phases 1 and 2 and the single-linkage tree of checked input (n >= 1)
 * into nodes: on the GPU all three there; on the CPU the edges, then the
 * union-find.
 */
static gc_code
phases_linkage(const gc_ctx *ctx, const float *X, int64_t n, int d,
			   const gc_hdbscan_params *p, gc_device dev,
			   gc_linkage_node *nodes, gc_status *st)
{
	int			team = gc_team_adapt(ctx);
	double	   *core;
	gc_mst_edge *edges;
	gc_code		rc;

	if (dev == GC_DEVICE_GPU)
		return phases(ctx, X, n, d, p, dev, NULL, NULL, nodes, NULL, st);
	core = gc_malloc_touched(sizeof(double) * (size_t) n, team);
	edges = gc_malloc_touched(sizeof(gc_mst_edge) * (size_t) n, team);
	if (core == NULL || edges == NULL)
		rc = gc_fail(st, GC_ENOMEM, "out of memory for the core distances and the MST of %lld rows",
					 (long long) n);
	else if ((rc = phases(ctx, X, n, d, p, dev, core, edges, NULL, NULL, st)) == GC_OK)
		rc = gc_hdbscan_linkage(ctx, n, edges, nodes, st);
	free(core);
	free(edges);
	return rc;
}

/* HDBSCAN on device dev: gc_hdbscan_cpu's contract. */
static gc_code
hdbscan_run(const gc_ctx *ctx, const float *X, int64_t n, int d,
			const gc_hdbscan_params *p, gc_device dev, gc_hdbscan_result *res,
			gc_status *st)
{
	double	   *core;
	gc_mst_edge *edges;
	gc_linkage_node *nodes;
	int			team;
	gc_code		rc;

	if (res != NULL && res->tree != NULL)
		*res->tree = (gc_hdbscan_tree) {0};
	if ((rc = gc_hdbscan_check(ctx, X, n, d, p, false, st)) != GC_OK)
		return rc;
	if (res == NULL)
		return gc_fail(st, GC_EINVAL, "HDBSCAN result missing");
	res->clusters = 0;
	if (n == 0)
		return GC_OK;
	if (res->labels == NULL || res->probability == NULL || res->outlier == NULL)
		return gc_fail(st, GC_EINVAL, "HDBSCAN output array missing");
	if (dev == GC_DEVICE_GPU && res->tree == NULL)
		return phases(ctx, X, n, d, p, dev, NULL, NULL, NULL, res, st);
	/* touched on the team: the GPU's download or the CPU's phases fill them */
	team = gc_team_adapt(ctx);
	if (dev == GC_DEVICE_GPU)
	{
		/* the condensed tree's rows: the GPU's single-linkage tree, then here */
		nodes = gc_malloc_touched(sizeof(gc_linkage_node) * (size_t) n, team);
		if (nodes == NULL)
			rc = gc_fail(st, GC_ENOMEM, "out of memory for the single-linkage tree of %lld rows",
						 (long long) n);
		else if ((rc = phases_linkage(ctx, X, n, d, p, dev, nodes, st)) == GC_OK)
		{
			gc_report(ctx, GC_PHASE_LABEL, 0, 0, 0, n, NAN);
			rc = gc_hdbscan_from_linkage(ctx, n, nodes, p, res, st);
		}
		free(nodes);
		return rc;
	}
	core = gc_malloc_touched(sizeof(double) * (size_t) n, team);
	edges = gc_malloc_touched(sizeof(gc_mst_edge) * (size_t) n, team);
	if (core == NULL || edges == NULL)
		rc = gc_fail(st, GC_ENOMEM, "out of memory for the core distances and the MST of %lld rows",
					 (long long) n);
	else
		rc = phases(ctx, X, n, d, p, dev, core, edges, NULL, NULL, st);
	free(core);
	if (rc == GC_OK)
	{
		gc_report(ctx, GC_PHASE_LABEL, 0, 0, 0, n, NAN);
		rc = gc_hdbscan_from_mst(ctx, n, edges, p, res, st);
	}
	free(edges);
	return rc;
}

gc_code
gc_hdbscan_cpu(const gc_ctx *ctx, const float *X, int64_t n, int d,
			   const gc_hdbscan_params *p, gc_hdbscan_result *res,
			   gc_status *st)
{
	return hdbscan_run(ctx, X, n, d, p, GC_DEVICE_CPU, res, st);
}

gc_code
gc_hdbscan_on_gpu(const gc_ctx *ctx, const float *X, int64_t n, int d,
				  const gc_hdbscan_params *p, gc_hdbscan_result *res,
				  gc_status *st)
{
	return hdbscan_run(ctx, X, n, d, p, GC_DEVICE_GPU, res, st);
}

/* The MST alone on device dev: gc_hdbscan_mst_cpu's contract. */
static gc_code
mst_run(const gc_ctx *ctx, const float *X, int64_t n, int d,
		const gc_hdbscan_params *p, gc_device dev, double *core,
		gc_mst_edge *edges, gc_status *st)
{
	double	   *own = NULL;
	gc_code		rc;

	if ((rc = gc_hdbscan_check(ctx, X, n, d, p, true, st)) != GC_OK || n == 0)
		return rc;
	if (edges == NULL && n > 1)
		return gc_fail(st, GC_EINVAL, "HDBSCAN output array missing");
	if (core == NULL && (core = own = malloc(sizeof(double) * (size_t) n)) == NULL)
		return gc_fail(st, GC_ENOMEM, "out of memory for the core distances of %lld rows",
					   (long long) n);
	rc = phases(ctx, X, n, d, p, dev, core, edges, NULL, NULL, st);
	free(own);
	return rc;
}

gc_code
gc_hdbscan_mst_cpu(const gc_ctx *ctx, const float *X, int64_t n, int d,
				   const gc_hdbscan_params *p, double *core,
				   gc_mst_edge *edges, gc_status *st)
{
	return mst_run(ctx, X, n, d, p, GC_DEVICE_CPU, core, edges, st);
}

gc_code
gc_hdbscan_mst_on_gpu(const gc_ctx *ctx, const float *X, int64_t n, int d,
					  const gc_hdbscan_params *p, double *core,
					  gc_mst_edge *edges, gc_status *st)
{
	return mst_run(ctx, X, n, d, p, GC_DEVICE_GPU, core, edges, st);
}

/* The single-linkage tree on device dev: gc_hdbscan_linkage_cpu's contract. */
static gc_code
linkage_run(const gc_ctx *ctx, const float *X, int64_t n, int d,
			const gc_hdbscan_params *p, gc_device dev, gc_linkage_node *nodes,
			gc_status *st)
{
	gc_code		rc;

	if ((rc = gc_hdbscan_check(ctx, X, n, d, p, false, st)) != GC_OK || n == 0)
		return rc;
	if (nodes == NULL && n > 1)
		return gc_fail(st, GC_EINVAL, "HDBSCAN output array missing");
	return phases_linkage(ctx, X, n, d, p, dev, nodes, st);
}

gc_code
gc_hdbscan_linkage_cpu(const gc_ctx *ctx, const float *X, int64_t n, int d,
					   const gc_hdbscan_params *p, gc_linkage_node *nodes,
					   gc_status *st)
{
	return linkage_run(ctx, X, n, d, p, GC_DEVICE_CPU, nodes, st);
}

gc_code
gc_hdbscan_linkage_on_gpu(const gc_ctx *ctx, const float *X, int64_t n, int d,
						  const gc_hdbscan_params *p, gc_linkage_node *nodes,
						  gc_status *st)
{
	return linkage_run(ctx, X, n, d, p, GC_DEVICE_GPU, nodes, st);
}

/*
 * The checks of the phases' own entries: the rows, the arrays of n >= 1
 * rows, the parameters (bad: GC_EINVAL with
 * the message msg, when not NULL), then the cancel flags.
 */
static gc_code
phase_check(const gc_ctx *ctx, const float *R, int64_t n, int d,
			const void *out1, const void *out2, bool bad, const char *msg,
			gc_status *st)
{
	clear_status(st);
	if (n < 0 || d < 1)
		return gc_fail(st, GC_EINVAL, "%lld rows of dimension %d", (long long) n, d);
	if (n > 0 && (R == NULL || out1 == NULL || out2 == NULL))
		return gc_fail(st, GC_EINVAL, "HDBSCAN input or output array missing");
	if (bad)
		return gc_fail(st, GC_EINVAL, "%s", msg);
	if (gc_cancelled(ctx))
		return gc_fail(st, GC_ECANCEL, "canceled");
	return GC_OK;
}

gc_code
gc_hdbscan_core_cpu(const gc_ctx *ctx, const float *R, int64_t n, int d,
					int64_t min_samples, gc_metric metric, double *core,
					gc_status *st)
{
	gc_hd_index ix;
	gc_code		rc;

	rc = phase_check(ctx, R, n, d, core, core,
					 min_samples < 1 || (n > 0 && min_samples > n),
					 "min_samples must be between 1 and the number of rows", st);
	if (rc != GC_OK || n == 0)
		return rc;
	if ((rc = gc_hd_index_build(ctx, R, n, d, &ix, st)) != GC_OK)
		return rc;
	rc = gc_hd_core(ctx, &ix, min_samples, metric, core, st);
	gc_hd_index_free(&ix);
	return rc;
}

gc_code
gc_hdbscan_mst_edges_cpu(const gc_ctx *ctx, const float *R, int64_t n, int d,
						 double alpha, gc_metric metric, const double *core,
						 gc_mst_edge *edges, gc_status *st)
{
	gc_hd_index ix;
	gc_code		rc;

	rc = phase_check(ctx, R, n, d, core, n > 1 ? (const void *) edges : core,
					 !(alpha >= GC_HDBSCAN_MIN_ALPHA && isfinite(alpha)),
					 "alpha must be finite and at least 1e-200", st);
	if (rc != GC_OK || n <= 1)
		return rc;
	if ((rc = gc_hd_index_build(ctx, R, n, d, &ix, st)) != GC_OK)
		return rc;
	rc = gc_hd_mst(ctx, &ix, alpha, metric, core, edges, st);
	gc_hd_index_free(&ix);
	return rc;
}
