/*
 * test_ap_gpu.c — the GPU affinity propagation (cuda/affinity/affinity.cu) against
 * the CPU's (src/core/affinity/affinity_cpu.c) and a sequential reference, on fresh
 * random data of many shapes.  Needs a GPU.
 *
 *   float8   gc_ap_on_gpu equals gc_ap_cpu on everything: labels, exemplars,
 *            clusters, iterations, convergence, the early answer and the
 *            preference (the median), bit for bit; blobs, uniform, grid
 *            (many equal distances) and duplicate rows; n 1 to 2000, d 1
 *            to 300 (n < d too); given and median preferences; damping
 *            0.5 to 0.95; runs stopped by max_iter; all rows equal.
 *   float4   gc_ap_on_gpu equals ref_ap (below) with float storage, bit for
 *            bit.  Against float8, each case is one of: the same labels;
 *            a tie in S (float cannot tell some of the data's similarities
 *            apart, nor keep double's tie-breaking noise: the float8
 *            messages on float-rounded S, with float's noise, already give
 *            another answer); a tie in the messages (the float8 run's final
 *            exemplar test or assignment is decided by a margin within
 *            float's resolution at the largest magnitude the messages
 *            carry, max(|S|, |preference|)); a preference float cannot hold
 *            beside the similarities (|preference| x FLT_EPSILON at least
 *            the smallest |S|: the diagonal's rounding swamps them); or
 *            unexplained, a failure.
 *   errors   bad parameters (GC_EINVAL), the cancel flag (GC_ECANCEL), n 0.
 *   multi    S, R and A split by rows over 2 and 3 GPUs (GPUs 0 and 1, the
 *            third part on GPU 0 again; all on GPU 0 with one GPU): every
 *            result equals the CPU's in float8 and one GPU's in float4, bit
 *            for bit, from n = 1 (fewer rows than GPUs) up, with the column
 *            sums' chain cut in several chunks (n above 256), and a cancel.
 *            `test_ap_gpu multi` runs this suite alone.
 * The cases cycle the row pass's settings (set_row_pass): the shared
 * memory it keeps its row in (all, none, a few columns), so both of its
 * sweep 2's sources are checked, and the bytes of its next row it
 * prefetches.
 *
 * ref_ap is the driver's rule written out sequentially, each stored value
 * passed through the storage's rounding: mode 8 (double), 4 (float) and
 * S4 (S float, messages double).
 *
 * GPUCLUST_TEST_SEED fixes the data; GPUCLUST_TEST_QUICK=1 runs a smaller
 * set (for compute-sanitizer), =2 a tiny one (for racecheck).
 */
#include <float.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "common/gpu.h"
#include "common/rng.h"
#include "multi_gpus.h"

static uint64_t rs;
static int	quick;

typedef enum
{
	REF_F8,						/* S, R, A double */
	REF_F4,						/* S, R, A float */
	REF_S4						/* S float, R and A double */
} ref_mode;

typedef struct fit
{
	int32_t    *labels;
	uint8_t    *ex;
	gc_ap_result r;
	gc_code		rc;
	/* ref_ap only: the final decisions' smallest margins, and max |S[i][j]|, i != j */
	double		margin_exemplar;
	double		margin_assign;
	double		smax;
	double		smin;			/* min nonzero |S[i][j]|, i != j */
} fit;

static void
fit_alloc(fit *f, int64_t n)
{
	memset(f, 0, sizeof(*f));
	f->labels = malloc(sizeof(int32_t) * (size_t) (n > 0 ? n : 1));
	f->ex = malloc((size_t) (n > 0 ? n : 1));
	/* poisoned: every output must be written */
	memset(f->labels, 0x5a, sizeof(int32_t) * (size_t) (n > 0 ? n : 1));
	memset(f->ex, 0x5a, (size_t) (n > 0 ? n : 1));
	f->r.labels = f->labels;
	f->r.is_exemplar = f->ex;
}

static void
fit_free(fit *f)
{
	free(f->labels);
	free(f->ex);
}

static double
st_r(ref_mode m, double x)
{
	return m == REF_F4 ? (double) (float) x : x;
}

static double
st_s(ref_mode m, double x)
{
	return m == REF_F8 ? x : (double) (float) x;
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return x < y ? -1 : x > y;
}

static int64_t
argmax_cols(const double *S, int64_t n, int64_t i, const int32_t *I, int64_t K,
			double *margin)
{
	int64_t		best = 0;
	double		second = -INFINITY;

	for (int64_t k = 1; k < K; k++)
		if (S[i * n + I[k]] > S[i * n + I[best]])
		{
			second = S[i * n + I[best]];
			best = k;
		}
		else if (S[i * n + I[k]] > second)
			second = S[i * n + I[k]];
	if (margin != NULL && K > 1 && S[i * n + I[best]] - second < *margin)
		*margin = S[i * n + I[best]] - second;
	return best;
}

/* The driver's rule (affinity.c), sequentially, in storage mode m. */
static void
ref_ap(const float *X, int64_t n, int d, const gc_ap_params *p, ref_mode m,
	   fit *o)
{
	const int64_t nn = n * n;
	const double dmp = p->damping,
				omd = 1.0 - p->damping;
	const double eps = m == REF_F8 ? DBL_EPSILON : (double) FLT_EPSILON;
	const double tiny = m == REF_F8 ? DBL_MIN : (double) FLT_MIN;
	double	   *S = malloc(sizeof(double) * nn),
			   *R = calloc(nn, sizeof(double)),
			   *A = calloc(nn, sizeof(double)),
			   *cs = malloc(sizeof(double) * n),
			   *m1 = malloc(sizeof(double) * n),
			   *m2 = malloc(sizeof(double) * n);
	uint8_t    *E = calloc(n, 1),
			   *Ep = calloc(n, 1);
	double		pref,
				smax = 0,
				smin = INFINITY;
	int			run = 0,
				it;

	o->rc = GC_OK;
	memset(&o->r, 0, sizeof(o->r));
	o->r.labels = o->labels;
	o->r.is_exemplar = o->ex;
	o->r.converged = true;
	o->margin_exemplar = o->margin_assign = INFINITY;
	for (int64_t i = 0; i < n; i++)
		for (int64_t j = 0; j < n; j++)
		{
			double		s = 0.0;

			for (int k = 0; k < d; k++)
			{
				double		t = (double) X[i * d + k] - (double) X[j * d + k];

				s += t * t;
			}
			S[i * n + j] = st_s(m, -s);
			if (i != j && fabs(S[i * n + j]) > smax)
				smax = fabs(S[i * n + j]);
			if (i != j && S[i * n + j] != 0 && fabs(S[i * n + j]) < smin)
				smin = fabs(S[i * n + j]);
		}
	if (p->has_preference)
		pref = p->preference;
	else
	{
		double	   *tmp = malloc(sizeof(double) * nn);

		for (int64_t x = 0; x < nn; x++)
			tmp[x] = x % (n + 1) == 0 ? 0.0 : S[x];
		qsort(tmp, nn, sizeof(double), cmp_double);
		pref = nn % 2 ? tmp[(nn - 1) / 2] : (tmp[nn / 2 - 1] + tmp[nn / 2]) / 2.0;
		free(tmp);
	}
	o->r.preference = pref;
	{
		bool		eq = true;

		for (int64_t x = 0; x < nn && eq && n > 1; x++)
			if (x % (n + 1) != 0 && S[x] != S[1])
				eq = false;
		if (eq)
		{
			o->r.equal_similarities = true;
			for (int64_t i = 0; i < n; i++)
			{
				bool		all = pref >= (n == 1 ? 0.0 : S[n - 1]);

				o->labels[i] = all ? (int32_t) i : 0;
				o->ex[i] = all || i == 0;
			}
			o->r.n_clusters = pref >= (n == 1 ? 0.0 : S[n - 1]) ? n : 1;
			goto out;
		}
	}
	for (int64_t i = 0; i < n; i++)
		S[i * n + i] = st_s(m, pref);
	for (int64_t x = 0; x < nn; x++)
	{
		double		z = (2.0 * gc_rng_uniform(0, 0x4150, (uint64_t) x) - 1.0) * sqrt(3.0);
		double		t = eps * S[x] + tiny * 100;

		t = t * z;
		S[x] = st_s(m, S[x] + t);
	}

	/* R from A = 0 */
	for (int64_t i = 0; i < n; i++)
	{
		m1[i] = m2[i] = -INFINITY;
		for (int64_t j = 0; j < n; j++)
		{
			double		v = 0.0 + S[i * n + j],
						lo = v < m1[i] ? v : m1[i];

			m1[i] = v > m1[i] ? v : m1[i];
			m2[i] = lo > m2[i] ? lo : m2[i];
		}
		for (int64_t j = 0; j < n; j++)
		{
			double		v = 0.0 + S[i * n + j];
			double		y = v == m1[i] ? m2[i] : m1[i];

			R[i * n + j] = st_r(m, R[i * n + j] * dmp + (S[i * n + j] - y) * omd);
		}
	}
	o->r.converged = false;
	for (it = 0; it < p->max_iter; it++)
	{
		int64_t		K = 0;
		bool		changed = false;

		for (int64_t j = 0; j < n; j++)
			cs[j] = 0.0;
		for (int64_t i = 0; i < n; i++)
			for (int64_t j = 0; j < n; j++)
			{
				double		r = R[i * n + j];

				cs[j] += i == j ? r : (r > 0.0 ? r : 0.0);
			}
		for (int64_t i = 0; i < n; i++)
		{
			double		a1 = -INFINITY,
						a2 = -INFINITY;

			for (int64_t j = 0; j < n; j++)
			{
				double		r = R[i * n + j],
							t,
							a,
							v,
							lo;

				if (i != j)
				{
					t = (r > 0.0 ? r : 0.0) - cs[j];
					t = t > 0.0 ? t : 0.0;
				}
				else
					t = r - cs[j];
				a = st_r(m, A[i * n + j] * dmp - t * omd);
				A[i * n + j] = a;
				v = a + S[i * n + j];
				lo = v < a1 ? v : a1;
				a1 = v > a1 ? v : a1;
				a2 = lo > a2 ? lo : a2;
			}
			E[i] = (A[i * n + i] + R[i * n + i]) > 0.0;
			if (fabs(A[i * n + i] + R[i * n + i]) < o->margin_exemplar)
				o->margin_exemplar = fabs(A[i * n + i] + R[i * n + i]);
			K += E[i];
			changed |= E[i] != Ep[i];
			if (it + 1 < p->max_iter)
				for (int64_t j = 0; j < n; j++)
				{
					double		v = A[i * n + j] + S[i * n + j];
					double		y = v == a1 ? a2 : a1;

					R[i * n + j] = st_r(m, R[i * n + j] * dmp + (S[i * n + j] - y) * omd);
				}
		}
		memcpy(Ep, E, n);
		run = (it == 0 || changed) ? 1 : run + 1;
		if (it >= p->convergence_iter && run >= p->convergence_iter && K > 0)
		{
			o->r.converged = true;
			break;
		}
		if (it + 1 < p->max_iter)
			o->margin_exemplar = INFINITY;	/* the last iteration's only */
	}
	o->r.iterations = it < p->max_iter ? it + 1 : p->max_iter;

	/* labelling (affinity.c's steps, sequentially) */
	{
		int64_t		K = 0;
		int32_t    *I = malloc(sizeof(int32_t) * n);
		int64_t    *c = malloc(sizeof(int64_t) * n);

		for (int64_t i = 0; i < n; i++)
			if (E[i])
				I[K++] = (int32_t) i;
		o->r.n_clusters = K;
		memset(o->ex, 0, n);
		if (K == 0)
			for (int64_t i = 0; i < n; i++)
				o->labels[i] = GC_NOISE;
		else
		{
			for (int64_t i = 0; i < n; i++)
				c[i] = argmax_cols(S, n, i, I, K, &o->margin_assign);
			for (int64_t k = 0; k < K; k++)
				c[I[k]] = k;
			for (int64_t k = 0; k < K; k++)
			{
				int64_t		bj = -1;
				double		bs = 0;

				for (int64_t q = 0; q < n; q++)
				{
					double		s = 0;
					bool		first = true;

					if (c[q] != k)
						continue;
					for (int64_t mm = 0; mm < n; mm++)
						if (c[mm] == k)
						{
							s = first ? S[mm * n + q] : s + S[mm * n + q];
							first = false;
						}
					if (bj < 0 || s > bs)
					{
						bj = q;
						bs = s;
					}
				}
				I[k] = (int32_t) bj;
			}
			for (int64_t i = 0; i < n; i++)
				c[i] = argmax_cols(S, n, i, I, K, &o->margin_assign);
			for (int64_t k = 0; k < K; k++)
				c[I[k]] = k;
			for (int64_t k = 0; k < K; k++)
				o->ex[I[k]] = 1;
			for (int64_t i = 0; i < n; i++)
			{
				int32_t		r = 0;

				for (int64_t k = 0; k < K; k++)
					r += I[k] < I[c[i]];
				o->labels[i] = r;
			}
		}
		free(I);
		free(c);
	}
out:
	o->smax = smax;
	o->smin = smin;
	free(S);
	free(R);
	free(A);
	free(cs);
	free(m1);
	free(m2);
	free(E);
	free(Ep);
}

static int
same_fit(const fit *a, const fit *b, int64_t n, char *why, size_t len)
{
	int64_t		bad = -1;

	for (int64_t i = 0; i < n && bad < 0; i++)
		if (a->labels[i] != b->labels[i] || a->ex[i] != b->ex[i])
			bad = i;
	if (bad >= 0)
		snprintf(why, len, "row %lld: label %d/%d exemplar %d/%d",
				 (long long) bad, a->labels[bad], b->labels[bad], a->ex[bad], b->ex[bad]);
	else if (a->r.n_clusters != b->r.n_clusters ||
			 a->r.iterations != b->r.iterations ||
			 a->r.converged != b->r.converged ||
			 a->r.equal_similarities != b->r.equal_similarities ||
			 !(a->r.preference == b->r.preference ||
			   (isnan(a->r.preference) && isnan(b->r.preference))))
		snprintf(why, len, "clusters %lld/%lld iterations %d/%d converged %d/%d equal %d/%d preference %.17g/%.17g",
				 (long long) a->r.n_clusters, (long long) b->r.n_clusters,
				 a->r.iterations, b->r.iterations, a->r.converged, b->r.converged,
				 a->r.equal_similarities, b->r.equal_similarities,
				 a->r.preference, b->r.preference);
	else
		return 1;
	return 0;
}

/* the same partition and exemplars (iterations may differ) */
static int
same_labels(const fit *a, const fit *b, int64_t n)
{
	return memcmp(a->labels, b->labels, sizeof(int32_t) * (size_t) n) == 0 &&
		memcmp(a->ex, b->ex, (size_t) n) == 0;
}

static const char *kind_name[] = {"uniform", "blobs", "duplicates", "grid"};

typedef struct ap_case
{
	int64_t		n;
	int			d;
	data_kind	kind;
	int			nb;
	double		damping;
	int			has_pref;		/* 0: median, 1: the median x 3, 2: -1e9 (few), 3: 0 (many) */
	int			max_iter;
	int			conv;
} ap_case;

/*
 * The row pass's settings, cycled over the cases: the shared memory
 * (bytes) it keeps its row's columns in (gc_ap_gpu_set_row_keep) and the
 * bytes of its next row it prefetches (gc_ap_gpu_set_row_prefetch).  The
 * default (all that fits: the whole row at these sizes; prefetched), none
 * kept (sweep 2 re-reads every column) with 32 KB prefetched, and 600
 * bytes kept (37 double or 75 float columns: the rest re-read) with 40
 * bytes prefetched (32 once rounded down).
 */
static const long keeps[] = {-1, 0, 600};
static const long prefetches[] = {-1, 32768, 40};
static long keep_bytes = -1,
			prefetch_bytes = -1;

/* the row pass's settings, the k-th of keeps[] and prefetches[] */
static void
set_row_pass(int k)
{
	gc_ap_gpu_set_row_keep(keep_bytes = keeps[k]);
	gc_ap_gpu_set_row_prefetch(prefetch_bytes = prefetches[k]);
}

static int	f4_same,
			f4_tie_s,
			f4_tie_msg,
			f4_pref,
			f4_unexplained;

/*
 * Case c's parameters over X, in float8: the preference given, or three
 * times the median (from a CPU run that stops at once), or the median.
 */
static gc_ap_params
case_params(const ap_case *c, const float *X)
{
	gc_ap_params p = {c->damping, false, 0.0, c->max_iter, c->conv, GC_AP_FLOAT8};

	if (c->has_pref == 2)
		p.has_preference = true, p.preference = -1e9;
	else if (c->has_pref == 3)
		p.has_preference = true, p.preference = 0.0;
	else if (c->has_pref == 1)
	{
		gc_ap_params q = p;
		gc_status	st;
		fit			f;

		fit_alloc(&f, c->n);
		q.max_iter = 1;
		(void) gc_ap_cpu(NULL, X, c->n, c->d, &q, &f.r, &st);
		p.has_preference = true;
		p.preference = 3 * f.r.preference;
		fit_free(&f);
	}
	return p;
}

static void
run_case(const ap_case *c, bool f4)
{
	float	   *X = tu_make_data(&rs, c->n, c->d, c->kind, c->nb);
	gc_ap_params p = case_params(c, X);
	fit			cpu,
				gpu;
	gc_status	st;
	char		why[256],
				name[200];

	snprintf(name, sizeof(name), "n %lld d %d %s/%d damping %.2f pref %d max_iter %d conv %d keep %ld prefetch %ld",
			 (long long) c->n, c->d, kind_name[c->kind], c->nb, c->damping,
			 c->has_pref, c->max_iter, c->conv, keep_bytes, prefetch_bytes);
	fit_alloc(&cpu, c->n);
	fit_alloc(&gpu, c->n);
	cpu.rc = gc_ap_cpu(NULL, X, c->n, c->d, &p, &cpu.r, &st);
	CHECK(cpu.rc == GC_OK, "%s: CPU failed: %s", name, st.message);
	gpu.rc = gc_ap_on_gpu(NULL, X, c->n, c->d, &p, &gpu.r, &st);
	CHECK(gpu.rc == GC_OK, "%s: GPU failed: %s", name, st.message);
	if (cpu.rc == GC_OK && gpu.rc == GC_OK)
		CHECK(same_fit(&cpu, &gpu, c->n, why, sizeof(why)), "%s: float8 GPU != CPU: %s", name, why);

	if (f4)
	{
		fit			g4,
					r4,
					r8,
					s4;

		fit_alloc(&g4, c->n);
		fit_alloc(&r4, c->n);
		fit_alloc(&r8, c->n);
		fit_alloc(&s4, c->n);
		p.precision = GC_AP_FLOAT4;
		g4.rc = gc_ap_on_gpu(NULL, X, c->n, c->d, &p, &g4.r, &st);
		CHECK(g4.rc == GC_OK, "%s: float4 GPU failed: %s", name, st.message);
		p.precision = GC_AP_FLOAT8;
		ref_ap(X, c->n, c->d, &p, REF_F4, &r4);
		if (g4.rc == GC_OK)
			CHECK(same_fit(&g4, &r4, c->n, why, sizeof(why)), "%s: float4 GPU != reference: %s", name, why);
		ref_ap(X, c->n, c->d, &p, REF_F8, &r8);
		CHECK(same_fit(&r8, &cpu, c->n, why, sizeof(why)), "%s: the float8 reference != CPU: %s", name, why);
		if (same_labels(&r4, &r8, c->n))
			f4_same++;
		else
		{
			const char *cls;
			/* float's resolution at the largest magnitude the messages carry */
			double		res = FLT_EPSILON * fmax(r8.smax, fabs(r8.r.preference));

			ref_ap(X, c->n, c->d, &p, REF_S4, &s4);
			if (!same_labels(&s4, &r8, c->n))
			{
				cls = "a tie in S";
				f4_tie_s++;
			}
			else if (fmin(r8.margin_exemplar, r8.margin_assign) <= res)
			{
				cls = "a tie in the messages";
				f4_tie_msg++;
			}
			else if (FLT_EPSILON * fabs(r8.r.preference) >= r8.smin)
			{
				/* the diagonal's rounding is coarser than some similarity */
				cls = "a preference float cannot hold beside the similarities";
				f4_pref++;
			}
			else
			{
				cls = "unexplained";
				f4_unexplained++;
			}
			printf("  float4 != float8 on %s: %s (float8's smallest margins %.3g, %.3g; float's resolution there %.3g; clusters %lld / %lld)\n",
				   name, cls, r8.margin_exemplar, r8.margin_assign, res,
				   (long long) r4.r.n_clusters, (long long) r8.r.n_clusters);
			CHECK(strcmp(cls, "unexplained") != 0,
				  "%s: float4 differs from float8, and no tie explains it", name);
		}
		fit_free(&g4);
		fit_free(&r4);
		fit_free(&r8);
		fit_free(&s4);
	}
	fit_free(&cpu);
	fit_free(&gpu);
	free(X);
}

/* the cases: n, d, kind, blobs, damping, pref, max_iter, convergence_iter */
static const ap_case small_cases[] = {
	{1, 2, DATA_BLOBS, 1, 0.5, 0, 200, 15},
	{2, 2, DATA_BLOBS, 2, 0.5, 0, 200, 15},
	{3, 1, DATA_UNIFORM, 1, 0.5, 0, 200, 15},
	{5, 3, DATA_DUPLICATES, 1, 0.5, 0, 200, 15},	/* all equal */
	{17, 2, DATA_BLOBS, 3, 0.5, 0, 200, 15},
	{64, 4, DATA_GRID, 4, 0.7, 0, 200, 15},
	{100, 300, DATA_BLOBS, 4, 0.5, 0, 200, 15},	/* n < d */
	{200, 2, DATA_BLOBS, 5, 0.9, 1, 200, 15},
	{200, 8, DATA_DUPLICATES, 6, 0.5, 0, 200, 15},
	{150, 3, DATA_UNIFORM, 1, 0.5, 2, 200, 15},
	{150, 3, DATA_UNIFORM, 1, 0.5, 3, 200, 15},
	{300, 5, DATA_BLOBS, 8, 0.5, 0, 7, 15},		/* stopped by max_iter */
	{333, 16, DATA_BLOBS, 6, 0.95, 0, 300, 20},
	{513, 2, DATA_UNIFORM, 1, 0.6, 0, 200, 15},
};
static const ap_case large_cases[] = {
	{700, 33, DATA_BLOBS, 10, 0.5, 0, 200, 15},
	{1025, 2, DATA_GRID, 1, 0.8, 0, 200, 15},
	{1500, 8, DATA_BLOBS, 12, 0.9, 0, 200, 15},
	{2000, 3, DATA_UNIFORM, 1, 0.5, 1, 100, 10},
};

/* ---- S, R and A split by rows over several GPUs ---- */

/* The GPUs the multi suite splits over: 0 and 1 when there are two, else
 * 0 throughout; the third part on GPU 0. */
static int	multi_gpus[3];
static int	multi_cases;

/*
 * The call split over ngpus of multi_gpus: float8 against the CPU, float4
 * against one GPU, every result bit for bit.
 */
static void
multi_case(const ap_case *c, int ngpus, bool f4)
{
	float	   *X = tu_make_data(&rs, c->n, c->d, c->kind, c->nb);
	gc_ap_params p = case_params(c, X);
	gc_ctx		ctx = {.n_gpus = ngpus, .gpus = multi_gpus};
	gc_ap_gpu_phases ph;
	fit			one,
				split;
	gc_status	st;
	char		why[256],
				name[200];
	const int	want = (int) (c->n < ngpus ? c->n : ngpus);

	snprintf(name, sizeof(name), "multi n %lld d %d %s damping %.2f pref %d max_iter %d on %d GPUs",
			 (long long) c->n, c->d, kind_name[c->kind], c->damping, c->has_pref, c->max_iter, ngpus);
	for (int prec = 0; prec < (f4 ? 2 : 1); prec++)
	{
		p.precision = prec ? GC_AP_FLOAT4 : GC_AP_FLOAT8;
		fit_alloc(&one, c->n);
		fit_alloc(&split, c->n);
		one.rc = prec ? gc_ap_on_gpu(NULL, X, c->n, c->d, &p, &one.r, &st) :
			gc_ap_cpu(NULL, X, c->n, c->d, &p, &one.r, &st);
		CHECK(one.rc == GC_OK, "%s: %s failed: %s", name, prec ? "one GPU" : "CPU", st.message);
		split.rc = gc_ap_on_gpu(&ctx, X, c->n, c->d, &p, &split.r, &st);
		CHECK(split.rc == GC_OK, "%s %s: failed: %s", name, gc_ap_precision_name(p.precision), st.message);
		gc_ap_gpu_last_phases(&ph);
		if (one.rc == GC_OK && split.rc == GC_OK)
		{
			bool		same = same_fit(&one, &split, c->n, why, sizeof(why));

			CHECK(same, "%s %s: split != %s: %s", name, gc_ap_precision_name(p.precision),
				  prec ? "one GPU" : "CPU", why);
			CHECK(split.r.equal_similarities || ph.gpus == want,
				  "%s: ran on %d GPUs, want %d", name, ph.gpus, want);
			if (multi_cases++ % 8 == 0 || !same)
				printf("  %s %s: %s, %lld clusters, %d iterations, on %d GPUs\n", name,
					   gc_ap_precision_name(p.precision), same ? "equal" : "DIFFERENT",
					   (long long) split.r.n_clusters, split.r.iterations, ph.gpus);
		}
		fit_free(&one);
		fit_free(&split);
	}
	free(X);
}

static void
test_multi_suite(void)
{
	/* beyond the cases: the column sums' chain in four chunks of columns */
	static const ap_case wide = {4099, 3, DATA_BLOBS, 20, 0.5, 0, 100, 10};
	const size_t nsmall = quick >= 2 ? 6 : quick ? 12 : sizeof(small_cases) / sizeof(small_cases[0]);

	tu_multi_gpus(multi_gpus, "parts");
	for (size_t i = 0; i < nsmall; i++)
	{
		set_row_pass((int) (i % 3));
		multi_case(&small_cases[i], 2, true);
		multi_case(&small_cases[i], 3, small_cases[i].n <= 300);
	}
	for (size_t i = 0; i < sizeof(large_cases) / sizeof(large_cases[0]) && !quick; i++)
	{
		set_row_pass((int) (i % 3));
		multi_case(&large_cases[i], 2, large_cases[i].n <= 1100);
		multi_case(&large_cases[i], 3, false);
	}
	if (!quick)
		multi_case(&wide, 2, true);
	set_row_pass(0);
	/* a cancel seen on every GPU's part */
	{
		float	   *X = tu_make_data(&rs, 300, 2, DATA_BLOBS, 4);
		gc_ap_params p = {0.5, false, 0, 200, 15, GC_AP_FLOAT4};
		volatile sig_atomic_t flag = 1;
		gc_ctx		ctx = {.n_gpus = 2, .gpus = multi_gpus};
		gc_status	st;
		fit			f;

		fit_alloc(&f, 300);
		ctx.cancel_flags[0] = &flag;
		CHECK(gc_ap_on_gpu(&ctx, X, 300, 2, &p, &f.r, &st) == GC_ECANCEL,
			  "multi: the cancel flag ignored");
		fit_free(&f);
		free(X);
	}
	/* the memory of each GPU's part */
	{
		size_t		one = gc_ap_gpu_mem_bytes(20000, 8, GC_AP_FLOAT4),
					two = gc_ap_gpu_split_mem_bytes(20000, 8, GC_AP_FLOAT4, 2);
		int64_t		m = gc_ap_gpu_split_max_rows(two, 8, GC_AP_FLOAT4, 2);

		CHECK(gc_ap_gpu_split_mem_bytes(20000, 8, GC_AP_FLOAT4, 1) == one,
			  "split over one GPU != gc_ap_gpu_mem_bytes");
		CHECK(two < one / 2 + one / 64 && two > one / 2 - one / 64,
			  "two GPUs' parts hold about half the matrices each: %zu of %zu", two, one);
		CHECK(m == 20000, "gc_ap_gpu_split_max_rows(split_mem_bytes(20000), 2) = %lld", (long long) m);
	}
	printf("  multi: %d calls\n", multi_cases);
}

static void
test_errors(void)
{
	float		X[6] = {0, 0, 1, 1, 5, 5};
	gc_ap_params p = {0.5, false, 0, 200, 15, GC_AP_FLOAT8};
	fit			f;
	gc_status	st;
	volatile sig_atomic_t flag = 1;
	gc_ctx		ctx;

	fit_alloc(&f, 3);
	p.damping = 1.0;
	CHECK(gc_ap_on_gpu(NULL, X, 3, 2, &p, &f.r, &st) == GC_EINVAL, "damping 1 accepted");
	p.damping = 0.5;
	p.max_iter = 0;
	CHECK(gc_ap_on_gpu(NULL, X, 3, 2, &p, &f.r, &st) == GC_EINVAL, "max_iter 0 accepted");
	p.max_iter = 200;
	p.precision = (gc_ap_precision) 9;
	CHECK(gc_ap_on_gpu(NULL, X, 3, 2, &p, &f.r, &st) == GC_EINVAL, "precision 9 accepted");
	p.precision = GC_AP_FLOAT4;
	CHECK(gc_ap_on_gpu(NULL, X, 0, 2, &p, &f.r, &st) == GC_OK && f.r.n_clusters == 0, "n 0");
	memset(&ctx, 0, sizeof(ctx));
	ctx.cancel_flags[0] = &flag;
	CHECK(gc_ap_on_gpu(&ctx, X, 3, 2, &p, &f.r, &st) == GC_ECANCEL, "cancel flag ignored");
	fit_free(&f);
	/* the memory bound grows as n^2 and fits its own largest n */
	{
		size_t		b = gc_ap_gpu_mem_bytes(20000, 8, GC_AP_FLOAT4);
		int64_t		m = gc_ap_gpu_max_rows(b, 8, GC_AP_FLOAT4);

		CHECK(m == 20000, "gc_ap_gpu_max_rows(mem_bytes(20000)) = %lld", (long long) m);
		CHECK(gc_ap_gpu_mem_bytes(20000, 8, GC_AP_FLOAT8) > 2 * b - (b >> 4),
			  "float8 needs about twice float4's memory");
	}
}

int
main(int argc, char **argv)
{
	uint64_t	seed = tu_seed();
	const char *q = getenv("GPUCLUST_TEST_QUICK");
	gc_cuda_device_info info;

	quick = q ? atoi(q) : 0;
	rs = seed;
	gc_cuda_probe(0, &info);
	if (!info.usable)
	{
		printf("test_ap_gpu: no usable GPU: %s\n", info.reason);
		return 1;
	}
	printf("test_ap_gpu: seed %llu (GPUCLUST_TEST_SEED to repeat), %s, quick %d\n",
		   (unsigned long long) seed, info.name, quick);
	{
		static const tu_suite suites[] = {{"multi", test_multi_suite}};
		int			named = tu_named_suites(argc, argv, suites, 1);

		if (named < 0)
			return 2;
		if (named)
			return test_summary("test_ap_gpu");
	}

	test_errors();
	{
		int			reps = quick >= 2 ? 1 : quick ? 1 : 3;
		size_t		nsmall = quick >= 2 ? 6 : sizeof(small_cases) / sizeof(small_cases[0]);

		for (int r = 0; r < reps; r++)
		{
			for (size_t i = 0; i < nsmall; i++)
			{
				set_row_pass((int) ((i + r) % 3));
				run_case(&small_cases[i], small_cases[i].n <= 600);
			}
			if (!quick)
				for (size_t i = 0; i < sizeof(large_cases) / sizeof(large_cases[0]); i++)
				{
					set_row_pass((int) ((i + r) % 3));
					run_case(&large_cases[i], large_cases[i].n <= 1100 && r == 0);
				}
		}
		set_row_pass(0);
	}
	test_multi_suite();
	printf("test_ap_gpu: float4 against float8: %d the same, %d a tie in S, %d a tie in the messages, %d a preference beyond float's range, %d unexplained\n",
		   f4_same, f4_tie_s, f4_tie_msg, f4_pref, f4_unexplained);
	return test_summary("test_ap_gpu");
}
