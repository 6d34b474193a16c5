/*
 * knn_eps.h — an eps for DBSCAN test and benchmark data (test_dbscan_gpu,
 * bench_dbscan_gpu): the median over KNN_EPS_ROWS sampled rows of the
 * distance to the k-th nearest other row, by gc_dist2 over all rows, the
 * rows searched on all cores.  The caller draws the rows (each program from
 * its own generator, so that its data and eps stay what they were).
 */
#ifndef GPUCLUST_KNN_EPS_H
#define GPUCLUST_KNN_EPS_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/metric.h"

#define KNN_EPS_ROWS 24

static int
knn_eps_cmp(const void *a, const void *b)
{
	float		x = *(const float *) a,
				y = *(const float *) b;

	return (x > y) - (x < y);
}

static double
knn_eps(const float *X, int64_t n, int d, int k, const int64_t rows[KNN_EPS_ROWS])
{
	float		kd[KNN_EPS_ROWS];

	if (k >= n)
		k = (int) n - 1;
	if (k < 1)
		k = 1;
#pragma omp parallel for schedule(dynamic, 1)
	for (int s = 0; s < KNN_EPS_ROWS; s++)
	{
		float	   *best = malloc(sizeof(float) * (k + 1));
		const float *xi = X + rows[s] * d;
		int			nb = 0;

		for (int64_t j = 0; j < n; j++)
		{
			float		dd = gc_dist2(xi, X + j * d, d);
			int			t;

			if (nb == k + 1 && dd >= best[k])
				continue;
			t = nb < k + 1 ? nb++ : k;
			while (t > 0 && best[t - 1] > dd)
			{
				best[t] = best[t - 1];
				t--;
			}
			best[t] = dd;
		}
		kd[s] = sqrtf(best[nb - 1]);
		free(best);
	}
	qsort(kd, KNN_EPS_ROWS, sizeof(float), knn_eps_cmp);
	return kd[KNN_EPS_ROWS / 2] > 0 ? kd[KNN_EPS_ROWS / 2] : 1e-3;
}

#endif
