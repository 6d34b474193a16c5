/*
 * test_dbscan_gpu.c — the GPU DBSCAN (cuda/dbscan*.cu) against the CPU path
 * (gc_dbscan_cpu), on fresh random data of many shapes.  Needs a GPU.
 *
 * Every case: labels AND is_core identical, row for row (outputs poisoned
 * first), and the index the GPU reports (`used`) and its phase record
 * (grid / tree flags, the tree's leaves) as the contract says: union-find
 * on auto is the grid for d <= 3 (the tree where the grid does not fit),
 * the kd-tree for d > 3; a forced tree (either schedule) is the tree; CUDA-DClust always
 * runs on the tree (auto, grid or tree asked), and refuses the brute force.
 * The CPU's answer is computed once per (data, eps, min_pts) and shared by
 * the GPU variants of a case (the cache below).
 *
 * Shapes: d = 1, 2, 3, 4, 8, 16, 32, 64; Gaussian blobs, uniform, blobs
 * far from the origin, heavy duplicates, integer lattices (exact distance
 * ties at eps, so the border tie rule matters), all noise, one giant
 * cluster, eps below and above the spread, min_pts 1 and large (also above
 * n); each case with union-find (auto: grid or tree) and CUDA-DClust, the
 * tree forced at d <= 3, the tree split in dimension order (the
 * directory's schedule, a test-only index) at d > 3 but in the tiny set,
 * and the brute force (forced, as before) where it was; five independent data sets per shape at d >= 4, two at d <= 3 (one
 * when quick).  Larger sets: 1M 2-d (grid, tree, DClust), 300k 3-d, 100k
 * 8-d, 200k and 500k 16-d, 200k 32-d, 50k 64-d blobs and uniform, 1M
 * 8-d blobs + noise, each with union-find and DClust;
 * world cities (lon, lat planar, eps 0.25, min_pts 10: 576 clusters,
 * 37,864 noise) on the grid, the brute force, the tree and DClust;
 * repeated runs identical; errors (bad parameters, cancel flag on every
 * index and algorithm, DClust on the brute force, n = 0); on every index
 * and both algorithms the inputs with an empty range somewhere (no core
 * point, no non-core point, one cell, n = 1, sizes around a warp, a block
 * and a leaf); n identical points, a cluster through many leaves (a random
 * walk, in input order and shuffled), a line of exact ties.
 *
 * The multi suite (test_dbscan_gpu multi runs it alone): calls split over
 * two or three GPUs (GPU 0 for every slab on a machine of one) = the CPU,
 * on every shape of d <= 8, every index and algorithm, halos past the
 * spread, min_pts above a slab's rows, fewer rows than GPUs, cosine, and
 * the default limit on the rows the slabs hold.  The transfers suite
 * (test_dbscan_gpu transfers) runs the pinned rings' round trips alone;
 * the screen suite (test_dbscan_gpu screen) the tree's count and union on
 * the tensor-core screen at every d, on the exact tiles, and the count's
 * second pass by query node (screen_suite); the grid suite
 * (test_dbscan_gpu grid) the grid's dense unions without their faces
 * first and its 64-bit cell keys (grid_suite).
 *
 * GPUCLUST_TEST_SEED fixes the data; GPUCLUST_TEST_QUICK=1 runs a smaller
 * set (compute-sanitizer memcheck, initcheck, synccheck), =2 a tiny one
 * (racecheck).  GPUCLUST_DB_TRACE=1 names each case on stderr before it
 * runs (with the GPU's own trace).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "testutil.h"
#include "common/gpu.h"
#include "knn_eps.h"
#include "multi_gpus.h"

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
	K_DUP,						/* coordinates from {0..4} (d > 4: the first
								 * 4, the rest 0): heavy duplicates */
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
				v = j < 4 ? (double) (int) (tu_uniform(&rs) * 5) : 0.0;
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

/* knn_eps over KNN_EPS_ROWS rows drawn first, in order, from this program's generator */
static double
eps_for(const float *X, int64_t n, int d, int k)
{
	int64_t		rows[KNN_EPS_ROWS];

	for (int s = 0; s < KNN_EPS_ROWS; s++)
		rows[s] = (int64_t) (tu_uniform(&rs) * n);
	return knn_eps(X, n, d, k, rows);
}

static int	n_cases;
static double cpu_ms_all,
			gpu_ms_all;

static const char *
index_name(gc_dbscan_gpu_index_kind k)
{
	return k == GC_DBSCAN_GPU_GRID ? "grid" : k == GC_DBSCAN_GPU_BRUTE ? "brute" :
		k == GC_DBSCAN_GPU_TREE ? "tree" : k == GC_DBSCAN_GPU_TREE_CYCLIC ? "cyclic" : "auto";
}

static const char *
alg_name(gc_dbscan_algorithm a)
{
	return a == GC_DBSCAN_DCLUST ? "dclust" : "uf";
}

/*
 * The index the contract says ran: DClust and a forced tree on the tree,
 * a forced brute force on itself, union-find on auto or grid the tree for
 * d > 3 and the grid or (when the grid does not fit) the tree for d <= 3.
 */
static bool
used_ok(gc_dbscan_gpu_index_kind index, gc_dbscan_algorithm alg, int d,
		gc_dbscan_gpu_index_kind used)
{
	if (alg == GC_DBSCAN_DCLUST || index == GC_DBSCAN_GPU_TREE ||
		index == GC_DBSCAN_GPU_TREE_CYCLIC)
		return used == GC_DBSCAN_GPU_TREE;
	if (index == GC_DBSCAN_GPU_BRUTE)
		return used == GC_DBSCAN_GPU_BRUTE;
	if (d > 3)
		return used == GC_DBSCAN_GPU_TREE;
	return used == GC_DBSCAN_GPU_GRID || used == GC_DBSCAN_GPU_TREE;
}

/*
 * The CPU's answer to the last (data, eps, min_pts) asked: the GPU variants
 * of one case (index, algorithm) compare against one CPU run.  The data
 * are known by their size and a hash of their bits (callers rewrite
 * buffers in place).
 */
static struct
{
	bool		valid;
	uint64_t	h;
	int64_t		n;
	int			d;
	double		eps;
	int64_t		min_pts;
	int32_t    *l;
	uint8_t    *c;
}			ref;

static uint64_t
hash_data(const float *X, int64_t n, int d)
{
	uint64_t	h = UINT64_C(0xcbf29ce484222325) ^ ((uint64_t) n * 64 + (uint64_t) d);

	for (int64_t i = 0; i < n * d; i++)
	{
		uint32_t	w;

		memcpy(&w, X + i, sizeof(w));
		h = (h ^ w) * UINT64_C(0x100000001b3);
		h ^= h >> 31;
	}
	return h;
}

/* lc, cc: the CPU's labels and core flags for X (from the cache or run). */
static bool
cpu_ref(const float *X, int64_t n, int d, double eps, int64_t min_pts,
		const int32_t **lc, const uint8_t **cc, double *ms)
{
	uint64_t	h = hash_data(X, n, d);
	gc_dbscan_params p = {.eps = eps, .min_pts = min_pts, .algorithm = GC_DBSCAN_UNION_FIND};
	gc_status	st = {0};
	double		t0;
	bool		ok;

	*ms = -1.0;					/* cached */
	if (!(ref.valid && ref.h == h && ref.n == n && ref.d == d && ref.eps == eps &&
		  ref.min_pts == min_pts))
	{
		free(ref.l);
		free(ref.c);
		ref.valid = false;
		ref.l = malloc(sizeof(int32_t) * (n + 1));
		ref.c = malloc(n + 1);
		t0 = now_ms();
		ok = gc_dbscan_cpu(NULL, X, n, d, &p, ref.l, ref.c, &st) == GC_OK;
		*ms = now_ms() - t0;
		cpu_ms_all += *ms;
		CHECK(ok, "cpu: %s", st.message);
		if (!ok)
			return false;
		ref.valid = true;
		ref.h = h;
		ref.n = n;
		ref.d = d;
		ref.eps = eps;
		ref.min_pts = min_pts;
	}
	*lc = ref.l;
	*cc = ref.c;
	return true;
}

/* The first five rows where the GPU's labels or flags differ from the CPU's. */
static void
show_diffs(const int32_t *lc, const uint8_t *cc, const int32_t *lg, const uint8_t *cg, int64_t n)
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

/*
 * One comparison: the GPU with this index and algorithm against the CPU
 * (union-find: the CPU refuses DClust); repeat > 1 runs the GPU again and
 * wants the same bits.  Returns the cluster count (or -1).
 */
static int
compare(const char *what, const float *X, int64_t n, int d, double eps,
		int64_t min_pts, gc_dbscan_gpu_index_kind index, gc_dbscan_algorithm alg,
		int repeat)
{
	gc_dbscan_params p = {.eps = eps, .min_pts = min_pts, .algorithm = alg};
	const int32_t *lc;
	const uint8_t *cc;
	int32_t    *lg = malloc(sizeof(int32_t) * (n + 1)),
			   *l2 = malloc(sizeof(int32_t) * (n + 1));
	uint8_t    *cg = malloc(n + 1),
			   *c2 = malloc(n + 1);
	gc_status	st = {0};
	gc_dbscan_gpu_index_kind used = GC_DBSCAN_GPU_AUTO;
	gc_dbscan_gpu_phases ph;
	int64_t		ldiff = 0,
				cdiff = 0,
				noise = 0,
				ncore = 0;
	int32_t		maxl = -1;
	double		tc,
				t1,
				t2;
	bool		phok;
	char		tree_s[64] = "";
	int			ok;

	n_cases++;
	if (getenv("GPUCLUST_DB_TRACE"))
		fprintf(stderr, "case %s n=%lld d=%d eps=%g min_pts=%lld index=%s algorithm=%s\n",
				what, (long long) n, d, eps, (long long) min_pts, index_name(index),
				alg_name(alg));
	if (!cpu_ref(X, n, d, eps, min_pts, &lc, &cc, &tc))
		goto out;

	memset(lg, 0xa5, sizeof(int32_t) * n);
	memset(cg, 0xa5, n);
	t1 = now_ms();
	ok = gc_dbscan_gpu_index(NULL, X, n, d, &p, index, &used, lg, cg, &st) == GC_OK;
	t2 = now_ms();
	gpu_ms_all += t2 - t1;
	gc_dbscan_gpu_last_phases(&ph);

	CHECK(ok, "%s (%s, %s) n=%lld d=%d: gpu: %s", what, index_name(index), alg_name(alg),
		  (long long) n, d, st.message);
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
	if (used == GC_DBSCAN_GPU_TREE)
		snprintf(tree_s, sizeof(tree_s), " leaves=%lld pairs=%lld",
				 (long long) ph.ncell, (long long) ph.pairs);
	printf("%-28s n=%-8lld d=%-2d eps=%-10.4g min_pts=%-6lld %-5s %-6s clusters=%-6d noise=%-7lld core=%-7lld  diff labels=%lld core=%lld  (cpu %s%.1f ms, gpu %.1f ms)%s\n",
		   what, (long long) n, d, eps, (long long) min_pts,
		   index_name(used), alg_name(alg), maxl + 1,
		   (long long) noise, (long long) ncore, (long long) ldiff, (long long) cdiff,
		   tc < 0 ? "cached " : "", tc < 0 ? 0.0 : tc, t2 - t1, tree_s);
	CHECK(ldiff == 0 && cdiff == 0, "%s (%s asked, %s ran, %s) n=%lld d=%d eps=%g min_pts=%lld: %lld labels, %lld core flags differ",
		  what, index_name(index), index_name(used), alg_name(alg), (long long) n, d, eps,
		  (long long) min_pts, (long long) ldiff, (long long) cdiff);
	if (ldiff || cdiff)
		show_diffs(lc, cc, lg, cg, n);
	CHECK(used_ok(index, alg, d, used), "%s n=%lld d=%d: %s asked with %s, %s ran",
		  what, (long long) n, d, index_name(index), alg_name(alg), index_name(used));
	phok = used == GC_DBSCAN_GPU_TREE ? ph.tree == 1 && ph.grid == 0 && ph.ncell >= 1 && ph.pairs >= 0 :
		used == GC_DBSCAN_GPU_GRID ? ph.grid == 1 && ph.tree == 0 :
		ph.grid == 0 && ph.tree == 0;
	CHECK(phok, "%s n=%lld d=%d (%s ran): phases grid=%d tree=%d ncell=%lld pairs=%lld",
		  what, (long long) n, d, index_name(used), ph.grid, ph.tree,
		  (long long) ph.ncell, (long long) ph.pairs);
	for (int r = 1; r < repeat; r++)
	{
		memset(l2, 0x5a, sizeof(int32_t) * n);
		memset(c2, 0x5a, n);
		t1 = now_ms();
		CHECK(gc_dbscan_gpu_index(NULL, X, n, d, &p, index, NULL, l2, c2, &st) == GC_OK,
			  "repeat: %s", st.message);
		gpu_ms_all += now_ms() - t1;
		CHECK(memcmp(l2, lg, sizeof(int32_t) * n) == 0 && memcmp(c2, cg, n) == 0,
			  "%s (%s, %s): repeated GPU run differs", what, index_name(index), alg_name(alg));
	}
out:
	free(lg);
	free(l2);
	free(cg);
	free(c2);
	return maxl + 1;
}

/*
 * A case on every GPU path that should give it: union-find and DClust on
 * auto, the tree forced where auto is the grid (d <= 3), and the brute
 * force when asked.  One CPU run (the cache).
 */
static void
variants(const char *what, const float *X, int64_t n, int d, double eps,
		 int64_t min_pts, bool brute)
{
	compare(what, X, n, d, eps, min_pts, GC_DBSCAN_GPU_AUTO, GC_DBSCAN_UNION_FIND, 1);
	compare(what, X, n, d, eps, min_pts, GC_DBSCAN_GPU_AUTO, GC_DBSCAN_DCLUST, 1);
	if (d <= 3)
		compare(what, X, n, d, eps, min_pts, GC_DBSCAN_GPU_TREE, GC_DBSCAN_UNION_FIND, 1);
	if (brute)
		compare(what, X, n, d, eps, min_pts, GC_DBSCAN_GPU_BRUTE, GC_DBSCAN_UNION_FIND, 1);
	if (d > 3 && quick < 2)
		compare(what, X, n, d, eps, min_pts, GC_DBSCAN_GPU_TREE_CYCLIC, GC_DBSCAN_UNION_FIND, 1);
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
			variants(w, X, n, d, eps_list[a], mp_list[a], also_brute);
		}
		free(X);
		return;
	}
	e5 = eps_for(X, n, d, 5);
	snprintf(w, sizeof(w), "%s minpts5", name);
	variants(w, X, n, d, e5, 5, also_brute);
	snprintf(w, sizeof(w), "%s minpts1", name);
	variants(w, X, n, d, 0.5 * e5, 1, false);
	if (quick >= 2)
	{
		free(X);
		return;
	}
	snprintf(w, sizeof(w), "%s minpts-large", name);
	variants(w, X, n, d, 2.0 * e5, quick ? 20 : 60, also_brute);
	snprintf(w, sizeof(w), "%s all-noise", name);
	variants(w, X, n, d, 1e-4 * e5, 3, also_brute);
	snprintf(w, sizeof(w), "%s eps>spread", name);
	variants(w, X, n, d, 3.0 * spread, 4, false);
	snprintf(w, sizeof(w), "%s eps>spread minpts>n", name);
	variants(w, X, n, d, 3.0 * spread, n + 7, also_brute);
	snprintf(w, sizeof(w), "%s giant", name);
	variants(w, X, n, d, 4.0 * e5, 3, false);
	free(X);
}

/*
 * The tree's count and union on the tensor-core screen (dbscan_screen.cuh)
 * where they do not run by default: at every d (GPUCLUST_DB_SCREEN=all) on the data whose
 * distances fall exactly on eps (integer lattices, duplicates) and blobs
 * far from the origin, at d = 1 to 8; the exact tiles they replace (=0) at
 * 16 and 64 dimensions; and the count's second pass by query node, which
 * the gathered pass replaces (GPUCLUST_DB_GATHER=0), at 4 and 16.  The
 * full run takes it after the shapes; test_dbscan_gpu screen runs it alone.
 */
static void
screen_suite(void)
{
	static const int dims[] = {1, 2, 4, 8};
	const int64_t n = quick >= 2 ? 300 : quick ? 1500 : 8000;
	char		w[64];

	setenv("GPUCLUST_DB_SCREEN", "all", 1);
	for (size_t i = 0; i < sizeof(dims) / sizeof(dims[0]); i++)
	{
		const int	d = dims[i];

		snprintf(w, sizeof(w), "screen all: lattice %d-d", d);
		family(n, d, K_LATTICE, w, false);
		if (quick >= 2)
			continue;
		snprintf(w, sizeof(w), "screen all: duplicates %d-d", d);
		family(n, d, K_DUP, w, false);
		snprintf(w, sizeof(w), "screen all: far blobs %d-d", d);
		family(n / 2, d, K_FAR, w, false);
	}
	setenv("GPUCLUST_DB_SCREEN", "0", 1);
	for (int d = 16; d <= 64; d *= 4)
	{
		snprintf(w, sizeof(w), "screen off: blobs %d-d", d);
		family(quick ? n : n / 2, d, K_BLOBS, w, false);
	}
	unsetenv("GPUCLUST_DB_SCREEN");
	setenv("GPUCLUST_DB_GATHER", "0", 1);
	for (int d = 4; d <= 16; d *= 4)
	{
		snprintf(w, sizeof(w), "gather off: blobs %d-d", d);
		family(quick ? n : n / 2, d, K_BLOBS, w, false);
	}
	unsetenv("GPUCLUST_DB_GATHER");
}

/*
 * The grid's paths that the shapes above do not take: its dense unions
 * without their faces first (GPUCLUST_DB_FACES=0, dbscan_grid.cu's
 * k_grid_union_faces), which every other grid case runs with, on blobs,
 * duplicates and lattices (distances exactly eps) at d = 1 to 3; and cell
 * keys wider than 32 bits (two 3-d blobs 10,000 apart).  The full run
 * takes it after the screen suite; test_dbscan_gpu grid runs it alone.
 */
static void
grid_suite(void)
{
	const int64_t n = quick >= 2 ? 600 : quick ? 4000 : 40000;
	char		w[64];
	float	   *X = malloc(sizeof(float) * 3 * n);

	for (int64_t i = 0; i < n; i++)
		for (int j = 0; j < 3; j++)
			X[i * 3 + j] = (float) ((i % 2 ? 10000.0 : 0.0) + gauss());
	compare("grid: wide 3-d (64-bit cell keys)", X, n, 3, 0.2, 10, GC_DBSCAN_GPU_GRID,
			GC_DBSCAN_UNION_FIND, 1);
	free(X);

	setenv("GPUCLUST_DB_FACES", "0", 1);
	for (int d = 1; d <= 3; d++)
	{
		snprintf(w, sizeof(w), "faces off: blobs %d-d", d);
		family(n, d, K_BLOBS, w, false);
		if (quick >= 2)
			continue;
		snprintf(w, sizeof(w), "faces off: duplicates %d-d", d);
		family(n, d, K_DUP, w, false);
		snprintf(w, sizeof(w), "faces off: lattice %d-d", d);
		family(n, d, K_LATTICE, w, false);
	}
	unsetenv("GPUCLUST_DB_FACES");
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
	int			k = compare("world cities", X, n, 2, 0.25, 10, GC_DBSCAN_GPU_AUTO,
							GC_DBSCAN_UNION_FIND, 3);

	CHECK(gc_dbscan_gpu(NULL, X, n, 2, &p, lg, cg, &st) == GC_OK, "cities: %s", st.message);
	for (int64_t i = 0; i < n; i++)
	{
		noise += lg[i] == GC_NOISE;
		if (lg[i] > maxl)
			maxl = lg[i];
	}
	CHECK(k == 576 && maxl + 1 == 576 && noise == 37864,
		  "cities: %d clusters, %lld noise (want 576, 37864)", maxl + 1, (long long) noise);
	compare("world cities", X, n, 2, 0.25, 10, GC_DBSCAN_GPU_BRUTE, GC_DBSCAN_UNION_FIND, 1);
	compare("world cities", X, n, 2, 0.25, 10, GC_DBSCAN_GPU_TREE, GC_DBSCAN_UNION_FIND, 2);
	k = compare("world cities", X, n, 2, 0.25, 10, GC_DBSCAN_GPU_AUTO, GC_DBSCAN_DCLUST, 3);
	CHECK(k == 576, "cities dclust: %d clusters", k);
	/* DClust asked with the grid: the tree */
	compare("world cities", X, n, 2, 0.25, 10, GC_DBSCAN_GPU_GRID, GC_DBSCAN_DCLUST, 1);
	/* the GPU's own count through gc_dbscan_gpu with DClust */
	p.algorithm = GC_DBSCAN_DCLUST;
	noise = 0;
	maxl = -1;
	CHECK(gc_dbscan_gpu(NULL, X, n, 2, &p, lg, cg, &st) == GC_OK, "cities dclust: %s", st.message);
	for (int64_t i = 0; i < n; i++)
	{
		noise += lg[i] == GC_NOISE;
		if (lg[i] > maxl)
			maxl = lg[i];
	}
	CHECK(maxl + 1 == 576 && noise == 37864,
		  "cities dclust: %d clusters, %lld noise (want 576, 37864)", maxl + 1, (long long) noise);
	free(lg);
	free(cg);
	free(X);
}

/*
 * The GPU paths of the small cases: every index with union-find (the grid
 * and the forced tree at d <= 3 only: above, auto is the tree) and DClust.
 */
static const struct
{
	gc_dbscan_gpu_index_kind index;
	gc_dbscan_algorithm alg;
}			all_paths[] = {
	{GC_DBSCAN_GPU_AUTO, GC_DBSCAN_UNION_FIND},
	{GC_DBSCAN_GPU_GRID, GC_DBSCAN_UNION_FIND},
	{GC_DBSCAN_GPU_BRUTE, GC_DBSCAN_UNION_FIND},
	{GC_DBSCAN_GPU_TREE, GC_DBSCAN_UNION_FIND},
	{GC_DBSCAN_GPU_AUTO, GC_DBSCAN_DCLUST},
};

static void
every_path(const char *what, const float *X, int64_t n, int d, double eps, int64_t min_pts)
{
	for (size_t k = 0; k < sizeof(all_paths) / sizeof(all_paths[0]); k++)
	{
		if (d > 3 && (all_paths[k].index == GC_DBSCAN_GPU_GRID ||
					  all_paths[k].index == GC_DBSCAN_GPU_TREE))
			continue;
		compare(what, X, n, d, eps, min_pts, all_paths[k].index, all_paths[k].alg, 1);
	}
}

/*
 * The inputs with an empty range somewhere (no core point, no non-core
 * point, one cell or leaf, every point in one cell, n = 1, sizes around a
 * warp, a block and a leaf), on every path (every_path): the grid (auto
 * and forced, d <= 3), the brute force, the tree (forced at d <= 3, auto
 * above) and DClust.
 */
static void
degenerate(void)
{
	static const int dims_full[] = {1, 2, 3, 5, 16, 64};
	static const int dims_tiny[] = {1, 2, 5, 16};
	static const int sizes_full[] = {2, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257,
	511, 512, 513, 1023, 1024, 1025};
	static const int sizes_quick[] = {2, 31, 32, 33, 127, 128, 129, 255, 256, 257, 1025};
	static const int sizes_tiny[] = {2, 32, 33, 256, 257};
	const int  *dims = quick >= 2 ? dims_tiny : dims_full;
	const int	ndims = quick >= 2 ? 4 : 6;
	const int  *sizes = quick >= 2 ? sizes_tiny : quick ? sizes_quick : sizes_full;
	const int	nsizes = quick >= 2 ? 5 : quick ? 11 : 19;
	const int64_t N = 300;
	const int64_t NX = 1025;	/* the largest size; > N */
	float	   *X = malloc(sizeof(float) * NX * 64);
	char		w[80];

	for (int di = 0; di < ndims; di++)
	{
		const int	d = dims[di];

#define DEG(label, n, eps, mp) \
		do { \
			snprintf(w, sizeof(w), "deg %s", label); \
			every_path(w, X, n, d, eps, mp); \
		} while (0)

		/* one point: core with min_pts 1, noise with 2 */
		for (int j = 0; j < d; j++)
			X[j] = 0.5f;
		DEG("n=1 min_pts=1", 1, 1.0, 1);
		DEG("n=1 min_pts=2", 1, 1.0, 2);

		/* every point the same: one cell, one leaf; all core, or none */
		for (int64_t i = 0; i < N * d; i++)
			X[i] = 3.25f;
		DEG("identical min_pts=1", 257, 0.1, 1);
		DEG("identical min_pts=n", 257, 0.1, 257);
		DEG("identical min_pts>n", 257, 0.1, 258);

		/* a line of unit steps: eps 0.5 all noise; eps 1 (ties at eps)
		 * min_pts 2 all core, no border; min_pts 3 two borders */
		for (int64_t i = 0; i < N; i++)
			for (int j = 0; j < d; j++)
				X[i * d + j] = j == 0 ? (float) i : 0.0f;
		DEG("line all-noise", N, 0.5, 2);
		DEG("line all-core", N, 1.0, 2);
		DEG("line two-border", N, 1.0, 3);
		DEG("line min_pts>n", N, 1e6, N + 1);

		/* every point in one small box (one grid cell, a dense node) */
		for (int64_t i = 0; i < N * d; i++)
			X[i] = (float) (7.0 + 0.01 * tu_uniform(&rs));
		DEG("one-cell min_pts=n/2", N, 1.0, N / 2);
		DEG("one-cell min_pts>n", N, 1.0, N + 1);

		/* two tight groups far apart and isolated points: clusters with
		 * no border point, and noise */
		for (int64_t i = 0; i < N; i++)
			for (int j = 0; j < d; j++)
				X[i * d + j] = i < 120 ? (float) (0.001 * tu_uniform(&rs)) :
					i < 240 ? (float) (100.0 + 0.001 * tu_uniform(&rs)) :
					(float) (1000.0 * (i - 239) + j);
		DEG("two groups + noise", N, 0.5, 10);

		/* sizes around a warp, a block and a leaf: uniform, a few
		 * neighbours (d > 3: eps from the 4th neighbour) */
		for (int si = 0; si < nsizes; si++)
		{
			int64_t		n = sizes[si];
			char		lab[40];
			double		e;

			for (int64_t i = 0; i < n * d; i++)
				X[i] = (float) tu_uniform(&rs);
			e = d <= 3 ? 0.6 * pow(4.0 / (double) n, 1.0 / d) : eps_for(X, n, d, 4);
			snprintf(lab, sizeof(lab), "uniform n=%lld", (long long) n);
			DEG(lab, n, e, 3);
		}
#undef DEG
	}
	free(X);
}

/*
 * The tree's and DClust's own hard inputs, at d = 2, 4, 16, 64: n
 * identical points (a leaf that cannot split; all core, all border-free,
 * or none core), identical points among others, one cluster through many
 * leaves (a random walk of steps 0.5, in input order and shuffled: its
 * rows then spread over the whole input), a long line of exact ties at eps
 * along the last axis, and eps = 1e30 (eps2 infinite: every box within
 * eps).
 */
static void
edges(void)
{
	static const int dims[] = {2, 4, 16, 64};
	const int64_t nid = quick >= 2 ? 200 : quick ? 1000 : 10000;
	const int64_t nw = quick >= 2 ? 300 : quick ? 1500 : 6000;
	const int64_t nmax = nid > nw ? nid : nw;
	float	   *X = malloc(sizeof(float) * nmax * 64),
			   *Y = malloc(sizeof(float) * nmax * 64);
	double		step[64];
	char		w[80];

	for (size_t di = 0; di < sizeof(dims) / sizeof(dims[0]); di++)
	{
		const int	d = dims[di];
		double		e;

		if (quick >= 2 && d != 4 && d != 16)
			continue;			/* racecheck: 64-d is in the families */

		/* n identical points */
		for (int64_t i = 0; i < nid * d; i++)
			X[i] = -2.5f;
		snprintf(w, sizeof(w), "identical n=%lld", (long long) nid);
		variants(w, X, nid, d, 0.5, 1, false);
		variants(w, X, nid, d, 0.5, nid, false);
		variants(w, X, nid, d, 0.5, nid + 1, false);
		/* eps2 underflows to 0: equal points are still neighbours */
		variants(w, X, nid, d, 1e-30, 2, false);

		/* 60% of the rows one point (the centre), the rest uniform around
		 * it; eps from the uniform rows alone */
		for (int64_t i = 0; i < nid * d; i++)
			X[i] = (float) (1.0 + 4.0 * tu_uniform(&rs) - 2.0);
		e = eps_for(X, nid, d, 5);
		for (int64_t i = 0; i < nid; i++)
			if (tu_uniform(&rs) < 0.6)
				for (int j = 0; j < d; j++)
					X[i * d + j] = 1.0f;
		variants("identical + uniform", X, nid, d, e, 5, false);
		variants("identical + uniform", X, nid, d, e, nid / 2, false);

		/* a line of unit steps along the last axis: ties at eps 1 */
		if (quick < 2)
		{
			for (int64_t i = 0; i < nw; i++)
				for (int j = 0; j < d; j++)
					X[i * d + j] = j == d - 1 ? (float) i : 0.0f;
			variants("long line", X, nw, d, 1.0, 3, false);
		}

		/* a random walk of steps 0.5: one cluster through every leaf */
		for (int j = 0; j < d; j++)
			X[j] = 0.0f;
		for (int64_t i = 1; i < nw; i++)
		{
			double		len = 0.0;

			for (int j = 0; j < d; j++)
			{
				step[j] = gauss();
				len += step[j] * step[j];
			}
			len = sqrt(len) + 1e-300;
			for (int j = 0; j < d; j++)
				X[i * d + j] = (float) (X[(i - 1) * d + j] + 0.5 * step[j] / len);
		}
		variants("walk", X, nw, d, 0.55, 2, false);
		variants("walk", X, nw, d, 0.55, 3, false);
		if (quick < 2)
		{
			variants("walk", X, nw, d, 0.3, 2, false);
			variants("walk eps 1e30", X, nw, d, 1e30, 5, false);
		}
		/* the same rows shuffled */
		memcpy(Y, X, sizeof(float) * nw * d);
		for (int64_t i = nw - 1; i > 0; i--)
		{
			int64_t		k = (int64_t) (tu_uniform(&rs) * (double) (i + 1));

			if (k > i)
				k = i;
			for (int j = 0; j < d; j++)
			{
				float		t = Y[i * d + j];

				Y[i * d + j] = Y[k * d + j];
				Y[k * d + j] = t;
			}
		}
		variants("walk shuffled", Y, nw, d, 0.55, 2, false);
		variants("walk shuffled", Y, nw, d, 0.55, 3, false);
	}
	free(X);
	free(Y);
}

static void
errors(void)
{
	float		X[8] = {0, 0, 1, 1, 2, 2, 3, 3};
	int32_t		l[4];
	uint8_t		c[4];
	gc_status	st = {0};
	gc_dbscan_params p = {.eps = 1.0, .min_pts = 2};
	gc_dbscan_params pdc = {.eps = 1.0, .min_pts = 2, .algorithm = GC_DBSCAN_DCLUST};
	gc_dbscan_params bad_eps = {.eps = 0.0, .min_pts = 2},
				bad_mp = {.eps = 1.0, .min_pts = 0},
				nan_eps = {.eps = NAN, .min_pts = 2},
				bad_alg = {.eps = 1.0, .min_pts = 2, .algorithm = (gc_dbscan_algorithm) 7};
	volatile sig_atomic_t flag = 1;
	gc_ctx		ctx = {.n_threads = 0, .cancel_flags = {&flag, NULL}};
	static const gc_dbscan_gpu_index_kind kinds[] = {
		GC_DBSCAN_GPU_AUTO, GC_DBSCAN_GPU_GRID, GC_DBSCAN_GPU_BRUTE, GC_DBSCAN_GPU_TREE
	};

	/* the core's entry checks the contract; the GPU code trusts it */
	CHECK(gc_dbscan_on_gpu(NULL, X, 4, 2, &bad_eps, l, c, &st) == GC_EINVAL, "eps 0");
	CHECK(gc_dbscan_on_gpu(NULL, X, 4, 2, &nan_eps, l, c, &st) == GC_EINVAL, "eps nan");
	CHECK(gc_dbscan_on_gpu(NULL, X, 4, 2, &bad_mp, l, c, &st) == GC_EINVAL, "min_pts 0");
	CHECK(gc_dbscan_on_gpu(NULL, X, 4, 2, &bad_alg, l, c, &st) == GC_EINVAL, "algorithm 7");
	CHECK(gc_dbscan_on_gpu(NULL, X, 4, 0, &p, l, c, &st) == GC_EINVAL, "d 0");
	CHECK(gc_dbscan_gpu(NULL, X, 0, 2, &p, l, c, &st) == GC_OK, "n 0");
	CHECK(gc_dbscan_gpu(NULL, X, 0, 2, &pdc, l, c, &st) == GC_OK, "n 0 dclust: %s", st.message);
	CHECK(gc_dbscan_gpu_index(NULL, X, 0, 8, &p, GC_DBSCAN_GPU_TREE, NULL, l, c, &st) == GC_OK,
		  "n 0 tree: %s", st.message);
	CHECK(gc_dbscan_on_gpu(&ctx, X, 4, 2, &p, l, c, &st) == GC_ECANCEL, "cancel");
	/* the flag raised before the call: every index, both algorithms (not
	 * the brute force with DClust, refused) */
	for (int k = 0; k < 4; k++)
	{
		CHECK(gc_dbscan_gpu_index(&ctx, X, 4, 2, &p, kinds[k], NULL, l, c, &st) == GC_ECANCEL,
			  "cancel %s: %s", index_name(kinds[k]), st.message);
		if (kinds[k] != GC_DBSCAN_GPU_BRUTE)
			CHECK(gc_dbscan_gpu_index(&ctx, X, 4, 2, &pdc, kinds[k], NULL, l, c, &st) == GC_ECANCEL,
				  "cancel %s dclust: %s", index_name(kinds[k]), st.message);
	}
	CHECK(gc_dbscan_gpu_index(&ctx, X, 1, 8, &p, GC_DBSCAN_GPU_AUTO, NULL, l, c, &st) == GC_ECANCEL,
		  "cancel d 8: %s", st.message);
	CHECK(gc_dbscan_gpu_index(&ctx, X, 1, 8, &pdc, GC_DBSCAN_GPU_TREE, NULL, l, c, &st) == GC_ECANCEL,
		  "cancel d 8 dclust: %s", st.message);
	CHECK(gc_dbscan_gpu_index(NULL, X, 1, 8, &p, GC_DBSCAN_GPU_GRID, NULL, l, c, &st) == GC_EINVAL,
		  "grid d 8");
	/* DClust runs on the tree only: the brute force refuses it */
	CHECK(gc_dbscan_gpu_index(NULL, X, 4, 2, &pdc, GC_DBSCAN_GPU_BRUTE, NULL, l, c, &st) == GC_EINVAL,
		  "brute + dclust: %s", st.message);
	printf("  brute + dclust: %s\n", st.message);
	CHECK(gc_dbscan_gpu_index(NULL, X, 1, 8, &pdc, GC_DBSCAN_GPU_BRUTE, NULL, l, c, &st) == GC_EINVAL,
		  "brute + dclust d 8: %s", st.message);
	/* and the CPU refuses DClust */
	CHECK(gc_dbscan_cpu(NULL, X, 4, 2, &pdc, l, c, &st) == GC_EINVAL, "cpu dclust: %s", st.message);
	/* DClust asked with the grid or the tree: the tree runs */
	compare("grid + dclust", X, 4, 2, 1.0, 2, GC_DBSCAN_GPU_GRID, GC_DBSCAN_DCLUST, 1);
	compare("tree + dclust", X, 4, 2, 1.0, 2, GC_DBSCAN_GPU_TREE, GC_DBSCAN_DCLUST, 1);
	/* n = 1 */
	every_path("n=1", X, 1, 2, 1.0, 1);
	every_path("n=1 minpts2", X, 1, 2, 1.0, 2);
	every_path("n=1 d=8", X, 1, 8, 1.0, 1);
	/* huge eps: eps2 overflows to inf (grid unusable -> tree) */
	every_path("eps 1e30", X, 4, 2, 1e30, 2);
	/* tiny eps: eps2 underflows (only equal points are neighbours) */
	every_path("eps 1e-30", X, 4, 2, 1e-30, 1);
}

/*
 * metric cosine through gc_dbscan_on_gpu (the Euclidean kernels on the
 * unit rows) against gc_dbscan_cpu: grid (d <= 3) and tree, union-find and
 * DClust, rows of random lengths; a zero row is an error on both.
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
			gc_dbscan_params p = {.eps = d == 16 ? 0.05 * (e + 1) : 0.002 * (e + 1), .min_pts = 5,
			.metric = GC_METRIC_COSINE};
			int64_t		ld = 0,
						cdf = 0,
						noise = 0,
						core = 0;

			CHECK(gc_dbscan_cpu(NULL, X, n, d, &p, lc, cc, &st) == GC_OK, "cosine cpu: %s", st.message);
			for (int a = 0; a < 2; a++)
			{
				gc_dbscan_params pg = p;

				pg.algorithm = a ? GC_DBSCAN_DCLUST : GC_DBSCAN_UNION_FIND;
				n_cases++;
				ld = cdf = noise = core = 0;
				CHECK(gc_dbscan_on_gpu(NULL, X, n, d, &pg, lg, cg, &st) == GC_OK, "cosine gpu %s: %s",
					  alg_name(pg.algorithm), st.message);
				for (int64_t i = 0; i < n; i++)
				{
					ld += lg[i] != lc[i];
					cdf += cg[i] != cc[i];
					noise += lc[i] == GC_NOISE;
					core += cc[i] != 0;
				}
				printf("%-28s n=%-8lld d=%-2d eps=%-10.4g %-6s noise=%-7lld core=%-7lld  diff labels=%lld core=%lld\n",
					   "cosine", (long long) n, d, p.eps, alg_name(pg.algorithm),
					   (long long) noise, (long long) core, (long long) ld, (long long) cdf);
				CHECK(ld == 0 && cdf == 0, "cosine %s d=%d eps=%g: %lld labels, %lld core flags differ",
					  alg_name(pg.algorithm), d, p.eps, (long long) ld, (long long) cdf);
			}
		}
		{
			gc_dbscan_params p = {.eps = 0.1, .min_pts = 2, .metric = GC_METRIC_COSINE};

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
		  ch == GC_DEVICE_GPU, "auto, 1M 16-d rows, CUDA started: gpu");
	CHECK(gc_choose_device(GC_DEVICE_AUTO, GC_ALGO_DBSCAN, 1000, 16, &g0, &ch, &st) == GC_OK &&
		  ch == GC_DEVICE_CPU, "auto, 1,000 16-d rows: cpu");
	CHECK(gc_choose_device(GC_DEVICE_AUTO, GC_ALGO_DBSCAN, 1000000, 65, &g0, &ch, &st) == GC_OK &&
		  ch == GC_DEVICE_CPU, "auto, 65-d: cpu");
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

/*
 * The pinned ring of every upload and download (cuda/common/transfer.cu):
 * round trips of sizes around its chunk (1 MiB) and its slots (32), on 1,
 * 3, 8 and 16 host threads, downloaded in 1, 3 and 8 pieces, and as
 * flagged words.
 */
static void
transfers(void)
{
	const size_t mb = (size_t) 1 << 20;
	const size_t sizes[] = {1000, mb - 1, mb, mb + 1, 7 * mb + 13, 32 * mb,
	32 * mb + 4099, 71 * mb + 5};
	static const int threads[] = {1, 3, 8, 16};
	static const int pieces[] = {1, 3, 8};

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
	{
		if (quick && sizes[i] > 32 * mb)
			continue;
		for (int t = 0; t < 4; t++)
			for (int g = 0; g < 3; g++)
			{
				char		msg[160];
				double		up,
							down;
				int			rc = gc_xfer_test(sizes[i], pieces[g], threads[t],
											  tu_next(&rs), &up, &down, msg,
											  sizeof(msg));

				CHECK(rc == 0, "transfer of %zu bytes, %d threads, %d pieces: %s",
					  sizes[i], threads[t], pieces[g], msg);
			}
	}
}

/* ---- one call split over several GPUs (cuda/dbscan/dbscan_multi.cu) ---- */

/* The GPUs the multi suite splits over: 0 and 1 when there are two, else
 * GPU 0 for every slab; a third slab on GPU 0. */
static int	multi_gpus[3];

/*
 * The call split over ngpus of multi_gpus against the CPU, labels and core
 * flags bit for bit; want: the GPUs it must have run on (0: any).
 */
static void
multi_case(const char *what, const float *X, int64_t n, int d, double eps,
		   int64_t min_pts, gc_dbscan_gpu_index_kind index, gc_dbscan_algorithm alg,
		   int ngpus, int want)
{
	gc_ctx		ctx = {.n_gpus = ngpus, .gpus = multi_gpus};
	gc_dbscan_params p = {.eps = eps, .min_pts = min_pts, .algorithm = alg};
	const int32_t *lc;
	const uint8_t *cc;
	int32_t    *lg = malloc(sizeof(int32_t) * (n + 1));
	uint8_t    *cg = malloc(n + 1);
	gc_status	st = {0};
	gc_dbscan_gpu_index_kind used = GC_DBSCAN_GPU_AUTO;
	gc_dbscan_gpu_phases ph;
	int64_t		ldiff = 0,
				cdiff = 0;
	double		tc,
				t1,
				t2;
	bool		ok;

	n_cases++;
	if (getenv("GPUCLUST_DB_TRACE"))
		fprintf(stderr, "multi case %s n=%lld d=%d eps=%g min_pts=%lld %s %s on %d GPUs\n",
				what, (long long) n, d, eps, (long long) min_pts, index_name(index),
				alg_name(alg), ngpus);
	if (!cpu_ref(X, n, d, eps, min_pts, &lc, &cc, &tc))
		goto out;
	memset(lg, 0xa5, sizeof(int32_t) * (n + 1));
	memset(cg, 0xa5, n + 1);
	t1 = now_ms();
	ok = gc_dbscan_gpu_index(&ctx, X, n, d, &p, index, &used, lg, cg, &st) == GC_OK;
	t2 = now_ms();
	gpu_ms_all += t2 - t1;
	gc_dbscan_gpu_last_phases(&ph);
	CHECK(ok, "multi %s (%s, %s) n=%lld d=%d on %d GPUs: %s", what, index_name(index),
		  alg_name(alg), (long long) n, d, ngpus, st.message);
	if (!ok)
		goto out;
	for (int64_t i = 0; i < n; i++)
	{
		ldiff += lg[i] != lc[i];
		cdiff += cg[i] != cc[i];
	}
	printf("  multi %-26s n=%-8lld d=%-2d eps=%-9.4g min_pts=%-5lld %-5s %-6s %d GPUs: ran on %d, held %.2f n, "
		   "diff labels=%lld core=%lld (gpu %.1f ms: split %.1f, merge %.1f)\n",
		   what, (long long) n, d, eps, (long long) min_pts, index_name(used), alg_name(alg),
		   ngpus, ph.gpus, n > 0 ? (double) ph.held / (double) n : 0.0, (long long) ldiff,
		   (long long) cdiff, t2 - t1, ph.ms_split, ph.ms_merge);
	CHECK(ldiff == 0 && cdiff == 0, "multi %s (%s, %s) n=%lld d=%d eps=%g min_pts=%lld on %d GPUs: "
		  "%lld labels, %lld core flags differ", what, index_name(index), alg_name(alg),
		  (long long) n, d, eps, (long long) min_pts, ngpus, (long long) ldiff, (long long) cdiff);
	if (ldiff || cdiff)
		show_diffs(lc, cc, lg, cg, n);
	CHECK(lg[n] == (int32_t) 0xa5a5a5a5 && cg[n] == 0xa5,
		  "multi %s n=%lld: wrote past the output", what, (long long) n);
	if (n >= 1000)
		CHECK(used_ok(index, alg, d, used), "multi %s n=%lld d=%d: %s asked with %s, %s ran",
			  what, (long long) n, d, index_name(index), alg_name(alg), index_name(used));
	CHECK(want == 0 || ph.gpus == want, "multi %s n=%lld d=%d: ran on %d GPUs, want %d",
		  what, (long long) n, d, ph.gpus, want);
out:
	free(lg);
	free(cg);
}

/* Cosine through the core's entry (gc_dbscan_on_gpu), split over two. */
static void
multi_cosine(int64_t n, int d, double eps)
{
	gc_ctx		ctx = {.n_gpus = 2, .gpus = multi_gpus};
	gc_dbscan_params p = {.eps = eps, .min_pts = 5, .metric = GC_METRIC_COSINE};
	float	   *X = make_data(n, d, K_BLOBS);
	int32_t    *lc = malloc(sizeof(int32_t) * n),
			   *lg = malloc(sizeof(int32_t) * n);
	uint8_t    *cc = malloc(n),
			   *cg = malloc(n);
	gc_status	st = {0};
	gc_dbscan_gpu_phases ph;
	int64_t		diff = 0;

	n_cases++;
	for (int64_t i = 0; i < n * d; i += d)
		X[i] += 0.01f;			/* no zero row */
	CHECK(gc_dbscan_cpu(NULL, X, n, d, &p, lc, cc, &st) == GC_OK, "multi cosine cpu: %s", st.message);
	CHECK(gc_dbscan_on_gpu(&ctx, X, n, d, &p, lg, cg, &st) == GC_OK, "multi cosine gpu: %s", st.message);
	gc_dbscan_gpu_last_phases(&ph);
	for (int64_t i = 0; i < n; i++)
		diff += lg[i] != lc[i] || cg[i] != cc[i];
	printf("  multi cosine n=%lld d=%d eps=%g: ran on %d GPUs, %lld rows differ\n", (long long) n, d,
		   eps, ph.gpus, (long long) diff);
	CHECK(diff == 0, "multi cosine n=%lld d=%d: %lld rows differ", (long long) n, d, (long long) diff);
	CHECK(ph.gpus == 2, "multi cosine n=%lld d=%d: ran on %d GPUs", (long long) n, d, ph.gpus);
	free(X);
	free(lc);
	free(lg);
	free(cc);
	free(cg);
}

static void
test_multi_suite(void)
{
	static const int dims[] = {1, 2, 3, 4, 8};
	char		w[64];

	tu_multi_gpus(multi_gpus, "slabs");

	/* every call split wherever the sample cuts, however wide its halo */
	gc_dbscan_gpu_set_split_held(INFINITY);
	for (size_t di = 0; di < sizeof(dims) / sizeof(dims[0]); di++)
	{
		const int	d = dims[di];
		const int64_t n = quick ? (d <= 3 ? 6000 : 3000) : (d <= 3 ? 60000 : 20000);
		static const int kinds[] = {K_BLOBS, K_UNIFORM, K_DUP, K_LATTICE};
		static const char *const names[] = {"blobs", "uniform", "duplicates", "lattice"};

		for (int k = 0; k < 4; k++)
		{
			float	   *X;
			double		eps[4];
			int64_t		mp[4];
			int			cases;

			if (kinds[k] == K_LATTICE && d > 4)
				continue;
			X = make_data(n, d, kinds[k]);
			if (kinds[k] == K_DUP || kinds[k] == K_LATTICE)
			{
				/* exact distances: eps on them (ties) */
				eps[0] = 1.0, mp[0] = 5;
				eps[1] = 1.5, mp[1] = 1;
				cases = 2;
			}
			else
			{
				double		e5 = eps_for(X, n, d, 5);

				eps[0] = e5, mp[0] = 5;
				eps[1] = 0.5 * e5, mp[1] = 1;
				eps[2] = 2.0 * e5, mp[2] = quick ? 20 : 60;
				eps[3] = 4.0 * e5, mp[3] = 3;
				cases = quick ? 2 : 4;
			}
			for (int c = 0; c < cases; c++)
			{
				snprintf(w, sizeof(w), "%s", names[k]);
				multi_case(w, X, n, d, eps[c], mp[c], GC_DBSCAN_GPU_AUTO, GC_DBSCAN_UNION_FIND, 2,
						   kinds[k] == K_BLOBS ? 2 : 0);
				multi_case(w, X, n, d, eps[c], mp[c], GC_DBSCAN_GPU_AUTO, GC_DBSCAN_DCLUST, 3, 0);
				if (d <= 3 && !quick)
					multi_case(w, X, n, d, eps[c], mp[c], GC_DBSCAN_GPU_TREE, GC_DBSCAN_UNION_FIND, 2, 0);
			}
			free(X);
		}
	}
	{
		/* the brute force; eps past the spread (every row in every slab, all
		 * shared); min_pts above any slab's rows; too few rows to cut */
		const int64_t n = quick ? 3000 : 8000;
		float	   *X = make_data(n, 2, K_BLOBS);
		double		e5 = eps_for(X, n, 2, 5);

		multi_case("blobs brute", X, n, 2, e5, 5, GC_DBSCAN_GPU_BRUTE, GC_DBSCAN_UNION_FIND, 2, 2);
		multi_case("eps>spread", X, n, 2, 60.0, 4, GC_DBSCAN_GPU_AUTO, GC_DBSCAN_UNION_FIND, 2, 2);
		multi_case("eps>spread minpts>n", X, n, 2, 60.0, n + 7, GC_DBSCAN_GPU_AUTO,
				   GC_DBSCAN_UNION_FIND, 3, 3);
		multi_case("minpts>slab", X, n, 2, 6.0, n / 2 + n / 8, GC_DBSCAN_GPU_AUTO,
				   GC_DBSCAN_UNION_FIND, 2, 2);
		multi_case("all noise", X, n, 2, 1e-4 * e5, 3, GC_DBSCAN_GPU_AUTO, GC_DBSCAN_UNION_FIND, 3, 3);
		for (int64_t m = 1; m <= 5; m++)
			multi_case("tiny", X, m, 2, 3.0, 1, GC_DBSCAN_GPU_AUTO, GC_DBSCAN_UNION_FIND, 3, 0);
		multi_case("one warp", X, 33, 2, 3.0, 2, GC_DBSCAN_GPU_AUTO, GC_DBSCAN_UNION_FIND, 3, 0);
		multi_case("n = 0", X, 0, 2, 3.0, 2, GC_DBSCAN_GPU_AUTO, GC_DBSCAN_UNION_FIND, 2, 0);

		multi_cosine(quick ? 3000 : 20000, 8, 0.05);

		/* the default limit: a halo past the spread runs on one GPU */
		gc_dbscan_gpu_set_split_held(-1);
		multi_case("eps>spread, default", X, n, 2, 60.0, 4, GC_DBSCAN_GPU_AUTO,
				   GC_DBSCAN_UNION_FIND, 2, 1);
		multi_case("blobs, default", X, n, 2, e5, 5, GC_DBSCAN_GPU_AUTO, GC_DBSCAN_UNION_FIND, 2, 2);
		free(X);
	}
	if (!quick)
	{
		float	   *X = make_data(1000000, 2, K_BLOBS);
		double		e = eps_for(X, 1000000, 2, 20);

		multi_case("1M 2-d blobs", X, 1000000, 2, e, 20, GC_DBSCAN_GPU_AUTO, GC_DBSCAN_UNION_FIND, 2, 2);
		multi_case("1M 2-d blobs", X, 1000000, 2, e, 20, GC_DBSCAN_GPU_AUTO, GC_DBSCAN_UNION_FIND, 3, 3);
		multi_case("1M 2-d blobs", X, 1000000, 2, e, 20, GC_DBSCAN_GPU_AUTO, GC_DBSCAN_DCLUST, 2, 2);
		free(X);
		X = make_data(300000, 8, K_BLOBS);
		e = eps_for(X, 300000, 8, 10);
		multi_case("300k 8-d blobs", X, 300000, 8, e, 10, GC_DBSCAN_GPU_AUTO, GC_DBSCAN_UNION_FIND, 2, 0);
		free(X);
	}
	gc_dbscan_gpu_set_split_held(-1);
}

int
main(int argc, char **argv)
{
	gc_cuda_device_info info;
	const char *q = getenv("GPUCLUST_TEST_QUICK");
	static const int dims[] = {1, 2, 3, 4, 8, 16, 32, 64};
	double		t_start = now_ms();

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
	{
		static const tu_suite suites[] = {{"multi", test_multi_suite}, {"transfers", transfers},
			{"screen", screen_suite}, {"grid", grid_suite}};
		int			named = tu_named_suites(argc, argv, suites, 4);

		if (named < 0)
			return 2;
		if (named)
		{
			printf("%d cases; CPU reference %.1f s, GPU calls %.1f s, wall %.1f s\n", n_cases,
				   cpu_ms_all / 1e3, gpu_ms_all / 1e3, (now_ms() - t_start) / 1e3);
			return test_summary("test_dbscan_gpu");
		}
	}

	errors();
	transfers();
	dispatch();
	degenerate();
	edges();
	cosine();
	for (size_t i = 0; i < sizeof(dims) / sizeof(dims[0]); i++)
	{
		int			d = dims[i];
		int64_t		n;

		if (quick >= 2 && (d == 8 || d == 32))
			continue;			/* racecheck: 1, 2, 3, 4, 16, 64 */

		/* several independent data sets per shape (d > 3: five) */
		int			sets = quick ? 1 : d > 3 ? 5 : 2;

		if (quick >= 2)
			n = d <= 3 ? 600 : 300;
		else if (quick)
			n = d <= 3 ? 4000 : 1500;
		else
			n = d <= 3 ? 40000 : d <= 16 ? 20000 : 10000;
		for (int s = 0; s < sets; s++)
		{
			char		nm[5][32];
			static const char *const base[5] = {"blobs", "uniform", "far blobs", "duplicates", "lattice"};

			for (int k = 0; k < 5; k++)
				if (sets > 1)
					snprintf(nm[k], sizeof(nm[k]), "%s #%d", base[k], s + 1);
				else
					snprintf(nm[k], sizeof(nm[k]), "%s", base[k]);
			family(n, d, K_BLOBS, nm[0], d <= 3 && s == 0);
			if (quick >= 2)
				continue;
			family(n, d, K_UNIFORM, nm[1], false);
			family(n / 2, d, K_FAR, nm[2], d <= 3 && s == 0);
			family(n, d, K_DUP, nm[3], d <= 3 && s == 0);
			if (d <= 4)
				family(n, d, K_LATTICE, nm[4], d <= 2 && s == 0);
		}
	}
	screen_suite();
	grid_suite();
	if (!quick)
	{
		float	   *X = make_data(1000000, 2, K_BLOBS);
		double		e = eps_for(X, 1000000, 2, 20);

		compare("1M 2-d blobs (repeat x3)", X, 1000000, 2, e, 20, GC_DBSCAN_GPU_AUTO,
				GC_DBSCAN_UNION_FIND, 3);
		compare("1M 2-d blobs", X, 1000000, 2, e, 20, GC_DBSCAN_GPU_TREE, GC_DBSCAN_UNION_FIND, 1);
		compare("1M 2-d blobs", X, 1000000, 2, e, 20, GC_DBSCAN_GPU_AUTO, GC_DBSCAN_DCLUST, 1);
		compare("1M 2-d blobs min_pts 200", X, 1000000, 2, 3 * e, 200, GC_DBSCAN_GPU_AUTO,
				GC_DBSCAN_UNION_FIND, 1);
		free(X);
		/* larger sets, min_pts 10: union-find and DClust, each repeated */
		{
			static const struct
			{
				int64_t		n;
				int			d,
							kind,
							k;		/* eps: the k-th neighbour's distance */
				const char *name;
				int			rep_uf,
							rep_dc;
			}			big[] = {
				{300000, 3, K_BLOBS, 10, "300k 3-d blobs", 2, 1},
				{100000, 8, K_BLOBS, 10, "100k 8-d blobs", 2, 2},
				{200000, 16, K_BLOBS, 10, "200k 16-d blobs", 1, 2},
				{500000, 16, K_BLOBS, 30, "500k 16-d blobs", 1, 1},
				{200000, 32, K_BLOBS, 10, "200k 32-d blobs", 1, 1},
				{50000, 64, K_BLOBS, 10, "50k 64-d blobs", 1, 2},
				{50000, 64, K_UNIFORM, 10, "50k 64-d uniform", 1, 1},
				{1000000, 8, K_BLOBS, 10, "1M 8-d blobs + noise", 1, 1},
			};

			for (size_t b = 0; b < sizeof(big) / sizeof(big[0]); b++)
			{
				char		w[64];

				X = make_data(big[b].n, big[b].d, big[b].kind);
				e = eps_for(X, big[b].n, big[b].d, big[b].k);
				for (int a = 0; a < 2; a++)
				{
					int			r = a == 0 ? big[b].rep_uf : big[b].rep_dc;

					if (r > 1)
						snprintf(w, sizeof(w), "%s (repeat x%d)", big[b].name, r);
					else
						snprintf(w, sizeof(w), "%s", big[b].name);
					compare(w, X, big[b].n, big[b].d, e, 10, GC_DBSCAN_GPU_AUTO,
							a == 0 ? GC_DBSCAN_UNION_FIND : GC_DBSCAN_DCLUST, r);
				}
				free(X);
			}
		}
		cities();
	}
	test_multi_suite();
	printf("%d cases; CPU reference %.1f s, GPU calls %.1f s, wall %.1f s\n", n_cases,
		   cpu_ms_all / 1e3, gpu_ms_all / 1e3, (now_ms() - t_start) / 1e3);
	free(ref.l);
	free(ref.c);
	return test_summary("test_dbscan_gpu");
}
