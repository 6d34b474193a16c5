/*
 * max_heap.h — the k smallest floats seen so far, in a max-heap whose root
 * is the largest of them: the k-distances' search on both devices
 * (kdistance.c, cuda/dbscan/kdistance.cu).  Element e lives at h[e * stride]: the
 * CPU's heaps are arrays (stride 1), the GPU's are columns of one array a
 * batch of queries shares, so that a warp's accesses coalesce.  Plain C,
 * host and device (hostdevice.h).
 */
#ifndef GPUCLUST_MAX_HEAP_H
#define GPUCLUST_MAX_HEAP_H

#include <stdint.h>

#include "common/hostdevice.h"

/* v added to the heap of *size elements (one more afterwards). */
GC_HD void
gc_heap_push(float *h, int64_t stride, int64_t *size, float v)
{
	int64_t		i = (*size)++;

	while (i > 0)
	{
		int64_t		p = (i - 1) / 2;
		float		hp = h[p * stride];

		if (hp >= v)
			break;
		h[i * stride] = hp;
		i = p;
	}
	h[i * stride] = v;
}

/* The root of the full heap of k elements replaced by v, sifted down. */
GC_HD void
gc_heap_replace_top(float *h, int64_t stride, int64_t k, float v)
{
	int64_t		i = 0;

	for (;;)
	{
		int64_t		l = 2 * i + 1,
					r = l + 1,
					m = i;
		float		mv = v;

		if (l < k && h[l * stride] > mv)
		{
			m = l;
			mv = h[l * stride];
		}
		if (r < k && h[r * stride] > mv)
			m = r;
		if (m == i)
			break;
		h[i * stride] = h[m * stride];
		i = m;
	}
	h[i * stride] = v;
}

#endif							/* GPUCLUST_MAX_HEAP_H */
