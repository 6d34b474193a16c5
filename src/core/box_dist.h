/*
 * box_dist.h — bounds on gc_dist2 between a point and an axis-aligned box, or
 * between two boxes, that are exact in float arithmetic.
 *
 * Why they are safe: rounded subtraction, multiplication of non-negatives and
 * addition of non-negatives are monotone, and the bounds sum their terms in
 * the same dimension order as gc_dist2.  So if every |fl(a_j - b_j)| is at
 * least (at most) the term t_j used here, gc_dist2(a, b) is at least (at
 * most) the bound.  Hence "bound > eps2" proves no pair is a neighbour and
 * "bound <= eps2" proves every pair is, with no real-number argument.
 */
#ifndef GPUCLUST_BOX_DIST_H
#define GPUCLUST_BOX_DIST_H

#include <math.h>

/* Plain comparisons: inputs are finite, and fminf/fmaxf would be calls. */
static inline float
gc_fmax(float a, float b)
{
	return a > b ? a : b;
}

static inline float
gc_fmin(float a, float b)
{
	return a < b ? a : b;
}

/* <= gc_dist2(p, q) for every q in [lo, hi]. */
static inline float
gc_box_mindist2(const float *p, const float *lo, const float *hi, int d)
{
	float		s = 0.0f;

	for (int j = 0; j < d; j++)
	{
		float		t = 0.0f;

		if (p[j] < lo[j])
			t = lo[j] - p[j];
		else if (p[j] > hi[j])
			t = p[j] - hi[j];
		s += t * t;
	}
	return s;
}

/* >= gc_dist2(p, q) for every q in [lo, hi]. */
static inline float
gc_box_maxdist2(const float *p, const float *lo, const float *hi, int d)
{
	float		s = 0.0f;

	for (int j = 0; j < d; j++)
	{
		float		t = gc_fmax(fabsf(p[j] - lo[j]), fabsf(hi[j] - p[j]));

		s += t * t;
	}
	return s;
}

/* <= gc_dist2(a, b) for every a in box A, b in box B. */
static inline float
gc_boxbox_mindist2(const float *alo, const float *ahi,
				   const float *blo, const float *bhi, int d)
{
	float		s = 0.0f;

	for (int j = 0; j < d; j++)
	{
		float		t = 0.0f;

		if (bhi[j] < alo[j])
			t = alo[j] - bhi[j];
		else if (ahi[j] < blo[j])
			t = blo[j] - ahi[j];
		s += t * t;
	}
	return s;
}

/* >= gc_dist2(a, b) for every a in box A, b in box B. */
static inline float
gc_boxbox_maxdist2(const float *alo, const float *ahi,
				   const float *blo, const float *bhi, int d)
{
	float		s = 0.0f;

	for (int j = 0; j < d; j++)
	{
		float		t = gc_fmax(fabsf(ahi[j] - blo[j]), fabsf(bhi[j] - alo[j]));

		s += t * t;
	}
	return s;
}

/*
 * gc_dist2(a, b, d) when it is <= lim; otherwise some value > lim (stops
 * early: partial sums of non-negative terms never decrease in float).
 */
static inline float
gc_dist2_upto(const float *a, const float *b, int d, float lim)
{
	float		s = 0.0f;
	int			j = 0;

	while (j < d)
	{
		int			stop = j + 8 < d ? j + 8 : d;

		for (; j < stop; j++)
		{
			float		t = a[j] - b[j];

			s += t * t;
		}
		if (s > lim)
			return s;
	}
	return s;
}

#endif							/* GPUCLUST_BOX_DIST_H */
