/*
 * kmeans/kmeans_internal.h — private to kmeans/: the working memory of the
 * CPU Lloyd steps (gc_km_ws) and the test switches.  What the GPU and the
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
} gc_km_ws;

/* Working memory for (n, d, k, n_threads), unweighted (ws->weights NULL). */
gc_km_ws   *gc_km_ws_create(int64_t n, int d, int k, int n_threads);
void		gc_km_ws_destroy(gc_km_ws *ws);

/*
 * The team of a Lloyd step (gc_team_adapt), at most the threads ws was
 * made for: its per-thread scratch.
 */
int			gc_km_team(const gc_ctx *ctx, const gc_km_ws *ws);

/* Test switch: k-means++ recomputes the winner's distances at any size. */
#ifdef GC_TESTING
extern bool gc_km_pp_recompute;
#else
#define gc_km_pp_recompute false
#endif

#ifdef GC_TESTING
/* Tests only: assignment kernel width 4, 8 or 16 (0: the best the CPU has). */
void		gc_km_force_width(int w);
#endif

#endif							/* GPUCLUST_KMEANS_INTERNAL_H */
