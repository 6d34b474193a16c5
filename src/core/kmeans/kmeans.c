/*
 * kmeans.c — gc_kmeans_cpu: n_init runs of seeding + Lloyd iterations,
 * keeping the run of lowest inertia, with scikit-learn's stopping rules.
 *
 * The returned labels, distances and inertia always refer to the returned
 * centroids: when the last update moved the centres, one more assignment
 * step is run (as scikit-learn does), so a later kmeans_assign over the
 * returned centroids gives the same labels.
 *
 * Given initial centroids make one run; sample weights weigh the means and
 * the inertia (gpuclust_core.h says what scikit-learn 1.2 does alike).
 * The cosine metric (spherical k-means, gpuclust_core.h) runs all of this
 * on the unit rows, with the centres normalized.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kmeans/kmeans_internal.h"
#include "common/gpu.h"

/*
 * The inertia of the last assignment (the sum of d2), for progress reports:
 * at most every 100 ms (*last: when it was last summed), else NaN, so that
 * reporting costs at most 1% of a call.
 */
static double
progress_inertia(const float *d2, int64_t n, double *last)
{
	double		now = gc_now_ms(),
				s = 0.0;

	if (now - *last < 100.0)
		return NAN;
	for (int64_t i = 0; i < n; i++)
		s += d2[i];
	*last = gc_now_ms();
	return s;
}

/*
 * The centres rows are assigned to: C, or under cosine the unit rows of C
 * (into Cu), exactly as kmeans_assign(..., 'cosine') scores a model.
 */
static const float *
assign_centres(const gc_kmeans_params *p, int d, const float *C, float *Cu)
{
	if (p->metric != GC_METRIC_COSINE)
		return C;
	for (int c = 0; c < p->k; c++)
		(void) gc_unit_row(C + (size_t) c * d, d, Cu + (size_t) c * d);
	return Cu;
}

/*
 * One seeding + Lloyd run over X (under cosine, the unit rows); writes
 * labels and C, fills inertia/iter/conv.  Cu: k x d scratch.
 */
static gc_code
kmeans_run(const gc_ctx *ctx, gc_km_ws *ws, const float *X, int64_t n, int d,
		   const gc_kmeans_params *p, int run, double tol_scaled,
		   int32_t *labels, float *d2, float **C, float **Cn, float *Cu,
		   double *inertia, int *iterations, bool *converged, gc_status *st)
{
	const int	k = p->k;
	gc_code		rc;
	bool		moved = true;
	int			it;
	double		last_inertia_ms = 0.0;

	gc_report(ctx, GC_PHASE_INIT, 0, p->max_iter, run, gc_kmeans_runs(p), NAN);
	if (p->init == GC_INIT_CENTROIDS)
	{
		/* spherical: the given centres normalized (none is 0: checked) */
		if (p->metric == GC_METRIC_COSINE)
			gc_unit_rows(ctx, p->init_centroids, k, d, *C);
		else
			memcpy(*C, p->init_centroids, sizeof(float) * (size_t) k * d);
		rc = GC_OK;
	}
	else
	{
		const gc_kmeans_init init = gc_km_init_resolve(p->init, n, d, k);
		const uint64_t stream = gc_km_init_stream(init, run);

		if (init == GC_INIT_RANDOM)
			rc = gc_km_init_random_w(ctx, X, n, d, k, p->weights, p->seed,
									 stream, *C, NULL, st);
		else if (init == GC_INIT_KMEANS_PARALLEL)
			rc = gc_km_init_kmeans_par_w(ctx, X, n, d, k, p->weights, p->seed,
										 stream, *C, NULL, st);
		else
			rc = gc_km_init_kmeanspp_w(ctx, X, n, d, k, p->weights, p->seed,
									   stream, *C, NULL, st);
	}
	if (rc != GC_OK)
		return rc;

	*converged = false;
	for (int64_t i = 0; i < n; i++)
		labels[i] = -1;
	ws->bounds_valid = false;
	for (it = 0; it < p->max_iter; it++)
	{
		int64_t		changed;
		double		shift;
		float	   *tmp;
		int			relocated;

		if (gc_cancelled(ctx))
			return gc_fail(st, GC_ECANCEL, "canceled");
		rc = gc_km_assign_bounded(ctx, ws, X, n, d, assign_centres(p, d, *C, Cu),
								  k, labels, d2, &changed, st);
		if (rc == GC_OK)
			rc = gc_km_update(ctx, ws, X, n, d, k, labels, d2, *C, *Cn,
							  &shift, &relocated, st);
		if (rc != GC_OK)
			return rc;
		if (ctx != NULL && ctx->progress != NULL)
			gc_report(ctx, GC_PHASE_ITERATE, it + 1, p->max_iter, run, gc_kmeans_runs(p),
					  gc_km_cost(progress_inertia(d2, n, &last_inertia_ms),
								 p->metric));
		moved = memcmp(*C, *Cn, sizeof(float) * (size_t) k * d) != 0;
		tmp = *C;
		*C = *Cn;
		*Cn = tmp;
		if (changed == 0 && relocated == 0)
		{
			/*
			 * Labels stopped changing (scikit-learn's strict convergence),
			 * and no empty cluster took a row: a re-seeding moves centres
			 * off the means of the labels, so that is no fixpoint yet.
			 */
			*converged = true;
			it++;
			break;
		}
		if (shift <= tol_scaled)
		{
			*converged = true;
			it++;
			break;
		}
	}
	*iterations = it;

	/* Labels must match the centroids we return. */
	if (moved)
	{
		rc = gc_km_assign_bounded(ctx, ws, X, n, d, assign_centres(p, d, *C, Cu),
								  k, labels, d2, NULL, st);
		if (rc != GC_OK)
			return rc;
	}
	return gc_km_inertia_w(ctx, X, n, d, assign_centres(p, d, *C, Cu), labels,
						   p->weights, p->metric, NULL, inertia, st);
}

/* The initial centroids: finite, within the features' range. */
static gc_code
check_init_centroids(const gc_kmeans_params *p, int d, gc_status *st)
{
	const double limit = gc_feature_limit(d);

	if (p->init_centroids == NULL)
		return gc_fail(st, GC_EINVAL, "k-means: init is centroids, but none are given");
	if (p->init_d != d)
		return gc_fail(st, GC_EINVAL,
					   "k-means: the initial centroids have %d columns, the rows %d features",
					   p->init_d, d);
	for (size_t i = 0; i < (size_t) p->k * d; i++)
		if (!(fabs((double) p->init_centroids[i]) <= limit))
			return gc_fail(st, GC_EINVAL,
						   "k-means: initial centroid %zu, column %zu is %g: not finite, or beyond %g",
						   i / d + 1, i % d + 1, (double) p->init_centroids[i], limit);
	return GC_OK;
}

/*
 * Under cosine: no zero row (unless the caller checked the rows), no zero
 * initial centroid.
 */
static gc_code
check_cosine(const float *X, int64_t n, int d, const gc_kmeans_params *p,
			 gc_status *st)
{
	int64_t		zero = p->rows_checked ? -1 : gc_first_zero_row(X, n, d);

	if (zero >= 0)
		return gc_fail(st, GC_EINVAL,
					   "k-means: row %lld has all features 0: its cosine distance is undefined",
					   (long long) zero);
	if (p->init == GC_INIT_CENTROIDS &&
		(zero = gc_first_zero_row(p->init_centroids, p->k, d)) >= 0)
		return gc_fail(st, GC_EINVAL,
					   "k-means: initial centroid %lld is all 0: its cosine distance is undefined",
					   (long long) zero + 1);
	return GC_OK;
}

/*
 * The weights: finite, in [0, GC_KMEANS_MAX_WEIGHT], at least k positive;
 * checked and counted here unless the caller did (p->rows_checked).
 */
static gc_code
check_weights(const gc_kmeans_params *p, int64_t n, gc_status *st)
{
	int64_t		positive = p->rows_checked ? p->positive_weights : 0;

	if (!p->rows_checked)
		for (int64_t i = 0; i < n; i++)
		{
			double		w = p->weights[i];

			if (!(w >= 0.0 && w <= GC_KMEANS_MAX_WEIGHT))
				return gc_fail(st, GC_EINVAL,
							   "k-means: the weight of row %lld is %g; weights must be finite numbers from 0 to %g",
							   (long long) i, w, GC_KMEANS_MAX_WEIGHT);
			positive += w > 0.0;
		}
	if (positive < p->k)
		return gc_fail(st, GC_EINVAL,
					   "k-means: k (%d) must not exceed the number of rows of positive weight (%lld)",
					   p->k, (long long) positive);
	return GC_OK;
}

/*
 * The checks (and messages) of both devices' entries before a fit starts:
 * clears st, validates the parameters, k <= n, the arrays, the initial
 * centroids and the weights, and resets res's inertia, iterations and
 * converged.
 */
static gc_code
kmeans_check(const float *X, int64_t n, int d, const gc_kmeans_params *p,
			 gc_kmeans_result *res, gc_status *st)
{
	if (st)
	{
		st->code = GC_OK;
		st->message[0] = '\0';
	}
	if (p == NULL || res == NULL)
		return gc_fail(st, GC_EINVAL, "k-means: missing parameters or result");
	if (d < 1)
		return gc_fail(st, GC_EINVAL, "k-means: the dimension must be at least 1, got %d", d);
	if (n < 0)
		return gc_fail(st, GC_EINVAL, "k-means: negative row count");
	if (p->k < 1)
		return gc_fail(st, GC_EINVAL, "k-means: k must be at least 1, got %d", p->k);
	if (p->max_iter < 1)
		return gc_fail(st, GC_EINVAL, "k-means: max_iter must be at least 1, got %d", p->max_iter);
	if (p->n_init < 1)
		return gc_fail(st, GC_EINVAL, "k-means: n_init must be at least 1, got %d", p->n_init);
	if (!(p->tol >= 0.0) || isinf(p->tol))
		return gc_fail(st, GC_EINVAL, "k-means: tol must be a finite number >= 0, got %g", p->tol);
	if (p->init != GC_INIT_KMEANSPP && p->init != GC_INIT_RANDOM &&
		p->init != GC_INIT_CENTROIDS && p->init != GC_INIT_KMEANS_PARALLEL &&
		p->init != GC_INIT_AUTO)
		return gc_fail(st, GC_EINVAL, "k-means: unknown init method %d", (int) p->init);
	if (p->metric != GC_METRIC_EUCLIDEAN && p->metric != GC_METRIC_COSINE)
		return gc_fail(st, GC_EINVAL,
					   "k-means: metric %d is not supported (euclidean or cosine)",
					   (int) p->metric);
	res->inertia = 0.0;
	res->iterations = 0;
	res->converged = true;
	if (n == 0)
		return GC_OK;
	if (p->k > n)
		return gc_fail(st, GC_EINVAL,
					   "k-means: k (%d) must not exceed the number of rows (%lld)",
					   p->k, (long long) n);
	if (X == NULL || res->labels == NULL || res->centroids == NULL)
		return gc_fail(st, GC_EINVAL, "k-means: missing input or output array");
	if (p->init == GC_INIT_CENTROIDS && check_init_centroids(p, d, st) != GC_OK)
		return st->code;
	if (p->weights != NULL && check_weights(p, n, st) != GC_OK)
		return st->code;
	if (p->metric == GC_METRIC_COSINE && check_cosine(X, n, d, p, st) != GC_OK)
		return st->code;
	return GC_OK;
}

gc_code
gc_kmeans_on_gpu(const gc_ctx *ctx, const float *X, int64_t n, int d,
				 const gc_kmeans_params *p, gc_kmeans_result *res,
				 gc_status *st)
{
	gc_code		rc;

	if ((rc = kmeans_check(X, n, d, p, res, st)) != GC_OK || n == 0)
		return rc;
	return gc_kmeans_gpu(ctx, X, n, d, p, res, st);
}

gc_code
gc_kmeans_cpu(const gc_ctx *ctx, const float *X, int64_t n, int d,
			  const gc_kmeans_params *p, gc_kmeans_result *res, gc_status *st)
{
	gc_km_ws   *ws = NULL;
	float	   *C = NULL,
			   *Cn = NULL,
			   *Cu = NULL,
			   *d2 = NULL,
			   *U = NULL;
	const float *rows = X;		/* what is clustered: X, or its unit rows */
	int32_t    *lab = NULL;
	double		tol_scaled = 0.0;
	gc_code		rc = GC_OK;
	const int	runs = gc_kmeans_runs(p);

	if ((rc = kmeans_check(X, n, d, p, res, st)) != GC_OK || n == 0)
		return rc;

	if (p->metric == GC_METRIC_COSINE)
	{
		if ((U = malloc(sizeof(float) * (size_t) n * (size_t) d)) == NULL)
			return gc_fail(st, GC_ENOMEM, "k-means: out of memory for the unit rows of %lld rows",
						   (long long) n);
		gc_unit_rows(ctx, X, n, d, U);
		rows = U;
	}
	if (p->tol > 0.0)
	{
		double		mv;

		rc = gc_km_mean_variance(ctx, rows, n, d, &mv, st);
		if (rc != GC_OK)
			goto done;
		tol_scaled = p->tol * mv;
	}

	ws = gc_km_ws_create(n, d, p->k, gc_threads(ctx));
	if (ws != NULL)
	{
		ws->weights = p->weights;
		ws->unit_centres = p->metric == GC_METRIC_COSINE;
	}
	C = malloc(sizeof(float) * (size_t) p->k * d);
	Cn = malloc(sizeof(float) * (size_t) p->k * d);
	Cu = malloc(sizeof(float) * (size_t) p->k * d);
	d2 = malloc(sizeof(float) * (size_t) n);
	lab = runs > 1 ? malloc(sizeof(int32_t) * (size_t) n) : res->labels;
	if (ws == NULL || C == NULL || Cn == NULL || Cu == NULL || d2 == NULL ||
		lab == NULL)
	{
		rc = gc_fail(st, GC_ENOMEM, "k-means: out of memory (%lld rows, %d dimensions, k = %d)",
					 (long long) n, d, p->k);
		goto done;
	}

	for (int run = 0; run < runs; run++)
	{
		double		inertia;
		int			iters = 0;
		bool		conv = false;

		rc = kmeans_run(ctx, ws, rows, n, d, p, run, tol_scaled, lab, d2, &C,
						&Cn, Cu, &inertia, &iters, &conv, st);
		if (rc != GC_OK)
			goto done;
		/* Strictly lower, as scikit-learn: ties keep the earlier run. */
		if (run == 0 || inertia < res->inertia)
		{
			res->inertia = inertia;
			res->iterations = iters;
			res->converged = conv;
			memcpy(res->centroids, C, sizeof(float) * (size_t) p->k * d);
			if (lab != res->labels)
				memcpy(res->labels, lab, sizeof(int32_t) * (size_t) n);
		}
	}

	if (res->distance != NULL)
	{
		double		inertia;

		rc = gc_km_inertia_w(ctx, rows, n, d,
							 assign_centres(p, d, res->centroids, Cu),
							 res->labels, NULL, p->metric, res->distance,
							 &inertia, st);
	}

done:
	gc_km_ws_destroy(ws);
	free(C);
	free(Cn);
	free(Cu);
	free(d2);
	free(U);
	if (lab != res->labels)
		free(lab);
	return rc;
}

/* A row of gc_kmeans_distinct_labels' sort: its features and position. */
typedef struct distinct_row
{
	const float *x;
	int64_t		pos;
	int			d;
} distinct_row;

/* Whether two rows are one point: every feature compares equal. */
static bool
distinct_same(const distinct_row *a, const distinct_row *b)
{
	for (int j = 0; j < a->d; j++)
		if (a->x[j] != b->x[j])
			return false;
	return true;
}

/* Features in dimension order by value, then position: a point's rows in a run. */
static int
distinct_cmp(const void *a, const void *b)
{
	const distinct_row *ra = a,
			   *rb = b;

	for (int j = 0; j < ra->d; j++)
	{
		if (ra->x[j] < rb->x[j])
			return -1;
		if (ra->x[j] > rb->x[j])
			return 1;
	}
	return ra->pos < rb->pos ? -1 : ra->pos > rb->pos;
}

gc_code
gc_kmeans_distinct_labels(const gc_ctx *ctx, const float *X, int64_t n, int d,
						  gc_metric metric, int32_t *labels, int64_t *clusters,
						  gc_status *st)
{
	float	   *U = NULL;
	distinct_row *rows;
	int64_t    *head;
	int64_t		m = 0;

	st->code = GC_OK;
	st->message[0] = '\0';
	*clusters = 0;
	if (n < 0 || n > INT32_MAX || d < 1 || (n > 0 && (X == NULL || labels == NULL)))
		return gc_fail(st, GC_EINVAL, "bad arguments");
	if (n == 0)
		return GC_OK;
	if (metric == GC_METRIC_COSINE)
	{
		int64_t		zero = gc_first_zero_row(X, n, d);

		if (zero >= 0)
			return gc_fail(st, GC_EINVAL, "row %lld is all 0: the cosine distance is undefined",
						   (long long) zero + 1);
		U = malloc(sizeof(float) * (size_t) n * (size_t) d);
		if (U == NULL)
			return gc_fail(st, GC_ENOMEM, "out of memory for %lld unit rows",
						   (long long) n);
		gc_unit_rows(ctx, X, n, d, U);
		X = U;
	}
	rows = malloc(sizeof(distinct_row) * (size_t) n);
	head = malloc(sizeof(int64_t) * (size_t) n);
	if (rows == NULL || head == NULL)
	{
		free(U);
		free(rows);
		free(head);
		return gc_fail(st, GC_ENOMEM, "out of memory for sorting %lld rows",
					   (long long) n);
	}
	for (int64_t i = 0; i < n; i++)
		rows[i] = (distinct_row) {X + i * d, i, d};
	qsort(rows, (size_t) n, sizeof(distinct_row), distinct_cmp);
	/* head[i]: the first row of row i's point, the head of its run */
	for (int64_t r = 0, h = 0; r < n; r++)
	{
		if (!distinct_same(&rows[h], &rows[r]))
			h = r;
		head[rows[r].pos] = rows[h].pos;
	}
	/* in row order a point's first row comes before its others */
	for (int64_t i = 0; i < n; i++)
		labels[i] = head[i] == i ? (int32_t) m++ : labels[head[i]];
	free(rows);
	free(head);
	free(U);
	*clusters = m;
	return GC_OK;
}
