/*
 * kmeans_hooks.cu — the GPU k-means' test-only entry points (declared in
 * gpu.h under GC_TESTING): the initial centres of one run
 * (gc_kmeans_gpu_seed), one Lloyd step (gc_kmeans_gpu_step) and the timing
 * of the phases (gc_kmeans_gpu_bench), built from the same phases as
 * gc_kmeans_gpu.  The Makefile links cuda/*_hooks.cu into the GPU test
 * programs only: the extension carries none of them.
 */
#define GC_TESTING 1

#include <math.h>
#include <string.h>

#include "kmeans_dev.cuh"

extern "C" void
gc_kmeans_gpu_force_chunk(int64_t rows)
{
	km_force_chunk = rows;
}

extern "C" gc_code
gc_kmeans_gpu_seed(const gc_ctx *ctx, const float *X, int64_t n, int d, int k,
				   gc_kmeans_init init, uint64_t seed, uint64_t stream,
				   float *centroids, int64_t *chosen, gc_status *st)
{
	km_dev		D;
	gc_code		rc;
	int64_t    *ch = nullptr;

	if (n < 1 || d < 1 || k < 1 || k > n || n > INT32_MAX)
		return gc_fail(st, GC_EINVAL, "gc_kmeans_gpu_seed: bad sizes");
	if ((rc = km_setup(D, X, n, d, k, false, st)) != GC_OK)
		return rc;
	init = gc_km_init_resolve(init, n, d, k);
	if (chosen && (init == GC_INIT_KMEANSPP || init == GC_INIT_KMEANS_PARALLEL))
		KM_CK(cudaMalloc(&ch, sizeof(int64_t) * k));
	rc = km_seed(D, ctx, X, init, seed, stream, ch, st);
	if (rc == GC_OK)
	{
		cudaError_t e = cudaMemcpy(centroids, D.C[0], sizeof(float) * (size_t) k * d,
								   cudaMemcpyDeviceToHost);

		if (e == cudaSuccess && ch)
			e = cudaMemcpy(chosen, ch, sizeof(int64_t) * k, cudaMemcpyDeviceToHost);
		if (e != cudaSuccess)
			rc = km_cuda_fail(st, e, "reading the centres");
	}
	cudaFree(ch);
	return rc;
}

extern "C" gc_code
gc_kmeans_gpu_step(const float *X, int64_t n, int d, int k, const float *C_in,
				   int32_t *labels, float *C_out, double *shift,
				   int64_t *n_changed, gc_status *st)
{
	km_dev		D;
	gc_code		rc;

	if (n < 1 || d < 1 || k < 1 || k > n || n > INT32_MAX)
		return gc_fail(st, GC_EINVAL, "gc_kmeans_gpu_step: bad sizes");
	if ((rc = km_setup(D, X, n, d, k, false, st)) != GC_OK)
		return rc;
	KM_CK(cudaMemcpyAsync(D.C[0], C_in, sizeof(float) * (size_t) k * d, cudaMemcpyHostToDevice, D.s));
	KM_CK(cudaMemsetAsync(D.labels, 0xff, sizeof(int32_t) * n, D.s));
	if ((rc = km_prep(D, D.C[0], st)) != GC_OK ||
		(rc = km_iteration(D, 0, st)) != GC_OK)
		return rc;
	KM_CK(cudaMemcpyAsync(labels, D.labels, sizeof(int32_t) * n, cudaMemcpyDeviceToHost, D.s));
	KM_CK(cudaMemcpyAsync(C_out, D.C[1], sizeof(float) * (size_t) k * d, cudaMemcpyDeviceToHost, D.s));
	KM_CK(cudaStreamSynchronize(D.s));
	*shift = D.h_info->shift;
	*n_changed = (int64_t) D.h_info->changed;
	return GC_OK;
}

extern "C" gc_code
gc_kmeans_gpu_grid_stats(const float *X, int64_t n, int d, int k, const float *C,
						 gc_kmeans_gpu_grid_info *out, gc_status *st)
{
	km_dev		D;
	gc_code		rc;

	memset(out, 0, sizeof(*out));
	if (n < 1 || d < 1 || k < 1 || k > n || n > INT32_MAX)
		return gc_fail(st, GC_EINVAL, "gc_kmeans_gpu_grid_stats: bad sizes");
	if ((rc = km_setup(D, X, n, d, k, false, st)) != GC_OK)
		return rc;
	if (!D.grid)
		return GC_OK;
	KM_CK(cudaMemcpyAsync(D.C[0], C, sizeof(float) * (size_t) k * d, cudaMemcpyHostToDevice, D.s));
	if ((rc = km_prep(D, D.C[0], st)) != GC_OK)
		return rc;

	const km_grid_geo &g = D.geo;
	const int	ne = 2 * (g.G[0] + g.G[1] + g.G[2]);
	uint32_t   *hdr = (uint32_t *) malloc(sizeof(uint32_t) * g.ncell);
	float	   *edge = (float *) malloc(sizeof(float) * ne);
	cudaError_t e = cudaSuccess;

	if (hdr == NULL || edge == NULL)
	{
		free(hdr);
		free(edge);
		return gc_fail(st, GC_ENOMEM, "out of memory");
	}
	e = cudaMemcpyAsync(hdr, D.ghdr, sizeof(uint32_t) * g.ncell, cudaMemcpyDeviceToHost, D.s);
	if (e == cudaSuccess)
		e = cudaMemcpyAsync(edge, D.gedge, sizeof(float) * ne, cudaMemcpyDeviceToHost, D.s);
	if (e == cudaSuccess)
		e = cudaStreamSynchronize(D.s);
	if (e != cudaSuccess)
	{
		free(hdr);
		free(edge);
		return km_cuda_fail(st, e, "reading the grid");
	}
	out->cells = g.ncell;
	for (int c = 0; c < g.ncell; c++)
	{
		if ((hdr[c] & 0xFFu) == 0xFFu)
			out->full_cells++;
		else
			out->listed += hdr[c] & 0xFFu;
	}
	{
		double		rsum = 0,
					wsum = 0;
		int			wmax = 0;

		for (int64_t i = 0; i < n; i++)
		{
			bool		in;
			const int	cell = km_grid_cell(g, edge, X + i * d, d, &in);
			const int	cnt = !in || (hdr[cell] & 0xFFu) == 0xFFu ? k : (int) (hdr[cell] & 0xFFu);
			out->rows_outside += !in;
			rsum += cnt;
			wmax = cnt > wmax ? cnt : wmax;
			if (i % 32 == 31 || i == n - 1)
			{
				wsum += wmax;
				wmax = 0;
			}
		}
		out->row_candidates = rsum / n;
		out->warp_candidates = wsum / ((n + 31) / 32);
	}
	free(hdr);
	free(edge);
	return GC_OK;
}

extern "C" gc_code
gc_kmeans_gpu_bench(const float *X, int64_t n, int d, int k, const float *C0,
					int iters, gc_kmeans_gpu_timing *t, gc_status *st)
{
	km_dev		D;
	gc_code		rc;
	cudaEvent_t e0 = nullptr,
				e1 = nullptr;
	float		ms;
	int			cur = 0;
	int32_t    *lab_full = nullptr;
	float	   *c_full = nullptr;

	memset(t, 0, sizeof(*t));
	if (n < 1 || d < 1 || k < 1 || k > n || n > INT32_MAX || iters < 1)
		return gc_fail(st, GC_EINVAL, "gc_kmeans_gpu_bench: bad sizes");
	if ((rc = km_setup(D, X, n, d, k, false, st)) != GC_OK)
		return rc;
	t->small_path = D.small;
	t->update_replicas = D.R > 0 ? D.R : (D.XR ? -1 : 0);
	t->pruned = D.prune_ok;
	KM_CK(cudaEventCreate(&e0));
	KM_CK(cudaEventCreate(&e1));

	/*
	 * Whole iterations, read-back and host test included: from C0, 3
	 * warm-up iterations and iters timed, every row screened (ms_iter_full,
	 * the baselines' work); then the same iterations again with the bounds
	 * (ms_iter, what a fit runs), whose labels and centres must be the same.
	 */
	for (int pass = 0; pass < (D.prune_ok ? 2 : 1) && rc == GC_OK; pass++)
	{
		const bool	prune = pass == 1;

		cur = 0;
		KM_CK(cudaMemcpyAsync(D.C[0], C0, sizeof(float) * (size_t) k * d, cudaMemcpyHostToDevice, D.s));
		KM_CK(cudaMemsetAsync(D.labels, 0xff, sizeof(int32_t) * n, D.s));
		D.prune_on = prune;
		D.bounds_ok = false;
		D.ties_est = D.ties.cap / 4;
		D.cascade_now = true;
		rc = km_prep(D, D.C[0], st);
		for (int i = 0; i < 3 && rc == GC_OK; i++, cur = 1 - cur)
			rc = km_iteration(D, cur, st);
		if (rc != GC_OK)
			break;
		KM_CK(cudaEventRecord(e0, D.s));
		for (int i = 0; i < iters && rc == GC_OK; i++, cur = 1 - cur)
		{
			rc = km_iteration(D, cur, st);
			if (i < 32)
			{
				t->iter_ties[i] = D.h_info->tie_rows;
				t->iter_reranked[i] = D.h_info->fb_total;
				t->iter_screened[i] = D.screened;
			}
		}
		KM_CK(cudaEventRecord(e1, D.s));
		KM_CK(cudaEventSynchronize(e1));
		KM_CK(cudaEventElapsedTime(&ms, e0, e1));
		if (rc != GC_OK)
			break;
		if (prune)
		{
			t->ms_iter = ms / iters;
			t->pruned_same = 0;
			if (lab_full && c_full)
			{
				int32_t    *lab = (int32_t *) malloc(sizeof(int32_t) * n);
				float	   *c = (float *) malloc(sizeof(float) * (size_t) k * d);

				if (lab && c &&
					cudaMemcpy(lab, D.labels, sizeof(int32_t) * n, cudaMemcpyDeviceToHost) == cudaSuccess &&
					cudaMemcpy(c, D.C[cur], sizeof(float) * (size_t) k * d, cudaMemcpyDeviceToHost) == cudaSuccess)
					t->pruned_same = memcmp(lab, lab_full, sizeof(int32_t) * n) == 0 &&
						memcmp(c, c_full, sizeof(float) * (size_t) k * d) == 0;
				else
					t->pruned_same = 0;
				free(lab);
				free(c);
			}
		}
		else
		{
			t->ms_iter = t->ms_iter_full = ms / iters;
			lab_full = (int32_t *) malloc(sizeof(int32_t) * n);
			c_full = (float *) malloc(sizeof(float) * (size_t) k * d);
			if (lab_full && c_full)
			{
				cudaError_t e = cudaMemcpy(lab_full, D.labels, sizeof(int32_t) * n,
										   cudaMemcpyDeviceToHost);

				if (e == cudaSuccess)
					e = cudaMemcpy(c_full, D.C[cur], sizeof(float) * (size_t) k * d,
								   cudaMemcpyDeviceToHost);
				if (e != cudaSuccess)
					rc = km_cuda_fail(st, e, "reading the labels back");
			}
		}
		t->empty_seen = D.h_info->n_empty;
		t->fallback_rows = D.h_info->fb_total;
		t->tied_rows = D.h_info->tie_rows;
		t->screen_mode = D.screen_cascade ? 13 : D.screen;
		t->ties = D.ties.cap > 0;
		t->screen_wgmma = D.screen_wg != 0;
	}
	free(lab_full);
	free(c_full);
	/* the phases alone, every row screened */
	D.prune_on = false;
	if (rc == GC_OK)
	{
		KM_CK(cudaEventRecord(e0, D.s));
		for (int i = 0; i < iters && rc == GC_OK; i++)
			rc = km_assign(D, st);
		KM_CK(cudaEventRecord(e1, D.s));
		KM_CK(cudaEventSynchronize(e1));
		KM_CK(cudaEventElapsedTime(&ms, e0, e1));
		t->ms_assign = ms / iters;
	}
	if (rc == GC_OK && !D.small)
	{
		KM_CK(cudaEventRecord(e0, D.s));
		for (int i = 0; i < iters && rc == GC_OK; i++)
			rc = km_rerank(D, st);
		KM_CK(cudaEventRecord(e1, D.s));
		KM_CK(cudaEventSynchronize(e1));
		KM_CK(cudaEventElapsedTime(&ms, e0, e1));
		t->ms_rerank = ms / iters;
	}
	if (rc == GC_OK)
	{
		KM_CK(cudaEventRecord(e0, D.s));
		for (int i = 0; i < iters && rc == GC_OK; i++)
		{
			KM_CK(cudaMemsetAsync(D.gsum, 0, sizeof(unsigned long long) * D.slots, D.s));
			rc = km_update(D, st);
		}
		KM_CK(cudaEventRecord(e1, D.s));
		KM_CK(cudaEventSynchronize(e1));
		KM_CK(cudaEventElapsedTime(&ms, e0, e1));
		t->ms_update = ms / iters;
	}
	/* the means and the centres' layout (what else an iteration runs) */
	if (rc == GC_OK)
	{
		KM_CK(cudaEventRecord(e0, D.s));
		for (int i = 0; i < iters && rc == GC_OK; i++)
			rc = km_finalize(D, D.C[cur], D.C[1 - cur], st);
		KM_CK(cudaEventRecord(e1, D.s));
		KM_CK(cudaEventSynchronize(e1));
		KM_CK(cudaEventElapsedTime(&ms, e0, e1));
		t->ms_finalize = ms / iters;
	}
	if (rc == GC_OK)
	{
		KM_CK(cudaEventRecord(e0, D.s));
		for (int i = 0; i < iters && rc == GC_OK; i++)
			rc = km_prep(D, D.C[cur], st);
		KM_CK(cudaEventRecord(e1, D.s));
		KM_CK(cudaEventSynchronize(e1));
		KM_CK(cudaEventElapsedTime(&ms, e0, e1));
		t->ms_prep = ms / iters;
	}
	cudaEventDestroy(e0);
	cudaEventDestroy(e1);
	return rc;
}

extern "C" gc_code
gc_kmeans_gpu_screen_scores(const float *X, int64_t n, int d, int k,
							const float *C, int mode, float *scores,
							float *mu, float *f16_scale, gc_status *st)
{
	km_dev		D;
	gc_code		rc;
	float	   *dbg = nullptr;
	float	   *h = nullptr;

	if (n < 1 || d < 1 || k < 1 || k > n || n > INT32_MAX || (mode != 1 && mode != 3))
		return gc_fail(st, GC_EINVAL, "gc_kmeans_gpu_screen_scores: bad arguments");
	if ((rc = km_setup(D, X, n, d, k, false, st)) != GC_OK)
		return rc;
	if (D.screen == 0)
		return gc_fail(st, GC_EINVAL, "gc_kmeans_gpu_screen_scores: no tensor-core screen for d = %d", d);
	D.screen = mode;
	D.screen_cascade = false;
	if (mode == 3 && D.CTf == nullptr)
		KM_ALLOC(D.CTf, (int64_t) D.dpad * D.kp);
	KM_CK(cudaMemcpyAsync(D.C[0], C, sizeof(float) * (size_t) k * d, cudaMemcpyHostToDevice, D.s));
	KM_CK(cudaMemsetAsync(D.labels, 0xff, sizeof(int32_t) * n, D.s));
	KM_CK(cudaMemsetAsync(D.info, 0, sizeof(km_info), D.s));
	KM_CK(cudaMalloc(&dbg, sizeof(float) * (size_t) n * D.kp));
	if ((rc = km_prep(D, D.C[0], st)) == GC_OK)
		rc = km_screen(D, mode, nullptr, nullptr, D.fb_rows, &D.info->n_fallback, dbg, st);
	h = (float *) malloc(sizeof(float) * (size_t) n * D.kp);
	if (rc == GC_OK && h == nullptr)
		rc = gc_fail(st, GC_ENOMEM, "out of memory");
	if (rc == GC_OK)
	{
		cudaError_t e = cudaMemcpyAsync(h, dbg, sizeof(float) * (size_t) n * D.kp,
										cudaMemcpyDeviceToHost, D.s);

		if (e == cudaSuccess)
			e = cudaMemcpyAsync(mu, D.mu, sizeof(float) * d, cudaMemcpyDeviceToHost, D.s);
		*f16_scale = 0.0f;
		if (e == cudaSuccess && mode == 1 && D.screen_wg)
			e = cudaMemcpyAsync(f16_scale, D.cmax2 + 2, sizeof(float), cudaMemcpyDeviceToHost, D.s);
		if (e == cudaSuccess)
			e = cudaStreamSynchronize(D.s);
		if (e != cudaSuccess)
			rc = km_cuda_fail(st, e, "reading the scores");
	}
	if (rc == GC_OK)
		for (int64_t i = 0; i < n; i++)
			memcpy(scores + i * k, h + i * D.kp, sizeof(float) * k);
	free(h);
	cudaFree(dbg);
	return rc;
}

extern "C" gc_code
gc_kmeans_gpu_stream_bench(const gc_ctx *ctx, const float *X, int64_t n, int d,
						   int k, const float *C0, int iters, size_t budget,
						   gc_kmeans_gpu_stream_timing *t, gc_status *st)
{
	km_dev		D;
	gc_code		rc;
	gc_kmeans_gpu_plan plan;
	int			cur = 0;
	double		t0,
				sum = 0.0;

	memset(t, 0, sizeof(*t));
	if (n < 1 || d < 1 || k < 1 || k > n || n > INT32_MAX || iters < 1)
		return gc_fail(st, GC_EINVAL, "gc_kmeans_gpu_stream_bench: bad sizes");
	if (budget == 0 && (rc = km_free_budget(&budget, st)) != GC_OK)
		return rc;
	gc_kmeans_gpu_plan_for(n, d, k, 1, false, budget, &plan);
	if (!plan.fits || !plan.streamed)
		return gc_fail(st, GC_EINVAL, "gc_kmeans_gpu_stream_bench: the problem %s in %zu MiB",
					   plan.fits ? "fits resident" : "does not fit even streamed", budget >> 20);
	t0 = gc_now_ms();
	if ((rc = km_setup(D, X, n, d, k, false, st, plan.chunk_rows, ctx)) != GC_OK)
		return rc;
	t->ms_setup = gc_now_ms() - t0;
	t->chunks = plan.chunks;
	t->chunk_rows = plan.chunk_rows;
	t->small_path = D.small;
	t->update_replicas = D.R > 0 ? D.R : (D.sorted_upd ? -1 : 0);
	KM_CK(cudaMemcpyAsync(D.C[0], C0, sizeof(float) * (size_t) k * d, cudaMemcpyHostToDevice, D.s));
	KM_CK(cudaMemsetAsync(D.labels, 0xff, sizeof(int32_t) * n, D.s));
	if ((rc = km_prep(D, D.C[0], st)) != GC_OK)
		return rc;
	t->ms_iter_min = INFINITY;
	for (int i = 0; i < iters; i++, cur = 1 - cur)
	{
		double		ms;

		t0 = gc_now_ms();
		if ((rc = km_iteration(D, cur, st)) != GC_OK)
			return rc;
		ms = gc_now_ms() - t0;
		sum += ms;
		t->ms_iter_min = ms < t->ms_iter_min ? ms : t->ms_iter_min;
	}
	t->ms_iter = sum / iters;
	return GC_OK;
}
