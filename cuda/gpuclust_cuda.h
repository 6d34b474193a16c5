/*
 * gpuclust_cuda.h — the CUDA side behind a plain C header.  Built only when
 * nvcc is found (Makefile defines GPUCLUST_CUDA); every function is safe to
 * call on a machine with no driver or no device and then says why.
 * Never call these in the postmaster or _PG_init: CUDA is not fork-safe.
 */
#ifndef GPUCLUST_CUDA_H
#define GPUCLUST_CUDA_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gc_cuda_device_info
{
	bool		usable;			/* a device can be used */
	char		reason[200];	/* why not, when !usable */
	int			device_count;
	int			device_id;
	char		name[128];
	size_t		total_mem;
	size_t		free_mem;
	int			cc_major;
	int			cc_minor;
	int			runtime_version;	/* e.g. 13000 */
	int			driver_version;		/* 0 when no driver */
} gc_cuda_device_info;

/* Probes device device_id (initialising CUDA in this process if needed). */
void		gc_cuda_probe(int device_id, gc_cuda_device_info *info);

#ifdef __cplusplus
}
#endif

#endif							/* GPUCLUST_CUDA_H */
