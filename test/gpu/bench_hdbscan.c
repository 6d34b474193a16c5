/*
 * bench_hdbscan.c — whole HDBSCAN calls on the GPU (gc_hdbscan_on_gpu:
 * all on the GPU, cuda/hdbscan/, but the flat selection over the
 * clusters) against
 * the CPU (gc_hdbscan_cpu on every core), on the data
 * (hdbscan_common.h: 50 blobs of sigma 0.6 in [-10, 10]^d plus 1/11 uniform
 * noise over their box; min_cluster_size = min_samples = 15):
 *
 *   110k x 2, 1M x 2, 10M x 2 (the CPU only when its estimate, 1M's time x
 *   11.5, is under the cap), 1M x 16, and the spanning tree alone
 *   (gc_hdbscan_mst_on_gpu, min_samples 1) on 10M x 2; then a crossover
 *   sweep, n = 1k to 100k in 2-d and 16-d, CPU ms / GPU ms, where
 *   GC_HDBSCAN_GPU_MIN_ROWS comes from.
 *
 * GPU: a warm-up call, then the median of 3 (CUDA started before; one
 * timed call when the warm-up took over a second); of the last call the
 * GPU's phases (gc_hdbscan_gpu_last_phases: upload, index, core distances,
 * Borůvka's rounds, sort, single linkage, condensed tree and labels,
 * download; the rest of the whole call is the driver's), the device
 * memory (gc_hdbscan_gpu_mem_bytes, and
 * the default pool's high-water mark over a call), and the floor:
 *   HBM    the rows read once and the results written once: n (4 d + 20)
 *          bytes (labels 4, probabilities and scores 8 each; the spanning
 *          tree alone: the core distances 8 and the edges (n - 1) 24) at
 *          4.8 TB/s;
 *   FP64   the k-nearest rows of each row, the least any exact search
 *          computes: n min_samples distances of 3 d FLOP at 67 TFLOP/s
 *          (the H200's FP64 tensor peak; the code runs no FMA, so its own
 *          ceiling is lower);
 *   PCIe   the rows up and the results down, the same bytes at 64 GB/s
 *          (PCIe 5.0 x16) — the floor of the call;
 * the floor of the GPU call is the largest.  CPU: one call, stopped
 * through its cancel flag after BENCH_HD_CPU_S seconds (default 40).
 * Whether the GPU's labels, probabilities and outlier scores equal the
 * CPU's bit for bit is shown.
 *
 *   bench_hdbscan            the table and the crossover
 *   bench_hdbscan --trace    the GPU alone on 110k x 2, 1M x 2 and 1M x 16
 *                            with GPUCLUST_HB_TRACE=1: each round's
 *                            components, time, nodes opened and distances
 *                            on stderr
 *   bench_hdbscan --ratio    case B (1M x 2): a warm-up of each, then 5
 *                            GPU and 5 CPU calls in turn, the medians and
 *                            their ratio (one CPU call swings by 10-20%
 *                            from run to run on a shared host)
 *   bench_hdbscan --profile  the GPU alone on case B (1M x 2): a warm-up
 *                            and 3 calls with the pool as the test
 *                            binaries leave it (released at each sync),
 *                            then as the GPU worker keeps it
 *                            (gc_cuda_keep_memory), each call's time and
 *                            phases; run under trace/cupti_trace.c for
 *                            the timeline
 * BENCH_HD_SCALE (default 1) multiplies every n; BENCH_HD_NO_CPU=1: the
 * GPU's alone.  Exit status 1 when a GPU call failed or differs.
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "testutil.h"
#include "hdbscan_common.h"
#include "common/gpu.h"
#include "hdbscan/hdbscan.h"

#define HBM_BPS 4.8e12
#define FP64_FLOPS 67e12
#define PCIE_BPS 64e9

typedef struct bench
{
	double		scale;
	int			cpu_s;
	bool		no_cpu;
	gc_ctx		ctx;			/* all cores, cancel_flag polled */
	bool		bad;
	double		cpu_1m_ms;		/* 1M x 2's CPU time: the 10M estimate */
} bench;

/* One problem and its two results. */
typedef struct hd_case
{
	const char *name;
	float	   *X;
	int64_t		n;
	int			d;
	bool		mst_only;
	gc_hdbscan_params p;
	gc_hdbscan_result cpu,
				gpu;
	double	   *core;
	gc_mst_edge *ecpu,
			   *egpu;
} hd_case;

static void
on_alarm(int sig)
{
	(void) sig;
	cancel_flag = 1;
}

static double
env_double(const char *name, double dflt)
{
	const char *e = getenv(name);

	return e != NULL ? atof(e) : dflt;
}

static void
result_alloc(gc_hdbscan_result *r, int64_t n)
{
	memset(r, 0, sizeof(*r));
	r->labels = malloc(sizeof(int32_t) * (size_t) n);
	r->probability = malloc(sizeof(double) * (size_t) n);
	r->outlier = malloc(sizeof(double) * (size_t) n);
}

static void
result_free(gc_hdbscan_result *r)
{
	free(r->labels);
	free(r->probability);
	free(r->outlier);
}

static hd_case
case_make(const char *name, int64_t n, int d, int64_t ms, bool mst_only, uint64_t seed)
{
	hd_case		c;
	uint64_t	rs = seed;

	memset(&c, 0, sizeof(c));
	c.name = name;
	c.n = n;
	c.d = d;
	c.mst_only = mst_only;
	c.X = make_blobs_noise(&rs, n, d, 50);
	c.p.min_cluster_size = 15;
	c.p.min_samples = ms;
	c.p.epsilon = 0.0;
	c.p.method = GC_HDBSCAN_EOM;
	c.p.allow_single_cluster = false;
	c.p.alpha = 1.0;
	c.p.metric = GC_METRIC_EUCLIDEAN;
	if (mst_only)
	{
		c.core = malloc(sizeof(double) * (size_t) n);
		c.ecpu = malloc(sizeof(gc_mst_edge) * (size_t) (n - 1));
		c.egpu = malloc(sizeof(gc_mst_edge) * (size_t) (n - 1));
	}
	else
	{
		result_alloc(&c.cpu, n);
		result_alloc(&c.gpu, n);
	}
	return c;
}

static void
case_free(hd_case *c)
{
	free(c->X);
	free(c->core);
	free(c->ecpu);
	free(c->egpu);
	if (!c->mst_only)
	{
		result_free(&c->cpu);
		result_free(&c->gpu);
	}
}

/* One whole call on the GPU (gpu) or the CPU. */
static gc_code
hd_call(bench *b, hd_case *c, bool gpu, gc_status *st)
{
	if (c->mst_only)
		return (gpu ? gc_hdbscan_mst_on_gpu : gc_hdbscan_mst_cpu) (&b->ctx, c->X, c->n, c->d, &c->p,
															   c->core, gpu ? c->egpu : c->ecpu, st);
	return (gpu ? gc_hdbscan_on_gpu : gc_hdbscan_cpu) (&b->ctx, c->X, c->n, c->d, &c->p,
													 gpu ? &c->gpu : &c->cpu, st);
}

/* The GPU: a warm-up, then the median of 3 (or 1); -1 when a call failed. */
static double
gpu_median_ms(bench *b, hd_case *c, gc_status *st)
{
	double		ms[3],
				warm = gc_now_ms();
	int			reps = 3;

	if (hd_call(b, c, true, st) != GC_OK)
		return -1;
	warm = gc_now_ms() - warm;
	if (warm > 1000.0)
		reps = 1;
	for (int r = 0; r < reps; r++)
	{
		ms[r] = gc_now_ms();
		if (hd_call(b, c, true, st) != GC_OK)
			return -1;
		ms[r] = gc_now_ms() - ms[r];
	}
	if (reps == 1)
		return ms[0];
	return fmax(fmin(ms[0], ms[1]), fmin(fmax(ms[0], ms[1]), ms[2]));
}

/* The CPU: one call, stopped after cpu_s; -1 failed, -2 stopped, -3 skipped. */
static double
cpu_once_ms(bench *b, hd_case *c, gc_status *st)
{
	double		ms;
	gc_code		rc;

	if (b->no_cpu)
		return -3;
	cancel_flag = 0;
	alarm((unsigned) b->cpu_s);
	ms = gc_now_ms();
	rc = hd_call(b, c, false, st);
	ms = gc_now_ms() - ms;
	alarm(0);
	cancel_flag = 0;
	if (rc != GC_OK)
		return rc == GC_ECANCEL ? -2 : -1;
	return ms;
}

static void
print_floor(const hd_case *c, const gc_hdbscan_gpu_phases *ph)
{
	const double bytes = c->mst_only ?
		(double) c->n * (4.0 * c->d + 8.0) + (double) (c->n - 1) * 24.0 :
		(double) c->n * (4.0 * c->d + 20.0),
				flops = (double) c->n * (double) c->p.min_samples * 3.0 * c->d,
				hbm = bytes / HBM_BPS * 1e3,
				fp = flops / FP64_FLOPS * 1e3,
				pcie = bytes / PCIE_BPS * 1e3,
				fl = fmax(fmax(hbm, fp), pcie);

	printf("    floor: %.1f ms (PCIe %.1f ms for %.0f MB at 64 GB/s; HBM %.3f ms; FP64 %.3f ms "
		   "for %.2f GFLOP): the GPU call is %.1fx it\n",
		   fl, pcie, bytes / 1e6, hbm, fp, flops / 1e9, ph->ms_total / fl);
}

/* A table row: the GPU's whole call, phases, memory, floor; the CPU's. */
static void
bench_case(bench *b, hd_case *c, bool cpu)
{
	gc_status	st;
	gc_hdbscan_gpu_phases ph;
	double		g,
				cms = -3;
	size_t		peak;

	printf("\n%s: %lld x %d, min_samples %lld%s\n", c->name, (long long) c->n, c->d,
		   (long long) c->p.min_samples, c->mst_only ? ", the spanning tree alone" : "");
	fflush(stdout);
	pool_peak(true);
	g = gpu_median_ms(b, c, &st);
	peak = pool_peak(false);
	if (g < 0)
	{
		printf("  GPU failed: %s\n", st.message);
		b->bad = true;
		return;
	}
	gc_hdbscan_gpu_last_phases(&ph);
	printf("  GPU whole call %.1f ms; of it the GPU's phases %.1f ms: upload %.1f, index %.1f, "
		   "core %.1f, Borůvka %.1f (%d rounds), sort %.1f, single linkage %.1f, condensed "
		   "tree and labels %.1f, download %.1f; the rest %.1f ms\n",
		   g, ph.ms_total, ph.ms_upload, ph.ms_index, ph.ms_core, ph.ms_mst, ph.rounds,
		   ph.ms_sort, ph.ms_linkage, ph.ms_labels, ph.ms_download, g - ph.ms_total);
	printf("    device memory: bound %.1f MB (gc_hdbscan_gpu_mem_bytes), measured peak %.1f MB\n",
		   gc_hdbscan_gpu_mem_bytes(c->n, c->d, c->p.min_samples) / 1e6, peak / 1e6);
	print_floor(c, &ph);
	if (cpu)
		cms = cpu_once_ms(b, c, &st);
	if (cms >= 0)
	{
		int64_t		diff;

		if (c->mst_only)
			diff = bits_diff(c->ecpu, c->egpu, c->n - 1, sizeof(gc_mst_edge));
		else
			diff = bits_diff(c->cpu.labels, c->gpu.labels, c->n, sizeof(int32_t)) +
				bits_diff(c->cpu.probability, c->gpu.probability, c->n, sizeof(double)) +
				bits_diff(c->cpu.outlier, c->gpu.outlier, c->n, sizeof(double));
		printf("  CPU %.1f ms: %.1fx the GPU; results %s", cms, cms / g,
			   diff == 0 ? "equal bit for bit" : "DIFFER");
		if (diff != 0)
		{
			printf(" (%lld values)", (long long) diff);
			b->bad = true;
		}
		printf("\n");
	}
	else if (cms == -2)
		printf("  CPU stopped after %d s: > %.0fx the GPU\n", b->cpu_s, b->cpu_s * 1e3 / g);
	else if (cms == -1)
		printf("  CPU failed: %s\n", st.message);
	else
		printf("  CPU not run\n");
	if (c->n == 1000000 && c->d == 2 && cms >= 0)
		b->cpu_1m_ms = cms;
	fflush(stdout);
}

/* One crossover cell: CPU ms / GPU ms (medians of 3 below 10k rows). */
static void
crossover_cell(bench *b, int64_t n, int d, double *ratio)
{
	hd_case		c = case_make("crossover", n, d, 15, false, 7000 + (uint64_t) n * 31 + d);
	gc_status	st;
	double		g = gpu_median_ms(b, &c, &st),
				cm = cpu_once_ms(b, &c, &st);

	if (n < 10000 && cm >= 0)
	{
		double		c2 = cpu_once_ms(b, &c, &st),
					c3 = cpu_once_ms(b, &c, &st);

		cm = fmax(fmin(cm, c2), fmin(fmax(cm, c2), c3));
	}
	*ratio = g > 0 && cm > 0 ? cm / g : 0.0;
	printf(" %7.1f/%6.1f=%5.2fx", cm, g, *ratio);
	fflush(stdout);
	case_free(&c);
}

static void
bench_crossover(bench *b)
{
	static const int64_t ns[] = {1000, 3000, 10000, 30000, 100000};
	static const int dims[] = {2, 16};
	const int	nn = (int) (sizeof(ns) / sizeof(ns[0]));
	int64_t		from = -1;

	if (b->no_cpu)
		return;
	printf("\ncrossover: CPU ms / GPU ms of whole calls (GPU: CUDA running)\n%-6s", "n");
	for (int i = 0; i < nn; i++)
		printf(" %21lld", (long long) ns[i]);
	printf("\n");
	for (size_t j = 0; j < sizeof(dims) / sizeof(dims[0]); j++)
	{
		int64_t		first_win = -1;

		printf("d %-4d", dims[j]);
		for (int i = 0; i < nn; i++)
		{
			double		r;

			crossover_cell(b, (int64_t) (ns[i] * b->scale), dims[j], &r);
			if (r > 1.0 && first_win < 0)
				first_win = ns[i];
			else if (r <= 1.0)
				first_win = -1;
		}
		printf("\n");
		if (first_win < 0)
			first_win = INT64_MAX;
		from = first_win > from ? first_win : from;
	}
	if (from == INT64_MAX)
		printf("the GPU does not win at every size up to %lld rows\n", (long long) ns[nn - 1]);
	else
		printf("the GPU wins from %lld rows in both (GC_HDBSCAN_GPU_MIN_ROWS is now %d)\n",
			   (long long) from, GC_HDBSCAN_GPU_MIN_ROWS);
}

/* --trace: the GPU alone, GPUCLUST_HB_TRACE=1 (set before any call). */
static void
bench_trace(bench *b)
{
	static const struct
	{
		int64_t		n;
		int			d;
	}			tc[] = {{110000, 2}, {1000000, 2}, {1000000, 16}};

	for (size_t i = 0; i < sizeof(tc) / sizeof(tc[0]); i++)
	{
		hd_case		c = case_make("trace", (int64_t) (tc[i].n * b->scale), tc[i].d, 15, false,
								  1000 + i);
		gc_status	st;

		fprintf(stderr, "== %lld x %d\n", (long long) c.n, c.d);
		if (hd_call(b, &c, true, &st) != GC_OK)
		{
			printf("trace %lld x %d: GPU failed: %s\n", (long long) c.n, c.d, st.message);
			b->bad = true;
		}
		case_free(&c);
	}
}

/* One --profile call: its time and phases. */
static void
profile_call(bench *b, hd_case *c, const char *what)
{
	gc_hdbscan_gpu_phases ph;
	gc_status	st;
	double		ms = gc_now_ms();

	if (hd_call(b, c, true, &st) != GC_OK)
	{
		printf("profile: GPU failed: %s\n", st.message);
		b->bad = true;
		return;
	}
	ms = gc_now_ms() - ms;
	gc_hdbscan_gpu_last_phases(&ph);
	printf("  %s: %.2f ms; phases %.2f: upload %.2f, index %.2f, core %.2f, Borůvka %.2f, "
		   "sort %.2f, linkage %.2f, labels %.2f, download %.2f\n", what, ms, ph.ms_total,
		   ph.ms_upload, ph.ms_index, ph.ms_core, ph.ms_mst, ph.ms_sort, ph.ms_linkage,
		   ph.ms_labels, ph.ms_download);
	fflush(stdout);
}

static int
cmp_double(const void *a, const void *b)
{
	const double x = *(const double *) a,
				y = *(const double *) b;

	return (x > y) - (x < y);
}

/* --ratio: case B, 5 GPU and 5 CPU calls in turn, the medians. */
static void
bench_ratio(bench *b)
{
	hd_case		c = case_make("B 1M 2-d", (int64_t) (1000000 * b->scale), 2, 15, false, 101);
	double		g[5],
				p[5];
	gc_status	st;

	if (hd_call(b, &c, true, &st) != GC_OK || hd_call(b, &c, false, &st) != GC_OK)
	{
		printf("ratio: a call failed: %s\n", st.message);
		b->bad = true;
		case_free(&c);
		return;
	}
	for (int r = 0; r < 5; r++)
	{
		g[r] = gc_now_ms();
		if (hd_call(b, &c, true, &st) != GC_OK)
			b->bad = true;
		g[r] = gc_now_ms() - g[r];
		p[r] = gc_now_ms();
		if (hd_call(b, &c, false, &st) != GC_OK)
			b->bad = true;
		p[r] = gc_now_ms() - p[r];
		printf("  GPU %.1f ms, CPU %.1f ms\n", g[r], p[r]);
	}
	qsort(g, 5, sizeof(double), cmp_double);
	qsort(p, 5, sizeof(double), cmp_double);
	printf("ratio %lld x 2: GPU median %.1f ms (%.1f-%.1f), CPU median %.1f ms (%.1f-%.1f): "
		   "%.1fx\n", (long long) c.n, g[2], g[0], g[4], p[2], p[0], p[4], p[2] / g[2]);
	case_free(&c);
}

/* --profile: case B on the GPU, the pool released, then kept. */
static void
bench_profile(bench *b, const gc_cuda_device_info *info)
{
	hd_case		c = case_make("B 1M 2-d", (int64_t) (1000000 * b->scale), 2, 15, false, 101);

	printf("profile %lld x 2, the pool released at each sync:\n", (long long) c.n);
	for (int r = 0; r < 4; r++)
		profile_call(b, &c, r == 0 ? "warm-up" : "call");
	gc_cuda_keep_memory(info->total_mem);
	printf("the pool kept (gc_cuda_keep_memory):\n");
	for (int r = 0; r < 4; r++)
		profile_call(b, &c, r == 0 ? "warm-up" : "call");
	case_free(&c);
}

int
main(int argc, char **argv)
{
	bench		b = {.scale = env_double("BENCH_HD_SCALE", 1.0),
		.cpu_s = (int) env_double("BENCH_HD_CPU_S", 40),
		.no_cpu = getenv("BENCH_HD_NO_CPU") != NULL && atoi(getenv("BENCH_HD_NO_CPU")) != 0,
	.ctx = {.n_threads = 0, .cancel_flags = {&cancel_flag, NULL}}};
	const bool	trace = argc > 1 && strcmp(argv[1], "--trace") == 0,
				profile = argc > 1 && strcmp(argv[1], "--profile") == 0,
				ratio = argc > 1 && strcmp(argv[1], "--ratio") == 0;
	gc_cuda_device_info info;
	struct sigaction sa;
	double		t0 = gc_now_ms();

	if (trace)
		setenv("GPUCLUST_HB_TRACE", "1", 1);
	if (b.cpu_s < 1)
		b.cpu_s = 1;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	gc_cuda_probe(0, &info);	/* CUDA starts here: no call below pays it */
	if (!info.usable)
	{
		printf("bench_hdbscan: no usable GPU: %s\n", info.reason);
		return 1;
	}
	printf("bench_hdbscan: GPU %s (%.1f GiB); CPU %d threads; scale %g; CPU cap %d s\n",
		   info.name, info.total_mem / 1073741824.0, gc_threads(&b.ctx), b.scale, b.cpu_s);
	fflush(stdout);
	if (trace)
	{
		bench_trace(&b);
		return b.bad ? 1 : 0;
	}
	if (profile)
	{
		bench_profile(&b, &info);
		return b.bad ? 1 : 0;
	}
	if (ratio)
	{
		bench_ratio(&b);
		return b.bad ? 1 : 0;
	}

	{
		static const struct
		{
			const char *name;
			int64_t		n;
			int			d;
			int64_t		ms;
			bool		mst;
		}			cs[] = {
			{"A 110k 2-d", 110000, 2, 15, false},
			{"B 1M 2-d", 1000000, 2, 15, false},
			{"C 10M 2-d", 10000000, 2, 15, false},
			{"D 1M 16-d", 1000000, 16, 15, false},
			{"E 10M 2-d MST", 10000000, 2, 1, true},
		};

		for (size_t i = 0; i < sizeof(cs) / sizeof(cs[0]); i++)
		{
			const int64_t n = (int64_t) (cs[i].n * b.scale);
			hd_case		c = case_make(cs[i].name, n < 2 ? 2 : n, cs[i].d, cs[i].ms, cs[i].mst,
									  100 + i);
			bool		cpu = true;

			/* 10M on the CPU: only when 1M's time says it ends within the cap */
			if (cs[i].n == 10000000 && cs[i].d == 2)
				cpu = b.cpu_1m_ms > 0 && b.cpu_1m_ms * 11.5 < b.cpu_s * 1e3;
			bench_case(&b, &c, cpu);
			case_free(&c);
		}
	}
	bench_crossover(&b);
	printf("\nbench_hdbscan: %.1f s in all%s\n", (gc_now_ms() - t0) * 1e-3,
		   b.bad ? "; a GPU call failed or differs from the CPU" : "");
	return b.bad ? 1 : 0;
}
