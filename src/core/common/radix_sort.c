/*
 * radix_sort.c — parallel stable LSD radix sort of key/value pairs.
 *
 * Each pass: every thread counts the digits of its own static slice, one
 * thread turns the (digit, thread) counts into offsets, and every thread
 * scatters its slice.  Digit-major, thread-minor offsets keep it stable.
 */
#include <stdlib.h>
#include <string.h>
#include <omp.h>

#include "common/radix_sort.h"

#define RADIX_BITS 11
#define RADIX_SIZE (1 << RADIX_BITS)

bool
gc_radix_sort_kv(uint64_t *keys, int64_t *vals, int64_t n, int key_bits,
				 uint64_t *tmpk, int64_t *tmpv, int nthreads,
				 const gc_ctx *ctx, bool *nomem)
{
	int			npass = (key_bits + RADIX_BITS - 1) / RADIX_BITS;
	int64_t    *hist;
	bool		cancelled = false;
	uint64_t   *srck = keys,
			   *dstk = tmpk;
	int64_t    *srcv = vals,
			   *dstv = tmpv;

	*nomem = false;
	if (npass == 0 || n < 2)
		return true;
	if (nthreads < 1)
		nthreads = 1;
	hist = malloc(sizeof(int64_t) * RADIX_SIZE * (size_t) nthreads);
	if (hist == NULL)
	{
		*nomem = true;
		return false;
	}

	for (int pass = 0; pass < npass; pass++)
	{
		int			shift = pass * RADIX_BITS;

		if (gc_cancelled(ctx))
		{
			cancelled = true;
			break;
		}
#pragma omp parallel num_threads(nthreads)
		{
			int			t = omp_get_thread_num();
			int			nt = omp_get_num_threads();
			int64_t		lo = n * t / nt,
						hi = n * (t + 1) / nt;
			int64_t    *h = hist + (size_t) t * RADIX_SIZE;

			memset(h, 0, sizeof(int64_t) * RADIX_SIZE);
			for (int64_t i = lo; i < hi; i++)
				h[(srck[i] >> shift) & (RADIX_SIZE - 1)]++;
#pragma omp barrier
#pragma omp single
			{
				int64_t		sum = 0;

				for (int b = 0; b < RADIX_SIZE; b++)
					for (int u = 0; u < nt; u++)
					{
						int64_t		c = hist[(size_t) u * RADIX_SIZE + b];

						hist[(size_t) u * RADIX_SIZE + b] = sum;
						sum += c;
					}
			}
			for (int64_t i = lo; i < hi; i++)
			{
				int64_t		o = h[(srck[i] >> shift) & (RADIX_SIZE - 1)]++;

				dstk[o] = srck[i];
				dstv[o] = srcv[i];
			}
		}
		{
			uint64_t   *tk = srck;
			int64_t    *tv = srcv;

			srck = dstk;
			srcv = dstv;
			dstk = tk;
			dstv = tv;
		}
	}
	free(hist);
	if (cancelled)
		return false;
	if (srck != keys)
	{
#pragma omp parallel for num_threads(nthreads) schedule(static)
		for (int64_t i = 0; i < n; i++)
		{
			keys[i] = srck[i];
			vals[i] = srcv[i];
		}
	}
	return true;
}
