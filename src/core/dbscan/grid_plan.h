/*
 * grid_plan.h — the uniform grid's plan for DBSCAN in d <= 3, shared by the
 * CPU grid (dbscan_grid.c) and the GPU grid (cuda/dbscan/dbscan_grid.cu), so that
 * both cut space into the same cells by the same arithmetic.
 *
 * Cells have side a little under R/sqrt(d), where R = gc_l2_axis_bound(eps2)
 * bounds |a_j - b_j| for any two neighbours (metric.h): with side
 * R/sqrt(d)*(1-1/256), neighbours' exact cell quotients differ by at most
 * sqrt(3)/(1-1/256) < 1.74; the double rounding of the quotient, kept below
 * 2^40, adds under 2^-10, so cell numbers differ by at most 2.  A cell's
 * diagonal is under R.  Keys number the cells with 2 cells of padding on
 * each side; the 5 cells of a row (offsets -2..+2 in dimension 0) are
 * adjacent keys, so a cell's neighbourhood is 5^(d-1) runs of keys.
 */
#ifndef GPUCLUST_GRID_PLAN_H
#define GPUCLUST_GRID_PLAN_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/metric.h"				/* GC_HD, gc_l2_axis_bound */

#ifdef __cplusplus
extern "C" {
#endif

#define GC_GRID_MAX_ROWS 25		/* 5^(d-1) for d <= 3 */

typedef struct gc_grid_plan
{
	double		inv_side;
	float		min[3];
	int64_t		m[3];			/* cells per dimension */
	uint64_t	stride[3];
	uint64_t	nkeys;			/* keys are 0 .. nkeys-1 */
	int			key_bits;
} gc_grid_plan;

/*
 * The plan for points whose coordinates k lie in [mn[k], mx[k]]; false
 * when eps2 is infinite or the cell numbers would overflow (the caller
 * then uses another index).  (dbscan_grid.c)
 */
bool		gc_grid_plan_make(int d, float eps2, const float *mn,
							  const float *mx, gc_grid_plan *gp);

/*
 * The key offsets of the rows of cells around a cell (the row's centre:
 * offsets in dimensions 1 .. d-1 of -2..2), nearest rows first so that a
 * core count stops sooner; returns how many (5^(d-1)).  (dbscan_grid.c)
 */
int			gc_grid_rows(const gc_grid_plan *gp, int d,
						 int64_t rowoff[GC_GRID_MAX_ROWS]);

/* The cell key of point x. */
GC_HD uint64_t
gc_grid_key(const gc_grid_plan *gp, const float *x, int d)
{
	uint64_t	key = 0;

	for (int k = 0; k < d; k++)
	{
#ifdef __CUDA_ARCH__
		double		q = __dmul_rn(__dsub_rn((double) x[k], (double) gp->min[k]),
								  gp->inv_side);
#else
		double		q = ((double) x[k] - (double) gp->min[k]) * gp->inv_side;
#endif
		int64_t		c = (int64_t) floor(q);

		if (c < 0)
			c = 0;
		if (c > gp->m[k] - 1)
			c = gp->m[k] - 1;
		key += (uint64_t) (c + 2) * gp->stride[k];
	}
	return key;
}

#ifdef __cplusplus
}
#endif

#endif							/* GPUCLUST_GRID_PLAN_H */
