/*
 * kmeans_multi.cu — one k-means fit split over several GPUs of the host
 * (gc_kmeans_gpu when ctx->n_gpus >= 2): the result of one GPU, bit for
 * bit, so the CPU's.
 *
 * The rows split into shards of consecutive rows, one per GPU, each
 * starting at a multiple of KM_BLOCK.  Shard s is a resident km_dev over
 * its rows on GPU ctx->gpus[s] (km_setup_rows), driven by a host thread of
 * its own in every phase (km_each: its assignment reads counts back), and
 * GPU 0 (the first listed) combines:
 *   features    each shard's feature ranges (maxima and minima: the same
 *               over any split) and its blocks of the means' double sums;
 *               the blocks, gathered in row order on GPU 0, are summed
 *               there as one GPU sums them (km_var_reduce on a view of
 *               the whole problem), and every shard takes the problem's
 *               means, fixed-point scales (every row's largest |x| and n)
 *               and grid (km_features_set);
 *   iteration   each shard assigns its rows and sums them per cluster in
 *               64-bit fixed point; the other shards' sums are copied to
 *               GPU 0 and added there (integers: exact in any order), so
 *               GPU 0 holds one GPU's sums, takes the means (km_finalize)
 *               and copies the new centres to every shard;
 *   re-seeding  each shard lists its m rows farthest from their centres
 *               (km_far_keys); the m farthest of those lists by the
 *               problem's row numbers (ties: the lower row) are the rows
 *               one GPU picks, and their labels and features move their
 *               sums on GPU 0 (km_reseed_apply);
 *   tol, inertia  blocks of double sums on each shard, gathered in row
 *               order and summed on GPU 0 as one GPU sums them.
 *   seeding     k-means++ (km_pp_shards, kmeans_pp.cu: each centre's
 *               trials drawn by the host over the shards' totals, their
 *               terms on every shard, the potentials added) and k-means||
 *               (km_par_shards, kmeans_par.cu: each round's largest D²
 *               and sums combined, each shard drawing its own rows, the
 *               kept rows sent to every shard) run over the shards once
 *               they are made; random seeding on the host before.  The
 *               centres are one GPU's, which are the CPU's.
 *
 * Copies between GPUs are cudaMemcpyPeerAsync (over NVLink or PCIe peer
 * to peer where the devices can: gc_gpus_connect; else staged by the
 * driver): per
 * iteration k (d + 1) sums from each shard to GPU 0 and k d centres back.
 * Weighted fits run on one GPU (gc_kmeans_gpu).  Every shard must fit its
 * GPU resident (p->gpu_mem, else the GPU's free memory): otherwise
 * GC_ENOMEM, which the caller answers as it does one GPU's.
 */
#include <algorithm>
#include <new>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "kmeans_dev.cuh"
#include "common/multi.cuh"
#include "common/transfer.cuh"

struct km_multi
{
	int			S = 0;			/* shards */
	int			dev[GC_GPUS_MAX];
	int64_t		r0[GC_GPUS_MAX + 1];	/* shard s: rows r0[s] .. r0[s+1] */
	km_dev	   *D[GC_GPUS_MAX] = {};
	int64_t		n = 0;
	int64_t		nb = 0;			/* the problem's blocks of KM_BLOCK rows */
	/* on GPU 0, allocated on D[0]'s stream */
	unsigned long long *peer = nullptr;	/* (S - 1) x slots: the other shards' sums */
	double	   *vbuf = nullptr;	/* nb x d block sums, varj (d), out (1) */
	double	   *bsum = nullptr;	/* nb block sums, then the total */
	km_dev		V;				/* D[0] viewed over the whole problem */

	~km_multi()
	{
		for (int s = S - 1; s >= 0; s--)
		{
			if (D[s] == nullptr)
				continue;
			cudaSetDevice(dev[s]);
			if (s == 0)
			{
				gc_dfree(peer, D[0]->s);
				gc_dfree(vbuf, D[0]->s);
				gc_dfree(bsum, D[0]->s);
			}
			delete D[s];
		}
	}
};

/* dst[i] += the nsrc other shards' sums at i (two's complement: exact). */
__global__ void
k_add_sums(unsigned long long *dst, const unsigned long long *__restrict__ src,
		   size_t slots, int nsrc)
{
	for (size_t i = (size_t) blockIdx.x * blockDim.x + threadIdx.x; i < slots;
		 i += (size_t) gridDim.x * blockDim.x)
	{
		unsigned long long v = dst[i];

		for (int s = 0; s < nsrc; s++)
			v += src[(size_t) s * slots + i];
		dst[i] = v;
	}
}

/* f(s, st_s) for every shard at once (gc_each_gpu). */
template <class F>
static gc_code
km_each(km_multi &M, F &&f, gc_status *st)
{
	return gc_each_gpu(M.S, M.dev, "GPU k-means", f, st);
}

/* Shards of whole blocks over the GPUs of ctx (gc_kmeans_gpu_shard_rows;
 * fewer when n has fewer blocks). */
static void
km_split(km_multi &M, const gc_ctx *ctx, int64_t n)
{
	const int	S = ctx->n_gpus < GC_GPUS_MAX ? ctx->n_gpus : GC_GPUS_MAX;
	const int64_t per = gc_kmeans_gpu_shard_rows(n, S);

	M.n = n;
	M.nb = (n + KM_BLOCK - 1) / KM_BLOCK;
	M.S = 0;
	for (int s = 0; s < S && s * per < n; s++)
	{
		M.dev[M.S] = ctx->gpus[s];
		M.r0[M.S] = s * per;
		M.S++;
	}
	M.r0[M.S] = n;
}

static int64_t
km_rows(const km_multi &M, int s)
{
	return M.r0[s + 1] - M.r0[s];
}

/*
 * Shard s's block sums (part: its blocks, per doubles each) into GPU 0's
 * buffer of the whole problem (whole) at the shard's first block, so that
 * GPU 0 sums every block in row order as one GPU does.
 */
static gc_code
km_gather(const km_multi &M, int s, const double *part, double *whole, int per,
		  gc_status *st)
{
	const km_dev &D = *M.D[s];
	const int64_t nbs = (km_rows(M, s) + KM_BLOCK - 1) / KM_BLOCK;

	KM_CK(cudaMemcpyPeerAsync(whole + M.r0[s] / KM_BLOCK * per, M.dev[0], part, M.dev[s],
							  sizeof(double) * nbs * per, D.s));
	KM_CK(cudaStreamSynchronize(D.s));
	return GC_OK;
}

/* bytes of GPU 0's array at(D[0]) into at(D[s]) of every other shard;
 * then GPU 0 synchronised. */
template <class F>
static gc_code
km_bcast(km_multi &M, F &&at, size_t bytes, gc_status *st)
{
	km_dev	   &D0 = *M.D[0];

	for (int s = 1; s < M.S; s++)
		KM_CK(cudaMemcpyPeerAsync(at(*M.D[s]), M.dev[s], at(D0), M.dev[0], bytes, D0.s));
	KM_CK(cudaStreamSynchronize(D0.s));
	return GC_OK;
}

/*
 * The shards: each uploaded to its GPU if its plan fits resident, its
 * feature pass run; then the problem's statistics on every shard (the
 * header's "features").
 */
static gc_code
km_multi_setup(km_multi &M, const gc_ctx *ctx, const float *X, int d,
			   const gc_kmeans_params *p, bool unit_rows, gc_status *st)
{
	const int	S = M.S,
				runs = gc_kmeans_runs(p);
	std::vector<unsigned> fr((size_t) S * 3 * d);
	std::vector<unsigned> h(3 * (size_t) d);
	gc_code		rc;

	rc = km_each(M, [&](int s, gc_status *ss) {
		const int64_t ns = km_rows(M, s);
		size_t		budget = p->gpu_mem;
		gc_kmeans_gpu_plan plan;
		unsigned   *dfr = nullptr;
		gc_code		r;
		cudaError_t e;

		if (budget == 0 && (r = km_free_budget(&budget, ss)) != GC_OK)
			return r;
		gc_kmeans_gpu_plan_for(ns, d, p->k, runs, false, budget, &plan);
		if (!plan.fits || plan.streamed)
			return gc_fail(ss, GC_ENOMEM,
						   "GPU k-means over %d GPUs: the %lld rows of GPU %d need %zu MiB of its memory, but may use %zu MiB",
						   S, (long long) ns, M.dev[s],
						   (gc_kmeans_gpu_mem_bytes(ns, d, p->k, runs, false) >> 20) + 1,
						   budget >> 20);
		M.D[s] = new (std::nothrow) km_dev;
		if (M.D[s] == nullptr)
			return gc_fail(ss, GC_ENOMEM, "GPU k-means: out of memory");
		km_dev	   &D = *M.D[s];

		D.unit = p->metric == GC_METRIC_COSINE;
		D.unit_rows = unit_rows;
		if ((r = km_setup_rows(D, X + M.r0[s] * d, ns, d, p->k, runs > 1, ss, 0, ctx)) != GC_OK ||
			(r = km_features_scratch(D, &dfr, ss)) != GC_OK ||
			(r = km_features_rows(D, 0, dfr, ss)) != GC_OK)
		{
			gc_dfree(dfr, D.s);
			return r;
		}
		e = cudaMemcpyAsync(&fr[(size_t) s * 3 * d], dfr, sizeof(unsigned) * 3 * d,
							cudaMemcpyDeviceToHost, D.s);
		gc_dfree(dfr, D.s);
		if (e == cudaSuccess)
			e = cudaStreamSynchronize(D.s);
		return e == cudaSuccess ? GC_OK : km_cuda_fail(ss, e, "feature ranges");
	}, st);
	if (rc != GC_OK)
		return rc;

	/* the problem's buffers on GPU 0, and its view of D[0] */
	{
		km_dev	   &D0 = *M.D[0];

		KM_CK(gc_dalloc((void **) &M.peer, sizeof(unsigned long long) * D0.slots * (S > 1 ? S - 1 : 1), D0.s));
		KM_CK(gc_dalloc((void **) &M.vbuf, sizeof(double) * (M.nb * d + d + 1), D0.s));
		KM_CK(gc_dalloc((void **) &M.bsum, sizeof(double) * (M.nb + 1), D0.s));
		KM_CK(cudaStreamSynchronize(D0.s));
		M.V = D0;
		M.V.is_view = true;
		M.V.n = M.n;
		M.V.vbuf = M.vbuf;
		M.V.bsum = M.bsum;
		M.V.dsum = M.bsum + M.nb;
	}

	/* the ranges: maxima of |x| and of x, minima of x (ordered keys) */
	for (int j = 0; j < 3 * d; j++)
	{
		unsigned	v = fr[j];

		for (int s = 1; s < S; s++)
		{
			const unsigned w = fr[(size_t) s * 3 * d + j];

			v = j >= d && j < 2 * d ? std::min(v, w) : std::max(v, w);
		}
		h[j] = v;
	}
	/* the means: every shard's blocks in row order, summed on GPU 0 */
	if ((rc = km_each(M, [&](int s, gc_status *ss) {
		return km_gather(M, s, M.D[s]->vbuf, M.vbuf, d, ss);
	}, st)) != GC_OK ||
		(rc = km_var_reduce(M.V, 0, nullptr, st)) != GC_OK ||
		(rc = km_bcast(M, [](km_dev &D) { return (void *) D.mean; }, sizeof(double) * d, st)) != GC_OK)
		return rc;
	return km_each(M, [&](int s, gc_status *ss) {
		gc_code		r = km_features_set(*M.D[s], h.data(), M.n, ss);

		return r != GC_OK ? r : km_update_plan(*M.D[s], ss);
	}, st);
}

/* The mean feature variance behind tol (pass 1 over every shard). */
static gc_code
km_multi_variance(km_multi &M, double *mv, gc_status *st)
{
	gc_code		rc = km_each(M, [&](int s, gc_status *ss) {
		km_dev	   &D = *M.D[s];
		gc_code		r = km_var_blocks(D, 0, 1, ss);

		return r != GC_OK ? r : km_gather(M, s, D.vbuf, M.vbuf, D.d, ss);
	}, st);

	return rc != GC_OK ? rc : km_var_reduce(M.V, 1, mv, st);
}

/* A far row of one shard, by the problem's row number. */
struct km_far
{
	unsigned long long key;		/* its distance's bits, then ~row */
	int			s;
	int64_t		row;			/* in its shard */
};

/*
 * Re-seeding (rare) of m empty clusters, as one GPU's km_reseed (the
 * header), from the centres C[cur] into C[1 - cur] on GPU 0; its info read
 * back.
 */
static gc_code
km_multi_reseed(km_multi &M, int cur, int m, gc_status *st)
{
	km_dev	   &D0 = *M.D[0];
	const int	d = D0.d;
	std::vector<unsigned long long> keys((size_t) M.S * m), hk(m, 0);
	std::vector<int32_t> hl(m, 0);
	std::vector<float> hr((size_t) m * d, 0.0f);
	std::vector<km_far> far;
	float	   *dfar = nullptr;
	int32_t    *dlab = nullptr;
	gc_code		rc;

	rc = km_each(M, [&](int s, gc_status *ss) {
		km_dev	   &D = *M.D[s];
		const float *Ca = D.C[cur];
		gc_code		r;

		if ((r = km_assign_centres(D, D.C[cur], &Ca, ss)) != GC_OK ||
			(r = km_d2(D, Ca, ss)) != GC_OK ||
			(r = km_far_keys(D, m, ss)) != GC_OK)
			return r;
		{
			gc_status  *st = ss;	/* KM_CK's */

			KM_CK(cudaMemcpyAsync(&keys[(size_t) s * m], D.keys, sizeof(unsigned long long) * m,
								  cudaMemcpyDeviceToHost, D.s));
			KM_CK(cudaStreamSynchronize(D.s));
		}
		return GC_OK;
	}, st);
	if (rc != GC_OK)
		return rc;
	for (int s = 0; s < M.S; s++)
		for (int p = 0; p < m && keys[(size_t) s * m + p] != 0; p++)
		{
			const unsigned long long k = keys[(size_t) s * m + p];
			const int64_t row = key_row(k);

			far.push_back({(k & 0xffffffff00000000ull) | (0xffffffffull - (unsigned long long) (M.r0[s] + row)),
						   s, row});
		}
	std::sort(far.begin(), far.end(), [](const km_far &a, const km_far &b) { return a.key > b.key; });
	for (int p = 0; p < m && p < (int) far.size(); p++)
	{
		const km_dev &D = *M.D[far[p].s];

		/* far row p of the problem's list: key_row of its key is p */
		hk[p] = (far[p].key & 0xffffffff00000000ull) | (0xffffffffull - (unsigned long long) p);
		KM_CK(cudaSetDevice(M.dev[far[p].s]));
		KM_CK(cudaMemcpy(&hl[p], D.labels + far[p].row, sizeof(int32_t), cudaMemcpyDeviceToHost));
		KM_CK(cudaMemcpy2D(&hr[(size_t) p * d], sizeof(float), D.XT + far[p].row,
						   sizeof(float) * D.n, sizeof(float), d, cudaMemcpyDeviceToHost));
	}
	KM_CK(cudaSetDevice(M.dev[0]));
	KM_CK(gc_dalloc((void **) &dfar, sizeof(float) * (size_t) m * d, D0.s));
	if (gc_dalloc((void **) &dlab, sizeof(int32_t) * m, D0.s) != cudaSuccess)
	{
		gc_dfree(dfar, D0.s);
		return gc_fail(st, GC_ENOMEM, "GPU k-means: out of GPU memory while re-seeding");
	}
	rc = GC_OK;
	{
		cudaError_t e = cudaMemcpyAsync(D0.keys, hk.data(), sizeof(unsigned long long) * m,
										cudaMemcpyHostToDevice, D0.s);

		if (e == cudaSuccess)
			e = cudaMemcpyAsync(dlab, hl.data(), sizeof(int32_t) * m, cudaMemcpyHostToDevice, D0.s);
		if (e == cudaSuccess)
			e = cudaMemcpyAsync(dfar, hr.data(), sizeof(float) * (size_t) m * d,
								cudaMemcpyHostToDevice, D0.s);
		if (e != cudaSuccess)
			rc = km_cuda_fail(st, e, "re-seeding");
	}
	if (rc == GC_OK)
		rc = km_reseed_apply(D0, dfar, dlab, m, st);
	if (rc == GC_OK)
		rc = km_finalize(D0, D0.C[cur], D0.C[1 - cur], st);
	if (rc == GC_OK)
		rc = km_read_info(D0, st);	/* before the host vectors go */
	gc_dfree(dfar, D0.s);
	gc_dfree(dlab, D0.s);
	return rc;
}

/* What an iteration tells the driver (one GPU's km_info, summed). */
struct km_step
{
	unsigned long long changed;
	int			relocated;
	double		shift;
	bool		moved;
};

/*
 * One Lloyd iteration from C[cur] (prepared on every shard) into
 * C[1 - cur], prepared on every shard.
 */
static gc_code
km_multi_iteration(km_multi &M, int cur, km_step *out, gc_status *st)
{
	km_dev	   &D0 = *M.D[0];
	gc_code		rc;

	rc = km_each(M, [&](int s, gc_status *ss) {
		km_dev	   &D = *M.D[s];
		gc_status  *st = ss;	/* KM_CK's */
		gc_code		r;

		KM_CK(cudaMemsetAsync(D.gsum, 0, sizeof(unsigned long long) * D.slots + sizeof(km_info), D.s));
		if ((r = km_assign(D, ss)) != GC_OK || (r = km_update(D, ss)) != GC_OK)
			return r;
		if (s > 0)
			KM_CK(cudaMemcpyPeerAsync(M.peer + (size_t) (s - 1) * D.slots, M.dev[0], D.gsum,
									  M.dev[s], sizeof(unsigned long long) * D.slots, D.s));
		if ((r = km_read_info(D, ss)) != GC_OK)
			return r;
		km_screen_adapt(D);
		km_grid_adapt(D);
		return GC_OK;
	}, st);
	if (rc != GC_OK)
		return rc;
	out->changed = 0;
	for (int s = 0; s < M.S; s++)
	{
		out->changed += M.D[s]->h_info->changed;
		km_last_phases.rows_screened += M.D[s]->screened;
		km_last_phases.rows_tied += M.D[s]->h_info->tie_rows;
		km_last_phases.rows_reranked += M.D[s]->h_info->fb_total;
	}
	if (M.S > 1)
	{
		k_add_sums<<<blocks_for((int64_t) D0.slots, 256) < 1024 ? blocks_for((int64_t) D0.slots, 256) : 1024,
			256, 0, D0.s>>>(D0.gsum, M.peer, D0.slots, M.S - 1);
		KM_LAUNCHED();
	}
	if ((rc = km_finalize(D0, D0.C[cur], D0.C[1 - cur], st)) != GC_OK ||
		(rc = km_read_info(D0, st)) != GC_OK)
		return rc;
	if (D0.h_info->n_empty > 0 &&
		(rc = km_multi_reseed(M, cur, D0.h_info->n_empty, st)) != GC_OK)
		return rc;
	out->relocated = D0.h_info->relocated;
	out->shift = D0.h_info->shift;
	out->moved = D0.h_info->moved != 0;
	if ((rc = km_bcast(M, [&](km_dev &D) { return (void *) D.C[1 - cur]; },
					   sizeof(float) * (size_t) D0.k * D0.d, st)) != GC_OK)
		return rc;
	return km_each(M, [&](int s, gc_status *ss) {
		return km_prep(*M.D[s], M.D[s]->C[1 - cur], ss);
	}, st);
}

/*
 * One run from the initial centres in GPU 0's C[0] (as km_run of
 * kmeans.cu): the Lloyd iterations and the final inertia.  *cur_out: the
 * final centres' buffer.
 */
static gc_code
km_multi_run(km_multi &M, const gc_ctx *ctx, const gc_kmeans_params *p, int run,
			 double tol_scaled, int *cur_out, double *inertia, int *iterations,
			 bool *converged, gc_status *st)
{
	km_dev	   &D0 = *M.D[0];
	const size_t kd = (size_t) D0.k * D0.d;
	int			cur = 0,
				it;
	bool		moved = true;
	gc_code		rc;

	if ((rc = km_bcast(M, [](km_dev &D) { return (void *) D.C[0]; }, sizeof(float) * kd, st)) != GC_OK ||
		(rc = km_each(M, [&](int s, gc_status *ss) {
			km_dev	   &D = *M.D[s];
			gc_status  *st = ss;	/* KM_CK's */

			D.prune_on = D.prune_ok;
			D.bounds_ok = false;
			D.unit_centres = D.unit;
			KM_CK(cudaMemsetAsync(D.labels, 0xff, sizeof(int32_t) * D.n, D.s));
			return km_prep(D, D.C[0], ss);
		}, st)) != GC_OK)
		return rc;
	*converged = false;
	for (it = 0; it < p->max_iter; it++)
	{
		km_step		step;

		if (gc_cancelled(ctx))
			return gc_fail(st, GC_ECANCEL, "canceled");
		if ((rc = km_multi_iteration(M, cur, &step, st)) != GC_OK)
			return rc;
		moved = step.moved;
		cur = 1 - cur;
		gc_report(ctx, GC_PHASE_ITERATE, it + 1, p->max_iter, run, gc_kmeans_runs(p), NAN);
		/* kmeans_run's test: a step that re-seeds is not converged on labels */
		if ((step.changed == 0 && step.relocated == 0) || step.shift <= tol_scaled)
		{
			*converged = true;
			it++;
			break;
		}
	}
	*iterations = it;
	*cur_out = cur;
	/* the labels of the final centres (re-assigned when they moved), the
	 * inertia's blocks of every shard summed on GPU 0 in row order */
	rc = km_each(M, [&](int s, gc_status *ss) {
		km_dev	   &D = *M.D[s];
		const float *Ca = D.C[cur];
		gc_status  *st = ss;	/* KM_CK's */
		gc_code		r;

		if (moved)
		{
			KM_CK(cudaMemsetAsync(D.info, 0, sizeof(km_info), D.s));
			if ((r = km_assign(D, ss)) != GC_OK)
				return r;
		}
		if ((r = km_assign_centres(D, D.C[cur], &Ca, ss)) != GC_OK ||
			(r = km_inertia_rows(D, Ca, D.labels, 0, ss)) != GC_OK)
			return r;
		return km_gather(M, s, D.bsum, M.bsum, 1, ss);
	}, st);
	return rc != GC_OK ? rc : km_inertia_total(M.V, inertia, st);
}

/* The labels (and distances) of every shard, each through its GPU's
 * pinned ring at once; the centres from GPU 0. */
static gc_code
km_multi_download(km_multi &M, const gc_ctx *ctx, bool keep, int cur,
				  gc_kmeans_result *res, gc_status *st)
{
	km_dev	   &D0 = *M.D[0];
	const size_t kd = (size_t) D0.k * D0.d;
	const int	threads = gc_team_adapt(ctx);
	gc_code		rc;

	if (keep && res->distance != NULL &&
		(rc = km_bcast(M, [](km_dev &D) { return (void *) D.C_best; }, sizeof(float) * kd, st)) != GC_OK)
		return rc;
	if ((rc = km_each(M, [&](int s, gc_status *ss) {
		km_dev	   &D = *M.D[s];
		const float *C = keep ? D.C_best : D.C[cur];
		const float *Ca = C;
		const int32_t *lab = keep ? D.labels_best : D.labels;
		gc_status  *st = ss;	/* KM_CK's */
		gc_code		r;

		KM_CK(gc_xfer_d2h(res->labels + M.r0[s], lab, sizeof(int32_t) * D.n, D.s, threads));
		if (res->distance != NULL &&
			((r = km_assign_centres(D, C, &Ca, ss)) != GC_OK ||
			 (r = km_distances(D, Ca, lab, res->distance + M.r0[s], ss)) != GC_OK))
			return r;
		KM_CK(cudaStreamSynchronize(D.s));
		return GC_OK;
	}, st)) != GC_OK)
		return rc;
	KM_CK(gc_xfer_d2h(res->centroids, keep ? D0.C_best : D0.C[cur], sizeof(float) * kd, D0.s,
					  threads));
	KM_CK(cudaStreamSynchronize(D0.s));
	return GC_OK;
}

/* The runs, the best kept (as km_fit of kmeans.cu). */
static gc_code
km_multi_fit(km_multi &M, const gc_ctx *ctx, const gc_kmeans_params *p,
			 const float *seeds, double tol_scaled, gc_kmeans_result *res,
			 gc_status *st)
{
	km_dev	   &D0 = *M.D[0];
	const int	runs = gc_kmeans_runs(p);
	const bool	keep = runs > 1;
	const size_t kd = (size_t) D0.k * D0.d;
	int			best_cur = 0;
	double		t0;
	gc_code		rc;

	for (int run = 0; run < runs; run++)
	{
		double		inertia;
		int			iters,
					cur;
		bool		conv;

		t0 = gc_now_ms();
		gc_report(ctx, GC_PHASE_INIT, 0, p->max_iter, run, runs, NAN);
		if (seeds == nullptr)
			rc = km_given_centres(D0, p, st);
		else
		{
			KM_CK(cudaMemcpyAsync(D0.C[0], seeds + run * kd, sizeof(float) * kd,
								  cudaMemcpyHostToDevice, D0.s));
			rc = GC_OK;
		}
		if (rc != GC_OK)
			return rc;
		KM_CK(cudaStreamSynchronize(D0.s));
		km_last_phases.ms_init += gc_now_ms() - t0;
		t0 = gc_now_ms();
		if ((rc = km_multi_run(M, ctx, p, run, tol_scaled, &cur, &inertia, &iters,
							   &conv, st)) != GC_OK)
			return rc;
		km_last_phases.ms_lloyd += gc_now_ms() - t0;
		km_last_phases.total_iterations += iters;
		if (run == 0 || inertia < res->inertia)
		{
			res->inertia = inertia;
			res->iterations = iters;
			res->converged = conv;
			best_cur = cur;
			if (keep &&
				(rc = km_each(M, [&](int s, gc_status *ss) {
					km_dev	   &D = *M.D[s];
					gc_status  *st = ss;	/* KM_CK's */

					KM_CK(cudaMemcpyAsync(D.labels_best, D.labels, sizeof(int32_t) * D.n,
										  cudaMemcpyDeviceToDevice, D.s));
					if (s == 0)
						KM_CK(cudaMemcpyAsync(D.C_best, D.C[cur], sizeof(float) * kd,
											  cudaMemcpyDeviceToDevice, D.s));
					KM_CK(cudaStreamSynchronize(D.s));
					return GC_OK;
				}, st)) != GC_OK)
				return rc;
		}
	}
	t0 = gc_now_ms();
	rc = km_multi_download(M, ctx, keep, best_cur, res, st);
	km_last_phases.ms_download = gc_now_ms() - t0;
	return rc;
}

gc_code
km_fit_multi(const gc_ctx *ctx, const float *X, int64_t n, int d,
			 const gc_kmeans_params *p, gc_kmeans_result *res, gc_status *st)
{
	const bool	given = p->init == GC_INIT_CENTROIDS;
	const gc_kmeans_init init = given ? GC_INIT_CENTROIDS :
		gc_km_init_resolve(p->init, n, d, p->k);
	const int	runs = gc_kmeans_runs(p);
	const size_t kd = (size_t) p->k * d;
	/* random seeding on the host; k-means++ and k-means|| over the shards */
	const bool	on_host = init == GC_INIT_RANDOM;
	std::vector<float> seeds;
	std::vector<float> unit_rows;
	double		tol_scaled = 0.0,
				t0 = gc_now_ms();
	gc_device_kept caller;		/* current again on every return */
	gc_code		rc;

	memset(&km_last_phases, 0, sizeof(km_last_phases));
	KM_CK(cudaGetDevice(&caller.dev));
	{
		km_multi	M;

		km_split(M, ctx, n);
		gc_gpus_connect(M.S, M.dev);
		KM_CK(cudaSetDevice(M.dev[0]));
		try
		{
			if (!given)
				seeds.resize((size_t) runs * kd);
			if (on_host && p->metric == GC_METRIC_COSINE)
			{
				/* as km_fit: the host's seeding and the shards read unit rows */
				unit_rows.resize((size_t) n * d);
				gc_unit_rows(ctx, X, n, d, unit_rows.data());
				X = unit_rows.data();
			}
		}
		catch (const std::bad_alloc &)
		{
			return gc_fail(st, GC_ENOMEM, "k-means: out of memory for %lld rows", (long long) n);
		}
		gc_report(ctx, GC_PHASE_UPLOAD, 0, p->max_iter, 0, runs, NAN);
		for (int run = 0; on_host && run < runs; run++)
			if ((rc = km_seed_host(ctx, X, n, d, p->k, nullptr, init, p->seed,
								   gc_km_init_stream(init, run), seeds.data() + run * kd,
								   st)) != GC_OK)
				return rc;
		km_last_phases.ms_init = gc_now_ms() - t0;
		t0 = gc_now_ms();
		if ((rc = km_multi_setup(M, ctx, X, d, p,
								 p->metric == GC_METRIC_COSINE && !on_host, st)) != GC_OK)
			return rc;
		km_last_phases.ms_upload = gc_now_ms() - t0;
		if (p->tol > 0.0)
		{
			double		mv;

			if ((rc = km_multi_variance(M, &mv, st)) != GC_OK)
				return rc;
			tol_scaled = p->tol * mv;
		}
		t0 = gc_now_ms();
		for (int run = 0; !given && !on_host && run < runs; run++)
		{
			const uint64_t stream = gc_km_init_stream(init, run);

			gc_report(ctx, GC_PHASE_INIT, 0, p->max_iter, run, runs, NAN);
			rc = init == GC_INIT_KMEANSPP ?
				km_pp_shards(M.D, M.dev, M.r0, M.S, ctx, p->seed, stream, seeds.data() + run * kd, st) :
				km_par_shards(M.D, M.dev, M.r0, M.S, ctx, p->seed, stream, seeds.data() + run * kd, st);
			if (rc != GC_OK)
				return rc;
		}
		km_last_phases.ms_init += gc_now_ms() - t0;
		rc = km_multi_fit(M, ctx, p, given ? nullptr : seeds.data(), tol_scaled, res, st);
	}
	return rc;
}
