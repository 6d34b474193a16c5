/*
 * bench_kmeans_multi.c — one k-means fit on one GPU against the same fit
 * split over every GPU of the machine (ctx->n_gpus: cuda/kmeans/kmeans_multi.cu),
 * whole calls host to host, on the same rows; the results are checked
 * equal bit for bit.
 *
 *   bench_kmeans_multi [n d k iters] ...     default: the table below
 *
 * Each case: X (n x d float32, blobs: 4k centres in [-10,10)^d plus
 * uniform noise of width 1, from a counter-based hash on all cores), the
 * initial centres rows 0, n/k, 2n/k ... (given centroids: no seeding), tol
 * 0, iters iterations.  BENCH_KM_INIT=k-means++ (a call's default),
 * k-means|| or auto (k-means|| from k = 256, else k-means++) seeds
 * instead, seed 1.
 * Per iteration: the Lloyd phase (the iterations and the final
 * re-assignment and inertia) over the iterations.  Prints a markdown
 * table; not a timed test.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>

#include "common/gpu.h"
#include "bench_blobs.h"

/* One fit; its phases; 0 on success. */
static int
fit(const gc_ctx *ctx, const float *X, int64_t n, int d, const gc_kmeans_params *p,
	gc_kmeans_result *r, gc_kmeans_gpu_phases *ph, double *ms)
{
	gc_status	st = {0};
	double		t0 = gc_now_ms();

	if (gc_kmeans_gpu(ctx, X, n, d, p, r, &st) != GC_OK)
	{
		printf("FAIL: %s\n", st.message);
		return 1;
	}
	*ms = gc_now_ms() - t0;
	gc_kmeans_gpu_last_phases(ph);
	return 0;
}

static int
run_case(int64_t n, int d, int k, int iters, const int *gpus, int ngpus, int threads)
{
	const int	m = 4096;
	const size_t xbytes = (size_t) n * d * sizeof(float);
	float	   *X = malloc(xbytes),
			   *C0 = malloc(sizeof(float) * (size_t) k * d);
	gc_kmeans_result r[2];
	gc_kmeans_gpu_phases ph[2];
	gc_ctx		one = {0},
				all = {.n_gpus = ngpus, .gpus = gpus};
	const char *ie = getenv("BENCH_KM_INIT");
	const gc_kmeans_init init = ie == NULL ? GC_INIT_CENTROIDS :
		strcmp(ie, "k-means++") == 0 ? GC_INIT_KMEANSPP :
		strcmp(ie, "k-means||") == 0 ? GC_INIT_KMEANS_PARALLEL :
		strcmp(ie, "auto") == 0 ? GC_INIT_AUTO : GC_INIT_CENTROIDS;
	const int	seeded = init != GC_INIT_CENTROIDS;
	gc_kmeans_params p = {.k = k, .max_iter = iters, .tol = 0.0, .init = init, .n_init = 1,
		.seed = 1, .init_centroids = seeded ? NULL : C0, .init_d = seeded ? 0 : d};
	double		ms[2],
				it[2];
	int			same,
				bad = 0;

	if (X == NULL || C0 == NULL)
	{
		printf("out of host memory for %lld x %d\n", (long long) n, d);
		return 1;
	}
	if (!blobs_fill(X, n, d, m, threads))
	{
		printf("out of host memory for the centres\n");
		return 1;
	}
	for (int c = 0; c < k; c++)
		memcpy(C0 + (int64_t) c * d, X + (int64_t) c * (n / k) * d, sizeof(float) * d);
	for (int v = 0; v < 2; v++)
	{
		r[v].labels = malloc(sizeof(int32_t) * n);
		r[v].centroids = malloc(sizeof(float) * (size_t) k * d);
		r[v].distance = NULL;
		bad |= r[v].labels == NULL || r[v].centroids == NULL ||
			fit(v ? &all : &one, X, n, d, &p, &r[v], &ph[v], &ms[v]);
		if (!bad)
			it[v] = ph[v].ms_lloyd / (r[v].iterations > 0 ? r[v].iterations : 1);
	}
	if (!bad)
	{
		same = memcmp(r[0].labels, r[1].labels, sizeof(int32_t) * n) == 0 &&
			memcmp(r[0].centroids, r[1].centroids, sizeof(float) * (size_t) k * d) == 0 &&
			memcmp(&r[0].inertia, &r[1].inertia, sizeof(double)) == 0 &&
			r[0].iterations == r[1].iterations;
		printf("| %lld x %d, k %d, %d it. | %.0f / %.0f / %.1f / %.0f / %.0f | %.0f / %.0f / %.1f / %.0f / %.0f | %.3f | %.3f | %s |\n",
			   (long long) n, d, k, r[0].iterations,
			   ph[0].ms_upload, ph[0].ms_init, it[0], ph[0].ms_download, ms[0],
			   ph[1].ms_upload, ph[1].ms_init, it[1], ph[1].ms_download, ms[1],
			   it[1] / it[0], ms[1] / ms[0], same ? "equal" : "DIFFER");
		bad |= !same;
	}
	for (int v = 0; v < 2; v++)
	{
		free(r[v].labels);
		free(r[v].centroids);
	}
	free(X);
	free(C0);
	return bad;
}

int
main(int argc, char **argv)
{
	static const int64_t defaults[][4] = {
		{1000000, 2, 100, 20}, {10000000, 2, 100, 20}, {1000000, 32, 100, 20},
		{4000000, 32, 256, 10}, {10000000, 32, 100, 20}, {1000000, 128, 1000, 10},
		{50000000, 32, 1000, 5}, {200000000, 32, 1000, 5}};
	int			gpus[16],
				ngpus = 0,
				bad = 0;
	const int	threads = gc_threads(NULL);

	if ((ngpus = bench_gpus(gpus, 16, "bench_kmeans_multi", threads)) == 0)
		return 1;
	printf("| workload | one GPU: upload / seeding / ms per iteration / download / whole (ms) | %d GPUs: the same | per iteration, %d GPUs / one | whole | results |\n",
		   ngpus, ngpus);
	printf("| --- | --- | --- | --- | --- | --- |\n");
	if (argc >= 5)
		for (int a = 1; a + 3 < argc; a += 4)
			bad |= run_case(atoll(argv[a]), atoi(argv[a + 1]), atoi(argv[a + 2]), atoi(argv[a + 3]),
							gpus, ngpus, threads);
	else
		for (int c = 0; c < (int) (sizeof(defaults) / sizeof(defaults[0])); c++)
			bad |= run_case(defaults[c][0], (int) defaults[c][1], (int) defaults[c][2],
							(int) defaults[c][3], gpus, ngpus, threads);
	return bad;
}
