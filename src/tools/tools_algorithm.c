/*-------------------------------------------------------------------------
 *
 * tools_algorithm.c
 *	  The records of the k-distances and the silhouette in the registry
 *	  (common/algorithm.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/algorithm.h"
#include "tools/tools_glue.h"

const GcAlgorithm gc_kdistance_record = {
	.algo = GC_ALGO_KDISTANCE,
	.name = "k-distance",
	.function = "gpu_kdistance",
	.proc = &gc_kdistance_proc,
};

const GcAlgorithm gc_silhouette_record = {
	.algo = GC_ALGO_SILHOUETTE,
	.name = "silhouette",
	.function = "gpu_silhouette",
	.proc = &gc_silhouette_proc,
};
