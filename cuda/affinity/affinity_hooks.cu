/*
 * affinity_hooks.cu — the GPU affinity propagation's test-only entry point
 * (src/core/common/gpu.h, under GC_TESTING): the shared memory ap_rows keeps a
 * row's columns in, and the bytes of its next row it prefetches, for the
 * tests and the bench.  Linked into the GPU tests and benchmarks only.
 */
#define GC_TESTING 1

#include "common/gpu.h"

extern long gc_ap_row_keep_bytes;
extern long gc_ap_row_prefetch_bytes;

extern "C" void
gc_ap_gpu_set_row_keep(long bytes)
{
	gc_ap_row_keep_bytes = bytes;
}

extern "C" void
gc_ap_gpu_set_row_prefetch(long bytes)
{
	gc_ap_row_prefetch_bytes = bytes;
}
