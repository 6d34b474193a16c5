/*
 * gpuclust_core.h — the clustering core: plain C, no PostgreSQL header.
 *
 * The PostgreSQL glue in src/ packs a query's rows into one row-major
 * float32 matrix X (n rows, d columns) and calls these functions.  The core
 * may use OpenMP threads, allocates its working memory with malloc, never
 * calls palloc/elog, and reports failure through gc_status.  Output arrays
 * are allocated by the caller.
 */
#ifndef GPUCLUST_CORE_H
#define GPUCLUST_CORE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "metric.h"			/* gc_dist2, gc_eps2: the one distance */

#ifdef __cplusplus
extern "C" {
#endif

/* Result codes. */
typedef enum gc_code
{
	GC_OK = 0,
	GC_EINVAL,					/* bad argument (message says which) */
	GC_ENOMEM,					/* an allocation failed */
	GC_ECANCEL,					/* a cancel flag was raised */
	GC_EDEVICE,					/* the GPU could not be used */
	GC_EINTERNAL				/* a bug: should never happen */
} gc_code;

typedef struct gc_status
{
	gc_code		code;
	char		message[256];
} gc_status;

/* Sets st->code and formats st->message; returns code. */
gc_code		gc_fail(gc_status *st, gc_code code, const char *fmt,...)
			__attribute__((format(printf, 3, 4)));

/* The phases of a call, as progress reports them (gc_phase_name). */
typedef enum gc_phase
{
	GC_PHASE_INGEST = 0,		/* reading the source (glue) */
	GC_PHASE_UPLOAD,			/* to the GPU */
	GC_PHASE_INDEX,				/* DBSCAN, k-distances: building the index */
	GC_PHASE_INIT,				/* k-means: seeding; AP: similarities */
	GC_PHASE_ITERATE,			/* k-means Lloyd, AP messages, DBSCAN core
								 * counts, k-distance queries, silhouette rows */
	GC_PHASE_LABEL,				/* final labels */
	GC_PHASE_EMIT				/* writing the result rows (glue) */
} gc_phase;

const char *gc_phase_name(gc_phase phase);

/*
 * One progress report: the phase, the iteration (k-means, AP; 0 before the
 * first) of at most max_iter, the points done of total (DBSCAN), and the
 * inertia after the last k-means iteration (NaN when none).
 */
typedef struct gc_progress
{
	gc_phase	phase;
	int64_t		iteration,
				max_iter,
				done,
				total;
	double		inertia;
} gc_progress;

/*
 * What every call needs besides its data.  cancel_flags point at flags a
 * signal handler may raise (PostgreSQL's QueryCancelPending and
 * ProcDiePending); the core polls them between units of work (at least a few
 * times a second) and returns GC_ECANCEL when one is nonzero.  NULL entries
 * are ignored.  poll, when not NULL, is asked at every such poll as well
 * (gc_cancelled), on whichever thread polls, and true stops the call as a
 * raised flag does: the caller's own checks (the glue's: the client's
 * connection), which it runs on its own thread and answers from flags on
 * the others; every parallel loop has the calling thread (OpenMP thread
 * 0) poll too.  progress, when not NULL, receives reports from the
 * calling thread only, at most once per iteration or phase (gc_report).
 */
typedef struct gc_ctx
{
	int			n_threads;		/* 0 = all cores */
	const volatile sig_atomic_t *cancel_flags[2];
	void		(*progress) (void *arg, const gc_progress *p);
	void	   *progress_arg;
	bool		(*poll) (void *arg);
	void	   *poll_arg;
} gc_ctx;

/* Reports p to ctx's progress sink, if any. */
static inline void
gc_report(const gc_ctx *ctx, gc_phase phase, int64_t iteration,
		  int64_t max_iter, int64_t done, int64_t total, double inertia)
{
	if (ctx != NULL && ctx->progress != NULL)
	{
		gc_progress p = {phase, iteration, max_iter, done, total, inertia};

		ctx->progress(ctx->progress_arg, &p);
	}
}

/*
 * The progress of a parallel loop over total items (a phase with points
 * done of total): gc_loop_progress_start reports the phase with none done;
 * each thread adds the items it finished with gc_loop_progress_add, and
 * the calling thread (OpenMP thread 0: caller true) reports the count at
 * most once per 1% of the items; gc_loop_progress_end reports all done.
 * Nothing is counted when ctx has no progress sink.  (common.c)
 */
typedef struct gc_loop_progress
{
	const gc_ctx *ctx;
	gc_phase	phase;
	int64_t		total;
	int64_t		done;			/* added by every thread (atomic) */
	int64_t		next;			/* the caller reports from this count on */
} gc_loop_progress;

void		gc_loop_progress_start(gc_loop_progress *lp, const gc_ctx *ctx,
								   gc_phase phase, int64_t total);
void		gc_loop_progress_add(gc_loop_progress *lp, int64_t items,
								 bool caller);
void		gc_loop_progress_end(gc_loop_progress *lp);

static inline bool
gc_cancelled(const gc_ctx *ctx)
{
	if (ctx == NULL)
		return false;
	for (int i = 0; i < 2; i++)
		if (ctx->cancel_flags[i] != NULL && *ctx->cancel_flags[i] != 0)
			return true;
	return ctx->poll != NULL && ctx->poll(ctx->poll_arg);
}

/* qsort's comparison of int64_t values, ascending. */
int			gc_cmp_int64(const void *a, const void *b);

/* A monotonic clock in milliseconds (phase timings, gpuclust.log_timing). */
double		gc_now_ms(void);

/* memcpy on a team of threads (one for small copies). */
void		gc_copy(void *dst, const void *src, size_t bytes, int threads);

/* The cores this process may use: its affinity mask, its cgroup's CPU quota. */
int			gc_cores_available(void);

/*
 * The most OpenMP threads a call with this ctx may use: ctx->n_threads, or
 * the cores this process may use (affinity mask, cgroup CPU quota) when 0.
 * Per-thread scratch is sized by this.  (team.c)
 */
int			gc_threads(const gc_ctx *ctx);

/*
 * The team for the next parallel regions of a call: gc_threads(ctx)
 * capped by the cores free right now (other runnable tasks taken out), at
 * least 1, re-probed at most every 10 ms.  Call it when a call starts and
 * at its phase or iteration boundaries; every parallel region then uses
 * num_threads(team) or num_threads(1), nothing else, since libgomp's pool
 * is resized only here, with every signal blocked (gc_team_set), so that
 * no thread it creates ever runs a PostgreSQL signal handler.  Results
 * never depend on the team.  (team.c says why.)
 */
int			gc_team_adapt(const gc_ctx *ctx);

/* libgomp's pool resized to team threads with every signal blocked. */
void		gc_team_set(int team);

/*
 * The threads of a region over items work items: the team, or one thread
 * when there is at most one item (a region of one thread leaves libgomp's
 * pool alone, so this never resizes it).
 */
static inline int
gc_region_threads(int team, int64_t items)
{
	return items > 1 ? team : 1;
}

/*
 * The threads worth giving a k-means (n rows, d, k) or a DBSCAN (n rows):
 * gc_threads(ctx), but fewer for small problems, where OpenMP's barriers
 * cost more than the work they split (team.c says what was measured).
 * Results never depend on the thread count; the SQL functions set
 * ctx->n_threads to this.
 */
int			gc_kmeans_threads(const gc_ctx *ctx, int64_t n, int d, int k);
int			gc_dbscan_threads(const gc_ctx *ctx, int64_t n);

/* ------------------------------------------------------------------ */
/* The rows of the cosine metric (metric.c), DBSCAN's and k-means'     */
/* ------------------------------------------------------------------ */

/*
 * U = the unit rows of X (metric.h's cosine, gc_unit_row): U_j =
 * fl(x_j / |x|), |x| the double root of the double sum of squares; a zero
 * row stays zero.  X and U may be the same array.
 */
void		gc_unit_rows(const gc_ctx *ctx, const float *X, int64_t n, int d,
						 float *U);

/* The position of the first row of X whose features are all 0, or -1. */
int64_t		gc_first_zero_row(const float *X, int64_t n, int d);

/* ------------------------------------------------------------------ */
/* k-means                                                             */
/* ------------------------------------------------------------------ */

typedef enum gc_kmeans_init
{
	GC_INIT_KMEANSPP = 0,		/* greedy k-means++, as scikit-learn */
	GC_INIT_RANDOM,				/* k distinct rows drawn uniformly */
	GC_INIT_CENTROIDS,			/* init_centroids, as given (one run) */
	GC_INIT_KMEANS_PARALLEL,	/* k-means|| (Bahmani et al.), kmeans_internal.h */
	GC_INIT_AUTO				/* k-means|| when k >= GC_KM_AUTO_PARALLEL_K, else k-means++ */
} gc_kmeans_init;

/* The largest sample weight: the largest float (no weighted sum overflows). */
#define GC_KMEANS_MAX_WEIGHT 3.40282346638528859811704183484516925e+38

/*
 * The parameters of a k-means call.  Every device has every one of them
 * (the GPU's run equals the CPU's: cuda/kmeans.cu).
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
	gc_metric	metric;			/* euclidean (0) or cosine: below */
	/*
	 * GPU only (the CPU ignores it): the device memory the call may use,
	 * bytes; 0: the device's free memory when the call starts.  A problem
	 * whose data do not fit it is streamed in chunks of rows
	 * (gc_kmeans_gpu_plan_for, gpu.h).  The caller has checked that this
	 * much is there (dispatch's probe, the GPU worker's admission).
	 */
	size_t		gpu_mem;
} gc_kmeans_params;

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

/*
 * The checks (and messages) every k-means path makes before it starts:
 * clears st, validates the parameters, k <= n, the arrays, the initial
 * centroids and the weights, and resets res's inertia, iterations and
 * converged.
 */
gc_code		gc_kmeans_check(const float *X, int64_t n, int d,
							const gc_kmeans_params *p, gc_kmeans_result *res,
							gc_status *st);

/* ------------------------------------------------------------------ */
/* DBSCAN                                                              */
/* ------------------------------------------------------------------ */

#define GC_NOISE (-1)

/*
 * How DBSCAN forms the clusters of its core points; both give the same
 * labels.  Union-find runs on every device; CUDA-DClust (Böhm et al.'s
 * chains of seeds, expanded in parallel by blocks, merged through a
 * collision matrix) on the GPU only.
 */
typedef enum gc_dbscan_algorithm
{
	GC_DBSCAN_UNION_FIND = 0,
	GC_DBSCAN_DCLUST
} gc_dbscan_algorithm;

typedef struct gc_dbscan_params
{
	double		eps;			/* > 0, finite */
	int64_t		min_pts;		/* >= 1, the point itself counts */
	gc_metric	metric;			/* euclidean (0) or cosine (metric.h) */
	gc_dbscan_algorithm algorithm;	/* union-find (0) or dclust (GPU only) */
} gc_dbscan_params;

/*
 * labels[i]: cluster 0, 1, 2 ... numbered by lowest input position, or
 * GC_NOISE.  is_core[i]: 1 for core points.  Both n long, caller-allocated.
 */
gc_code		gc_dbscan_cpu(const gc_ctx *ctx, const float *X, int64_t n, int d,
						  const gc_dbscan_params *p, int32_t *labels,
						  uint8_t *is_core, gc_status *st);

/*
 * The checks (and messages) every DBSCAN path makes before it starts:
 * clears st, validates the parameters and, for n > 0, the arrays and the
 * cancel flags.
 */
gc_code		gc_dbscan_check(const gc_ctx *ctx, const float *X, int64_t n,
							int d, const gc_dbscan_params *p,
							const int32_t *labels, const uint8_t *is_core,
							gc_status *st);

/*
 * Every metric as a Euclidean DBSCAN, the one the indexes and devices
 * run: *rows and *euclid (metric Euclidean) give the labels of X under p.
 * Euclidean: X and p.  Cosine: the unit rows (gc_unit_rows, in a new
 * array *own the caller frees) and eps' with gc_eps2(eps') = fl(2 eps)
 * exactly (metric.h).  GC_EINVAL naming a zero row, GC_ENOMEM.
 */
gc_code		gc_dbscan_rows(const gc_ctx *ctx, const float *X, int64_t n, int d,
						   const gc_dbscan_params *p, const float **rows,
						   float **own, gc_dbscan_params *euclid, gc_status *st);

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
 * runs only on the GPU" otherwise).  gc_ap_gpu (gpu.h) is the same
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

/* ------------------------------------------------------------------ */
/* Memory available to the process (sysmem.c)                          */
/* ------------------------------------------------------------------ */

/* No bound known (no file, no limit). */
#define GC_MEM_UNLIMITED UINT64_MAX

/*
 * gc_host_memory(): the bytes this process may still allocate: the
 * smaller of the host's MemAvailable and the room (limit - usage, less
 * inactive file cache) under every cgroup v1 or v2 memory limit above the
 * process; SIZE_MAX when nothing is known.  gc_host_memory_at(root) is the
 * same with every path (/proc/meminfo, /proc/self/cgroup, /sys/fs/cgroup)
 * read under the directory root ("" for the real system); it and the
 * parsers below return GC_MEM_UNLIMITED for "no bound".
 */
size_t		gc_host_memory(void);
uint64_t	gc_host_memory_at(const char *root);
/* MemAvailable of a /proc/meminfo-format file, in bytes */
uint64_t	gc_meminfo_available(const char *path);
/* the room under the memory limit of one cgroup directory (version 1 or 2) */
uint64_t	gc_cgroup_dir_room(const char *dir, int version);
/*
 * the smallest room over the cgroups root/proc/self/cgroup lists (v2
 * "0::/path", v1 "n:...memory...:/path") and all their ancestors
 */
uint64_t	gc_cgroup_room(const char *root);

/* ------------------------------------------------------------------ */
/* Device choice                                                       */
/* ------------------------------------------------------------------ */

typedef enum gc_device
{
	GC_DEVICE_AUTO = 0,
	GC_DEVICE_CPU,
	GC_DEVICE_GPU
} gc_device;

/* Parses "auto" | "cpu" | "gpu" (case-insensitive); false if none. */
bool		gc_parse_device(const char *s, gc_device *out);

/*
 * Resolves a requested device to CPU or GPU for a problem of n rows and d
 * features.  For GC_DEVICE_GPU when no GPU is usable (or its free memory
 * cannot hold the problem), returns GC_EDEVICE / GC_ENOMEM with the reason
 * in st.  For AUTO, picks the CPU whenever the GPU is unusable or the
 * problem too small for it to win (dispatch.c says what was measured).
 * k-means calls use gc_choose_device_kmeans, which also weighs k, and
 * affinity propagation calls gc_choose_device_ap, which also weighs the
 * precision.
 */
typedef enum gc_algorithm
{
	GC_ALGO_KMEANS,
	GC_ALGO_DBSCAN,
	GC_ALGO_AP,					/* affinity propagation (float8 in gc_choose_device) */
	GC_ALGO_KDISTANCE,			/* gpu_kdistance's k-distances (k = 1 in
								 * gc_choose_device) */
	GC_ALGO_SILHOUETTE,			/* gpu_silhouette (n rows scored in 2
								 * clusters in gc_choose_device) */
	GC_ALGO_KMEANS_LABELS		/* the labels of rows for given centres (the
								 * kmeans_step aggregate's blocks; k-means's
								 * rule with n_init 1) */
} gc_algorithm;

/*
 * What dispatch knows of the GPU, asked lazily (a small problem under
 * 'auto' never asks).  Two sources give the same answers: this process's
 * own CUDA (gc_gpu_local) and the server's GPU worker (the glue's
 * gpujob.c), whose context is always warm and whose jobs wait for memory.
 */
typedef struct gc_gpu_state
{
	bool		usable;
	char		reason[256];	/* why not, when !usable */
	size_t		mem;			/* bytes a call may use (free memory) */
} gc_gpu_state;

typedef struct gc_gpu
{
	int			device_id;		/* gpuclust.gpu_device_id, for messages */
	size_t		mem_limit;		/* most bytes a call may use (0: no limit but
								 * the probe's): gpuclust.gpu_memory_limit */
	/* a GPU call would pay no CUDA start-up */
	bool		(*warm) (const struct gc_gpu *gpu);
	void		(*probe) (const struct gc_gpu *gpu, gc_gpu_state *out);
} gc_gpu;

/* The GPU of this process (gpu.h's cached probe), device device_id; no
 * mem_limit. */
void		gc_gpu_local(gc_gpu *gpu, int device_id);

/* The bytes a GPU call may use: the probe's, at most gpu->mem_limit; 0
 * when the GPU is unusable. */
size_t		gc_gpu_budget(const gc_gpu *gpu);

gc_code		gc_choose_device(gc_device requested, gc_algorithm algo,
							 int64_t n, int d, const gc_gpu *gpu,
							 gc_device *chosen, gc_status *st);

/*
 * The DBSCAN algorithms by name, as SQL spells them: "union_find" and
 * "dclust".  gc_parse_dbscan_algorithm is case-insensitive; false for any
 * other name (or NULL).
 */
const char *gc_dbscan_algorithm_name(gc_dbscan_algorithm algorithm);
bool		gc_parse_dbscan_algorithm(const char *s, gc_dbscan_algorithm *out);

/*
 * Where each DBSCAN algorithm may run, the one rule (dispatch.c): the
 * device a call of algorithm asks for when requested is asked, in *out.
 * Union-find runs on every device: requested itself.  Dclust runs only on
 * the GPU: 'gpu' and 'auto' ask for the GPU ('auto' too, whatever the
 * problem's size, since the call asked for the GPU algorithm; so without
 * a usable GPU it fails with the reason as 'gpu' does, and a failed GPU
 * run is never redone on the CPU), and 'cpu' is GC_EINVAL "DBSCAN
 * algorithm dclust runs only on the GPU" (*out is then the CPU).
 */
gc_code		gc_dbscan_device_request(gc_device requested,
									 gc_dbscan_algorithm algorithm,
									 gc_device *out, gc_status *st);

/*
 * The device of one DBSCAN call of algorithm on n rows of d features:
 * first gc_dbscan_device_request, then CPU: always.  GPU: the GPU, or
 * GC_EDEVICE / GC_ENOMEM with the reason.  AUTO (union-find only): the CPU
 * when the GPU would not win (no CUDA touched), when no GPU is usable or
 * its free memory is too small; else the GPU (dispatch.c says what was
 * measured).  gc_choose_device(GC_ALGO_DBSCAN) is this for union-find.
 */
gc_code		gc_choose_device_dbscan(gc_device requested,
									gc_dbscan_algorithm algorithm,
									int64_t n, int d, const gc_gpu *gpu,
									gc_device *chosen, gc_status *st);

/*
 * k-means from this much work per Lloyd iteration (n·k·d) up, 'auto' runs
 * on the GPU.  Measured with test/gpu/bench_crossover.c on the H200
 * machine (16 CPU cores, all used; whole calls, k-means++, max_iter 20,
 * tol 1e-4, CUDA already initialised), CPU ms / GPU ms:
 *   n·k·d 1.6e6..1.3e8, d 2..32, k 8..100:  0.26..0.82 (CPU wins) but for
 *     d = 2, k = 8, n = 1M (1.6e7): 1.64; d = 32, k = 8, n = 100k: 1.13;
 *     d = 128, k = 100: 1.41 at 2.6e7, 2.07 at 1.3e8
 *   2e8 (d 2, k 100): 1.58;  2.6e8 (d 32, k 8): 1.78;
 *   3.2e8 (d 32, k 100, n 100k, 4 iterations): 0.81;  6.4e8 (d 128): 2.47
 *   3.2e9 (SQL, 1M rows, d 32, k 100, 39 iterations): 7.0
 * The GPU's fixed costs are a few ms of allocation and upload and ~0.5 ms
 * per k-means++ centre, so small k·iterations favour the CPU; 5e8 keeps
 * 'auto' on the CPU wherever the CPU won or nearly tied.  A backend's
 * first GPU call also pays ~150-230 ms of CUDA initialisation.
 */
#define GC_KMEANS_GPU_MIN_WORK 5.0e8

/*
 * The kmeans_step aggregate's blocks (gc_kmeans_labels_*: one assignment,
 * no iterations) go to the GPU under 'auto' from this many centres up, and
 * n·k·d >= GC_KMEANS_GPU_MIN_WORK.  Measured with
 * test/gpu/bench_kmeans_step.py on the H200 machine (16 cores), a pass
 * serially, CPU s / GPU s: 10M x 32, k = 100: 2.27 / 2.54 (each 64 MiB
 * block about 14 ms slower through the GPU worker than on 16 threads);
 * 2M x 128, k = 1000: 2.79 / 1.93.  Both costs grow with n·d, the CPU's
 * also with k, so k decides; fewer cores move the crossover down.
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
 * The device of one k-means call.  CPU: always.  GPU: the GPU, or
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
 */
gc_code		gc_choose_device_kmeans(gc_device requested, int64_t n, int d,
									int k, int n_init, bool weighted,
									const gc_gpu *gpu, gc_device *chosen,
									char *note, size_t note_len,
									gc_status *st);


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
 * start it.  Measured with test/gpu/bench_ap_gpu.c on the H100 machine
 * (16 CPU cores, all used; whole calls, median preference, damping 0.5,
 * 200 iterations, 8-d blobs, CUDA already initialised), CPU ms / GPU ms:
 *   250: 66.7 / 12.0 (5.5x); 500: 72.5 / 12.0; 1000: 185.9 / 15.2;
 *   2000: 495.0 / 33.3 (14.9x); 5000: 2626 / 139 (18.9x).
 * Below 250 not measured.  Starting CUDA costs a backend ~150-230 ms (the
 * k-means measurement, GC_KMEANS_GPU_MIN_WORK), which the CPU's whole call
 * at 1000 rows (186 ms) does not exceed and at 2000 (495 ms) does.
 */
#define GC_AP_GPU_MIN_ROWS 250
#define GC_AP_GPU_MIN_ROWS_COLD 2000

/*
 * The device of one affinity propagation call in precision on n rows of d
 * features: first gc_ap_device_request, then CPU: always.  GPU: the GPU
 * when one is usable and gc_ap_gpu_mem_bytes(n, d, precision) fits the
 * GPU memory a call may use (gc_gpu_budget), else GC_EDEVICE (the reason)
 * or GC_ENOMEM, whose message names the largest n that fits
 * (gc_ap_gpu_max_rows).  AUTO (float8 only; float4 asked for the GPU):
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

/* ------------------------------------------------------------------ */
/* Tools for choosing parameters and reading clusters                  */
/* ------------------------------------------------------------------ */

/*
 * k-distances (kdistance.c).  kdist2[i] = the k-th smallest gc_dist2 from
 * row i to every row of X, the row itself included (so k = 1 gives 0):
 * row i is a DBSCAN core point at min_pts = k exactly when kdist2[i] <=
 * gc_eps2(eps).  Exact, on the kd-tree of kdtree.h (any d); 1 <= k <= n.
 * kdist2 is n long, caller-allocated, in input order.
 */
gc_code		gc_kdistance_cpu(const gc_ctx *ctx, const float *X, int64_t n,
							 int d, int64_t k, float *kdist2, gc_status *st);

/* The checks of both devices' k-distances (GC_EINVAL, GC_ECANCEL), with
 * the CPU's messages. */
gc_code		gc_kdistance_check(const gc_ctx *ctx, const float *X, int64_t n,
							   int d, int64_t k, const float *kdist2,
							   gc_status *st);

/*
 * The knee of the ascending curve y[0..n-1] (n >= 1): the index maximising
 * x' - y' where x' = i/(n-1) and y' = (y[i]-y[0])/(y[n-1]-y[0]), i.e. the
 * point farthest below the chord from the first point to the last, in the
 * unit square; the lowest such index on ties; 0 when n <= 2 or the curve is
 * flat.
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
 * call would start it.  Measured with test/gpu/bench_tools (crossover
 * table; H100, 16 CPU cores all used, whole core calls, CUDA running;
 * 2026-11-25), CPU ms / GPU ms:
 *   k-distances (k = 10, blobs), n 1k, 3k, 10k, 30k, 100k:
 *     2-d 1.2, 1.0, 1.9, 3.5, 6.4x;  8-d 1.4, 2.3, 6.0, 10.1, 27.7x;
 *     32-d 1.8, 2.1, 4.6, 7.8, 18.5x (and 10.5x at 1M in 2-d, 58.9x at 1M
 *     in 8-d, 27.2x at 200k in 32-d);
 *   silhouette (exact, 10 blobs), rows 100, 300, 1k, 3k:
 *     2-d 2.2, 0.3, 1.3, 4.7x;  32-d 0.5, 1.5, 6.9, 26.2x;
 *     128-d 2.0, 3.7, 11.4, 23.3x (below 1 ms on both devices: noisy).
 * A backend's first GPU call also pays CUDA's start-up, 0.15-0.35 s
 * (GC_KMEANS_GPU_MIN_WORK, dispatch.c's DBSCAN table); the CPU time the
 * GPU saves repays it from the _COLD sizes: the k-distances of 1M rows
 * save 162 ms in 2-d (179 against 17), far more above (8-d: 443 ms
 * already at 100k); a silhouette of 20,000 rows saves 126 ms in 2-d, 1.28
 * s in 32-d, 5.1 s in 128-d.
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
 * distance (double) of the cluster's rows to its centre.  Arrays of m (and
 * m*d), caller-allocated; an empty cluster gets size 0 and NaN elsewhere.
 */
gc_code		gc_cluster_summary_cpu(const gc_ctx *ctx, const float *X,
								   int64_t n, int d, const int32_t *labels,
								   int32_t m, int64_t *sizes, double *centres,
								   double *radius, double *mean_dist,
								   gc_status *st);

#ifdef __cplusplus
}
#endif

#endif							/* GPUCLUST_CORE_H */
