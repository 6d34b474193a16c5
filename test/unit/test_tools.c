/*
 * test_tools.c — the tools for choosing parameters and reading clusters
 * (kdistance.c, silhouette.c, cluster_summary.c) against brute-force
 * references on fresh random data (GPUCLUST_TEST_SEED repeats a run).
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

static void
test_knee(void)
{
	double		y[101];

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
	test_knee();
	test_silhouette(&rs);
	test_silhouette_errors();
	test_tools_poll(&rs);
	test_cluster_summary(&rs);
	test_progress(&rs);
	return test_summary("test_tools");
}
