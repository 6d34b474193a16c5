/*-------------------------------------------------------------------------
 *
 * gpuclust.c
 *	  Module entry point: PG_MODULE_MAGIC and the gpuclust.* GUCs.
 *
 * _PG_init never touches CUDA: the library may be loaded into the
 * postmaster (shared_preload_libraries), and CUDA is not fork-safe.  The
 * GPU is probed lazily, by the backend that first needs it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "fmgr.h"
#include "utils/guc.h"

#include "gpuclust.h"

PG_MODULE_MAGIC;

int			gpuclust_device = GC_DEVICE_AUTO;
int			gpuclust_cpu_threads = 0;
int			gpuclust_gpu_device_id = 0;
bool		gpuclust_log_timing = false;
int			gpuclust_max_matrix_memory = 4096;	/* MB */

static const struct config_enum_entry device_options[] = {
	{"auto", GC_DEVICE_AUTO, false},
	{"gpu", GC_DEVICE_GPU, false},
	{"cpu", GC_DEVICE_CPU, false},
	{NULL, 0, false}
};

void		_PG_init(void);

void
_PG_init(void)
{
	DefineCustomEnumVariable("gpuclust.device",
							 "Selects the device that runs clustering functions.",
							 "auto runs on the GPU when one is usable and has a "
							 "path for the algorithm, and on the CPU otherwise; "
							 "gpu fails when no GPU can be used; cpu always "
							 "runs on the CPU.  A function's device argument "
							 "overrides this setting.",
							 &gpuclust_device,
							 GC_DEVICE_AUTO,
							 device_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("gpuclust.cpu_threads",
							"Number of CPU threads a clustering function uses.",
							"0 uses all cores.",
							&gpuclust_cpu_threads,
							0, 0, 1024,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("gpuclust.gpu_device_id",
							"CUDA device number used when running on the GPU.",
							NULL,
							&gpuclust_gpu_device_id,
							0, 0, 1024,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("gpuclust.log_timing",
							 "Reports where a clustering call spent its time.",
							 "When on, each call emits an INFO line naming the "
							 "device, the problem's size and iterations, and "
							 "the milliseconds spent reading the rows (ingest), "
							 "clustering (compute, GPU transfers included and "
							 "itemised) and returning the rows (emit).",
							 &gpuclust_log_timing,
							 false,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("gpuclust.max_matrix_memory",
							"Largest working memory of an O(n^2) clustering function.",
							"gpu_affinity_propagation keeps three n x n double "
							"precision matrices (24 n^2 bytes); a call that needs "
							"more fails before allocating them, saying how many "
							"rows fit.",
							&gpuclust_max_matrix_memory,
							4096, 1, INT_MAX,
							PGC_USERSET,
							GUC_UNIT_MB,
							NULL, NULL, NULL);

	MarkGUCPrefixReserved("gpuclust");
}
