/*
 * tools/tools.h — the tools for choosing parameters and reading clusters:
 * k-distances and the knee, silhouette, sampling, cluster summaries, and
 * their device choice.
 */
#ifndef GPUCLUST_TOOLS_H
#define GPUCLUST_TOOLS_H

#include "common/core.h"
#include "common/metric.h"		/* gc_dist2, gc_eps2: the one distance */
#include "common/hostdevice.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * k-distances (kdistance.c).  kdist2[i] = the k-th smallest gc_dist2 from
 * row i to every row of X, the row itself included (so k = 1 gives 0):
 * row i is a DBSCAN core point at min_pts = k exactly when kdist2[i] <=
 * gc_eps2(eps).  Exact, on the kd-tree of kdtree.h (any d); 1 <= k <= n.
 * kdist2 is n long, caller-allocated, in input order.
 */
gc_code		gc_kdistance_cpu(const gc_ctx *ctx, const float *X, int64_t n,
							 int d, int64_t k, float *kdist2, gc_status *st);

/*
 * The knee of the ascending curve y[0..n-1] (n >= 1): the index maximising
 * x' - y' where x' = i/(n-1) and y' = (y[i]-y[0])/(y[n-1]-y[0]), i.e. the
 * point farthest below the chord from the first point to the last, in the
 * unit square; the lowest such index on ties; 0 when n <= 2 or the curve is
 * flat.  x' - y' is Kneedle's difference curve (Satopaa et al., 2011), and
 * this its maximum.  On a convex curve (a k-distance curve without noise)
 * that is the only local maximum, and the kneed package's
 * KneeLocator(curve='convex', direction='increasing') finds the same row
 * (test_tools checks it against kneed's steps).  On a noisy curve kneed
 * stops at the first local maximum, scanning from the top, that the next
 * rows fall one step (1/(n-1)) below: a wiggle among the largest values
 * (on the world cities, k = 10: row 134,948 of 135,233, 4.25 degrees),
 * where the maximum is the point where the curve turns (row 132,376, 1.50
 * degrees).  Not to be trusted where the curve has no one turn: a heavy
 * tail (a few far rows set the scale, so the knee marks where the sparse
 * rows begin, not a density of clusters), clusters of very different
 * densities (no one eps suits them), a concave curve (0).
 */
int64_t		gc_knee_index(const double *y, int64_t n);

/*
 * Silhouette (silhouette.c), scikit-learn's silhouette_score: rows with
 * label < 0 are left out; labels are 0 .. m-1.  For row i of a cluster of
 * size > 1, a = mean distance to the other rows of its cluster, b = the
 * smallest mean distance to another cluster's rows, s = (b - a) / max(a, b)
 * (0 when both are 0); s = 0 in a cluster of one row.  The score is the
 * mean of s.  Distances are Euclidean, in double precision from the float32
 * features.  With 0 < sample_size < the labelled rows, only sample_size of
 * them, drawn uniformly without replacement by rng.h keyed by seed, are
 * scored among themselves (as silhouette_score(sample_size=...) does).
 * GC_EINVAL unless the (sampled) rows have 2 <= clusters <= rows - 1.
 * O(r^2 d) time for r scored rows, O(r + threads * m) memory.
 */
/*
 * The most rows gpu_silhouette scores exactly when no sample_size is given
 * (O(r^2 d): 20,000 2-d rows take about a second on two cores); beyond,
 * it scores a sample of this many.
 */
#define GC_SILHOUETTE_EXACT_ROWS 20000

typedef struct gc_silhouette_result
{
	double		score;
	int64_t		rows;			/* rows scored */
	int64_t		clusters;		/* clusters among them */
	bool		sampled;
} gc_silhouette_result;

gc_code		gc_silhouette_cpu(const gc_ctx *ctx, const float *X, int64_t n,
							  int d, const int32_t *labels, int32_t m,
							  int64_t sample_size, uint64_t seed,
							  gc_silhouette_result *res, gc_status *st);

/*
 * The rows a silhouette of labels (n of them) with sample_size scores: the
 * labelled rows (label >= 0), or sample_size of them when 0 < sample_size
 * < their number (gc_silhouette_cpu's rule).
 */
int64_t		gc_silhouette_rows(const int32_t *labels, int64_t n,
							   int64_t sample_size);

/*
 * Where the tools run: gpu_kdistance's k-distances and gpu_silhouette
 * under 'auto' run on the GPU from GC_KDISTANCE_GPU_MIN_ROWS rows /
 * GC_SILHOUETTE_GPU_MIN_ROWS rows scored up when CUDA already runs in the
 * process (the GPU worker's always does), from the _COLD ones when the
 * call would start it: there the CPU time the GPU saves repays CUDA's
 * start-up, 0.15-0.35 s.  Measured on an H100 with 16 CPU cores
 * (test/gpu/bench_tools, whole core calls, CUDA running; the tables:
 * docs/benchmarks.md).
 */
#define GC_KDISTANCE_GPU_MIN_ROWS 10000
#define GC_KDISTANCE_GPU_MIN_ROWS_COLD 1000000
#define GC_SILHOUETTE_GPU_MIN_ROWS 1000
#define GC_SILHOUETTE_GPU_MIN_ROWS_COLD 20000

/*
 * The device of one gpu_kdistance call (n rows of d features, the k-th
 * nearest), as gc_choose_device_ap's: CPU: always.  GPU: the GPU when one
 * is usable, n <= GC_DBSCAN_GPU_MAX_N and gc_kdistance_gpu_mem_bytes(n, d,
 * k) fits the GPU memory a call may use (gc_gpu_budget), else GC_EDEVICE
 * (the reason) or GC_ENOMEM.  AUTO: the CPU below
 * GC_KDISTANCE_GPU_MIN_ROWS (_COLD when CUDA is not running yet; CUDA
 * untouched) or without a usable GPU; when the GPU's memory is too small,
 * the CPU with a note (note, note_len; empty otherwise) the caller shows
 * as a NOTICE; else the GPU.
 */
gc_code		gc_choose_device_kdistance(gc_device requested, int64_t n, int d,
									   int64_t k, const gc_gpu *gpu,
									   gc_device *chosen, char *note,
									   size_t note_len, gc_status *st);

/*
 * The device of one gpu_silhouette call scoring rows rows
 * (gc_silhouette_rows) of d features in m clusters: the same rule, with
 * GC_SILHOUETTE_GPU_MIN_ROWS (_COLD), rows <= INT32_MAX and
 * gc_silhouette_gpu_mem_bytes(rows, d, m).
 */
gc_code		gc_choose_device_silhouette(gc_device requested, int64_t rows,
										int d, int32_t m, const gc_gpu *gpu,
										gc_device *chosen, char *note,
										size_t note_len, gc_status *st);

/* The rows chosen by a sample: sample_size positions of 0..n-1, ascending. */
gc_code		gc_sample_rows(int64_t n, int64_t sample_size, uint64_t seed,
						   int64_t *out, gc_status *st);

/*
 * Cluster summaries (cluster_summary.c): for labels 0 .. m-1 (rows with
 * label < 0 left out), sizes[c], centres[c*d + j] the mean of feature j in
 * double, radius[c] the largest and mean_dist[c] the mean Euclidean
 * distance (double) of the cluster's rows to its centre, sumsq[c] the sum
 * of their squared distances to it (summed in row order).  Arrays of m
 * (and m*d), caller-allocated; radius and sumsq may be NULL (not wanted).
 * An empty cluster gets size 0 and NaN elsewhere.
 */
gc_code		gc_cluster_summary_cpu(const gc_ctx *ctx, const float *X,
								   int64_t n, int d, const int32_t *labels,
								   int32_t m, int64_t *sizes, double *centres,
								   double *radius, double *mean_dist,
								   double *sumsq, gc_status *st);

/*
 * Internal scores of a labelling (cluster_scores.c), scikit-learn's on the
 * labelled rows: rows with label < 0 are left out, labels are 0 .. m-1 and
 * those with no row take no part.  In double from the float32 features,
 * centres as gc_cluster_summary_cpu's.  GC_EINVAL unless the labelled rows
 * have 2 <= clusters <= rows - 1, with res->rows and res->clusters filled;
 * the scores are NaN unless GC_OK.  O(n d + K^2 d) time for K non-empty
 * clusters (no bound on K here: a caller that wants one sets it), O(m d)
 * memory.
 */
typedef struct gc_cluster_scores
{
	/*
	 * davies_bouldin_score: the mean over clusters of the largest (s_a +
	 * s_b) / |c_a - c_b| over the other clusters b, s the mean distance to
	 * the centre c; a centre distance of 0 counts as infinite; 0 when every
	 * s or every centre distance is within 1e-8 of 0
	 */
	double		davies_bouldin;
	/*
	 * calinski_harabasz_score: extra (rows - clusters) / (inertia
	 * (clusters - 1)), extra the sum of size * |centre - mean|^2 (mean: of
	 * the labelled rows); 1 when the inertia is 0
	 */
	double		calinski_harabasz;
	/* the sum over labelled rows of the squared distance to its centre */
	double		inertia;
	int64_t		rows;			/* labelled rows (label >= 0) */
	int64_t		clusters;		/* labels with at least one row */
} gc_cluster_scores;

gc_code		gc_cluster_scores_cpu(const gc_ctx *ctx, const float *X, int64_t n,
								  int d, const int32_t *labels, int32_t m,
								  gc_cluster_scores *res, gc_status *st);

/*
 * What the silhouette's two devices share (silhouette.c's driver,
 * cuda/tools/silhouette.cu), so that they score the same rows and form each
 * row's value with the same operations.
 *
 * The driver chooses the rows scored: the checks, the labelled rows, the
 * sample (gc_sample_rows), the per-cluster sizes and the cluster count
 * (GC_EINVAL with res->rows, clusters and sampled filled).  A device then
 * sums, for each scored row i, sqrt(gc_dist2_f64(x_i, x_j)) over the
 * scored rows j in ascending order into its cluster's sum (double), folds
 * the sums into a and b with gc_sil_nearer and gc_sil_value below, and
 * hands the driver the values s (in scored order), which it sums in that
 * order.
 */
/* The rows a silhouette scores, as the driver chose them. */
typedef struct gc_sil_rows
{
	int64_t		r;				/* rows scored */
	int64_t    *rows;			/* r: their positions in X, ascending */
	int32_t    *lab;			/* r: their labels */
	int64_t    *size;			/* m: rows scored of each label */
	int32_t		m;				/* labels 0 .. m-1 */
	int64_t		clusters;		/* labels with size > 0 */
} gc_sil_rows;


#ifdef __cplusplus
}
#endif

/* The silhouette's formulas, shared with the GPU (C++ linkage under nvcc). */

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

#endif							/* GPUCLUST_TOOLS_H */
