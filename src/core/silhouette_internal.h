/*
 * silhouette_internal.h — what the silhouette's two devices share
 * (silhouette.c, cuda/silhouette.cu), so that they score the same rows and
 * form each row's value and the score with the same operations.
 *
 * gc_sil_select is the whole contract before the distances: the checks,
 * the labelled rows, the sample (gc_sample_rows), the per-cluster sizes,
 * the cluster-count check (GC_EINVAL with res->rows, clusters and sampled
 * filled), and the labels of the scored rows.  A device then sums, for each
 * scored row i, sqrt(gc_dist2_f64(x_i, x_j)) over the scored rows j in
 * ascending order into its cluster's sum (double), folds the sums into a
 * and b with gc_sil_nearer and gc_sil_value below, and hands the values s
 * (in scored order) to gc_sil_finish, which sums them in that order.
 */
#ifndef GPUCLUST_SILHOUETTE_INTERNAL_H
#define GPUCLUST_SILHOUETTE_INTERNAL_H

#include "gpuclust_core.h"
#include "hostdevice.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The rows a silhouette scores (gc_sil_select; gc_sil_free releases). */
typedef struct gc_sil_rows
{
	int64_t		r;				/* rows scored */
	int64_t    *rows;			/* r: their positions in X, ascending */
	int32_t    *lab;			/* r: their labels */
	int64_t    *size;			/* m: rows scored of each label */
	int32_t		m;				/* labels 0 .. m-1 */
	int64_t		clusters;		/* labels with size > 0 */
} gc_sil_rows;

/*
 * Chooses the rows a silhouette of X (n x d, labels 0 .. m-1, negative
 * ones left out) scores; resets st and res, then fills res->rows,
 * res->clusters and res->sampled.  On any failure nothing is left
 * allocated in sel.
 */
gc_code		gc_sil_select(const float *X, int64_t n, int d,
						  const int32_t *labels, int32_t m,
						  int64_t sample_size, uint64_t seed,
						  gc_sil_rows *sel, gc_silhouette_result *res,
						  gc_status *st);
void		gc_sil_free(gc_sil_rows *sel);

/* res->score: the mean of s[0 .. r-1], summed in that order. */
void		gc_sil_finish(const double *s, int64_t r, gc_silhouette_result *res);

#ifdef __cplusplus
}
#endif

/*
 * b after another non-empty cluster (size rows, distance sum sum): the
 * smaller of b and its mean distance, strict <, b starting at infinity.
 */
GC_HD double
gc_sil_nearer(double b, double sum, int64_t size)
{
	double		mean = sum / (double) size;

	return mean < b ? mean : b;
}

/*
 * s of a row whose own cluster has own_size rows (itself included) at
 * distance sum own_sum, and b the smallest mean distance to another
 * cluster: 0 in a cluster of one row; else a = own_sum / (own_size - 1)
 * and s = (b - a) / max(a, b), 0 when both are 0 (scikit-learn's
 * nan_to_num).
 */
GC_HD double
gc_sil_value(double own_sum, int64_t own_size, double b)
{
	double		a,
				mx;

	if (own_size == 1)
		return 0.0;
	a = own_sum / (double) (own_size - 1);
	mx = a > b ? a : b;
	return mx > 0.0 ? (b - a) / mx : 0.0;
}

#endif							/* GPUCLUST_SILHOUETTE_INTERNAL_H */
