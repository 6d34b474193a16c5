/*
 * hdbscan_common.h — what test_hdbscan_gpu and bench_hdbscan share: the
 * default memory pool's high-water mark (the device memory a call used),
 * and HDBSCAN's benchmark data, scikit-learn's make_blobs recipe of the issue, nb centres
 * uniform in [-10, 10]^d (center_box), n - n / 11 rows Gaussian around them
 * (cluster_std 0.6, the centre drawn per row), then n / 11 rows uniform over
 * the blobs' bounding box (110k: 100,000 + 10,000).  testutil.h's generator.
 */
#ifndef GPUCLUST_HDBSCAN_COMMON_H
#define GPUCLUST_HDBSCAN_COMMON_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "testutil.h"

/*
 * The default pool's high-water mark, where every allocation of the GPU
 * calls comes from (check.cuh's gc_dalloc): reset (returns 0) or read
 * (bytes).
 */
static size_t
pool_peak(bool reset)
{
	cudaMemPool_t pool;
	unsigned long long v = 0;	/* the attribute is 64 bits */

	if (cudaDeviceGetDefaultMemPool(&pool, 0) != cudaSuccess)
		return 0;
	if (reset)
		cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &v);
	else
		cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &v);
	return reset ? 0 : (size_t) v;
}

static float *
make_blobs_noise(uint64_t *rs, int64_t n, int d, int nb)
{
	float	   *X = malloc(sizeof(float) * (size_t) n * d),
			   *ctr = malloc(sizeof(float) * (size_t) nb * d),
			   *lo = malloc(sizeof(float) * d),
			   *hi = malloc(sizeof(float) * d);
	const int64_t nblob = n - n / 11;

	for (int i = 0; i < nb * d; i++)
		ctr[i] = (float) (20.0 * tu_uniform(rs) - 10.0);
	for (int j = 0; j < d; j++)
		lo[j] = INFINITY, hi[j] = -INFINITY;
	for (int64_t i = 0; i < nblob; i++)
	{
		const int	c = (int) (tu_next(rs) % (uint64_t) nb);

		for (int j = 0; j < d; j++)
		{
			/* Box-Muller: one normal deviate from two uniforms */
			const double r = sqrt(-2.0 * log(tu_uniform(rs) + 1e-300));
			const float v = (float) (ctr[c * d + j] + 0.6 * r * cos(2.0 * M_PI * tu_uniform(rs)));

			X[i * d + j] = v;
			lo[j] = v < lo[j] ? v : lo[j];
			hi[j] = v > hi[j] ? v : hi[j];
		}
	}
	for (int64_t i = nblob; i < n; i++)
		for (int j = 0; j < d; j++)
			X[i * d + j] = nblob > 0 ? (float) (lo[j] + (hi[j] - lo[j]) * tu_uniform(rs))
				: (float) tu_uniform(rs);
	free(ctr);
	free(lo);
	free(hi);
	return X;
}

/* Elements of count (of elem bytes each) whose bits differ. */
static inline int64_t
bits_diff(const void *x, const void *y, int64_t count, size_t elem)
{
	int64_t		bad = 0;

	for (int64_t i = 0; i < count; i++)
		bad += memcmp((const char *) x + i * elem, (const char *) y + i * elem, elem) != 0;
	return bad;
}

#endif							/* GPUCLUST_HDBSCAN_COMMON_H */
