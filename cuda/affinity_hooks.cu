/*
 * affinity_hooks.cu — the GPU affinity propagation's test-only entry point
 * (src/core/gpu.h, under GC_TESTING): the rows ap_rows keeps in flight on
 * a multiprocessor, and the shared memory a row keeps its columns in, for
 * the tests and the bench.  Linked into the GPU tests and
 * benchmarks only.
 */
#define GC_TESTING 1

#include "gpu.h"

extern int	gc_ap_row_blocks_per_sm;
extern long gc_ap_row_keep_bytes;

extern "C" void
gc_ap_gpu_set_row_blocks(int per_sm)
{
	gc_ap_row_blocks_per_sm = per_sm > 0 ? per_sm : 1;
}

extern "C" void
gc_ap_gpu_set_row_keep(long bytes)
{
	gc_ap_row_keep_bytes = bytes;
}
