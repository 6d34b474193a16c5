/*
 * affinity.c — affinity propagation (Frey & Dueck, 2007) with the semantics
 * of scikit-learn 1.2's AffinityPropagation
 * (sklearn/cluster/_affinity_propagation.py): the one driver, gc_ap_run,
 * over a device's passes (affinity/affinity.h; the CPU's in
 * affinity_cpu.c, the GPU's in cuda/affinity/affinity.cu).  What every device
 * computes, entry by entry:
 *
 * Similarities.  S[i][j] = -sum_k (x_ik - x_jk)^2, each term and the sum in
 * double, in dimension order, from the float32 features (gc_dist2_f64);
 * exactly symmetric ((x - y)^2 == (y - x)^2).  scikit-learn computes
 * -(|x|^2 - 2 x.y + |y|^2): the same numbers up to a few ulps of |x|^2.
 *
 * Preference.  By default np.median(S) over all n^2 entries, the diagonal
 * still 0, as scikit-learn: the mean of the two middle values when n is
 * even.  Every off-diagonal entry is <= 0 and appears twice, so the k-th
 * smallest entry of the full matrix is the (k/2)-th smallest of the upper
 * triangle when k < n(n-1), and 0 (the diagonal) otherwise; the device
 * finds the upper triangle's order statistics exactly (an order statistic
 * is one number, however it is found).  The preference then replaces the
 * diagonal.
 *
 * Degenerate input.  As scikit-learn: when n == 1 or all off-diagonal
 * similarities are equal, nothing iterates; if preference >= S[0][n-1]
 * every row is its own exemplar (cluster i for row i), else row 0 is the
 * one exemplar of one cluster.  res->equal_similarities says so.
 *
 * Noise.  scikit-learn removes degeneracies (ties) by adding
 * (eps*S + 100*tiny) * N(0,1) to S (numpy's RandomState(0) by default),
 * after placing the preference.  numpy's generator cannot be reproduced, so
 * the same formula is applied with z uniform on [-sqrt 3, sqrt 3) (mean 0,
 * variance 1) from the core's counter-based generator (rng.h; seed 0, a
 * stream of its own, counter i*n + j): deterministic, independent of the
 * device and thread count, and as good at breaking ties.  Without any
 * noise, exactly symmetric inputs (small integer coordinates, duplicate
 * rows) often keep tied candidates in lockstep, and fail to converge or
 * end without an exemplar where scikit-learn finds one.  Where the input
 * has genuine ties the result is one of the answers scikit-learn gives for
 * some random state, not necessarily that of random_state=0;
 * test/server/compare_sklearn_ap.py detects and reports those cases.  Remaining
 * exact ties in the argmaxes below go to the lowest position, as numpy's
 * argmax.
 *
 * Iterations.  scikit-learn's updates, literally, with the same floating
 * point operations in the same order:
 *   R = R*damping + (S - Y)*(1-damping), where Y is the row maximum of A+S,
 *       and at the (first) argmax the second largest value instead;
 *   colsum[j] = sum_i Rp[i][j] in row order, starting from 0.0 (numpy
 *       starts from row 0: the same value), Rp = max(R, 0) off the
 *       diagonal and R on it;
 *   A = A*damping - T*(1-damping), T = max(Rp - colsum, 0) off the
 *       diagonal and R[j][j] - colsum[j] on it;
 *   E = (diag(A) + diag(R)) > 0 marks the exemplars.
 * A row's top two values of A+S are a multiset property and a column sum
 * runs over the rows in order, so the results do not depend on how a
 * device splits the work, and equal scikit-learn's own code, given the
 * same S and noise, bit for bit (but for the sign of zeros, which no
 * comparison sees).
 *
 * float4 (GPU only).  S, R and A are stored as floats: each entry is
 * computed as above, in double from the stored values, and rounded once to
 * float when stored (S's distances and the preference too).  The noise
 * uses float's epsilon and smallest normal in place of double's: double's
 * would be rounded away, and the ties left in lockstep.  The median is
 * that of the stored floats, in double.
 *
 * Convergence.  scikit-learn's rule: after iteration it (0-based), when
 * it >= convergence_iter, every row's exemplar flag has been the same for
 * the last convergence_iter iterations, and at least one row is an
 * exemplar, it stops; res->iterations = it + 1.  Otherwise it stops after
 * max_iter iterations, not converged, and (as scikit-learn 1.2, which
 * warns) still labels the rows with the exemplars of the last iteration;
 * when there are none, every label is GC_NOISE.
 *
 * Labelling (scikit-learn's): I = rows with E, in index order; each row
 * goes to the exemplar of largest S[i][I[k]] (first k on ties), exemplars
 * to themselves.  Then each cluster's exemplar is re-chosen as the member
 * of largest summed similarity sum_m S[m][j] over the cluster's members m
 * (summed in member order; first member on ties), the rows are assigned
 * again to the refined exemplars (in the order of the clusters, first on
 * ties), and the clusters are numbered 0, 1, ... by their exemplars'
 * positions (np.unique).
 *
 * The cancel flags are polled between iterations here, and within the
 * passes by the device.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <omp.h>

#include "affinity/affinity.h"
#include "common/gpu.h"

bool
gc_parse_ap_precision(const char *s, gc_ap_precision *out)
{
	if (s == NULL)
		return false;
	if (strcasecmp(s, "float8") == 0)
		*out = GC_AP_FLOAT8;
	else if (strcasecmp(s, "float4") == 0)
		*out = GC_AP_FLOAT4;
	else
		return false;
	return true;
}

/* bytes of O(n) working memory per row (flags, sums, labelling) */
#define AP_BYTES_PER_ROW 64

size_t
gc_ap_mem_bytes(int64_t n)
{
	uint64_t	nn;

	if (n <= 0)
		return 0;
	if (n > INT32_MAX)
		return SIZE_MAX;
	nn = (uint64_t) n * (uint64_t) n;
	if (nn > (SIZE_MAX - (uint64_t) n * AP_BYTES_PER_ROW) / (3 * sizeof(double)))
		return SIZE_MAX;
	return (size_t) (nn * 3 * sizeof(double) + (uint64_t) n * AP_BYTES_PER_ROW);
}

int64_t
gc_ap_max_rows(size_t bytes)
{
	int64_t		n = (int64_t) sqrt((double) bytes / (3.0 * sizeof(double))) + 2;

	if (n > INT32_MAX)
		n = INT32_MAX;
	while (n > 0 && gc_ap_mem_bytes(n) > bytes)
		n--;
	return n;
}

const char *
gc_ap_precision_name(gc_ap_precision precision)
{
	return precision == GC_AP_FLOAT4 ? "float4" : "float8";
}

gc_code
gc_ap_check(const gc_ctx *ctx, const float *X, int64_t n, int d,
			const gc_ap_params *p, gc_ap_result *res, gc_status *st)
{
	if (st)
	{
		st->code = GC_OK;
		st->message[0] = '\0';
	}
	if (p == NULL || res == NULL)
		return gc_fail(st, GC_EINVAL, "affinity propagation: missing parameters or result");
	if (d < 1)
		return gc_fail(st, GC_EINVAL, "affinity propagation: the dimension must be at least 1, got %d", d);
	if (n < 0)
		return gc_fail(st, GC_EINVAL, "affinity propagation: negative row count");
	if (!(p->damping >= 0.5 && p->damping < 1.0))
		return gc_fail(st, GC_EINVAL, "affinity propagation: damping must be in [0.5, 1), got %g", p->damping);
	if (p->max_iter < 1)
		return gc_fail(st, GC_EINVAL, "affinity propagation: max_iter must be at least 1, got %d", p->max_iter);
	if (p->convergence_iter < 1)
		return gc_fail(st, GC_EINVAL, "affinity propagation: convergence_iter must be at least 1, got %d",
					   p->convergence_iter);
	if (p->has_preference && !isfinite(p->preference))
		return gc_fail(st, GC_EINVAL, "affinity propagation: preference must be a finite number, got %g",
					   p->preference);
	if (p->precision != GC_AP_FLOAT8 && p->precision != GC_AP_FLOAT4)
		return gc_fail(st, GC_EINVAL, "affinity propagation: unknown precision %d", (int) p->precision);

	res->n_clusters = 0;
	res->iterations = 0;
	res->converged = true;
	res->equal_similarities = false;
	res->preference = p->has_preference ? p->preference : NAN;
	res->ms_similarity = res->ms_preference = res->ms_iterations = res->ms_labels = 0.0;
	if (n == 0)
		return GC_OK;
	if (X == NULL || res->labels == NULL || res->is_exemplar == NULL)
		return gc_fail(st, GC_EINVAL, "affinity propagation: missing input or output array");
	if (gc_ap_mem_bytes(n) == SIZE_MAX)
		return gc_fail(st, GC_ENOMEM, "affinity propagation: %lld rows need more memory than can be addressed",
					   (long long) n);
	if (gc_cancelled(ctx))
		return gc_fail(st, GC_ECANCEL, "canceled");
	return GC_OK;
}

gc_code
gc_ap_on_gpu(const gc_ctx *ctx, const float *X, int64_t n, int d,
			 const gc_ap_params *p, gc_ap_result *res, gc_status *st)
{
	gc_code		rc;

	if ((rc = gc_ap_check(ctx, X, n, d, p, res, st)) != GC_OK || n == 0)
		return rc;
	return gc_ap_gpu(ctx, X, n, d, p, res, st);
}

/* The r-th smallest (0-based) entry of the full n x n matrix, diagonal 0. */
static gc_code
ap_full_order(const gc_ap_ops *ops, void *w, int64_t n, int64_t r,
			  double *out, gc_status *st)
{
	const int64_t m = n * (n - 1) / 2;	/* upper triangle */
	double		x;
	gc_code		rc;

	if (r >= 2 * m)
	{
		*out = 0.0;
		return GC_OK;
	}
	/* u ascending = -(x descending): u[r/2] = -x[m - 1 - r/2] */
	rc = ops->select_upper(w, m - 1 - r / 2, &x, st);
	*out = -x;
	return rc;
}

/* np.median of the n x n similarities with the diagonal at 0. */
static gc_code
ap_median(const gc_ap_ops *ops, void *w, int64_t n, double *out,
		  gc_status *st)
{
	const int64_t nn = n * n;
	double		a,
				b;
	gc_code		rc;

	if (nn % 2 == 1)
		return ap_full_order(ops, w, n, (nn - 1) / 2, out, st);
	rc = ap_full_order(ops, w, n, nn / 2 - 1, &a, st);
	if (rc == GC_OK)
		rc = ap_full_order(ops, w, n, nn / 2, &b, st);
	if (rc == GC_OK)
		*out = (a + b) / 2.0;
	return rc;
}

/* scikit-learn's answer when nothing iterates */
static void
ap_equal_answer(int64_t n, double pref, double s_last, gc_ap_result *res)
{
	res->equal_similarities = true;
	if (pref >= s_last)
	{
		for (int64_t i = 0; i < n; i++)
		{
			res->labels[i] = (int32_t) i;
			res->is_exemplar[i] = 1;
		}
		res->n_clusters = n;
	}
	else
	{
		for (int64_t i = 0; i < n; i++)
		{
			res->labels[i] = 0;
			res->is_exemplar[i] = i == 0;
		}
		res->n_clusters = 1;
	}
}

/* scikit-learn's final labelling from the exemplar flags E */
static gc_code
ap_label(const gc_ap_ops *ops, void *w, int64_t n, const uint8_t *E,
		 gc_ap_result *res, gc_status *st)
{
	int64_t		K = 0;
	int32_t    *ex = NULL,
			   *c = NULL,
			   *off = NULL,
			   *mem = NULL,
			   *fill = NULL;
	double	   *score = NULL;
	gc_code		rc = GC_OK;

	if (n < 1)
		return GC_OK;
	for (int64_t i = 0; i < n; i++)
		K += E[i];
	res->n_clusters = K;
	memset(res->is_exemplar, 0, (size_t) n);
	if (K == 0)
	{
		for (int64_t i = 0; i < n; i++)
			res->labels[i] = GC_NOISE;
		return GC_OK;
	}

	ex = malloc(sizeof(int32_t) * (size_t) K);
	c = malloc(sizeof(int32_t) * (size_t) n);
	off = malloc(sizeof(int32_t) * (size_t) (K + 1));
	fill = malloc(sizeof(int32_t) * (size_t) (K + 1));
	mem = malloc(sizeof(int32_t) * (size_t) n);
	score = malloc(sizeof(double) * (size_t) n);
	if (ex == NULL || c == NULL || off == NULL || fill == NULL || mem == NULL ||
		score == NULL)
	{
		rc = gc_fail(st, GC_ENOMEM, "affinity propagation: no memory for the labelling (%lld rows)",
					 (long long) n);
		goto done;
	}

	/* exemplars in index order; first assignment */
	K = 0;
	for (int64_t i = 0; i < n; i++)
		if (E[i])
			ex[K++] = (int32_t) i;
	if ((rc = ops->assign(w, ex, K, c, st)) != GC_OK)
		goto done;
	for (int64_t k = 0; k < K; k++)
		c[ex[k]] = (int32_t) k;

	/* members of each cluster, ascending */
	memset(off, 0, sizeof(int32_t) * (size_t) (K + 1));
	for (int64_t i = 0; i < n; i++)
		off[c[i] + 1]++;
	for (int64_t k = 0; k < K; k++)
		off[k + 1] += off[k];
	memcpy(fill, off, sizeof(int32_t) * (size_t) K);
	for (int64_t i = 0; i < n; i++)
		mem[fill[c[i]]++] = (int32_t) i;

	/*
	 * score[j] = sum over the members m of j's cluster of S[m][j]
	 * (np.sum(S[ii][:, ii], axis=0); S is not symmetric once the noise is
	 * in); the refined exemplar is the first member of largest score
	 */
	if ((rc = ops->scores(w, c, off, mem, K, score, st)) != GC_OK)
		goto done;
	for (int64_t k = 0; k < K; k++)
	{
		int32_t		best = mem[off[k]];

		for (int64_t q = off[k] + 1; q < off[k + 1]; q++)
			if (score[mem[q]] > score[best])
				best = mem[q];
		ex[k] = best;
	}

	/* second assignment, to the refined exemplars in cluster order */
	if ((rc = ops->assign(w, ex, K, c, st)) != GC_OK)
		goto done;
	for (int64_t k = 0; k < K; k++)
		c[ex[k]] = (int32_t) k;

	/* number the clusters by their exemplars' positions */
	for (int64_t k = 0; k < K; k++)
		res->is_exemplar[ex[k]] = 1;
	{
		int32_t    *rank = mem;
		int32_t		next = 0;

		for (int64_t i = 0; i < n; i++)
			if (res->is_exemplar[i])
				rank[i] = next++;
		for (int64_t i = 0; i < n; i++)
			res->labels[i] = rank[ex[c[i]]];
	}

done:
	free(ex);
	free(c);
	free(off);
	free(fill);
	free(mem);
	free(score);
	return rc;
}

gc_code
gc_ap_run(const gc_ap_ops *ops, void *w, const gc_ctx *ctx, int64_t n,
		  const gc_ap_params *p, gc_ap_result *res, gc_status *st)
{
	uint8_t    *E = NULL;
	double		pref,
				s_last = 0.0,
				t0;
	bool		equal = true;
	int			run = 0;
	int			it;
	gc_code		rc;

	gc_report(ctx, GC_PHASE_INIT, 0, 0, 0, n, NAN);
	t0 = omp_get_wtime();
	if ((rc = ops->similarities(w, st)) != GC_OK)
		return rc;
	res->ms_similarity = (omp_get_wtime() - t0) * 1e3;

	/* the preference: given, or the median of S with its zero diagonal */
	t0 = omp_get_wtime();
	if (p->has_preference)
		pref = p->preference;
	else if ((rc = ap_median(ops, w, n, &pref, st)) != GC_OK)
		return rc;
	res->preference = pref;
	res->ms_preference = (omp_get_wtime() - t0) * 1e3;

	/* n == 1, or all similarities equal: scikit-learn's early answer */
	t0 = omp_get_wtime();
	if (n > 1 && (rc = ops->all_equal(w, &equal, &s_last, st)) != GC_OK)
		return rc;
	if (equal)
	{
		ap_equal_answer(n, pref, s_last, res);
		return GC_OK;
	}

	/* the preference on the diagonal, then the tie-breaking noise */
	if ((rc = ops->prepare(w, pref, st)) != GC_OK)
		return rc;
	res->ms_similarity += (omp_get_wtime() - t0) * 1e3;

	/* R from A = 0, then: column sums; A, E and the next R */
	t0 = omp_get_wtime();
	if ((rc = ops->first(w, p->damping, st)) != GC_OK)
		return rc;
	res->converged = false;
	for (it = 0; it < p->max_iter; it++)
	{
		int64_t		K = 0,
					changed = 0;

		if (gc_cancelled(ctx))
			return gc_fail(st, GC_ECANCEL, "canceled");
		gc_report(ctx, GC_PHASE_ITERATE, it + 1, p->max_iter, 0, 0, NAN);
		if ((rc = ops->iterate(w, p->damping, it + 1 < p->max_iter, &K,
							   &changed, st)) != GC_OK)
			return rc;
		run = (it == 0 || changed > 0) ? 1 : run + 1;
		if (it >= p->convergence_iter && run >= p->convergence_iter && K > 0)
		{
			res->converged = true;
			break;
		}
	}
	res->iterations = it < p->max_iter ? it + 1 : p->max_iter;
	res->ms_iterations = (omp_get_wtime() - t0) * 1e3;

	t0 = omp_get_wtime();
	gc_report(ctx, GC_PHASE_LABEL, 0, 0, 0, n, NAN);
	E = malloc((size_t) n);
	if (E == NULL)
		return gc_fail(st, GC_ENOMEM, "affinity propagation: no memory for the labelling (%lld rows)",
					   (long long) n);
	rc = ops->exemplars(w, E, st);
	/* R and A are done with: free them before the labelling */
	ops->drop_messages(w);
	if (rc == GC_OK)
		rc = ap_label(ops, w, n, E, res, st);
	free(E);
	res->ms_labels = (omp_get_wtime() - t0) * 1e3;
	return rc;
}
