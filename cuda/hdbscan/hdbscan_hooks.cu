/*
 * hdbscan_hooks.cu — the GPU HDBSCAN's test-only entry points: the
 * single-linkage tree (hdbscan_linkage.cu) of any spanning tree the test
 * gives, the condensed tree (hdbscan_condense.cu) of any single-linkage
 * tree, and the kd-tree its searches walk (common/kdtree.cu) from either
 * build (src/core/common/gpu.h, under GC_TESTING).  Linked into the GPU
 * tests and benchmarks only (the Makefile's CU_TEST_SRCS).
 */
#define GC_TESTING 1

#include <vector>

#include "hdbscan_gpu.cuh"

static gc_code
linkage_of(gc_dev &D, const gc_mst_edge *edges, int n, gc_linkage_node *nodes,
		   gc_status *st)
{
	const int	m = n - 1;
	std::vector<unsigned long long> w((size_t) m),
				ab((size_t) m);
	unsigned long long *ew,
			   *eab;
	gc_linkage_node *out;

	for (int e = 0; e < m; e++)
	{
		memcpy(&w[e], &edges[e].w, sizeof(double));
		ab[e] = ((unsigned long long) edges[e].a << 32) | (unsigned long long) edges[e].b;
	}
	HB_CK(cudaStreamCreateWithFlags(&D.s, cudaStreamNonBlocking));
	HB_ALLOC(ew, m);
	HB_ALLOC(eab, m);
	HB_ALLOC(out, m);
	HB_CK(cudaMemcpyAsync(ew, w.data(), sizeof(unsigned long long) * (size_t) m,
						  cudaMemcpyHostToDevice, D.s));
	HB_CK(cudaMemcpyAsync(eab, ab.data(), sizeof(unsigned long long) * (size_t) m,
						  cudaMemcpyHostToDevice, D.s));
	gc_code		rc = hb_linkage(D, nullptr, n, ew, eab, out, nullptr, nullptr, st);

	if (rc != GC_OK)
		return rc;
	HB_CK(cudaMemcpyAsync(nodes, out, sizeof(gc_linkage_node) * (size_t) m,
						  cudaMemcpyDeviceToHost, D.s));
	HB_CK(cudaStreamSynchronize(D.s));
	return GC_OK;
}

extern "C" gc_code
gc_hdbscan_gpu_linkage_of(const gc_mst_edge *edges, int64_t n,
						  gc_linkage_node *nodes, gc_status *st)
{
	gc_code		rc;

	if (n < 2 || n > (1 << 29) || edges == NULL || nodes == NULL)
		return gc_fail(st, GC_EINVAL, "%s: bad arguments (n %lld)", HB_WHO, (long long) n);
	for (int64_t e = 0; e < n - 1; e++)
		if (edges[e].a < 0 || edges[e].a >= edges[e].b || edges[e].b >= n)
			return gc_fail(st, GC_EINVAL, "%s: edge %lld is not a < b < n", HB_WHO,
						   (long long) e);
	{
		gc_dev		D;

		rc = linkage_of(D, edges, (int) n, nodes, st);
		D.release();
	}
	return rc;
}

/* Each node's parent and side in it, from the nodes' children. */
__global__ static void
k_hk_parents(int n, const gc_linkage_node *node, unsigned *par, uint8_t *side)
{
	const int	i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= n - 1)
		return;
	par[node[i].left] = par[node[i].right] = (unsigned) n + (unsigned) i;
	side[node[i].left] = 0;
	side[node[i].right] = 1;
	if (i == n - 2)
		par[n + i] = 0xffffffffu;
}

/*
 * The condensed tree's clusters from the device's block into cl (host
 * arrays of their own, as gc_hdbscan_condense gives them:
 * gc_hdbscan_clusters_free).
 */
static gc_code
clusters_down(gc_dev &D, const hb_clusters_dev &B, gc_hdbscan_clusters *cl,
			  gc_status *st)
{
	const size_t bytes = sizeof(int64_t) * (size_t) B.n;
	void	  **arr[5] = {(void **) &cl->parent, (void **) &cl->child,
		(void **) &cl->birth, (void **) &cl->stab, (void **) &cl->death};

	cl->n = B.n;
	for (int a = 0; a < 5; a++)
		if ((*arr[a] = malloc(bytes)) == NULL)
			return gc_fail(st, GC_ENOMEM, "out of memory for HDBSCAN's clusters");
	for (int a = 0; a < 5; a++)
		HB_CK(cudaMemcpyAsync(*arr[a], B.block + a * B.n, bytes, cudaMemcpyDeviceToHost,
							  D.s));
	HB_CK(cudaStreamSynchronize(D.s));
	return GC_OK;
}

static gc_code
condense_of(gc_dev &D, const gc_linkage_node *nodes, int n, int64_t mcs,
			gc_hdbscan_clusters *out, gc_hdbscan_place *leave, gc_status *st)
{
	const int	m = n - 1;
	gc_linkage_node *node;
	unsigned   *par;
	uint8_t    *side;
	gc_hdbscan_place *lv;
	gc_code		rc;

	HB_CK(cudaStreamCreateWithFlags(&D.s, cudaStreamNonBlocking));
	HB_ALLOC(node, m);
	HB_ALLOC(par, (int64_t) n + m);
	HB_ALLOC(side, (int64_t) n + m);
	HB_ALLOC(lv, n);
	HB_CK(cudaMemcpyAsync(node, nodes, sizeof(gc_linkage_node) * (size_t) m,
						  cudaMemcpyHostToDevice, D.s));
	HB_CK(gc_launch(k_hk_parents, m, HB_THREADS, HB_THREADS, D.s, n,
					(const gc_linkage_node *) node, par, side));
	hb_clusters_dev B;

	if ((rc = hb_condense_dev(D, nullptr, n, mcs, node, par, side, lv, &B, st)) != GC_OK ||
		(rc = clusters_down(D, B, out, st)) != GC_OK)
		return rc;
	HB_CK(cudaMemcpyAsync(leave, lv, sizeof(gc_hdbscan_place) * (size_t) n,
						  cudaMemcpyDeviceToHost, D.s));
	HB_CK(cudaStreamSynchronize(D.s));
	return GC_OK;
}

extern "C" gc_code
gc_hdbscan_gpu_condense_of(const gc_linkage_node *nodes, int64_t n, int64_t mcs,
						   gc_hdbscan_clusters *out, gc_hdbscan_place *leave,
						   gc_status *st)
{
	gc_code		rc;

	memset(out, 0, sizeof(*out));
	if (n < 2 || n > (1 << 29) || mcs < 2 || nodes == NULL || leave == NULL)
		return gc_fail(st, GC_EINVAL, "%s: bad arguments (n %lld)", HB_WHO, (long long) n);
	for (int64_t i = 0; i < n - 1; i++)
		if (nodes[i].left >= (uint32_t) (n + i) || nodes[i].right >= (uint32_t) (n + i))
			return gc_fail(st, GC_EINVAL, "%s: node %lld joins a later node", HB_WHO,
						   (long long) i);
	{
		gc_dev		D;

		rc = condense_of(D, nodes, (int) n, mcs, out, leave, st);
		D.release();
	}
	if (rc != GC_OK)
		gc_hdbscan_clusters_free(out);
	return rc;
}

static gc_code
kdtree_of(gc_dev &D, const float *X, int n, int d, int leaf, bool cyclic,
		  bool blocks, int64_t cap, int *depth, int *perm, float *lo, float *hi,
		  gc_status *st)
{
	gc_kdtree	T;
	float	   *Xd;
	gc_code		rc;

	HB_CK(cudaStreamCreateWithFlags(&D.s, cudaStreamNonBlocking));
	HB_ALLOC(Xd, (int64_t) n * d);
	HB_CK(cudaMemcpyAsync(Xd, X, sizeof(float) * (size_t) n * d, cudaMemcpyHostToDevice, D.s));
	if ((rc = gc_kdtree_build(D, nullptr, Xd, n, d, leaf, cyclic, blocks, T, st)) != GC_OK)
		return rc;
	if (T.nnode > cap)
		return gc_fail(st, GC_EINVAL, "GPU kd-tree: %lld nodes, room for %lld",
					   (long long) T.nnode, (long long) cap);
	HB_CK(cudaMemcpyAsync(perm, T.perm, sizeof(int) * (size_t) n, cudaMemcpyDeviceToHost, D.s));
	HB_CK(cudaMemcpyAsync(lo, T.lo, sizeof(float) * (size_t) (T.nnode * d),
						  cudaMemcpyDeviceToHost, D.s));
	HB_CK(cudaMemcpyAsync(hi, T.hi, sizeof(float) * (size_t) (T.nnode * d),
						  cudaMemcpyDeviceToHost, D.s));
	HB_CK(cudaStreamSynchronize(D.s));
	*depth = T.depth;
	return GC_OK;
}

extern "C" gc_code
gc_kdtree_gpu_of(const float *X, int64_t n, int d, int leaf, bool cyclic, bool blocks,
				 int64_t cap, int *depth, int *perm, float *lo, float *hi,
				 gc_status *st)
{
	gc_code		rc;

	if (n < 1 || n >= INT32_MAX || d < 1 || leaf < 1 || X == NULL || perm == NULL ||
		lo == NULL || hi == NULL || depth == NULL)
		return gc_fail(st, GC_EINVAL, "GPU kd-tree: bad arguments (n %lld, d %d)",
					   (long long) n, d);
	{
		gc_dev		D;

		rc = kdtree_of(D, X, (int) n, d, leaf, cyclic, blocks, cap, depth, perm, lo, hi, st);
		D.release();
	}
	return rc;
}
