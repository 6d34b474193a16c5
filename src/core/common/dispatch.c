/*
 * dispatch.c — which device runs a call.
 *
 * 'cpu' always runs on the CPU.  'gpu' runs on the GPU when one is usable
 * (every algorithm, and the k-distances and silhouette), and otherwise
 * fails with the reason: no CUDA in this build, no driver, no device, too
 * little free GPU memory.  'auto' runs
 * k-means on the GPU when the problem is big enough for the GPU to win
 * (GC_KMEANS_GPU_MIN_WORK), a GPU is usable and its free memory (at most
 * gc_gpu.mem_limit: gpuclust.gpu_memory_limit) holds the problem, resident
 * or streamed in chunks of rows (gc_kmeans_gpu_plan_for); otherwise on the
 * CPU, with a note saying why when a usable GPU was passed over for lack
 * of memory.  A k-means call that uses what only
 * the CPU k-means has (sample weights, initial centroids, the cosine
 * metric) runs on the CPU under 'auto' and fails under 'gpu'.  DBSCAN
 * union-find under 'auto' runs on the GPU where it wins end to end
 * (dbscan_gpu_worth: d <= 64, n large enough); DBSCAN dclust runs only on
 * the GPU (gc_dbscan_device_request: 'auto' is the GPU, 'cpu' an error).
 * Affinity propagation in float8 under 'auto' runs on the GPU from
 * GC_AP_GPU_MIN_ROWS rows up when its three n x n matrices fit the GPU's
 * memory, or, where a call may split over several GPUs (the GPU worker's),
 * each GPU's rows of them fit each GPU's, else on the CPU (with a note
 * when the memory was the reason);
 * float4 runs only on the GPU (gc_ap_device_request, the same rule as
 * dclust's).  gpu_kdistance's k-distances and gpu_silhouette follow affinity
 * propagation's rule (choose_by_rows): under 'auto' the GPU from
 * GC_KDISTANCE_GPU_MIN_ROWS rows / GC_SILHOUETTE_GPU_MIN_ROWS rows scored
 * (the _COLD ones before CUDA runs) when their memory fits, else the CPU,
 * with a note when the memory was the reason.
 *
 * The GPU is probed lazily (never before a call needs it: a small problem
 * under 'auto' does not initialise CUDA at all) and the probe is cached per
 * process, i.e. per backend; the free memory is read again on every call.
 */
#include <pthread.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "gpuclust_core.h"
#include "common/gpu.h"

bool
gc_parse_device(const char *s, gc_device *out)
{
	if (s == NULL)
		return false;
	if (strcasecmp(s, "auto") == 0)
		*out = GC_DEVICE_AUTO;
	else if (strcasecmp(s, "cpu") == 0)
		*out = GC_DEVICE_CPU;
	else if (strcasecmp(s, "gpu") == 0)
		*out = GC_DEVICE_GPU;
	else
		return false;
	return true;
}

const char *
gc_dbscan_algorithm_name(gc_dbscan_algorithm algorithm)
{
	switch (algorithm)
	{
		case GC_DBSCAN_UNION_FIND:
			return "union_find";
		case GC_DBSCAN_DCLUST:
			return "dclust";
	}
	return "unknown";
}

bool
gc_parse_dbscan_algorithm(const char *s, gc_dbscan_algorithm *out)
{
	if (s == NULL)
		return false;
	if (strcasecmp(s, "union_find") == 0)
		*out = GC_DBSCAN_UNION_FIND;
	else if (strcasecmp(s, "dclust") == 0)
		*out = GC_DBSCAN_DCLUST;
	else
		return false;
	return true;
}

/*
 * The device a call asks for when requested is asked: requested itself,
 * or, when what the call uses runs only on the GPU (gpu_only; what names
 * it), the GPU under 'auto' too and GC_EINVAL "<what> runs only on the
 * GPU" under 'cpu' (*out then the CPU).
 */
static gc_code
device_request(gc_device requested, bool gpu_only, const char *what,
			   gc_device *out, gc_status *st)
{
	*out = requested;
	if (!gpu_only)
		return GC_OK;
	if (requested == GC_DEVICE_CPU)
		return gc_fail(st, GC_EINVAL, "%s runs only on the GPU", what);
	*out = GC_DEVICE_GPU;
	return GC_OK;
}

gc_code
gc_dbscan_device_request(gc_device requested, gc_dbscan_algorithm algorithm,
						 gc_device *out, gc_status *st)
{
	return device_request(requested, algorithm == GC_DBSCAN_DCLUST,
						  "DBSCAN algorithm dclust", out, st);
}

/* Headroom left free beside the estimate (other users, the allocator). */
#define GPU_MEM_HEADROOM ((size_t) 64 << 20)

/* This process's own GPU: the probe is cached per process (gpu.h). */
static bool
local_warm(const gc_gpu *gpu)
{
	(void) gpu;
	return gc_cuda_started();
}

static void
local_probe(const gc_gpu *gpu, gc_gpu_state *out)
{
	gc_cuda_device_info info;
	sigset_t	all,
				old;

	memset(out, 0, sizeof(*out));
	/*
	 * Without CUDA, the probe's stub says so.  The first probe starts CUDA,
	 * whose threads must not take the caller's signals.
	 */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	gc_cuda_probe_cached(gpu->device_id, &info);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	out->usable = info.usable;
	out->gpus = 1;
	if (info.usable)
		out->mem = info.free_mem > GPU_MEM_HEADROOM ?
			info.free_mem - GPU_MEM_HEADROOM : 0;
	else
		snprintf(out->reason, sizeof(out->reason),
				 GC_CUDA_BUILD ? "no usable GPU: %s" : "%s", info.reason);
}

void
gc_gpu_local(gc_gpu *gpu, int device_id)
{
	gpu->device_id = device_id;
	gpu->mem_limit = 0;
	gpu->warm = local_warm;
	gpu->probe = local_probe;
}

/*
 * Why the GPU cannot run a call; false when it can.  *mem receives the
 * memory a call may use (bytes) on one GPU when the GPU is usable: the
 * probe's, at most gpu->mem_limit; *gpus the GPUs one call may split over
 * (at least 1).
 */
static bool
gpu_split_unusable(const gc_gpu *gpu, size_t *mem, int *gpus, gc_status *why)
{
	gc_gpu_state s;

	gpu->probe(gpu, &s);
	*mem = gpu->mem_limit > 0 && gpu->mem_limit < s.mem ? gpu->mem_limit : s.mem;
	*gpus = s.gpus > 1 ? s.gpus : 1;
	if (!s.usable)
	{
		gc_fail(why, GC_EDEVICE, "%s", s.reason);
		return true;
	}
	return false;
}

/* gpu_split_unusable for a call that runs on one GPU */
static bool
gpu_unusable(const gc_gpu *gpu, size_t *mem, gc_status *why)
{
	int			gpus;

	return gpu_split_unusable(gpu, mem, &gpus, why);
}

/*
 * DBSCAN under 'auto': the GPU when its whole call (upload and download
 * included; ingest and emit are the same on both devices) beats the CPU on
 * all cores, by dimension: from `warm` points up in a process where CUDA
 * already runs, from `cold` points up where the call would start CUDA (its
 * start-up, 0.2-0.35 s, and a context held in GPU memory, must be repaid
 * by the CPU time the GPU saves).  Measured on an H100 with 16 CPU cores
 * (test/gpu/bench_dbscan_gpu; the tables: docs/benchmarks.md).  Between
 * the measured dimensions the next one up's threshold applies; above 64-d
 * (not measured) 'auto' keeps DBSCAN on the CPU.  With fewer cores the CPU
 * is slower, so these thresholds err towards it.
 */
static const struct
{
	int			dmax;			/* for d up to this */
	int64_t		warm,			/* points from which the GPU wins, CUDA running */
				cold;			/* ... CUDA not yet started in this process */
}			dbscan_gpu_min[] = {
	{2, 10000, 4000000},
	{3, 10000, 1000000},
	{4, 20000, 4000000},
	{8, 5000, 1000000},
	{16, 5000, 500000},
	{32, 5000, 200000},
	{64, 5000, 100000},
};

/*
 * Whether 'auto' sends this DBSCAN to the GPU (n = 0: a problem big
 * enough; started: CUDA already runs in this process).
 */
static bool
dbscan_gpu_worth(int64_t n, int d, bool started)
{
	for (size_t i = 0; i < sizeof(dbscan_gpu_min) / sizeof(dbscan_gpu_min[0]); i++)
		if (d <= dbscan_gpu_min[i].dmax)
			return n == 0 ||
				(n <= GC_DBSCAN_GPU_MAX_N &&
				 n >= (started ? dbscan_gpu_min[i].warm : dbscan_gpu_min[i].cold));
	return false;
}

/*
 * The rows from which a DBSCAN call may split over several GPUs, from
 * those of a k-means call (split_rows): the split halves the clustering
 * and adds the slabs' halos, the merge and a second pinned ring, so it
 * pays where the clustering per row outweighs the transfers.  Measured on
 * two H200s (bench_dbscan_multi, docs/benchmarks.md "Several GPUs"), whole
 * calls split / one: 2-d 10M 1.46, 50M 0.90, 200M 0.77; 3-d 20M 0.70;
 * 8-d 10M 0.54.  So 8 times k-means' rows for d <= 2 (33.5M at the
 * default), twice for d = 3, a quarter above (the kd-tree: 1M).
 */
int64_t
gc_dbscan_split_rows(int64_t split_rows, int d)
{
	if (d <= 2)
		return split_rows > INT64_MAX / 8 ? INT64_MAX : split_rows * 8;
	if (d == 3)
		return split_rows > INT64_MAX / 2 ? INT64_MAX : split_rows * 2;
	return split_rows / 4 > 0 ? split_rows / 4 : 1;
}

/*
 * The rows from which an affinity propagation call may split over several
 * GPUs, from those of a k-means call (split_rows): the split divides S, R
 * and A by rows, and each iteration's column sums then pass from GPU to
 * GPU, so it pays where an iteration's n x n work outweighs those
 * hand-overs.  Measured on two H200s (bench_ap_gpu, docs/benchmarks.md
 * "Several GPUs"), two GPUs' time per iteration over one's: float8 5k
 * 1.32, 10k 0.91, 20k 0.67, 40k 0.56; float4 10k 1.14, 20k 0.83, 40k 0.65;
 * whole float8 calls 10k 0.90, 20k 0.68.  So a 256th of k-means' rows
 * (16,384 at the default), at least 2.
 */
int64_t
gc_ap_split_rows(int64_t split_rows)
{
	return split_rows / 256 > 2 ? split_rows / 256 : 2;
}

/*
 * The device of one DBSCAN call (gpuclust_core.h).  The algorithm's
 * request first (gc_dbscan_device_request: dclust asks for the GPU under
 * 'auto', and refuses 'cpu').  CPU: always.  GPU: the GPU, or
 * GC_EDEVICE / GC_ENOMEM with the reason.  AUTO: the CPU when the GPU
 * would not win (dbscan_gpu_worth; CUDA untouched), when no GPU is usable
 * or its free memory is too small; else the GPU.
 */
gc_code
gc_choose_device_dbscan(gc_device requested, gc_dbscan_algorithm algorithm,
						int64_t n, int d, const gc_gpu *gpu,
						gc_device *chosen, gc_status *st)
{
	gc_status	why = {GC_OK, ""};
	size_t		free_mem = 0,
				need;
	gc_code		rc;

	*chosen = GC_DEVICE_CPU;
	if ((rc = gc_dbscan_device_request(requested, algorithm, &requested,
									   st)) != GC_OK)
		return rc;
	if (requested == GC_DEVICE_CPU)
		return GC_OK;
	if (requested != GC_DEVICE_GPU && !dbscan_gpu_worth(n, d, gpu->warm(gpu)))
		return GC_OK;
	if (gpu_unusable(gpu, &free_mem, &why))
	{
		if (requested == GC_DEVICE_GPU)
			return gc_fail(st, GC_EDEVICE, "%s", why.message);
		return GC_OK;
	}
	need = gc_dbscan_gpu_mem_bytes(n, d);
	if (need > free_mem)
	{
		if (requested == GC_DEVICE_GPU)
			return gc_fail(st, GC_ENOMEM,
						   "DBSCAN needs about %zu MiB of GPU memory, but GPU %d has %zu MiB free",
						   need >> 20, gpu->device_id, free_mem >> 20);
		return GC_OK;
	}
	*chosen = GC_DEVICE_GPU;
	return GC_OK;
}

gc_code
gc_choose_device(gc_device requested, gc_algorithm algo, int64_t n, int d,
				 const gc_gpu *gpu, gc_device *chosen, gc_status *st)
{
	gc_status	why = {GC_OK, ""};
	size_t		free_mem;

	if (algo == GC_ALGO_DBSCAN)
		return gc_choose_device_dbscan(requested, GC_DBSCAN_UNION_FIND, n, d,
									   gpu, chosen, st);
	if (algo == GC_ALGO_AP)
		return gc_choose_device_ap(requested, GC_AP_FLOAT8, n, d, gpu, chosen,
								   NULL, 0, st);
	if (algo == GC_ALGO_KDISTANCE)
		return gc_choose_device_kdistance(requested, n, d, 1, gpu, chosen,
										  NULL, 0, st);
	if (algo == GC_ALGO_SILHOUETTE)
		return gc_choose_device_silhouette(requested, n, d, 2, gpu, chosen,
										   NULL, 0, st);
	if (algo == GC_ALGO_HDBSCAN)
		return gc_choose_device_hdbscan(requested, n, d, 1, gpu, chosen,
										NULL, 0, st);
	(void) n;
	(void) d;
	switch (requested)
	{
		case GC_DEVICE_CPU:
			*chosen = GC_DEVICE_CPU;
			return GC_OK;
		case GC_DEVICE_GPU:
			if (gpu_unusable(gpu, &free_mem, &why))
				return gc_fail(st, GC_EDEVICE, "%s", why.message);
			*chosen = GC_DEVICE_GPU;
			return GC_OK;
		case GC_DEVICE_AUTO:
		default:
			*chosen = gpu_unusable(gpu, &free_mem, &why) ?
				GC_DEVICE_CPU : GC_DEVICE_GPU;
			return GC_OK;
	}
}

size_t
gc_gpu_budget(const gc_gpu *gpu)
{
	gc_status	why = {GC_OK, ""};
	size_t		mem = 0;

	return gpu_unusable(gpu, &mem, &why) ? 0 : mem;
}

gc_code
gc_choose_device_kmeans(gc_device requested, int64_t n, int d, int k,
						int runs, bool weighted, const gc_gpu *gpu,
						gc_device *chosen, gc_kmeans_gpu_plan *plan_out,
						char *note, size_t note_len, gc_status *st)
{
	gc_status	why = {GC_OK, ""};
	size_t		free_mem = 0,
				need;
	gc_kmeans_gpu_plan plan;

	if (note != NULL && note_len > 0)
		note[0] = '\0';
	if (plan_out != NULL)
		memset(plan_out, 0, sizeof(*plan_out));
	*chosen = GC_DEVICE_CPU;
	if (requested == GC_DEVICE_CPU)
		return GC_OK;
	if (requested != GC_DEVICE_GPU &&
		(double) n * (double) k * (double) d < GC_KMEANS_GPU_MIN_WORK)
		return GC_OK;			/* small: the CPU wins; CUDA untouched */
	if (gpu_unusable(gpu, &free_mem, &why))
	{
		if (requested == GC_DEVICE_GPU)
			return gc_fail(st, GC_EDEVICE, "%s", why.message);
		return GC_OK;
	}
	/*
	 * resident when it fits, else streamed in chunks: what does not fit
	 * even so (no rows: nothing is allocated)
	 */
	gc_kmeans_gpu_plan_for(n, d, k, runs, weighted, free_mem, &plan);
	need = plan.bytes;
	if (n > 0 && (!plan.fits || n > INT32_MAX))
	{
		char		msg[256];

		if (n > INT32_MAX)
			snprintf(msg, sizeof(msg), "the GPU k-means takes at most %d rows",
					 INT32_MAX);
		else if (weighted)
			snprintf(msg, sizeof(msg),
					 "k-means with sample weights keeps its rows in GPU memory and needs at least %zu MiB of it, but GPU %d has %zu MiB for it",
					 (need >> 20) + 1, gpu->device_id, free_mem >> 20);
		else
			snprintf(msg, sizeof(msg),
					 "k-means needs at least %zu MiB of GPU memory (streaming its rows in chunks), but GPU %d has %zu MiB for it",
					 (need >> 20) + 1, gpu->device_id, free_mem >> 20);
		if (requested == GC_DEVICE_GPU)
			return gc_fail(st, GC_ENOMEM, "%s", msg);
		if (note != NULL && note_len > 0)
			snprintf(note, note_len, "%s", msg);
		return GC_OK;
	}
	*chosen = GC_DEVICE_GPU;
	if (plan_out != NULL)
		*plan_out = plan;
	return GC_OK;
}

gc_code
gc_ap_device_request(gc_device requested, gc_ap_precision precision,
					 gc_device *out, gc_status *st)
{
	return device_request(requested, precision == GC_AP_FLOAT4,
						  "affinity propagation in float4", out, st);
}

/*
 * Why a call's GPU run does not fit (need bytes of GPU memory, or n rows
 * beyond what the GPU takes): its message into msg, given the memory the
 * call may use (free_mem) on GPU device_id, and on each of gpus GPUs when
 * it may split over them (need: then each one's part).  arg: the call's
 * parameters.
 */
typedef void (*gpu_short_fn) (const void *arg, int64_t n, size_t need,
							  size_t free_mem, int device_id, int gpus,
							  char *msg, size_t len);

/*
 * The GPU memory each GPU needs when a call of n rows splits over gpus
 * GPUs (>= 2).  arg: the call's parameters.
 */
typedef size_t (*gpu_split_fn) (const void *arg, int64_t n, int gpus);

/*
 * The rule of the calls whose crossover is a number of rows (affinity
 * propagation, the k-distances, the silhouette), after the call's own
 * request.  CPU: always.  GPU: the GPU when usable and the call fits (need
 * bytes of its memory, n <= max_n; or, with split given and a probe whose
 * call may split over G >= 2 GPUs, split's part for some 2..G GPUs fits
 * the memory of one), else GC_EDEVICE (the reason) or GC_ENOMEM (short's
 * message).  AUTO: the CPU below min_rows (min_rows_cold while CUDA is not
 * running in the process: CUDA untouched) and without a usable GPU; a GPU
 * too small is the CPU with short's message as the note (note, note_len;
 * empty otherwise); else the GPU.
 */
static gc_code
choose_by_rows(gc_device requested, int64_t n, int64_t min_rows,
			   int64_t min_rows_cold, size_t need, int64_t max_n,
			   gpu_split_fn split, gpu_short_fn short_msg, const void *arg,
			   const gc_gpu *gpu, gc_device *chosen, char *note,
			   size_t note_len, gc_status *st)
{
	gc_status	why = {GC_OK, ""};
	size_t		free_mem = 0;
	int			gpus = 1;
	char		msg[256];

	if (note != NULL && note_len > 0)
		note[0] = '\0';
	*chosen = GC_DEVICE_CPU;
	if (requested == GC_DEVICE_CPU)
		return GC_OK;
	if (requested != GC_DEVICE_GPU &&
		n < (gpu->warm(gpu) ? min_rows : min_rows_cold))
		return GC_OK;			/* small: the CPU; CUDA untouched */
	if (gpu_split_unusable(gpu, &free_mem, &gpus, &why))
	{
		if (requested == GC_DEVICE_GPU)
			return gc_fail(st, GC_EDEVICE, "%s", why.message);
		return GC_OK;
	}
	if (split == NULL)
		gpus = 1;
	/* one GPU when it fits, else the fewest GPUs whose parts fit */
	for (int g = 1; g <= gpus && n <= max_n; g++)
		if ((g == 1 ? need : split(arg, n, g)) <= free_mem)
		{
			*chosen = GC_DEVICE_GPU;
			return GC_OK;
		}
	short_msg(arg, n, gpus > 1 ? split(arg, n, gpus) : need, free_mem,
			  gpu->device_id, gpus, msg, sizeof(msg));
	if (requested == GC_DEVICE_GPU)
		return gc_fail(st, GC_ENOMEM, "%s", msg);
	if (note != NULL && note_len > 0)
		snprintf(note, note_len, "%s", msg);
	return GC_OK;
}

/* affinity propagation's call: its d and precision */
typedef struct ap_call
{
	int			d;
	gc_ap_precision precision;
} ap_call;

/* affinity propagation's split: each GPU's part */
static size_t
ap_split_need(const void *arg, int64_t n, int gpus)
{
	const ap_call *c = arg;

	return gc_ap_gpu_split_mem_bytes(n, c->d, c->precision, gpus);
}

/* affinity propagation's: the largest n that fits (split over gpus GPUs) */
static void
ap_short(const void *arg, int64_t n, size_t need, size_t free_mem,
		 int device_id, int gpus, char *msg, size_t len)
{
	const ap_call *c = arg;
	char		where[96];
	long long	fit = gc_ap_gpu_split_max_rows(free_mem, c->d, c->precision, gpus);

	if (gpus > 1)
		snprintf(where, sizeof(where), "each of %d GPUs has", gpus);
	else
		snprintf(where, sizeof(where), "GPU %d has", device_id);
	if (need == SIZE_MAX || n > INT32_MAX)
		snprintf(msg, len,
				 "affinity propagation of %lld rows in %s needs more GPU memory than can be addressed; %s %zu MiB for it: at most %lld rows fit",
				 (long long) n, gc_ap_precision_name(c->precision),
				 where, free_mem >> 20, fit);
	else
		snprintf(msg, len,
				 "affinity propagation of %lld rows in %s needs about %zu MiB of GPU memory%s, but %s %zu MiB for it: at most %lld rows fit",
				 (long long) n, gc_ap_precision_name(c->precision),
				 (need >> 20) + 1, gpus > 1 ? " on each GPU" : "",
				 where, free_mem >> 20, fit);
}

/*
 * The device of one affinity propagation call (gpuclust_core.h).  The
 * precision's request first (gc_ap_device_request: float4 asks for the
 * GPU under 'auto', and refuses 'cpu'), then choose_by_rows from
 * GC_AP_GPU_MIN_ROWS (GC_AP_GPU_MIN_ROWS_COLD) with its three n x n
 * matrices on one GPU or split by rows over the fewest GPUs whose parts
 * fit (ap_split_need); too large names the largest n that fits, on as many
 * GPUs as the call may split over.
 */
gc_code
gc_choose_device_ap(gc_device requested, gc_ap_precision precision,
					int64_t n, int d, const gc_gpu *gpu, gc_device *chosen,
					char *note, size_t note_len, gc_status *st)
{
	ap_call		arg = {d, precision};
	gc_code		rc;

	if (note != NULL && note_len > 0)
		note[0] = '\0';
	*chosen = GC_DEVICE_CPU;
	if ((rc = gc_ap_device_request(requested, precision, &requested,
								   st)) != GC_OK)
		return rc;
	return choose_by_rows(requested, n, GC_AP_GPU_MIN_ROWS,
						  GC_AP_GPU_MIN_ROWS_COLD,
						  gc_ap_gpu_mem_bytes(n, d, precision), INT32_MAX,
						  ap_split_need, ap_short, &arg, gpu, chosen, note,
						  note_len, st);
}

/* the k-distances': k (int64_t) in arg */
static void
kdistance_short(const void *arg, int64_t n, size_t need, size_t free_mem,
				int device_id, int gpus, char *msg, size_t len)
{
	(void) gpus;				/* one GPU */
	if (n > GC_DBSCAN_GPU_MAX_N)
		snprintf(msg, len, "the GPU k-distances take at most %lld rows",
				 (long long) GC_DBSCAN_GPU_MAX_N);
	else
		snprintf(msg, len,
				 "the k-distances of %lld rows (k = %lld) need about %zu MiB of GPU memory, but GPU %d has %zu MiB for them",
				 (long long) n, (long long) *(const int64_t *) arg,
				 (need >> 20) + 1, device_id, free_mem >> 20);
}

gc_code
gc_choose_device_kdistance(gc_device requested, int64_t n, int d, int64_t k,
						   const gc_gpu *gpu, gc_device *chosen, char *note,
						   size_t note_len, gc_status *st)
{
	return choose_by_rows(requested, n, GC_KDISTANCE_GPU_MIN_ROWS,
						  GC_KDISTANCE_GPU_MIN_ROWS_COLD,
						  gc_kdistance_gpu_mem_bytes(n, d, k),
						  GC_DBSCAN_GPU_MAX_N, NULL, kdistance_short, &k, gpu,
						  chosen, note, note_len, st);
}

/* the silhouette's: m (int32_t) in arg */
static void
silhouette_short(const void *arg, int64_t rows, size_t need, size_t free_mem,
				 int device_id, int gpus, char *msg, size_t len)
{
	(void) gpus;				/* one GPU */
	if (rows > INT32_MAX)
		snprintf(msg, len, "the GPU silhouette scores at most %d rows",
				 INT32_MAX);
	else
		snprintf(msg, len,
				 "the silhouette of %lld rows in %d clusters needs about %zu MiB of GPU memory, but GPU %d has %zu MiB for it",
				 (long long) rows, (int) *(const int32_t *) arg,
				 (need >> 20) + 1, device_id, free_mem >> 20);
}

gc_code
gc_choose_device_silhouette(gc_device requested, int64_t rows, int d,
							int32_t m, const gc_gpu *gpu, gc_device *chosen,
							char *note, size_t note_len, gc_status *st)
{
	return choose_by_rows(requested, rows, GC_SILHOUETTE_GPU_MIN_ROWS,
						  GC_SILHOUETTE_GPU_MIN_ROWS_COLD,
						  gc_silhouette_gpu_mem_bytes(rows, d, m), INT32_MAX,
						  NULL, silhouette_short, &m, gpu, chosen, note, note_len,
						  st);
}

/* HDBSCAN's: min_samples (int64_t) in arg */
static void
hdbscan_short(const void *arg, int64_t n, size_t need, size_t free_mem,
			  int device_id, int gpus, char *msg, size_t len)
{
	(void) gpus;				/* one GPU */
	if (n > GC_HDBSCAN_GPU_MAX_N)
		snprintf(msg, len, "the GPU HDBSCAN takes at most %lld rows",
				 (long long) GC_HDBSCAN_GPU_MAX_N);
	else
		snprintf(msg, len,
				 "HDBSCAN of %lld rows (min_samples = %lld) needs about %zu MiB of GPU memory, but GPU %d has %zu MiB for it",
				 (long long) n, (long long) *(const int64_t *) arg,
				 (need >> 20) + 1, device_id, free_mem >> 20);
}

gc_code
gc_choose_device_hdbscan(gc_device requested, int64_t n, int d,
						 int64_t min_samples, const gc_gpu *gpu,
						 gc_device *chosen, char *note, size_t note_len,
						 gc_status *st)
{
	return choose_by_rows(requested, n, GC_HDBSCAN_GPU_MIN_ROWS,
						  GC_HDBSCAN_GPU_MIN_ROWS_COLD,
						  gc_hdbscan_gpu_mem_bytes(n, d, min_samples),
						  GC_HDBSCAN_GPU_MAX_N, NULL, hdbscan_short, &min_samples,
						  gpu, chosen, note, note_len, st);
}
