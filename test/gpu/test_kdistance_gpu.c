/*
 * test_kdistance_gpu.c — the GPU k-distances (cuda/dbscan/kdistance.cu) against
 * the CPU's (src/core/tools/kdistance.c), bit for bit, on fresh random data of
 * many shapes; small cases also against a brute force (every distance
 * sorted).  Needs a GPU.
 *
 *   shapes   n 1 to 300,000 (one leaf, a leaf's edges at 32 and 64, deep
 *            trees); d 1 to 300 (each query path: d <= 4, 8, 16 in
 *            registers, and the rows read from memory above 16); k 1, 2,
 *            small, a leaf's size, large, n - 1 and n; uniform rows, blobs,
 *            duplicates (every distance tied) and integer grids (many
 *            ties); rows far apart (1e18: squares overflow to infinity).
 *   batches  k large enough that the heaps of one batch of queries cap the
 *            batch, so the queries run in several launches.
 *   errors   n 0, k 0, k > n (GC_EINVAL with the CPU's message), the
 *            cancel flag (GC_ECANCEL), as the CPU.
 *
 * GPUCLUST_TEST_SEED fixes the data; GPUCLUST_TEST_QUICK=1 runs a smaller
 * set (for compute-sanitizer), =2 a tiny one (for racecheck).
 */
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "common/gpu.h"
#include "common/metric.h"

static uint64_t rs;
static int	quick;
static int	cases;

static int
cmp_f(const void *a, const void *b)
{
	float		x = *(const float *) a,
				y = *(const float *) b;

	return x < y ? -1 : x > y;
}

/* k-th smallest gc_dist2 from row i, by sorting all n distances */
static float
brute_kdist2(const float *X, int64_t n, int d, int64_t i, int64_t k, float *buf)
{
	for (int64_t j = 0; j < n; j++)
		buf[j] = gc_dist2(X + i * d, X + j * d, d);
	qsort(buf, (size_t) n, sizeof(float), cmp_f);
	return buf[k - 1];
}

/*
 * One case: X (n x d) at k, GPU = CPU bit for bit (and = the brute force
 * when brute); what names it in a failure.
 */
static void
check_case(const float *X, int64_t n, int d, int64_t k, bool brute,
		   const char *what)
{
	float	   *cpu = malloc(sizeof(float) * (size_t) n),
			   *gpu = malloc(sizeof(float) * (size_t) n);
	gc_status	st;
	gc_ctx		ctx = {.n_threads = 0, .cancel_flags = {NULL, NULL}};
	int64_t		bad = 0,
				first = -1;

	cases++;
	CHECK(gc_kdistance_cpu(&ctx, X, n, d, k, cpu, &st) == GC_OK, "%s: cpu: %s", what, st.message);
	memset(gpu, 0xff, sizeof(float) * (size_t) n);
	CHECK(gc_kdistance_on_gpu(&ctx, X, n, d, k, gpu, &st) == GC_OK, "%s: gpu: %s", what, st.message);
	for (int64_t i = 0; i < n; i++)
		if (memcmp(&cpu[i], &gpu[i], sizeof(float)) != 0)
		{
			if (first < 0)
				first = i;
			bad++;
		}
	CHECK(bad == 0, "%s n=%lld d=%d k=%lld: %lld rows differ (row %lld: cpu %.9g, gpu %.9g)",
		  what, (long long) n, d, (long long) k, (long long) bad, (long long) first,
		  first >= 0 ? cpu[first] : 0.0, first >= 0 ? gpu[first] : 0.0);
	if (brute)
	{
		float	   *buf = malloc(sizeof(float) * (size_t) n);

		bad = 0;
		for (int64_t i = 0; i < n; i++)
		{
			float		want = brute_kdist2(X, n, d, i, k, buf);

			bad += memcmp(&want, &gpu[i], sizeof(float)) != 0;
		}
		CHECK(bad == 0, "%s n=%lld d=%d k=%lld: %lld rows differ from the brute force",
			  what, (long long) n, d, (long long) k, (long long) bad);
		free(buf);
	}
	free(cpu);
	free(gpu);
}

/*
 * Random data of kind, checked at nks values of k: a typical min_pts
 * first, then others among 1, 2, a leaf's size, n / 3 + 1, n - 1 and n (only
 * up to a leaf's size when small_k: large k on large n is n^2 work on the
 * CPU).
 */
static void
run_shape(int64_t n, int d, data_kind kind, int nks, bool brute, bool small_k)
{
	float	   *X = tu_make_data(&rs, n, d, kind, 1 + (int) (tu_next(&rs) % 12));
	int64_t		ks[7] = {2 + (int64_t) (tu_next(&rs) % 20), 1, 2,
		32 + (int64_t) (tu_next(&rs) % 40), n / 3 + 1, n - 1, n};
	int			choices = small_k ? 4 : 7;

	for (int i = 0; i < nks; i++)
	{
		int64_t		k = ks[i == 0 ? 0 : 1 + (int) (tu_next(&rs) % (choices - 1))];

		if (k >= 1 && k <= n)
			check_case(X, n, d, k, brute, data_name[kind]);
	}
	free(X);
}

/* Rows far apart: squares overflow to infinity, the CPU's heap keeps it. */
static void
test_overflow(void)
{
	int64_t		n = 500;
	int			d = 3;
	float	   *X = tu_make_data(&rs, n, d, DATA_UNIFORM, 1);

	for (int64_t i = 0; i < n * d; i++)
		X[i] *= i % 7 == 0 ? 4e18f : 1.0f;
	check_case(X, n, d, 5, true, "overflow");
	check_case(X, n, d, n, true, "overflow");
	free(X);
}

/* k large: one batch of queries cannot hold every heap. */
static void
test_batches(void)
{
	int64_t		n = quick ? 3000 : 40000;
	float	   *X = tu_make_data(&rs, n, 2, DATA_BLOBS, 5);

	/* 256 MiB of heaps / (4 k) queries a batch: several batches */
	check_case(X, n, 2, quick ? 2900 : 20000, false, "batches");
	free(X);
}

static void
test_errors(void)
{
	float		X[6] = {0, 0, 1, 1, 5, 5},
				kd[3];
	gc_status	st,
				cst;
	volatile sig_atomic_t flag = 1;
	gc_ctx		ctx;

	CHECK(gc_kdistance_on_gpu(NULL, X, 0, 2, 1, kd, &st) == GC_EINVAL, "n 0 accepted");
	CHECK(gc_kdistance_on_gpu(NULL, X, 3, 2, 0, kd, &st) == GC_EINVAL, "k 0 accepted");
	CHECK(gc_kdistance_on_gpu(NULL, X, 3, 2, 4, kd, &st) == GC_EINVAL, "k > n accepted");
	(void) gc_kdistance_cpu(NULL, X, 3, 2, 4, kd, &cst);
	CHECK(strcmp(st.message, cst.message) == 0, "message '%s', the CPU's '%s'",
		  st.message, cst.message);
	memset(&ctx, 0, sizeof(ctx));
	ctx.cancel_flags[0] = &flag;
	CHECK(gc_kdistance_on_gpu(&ctx, X, 3, 2, 1, kd, &st) == GC_ECANCEL, "cancel flag ignored");
	CHECK(gc_kdistance_gpu_mem_bytes(1000000, 8, 10) > (size_t) 1000000 * 8 * 8,
		  "the memory bound counts the rows twice");
}

int
main(void)
{
	uint64_t	seed = tu_seed();
	const char *q = getenv("GPUCLUST_TEST_QUICK");
	gc_cuda_device_info info;

	quick = q ? atoi(q) : 0;
	rs = seed;
	gc_cuda_probe(0, &info);
	if (!info.usable)
	{
		printf("test_kdistance_gpu: no usable GPU: %s\n", info.reason);
		return 1;
	}
	printf("test_kdistance_gpu: seed %llu (GPUCLUST_TEST_SEED to repeat), %s, quick %d\n",
		   (unsigned long long) seed, info.name, quick);

	test_errors();
	{
		/* small: every path, against the brute force too */
		static const int64_t ns[] = {1, 2, 3, 31, 32, 33, 63, 64, 65, 100, 129, 700, 2000};
		static const int dims[] = {1, 2, 3, 4, 5, 8, 9, 16, 17, 40, 300};
		size_t		nn = quick >= 2 ? 6 : sizeof(ns) / sizeof(ns[0]);
		size_t		nd = quick >= 2 ? 4 : sizeof(dims) / sizeof(dims[0]);

		for (size_t i = 0; i < nn; i++)
			for (size_t j = 0; j < nd; j++)
				run_shape(ns[i], dims[j], (data_kind) ((i + j) % 4),
						  quick >= 2 ? 1 : 3, true, false);
	}
	if (quick < 2)
	{
		test_overflow();
		test_batches();
	}
	if (!quick)
	{
		/* large: deep trees, against the CPU */
		static const struct
		{
			int64_t		n;
			int			d;
		}			big[] = {
			{300000, 2}, {200000, 3}, {100000, 4}, {100000, 8}, {50000, 16},
			{30000, 32}, {10000, 100}, {150000, 1},
		};

		/* uniform and blobs; ties (few distinct rows) at 20,000 below */
		for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++)
			for (int kind = DATA_UNIFORM; kind <= DATA_BLOBS; kind++)
				run_shape(big[i].n, big[i].d, (data_kind) kind, 2, false, true);
		for (int d = 1; d <= 8; d *= 2)
		{
			run_shape(20000, d, DATA_DUPLICATES, 2, false, true);
			run_shape(20000, d, DATA_GRID, 2, false, true);
		}
	}
	else if (quick == 1)
	{
		run_shape(20000, 2, DATA_BLOBS, 2, false, true);
		run_shape(5000, 20, DATA_GRID, 2, false, true);
	}
	printf("test_kdistance_gpu: %d cases\n", cases);
	return test_summary("test_kdistance_gpu");
}
