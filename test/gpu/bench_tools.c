/*
 * bench_tools.c — the cores of gpu_kdistance and gpu_silhouette on the GPU
 * (gc_kdistance_on_gpu, gc_silhouette_on_gpu) against the CPU (gc_kdistance_cpu,
 * gc_silhouette_cpu on every core), on the same rows.  Prints each call's
 * time (GPU: the median of 3 after a warm-up call, CUDA already started;
 * CPU: one call), the speed-up, whether the two results are bit for bit
 * equal (their contract), and the GPU figure against the device's
 * arithmetic peak read from it.  Writes the rows and our results for
 * bench_tools.py (scikit-learn and PyTorch on the same rows).
 *
 *   bench_tools [dir]     (default /tmp)
 *
 * k-distances: blobs (Gaussian clusters of their own widths plus 5% rows of
 * uniform noise, a DBSCAN input) of 100k and 1M rows in 2-d (k = 10; and
 * k = 100 on the 1M), 1M in 8-d and 200k in 32-d (k = 10).  The distances
 * the index spares are not known, so the GPU figure is set against brute
 * force: n² d 3 FLOP (a subtraction, a product and a sum per feature of
 * every pair), over the GPU's time, next to the FP32 peak (SMs x clock x
 * FP32 lanes; one operation a lane and cycle: the code is built with
 * -fmad=false, so no FMA).  Above 1x, the index beats any brute force.
 *
 * silhouette: r = 5k, 20k (GC_SILHOUETTE_EXACT_ROWS) and 100k rows of 10
 * Gaussian blobs (their labels), d = 2, 32 and 128, exact (sample_size =
 * r).  Work: r² (3d) FP64 FLOP and r² FP64 square roots; the achieved FP64
 * rate (square roots left out) against the FP64 peak, SMs x clock x FP64
 * lanes (64 an SM on H100, A100's 32; no FMA either).
 *
 * crossover: small problems (k-distances n 1k to 100k in 2-d, 8-d, 32-d;
 * silhouettes r 100 to 3k in 2-d, 32-d, 128-d), CPU ms / GPU ms, where
 * dispatch.c's thresholds for 'auto' come from.
 *
 * BENCH_TOOLS_SCALE (default 1) multiplies every n and r (a quick run: 0.01);
 * BENCH_TOOLS_CPU_S (default 30): a CPU silhouette estimated (from the
 * previous r at that d, as r²) to take longer is skipped, and any CPU call
 * is stopped through its cancel flag after twice as long (a GPU warm-up
 * longer than it is followed by one timed call, not 3);
 * BENCH_TOOLS_NO_CPU=1: the GPU's alone.  Exit status 1 when a GPU call
 * failed or differs from the CPU.
 *
 * Files in dir (little-endian), for bench_tools.py: bt_run.json (this run's
 * id, the device, its peaks); per k-distance data set bt_kd_<n>x<d>.f32
 * (n x d float32), per case bt_kd_<n>x<d>_k<k>.f32 (the GPU's kdist2, the
 * CPU's when the GPU failed) and its sidecar .json (n, d, k, files, times);
 * per silhouette d bt_sil_d<d>.f32 and .i32 (the largest r's rows and
 * labels: a case of r rows takes the first r), per case bt_sil_r<r>_d<d>.json
 * (r, d, m, score, times).  Every sidecar carries the run id.
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "testutil.h"
#include "common/gpu.h"

#define NOISE_FRACTION 0.05
#define KD_BLOBS 20
#define SIL_BLOBS 10

/* The device and its peaks (operations a second, no FMA). */
typedef struct hw_info
{
	bool		usable;
	char		name[256];		/* or why it cannot be used */
	double		mem_gib;
	int			sms,
				cc_major,
				cc_minor,
				fp32_lanes,		/* per SM */
				fp64_lanes;
	double		ghz,
				fp32_peak,
				fp64_peak;
} hw_info;

/* What every case needs. */
typedef struct bench
{
	const char *dir;
	const char *run_id;
	double		scale;
	int			cpu_s;			/* skip a CPU call estimated longer; stop one at twice */
	bool		no_cpu;
	gc_ctx		ctx;			/* all cores, cancel_flag (testutil.h) polled */
	hw_info		hw;
	int			seq;			/* cases written so far */
} bench;

/* A case: k-distances (labels NULL) or a silhouette of n rows (exact). */
typedef struct tool_case
{
	const float *X;
	int64_t		n;
	int			d;
	int64_t		k;				/* k-distances */
	const int32_t *labels;		/* silhouette: SIL_BLOBS clusters */
	float	   *kdist2;			/* the results */
	gc_silhouette_result *sil;
} tool_case;

/* A CPU column: measured, skipped by its estimate, or stopped. */
typedef struct cpu_time
{
	double		ms;				/* >= 0: measured */
	double		est_s;			/* > 0: skipped, estimated this long */
	bool		stopped;		/* past 2 cpu_s: cancelled */
	bool		failed;
} cpu_time;

static double
env_double(const char *name, double dflt)
{
	const char *e = getenv(name);

	return e != NULL && *e != '\0' ? atof(e) : dflt;
}

static int64_t
scaled(const bench *b, int64_t n, int64_t floor)
{
	int64_t		s = (int64_t) llround((double) n * b->scale);

	return s > floor ? s : floor;
}

static FILE *
open_in(const char *dir, const char *name, const char *mode)
{
	char		path[512];
	FILE	   *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if ((f = fopen(path, mode)) == NULL)
		fprintf(stderr, "cannot write %s\n", path);
	return f;
}

static void
write_raw(const char *dir, const char *name, const void *p, size_t bytes)
{
	FILE	   *f = open_in(dir, name, "wb");

	if (f != NULL)
	{
		if (fwrite(p, 1, bytes, f) != bytes)
			fprintf(stderr, "short write of %s/%s\n", dir, name);
		fclose(f);
	}
}

/* ", key: v" in JSON, v exactly (17 digits), or null when !has. */
static void
json_num(FILE *f, const char *key, double v, bool has)
{
	if (has)
		fprintf(f, ", \"%s\": %.17g", key, v);
	else
		fprintf(f, ", \"%s\": null", key);
}

static void
on_alarm(int sig)
{
	(void) sig;
	cancel_flag = 1;
}

/*
 * n rows of d features: nb Gaussian blobs, centres uniform in [-10, 10)^d,
 * each blob its own width (sigma in [0.3, 2)), the blob drawn per row; a
 * fraction noise of the rows uniform in [-15, 15)^d instead.  labels (may
 * be NULL): the blob, -1 for noise.  testutil.h's generator throughout.
 */
static float *
make_blobs(uint64_t seed, int64_t n, int d, int nb, double noise,
		   int32_t *labels)
{
	float	   *X = malloc(sizeof(float) * (size_t) n * d),
			   *ctr = malloc(sizeof(float) * (size_t) nb * d);
	double	   *sigma = malloc(sizeof(double) * nb);
	uint64_t	s = seed;

	for (int i = 0; i < nb * d; i++)
		ctr[i] = (float) (20.0 * tu_uniform(&s) - 10.0);
	for (int c = 0; c < nb; c++)
		sigma[c] = 0.3 + 1.7 * tu_uniform(&s);
	for (int64_t i = 0; i < n; i++)
	{
		const bool	is_noise = tu_uniform(&s) < noise;
		const int	c = (int) (tu_next(&s) % (uint64_t) nb);

		for (int j = 0; j < d; j++)
		{
			if (is_noise)
				X[i * d + j] = (float) (30.0 * tu_uniform(&s) - 15.0);
			else
			{
				/* Box-Muller: one normal deviate from two uniforms */
				double		r = sqrt(-2.0 * log(tu_uniform(&s) + 1e-300));

				X[i * d + j] = (float) (ctr[c * d + j] + sigma[c] * r * cos(2.0 * M_PI * tu_uniform(&s)));
			}
		}
		if (labels != NULL)
			labels[i] = is_noise ? -1 : c;
	}
	free(ctr);
	free(sigma);
	return X;
}

/* FP32 and FP64 lanes an SM by compute capability (no FMA: an op a cycle). */
static void
lanes_for(int major, int minor, int *fp32, int *fp64)
{
	*fp32 = 128;
	*fp64 = 2;					/* the gaming and workstation parts */
	if ((major == 7 && minor == 0) || (major == 8 && minor == 0) || major == 6)
	{
		*fp32 = 64;				/* V100, A100 (P100 has 64 FP32, 32 FP64) */
		*fp64 = 32;
	}
	else if (major == 9 || (major == 10 && minor == 0))
		*fp64 = 64;				/* H100/H200, B200 */
}

/* Starts CUDA (gc_cuda_probe) and reads the device's peaks. */
static void
read_hw(hw_info *h)
{
	gc_cuda_device_info info;
	struct cudaDeviceProp prop;
	int			khz = 0;

	memset(h, 0, sizeof(*h));
	gc_cuda_probe(0, &info);
	if (!info.usable)
	{
		snprintf(h->name, sizeof(h->name), "no GPU: %s", info.reason);
		return;
	}
	snprintf(h->name, sizeof(h->name), "%s", info.name);
	h->mem_gib = info.total_mem / 1073741824.0;
	/* the clock is an attribute: CUDA 13's cudaDeviceProp has no clockRate */
	if (cudaGetDeviceProperties(&prop, info.device_id) != cudaSuccess ||
		cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, info.device_id) != cudaSuccess)
	{
		snprintf(h->name, sizeof(h->name), "%s (its properties cannot be read)", info.name);
		return;
	}
	h->usable = true;
	h->sms = prop.multiProcessorCount;
	h->cc_major = prop.major;
	h->cc_minor = prop.minor;
	h->ghz = khz * 1e-6;
	lanes_for(h->cc_major, h->cc_minor, &h->fp32_lanes, &h->fp64_lanes);
	h->fp32_peak = (double) h->sms * h->ghz * 1e9 * h->fp32_lanes;
	h->fp64_peak = (double) h->sms * h->ghz * 1e9 * h->fp64_lanes;
}

/* One call of the case on either device (0: GPU, 1: CPU). */
static gc_code
tool_call(const bench *b, const tool_case *c, int dev, gc_status *st)
{
	if (c->labels == NULL)
		return (dev == 0 ? gc_kdistance_on_gpu : gc_kdistance_cpu) (&b->ctx, c->X, c->n, c->d, c->k,
																 c->kdist2, st);
	/* sample_size = n: every row scored, exactly */
	return (dev == 0 ? gc_silhouette_on_gpu : gc_silhouette_cpu) (&b->ctx, c->X, c->n, c->d, c->labels,
															   SIL_BLOBS, c->n, 1, c->sil, st);
}

/*
 * The GPU: a warm-up call, then the median of 3 (ms); -1 when one failed.
 * A warm-up past cpu_s is followed by one timed call only (said).
 */
static double
gpu_median_ms(const bench *b, const tool_case *c, gc_status *st)
{
	double		ms[3],
				warm = gc_now_ms();
	int			reps = 3;

	if (tool_call(b, c, 0, st) != GC_OK)
		return -1;
	warm = gc_now_ms() - warm;
	if (warm > b->cpu_s * 1e3)
	{
		reps = 1;
		printf("    (GPU: the warm-up took %.1f s: one timed call)\n", warm * 1e-3);
	}
	for (int rep = 0; rep < reps; rep++)
	{
		ms[rep] = gc_now_ms();
		if (tool_call(b, c, 0, st) != GC_OK)
			return -1;
		ms[rep] = gc_now_ms() - ms[rep];
	}
	if (reps == 1)
		return ms[0];
	return fmax(fmin(ms[0], ms[1]), fmin(fmax(ms[0], ms[1]), ms[2]));	/* the median */
}

/*
 * The CPU: one call, unless est_s (its estimate, 0: none) is above cpu_s;
 * stopped by the cancel flag after 2 cpu_s.
 */
static cpu_time
cpu_once(const bench *b, const tool_case *c, double est_s, gc_status *st)
{
	cpu_time	t = {.ms = -1};
	gc_code		rc;

	if (b->no_cpu)
		return t;
	if (est_s > b->cpu_s)
	{
		t.est_s = est_s;
		return t;
	}
	cancel_flag = 0;
	alarm((unsigned) (2 * b->cpu_s));
	t.ms = gc_now_ms();
	rc = tool_call(b, c, 1, st);
	t.ms = gc_now_ms() - t.ms;
	alarm(0);
	cancel_flag = 0;			/* the GPU's calls poll it too */
	if (rc != GC_OK)
	{
		t.stopped = rc == GC_ECANCEL;
		t.failed = !t.stopped;
		t.ms = -1;
	}
	return t;
}

/* The CPU columns: its ms and CPU/GPU (or why not), 10 and 8 wide. */
static void
print_cpu(const bench *b, const cpu_time *c, double gms)
{
	char		col[32];

	if (c->ms >= 0)
		snprintf(col, sizeof(col), "%.1f", c->ms);
	else if (c->est_s > 0)
		snprintf(col, sizeof(col), "skip ~%.0fs", c->est_s);
	else if (c->stopped)
		snprintf(col, sizeof(col), ">%ds stop", 2 * b->cpu_s);
	else
		snprintf(col, sizeof(col), c->failed ? "failed" : "-");
	printf(" %10s", col);
	if (c->ms >= 0 && gms > 0)
		snprintf(col, sizeof(col), "%.1fx", c->ms / gms);
	else if (c->est_s > 0 && gms > 0)
		snprintf(col, sizeof(col), "~%.0fx", c->est_s * 1e3 / gms);
	else if (c->stopped && gms > 0)
		snprintf(col, sizeof(col), ">%.0fx", 2 * b->cpu_s * 1e3 / gms);
	else
		snprintf(col, sizeof(col), "-");
	printf(" %8s", col);
}

/* Elements of a and b (n of elem bytes) whose bytes differ. */
static int64_t
bit_differences(const void *a, const void *b, int64_t n, size_t elem)
{
	int64_t		diff = 0;

	for (int64_t i = 0; i < n; i++)
		diff += memcmp((const char *) a + i * elem, (const char *) b + i * elem, elem) != 0;
	return diff;
}

static void
print_equal(int64_t diff, bool compared)
{
	char		col[32];

	if (!compared)
		snprintf(col, sizeof(col), "-");
	else if (diff == 0)
		snprintf(col, sizeof(col), "equal");
	else
		snprintf(col, sizeof(col), "%lld differ", (long long) diff);
	printf(" %12s", col);
}

/* ---- k-distances ---- */

static const struct
{
	int64_t		n;
	int			d;
	int64_t		k;
}			kd_cases[] = {
	{100000, 2, 10}, {1000000, 2, 10}, {1000000, 2, 100}, {1000000, 8, 10}, {200000, 32, 10}
};

static bool
bench_kdistance(bench *b)
{
	float	   *X = NULL;
	int64_t		xn = 0;
	int			xd = 0;
	bool		bad = false;

	printf("\nk-distances (the k-th smallest float32 dist², the row counted; blobs: %d Gaussian clusters + %.0f%% uniform noise)\n",
		   KD_BLOBS, 100 * NOISE_FRACTION);
	printf("GPU: median of 3 after a warm-up; CPU: one call, %d threads, stopped after %d s; brute force: n² d 3 FLOP,\n"
		   "its equivalent rate (that over the GPU's time) and that rate over the FP32 peak (above 1x: no brute force could)\n",
		   gc_threads(&b->ctx), 2 * b->cpu_s);
	printf("%9s %4s %4s %10s %10s %8s %12s %8s %11s %10s %9s\n", "n", "d", "k", "GPU ms", "CPU ms", "CPU/GPU",
		   "GPU = CPU", "GPU MiB", "brute FLOP", "eq TFLOP/s", "FP32 pk");
	for (size_t i = 0; i < sizeof(kd_cases) / sizeof(kd_cases[0]); i++)
	{
		const int64_t n = scaled(b, kd_cases[i].n, 200);
		const int	d = kd_cases[i].d;
		const int64_t k = kd_cases[i].k < n ? kd_cases[i].k : n;
		float	   *g = malloc(sizeof(float) * n),
				   *c = malloc(sizeof(float) * n);
		tool_case	a = {.n = n, .d = d, .k = k};
		gc_status	st = {0},
					cst = {0};
		double		gms,
					flop = (double) n * n * d * 3;
		cpu_time	ct;
		char		name[96],
					kdname[96];
		int64_t		diff;
		bool		compared;
		FILE	   *f;

		if (X == NULL || n != xn || d != xd)
		{
			free(X);
			X = make_blobs(1000 + i, n, d, KD_BLOBS, NOISE_FRACTION, NULL);
			xn = n;
			xd = d;
			snprintf(name, sizeof(name), "bt_kd_%lldx%d.f32", (long long) n, d);
			write_raw(b->dir, name, X, sizeof(float) * n * d);
		}
		a.X = X;
		a.kdist2 = g;
		gms = gpu_median_ms(b, &a, &st);
		a.kdist2 = c;
		ct = cpu_once(b, &a, 0, &cst);

		diff = bit_differences(g, c, n, sizeof(float));
		compared = gms >= 0 && ct.ms >= 0;
		printf("%9lld %4d %4lld", (long long) n, d, (long long) k);
		if (gms >= 0)
			printf(" %10.1f", gms);
		else
			printf(" %10s", "failed");
		print_cpu(b, &ct, gms);
		print_equal(diff, compared);
		printf(" %8.0f %11.2e", gc_kdistance_gpu_mem_bytes(n, d, k) / 1048576.0, flop);
		if (gms > 0 && b->hw.usable)
			printf(" %10.2f %8.2fx", flop / gms * 1e-9, flop / gms * 1e3 / b->hw.fp32_peak);
		printf("\n");
		if (gms < 0)
			printf("    GPU: %s\n", st.message);
		if (ct.failed)
			printf("    CPU: %s\n", cst.message);
		fflush(stdout);
		bad |= gms < 0 || (compared && diff != 0);

		/* the peers' k-distances: the GPU's, else the CPU's */
		snprintf(kdname, sizeof(kdname), "bt_kd_%lldx%d_k%lld.f32", (long long) n, d, (long long) k);
		if (gms >= 0 || ct.ms >= 0)
			write_raw(b->dir, kdname, gms >= 0 ? g : c, sizeof(float) * n);
		snprintf(name, sizeof(name), "bt_kd_%lldx%d_k%lld.json", (long long) n, d, (long long) k);
		if ((f = open_in(b->dir, name, "w")) != NULL)
		{
			fprintf(f, "{\"run\": \"%s\", \"seq\": %d, \"kind\": \"kdistance\", \"n\": %lld, \"d\": %d, \"k\": %lld",
					b->run_id, b->seq++, (long long) n, d, (long long) k);
			fprintf(f, ", \"X\": \"bt_kd_%lldx%d.f32\"", (long long) n, d);
			if (gms >= 0 || ct.ms >= 0)
				fprintf(f, ", \"kdist2\": \"%s\", \"from\": \"%s\"", kdname, gms >= 0 ? "gpu" : "cpu");
			else
				fprintf(f, ", \"kdist2\": null");
			json_num(f, "gpu_ms", gms, gms >= 0);
			json_num(f, "cpu_ms", ct.ms, ct.ms >= 0);
			fprintf(f, ", \"equal\": %s}\n", compared ? (diff == 0 ? "true" : "false") : "null");
			fclose(f);
		}
		free(g);
		free(c);
	}
	free(X);
	return bad;
}

/* ---- silhouette ---- */

static bool
bench_silhouette(bench *b)
{
	static const int ds[] = {2, 32, 128};
	static const int64_t rs[] = {5000, GC_SILHOUETTE_EXACT_ROWS, 100000};
	bool		bad = false;

	printf("\nsilhouette (exact: sample_size = r; %d Gaussian blobs, their labels)\n", SIL_BLOBS);
	printf("GPU: median of 3 after a warm-up; CPU: one call, %d threads, skipped when estimated (r² from the r before) over %d s;\n"
		   "work: r² 3d FP64 FLOP + r² FP64 sqrt; the GPU's rate without the sqrt, and as a share of the FP64 peak\n",
		   gc_threads(&b->ctx), b->cpu_s);
	printf("%7s %4s %10s %10s %8s %12s %19s %8s %10s %9s %8s\n", "r", "d", "GPU ms", "CPU ms", "CPU/GPU",
		   "GPU = CPU", "score", "GPU MiB", "FP64 FLOP", "GFLOP/s", "FP64 pk");
	for (size_t di = 0; di < sizeof(ds) / sizeof(ds[0]); di++)
	{
		const int	d = ds[di];
		const int64_t rmax = scaled(b, rs[2], 100);
		int32_t    *labels = malloc(sizeof(int32_t) * rmax);
		float	   *X = make_blobs(2000 + di, rmax, d, SIL_BLOBS, 0.0, labels);
		double		prev_ms = -1;
		int64_t		prev_r = 0;
		char		xname[64],
					lname[64],
					name[64];

		snprintf(xname, sizeof(xname), "bt_sil_d%d.f32", d);
		snprintf(lname, sizeof(lname), "bt_sil_d%d.i32", d);
		write_raw(b->dir, xname, X, sizeof(float) * rmax * d);
		write_raw(b->dir, lname, labels, sizeof(int32_t) * rmax);
		for (size_t ri = 0; ri < sizeof(rs) / sizeof(rs[0]); ri++)
		{
			const int64_t r = scaled(b, rs[ri], 100);
			gc_silhouette_result gr = {0},
						cr = {0};
			tool_case	a = {.X = X, .labels = labels, .n = r, .d = d};
			gc_status	st = {0},
						cst = {0};
			const double flop = (double) r * r * 3 * d;
			double		gms,
						est_s = prev_ms > 0 ? prev_ms * 1e-3 * ((double) r / prev_r) * ((double) r / prev_r) : 0;
			cpu_time	ct;
			bool		compared,
						same;
			FILE	   *f;

			a.sil = &gr;
			gms = gpu_median_ms(b, &a, &st);
			a.sil = &cr;
			ct = cpu_once(b, &a, est_s, &cst);
			if (ct.ms >= 0)
			{
				prev_ms = ct.ms;
				prev_r = r;
			}
			compared = gms >= 0 && ct.ms >= 0;
			same = compared && bit_differences(&gr.score, &cr.score, 1, sizeof(double)) == 0;

			printf("%7lld %4d", (long long) r, d);
			if (gms >= 0)
				printf(" %10.1f", gms);
			else
				printf(" %10s", "failed");
			print_cpu(b, &ct, gms);
			print_equal(same ? 0 : 1, compared);
			if (gms >= 0 || ct.ms >= 0)
				printf(" %19.15f", gms >= 0 ? gr.score : cr.score);
			else
				printf(" %19s", "-");
			printf(" %8.0f %10.2e", gc_silhouette_gpu_mem_bytes(r, d, SIL_BLOBS) / 1048576.0, flop);
			if (gms > 0 && b->hw.usable)
				printf(" %9.0f %7.1f%%", flop / gms * 1e-6, 100 * flop / gms * 1e3 / b->hw.fp64_peak);
			printf("\n");
			if (gms < 0)
				printf("    GPU: %s\n", st.message);
			if (ct.failed)
				printf("    CPU: %s\n", cst.message);
			if (compared && !same)
				printf("    GPU %.17g, CPU %.17g\n", gr.score, cr.score);
			fflush(stdout);
			bad |= gms < 0 || (compared && !same);

			snprintf(name, sizeof(name), "bt_sil_r%lld_d%d.json", (long long) r, d);
			if ((f = open_in(b->dir, name, "w")) != NULL)
			{
				fprintf(f, "{\"run\": \"%s\", \"seq\": %d, \"kind\": \"silhouette\", \"r\": %lld, \"d\": %d, \"m\": %d",
						b->run_id, b->seq++, (long long) r, d, SIL_BLOBS);
				fprintf(f, ", \"X\": \"%s\", \"labels\": \"%s\", \"rows_in_file\": %lld",
						xname, lname, (long long) rmax);
				json_num(f, "score", gms >= 0 ? gr.score : cr.score, gms >= 0 || ct.ms >= 0);
				json_num(f, "gpu_score", gr.score, gms >= 0);
				json_num(f, "cpu_score", cr.score, ct.ms >= 0);
				json_num(f, "gpu_ms", gms, gms >= 0);
				json_num(f, "cpu_ms", ct.ms, ct.ms >= 0);
				fprintf(f, ", \"equal\": %s}\n", compared ? (same ? "true" : "false") : "null");
				fclose(f);
			}
		}
		free(X);
		free(labels);
	}
	return bad;
}

/* ---- where 'auto' turns to the GPU ---- */

/*
 * One row of the crossover table: for each size, rows of d features (blobs;
 * silhouette: exact, labelled by their blob; else k-distances at k = 10),
 * CPU ms / GPU ms.
 */
static void
crossover_row(bench *b, bool sil, int d, const int64_t *sizes, int nsizes)
{
	printf("  d %-12d", d);
	for (int i = 0; i < nsizes; i++)
	{
		int64_t		n = sizes[i];
		int32_t    *labels = sil ? malloc(sizeof(int32_t) * n) : NULL;
		float	   *X = make_blobs((sil ? 4000 : 3000) + i, n, d, sil ? SIL_BLOBS : KD_BLOBS,
								   sil ? 0.0 : NOISE_FRACTION, labels);
		float	   *kd = sil ? NULL : malloc(sizeof(float) * n);
		gc_silhouette_result res;
		tool_case	c = {.X = X, .n = n, .d = d, .k = 10, .kdist2 = kd, .labels = labels, .sil = &res};
		gc_status	st;
		double		g = gpu_median_ms(b, &c, &st);
		cpu_time	t = cpu_once(b, &c, 0, &st);

		printf(" %5.1f/%5.2f=%5.1fx", t.ms, g, g > 0 && t.ms >= 0 ? t.ms / g : 0.0);
		fflush(stdout);
		free(X);
		free(kd);
		free(labels);
	}
	printf("\n");
}

/*
 * Small problems, whole core calls on both devices (the GPU's median of 3,
 * CUDA running; the CPU's one call on every core): CPU / GPU, above 1 where
 * the GPU wins.  dispatch.c's thresholds for 'auto' come from this table.
 */
static void
bench_crossover(bench *b)
{
	static const int64_t kn[] = {1000, 3000, 10000, 30000, 100000};
	static const int kdims[] = {2, 8, 32};
	static const int64_t sr[] = {100, 300, 1000, 3000};
	static const int sdims[] = {2, 32, 128};

	if (b->no_cpu)
		return;
	printf("\ncrossover: CPU ms / GPU ms (k-distances k = 10 on blobs; silhouette exact on %d blobs)\n", SIL_BLOBS);
	printf("%-16s", "k-distances n");
	for (size_t i = 0; i < sizeof(kn) / sizeof(kn[0]); i++)
		printf(" %18lld", (long long) kn[i]);
	printf("\n");
	for (size_t di = 0; di < sizeof(kdims) / sizeof(kdims[0]); di++)
		crossover_row(b, false, kdims[di], kn, (int) (sizeof(kn) / sizeof(kn[0])));
	printf("%-16s", "silhouette r");
	for (size_t i = 0; i < sizeof(sr) / sizeof(sr[0]); i++)
		printf(" %18lld", (long long) sr[i]);
	printf("\n");
	for (size_t di = 0; di < sizeof(sdims) / sizeof(sdims[0]); di++)
		crossover_row(b, true, sdims[di], sr, (int) (sizeof(sr) / sizeof(sr[0])));
}

int
main(int argc, char **argv)
{
	bench		b = {.dir = argc > 1 ? argv[1] : "/tmp",
		.scale = env_double("BENCH_TOOLS_SCALE", 1.0),
		.cpu_s = (int) env_double("BENCH_TOOLS_CPU_S", 30),
		.no_cpu = getenv("BENCH_TOOLS_NO_CPU") != NULL && atoi(getenv("BENCH_TOOLS_NO_CPU")) != 0,
	.ctx = {.n_threads = 0, .cancel_flags = {&cancel_flag, NULL}}};
	char		run_id[64];
	struct sigaction sa;
	FILE	   *f;
	bool		bad = false;
	double		t0 = gc_now_ms();

	snprintf(run_id, sizeof(run_id), "%lld-%d", (long long) time(NULL), (int) getpid());
	b.run_id = run_id;
	if (b.cpu_s < 1)
		b.cpu_s = 1;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);

	read_hw(&b.hw);				/* CUDA starts here: no call below pays it */
	printf("bench_tools: GPU %s", b.hw.name);
	if (b.hw.usable)
		printf(" (cc %d.%d, %d SMs at %.0f MHz, %.1f GiB)", b.hw.cc_major, b.hw.cc_minor, b.hw.sms,
			   b.hw.ghz * 1e3, b.hw.mem_gib);
	printf("; CPU %d threads; scale %g\n", gc_threads(&b.ctx), b.scale);
	if (b.hw.usable)
		printf("peaks without FMA (-fmad=false): FP32 %.1f TFLOP/s (SMs x clock x %d lanes), FP64 %.1f TFLOP/s (x %d lanes)\n",
			   b.hw.fp32_peak * 1e-12, b.hw.fp32_lanes, b.hw.fp64_peak * 1e-12, b.hw.fp64_lanes);
	if ((f = open_in(b.dir, "bt_run.json", "w")) != NULL)
	{
		fprintf(f, "{\"run\": \"%s\", \"gpu\": \"%s\", \"cpu_threads\": %d, \"scale\": %g",
				run_id, b.hw.usable ? b.hw.name : "none", gc_threads(&b.ctx), b.scale);
		json_num(f, "fp32_peak", b.hw.fp32_peak, b.hw.usable);
		json_num(f, "fp64_peak", b.hw.fp64_peak, b.hw.usable);
		fprintf(f, "}\n");
		fclose(f);
	}
	fflush(stdout);

	bad |= bench_kdistance(&b);
	bad |= bench_silhouette(&b);
	bench_crossover(&b);
	printf("\nbench_tools: %.1f s in all%s\n", (gc_now_ms() - t0) * 1e-3,
		   bad ? "; a GPU call failed or differs from the CPU" : "");
	return bad ? 1 : 0;
}
