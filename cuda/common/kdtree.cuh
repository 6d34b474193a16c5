/*
 * kdtree.cuh — the balanced kd-tree over n points on the GPU, shared by the
 * algorithms that search neighbours (internal to cuda/): the GPU DBSCAN
 * (cuda/dbscan/dbscan_tree.cu), the k-distances (cuda/dbscan/kdistance.cu)
 * and HDBSCAN (cuda/hdbscan/).  kdtree.cu builds it.
 *
 * The tree is balanced and implicit, built on the GPU level by level:
 * node j of level l holds positions [j n / 2^l, (j + 1) n / 2^l), so a
 * node's children are its halves; every leaf is at level `depth`, with
 * leaf to 2 leaf points (fewer when n < 2 leaf: the root is then the one
 * leaf).  At each level a node's exact box (per-dimension minimum and
 * maximum, float atomics on an order-preserving encoding) gives its widest
 * dimension, and one CUB radix sort of all positions by (node, coordinate
 * along the node's dimension) splits every node at its median.  Once the
 * nodes hold at most 2048 points, a block a node makes the levels below
 * it in shared memory, the same boxes and the same order (a stable block
 * radix sort by the same keys).  The boxes are final as they are made
 * (later levels permute only inside a node), so every node keeps the exact
 * box of its points.  Memory: the rows once more in position order, the
 * boxes (n d / leaf floats at most each side), O(n) more.
 */
#ifndef GPUCLUST_KDTREE_CUH
#define GPUCLUST_KDTREE_CUH

#include <stdint.h>

#include <cuda_runtime.h>

#include "common/check.cuh"
#include "gpuclust_core.h"

#pragma GCC visibility push(hidden)	/* internal to cuda/ */

/* Node j of level l holds positions [tr_off(j), tr_off(j + 1)). */
__host__ __device__ __forceinline__ int
tr_off(int64_t j, int n, int l)
{
	return (int) ((j * (int64_t) n) >> l);
}

/* The node of level l that holds position p. */
__host__ __device__ __forceinline__ int64_t
tr_node_of(int p, int n, int l)
{
	return ((((int64_t) p + 1) << l) + n - 1) / n - 1;
}

/* The balanced kd-tree over n points (positions: the rows in its order). */
struct gc_kdtree
{
	int			n,
				d;
	int			depth;			/* leaves at this level: leaf..2 leaf points */
	int			qlevel;			/* query nodes: depth - 1 (or 0) */
	int64_t		nleaf,
				nq,
				nnode;			/* heap order: node h has children 2h+1, 2h+2 */
	float	   *lo,
			   *hi;				/* nnode x d: each node's exact box */
	int		   *perm;			/* position -> row */
	int		   *pos_of_row;		/* row -> position */
	float	   *Xs;				/* the rows in position order */
};

/* Points a leaf holds at least, but for HDBSCAN's low dimensions. */
#define GC_KDTREE_LEAF 32

/*
 * The tree over X (device, n x d, 1 <= n < 2^31) with leaves of leaf to 2
 * leaf points: T's arrays allocated in D.  Each node splits along its
 * widest dimension, or (cyclic, tests only) level l along dimension l mod
 * d.  blocks: the small nodes' levels by k_tr_block (every caller; false:
 * all device-wide, the tests' reference).  The cancel flags are polled at
 * the end.
 */
gc_code		gc_kdtree_build(gc_dev &D, const gc_ctx *ctx, const float *X, int n,
							int d, int leaf, bool cyclic, bool blocks,
							gc_kdtree &T, gc_status *st);

#pragma GCC visibility pop

#endif							/* GPUCLUST_KDTREE_CUH */
