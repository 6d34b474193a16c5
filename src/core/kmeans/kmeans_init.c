/*
 * kmeans_init.c — k-means seeding: greedy k-means++, k-means|| and uniform
 * random rows.
 *
 * Every draw comes from the counter-based generator of rng.h, and every sum
 * of the draws' terms is an exact integer sum on the step's grid
 * (kmeans.h), so the centres depend on (seed, stream, data) only —
 * not on the thread count or the order of the additions — and the GPU
 * reproduces them.
 *
 * With sample weights (the _w forms, which the GPU k-means also runs on
 * the host: cuda/kmeans/kmeans.cu, km_seed_host), the draws are weighted as
 * scikit-learn (>= 1.3) weighs them: the first k-means++ centre and the
 * random rows with probability proportional to the weight, the k-means++
 * trials proportional to w D², and a trial's potential is sum w min(D², .).
 * Rows of weight 0 are never drawn.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kmeans/kmeans_internal.h"
#include "common/rng.h"

/* Candidates per centre, padded to a multiple of 8 lanes (L <= 23). */
#define PP_LANES 8
#define PP_MAX_LP 24

typedef float v8f __attribute__((vector_size(32)));
typedef double v8d __attribute__((vector_size(64)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef uint64_t v8u __attribute__((vector_size(64)));

int
gc_km_n_local_trials(int k)
{
	return 2 + (int) floor(log((double) k));
}

/* Unaligned 8-float load. */
typedef float v8f_u __attribute__((vector_size(32), aligned(4)));
#define load8(p) (*(const v8f_u *) (p))

/*
 * out[t] = sum over rows i0..i1-1 of q(w_i min(closest[i], gc_dist2(X_i,
 * candidate t))) on the grid S (kmeans.h), for nv*8 candidates stored
 * transposed in cand (cand[j*nv*8 + t]).  The float distance is built as
 * gc_dist2 builds it ((c-x)² == (x-c)² exactly), so it is bit-identical.
 * PP_ROWS rows go together: each sum over dimensions is a chain of
 * dependent additions, and independent chains hide their latency.  When
 * dist is not NULL, dist[(i - i0) * lp + t] keeps each distance, so that
 * the winner's need not be computed again.
 */
#define PP_ROWS 4

/*
 * For d >= PP_DIST_MIN_D and up to PP_DIST_MAX floats (256 MB), the
 * potential pass keeps every distance it computes and the winner's update
 * reads them back; otherwise the update computes the winner's distances
 * again (pp_update_closest).  Measured on 2 threads: keeping them makes the
 * whole seeding 1.2x (d = 8) to 1.4x (d = 32) faster, and d = 2 1.2x slower.
 */
#define PP_DIST_MIN_D 8
#define PP_DIST_MAX ((size_t) 64 << 20)

/*
 * Seeding's block loop: the statements given run for each block b of
 * GC_KM_BLOCK rows, rows [i0, i1) of n, the nb blocks shared by the
 * caller's nt threads (dynamic: blocks cost alike, threads do not run
 * alike).  KM_BLOCKS_OR_CANCEL also polls the cancel flags (ctx) before
 * each block: once one is seen the remaining blocks are skipped (the
 * caller's volatile int cancelled), and then the caller fails with
 * GC_ECANCEL (its rc, st) at its label done.  KM_BLOCKS_WITH adds OpenMP
 * clauses to the loop (a reduction).
 */
#define KM_PRAGMA(x) _Pragma(#x)
#define KM_BLOCKS_WITH(clauses, ...) \
	KM_PRAGMA(omp parallel for num_threads(nt) schedule(dynamic, 1) clauses) \
	for (int64_t b = 0; b < nb; b++) \
	{ \
		const int64_t i0 = b * GC_KM_BLOCK, \
					i1 = i0 + GC_KM_BLOCK < n ? i0 + GC_KM_BLOCK : n; \
		__VA_ARGS__ \
	}
#define KM_BLOCKS(...) KM_BLOCKS_WITH(, __VA_ARGS__)

#define KM_BLOCKS_OR_CANCEL(...) \
	do { \
		KM_BLOCKS( \
			if (cancelled || gc_cancelled(ctx)) \
			{ \
				cancelled = 1; \
				continue; \
			} \
			__VA_ARGS__ \
		) \
		if (cancelled) \
		{ \
			rc = gc_fail(st, GC_ECANCEL, "canceled"); \
			goto done; \
		} \
	} while (0)

#ifdef GC_TESTING
/* tests set this to take the recomputing path at any size */
bool		gc_km_pp_recompute = false;
#endif

static inline __attribute__((always_inline)) void
pp_pots_block_nv(const float *X, int64_t i0, int64_t i1, int d,
				 const float *cand, const float *closest, const double *w,
				 double S, uint64_t *out, float *dist, const int nv)
{
	const int	lp = nv * PP_LANES;
	const v8d	sv = {S, S, S, S, S, S, S, S};
	const v8d	m52 = {0x1p52, 0x1p52, 0x1p52, 0x1p52, 0x1p52, 0x1p52, 0x1p52, 0x1p52};
	v8u			acc[PP_MAX_LP / PP_LANES];
	int64_t		i = i0;

	for (int v = 0; v < nv; v++)
		acc[v] = (v8u) {0};
	for (; i < i1; i += PP_ROWS)
	{
		const int	rows = i1 - i < PP_ROWS ? (int) (i1 - i) : PP_ROWS;
		v8f			s[PP_ROWS][PP_MAX_LP / PP_LANES];

		if (rows == PP_ROWS)
		{
			for (int v = 0; v < nv; v++)
				for (int r = 0; r < PP_ROWS; r++)
				{
					s[r][v] = GC_L2_FIRST_V(load8(cand + v * PP_LANES), X[(i + r) * d]);
				}
			for (int j = 1; j < d; j++)
				for (int v = 0; v < nv; v++)
				{
					v8f			c = load8(cand + j * lp + v * PP_LANES);

					for (int r = 0; r < PP_ROWS; r++)
						s[r][v] = GC_L2_STEP_V(s[r][v], c, X[(i + r) * d + j]);
				}
		}
		else
			for (int r = 0; r < rows; r++)
			{
				const float *x = X + (i + r) * d;

				for (int v = 0; v < nv; v++)
					s[r][v] = GC_L2_FIRST_V(load8(cand + v * PP_LANES), x[0]);
				for (int j = 1; j < d; j++)
					for (int v = 0; v < nv; v++)
						s[r][v] = GC_L2_STEP_V(s[r][v], load8(cand + j * lp + v * PP_LANES), x[j]);
			}
		for (int r = 0; r < rows; r++)
		{
			const float cl = closest[i + r];
			v8f			c = (v8f) {cl, cl, cl, cl, cl, cl, cl, cl};

			for (int v = 0; v < nv; v++)
			{
				v8i			m = s[r][v] < c;

				if (dist != NULL)
					memcpy(dist + (i - i0 + r) * lp + v * PP_LANES, &s[r][v], sizeof(v8f));
				v8f			mn = (v8f) (((v8i) s[r][v] & m) | ((v8i) c & ~m));
				v8d			t = __builtin_convertvector(mn, v8d);

				if (w != NULL)
					t = w[i + r] * t;
				/* gc_km_pot_q's t * S + 2^52, 8 at a time; 2^52's
				 * bits are taken off the sum once per row */
				{
					const v8d	r = t * sv + m52;
					v8u			b;

					memcpy(&b, &r, sizeof(b));
					acc[v] += b;
				}
			}
		}
	}
	for (int v = 0; v < nv; v++)
	{
		acc[v] -= (uint64_t) (i1 - i0) * GC_KM_POT_2P52;
		memcpy(out + v * PP_LANES, &acc[v], sizeof(acc[v]));
	}
}

/*
 * closest[i] = min(closest[i], gc_dist2(X_i, c)) for rows i0..i1-1, PP_ROWS
 * rows at a time (independent chains, each summed in dimension order).
 */
static void
pp_update_closest(const float *X, int64_t i0, int64_t i1, int d,
				  const float *c, float *closest)
{
	int64_t		i = i0;

	for (; i + PP_ROWS <= i1; i += PP_ROWS)
	{
		const float *x = X + i * d;
		float		q[PP_ROWS];

		for (int r = 0; r < PP_ROWS; r++)
			q[r] = gc_l2_first(x[r * d], c[0]);
		for (int j = 1; j < d; j++)
			for (int r = 0; r < PP_ROWS; r++)
				q[r] = gc_l2_step(q[r], x[r * d + j], c[j]);
		for (int r = 0; r < PP_ROWS; r++)
			if (q[r] < closest[i + r])
				closest[i + r] = q[r];
	}
	for (; i < i1; i++)
	{
		float		q = gc_dist2(X + i * d, c, d);

		if (q < closest[i])
			closest[i] = q;
	}
}

__attribute__((target_clones("avx512f", "avx2", "default")))
static void
pp_pots_block(const float *X, int64_t i0, int64_t i1, int d, const float *cand,
			  int lp, const float *closest, const double *w, double S,
			  uint64_t *out, float *dist)
{
	switch (lp / PP_LANES)
	{
		case 1:
			pp_pots_block_nv(X, i0, i1, d, cand, closest, w, S, out, dist, 1);
			break;
		case 2:
			pp_pots_block_nv(X, i0, i1, d, cand, closest, w, S, out, dist, 2);
			break;
		default:
			pp_pots_block_nv(X, i0, i1, d, cand, closest, w, S, out, dist, 3);
			break;
	}
}


/*
 * The first row i of positive weight with cumsum(w)[i] > r: the weighted
 * draw of a row (r = u * sum w).  The last row of positive weight when
 * rounding leaves r at or beyond the sum.
 */
static int64_t
weighted_row(const double *w, int64_t n, double r)
{
	double		cum = 0.0;
	int64_t		last = n - 1;

	for (int64_t i = 0; i < n; i++)
		if (w[i] > 0.0)
		{
			cum += w[i];
			last = i;
			if (cum > r)
				return i;
		}
	return last;
}

int64_t
gc_km_weighted_first(const double *w, int64_t n, uint64_t seed, uint64_t stream)
{
	double		total = 0.0;
	int64_t		first;

	for (int64_t i = 0; i < n; i++)
		total += w[i];
	first = weighted_row(w, n, gc_rng_uniform(seed, stream, 0) * total);
	return first < n ? first : n - 1;
}

/*
 * The largest term of rows i0 .. i1-1; unweighted, the largest D² (its
 * bits: non-negative floats order as integers, which vectorises).
 */
static double
pp_max_term(const float *closest, const double *w, int64_t i0, int64_t i1)
{
	if (w == NULL)
	{
		uint32_t	mb = 0;
		float		m;

		for (int64_t i = i0; i < i1; i++)
		{
			uint32_t	b;

			memcpy(&b, closest + i, sizeof(b));
			mb = b > mb ? b : mb;
		}
		memcpy(&m, &mb, sizeof(m));
		return (double) m;
	}
	else
	{
		double		m = 0.0;

		for (int64_t i = i0; i < i1; i++)
		{
			double		t = gc_km_pot_term(w, i, closest[i]);

			m = t > m ? t : m;
		}
		return m;
	}
}

/*
 * A k-means++ draw R < off[nb] (kmeans.h): the first row i with
 * off[b] + q(t_b0) + ... + q(t_i) > R, b the block of R; such a row has
 * q(t_i) > 0, so a positive weight.  With off[nb] = 0: last (the last row
 * of positive weight).
 */
static int64_t
pp_search(const uint64_t *off, int64_t nb, const float *closest,
		  const double *w, int64_t n, double S, uint64_t R, int64_t last)
{
	if (off[nb] > R)
	{
		const int64_t b = gc_km_pp_block(off, nb, R),
					i0 = b * GC_KM_BLOCK,
					i1 = i0 + GC_KM_BLOCK < n ? i0 + GC_KM_BLOCK : n;
		uint64_t	acc = off[b];

		for (int64_t i = i0; i < i1; i++)
		{
			acc += gc_km_pot_q(gc_km_pot_term(w, i, closest[i]), S);
			if (acc > R)
				return i;
		}
	}
	return last;
}

/* The largest term of the n rows. */
static double
pp_max(int nt, const float *closest, const double *w, int64_t n, int64_t nb)
{
	double		M = 0.0;

	KM_BLOCKS_WITH(reduction(max:M),
		const double m = pp_max_term(closest, w, i0, i1);

		M = m > M ? m : M;
	)
	return M;
}

/*
 * The step's grid from its largest term M, and the block sums of its
 * terms on it: bq[b] = sum of q over block b, off their prefix sums.
 */
static double
pp_grid(int nt, const float *closest, const double *w, int64_t n, int64_t nb,
		double M, uint64_t *bq, uint64_t *off)
{
	const double S = gc_km_pot_scale(M, n);

	KM_BLOCKS(
		uint64_t	s = 0;

		for (int64_t i = i0; i < i1; i++)
			s += gc_km_pot_q(gc_km_pot_term(w, i, closest[i]), S);
		bq[b] = s;
	);
	off[0] = 0;
	for (int64_t b = 0; b < nb; b++)
		off[b + 1] = off[b] + bq[b];
	return S;
}

gc_code
gc_km_init_kmeanspp(const gc_ctx *ctx, const float *X, int64_t n, int d, int k,
					uint64_t seed, uint64_t stream, float *centroids,
					int64_t *chosen, gc_status *st)
{
	return gc_km_init_kmeanspp_w(ctx, X, n, d, k, NULL, seed, stream,
								 centroids, chosen, st);
}

gc_code
gc_km_init_kmeanspp_w(const gc_ctx *ctx, const float *X, int64_t n, int d,
					  int k, const double *w, uint64_t seed, uint64_t stream,
					  float *centroids, int64_t *chosen, gc_status *st)
{
	const int	L = gc_km_n_local_trials(k);
	const int	lp = (L + PP_LANES - 1) / PP_LANES * PP_LANES;
	const int64_t nb = (n + GC_KM_BLOCK - 1) / GC_KM_BLOCK;
	int			nt = gc_region_threads(gc_team_adapt(ctx), nb);
	float	   *closest = malloc(sizeof(float) * (size_t) n);
	uint64_t   *off = malloc(sizeof(uint64_t) * (size_t) (nb + 1));
	uint64_t   *bs = malloc(sizeof(uint64_t) * (size_t) (nb * lp));
	uint64_t   *bq = malloc(sizeof(uint64_t) * (size_t) nb);
	double	   *bm = malloc(sizeof(double) * (size_t) nb);
	float	   *cand = malloc(sizeof(float) * (size_t) d * lp);
	/* every candidate's distance to every row, when that is small enough */
	float	   *dist = (size_t) n * lp <= PP_DIST_MAX && d >= PP_DIST_MIN_D && !gc_km_pp_recompute ?
		malloc(sizeof(float) * (size_t) n * lp) : NULL;
	int64_t		cid[PP_MAX_LP];
	int64_t		first,
				last = n - 1;	/* the last row of positive weight */
	double		S;
	volatile int cancelled = 0;
	gc_code		rc = GC_OK;

	if (closest == NULL || off == NULL || bs == NULL || bq == NULL || bm == NULL || cand == NULL)
	{
		rc = gc_fail(st, GC_ENOMEM, "out of memory in k-means++ seeding");
		goto done;
	}

	/* First centre: uniform row (weighted: in proportion to the weight). */
	if (w != NULL)
	{
		first = gc_km_weighted_first(w, n, seed, stream);
		while (last > 0 && !(w[last] > 0.0))
			last--;
	}
	else
		first = (int64_t) (gc_rng_uniform(seed, stream, 0) * (double) n);
	if (first >= n)
		first = n - 1;
	memcpy(centroids, X + first * d, sizeof(float) * d);
	if (chosen)
		chosen[0] = first;

	/* D² to the first centre, its grid and block sums. */
	KM_BLOCKS_OR_CANCEL(
		for (int64_t i = i0; i < i1; i++)
			closest[i] = gc_dist2(X + i * d, centroids, d);
	);
	S = pp_grid(nt, closest, w, n, nb, pp_max(nt, closest, w, n, nb), bq, off);

	for (int c = 1; c < k; c++)
	{
		int			best = 0;
		uint64_t	best_pot = 0;
		double		M = 0.0,
					S1;

		nt = gc_region_threads(gc_team_adapt(ctx), nb);	/* the load may have changed */
		if (gc_cancelled(ctx))
		{
			rc = gc_fail(st, GC_ECANCEL, "canceled");
			goto done;
		}
		/* Draw the candidates; lanes past L repeat candidate 0. */
		for (int t = 0; t < L; t++)
		{
			const uint64_t ctr = 1 + (uint64_t) (c - 1) * L + t;

			cid[t] = off[nb] > 0 ?
				pp_search(off, nb, closest, w, n, S,
						  gc_km_pot_draw(seed, stream, ctr, off[nb]), last) : last;
		}
		for (int t = 0; t < lp; t++)
		{
			const float *x = X + cid[t < L ? t : 0] * d;

			for (int j = 0; j < d; j++)
				cand[j * lp + t] = x[j];
		}

		/* Potential of every candidate, per block. */
		KM_BLOCKS_OR_CANCEL(
			pp_pots_block(X, i0, i1, d, cand, lp, closest, w, S, bs + b * lp,
						  dist != NULL ? dist + i0 * lp : NULL);
		);
		for (int t = 0; t < L; t++)
		{
			uint64_t	p = 0;

			for (int64_t b = 0; b < nb; b++)
				p += bs[b * lp + t];
			if (t == 0 || p < best_pot)
			{
				best = t;
				best_pot = p;
			}
		}

		/* Keep the best candidate: new centre, D², its largest term. */
		memcpy(centroids + (size_t) c * d, X + cid[best] * d, sizeof(float) * d);
		if (chosen)
			chosen[c] = cid[best];
		KM_BLOCKS_OR_CANCEL(
			if (dist != NULL)
			{
				for (int64_t i = i0; i < i1; i++)
					if (dist[i * lp + best] < closest[i])
						closest[i] = dist[i * lp + best];
			}
			else
				pp_update_closest(X, i0, i1, d, centroids + (size_t) c * d, closest);
			bm[b] = pp_max_term(closest, w, i0, i1);
		);
		/* The next grid: on the same one the winner's sums are the draws' */
		for (int64_t b = 0; b < nb; b++)
			if (bm[b] > M)
				M = bm[b];
		S1 = gc_km_pot_scale(M, n);
		if (S1 == S)
			for (int64_t b = 0; b < nb; b++)
				off[b + 1] = off[b] + bs[b * lp + best];
		else
			S = pp_grid(nt, closest, w, n, nb, pp_max(nt, closest, w, n, nb), bq, off);
	}

done:
	free(closest);
	free(off);
	free(bs);
	free(bq);
	free(bm);
	free(cand);
	free(dist);
	return rc;
}

gc_code
gc_km_init_random(const gc_ctx *ctx, const float *X, int64_t n, int d, int k,
				  uint64_t seed, uint64_t stream, float *centroids,
				  int64_t *chosen, gc_status *st)
{
	return gc_km_init_random_w(ctx, X, n, d, k, NULL, seed, stream, centroids,
							   chosen, st);
}

/*
 * k distinct rows, each draw in proportion to the weights of the rows not
 * yet taken (numpy's choice(n, k, replace=False, p=w / sum w), which
 * scikit-learn's weighted random init calls): a Fenwick tree of the weights,
 * a taken row's weight removed from it.
 */
static gc_code
init_random_weighted(const gc_ctx *ctx, const float *X, int64_t n, int d,
					 int k, const double *w, uint64_t seed, uint64_t stream,
					 float *centroids, int64_t *chosen, gc_status *st)
{
	double	   *tree = calloc((size_t) n + 1, sizeof(double));
	char	   *taken = calloc((size_t) n + 1, 1);
	int64_t		top = 1;

	if (tree == NULL || taken == NULL || n < 1)
	{
		free(tree);
		free(taken);
		return gc_fail(st, GC_ENOMEM, "out of memory in random seeding");
	}
	for (int64_t i = 1; i <= n; i++)
	{
		int64_t		parent = i + (i & -i);

		tree[i] += w[i - 1];
		if (parent <= n)
			tree[parent] += tree[i];
	}
	while (top * 2 <= n)
		top *= 2;
	for (int c = 0; c < k; c++)
	{
		double		total = 0.0,
					r;
		int64_t		pos = 0,
					i;

		if (gc_cancelled(ctx))
		{
			free(tree);
			free(taken);
			return gc_fail(st, GC_ECANCEL, "canceled");
		}
		for (int64_t j = n; j > 0; j -= j & -j)
			total += tree[j];
		r = gc_rng_uniform(seed, stream, (uint64_t) c) * total;
		/* the last pos whose prefix sum is <= r: row pos is drawn */
		for (int64_t step = top; step > 0; step /= 2)
			if (pos + step <= n && tree[pos + step] <= r)
			{
				pos += step;
				r -= tree[pos];
			}
		i = pos < n ? pos : n - 1;
		/* rounding may land on a row taken or of weight 0: the next one not */
		for (int64_t m = 0; m < n && (taken[i] || !(w[i] > 0.0)); m++)
			i = i + 1 < n ? i + 1 : 0;
		taken[i] = 1;
		for (int64_t j = i + 1; j <= n; j += j & -j)
			tree[j] -= w[i];
		memcpy(centroids + (size_t) c * d, X + i * d, sizeof(float) * d);
		if (chosen)
			chosen[c] = i;
	}
	free(tree);
	free(taken);
	return GC_OK;
}

gc_code
gc_km_random_rows(const gc_ctx *ctx, int64_t n, int k, uint64_t seed,
				  uint64_t stream, int64_t *rows, gc_status *st)
{
	uint64_t   *taken = calloc((size_t) (n + 63) / 64, sizeof(uint64_t));
	uint64_t	ctr = 0;

	if (taken == NULL)
		return gc_fail(st, GC_ENOMEM, "out of memory in random seeding");
	for (int c = 0; c < k;)
	{
		int64_t		i;

		if ((ctr & 0xffff) == 0 && gc_cancelled(ctx))
		{
			free(taken);
			return gc_fail(st, GC_ECANCEL, "canceled");
		}
		i = (int64_t) (gc_rng_uniform(seed, stream, ctr++) * (double) n);
		if (i >= n)
			i = n - 1;
		if (taken[i / 64] & (UINT64_C(1) << (i % 64)))
			continue;
		taken[i / 64] |= UINT64_C(1) << (i % 64);
		rows[c++] = i;
	}
	free(taken);
	return GC_OK;
}

gc_code
gc_km_init_random_w(const gc_ctx *ctx, const float *X, int64_t n, int d,
					int k, const double *w, uint64_t seed, uint64_t stream,
					float *centroids, int64_t *chosen, gc_status *st)
{
	int64_t    *rows;
	gc_code		rc;

	if (w != NULL)
		return init_random_weighted(ctx, X, n, d, k, w, seed, stream,
									centroids, chosen, st);
	rows = chosen != NULL ? chosen : malloc(sizeof(int64_t) * (size_t) k);
	if (rows == NULL)
		return gc_fail(st, GC_ENOMEM, "out of memory in random seeding");
	rc = gc_km_random_rows(ctx, n, k, seed, stream, rows, st);
	if (rc == GC_OK)
		for (int c = 0; c < k; c++)
			memcpy(centroids + (size_t) c * d, X + rows[c] * d, sizeof(float) * d);
	if (rows != chosen)
		free(rows);
	return rc;
}

/* ------------------------------------------------------------------ */
/* k-means|| (kmeans.h defines it)                            */
/* ------------------------------------------------------------------ */

/*
 * D² and lab take candidates m0 .. m1-1 (rows cid[m0 .. m1-1] of X): the
 * exact argmin of gc_km_assign over the new ones (ties: lowest), then a
 * strictly smaller distance moves the row, so lab stays the lowest nearest.
 */
static gc_code
par_take(const gc_ctx *ctx, const float *X, int64_t n, int d,
		 const int64_t *cid, int64_t m0, int64_t m1, float *D2, int32_t *lab,
		 int32_t *nl, float *nd, gc_status *st)
{
	const int	kk = (int) (m1 - m0);
	const int64_t nb = (n + GC_KM_BLOCK - 1) / GC_KM_BLOCK;
	gc_km_ws   *ws = gc_km_ws_create(n, d, kk, gc_team_adapt(ctx));
	float	   *C = malloc(sizeof(float) * (size_t) kk * d);
	gc_code		rc;

	if (ws == NULL || C == NULL)
	{
		gc_km_ws_destroy(ws);
		free(C);
		return gc_fail(st, GC_ENOMEM, "out of memory in k-means|| seeding");
	}
	for (int c = 0; c < kk; c++)
		memcpy(C + (size_t) c * d, X + cid[m0 + c] * d, sizeof(float) * d);
	rc = gc_km_assign(ctx, ws, X, n, d, C, kk, nl, nd, NULL, st);
	if (rc == GC_OK)
	{
		const int	nt = gc_region_threads(gc_team_adapt(ctx), nb);

#pragma omp parallel for num_threads(nt) schedule(static)
		for (int64_t i = 0; i < n; i++)
			if (nd[i] < D2[i])
			{
				D2[i] = nd[i];
				lab[i] = (int32_t) m0 + nl[i];
			}
	}
	gc_km_ws_destroy(ws);
	free(C);
	return rc;
}

gc_code
gc_km_init_kmeans_par(const gc_ctx *ctx, const float *X, int64_t n, int d,
					  int k, uint64_t seed, uint64_t stream, float *centroids,
					  int64_t *chosen, gc_status *st)
{
	return gc_km_init_kmeans_par_w(ctx, X, n, d, k, NULL, seed, stream,
								   centroids, chosen, st);
}

gc_code
gc_km_init_kmeans_par_w(const gc_ctx *ctx, const float *X, int64_t n, int d,
						int k, const double *w, uint64_t seed, uint64_t stream,
						float *centroids, int64_t *chosen, gc_status *st)
{
	const int64_t nb = (n + GC_KM_BLOCK - 1) / GC_KM_BLOCK;
	const double ell = GC_KM_PAR_OVERSAMPLE * (double) k;
	float	   *D2 = malloc(sizeof(float) * (size_t) n);
	float	   *nd = malloc(sizeof(float) * (size_t) n);
	int32_t    *lab = malloc(sizeof(int32_t) * (size_t) n);
	int32_t    *nl = malloc(sizeof(int32_t) * (size_t) n);
	char	   *keep = malloc((size_t) n);
	uint64_t   *bq = malloc(sizeof(uint64_t) * (size_t) nb);
	uint64_t   *off = malloc(sizeof(uint64_t) * (size_t) (nb + 1));
	int64_t    *cid = NULL;
	int64_t		m = 0,
				cap = 0;
	float	   *cand = NULL;
	double	   *cw = NULL;
	int64_t    *cch = NULL;
	volatile int cancelled = 0;
	gc_code		rc = GC_OK;

	if (D2 == NULL || nd == NULL || lab == NULL || nl == NULL || keep == NULL || bq == NULL || off == NULL)
	{
		rc = gc_fail(st, GC_ENOMEM, "out of memory in k-means|| seeding");
		goto done;
	}

	/* Candidate 0: k-means++'s first centre. */
	cap = 1024;
	cid = malloc(sizeof(int64_t) * (size_t) cap);
	if (cid == NULL)
	{
		rc = gc_fail(st, GC_ENOMEM, "out of memory in k-means|| seeding");
		goto done;
	}
	if (w != NULL)
		cid[0] = gc_km_weighted_first(w, n, seed, stream);
	else
	{
		cid[0] = (int64_t) (gc_rng_uniform(seed, stream, 0) * (double) n);
		if (cid[0] >= n)
			cid[0] = n - 1;
	}
	m = 1;
	for (int64_t i = 0; i < n; i++)
		D2[i] = INFINITY;
	if ((rc = par_take(ctx, X, n, d, cid, 0, 1, D2, lab, nl, nd, st)) != GC_OK)
		goto done;

	for (int r = 1; r <= GC_KM_PAR_MAX_ROUNDS; r++)
	{
		const int	nt = gc_region_threads(gc_team_adapt(ctx), nb);
		double		phi = 0.0;
		int64_t		m0 = m;

		if (r > GC_KM_PAR_ROUNDS && m >= k)
			break;
		if (gc_cancelled(ctx))
		{
			rc = gc_fail(st, GC_ECANCEL, "canceled");
			goto done;
		}
		/* phi: the exact sum of the terms on the round's grid */
		{
			const double S = pp_grid(nt, D2, w, n, nb, pp_max(nt, D2, w, n, nb), bq, off);

			phi = S > 0.0 ? (double) off[nb] / S : 0.0;
		}
		if (!(phi > 0.0))
			break;
		/* the draws, independent per row */
		KM_BLOCKS_OR_CANCEL(
			for (int64_t i = i0; i < i1; i++)
				keep[i] = (char) gc_km_par_keep(seed, stream, r, n, i, ell,
												gc_km_pot_term(w, i, D2[i]),
												phi);
		);
		for (int64_t i = 0; i < n; i++)
			if (keep[i])
			{
				if (m == cap)
				{
					int64_t    *p = realloc(cid, sizeof(int64_t) * (size_t) cap * 2);

					if (p == NULL)
					{
						rc = gc_fail(st, GC_ENOMEM, "out of memory in k-means|| seeding");
						goto done;
					}
					cid = p;
					cap *= 2;
				}
				cid[m++] = i;
			}
		if (m > INT32_MAX / 2)
		{
			rc = gc_fail(st, GC_ENOMEM, "k-means||: too many candidates");
			goto done;
		}
		if (m > m0 &&
			(rc = par_take(ctx, X, n, d, cid, m0, m, D2, lab, nl, nd, st)) != GC_OK)
			goto done;
	}

	if (m < k)
	{
		/* fewer than k candidates: k-means++ over all the rows */
		rc = gc_km_init_kmeanspp_w(ctx, X, n, d, k, w, seed, stream,
								   centroids, chosen, st);
		goto done;
	}

	/* the candidates' weights: rows (weights) nearest each, in row order */
	cand = malloc(sizeof(float) * (size_t) m * d);
	cw = calloc((size_t) m, sizeof(double));
	cch = malloc(sizeof(int64_t) * (size_t) k);
	if (cand == NULL || cw == NULL || cch == NULL)
	{
		rc = gc_fail(st, GC_ENOMEM, "out of memory in k-means|| seeding");
		goto done;
	}
	for (int64_t i = 0; i < n; i++)
		cw[lab[i]] += w != NULL ? w[i] : 1.0;
	for (int64_t c = 0; c < m; c++)
		memcpy(cand + (size_t) c * d, X + cid[c] * d, sizeof(float) * d);
	rc = gc_km_init_kmeanspp_w(ctx, cand, m, d, k, cw, seed,
							   stream + GC_KM_PAR_REDUCE_STREAM, centroids,
							   cch, st);
	if (rc == GC_OK && chosen != NULL)
		for (int c = 0; c < k; c++)
			chosen[c] = cid[cch[c]];

done:
	free(D2);
	free(nd);
	free(lab);
	free(nl);
	free(keep);
	free(bq);
	free(off);
	free(cid);
	free(cand);
	free(cw);
	free(cch);
	return rc;
}

gc_kmeans_init
gc_km_init_resolve(gc_kmeans_init init, int64_t n, int d, int k)
{
	(void) n;
	(void) d;
	if (init != GC_INIT_AUTO)
		return init;
	return k >= GC_KM_AUTO_PARALLEL_K ? GC_INIT_KMEANS_PARALLEL : GC_INIT_KMEANSPP;
}

uint64_t
gc_km_init_stream(gc_kmeans_init init, int run)
{
	switch (init)
	{
		case GC_INIT_RANDOM:
			return GC_KM_STREAM_RANDOM + (uint64_t) run;
		case GC_INIT_KMEANS_PARALLEL:
			return GC_KM_STREAM_KMEANSPAR + (uint64_t) run;
		default:
			return GC_KM_STREAM_KMEANSPP + (uint64_t) run;
	}
}
