/*
 * test_affinity.c — CPU affinity propagation against a literal, sequential
 * transcription of scikit-learn 1.2's _affinity_propagation (with the
 * core's tie-breaking noise in place of numpy's) on fresh random data
 * (replay a run with GPUCLUST_TEST_SEED=<seed>).
 *
 * The core evaluates the same floating point operations in the same order
 * as the reference, so everything must match exactly: preference, labels,
 * exemplars, iteration count and convergence, whatever the thread count.
 */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

#include "gpuclust_core.h"
#include "common/rng.h"
#include "testutil.h"

static uint64_t rs;				/* test data generator state */

static float *
make_data(int64_t n, int d, data_kind kind, int nb)
{
	return tu_make_data(&rs, n, d, kind, nb);
}

/* ---- the reference: scikit-learn's loop, literally, sequentially ---- */

typedef struct ref_out
{
	int32_t    *labels;
	uint8_t    *is_exemplar;
	int64_t		n_clusters;
	int			iterations;
	bool		converged;
	bool		equal_similarities;
	double		preference;
} ref_out;

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return x < y ? -1 : x > y;
}

/* np.argmax over k of S[i, I[k]] */
static int64_t
ref_argmax_cols(const double *S, int64_t n, int64_t i, const int64_t *I, int64_t K)
{
	int64_t		best = 0;

	for (int64_t k = 1; k < K; k++)
		if (S[i * n + I[k]] > S[i * n + I[best]])
			best = k;
	return best;
}

static void
ref_ap(const float *X, int64_t n, int d, const gc_ap_params *p, ref_out *o)
{
	const int64_t nn = n * n;
	const int	ci = p->convergence_iter;
	double	   *S = malloc(sizeof(double) * nn);
	double	   *R = calloc(nn, sizeof(double));
	double	   *A = calloc(nn, sizeof(double));
	double	   *tmp = malloc(sizeof(double) * nn);
	double	   *Y = malloc(sizeof(double) * n),
			   *Y2 = malloc(sizeof(double) * n),
			   *colsum = malloc(sizeof(double) * n),
			   *dA = malloc(sizeof(double) * n);
	int64_t    *Iarg = malloc(sizeof(int64_t) * n);
	uint8_t    *E = calloc(n, 1);
	uint8_t    *e = calloc((size_t) n * ci, 1);
	double		pref;
	bool		never_converged = true;
	int			it;

	memset(o->is_exemplar, 0, n);
	o->converged = true;
	o->equal_similarities = false;
	o->iterations = 0;

	if (n < 1)
		goto out;
	/* S = -squared distances */
	for (int64_t i = 0; i < n; i++)
		for (int64_t j = 0; j < n; j++)
		{
			double		s = 0.0;

			for (int k = 0; k < d; k++)
			{
				double		t = (double) X[i * d + k] - (double) X[j * d + k];

				s += t * t;
			}
			S[i * n + j] = -s;
		}

	/* preference = np.median(S) */
	if (p->has_preference)
		pref = p->preference;
	else
	{
		memcpy(tmp, S, sizeof(double) * nn);
		qsort(tmp, nn, sizeof(double), cmp_double);
		pref = nn % 2 ? tmp[(nn - 1) / 2] : (tmp[nn / 2 - 1] + tmp[nn / 2]) / 2.0;
	}
	o->preference = pref;

	/* _equal_similarities_and_preferences */
	{
		bool		eq = true;

		for (int64_t i = 0; i < n && eq; i++)
			for (int64_t j = 0; j < n; j++)
				if (i != j && S[i * n + j] != S[1])
				{
					eq = false;
					break;
				}
		if (n == 1 || eq)
		{
			o->equal_similarities = true;
			if (pref >= S[n - 1])
			{
				for (int64_t i = 0; i < n; i++)
				{
					o->labels[i] = (int32_t) i;
					o->is_exemplar[i] = 1;
				}
				o->n_clusters = n;
			}
			else
			{
				for (int64_t i = 0; i < n; i++)
					o->labels[i] = 0;
				o->is_exemplar[0] = 1;
				o->n_clusters = 1;
			}
			goto out;
		}
	}

	for (int64_t i = 0; i < n; i++)
		S[i * n + i] = pref;

	/*
	 * S += (eps * S + tiny * 100) * z: scikit-learn's formula, with z from
	 * the core's generator (seed 0, stream 0x4150, counter i*n + j) mapped
	 * to uniform on [-sqrt 3, sqrt 3) instead of numpy's standard normal
	 */
	for (int64_t x = 0; x < nn; x++)
		tmp[x] = DBL_EPSILON * S[x] + DBL_MIN * 100;
	for (int64_t x = 0; x < nn; x++)
		tmp[x] *= (2.0 * gc_rng_uniform(0, 0x4150, (uint64_t) x) - 1.0) * sqrt(3.0);
	for (int64_t x = 0; x < nn; x++)
		S[x] += tmp[x];

	for (it = 0; it < p->max_iter; it++)
	{
		int64_t		K = 0;

		/* np.add(A, S, tmp); I = argmax; Y = max; tmp[ind, I] = -inf; Y2 = max */
		for (int64_t x = 0; x < nn; x++)
			tmp[x] = A[x] + S[x];
		for (int64_t i = 0; i < n; i++)
		{
			int64_t		b = 0;

			for (int64_t j = 1; j < n; j++)
				if (tmp[i * n + j] > tmp[i * n + b])
					b = j;
			Iarg[i] = b;
			Y[i] = tmp[i * n + b];
			tmp[i * n + b] = -INFINITY;
			Y2[i] = -INFINITY;
			for (int64_t j = 0; j < n; j++)
				if (tmp[i * n + j] > Y2[i])
					Y2[i] = tmp[i * n + j];
		}
		/* np.subtract(S, Y[:, None], tmp); tmp[ind, I] = S[ind, I] - Y2 */
		for (int64_t i = 0; i < n; i++)
			for (int64_t j = 0; j < n; j++)
				tmp[i * n + j] = S[i * n + j] - Y[i];
		for (int64_t i = 0; i < n; i++)
			tmp[i * n + Iarg[i]] = S[i * n + Iarg[i]] - Y2[i];
		/* damping */
		for (int64_t x = 0; x < nn; x++)
			tmp[x] *= 1 - p->damping;
		for (int64_t x = 0; x < nn; x++)
			R[x] *= p->damping;
		for (int64_t x = 0; x < nn; x++)
			R[x] += tmp[x];
		/* np.maximum(R, 0, tmp); tmp.flat[::n+1] = R.flat[::n+1] */
		for (int64_t x = 0; x < nn; x++)
			tmp[x] = R[x] > 0 ? R[x] : 0.0;
		for (int64_t i = 0; i < n; i++)
			tmp[i * n + i] = R[i * n + i];
		/* tmp -= np.sum(tmp, axis=0) */
		for (int64_t j = 0; j < n; j++)
			colsum[j] = tmp[j];
		for (int64_t i = 1; i < n; i++)
			for (int64_t j = 0; j < n; j++)
				colsum[j] += tmp[i * n + j];
		for (int64_t i = 0; i < n; i++)
			for (int64_t j = 0; j < n; j++)
				tmp[i * n + j] -= colsum[j];
		/* dA = diag; clip(0, inf); restore diag */
		for (int64_t i = 0; i < n; i++)
			dA[i] = tmp[i * n + i];
		for (int64_t x = 0; x < nn; x++)
			tmp[x] = tmp[x] < 0 ? 0.0 : tmp[x];
		for (int64_t i = 0; i < n; i++)
			tmp[i * n + i] = dA[i];
		/* damping */
		for (int64_t x = 0; x < nn; x++)
			tmp[x] *= 1 - p->damping;
		for (int64_t x = 0; x < nn; x++)
			A[x] *= p->damping;
		for (int64_t x = 0; x < nn; x++)
			A[x] -= tmp[x];
		/* convergence */
		for (int64_t i = 0; i < n; i++)
		{
			E[i] = (A[i * n + i] + R[i * n + i]) > 0;
			e[i * ci + it % ci] = E[i];
			K += E[i];
		}
		if (it >= ci)
		{
			int64_t		stable = 0;

			for (int64_t i = 0; i < n; i++)
			{
				int			se = 0;

				for (int c = 0; c < ci; c++)
					se += e[i * ci + c];
				stable += se == ci || se == 0;
			}
			if (stable == n && K > 0)
			{
				never_converged = false;
				break;
			}
		}
	}
	if (it == p->max_iter)
		it--;
	o->iterations = it + 1;
	o->converged = !never_converged;

	/* labelling */
	{
		int64_t		K = 0;
		int64_t    *I = malloc(sizeof(int64_t) * n);
		int64_t    *c = malloc(sizeof(int64_t) * n);
		int64_t    *lab = malloc(sizeof(int64_t) * n);

		for (int64_t i = 0; i < n; i++)
			if (E[i])
				I[K++] = i;
		o->n_clusters = K;
		if (K == 0)
		{
			for (int64_t i = 0; i < n; i++)
				o->labels[i] = -1;
		}
		else
		{
			for (int64_t i = 0; i < n; i++)
				c[i] = ref_argmax_cols(S, n, i, I, K);
			for (int64_t k = 0; k < K; k++)
				c[I[k]] = k;
			for (int64_t k = 0; k < K; k++)
			{
				/* ii = where(c == k); j = argmax(sum(S[ii][:, ii], axis=0)) */
				int64_t		bj = -1;
				double		bs = 0;

				for (int64_t q = 0; q < n; q++)
				{
					double		s = 0;
					bool		first = true;

					if (c[q] != k)
						continue;
					for (int64_t m = 0; m < n; m++)
						if (c[m] == k)
						{
							s = first ? S[m * n + q] : s + S[m * n + q];
							first = false;
						}
					if (bj < 0 || s > bs)
					{
						bj = q;
						bs = s;
					}
				}
				I[k] = bj;
			}
			for (int64_t i = 0; i < n; i++)
				c[i] = ref_argmax_cols(S, n, i, I, K);
			for (int64_t k = 0; k < K; k++)
				c[I[k]] = k;
			for (int64_t i = 0; i < n; i++)
				lab[i] = I[c[i]];
			/* np.unique + searchsorted */
			for (int64_t i = 0; i < n; i++)
			{
				int32_t		r = 0;

				for (int64_t k = 0; k < K; k++)
					r += I[k] < lab[i];
				o->labels[i] = r;
			}
			for (int64_t k = 0; k < K; k++)
				o->is_exemplar[I[k]] = 1;
		}
		free(I);
		free(c);
		free(lab);
	}

out:
	free(S);
	free(R);
	free(A);
	free(tmp);
	free(Y);
	free(Y2);
	free(colsum);
	free(dA);
	free(Iarg);
	free(E);
	free(e);
}

/* ---- helpers ---- */

typedef struct fit
{
	int32_t    *labels;
	uint8_t    *ex;
	gc_ap_result r;
} fit;

static gc_code
run_ap(const float *X, int64_t n, int d, const gc_ap_params *p, int threads,
	   fit *f, gc_status *st)
{
	gc_ctx		ctx = {.n_threads = threads, .cancel_flags = {NULL, NULL}};

	f->labels = malloc(sizeof(int32_t) * (n > 0 ? n : 1));
	f->ex = malloc(n > 0 ? n : 1);
	memset(&f->r, 0, sizeof(f->r));
	f->r.labels = f->labels;
	f->r.is_exemplar = f->ex;
	return gc_ap_cpu(&ctx, X, n, d, p, &f->r, st);
}

static void
free_fit(fit *f)
{
	free(f->labels);
	free(f->ex);
}

static bool
same_double(double a, double b)
{
	return a == b || (isnan(a) && isnan(b));
}

/* Does the core's fit equal the reference exactly?  Says what differs. */
static bool
matches(const fit *f, const ref_out *o, int64_t n, char *why, size_t len)
{
	int64_t		bad = -1;

	for (int64_t i = 0; i < n && bad < 0; i++)
		if (f->labels[i] != o->labels[i] || (f->ex[i] != 0) != (o->is_exemplar[i] != 0))
			bad = i;
	if (bad >= 0)
		snprintf(why, len, "row %lld: label %d / ref %d, exemplar %d / ref %d",
				 (long long) bad, f->labels[bad], o->labels[bad], f->ex[bad],
				 o->is_exemplar[bad]);
	else if (f->r.n_clusters != o->n_clusters)
		snprintf(why, len, "%lld clusters / ref %lld", (long long) f->r.n_clusters,
				 (long long) o->n_clusters);
	else if (f->r.iterations != o->iterations || f->r.converged != o->converged)
		snprintf(why, len, "%d iterations (converged %d) / ref %d (%d)",
				 f->r.iterations, f->r.converged, o->iterations, o->converged);
	else if (f->r.equal_similarities != o->equal_similarities)
		snprintf(why, len, "equal_similarities %d / ref %d",
				 f->r.equal_similarities, o->equal_similarities);
	else if (!same_double(f->r.preference, o->preference))
		snprintf(why, len, "preference %.17g / ref %.17g", f->r.preference, o->preference);
	else
		return true;
	return false;
}

static void
ref_alloc(ref_out *o, int64_t n)
{
	o->labels = malloc(sizeof(int32_t) * (n > 0 ? n : 1));
	o->is_exemplar = malloc(n > 0 ? n : 1);
}

static void
ref_free(ref_out *o)
{
	free(o->labels);
	free(o->is_exemplar);
}

/* Core (1, 2 and 3 threads) against the reference on one input. */
static bool
check_case(const char *what, const float *X, int64_t n, int d, const gc_ap_params *p,
		   ref_out *o_out)
{
	ref_out		o;
	bool		ok = true;
	static const int threads[] = {1, 2, 3};

	ref_alloc(&o, n);
	ref_ap(X, n, d, p, &o);
	for (int t = 0; t < 3; t++)
	{
		fit			f;
		gc_status	st = {0};
		gc_code		rc = run_ap(X, n, d, p, threads[t], &f, &st);
		char		why[200] = "";

		if (rc != GC_OK)
		{
			CHECK(rc == GC_OK, "%s, %d threads: rc %d (%s)", what, threads[t], rc, st.message);
			ok = false;
		}
		else if (!matches(&f, &o, n, why, sizeof(why)))
		{
			CHECK(false, "%s, %d threads: %s", what, threads[t], why);
			ok = false;
		}
		else
			CHECK(true, "match");
		free_fit(&f);
	}
	if (o_out)
		*o_out = o;
	else
		ref_free(&o);
	return ok;
}

/* ---- tests ---- */

static void
test_random(void)
{
	static const int64_t sizes[] = {1, 2, 3, 4, 5, 8, 17, 33, 64, 100, 151, 240};
	int			n_conv = 0,
				n_unconv = 0,
				n_noex = 0,
				n_equal = 0,
				n_cases = 0;

	for (int rep = 0; rep < 2; rep++)
		for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++)
			for (int kind = 0; kind < 4; kind++)
			{
				int64_t		n = sizes[si];
				int			d = 1 + (int) (tu_next(&rs) % 5);
				float	   *X = make_data(n, d, (data_kind) kind, 1 + (int) (tu_next(&rs) % 6));
				gc_ap_params p;
				ref_out		o;
				char		what[200];
				static const double damps[] = {0.5, 0.5, 0.7, 0.9, 0.95};
				static const int iters[] = {1, 2, 5, 30, 200, 200};
				static const int convs[] = {1, 3, 15, 15};

				p.damping = (tu_next(&rs) % 4) ? damps[tu_next(&rs) % 5]
					: 0.5 + 0.4999 * tu_uniform(&rs);
				p.max_iter = iters[tu_next(&rs) % 6];
				p.convergence_iter = convs[tu_next(&rs) % 4];
				p.precision = GC_AP_FLOAT8;
				p.has_preference = tu_next(&rs) % 3 == 0;
				p.preference = p.has_preference
					? -tu_uniform(&rs) * (kind == DATA_UNIFORM ? 50.0 : 20000.0)
					: 0.0;
				snprintf(what, sizeof(what),
						 "%s n=%lld d=%d damping=%.4f max_iter=%d conv_iter=%d pref=%s%g",
						 data_name[kind], (long long) n, d, p.damping, p.max_iter,
						 p.convergence_iter, p.has_preference ? "" : "median/",
						 p.preference);
				if (check_case(what, X, n, d, &p, &o))
				{
					n_cases++;
					n_conv += o.converged && !o.equal_similarities;
					n_unconv += !o.converged && o.n_clusters > 0;
					n_noex += o.n_clusters == 0;
					n_equal += o.equal_similarities;
				}
				ref_free(&o);
				free(X);
			}
	printf("  random: %d cases match: %d converged, %d not converged with exemplars, "
		   "%d without exemplars, %d equal-similarity\n",
		   n_cases, n_conv, n_unconv, n_noex, n_equal);
	CHECK(n_conv > 0 && n_unconv > 0 && n_equal > 0, "a category was not exercised");
}

/* Well-separated blobs: one exemplar per blob, the blobs as clusters. */
static void
test_blobs(void)
{
	const int	nb = 4,
				per = 40,
				d = 3;
	const int64_t n = nb * per;
	float	   *X = malloc(sizeof(float) * n * d);
	/* damping 0.9: with 0.5 the interleaved, equal blobs make the messages
	 * oscillate (scikit-learn too: 120-160 clusters, not converged) */
	gc_ap_params p = {0.9, false, 0.0, 200, 15, GC_AP_FLOAT8};
	ref_out		o;
	bool		same_part = true;

	/* blob b around (1000 b, ...), rows interleaved: row i in blob i % nb */
	for (int64_t i = 0; i < n; i++)
		for (int j = 0; j < d; j++)
			X[i * d + j] = (float) (1000.0 * (double) (i % nb) * (j + 1) + tu_uniform(&rs) * 10.0);
	check_case("well-separated blobs", X, n, d, &p, &o);
	CHECK(o.converged, "blobs did not converge");
	CHECK(o.n_clusters == nb, "blobs: %lld clusters, expected %d", (long long) o.n_clusters, nb);
	for (int64_t i = 0; i < n; i++)
		same_part &= o.labels[i] == o.labels[i % nb];
	CHECK(same_part, "blobs: clusters are not the blobs");
	/* numbered by exemplar position: blob of the lowest exemplar is 0 */
	{
		int64_t		first = -1;

		for (int64_t i = 0; i < n && first < 0; i++)
			if (o.is_exemplar[i])
				first = i;
		CHECK(first >= 0 && o.labels[first] == 0, "blobs: numbering");
	}
	ref_free(&o);
	free(X);
}

/* scikit-learn's own tests: non-convergence, equal similarities */
static void
test_sklearn_cases(void)
{
	/* test_affinity_propagation_fit_non_convergence: no exemplar at all */
	{
		float		X[] = {0, 0, 1, 1, -2, -2};
		gc_ap_params p = {0.5, true, -10.0, 1, 15, GC_AP_FLOAT8};
		fit			f;
		gc_status	st = {0};
		ref_out		o;

		check_case("non-convergence, max_iter 1", X, 3, 2, &p, &o);
		CHECK(run_ap(X, 3, 2, &p, 2, &f, &st) == GC_OK, "%s", st.message);
		CHECK(!f.r.converged && f.r.n_clusters == 0 && f.r.iterations == 1,
			  "converged %d, %lld clusters, %d iterations", f.r.converged,
			  (long long) f.r.n_clusters, f.r.iterations);
		CHECK(f.labels[0] == GC_NOISE && f.labels[1] == GC_NOISE && f.labels[2] == GC_NOISE &&
			  !f.ex[0] && !f.ex[1] && !f.ex[2], "rows are labelled");
		free_fit(&f);
		ref_free(&o);
	}
	/*
	 * test_affinity_propagation_non_convergence_regressiontest: not
	 * converged after 2 iterations, the rows are labelled all the same.
	 * scikit-learn (random_state 34) gets [0, 0, 0]; the similarities tie
	 * (-4, -3, -3, median -3), so the result depends on the noise: other
	 * random states give 1, 2 or no exemplar (test/server/compare_sklearn_ap.py).
	 */
	{
		float		X[] = {1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 1, 0, 0, 1};
		gc_ap_params p = {0.5, false, 0.0, 2, 15, GC_AP_FLOAT8};
		fit			f;
		gc_status	st = {0};
		ref_out		o;

		check_case("non-convergence, max_iter 2", X, 3, 6, &p, &o);
		CHECK(run_ap(X, 3, 6, &p, 2, &f, &st) == GC_OK, "%s", st.message);
		CHECK(!f.r.converged && f.r.iterations == 2 && f.r.n_clusters > 0 &&
			  f.labels[0] >= 0 && f.labels[1] >= 0 && f.labels[2] >= 0,
			  "converged %d, %lld clusters, labels %d %d %d", f.r.converged,
			  (long long) f.r.n_clusters, f.labels[0], f.labels[1], f.labels[2]);
		free_fit(&f);
		ref_free(&o);
	}
	/* test_affinity_propagation_equal_mutual_similarities */
	{
		float		X[] = {-1, 1, 1, -1};
		gc_ap_params p = {0.5, true, 0.0, 200, 15, GC_AP_FLOAT8};
		fit			f;
		gc_status	st = {0};

		CHECK(run_ap(X, 2, 2, &p, 2, &f, &st) == GC_OK, "%s", st.message);
		CHECK(f.r.equal_similarities && f.r.n_clusters == 2 && f.labels[0] == 0 &&
			  f.labels[1] == 1 && f.ex[0] && f.ex[1], "preference 0: two exemplars");
		free_fit(&f);
		p.preference = -10;
		CHECK(run_ap(X, 2, 2, &p, 2, &f, &st) == GC_OK, "%s", st.message);
		CHECK(f.r.equal_similarities && f.r.n_clusters == 1 && f.labels[0] == 0 &&
			  f.labels[1] == 0 && f.ex[0] && !f.ex[1], "preference -10: one exemplar");
		free_fit(&f);
	}
	/* one row; identical rows */
	{
		float		X[] = {3, 3, 3, 3, 3, 3, 3, 3};
		gc_ap_params p = {0.5, false, 0.0, 200, 15, GC_AP_FLOAT8};
		fit			f;
		gc_status	st = {0};

		CHECK(run_ap(X, 1, 2, &p, 2, &f, &st) == GC_OK, "%s", st.message);
		CHECK(f.r.n_clusters == 1 && f.labels[0] == 0 && f.ex[0] && f.r.iterations == 0,
			  "one row");
		free_fit(&f);
		CHECK(run_ap(X, 4, 2, &p, 2, &f, &st) == GC_OK, "%s", st.message);
		CHECK(f.r.equal_similarities && f.r.n_clusters == 4 && f.labels[3] == 3,
			  "identical rows: each its own exemplar (median 0 >= 0)");
		free_fit(&f);
	}
	/* empty input */
	{
		gc_ap_params p = {0.5, false, 0.0, 200, 15, GC_AP_FLOAT8};
		fit			f;
		gc_status	st = {0};

		CHECK(run_ap(NULL, 0, 2, &p, 2, &f, &st) == GC_OK && f.r.n_clusters == 0,
			  "empty input: %s", st.message);
		free_fit(&f);
	}
}

/* The median of the similarities: odd and even n, ties, against sorting. */
static void
test_median(void)
{
	for (int rep = 0; rep < 40; rep++)
	{
		int64_t		n = 1 + (int64_t) (tu_next(&rs) % 90);
		int			d = 1 + (int) (tu_next(&rs) % 3);
		float	   *X = make_data(n, d, (data_kind) (rep % 4), 3);
		gc_ap_params p = {0.5, false, 0.0, 1, 1, GC_AP_FLOAT8};
		fit			f;
		ref_out		o;
		gc_status	st = {0};

		ref_alloc(&o, n);
		ref_ap(X, n, d, &p, &o);
		CHECK(run_ap(X, n, d, &p, 2, &f, &st) == GC_OK, "%s", st.message);
		CHECK(f.r.preference == o.preference, "n %lld: median %.17g, sorted %.17g",
			  (long long) n, f.r.preference, o.preference);
		free_fit(&f);
		ref_free(&o);
		free(X);
	}
}

static void
test_invalid(void)
{
	float		X[] = {0, 0, 1, 1, 2, 2};
	struct
	{
		const char *what;
		int64_t		n;
		int			d;
		gc_ap_params p;
	}			cases[] = {
		{"damping < 0.5", 3, 2, {0.49, false, 0, 200, 15, GC_AP_FLOAT8}},
		{"damping 1", 3, 2, {1.0, false, 0, 200, 15, GC_AP_FLOAT8}},
		{"damping NaN", 3, 2, {NAN, false, 0, 200, 15, GC_AP_FLOAT8}},
		{"damping -inf", 3, 2, {-INFINITY, false, 0, 200, 15, GC_AP_FLOAT8}},
		{"max_iter 0", 3, 2, {0.5, false, 0, 0, 15, GC_AP_FLOAT8}},
		{"max_iter -1", 3, 2, {0.5, false, 0, -1, 15, GC_AP_FLOAT8}},
		{"convergence_iter 0", 3, 2, {0.5, false, 0, 200, 0, GC_AP_FLOAT8}},
		{"preference inf", 3, 2, {0.5, true, INFINITY, 200, 15, GC_AP_FLOAT8}},
		{"preference -inf", 3, 2, {0.5, true, -INFINITY, 200, 15, GC_AP_FLOAT8}},
		{"preference NaN", 3, 2, {0.5, true, NAN, 200, 15, GC_AP_FLOAT8}},
		{"d 0", 3, 0, {0.5, false, 0, 200, 15, GC_AP_FLOAT8}},
		{"n < 0", -1, 2, {0.5, false, 0, 200, 15, GC_AP_FLOAT8}},
		{"float4 on the CPU", 3, 2, {0.5, false, 0, 200, 15, GC_AP_FLOAT4}},
		{"unknown precision", 3, 2, {0.5, false, 0, 200, 15, (gc_ap_precision) 7}},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
	{
		fit			f;
		gc_status	st = {0};

		CHECK(run_ap(X, cases[i].n, cases[i].d, &cases[i].p, 2, &f, &st) == GC_EINVAL &&
			  st.code == GC_EINVAL && st.message[0] != '\0',
			  "%s: not GC_EINVAL (message '%s')", cases[i].what, st.message);
		free_fit(&f);
	}
	{
		gc_ap_params p = {0.5, false, 0, 200, 15, GC_AP_FLOAT8};
		gc_ap_result r = {0};
		gc_status	st = {0};

		CHECK(gc_ap_cpu(NULL, X, 3, 2, &p, &r, &st) == GC_EINVAL, "NULL outputs");
		CHECK(gc_ap_cpu(NULL, X, 3, 2, NULL, &r, &st) == GC_EINVAL, "NULL params");
	}
}

static void
test_memory_helpers(void)
{
	CHECK(gc_ap_mem_bytes(0) == 0, "0 rows");
	CHECK(gc_ap_mem_bytes(1000) == 24000000 + 64000, "1000 rows: %zu", gc_ap_mem_bytes(1000));
	CHECK(gc_ap_mem_bytes((int64_t) 1 << 40) == SIZE_MAX, "overflow");
	CHECK(gc_ap_mem_bytes(INT64_MAX) == SIZE_MAX, "overflow");
	for (int rep = 0; rep < 200; rep++)
	{
		size_t		b = (size_t) (tu_uniform(&rs) * 1e12);
		int64_t		m = gc_ap_max_rows(b);

		CHECK(gc_ap_mem_bytes(m) <= b && gc_ap_mem_bytes(m + 1) > b,
			  "max_rows(%zu) = %lld", b, (long long) m);
	}
	CHECK(gc_ap_max_rows(0) == 0 && gc_ap_max_rows(88) == 1 && gc_ap_max_rows(87) == 0,
		  "tiny budgets");
	CHECK(gc_ap_max_rows(SIZE_MAX) > 1000000, "huge budget");
}

/*
 * The cancel flags, and gc_ctx.poll, which the calling thread must ask at
 * most TU_POLL_GAP_S apart (the glue's check of the client's connection
 * runs only there), from the similarities through the iterations; true
 * stops the call as a raised flag does.
 */
static void
test_cancel(void)
{
	const int64_t n = 3000;
	const int	d = 4;
	float	   *X = make_data(n, d, DATA_UNIFORM, 1);
	int32_t    *lab = malloc(sizeof(int32_t) * n);
	uint8_t    *ex = malloc(n);
	gc_ap_result r = {0};
	/* never converges: convergence_iter > max_iter */
	gc_ap_params p = {0.9, false, 0, 1000000, 1000001, GC_AP_FLOAT8};
	gc_ctx		ctx = {.n_threads = 2, .cancel_flags = {&cancel_flag, NULL}};
	gc_status	st = {0};
	pthread_t	th;
	tu_poll		tp;
	double		t0;
	gc_code		rc;

	r.labels = lab;
	r.is_exemplar = ex;
	cancel_flag = 1;
	CHECK(gc_ap_cpu(&ctx, X, n, d, &p, &r, &st) == GC_ECANCEL, "pre-raised flag not honoured");
	ctx.cancel_flags[0] = NULL;
	ctx.cancel_flags[1] = &cancel_flag;
	CHECK(gc_ap_cpu(&ctx, X, n, d, &p, &r, &st) == GC_ECANCEL, "second flag not honoured");

	/* raised during the iterations */
	cancel_flag = 0;
	pthread_create(&th, NULL, raise_later, NULL);
	t0 = now_s();
	rc = gc_ap_cpu(&ctx, X, n, d, &p, &r, &st);
	pthread_join(th, NULL);
	CHECK(rc == GC_ECANCEL, "cancel during the iterations: rc %d", rc);
	CHECK(now_s() - t0 < 0.5, "cancel took %.3f s", now_s() - t0);
	cancel_flag = 0;

	/* the poll says stop after 0.3 s */
	tu_poll_start(&tp, &ctx, 0.3);
	rc = gc_ap_cpu(&ctx, X, n, d, &p, &r, &st);
	CHECK(rc == GC_ECANCEL, "poll's stop not honoured: rc %d", rc);
	CHECK(tp.caller_polls > 0, "the calling thread never polled");
	CHECK(tp.max_gap < TU_POLL_GAP_S, "the calling thread's polls %.3f s apart", tp.max_gap);
	free(X);
	free(lab);
	free(ex);
}

int
main(void)
{
	uint64_t	seed = tu_seed();

	printf("test_affinity: seed %llu (GPUCLUST_TEST_SEED=%llu to replay)\n",
		   (unsigned long long) seed, (unsigned long long) seed);
	rs = seed;
	test_invalid();
	test_memory_helpers();
	test_sklearn_cases();
	test_median();
	test_blobs();
	test_random();
	test_cancel();
	return test_summary("test_affinity");
}
