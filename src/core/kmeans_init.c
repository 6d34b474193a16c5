/*
 * kmeans_init.c — k-means seeding: greedy k-means++ and uniform random rows.
 *
 * Every draw comes from the counter-based generator of rng.h, and every sum
 * uses a fixed blocking (kmeans_internal.h documents the exact mapping), so
 * the centres depend on (seed, stream, data) only — not on the thread count,
 * and the GPU can reproduce them.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kmeans_internal.h"
#include "rng.h"

/* Candidates per centre, padded to a multiple of 8 lanes (L <= 23). */
#define PP_LANES 8
#define PP_MAX_LP 24

typedef float v8f __attribute__((vector_size(32)));
typedef double v8d __attribute__((vector_size(64)));
typedef int32_t v8i __attribute__((vector_size(32)));

int
gc_km_n_local_trials(int k)
{
	return 2 + (int) floor(log((double) k));
}

/* Unaligned 8-float load. */
typedef float v8f_u __attribute__((vector_size(32), aligned(4)));
#define load8(p) (*(const v8f_u *) (p))

/*
 * out[t] = sequential double sum over rows i0..i1-1 of
 * min(closest[i], gc_dist2(X_i, candidate t)), for nv*8 candidates stored
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

#ifdef GC_TESTING
/* tests set this to take the recomputing path at any size */
bool		gc_km_pp_recompute = false;
#endif

static inline __attribute__((always_inline)) void
pp_pots_block_nv(const float *X, int64_t i0, int64_t i1, int d,
				 const float *cand, const float *closest, double *out,
				 float *dist, const int nv)
{
	const int	lp = nv * PP_LANES;
	v8d			acc[PP_MAX_LP / PP_LANES];
	int64_t		i = i0;

	for (int v = 0; v < nv; v++)
		acc[v] = (v8d) {0};
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
		/* rows in order: each lane's double sum stays sequential */
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

				acc[v] += __builtin_convertvector(mn, v8d);
			}
		}
	}
	for (int v = 0; v < nv; v++)
		memcpy(out + v * PP_LANES, &acc[v], sizeof(acc[v]));
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
			  int lp, const float *closest, double *out, float *dist)
{
	switch (lp / PP_LANES)
	{
		case 1:
			pp_pots_block_nv(X, i0, i1, d, cand, closest, out, dist, 1);
			break;
		case 2:
			pp_pots_block_nv(X, i0, i1, d, cand, closest, out, dist, 2);
			break;
		default:
			pp_pots_block_nv(X, i0, i1, d, cand, closest, out, dist, 3);
			break;
	}
}

gc_code
gc_km_init_kmeanspp(const gc_ctx *ctx, const float *X, int64_t n, int d, int k,
					uint64_t seed, uint64_t stream, float *centroids,
					int64_t *chosen, gc_status *st)
{
	const int	L = gc_km_n_local_trials(k);
	const int	lp = (L + PP_LANES - 1) / PP_LANES * PP_LANES;
	const int64_t nb = (n + GC_KM_BLOCK - 1) / GC_KM_BLOCK;
	int			nt = gc_region_threads(gc_team_adapt(ctx), nb);
	float	   *closest = malloc(sizeof(float) * (size_t) n);
	double	   *off = malloc(sizeof(double) * (size_t) (nb + 1));
	double	   *bs = malloc(sizeof(double) * (size_t) (nb * lp));
	float	   *cand = malloc(sizeof(float) * (size_t) d * lp);
	/* every candidate's distance to every row, when that is small enough */
	float	   *dist = (size_t) n * lp <= PP_DIST_MAX && d >= PP_DIST_MIN_D && !gc_km_pp_recompute ?
		malloc(sizeof(float) * (size_t) n * lp) : NULL;
	int64_t		cid[PP_MAX_LP];
	int64_t		first;
	volatile int cancelled = 0;
	gc_code		rc = GC_OK;

	if (closest == NULL || off == NULL || bs == NULL || cand == NULL)
	{
		rc = gc_fail(st, GC_ENOMEM, "out of memory in k-means++ seeding");
		goto done;
	}

	/* First centre: uniform row. */
	first = (int64_t) (gc_rng_uniform(seed, stream, 0) * (double) n);
	if (first >= n)
		first = n - 1;
	memcpy(centroids, X + first * d, sizeof(float) * d);
	if (chosen)
		chosen[0] = first;

	/* D² to the first centre, and its per-block sums. */
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
	for (int64_t b = 0; b < nb; b++)
	{
		int64_t		i0 = b * GC_KM_BLOCK,
					i1 = i0 + GC_KM_BLOCK < n ? i0 + GC_KM_BLOCK : n;
		double		s = 0.0;

		if (cancelled || gc_cancelled(ctx))
		{
			cancelled = 1;
			continue;
		}
		for (int64_t i = i0; i < i1; i++)
		{
			closest[i] = gc_dist2(X + i * d, centroids, d);
			s += closest[i];
		}
		bs[b * lp] = s;
	}
	if (cancelled)
	{
		rc = gc_fail(st, GC_ECANCEL, "canceled");
		goto done;
	}
	off[0] = 0.0;
	for (int64_t b = 0; b < nb; b++)
		off[b + 1] = off[b] + bs[b * lp];

	for (int c = 1; c < k; c++)
	{
		const double pot = off[nb];
		int			best = 0;
		double		best_pot = 0.0;

		nt = gc_region_threads(gc_team_adapt(ctx), nb);	/* the load may have changed */
		if (gc_cancelled(ctx))
		{
			rc = gc_fail(st, GC_ECANCEL, "canceled");
			goto done;
		}
		/* Draw the candidates; lanes past L repeat candidate 0. */
		for (int t = 0; t < L; t++)
		{
			uint64_t	ctr = 1 + (uint64_t) (c - 1) * L + t;
			double		r = gc_rng_uniform(seed, stream, ctr) * pot;

			cid[t] = gc_km_pp_search(off, nb, closest, n, r);
		}
		for (int t = 0; t < lp; t++)
		{
			const float *x = X + cid[t < L ? t : 0] * d;

			for (int j = 0; j < d; j++)
				cand[j * lp + t] = x[j];
		}

		/* Potential of every candidate, per block. */
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
		for (int64_t b = 0; b < nb; b++)
		{
			int64_t		i0 = b * GC_KM_BLOCK,
						i1 = i0 + GC_KM_BLOCK < n ? i0 + GC_KM_BLOCK : n;

			if (cancelled || gc_cancelled(ctx))
			{
				cancelled = 1;
				continue;
			}
			pp_pots_block(X, i0, i1, d, cand, lp, closest, bs + b * lp,
						  dist != NULL ? dist + i0 * lp : NULL);
		}
		if (cancelled)
		{
			rc = gc_fail(st, GC_ECANCEL, "canceled");
			goto done;
		}
		for (int t = 0; t < L; t++)
		{
			double		p = 0.0;

			for (int64_t b = 0; b < nb; b++)
				p += bs[b * lp + t];
			if (t == 0 || p < best_pot)
			{
				best = t;
				best_pot = p;
			}
		}

		/* Keep the best candidate: new centre, D² and block offsets. */
		memcpy(centroids + (size_t) c * d, X + cid[best] * d, sizeof(float) * d);
		if (chosen)
			chosen[c] = cid[best];
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
		for (int64_t b = 0; b < nb; b++)
		{
			int64_t		i0 = b * GC_KM_BLOCK,
						i1 = i0 + GC_KM_BLOCK < n ? i0 + GC_KM_BLOCK : n;

			if (cancelled || gc_cancelled(ctx))
			{
				cancelled = 1;
				continue;
			}
			if (dist != NULL)
			{
				for (int64_t i = i0; i < i1; i++)
					if (dist[i * lp + best] < closest[i])
						closest[i] = dist[i * lp + best];
			}
			else
				pp_update_closest(X, i0, i1, d, centroids + (size_t) c * d, closest);
		}
		for (int64_t b = 0; b < nb; b++)
			off[b + 1] = off[b] + bs[b * lp + best];
	}

done:
	free(closest);
	free(off);
	free(bs);
	free(cand);
	free(dist);
	return rc;
}

gc_code
gc_km_init_random(const gc_ctx *ctx, const float *X, int64_t n, int d, int k,
				  uint64_t seed, uint64_t stream, float *centroids,
				  int64_t *chosen, gc_status *st)
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
		memcpy(centroids + (size_t) c * d, X + i * d, sizeof(float) * d);
		if (chosen)
			chosen[c] = i;
		c++;
	}
	free(taken);
	return GC_OK;
}
