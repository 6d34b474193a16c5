/*
 * test_hdbscan_gpu.c — HDBSCAN's GPU phases (cuda/hdbscan/) against the
 * CPU's, bit for bit, on fresh random data of many shapes; small cases also
 * against the brute force of hdbscan_ref.h (every distance sorted, Prim
 * over the whole mutual-reachability matrix).  Needs a GPU.
 *
 *   phases   gc_hdbscan_mst_gpu = gc_hdbscan_core_cpu +
 *            gc_hdbscan_mst_edges_cpu: the core distances and the edges
 *            (a, b and w's bits, in (w, a, b) order).  n 2 to 300,000 and
 *            one of 2,000,000 in 2-d (the search in several launches); d 1,
 *            2, 3, 8, 16, 64 (each query path: d <= 4, 8, 16 in registers,
 *            the rows read from memory above 16); min_samples 1, 2 to 32
 *            (the k smallest in registers), 33, 64 and n (in heaps); alpha
 *            1, 0.5 and 2; Euclidean and cosine (the unit rows,
 *            gc_unit_rows, as the driver makes them); uniform rows,
 *            blobs, duplicates (core distances 0, every weight tied) and
 *            integer lattices (many ties); min_samples large enough that
 *            the core distances' heaps take several batches of queries.
 *   linkage  the single-linkage tree (cuda/hdbscan/hdbscan_linkage.cu,
 *            through the test hook gc_hdbscan_gpu_linkage_of) =
 *            gc_hdbscan_linkage's union-find, node for node: of every
 *            case's edges above, and of random spanning trees of every
 *            shape (random attachments, paths and caterpillars with ranks
 *            rising, falling or random, stars, brooms), n 2 to 5,000 and
 *            a few of 200,000 to 2,000,000; and gc_hdbscan_linkage_on_gpu
 *            = gc_hdbscan_linkage_cpu on data.
 *   condense the condensed tree (cuda/hdbscan/hdbscan_condense.cu, through
 *            gc_hdbscan_gpu_condense_of) = gc_hdbscan_condense's pass:
 *            the clusters' parents, children, births, stabilities and
 *            deaths and every row's place, bit for bit, at
 *            min_cluster_size 2 and a random one, on every tree above.
 *   calls    gc_hdbscan_on_gpu = gc_hdbscan_cpu (labels, probability and
 *            outlier bits, clusters; and with the condensed tree wanted,
 *            its rows too) and gc_hdbscan_mst_on_gpu = gc_hdbscan_mst_cpu,
 *            under both selection methods, epsilon, allow_single_cluster;
 *            and 300 small calls of random data and options.
 *   memory   the pool's high-water mark of a call at most
 *            gc_hdbscan_gpu_mem_bytes, the free memory back after it;
 *            gc_hdbscan_gpu_mem_bytes(10M, 2, 15) within 4 GB.
 *   cancel   a flag raised before the call, and during its rounds (from
 *            the progress callback): GC_ECANCEL, nothing kept; the
 *            progress phases in order; the longest time between polls.
 *            A flag raised from a second thread while a long kernel runs
 *            (300k x 16: the core distances, Borůvka's first round; 1M x
 *            2: a round), the memory pool full of 0x7f bytes first, so
 *            what a cancelled kernel leaves unwritten is not zeros:
 *            GC_ECANCEL within CANCEL_LATENCY_S of the raise, no CUDA
 *            error left, the memory back, and the next call equal to the
 *            CPU's.
 *   errors   arguments the GPU cannot take: GC_EINVAL / GC_EDEVICE.
 *
 * GPUCLUST_TEST_SEED fixes the data; GPUCLUST_TEST_QUICK=1 runs a smaller
 * set (for compute-sanitizer's memcheck), =2 a tiny one (racecheck).
 */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "testutil.h"
#include "hdbscan_common.h"
#include "hdbscan_ref.h"
#include "common/gpu.h"
#include "common/metric.h"
#include "hdbscan/hdbscan.h"

static uint64_t rs;
static int	quick;
static int	cases;

/* ------------------------------------------------------------------ */
/* data                                                                */
/* ------------------------------------------------------------------ */

/* A zero row has no cosine distance: moved off the origin. */
static void
no_zero_rows(float *X, int64_t n, int d)
{
	for (int64_t i = 0; i < n; i++)
	{
		bool		zero = true;

		for (int j = 0; j < d; j++)
			zero = zero && X[i * d + j] == 0.0f;
		if (zero)
			X[i * d] = 1.0f;
	}
}

/* ------------------------------------------------------------------ */
/* the kd-tree                                                         */
/* ------------------------------------------------------------------ */

/*
 * The tree's small nodes made in blocks (k_tr_block) = made level by level
 * device-wide: the same permutation, the same boxes (as floats: a box's
 * -0 and +0 are the same bound), on random rows with ties (coordinates on
 * a few values, duplicated rows), every leaf size HDBSCAN and the others
 * use, both split rules, n around the block's 2048 and past it.
 */
static void
test_kdtree_blocks(void)
{
	static const int64_t ns[] = {1, 2, 7, 8, 9, 63, 64, 65, 1000, 1024, 2047, 2048, 2049, 4097,
	5000, 65537, 300001};
	static const int ds[] = {1, 2, 3, 5, 16};
	int			bad = 0,
				done = 0;

	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
		for (size_t j = 0; j < sizeof(ds) / sizeof(ds[0]); j++)
		{
			const int64_t n = ns[i];
			const int	d = ds[j],
						leaf = (i + j) % 2 ? 8 : 32,
						levels = (int) (tu_next(&rs) % 4);	/* 0: continuous */
			const bool	cyclic = (i * 5 + j) % 3 == 0;
			int			depth = 0;
			int64_t		cap;
			float	   *X = malloc(sizeof(float) * (size_t) (n * d));
			int		   *p1 = malloc(sizeof(int) * (size_t) n),
					   *p2 = malloc(sizeof(int) * (size_t) n);
			float	   *lo1,
					   *hi1,
					   *lo2,
					   *hi2;
			gc_status	st;
			gc_code		r1,
						r2;
			int			d1 = -1,
						d2 = -2;

			while ((n >> (depth + 1)) >= leaf)
				depth++;
			cap = ((int64_t) 2 << depth) - 1;
			lo1 = malloc(sizeof(float) * (size_t) (cap * d));
			hi1 = malloc(sizeof(float) * (size_t) (cap * d));
			lo2 = malloc(sizeof(float) * (size_t) (cap * d));
			hi2 = malloc(sizeof(float) * (size_t) (cap * d));
			for (int64_t r = 0; r < n * d; r++)
			{
				double		u = tu_uniform(&rs);

				X[r] = levels ? (float) (int) (u * (1 + 2 * levels)) - (float) levels :
					(float) (u * 200.0 - 100.0);
			}
			for (int64_t r = 1; r < n; r++)
				if (tu_next(&rs) % 7 == 0)
					memcpy(&X[r * d], &X[(r - 1) * d], sizeof(float) * (size_t) d);
			r1 = gc_kdtree_gpu_of(X, n, d, leaf, cyclic, true, cap, &d1, p1, lo1, hi1, &st);
			CHECK(r1 == GC_OK, "kd-tree n=%lld d=%d: blocks: %s", (long long) n, d, st.message);
			r2 = gc_kdtree_gpu_of(X, n, d, leaf, cyclic, false, cap, &d2, p2, lo2, hi2, &st);
			CHECK(r2 == GC_OK, "kd-tree n=%lld d=%d: levels: %s", (long long) n, d, st.message);
			if (r1 == GC_OK && r2 == GC_OK)
			{
				int64_t		diff = d1 != d2;

				for (int64_t r = 0; r < n && !diff; r++)
					diff = p1[r] != p2[r];
				for (int64_t h = 0; h < cap * d && !diff; h++)
					diff = lo1[h] != lo2[h] || hi1[h] != hi2[h];
				CHECK(diff == 0, "kd-tree n=%lld d=%d leaf %d%s: the builds differ",
					  (long long) n, d, leaf, cyclic ? " cyclic" : "");
				bad += diff != 0;
			}
			done++;
			cases++;
			free(X);
			free(p1);
			free(p2);
			free(lo1);
			free(hi1);
			free(lo2);
			free(hi2);
		}
	printf("  kd-tree: the blocks' levels = the device-wide levels on %d trees (%d differ)\n",
		   done, bad);
}

/* ------------------------------------------------------------------ */
/* the phases                                                          */
/* ------------------------------------------------------------------ */

/* Rows whose bits differ (core), edges that differ in a, b or w's bits. */
static int64_t
core_diff(const double *x, const double *y, int64_t n, int64_t *first)
{
	int64_t		bad = 0;

	*first = -1;
	for (int64_t i = 0; i < n; i++)
		if (memcmp(&x[i], &y[i], sizeof(double)) != 0)
		{
			if (*first < 0)
				*first = i;
			bad++;
		}
	return bad;
}

static int64_t
edge_diff(const gc_mst_edge *x, const gc_mst_edge *y, int64_t m, int64_t *first)
{
	int64_t		bad = 0;

	*first = -1;
	for (int64_t e = 0; e < m; e++)
		if (x[e].a != y[e].a || x[e].b != y[e].b ||
			memcmp(&x[e].w, &y[e].w, sizeof(double)) != 0)
		{
			if (*first < 0)
				*first = e;
			bad++;
		}
	return bad;
}

static void
report_edge(const char *what, const char *other, const gc_mst_edge *g,
			const gc_mst_edge *c, int64_t e)
{
	fprintf(stderr, "  %s: edge %lld: gpu (%.17g, %lld, %lld), %s (%.17g, %lld, %lld)\n",
			what, (long long) e, g[e].w, (long long) g[e].a, (long long) g[e].b,
			other, c[e].w, (long long) c[e].a, (long long) c[e].b);
}

/*
 * The GPU's condensed tree of the single-linkage nodes at min_cluster_size
 * mcs = the CPU's pass: the clusters' parents, children, births,
 * stabilities and deaths, and each row's place, bit for bit.
 */
static void
check_condense(const gc_linkage_node *nodes, int64_t n, int64_t mcs, const char *what)
{
	gc_status	st;
	gc_hdbscan_clusters c,
				g;
	gc_hdbscan_place *lc = malloc(sizeof(gc_hdbscan_place) * (size_t) n),
			   *lg = malloc(sizeof(gc_hdbscan_place) * (size_t) n);
	gc_code		rc;

	rc = gc_hdbscan_condense(NULL, n, nodes, mcs, &c, lc, &st);
	CHECK(rc == GC_OK, "%s: condense mcs %lld: cpu: %s", what, (long long) mcs, st.message);
	if (rc == GC_OK)
	{
		rc = gc_hdbscan_gpu_condense_of(nodes, n, mcs, &g, lg, &st);
		CHECK(rc == GC_OK, "%s: condense mcs %lld: gpu: %s", what, (long long) mcs, st.message);
		if (rc == GC_OK)
		{
			int64_t		bad = -1,
						rows = 0;

			if (c.n == g.n)
				bad = bits_diff(c.parent, g.parent, c.n, 8) + bits_diff(c.child, g.child, c.n, 8) +
					bits_diff(c.birth, g.birth, c.n, 8) + bits_diff(c.stab, g.stab, c.n, 8) +
					bits_diff(c.death, g.death, c.n, 8);
			for (int64_t i = 0; i < n; i++)
				rows += lc[i].c != lg[i].c ||
					memcmp(&lc[i].lambda, &lg[i].lambda, sizeof(double)) != 0;
			CHECK(bad == 0 && rows == 0,
				  "%s: condense mcs %lld: clusters %lld / %lld, %lld values and %lld rows differ",
				  what, (long long) mcs, (long long) c.n, (long long) g.n, (long long) bad,
				  (long long) rows);
			gc_hdbscan_clusters_free(&g);
		}
		gc_hdbscan_clusters_free(&c);
	}
	free(lc);
	free(lg);
}

/*
 * The GPU's single-linkage tree of the n - 1 edges e (in (w, a, b) order)
 * = the union-find's, node for node; what names it in a failure.
 */
static void
check_linkage(const gc_mst_edge *e, int64_t n, const char *what)
{
	gc_status	st;
	gc_linkage_node *c = malloc(sizeof(gc_linkage_node) * (size_t) n),
			   *g = malloc(sizeof(gc_linkage_node) * (size_t) n);
	gc_code		rc;

	memset(g, 0xff, sizeof(gc_linkage_node) * (size_t) n);
	rc = gc_hdbscan_linkage(NULL, n, e, c, &st);
	CHECK(rc == GC_OK, "%s: linkage: cpu: %s", what, st.message);
	if (rc == GC_OK)
	{
		rc = gc_hdbscan_gpu_linkage_of(e, n, g, &st);
		CHECK(rc == GC_OK, "%s: linkage: gpu: %s", what, st.message);
	}
	if (rc == GC_OK)
	{
		int64_t		bad = 0,
					first = -1;

		for (int64_t i = 0; i < n - 1; i++)
			if (memcmp(&c[i], &g[i], sizeof(gc_linkage_node)) != 0)
			{
				if (first < 0)
					first = i;
				bad++;
			}
		CHECK(bad == 0, "%s: linkage: %lld of %lld nodes differ", what, (long long) bad,
			  (long long) n - 1);
		if (bad == 0)
		{
			check_condense(c, n, 2, what);
			check_condense(c, n, 2 + (int64_t) (tu_next(&rs) % (n < 40 ? n : 40)), what);
		}
		if (bad)
			fprintf(stderr, "  node %lld: cpu (%u, %u, %d, %d), gpu (%u, %u, %d, %d)\n",
					(long long) first, c[first].left, c[first].right, c[first].lsize,
					c[first].rsize, g[first].left, g[first].right, g[first].lsize,
					g[first].rsize);
	}
	free(c);
	free(g);
}

/*
 * One case: X (n x d) at min_samples ms, alpha, metric: the GPU's phases
 * = the CPU's bit for bit (and = the brute force's when brute), and the
 * GPU's single-linkage tree of the edges = the union-find's; what names
 * it in a failure.
 */
static void
check_phases(const float *X, int64_t n, int d, int64_t ms, double alpha,
			 gc_metric metric, bool brute, const char *what)
{
	gc_ctx		ctx = {.n_threads = 0, .cancel_flags = {NULL, NULL}};
	gc_status	st;
	const int64_t m = n - 1;
	const bool	cosine = metric == GC_METRIC_COSINE;
	float	   *U = NULL;
	const float *R = X;
	double	   *cc = malloc(sizeof(double) * (size_t) n),
			   *cg = malloc(sizeof(double) * (size_t) n);
	gc_mst_edge *ec = malloc(sizeof(gc_mst_edge) * (size_t) m),
			   *eg = malloc(sizeof(gc_mst_edge) * (size_t) m);
	int64_t		bad,
				first;
	gc_code		rc;
	char		name[200];

	cases++;
	snprintf(name, sizeof(name), "%s n=%lld d=%d min_samples=%lld alpha=%g%s", what,
			 (long long) n, d, (long long) ms, alpha, cosine ? " cosine" : "");
	if (cosine)
	{
		U = malloc(sizeof(float) * (size_t) n * d);
		gc_unit_rows(&ctx, X, n, d, U);
		R = U;
	}
	memset(cg, 0xff, sizeof(double) * (size_t) n);
	memset(eg, 0xff, sizeof(gc_mst_edge) * (size_t) m);
	rc = gc_hdbscan_mst_gpu(&ctx, R, n, d, ms, alpha, metric, cg, eg, &st);
	CHECK(rc == GC_OK, "%s: gpu: %s", name, st.message);
	if (rc == GC_OK)
	{
		if (gc_hdbscan_core_cpu(&ctx, R, n, d, ms, metric, cc, &st) != GC_OK ||
			gc_hdbscan_mst_edges_cpu(&ctx, R, n, d, alpha, metric, cc, ec, &st) != GC_OK)
			CHECK(false, "%s: cpu: %s", name, st.message);
		else
		{
			bad = core_diff(cc, cg, n, &first);
			CHECK(bad == 0, "%s: %lld core distances differ (row %lld: cpu %.17g, gpu %.17g)",
				  name, (long long) bad, (long long) first,
				  first >= 0 ? cc[first] : 0.0, first >= 0 ? cg[first] : 0.0);
			bad = edge_diff(eg, ec, m, &first);
			CHECK(bad == 0, "%s: %lld edges differ from the CPU's", name, (long long) bad);
			if (bad)
				report_edge(name, "cpu", eg, ec, first);
			else if (n >= 2)
				check_linkage(eg, n, name);
		}
		if (brute)
		{
			ref_core(R, n, d, ms, cosine, cc);
			bad = core_diff(cc, cg, n, &first);
			CHECK(bad == 0, "%s: %lld core distances differ from the brute force's (row %lld)",
				  name, (long long) bad, (long long) first);
			ref_mst(R, n, d, alpha, cosine, cc, ec);
			bad = edge_diff(eg, ec, m, &first);
			CHECK(bad == 0, "%s: %lld edges differ from the brute force's", name, (long long) bad);
			if (bad)
				report_edge(name, "brute", eg, ec, first);
		}
	}
	free(U);
	free(cc);
	free(cg);
	free(ec);
	free(eg);
}

/*
 * min_samples: 1 (no search), the k smallest in registers (2 to 16, 17 to
 * 32: hdbscan_core.cu), in heaps (above 32), n (-1).
 */
static const int64_t ms_choices[] = {1, 2, 5, 15, 16, 20, 32, 33, 64, -1};

static int64_t
pick_ms(int64_t n, bool small_ms)
{
	int			c = (int) (tu_next(&rs) % (small_ms ? 7 : 10));
	int64_t		ms = ms_choices[c] < 0 ? n : ms_choices[c];

	return ms < n ? ms : n;
}

static double
pick_alpha(void)
{
	static const double a[] = {1.0, 1.0, 0.5, 2.0};

	return a[tu_next(&rs) % 4];
}

/*
 * Small shapes: every path, against the brute force too (quick: every
 * other shape, one case each; 2: a few).
 */
static void
test_small(void)
{
	static const int64_t ns[] = {2, 3, 5, 31, 32, 33, 63, 64, 65, 100, 129, 700, 2000};
	static const int dims[] = {1, 2, 3, 5, 8, 9, 16, 17, 64};
	size_t		nn = quick >= 2 ? 6 : sizeof(ns) / sizeof(ns[0]);
	size_t		nd = quick >= 2 ? 3 : sizeof(dims) / sizeof(dims[0]);
	double		t0 = now_s();

	for (size_t i = 0; i < nn; i++)
		for (size_t j = 0; j < nd; j++)
		{
			const int64_t n = ns[i];
			const int	d = dims[j];
			const data_kind kind = (data_kind) ((i + j) % 4);
			float	   *X;
			bool		cosine,
						brute;

			if (quick == 1 && (i + j) % 2 != 0)
				continue;
			X = tu_make_data(&rs, n, d, kind, 1 + (int) (tu_next(&rs) % 12));
			cosine = tu_next(&rs) % 5 == 0;
			brute = n * n * d <= (quick ? 4000000 : 300000000);
			if (cosine)
				no_zero_rows(X, n, d);
			check_phases(X, n, d, pick_ms(n, false), pick_alpha(),
						 cosine ? GC_METRIC_COSINE : GC_METRIC_EUCLIDEAN, brute,
						 data_name[kind]);
			if (!quick)
				check_phases(X, n, d, pick_ms(n, false), 1.0, GC_METRIC_EUCLIDEAN, false,
							 data_name[kind]);
			free(X);
		}
	printf("  small shapes: %.1f s\n", now_s() - t0);
}

/* Large shapes: deep trees, several batches and launches, against the CPU. */
static void
test_large(void)
{
	static const struct
	{
		int64_t		n;
		int			d;
	}			big[] = {
		{300000, 2}, {200000, 3}, {60000, 8}, {30000, 16}, {8000, 64}, {150000, 1},
	};
	double		t0 = now_s();

	for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++)
	{
		const int64_t n = quick ? big[i].n / 20 : big[i].n;
		const int	d = big[i].d;

		for (int kind = DATA_UNIFORM; kind <= DATA_BLOBS; kind++)
		{
			float	   *X = tu_make_data(&rs, n, d, (data_kind) kind, 1 + (int) (tu_next(&rs) % 12));

			check_phases(X, n, d, kind == DATA_UNIFORM ? 5 : 15, pick_alpha(),
						 GC_METRIC_EUCLIDEAN, false, data_name[kind]);
			free(X);
		}
		{
			float	   *X = make_blobs_noise(&rs, n, d, 50);

			check_phases(X, n, d, pick_ms(n, true), 1.0, GC_METRIC_EUCLIDEAN, false,
						 "blobs+noise");
			free(X);
		}
	}
	/* ties: few distinct rows, integer lattices */
	for (int d = 1; d <= 8; d *= 2)
	{
		const int64_t n = quick ? 3000 : 20000;
		float	   *X = tu_make_data(&rs, n, d, DATA_DUPLICATES, 1 + (int) (tu_next(&rs) % 12));

		check_phases(X, n, d, pick_ms(n, true), pick_alpha(), GC_METRIC_EUCLIDEAN, false,
					 "duplicates");
		free(X);
		X = tu_make_data(&rs, n, d, DATA_GRID, 1);
		check_phases(X, n, d, pick_ms(n, true), pick_alpha(), GC_METRIC_EUCLIDEAN, false,
					 "grid");
		free(X);
	}
	/* cosine */
	{
		const int64_t n = quick ? 5000 : 100000;
		float	   *X = make_blobs_noise(&rs, n, 3, 20);

		check_phases(X, n, 3, 15, 1.0, GC_METRIC_COSINE, false, "blobs+noise");
		free(X);
		X = make_blobs_noise(&rs, n / 5, 16, 20);
		check_phases(X, n / 5, 16, 5, 2.0, GC_METRIC_COSINE, false, "blobs+noise");
		free(X);
	}
	/* min_samples whose heaps take several batches of queries */
	{
		const int64_t n = quick ? 3000 : 12000;
		float	   *X = tu_make_data(&rs, n, 2, DATA_BLOBS, 5);

		check_phases(X, n, 2, quick ? 2900 : 8000, 1.0, GC_METRIC_EUCLIDEAN, false, "batches");
		free(X);
	}
	printf("  large shapes: %.1f s\n", now_s() - t0);
}

/* 2M rows of 2 features: the search in several launches. */
static void
test_huge(void)
{
	const int64_t n = 2000000;
	float	   *X = make_blobs_noise(&rs, n, 2, 50);
	gc_hdbscan_gpu_phases ph;
	double		t0 = now_s();

	check_phases(X, n, 2, 15, 1.0, GC_METRIC_EUCLIDEAN, false, "blobs+noise");
	gc_hdbscan_gpu_last_phases(&ph);
	printf("  2M x 2: %.1f s (GPU: %.1f ms: upload %.1f, index %.1f, core %.1f, "
		   "mst %.1f in %d rounds, sort %.1f, download %.1f)\n",
		   now_s() - t0, ph.ms_total, ph.ms_upload, ph.ms_index, ph.ms_core, ph.ms_mst,
		   ph.rounds, ph.ms_sort, ph.ms_download);
	free(X);
}

/* ------------------------------------------------------------------ */
/* whole calls                                                         */
/* ------------------------------------------------------------------ */

static void
check_call(const float *X, int64_t n, int d, const gc_hdbscan_params *p,
		   const char *what)
{
	gc_ctx		ctx = {.n_threads = 0, .cancel_flags = {NULL, NULL}};
	gc_status	st;
	gc_hdbscan_result rc_,
				rg;
	int64_t		bl = 0,
				bp = 0,
				bo = 0;
	gc_code		c1,
				c2;
	char		name[240];

	cases++;
	snprintf(name, sizeof(name), "%s n=%lld d=%d mcs=%lld ms=%lld %s eps=%g single=%d alpha=%g %s",
			 what, (long long) n, d, (long long) p->min_cluster_size, (long long) p->min_samples,
			 gc_hdbscan_method_name(p->method), p->epsilon, p->allow_single_cluster, p->alpha,
			 p->metric == GC_METRIC_COSINE ? "cosine" : "euclidean");
	memset(&rc_, 0, sizeof(rc_));
	memset(&rg, 0, sizeof(rg));
	rc_.labels = malloc(sizeof(int32_t) * (size_t) n);
	rc_.probability = malloc(sizeof(double) * (size_t) n);
	rc_.outlier = malloc(sizeof(double) * (size_t) n);
	rg.labels = malloc(sizeof(int32_t) * (size_t) n);
	rg.probability = malloc(sizeof(double) * (size_t) n);
	rg.outlier = malloc(sizeof(double) * (size_t) n);
	c1 = gc_hdbscan_cpu(&ctx, X, n, d, p, &rc_, &st);
	CHECK(c1 == GC_OK, "%s: cpu: %s", name, st.message);
	for (int tree = 0; tree < 2 && c1 == GC_OK; tree++)
	{
		gc_hdbscan_tree tc = {0},
					tg = {0};

		/* with the tree: the GPU's single-linkage tree, the CPU's pass */
		rc_.tree = tree ? &tc : NULL;
		rg.tree = tree ? &tg : NULL;
		if (tree && gc_hdbscan_cpu(&ctx, X, n, d, p, &rc_, &st) != GC_OK)
			break;
		c2 = gc_hdbscan_on_gpu(&ctx, X, n, d, p, &rg, &st);
		CHECK(c2 == GC_OK, "%s: gpu%s: %s", name, tree ? " (tree)" : "", st.message);
		if (c2 == GC_OK)
		{
			bl = bits_diff(rc_.labels, rg.labels, n, sizeof(int32_t));
			bp = bits_diff(rc_.probability, rg.probability, n, sizeof(double));
			bo = bits_diff(rc_.outlier, rg.outlier, n, sizeof(double));
			CHECK(rc_.clusters == rg.clusters && bl == 0 && bp == 0 && bo == 0,
				  "%s%s: clusters %d / %d; %lld labels, %lld probabilities, %lld outlier scores differ",
				  name, tree ? " (tree)" : "", rc_.clusters, rg.clusters, (long long) bl,
				  (long long) bp, (long long) bo);
			if (tree)
				CHECK(tc.nrows == tg.nrows && tc.nclusters == tg.nclusters &&
					  bits_diff(tc.rows, tg.rows, tc.nrows, sizeof(gc_hdbscan_tree_row)) == 0 &&
					  bits_diff(tc.selected, tg.selected, tc.nclusters, sizeof(int32_t)) == 0,
					  "%s: the condensed trees differ", name);
		}
		gc_hdbscan_tree_free(&tc);
		gc_hdbscan_tree_free(&tg);
	}
	rc_.tree = rg.tree = NULL;
	free(rc_.labels);
	free(rc_.probability);
	free(rc_.outlier);
	free(rg.labels);
	free(rg.probability);
	free(rg.outlier);

	/* the spanning tree alone */
	{
		double	   *c_core = malloc(sizeof(double) * (size_t) n),
				   *g_core = malloc(sizeof(double) * (size_t) n);
		gc_mst_edge *ce = malloc(sizeof(gc_mst_edge) * (size_t) (n > 1 ? n - 1 : 1)),
				   *ge = malloc(sizeof(gc_mst_edge) * (size_t) (n > 1 ? n - 1 : 1));
		int64_t		first;

		c1 = gc_hdbscan_mst_cpu(&ctx, X, n, d, p, c_core, ce, &st);
		CHECK(c1 == GC_OK, "%s: mst cpu: %s", name, st.message);
		c2 = gc_hdbscan_mst_on_gpu(&ctx, X, n, d, p, g_core, ge, &st);
		CHECK(c2 == GC_OK, "%s: mst gpu: %s", name, st.message);
		if (c1 == GC_OK && c2 == GC_OK)
		{
			CHECK(core_diff(c_core, g_core, n, &first) == 0, "%s: mst: core distances differ", name);
			CHECK(edge_diff(ge, ce, n - 1, &first) == 0, "%s: mst: edges differ", name);
		}
		free(c_core);
		free(g_core);
		free(ce);
		free(ge);
	}
}

static void
test_calls(void)
{
	const int64_t n = quick ? 3000 : 50000;
	gc_hdbscan_params p = {.min_cluster_size = 15, .min_samples = 15, .epsilon = 0.0,
	.method = GC_HDBSCAN_EOM, .allow_single_cluster = false, .alpha = 1.0,
	.metric = GC_METRIC_EUCLIDEAN};
	float	   *X = make_blobs_noise(&rs, n, 2, 20);
	double		t0 = now_s();

	check_call(X, n, 2, &p, "blobs+noise");
	p.method = GC_HDBSCAN_LEAF;
	check_call(X, n, 2, &p, "blobs+noise");
	p.method = GC_HDBSCAN_EOM;
	p.epsilon = 0.5;
	p.min_samples = 5;
	check_call(X, n, 2, &p, "blobs+noise");
	p.epsilon = 0.0;
	p.allow_single_cluster = true;
	p.alpha = 0.5;
	check_call(X, n, 2, &p, "blobs+noise");
	p.allow_single_cluster = false;
	p.alpha = 2.0;
	p.metric = GC_METRIC_COSINE;
	check_call(X, n, 2, &p, "blobs+noise");
	free(X);

	p.alpha = 1.0;
	p.metric = GC_METRIC_EUCLIDEAN;
	p.min_cluster_size = 5;
	p.min_samples = 3;
	X = tu_make_data(&rs, n / 5, 3, DATA_GRID, 1);
	check_call(X, n / 5, 3, &p, "grid");
	free(X);
	X = tu_make_data(&rs, n / 5, 4, DATA_DUPLICATES, 7);
	check_call(X, n / 5, 4, &p, "duplicates");
	free(X);
	X = tu_make_data(&rs, n / 2, 16, DATA_BLOBS, 9);
	p.method = GC_HDBSCAN_LEAF;
	check_call(X, n / 2, 16, &p, "blobs");
	free(X);
	printf("  whole calls: %.1f s\n", now_s() - t0);
}

/* ------------------------------------------------------------------ */
/* memory, cancel, progress, errors                                    */
/* ------------------------------------------------------------------ */

/* The device's free memory after every stream's work (bytes). */
static size_t
free_memory(void)
{
	size_t		fr = 0,
				tot = 0;

	cudaDeviceSynchronize();
	cudaMemGetInfo(&fr, &tot);
	return fr;
}

static void
test_memory(void)
{
	static const struct
	{
		int64_t		n;
		int			d;
		int64_t		ms;
	}			mc[] = {
		{1000000, 2, 15}, {200000, 16, 5}, {100000, 3, 1}, {20000, 2, 2000},
	};
	gc_ctx		ctx = {.n_threads = 0, .cancel_flags = {NULL, NULL}};
	gc_status	st;

	CHECK(gc_hdbscan_gpu_mem_bytes(10000000, 2, 15) <= ((size_t) 4 << 30),
		  "10M x 2 needs %.2f GB by gc_hdbscan_gpu_mem_bytes",
		  gc_hdbscan_gpu_mem_bytes(10000000, 2, 15) / 1e9);
	for (size_t i = 0; i < sizeof(mc) / sizeof(mc[0]); i++)
	{
		const int64_t n = quick ? mc[i].n / 50 : mc[i].n;
		const int	d = mc[i].d;
		const int64_t ms = mc[i].ms < n ? mc[i].ms : n;
		float	   *X = make_blobs_noise(&rs, n, d, 30);
		double	   *core = malloc(sizeof(double) * (size_t) n);
		gc_mst_edge *e = malloc(sizeof(gc_mst_edge) * (size_t) (n - 1));
		size_t		before = free_memory(),
					after,
					peak,
					bound = gc_hdbscan_gpu_mem_bytes(n, d, ms);
		gc_code		rc;

		pool_peak(true);
		rc = gc_hdbscan_mst_gpu(&ctx, X, n, d, ms, 1.0, GC_METRIC_EUCLIDEAN, core, e, &st);
		CHECK(rc == GC_OK, "memory n=%lld d=%d: %s", (long long) n, d, st.message);
		peak = pool_peak(false);
		after = free_memory();
		printf("  memory n=%lld d=%d min_samples=%lld: peak %.1f MB, bound %.1f MB, free %+.1f MB\n",
			   (long long) n, d, (long long) ms, peak / 1e6, bound / 1e6,
			   ((double) after - (double) before) / 1e6);
		CHECK(peak <= bound, "n=%lld d=%d: peak %zu above the bound %zu", (long long) n, d,
			  peak, bound);
		CHECK(after + ((size_t) 8 << 20) >= before, "n=%lld d=%d: %.1f MB not given back",
			  (long long) n, d, ((double) before - (double) after) / 1e6);
		free(X);
		free(core);
		free(e);
	}
}

typedef struct progress_log
{
	int			phases[64];
	int			count;
	int64_t		last_round;
	int64_t		cancel_at;		/* raise cancel_flag at this round (0: never) */
	bool		order_ok;
} progress_log;

static void
on_progress(void *arg, const gc_progress *p)
{
	progress_log *lg = arg;

	if (lg->count > 0 && (int) p->phase < lg->phases[lg->count - 1])
		lg->order_ok = false;
	if (p->phase == GC_PHASE_ITERATE)
	{
		if (p->iteration != lg->last_round + 1)
			lg->order_ok = false;
		lg->last_round = p->iteration;
		if (lg->cancel_at > 0 && p->iteration >= lg->cancel_at)
			cancel_flag = 1;
	}
	if (lg->count < 64)
		lg->phases[lg->count++] = (int) p->phase;
}

static void
test_cancel_progress(void)
{
	const int64_t n = quick ? 20000 : 400000;
	float	   *X = make_blobs_noise(&rs, n, 2, 30);
	double	   *core = malloc(sizeof(double) * (size_t) n);
	gc_mst_edge *e = malloc(sizeof(gc_mst_edge) * (size_t) (n - 1));
	progress_log lg;
	gc_ctx		ctx;
	gc_status	st;
	size_t		before;
	gc_code		rc;
	tu_poll		tp;

	/* the phases in order, rounds 1, 2, ... */
	memset(&lg, 0, sizeof(lg));
	lg.order_ok = true;
	memset(&ctx, 0, sizeof(ctx));
	ctx.progress = on_progress;
	ctx.progress_arg = &lg;
	rc = gc_hdbscan_mst_gpu(&ctx, X, n, 2, 15, 1.0, GC_METRIC_EUCLIDEAN, core, e, &st);
	CHECK(rc == GC_OK, "progress run: %s", st.message);
	CHECK(lg.order_ok && lg.count >= 4 && lg.phases[0] == GC_PHASE_UPLOAD &&
		  lg.phases[1] == GC_PHASE_INDEX && lg.phases[2] == GC_PHASE_INIT &&
		  lg.phases[3] == GC_PHASE_ITERATE, "progress: %d reports, in order %d", lg.count,
		  lg.order_ok);

	/* a flag raised before the call, then during its second round */
	before = free_memory();
	cancel_flag = 1;
	memset(&ctx, 0, sizeof(ctx));
	ctx.cancel_flags[0] = &cancel_flag;
	rc = gc_hdbscan_mst_gpu(&ctx, X, n, 2, 15, 1.0, GC_METRIC_EUCLIDEAN, core, e, &st);
	CHECK(rc == GC_ECANCEL, "cancel before: %d %s", rc, st.message);
	cancel_flag = 0;
	memset(&lg, 0, sizeof(lg));
	lg.order_ok = true;
	lg.cancel_at = 2;
	ctx.progress = on_progress;
	ctx.progress_arg = &lg;
	rc = gc_hdbscan_mst_gpu(&ctx, X, n, 2, 15, 1.0, GC_METRIC_EUCLIDEAN, core, e, &st);
	CHECK(rc == GC_ECANCEL && lg.last_round == 2, "cancel in round 2: %d (%s), last round %lld",
		  rc, st.message, (long long) lg.last_round);
	cancel_flag = 0;
	CHECK(free_memory() + ((size_t) 8 << 20) >= before, "cancelled calls kept memory");

	/* the poll: how long the calling thread goes between two */
	memset(&ctx, 0, sizeof(ctx));
	memset(&tp, 0, sizeof(tp));
	tp.caller = pthread_self();
	tp.last = now_s();
	tp.stop_after = 1e30;
	ctx.poll = tu_poll_fn;
	ctx.poll_arg = &tp;
	rc = gc_hdbscan_mst_gpu(&ctx, X, n, 2, 15, 1.0, GC_METRIC_EUCLIDEAN, core, e, &st);
	CHECK(rc == GC_OK, "poll run: %s", st.message);
	printf("  polls: %ld, the longest gap %.1f ms (n %lld)\n", tp.caller_polls,
		   tp.max_gap * 1e3, (long long) n);
	CHECK(tp.max_gap < 0.5, "%.0f ms between two polls", tp.max_gap * 1e3);
	free(X);
	free(core);
	free(e);
}

/*
 * Cancel while a kernel runs: a second thread raises cancel_flag delay_s
 * after the call's progress reports phase (for GC_PHASE_ITERATE, round
 * round); the time from the raise to the call's return is what the stop
 * flag (check.cuh) bounds.
 */
#define CANCEL_LATENCY_S 0.25

typedef struct raiser
{
	gc_phase	phase;			/* armed at this phase's report */
	int64_t		round;			/* of this round, for GC_PHASE_ITERATE */
	double		delay_s;		/* raise this long after */
	double		armed_at;		/* now_s() when armed, 0 before (atomic) */
	int			quit;			/* stop waiting: the call is over (atomic) */
	int			last_phase;		/* the last phase reported (atomic) */
	int64_t		last_round;		/* and round (atomic) */
	int			raised_phase;	/* what was reported last at the raise */
	int64_t		raised_round;
	double		raised_at;		/* now_s() at the raise, 0 if none */
} raiser;

static void
on_arm(void *arg, const gc_progress *p)
{
	raiser	   *r = arg;
	double		t = now_s(),
				a;

	__atomic_store_n(&r->last_phase, (int) p->phase, __ATOMIC_RELAXED);
	__atomic_store_n(&r->last_round, p->iteration, __ATOMIC_RELAXED);
	__atomic_load(&r->armed_at, &a, __ATOMIC_ACQUIRE);
	if (a == 0 && p->phase == r->phase &&
		(p->phase != GC_PHASE_ITERATE || p->iteration >= r->round))
		__atomic_store(&r->armed_at, &t, __ATOMIC_RELEASE);
}

static void *
raiser_main(void *arg)
{
	raiser	   *r = arg;
	struct timespec nap = {0, 100 * 1000};

	while (!__atomic_load_n(&r->quit, __ATOMIC_ACQUIRE))
	{
		double		t = now_s(),
					a;

		__atomic_load(&r->armed_at, &a, __ATOMIC_ACQUIRE);
		if (a > 0 && t >= a + r->delay_s)
		{
			r->raised_phase = __atomic_load_n(&r->last_phase, __ATOMIC_RELAXED);
			r->raised_round = __atomic_load_n(&r->last_round, __ATOMIC_RELAXED);
			r->raised_at = now_s();
			cancel_flag = 1;
			break;
		}
		nanosleep(&nap, NULL);
	}
	return NULL;
}

/*
 * The device's memory pool keeping bytes of 0x7f bytes for the next
 * allocations (gc_cuda_keep_memory), so what a cancelled kernel leaves
 * unwritten is not the zeros of fresh pages but huge values, which a
 * kernel after it must not take for positions; unpoison_pool gives the
 * pool back to releasing at each sync, empty.
 */
static void
poison_pool(size_t bytes)
{
	void	   *p = NULL;

	gc_cuda_keep_memory(bytes);
	if (cudaMallocAsync(&p, bytes, 0) == cudaSuccess)
	{
		cudaMemsetAsync(p, 0x7f, bytes, 0);
		cudaFreeAsync(p, 0);
	}
	cudaDeviceSynchronize();
	cudaGetLastError();
}

static void
unpoison_pool(void)
{
	gc_cuda_keep_memory(0);
	gc_cuda_trim_memory();
}

/*
 * gc_hdbscan_on_gpu on X cancelled from a second thread delay_s after
 * progress reports phase (round round): GC_ECANCEL within
 * CANCEL_LATENCY_S of the raise (timed but not held to it under quick,
 * compute-sanitizer's runs), no CUDA error left, the memory back.  The
 * pool is poisoned first (poison_pool).
 */
static void
check_cancel_running(const float *X, int64_t n, int d, gc_phase phase,
					 int64_t round, double delay_s)
{
	gc_hdbscan_params p = {.min_cluster_size = 15, .min_samples = 15, .epsilon = 0.0,
	.method = GC_HDBSCAN_EOM, .allow_single_cluster = false, .alpha = 1.0,
	.metric = GC_METRIC_EUCLIDEAN};
	gc_hdbscan_result res;
	raiser		r;
	pthread_t	th;
	gc_ctx		ctx;
	gc_status	st;
	size_t		before;
	double		back,
				latency;
	cudaError_t e;
	gc_code		rc;

	cases++;
	poison_pool((size_t) 1 << 30);
	before = free_memory();
	memset(&res, 0, sizeof(res));
	res.labels = malloc(sizeof(int32_t) * (size_t) n);
	res.probability = malloc(sizeof(double) * (size_t) n);
	res.outlier = malloc(sizeof(double) * (size_t) n);
	memset(&r, 0, sizeof(r));
	r.phase = phase;
	r.round = round;
	r.delay_s = delay_s;
	memset(&ctx, 0, sizeof(ctx));
	ctx.cancel_flags[0] = &cancel_flag;
	ctx.progress = on_arm;
	ctx.progress_arg = &r;
	cancel_flag = 0;
	pthread_create(&th, NULL, raiser_main, &r);
	rc = gc_hdbscan_on_gpu(&ctx, X, n, d, &p, &res, &st);
	back = now_s();
	__atomic_store_n(&r.quit, 1, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
	cancel_flag = 0;
	latency = r.raised_at > 0 ? back - r.raised_at : -1.0;
	printf("  cancel n=%lld d=%d: raised in %s (round %lld), returned %.1f ms later\n",
		   (long long) n, d, gc_phase_name((gc_phase) r.raised_phase),
		   (long long) r.raised_round, latency * 1e3);
	CHECK(rc == GC_ECANCEL, "cancel n=%lld d=%d: %d (%s)%s", (long long) n, d, rc,
		  rc == GC_OK ? "done" : st.message, r.raised_at > 0 ? "" : ", the call ended first");
	CHECK(r.raised_at > 0 && (quick || latency < CANCEL_LATENCY_S),
		  "cancel n=%lld d=%d: %.0f ms from the raise to the return", (long long) n, d,
		  latency * 1e3);
	e = cudaPeekAtLastError();
	if (e == cudaSuccess)
		e = cudaDeviceSynchronize();
	CHECK(e == cudaSuccess, "cancel n=%lld d=%d: CUDA error left: %s", (long long) n, d,
		  cudaGetErrorString(e));
	CHECK(free_memory() + ((size_t) 8 << 20) >= before, "cancel n=%lld d=%d: memory kept",
		  (long long) n, d);
	unpoison_pool();
	free(res.labels);
	free(res.probability);
	free(res.outlier);
}

static void
test_cancel_running(void)
{
	const int64_t n16 = quick ? 30000 : 300000,
				n2 = quick ? 100000 : 1000000;
	float	   *X = make_blobs_noise(&rs, n16, 16, 50);
	double		t0 = now_s();

	/* the core distances' walks, then the first round's */
	check_cancel_running(X, n16, 16, GC_PHASE_INIT, 0, 0.1);
	check_cancel_running(X, n16, 16, GC_PHASE_ITERATE, 1, 0.1);
	free(X);
	/* a round of a 2-d call */
	X = make_blobs_noise(&rs, n2, 2, 50);
	check_cancel_running(X, n2, 2, GC_PHASE_ITERATE, 2, 0.002);
	free(X);
	/* the next call as the CPU's */
	X = make_blobs_noise(&rs, 20000, 2, 20);
	{
		gc_hdbscan_params p = {.min_cluster_size = 15, .min_samples = 15, .epsilon = 0.0,
		.method = GC_HDBSCAN_EOM, .allow_single_cluster = false, .alpha = 1.0,
		.metric = GC_METRIC_EUCLIDEAN};

		check_call(X, 20000, 2, &p, "after cancel");
	}
	free(X);
	printf("  cancel while running: %.1f s\n", now_s() - t0);
}

static void
test_errors(void)
{
	float		X[6] = {0, 0, 1, 1, 5, 5};
	double		core[3];
	gc_mst_edge e[2];
	gc_status	st;

	CHECK(gc_hdbscan_mst_gpu(NULL, X, 1, 2, 1, 1.0, GC_METRIC_EUCLIDEAN, core, e, &st) == GC_EINVAL,
		  "n 1 accepted");
	CHECK(gc_hdbscan_mst_gpu(NULL, X, 3, 2, 4, 1.0, GC_METRIC_EUCLIDEAN, core, e, &st) == GC_EINVAL,
		  "min_samples > n accepted");
	CHECK(gc_hdbscan_mst_gpu(NULL, X, 3, 2, 0, 1.0, GC_METRIC_EUCLIDEAN, core, e, &st) == GC_EINVAL,
		  "min_samples 0 accepted");
	CHECK(gc_hdbscan_mst_gpu(NULL, X, 3, 2, 1, 0.0, GC_METRIC_EUCLIDEAN, core, e, &st) == GC_EINVAL,
		  "alpha 0 accepted");
	CHECK(gc_hdbscan_mst_gpu(NULL, X, (int64_t) GC_HDBSCAN_GPU_MAX_N + 1, 2, 1, 1.0,
							 GC_METRIC_EUCLIDEAN, core, e, &st) == GC_EDEVICE, "n too large accepted");
	/* n 2 and 3: the smallest trees, core NULL allowed */
	CHECK(gc_hdbscan_mst_gpu(NULL, X, 3, 2, 2, 1.0, GC_METRIC_EUCLIDEAN, NULL, e, &st) == GC_OK,
		  "n 3: %s", st.message);
	CHECK(e[0].a == 0 && e[0].b == 1 && e[0].w == sqrt(2.0) && e[1].a == 1 && e[1].b == 2 &&
		  e[1].w == sqrt(32.0), "n 3: edges (%lld %lld %g) (%lld %lld %g)",
		  (long long) e[0].a, (long long) e[0].b, e[0].w, (long long) e[1].a,
		  (long long) e[1].b, e[1].w);
}

/* The same call twice: the same bits. */
static void
test_repeat(void)
{
	const int64_t n = quick ? 5000 : 100000;
	float	   *X = tu_make_data(&rs, n, 2, DATA_GRID, 1);
	double	   *c1 = malloc(sizeof(double) * (size_t) n),
			   *c2 = malloc(sizeof(double) * (size_t) n);
	gc_mst_edge *e1 = malloc(sizeof(gc_mst_edge) * (size_t) (n - 1)),
			   *e2 = malloc(sizeof(gc_mst_edge) * (size_t) (n - 1));
	gc_status	st;
	int64_t		first;

	CHECK(gc_hdbscan_mst_gpu(NULL, X, n, 2, 4, 1.0, GC_METRIC_EUCLIDEAN, c1, e1, &st) == GC_OK &&
		  gc_hdbscan_mst_gpu(NULL, X, n, 2, 4, 1.0, GC_METRIC_EUCLIDEAN, c2, e2, &st) == GC_OK,
		  "repeat: %s", st.message);
	CHECK(core_diff(c1, c2, n, &first) == 0 && edge_diff(e1, e2, n - 1, &first) == 0,
		  "repeat: two calls differ");
	free(X);
	free(c1);
	free(c2);
	free(e1);
	free(e2);
}

/* ------------------------------------------------------------------ */
/* the single-linkage tree of any spanning tree                        */
/* ------------------------------------------------------------------ */

static int
edge_order(const void *x, const void *y)
{
	const gc_mst_edge *e = x,
			   *f = y;

	if (e->w != f->w)
		return e->w < f->w ? -1 : 1;
	if (e->a != f->a)
		return e->a < f->a ? -1 : 1;
	return (e->b > f->b) - (e->b < f->b);
}

/*
 * A random spanning tree of n rows of shape kind, its edges in (w, a, b)
 * order: 0 random attachments, 1 a path, 2 a caterpillar (a path with
 * legs), 3 a star, 4 a broom (a path ending in a star); ranks 0 random,
 * 1 rising along the build, 2 falling, 3 few distinct weights (ties
 * settled by the pairs).  The rows are shuffled.
 */
static gc_mst_edge *
random_tree(int64_t n, int kind, int ranks)
{
	gc_mst_edge *e = malloc(sizeof(gc_mst_edge) * (size_t) n);
	int64_t    *name = malloc(sizeof(int64_t) * (size_t) n);

	for (int64_t i = 0; i < n; i++)
		name[i] = i;
	for (int64_t i = n - 1; i > 0; i--)
	{
		int64_t		j = (int64_t) (tu_next(&rs) % (uint64_t) (i + 1)),
					t = name[i];

		name[i] = name[j];
		name[j] = t;
	}
	for (int64_t i = 1; i < n; i++)
	{
		int64_t		j;
		double		w;

		switch (kind)
		{
			case 0:
				j = (int64_t) (tu_next(&rs) % (uint64_t) i);
				break;
			case 1:
				j = i - 1;
				break;
			case 2:
				j = i < 2 || tu_next(&rs) % 2 ? i - 1 : i - 2;
				break;
			case 3:
				j = 0;
				break;
			default:
				j = i < n / 2 ? i - 1 : n / 2 - 1;
				break;
		}
		w = ranks == 1 ? (double) i : ranks == 2 ? (double) (n - i) :
			ranks == 3 ? (double) (tu_next(&rs) % 4) : tu_uniform(&rs);
		e[i - 1].a = name[i] < name[j] ? name[i] : name[j];
		e[i - 1].b = name[i] < name[j] ? name[j] : name[i];
		e[i - 1].w = w;
	}
	qsort(e, (size_t) (n - 1), sizeof(gc_mst_edge), edge_order);
	free(name);
	return e;
}

static void
test_linkage_trees(void)
{
	static const int64_t big[] = {200000, 2000000};
	const int	count = quick >= 2 ? 30 : quick ? 300 : 2000;
	char		what[100];

	for (int it = 0; it < count; it++)
	{
		const int64_t n = 2 + (int64_t) (tu_next(&rs) % (it < count / 2 ? 40 : 5000));
		const int	kind = (int) (tu_next(&rs) % 5),
					ranks = (int) (tu_next(&rs) % 4);
		gc_mst_edge *e = random_tree(n, kind, ranks);

		snprintf(what, sizeof(what), "tree n=%lld shape %d ranks %d", (long long) n, kind, ranks);
		check_linkage(e, n, what);
		free(e);
		cases++;
	}
	for (int i = 0; i < (quick ? 0 : 2); i++)
		for (int kind = 0; kind < 5; kind++)
		{
			const int	ranks = kind == 1 ? 1 + i : 0;
			gc_mst_edge *e = random_tree(big[i], kind, ranks);

			snprintf(what, sizeof(what), "tree n=%lld shape %d ranks %d",
					 (long long) big[i], kind, ranks);
			check_linkage(e, big[i], what);
			free(e);
			cases++;
		}
}

/*
 * Whole calls on fresh small inputs with random options: every shape of
 * data (ties, duplicates), both methods, epsilon, allow_single_cluster,
 * min_samples up to n.
 */
static void
test_calls_random(void)
{
	const int	count = quick >= 2 ? 10 : quick ? 60 : 300;
	static const double eps[] = {0.0, 0.0, 0.05, 0.5, 3.0};
	double		t0 = now_s();

	for (int it = 0; it < count; it++)
	{
		const int64_t n = 2 + (int64_t) (tu_next(&rs) % (it % 3 == 0 ? 40 : 3000));
		const int	d = 1 + (int) (tu_next(&rs) % 4);
		float	   *X = tu_make_data(&rs, n, d, (data_kind) (tu_next(&rs) % 4),
									 1 + (int) (tu_next(&rs) % 12));
		gc_hdbscan_params p = {
			.min_cluster_size = 2 + (int64_t) (tu_next(&rs) % 20),
			.min_samples = 1 + (int64_t) (tu_next(&rs) % (uint64_t) (n < 20 ? n : 20)),
			.epsilon = eps[tu_next(&rs) % 5],
			.method = tu_next(&rs) % 2 ? GC_HDBSCAN_LEAF : GC_HDBSCAN_EOM,
			.allow_single_cluster = tu_next(&rs) % 2,
			.alpha = 1.0, .metric = GC_METRIC_EUCLIDEAN};

		check_call(X, n, d, &p, "random");
		free(X);
	}
	printf("  random whole calls: %.1f s\n", now_s() - t0);
}

/* gc_hdbscan_linkage_on_gpu = gc_hdbscan_linkage_cpu on data. */
static void
test_linkage_calls(void)
{
	const int64_t n = quick ? 20000 : 300000;
	uint64_t	r = rs;
	float	   *X = make_blobs_noise(&r, n, 2, 50);
	gc_hdbscan_params p = {15, 15, 0.0, GC_HDBSCAN_EOM, false, 1.0, GC_METRIC_EUCLIDEAN};
	gc_linkage_node *c = malloc(sizeof(gc_linkage_node) * (size_t) n),
			   *g = malloc(sizeof(gc_linkage_node) * (size_t) n);
	gc_status	st;

	CHECK(gc_hdbscan_linkage_cpu(NULL, X, n, 2, &p, c, &st) == GC_OK, "linkage cpu: %s",
		  st.message);
	CHECK(gc_hdbscan_linkage_on_gpu(NULL, X, n, 2, &p, g, &st) == GC_OK, "linkage gpu: %s",
		  st.message);
	CHECK(memcmp(c, g, sizeof(gc_linkage_node) * (size_t) (n - 1)) == 0,
		  "linkage on data: the GPU's nodes differ from the CPU's");
	free(X);
	free(c);
	free(g);
	cases++;
}

int
main(void)
{
	uint64_t	seed = tu_seed();
	const char *q = getenv("GPUCLUST_TEST_QUICK");
	gc_cuda_device_info info;
	double		t0 = now_s();

	quick = q ? atoi(q) : 0;
	rs = seed;
	gc_cuda_probe(0, &info);
	if (!info.usable)
	{
		printf("test_hdbscan_gpu: no usable GPU: %s\n", info.reason);
		return 1;
	}
	printf("test_hdbscan_gpu: seed %llu (GPUCLUST_TEST_SEED to repeat), %s, quick %d\n",
		   (unsigned long long) seed, info.name, quick);

	test_errors();
	test_kdtree_blocks();
	test_small();
	test_linkage_trees();
	test_calls_random();
	if (quick < 2)
	{
		test_linkage_calls();
		test_large();
		test_repeat();
		test_calls();
		test_memory();
		test_cancel_progress();
		test_cancel_running();
	}
	if (!quick)
		test_huge();
	printf("test_hdbscan_gpu: %d cases, %.1f s\n", cases, now_s() - t0);
	return test_summary("test_hdbscan_gpu");
}
