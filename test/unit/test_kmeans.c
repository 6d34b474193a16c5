/*
 * test_kmeans.c — CPU k-means against brute-force references on fresh
 * random data (replay a run with GPUCLUST_TEST_SEED=<printed seed>).
 */
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

#include "gpuclust_core.h"
#include "common/gpu.h"
#include "kmeans/kmeans_internal.h"
#include "common/rng.h"
#include "testutil.h"

static uint64_t rs;				/* test data generator state */

/* k-means parameters, without initial centroids or weights */
#define KM_PARAMS(k_, max_iter_, tol_, init_, n_init_, seed_) \
	{.k = (k_), .max_iter = (max_iter_), .tol = (tol_), .init = (init_), \
	 .n_init = (n_init_), .seed = (seed_)}

/* ---- data: testutil.h's generator, 1 to 12 blob centres ---- */

static float *
make_data(int64_t n, int d, data_kind kind)
{
	return tu_make_data(&rs, n, d, kind, 1 + (int) (tu_next(&rs) % 12));
}

/* ---- brute-force references ---- */

static int32_t
ref_argmin(const float *x, const float *C, int k, int d, float *best_out)
{
	float		best = INFINITY;
	int32_t		lab = 0;

	for (int c = 0; c < k; c++)
	{
		float		q = gc_dist2(x, C + (size_t) c * d, d);

		if (q < best)
		{
			best = q;
			lab = c;
		}
	}
	if (best_out)
		*best_out = best;
	return lab;
}

/* The inertia, each row's term weighted by w[i] (w NULL: 1). */
static double
ref_inertia_w(const float *X, int64_t n, int d, const float *C,
			  const int32_t *lab, const double *w)
{
	double		s = 0.0;

	for (int64_t i = 0; i < n; i++)
	{
		double		q = 0.0;

		for (int j = 0; j < d; j++)
		{
			double		t = (double) X[i * d + j] - (double) C[(size_t) lab[i] * d + j];

			q += t * t;
		}
		s += w ? w[i] * q : q;
	}
	return s;
}

static double
ref_inertia(const float *X, int64_t n, int d, const float *C, const int32_t *lab)
{
	return ref_inertia_w(X, n, d, C, lab, NULL);
}

/*
 * The documented re-seeding by brute force: each empty cluster (cnt 0),
 * lowest first, takes the farthest row not taken yet (largest d2, ties: the
 * lowest row) among the rows off their centre (d2 > 0) and, with weights,
 * of positive weight: lab[row] = c.  Returns how many clusters took a row
 * (fewer than the empty ones when the candidates run out).
 */
static int
ref_reseed(int64_t n, int k, const float *d2, const double *w,
		   const int64_t *cnt, int32_t *lab)
{
	char	   *taken = calloc(n, 1);
	int			j = 0;

	for (int c = 0; c < k; c++)
		if (cnt[c] == 0)
		{
			int64_t		far = -1;

			for (int64_t i = 0; i < n; i++)
				if (!taken[i] && d2[i] > 0.0f && (w == NULL || w[i] > 0) &&
					(far < 0 || d2[i] > d2[far]))
					far = i;
			if (far < 0)
				break;
			taken[far] = 1;
			lab[far] = c;
			j++;
		}
	free(taken);
	return j;
}

static bool
rel_close(double a, double b, double rel)
{
	return fabs(a - b) <= rel * fmax(fabs(a), fabs(b)) + 1e-300;
}

/*
 * Sequential k-means++ with the documented draws and grid (each step's
 * terms on the grid of its largest, summed as integers in row order);
 * weighted by w (NULL: unweighted) as gc_km_init_kmeanspp_w documents it:
 * the first centre the first row of positive weight whose weight prefix
 * exceeds u * sum w, the terms w D², a trial the first row whose prefix
 * passes R (else the last of positive weight).
 */
#define W_(i) (w ? w[i] : 1.0)
static void
ref_kmeanspp(const float *X, int64_t n, int d, int k, const double *w,
			 uint64_t seed, uint64_t stream, int64_t *chosen)
{
	const int	L = 2 + (int) floor(log((double) k));
	float	   *cl = malloc(sizeof(float) * n);
	int64_t		first = (int64_t) (gc_rng_uniform(seed, stream, 0) * (double) n);
	int64_t		last_pos = n - 1;

	if (w)
	{
		double		tot = 0.0,
					cum = 0.0,
					r;

		for (int64_t i = 0; i < n; i++)
			tot += w[i];
		r = gc_rng_uniform(seed, stream, 0) * tot;
		first = -1;
		for (int64_t i = 0; i < n; i++)
			if (w[i] > 0)
			{
				last_pos = i;
				cum += w[i];
				if (first < 0 && cum > r)
					first = i;
			}
		if (first < 0)
			first = last_pos;
	}
	if (first >= n)
		first = n - 1;
	chosen[0] = first;
	for (int64_t i = 0; i < n; i++)
		cl[i] = gc_dist2(X + i * d, X + first * d, d);
	for (int c = 1; c < k; c++)
	{
		uint64_t	best_pot = 0,
					T = 0;
		int64_t		best = -1;
		double		M = 0.0,
					S;

		/* the step's grid: its largest term */
		for (int64_t i = 0; i < n; i++)
			M = fmax(M, W_(i) * cl[i]);
		S = M > 0 ? ldexp(1.0, fmin(52, 63 - (int) floor(log2((double) n) + 1)) - ((int) floor(log2(M)) + 1)) : 0.0;
		for (int64_t i = 0; i < n; i++)
			T += (uint64_t) nearbyint(W_(i) * cl[i] * S);
		for (int t = 0; t < L; t++)
		{
			const uint64_t u = gc_rng_u64(seed, stream, 1 + (uint64_t) (c - 1) * L + t) >> 11;
			const uint64_t R = (uint64_t) (((unsigned __int128) u * T) >> 53);
			int64_t		cid = last_pos;
			uint64_t	acc = 0,
						pot = 0;

			for (int64_t i = 0; i < n && T > 0; i++)
			{
				acc += (uint64_t) nearbyint(W_(i) * cl[i] * S);
				if (acc > R)
				{
					cid = i;
					break;
				}
			}
			for (int64_t i = 0; i < n; i++)
			{
				float		q = gc_dist2(X + i * d, X + cid * d, d);

				pot += (uint64_t) nearbyint(W_(i) * (q < cl[i] ? q : cl[i]) * S);
			}
			if (best < 0 || pot < best_pot)
			{
				best_pot = pot;
				best = cid;
			}
		}
		chosen[c] = best;
		for (int64_t i = 0; i < n; i++)
		{
			float		q = gc_dist2(X + i * d, X + best * d, d);

			if (q < cl[i])
				cl[i] = q;
		}
	}
	free(cl);
}


/* D2, lab: each row's nearest of the m candidate rows cid (ties: lowest). */
static void
ref_nearest(const float *X, int64_t n, int d, const int64_t *cid, int64_t m,
			float *D2, int32_t *lab)
{
	for (int64_t i = 0; i < n; i++)
	{
		D2[i] = INFINITY;
		for (int64_t c = 0; c < m; c++)
		{
			float		q = gc_dist2(X + i * d, X + cid[c] * d, d);

			if (q < D2[i])
			{
				D2[i] = q;
				lab[i] = (int32_t) c;
			}
		}
	}
}

/*
 * k-means|| as kmeans_internal.h defines it, straightforwardly: naive
 * distances and argmins, phi on the round's grid, the draws' formula, then
 * ref_kmeanspp over the weighted candidates (or over all rows when fewer
 * than k).
 */
static void
ref_kmeans_par(const float *X, int64_t n, int d, int k, const double *w,
			   uint64_t seed, uint64_t stream, int64_t *chosen)
{
	const double ell = 2.0 * k;
	float	   *D2 = malloc(sizeof(float) * n);
	int32_t    *lab = malloc(sizeof(int32_t) * n);
	int64_t    *cid = malloc(sizeof(int64_t) * n);
	int64_t		m = 1;
	int64_t		first;

	/* the first: ref_kmeanspp's first centre (k = 1 draws only it) */
	ref_kmeanspp(X, n, d, 1, w, seed, stream, &first);
	cid[0] = first;
	for (int r = 1; r <= 20 && (r <= 5 || m < k); r++)
	{
		double		phi = 0.0,
					M = 0.0,
					S;
		uint64_t	T = 0;

		ref_nearest(X, n, d, cid, m, D2, lab);
		for (int64_t i = 0; i < n; i++)
			M = fmax(M, W_(i) * (double) D2[i]);
		S = M > 0 ? ldexp(1.0, fmin(52, 63 - (int) floor(log2((double) n) + 1)) - ((int) floor(log2(M)) + 1)) : 0.0;
		for (int64_t i = 0; i < n; i++)
			T += (uint64_t) nearbyint(W_(i) * (double) D2[i] * S);
		if (S > 0)
			phi = (double) T / S;
		if (!(phi > 0.0))
			break;
		for (int64_t i = 0; i < n; i++)
			if (gc_rng_uniform(seed, stream, 1 + (uint64_t) (r - 1) * n + i) <
				(ell * (W_(i) * (double) D2[i])) / phi)
				cid[m++] = i;
	}
	ref_nearest(X, n, d, cid, m, D2, lab);
	if (m < k)
		ref_kmeanspp(X, n, d, k, w, seed, stream, chosen);
	else
	{
		float	   *cand = malloc(sizeof(float) * m * d);
		double	   *cw = calloc(m, sizeof(double));
		int64_t    *cch = malloc(sizeof(int64_t) * k);

		for (int64_t i = 0; i < n; i++)
			cw[lab[i]] += W_(i);
		for (int64_t c = 0; c < m; c++)
			memcpy(cand + c * d, X + cid[c] * d, sizeof(float) * d);
		ref_kmeanspp(cand, m, d, k, cw, seed, stream + GC_KM_PAR_REDUCE_STREAM, cch);
		for (int c = 0; c < k; c++)
			chosen[c] = cid[cch[c]];
		free(cand);
		free(cw);
		free(cch);
	}
	free(D2);
	free(lab);
	free(cid);
}

/* ---- tests ---- */

typedef struct fit
{
	int32_t    *labels;
	double	   *dist;
	float	   *C;
	gc_kmeans_result r;
	gc_code		rc;
} fit;

static void
do_fit(fit *f, const float *X, int64_t n, int d, const gc_kmeans_params *p,
	   int threads)
{
	gc_ctx		ctx = {.n_threads = threads, .cancel_flags = {NULL, NULL}};
	gc_status	st = {0};

	f->labels = malloc(sizeof(int32_t) * (n > 0 ? n : 1));
	f->dist = malloc(sizeof(double) * (n > 0 ? n : 1));
	f->C = malloc(sizeof(float) * p->k * d);
	f->r = (gc_kmeans_result) {f->labels, f->dist, f->C, 0, 0, false};
	f->rc = gc_kmeans_cpu(&ctx, X, n, d, p, &f->r, &st);
	if (f->rc != GC_OK)
		fprintf(stderr, "gc_kmeans_cpu: %s\n", st.message);
}

static void
free_fit(fit *f)
{
	free(f->labels);
	free(f->dist);
	free(f->C);
}

static bool
same_fit(const fit *a, const fit *b, int64_t n, int k, int d)
{
	return a->rc == b->rc &&
		memcmp(a->labels, b->labels, sizeof(int32_t) * n) == 0 &&
		memcmp(a->C, b->C, sizeof(float) * k * d) == 0 &&
		memcmp(a->dist, b->dist, sizeof(double) * n) == 0 &&
		a->r.inertia == b->r.inertia && a->r.iterations == b->r.iterations &&
		a->r.converged == b->r.converged;
}

/* Whole fits: consistency of outputs, determinism, thread independence. */
static void
test_fit_shape(int64_t n, int d, int k, data_kind kind, gc_kmeans_init init,
			   int n_init, double tol)
{
	float	   *X = make_data(n, d, kind);
	gc_kmeans_params p = KM_PARAMS(k, 100, tol, init, n_init, tu_next(&rs));
	fit			f1,
				f2,
				f3;
	int64_t		bad_lab = 0,
				bad_dist = 0;

	do_fit(&f1, X, n, d, &p, 1);
	do_fit(&f2, X, n, d, &p, 2);
	do_fit(&f3, X, n, d, &p, 2);
	CHECK(f1.rc == GC_OK, "n=%lld d=%d k=%d %s: rc %d", (long long) n, d, k, data_name[kind], f1.rc);
	if (f1.rc == GC_OK)
	{
		double		ri = ref_inertia(X, n, d, f1.C, f1.labels);

		for (int64_t i = 0; i < n; i++)
		{
			double		q = 0.0;

			for (int j = 0; j < d; j++)
			{
				double		t = (double) X[i * d + j] - f1.C[(size_t) f1.labels[i] * d + j];

				q += t * t;
			}
			bad_lab += ref_argmin(X + i * d, f1.C, k, d, NULL) != f1.labels[i];
			bad_dist += !rel_close(f1.dist[i], sqrt(q), 1e-12);
		}
		CHECK(bad_lab == 0, "n=%lld d=%d k=%d %s init=%d: %lld labels are not the argmin",
			  (long long) n, d, k, data_name[kind], init, (long long) bad_lab);
		CHECK(bad_dist == 0, "n=%lld d=%d k=%d: %lld distances wrong", (long long) n, d, k, (long long) bad_dist);
		CHECK(rel_close(f1.r.inertia, ri, 1e-9), "n=%lld d=%d k=%d: inertia %.17g, recomputed %.17g",
			  (long long) n, d, k, f1.r.inertia, ri);
		CHECK(f1.r.iterations >= 1 && f1.r.iterations <= p.max_iter, "iterations %d", f1.r.iterations);
		for (int i = 0; i < k * d; i++)
			if (!isfinite(f1.C[i]))
			{
				CHECK(false, "n=%lld d=%d k=%d: non-finite centroid", (long long) n, d, k);
				break;
			}
	}
	CHECK(same_fit(&f1, &f2, n, k, d), "n=%lld d=%d k=%d %s: 1 and 2 threads differ",
		  (long long) n, d, k, data_name[kind]);
	CHECK(same_fit(&f2, &f3, n, k, d), "n=%lld d=%d k=%d: same seed, different result", (long long) n, d, k);
	free_fit(&f1);
	free_fit(&f2);
	free_fit(&f3);
	free(X);
}

/*
 * Sample weights for n rows: none (NULL), or random ones in [0, 4) with
 * about a third of them 0 when zeros, else in (0, 4).
 */
static double *
make_weights(int64_t n, bool zeros)
{
	double	   *w = malloc(sizeof(double) * n);

	for (int64_t i = 0; i < n; i++)
	{
		double		u = tu_uniform(&rs);

		w[i] = zeros && u < 1.0 / 3 ? 0.0 : 4.0 * tu_uniform(&rs) + (zeros ? 0.0 : 1e-3);
	}
	return w;
}

/*
 * Lloyd driven step by step against brute force; inertia never increases.
 * weights: none, positive, or with zeros (the update then takes the
 * weighted means, and only rows of positive weight re-seed).
 */
typedef enum
{
	W_NONE,
	W_POSITIVE,
	W_ZEROS
} weight_kind;

static void
test_lloyd_steps_w(int64_t n, int d, int k, data_kind kind, gc_kmeans_init init,
				   weight_kind wk)
{
	gc_ctx		ctx = {.n_threads = 2, .cancel_flags = {NULL, NULL}};
	gc_status	st = {0};
	float	   *X = make_data(n, d, kind);
	float	   *C = malloc(sizeof(float) * k * d);
	float	   *Cn = malloc(sizeof(float) * k * d);
	float	   *d2 = malloc(sizeof(float) * n);
	int32_t    *lab = malloc(sizeof(int32_t) * n);
	int64_t    *cnt = malloc(sizeof(int64_t) * k);
	double	   *sum = malloc(sizeof(double) * k * d);
	gc_km_ws   *ws = gc_km_ws_create(n, d, k, 2);
	double	   *w = wk == W_NONE ? NULL : make_weights(n, wk == W_ZEROS);
	double	   *wsum = malloc(sizeof(double) * k);
	int64_t		positive = 0;
	uint64_t	seed = tu_next(&rs);
	double		prev = INFINITY;
	int64_t		bad_lab = 0,
				bad_d2 = 0,
				bad_c = 0,
				rises = 0;
	int			relocated_total = 0;

	ws->weights = w;
	for (int64_t i = 0; i < n; i++)
		positive += w == NULL || w[i] > 0;
	if (positive < k)
		k = (int) positive;		/* a fit would refuse it */
	if (init == GC_INIT_RANDOM)
		gc_km_init_random(&ctx, X, n, d, k, seed, 3, C, NULL, &st);
	else
		gc_km_init_kmeanspp(&ctx, X, n, d, k, seed, 3, C, NULL, &st);
	for (int64_t i = 0; i < n; i++)
		lab[i] = -1;
	for (int it = 0; it < 30 && k > 0; it++)
	{
		int64_t		changed,
					ref_changed = 0;
		double		shift,
					inertia;
		int			nrel;

		/* assignment vs brute force */
		for (int64_t i = 0; i < n; i++)
			ref_changed += ref_argmin(X + i * d, C, k, d, NULL) != lab[i];
		CHECK(gc_km_assign(&ctx, ws, X, n, d, C, k, lab, d2, &changed, &st) == GC_OK, "assign");
		CHECK(changed == ref_changed, "changed %lld, reference %lld", (long long) changed, (long long) ref_changed);
		for (int64_t i = 0; i < n; i++)
		{
			float		q;

			bad_lab += ref_argmin(X + i * d, C, k, d, &q) != lab[i];
			bad_d2 += q != d2[i];
		}
		inertia = ref_inertia_w(X, n, d, C, lab, w);
		rises += inertia > prev * (1 + 1e-6) + 1e-9;
		prev = inertia;

		/* update vs a direct mean, with the documented re-seeding */
		CHECK(gc_km_update(&ctx, ws, X, n, d, k, lab, d2, C, Cn, &shift, &nrel, &st) == GC_OK, "update");
		relocated_total += nrel;
		memset(cnt, 0, sizeof(int64_t) * k);
		memset(sum, 0, sizeof(double) * k * d);
		memset(wsum, 0, sizeof(double) * k);
		{
			int32_t    *eff = malloc(sizeof(int32_t) * n);
			int			j;

			/* empty: no row of positive weight (unweighted: no row) */
			memcpy(eff, lab, sizeof(int32_t) * n);
			for (int64_t i = 0; i < n; i++)
				cnt[lab[i]] += w == NULL || w[i] > 0;
			j = ref_reseed(n, k, d2, w, cnt, eff);
			CHECK(nrel == j, "relocated %d, reference %d", nrel, j);
			for (int64_t i = 0; i < n; i++)
			{
				double		wi = w ? w[i] : 1.0;

				wsum[eff[i]] += wi;
				for (int jj = 0; jj < d; jj++)
					sum[(size_t) eff[i] * d + jj] += wi * X[i * d + jj];
			}
			for (int c = 0; c < k; c++)
				for (int jj = 0; jj < d; jj++)
				{
					double		ref = wsum[c] > 0 ? sum[(size_t) c * d + jj] / wsum[c] : C[(size_t) c * d + jj];
					double		got = Cn[(size_t) c * d + jj];

					bad_c += fabs(got - ref) > 1e-5 * (1 + fabs(ref));
				}
			free(eff);
		}
		{
			float	   *t = C;

			C = Cn;
			Cn = t;
		}
	}
	CHECK(bad_lab == 0, "n=%lld d=%d k=%d %s w%d: %lld labels differ from brute force",
		  (long long) n, d, k, data_name[kind], wk, (long long) bad_lab);
	CHECK(bad_d2 == 0, "n=%lld d=%d k=%d: %lld d2 differ", (long long) n, d, k, (long long) bad_d2);
	CHECK(bad_c == 0, "n=%lld d=%d k=%d %s w%d: %lld centre coordinates differ from the mean",
		  (long long) n, d, k, data_name[kind], wk, (long long) bad_c);
	CHECK(rises == 0, "n=%lld d=%d k=%d %s w%d: inertia rose %lld times",
		  (long long) n, d, k, data_name[kind], wk, (long long) rises);
	if (kind == DATA_DUPLICATES && k > 12)
	{
		/*
		 * More centres than distinct rows: re-seeding takes rows off their
		 * centres until none is left (and never one on its centre).
		 */
		int64_t		off = 0;

		for (int64_t i = 0; i < n; i++)
			off += (w == NULL || w[i] > 0) && d2[i] != 0.0f;
		CHECK(off == 0, "n=%lld k=%d %s w%d: %lld rows off their centre after %d re-seedings",
			  (long long) n, k, data_name[kind], wk, (long long) off, relocated_total);
	}
	gc_km_ws_destroy(ws);
	free(w);
	free(wsum);
	free(X);
	free(C);
	free(Cn);
	free(d2);
	free(lab);
	free(cnt);
	free(sum);
}

/*
 * gc_km_assign_bounded's bounds change nothing: a whole fit with them (at
 * any d) and without, bit for bit (labels, centres, distances, inertia,
 * iterations), weighted or not, Euclidean or cosine, its rows moved off
 * the origin by offset.  Returns the rows the bounds kept.
 */
static int64_t
test_bounds(int64_t n, int d, int k, data_kind kind, gc_kmeans_init init,
			int n_init, double tol, bool weighted, bool cosine, float offset)
{
	float	   *X = make_data(n, d, kind);
	double	   *w = weighted ? make_weights(n, true) : NULL;
	gc_kmeans_params p = KM_PARAMS(k, 300, tol, init, n_init, tu_next(&rs));
	fit			a,
				b;
	int64_t		kept;

	for (int64_t i = 0; i < n * d; i++)
		X[i] += offset;
	p.weights = w;
	if (cosine)
		p.metric = GC_METRIC_COSINE;
	gc_km_force_bounds(0);
	do_fit(&a, X, n, d, &p, 2);
	gc_km_force_bounds(1);
	kept = gc_km_bounds_kept;
	do_fit(&b, X, n, d, &p, 2);
	kept = gc_km_bounds_kept - kept;
	gc_km_force_bounds(-1);
	CHECK(a.rc == GC_OK && same_fit(&a, &b, n, k, d),
		  "bounds: n=%lld d=%d k=%d %s init=%d n_init=%d tol=%g%s%s offset %g: rc %d / %d, iterations %d / %d",
		  (long long) n, d, k, data_name[kind], init, n_init, tol, weighted ? " weighted" : "",
		  cosine ? " cosine" : "", offset, a.rc, b.rc, a.r.iterations, b.r.iterations);
	free_fit(&a);
	free_fit(&b);
	free(w);
	free(X);
	return kept;
}

static void
test_lloyd_steps(int64_t n, int d, int k, data_kind kind, gc_kmeans_init init)
{
	test_lloyd_steps_w(n, d, k, kind, init, W_NONE);
}

/* A centre far from every row is emptied and re-seeded at the farthest row. */
static void
test_empty_constructed(void)
{
	gc_ctx		ctx = {.n_threads = 2, .cancel_flags = {NULL, NULL}};
	gc_status	st = {0};
	float		X[] = {0, 0, 1, 0, 0, 1, 10, 10, 11, 10};
	float		C[] = {0, 0, 1000, 1000, 10, 10};
	float		Cn[6],
				d2[5];
	int32_t		lab[5] = {-1, -1, -1, -1, -1};
	int64_t		changed;
	double		shift;
	int			nrel;
	gc_km_ws   *ws = gc_km_ws_create(5, 2, 3, 2);

	gc_km_assign(&ctx, ws, X, 5, 2, C, 3, lab, d2, &changed, &st);
	gc_km_update(&ctx, ws, X, 5, 2, 3, lab, d2, C, Cn, &shift, &nrel, &st);
	/* d2: 0 1 1 0 1 -> farthest is row 1 (ties to the lowest row) */
	CHECK(nrel == 1, "relocated %d", nrel);
	CHECK(Cn[2] == 1 && Cn[3] == 0, "re-seeded centre (%g, %g), want row 1 (1, 0)", Cn[2], Cn[3]);
	CHECK(Cn[0] == 0.0f && Cn[1] == 0.5f, "centre 0 (%g, %g), want (0, 0.5)", Cn[0], Cn[1]);
	CHECK(Cn[4] == 10.5f && Cn[5] == 10.0f, "centre 2 (%g, %g)", Cn[4], Cn[5]);
	gc_km_ws_destroy(ws);
}

static void
test_kmeanspp_reference(int64_t n, int d, int k, data_kind kind, int threads)
{
	gc_ctx		ctx = {.n_threads = threads, .cancel_flags = {NULL, NULL}};
	gc_status	st = {0};
	float	   *X = make_data(n, d, kind);
	float	   *C = malloc(sizeof(float) * k * d);
	int64_t    *got = malloc(sizeof(int64_t) * k);
	int64_t    *want = malloc(sizeof(int64_t) * k);
	uint64_t	seed = tu_next(&rs);
	int			bad = 0,
				badc = 0;

	CHECK(gc_km_init_kmeanspp(&ctx, X, n, d, k, seed, 7, C, got, &st) == GC_OK, "kmeans++ rc");
	ref_kmeanspp(X, n, d, k, NULL, seed, 7, want);
	for (int c = 0; c < k; c++)
	{
		bad += got[c] != want[c];
		badc += memcmp(C + (size_t) c * d, X + got[c] * d, sizeof(float) * d) != 0;
	}
	CHECK(bad == 0, "k-means++ n=%lld d=%d k=%d %s: %d of %d centres differ from the reference",
		  (long long) n, d, k, data_name[kind], bad, k);
	CHECK(badc == 0, "k-means++ centres are not the chosen rows");
	free(X);
	free(C);
	free(got);
	free(want);
}


static double *make_weights(int64_t n, bool zeros);

/*
 * k-means|| against ref_kmeans_par (weighted when weighted), the centres
 * the chosen rows; the same on 1 and 3 threads.
 */
static void
test_kmeans_par_reference(int64_t n, int d, int k, data_kind kind, bool weighted)
{
	gc_ctx		ctx1 = {.n_threads = 1, .cancel_flags = {NULL, NULL}},
				ctx3 = {.n_threads = 3, .cancel_flags = {NULL, NULL}};
	gc_status	st = {0};
	float	   *X = make_data(n, d, kind);
	float	   *C = malloc(sizeof(float) * k * d),
			   *C3 = malloc(sizeof(float) * k * d);
	int64_t    *got = malloc(sizeof(int64_t) * k),
			   *got3 = malloc(sizeof(int64_t) * k),
			   *want = malloc(sizeof(int64_t) * k);
	double	   *w = weighted ? make_weights(n, true) : NULL;
	uint64_t	seed = tu_next(&rs),
				stream = GC_KM_STREAM_KMEANSPAR + tu_next(&rs) % 5;
	int			bad = 0,
				badc = 0,
				zero = 0;

	if (w)
	{
		int64_t		positive = 0;

		for (int64_t i = 0; i < n; i++)
			positive += w[i] > 0;
		if (k > positive)
			k = (int) positive;
	}
	CHECK(gc_km_init_kmeans_par_w(&ctx1, X, n, d, k, w, seed, stream, C, got, &st) == GC_OK,
		  "k-means|| rc: %s", st.message);
	CHECK(gc_km_init_kmeans_par_w(&ctx3, X, n, d, k, w, seed, stream, C3, got3, &st) == GC_OK,
		  "k-means|| rc: %s", st.message);
	ref_kmeans_par(X, n, d, k, w, seed, stream, want);
	for (int c = 0; c < k; c++)
	{
		bad += got[c] != want[c];
		badc += memcmp(C + (size_t) c * d, X + got[c] * d, sizeof(float) * d) != 0;
		zero += w && !(w[got[c]] > 0);
	}
	CHECK(bad == 0, "k-means|| n=%lld d=%d k=%d %s%s: %d of %d centres differ from the reference",
		  (long long) n, d, k, data_name[kind], w ? " weighted" : "", bad, k);
	CHECK(badc == 0, "k-means|| centres are not the chosen rows");
	CHECK(zero == 0, "k-means||: %d seeds of weight 0", zero);
	CHECK(memcmp(got, got3, sizeof(int64_t) * k) == 0 &&
		  memcmp(C, C3, sizeof(float) * k * d) == 0,
		  "k-means|| n=%lld d=%d k=%d: 1 and 3 threads differ", (long long) n, d, k);
	free(X);
	free(C);
	free(C3);
	free(got);
	free(got3);
	free(want);
	free(w);
}

/*
 * Weighted k-means++ against the weighted reference; rows of weight 0 are
 * never seeds; weights all 1 give the unweighted seeds bit for bit.
 */
static void
test_kmeanspp_weighted(int64_t n, int d, int k, data_kind kind, int threads)
{
	gc_ctx		ctx = {.n_threads = threads, .cancel_flags = {NULL, NULL}};
	gc_status	st = {0};
	float	   *X = make_data(n, d, kind);
	float	   *C = malloc(sizeof(float) * k * d);
	int64_t    *got = malloc(sizeof(int64_t) * k);
	int64_t    *want = malloc(sizeof(int64_t) * k);
	double	   *w = make_weights(n, true);
	double	   *ones = malloc(sizeof(double) * n);
	uint64_t	seed = tu_next(&rs);
	int64_t		positive = 0;
	int			bad = 0,
				zero = 0;

	for (int64_t i = 0; i < n; i++)
	{
		ones[i] = 1.0;
		positive += w[i] > 0;
	}
	if (k > positive)
		k = (int) positive;
	CHECK(gc_km_init_kmeanspp_w(&ctx, X, n, d, k, w, seed, 7, C, got, &st) == GC_OK,
		  "weighted kmeans++ rc: %s", st.message);
	ref_kmeanspp(X, n, d, k, w, seed, 7, want);
	for (int c = 0; c < k; c++)
	{
		bad += got[c] != want[c];
		zero += !(w[got[c]] > 0);
	}
	CHECK(bad == 0, "weighted k-means++ n=%lld d=%d k=%d %s: %d of %d centres differ from the reference",
		  (long long) n, d, k, data_name[kind], bad, k);
	CHECK(zero == 0, "weighted k-means++: %d seeds of weight 0", zero);
	/* weights all 1: the unweighted draws */
	CHECK(gc_km_init_kmeanspp_w(&ctx, X, n, d, k, ones, seed, 7, C, got, &st) == GC_OK, "rc");
	ref_kmeanspp(X, n, d, k, NULL, seed, 7, want);
	bad = 0;
	for (int c = 0; c < k; c++)
		bad += got[c] != want[c];
	CHECK(bad == 0, "k-means++ with weights 1: %d of %d centres differ from the unweighted", bad, k);
	free(X);
	free(C);
	free(got);
	free(want);
	free(w);
	free(ones);
}

/*
 * The weighted draws' distribution: the first k-means++ centre and a
 * weighted random row are drawn in proportion to the weight (4 rows,
 * weights 0, 1, 2, 5; 16000 seeds; each frequency within 0.015 of w / 8,
 * about 4 standard deviations).  Random seeding without replacement: k
 * distinct rows, all of positive weight.
 */
static void
test_weighted_draws(void)
{
	const float X[4] = {0, 1, 2, 3};
	const double w[4] = {0, 1, 2, 5};
	const int	N = 16000;
	int			pp[4] = {0},
				rnd[4] = {0};
	gc_ctx		ctx = {.n_threads = 1, .cancel_flags = {NULL, NULL}};
	gc_status	st = {0};
	float		C[4];
	int64_t		got[4];
	uint64_t	base = tu_next(&rs);

	for (int s = 0; s < N; s++)
	{
		gc_km_init_kmeanspp_w(&ctx, X, 4, 1, 1, w, base + s, 3, C, got, &st);
		pp[got[0]]++;
		gc_km_init_random_w(&ctx, X, 4, 1, 1, w, base + s, 3, C, got, &st);
		rnd[got[0]]++;
	}
	for (int i = 0; i < 4; i++)
	{
		CHECK(fabs((double) pp[i] / N - w[i] / 8) < 0.015,
			  "weighted k-means++ first centre: row %d drawn %d of %d times, weight %g of 8", i, pp[i], N, w[i]);
		CHECK(fabs((double) rnd[i] / N - w[i] / 8) < 0.015,
			  "weighted random row: row %d drawn %d of %d times, weight %g of 8", i, rnd[i], N, w[i]);
	}
	for (int r = 0; r < 20; r++)
	{
		int64_t		n = 1 + (int64_t) (tu_next(&rs) % 3000);
		float	   *Y = make_data(n, 2, DATA_UNIFORM);
		double	   *ww = make_weights(n, r % 2 == 0);
		int64_t		positive = 0;
		int			k;
		float	   *CC;
		int64_t    *ch;
		char	   *seen = calloc(n, 1);
		int			dup = 0,
					zero = 0;

		/* a few huge weights: draws without replacement still end */
		if (r % 4 == 1)
			for (int j = 0; j < 3; j++)
				ww[tu_next(&rs) % n] = 1e30;
		for (int64_t i = 0; i < n; i++)
			positive += ww[i] > 0;
		if (positive == 0)
		{
			free(Y);
			free(ww);
			free(seen);
			continue;
		}
		k = 1 + (int) (tu_next(&rs) % (uint64_t) positive);
		CC = malloc(sizeof(float) * 2 * k);
		ch = malloc(sizeof(int64_t) * k);
		CHECK(gc_km_init_random_w(&ctx, Y, n, 2, k, ww, tu_next(&rs), 5, CC, ch, &st) == GC_OK,
			  "weighted random rc");
		for (int c = 0; c < k; c++)
		{
			dup += seen[ch[c]];
			seen[ch[c]] = 1;
			zero += !(ww[ch[c]] > 0);
		}
		CHECK(dup == 0 && zero == 0, "weighted random n=%lld k=%d: %d repeated, %d of weight 0",
			  (long long) n, k, dup, zero);
		free(Y);
		free(ww);
		free(seen);
		free(CC);
		free(ch);
	}
}

/*
 * Integer weights are multiplicities: a fit of X weighted by w (0 to 3)
 * from given centroids equals the fit of X with row i repeated w_i times
 * (labels of the same rows, centroids and inertia within rounding).
 */
static void
test_weights_as_duplicates(int64_t n, int d, int k, data_kind kind)
{
	float	   *X = make_data(n, d, kind);
	double	   *w = malloc(sizeof(double) * n);
	float	   *Xd;
	float	   *C0 = malloc(sizeof(float) * k * d);
	int64_t		nd = 0,
				positive = 0;
	int64_t    *src;
	gc_kmeans_params pw = KM_PARAMS(k, 100, 0.0, GC_INIT_CENTROIDS, 3, tu_next(&rs));
	gc_kmeans_params pd;
	fit			fw,
				fd;
	int64_t		bad_lab = 0,
				bad_c = 0;

	for (int64_t i = 0; i < n; i++)
	{
		w[i] = (double) (tu_next(&rs) % 4);
		nd += (int64_t) w[i];
		positive += w[i] > 0;
	}
	if (positive < k)
	{
		for (int64_t i = 0; i < n && positive < k; i++)
			if (w[i] == 0)
			{
				w[i] = 1;
				nd++;
				positive++;
			}
	}
	Xd = malloc(sizeof(float) * (nd > 0 ? nd : 1) * d);
	src = malloc(sizeof(int64_t) * (nd > 0 ? nd : 1));
	nd = 0;
	for (int64_t i = 0; i < n; i++)
		for (int r = 0; r < (int) w[i]; r++)
		{
			memcpy(Xd + nd * d, X + i * d, sizeof(float) * d);
			src[nd++] = i;
		}
	/* the initial centres: k rows of positive weight, as given centroids */
	for (int c = 0, i = 0; c < k; i++)
		if (w[i] > 0)
			memcpy(C0 + (size_t) (c++) * d, X + (size_t) i * d, sizeof(float) * d);
	pw.init_centroids = C0;
	pw.init_d = d;
	pw.weights = w;
	pd = pw;
	pd.weights = NULL;
	do_fit(&fw, X, n, d, &pw, 2);
	do_fit(&fd, Xd, nd, d, &pd, 3);
	CHECK(fw.rc == GC_OK && fd.rc == GC_OK, "weights as duplicates: fits failed");
	if (fw.rc == GC_OK && fd.rc == GC_OK)
	{
		for (int64_t j = 0; j < nd; j++)
			bad_lab += fd.labels[j] != fw.labels[src[j]];
		for (int c = 0; c < k * d; c++)
			bad_c += fabsf(fw.C[c] - fd.C[c]) > 1e-4f * (1 + fabsf(fd.C[c]));
		CHECK(bad_lab == 0 && bad_c == 0 && rel_close(fw.r.inertia, fd.r.inertia, 1e-6),
			  "weights as duplicates n=%lld d=%d k=%d %s: %lld labels and %lld centre values differ, inertia %.17g vs %.17g",
			  (long long) n, d, k, data_name[kind], (long long) bad_lab, (long long) bad_c,
			  fw.r.inertia, fd.r.inertia);
		CHECK(fabs(fw.r.inertia - ref_inertia_w(X, n, d, fw.C, fw.labels, w)) <=
			  1e-9 * (1 + fw.r.inertia), "weighted inertia differs from brute force");
	}
	free_fit(&fw);
	free_fit(&fd);
	free(X);
	free(Xd);
	free(w);
	free(C0);
	free(src);
}

/*
 * Given initial centroids: the fit starts there (one run whatever n_init;
 * from a fit's own centroids it stops at once with the same labels), and
 * its first step is the brute-force assignment to them.
 */
static void
test_init_centroids(int64_t n, int d, int k, data_kind kind)
{
	float	   *X = make_data(n, d, kind);
	gc_kmeans_params p = KM_PARAMS(k, 300, 0.0, GC_INIT_KMEANSPP, 2, tu_next(&rs));
	gc_kmeans_params q;
	fit			f,
				g,
				h;
	int64_t		bad = 0;

	do_fit(&f, X, n, d, &p, 2);
	q = p;
	q.init = GC_INIT_CENTROIDS;
	q.init_centroids = f.C;
	q.init_d = d;
	q.n_init = 5;
	do_fit(&g, X, n, d, &q, 2);
	CHECK(g.rc == GC_OK && g.r.iterations <= 2 &&
		  memcmp(f.labels, g.labels, sizeof(int32_t) * n) == 0 &&
		  rel_close(f.r.inertia, g.r.inertia, 1e-9),
		  "init from a fit's centroids n=%lld d=%d k=%d: %d iterations, inertia %g vs %g",
		  (long long) n, d, k, g.r.iterations, g.r.inertia, f.r.inertia);
	/*
	 * One iteration from the last k rows: the centres are the means of the
	 * brute-force assignment to them (no cluster is empty: each has its row)
	 */
	q.init_centroids = X + (n - k) * d;
	q.max_iter = 1;
	do_fit(&h, X, n, d, &q, 3);
	CHECK(h.rc == GC_OK && h.r.iterations == 1, "one iteration from given centroids");
	if (h.rc == GC_OK && kind != DATA_DUPLICATES)
	{
		double	   *sum = calloc((size_t) k * d, sizeof(double));
		int64_t    *cnt = calloc(k, sizeof(int64_t));

		for (int64_t i = 0; i < n; i++)
		{
			int			c = ref_argmin(X + i * d, X + (n - k) * d, k, d, NULL);

			cnt[c]++;
			for (int j = 0; j < d; j++)
				sum[(size_t) c * d + j] += X[i * d + j];
		}
		for (int c = 0; c < k; c++)
			for (int j = 0; j < d; j++)
				bad += cnt[c] > 0 &&
					fabs(h.C[(size_t) c * d + j] - sum[(size_t) c * d + j] / cnt[c]) >
					1e-5 * (1 + fabs(sum[(size_t) c * d + j] / cnt[c]));
		CHECK(bad == 0, "one step from given centroids n=%lld d=%d k=%d: %lld centre values differ from the brute-force means",
			  (long long) n, d, k, (long long) bad);
		free(sum);
		free(cnt);
	}
	free_fit(&f);
	free_fit(&g);
	free_fit(&h);
	free(X);
}

static void
test_invalid_init_weights(void)
{
	float		X[8] = {0, 1, 2, 3, 4, 5, 6, 7};
	float		C0[4] = {0, 1, 2, 3};
	float		Cbad[4] = {0, NAN, 2, 3};
	float		Cbig[4] = {0, 1, 2, 3e38f};
	double		wneg[4] = {1, -1, 1, 1};
	double		wnan[4] = {1, 1, NAN, 1};
	double		winf[4] = {1, 1, INFINITY, 1};
	double		wzero[4] = {0, 0, 0, 1};
	double		wok[4] = {0, 2, 0, 1};
	int32_t		lab[4];
	float		C[8];
	gc_kmeans_result r = {lab, NULL, C, 0, 0, false};
	gc_status	st;
	gc_kmeans_params p;
	struct
	{
		const char *what;
		const float *init;
		int			init_d;
		const double *w;
		const char *msg;
	}			cases[] = {
		{"no centroids", NULL, 2, NULL, "none are given"},
		{"init_d", C0, 1, NULL, "columns"},
		{"NaN centroid", Cbad, 2, NULL, "not finite"},
		{"huge centroid", Cbig, 2, NULL, "beyond"},
		{"negative weight", NULL, 0, wneg, "row 1"},
		{"NaN weight", NULL, 0, wnan, "row 2"},
		{"infinite weight", NULL, 0, winf, "row 2"},
		{"one positive weight", NULL, 0, wzero, "positive weight"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
	{
		p = (gc_kmeans_params) KM_PARAMS(2, 10, 1e-4,
										 cases[i].w ? GC_INIT_KMEANSPP : GC_INIT_CENTROIDS, 1, 0);
		p.init_centroids = cases[i].init;
		p.init_d = cases[i].init_d;
		p.weights = cases[i].w;
		memset(&st, 0, sizeof(st));
		CHECK(gc_kmeans_cpu(NULL, X, 4, 2, &p, &r, &st) == GC_EINVAL &&
			  strstr(st.message, cases[i].msg) != NULL,
			  "%s: not GC_EINVAL with '%s' (message '%s')", cases[i].what, cases[i].msg, st.message);
	}
	p = (gc_kmeans_params) KM_PARAMS(2, 10, 1e-4, GC_INIT_KMEANSPP, 3, 0);
	p.weights = wok;
	/* rows 1 (2,3) and 3 (6,7) weigh; rows 0 and 2 weigh 0 */
	CHECK(gc_kmeans_cpu(NULL, X, 4, 2, &p, &r, &st) == GC_OK && lab[1] != lab[3] &&
		  C[lab[1] * 2] == 2 && C[lab[1] * 2 + 1] == 3 &&
		  C[lab[3] * 2] == 6 && C[lab[3] * 2 + 1] == 7,
		  "two rows of positive weight, k = 2: each its own centre (%s)", st.message);
	CHECK(r.inertia == 0.0, "weighted inertia of exact centres: %g", r.inertia);
	/* the caller's count of positive weights: trusted, no pass over them */
	p.rows_checked = true;
	p.positive_weights = 2;
	CHECK(gc_kmeans_cpu(NULL, X, 4, 2, &p, &r, &st) == GC_OK && lab[1] != lab[3] &&
		  r.inertia == 0.0, "positive_weights 2 given: %s", st.message);
	p.positive_weights = 1;
	CHECK(gc_kmeans_cpu(NULL, X, 4, 2, &p, &r, &st) == GC_EINVAL &&
		  strstr(st.message, "positive weight") != NULL,
		  "positive_weights 1 < k given: not GC_EINVAL (message '%s')", st.message);
}

/* ---- spherical k-means (metric cosine) against brute force ---- */

/* The unit row of x, written out: x_j / sqrt(sum x²), in double, rounded once. */
static void
ref_unit(const float *x, int d, float *u)
{
	double		s = 0.0;

	for (int j = 0; j < d; j++)
		s += (double) x[j] * (double) x[j];
	for (int j = 0; j < d; j++)
		u[j] = (float) ((double) x[j] / sqrt(s));
}

static void
ref_unit_rows(const float *X, int64_t n, int d, float *U)
{
	for (int64_t i = 0; i < n; i++)
		ref_unit(X + i * d, d, U + i * d);
}

static bool
ref_is_zero(const float *x, int d)
{
	for (int j = 0; j < d; j++)
		if (x[j] != 0.0f)
			return false;
	return true;
}

/* Data without zero rows (cosine needs a direction everywhere). */
static float *
make_directions(int64_t n, int d, data_kind kind)
{
	float	   *X = make_data(n, d, kind);

	for (int64_t i = 0; i < n; i++)
	{
		int			j = 0;

		while (j < d && X[i * d + j] == 0.0f)
			j++;
		if (j == d)
			X[i * d] = 1.0f;
	}
	return X;
}

/* 1 - cos(x, c) in double from the raw values. */
static double
ref_cosine_distance(const float *x, const float *c, int d)
{
	double		xc = 0.0,
				xx = 0.0,
				cc = 0.0;

	for (int j = 0; j < d; j++)
	{
		xc += (double) x[j] * c[j];
		xx += (double) x[j] * x[j];
		cc += (double) c[j] * c[j];
	}
	return 1.0 - xc / (sqrt(xx) * sqrt(cc));
}

/*
 * What every spherical fit must satisfy, by brute force: unit centres;
 * each label the argmin over the unit rows of the returned centres (the
 * largest cosine, ties to the lowest centre); each distance q / 2 of the
 * unit row and unit centre, within rounding of 1 - cos; the inertia the
 * weighted sum of the distances.  Counts the failures into bad[4].
 */
static void
check_spherical_fit(const fit *f, const float *X, const float *U, int64_t n,
					int d, int k, const double *w, int64_t bad[4])
{
	float	   *Cu = malloc(sizeof(float) * k * d);
	double		inertia = 0.0;

	ref_unit_rows(f->C, k, d, Cu);
	for (int c = 0; c < k; c++)
	{
		double		nn = 0.0;

		for (int j = 0; j < d; j++)
			nn += (double) f->C[(size_t) c * d + j] * f->C[(size_t) c * d + j];
		bad[0] += fabs(sqrt(nn) - 1.0) > 1e-6;
	}
	for (int64_t i = 0; i < n; i++)
	{
		int32_t		c = ref_argmin(U + i * d, Cu, k, d, NULL);
		double		q = 0.0;

		bad[1] += c != f->labels[i];
		for (int j = 0; j < d; j++)
		{
			double		t = (double) U[i * d + j] - (double) Cu[(size_t) f->labels[i] * d + j];

			q += t * t;
		}
		bad[2] += !rel_close(f->dist[i], q / 2, 1e-12) ||
			fabs(f->dist[i] - ref_cosine_distance(X + i * d, f->C + (size_t) f->labels[i] * d, d)) > 1e-5;
		inertia += (w ? w[i] : 1.0) * f->dist[i];
	}
	bad[3] += !rel_close(f->r.inertia, inertia, 1e-9);
	free(Cu);
}

/*
 * A Lloyd fixpoint, by brute force: every row of R (the rows; spherical:
 * their unit rows) labelled with its nearest centre (spherical: unit
 * centre), and every centre with weight the (weighted) mean of its rows
 * (spherical: normalized), within 1e-5.  Returns the failures.
 */
static int64_t
ref_fixpoint_bad(const fit *f, const float *R, int64_t n, int d, int k,
				 const double *w, bool unit)
{
	double	   *sum = calloc((size_t) k * d, sizeof(double));
	double	   *ws = calloc(k, sizeof(double));
	float	   *A = malloc(sizeof(float) * k * d);
	float	   *mean = malloc(sizeof(float) * d);
	int64_t		bad = 0;

	if (unit)
		ref_unit_rows(f->C, k, d, A);
	else
		memcpy(A, f->C, sizeof(float) * k * d);
	for (int64_t i = 0; i < n; i++)
	{
		bad += ref_argmin(R + i * d, A, k, d, NULL) != f->labels[i];
		ws[f->labels[i]] += w ? w[i] : 1.0;
		for (int j = 0; j < d; j++)
			sum[(size_t) f->labels[i] * d + j] += (w ? w[i] : 1.0) * R[i * d + j];
	}
	for (int c = 0; c < k; c++)
		if (ws[c] > 0)
		{
			for (int j = 0; j < d; j++)
				mean[j] = (float) (sum[(size_t) c * d + j] / ws[c]);
			if (unit)
				ref_unit(mean, d, mean);
			for (int j = 0; j < d; j++)
				bad += fabs(f->C[(size_t) c * d + j] - mean[j]) >
					1e-5 * (unit ? 1.0 : 1.0 + fabs(mean[j]));
		}
	free(sum);
	free(ws);
	free(A);
	free(mean);
	return bad;
}

/*
 * An empty cluster re-seeded in a step whose labels did not change: no
 * convergence yet (the centres are not the means of the labels).  Rows
 * 100, 100, 0, 1, 2, 3, 4 from centres 2, 103, 1000: step 1 moves the
 * first 100 (d2 9, the farthest) to the empty cluster 2, so centres 1 and
 * 2 both become 100 and the tie keeps both 100s in cluster 1; step 2 has
 * step 1's labels while cluster 2, empty again, takes the row 0 (d2 4).
 * The fit goes on to the fixpoint 3, 100, 0.5.  The same shape on
 * directions (spherical).  And with fewer distinct rows than k, the spare
 * centres sit on duplicates: a row on its centre takes no cluster, so the
 * fit converges at once, every row at distance 0.
 */
static void
test_reseed_convergence(void)
{
	float		X[] = {100, 100, 0, 1, 2, 3, 4};
	float		C0[] = {2, 103, 1000};
	float		Xs[] = {0, 1, 0, 2, 1, -0.4f, 1, -0.2f, 1, 0, 1, 0.2f, 1, 0.4f};
	float		Cs[] = {1, 0, 1, 1, -1, -5};
	float		Us[14];
	float		Xd[24];
	gc_kmeans_params p = KM_PARAMS(3, 300, 0.0, GC_INIT_CENTROIDS, 1, 0);
	fit			f;

	p.init_centroids = C0;
	p.init_d = 1;
	do_fit(&f, X, 7, 1, &p, 2);
	CHECK(f.rc == GC_OK && f.r.converged && f.r.iterations == 4 &&
		  ref_fixpoint_bad(&f, X, 7, 1, 3, NULL, false) == 0 &&
		  f.C[0] == 3.0f && f.C[1] == 100.0f && f.C[2] == 0.5f,
		  "re-seeding at the converging step: converged %d after %d iterations at (%g, %g, %g), want the fixpoint (3, 100, 0.5)",
		  f.r.converged, f.r.iterations, f.C[0], f.C[1], f.C[2]);
	free_fit(&f);

	p.metric = GC_METRIC_COSINE;
	p.init_centroids = Cs;
	p.init_d = 2;
	ref_unit_rows(Xs, 7, 2, Us);
	do_fit(&f, Xs, 7, 2, &p, 2);
	CHECK(f.rc == GC_OK && f.r.converged && ref_fixpoint_bad(&f, Us, 7, 2, 3, NULL, true) == 0,
		  "spherical re-seeding at the converging step: converged %d after %d iterations, not a fixpoint",
		  f.r.converged, f.r.iterations);
	free_fit(&f);

	/* 3 distinct rows, 4 copies each, k = 5 */
	for (int i = 0; i < 12; i++)
	{
		Xd[2 * i] = (float) (i % 3);
		Xd[2 * i + 1] = (float) (i % 3 == 1 ? 7 : -1);
	}
	for (int r = 0; r < 4; r++)
	{
		gc_kmeans_params q = KM_PARAMS(5, 300, 0.0, r % 2 ? GC_INIT_RANDOM : GC_INIT_KMEANSPP,
									   3, 11 + r);
		int64_t		off = 0;

		q.metric = r < 2 ? GC_METRIC_EUCLIDEAN : GC_METRIC_COSINE;
		do_fit(&f, Xd, 12, 2, &q, 2);
		for (int i = 0; i < 12; i++)
			off += f.dist[i] != 0.0;
		CHECK(f.rc == GC_OK && f.r.converged && f.r.iterations <= 3 &&
			  (q.metric == GC_METRIC_COSINE || (off == 0 && f.r.inertia == 0.0)),
			  "fewer distinct rows than k (%s, %s): converged %d after %d iterations, %lld rows off their centre",
			  r % 2 ? "random" : "k-means++", r < 2 ? "euclidean" : "cosine",
			  f.r.converged, f.r.iterations, (long long) off);
		free_fit(&f);
	}
}

/*
 * Spherical Lloyd step by step from given centroids (each step a fit of
 * max_iter 1 from the last step's centres, so no rounding carries over):
 * the new centres are the unit rows of the (weighted) means of the unit
 * rows assigned to the unit rows of the old ones, by brute force; the
 * given centroids are scaled by powers of two, which the normalization
 * removes exactly.
 */
static void
test_spherical_steps(int64_t n, int d, int k, data_kind kind, weight_kind wk)
{
	float	   *X = make_directions(n, d, kind);
	float	   *U = malloc(sizeof(float) * n * d);
	float	   *C = malloc(sizeof(float) * k * d);
	float	   *Ca = malloc(sizeof(float) * k * d);
	float	   *mean = malloc(sizeof(float) * d);
	double	   *sum = malloc(sizeof(double) * k * d);
	double	   *wsum = malloc(sizeof(double) * k);
	double	   *w = wk == W_NONE ? NULL : make_weights(n, wk == W_ZEROS);
	float	   *C0 = malloc(sizeof(float) * k * d);
	float	   *d2 = malloc(sizeof(float) * n);
	int32_t    *lab = malloc(sizeof(int32_t) * n);
	int64_t    *cnt = malloc(sizeof(int64_t) * k);
	int64_t		bad[4] = {0, 0, 0, 0},
				bad_c = 0;
	int			steps = 8;

	ref_unit_rows(X, n, d, U);
	/* the initial centres: k rows of positive weight, scaled by 2^e */
	for (int c = 0, i = 0; c < k; i++)
	{
		if (i == n)
		{
			k = c;				/* too few rows weigh: a fit would refuse */
			break;
		}
		if (w == NULL || w[i] > 0)
		{
			float		sc = ldexpf(1.0f, (int) (tu_next(&rs) % 21) - 10);

			for (int j = 0; j < d; j++)
				C[(size_t) c * d + j] = X[(size_t) i * d + j] * sc;
			c++;
		}
	}
	for (int step = 0; step < steps && k > 0; step++)
	{
		gc_kmeans_params p = KM_PARAMS(k, 1, 0.0, GC_INIT_CENTROIDS, 1, 0);
		fit			f;

		p.metric = GC_METRIC_COSINE;
		p.init_centroids = C;
		p.init_d = d;
		p.weights = w;
		do_fit(&f, X, n, d, &p, 1 + step % 2);
		CHECK(f.rc == GC_OK, "spherical step: rc %d", f.rc);
		if (f.rc != GC_OK)
		{
			free_fit(&f);
			break;
		}
		check_spherical_fit(&f, X, U, n, d, k, w, bad);

		/*
		 * The step by brute force: the given centres normalized (C0), the
		 * rows assigned to the unit rows of those (Ca); empty clusters (no
		 * weight) re-seeded (ref_reseed); the new centres are the
		 * normalized means, a cluster with no weight or a mean of 0
		 * keeping its C0 centre.
		 */
		ref_unit_rows(C, k, d, C0);
		ref_unit_rows(C0, k, d, Ca);
		memset(sum, 0, sizeof(double) * k * d);
		memset(wsum, 0, sizeof(double) * k);
		for (int64_t i = 0; i < n; i++)
			lab[i] = ref_argmin(U + i * d, Ca, k, d, &d2[i]);
		for (int c = 0; c < k; c++)
			cnt[c] = 0;
		for (int64_t i = 0; i < n; i++)
			cnt[lab[i]] += w == NULL || w[i] > 0;
		(void) ref_reseed(n, k, d2, w, cnt, lab);
		for (int64_t i = 0; i < n; i++)
		{
			double		wi = w ? w[i] : 1.0;

			wsum[lab[i]] += wi;
			for (int j = 0; j < d; j++)
				sum[(size_t) lab[i] * d + j] += wi * U[i * d + j];
		}
		for (int c = 0; c < k; c++)
		{
			for (int j = 0; j < d; j++)
				mean[j] = wsum[c] > 0 ? (float) (sum[(size_t) c * d + j] / wsum[c]) : 0.0f;
			if (ref_is_zero(mean, d))
				memcpy(mean, C0 + (size_t) c * d, sizeof(float) * d);
			else
				ref_unit(mean, d, mean);
			for (int j = 0; j < d; j++)
				bad_c += fabs(f.C[(size_t) c * d + j] - mean[j]) > 1e-5;
		}
		memcpy(C, f.C, sizeof(float) * k * d);
		free_fit(&f);
	}
	CHECK(bad[0] + bad[1] + bad[2] + bad[3] == 0,
		  "spherical steps n=%lld d=%d k=%d %s w%d: %lld centres not unit, %lld labels not the largest cosine, %lld distances, %lld inertias wrong",
		  (long long) n, d, k, data_name[kind], wk, (long long) bad[0], (long long) bad[1],
		  (long long) bad[2], (long long) bad[3]);
	CHECK(bad_c == 0, "spherical steps n=%lld d=%d k=%d %s w%d: %lld centre values differ from the normalized mean",
		  (long long) n, d, k, data_name[kind], wk, (long long) bad_c);
	free(C0);
	free(d2);
	free(lab);
	free(cnt);
	free(X);
	free(U);
	free(C);
	free(Ca);
	free(mean);
	free(sum);
	free(wsum);
	free(w);
}

/*
 * Whole spherical fits: brute-force properties; the same on 1 and 2
 * threads; unchanged, bit for bit, when rows are scaled by powers of two
 * (only directions count); k-means++ is the reference k-means++ on the unit
 * rows (a fit from those rows, given as centroids, is the same fit); a fit
 * converged on labels has centres that are the normalized means.
 */
static void
test_spherical_fit(int64_t n, int d, int k, data_kind kind, gc_kmeans_init init,
				   weight_kind wk)
{
	float	   *X = make_directions(n, d, kind);
	float	   *X2 = malloc(sizeof(float) * n * d);
	float	   *U = malloc(sizeof(float) * n * d);
	float	   *C0 = malloc(sizeof(float) * k * d);
	int64_t    *chosen = malloc(sizeof(int64_t) * k);
	double	   *w = wk == W_NONE ? NULL : make_weights(n, wk == W_ZEROS);
	gc_kmeans_params p = KM_PARAMS(k, 300, 0.0, init, 1, tu_next(&rs));
	fit			f1,
				f2,
				f3,
				f4;
	int64_t		bad[4] = {0, 0, 0, 0},
				positive = 0,
				bad_c = 0;

	if (w != NULL && !(w[0] > 0))
		w[0] = 1;				/* some row weighs */
	for (int64_t i = 0; i < n; i++)
		positive += w == NULL || w[i] > 0;
	if (positive < k)
		k = (int) positive;		/* a fit would refuse more */
	p.k = k;
	p.metric = GC_METRIC_COSINE;
	p.weights = w;
	ref_unit_rows(X, n, d, U);
	for (int64_t i = 0; i < n; i++)
	{
		float		sc = ldexpf(1.0f, (int) (tu_next(&rs) % 41) - 20);

		for (int j = 0; j < d; j++)
			X2[i * d + j] = X[i * d + j] * sc;
	}
	do_fit(&f1, X, n, d, &p, 1);
	do_fit(&f2, X, n, d, &p, 2);
	do_fit(&f3, X2, n, d, &p, 2);
	CHECK(f1.rc == GC_OK, "spherical fit n=%lld d=%d k=%d: rc %d", (long long) n, d, k, f1.rc);
	if (f1.rc == GC_OK)
	{
		check_spherical_fit(&f1, X, U, n, d, k, w, bad);
		CHECK(bad[0] + bad[1] + bad[2] + bad[3] == 0,
			  "spherical fit n=%lld d=%d k=%d %s init=%d w%d: %lld centres not unit, %lld labels not the largest cosine, %lld distances, %lld inertias wrong",
			  (long long) n, d, k, data_name[kind], init, wk, (long long) bad[0], (long long) bad[1],
			  (long long) bad[2], (long long) bad[3]);
		if (f1.r.converged)
		{
			/* converged on labels (tol 0): the centres are the normalized means */
			bad_c = ref_fixpoint_bad(&f1, U, n, d, k, w, true);
			CHECK(bad_c == 0, "spherical fit n=%lld d=%d k=%d %s: %lld labels or centre values differ from the normalized means",
				  (long long) n, d, k, data_name[kind], (long long) bad_c);
		}
	}
	CHECK(same_fit(&f1, &f2, n, k, d), "spherical fit n=%lld d=%d k=%d: 1 and 2 threads differ",
		  (long long) n, d, k);
	CHECK(same_fit(&f1, &f3, n, k, d), "spherical fit n=%lld d=%d k=%d %s: rows scaled by powers of 2 differ",
		  (long long) n, d, k, data_name[kind]);
	if (init == GC_INIT_KMEANSPP)
	{
		/* the seeds: the reference k-means++ on the unit rows, run 0's stream */
		gc_kmeans_params q = p;

		ref_kmeanspp(U, n, d, k, w, p.seed, GC_KM_STREAM_KMEANSPP, chosen);
		for (int c = 0; c < k; c++)
			memcpy(C0 + (size_t) c * d, X + chosen[c] * d, sizeof(float) * d);
		q.init = GC_INIT_CENTROIDS;
		q.init_centroids = C0;
		q.init_d = d;
		do_fit(&f4, X, n, d, &q, 2);
		CHECK(same_fit(&f1, &f4, n, k, d),
			  "spherical fit n=%lld d=%d k=%d %s w%d: k-means++ is not the reference on the unit rows",
			  (long long) n, d, k, data_name[kind], wk);
		free_fit(&f4);
	}
	free_fit(&f1);
	free_fit(&f2);
	free_fit(&f3);
	free(X);
	free(X2);
	free(U);
	free(C0);
	free(chosen);
	free(w);
}

/* Spherical k-means: its errors, and a cluster whose unit rows cancel. */
static void
test_spherical_cases(void)
{
	float		X[8] = {1, 0, -1, 0, 0, 2, 0, 3};
	float		Xz[8] = {1, 0, 0, 0, 0, 2, 0, 3};
	float		C0[4] = {0, -5, 0, 1};
	float		Cz[4] = {0, 0, 0, 1};
	int32_t		lab[4];
	float		C[4];
	double		dist[4];
	gc_kmeans_result r = {lab, dist, C, 0, 0, false};
	gc_status	st = {0};
	gc_kmeans_params p = KM_PARAMS(2, 10, 1e-4, GC_INIT_CENTROIDS, 1, 0);

	p.metric = GC_METRIC_COSINE;
	p.init_centroids = C0;
	p.init_d = 2;
	/*
	 * (1,0) and (-1,0) are as close to (0,-1) as to (0,1): the lower centre
	 * takes both, their mean is 0 and it keeps its (normalized) centre
	 */
	CHECK(gc_kmeans_cpu(NULL, X, 4, 2, &p, &r, &st) == GC_OK &&
		  lab[0] == 0 && lab[1] == 0 && lab[2] == 1 && lab[3] == 1 &&
		  C[0] == 0 && C[1] == -1 && C[2] == 0 && C[3] == 1 && r.converged,
		  "cancelling unit rows: labels %d %d %d %d, centres (%g,%g) (%g,%g) (%s)",
		  lab[0], lab[1], lab[2], lab[3], C[0], C[1], C[2], C[3], st.message);
	CHECK(dist[0] == 1 && dist[1] == 1 && dist[2] == 0 && r.inertia == 2,
		  "cancelling unit rows: distances %g %g %g, inertia %g", dist[0], dist[1], dist[2], r.inertia);
	CHECK(gc_kmeans_cpu(NULL, Xz, 4, 2, &p, &r, &st) == GC_EINVAL &&
		  strstr(st.message, "row 1 has all features 0") != NULL, "zero row: %s", st.message);
	p.init_centroids = Cz;
	CHECK(gc_kmeans_cpu(NULL, X, 4, 2, &p, &r, &st) == GC_EINVAL &&
		  strstr(st.message, "initial centroid 1 is all 0") != NULL, "zero centroid: %s", st.message);
	p.init_centroids = C0;
	p.metric = GC_METRIC_INNER_PRODUCT;
	CHECK(gc_kmeans_cpu(NULL, X, 4, 2, &p, &r, &st) == GC_EINVAL &&
		  strstr(st.message, "not supported") != NULL, "inner product: %s", st.message);
}

static void
test_random_init(int64_t n, int d, int k)
{
	gc_ctx		ctx = {.n_threads = 2, .cancel_flags = {NULL, NULL}};
	gc_status	st = {0};
	float	   *X = make_data(n, d, DATA_UNIFORM);
	float	   *C = malloc(sizeof(float) * k * d);
	int64_t    *got = malloc(sizeof(int64_t) * k);
	char	   *seen = calloc(n, 1);
	uint64_t	seed = tu_next(&rs);
	uint64_t	ctr = 0;
	int			dup = 0,
				bad = 0;

	CHECK(gc_km_init_random(&ctx, X, n, d, k, seed, 9, C, got, &st) == GC_OK, "random init rc");
	for (int c = 0; c < k; c++)
	{
		dup += got[c] < 0 || got[c] >= n || seen[got[c]];
		if (got[c] >= 0 && got[c] < n)
			seen[got[c]] = 1;
		bad += memcmp(C + (size_t) c * d, X + got[c] * d, sizeof(float) * d) != 0;
	}
	/* the documented draws: rejection of rows already taken */
	memset(seen, 0, n);
	for (int c = 0; c < k;)
	{
		int64_t		i = (int64_t) (gc_rng_uniform(seed, 9, ctr++) * (double) n);

		if (i >= n)
			i = n - 1;
		if (seen[i])
			continue;
		seen[i] = 1;
		bad += got[c++] != i;
	}
	CHECK(dup == 0, "random init n=%lld k=%d: %d rows not distinct", (long long) n, k, dup);
	CHECK(bad == 0, "random init n=%lld k=%d: %d rows differ from the documented draws", (long long) n, k, bad);

	/* the draws alone (the distributed driver's), and the init without chosen */
	{
		int64_t    *rows = malloc(sizeof(int64_t) * k);
		float	   *C2 = malloc(sizeof(float) * k * d);

		CHECK(gc_km_random_rows(&ctx, n, k, seed, 9, rows, &st) == GC_OK &&
			  memcmp(rows, got, sizeof(int64_t) * k) == 0,
			  "gc_km_random_rows n=%lld k=%d: the rows of gc_km_init_random", (long long) n, k);
		CHECK(gc_km_init_random(&ctx, X, n, d, k, seed, 9, C2, NULL, &st) == GC_OK &&
			  memcmp(C, C2, sizeof(float) * k * d) == 0,
			  "random init n=%lld k=%d: the same centres without chosen", (long long) n, k);
		free(rows);
		free(C2);
	}
	free(X);
	free(C);
	free(got);
	free(seen);
}

static void
test_invalid(void)
{
	float		X[8] = {0, 1, 2, 3, 4, 5, 6, 7};
	int32_t		lab[4];
	float		C[8];
	gc_kmeans_result r = {lab, NULL, C, 0, 0, false};
	gc_kmeans_params ok = KM_PARAMS(2, 10, 1e-4, GC_INIT_KMEANSPP, 1, 0);
	gc_status	st;
	struct
	{
		const char *what;
		gc_kmeans_params p;
		int			d;
		int64_t		n;
	}			cases[] = {
		{"k=0", KM_PARAMS(0, 10, 1e-4, GC_INIT_KMEANSPP, 1, 0), 2, 4},
		{"k>n", KM_PARAMS(5, 10, 1e-4, GC_INIT_KMEANSPP, 1, 0), 2, 4},
		{"max_iter=0", KM_PARAMS(2, 0, 1e-4, GC_INIT_KMEANSPP, 1, 0), 2, 4},
		{"n_init=0", KM_PARAMS(2, 10, 1e-4, GC_INIT_KMEANSPP, 0, 0), 2, 4},
		{"tol<0", KM_PARAMS(2, 10, -1, GC_INIT_KMEANSPP, 1, 0), 2, 4},
		{"tol=NaN", KM_PARAMS(2, 10, NAN, GC_INIT_KMEANSPP, 1, 0), 2, 4},
		{"tol=inf", KM_PARAMS(2, 10, INFINITY, GC_INIT_KMEANSPP, 1, 0), 2, 4},
		{"d=0", KM_PARAMS(2, 10, 1e-4, GC_INIT_KMEANSPP, 1, 0), 0, 4},
		{"bad init", KM_PARAMS(2, 10, 1e-4, (gc_kmeans_init) 7, 1, 0), 2, 4},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
	{
		memset(&st, 0, sizeof(st));
		CHECK(gc_kmeans_cpu(NULL, X, cases[i].n, cases[i].d, &cases[i].p, &r, &st) == GC_EINVAL &&
			  st.code == GC_EINVAL && st.message[0] != '\0',
			  "%s: not GC_EINVAL (message '%s')", cases[i].what, st.message);
	}
	CHECK(gc_kmeans_cpu(NULL, X, 0, 2, &ok, &r, &st) == GC_OK, "n=0 is not GC_OK");
	CHECK(gc_kmeans_cpu(NULL, X, 4, 2, &ok, &r, &st) == GC_OK, "valid call failed: %s", st.message);
}

static void
test_cancel(void)
{
	const int64_t n = 300000;
	const int	d = 8;
	float	   *X = make_data(n, d, DATA_UNIFORM);
	int32_t    *lab = malloc(sizeof(int32_t) * n);
	float	   *C = malloc(sizeof(float) * 2000 * d);
	gc_kmeans_result r = {lab, NULL, C, 0, 0, false};
	gc_kmeans_params p = KM_PARAMS(2000, 300, 0, GC_INIT_KMEANSPP, 1, 1);
	gc_ctx		ctx = {.n_threads = 2, .cancel_flags = {&cancel_flag, NULL}};
	gc_status	st = {0};
	pthread_t	th;
	tu_poll		tp;
	double		t0;
	gc_code		rc;

	/* raised before the call */
	cancel_flag = 1;
	CHECK(gc_kmeans_cpu(&ctx, X, n, d, &p, &r, &st) == GC_ECANCEL, "pre-raised flag not honoured");
	ctx.cancel_flags[0] = NULL;
	ctx.cancel_flags[1] = &cancel_flag;
	p.init = GC_INIT_RANDOM;
	CHECK(gc_kmeans_cpu(&ctx, X, n, d, &p, &r, &st) == GC_ECANCEL, "second flag not honoured");

	/* raised during k-means++ seeding of a long fit (several seconds) */
	cancel_flag = 0;
	p.init = GC_INIT_KMEANSPP;
	pthread_create(&th, NULL, raise_later, NULL);
	t0 = now_s();
	rc = gc_kmeans_cpu(&ctx, X, n, d, &p, &r, &st);
	pthread_join(th, NULL);
	CHECK(rc == GC_ECANCEL, "cancel during the fit: rc %d", rc);
	CHECK(now_s() - t0 < 0.5, "cancel took %.3f s", now_s() - t0);

	/* raised during Lloyd iterations */
	cancel_flag = 0;
	p.init = GC_INIT_RANDOM;
	pthread_create(&th, NULL, raise_later, NULL);
	t0 = now_s();
	rc = gc_kmeans_cpu(&ctx, X, n, d, &p, &r, &st);
	pthread_join(th, NULL);
	CHECK(rc == GC_ECANCEL, "cancel during Lloyd: rc %d", rc);
	CHECK(now_s() - t0 < 0.5, "cancel took %.3f s", now_s() - t0);
	cancel_flag = 0;

	/*
	 * gc_ctx.poll, which the calling thread must ask at most TU_POLL_GAP_S
	 * apart (the glue's check of the client's connection runs only there),
	 * says stop after 0.3 s of seeding, then of Lloyd iterations.
	 */
	for (int i = 0; i < 2; i++)
	{
		p.init = i == 0 ? GC_INIT_KMEANSPP : GC_INIT_RANDOM;
		tu_poll_start(&tp, &ctx, 0.3);
		rc = gc_kmeans_cpu(&ctx, X, n, d, &p, &r, &st);
		CHECK(rc == GC_ECANCEL, "init %d: poll's stop not honoured: rc %d", i, rc);
		CHECK(tp.caller_polls > 0, "init %d: the calling thread never polled", i);
		CHECK(tp.max_gap < TU_POLL_GAP_S, "init %d: the calling thread's polls %.3f s apart", i, tp.max_gap);
	}
	free(X);
	free(lab);
	free(C);
}

/* Distinct rows with k = n: every row its own centre, inertia 0. */
static void
test_k_equals_n(void)
{
	const int64_t n = 37;
	const int	d = 3;
	float	   *X = make_data(n, d, DATA_UNIFORM);
	gc_kmeans_params p = KM_PARAMS((int) n, 50, 1e-4, GC_INIT_KMEANSPP, 2, 5);
	fit			f;

	do_fit(&f, X, n, d, &p, 2);
	CHECK(f.rc == GC_OK && f.r.inertia == 0.0, "k=n: inertia %g", f.r.inertia);
	free_fit(&f);
	free(X);
}

/* Whether rows a and b (d features) compare equal feature by feature. */
static bool
same_point(const float *a, const float *b, int d)
{
	for (int j = 0; j < d; j++)
		if (a[j] != b[j])
			return false;
	return true;
}

/*
 * gc_kmeans_distinct_labels against the definition, pair by pair: rows i
 * and j share a label exactly when every feature (of the unit rows under
 * cosine) compares equal, and labels number the points in the order of
 * their first rows.  Fresh rows drawn from a few values (many duplicates,
 * -0 beside 0), and under cosine positive multiples of a few directions.
 */
static void
test_distinct_labels(void)
{
	gc_ctx		ctx = {.n_threads = 2, .cancel_flags = {NULL, NULL}};
	gc_status	st;

	for (int c = 0; c < 40; c++)
	{
		const int64_t n = 1 + (int64_t) (tu_next(&rs) % 300);
		const int	d = 1 + (int) (tu_next(&rs) % 5);
		const gc_metric metric = c % 2 ? GC_METRIC_COSINE : GC_METRIC_EUCLIDEAN;
		const int	values = 1 + (int) (tu_next(&rs) % 4);
		float	   *X = malloc(sizeof(float) * (size_t) (n * d));
		float	   *U = malloc(sizeof(float) * (size_t) (n * d));
		int32_t    *lab = malloc(sizeof(int32_t) * (size_t) n);
		int64_t		m = -1,
					bad = 0,
					next = 0;

		for (int64_t i = 0; i < n; i++)
		{
			float		scale = metric == GC_METRIC_COSINE ?
				(float) (1 + tu_next(&rs) % 3) : 1.0f;

			for (int j = 0; j < d; j++)
			{
				int			v = (int) (tu_next(&rs) % (uint64_t) values);

				X[i * d + j] = v == 0 ? (tu_next(&rs) % 2 ? -0.0f : 0.0f) : scale * (float) v;
			}
			if (metric == GC_METRIC_COSINE)
				X[i * d] = scale * (float) (1 + tu_next(&rs) % 2);	/* no zero row */
		}
		CHECK(gc_kmeans_distinct_labels(&ctx, X, n, d, metric, lab, &m, &st) == GC_OK,
			  "%s", st.message);
		for (int64_t i = 0; i < n; i++)
		{
			if (metric == GC_METRIC_COSINE)
				gc_unit_row(X + i * d, d, U + i * d);
			else
				memcpy(U + i * d, X + i * d, sizeof(float) * (size_t) d);
		}
		for (int64_t i = 0; i < n; i++)
		{
			int64_t		f = 0;

			while (f < i && !same_point(U + f * d, U + i * d, d))
				f++;
			if (f == i ? lab[i] != next++ : lab[i] != lab[f])
				bad++;
		}
		CHECK(bad == 0 && m == next, "distinct labels: n %lld d %d %s: %lld wrong, %lld of %lld points",
			  (long long) n, d, metric == GC_METRIC_COSINE ? "cosine" : "euclidean",
			  (long long) bad, (long long) m, (long long) next);
		free(X);
		free(U);
		free(lab);
	}
	{
		float		Z[4] = {1, 2, 0, 0};
		int32_t		lab[2];
		int64_t		m;

		CHECK(gc_kmeans_distinct_labels(&ctx, Z, 2, 2, GC_METRIC_COSINE, lab, &m, &st) == GC_EINVAL,
			  "a zero row under cosine");
	}
}

/*
 * gc_kmeans_labels_cpu (kmeans_step's labels) = gc_km_nearest on every
 * row, bit for bit: n 0..5000, d 1..300, k 1..600 (k may exceed n), each
 * labels_kind (duplicate centres, rows on centres, lattice ties, far and
 * huge values, centres 1 ulp apart), 1 to 3 threads, the kernel's widths.
 * Returns 1 when the labels equal the reference.
 */
static int
test_labels(int64_t n, int d, int k, labels_kind kind, int threads)
{
	float	   *X,
			   *C;
	int32_t    *got = malloc(sizeof(int32_t) * (size_t) (n > 0 ? n : 1)),
			   *want = malloc(sizeof(int32_t) * (size_t) (n > 0 ? n : 1));
	gc_ctx		ctx = {.n_threads = threads};
	gc_status	st = {0};
	int64_t		diff = 0,
				first = -1;
	gc_code		rc;

	tu_make_labels_case(&rs, n, d, k, kind, &X, &C);
	for (int64_t i = 0; i < n; i++)
		got[i] = -7;
	rc = gc_kmeans_labels_cpu(&ctx, X, n, d, C, k, got, &st);
	CHECK(rc == GC_OK, "labels n=%lld d=%d k=%d %s: rc %d %s", (long long) n, d, k,
		  lb_name[kind], rc, st.message);
	tu_ref_labels(X, n, d, C, k, want);
	for (int64_t i = 0; i < n; i++)
		if (got[i] != want[i])
		{
			if (first < 0)
				first = i;
			diff++;
		}
	CHECK(diff == 0, "labels n=%lld d=%d k=%d %s threads %d: %lld rows differ (row %lld: %d, want %d)",
		  (long long) n, d, k, lb_name[kind], threads, (long long) diff, (long long) first,
		  first >= 0 ? got[first] : 0, first >= 0 ? want[first] : 0);
	free(X);
	free(C);
	free(got);
	free(want);
	return rc == GC_OK && diff == 0;
}

static void
test_labels_cases(void)
{
	static const int fixed[][3] = {
		/* n, d, k */
		{0, 3, 5}, {1, 1, 1}, {1, 300, 600}, {7, 2, 600}, {5000, 1, 1}, {5000, 300, 1},
		{4999, 17, 16}, {4097, 3, 600}, {100, 300, 600}, {5000, 8, 600}, {33, 64, 200},
	};
	int			cases = 0,
				ok = 0;
	float		Xb[6] = {0, 1, 2, 3, 4, 5};
	int32_t		lab[3];
	gc_status	st = {0};

	/* bad arguments */
	CHECK(gc_kmeans_labels_cpu(NULL, Xb, 3, 0, Xb, 1, lab, &st) == GC_EINVAL, "labels d = 0");
	CHECK(gc_kmeans_labels_cpu(NULL, Xb, 3, 2, Xb, 0, lab, &st) == GC_EINVAL, "labels k = 0");
	CHECK(gc_kmeans_labels_cpu(NULL, Xb, -1, 2, Xb, 1, lab, &st) == GC_EINVAL, "labels n < 0");
	CHECK(gc_kmeans_labels_cpu(NULL, Xb, 3, 2, NULL, 1, lab, &st) == GC_EINVAL, "labels C NULL");
	CHECK(gc_kmeans_labels_cpu(NULL, NULL, 3, 2, Xb, 1, lab, &st) == GC_EINVAL, "labels X NULL");
	CHECK(gc_kmeans_labels_cpu(NULL, NULL, 0, 2, Xb, 1, NULL, &st) == GC_OK, "labels n = 0");

	for (size_t f = 0; f < sizeof(fixed) / sizeof(fixed[0]); f++)
		for (int kind = 0; kind < LB_KINDS; kind++)
		{
			ok += test_labels(fixed[f][0], fixed[f][1], fixed[f][2], (labels_kind) kind,
							  1 + (int) (f + kind) % 3);
			cases++;
		}
	/* fresh shapes: n 0..5000, d 1..300, k 1..600, about 1e8 distances at most */
	for (int r = 0; r < 120; r++)
	{
		int64_t		n = (int64_t) (tu_next(&rs) % 5001);
		int			d = r % 3 == 0 ? 1 + (int) (tu_next(&rs) % 300) : 1 + (int) (tu_next(&rs) % 24),
					k = r % 4 == 0 ? 1 + (int) (tu_next(&rs) % 600) : 1 + (int) (tu_next(&rs) % 64);

		if (r % 10 == 0)
			n = (int64_t) (tu_next(&rs) % (uint64_t) (k + 1));	/* k >= n */
		while (n * (double) k * d > 1e8)
			n /= 2;
		ok += test_labels(n, d, k, (labels_kind) (r % LB_KINDS), 1 + r % 3);
		cases++;
	}
	/* the narrower assignment kernels (AVX2, SSE2) the dispatcher may pick */
	for (int w = 4; w <= 8; w += 4)
	{
		gc_km_force_width(w);
		for (int kind = 0; kind < LB_KINDS; kind++)
		{
			ok += test_labels(3001, 1 + (int) (tu_next(&rs) % 40), 1 + (int) (tu_next(&rs) % 100),
							  (labels_kind) kind, 2);
			cases++;
		}
	}
	gc_km_force_width(0);
	printf("  labels: %d of %d cases equal gc_km_nearest on every row\n", ok, cases);
}

/*
 * gc_kmeans_block_terms (what kmeans_step adds of a labelled block) = the
 * row-at-a-time loop it replaced, bit for bit: each row's float and double
 * distance² to its centre and its hash, and each cluster's double sums
 * taken in row order, on 1 to 3 threads, onto sums that already hold a
 * value (a state's earlier blocks).
 */
static void
test_block_terms(void)
{
	int			cases = 0,
				ok = 0;

	for (int r = 0; r < 60; r++)
	{
		const int64_t n = r == 0 ? 0 : (int64_t) (tu_next(&rs) % 6000);
		const int	d = 1 + (int) (tu_next(&rs) % (r % 3 == 0 ? 200 : 16)),
					k = 1 + (int) (tu_next(&rs) % (r % 4 == 0 ? 500 : 20)),
					threads = 1 + r % 3;
		float	   *X,
				   *C,
				   *d2 = malloc(sizeof(float) * (size_t) (n + 1));
		int32_t    *lab = malloc(sizeof(int32_t) * (size_t) (n + 1));
		double	   *dist = malloc(sizeof(double) * (size_t) (n + 1)),
				   *sums = malloc(sizeof(double) * (size_t) k * d),
				   *want = malloc(sizeof(double) * (size_t) k * d);
		uint64_t   *hash = malloc(sizeof(uint64_t) * (size_t) (n + 1));
		gc_ctx		ctx = {.n_threads = threads};
		int64_t		bad_row = 0;
		int			bad_sum = 0;

		tu_make_labels_case(&rs, n, d, k, (labels_kind) (r % LB_KINDS), &X, &C);
		tu_ref_labels(X, n, d, C, k, lab);
		for (size_t i = 0; i < (size_t) k * d; i++)
			sums[i] = want[i] = (double) (i % 7) * 0.1;
		gc_kmeans_block_terms(&ctx, X, n, d, C, k, lab, sums, d2, dist, hash);
		for (int64_t i = 0; i < n; i++)
		{
			const float *x = X + i * d,
					   *c = C + (size_t) lab[i] * d;
			const float fd = gc_dist2(x, c, d);
			const double dd = gc_dist2_f64(x, c, d);

			for (int j = 0; j < d; j++)
				want[(size_t) lab[i] * d + j] += (double) x[j];
			bad_row += memcmp(&d2[i], &fd, sizeof(fd)) != 0 ||
				memcmp(&dist[i], &dd, sizeof(dd)) != 0 || hash[i] != gc_km_row_hash(x, d);
		}
		bad_sum = memcmp(sums, want, sizeof(double) * (size_t) k * d) != 0;
		CHECK(bad_row == 0 && !bad_sum,
			  "block terms n=%lld d=%d k=%d threads %d: %lld rows' terms differ, sums %s",
			  (long long) n, d, k, threads, (long long) bad_row, bad_sum ? "differ" : "equal");
		ok += bad_row == 0 && !bad_sum;
		cases++;
		free(X);
		free(C);
		free(d2);
		free(lab);
		free(dist);
		free(sums);
		free(want);
		free(hash);
	}
	printf("  block terms: %d of %d cases equal the row-at-a-time loop\n", ok, cases);
}

int
main(void)
{
	uint64_t	seed = tu_seed();
	static const int dims[] = {1, 2, 3, 5, 8, 16, 17, 32, 64};

	printf("test_kmeans: seed %llu (replay: GPUCLUST_TEST_SEED=%llu)\n",
		   (unsigned long long) seed, (unsigned long long) seed);
	rs = seed;

	test_invalid();
	test_empty_constructed();
	test_reseed_convergence();
	test_k_equals_n();
	test_distinct_labels();
	test_labels_cases();
	test_block_terms();

	/* k-means++ and random seeding against the documented references */
	test_kmeanspp_reference(1000, 2, 10, DATA_BLOBS, 2);
	test_kmeanspp_reference(9000, 3, 40, DATA_UNIFORM, 2);	/* several blocks */
	test_kmeanspp_reference(9000, 3, 40, DATA_UNIFORM, 1);
	test_kmeanspp_reference(5000, 5, 1500, DATA_BLOBS, 2); /* 16 lanes */
	test_kmeanspp_reference(200, 4, 30, DATA_DUPLICATES, 2);
	test_kmeanspp_reference(50, 7, 50, DATA_UNIFORM, 2);	/* k = n */
	test_kmeanspp_reference(20, 1, 1, DATA_UNIFORM, 2);
	test_kmeanspp_reference(9001, 32, 500, DATA_BLOBS, 2);	/* 8 full lanes, row tails */
	test_kmeanspp_reference(3001, 8, 1200, DATA_UNIFORM, 2);	/* kept distances, 16 lanes */
	gc_km_pp_recompute = true;	/* the path of large n * lanes */
	test_kmeanspp_reference(9001, 32, 500, DATA_BLOBS, 2);
	test_kmeanspp_reference(5003, 5, 1500, DATA_BLOBS, 2);
	test_kmeanspp_reference(203, 4, 30, DATA_DUPLICATES, 1);
	gc_km_pp_recompute = false;
	test_random_init(1000, 3, 17);
	test_random_init(64, 2, 64);

	/* k-means|| against its reference, 1 and 3 threads */
	test_kmeans_par_reference(1000, 2, 10, DATA_BLOBS, false);
	test_kmeans_par_reference(9000, 3, 40, DATA_UNIFORM, false);	/* several blocks */
	test_kmeans_par_reference(5000, 9, 300, DATA_BLOBS, false);	/* many candidates */
	test_kmeans_par_reference(300, 4, 30, DATA_DUPLICATES, false);	/* few distinct rows */
	test_kmeans_par_reference(40, 3, 40, DATA_UNIFORM, false);	/* k = n */
	test_kmeans_par_reference(20, 1, 1, DATA_UNIFORM, false);
	test_kmeans_par_reference(4001, 32, 50, DATA_GRID, false);
	test_kmeans_par_reference(2000, 5, 25, DATA_BLOBS, true);
	test_kmeans_par_reference(9000, 3, 40, DATA_UNIFORM, true);
	test_kmeans_par_reference(300, 4, 12, DATA_DUPLICATES, true);
	for (int r = 0; r < 6; r++)
		test_kmeans_par_reference(1 + (int64_t) (tu_next(&rs) % 3000) + 40, dims[tu_next(&rs) % 9],
								  1 + (int) (tu_next(&rs) % 40), (data_kind) (r % 4), r % 2);

	/* sample weights and given initial centroids */
	test_invalid_init_weights();
	test_weighted_draws();
	test_kmeanspp_weighted(1000, 2, 10, DATA_BLOBS, 2);
	test_kmeanspp_weighted(9000, 3, 40, DATA_UNIFORM, 2);	/* several blocks */
	test_kmeanspp_weighted(5000, 5, 1500, DATA_BLOBS, 2);	/* 16 lanes */
	test_kmeanspp_weighted(9001, 32, 500, DATA_BLOBS, 2);	/* kept distances */
	test_kmeanspp_weighted(200, 4, 30, DATA_DUPLICATES, 1);
	gc_km_pp_recompute = true;
	test_kmeanspp_weighted(3001, 8, 300, DATA_UNIFORM, 2);
	gc_km_pp_recompute = false;
	for (int r = 0; r < 12; r++)
	{
		int			d = dims[tu_next(&rs) % 9];
		int64_t		n = 20 + (int64_t) (tu_next(&rs) % 3000);
		int			k = 1 + (int) (tu_next(&rs) % 30);

		test_lloyd_steps_w(n, d, k, (data_kind) (r % 3), r % 2 ? GC_INIT_RANDOM : GC_INIT_KMEANSPP,
						   r % 2 ? W_ZEROS : W_POSITIVE);
		/*
		 * (duplicated rows tie: re-seeding would differ, as in scikit-learn;
		 * n >= 12 >= k, so that k rows of positive weight exist)
		 */
		test_weights_as_duplicates(12 + (int64_t) (tu_next(&rs) % 2000), d, 1 + (int) (tu_next(&rs) % 12),
								   r % 2 ? DATA_BLOBS : DATA_UNIFORM);
		test_init_centroids(50 + (int64_t) (tu_next(&rs) % 3000), d, 1 + (int) (tu_next(&rs) % 20),
							(data_kind) (r % 3));
	}

	/* spherical k-means (metric cosine) */
	test_spherical_cases();
	for (int r = 0; r < 12; r++)
	{
		int			d = dims[tu_next(&rs) % 9];
		int64_t		n = 20 + (int64_t) (tu_next(&rs) % 3000);
		int			k = 1 + (int) (tu_next(&rs) % 30);

		test_spherical_steps(n, d < 2 ? 2 : d, k, (data_kind) (r % 4), (weight_kind) (r % 3));
		test_spherical_fit(20 + (int64_t) (tu_next(&rs) % 3000), d < 2 ? 2 : d,
						   1 + (int) (tu_next(&rs) % 20), (data_kind) (r % 4),
						   r % 2 ? GC_INIT_RANDOM : GC_INIT_KMEANSPP, (weight_kind) ((r + 1) % 3));
	}

	/* Lloyd step by step */
	for (int r = 0; r < 14; r++)
	{
		int			d = dims[tu_next(&rs) % 9];
		int64_t		n = 50 + (int64_t) (tu_next(&rs) % 3000);
		int			k = 1 + (int) (tu_next(&rs) % (r % 3 == 0 ? 3 : 40));
		data_kind	kind = (data_kind) (r % 3);

		test_lloyd_steps(n, d, k, kind, r % 2 ? GC_INIT_RANDOM : GC_INIT_KMEANSPP);
	}
	/* the narrower assignment kernels (AVX2, SSE2) the dispatcher may pick */
	for (int w = 4; w <= 8; w += 4)
	{
		gc_km_force_width(w);
		test_lloyd_steps(2000, 1 + (int) (tu_next(&rs) % 20), 37, DATA_BLOBS, GC_INIT_KMEANSPP);
		test_fit_shape(1500, 3, 20, DATA_UNIFORM, GC_INIT_KMEANSPP, 1, 1e-4);
	}
	gc_km_force_width(0);
	/* the assignment's bounds: fits with and without them alike */
	for (int r = 0; r < 32; r++)
	{
		static const int bd[] = {2, 3, 8, 9, 16, 33, 64, 128};
		int			d = bd[tu_next(&rs) % 8];
		data_kind	kind = (data_kind) (r % 4);
		int64_t		n = 200 + (int64_t) (tu_next(&rs) % 4000);
		int			k = 1 + (int) (tu_next(&rs) % (r % 5 == 0 ? 4 : 60));
		bool		cosine = r % 6 == 5 && (kind == DATA_UNIFORM || kind == DATA_BLOBS);

		test_bounds(n, d, k, kind, r % 3 == 2 ? GC_INIT_RANDOM : GC_INIT_KMEANSPP,
					1 + r % 2, r % 4 == 3 ? 1e-4 : 0.0, r % 5 == 3, cosine,
					r % 7 == 6 ? 1000.0f : 0.0f);
	}
	{
		/* blobs: most rows keep their label through the later iterations */
		int64_t		kept = test_bounds(20000, 16, 100, DATA_BLOBS, GC_INIT_KMEANSPP, 1, 0.0,
									   false, false, 0.0f);

		CHECK(kept > 20000, "bounds: 20000 x 16 blobs: the bounds kept %lld rows",
			  (long long) kept);
	}
	test_bounds(6000, 32, 300, DATA_UNIFORM, GC_INIT_RANDOM, 1, 0.0, false, false, 0.0f);
	test_bounds(3000, 8, 60, DATA_DUPLICATES, GC_INIT_RANDOM, 3, 0.0, true, false, 0.0f);
	test_bounds(4000, 12, 3000, DATA_UNIFORM, GC_INIT_KMEANSPP, 1, 0.0, false, false, 0.0f);
	test_lloyd_steps(300, 2, 30, DATA_DUPLICATES, GC_INIT_RANDOM);
	test_lloyd_steps(9000, 2, 3, DATA_BLOBS, GC_INIT_KMEANSPP);	/* big clusters */

	/* whole fits over many shapes */
	for (int r = 0; r < 36; r++)
	{
		int			d = dims[tu_next(&rs) % 9];
		int64_t		n = 1 + (int64_t) (tu_next(&rs) % 4000);
		int			kk = r % 4 == 0 ? 1 : r % 4 == 1 ? 2 : r % 4 == 2 ? 1 + (int) (tu_next(&rs) % 50) : (int) n;
		int			k = kk > n ? (int) n : kk;

		if (k > 300)
			k = 300, n = n < 300 ? n : 300;	/* k = n, kept small */
		test_fit_shape(n, d, k, (data_kind) (r % 3),
					   r % 5 == 4 ? GC_INIT_RANDOM : GC_INIT_KMEANSPP,
					   1 + r % 3, r % 6 == 5 ? 0.0 : 1e-4);
	}
	test_fit_shape(20000, 2, 2, DATA_BLOBS, GC_INIT_KMEANSPP, 1, 1e-4);	/* segments */
	test_fit_shape(20000, 16, 100, DATA_BLOBS, GC_INIT_KMEANSPP, 1, 1e-4);
	test_fit_shape(3000, 3, 60, DATA_DUPLICATES, GC_INIT_RANDOM, 3, 0.0);
	/* k-means|| and auto in whole fits (auto at k >= 256 is k-means||) */
	test_fit_shape(5000, 4, 30, DATA_BLOBS, GC_INIT_KMEANS_PARALLEL, 2, 1e-4);
	test_fit_shape(2000, 3, 40, DATA_DUPLICATES, GC_INIT_KMEANS_PARALLEL, 1, 0.0);
	test_fit_shape(3000, 2, 300, DATA_UNIFORM, GC_INIT_AUTO, 1, 1e-4);
	{
		gc_kmeans_params pa = KM_PARAMS(300, 5, 1e-4, GC_INIT_AUTO, 1, 77),
					pp = KM_PARAMS(300, 5, 1e-4, GC_INIT_KMEANS_PARALLEL, 1, 77),
					p3 = KM_PARAMS(30, 5, 1e-4, GC_INIT_AUTO, 2, 78),
					p4 = KM_PARAMS(30, 5, 1e-4, GC_INIT_KMEANSPP, 2, 78);
		float	   *X = make_data(3000, 3, DATA_BLOBS);
		fit			fa,
					fp;

		do_fit(&fa, X, 3000, 3, &pa, 2);
		do_fit(&fp, X, 3000, 3, &pp, 2);
		CHECK(same_fit(&fa, &fp, 3000, 300, 3), "auto at k = 300 is not k-means||");
		free_fit(&fa);
		free_fit(&fp);
		do_fit(&fa, X, 3000, 3, &p3, 2);
		do_fit(&fp, X, 3000, 3, &p4, 2);
		CHECK(same_fit(&fa, &fp, 3000, 30, 3), "auto at k = 30 is not k-means++");
		free_fit(&fa);
		free_fit(&fp);
		free(X);
	}

	test_cancel();
	return test_summary("test_kmeans");
}
