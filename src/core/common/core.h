/*
 * common/core.h — what every algorithm of the core shares: status and result
 * codes, the call context (cancellation, progress), threads, memory, the
 * device and algorithm enums and the device choice (dispatch.c).
 */
#ifndef GPUCLUST_COMMON_CORE_H
#define GPUCLUST_COMMON_CORE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>


#ifdef __cplusplus
extern "C" {
#endif

/* The label of a row in no cluster (DBSCAN's noise, affinity propagation
 * without exemplars). */
#define GC_NOISE (-1)

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
	/* the CUDA devices a GPU call may split its work over, gpus[0] the one
	 * that gathers it; n_gpus < 2: the calling thread's device alone */
	int			n_gpus;
	const int  *gpus;
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

/*
 * fn(arg, t, team) on each thread t of one parallel region of team
 * threads (gc_team_adapt's; 1: the caller alone), for code that cannot
 * hold the region itself (cuda/common/transfer.cu's copies).
 */
void		gc_team_run(int team, void (*fn) (void *arg, int t, int team),
						void *arg);

/*
 * malloc, then one write to each page on a team of threads: a large array
 * that a sequential pass will fill in random order takes its page faults
 * (the kernel's zeroing of each page) on every core first, not one by one
 * in that pass.  Under 1 MB a thread, one thread.
 */
void	   *gc_malloc_touched(size_t bytes, int threads);

/* The cores this process may use: its affinity mask, its cgroup's CPU quota. */
int			gc_cores_available(void);

/*
 * The most OpenMP threads a call with this ctx may use: ctx->n_threads, or
 * the cores this process may use (affinity mask, cgroup CPU quota) when 0.
 * Per-thread scratch is sized by this.  (threads.c)
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
 * never depend on the team.  (threads.c says why.)
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
 * cost more than the work they split (threads.c says what was measured).
 * Results never depend on the thread count; the SQL functions set
 * ctx->n_threads to this.
 */
int			gc_kmeans_threads(const gc_ctx *ctx, int64_t n, int d, int k);
int			gc_dbscan_threads(const gc_ctx *ctx, int64_t n);

/* ------------------------------------------------------------------ */
/* The rows of the cosine metric (metric.c), the clusterings' alike   */
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

/*
 * The rows a cosine clustering searches: *rows = the unit rows of X, in a
 * new array *own the caller frees; X itself (*own NULL) when n is 0.
 * GC_EINVAL naming the first zero row (its cosine distance is undefined),
 * GC_ENOMEM.
 */
gc_code		gc_cosine_rows(const gc_ctx *ctx, const float *X, int64_t n, int d,
						   const float **rows, float **own, gc_status *st);

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

/*
 * Transparent huge pages for a large buffer (GC_HUGE_PAGES_MIN bytes or
 * more), where the kernel gives them on request (enabled = madvise):
 * filling it fresh then takes one page fault per 2 MB instead of per 4 kB.
 * Only the whole pages inside [p, p + bytes) are advised; the advice is a
 * hint, and a mapping that takes none is left as it was.
 */
#define GC_HUGE_PAGES_MIN ((size_t) 4 << 20)
void		gc_advise_huge_pages(void *p, size_t bytes);

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
	GC_ALGO_KMEANS_LABELS,		/* the labels of rows for given centres (the
								 * kmeans_step aggregate's blocks; k-means's
								 * rule with n_init 1) */
	GC_ALGO_HDBSCAN				/* HDBSCAN and its MST (min_samples 1 in
								 * gc_choose_device) */
} gc_algorithm;

/*
 * What dispatch knows of the GPU, asked lazily (a small problem under
 * 'auto' never asks).  Two sources give the same answers: this process's
 * own CUDA (gc_gpu_local) and the server's GPU worker (the glue's
 * worker/job.c), whose context is always warm and whose jobs wait for memory.
 */
typedef struct gc_gpu_state
{
	bool		usable;
	char		reason[256];	/* why not, when !usable */
	size_t		mem;			/* bytes a call may use (free memory) on
								 * one GPU: the largest GPU's */
	int			gpus;			/* the GPUs one call may split over (1: this
								 * process's own GPU); a split's part on each
								 * is weighed against mem too */
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

#ifdef __cplusplus
}
#endif

#endif							/* GPUCLUST_COMMON_CORE_H */
