/*
 * gpu.h — what the core asks of a GPU, behind a plain C header the core
 * owns.  cuda/ implements it when the build has CUDA (the Makefile defines
 * GPUCLUST_CUDA); otherwise the stubs at the end answer "built without
 * CUDA", so no caller needs an #ifdef.  Every function is safe to call on
 * a machine with no driver or no device, and then says why.  Never call
 * these in the postmaster or _PG_init: CUDA is not fork-safe.
 *
 * Test-only entry points (forcing an index, one Lloyd step, timings) are
 * declared under GC_TESTING and defined in cuda/<algorithm>/<name>_hooks.cu
 * (and the brute-force DBSCAN, cuda/dbscan/dbscan_brute.cu), which only the
 * test programs link: the extension carries none of them.
 */
#ifndef GPUCLUST_GPU_H
#define GPUCLUST_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gpuclust_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether this build has the CUDA side. */
#ifdef GPUCLUST_CUDA
#define GC_CUDA_BUILD true
#else
#define GC_CUDA_BUILD false
#endif

typedef struct gc_cuda_device_info
{
	bool		usable;			/* a device can be used */
	char		reason[200];	/* why not, when !usable */
	int			device_count;
	int			device_id;
	char		name[128];
	size_t		total_mem;
	size_t		free_mem;
	int			cc_major;
	int			cc_minor;
	int			runtime_version;	/* e.g. 13000; 0 without CUDA */
	int			driver_version;		/* 0 when no driver */
} gc_cuda_device_info;

/*
 * Where the last GPU call of each algorithm in this process spent its time
 * (host clock, each phase ends with a stream synchronisation).
 */
typedef struct gc_kmeans_gpu_phases
{
	double		ms_upload;		/* allocation, host-to-device copy, transpose, scales */
	double		ms_init;		/* seeding (all n_init runs) */
	double		ms_lloyd;		/* Lloyd iterations and final inertia (all runs) */
	double		ms_download;	/* labels, centres, distances back to the host */
	int			total_iterations;	/* over all n_init runs */
	int64_t		rows_screened;	/* rows assigned over those iterations (d > 8: the
								 * rest kept their label by the bounds, cuda/kmeans/kmeans_prune.cu) */
	int			grid_cells;		/* d <= 3: the exact assignment's grid (cuda/kmeans/kmeans_grid.cu); 0: none */
	int			grid_iterations;	/* of total_iterations: through it (it is dropped where it does not pay) */
	int			screen_resident;	/* 8 < d <= 64: the tf32 screen's blocks an SM with every
									 * centre in shared memory (cuda/kmeans/kmeans_screen.cu); 0: streamed */
	int64_t		rows_tied;		/* 8 < d <= 256: rows the screen queued, decided among their windows' candidates */
	int64_t		rows_reranked;	/* d > 8: rows re-ranked over every centre */
	/* streamed (X larger than the call's GPU memory: gc_kmeans_gpu_plan) */
	int64_t		chunks;			/* chunks per pass over X; 0: X resident */
	int64_t		chunk_rows;		/* rows per chunk */
	int			passes;			/* passes over X (uploads of every chunk) */
	double		ms_passes;		/* of the phases above: in those passes */
	double		gb_streamed;	/* host-to-device bytes of those passes, 1e9 */
} gc_kmeans_gpu_phases;

/* The phases add up to ms_total but for the stream's creation and the checks. */
typedef struct gc_dbscan_gpu_phases
{
	double		ms_upload;		/* allocation of X and host-to-device copy */
	double		ms_index;		/* grid: extent, keys, sort, cells, boxes */
	double		ms_lists;		/* of ms_index, tree: the candidate lists counted */
	double		ms_core;		/* core flags (brute: + compaction) */
	double		ms_union;		/* components */
	double		ms_border;		/* border assignment and roots */
	double		ms_number;		/* cluster numbers by lowest row */
	double		ms_download;	/* labels and core flags to the host */
	double		ms_free;		/* device memory and stream released */
	double		ms_total;		/* the whole call */
	double		ms_alloc;		/* of the above: inside cudaMalloc */
	int			grid;			/* 1: grid index, 0: brute force or tree */
	int			tree;			/* 1: the kd-tree index */
	int64_t		ncell;			/* grid cells; tree: leaves */
	int64_t		pairs;			/* tree: query nodes' candidate leaves, in all */
	int64_t		screened;		/* tree: pairs the tensor-core screen decided */
	int64_t		exact;			/* ... and those it left to the exact distance */
	int64_t		chains;			/* dclust: chains grown */
	int64_t		generations;	/* dclust: generations of chains */
	int64_t		rounds;			/* dclust: expansion rounds, in all */
	/* a call split over several GPUs (cuda/dbscan/dbscan_multi.cu): the
	 * phases from ms_index to ms_number are its slowest slab's */
	int			gpus;			/* GPUs the call ran on */
	int64_t		held;			/* rows the slabs held, halos included */
	double		ms_split;		/* the plan and the rows sent to their slabs */
	double		ms_merge;		/* the clusters joined and every label sent home */
} gc_dbscan_gpu_phases;

/* The last gc_ap_gpu call of this thread (host clock; kernels by events). */
typedef struct gc_ap_gpu_phases
{
	int			precision;		/* gc_ap_precision */
	int			gpus;			/* GPUs S, R and A were split over */
	double		ms_alloc;		/* inside the call's device allocations */
	double		ms_similarity;	/* upload of X and S (not the noise) */
	double		ms_median;		/* the preference's radix selects */
	double		ms_first;		/* the first R pass */
	double		ms_colsum;		/* over the iterations: the column sums */
	double		ms_rows;		/* and the row passes */
	int			iterations;
	int			row_keep;		/* columns of its row a row pass block keeps
								 * in shared memory between its sweeps */
	int			row_prefetch;	/* bytes of each of its next row's S, R and
								 * A it prefetches into L2 */
	double		ms_total;		/* the whole call */
} gc_ap_gpu_phases;

/* The last gc_hdbscan_mst_gpu call of this thread (host clock). */
typedef struct gc_hdbscan_gpu_phases
{
	double		ms_upload;		/* allocation of the rows and the copy */
	double		ms_index;		/* the kd-tree */
	double		ms_core;		/* the core distances */
	double		ms_mst;			/* Borůvka's rounds */
	double		ms_sort;		/* the edges sorted by (w, a, b) */
	double		ms_linkage;		/* the single-linkage tree (when asked) */
	double		ms_labels;		/* the condensed tree, the labels, down */
	double		ms_download;	/* core distances and edges or nodes to the host */
	double		ms_total;		/* the whole call */
	int			rounds;			/* Borůvka's rounds */
} gc_hdbscan_gpu_phases;

/* The most points gc_dbscan_gpu takes (int32 positions, one spare). */
#define GC_DBSCAN_GPU_MAX_N (INT32_MAX - 1)


#ifdef GPUCLUST_CUDA

/* Probes device device_id (initialising CUDA in this process if needed). */
void		gc_cuda_probe(int device_id, gc_cuda_device_info *info);

/*
 * gc_cuda_probe, cached per process; only the free/total memory is read
 * again on each call.  Makes device_id current when it is usable.
 */
void		gc_cuda_probe_cached(int device_id, gc_cuda_device_info *info);

/*
 * Whether this process already holds a CUDA context (a probe reached the
 * device): its next GPU call pays no start-up.
 */
bool		gc_cuda_started(void);

/*
 * Keep up to bytes of device memory in the current device's memory pool
 * when calls release it (check.cuh's gc_dalloc), so that later calls reuse
 * it instead of asking the driver again: the GPU worker, whose jobs follow
 * one another.  By default the pool gives memory back at each
 * synchronisation.
 */
void		gc_cuda_keep_memory(size_t bytes);

/* Gives the memory kept in the current device's pool back to the driver. */
void		gc_cuda_trim_memory(void);

/*
 * k-means on the current CUDA device (cuda/kmeans/kmeans.cu): the contract of
 * gc_kmeans_cpu (same arguments, same result fields; the returned labels
 * and distances refer to the returned centroids), checked by the caller:
 * callers go through gc_kmeans_on_gpu (kmeans.c), which checks, n >= 1.  The
 * same seed gives the CPU's initial centres.  CUDA failures come back as
 * GC_EDEVICE (GC_ENOMEM when device memory runs out), never a crash; the
 * cancel flags are polled between iterations.  At most INT32_MAX rows.
 * With ctx->n_gpus >= 2 and no weights, the rows split over the GPUs of
 * ctx->gpus, each shard resident on its GPU (cuda/kmeans/kmeans_multi.cu),
 * with one GPU's result bit for bit; p->gpu_plan is not used then, and
 * p->gpu_mem (0: the free memory) is each GPU's budget.
 */
gc_code		gc_kmeans_gpu(const gc_ctx *ctx, const float *X, int64_t n, int d,
						  const gc_kmeans_params *p, gc_kmeans_result *res,
						  gc_status *st);

/*
 * Device memory gc_kmeans_gpu needs for this problem (bytes; an upper
 * bound, including its staging buffer and the k-means++ scratch, not the
 * CUDA context).  weighted: with sample weights (their update's buffers,
 * kmeans_weighted.cu).  Dispatch compares it with the free memory.
 */
size_t		gc_kmeans_gpu_mem_bytes(int64_t n, int d, int k, int n_init,
									bool weighted);

/*
 * The plan of gc_kmeans_gpu for a problem in budget bytes of device memory
 * (gc_kmeans_params.gpu_mem): resident when gc_kmeans_gpu_mem_bytes fits,
 * else streamed in the largest chunks that fit (at most 256 MiB of X per
 * chunk); out->bytes is what the call allocates, which dispatch and the
 * GPU worker's admission count.  A weighted problem is never streamed
 * (its update sums each cluster's rows in the CPU's order, across every
 * chunk): it fits resident or not at all.
 */
void		gc_kmeans_gpu_plan_for(int64_t n, int d, int k, int n_init,
								   bool weighted, size_t budget,
								   gc_kmeans_gpu_plan *out);

void		gc_kmeans_gpu_last_phases(gc_kmeans_gpu_phases *out);

/*
 * The labels of the n rows X for the k given centres C (k x d) on the
 * current CUDA device (cuda/kmeans/kmeans.cu): the fit's own assignment, so
 * gc_kmeans_labels_cpu's labels bit for bit.  What the kmeans_step
 * aggregate assigns a block of its rows with.  Checked by the caller:
 * callers go through gc_kmeans_labels_on_gpu (kmeans_assign.c), which
 * checks, 1 <= k <= n; n <= INT32_MAX (else GC_EINVAL).  CUDA failures
 * come back as GC_EDEVICE (GC_ENOMEM when device memory runs out).  Device
 * memory: gc_kmeans_gpu_mem_bytes(n, d, k, 1, false) bounds it.
 */
gc_code		gc_kmeans_labels_gpu(const gc_ctx *ctx, const float *X, int64_t n,
								 int d, const float *C, int k, int32_t *labels,
								 gc_status *st);

/*
 * DBSCAN on the current CUDA device (cuda/dbscan/) with the contract of
 * gc_dbscan_cpu, checked by the caller (gc_dbscan_on_gpu): labels and
 * is_core identical to the CPU's on every input (same float32 distance,
 * core rule, components, nearest-core border rule with ties to the lowest
 * row, numbering by lowest row).  Index: the uniform grid for d <= 3 (when
 * its cell numbers fit), the kd-tree otherwise.  The data go up and the labels come
 * back through a pinned ring (transfer.cu) with gc_threads(ctx) host
 * threads.  CUDA failures come back as GC_EDEVICE (GC_ENOMEM when device
 * memory runs out); the cancel flags are polled between phases and
 * launches.  At most GC_DBSCAN_GPU_MAX_N points (more: GC_EDEVICE).
 * Euclidean only: callers go through gc_dbscan_on_gpu (dbscan.c), which
 * hands it the Euclidean form of any metric.
 */
gc_code		gc_dbscan_gpu(const gc_ctx *ctx, const float *X, int64_t n, int d,
						  const gc_dbscan_params *p, int32_t *labels,
						  uint8_t *is_core, gc_status *st);

/* Device memory gc_dbscan_gpu needs (bytes; an upper bound). */
size_t		gc_dbscan_gpu_mem_bytes(int64_t n, int d);

void		gc_dbscan_gpu_last_phases(gc_dbscan_gpu_phases *out);

/*
 * Affinity propagation on the current CUDA device (cuda/affinity/affinity.cu): the
 * contract of gc_ap_cpu, checked by the caller: callers go through
 * gc_ap_on_gpu (affinity.c), which checks (gc_ap_check), n >= 1.  On
 * affinity.c's one driver, with the CPU's results bit for bit in float8;
 * float4 (p->precision) stores S, R and A as floats.  CUDA failures come
 * back as GC_EDEVICE (GC_ENOMEM when device memory runs out); the cancel
 * flags are polled between iterations and passes.  At most INT32_MAX rows.
 */
gc_code		gc_ap_gpu(const gc_ctx *ctx, const float *X, int64_t n, int d,
					  const gc_ap_params *p, gc_ap_result *res, gc_status *st);

/*
 * Device memory gc_ap_gpu needs for n rows of d features (an upper bound:
 * three n x n matrices of the precision's size, O(n d)); SIZE_MAX when it
 * overflows.  gc_ap_gpu_max_rows: the largest n whose need fits in bytes.
 */
size_t		gc_ap_gpu_mem_bytes(int64_t n, int d, gc_ap_precision precision);
int64_t		gc_ap_gpu_max_rows(size_t bytes, int d, gc_ap_precision precision);

/*
 * With ctx->n_gpus >= 2, gc_ap_gpu splits S, R and A by rows over the GPUs
 * of ctx->gpus (cuda/affinity/affinity.cu), with the same results bit for
 * bit.  Device memory each GPU needs when n rows of d features split over
 * gpus GPUs (the largest part's; gpus = 1: gc_ap_gpu_mem_bytes), SIZE_MAX
 * when it overflows; gc_ap_gpu_split_max_rows: the largest n whose need
 * fits in bytes on each of gpus GPUs.
 */
size_t		gc_ap_gpu_split_mem_bytes(int64_t n, int d, gc_ap_precision precision,
									  int gpus);
int64_t		gc_ap_gpu_split_max_rows(size_t bytes, int d, gc_ap_precision precision,
									 int gpus);

void		gc_ap_gpu_last_phases(gc_ap_gpu_phases *out);

/*
 * k-distances on the current CUDA device (cuda/dbscan/kdistance.cu): the
 * contract of gc_kdistance_cpu, checked by the caller: callers go through
 * gc_kdistance_on_gpu (kdistance.c), which makes gc_kdistance_cpu's check.
 * kdist2 bit for bit: the k-th
 * smallest of the same float32 gc_dist2 over every row, the row itself
 * counted, found exactly on the GPU kd-tree (cuda/common/kdtree.cu).
 * CUDA failures come back as GC_EDEVICE (GC_ENOMEM when device memory runs
 * out); the cancel flags are polled between launches, and progress is
 * reported as queries done.  At most GC_DBSCAN_GPU_MAX_N rows.
 */
gc_code		gc_kdistance_gpu(const gc_ctx *ctx, const float *X, int64_t n,
							 int d, int64_t k, float *kdist2, gc_status *st);

/* Device memory gc_kdistance_gpu needs (bytes; an upper bound). */
size_t		gc_kdistance_gpu_mem_bytes(int64_t n, int d, int64_t k);

/*
 * The silhouette's values on the current CUDA device
 * (cuda/tools/silhouette.cu): s[i] for each row sel chose (silhouette.c's
 * driver, reached through gc_silhouette_on_gpu), in scored order, bit for
 * bit the CPU's: each row's distance sums per cluster in the CPU's order,
 * its a, b and s as the CPU forms them (tools.h).  CUDA failures come back
 * as GC_EDEVICE (GC_ENOMEM when device memory runs out); the cancel flags
 * are polled between launches, and progress is reported as rows scored.
 * At most INT32_MAX scored rows.
 */
gc_code		gc_silhouette_gpu(const gc_ctx *ctx, const float *X, int d,
							  const gc_sil_rows *sel, double *s,
							  gc_status *st);

/*
 * Device memory gc_silhouette_gpu needs to score rows rows of d features in
 * m clusters (bytes; an upper bound).
 */
size_t		gc_silhouette_gpu_mem_bytes(int64_t rows, int d, int32_t m);

/*
 * HDBSCAN's phases 1 and 2 on the current CUDA device (cuda/hdbscan/):
 * the core distances and the mutual-reachability MST of the rows R (the
 * unit rows under cosine), edges sorted by (w, a, b), bit for bit
 * gc_hdbscan_core_cpu's and gc_hdbscan_mst_edges_cpu's.  Checked by the
 * caller: callers go through gc_hdbscan_on_gpu or gc_hdbscan_mst_on_gpu
 * (hdbscan.c), which make the CPU's check; 2 <= n <= GC_HDBSCAN_GPU_MAX_N.
 * CUDA failures come back as GC_EDEVICE (GC_ENOMEM when device memory runs
 * out); the cancel flags are polled about every millisecond while the
 * device works, and a cancel stops the long kernels (the core distances'
 * and Borůvka's walks) where they are.
 */
gc_code		gc_hdbscan_mst_gpu(const gc_ctx *ctx, const float *R, int64_t n,
							   int d, int64_t min_samples, double alpha,
							   gc_metric metric, double *core,
							   gc_mst_edge *edges, gc_status *st);

/*
 * gc_hdbscan_mst_gpu's phases, then the single-linkage tree of their edges
 * on the device (cuda/hdbscan/hdbscan_linkage.cu): nodes (n - 1) in place
 * of the edges, bit for bit gc_hdbscan_linkage's of them.  The same
 * checks, errors and cancel.
 */
gc_code		gc_hdbscan_linkage_gpu(const gc_ctx *ctx, const float *R, int64_t n,
								   int d, int64_t min_samples, double alpha,
								   gc_metric metric, gc_linkage_node *nodes,
								   gc_status *st);

/*
 * The whole of HDBSCAN on the device but the flat selection
 * (cuda/hdbscan/hdbscan_condense.cu): gc_hdbscan_linkage_gpu's phases,
 * then the condensed tree, each row's label, probability and outlier
 * score; the selection, over the clusters alone, by the core's
 * gc_hdbscan_select on the host.  res's arrays and clusters bit for bit
 * gc_hdbscan_cpu's; res->tree NULL (the condensed tree's rows come from
 * gc_hdbscan_linkage_gpu's nodes and the CPU).  The same checks, errors
 * and cancel.
 */
gc_code		gc_hdbscan_gpu(const gc_ctx *ctx, const float *R, int64_t n, int d,
						   const gc_hdbscan_params *p, gc_hdbscan_result *res,
						   gc_status *st);

/*
 * Device memory gc_hdbscan_mst_gpu, gc_hdbscan_linkage_gpu or
 * gc_hdbscan_gpu needs (bytes; an upper bound for each).
 */
size_t		gc_hdbscan_gpu_mem_bytes(int64_t n, int d, int64_t min_samples);

void		gc_hdbscan_gpu_last_phases(gc_hdbscan_gpu_phases *out);

#else							/* no CUDA: the stubs */

static inline void
gc_cuda_probe(int device_id, gc_cuda_device_info *info)
{
	memset(info, 0, sizeof(*info));
	info->device_id = device_id;
	strcpy(info->reason, "gpuclust was built without CUDA");
}

static inline void
gc_cuda_probe_cached(int device_id, gc_cuda_device_info *info)
{
	gc_cuda_probe(device_id, info);
}

static inline bool
gc_cuda_started(void)
{
	return false;
}

static inline void
gc_cuda_keep_memory(size_t bytes)
{
	(void) bytes;
}

static inline void
gc_cuda_trim_memory(void)
{
}

static inline gc_code
gc_kmeans_gpu(const gc_ctx *ctx, const float *X, int64_t n, int d,
			  const gc_kmeans_params *p, gc_kmeans_result *res, gc_status *st)
{
	(void) ctx, (void) X, (void) n, (void) d, (void) p, (void) res;
	return gc_fail(st, GC_EDEVICE, "gpuclust was built without CUDA");
}

static inline size_t
gc_kmeans_gpu_mem_bytes(int64_t n, int d, int k, int n_init, bool weighted)
{
	(void) n, (void) d, (void) k, (void) n_init, (void) weighted;
	return 0;
}

static inline void
gc_kmeans_gpu_plan_for(int64_t n, int d, int k, int n_init, bool weighted,
					   size_t budget, gc_kmeans_gpu_plan *out)
{
	(void) n, (void) d, (void) k, (void) n_init, (void) weighted, (void) budget;
	memset(out, 0, sizeof(*out));
	out->fits = true;
}

static inline void
gc_kmeans_gpu_last_phases(gc_kmeans_gpu_phases *out)
{
	memset(out, 0, sizeof(*out));
}

static inline gc_code
gc_kmeans_labels_gpu(const gc_ctx *ctx, const float *X, int64_t n, int d,
					 const float *C, int k, int32_t *labels, gc_status *st)
{
	(void) ctx, (void) X, (void) n, (void) d, (void) C, (void) k, (void) labels;
	return gc_fail(st, GC_EDEVICE, "gpuclust was built without CUDA");
}

static inline gc_code
gc_dbscan_gpu(const gc_ctx *ctx, const float *X, int64_t n, int d,
			  const gc_dbscan_params *p, int32_t *labels, uint8_t *is_core,
			  gc_status *st)
{
	(void) ctx, (void) X, (void) n, (void) d, (void) p, (void) labels, (void) is_core;
	return gc_fail(st, GC_EDEVICE, "gpuclust was built without CUDA");
}

static inline size_t
gc_dbscan_gpu_mem_bytes(int64_t n, int d)
{
	(void) n, (void) d;
	return 0;
}

static inline void
gc_dbscan_gpu_last_phases(gc_dbscan_gpu_phases *out)
{
	memset(out, 0, sizeof(*out));
}

static inline gc_code
gc_ap_gpu(const gc_ctx *ctx, const float *X, int64_t n, int d,
		  const gc_ap_params *p, gc_ap_result *res, gc_status *st)
{
	(void) ctx, (void) X, (void) n, (void) d, (void) p, (void) res;
	return gc_fail(st, GC_EDEVICE, "gpuclust was built without CUDA");
}

static inline size_t
gc_ap_gpu_mem_bytes(int64_t n, int d, gc_ap_precision precision)
{
	(void) n, (void) d, (void) precision;
	return 0;
}

static inline int64_t
gc_ap_gpu_max_rows(size_t bytes, int d, gc_ap_precision precision)
{
	(void) bytes, (void) d, (void) precision;
	return 0;
}

static inline size_t
gc_ap_gpu_split_mem_bytes(int64_t n, int d, gc_ap_precision precision, int gpus)
{
	(void) n, (void) d, (void) precision, (void) gpus;
	return 0;
}

static inline int64_t
gc_ap_gpu_split_max_rows(size_t bytes, int d, gc_ap_precision precision, int gpus)
{
	(void) bytes, (void) d, (void) precision, (void) gpus;
	return 0;
}

static inline void
gc_ap_gpu_last_phases(gc_ap_gpu_phases *out)
{
	memset(out, 0, sizeof(*out));
}

static inline gc_code
gc_kdistance_gpu(const gc_ctx *ctx, const float *X, int64_t n, int d,
				 int64_t k, float *kdist2, gc_status *st)
{
	(void) ctx, (void) X, (void) n, (void) d, (void) k, (void) kdist2;
	return gc_fail(st, GC_EDEVICE, "gpuclust was built without CUDA");
}

static inline size_t
gc_kdistance_gpu_mem_bytes(int64_t n, int d, int64_t k)
{
	(void) n, (void) d, (void) k;
	return 0;
}

static inline gc_code
gc_silhouette_gpu(const gc_ctx *ctx, const float *X, int d,
				  const gc_sil_rows *sel, double *s, gc_status *st)
{
	(void) ctx, (void) X, (void) d, (void) sel, (void) s;
	return gc_fail(st, GC_EDEVICE, "gpuclust was built without CUDA");
}

static inline size_t
gc_silhouette_gpu_mem_bytes(int64_t rows, int d, int32_t m)
{
	(void) rows, (void) d, (void) m;
	return 0;
}

static inline gc_code
gc_hdbscan_mst_gpu(const gc_ctx *ctx, const float *R, int64_t n, int d,
				   int64_t min_samples, double alpha, gc_metric metric,
				   double *core, gc_mst_edge *edges, gc_status *st)
{
	(void) ctx, (void) R, (void) n, (void) d, (void) min_samples;
	(void) alpha, (void) metric, (void) core, (void) edges;
	return gc_fail(st, GC_EDEVICE, "gpuclust was built without CUDA");
}

static inline gc_code
gc_hdbscan_linkage_gpu(const gc_ctx *ctx, const float *R, int64_t n, int d,
					   int64_t min_samples, double alpha, gc_metric metric,
					   gc_linkage_node *nodes, gc_status *st)
{
	(void) ctx, (void) R, (void) n, (void) d, (void) min_samples;
	(void) alpha, (void) metric, (void) nodes;
	return gc_fail(st, GC_EDEVICE, "gpuclust was built without CUDA");
}

static inline gc_code
gc_hdbscan_gpu(const gc_ctx *ctx, const float *R, int64_t n, int d,
			   const gc_hdbscan_params *p, gc_hdbscan_result *res, gc_status *st)
{
	(void) ctx, (void) R, (void) n, (void) d, (void) p, (void) res;
	return gc_fail(st, GC_EDEVICE, "gpuclust was built without CUDA");
}

static inline size_t
gc_hdbscan_gpu_mem_bytes(int64_t n, int d, int64_t min_samples)
{
	(void) n, (void) d, (void) min_samples;
	return 0;
}

static inline void
gc_hdbscan_gpu_last_phases(gc_hdbscan_gpu_phases *out)
{
	memset(out, 0, sizeof(*out));
}

#endif							/* GPUCLUST_CUDA */

/*
 * gc_kmeans_gpu, in every build (kmeans.c): gc_kmeans_cpu's check, then
 * gc_kmeans_gpu for n >= 1.
 */
gc_code		gc_kmeans_on_gpu(const gc_ctx *ctx, const float *X, int64_t n, int d,
							 const gc_kmeans_params *p, gc_kmeans_result *res,
							 gc_status *st);

/*
 * gc_kmeans_labels_gpu, in every build (kmeans_assign.c): the CPU's check,
 * then 1 <= k <= n (else GC_EINVAL), then gc_kmeans_labels_gpu.
 */
gc_code		gc_kmeans_labels_on_gpu(const gc_ctx *ctx, const float *X,
									int64_t n, int d, const float *C, int k,
									int32_t *labels, gc_status *st);

/*
 * gc_dbscan_gpu for any metric, in every build (dbscan.c): the check, then
 * gc_dbscan_gpu on the Euclidean form of the problem.
 */
gc_code		gc_dbscan_on_gpu(const gc_ctx *ctx, const float *X, int64_t n, int d,
							 const gc_dbscan_params *p, int32_t *labels,
							 uint8_t *is_core, gc_status *st);

/*
 * gc_ap_gpu, in every build (affinity.c): gc_ap_check, then gc_ap_gpu for
 * n >= 1.
 */
gc_code		gc_ap_on_gpu(const gc_ctx *ctx, const float *X, int64_t n, int d,
						 const gc_ap_params *p, gc_ap_result *res,
						 gc_status *st);

/*
 * gc_kdistance_gpu, in every build (kdistance.c): gc_kdistance_cpu's
 * check, then gc_kdistance_gpu.
 */
gc_code		gc_kdistance_on_gpu(const gc_ctx *ctx, const float *X, int64_t n,
								int d, int64_t k, float *kdist2,
								gc_status *st);

/*
 * The silhouette on the GPU, in every build (silhouette.c): the contract
 * of gc_silhouette_cpu (the same checks, rows and sample) and its result
 * bit for bit, the values of the scored rows by gc_silhouette_gpu.
 */
gc_code		gc_silhouette_on_gpu(const gc_ctx *ctx, const float *X, int64_t n,
								 int d, const int32_t *labels, int32_t m,
								 int64_t sample_size, uint64_t seed,
								 gc_silhouette_result *res, gc_status *st);

/*
 * HDBSCAN on the GPU, in every build (hdbscan.c): gc_hdbscan_cpu's check
 * and contract, its result bit for bit: the whole call by gc_hdbscan_gpu;
 * with the condensed tree wanted, phases 1 and 2 and the single-linkage
 * tree by gc_hdbscan_linkage_gpu, the rest of phase 3 on the CPU
 * (gc_hdbscan_from_linkage).
 */
gc_code		gc_hdbscan_on_gpu(const gc_ctx *ctx, const float *X, int64_t n,
							  int d, const gc_hdbscan_params *p,
							  gc_hdbscan_result *res, gc_status *st);

/* gc_hdbscan_mst_cpu's contract and result on the GPU (hdbscan.c). */
gc_code		gc_hdbscan_mst_on_gpu(const gc_ctx *ctx, const float *X,
								  int64_t n, int d,
								  const gc_hdbscan_params *p, double *core,
								  gc_mst_edge *edges, gc_status *st);

/* gc_hdbscan_linkage_cpu's contract and result on the GPU (hdbscan.c). */
gc_code		gc_hdbscan_linkage_on_gpu(const gc_ctx *ctx, const float *X,
									  int64_t n, int d,
									  const gc_hdbscan_params *p,
									  gc_linkage_node *nodes, gc_status *st);

#if defined(GC_TESTING) && defined(GPUCLUST_CUDA)

/* ---- test-only entry points (cuda/<algorithm>/<name>_hooks.cu) ---- */

/* The initial centres of one run (stream as kmeans/kmeans.h); chosen
 * (k rows, may be NULL) is filled for k-means++ and k-means|| only; init
 * GC_INIT_AUTO resolves as gc_km_init_resolve. */
gc_code		gc_kmeans_gpu_seed(const gc_ctx *ctx, const float *X, int64_t n,
							   int d, int k, gc_kmeans_init init, uint64_t seed,
							   uint64_t stream, float *centroids,
							   int64_t *chosen, gc_status *st);

/* One Lloyd step from C_in with labels starting at -1: labels, C_out,
 * squared centre shift and changed-label count. */
gc_code		gc_kmeans_gpu_step(const float *X, int64_t n, int d, int k,
							   const float *C_in, int32_t *labels,
							   float *C_out, double *shift,
							   int64_t *n_changed, gc_status *st);

/*
 * The exact path's grid (cuda/kmeans/kmeans_grid.cu, d <= 3) for the centres C:
 * its cells, the candidates it lists, and per row of X (the host's float
 * arithmetic of the kernel): rows outside their cell's edges, and the
 * candidates a row and a warp of 32 consecutive rows compare with.
 * cells = 0: no grid for this problem.
 */
typedef struct gc_kmeans_gpu_grid_info
{
	int			cells;
	int			full_cells;		/* more than the cap, or past the pool */
	int64_t		listed;			/* candidates listed in all */
	int64_t		rows_outside;
	double		row_candidates;	/* mean over rows (a full cell's: k) */
	double		warp_candidates;	/* mean over warps of their rows' largest */
} gc_kmeans_gpu_grid_info;

gc_code		gc_kmeans_gpu_grid_stats(const float *X, int64_t n, int d, int k,
									 const float *C, gc_kmeans_gpu_grid_info *out,
									 gc_status *st);

typedef struct gc_kmeans_gpu_timing
{
	double		ms_iter;		/* a whole Lloyd iteration, read-back included */
	double		ms_iter_full;	/* the same with every row screened (no bounds) */
	int			pruned;			/* the bounds ran (d > 8, resident) */
	int			pruned_same;	/* and gave the same labels and centres as without */
	int64_t		iter_screened[32];	/* the timed iterations: rows screened (bounds on) */
	double		ms_assign;		/* the assignment kernel alone */
	double		ms_update;		/* the update (sums) kernel alone */
	double		ms_rerank;		/* of ms_assign: the near ties' exact re-rank (d > 8) */
	double		ms_finalize;	/* the means, shift and empty count */
	double		ms_prep;		/* the centres in the layout assign reads */
	int64_t		iter_ties[32];	/* the timed iterations: rows ranked among their windows' candidates */
	int64_t		iter_reranked[32];	/* and rows re-ranked over every centre */
	int			small_path;		/* 1: exact path (d <= 8) */
	int			update_replicas;	/* 0: global atomics */
	int			empty_seen;
	int64_t		fallback_rows;	/* tiled path: rows re-ranked over every centre (last iteration) */
	int64_t		tied_rows;		/* and rows decided in their windows (last iteration) */
	int			screen_mode;	/* d > 8: 0 FP32 tiled kernel, 1 tf32, 3 3xtf32, 13 tf32 then 3xtf32 */
	int			ties;			/* the screen's near ties go through windows */
	int			screen_wgmma;	/* the screen ran on wgmma, in FP16 (cuda/kmeans/kmeans_wgmma.cu) */
} gc_kmeans_gpu_timing;

/*
 * The tensor-core screen's scores (cuda/kmeans/kmeans_screen.cu) of every row and
 * centre, ||c'||² - 2 x'.c' with x' = x - mu and c' = c - mu as the kernel
 * forms them: scores (n x k), mu (d, the shift).  mode 1: tf32, 3: 3xtf32.
 * *f16_scale: 0, or the scale s when mode 1 ran on wgmma in FP16
 * (cuda/kmeans/kmeans_wgmma.cu: operands FP16(s x') / s).  GC_EINVAL when d has
 * no screen (d <= 8 or d > 256).
 */
gc_code		gc_kmeans_gpu_screen_scores(const float *X, int64_t n, int d, int k,
										const float *C, int mode, float *scores,
										float *mu, float *f16_scale, gc_status *st);

/*
 * The single-linkage tree of any spanning tree given as n - 1 edges in
 * their (w, a, b) order (cuda/hdbscan/hdbscan_hooks.cu): the GPU's
 * gc_hdbscan_linkage_gpu step alone, for tests on trees no data gives.
 */
gc_code		gc_hdbscan_gpu_linkage_of(const gc_mst_edge *edges, int64_t n,
									  gc_linkage_node *nodes, gc_status *st);

/*
 * The GPU's kd-tree (cuda/common/kdtree.cuh) over X (host, n x d) with
 * leaves of leaf to 2 leaf points, the small nodes' levels made in blocks
 * or all device-wide (cuda/hdbscan/hdbscan_hooks.cu): its depth, its
 * permutation (perm, n) and its boxes (lo, hi: cap nodes x d at least,
 * cap >= 2^(depth + 1) - 1), to compare the two builds.
 */
gc_code		gc_kdtree_gpu_of(const float *X, int64_t n, int d, int leaf, bool cyclic,
							 bool blocks, int64_t cap, int *depth, int *perm,
							 float *lo, float *hi, gc_status *st);

/*
 * The condensed tree of any single-linkage tree (nodes as
 * gc_hdbscan_linkage makes them) at min_cluster_size mcs on the GPU
 * (cuda/hdbscan/hdbscan_hooks.cu): clusters (host arrays malloc'ed:
 * gc_hdbscan_clusters_free) and places (leave, n), to compare with
 * gc_hdbscan_condense's.
 */
gc_code		gc_hdbscan_gpu_condense_of(const gc_linkage_node *nodes, int64_t n,
									   int64_t mcs, gc_hdbscan_clusters *out,
									   gc_hdbscan_place *leave, gc_status *st);

/*
 * Forces gc_kmeans_gpu calls of this thread to stream X in chunks of rows
 * rows (rounded up to a multiple of GC_KM_BLOCK), whatever their budget; 0
 * restores the plan.
 */
void		gc_kmeans_gpu_force_chunk(int64_t rows);

/* Times iters Lloyd iterations from C0 (after 3 warm-up iterations). */
gc_code		gc_kmeans_gpu_bench(const float *X, int64_t n, int d, int k,
								const float *C0, int iters,
								gc_kmeans_gpu_timing *t, gc_status *st);

typedef struct gc_kmeans_gpu_stream_timing
{
	double		ms_setup;		/* allocation, buffers and the feature pass (one pass) */
	double		ms_iter;		/* a streamed Lloyd iteration (one pass), mean */
	double		ms_iter_min;	/* the fastest */
	int64_t		chunks;			/* per pass */
	int64_t		chunk_rows;
	int			small_path;		/* 1: exact path (d <= 8) */
	int			update_replicas;	/* 0: global atomics, -1: sort by label */
} gc_kmeans_gpu_stream_timing;

/*
 * Times iters streamed Lloyd iterations from C0 (host clock, each ends
 * with its read-back) with budget bytes of GPU memory (0: the free
 * memory); GC_EINVAL when the problem fits resident in it (and no chunk is
 * forced).
 */
gc_code		gc_kmeans_gpu_stream_bench(const gc_ctx *ctx, const float *X,
									   int64_t n, int d, int k,
									   const float *C0, int iters,
									   size_t budget,
									   gc_kmeans_gpu_stream_timing *t,
									   gc_status *st);

/* Which index a GPU DBSCAN uses: force one. */
typedef enum gc_dbscan_gpu_index_kind
{
	GC_DBSCAN_GPU_AUTO = 0,		/* grid for d <= 3 when it fits, else tree */
	GC_DBSCAN_GPU_GRID,			/* d <= 3; the tree when it does not fit */
	GC_DBSCAN_GPU_BRUTE,		/* the tiled brute force (union-find only) */
	GC_DBSCAN_GPU_TREE,			/* the kd-tree, any d */
	GC_DBSCAN_GPU_TREE_CYCLIC	/* the kd-tree with CUDA-DClust's directory's
								 * schedule: level l splits dimension l mod d
								 * (to measure against; used reports TREE) */
} gc_dbscan_gpu_index_kind;

/* gc_dbscan_gpu with a chosen index; *used (may be NULL) says which ran. */
gc_code		gc_dbscan_gpu_index(const gc_ctx *ctx, const float *X, int64_t n,
								int d, const gc_dbscan_params *p,
								gc_dbscan_gpu_index_kind index,
								gc_dbscan_gpu_index_kind *used,
								int32_t *labels, uint8_t *is_core,
								gc_status *st);

/* The most rows the slabs of a DBSCAN call split over several GPUs may
 * hold together, halos included, over n (cuda/dbscan/dbscan_multi.cu):
 * beyond, fewer slabs; -1 restores the default.  The tests raise it to
 * split every call. */
void		gc_dbscan_gpu_set_split_held(double x);

/* The most shared memory (bytes) a block of the GPU affinity propagation's
 * row pass (cuda/affinity/affinity.cu) keeps its row's columns in between its
 * sweeps; -1 restores the default, all a block can have. */
void		gc_ap_gpu_set_row_keep(long bytes);

/* The bytes of each of its next row's S, R and A that a row pass block
 * prefetches into L2 after its first sweep; -1 restores the default. */
void		gc_ap_gpu_set_row_prefetch(long bytes);

/*
 * One round trip of bytes pageable bytes through the pinned ring
 * (cuda/common/transfer.cu) on threads host threads: an upload, checked
 * with a plain download, then a download in nseg pieces (at most
 * GC_XFER_TEST_MAX_SEGS, cut at random from seed, one empty when nseg >=
 * 3, listed in reverse order), checked against the source, then its
 * whole 4-byte words down as flagged words (gc_xfer_d2h_flagged), checked
 * against their split on the host; the first two copies' times in *ms_up
 * and *ms_down.  0, or 1 with msg saying what differs.
 */
#define GC_XFER_TEST_MAX_SEGS 8
int			gc_xfer_test(size_t bytes, int nseg, int threads, uint64_t seed,
						 double *ms_up, double *ms_down, char *msg,
						 size_t msglen);

#endif							/* GC_TESTING && GPUCLUST_CUDA */

#ifdef __cplusplus
}
#endif

#endif							/* GPUCLUST_GPU_H */
