/*
 * affinity_internal.h — affinity propagation's one driver (affinity.c) and
 * the passes a device gives it (affinity_cpu.c, cuda/affinity.cu).
 *
 * gc_ap_run holds everything both devices share: the checks, the median's
 * order statistics, scikit-learn's early answer, the iteration loop and its
 * convergence rule, and the labelling's steps.  A device owns S, R and A
 * and runs the passes over them; every pass computes, entry by entry, the
 * operations affinity.c lists, in the order it lists them, so the devices
 * agree bit for bit (in float8).  A pass returns GC_OK, GC_ECANCEL (a
 * cancel flag seen), or the device's failure.
 */
#ifndef GPUCLUST_AFFINITY_INTERNAL_H
#define GPUCLUST_AFFINITY_INTERNAL_H

#include "gpuclust_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* the tie-breaking noise's generator (rng.h): fixed seed, a stream of its own */
#define GC_AP_NOISE_SEED 0
#define GC_AP_NOISE_STREAM UINT64_C(0x4150)	/* "AP" */

typedef struct gc_ap_ops
{
	/* S[i][j] = -gc_dist2_f64(x_i, x_j) (diagonal -0), R = A = 0 */
	gc_code		(*similarities) (void *w, gc_status *st);
	/* the m-th smallest (0-based) of -S[i][j] over i < j */
	gc_code		(*select_upper) (void *w, int64_t m, double *out, gc_status *st);
	/* whether every S[i][j], i != j, equals S[0][1]; *s_last = S[0][n-1] */
	gc_code		(*all_equal) (void *w, bool *equal, double *s_last, gc_status *st);
	/* S[i][i] = pref, then the noise on every entry */
	gc_code		(*prepare) (void *w, double pref, gc_status *st);
	/* R from A = 0 (the first half iteration) */
	gc_code		(*first) (void *w, double damping, gc_status *st);
	/*
	 * One iteration: the column sums of Rp; A, the exemplar flags E and
	 * (update_r) the next R.  *K: rows with E; *changed: rows whose E
	 * differs from the last iteration's (all 0 before the first).
	 */
	gc_code		(*iterate) (void *w, double damping, bool update_r, int64_t *K,
							int64_t *changed, gc_status *st);
	/* E of the last iteration, n bytes */
	gc_code		(*exemplars) (void *w, uint8_t *E, gc_status *st);
	/* R and A are no longer needed */
	void		(*drop_messages) (void *w);
	/* c[i] = the k of largest S[i][ex[k]], first k on ties */
	gc_code		(*assign) (void *w, const int32_t *ex, int64_t K, int32_t *c,
						   gc_status *st);
	/*
	 * score[mem[q]] for every q: sum over the members m of q's cluster
	 * (mem[off[k]] .. mem[off[k+1]-1], ascending), in that order, of
	 * S[m][mem[q]], starting from the first member's term; c[i] is row i's
	 * cluster
	 */
	gc_code		(*scores) (void *w, const int32_t *c, const int32_t *off,
						   const int32_t *mem, int64_t K, double *score,
						   gc_status *st);
} gc_ap_ops;

/*
 * gc_ap_cpu's checks of the arguments, and res's fields set for an empty
 * or trivial call; GC_OK when the caller should go on (n > 0).
 */
gc_code		gc_ap_check(const gc_ctx *ctx, const float *X, int64_t n, int d,
						const gc_ap_params *p, gc_ap_result *res, gc_status *st);

/* The whole run on a device's passes (after gc_ap_check, w allocated). */
gc_code		gc_ap_run(const gc_ap_ops *ops, void *w, const gc_ctx *ctx,
					  int64_t n, const gc_ap_params *p, gc_ap_result *res,
					  gc_status *st);

#ifdef __cplusplus
}
#endif

#endif							/* GPUCLUST_AFFINITY_INTERNAL_H */
