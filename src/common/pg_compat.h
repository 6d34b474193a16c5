/*-------------------------------------------------------------------------
 *
 * pg_compat.h
 *	  The one place where the PostgreSQL releases gpuclust builds on (15 to
 *	  18) differ in an API the glue uses.  Each difference is a macro or an
 *	  inline function named for what the glue needs, so that no other file
 *	  tests PG_VERSION_NUM.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GPUCLUST_PG_COMPAT_H
#define GPUCLUST_PG_COMPAT_H

#include "miscadmin.h"
#include "storage/proc.h"

/*
 * A function that never returns (it raises an ERROR), marked before its
 * declaration as PostgreSQL 18 writes it; earlier releases mark it after
 * (pg_attribute_noreturn, gone in 18), so C11's own specifier stands in.
 */
#ifndef pg_noreturn
#define pg_noreturn _Noreturn
#endif

/*
 * A backend's slot in gpuclust's per-backend arrays in shared memory (the
 * progress view's, the GPU worker's jobs): 0 .. MaxBackends - 1, or -1 for
 * a process that has none.  PostgreSQL 17 numbers every process by its
 * PGPROC (MyProcNumber, from 0; regular backends and background workers
 * below MaxBackends); earlier releases number backends from 1 (MyBackendId).
 * gc_my_procno is this process's PGPROC index, for its latch.
 */
#if PG_VERSION_NUM >= 170000
#include "storage/procnumber.h"

static inline int
gc_my_slot(void)
{
	return MyProcNumber != INVALID_PROC_NUMBER && MyProcNumber < MaxBackends ?
		(int) MyProcNumber : -1;
}
#define gc_my_procno()	((int) MyProcNumber)
#else
#include "storage/backendid.h"

static inline int
gc_my_slot(void)
{
	return MyBackendId != InvalidBackendId && MyBackendId <= MaxBackends ?
		MyBackendId - 1 : -1;
}
#define gc_my_procno()	(MyProc->pgprocno)
#endif

/* A minimal tuple; PostgreSQL 18 can reserve bytes before it (none here). */
#if PG_VERSION_NUM >= 180000
#define gc_form_minimal_tuple(desc, values, nulls) \
	heap_form_minimal_tuple(desc, values, nulls, 0)
#else
#define gc_form_minimal_tuple(desc, values, nulls) \
	heap_form_minimal_tuple(desc, values, nulls)
#endif

#endif							/* GPUCLUST_PG_COMPAT_H */
