/*
 * metric.h — the one distance of DBSCAN and k-means, for the CPU and the
 * GPU alike.
 * Plain C for the core; cuda/ includes it too, and then every function here
 * is __host__ __device__.
 *
 * gc_dist2 is float32: the sum over the dimensions, in order, of the squared
 * difference, each subtraction, product and sum rounded on its own, never
 * contracted to a fused multiply-add (the core is built with
 * -ffp-contract=off; on the GPU the steps are the round-to-nearest
 * intrinsics, which no flag contracts).  So the CPU, its SIMD kernels and
 * the GPU decide dist2 <= eps2 identically, bit for bit.  One step defines
 * it, and everything else is built from that step:
 *   gc_l2_acc, gc_l2_step     s + t², and s + (a - b)²: the step
 *   gc_l2_first               (a - b)², the first step from 0;
 *   GC_L2_STEP_V, _FIRST_V    the steps on GCC vector types (SIMD kernels);
 *   gc_dist2, gc_dist2_upto   the distance, and its early-stopping form;
 *   gc_dist2_f64              the same distance in double, for results
 *                             reported rather than compared with eps,
 *                             and gc_l2_step_f64, its step;
 *   gc_box_*, gc_boxbox_*     bounds from a point or box to a box, exact in
 *                             float (below); gc_box_mindist2_f64 and
 *                             gc_boxbox_mindist2_f64 the lower bounds of
 *                             gc_dist2_f64 (HDBSCAN);
 *   gc_eps2, gc_l2_axis_bound eps² as compared, and a bound on |a_j - b_j|
 *                             for any two neighbours (the grid's cell side);
 *   gc_feature_limit          the largest |feature| that keeps it finite.
 * Another metric adds its step and bounds here; the indexes call only these.
 *
 * Why the bounds are exact: rounded subtraction, multiplication of
 * non-negatives and addition of non-negatives are monotone, and the bounds
 * sum their terms in the same dimension order as gc_dist2.  So if every
 * |fl(a_j - b_j)| is at least (at most) the term t_j used, gc_dist2(a, b) is
 * at least (at most) the bound.  Hence "bound > eps2" proves no pair is a
 * neighbour and "bound <= eps2" proves every pair is, with no real-number
 * argument.
 */
#ifndef GPUCLUST_METRIC_H
#define GPUCLUST_METRIC_H

#include <math.h>
#include <stdint.h>

#include "common/hostdevice.h"

/* Plain comparisons: inputs are finite, and fminf/fmaxf would be calls. */
GC_HD float
gc_fmax(float a, float b)
{
	return a > b ? a : b;
}

GC_HD float
gc_fmin(float a, float b)
{
	return a < b ? a : b;
}

/* a - b, rounded once. */
GC_HD float
gc_fsub(float a, float b)
{
#ifdef __CUDA_ARCH__
	return __fsub_rn(a, b);
#else
	return a - b;
#endif
}

/* s + t*t, the product and the sum each rounded once: the step. */
GC_HD float
gc_l2_acc(float s, float t)
{
#ifdef __CUDA_ARCH__
	return __fadd_rn(s, __fmul_rn(t, t));
#else
	return s + t * t;
#endif
}

/* s + (a - b)^2 */
GC_HD float
gc_l2_step(float s, float a, float b)
{
	return gc_l2_acc(s, gc_fsub(a, b));
}

/* (a - b)^2: the first step, from 0 (0 + x == x for every x >= 0). */
GC_HD float
gc_l2_first(float a, float b)
{
	float		t = gc_fsub(a, b);

#ifdef __CUDA_ARCH__
	return __fmul_rn(t, t);
#else
	return t * t;
#endif
}

/*
 * The step on GCC vector types (v8f, __m256, __m512: lane by lane, the same
 * rounded operations as gc_l2_step; the core's -ffp-contract=off keeps the
 * product and the sum apart).
 */
#define GC_L2_STEP_V(acc, a, b) \
	__extension__ ({ __typeof__(acc) t_ = (a) - (b); (acc) + t_ * t_; })
#define GC_L2_FIRST_V(a, b) \
	__extension__ ({ __typeof__((a) - (b)) t_ = (a) - (b); t_ * t_; })

/*
 * The metrics, by pgvector's names.  Euclidean is gc_dist2 below.  Cosine
 * distance 1 - cos(a, b) of two nonzero rows is, in the reals, exactly
 * |u - v|^2 / 2 for their unit rows u = a/|a|, v = b/|b|; gpuclust
 * computes it that way, so that it is Euclidean on the unit rows and every
 * index, bound and device applies unchanged: u_j is the double quotient
 * a_j / |a| rounded once to float32 (|a| the double root of the double sum
 * of squares in dimension order: gc_unit_rows), and the neighbour test is
 * gc_dist2(u, v) <= fl(2 eps) (gc_metric_eps2).  A zero row has no cosine
 * distance (an error).  Inner product (pgvector's negative inner product)
 * is not a distance the indexes can bound yet.
 */
typedef enum gc_metric
{
	GC_METRIC_EUCLIDEAN = 0,
	GC_METRIC_COSINE,
	GC_METRIC_INNER_PRODUCT
} gc_metric;

/*
 * u = the unit row of x (the cosine metric's rows, above): u_j the double
 * quotient x_j / |x| rounded once to float32, |x| the double root of the
 * double sum of squares in dimension order.  Returns |x|; a zero row
 * (|x| = 0) leaves u all 0.  x and u may be the same array; feature j is
 * x[j * xs] and u[j * us] (gc_unit_row: both 1; the GPU k-means' columns
 * of rows: n).  The same on the GPU (IEEE double sqrt and division, no
 * contraction: the GPU k-means' rows and centres under cosine).
 */
GC_HD double
gc_unit_row_strided(const float *x, int64_t xs, int d, float *u, int64_t us)
{
	double		s = 0.0,
				norm;

	for (int j = 0; j < d; j++)
		s += (double) x[j * xs] * (double) x[j * xs];
	norm = sqrt(s);
	for (int j = 0; j < d; j++)
		u[j * us] = norm > 0.0 ? (float) ((double) x[j * xs] / norm) : 0.0f;
	return norm;
}

GC_HD double
gc_unit_row(const float *x, int d, float *u)
{
	return gc_unit_row_strided(x, 1, d, u, 1);
}

/* The distance every DBSCAN path compares with gc_eps2(eps). */
GC_HD float
gc_dist2(const float *a, const float *b, int d)
{
	float		s = 0.0f;

	GC_UNROLL
	for (int j = 0; j < d; j++)
		s = gc_l2_step(s, a[j], b[j]);
	return s;
}

/*
 * The k-means assignment of one row: the index of the nearest of the k
 * centres C (k x d) by gc_dist2, strict <, so ties go to the lowest index;
 * *best_d2 gets that distance.  The vector kernel of gc_km_assign gives the
 * same labels; kmeans_assign and the kmeans_step aggregate call this.
 */
static inline int
gc_km_nearest(const float *x, const float *C, int k, int d, float *best_d2)
{
	int			best = 0;
	float		bd = gc_dist2(x, C, d);

	for (int c = 1; c < k; c++)
	{
		float		d2 = gc_dist2(x, C + (size_t) c * d, d);

		if (d2 < bd)
		{
			bd = d2;
			best = c;
		}
	}
	*best_d2 = bd;
	return best;
}

/*
 * gc_dist2(a, b, d) when it is <= lim; otherwise some value > lim (stops
 * early: partial sums of non-negative terms never decrease in float).
 */
GC_HD float
gc_dist2_upto(const float *a, const float *b, int d, float lim)
{
	float		s = 0.0f;
	int			j = 0;

	while (j < d)
	{
		int			stop = j + 8 < d ? j + 8 : d;

		for (; j < stop; j++)
			s = gc_l2_step(s, a[j], b[j]);
		if (s > lim)
			return s;
	}
	return s;
}

/*
 * s + (a - b)^2 in double, the subtraction, product and sum each rounded
 * once: gc_dist2_f64's step, for a kernel that forms it a dimension at a
 * time (cuda/tools/silhouette.cu); a and b are float32 features widened.
 */
GC_HD double
gc_l2_step_f64(double s, double a, double b)
{
#ifdef __CUDA_ARCH__
	double		t = __dsub_rn(a, b);

	return __dadd_rn(s, __dmul_rn(t, t));
#else
	double		t = a - b;

	return s + t * t;
#endif
}

/*
 * The squared Euclidean distance of two float32 rows in double precision:
 * each difference exact in double, squared and summed in double in
 * dimension order.  Where a result is reported in double rather than
 * compared with eps: affinity propagation's similarities, the k-means
 * distance and inertia, the silhouette.
 */
GC_HD double
gc_dist2_f64(const float *a, const float *b, int d)
{
	double		s = 0.0;

	for (int j = 0; j < d; j++)
		s = gc_l2_step_f64(s, (double) a[j], (double) b[j]);
	return s;
}

/* eps² as DBSCAN compares it: the double product rounded once to float. */
GC_HD float
gc_eps2(double eps)
{
	return (float) (eps * eps);
}

/* The bound on gc_dist2 (of the rows, or of the unit rows) that eps means. */
static inline float
gc_metric_eps2(gc_metric metric, double eps)
{
	return metric == GC_METRIC_COSINE ? (float) (2.0 * eps) : gc_eps2(eps);
}

/*
 * R with |a_j - b_j| < R in each dimension for every pair with
 * gc_dist2(a, b) <= eps2 (eps2 finite).  fl(t)^2 must round to <= eps2, so
 * fl(t)^2 < nextup(eps2) and |fl(t)| < sqrt(nextup(eps2)); rounding to
 * nearest bounds |t| within one float step more.  Host only.
 */
static inline double
gc_l2_axis_bound(float eps2)
{
	return sqrt((double) nextafterf(eps2, INFINITY)) * (1.0 + 0x1p-20) + 1e-44;
}

/*
 * The largest |feature| in d dimensions, 2^62 / sqrt(d): every squared
 * difference is then at most (2 * 2^62)^2 / d = 2^126 / d, so gc_dist2 and
 * every bound here stay finite (below 2^127 even with rounding) on any
 * device and never overflow to infinity, and any eps whose square
 * overflows (eps > 1.8e19) exceeds every distance, as its infinite eps2
 * says.  The glue rejects larger values at ingest (SQLSTATE 22003); the
 * core expects them rejected.  (k-means and affinity propagation sum in
 * double or scaled fixed point, and their float distances are these.)
 */
static inline double
gc_feature_limit(int d)
{
	return ldexp(1.0, 62) / sqrt((double) (d > 0 ? d : 1));
}

/* The gap from p to [lo, hi] along one dimension (0 inside it). */
GC_HD float
gc_box_gap(float p, float lo, float hi)
{
	return p < lo ? gc_fsub(lo, p) : p > hi ? gc_fsub(p, hi) : 0.0f;
}

/* <= gc_dist2(p, q) for every q in [lo, hi]. */
GC_HD float
gc_box_mindist2(const float *p, const float *lo, const float *hi, int d)
{
	float		s = 0.0f;

	GC_UNROLL
	for (int j = 0; j < d; j++)
		s = gc_l2_acc(s, gc_box_gap(p[j], lo[j], hi[j]));
	return s;
}

/*
 * <= gc_dist2_f64(p, q) for every q in [lo, hi]: per dimension the gap
 * fl(lo - p) or fl(p - hi) of the features widened to double (0 inside the
 * box), squared and summed in dimension order as gc_l2_step_f64 does.  For
 * q_j >= lo_j > p_j, fl(q_j - p_j) >= fl(lo_j - p_j) since rounding is
 * monotone, and |fl(p_j - q_j)| = fl(q_j - p_j) (rounding to nearest is
 * symmetric); so each term is at most gc_dist2_f64's, and the monotone
 * square and sum keep the bound (the argument above, in double).
 * gc_box_step_f64 is one dimension's step of it (s + the gap squared, 0
 * inside), for kernels that hold the query row in registers.
 */
GC_HD double
gc_box_step_f64(double s, float p, float lo, float hi)
{
	return p < lo ? gc_l2_step_f64(s, (double) lo, (double) p) :
		p > hi ? gc_l2_step_f64(s, (double) p, (double) hi) : s;
}

GC_HD double
gc_box_mindist2_f64(const float *p, const float *lo, const float *hi, int d)
{
	double		s = 0.0;

	for (int j = 0; j < d; j++)
		s = gc_box_step_f64(s, p[j], lo[j], hi[j]);
	return s;
}

/*
 * gc_box_mindist2, the same sum without branches: of lo - p and p - hi at
 * most one is positive, so the gap is exactly as there.
 */
GC_HD float
gc_box_mindist2_nb(const float *p, const float *lo, const float *hi, int d)
{
	float		s = 0.0f;

	GC_UNROLL
	for (int j = 0; j < d; j++)
	{
		float		a = gc_fsub(lo[j], p[j]),
					b = gc_fsub(p[j], hi[j]);

		a = a > 0.0f ? a : 0.0f;
		b = b > 0.0f ? b : 0.0f;
		s = gc_l2_acc(s, a + b);
	}
	return s;
}

/* >= gc_dist2(p, q) for every q in [lo, hi]. */
GC_HD float
gc_box_maxdist2(const float *p, const float *lo, const float *hi, int d)
{
	float		s = 0.0f;

	GC_UNROLL
	for (int j = 0; j < d; j++)
		s = gc_l2_acc(s, gc_fmax(fabsf(gc_fsub(p[j], lo[j])),
								 fabsf(gc_fsub(hi[j], p[j]))));
	return s;
}

/* <= gc_dist2(a, b) for every a in box A, b in box B. */
GC_HD float
gc_boxbox_mindist2(const float *alo, const float *ahi,
				   const float *blo, const float *bhi, int d)
{
	float		s = 0.0f;

	for (int j = 0; j < d; j++)
	{
		float		t = 0.0f;

		if (bhi[j] < alo[j])
			t = gc_fsub(alo[j], bhi[j]);
		else if (ahi[j] < blo[j])
			t = gc_fsub(blo[j], ahi[j]);
		s = gc_l2_acc(s, t);
	}
	return s;
}

/*
 * <= gc_dist2_f64(a, b) for every a in box A, b in box B: the gap between
 * the two intervals in double, as gc_box_mindist2_f64 (for b_j >= blo_j >
 * ahi_j >= a_j, fl(b_j - a_j) >= fl(blo_j - ahi_j)).
 */
GC_HD double
gc_boxbox_mindist2_f64(const float *alo, const float *ahi,
					   const float *blo, const float *bhi, int d)
{
	double		s = 0.0;

	for (int j = 0; j < d; j++)
	{
		double		t = bhi[j] < alo[j] ? (double) alo[j] - (double) bhi[j]
			: ahi[j] < blo[j] ? (double) blo[j] - (double) ahi[j] : 0.0;

		s = gc_l2_step_f64(s, t, 0.0);
	}
	return s;
}

/* >= gc_dist2(a, b) for every a in box A, b in box B. */
GC_HD float
gc_boxbox_maxdist2(const float *alo, const float *ahi,
				   const float *blo, const float *bhi, int d)
{
	float		s = 0.0f;

	for (int j = 0; j < d; j++)
		s = gc_l2_acc(s, gc_fmax(fabsf(gc_fsub(ahi[j], blo[j])),
								 fabsf(gc_fsub(bhi[j], alo[j]))));
	return s;
}

#endif							/* GPUCLUST_METRIC_H */
