/*
 * test_hdbscan.c — HDBSCAN's phase 3 (gc_hdbscan_from_mst) and the whole
 * call (gc_hdbscan_cpu):
 *  - scikit-learn 1.9.1's results on the fixtures of test/data/hdbscan:
 *    core distances and MST weights by hdbscan_ref.h's brute force (bit
 *    for bit), then phase 3 on the (w, a, b) tree: labels up to a
 *    renumbering, probabilities to 1e-12.  Mutual reachability ties
 *    weights everywhere (an edge often weighs a core distance) and
 *    scikit-learn merges ties in the order of numpy's unstable argsort,
 *    so where the results differ the test shows it is the order of ties:
 *    phase 3 on scikit-learn's own tree (its Prim's algorithm) with its
 *    ties reordered gives scikit-learn's result.  A fixture that carries
 *    scikit-learn's single-linkage tree (section single_linkage) is
 *    checked on it bit for bit;
 *  - random spanning trees (ties, zeros): the tree's consistency, GLOSH,
 *    the same result on one thread as on several;
 *  - hand-made trees for epsilon (eom and leaf, climbing past a parent
 *    other than the root), allow_single_cluster, leaf with no split,
 *    duplicates (w = 0);
 *  - GLOSH against a brute force over the condensed tree's rows;
 *  - the tree's consistency; chains of 1M rows, cancel, a 2M-row timing (bench_hdbscan times 10M).
 * Run from the repository root (test/data/hdbscan, or the directory
 * GPUCLUST_HDBSCAN_FIXTURES names).  GPUCLUST_TEST_SEED repeats a run.
 */
#include <dirent.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpuclust_core.h"
#include "testutil.h"
#include "hdbscan_ref.h"

#define FIXTURE_DIR "test/data/hdbscan"

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

static gc_hdbscan_params
params(int64_t mcs, double eps, gc_hdbscan_method method, bool single)
{
	gc_hdbscan_params p = {
		.min_cluster_size = mcs, .min_samples = 1, .epsilon = eps,
		.method = method, .allow_single_cluster = single, .alpha = 1.0,
		.metric = GC_METRIC_EUCLIDEAN
	};

	return p;
}

/* The result arrays of n rows (and the tree when tree). */
typedef struct outs
{
	int32_t    *labels;
	double	   *prob,
			   *outlier;
	gc_hdbscan_tree tree;
	gc_hdbscan_result res;
} outs;

static void
outs_init(outs *o, int64_t n, bool tree)
{
	size_t		m = (size_t) (n > 0 ? n : 1);

	memset(o, 0, sizeof(*o));
	o->labels = malloc(sizeof(int32_t) * m);
	o->prob = malloc(sizeof(double) * m);
	o->outlier = malloc(sizeof(double) * m);
	o->res.labels = o->labels;
	o->res.probability = o->prob;
	o->res.outlier = o->outlier;
	o->res.tree = tree ? &o->tree : NULL;
}

static void
outs_free(outs *o)
{
	free(o->labels);
	free(o->prob);
	free(o->outlier);
	gc_hdbscan_tree_free(&o->tree);
}

static int
edge_cmp(const void *x, const void *y)
{
	const gc_mst_edge *e = x,
			   *f = y;

	return ref_edge_cmp(e->w, e->a, e->b, f->w, f->a, f->b);
}

/* Edges with a < b, sorted by (w, a, b). */
static void
sort_edges(gc_mst_edge *e, int64_t m)
{
	for (int64_t i = 0; i < m; i++)
		if (e[i].a > e[i].b)
		{
			int64_t		t = e[i].a;

			e[i].a = e[i].b;
			e[i].b = t;
		}
	qsort(e, (size_t) m, sizeof(gc_mst_edge), edge_cmp);
}

/*
 * Whether labels a and b are the same partition (noise for noise, a
 * bijection between the clusters); a's labels < ka, b's < kb.  Only the
 * labels in use count: scikit-learn numbers a selected cluster that no
 * row joins (the root, selected beside another cluster) too.
 */
static bool
same_partition(const int32_t *a, const int32_t *b, int64_t n, int ka, int kb)
{
	int32_t    *ab = malloc(sizeof(int32_t) * (size_t) (ka + 1)),
			   *ba = malloc(sizeof(int32_t) * (size_t) (kb + 1));
	bool		ok = true;

	for (int i = 0; i <= ka; i++)
		ab[i] = -2;
	for (int i = 0; i <= kb; i++)
		ba[i] = -2;
	for (int64_t i = 0; i < n && ok; i++)
	{
		if ((a[i] < 0) != (b[i] < 0))
			ok = false;
		else if (a[i] >= 0)
		{
			if (a[i] >= ka || b[i] >= kb)
				ok = false;
			else if (ab[a[i]] == -2 && ba[b[i]] == -2)
				ab[a[i]] = b[i], ba[b[i]] = a[i];
			else if (ab[a[i]] != b[i] || ba[b[i]] != a[i])
				ok = false;
		}
	}
	free(ab);
	free(ba);
	return ok;
}

/* Labels numbered 0, 1, ... by their lowest position; true when so. */
static bool
numbered_by_position(const int32_t *lab, int64_t n, int clusters)
{
	int32_t		next = 0;

	for (int64_t i = 0; i < n; i++)
	{
		if (lab[i] == next)
			next++;
		else if (lab[i] > next || lab[i] < GC_NOISE)
			return false;
	}
	return next == clusters;
}

/*
 * The tree's consistency with the result: every row once a child and
 * every cluster but the root once, parents before children, sizes the
 * sum of the children's, a child's lambda not below its parent's birth,
 * selected[] giving each row's label (its nearest selected cluster), the
 * labels numbered by position.  Returns the failures found.
 */
static int
check_tree(int64_t n, const gc_hdbscan_params *p, const outs *o,
		   const char *what)
{
	const gc_hdbscan_tree *t = &o->tree;
	int64_t		k = t->nclusters;
	int64_t    *seen = calloc((size_t) (n + k + 1), sizeof(int64_t));
	int64_t    *cpar = malloc(sizeof(int64_t) * (size_t) (k + 1));
	int64_t    *csum = calloc((size_t) (k + 1), sizeof(int64_t));
	int64_t    *csz = malloc(sizeof(int64_t) * (size_t) (k + 1));
	int64_t    *top = malloc(sizeof(int64_t) * (size_t) (k + 1));
	int64_t    *ppar = malloc(sizeof(int64_t) * (size_t) n);
	double	   *birth = malloc(sizeof(double) * (size_t) (k + 1));
	int			bad = 0,
				nsel = 0;

	if (n == 1)
	{
		bad += !(t->nrows == 0);
		goto out;
	}
	bad += !(k >= 1 && t->nrows == n + k - 1);
	for (int64_t c = 0; c < k; c++)
		cpar[c] = -1, csz[c] = c == 0 ? n : 0, birth[c] = 0.0;
	for (int64_t r = 0; r < t->nrows && bad == 0; r++)
	{
		const gc_hdbscan_tree_row *w = &t->rows[r];
		int64_t		pc = w->parent - n;

		if (pc < 0 || pc >= k || w->child < 0 || w->child >= n + k ||
			w->child == n || seen[w->child]++)
		{
			bad++;
			break;
		}
		csum[pc] += w->child_size;
		if (w->child < n)
		{
			bad += w->child_size != 1;
			ppar[w->child] = pc;
		}
		else
		{
			int64_t		cc = w->child - n;

			bad += !(cc > pc);	/* breadth first: parents first */
			cpar[cc] = pc;
			csz[cc] = w->child_size;
			birth[cc] = w->lambda;
		}
	}
	for (int64_t r = 0; r < t->nrows && bad == 0; r++)
		bad += !(t->rows[r].lambda >= birth[t->rows[r].parent - n]);
	for (int64_t c = 0; c < k && bad == 0; c++)
		bad += csum[c] != csz[c];
	if (bad)
		goto out;
	/* the labels from selected[] */
	top[0] = 0;
	for (int64_t c = 0; c < k; c++)
		nsel += t->selected[c] != GC_NOISE;
	for (int64_t c = 1; c < k; c++)
		top[c] = t->selected[c] != GC_NOISE ? c : top[cpar[c]];
	for (int64_t i = 0; i < n; i++)
	{
		int64_t		c = top[ppar[i]];
		int32_t		want = c != 0 ? t->selected[c] : GC_NOISE;

		/* the root selected alone with allow_single_cluster: by lambda */
		if (c == 0 && p->allow_single_cluster && t->selected[0] != GC_NOISE &&
			o->labels[i] == t->selected[0])
			want = t->selected[0];
		bad += o->labels[i] != want;
	}
	bad += !numbered_by_position(o->labels, n, o->res.clusters);
	bad += nsel != o->res.clusters;
out:
	CHECK(bad == 0, "%s: the tree is not consistent (%d)", what, bad);
	free(seen);
	free(cpar);
	free(csum);
	free(csz);
	free(top);
	free(ppar);
	free(birth);
	return bad;
}

/* ------------------------------------------------------------------ */
/* GLOSH by brute force over the tree's rows                           */
/* ------------------------------------------------------------------ */

/*
 * lambda_max of every cluster: each row's lambda taken up its whole
 * parent chain (O(n depth)); then each row's score from the cluster it
 * leaves.  Returns the rows whose score differs (bits).
 */
static int64_t
glosh_brute(int64_t n, const gc_hdbscan_tree *t, const double *outlier)
{
	int64_t		k = t->nclusters,
				bad = 0;
	int64_t    *cpar = malloc(sizeof(int64_t) * (size_t) (k + 1));
	double	   *lmax = calloc((size_t) (k + 1), sizeof(double));

	for (int64_t c = 0; c < k; c++)
		cpar[c] = -1;
	for (int64_t r = 0; r < t->nrows; r++)
		if (t->rows[r].child >= n)
			cpar[t->rows[r].child - n] = t->rows[r].parent - n;
	for (int64_t r = 0; r < t->nrows; r++)
		for (int64_t c = t->rows[r].parent - n; c >= 0; c = cpar[c])
			if (t->rows[r].lambda > lmax[c])
				lmax[c] = t->rows[r].lambda;
	for (int64_t r = 0; r < t->nrows; r++)
	{
		const gc_hdbscan_tree_row *w = &t->rows[r];
		double		lm = lmax[w->parent - n],
					want;

		if (w->child >= n)
			continue;
		if (lm == 0.0 || isinf(w->lambda))
			want = 0.0;
		else if (isinf(lm))
			want = 1.0;
		else
			want = (lm - w->lambda) / lm;
		if (memcmp(&want, &outlier[w->child], sizeof(double)) != 0)
			bad++;
	}
	free(cpar);
	free(lmax);
	return bad;
}

/* ------------------------------------------------------------------ */
/* Random spanning trees: invariants, GLOSH, threads                   */
/* ------------------------------------------------------------------ */

/*
 * A random spanning tree of n rows: row i > 0 hangs from a random earlier
 * row, positions shuffled; weights from a few values (ties, 0) or spread.
 */
static gc_mst_edge *
random_mst(uint64_t *rs, int64_t n, int kind)
{
	gc_mst_edge *e = malloc(sizeof(gc_mst_edge) * (size_t) (n > 1 ? n - 1 : 1));
	int64_t    *perm = malloc(sizeof(int64_t) * (size_t) n);

	for (int64_t i = 0; i < n; i++)
		perm[i] = i;
	for (int64_t i = n - 1; i > 0; i--)
	{
		int64_t		j = (int64_t) (tu_next(rs) % (uint64_t) (i + 1)),
					t = perm[i];

		perm[i] = perm[j];
		perm[j] = t;
	}
	for (int64_t i = 1; i < n; i++)
	{
		gc_mst_edge *f = &e[i - 1];

		f->a = perm[(int64_t) (tu_next(rs) % (uint64_t) i)];
		f->b = perm[i];
		switch (kind)
		{
			case 0:				/* spread: no ties */
				f->w = tu_uniform(rs) * 10.0;
				break;
			case 1:				/* a few values: ties everywhere */
				f->w = (double) (1 + tu_next(rs) % 6);
				break;
			case 2:				/* duplicates: many zeros */
				f->w = tu_next(rs) % 3 == 0 ? 0.0 : tu_uniform(rs);
				break;
			default:			/* clustered: small inside, large between */
				f->w = tu_next(rs) % 8 == 0 ? 5.0 + tu_uniform(rs) * 5.0 :
					tu_uniform(rs) * 0.5;
				break;
		}
	}
	sort_edges(e, n - 1);
	free(perm);
	return e;
}

static void
test_random_trees(uint64_t *rs)
{
	int			cases = 0;

	for (int it = 0; it < 400; it++)
	{
		int64_t		n = 2 + (int64_t) (tu_next(rs) % (it < 200 ? 60 : 700));
		int			kind = (int) (tu_next(rs) % 4);
		gc_mst_edge *e = random_mst(rs, n, kind);
		gc_hdbscan_params p = params(2 + (int64_t) (tu_next(rs) % 8),
									 0.0,
									 tu_next(rs) % 2 ? GC_HDBSCAN_LEAF : GC_HDBSCAN_EOM,
									 tu_next(rs) % 3 == 0);
		static const double epss[] = {0.0, 0.0, 0.3, 1.0, 2.5, 4.0, 7.0};
		outs		o,
					o1;
		gc_status	st;
		gc_ctx		ctx = {.n_threads = 2 + it % 2},
					one = {.n_threads = 1};
		char		what[160];

		p.epsilon = epss[tu_next(rs) % 7];
		snprintf(what, sizeof(what), "random tree n=%lld kind=%d mcs=%lld %s eps=%g single=%d",
				 (long long) n, kind, (long long) p.min_cluster_size,
				 p.method == GC_HDBSCAN_LEAF ? "leaf" : "eom", p.epsilon,
				 p.allow_single_cluster);
		outs_init(&o, n, true);
		outs_init(&o1, n, true);
		CHECK(gc_hdbscan_from_mst(&ctx, n, e, &p, &o.res, &st) == GC_OK, "%s: %s", what, st.message);
		CHECK(gc_hdbscan_from_mst(&one, n, e, &p, &o1.res, &st) == GC_OK, "%s: %s", what, st.message);
		cases++;
		CHECK(o.tree.nrows == o1.tree.nrows &&
			  memcmp(o.tree.rows, o1.tree.rows, sizeof(gc_hdbscan_tree_row) * o.tree.nrows) == 0 &&
			  memcmp(o.labels, o1.labels, sizeof(int32_t) * n) == 0 &&
			  memcmp(o.prob, o1.prob, sizeof(double) * n) == 0 &&
			  memcmp(o.outlier, o1.outlier, sizeof(double) * n) == 0,
			  "%s: the result depends on the threads", what);
		check_tree(n, &p, &o, what);
		CHECK(glosh_brute(n, &o.tree, o.outlier) == 0, "%s: GLOSH differs", what);
		outs_free(&o);
		outs_free(&o1);
		free(e);
	}
	printf("random trees: %d\n", cases);
}

/* ------------------------------------------------------------------ */
/* scikit-learn 1.9.1's fixtures                                       */
/* ------------------------------------------------------------------ */

/*
 * One fixture (test/gpu/make_hdbscan_fixtures.py's format).  A fixture
 * may end with an optional section, "single_linkage" and one line of the
 * n - 1 rows of scikit-learn's _single_linkage_tree_ (left right value),
 * the tree in scikit-learn's own order of ties: phase 3 must then give
 * its labels and probabilities bit for bit.
 */
typedef struct fixture
{
	char		name[64];
	int64_t		n;
	int			d;
	gc_hdbscan_params p;
	float	   *X;
	int32_t    *labels;
	double	   *prob,
			   *core,
			   *mst,
			   *slt;			/* 3 (n - 1) or NULL */
	int			clusters;		/* scikit-learn's labels' max + 1 */
} fixture;

static void
fixture_free(fixture *f)
{
	free(f->X);
	free(f->labels);
	free(f->prob);
	free(f->core);
	free(f->mst);
	free(f->slt);
}

/* Reads count doubles after the word key; false when it is not there. */
static bool
read_doubles(FILE *in, const char *key, double *v, int64_t count)
{
	char		word[64];

	if (fscanf(in, "%63s", word) != 1 || strcmp(word, key) != 0)
		return false;
	for (int64_t i = 0; i < count; i++)
	{
		if (fscanf(in, "%63s", word) != 1)
			return false;
		v[i] = strtod(word, NULL);
	}
	return true;
}

/* The optional sections, then "end". */
static bool
read_tail(FILE *in, fixture *f)
{
	char		word[64];

	if (fscanf(in, "%63s", word) != 1)
		return false;
	if (strcmp(word, "single_linkage") == 0)
	{
		f->slt = malloc(sizeof(double) * (size_t) (3 * f->n));
		for (int64_t i = 0; i < 3 * (f->n - 1); i++)
		{
			if (fscanf(in, "%63s", word) != 1)
				return false;
			f->slt[i] = strtod(word, NULL);
		}
		if (fscanf(in, "%63s", word) != 1)
			return false;
	}
	return strcmp(word, "end") == 0;
}

static bool
fixture_read(const char *path, fixture *f)
{
	FILE	   *in = fopen(path, "r");
	char		word[64],
				method[16],
				metric[16];
	int			single,
				version;
	long long	n,
				mcs,
				ms;
	bool		ok;

	memset(f, 0, sizeof(*f));
	if (in == NULL)
		return false;
	ok = fscanf(in, " gpuclust-hdbscan-fixture %d name %63s sklearn %63s n %lld d %d"
				" min_cluster_size %lld min_samples %lld epsilon %lf method %15s"
				" allow_single_cluster %d alpha %lf metric %15s X",
				&version, f->name, word, &n, &f->d, &mcs, &ms, &f->p.epsilon,
				method, &single, &f->p.alpha, metric) == 12 && n >= 1;
	if (ok)
	{
		double	   *lab = malloc(sizeof(double) * (size_t) n);

		f->n = n;
		f->p.min_cluster_size = mcs;
		f->p.min_samples = ms;
		f->p.method = strcmp(method, "leaf") == 0 ? GC_HDBSCAN_LEAF : GC_HDBSCAN_EOM;
		f->p.allow_single_cluster = single != 0;
		f->p.metric = strcmp(metric, "cosine") == 0 ? GC_METRIC_COSINE : GC_METRIC_EUCLIDEAN;
		f->X = malloc(sizeof(float) * (size_t) (n * f->d));
		f->labels = malloc(sizeof(int32_t) * (size_t) n);
		f->prob = malloc(sizeof(double) * (size_t) n);
		f->core = malloc(sizeof(double) * (size_t) n);
		f->mst = malloc(sizeof(double) * (size_t) n);
		for (int64_t i = 0; i < n * f->d && ok; i++)
			ok = fscanf(in, "%63s", word) == 1 && ((f->X[i] = strtof(word, NULL)), true);
		ok = ok && read_doubles(in, "labels", lab, n) &&
			read_doubles(in, "probabilities", f->prob, n) &&
			read_doubles(in, "core", f->core, n) &&
			read_doubles(in, "mst", f->mst, n - 1) && read_tail(in, f);
		for (int64_t i = 0; i < n && ok; i++)
		{
			f->labels[i] = (int32_t) lab[i];
			if (f->labels[i] + 1 > f->clusters)
				f->clusters = f->labels[i] + 1;
		}
		free(lab);
	}
	fclose(in);
	return ok;
}

/* The fixture's rows as the pipeline sees them (unit rows for cosine). */
static float *
fixture_rows(const fixture *f)
{
	float	   *R = malloc(sizeof(float) * (size_t) (f->n * f->d));
	gc_ctx		ctx = {.n_threads = 1};

	if (f->p.metric == GC_METRIC_COSINE)
		gc_unit_rows(&ctx, f->X, f->n, f->d, R);
	else
		memcpy(R, f->X, sizeof(float) * (size_t) (f->n * f->d));
	return R;
}

static int
cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

/*
 * The fixtures' paths, sorted (free each and the list): FIXTURE_DIR, or
 * the directory GPUCLUST_HDBSCAN_FIXTURES names.
 */
static char **
fixture_paths(int *count)
{
	const char *dirname = getenv("GPUCLUST_HDBSCAN_FIXTURES");
	DIR		   *dir;
	struct dirent *de;
	char	  **paths = calloc(256, sizeof(char *));
	int			m = 0;

	if (dirname == NULL)
		dirname = FIXTURE_DIR;
	if ((dir = opendir(dirname)) != NULL)
	{
		while ((de = readdir(dir)) != NULL && m < 255)
		{
			size_t		len = strlen(de->d_name);

			if (len > 4 && strcmp(de->d_name + len - 4, ".txt") == 0)
			{
				paths[m] = malloc(strlen(dirname) + len + 2);
				sprintf(paths[m++], "%s/%s", dirname, de->d_name);
			}
		}
		closedir(dir);
	}
	qsort(paths, (size_t) m, sizeof(char *), cmp_name);
	*count = m;
	return paths;
}

/* The largest difference of a from b, absolute or relative (NaN: inf). */
static double
max_diff(const double *a, const double *b, int64_t n, bool relative)
{
	double		m = 0.0;

	for (int64_t i = 0; i < n; i++)
	{
		double		t = a[i] == b[i] ? 0.0 : fabs(a[i] - b[i]);

		if (relative && t != 0.0)
			t /= fabs(b[i]);
		if (isnan(t) || t > m)
			m = isnan(t) ? INFINITY : t;
	}
	return m;
}

static int64_t
bits_differ(const double *a, const double *b, int64_t n)
{
	int64_t		c = 0;

	for (int64_t i = 0; i < n; i++)
		c += memcmp(&a[i], &b[i], sizeof(double)) != 0;
	return c;
}

/* Whether phase 3's result is scikit-learn's: a renumbering, 1e-12. */
static bool
as_sklearn(const fixture *f, const outs *o)
{
	return same_partition(o->labels, f->labels, f->n, o->res.clusters, f->clusters) &&
		max_diff(o->prob, f->prob, f->n, false) <= 1e-12;
}

/*
 * scikit-learn's own minimum spanning tree (mst_from_data_matrix: Prim's
 * algorithm from row 0, its edges (source, new row) in the order it adds
 * them), sorted by weight, stably.  scikit-learn sorts it with numpy's
 * unstable argsort, whose order of ties this cannot know.
 */
static void
sklearn_prim(const fixture *f, const float *R, const double *core,
			 gc_mst_edge *e)
{
	int64_t		n = f->n,
				cur = 0;
	char	   *in = calloc((size_t) n, 1);
	double	   *reach = malloc(sizeof(double) * (size_t) n);
	int64_t    *src = malloc(sizeof(int64_t) * (size_t) n);

	for (int64_t j = 0; j < n; j++)
		reach[j] = INFINITY, src[j] = 1;
	for (int64_t i = 0; i < n - 1; i++)
	{
		double		best = DBL_MAX;
		int64_t		from = 0,
					to = 0;

		in[cur] = 1;
		for (int64_t j = 0; j < n; j++)
		{
			double		mrd;

			if (in[j])
				continue;
			mrd = ref_mr(R, f->d, f->p.alpha, f->p.metric == GC_METRIC_COSINE, core, cur, j);
			if (mrd < reach[j])
			{
				reach[j] = mrd;
				src[j] = cur;
				if (mrd < best)
					best = mrd, from = cur, to = j;
			}
			else if (reach[j] < best)
				best = reach[j], from = src[j], to = j;
		}
		e[i].a = from;
		e[i].b = to;
		e[i].w = best;
		cur = to;
	}
	for (int64_t i = 1; i < n - 1; i++)
	{
		gc_mst_edge x = e[i];
		int64_t		j = i;

		for (; j > 0 && e[j - 1].w > x.w; j--)
			e[j] = e[j - 1];
		e[j] = x;
	}
	free(in);
	free(reach);
	free(src);
}

/*
 * How far phase 3's result is from scikit-learn's: the rows whose noise
 * differs, whose probability differs by more than 1e-12, or whose
 * cluster maps (either way) elsewhere than an earlier row's did.
 */
static int64_t
distance_to_sklearn(const fixture *f, const outs *o, int32_t *ab, int32_t *ba)
{
	int64_t		n = f->n,
				s = 0;

	for (int64_t i = 0; i < n; i++)
		ab[i] = ba[i] = -2;
	for (int64_t i = 0; i < n; i++)
	{
		int32_t		a = o->labels[i],
					b = f->labels[i];

		if ((a < 0) != (b < 0))
		{
			s++;
			continue;
		}
		s += fabs(o->prob[i] - f->prob[i]) > 1e-12;
		if (a < 0)
			continue;
		if (ab[a] == -2 && ba[b] == -2)
			ab[a] = b, ba[b] = a;
		else
			s += ab[a] != b || ba[b] != a;
	}
	return s;
}

/*
 * Whether scikit-learn's result is phase 3's on scikit-learn's own tree
 * with its ties in some order: a hill climb from the stable order, each
 * step swapping two edges of equal weight, kept unless it takes the
 * result further from scikit-learn's.  Returns the steps taken, or -1
 * when max_steps did not reach it.
 */
static int64_t
tie_climb(const fixture *f, int64_t max_steps)
{
	int64_t		n = f->n,
				tied = 0,
				ngroups = 0,
				best,
				step;
	float	   *R = fixture_rows(f);
	double	   *core = malloc(sizeof(double) * (size_t) n);
	gc_mst_edge *e = malloc(sizeof(gc_mst_edge) * (size_t) n);
	int64_t    *glo = malloc(sizeof(int64_t) * (size_t) n),
			   *glen = malloc(sizeof(int64_t) * (size_t) n);
	int32_t    *ab = malloc(sizeof(int32_t) * (size_t) n),
			   *ba = malloc(sizeof(int32_t) * (size_t) n);
	uint64_t	rs = 1;
	gc_status	st;
	outs		o;

	ref_core(R, n, f->d, f->p.min_samples, f->p.metric == GC_METRIC_COSINE, core);
	sklearn_prim(f, R, core, e);
	for (int64_t lo = 0, hi; lo < n - 1; lo = hi)
	{
		for (hi = lo + 1; hi < n - 1 && e[hi].w == e[lo].w; hi++)
			;
		if (hi - lo > 1)
		{
			glo[ngroups] = lo;
			glen[ngroups++] = hi - lo;
			tied += hi - lo;
		}
	}
	outs_init(&o, n, false);
	gc_hdbscan_from_mst(NULL, n, e, &f->p, &o.res, &st);
	best = distance_to_sklearn(f, &o, ab, ba);
	for (step = 0; step < max_steps && best > 0 && tied > 0; step++)
	{
		int64_t		k = (int64_t) (tu_next(&rs) % (uint64_t) tied),
					g = 0,
					i,
					j,
					dist;
		gc_mst_edge t;

		while (k >= glen[g])
			k -= glen[g++];
		i = glo[g] + k;
		j = glo[g] + (int64_t) (tu_next(&rs) % (uint64_t) glen[g]);
		t = e[i], e[i] = e[j], e[j] = t;
		gc_hdbscan_from_mst(NULL, n, e, &f->p, &o.res, &st);
		dist = distance_to_sklearn(f, &o, ab, ba);
		if (dist <= best)
			best = dist;
		else
			t = e[i], e[i] = e[j], e[j] = t;
	}
	if (best == 0)
	{
		gc_hdbscan_from_mst(NULL, n, e, &f->p, &o.res, &st);
		if (!as_sklearn(f, &o))
			best = 1;
	}
	outs_free(&o);
	free(R);
	free(core);
	free(e);
	free(glo);
	free(glen);
	free(ab);
	free(ba);
	return best == 0 ? step : -1;
}

/* Phase 3 on scikit-learn's own single-linkage tree: bit for bit. */
static void
fixture_own_tree(const fixture *f)
{
	int64_t		n = f->n;
	int64_t    *rep = malloc(sizeof(int64_t) * (size_t) (2 * n));
	gc_mst_edge *e = malloc(sizeof(gc_mst_edge) * (size_t) n);
	outs		o;
	gc_status	st;

	/* an edge between any rows of the two sides makes the same merge */
	for (int64_t i = 0; i < n; i++)
		rep[i] = i;
	for (int64_t i = 0; i < n - 1; i++)
	{
		e[i].a = rep[(int64_t) f->slt[3 * i]];
		e[i].b = rep[(int64_t) f->slt[3 * i + 1]];
		e[i].w = f->slt[3 * i + 2];
		rep[n + i] = e[i].a;
	}
	outs_init(&o, n, false);
	CHECK(gc_hdbscan_from_mst(NULL, n, e, &f->p, &o.res, &st) == GC_OK, "%s", st.message);
	CHECK(same_partition(o.labels, f->labels, n, o.res.clusters, f->clusters) &&
		  bits_differ(o.prob, f->prob, n) == 0,
		  "%s: phase 3 on scikit-learn's own tree differs from its result", f->name);
	outs_free(&o);
	free(rep);
	free(e);
}

/*
 * Phases 1 and 2 by brute force against the fixture: core distances and
 * MST weights.  Euclidean: the weights bit for bit (scikit-learn's
 * HDBSCAN's own), the core distances too, or within 1e-12 where the
 * fixture's come from NearestNeighbors' dot-product formula (d = 64).
 * Cosine: gpuclust's distance is |u - v|² / 2 on float32 unit rows,
 * scikit-learn's 1 - cos in double: within 1e-6.
 */
static void
fixture_phases12(const fixture *f, double *core, gc_mst_edge *e)
{
	int64_t		n = f->n;
	float	   *R = fixture_rows(f);
	bool		cosine = f->p.metric == GC_METRIC_COSINE;
	double	   *w = malloc(sizeof(double) * (size_t) n);
	int64_t		core_bits,
				w_bits;
	double		core_rel,
				w_rel;

	ref_core(R, n, f->d, f->p.min_samples, cosine, core);
	ref_mst(R, n, f->d, f->p.alpha, cosine, core, e);
	for (int64_t i = 0; i + 1 < n; i++)
		w[i] = e[i].w;
	core_bits = bits_differ(core, f->core, n);
	core_rel = max_diff(core, f->core, n, true);
	w_bits = bits_differ(w, f->mst, n - 1);
	w_rel = max_diff(w, f->mst, n - 1, true);
	if (cosine)
		CHECK(core_rel <= 1e-6 && w_rel <= 1e-6,
			  "%s: core %g, MST %g from scikit-learn's", f->name, core_rel, w_rel);
	else
		CHECK(w_bits == 0 && (core_bits == 0 || core_rel <= 1e-12),
			  "%s: %lld core distances (%g), %lld MST weights differ from scikit-learn's",
			  f->name, (long long) core_bits, core_rel, (long long) w_bits);
	if (core_bits != 0 || w_bits != 0)
		printf("    %s: %lld core distances differ (at most %.2g relative), %lld MST weights (%.2g)\n",
			   f->name, (long long) core_bits, core_rel, (long long) w_bits, w_rel);
	free(R);
	free(w);
}

/*
 * The whole call, once the driver works: the fixture's labels,
 * probabilities and outlier scores as phase 3 gives them on the brute
 * force's tree (ref: labels, probabilities, outliers).  Returns false
 * while gc_hdbscan_cpu is not written (GC_EINTERNAL).
 */
static bool
fixture_end_to_end(const fixture *f, const outs *ref)
{
	outs		o;
	gc_status	st;
	gc_ctx		ctx = {.n_threads = 2};
	gc_code		rc;
	bool		ran;

	outs_init(&o, f->n, false);
	rc = gc_hdbscan_cpu(&ctx, f->X, f->n, f->d, &f->p, &o.res, &st);
	ran = rc != GC_EINTERNAL;
	if (ran)
	{
		CHECK(rc == GC_OK, "%s: gc_hdbscan_cpu: %s", f->name, st.message);
		CHECK(rc == GC_OK && o.res.clusters == ref->res.clusters &&
			  memcmp(o.labels, ref->labels, sizeof(int32_t) * f->n) == 0 &&
			  bits_differ(o.prob, ref->prob, f->n) == 0 &&
			  bits_differ(o.outlier, ref->outlier, f->n) == 0,
			  "%s: gc_hdbscan_cpu differs from phase 3 on the brute-force tree", f->name);
	}
	outs_free(&o);
	return ran;
}

/* The ties among the MST's weights: the edges whose weight another has. */
static int64_t
tied_edges(const gc_mst_edge *e, int64_t m)
{
	int64_t		t = 0;

	for (int64_t i = 0; i < m; i++)
		t += (i > 0 && e[i].w == e[i - 1].w) || (i + 1 < m && e[i].w == e[i + 1].w);
	return t;
}

/*
 * One fixture: phases 1 and 2, phase 3 on the (w, a, b) tree against
 * scikit-learn's result, and where they differ, the reason: the order of
 * ties (scikit-learn's result is phase 3's on its own tree with the ties
 * reordered), or the cosine weights.  Returns 1 when as scikit-learn's,
 * and sets *e2e when gc_hdbscan_cpu ran.
 */
static int
fixture_check(const fixture *f, bool *e2e)
{
	int64_t		n = f->n;
	double	   *core = malloc(sizeof(double) * (size_t) n);
	gc_mst_edge *e = malloc(sizeof(gc_mst_edge) * (size_t) n);
	outs		o;
	gc_status	st;
	bool		exact;
	const char *why = "";
	char		buf[96];

	fixture_phases12(f, core, e);
	outs_init(&o, n, true);
	CHECK(gc_hdbscan_from_mst(NULL, n, e, &f->p, &o.res, &st) == GC_OK, "%s: %s",
		  f->name, st.message);
	exact = as_sklearn(f, &o);
	check_tree(n, &f->p, &o, f->name);
	CHECK(glosh_brute(n, &o.tree, o.outlier) == 0, "%s: GLOSH differs", f->name);
	if (f->slt != NULL)
		fixture_own_tree(f);
	if (!exact && f->p.metric == GC_METRIC_COSINE)
	{
		why = "cosine weights: same labels, probabilities within 1e-5";
		CHECK(same_partition(o.labels, f->labels, n, o.res.clusters, f->clusters) &&
			  max_diff(o.prob, f->prob, n, false) <= 1e-5, "%s: %s", f->name, "differs");
	}
	else if (!exact)
	{
		int64_t		steps = tie_climb(f, 100000);

		snprintf(buf, sizeof(buf), "tie order: scikit-learn's after %lld swaps of ties",
				 (long long) steps);
		why = steps >= 0 ? buf : "NOT scikit-learn's under any order of ties tried";
		CHECK(steps >= 0, "%s: %s", f->name, why);
	}
	printf("  %-18s n=%5lld tied edges %4lld clusters %3d (scikit-learn %3d), probabilities within %.2g: %s%s\n",
		   f->name, (long long) n, (long long) tied_edges(e, n - 1),
		   o.res.clusters, f->clusters, max_diff(o.prob, f->prob, n, false),
		   exact ? "as scikit-learn's" : "differs; ", why);
	*e2e = fixture_end_to_end(f, &o);
	outs_free(&o);
	free(core);
	free(e);
	return exact;
}

static void
test_fixtures(void)
{
	int			count,
				exact = 0,
				e2e = 0,
				own = 0;
	char	  **paths = fixture_paths(&count);

	CHECK(count >= 26, "%d fixtures found in %s (run from the repository root)",
		  count, FIXTURE_DIR);
	printf("scikit-learn 1.9.1's fixtures, phase 3 on the (w, a, b) tree:\n");
	for (int i = 0; i < count; i++)
	{
		fixture		f;
		bool		ran = false;

		CHECK(fixture_read(paths[i], &f), "%s: cannot read", paths[i]);
		if (f.n >= 1)
		{
			exact += fixture_check(&f, &ran);
			e2e += ran;
			own += f.slt != NULL;
		}
		fixture_free(&f);
		free(paths[i]);
	}
	printf("fixtures: %d of %d as scikit-learn's on the (w, a, b) tree; %d with scikit-learn's own tree; gc_hdbscan_cpu %s\n",
		   exact, count, own, e2e ? "compared" : "not written yet (GC_EINTERNAL): skipped");
	free(paths);
}

/* ------------------------------------------------------------------ */
/* Hand-made trees                                                     */
/* ------------------------------------------------------------------ */

/* Phase 3 on m edges (any order of sides; sorted here), with the tree. */
static void
run_edges(int64_t n, gc_mst_edge *e, const gc_hdbscan_params *p, outs *o,
		  const char *what)
{
	gc_status	st;

	sort_edges(e, n - 1);
	outs_init(o, n, true);
	CHECK(gc_hdbscan_from_mst(NULL, n, e, p, &o->res, &st) == GC_OK, "%s: %s", what, st.message);
	check_tree(n, p, o, what);
	CHECK(glosh_brute(n, &o->tree, o->outlier) == 0, "%s: GLOSH differs", what);
	for (int64_t i = 0; i < n; i++)
		CHECK(!isnan(o->prob[i]) && !isnan(o->outlier[i]), "%s: row %lld: NaN", what, (long long) i);
}

static bool
labels_are(const outs *o, const int32_t *want, int64_t n)
{
	return memcmp(o->labels, want, sizeof(int32_t) * (size_t) n) == 0;
}

static void
print_labels(const char *what, const outs *o, int64_t n)
{
	printf("    %s:", what);
	for (int64_t i = 0; i < n; i++)
		printf(" %d", o->labels[i]);
	printf("\n");
}

/*
 * Thirteen rows: A11 = {0, 1, 2, 12}, A12 = {3, 4, 5}, A2 = {6, 7, 8},
 * B = {9, 10, 11}; A1 = A11 + A12 splits at 2, A = A1 + A2 at 4, the root
 * = A + B at 8; row 12 joins A11 at 1; min_cluster_size 3.  Clusters:
 * root 13, A 14, B 15, A1 16, A2 17, A11 18, A12 19.
 */
static gc_mst_edge *
nested_tree(void)
{
	static const gc_mst_edge e[12] = {
		{0, 1, 0.125}, {1, 2, 0.125}, {3, 4, 0.125}, {4, 5, 0.125},
		{6, 7, 0.125}, {7, 8, 0.125}, {9, 10, 0.125}, {10, 11, 0.125},
		{0, 12, 1.0}, {2, 3, 2.0}, {5, 6, 4.0}, {8, 9, 8.0}
	};
	gc_mst_edge *c = malloc(sizeof(e));

	memcpy(c, e, sizeof(e));
	return c;
}

static void
test_epsilon(void)
{
	static const int32_t leaves[13] = {0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 0},
				a1[13] = {0, 0, 0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 0},
				a_b[13] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0},
				all[13] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
				nested[13] = {0, 0, 0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 0};
	static const struct
	{
		const char *what;
		gc_hdbscan_method method;
		double		eps;
		bool		single;
		const int32_t *want;
		int			clusters;
	}			cases[] = {
		{"eom", GC_HDBSCAN_EOM, 0.0, false, leaves, 4},
		{"leaf", GC_HDBSCAN_LEAF, 0.0, false, leaves, 4},
		/* A11, A12 (born at 2) climb to A1 (born at 4) */
		{"leaf eps 3", GC_HDBSCAN_LEAF, 3.0, false, a1, 3},
		{"eom eps 3", GC_HDBSCAN_EOM, 3.0, false, a1, 3},
		/* A11 climbs past A1 (born at 4 < 5) to A (born at 8) */
		{"leaf eps 5", GC_HDBSCAN_LEAF, 5.0, false, a_b, 2},
		{"eom eps 5", GC_HDBSCAN_EOM, 5.0, false, a_b, 2},
		/* every climb ends under the root: at A and B, or the root */
		{"leaf eps 10", GC_HDBSCAN_LEAF, 10.0, false, a_b, 2},
		{"leaf eps 10 single", GC_HDBSCAN_LEAF, 10.0, true, all, 1},
		{"eom eps 10 single", GC_HDBSCAN_EOM, 10.0, true, all, 1},
		/* eps = A2's distance: A2 stays, A11 and A12 climb to A above it */
		{"leaf eps 4", GC_HDBSCAN_LEAF, 4.0, false, nested, 3},
	};

	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++)
	{
		gc_mst_edge *e = nested_tree();
		gc_hdbscan_params p = params(3, cases[k].eps, cases[k].method, cases[k].single);
		outs		o;

		run_edges(13, e, &p, &o, cases[k].what);
		CHECK(labels_are(&o, cases[k].want, 13) && o.res.clusters == cases[k].clusters,
			  "%s: labels", cases[k].what);
		if (!labels_are(&o, cases[k].want, 13))
			print_labels(cases[k].what, &o, 13);
		/* row 12 leaves A11 at 1 where A11's rows reach 8 */
		if (cases[k].want == leaves)
			CHECK(o.prob[12] == 0.125 && o.prob[0] == 1.0, "%s: probabilities %g %g",
				  cases[k].what, o.prob[12], o.prob[0]);
		else
			CHECK(o.prob[12] == 1.0, "%s: probability %g", cases[k].what, o.prob[12]);
		CHECK(o.outlier[12] == 0.875 && o.outlier[0] == 0.0, "%s: outlier %g",
			  cases[k].what, o.outlier[12]);
		/* nested: A2 (17) and A (14) both selected */
		if (cases[k].want == nested)
			CHECK(o.tree.selected[14 - 13] == 0 && o.tree.selected[17 - 13] == 1 &&
				  o.tree.selected[15 - 13] == 2, "%s: selected", cases[k].what);
		outs_free(&o);
		free(e);
	}
}

/*
 * Six rows that never split (min_cluster_size 3): 0..3 at 1, row 4 joins
 * at 2, row 5 at 4.
 */
static void
test_single_cluster(void)
{
	static const int32_t none[6] = {-1, -1, -1, -1, -1, -1},
				core4[6] = {0, 0, 0, 0, -1, -1},
				core5[6] = {0, 0, 0, 0, 0, -1};
	static const struct
	{
		const char *what;
		gc_hdbscan_method method;
		double		eps;
		bool		single;
		const int32_t *want;
	}			cases[] = {
		{"eom", GC_HDBSCAN_EOM, 0.0, false, none},
		/* the root alone, rows at the largest lambda of its own rows (1) */
		{"eom single", GC_HDBSCAN_EOM, 0.0, true, core4},
		/* rows at lambda >= 1 / epsilon */
		{"eom single eps 1.5", GC_HDBSCAN_EOM, 1.5, true, core4},
		{"eom single eps 3", GC_HDBSCAN_EOM, 3.0, true, core5},
		{"eom eps 3", GC_HDBSCAN_EOM, 3.0, false, none},
		/* leaf with no split selects nothing (scikit-learn 1.9.1's code) */
		{"leaf no split", GC_HDBSCAN_LEAF, 0.0, false, none},
		{"leaf no split single", GC_HDBSCAN_LEAF, 0.0, true, none},
		{"leaf no split single eps", GC_HDBSCAN_LEAF, 3.0, true, none},
	};

	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++)
	{
		gc_mst_edge e[5] = {{0, 1, 1.0}, {1, 2, 1.0}, {2, 3, 1.0}, {3, 4, 2.0}, {4, 5, 4.0}};
		gc_hdbscan_params p = params(3, cases[k].eps, cases[k].method, cases[k].single);
		outs		o;

		run_edges(6, e, &p, &o, cases[k].what);
		CHECK(labels_are(&o, cases[k].want, 6), "%s: labels", cases[k].what);
		if (!labels_are(&o, cases[k].want, 6))
			print_labels(cases[k].what, &o, 6);
		CHECK(o.tree.nclusters == 1 && o.tree.nrows == 6, "%s: tree", cases[k].what);
		if (cases[k].want != none)
			CHECK(o.prob[0] == 1.0 && o.prob[5] == 0.0 &&
				  o.prob[4] == (cases[k].want == core5 ? 0.5 : 0.0),
				  "%s: probabilities", cases[k].what);
		CHECK(o.outlier[5] == 0.75 && o.outlier[4] == 0.5 && o.outlier[0] == 0.0,
			  "%s: outliers", cases[k].what);
		outs_free(&o);
	}
}

/* Rows at distance 0: lambda +inf, stabilities inf and NaN. */
static void
test_duplicates(void)
{
	/* A = 0..3, B = 4..7 copies, A + B at 2, row 8 at 5 */
	{
		gc_mst_edge e[8] = {{0, 1, 0}, {1, 2, 0}, {2, 3, 0}, {4, 5, 0}, {5, 6, 0},
		{6, 7, 0}, {3, 4, 2.0}, {7, 8, 5.0}};
		static const int32_t want[9] = {0, 0, 0, 0, 1, 1, 1, 1, -1};
		gc_hdbscan_params p = params(3, 0.0, GC_HDBSCAN_EOM, false);
		outs		o;

		run_edges(9, e, &p, &o, "duplicates");
		CHECK(labels_are(&o, want, 9), "duplicates: labels");
		CHECK(o.prob[0] == 1.0 && o.prob[8] == 0.0, "duplicates: probabilities");
		/* row 8 leaves the root, whose subtree reaches +inf: 1 (not NaN) */
		CHECK(o.outlier[0] == 0.0 && o.outlier[8] == 1.0, "duplicates: outliers %g",
			  o.outlier[8]);
		CHECK(isinf(o.tree.rows[o.tree.nrows - 1].lambda), "duplicates: lambda inf");
		outs_free(&o);
	}
	/* six copies split in two at distance 0: stabilities inf - inf = NaN */
	for (int single = 0; single < 2; single++)
	{
		gc_mst_edge e[5] = {{0, 2, 0}, {1, 3, 0}, {2, 4, 0}, {3, 5, 0}, {4, 5, 0}};
		static const int32_t two[6] = {0, 1, 0, 1, 0, 1},
					one[6] = {0, 0, 0, 0, 0, 0};
		gc_hdbscan_params p = params(3, 0.0, GC_HDBSCAN_EOM, single);
		outs		o;

		run_edges(6, e, &p, &o, single ? "copies single" : "copies");
		/* NaN > x is false: the children are kept; with allow_single the root */
		CHECK(labels_are(&o, single ? one : two, 6), "copies: labels");
		for (int i = 0; i < 6; i++)
			CHECK(o.prob[i] == 1.0 && o.outlier[i] == 0.0, "copies: row %d", i);
		outs_free(&o);
	}
}

/* n = 0, n = 1, parameters, the tree freed twice. */
static void
test_small(void)
{
	gc_hdbscan_params p = params(2, 0.0, GC_HDBSCAN_EOM, false);
	gc_status	st;
	outs		o;
	gc_mst_edge e[1] = {{0, 1, 1.0}};

	outs_init(&o, 1, true);
	o.labels[0] = 7;
	CHECK(gc_hdbscan_from_mst(NULL, 0, NULL, &p, &o.res, &st) == GC_OK &&
		  o.res.clusters == 0 && o.tree.nrows == 0 && o.labels[0] == 7, "n = 0");
	CHECK(gc_hdbscan_from_mst(NULL, 1, NULL, &p, &o.res, &st) == GC_OK &&
		  o.labels[0] == GC_NOISE && o.prob[0] == 0.0 && o.outlier[0] == 0.0 &&
		  o.res.clusters == 0 && o.tree.nrows == 0 && o.tree.rows == NULL, "n = 1");
	p.min_cluster_size = 1;
	CHECK(gc_hdbscan_from_mst(NULL, 2, e, &p, &o.res, &st) == GC_EINVAL, "mcs 1");
	p.min_cluster_size = 2;
	p.method = (gc_hdbscan_method) 7;
	CHECK(gc_hdbscan_from_mst(NULL, 2, e, &p, &o.res, &st) == GC_EINVAL, "method");
	p.method = GC_HDBSCAN_EOM;
	e[0].b = 5;
	CHECK(gc_hdbscan_from_mst(NULL, 2, e, &p, &o.res, &st) == GC_EINVAL &&
		  o.tree.rows == NULL, "edge out of range: %s", st.message);
	outs_free(&o);
	gc_hdbscan_tree_free(&o.tree);
	gc_hdbscan_tree_free(NULL);
}

/* ------------------------------------------------------------------ */
/* Size: chains of 1M rows, a random tree of 2M, cancel                */
/* ------------------------------------------------------------------ */

#if defined(__SANITIZE_ADDRESS__)
#define BIG_N INT64_C(1000000)
#else
#define BIG_N INT64_C(2000000)
#endif

static double
timed(int64_t n, const gc_mst_edge *e, const gc_hdbscan_params *p, outs *o)
{
	gc_status	st;
	gc_ctx		ctx = {.n_threads = 1};
	double		t0 = now_s();

	CHECK(gc_hdbscan_from_mst(&ctx, n, e, p, &o->res, &st) == GC_OK, "%s", st.message);
	return now_s() - t0;
}

static void
test_chains(void)
{
	int64_t		n = 1000000;
	gc_mst_edge *e = malloc(sizeof(gc_mst_edge) * (size_t) n);
	outs		o;
	double		t;
	bool		ok = true;

	/* each row joins the rest at a larger distance: 1M levels, no split */
	for (int64_t i = 0; i < n - 1; i++)
		e[i] = (gc_mst_edge) {i, i + 1, (double) (i + 1)};
	{
		gc_hdbscan_params p = params(5, 0.0, GC_HDBSCAN_EOM, true);

		outs_init(&o, n, true);
		t = timed(n, e, &p, &o);
		printf("chain of %lld rows, single linkage 1M deep: %.3f s\n", (long long) n, t);
		check_tree(n, &p, &o, "chain");
		/* the root alone; rows 0..4 leave last, at lambda 1 / 4 */
		CHECK(o.tree.nclusters == 1 && o.res.clusters == 1 && o.labels[0] == 0 &&
			  o.labels[4] == 0 && o.labels[5] == GC_NOISE && o.prob[4] == 1.0 &&
			  o.prob[5] == 0.0, "chain: labels");
		outs_free(&o);
	}
	/*
	 * groups of 5 rows (at 0.5) in a line, the gap after group k at k + 1:
	 * every merge splits, a cluster tree 200k deep
	 */
	for (int64_t i = 0; i < n - 1; i++)
		e[i] = (gc_mst_edge) {i, i + 1, i % 5 == 4 ? (double) (i / 5 + 1) : 0.5};
	sort_edges(e, n - 1);
	for (int m = 0; m < 3; m++)
	{
		gc_hdbscan_params p = params(5, m == 2 ? 1000.5 : 0.0,
									 m == 1 ? GC_HDBSCAN_LEAF : GC_HDBSCAN_EOM, false);
		int64_t		groups = n / 5;

		outs_init(&o, n, true);
		t = timed(n, e, &p, &o);
		printf("groups of 5 in a line, cluster tree %lld deep, %s%s: %.3f s\n",
			   (long long) groups - 1, m == 1 ? "leaf" : "eom",
			   m == 2 ? " eps 1000.5" : "", t);
		check_tree(n, &p, &o, "groups");
		/* every group a cluster; with epsilon groups 0..1000 are one */
		ok = true;
		for (int64_t i = 0; i < n; i++)
		{
			int64_t		g = i / 5;

			ok &= o.labels[i] == (m < 2 ? g : g <= 1000 ? 0 : g - 1000);
		}
		CHECK(ok && o.res.clusters == (m < 2 ? groups : groups - 1000), "groups %d: labels", m);
		outs_free(&o);
	}
	free(e);
}

static void
test_big(uint64_t *rs)
{
	int64_t		n = BIG_N;
	double		t0 = now_s();
	gc_mst_edge *e = random_mst(rs, n, 3);
	gc_hdbscan_params p = params(15, 0.0, GC_HDBSCAN_EOM, false);
	outs		o;
	double		t;

	printf("random tree of %lld rows made in %.1f s\n", (long long) n, now_s() - t0);
	outs_init(&o, n, false);
	t = timed(n, e, &p, &o);
	printf("gc_hdbscan_from_mst, %lld rows, random tree, eom, no tree: %.3f s (%d clusters)\n",
		   (long long) n, t, o.res.clusters);
	outs_free(&o);
	outs_init(&o, n, true);
	p.method = GC_HDBSCAN_LEAF;
	t = timed(n, e, &p, &o);
	printf("gc_hdbscan_from_mst, %lld rows, random tree, leaf, with the tree: %.3f s (%d clusters)\n",
		   (long long) n, t, o.res.clusters);
	check_tree(n, &p, &o, "big");
	outs_free(&o);
	free(e);
}

/* The same result on 1, 2 and 3 threads (the falling sides' walks). */
static void
test_threads(uint64_t *rs)
{
	int64_t		n = 300000;
	gc_mst_edge *e = random_mst(rs, n, 3);
	gc_hdbscan_params p = params(4, 0.0, GC_HDBSCAN_EOM, false);
	outs		o[3];

	for (int k = 0; k < 3; k++)
	{
		gc_ctx		ctx = {.n_threads = k + 1};
		gc_status	st;

		outs_init(&o[k], n, true);
		CHECK(gc_hdbscan_from_mst(&ctx, n, e, &p, &o[k].res, &st) == GC_OK, "%s", st.message);
	}
	for (int k = 1; k < 3; k++)
		CHECK(o[k].res.clusters == o[0].res.clusters &&
			  memcmp(o[k].labels, o[0].labels, sizeof(int32_t) * n) == 0 &&
			  bits_differ(o[k].prob, o[0].prob, n) == 0 &&
			  bits_differ(o[k].outlier, o[0].outlier, n) == 0 &&
			  o[k].tree.nrows == o[0].tree.nrows &&
			  memcmp(o[k].tree.rows, o[0].tree.rows,
					 sizeof(gc_hdbscan_tree_row) * (size_t) o[0].tree.nrows) == 0,
			  "%d threads differ from 1", k + 1);
	for (int k = 0; k < 3; k++)
		outs_free(&o[k]);
	free(e);
}

static int	polls_left;

static bool
stop_after_polls(void *arg)
{
	(void) arg;
	return --polls_left < 0;
}

/* A cancel at any of the first polls: GC_ECANCEL, nothing left allocated. */
static void
test_cancel(uint64_t *rs)
{
	int64_t		n = 3000000;
	gc_mst_edge *e = random_mst(rs, n, 0);
	gc_hdbscan_params p = params(5, 0.0, GC_HDBSCAN_EOM, false);

	for (int k = 0; k < 12; k++)
	{
		gc_ctx		ctx = {.n_threads = 1, .poll = stop_after_polls};
		gc_status	st;
		outs		o;
		gc_code		rc;

		polls_left = k;
		outs_init(&o, n, true);
		rc = gc_hdbscan_from_mst(&ctx, n, e, &p, &o.res, &st);
		CHECK(rc == (polls_left < 0 ? GC_ECANCEL : GC_OK), "cancel at poll %d: %d", k, rc);
		CHECK(rc == GC_OK || (o.tree.rows == NULL && o.tree.selected == NULL),
			  "cancel at poll %d: a tree", k);
		outs_free(&o);
	}
	free(e);
}

int
main(void)
{
	uint64_t	seed = tu_seed(),
				rs = seed;

	printf("seed %llu\n", (unsigned long long) seed);
	test_fixtures();
	test_random_trees(&rs);
	test_epsilon();
	test_single_cluster();
	test_duplicates();
	test_small();
	test_chains();
	test_threads(&rs);
	test_cancel(&rs);
	test_big(&rs);
	return test_summary("test_hdbscan");
}
