/*
 * test_silhouette_gpu.c — the GPU silhouette (cuda/tools/silhouette.cu) against
 * the CPU's (src/core/tools/silhouette.c) and a sequential reference, on fresh
 * random data of many shapes.  Needs a GPU.
 *
 *   CPU      gc_silhouette_on_gpu equals gc_silhouette_cpu on everything: the
 *            code, rows, clusters and sampled, the score bit for bit
 *            (memcmp of the double), the message of every error.  d 1 to
 *            300, 3 to 100,000 scored rows (the largest in two launches),
 *            2 to hundreds of labels: uniform, very unequal sizes, clusters
 *            of one row, unused label values (empty clusters), noise (-1);
 *            blobs, uniform, grid (many equal distances) and duplicate rows
 *            (a = 0 and b = 0); samples of the labelled rows with different
 *            seeds.
 *   brute    on small inputs the score is within 1e-9 of ref_silhouette
 *            (below: long double, by cluster), sampled or not.
 *   errors   one cluster, clusters > rows - 1, no rows, all noise, bad
 *            arguments, a label out of range: the CPU's code and res; the
 *            cancel flag set before the call (GC_ECANCEL, the CPU's res),
 *            and raised while the GPU runs (GC_ECANCEL within a launch).
 *   progress GC_PHASE_ITERATE from 0 to rows of rows, never decreasing.
 *
 * GPUCLUST_TEST_SEED fixes the data; GPUCLUST_TEST_QUICK=1 runs a smaller
 * set (for compute-sanitizer), =2 a tiny one (for racecheck).
 */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "common/gpu.h"

static uint64_t rs;
static int	quick;
static int	n_cases,
			n_errors,
			n_sampled,
			n_brute;
static double cpu_s,
			gpu_s;

/* how the labels are drawn */
typedef enum
{
	LAB_UNIFORM,				/* uniform in 0 .. m-1 */
	LAB_SKEWED,					/* m u^4: a few large clusters, many tiny */
	LAB_SINGLETONS,				/* rows 0 .. m-3 alone, the rest in two */
	LAB_GAPS,					/* multiples of 7 only: empty clusters */
	LAB_KINDS
} lab_kind;

static const char *lab_name[] = {"uniform", "skewed", "singletons", "gaps"};

typedef struct sil_case
{
	int64_t		n;				/* rows, noise included */
	int			d;
	data_kind	kind;
	int			nb;				/* the data's centres */
	lab_kind	lk;
	int32_t		m;
	double		noise;			/* the share of rows labelled -1 */
	int64_t		sample;			/* sample_size (0: all) */
	uint64_t	seed;			/* the sample's */
} sil_case;

static void
make_labels(int32_t *l, int64_t n, lab_kind lk, int32_t m, double noise)
{
	for (int64_t i = 0; i < n; i++)
	{
		double		u;

		if (noise > 0.0 && tu_uniform(&rs) < noise)
		{
			l[i] = -1;
			continue;
		}
		switch (lk)
		{
			case LAB_UNIFORM:
				l[i] = (int32_t) (tu_next(&rs) % (uint64_t) m);
				break;
			case LAB_SKEWED:
				u = tu_uniform(&rs);
				l[i] = (int32_t) ((double) m * u * u * u * u);
				break;
			case LAB_SINGLETONS:
				l[i] = i < m - 2 ? (int32_t) i :
					m - 2 + (int32_t) (tu_next(&rs) % (m >= 2 ? 2 : 1));
				break;
			default:
				l[i] = (int32_t) (tu_next(&rs) % (uint64_t) ((m + 6) / 7)) * 7;
				break;
		}
	}
}

/*
 * The reference: for each scored row, its distances summed per cluster in
 * long double (the features' differences exact, everything after rounded
 * to 64 bits of mantissa, not double's 53), then the rule as
 * scikit-learn states it.
 */
static double
ref_silhouette(const float *X, int d, const int32_t *labels, int32_t m,
			   const int64_t *rows, int64_t r)
{
	long double *sum = malloc(sizeof(long double) * (size_t) m);
	int64_t    *cnt = malloc(sizeof(int64_t) * (size_t) m);
	long double total = 0.0L;

	for (int64_t a = 0; a < r; a++)
	{
		const float *xa = X + rows[a] * d;
		int32_t		la = labels[rows[a]];
		long double ai,
					bi = INFINITY,
					mx;

		for (int32_t c = 0; c < m; c++)
		{
			sum[c] = 0.0L;
			cnt[c] = 0;
		}
		for (int64_t b = 0; b < r; b++)
		{
			const float *xb = X + rows[b] * d;
			long double acc = 0.0L;

			for (int j = 0; j < d; j++)
			{
				long double t = (long double) xa[j] - (long double) xb[j];

				acc += t * t;
			}
			sum[labels[rows[b]]] += sqrtl(acc);
			cnt[labels[rows[b]]]++;
		}
		if (cnt[la] == 1)
			continue;
		ai = sum[la] / (long double) (cnt[la] - 1);
		for (int32_t c = 0; c < m; c++)
			if (c != la && cnt[c] > 0 && sum[c] / (long double) cnt[c] < bi)
				bi = sum[c] / (long double) cnt[c];
		mx = ai > bi ? ai : bi;
		if (mx > 0.0L)
			total += (bi - ai) / mx;
	}
	free(sum);
	free(cnt);
	return (double) (total / (long double) r);
}

/* What a call reported: GC_PHASE_ITERATE, done never decreasing. */
typedef struct prog
{
	int			calls;
	int			bad;
	int64_t		first,
				last,
				total;
} prog;

static void
on_progress(void *arg, const gc_progress *p)
{
	prog	   *g = arg;

	if (g->calls == 0)
	{
		g->first = p->done;
		g->total = p->total;
	}
	else if (p->done < g->last || p->total != g->total)
		g->bad++;
	if (p->phase != GC_PHASE_ITERATE || p->done > p->total)
		g->bad++;
	g->last = p->done;
	g->calls++;
}

static void
run_case(const sil_case *c, bool brute)
{
	float	   *X = tu_make_data(&rs, c->n, c->d, c->kind, c->nb);
	int32_t    *l = malloc(sizeof(int32_t) * (size_t) (c->n > 0 ? c->n : 1));
	gc_silhouette_result rc_cpu,
				rc_gpu;
	gc_status	st_cpu,
				st_gpu;
	gc_code		code_cpu,
				code_gpu;
	prog		g;
	gc_ctx		ctx;
	double		t0;
	char		what[200];

	make_labels(l, c->n, c->lk, c->m, c->noise);
	snprintf(what, sizeof(what), "n %lld d %d %s/%d labels %s m %d noise %.2f sample %lld seed %llu",
			 (long long) c->n, c->d, data_name[c->kind], c->nb, lab_name[c->lk],
			 c->m, c->noise, (long long) c->sample, (unsigned long long) c->seed);
	memset(&ctx, 0, sizeof(ctx));
	t0 = now_s();
	code_cpu = gc_silhouette_cpu(&ctx, X, c->n, c->d, l, c->m, c->sample, c->seed,
								 &rc_cpu, &st_cpu);
	cpu_s += now_s() - t0;
	memset(&g, 0, sizeof(g));
	ctx.progress = on_progress;
	ctx.progress_arg = &g;
	/* poisoned: every field must be written */
	memset(&rc_gpu, 0x5a, sizeof(rc_gpu));
	t0 = now_s();
	code_gpu = gc_silhouette_on_gpu(&ctx, X, c->n, c->d, l, c->m, c->sample, c->seed,
								 &rc_gpu, &st_gpu);
	gpu_s += now_s() - t0;
	n_cases++;
	n_errors += code_cpu != GC_OK;
	n_sampled += rc_cpu.sampled;

	CHECK(code_gpu == code_cpu, "%s: code %d (%s), CPU %d (%s)", what,
		  code_gpu, st_gpu.message, code_cpu, st_cpu.message);
	CHECK(rc_gpu.rows == rc_cpu.rows && rc_gpu.clusters == rc_cpu.clusters &&
		  rc_gpu.sampled == rc_cpu.sampled,
		  "%s: rows %lld clusters %lld sampled %d, CPU %lld %lld %d", what,
		  (long long) rc_gpu.rows, (long long) rc_gpu.clusters, rc_gpu.sampled,
		  (long long) rc_cpu.rows, (long long) rc_cpu.clusters, rc_cpu.sampled);
	CHECK(memcmp(&rc_gpu.score, &rc_cpu.score, sizeof(double)) == 0,
		  "%s: score %.17g, CPU %.17g", what, rc_gpu.score, rc_cpu.score);
	if (code_cpu != GC_OK)
		CHECK(strcmp(st_gpu.message, st_cpu.message) == 0,
			  "%s: message \"%s\", CPU \"%s\"", what, st_gpu.message, st_cpu.message);
	else
	{
		CHECK(g.calls >= 2 && g.bad == 0 && g.first == 0 &&
			  g.last == rc_cpu.rows && g.total == rc_cpu.rows,
			  "%s: progress: %d reports (%d bad), %lld .. %lld of %lld", what,
			  g.calls, g.bad, (long long) g.first, (long long) g.last,
			  (long long) g.total);
		CHECK(rc_gpu.score >= -1.0 && rc_gpu.score <= 1.0, "%s: score %.17g",
			  what, rc_gpu.score);
	}

	if (brute && code_cpu == GC_OK)
	{
		int64_t		r = 0,
				   *rows = malloc(sizeof(int64_t) * (size_t) c->n);
		double		want;

		for (int64_t i = 0; i < c->n; i++)
			if (l[i] >= 0)
				rows[r++] = i;
		if (c->sample > 0 && c->sample < r)
		{
			int64_t    *pick = malloc(sizeof(int64_t) * (size_t) c->sample);
			gc_status	st;

			CHECK(gc_sample_rows(r, c->sample, c->seed, pick, &st) == GC_OK, "sample");
			for (int64_t i = 0; i < c->sample; i++)
				pick[i] = rows[pick[i]];
			free(rows);
			rows = pick;
			r = c->sample;
		}
		want = ref_silhouette(X, c->d, l, c->m, rows, r);
		CHECK(fabs(rc_gpu.score - want) <= 1e-9, "%s: score %.17g, reference %.17g",
			  what, rc_gpu.score, want);
		n_brute++;
		free(rows);
	}
	free(X);
	free(l);
}

/* Log-uniform in [lo, hi]. */
static int64_t
log_uniform(int64_t lo, int64_t hi)
{
	double		v = exp(log((double) lo) + tu_uniform(&rs) * (log((double) hi) - log((double) lo)));
	int64_t		x = (int64_t) (v + 0.5);

	return x < lo ? lo : x > hi ? hi : x;
}

/*
 * A random case of at most about work pair-dimensions (r^2 d): d from the
 * list, scored rows log-uniform from 3, labels, noise and a sample drawn.
 */
static void
random_case(sil_case *c, double work, int64_t rmax)
{
	static const int ds[] = {1, 2, 3, 7, 32, 100, 300};
	int64_t		r,
				top;

	memset(c, 0, sizeof(*c));
	c->d = ds[tu_next(&rs) % (sizeof(ds) / sizeof(ds[0]))];
	top = (int64_t) sqrt(work / c->d);
	if (top > rmax)
		top = rmax;
	if (top < 4)
		top = 4;
	r = log_uniform(3, top);
	c->kind = (data_kind) (tu_next(&rs) % 4);
	c->nb = 1 + (int) (tu_next(&rs) % 12);
	c->lk = (lab_kind) (tu_next(&rs) % LAB_KINDS);
	c->m = (int32_t) log_uniform(2, r < 600 ? (r > 2 ? r : 2) : 600);
	if (c->lk == LAB_GAPS && c->m < 8)
		c->m = 8 + (int32_t) (tu_next(&rs) % 30);
	c->noise = tu_next(&rs) % 3 == 0 ? tu_uniform(&rs) * 0.6 : 0.0;
	c->n = (int64_t) ((double) r / (1.0 - c->noise)) + 1;
	if (tu_next(&rs) % 4 == 0 && r > 3)
	{
		c->sample = 2 + (int64_t) (tu_next(&rs) % (uint64_t) (r - 2));
		c->seed = tu_next(&rs);
	}
}

static void
test_errors(void)
{
	float		X[10] = {0, 0, 1, 1, 2, 2, 3, 3, 4, 4};
	int32_t		one[5] = {0, 0, 0, -1, 0},
				all[5] = {0, 1, 2, 3, 4},
				noise[5] = {-1, -1, -1, -1, -1},
				two[5] = {0, 1, 0, 1, 1},
				high[5] = {0, 1, 7, 1, 0};
	struct
	{
		const char *what;
		int64_t		n;
		const int32_t *l;
		int32_t		m;
		int64_t		sample;
		bool		cancel;
	}			cases[] = {
		{"one cluster", 5, one, 1, 0, false},
		{"clusters = rows", 5, all, 5, 0, false},
		{"no rows", 0, one, 1, 0, false},
		{"no rows, 2 labels", 0, two, 2, 0, false},
		{"all noise", 5, noise, 3, 0, false},
		{"m < 0", 5, two, -1, 0, false},
		{"label >= m", 5, high, 3, 0, false},
		{"a sample of 2", 5, two, 2, 2, false},
		{"sample 1", 5, two, 2, 1, false},
		{"cancelled", 5, two, 2, 0, true},
		{"cancelled, sampled", 5, two, 2, 4, true},
		{"cancelled, one cluster", 5, one, 1, 0, true},
		{"two clusters of 2 and 3", 5, two, 2, 0, false},
	};
	volatile sig_atomic_t flag = 1;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
	{
		gc_ctx		ctx;
		gc_silhouette_result rc,
					rg;
		gc_status	sc,
					sg;
		gc_code		cc,
					cg;

		memset(&ctx, 0, sizeof(ctx));
		if (cases[i].cancel)
			ctx.cancel_flags[0] = &flag;
		cc = gc_silhouette_cpu(&ctx, X, cases[i].n, 2, cases[i].l, cases[i].m,
							   cases[i].sample, 11, &rc, &sc);
		memset(&rg, 0x5a, sizeof(rg));
		cg = gc_silhouette_on_gpu(&ctx, X, cases[i].n, 2, cases[i].l, cases[i].m,
							   cases[i].sample, 11, &rg, &sg);
		CHECK(cg == cc && strcmp(sg.message, sc.message) == 0,
			  "%s: code %d (%s), CPU %d (%s)", cases[i].what, cg, sg.message,
			  cc, sc.message);
		CHECK(rg.rows == rc.rows && rg.clusters == rc.clusters &&
			  rg.sampled == rc.sampled &&
			  memcmp(&rg.score, &rc.score, sizeof(double)) == 0,
			  "%s: res %lld %lld %d %.17g, CPU %lld %lld %d %.17g", cases[i].what,
			  (long long) rg.rows, (long long) rg.clusters, rg.sampled, rg.score,
			  (long long) rc.rows, (long long) rc.clusters, rc.sampled, rc.score);
	}
	CHECK(gc_silhouette_on_gpu(NULL, X, 5, 2, one, 1, 0, 0, &(gc_silhouette_result) {0},
							&(gc_status) {0}) == GC_EINVAL, "one cluster, no ctx");

	/* the memory bound: 0 for no rows, at least the features, SIZE_MAX past INT32_MAX */
	CHECK(gc_silhouette_gpu_mem_bytes(0, 8, 4) == 0, "mem_bytes(0)");
	CHECK(gc_silhouette_gpu_mem_bytes(100000, 300, 500) >= (size_t) 100000 * (300 * 4 + 12),
		  "mem_bytes below the features");
	CHECK(gc_silhouette_gpu_mem_bytes((int64_t) INT32_MAX + 1, 2, 4) == SIZE_MAX,
		  "mem_bytes past INT32_MAX");
}

/*
 * A cancel raised 30 ms into a GPU run of several launches (500k rows of
 * one feature: about 8 launches) stops it at the next launch.
 */
static void
test_cancel_running(void)
{
	const int64_t n = 500000;
	float	   *X = tu_make_data(&rs, n, 1, DATA_UNIFORM, 1);
	int32_t    *l = malloc(sizeof(int32_t) * n);
	gc_ctx		ctx;
	gc_silhouette_result res;
	gc_status	st;
	pthread_t	th;
	gc_code		rc;
	double		t0,
				t;

	make_labels(l, n, LAB_UNIFORM, 10, 0.0);
	memset(&ctx, 0, sizeof(ctx));
	ctx.cancel_flags[1] = &cancel_flag;
	cancel_flag = 0;
	t0 = now_s();
	pthread_create(&th, NULL, raise_later, NULL);
	rc = gc_silhouette_on_gpu(&ctx, X, n, 1, l, 10, 0, 0, &res, &st);
	t = now_s() - t0;
	pthread_join(th, NULL);
	CHECK(rc == GC_ECANCEL && strcmp(st.message, "canceled") == 0,
		  "a cancel while running: code %d (%s) after %.3f s", rc, st.message, t);
	CHECK(t < 2.0, "the cancel took %.3f s", t);
	CHECK(res.rows == n && res.clusters == 10 && !res.sampled && res.score == 0.0,
		  "a cancelled run's res: %lld %lld", (long long) res.rows, (long long) res.clusters);
	printf("test_silhouette_gpu: a cancel raised at 30 ms stopped the run at %.0f ms\n", t * 1e3);
	cancel_flag = 0;
	free(X);
	free(l);
}

int
main(void)
{
	uint64_t	seed = tu_seed();
	const char *q = getenv("GPUCLUST_TEST_QUICK");
	gc_cuda_device_info info;
	/* n, d, data, centres, labels, m, noise, sample, seed */
	static const sil_case fixed[] = {
		{3, 2, DATA_BLOBS, 1, LAB_SINGLETONS, 3, 0, 0, 0},	/* 3 rows: 2 or 3 clusters */
		{4, 1, DATA_GRID, 1, LAB_UNIFORM, 2, 0, 0, 0},
		{50, 3, DATA_DUPLICATES, 1, LAB_UNIFORM, 4, 0, 0, 0},	/* all equal: a = b = 0 */
		{200, 7, DATA_DUPLICATES, 3, LAB_UNIFORM, 5, 0.2, 0, 0},	/* a = 0 or b = 0 */
		{300, 2, DATA_GRID, 1, LAB_SKEWED, 40, 0, 0, 0},
		{400, 2, DATA_BLOBS, 5, LAB_SINGLETONS, 150, 0.1, 0, 0},	/* 148 of one row */
		{500, 32, DATA_BLOBS, 8, LAB_GAPS, 500, 0.3, 0, 0},	/* 72 labels of 500 used */
		{600, 3, DATA_UNIFORM, 1, LAB_UNIFORM, 8, 0.5, 200, 1},	/* sampled, two seeds */
		{600, 3, DATA_UNIFORM, 1, LAB_UNIFORM, 8, 0.5, 200, 2},
		{700, 300, DATA_BLOBS, 6, LAB_SKEWED, 60, 0, 0, 0},
		{1000, 100, DATA_BLOBS, 10, LAB_UNIFORM, 300, 0, 0, 0},
		{1500, 7, DATA_BLOBS, 4, LAB_SKEWED, 200, 0.05, 700, 99},
		/* large: not in the quick sets */
		{30000, 1, DATA_BLOBS, 5, LAB_UNIFORM, 7, 0, 0, 0},
		{30000, 2, DATA_UNIFORM, 1, LAB_SKEWED, 300, 0.1, 0, 0},
		{20000, 3, DATA_GRID, 1, LAB_UNIFORM, 50, 0, 0, 0},
		{30000, 7, DATA_BLOBS, 9, LAB_SINGLETONS, 120, 0, 0, 0},
		{10000, 32, DATA_BLOBS, 12, LAB_GAPS, 400, 0.2, 0, 0},
		{6000, 100, DATA_DUPLICATES, 20, LAB_UNIFORM, 30, 0, 0, 0},
		{4000, 300, DATA_BLOBS, 6, LAB_SKEWED, 250, 0, 0, 0},
		{40000, 32, DATA_BLOBS, 12, LAB_UNIFORM, 100, 0, 15000, 5},
		{100000, 1, DATA_UNIFORM, 1, LAB_SKEWED, 90, 0, 0, 0},	/* two launches */
	};
	const size_t nfixed = sizeof(fixed) / sizeof(fixed[0]);
	size_t		nf;
	int			nrandom;
	double		work;
	int64_t		rmax;

	quick = q ? atoi(q) : 0;
	rs = seed;
	gc_cuda_probe(0, &info);
	if (!info.usable)
	{
		printf("test_silhouette_gpu: no usable GPU: %s\n", info.reason);
		return 1;
	}
	printf("test_silhouette_gpu: seed %llu (GPUCLUST_TEST_SEED to repeat), %s, quick %d\n",
		   (unsigned long long) seed, info.name, quick);

	test_errors();
	if (quick >= 2)
	{
		nf = 4;
		nrandom = 4;
		work = 3e5;
		rmax = 300;
	}
	else if (quick)
	{
		nf = 12;
		nrandom = 24;
		work = 2e7;
		rmax = 2000;
	}
	else
	{
		nf = nfixed;
		nrandom = 240;
		work = 2e9;
		rmax = 30000;
	}
	for (size_t i = 0; i < nf; i++)
		run_case(&fixed[i], (double) fixed[i].n * fixed[i].n * fixed[i].d <= 3e7);
	for (int i = 0; i < nrandom; i++)
	{
		sil_case	c;

		random_case(&c, work, rmax);
		run_case(&c, (double) c.n * c.n * c.d <= 3e7);
	}
	if (!quick)
		test_cancel_running();
	printf("test_silhouette_gpu: %d cases (%d errors, %d sampled, %d against the reference); CPU %.1f s, GPU %.1f s\n",
		   n_cases, n_errors, n_sampled, n_brute, cpu_s, gpu_s);
	return test_summary("test_silhouette_gpu");
}
