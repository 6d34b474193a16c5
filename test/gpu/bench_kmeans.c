/*
 * bench_kmeans.c — time of one Lloyd iteration of the GPU k-means
 * (gc_kmeans_gpu_bench: assign + update + finalize + prep + the 24-byte
 * read-back, timed with CUDA events after warm-up) on issue 13's three
 * workloads and FAISS's (1M x 256, k = 20000: also the whole fit of 25
 * iterations), next to the PyTorch and flash-kmeans baselines and three
 * rooflines; then whole fits.
 *
 *   bench_kmeans [baselines.txt]
 *
 * BENCH_ONLY_FITS=1: the whole fits alone; BENCH_FITS=ab...: only those
 * fits (a the first of bench_fits's list); BENCH_NO_FITS=1: no fits;
 * BENCH_ROWS=ab...: only those per-iteration rows (a the first).
 * BENCH_FIT_REPS=r: each whole fit r times on the same rows (a row each);
 * BENCH_KEEP_POOL=1: the device's memory pool keeps what a fit frees, as
 * in the GPU worker, so that fits after the first allocate nothing new.
 *
 * baselines.txt: bench_kmeans.py's lines "NAME N D K VALUE [NOTE]" (its
 * docstring), timed on the same data (make_blobs, make_uniform: its numpy
 * generator equals these bit for bit; test/gpu/check_bench_data.py checks
 * it, and the table compares fingerprints).  Rooflines: FP32 CUDA-core
 * (SMs x 128 lanes x 2 flops x clock), TF32 tensor-core (SMs x dense TF32
 * FLOP/clk/SM x clock: tf32_per_clk_sm), memory (X read once + labels
 * written at the measured device-to-device copy bandwidth).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime.h>

#include "common/gpu.h"

static uint64_t
next(uint64_t *s)
{
	uint64_t	z = (*s += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

static double
unif(uint64_t *s)
{
	return (double) (next(s) >> 11) * 0x1.0p-53;
}

/* blobs: 4k true centres in [-10,10)^d, uniform noise of width 1; C0 (may
 * be NULL): rows 0, n/k, 2n/k ... */
static float *
make_blobs(int64_t n, int d, int k, uint64_t *s, float *C0)
{
	float	   *X = malloc(sizeof(float) * n * d);
	int			m = 4 * k;
	float	   *cent = malloc(sizeof(float) * (size_t) m * d);

	for (int64_t i = 0; i < (int64_t) m * d; i++)
		cent[i] = (float) (20 * unif(s) - 10);
	for (int64_t i = 0; i < n; i++)
	{
		int			c = (int) (unif(s) * m);

		for (int j = 0; j < d; j++)
			X[i * d + j] = cent[(int64_t) c * d + j] + (float) (unif(s) - 0.5);
	}
	if (C0)
		for (int c = 0; c < k; c++)
			memcpy(C0 + (int64_t) c * d, X + (int64_t) c * (n / k) * d, sizeof(float) * d);
	free(cent);
	return X;
}

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/*
 * Whole fits through gc_kmeans_gpu, phases from gc_kmeans_gpu_last_phases:
 * the three workloads with k-means++ (init <= 20% of the fit), and
 * FAISS's reference workload (n=1M, d=256, k=20000, 25 iterations, random
 * init; whole fit <= 6 s); then the three again with k-means||, and the
 * SQL example's shape (1M x 32, k = 100) with each, so that every shape
 * shows the init ms of both seedings.
 */
/*
 * k-means++ seeding (gpu phases' init ms, best of 3) as four kernels a
 * centre and on the persistent path (cuda/kmeans/kmeans_pp.cu), on blobs: where
 * one pays over the other (PP_PERSIST_NB).  The small shapes are
 * k-means||'s reductions: about 10 k candidates.
 */
static void
bench_seed_paths(uint64_t *s)
{
	static const int S[][3] = {
		{2560, 32, 256}, {10000, 128, 1000}, {4096, 32, 100}, {16384, 32, 100},
		{32768, 32, 100}, {65536, 32, 100}, {131072, 32, 100}, {262144, 32, 100}, {1048576, 32, 100}, {16384, 2, 100},
		{65536, 2, 100}, {262144, 2, 100}, {16384, 256, 100}, {65536, 256, 100},
	};

	printf("\n| k-means++ seeding | four kernels a centre, ms | persistent, ms | ratio |\n|---|---|---|---|\n");
	for (size_t w = 0; w < sizeof(S) / sizeof(S[0]); w++)
	{
		const int64_t n = S[w][0];
		const int	d = S[w][1],
					k = S[w][2];
		float	   *X = make_blobs(n, d, k, s, NULL);
		int32_t    *lab = malloc(sizeof(int32_t) * n);
		double	   *dist = malloc(sizeof(double) * n);
		float	   *C = malloc(sizeof(float) * (size_t) k * d);
		gc_kmeans_params p = {.k = k, .max_iter = 1, .tol = 0.0,
			.init = GC_INIT_KMEANSPP, .n_init = 1, .seed = 1};
		gc_kmeans_result r = {lab, dist, C, 0, 0, 0};
		gc_ctx		ctx = {.n_threads = 0, .cancel_flags = {NULL, NULL}};
		gc_status	st = {0};
		gc_kmeans_gpu_phases ph;
		double		best[2] = {1e30, 1e30};

		for (int rep = 0; rep < 3; rep++)
			for (int m = 0; m < 2; m++)
			{
				setenv("GPUCLUST_KM_PP_PERSIST", m ? "1" : "0", 1);
				if (gc_kmeans_gpu(&ctx, X, n, d, &p, &r, &st) != GC_OK)
				{
					printf("| n=%lld d=%d k=%d | error: %s |\n", (long long) n, d, k, st.message);
					break;
				}
				gc_kmeans_gpu_last_phases(&ph);
				if (ph.ms_init < best[m])
					best[m] = ph.ms_init;
			}
		unsetenv("GPUCLUST_KM_PP_PERSIST");
		printf("| n=%lld d=%d k=%d | %.2f | %.2f | %.2fx |\n", (long long) n, d, k,
			   best[0], best[1], best[0] / best[1]);
		free(X);
		free(lab);
		free(dist);
		free(C);
	}
}

static void
bench_fits(uint64_t *s)
{
	static const struct
	{
		int64_t		n;
		int			d,
					k,
					max_iter;
		gc_kmeans_init init;
		double		tol;
		double		target_ms;	/* whole fit; 0: none */
	}			F[] = {
		{10000000, 2, 100, 300, GC_INIT_KMEANSPP, 1e-4, 0},
		{4000000, 32, 256, 300, GC_INIT_KMEANSPP, 1e-4, 0},
		{1000000, 128, 1000, 300, GC_INIT_KMEANSPP, 1e-4, 0},
		{1000000, 256, 20000, 25, GC_INIT_RANDOM, 0.0, 6000},
		/* the seedings side by side: k-means|| on the same shapes */
		{10000000, 2, 100, 300, GC_INIT_KMEANS_PARALLEL, 1e-4, 0},
		{4000000, 32, 256, 300, GC_INIT_KMEANS_PARALLEL, 1e-4, 0},
		{1000000, 128, 1000, 300, GC_INIT_KMEANS_PARALLEL, 1e-4, 0},
		{1000000, 32, 100, 300, GC_INIT_KMEANSPP, 1e-4, 0},
		{1000000, 32, 100, 300, GC_INIT_KMEANS_PARALLEL, 1e-4, 0},
		/* k-means++ between: 1M x 64, k = 256 */
		{1000000, 64, 256, 300, GC_INIT_KMEANSPP, 1e-4, 0},
	};
	const int	nf = (int) (sizeof(F) / sizeof(F[0]));
	const int	reps = getenv("BENCH_FIT_REPS") && atoi(getenv("BENCH_FIT_REPS")) > 1 ?
		atoi(getenv("BENCH_FIT_REPS")) : 1;

	if (getenv("BENCH_KEEP_POOL") && atoi(getenv("BENCH_KEEP_POOL")) == 1)
	{
		gc_cuda_device_info info;

		/* as the GPU worker does: the pool keeps what a fit frees */
		gc_cuda_probe(0, &info);
		gc_cuda_keep_memory(info.total_mem);
		printf("the device's memory pool keeps what fits free (gc_cuda_keep_memory), as in the GPU worker\n");
	}

	printf("\n| fit | init | upload ms | init ms | Lloyd ms (iterations) | ms/iter | download ms | whole call ms | init / fit | target |\n");
	printf("|---|---|---|---|---|---|---|---|---|---|\n");
	for (int w = 0; w < nf; w++)
	{
		if (getenv("BENCH_FITS") && !strchr(getenv("BENCH_FITS"), 'a' + w))
			continue;			/* BENCH_FITS=ab...: those fits only (a: the first) */
		int64_t		n = F[w].n;
		int			d = F[w].d,
					k = F[w].k;
		float	   *X = F[w].target_ms == 0 ? make_blobs(n, d, k, s, NULL) : malloc(sizeof(float) * n * d);
		float	   *C = malloc(sizeof(float) * (size_t) k * d);
		gc_kmeans_params p = {.k = k, .max_iter = F[w].max_iter, .tol = F[w].tol,
			.init = F[w].init, .n_init = 1, .seed = 1};
		gc_ctx		ctx = {.n_threads = 0, .cancel_flags = {NULL, NULL}};
		gc_status	st = {0};
		gc_kmeans_gpu_phases ph;
		double		t0,
					tot,
					fit;
		char		tgt[96];

		/* FAISS's workload: uniform data, which keeps moving for 25 iterations */
		if (F[w].target_ms > 0)
			for (int64_t i = 0; i < n * d; i++)
				X[i] = (float) unif(s);
		for (int rep = 0; rep < reps; rep++)
		{
			/* the results into fresh memory, as a caller's */
			int32_t    *lab = malloc(sizeof(int32_t) * n);
			double	   *dist = malloc(sizeof(double) * n);
			gc_kmeans_result r = {lab, dist, C, 0, 0, 0};

			t0 = now_ms();
			if (gc_kmeans_gpu(&ctx, X, n, d, &p, &r, &st) != GC_OK)
			{
				printf("| n=%lld d=%d k=%d | error: %s |\n", (long long) n, d, k, st.message);
				free(lab);
				free(dist);
				break;
			}
			tot = now_ms() - t0;
			gc_kmeans_gpu_last_phases(&ph);
			fit = ph.ms_init + ph.ms_lloyd;
			if (F[w].target_ms > 0)
			{
				/* had it stopped early, what max_iter iterations would take */
				double		full = tot + (F[w].max_iter - ph.total_iterations) *
					ph.ms_lloyd / (ph.total_iterations > 0 ? ph.total_iterations : 1);

				snprintf(tgt, sizeof(tgt), "fit <= %.0f ms: %.0f ms for %d iterations, %s",
						 F[w].target_ms, full, F[w].max_iter,
						 full <= F[w].target_ms ? "met" : "MISSED");
			}
			else
				snprintf(tgt, sizeof(tgt), "init <= 20%% %s",
						 ph.ms_init <= 0.2 * fit ? "met" : "MISSED");
			printf("| n=%lld d=%d k=%d | %s | %.1f | %.1f | %.1f (%d) | %.3f | %.1f | %.1f | %.0f%% | %s |\n",
				   (long long) n, d, k, F[w].init == GC_INIT_RANDOM ? "random" :
				   F[w].init == GC_INIT_KMEANS_PARALLEL ? "k-means\\|\\|" : "k-means++",
				   ph.ms_upload, ph.ms_init, ph.ms_lloyd, ph.total_iterations,
				   ph.ms_lloyd / (ph.total_iterations > 0 ? ph.total_iterations : 1),
				   ph.ms_download, tot, 100.0 * ph.ms_init / fit, tgt);
			fflush(stdout);
			free(lab);
			free(dist);
		}
		free(X);
		free(C);
	}
}

static double
measure_bw(void)
{
	size_t		bytes = (size_t) 1 << 30;
	void	   *a = NULL,
			   *b = NULL;
	cudaEvent_t e0,
				e1;
	float		ms = 0;

	if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess)
		return 3.0e12;
	cudaMemset(a, 1, bytes);
	cudaEventCreate(&e0);
	cudaEventCreate(&e1);
	cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);
	cudaEventRecord(e0, 0);
	for (int i = 0; i < 10; i++)
		cudaMemcpy(i & 1 ? a : b, i & 1 ? b : a, bytes, cudaMemcpyDeviceToDevice);
	cudaEventRecord(e1, 0);
	cudaEventSynchronize(e1);
	cudaEventElapsedTime(&ms, e0, e1);
	cudaFree(a);
	cudaFree(b);
	return 2.0 * bytes * 10 / (ms * 1e-3);
}

/* ---- the per-iteration table: issue 13's, with its rooflines ---- */

#define FAISS_SEED	20000		/* bench_kmeans.py's FAISS_SEED */
#define FAISS_ITERS 25

/* FAISS's workload: uniform [0,1) floats from state seed; C0: rows 0, n/k,
 * 2n/k ... (bench_kmeans.py's make_uniform) */
static float *
make_uniform(int64_t n, int d, int k, uint64_t seed, float *C0)
{
	float	   *X = malloc(sizeof(float) * n * d);
	uint64_t	s = seed;

	for (int64_t i = 0; i < n * d; i++)
		X[i] = (float) unif(&s);
	for (int c = 0; c < k; c++)
		memcpy(C0 + (int64_t) c * d, X + (int64_t) c * (n / k) * d, sizeof(float) * d);
	return X;
}

/* XOR of X's float bits (high word) and C0's (low): bench_kmeans.py's
 * fingerprint, to show that the baselines ran on these very data */
static uint64_t
fingerprint(const float *X, int64_t nx, const float *C0, int64_t nc)
{
	uint32_t	fx = 0,
				fc = 0,
				u;

	for (int64_t i = 0; i < nx; i++)
	{
		memcpy(&u, X + i, 4);
		fx ^= u;
	}
	for (int64_t i = 0; i < nc; i++)
	{
		memcpy(&u, C0 + i, 4);
		fc ^= u;
	}
	return (uint64_t) fx << 32 | fc;
}

/* the baselines of bench_kmeans.py, per workload */
enum
{
	B_TORCH, B_FLASH32, B_FLASH16, B_FLASH32_FIT, B_FLASH16_FIT, B_N
};
static const char *const base_name[B_N] = {"torch", "flash32", "flash16", "flash32_fit", "flash16_fit"};

typedef struct
{
	int			seen;			/* a line came */
	double		v;				/* ms; NaN: failed or skipped */
	char		note[72];		/* why, when NaN */
} base_cell;

typedef struct
{
	int64_t		n;
	int			d,
				k;
	double		target;			/* ms per iteration; FAISS: ms for the whole fit */
	int			faiss;			/* 1M x 256, k 20000: 25 iterations, whole fit */
	const char *label;			/* as the table names it */
	int			has_data;
	uint64_t	data;			/* the baselines' data fingerprint */
	base_cell	b[B_N];
	/* ours */
	int			ok;
	char		err[300];
	gc_kmeans_gpu_timing t;
	uint64_t	fp;				/* our data's fingerprint */
	double		fit_ms;			/* FAISS: the whole call, host to host */
	double		fit_full_ms;	/* the same for all FAISS_ITERS iterations */
	gc_kmeans_gpu_phases ph;	/* FAISS: its phases */
	int			fit_ok;
} bench_row;

/* "NAME N D K VALUE [NOTE...]" lines (bench_kmeans.py's RESULTS_FILE) */
static void
read_baselines(const char *path, bench_row *R, int nr)
{
	FILE	   *f = fopen(path, "r");
	char		line[512];

	if (!f)
	{
		printf("(no baselines: cannot read %s)\n", path);
		return;
	}
	while (fgets(line, sizeof(line), f))
	{
		char		name[32],
					val[64];
		long long	n;
		int			d,
					k,
					used = 0;
		char	   *note;

		if (sscanf(line, "%31s %lld %d %d %63s %n", name, &n, &d, &k, val, &used) < 5)
			continue;
		note = line + (used > 0 ? used : (int) strlen(line));
		note[strcspn(note, "\r\n")] = '\0';
		for (int r = 0; r < nr; r++)
		{
			if (R[r].n != n || R[r].d != d || R[r].k != k)
				continue;
			if (strcmp(name, "data") == 0)
			{
				R[r].has_data = 1;
				R[r].data = strtoull(val, NULL, 0);
			}
			for (int b = 0; b < B_N; b++)
				if (strcmp(name, base_name[b]) == 0)
				{
					base_cell  *c = &R[r].b[b];

					c->seen = 1;
					c->v = strtod(val, NULL);
					snprintf(c->note, sizeof(c->note), "%s", note);
				}
		}
	}
	fclose(f);
}

/* three significant digits, as the table */
static const char *
fmt3(char *buf, size_t sz, double v)
{
	if (!isfinite(v))
		snprintf(buf, sz, "n/a");
	else if (fabs(v) < 1)
		snprintf(buf, sz, "%.3f", v);
	else if (fabs(v) < 10)
		snprintf(buf, sz, "%.2f", v);
	else if (fabs(v) < 100)
		snprintf(buf, sz, "%.1f", v);
	else
		snprintf(buf, sz, "%.0f", v);
	return buf;
}

/* a baseline's cell: value x scale, or why there is none */
static const char *
fmt_base(char *buf, size_t sz, const base_cell *c, double scale, const char *unit)
{
	char		v[32];

	if (!c->seen)
		snprintf(buf, sz, "not run");
	else if (!isfinite(c->v))
		snprintf(buf, sz, "%s", c->note[0] ? c->note : "failed");
	else
		snprintf(buf, sz, "%s%s", fmt3(v, sizeof(v), c->v * scale), unit);
	return buf;
}

/* "met" or "missed by X.Xx" */
static const char *
fmt_target(char *buf, size_t sz, double ours, double target)
{
	if (!isfinite(ours))
		snprintf(buf, sz, "n/a");
	else if (ours <= target)
		snprintf(buf, sz, "met");
	else
		snprintf(buf, sz, "missed by %.1fx", ours / target);
	return buf;
}

/*
 * Dense TF32 tensor-core FLOP per clock per SM: sm_90 4 tensor cores x 512
 * (the H100 SXM's 494.7 TFLOP/s = 132 SMs x 2048 x 1830 MHz), sm_80 4 x 256
 * (the A100's 156 = 108 x 1024 x 1410 MHz); GC_TF32_FLOP_PER_CLK_SM
 * overrides; 0: unknown here.
 */
static int
tf32_per_clk_sm(int major, int minor)
{
	const char *e = getenv("GC_TF32_FLOP_PER_CLK_SM");

	if (e && atoi(e) > 0)
		return atoi(e);
	if (major == 9 && minor == 0)
		return 2048;
	if (major == 8 && minor == 0)
		return 1024;
	return 0;
}

/* how our iteration ran: where the assignment's screening mode goes */
static const char *
path_desc(char *buf, size_t sz, const gc_kmeans_gpu_timing *t)
{
	snprintf(buf, sz, "%s%s, update %s; of assign: the near ties %.3f ms (rows %lld in windows, %lld over every centre, last iteration); finalize %.3f ms, prep %.3f ms",
			 t->small_path ? "exact path (d <= 8)" : t->screen_mode == 13 ? "tf32 screen, 3xtf32 re-screen"
			 : t->screen_mode == 1 ? (t->ties ? "tf32 screen, near ties in windows" : "tf32 screen")
			 : t->screen_mode == 3 ? "3xtf32 screen" : "FP32 tiled path",
			 t->screen_wgmma ? " (FP16 on wgmma)" : t->screen_mode == 1 || t->screen_mode == 13 ? " (tf32 on mma.sync)" : "",
			 t->update_replicas > 0 ? "smem" : t->update_replicas < 0 ? "sort by label" : "global atomics",
			 t->ms_rerank, (long long) t->tied_rows, (long long) t->fallback_rows, t->ms_finalize, t->ms_prep);
	return buf;
}

/* Lloyd iterations timed per workload (FAISS's take 100 ms each) */
static int
timed_iters(const bench_row *w)
{
	return w->faiss ? 3 : 20;
}

/* the rooflines of one iteration, ms */
typedef struct
{
	double		fp32,
				tf32,			/* NaN: TF32 peak unknown */
				mem,
				flops,
				bytes;
} roofs;

static roofs
roofline(const bench_row *w, double fp32_peak, double tf32_peak, double bw)
{
	roofs		r;

	r.flops = 2.0 * w->n * w->k * w->d;
	r.bytes = (double) w->n * w->d * 4 + (double) w->n * 4;	/* X read once, labels written */
	r.fp32 = r.flops / fp32_peak * 1e3;
	r.tf32 = tf32_peak > 0 ? r.flops / tf32_peak * 1e3 : NAN;
	r.mem = r.bytes / bw * 1e3;
	return r;
}

/* the whole FAISS fit: gc_kmeans_gpu, random init, FAISS_ITERS iterations */
static void
faiss_fit(const float *X, bench_row *w)
{
	int32_t    *lab = malloc(sizeof(int32_t) * w->n);
	double	   *dist = malloc(sizeof(double) * w->n);
	float	   *C = malloc(sizeof(float) * (size_t) w->k * w->d);
	gc_kmeans_params p = {.k = w->k, .max_iter = FAISS_ITERS, .tol = 0.0,
		.init = GC_INIT_RANDOM, .n_init = 1, .seed = 1};
	gc_kmeans_result r = {lab, dist, C, 0, 0, 0};
	gc_ctx		ctx = {.n_threads = 0, .cancel_flags = {NULL, NULL}};
	gc_status	st = {0};
	double		t0 = now_ms();

	if (gc_kmeans_gpu(&ctx, X, w->n, w->d, &p, &r, &st) == GC_OK)
	{
		int			it;

		w->fit_ms = now_ms() - t0;
		gc_kmeans_gpu_last_phases(&w->ph);
		it = w->ph.total_iterations > 0 ? w->ph.total_iterations : 1;
		/* had it stopped early, what FAISS_ITERS iterations would take */
		w->fit_full_ms = w->fit_ms + (FAISS_ITERS - w->ph.total_iterations) * w->ph.ms_lloyd / it;
		w->fit_ok = 1;
	}
	else
		snprintf(w->err, sizeof(w->err), "whole fit: %s", st.message);
	free(lab);
	free(dist);
	free(C);
}

/* what limits a row that missed its target, in one sentence or two */
static void
explain_miss(const bench_row *w, const roofs *r, double ours)
{
	const gc_kmeans_gpu_timing *t = &w->t;
	double		rest = fmax(0, t->ms_iter_full - t->ms_assign - t->ms_update);
	double		best = isfinite(r->tf32) ? fmax(r->tf32, r->mem) : r->mem;
	char		a[32],
				b[32],
				c[32];

	if (w->faiss)
	{
		printf("- %s: %s s against <= %.1f s, missed by %.1fx. Whole call: upload %.0f ms, init %.0f ms, "
			   "Lloyd %.0f ms (%d iterations, %.1f ms each), download %.0f ms.",
			   w->label, fmt3(a, sizeof(a), ours / 1e3), w->target / 1e3, ours / w->target,
			   w->ph.ms_upload, w->ph.ms_init, w->ph.ms_lloyd, w->ph.total_iterations,
			   w->ph.ms_lloyd / (w->ph.total_iterations > 0 ? w->ph.total_iterations : 1),
			   w->ph.ms_download);
	}
	else
		printf("- %s: %s ms against <= %.2f ms, missed by %.1fx.",
			   w->label, fmt3(a, sizeof(a), ours), w->target, ours / w->target);
	if (!w->ok)
	{
		printf("\n");
		return;
	}
	if (t->pruned)
		printf(" With the bounds an iteration takes %s ms; every row screened, %s ms.",
			   fmt3(a, sizeof(a), t->ms_iter), fmt3(b, sizeof(b), t->ms_iter_full));
	printf(" Per iteration, every row screened: assign %s ms (%.0f%%), update %s ms (%.0f%%), rest %s ms (%.0f%%: finalize, prep, read-back, launches).",
		   fmt3(a, sizeof(a), t->ms_assign), 100 * t->ms_assign / t->ms_iter_full,
		   fmt3(b, sizeof(b), t->ms_update), 100 * t->ms_update / t->ms_iter_full,
		   fmt3(c, sizeof(c), rest), 100 * rest / t->ms_iter_full);
	if (t->ms_assign >= t->ms_update && t->ms_assign >= rest)
	{
		printf(" The assignment limits it: its 2nkd FLOPs run at %.0f%% of the FP32 CUDA-core peak (%.1f TFLOP/s) and it reads X at %.0f%% of the copy bandwidth.",
			   100 * r->fp32 / t->ms_assign, r->flops / (t->ms_assign * 1e-3) / 1e12,
			   100 * r->mem / t->ms_assign);
		if (r->fp32 > (w->faiss ? w->target / FAISS_ITERS : w->target))
			printf(" Even at the FP32 CUDA-core peak the distances alone take %s ms per iteration, over the target: it needs tensor cores (TF32 roofline %s ms).",
				   fmt3(a, sizeof(a), r->fp32), fmt3(b, sizeof(b), r->tf32));
		else if (r->fp32 > r->mem)
			printf(" CUDA-core FP32 throughput bounds it (FP32 roofline %s ms; TF32 %s ms, memory %s ms).",
				   fmt3(a, sizeof(a), r->fp32), fmt3(b, sizeof(b), r->tf32), fmt3(c, sizeof(c), r->mem));
		else
			printf(" Memory bounds it at %s ms; it is at %.0f%% of that.",
				   fmt3(a, sizeof(a), r->mem), 100 * r->mem / t->ms_assign);
	}
	else if (t->ms_update >= rest)
		printf(" The update (per-centre sums) limits it: it reads X once, %s ms at the copy bandwidth, and takes %.1fx that.",
			   fmt3(a, sizeof(a), r->mem), t->ms_update / r->mem);
	else
		printf(" Per-iteration overhead outside the assign and update kernels limits it.");
	printf(" Best roofline (max of TF32 and memory): %s ms per iteration, %.0f%% of ours.\n",
		   fmt3(a, sizeof(a), best), 100 * best / t->ms_iter_full);
}

int
main(int argc, char **argv)
{
	bench_row	W[] = {
		{.n = 10000000, .d = 2, .k = 100, .target = 0.30, .label = "10M × 2, k = 100"},
		{.n = 4000000, .d = 32, .k = 256, .target = 1.0, .label = "4M × 32, k = 256"},
		{.n = 1000000, .d = 128, .k = 1000, .target = 1.2, .label = "1M × 128, k = 1000"},
		{.n = 1000000, .d = 256, .k = 20000, .target = 1000, .faiss = 1,
		.label = "1M × 256, k = 20000, 25 iterations, whole fit (FAISS's workload)"},
	};
	const int	nw = (int) (sizeof(W) / sizeof(W[0]));
	int			dev = 0,
				nsm = 0,
				clk = 0,
				major = 0,
				minor = 0,
				tpc;
	double		bw,
				peak,
				tf32;
	struct cudaDeviceProp prop;
	uint64_t	s = 12345;
	char		c1[320],
				c2[160],
				c3[160],
				c4[160],
				c5[160],
				c6[160],
				c7[160],
				c8[160];

	if (argc > 1)
		read_baselines(argv[1], W, nw);
	cudaGetDevice(&dev);
	cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev);
	cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, dev);	/* kHz */
	cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
	cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
	if (cudaGetDeviceProperties(&prop, dev) != cudaSuccess)
		snprintf(prop.name, sizeof(prop.name), "?");
	tpc = tf32_per_clk_sm(major, minor);
	peak = (double) nsm * 128 * 2 * clk * 1e3;
	tf32 = (double) nsm * tpc * clk * 1e3;
	if (getenv("BENCH_SEED_PATHS"))
	{
		bench_seed_paths(&s);
		return 0;
	}
	if (getenv("BENCH_ONLY_FITS"))
	{
		/* the whole fits alone (the seedings' times) */
		bench_fits(&s);
		return 0;
	}
	bw = measure_bw();
	printf("device: %s (sm_%d%d), %d SMs, %.0f MHz (its reported clock); measured copy %.2f TB/s (bytes read + written)\n",
		   prop.name, major, minor, nsm, clk / 1e3, bw / 1e12);
	printf("rooflines per iteration: FP32 CUDA-core: 2nkd FLOPs at SMs x 128 x 2 x clock = %.1f TFLOP/s; "
		   "TF32 tensor-core: 2nkd at SMs x %d dense TF32 FLOP/clk/SM x clock = %.1f TFLOP/s%s; "
		   "memory: X read once + labels written (4nd + 4n bytes) at the measured copy bandwidth\n",
		   peak / 1e12, tpc, tf32 / 1e12,
		   tpc == 2048 ? " (sm_90: 4 tensor cores x 512; NVIDIA's 494.7 TFLOP/s for the H100 SXM is this at 1830 MHz)" :
		   tpc == 0 ? " (unknown for this architecture: set GC_TF32_FLOP_PER_CLK_SM)" : "");

	printf("\n| workload | path | ours ms/iter, every row screened | with the bounds (a fit's iterations) | assign ms | update ms | rest ms | FLOPs (2nkd) | min bytes | FP32 roof ms | TF32 roof ms | memory roof ms | ours of TF32 roof | ours of max(TF32, memory) | flash fp32 / ours | data = baselines' |\n");
	printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
	for (int i = 0; i < nw; i++)
	{
		bench_row  *w = &W[i];

		if (getenv("BENCH_ROWS") && !strchr(getenv("BENCH_ROWS"), 'a' + i))
		{
			/* the generator still draws the skipped rows' blobs, so that
			 * the rows run get the same data as in a full run (and as the
			 * baselines') */
			if (!w->faiss)
				free(make_blobs(w->n, w->d, w->k, &s, NULL));
			snprintf(w->err, sizeof(w->err), "skipped (BENCH_ROWS)");
			continue;
		}
		float	   *C0 = malloc(sizeof(float) * w->k * w->d);
		float	   *X = w->faiss ? make_uniform(w->n, w->d, w->k, FAISS_SEED, C0)
			: make_blobs(w->n, w->d, w->k, &s, C0);
		gc_status	st = {0};
		roofs		r = roofline(w, peak, tf32, bw);
		double		rest,
					fl;

		w->fp = fingerprint(X, w->n * w->d, C0, (int64_t) w->k * w->d);
		if (gc_kmeans_gpu_bench(X, w->n, w->d, w->k, C0, timed_iters(w), &w->t, &st) != GC_OK)
		{
			snprintf(w->err, sizeof(w->err), "%s", st.message);
			printf("| n=%lld d=%d k=%d | error: %s |\n", (long long) w->n, w->d, w->k, st.message);
		}
		else
		{
			w->ok = 1;
			rest = fmax(0, w->t.ms_iter_full - w->t.ms_assign - w->t.ms_update);
			fl = w->b[B_FLASH32].seen ? w->b[B_FLASH32].v : NAN;
			if (w->t.pruned)
				snprintf(c3, sizeof(c3), "%.3f (%s)", w->t.ms_iter,
						 w->t.pruned_same ? "labels and centres = every row's" : "NOT the same labels and centres");
			else
				snprintf(c3, sizeof(c3), "no bounds");
			printf("| n=%lld d=%d k=%d | %s | %.3f | %s | %.3f | %.3f | %.3f | %.3g | %.0f MB | %.3f | %.3f | %.3f | %.1f%% | %.1f%% | %s | %s |\n",
				   (long long) w->n, w->d, w->k, path_desc(c1, sizeof(c1), &w->t),
				   w->t.ms_iter_full, c3, w->t.ms_assign, w->t.ms_update, rest, r.flops, r.bytes / 1e6,
				   r.fp32, r.tf32, r.mem, 100 * r.tf32 / w->t.ms_iter_full,
				   100 * (isfinite(r.tf32) ? fmax(r.tf32, r.mem) : r.mem) / w->t.ms_iter_full,
				   isfinite(fl) ? (snprintf(c2, sizeof(c2), "%.2fx", fl / w->t.ms_iter_full), c2) : "n/a",
				   !w->has_data ? "no baseline data" : w->data == w->fp ? "yes" : "NO: fingerprints differ");
		}
		fflush(stdout);
		if (w->faiss)
			faiss_fit(X, w);
		free(X);
		free(C0);
	}

	/* what the screen left in each timed iteration (README's percentages) */
	printf("\nrows the tensor-core screen left, per timed iteration (decided in their windows : re-ranked over every centre):\n");
	for (int i = 0; i < nw; i++)
	{
		const bench_row *w = &W[i];
		const int	it = timed_iters(w);

		if (!w->ok)
			continue;
		printf("- n=%lld d=%d k=%d:", (long long) w->n, w->d, w->k);
		if (w->t.small_path)
			printf(" (exact path: none)");
		else
			for (int j = 0; j < it && j < 32; j++)
				printf(" %lld:%lld", (long long) w->t.iter_ties[j], (long long) w->t.iter_reranked[j]);
		printf("\n");
		if (w->t.pruned)
		{
			printf("  with the bounds, rows screened (of %lld):", (long long) w->n);
			for (int j = 0; j < it && j < 32; j++)
				printf(" %lld", (long long) w->t.iter_screened[j]);
			printf("\n");
		}
	}

	/* the table */
	printf("\n| workload | ours ms/iter | flash-kmeans fp32 | flash-kmeans fp16 | PyTorch | target | FP32 CUDA-core roofline | TF32 tensor-core roofline | memory roofline | ours of TF32 roofline |\n");
	printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
	for (int i = 0; i < nw; i++)
	{
		bench_row  *w = &W[i];
		roofs		r = roofline(w, peak, tf32, bw);

		if (!w->faiss)
		{
			double		ours = w->ok ? w->t.ms_iter : NAN;

			fmt_target(c6, sizeof(c6), ours, w->target);
			if (w->ok)
				snprintf(c1, sizeof(c1), "%s (every row screened: %s)", fmt3(c7, sizeof(c7), ours),
						 fmt3(c8, sizeof(c8), w->t.ms_iter_full));
			printf("| %s | %s | %s | %s | %s | <= %.2f: %s | %.3f ms | %.3f ms | %.3f ms | %.1f%% |\n",
				   w->label, w->ok ? c1 : w->err,
				   fmt_base(c2, sizeof(c2), &w->b[B_FLASH32], 1, ""),
				   fmt_base(c3, sizeof(c3), &w->b[B_FLASH16], 1, ""),
				   fmt_base(c4, sizeof(c4), &w->b[B_TORCH], 1, ""),
				   w->target, c6, r.fp32, r.tf32, r.mem, 100 * r.tf32 / ours);
		}
		else
		{
			/* seconds: whole call (ours), 25 iterations (the baselines, data on the GPU) */
			double		ours = w->fit_ok ? w->fit_full_ms : NAN;
			base_cell	tc = w->b[B_TORCH];

			if (w->fit_ok)
				snprintf(c1, sizeof(c1), "%s s (Lloyd %s s; %s ms/iter)", fmt3(c7, sizeof(c7), ours / 1e3),
						 fmt3(c8, sizeof(c8), w->ph.ms_lloyd / 1e3),
						 fmt3(c5, sizeof(c5), w->ok ? w->t.ms_iter : NAN));
			else
				snprintf(c1, sizeof(c1), "%s", w->err);
			fmt_base(c4, sizeof(c4), &tc, FAISS_ITERS / 1e3, " s");
			if (tc.seen && isfinite(tc.v))
				strncat(c4, " (25 x ms/iter)", sizeof(c4) - strlen(c4) - 1);
			fmt_target(c6, sizeof(c6), ours, w->target);
			printf("| %s | %s | %s | %s | %s | <= %.1f s: %s | %.2f s | %.2f s | %.3f s | %.1f%% |\n",
				   w->label, c1,
				   fmt_base(c2, sizeof(c2), &w->b[B_FLASH32_FIT], 1e-3, " s"),
				   fmt_base(c3, sizeof(c3), &w->b[B_FLASH16_FIT], 1e-3, " s"),
				   c4, w->target / 1e3, c6, FAISS_ITERS * r.fp32 / 1e3, FAISS_ITERS * r.tf32 / 1e3,
				   FAISS_ITERS * r.mem / 1e3, 100 * FAISS_ITERS * r.tf32 / ours);
		}
	}
	printf("\n(ms per Lloyd iteration, CUDA events; the baselines on the same data and initial centres, from bench_kmeans.py. "
		   "FAISS's row: ours is the whole call, host to host, random init, %d iterations; flash-kmeans one call of %d iterations on data already on the GPU; rooflines for %d iterations.)\n",
		   FAISS_ITERS, FAISS_ITERS, FAISS_ITERS);

	printf("\nWhere a target is missed:\n");
	{
		int			missed = 0;

		for (int i = 0; i < nw; i++)
		{
			bench_row  *w = &W[i];
			roofs		r = roofline(w, peak, tf32, bw);
			double		ours = w->faiss ? (w->fit_ok ? w->fit_full_ms : NAN) : (w->ok ? w->t.ms_iter : NAN);

			if (!isfinite(ours))
			{
				printf("- %s: not measured (%s)\n", w->label, w->err);
				missed++;
			}
			else if (ours > w->target)
			{
				explain_miss(w, &r, ours);
				missed++;
			}
		}
		if (!missed)
			printf("- none\n");
	}
	fflush(stdout);
	if (!getenv("BENCH_NO_FITS"))
		bench_fits(&s);
	return 0;
}
