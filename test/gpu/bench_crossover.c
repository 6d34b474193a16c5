/*
 * bench_crossover.c — where 'auto' should switch k-means from the CPU to
 * the GPU: whole gc_kmeans_cpu (all cores) and gc_kmeans_gpu calls (the
 * GPU's context already up, as in a backend that probed it; upload,
 * k-means++, Lloyd and read-back included) on blob data of growing n·k·d,
 * same parameters (k-means++, max_iter 20, tol 1e-4, seed 1).  Prints one
 * table; GC_KMEANS_GPU_MIN_WORK (src/core/gpuclust_core.h) is set from it.
 * Also prints what the first probe (CUDA initialisation) costs a backend.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

int
main(void)
{
	static const struct
	{
		int64_t		n;
		int			d,
					k;
	}			S[] = {
		{10000, 2, 8}, {100000, 2, 8}, {1000000, 2, 8},
		{10000, 2, 100}, {100000, 2, 100}, {1000000, 2, 100},
		{10000, 8, 32}, {50000, 8, 32}, {200000, 8, 32},
		{10000, 32, 8}, {100000, 32, 8}, {1000000, 32, 8},
		{2000, 32, 100}, {10000, 32, 100}, {30000, 32, 100}, {100000, 32, 100},
		{2000, 128, 100}, {10000, 128, 100}, {50000, 128, 100},
	};
	gc_cuda_device_info info;
	double		t0 = now_ms();
	uint64_t	s = 777;

	gc_cuda_probe(0, &info);
	printf("first probe (CUDA initialisation): %.1f ms; usable %d (%s)\n",
		   now_ms() - t0, info.usable, info.usable ? info.name : info.reason);
	if (!info.usable)
		return 1;
	t0 = now_ms();
	gc_cuda_probe_cached(0, &info);
	gc_cuda_probe_cached(0, &info);
	printf("cached probe (memory re-read): %.3f ms\n", (now_ms() - t0) / 2);

	printf("\n| n | d | k | n*k*d | iters | cpu ms | gpu ms | cpu/gpu |\n|---|---|---|---|---|---|---|---|\n");
	for (size_t w = 0; w < sizeof(S) / sizeof(S[0]); w++)
	{
		int64_t		n = S[w].n;
		int			d = S[w].d,
					k = S[w].k;
		int			m = 2 * k;
		float	   *X = malloc(sizeof(float) * n * d),
				   *cent = malloc(sizeof(float) * m * d),
				   *C1 = malloc(sizeof(float) * k * d),
				   *C2 = malloc(sizeof(float) * k * d);
		int32_t    *L1 = malloc(sizeof(int32_t) * n),
				   *L2 = malloc(sizeof(int32_t) * n);
		double	   *D1 = malloc(sizeof(double) * n),
				   *D2 = malloc(sizeof(double) * n);
		gc_kmeans_params p = {.k = k, .max_iter = 20, .tol = 1e-4,
			.init = GC_INIT_KMEANSPP, .n_init = 1, .seed = 1};
		gc_kmeans_result r1 = {L1, D1, C1, 0, 0, 0},
					r2 = {L2, D2, C2, 0, 0, 0};
		gc_ctx		ctx = {.n_threads = 0, .cancel_flags = {NULL, NULL}};
		gc_status	st = {0};
		double		tc = 1e30,
					tg = 1e30;
		int64_t		diff = 0;

		for (int i = 0; i < m * d; i++)
			cent[i] = (float) (20 * unif(&s) - 10);
		for (int64_t i = 0; i < n; i++)
		{
			int			c = (int) (unif(&s) * m);

			for (int j = 0; j < d; j++)
				X[i * d + j] = cent[c * d + j] + (float) (2 * unif(&s) - 1);
		}
		/* best of 2 each (the first CPU call also starts the thread pool) */
		for (int rep = 0; rep < 2; rep++)
		{
			double		a = now_ms();

			if (gc_kmeans_cpu(&ctx, X, n, d, &p, &r1, &st) != GC_OK)
			{
				printf("cpu error: %s\n", st.message);
				return 1;
			}
			a = now_ms() - a;
			tc = a < tc ? a : tc;
			a = now_ms();
			if (gc_kmeans_gpu(&ctx, X, n, d, &p, &r2, &st) != GC_OK)
			{
				printf("gpu error: %s\n", st.message);
				return 1;
			}
			a = now_ms() - a;
			tg = a < tg ? a : tg;
		}
		for (int64_t i = 0; i < n; i++)
			diff += L1[i] != L2[i];
		printf("| %lld | %d | %d | %.3g | %d | %.2f | %.2f | %.2f%s |\n",
			   (long long) n, d, k, (double) n * k * d, r1.iterations, tc, tg,
			   tc / tg, diff ? " (LABELS DIFFER)" : "");
		fflush(stdout);
		free(X);
		free(cent);
		free(C1);
		free(C2);
		free(L1);
		free(L2);
		free(D1);
		free(D2);
	}
	return 0;
}
