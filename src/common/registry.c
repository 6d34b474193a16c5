/*-------------------------------------------------------------------------
 *
 * registry.c
 *	  The table of algorithms, indexed by gc_algorithm: each entry is the
 *	  record its folder defines (see algorithm.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/algorithm.h"

static const GcAlgorithm *const algorithms[GC_ALGO_COUNT] = {
	[GC_ALGO_KMEANS] = &gc_kmeans_record,
	[GC_ALGO_DBSCAN] = &gc_dbscan_record,
	[GC_ALGO_AP] = &gc_ap_record,
	[GC_ALGO_KDISTANCE] = &gc_kdistance_record,
	[GC_ALGO_SILHOUETTE] = &gc_silhouette_record,
	[GC_ALGO_KMEANS_LABELS] = &gc_kmeans_labels_record,
	[GC_ALGO_HDBSCAN] = &gc_hdbscan_record,
};

const GcAlgorithm *
gc_algorithm_find(int algo)
{
	if (algo < 0 || algo >= GC_ALGO_COUNT)
		return NULL;
	return algorithms[algo];
}

const GcAlgorithm *
gc_algorithm_of(gc_algorithm algo)
{
	const GcAlgorithm *a = gc_algorithm_find((int) algo);

	if (a == NULL)
		elog(ERROR, "unknown algorithm %d", (int) algo);
	Assert(a->algo == algo);
	return a;
}

/* The name of algo in messages. */
const char *
gc_algorithm_name(gc_algorithm algo)
{
	return gc_algorithm_of(algo)->name;
}

/* The SQL function of algo (jobs, timings). */
const char *
gc_algorithm_function(gc_algorithm algo)
{
	return gc_algorithm_of(algo)->function;
}

const char *
gc_algorithm_gpu_phases(gc_algorithm algo, gc_device ran, int64 n)
{
	const GcAlgorithm *a = gc_algorithm_of(algo);

	if (n == 0 || ran != GC_DEVICE_GPU || a->gpu_phases == NULL)
		return "";
	return a->gpu_phases(n);
}
