/*
 * metric.c — the rows of the cosine metric (metric.h), for DBSCAN, HDBSCAN
 * and k-means alike: the unit rows, and the zero rows that have none.
 */
#include <stdlib.h>

#include "common/core.h"
#include "common/metric.h"

int64_t
gc_first_zero_row(const float *X, int64_t n, int d)
{
	for (int64_t i = 0; i < n; i++)
	{
		int			j = 0;

		while (j < d && X[i * d + j] == 0.0f)
			j++;
		if (j == d)
			return i;
	}
	return -1;
}

void
gc_unit_rows(const gc_ctx *ctx, const float *X, int64_t n, int d, float *U)
{
	const int	team = gc_region_threads(gc_team_adapt(ctx), n / 4096);

#pragma omp parallel for num_threads(team) schedule(static)
	for (int64_t i = 0; i < n; i++)
		(void) gc_unit_row(X + i * d, d, U + i * d);
}

gc_code
gc_cosine_rows(const gc_ctx *ctx, const float *X, int64_t n, int d,
			   const float **rows, float **own, gc_status *st)
{
	int64_t		zero;

	*rows = X;
	*own = NULL;
	if (n == 0)
		return GC_OK;
	if ((zero = gc_first_zero_row(X, n, d)) >= 0)
		return gc_fail(st, GC_EINVAL,
					   "row %lld has all features 0: its cosine distance is undefined",
					   (long long) zero + 1);
	if ((*own = malloc(sizeof(float) * (size_t) n * (size_t) d)) == NULL)
		return gc_fail(st, GC_ENOMEM, "out of memory for the unit rows of %lld points",
					   (long long) n);
	gc_unit_rows(ctx, X, n, d, *own);
	*rows = *own;
	return GC_OK;
}
