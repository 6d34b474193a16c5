/*
 * kdtree.cu — the build of the balanced kd-tree (kdtree.cuh) on the GPU,
 * level by level: each node's exact box, its widest dimension, and one CUB
 * radix sort of every position by (its node, its coordinate along that
 * dimension), which sorts each node's positions in place (a node's
 * positions are a contiguous range, the nodes in order).  One device-wide
 * sort a level keeps the whole GPU busy where a segmented sort of a few
 * huge segments would not.  The levels are queued without a wait between
 * them (the host needs nothing of them until the tree is whole); the host
 * waits once, polling the cancel flags, at the end.
 */
#include <cub/block/block_radix_sort.cuh>
#include <cub/device/device_radix_sort.cuh>

#include "common/kdtree.cuh"
#include "common/launch.cuh"

#pragma GCC visibility push(hidden)

#define KT_THREADS 256

#define KT_CK(expr) GC_CUDA_CK("GPU kd-tree", expr)
#define KT_ALLOC(p, count) KT_CK(D.alloc((p), (count)))

/* floats in an unsigned order: a < b iff enc(a) < enc(b) */
__device__ __forceinline__ unsigned
tr_enc(float f)
{
	unsigned	b = __float_as_uint(f);

	return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

__device__ __forceinline__ float
tr_dec(unsigned u)
{
	return __uint_as_float((u & 0x80000000u) ? (u & 0x7fffffffu) : ~u);
}

/*
 * The boxes of the nodes of level l, from their points' rows X[perm[p]]:
 * blocks of TR_BOX_T threads, bpn blocks a node, each over chunk
 * positions; a thread keeps one dimension's extremes over its rows, lanes
 * of the same dimension combine by shuffles, then one atomic each.
 */
#define TR_BOX_T 256

__global__ void __launch_bounds__(TR_BOX_T)
k_tr_box(const float *__restrict__ X, const int *__restrict__ perm, int n,
		 int d, int l, int bpn, int chunk, unsigned *olo, unsigned *ohi)
{
	const int64_t j = blockIdx.x / bpn;
	const int	c = blockIdx.x % bpn;
	const int	b = tr_off(j, n, l),
				e = tr_off(j + 1, n, l);
	const int	s = b + c * chunk,
				t1 = e < s + chunk ? e : s + chunk;
	const int	tpr = d < TR_BOX_T ? d : TR_BOX_T;	/* threads a row */
	const int	rpar = TR_BOX_T / tpr;	/* rows at a time */
	const int	r0 = threadIdx.x / tpr,
				j0 = threadIdx.x % tpr;
	const int64_t h = ((int64_t) 1 << l) - 1 + j;
	const bool	shfl = tpr <= 32 && (32 % tpr) == 0;

	if (r0 >= rpar)
		return;					/* no barrier below */
	for (int k = j0; k < d; k += tpr)
	{
		float		mn = __int_as_float(0x7f800000),
					mx = -__int_as_float(0x7f800000);

		for (int p = s + r0; p < t1; p += rpar)
		{
			float		v = X[(int64_t) perm[p] * d + k];

			mn = v < mn ? v : mn;
			mx = v > mx ? v : mx;
		}
		if (shfl)
		{
			/* tpr divides 32 and d == tpr: one pass of k, every lane here */
			for (int o = tpr; o < 32; o <<= 1)
			{
				float		a = __shfl_xor_sync(0xffffffffu, mn, o),
							z = __shfl_xor_sync(0xffffffffu, mx, o);

				mn = a < mn ? a : mn;
				mx = z > mx ? z : mx;
			}
			if ((threadIdx.x & 31) >= tpr)
				continue;
		}
		if (mn <= mx)
		{
			atomicMin(&olo[h * d + k], tr_enc(mn));
			atomicMax(&ohi[h * d + k], tr_enc(mx));
		}
	}
}

/*
 * Each node of level l: its widest dimension (the lowest of equals); or,
 * cyclic, dimension l mod d.
 */
__global__ void
k_tr_sdim(const unsigned *__restrict__ olo, const unsigned *__restrict__ ohi,
		  int d, int l, int64_t nodes, bool cyclic, int *sdim)
{
	int64_t		j = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (j >= nodes)
		return;
	if (cyclic)
	{
		sdim[j] = l % d;
		return;
	}
	int64_t		h = ((int64_t) 1 << l) - 1 + j;
	int			best = 0;
	float		w = -1.0f;

	for (int k = 0; k < d; k++)
	{
		float		x = tr_dec(ohi[h * d + k]) - tr_dec(olo[h * d + k]);

		if (x > w)
		{
			w = x;
			best = k;
		}
	}
	sdim[j] = best;
}

/*
 * The sort keys of level l: a position's node (below 2^l) above its
 * coordinate along the node's dimension, in tr_enc's order.
 */
__global__ void
k_tr_keys(const float *__restrict__ X, const int *__restrict__ perm,
		  const int *__restrict__ sdim, int n, int d, int l,
		  unsigned long long *key)
{
	int			p = blockIdx.x * blockDim.x + threadIdx.x;

	if (p < n)
	{
		int64_t		j = tr_node_of(p, n, l);

		key[p] = (unsigned long long) j << 32 |
			tr_enc(X[(int64_t) perm[p] * d + sdim[j]]);
	}
}

/*
 * The levels l0 .. depth below node j = blockIdx.x of level l0 (at most
 * TR_BLK_MAX positions), in one block, exactly as the device-wide levels
 * would make them: at each level every sub-node's box (a warp a sub-node,
 * the extremes of the encoded coordinates) and widest dimension, then one
 * stable block radix sort of the node's positions by (sub-node,
 * coordinate along its dimension), the device-wide sort's keys in the same
 * order.  The node's rows stay in shared memory until the leaves.
 */
#define TR_BLK_T 256
#define TR_BLK_ITEMS 8
#define TR_BLK_MAX (TR_BLK_T * TR_BLK_ITEMS)

__global__ void __launch_bounds__(TR_BLK_T)
k_tr_block(const float *__restrict__ X, int *perm, int n, int d, int l0,
		   int depth, bool cyclic, unsigned *olo, unsigned *ohi)
{
	typedef cub::BlockRadixSort<unsigned long long, TR_BLK_T, TR_BLK_ITEMS, int> sorter;
	__shared__ typename sorter::TempStorage tmp;
	__shared__ int rows[TR_BLK_MAX];	/* the node's rows, in its order */
	__shared__ int dims[TR_BLK_MAX];	/* each sub-node's dimension */
	const int64_t j = blockIdx.x;
	const int	b = tr_off(j, n, l0),
				m = tr_off(j + 1, n, l0) - b;
	const int	lane = threadIdx.x & 31,
				warp = threadIdx.x >> 5;

	for (int i = threadIdx.x; i < m; i += TR_BLK_T)
		rows[i] = perm[b + i];
	__syncthreads();
	for (int l = l0; l <= depth; l++)
	{
		const int	k = l - l0;
		const int64_t first = j << k;	/* the level's first sub-node here */

		/* the boxes, and the dimension each sub-node splits along */
		for (int s = warp; s < (1 << k); s += TR_BLK_T / 32)
		{
			const int	sb = tr_off(first + s, n, l) - b,
						se = tr_off(first + s + 1, n, l) - b;
			const int64_t h = ((int64_t) 1 << l) - 1 + first + s;
			float		w = -1.0f;
			int			best = 0;

			for (int c = 0; c < d; c++)
			{
				unsigned	mn = 0xffffffffu,
							mx = 0;

				for (int p = sb + lane; p < se; p += 32)
				{
					const unsigned v = tr_enc(X[(int64_t) rows[p] * d + c]);

					mn = v < mn ? v : mn;
					mx = v > mx ? v : mx;
				}
				mn = __reduce_min_sync(0xffffffffu, mn);
				mx = __reduce_max_sync(0xffffffffu, mx);
				if (lane == 0)
				{
					olo[h * d + c] = mn;
					ohi[h * d + c] = mx;
				}
				if (tr_dec(mx) - tr_dec(mn) > w)
				{
					w = tr_dec(mx) - tr_dec(mn);
					best = c;
				}
			}
			if (lane == 0)
				dims[s] = cyclic ? l % d : best;
		}
		if (l == depth)
			break;
		__syncthreads();

		/* the keys in position order (blocked), the padding after them */
		unsigned long long key[TR_BLK_ITEMS];
		int			val[TR_BLK_ITEMS];

		for (int i = 0; i < TR_BLK_ITEMS; i++)
		{
			const int	p = threadIdx.x * TR_BLK_ITEMS + i;

			key[i] = ~0ULL;
			val[i] = 0;
			if (p < m)
			{
				const int	s = (int) (tr_node_of(b + p, n, l) - first);

				key[i] = (unsigned long long) s << 32 |
					tr_enc(X[(int64_t) rows[p] * d + dims[s]]);
				val[i] = rows[p];
			}
		}
		__syncthreads();
		/* the sub-node's k bits above the coordinate's 32, one more for the padding */
		sorter(tmp).Sort(key, val, 0, 33 + k);
		for (int i = 0; i < TR_BLK_ITEMS; i++)
		{
			const int	p = threadIdx.x * TR_BLK_ITEMS + i;

			if (p < m)
				rows[p] = val[i];
		}
		__syncthreads();
	}
	__syncthreads();
	for (int i = threadIdx.x; i < m; i += TR_BLK_T)
		perm[b + i] = rows[i];
}

__global__ void
k_tr_decode(const unsigned *__restrict__ o, int64_t m, float *f)
{
	int64_t		i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (i < m)
		f[i] = tr_dec(o[i]);
}

__global__ void
k_tr_gather(const float *__restrict__ X, const int *__restrict__ perm,
			int n, int d, float *Xs, int *pos_of_row)
{
	int64_t		i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (i < (int64_t) n * d)
	{
		int			p = (int) (i / d),
					k = (int) (i % d);
		int			r = perm[p];

		Xs[i] = X[(int64_t) r * d + k];
		if (k == 0)
			pos_of_row[r] = p;
	}
}

/* The level from which k_tr_block makes the tree: nodes of TR_BLK_MAX or less. */
static int
tr_block_level(int n, int depth)
{
	int			l = 0;

	while (l < depth && (((int64_t) n + ((int64_t) 1 << l) - 1) >> l) > TR_BLK_MAX)
		l++;
	return l;
}

gc_code
gc_kdtree_build(gc_dev &D, const gc_ctx *ctx, const float *X, int n, int d,
				int leaf, bool cyclic, bool blocks, gc_kdtree &T, gc_status *st)
{
	unsigned   *olo,
			   *ohi;
	int		   *perm2,
			   *sdim;
	unsigned long long *key,
			   *key2;

	T.n = n;
	T.d = d;
	T.depth = 0;
	int			l0;

	if (leaf < 1)
		leaf = 1;
	while ((n >> (T.depth + 1)) >= leaf)
		T.depth++;
	l0 = blocks ? tr_block_level(n, T.depth) : T.depth + 1;
	T.qlevel = T.depth > 0 ? T.depth - 1 : 0;
	T.nleaf = (int64_t) 1 << T.depth;
	T.nq = (int64_t) 1 << T.qlevel;
	T.nnode = 2 * T.nleaf - 1;

	KT_ALLOC(T.perm, n);
	KT_ALLOC(perm2, n);
	KT_ALLOC(key, n);
	KT_ALLOC(key2, n);
	KT_ALLOC(sdim, T.nleaf);
	KT_ALLOC(olo, T.nnode * d);
	KT_ALLOC(ohi, T.nnode * d);
	KT_CK(cudaMemsetAsync(olo, 0xff, sizeof(unsigned) * (size_t) (T.nnode * d), D.s));
	KT_CK(cudaMemsetAsync(ohi, 0, sizeof(unsigned) * (size_t) (T.nnode * d), D.s));
	KT_CK(gc_launch(k_iota, n, KT_THREADS, KT_THREADS, D.s, T.perm, n));

	for (int l = 0; l <= T.depth && l < l0; l++)
	{
		int64_t		nodes = (int64_t) 1 << l;
		int			maxsz = (int) (((int64_t) n + nodes - 1) >> l);
		int			chunk = 4096;
		int			bpn = (maxsz + chunk - 1) / chunk;

		KT_CK(gc_launch(k_tr_box, nodes * bpn, 1, TR_BOX_T, D.s, X,
						(const int *) T.perm, n, d, l, bpn, chunk, olo, ohi));
		if (l == T.depth)
			break;
		KT_CK(gc_launch(k_tr_sdim, nodes, KT_THREADS, KT_THREADS, D.s,
						(const unsigned *) olo, (const unsigned *) ohi, d, l, nodes, cyclic, sdim));
		KT_CK(gc_launch(k_tr_keys, n, KT_THREADS, KT_THREADS, D.s, X,
						(const int *) T.perm, (const int *) sdim, n, d, l, key));

		/* the node's l bits above the coordinate's 32 */
		cub::DoubleBuffer<unsigned long long> keys(key, key2);
		cub::DoubleBuffer<int> vals(T.perm, perm2);
		size_t		bytes = 0;

		KT_CK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys, vals, n, 0, 32 + l, D.s));
		KT_CK(D.scratch(bytes));
		bytes = D.cub_bytes;
		KT_CK(cub::DeviceRadixSort::SortPairs(D.cub_tmp, bytes, keys, vals, n, 0, 32 + l, D.s));
		key = keys.Current();
		key2 = keys.Alternate();
		T.perm = vals.Current();
		perm2 = vals.Alternate();
	}
	if (l0 <= T.depth)
		KT_CK(gc_launch(k_tr_block, (int64_t) 1 << l0, 1, TR_BLK_T, D.s, X, T.perm, n, d,
						l0, T.depth, cyclic, olo, ohi));

	KT_ALLOC(T.lo, T.nnode * d);
	KT_ALLOC(T.hi, T.nnode * d);
	KT_CK(gc_launch(k_tr_decode, T.nnode * d, KT_THREADS, KT_THREADS, D.s,
					(const unsigned *) olo, T.nnode * d, T.lo));
	KT_CK(gc_launch(k_tr_decode, T.nnode * d, KT_THREADS, KT_THREADS, D.s,
					(const unsigned *) ohi, T.nnode * d, T.hi));
	KT_ALLOC(T.Xs, (int64_t) n * d);
	KT_ALLOC(T.pos_of_row, n);
	KT_CK(gc_launch(k_tr_gather, (int64_t) n * d, KT_THREADS, KT_THREADS, D.s, X,
					(const int *) T.perm, n, d, T.Xs, T.pos_of_row));
	return gc_sync_poll(D, ctx, "GPU kd-tree", st);
}

#pragma GCC visibility pop
