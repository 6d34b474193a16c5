/*
 * affinity_hooks.cu — the GPU affinity propagation's test-only entry point
 * (src/core/gpu.h, under GC_TESTING): the shared memory ap_rows keeps a
 * row's columns in, for the tests and the bench.  Linked into the GPU
 * tests and benchmarks only.
 */
#define GC_TESTING 1

#include "gpu.h"

extern long gc_ap_row_keep_bytes;

extern "C" void
gc_ap_gpu_set_row_keep(long bytes)
{
	gc_ap_row_keep_bytes = bytes;
}
