/*-------------------------------------------------------------------------
 *
 * shared_memory.h
 *	  Shared memory for the GPU worker (shared_memory.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef GPUCLUST_SHARED_MEMORY_H
#define GPUCLUST_SHARED_MEMORY_H

#include "storage/dsm.h"

/*
 * Whether a matrix should go into shared memory (the GPU worker takes
 * jobs); set at load by the worker layer (gc_job_init).  NULL: never.
 */
extern bool (*gc_shared_wanted) (void);

/*
 * Shared memory for a matrix the worker will read: a DSM segment of bytes,
 * mapped until cxt is reset or deleted, or until gc_shared_free.
 * NULL when no worker takes jobs, or the shared memory (/dev/shm) has no
 * room for it.
 */
typedef struct GcShared
{
	MemoryContextCallback cb;
	dsm_segment *seg;			/* NULL once detached */
} GcShared;

extern void *gc_shared_alloc(MemoryContext cxt, Size bytes, GcShared **shared);
extern void gc_shared_free(GcShared *shared);

/* A segment of bytes, or NULL when /dev/shm or the segment slots are full. */
extern dsm_segment *gc_shared_segment(Size bytes);

#endif							/* GPUCLUST_SHARED_MEMORY_H */
