/*
 * hdbscan.cu — HDBSCAN's phases 1 and 2 on the GPU: gc_hdbscan_mst_gpu
 * (src/core/common/gpu.h), the core distances and the edges of the
 * mutual-reachability minimum spanning tree, bit for bit
 * gc_hdbscan_core_cpu's and gc_hdbscan_mst_edges_cpu's; and
 * gc_hdbscan_linkage_gpu, which goes on to phase 3's first step, the
 * single-linkage tree (hdbscan_linkage.cu), bit for bit
 * gc_hdbscan_linkage's (the rest of phase 3 runs on the CPU: hdbscan.c's
 * driver).
 *
 * The call: the rows up (transfer.cu's pinned ring), the kd-tree
 * (common/kdtree.cu), the core distances (hdbscan_core.cu), Borůvka's
 * rounds (hdbscan_boruvka.cu), the edges sorted by (w, a, b) with two
 * stable CUB radix sorts (by pair, then by weight: non-negative doubles
 * order as their bits), and the core distances (in row order) and edges
 * down, or the single-linkage tree of the edges and its nodes down.  Every
 * allocation is the call's (check.cuh's gc_dev), released on every way
 * out.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cub/device/device_radix_sort.cuh>

#include "hdbscan_gpu.cuh"
#include "common/transfer.cuh"

#pragma GCC visibility push(hidden)

thread_local gc_hdbscan_gpu_phases hb_phases;

bool
hb_tracing(void)
{
	static int	on = -1;

	if (on < 0)
	{
		const char *e = getenv("GPUCLUST_HB_TRACE");

		on = e != NULL && e[0] == '1';
	}
	return on == 1;
}

void
hb_trace(const char *fmt,...)
{
	va_list		ap;

	if (!hb_tracing())
		return;
	va_start(ap, fmt);
	fputs("gpuclust hdbscan: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

gc_code
hb_read_counts(gc_dev &D, const gc_ctx *ctx, const unsigned *dev, unsigned *host,
			   int count, int err, const char *what, gc_status *st)
{
	const size_t bytes = sizeof(unsigned) * (size_t) count;
	uint64_t   *pin = D.pinned();
	gc_code		rc;

	if (pin != nullptr && bytes <= sizeof(uint64_t) * GC_PIN_WORDS)
	{
		/* queued behind the phase: there when the one wait ends */
		HB_CK(cudaMemcpyAsync(pin, dev, bytes, cudaMemcpyDeviceToHost, D.s));
		if ((rc = hb_sync_poll(D, ctx, st)) != GC_OK)
			return rc;
		memcpy(host, pin, bytes);
	}
	else
	{
		if ((rc = hb_sync_poll(D, ctx, st)) != GC_OK)
			return rc;
		HB_CK(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, D.s));
		HB_CK(cudaStreamSynchronize(D.s));
	}
	if (host[err] != 0)
		return gc_fail(st, GC_EDEVICE, "%s: internal error in %s (code %u)", HB_WHO, what,
					   host[err]);
	return GC_OK;
}

/* The core distances in row order. */
__global__ void
k_hb_core_rows(const double *__restrict__ core, const int *__restrict__ perm,
			   int n, double *out)
{
	const int	p = blockIdx.x * blockDim.x + threadIdx.x;

	if (p < n)
		out[perm[p]] = core[p];
}

/* The sorted edges as the core's gc_mst_edge. */
__global__ void
k_hb_edges_out(const unsigned long long *__restrict__ ew,
			   const unsigned long long *__restrict__ eab, int m,
			   gc_mst_edge *out)
{
	const int	e = blockIdx.x * blockDim.x + threadIdx.x;

	if (e < m)
	{
		out[e].a = (int64_t) (eab[e] >> 32);
		out[e].b = (int64_t) (eab[e] & 0xffffffffu);
		out[e].w = hb_dbl(ew[e]);
	}
}

/*
 * The m edges (weights ew, pairs eab) sorted by (w, a, b), with ew2 and
 * eab2 as the sorts' other buffers; *w_out and *ab_out: where they ended.
 */
static gc_code
hb_sort_edges(gc_dev &D, int m, unsigned long long *ew, unsigned long long *eab,
			  unsigned long long *ew2, unsigned long long *eab2,
			  unsigned long long **w_out, unsigned long long **ab_out,
			  gc_status *st)
{
	cub::DoubleBuffer<unsigned long long> pk(eab, eab2),
				pv(ew, ew2);
	size_t		b1 = 0,
				b2 = 0,
				bytes;

	/* pairs use bits 0 .. 62 (rows < 2^31), weights 0 .. 62 (sign 0) */
	HB_CK(cub::DeviceRadixSort::SortPairs(nullptr, b1, pk, pv, m, 0, 63, D.s));
	HB_CK(cub::DeviceRadixSort::SortPairs(nullptr, b2, pv, pk, m, 0, 63, D.s));
	HB_CK(D.scratch(b1 > b2 ? b1 : b2));
	bytes = D.cub_bytes;
	HB_CK(cub::DeviceRadixSort::SortPairs(D.cub_tmp, bytes, pk, pv, m, 0, 63, D.s));

	/* then stably by weight: the pairs' order stays among equal weights */
	cub::DoubleBuffer<unsigned long long> wk(pv.Current(), pv.Alternate()),
				wv(pk.Current(), pk.Alternate());

	bytes = D.cub_bytes;
	HB_CK(cub::DeviceRadixSort::SortPairs(D.cub_tmp, bytes, wk, wv, m, 0, 63, D.s));
	*w_out = wk.Current();
	*ab_out = wv.Current();
	return GC_OK;
}

/*
 * What a call returns: core (may be NULL) and edges; or nodes; or with p,
 * res (labels, probabilities, outlier scores, clusters).
 */
struct hb_out
{
	double	   *core;
	gc_mst_edge *edges;
	gc_linkage_node *nodes;
	const gc_hdbscan_params *p;
	gc_hdbscan_result *res;
};

/*
 * Phase 3 on the device from the sorted edges (ws, ps): the single-linkage
 * tree, into o.nodes (down), or on to the condensed tree and o.res.
 */
static gc_code
hb_phase3(gc_dev &D, const gc_ctx *ctx, int n, unsigned long long *ws,
		  unsigned long long *ps, const hb_out &o, gc_status *st)
{
	const int	m = n - 1;
	gc_linkage_node *no;
	unsigned   *par = nullptr;
	uint8_t    *side = nullptr;
	gc_hdbscan_place *leave;
	hb_clusters_dev cl;
	double		t0 = gc_now_ms();
	gc_code		rc;

	HB_ALLOC(no, m);
	if ((rc = hb_linkage(D, ctx, n, ws, ps, no, o.res ? &par : nullptr,
						 o.res ? &side : nullptr, st)) != GC_OK ||
		(rc = hb_sync_poll(D, ctx, st)) != GC_OK)
		return rc;
	hb_phases.ms_linkage = gc_now_ms() - t0;
	if (o.res == nullptr)
	{
		t0 = gc_now_ms();
		HB_CK(gc_xfer_d2h(o.nodes, no, sizeof(gc_linkage_node) * (size_t) m, D.s,
						  D.host_threads));
		hb_phases.ms_download += gc_now_ms() - t0;
		return GC_OK;
	}

	t0 = gc_now_ms();
	gc_report(ctx, GC_PHASE_LABEL, 0, 0, 0, n, NAN);
	D.drop(ws);
	D.drop(ps);
	HB_ALLOC(leave, n);
	rc = hb_condense_dev(D, ctx, n, o.p->min_cluster_size, no, par, side, leave, &cl, st);
	if (rc == GC_OK)
	{
		D.drop(no);
		D.drop(par);
		D.drop(side);
		rc = hb_label(D, ctx, n, o.p, leave, cl, o.res, st);
	}
	hb_phases.ms_labels = gc_now_ms() - t0;
	return rc;
}

/* Two events, destroyed with the call. */
struct hb_events
{
	cudaEvent_t a = nullptr,
				b = nullptr;

	~hb_events()
	{
		if (a != nullptr)
			cudaEventDestroy(a);
		if (b != nullptr)
			cudaEventDestroy(b);
	}
};

/* The call, its resources in D (released by D's destructor on any error). */
static gc_code
hb_run(gc_dev &D, const gc_ctx *ctx, const float *R, int n, int d,
	   int64_t min_samples, double alpha, gc_metric metric, const hb_out &o,
	   gc_status *st)
{
	hb_events	E;
	gc_kdtree	T;
	hb_seeds	Sd;
	float	   *Xd;
	double	   *cp,
			   *cr;
	unsigned long long *ew,
			   *eab,
			   *ew2,
			   *eab2,
			   *ws,
			   *ps;
	gc_mst_edge *eo = nullptr;
	const int	m = n - 1;
	double		t0 = gc_now_ms();
	gc_code		rc;

	/* the rows up; the pinned words first (see gc_dev::pinned) */
	(void) D.pinned();
	D.host_threads = gc_team_adapt(ctx);
	gc_report(ctx, GC_PHASE_UPLOAD, 0, 0, 0, n, NAN);
	HB_CK(cudaStreamCreateWithFlags(&D.s, cudaStreamNonBlocking));
	HB_ALLOC(Xd, (int64_t) n * d);
	HB_CK(gc_xfer_h2d(Xd, R, sizeof(float) * (size_t) n * d, D.s, D.host_threads));
	if ((rc = hb_sync_poll(D, ctx, st)) != GC_OK)
		return rc;
	hb_phases.ms_upload = gc_now_ms() - t0;

	/* the index */
	t0 = gc_now_ms();
	gc_report(ctx, GC_PHASE_INDEX, 0, 0, 0, n, NAN);
	if ((rc = gc_kdtree_build(D, ctx, Xd, n, d, hb_leaf(d), false, true, T, st)) != GC_OK)
		return rc;
	D.drop(Xd);					/* the tree has the rows in its order */
	hb_phases.ms_index = gc_now_ms() - t0;
	hb_trace("tree: n %d, d %d, depth %d, %lld leaves", n, d, T.depth, (long long) T.nleaf);

	/*
	 * phase 1: the core distances, by position, not waited for (Borůvka's
	 * first wait is theirs too): their time from two events around them
	 */
	t0 = gc_now_ms();
	gc_report(ctx, GC_PHASE_INIT, 0, 0, 0, n, NAN);
	HB_ALLOC(cp, n);
	HB_CK(cudaEventCreate(&E.a));
	HB_CK(cudaEventCreate(&E.b));
	HB_CK(cudaEventRecord(E.a, D.s));
	if ((rc = hb_core(D, ctx, T, min_samples, metric, cp, &Sd, st)) != GC_OK)
		return rc;
	HB_CK(cudaEventRecord(E.b, D.s));

	/* phase 2: the edges */
	HB_ALLOC(ew, m);
	HB_ALLOC(eab, m);
	if ((rc = hb_boruvka(D, ctx, T, cp, Sd, alpha, metric, ew, eab, &hb_phases.rounds,
						 st)) != GC_OK)
		return rc;
	{
		float		core_ms = 0.0f;

		HB_CK(cudaEventElapsedTime(&core_ms, E.a, E.b));
		hb_phases.ms_core = core_ms;
		hb_phases.ms_mst = gc_now_ms() - t0 - core_ms;
	}

	/* sorted by (w, a, b) */
	t0 = gc_now_ms();
	HB_ALLOC(ew2, m);
	HB_ALLOC(eab2, m);
	if ((rc = hb_sort_edges(D, m, ew, eab, ew2, eab2, &ws, &ps, st)) != GC_OK)
		return rc;
	if (o.edges != nullptr)
	{
		HB_ALLOC(eo, m);
		HB_CK(gc_launch(k_hb_edges_out, m, HB_THREADS, HB_THREADS, D.s,
						(const unsigned long long *) ws, (const unsigned long long *) ps, m, eo));
	}
	if ((rc = hb_sync_poll(D, ctx, st)) != GC_OK)
		return rc;
	hb_phases.ms_sort = gc_now_ms() - t0;

	/* the core distances in row order, while the tree is there */
	if (o.core != nullptr)
	{
		HB_ALLOC(cr, n);
		HB_CK(gc_launch(k_hb_core_rows, n, HB_THREADS, HB_THREADS, D.s,
						(const double *) cp, (const int *) T.perm, n, cr));
	}

	/* phase 3, in the room of the tree and the sort's other buffers */
	if (o.nodes != nullptr || o.res != nullptr)
	{
		for (void *a : {(void *) T.lo, (void *) T.hi, (void *) T.perm,
				(void *) T.pos_of_row, (void *) T.Xs, (void *) cp,
				(void *) (ws == ew ? ew2 : ew), (void *) (ps == eab ? eab2 : eab)})
			D.drop(a);
		return hb_phase3(D, ctx, n, ws, ps, o, st);
	}

	/* down */
	t0 = gc_now_ms();
	if (o.core != nullptr)
		HB_CK(gc_xfer_d2h(o.core, cr, sizeof(double) * (size_t) n, D.s, D.host_threads));
	HB_CK(gc_xfer_d2h(o.edges, eo, sizeof(gc_mst_edge) * (size_t) m, D.s, D.host_threads));
	hb_phases.ms_download = gc_now_ms() - t0;
	return GC_OK;
}

/* Every entry: o says what it returns. */
static gc_code
hb_call(const gc_ctx *ctx, const float *R, int64_t n, int d,
		int64_t min_samples, double alpha, gc_metric metric, const hb_out &o,
		gc_status *st)
{
	const double t0 = gc_now_ms();
	gc_code		rc;

	memset(&hb_phases, 0, sizeof(hb_phases));
	/* the caller has checked; what would break the kernels is refused */
	if (n > GC_HDBSCAN_GPU_MAX_N)
		return gc_fail(st, GC_EDEVICE, "the GPU HDBSCAN takes at most %d rows, got %lld",
					   GC_HDBSCAN_GPU_MAX_N, (long long) n);
	if (n < 2 || d < 1 || min_samples < 1 || min_samples > n || !(alpha > 0.0) ||
		R == NULL)
		return gc_fail(st, GC_EINVAL, "%s: bad arguments (n %lld, d %d, min_samples %lld)",
					   HB_WHO, (long long) n, d, (long long) min_samples);
	{
		gc_dev		D;

		rc = hb_run(D, ctx, R, (int) n, d, min_samples, alpha, metric, o, st);
		D.release();
	}
	hb_phases.ms_total = gc_now_ms() - t0;
	return rc;
}

#pragma GCC visibility pop

extern "C" gc_code
gc_hdbscan_mst_gpu(const gc_ctx *ctx, const float *R, int64_t n, int d,
				   int64_t min_samples, double alpha, gc_metric metric,
				   double *core, gc_mst_edge *edges, gc_status *st)
{
	hb_out		o = {core, edges, nullptr, nullptr, nullptr};

	if (edges == NULL)
		return gc_fail(st, GC_EINVAL, "%s: no room for the edges", HB_WHO);
	return hb_call(ctx, R, n, d, min_samples, alpha, metric, o, st);
}

extern "C" gc_code
gc_hdbscan_linkage_gpu(const gc_ctx *ctx, const float *R, int64_t n, int d,
					   int64_t min_samples, double alpha, gc_metric metric,
					   gc_linkage_node *nodes, gc_status *st)
{
	hb_out		o = {nullptr, nullptr, nodes, nullptr, nullptr};

	if (nodes == NULL)
		return gc_fail(st, GC_EINVAL, "%s: no room for the single-linkage tree", HB_WHO);
	return hb_call(ctx, R, n, d, min_samples, alpha, metric, o, st);
}

extern "C" gc_code
gc_hdbscan_gpu(const gc_ctx *ctx, const float *R, int64_t n, int d,
			   const gc_hdbscan_params *p, gc_hdbscan_result *res, gc_status *st)
{
	hb_out		o = {nullptr, nullptr, nullptr, p, res};

	if (p == NULL || p->min_cluster_size < 2 || res == NULL || res->tree != NULL ||
		res->labels == NULL || res->probability == NULL || res->outlier == NULL)
		return gc_fail(st, GC_EINVAL, "%s: bad arguments for the labels", HB_WHO);
	res->clusters = 0;
	return hb_call(ctx, R, n, d, p->min_samples, p->alpha, p->metric, o, st);
}

extern "C" size_t
gc_hdbscan_gpu_mem_bytes(int64_t n, int d, int64_t min_samples)
{
	/*
	 * Everything the call allocates, as if all lived at once (an upper
	 * bound): the rows 4 d; the tree (common/kdtree.cu: its rows 4 d,
	 * the boxes and their build copies 16 d a node, under 2 / leaf nodes
	 * a row, permutations and keys 24, CUB's radix sort's scratch at most
	 * 16); the core distances 8
	 * and in row order 8; Borůvka's arrays (hb_boruvka_bytes); the edges
	 * 16, the sort's other buffers 16 and the edges out 24.  Plus a
	 * batch's heaps, or the seeds.  The single-linkage tree runs after the tree, the
	 * core distances and the sort's other buffers are released: the
	 * sorted edges, the nodes out and its own (hb_linkage_bytes).  The
	 * larger of the two, and room for the allocator's rounding of some 60
	 * allocations and CUB's radix sort.
	 */
	const size_t per = (size_t) 8 * (size_t) d + (size_t) (32 * d / hb_leaf(d) + 1) +
		24 + 16 + 16 + 16 + 16 + 24;
	size_t		phases,
				linkage,
				condense;

	if (n < 1)
		return 0;
	phases = (size_t) n * per + hb_boruvka_bytes(n, d) + hb_core_bytes(n, min_samples);
	/*
	 * phase 3's: the single-linkage tree's (the sorted edges 16 and the
	 * nodes out 24), then the condensed tree's (the nodes, their parents
	 * and sides 34, and its own at min_cluster_size 2, the most clusters)
	 */
	linkage = (size_t) n * (16 + 24) + hb_linkage_bytes(n);
	condense = (size_t) n * 34 + hb_condense_bytes(n, 2);
	if (condense > linkage)
		linkage = condense;
	return (phases > linkage ? phases : linkage) + ((size_t) 128 << 20);
}

extern "C" void
gc_hdbscan_gpu_last_phases(gc_hdbscan_gpu_phases *out)
{
	*out = hb_phases;
}
