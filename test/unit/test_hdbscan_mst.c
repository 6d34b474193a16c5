/*
 * test_hdbscan_mst.c — HDBSCAN's phases 1 and 2 on the CPU and the
 * driver's checks: the core distances and the minimum spanning tree
 * against the brute-force references of hdbscan_ref.h bit for bit, on
 * fresh random inputs each run (the seed is printed; GPUCLUST_TEST_SEED
 * replays it), with 1, 2 and 3 threads; scikit-learn's core distances and
 * MST weights of the fixtures (test/data/hdbscan, or GPUCLUST_TEST_DATA);
 * every message of gc_hdbscan_check; the single-linkage entries
 * (gc_hdbscan_linkage_cpu, gc_hdbscan_from_linkage); cancel and the calling thread's
 * polls; progress; and (printed, not checked) the timings of the
 * benchmark's inputs.
 */
#include <dirent.h>
#include <math.h>
#include <omp.h>

#include "testutil.h"
#include "hdbscan_ref.h"
#include "common/gpu.h"

static gc_hdbscan_params
params(int64_t min_samples, double alpha, gc_metric metric)
{
	gc_hdbscan_params p = {
		.min_cluster_size = 5, .min_samples = min_samples, .epsilon = 0.0,
		.method = GC_HDBSCAN_EOM, .allow_single_cluster = false,
		.alpha = alpha, .metric = metric
	};

	return p;
}

static bool
same_bits(double x, double y)
{
	return memcmp(&x, &y, sizeof(x)) == 0;
}

/* The first row where the cores differ, or -1. */
static int64_t
core_diff(const double *x, const double *y, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		if (!same_bits(x[i], y[i]))
			return i;
	return -1;
}

/* The first edge where the MSTs differ, or -1. */
static int64_t
edge_diff(const gc_mst_edge *x, const gc_mst_edge *y, int64_t m)
{
	for (int64_t e = 0; e < m; e++)
		if (x[e].a != y[e].a || x[e].b != y[e].b || !same_bits(x[e].w, y[e].w))
			return e;
	return -1;
}

/* Gaussian noise (Box-Muller) for the benchmark's blobs. */
static double
gauss(uint64_t *rs)
{
	double		u = tu_uniform(rs),
				v = tu_uniform(rs);

	return sqrt(-2.0 * log(u > 0.0 ? u : 0x1p-60)) * cos(2.0 * M_PI * v);
}

/*
 * The benchmark's input as scikit-learn's make_blobs makes it: nb centres
 * uniform in [-10, 10)^d, nblob rows around them with std, then nnoise
 * rows uniform over the box of the blobs.
 */
static float *
bench_blobs(uint64_t *rs, int64_t nblob, int64_t nnoise, int d, int nb,
			double std)
{
	float	   *X = malloc(sizeof(float) * (size_t) (nblob + nnoise) * d);
	double	   *ctr = malloc(sizeof(double) * nb * d);
	float		lo[64],
				hi[64];

	for (int i = 0; i < nb * d; i++)
		ctr[i] = tu_uniform(rs) * 20.0 - 10.0;
	for (int j = 0; j < d; j++)
		lo[j] = INFINITY, hi[j] = -INFINITY;
	for (int64_t i = 0; i < nblob; i++)
	{
		int			b = (int) (tu_next(rs) % nb);

		for (int j = 0; j < d; j++)
		{
			float		v = (float) (ctr[b * d + j] + std * gauss(rs));

			X[i * d + j] = v;
			lo[j] = v < lo[j] ? v : lo[j];
			hi[j] = v > hi[j] ? v : hi[j];
		}
	}
	for (int64_t i = nblob; i < nblob + nnoise; i++)
		for (int j = 0; j < d; j++)
			X[i * d + j] = (float) (lo[j] + (hi[j] - lo[j]) * tu_uniform(rs));
	free(ctr);
	return X;
}

/*
 * One random case against the references: gc_hdbscan_mst_cpu (the
 * driver's path, cosine's unit rows included) and the two phases' own
 * entries, with 1, 2 and 3 threads.
 */
static void
check_case(const float *X, int64_t n, int d, int64_t ms, double alpha,
		   gc_metric metric, const char *what)
{
	const int	cosine = metric == GC_METRIC_COSINE;
	float	   *R = malloc(sizeof(float) * (size_t) n * d);
	double	   *rcore = malloc(sizeof(double) * n),
			   *core = malloc(sizeof(double) * n);
	gc_mst_edge *redges = malloc(sizeof(gc_mst_edge) * n),
			   *edges = malloc(sizeof(gc_mst_edge) * n);
	gc_hdbscan_params p = params(ms, alpha, metric);
	gc_status	st;

	memcpy(R, X, sizeof(float) * (size_t) n * d);
	if (cosine)
		gc_unit_rows(NULL, X, n, d, R);
	ref_core(R, n, d, ms, cosine, rcore);
	ref_mst(R, n, d, alpha, cosine, rcore, redges);
	for (int threads = 1; threads <= 3; threads++)
	{
		gc_ctx		ctx = {.n_threads = threads};
		int64_t		bad;
		gc_code		rc;

		memset(core, 0xff, sizeof(double) * n);
		memset(edges, 0xff, sizeof(gc_mst_edge) * n);
		rc = gc_hdbscan_mst_cpu(&ctx, X, n, d, &p, core, edges, &st);
		CHECK(rc == GC_OK, "%s, %d threads: %s", what, threads, st.message);
		if (rc != GC_OK)
			break;
		bad = core_diff(core, rcore, n);
		CHECK(bad < 0, "%s, %d threads: core[%lld] = %.17g, the reference's %.17g",
			  what, threads, (long long) bad, core[bad < 0 ? 0 : bad],
			  rcore[bad < 0 ? 0 : bad]);
		bad = edge_diff(edges, redges, n - 1);
		CHECK(bad < 0, "%s, %d threads: edge %lld is (%lld, %lld, %.17g), the reference's (%lld, %lld, %.17g)",
			  what, threads, (long long) bad,
			  (long long) edges[bad < 0 ? 0 : bad].a, (long long) edges[bad < 0 ? 0 : bad].b,
			  edges[bad < 0 ? 0 : bad].w,
			  (long long) redges[bad < 0 ? 0 : bad].a, (long long) redges[bad < 0 ? 0 : bad].b,
			  redges[bad < 0 ? 0 : bad].w);

		/* the phases' own entries, on the rows as given */
		memset(core, 0xff, sizeof(double) * n);
		memset(edges, 0xff, sizeof(gc_mst_edge) * n);
		rc = gc_hdbscan_core_cpu(&ctx, R, n, d, ms, metric, core, &st);
		CHECK(rc == GC_OK && core_diff(core, rcore, n) < 0,
			  "%s, %d threads: gc_hdbscan_core_cpu %s", what, threads, st.message);
		rc = gc_hdbscan_mst_edges_cpu(&ctx, R, n, d, alpha, metric, rcore, edges, &st);
		CHECK(rc == GC_OK && edge_diff(edges, redges, n - 1) < 0,
			  "%s, %d threads: gc_hdbscan_mst_edges_cpu %s", what, threads, st.message);
	}
	free(R);
	free(rcore);
	free(core);
	free(redges);
	free(edges);
}

/* Random inputs of every kind, dimension, size and parameter. */
static void
test_random(uint64_t *rs)
{
	static const int dims[] = {1, 2, 3, 5, 16, 64};
	static const int64_t ms_pick[] = {1, 2, 5, 20, -1};
	static const double alphas[] = {0.5, 1.0, 2.0};
	int			cases = 0;

	for (int di = 0; di < 6; di++)
		for (int rep = 0; rep < 12; rep++)
		{
			const int	d = dims[di];
			const int64_t nmax = d <= 5 ? 3000 : d <= 16 ? 1200 : 500;
			data_kind	kind = (data_kind) (rep % 4);
			/* sizes spread log-uniformly over 2 .. nmax */
			int64_t		n = 2 + (int64_t) exp(tu_uniform(rs) * log((double) nmax - 1));
			int64_t		ms = ms_pick[tu_next(rs) % 5];
			double		alpha = alphas[tu_next(rs) % 3];
			gc_metric	metric = rep % 3 == 2 ? GC_METRIC_COSINE : GC_METRIC_EUCLIDEAN;
			float	   *X = tu_make_data(rs, n, d, kind, 1 + (int) (tu_next(rs) % 8));
			char		what[160];

			ms = ms < 0 || ms > n ? n : ms;
			if (metric == GC_METRIC_COSINE)
				for (int64_t i = 0; i < n; i++)
					X[i * d] += 16.0f;	/* no zero row */
			snprintf(what, sizeof(what), "%s n=%lld d=%d min_samples=%lld alpha=%g %s",
					 data_name[kind], (long long) n, d, (long long) ms, alpha,
					 metric == GC_METRIC_COSINE ? "cosine" : "euclidean");
			check_case(X, n, d, ms, alpha, metric, what);
			free(X);
			cases++;
		}
	/* the smallest inputs, and every min_samples of one */
	for (int64_t n = 2; n <= 6; n++)
		for (int64_t ms = 1; ms <= n; ms++)
		{
			float	   *X = tu_make_data(rs, n, 2, DATA_GRID, 1);
			char		what[64];

			snprintf(what, sizeof(what), "grid n=%lld min_samples=%lld", (long long) n,
					 (long long) ms);
			check_case(X, n, 2, ms, 1.0, GC_METRIC_EUCLIDEAN, what);
			free(X);
			cases++;
		}
	/* a lattice: runs of thousands of equal weights (sorted apart) */
	{
		const int64_t side = 66,
					n = side * side;
		float	   *X = malloc(sizeof(float) * n * 2);

		for (int64_t i = 0; i < n; i++)
		{
			X[2 * i] = (float) (i % side);
			X[2 * i + 1] = (float) (i / side);
		}
		check_case(X, n, 2, 1, 1.0, GC_METRIC_EUCLIDEAN, "lattice 66 x 66, min_samples 1");
		check_case(X, n, 2, 5, 1.0, GC_METRIC_EUCLIDEAN, "lattice 66 x 66, min_samples 5");
		free(X);
		cases += 2;
	}
	/* every row the same, and two values per feature: all ties */
	for (int k = 0; k < 2; k++)
	{
		const int64_t n = 1500;
		float	   *X = malloc(sizeof(float) * n * 3);

		for (int64_t i = 0; i < n * 3; i++)
			X[i] = k == 0 ? 1.5f : (float) (tu_next(rs) % 2);
		check_case(X, n, 3, 1, 1.0, GC_METRIC_EUCLIDEAN, k == 0 ? "same rows, min_samples 1"
				   : "two values, min_samples 1");
		check_case(X, n, 3, 7, 2.0, GC_METRIC_EUCLIDEAN, k == 0 ? "same rows, min_samples 7"
				   : "two values, min_samples 7");
		free(X);
		cases += 2;
	}
	printf("test_hdbscan_mst: %d random cases against the references\n", cases);
}

/* ---- scikit-learn's fixtures ---- */

typedef struct fixture
{
	int64_t		n,
				ms;
	int			d;
	double		alpha;
	gc_metric	metric;
	float	   *X;
	double	   *core,
			   *mst;
} fixture;

/* Reads the fields a test of phases 1 and 2 needs; false if malformed. */
static bool
read_fixture(const char *path, fixture *f)
{
	FILE	   *fp = fopen(path, "r");
	char		key[64],
				word[64];
	bool		ok = fp != NULL;

	memset(f, 0, sizeof(*f));
	while (ok && fscanf(fp, "%63s", key) == 1 && strcmp(key, "end") != 0)
	{
		if (strcmp(key, "n") == 0)
			ok = fscanf(fp, "%lld d %d", (long long *) &f->n, &f->d) == 2;
		else if (strcmp(key, "min_samples") == 0)
			ok = fscanf(fp, "%lld", (long long *) &f->ms) == 1;
		else if (strcmp(key, "alpha") == 0)
			ok = fscanf(fp, "%lf", &f->alpha) == 1;
		else if (strcmp(key, "metric") == 0)
		{
			ok = fscanf(fp, "%63s", word) == 1;
			f->metric = strcmp(word, "cosine") == 0 ? GC_METRIC_COSINE : GC_METRIC_EUCLIDEAN;
		}
		else if (strcmp(key, "X") == 0)
		{
			f->X = malloc(sizeof(float) * f->n * f->d);
			for (int64_t i = 0; ok && i < f->n * f->d; i++)
				ok = fscanf(fp, "%f", &f->X[i]) == 1;
		}
		else if (strcmp(key, "core") == 0 || strcmp(key, "mst") == 0)
		{
			int64_t		m = key[0] == 'c' ? f->n : f->n - 1;
			double	   *v = malloc(sizeof(double) * (m > 0 ? m : 1));

			for (int64_t i = 0; ok && i < m; i++)
				ok = fscanf(fp, "%lf", &v[i]) == 1;
			if (key[0] == 'c')
				f->core = v;
			else
				f->mst = v;
		}
		else
		{
			int			ch;

			/* a field not used here: the rest of its line, then the
			 * next line when it is a block (labels, probabilities) */
			while ((ch = fgetc(fp)) != '\n' && ch != EOF)
				;
			if (strcmp(key, "labels") == 0 || strcmp(key, "probabilities") == 0)
				while ((ch = fgetc(fp)) != '\n' && ch != EOF)
					;
		}
	}
	if (fp != NULL)
		fclose(fp);
	return ok && f->X != NULL && f->core != NULL && f->mst != NULL;
}

/*
 * Whether x is scikit-learn's y: Euclidean bit for bit (its kd-tree's
 * double rdist and root, as gc_dist2_f64); where the fixture's core
 * distances came from NearestNeighbors' brute force (it takes it for
 * d > 15 or min_samples >= n / 2: |x|^2 - 2 x.y + |y|^2), to 1e-12
 * relative; cosine to 1e-6 (gpuclust's unit rows are float32, scikit-learn
 * computes 1 - a.b / (|a| |b|) in double).
 */
static bool
sklearn_equal(const fixture *f, double x, double y, bool core)
{
	if (f->metric == GC_METRIC_COSINE)
		return fabs(x - y) <= 1e-6;
	if (core && (f->d > 15 || f->ms >= f->n / 2))
		return fabs(x - y) <= 1e-12 * fabs(y);
	return same_bits(x, y);
}

/*
 * scikit-learn's core distances and its MST's weights as a multiset (every
 * MST of a graph has the same weights), as sklearn_equal compares them.
 */
static void
check_fixture(const char *name, const fixture *f)
{
	gc_hdbscan_params p = params(f->ms, f->alpha, f->metric);
	double	   *core = malloc(sizeof(double) * f->n),
			   *w = malloc(sizeof(double) * f->n);
	gc_mst_edge *edges = malloc(sizeof(gc_mst_edge) * f->n);
	gc_status	st;
	int64_t		bad = -1;
	gc_code		rc;

	rc = gc_hdbscan_mst_cpu(NULL, f->X, f->n, f->d, &p, core, edges, &st);
	CHECK(rc == GC_OK, "fixture %s: %s", name, st.message);
	if (rc == GC_OK)
	{
		for (int64_t i = 0; i < f->n && bad < 0; i++)
			if (!sklearn_equal(f, core[i], f->core[i], true))
				bad = i;
		CHECK(bad < 0, "fixture %s: core[%lld] = %.17g, scikit-learn's %.17g", name,
			  (long long) bad, core[bad < 0 ? 0 : bad], f->core[bad < 0 ? 0 : bad]);
		for (int64_t e = 0; e < f->n - 1; e++)
			w[e] = edges[e].w;
		qsort(w, f->n - 1, sizeof(double), ref_cmp_double);
		bad = -1;
		for (int64_t e = 0; e < f->n - 1 && bad < 0; e++)
			if (!sklearn_equal(f, w[e], f->mst[e], false))
				bad = e;
		CHECK(bad < 0, "fixture %s: sorted weight %lld = %.17g, scikit-learn's %.17g",
			  name, (long long) bad, w[bad < 0 ? 0 : bad], f->mst[bad < 0 ? 0 : bad]);
	}
	free(core);
	free(w);
	free(edges);
}

static void
test_fixtures(void)
{
	const char *dir = getenv("GPUCLUST_TEST_DATA");
	DIR		   *dp;
	struct dirent *de;
	int			count = 0;

	if (dir == NULL)
		dir = "test/data/hdbscan";
	dp = opendir(dir);
	CHECK(dp != NULL, "no fixtures at %s (run from the repository's root, or set GPUCLUST_TEST_DATA)",
		  dir);
	if (dp == NULL)
		return;
	while ((de = readdir(dp)) != NULL)
	{
		char		path[1024];
		size_t		len = strlen(de->d_name);
		fixture		f;

		if (len < 5 || strcmp(de->d_name + len - 4, ".txt") != 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		CHECK(read_fixture(path, &f), "fixture %s: cannot read it", path);
		if (f.X != NULL && f.core != NULL && f.mst != NULL)
		{
			check_fixture(de->d_name, &f);
			count++;
		}
		free(f.X);
		free(f.core);
		free(f.mst);
	}
	closedir(dp);
	CHECK(count >= 20, "only %d fixtures in %s", count, dir);
	printf("test_hdbscan_mst: %d fixtures of scikit-learn\n", count);
}

/* ---- the checks ---- */

/* rc is GC_EINVAL and the message holds every word given. */
static void
expect_einval(gc_code rc, const gc_status *st, const char *what,
			  const char *w1, const char *w2, const char *w3)
{
	CHECK(rc == GC_EINVAL, "%s: code %d, \"%s\"", what, (int) rc, st->message);
	CHECK(strstr(st->message, w1) != NULL &&
		  (w2 == NULL || strstr(st->message, w2) != NULL) &&
		  (w3 == NULL || strstr(st->message, w3) != NULL),
		  "%s: the message \"%s\" lacks \"%s\" %s %s", what, st->message, w1,
		  w2 ? w2 : "", w3 ? w3 : "");
}

/*
 * Parameters gc_hdbscan_check refuses, each with the words its message
 * holds, and whether the MST alone (mst_only) accepts them.
 */
typedef struct bad_params
{
	const char *what;
	int64_t		mcs,
				ms;
	double		eps;
	int			method;
	double		alpha;
	int			metric;
	bool		mst_ok;
	const char *w1,
			   *w2,
			   *w3;
} bad_params;

static const bad_params bad[] = {
	{"min_cluster_size 1", 1, 2, 0.0, 0, 1.0, 0, true, "min_cluster_size", "2", "1"},
	{"min_samples 0", 5, 0, 0.0, 0, 1.0, 0, false, "min_samples", "0", NULL},
	{"min_samples > n", 5, 5, 0.0, 0, 1.0, 0, false, "min_samples", "5", "4"},
	{"epsilon -1", 5, 2, -1.0, 0, 1.0, 0, true, "cluster_selection_epsilon", "-1", NULL},
	{"epsilon inf", 5, 2, INFINITY, 0, 1.0, 0, true, "cluster_selection_epsilon", "inf", NULL},
	{"epsilon nan", 5, 2, NAN, 0, 1.0, 0, true, "cluster_selection_epsilon", "nan", NULL},
	{"method 7", 5, 2, 0.0, 7, 1.0, 0, true, "cluster_selection_method", "7", NULL},
	{"alpha 0", 5, 2, 0.0, 1, 0.0, 0, false, "alpha", "0", NULL},
	{"alpha -2", 5, 2, 0.0, 0, -2.0, 0, false, "alpha", "-2", NULL},
	{"alpha nan", 5, 2, 0.0, 0, NAN, 0, false, "alpha", "nan", NULL},
	{"alpha inf", 5, 2, 0.0, 0, INFINITY, 0, false, "alpha", "inf", NULL},
	{"alpha 1e-300", 5, 2, 0.0, 0, 1e-300, 0, false, "alpha", "1e-300", NULL},
	{"inner product", 5, 2, 0.0, 0, 1.0, GC_METRIC_INNER_PRODUCT, false,
	"inner product", "euclidean", "cosine"},
	{"metric 9", 5, 2, 0.0, 0, 1.0, 9, false, "metric", "9", NULL},
};

static void
test_checks(void)
{
	float		X[8] = {0, 0, 1, 1, 2, 2, 3, 3},
				Z[6] = {1, 1, 0, 0, 2, 2};
	double		core[4];
	gc_mst_edge edges[4];
	gc_linkage_node nodes[4];
	int32_t		labels[4];
	double		prob[4],
				outl[4];
	gc_hdbscan_result res = {labels, prob, outl, 0, NULL};
	gc_hdbscan_params p = params(2, 1.0, GC_METRIC_EUCLIDEAN);
	gc_status	st;
	volatile sig_atomic_t flag = 1;
	gc_ctx		cancel = {.n_threads = 1, .cancel_flags = {&flag, NULL}};
	gc_hdbscan_method m;

	CHECK(gc_parse_hdbscan_method("EOM", &m) && m == GC_HDBSCAN_EOM, "eom");
	CHECK(gc_parse_hdbscan_method("leaf", &m) && m == GC_HDBSCAN_LEAF, "leaf");
	CHECK(!gc_parse_hdbscan_method("best", &m) && !gc_parse_hdbscan_method(NULL, &m),
		  "unknown methods");
	CHECK(strcmp(gc_hdbscan_method_name(GC_HDBSCAN_LEAF), "leaf") == 0 &&
		  strcmp(gc_hdbscan_method_name(GC_HDBSCAN_EOM), "eom") == 0, "method names");

	CHECK(gc_hdbscan_check(NULL, X, 4, 2, &p, false, &st) == GC_OK && st.message[0] == '\0',
		  "good parameters: %s", st.message);
	expect_einval(gc_hdbscan_check(NULL, X, 4, 2, NULL, false, &st), &st, "no parameters",
				  "parameters", NULL, NULL);
	expect_einval(gc_hdbscan_check(NULL, X, -1, 2, &p, false, &st), &st, "n < 0",
				  "negative", NULL, NULL);
	expect_einval(gc_hdbscan_check(NULL, X, 4, 0, &p, false, &st), &st, "d = 0",
				  "dimension", "0", NULL);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
	{
		const bad_params *b = &bad[i];
		gc_hdbscan_params q = {b->mcs, b->ms, b->eps, (gc_hdbscan_method) b->method,
		false, b->alpha, (gc_metric) b->metric};
		gc_code		rc = gc_hdbscan_check(NULL, X, 4, 2, &q, true, &st);

		expect_einval(gc_hdbscan_check(NULL, X, 4, 2, &q, false, &st), &st, b->what,
					  b->w1, b->w2, b->w3);
		if (b->mst_ok)
			CHECK(rc == GC_OK, "%s: the MST alone does not use it, yet code %d", b->what,
				  (int) rc);
		else
			expect_einval(gc_hdbscan_check(NULL, X, 4, 2, &q, true, &st), &st, b->what,
						  b->w1, b->w2, b->w3);
	}
	CHECK(gc_hdbscan_check(NULL, NULL, 0, 2, &p, false, &st) == GC_OK,
		  "no rows: %s", st.message);
	expect_einval(gc_hdbscan_check(NULL, NULL, 4, 2, &p, false, &st), &st, "no rows array",
				  "array", NULL, NULL);
	CHECK(gc_hdbscan_check(&cancel, X, 4, 2, &p, false, &st) == GC_ECANCEL, "cancel: %s",
		  st.message);

	/* the entries: the check first, on both devices */
	p.min_samples = 9;
	expect_einval(gc_hdbscan_cpu(NULL, X, 4, 2, &p, &res, &st), &st, "cpu: min_samples",
				  "min_samples", "9", "4");
	expect_einval(gc_hdbscan_on_gpu(NULL, X, 4, 2, &p, &res, &st), &st, "gpu: min_samples",
				  "min_samples", "9", "4");
	expect_einval(gc_hdbscan_mst_cpu(NULL, X, 4, 2, &p, core, edges, &st), &st,
				  "mst cpu: min_samples", "min_samples", "9", "4");
	expect_einval(gc_hdbscan_mst_on_gpu(NULL, X, 4, 2, &p, core, edges, &st), &st,
				  "mst gpu: min_samples", "min_samples", "9", "4");
	expect_einval(gc_hdbscan_linkage_cpu(NULL, X, 4, 2, &p, nodes, &st), &st,
				  "linkage cpu: min_samples", "min_samples", "9", "4");
	expect_einval(gc_hdbscan_linkage_on_gpu(NULL, X, 4, 2, &p, nodes, &st), &st,
				  "linkage gpu: min_samples", "min_samples", "9", "4");
	p.min_samples = 2;
	p.min_cluster_size = 1;
	expect_einval(gc_hdbscan_linkage_cpu(NULL, X, 4, 2, &p, nodes, &st), &st,
				  "linkage cpu: min_cluster_size", "min_cluster_size", NULL, NULL);
	p.min_cluster_size = 2;
	expect_einval(gc_hdbscan_linkage_cpu(NULL, X, 4, 2, &p, NULL, &st), &st,
				  "linkage: no nodes", "array", NULL, NULL);
	CHECK(gc_hdbscan_linkage_cpu(&cancel, X, 4, 2, &p, nodes, &st) == GC_ECANCEL,
		  "linkage cpu: cancel");
	CHECK(gc_hdbscan_linkage_on_gpu(&cancel, X, 4, 2, &p, nodes, &st) == GC_ECANCEL,
		  "linkage gpu: cancel");
	CHECK(gc_hdbscan_cpu(&cancel, X, 4, 2, &p, &res, &st) == GC_ECANCEL, "cpu: cancel");
	CHECK(gc_hdbscan_on_gpu(&cancel, X, 4, 2, &p, &res, &st) == GC_ECANCEL, "gpu: cancel");
	CHECK(gc_hdbscan_mst_cpu(&cancel, X, 4, 2, &p, core, edges, &st) == GC_ECANCEL,
		  "mst cpu: cancel");
	CHECK(gc_hdbscan_mst_on_gpu(&cancel, X, 4, 2, &p, core, edges, &st) == GC_ECANCEL,
		  "mst gpu: cancel");
	CHECK(gc_hdbscan_core_cpu(&cancel, X, 4, 2, 2, GC_METRIC_EUCLIDEAN, core, &st) == GC_ECANCEL,
		  "core: cancel");
	CHECK(gc_hdbscan_mst_edges_cpu(&cancel, X, 4, 2, 1.0, GC_METRIC_EUCLIDEAN, core, edges,
								   &st) == GC_ECANCEL, "edges: cancel");
	expect_einval(gc_hdbscan_core_cpu(NULL, X, 4, 2, 5, GC_METRIC_EUCLIDEAN, core, &st), &st,
				  "core: min_samples 5", "min_samples", NULL, NULL);
	expect_einval(gc_hdbscan_mst_edges_cpu(NULL, X, 4, 2, 0.0, GC_METRIC_EUCLIDEAN, core,
										   edges, &st), &st, "edges: alpha 0", "alpha",
				  NULL, NULL);
	expect_einval(gc_hdbscan_mst_cpu(NULL, X, 4, 2, &p, core, NULL, &st), &st,
				  "mst: no edges", "array", NULL, NULL);
	res.labels = NULL;
	expect_einval(gc_hdbscan_cpu(NULL, X, 4, 2, &p, &res, &st), &st, "no labels",
				  "array", NULL, NULL);
	res.labels = labels;

	/* cosine: a zero row is named, on both devices */
	p.metric = GC_METRIC_COSINE;
	expect_einval(gc_hdbscan_mst_cpu(NULL, Z, 3, 2, &p, core, edges, &st), &st,
				  "cosine zero row", "row 2", "cosine", NULL);
	expect_einval(gc_hdbscan_mst_on_gpu(NULL, Z, 3, 2, &p, core, edges, &st), &st,
				  "gpu cosine zero row", "row 2", "cosine", NULL);
	expect_einval(gc_hdbscan_cpu(NULL, Z, 3, 2, &p, &res, &st), &st,
				  "hdbscan cosine zero row", "row 2", "cosine", NULL);
	p.metric = GC_METRIC_EUCLIDEAN;

	/* no rows; one row: core 0, no edges */
	CHECK(gc_hdbscan_mst_cpu(NULL, NULL, 0, 2, &p, NULL, NULL, &st) == GC_OK, "n 0: %s",
		  st.message);
	res.clusters = 7;
	CHECK(gc_hdbscan_cpu(NULL, NULL, 0, 2, &p, &res, &st) == GC_OK && res.clusters == 0,
		  "hdbscan n 0: %s", st.message);
	p.min_samples = 1;
	core[0] = -1.0;
	CHECK(gc_hdbscan_mst_cpu(NULL, X, 1, 2, &p, core, NULL, &st) == GC_OK &&
		  same_bits(core[0], 0.0), "n 1: %s", st.message);
	CHECK(gc_hdbscan_mst_on_gpu(NULL, X, 1, 2, &p, core, NULL, &st) == GC_OK &&
		  same_bits(core[0], 0.0), "gpu n 1: %s", st.message);

	/*
	 * One row reaches phase 3 with no edge: one noise row (or phase 3's
	 * own error while hdbscan_tree.c is a placeholder)
	 */
	{
		gc_code		rc = gc_hdbscan_cpu(NULL, X, 1, 2, &p, &res, &st);

		CHECK(rc == GC_OK || (rc == GC_EINTERNAL && strstr(st.message, "tree") != NULL),
			  "hdbscan n 1: %s", st.message);
		if (rc == GC_OK)
			CHECK(labels[0] == GC_NOISE && prob[0] == 0.0 && outl[0] == 0.0 &&
				  res.clusters == 0, "hdbscan n 1: label %d, probability %g, outlier %g",
				  labels[0], prob[0], outl[0]);
	}
}

/* ---- cancel, polls, progress ---- */

/*
 * The calling thread polls at most TU_POLL_GAP_S apart through a whole
 * MST call, and a poll that says stop ends it with GC_ECANCEL soon.
 */
static void
test_poll(uint64_t *rs)
{
	const int64_t n = 300000;
	float	   *X = bench_blobs(rs, n - n / 10, n / 10, 2, 50, 0.6);
	double	   *core = malloc(sizeof(double) * n);
	gc_mst_edge *edges = malloc(sizeof(gc_mst_edge) * n);
	gc_hdbscan_params p = params(15, 1.0, GC_METRIC_EUCLIDEAN);
	gc_ctx		ctx = {.n_threads = 2};
	gc_status	st;
	tu_poll		tp;
	double		t0;
	gc_code		rc;

	tu_poll_start(&tp, &ctx, 1e9);
	rc = gc_hdbscan_mst_cpu(&ctx, X, n, 2, &p, core, edges, &st);
	tu_poll_end(&tp);
	CHECK(rc == GC_OK, "poll: %s", st.message);
	CHECK(tp.max_gap < TU_POLL_GAP_S, "the calling thread's polls %.3f s apart (%ld polls)",
		  tp.max_gap, tp.caller_polls);

	for (double after = 0.005; after < 1.0; after *= 4)
	{
		tu_poll_start(&tp, &ctx, after);
		t0 = now_s();
		rc = gc_hdbscan_mst_cpu(&ctx, X, n, 2, &p, core, edges, &st);
		CHECK(rc == GC_ECANCEL, "stopped after %.3f s: code %d %s", after, (int) rc,
			  st.message);
		CHECK(now_s() - t0 < after + TU_POLL_GAP_S, "stopped after %.3f s: returned after %.3f s",
			  after, now_s() - t0);
	}
	free(X);
	free(core);
	free(edges);
}

typedef struct progress_log
{
	int			reports,
				other_thread,
				out_of_order;	/* a phase before the last one's */
	gc_phase	last_phase;
	int64_t		init_done,
				rounds;
	bool		saw_index;
} progress_log;

static void
log_progress(void *arg, const gc_progress *p)
{
	progress_log *log = arg;

	log->reports++;
	log->other_thread += omp_get_thread_num() != 0;
	log->out_of_order += p->phase < log->last_phase;
	log->saw_index |= p->phase == GC_PHASE_INDEX;
	if (p->phase == GC_PHASE_INIT)
		log->init_done = p->done;
	if (p->phase == GC_PHASE_ITERATE)
	{
		log->out_of_order += p->iteration != log->rounds + 1;
		log->rounds = p->iteration;
	}
	log->last_phase = p->phase;
}

/* The phases in order, from the calling thread: index, core, rounds. */
static void
test_progress(uint64_t *rs)
{
	const int64_t n = 20000;
	float	   *X = tu_make_data(rs, n, 3, DATA_BLOBS, 6);
	double	   *core = malloc(sizeof(double) * n);
	gc_mst_edge *edges = malloc(sizeof(gc_mst_edge) * n);
	gc_hdbscan_params p = params(10, 1.0, GC_METRIC_EUCLIDEAN);
	progress_log log = {0};
	gc_ctx		ctx = {.n_threads = 2, .progress = log_progress, .progress_arg = &log};
	gc_status	st;

	CHECK(gc_hdbscan_mst_cpu(&ctx, X, n, 3, &p, core, edges, &st) == GC_OK, "%s", st.message);
	CHECK(log.saw_index && log.init_done == n && log.rounds >= 2 &&
		  log.last_phase == GC_PHASE_ITERATE && log.out_of_order == 0 &&
		  log.other_thread == 0,
		  "progress: %d reports, index %d, core rows %lld of %lld, %lld rounds, %d out of order, %d from other threads",
		  log.reports, log.saw_index, (long long) log.init_done, (long long) n,
		  (long long) log.rounds, log.out_of_order, log.other_thread);
	free(X);
	free(core);
	free(edges);
}

/* ---- timings (printed) ---- */

/* When each of Borůvka's rounds started, and the components it found. */
typedef struct round_log
{
	int			rounds;
	double		start[64];
	int64_t		comps[64];
} round_log;

static void
log_round(void *arg, const gc_progress *p)
{
	round_log  *log = arg;

	if (p->phase == GC_PHASE_ITERATE && log->rounds < 64)
	{
		log->start[log->rounds] = now_s();
		log->comps[log->rounds++] = p->total + 1 - p->done;
	}
}

/* The core distances and the MST of X, timed, and each round's time. */
static void
time_one(const char *what, const float *X, int64_t n, int d, int64_t ms)
{
	double	   *core = malloc(sizeof(double) * n);
	gc_mst_edge *edges = malloc(sizeof(gc_mst_edge) * n);
	round_log	log = {0};
	gc_ctx		ctx = {.progress = log_round, .progress_arg = &log};
	gc_status	st;
	double		t0,
				t1,
				t2;
	gc_code		rc;

	t0 = now_s();
	rc = gc_hdbscan_core_cpu(&ctx, X, n, d, ms, GC_METRIC_EUCLIDEAN, core, &st);
	t1 = now_s();
	if (rc == GC_OK)
		rc = gc_hdbscan_mst_edges_cpu(&ctx, X, n, d, 1.0, GC_METRIC_EUCLIDEAN, core,
									  edges, &st);
	t2 = now_s();
	CHECK(rc == GC_OK, "%s: %s", what, st.message);
	printf("test_hdbscan_mst: %s on %d threads: core %.3f s, MST %.3f s (%d rounds)\n",
		   what, gc_threads(&ctx), t1 - t0, t2 - t1, log.rounds);
	for (int r = 0; r < log.rounds; r++)
		printf("    round %d: %lld components, %.1f ms%s\n", r + 1, (long long) log.comps[r],
			   1e3 * ((r + 1 < log.rounds ? log.start[r + 1] : t2) - log.start[r]),
			   r + 1 < log.rounds ? "" : " (and the edges' sort)");
	free(core);
	free(edges);
}

/*
 * gc_hdbscan_linkage_cpu = gc_hdbscan_mst_cpu's edges through
 * gc_hdbscan_linkage, and gc_hdbscan_from_linkage of them = the whole
 * call; a node that joins a later one is refused (22023's GC_EINVAL).
 */
static void
test_linkage(uint64_t *rs)
{
	for (int it = 0; it < 20; it++)
	{
		const int64_t n = 2 + (int64_t) (tu_next(rs) % 3000);
		const int	d = 1 + (int) (tu_next(rs) % 4);
		float	   *X = tu_make_data(rs, n, d, (data_kind) (tu_next(rs) % 4), 5);
		gc_hdbscan_params p = params(1 + (int64_t) (tu_next(rs) % (n < 20 ? n : 20)), 1.0,
									 GC_METRIC_EUCLIDEAN);
		gc_mst_edge *e = malloc(sizeof(gc_mst_edge) * (size_t) n);
		gc_linkage_node *a = malloc(sizeof(gc_linkage_node) * (size_t) n),
				   *b = malloc(sizeof(gc_linkage_node) * (size_t) n);
		int32_t    *l1 = malloc(sizeof(int32_t) * (size_t) n),
				   *l2 = malloc(sizeof(int32_t) * (size_t) n);
		double	   *p1 = malloc(sizeof(double) * (size_t) 4 * n),
				   *o1 = p1 + n,
				   *p2 = o1 + n,
				   *o2 = p2 + n;
		gc_hdbscan_result r1 = {l1, p1, o1, 0, NULL},
					r2 = {l2, p2, o2, 0, NULL};
		gc_status	st;

		CHECK(gc_hdbscan_mst_cpu(NULL, X, n, d, &p, NULL, e, &st) == GC_OK &&
			  gc_hdbscan_linkage(NULL, n, e, a, &st) == GC_OK &&
			  gc_hdbscan_linkage_cpu(NULL, X, n, d, &p, b, &st) == GC_OK,
			  "linkage n=%lld: %s", (long long) n, st.message);
		CHECK(memcmp(a, b, sizeof(gc_linkage_node) * (size_t) (n - 1)) == 0,
			  "linkage n=%lld: the entry's nodes differ from the edges'", (long long) n);
		CHECK(gc_hdbscan_cpu(NULL, X, n, d, &p, &r1, &st) == GC_OK &&
			  gc_hdbscan_from_linkage(NULL, n, b, &p, &r2, &st) == GC_OK,
			  "from_linkage n=%lld: %s", (long long) n, st.message);
		CHECK(r1.clusters == r2.clusters &&
			  memcmp(l1, l2, sizeof(int32_t) * (size_t) n) == 0 &&
			  memcmp(p1, p2, sizeof(double) * (size_t) n) == 0 &&
			  memcmp(o1, o2, sizeof(double) * (size_t) n) == 0,
			  "from_linkage n=%lld: differs from the whole call", (long long) n);
		if (n >= 3)
		{
			b[0].left = (uint32_t) (2 * n);
			CHECK(gc_hdbscan_from_linkage(NULL, n, b, &p, &r2, &st) == GC_EINVAL &&
				  strstr(st.message, "later node") != NULL,
				  "a bad node: %s", st.message);
		}
		free(X);
		free(e);
		free(a);
		free(b);
		free(l1);
		free(l2);
		free(p1);
	}
}

static void
test_timings(uint64_t *rs)
{
	float	   *X = bench_blobs(rs, 100000, 10000, 2, 50, 0.6);

	time_one("110k 2-d (50 blobs + 10k noise, min_samples 15)", X, 110000, 2, 15);
	free(X);
#if !defined(__SANITIZE_ADDRESS__)
	X = bench_blobs(rs, 900000, 100000, 2, 50, 0.6);
	time_one("1M 2-d (50 blobs + 100k noise, min_samples 15)", X, 1000000, 2, 15);
	free(X);
#endif
}

int
main(void)
{
	uint64_t	seed = tu_seed(),
				rs = seed;

	printf("test_hdbscan_mst: seed %llu (GPUCLUST_TEST_SEED to replay)\n",
		   (unsigned long long) seed);
	test_checks();
	test_random(&rs);
	test_fixtures();
	test_linkage(&rs);
	test_progress(&rs);
	test_poll(&rs);
	test_timings(&rs);
	return test_summary("test_hdbscan_mst");
}
