/*
 * test_tools_device.c — where gpu_kdistance and gpu_silhouette run
 * (dispatch.c: gc_choose_device_kdistance, gc_choose_device_silhouette,
 * gc_silhouette_rows), with a GPU made up (testutil.h): the CPU / GPU /
 * auto rules, the warm and cold sizes below which 'auto' never probes the
 * GPU, the rows the GPU takes at most, and the memory check with its note
 * (run where the build has the GPU's memory formulas, i.e. with CUDA).
 */
#include <stdio.h>
#include <string.h>

#include "gpuclust_core.h"
#include "common/gpu.h"
#include "testutil.h"

/* One tool: its name, its crossovers, its largest n and its message beyond. */
typedef struct Tool
{
	const char *name;
	gc_algorithm algo;
	int64_t		min_rows,
				min_rows_cold,
				max_n;
	const char *too_many;
} Tool;

static const Tool tools[] = {
	{"kdistance", GC_ALGO_KDISTANCE, GC_KDISTANCE_GPU_MIN_ROWS,
	GC_KDISTANCE_GPU_MIN_ROWS_COLD, GC_DBSCAN_GPU_MAX_N, "the GPU k-distances take at most"},
	{"silhouette", GC_ALGO_SILHOUETTE, GC_SILHOUETTE_GPU_MIN_ROWS,
	GC_SILHOUETTE_GPU_MIN_ROWS_COLD, INT32_MAX, "the GPU silhouette scores at most"},
};

/* t's GPU memory for n rows of d features (k = 10; 7 clusters) */
static size_t
tool_mem(const Tool *t, int64_t n, int d)
{
	return t->algo == GC_ALGO_KDISTANCE ? gc_kdistance_gpu_mem_bytes(n, d, 10) :
		gc_silhouette_gpu_mem_bytes(n, d, 7);
}

/* t's choice (k = 10; 7 clusters), and whether it probed the GPU */
static gc_code
choose(const Tool *t, gc_device requested, int64_t n, int d,
	   const gc_gpu *gpu, gc_device *dev, char *note, gc_status *st,
	   bool *probed)
{
	gc_code		rc;

	tu_fake_reset(st);
	note[0] = 'x';
	*dev = (gc_device) -1;
	rc = t->algo == GC_ALGO_KDISTANCE ?
		gc_choose_device_kdistance(requested, n, d, 10, gpu, dev, note, 256, st) :
		gc_choose_device_silhouette(requested, n, d, 7, gpu, dev, note, 256, st);
	*probed = tu_fake.probes > 0;
	return rc;
}

static void
test_tool(const Tool *t)
{
	gc_gpu		gpu = tu_fake_gpu();
	gc_device	dev;
	gc_status	st;
	char		note[256];
	bool		probed;
	const int64_t m = t->min_rows,
				mc = t->min_rows_cold;

	/* no usable GPU */
	tu_fake.usable = false;
	tu_fake.started = true;
	tu_fake.mem = (size_t) 1 << 40;
	CHECK(choose(t, GC_DEVICE_CPU, 1000000, 2, &gpu, &dev, note, &st, &probed) == GC_OK &&
		  dev == GC_DEVICE_CPU && !probed && note[0] == '\0', "%s, cpu: the CPU, not probed", t->name);
	CHECK(choose(t, GC_DEVICE_AUTO, m - 1, 2, &gpu, &dev, note, &st, &probed) == GC_OK &&
		  dev == GC_DEVICE_CPU && !probed, "%s, auto, %lld rows: the CPU, not probed", t->name,
		  (long long) (m - 1));
	CHECK(choose(t, GC_DEVICE_AUTO, m, 2, &gpu, &dev, note, &st, &probed) == GC_OK &&
		  dev == GC_DEVICE_CPU && probed && note[0] == '\0',
		  "%s, auto, %lld rows, no GPU: the CPU, no note", t->name, (long long) m);
	CHECK(choose(t, GC_DEVICE_GPU, 10, 2, &gpu, &dev, note, &st, &probed) == GC_EDEVICE &&
		  dev == GC_DEVICE_CPU && strcmp(st.message, "no usable GPU: made up") == 0,
		  "%s, gpu: the reason: %s", t->name, st.message);
	CHECK(gc_choose_device(GC_DEVICE_GPU, t->algo, m, 2, &gpu, &dev, &st) == GC_EDEVICE,
		  "%s, gc_choose_device, gpu, no GPU", t->name);
	CHECK(gc_choose_device(GC_DEVICE_AUTO, t->algo, m, 2, &gpu, &dev, &st) == GC_OK &&
		  dev == GC_DEVICE_CPU, "%s, gc_choose_device, auto, no GPU", t->name);

	/* a usable GPU with room */
	tu_fake.usable = true;
	CHECK(choose(t, GC_DEVICE_AUTO, m - 1, 2, &gpu, &dev, note, &st, &probed) == GC_OK &&
		  dev == GC_DEVICE_CPU && !probed, "%s, auto, warm, %lld rows: the CPU, not probed",
		  t->name, (long long) (m - 1));
	CHECK(choose(t, GC_DEVICE_AUTO, m, 16, &gpu, &dev, note, &st, &probed) == GC_OK &&
		  dev == GC_DEVICE_GPU && note[0] == '\0', "%s, auto, warm, %lld rows: the GPU", t->name,
		  (long long) m);
	CHECK(choose(t, GC_DEVICE_GPU, 2, 1, &gpu, &dev, note, &st, &probed) == GC_OK &&
		  dev == GC_DEVICE_GPU, "%s, gpu, 2 rows: the GPU", t->name);
	CHECK(choose(t, GC_DEVICE_CPU, 1000000, 2, &gpu, &dev, note, &st, &probed) == GC_OK &&
		  dev == GC_DEVICE_CPU && !probed, "%s, cpu with a GPU: the CPU, not probed", t->name);
	CHECK(gc_choose_device(GC_DEVICE_AUTO, t->algo, m, 2, &gpu, &dev, &st) == GC_OK &&
		  dev == GC_DEVICE_GPU, "%s, gc_choose_device, auto, a GPU", t->name);
	/* CUDA not started yet: the cold crossover */
	tu_fake.started = false;
	CHECK(choose(t, GC_DEVICE_AUTO, mc - 1, 2, &gpu, &dev, note, &st, &probed) == GC_OK &&
		  dev == GC_DEVICE_CPU && !probed, "%s, auto, cold, %lld rows: the CPU, not probed",
		  t->name, (long long) (mc - 1));
	CHECK(choose(t, GC_DEVICE_AUTO, mc, 2, &gpu, &dev, note, &st, &probed) == GC_OK &&
		  dev == GC_DEVICE_GPU, "%s, auto, cold, %lld rows: the GPU", t->name, (long long) mc);
	CHECK(choose(t, GC_DEVICE_GPU, 2, 2, &gpu, &dev, note, &st, &probed) == GC_OK &&
		  dev == GC_DEVICE_GPU, "%s, gpu, cold, 2 rows: the GPU", t->name);
	tu_fake.started = true;

	/* more rows than the GPU takes */
	CHECK(choose(t, GC_DEVICE_GPU, t->max_n + 1, 2, &gpu, &dev, note, &st, &probed) == GC_ENOMEM &&
		  dev == GC_DEVICE_CPU && strstr(st.message, t->too_many) != NULL,
		  "%s, gpu, %lld rows: %s", t->name, (long long) t->max_n + 1, st.message);
	CHECK(choose(t, GC_DEVICE_AUTO, t->max_n + 1, 2, &gpu, &dev, note, &st, &probed) == GC_OK &&
		  dev == GC_DEVICE_CPU && strstr(note, t->too_many) != NULL,
		  "%s, auto, %lld rows: the CPU with a note: %s", t->name, (long long) t->max_n + 1, note);

	/* the GPU's memory, where the build has the formula */
	if (tool_mem(t, 100000, 8) == 0)
	{
		printf("test_tools_device: %s: no GPU memory formula in this build (no CUDA): memory cases skipped\n",
			   t->name);
		return;
	}
	tu_fake.mem = tool_mem(t, 100000, 8);
	CHECK(choose(t, GC_DEVICE_GPU, 100000, 8, &gpu, &dev, note, &st, &probed) == GC_OK &&
		  dev == GC_DEVICE_GPU, "%s, gpu, just fits: the GPU", t->name);
	tu_fake.mem--;
	CHECK(choose(t, GC_DEVICE_GPU, 100000, 8, &gpu, &dev, note, &st, &probed) == GC_ENOMEM &&
		  dev == GC_DEVICE_CPU && strstr(st.message, "MiB of GPU memory") != NULL,
		  "%s, gpu, a byte short: %s", t->name, st.message);
	CHECK(choose(t, GC_DEVICE_AUTO, 100000, 8, &gpu, &dev, note, &st, &probed) == GC_OK &&
		  dev == GC_DEVICE_CPU && st.code == GC_OK &&
		  strstr(note, "MiB of GPU memory") != NULL,
		  "%s, auto, a byte short: the CPU with a note: %s", t->name, note);
	tu_fake.mem = (size_t) 1 << 40;
}

static void
test_rows(void)
{
	int32_t		labels[6] = {0, -1, 1, 1, -1, 2};

	CHECK(gc_silhouette_rows(labels, 6, 0) == 4, "4 labelled rows");
	CHECK(gc_silhouette_rows(labels, 6, 3) == 3, "sample of 3");
	CHECK(gc_silhouette_rows(labels, 6, 4) == 4, "sample of 4: all");
	CHECK(gc_silhouette_rows(labels, 6, 100) == 4, "sample of 100: all");
	CHECK(gc_silhouette_rows(labels, 0, 0) == 0, "no rows");
}

int
main(void)
{
	for (size_t i = 0; i < sizeof(tools) / sizeof(tools[0]); i++)
		test_tool(&tools[i]);
	test_rows();
	return test_summary("test_tools_device");
}
