/*
 * affinity/affinity.h — affinity propagation's public interface: the call
 * (gc_ap_cpu), its parameters and result, memory bounds and the device
 * choice, and the iteration the GPU shares with the CPU (gc_ap_run).
 */
#ifndef GPUCLUST_AFFINITY_H
#define GPUCLUST_AFFINITY_H

#include "common/core.h"
#include "common/metric.h"		/* gc_dist2, gc_eps2: the one distance */

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Affinity propagation                                                */
/* ------------------------------------------------------------------ */

/*
 * Affinity propagation (Frey & Dueck, 2007) with scikit-learn 1.2's
 * AffinityPropagation semantics (see affinity.c for the exact rules).
 * The similarity of rows i != j is minus the squared Euclidean distance,
 * computed in double precision from the float32 features; S, the
 * responsibilities R and the availabilities A are n x n doubles.  A fixed,
 * deterministic tie-breaking noise stands in for scikit-learn's random one,
 * so results do not depend on the thread count.
 */
/*
 * What S, R and A are stored in.  float8 (the default): doubles, on every
 * device, the same bits.  float4: floats, on the GPU only (half the bytes
 * a pass moves); every update is still computed in double from the stored
 * values and rounded once when stored, and the tie-breaking noise is
 * scaled to float's epsilon (affinity.c).
 */
typedef enum gc_ap_precision
{
	GC_AP_FLOAT8 = 0,
	GC_AP_FLOAT4
} gc_ap_precision;

typedef struct gc_ap_params
{
	double		damping;		/* in [0.5, 1) */
	bool		has_preference; /* false: median of the n x n similarities */
	double		preference;		/* finite; used when has_preference */
	int			max_iter;		/* >= 1 */
	int			convergence_iter;	/* >= 1 */
	gc_ap_precision precision;	/* GC_AP_FLOAT4: the GPU only */
} gc_ap_params;

/* "float8" | "float4" (case-insensitive), as SQL spells them; false if neither. */
bool		gc_parse_ap_precision(const char *s, gc_ap_precision *out);
const char *gc_ap_precision_name(gc_ap_precision precision);

typedef struct gc_ap_result
{
	/* caller-allocated outputs, n long */
	int32_t    *labels;			/* 0 .. n_clusters-1 by exemplar position,
								 * or GC_NOISE for all when no exemplar */
	uint8_t    *is_exemplar;	/* 1 for the (refined) exemplars */
	/* filled by the core */
	int64_t		n_clusters;		/* 0 when no exemplar emerged */
	int			iterations;		/* message-passing iterations run */
	bool		converged;		/* exemplar set stable for convergence_iter */
	bool		equal_similarities; /* n == 1 or all similarities equal:
									 * answered without iterating */
	double		preference;		/* the preference used */
	/* wall-clock milliseconds of the phases */
	double		ms_similarity;	/* S, the equal-similarity check, the
								 * preference and noise put on S */
	double		ms_preference;	/* the median (0 when given) */
	double		ms_iterations;	/* the message passing */
	double		ms_labels;		/* the final labelling */
} gc_ap_result;

/*
 * On all CPU cores, float8 only (GC_EINVAL "affinity propagation in float4
 * runs only on the GPU" otherwise).  gc_ap_on_gpu (gpu.h) is the same
 * contract on the GPU, with the same results bit for bit in float8.
 */
gc_code		gc_ap_cpu(const gc_ctx *ctx, const float *X, int64_t n, int d,
					  const gc_ap_params *p, gc_ap_result *res, gc_status *st);

/*
 * Memory: gc_ap_mem_bytes(n) is what gc_ap_cpu allocates for n rows (three
 * n x n double matrices plus O(n); SIZE_MAX when that overflows);
 * gc_ap_max_rows(bytes) is the largest n whose gc_ap_mem_bytes fits in
 * bytes.  The caller checks before calling, against its limit and
 * gc_host_memory().
 */
size_t		gc_ap_mem_bytes(int64_t n);
int64_t		gc_ap_max_rows(size_t bytes);


/* ---- device choice (common/dispatch.c) ---- */

/*
 * Where each affinity propagation precision may run, the one rule
 * (dispatch.c), as gc_dbscan_device_request's for DBSCAN's algorithms:
 * the device a call in precision asks for when requested is asked, in
 * *out.  float8 runs on every device: requested itself.  float4 runs only
 * on the GPU: 'gpu' and 'auto' ask for the GPU ('auto' too, whatever the
 * problem's size; so without a usable GPU it fails with the reason as
 * 'gpu' does, and a failed GPU run is never redone on the CPU), and 'cpu'
 * is GC_EINVAL "affinity propagation in float4 runs only on the GPU"
 * (*out is then the CPU).
 */
gc_code		gc_ap_device_request(gc_device requested, gc_ap_precision precision,
								 gc_device *out, gc_status *st);

/*
 * Affinity propagation in float8 from this many rows up, 'auto' runs on
 * the GPU (when one is usable and the call fits its memory): from
 * GC_AP_GPU_MIN_ROWS when CUDA is already running in the process (the GPU
 * worker's always is), from GC_AP_GPU_MIN_ROWS_COLD when the call would
 * start it, where the CPU's whole call first exceeds CUDA's start-up
 * (~150-230 ms).  Measured on an H100 with 16 CPU cores
 * (test/gpu/bench_ap_gpu.c; the table: docs/benchmarks.md); below 250
 * rows not measured.
 */
#define GC_AP_GPU_MIN_ROWS 250
#define GC_AP_GPU_MIN_ROWS_COLD 2000

/*
 * The rows from which an affinity propagation call may split over several
 * GPUs, given those of a k-means call (the GPU worker's
 * gpuclust.gpu_worker_split_rows); dispatch.c says what was measured.
 */
int64_t		gc_ap_split_rows(int64_t split_rows);

/*
 * The device of one affinity propagation call in precision on n rows of d
 * features: first gc_ap_device_request, then CPU: always.  GPU: the GPU
 * when one is usable and gc_ap_gpu_mem_bytes(n, d, precision) fits the
 * GPU memory a call may use (gc_gpu_budget) or, when it does not and the
 * probe's call may split over G >= 2 GPUs (gc_gpu_state.gpus), when each
 * GPU's part gc_ap_gpu_split_mem_bytes(n, d, precision, G) fits it; else
 * GC_EDEVICE (the reason) or GC_ENOMEM, whose message names the largest n
 * that fits (gc_ap_gpu_max_rows, gc_ap_gpu_split_max_rows over G GPUs).  AUTO (float8 only; float4 asked for the GPU):
 * the CPU when n < GC_AP_GPU_MIN_ROWS (without touching CUDA) or no GPU is
 * usable; when the GPU's memory is too small, the CPU with a note (note,
 * note_len; empty otherwise: the same message) the caller shows as a
 * NOTICE; else the GPU.  gc_choose_device(GC_ALGO_AP) is this in float8,
 * without the note.  The caller checks the memory of the CPU's matrices
 * (gc_ap_mem_bytes) itself.
 */
gc_code		gc_choose_device_ap(gc_device requested, gc_ap_precision precision,
								int64_t n, int d, const gc_gpu *gpu,
								gc_device *chosen, char *note, size_t note_len,
								gc_status *st);

/*
 * Affinity propagation's one driver (affinity.c) and the passes a device
 * gives it (affinity_cpu.c, cuda/affinity/affinity.cu).
 *
 * gc_ap_run holds everything both devices share: the checks, the median's
 * order statistics, scikit-learn's early answer, the iteration loop and its
 * convergence rule, and the labelling's steps.  A device owns S, R and A
 * and runs the passes over them; every pass computes, entry by entry, the
 * operations affinity.c lists, in the order it lists them, so the devices
 * agree bit for bit (in float8).  A pass returns GC_OK, GC_ECANCEL (a
 * cancel flag seen), or the device's failure.
 */
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

#endif							/* GPUCLUST_AFFINITY_H */
