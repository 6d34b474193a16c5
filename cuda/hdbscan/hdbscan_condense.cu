/*
 * hdbscan_condense.cu — the rest of HDBSCAN's phase 3 on the GPU, from the
 * single-linkage tree (hdbscan_linkage.cu): the condensed tree's clusters
 * and each row's place in it, bit for bit hdbscan_tree.c's pass from the
 * root (gc_hdbscan_condense); then, with the flat selection made on the
 * host by the core's own gc_hdbscan_select (a few arrays of clusters),
 * each row's label, membership probability and outlier score by the
 * core's gc_hdbscan_row, and the flat numbers by gc_hdbscan_flat.
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
 *    that order, one warp a cluster streams them through shared memory and
 *    one lane adds their terms in order, as hd_carry does: a split adds
 *    (lambda - birth) times each side's rows, a side that falls adds
 *    (lambda - birth) once for each of its rows, left side first; the
 *    largest lambda of those nodes is the cluster's death.
 *
 * The labels: the clusters down to the host, the selection there, its
 * per-cluster arrays up, each row's label, probability and score and each
 * cluster's lowest row on the device, the flat numbers on the host, the
 * labels renumbered on the device.  Errors that only a malformed tree
 * could make set a flag: GC_EDEVICE.
 */
#include <vector>

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
	unsigned   *cnt;			/* [0] carrying nodes, [1] errors */
};

/* The clusters, device arrays of kmax. */
struct hc_clusters
{
	int64_t    *parent,
			   *child;
	double	   *birth,
			   *stab,
			   *death;
};

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
 * Each cluster's stability and death, a warp a cluster: its nodes in
 * shared memory 32 at a time, lane 0 adding their terms in order.
 */
#define HC_WARPS 4
__global__ void __launch_bounds__(32 * HC_WARPS)
k_hc_stab(int nclu, int ncarry, int64_t mcs, const hc_rec *rec,
		  const int *cstart, hc_clusters C)
{
	__shared__ hc_rec buf[HC_WARPS][32];
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
		const int	cnt = e - base < 32 ? e - base : 32;

		if (lane < cnt)
			buf[w][lane] = rec[base + lane];
		__syncwarp();
		if (lane == 0)
			for (int t = 0; t < cnt; t++)
			{
				const hc_rec r = buf[w][t];
				const double term = r.lambda - birth;

				if (r.l >= mcs && r.r >= mcs)
				{
					s += term * (double) r.l;
					s += term * (double) r.r;
				}
				else
				{
					if (r.l < mcs)
						for (int k = 0; k < r.l; k++)
							s += term * 1.0;
					if (r.r < mcs)
						for (int k = 0; k < r.r; k++)
							s += term * 1.0;
				}
				if (r.lambda > death)
					death = r.lambda;
			}
		__syncwarp();
	}
	if (lane == 0)
	{
		C.stab[c] = s;
		C.death[c] = death;
	}
}

/* Each row's label, probability and score; its cluster's lowest row. */
__global__ void
k_hc_rows(int n, const gc_hdbscan_place *leave, const int64_t *top,
		  const double *death, const double *lmax, bool single_root,
		  double threshold, int32_t *label, double *prob, double *outl,
		  int *first)
{
	const int	r = blockIdx.x * blockDim.x + threadIdx.x;

	if (r >= n)
		return;
	gc_hdbscan_row(leave[r], top, death, lmax, single_root, threshold, &label[r],
				   &prob[r], &outl[r]);
	if (label[r] != GC_NOISE)
		atomicMin(&first[label[r]], r);
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
	 * leave 16 a row; the clusters (2n / mcs + 1) 40 each and the
	 * selection's arrays 24; the labels 4, probabilities 8 and scores 8
	 * and the first rows; CUB's scan and sort.
	 */
	const int64_t k = 2 * (n / (mcs > 1 ? mcs : 2)) + 1;

	return (size_t) n * (1 + 8 + 8 + 16 + 16 + 8 + 16 + 20 + 8) +
		(size_t) k * (40 + 24 + 8) + ((size_t) 16 << 20);
}

/* The device's clusters into the host's cl (arrays of cl->n). */
static gc_code
hc_clusters_down(gc_dev &D, const hc_clusters &C, gc_hdbscan_clusters *cl,
				 gc_status *st)
{
	const size_t k = (size_t) cl->n;

	HB_CK(cudaMemcpyAsync(cl->parent, C.parent, 8 * k, cudaMemcpyDeviceToHost, D.s));
	HB_CK(cudaMemcpyAsync(cl->child, C.child, 8 * k, cudaMemcpyDeviceToHost, D.s));
	HB_CK(cudaMemcpyAsync(cl->birth, C.birth, 8 * k, cudaMemcpyDeviceToHost, D.s));
	HB_CK(cudaMemcpyAsync(cl->stab, C.stab, 8 * k, cudaMemcpyDeviceToHost, D.s));
	HB_CK(cudaMemcpyAsync(cl->death, C.death, 8 * k, cudaMemcpyDeviceToHost, D.s));
	HB_CK(cudaStreamSynchronize(D.s));
	return GC_OK;
}

gc_code
hb_condense(gc_dev &D, const gc_ctx *ctx, int n, int64_t mcs,
			const gc_linkage_node *node, const unsigned *par,
			const uint8_t *side, gc_hdbscan_place *leave,
			gc_hdbscan_clusters *cl, double **death, gc_status *st)
{
	const int	m = n - 1;
	hc_work		W;
	hc_clusters C;
	unsigned	cnt[2];
	int			last[2],
				nclu,
				ncarry;
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
	HB_ALLOC(W.cnt, 2);
	HB_CK(cudaMemsetAsync(W.cnt, 0, 2 * sizeof(unsigned), D.s));

	/* the kinds, the splits' ranks, the count of clusters */
	HB_CK(gc_launch(k_hc_kind, m, HB_THREADS, HB_THREADS, D.s, W));
	HB_CK(cub::DeviceScan::ExclusiveSum(nullptr, bytes, W.sflag, W.sidx, m, D.s));
	HB_CK(D.scratch(bytes));
	bytes = D.cub_bytes;
	HB_CK(cub::DeviceScan::ExclusiveSum(D.cub_tmp, bytes, W.sflag, W.sidx, m, D.s));
	HB_CK(cudaMemcpyAsync(&last[0], W.sflag + m - 1, sizeof(int), cudaMemcpyDeviceToHost, D.s));
	HB_CK(cudaMemcpyAsync(&last[1], W.sidx + m - 1, sizeof(int), cudaMemcpyDeviceToHost, D.s));
	if ((rc = hb_read_counts(D, ctx, W.cnt, cnt, 2, 1, "the condensed tree", st)) != GC_OK)
		return rc;
	nclu = 1 + 2 * (last[0] + last[1]);
	ncarry = (int) cnt[0];

	/* the cluster of each carrying node, the place of each row */
	HB_CK(gc_launch(k_hc_start, m, HB_THREADS, HB_THREADS, D.s, W));
	for (int r = 0; r < 32 && ((int64_t) 1 << r) <= 2 * (int64_t) m; r++)
		HB_CK(gc_launch(k_hc_jump, m, HB_THREADS, HB_THREADS, D.s, W));
	HB_CK(gc_launch(k_hc_fall0, (int64_t) n + m, HB_THREADS, HB_THREADS, D.s, W));
	for (int r = 0; r < 32 && ((int64_t) 1 << r) <= 2 * (mcs < n ? mcs : (int64_t) n); r++)
		HB_CK(gc_launch(k_hc_fall, (int64_t) n + m, HB_THREADS, HB_THREADS, D.s, W));
	HB_CK(gc_launch(k_hc_leave, n, HB_THREADS, HB_THREADS, D.s, W));

	/* the clusters */
	HB_ALLOC(C.parent, nclu);
	HB_ALLOC(C.child, nclu);
	HB_ALLOC(C.birth, nclu);
	HB_ALLOC(C.stab, nclu);
	HB_ALLOC(C.death, nclu);
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
	if ((rc = hb_read_counts(D, ctx, W.cnt, cnt, 2, 1, "the condensed tree", st)) != GC_OK)
		return rc;
	for (void *a : {(void *) W.kind, (void *) W.sflag, (void *) W.sidx, (void *) W.lab,
			(void *) W.nxt, (void *) W.fall, (void *) W.cnt, (void *) key, (void *) key2,
			(void *) rec, (void *) cstart})
		D.drop(a);

	/* the clusters to the host: arrays of nclu */
	cl->n = nclu;
	cl->parent = (int64_t *) malloc(sizeof(int64_t) * (size_t) nclu);
	cl->child = (int64_t *) malloc(sizeof(int64_t) * (size_t) nclu);
	cl->birth = (double *) malloc(sizeof(double) * (size_t) nclu);
	cl->stab = (double *) malloc(sizeof(double) * (size_t) nclu);
	cl->death = (double *) malloc(sizeof(double) * (size_t) nclu);
	if (cl->parent == NULL || cl->child == NULL || cl->birth == NULL ||
		cl->stab == NULL || cl->death == NULL)
		return gc_fail(st, GC_ENOMEM, "out of memory for HDBSCAN's clusters");
	if ((rc = hc_clusters_down(D, C, cl, st)) != GC_OK)
		return rc;
	for (void *a : {(void *) C.parent, (void *) C.child, (void *) C.birth, (void *) C.stab})
		D.drop(a);
	if (death != nullptr)
		*death = C.death;
	else
		D.drop(C.death);
	return GC_OK;
}

gc_code
hb_label(gc_dev &D, const gc_ctx *ctx, int n, const gc_hdbscan_params *p,
		 const gc_hdbscan_place *leave, gc_hdbscan_clusters *cl,
		 const double *death, gc_hdbscan_result *res, gc_status *st)
{
	const int64_t k = cl->n;
	std::vector<int64_t> top((size_t) k),
				first64((size_t) k),
				scratch((size_t) k);
	std::vector<double> lmax((size_t) k);
	std::vector<int> first((size_t) k);
	std::vector<int32_t> flat((size_t) k);
	gc_hdbscan_selection sel = {top.data(), lmax.data(), false, 0.0};
	int64_t    *top_d;
	double	   *lmax_d,
			   *prob,
			   *outl;
	int32_t    *label,
			   *flat_d;
	int		   *first_d;
	gc_code		rc;

	/* the selection on the host, its arrays up */
	if ((rc = gc_hdbscan_select(cl, p, &sel, st)) != GC_OK)
		return rc;
	HB_ALLOC(top_d, k);
	HB_ALLOC(lmax_d, k);
	HB_CK(cudaMemcpyAsync(top_d, top.data(), 8 * (size_t) k, cudaMemcpyHostToDevice, D.s));
	HB_CK(cudaMemcpyAsync(lmax_d, lmax.data(), 8 * (size_t) k, cudaMemcpyHostToDevice, D.s));

	/* the rows */
	HB_ALLOC(label, n);
	HB_ALLOC(prob, n);
	HB_ALLOC(outl, n);
	HB_ALLOC(first_d, k);
	HB_CK(gc_launch(k_fill, k, HB_THREADS, HB_THREADS, D.s, first_d, (int) k, n));
	HB_CK(gc_launch(k_hc_rows, n, HB_THREADS, HB_THREADS, D.s, n, leave,
					(const int64_t *) top_d, death, (const double *) lmax_d,
					sel.single_root, sel.threshold, label, prob, outl, first_d));

	/* the flat numbers on the host, the labels renumbered */
	HB_CK(cudaMemcpyAsync(first.data(), first_d, sizeof(int) * (size_t) k,
						  cudaMemcpyDeviceToHost, D.s));
	if ((rc = hb_sync_poll(D, ctx, st)) != GC_OK)
		return rc;
	for (int64_t c = 0; c < k; c++)
		first64[c] = first[c];
	res->clusters = gc_hdbscan_flat(k, first64.data(), n, flat.data(), scratch.data());
	HB_ALLOC(flat_d, k);
	HB_CK(cudaMemcpyAsync(flat_d, flat.data(), sizeof(int32_t) * (size_t) k,
						  cudaMemcpyHostToDevice, D.s));
	HB_CK(gc_launch(k_hc_flat, n, HB_THREADS, HB_THREADS, D.s, n, (const int32_t *) flat_d,
					label));

	/* down */
	HB_CK(gc_xfer_d2h(res->labels, label, sizeof(int32_t) * (size_t) n, D.s, D.host_threads));
	HB_CK(gc_xfer_d2h(res->probability, prob, sizeof(double) * (size_t) n, D.s,
					  D.host_threads));
	HB_CK(gc_xfer_d2h(res->outlier, outl, sizeof(double) * (size_t) n, D.s, D.host_threads));
	return GC_OK;
}

#pragma GCC visibility pop
