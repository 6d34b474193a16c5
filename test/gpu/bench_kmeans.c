/*
 * bench_kmeans.c — time of one Lloyd iteration of the GPU k-means
 * (gc_kmeans_gpu_bench: assign + update + finalize + prep + the 24-byte
 * read-back, timed with CUDA events after warm-up) on the three
 * workloads, next to a roofline and the PyTorch baseline.
 *
 *   bench_kmeans [torch_results.txt]
 *
 * torch_results.txt: lines "n d k ms_per_iter" (bench_kmeans.py writes it).
 * Bandwidth is measured here (a device-to-device copy, bytes read plus
 * written); the FP32 peak is SMs x 128 lanes x 2 flops x clock.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime.h>

#include "gpu.h"

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
 * init; whole fit <= 6 s).
 */
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
	};

	printf("\n| fit | init | upload ms | init ms | Lloyd ms (iterations) | ms/iter | download ms | whole call ms | init / fit | target |\n");
	printf("|---|---|---|---|---|---|---|---|---|---|\n");
	for (int w = 0; w < 4; w++)
	{
		int64_t		n = F[w].n;
		int			d = F[w].d,
					k = F[w].k;
		float	   *X = w < 3 ? make_blobs(n, d, k, s, NULL) : malloc(sizeof(float) * n * d);
		int32_t    *lab = malloc(sizeof(int32_t) * n);
		double	   *dist = malloc(sizeof(double) * n);
		float	   *C = malloc(sizeof(float) * (size_t) k * d);
		gc_kmeans_params p = {.k = k, .max_iter = F[w].max_iter, .tol = F[w].tol,
			.init = F[w].init, .n_init = 1, .seed = 1};
		gc_kmeans_result r = {lab, dist, C, 0, 0, 0};
		gc_ctx		ctx = {.n_threads = 0, .cancel_flags = {NULL, NULL}};
		gc_status	st = {0};
		gc_kmeans_gpu_phases ph;
		double		t0,
					tot,
					fit;
		char		tgt[96];

		/* FAISS's workload: uniform data, which keeps moving for 25 iterations */
		if (w == 3)
			for (int64_t i = 0; i < n * d; i++)
				X[i] = (float) unif(s);
		t0 = now_ms();

		if (gc_kmeans_gpu(&ctx, X, n, d, &p, &r, &st) != GC_OK)
		{
			printf("| n=%lld d=%d k=%d | error: %s |\n", (long long) n, d, k, st.message);
			free(X);
			free(lab);
			free(dist);
			free(C);
			continue;
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
			   (long long) n, d, k, F[w].init == GC_INIT_RANDOM ? "random" : "k-means++",
			   ph.ms_upload, ph.ms_init, ph.ms_lloyd, ph.total_iterations,
			   ph.ms_lloyd / (ph.total_iterations > 0 ? ph.total_iterations : 1),
			   ph.ms_download, tot, 100.0 * ph.ms_init / fit, tgt);
		fflush(stdout);
		free(X);
		free(lab);
		free(dist);
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

int
main(int argc, char **argv)
{
	static const struct
	{
		int64_t		n;
		int			d,
					k;
		double		target;
	}			W[] = {{10000000, 2, 100, 0.5}, {4000000, 32, 256, 2.0}, {1000000, 128, 1000, 5.0}};
	double		torch_ms[3] = {NAN, NAN, NAN};
	int			dev = 0,
				nsm = 0,
				clk = 0;
	double		bw,
				peak;
	uint64_t	s = 12345;

	if (argc > 1)
	{
		FILE	   *f = fopen(argv[1], "r");
		long long	n;
		int			d,
					k;
		double		ms;

		while (f && fscanf(f, "%lld %d %d %lf", &n, &d, &k, &ms) == 4)
			for (int w = 0; w < 3; w++)
				if (W[w].n == n && W[w].d == d && W[w].k == k)
					torch_ms[w] = ms;
		if (f)
			fclose(f);
	}
	cudaGetDevice(&dev);
	cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev);
	cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, dev);	/* kHz */
	peak = (double) nsm * 128 * 2 * clk * 1e3;
	bw = measure_bw();
	printf("device: %d SMs, %.0f MHz; FP32 peak %.1f TFLOP/s; measured copy %.2f TB/s\n",
		   nsm, clk / 1e3, peak / 1e12, bw / 1e12);

	printf("\n| workload | ours ms/iter | assign ms | update ms | min bytes | FLOPs (2nkd) | roofline ms | roofline fraction | torch ms/iter | torch/ours | target |\n");
	printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
	for (int w = 0; w < 4; w++)
	{
		int64_t		n = w < 3 ? W[w].n : 1000000;
		int			d = w < 3 ? W[w].d : 256,
					k = w < 3 ? W[w].k : 20000;
		float	   *C0 = malloc(sizeof(float) * k * d);
		float	   *X;

		if (w == 3 && !getenv("BENCH_FAISS_ITER"))
			break;
		if (w < 3)
			X = make_blobs(n, d, k, &s, C0);
		else
		{
			/* FAISS's workload: uniform rows, the first k as centres */
			X = malloc(sizeof(float) * n * d);
			for (int64_t i = 0; i < n * d; i++)
				X[i] = (float) unif(&s);
			memcpy(C0, X, sizeof(float) * k * d);
		}
		gc_kmeans_gpu_timing t;
		gc_status	st = {0};
		double		bytes = (double) n * d * 4 + (double) n * 4;
		double		flops = 2.0 * n * k * d;
		double		roof;

		if (gc_kmeans_gpu_bench(X, n, d, k, C0, 20, &t, &st) != GC_OK)
		{
			printf("| n=%lld d=%d k=%d | error: %s |\n", (long long) n, d, k, st.message);
			continue;
		}
		roof = fmax(bytes / bw, flops / peak) * 1e3;
		printf("| n=%lld d=%d k=%d (%s, re-rank %.3f ms, finalize %.3f ms, prep %.3f ms, update %s, re-ranked rows %lld) | %.3f | %.3f | %.3f | %.0f MB | %.3g | %.3f | %.2f | %.3f | %.2fx | <= %.1f ms %s |\n",
			   (long long) n, d, k, t.small_path ? "exact path" : t.screen_mode == 13 ? "tf32 + 3xtf32 screen" : t.screen_mode == 1 ? "tf32 screen"
			   : t.screen_mode == 3 ? "3xtf32 screen" : "FP32 tiled path", t.ms_rerank, t.ms_finalize, t.ms_prep,
			   t.update_replicas > 0 ? "smem" : t.update_replicas < 0 ? "sort by label" : "global atomics", (long long) t.fallback_rows,
			   t.ms_iter, t.ms_assign, t.ms_update, bytes / 1e6, flops, roof,
			   roof / t.ms_iter, w < 3 ? torch_ms[w] : NAN, w < 3 ? torch_ms[w] / t.ms_iter : NAN,
			   w < 3 ? W[w].target : 40.0, t.ms_iter <= (w < 3 ? W[w].target : 40.0) ? "met" : "MISSED");
		if (getenv("BENCH_ITER_MODES"))
		{
			printf("  iterations (re-screened:re-ranked):");
			for (int i = 0; i < 20; i++)
				printf(" %lld:%lld", (long long) t.iter_rescreened[i], (long long) t.iter_reranked[i]);
			printf("\n");
		}
		fflush(stdout);
		free(X);
		free(C0);
	}
	if (!getenv("BENCH_NO_FITS"))
		bench_fits(&s);
	return 0;
}
