/*
 * multi_gpus.h — the GPUs the GPU tests' multi suites split a call over
 * (ctx->gpus): 0 and 1 when there are two, else GPU 0 throughout; a third
 * part on GPU 0 again.
 */
#ifndef GPUCLUST_MULTI_GPUS_H
#define GPUCLUST_MULTI_GPUS_H

#include <stdio.h>

#include "common/gpu.h"

/* gpus[0 .. 2] as above, said on stdout with what the parts are; GPU 0
 * current after. */
static inline void
tu_multi_gpus(int gpus[3], const char *parts)
{
	gc_cuda_device_info i1,
				i0;

	gc_cuda_probe(1, &i1);
	gc_cuda_probe(0, &i0);		/* GPU 0 current again */
	gpus[0] = 0;
	gpus[1] = i1.usable ? 1 : 0;
	gpus[2] = 0;
	printf("  multi: %s on GPUs %d, %d (, %d)%s\n", parts, gpus[0], gpus[1], gpus[2],
		   i1.usable ? "" : " (one GPU: every one on GPU 0)");
}

#endif							/* GPUCLUST_MULTI_GPUS_H */
