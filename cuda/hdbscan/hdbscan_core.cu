/*
 * hdbscan_core.cu — HDBSCAN's core distances on the GPU: core[p] =
 * gc_hdbscan_dist(metric, the k-th smallest gc_dist2_f64 from row p to
 * every row, itself counted), bit for bit gc_hdbscan_core_cpu's.
 *
 * The search is the k-distances' (cuda/dbscan/kdistance.cu) in double: a
 * warp runs 32 consecutive positions at once (one query a lane, neighbours
 * in the tree, so their searches mostly agree), walking the tree depth
 * first with one stack, uniform across its lanes.  Each lane keeps its k
 * smallest squared distances so far: for k <= HB_KREG in registers, a list
 * sorted downwards whose first element is the k-th smallest (+inf until k
 * are seen; the slots past k hold -inf and never move); for larger k in a
 * max-heap in global memory (a column per lane: element e of the batch's
 * query t at H[e B + t], so the lanes' accesses to one element coalesce).
 * Either way a value enters when it is below the k-th smallest so far (or
 * fewer than k are kept), so both keep the same multiset.  A lane needs a
 * node while fewer than k are kept or the node's box bound (hb_query::box2,
 * an exact lower bound of gc_dist2_f64) is below its k-th smallest: a node
 * whose rows are all at least that far cannot change the k-th smallest
 * value, so the result is exact whatever the order of the walk.  Of two
 * children the one nearer to most lanes goes first.
 *
 * For 2 <= k < HB_SEED_K1 the lists keep k + 1 distances with their
 * positions (the core distance is then the second): each row's k + 1
 * nearest positions go out as Borůvka's first seeds (hb_seeds), with
 * whether the (k + 1)-th lies farther than the core distance, which
 * makes the first k exactly the rows within it.
 *
 * Memory: for k > HB_KREG the heaps of one batch of queries (8 k bytes a
 * query, at most HB_HEAP_BYTES a batch but one block's worth; the batches
 * run one after another on the stream, reusing them); for k <= HB_KREG one
 * launch takes every query.  Nothing waits for them: the caller's next
 * wait (Borůvka's first round's) polls the cancel flags while they run.  A
 * cancel raises the call's stop flag, which each warp reads after every
 * HB_STOP_EVERY leaves it opens (a short walk never: it ends soon),
 * leaving when it is raised, its rows' core distances unwritten; the
 * launches after it read the flag too, and the call then returns
 * GC_ECANCEL, launching nothing more.
 */
#include <math.h>

#include "hdbscan_gpu.cuh"
#include "common/max_heap.h"

#pragma GCC visibility push(hidden)

#define HB_HEAP_BYTES ((int64_t) 256 << 20)	/* a batch's heaps, at most */
#define HB_BATCH_MAX ((int64_t) 1 << 18)	/* queries a launch, at most */
#define HB_KREG 32				/* k up to this: the k smallest in registers */

/*
 * v (at position pos) into the list a, sorted downwards, that keeps the
 * smallest (v below its first, the largest kept): the first leaves, the
 * larger ones move up one place, v takes its place among them (unrolled:
 * a stays in registers).  With NB the positions ix move alongside.
 */
template <int KR, bool NB>
__device__ __forceinline__ void
hb_list_insert(double (&a)[KR], int (&ix)[NB ? KR : 1], double v, int pos)
{
	bool		placed = false;

#pragma unroll
	for (int j = 0; j < KR; j++)
	{
		const double nx = j + 1 < KR ? a[j + 1] : -INFINITY;

		if (!placed)
		{
			if (nx > v)
			{
				a[j] = nx;
				if constexpr (NB)
					ix[j] = j + 1 < KR ? ix[j + 1] : -1;
			}
			else
			{
				a[j] = v;
				if constexpr (NB)
					ix[j] = pos;
				placed = true;
			}
		}
	}
}

/*
 * The smallest squared distances a query has seen, kk of them: bound() is
 * what a node's box must be nearer than to be entered (+inf until kk are
 * kept), add(v, pos) keeps v when it is below it, kth() the kk-th smallest
 * at the end.  KR > 0: a sorted list of KR in registers (kk <= KR; H and B
 * unused), with the positions when NB; KR == 0: a max-heap in global
 * memory, query t's column of H (element e at H[e B + t]), as max_heap.h
 * keeps it.
 */
template <int KR, bool NB>
struct hb_keep
{
	double		a[KR];			/* a[0]: the kk-th smallest so far */
	int			ix[NB ? KR : 1];	/* NB: their positions, -1 none */

	__device__ __forceinline__ hb_keep(double *H, int t, int64_t B, int64_t kk)
	{
		(void) H, (void) t, (void) B;
#pragma unroll
		for (int j = 0; j < KR; j++)
		{
			a[j] = j < kk ? INFINITY : -INFINITY;
			if constexpr (NB)
				ix[j] = -1;
		}
	}
	__device__ __forceinline__ double bound() const { return a[0]; }
	__device__ __forceinline__ void add(double v, int pos)
	{
		if (v < a[0])
			hb_list_insert<KR, NB>(a, ix, v, pos);
	}
	__device__ __forceinline__ double kth() const { return a[0]; }
};

template <>
struct hb_keep<0, false>
{
	double	   *h;
	int64_t		B,
				k,
				size;
	double		top;			/* the heap's largest once full */

	__device__ __forceinline__ hb_keep(double *H, int t, int64_t B_, int64_t k_)
		: h(H + t), B(B_), k(k_), size(0), top(INFINITY) {}
	__device__ __forceinline__ double bound() const
	{
		return size < k ? INFINITY : top;
	}
	__device__ __forceinline__ void add(double v, int pos)
	{
		(void) pos;
		if (size < k)
		{
			gc_heap_push_f64(h, B, &size, v);
			if (size == k)
				top = h[0];
		}
		else if (v < top)
		{
			gc_heap_replace_top_f64(h, B, k, v);
			top = h[0];
		}
	}
	__device__ __forceinline__ double kth() const { return top; }
};

/*
 * The core distances of positions p0 .. p0 + cnt - 1 into core (by
 * position), the smallest kept by hb_keep<KR, NB> (H and B: its heaps); a
 * warp that sees stop raised leaves, writing none of its rows.  With NB
 * it keeps k + 1 with their positions and writes them to Sd (hb_seeds).
 */
template <int DQ, int KR, bool NB>
__global__ void __launch_bounds__(HB_T)
k_hb_knn(gc_kdtree T, int64_t k, gc_metric metric, int p0, int cnt,
		 int64_t B, double *__restrict__ H, double *__restrict__ core,
		 hb_seeds Sd, const volatile int *stop)
{
	const unsigned FULL = 0xffffffffu;
	const int	t = blockIdx.x * HB_T + threadIdx.x;
	const int	d = T.d;
	const bool	active = t < cnt;
	const int	pos = p0 + (active ? t : 0);
	int			stack[HB_STACK];
	int			sp = 0;
	unsigned	leaves = 0;		/* opened by the warp */

	if ((t & ~31) >= cnt)
		return;					/* the whole warp is past the batch */

	const hb_query<DQ> q(T.Xs + (int64_t) pos * d, d);
	hb_keep<KR, NB> keep(H, t, B, NB ? k + 1 : k);

	stack[sp++] = 0;
	while (sp > 0)
	{
		const int	node = stack[--sp];
		const bool	need = active &&
			q.box2(T.lo + (int64_t) node * d, T.hi + (int64_t) node * d) < keep.bound();

		if (!__any_sync(FULL, need))
			continue;
		if (node >= T.nleaf - 1)
		{
			const int64_t leaf = node - (T.nleaf - 1);
			const int	b = tr_off(leaf, T.n, T.depth),
						e = tr_off(leaf + 1, T.n, T.depth);

			if (++leaves % HB_STOP_EVERY == 0 && gc_warp_stopped(stop))
				return;
			if (!need)
				continue;
			for (int s = b; s < e; s++)
				keep.add(q.dist2(T.Xs + (int64_t) s * d), s);
		}
		else
		{
			const int	l = 2 * node + 1,
						r = l + 1;
			const bool	l_near = need &&
				q.box2(T.lo + (int64_t) l * d, T.hi + (int64_t) l * d) <=
				q.box2(T.lo + (int64_t) r * d, T.hi + (int64_t) r * d);

			hb_push_children(stack, sp, l, r, l_near, need);
		}
	}
	if (!active)
		return;
	if constexpr (NB)
	{
		/* a[0] is the (k + 1)-th smallest, a[1] the k-th */
		const double c = gc_hdbscan_dist(metric, keep.a[1]);

		core[pos] = c;
		Sd.tight[pos] = gc_hdbscan_dist(metric, keep.a[0]) > c;
#pragma unroll
		for (int j = 0; j < KR; j++)
			if (j <= k)
				Sd.nbr[(int64_t) j * T.n + pos] = keep.ix[j];
	}
	else
		core[pos] = gc_hdbscan_dist(metric, keep.kth());
}

/* Queries a launch: as many heaps as fit HB_HEAP_BYTES, in whole blocks. */
static int64_t
hb_knn_batch(int64_t n, int64_t k)
{
	int64_t		b = HB_HEAP_BYTES / ((int64_t) sizeof(double) * k) / HB_T * HB_T;
	int64_t		nr = (n + HB_T - 1) / HB_T * HB_T;

	if (b < HB_T)
		b = HB_T;
	if (b > HB_BATCH_MAX)
		b = HB_BATCH_MAX;
	return b < nr ? b : nr;
}

size_t
hb_core_bytes(int64_t n, int64_t k)
{
	if (k >= 2 && k + 1 <= HB_SEED_K1)
		return (size_t) n * (size_t) (4 * (k + 1) + 1);
	if (k <= HB_KREG)
		return 0;
	return (size_t) hb_knn_batch(n, k) * (size_t) k * sizeof(double);
}

/*
 * The batch's launch on D's stream, with its stop flag: registers for k <=
 * HB_KREG (H unused), with the seeds' positions when Sd has room for them
 * (k + 1 <= HB_SEED_K1), else heaps.
 */
template <int DQ>
static cudaError_t
hb_knn_launch(gc_dev &D, const gc_kdtree &T, int64_t k, gc_metric metric,
			  int p0, int cnt, int64_t B, double *H, double *core,
			  const hb_seeds &Sd)
{
	const volatile int *stop = D.stop_flag();
	const cudaStream_t s = D.s;

	if (Sd.nbr != nullptr && k + 1 <= 8)
		return gc_launch(k_hb_knn<DQ, 8, true>, cnt, HB_T, HB_T, s, T, k, metric,
						 p0, cnt, B, H, core, Sd, stop);
	if (Sd.nbr != nullptr)
		return gc_launch(k_hb_knn<DQ, HB_SEED_K1, true>, cnt, HB_T, HB_T, s, T, k,
						 metric, p0, cnt, B, H, core, Sd, stop);
	if (k <= 16)
		return gc_launch(k_hb_knn<DQ, 16, false>, cnt, HB_T, HB_T, s, T, k, metric,
						 p0, cnt, B, H, core, Sd, stop);
	if (k <= HB_KREG)
		return gc_launch(k_hb_knn<DQ, HB_KREG, false>, cnt, HB_T, HB_T, s, T, k,
						 metric, p0, cnt, B, H, core, Sd, stop);
	return gc_launch(k_hb_knn<DQ, 0, false>, cnt, HB_T, HB_T, s, T, k, metric, p0,
					 cnt, B, H, core, Sd, stop);
}

gc_code
hb_core(gc_dev &D, const gc_ctx *ctx, const gc_kdtree &T, int64_t k,
		gc_metric metric, double *core, hb_seeds *Sd, gc_status *st)
{
	const int64_t n = T.n;
	const int	dq = hb_dq(T.d);
	int64_t		B;
	double	   *H;

	*Sd = hb_seeds();

	if (k < 1 || k > n)
		return gc_fail(st, GC_EINVAL, "min_samples must be between 1 and %lld, got %lld",
					   (long long) n, (long long) k);
	if (k == 1)
	{
		/* the row itself, at distance 0: every core distance is 0 */
		HB_CK(cudaMemsetAsync(core, 0, sizeof(double) * (size_t) n, D.s));
		return hb_sync_poll(D, ctx, st);
	}
	B = k <= HB_KREG ? n : hb_knn_batch(n, k);
	H = nullptr;
	if (k > HB_KREG)
		HB_ALLOC(H, B * k);
	if (k + 1 <= HB_SEED_K1)
	{
		Sd->k1 = (int) k + 1;
		HB_ALLOC(Sd->nbr, n * Sd->k1);
		HB_ALLOC(Sd->tight, n);
	}
	for (int64_t p0 = 0; p0 < n; p0 += B)
	{
		const int	cnt = (int) (n - p0 < B ? n - p0 : B);

		if (dq == 4)
			HB_CK(hb_knn_launch<4>(D, T, k, metric, (int) p0, cnt, B, H, core, *Sd));
		else if (dq == 8)
			HB_CK(hb_knn_launch<8>(D, T, k, metric, (int) p0, cnt, B, H, core, *Sd));
		else if (dq == 16)
			HB_CK(hb_knn_launch<16>(D, T, k, metric, (int) p0, cnt, B, H, core, *Sd));
		else
			HB_CK(hb_knn_launch<0>(D, T, k, metric, (int) p0, cnt, B, H, core, *Sd));
	}
	if (H != nullptr)
		D.drop(H);
	return GC_OK;
}

#pragma GCC visibility pop
