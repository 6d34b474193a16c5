/*
 * dbscan_gpu.cuh — what the GPU DBSCAN's files share (internal to cuda/):
 * the call's scoped device resources (db_dev) and error plumbing, the phase
 * timings, the lock-free union-find, and the phases each file provides:
 *   dbscan.cu         the entry points: the GPU's limits, upload, index choice;
 *   dbscan_grid.cu    the uniform grid (d <= 3);
 *   dbscan_brute.cu   the tiled brute force (any d; the GPU tests only);
 *   dbscan_tree.cu    the passes on the kd-tree (common/kdtree.cuh; any d);
 *   dbscan_dclust.cu  CUDA-DClust's chains on the tree;
 *   dbscan_number.cu  cluster numbers by lowest row, and the download;
 *   dbscan_multi.cu   one call split over several GPUs (slabs, halos, merge);
 *   dbscan_hooks.cu   test-only entry points (never in the extension).
 * The distance and its bounds are metric.h's, the grid's cells
 * grid_plan.h's: the CPU's own definitions.
 */
#ifndef GPUCLUST_DBSCAN_GPU_CUH
#define GPUCLUST_DBSCAN_GPU_CUH

#include <atomic>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include <cuda_runtime.h>

#include "common/check.cuh"
#include "common/gpu.h"
#include "common/kdtree.cuh"
#include "common/launch.cuh"
#include "common/metric.h"

/*
 * Everything here is internal to cuda/: gpuclust.so exports only gpu.h's
 * entry points (the test programs link the objects and still see it).
 */
#pragma GCC visibility push(hidden)

#define DB_THREADS 256

/* ------------------------------------------------------------------ */
/* phases, tracing, errors                                             */
/* ------------------------------------------------------------------ */

/* The phases of the current (or last) call (dbscan.cu). */
extern thread_local gc_dbscan_gpu_phases db_phases;

/* GPUCLUST_DB_TRACE=1: each step's end on stderr (debugging hangs). */
void		db_trace(const char *what, long long v);

/* In a function returning gc_code with gc_status *st in scope (check.cuh). */
#define DB_CK(expr) GC_CUDA_CK("GPU DBSCAN", expr)

/* The device resources of one call (check.cuh's gc_dev), its allocation time in db_phases.ms_alloc. */
using db_dev = gc_dev;

#define DB_ALLOC(p, count) DB_CK(D.alloc((p), (count)))

/*
 * min_pts as the paths count it: at most n + 1 (no point is core then),
 * so it fits an unsigned.
 */
static inline unsigned
db_minp(const gc_dbscan_params *p, int64_t n)
{
	return p->min_pts > n + 1 ? (unsigned) (n + 1) : (unsigned) p->min_pts;
}

/*
 * Whether a path that is on by default is on: unless the environment's
 * name is "0" (tests and benchmarks turn paths off to compare).
 */
static inline bool
db_env_on(const char *name)
{
	const char *v = getenv(name);

	return v == NULL || strcmp(v, "0") != 0;
}

/* Synchronise, then poll the cancel flags. */
static inline gc_code
db_sync_poll(db_dev &D, const gc_ctx *ctx, gc_status *st)
{
	return gc_sync_poll(D, ctx, "GPU DBSCAN", st);
}

/* ------------------------------------------------------------------ */
/* union-find                                                          */
/* ------------------------------------------------------------------ */

__device__ __forceinline__ int
uf_find(int *parent, int x)
{
	volatile int *vp = parent;
	int			r = x,
				p;

	while ((p = vp[r]) != r)
		r = p;

	/*
	 * Compress, storing r only into nodes whose parent is still above
	 * index r.  Ancestors of x form one chain whose indices fall as it
	 * rises, so a parent p > r has r among its ancestors: the store keeps
	 * every parent an ancestor and parent[x] <= x, hence no cycle.  (The
	 * unguarded "until p == r" walk can pass above r when another thread
	 * has compressed the path to a newer root meanwhile, and then store
	 * r > x into x: a cycle, and finds that never end.)
	 */
	while ((p = vp[x]) > r)
	{
		vp[x] = r;
		x = p;
	}
	return r;
}

__device__ __forceinline__ void
uf_union(int *parent, int a, int b)
{
	for (;;)
	{
		a = uf_find(parent, a);
		b = uf_find(parent, b);
		if (a == b)
			return;
		if (a < b)
		{
			int			t = a;

			a = b;
			b = t;
		}
		/* a is the higher root: hang it under b */
		if (atomicCAS(&parent[a], a, b) == a)
			return;
	}
}

/*
 * minv[key] = min(minv[key], val) for the warp's lanes, one atomicMin per
 * distinct key (key < 0: none): lanes that share a key (a cluster's rows
 * side by side) take their least first, so a large cluster does not put
 * millions of atomics on one address.  Every lane of the warp calls it.
 */
__device__ __forceinline__ void
db_warp_min(int *minv, int key, int val)
{
	unsigned	same = __match_any_sync(0xffffffffu, key);
	int			least = __reduce_min_sync(same, val);

	if (key >= 0 && (threadIdx.x & 31) == __ffs(same) - 1 &&
		least < *(volatile int *) &minv[key])
		atomicMin(&minv[key], least);
}

/* ------------------------------------------------------------------ */
/* one tile of distances                                               */
/* ------------------------------------------------------------------ */

/*
 * The dimensions a tile holds for rows of d dimensions (db_tile_dist2's
 * DC: 4, 8 or 16), and d rounded up to them (its dpad).
 */
__host__ __device__ __forceinline__ int
db_tile_dc(int d)
{
	return d <= 4 ? 4 : d <= 8 ? 8 : 16;
}

__host__ __device__ __forceinline__ int
db_tile_dpad(int d)
{
	return (d + db_tile_dc(d) - 1) / db_tile_dc(d) * db_tile_dc(d);
}

/*
 * acc[jj] = gc_dist2(x, row j0 + jj of C) for the TJ candidate rows from
 * j0 (C row-major, d columns; rows at or past c1 read as zeros), the rows
 * loaded DC dimensions at a time into sh (TJ * DC floats) by the block's NT
 * threads.  Every thread of the block calls it (it synchronises); one with
 * compute false only helps load.  Zero padding adds +0, so each sum is
 * gc_dist2's exactly.  The brute force and the tree's passes share it.
 */
template <int TJ, int DC, int NT>
__device__ __forceinline__ void
db_tile_dist2(float (&acc)[TJ], const float *__restrict__ x, bool compute,
			  const float *__restrict__ C, int j0, int c1, int d, int dpad,
			  float4 *sh)
{
#pragma unroll
	for (int jj = 0; jj < TJ; jj++)
		acc[jj] = 0.0f;
	for (int k0 = 0; k0 < dpad; k0 += DC)
	{
		float		xq[DC];

		__syncthreads();
		for (int e = threadIdx.x; e < TJ * DC; e += NT)
		{
			int			j = j0 + e / DC,
						k = k0 + e % DC;

			((float *) sh)[e] = (j < c1 && k < d) ? C[(int64_t) j * d + k] : 0.0f;
		}
		__syncthreads();
		if (!compute)
			continue;
#pragma unroll
		for (int kk = 0; kk < DC; kk++)
			xq[kk] = k0 + kk < d ? x[k0 + kk] : 0.0f;
#pragma unroll
		for (int jj = 0; jj < TJ; jj++)
		{
			float		s = acc[jj];

#pragma unroll
			for (int k4 = 0; k4 < DC / 4; k4++)
			{
				float4		v = sh[jj * (DC / 4) + k4];

				s = gc_l2_step(s, xq[4 * k4 + 0], v.x);
				s = gc_l2_step(s, xq[4 * k4 + 1], v.y);
				s = gc_l2_step(s, xq[4 * k4 + 2], v.z);
				s = gc_l2_step(s, xq[4 * k4 + 3], v.w);
			}
			acc[jj] = s;
		}
	}
}

/* ------------------------------------------------------------------ */
/* the phases                                                          */
/* ------------------------------------------------------------------ */

/* Which index a call uses. */
enum db_index
{
	DB_INDEX_AUTO = 0,			/* grid for d <= 3 when it fits, else tree */
	DB_INDEX_GRID,				/* d <= 3; the tree when it does not fit */
	DB_INDEX_BRUTE,				/* union-find only */
	DB_INDEX_TREE,
	DB_INDEX_TREE_CYCLIC		/* tests only: level l splits dimension l mod d */
};

/*
 * Where a path puts its labels and core flags (n each, by position of its
 * input): the caller's host arrays (the call's answer), or, device true,
 * device arrays that outlive the path (a slab of a split call,
 * dbscan_multi.cu), with *clusters set to the number of clusters.
 */
struct db_out
{
	int32_t    *labels;
	uint8_t    *is_core;
	bool		device;
	int		   *clusters;		/* device: set; may be NULL otherwise */
};

/* A path of the GPU DBSCAN over the n points X (device). */
typedef gc_code (*db_path) (db_dev &D, const gc_ctx *ctx, const float *X,
							int n, int d, float eps2, unsigned minp,
							const db_out &out, gc_status *st);

/*
 * gc_dbscan_gpu with a chosen index; *used (may be NULL) says which ran
 * (dbscan.cu).  DB_INDEX_BRUTE runs brute, the tests' path (db_brute,
 * passed by dbscan_hooks.cu; NULL in the extension, which never asks for
 * it).  The caller has checked the arguments (gc_dbscan_check): CUDA
 * trusts the core.
 */
gc_code		db_run(const gc_ctx *ctx, const float *X, int64_t n, int d,
				   const gc_dbscan_params *p, db_index index, db_path brute,
				   db_index *used, int32_t *labels, uint8_t *is_core,
				   gc_status *st);

/*
 * The index choice and the run of db_run over the n >= 1 points X, already
 * on D's device, eps2 and minp as db_run derives them; the result to out
 * (dbscan.cu).
 */
gc_code		db_solve(db_dev &D, const gc_ctx *ctx, const float *X, int n, int d,
					 float eps2, unsigned minp, gc_dbscan_algorithm algorithm,
					 db_index index, db_path brute, db_index *used,
					 const db_out &out, gc_status *st);

/*
 * The most rows the slabs of a split call hold together, halos included,
 * over n: beyond, fewer slabs (dbscan_multi.cu; gc_dbscan_gpu_set_split_held
 * changes it for the tests).
 */
#define DB_SPLIT_HELD_MAX 1.5
extern std::atomic<double> db_split_held_max;

/*
 * db_run split over the GPUs of ctx (ctx->n_gpus >= 2, n >= 1), arguments
 * checked by db_run (dbscan_multi.cu).
 */
gc_code		db_multi(const gc_ctx *ctx, const float *X, int64_t n, int d,
					 const gc_dbscan_params *p, db_index index, db_path brute,
					 db_index *used, int32_t *labels, uint8_t *is_core,
					 gc_status *st);

/*
 * The grid path over the n points X (device, d <= 3), the result to out.
 * Returns GC_OK with *applied false, nothing done, when the plan does not
 * fit (dbscan_grid.cu).
 */
gc_code		db_grid(db_dev &D, const gc_ctx *ctx, const float *X, int n, int d,
					float eps2, unsigned minp, const db_out &out,
					bool *applied, gc_status *st);

/* The brute-force path, any d (dbscan_brute.cu: the GPU tests only). */
gc_code		db_brute(db_dev &D, const gc_ctx *ctx, const float *X, int n, int d,
					 float eps2, unsigned minp, const db_out &out,
					 gc_status *st);

/* ------------------------------------------------------------------ */
/* the kd-tree (dbscan_tree.cu) and CUDA-DClust (dbscan_dclust.cu)      */
/* ------------------------------------------------------------------ */

#define TR_Q 128				/* threads a query node: its points */

/* The tree (common/kdtree.cuh), by the name DBSCAN's files give it. */
using db_tree = gc_kdtree;

/*
 * The candidate leaves of the query nodes, or of the nodes hs[0 .. m) of
 * any level (the count's gathered pass), written a chunk of nodes at a
 * time.  List q is query node q's, or node hs[q]'s.
 */
struct db_lists
{
	const int  *hs = nullptr;	/* the lists' nodes (heap order), or NULL */
	int64_t    *at;				/* lists + 1: where list q starts */
	int		   *leaf;			/* the current chunk's lists */
	std::vector<int64_t> cut;	/* chunk c: query nodes [cut[c], cut[c+1]) */
	std::vector<int64_t> host_at;
	int			written;		/* the chunk in leaf, or -1 */
};

enum
{
	TR_COUNT,					/* neighbours, up to min_pts */
	TR_UNION,					/* union-find of core neighbours */
	TR_BORDER,					/* nearest core neighbour of non-core points */
	TR_EXPAND					/* dclust: the frontier claims its neighbours */
};

/* What a pass reads and writes (by position). */
struct db_pass
{
	float		eps2;
	unsigned	minp;
	int			dpad;			/* d rounded up to the tile's dimensions */
	const int64_t *at;			/* db_lists.at */
	const int  *hs;				/* db_lists.hs: block q takes node hs[q] */
	unsigned   *cnt;			/* count: carried between its two passes
								 * (the gathered one counts from 0) */
	int64_t		lbeg,
				lend;			/* count: this pass's part of each list */
	int		   *nb;				/* count: the first nbk neighbours a point */
	unsigned	nbk;			/* min_pts - 1 when small, else 0 (not kept) */
	uint8_t    *core;
	int		   *lcore;			/* core points a leaf */
	int		   *parent;			/* union */
	unsigned long long *best;	/* border: (dist2 bits, row) */
	uint8_t    *front,
			   *next;			/* expand: this round's and the next's */
	int		   *state;			/* expand: chain of a core point, or -1 */
	unsigned   *colmat;			/* expand: the collision matrix, G x G bits */
	int			G,				/* chains a generation (a multiple of 32) */
				base;			/* the generation's first chain */
	int		   *bad;			/* expand: set when a collision leaves it */
	unsigned long long *stats;	/* the screen's pairs: decided, left exact */
};

/* dclust: chains a and b (of this generation) met. */
__device__ __forceinline__ void
dc_collide(const db_pass &A, int a, int b)
{
	unsigned	la = (unsigned) (a - A.base),
				lb = (unsigned) (b - A.base);

	if (la >= (unsigned) A.G || lb >= (unsigned) A.G)
	{
		*A.bad = 1;
		return;
	}
	if (la > lb)
	{
		unsigned	t = la;

		la = lb;
		lb = t;
	}
	size_t		bit = (size_t) la * (unsigned) A.G + lb;
	unsigned	m = 1u << (bit & 31);

	if (!(((volatile unsigned *) A.colmat)[bit >> 5] & m))
		atomicOr(&A.colmat[bit >> 5], m);
}

/*
 * The candidate leaves of every query node (hs NULL) or of the m nodes
 * hs (device, heap order) counted, and the chunks planned.
 */
gc_code		db_tree_lists(db_dev &D, const gc_ctx *ctx, const db_tree &T,
						  float eps2, db_lists &L, gc_status *st,
						  const int *hs = nullptr, int64_t m = 0);

/*
 * For the increasing list qs[0 .. m) of query nodes, where each chunk of
 * lists starts: qs_cut[c] = the first k with qs[k] >= L.cut[c], for every
 * c of L.cut (so chunk c's nodes are qs[qs_cut[c] .. qs_cut[c+1])).
 */
void		db_tree_cuts(const db_lists &L, const int *qs, int64_t m,
						 int64_t *qs_cut);

/*
 * One pass over every query node (qs NULL), or over the increasing list
 * qs of query nodes, of which chunk c's are qs[qs_cut[c] .. qs_cut[c+1])
 * (db_tree_cuts).
 */
template <int MODE>
gc_code		db_tree_pass(db_dev &D, const gc_ctx *ctx, const db_tree &T,
						 db_lists &L, const db_pass &A, const int *qs,
						 const int64_t *qs_cut, gc_status *st);

/* DBSCAN on the tree, either algorithm (dbscan_tree.cu). */
gc_code		db_tree_run(db_dev &D, const gc_ctx *ctx, const float *X, int n,
						int d, float eps2, unsigned minp,
						gc_dbscan_algorithm algorithm, bool cyclic,
						const db_out &out, gc_status *st);

/*
 * CUDA-DClust's chains over the core points (A.core, A.lcore set): rp of
 * every core point its cluster's root position, -1 elsewhere
 * (dbscan_dclust.cu).
 */
gc_code		db_dclust(db_dev &D, const gc_ctx *ctx, const db_tree &T,
					  db_lists &L, db_pass &A, int *rp, gc_status *st);

/* Exclusive sum of n ints on D's stream (in place when in == out). */
gc_code		db_exclusive_sum(db_dev &D, const int *in, int *out, int64_t n,
							 gc_status *st);

/*
 * The result (labels, is_core in input order, to out) from rp (the root
 * position of each position's cluster, or -1) and core, by position;
 * perm: position -> row, NULL for the identity (dbscan_number.cu).
 */
gc_code		db_finish(db_dev &D, int n, const int *rp, const int *perm,
					  const uint8_t *core, const db_out &out, gc_status *st);

#pragma GCC visibility pop

#endif							/* GPUCLUST_DBSCAN_GPU_CUH */
