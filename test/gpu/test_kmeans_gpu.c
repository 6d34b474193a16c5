/*
 * test_kmeans_gpu.c — the GPU k-means (cuda/kmeans.cu) against the CPU path
 * (src/core/kmeans*.c), on fresh random data of many shapes.  Needs a GPU.
 *
 *   seeding   k-means++ and random: the GPU's initial centres and rows equal
 *             the CPU's bit for bit, for the same seed and stream;
 *   one step  from the same centres: labels (all equal: both GPU paths
 *             reproduce the CPU's float32 argmin), changed count, and the
 *             centres and shift against the CPU update of the GPU's labels;
 *   full run  gc_kmeans_gpu vs gc_kmeans_cpu with the same parameters:
 *             labels on >= 99.9% of rows, inertia within 1e-5 relative; the
 *             GPU inertia and distances equal a CPU recomputation from the
 *             GPU's own labels and centres; labels match the returned
 *             centres; every output written (outputs are poisoned first);
 *   re-seeding data with many duplicate rows and random init, which makes
 *             empty clusters: GPU = CPU;
 *   streamed  X larger than the call's GPU memory (gc_kmeans_gpu_force_chunk,
 *             or a small gpu_mem budget): labels, centroids, inertia,
 *             distances, iterations and convergence equal the resident
 *             run's bit for bit, in several chunks (n not a multiple of
 *             the chunk; d <= 8 and the tiled path; the sort-by-label
 *             update; n_init > 1; tol 0 and > 0; empty-cluster re-seeding;
 *             one chunk, uploaded once);
 *             the plan (gc_kmeans_gpu_plan_for) and cancel between chunks;
 *   errors    bad parameters (GC_EINVAL), cancel flag (GC_ECANCEL), n = 0.
 *
 * GPUCLUST_TEST_SEED fixes the data; GPUCLUST_TEST_QUICK=1 runs a smaller
 * set (for compute-sanitizer), =2 a tiny one (for racecheck).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "kmeans_internal.h"
#include "gpu.h"

static uint64_t rs;
static int	quick;

static double
gauss(void)
{
	double		u = tu_uniform(&rs),
				v = tu_uniform(&rs);

	return sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v);
}

/* kind 0: blobs; 1: uniform; 2: blobs far from the origin; 3: duplicates. */
static float *
make_data(int64_t n, int d, int kind)
{
	float	   *X = malloc(sizeof(float) * n * d);
	int			m = 3 + (int) (tu_uniform(&rs) * 40);
	float	   *cent = malloc(sizeof(float) * m * d);
	double		sigma = 0.2 + 2.0 * tu_uniform(&rs);
	double		off = kind == 2 ? 1000.0 : 0.0;

	for (int i = 0; i < m * d; i++)
		cent[i] = (float) (20.0 * tu_uniform(&rs) - 10.0);
	for (int64_t i = 0; i < n; i++)
	{
		int			c = (int) (tu_uniform(&rs) * m);

		for (int j = 0; j < d; j++)
		{
			double		v;

			if (kind == 1)
				v = 10.0 * tu_uniform(&rs) - 5.0;
			else if (kind == 3)
				v = (double) (c % 5) + j;	/* 5 distinct rows */
			else
				v = off + cent[c * d + j] + sigma * gauss();
			X[i * d + j] = (float) v;
		}
	}
	free(cent);
	return X;
}

static double
dist2d(const float *a, const float *b, int d)
{
	double		s = 0.0;

	for (int j = 0; j < d; j++)
	{
		double		t = (double) a[j] - b[j];

		s += t * t;
	}
	return s;
}

/* ---- seeding ---- */
static void
test_seed(int64_t n, int d, int k, int kind)
{
	float	   *X = make_data(n, d, kind);
	float	   *Cc = malloc(sizeof(float) * k * d),
			   *Cg = malloc(sizeof(float) * k * d);
	int64_t    *rc_ = malloc(sizeof(int64_t) * k),
			   *rg = malloc(sizeof(int64_t) * k);
	uint64_t	seed = tu_next(&rs);
	gc_status	st = {0};

	for (int init = 0; init < 2; init++)
	{
		uint64_t	stream = init == 0 ? GC_KM_STREAM_KMEANSPP + 1 : GC_KM_STREAM_RANDOM;
		gc_code		a,
					b;

		memset(Cg, 0xff, sizeof(float) * k * d);
		memset(rg, 0xff, sizeof(int64_t) * k);
		if (init == 0)
			a = gc_km_init_kmeanspp(NULL, X, n, d, k, seed, stream, Cc, rc_, &st);
		else
			a = gc_km_init_random(NULL, X, n, d, k, seed, stream, Cc, rc_, &st);
		b = gc_kmeans_gpu_seed(NULL, X, n, d, k, init == 0 ? GC_INIT_KMEANSPP : GC_INIT_RANDOM,
							   seed, stream, Cg, init == 0 ? rg : NULL, &st);
		CHECK(a == GC_OK && b == GC_OK, "seed n=%lld d=%d k=%d: %s", (long long) n, d, k, st.message);
		if (a != GC_OK || b != GC_OK)
			continue;
		CHECK(memcmp(Cc, Cg, sizeof(float) * k * d) == 0,
			  "%s centres differ (n=%lld d=%d k=%d)", init == 0 ? "k-means++" : "random",
			  (long long) n, d, k);
		if (init == 0)
		{
			int			same = 1;

			for (int c = 0; c < k; c++)
				same &= rc_[c] == rg[c];
			CHECK(same, "k-means++ rows differ (n=%lld d=%d k=%d)", (long long) n, d, k);
		}
	}
	free(X);
	free(Cc);
	free(Cg);
	free(rc_);
	free(rg);
}

/* ---- one Lloyd step ---- */
static void
test_step(int64_t n, int d, int k, int kind)
{
	float	   *X = make_data(n, d, kind);
	float	   *C0 = malloc(sizeof(float) * k * d),
			   *Cc = malloc(sizeof(float) * k * d),
			   *Cr = malloc(sizeof(float) * k * d),
			   *Cg = malloc(sizeof(float) * k * d);
	int32_t    *lc = malloc(sizeof(int32_t) * n),
			   *lg = malloc(sizeof(int32_t) * n);
	float	   *d2 = malloc(sizeof(float) * n);
	gc_km_ws   *ws = gc_km_ws_create(n, d, k, 0);
	gc_status	st = {0};
	int64_t		chc = 0,
				chg = 0,
				diff = 0,
				nearties = 0;
	double		shc = 0,
				shg = 0,
				shr = 0,
				maxc = 0;
	int			cdiff = 0;

	gc_km_init_kmeanspp(NULL, X, n, d, k, tu_next(&rs), 0, C0, NULL, &st);
	for (int64_t i = 0; i < n; i++)
		lc[i] = -1;
	memset(lg, 0xa5, sizeof(int32_t) * n);
	memset(Cg, 0xff, sizeof(float) * k * d);
	CHECK(gc_km_assign(NULL, ws, X, n, d, C0, k, lc, d2, &chc, &st) == GC_OK, "cpu assign");
	CHECK(gc_km_update(NULL, ws, X, n, d, k, lc, d2, C0, Cc, &shc, NULL, &st) == GC_OK, "cpu update");
	CHECK(gc_kmeans_gpu_step(X, n, d, k, C0, lg, Cg, &shg, &chg, &st) == GC_OK,
		  "gpu step: %s", st.message);
	for (int64_t i = 0; i < n; i++)
		if (lg[i] != lc[i])
		{
			diff++;
			if (lg[i] >= 0 && lg[i] < k)
			{
				double		a = dist2d(X + i * d, C0 + (size_t) lc[i] * d, d),
							b = dist2d(X + i * d, C0 + (size_t) lg[i] * d, d);

				if (fabs(a - b) <= 1e-5 * (a + b) + 1e-30)
					nearties++;
			}
		}
	/* the GPU's centres against the CPU update of the GPU's own labels */
	CHECK(gc_km_update(NULL, ws, X, n, d, k, lg, d2, C0, Cr, &shr, NULL, &st) == GC_OK, "cpu update");
	for (int i = 0; i < k * d; i++)
	{
		double		t = fabs((double) Cg[i] - Cr[i]);

		cdiff += memcmp(&Cg[i], &Cr[i], sizeof(float)) != 0;
		if (!(t <= maxc))
			maxc = isnan(t) ? INFINITY : t;
	}
	CHECK(diff == 0, "step n=%lld d=%d k=%d kind=%d: %lld labels differ (%lld near ties)",
		  (long long) n, d, k, kind, (long long) diff, (long long) nearties);
	CHECK(diff <= n / 1000 && diff == nearties,
			  "step n=%lld d=%d k=%d kind=%d: %lld labels differ, %lld near ties",
			  (long long) n, d, k, kind, (long long) diff, (long long) nearties);
	CHECK(chg == chc, "step changed %lld vs %lld", (long long) chg, (long long) chc);
	CHECK(maxc <= 1e-6 * (kind == 2 ? 1000 : 10), "step centres differ by %g", maxc);
	CHECK(fabs(shg - shr) <= 1e-6 * shr + 1e-12, "step shift %.17g vs %.17g", shg, shr);
	if (diff == 0)
		CHECK(shc == shr, "cpu shift");
	printf("  step n=%-7lld d=%-3d k=%-4d kind=%d: labels differ %lld (near ties %lld), "
		   "centre coords not bitwise equal %d/%d, max |dC| %.3g\n",
		   (long long) n, d, k, kind, (long long) diff, (long long) nearties, cdiff, k * d, maxc);
	gc_km_ws_destroy(ws);
	free(X);
	free(C0);
	free(Cc);
	free(Cr);
	free(Cg);
	free(lc);
	free(lg);
	free(d2);
}

/* ---- full run ---- */
static void
test_full(int64_t n, int d, int k, int kind, gc_kmeans_init init, int n_init,
		  double tol)
{
	float	   *X = make_data(n, d, kind);
	gc_kmeans_params p = {.k = k, .max_iter = 300, .tol = tol,
		.init = init, .n_init = n_init, .seed = tu_next(&rs)};
	gc_kmeans_result rc_,
				rg;
	gc_status	st = {0};
	gc_code		a,
				b;
	int64_t		agree = 0,
				consistent = 0,
				inrange = 1,
				distok = 0;
	double		rel,
				recomputed = 0;
	int			finite = 1;
	int32_t    *lchk = malloc(sizeof(int32_t) * n);
	float	   *d2 = malloc(sizeof(float) * n);
	double	   *dist = malloc(sizeof(double) * n);
	gc_km_ws   *ws = gc_km_ws_create(n, d, k, 0);

	rc_.labels = malloc(sizeof(int32_t) * n);
	rc_.distance = malloc(sizeof(double) * n);
	rc_.centroids = malloc(sizeof(float) * k * d);
	rg.labels = malloc(sizeof(int32_t) * n);
	rg.distance = malloc(sizeof(double) * n);
	rg.centroids = malloc(sizeof(float) * k * d);
	/* poison */
	memset(rg.labels, 0xa5, sizeof(int32_t) * n);
	memset(rg.distance, 0xff, sizeof(double) * n);
	memset(rg.centroids, 0xff, sizeof(float) * k * d);
	rg.inertia = NAN;
	rg.iterations = -7;

	a = gc_kmeans_cpu(NULL, X, n, d, &p, &rc_, &st);
	CHECK(a == GC_OK, "cpu run: %s", st.message);
	b = gc_kmeans_gpu(NULL, X, n, d, &p, &rg, &st);
	CHECK(b == GC_OK, "gpu run n=%lld d=%d k=%d: %s", (long long) n, d, k, st.message);
	if (a != GC_OK || b != GC_OK)
		goto done;

	for (int i = 0; i < k * d; i++)
		finite &= isfinite(rg.centroids[i]);
	for (int64_t i = 0; i < n; i++)
	{
		inrange &= rg.labels[i] >= 0 && rg.labels[i] < k;
		agree += rg.labels[i] == rc_.labels[i];
	}
	CHECK(finite && inrange, "outputs not all written (n=%lld d=%d k=%d)", (long long) n, d, k);
	if (!(finite && inrange))
		goto done;
	rel = fabs(rg.inertia - rc_.inertia) / (rc_.inertia > 0 ? rc_.inertia : 1);
	CHECK(agree >= n - n / 1000, "full n=%lld d=%d k=%d kind=%d: labels agree on %lld of %lld",
		  (long long) n, d, k, kind, (long long) agree, (long long) n);
	CHECK(rel <= 1e-5, "full n=%lld d=%d k=%d kind=%d: inertia %.17g vs cpu %.17g (rel %.3g)",
		  (long long) n, d, k, kind, rg.inertia, rc_.inertia, rel);
	/* inertia and distances recomputed on the CPU from the GPU's output */
	gc_km_inertia(NULL, X, n, d, rg.centroids, rg.labels, dist, &recomputed, &st);
	CHECK(recomputed == rg.inertia, "gpu inertia %.17g, recomputed %.17g", rg.inertia, recomputed);
	for (int64_t i = 0; i < n; i++)
		distok += dist[i] == rg.distance[i];
	CHECK(distok == n, "distances: %lld of %lld equal the recomputation", (long long) distok, (long long) n);
	/* labels match the returned centres */
	for (int64_t i = 0; i < n; i++)
		lchk[i] = -1;
	gc_km_assign(NULL, ws, X, n, d, rg.centroids, k, lchk, d2, NULL, &st);
	for (int64_t i = 0; i < n; i++)
		consistent += lchk[i] == rg.labels[i];
	CHECK(consistent == n, "labels vs returned centres: %lld of %lld", (long long) consistent, (long long) n);
	printf("  full n=%-7lld d=%-3d k=%-4d kind=%d init=%d n_init=%d: agree %.5f%%, inertia rel %.2g, "
		   "iters gpu %d cpu %d, conv %d/%d\n",
		   (long long) n, d, k, kind, (int) init, n_init, 100.0 * agree / n, rel,
		   rg.iterations, rc_.iterations, rg.converged, rc_.converged);
done:
	gc_km_ws_destroy(ws);
	free(X);
	free(lchk);
	free(d2);
	free(dist);
	free(rc_.labels);
	free(rc_.distance);
	free(rc_.centroids);
	free(rg.labels);
	free(rg.distance);
	free(rg.centroids);
}

/* ---- streamed = resident, bit for bit ---- */
static void
km_alloc_result(gc_kmeans_result *r, int64_t n, int d, int k)
{
	r->labels = malloc(sizeof(int32_t) * n);
	r->distance = malloc(sizeof(double) * n);
	r->centroids = malloc(sizeof(float) * k * d);
	/* poison */
	memset(r->labels, 0xa5, sizeof(int32_t) * n);
	memset(r->distance, 0xff, sizeof(double) * n);
	memset(r->centroids, 0xff, sizeof(float) * k * d);
	r->inertia = NAN;
	r->iterations = -7;
}

static void
km_free_result(gc_kmeans_result *r)
{
	free(r->labels);
	free(r->distance);
	free(r->centroids);
}

/*
 * chunk > 0: streamed in chunks of that many rows (forced); chunk == 0:
 * through the plan, with budget bytes of GPU memory (gpu_mem).
 */
static void
test_stream(int64_t n, int d, int k, int kind, gc_kmeans_init init, int n_init,
			double tol, int64_t chunk, size_t budget)
{
	float	   *X = make_data(n, d, kind);
	gc_kmeans_params p = {.k = k, .max_iter = 300, .tol = tol,
		.init = init, .n_init = n_init, .seed = tu_next(&rs)};
	gc_kmeans_result rr,
				rs_;
	gc_kmeans_gpu_phases ph;
	gc_status	st = {0};
	gc_code		a,
				b;
	int64_t		lab = 0,
				dist = 0;

	km_alloc_result(&rr, n, d, k);
	km_alloc_result(&rs_, n, d, k);
	gc_kmeans_gpu_force_chunk(0);
	a = gc_kmeans_gpu(NULL, X, n, d, &p, &rr, &st);
	CHECK(a == GC_OK, "stream: resident run n=%lld d=%d k=%d: %s", (long long) n, d, k, st.message);
	gc_kmeans_gpu_last_phases(&ph);
	CHECK(ph.chunks == 0, "stream: the resident run streamed (%lld chunks)", (long long) ph.chunks);
	gc_kmeans_gpu_force_chunk(chunk);
	p.gpu_mem = budget;
	b = gc_kmeans_gpu(NULL, X, n, d, &p, &rs_, &st);
	gc_kmeans_gpu_force_chunk(0);
	CHECK(b == GC_OK, "stream: streamed run n=%lld d=%d k=%d: %s", (long long) n, d, k, st.message);
	gc_kmeans_gpu_last_phases(&ph);
	if (a == GC_OK && b == GC_OK)
	{
		for (int64_t i = 0; i < n; i++)
		{
			lab += rr.labels[i] == rs_.labels[i];
			dist += memcmp(&rr.distance[i], &rs_.distance[i], sizeof(double)) == 0;
		}
		/* several chunks, but for a forced chunk of all the rows */
		CHECK(ph.chunks >= (chunk >= n ? 1 : 2) && ph.chunk_rows % GC_KM_BLOCK == 0 &&
			  ph.chunks == (n + ph.chunk_rows - 1) / ph.chunk_rows,
			  "stream n=%lld d=%d k=%d: %lld chunks of %lld rows", (long long) n, d, k,
			  (long long) ph.chunks, (long long) ph.chunk_rows);
		/* one chunk is uploaded once and stays */
		CHECK(ph.chunks > 1 || ph.passes == 1, "stream: one chunk uploaded %d times", ph.passes);
		CHECK(lab == n, "stream n=%lld d=%d k=%d: labels equal on %lld of %lld",
			  (long long) n, d, k, (long long) lab, (long long) n);
		CHECK(dist == n, "stream n=%lld d=%d k=%d: distances equal on %lld of %lld",
			  (long long) n, d, k, (long long) dist, (long long) n);
		CHECK(memcmp(rr.centroids, rs_.centroids, sizeof(float) * k * d) == 0,
			  "stream n=%lld d=%d k=%d: centroids differ", (long long) n, d, k);
		CHECK(memcmp(&rr.inertia, &rs_.inertia, sizeof(double)) == 0,
			  "stream n=%lld d=%d k=%d: inertia %.17g vs resident %.17g",
			  (long long) n, d, k, rs_.inertia, rr.inertia);
		CHECK(rr.iterations == rs_.iterations && rr.converged == rs_.converged,
			  "stream n=%lld d=%d k=%d: iterations %d/%d, converged %d/%d", (long long) n, d, k,
			  rs_.iterations, rr.iterations, rs_.converged, rr.converged);
		printf("  stream n=%-7lld d=%-3d k=%-4d kind=%d init=%d n_init=%d tol=%g: %lld chunks of %lld rows "
			   "(%s), %d passes, iters %d, labels/distances equal %lld/%lld of %lld\n",
			   (long long) n, d, k, kind, (int) init, n_init, tol, (long long) ph.chunks,
			   (long long) ph.chunk_rows, chunk > 0 ? "forced" : "planned", ph.passes,
			   rs_.iterations, (long long) lab, (long long) dist, (long long) n);
	}
	free(X);
	km_free_result(&rr);
	km_free_result(&rs_);
}

/* The plan, and cancel between the chunks of a streamed pass. */
static void
test_stream_plan(void)
{
	gc_kmeans_gpu_plan pl;
	float	   *X = make_data(50000, 4, 0);
	gc_kmeans_params p = {.k = 5, .max_iter = 10, .tol = 1e-4,
		.init = GC_INIT_RANDOM, .n_init = 1, .seed = 3};
	gc_kmeans_result r;
	gc_status	st = {0};
	volatile sig_atomic_t flag = 1;
	gc_ctx		ctx = {.n_threads = 0, .cancel_flags = {&flag, NULL}};

	gc_kmeans_gpu_plan_for(1000000, 32, 100, 1, (size_t) 80 << 30, &pl);
	CHECK(pl.fits && !pl.streamed && pl.bytes == gc_kmeans_gpu_mem_bytes(1000000, 32, 100, 1),
		  "plan: resident in 80 GiB");
	gc_kmeans_gpu_plan_for(1000000, 32, 100, 1, (size_t) 100 << 20, &pl);
	CHECK(pl.fits && pl.streamed && pl.chunk_rows % GC_KM_BLOCK == 0 && pl.chunks >= 2 &&
		  pl.bytes <= ((size_t) 100 << 20) &&
		  pl.chunks == (1000000 + pl.chunk_rows - 1) / pl.chunk_rows,
		  "plan: streamed in 100 MiB: %lld chunks of %lld rows, %zu bytes",
		  (long long) pl.chunks, (long long) pl.chunk_rows, pl.bytes);
	printf("  plan 1M x 32, k 100 in 100 MiB: %lld chunks of %lld rows, %.1f MiB\n",
		   (long long) pl.chunks, (long long) pl.chunk_rows, pl.bytes / 1048576.0);
	gc_kmeans_gpu_plan_for(1000000, 32, 100, 1, (size_t) 1 << 20, &pl);
	CHECK(!pl.fits && pl.bytes > ((size_t) 1 << 20), "plan: not even streamed in 1 MiB");
	gc_kmeans_gpu_plan_for(INT64_C(640000000), 32, 100, 1, (size_t) 76 << 30, &pl);
	CHECK(pl.fits && pl.streamed, "plan: 640M x 32 streamed in 76 GiB");
	printf("  plan 640M x 32, k 100 in 76 GiB: %lld chunks of %lld rows, %.1f MiB\n",
		   (long long) pl.chunks, (long long) pl.chunk_rows, pl.bytes / 1048576.0);
	/* a budget too small for the call itself */
	p.gpu_mem = (size_t) 1 << 20;
	km_alloc_result(&r, 50000, 4, 5);
	CHECK(gc_kmeans_gpu(NULL, X, 50000, 4, &p, &r, &st) == GC_ENOMEM,
		  "stream: 1 MiB budget: %s", st.message);
	printf("  1 MiB budget: %s\n", st.message);
	p.gpu_mem = 0;
	gc_kmeans_gpu_force_chunk(GC_KM_BLOCK);
	CHECK(gc_kmeans_gpu(&ctx, X, 50000, 4, &p, &r, &st) == GC_ECANCEL,
		  "stream: cancel: %d %s", st.code, st.message);
	gc_kmeans_gpu_force_chunk(0);
	km_free_result(&r);
	free(X);
}

static void
test_errors(void)
{
	float		X[20] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5};
	int32_t		lab[10];
	float		C[20];
	gc_kmeans_params p = {.k = 3, .max_iter = 10, .tol = 1e-4,
		.init = GC_INIT_KMEANSPP, .n_init = 1, .seed = 1};
	gc_kmeans_result r = {lab, NULL, C, 0, 0, 0};
	gc_status	st = {0};
	volatile sig_atomic_t flag = 1;
	gc_ctx		ctx = {.n_threads = 0, .cancel_flags = {&flag, NULL}};

	p.k = 11;
	CHECK(gc_kmeans_gpu(NULL, X, 10, 2, &p, &r, &st) == GC_EINVAL, "k > n");
	p.k = 0;
	CHECK(gc_kmeans_gpu(NULL, X, 10, 2, &p, &r, &st) == GC_EINVAL, "k = 0");
	p.k = 3;
	p.tol = -1;
	CHECK(gc_kmeans_gpu(NULL, X, 10, 2, &p, &r, &st) == GC_EINVAL, "tol < 0");
	p.tol = 1e-4;
	CHECK(gc_kmeans_gpu(NULL, X, 0, 2, &p, &r, &st) == GC_OK, "n = 0");
	CHECK(gc_kmeans_gpu(&ctx, X, 10, 2, &p, &r, &st) == GC_ECANCEL, "cancel: %d %s", st.code, st.message);
	CHECK(gc_kmeans_gpu(NULL, X, 10, 2, &p, &r, &st) == GC_OK, "after cancel: %s", st.message);
}

/* Device choice (dispatch.c) on a machine with a usable GPU. */
static void
test_dispatch(void)
{
	gc_device	ch;
	gc_status	st = {0};
	char		note[256];
	gc_cuda_device_info info;
	gc_gpu		g0,
				g1000;

	gc_gpu_local(&g0, 0);
	gc_gpu_local(&g1000, 1000);
	CHECK(gc_choose_device_kmeans(GC_DEVICE_CPU, 1000000, 32, 100, 1, NULL, &g0, &ch, note,
								  sizeof(note), &st) == GC_OK && ch == GC_DEVICE_CPU, "cpu");
	/* what only the CPU k-means has: auto is the CPU, gpu refuses */
	CHECK(gc_choose_device_kmeans(GC_DEVICE_GPU, 1000000, 32, 100, 1, "sample weights", &g0, &ch,
								  note, sizeof(note), &st) == GC_EDEVICE &&
		  strstr(st.message, "sample weights") != NULL, "gpu, weights: %s", st.message);
	CHECK(gc_choose_device_kmeans(GC_DEVICE_AUTO, 1000000, 32, 100, 1, "initial centroids", &g0, &ch,
								  note, sizeof(note), &st) == GC_OK && ch == GC_DEVICE_CPU &&
		  note[0] == '\0', "auto, initial centroids: cpu");
	CHECK(gc_choose_device_kmeans(GC_DEVICE_GPU, 10, 2, 2, 1, NULL, &g0, &ch, note,
								  sizeof(note), &st) == GC_OK && ch == GC_DEVICE_GPU, "gpu, tiny");
	CHECK(gc_choose_device_kmeans(GC_DEVICE_AUTO, 10, 2, 2, 1, NULL, &g0, &ch, note,
								  sizeof(note), &st) == GC_OK && ch == GC_DEVICE_CPU &&
		  note[0] == '\0', "auto, tiny: cpu");
	CHECK(gc_choose_device_kmeans(GC_DEVICE_AUTO, 1000000, 32, 100, 1, NULL, &g0, &ch, note,
								  sizeof(note), &st) == GC_OK && ch == GC_DEVICE_GPU, "auto, large: gpu");
	/* more than any GPU's memory: gpu refuses, auto runs on the CPU and says why */
	CHECK(gc_choose_device_kmeans(GC_DEVICE_GPU, INT64_C(2000000000), 40000, 100, 1, NULL, &g0, &ch,
								  note, sizeof(note), &st) == GC_ENOMEM, "gpu, too big: %s", st.message);
	printf("  gpu, too big: %s\n", st.message);
	CHECK(gc_choose_device_kmeans(GC_DEVICE_AUTO, INT64_C(2000000000), 40000, 100, 1, NULL, &g0, &ch,
								  note, sizeof(note), &st) == GC_OK && ch == GC_DEVICE_CPU &&
		  note[0] != '\0', "auto, too big: cpu with a note");
	/* larger than the GPU's memory but streamed: the GPU */
	CHECK(gc_choose_device_kmeans(GC_DEVICE_GPU, INT64_C(2000000000), 100, 100, 1, NULL, &g0, &ch,
								  note, sizeof(note), &st) == GC_OK && ch == GC_DEVICE_GPU,
		  "gpu, 2e9 x 100 streamed: %s", st.message);
	/* gpuclust.gpu_memory_limit (gc_gpu.mem_limit): streamed within it, or the CPU */
	g0.mem_limit = (size_t) 100 << 20;
	CHECK(gc_choose_device_kmeans(GC_DEVICE_AUTO, 1000000, 32, 100, 1, NULL, &g0, &ch, note,
								  sizeof(note), &st) == GC_OK && ch == GC_DEVICE_GPU,
		  "auto, 100 MiB limit: gpu (streamed)");
	g0.mem_limit = (size_t) 16 << 20;
	CHECK(gc_choose_device_kmeans(GC_DEVICE_GPU, 1000000, 32, 100, 1, NULL, &g0, &ch, note,
								  sizeof(note), &st) == GC_ENOMEM, "gpu, 16 MiB limit: %s", st.message);
	printf("  gpu, 16 MiB limit: %s\n", st.message);
	CHECK(gc_choose_device_kmeans(GC_DEVICE_AUTO, 1000000, 32, 100, 1, NULL, &g0, &ch, note,
								  sizeof(note), &st) == GC_OK && ch == GC_DEVICE_CPU && note[0] != '\0',
		  "auto, 16 MiB limit: cpu with a note");
	CHECK(gc_gpu_budget(&g0) == ((size_t) 16 << 20), "budget: the limit");
	g0.mem_limit = 0;
	CHECK(gc_choose_device_kmeans(GC_DEVICE_GPU, 1000, 2, 2, 1, NULL, &g1000, &ch, note,
								  sizeof(note), &st) == GC_EDEVICE, "gpu, no such device");
	printf("  gpu, device 1000: %s\n", st.message);
	gc_cuda_probe_cached(0, &info);
	CHECK(info.usable && info.free_mem > 0, "cached probe after another id");
	CHECK(gc_kmeans_gpu_mem_bytes(1000000, 32, 100, 1) > (size_t) 1000000 * 32 * 4,
		  "memory estimate");
}

int
main(void)
{
	gc_cuda_device_info info;

	quick = getenv("GPUCLUST_TEST_QUICK") != NULL;
	rs = tu_seed();
	printf("test_kmeans_gpu: seed %llu%s\n", (unsigned long long) rs, quick ? " (quick)" : "");
	gc_cuda_probe(0, &info);
	if (!info.usable)
	{
		printf("no usable GPU: %s\n", info.reason);
		return 1;
	}
	printf("device: %s, cc %d.%d\n", info.name, info.cc_major, info.cc_minor);

	test_errors();
	test_dispatch();
	/* the smallest problems: n = 1, and k = n (every launch sized from n, k, d >= 1) */
	test_full(1, 3, 1, 0, GC_INIT_KMEANSPP, 1, 1e-4);
	test_full(5, 2, 5, 1, GC_INIT_RANDOM, 1, 1e-4);
	test_full(7, 40, 7, 0, GC_INIT_KMEANSPP, 2, 1e-4);
	if (quick && atoi(getenv("GPUCLUST_TEST_QUICK")) >= 2)
	{
		test_seed(3000, 3, 6, 0);
		test_step(3000, 2, 5, 0);
		test_step(3000, 20, 40, 1);
		test_step(2000, 10, 9, 3);
		test_step(2000, 200, 110, 0);	/* sort-by-label update */
		test_full(2000, 3, 4, 0, GC_INIT_KMEANSPP, 1, 1e-3);
		test_full(2000, 12, 6, 0, GC_INIT_KMEANSPP, 1, 1e-3);
		test_stream(10000, 3, 4, 0, GC_INIT_KMEANSPP, 1, 1e-3, GC_KM_BLOCK, 0);
		test_stream(10000, 12, 6, 3, GC_INIT_RANDOM, 2, 1e-3, GC_KM_BLOCK, 0);
		return test_summary("test_kmeans_gpu");
	}

	test_seed(1000, 2, 10, 0);
	test_seed(30011, 3, 50, 1);
	test_seed(9000, 17, 33, 0);
	if (!quick)
	{
		test_seed(100000, 64, 100, 0);
		test_seed(50000, 1, 7, 2);
	}

	{
		static const int shapes[][4] = {
			/* n, d, k, kind */
			{5000, 2, 7, 0}, {20000, 3, 64, 1}, {12345, 1, 5, 0}, {30000, 8, 100, 0},
			{25000, 5, 300, 1}, {10000, 9, 17, 0}, {20000, 16, 130, 1}, {15000, 33, 256, 0},
			{8000, 64, 40, 2}, {6000, 130, 300, 0}, {50000, 32, 1, 0}, {40000, 4, 1100, 1},
			{200000, 2, 100, 1}, {100000, 32, 256, 1}, {50000, 128, 1000, 0},
		};
		int			ns = sizeof(shapes) / sizeof(shapes[0]);

		for (int s = 0; s < ns; s++)
		{
			if (quick && shapes[s][0] > 30000)
				continue;
			test_step(shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3]);
		}
		for (int s = 0; s < ns; s++)
		{
			if (quick && shapes[s][0] > 30000)
				continue;
			if (shapes[s][0] * (int64_t) shapes[s][2] * shapes[s][1] > 2000000000LL)
				continue;		/* CPU reference too slow */
			test_full(shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3],
					  GC_INIT_KMEANSPP, 1, 1e-4);
		}
	}
	test_full(20000, 2, 9, 0, GC_INIT_RANDOM, 3, 1e-4);
	test_full(10000, 12, 20, 0, GC_INIT_RANDOM, 2, 0.0);
	/* duplicates: random init picks equal rows, so clusters go empty */
	test_full(3000, 2, 12, 3, GC_INIT_RANDOM, 2, 1e-4);
	test_full(3000, 11, 12, 3, GC_INIT_RANDOM, 2, 1e-4);
	test_step(4000, 3, 9, 3);
	test_step(4000, 10, 9, 3);

	/* streamed = resident (forced chunks, or a budget that needs them) */
	test_stream_plan();
	test_stream(quick ? 60000 : 1000000, 2, 20, 0, GC_INIT_KMEANSPP, 1, 1e-4,
				quick ? 3 * GC_KM_BLOCK : 61 * GC_KM_BLOCK, 0);
	test_stream(quick ? 50000 : 1000000, 32, 100, 0, GC_INIT_KMEANSPP, 1, 1e-4,
				quick ? 2 * GC_KM_BLOCK : 0, quick ? 0 : (size_t) 100 << 20);
	test_stream(quick ? 40000 : 300000, 12, 40, 1, GC_INIT_RANDOM, 3, 0.0,
				7 * GC_KM_BLOCK + 5, 0);
	test_stream(quick ? 20000 : 200000, 200, 120, 0, GC_INIT_KMEANSPP, 2, 1e-4,
				quick ? 2 * GC_KM_BLOCK : 9 * GC_KM_BLOCK, 0);	/* sort-by-label update */
	test_stream(quick ? 30000 : 100000, 7, 300, 2, GC_INIT_KMEANSPP, 1, 1e-4,
				3 * GC_KM_BLOCK, 0);
	/* one chunk: the data fit, the resident path's scratch does not */
	test_stream(30000, 12, 20, 0, GC_INIT_KMEANSPP, 2, 1e-4, 8 * GC_KM_BLOCK, 0);
	/* duplicates: empty clusters re-seeded across chunks */
	test_stream(20000, 2, 12, 3, GC_INIT_RANDOM, 2, 1e-4, GC_KM_BLOCK, 0);
	test_stream(20000, 11, 12, 3, GC_INIT_RANDOM, 2, 1e-4, 2 * GC_KM_BLOCK, 0);

	return test_summary("test_kmeans_gpu");
}
