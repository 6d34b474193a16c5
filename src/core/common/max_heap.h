/*
 * max_heap.h — the k smallest values seen so far, in a max-heap whose root
 * is the largest of them: the k-distances' search on both devices
 * (kdistance.c, cuda/dbscan/kdistance.cu) in float, HDBSCAN's core
 * distances in double (the _f64 functions).  Element e lives at
 * h[e * stride]: the CPU's heaps are arrays (stride 1), the GPU's are
 * columns of one array a batch of queries shares, so that a warp's
 * accesses coalesce.  Plain C, host and device (hostdevice.h).
 */
#ifndef GPUCLUST_MAX_HEAP_H
#define GPUCLUST_MAX_HEAP_H

#include <stdint.h>

#include "common/hostdevice.h"

/*
 * The two functions of a heap of T, named gc_heap_push##SUFFIX (v added to
 * the heap of *size elements, one more afterwards) and
 * gc_heap_replace_top##SUFFIX (the root of the full heap of k elements
 * replaced by v, sifted down).
 */
#define GC_MAX_HEAP_DEFINE(SUFFIX, T) \
GC_HD void \
gc_heap_push##SUFFIX(T *h, int64_t stride, int64_t *size, T v) \
{ \
	int64_t		i = (*size)++; \
\
	while (i > 0) \
	{ \
		int64_t		p = (i - 1) / 2; \
		T			hp = h[p * stride]; \
\
		if (hp >= v) \
			break; \
		h[i * stride] = hp; \
		i = p; \
	} \
	h[i * stride] = v; \
} \
\
GC_HD void \
gc_heap_replace_top##SUFFIX(T *h, int64_t stride, int64_t k, T v) \
{ \
	int64_t		i = 0; \
\
	for (;;) \
	{ \
		int64_t		l = 2 * i + 1, \
					r = l + 1, \
					m = i; \
		T			mv = v; \
\
		if (l < k && h[l * stride] > mv) \
		{ \
			m = l; \
			mv = h[l * stride]; \
		} \
		if (r < k && h[r * stride] > mv) \
			m = r; \
		if (m == i) \
			break; \
		h[i * stride] = h[m * stride]; \
		i = m; \
	} \
	h[i * stride] = v; \
}

GC_MAX_HEAP_DEFINE(, float)
GC_MAX_HEAP_DEFINE(_f64, double)

#endif							/* GPUCLUST_MAX_HEAP_H */
