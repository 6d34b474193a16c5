/*
 * dbscan_hooks.cu — the GPU DBSCAN's test-only entry points: gc_dbscan_gpu
 * with a forced index (src/core/common/gpu.h, under GC_TESTING), the brute
 * force (dbscan_brute.cu) among them, and the held limit of a split call.  Linked into the GPU tests and
 * benchmarks only (the Makefile's CU_TEST_SRCS).
 */
#define GC_TESTING 1

#include "dbscan_gpu.cuh"

extern "C" gc_code
gc_dbscan_gpu_index(const gc_ctx *ctx, const float *X, int64_t n, int d,
					const gc_dbscan_params *p, gc_dbscan_gpu_index_kind index,
					gc_dbscan_gpu_index_kind *used, int32_t *labels,
					uint8_t *is_core, gc_status *st)
{
	db_index	u = DB_INDEX_AUTO;
	gc_code		rc;

	/* the core's entry checks (gc_dbscan_on_gpu's), then the forced index */
	if ((rc = gc_dbscan_check(ctx, X, n, d, p, labels, is_core, st)) != GC_OK)
		return rc;
	rc = db_run(ctx, X, n, d, p,
				index == GC_DBSCAN_GPU_GRID ? DB_INDEX_GRID :
				index == GC_DBSCAN_GPU_BRUTE ? DB_INDEX_BRUTE :
				index == GC_DBSCAN_GPU_TREE ? DB_INDEX_TREE :
				index == GC_DBSCAN_GPU_TREE_CYCLIC ? DB_INDEX_TREE_CYCLIC : DB_INDEX_AUTO,
				db_brute, &u, labels, is_core, st);
	if (used != NULL)
		*used = u == DB_INDEX_GRID ? GC_DBSCAN_GPU_GRID :
			u == DB_INDEX_BRUTE ? GC_DBSCAN_GPU_BRUTE :
			u == DB_INDEX_TREE ? GC_DBSCAN_GPU_TREE : GC_DBSCAN_GPU_AUTO;
	return rc;
}

extern "C" void
gc_dbscan_gpu_set_split_held(double x)
{
	db_split_held_max = x < 0 ? DB_SPLIT_HELD_MAX : x;
}
