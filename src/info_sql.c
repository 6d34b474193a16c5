/*-------------------------------------------------------------------------
 *
 * info_sql.c
 *	  gpuclust_info() RETURNS TABLE (key text, value text)
 *
 * Says whether this build has CUDA, whether the GPU is usable (and why
 * not), the device's name, memory and compute capability, and which device
 * 'auto' picks for a problem big enough for the GPU (k-means: n·k·d at
 * least auto_kmeans_gpu_min_work; smaller ones run on the CPU).  The GPU
 * is probed here, lazily, in the calling backend: never in _PG_init or the
 * postmaster; the probe is cached per backend, the free memory read anew.
 * cpu_threads is the effective thread count of a call (gpuclust.cpu_threads
 * capped by gpuclust.max_cpu_threads and the cores); memory_available_bytes
 * the memory the O(n^2) check compares with (MemAvailable, or less under a
 * cgroup limit).  The set of keys is the same on every build; values that do
 * not apply are NULL.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/tuplestore.h"

#include "gpuclust.h"
#include "core/gpu.h"

PG_FUNCTION_INFO_V1(gpuclust_info);

static void
put(ReturnSetInfo *rsinfo, const char *key, const char *value)
{
	Datum		values[2];
	bool		nulls[2] = {false, value == NULL};

	values[0] = CStringGetTextDatum(key);
	values[1] = value ? CStringGetTextDatum(value) : (Datum) 0;
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

static const char *
auto_device(gc_algorithm algo)
{
	gc_status	st = {GC_OK, ""};
	gc_device	chosen;

	if (gc_glue_try_choose_device(GC_DEVICE_AUTO, algo, 0, 0, &chosen,
								  &st) != GC_OK)
		return psprintf("none (%s)", st.message);
	return gc_device_name(chosen);
}

Datum
gpuclust_info(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	gc_ctx		ctx;

	InitMaterializedSRF(fcinfo, 0);
	gc_glue_ctx(&ctx);

	{
		gc_cuda_device_info info;
		sigset_t	old;

		/* the probe may initialise CUDA, which starts threads */
		memset(&info, 0, sizeof(info));
		gc_glue_signals_block(&old);
		gc_cuda_probe_cached(gpuclust_gpu_device_id, &info);
		gc_glue_signals_restore(&old);

		put(rsinfo, "cuda_build", GC_CUDA_BUILD ? "true" : "false");
		put(rsinfo, "cuda_runtime_version",
			info.runtime_version > 0 ?
			psprintf("%d.%d", info.runtime_version / 1000,
					 (info.runtime_version % 1000) / 10) : NULL);
		put(rsinfo, "cuda_driver_version",
			info.driver_version > 0 ?
			psprintf("%d.%d", info.driver_version / 1000,
					 (info.driver_version % 1000) / 10) : NULL);
		put(rsinfo, "gpu_device_count",
			GC_CUDA_BUILD ? psprintf("%d", info.device_count) : NULL);
		put(rsinfo, "gpu_device_id", psprintf("%d", gpuclust_gpu_device_id));
		put(rsinfo, "gpu_usable", info.usable ? "true" : "false");
		put(rsinfo, "gpu_reason", info.usable ? NULL : pstrdup(info.reason));
		put(rsinfo, "gpu_name", info.usable ? pstrdup(info.name) : NULL);
		put(rsinfo, "gpu_memory_total_bytes",
			info.usable ? psprintf("%zu", info.total_mem) : NULL);
		put(rsinfo, "gpu_memory_free_bytes",
			info.usable ? psprintf("%zu", info.free_mem) : NULL);
		put(rsinfo, "gpu_compute_capability",
			info.usable ? psprintf("%d.%d", info.cc_major, info.cc_minor) : NULL);
	}

	put(rsinfo, "device_setting", gc_device_name((gc_device) gpuclust_device));
	put(rsinfo, "auto_device_kmeans", auto_device(GC_ALGO_KMEANS));
	put(rsinfo, "auto_device_dbscan", auto_device(GC_ALGO_DBSCAN));
	put(rsinfo, "auto_kmeans_gpu_min_work",
		psprintf("%.0f", (double) GC_KMEANS_GPU_MIN_WORK));
	/* the threads a call may use: the settings, capped by the ceiling and the cores */
	put(rsinfo, "cpu_threads", psprintf("%d", gc_threads(&ctx)));
	{
		size_t		avail = gc_host_memory();

		/* what gpu_affinity_propagation's memory check sees */
		put(rsinfo, "memory_available_bytes",
			avail == SIZE_MAX ? NULL : psprintf("%zu", avail));
	}

	return (Datum) 0;
}
