/*-------------------------------------------------------------------------
 *
 * progress.h
 *	  What a running call shows in the gpuclust_progress view (common/progress.c):
 *	  one slot per backend in shared memory, written only by its backend,
 *	  read without locks by any session.  Without
 *	  shared_preload_libraries = 'gpuclust' there are no slots: every
 *	  function here does nothing and the view is empty.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GPUCLUST_PROGRESS_H
#define GPUCLUST_PROGRESS_H

#include "core/gpuclust_core.h"

/* In _PG_init: asks for the shared memory when preloaded. */
extern void gc_progress_init(void);

/*
 * A call of algorithm (its SQL name) starts, in phase ingest; its slot is
 * cleared by gc_progress_end, or at the end of the transaction.
 */
extern void gc_progress_begin(const char *algorithm);

/* The device chosen and the rows it clusters: the compute starts. */
extern void gc_progress_compute(gc_device device, int64 rows);

extern void gc_progress_phase(gc_phase phase);

/* The core's progress sink (gc_ctx.progress, set by gc_glue_ctx). */
extern void gc_progress_sink(void *arg, const gc_progress *p);

extern void gc_progress_end(void);

/* Whether this backend's current call has a slot. */
extern bool gc_progress_active(void);

#endif							/* GPUCLUST_PROGRESS_H */
