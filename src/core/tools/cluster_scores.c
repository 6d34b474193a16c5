/*
 * cluster_scores.c — internal scores of any labelling (k-means, DBSCAN with
 * its noise, a user's own): the Davies-Bouldin index, the Calinski-Harabasz
 * index and the inertia, as scikit-learn's davies_bouldin_score and
 * calinski_harabasz_score compute them on the labelled rows.
 *
 * Rows with a negative label (noise, or no label) are left out before
 * anything else, so the scores are scikit-learn's of (X[keep],
 * labels[keep]); labels with no row (empty clusters) take no part.  The
 * per-cluster sizes, centres, mean distances to the centre and sums of
 * squared distances come from gc_cluster_summary_cpu (one definition of
 * each, in double from the float32 features, centres summed in row order);
 * the mean of the labelled rows is summed here, in row order too.  So
 * nothing depends on the thread count.
 *
 * Cost: a pass over the labels, then the summary's two row passes and the
 * mean's, O(n d), sequential; then, for Davies-Bouldin, every ordered pair
 * of the K non-empty clusters' centres, O(K^2 d), in parallel over the
 * clusters: K = 100,000 is 10^10 centre distances, a minute or two of one
 * core's time at d = 8 and growing with d.  Nothing here bounds K (the
 * labels decide it): a caller that wants a bound sets it.  That loop polls
 * the cancel flags every 2^20 features' worth of distances on every
 * thread, the row passes every 64k rows.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tools/tools.h"

#define SCORES_CANCEL_EVERY 65536	/* rows between polls in a row pass */
#define DB_CANCEL_WORK (1 << 20)	/* features between polls, centre pairs */

/*
 * numpy's allclose(v, 0) for each value: |v| <= atol (1e-8, its default;
 * rtol multiplies |0|).
 */
#define DB_ZERO 1e-8

/*
 * Counts the labelled rows and the non-empty labels of labels[0 .. n-1]
 * into res->rows and res->clusters, with size (m, zeroed here) as the
 * per-label counts.  GC_EINTERNAL for a label >= m.
 */
static gc_code
scores_count(const int32_t *labels, int64_t n, int32_t m, int64_t *size,
			 gc_cluster_scores *res, gc_status *st)
{
	memset(size, 0, sizeof(int64_t) * (size_t) m);
	for (int64_t i = 0; i < n; i++)
	{
		int32_t		c = labels[i];

		if (c >= m)
			return gc_fail(st, GC_EINTERNAL, "label %d out of range", c);
		if (c < 0)
			continue;
		res->rows++;
		if (size[c]++ == 0)
			res->clusters++;
	}
	return GC_OK;
}

/*
 * mean (d) = the mean of the labelled rows (rows of them), summed in double
 * in row order.
 */
static gc_code
scores_mean(const gc_ctx *ctx, const float *X, int64_t n, int d,
			const int32_t *labels, int64_t rows, double *mean, gc_status *st)
{
	memset(mean, 0, sizeof(double) * (size_t) d);
	for (int64_t i = 0; i < n; i++)
	{
		if ((i % SCORES_CANCEL_EVERY) == 0 && gc_cancelled(ctx))
			return gc_fail(st, GC_ECANCEL, "canceled");
		if (labels[i] < 0)
			continue;
		for (int j = 0; j < d; j++)
			mean[j] += (double) X[i * d + j];
	}
	for (int j = 0; j < d; j++)
		mean[j] /= (double) rows;
	return GC_OK;
}

/* The squared Euclidean distance of two double points, in double. */
static inline double
dist2_f64d(const double *a, const double *b, int d)
{
	double		s = 0.0;

	for (int j = 0; j < d; j++)
	{
		double		t = a[j] - b[j];

		s += t * t;
	}
	return s;
}

/*
 * Calinski-Harabasz and the inertia of the K non-empty clusters idx[0 ..
 * K-1] of rows rows: extra = sum of size * |centre - mean|^2, intra = the
 * sum of sumsq; 1 when intra is 0 (scikit-learn's rule), else extra (rows
 * - K) / (intra (K - 1)).  Summed in cluster order.
 */
static void
scores_ch(const int64_t *size, const double *centres, const double *sumsq,
		  const int32_t *idx, int64_t K, int d, const double *mean,
		  int64_t rows, gc_cluster_scores *res)
{
	double		extra = 0.0,
				intra = 0.0;

	for (int64_t a = 0; a < K; a++)
	{
		int32_t		c = idx[a];

		extra += (double) size[c] * dist2_f64d(centres + (int64_t) c * d, mean, d);
		intra += sumsq[c];
	}
	res->inertia = intra;
	res->calinski_harabasz = intra == 0.0 ? 1.0 :
		extra * (double) (rows - K) / (intra * (double) (K - 1));
}

/*
 * Davies-Bouldin of the K >= 2 non-empty clusters idx[0 .. K-1], their
 * mean distances intra[c] to their centres: 0 when every intra or every
 * centre distance is within DB_ZERO of 0 (scikit-learn's allclose);
 * else, with a centre distance of 0 counted as infinite (its ratio 0),
 * the mean over clusters a of the largest (intra[a] + intra[b]) /
 * dist(a, b) over b != a.  Each cluster's largest ratio is found on one
 * thread over every b (a max, exact in any order), the mean summed in
 * cluster order: the score does not depend on the team.
 */
static gc_code
scores_db(const gc_ctx *ctx, const double *centres, const double *intra,
		  const int32_t *idx, int64_t K, int d, double *score, gc_status *st)
{
	double	   *worst;
	double		total = 0.0;
	bool		spread = false,
				far = false;
	int			stop = 0,
				team;

	for (int64_t a = 0; a < K; a++)
		spread |= intra[idx[a]] > DB_ZERO;
	*score = 0.0;
	if (!spread)
		return GC_OK;
	if ((worst = malloc(sizeof(double) * (size_t) K)) == NULL)
		return gc_fail(st, GC_ENOMEM, "out of memory for the Davies-Bouldin index");
	/* one thread for a small matrix, where a region's barriers cost more */
	team = (double) K * (double) K * d < (double) DB_CANCEL_WORK ? 1 :
		gc_region_threads(gc_team_adapt(ctx), K);
#pragma omp parallel num_threads(team) reduction(||:far)
	{
		int64_t		work = 0;

#pragma omp for schedule(dynamic, 16)
		for (int64_t a = 0; a < K; a++)
		{
			const double *ca = centres + (int64_t) idx[a] * d;
			double		w = 0.0;

			if (__atomic_load_n(&stop, __ATOMIC_RELAXED))
				continue;
			for (int64_t b = 0; b < K; b++)
			{
				double		dist;

				if ((work += d) >= DB_CANCEL_WORK)
				{
					work = 0;
					if (__atomic_load_n(&stop, __ATOMIC_RELAXED))
						break;
					if (gc_cancelled(ctx))
					{
						__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
						break;
					}
				}
				if (b == a)
					continue;
				dist = sqrt(dist2_f64d(ca, centres + (int64_t) idx[b] * d, d));
				if (dist > DB_ZERO)
					far = true;
				if (dist > 0.0)
				{
					double		r = (intra[idx[a]] + intra[idx[b]]) / dist;

					if (r > w)
						w = r;
				}
			}
			worst[a] = w;
		}
	}
	if (stop)
	{
		free(worst);
		return gc_fail(st, GC_ECANCEL, "canceled");
	}
	if (far)
	{
		for (int64_t a = 0; a < K; a++)
			total += worst[a];
		*score = total / (double) K;
	}
	free(worst);
	return GC_OK;
}

gc_code
gc_cluster_scores_cpu(const gc_ctx *ctx, const float *X, int64_t n, int d,
					  const int32_t *labels, int32_t m,
					  gc_cluster_scores *res, gc_status *st)
{
	int64_t    *size = NULL;
	double	   *centres = NULL,
			   *mean_dist = NULL,
			   *sumsq = NULL,
			   *mean = NULL;
	int32_t    *idx = NULL;
	int64_t		K = 0;
	gc_code		rc;

	st->code = GC_OK;
	st->message[0] = '\0';
	memset(res, 0, sizeof(*res));
	res->davies_bouldin = res->calinski_harabasz = res->inertia = NAN;
	if (m < 0 || n < 0 || d < 1 || (n > 0 && (X == NULL || labels == NULL)))
		return gc_fail(st, GC_EINVAL, "bad arguments");
	if ((size = malloc(sizeof(int64_t) * (size_t) (m > 0 ? m : 1))) == NULL)
		return gc_fail(st, GC_ENOMEM, "out of memory for the cluster scores");
	if ((rc = scores_count(labels, n, m, size, res, st)) != GC_OK)
		goto done;
	if (res->clusters < 2 || res->clusters > res->rows - 1)
	{
		rc = gc_fail(st, GC_EINVAL,
					 "the cluster scores need 2 to rows - 1 clusters; %lld labelled row%s have %lld cluster%s",
					 (long long) res->rows, res->rows == 1 ? "" : "s",
					 (long long) res->clusters, res->clusters == 1 ? "" : "s");
		goto done;
	}
	centres = malloc(sizeof(double) * (size_t) m * (size_t) d);
	mean_dist = malloc(sizeof(double) * (size_t) m);
	sumsq = malloc(sizeof(double) * (size_t) m);
	mean = malloc(sizeof(double) * (size_t) d);
	idx = malloc(sizeof(int32_t) * (size_t) res->clusters);
	if (centres == NULL || mean_dist == NULL || sumsq == NULL ||
		mean == NULL || idx == NULL)
	{
		rc = gc_fail(st, GC_ENOMEM, "out of memory for the cluster scores");
		goto done;
	}
	rc = gc_cluster_summary_cpu(ctx, X, n, d, labels, m, size, centres, NULL,
								mean_dist, sumsq, st);
	if (rc != GC_OK)
		goto done;
	if ((rc = scores_mean(ctx, X, n, d, labels, res->rows, mean, st)) != GC_OK)
		goto done;
	for (int32_t c = 0; c < m; c++)
		if (size[c] > 0)
			idx[K++] = c;
	scores_ch(size, centres, sumsq, idx, K, d, mean, res->rows, res);
	rc = scores_db(ctx, centres, mean_dist, idx, K, d, &res->davies_bouldin, st);
done:
	if (rc != GC_OK)
		res->davies_bouldin = res->calinski_harabasz = res->inertia = NAN;
	free(size);
	free(centres);
	free(mean_dist);
	free(sumsq);
	free(mean);
	free(idx);
	return rc;
}
