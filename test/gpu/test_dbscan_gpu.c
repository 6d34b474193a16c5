/*
 * test_dbscan_gpu.c — the GPU DBSCAN (cuda/dbscan.cu) against the CPU path
 * (gc_dbscan_cpu), on fresh random data of many shapes.  Needs a GPU.
 *
 * Every case: labels AND is_core identical, row for row (outputs poisoned
 * first).  Shapes: d = 1, 2, 3, 4, 8, 16, 64; Gaussian blobs, uniform,
 * blobs far from the origin, heavy duplicates, integer lattices (exact
 * distance ties at eps, so the border tie rule matters), all noise, one
 * giant cluster, eps below and above the spread, min_pts 1 and large (also
 * above n); the grid (d <= 3) and the brute force (forced, any d); larger
 * sets (1M 2-d, 300k 3-d); world cities (lon, lat planar, eps 0.25,
 * min_pts 10: 576 clusters, 37,864 noise); repeated runs identical; errors
 * (bad parameters, cancel flag, n = 0); and on every index the inputs
 * with an empty range somewhere (no core point, no non-core point, one
 * cell, n = 1, sizes around a warp and a block).
 *
 * GPUCLUST_TEST_SEED fixes the data; GPUCLUST_TEST_QUICK=1 runs a smaller
 * set (compute-sanitizer memcheck), =2 a tiny one (racecheck).
 * GPUCLUST_TEST_ALGO=dclust runs every case with CUDA-DClust (on the tree;
 * the CPU reference stays union-find), GPUCLUST_TEST_TREE=1 puts the tree
 * where the brute force would cross-check (d <= 3); d > 3 runs the tree
 * in every variant (run_gpu_tests.sh dbscan-test runs all three).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "testutil.h"
#include "gpu.h"

static uint64_t rs;
static int	quick;

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static double
gauss(void)
{
	double		u = tu_uniform(&rs),
				v = tu_uniform(&rs);

	return sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v);
}

enum
{
	K_BLOBS,					/* Gaussian blobs + 5% uniform noise */
	K_UNIFORM,					/* uniform in [-10, 10]^d */
	K_FAR,						/* blobs around 1000 */
	K_DUP,						/* coordinates from {0..4}: heavy duplicates */
	K_LATTICE					/* integer lattice, 30% of points repeated */
};

static float *
make_data(int64_t n, int d, int kind)
{
	float	   *X = malloc(sizeof(float) * n * d);
	int			m = 3 + (int) (tu_uniform(&rs) * 20);
	float	   *cent = malloc(sizeof(float) * m * d);
	double		sigma = 0.2 + tu_uniform(&rs);
	double		off = kind == K_FAR ? 1000.0 : 0.0;
	int64_t		side = (int64_t) ceil(pow((double) n, 1.0 / d));

	for (int i = 0; i < m * d; i++)
		cent[i] = (float) (20.0 * tu_uniform(&rs) - 10.0);
	for (int64_t i = 0; i < n; i++)
	{
		int			c = (int) (tu_uniform(&rs) * m);
		bool		noise = (kind == K_BLOBS || kind == K_FAR) && tu_uniform(&rs) < 0.05;
		int64_t		cell = (int64_t) (tu_uniform(&rs) * (double) n);

		for (int j = 0; j < d; j++)
		{
			double		v;

			if (kind == K_UNIFORM || noise)
				v = off + 20.0 * tu_uniform(&rs) - 10.0;
			else if (kind == K_DUP)
				v = (double) (int) (tu_uniform(&rs) * 5);
			else if (kind == K_LATTICE)
			{
				int64_t		q = i < n * 7 / 10 ? i : cell;

				for (int t = 0; t < j; t++)
					q /= side;
				v = (double) (q % side);
			}
			else
				v = off + cent[c * d + j] + sigma * gauss();
			X[i * d + j] = (float) v;
		}
	}
	free(cent);
	return X;
}

static int
cmp_f(const void *a, const void *b)
{
	float		x = *(const float *) a,
				y = *(const float *) b;

	return (x > y) - (x < y);
}

/* Median over sampled points of the distance to the k-th nearest row. */
static double
eps_for(const float *X, int64_t n, int d, int k)
{
	int			S = 24;
	float	   *kd = malloc(sizeof(float) * S);
	float	   *best = malloc(sizeof(float) * (k + 1));

	if (k >= n)
		k = (int) n - 1;
	if (k < 1)
		k = 1;
	for (int s = 0; s < S; s++)
	{
		int64_t		i = (int64_t) (tu_uniform(&rs) * n);
		int			nb = 0;

		for (int64_t j = 0; j < n; j++)
		{
			float		dd = gc_dist2(X + i * d, X + j * d, d);
			int			t;

			if (nb == k + 1 && dd >= best[k])
				continue;
			t = nb < k + 1 ? nb++ : k;
			while (t > 0 && best[t - 1] > dd)
			{
				best[t] = best[t - 1];
				t--;
			}
			best[t] = dd;
		}
		kd[s] = sqrtf(best[nb - 1]);
	}
	qsort(kd, S, sizeof(float), cmp_f);
	double		e = kd[S / 2] > 0 ? kd[S / 2] : 1e-3;

	free(kd);
	free(best);
	return e;
}

static int	n_cases;

/* One comparison; returns the GPU's cluster count (or -1). */
static int
compare(const char *what, const float *X, int64_t n, int d, double eps,
		int64_t min_pts, gc_dbscan_gpu_index_kind index, int repeat)
{
	gc_dbscan_params p = {.eps = eps, .min_pts = min_pts};
	if (getenv("GPUCLUST_TEST_ALGO") && strcmp(getenv("GPUCLUST_TEST_ALGO"), "dclust") == 0)
	{
		p.algorithm = GC_DBSCAN_DCLUST;
		if (index == GC_DBSCAN_GPU_BRUTE)
			index = GC_DBSCAN_GPU_TREE;
	}
	if (getenv("GPUCLUST_TEST_TREE") && index == GC_DBSCAN_GPU_BRUTE)
		index = GC_DBSCAN_GPU_TREE;
	int32_t    *lc = malloc(sizeof(int32_t) * (n + 1)),
			   *lg = malloc(sizeof(int32_t) * (n + 1)),
			   *l2 = malloc(sizeof(int32_t) * (n + 1));
	uint8_t    *cc = malloc(n + 1),
			   *cg = malloc(n + 1),
			   *c2 = malloc(n + 1);
	gc_status	st = {0};
	gc_dbscan_gpu_index_kind used = GC_DBSCAN_GPU_AUTO;
	int64_t		ldiff = 0,
				cdiff = 0,
				noise = 0,
				ncore = 0;
	int32_t		maxl = -1;
	int			ok;

	n_cases++;
	if (getenv("GPUCLUST_DB_TRACE"))
		fprintf(stderr, "case %s n=%lld d=%d eps=%g min_pts=%lld index=%d: cpu\n",
				what, (long long) n, d, eps, (long long) min_pts, (int) index);
	double		t0 = now_ms();

	{
		gc_dbscan_params pc = p;

		pc.algorithm = GC_DBSCAN_UNION_FIND;
		CHECK(gc_dbscan_cpu(NULL, X, n, d, &pc, lc, cc, &st) == GC_OK, "cpu: %s", st.message);
	}
	double		t1 = now_ms();

	memset(lg, 0xa5, sizeof(int32_t) * n);
	memset(cg, 0xa5, n);
	ok = gc_dbscan_gpu_index(NULL, X, n, d, &p, index, &used, lg, cg, &st) == GC_OK;
	double		t2 = now_ms();

	CHECK(ok, "%s: gpu: %s", what, st.message);
	if (!ok)
		goto out;
	for (int64_t i = 0; i < n; i++)
	{
		ldiff += lg[i] != lc[i];
		cdiff += cg[i] != cc[i];
		noise += lc[i] == GC_NOISE;
		ncore += cc[i] != 0;
		if (lc[i] > maxl)
			maxl = lc[i];
	}
	printf("%-28s n=%-8lld d=%-2d eps=%-10.4g min_pts=%-6lld %-5s clusters=%-6d noise=%-7lld core=%-7lld  diff labels=%lld core=%lld  (cpu %.1f ms, gpu %.1f ms)\n",
		   what, (long long) n, d, eps, (long long) min_pts,
		   used == GC_DBSCAN_GPU_GRID ? "grid" : "brute", maxl + 1,
		   (long long) noise, (long long) ncore, (long long) ldiff, (long long) cdiff,
		   t1 - t0, t2 - t1);
	CHECK(ldiff == 0 && cdiff == 0, "%s n=%lld d=%d eps=%g min_pts=%lld: %lld labels, %lld core flags differ",
		  what, (long long) n, d, eps, (long long) min_pts, (long long) ldiff, (long long) cdiff);
	if (ldiff || cdiff)
	{
		int			shown = 0;

		for (int64_t i = 0; i < n && shown < 5; i++)
			if (lg[i] != lc[i] || cg[i] != cc[i])
			{
				fprintf(stderr, "  row %lld: cpu %d/%d gpu %d/%d\n", (long long) i,
						lc[i], cc[i], lg[i], cg[i]);
				shown++;
			}
	}
	for (int r = 1; r < repeat; r++)
	{
		memset(l2, 0x5a, sizeof(int32_t) * n);
		memset(c2, 0x5a, n);
		CHECK(gc_dbscan_gpu_index(NULL, X, n, d, &p, index, NULL, l2, c2, &st) == GC_OK,
			  "repeat: %s", st.message);
		CHECK(memcmp(l2, lg, sizeof(int32_t) * n) == 0 && memcmp(c2, cg, n) == 0,
			  "%s: repeated GPU run differs", what);
	}
out:
	free(lc);
	free(lg);
	free(l2);
	free(cc);
	free(cg);
	free(c2);
	return maxl + 1;
}

/* A family of cases on one data set. */
static void
family(int64_t n, int d, int kind, const char *name, bool also_brute)
{
	float	   *X = make_data(n, d, kind);
	double		e5,
				spread = 20.0 * sqrt((double) d) + (kind == K_FAR ? 10.0 : 0.0);
	char		w[64];

	if (kind == K_DUP || kind == K_LATTICE)
	{
		/* exact distances: eps on them (ties) and between them */
		double		eps_list[] = {1.0, 1.5, 0.5};
		int64_t		mp_list[] = {5, 1, 40};

		for (int a = 0; a < 3; a++)
		{
			snprintf(w, sizeof(w), "%s eps=%g", name, eps_list[a]);
			compare(w, X, n, d, eps_list[a], mp_list[a], GC_DBSCAN_GPU_AUTO, 1);
			if (also_brute)
				compare(w, X, n, d, eps_list[a], mp_list[a], GC_DBSCAN_GPU_BRUTE, 1);
		}
		free(X);
		return;
	}
	e5 = eps_for(X, n, d, 5);
	snprintf(w, sizeof(w), "%s minpts5", name);
	compare(w, X, n, d, e5, 5, GC_DBSCAN_GPU_AUTO, 1);
	if (also_brute)
		compare(w, X, n, d, e5, 5, GC_DBSCAN_GPU_BRUTE, 1);
	snprintf(w, sizeof(w), "%s minpts1", name);
	compare(w, X, n, d, 0.5 * e5, 1, GC_DBSCAN_GPU_AUTO, 1);
	if (quick >= 2)
	{
		free(X);
		return;
	}
	snprintf(w, sizeof(w), "%s minpts-large", name);
	compare(w, X, n, d, 2.0 * e5, quick ? 20 : 60, GC_DBSCAN_GPU_AUTO, 1);
	if (also_brute)
		compare(w, X, n, d, 2.0 * e5, quick ? 20 : 60, GC_DBSCAN_GPU_BRUTE, 1);
	snprintf(w, sizeof(w), "%s all-noise", name);
	compare(w, X, n, d, 1e-4 * e5, 3, GC_DBSCAN_GPU_AUTO, 1);
	if (also_brute)
		compare(w, X, n, d, 1e-4 * e5, 3, GC_DBSCAN_GPU_BRUTE, 1);
	snprintf(w, sizeof(w), "%s eps>spread", name);
	compare(w, X, n, d, 3.0 * spread, 4, GC_DBSCAN_GPU_AUTO, 1);
	snprintf(w, sizeof(w), "%s eps>spread minpts>n", name);
	compare(w, X, n, d, 3.0 * spread, n + 7, GC_DBSCAN_GPU_AUTO, 1);
	if (also_brute)
		compare(w, X, n, d, 3.0 * spread, n + 7, GC_DBSCAN_GPU_BRUTE, 1);
	snprintf(w, sizeof(w), "%s giant", name);
	compare(w, X, n, d, 4.0 * e5, 3, GC_DBSCAN_GPU_AUTO, 1);
	free(X);
}

/* World cities: (lon, lat) planar, eps 0.25, min_pts 10. */
static void
cities(void)
{
	FILE	   *f = popen("gzip -dc test/data/world_cities.csv.gz", "r");
	char		line[4096];
	int64_t		n = 0,
				cap = 1 << 18;
	float	   *X = malloc(sizeof(float) * 2 * cap);

	if (f == NULL || fgets(line, sizeof(line), f) == NULL)
	{
		CHECK(0, "cannot read world_cities.csv.gz");
		return;
	}
	while (fgets(line, sizeof(line), f) != NULL)
	{
		/* ...,lat,lon,population: the last three fields */
		char	   *c3 = strrchr(line, ','),
				   *c2,
				   *c1;

		if (c3 == NULL)
			continue;
		*c3 = '\0';
		c2 = strrchr(line, ',');
		if (c2 == NULL)
			continue;
		*c2 = '\0';
		c1 = strrchr(line, ',');
		if (c1 == NULL)
			continue;
		X[2 * n] = (float) strtod(c2 + 1, NULL);	/* lon */
		X[2 * n + 1] = (float) strtod(c1 + 1, NULL);	/* lat */
		n++;
	}
	pclose(f);
	CHECK(n == 135233, "cities: %lld rows", (long long) n);

	gc_dbscan_params p = {.eps = 0.25, .min_pts = 10};
	int32_t    *lg = malloc(sizeof(int32_t) * n);
	uint8_t    *cg = malloc(n);
	gc_status	st = {0};
	int64_t		noise = 0;
	int32_t		maxl = -1;
	int			k = compare("world cities", X, n, 2, 0.25, 10, GC_DBSCAN_GPU_AUTO, 3);

	CHECK(gc_dbscan_gpu(NULL, X, n, 2, &p, lg, cg, &st) == GC_OK, "cities: %s", st.message);
	for (int64_t i = 0; i < n; i++)
	{
		noise += lg[i] == GC_NOISE;
		if (lg[i] > maxl)
			maxl = lg[i];
	}
	CHECK(k == 576 && maxl + 1 == 576 && noise == 37864,
		  "cities: %d clusters, %lld noise (want 576, 37864)", maxl + 1, (long long) noise);
	compare("world cities", X, n, 2, 0.25, 10, GC_DBSCAN_GPU_BRUTE, 1);
	free(lg);
	free(cg);
	free(X);
}

/*
 * The inputs with an empty range somewhere (no core point, no non-core
 * point, one cell, every point in one cell, n = 1, sizes around a warp and
 * a block), on every index: the grid (auto and forced, d <= 3) and the
 * brute force.
 */
static void
degenerate(void)
{
	static const int dims[] = {1, 2, 3, 5};
	static const int sizes[] = {2, 31, 33, 255, 257};
	static const gc_dbscan_gpu_index_kind kinds[] = {
		GC_DBSCAN_GPU_AUTO, GC_DBSCAN_GPU_GRID, GC_DBSCAN_GPU_BRUTE
	};
	static const char *const kname[] = {"auto", "grid", "brute"};
	const int64_t N = 300;
	float	   *X = malloc(sizeof(float) * N * 5);
	char		w[80];

	for (size_t di = 0; di < sizeof(dims) / sizeof(dims[0]); di++)
		for (int ki = 0; ki < 3; ki++)
		{
			const int	d = dims[di];
			const gc_dbscan_gpu_index_kind kind = kinds[ki];

			if (d > 3 && kind != GC_DBSCAN_GPU_BRUTE)
				continue;		/* the brute force is the only index there */
#define DEG(label, n, eps, mp) \
			do { \
				snprintf(w, sizeof(w), "deg %s %s", kname[ki], label); \
				compare(w, X, n, d, eps, mp, kind, 1); \
			} while (0)

			/* one point: core with min_pts 1, noise with 2 */
			for (int j = 0; j < d; j++)
				X[j] = 0.5f;
			DEG("n=1 min_pts=1", 1, 1.0, 1);
			DEG("n=1 min_pts=2", 1, 1.0, 2);

			/* every point the same: one cell; all core, or none */
			for (int64_t i = 0; i < N * d; i++)
				X[i] = 3.25f;
			DEG("identical min_pts=1", 257, 0.1, 1);
			DEG("identical min_pts=n", 257, 0.1, 257);
			DEG("identical min_pts>n", 257, 0.1, 258);

			/* a line of unit steps: eps 0.5 all noise; eps 1 (ties at
			 * eps) min_pts 2 all core, no border; min_pts 3 two borders */
			for (int64_t i = 0; i < N; i++)
				for (int j = 0; j < d; j++)
					X[i * d + j] = j == 0 ? (float) i : 0.0f;
			DEG("line all-noise", N, 0.5, 2);
			DEG("line all-core", N, 1.0, 2);
			DEG("line two-border", N, 1.0, 3);
			DEG("line min_pts>n", N, 1e6, N + 1);

			/* every point in one small box (one grid cell) */
			for (int64_t i = 0; i < N * d; i++)
				X[i] = (float) (7.0 + 0.01 * tu_uniform(&rs));
			DEG("one-cell min_pts=n/2", N, 1.0, N / 2);
			DEG("one-cell min_pts>n", N, 1.0, N + 1);

			/* two tight groups far apart and isolated points: clusters
			 * with no border point, and noise */
			for (int64_t i = 0; i < N; i++)
				for (int j = 0; j < d; j++)
					X[i * d + j] = i < 120 ? (float) (0.001 * tu_uniform(&rs)) :
						i < 240 ? (float) (100.0 + 0.001 * tu_uniform(&rs)) :
						(float) (1000.0 * (i - 239) + j);
			DEG("two groups + noise", N, 0.5, 10);

			/* sizes around a warp and a block, uniform, a few neighbours */
			for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++)
			{
				int64_t		n = sizes[si];
				char		lab[40];

				for (int64_t i = 0; i < n * d; i++)
					X[i] = (float) tu_uniform(&rs);
				snprintf(lab, sizeof(lab), "uniform n=%lld", (long long) n);
				DEG(lab, n, 0.6 * pow(4.0 / (double) n, 1.0 / d), 3);
			}
#undef DEG
		}
	free(X);
}

static void
errors(void)
{
	float		X[8] = {0, 0, 1, 1, 2, 2, 3, 3};
	int32_t		l[4];
	uint8_t		c[4];
	gc_status	st = {0};
	gc_dbscan_params p = {.eps = 1.0, .min_pts = 2};
	gc_dbscan_params bad_eps = {.eps = 0.0, .min_pts = 2},
				bad_mp = {.eps = 1.0, .min_pts = 0},
				nan_eps = {.eps = NAN, .min_pts = 2};
	volatile sig_atomic_t flag = 1;
	gc_ctx		ctx = {.n_threads = 0, .cancel_flags = {&flag, NULL}};

	CHECK(gc_dbscan_gpu(NULL, X, 4, 2, &bad_eps, l, c, &st) == GC_EINVAL, "eps 0");
	CHECK(gc_dbscan_gpu(NULL, X, 4, 2, &nan_eps, l, c, &st) == GC_EINVAL, "eps nan");
	CHECK(gc_dbscan_gpu(NULL, X, 4, 2, &bad_mp, l, c, &st) == GC_EINVAL, "min_pts 0");
	CHECK(gc_dbscan_gpu(NULL, X, 4, 0, &p, l, c, &st) == GC_EINVAL, "d 0");
	CHECK(gc_dbscan_gpu(NULL, X, 0, 2, &p, l, c, &st) == GC_OK, "n 0");
	CHECK(gc_dbscan_gpu(&ctx, X, 4, 2, &p, l, c, &st) == GC_ECANCEL, "cancel");
	CHECK(gc_dbscan_gpu_index(NULL, X, 1, 8, &p, GC_DBSCAN_GPU_GRID, NULL, l, c, &st) == GC_EINVAL,
		  "grid d 8");
	/* n = 1 */
	compare("n=1", X, 1, 2, 1.0, 1, GC_DBSCAN_GPU_AUTO, 1);
	compare("n=1 minpts2", X, 1, 2, 1.0, 2, GC_DBSCAN_GPU_AUTO, 1);
	/* huge eps: eps2 overflows to inf (grid unusable -> brute) */
	compare("eps 1e30", X, 4, 2, 1e30, 2, GC_DBSCAN_GPU_AUTO, 1);
	/* tiny eps: eps2 underflows (only equal points are neighbours) */
	compare("eps 1e-30", X, 4, 2, 1e-30, 1, GC_DBSCAN_GPU_AUTO, 1);
}

/*
 * metric cosine through gc_dbscan_on_gpu (the Euclidean kernels on the
 * unit rows) against gc_dbscan_cpu: grid (d <= 3) and brute force, rows of
 * random lengths; a zero row is an error on both.
 */
static void
cosine(void)
{
	static const int dims[] = {2, 3, 16};

	for (size_t di = 0; di < sizeof(dims) / sizeof(dims[0]); di++)
	{
		const int	d = dims[di];
		const int64_t n = quick >= 2 ? 400 : quick ? 3000 : 20000;
		float	   *X = make_data(n, d, K_BLOBS);
		int32_t    *lc = malloc(sizeof(int32_t) * n),
				   *lg = malloc(sizeof(int32_t) * n);
		uint8_t    *cc = malloc(n),
				   *cg = malloc(n);
		gc_status	st = {0};
		uint64_t	rs = (uint64_t) d * 7919;

		for (int64_t i = 0; i < n; i++)
		{
			double		len = 0.5 + 20.0 * tu_uniform(&rs);

			for (int k = 0; k < d; k++)
				X[i * d + k] = (float) (X[i * d + k] * len + (k == 0 ? 0.01 : 0.0));
		}
		for (int e = 0; e < 3; e++)
		{
			gc_dbscan_params p = {d == 16 ? 0.05 * (e + 1) : 0.002 * (e + 1), 5,
			GC_METRIC_COSINE};
			int64_t		ld = 0,
						cdf = 0,
						noise = 0,
						core = 0;

			n_cases++;
			CHECK(gc_dbscan_cpu(NULL, X, n, d, &p, lc, cc, &st) == GC_OK, "cosine cpu: %s", st.message);
			CHECK(gc_dbscan_on_gpu(NULL, X, n, d, &p, lg, cg, &st) == GC_OK, "cosine gpu: %s", st.message);
			for (int64_t i = 0; i < n; i++)
			{
				ld += lg[i] != lc[i];
				cdf += cg[i] != cc[i];
				noise += lc[i] == GC_NOISE;
				core += cc[i] != 0;
			}
			printf("%-28s n=%-8lld d=%-2d eps=%-10.4g noise=%-7lld core=%-7lld  diff labels=%lld core=%lld\n",
				   "cosine", (long long) n, d, p.eps, (long long) noise, (long long) core,
				   (long long) ld, (long long) cdf);
			CHECK(ld == 0 && cdf == 0, "cosine d=%d eps=%g: %lld labels, %lld core flags differ",
				  d, p.eps, (long long) ld, (long long) cdf);
		}
		{
			gc_dbscan_params p = {0.1, 2, GC_METRIC_COSINE};

			for (int k = 0; k < d; k++)
				X[5 * d + k] = 0.0f;
			CHECK(gc_dbscan_on_gpu(NULL, X, n, d, &p, lg, cg, &st) == GC_EINVAL &&
				  strstr(st.message, "row 6") != NULL, "cosine zero row on the GPU: %s", st.message);
		}
		free(X);
		free(lc);
		free(lg);
		free(cc);
		free(cg);
	}
}

/*
 * Device choice (dispatch.c) for DBSCAN on a machine with a usable GPU,
 * in a process where CUDA already runs (main's probe).
 */
static void
dispatch(void)
{
	gc_device	ch;
	gc_status	st = {0};
	gc_gpu		g0;

	gc_gpu_local(&g0, 0);
	CHECK(gc_cuda_started(), "CUDA started by the probe");
	CHECK(gc_choose_device(GC_DEVICE_CPU, GC_ALGO_DBSCAN, 1000000, 2, &g0, &ch, &st) == GC_OK &&
		  ch == GC_DEVICE_CPU, "cpu");
	CHECK(gc_choose_device(GC_DEVICE_AUTO, GC_ALGO_DBSCAN, 1000, 2, &g0, &ch, &st) == GC_OK &&
		  ch == GC_DEVICE_CPU, "auto, 1,000 rows: cpu");
	CHECK(gc_choose_device(GC_DEVICE_AUTO, GC_ALGO_DBSCAN, 20000, 3, &g0, &ch, &st) == GC_OK &&
		  ch == GC_DEVICE_GPU, "auto, 20,000 3-d rows, CUDA started: gpu");
	CHECK(gc_choose_device(GC_DEVICE_AUTO, GC_ALGO_DBSCAN, 1000000, 16, &g0, &ch, &st) == GC_OK &&
		  ch == GC_DEVICE_CPU, "auto, 16-d: cpu");
	CHECK(gc_choose_device(GC_DEVICE_AUTO, GC_ALGO_DBSCAN, 10000000, 2, &g0, &ch, &st) == GC_OK &&
		  ch == GC_DEVICE_GPU, "auto, 10M 2-d: gpu");
	CHECK(gc_choose_device(GC_DEVICE_AUTO, GC_ALGO_DBSCAN, INT64_C(3000000000), 2, &g0, &ch, &st) == GC_OK &&
		  ch == GC_DEVICE_CPU, "auto, 3e9 rows: cpu");
	CHECK(gc_choose_device(GC_DEVICE_GPU, GC_ALGO_DBSCAN, 10, 5, &g0, &ch, &st) == GC_OK &&
		  ch == GC_DEVICE_GPU, "gpu, 10 rows: %s", st.message);
	CHECK(gc_choose_device(GC_DEVICE_GPU, GC_ALGO_DBSCAN, INT64_C(2000000000), 3, &g0, &ch, &st) ==
		  GC_ENOMEM, "gpu, 2e9 rows: %s", st.message);
	printf("  dispatch: gpu, 2e9 rows: %s\n", st.message);
}

int
main(void)
{
	gc_cuda_device_info info;
	const char *q = getenv("GPUCLUST_TEST_QUICK");
	static const int dims[] = {1, 2, 3, 4, 8, 16, 64};

	setvbuf(stdout, NULL, _IOLBF, 0);
	quick = q ? atoi(q) : 0;
	rs = tu_seed();
	printf("test_dbscan_gpu: seed %llu%s\n", (unsigned long long) rs,
		   quick ? (quick == 1 ? " (quick)" : " (tiny)") : "");
	gc_cuda_probe(0, &info);
	if (!info.usable)
	{
		printf("no usable GPU: %s\n", info.reason);
		return 1;
	}
	printf("device: %s\n", info.name);

	errors();
	dispatch();
	degenerate();
	cosine();
	for (size_t i = 0; i < sizeof(dims) / sizeof(dims[0]); i++)
	{
		int			d = dims[i];
		int64_t		n;

		if (quick >= 2)
			n = d <= 3 ? 600 : 300;
		else if (quick)
			n = d <= 3 ? 4000 : 1500;
		else
			n = d <= 3 ? 40000 : d <= 16 ? 12000 : 6000;
		family(n, d, K_BLOBS, "blobs", d <= 3);
		if (quick >= 2)
			continue;
		family(n, d, K_UNIFORM, "uniform", false);
		family(n / 2, d, K_FAR, "far blobs", d <= 3);
		family(n, d, K_DUP, "duplicates", d <= 3);
		if (d <= 4)
			family(n, d, K_LATTICE, "lattice", d <= 2);
	}
	if (!quick)
	{
		float	   *X = make_data(1000000, 2, K_BLOBS);
		double		e = eps_for(X, 1000000, 2, 20);

		compare("1M 2-d blobs (repeat x3)", X, 1000000, 2, e, 20, GC_DBSCAN_GPU_AUTO, 3);
		compare("1M 2-d blobs min_pts 200", X, 1000000, 2, 3 * e, 200, GC_DBSCAN_GPU_AUTO, 1);
		free(X);
		X = make_data(300000, 3, K_BLOBS);
		e = eps_for(X, 300000, 3, 10);
		compare("300k 3-d blobs", X, 300000, 3, e, 10, GC_DBSCAN_GPU_AUTO, 2);
		free(X);
		X = make_data(100000, 8, K_BLOBS);
		e = eps_for(X, 100000, 8, 10);
		compare("100k 8-d blobs (repeat x2)", X, 100000, 8, e, 10, GC_DBSCAN_GPU_AUTO, 2);
		free(X);
		cities();
	}
	printf("%d cases\n", n_cases);
	return test_summary("test_dbscan_gpu");
}
