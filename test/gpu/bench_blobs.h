/*
 * bench_blobs.h — the k-means benchmarks' rows (bench_kmeans_stream,
 * bench_kmeans_multi): m centres in [-10, 10)^d, each row one of them plus
 * uniform noise of width 1, from a counter-based hash of the row and
 * feature, so any number of threads makes the same rows.
 */
#ifndef GPUCLUST_BENCH_BLOBS_H
#define GPUCLUST_BENCH_BLOBS_H

#include <stdint.h>
#include <stdlib.h>

static uint64_t
blobs_mix(uint64_t z)
{
	z += UINT64_C(0x9e3779b97f4a7c15);
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

static double
blobs_u01(uint64_t h)
{
	return (double) (h >> 11) * 0x1.0p-53;
}

/* X (n x d, allocated by the caller) on threads threads; 0 when the
 * centres' memory could not be had. */
static int
blobs_fill(float *X, int64_t n, int d, int m, int threads)
{
	float	   *cent = malloc(sizeof(float) * (size_t) m * d);

	if (cent == NULL)
		return 0;
	for (int64_t i = 0; i < (int64_t) m * d; i++)
		cent[i] = (float) (20 * blobs_u01(blobs_mix(UINT64_C(1) << 62 | (uint64_t) i)) - 10);
#pragma omp parallel for schedule(static) num_threads(threads)
	for (int64_t i = 0; i < n; i++)
	{
		uint64_t	h = blobs_mix((uint64_t) i);
		const float *c = cent + (int64_t) (h % (uint64_t) m) * d;
		float	   *x = X + i * d;

		for (int j = 0; j < d; j++)
		{
			h = blobs_mix(h + (uint64_t) j);
			x[j] = c[j] + (float) (blobs_u01(h) - 0.5);
		}
	}
	free(cent);
	return 1;
}

#endif
