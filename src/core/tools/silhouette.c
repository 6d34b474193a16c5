/*
 * silhouette.c — the mean silhouette coefficient of a labelling, as
 * scikit-learn's silhouette_score computes it (Rousseeuw, 1987).
 *
 * Rows with a negative label (noise, or no label) are left out before
 * anything else, so the score is silhouette_score(X[keep], labels[keep]).
 * One driver (silhouette) serves both devices: it chooses the rows scored
 * (sil_select: the checks, the sample, the clusters), has a device form
 * each scored row's value (sil_scores_cpu here, gc_silhouette_gpu in
 * cuda/tools/silhouette.cu, both through gc_sil_nearer and gc_sil_value of
 * tools/tools.h), and sums the values (sil_finish), so both devices score
 * the same rows alike.  The GPU is reached through gc_silhouette_on_gpu.
 * On the CPU, for each scored row i (in parallel, one row per task), one
 * pass over the scored rows sums the Euclidean distances to each cluster
 * (double precision: each difference of float32 features is exact in
 * double, the squares and sums rounded in double, then sqrt), in a
 * per-thread array of m sums: O(r^2 d) time, O(r + threads * m) memory.
 * The cancel flags are
 * polled before every row; progress: rows scored of r.  a(i) is the sum over
 * i's own cluster divided by its size - 1, b(i) the smallest sum over size
 * among the other non-empty clusters; s(i) = (b - a) / max(a, b), 0 when
 * both are 0 (scikit-learn's nan_to_num) and in a cluster of one row.  The
 * per-row values are summed in row order, so the score does not depend on
 * the thread count.
 *
 * Sampling (sample_size < labelled rows): gc_sample_rows draws the
 * positions by a partial Fisher-Yates shuffle keyed by seed (rng.h), and
 * the sample is scored among itself, as silhouette_score(sample_size=...)
 * scores its random subset (the subset differs from scikit-learn's, which
 * uses numpy's generator).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>

#include "tools/tools.h"
#include "common/gpu.h"
#include "common/rng.h"

#define SIL_STREAM 0x51u		/* the generator's stream for sampling */

gc_code
gc_sample_rows(int64_t n, int64_t sample_size, uint64_t seed, int64_t *out,
			   gc_status *st)
{
	int64_t    *idx;

	if (sample_size < 0 || sample_size > n)
		return gc_fail(st, GC_EINVAL, "sample size %lld out of range",
					   (long long) sample_size);
	idx = malloc(sizeof(int64_t) * (size_t) (n > 0 ? n : 1));
	if (idx == NULL)
		return gc_fail(st, GC_ENOMEM, "out of memory for the sample");
	for (int64_t i = 0; i < n; i++)
		idx[i] = i;
	for (int64_t i = 0; i < sample_size; i++)
	{
		int64_t		j = i + (int64_t) (gc_rng_uniform(seed, SIL_STREAM, (uint64_t) i) *
									   (double) (n - i));
		int64_t		tmp;

		if (j >= n)
			j = n - 1;
		tmp = idx[i];
		idx[i] = idx[j];
		idx[j] = tmp;
	}
	qsort(idx, (size_t) sample_size, sizeof(int64_t), gc_cmp_int64);
	memcpy(out, idx, sizeof(int64_t) * (size_t) sample_size);
	free(idx);
	return GC_OK;
}

/* The rows scored of r labelled ones: sample_size of them when 0 < it < r. */
static int64_t
sil_scored(int64_t r, int64_t sample_size)
{
	return sample_size > 0 && sample_size < r ? sample_size : r;
}

int64_t
gc_silhouette_rows(const int32_t *labels, int64_t n, int64_t sample_size)
{
	int64_t		labelled = 0;

	for (int64_t i = 0; i < n; i++)
		labelled += labels[i] >= 0;
	return sil_scored(labelled, sample_size);
}

/*
 * Chooses the rows a silhouette of X (n x d, labels 0 .. m-1, negative
 * ones left out) scores; resets st and res, then fills res->rows,
 * res->clusters and res->sampled.  GC_EINVAL unless the scored rows have 2
 * <= clusters <= rows - 1.  On any failure nothing is left allocated in
 * sel.
 */
static gc_code
sil_select(const float *X, int64_t n, int d, const int32_t *labels,
		   int32_t m, int64_t sample_size, uint64_t seed, gc_sil_rows *sel,
		   gc_silhouette_result *res, gc_status *st)
{
	int64_t		r = 0,
				clusters = 0;
	int64_t    *rows,
			   *size;
	int32_t    *lab;

	(void) d;
	st->code = GC_OK;
	st->message[0] = '\0';
	memset(res, 0, sizeof(*res));
	memset(sel, 0, sizeof(*sel));
	if (m < 0 || n < 0 || (n > 0 && (X == NULL || labels == NULL)))
		return gc_fail(st, GC_EINVAL, "bad arguments");
	for (int64_t i = 0; i < n; i++)
	{
		if (labels[i] >= m)
			return gc_fail(st, GC_EINTERNAL, "label %d out of range", labels[i]);
		if (labels[i] >= 0)
			r++;
	}
	rows = malloc(sizeof(int64_t) * (size_t) (r > 0 ? r : 1));
	size = calloc((size_t) (m > 0 ? m : 1), sizeof(int64_t));
	if (rows == NULL || size == NULL)
	{
		free(rows);
		free(size);
		return gc_fail(st, GC_ENOMEM, "out of memory for the silhouette");
	}
	r = 0;
	for (int64_t i = 0; i < n; i++)
		if (labels[i] >= 0)
			rows[r++] = i;
	if (sil_scored(r, sample_size) < r)
	{
		int64_t    *pick = malloc(sizeof(int64_t) * (size_t) sample_size);
		gc_code		rc;

		if (pick == NULL)
		{
			free(rows);
			free(size);
			return gc_fail(st, GC_ENOMEM, "out of memory for the sample");
		}
		rc = gc_sample_rows(r, sample_size, seed, pick, st);
		if (rc != GC_OK)
		{
			free(pick);
			free(rows);
			free(size);
			return rc;
		}
		for (int64_t i = 0; i < sample_size; i++)
			pick[i] = rows[pick[i]];
		free(rows);
		rows = pick;
		r = sample_size;
		res->sampled = true;
	}
	for (int64_t i = 0; i < r; i++)
		if (size[labels[rows[i]]]++ == 0)
			clusters++;
	res->rows = r;
	res->clusters = clusters;
	if (clusters < 2 || clusters > r - 1)
	{
		free(rows);
		free(size);
		return gc_fail(st, GC_EINVAL,
					   "the silhouette needs 2 to rows - 1 clusters; %lld row%s scored%s have %lld cluster%s",
					   (long long) r, r == 1 ? "" : "s",
					   res->sampled ? " (sampled)" : "",
					   (long long) clusters, clusters == 1 ? "" : "s");
	}
	lab = malloc(sizeof(int32_t) * (size_t) r);
	if (lab == NULL)
	{
		free(rows);
		free(size);
		return gc_fail(st, GC_ENOMEM, "out of memory for the silhouette");
	}
	for (int64_t i = 0; i < r; i++)
		lab[i] = labels[rows[i]];
	sel->r = r;
	sel->rows = rows;
	sel->lab = lab;
	sel->size = size;
	sel->m = m;
	sel->clusters = clusters;
	return GC_OK;
}

static void
sil_free(gc_sil_rows *sel)
{
	free(sel->rows);
	free(sel->lab);
	free(sel->size);
	memset(sel, 0, sizeof(*sel));
}

/* res->score: the mean of s[0 .. r-1], summed in that order. */
static void
sil_finish(const double *s, int64_t r, gc_silhouette_result *res)
{
	double		total = 0.0;

	for (int64_t i = 0; i < r; i++)
		total += s[i];
	res->score = total / (double) r;
}

/*
 * Each scored row's value s[i] on the CPU: its distance sums per cluster
 * (sum[c] over the scored rows j in ascending order), folded into a and b.
 */
static gc_code
sil_scores_cpu(const gc_ctx *ctx, const float *X, int d,
			   const gc_sil_rows *sel, double *s, gc_status *st)
{
	const int64_t r = sel->r,
			   *rows = sel->rows,
			   *size = sel->size;
	const int32_t *lab = sel->lab,
				m = sel->m;
	int			team;
	int			stop = 0;
	bool		nomem = false;
	gc_loop_progress lp;

	gc_loop_progress_start(&lp, ctx, GC_PHASE_ITERATE, r);
	team = gc_region_threads(gc_team_adapt(ctx), r);
#pragma omp parallel num_threads(team)
	{
		double	   *sum = malloc(sizeof(double) * (size_t) (m > 0 ? m : 1));
		const bool	caller = omp_get_thread_num() == 0;

		if (sum == NULL)
		{
			__atomic_store_n(&nomem, true, __ATOMIC_RELAXED);
			__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
		}
#pragma omp for schedule(dynamic, 16)
		for (int64_t i = 0; i < r; i++)
		{
			const float *xi = X + rows[i] * d;
			int32_t		li = lab[i];
			double		b = INFINITY;

			if (__atomic_load_n(&stop, __ATOMIC_RELAXED))
				continue;
			if (gc_cancelled(ctx))
			{
				__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
				continue;
			}
			if (size[li] == 1)
				s[i] = 0.0;
			else
			{
				memset(sum, 0, sizeof(double) * (size_t) m);
				for (int64_t j = 0; j < r; j++)
					sum[lab[j]] += sqrt(gc_dist2_f64(xi, X + rows[j] * d, d));
				for (int32_t c = 0; c < m; c++)
					if (c != li && size[c] > 0)
						b = gc_sil_nearer(b, sum[c], size[c]);
				s[i] = gc_sil_value(sum[li], size[li], b);
			}
			gc_loop_progress_add(&lp, 1, caller);
		}
		free(sum);
	}
	if (nomem)
		return gc_fail(st, GC_ENOMEM, "out of memory for the per-thread sums");
	if (stop)
		return gc_fail(st, GC_ECANCEL, "canceled");
	gc_loop_progress_end(&lp);
	return GC_OK;
}

/* A device's values of the scored rows (sil_scores_cpu, gc_silhouette_gpu). */
typedef gc_code (*sil_scores_fn) (const gc_ctx *ctx, const float *X, int d,
								  const gc_sil_rows *sel, double *s,
								  gc_status *st);

/* The silhouette on one device: the rows, their values, the score. */
static gc_code
silhouette(sil_scores_fn scores, const gc_ctx *ctx, const float *X,
		   int64_t n, int d, const int32_t *labels, int32_t m,
		   int64_t sample_size, uint64_t seed, gc_silhouette_result *res,
		   gc_status *st)
{
	gc_sil_rows sel;
	double	   *s;
	gc_code		rc;

	rc = sil_select(X, n, d, labels, m, sample_size, seed, &sel, res, st);
	if (rc != GC_OK)
		return rc;
	if ((s = malloc(sizeof(double) * (size_t) sel.r)) == NULL)
		rc = gc_fail(st, GC_ENOMEM, "out of memory for the silhouette");
	else if ((rc = scores(ctx, X, d, &sel, s, st)) == GC_OK)
		sil_finish(s, sel.r, res);
	free(s);
	sil_free(&sel);
	return rc;
}

gc_code
gc_silhouette_cpu(const gc_ctx *ctx, const float *X, int64_t n, int d,
				  const int32_t *labels, int32_t m, int64_t sample_size,
				  uint64_t seed, gc_silhouette_result *res, gc_status *st)
{
	return silhouette(sil_scores_cpu, ctx, X, n, d, labels, m, sample_size,
					  seed, res, st);
}

gc_code
gc_silhouette_on_gpu(const gc_ctx *ctx, const float *X, int64_t n, int d,
					 const int32_t *labels, int32_t m, int64_t sample_size,
					 uint64_t seed, gc_silhouette_result *res, gc_status *st)
{
	return silhouette(gc_silhouette_gpu, ctx, X, n, d, labels, m,
					  sample_size, seed, res, st);
}
