/*
 * bench_dbscan_gpu.c — GPU DBSCAN (cuda/dbscan.cu) against the CPU path
 * (gc_dbscan_cpu, all cores) on the same machine, same data; labels
 * checked identical on every row.  Prints one table.
 *
 *   A  10M 2-d: 20 Gaussian blobs (sigma 1, centres in [0,100]^2) + 10%
 *      uniform noise; eps = 2 sigma sqrt(30 / blob size), which gives 30
 *      neighbours on average inside a blob (E|N(x)| = N_b eps^2 / (4 sigma^2)
 *      for a 2-d Gaussian); min_pts 10.
 *   B  15.6M 2-d: 50 blobs in [0,200]^2 + 10% noise, ~300 neighbours
 *      inside blobs, min_pts 100.
 *   C  1M x 16-d: 20 blobs (sigma 1, centres in [-10,10]^16), eps the
 *      median distance to the 30th neighbour (24 sampled rows), min_pts 10.
 *   D  world cities (lon, lat), eps 0.25, min_pts 10.
 *   X  crossover for 'auto' (d <= 3, grid): blobs + noise as A in 2-d and
 *      3-d, n = 10k .. 2M.
 *   Y  the brute force (d > 3) against the CPU kd-tree: blobs in 8-d and
 *      16-d, n = 5k .. 200k.
 *   T  the limits: host-to-device bandwidth from pageable and from pinned
 *      memory, device-to-host from pinned, device-to-device (HBM).
 *
 * GPU: one warm-up call, then the median of R calls (whole call: upload,
 * clustering, numbering, download, release), with the phases of the median
 * call; "cluster" = index + core + union + border (device work, no
 * transfers).  CPU: gc_dbscan_cpu on all cores, the median of R calls.
 * BENCH_SKIP_C=1 skips C; BENCH_ONLY=A,B...; BENCH_ALGO=dclust runs the
 * GPU side with CUDA-DClust (on the tree) instead of union-find.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime.h>

#include "gpu.h"

static uint64_t rs = 12345;

static uint64_t
next(void)
{
	uint64_t	z = (rs += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

static double
unif(void)
{
	return (double) (next() >> 11) * 0x1.0p-53;
}

static double
gauss(void)
{
	double		u = unif(),
				v = unif();

	return sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v);
}

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* blobs + noise: m blobs in [0, box]^d, sigma 1, frac noise in the box. */
static float *
blobs(int64_t n, int d, int m, double box, double noise_frac)
{
	float	   *X = malloc(sizeof(float) * n * d);
	double	   *c = malloc(sizeof(double) * m * d);

	for (int i = 0; i < m * d; i++)
		c[i] = box * unif();
	for (int64_t i = 0; i < n; i++)
	{
		bool		noise = unif() < noise_frac;
		int			b = (int) (unif() * m);

		for (int j = 0; j < d; j++)
			X[i * d + j] = (float) (noise ? box * unif() : c[b * d + j] + gauss());
	}
	free(c);
	return X;
}

static int
cmp_d(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return (x > y) - (x < y);
}

static int
cmp_f(const void *a, const void *b)
{
	float		x = *(const float *) a,
				y = *(const float *) b;

	return (x > y) - (x < y);
}

/* pinned host-to-device GB/s, measured by limits() (0 until then) */
static double pcie_gbs;

/* GB/s of one copy of bytes, the median of 5 after a warm-up */
static double
copy_gbs(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind)
{
	double		t[5];

	cudaMemcpy(dst, src, bytes, kind);
	for (int r = 0; r < 5; r++)
	{
		double		t0 = now_ms();

		cudaMemcpy(dst, src, bytes, kind);
		cudaDeviceSynchronize();
		t[r] = now_ms() - t0;
	}
	for (int a = 0; a < 5; a++)
		for (int b = a + 1; b < 5; b++)
			if (t[b] < t[a])
			{
				double		x = t[a];

				t[a] = t[b];
				t[b] = x;
			}
	return (double) bytes / (t[2] * 1e6);
}

/* The transfer and memory limits every row is measured against. */
static void
limits(void)
{
	const size_t bytes = (size_t) 80 << 20;	/* 10M 2-d points */
	void	   *h = malloc(bytes),
			   *hp = NULL,
			   *dv = NULL,
			   *dv2 = NULL;

	memset(h, 1, bytes);
	if (cudaMallocHost(&hp, bytes) != cudaSuccess || cudaMalloc(&dv, bytes) != cudaSuccess ||
		cudaMalloc(&dv2, bytes) != cudaSuccess)
	{
		printf("T  limits: allocation failed\n");
		return;
	}
	memset(hp, 1, bytes);
	{
		double		pageable = copy_gbs(dv, h, bytes, cudaMemcpyHostToDevice);
		double		pinned = copy_gbs(dv, hp, bytes, cudaMemcpyHostToDevice);
		double		down = copy_gbs(hp, dv, bytes, cudaMemcpyDeviceToHost);
		double		d2d = 2.0 * copy_gbs(dv2, dv, bytes, cudaMemcpyDeviceToDevice);

		pcie_gbs = pinned;
		printf("T  limits (80 MB): host-to-device pageable %.1f GB/s (%.2f ms), pinned %.1f GB/s (%.2f ms); "
			   "device-to-host pinned %.1f GB/s; device-to-device %.0f GB/s (read + write)\n",
			   pageable, bytes / (pageable * 1e6), pinned, bytes / (pinned * 1e6), down, d2d);
	}
	cudaFreeHost(hp);
	cudaFree(dv);
	cudaFree(dv2);
	free(h);
}

static bool
wanted(const char *tag)
{
	const char *o = getenv("BENCH_ONLY");

	return o == NULL || strstr(o, tag) != NULL;
}

static void
run(const char *tag, const char *what, const float *X, int64_t n, int d,
	double eps, int64_t min_pts, int R, int Rcpu)
{
	gc_dbscan_params p = {.eps = eps, .min_pts = min_pts};
	gc_dbscan_params pg = p;
	if (getenv("BENCH_ALGO") && strcmp(getenv("BENCH_ALGO"), "dclust") == 0)
		pg.algorithm = GC_DBSCAN_DCLUST;
	int32_t    *lc = malloc(sizeof(int32_t) * n),
			   *lg = malloc(sizeof(int32_t) * n);
	uint8_t    *cc = malloc(n),
			   *cg = malloc(n);
	gc_status	st = {0};
	double		tg[16],
				tc[16];
	gc_dbscan_gpu_phases ph[16],
				pm;
	int64_t		diff = 0,
				noise = 0;
	int32_t		maxl = -1;
	double		gmed,
				cmed;

	/* warm-up (R > 1), or a check that the GPU runs at all */
	if (R > 1 && gc_dbscan_gpu_index(NULL, X, n, d, &pg, GC_DBSCAN_GPU_AUTO, NULL, lg, cg, &st) != GC_OK)
	{
		printf("%s: GPU failed: %s\n", tag, st.message);
		return;
	}
	for (int r = 0; r < R; r++)
	{
		double		t0 = now_ms();

		gc_dbscan_gpu_index(NULL, X, n, d, &pg, GC_DBSCAN_GPU_AUTO, NULL, lg, cg, &st);
		tg[r] = now_ms() - t0;
		gc_dbscan_gpu_last_phases(&ph[r]);
	}
	for (int r = 0; r < Rcpu; r++)
	{
		double		t0 = now_ms();

		if (gc_dbscan_cpu(NULL, X, n, d, &p, lc, cc, &st) != GC_OK)
			printf("%s: CPU failed: %s\n", tag, st.message);
		tc[r] = now_ms() - t0;
	}
	for (int64_t i = 0; i < n; i++)
	{
		diff += (lc[i] != lg[i]) | (cc[i] != cg[i]);
		noise += lg[i] == GC_NOISE;
		maxl = lg[i] > maxl ? lg[i] : maxl;
	}
	/* median GPU call and its phases */
	{
		double		s[16];
		int			mi = 0;

		memcpy(s, tg, sizeof(double) * R);
		qsort(s, R, sizeof(double), cmp_d);
		gmed = s[R / 2];
		for (int r = 0; r < R; r++)
			if (tg[r] == gmed)
				mi = r;
		pm = ph[mi];
		memcpy(s, tc, sizeof(double) * Rcpu);
		qsort(s, Rcpu, sizeof(double), cmp_d);
		cmed = s[Rcpu / 2];
	}
	{
		double		cl = pm.ms_index + pm.ms_core + pm.ms_union + pm.ms_border;
		double		io = (double) n * d * 4 + (double) n * 5;	/* bytes up + down */

		printf("%-2s %-34s n=%-9lld d=%-2d eps=%-8.4g mp=%-4lld %-5s | GPU call %9.2f ms "
			   "(upload %6.2f, cluster %8.2f = idx %6.2f core %7.2f union %7.2f border %6.2f; "
			   "number %5.2f, download %6.2f, free %5.2f; of all, cudaMalloc %5.2f) "
			   "| transfer floor %6.2f ms | CPU %9.2f ms | CPU/GPU %6.2f (cluster alone %6.2f) "
			   "| clusters %d noise %lld | diff %lld\n",
			   tag, what, (long long) n, d, eps, (long long) min_pts, pm.grid ? "grid" : "brute",
			   gmed, pm.ms_upload, cl, pm.ms_index, pm.ms_core, pm.ms_union, pm.ms_border,
			   pm.ms_number, pm.ms_download, pm.ms_free, pm.ms_alloc,
			   pcie_gbs > 0 ? io / (pcie_gbs * 1e6) : 0.0,
			   cmed, cmed / gmed, cmed / cl, maxl + 1, (long long) noise, (long long) diff);
	}
	fflush(stdout);
	free(lc);
	free(lg);
	free(cc);
	free(cg);
}

int
main(void)
{
	gc_cuda_device_info info;
	double		t0 = now_ms();

	setvbuf(stdout, NULL, _IOLBF, 0);
	gc_cuda_probe(0, &info);
	if (!info.usable)
	{
		printf("no usable GPU: %s\n", info.reason);
		return 1;
	}
	printf("device %s; CUDA initialisation %.1f ms; CPU threads: all\n", info.name, now_ms() - t0);
	limits();

	if (wanted("A"))
	{
		int64_t		n = 10000000;
		float	   *X = blobs(n, 2, 20, 100.0, 0.10);
		double		nb = 0.9 * n / 20;

		run("A", "10M 2-d, 20 blobs + 10% noise", X, n, 2, 2.0 * sqrt(30.0 / nb), 10, 5, 2);
		free(X);
	}
	if (wanted("B"))
	{
		int64_t		n = 15600000;
		float	   *X = blobs(n, 2, 50, 200.0, 0.10);
		double		nb = 0.9 * n / 50;

		run("B", "15.6M 2-d, 50 blobs + 10% noise", X, n, 2, 2.0 * sqrt(300.0 / nb), 100, 5, 2);
		free(X);
	}
	if (wanted("D"))
	{
		FILE	   *f = popen("gzip -dc test/data/world_cities.csv.gz", "r");
		char		line[4096];
		int64_t		n = 0;
		float	   *X = malloc(sizeof(float) * 2 * 200000);

		if (f && fgets(line, sizeof(line), f))
			while (fgets(line, sizeof(line), f) != NULL && n < 200000)
			{
				char	   *c3 = strrchr(line, ','),
						   *c2,
						   *c1;

				if (!c3)
					continue;
				*c3 = 0;
				if (!(c2 = strrchr(line, ',')))
					continue;
				*c2 = 0;
				if (!(c1 = strrchr(line, ',')))
					continue;
				X[2 * n] = (float) strtod(c2 + 1, NULL);
				X[2 * n + 1] = (float) strtod(c1 + 1, NULL);
				n++;
			}
		if (f)
			pclose(f);
		run("D", "world cities (lon, lat)", X, n, 2, 0.25, 10, 9, 5);
		free(X);
	}
	if (wanted("X"))
	{
		static const int64_t ns[] = {1000, 2000, 5000, 10000, 20000, 50000, 100000,
		200000, 500000, 1000000, 2000000};

		for (int d = 2; d <= 3; d++)
			for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
			{
				int64_t		n = ns[i];
				float	   *X = blobs(n, d, 20, 100.0, 0.10);
				double		nb = 0.9 * n / 20;
				char		w[64];

				if (d == 3 && n > 1000000)
					continue;
				/* 2-d: 30 neighbours in a blob (see A); 3-d: the ball of
				 * radius eps holds 30 at the blob's centre density */
				snprintf(w, sizeof(w), "crossover %d-d %lldk", d, (long long) (n / 1000));
				run("X", w, X, n, d, d == 2 ? 2.0 * sqrt(30.0 / nb) :
					cbrt(30.0 / nb * pow(2.0 * 3.141592653589793, 1.5) * 3.0 / (4.0 * 3.141592653589793)),
					10, 9, 5);
				free(X);
			}
	}
	if (wanted("Y"))
	{
		static const int64_t ns[] = {5000, 20000, 50000, 100000, 200000};
		static const int ds[] = {8, 16};

		for (size_t a = 0; a < 2; a++)
			for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
			{
				int64_t		n = ns[i];
				int			d = ds[a];
				float	   *X = blobs(n, d, 20, 20.0, 0.05);
				char		w[64];

				snprintf(w, sizeof(w), "brute vs kd-tree %d-d %lldk", d, (long long) (n / 1000));
				run("Y", w, X, n, d, 0.8 * sqrt((double) d), 10, 5, 3);
				free(X);
			}
	}
	if (wanted("C") && !getenv("BENCH_SKIP_C"))
	{
		int64_t		n = 1000000;
		int			d = 16;
		float	   *X = blobs(n, d, 20, 20.0, 0.0);
		float		kd[24],
					best[31];

		for (int64_t i = 0; i < n * d; i++)
			X[i] -= 10.0f;
		for (int s = 0; s < 24; s++)
		{
			int64_t		i = (int64_t) (unif() * n);
			int			nb = 0;

			for (int64_t j = 0; j < n; j++)
			{
				float		dd = gc_dist2(X + i * d, X + j * d, d);
				int			t;

				if (nb == 31 && dd >= best[30])
					continue;
				t = nb < 31 ? nb++ : 30;
				while (t > 0 && best[t - 1] > dd)
				{
					best[t] = best[t - 1];
					t--;
				}
				best[t] = dd;
			}
			kd[s] = sqrtf(best[30]);
		}
		qsort(kd, 24, sizeof(float), cmp_f);
		run("C", "1M 16-d, 20 blobs", X, n, d, kd[12], 10, 1, 1);
		free(X);
	}
	return 0;
}
