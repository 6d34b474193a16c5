/*
 * bench_kmeans_features.c — whole k-means fits on the GPU and on the CPU
 * (all cores) with what issue 16 brought to the GPU: sample weights, the
 * cosine metric (spherical k-means) and given initial centroids, next to
 * the plain fit, on the same data and the same given centres, max_iter
 * iterations at tol 0.  Prints the time of each fit and of an iteration,
 * the GPU's ratio to the CPU and to the plain GPU fit, and whether the two
 * devices' labels, centres and inertia are equal.  Writes the data for
 * bench_kmeans_features.py (scikit-learn and PyTorch on the same rows).
 *
 *   bench_kmeans_features [dir]     (default /tmp; BENCH_KF_N, _D, _K, _ITERS)
 *
 * BENCH_KF_FITS: the fits to run (digits 0-3 of the list below; default
 * all); BENCH_KF_NO_CPU=1: the GPU's alone (e.g. under ncu).  Each GPU fit
 * also prints its phases (gc_kmeans_gpu_last_phases): the rows the
 * assignment measured, of them those re-ranked exactly.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "common/gpu.h"

static long
env_or(const char *name, long dflt)
{
	const char *e = getenv(name);

	return e ? atol(e) : dflt;
}

static void
save(const char *dir, const char *name, const void *p, size_t bytes)
{
	char		path[512];
	FILE	   *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if ((f = fopen(path, "wb")) == NULL || fwrite(p, 1, bytes, f) != bytes)
		fprintf(stderr, "cannot write %s\n", path);
	if (f)
		fclose(f);
}

int
main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : "/tmp";
	const int64_t n = env_or("BENCH_KF_N", 1000000);
	const int	d = (int) env_or("BENCH_KF_D", 32),
				k = (int) env_or("BENCH_KF_K", 100),
				iters = (int) env_or("BENCH_KF_ITERS", 20);
	float	   *X = malloc(sizeof(float) * n * d),
			   *cent = malloc(sizeof(float) * 40 * d),
			   *C0 = malloc(sizeof(float) * k * d);
	double	   *w = malloc(sizeof(double) * n);
	uint64_t	s = 42;
	static const char *const name[] = {"plain", "weighted", "cosine", "weighted cosine"};
	double		gpu_plain = 0.0;
	gc_cuda_device_info info;

	for (int i = 0; i < 40 * d; i++)
		cent[i] = (float) (20.0 * tu_uniform(&s) - 10.0);
	for (int64_t i = 0; i < n; i++)
	{
		const int	c = (int) (tu_uniform(&s) * 40);

		for (int j = 0; j < d; j++)
		{
			double		u1 = tu_uniform(&s) + 1e-300,
						u2 = tu_uniform(&s);

			X[i * d + j] = (float) (cent[c * d + j] + 1.5 * sqrt(-2 * log(u1)) * cos(2 * M_PI * u2));
		}
		w[i] = 0.5 + 4.5 * tu_uniform(&s);	/* positive: scikit-learn's reseeding agrees */
	}
	for (int c = 0; c < k; c++)
		memcpy(C0 + (size_t) c * d, X + (size_t) (c * (n / k)) * d, sizeof(float) * d);
	save(dir, "bkf_X.f32", X, sizeof(float) * n * d);
	save(dir, "bkf_w.f64", w, sizeof(double) * n);
	save(dir, "bkf_C0.f32", C0, sizeof(float) * k * d);

	gc_cuda_probe(0, &info);
	printf("bench_kmeans_features: %lld rows x %d, k = %d, given centres, %d iterations (tol 0); GPU %s; CPU %d threads\n",
		   (long long) n, d, k, iters, info.name, gc_threads(NULL));
	printf("(GPU ms/it: its Lloyd phase over the iterations; CPU ms/it: the fit over them)\n");
	printf("%-16s %10s %10s %10s %10s %8s %9s  %s\n", "fit", "GPU ms", "GPU ms/it", "CPU ms", "CPU ms/it",
		   "CPU/GPU", "vs plain", "GPU = CPU");
	for (int v = 0; v < 4; v++)
	{
		const char *fits = getenv("BENCH_KF_FITS");
		const int	ndev = getenv("BENCH_KF_NO_CPU") ? 1 : 2;
		gc_kmeans_gpu_phases ph;
		gc_kmeans_params p = {.k = k, .max_iter = iters, .tol = 0.0, .init = GC_INIT_CENTROIDS,
			.n_init = 1, .seed = 1, .init_centroids = C0, .init_d = d,
			.weights = v & 1 ? w : NULL, .metric = v & 2 ? GC_METRIC_COSINE : GC_METRIC_EUCLIDEAN};
		gc_kmeans_result r[2];
		gc_status	st = {0};
		double		ms[2] = {0.0, 0.0};
		int64_t		same = 0;

		if (fits != NULL && strchr(fits, '0' + v) == NULL)
			continue;
		for (int dev = 0; dev < 2; dev++)
		{
			if (dev >= ndev)
			{
				r[1] = r[0];	/* GPU alone: compared with itself */
				break;
			}
			r[dev].labels = malloc(sizeof(int32_t) * n);
			r[dev].distance = malloc(sizeof(double) * n);
			r[dev].centroids = malloc(sizeof(float) * k * d);
			if (dev == 0)		/* warm: the first call pays the context */
				(void) gc_kmeans_gpu(NULL, X, n, d, &p, &r[0], &st);
			ms[dev] = gc_now_ms();
			if ((dev == 0 ? gc_kmeans_gpu : gc_kmeans_cpu) (NULL, X, n, d, &p, &r[dev], &st) != GC_OK)
			{
				printf("%s on %s: %s\n", name[v], dev ? "CPU" : "GPU", st.message);
				return 1;
			}
			ms[dev] = gc_now_ms() - ms[dev];
			if (dev == 0)
				gc_kmeans_gpu_last_phases(&ph);
		}
		for (int64_t i = 0; i < n; i++)
			same += r[0].labels[i] == r[1].labels[i];
		if (v == 0)
			gpu_plain = ms[0];
		printf("%-16s %10.1f %10.3f %10.1f %10.2f %7.1fx %8.2fx  labels %lld/%lld, centres %s, inertia %s (iterations %d/%d)\n",
			   name[v], ms[0], ph.ms_lloyd / r[0].iterations, ms[1], ms[1] / r[1].iterations, ms[1] / ms[0],
			   ms[0] / gpu_plain, (long long) same, (long long) n,
			   memcmp(r[0].centroids, r[1].centroids, sizeof(float) * k * d) == 0 ? "equal" : "differ",
			   r[0].inertia == r[1].inertia ? "equal" : "differs", r[0].iterations, r[1].iterations);
		printf("%-16s GPU phases: upload %.1f ms, init %.1f, Lloyd %.1f, download %.1f; rows measured %.1f%% of n an iteration, re-ranked %lld, tied %lld\n",
			   "", ph.ms_upload, ph.ms_init, ph.ms_lloyd, ph.ms_download,
			   100.0 * ph.rows_screened / ((double) n * (ph.total_iterations > 0 ? ph.total_iterations : 1)),
			   (long long) ph.rows_reranked, (long long) ph.rows_tied);
		for (int dev = 0; dev < ndev; dev++)
		{
			free(r[dev].labels);
			free(r[dev].distance);
			free(r[dev].centroids);
		}
	}
	free(X);
	free(cent);
	free(C0);
	free(w);
	return 0;
}
