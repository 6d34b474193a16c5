/*
 * dbscan.cu — exact DBSCAN on the GPU: gc_dbscan_gpu (src/core/common/gpu.h), with
 * the labels and core flags of gc_dbscan_cpu (src/core/dbscan/dbscan.c) on every
 * input.  This file owns the entry points (their arguments checked by
 * gc_dbscan_on_gpu): the GPU's limits, the upload, the choice of index,
 * the phase timings; the phases live beside it
 * (dbscan_gpu.cuh lists them).
 *
 * The one distance is metric.h's gc_dist2, the CPU's own definition: float32,
 * sum of squared differences in dimension order, each operation rounded on
 * its own (on the GPU with the round-to-nearest intrinsics, which no flag
 * contracts to FMA), compared with gc_eps2(eps).  Every shortcut is one of
 * metric.h's bounds, exact in float, so it changes the speed, never the
 * answer.
 *
 * Indexes: the uniform grid for d <= 3 (dbscan_grid.cu), the kd-tree
 * otherwise or when the grid's cell numbers would overflow
 * (dbscan_tree.cu), and the tiled brute force when a caller forces it
 * (dbscan_brute.cu, the tests' cross-check).  Algorithms: union-find on
 * every index, CUDA-DClust on the tree (dbscan_dclust.cu).  Components: a lock-free union-find over int32
 * positions (parent[x] <= x; an atomicCAS hangs the higher root under the
 * lower; finds compress).  Border: a non-core point takes the core
 * neighbour of least (dist2 bits, input row): the CPU's nearest-core rule,
 * ties to the lowest row.  Numbering by lowest input row, as the CPU
 * (dbscan_number.cu).
 *
 * Every CUDA call is checked (GC_ENOMEM for allocation failures, else
 * GC_EDEVICE); every launch goes through gc_launch (launch.cuh), which
 * launches nothing for an empty range; the cancel flags are polled between
 * phases and launches.  The data go up and the labels come back through
 * the pinned ring (transfer.cu).  Device memory: O(n) beyond the input
 * (gc_dbscan_gpu_mem_bytes), never an n x n matrix.  At most
 * GC_DBSCAN_GPU_MAX_N points.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dbscan_gpu.cuh"
#include "common/transfer.cuh"

/* per thread: the GPU worker runs jobs on several */
thread_local gc_dbscan_gpu_phases db_phases;

/* GPUCLUST_DB_TRACE=1: each step's end on stderr (debugging hangs). */
static int	trace_on = -1;

void
db_trace(const char *what, long long v)
{
	if (trace_on < 0)
		trace_on = getenv("GPUCLUST_DB_TRACE") != NULL;
	if (trace_on)
	{
		fprintf(stderr, "  [dbscan-gpu %.3f] %s %lld\n", gc_now_ms(), what, v);
		fflush(stderr);
	}
}

extern "C" void
gc_dbscan_gpu_last_phases(gc_dbscan_gpu_phases *out)
{
	*out = db_phases;
}

gc_code
db_solve(db_dev &D, const gc_ctx *ctx, const float *X, int n, int d,
		 float eps2, unsigned minp, gc_dbscan_algorithm algorithm,
		 db_index index, db_path brute, db_index *used, const db_out &out,
		 gc_status *st)
{
	gc_code		rc;
	bool		applied = false;

	if ((index == DB_INDEX_AUTO || index == DB_INDEX_GRID) && d <= 3 &&
		algorithm == GC_DBSCAN_UNION_FIND)
	{
		rc = db_grid(D, ctx, X, n, d, eps2, minp, out, &applied, st);
		if (rc != GC_OK)
			return rc;
		if (applied && used != NULL)
			*used = DB_INDEX_GRID;
	}
	if (!applied && index == DB_INDEX_BRUTE)
	{
		rc = brute(D, ctx, X, n, d, eps2, minp, out, st);
		if (rc != GC_OK)
			return rc;
		if (used != NULL)
			*used = DB_INDEX_BRUTE;
	}
	else if (!applied)
	{
		rc = db_tree_run(D, ctx, X, n, d, eps2, minp, algorithm,
						 index == DB_INDEX_TREE_CYCLIC, out, st);
		if (rc != GC_OK)
			return rc;
		if (used != NULL)
			*used = DB_INDEX_TREE;
	}
	return GC_OK;
}

gc_code
db_run(const gc_ctx *ctx, const float *X, int64_t n, int d,
	   const gc_dbscan_params *p, db_index index, db_path brute,
	   db_index *used, int32_t *labels, uint8_t *is_core, gc_status *st)
{
	gc_code		rc;
	double		t0 = gc_now_ms(),
				t_all = t0;

	memset(&db_phases, 0, sizeof(db_phases));
	if (used != NULL)
		*used = DB_INDEX_AUTO;
	if (index == DB_INDEX_GRID && d > 3)
		return gc_fail(st, GC_EINVAL, "the DBSCAN grid index needs d <= 3");
	if (index == DB_INDEX_BRUTE && brute == NULL)
		return gc_fail(st, GC_EINVAL, "the DBSCAN brute force is not in this build");
	if (index == DB_INDEX_BRUTE && p->algorithm == GC_DBSCAN_DCLUST)
		return gc_fail(st, GC_EINVAL, "DBSCAN algorithm dclust runs on the tree index");
	if (n == 0)
		return GC_OK;
	if (n > GC_DBSCAN_GPU_MAX_N)
		return gc_fail(st, GC_EDEVICE, "GPU DBSCAN handles at most %d points, got %lld",
					   GC_DBSCAN_GPU_MAX_N, (long long) n);
	if (ctx != NULL && ctx->n_gpus >= 2)
		return db_multi(ctx, X, n, d, p, index, brute, used, labels, is_core, st);

	db_dev		D;
	float	   *Xd;
	db_out		out = {labels, is_core, false, NULL};

	D.ms_alloc = &db_phases.ms_alloc;
	D.host_threads = gc_team_adapt(ctx);	/* the copies into the ring */
	db_phases.gpus = 1;
	gc_report(ctx, GC_PHASE_UPLOAD, 0, 0, 0, n, NAN);
	DB_CK(cudaStreamCreateWithFlags(&D.s, cudaStreamNonBlocking));
	DB_ALLOC(Xd, (int64_t) n * d);
	DB_CK(gc_xfer_h2d(Xd, X, sizeof(float) * (size_t) n * d, D.s, D.host_threads));
	DB_CK(cudaStreamSynchronize(D.s));
	db_phases.ms_upload = gc_now_ms() - t0;
	db_trace("uploaded; n", n);
	gc_report(ctx, GC_PHASE_INDEX, 0, 0, 0, n, NAN);

	rc = db_solve(D, ctx, Xd, (int) n, d, gc_eps2(p->eps), db_minp(p, n),
				  p->algorithm, index, brute, used, out, st);
	if (rc != GC_OK)
		return rc;
	gc_report(ctx, GC_PHASE_LABEL, 0, 0, n, n, NAN);
	t0 = gc_now_ms();
	D.release();
	db_phases.ms_free = gc_now_ms() - t0;
	db_phases.ms_total = gc_now_ms() - t_all;
	db_trace("done", 0);
	return GC_OK;
}

extern "C" gc_code
gc_dbscan_gpu(const gc_ctx *ctx, const float *X, int64_t n, int d,
			  const gc_dbscan_params *p, int32_t *labels, uint8_t *is_core,
			  gc_status *st)
{
	return db_run(ctx, X, n, d, p, DB_INDEX_AUTO, NULL, NULL, labels, is_core, st);
}

extern "C" size_t
gc_dbscan_gpu_mem_bytes(int64_t n, int d)
{
	/*
	 * An upper bound over the indexes and algorithms, in bytes a point.
	 * The kd-tree needs the most: the input (4d), its sorted copy (4d),
	 * node boxes (<= d) and their build copies (<= d), the build's
	 * permutations and keys (24), CUB's radix sort's scratch (<= 12), candidate
	 * lists (32: 8 entries, at least 8M in all) and, during the count's
	 * second pass, its gathered lists (32, at least 1M), counts and flags
	 * (5), kept neighbours (<= 32 x 4), union-find and border (16),
	 * numbering (21), CUDA-DClust's chains (32): 10d + 302.  The grid (d <= 3) needs at
	 * most 4d + 171, the brute force 8d + 40.
	 */
	size_t		per = (size_t) 10 * (size_t) d + 320;

	return (size_t) n * per + ((size_t) 48 << 20);
}
