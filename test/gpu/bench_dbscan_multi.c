/*
 * bench_dbscan_multi.c — one DBSCAN call on one GPU against the same call
 * split over every GPU of the machine (ctx->n_gpus:
 * cuda/dbscan/dbscan_multi.cu), whole calls host to host, on the same
 * rows; labels and core flags checked equal on every row.
 *
 *   bench_dbscan_multi [n d] ...     default: the table below
 *
 * Each case: m = max(20, n / 500,000) Gaussian blobs (sigma 1, centres
 * uniform in [0, L)^d with L = 100 (m / 20)^(1/d), so the blobs stay as
 * far apart as bench_dbscan_gpu's row A) + 10% uniform noise over the box,
 * from a counter-based hash on all cores; eps gives about 30 neighbours
 * inside a blob at its centre density (2-d: 2 sqrt(30 / blob size), as
 * row A), min_pts 10.  Median of three calls after a warm-up, each way,
 * each GPU keeping its memory pool between calls as the GPU worker's do.
 * Prints a markdown table; not a timed test.  First, each figure's
 * limit: the host's links to the GPUs, pinned copies to and from each GPU
 * alone and every GPU at once, and the pinned rings the calls copy through
 * (links()).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>
#include <pthread.h>

#include <cuda_runtime.h>

#include "common/gpu.h"
#include "bench_blobs.h"

#define CALLS 3

static void
make_rows(float *X, int64_t n, int d, int threads, double *eps)
{
	const int64_t m = n / 500000 > 20 ? n / 500000 : 20;
	const double L = 100.0 * pow((double) m / 20.0, 1.0 / d);
	const double nb = 0.9 * (double) n / (double) m;
	const double pi = 3.141592653589793;

	/* the ball of radius eps at a blob's centre holds 30 rows:
	 * nb (2 pi)^(-d/2) V_d eps^d = 30 */
	*eps = pow(30.0 / nb * pow(2.0 * pi, d / 2.0) * tgamma(d / 2.0 + 1.0) / pow(pi, d / 2.0),
			   1.0 / d);
#pragma omp parallel for schedule(static) num_threads(threads)
	for (int64_t i = 0; i < n; i++)
	{
		uint64_t	h = blobs_mix((uint64_t) i);
		const int64_t c = (int64_t) (h % (uint64_t) m);
		const int	noise = blobs_u01(blobs_mix(h ^ UINT64_C(0x5bd1e995))) < 0.10;
		float	   *x = X + i * d;

		for (int j = 0; j < d; j++)
		{
			uint64_t	hc = blobs_mix(UINT64_C(1) << 62 | (uint64_t) (c * d + j));
			uint64_t	h1 = blobs_mix(h + 2 * (uint64_t) j + 1),
						h2 = blobs_mix(h + 2 * (uint64_t) j + 2);

			if (noise)
				x[j] = (float) (L * blobs_u01(h1));
			else
				x[j] = (float) (L * blobs_u01(hc) +
								sqrt(-2.0 * log(blobs_u01(h1) + 1e-300)) * cos(2.0 * pi * blobs_u01(h2)));
		}
	}
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return x < y ? -1 : x > y;
}

/* CALLS calls after a warm-up: the median's time and phases; 0 on success. */
static int
calls(const gc_ctx *ctx, const float *X, int64_t n, int d, const gc_dbscan_params *p,
	  int32_t *labels, uint8_t *core, double *ms, gc_dbscan_gpu_phases *ph)
{
	double		t[CALLS];
	gc_dbscan_gpu_phases all[CALLS];

	for (int c = -1; c < CALLS; c++)
	{
		gc_status	st = {0};
		double		t0 = gc_now_ms();

		if (gc_dbscan_gpu(ctx, X, n, d, p, labels, core, &st) != GC_OK)
		{
			printf("FAIL: %s\n", st.message);
			return 1;
		}
		if (c < 0)
			continue;
		t[c] = gc_now_ms() - t0;
		gc_dbscan_gpu_last_phases(&all[c]);
	}
	{
		double		s[CALLS];

		memcpy(s, t, sizeof(s));
		qsort(s, CALLS, sizeof(double), cmp_double);
		*ms = s[CALLS / 2];
		for (int c = 0; c < CALLS; c++)
			if (t[c] == *ms)
				*ph = all[c];
	}
	return 0;
}

static double
cluster_ms(const gc_dbscan_gpu_phases *p)
{
	return p->ms_index + p->ms_core + p->ms_union + p->ms_border + p->ms_number;
}

/* What the phases leave out of the whole call (the stream, the plan, the
 * threads' hand-offs), with the release. */
static double
rest_ms(const gc_dbscan_gpu_phases *p, double whole)
{
	return whole - p->ms_upload - p->ms_split - cluster_ms(p) - p->ms_merge - p->ms_download;
}

static int
run_case(int64_t n, int d, const int *gpus, int ngpus, int threads)
{
	float	   *X = malloc(sizeof(float) * (size_t) n * d);
	int32_t    *lab[2] = {malloc(sizeof(int32_t) * n), malloc(sizeof(int32_t) * n)};
	uint8_t    *core[2] = {malloc(n), malloc(n)};
	gc_ctx		one = {0},
				all = {.n_gpus = ngpus, .gpus = gpus};
	gc_dbscan_params p = {.min_pts = 10};
	gc_dbscan_gpu_phases ph[2];
	double		ms[2];
	int			bad = 0,
				same;

	if (X == NULL || !lab[0] || !lab[1] || !core[0] || !core[1])
	{
		printf("out of host memory for %lld x %d\n", (long long) n, d);
		return 1;
	}
	make_rows(X, n, d, threads, &p.eps);
	for (int v = 0; v < 2 && !bad; v++)
		bad |= calls(v ? &all : &one, X, n, d, &p, lab[v], core[v], &ms[v], &ph[v]);
	if (!bad)
	{
		same = memcmp(lab[0], lab[1], sizeof(int32_t) * n) == 0 && memcmp(core[0], core[1], n) == 0;
		printf("| %lld x %d, eps %.4g | %.0f / %.0f / %.0f / %.0f (%.0f) / %.0f | %.0f / %.0f / %.0f / %.0f / %.0f / %.0f (%.0f) / %.0f | %.2f | %d | %.3f | %s |\n",
			   (long long) n, d, p.eps,
			   ph[0].ms_upload, cluster_ms(&ph[0]), ph[0].ms_download, rest_ms(&ph[0], ms[0]),
			   ph[0].ms_free, ms[0],
			   ph[1].ms_upload, ph[1].ms_split, cluster_ms(&ph[1]), ph[1].ms_merge,
			   ph[1].ms_download, rest_ms(&ph[1], ms[1]), ph[1].ms_free, ms[1],
			   (double) ph[1].held / (double) n, ph[1].gpus,
			   ms[1] / ms[0], same ? "equal" : "DIFFER");
		bad |= !same;
	}
	free(X);
	for (int v = 0; v < 2; v++)
	{
		free(lab[v]);
		free(core[v]);
	}
	return bad;
}

#define LINK_BYTES ((size_t) 1 << 30)

/* one GPU's buffers for links() */
typedef struct link_gpu
{
	int			dev;
	void	   *host,			/* pinned */
			   *dev_buf;
	cudaStream_t s;
	int			threads;		/* the ring's copies: its host threads */
	double		ms_up,			/* the ring's, best of three */
				ms_down;
	int			bad;
} link_gpu;

/* The pinned copy's direction, on GPUs L[0 .. m): every one at once, the
 * best wall time of three, ms. */
static double
link_copy(link_gpu *L, int m, bool up)
{
	double		best = 1e30;

	for (int r = 0; r < 3; r++)
	{
		double		t0 = omp_get_wtime(),
					t;

		for (int g = 0; g < m; g++)
		{
			cudaSetDevice(L[g].dev);
			if (up)
				cudaMemcpyAsync(L[g].dev_buf, L[g].host, LINK_BYTES, cudaMemcpyHostToDevice, L[g].s);
			else
				cudaMemcpyAsync(L[g].host, L[g].dev_buf, LINK_BYTES, cudaMemcpyDeviceToHost, L[g].s);
		}
		for (int g = 0; g < m; g++)
			cudaStreamSynchronize(L[g].s);
		t = (omp_get_wtime() - t0) * 1e3;
		best = t < best ? t : best;
	}
	return best;
}

/* a round trip of LINK_BYTES pageable bytes through GPU L's pinned ring */
static void *
link_ring(void *arg)
{
	link_gpu   *L = arg;
	char		msg[160];

	L->ms_up = L->ms_down = 1e30;
	cudaSetDevice(L->dev);
	for (int r = 0; r < 3 && !L->bad; r++)
	{
		double		u,
					w;

		L->bad = gc_xfer_test(LINK_BYTES, 1, L->threads, 11 + r, &u, &w, msg, sizeof(msg));
		L->ms_up = u < L->ms_up ? u : L->ms_up;
		L->ms_down = w < L->ms_down ? w : L->ms_down;
	}
	return NULL;
}

/* the rings of GPUs L[0 .. m) at once, each on a host thread of its own */
static void
link_rings(link_gpu *L, int m, double *up, double *down)
{
	pthread_t	th[16];

	*up = *down = 0;
	for (int g = 0; g < m; g++)
		pthread_create(&th[g], NULL, link_ring, &L[g]);
	for (int g = 0; g < m; g++)
	{
		pthread_join(th[g], NULL);
		*up = L[g].ms_up > *up ? L[g].ms_up : *up;
		*down = L[g].ms_down > *down ? L[g].ms_down : *down;
	}
}

/*
 * The limits of the calls' copies, 1 GiB a GPU: pinned copies to and from
 * each GPU alone and every GPU at once (GB/s in all), and the same through
 * the pinned rings (pageable memory, as a call's rows; each GPU's ring
 * with the call's threads, as a split's).
 */
static void
links(const int *gpus, int ngpus, int threads)
{
	link_gpu	L[16];
	int			m = 0;
	const double gb = (double) LINK_BYTES / 1e6;	/* GB/s from ms */

	for (int g = 0; g < ngpus && m < 16; g++)
	{
		bool		seen = false;

		for (int h = 0; h < m; h++)
			seen |= L[h].dev == gpus[g];
		if (seen)
			continue;
		memset(&L[m], 0, sizeof(L[m]));
		L[m].dev = gpus[g];
		cudaSetDevice(L[m].dev);
		if (cudaHostAlloc(&L[m].host, LINK_BYTES, cudaHostAllocPortable) != cudaSuccess ||
			cudaMalloc(&L[m].dev_buf, LINK_BYTES) != cudaSuccess ||
			cudaStreamCreateWithFlags(&L[m].s, cudaStreamNonBlocking) != cudaSuccess)
		{
			printf("links: allocation failed on GPU %d\n", L[m].dev);
			return;
		}
		memset(L[m].host, 1, LINK_BYTES);
		m++;
	}
	printf("links (1 GiB a GPU, best of three): pinned host to GPU");
	for (int g = 0; g < m; g++)
		printf(" %d alone %.1f GB/s,", L[g].dev, gb / link_copy(&L[g], 1, true));
	printf(" all %d at once %.1f GB/s in all; GPU to pinned host", m, m * gb / link_copy(L, m, true));
	for (int g = 0; g < m; g++)
		printf(" %d alone %.1f GB/s,", L[g].dev, gb / link_copy(&L[g], 1, false));
	printf(" all at once %.1f GB/s in all\n", m * gb / link_copy(L, m, false));
	{
		double		up,
					down;

		L[0].threads = threads;
		link_rings(L, 1, &up, &down);
		printf("links: the pinned ring (pageable memory, %d host threads): GPU %d alone up %.1f GB/s, down %.1f GB/s",
			   threads, L[0].dev, gb / up, gb / down);
		for (int g = 0; g < m; g++)
			L[g].threads = threads;
		link_rings(L, m, &up, &down);
		printf("; all %d at once up %.1f GB/s, down %.1f GB/s in all%s\n", m,
			   m * gb / up, m * gb / down, L[0].bad || L[m - 1].bad ? " (A COPY DIFFERED)" : "");
	}
	for (int g = 0; g < m; g++)
	{
		cudaSetDevice(L[g].dev);
		cudaStreamDestroy(L[g].s);
		cudaFree(L[g].dev_buf);
		cudaFreeHost(L[g].host);
	}
	cudaSetDevice(gpus[0]);
}

int
main(int argc, char **argv)
{
	static const int64_t defaults[][2] = {
		{10000000, 2}, {50000000, 2}, {200000000, 2}, {20000000, 3}, {10000000, 8}};
	int			gpus[16],
				ngpus = 0,
				bad = 0;
	const int	threads = gc_threads(NULL);

	if ((ngpus = bench_gpus(gpus, 16, "bench_dbscan_multi", threads)) == 0)
		return 1;
	links(gpus, ngpus, threads);
	/* each GPU keeps its pool's memory from call to call, as the GPU
	 * worker's do (the worker is what splits a call) */
	for (int g = ngpus - 1; g >= 0; g--)
	{
		gc_cuda_device_info info;

		gc_cuda_probe(gpus[g], &info);	/* GPU g current; GPU 0 last */
		gc_cuda_keep_memory((size_t) 1 << 40);
	}
	printf("| workload | one GPU: upload / cluster / download / rest (of which release) / whole (ms) | %d GPUs: upload / split / cluster (slowest slab) / merge / download / rest (release) / whole | rows held / n | GPUs used | whole, split / one | results |\n",
		   ngpus);
	printf("| --- | --- | --- | --- | --- | --- | --- |\n");
	if (argc >= 3)
		for (int a = 1; a + 1 < argc; a += 2)
			bad |= run_case(atoll(argv[a]), atoi(argv[a + 1]), gpus, ngpus, threads);
	else
		for (int c = 0; c < (int) (sizeof(defaults) / sizeof(defaults[0])); c++)
			bad |= run_case(defaults[c][0], (int) defaults[c][1], gpus, ngpus, threads);
	return bad;
}
