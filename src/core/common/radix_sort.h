/*
 * radix_sort.h — parallel stable LSD radix sort of (uint64 key, int64 value)
 * pairs, touching only the low key_bits bits of the keys.
 */
#ifndef GPUCLUST_RADIX_SORT_H
#define GPUCLUST_RADIX_SORT_H

#include <stdint.h>

#include "common/core.h"

/*
 * Sorts keys[0..n) with vals alongside; tmpk/tmpv are scratch of n entries.
 * The result is in keys/vals.  Returns false (arrays in an unspecified order)
 * when ctx's cancel flag was seen between passes.  Never allocates except a
 * small histogram; returns false with *nomem set if that fails.
 */
bool		gc_radix_sort_kv(uint64_t *keys, int64_t *vals, int64_t n,
							 int key_bits, uint64_t *tmpk, int64_t *tmpv,
							 int nthreads, const gc_ctx *ctx, bool *nomem);

#endif							/* GPUCLUST_RADIX_SORT_H */
