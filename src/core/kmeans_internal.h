/*
 * kmeans_internal.h — the steps of CPU k-means, exposed so that unit tests
 * can drive Lloyd iterations one at a time.  gc_kmeans_cpu (kmeans.c) is
 * built from these.
 *
 * Determinism: every floating-point reduction runs over fixed blocks of
 * GC_KM_BLOCK points (or fixed segments of a cluster's members), summed
 * sequentially inside a block and then block after block, so results do
 * not depend on the thread count.
 */
#ifndef GPUCLUST_KMEANS_INTERNAL_H
#define GPUCLUST_KMEANS_INTERNAL_H

#include <math.h>
#include <string.h>

#include "gpuclust_core.h"
#include "rng.h"

/* Points per block of every parallel loop and fixed-order reduction. */
#define GC_KM_BLOCK 4096

/* Members of one cluster summed sequentially before segments are combined. */
#define GC_KM_SEGMENT 4096

/*
 * Random streams (see rng.h): run r of n_init draws from stream
 * r + GC_KM_STREAM_KMEANSPP, r + GC_KM_STREAM_RANDOM or
 * r + GC_KM_STREAM_KMEANSPAR (gc_km_init_stream).
 */
#define GC_KM_STREAM_KMEANSPP UINT64_C(0)
#define GC_KM_STREAM_RANDOM   (UINT64_C(1) << 32)
#define GC_KM_STREAM_KMEANSPAR (UINT64_C(2) << 32)

/*
 * k-means|| (gc_km_init_kmeans_par) reduces its candidates with k-means++
 * drawing from its own stream + GC_KM_PAR_REDUCE_STREAM.
 */
#define GC_KM_PAR_REDUCE_STREAM (UINT64_C(1) << 48)

/* ---- seeding (kmeans_init.c) ---- */

/* 2 + floor(ln k), as scikit-learn. */
int			gc_km_n_local_trials(int k);

/*
 * Seeding's sums are exact integer sums, so that any order of addition (a
 * thread count, a GPU's blocks and atomics) gives the same sum and the
 * same draws.  A step's terms t_i = w_i * (double) D²(i) (t_i = (double)
 * D²(i) unweighted; D² the float32 gc_dist2 to the nearest centre so far)
 * are put on a grid set by the step's largest term M:
 *     q(t) = t * S rounded to the nearest integer (ties to even),
 *     S = gc_km_pot_scale(M, n) = 2^(B - e),
 * M < 2^e (the least such e), B = min(52, 63 - (bits of n)), so that
 * q <= 2^B and a sum of n of them <= 2^63; q is the low bits of the double
 * t * S + 2^52 (two operations, which the CPU's vectors do 8 at a time).
 * A term below 2^-(B+1) of M counts 0 (the draws' probabilities are exact
 * to 2^-B of the largest; B = 43 at n = 1M).
 * M = 0: S = 0, every q is 0.
 */
GC_HD double
gc_km_pot_scale(double M, int64_t n)
{
	int			e,
				bits = 0;

	if (!(M > 0.0))
		return 0.0;
	(void) frexp(M, &e);		/* M = f 2^e, 0.5 <= f < 1 */
	while (bits < 63 && (n >> bits) != 0)
		bits++;
	return ldexp(1.0, (63 - bits < 52 ? 63 - bits : 52) - e);
}

/* The term of row i with distance² d2: w[i] * (double) d2 (w NULL: 1). */
GC_HD double
gc_km_pot_term(const double *w, int64_t i, float d2)
{
	return w != NULL ? w[i] * (double) d2 : (double) d2;
}

#define GC_KM_POT_2P52 UINT64_C(0x4330000000000000)	/* 2^52's bits */

GC_HD uint64_t
gc_km_pot_q(double t, double S)
{
	const double r = t * S + 0x1p52;	/* not contracted: -ffp-contract=off, -fmad=false */
	uint64_t	b;

	memcpy(&b, &r, sizeof(b));
	return b - GC_KM_POT_2P52;
}

/*
 * A draw over the terms summing to T > 0: R = floor(u * T) < T, u =
 * gc_rng_uniform(seed, stream, ctr) (the 53-bit fraction, exactly).
 */
GC_HD uint64_t
gc_km_pot_draw(uint64_t seed, uint64_t stream, uint64_t ctr, uint64_t T)
{
	const uint64_t u = (gc_rng_u64(seed, stream, ctr) >> 11) << 11;	/* u * 2^64 */

#ifdef __CUDA_ARCH__
	return __umul64hi(u, T);
#else
	return (uint64_t) (((unsigned __int128) u * T) >> 64);
#endif
}

/*
 * Greedy k-means++ (scikit-learn's _kmeans_plusplus), draws from
 * gc_rng_u64(seed, stream, counter):
 *   counter 0: first centre = row floor(u * n) (clamped to n-1);
 *   counter 1 + (c-1)*L + t: trial t of centre c: with the step's grid
 *     (above: M the largest D² before centre c) and T = sum_i q(D²(i)),
 *     R = gc_km_pot_draw(.., T), the candidate is the first row i with
 *     q(D²(0)) + ... + q(D²(i)) > R (the last row if T = 0).
 * D²(i) is the float32 gc_dist2 to the closest chosen centre.  A
 * candidate's potential is sum_i q(min(D²(i), dist²(i, candidate))) on the
 * same grid; the lowest potential wins (ties: the earliest trial).  chosen
 * (k row indices) may be NULL.
 */
gc_code		gc_km_init_kmeanspp(const gc_ctx *ctx, const float *X, int64_t n,
								int d, int k, uint64_t seed, uint64_t stream,
								float *centroids, int64_t *chosen,
								gc_status *st);

/*
 * The same, weighted by w (n weights >= 0, at least k positive; NULL: the
 * unweighted draws above, bit for bit), as scikit-learn >= 1.3: the first
 * centre is the first row of positive weight whose weight prefix sum
 * exceeds u * sum w (gc_km_weighted_first); the terms are w_i D²(i), so a
 * row of weight 0 is never a trial; with T = 0 a trial is the last row of
 * positive weight.  The GPU k-means seeds with it on the host when its
 * rows are streamed (then unweighted: weighted rows stay resident), and
 * draws the same on the device otherwise.
 */
gc_code		gc_km_init_kmeanspp_w(const gc_ctx *ctx, const float *X,
								  int64_t n, int d, int k, const double *w,
								  uint64_t seed, uint64_t stream,
								  float *centroids, int64_t *chosen,
								  gc_status *st);

/*
 * The block of a draw R: the first b < nb with off[b+1] > R, given
 * off[nb] > R (off: the nb + 1 prefix sums of a blocking of the terms,
 * off[0] = 0).  Any blocking finds the same row.
 */
GC_HD int64_t
gc_km_pp_block(const uint64_t *off, int64_t nb, uint64_t R)
{
	int64_t		lo = 0,
				hi = nb;		/* first b in [lo, hi) with off[b+1] > R */

	while (lo < hi)
	{
		int64_t		mid = lo + (hi - lo) / 2;

		if (off[mid + 1] > R)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

/* Test switch: k-means++ recomputes the winner's distances at any size. */
#ifdef GC_TESTING
extern bool gc_km_pp_recompute;
#else
#define gc_km_pp_recompute false
#endif

/*
 * k distinct rows drawn uniformly: draw t gives row floor(u_t * n) (clamped),
 * rows already taken are skipped (rejection), counters 0, 1, 2 ...
 */
gc_code		gc_km_init_random(const gc_ctx *ctx, const float *X, int64_t n,
							  int d, int k, uint64_t seed, uint64_t stream,
							  float *centroids, int64_t *chosen,
							  gc_status *st);

/*
 * The rows gc_km_init_random draws, without the rows themselves: rows[c]
 * (0-based, of n) is the row of centre c.  The distributed k-means
 * (kmeans_step_sql.c) seeds from the same rows of a source in a fixed order.
 */
gc_code		gc_km_random_rows(const gc_ctx *ctx, int64_t n, int k,
							  uint64_t seed, uint64_t stream, int64_t *rows,
							  gc_status *st);

/*
 * The same, weighted by w (NULL: gc_km_init_random): draw c (counter c)
 * takes a row not yet taken with probability proportional to its weight,
 * as numpy's choice(n, k, replace=False, p=w / sum w) does.  The GPU
 * k-means seeds with it too, on the host.
 */
gc_code		gc_km_init_random_w(const gc_ctx *ctx, const float *X, int64_t n,
								int d, int k, const double *w, uint64_t seed,
								uint64_t stream, float *centroids,
								int64_t *chosen, gc_status *st);

/*
 * The first row of positive weight whose weight prefix sum (a sequential
 * double sum from row 0) exceeds u * sum w, u = gc_rng_uniform(seed,
 * stream, 0), sum w sequential too; the last row of positive weight when
 * rounding leaves none.  The first centre of weighted k-means++.
 */
int64_t		gc_km_weighted_first(const double *w, int64_t n, uint64_t seed,
								 uint64_t stream);

/*
 * k-means|| (Bahmani, Moseley, Vattani, Kumar, Vassilvitskii 2012,
 * "Scalable k-means++"), drawing from gc_rng_uniform(seed, stream, .):
 *
 *  1. candidate 0 is k-means++'s first centre (counter 0; weighted:
 *     gc_km_weighted_first).  D²(i) is the float32 gc_dist2 from row i to
 *     its nearest candidate, lab(i) that candidate (ties: lowest index).
 *  2. Round r = 1, 2, ...: phi = (double) sum_i q(t_i) / S, the exact
 *     sum of the round's terms t_i = w_i * (double) D²(i) on its grid
 *     (above; w_i = 1 without weights).  Stop if phi is not > 0.  Row i
 *     is kept iff
 *       gc_rng_uniform(seed, stream, 1 + (r-1)*n + i) < (ell * t_i) / phi,
 *     ell = GC_KM_PAR_OVERSAMPLE * k, t_i = the row's term (double ops in
 *     that order); the kept rows become the next candidates in row order
 *     (a candidate, or a copy of one, has D² = 0: never kept again).  Then
 *     D² and lab take the new candidates in index order, a strictly
 *     smaller distance moving the row (so lab is the lowest nearest).
 *     Rounds run while r <= GC_KM_PAR_ROUNDS, or while fewer than k
 *     candidates are found and r <= GC_KM_PAR_MAX_ROUNDS.
 *  3. With m >= k candidates: candidate c weighs the number of rows with
 *     lab == c (weighted: the sum of their w, a sequential double sum in
 *     row order), and the centres are gc_km_init_kmeanspp_w over the m
 *     candidate rows with those weights, seed, and stream +
 *     GC_KM_PAR_REDUCE_STREAM.  With m < k (fewer than k distinct rows
 *     of positive weight, or bad luck in all the rounds): the centres are
 *     gc_km_init_kmeanspp_w over all the rows, the same seed and stream.
 *
 * chosen (may be NULL) gets the k centres' rows of X.  Threads do not
 * change the result; the GPU (cuda/kmeans_par.cu) reproduces it bit for
 * bit (unweighted).
 */
#define GC_KM_PAR_ROUNDS 5
#define GC_KM_PAR_MAX_ROUNDS 20
#define GC_KM_PAR_OVERSAMPLE 2.0

gc_code		gc_km_init_kmeans_par_w(const gc_ctx *ctx, const float *X,
									int64_t n, int d, int k, const double *w,
									uint64_t seed, uint64_t stream,
									float *centroids, int64_t *chosen,
									gc_status *st);
gc_code		gc_km_init_kmeans_par(const gc_ctx *ctx, const float *X,
								  int64_t n, int d, int k, uint64_t seed,
								  uint64_t stream, float *centroids,
								  int64_t *chosen, gc_status *st);

/* k-means|| round r's draw for row i of term t (step 2 above): kept? */
GC_HD int
gc_km_par_keep(uint64_t seed, uint64_t stream, int r, int64_t n, int64_t i,
			   double ell, double t, double phi)
{
	return gc_rng_uniform(seed, stream, 1 + (uint64_t) (r - 1) * (uint64_t) n + (uint64_t) i) <
		(ell * t) / phi;
}

/*
 * init 'auto': k-means|| for k >= GC_KM_AUTO_PARALLEL_K, else k-means++.
 * It depends on k only, so the CPU and the GPU pick alike (and give the
 * same centres for the same seed).
 */
#define GC_KM_AUTO_PARALLEL_K 256

gc_kmeans_init gc_km_init_resolve(gc_kmeans_init init, int64_t n, int d, int k);

/* The stream of run `run` of a resolved init (k-means++, random, k-means||). */
uint64_t	gc_km_init_stream(gc_kmeans_init init, int run);

/* ---- Lloyd steps (kmeans_assign.c, kmeans_update.c) ---- */

/* Working memory of the Lloyd steps for one (n, d, k, threads). */
typedef struct gc_km_seg
{
	int32_t		cluster;
	int32_t		slot;			/* partial-sum row, or -1: write the mean */
	int64_t		begin,
				end;			/* range of ws->order */
} gc_km_seg;

typedef struct gc_km_ws
{
	int64_t		n;
	int			d,
				k,
				nt;
	int			kpad;			/* k rounded up to 16 */
	float	   *ct;				/* d x kpad centres, transposed, NaN-padded */
	int32_t    *lab_eff;		/* n: labels after re-seeding moves */
	int64_t    *order;			/* n: rows sorted by cluster, stably */
	int64_t    *cnt;			/* k */
	int64_t    *start;			/* k + 1 */
	int64_t    *hist;			/* nt x k */
	gc_km_seg  *seg;			/* max_seg */
	int64_t		max_seg;
	double	   *partial;		/* max_part x d */
	int64_t		max_part;
	int64_t    *far;			/* k: rows chosen for re-seeding */
	double	   *tsum;			/* nt x d: per-thread sums */
	/* sample weights (set by the caller; NULL: every row weighs 1) */
	const double *weights;		/* n */
	/* spherical k-means (set by the caller): the update normalizes */
	bool		unit_centres;
	int64_t    *pcnt;			/* k: rows of positive weight */
	int64_t    *phist;			/* nt x k: the same per chunk */
	double	   *pw;				/* max_part: weight sums of partial segments */
} gc_km_ws;

/* Working memory for (n, d, k, n_threads), unweighted (ws->weights NULL). */
gc_km_ws   *gc_km_ws_create(int64_t n, int d, int k, int n_threads);
void		gc_km_ws_destroy(gc_km_ws *ws);

/*
 * The team of a Lloyd step (gc_team_adapt), at most the threads ws was
 * made for: its per-thread scratch.
 */
int			gc_km_team(const gc_ctx *ctx, const gc_km_ws *ws);

/*
 * Assignment: labels[i] = argmin_c gc_dist2(X_i, C_c), ties to the lowest c,
 * d2[i] = that float distance².  *n_changed counts rows whose label differs
 * from the value labels[i] held before (fill labels with -1 first).
 */
gc_code		gc_km_assign(const gc_ctx *ctx, gc_km_ws *ws, const float *X,
						 int64_t n, int d, const float *C, int k,
						 int32_t *labels, float *d2, int64_t *n_changed,
						 gc_status *st);

/*
 * Update: C_new = mean of each cluster's rows (double sums, rounded to
 * float); with ws->weights, the weighted mean sum(w x) / sum(w), each sum
 * in double with the same fixed order.  Empty clusters (no row; with
 * weights: no row of positive weight) are re-seeded as scikit-learn does:
 * the rows farthest from their centres (by d2; ties: lowest row; only rows
 * with d2 > 0; with weights: of positive weight) are moved, the farthest
 * to the lowest empty cluster id, and become its centre; a cluster left
 * with no row (no weight) keeps its centre from C_old.  With ws->unit_centres
 * (spherical k-means) each new centre is normalized (gc_unit_row), and a
 * mean of 0 keeps its centre from C_old too.  *shift = sum of squared
 * centre moves (double); *n_relocated = clusters re-seeded (may be NULL):
 * fewer than the empty ones when fewer rows qualify.
 */
gc_code		gc_km_update(const gc_ctx *ctx, gc_km_ws *ws, const float *X,
						 int64_t n, int d, int k, const int32_t *labels,
						 const float *d2, const float *C_old, float *C_new,
						 double *shift, int *n_relocated, gc_status *st);

#ifdef GC_TESTING
/* Tests only: assignment kernel width 4, 8 or 16 (0: the best the CPU has). */
void		gc_km_force_width(int w);
#endif

/*
 * sum_i ||X_i - C_{labels[i]}||² recomputed in double; distance[i] gets the
 * square root of each term when not NULL.  gc_km_inertia_w weighs term i by
 * weights[i] (NULL: 1), the distances staying unweighted, and takes the
 * metric: under cosine (X and C unit rows) the terms and the distances are
 * the cosine distances (gc_km_cost, gc_km_distance).
 */
gc_code		gc_km_inertia(const gc_ctx *ctx, const float *X, int64_t n, int d,
						  const float *C, const int32_t *labels,
						  double *distance, double *inertia, gc_status *st);
gc_code		gc_km_inertia_w(const gc_ctx *ctx, const float *X, int64_t n,
							int d, const float *C, const int32_t *labels,
							const double *weights, gc_metric metric,
							double *distance, double *inertia,
							gc_status *st);

/* Mean over features of the (population) variance of X, in double. */
gc_code		gc_km_mean_variance(const gc_ctx *ctx, const float *X, int64_t n,
								int d, double *out, gc_status *st);

#endif							/* GPUCLUST_KMEANS_INTERNAL_H */
