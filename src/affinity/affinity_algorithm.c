/*-------------------------------------------------------------------------
 *
 * affinity_algorithm.c
 *	  The record of affinity propagation in the registry
 *	  (common/algorithm.h); its result carries its GPU phases' times.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "affinity/affinity_glue.h"
#include "common/algorithm.h"

const GcAlgorithm gc_ap_record = {
	.algo = GC_ALGO_AP,
	.name = "affinity propagation",
	.function = "gpu_affinity_propagation",
	.proc = &gc_ap_proc,
};
