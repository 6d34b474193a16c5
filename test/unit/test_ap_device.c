/*
 * test_ap_device.c — where affinity propagation runs (dispatch.c:
 * gc_ap_device_request, gc_choose_device_ap), with a GPU made up
 * (testutil.h): each precision's request, the CPU / GPU / auto rules, the
 * size below which 'auto' never probes the GPU, the memory check with its
 * largest n, on one GPU and split over the GPUs a call may split over
 * (run where the build has the GPU's memory formula, i.e. with CUDA), and
 * the rows from which a call may split (gc_ap_split_rows).
 */
#include <stdio.h>
#include <string.h>

#include "gpuclust_core.h"
#include "common/gpu.h"
#include "testutil.h"

static void
test_request(void)
{
	gc_device	dev;
	gc_status	st;

	for (int r = GC_DEVICE_AUTO; r <= GC_DEVICE_GPU; r++)
	{
		CHECK(gc_ap_device_request((gc_device) r, GC_AP_FLOAT8, &dev, &st) == GC_OK &&
			  dev == (gc_device) r, "float8 asks for %d", r);
		if (r == GC_DEVICE_CPU)
			CHECK(gc_ap_device_request((gc_device) r, GC_AP_FLOAT4, &dev, &st) == GC_EINVAL &&
				  dev == GC_DEVICE_CPU &&
				  strcmp(st.message, "affinity propagation in float4 runs only on the GPU") == 0,
				  "float4 on the CPU: %s", st.message);
		else
			CHECK(gc_ap_device_request((gc_device) r, GC_AP_FLOAT4, &dev, &st) == GC_OK &&
				  dev == GC_DEVICE_GPU, "float4 asks for the GPU under %d", r);
	}
}

/* gc_choose_device_ap, and whether it probed the GPU */
static gc_code
choose(gc_device requested, gc_ap_precision precision, int64_t n, int d,
	   const gc_gpu *gpu, gc_device *dev, char *note, gc_status *st,
	   bool *probed)
{
	gc_code		rc;

	tu_fake_reset(st);
	rc = gc_choose_device_ap(requested, precision, n, d, gpu, dev, note, 256, st);
	*probed = tu_fake.probes > 0;
	return rc;
}

static void
test_choose(void)
{
	gc_gpu		gpu = tu_fake_gpu();
	gc_device	dev;
	gc_status	st;
	char		note[256];
	bool		probed;
	const int64_t m = GC_AP_GPU_MIN_ROWS;

	/* no usable GPU */
	tu_fake.usable = false;
	CHECK(choose(GC_DEVICE_CPU, GC_AP_FLOAT8, 100000, 2, &gpu, &dev, note, &st, &probed) == GC_OK &&
		  dev == GC_DEVICE_CPU && !probed && note[0] == '\0', "cpu: the CPU, not probed");
	CHECK(choose(GC_DEVICE_AUTO, GC_AP_FLOAT8, m - 1, 2, &gpu, &dev, note, &st, &probed) == GC_OK &&
		  dev == GC_DEVICE_CPU && !probed, "auto, %lld rows: the CPU, not probed", (long long) (m - 1));
	CHECK(choose(GC_DEVICE_AUTO, GC_AP_FLOAT8, m, 2, &gpu, &dev, note, &st, &probed) == GC_OK &&
		  dev == GC_DEVICE_CPU && probed && note[0] == '\0', "auto, %lld rows, no GPU: the CPU, no note",
		  (long long) m);
	CHECK(choose(GC_DEVICE_GPU, GC_AP_FLOAT8, 10, 2, &gpu, &dev, note, &st, &probed) == GC_EDEVICE &&
		  strcmp(st.message, "no usable GPU: made up") == 0, "gpu: the reason: %s", st.message);
	CHECK(choose(GC_DEVICE_GPU, GC_AP_FLOAT8, 0, 0, &gpu, &dev, note, &st, &probed) == GC_EDEVICE,
		  "gpu, no rows: the reason: %s", st.message);
	CHECK(choose(GC_DEVICE_AUTO, GC_AP_FLOAT4, 10, 2, &gpu, &dev, note, &st, &probed) == GC_EDEVICE &&
		  probed && strcmp(st.message, "no usable GPU: made up") == 0,
		  "float4, auto, 10 rows: the GPU's reason, never the CPU: %s", st.message);
	CHECK(choose(GC_DEVICE_CPU, GC_AP_FLOAT4, 10, 2, &gpu, &dev, note, &st, &probed) == GC_EINVAL &&
		  dev == GC_DEVICE_CPU && !probed && strstr(st.message, "only on the GPU") != NULL,
		  "float4, cpu: refused before any probe: %s", st.message);
	/* gc_choose_device is float8's */
	CHECK(gc_choose_device(GC_DEVICE_AUTO, GC_ALGO_AP, m, 2, &gpu, &dev, &st) == GC_OK &&
		  dev == GC_DEVICE_CPU, "gc_choose_device, auto, no GPU");
	CHECK(gc_choose_device(GC_DEVICE_GPU, GC_ALGO_AP, m, 2, &gpu, &dev, &st) == GC_EDEVICE,
		  "gc_choose_device, gpu, no GPU");

	/* a usable GPU with room */
	tu_fake.usable = true;
	CHECK(choose(GC_DEVICE_AUTO, GC_AP_FLOAT8, m - 1, 2, &gpu, &dev, note, &st, &probed) == GC_OK &&
		  dev == GC_DEVICE_CPU && !probed, "auto, %lld rows: the CPU, not probed", (long long) (m - 1));
	CHECK(choose(GC_DEVICE_AUTO, GC_AP_FLOAT8, m, 64, &gpu, &dev, note, &st, &probed) == GC_OK &&
		  dev == GC_DEVICE_GPU && note[0] == '\0', "auto, %lld rows: the GPU", (long long) m);
	CHECK(choose(GC_DEVICE_AUTO, GC_AP_FLOAT4, 3, 2, &gpu, &dev, note, &st, &probed) == GC_OK &&
		  dev == GC_DEVICE_GPU, "float4, auto, 3 rows: the GPU");
	/* CUDA not started yet: the cold crossover */
	tu_fake.started = false;
	CHECK(choose(GC_DEVICE_AUTO, GC_AP_FLOAT8, GC_AP_GPU_MIN_ROWS_COLD - 1, 2, &gpu, &dev, note, &st,
				 &probed) == GC_OK && dev == GC_DEVICE_CPU && !probed,
		  "auto, cold, %d rows: the CPU, not probed", GC_AP_GPU_MIN_ROWS_COLD - 1);
	CHECK(choose(GC_DEVICE_AUTO, GC_AP_FLOAT8, GC_AP_GPU_MIN_ROWS_COLD, 2, &gpu, &dev, note, &st,
				 &probed) == GC_OK && dev == GC_DEVICE_GPU,
		  "auto, cold, %d rows: the GPU", GC_AP_GPU_MIN_ROWS_COLD);
	tu_fake.started = true;
	CHECK(choose(GC_DEVICE_GPU, GC_AP_FLOAT8, 1, 1, &gpu, &dev, note, &st, &probed) == GC_OK &&
		  dev == GC_DEVICE_GPU, "gpu, 1 row: the GPU");
	CHECK(choose(GC_DEVICE_CPU, GC_AP_FLOAT8, 100000, 2, &gpu, &dev, note, &st, &probed) == GC_OK &&
		  dev == GC_DEVICE_CPU && !probed, "cpu with a GPU: the CPU, not probed");
	CHECK(choose(GC_DEVICE_CPU, GC_AP_FLOAT4, 100, 2, &gpu, &dev, note, &st, &probed) == GC_EINVAL,
		  "float4, cpu, with a GPU: refused");
	CHECK(gc_choose_device(GC_DEVICE_AUTO, GC_ALGO_AP, m, 2, &gpu, &dev, &st) == GC_OK &&
		  dev == GC_DEVICE_GPU, "gc_choose_device, auto, a GPU");
}

/*
 * The GPU's memory: too small is ENOMEM naming the largest n, or under
 * 'auto' the CPU with a note; one GPU too small for a call that may split
 * over several, each holding its part.
 */
static void
test_memory(void)
{
	gc_gpu		gpu = tu_fake_gpu();
	gc_device	dev;
	gc_status	st;
	char		note[256],
				want[96];
	bool		probed;
	const int64_t n = 5000;
	const int	d = 8;
	size_t		need8 = gc_ap_gpu_mem_bytes(n, d, GC_AP_FLOAT8),
				need4 = gc_ap_gpu_mem_bytes(n, d, GC_AP_FLOAT4),
				two = gc_ap_gpu_split_mem_bytes(n, d, GC_AP_FLOAT8, 2),
				three = gc_ap_gpu_split_mem_bytes(n, d, GC_AP_FLOAT8, 3);
	int64_t		fit;

	if (need8 <= 1)
	{
		printf("test_ap_device: no GPU memory formula in this build (no CUDA): memory cases skipped\n");
		return;
	}
	tu_fake.usable = true;
	CHECK(need4 < need8 && need8 < SIZE_MAX, "float4 needs less: %zu < %zu", need4, need8);
	CHECK(gc_ap_gpu_max_rows(need8, d, GC_AP_FLOAT8) == n &&
		  gc_ap_gpu_max_rows(need8 - 1, d, GC_AP_FLOAT8) == n - 1,
		  "gc_ap_gpu_max_rows inverts gc_ap_gpu_mem_bytes");

	/* exactly enough: the GPU */
	tu_fake.mem = need8;
	CHECK(choose(GC_DEVICE_GPU, GC_AP_FLOAT8, n, d, &gpu, &dev, note, &st, &probed) == GC_OK &&
		  dev == GC_DEVICE_GPU, "gpu, exactly enough memory: the GPU");
	/* one byte short, by the probe's memory or by gpu.mem_limit */
	for (int by_limit = 0; by_limit <= 1; by_limit++)
	{
		tu_fake.mem = by_limit ? (size_t) 1 << 40 : need8 - 1;
		gpu.mem_limit = by_limit ? need8 - 1 : 0;
		fit = gc_ap_gpu_max_rows(need8 - 1, d, GC_AP_FLOAT8);
		snprintf(want, sizeof(want), "at most %lld rows fit", (long long) fit);
		CHECK(choose(GC_DEVICE_GPU, GC_AP_FLOAT8, n, d, &gpu, &dev, note, &st, &probed) == GC_ENOMEM &&
			  strstr(st.message, want) != NULL && strstr(st.message, "float8") != NULL,
			  "gpu, too little memory (%s): %s", by_limit ? "mem_limit" : "probe", st.message);
		CHECK(choose(GC_DEVICE_AUTO, GC_AP_FLOAT8, n, d, &gpu, &dev, note, &st, &probed) == GC_OK &&
			  dev == GC_DEVICE_CPU && strstr(note, want) != NULL,
			  "auto, too little memory: the CPU, with a note: %s", note);
		/* float4 fits where float8 does not */
		CHECK(choose(GC_DEVICE_AUTO, GC_AP_FLOAT4, n, d, &gpu, &dev, note, &st, &probed) == GC_OK &&
			  dev == GC_DEVICE_GPU, "float4, auto, in float8's memory less a byte: the GPU");
	}
	/* float4 too large: an error under 'auto' too */
	gpu.mem_limit = need4 - 1;
	snprintf(want, sizeof(want), "at most %lld rows fit",
			 (long long) gc_ap_gpu_max_rows(need4 - 1, d, GC_AP_FLOAT4));
	CHECK(choose(GC_DEVICE_AUTO, GC_AP_FLOAT4, n, d, &gpu, &dev, note, &st, &probed) == GC_ENOMEM &&
		  strstr(st.message, want) != NULL && strstr(st.message, "float4") != NULL,
		  "float4, auto, too little memory: %s", st.message);
	gpu.mem_limit = 0;
	tu_fake.mem = (size_t) 1 << 40;
	/* more rows than the GPU takes */
	CHECK(choose(GC_DEVICE_GPU, GC_AP_FLOAT8, (int64_t) INT32_MAX + 1, 2, &gpu, &dev, note, &st,
				 &probed) == GC_ENOMEM, "gpu, 2^31 rows: %s", st.message);

	/*
	 * A probe whose call may split over several GPUs (the GPU worker's): a
	 * call too large for one GPU goes to the GPU when each GPU's part of the
	 * split over them fits; the message names the largest n that fits split.
	 */
	CHECK(three < two && two < need8 && gc_ap_gpu_split_mem_bytes(n, d, GC_AP_FLOAT8, 1) == need8,
		  "a split's part is smaller: %zu < %zu < %zu", three, two, need8);

	/* one GPU's memory too small for one GPU's need, but the call may split */
	tu_fake.mem = two;
	tu_fake.gpus = 1;
	snprintf(want, sizeof(want), "GPU 0 has %zu MiB for it: at most %lld rows fit",
			 two >> 20, (long long) gc_ap_gpu_max_rows(two, d, GC_AP_FLOAT8));
	CHECK(choose(GC_DEVICE_GPU, GC_AP_FLOAT8, n, d, &gpu, &dev, note, &st, &probed) == GC_ENOMEM &&
		  strstr(st.message, want) != NULL, "one GPU (gpus 1), two GPUs' part of memory: %s", st.message);
	tu_fake.gpus = 0;			/* a probe that leaves it unset: one GPU */
	CHECK(choose(GC_DEVICE_GPU, GC_AP_FLOAT8, n, d, &gpu, &dev, note, &st, &probed) == GC_ENOMEM,
		  "gpus 0 is one GPU: %s", st.message);
	for (int gpus = 2; gpus <= 4; gpus++)
	{
		tu_fake.gpus = gpus;
		CHECK(choose(GC_DEVICE_GPU, GC_AP_FLOAT8, n, d, &gpu, &dev, note, &st, &probed) == GC_OK &&
			  dev == GC_DEVICE_GPU, "gpu, %d GPUs, each with two GPUs' part: the GPU", gpus);
		CHECK(choose(GC_DEVICE_AUTO, GC_AP_FLOAT8, n, d, &gpu, &dev, note, &st, &probed) == GC_OK &&
			  dev == GC_DEVICE_GPU && note[0] == '\0', "auto, %d GPUs: the GPU", gpus);
	}
	/* a byte short of two GPUs' part: three GPUs fit, two do not */
	tu_fake.mem = two - 1;
	tu_fake.gpus = 3;
	CHECK(choose(GC_DEVICE_GPU, GC_AP_FLOAT8, n, d, &gpu, &dev, note, &st, &probed) == GC_OK &&
		  dev == GC_DEVICE_GPU, "gpu, 3 GPUs, a byte short of two GPUs' part: the GPU");
	tu_fake.gpus = 2;
	snprintf(want, sizeof(want), "each of 2 GPUs has %zu MiB for it: at most %lld rows fit",
			 (two - 1) >> 20, (long long) gc_ap_gpu_split_max_rows(two - 1, d, GC_AP_FLOAT8, 2));
	CHECK(gc_ap_gpu_split_max_rows(two - 1, d, GC_AP_FLOAT8, 2) == n - 1 &&
		  gc_ap_gpu_split_max_rows(two, d, GC_AP_FLOAT8, 2) == n,
		  "gc_ap_gpu_split_max_rows inverts gc_ap_gpu_split_mem_bytes");
	CHECK(choose(GC_DEVICE_GPU, GC_AP_FLOAT8, n, d, &gpu, &dev, note, &st, &probed) == GC_ENOMEM &&
		  strstr(st.message, want) != NULL && strstr(st.message, "on each GPU") != NULL,
		  "gpu, 2 GPUs, a byte short: %s", st.message);
	CHECK(choose(GC_DEVICE_AUTO, GC_AP_FLOAT8, n, d, &gpu, &dev, note, &st, &probed) == GC_OK &&
		  dev == GC_DEVICE_CPU && strstr(note, want) != NULL,
		  "auto, 2 GPUs, a byte short: the CPU, with a note: %s", note);
	/* gpuclust.gpu_memory_limit caps each GPU's memory alike */
	tu_fake.mem = (size_t) 1 << 40;
	gpu.mem_limit = two - 1;
	CHECK(choose(GC_DEVICE_GPU, GC_AP_FLOAT8, n, d, &gpu, &dev, note, &st, &probed) == GC_ENOMEM &&
		  strstr(st.message, want) != NULL, "gpu, 2 GPUs, mem_limit a byte short: %s", st.message);
	gpu.mem_limit = 0;
	/* the others' rules stay one GPU's: the k-distances of as many bytes */
	tu_fake.mem = gc_kdistance_gpu_mem_bytes(n, d, 4) - 1;
	tu_fake.gpus = 4;
	tu_fake_reset(&st);
	CHECK(gc_choose_device_kdistance(GC_DEVICE_GPU, n, d, 4, &gpu, &dev, note, 256, &st) == GC_ENOMEM,
		  "the k-distances never split: %s", st.message);
	tu_fake.gpus = 1;
	tu_fake.mem = (size_t) 1 << 40;
}

/* gc_ap_split_rows: a 256th of k-means' split rows, at least 2 */
static void
test_split_rows(void)
{
	CHECK(gc_ap_split_rows(1 << 22) == 16384, "the default's: %lld",
		  (long long) gc_ap_split_rows(1 << 22));
	CHECK(gc_ap_split_rows(100000) == 390, "100,000: %lld",
		  (long long) gc_ap_split_rows(100000));
	CHECK(gc_ap_split_rows(1) == 2 && gc_ap_split_rows(512) == 2 &&
		  gc_ap_split_rows(767) == 2 && gc_ap_split_rows(768) == 3,
		  "at least 2: %lld %lld", (long long) gc_ap_split_rows(1),
		  (long long) gc_ap_split_rows(768));
	CHECK(gc_ap_split_rows(INT32_MAX) == INT32_MAX / 256, "INT32_MAX: %lld",
		  (long long) gc_ap_split_rows(INT32_MAX));
}

int
main(void)
{
	test_request();
	test_choose();
	test_memory();
	test_split_rows();
	return test_summary("test_ap_device");
}
