/*
 * kdistance.cu — every row's k-distance on the GPU: gc_kdistance_gpu
 * (src/core/common/gpu.h), kdist2 bit for bit gc_kdistance_cpu's
 * (src/core/tools/kdistance.c): the k-th smallest float32 gc_dist2 from the row
 * to every row, the row itself counted.
 *
 * The index is the GPU's kd-tree (common/kdtree.cuh: balanced,
 * implicit, every node's exact box, leaves of 32 to 64 rows in position
 * order), as the CPU's k-distances run on the CPU DBSCAN's.  The search is
 * the CPU's, run by a warp for 32 consecutive positions at once (one
 * query a lane, neighbours in the tree, so their searches mostly agree):
 *   - each lane keeps its k smallest distances so far in a max-heap (in
 *     global memory, a column per lane: element e of the batch's query t
 *     at H[e B + t], so the lanes' accesses to one element coalesce);
 *   - the warp walks the tree depth first with one stack, uniform across
 *     its lanes: a node is entered when some lane needs it, i.e. its heap
 *     is not yet full or the box is not farther (metric.h's
 *     gc_box_mindist2, an exact lower bound of gc_dist2) than its heap's
 *     largest, the CPU's test; of two children, the one nearer to most
 *     lanes goes first;
 *   - at a leaf, each lane that needs it computes gc_dist2 to the leaf's
 *     rows (the same float32 sum in dimension order, every operation
 *     rounded on its own, as the CPU's) and keeps each below its heap's
 *     largest.
 * A node is skipped by a lane only when it holds no distance below that
 * lane's k-th, so each result is exact whatever the order of the walk: the
 * k-th smallest of a multiset does not depend on how it was found.  For d
 * up to 16 a lane holds its row in registers.
 *
 * Work: the distances computed depend on the data (a leaf is 32 to 64 rows;
 * a query in a dense region visits about k / 32 + a few leaves); the
 * brute-force bound is n^2 d subtractions, multiplications and additions.
 * Memory: the tree (common/kdtree.cu: about 9 n d + 44 n bytes with the
 * input), the k-distances (4 n) and the heaps of one batch of queries (4 k
 * a query, at most KD_HEAP_BYTES a batch but one block's worth).  The
 * queries go in batches: the cancel flags are polled and progress
 * reported (queries done of n, at most every 1%) between them.
 */
#include <math.h>
#include <string.h>

#include "dbscan_gpu.cuh"
#include "common/max_heap.h"
#include "common/transfer.cuh"

#pragma GCC visibility push(hidden)

#define KD_T 128				/* threads a block: 4 warps of queries */
#define KD_STACK 32				/* > depth + 1: depth <= 26 (n < 2^31, leaves of 32+) */
#define KD_HEAP_BYTES ((int64_t) 256 << 20) /* a batch's heaps, at most */
#define KD_BATCH_MAX ((int64_t) 1 << 18)	/* queries a launch, at most: about a wave of an H100 */

#define KD_CK(expr) GC_CUDA_CK("GPU k-distance", expr)

/*
 * One lane's query row: in registers for d <= DQ (DQ 4, 8 or 16), else
 * read from the tree's rows (DQ 0).  Both give metric.h's values bit for
 * bit: the same terms in dimension order, the same roundings.
 */
template <int DQ>
struct kd_query
{
	float		x[DQ];
	int			d;

	__device__ __forceinline__ kd_query(const float *__restrict__ q, int dd)
	{
		d = dd;
#pragma unroll
		for (int j = 0; j < DQ; j++)
			x[j] = j < d ? q[j] : 0.0f;
	}

	/* gc_dist2 whole (lim unused: a sum above it is so at its end too) */
	__device__ __forceinline__ float dist2(const float *__restrict__ p, float lim) const
	{
		float		s = 0.0f;

		(void) lim;
#pragma unroll
		for (int j = 0; j < DQ; j++)
			if (j < d)
				s = gc_l2_step(s, x[j], p[j]);
		return s;
	}

	__device__ __forceinline__ float box2(const float *__restrict__ lo,
										  const float *__restrict__ hi) const
	{
		float		s = 0.0f;

#pragma unroll
		for (int j = 0; j < DQ; j++)
			if (j < d)
				s = gc_l2_acc(s, gc_box_gap(x[j], lo[j], hi[j]));
		return s;
	}
};

template <>
struct kd_query<0>
{
	const float *x;
	int			d;

	__device__ __forceinline__ kd_query(const float *__restrict__ q, int dd)
	{
		x = q;
		d = dd;
	}

	/* gc_dist2 when <= lim, else some value > lim: as the CPU's search */
	__device__ __forceinline__ float dist2(const float *__restrict__ p, float lim) const
	{
		return gc_dist2_upto(x, p, d, lim);
	}

	__device__ __forceinline__ float box2(const float *__restrict__ lo,
										  const float *__restrict__ hi) const
	{
		return gc_box_mindist2(x, lo, hi, d);
	}
};

/*
 * The k-distances of positions p0 .. p0 + cnt - 1 into kd2 (by input row);
 * query t of the batch keeps its heap at H + t, stride B.
 */
template <int DQ>
__global__ void __launch_bounds__(KD_T)
k_kdist(db_tree T, int64_t k, int p0, int cnt, int64_t B,
		float *__restrict__ H, float *__restrict__ kd2)
{
	const unsigned FULL = 0xffffffffu;
	int			t = blockIdx.x * KD_T + threadIdx.x;
	int			d = T.d;
	bool		active = t < cnt;
	int			pos = p0 + (active ? t : 0);
	float	   *h = H + t;
	int64_t		size = 0;
	float		top = INFINITY; /* the heap's largest once full */
	int			stack[KD_STACK];
	int			sp = 0;

	if ((t & ~31) >= cnt)
		return;					/* the whole warp is past the batch */

	const kd_query<DQ> q(T.Xs + (int64_t) pos * d, d);

	stack[sp++] = 0;
	while (sp > 0)
	{
		int			node = stack[--sp];
		bool		need = active &&
			(size < k || !(q.box2(T.lo + (int64_t) node * d,
								  T.hi + (int64_t) node * d) > top));

		if (!__any_sync(FULL, need))
			continue;
		if (node >= T.nleaf - 1)
		{
			int64_t		leaf = node - (T.nleaf - 1);
			int			b = tr_off(leaf, T.n, T.depth),
						e = tr_off(leaf + 1, T.n, T.depth);

			if (!need)
				continue;
			for (int s = b; s < e; s++)
			{
				float		v = q.dist2(T.Xs + (int64_t) s * d, top);

				if (size < k)
				{
					gc_heap_push(h, B, &size, v);
					if (size == k)
						top = h[0];
				}
				else if (v < top)
				{
					gc_heap_replace_top(h, B, k, v);
					top = h[0];
				}
			}
		}
		else
		{
			int			a = 2 * node + 1,
						c = a + 1;
			bool		a_near = need &&
				q.box2(T.lo + (int64_t) a * d, T.hi + (int64_t) a * d) <=
				q.box2(T.lo + (int64_t) c * d, T.hi + (int64_t) c * d);
			int			votes = __popc(__ballot_sync(FULL, a_near)),
						voters = __popc(__ballot_sync(FULL, need));

			/* the child nearer to most lanes is popped first */
			if (2 * votes >= voters)
			{
				stack[sp++] = c;
				stack[sp++] = a;
			}
			else
			{
				stack[sp++] = a;
				stack[sp++] = c;
			}
		}
	}
	if (active)
		kd2[T.perm[pos]] = top;
}

/* Queries a launch: as many heaps as fit KD_HEAP_BYTES, in whole blocks. */
static int64_t
kd_batch(int64_t n, int64_t k)
{
	int64_t		b = KD_HEAP_BYTES / ((int64_t) sizeof(float) * k) / KD_T * KD_T;
	int64_t		nr = (n + KD_T - 1) / KD_T * KD_T;

	if (b < KD_T)
		b = KD_T;
	if (b > KD_BATCH_MAX)
		b = KD_BATCH_MAX;
	return b < nr ? b : nr;
}

template <int DQ>
static cudaError_t
kd_launch(const db_tree &T, int64_t k, int p0, int cnt, int64_t B, float *H,
		  float *kd2, cudaStream_t s)
{
	return gc_launch(k_kdist<DQ>, cnt, KD_T, KD_T, s, T, k, p0, cnt, B, H, kd2);
}

#pragma GCC visibility pop

extern "C" gc_code
gc_kdistance_gpu(const gc_ctx *ctx, const float *X, int64_t n, int d,
				 int64_t k, float *kdist2, gc_status *st)
{
	gc_code		rc;
	gc_loop_progress lp;

	/* gc_kdistance_on_gpu has checked the arguments */
	if (n > GC_DBSCAN_GPU_MAX_N)
		return gc_fail(st, GC_EDEVICE, "the GPU k-distances take at most %d rows, got %lld",
					   GC_DBSCAN_GPU_MAX_N, (long long) n);

	db_dev		D;
	db_tree		T;
	float	   *Xd,
			   *H,
			   *kd;
	int64_t		B = kd_batch(n, k);

	D.host_threads = gc_team_adapt(ctx);	/* the copies through the ring */
	gc_report(ctx, GC_PHASE_UPLOAD, 0, 0, 0, n, NAN);
	KD_CK(cudaStreamCreateWithFlags(&D.s, cudaStreamNonBlocking));
	KD_CK(D.alloc(Xd, n * d));
	KD_CK(gc_xfer_h2d(Xd, X, sizeof(float) * (size_t) n * d, D.s, D.host_threads));
	gc_report(ctx, GC_PHASE_INDEX, 0, 0, 0, n, NAN);
	if ((rc = gc_kdtree_build(D, ctx, Xd, (int) n, d, GC_KDTREE_LEAF, false, true, T, st)) != GC_OK)
		return rc;
	D.drop(Xd);					/* the tree has the rows in its order */
	KD_CK(D.alloc(H, B * k));
	KD_CK(D.alloc(kd, n));

	gc_loop_progress_start(&lp, ctx, GC_PHASE_ITERATE, n);
	for (int64_t p0 = 0; p0 < n; p0 += B)
	{
		int			cnt = (int) (n - p0 < B ? n - p0 : B);

		if (d <= 4)
			KD_CK(kd_launch<4>(T, k, (int) p0, cnt, B, H, kd, D.s));
		else if (d <= 8)
			KD_CK(kd_launch<8>(T, k, (int) p0, cnt, B, H, kd, D.s));
		else if (d <= 16)
			KD_CK(kd_launch<16>(T, k, (int) p0, cnt, B, H, kd, D.s));
		else
			KD_CK(kd_launch<0>(T, k, (int) p0, cnt, B, H, kd, D.s));
		KD_CK(cudaStreamSynchronize(D.s));
		if (gc_cancelled(ctx))
			return gc_fail(st, GC_ECANCEL, "canceled");
		gc_loop_progress_add(&lp, cnt, true);
	}
	KD_CK(gc_xfer_d2h(kdist2, kd, sizeof(float) * (size_t) n, D.s, D.host_threads));
	D.release();
	gc_loop_progress_end(&lp);
	return GC_OK;
}

extern "C" size_t
gc_kdistance_gpu_mem_bytes(int64_t n, int d, int64_t k)
{
	/*
	 * The input (4 d a row, dropped once the tree is built) and the tree
	 * (common/kdtree.cu: its rows 4 d, the boxes and their build copies at
	 * most d, permutations and keys 24, CUB's radix sort's scratch at
	 * most 16), the k-distances (4): 9 d + 44, rounded up; plus a batch's
	 * heaps and room for the allocator.
	 */
	size_t		per = (size_t) 10 * (size_t) d + 64;

	return (size_t) n * per + (size_t) kd_batch(n, k) * (size_t) k * sizeof(float) +
		((size_t) 48 << 20);
}
