/*
 * test_tools.c — the tools for choosing parameters and reading clusters
 * (kdistance.c, silhouette.c, cluster_summary.c, cluster_scores.c) against
 * brute-force references on fresh random data (GPUCLUST_TEST_SEED repeats
 * a run).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>

#include "gpuclust_core.h"
#include "testutil.h"

static int
cmp_f(const void *a, const void *b)
{
	float		x = *(const float *) a,
				y = *(const float *) b;

	return x < y ? -1 : x > y;
}

/* k-th smallest gc_dist2 by sorting all n distances */
static float
brute_kdist2(const float *X, int64_t n, int d, int64_t i, int64_t k, float *buf)
{
	for (int64_t j = 0; j < n; j++)
		buf[j] = gc_dist2(X + i * d, X + j * d, d);
	qsort(buf, (size_t) n, sizeof(float), cmp_f);
	return buf[k - 1];
}

static void
test_kdistance(uint64_t *rs)
{
	static const int dims[] = {1, 2, 3, 5, 16};

	for (int di = 0; di < 5; di++)
		for (int kind = 0; kind < 4; kind++)
		{
			int			d = dims[di];
			int64_t		n = 300 + (int64_t) (tu_next(rs) % 900);
			float	   *X = tu_make_data(rs, n, d, (data_kind) kind, 1 + (int) (tu_next(rs) % 6));
			float	   *got = malloc(sizeof(float) * n),
					   *buf = malloc(sizeof(float) * n);
			int64_t		ks[4] = {1, 2 + (int64_t) (tu_next(rs) % 10), n / 3, n};

			for (int ki = 0; ki < 4; ki++)
			{
				gc_ctx		ctx = {.n_threads = 1 + (int) (tu_next(rs) % 3), .cancel_flags = {NULL, NULL}};
				gc_status	st;
				int64_t		bad = 0;

				CHECK(gc_kdistance_cpu(&ctx, X, n, d, ks[ki], got, &st) == GC_OK,
					  "%s", st.message);
				for (int64_t i = 0; i < n; i++)
				{
					float		want = brute_kdist2(X, n, d, i, ks[ki], buf);

					if (memcmp(&want, &got[i], sizeof(float)) != 0)
						bad++;
				}
				CHECK(bad == 0, "kdistance %s d=%d n=%lld k=%lld: %lld rows differ",
					  data_name[kind], d, (long long) n, (long long) ks[ki], (long long) bad);
				if (ks[ki] == 1)
				{
					bool		zero = true;

					for (int64_t i = 0; i < n; i++)
						zero &= got[i] == 0.0f;
					CHECK(zero, "k = 1 is the row itself");
				}
			}
			free(X);
			free(got);
			free(buf);
		}
}

/* the core-point property: core at (eps, min_pts = k) iff kdist2 <= eps2 */
static void
test_kdistance_core(uint64_t *rs)
{
	int64_t		n = 2000;
	int			d = 2;
	float	   *X = tu_make_data(rs, n, d, DATA_BLOBS, 5);
	float	   *kd = malloc(sizeof(float) * n);
	int32_t    *l = malloc(sizeof(int32_t) * n);
	uint8_t    *core = malloc(n);
	gc_status	st;
	gc_ctx		ctx = {.n_threads = 2, .cancel_flags = {NULL, NULL}};
	int64_t		k = 7,
				bad = 0;
	double		eps;
	gc_dbscan_params p;

	CHECK(gc_kdistance_cpu(&ctx, X, n, d, k, kd, &st) == GC_OK, "%s", st.message);
	/* eps = one of the k-distances, as gpu_kdistance reports it */
	eps = sqrt((double) kd[n / 2]);
	p.eps = eps;
	p.min_pts = k;
	p.metric = GC_METRIC_EUCLIDEAN;
	p.algorithm = GC_DBSCAN_UNION_FIND;
	CHECK(gc_dbscan_cpu(&ctx, X, n, d, &p, l, core, &st) == GC_OK, "%s", st.message);
	for (int64_t i = 0; i < n; i++)
		if ((kd[i] <= gc_eps2(eps)) != (core[i] != 0))
			bad++;
	CHECK(bad == 0, "core iff kdist2 <= eps2: %lld rows differ", (long long) bad);
	CHECK(core[n / 2], "the row whose k-distance is eps is core");
	free(X);
	free(kd);
	free(l);
	free(core);
}

/*
 * numpy's pairwise float64 sum (np.add.reduce) of a[0..n-1], as
 * numpy/core/src/umath/loops_utils.h.src writes it.
 */
static double
np_pairwise_sum(const double *a, int64_t n)
{
	if (n < 8)
	{
		double		res = 0.0;

		for (int64_t i = 0; i < n; i++)
			res += a[i];
		return res;
	}
	if (n <= 128)
	{
		double		r[8],
					res;
		int64_t		i;

		for (int u = 0; u < 8; u++)
			r[u] = a[u];
		for (i = 8; i < n - (n % 8); i += 8)
			for (int u = 0; u < 8; u++)
				r[u] += a[i + u];
		res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
		for (; i < n; i++)
			res += a[i];
		return res;
	}
	else
	{
		int64_t		n2 = n / 2;

		n2 -= n2 % 8;
		return np_pairwise_sum(a, n2) + np_pairwise_sum(a + n2, n - n2);
	}
}

static bool
in_list(const int64_t *list, int64_t m, int64_t v)
{
	for (int64_t t = 0; t < m; t++)
		if (list[t] == v)
			return true;
	return false;
}

/*
 * kneed's KneeLocator(x = range(n), y, S = 1, curve = 'convex',
 * direction = 'increasing', interp_method = 'interp1d', online = False)
 * .knee, step by step as kneed/knee_locator.py does it, arrays and all
 * (interp1d at the points themselves gives y back); -1 for None.
 */
static int64_t
kneed_reference(const double *y, int64_t n)
{
	double	   *xn,
			   *yn,
			   *yd,
			   *dx,
			   *tmx,
				ymin,
				ymax,
				ynmax,
				threshold = 0.0;
	int64_t    *mx,
			   *mn,
				nmx = 0,
				nmn = 0,
				maxima_threshold_index = 0,
				threshold_index = 0,
				knee = -1;

	if (n < 1)
		return -1;
	xn = malloc(sizeof(double) * n);
	yn = malloc(sizeof(double) * n);
	yd = malloc(sizeof(double) * n);
	dx = malloc(sizeof(double) * n);
	tmx = malloc(sizeof(double) * n);
	mx = malloc(sizeof(int64_t) * n);
	mn = malloc(sizeof(int64_t) * n);
	/* Step 2: normalize (x_normalized, y_normalized); 0/0 is NaN */
	ymin = ymax = y[0];
	for (int64_t i = 0; i < n; i++)
	{
		ymin = y[i] < ymin ? y[i] : ymin;
		ymax = y[i] > ymax ? y[i] : ymax;
	}
	for (int64_t i = 0; i < n; i++)
	{
		xn[i] = (double) i / (double) (n - 1);
		yn[i] = (y[i] - ymin) / (ymax - ymin);
	}
	/* Step 3: transform_y (convex, increasing): flip(max - y); difference */
	ynmax = yn[0];
	for (int64_t i = 0; i < n; i++)
		if (isnan(yn[i]) || yn[i] > ynmax)
			ynmax = isnan(ynmax) ? ynmax : yn[i];
	for (int64_t i = 0; i < n; i++)
		yd[i] = (ynmax - yn[n - 1 - i]) - xn[i];
	/* Step 4: argrelextrema with greater_equal / less_equal, mode 'clip' */
	for (int64_t i = 0; i < n; i++)
	{
		double		lo = yd[i > 0 ? i - 1 : 0],
					hi = yd[i < n - 1 ? i + 1 : n - 1];

		if (yd[i] >= lo && yd[i] >= hi)
			mx[nmx++] = i;
		if (yd[i] <= lo && yd[i] <= hi)
			mn[nmn++] = i;
	}
	/* Step 5: Tmx = y_difference_maxima - S * |mean(diff(x_normalized))| */
	for (int64_t i = 0; i + 1 < n; i++)
		dx[i] = xn[i + 1] - xn[i];
	for (int64_t t = 0; t < nmx; t++)
		tmx[t] = yd[mx[t]] - 1.0 * fabs(np_pairwise_sum(dx, n - 1) / (double) (n - 1));
	/* Step 6: find_knee */
	if (nmx > 0)
		for (int64_t i = 0; i < n; i++)
		{
			if (i < mx[0])
				continue;
			if (i == n - 1)
				break;
			if (in_list(mx, nmx, i))
			{
				threshold = tmx[maxima_threshold_index];
				threshold_index = i;
				maxima_threshold_index++;
			}
			if (in_list(mn, nmn, i))
				threshold = 0.0;
			if (yd[i + 1] < threshold)
			{
				knee = (n - 1) - threshold_index;	/* x[-(threshold_index + 1)] */
				break;
			}
		}
	free(xn);
	free(yn);
	free(yd);
	free(dx);
	free(tmx);
	free(mx);
	free(mn);
	return knee;
}

/*
 * The knee: the maximum of Kneedle's difference curve.  Fixed cases, and
 * against kneed's own scan (kneed_reference) on convex curves, whose
 * difference curve is concave and so has one maximum, which kneed's
 * thresholded scan finds too: y = i^p, exp(i / s), the quantile curves of
 * the exponential and Pareto distributions (what a k-distance curve looks
 * like without noise), hinges from row 2 + n/10 to about 4n/5, for n
 * from 16 to 5,000.  (kneed finds no knee in a hinge at the second row,
 * nor in most curves of 3 rows or fewer, where this gives one.)  On noisy curves the two differ
 * (tools.h says how), so those are not compared.
 */
static void
test_knee(uint64_t *rs)
{
	double		y[101];
	static const double kneed_convex[] = {1, 2, 3, 4, 5, 10, 15, 20, 40, 100};
	int			cases = 0,
				bad = 0;

	/* kneed's own test: DataGenerator.convex_increasing() has its knee at 7 */
	CHECK(gc_knee_index(kneed_convex, 10) == 7, "kneed convex_increasing %lld",
		  (long long) gc_knee_index(kneed_convex, 10));
	/* a hinge: flat then steep; the knee is the hinge */
	for (int i = 0; i <= 100; i++)
		y[i] = i <= 80 ? i * 0.01 : 0.8 + (i - 80) * 1.0;
	CHECK(gc_knee_index(y, 101) == 80, "hinge knee %lld", (long long) gc_knee_index(y, 101));
	for (int i = 0; i <= 100; i++)
		y[i] = 3.0;
	CHECK(gc_knee_index(y, 101) == 0, "flat");
	CHECK(gc_knee_index(y, 2) == 0, "two points");
	/* a concave curve lies above its chord: 0 */
	for (int i = 0; i <= 100; i++)
		y[i] = sqrt((double) i);
	CHECK(gc_knee_index(y, 101) == 0, "concave");

	for (int c = 0; c < 400; c++)
	{
		int64_t		n = 16 + (int64_t) (tu_next(rs) % (c < 300 ? 300 : 5000));
		double	   *v = malloc(sizeof(double) * (size_t) n);
		double		p = 1.5 + 5.0 * tu_uniform(rs);
		int64_t		h = 2 + n / 10 + (int64_t) (tu_next(rs) % (uint64_t) (n * 7 / 10));
		int64_t		ours,
					theirs;

		for (int64_t i = 0; i < n; i++)
		{
			double		q = ((double) i + 0.5) / (double) n;

			switch (c % 5)
			{
				case 0:
					v[i] = pow((double) i, p);
					break;
				case 1:
					v[i] = exp((double) i * p / (double) n);
					break;
				case 2:			/* exponential quantiles */
					v[i] = -log(1.0 - q) * p;
					break;
				case 3:			/* Pareto quantiles: a heavy tail */
					v[i] = pow(1.0 - q, -1.0 / p);
					break;
				default:		/* a hinge: slope 1, then p times steeper */
					v[i] = i <= h ? (double) i : (double) h + 2.0 * p * (double) (i - h);
					break;
			}
		}
		ours = gc_knee_index(v, n);
		theirs = kneed_reference(v, n);
		cases++;
		if (ours != theirs)
		{
			bad++;
			if (bad <= 5)
				fprintf(stderr, "knee: shape %d, n %lld: ours %lld, kneed %lld\n",
						c % 5, (long long) n, (long long) ours, (long long) theirs);
		}
		free(v);
	}
	CHECK(bad == 0, "knee = kneed's on %d convex curves: %d differ", cases, bad);
}

/* silhouette straight from the definition, on the rows rows[0..r-1] */
static double
brute_silhouette(const float *X, int d, const int32_t *labels,
				 const int64_t *rows, int64_t r)
{
	double		total = 0.0;

	for (int64_t a = 0; a < r; a++)
	{
		int32_t		la = labels[rows[a]];
		double		best = INFINITY,
					own = 0.0;
		int64_t		nown = 0;

		for (int32_t c = 0; c < 64; c++)
		{
			double		s = 0.0;
			int64_t		cnt = 0;

			for (int64_t b = 0; b < r; b++)
			{
				double		acc = 0.0;

				if (labels[rows[b]] != c)
					continue;
				for (int j = 0; j < d; j++)
				{
					double		t = (double) X[rows[a] * d + j] - (double) X[rows[b] * d + j];

					acc += t * t;
				}
				s += sqrt(acc);
				cnt++;
			}
			if (c == la)
			{
				own = s;
				nown = cnt;
			}
			else if (cnt > 0 && s / cnt < best)
				best = s / cnt;
		}
		if (nown > 1)
		{
			double		ai = own / (nown - 1),
						m = ai > best ? ai : best;

			total += m > 0 ? (best - ai) / m : 0.0;
		}
	}
	return total / r;
}

static void
test_silhouette(uint64_t *rs)
{
	for (int rep = 0; rep < 12; rep++)
	{
		int			d = 1 + (int) (tu_next(rs) % 6);
		int64_t		n = 50 + (int64_t) (tu_next(rs) % 700);
		int32_t		m = 2 + (int32_t) (tu_next(rs) % 8);
		float	   *X = tu_make_data(rs, n, d, (data_kind) (rep % 4), m);
		int32_t    *l = malloc(sizeof(int32_t) * n);
		int64_t    *rows = malloc(sizeof(int64_t) * n);
		int64_t		r = 0;
		gc_ctx		ctx = {.n_threads = 1 + rep % 3, .cancel_flags = {NULL, NULL}};
		gc_silhouette_result res;
		gc_status	st;
		double		want;

		for (int64_t i = 0; i < n; i++)
		{
			/* some noise (-1), the rest in m clusters */
			l[i] = tu_next(rs) % 10 == 0 ? -1 : (int32_t) (tu_next(rs) % m);
			if (l[i] >= 0)
				rows[r++] = i;
		}
		want = brute_silhouette(X, d, l, rows, r);
		CHECK(gc_silhouette_cpu(&ctx, X, n, d, l, m, 0, 0, &res, &st) == GC_OK,
			  "%s", st.message);
		CHECK(fabs(res.score - want) <= 1e-12 && res.rows == r && !res.sampled,
			  "silhouette %.17g, brute %.17g", res.score, want);

		/* sampled: the score of the sample among itself */
		{
			int64_t		ss = r / 3,
					   *pick = malloc(sizeof(int64_t) * ss);

			CHECK(gc_silhouette_cpu(&ctx, X, n, d, l, m, ss, 7 + rep, &res, &st) == GC_OK,
				  "%s", st.message);
			CHECK(gc_sample_rows(r, ss, 7 + rep, pick, &st) == GC_OK, "sample");
			for (int64_t i = 0; i < ss; i++)
				pick[i] = rows[pick[i]];
			want = brute_silhouette(X, d, l, pick, ss);
			CHECK(res.sampled && res.rows == ss && fabs(res.score - want) <= 1e-12,
				  "sampled silhouette %.17g, brute %.17g", res.score, want);
			for (int64_t i = 1; i < ss; i++)
				CHECK(pick[i] > pick[i - 1], "sample ascending and distinct");
			free(pick);
		}
		free(X);
		free(l);
		free(rows);
	}
}

static void
test_silhouette_errors(void)
{
	float		X[8] = {0, 0, 1, 1, 2, 2, 3, 3};
	int32_t		one[4] = {0, 0, 0, -1},
				all[4] = {0, 1, 2, 3};
	gc_silhouette_result res;
	gc_status	st;
	volatile sig_atomic_t flag = 1;
	gc_ctx		cancel = {.n_threads = 1, .cancel_flags = {&flag, NULL}};

	CHECK(gc_silhouette_cpu(NULL, X, 4, 2, one, 1, 0, 0, &res, &st) == GC_EINVAL,
		  "one cluster");
	CHECK(gc_silhouette_cpu(NULL, X, 4, 2, all, 4, 0, 0, &res, &st) == GC_EINVAL,
		  "n clusters");
	all[3] = 0;
	CHECK(gc_silhouette_cpu(&cancel, X, 4, 2, all, 3, 0, 0, &res, &st) == GC_ECANCEL,
		  "cancel");
	{
		float		kd[4];

		CHECK(gc_kdistance_cpu(NULL, X, 4, 2, 5, kd, &st) == GC_EINVAL, "k > n");
		CHECK(gc_kdistance_cpu(NULL, X, 4, 2, 0, kd, &st) == GC_EINVAL, "k = 0");
		CHECK(gc_kdistance_cpu(&cancel, X, 4, 2, 2, kd, &st) == GC_ECANCEL, "cancel");
	}
}

/*
 * gc_ctx.poll through whole k-distance and silhouette calls: the calling
 * thread polls at most TU_POLL_GAP_S apart, from the start to the end.
 */
static void
test_tools_poll(uint64_t *rs)
{
	const int	d = 8;
	const int64_t n = 100000,
				ns = 12000;
	float	   *X = tu_make_data(rs, n, d, DATA_BLOBS, 3);
	float	   *kd = malloc(sizeof(float) * n);
	int32_t    *l = malloc(sizeof(int32_t) * ns);
	gc_ctx		ctx = {.n_threads = 2, .cancel_flags = {NULL, NULL}};
	gc_silhouette_result res;
	gc_status	st;
	tu_poll		tp;
	gc_code		rc;

	tu_poll_start(&tp, &ctx, 1e9);
	rc = gc_kdistance_cpu(&ctx, X, n, d, 20, kd, &st);
	tu_poll_end(&tp);
	CHECK(rc == GC_OK, "k-distance: %s", st.message);
	CHECK(tp.max_gap < TU_POLL_GAP_S, "k-distance: the calling thread's polls %.3f s apart (%ld polls)",
		  tp.max_gap, tp.caller_polls);

	for (int64_t i = 0; i < ns; i++)
		l[i] = (int32_t) (i % 5);
	tu_poll_start(&tp, &ctx, 1e9);
	rc = gc_silhouette_cpu(&ctx, X, ns, d, l, 5, 0, 0, &res, &st);
	tu_poll_end(&tp);
	CHECK(rc == GC_OK, "silhouette: %s", st.message);
	CHECK(tp.max_gap < TU_POLL_GAP_S, "silhouette: the calling thread's polls %.3f s apart (%ld polls)",
		  tp.max_gap, tp.caller_polls);
	free(X);
	free(kd);
	free(l);
}

static void
test_cluster_summary(uint64_t *rs)
{
	for (int rep = 0; rep < 6; rep++)
	{
		int			d = 1 + rep;
		int64_t		n = 100 + (int64_t) (tu_next(rs) % 500);
		int32_t		m = 5;
		float	   *X = tu_make_data(rs, n, d, DATA_BLOBS, 3);
		int32_t    *l = malloc(sizeof(int32_t) * n);
		int64_t		sz[5];
		double		ctr[5 * 6],
					rad[5],
					md[5],
					ss[5];
		gc_status	st;

		for (int64_t i = 0; i < n; i++)
			l[i] = (int32_t) (tu_next(rs) % 5) - 1;	/* -1 .. 3: cluster 4 empty */
		CHECK(gc_cluster_summary_cpu(NULL, X, n, d, l, m, sz, ctr, rad, md, ss, &st) == GC_OK,
			  "%s", st.message);
		if (rep % 2)
		{
			/* radius and sumsq not wanted: the rest alike */
			int64_t		sz2[5];
			double		ctr2[5 * 6],
						md2[5];

			CHECK(gc_cluster_summary_cpu(NULL, X, n, d, l, m, sz2, ctr2, NULL, md2, NULL, &st) == GC_OK &&
				  memcmp(sz, sz2, sizeof(sz)) == 0 &&
				  memcmp(ctr, ctr2, sizeof(double) * m * d) == 0 &&
				  memcmp(md, md2, sizeof(md)) == 0,
				  "summary without radius and sumsq");
		}
		for (int32_t c = 0; c < m; c++)
		{
			int64_t		cnt = 0;
			double		mean[6] = {0},
						rmax = 0.0,
						rsum = 0.0,
						s2sum = 0.0;

			for (int64_t i = 0; i < n; i++)
				if (l[i] == c)
				{
					cnt++;
					for (int j = 0; j < d; j++)
						mean[j] += X[i * d + j];
				}
			for (int j = 0; j < d; j++)
				mean[j] /= cnt;
			for (int64_t i = 0; i < n; i++)
				if (l[i] == c)
				{
					double		s = 0.0;

					for (int j = 0; j < d; j++)
						s += (X[i * d + j] - mean[j]) * (X[i * d + j] - mean[j]);
					rmax = fmax(rmax, sqrt(s));
					rsum += sqrt(s);
					s2sum += s;
				}
			CHECK(sz[c] == cnt, "size");
			if (cnt == 0)
				CHECK(isnan(rad[c]) && isnan(md[c]) && isnan(ss[c]) && isnan(ctr[c * d]),
					  "empty cluster NaN");
			else
			{
				bool		ok = fabs(rad[c] - rmax) <= 1e-9 * (1 + rmax) &&
					fabs(md[c] - rsum / cnt) <= 1e-9 * (1 + rmax) &&
					fabs(ss[c] - s2sum) <= 1e-9 * (1 + s2sum);

				for (int j = 0; j < d; j++)
					ok &= fabs(ctr[c * d + j] - mean[j]) <= 1e-9 * (1 + fabs(mean[j]));
				CHECK(ok, "summary of cluster %d", c);
			}
		}
		free(X);
		free(l);
	}
}

/*
 * The cluster scores straight from their definitions (scikit-learn's
 * davies_bouldin_score and calinski_harabasz_score on the rows with label
 * >= 0, written as that code reads): the labelled rows gathered, the
 * clusters renumbered by first label value, the centre distance matrix
 * built whole.  Returns false (K out of 2 .. N - 1) after setting *rows
 * and *clusters.
 */
typedef struct brute_scores
{
	double		db,
				ch,
				inertia;
	int64_t		rows,
				clusters;
} brute_scores;

static bool
brute_cluster_scores(const float *X, int64_t n, int d, const int32_t *labels,
					 int32_t m, brute_scores *b)
{
	int32_t    *code = malloc(sizeof(int32_t) * m);
	int64_t		N = 0,
				K = 0;
	int64_t    *cnt;
	double	   *cen,
			   *intra,
			   *dist,
				mean[8] = {0},
				extra = 0.0,
				ss = 0.0,
				total = 0.0;
	bool		intra0 = true,
				dist0 = true;

	for (int32_t c = 0; c < m; c++)
		code[c] = -1;
	for (int64_t i = 0; i < n; i++)
		if (labels[i] >= 0)
		{
			N++;
			if (code[labels[i]] < 0)
				code[labels[i]] = 0;
		}
	for (int32_t c = 0; c < m; c++)
		if (code[c] == 0)
			code[c] = (int32_t) K++;
	b->rows = N;
	b->clusters = K;
	if (K < 2 || K > N - 1)
	{
		free(code);
		return false;
	}
	cnt = calloc(K, sizeof(int64_t));
	cen = calloc(K * d, sizeof(double));
	intra = calloc(K, sizeof(double));
	dist = calloc(K * K, sizeof(double));
	for (int64_t i = 0; i < n; i++)
		if (labels[i] >= 0)
		{
			int32_t		k = code[labels[i]];

			cnt[k]++;
			for (int j = 0; j < d; j++)
			{
				cen[k * d + j] += X[i * d + j];
				mean[j] += X[i * d + j];
			}
		}
	for (int j = 0; j < d; j++)
		mean[j] /= N;
	for (int64_t k = 0; k < K; k++)
		for (int j = 0; j < d; j++)
			cen[k * d + j] /= cnt[k];
	for (int64_t i = 0; i < n; i++)
		if (labels[i] >= 0)
		{
			int32_t		k = code[labels[i]];
			double		s = 0.0;

			for (int j = 0; j < d; j++)
				s += ((double) X[i * d + j] - cen[k * d + j]) *
					((double) X[i * d + j] - cen[k * d + j]);
			intra[k] += sqrt(s) / cnt[k];
			ss += s;
		}
	for (int64_t k = 0; k < K; k++)
	{
		double		s = 0.0;

		for (int j = 0; j < d; j++)
			s += (cen[k * d + j] - mean[j]) * (cen[k * d + j] - mean[j]);
		extra += cnt[k] * s;
		intra0 &= fabs(intra[k]) <= 1e-8;
		for (int64_t l = 0; l < K; l++)
		{
			s = 0.0;
			for (int j = 0; j < d; j++)
				s += (cen[k * d + j] - cen[l * d + j]) * (cen[k * d + j] - cen[l * d + j]);
			dist[k * K + l] = sqrt(s);
			dist0 &= dist[k * K + l] <= 1e-8;
		}
	}
	b->inertia = ss;
	b->ch = ss == 0.0 ? 1.0 : extra * (N - K) / (ss * (K - 1.0));
	b->db = 0.0;
	if (!intra0 && !dist0)
	{
		for (int64_t k = 0; k < K; k++)
		{
			double		best = -INFINITY;

			for (int64_t l = 0; l < K; l++)
			{
				double		dd = dist[k * K + l] == 0.0 ? INFINITY : dist[k * K + l];

				best = fmax(best, (intra[k] + intra[l]) / dd);
			}
			total += best;
		}
		b->db = total / K;
	}
	free(code);
	free(cnt);
	free(cen);
	free(intra);
	free(dist);
	return true;
}

/* a and b finite and agreeing to rel relative (both 0 counts) */
static bool
close_rel(double a, double b, double rel)
{
	return isfinite(a) && isfinite(b) &&
		(a == b || fabs(a - b) <= rel * fmax(fabs(a), fabs(b)));
}

/*
 * One scores case: gc_cluster_scores_cpu on 1 and 3 threads (the same
 * bits) against brute_cluster_scores, to 1e-12 relative; the error cases
 * GC_EINVAL with rows and clusters filled.
 */
static void
check_scores(const char *what, const float *X, int64_t n, int d,
			 const int32_t *l, int32_t m)
{
	brute_scores want = {0};
	bool		valid = brute_cluster_scores(X, n, d, l, m, &want);
	gc_cluster_scores res,
				res3;
	gc_status	st;
	gc_ctx		one = {.n_threads = 1, .cancel_flags = {NULL, NULL}},
				three = {.n_threads = 3, .cancel_flags = {NULL, NULL}};
	gc_code		rc = gc_cluster_scores_cpu(&one, X, n, d, l, m, &res, &st);

	CHECK(res.rows == want.rows && res.clusters == want.clusters,
		  "%s: rows %lld clusters %lld, want %lld %lld", what,
		  (long long) res.rows, (long long) res.clusters,
		  (long long) want.rows, (long long) want.clusters);
	if (!valid)
	{
		CHECK(rc == GC_EINVAL && isnan(res.davies_bouldin) && strstr(st.message, "clusters") != NULL,
			  "%s: %lld clusters of %lld rows: want GC_EINVAL, got %d (%s)", what,
			  (long long) want.clusters, (long long) want.rows, (int) rc, st.message);
		return;
	}
	CHECK(rc == GC_OK, "%s: %s", what, st.message);
	CHECK(close_rel(res.davies_bouldin, want.db, 1e-12) &&
		  close_rel(res.calinski_harabasz, want.ch, 1e-12) &&
		  close_rel(res.inertia, want.inertia, 1e-12),
		  "%s (n %lld d %d m %d): DB %.17g CH %.17g inertia %.17g, brute %.17g %.17g %.17g",
		  what, (long long) n, d, m, res.davies_bouldin, res.calinski_harabasz,
		  res.inertia, want.db, want.ch, want.inertia);
	CHECK(gc_cluster_scores_cpu(&three, X, n, d, l, m, &res3, &st) == GC_OK &&
		  memcmp(&res, &res3, sizeof(res)) == 0,
		  "%s: 3 threads differ from 1", what);
}

/* A gc_ctx.poll that stops the call from its 4th poll on (arg: the count). */
static bool
poll_after_3(void *arg)
{
	return __atomic_add_fetch((int *) arg, 1, __ATOMIC_RELAXED) > 3;
}

/*
 * Random labellings of random data (d 1..8, m up to 20, noise rows, empty
 * labels, every data kind, duplicated rows among them), then the
 * degenerate cases: coincident centres (all and some), every cluster a
 * single repeated point, K = 1, K = N, no labelled row, a many-cluster
 * case on the parallel path, and cancellation.
 */
static void
test_cluster_scores(uint64_t *rs)
{
	for (int rep = 0; rep < 40; rep++)
	{
		int			d = 1 + rep % 8;
		int64_t		n = 20 + (int64_t) (tu_next(rs) % 400);
		int32_t		m = 2 + (int32_t) (tu_next(rs) % 19);
		float	   *X = tu_make_data(rs, n, d, (data_kind) (rep % 4), 1 + rep % 6);
		int32_t    *l = malloc(sizeof(int32_t) * n);
		int32_t		gap = (int32_t) (tu_next(rs) % m);	/* a label left empty */
		char		what[64];

		for (int64_t i = 0; i < n; i++)
		{
			l[i] = tu_next(rs) % 8 == 0 ? -1 : (int32_t) (tu_next(rs) % m);
			if (l[i] == gap && m > 2)
				l[i] = -1;
			if (i > 0 && tu_next(rs) % 10 == 0)	/* a duplicated row */
				memcpy(X + i * d, X + (i - 1) * d, sizeof(float) * d);
		}
		snprintf(what, sizeof(what), "random %s #%d", data_name[rep % 4], rep);
		check_scores(what, X, n, d, l, m);
		free(X);
		free(l);
	}

	/* coincident centres: each cluster pairs of rows v, -v (centre exactly 0) */
	for (int rep = 0; rep < 4; rep++)
	{
		int			d = 1 + rep * 2;
		int32_t		m = 3 + rep;
		int64_t		n = 2 * 60;
		float	   *X = malloc(sizeof(float) * n * d);
		int32_t    *l = malloc(sizeof(int32_t) * n);

		for (int64_t i = 0; i < n; i += 2)
		{
			for (int j = 0; j < d; j++)
			{
				X[i * d + j] = (float) (tu_uniform(rs) * 10.0 - 5.0);
				X[(i + 1) * d + j] = -X[i * d + j];
			}
			l[i] = l[i + 1] = (int32_t) (tu_next(rs) % m);
		}
		l[0] = l[1] = 0;
		l[2] = l[3] = 1;
		check_scores("all centres at 0", X, n, d, l, m);
		{
			gc_cluster_scores res;
			gc_status	st;

			CHECK(gc_cluster_scores_cpu(NULL, X, n, d, l, m, &res, &st) == GC_OK &&
				  res.davies_bouldin == 0.0 && res.calinski_harabasz == 0.0 &&
				  res.inertia > 0.0,
				  "all centres at 0: DB %g CH %g", res.davies_bouldin,
				  res.calinski_harabasz);
		}
		/* two clusters moved away: the pair left at 0 gives ratio 0 */
		for (int64_t i = 0; i < n; i++)
			if (l[i] >= 2)
				for (int j = 0; j < d; j++)
					X[i * d + j] += (float) (3 * l[i] + j);
		check_scores("some centres at 0", X, n, d, l, m);
		free(X);
		free(l);
	}

	/* every cluster one point repeated: intra 0, so DB 0 and CH 1 */
	for (int rep = 0; rep < 3; rep++)
	{
		int			d = 2 + rep;
		int32_t		m = 4 + rep;
		int64_t		n = 80;
		float	   *P = tu_make_data(rs, m, d, DATA_UNIFORM, 1);
		float	   *X = malloc(sizeof(float) * n * d);
		int32_t    *l = malloc(sizeof(int32_t) * n);
		gc_cluster_scores res;
		gc_status	st;

		for (int64_t i = 0; i < n; i++)
		{
			l[i] = i % 7 == 3 ? -1 : (int32_t) (i % m);
			memcpy(X + i * d, P + (i % m) * d, sizeof(float) * d);
			if (l[i] < 0)
				X[i * d] += 100.0f;	/* noise far away, left out */
		}
		check_scores("points repeated", X, n, d, l, m);
		CHECK(gc_cluster_scores_cpu(NULL, X, n, d, l, m, &res, &st) == GC_OK &&
			  res.davies_bouldin == 0.0 && res.calinski_harabasz == 1.0 &&
			  res.inertia == 0.0,
			  "points repeated: DB %g CH %g inertia %g", res.davies_bouldin,
			  res.calinski_harabasz, res.inertia);
		free(P);
		free(X);
		free(l);
	}

	/*
	 * Within numpy's allclose of 0 but not 0, so DB is 0: every cluster
	 * rows 1 float step apart near 1e-3 (intra about 6e-11), then every
	 * centre within 1e-8 of the others (rows (+-v, c 1e-9): centre (0, c
	 * 1e-9)) with intra far from 0.
	 */
	for (int rep = 0; rep < 2; rep++)
	{
		int			d = 2;
		int32_t		m = 5;
		int64_t		n = 60;
		float		X[60 * 2];
		int32_t		l[60];
		gc_cluster_scores res;
		gc_status	st;

		for (int64_t i = 0; i < n; i += 2)
		{
			int32_t		c = (int32_t) ((i / 2) % m);
			float		v = (float) (1.0 + tu_uniform(rs));

			l[i] = l[i + 1] = c;
			if (rep == 0)
			{
				X[i * d] = X[(i + 1) * d] = 1e-3f * (float) (c + 1);
				X[i * d + 1] = X[(i + 1) * d + 1] = 1e-3f;
				X[(i + 1) * d] = nextafterf(X[i * d], 1.0f);
			}
			else
			{
				X[i * d] = v;
				X[(i + 1) * d] = -v;
				X[i * d + 1] = X[(i + 1) * d + 1] = (float) c * 1e-9f;
			}
		}
		check_scores(rep == 0 ? "intra within 1e-8" : "centres within 1e-8", X, n, d, l, m);
		CHECK(gc_cluster_scores_cpu(NULL, X, n, d, l, m, &res, &st) == GC_OK &&
			  res.davies_bouldin == 0.0 && res.inertia > 0.0,
			  "%s: DB %g inertia %g", rep == 0 ? "intra within 1e-8" : "centres within 1e-8",
			  res.davies_bouldin, res.inertia);
	}

	/* K = 1, K = N (noise rows beside), nothing labelled */
	{
		float		X[12] = {0, 0, 1, 1, 2, 2, 3, 3, 9, 9, 5, 5};
		int32_t		one[6] = {2, 2, -1, 2, 2, -1},
					all[6] = {0, 3, -1, 2, 1, -1},
					none[6] = {-1, -1, -1, -1, -1, -1},
					two[6] = {0, 3, -1, 3, 0, -1};

		check_scores("K = 1", X, 6, 2, one, 4);
		check_scores("K = N", X, 6, 2, all, 4);
		check_scores("no labelled row", X, 6, 2, none, 4);
		check_scores("K = 2 of labels 0 .. 3", X, 6, 2, two, 4);
	}

	/*
	 * many clusters: the centre pairs on a team, the same bits as one
	 * thread; about 1,200 non-empty clusters, so that each of 2 threads
	 * does several polls' worth of pairs (K^2 d / 2 > 2^20 * 2)
	 */
	{
		int			d = 4;
		int64_t		n = 6000;
		int32_t		m = 1200;
		float	   *X = tu_make_data(rs, n, d, DATA_BLOBS, 50);
		int32_t    *l = malloc(sizeof(int32_t) * n);
		volatile sig_atomic_t flag = 1;
		gc_ctx		cancel = {.n_threads = 2, .cancel_flags = {&flag, NULL}};
		gc_cluster_scores res;
		gc_status	st;

		for (int64_t i = 0; i < n; i++)
			l[i] = tu_next(rs) % 20 == 0 ? -1 : (int32_t) (tu_next(rs) % (m - 1));
		check_scores("1,200 labels", X, n, d, l, m);
		CHECK(gc_cluster_scores_cpu(&cancel, X, n, d, l, m, &res, &st) == GC_ECANCEL &&
			  isnan(res.davies_bouldin), "cancel");
		/* the row passes poll 3 times here: the 4th poll is the centre pairs' */
		for (int threads = 1; threads <= 2; threads++)
		{
			int			calls = 0;
			gc_ctx		late = {.n_threads = threads, .cancel_flags = {NULL, NULL},
			.poll = poll_after_3, .poll_arg = &calls};

			CHECK(gc_cluster_scores_cpu(&late, X, n, d, l, m, &res, &st) == GC_ECANCEL &&
				  calls > 3, "cancel in the centre pairs (%d threads, %d polls)",
				  threads, calls);
		}
		free(X);
		free(l);
	}
}

/* A progress sink that records what it is told, and by which thread. */
typedef struct progress_log
{
	int			reports;
	int			other_thread;	/* reports from a thread other than 0 */
	int			not_ascending;	/* a report with fewer done than the last */
	gc_phase	last_phase;
	int64_t		last_done,
				last_total;
	bool		saw_index;
} progress_log;

static void
log_progress(void *arg, const gc_progress *p)
{
	progress_log *log = arg;

	log->reports++;
	log->other_thread += omp_get_thread_num() != 0;
	if (p->phase == GC_PHASE_INDEX)
		log->saw_index = true;
	if (p->phase == log->last_phase && p->done < log->last_done)
		log->not_ascending++;
	log->last_phase = p->phase;
	log->last_done = p->done;
	log->last_total = p->total;
}

/*
 * The k-distances and the silhouette report from the calling thread only,
 * their points (rows) done of total ascending, at most about once per 1%,
 * and all done at the end.
 */
static void
test_progress(uint64_t *rs)
{
	int64_t		n = 5000;
	int			d = 3;
	float	   *X = tu_make_data(rs, n, d, DATA_BLOBS, 4);
	float	   *kd = malloc(sizeof(float) * n);
	int32_t    *l = malloc(sizeof(int32_t) * n);
	gc_status	st;
	gc_silhouette_result res;

	for (int threads = 1; threads <= 4; threads *= 2)
	{
		progress_log log = {0};
		gc_ctx		ctx = {.n_threads = threads, .cancel_flags = {NULL, NULL},
		.progress = log_progress, .progress_arg = &log};

		CHECK(gc_kdistance_cpu(&ctx, X, n, d, 7, kd, &st) == GC_OK, "%s", st.message);
		CHECK(log.saw_index && log.last_phase == GC_PHASE_ITERATE &&
			  log.last_done == n && log.last_total == n,
			  "k-distance progress ends with all %lld points done (got %lld of %lld)",
			  (long long) n, (long long) log.last_done, (long long) log.last_total);
		CHECK(log.other_thread == 0 && log.not_ascending == 0 && log.reports <= 104,
			  "k-distance progress: %d reports, %d from other threads, %d descending",
			  log.reports, log.other_thread, log.not_ascending);

		memset(&log, 0, sizeof(log));
		for (int64_t i = 0; i < n; i++)
			l[i] = (int32_t) (i % 3);
		CHECK(gc_silhouette_cpu(&ctx, X, n, d, l, 3, 2000, 1, &res, &st) == GC_OK,
			  "%s", st.message);
		CHECK(log.last_phase == GC_PHASE_ITERATE && log.last_done == 2000 &&
			  log.last_total == 2000 && log.other_thread == 0 &&
			  log.not_ascending == 0 && log.reports <= 104,
			  "silhouette progress: %d reports, last %lld of %lld", log.reports,
			  (long long) log.last_done, (long long) log.last_total);
	}
	free(X);
	free(kd);
	free(l);
}

int
main(void)
{
	uint64_t	seed = tu_seed(),
				rs = seed;

	printf("test_tools: seed %llu (GPUCLUST_TEST_SEED to repeat)\n",
		   (unsigned long long) seed);
	test_kdistance(&rs);
	test_kdistance_core(&rs);
	test_knee(&rs);
	test_silhouette(&rs);
	test_silhouette_errors();
	test_tools_poll(&rs);
	test_cluster_summary(&rs);
	test_cluster_scores(&rs);
	test_progress(&rs);
	return test_summary("test_tools");
}
