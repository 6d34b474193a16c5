/*
 * kmeans.cu — k-means (Lloyd) on the GPU: gc_kmeans_gpu, with the same
 * result contract as gc_kmeans_cpu (kmeans.c), its memory bound and its
 * phase timings (the entry points of gpu.h), and the driver that runs the
 * phases: seeding, the Lloyd iterations and the convergence test, n_init
 * runs, the read-back of the best.  The phases live by concept, as the
 * CPU's do (kmeans_init.c, kmeans_assign.c, kmeans_update.c):
 *   kmeans_dev.cuh     km_dev (the device state of one problem), the
 *                      iteration record, error plumbing, the phases' API
 *   kmeans_setup.cu    allocation, upload and transpose, feature scales
 *   kmeans_pp.cu       k-means++ seeding (also weighted: k-means||'s reduction)
 *   kmeans_pp_screen.cuh  its pass over the rows screened on the tensor
 *                      cores in FP16 (d >= 64), exact where undecided
 *   kmeans_par.cu      k-means|| seeding
 *   kmeans_assign.cu   the assignment kernels, the exact re-rank and the
 *                      centres' layout
 *   kmeans_screen.cu   the tensor-core screen of the assignment (8 < d <= 256)
 *   kmeans_wgmma.cu    its screen on Hopper's wgmma in FP16 (H100/H200, d > 64)
 *   kmeans_update.cu   the fixed-point sums, means, empty-cluster re-seeding
 *   kmeans_weighted.cu the update with sample weights, in the CPU's order
 *   kmeans_stats.cu    inertia, distances, the variance behind tol
 *   kmeans_stream.cu   the streamed path: data larger than the device
 *                      memory, uploaded in chunks on every pass
 *   kmeans_hooks.cu    test-only entry points (linked into the GPU tests)
 *
 * Layout.  X is uploaded once and transposed to structure-of-arrays
 * (XT, d rows of n floats), so every kernel reads points coalesced.
 *
 * One Lloyd iteration is a few kernels and one small read-back (km_info):
 *   assign    nearest centre of every row, fused with the argmin and the
 *             count of changed labels (no n x k distance matrix):
 *             - d <= 8: one thread holds 8 rows in registers and scans the
 *               centres from shared memory, computing the exact float32
 *               gc_dist2 (dimension order, separate multiply and add), so
 *               the labels equal the CPU's bit for bit;
 *             - 8 < d <= 256: a tensor-core screen (kmeans_screen.cu):
 *               x.c on TF32 mma (the pass over every row on wgmma in
 *               FP16 on an H100/H200 at d > 64, kmeans_wgmma.cu), on
 *               rows and centres shifted by the feature means, fused
 *               with the best and second best score per row; a row whose
 *               two best scores are within the derived rounding bound
 *               (screen + the CPU's own rounding) is queued and re-ranked
 *               with the exact gc_dist2 (about 0.5% of rows): among the
 *               few centres of its window (k_assign_ties) where k d is
 *               large, else over every centre (k_assign_fallback), so
 *               this path too gives the CPU's labels;
 *             - d > 256: the same with a register-blocked FP32 tile
 *               (128 rows x 128 centres, FMA) in place of the screen.
 *   update    per-cluster sums in 64-bit fixed point (each feature scaled by
 *             a power of two chosen from its largest |x| and n so no sum can
 *             overflow), accumulated in shared memory (replicated per lane
 *             group when k is small, so a small k does not serialise on a
 *             few addresses) and flushed with one global atomic per slot
 *             and block (64-bit shared adds as two 32-bit atomics with
 *             carry); when k(d+1) does not fit in shared memory, a
 *             counting sort of the rows by label, then runs of the sorted
 *             rows summed from a row-major copy of X with one atomic per
 *             feature and label change (global atomics when that copy's
 *             memory is not there).  Integer sums are exact and
 *             order-independent: the update is deterministic, and the
 *             means equal the CPU's double means except where the double
 *             sums themselves round.
 *   finalize  means (float), empty-cluster count, squared centre shift.
 *   prep      the centres in the layout the next assign reads.
 *   read-back {changed, shift, n_empty, relocated, moved}: the
 *             convergence test (scikit-learn's: labels unchanged with no
 *             cluster re-seeded, or shift <= tol * mean feature variance)
 *             and the cancel poll happen on the host.
 * Empty clusters are re-seeded exactly as the CPU does (rows farthest from
 * their centres, farthest to the lowest empty id; never a row on its
 * centre) on an extra, rare path.
 *
 * Seeding: k-means++ (kmeans_pp.cu, also weighted) and k-means||
 * (kmeans_par.cu) run on the device and reproduce the CPU's centres bit for
 * bit; random seeding and weighted k-means|| call the CPU's own function;
 * 'auto' resolves as on the CPU (gc_km_init_resolve, k only); given
 * centroids make one run.
 * The final inertia and distances are the CPU's blocked double sums.
 *
 * The parameters every device has (gpuclust_core.h), with the CPU's
 * results bit for bit: sample weights (the update in the CPU's order,
 * kmeans_weighted.cu; weighted calls are resident, never streamed) and
 * the cosine metric (spherical k-means: the unit rows, assigned to the
 * unit rows of the centres, means normalized by km_finalize).
 *
 * Memory.  The call runs by p->gpu_plan, the plan its device choice made
 * (gc_choose_device_kmeans: the memory the call may use, under
 * gpuclust.gpu_memory_limit, which the GPU worker's admission counts);
 * given none, by a plan for p->gpu_mem, or for the free device memory when
 * that is 0.  When gc_kmeans_gpu_mem_bytes fits
 * it, X stays resident on the device (XT, plus XR for the sorted update)
 * for the whole call.  Otherwise the call is streamed (kmeans_stream.cu):
 * X stays on the host and every pass over it (the feature statistics, the
 * variance behind tol, each Lloyd iteration, the final inertia, the
 * distances) uploads it in chunks through pinned double buffers, with the
 * same results bit for bit; seeding then runs the CPU's own function on
 * the host (the same centres as the device's k-means++, by construction).
 * gc_kmeans_gpu_plan_for says which and how large the chunks are, and
 * dispatch (src/core/common/dispatch.c) sends a problem that does not fit even
 * streamed to the CPU under 'auto' (with a NOTICE) and refuses it under
 * 'gpu'; an allocation that fails anyway returns GC_ENOMEM, which the SQL
 * glue also answers under 'auto' by running on the CPU.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kmeans_dev.cuh"
#include "common/transfer.cuh"

/*
 * Phases of this thread's last gc_kmeans_gpu call (gc_kmeans_gpu_last_phases;
 * the GPU worker runs jobs on several threads).
 */
thread_local gc_kmeans_gpu_phases km_last_phases;

/* gc_kmeans_gpu_force_chunk (tests): stream in chunks of this many rows. */
thread_local int64_t km_force_chunk = 0;

/* Headroom left beside the plan when the budget is the free memory. */
#define KM_FREE_HEADROOM ((size_t) 64 << 20)

/* The largest chunk of X a streamed call uploads at once. */
#define KM_CHUNK_MAX_BYTES ((double) (256 << 20))

gc_code
km_read_info(km_dev &D, gc_status *st)
{
	KM_CK(cudaMemcpyAsync(D.h_info, D.info, sizeof(km_info), cudaMemcpyDeviceToHost, D.s));
	KM_CK(cudaStreamSynchronize(D.s));
	return GC_OK;
}

/* One Lloyd iteration from D.C[cur] (prepared) into D.C[1-cur]; info read. */
gc_code
km_iteration(km_dev &D, int cur, gc_status *st)
{
	gc_code		rc;

	KM_CK(cudaMemsetAsync(D.gsum, 0, sizeof(unsigned long long) * D.slots + sizeof(km_info), D.s));
	if (D.streamed)
		rc = km_stream_assign_update(D, st);
	else if ((rc = km_assign(D, st)) == GC_OK)
		rc = D.wu ? km_wupdate(D, D.labels, D.C[cur], D.C[1 - cur], st) : km_update(D, st);
	if (rc != GC_OK ||
		(rc = km_finalize(D, D.C[cur], D.C[1 - cur], st)) != GC_OK ||
		(rc = km_prep(D, D.C[1 - cur], st)) != GC_OK ||
		(rc = km_read_info(D, st)) != GC_OK)
		return rc;
	km_screen_adapt(D);
	km_grid_adapt(D);
	if (D.h_info->n_empty > 0)
	{
		unsigned long long changed = D.h_info->changed;

		if ((rc = (D.wu ? km_wreseed : km_reseed)(D, D.C[cur], D.C[1 - cur],
												 D.h_info->n_empty, st)) != GC_OK ||
			(rc = km_prep(D, D.C[1 - cur], st)) != GC_OK ||
			(rc = km_read_info(D, st)) != GC_OK)
			return rc;
		D.h_info->changed = changed;
	}
	return GC_OK;
}

/*
 * The CPU's own seeding of init on the host matrix (weighted by w, the
 * host's weights, when not NULL): what the device's seeding reproduces, so
 * the centres are the same by construction.  Random seeding always runs
 * here; every init does when X is streamed (not resident on the device),
 * and k-means|| does with weights (the device's is unweighted).
 */
gc_code
km_seed_host(const gc_ctx *ctx, const float *X, int64_t n, int d, int k,
			 const double *w, gc_kmeans_init init, uint64_t seed,
			 uint64_t stream, float *C, gc_status *st)
{
	switch (init)
	{
		case GC_INIT_RANDOM:
			return gc_km_init_random_w(ctx, X, n, d, k, w, seed, stream, C, NULL, st);
		case GC_INIT_KMEANSPP:
			return gc_km_init_kmeanspp_w(ctx, X, n, d, k, w, seed, stream, C, NULL, st);
		case GC_INIT_KMEANS_PARALLEL:
			return gc_km_init_kmeans_par_w(ctx, X, n, d, k, w, seed, stream, C, NULL, st);
		default:
			return gc_fail(st, GC_EINTERNAL, "GPU k-means: no seeding %d", (int) init);
	}
}

/* Whether init (resolved) seeds on the host (km_seed_host's cases). */
bool
km_seeds_on_host(gc_kmeans_init init, bool streamed, bool weighted)
{
	return init == GC_INIT_RANDOM || streamed ||
		(init == GC_INIT_KMEANS_PARALLEL && weighted);
}

/*
 * Initial centres into D.C[0] (device), init resolved (gc_km_init_resolve):
 * random, k-means|| or k-means++ (weighted by D.hw when there are weights).
 */
gc_code
km_seed(km_dev &D, const gc_ctx *ctx, const float *X, gc_kmeans_init init,
		uint64_t seed, uint64_t stream, int64_t *chosen_dev, gc_status *st)
{
	if (km_seeds_on_host(init, D.streamed, D.hw != nullptr))
	{
		float	   *h = (float *) malloc(sizeof(float) * (size_t) D.k * D.d);
		gc_code		rc;

		if (h == NULL)
			return gc_fail(st, GC_ENOMEM, "GPU k-means: out of memory");
		rc = km_seed_host(ctx, X, D.n, D.d, D.k, D.hw, init, seed, stream, h, st);
		if (rc == GC_OK)
		{
			cudaError_t e = cudaMemcpyAsync(D.C[0], h, sizeof(float) * (size_t) D.k * D.d,
											cudaMemcpyHostToDevice, D.s);

			if (e == cudaSuccess)
				e = cudaStreamSynchronize(D.s);
			if (e != cudaSuccess)
				rc = km_cuda_fail(st, e, "uploading the initial centres");
		}
		free(h);
		return rc;
	}
	if (init == GC_INIT_KMEANS_PARALLEL)
		return km_par_device(D, ctx, seed, stream, D.C[0], chosen_dev, st);
	return km_pp_device_w(ctx, D.s, D.XT, D.XR, D.n, D.d, D.k, km_weights(D), D.hw, seed,
						  stream, D.C[0], chosen_dev, st);
}

/* The given centroids into D.C[0]: under cosine their unit rows (checked
 * nonzero), as kmeans.c's kmeans_run. */
gc_code
km_given_centres(km_dev &D, const gc_kmeans_params *p, gc_status *st)
{
	KM_CK(cudaMemcpyAsync(D.C[0], p->init_centroids, sizeof(float) * (size_t) D.k * D.d,
						  cudaMemcpyHostToDevice, D.s));
	if (D.unit)
		return km_unit_rows(D, D.C[0], D.C[0], nullptr, 0, nullptr, st);
	return GC_OK;
}

/* One seeding + Lloyd run, as kmeans_run of kmeans.c.  *cur: final C. */
static gc_code
km_run(km_dev &D, const gc_ctx *ctx, const float *X, const gc_kmeans_params *p,
	   int run, double tol_scaled, int *cur_out, double *inertia,
	   int *iterations, bool *converged, gc_status *st)
{
	gc_code		rc;
	int			cur = 0,
				it;
	bool		moved = true;

	double		t0 = gc_now_ms(),
				t1;

	gc_report(ctx, GC_PHASE_INIT, 0, p->max_iter, run, gc_kmeans_runs(p), NAN);
	/* k-means|| runs the assignment on its candidates, as they are */
	D.prune_on = false;
	D.unit_centres = false;
	if (p->init == GC_INIT_CENTROIDS)
		rc = km_given_centres(D, p, st);
	else
	{
		const gc_kmeans_init init = gc_km_init_resolve(p->init, D.n, D.d, D.k);

		rc = km_seed(D, ctx, X, init, p->seed, gc_km_init_stream(init, run), nullptr, st);
	}
	if (rc != GC_OK)
		return rc;
	KM_CK(cudaStreamSynchronize(D.s));
	t1 = gc_now_ms();
	km_last_phases.ms_init += t1 - t0;
	*converged = false;
	KM_CK(cudaMemsetAsync(D.labels, 0xff, sizeof(int32_t) * D.n, D.s));
	/* Lloyd's iterations keep bounds (kmeans_prune.cu), from the first one's,
	 * and assign to the unit rows of the centres under cosine */
	D.prune_on = D.prune_ok;
	D.bounds_ok = false;
	D.unit_centres = D.unit;
	if ((rc = km_prep(D, D.C[0], st)) != GC_OK)
		return rc;
	for (it = 0; it < p->max_iter; it++)
	{
		if (gc_cancelled(ctx))
		{
			cudaStreamSynchronize(D.s);
			return gc_fail(st, GC_ECANCEL, "canceled");
		}
		km_last_phases.grid_iterations += D.grid;	/* before km_grid_adapt may drop it */
		if ((rc = km_iteration(D, cur, st)) != GC_OK)
			return rc;
		km_last_phases.rows_screened += D.streamed ? D.n : D.screened;
		km_last_phases.rows_tied += D.h_info->tie_rows;
		km_last_phases.rows_reranked += D.h_info->fb_total;
		moved = D.h_info->moved != 0;
		cur = 1 - cur;
		/* the inertia is summed on the CPU path only: not reported here */
		gc_report(ctx, GC_PHASE_ITERATE, it + 1, p->max_iter, run, gc_kmeans_runs(p), NAN);
		/* as kmeans_run: a step that re-seeds is not converged on labels */
		if ((D.h_info->changed == 0 && D.h_info->relocated == 0) ||
			D.h_info->shift <= tol_scaled)
		{
			*converged = true;
			it++;
			break;
		}
	}
	*iterations = it;
	/* C[cur] is already prepared; when it moved, labels must match it. */
	if (moved)
		KM_CK(cudaMemsetAsync(D.info, 0, sizeof(km_info), D.s));
	*cur_out = cur;
	{
		const float *Ca = D.C[cur];

		if ((rc = km_assign_centres(D, D.C[cur], &Ca, st)) != GC_OK)
			return rc;
		if (D.streamed)
			rc = km_stream_inertia(D, Ca, D.labels, moved, inertia, st);
		else if (!moved || (rc = km_assign(D, st)) == GC_OK)
			rc = km_inertia(D, Ca, D.labels, inertia, st);
	}
	km_last_phases.ms_lloyd += gc_now_ms() - t1;
	return rc;
}

/* The budget of a call given none: the free device memory, less a margin. */
gc_code
km_free_budget(size_t *budget, gc_status *st)
{
	size_t		fr = 0,
				tot = 0;

	KM_CK(cudaMemGetInfo(&fr, &tot));
	*budget = fr > KM_FREE_HEADROOM ? fr - KM_FREE_HEADROOM : 0;
	return GC_OK;
}

/* ------------------------------------------------------------------ */
/* entry points                                                        */
/* ------------------------------------------------------------------ */

extern "C" void
gc_kmeans_gpu_last_phases(gc_kmeans_gpu_phases *out)
{
	*out = km_last_phases;
}

/* Whether the update sorts rows by label (km_update_alloc's test). */
static bool
km_sorted_update(int d, int k)
{
	const double slots8 = (double) k * (d + 1) * 8;

	return !(slots8 <= 48 * 1024) && !(slots8 <= 160 * 1024);
}

/*
 * What both paths allocate for (n, d, k): labels and d2 (n each), the best
 * run's, the centres in both layouts, the sums, scales, means and block
 * sums; rows: the rows of the tiled path's per-row scratch (xn2, fb_rows).
 */
static double
km_common_bytes(int64_t n, int d, int k, int n_init, int64_t rows)
{
	const double nn = (double) n,
				dd = (double) d,
				kk = (double) k;
	const double nb = (double) ((n + KM_BLOCK - 1) / KM_BLOCK + 1);
	const double kp = (double) ((k + TILE - 1) / TILE * TILE);
	double		b = 0;

	b += nn * (4 + 4);			/* labels, d2 */
	if (n_init > 1)
		b += nn * 4 + kk * dd * 4;	/* labels_best, C_best */
	b += 2 * kk * dd * 4;		/* C[2] */
	if (d <= SMALL_D_MAX)
		b += kk * ((d + 3) / 4 * 4) * 4 + (d <= 3 ? 32768.0 * (4 + 16) + 3 * 8192 * 4 : 0);	/* cpk; the grid: ghdr, gids, gedge */
	else
		b += (5 * dd + 128) * kp * 4 + kp * 8 + (double) rows * 12 +
			(double) km_ties_cap(rows) * (8 + 4 * KM_TIE_CAP);	/* CT, CTf, CTt, CTw (d padded to 32), CTo, cnrm, cnw; fb_rows, fb_rows2, xn2; the windows */
	if (d > SMALL_D_MAX && rows == n)
		b += nn * 12 + kk * dd * 4 + kk * 8 + 4;	/* the bounds: ub, lb, pr_rows, Cbase, drift, csep */
	b += kk * (dd + 1) * 8 + dd * 4 + 2 * dd * 8 + nb * 8 + kk * 12 + 4096;
	return b;
}

/*
 * What km_setup, k-means++ (kmeans_pp.cu), the variance and the final
 * read-back allocate, with room for the allocator's rounding: an upper
 * bound.  The sort-by-label update's row-major copy is counted (when the
 * sums do not fit in shared memory), although km_setup does without it if
 * it cannot be had; weighted, the weighted update's buffers in its place
 * (kmeans_weighted.cu).
 */
extern "C" size_t
gc_kmeans_gpu_mem_bytes(int64_t n, int d, int k, int n_init, bool weighted)
{
	const double nn = (double) n,
				dd = (double) d,
				kk = (double) k;
	const double nb = (double) ((n + KM_BLOCK - 1) / KM_BLOCK + 1);
	double		b = km_common_bytes(n, d, k, n_init, n);

	b += nn * dd * 4;			/* XT */
	b += nn * 8;				/* q */
	b += 2 * kk * dd * 4;		/* cosine: Cu, Cs */
	if (weighted)
		b += nn * dd * 4 + nn * (8 + 4 * 4) + 3 * (kk + 1) * 4 + kk * 8 +
			(nn / GC_KM_SEGMENT + kk) * (dd + 1) * 8 + nn * 8 + (1 << 20);	/* XR, w, iota, keys, order, lab_eff, start, nseg, segoff, pcnt, segment sums, the sort's */
	else if (km_sorted_update(d, k))
		b += nn * dd * 4 + nn * 4 + 3 * kk * 4 + (1 << 20);	/* XR, perm, counts, scan */
	else
		b += fmin(64.0 * 1024 * 1024, nn * dd * 4);	/* staging */
	b += 512 * dd * 8;			/* feature maxima */
	b += nb * (8 + 8 * KM_PP_LMAX) + dd * 4 * KM_PP_LMAX;	/* k-means++ */
	b += nn * 4 * (3 + log(kk));	/* its terms, L = 2 + ln k (screened: the queue's distances) */
	if (!weighted && d >= KM_PP_SCREEN_MIN_D && nn * dd <= KM_PP_SCREEN_MAX_ND)
		b += nn * (2.0 * ((d + 15) / 16 * 16) + 8) + nb * 5 + dd * 4 +
			(km_sorted_update(d, k) ? 0.0 : nn * dd * 4);	/* screened: fragments, norms, queue, XR */
	b += nn * 17 + 3 * (1 + 2 * GC_KM_PAR_ROUNDS * kk) * dd * 4;	/* k-means||, ~10k candidates */
	b += nb * dd * 8;			/* variance */
	b += 40 * 2.0 * 1024 * 1024;	/* rounding of ~40 allocations */
	return (size_t) (b * 1.02);
}

/*
 * What a streamed call allocates with chunks of c rows (km_alloc with no
 * per-row arrays, km_update_alloc, km_stream_open, the feature pass'
 * scratch), with room for the allocator's rounding: an upper bound.
 */
static double
km_stream_bytes(int64_t n, int d, int k, int n_init, int64_t c)
{
	const double dd = (double) d,
				kk = (double) k,
				cc = (double) c;
	const double nb = (double) ((n + KM_BLOCK - 1) / KM_BLOCK + 1);
	double		b = km_common_bytes(n, d, k, n_init, c);

	b += (nb * dd + 2 * dd + 1) * 8 + dd * 4;	/* variance, means; maxima */
	b += cc * dd * 4 * 3 + cc * 8;	/* two upload buffers, XTc; q */
	if (km_sorted_update(d, k))
		b += cc * 4 + 3 * kk * 4 + (1 << 20);	/* perm, counts, scan */
	b += kk * dd * 4;			/* re-seeding: the far rows */
	b += 32 * 2.0 * 1024 * 1024;	/* rounding of ~30 allocations */
	return b * 1.02;
}

extern "C" void
gc_kmeans_gpu_plan_for(int64_t n, int d, int k, int n_init, bool weighted,
					   size_t budget, gc_kmeans_gpu_plan *out)
{
	const int64_t blk = KM_BLOCK;
	const int64_t nr = (n + blk - 1) / blk * blk;	/* n rounded up */
	int64_t		cmax = (int64_t) (KM_CHUNK_MAX_BYTES / (4.0 * (d > 0 ? d : 1))) / blk * blk,
				c;

	memset(out, 0, sizeof(*out));
	out->budget = budget;
	out->bytes = gc_kmeans_gpu_mem_bytes(n, d, k, n_init, weighted);
	if (weighted || (km_force_chunk <= 0 && out->bytes <= budget))
	{
		/* weighted: resident or not at all */
		out->fits = out->bytes <= budget;
		return;
	}
	out->streamed = true;
	if (cmax < blk)
		cmax = blk;
	if (cmax > nr)
		cmax = nr;
	if (km_force_chunk > 0)
	{
		c = (km_force_chunk + blk - 1) / blk * blk;
		if (c > nr)
			c = nr;
	}
	else
	{
		/* the largest multiple of KM_BLOCK that fits: bytes grow with c */
		const double fixed = km_stream_bytes(n, d, k, n_init, 0),
					per_row = km_stream_bytes(n, d, k, n_init, 1) - fixed;

		c = fixed >= (double) budget ? 0 :
			(int64_t) (((double) budget - fixed) / per_row) / blk * blk;
		if (c > cmax)
			c = cmax;
		while (c >= blk && km_stream_bytes(n, d, k, n_init, c) > (double) budget)
			c -= blk;
	}
	if (c < blk)
	{
		out->bytes = (size_t) km_stream_bytes(n, d, k, n_init, blk);
		out->chunk_rows = blk;
		out->chunks = (n + blk - 1) / blk;
		return;
	}
	out->fits = true;
	out->chunk_rows = c;
	out->chunks = (n + c - 1) / c;
	out->bytes = (size_t) km_stream_bytes(n, d, k, n_init, c);
}

/* A host buffer freed when it goes out of scope (after the km_dev declared
 * after it, whose streamed passes read it). */
struct km_host_rows
{
	float	   *p = nullptr;

	~km_host_rows()
	{
		free(p);
	}
};

/*
 * The fit (gc_kmeans_gpu; gc_kmeans_on_gpu has checked its arguments).
 * Under cosine the rows clustered are X's unit rows (gc_unit_rows, as
 * gc_kmeans_cpu): made on the device from X as given (km_setup) when X is
 * resident and seeded there, else on the host (its seeding, its streamed
 * passes), the same numbers either way.
 */
static gc_code
km_fit(const gc_ctx *ctx, const float *X, int64_t n, int d,
	   const gc_kmeans_params *p, gc_kmeans_result *res, gc_status *st)
{
	gc_code		rc;
	double		tol_scaled = 0.0;
	km_host_rows U;
	km_dev		D;
	const int	runs = gc_kmeans_runs(p);
	const bool	keep = runs > 1;
	int			best_cur = 0;
	double		t0 = gc_now_ms();
	gc_kmeans_gpu_plan plan = p->gpu_plan;

	memset(&km_last_phases, 0, sizeof(km_last_phases));
	if (plan.bytes == 0)
	{
		/* no plan given: one for gpu_mem, or for the free memory */
		size_t		budget = p->gpu_mem;

		if (budget == 0 && (rc = km_free_budget(&budget, st)) != GC_OK)
			return rc;
		gc_kmeans_gpu_plan_for(n, d, p->k, runs, p->weights != NULL, budget, &plan);
	}
	if (!plan.fits)
		return gc_fail(st, GC_ENOMEM,
					   p->weights != NULL ?
					   "GPU k-means: needs at least %zu MiB of GPU memory for its weighted rows, but may use %zu MiB" :
					   "GPU k-means: needs at least %zu MiB of GPU memory, even streaming its rows, but may use %zu MiB",
					   (plan.bytes >> 20) + 1, plan.budget >> 20);
	gc_report(ctx, GC_PHASE_UPLOAD, 0, p->max_iter, 0, runs, NAN);
	D.unit = p->metric == GC_METRIC_COSINE;
	D.hw = p->weights;
	if (D.unit)
	{
		const gc_kmeans_init init = p->init == GC_INIT_CENTROIDS ? GC_INIT_CENTROIDS :
			gc_km_init_resolve(p->init, n, d, p->k);

		D.unit_rows = !km_seeds_on_host(init, plan.streamed, p->weights != NULL);
		if (!D.unit_rows)
		{
			if ((U.p = (float *) malloc(sizeof(float) * (size_t) n * (size_t) d)) == NULL)
				return gc_fail(st, GC_ENOMEM, "k-means: out of memory for the unit rows of %lld rows",
							   (long long) n);
			gc_unit_rows(ctx, X, n, d, U.p);
			X = U.p;
		}
	}
	if ((rc = km_setup(D, X, n, d, p->k, keep, st,
					   plan.streamed ? plan.chunk_rows : 0, ctx)) != GC_OK)
		return rc;
	km_last_phases.ms_upload = gc_now_ms() - t0;
	km_last_phases.chunks = plan.streamed ? plan.chunks : 0;
	km_last_phases.chunk_rows = plan.streamed ? plan.chunk_rows : 0;
	km_last_phases.grid_cells = D.grid ? D.geo.ncell : 0;
	km_last_phases.screen_resident = D.screen_res;
	if (p->tol > 0.0)
	{
		double		mv;

		/* the means (pass 0) came with the features */
		if (D.streamed)
			rc = km_stream_variance(D, &mv, st);
		else if ((rc = km_var_blocks(D, 0, 1, st)) == GC_OK)
			rc = km_var_reduce(D, 1, &mv, st);
		if (rc != GC_OK)
			return rc;
		tol_scaled = p->tol * mv;
	}
	for (int run = 0; run < runs; run++)
	{
		double		inertia;
		int			iters,
					cur;
		bool		conv;

		if ((rc = km_run(D, ctx, X, p, run, tol_scaled, &cur, &inertia, &iters,
						 &conv, st)) != GC_OK)
			return rc;
		km_last_phases.total_iterations += iters;
		if (run == 0 || inertia < res->inertia)
		{
			res->inertia = inertia;
			res->iterations = iters;
			res->converged = conv;
			best_cur = cur;
			if (keep)
			{
				KM_CK(cudaMemcpyAsync(D.labels_best, D.labels, sizeof(int32_t) * n,
									  cudaMemcpyDeviceToDevice, D.s));
				KM_CK(cudaMemcpyAsync(D.C_best, D.C[cur], sizeof(float) * (size_t) p->k * d,
									  cudaMemcpyDeviceToDevice, D.s));
			}
		}
	}
	t0 = gc_now_ms();
	{
		const int32_t *lab = keep ? D.labels_best : D.labels;
		const float *C = keep ? D.C_best : D.C[best_cur];
		const float *Ca = C;
		const int	threads = gc_team_adapt(ctx);

		/* through transfer.cu's pinned ring */
		KM_CK(gc_xfer_d2h(res->labels, lab, sizeof(int32_t) * n, D.s, threads));
		KM_CK(gc_xfer_d2h(res->centroids, C, sizeof(float) * (size_t) p->k * d, D.s, threads));
		if (res->distance != NULL &&
			((rc = km_assign_centres(D, C, &Ca, st)) != GC_OK ||
			 (rc = D.streamed ? km_stream_distances(D, Ca, lab, res->distance, st) :
			  km_distances(D, Ca, lab, res->distance, st)) != GC_OK))
			return rc;
		KM_CK(cudaStreamSynchronize(D.s));
	}
	km_last_phases.ms_download = gc_now_ms() - t0;
	km_last_phases.passes = D.passes;
	km_last_phases.ms_passes = D.ms_passes;
	km_last_phases.gb_streamed = (double) D.passes * (double) n * d * 4 / 1e9;
	return GC_OK;
}

extern "C" gc_code
gc_kmeans_gpu(const gc_ctx *ctx, const float *X, int64_t n, int d,
			  const gc_kmeans_params *p, gc_kmeans_result *res, gc_status *st)
{
	if (n > INT32_MAX)
		return gc_fail(st, GC_EINVAL, "k-means: the GPU path takes at most %d rows, got %lld",
					   INT32_MAX, (long long) n);
	/* split over several GPUs (kmeans_multi.cu); weighted: on one */
	if (ctx != NULL && ctx->n_gpus > 1 && p->weights == NULL)
		return km_fit_multi(ctx, X, n, d, p, res, st);
	return km_fit(ctx, X, n, d, p, res, st);
}

/*
 * The labels of X for the given centres C: the fit's own assignment
 * (km_setup, km_prep, km_assign, with no bounds), so gc_km_assign's labels
 * bit for bit, as every Lloyd iteration of gc_kmeans_gpu.
 */
extern "C" gc_code
gc_kmeans_labels_gpu(const gc_ctx *ctx, const float *X, int64_t n, int d,
					 const float *C, int k, int32_t *labels, gc_status *st)
{
	km_dev		D;
	gc_code		rc;

	/* gc_kmeans_labels_on_gpu has checked the arguments: 1 <= k <= n */
	if (n > INT32_MAX)
		return gc_fail(st, GC_EINVAL, "k-means: the GPU path takes at most %d rows, got %lld",
					   INT32_MAX, (long long) n);
	if (gc_cancelled(ctx))
		return gc_fail(st, GC_ECANCEL, "canceled");
	if ((rc = km_setup(D, X, n, d, k, false, st, 0, ctx)) != GC_OK)
		return rc;
	D.prune_on = false;
	D.unit_centres = false;
	KM_CK(cudaMemcpyAsync(D.C[0], C, sizeof(float) * (size_t) k * d, cudaMemcpyHostToDevice, D.s));
	KM_CK(cudaMemsetAsync(D.labels, 0xff, sizeof(int32_t) * n, D.s));
	KM_CK(cudaMemsetAsync(D.info, 0, sizeof(km_info), D.s));
	if ((rc = km_prep(D, D.C[0], st)) != GC_OK ||
		(rc = km_assign(D, st)) != GC_OK)
		return rc;
	KM_CK(gc_xfer_d2h(labels, D.labels, sizeof(int32_t) * n, D.s, gc_team_adapt(ctx)));
	KM_CK(cudaStreamSynchronize(D.s));
	return GC_OK;
}
