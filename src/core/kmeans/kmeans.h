/*
 * kmeans/kmeans.h — k-means's public interface: the call (gc_kmeans_cpu),
 * its parameters and result, the labels of rows for given centres, the
 * device choice, and the steps the GPU k-means and the distributed
 * k-means share with the CPU (seeding, Lloyd steps, inertia).
 */
#ifndef GPUCLUST_KMEANS_H
#define GPUCLUST_KMEANS_H

#include <math.h>
#include <string.h>

#include "common/core.h"
#include "common/metric.h"		/* gc_dist2, gc_eps2: the one distance */
#include "common/rng.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* k-means                                                             */
/* ------------------------------------------------------------------ */

typedef enum gc_kmeans_init
{
	GC_INIT_KMEANSPP = 0,		/* greedy k-means++, as scikit-learn */
	GC_INIT_RANDOM,				/* k distinct rows drawn uniformly */
	GC_INIT_CENTROIDS,			/* init_centroids, as given (one run) */
	GC_INIT_KMEANS_PARALLEL,	/* k-means|| (Bahmani et al.), below */
	GC_INIT_AUTO				/* k-means|| when k >= GC_KM_AUTO_PARALLEL_K, else k-means++ */
} gc_kmeans_init;

/* The largest sample weight: the largest float (no weighted sum overflows). */
#define GC_KMEANS_MAX_WEIGHT 3.40282346638528859811704183484516925e+38

/*
 * How gc_kmeans_gpu runs a problem in a budget of device memory
 * (gc_kmeans_gpu_plan_for): with X resident (its whole footprint,
 * gc_kmeans_gpu_mem_bytes, fits), else streamed: X stays in host memory
 * and every pass over it (the feature statistics, each Lloyd iteration,
 * the final inertia and distances) uploads it in chunks of chunk_rows rows
 * (a multiple of GC_KM_BLOCK, so every fixed-order double sum is
 * unchanged) through two pinned buffers, the copy of one chunk overlapping
 * the work on the other; only O(n) small arrays (labels, the distances
 * behind empty-cluster re-seeding; the best run's labels when n_init > 1)
 * and O(k d) stay on the device.  Results are bit for bit those of the
 * resident path.  fits is false when not even chunks of GC_KM_BLOCK rows
 * fit.
 */
typedef struct gc_kmeans_gpu_plan
{
	bool		fits;
	bool		streamed;
	int64_t		chunk_rows;		/* streamed: rows per chunk */
	int64_t		chunks;			/* streamed: chunks per pass */
	size_t		bytes;			/* device memory the call allocates (an upper bound) */
	size_t		budget;			/* the memory it was made for */
} gc_kmeans_gpu_plan;

/*
 * The parameters of a k-means call.  Every device has every one of them
 * (the GPU's run equals the CPU's: cuda/kmeans/kmeans.cu).
 *
 * init_centroids (init GC_INIT_CENTROIDS): the k initial centres, k x
 * init_d row-major, init_d == d, every value finite and within
 * gc_feature_limit(d).  As scikit-learn with an array init, there is one
 * run whatever n_init says (the runs would all be the same).
 *
 * weights: one per row, finite, 0 <= w <= GC_KMEANS_MAX_WEIGHT, at least
 * k of them positive; NULL: every row weighs 1.  As scikit-learn 1.2's
 * sample_weight: centres are weighted means, the inertia is the weighted
 * sum of squared distances (which picks the best of n_init runs), and a
 * cluster is empty (re-seeded) when its rows' weights sum to 0.  The
 * seeding is weighted as in scikit-learn >= 1.3 (k-means++: the first
 * centre in proportion to w, the trials to w D², the trials' potentials
 * weighted; random: rows in proportion to w, without replacement), so a
 * row of weight 0 is never a seed; the variance that scales tol is
 * unweighted, as in scikit-learn.  Where scikit-learn would re-seed an
 * empty cluster with a row of weight 0, the farthest row of positive
 * weight is taken instead.
 */
typedef struct gc_kmeans_params
{
	int			k;				/* 1 <= k <= n */
	int			max_iter;		/* >= 1 */
	double		tol;			/* >= 0, relative to mean feature variance */
	gc_kmeans_init init;
	int			n_init;			/* >= 1; the run of lowest inertia is kept */
	uint64_t	seed;
	const float *init_centroids;	/* GC_INIT_CENTROIDS: k x init_d */
	int			init_d;
	const double *weights;		/* n sample weights, or NULL */
	/*
	 * rows_checked: the caller has checked the rows as the entry would
	 * (every weight in range; under cosine no row all 0) and, with
	 * weights, counted the rows of positive weight into positive_weights
	 * (the glue does, as it reads them); the entry then checks only
	 * positive_weights >= k, with no pass over the rows.  false: the entry
	 * checks the rows and counts the weights itself.
	 */
	bool		rows_checked;
	int64_t		positive_weights;
	gc_metric	metric;			/* euclidean (0) or cosine: below */
	/*
	 * GPU only (the CPU ignores both): the plan the call runs by
	 * (gc_kmeans_gpu_plan_for), made for exactly this call by its device
	 * choice (gc_choose_device_kmeans) and carried to the run (and in the
	 * GPU worker's job, whose admission counts its bytes).  Zero: none,
	 * and the run plans for gpu_mem, the device memory the call may use
	 * (bytes; 0: the device's free memory when the call starts).  A
	 * problem whose data do not fit is streamed in chunks of rows.
	 */
	gc_kmeans_gpu_plan gpu_plan;
	size_t		gpu_mem;
} gc_kmeans_params;

/*
 * The runs of a fit: one from given centroids (scikit-learn's n_init=1 for
 * an array init), else n_init.
 */
static inline int
gc_kmeans_runs(const gc_kmeans_params *p)
{
	return p->init == GC_INIT_CENTROIDS ? 1 : p->n_init;
}

/*
 * metric GC_METRIC_COSINE is spherical k-means (Dhillon & Modha): every
 * row is replaced by its unit row (gc_unit_rows; a zero row is GC_EINVAL),
 * and the Euclidean k-means runs on the unit rows with unit centres: a
 * row goes to the centre of largest cosine, which is the nearest unit
 * centre (|u - c|^2 = 2 - 2 cos), assigned by the same kernel and tie
 * rule, always against the unit rows of the current centres
 * (gc_unit_row), as kmeans_assign(..., 'cosine') scores them; a centre is
 * the (weighted) mean of its members' unit rows, normalized (a mean of 0,
 * members that cancel exactly, keeps the old centre, as an empty cluster
 * does); given initial centroids are normalized first (a zero one is
 * GC_EINVAL).  k-means++ runs on the unit rows unchanged, so it draws in
 * proportion to the squared Euclidean distance of the unit rows, i.e. to
 * the cosine distance 1 - cos to the nearest centre (Endo & Miyamoto's
 * spherical k-means++); random draws rows as ever.  tol scales with the
 * variance of the unit rows; an empty cluster takes the rows of largest
 * cosine distance.  The distance is the cosine distance q / 2, q the double
 * sum of squared differences of the unit row and the unit centre
 * (gc_dist2_f64; metric.h: 1 - cos in the reals), and the inertia the
 * (weighted) sum of cosine distances, not of their squares: what spherical
 * k-means lowers at each step (gc_km_distance, gc_km_cost); it also picks
 * the best of n_init runs.
 */

/*
 * The distance column from q, gc_dist2_f64 of the row and its centre (under
 * cosine: of the unit row and the unit centre): Euclidean sqrt(q), cosine
 * q / 2.
 */
GC_HD double
gc_km_distance(double q, gc_metric metric)
{
	return metric == GC_METRIC_COSINE ? q / 2.0 : sqrt(q);
}

/* A row's term in the inertia from q: Euclidean q (distance²), cosine q / 2. */
GC_HD double
gc_km_cost(double q, gc_metric metric)
{
	return metric == GC_METRIC_COSINE ? q / 2.0 : q;
}

typedef struct gc_kmeans_result
{
	/* caller-allocated outputs */
	int32_t    *labels;			/* n: 0 .. k-1 */
	double	   *distance;		/* n: Euclidean distance to own centre; may be NULL */
	float	   *centroids;		/* k*d, row-major */
	/* filled by the core */
	double		inertia;		/* sum of squared distances, in double */
	int			iterations;		/* Lloyd iterations of the kept run */
	bool		converged;		/* kept run met tol (or labels stopped changing) */
} gc_kmeans_result;

gc_code		gc_kmeans_cpu(const gc_ctx *ctx, const float *X, int64_t n, int d,
						  const gc_kmeans_params *p, gc_kmeans_result *res,
						  gc_status *st);

/*
 * The clustering of rows too few for k (a window partition of fewer rows
 * than k): each distinct point its own cluster, numbered 0, 1, ... in the
 * order of its first row, which is the k-means clustering of inertia 0.
 * Points are equal when every feature compares equal (so -0 equals 0);
 * under cosine a point is the unit row (gc_unit_rows: rows of one
 * direction are one point), and a zero row is GC_EINVAL.  *clusters = the
 * distinct points.  O(n d log n) time, O(n d) memory (GC_ENOMEM).
 */
gc_code		gc_kmeans_distinct_labels(const gc_ctx *ctx, const float *X,
									  int64_t n, int d, gc_metric metric,
									  int32_t *labels, int64_t *clusters,
									  gc_status *st);

/*
 * The k-means assignment of the n rows X to the k given centres C (k x d):
 * labels[i] is the nearest centre by the float32 gc_dist2, ties to the
 * lowest index (gc_km_nearest's rule), through gc_km_assign's blocked
 * kernel on the context's threads.  The kmeans_step aggregate labels its
 * buffered rows with it (or with gc_kmeans_labels_gpu, the same labels).
 */
gc_code		gc_kmeans_labels_cpu(const gc_ctx *ctx, const float *X, int64_t n,
								 int d, const float *C, int k, int32_t *labels,
								 gc_status *st);

/*
 * What the kmeans_step aggregate keeps of a block of n rows labelled for
 * the k centres C: each row's float32 distance² to its centre (gc_dist2,
 * d2[i]), the same in double (gc_dist2_f64, dist[i]) and the hash of its
 * features (gc_km_row_hash, hash[i]), and its features added to its
 * cluster's double sums (k x d) in row order, so that each sum is the one
 * a row-at-a-time loop gives, bit for bit.  On the context's threads.
 */
void		gc_kmeans_block_terms(const gc_ctx *ctx, const float *X, int64_t n,
								  int d, const float *C, int k,
								  const int32_t *labels, double *sums,
								  float *d2, double *dist, uint64_t *hash);

/* The hash of a row's float32 features (kmeans_step's members). */
uint64_t	gc_km_row_hash(const float *x, int d);

/* ---- device choice (common/dispatch.c) ---- */

/*
 * k-means from this much work per Lloyd iteration (n·k·d) up, 'auto' runs
 * on the GPU.  The GPU's fixed costs are a few ms of allocation and upload
 * and ~0.5 ms per k-means++ centre, so small k·iterations favour the CPU;
 * 5e8 keeps 'auto' on the CPU wherever the CPU won or nearly tied on an
 * H200 with 16 CPU cores (test/gpu/bench_crossover.c; the table:
 * docs/benchmarks.md).  A backend's first GPU call also pays ~150-230 ms
 * of CUDA initialisation.
 */
#define GC_KMEANS_GPU_MIN_WORK 5.0e8

/*
 * The kmeans_step aggregate's blocks (gc_kmeans_labels_*: one assignment,
 * no iterations) go to the GPU under 'auto' from this many centres up, and
 * n·k·d >= GC_KMEANS_GPU_MIN_WORK.  Both devices' costs grow with n·d, the
 * CPU's also with k, so k decides; each block through the GPU worker pays
 * a fixed cost the CPU does not (test/gpu/bench_kmeans_step.py on an H200
 * with 16 cores: docs/benchmarks.md); fewer cores move the crossover down.
 */
#define GC_KMEANS_LABELS_GPU_MIN_K 256

/* Whether requested may label a block of rows for k centres on the GPU. */
static inline bool
gc_kmeans_labels_gpu_wanted(gc_device requested, int k)
{
	return requested == GC_DEVICE_GPU ||
		(requested == GC_DEVICE_AUTO && k >= GC_KMEANS_LABELS_GPU_MIN_K);
}

/*
 * The device of one k-means call of runs fits (gc_kmeans_runs).  CPU:
 * always.  GPU: the GPU, or
 * GC_EDEVICE (no usable GPU, with the reason) or GC_ENOMEM (the problem
 * does not fit the GPU memory it may use (gc_gpu_budget) even streamed in
 * chunks, gc_kmeans_gpu_plan_for; or n > INT32_MAX).  AUTO: the
 * CPU when n·k·d < GC_KMEANS_GPU_MIN_WORK (without touching CUDA) or no GPU
 * is usable; when the GPU's free memory is too small, the CPU with a note
 * (note, note_len; empty otherwise) the caller shows as a NOTICE; else the
 * GPU.  gc_choose_device(GC_ALGO_KMEANS) answers for a problem big enough.
 *
 * weighted: the call has sample weights, whose GPU run keeps its rows
 * resident (gc_kmeans_gpu_plan_for): too large for that is the CPU with a
 * note under AUTO, GC_ENOMEM under GPU.
 *
 * plan (may be NULL): when the GPU is chosen, the plan made for the memory
 * the call may use, which the run takes as gc_kmeans_params.gpu_plan so
 * that neither the probe nor the plan is made twice; zeroed otherwise.
 */
gc_code		gc_choose_device_kmeans(gc_device requested, int64_t n, int d,
									int k, int runs, bool weighted,
									const gc_gpu *gpu, gc_device *chosen,
									gc_kmeans_gpu_plan *plan, char *note,
									size_t note_len, gc_status *st);

/* ---- the steps the GPU and the distributed k-means share with the CPU ---- */

/* Points per block of every parallel loop and fixed-order reduction. */
#define GC_KM_BLOCK 4096

/* Members of one cluster summed sequentially before segments are combined. */
#define GC_KM_SEGMENT 4096

/*
 * The rows of each GPU's shard but the last when gc_kmeans_gpu splits n rows
 * over gpus GPUs (ctx->n_gpus; cuda/kmeans/kmeans_multi.cu): whole blocks,
 * as many to each, so every shard starts at a multiple of GC_KM_BLOCK and
 * none holds more; the last holds the rest (fewer GPUs take part when n
 * has fewer blocks, or leaves the last ones none).
 */
static inline int64_t
gc_kmeans_gpu_shard_rows(int64_t n, int gpus)
{
	const int64_t blocks = (n + GC_KM_BLOCK - 1) / GC_KM_BLOCK;
	const int64_t g = gpus < 1 ? 1 : gpus;

	return (blocks + g - 1) / g * GC_KM_BLOCK;
}

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
 * (src/distributed/) seeds from the same rows of a source in a fixed order.
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
 * change the result; the GPU (cuda/kmeans/kmeans_par.cu) reproduces it bit for
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


#ifdef __cplusplus
}
#endif

#endif							/* GPUCLUST_KMEANS_H */
