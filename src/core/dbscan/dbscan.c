/*
 * dbscan.c — exact parallel DBSCAN on the CPU: validation, index choice,
 * cluster roots and the final numbering.  The spatial work (core test,
 * unions between core points, border assignment) lives in the indexes:
 * dbscan_grid.c (d <= 3) and dbscan_kdtree.c (any d).
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>

#include "dbscan/dbscan_internal.h"
#include "common/gpu.h"
#include "common/union_find.h"

/*
 * gc_dbscan_cpu — DBSCAN with the semantics every device shares:
 *  - neighbours: gc_dist2(a, b) <= gc_eps2(eps), nothing else (cosine:
 *    the same on the unit rows with fl(2 eps): metric.h);
 *  - core: at least min_pts neighbours, the point itself included;
 *  - clusters: connected components of core points (edges between core
 *    points that are neighbours);
 *  - border: a non-core point with a core neighbour joins the cluster of its
 *    nearest core neighbour (smallest dist2; ties to the lowest input row);
 *    other points are noise (GC_NOISE, is_core 0);
 *  - numbering: clusters are numbered 0, 1, 2 ... in increasing order of the
 *    lowest input row of any member, core or border.
 * The result does not depend on the index or the number of threads.
 */
gc_code
gc_dbscan_cpu(const gc_ctx *ctx, const float *X, int64_t n, int d,
			  const gc_dbscan_params *p, int32_t *labels, uint8_t *is_core,
			  gc_status *st)
{
	return gc_dbscan_cpu_index(ctx, X, n, d, p, GC_DBSCAN_INDEX_AUTO, NULL,
							   labels, is_core, st);
}

static inline void
atomic_min_i64(int64_t *a, int64_t v)
{
	int64_t		cur = __atomic_load_n(a, __ATOMIC_RELAXED);

	while (v < cur &&
		   !__atomic_compare_exchange_n(a, &cur, v, true,
										__ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

/*
 * Labels from croot (input order: root position or -1).  A cluster's number
 * is the count of clusters whose lowest row comes before its own; the lowest
 * row per root is found with an atomic min, stored in parent[] (free now).
 */
static gc_code
number_clusters(gc_dbscan_job *j, int32_t *labels)
{
	int64_t		n = j->n;
	int64_t    *minrow = j->parent;
	int64_t    *croot = j->croot;
	int			T = j->nthreads;
	int64_t    *counts;
	int64_t		total = 0;

	counts = calloc((size_t) T + 1, sizeof(int64_t));
	if (counts == NULL)
		return gc_fail(j->st, GC_ENOMEM, "out of memory");

#pragma omp parallel num_threads(T)
	{
		int			t = omp_get_thread_num();
		int			nt = omp_get_num_threads();
		int64_t		lo = n * t / nt,
					hi = n * (t + 1) / nt;
		int64_t		c = 0;

#pragma omp for schedule(static)
		for (int64_t i = 0; i < n; i++)
			minrow[i] = INT64_MAX;
#pragma omp for schedule(static)
		for (int64_t i = 0; i < n; i++)
			if (croot[i] >= 0)
				atomic_min_i64(&minrow[croot[i]], i);
		/* implicit barrier: minrow final */
		for (int64_t i = lo; i < hi; i++)
			if (croot[i] >= 0 && minrow[croot[i]] == i)
				c++;
		counts[t + 1] = c;
#pragma omp barrier
#pragma omp single
		{
			for (int u = 0; u < nt; u++)
				counts[u + 1] += counts[u];
			total = counts[nt];
		}
		if (total <= INT32_MAX)
		{
			int64_t		k = counts[t];

			for (int64_t i = lo; i < hi; i++)
				if (croot[i] >= 0 && minrow[croot[i]] == i)
					labels[i] = (int32_t) k++;
#pragma omp barrier
			for (int64_t i = lo; i < hi; i++)
			{
				if (croot[i] < 0)
					labels[i] = GC_NOISE;
				else if (minrow[croot[i]] != i)
					labels[i] = labels[minrow[croot[i]]];
			}
		}
	}
	free(counts);
	if (total > INT32_MAX)
		return gc_fail(j->st, GC_EINVAL, "DBSCAN found more than %d clusters",
					   INT32_MAX);
	return GC_OK;
}

/*
 * Every metric as a Euclidean DBSCAN, the one the indexes and devices
 * run: *rows and *euclid (metric Euclidean) give the labels of X under p.
 * Euclidean: X and p.  Cosine: the unit rows (gc_cosine_rows, in a new
 * array *own the caller frees) and eps' with gc_eps2(eps') = fl(2 eps)
 * exactly (metric.h).  GC_EINVAL naming a zero row, GC_ENOMEM.
 */
static gc_code
dbscan_rows(const gc_ctx *ctx, const float *X, int64_t n, int d,
			const gc_dbscan_params *p, const float **rows, float **own,
			gc_dbscan_params *euclid, gc_status *st)
{
	*rows = X;
	*own = NULL;
	*euclid = *p;
	if (p->metric != GC_METRIC_COSINE)
		return GC_OK;
	/* gc_eps2(sqrt(f)) is f for every float f: the double square is
	 * within an ulp of f, far inside f's float rounding interval */
	euclid->metric = GC_METRIC_EUCLIDEAN;
	euclid->eps = sqrt((double) gc_metric_eps2(GC_METRIC_COSINE, p->eps));
	return gc_cosine_rows(ctx, X, n, d, rows, own, st);
}

gc_code
gc_dbscan_on_gpu(const gc_ctx *ctx, const float *X, int64_t n, int d,
				 const gc_dbscan_params *p, int32_t *labels, uint8_t *is_core,
				 gc_status *st)
{
	const float *rows;
	float	   *own;
	gc_dbscan_params ep;
	gc_code		rc;

	if ((rc = gc_dbscan_check(ctx, X, n, d, p, labels, is_core, st)) != GC_OK ||
		(rc = dbscan_rows(ctx, X, n, d, p, &rows, &own, &ep, st)) != GC_OK)
		return rc;
	rc = gc_dbscan_gpu(ctx, rows, n, d, &ep, labels, is_core, st);
	free(own);
	return rc;
}

gc_code
gc_dbscan_check(const gc_ctx *ctx, const float *X, int64_t n, int d,
				const gc_dbscan_params *p, const int32_t *labels,
				const uint8_t *is_core, gc_status *st)
{
	if (st != NULL)
	{
		st->code = GC_OK;
		st->message[0] = '\0';
	}
	if (p == NULL)
		return gc_fail(st, GC_EINVAL, "DBSCAN parameters missing");
	if (n < 0)
		return gc_fail(st, GC_EINVAL, "number of points must not be negative");
	if (d < 1)
		return gc_fail(st, GC_EINVAL, "dimension must be at least 1, got %d", d);
	if (!(p->eps > 0.0) || !isfinite(p->eps))
		return gc_fail(st, GC_EINVAL, "eps must be positive and finite, got %g",
					   p->eps);
	if (p->min_pts < 1)
		return gc_fail(st, GC_EINVAL, "min_pts must be at least 1, got %lld",
					   (long long) p->min_pts);
	if (p->metric != GC_METRIC_EUCLIDEAN && p->metric != GC_METRIC_COSINE)
		return gc_fail(st, GC_EINVAL, "DBSCAN supports the euclidean and cosine metrics");
	if (p->algorithm != GC_DBSCAN_UNION_FIND && p->algorithm != GC_DBSCAN_DCLUST)
		return gc_fail(st, GC_EINVAL, "unknown DBSCAN algorithm %d", (int) p->algorithm);
	if (n == 0)
		return GC_OK;
	if (X == NULL || labels == NULL || is_core == NULL)
		return gc_fail(st, GC_EINVAL, "DBSCAN input or output array missing");
	if (gc_cancelled(ctx))
		return gc_fail(st, GC_ECANCEL, "canceled");
	return GC_OK;
}

gc_code
gc_dbscan_cpu_index(const gc_ctx *ctx, const float *X, int64_t n, int d,
					const gc_dbscan_params *p, gc_dbscan_index index,
					gc_dbscan_index *used, int32_t *labels, uint8_t *is_core,
					gc_status *st)
{
	gc_dbscan_job j;
	gc_code		rc = GC_OK;
	bool		applied = false;
	float	   *unit = NULL;	/* the unit rows, for cosine */
	gc_dbscan_params ep;		/* the Euclidean problem solved */
	gc_device	cpu;

	if (used != NULL)
		*used = GC_DBSCAN_INDEX_AUTO;
	if ((rc = gc_dbscan_check(ctx, X, n, d, p, labels, is_core, st)) != GC_OK)
		return rc;
	if (index == GC_DBSCAN_INDEX_GRID && d > 3)
		return gc_fail(st, GC_EINVAL, "the DBSCAN grid index needs d <= 3");
	/* dclust runs only on the GPU: the rule and its message are dispatch's */
	if ((rc = gc_dbscan_device_request(GC_DEVICE_CPU, p->algorithm, &cpu,
									   st)) != GC_OK)
		return rc;
	if (n == 0)
		return GC_OK;
	if ((uint64_t) n > SIZE_MAX / sizeof(float) / (uint64_t) d / 2)
		return gc_fail(st, GC_ENOMEM, "DBSCAN input too large");

	memset(&j, 0, sizeof(j));
	j.ctx = ctx;
	j.st = st;
	j.nthreads = gc_team_adapt(ctx);	/* the team for the whole call */
	if (j.nthreads < 1)
		j.nthreads = 1;
	if ((rc = dbscan_rows(ctx, X, n, d, p, &j.X, &unit, &ep, st)) != GC_OK)
		return rc;
	j.n = n;
	j.d = d;
	j.eps = ep.eps;
	j.eps2 = gc_eps2(ep.eps);
	j.min_pts = p->min_pts;
	j.perm = malloc(sizeof(int64_t) * (size_t) n);
	j.pts = malloc(sizeof(float) * (size_t) n * (size_t) d);
	j.core = malloc((size_t) n);
	j.parent = malloc(sizeof(int64_t) * (size_t) n);
	j.croot = malloc(sizeof(int64_t) * (size_t) n);
	if (!j.perm || !j.pts || !j.core || !j.parent || !j.croot)
	{
		rc = gc_fail(st, GC_ENOMEM, "out of memory for DBSCAN on %lld points",
					 (long long) n);
		goto out;
	}

	gc_report(ctx, GC_PHASE_INDEX, 0, 0, 0, n, NAN);
	if (index != GC_DBSCAN_INDEX_KDTREE && d <= 3)
	{
		rc = gc_dbscan_grid_run(&j, &applied);
		if (rc != GC_OK)
			goto out;
		if (applied && used != NULL)
			*used = GC_DBSCAN_INDEX_GRID;
	}
	if (!applied)
	{
		rc = gc_dbscan_kdtree_run(&j);
		if (rc != GC_OK)
			goto out;
		if (used != NULL)
			*used = GC_DBSCAN_INDEX_KDTREE;
	}

	gc_report(ctx, GC_PHASE_LABEL, 0, 0, n, n, NAN);
	/* Core points: their own root.  (Non-core ones were set by the index.) */
#pragma omp parallel for num_threads(j.nthreads) schedule(static)
	for (int64_t s = 0; s < n; s++)
	{
		int64_t		row = j.perm[s];

		is_core[row] = j.core[s];
		if (j.core[s])
			j.croot[row] = gc_uf_find(j.parent, s);
	}
	if (gc_cancelled(ctx))
	{
		rc = gc_fail(st, GC_ECANCEL, "canceled");
		goto out;
	}
	rc = number_clusters(&j, labels);

out:
	if (rc == GC_ECANCEL && st != NULL && st->code != GC_ECANCEL)
		gc_fail(st, GC_ECANCEL, "canceled");
	free(j.perm);
	free(j.pts);
	free(j.core);
	free(j.parent);
	free(j.croot);
	free(unit);
	return rc;
}
