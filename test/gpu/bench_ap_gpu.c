/*
 * bench_ap_gpu.c — the GPU affinity propagation's time per iteration,
 * against its bytes-moved roofline, in float8 and float4; and whole calls
 * on the CPU and the GPU for 'auto's crossover.  Not a test: it prints
 * tables.  (scikit-learn's time per iteration on the same machine:
 * test/gpu/bench_ap_sklearn.py.)
 *
 * Per iteration: a run of BENCH_AP_ITERS iterations with a given
 * preference and convergence_iter = max_iter (so none stops early); the
 * kernels' time (events) over the iterations, and the host's (each
 * iteration's read-back of the exemplar counts included).  The first pass
 * (R from A = 0, before the iterations) is a fixed cost, left out as
 * scikit-learn's figure (the difference of two runs) leaves its own out;
 * its time is the "first" column.  Bytes: the
 * passes move 6 stored values an entry (colsum reads R; the row pass reads
 * R, A and S and writes A and R, its second sweep's re-reads of R and S
 * counted as L2 hits); the floor is 5 (R and A read and written, S read
 * once), over the copy bandwidth measured here (cudaMemcpy device to
 * device, bytes read plus written).
 *
 * BENCH_AP_N="5000 10000 ..." chooses the sizes (default 5k, 10k, 20k,
 * 40k and the largest that fits); BENCH_AP_ITERS the iterations (20);
 * BENCH_AP_PF="-1 0" times every size once with each of these bytes of
 * its next row a row-pass block prefetches (-1, the default: its rule;
 * 0: none); BENCH_AP_CROSS=0 skips the crossover;
 * BENCH_AP_KEEP="0 65536 -1" also times 20k with that much shared memory
 * a row-pass block keeps its row in (-1: all it can have); BENCH_AP_PREC=4
 * or 8 times that precision only.
 *
 * With a second GPU (BENCH_AP_SPLIT=0 skips it): per iteration with S, R
 * and A split by rows over GPUs 0 and 1, against one GPU, at the sizes
 * above, the largest n one GPU holds and the largest two hold; and whole
 * calls (median preference) on one GPU and on two, for where the split
 * pays.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>

#include <cuda_runtime.h>

#include "testutil.h"
#include "common/gpu.h"

static int	iters = 20;
/* the GPUs a call splits over (NULL: one GPU) */
static const gc_ctx *split_ctx;

static uint64_t rs;

static double
copy_bandwidth(void)
{
	size_t		bytes = (size_t) 2 << 30;
	void	   *a,
			   *b;
	cudaEvent_t e0,
				e1;
	float		ms = 0;

	if (cudaMalloc(&a, bytes) != cudaSuccess)
		return NAN;
	if (cudaMalloc(&b, bytes) != cudaSuccess)
	{
		cudaFree(a);
		return NAN;
	}
	cudaEventCreate(&e0);
	cudaEventCreate(&e1);
	cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);
	cudaEventRecord(e0, 0);
	for (int r = 0; r < 5; r++)
		cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);
	cudaEventRecord(e1, 0);
	cudaEventSynchronize(e1);
	cudaEventElapsedTime(&ms, e0, e1);
	cudaFree(a);
	cudaFree(b);
	return 2.0 * 5 * (double) bytes / (ms * 1e-3) / 1e12;	/* TB/s */
}

/* whether this precision is timed (BENCH_AP_PREC=4 or 8: that one only) */
static bool
prec_wanted(int prec)
{
	const char *e = getenv("BENCH_AP_PREC");

	return e == NULL || atoi(e) == (prec == GC_AP_FLOAT4 ? 4 : 8);
}

/* a list of numbers, blanks or commas between them; how many */
static int
parse_list(const char *text, long *out, int max)
{
	char	   *s = strdup(text),
			   *tok = strtok(s, " ,");
	int			k = 0;

	for (; tok != NULL && k < max; tok = strtok(NULL, " ,"))
		out[k++] = atol(tok);
	free(s);
	return k;
}

/* one timed run: the host's ms per iteration (NAN when it failed) */
static double
per_iteration(const float *X, int64_t n, int d, gc_ap_precision prec,
			  double tbs)
{
	gc_ap_params p = {0.5, true, -50.0, iters, iters, prec};
	gc_ap_result r;
	gc_ap_gpu_phases ph;
	gc_status	st;
	int32_t    *lab = malloc(sizeof(int32_t) * n);
	uint8_t    *ex = malloc(n);
	const double sz = prec == GC_AP_FLOAT4 ? 4.0 : 8.0;
	const double nn = (double) n * (double) n;
	double		t0 = omp_get_wtime(),
				wall,
				h = NAN;
	gc_code		rc;

	memset(&r, 0, sizeof(r));
	r.labels = lab;
	r.is_exemplar = ex;
	rc = gc_ap_on_gpu(split_ctx, X, n, d, &p, &r, &st);
	wall = (omp_get_wtime() - t0) * 1e3;
	gc_ap_gpu_last_phases(&ph);
	if (rc != GC_OK)
		printf("  n %lld %s: %s\n", (long long) n, gc_ap_precision_name(prec), st.message);
	else
	{
		double		k = (ph.ms_colsum + ph.ms_rows) / ph.iterations;
		double		floor5 = 5 * sz * nn / (tbs * 1e12) * 1e3 / ph.gpus;

		h = (r.ms_iterations - ph.ms_first) / r.iterations;
		printf("  %7lld  %-6s  %8.3f  %8.3f  %7.3f  %7.3f  %8.3f  %6.2f  %5.0f%%  %8.1f  %7.2f  %8.1f  %6.1f  %6d  %6d  %4d\n",
			   (long long) n, gc_ap_precision_name(prec), h, k,
			   ph.ms_colsum / ph.iterations, ph.ms_rows / ph.iterations,
			   floor5, 6 * sz * nn / (k * 1e-3) / 1e12,
			   100.0 * floor5 / h, ph.ms_similarity, ph.ms_first, ph.ms_alloc, wall / 1e3,
			   ph.row_keep, ph.row_prefetch, ph.gpus);
	}
	free(lab);
	free(ex);
	return h;
}

/* "yes" when two runs of n rows ended well with the same labels, exemplars and iterations */
static const char *
same_runs(gc_code rc1, const gc_ap_result *a, gc_code rc2, const gc_ap_result *b, int64_t n)
{
	return rc1 == GC_OK && rc2 == GC_OK &&
		memcmp(a->labels, b->labels, sizeof(int32_t) * n) == 0 &&
		memcmp(a->is_exemplar, b->is_exemplar, n) == 0 &&
		a->iterations == b->iterations ? "yes" : "NO";
}

/* the GPUs' least free memory */
static size_t
least_free(int ngpus)
{
	size_t		least = SIZE_MAX;

	for (int g = 0; g < ngpus; g++)
	{
		size_t		f,
					t;

		cudaSetDevice(g);
		if (cudaMemGetInfo(&f, &t) == cudaSuccess && f < least)
			least = f;
	}
	cudaSetDevice(0);
	return least == SIZE_MAX ? 0 : least;
}

/* whole calls (median preference) on the context's GPUs: ms, and the result */
static double
whole_call(const gc_ctx *ctx, const float *X, int64_t n, gc_ap_precision prec,
		   int32_t *lab, uint8_t *ex, gc_ap_result *r, gc_code *rc)
{
	gc_ap_params p = {0.5, false, 0, 200, 15, prec};
	gc_status	st;
	double		t0 = omp_get_wtime();

	memset(r, 0, sizeof(*r));
	r->labels = lab;
	r->is_exemplar = ex;
	*rc = gc_ap_on_gpu(ctx, X, n, 8, &p, r, &st);
	if (*rc != GC_OK)
		printf("  n %lld: %s\n", (long long) n, st.message);
	return (omp_get_wtime() - t0) * 1e3;
}

/*
 * S, R and A split over GPUs 0 and 1: per iteration against one GPU at
 * the sizes ns (-1: the largest one GPU holds; -2: the largest two hold),
 * then whole calls.
 */
static void
split_bench(const long *ns, int nns, double tbs)
{
	static const int gpus[2] = {0, 1};
	static const gc_ctx two = {.n_gpus = 2, .gpus = gpus};
	static const int64_t whole[] = {1000, 2000, 5000, 10000, 20000};

	printf("\nsplit over GPUs 0 and 1 (per iteration, columns as above; floor over both GPUs), and two / one:\n");
	for (int prec = 0; prec < 2; prec++)
		for (int i = 0; i < nns; i++)
			if (prec_wanted(prec))
			{
				int64_t		n = ns[i];
				float	   *X;
				double		h1 = NAN,
							h2;

				if (n == -1)
					n = gc_ap_gpu_max_rows(least_free(1) - ((size_t) 512 << 20), 2, (gc_ap_precision) prec);
				else if (n < 0)
					n = gc_ap_gpu_split_max_rows(least_free(2) - ((size_t) 512 << 20), 2,
												 (gc_ap_precision) prec, 2);
				X = tu_make_data(&rs, n, 2, DATA_BLOBS, 50);
				split_ctx = NULL;
				if (ns[i] != -2)
					h1 = per_iteration(X, n, 2, (gc_ap_precision) prec, tbs);
				split_ctx = &two;
				h2 = per_iteration(X, n, 2, (gc_ap_precision) prec, tbs);
				split_ctx = NULL;
				printf("  -> n %lld %s: two GPUs %.3f ms an iteration, one %.3f: %.3f\n", (long long) n,
					   gc_ap_precision_name((gc_ap_precision) prec), h2, h1, h2 / h1);
				free(X);
			}

	printf("\nwhole calls split (float8, median preference, damping 0.5, max_iter 200, convergence_iter 15), 8-d blobs:\n");
	printf("  %6s  %10s  %10s  %8s  %6s  %6s\n", "n", "one ms", "two ms", "two/one", "iters", "same");
	for (size_t i = 0; i < sizeof(whole) / sizeof(whole[0]); i++)
	{
		int64_t		n = whole[i];
		float	   *X = tu_make_data(&rs, n, 8, DATA_BLOBS, 10);
		int32_t    *la = malloc(4 * n),
				   *lb = malloc(4 * n);
		uint8_t    *ea = malloc(n),
				   *eb = malloc(n);
		gc_ap_result a,
					b;
		gc_code		rc1,
					rc2;
		double		t1 = whole_call(NULL, X, n, GC_AP_FLOAT8, la, ea, &a, &rc1),
					t2 = whole_call(&two, X, n, GC_AP_FLOAT8, lb, eb, &b, &rc2);

		printf("  %6lld  %10.1f  %10.1f  %8.2f  %6d  %6s\n", (long long) n, t1, t2, t2 / t1,
			   b.iterations, same_runs(rc1, &a, rc2, &b, n));
		free(la);
		free(lb);
		free(ea);
		free(eb);
		free(X);
	}
}

/* whole calls, default parameters (median preference), CPU and GPU */
static void
crossover(void)
{
	const int64_t ns[] = {250, 500, 1000, 2000, 3000, 5000};

	printf("\nwhole calls (median preference, damping 0.5, max_iter 200, convergence_iter 15), 8-d blobs:\n");
	printf("  %6s  %10s  %10s  %6s  %6s  %8s\n", "n", "CPU ms", "GPU ms", "CPU/GPU", "iters", "same");
	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
	{
		int64_t		n = ns[i];
		float	   *X = tu_make_data(&rs, n, 8, DATA_BLOBS, 10);
		gc_ap_params p = {0.5, false, 0, 200, 15, GC_AP_FLOAT8};
		gc_ap_result a,
					b;
		gc_status	st;
		int32_t    *la = malloc(4 * n),
				   *lb = malloc(4 * n);
		uint8_t    *ea = malloc(n),
				   *eb = malloc(n);
		double		t0,
					tc,
					tg;
		gc_code		rc1,
					rc2;

		memset(&a, 0, sizeof(a));
		memset(&b, 0, sizeof(b));
		a.labels = la, a.is_exemplar = ea;
		b.labels = lb, b.is_exemplar = eb;
		t0 = omp_get_wtime();
		rc1 = gc_ap_cpu(NULL, X, n, 8, &p, &a, &st);
		tc = (omp_get_wtime() - t0) * 1e3;
		t0 = omp_get_wtime();
		rc2 = gc_ap_on_gpu(NULL, X, n, 8, &p, &b, &st);
		tg = (omp_get_wtime() - t0) * 1e3;
		printf("  %6lld  %10.1f  %10.1f  %6.2f  %6d  %8s\n", (long long) n, tc, tg,
			   tc / tg, b.iterations, same_runs(rc1, &a, rc2, &b, n));
		free(la);
		free(lb);
		free(ea);
		free(eb);
		free(X);
	}
}

int
main(void)
{
	gc_cuda_device_info info;
	const char *env = getenv("BENCH_AP_N");
	const char *cross = getenv("BENCH_AP_CROSS");
	const char *kb = getenv("BENCH_AP_KEEP");
	const char *pf = getenv("BENCH_AP_PF");
	long		ns[16],
				pfs[8] = {-1};
	int			nns = 0,
				npf = 1;
	double		tbs;
	size_t		freeb,
				totalb;

	rs = tu_seed();
	if (getenv("BENCH_AP_ITERS") != NULL)
		iters = atoi(getenv("BENCH_AP_ITERS"));
	if (pf != NULL)
		npf = parse_list(pf, pfs, 8);
	gc_cuda_probe(0, &info);
	if (!info.usable)
	{
		printf("bench_ap_gpu: no usable GPU: %s\n", info.reason);
		return 1;
	}
	tbs = copy_bandwidth();
	cudaMemGetInfo(&freeb, &totalb);
	printf("bench_ap_gpu: %s, %d CPU threads, copy bandwidth %.2f TB/s (read + written), free %.1f GiB\n",
		   info.name, omp_get_max_threads(), tbs, freeb / 1073741824.0);

	if (env != NULL)
		nns = parse_list(env, ns, 16);
	else
	{
		ns[nns++] = 5000;
		ns[nns++] = 10000;
		ns[nns++] = 20000;
		ns[nns++] = 40000;
		ns[nns++] = -1;			/* the largest that fits */
	}

	printf("\nper iteration (%d iterations, 2-d blobs; host = kernels + the read-back of each iteration, the first pass left out; floor = 5 values an entry over the copy bandwidth; kept = columns of its row a row-pass block keeps in shared memory; pf = bytes of each of its next row's S, R and A it prefetches into L2):\n",
		   iters);
	printf("  %7s  %-6s  %8s  %8s  %7s  %7s  %8s  %6s  %6s  %8s  %7s  %8s  %6s  %6s  %6s  %4s\n",
		   "n", "prec", "host ms", "kern ms", "colsum", "rows", "floor ms",
		   "TB/s", "of fl", "S ms", "first", "alloc ms", "call s", "kept", "pf", "GPUs");
	for (int f = 0; f < npf; f++)
		for (int prec = 0; prec < 2; prec++)
			for (int i = 0; i < nns; i++)
				if (prec_wanted(prec))
		{
			int64_t		n = ns[i];
			float	   *X;

			if (n < 0)
			{
				cudaMemGetInfo(&freeb, &totalb);
				n = gc_ap_gpu_max_rows(freeb - ((size_t) 512 << 20), 2, (gc_ap_precision) prec);
			}
			X = tu_make_data(&rs, n, 2, DATA_BLOBS, 50);
			gc_ap_gpu_set_row_prefetch(pfs[f]);
			per_iteration(X, n, 2, (gc_ap_precision) prec, tbs);
			free(X);
		}
	gc_ap_gpu_set_row_prefetch(-1);

	if (kb != NULL)
	{
		long		kbs[8];
		int			nkb = parse_list(kb, kbs, 8);
		float	   *X = tu_make_data(&rs, 20000, 2, DATA_BLOBS, 50);

		printf("\nrow pass with shared memory a row keeps (n 20000):\n");
		for (int b = 0; b < nkb; b++)
		{
			gc_ap_gpu_set_row_keep(kbs[b]);
			printf(" keep %ld bytes:\n", kbs[b]);
			for (int prec = 0; prec < 2; prec++)
				if (prec_wanted(prec))
					per_iteration(X, 20000, 2, (gc_ap_precision) prec, tbs);
		}
		gc_ap_gpu_set_row_keep(-1);
		free(X);
	}

	if (cross == NULL || atoi(cross) != 0)
		crossover();

	{
		const char *sp = getenv("BENCH_AP_SPLIT");
		gc_cuda_device_info i1;

		gc_cuda_probe(1, &i1);
		if (i1.usable && (sp == NULL || atoi(sp) != 0))
		{
			long		sns[18];
			int			m = 0;

			for (int i = 0; i < nns && m < 16; i++)
				if (ns[i] > 0)
					sns[m++] = ns[i];
			sns[m++] = -1;
			sns[m++] = -2;
			split_bench(sns, m, tbs);
		}
	}
	return 0;
}
