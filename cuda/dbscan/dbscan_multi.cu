/*
 * dbscan_multi.cu — one DBSCAN call split over several GPUs of the host
 * (db_run when ctx->n_gpus >= 2): the labels and core flags of one GPU,
 * bit for bit, so the CPU's.
 *
 * Space is cut into slabs along one dimension, one slab per GPU; each GPU
 * clusters its slab with a halo of two eps, and the slabs' clusters are
 * joined where a row is core in two of them: the partitioned DBSCAN of
 * dbscan.h (gc_dbscan_span; its merge's rules, gc_dbscan_merge), whose
 * proof carries over.
 *   plan       on the host, from DB_MULTI_SAMPLE evenly spaced rows
 *              (gathered on the call's threads): the
 *              widest dimension, cuts at the sample's quantiles
 *              (gc_dbscan_cuts over its histogram), and the rows the slabs
 *              would hold with their halos (gc_dbscan_held).  Where that
 *              is above DB_SPLIT_HELD_MAX n (a halo so
 *              wide that every GPU would redo most of the work) the slabs
 *              are fewer, down to one: the first GPU alone.
 *   upload     GPU g takes the consecutive rows of chunk g, the chunks'
 *              copies side by side, each through its GPU's pinned ring,
 *              and sends every slab the rows of its chunk the slab holds,
 *              in row order (cudaMemcpyPeerAsync), so each slab holds its
 *              rows in row order.
 *   local run  each GPU runs the one-GPU DBSCAN (db_solve) over its slab,
 *              labels and flags kept on the GPU (db_out).  Over rows in
 *              row order its ties fall as one GPU's do.
 *   merge      each slab finds its clusters' least home rows, and lists
 *              its links (rows core there that another slab holds too) to
 *              the host, which joins the linked clusters (gc_dbscan_merge's
 *              rule: the clusters that hold a core row in common are one)
 *              and sends each slab the groups' least rows of its joined
 *              clusters.  The groups are numbered by their least rows, as
 *              the CPU numbers them, on the GPUs: each group's least row is
 *              home to one cluster of one slab, which lists it; the lists
 *              are sorted on the first GPU, and each cluster's label is
 *              its group's least row's rank there.  So the host's work
 *              grows with the links, not with the clusters.
 *   download   each slab relabels its home rows (every row is home in
 *              exactly one slab, whose core flag for it is exact) and sends
 *              them to the GPU of their chunk, which puts them in place and
 *              copies its chunk down.
 * Copies between GPUs are cudaMemcpyPeerAsync (NVLink or PCIe peer to peer
 * where the devices can: gc_gpus_connect; else staged by the driver): the
 * rows of the halos and of the chunks that lie in another slab, and every
 * label once.
 */
#include <algorithm>
#include <math.h>
#include <string.h>
#include <vector>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/binary_search.h>
#include <thrust/execution_policy.h>
#include <thrust/iterator/counting_iterator.h>

#include "dbscan_gpu.cuh"
#include "common/multi.cuh"
#include "common/transfer.cuh"

/* Rows of the sample the plan is made from, and its histogram's bins. */
#define DB_MULTI_SAMPLE 65536
#define DB_MULTI_BINS 4096

/* The most rows the slabs may hold together, halos included, over n
 * (the tests raise it: gc_dbscan_gpu_set_split_held). */
std::atomic<double> db_split_held_max{DB_SPLIT_HELD_MAX};

/* The chunks' first rows: chunk g is rows r[g] .. r[g + 1]. */
struct mu_rows
{
	int64_t		r[GC_GPUS_MAX + 1];
};

/* One GPU of the call: its chunk of rows, then its slab. */
struct mu_gpu
{
	db_dev		D;
	double		ms_alloc = 0;
	int			nc = 0;			/* rows of its chunk */
	float	   *Xc = nullptr;	/* the chunk, until its rows are sent */
	double	   *cuts = nullptr; /* the plan's cuts, on this GPU */
	int		   *num = nullptr;	/* CUB's count of rows selected */
	int64_t		to[GC_GPUS_MAX] = {};	/* rows of its chunk each slab holds */
	/* its slab: nl rows in row order */
	int			nl = 0;
	float	   *Xl = nullptr;
	int		   *gl = nullptr;	/* their rows */
	int32_t    *lab = nullptr;
	uint8_t    *core = nullptr;
	int			comps = 0;
	db_index	used = DB_INDEX_AUTO;
	gc_dbscan_gpu_phases ph = {};
	int		   *cmin = nullptr; /* each cluster's least home row (INT32_MAX: none) */
	/* its links, on the host, in row order: row, cluster, the cluster's cmin */
	std::vector<int32_t> link_id,
				link_comp,
				link_min;
	/* its joined clusters whose group's least row is not their own */
	std::vector<int32_t> ov_comp,
				ov_min;
	int		   *gmin = nullptr; /* each cluster's group's least home row */
	int		   *reps = nullptr; /* the groups' least rows its clusters hold */
	int			nreps = 0;
	int32_t    *joined = nullptr;	/* each cluster's final label */
	/* its home rows, relabelled, in row order */
	int			nh = 0;
	int		   *hg = nullptr;
	int32_t    *hl = nullptr;
	uint8_t    *hc = nullptr;
	int64_t		hoff[GC_GPUS_MAX + 1] = {};	/* those of chunk g: hoff[g] .. */
	/* its chunk's labels and flags, as sent by the slabs */
	int		   *rg = nullptr;
	int32_t    *rl = nullptr;
	uint8_t    *rc = nullptr;
};

struct mu_call
{
	int			S = 0;
	int			dev[GC_GPUS_MAX];
	mu_gpu		G[GC_GPUS_MAX];

	~mu_call()
	{
		for (int s = 0; s < S; s++)
		{
			cudaSetDevice(dev[s]);
			G[s].D.release();
		}
	}
};

/* ------------------------------------------------------------------ */
/* the plan                                                            */
/* ------------------------------------------------------------------ */

/* The sample's rows: m rows of X (d columns) evenly spaced, into S. */
struct mu_sample
{
	const float *X;
	int64_t		n,
				m;
	int			d;
	float	   *S;
};

/*
 * Thread t of T's share of the sample's rows.  Each row is a cache and a
 * TLB miss of its own, far apart in X: on the two-GPU machine one thread
 * gathered 65,536 rows of 200M in 0.9-1.5 ms, the team of 32 in 0.06 ms.
 */
static void
mu_sample_part(void *arg, int t, int T)
{
	const mu_sample *J = (const mu_sample *) arg;

	for (int64_t i = J->m * t / T; i < J->m * (t + 1) / T; i++)
		memcpy(J->S + i * J->d, J->X + (i * J->n / J->m) * J->d, sizeof(float) * J->d);
}

/*
 * The slabs for at most S GPUs from the sample of DB_MULTI_SAMPLE rows
 * (gathered on team threads): plan->dim and cuts (room for S - 1),
 * plan->parts 1 .. S, the most whose rows held (estimated from the
 * sample) stay within db_split_held_max n.
 */
static void
mu_plan(const float *X, int64_t n, int d, double halo, int S, int team,
		gc_dbscan_plan *plan, double *cuts)
{
	const int64_t m = n < DB_MULTI_SAMPLE ? n : DB_MULTI_SAMPLE;
	std::vector<float> sample((size_t) m * d);
	std::vector<double> lo(d, INFINITY),
				hi(d, -INFINITY),
				counts(DB_MULTI_BINS, 0.0);
	mu_sample	job = {X, n, m, d, sample.data()};

	gc_team_run(team, mu_sample_part, &job);
	for (int64_t t = 0; t < m; t++)
	{
		const float *x = sample.data() + t * d;

		for (int j = 0; j < d; j++)
			if (isfinite(x[j]))
			{
				lo[j] = std::min(lo[j], (double) x[j]);
				hi[j] = std::max(hi[j], (double) x[j]);
			}
	}
	for (int j = 0; j < d; j++)
		if (!(lo[j] <= hi[j]))
			lo[j] = hi[j] = 0.0;
	plan->d = d;
	plan->dim = gc_dbscan_split_dim(lo.data(), hi.data(), d);
	plan->halo = halo;
	plan->cuts = cuts;
	for (int64_t t = 0; t < m; t++)
		counts[gc_dbscan_bin(sample[t * d + plan->dim], lo[plan->dim],
							 hi[plan->dim], DB_MULTI_BINS)] += 1.0;
	for (int P = S; P >= 2; P--)
	{
		plan->parts = gc_dbscan_cuts(counts.data(), DB_MULTI_BINS, lo[plan->dim],
									 hi[plan->dim], P, cuts);
		if (plan->parts < 2)
			break;
		if (gc_dbscan_held(counts.data(), DB_MULTI_BINS, lo[plan->dim], hi[plan->dim],
						   cuts, plan->parts, halo) * ((double) n / m) <=
			db_split_held_max.load() * (double) n)
			return;
	}
	plan->parts = 1;
}

/* ------------------------------------------------------------------ */
/* kernels                                                             */
/* ------------------------------------------------------------------ */

/* The slabs of row i of X (d columns): home, first .. last. */
__device__ __forceinline__ void
mu_span(const gc_dbscan_plan &P, const float *X, int64_t i, int d, int32_t *h,
		int32_t *f, int32_t *l)
{
	gc_dbscan_span(&P, X[i * d + P.dim], h, f, l);
}

/* cnt[q] += the rows of X each slab q holds (a block's counts first). */
static __global__ void
k_mu_count(const float *__restrict__ X, int n, int d, gc_dbscan_plan P,
		   unsigned long long *cnt)
{
	__shared__ unsigned c[GC_GPUS_MAX];
	int			i = blockIdx.x * blockDim.x + threadIdx.x;

	if (threadIdx.x < GC_GPUS_MAX)
		c[threadIdx.x] = 0;
	__syncthreads();
	if (i < n)
	{
		int32_t		h,
					f,
					l;

		mu_span(P, X, i, d, &h, &f, &l);
		for (int q = f; q <= l; q++)
			atomicAdd(&c[q], 1u);
	}
	__syncthreads();
	if (threadIdx.x < P.parts && c[threadIdx.x] != 0)
		atomicAdd(&cnt[threadIdx.x], (unsigned long long) c[threadIdx.x]);
}

/* Which rows a select keeps. */
struct mu_in					/* slab q holds row i (home: it is its home) */
{
	const float *X;
	int			d;
	gc_dbscan_plan P;
	int			q;
	bool		home;

	__device__ bool operator() (int i) const
	{
		int32_t		h,
					f,
					l;

		mu_span(P, X, i, d, &h, &f, &l);
		return home ? h == q : f <= q && q <= l;
	}
};

struct mu_link					/* row i is core here and held elsewhere */
{
	const float *X;
	int			d;
	gc_dbscan_plan P;
	const uint8_t *core;

	__device__ bool operator() (int i) const
	{
		int32_t		h,
					f,
					l;

		if (!core[i])
			return false;
		mu_span(P, X, i, d, &h, &f, &l);
		return f < l;
	}
};

/* Y, g: the m rows idx of X (d columns) and their row numbers (r0 + idx). */
static __global__ void
k_mu_gather(const float *__restrict__ X, const int *__restrict__ idx, int m,
			int d, int64_t r0, float *Y, int *g)
{
	int64_t		e = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (e < (int64_t) m * d)
	{
		int64_t		i = e / d;
		int			j = (int) (e - i * d);

		Y[e] = X[(int64_t) idx[i] * d + j];
		if (j == 0)
			g[i] = (int) (r0 + idx[i]);
	}
}

/* cmin[c] = the least row of cluster c's home rows (db_warp_min). */
static __global__ void
k_mu_home_min(const float *__restrict__ X, const int *__restrict__ g,
			  const int32_t *__restrict__ lab, int n, int d, gc_dbscan_plan P,
			  int q, int *cmin)
{
	int			i = blockIdx.x * blockDim.x + threadIdx.x;
	int			c = -1,
				row = INT32_MAX;

	if (i < n)
	{
		int32_t		h,
					f,
					l;

		mu_span(P, X, i, d, &h, &f, &l);
		if (h == q && lab[i] >= 0)
		{
			c = lab[i];
			row = g[i];
		}
	}
	/* every lane takes part: blockDim is a multiple of 32 */
	db_warp_min(cmin, c, row);
}

/* The m links idx: their rows, clusters and the clusters' cmin. */
static __global__ void
k_mu_links(const int *__restrict__ g, const int32_t *__restrict__ lab,
		   const int *__restrict__ idx, int m, const int *__restrict__ cmin,
		   int *lid, int *lcomp, int *lmin)
{
	int			i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < m)
	{
		int			r = idx[i];

		lid[i] = g[r];
		lcomp[i] = lab[r];
		lmin[i] = cmin[lab[r]];
	}
}

/*
 * gmin = cmin but for the m joined clusters oc, whose group's least row
 * is om; flag[c]: cluster c holds its group's least row (it is its own,
 * and a home row).
 */
static __global__ void
k_mu_group_min(const int *__restrict__ cmin, int comps, const int32_t *__restrict__ oc,
			   const int32_t *__restrict__ om, int m, int *gmin, uint8_t *flag)
{
	int			c = blockIdx.x * blockDim.x + threadIdx.x;

	if (c < comps)
	{
		int			v = cmin[c];
		/* the joined clusters are in ascending order */
		const int	lo = (int) (thrust::lower_bound(thrust::seq, oc, oc + m, c) - oc);

		if (lo < m && oc[lo] == c)
			v = om[lo];
		gmin[c] = v;
		flag[c] = v == cmin[c] && v != INT32_MAX;
	}
}

/* joined[c] = the rank of gmin[c] among the K groups' least rows, sorted */
static __global__ void
k_mu_rank(const int *__restrict__ gmin, int comps, const int *__restrict__ sorted,
		  int K, int32_t *joined)
{
	int			c = blockIdx.x * blockDim.x + threadIdx.x;

	if (c < comps)
	{
		joined[c] = (int32_t) (thrust::lower_bound(thrust::seq, sorted, sorted + K, gmin[c]) -
							   sorted);
	}
}

/* The m home rows idx: their rows, final labels (joined) and core flags. */
static __global__ void
k_mu_home(const int *__restrict__ idx, int m, const int *__restrict__ g,
		  const int32_t *__restrict__ lab, const uint8_t *__restrict__ core,
		  const int32_t *__restrict__ joined, int *hg, int32_t *hl, uint8_t *hc)
{
	int			i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < m)
	{
		int			r = idx[i];
		int32_t		c = lab[r];

		hg[i] = g[r];
		hl[i] = c < 0 ? c : joined[c];
		hc[i] = core[r];
	}
}

/* off[t] = the first of the m increasing rows hg at or past chunk t's. */
static __global__ void
k_mu_bounds(const int *__restrict__ hg, int m, mu_rows R, int S, int64_t *off)
{
	int			t = threadIdx.x;

	if (t <= S)
		off[t] = thrust::lower_bound(thrust::seq, hg, hg + m, R.r[t]) - hg;
}

/* The m labels and flags a chunk from row r0 was sent, put in place. */
static __global__ void
k_mu_place(const int *__restrict__ rg, const int32_t *__restrict__ rl,
		   const uint8_t *__restrict__ rc, int m, int64_t r0, int32_t *lab,
		   uint8_t *core)
{
	int			i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < m)
	{
		int64_t		r = rg[i] - r0;

		lab[r] = rl[i];
		core[r] = rc[i];
	}
}

/* ------------------------------------------------------------------ */
/* the steps                                                           */
/* ------------------------------------------------------------------ */

/* out[0 .. *count) = the rows i < n that keep holds, in order. */
template <class Keep>
static gc_code
mu_select(db_dev &D, int *num, int n, Keep keep, int *out, int *count,
		  gc_status *st)
{
	size_t		bytes = 0;

	*count = 0;
	if (n == 0)
		return GC_OK;
	DB_CK(cub::DeviceSelect::If(nullptr, bytes, thrust::counting_iterator<int>(0), out, num,
								n, keep, D.s));
	DB_CK(D.scratch(bytes));
	bytes = D.cub_bytes;
	DB_CK(cub::DeviceSelect::If(D.cub_tmp, bytes, thrust::counting_iterator<int>(0), out, num,
								n, keep, D.s));
	DB_CK(cudaMemcpyAsync(count, num, sizeof(int), cudaMemcpyDeviceToHost, D.s));
	DB_CK(cudaStreamSynchronize(D.s));
	return GC_OK;
}

/* A peer copy of count items of T, none when count is 0. */
template <typename T>
static cudaError_t
mu_peer(T *dst, int dst_dev, const T *src, int src_dev, int64_t count, cudaStream_t s)
{
	if (count <= 0)
		return cudaSuccess;
	return cudaMemcpyPeerAsync(dst, dst_dev, src, src_dev, sizeof(T) * (size_t) count, s);
}

/*
 * GPU g: its chunk up, the cuts, and the rows of the chunk each slab
 * holds (A.to).
 */
static gc_code
mu_upload(mu_gpu &A, const float *X, int64_t r0, int d, const gc_dbscan_plan &plan,
		  int threads, gc_status *st)
{
	db_dev	   &D = A.D;
	float	   *Xc;
	unsigned long long *cnt;
	unsigned long long hcnt[GC_GPUS_MAX];

	D.ms_alloc = &A.ms_alloc;
	D.host_threads = threads;
	DB_CK(cudaStreamCreateWithFlags(&D.s, cudaStreamNonBlocking));
	DB_ALLOC(Xc, (int64_t) A.nc * d);
	DB_ALLOC(A.cuts, plan.parts - 1);
	DB_ALLOC(A.num, 1);
	DB_ALLOC(cnt, plan.parts);
	db_trace("split: a chunk's copy begins, rows", A.nc);
	DB_CK(gc_xfer_h2d(Xc, X + r0 * d, sizeof(float) * (size_t) A.nc * d, D.s, threads));
	DB_CK(cudaMemcpyAsync(A.cuts, plan.cuts, sizeof(double) * (plan.parts - 1),
						  cudaMemcpyHostToDevice, D.s));
	DB_CK(cudaMemsetAsync(cnt, 0, sizeof(unsigned long long) * plan.parts, D.s));

	gc_dbscan_plan P = plan;

	P.cuts = A.cuts;
	DB_CK(gc_launch(k_mu_count, A.nc, DB_THREADS, DB_THREADS, D.s, (const float *) Xc,
					A.nc, d, P, cnt));
	DB_CK(cudaMemcpyAsync(hcnt, cnt, sizeof(unsigned long long) * plan.parts,
						  cudaMemcpyDeviceToHost, D.s));
	DB_CK(cudaStreamSynchronize(D.s));
	for (int q = 0; q < plan.parts; q++)
		A.to[q] = (int64_t) hcnt[q];
	D.drop(cnt);
	A.Xc = Xc;
	db_trace("split: a chunk up, rows", A.nc);
	return GC_OK;
}

/*
 * GPU g: the rows of its chunk (from r0) to every slab q, at row off[q]
 * of q's rows (already allocated: C.G[q].Xl and gl); then the chunk goes.
 */
static gc_code
mu_send(mu_call &C, int g, int64_t r0, int d, const gc_dbscan_plan &plan,
		const int64_t *off, gc_status *st)
{
	mu_gpu	   &A = C.G[g];
	db_dev	   &D = A.D;
	const float *Xc = A.Xc;
	int64_t		most = 0;
	int		   *idx,
			   *sg;
	float	   *sx;
	gc_dbscan_plan P = plan;

	P.cuts = A.cuts;
	for (int q = 0; q < plan.parts; q++)
		if (q != g)
			most = std::max(most, A.to[q]);
	DB_ALLOC(idx, std::max(most, A.to[g]));
	DB_ALLOC(sx, most * d);
	DB_ALLOC(sg, most);
	for (int q = 0; q < plan.parts; q++)
	{
		mu_gpu	   &B = C.G[q];
		int			m;
		gc_code		rc = mu_select(D, A.num, A.nc, mu_in{Xc, d, P, q, false}, idx, &m, st);

		if (rc != GC_OK)
			return rc;
		if (m != A.to[q])
			return gc_fail(st, GC_EDEVICE, "GPU DBSCAN: slab %d: %d rows selected of %lld counted",
						   q, m, (long long) A.to[q]);
		if (q == g)
		{
			DB_CK(gc_launch(k_mu_gather, (int64_t) m * d, DB_THREADS, DB_THREADS, D.s,
							(const float *) Xc, (const int *) idx, m, d, r0,
							B.Xl + off[q] * d, B.gl + off[q]));
			continue;
		}
		DB_CK(gc_launch(k_mu_gather, (int64_t) m * d, DB_THREADS, DB_THREADS, D.s,
						(const float *) Xc, (const int *) idx, m, d, r0, sx, sg));
		DB_CK(mu_peer(B.Xl + off[q] * d, C.dev[q], (const float *) sx, C.dev[g], (int64_t) m * d, D.s));
		DB_CK(mu_peer(B.gl + off[q], C.dev[q], (const int *) sg, C.dev[g], m, D.s));
	}
	DB_CK(cudaStreamSynchronize(D.s));
	D.drop(idx);
	D.drop(sx);
	D.drop(sg);
	D.drop(A.Xc);
	A.Xc = nullptr;
	return GC_OK;
}

/*
 * Slab q: its clusters' least home rows (A.cmin, kept on the GPU), and its
 * links with their clusters' least home rows, to the host.
 */
static gc_code
mu_summarize(mu_gpu &A, int q, int d, const gc_dbscan_plan &plan, gc_status *st)
{
	db_dev	   &D = A.D;
	int		   *idx,
			   *lid,
			   *lcomp,
			   *lmin;
	int			m;
	gc_dbscan_plan P = plan;
	gc_code		rc;

	P.cuts = A.cuts;
	DB_ALLOC(A.cmin, A.comps);
	DB_ALLOC(idx, A.nl);
	DB_CK(gc_launch(k_fill, A.comps, DB_THREADS, DB_THREADS, D.s, A.cmin, A.comps, INT32_MAX));
	DB_CK(gc_launch(k_mu_home_min, A.nl, DB_THREADS, DB_THREADS, D.s, (const float *) A.Xl,
					(const int *) A.gl, (const int32_t *) A.lab, A.nl, d, P, q, A.cmin));
	if ((rc = mu_select(D, A.num, A.nl, mu_link{A.Xl, d, P, A.core}, idx, &m, st)) != GC_OK)
		return rc;
	DB_ALLOC(lid, m);
	DB_ALLOC(lcomp, m);
	DB_ALLOC(lmin, m);
	DB_CK(gc_launch(k_mu_links, m, DB_THREADS, DB_THREADS, D.s, (const int *) A.gl,
					(const int32_t *) A.lab, (const int *) idx, m, (const int *) A.cmin,
					lid, lcomp, lmin));
	A.link_id.resize(m);
	A.link_comp.resize(m);
	A.link_min.resize(m);
	DB_CK(cudaMemcpyAsync(A.link_id.data(), lid, sizeof(int) * m, cudaMemcpyDeviceToHost, D.s));
	DB_CK(cudaMemcpyAsync(A.link_comp.data(), lcomp, sizeof(int) * m, cudaMemcpyDeviceToHost, D.s));
	DB_CK(cudaMemcpyAsync(A.link_min.data(), lmin, sizeof(int) * m, cudaMemcpyDeviceToHost, D.s));
	DB_CK(cudaStreamSynchronize(D.s));
	D.drop(idx);
	D.drop(lid);
	D.drop(lcomp);
	D.drop(lmin);
	return GC_OK;
}

/*
 * The slabs' clusters joined on the host, the linked ones only: clusters
 * of the slabs that hold the same core row (the same row in their links;
 * a row's home is its own) are one, whose least home row is the least of
 * theirs.  Each slab's links are in row order (mu_summarize selects them
 * so), so the rows they share are found by merging the lists, without a
 * sort.  Each slab's joined clusters whose group's least row is not their
 * own, in ascending order: A.ov_comp, A.ov_min.  (The numbering, by the
 * groups' least rows, is the GPUs': mu_number.)
 */
static gc_code
mu_join(mu_call &C, gc_status *st)
{
	const int	S = C.S;
	std::vector<int32_t> node_min,
				parent;
	std::vector<std::vector<int32_t>> node_of(S);
	size_t		at[GC_GPUS_MAX] = {};
	int32_t		linked = 0;

	try
	{
		for (int q = 0; q < S; q++)
		{
			mu_gpu	   &A = C.G[q];

			if (!A.link_id.empty())
				node_of[q].assign(A.comps, -1);
			for (size_t k = 0; k < A.link_id.size(); k++)
			{
				int32_t    &v = node_of[q][A.link_comp[k]];

				if (v < 0)
				{
					v = (int32_t) node_min.size();
					node_min.push_back(A.link_min[k]);
				}
			}
		}
		parent.resize(node_min.size());
	}
	catch (const std::bad_alloc &)
	{
		return gc_fail(st, GC_ENOMEM, "GPU DBSCAN: out of memory for the slabs' merge");
	}
	for (size_t v = 0; v < parent.size(); v++)
		parent[v] = (int32_t) v;
	auto		find = [&](int32_t v) {
		while (parent[v] != v)
			v = parent[v] = parent[parent[v]];
		return v;
	};
	/* the least row at the lists' heads, and every slab that holds it */
	for (;;)
	{
		int64_t		id = INT64_MAX;
		int32_t		first = -1;

		for (int q = 0; q < S; q++)
			if (at[q] < C.G[q].link_id.size())
				id = std::min(id, (int64_t) C.G[q].link_id[at[q]]);
		if (id == INT64_MAX)
			break;
		for (int q = 0; q < S; q++)
		{
			mu_gpu	   &A = C.G[q];

			if (at[q] < A.link_id.size() && A.link_id[at[q]] == id)
			{
				int32_t		b = find(node_of[q][A.link_comp[at[q]]]);

				if (first < 0)
					first = b;
				else if ((first = find(first)) != b)
				{
					/* the root keeps the least row */
					if (node_min[b] < node_min[first])
						std::swap(first, b);
					parent[b] = first;
				}
				at[q]++;
			}
		}
	}
	for (int q = 0; q < S; q++)
	{
		C.G[q].ov_comp.clear();
		C.G[q].ov_min.clear();
		for (int32_t c = 0; c < (int32_t) node_of[q].size(); c++)
		{
			const int32_t v = node_of[q][c];

			if (v >= 0 && node_min[find(v)] != node_min[v])
			{
				C.G[q].ov_comp.push_back(c);
				C.G[q].ov_min.push_back(node_min[find(v)]);
			}
		}
		linked += (int32_t) C.G[q].ov_comp.size();
	}
	{
		size_t		links = 0;

		for (int q = 0; q < S; q++)
			links += C.G[q].link_id.size();
		db_trace("split: links", (long long) links);
	}
	db_trace("split: clusters linked", (long long) node_min.size());
	db_trace("split: of them joined to another's least row", linked);
	return GC_OK;
}

/*
 * Slab q: each cluster's group's least row (A.gmin) from cmin and the
 * joins, and the least rows of the groups whose least row it holds
 * (A.reps, A.nreps: each group's is held by one cluster of one slab).
 */
static gc_code
mu_reps(mu_gpu &A, gc_status *st)
{
	db_dev	   &D = A.D;
	const int	m = (int) A.ov_comp.size();
	int32_t    *oc,
			   *om;
	uint8_t    *flag;
	size_t		bytes = 0;

	DB_ALLOC(A.gmin, A.comps);
	DB_ALLOC(A.reps, A.comps);
	DB_ALLOC(flag, A.comps);
	DB_ALLOC(oc, m);
	DB_ALLOC(om, m);
	if (m > 0)
	{
		DB_CK(cudaMemcpyAsync(oc, A.ov_comp.data(), sizeof(int32_t) * m, cudaMemcpyHostToDevice, D.s));
		DB_CK(cudaMemcpyAsync(om, A.ov_min.data(), sizeof(int32_t) * m, cudaMemcpyHostToDevice, D.s));
	}
	DB_CK(gc_launch(k_mu_group_min, A.comps, DB_THREADS, DB_THREADS, D.s, (const int *) A.cmin,
					A.comps, (const int32_t *) oc, (const int32_t *) om, m, A.gmin, flag));
	A.nreps = 0;
	if (A.comps > 0)
	{
		DB_CK(cub::DeviceSelect::Flagged(nullptr, bytes, A.gmin, flag, A.reps, A.num, A.comps, D.s));
		DB_CK(D.scratch(bytes));
		bytes = D.cub_bytes;
		DB_CK(cub::DeviceSelect::Flagged(D.cub_tmp, bytes, A.gmin, flag, A.reps, A.num, A.comps, D.s));
		DB_CK(cudaMemcpyAsync(&A.nreps, A.num, sizeof(int), cudaMemcpyDeviceToHost, D.s));
	}
	DB_CK(cudaStreamSynchronize(D.s));
	D.drop(flag);
	D.drop(oc);
	D.drop(om);
	return GC_OK;
}

/*
 * The groups numbered 0, 1, ... by their least rows, as one GPU numbers
 * its clusters: every slab's reps gathered on the first GPU and sorted,
 * the sorted list sent to every slab, and each cluster's label the rank
 * of its group's least row (A.joined).  *K: the clusters.
 */
static gc_code
mu_number(mu_call &C, int *K, gc_status *st)
{
	mu_gpu	   &F = C.G[0];
	int		   *all,
			   *sorted;
	int64_t		at[GC_GPUS_MAX + 1];
	gc_code		rc;

	at[0] = 0;
	for (int q = 0; q < C.S; q++)
		at[q + 1] = at[q] + C.G[q].nreps;
	*K = (int) at[C.S];
	{
		db_dev	   &D = F.D;
		size_t		bytes = 0;

		DB_ALLOC(all, *K);
		DB_ALLOC(sorted, *K);
		DB_CK(cudaStreamSynchronize(D.s));
		/* the slabs' lists into the first GPU's, each on its own stream */
		if ((rc = gc_each_gpu(C.S, C.dev, "GPU DBSCAN", [&](int q, gc_status *ss) {
			gc_status  *st = ss;	/* DB_CK's */

			DB_CK(mu_peer(all + at[q], C.dev[0], (const int *) C.G[q].reps, C.dev[q],
						  C.G[q].nreps, C.G[q].D.s));
			DB_CK(cudaStreamSynchronize(C.G[q].D.s));
			return GC_OK;
		}, st)) != GC_OK)
			return rc;
		DB_CK(cudaSetDevice(C.dev[0]));
		if (*K > 0)
		{
			DB_CK(cub::DeviceRadixSort::SortKeys(nullptr, bytes, all, sorted, *K, 0, 32, D.s));
			DB_CK(D.scratch(bytes));
			bytes = D.cub_bytes;
			DB_CK(cub::DeviceRadixSort::SortKeys(D.cub_tmp, bytes, all, sorted, *K, 0, 32, D.s));
		}
		DB_CK(cudaStreamSynchronize(D.s));
	}
	/* the sorted list to every slab, and its clusters ranked */
	rc = gc_each_gpu(C.S, C.dev, "GPU DBSCAN", [&](int q, gc_status *ss) {
		mu_gpu	   &A = C.G[q];
		db_dev	   &D = A.D;
		gc_status  *st = ss;	/* DB_CK's, DB_ALLOC's */
		int		   *mine = sorted;

		DB_ALLOC(A.joined, A.comps);
		if (q > 0)
		{
			DB_ALLOC(mine, *K);
			DB_CK(mu_peer(mine, C.dev[q], (const int *) sorted, C.dev[0], *K, D.s));
		}
		DB_CK(gc_launch(k_mu_rank, A.comps, DB_THREADS, DB_THREADS, D.s, (const int *) A.gmin,
						A.comps, (const int *) mine, *K, A.joined));
		DB_CK(cudaStreamSynchronize(D.s));
		if (q > 0)
			D.drop(mine);
		return GC_OK;
	}, st);
	DB_CK(cudaSetDevice(C.dev[0]));
	F.D.drop(all);
	F.D.drop(sorted);
	return rc;
}

/*
 * Slab q: its home rows relabelled (hg, hl, hc, in row order) and where
 * each chunk's start among them (hoff); the chunk's arrays for what the
 * slabs send it (rg, rl, rc).
 */
static gc_code
mu_relabel(mu_gpu &A, int q, int d, const gc_dbscan_plan &plan, const mu_rows &R,
		   int S, gc_status *st)
{
	db_dev	   &D = A.D;
	int		   *idx;
	int64_t    *off;
	gc_dbscan_plan P = plan;
	gc_code		rc;

	P.cuts = A.cuts;
	DB_ALLOC(A.rg, A.nc);
	DB_ALLOC(A.rl, A.nc);
	DB_ALLOC(A.rc, A.nc);
	DB_ALLOC(idx, A.nl);
	DB_ALLOC(off, S + 1);
	if ((rc = mu_select(D, A.num, A.nl, mu_in{A.Xl, d, P, q, true}, idx, &A.nh, st)) != GC_OK)
		return rc;
	DB_ALLOC(A.hg, A.nh);
	DB_ALLOC(A.hl, A.nh);
	DB_ALLOC(A.hc, A.nh);
	DB_CK(gc_launch(k_mu_home, A.nh, DB_THREADS, DB_THREADS, D.s, (const int *) idx, A.nh,
					(const int *) A.gl, (const int32_t *) A.lab, (const uint8_t *) A.core,
					(const int32_t *) A.joined, A.hg, A.hl, A.hc));
	k_mu_bounds<<<1, 32, 0, D.s>>>(A.hg, A.nh, R, S, off);
	DB_CK(cudaGetLastError());
	DB_CK(cudaMemcpyAsync(A.hoff, off, sizeof(int64_t) * (S + 1), cudaMemcpyDeviceToHost, D.s));
	DB_CK(cudaStreamSynchronize(D.s));
	D.drop(idx);
	D.drop(off);
	return GC_OK;
}

/* ------------------------------------------------------------------ */
/* the call                                                            */
/* ------------------------------------------------------------------ */

/* The phases of the call: its slowest slab's local run, and its own. */
static void
mu_phases(const mu_call &C, double ms_upload, double ms_split, double ms_merge,
		  double ms_download, int64_t held)
{
	int			w = 0;
	double		most = -1;
	double		alloc = 0;

	for (int q = 0; q < C.S; q++)
	{
		const gc_dbscan_gpu_phases &p = C.G[q].ph;
		double		t = p.ms_index + p.ms_core + p.ms_union + p.ms_border + p.ms_number;

		if (t > most)
		{
			most = t;
			w = q;
		}
		alloc = std::max(alloc, C.G[q].ms_alloc);
	}
	db_phases = C.G[w].ph;
	db_phases.ms_upload = ms_upload;
	db_phases.ms_split = ms_split;
	db_phases.ms_merge = ms_merge;
	db_phases.ms_download = ms_download;
	db_phases.ms_alloc = alloc;
	db_phases.gpus = C.S;
	db_phases.held = held;
}

/* The call on the first GPU alone (one slab); the caller restores its
 * device. */
static gc_code
mu_one(const gc_ctx *ctx, const float *X, int64_t n, int d,
	   const gc_dbscan_params *p, db_index index, db_path brute,
	   db_index *used, int32_t *labels, uint8_t *is_core, gc_status *st)
{
	gc_ctx		one = *ctx;

	DB_CK(cudaSetDevice(ctx->gpus[0]));
	one.n_gpus = 0;
	one.gpus = NULL;
	return db_run(&one, X, n, d, p, index, brute, used, labels, is_core, st);
}

gc_code
db_multi(const gc_ctx *ctx, const float *X, int64_t n, int d,
		 const gc_dbscan_params *p, db_index index, db_path brute,
		 db_index *used, int32_t *labels, uint8_t *is_core, gc_status *st)
{
	const double t_all = gc_now_ms();
	double		cuts[GC_GPUS_MAX],
				t0,
				ms_upload,
				ms_split,
				ms_merge;
	gc_dbscan_plan plan;
	gc_ctx		quiet = *ctx;	/* the slabs' runs: no progress reports */
	const int	team = gc_team_adapt(ctx);
	gc_device_kept caller;
	mu_rows		R;
	int64_t		off[GC_GPUS_MAX][GC_GPUS_MAX];
	int			clusters;
	gc_code		rc;

	DB_CK(cudaGetDevice(&caller.dev));
	db_trace("split: a call, rows", n);
	mu_plan(X, n, d, gc_dbscan_halo(p->eps), (int) std::min<int64_t>(std::min(ctx->n_gpus, GC_GPUS_MAX), n),
			team, &plan, cuts);
	db_trace("split: planned; slabs", plan.parts);
	if (plan.parts < 2)
		return mu_one(ctx, X, n, d, p, index, brute, used, labels, is_core, st);

	mu_call		C;
	const int	S = plan.parts;
	/* the host's threads shared by the GPUs' copies, which run at once */
	const int	threads = std::max(1, team / S);

	quiet.progress = NULL;
	quiet.n_gpus = 0;
	quiet.gpus = NULL;
	gc_gpus_connect(S, ctx->gpus);
	C.S = S;
	for (int g = 0; g <= S; g++)
		R.r[g] = n * g / S;
	for (int g = 0; g < S; g++)
	{
		C.dev[g] = ctx->gpus[g];
		C.G[g].nc = (int) (R.r[g + 1] - R.r[g]);
	}

	/* upload: the chunks side by side, then each row to its slabs */
	db_trace("split: host threads for each GPU's copies", threads);
	t0 = gc_now_ms();
	gc_report(ctx, GC_PHASE_UPLOAD, 0, 0, 0, n, NAN);
	if ((rc = gc_each_gpu(S, C.dev, "GPU DBSCAN", [&](int g, gc_status *ss) {
		return mu_upload(C.G[g], X, R.r[g], d, plan, threads, ss);
	}, st)) != GC_OK)
		return rc;
	ms_upload = gc_now_ms() - t0;
	db_trace("split: chunks up; slabs", S);
	t0 = gc_now_ms();
	for (int q = 0; q < S; q++)
	{
		int64_t		at = 0;

		for (int g = 0; g < S; g++)
		{
			off[g][q] = at;
			at += C.G[g].to[q];
		}
		if (at > GC_DBSCAN_GPU_MAX_N)
			return gc_fail(st, GC_EDEVICE, "GPU DBSCAN: slab %d holds %lld rows, above %d",
						   q, (long long) at, GC_DBSCAN_GPU_MAX_N);
		C.G[q].nl = (int) at;
	}
	if ((rc = gc_each_gpu(S, C.dev, "GPU DBSCAN", [&](int q, gc_status *ss) {
		mu_gpu	   &A = C.G[q];
		gc_status  *st = ss;	/* DB_CK's */

		DB_CK(A.D.alloc(A.Xl, (int64_t) A.nl * d));
		DB_CK(A.D.alloc(A.gl, A.nl));
		DB_CK(cudaStreamSynchronize(A.D.s));
		return GC_OK;
	}, st)) != GC_OK ||
		(rc = gc_each_gpu(S, C.dev, "GPU DBSCAN", [&](int g, gc_status *ss) {
		int64_t		o[GC_GPUS_MAX];

		for (int q = 0; q < S; q++)
			o[q] = off[g][q];
		return mu_send(C, g, R.r[g], d, plan, o, ss);
	}, st)) != GC_OK)
		return rc;
	ms_split = gc_now_ms() - t0;
	db_trace("split: rows sent to their slabs", n);

	/* each slab's own run, kept on its GPU */
	gc_report(ctx, GC_PHASE_INDEX, 0, 0, 0, n, NAN);
	if ((rc = gc_each_gpu(S, C.dev, "GPU DBSCAN", [&](int q, gc_status *ss) {
		mu_gpu	   &A = C.G[q];
		gc_status  *st = ss;	/* DB_CK's */
		gc_code		r = GC_OK;

		DB_CK(A.D.alloc(A.lab, A.nl));
		DB_CK(A.D.alloc(A.core, A.nl));
		memset(&db_phases, 0, sizeof(db_phases));
		if (A.nl > 0)
			r = db_solve(A.D, &quiet, A.Xl, A.nl, d, gc_eps2(p->eps), db_minp(p, A.nl),
						 p->algorithm, index, brute, &A.used,
						 db_out{A.lab, A.core, true, &A.comps}, ss);
		A.ph = db_phases;
		return r;
	}, st)) != GC_OK)
		return rc;

	/* merge, and every label home */
	db_trace("split: slabs clustered", S);
	t0 = gc_now_ms();
	if ((rc = gc_each_gpu(S, C.dev, "GPU DBSCAN", [&](int q, gc_status *ss) {
		return mu_summarize(C.G[q], q, d, plan, ss);
	}, st)) != GC_OK)
		return rc;
	db_trace("split: summaries down", S);
	if (gc_cancelled(ctx))
		return gc_fail(st, GC_ECANCEL, "canceled");
	if ((rc = mu_join(C, st)) != GC_OK ||
		(rc = gc_each_gpu(S, C.dev, "GPU DBSCAN", [&](int q, gc_status *ss) {
		return mu_reps(C.G[q], ss);
	}, st)) != GC_OK ||
		(rc = mu_number(C, &clusters, st)) != GC_OK)
		return rc;
	db_trace("split: merged; clusters", clusters);
	if ((rc = gc_each_gpu(S, C.dev, "GPU DBSCAN", [&](int q, gc_status *ss) {
		return mu_relabel(C.G[q], q, d, plan, R, S, ss);
	}, st)) != GC_OK)
		return rc;
	db_trace("split: home rows relabelled", S);
	for (int g = 0; g < S; g++)
	{
		int64_t		at = 0;

		for (int q = 0; q < S; q++)
		{
			off[q][g] = at;
			at += C.G[q].hoff[g + 1] - C.G[q].hoff[g];
		}
		if (at != C.G[g].nc)
			return gc_fail(st, GC_EDEVICE, "GPU DBSCAN: chunk %d: %lld home rows of %d",
						   g, (long long) at, C.G[g].nc);
	}
	if ((rc = gc_each_gpu(S, C.dev, "GPU DBSCAN", [&](int q, gc_status *ss) {
		mu_gpu	   &A = C.G[q];
		gc_status  *st = ss;	/* DB_CK's */

		for (int g = 0; g < S; g++)
		{
			mu_gpu	   &B = C.G[g];
			const int64_t h0 = A.hoff[g],
						m = A.hoff[g + 1] - h0;

			DB_CK(mu_peer(B.rg + off[q][g], C.dev[g], (const int *) A.hg + h0, C.dev[q], m, A.D.s));
			DB_CK(mu_peer(B.rl + off[q][g], C.dev[g], (const int32_t *) A.hl + h0, C.dev[q], m, A.D.s));
			DB_CK(mu_peer(B.rc + off[q][g], C.dev[g], (const uint8_t *) A.hc + h0, C.dev[q], m, A.D.s));
		}
		DB_CK(cudaStreamSynchronize(A.D.s));
		return GC_OK;
	}, st)) != GC_OK)
		return rc;
	ms_merge = gc_now_ms() - t0;
	db_trace("split: labels sent home", n);

	/* each chunk in place and down, side by side */
	t0 = gc_now_ms();
	if ((rc = gc_each_gpu(S, C.dev, "GPU DBSCAN", [&](int g, gc_status *ss) {
		mu_gpu	   &A = C.G[g];
		gc_status  *st = ss;	/* DB_CK's */
		int32_t    *lab;
		uint8_t    *core;

		DB_CK(A.D.alloc(lab, A.nc));
		DB_CK(A.D.alloc(core, A.nc));
		DB_CK(gc_launch(k_mu_place, A.nc, DB_THREADS, DB_THREADS, A.D.s, (const int *) A.rg,
						(const int32_t *) A.rl, (const uint8_t *) A.rc, A.nc, R.r[g], lab, core));

		gc_xfer_seg seg[2] = {
			{labels + R.r[g], lab, sizeof(int32_t) * (size_t) A.nc},
			{is_core + R.r[g], core, (size_t) A.nc}
		};

		DB_CK(gc_xfer_d2h_many(seg, 2, A.D.s, threads));
		return GC_OK;
	}, st)) != GC_OK)
		return rc;
	if (used != NULL)
		*used = C.G[0].used;
	{
		int64_t		h = 0;

		for (int q = 0; q < S; q++)
			h += C.G[q].nl;
		mu_phases(C, ms_upload, ms_split, ms_merge, gc_now_ms() - t0, h);
	}
	gc_report(ctx, GC_PHASE_LABEL, 0, 0, n, n, NAN);
	t0 = gc_now_ms();
	(void) gc_each_gpu(S, C.dev, "GPU DBSCAN", [&](int g, gc_status *) {
		C.G[g].D.release();
		return GC_OK;
	}, st);
	db_phases.ms_free = gc_now_ms() - t0;
	db_phases.ms_total = gc_now_ms() - t_all;
	return GC_OK;
}
