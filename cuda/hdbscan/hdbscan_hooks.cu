/*
 * hdbscan_hooks.cu — the GPU HDBSCAN's test-only entry point: the
 * single-linkage tree (hdbscan_linkage.cu) of any spanning tree the test
 * gives (src/core/common/gpu.h, under GC_TESTING).  Linked into the GPU
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
	gc_code		rc = hb_linkage(D, nullptr, n, ew, eab, out, st);

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
