/*
 * test_kmeans_gpu.c — the GPU k-means (cuda/kmeans/kmeans.cu) against the CPU path
 * (src/core/kmeans*.c), on fresh random data of many shapes.  Needs a GPU.
 *
 *   seeding   k-means++, random, k-means|| and auto: the GPU's initial
 *             centres and rows equal the CPU's bit for bit, for the same
 *             seed and stream, d 1 to 128, k 1 to 1000, duplicates;
 *   one step  from the same centres: labels (all equal: both GPU paths
 *             reproduce the CPU's float32 argmin), changed count, and the
 *             centres and shift against the CPU update of the GPU's labels;
 *   full run  gc_kmeans_gpu vs gc_kmeans_cpu with the same parameters:
 *             labels on >= 99.9% of rows, inertia within 1e-5 relative; the
 *             GPU inertia and distances equal a CPU recomputation from the
 *             GPU's own labels and centres; labels match the returned
 *             centres; every output written (outputs are poisoned first);
 *   re-seeding data with many duplicate rows and random init, which makes
 *             empty clusters: GPU = CPU; hand-made steps (a row on its
 *             centre seeds no cluster): GPU = CPU bit for bit;
 *   screen    the tensor-core screen (d > 8, cuda/kmeans/kmeans_screen.cu and,
 *             on an H100/H200, cuda/kmeans/kmeans_wgmma.cu): every score within
 *             the derived bound of the exact ||c'||² - 2x'.c' (FP16 on
 *             wgmma where there is one, tf32 on mma.sync, 3xtf32; the
 *             largest error as a fraction of the bound is printed); one
 *             step's labels equal the CPU's in each mode (tf32, tf32 on
 *             mma.sync and FP16 on wgmma at every d, 3xtf32, the FP32 tiled
 *             kernel), on near ties too (groups of 2, 12 and 40 centres 1
 *             ulp apart or equal, rows on and between them: windows that
 *             hold the group and windows that overflow);
 *   streamed  X larger than the call's GPU memory (gc_kmeans_gpu_force_chunk,
 *             or a small gpu_mem budget): labels, centroids, inertia,
 *             distances, iterations and convergence equal the resident
 *             run's bit for bit, in several chunks (n not a multiple of
 *             the chunk; d <= 8 and the tiled path; the sort-by-label
 *             update; n_init > 1; tol 0 and > 0; empty-cluster re-seeding;
 *             one chunk, uploaded once);
 *             the plan (gc_kmeans_gpu_plan_for) and cancel between chunks;
 *   errors    bad parameters (GC_EINVAL), cancel flag (GC_ECANCEL), n = 0;
 *   multi     one fit split over two or three GPUs (ctx->n_gpus; GPU 0
 *             twice on a machine of one): labels, centroids, distances,
 *             inertia, iterations and convergence equal one GPU's bit for
 *             bit, for every assignment path (grid, d <= 8, the screen
 *             with bounds, wgmma and the sort-by-label update, d > 256),
 *             k-means++ and k-means|| over the shards (the latter's
 *             fallback to k-means++ with fewer candidates than k too),
 *             random, auto and given centroids, cosine, tol 0 and > 0,
 *             n_init > 1, a budget smaller than the whole problem,
 *             empty clusters re-seeded, n of one or two blocks;
 *   concurrent four calls of different shapes at once on four threads, as
 *             the GPU worker runs jobs (their kernels' shared memory of
 *             different sizes), each repeated: every run succeeds and
 *             equals the same call made alone, bit for bit;
 *   labels    gc_kmeans_labels_on_gpu (kmeans_step's labels for given centres)
 *             = gc_kmeans_labels_cpu = gc_km_nearest on every row, through
 *             the grid, k_assign_small, the screen (every mode, windows
 *             and cascade) and the tiled kernel, d 1 to 1000, k 1 to 2000,
 *             n k to 300k, exact ties (duplicate centres, rows on centres,
 *             lattice data, centres 1 ulp apart), far and huge values; bad
 *             arguments (k > n, n = 0, ...: GC_EINVAL).
 *
 * Arguments name suites to run alone (test_kmeans_gpu labels multi); none runs
 * every test, labels included.  GPUCLUST_TEST_SEED fixes the data;
 * GPUCLUST_TEST_QUICK=1 runs a smaller set (for compute-sanitizer), =2 a
 * tiny one (for racecheck).
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "kmeans/kmeans_internal.h"
#include "common/gpu.h"
#include "multi_gpus.h"

static uint64_t rs;
static int	quick;

static double
gauss(void)
{
	double		u = tu_uniform(&rs),
				v = tu_uniform(&rs);

	return sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v);
}

/* kind 0: blobs; 1: uniform; 2: blobs far from the origin; 3: duplicates;
 * 4: blobs with a constant first feature; 5: a range of a few float
 * steps far from the origin (1000 + [0, 1e-3): about 16 values a feature);
 * 6: blobs and one far outlier (the last row, 1e6 on every feature);
 * 7: blobs, then the second half one row repeated; 8: a small integer
 * lattice (many distances exactly equal). */
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
			else if (kind == 4 && j == 0)
				v = 7.25;
			else if (kind == 5)
				v = 1000.0 + 1e-3 * tu_uniform(&rs);
			else if (kind == 6 && i == n - 1)
				v = 1e6;
			else if (kind == 3)
				v = (double) (c % 5) + j;	/* 5 distinct rows */
			else if (kind == 7 && i >= n / 2)
				v = 3.5;		/* the second half one row: a shard of it draws none */
			else if (kind == 8)
				v = (double) ((int) (tu_uniform(&rs) * 4) - 2);
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
static const char *const init_name[] = {"k-means++", "random", "centroids", "k-means||", "auto"};

/*
 * The same seed and stream give bit-identical centres (and, for k-means++
 * and k-means||, rows) on the CPU (gc_km_init_*) and the GPU
 * (gc_kmeans_gpu_seed), for every init; 'auto' as its resolution.
 */
static void
test_seed(int64_t n, int d, int k, int kind)
{
	static const gc_kmeans_init inits[] = {GC_INIT_KMEANSPP, GC_INIT_RANDOM,
	GC_INIT_KMEANS_PARALLEL, GC_INIT_AUTO};
	float	   *X = make_data(n, d, kind);
	float	   *Cc = malloc(sizeof(float) * k * d),
			   *Cg = malloc(sizeof(float) * k * d);
	int64_t    *rc_ = malloc(sizeof(int64_t) * k),
			   *rg = malloc(sizeof(int64_t) * k);
	uint64_t	seed = tu_next(&rs);
	gc_status	st = {0};

	for (int v = 0; v < 4; v++)
	{
		const gc_kmeans_init init = inits[v],
					res = gc_km_init_resolve(init, n, d, k);
		uint64_t	stream = gc_km_init_stream(res, 1);
		bool		rows = res != GC_INIT_RANDOM;
		gc_code		a,
					b;

		if (k * (double) n * d * (res == GC_INIT_KMEANSPP ? 2 + log(k) : 10) > 4e10)
			continue;			/* the CPU's seeding would take too long */
		if (res == GC_INIT_KMEANSPP)
			a = gc_km_init_kmeanspp(NULL, X, n, d, k, seed, stream, Cc, rc_, &st);
		else if (res == GC_INIT_RANDOM)
			a = gc_km_init_random(NULL, X, n, d, k, seed, stream, Cc, rc_, &st);
		else
			a = gc_km_init_kmeans_par(NULL, X, n, d, k, seed, stream, Cc, rc_, &st);
		if (a != GC_OK)
		{
			CHECK(0, "seed %s n=%lld d=%d k=%d: cpu: %s", init_name[init], (long long) n, d, k, st.message);
			continue;
		}
		/*
		 * k-means++ on the GPU as by default (pm 0), persistent (1), four
		 * kernels a centre unscreened with the trials' terms stored where
		 * they are by default recomputed (lean), and the reverse (2), and
		 * screened at any d (3); k-means||'s rounds with the screens' cut
		 * (kmeans_par.cu) but in 2, where every row is merged
		 */
		for (int pm = 0; pm < 4; pm++)
		{
			setenv("GPUCLUST_KM_PP_PERSIST", pm == 1 ? "1" : "0", 1);
			if (pm == 2)
			{
				setenv("GPUCLUST_KM_PP_LEAN", d <= 32 ? "0" : "1", 1);
				setenv("GPUCLUST_KM_PP_SCREEN", "0", 1);
				setenv("GPUCLUST_KM_PAR_CUT", "0", 1);
			}
			if (pm == 3)
			{
				unsetenv("GPUCLUST_KM_PP_LEAN");
				setenv("GPUCLUST_KM_PP_SCREEN", "1", 1);
				unsetenv("GPUCLUST_KM_PAR_CUT");
			}
			memset(Cg, 0xff, sizeof(float) * k * d);
			memset(rg, 0xff, sizeof(int64_t) * k);
			b = gc_kmeans_gpu_seed(NULL, X, n, d, k, init, seed, stream, Cg, rows ? rg : NULL, &st);
			CHECK(b == GC_OK, "seed %s n=%lld d=%d k=%d (mode %d): %s", init_name[init],
				  (long long) n, d, k, pm, st.message);
			if (b != GC_OK)
				continue;
			CHECK(memcmp(Cc, Cg, sizeof(float) * k * d) == 0,
				  "%s centres differ (n=%lld d=%d k=%d kind %d, mode %d)", init_name[init],
				  (long long) n, d, k, kind, pm);
			if (rows)
			{
				int			same = 1;

				for (int c = 0; c < k; c++)
					same &= rc_[c] == rg[c];
				CHECK(same, "%s rows differ (n=%lld d=%d k=%d kind %d, mode %d)", init_name[init],
					  (long long) n, d, k, kind, pm);
			}
			if (res == GC_INIT_RANDOM)
				break;			/* no k-means++ in it */
		}
		unsetenv("GPUCLUST_KM_PP_PERSIST");
		unsetenv("GPUCLUST_KM_PP_LEAN");
		unsetenv("GPUCLUST_KM_PP_SCREEN");
		unsetenv("GPUCLUST_KM_PAR_CUT");
	}
	free(X);
	free(Cc);
	free(Cg);
	free(rc_);
	free(rg);
}

/* The seedings alone, small enough for compute-sanitizer (every path). */
static void
test_seed_suite(void)
{
	test_seed(3000, 5, 20, 0);
	test_seed(20011, 17, 40, 0);
	test_seed(1000, 3, 30, 3);	/* duplicates */
	test_seed(600001, 2, 8, 0); /* rows a thread (from 2 x 8 x 256 an SM) */
	/* screened: 16-row tiles part full, k-steps part full, 1 to 9 k-steps
	 * (8, 4, 2 and 1 tiles a warp at once), 2 groups of 8 trials, a far
	 * outlier (a small scale), a narrow range far from the origin, ties on
	 * a lattice, duplicates, blobs far from the origin */
	test_seed(70001, 33, 64, 0);
	test_seed(3001, 16, 1200, 1);	/* L = 9: two groups of trials */
	test_seed(20011, 40, 30, 6);
	test_seed(12007, 24, 50, 5);
	test_seed(15013, 19, 60, 8);
	test_seed(8009, 130, 40, 3);
	test_seed(6007, 72, 30, 2);
}

/*
 * k-means++'s persistent path (pp_persist) on a few small shapes, for
 * the sanitizers (memcheck takes seconds; racecheck more than 330 s): one
 * tile a block and several, a launch and more (k > 64), 1 to 5 groups of
 * 2 trials, d past the 128 dimensions a warp loads of the trials' rows at
 * once, weighted (k-means||'s reduction), duplicates.
 */
static void
test_persist_suite(void)
{
	test_seed(2000, 3, 6, 0);
	test_seed(9001, 33, 70, 3);
	test_seed(1500, 130, 20, 1);
	test_seed(3500, 4, 3000, 2);	/* L = 10: 5 groups */
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
	CHECK(maxc <= 1e-6 * (kind == 2 || kind == 5 ? 1000 : 10), "step centres differ by %g", maxc);
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

/*
 * Re-seeding in hand-made steps, the CPU update the reference bit for
 * bit: an empty cluster takes the farthest row off its centre (d2 > 0),
 * never one on its centre, so empty clusters past the rows off their
 * centres keep their centres (the device's keys run out).
 */
static void
test_reseed_steps(void)
{
	static const struct
	{
		int			n,
					k,
					nrel;
		float		X[7],
					C[4],
					want[4];
	}			cases[] = {
		/* the 100s tie to centre 1; centre 2 takes row 2 (d2 4), not a 100 */
		{7, 3, 1, {100, 100, 0, 1, 2, 3, 4}, {2, 100, 100}, {2.5f, 100, 0}},
		/* three empty clusters, one row off its centre (k <= n, as a fit) */
		{4, 4, 1, {0, 0, 0, 5}, {0, 0, 0, 0}, {0, 5, 0, 0}},
		/* every row on its centre: nothing to re-seed */
		{4, 3, 0, {0, 0, 1, 1}, {0, 1, 1}, {0, 1, 1}},
	};

	for (size_t t = 0; t < sizeof(cases) / sizeof(cases[0]); t++)
	{
		const int	n = cases[t].n,
					k = cases[t].k;
		gc_km_ws   *ws = gc_km_ws_create(n, 1, k, 0);
		gc_status	st = {0};
		int32_t		lc[7],
					lg[7];
		float		d2[7],
					Cc[4],
					Cg[4];
		double		shc = 0,
					shg = 0;
		int64_t		chc = 0,
					chg = 0;
		int			nrel = -1;

		for (int i = 0; i < n; i++)
			lc[i] = -1;
		gc_km_assign(NULL, ws, cases[t].X, n, 1, cases[t].C, k, lc, d2, &chc, &st);
		gc_km_update(NULL, ws, cases[t].X, n, 1, k, lc, d2, cases[t].C, Cc, &shc, &nrel, &st);
		CHECK(nrel == cases[t].nrel && memcmp(Cc, cases[t].want, sizeof(float) * k) == 0,
			  "re-seeding case %zu: cpu re-seeded %d, want %d", t, nrel, cases[t].nrel);
		CHECK(gc_kmeans_gpu_step(cases[t].X, n, 1, k, cases[t].C, lg, Cg, &shg, &chg, &st) == GC_OK,
			  "re-seeding case %zu: gpu step: %s", t, st.message);
		CHECK(memcmp(lg, lc, sizeof(int32_t) * n) == 0 && memcmp(Cg, Cc, sizeof(float) * k) == 0 &&
			  shg == shc && chg == chc,
			  "re-seeding case %zu: gpu step differs from the cpu (centre 0: %g vs %g, shift %g vs %g)",
			  t, Cg[0], Cc[0], shg, shc);
		gc_km_ws_destroy(ws);
	}
}

/* ---- the tensor-core screen ---- */

/* TF32 rounding as cvt.rna.tf32.f32: to 10 mantissa bits, ties away. */
static float
tf32_rna(float x)
{
	uint32_t	b;

	memcpy(&b, &x, 4);
	if ((b & 0x7f800000u) != 0x7f800000u)
		b = (b + 0x1000u) & 0xffffe000u;
	memcpy(&x, &b, 4);
	return x;
}

/* FP16 rounding (to nearest even, 10 mantissa bits; multiples of 2^-24
 * below 2^-14) of s x, unscaled: kmeans_wgmma.cu's operands. */
static float
f16_scaled(float x, float s)
{
	const float y = x * s;
	float		r;

	if (fabsf(y) < 0x1.0p-14f)
		r = rintf(y * 0x1.0p24f) * 0x1.0p-24f;
	else
	{
		uint32_t	b;

		memcpy(&b, &y, 4);
		b = (b + 0xfffu + ((b >> 13) & 1u)) & 0xffffe000u;
		memcpy(&r, &b, 4);
	}
	return r / s;
}

/* The screen's rounding of an operand: TF32, or FP16 at scale s > 0. */
static float
screen_round(float x, float s)
{
	return s > 0 ? f16_scaled(x, s) : tf32_rna(x);
}

/*
 * Every screened score against the exact s = ||c'||² - 2 x'.c' (x' = x - mu,
 * c' = c - mu in float, as the kernel forms them; s in long double): the
 * error must stay within (kappa/2 + (d + 1.01) u) M², M = ||x'|| + max ||c'||
 * (kmeans_screen.cu's derivation, restated here); in tf32 also within the
 * half of kmeans_wgmma.cu's measured form, 2E + (d + 1.01) u M², E =
 * (1 + 2^-11) (||x'|| dC + ||dx|| C) + ||dx|| dC + 4du (1 + 2^-10) ||x'|| C
 * (dx = x' - R(x'), dC = max ||c' - R(c')||, C = max ||c'||; R the
 * screen's rounding: FP16 at the kernel's scale on wgmma, else TF32).
 */
static void
test_screen_bound(int64_t n, int d, int k, int kind, int mode)
{
	float	   *X = make_data(n, d, kind);
	float	   *C = malloc(sizeof(float) * k * d),
			   *S = malloc(sizeof(float) * n * k),
			   *cp = malloc(sizeof(float) * k * d),
			   mu[512],
				f16s = 0.0f;
	long double *cn = malloc(sizeof(long double) * k);
	const double u = 0x1.0p-24;
	const double kappa = mode == 3 ? 12 * u + 12.0 * d * u : 0x1.0p-10 + 0x1.0p-22 + 4.0 * d * u;
	const double coef = kappa / 2 + (d + 1.01) * u;
	gc_status	st = {0};
	double		cmax = 0,
				dcmax = 0,
				worst = 0,
				worst_r = 0,
				mean_ratio = 0;
	int64_t		over_r = 0;
	int64_t		over = 0;

	gc_km_init_kmeanspp(NULL, X, n, d, k, tu_next(&rs), 0, C, NULL, &st);
	if (gc_kmeans_gpu_screen_scores(X, n, d, k, C, mode, S, mu, &f16s, &st) != GC_OK)
	{
		CHECK(0, "screen scores n=%lld d=%d k=%d: %s", (long long) n, d, k, st.message);
		goto out;
	}
	for (int c = 0; c < k; c++)
	{
		long double q = 0,
					r = 0;

		for (int j = 0; j < d; j++)
		{
			cp[c * d + j] = C[c * d + j] - mu[j];
			q += (long double) cp[c * d + j] * cp[c * d + j];
			r += powl((long double) cp[c * d + j] - screen_round(cp[c * d + j], f16s), 2);
		}
		cn[c] = q;
		if (sqrt((double) q) > cmax)
			cmax = sqrt((double) q);
		if (sqrt((double) r) > dcmax)
			dcmax = sqrt((double) r);
	}
	for (int64_t i = 0; i < n; i++)
	{
		float		xp[512];
		long double xn = 0,
					dx = 0;
		double		M,
					rb;

		for (int j = 0; j < d; j++)
		{
			xp[j] = X[i * d + j] - mu[j];
			xn += (long double) xp[j] * xp[j];
			dx += powl((long double) xp[j] - screen_round(xp[j], f16s), 2);
		}
		M = sqrt((double) xn) + cmax;
		rb = 2 * ((1 + 0x1.0p-11) * (sqrt((double) xn) * dcmax + sqrt((double) dx) * cmax) +
				  sqrt((double) dx) * dcmax + 4.0 * d * u * (1 + 0x1.0p-10) * sqrt((double) xn) * cmax) +
			(d + 1.01) * u * M * M;
		for (int c = 0; c < k; c++)
		{
			long double dot = 0,
						sx;
			double		e;

			for (int j = 0; j < d; j++)
				dot += (long double) xp[j] * cp[c * d + j];
			sx = cn[c] - 2 * dot;
			e = fabs((double) ((long double) S[i * k + c] - sx)) / (coef * M * M);
			mean_ratio += e;
			if (e > worst)
				worst = e;
			over += !(e <= 1.0);
			if (mode == 1)
			{
				const double er = fabs((double) ((long double) S[i * k + c] - sx)) / rb;

				if (er > worst_r)
					worst_r = er;
				over_r += !(er <= 1.0);
			}
		}
	}
	CHECK(over == 0, "screen %s n=%lld d=%d k=%d kind=%d: %lld scores beyond the bound (worst %.3g x)",
		  mode == 3 ? "3xtf32" : "tf32", (long long) n, d, k, kind, (long long) over, worst);
	if (mode == 1)
		CHECK(over_r == 0, "screen tf32 n=%lld d=%d k=%d kind=%d: %lld scores beyond the measured-rounding bound (worst %.3g x)",
			  (long long) n, d, k, kind, (long long) over_r, worst_r);
	printf("  screen %-6s %-6s n=%-6lld d=%-3d k=%-4d kind=%d: |error| / bound: max %.3g, mean %.3g; / measured-rounding bound: max %.3g\n",
		   mode == 3 ? "3xtf32" : f16s > 0 ? "fp16" : "tf32", getenv("GPUCLUST_KM_SCREEN") ? getenv("GPUCLUST_KM_SCREEN") : "",
		   (long long) n, d, k, kind, worst,
		   mean_ratio / ((double) n * k), worst_r);
out:
	free(X);
	free(C);
	free(S);
	free(cp);
	free(cn);
}

/*
 * Near ties: centres in groups of g at an offset, the odd members 1 ulp
 * from the first in one coordinate, the even ones equal to it; rows on a
 * centre, or on it plus noise far below the bound.  One step's labels must
 * equal the CPU's gc_km_assign in the current screen mode.  A row's window
 * (cuda/kmeans/kmeans_screen.cu) holds its whole group: g = 2 and 12 fit in it,
 * g = 40 does not (the row is re-ranked over every centre).
 */
static void
test_ties(int64_t n, int d, int k, double off, int g)
{
	float	   *X = malloc(sizeof(float) * n * d),
			   *C = malloc(sizeof(float) * k * d),
			   *Cg = malloc(sizeof(float) * k * d);
	int32_t    *lc = malloc(sizeof(int32_t) * n),
			   *lg = malloc(sizeof(int32_t) * n);
	gc_km_ws   *ws = gc_km_ws_create(n, d, k, 0);
	gc_status	st = {0};
	int64_t		chc = 0,
				chg = 0,
				diff = 0;
	double		shg;

	for (int c = 0; c < k; c++)
		for (int j = 0; j < d; j++)
			C[c * d + j] = c % g ? C[(c - c % g) * d + j] : (float) (off + 20.0 * tu_uniform(&rs) - 10.0);
	for (int c = 1; c < k; c += 2)
		if (c % g)
			C[c * d + (c / g + c % g) % d] = nextafterf(C[c * d + (c / g + c % g) % d], INFINITY);
	for (int64_t i = 0; i < n; i++)
	{
		int			c = (int) (tu_uniform(&rs) * k);

		for (int j = 0; j < d; j++)
			X[i * d + j] = C[c * d + j] + ((i & 1) ? (float) (1e-6 * (tu_uniform(&rs) - 0.5)) : 0.0f);
	}
	for (int64_t i = 0; i < n; i++)
		lc[i] = -1;
	CHECK(gc_km_assign(NULL, ws, X, n, d, C, k, lc, NULL, &chc, &st) == GC_OK, "cpu assign");
	CHECK(gc_kmeans_gpu_step(X, n, d, k, C, lg, Cg, &shg, &chg, &st) == GC_OK,
		  "gpu step: %s", st.message);
	for (int64_t i = 0; i < n; i++)
		diff += lg[i] != lc[i];
	CHECK(diff == 0, "ties %s n=%lld d=%d k=%d off=%g g=%d: %lld labels differ",
		  getenv("GPUCLUST_KM_SCREEN"), (long long) n, d, k, off, g, (long long) diff);
	printf("  ties   %-6s n=%-6lld d=%-3d k=%-4d off=%g g=%d: labels differ %lld\n",
		   getenv("GPUCLUST_KM_SCREEN"), (long long) n, d, k, off, g, (long long) diff);
	gc_km_ws_destroy(ws);
	free(X);
	free(C);
	free(Cg);
	free(lc);
	free(lg);
}

static void
test_screen(void)
{
	/* tf32: the screen (on wgmma in FP16 where the device has it and d >
	 * 64); mma, wgmma: that kernel's screen at every d; each with its near
	 * ties' windows */
	static const char *modes[] = {"tf32", "3xtf32", "fp32", "mma", "wgmma"};
	static const int bshapes[][3] = {
		/* n, d, k (kind: 0, 1, 2 each) */
		{3000, 9, 17}, {2000, 32, 256}, {1500, 128, 300}, {1000, 256, 129}, {2000, 100, 1000},
	};
	static const int sshapes[][4] = {
		{20000, 16, 130, 1}, {15000, 33, 256, 0}, {8000, 64, 40, 2}, {6000, 130, 300, 0},
		{30000, 256, 200, 1}, {100000, 32, 256, 1}, {50000, 128, 1000, 0},
	};

	/* tf32 (the default kernel for d), 3xtf32, tf32 on mma.sync and FP16 on wgmma */
	static const struct
	{
		int			mode;
		const char *env;
	}			bounds[] = {{1, NULL}, {3, NULL}, {1, "mma"}, {1, "wgmma"}};

	for (unsigned b = 0; b < sizeof(bounds) / sizeof(bounds[0]); b++)
	{
		if (bounds[b].env)
			setenv("GPUCLUST_KM_SCREEN", bounds[b].env, 1);
		for (unsigned s = 0; s < sizeof(bshapes) / sizeof(bshapes[0]); s++)
			for (int kind = 0; kind < 3; kind++)
			{
				if (quick && (s > 1 || kind > 0))
					continue;
				test_screen_bound(bshapes[s][0], bshapes[s][1], bshapes[s][2], kind, bounds[b].mode);
			}
		unsetenv("GPUCLUST_KM_SCREEN");
	}
	for (int m = 0; m < 5; m++)
	{
		setenv("GPUCLUST_KM_SCREEN", modes[m], 1);
		for (unsigned s = 0; s < sizeof(sshapes) / sizeof(sshapes[0]); s++)
			if (!quick || sshapes[s][0] <= 20000)
				test_step(sshapes[s][0], sshapes[s][1], sshapes[s][2], sshapes[s][3]);
		test_ties(4000, 12, 64, 0.0, 2);
		test_ties(4000, 40, 200, 1000.0, 2);
		test_ties(4000, 40, 240, 0.0, 12);
		test_ties(4000, 100, 200, 10.0, 40);
		if (!quick)
		{
			test_ties(20000, 128, 500, 100.0, 2);
			test_ties(20000, 256, 480, 0.0, 12);
		}
	}
	unsetenv("GPUCLUST_KM_SCREEN");
	/* without the windows: the 3xtf32 re-screen, then over every centre */
	setenv("GPUCLUST_KM_TIES", "0", 1);
	test_step(20000, 16, 130, 1);
	test_step(6000, 130, 300, 0);
	test_ties(4000, 40, 240, 0.0, 12);
	test_ties(4000, 100, 200, 10.0, 40);
	setenv("GPUCLUST_KM_TIES", "1", 1);
}

/* ---- full run ---- */

/*
 * A GPU result r against a CPU recomputation from its own labels and
 * centres: its inertia and distances (rows: what was clustered, Ca: the
 * centres the rows are measured to; weights w, metric), and its labels the
 * assignment of those centres.
 */
static void
check_own_output(const float *rows, int64_t n, int d, int k, const float *Ca,
				 const double *w, gc_metric metric, const gc_kmeans_result *r,
				 gc_km_ws *ws)
{
	double	   *dist = malloc(sizeof(double) * n);
	int32_t    *lchk = malloc(sizeof(int32_t) * n);
	float	   *d2 = malloc(sizeof(float) * n);
	double		recomputed = 0.0;
	int64_t		distok = 0,
				consistent = 0;
	gc_status	st = {0};

	gc_km_inertia_w(NULL, rows, n, d, Ca, r->labels, w, metric, dist, &recomputed, &st);
	CHECK(recomputed == r->inertia, "gpu inertia %.17g, recomputed %.17g", r->inertia, recomputed);
	for (int64_t i = 0; i < n; i++)
		distok += dist[i] == r->distance[i];
	CHECK(distok == n, "distances: %lld of %lld equal the recomputation", (long long) distok, (long long) n);
	for (int64_t i = 0; i < n; i++)
		lchk[i] = -1;
	gc_km_assign(NULL, ws, rows, n, d, Ca, k, lchk, d2, NULL, &st);
	for (int64_t i = 0; i < n; i++)
		consistent += lchk[i] == r->labels[i];
	CHECK(consistent == n, "labels vs returned centres: %lld of %lld", (long long) consistent, (long long) n);
	free(dist);
	free(lchk);
	free(d2);
}

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
				inrange = 1;
	double		rel;
	int			finite = 1;
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
	check_own_output(X, n, d, k, rg.centroids, NULL, GC_METRIC_EUCLIDEAN, &rg, ws);
	printf("  full n=%-7lld d=%-3d k=%-4d kind=%d init=%d n_init=%d: agree %.5f%%, inertia rel %.2g, "
		   "iters gpu %d cpu %d, conv %d/%d\n",
		   (long long) n, d, k, kind, (int) init, n_init, 100.0 * agree / n, rel,
		   rg.iterations, rc_.iterations, rg.converged, rc_.converged);
done:
	gc_km_ws_destroy(ws);
	free(X);
	free(rc_.labels);
	free(rc_.distance);
	free(rc_.centroids);
	free(rg.labels);
	free(rg.distance);
	free(rg.centroids);
}

/*
 * A fit with one of the assignment's shortcuts must equal the fit without
 * it (env = "0") bit for bit: labels, centres, distances, inertia,
 * iterations.  GPUCLUST_KM_PRUNE: the bounds (cuda/kmeans/kmeans_prune.cu) keep
 * rows out of the assignment; want: the share of row-iterations they must
 * have kept.  How many they keep depends on the data (a blob split among
 * many centres is all near ties), so only k = 1 asks for it; the others
 * print it.  GPUCLUST_KM_GRID: the grid of the exact path
 * (cuda/kmeans/kmeans_grid.cu); want: 1 if the fit must have set it up, 0 if
 * not, -1 if set up and dropped after each run's first iteration (it did
 * not pay).  Where it pays depends on the data too: the others print it.
 * GPUCLUST_KM_TIES: the near ties' windows (cuda/kmeans/kmeans_screen.cu; off,
 * the 3xtf32 re-screen and the re-rank over every centre); want: the
 * share of the queued rows they must have decided.  GPUCLUST_KM_SCREEN_RES:
 * the tf32 screen with every centre in shared memory (the same file); want:
 * 1 if the fit must have taken it, 0 if not.
 */
static void
test_without(const char *env, int64_t n, int d, int k, int kind, gc_kmeans_init init,
			 int n_init, double tol, double want)
{
	float	   *X = make_data(n, d, kind);
	gc_kmeans_params p = {.k = k, .max_iter = 300, .tol = tol,
		.init = init, .n_init = n_init, .seed = tu_next(&rs)};
	gc_kmeans_result r[2];
	gc_kmeans_gpu_phases ph[2];
	gc_status	st = {0};
	int64_t		same = 0;
	int			ok = 1;

	for (int v = 0; v < 2; v++)
	{
		r[v].labels = malloc(sizeof(int32_t) * n);
		r[v].distance = malloc(sizeof(double) * n);
		r[v].centroids = malloc(sizeof(float) * k * d);
		memset(r[v].labels, 0xa5, sizeof(int32_t) * n);
		memset(r[v].distance, 0xff, sizeof(double) * n);
		memset(r[v].centroids, 0xff, sizeof(float) * k * d);
		if (v == 0)
			setenv(env, "0", 1);
		else if (strcmp(env, "GPUCLUST_KM_TIES") == 0)
			setenv(env, "1", 1);	/* main's: the windows at every k d */
		else
			unsetenv(env);
		ok &= gc_kmeans_gpu(NULL, X, n, d, &p, &r[v], &st) == GC_OK;
		CHECK(ok, "%s n=%lld d=%d k=%d (%s): %s", env, (long long) n, d, k,
			  v ? "on" : "off", st.message);
		gc_kmeans_gpu_last_phases(&ph[v]);
	}
	unsetenv(env);
	if (strcmp(env, "GPUCLUST_KM_TIES") == 0)
		setenv(env, "1", 1);
	if (ok)
	{
		const double kept = 1.0 - (double) ph[1].rows_screened /
			((double) n * (ph[1].total_iterations > 0 ? ph[1].total_iterations : 1));

		for (int64_t i = 0; i < n; i++)
			same += r[0].labels[i] == r[1].labels[i] &&
				memcmp(&r[0].distance[i], &r[1].distance[i], sizeof(double)) == 0;
		CHECK(same == n, "%s n=%lld d=%d k=%d kind=%d: labels and distances equal on %lld of %lld rows",
			  env, (long long) n, d, k, kind, (long long) same, (long long) n);
		CHECK(memcmp(r[0].centroids, r[1].centroids, sizeof(float) * k * d) == 0,
			  "%s n=%lld d=%d k=%d kind=%d: centres differ", env, (long long) n, d, k, kind);
		CHECK(r[0].inertia == r[1].inertia && r[0].iterations == r[1].iterations &&
			  r[0].converged == r[1].converged,
			  "%s n=%lld d=%d k=%d kind=%d: inertia %.17g / %.17g, iterations %d / %d",
			  env, (long long) n, d, k, kind, r[0].inertia, r[1].inertia, r[0].iterations, r[1].iterations);
		CHECK(strcmp(env, "GPUCLUST_KM_TIES") == 0 || strcmp(env, "GPUCLUST_KM_SCREEN_RES") == 0 ||
			  ph[0].rows_screened == (int64_t) n * ph[0].total_iterations,
			  "%s: off, every row is assigned (%lld of %lld)", env,
			  (long long) ph[0].rows_screened, (long long) n * ph[0].total_iterations);
		if (strcmp(env, "GPUCLUST_KM_GRID") == 0)
		{
			CHECK(ph[0].grid_cells == 0 && (ph[1].grid_cells > 0) == (want != 0) &&
				  (want >= 0 || ph[1].grid_iterations == n_init),
				  "grid n=%lld d=%d k=%d kind=%d: %d cells off, %d on (%d iterations through it), expected %s",
				  (long long) n, d, k, kind, ph[0].grid_cells, ph[1].grid_cells,
				  ph[1].grid_iterations, want > 0 ? "a grid" : want < 0 ? "a grid, dropped" : "none");
			printf("  grid n=%-7lld d=%-3d k=%-5d kind=%d n_init=%d: %d iterations, %d through %d cells\n",
				   (long long) n, d, k, kind, n_init, ph[1].total_iterations,
				   ph[1].grid_iterations, ph[1].grid_cells);
		}
		else if (strcmp(env, "GPUCLUST_KM_SCREEN_RES") == 0)
		{
			CHECK(ph[0].screen_resident == 0 && (ph[1].screen_resident > 0) == (want != 0),
				  "resident n=%lld d=%d k=%d kind=%d: %d blocks an SM off, %d on, expected %s",
				  (long long) n, d, k, kind, ph[0].screen_resident, ph[1].screen_resident,
				  want != 0 ? "resident" : "streamed");
			printf("  resident n=%-7lld d=%-3d k=%-5d kind=%d n_init=%d: %d iterations, %lld rows screened, %d blocks an SM\n",
				   (long long) n, d, k, kind, n_init, ph[1].total_iterations,
				   (long long) ph[1].rows_screened, ph[1].screen_resident);
		}
		else if (strcmp(env, "GPUCLUST_KM_TIES") == 0)
		{
			const int64_t q = ph[1].rows_tied + ph[1].rows_reranked;

			CHECK(ph[0].rows_tied == 0 && ph[1].rows_tied >= want * q,
				  "ties n=%lld d=%d k=%d kind=%d: off %lld + %lld rows, on %lld in windows + %lld over every centre, expected >= %.0f%% in windows",
				  (long long) n, d, k, kind, (long long) ph[0].rows_tied, (long long) ph[0].rows_reranked,
				  (long long) ph[1].rows_tied, (long long) ph[1].rows_reranked, 100 * want);
			printf("  ties n=%-7lld d=%-3d k=%-5d kind=%d n_init=%d: %d iterations, %lld rows queued, %lld decided in their windows\n",
				   (long long) n, d, k, kind, n_init, ph[1].total_iterations, (long long) q,
				   (long long) ph[1].rows_tied);
		}
		else
		{
			CHECK(kept >= want, "prune n=%lld d=%d k=%d kind=%d: the bounds kept %.1f%% of row-iterations, expected >= %.0f%%",
				  (long long) n, d, k, kind, 100 * kept, 100 * want);
			printf("  prune n=%-7lld d=%-3d k=%-4d kind=%d n_init=%d: %d iterations, bounds kept %.1f%% of row-iterations\n",
				   (long long) n, d, k, kind, n_init, ph[1].total_iterations, 100 * kept);
		}
	}
	for (int v = 0; v < 2; v++)
	{
		free(r[v].labels);
		free(r[v].distance);
		free(r[v].centroids);
	}
	free(X);
}

/*
 * The tf32 screen with every centre in shared memory = the streamed one,
 * bit for bit: every row screened (the first iterations), the rows the
 * bounds list, the windows and (GPUCLUST_KM_TIES=0) the 3xtf32 re-screen
 * after it; row counts off the block's 128 and XT's 4-float alignment.
 */
static void
test_resident_suite(void)
{
	test_without("GPUCLUST_KM_SCREEN_RES", 40000, 16, 130, 1, GC_INIT_KMEANSPP, 1, 1e-6, 1);
	test_without("GPUCLUST_KM_SCREEN_RES", 30001, 32, 256, 2, GC_INIT_KMEANSPP, 2, 1e-4, 1);	/* far from the origin */
	test_without("GPUCLUST_KM_SCREEN_RES", 20003, 11, 12, 3, GC_INIT_RANDOM, 2, 1e-4, 1);	/* duplicates: ties, re-seeding */
	test_without("GPUCLUST_KM_SCREEN_RES", 50002, 24, 1, 0, GC_INIT_KMEANSPP, 1, 1e-4, 1);	/* k = 1 */
	test_without("GPUCLUST_KM_SCREEN_RES", 12007, 30, 300, 1, GC_INIT_KMEANS_PARALLEL, 1, 1e-4, 1);	/* kp = 384 */
	test_without("GPUCLUST_KM_SCREEN_RES", 9000, 64, 200, 0, GC_INIT_KMEANSPP, 1, 1e-4, 0);	/* too large: streamed */
	setenv("GPUCLUST_KM_TIES", "0", 1);
	test_without("GPUCLUST_KM_SCREEN_RES", 20000, 16, 130, 1, GC_INIT_KMEANSPP, 1, 1e-4, 1);	/* the 3xtf32 re-screen */
	setenv("GPUCLUST_KM_TIES", "1", 1);
	if (!quick)
		test_without("GPUCLUST_KM_SCREEN_RES", 400001, 32, 256, 0, GC_INIT_KMEANSPP, 1, 1e-6, 1);
}

/*
 * The grid's lists on blobs like the benchmark's (4k unit squares in
 * [-10, 10)^d) at k-means++ centres: no row outside its cell, no full
 * cell, and few candidates a row (what makes the grid pay).
 */
static void
test_grid_lists(int64_t n, int d, int k, double max_row)
{
	float	   *X = malloc(sizeof(float) * n * d),
			   *cent = malloc(sizeof(float) * 4 * k * d),
			   *C = malloc(sizeof(float) * k * d);
	gc_kmeans_gpu_grid_info gs;
	gc_status	st = {0};

	for (int i = 0; i < 4 * k * d; i++)
		cent[i] = (float) (20 * tu_uniform(&rs) - 10);
	for (int64_t i = 0; i < n; i++)
	{
		int			c = (int) (tu_uniform(&rs) * 4 * k);

		for (int j = 0; j < d; j++)
			X[i * d + j] = cent[c * d + j] + (float) (tu_uniform(&rs) - 0.5);
	}
	gc_km_init_kmeanspp(NULL, X, n, d, k, tu_next(&rs), 0, C, NULL, &st);
	CHECK(gc_kmeans_gpu_grid_stats(X, n, d, k, C, &gs, &st) == GC_OK, "grid stats: %s", st.message);
	CHECK(gs.cells > 0 && gs.rows_outside == 0 && gs.full_cells == 0 && gs.row_candidates <= max_row,
		  "grid n=%lld d=%d k=%d: %d cells (%d full), %lld rows outside, %.2f candidates a row (at most %.1f expected)",
		  (long long) n, d, k, gs.cells, gs.full_cells, (long long) gs.rows_outside,
		  gs.row_candidates, max_row);
	printf("  grid lists n=%-8lld d=%d k=%-5d: %d cells, %lld listed, %.2f candidates a row, %.2f a warp\n",
		   (long long) n, d, k, gs.cells, (long long) gs.listed, gs.row_candidates, gs.warp_candidates);
	free(X);
	free(cent);
	free(C);
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

	gc_kmeans_gpu_plan_for(1000000, 32, 100, 1, false, (size_t) 80 << 30, &pl);
	CHECK(pl.fits && !pl.streamed && pl.bytes == gc_kmeans_gpu_mem_bytes(1000000, 32, 100, 1, false),
		  "plan: resident in 80 GiB");
	gc_kmeans_gpu_plan_for(1000000, 32, 100, 1, false, (size_t) 100 << 20, &pl);
	CHECK(pl.fits && pl.streamed && pl.chunk_rows % GC_KM_BLOCK == 0 && pl.chunks >= 2 &&
		  pl.bytes <= ((size_t) 100 << 20) &&
		  pl.chunks == (1000000 + pl.chunk_rows - 1) / pl.chunk_rows,
		  "plan: streamed in 100 MiB: %lld chunks of %lld rows, %zu bytes",
		  (long long) pl.chunks, (long long) pl.chunk_rows, pl.bytes);
	printf("  plan 1M x 32, k 100 in 100 MiB: %lld chunks of %lld rows, %.1f MiB\n",
		   (long long) pl.chunks, (long long) pl.chunk_rows, pl.bytes / 1048576.0);
	gc_kmeans_gpu_plan_for(1000000, 32, 100, 1, false, (size_t) 1 << 20, &pl);
	CHECK(!pl.fits && pl.bytes > ((size_t) 1 << 20), "plan: not even streamed in 1 MiB");
	gc_kmeans_gpu_plan_for(INT64_C(640000000), 32, 100, 1, false, (size_t) 76 << 30, &pl);
	CHECK(pl.fits && pl.streamed, "plan: 640M x 32 streamed in 76 GiB");
	/* weighted: resident or not at all */
	gc_kmeans_gpu_plan_for(1000000, 32, 100, 1, true, (size_t) 80 << 30, &pl);
	CHECK(pl.fits && !pl.streamed && pl.bytes == gc_kmeans_gpu_mem_bytes(1000000, 32, 100, 1, true) &&
		  pl.bytes > gc_kmeans_gpu_mem_bytes(1000000, 32, 100, 1, false), "plan: weighted, resident");
	gc_kmeans_gpu_plan_for(1000000, 32, 100, 1, true, (size_t) 100 << 20, &pl);
	CHECK(!pl.fits && !pl.streamed, "plan: weighted, not streamed in 100 MiB");
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
	CHECK(gc_kmeans_on_gpu(NULL, X, 10, 2, &p, &r, &st) == GC_EINVAL, "k > n");
	p.k = 0;
	CHECK(gc_kmeans_on_gpu(NULL, X, 10, 2, &p, &r, &st) == GC_EINVAL, "k = 0");
	p.k = 3;
	p.tol = -1;
	CHECK(gc_kmeans_on_gpu(NULL, X, 10, 2, &p, &r, &st) == GC_EINVAL, "tol < 0");
	p.tol = 1e-4;
	CHECK(gc_kmeans_on_gpu(NULL, X, 0, 2, &p, &r, &st) == GC_OK, "n = 0");
	CHECK(gc_kmeans_on_gpu(&ctx, X, 10, 2, &p, &r, &st) == GC_ECANCEL, "cancel: %d %s", st.code, st.message);
	CHECK(gc_kmeans_on_gpu(NULL, X, 10, 2, &p, &r, &st) == GC_OK, "after cancel: %s", st.message);
}

/*
 * ---- sample weights, cosine, given centroids ----
 *
 * gc_kmeans_gpu against gc_kmeans_cpu with what issue 16 brought to the
 * GPU.  With weights the GPU sums the means in the CPU's order
 * (cuda/kmeans/kmeans_weighted.cu): labels, centres, inertia, distances and
 * iterations equal bit for bit.  Cosine without weights takes the
 * fixed-point sums, which equal the CPU's double sums except where those
 * round: labels on >= 99.9% of rows, the inertia within 1e-5.  Always: the
 * GPU's inertia and distances equal a CPU recomputation from its own
 * labels and centres, its labels are the assignment of its centres, and
 * under cosine the centres have unit length.  chunk > 0: streamed in
 * chunks of that many rows as well, equal to the resident run bit for bit.
 */
#define F_W 1					/* weights in [0.5, 2), one row in ten 0 */
#define F_WHEAVY 2				/* weights from 1e-6 to 1e6, one row in three 0 */
#define F_COS 4
#define F_GIVEN 8				/* init_centroids: k rows of X, perturbed */

static void
test_features(int64_t n, int d, int k, int kind, gc_kmeans_init init,
			  int n_init, double tol, int flags, int64_t chunk)
{
	float	   *X = make_data(n, d, kind);
	double	   *w = NULL;
	float	   *C0 = NULL,
			   *U = NULL,
			   *Ca = malloc(sizeof(float) * k * d);
	const float *rows = X;
	const bool	strict = (flags & (F_W | F_WHEAVY)) != 0;
	gc_kmeans_params p = {.k = k, .max_iter = 300, .tol = tol, .init = init,
		.n_init = n_init, .seed = tu_next(&rs),
		.metric = flags & F_COS ? GC_METRIC_COSINE : GC_METRIC_EUCLIDEAN};
	gc_kmeans_result rc_,
				rg,
				rs_;
	gc_status	st = {0};
	int64_t		agree = 0;
	int			cdiff = 0;
	double		rel,
				maxnorm = 0.0;
	gc_km_ws   *ws = gc_km_ws_create(n, d, k, 0);

	if (flags & (F_W | F_WHEAVY))
	{
		int64_t		pos = 0;

		w = malloc(sizeof(double) * n);
		for (int64_t i = 0; i < n; i++)
		{
			double		u = tu_uniform(&rs);

			if (flags & F_WHEAVY)
				w[i] = u < 1.0 / 3 ? 0.0 : pow(10.0, 12.0 * tu_uniform(&rs) - 6.0);
			else
				w[i] = u < 0.1 ? 0.0 : 0.5 + 1.5 * tu_uniform(&rs);
			pos += w[i] > 0.0;
		}
		for (int64_t i = 0; pos < k && i < n; i++)
			if (w[i] == 0.0)
			{
				w[i] = 1.0;
				pos++;
			}
		p.weights = w;
	}
	if (flags & F_GIVEN)
	{
		C0 = malloc(sizeof(float) * k * d);
		for (int c = 0; c < k; c++)
			for (int j = 0; j < d; j++)
				C0[c * d + j] = X[(int64_t) (c * (n / k)) * d + j] + (float) (0.01 * gauss());
		p.init = GC_INIT_CENTROIDS;
		p.init_centroids = C0;
		p.init_d = d;
	}
	km_alloc_result(&rc_, n, d, k);
	km_alloc_result(&rg, n, d, k);
	CHECK(gc_kmeans_cpu(NULL, X, n, d, &p, &rc_, &st) == GC_OK, "cpu run: %s", st.message);
	CHECK(gc_kmeans_gpu(NULL, X, n, d, &p, &rg, &st) == GC_OK,
		  "gpu run n=%lld d=%d k=%d flags=%d: %s", (long long) n, d, k, flags, st.message);
	if (st.code != GC_OK)
		goto done;
	for (int64_t i = 0; i < n; i++)
		agree += rg.labels[i] == rc_.labels[i];
	for (int i = 0; i < k * d; i++)
		cdiff += memcmp(&rg.centroids[i], &rc_.centroids[i], sizeof(float)) != 0;
	rel = fabs(rg.inertia - rc_.inertia) / (rc_.inertia > 0 ? rc_.inertia : 1);
	if (strict)
		CHECK(agree == n && cdiff == 0 && rg.inertia == rc_.inertia &&
			  rg.iterations == rc_.iterations && rg.converged == rc_.converged,
			  "features n=%lld d=%d k=%d kind=%d flags=%d: labels agree on %lld, %d centre coords differ, "
			  "inertia %.17g vs %.17g, iterations %d vs %d",
			  (long long) n, d, k, kind, flags, (long long) agree, cdiff, rg.inertia, rc_.inertia,
			  rg.iterations, rc_.iterations);
	else
		CHECK(agree >= n - n / 1000 && rel <= 1e-5,
			  "features n=%lld d=%d k=%d kind=%d flags=%d: labels agree on %lld of %lld, inertia rel %.3g",
			  (long long) n, d, k, kind, flags, (long long) agree, (long long) n, rel);
	/* recomputed on the CPU from the GPU's own output */
	memcpy(Ca, rg.centroids, sizeof(float) * k * d);
	if (flags & F_COS)
	{
		U = malloc(sizeof(float) * n * d);
		gc_unit_rows(NULL, X, n, d, U);
		rows = U;
		for (int c = 0; c < k; c++)
		{
			double		s = 0.0;

			for (int j = 0; j < d; j++)
				s += (double) rg.centroids[c * d + j] * rg.centroids[c * d + j];
			maxnorm = fmax(maxnorm, fabs(sqrt(s) - 1.0));
			(void) gc_unit_row(rg.centroids + c * d, d, Ca + c * d);
		}
		CHECK(maxnorm <= 1e-6, "cosine centres of length 1: off by %g", maxnorm);
	}
	check_own_output(rows, n, d, k, Ca, w, p.metric, &rg, ws);
	printf("  features n=%-6lld d=%-3d k=%-4d kind=%d init=%-9s n_init=%d flags=%2d: agree %.5f%%, "
		   "centre coords differing %d, inertia rel %.2g, iters gpu %d cpu %d\n",
		   (long long) n, d, k, kind, init_name[p.init], n_init, flags, 100.0 * agree / n, cdiff, rel,
		   rg.iterations, rc_.iterations);
	if (chunk > 0)
	{
		int64_t		same = 0;

		km_alloc_result(&rs_, n, d, k);
		gc_kmeans_gpu_force_chunk(chunk);
		CHECK(gc_kmeans_gpu(NULL, X, n, d, &p, &rs_, &st) == GC_OK, "streamed run: %s", st.message);
		gc_kmeans_gpu_force_chunk(0);
		for (int64_t i = 0; i < n; i++)
			same += rs_.labels[i] == rg.labels[i] &&
				memcmp(&rs_.distance[i], &rg.distance[i], sizeof(double)) == 0;
		CHECK(same == n && memcmp(rs_.centroids, rg.centroids, sizeof(float) * k * d) == 0 &&
			  rs_.inertia == rg.inertia && rs_.iterations == rg.iterations,
			  "streamed (chunks of %lld) = resident: %lld of %lld rows, inertia %.17g vs %.17g",
			  (long long) chunk, (long long) same, (long long) n, rs_.inertia, rg.inertia);
		km_free_result(&rs_);
	}
done:
	km_free_result(&rc_);
	km_free_result(&rg);
	gc_km_ws_destroy(ws);
	free(X);
	free(w);
	free(C0);
	free(U);
	free(Ca);
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
	gc_kmeans_gpu_plan plan,
				want;

	gc_gpu_local(&g0, 0);
	gc_gpu_local(&g1000, 1000);
	CHECK(gc_choose_device_kmeans(GC_DEVICE_CPU, 1000000, 32, 100, 1, false, &g0, &ch, NULL, note,
								  sizeof(note), &st) == GC_OK && ch == GC_DEVICE_CPU, "cpu");
	/* weights: on the GPU, resident or not at all */
	CHECK(gc_choose_device_kmeans(GC_DEVICE_GPU, 1000000, 32, 100, 1, true, &g0, &ch, NULL,
								  note, sizeof(note), &st) == GC_OK && ch == GC_DEVICE_GPU,
		  "gpu, weights: %s", st.message);
	CHECK(gc_choose_device_kmeans(GC_DEVICE_AUTO, 1000000, 32, 100, 1, true, &g0, &ch, NULL,
								  note, sizeof(note), &st) == GC_OK && ch == GC_DEVICE_GPU,
		  "auto, weights: gpu");
	CHECK(gc_choose_device_kmeans(GC_DEVICE_GPU, INT64_C(2000000000), 100, 100, 1, true, &g0, &ch, NULL,
								  note, sizeof(note), &st) == GC_ENOMEM &&
		  strstr(st.message, "sample weights") != NULL, "gpu, weights, too big: %s", st.message);
	printf("  gpu, weights, too big: %s\n", st.message);
	CHECK(gc_choose_device_kmeans(GC_DEVICE_AUTO, INT64_C(2000000000), 100, 100, 1, true, &g0, &ch, NULL,
								  note, sizeof(note), &st) == GC_OK && ch == GC_DEVICE_CPU &&
		  note[0] != '\0', "auto, weights, too big: cpu with a note");
	CHECK(gc_choose_device_kmeans(GC_DEVICE_GPU, 10, 2, 2, 1, false, &g0, &ch, NULL, note,
								  sizeof(note), &st) == GC_OK && ch == GC_DEVICE_GPU, "gpu, tiny");
	CHECK(gc_choose_device_kmeans(GC_DEVICE_AUTO, 10, 2, 2, 1, false, &g0, &ch, NULL, note,
								  sizeof(note), &st) == GC_OK && ch == GC_DEVICE_CPU &&
		  note[0] == '\0', "auto, tiny: cpu");
	CHECK(gc_choose_device_kmeans(GC_DEVICE_AUTO, 1000000, 32, 100, 1, false, &g0, &ch, NULL, note,
								  sizeof(note), &st) == GC_OK && ch == GC_DEVICE_GPU, "auto, large: gpu");
	/* more than any GPU's memory: gpu refuses, auto runs on the CPU and says why */
	CHECK(gc_choose_device_kmeans(GC_DEVICE_GPU, INT64_C(2000000000), 40000, 100, 1, false, &g0, &ch, NULL,
								  note, sizeof(note), &st) == GC_ENOMEM, "gpu, too big: %s", st.message);
	printf("  gpu, too big: %s\n", st.message);
	CHECK(gc_choose_device_kmeans(GC_DEVICE_AUTO, INT64_C(2000000000), 40000, 100, 1, false, &g0, &ch, NULL,
								  note, sizeof(note), &st) == GC_OK && ch == GC_DEVICE_CPU &&
		  note[0] != '\0', "auto, too big: cpu with a note");
	/* larger than the GPU's memory but streamed: the GPU */
	CHECK(gc_choose_device_kmeans(GC_DEVICE_GPU, INT64_C(2000000000), 100, 100, 1, false, &g0, &ch, NULL,
								  note, sizeof(note), &st) == GC_OK && ch == GC_DEVICE_GPU,
		  "gpu, 2e9 x 100 streamed: %s", st.message);
	/* gpuclust.gpu_memory_limit (gc_gpu.mem_limit): streamed within it, or the CPU */
	g0.mem_limit = (size_t) 100 << 20;
	CHECK(gc_choose_device_kmeans(GC_DEVICE_AUTO, 1000000, 32, 100, 1, false, &g0, &ch, &plan, note,
								  sizeof(note), &st) == GC_OK && ch == GC_DEVICE_GPU,
		  "auto, 100 MiB limit: gpu (streamed)");
	/* the chosen GPU's plan: the one made for the limit, for the run */
	gc_kmeans_gpu_plan_for(1000000, 32, 100, 1, false, (size_t) 100 << 20, &want);
	CHECK(plan.fits && plan.streamed && plan.budget == ((size_t) 100 << 20) &&
		  memcmp(&plan, &want, sizeof(plan)) == 0,
		  "auto, 100 MiB limit: its plan (%lld rows a chunk)", (long long) plan.chunk_rows);
	g0.mem_limit = (size_t) 16 << 20;
	CHECK(gc_choose_device_kmeans(GC_DEVICE_GPU, 1000000, 32, 100, 1, false, &g0, &ch, &plan, note,
								  sizeof(note), &st) == GC_ENOMEM && plan.bytes == 0,
		  "gpu, 16 MiB limit: %s (no plan)", st.message);
	printf("  gpu, 16 MiB limit: %s\n", st.message);
	CHECK(gc_choose_device_kmeans(GC_DEVICE_AUTO, 1000000, 32, 100, 1, false, &g0, &ch, NULL, note,
								  sizeof(note), &st) == GC_OK && ch == GC_DEVICE_CPU && note[0] != '\0',
		  "auto, 16 MiB limit: cpu with a note");
	CHECK(gc_gpu_budget(&g0) == ((size_t) 16 << 20), "budget: the limit");
	g0.mem_limit = 0;
	CHECK(gc_choose_device_kmeans(GC_DEVICE_GPU, 1000, 2, 2, 1, false, &g1000, &ch, NULL, note,
								  sizeof(note), &st) == GC_EDEVICE, "gpu, no such device");
	printf("  gpu, device 1000: %s\n", st.message);
	gc_cuda_probe_cached(0, &info);
	CHECK(info.usable && info.free_mem > 0, "cached probe after another id");
	CHECK(gc_kmeans_gpu_mem_bytes(1000000, 32, 100, 1, false) > (size_t) 1000000 * 32 * 4,
		  "memory estimate");
}

/*
 * ---- labels: gc_kmeans_labels_on_gpu (kmeans_step's GPU labels) ----
 *
 * The GPU's labels of rows for given centres = gc_kmeans_labels_cpu's =
 * gc_km_nearest's on every row (testutil.h's labels_kind inputs: duplicate
 * centres, rows on centres, lattice ties, far and huge values, centres 1
 * ulp apart), through every assignment path: the grid (d <= 3, 16 <= k,
 * n >= 256 k), k_assign_small (d <= 8), the tensor-core screen with its
 * near ties' windows, the cascade and the re-rank (8 < d <= 256; every
 * GPUCLUST_KM_SCREEN mode), the FP32 tiled kernel (d > 256); and the bad
 * arguments (k > n, n = 0, ...: GC_EINVAL).  screen, ties, grid: the
 * GPUCLUST_KM_SCREEN, _TIES and _GRID to run under (NULL: as they are,
 * "-": unset), restored after.
 */
static int	lb_cases,
			lb_ok;

static char *
lb_setenv(const char *name, const char *v)
{
	const char *old = getenv(name);
	char	   *keep = old ? strdup(old) : NULL;

	if (v == NULL)
		return keep;
	if (strcmp(v, "-") == 0)
		unsetenv(name);
	else
		setenv(name, v, 1);
	return keep;
}

static void
lb_restore(const char *name, char *keep)
{
	if (keep)
		setenv(name, keep, 1);
	else
		unsetenv(name);
	free(keep);
}

static void
test_labels(int64_t n, int d, int k, labels_kind kind, const char *screen,
			const char *ties, const char *grid)
{
	char	   *ks = lb_setenv("GPUCLUST_KM_SCREEN", screen),
			   *kt = lb_setenv("GPUCLUST_KM_TIES", ties),
			   *kg = lb_setenv("GPUCLUST_KM_GRID", grid);
	float	   *X,
			   *C;
	int32_t    *lg = malloc(sizeof(int32_t) * n),
			   *lc = malloc(sizeof(int32_t) * n),
			   *lr = malloc(sizeof(int32_t) * n);
	gc_status	st = {0};
	int64_t		dg = 0,
				dc = 0,
				fg = -1,
				fc = -1;
	gc_code		rg,
				rc;

	tu_make_labels_case(&rs, n, d, k, kind, &X, &C);
	memset(lg, 0xa5, sizeof(int32_t) * n);
	memset(lc, 0x5a, sizeof(int32_t) * n);
	rg = gc_kmeans_labels_on_gpu(NULL, X, n, d, C, k, lg, &st);
	CHECK(rg == GC_OK, "labels gpu n=%lld d=%d k=%d %s: rc %d %s", (long long) n, d, k,
		  lb_name[kind], rg, st.message);
	rc = gc_kmeans_labels_cpu(NULL, X, n, d, C, k, lc, &st);
	CHECK(rc == GC_OK, "labels cpu n=%lld d=%d k=%d %s: rc %d %s", (long long) n, d, k,
		  lb_name[kind], rc, st.message);
	tu_ref_labels(X, n, d, C, k, lr);
	for (int64_t i = 0; i < n; i++)
	{
		if (lc[i] != lr[i] && dc++ == 0)
			fc = i;
		if (lg[i] != lr[i] && dg++ == 0)
			fg = i;
	}
	CHECK(dc == 0, "labels cpu n=%lld d=%d k=%d %s: %lld rows differ from gc_km_nearest (row %lld: %d, want %d)",
		  (long long) n, d, k, lb_name[kind], (long long) dc, (long long) fc,
		  fc >= 0 ? lc[fc] : 0, fc >= 0 ? lr[fc] : 0);
	if (dg > 0)
	{
		const int	g = lg[fg],
					r = lr[fg];
		const float dgd = g >= 0 && g < k ? gc_dist2(X + fg * d, C + (size_t) g * d, d) : NAN,
					drd = gc_dist2(X + fg * d, C + (size_t) r * d, d);

		CHECK(0, "labels gpu (screen %s, ties %s, grid %s) n=%lld d=%d k=%d %s: %lld rows differ "
			  "(row %lld: %d at %.9g, want %d at %.9g)",
			  getenv("GPUCLUST_KM_SCREEN") ? getenv("GPUCLUST_KM_SCREEN") : "default",
			  getenv("GPUCLUST_KM_TIES") ? getenv("GPUCLUST_KM_TIES") : "default",
			  getenv("GPUCLUST_KM_GRID") ? getenv("GPUCLUST_KM_GRID") : "default",
			  (long long) n, d, k, lb_name[kind], (long long) dg, (long long) fg, g, dgd, r, drd);
	}
	lb_cases++;
	lb_ok += rg == GC_OK && rc == GC_OK && dc == 0 && dg == 0;
	if (!quick || dg > 0)
		printf("  labels n=%-7lld d=%-4d k=%-5d %-11s screen %-6s ties %-7s grid %-7s: gpu differs on %lld, cpu on %lld\n",
			   (long long) n, d, k, lb_name[kind],
			   getenv("GPUCLUST_KM_SCREEN") ? getenv("GPUCLUST_KM_SCREEN") : "-",
			   getenv("GPUCLUST_KM_TIES") ? getenv("GPUCLUST_KM_TIES") : "-",
			   getenv("GPUCLUST_KM_GRID") ? getenv("GPUCLUST_KM_GRID") : "-",
			   (long long) dg, (long long) dc);
	lb_restore("GPUCLUST_KM_SCREEN", ks);
	lb_restore("GPUCLUST_KM_TIES", kt);
	lb_restore("GPUCLUST_KM_GRID", kg);
	free(X);
	free(C);
	free(lg);
	free(lc);
	free(lr);
}

static void
test_labels_errors(void)
{
	float		X[20] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5};
	int32_t		lab[10];
	gc_status	st = {0};

	CHECK(gc_kmeans_labels_on_gpu(NULL, X, 3, 2, X, 4, lab, &st) == GC_EINVAL && st.message[0],
		  "labels gpu k > n: %s", st.message);
	CHECK(gc_kmeans_labels_on_gpu(NULL, X, 10, 2, X, 11, lab, &st) == GC_EINVAL, "labels gpu k = n + 1");
	CHECK(gc_kmeans_labels_on_gpu(NULL, X, 0, 2, X, 1, lab, &st) == GC_EINVAL, "labels gpu n = 0");
	CHECK(gc_kmeans_labels_on_gpu(NULL, X, 10, 2, X, 0, lab, &st) == GC_EINVAL, "labels gpu k = 0");
	CHECK(gc_kmeans_labels_on_gpu(NULL, X, 10, 0, X, 1, lab, &st) == GC_EINVAL, "labels gpu d = 0");
	CHECK(gc_kmeans_labels_on_gpu(NULL, NULL, 10, 2, X, 1, lab, &st) == GC_EINVAL, "labels gpu X NULL");
	CHECK(gc_kmeans_labels_on_gpu(NULL, X, 10, 2, NULL, 1, lab, &st) == GC_EINVAL, "labels gpu C NULL");
	CHECK(gc_kmeans_labels_on_gpu(NULL, X, 10, 2, X, 1, NULL, &st) == GC_EINVAL, "labels gpu labels NULL");
	/* still usable after the refusals: k = n = 10, the rows themselves the
	 * centres (all distinct: row i gets label i) */
	memset(lab, 0xff, sizeof(lab));
	CHECK(gc_kmeans_labels_on_gpu(NULL, X, 10, 2, X, 10, lab, &st) == GC_OK, "labels gpu k = n: %s", st.message);
	for (int i = 0; i < 10; i++)
	{
		float		bd;

		CHECK(lab[i] == i && lab[i] == gc_km_nearest(X + 2 * i, X, 10, 2, &bd),
			  "labels gpu k = n: row %d: %d", i, lab[i]);
	}
}

static void
test_labels_suite(void)
{
	static const struct
	{
		int			n,
					d,
					k;
		const char *path;
	}			shapes[] = {
		/* the smallest: n = 1, k = n */
		{1, 1, 1, "small"}, {5, 3, 5, "small"}, {17, 40, 17, "screen"}, {9, 300, 9, "tiled"},
		/* the grid: d <= 3, 16 <= k, n >= 256 k (and the exact path beside it) */
		{30000, 2, 100, "grid"}, {300000, 2, 1000, "grid"}, {100000, 3, 300, "grid"},
		{65536, 1, 256, "grid"}, {80000, 3, 200, "grid"}, {4096, 2, 16, "grid"},
		{20000, 2, 2000, "small"}, {50000, 3, 15, "small"}, {300000, 1, 1, "small"},
		/* k_assign_small: 4 <= d <= 8 */
		{50000, 4, 1000, "small"}, {20000, 8, 2000, "small"}, {10007, 5, 7, "small"},
		{2000, 6, 2000, "small"}, {100000, 7, 64, "small"},
		/* the screen: 8 < d <= 256 */
		{20000, 9, 17, "screen"}, {20000, 32, 256, "screen"}, {10000, 128, 1000, "screen"},
		{3000, 256, 2000, "screen"}, {2000, 100, 2000, "screen"}, {50000, 64, 1, "screen"},
		{40000, 16, 130, "screen"}, {6000, 130, 300, "screen"}, {5000, 255, 600, "screen"},
		/* the FP32 tiled kernel: d > 256 */
		{5000, 300, 100, "tiled"}, {3000, 512, 600, "tiled"}, {2000, 1000, 64, "tiled"},
		{4000, 257, 300, "tiled"}, {2500, 300, 2000, "tiled"},
	};
	static const char *modes[] = {"tf32", "3xtf32", "fp32", "mma", "wgmma"};
	const int	ns = (int) (sizeof(shapes) / sizeof(shapes[0]));

	lb_cases = lb_ok = 0;
	test_labels_errors();
	if (quick >= 2)
	{
		/* racecheck: one of each path, tiny */
		test_labels(5000, 2, 16, LB_LATTICE, NULL, NULL, NULL);	/* grid */
		test_labels(3000, 5, 40, LB_DUP_CENTRES, NULL, NULL, NULL);
		test_labels(2000, 20, 50, LB_ULP, NULL, NULL, NULL);
		test_labels(2000, 20, 50, LB_LATTICE, NULL, "0", NULL);	/* the cascade */
		test_labels(1000, 300, 20, LB_ON_CENTRES, NULL, NULL, NULL);
		printf("  labels: %d of %d cases equal (quick 2)\n", lb_ok, lb_cases);
		return;
	}
	for (int s = 0; s < ns; s++)
	{
		const int64_t n = shapes[s].n;
		const int	d = shapes[s].d,
					k = shapes[s].k;
		const double cost = (double) n * d * k;

		if (quick && (n > 20000 || cost > 5e7))
			continue;
		/* every kind where the CPU's reference is cheap, else three */
		for (int kind = 0; kind < LB_KINDS; kind++)
		{
			if (cost > 2e8 && kind != s % LB_KINDS && kind != LB_LATTICE && kind != LB_DUP_CENTRES)
				continue;
			if (quick && kind != s % LB_KINDS && kind != LB_LATTICE)
				continue;
			test_labels(n, d, k, (labels_kind) kind, NULL, NULL, NULL);
		}
		/* the grid's shapes through the exact path as well */
		if (strcmp(shapes[s].path, "grid") == 0 && !quick)
			test_labels(n, d, k, (labels_kind) (s % LB_KINDS), NULL, NULL, "0");
		/* the screen's: every mode, the ties' windows off (the cascade) and by k d */
		if (strcmp(shapes[s].path, "screen") == 0 && cost <= 2e9)
		{
			for (int m = 0; m < 5; m++)
				if (!quick || m == s % 5)
					test_labels(n, d, k, (labels_kind) ((s + m) % LB_KINDS), modes[m], NULL, NULL);
			test_labels(n, d, k, LB_LATTICE, NULL, "0", NULL);
			if (!quick)
			{
				test_labels(n, d, k, LB_ULP, NULL, "-", NULL);
				test_labels(n, d, k, LB_DUP_CENTRES, "tf32", "0", NULL);
			}
		}
	}
	/* fresh shapes: d 1..300, k 1..2000, n k..300k (about 2e8 distances at most) */
	for (int r = 0; r < (quick ? 6 : 40); r++)
	{
		const int	d = r % 4 == 0 ? 1 + (int) (tu_next(&rs) % 3) :
			r % 4 == 1 ? 4 + (int) (tu_next(&rs) % 5) :
			r % 4 == 2 ? 9 + (int) (tu_next(&rs) % 248) : 257 + (int) (tu_next(&rs) % 44);
		const int	k = 1 + (int) (tu_next(&rs) % (r % 3 == 0 ? 2000 : 300));
		int64_t		n = k + (int64_t) (tu_next(&rs) % 300000);

		if (r % 4 == 0 && k >= 16 && n < (int64_t) 256 * k && (int64_t) 256 * k <= 300000)
			n = (int64_t) 256 * k + (int64_t) (tu_next(&rs) % 1000);	/* the grid */
		while (n > k && (double) n * d * k > (quick ? 2e7 : 2e8))
			n = n / 2 > k ? n / 2 : k;
		test_labels(n, d, k, (labels_kind) (tu_next(&rs) % LB_KINDS), NULL, NULL, NULL);
	}
	printf("  labels: %d of %d cases equal gc_km_nearest on every row%s\n", lb_ok, lb_cases,
		   quick ? " (quick)" : "");
}

/* ---- concurrent calls of different shapes ---- */
typedef struct conc_call
{
	int64_t		n;
	int			d,
				k,
				reps;
	float	   *X;
	gc_kmeans_params p;
	gc_kmeans_result ref;
	int			differ;			/* runs unlike ref */
	gc_code		rc;				/* the first failure */
	char		msg[256];
} conc_call;

static void
conc_alloc(gc_kmeans_result *r, int64_t n, int d, int k)
{
	r->labels = malloc(sizeof(int32_t) * n);
	r->distance = malloc(sizeof(double) * n);
	r->centroids = malloc(sizeof(float) * k * d);
}

static void
conc_free(gc_kmeans_result *r)
{
	free(r->labels);
	free(r->distance);
	free(r->centroids);
}

/* ---- one fit split over several GPUs (cuda/kmeans/kmeans_multi.cu) ---- */

/* The GPUs the multi suite splits over: 0 and 1 when there are two, else
 * GPU 0 twice (two shards on one device: the same gathering and copies). */
static int	multi_gpus[3];

/*
 * A fit on ngpus shards of multi_gpus equals the fit on one GPU bit for
 * bit: labels, centroids, distances, inertia, iterations, convergence.
 * gpu_mem_rows > 0: each GPU's budget is one GPU's plan for that many
 * rows, less than the whole problem's.
 */
static void
test_multi(int64_t n, int d, int k, int kind, gc_kmeans_init init, int n_init,
		   double tol, gc_metric metric, int ngpus, int64_t gpu_mem_rows)
{
	float	   *X = make_data(n, d, kind);
	gc_kmeans_params p = {.k = k, .max_iter = 300, .tol = tol, .init = init,
		.n_init = n_init, .seed = tu_next(&rs), .metric = metric};
	gc_ctx		ctx = {.n_gpus = ngpus, .gpus = multi_gpus};
	gc_kmeans_result r[2];
	gc_kmeans_gpu_phases ph;
	gc_status	st = {0};
	gc_code		rc[2];
	float	   *C0 = NULL;

	if (init == GC_INIT_CENTROIDS)
	{
		/* rows spread over X, moved off them a little */
		C0 = malloc(sizeof(float) * k * d);
		for (int c = 0; c < k; c++)
			for (int j = 0; j < d; j++)
				C0[c * d + j] = X[(int64_t) c * (n / k) * d + j] + 0.125f;
		p.init_centroids = C0;
		p.init_d = d;
	}
	if (gpu_mem_rows > 0)
		p.gpu_mem = gc_kmeans_gpu_mem_bytes(gpu_mem_rows, d, k, gc_kmeans_runs(&p), false);
	for (int v = 0; v < 2; v++)
	{
		conc_alloc(&r[v], n, d, k);
		memset(r[v].labels, 0xa5, sizeof(int32_t) * n);
		memset(r[v].distance, 0xff, sizeof(double) * n);
		memset(r[v].centroids, 0xff, sizeof(float) * k * d);
		r[v].inertia = NAN;
		r[v].iterations = -7;
		rc[v] = gc_kmeans_gpu(v ? &ctx : NULL, X, n, d, &p, &r[v], &st);
		CHECK(rc[v] == GC_OK, "multi n=%lld d=%d k=%d on %d GPUs (v %d): %s", (long long) n, d, k,
			  ngpus, v, st.message);
	}
	gc_kmeans_gpu_last_phases(&ph);
	if (rc[0] == GC_OK && rc[1] == GC_OK)
	{
		int64_t		lab = 0,
					dist = 0;
		int			cen = memcmp(r[0].centroids, r[1].centroids, sizeof(float) * k * d) == 0;

		for (int64_t i = 0; i < n; i++)
		{
			lab += r[0].labels[i] == r[1].labels[i];
			dist += memcmp(&r[0].distance[i], &r[1].distance[i], sizeof(double)) == 0;
		}
		CHECK(lab == n && dist == n && cen &&
			  memcmp(&r[0].inertia, &r[1].inertia, sizeof(double)) == 0 &&
			  r[0].iterations == r[1].iterations && r[0].converged == r[1].converged,
			  "multi n=%lld d=%d k=%d kind=%d init=%s n_init=%d tol=%g%s on %d GPUs: labels %lld, "
			  "distances %lld of %lld, centroids %s, inertia %.17g / %.17g, iterations %d / %d, "
			  "converged %d / %d", (long long) n, d, k, kind, init_name[init], n_init, tol,
			  metric == GC_METRIC_COSINE ? " cosine" : "", ngpus, (long long) lab, (long long) dist,
			  (long long) n, cen ? "equal" : "differ", r[0].inertia, r[1].inertia,
			  r[0].iterations, r[1].iterations, r[0].converged, r[1].converged);
		printf("  multi n=%-7lld d=%-3d k=%-4d kind=%d %-9s n_init=%d tol=%g%s%s, %d GPUs: %d iterations, "
			   "= one GPU's (seeding %.1f ms, upload %.1f, Lloyd %.1f, download %.1f)\n",
			   (long long) n, d, k, kind, init_name[init], n_init, tol,
			   metric == GC_METRIC_COSINE ? " cosine" : "",
			   init == GC_INIT_CENTROIDS ? "" : init == GC_INIT_RANDOM ? " seeded on the host" :
			   " seeded over the shards",
			   ngpus, r[1].iterations, ph.ms_init, ph.ms_upload, ph.ms_lloyd, ph.ms_download);
	}
	conc_free(&r[0]);
	conc_free(&r[1]);
	free(C0);
	free(X);
}

static void
test_multi_suite(void)
{
	tu_multi_gpus(multi_gpus, "shards");
	if (quick >= 2)
	{
		/* racecheck: each seeding over the shards, and Lloyd, tiny */
		test_multi(3000, 4, 7, 1, GC_INIT_KMEANSPP, 1, 1e-4, GC_METRIC_EUCLIDEAN, 2, 0);
		test_multi(4000, 8, 24, 0, GC_INIT_KMEANS_PARALLEL, 1, 1e-4, GC_METRIC_EUCLIDEAN, 2, 0);
		test_multi(2000, 3, 10, 3, GC_INIT_RANDOM, 1, 0.0, GC_METRIC_EUCLIDEAN, 2, 0);
		return;
	}
	if (quick)
	{
		test_multi(20000, 2, 30, 0, GC_INIT_KMEANSPP, 1, 1e-4, GC_METRIC_EUCLIDEAN, 2, 0);
		test_multi(20000, 32, 64, 0, GC_INIT_KMEANS_PARALLEL, 2, 1e-4, GC_METRIC_EUCLIDEAN, 3, 0);
		test_multi(10000, 3, 40, 3, GC_INIT_RANDOM, 1, 0.0, GC_METRIC_EUCLIDEAN, 2, 0);
		test_multi(20000, 16, 20, 0, GC_INIT_KMEANSPP, 1, 1e-4, GC_METRIC_COSINE, 2, 14000);
		test_multi(20000, 3, 40, 3, GC_INIT_KMEANS_PARALLEL, 1, 0.0, GC_METRIC_EUCLIDEAN, 2, 0);
		test_multi(20000, 4, 64, 7, GC_INIT_KMEANS_PARALLEL, 1, 0.0, GC_METRIC_EUCLIDEAN, 2, 0);
		return;
	}
	/* the exact path (d <= 8: its grid at d <= 3) */
	test_multi(200003, 2, 100, 0, GC_INIT_KMEANSPP, 1, 1e-4, GC_METRIC_EUCLIDEAN, 2, 0);
	test_multi(150000, 5, 40, 1, GC_INIT_KMEANS_PARALLEL, 2, 0.0, GC_METRIC_EUCLIDEAN, 2, 0);
	/* the screen and the bounds; wgmma and the sort-by-label update at 128 */
	test_multi(100000, 32, 256, 0, GC_INIT_KMEANSPP, 1, 1e-4, GC_METRIC_EUCLIDEAN, 2, 0);
	test_multi(60001, 128, 300, 0, GC_INIT_AUTO, 1, 1e-4, GC_METRIC_EUCLIDEAN, 3, 0);
	/* the FP32 tiled kernel (d > 256), far from the origin */
	test_multi(30000, 300, 50, 2, GC_INIT_RANDOM, 1, 1e-4, GC_METRIC_EUCLIDEAN, 2, 0);
	/* empty clusters re-seeded (5 distinct rows), an outlier */
	test_multi(50000, 3, 40, 3, GC_INIT_RANDOM, 2, 0.0, GC_METRIC_EUCLIDEAN, 2, 0);
	test_multi(40000, 12, 64, 3, GC_INIT_RANDOM, 1, 0.0, GC_METRIC_EUCLIDEAN, 3, 0);
	test_multi(80000, 6, 30, 6, GC_INIT_KMEANSPP, 1, 1e-4, GC_METRIC_EUCLIDEAN, 2, 0);
	/* cosine; given centroids; n_init 3 */
	test_multi(80000, 16, 50, 0, GC_INIT_KMEANSPP, 1, 1e-4, GC_METRIC_COSINE, 2, 0);
	test_multi(120000, 8, 64, 0, GC_INIT_CENTROIDS, 1, 1e-4, GC_METRIC_EUCLIDEAN, 2, 0);
	test_multi(70000, 40, 20, 4, GC_INIT_KMEANSPP, 3, 1e-4, GC_METRIC_EUCLIDEAN, 2, 0);
	/* the whole problem does not fit one GPU's budget */
	test_multi(100000, 32, 64, 0, GC_INIT_KMEANSPP, 1, 1e-4, GC_METRIC_EUCLIDEAN, 2, 60000);
	test_multi(100000, 24, 32, 0, GC_INIT_KMEANS_PARALLEL, 1, 1e-4, GC_METRIC_COSINE, 2, 60000);
	/* k-means|| over the shards: cosine; fewer candidates than k (5
	 * distinct rows), then k-means++ over the shards */
	test_multi(90000, 24, 300, 0, GC_INIT_AUTO, 1, 1e-4, GC_METRIC_COSINE, 2, 0);
	test_multi(50000, 3, 40, 3, GC_INIT_KMEANS_PARALLEL, 1, 0.0, GC_METRIC_EUCLIDEAN, 3, 0);
	/* a shard of one repeated row: after it is a candidate it draws none
	 * (k-means||) and its total is 0 (k-means++) */
	test_multi(60000, 8, 300, 7, GC_INIT_KMEANS_PARALLEL, 1, 1e-4, GC_METRIC_EUCLIDEAN, 2, 0);
	test_multi(60000, 8, 50, 7, GC_INIT_KMEANSPP, 1, 1e-4, GC_METRIC_EUCLIDEAN, 2, 0);
	/* few rows: shards of one block, and one shard */
	test_multi(5000, 4, 7, 1, GC_INIT_KMEANSPP, 1, 1e-4, GC_METRIC_EUCLIDEAN, 3, 0);
	test_multi(3000, 4, 7, 1, GC_INIT_KMEANSPP, 1, 1e-4, GC_METRIC_EUCLIDEAN, 2, 0);
}

static void *
conc_thread(void *arg)
{
	conc_call  *c = arg;
	gc_kmeans_result r;
	gc_status	st = {0};

	conc_alloc(&r, c->n, c->d, c->k);
	for (int rep = 0; rep < c->reps; rep++)
	{
		gc_code		rc = gc_kmeans_gpu(NULL, c->X, c->n, c->d, &c->p, &r, &st);

		if (rc != GC_OK)
		{
			c->rc = rc;
			snprintf(c->msg, sizeof(c->msg), "%s", st.message);
			break;
		}
		c->differ += memcmp(r.labels, c->ref.labels, sizeof(int32_t) * c->n) != 0 ||
			memcmp(r.centroids, c->ref.centroids, sizeof(float) * c->k * c->d) != 0 ||
			memcmp(r.distance, c->ref.distance, sizeof(double) * c->n) != 0 ||
			r.iterations != c->ref.iterations;
	}
	conc_free(&r);
	return NULL;
}

/*
 * Four calls whose kernels take different amounts of dynamic shared memory
 * (the update's per-cluster sums, the screen's and wgmma's tiles, by k and
 * d), each first alone, then all four at once, repeated.
 */
static void
test_concurrent(void)
{
	static const int shapes[][3] = {{60000, 64, 100}, {50000, 128, 150},
	{40000, 256, 120}, {60000, 40, 300}};
	conc_call	c[4];
	pthread_t	t[4];

	for (int i = 0; i < 4; i++)
	{
		gc_status	st = {0};
		gc_code		rc;

		memset(&c[i], 0, sizeof(c[i]));
		c[i].n = shapes[i][0];
		c[i].d = shapes[i][1];
		c[i].k = shapes[i][2];
		c[i].reps = quick ? 2 : 6;
		c[i].X = make_data(c[i].n, c[i].d, i % 2);
		c[i].p = (gc_kmeans_params) {.k = c[i].k, .max_iter = 12, .tol = 0,
			.init = GC_INIT_RANDOM, .n_init = 1, .seed = tu_next(&rs)};
		conc_alloc(&c[i].ref, c[i].n, c[i].d, c[i].k);
		rc = gc_kmeans_gpu(NULL, c[i].X, c[i].n, c[i].d, &c[i].p, &c[i].ref, &st);
		CHECK(rc == GC_OK, "concurrent: n=%lld d=%d k=%d alone: %s", (long long) c[i].n,
			  c[i].d, c[i].k, st.message);
	}
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, conc_thread, &c[i]);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < 4; i++)
	{
		CHECK(c[i].rc == GC_OK && c[i].differ == 0,
			  "concurrent: n=%lld d=%d k=%d: %d of %d runs beside the others differ from it alone%s%s",
			  (long long) c[i].n, c[i].d, c[i].k, c[i].differ, c[i].reps,
			  c[i].rc != GC_OK ? "; a run failed: " : "", c[i].msg);
		conc_free(&c[i].ref);
		free(c[i].X);
	}
	printf("  concurrent: 4 shapes x %d runs at once, each = its run alone\n", c[0].reps);
}

int
main(int argc, char **argv)
{
	gc_cuda_device_info info;

	quick = getenv("GPUCLUST_TEST_QUICK") ? atoi(getenv("GPUCLUST_TEST_QUICK")) : 0;
	/* the near ties' windows at every k d (by default only where k d >=
	 * 2^17), so that every screened test goes through them; test_without
	 * compares fits with and without */
	if (!getenv("GPUCLUST_KM_TIES"))
		setenv("GPUCLUST_KM_TIES", "1", 1);
	rs = tu_seed();
	printf("test_kmeans_gpu: seed %llu%s\n", (unsigned long long) rs, quick ? " (quick)" : "");
	gc_cuda_probe(0, &info);
	if (!info.usable)
	{
		printf("no usable GPU: %s\n", info.reason);
		return 1;
	}
	printf("device: %s, cc %d.%d\n", info.name, info.cc_major, info.cc_minor);

	/* suites named on the command line: only those */
	{
		static const tu_suite suites[] = {{"labels", test_labels_suite}, {"multi", test_multi_suite},
		{"seed", test_seed_suite}, {"resident", test_resident_suite}, {"persist", test_persist_suite}};
		int			named = tu_named_suites(argc, argv, suites, 5);

		if (named < 0)
			return 2;
		if (named)
			return test_summary("test_kmeans_gpu");
	}

	test_errors();
	test_labels_suite();
	test_dispatch();
	/* the smallest problems: n = 1, and k = n (every launch sized from n, k, d >= 1) */
	test_full(1, 3, 1, 0, GC_INIT_KMEANSPP, 1, 1e-4);
	test_full(5, 2, 5, 1, GC_INIT_RANDOM, 1, 1e-4);
	test_full(7, 40, 7, 0, GC_INIT_KMEANSPP, 2, 1e-4);
	if (quick >= 2)
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
	test_concurrent();
	test_multi_suite();

	test_screen();
	test_seed(1000, 2, 10, 0);
	test_seed(30011, 3, 50, 1);
	test_seed(9000, 17, 33, 0);
	test_seed(5000, 9, 300, 3);	/* duplicates: few distinct rows */
	if (!quick)
	{
		static const int sd[] = {1, 2, 3, 8, 9, 32, 128};
		static const int sk[] = {1, 2, 100, 1000};

		test_seed(100000, 64, 100, 0);
		test_seed(50000, 1, 7, 2);
		for (int i = 0; i < 7; i++)
			for (int j = 0; j < 4; j++)
				test_seed(sk[j] >= 1000 ? 20011 : 40009, sd[i], sk[j], (i + j) % 4);
		test_seed(3000, 4, 1000, 3);
		test_seed(1000, 3, 1000, 1);	/* k = n */
		test_seed(300000, 8, 100, 0);	/* many fixed blocks */
		/* rows a thread (from 2 x 8 x 256 a SM): 4 loaded at once up to d =
		 * 4 (700001 on 132 SMs: 2 a thread, a group half full), or not */
		test_seed(1200007, 2, 60, 0);
		test_seed(700001, 3, 40, 1);
		test_seed(1100003, 9, 30, 0);
		test_seed(5000, 300, 20, 0);	/* d > 256: k-means||'s FP32 tiled batches */
		test_seed(4001, 257, 40, 3);
	}

	{
		static const int shapes[][4] = {
			/* n, d, k, kind */
			{5000, 2, 7, 0}, {20000, 3, 64, 1}, {12345, 1, 5, 0}, {30000, 8, 100, 0},
			{25000, 5, 300, 1}, {10000, 9, 17, 0}, {20000, 16, 130, 1}, {15000, 33, 256, 0},
			{8000, 64, 40, 2}, {6000, 130, 300, 0}, {50000, 32, 1, 0}, {40000, 4, 1100, 1},
			{200000, 2, 100, 1}, {100000, 32, 256, 1}, {50000, 128, 1000, 0},
			/* the grid (d <= 3, n >= 256 k) */
			{100000, 1, 100, 0}, {300000, 2, 1000, 0}, {100000, 3, 300, 2}, {50000, 2, 64, 3},
			{60000, 3, 40, 4}, {60000, 2, 30, 5}, {80000, 3, 200, 1},
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
			if (shapes[s][3] == 5)
				continue;		/* all near ties: the step compares exactly */
			test_full(shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3],
					  GC_INIT_KMEANSPP, 1, 1e-4);
		}
	}
	test_full(20000, 2, 9, 0, GC_INIT_RANDOM, 3, 1e-4);
	/* k-means|| and auto (k >= 256: k-means||) in whole fits */
	test_full(30000, 5, 50, 1, GC_INIT_KMEANS_PARALLEL, 2, 1e-4);
	test_full(20000, 33, 20, 0, GC_INIT_KMEANS_PARALLEL, 1, 1e-4);
	test_full(20000, 8, 300, 0, GC_INIT_AUTO, 1, 1e-4);
	test_full(5000, 3, 12, 3, GC_INIT_KMEANS_PARALLEL, 2, 1e-4);	/* duplicates */
	test_full(10000, 12, 20, 0, GC_INIT_RANDOM, 2, 0.0);
	/* duplicates: random init picks equal rows, so clusters go empty */
	test_full(3000, 2, 12, 3, GC_INIT_RANDOM, 2, 1e-4);
	test_full(3000, 11, 12, 3, GC_INIT_RANDOM, 2, 1e-4);
	test_step(4000, 3, 9, 3);
	test_step(4000, 10, 9, 3);
	test_reseed_steps();

	/* sample weights, cosine, given centroids: every assignment path (d 2,
	 * the grid at n >= 256 k, <= 8, the screen, > 256), re-seeding */
	{
		static const int shapes[][4] = {
			/* n, d, k, kind */
			{5000, 2, 7, 0}, {60000, 2, 30, 0}, {20000, 5, 40, 1}, {20000, 16, 130, 0},
			{15000, 33, 256, 0}, {8000, 64, 40, 2}, {4000, 300, 20, 0}, {30000, 8, 1100, 1},
		};
		static const int fl[] = {F_W, F_WHEAVY, F_COS, F_COS | F_W, F_GIVEN, F_GIVEN | F_COS | F_W};

		for (int s = 0; s < (int) (sizeof(shapes) / sizeof(shapes[0])); s++)
			for (int f = 0; f < (int) (sizeof(fl) / sizeof(fl[0])); f++)
			{
				if (quick && (shapes[s][0] > 20000 || f % 2 != s % 2))
					continue;
				test_features(shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3],
							  GC_INIT_KMEANSPP, 1, 1e-4, fl[f], 0);
			}
		if (!quick)				/* weighted k-means++, 4 rows a thread loaded at once */
			test_features(1200007, 2, 40, 0, GC_INIT_KMEANSPP, 1, 1e-4, F_W, 0);
		/* every seeding, n_init > 1, tol 0 */
		test_features(20000, 6, 20, 0, GC_INIT_RANDOM, 3, 1e-4, F_W, 0);
		test_features(20000, 12, 50, 0, GC_INIT_KMEANS_PARALLEL, 2, 1e-4, F_W | F_COS, 0);
		test_features(20000, 8, 300, 1, GC_INIT_AUTO, 1, 1e-4, F_WHEAVY, 0);
		test_features(10000, 12, 20, 0, GC_INIT_RANDOM, 2, 0.0, F_COS, 0);
		test_features(10000, 40, 25, 0, GC_INIT_KMEANS_PARALLEL, 2, 1e-4, F_COS, 0);
		/* duplicates and zero weights: clusters of no weight, re-seeded */
		test_features(3000, 2, 12, 3, GC_INIT_RANDOM, 2, 1e-4, F_W, 0);
		test_features(3000, 11, 12, 3, GC_INIT_RANDOM, 2, 1e-4, F_WHEAVY, 0);
		test_features(3000, 11, 12, 3, GC_INIT_RANDOM, 2, 1e-4, F_COS, 0);
		test_features(3000, 4, 12, 3, GC_INIT_RANDOM, 2, 1e-4, F_COS | F_W, 0);
		/* rows wider than a tile of the weighted sums (8192 floats) */
		test_features(2000, 9000, 3, 0, GC_INIT_KMEANSPP, 1, 1e-4, F_W | F_COS, 0);
		/* a cluster larger than a segment (GC_KM_SEGMENT rows), k = 1 */
		test_features(50000, 3, 1, 0, GC_INIT_KMEANSPP, 1, 1e-4, F_W, 0);
		test_features(50000, 32, 3, 0, GC_INIT_KMEANSPP, 1, 1e-4, F_WHEAVY | F_COS, 0);
		/* cosine streamed = resident */
		test_features(30000, 5, 20, 0, GC_INIT_KMEANSPP, 1, 1e-4, F_COS, 8192);
		test_features(30000, 20, 20, 0, GC_INIT_KMEANSPP, 2, 1e-4, F_COS | F_GIVEN, 8192);
		test_features(3000, 11, 12, 3, GC_INIT_RANDOM, 2, 1e-4, F_COS, 1024);
	}

	/* the bounds: fits with them = fits without, bit for bit */
	test_without("GPUCLUST_KM_PRUNE", 30000, 9, 17, 0, GC_INIT_KMEANSPP, 1, 1e-4, 0.0);
	test_without("GPUCLUST_KM_PRUNE", 40000, 16, 130, 1, GC_INIT_KMEANSPP, 1, 1e-6, 0.0);
	test_without("GPUCLUST_KM_PRUNE", 30000, 33, 256, 0, GC_INIT_KMEANSPP, 2, 1e-4, 0.0);
	test_without("GPUCLUST_KM_PRUNE", 20000, 64, 40, 2, GC_INIT_KMEANSPP, 1, 1e-4, 0.0);	/* far from the origin */
	test_without("GPUCLUST_KM_PRUNE", 12000, 130, 300, 0, GC_INIT_KMEANSPP, 1, 1e-4, 0.0);	/* wgmma's d */
	test_without("GPUCLUST_KM_PRUNE", 50000, 32, 1, 0, GC_INIT_KMEANSPP, 1, 1e-4, 0.4);	/* k = 1: all kept after the first */
	test_without("GPUCLUST_KM_PRUNE", 20000, 11, 12, 3, GC_INIT_RANDOM, 2, 1e-4, 0.0);	/* duplicates: ties, re-seeding */
	test_without("GPUCLUST_KM_PRUNE", 10000, 256, 50, 1, GC_INIT_RANDOM, 1, 0.0, 0.0);	/* uniform, tol 0 */
	test_without("GPUCLUST_KM_PRUNE", 3000, 20, 3000, 0, GC_INIT_KMEANSPP, 1, 1e-4, 0.0);	/* k = n */
	if (!quick)
	{
		test_without("GPUCLUST_KM_PRUNE", 200000, 32, 256, 0, GC_INIT_KMEANSPP, 1, 1e-6, 0.0);
		test_without("GPUCLUST_KM_PRUNE", 100000, 128, 1000, 0, GC_INIT_KMEANS_PARALLEL, 1, 1e-4, 0.0);	/* ~25 centres a blob: near ties */
		test_without("GPUCLUST_KM_PRUNE", 100000, 200, 64, 1, GC_INIT_RANDOM, 2, 1e-5, 0.0);	/* uniform: few kept */
	}

	/* the near ties' windows: fits with them = fits without, bit for bit */
	test_without("GPUCLUST_KM_TIES", 20000, 256, 200, 1, GC_INIT_RANDOM, 1, 1e-4, 0.9);	/* uniform: many ties */
	test_without("GPUCLUST_KM_TIES", 30000, 9, 17, 0, GC_INIT_KMEANSPP, 2, 1e-4, 0.0);
	test_without("GPUCLUST_KM_TIES", 20000, 33, 256, 2, GC_INIT_KMEANSPP, 1, 1e-4, 0.0);	/* far from the origin */
	test_without("GPUCLUST_KM_TIES", 20000, 11, 12, 3, GC_INIT_RANDOM, 2, 1e-4, 0.0);	/* duplicates: ties, re-seeding */
	test_without("GPUCLUST_KM_TIES", 30000, 130, 300, 1, GC_INIT_KMEANS_PARALLEL, 1, 1e-4, 0.5);	/* wgmma's d */
	if (!quick)
	{
		test_without("GPUCLUST_KM_TIES", 100000, 128, 1000, 0, GC_INIT_KMEANS_PARALLEL, 1, 1e-4, 0.0);	/* ~25 centres a blob: near ties */
		test_without("GPUCLUST_KM_TIES", 200000, 256, 2000, 1, GC_INIT_RANDOM, 1, 1e-4, 0.9);	/* FAISS-like */
	}

	test_resident_suite();

	/* the exact path's grid (d <= 3): its lists, then fits through it = fits without, bit for bit */
	test_grid_lists(1000000, 2, 100, 6.0);
	test_grid_lists(500000, 1, 300, 3.0);
	test_grid_lists(1000000, 3, 1000, 12.0);
	test_without("GPUCLUST_KM_GRID", 200000, 2, 100, 0, GC_INIT_KMEANSPP, 1, 1e-4, 1);
	test_without("GPUCLUST_KM_GRID", 100000, 1, 64, 1, GC_INIT_KMEANSPP, 2, 1e-6, 1);
	test_without("GPUCLUST_KM_GRID", 150000, 3, 300, 2, GC_INIT_KMEANS_PARALLEL, 1, 1e-4, 1);	/* far from the origin */
	test_without("GPUCLUST_KM_GRID", 50000, 2, 40, 3, GC_INIT_RANDOM, 2, 1e-4, 1);	/* duplicates: ties, re-seeding */
	test_without("GPUCLUST_KM_GRID", 60000, 3, 50, 4, GC_INIT_KMEANSPP, 1, 0.0, 1);	/* a constant feature */
	test_without("GPUCLUST_KM_GRID", 60000, 2, 30, 5, GC_INIT_KMEANSPP, 1, 1e-4, 1);	/* a few float steps wide */
	test_without("GPUCLUST_KM_GRID", 40000, 2, 200, 0, GC_INIT_KMEANSPP, 1, 1e-4, 0);	/* n < 256 k: none */
	test_without("GPUCLUST_KM_GRID", 60000, 2, 64, 6, GC_INIT_KMEANSPP, 1, 1e-4, -1);	/* an outlier: dropped */
	if (!quick)
	{
		test_without("GPUCLUST_KM_GRID", 2000000, 2, 1000, 0, GC_INIT_KMEANS_PARALLEL, 1, 1e-4, 1);
		test_without("GPUCLUST_KM_GRID", 1000000, 3, 2000, 1, GC_INIT_RANDOM, 1, 1e-4, 1);	/* uniform: many candidates */
	}

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
