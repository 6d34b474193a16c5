/*
 * test_dbscan.c — the CPU DBSCAN against a brute-force O(n^2) reference that
 * implements the semantics literally, on fresh random data every run (the
 * seed is printed; replay with GPUCLUST_TEST_SEED), through both indexes and
 * with 1 and 2 threads.
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dbscan/dbscan_internal.h"
#include "gpuclust_core.h"
#include "common/gpu.h"
#include "testutil.h"

/* ---- reference ---- */

static int64_t
ref_find(int64_t *p, int64_t x)
{
	while (p[x] != x)
		x = p[x] = p[p[x]];
	return x;
}

static void
ref_dbscan(const float *X, int64_t n, int d, double eps, int64_t min_pts,
		   int32_t *labels, uint8_t *is_core)
{
	float		e2 = gc_eps2(eps);
	int64_t    *parent = malloc(sizeof(int64_t) * (n + 1));
	int64_t    *root = malloc(sizeof(int64_t) * (n + 1));
	int64_t    *num = malloc(sizeof(int64_t) * (n + 1));
	int32_t		next = 0;

	for (int64_t i = 0; i < n; i++)
	{
		int64_t		c = 0;

		for (int64_t k = 0; k < n; k++)
			c += gc_dist2(X + i * d, X + k * d, d) <= e2;
		is_core[i] = c >= min_pts;
		parent[i] = i;
		num[i] = -1;
	}
	for (int64_t i = 0; i < n; i++)
		for (int64_t k = i + 1; k < n; k++)
			if (is_core[i] && is_core[k] &&
				gc_dist2(X + i * d, X + k * d, d) <= e2)
			{
				int64_t		a = ref_find(parent, i),
							b = ref_find(parent, k);

				if (a != b)
					parent[a > b ? a : b] = a > b ? b : a;
			}
	for (int64_t i = 0; i < n; i++)
	{
		if (is_core[i])
			root[i] = ref_find(parent, i);
		else
		{
			int64_t		best = -1;
			float		bd = 0;

			for (int64_t k = 0; k < n; k++)
			{
				float		dd;

				if (!is_core[k])
					continue;
				dd = gc_dist2(X + i * d, X + k * d, d);
				if (dd <= e2 && (best < 0 || dd < bd))
				{
					best = k;
					bd = dd;
				}
			}
			root[i] = best < 0 ? -1 : ref_find(parent, best);
		}
	}
	for (int64_t i = 0; i < n; i++)
	{
		if (root[i] < 0)
			labels[i] = GC_NOISE;
		else
		{
			if (num[root[i]] < 0)
				num[root[i]] = next++;
			labels[i] = (int32_t) num[root[i]];
		}
	}
	free(parent);
	free(root);
	free(num);
}

/* ---- data ---- */

typedef enum
{
	SHAPE_UNIFORM,
	SHAPE_BLOBS,
	SHAPE_LATTICE,				/* heavy duplicates */
	SHAPE_MIXED_SCALE,			/* blobs plus a few far outliers */
	NSHAPES
} shape;

static const char *shape_name[] = {"uniform", "blobs", "lattice", "mixed"};

static double
tu_gauss(uint64_t *s)
{
	double		u = tu_uniform(s),
				v = tu_uniform(s);

	return sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v);
}

static void
make_points(float *X, int64_t n, int d, shape sh, uint64_t *rs)
{
	int			nc = 1 + (int) (tu_next(rs) % 6);
	double		centres[6][64];

	for (int c = 0; c < nc; c++)
		for (int k = 0; k < d; k++)
			centres[c][k] = tu_uniform(rs) * 10.0;
	for (int64_t i = 0; i < n; i++)
	{
		int			c = (int) (tu_next(rs) % nc);
		double		sd = 0.3 + 0.7 * (c % 3);

		for (int k = 0; k < d; k++)
		{
			double		v;

			switch (sh)
			{
				case SHAPE_UNIFORM:
					v = tu_uniform(rs);
					break;
				case SHAPE_BLOBS:
					v = centres[c][k] + sd * tu_gauss(rs);
					break;
				case SHAPE_LATTICE:
					v = floor(tu_uniform(rs) * 4.0) / 4.0;
					break;
				default:
					v = centres[c][k] + sd * tu_gauss(rs);
					if (i % 97 == 5)
						v *= 1e6;
					break;
			}
			X[i * d + k] = (float) v;
		}
	}
}

/* A random eps: a low quantile of distances between random pairs. */
static double
pick_eps(const float *X, int64_t n, int d, uint64_t *rs)
{
	float		s[256];
	int			m = 0;
	double		q[] = {0.002, 0.01, 0.03, 0.1};

	if (n < 2)
		return 0.5;
	for (; m < 256; m++)
	{
		int64_t		a = (int64_t) (tu_next(rs) % n),
					b = (int64_t) (tu_next(rs) % n);

		s[m] = sqrtf(gc_dist2(X + a * d, X + b * d, d));
	}
	for (int a = 1; a < m; a++)
		for (int b = a; b > 0 && s[b - 1] > s[b]; b--)
		{
			float		t = s[b];

			s[b] = s[b - 1];
			s[b - 1] = t;
		}
	{
		double		e = s[(int) (q[tu_next(rs) % 4] * m)];

		return e > 0 ? e : 0.25;
	}
}

/* ---- checks ---- */

static int	ncases;

/* Runs one case through the given index and thread count. */
static void
check_case(const char *what, const float *X, int64_t n, int d, double eps,
		   int64_t min_pts, const int32_t *rl, const uint8_t *rc,
		   gc_dbscan_index idx, int threads)
{
	gc_ctx		ctx = {.n_threads = threads, .cancel_flags = {NULL, NULL}};
	gc_dbscan_params p = {eps, min_pts, GC_METRIC_EUCLIDEAN, GC_DBSCAN_UNION_FIND};
	gc_status	st;
	int32_t    *l = malloc(sizeof(int32_t) * (n + 1));
	uint8_t    *c = malloc(n + 1);
	gc_code		code;
	int64_t		bad = -1;

	code = gc_dbscan_cpu_index(&ctx, X, n, d, &p, idx, NULL, l, c, &st);
	CHECK(code == GC_OK, "%s: code %d (%s)", what, code, st.message);
	if (code == GC_OK)
		for (int64_t i = 0; i < n && bad < 0; i++)
			if (l[i] != rl[i] || c[i] != rc[i])
				bad = i;
	CHECK(bad < 0, "%s index=%d threads=%d n=%lld d=%d eps=%.9g min_pts=%lld:"
		  " row %lld label %d core %d, reference %d core %d",
		  what, (int) idx, threads, (long long) n, d, eps, (long long) min_pts,
		  (long long) bad, bad >= 0 ? l[bad] : 0, bad >= 0 ? c[bad] : 0,
		  bad >= 0 ? rl[bad] : 0, bad >= 0 ? rc[bad] : 0);
	free(l);
	free(c);
}

static void
check_all(const char *what, const float *X, int64_t n, int d, double eps,
		  int64_t min_pts, uint64_t *rs)
{
	int32_t    *rl = malloc(sizeof(int32_t) * (n + 1));
	uint8_t    *rc = malloc(n + 1);
	int			t = 1 + (int) (tu_next(rs) % 2);

	ref_dbscan(X, n, d, eps, min_pts, rl, rc);
	check_case(what, X, n, d, eps, min_pts, rl, rc, GC_DBSCAN_INDEX_KDTREE, t);
	check_case(what, X, n, d, eps, min_pts, rl, rc, GC_DBSCAN_INDEX_KDTREE, 3 - t);
	/* the kd-tree's plain-C kernel, which AVX2 machines would never run */
	gc_dbscan_force_generic = true;
	check_case(what, X, n, d, eps, min_pts, rl, rc, GC_DBSCAN_INDEX_KDTREE, t);
	gc_dbscan_force_generic = false;
	/* the AVX2 kernel, which AVX-512 machines would never run */
	gc_dbscan_force_avx2 = true;
	check_case(what, X, n, d, eps, min_pts, rl, rc, GC_DBSCAN_INDEX_KDTREE, 3 - t);
	gc_dbscan_force_avx2 = false;
	if (d <= 3)
	{
		check_case(what, X, n, d, eps, min_pts, rl, rc, GC_DBSCAN_INDEX_GRID, t);
		check_case(what, X, n, d, eps, min_pts, rl, rc, GC_DBSCAN_INDEX_GRID, 3 - t);
	}
	check_case(what, X, n, d, eps, min_pts, rl, rc, GC_DBSCAN_INDEX_AUTO, 2);
	ncases++;
	free(rl);
	free(rc);
}

static void
test_random(uint64_t *rs)
{
	static const int dims[] = {1, 2, 3, 4, 5, 8, 16, 33, 64};
	static const int64_t small_n[] = {0, 1, 2, 3, 7};

	for (size_t di = 0; di < sizeof(dims) / sizeof(dims[0]); di++)
	{
		int			d = dims[di];
		int64_t		nmax = d <= 3 ? 3000 : d <= 16 ? 1500 : 700;

		for (int sh = 0; sh < NSHAPES; sh++)
			for (int rep = 0; rep < 3; rep++)
			{
				int64_t		n = rep == 0 ? small_n[tu_next(rs) % 5]
					: 50 + (int64_t) (tu_next(rs) % (uint64_t) nmax);
				float	   *X = malloc(sizeof(float) * (n * d + 1));
				char		what[64];
				int64_t		mp[4];
				double		eps;

				make_points(X, n, d, (shape) sh, rs);
				eps = pick_eps(X, n, d, rs);
				mp[0] = 1 + (int64_t) (tu_next(rs) % 12);
				mp[1] = rep == 1 ? 1 : 2;
				mp[2] = n / 3 + 1;
				mp[3] = n + 1;
				snprintf(what, sizeof(what), "%s", shape_name[sh]);
				check_all(what, X, n, d, eps, mp[0], rs);
				check_all(what, X, n, d, eps, mp[1 + tu_next(rs) % 3], rs);
				if (rep == 2)
				{
					/* one giant cluster; and (almost) all noise */
					snprintf(what, sizeof(what), "%s/huge-eps", shape_name[sh]);
					check_all(what, X, n, d, 1e7, mp[0], rs);
					snprintf(what, sizeof(what), "%s/tiny-eps", shape_name[sh]);
					check_all(what, X, n, d, 1e-9, mp[1], rs);
				}
				free(X);
			}
	}
}

/* Coordinates near 1e30 and near 0 with eps 1e-3: the grid cannot number
 * cells, so it must hand over to the kd-tree, and stay exact. */
static void
test_huge_range(uint64_t *rs)
{
	for (int d = 1; d <= 3; d++)
	{
		int64_t		n = 600;
		float	   *X = malloc(sizeof(float) * n * d);
		gc_ctx		ctx = {.n_threads = 2, .cancel_flags = {NULL, NULL}};
		gc_dbscan_params p = {1e-3, 3, GC_METRIC_EUCLIDEAN, GC_DBSCAN_UNION_FIND};
		gc_status	st;
		gc_dbscan_index used;
		int32_t    *l = malloc(sizeof(int32_t) * n);
		uint8_t    *c = malloc(n);

		for (int64_t i = 0; i < n; i++)
			for (int k = 0; k < d; k++)
			{
				double		v = tu_uniform(rs) * 0.01;

				if (i % 3 == 1)
					v = 1e30 + (double) (tu_next(rs) % 3) * 1e24;
				else if (i % 3 == 2)
					v = -3e29;
				X[i * d + k] = (float) v;
			}
		CHECK(gc_dbscan_cpu_index(&ctx, X, n, d, &p, GC_DBSCAN_INDEX_GRID,
								  &used, l, c, &st) == GC_OK, "%s", st.message);
		CHECK(used == GC_DBSCAN_INDEX_KDTREE, "huge range used index %d", used);
		check_all("huge-range", X, n, d, p.eps, p.min_pts, rs);
		free(X);
		free(l);
		free(c);
	}
}

/* eps so small that eps2 underflows to 0 in float: neighbours are pairs whose
 * squared differences underflow, farther apart than eps itself. */
static void
test_underflow(uint64_t *rs)
{
	for (int d = 1; d <= 4; d++)
	{
		int64_t		n = 800;
		float	   *X = malloc(sizeof(float) * n * d);

		for (int64_t i = 0; i < n; i++)
			for (int k = 0; k < d; k++)
				X[i * d + k] = (float) (tu_uniform(rs) * 4e-22);
		check_all("underflow", X, n, d, 1e-25, 2, rs);
		check_all("underflow", X, n, d, 1e-25, 1 + (int64_t) (tu_next(rs) % 5), rs);
		free(X);
	}
}

/*
 * Larger clustered data in higher dimension (the kd-tree's leaves are big
 * there, and the union and border passes take their batched and listed
 * paths): Gaussian blobs, eps a low quantile of the distances inside a blob,
 * min_pts on both sides of the border pass's list limit (64).
 */
static void
test_highd_blobs(uint64_t *rs)
{
	static const int dims[] = {8, 16, 32};
	static const int64_t mps[] = {4, 10, 40, 90};

	for (size_t di = 0; di < sizeof(dims) / sizeof(dims[0]); di++)
	{
		int			d = dims[di];
		int64_t		n = d == 8 ? 9000 : d == 16 ? 6000 : 3500;
		int			nc = 3 + (int) (tu_next(rs) % 8);
		double	   *cen = malloc(sizeof(double) * nc * d);
		int		   *lab = malloc(sizeof(int) * n);
		float	   *X = malloc(sizeof(float) * n * d);
		float		q[200];
		int			m = 0;

		for (int i = 0; i < nc * d; i++)
			cen[i] = tu_uniform(rs) * 30.0;
		for (int64_t i = 0; i < n; i++)
		{
			lab[i] = (int) (tu_next(rs) % nc);
			for (int k = 0; k < d; k++)
				X[i * d + k] = (float) (cen[lab[i] * d + k] + tu_gauss(rs));
		}
		while (m < 200)
		{
			int64_t		a = (int64_t) (tu_next(rs) % n),
						b = (int64_t) (tu_next(rs) % n);

			if (lab[a] == lab[b] && a != b)
				q[m++] = sqrtf(gc_dist2(X + a * d, X + b * d, d));
		}
		for (int a = 1; a < m; a++)
			for (int b = a; b > 0 && q[b - 1] > q[b]; b--)
			{
				float		t = q[b];

				q[b] = q[b - 1];
				q[b - 1] = t;
			}
		for (int r = 0; r < 2; r++)
		{
			double		eps = q[2 + (int) (tu_next(rs) % 10)];
			int64_t		mp = mps[tu_next(rs) % 4];

			check_all("highd-blobs", X, n, d, eps, mp, rs);
		}
		free(cen);
		free(lab);
		free(X);
	}
}

static void
test_errors(void)
{
	float		X[8] = {0, 0, 1, 1, 2, 2, 3, 3};
	int32_t		l[4];
	uint8_t		c[4];
	gc_ctx		ctx = {.n_threads = 1, .cancel_flags = {NULL, NULL}};
	gc_status	st;
	gc_dbscan_params ok = {1.5, 2, GC_METRIC_EUCLIDEAN, GC_DBSCAN_UNION_FIND};
	gc_dbscan_params bad[] = {{0.0, 2, 0, 0}, {-1.0, 2, 0, 0}, {NAN, 2, 0, 0}, {INFINITY, 2, 0, 0},
	{1.0, 0, 0, 0}, {1.0, -5, 0, 0}, {1.0, 2, GC_METRIC_INNER_PRODUCT, 0},
	{1.0, 2, 0, GC_DBSCAN_DCLUST}};

	CHECK(gc_dbscan_cpu(&ctx, X, -1, 2, &ok, l, c, &st) == GC_EINVAL, "n<0");
	CHECK(gc_dbscan_cpu(&ctx, X, 4, 0, &ok, l, c, &st) == GC_EINVAL, "d<1");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(gc_dbscan_cpu(&ctx, X, 4, 2, &bad[i], l, c, &st) == GC_EINVAL,
			  "bad params %zu", i);
	CHECK(gc_dbscan_cpu(&ctx, X, 0, 2, &ok, l, c, &st) == GC_OK, "n==0");
	CHECK(gc_dbscan_cpu(&ctx, NULL, 0, 2, &ok, NULL, NULL, &st) == GC_OK,
		  "n==0 with NULL arrays");
	CHECK(gc_dbscan_cpu(NULL, X, 4, 2, &ok, l, c, &st) == GC_OK, "NULL ctx");
	CHECK(l[0] == 0 && l[3] == 0 && c[0] == 1, "4 points in a line, eps 1.5");
}

static void
test_cancel(void)
{
	int64_t		n = 5000;
	float	   *X = malloc(sizeof(float) * n * 2);
	int32_t    *l = malloc(sizeof(int32_t) * n);
	uint8_t    *c = malloc(n);
	volatile sig_atomic_t flag = 1;
	gc_ctx		ctx = {.n_threads = 2, .cancel_flags = {NULL, &flag}};
	gc_dbscan_params p = {0.05, 4, GC_METRIC_EUCLIDEAN, GC_DBSCAN_UNION_FIND};
	gc_status	st;
	uint64_t	s = 42;

	for (int64_t i = 0; i < 2 * n; i++)
		X[i] = (float) tu_uniform(&s);
	for (int idx = 0; idx < 3; idx++)
	{
		st.code = GC_OK;
		CHECK(gc_dbscan_cpu_index(&ctx, X, n, 2, &p, (gc_dbscan_index) idx,
								  NULL, l, c, &st) == GC_ECANCEL &&
			  st.code == GC_ECANCEL, "cancel, index %d", idx);
	}
	free(X);
	free(l);
	free(c);
}

/*
 * gc_ctx.poll through a whole DBSCAN on each index: the calling thread
 * polls at most TU_POLL_GAP_S apart, from the start to the end of the call.
 * The gap is wall time, which another process taking the core only
 * lengthens: the shorter of two calls' longest gaps is the one checked.
 */
static void
test_poll(void)
{
	static const struct
	{
		int			d;
		int64_t		n;
		double		eps;
		gc_dbscan_index idx;
	}			cases[] = {
		{2, 1000000, 0.003, GC_DBSCAN_INDEX_GRID},
		{8, 100000, 0.25, GC_DBSCAN_INDEX_KDTREE},
	};

	for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++)
	{
		int			d = cases[ci].d;
		int64_t		n = cases[ci].n;
		float	   *X = malloc(sizeof(float) * n * d);
		int32_t    *l = malloc(sizeof(int32_t) * n);
		uint8_t    *c = malloc(n);
		gc_ctx		ctx = {.n_threads = 2, .cancel_flags = {NULL, NULL}};
		gc_dbscan_params p = {cases[ci].eps, 10, GC_METRIC_EUCLIDEAN, GC_DBSCAN_UNION_FIND};
		gc_status	st;
		uint64_t	s = 7;
		tu_poll		tp;
		double		t0,
					gap = INFINITY;
		gc_code		rc;

		for (int64_t i = 0; i < n * d; i++)
			X[i] = (float) tu_uniform(&s);
		for (int attempt = 0; attempt < 2 && gap >= TU_POLL_GAP_S; attempt++)
		{
			tu_poll_start(&tp, &ctx, 1e9);
			t0 = now_s();
			rc = gc_dbscan_cpu_index(&ctx, X, n, d, &p, cases[ci].idx, NULL, l, c, &st);
			tu_poll_end(&tp);
			CHECK(rc == GC_OK, "poll, d %d: %s", d, st.message);
			gap = fmin(gap, tp.max_gap);
		}
		CHECK(gap < TU_POLL_GAP_S, "poll, d %d: the calling thread's polls %.3f s apart (call %.3f s, %ld polls)",
			  d, gap, now_s() - t0, tp.caller_polls);
		free(X);
		free(l);
		free(c);
	}
}

/*
 * Many kd-tree leaves, so that the union pass runs its batched, non-full
 * leaf searches, with leaves whose core points are split over components.
 */
static void
test_many_leaves(uint64_t *rs)
{
	static const int dims[] = {4, 16};

	for (size_t di = 0; di < sizeof(dims) / sizeof(dims[0]); di++)
		for (int rep = 0; rep < 2; rep++)
		{
			int			d = dims[di];
			int64_t		n = d == 4 ? 12000 : 7000;
			float	   *X = malloc(sizeof(float) * n * d);
			double		eps;

			make_points(X, n, d, rep == 0 ? SHAPE_BLOBS : SHAPE_MIXED_SCALE, rs);
			eps = pick_eps(X, n, d, rs);
			check_all("many-leaves", X, n, d, eps, 3 + (int64_t) (tu_next(rs) % 10), rs);
			free(X);
		}
}

/*
 * Cosine DBSCAN against its literal definition: neighbours when
 * 1 - a.b / (|a| |b|) <= eps in double, eps put in the middle of a gap
 * between the pairs' distances (so that float rounding cannot decide), the
 * nearest core point by metric.h's definition (the unit rows' gc_dist2).
 * Directions in blobs, rows at any length; zero rows are an error.
 */
static void
test_cosine(uint64_t *rs)
{
	static const int dims[] = {2, 3, 8, 32, 64};

	for (size_t di = 0; di < sizeof(dims) / sizeof(dims[0]); di++)
		for (int rep = 0; rep < 3; rep++)
		{
			const int	d = dims[di];
			const int64_t n = 100 + (int64_t) (tu_next(rs) % 400);
			float	   *X = malloc(sizeof(float) * n * d),
					   *U = malloc(sizeof(float) * n * d);
			double	   *cd = malloc(sizeof(double) * n * n);
			double	   *sorted = malloc(sizeof(double) * n * (n - 1) / 2);
			int32_t    *rl = malloc(sizeof(int32_t) * n),
					   *l = malloc(sizeof(int32_t) * n);
			uint8_t    *rc = malloc(n),
					   *c = malloc(n);
			int64_t		m = 0,
						min_pts = 2 + (int64_t) (tu_next(rs) % 6);
			gc_dbscan_params p = {0, min_pts, GC_METRIC_COSINE, GC_DBSCAN_UNION_FIND};
			gc_status	st;
			double		eps = 0;
			int64_t    *parent = malloc(sizeof(int64_t) * n);

			make_points(X, n, d, SHAPE_BLOBS, rs);
			for (int64_t i = 0; i < n; i++)
			{
				double		len = 0.1 + 100.0 * tu_uniform(rs);

				for (int k = 0; k < d; k++)
					X[i * d + k] = (float) ((X[i * d + k] - 5.0) * len);
			}
			CHECK(gc_first_zero_row(X, n, d) < 0, "cosine: a zero row");
			gc_unit_rows(NULL, X, n, d, U);
			for (int64_t i = 0; i < n; i++)
				for (int64_t k = 0; k < n; k++)
				{
					double		ab = 0, aa = 0, bb = 0;

					for (int j = 0; j < d; j++)
					{
						ab += (double) X[i * d + j] * X[k * d + j];
						aa += (double) X[i * d + j] * X[i * d + j];
						bb += (double) X[k * d + j] * X[k * d + j];
					}
					cd[i * n + k] = 1.0 - ab / (sqrt(aa) * sqrt(bb));
					if (k > i)
						sorted[m++] = cd[i * n + k];
				}
			/* eps: the middle of the widest gap near a low quantile */
			for (int64_t a = 1; a < m; a++)
				for (int64_t b = a; b > 0 && sorted[b - 1] > sorted[b]; b--)
				{
					double		t = sorted[b];

					sorted[b] = sorted[b - 1];
					sorted[b - 1] = t;
				}
			{
				/*
				 * The first gap from a random low quantile on that is wider
				 * than 8x the float32 error of a unit-row distance (about
				 * d ulps of 1): no pair's rounded distance crosses eps.
				 */
				const double gap = 1e-6 * d;
				int64_t		t = m / 50 + (int64_t) (tu_next(rs) % (m / 20 + 1));

				while (t + 1 < m && sorted[t + 1] - sorted[t] <= gap)
					t++;
				CHECK(t + 1 < m, "cosine d=%d: no gap of %g", d, gap);
				eps = t + 1 < m ? (sorted[t] + sorted[t + 1]) / 2 : sorted[m - 1] + 1;
			}
			p.eps = eps;

			/* the reference, literally */
			for (int64_t i = 0; i < n; i++)
			{
				int64_t		cnt = 0;

				for (int64_t k = 0; k < n; k++)
					cnt += cd[i * n + k] <= eps;
				rc[i] = cnt >= min_pts;
				parent[i] = i;
			}
			for (int64_t i = 0; i < n; i++)
				for (int64_t k = i + 1; k < n; k++)
					if (rc[i] && rc[k] && cd[i * n + k] <= eps)
					{
						int64_t		a = ref_find(parent, i),
									b = ref_find(parent, k);

						if (a != b)
							parent[a > b ? a : b] = a > b ? b : a;
					}
			{
				int64_t    *num = malloc(sizeof(int64_t) * n);
				int32_t		next = 0;

				for (int64_t i = 0; i < n; i++)
					num[i] = -1;
				for (int64_t i = 0; i < n; i++)
				{
					int64_t		root = -1;

					if (rc[i])
						root = ref_find(parent, i);
					else
					{
						int64_t		best = -1;
						float		bd = 0;

						for (int64_t k = 0; k < n; k++)
						{
							float		dd = gc_dist2(U + i * d, U + k * d, d);

							if (rc[k] && cd[i * n + k] <= eps && (best < 0 || dd < bd))
							{
								best = k;
								bd = dd;
							}
						}
						root = best < 0 ? -1 : ref_find(parent, best);
					}
					if (root < 0)
						rl[i] = GC_NOISE;
					else
					{
						if (num[root] < 0)
							num[root] = next++;
						rl[i] = (int32_t) num[root];
					}
				}
				free(num);
			}
			for (int idx = 0; idx < 3; idx++)
			{
				gc_dbscan_index ix = idx == 0 ? GC_DBSCAN_INDEX_AUTO :
					idx == 1 ? GC_DBSCAN_INDEX_KDTREE : GC_DBSCAN_INDEX_GRID;
				gc_ctx		ctx = {.n_threads = 1 + idx % 2, .cancel_flags = {NULL, NULL}};
				int64_t		bad = -1;

				if (ix == GC_DBSCAN_INDEX_GRID && d > 3)
					continue;
				CHECK(gc_dbscan_cpu_index(&ctx, X, n, d, &p, ix, NULL, l, c, &st) == GC_OK,
					  "cosine: %s", st.message);
				for (int64_t i = 0; i < n && bad < 0; i++)
					if (l[i] != rl[i] || c[i] != rc[i])
						bad = i;
				CHECK(bad < 0, "cosine index=%d n=%lld d=%d eps=%.9g min_pts=%lld: row %lld"
					  " label %d core %d, reference %d core %d", idx, (long long) n, d, eps,
					  (long long) min_pts, (long long) bad, bad >= 0 ? l[bad] : 0,
					  bad >= 0 ? c[bad] : 0, bad >= 0 ? rl[bad] : 0, bad >= 0 ? rc[bad] : 0);
			}
			ncases++;
			free(X);
			free(U);
			free(cd);
			free(sorted);
			free(rl);
			free(l);
			free(rc);
			free(c);
			free(parent);
		}

	/* a zero row: an error naming it */
	{
		float		X[6] = {1, 0, 0, 0, 0, 1};
		int32_t		l[3];
		uint8_t		c[3];
		gc_dbscan_params p = {0.5, 1, GC_METRIC_COSINE, GC_DBSCAN_UNION_FIND};
		gc_status	st;

		CHECK(gc_dbscan_cpu(NULL, X, 3, 2, &p, l, c, &st) == GC_EINVAL &&
			  strstr(st.message, "row 2") != NULL, "cosine zero row: %s", st.message);
	}
}

/* ---- where each algorithm runs (dispatch.c), with a GPU made up (testutil.h) ---- */

static void
test_algorithm_device(void)
{
	gc_gpu		gpu = tu_fake_gpu();
	gc_dbscan_algorithm a;
	gc_device	dev;
	gc_status	st;
	size_t		need;

	/* names */
	CHECK(gc_parse_dbscan_algorithm("union_find", &a) && a == GC_DBSCAN_UNION_FIND, "union_find");
	CHECK(gc_parse_dbscan_algorithm("DClust", &a) && a == GC_DBSCAN_DCLUST, "DClust");
	CHECK(!gc_parse_dbscan_algorithm("union-find", &a) && !gc_parse_dbscan_algorithm("", &a) &&
		  !gc_parse_dbscan_algorithm(NULL, &a), "bad names");
	CHECK(strcmp(gc_dbscan_algorithm_name(GC_DBSCAN_UNION_FIND), "union_find") == 0 &&
		  strcmp(gc_dbscan_algorithm_name(GC_DBSCAN_DCLUST), "dclust") == 0, "names");

	/* the request: union-find as asked; dclust the GPU, never the CPU */
	for (int r = GC_DEVICE_AUTO; r <= GC_DEVICE_GPU; r++)
	{
		CHECK(gc_dbscan_device_request((gc_device) r, GC_DBSCAN_UNION_FIND, &dev, &st) == GC_OK &&
			  dev == (gc_device) r, "union-find asks for %d", r);
		st.code = GC_OK;
		st.message[0] = '\0';
		if (r == GC_DEVICE_CPU)
			CHECK(gc_dbscan_device_request((gc_device) r, GC_DBSCAN_DCLUST, &dev, &st) == GC_EINVAL &&
				  strcmp(st.message, "DBSCAN algorithm dclust runs only on the GPU") == 0,
				  "dclust on the CPU: %s", st.message);
		else
			CHECK(gc_dbscan_device_request((gc_device) r, GC_DBSCAN_DCLUST, &dev, &st) == GC_OK &&
				  dev == GC_DEVICE_GPU, "dclust asks for the GPU under %d", r);
	}

	/* no usable GPU */
	tu_fake.usable = false;
	tu_fake.probes = 0;
	CHECK(gc_choose_device_dbscan(GC_DEVICE_AUTO, GC_DBSCAN_UNION_FIND, 100, 2, &gpu, &dev, &st) == GC_OK &&
		  dev == GC_DEVICE_CPU && tu_fake.probes == 0, "union-find, auto, small: the CPU, GPU not probed");
	CHECK(gc_choose_device_dbscan(GC_DEVICE_AUTO, GC_DBSCAN_UNION_FIND, 1000000, 2, &gpu, &dev, &st) == GC_OK &&
		  dev == GC_DEVICE_CPU, "union-find, auto, large: the CPU");
	tu_fake.probes = 0;
	CHECK(gc_choose_device_dbscan(GC_DEVICE_CPU, GC_DBSCAN_DCLUST, 100, 2, &gpu, &dev, &st) == GC_EINVAL &&
		  dev == GC_DEVICE_CPU && tu_fake.probes == 0 && strstr(st.message, "only on the GPU") != NULL,
		  "dclust, cpu: refused before any probe: %s", st.message);
	CHECK(gc_choose_device_dbscan(GC_DEVICE_AUTO, GC_DBSCAN_DCLUST, 100, 16, &gpu, &dev, &st) == GC_EDEVICE &&
		  strcmp(st.message, "no usable GPU: made up") == 0 && tu_fake.probes == 1,
		  "dclust, auto: the GPU's reason: %s", st.message);
	CHECK(gc_choose_device_dbscan(GC_DEVICE_GPU, GC_DBSCAN_DCLUST, 0, 0, &gpu, &dev, &st) == GC_EDEVICE &&
		  strcmp(st.message, "no usable GPU: made up") == 0, "dclust, gpu, no rows: %s", st.message);
	/* gc_choose_device is union-find's */
	CHECK(gc_choose_device(GC_DEVICE_AUTO, GC_ALGO_DBSCAN, 100, 16, &gpu, &dev, &st) == GC_OK &&
		  dev == GC_DEVICE_CPU, "gc_choose_device, auto");

	/* a usable GPU: dclust goes there whatever the size; union-find by size */
	tu_fake.usable = true;
	CHECK(gc_choose_device_dbscan(GC_DEVICE_AUTO, GC_DBSCAN_DCLUST, 10, 64, &gpu, &dev, &st) == GC_OK &&
		  dev == GC_DEVICE_GPU, "dclust, auto, 10 rows in 64-d: the GPU");
	CHECK(gc_choose_device_dbscan(GC_DEVICE_AUTO, GC_DBSCAN_UNION_FIND, 10, 64, &gpu, &dev, &st) == GC_OK &&
		  dev == GC_DEVICE_CPU, "union-find, auto, 10 rows in 64-d: the CPU");
	CHECK(gc_choose_device_dbscan(GC_DEVICE_CPU, GC_DBSCAN_DCLUST, 10, 2, &gpu, &dev, &st) == GC_EINVAL,
		  "dclust, cpu, with a GPU: refused");

	/*
	 * union-find under 'auto': the measured crossovers (dispatch.c), with
	 * CUDA running in the process and without
	 */
	{
		static const struct
		{
			bool		started;
			int64_t		n;
			int			d;
			gc_device	want;
		}			cases[] = {
			{true, 9999, 2, GC_DEVICE_CPU}, {true, 10000, 2, GC_DEVICE_GPU},
			{true, 10000, 3, GC_DEVICE_GPU}, {true, 19999, 4, GC_DEVICE_CPU},
			{true, 20000, 4, GC_DEVICE_GPU}, {true, 4999, 5, GC_DEVICE_CPU},
			{true, 5000, 5, GC_DEVICE_GPU}, {true, 5000, 16, GC_DEVICE_GPU},
			{true, 4999, 64, GC_DEVICE_CPU}, {true, 5000, 64, GC_DEVICE_GPU},
			{true, 10000000, 65, GC_DEVICE_CPU},
			{false, 3999999, 2, GC_DEVICE_CPU}, {false, 4000000, 2, GC_DEVICE_GPU},
			{false, 1000000, 3, GC_DEVICE_GPU}, {false, 1000000, 4, GC_DEVICE_CPU},
			{false, 4000000, 4, GC_DEVICE_GPU}, {false, 999999, 8, GC_DEVICE_CPU},
			{false, 1000000, 5, GC_DEVICE_GPU}, {false, 499999, 16, GC_DEVICE_CPU},
			{false, 500000, 9, GC_DEVICE_GPU}, {false, 199999, 32, GC_DEVICE_CPU},
			{false, 200000, 17, GC_DEVICE_GPU}, {false, 99999, 64, GC_DEVICE_CPU},
			{false, 100000, 33, GC_DEVICE_GPU},
		};

		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		{
			tu_fake.started = cases[i].started;
			CHECK(gc_choose_device_dbscan(GC_DEVICE_AUTO, GC_DBSCAN_UNION_FIND, cases[i].n,
										  cases[i].d, &gpu, &dev, &st) == GC_OK &&
				  dev == cases[i].want, "union-find, auto, %lld rows in %d-d, CUDA %s: %s",
				  (long long) cases[i].n, cases[i].d, cases[i].started ? "running" : "not started",
				  dev == GC_DEVICE_GPU ? "GPU" : "CPU");
		}
		tu_fake.started = true;
	}
	need = gc_dbscan_gpu_mem_bytes(100000, 8);
	if (need > 1)
	{
		/* too little GPU memory: an error under 'auto' too (no CPU to fall back on) */
		gpu.mem_limit = need - 1;
		CHECK(gc_choose_device_dbscan(GC_DEVICE_AUTO, GC_DBSCAN_DCLUST, 100000, 8, &gpu, &dev, &st) == GC_ENOMEM,
			  "dclust, auto, too little GPU memory: %s", st.message);
		CHECK(gc_choose_device_dbscan(GC_DEVICE_AUTO, GC_DBSCAN_UNION_FIND, 100000, 8, &gpu, &dev, &st) == GC_OK &&
			  dev == GC_DEVICE_CPU, "union-find, auto, too little GPU memory: the CPU");
		gpu.mem_limit = 0;
	}

	/* the CPU DBSCAN refuses dclust with the same message */
	{
		float		X[2] = {0, 1};
		int32_t		l[2];
		uint8_t		c[2];
		gc_dbscan_params p = {1.0, 1, GC_METRIC_EUCLIDEAN, GC_DBSCAN_DCLUST};

		CHECK(gc_dbscan_cpu(NULL, X, 2, 1, &p, l, c, &st) == GC_EINVAL &&
			  strcmp(st.message, "DBSCAN algorithm dclust runs only on the GPU") == 0,
			  "gc_dbscan_cpu, dclust: %s", st.message);
		p.algorithm = (gc_dbscan_algorithm) 7;
		CHECK(gc_dbscan_cpu(NULL, X, 2, 1, &p, l, c, &st) == GC_EINVAL &&
			  strstr(st.message, "unknown DBSCAN algorithm") != NULL, "algorithm 7: %s", st.message);
	}
}

int
main(void)
{
	uint64_t	seed = tu_seed();
	uint64_t	rs = seed;

	printf("test_dbscan: seed %llu (GPUCLUST_TEST_SEED to replay)\n",
		   (unsigned long long) seed);
	test_errors();
	test_algorithm_device();
	test_cancel();
	test_poll();
	test_huge_range(&rs);
	test_underflow(&rs);
	test_random(&rs);
	test_cosine(&rs);
	test_highd_blobs(&rs);
	test_many_leaves(&rs);
	printf("test_dbscan: %d random cases\n", ncases);
	return test_summary("test_dbscan");
}
