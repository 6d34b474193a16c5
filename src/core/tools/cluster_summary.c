/*
 * cluster_summary.c — the size, centre and radius of each cluster of any
 * labelling (k-means, DBSCAN with its noise, a user's own).
 *
 * Two passes over the rows in input order: the centre of cluster c is the
 * mean of its rows' features, summed in double in row order (so it does not
 * depend on the thread count); then each row's Euclidean distance to its
 * centre (double: sqrt of the double sum of squared differences between
 * the float32 feature and the double centre) gives the radius (largest)
 * and the mean distance, and the squares (each that sum, before the sqrt)
 * the sum of squares (cluster_scores.c's inertia).  Rows with a negative
 * label are left out.
 * Parallel over the features of the first pass and over clusters in the
 * second would complicate the determinism for little gain at these costs:
 * both passes are O(n d) and sequential, polling the cancel flags every
 * 64k rows.
 */
#include <math.h>
#include <string.h>

#include "tools/tools.h"

#define SUM_CANCEL_EVERY 65536

gc_code
gc_cluster_summary_cpu(const gc_ctx *ctx, const float *X, int64_t n, int d,
					   const int32_t *labels, int32_t m, int64_t *sizes,
					   double *centres, double *radius, double *mean_dist,
					   double *sumsq, gc_status *st)
{
	st->code = GC_OK;
	st->message[0] = '\0';
	if (m < 0 || n < 0 || (n > 0 && (X == NULL || labels == NULL)))
		return gc_fail(st, GC_EINVAL, "bad arguments");
	memset(sizes, 0, sizeof(int64_t) * (size_t) m);
	memset(centres, 0, sizeof(double) * (size_t) m * (size_t) d);
	memset(mean_dist, 0, sizeof(double) * (size_t) m);
	if (radius != NULL)
		memset(radius, 0, sizeof(double) * (size_t) m);
	if (sumsq != NULL)
		memset(sumsq, 0, sizeof(double) * (size_t) m);
	gc_report(ctx, GC_PHASE_ITERATE, 0, 0, 0, 0, NAN);
	for (int64_t i = 0; i < n; i++)
	{
		int32_t		c = labels[i];

		if ((i % SUM_CANCEL_EVERY) == 0 && gc_cancelled(ctx))
			return gc_fail(st, GC_ECANCEL, "canceled");
		if (c >= m)
			return gc_fail(st, GC_EINTERNAL, "label %d out of range", c);
		if (c < 0)
			continue;
		sizes[c]++;
		for (int j = 0; j < d; j++)
			centres[(int64_t) c * d + j] += (double) X[i * d + j];
	}
	for (int32_t c = 0; c < m; c++)
		for (int j = 0; j < d; j++)
			centres[(int64_t) c * d + j] = sizes[c] > 0 ?
				centres[(int64_t) c * d + j] / (double) sizes[c] : NAN;
	for (int64_t i = 0; i < n; i++)
	{
		int32_t		c = labels[i];
		double		s = 0.0,
					dist;

		if ((i % SUM_CANCEL_EVERY) == 0 && gc_cancelled(ctx))
			return gc_fail(st, GC_ECANCEL, "canceled");
		if (c < 0)
			continue;
		for (int j = 0; j < d; j++)
		{
			double		t = (double) X[i * d + j] - centres[(int64_t) c * d + j];

			s += t * t;
		}
		dist = sqrt(s);
		if (radius != NULL && dist > radius[c])
			radius[c] = dist;
		mean_dist[c] += dist;
		if (sumsq != NULL)
			sumsq[c] += s;
	}
	for (int32_t c = 0; c < m; c++)
	{
		if (sizes[c] > 0)
			mean_dist[c] /= (double) sizes[c];
		else
		{
			mean_dist[c] = NAN;
			if (radius != NULL)
				radius[c] = NAN;
			if (sumsq != NULL)
				sumsq[c] = NAN;
		}
	}
	return GC_OK;
}
