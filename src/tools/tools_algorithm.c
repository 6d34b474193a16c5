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

const GcAlgorithm gc_kdistance_record = {
	.algo = GC_ALGO_KDISTANCE,
	.name = "k-distance",
	.function = "gpu_kdistance",
};

const GcAlgorithm gc_silhouette_record = {
	.algo = GC_ALGO_SILHOUETTE,
	.name = "silhouette",
	.function = "gpu_silhouette",
};
