/*
 * bench_blobs.h — the k-means benchmarks' rows (bench_kmeans_stream,
 * bench_kmeans_multi): m centres in [-10, 10)^d, each row one of them plus
 * uniform noise of width 1, from a counter-based hash of the row and
 * feature, so any number of threads makes the same rows; and the GPUs the
 * split benchmarks (bench_kmeans_multi, bench_dbscan_multi) run over.
 */
#ifndef GPUCLUST_BENCH_BLOBS_H
#define GPUCLUST_BENCH_BLOBS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/gpu.h"

static inline uint64_t
blobs_mix(uint64_t z)
{
	z += UINT64_C(0x9e3779b97f4a7c15);
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

static inline double
blobs_u01(uint64_t h)
{
	return (double) (h >> 11) * 0x1.0p-53;
}

/* X (n x d, allocated by the caller) on threads threads; 0 when the
 * centres' memory could not be had. */
static inline int
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

/*
 * The GPUs a split runs over: every usable one, GPU 0 twice on a machine
 * of one; their count, 0 when none is usable.  Prints the first's name
 * under title.  Leaves GPU 0 current.
 */
static inline int
bench_gpus(int *gpus, int most, const char *title, int threads)
{
	int			n = 0;
	gc_cuda_device_info info;

	for (int g = 0; g < most; g++)
	{
		gc_cuda_probe(g, &info);
		if (!info.usable)
			break;
		if (g == 0)
			printf("%s: %s; host: %d threads\n", title, info.name, threads);
		gpus[n++] = g;
	}
	if (n == 0)
	{
		printf("no usable GPU\n");
		return 0;
	}
	gc_cuda_probe(0, &info);	/* GPU 0 current */
	if (n < 2)
	{
		printf("one GPU: the split runs two parts on it (GPUs 0, 0)\n");
		gpus[n++] = 0;
	}
	return n;
}

#endif
