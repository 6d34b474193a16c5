/*
 * bench_kmeans_stream.c — the GPU k-means on data larger than the GPU's
 * memory (streamed: cuda/kmeans/kmeans_stream.cu): rows per second of a Lloyd
 * iteration, each iteration one pass of every chunk over PCIe, against
 * the roofline of streamed data, the pinned host-to-device bandwidth
 * measured here (and the host's pageable-to-pinned copy, the other stage
 * of the pipeline).
 *
 *   bench_kmeans_stream [n [d [k [iters]]]]     default 640000000 32 100 5
 *
 * X (n x d float32: 82 GB at the default, more than an 80 GB card holds;
 * 400M x 32 = 51 GB would fit resident there, with its seeding scratch,
 * in about 76 GB) is generated in host memory on
 * all cores (blobs: 4k centres in [-10,10)^d, uniform noise of width 1,
 * from a counter-based hash, so any thread count gives the same data).
 * The initial centres are rows 0, n/k, 2n/k ...  The budget is the GPU's
 * free memory (STREAM_BUDGET_MB lowers it); a problem that fits resident
 * in it is refused (lower n or the budget).  Not a timed test: it prints a
 * table.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>

#include <cuda_runtime.h>

#include "common/gpu.h"
#include "bench_blobs.h"

/* GB/s of pinned host -> device copies of bytes (best of 5). */
static double
pinned_h2d_gbps(size_t bytes)
{
	void	   *h = NULL,
			   *dv = NULL;
	double		best = 0;

	if (cudaHostAlloc(&h, bytes, cudaHostAllocPortable) != cudaSuccess ||
		cudaMalloc(&dv, bytes) != cudaSuccess)
		return NAN;
	memset(h, 1, bytes);
	for (int r = 0; r < 6; r++)
	{
		double		t0 = gc_now_ms();

		cudaMemcpy(dv, h, bytes, cudaMemcpyHostToDevice);
		cudaDeviceSynchronize();
		if (r > 0)
		{
			double		g = bytes / ((gc_now_ms() - t0) * 1e6);

			best = g > best ? g : best;
		}
	}
	cudaFreeHost(h);
	cudaFree(dv);
	return best;
}

/* GB/s of the host's copy of pageable X into pinned memory (gc_copy). */
static double
host_copy_gbps(const float *X, size_t bytes, int threads)
{
	void	   *h = NULL;
	double		best = 0;

	if (cudaHostAlloc(&h, bytes, cudaHostAllocPortable) != cudaSuccess)
		return NAN;
	for (int r = 0; r < 6; r++)
	{
		double		t0 = gc_now_ms();

		gc_copy(h, (const char *) X + (size_t) r * bytes, bytes, threads);
		if (r > 0)
		{
			double		g = bytes / ((gc_now_ms() - t0) * 1e6);

			best = g > best ? g : best;
		}
	}
	cudaFreeHost(h);
	return best;
}

int
main(int argc, char **argv)
{
	int64_t		n = argc > 1 ? atoll(argv[1]) : INT64_C(640000000);
	int			d = argc > 2 ? atoi(argv[2]) : 32,
				k = argc > 3 ? atoi(argv[3]) : 100,
				iters = argc > 4 ? atoi(argv[4]) : 5;
	const int	m = 4 * k;
	size_t		xbytes = (size_t) n * d * sizeof(float);
	size_t		budget = getenv("STREAM_BUDGET_MB") ?
		(size_t) atoll(getenv("STREAM_BUDGET_MB")) << 20 : 0;
	float	   *X,
			   *C0;
	gc_cuda_device_info info;
	gc_kmeans_gpu_stream_timing t;
	gc_status	st = {0};
	gc_ctx		ctx = {0};
	double		t0,
				h2d,
				hcopy,
				gbs;
	size_t		host = gc_host_memory();
	const int	threads = gc_threads(NULL);

	gc_cuda_probe(0, &info);
	if (!info.usable)
	{
		printf("no usable GPU: %s\n", info.reason);
		return 1;
	}
	printf("bench_kmeans_stream: %s, %.1f GiB (%.1f free); host: %d threads, %.1f GiB available\n",
		   info.name, info.total_mem / 1073741824.0, info.free_mem / 1073741824.0,
		   threads, host / 1073741824.0);
	if (host != SIZE_MAX && xbytes + ((size_t) 4 << 30) > host)
	{
		printf("X needs %.1f GiB of host memory, %.1f GiB available: lower n\n",
			   xbytes / 1073741824.0, host / 1073741824.0);
		return 1;
	}
	X = malloc(xbytes);
	C0 = malloc(sizeof(float) * (size_t) k * d);
	if (X == NULL || C0 == NULL)
	{
		printf("out of host memory\n");
		return 1;
	}
	t0 = gc_now_ms();
	if (!blobs_fill(X, n, d, m, threads))
	{
		printf("out of host memory\n");
		return 1;
	}
	printf("data: %lld x %d float32 = %.1f GB generated in %.1f s\n",
		   (long long) n, d, xbytes / 1e9, (gc_now_ms() - t0) / 1e3);
	for (int c = 0; c < k; c++)
		memcpy(C0 + (int64_t) c * d, X + (int64_t) c * (n / k) * d, sizeof(float) * d);

	h2d = pinned_h2d_gbps((size_t) 256 << 20);
	hcopy = xbytes >= ((size_t) 6 * (256 << 20)) ?
		host_copy_gbps(X, (size_t) 256 << 20, threads) : NAN;
	printf("roofline: pinned host-to-device %.1f GB/s; pageable-to-pinned host copy (%d threads) %.1f GB/s\n",
		   h2d, threads, hcopy);

	if (gc_kmeans_gpu_stream_bench(&ctx, X, n, d, k, C0, iters, budget, &t, &st) != GC_OK)
	{
		printf("FAIL: %s\n", st.message);
		return 1;
	}
	gbs = xbytes / (t.ms_iter * 1e6);
	printf("streamed: %lld chunks of %lld rows (%.0f MiB), %s path, update %s; setup + feature pass %.0f ms\n",
		   (long long) t.chunks, (long long) t.chunk_rows,
		   t.chunk_rows * (double) d * 4 / 1048576.0, t.small_path ? "exact" : "tiled",
		   t.update_replicas > 0 ? "shared memory" : t.update_replicas < 0 ? "sort by label" : "global atomics",
		   t.ms_setup);
	printf("| workload | ms/iter (mean, min) | rows/s per iteration | H2D GB/s achieved | of pinned H2D |\n");
	printf("| --- | --- | --- | --- | --- |\n");
	printf("| %lld x %d, k = %d, %d iterations | %.0f, %.0f | %.3g | %.1f | %.0f%% |\n",
		   (long long) n, d, k, iters, t.ms_iter, t.ms_iter_min, n / (t.ms_iter / 1e3), gbs,
		   100.0 * gbs / h2d);
	free(X);
	free(C0);
	return 0;
}
