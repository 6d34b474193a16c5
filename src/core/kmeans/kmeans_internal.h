/*
 * kmeans/kmeans_internal.h — private to kmeans/: the CPU Lloyd steps
 * (gc_km_assign, gc_km_update) and their working memory (gc_km_ws), and the
 * test switches.  What the GPU and the
 * distributed k-means share with the CPU is in kmeans/kmeans.h.
 *
 * Determinism: every floating-point reduction runs over fixed blocks of
 * GC_KM_BLOCK points (or fixed segments of a cluster's members), summed
 * sequentially inside a block and then block after block, so results do
 * not depend on the thread count.
 */
#ifndef GPUCLUST_KMEANS_INTERNAL_H
#define GPUCLUST_KMEANS_INTERNAL_H

#include "kmeans/kmeans.h"

/* ---- Lloyd steps (kmeans_assign.c, kmeans_update.c) ---- */

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
	/* gc_km_assign_bounded's state, allocated on its first call */
	float	   *sec;			/* nt x GC_KM_BLOCK: the listed rows' second distance² */
	double	   *lb;				/* n: a lower bound of each row's distance to
								 * every centre but its own */
	float	   *cprev;			/* k x d: the centres lb holds for */
	double	   *half;			/* k: half the distance from each centre to the
								 * nearest other one, rounded down */
	int64_t    *list;			/* nt x GC_KM_BLOCK: the rows each thread scans */
	bool		bounds_valid;	/* labels and lb hold for cprev */
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
 * gc_km_assign's labels and d2, bit for bit, with fewer distances: a row
 * whose exact distance to its centre from the last call stays below every
 * other centre's, by Hamerly's bounds, keeps its label (its d2 that exact
 * distance); the others are scanned as gc_km_assign scans them.  For a
 * Lloyd loop: each call's labels are the previous call's (or -1), and
 * ws->bounds_valid = false before a run's first call.  Below
 * GC_KM_BOUNDS_MIN_D dimensions it is gc_km_assign.
 */
#define GC_KM_BOUNDS_MIN_D 2
gc_code		gc_km_assign_bounded(const gc_ctx *ctx, gc_km_ws *ws,
								 const float *X, int64_t n, int d,
								 const float *C, int k, int32_t *labels,
								 float *d2, int64_t *n_changed,
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

/* Test switch: k-means++ recomputes the winner's distances at any size. */
#ifdef GC_TESTING
extern bool gc_km_pp_recompute;
#else
#define gc_km_pp_recompute false
#endif

#ifdef GC_TESTING
/* Tests only: assignment kernel width 4, 8 or 16 (0: the best the CPU has). */
void		gc_km_force_width(int w);

/* Tests only: gc_km_assign_bounded's bounds at every d (1), never (0), or
 * from GC_KM_BOUNDS_MIN_D (-1); the rows they have kept, summed. */
void		gc_km_force_bounds(int on);
extern int64_t gc_km_bounds_kept;
#endif

#endif							/* GPUCLUST_KMEANS_INTERNAL_H */
