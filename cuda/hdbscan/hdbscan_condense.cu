/*
 * hdbscan_condense.cu — the rest of HDBSCAN's phase 3 on the GPU, from the
 * single-linkage tree (hdbscan_linkage.cu): the condensed tree's clusters
 * and each row's place in it, bit for bit hdbscan_tree.c's pass from the
 * root (gc_hdbscan_condense); then, with the flat selection made on the
 * host by the core's own gc_hdbscan_select (a few arrays of clusters),
 * each row's label, membership probability and outlier score by the
 * core's gc_hdbscan_row, and the flat numbers as gc_hdbscan_flat gives
 * them.
 *
 * The condensed tree, in the pass's terms: a node carries a cluster when
 * it is the root or holds at least min_cluster_size rows (its parent then
 * carries too); a carrying node whose two sides both hold as many splits
 * its cluster in two new ones; a row leaves the cluster of its lowest
 * carrying ancestor at that node's lambda.  So:
 *
 *  - the clusters' numbers: the pass meets the splits in decreasing node
 *    order and numbers the two clusters of the k-th 2k + 1 (left) and
 *    2k + 2 (right): an exclusive sum over the splits in that order (CUB);
 *  - the cluster each carrying node carries: its own number where its
 *    parent splits (or 0 at the root), else its parent's: pointer jumping
 *    up the chains of carrying nodes;
 *  - each row's lowest carrying ancestor: pointer jumping up the nodes
 *    that do not carry (at most min_cluster_size - 1 of them above a row);
 *  - each cluster's stability, the sum over its rows in the pass's order,
 *    bit for bit: a cluster's rows all leave from the carrying nodes of
 *    one path, which the pass meets top down; those nodes sorted by
 *    (cluster, decreasing index) (CUB radix sort) put each cluster's in
 *    that order, one warp a cluster, each lane turning a node into its
 *    terms and the warp adding them in order (handed round by shuffles),
 *    as hd_carry does: a split adds
 *    (lambda - birth) times each side's rows, a side that falls adds
 *    (lambda - birth) once for each of its rows, left side first; the
 *    largest lambda of those nodes is the cluster's death.
 *
 * The labels: the clusters (one device block) down to the host in one
 * copy, the selection there, its two per-cluster arrays up in one copy;
 * then all on the device: each row's label, probability and score, each
 * cluster's lowest row, the flat numbers and the labels renumbered.  The
 * flat numbers are gc_hdbscan_flat's: the clusters some row joined, by
 * (lowest row, cluster), numbered 0, 1, ...; here every cluster's key
 * (lowest row << 32 | cluster, n for none) in one CUB radix sort, each
 * cluster's number its place in that order when it has a row (those sort
 * first), and the count the place of the first without one.  The results
 * and that count come down in one pipeline (transfer.cu).  So the host
 * waits for the device once, for the clusters, and then for the results:
 * no round trip between the kernels.  Errors that only a malformed tree
 * could make set a flag: GC_EDEVICE.
 */
#include <stdlib.h>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include "hdbscan_gpu.cuh"
#include "common/transfer.cuh"

#pragma GCC visibility push(hidden)

#define HC_NONE 0xffffffffu
#define HC_CARRY 1
#define HC_SPLIT 2

/* A carrying node as the stability's sum reads it. */
struct hc_rec
{
	double		lambda;
	int			l,
				r;				/* its sides' rows */
};

struct hc_work
{
	int			n,
				m;
	int64_t		mcs;
	const gc_linkage_node *node;	/* m */
	const unsigned *par;		/* n + m */
	const uint8_t *side;		/* n + m */
	uint8_t    *kind;			/* m: HC_CARRY, HC_SPLIT */
	int		   *sflag;			/* m: splits in decreasing node order */
	int		   *sidx;			/* m: their exclusive sums */
	int		   *lab;			/* m: the cluster a carrying node carries */
	int		   *nxt;			/* m: the jump up its chain */
	unsigned   *fall;			/* n + m: the carrying node it leaves at */
	gc_hdbscan_place *leave;	/* n */
	unsigned   *cnt;			/* [0] carrying nodes, [1] errors, [2] splits */
};

/*
 * The clusters, device arrays of nclu: the five arrays of one block
 * (hb_clusters_dev), in gc_hdbscan_clusters' order.
 */
struct hc_clusters
{
	int64_t    *parent,
			   *child;
	double	   *birth,
			   *stab,
			   *death;
};

/* The arrays of a block of 5 k words (device or host). */
static hc_clusters
hc_carve(int64_t *b, int64_t k)
{
	hc_clusters C;

	C.parent = b;
	C.child = b + k;
	C.birth = (double *) (b + 2 * k);
	C.stab = (double *) (b + 3 * k);
	C.death = (double *) (b + 4 * k);
	return C;
}

/* Each node: whether it carries, whether it splits. */
__global__ void
k_hc_kind(hc_work W)
{
	const int	i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= W.m)
		return;
	const int64_t l = W.node[i].lsize,
				r = W.node[i].rsize;
	const bool	carry = i == W.m - 1 || l + r >= W.mcs,
				split = carry && l >= W.mcs && r >= W.mcs;

	W.kind[i] = (uint8_t) ((carry ? HC_CARRY : 0) | (split ? HC_SPLIT : 0));
	W.sflag[W.m - 1 - i] = split;
	if (carry)
		atomicAdd(&W.cnt[0], 1u);
	if (split)
		atomicAdd(&W.cnt[2], 1u);
}

/* The split rank of node i: the splits above it in the pass's order. */
__device__ __forceinline__ int
hc_split_rank(const hc_work &W, int i)
{
	return W.sidx[W.m - 1 - i];
}

/* Each carrying node: its cluster where its parent splits, else a jump. */
__global__ void
k_hc_start(hc_work W)
{
	const int	i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= W.m || !(W.kind[i] & HC_CARRY))
		return;
	if (i == W.m - 1)
	{
		W.lab[i] = 0;
		W.nxt[i] = i;
		return;
	}
	const int	p = (int) (W.par[W.n + i] - (unsigned) W.n);

	if (W.kind[p] & HC_SPLIT)
	{
		W.lab[i] = 2 * hc_split_rank(W, p) + 1 + W.side[W.n + i];
		W.nxt[i] = i;
	}
	else
	{
		W.lab[i] = -1;
		W.nxt[i] = p;
	}
}

/*
 * One step of pointer jumping up the chains of carrying nodes (a value
 * read while another thread writes it is old or new, both on the way up).
 */
__global__ void
k_hc_jump(hc_work W)
{
	const int	i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= W.m || !(W.kind[i] & HC_CARRY) || W.lab[i] >= 0)
		return;
	volatile int *lab = W.lab,
			   *nxt = W.nxt;
	const int	j = nxt[i],
				l = lab[j];

	if (l >= 0)
		lab[i] = l;
	else
		nxt[i] = nxt[j];
}

/* Rows and nodes that do not carry: their parent, to jump from. */
__global__ void
k_hc_fall0(hc_work W)
{
	const int64_t x = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (x >= (int64_t) W.n + W.m)
		return;
	if (x >= W.n && (W.kind[x - W.n] & HC_CARRY))
		W.fall[x] = (unsigned) x;
	else
		W.fall[x] = W.par[x];
}

/* One step of pointer jumping up the nodes that do not carry. */
__global__ void
k_hc_fall(hc_work W)
{
	const int64_t x = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (x >= (int64_t) W.n + W.m)
		return;
	volatile unsigned *f = W.fall;
	const unsigned y = f[x];

	if (y != HC_NONE && !(W.kind[y - (unsigned) W.n] & HC_CARRY))
		f[x] = f[y];
}

/* Each row's place: the cluster of the node it leaves at, its lambda. */
__global__ void
k_hc_leave(hc_work W)
{
	const int	r = blockIdx.x * blockDim.x + threadIdx.x;

	if (r >= W.n)
		return;
	const unsigned f = W.fall[r];

	if (f == HC_NONE || f < (unsigned) W.n ||
		!(W.kind[f - (unsigned) W.n] & HC_CARRY) || W.lab[f - (unsigned) W.n] < 0)
	{
		atomicOr(&W.cnt[1], 1u);
		return;
	}
	const int	u = (int) (f - (unsigned) W.n);

	W.leave[r].c = W.lab[u];
	W.leave[r].lambda = gc_hdbscan_lambda(W.node[u].w);
}

/* The clusters a split makes: parent, birth, and the parent's child. */
__global__ void
k_hc_clusters(hc_work W, hc_clusters C)
{
	const int	i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= W.m)
		return;
	if (i == W.m - 1)
	{
		C.parent[0] = -1;
		C.birth[0] = 0.0;
	}
	if (!(W.kind[i] & HC_SPLIT))
		return;
	const int	c = 2 * hc_split_rank(W, i) + 1,
				pc = W.lab[i];
	const double lambda = gc_hdbscan_lambda(W.node[i].w);

	C.parent[c] = C.parent[c + 1] = pc;
	C.birth[c] = C.birth[c + 1] = lambda;
	C.child[pc] = c;
}

/* The carrying nodes' keys (cluster, decreasing index); others last. */
__global__ void
k_hc_keys(hc_work W, unsigned long long *key)
{
	const int	i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= W.m)
		return;
	key[i] = (W.kind[i] & HC_CARRY) ?
		((unsigned long long) (unsigned) W.lab[i] << 32) | (unsigned) (W.m - 1 - i) :
		~0ULL;
}

/* The sorted carrying nodes' records, and where each cluster starts. */
__global__ void
k_hc_recs(hc_work W, int ncarry, const unsigned long long *key, hc_rec *rec,
		  int *cstart)
{
	const int	j = blockIdx.x * blockDim.x + threadIdx.x;

	if (j >= ncarry)
		return;
	const int	c = (int) (key[j] >> 32),
				i = W.m - 1 - (int) (key[j] & 0xffffffffu);

	rec[j].lambda = gc_hdbscan_lambda(W.node[i].w);
	rec[j].l = W.node[i].lsize;
	rec[j].r = W.node[i].rsize;
	if (j == 0 || (int) (key[j - 1] >> 32) != c)
		cstart[c] = j;
}

/*
 * Each cluster's stability and death, a warp a cluster, its nodes 32 at a
 * time: each lane turns its node into what the sum adds, in the CPU pass's
 * operations (a split: term * each side's rows, two additions; else term *
 * 1.0 once for each row that falls); then every lane adds all 32 nodes' in
 * order, each node's handed round by shuffles, so the sum's chain of
 * additions is all that waits (every lane holds the same sum).  The death
 * is the lanes' largest lambda.
 */
#define HC_WARPS 4

__global__ void __launch_bounds__(32 * HC_WARPS)
k_hc_stab(int nclu, int ncarry, int64_t mcs, const hc_rec *rec,
		  const int *cstart, hc_clusters C)
{
	const unsigned FULL = 0xffffffffu;
	const int	w = threadIdx.x / 32,
				lane = threadIdx.x % 32,
				c = blockIdx.x * HC_WARPS + w;

	if (c >= nclu)
		return;
	const int	b = cstart[c],
				e = c + 1 < nclu ? cstart[c + 1] : ncarry;
	const double birth = C.birth[c];
	double		s = 0.0,
				death = 0.0;

	for (int base = b; base < e; base += 32)
	{
		double		v1 = 0.0,	/* added c1 times */
					v2 = 0.0;	/* then once more, when split */
		int			c1 = 0,
					split = 0;

		if (base + lane < e)
		{
			const hc_rec r = rec[base + lane];
			const double term = r.lambda - birth;

			split = r.l >= mcs && r.r >= mcs;
			if (split)
			{
				v1 = term * (double) r.l;
				c1 = 1;
				v2 = term * (double) r.r;
			}
			else
			{
				v1 = term * 1.0;
				c1 = (r.l < mcs ? r.l : 0) + (r.r < mcs ? r.r : 0);
			}
			if (r.lambda > death)
				death = r.lambda;
		}
#pragma unroll 8
		for (int t = 0; t < 32; t++)
		{
			const double a = __shfl_sync(FULL, v1, t),
						z = __shfl_sync(FULL, v2, t);
			const int	k1 = __shfl_sync(FULL, c1, t),
						sp = __shfl_sync(FULL, split, t);

			for (int k = 0; k < k1; k++)
				s += a;
			if (sp)
				s += z;
		}
	}
	for (int o = 16; o > 0; o >>= 1)
	{
		const double x = __shfl_xor_sync(FULL, death, o);

		if (x > death)
			death = x;
	}
	if (lane == 0)
	{
		C.stab[c] = s;
		C.death[c] = death;
	}
}

/* Each cluster's key with no row yet: (n, cluster). */
__global__ void
k_hc_key0(int k, int n, unsigned long long *key)
{
	const int	c = blockIdx.x * blockDim.x + threadIdx.x;

	if (c < k)
		key[c] = ((unsigned long long) (unsigned) n << 32) | (unsigned) c;
}

/*
 * Each row's label, probability and score; its cluster's key takes the
 * lowest row (rows and clusters are below 2^31).
 */
__global__ void
k_hc_rows(int n, const gc_hdbscan_place *leave, const int64_t *top,
		  const double *death, const double *lmax, bool single_root,
		  double threshold, int32_t *label, double *prob, double *outl,
		  unsigned long long *key)
{
	const int	r = blockIdx.x * blockDim.x + threadIdx.x;

	if (r >= n)
		return;
	gc_hdbscan_row(leave[r], top, death, lmax, single_root, threshold, &label[r],
				   &prob[r], &outl[r]);
	if (label[r] != GC_NOISE)
		atomicMin(&key[label[r]],
				  ((unsigned long long) (unsigned) r << 32) | (unsigned) label[r]);
}

/*
 * The k keys sorted: a cluster with a row (lowest row below n) gets its
 * place as its flat number, the others GC_NOISE; *nflat, the count of the
 * first sort first, is written by the last of them (or place 0 when none).
 */
__global__ void
k_hc_rank(int k, int n, const unsigned long long *key, int32_t *flat, int32_t *nflat)
{
	const int	j = blockIdx.x * blockDim.x + threadIdx.x;

	if (j >= k)
		return;
	const bool	in = (key[j] >> 32) < (unsigned) n,
				next_in = j + 1 < k && (key[j + 1] >> 32) < (unsigned) n;

	flat[key[j] & 0xffffffffu] = in ? j : GC_NOISE;
	if (in && !next_in)
		*nflat = j + 1;
	else if (j == 0 && !in)
		*nflat = 0;
}

/* The flat numbers in place of the provisional ones. */
__global__ void
k_hc_flat(int n, const int32_t *flat, int32_t *label)
{
	const int	r = blockIdx.x * blockDim.x + threadIdx.x;

	if (r < n && label[r] != GC_NOISE)
		label[r] = flat[label[r]];
}

/* ---- the host side ---- */

size_t
hb_condense_bytes(int64_t n, int64_t mcs)
{
	/*
	 * per node: kind 1, sflag and sidx 8, lab and nxt 8, the keys and the
	 * sort's other buffer 16, the records 16; fall 4 a row and a node;
	 * leave 16 a row; the labels 4, probabilities 8 and scores 8.  Per
	 * cluster (2n / mcs + 1): the clusters' block 40, the selection's
	 * arrays 16, the flat numbering's keys and the sort's other buffer 16,
	 * the flat numbers 4.  CUB's scan and sort.
	 */
	const int64_t k = 2 * (n / (mcs > 1 ? mcs : 2)) + 1;

	return (size_t) n * (1 + 8 + 8 + 16 + 16 + 8 + 16 + 20) +
		(size_t) k * (40 + 16 + 16 + 4) + ((size_t) 16 << 20);
}

/*
 * The host block of hb_label: the clusters' five arrays and the
 * selection's two, k words each.  A fresh block of 128 KiB or more is
 * mmap'd pages, each faulting on its first touch (the copy down, the
 * selection), so the thread keeps the last one it had up to HC_KEEP bytes
 * and reuses it when it is large enough; a larger one is the call's own.
 */
#define HC_KEEP ((size_t) 8 << 20)

struct hc_kept_block
{
	void	   *p = nullptr;
	size_t		bytes = 0;

	~hc_kept_block()
	{
		free(p);
	}
};

static thread_local hc_kept_block hc_kept;

/* A call's host block (get: NULL when out of memory), freed when its own. */
struct hc_host_block
{
	void	   *own = nullptr;

	~hc_host_block()
	{
		free(own);
	}

	void	   *get(size_t bytes)
	{
		if (bytes <= hc_kept.bytes)
			return hc_kept.p;
		if (bytes > HC_KEEP)
			return own = malloc(bytes);
		free(hc_kept.p);
		hc_kept.p = malloc(bytes);
		hc_kept.bytes = hc_kept.p != nullptr ? bytes : 0;
		return hc_kept.p;
	}
};

gc_code
hb_condense_dev(gc_dev &D, const gc_ctx *ctx, int n, int64_t mcs,
				const gc_linkage_node *node, const unsigned *par,
				const uint8_t *side, gc_hdbscan_place *leave,
				hb_clusters_dev *out, gc_status *st)
{
	const int	m = n - 1;
	hc_work		W;
	hc_clusters C;
	unsigned	cnt[3];
	int			nclu,
				ncarry;
	int64_t    *block;
	int		   *cstart;
	unsigned long long *key,
			   *key2;
	hc_rec	   *rec;
	size_t		bytes = 0;
	gc_code		rc;

	memset(&W, 0, sizeof(W));
	W.n = n;
	W.m = m;
	W.mcs = mcs;
	W.node = node;
	W.par = par;
	W.side = side;
	W.leave = leave;
	HB_ALLOC(W.kind, m);
	HB_ALLOC(W.sflag, m);
	HB_ALLOC(W.sidx, m);
	HB_ALLOC(W.lab, m);
	HB_ALLOC(W.nxt, m);
	HB_ALLOC(W.fall, (int64_t) n + m);
	HB_ALLOC(W.cnt, 3);
	HB_CK(cudaMemsetAsync(W.cnt, 0, 3 * sizeof(unsigned), D.s));

	/* the kinds, the splits' ranks, the count of clusters */
	HB_CK(gc_launch(k_hc_kind, m, HB_THREADS, HB_THREADS, D.s, W));
	HB_CK(cub::DeviceScan::ExclusiveSum(nullptr, bytes, W.sflag, W.sidx, m, D.s));
	HB_CK(D.scratch(bytes));
	bytes = D.cub_bytes;
	HB_CK(cub::DeviceScan::ExclusiveSum(D.cub_tmp, bytes, W.sflag, W.sidx, m, D.s));
	if ((rc = hb_read_counts(D, ctx, W.cnt, cnt, 3, 1, "the condensed tree", st)) != GC_OK)
		return rc;
	nclu = 1 + 2 * (int) cnt[2];
	ncarry = (int) cnt[0];

	/* the cluster of each carrying node, the place of each row */
	HB_CK(gc_launch(k_hc_start, m, HB_THREADS, HB_THREADS, D.s, W));
	for (int r = 0; r < 32 && ((int64_t) 1 << r) <= 2 * (int64_t) m; r++)
		HB_CK(gc_launch(k_hc_jump, m, HB_THREADS, HB_THREADS, D.s, W));
	HB_CK(gc_launch(k_hc_fall0, (int64_t) n + m, HB_THREADS, HB_THREADS, D.s, W));
	for (int r = 0; r < 32 && ((int64_t) 1 << r) <= 2 * (mcs < n ? mcs : (int64_t) n); r++)
		HB_CK(gc_launch(k_hc_fall, (int64_t) n + m, HB_THREADS, HB_THREADS, D.s, W));
	HB_CK(gc_launch(k_hc_leave, n, HB_THREADS, HB_THREADS, D.s, W));

	/* the clusters, one block */
	HB_ALLOC(block, 5 * (int64_t) nclu);
	C = hc_carve(block, nclu);
	HB_CK(cudaMemsetAsync(C.child, 0xff, sizeof(int64_t) * (size_t) nclu, D.s));
	HB_CK(gc_launch(k_hc_clusters, m, HB_THREADS, HB_THREADS, D.s, W, C));

	/* each cluster's carrying nodes in the pass's order, and the sums */
	HB_ALLOC(key, m);
	HB_ALLOC(key2, m);
	HB_ALLOC(rec, ncarry);
	HB_ALLOC(cstart, nclu);
	HB_CK(gc_launch(k_hc_keys, m, HB_THREADS, HB_THREADS, D.s, W, key));
	{
		cub::DoubleBuffer<unsigned long long> kb(key, key2);

		bytes = 0;
		HB_CK(cub::DeviceRadixSort::SortKeys(nullptr, bytes, kb, m, 0, 64, D.s));
		HB_CK(D.scratch(bytes));
		bytes = D.cub_bytes;
		HB_CK(cub::DeviceRadixSort::SortKeys(D.cub_tmp, bytes, kb, m, 0, 64, D.s));
		HB_CK(gc_launch(k_hc_recs, ncarry, HB_THREADS, HB_THREADS, D.s, W, ncarry,
						(const unsigned long long *) kb.Current(), rec, cstart));
	}
	HB_CK(gc_launch(k_hc_stab, nclu, HC_WARPS, 32 * HC_WARPS, D.s, nclu, ncarry, mcs,
					(const hc_rec *) rec, (const int *) cstart, C));
	if ((rc = hb_read_counts(D, ctx, W.cnt, cnt, 3, 1, "the condensed tree", st)) != GC_OK)
		return rc;
	for (void *a : {(void *) W.kind, (void *) W.sflag, (void *) W.sidx, (void *) W.lab,
			(void *) W.nxt, (void *) W.fall, (void *) W.cnt, (void *) key, (void *) key2,
			(void *) rec, (void *) cstart})
		D.drop(a);
	out->n = nclu;
	out->block = block;
	return GC_OK;
}

gc_code
hb_label(gc_dev &D, const gc_ctx *ctx, int n, const gc_hdbscan_params *p,
		 const gc_hdbscan_place *leave, const hb_clusters_dev &B,
		 gc_hdbscan_result *res, gc_status *st)
{
	const int64_t k = B.n;
	const size_t kb = sizeof(int64_t) * (size_t) k;
	const hc_clusters C = hc_carve(B.block, k);
	hc_host_block hb;
	int64_t    *h = (int64_t *) hb.get(7 * kb);
	gc_hdbscan_clusters cl;
	gc_hdbscan_selection sel;
	int64_t    *sel_d;
	double	   *prob,
			   *outl;
	int32_t    *label,
			   *flat,
			   *nflat_d,
				nflat = 0;
	unsigned long long *key,
			   *key2;
	int			end_bit = 32;
	size_t		bytes = 0;
	gc_code		rc;

	if (h == nullptr)
		return gc_fail(st, GC_ENOMEM, "out of memory for HDBSCAN's clusters");

	/*
	 * the clusters down in one copy (the stream has nothing else queued:
	 * hb_condense_dev read its counts), into the block's first five
	 * arrays; the selection into its last two, and up in one copy
	 */
	HB_CK(cudaMemcpyAsync(h, B.block, 5 * kb, cudaMemcpyDeviceToHost, D.s));
	if ((rc = hb_sync_poll(D, ctx, st)) != GC_OK)
		return rc;
	{
		const hc_clusters H = hc_carve(h, k);

		cl.n = k;
		cl.parent = H.parent;
		cl.child = H.child;
		cl.birth = H.birth;
		cl.stab = H.stab;
		cl.death = H.death;
	}
	sel.top = h + 5 * k;
	sel.lmax = (double *) (h + 6 * k);
	sel.single_root = false;
	sel.threshold = 0.0;
	if ((rc = gc_hdbscan_select(&cl, p, &sel, st)) != GC_OK)
		return rc;
	HB_ALLOC(sel_d, 2 * k);
	HB_CK(cudaMemcpyAsync(sel_d, sel.top, 2 * kb, cudaMemcpyHostToDevice, D.s));

	/* the rows, each cluster's key (lowest row, cluster) */
	HB_ALLOC(label, n);
	HB_ALLOC(prob, n);
	HB_ALLOC(outl, n);
	HB_ALLOC(key, k);
	HB_ALLOC(key2, k);
	HB_ALLOC(flat, k);
	HB_ALLOC(nflat_d, 1);
	HB_CK(gc_launch(k_hc_key0, k, HB_THREADS, HB_THREADS, D.s, (int) k, n, key));
	HB_CK(gc_launch(k_hc_rows, n, HB_THREADS, HB_THREADS, D.s, n, leave,
					(const int64_t *) sel_d, (const double *) C.death,
					(const double *) (sel_d + k), sel.single_root, sel.threshold, label,
					prob, outl, key));

	/*
	 * the flat numbers: the keys sorted (the rows' bits: up to n, which
	 * marks none), each one's place; the labels renumbered
	 */
	while (end_bit < 64 && ((int64_t) 1 << (end_bit - 32)) <= (int64_t) n)
		end_bit++;
	{
		cub::DoubleBuffer<unsigned long long> kd(key, key2);

		HB_CK(cub::DeviceRadixSort::SortKeys(nullptr, bytes, kd, (int) k, 0, end_bit, D.s));
		HB_CK(D.scratch(bytes));
		bytes = D.cub_bytes;
		HB_CK(cub::DeviceRadixSort::SortKeys(D.cub_tmp, bytes, kd, (int) k, 0, end_bit, D.s));
		HB_CK(gc_launch(k_hc_rank, k, HB_THREADS, HB_THREADS, D.s, (int) k, n,
						(const unsigned long long *) kd.Current(), flat, nflat_d));
	}
	HB_CK(gc_launch(k_hc_flat, n, HB_THREADS, HB_THREADS, D.s, n, (const int32_t *) flat,
					label));
	if (gc_cancelled(ctx))
		return gc_fail(st, GC_ECANCEL, "canceled");

	/* down: the results and the count of flat clusters, one pipeline */
	{
		const gc_xfer_seg seg[4] = {
			{res->labels, label, sizeof(int32_t) * (size_t) n},
			{res->probability, prob, sizeof(double) * (size_t) n},
			{res->outlier, outl, sizeof(double) * (size_t) n},
			{&nflat, nflat_d, sizeof(int32_t)},
		};

		HB_CK(gc_xfer_d2h_many(seg, 4, D.s, D.host_threads));
	}
	res->clusters = nflat;
	return GC_OK;
}

#pragma GCC visibility pop
