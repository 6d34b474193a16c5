/*
 * dbscan/dbscan_internal.h — private to dbscan/: the phases of the CPU
 * DBSCAN, its two spatial indexes (dbscan_grid.c, dbscan_kdtree.c), and the
 * run they share with their one caller, the driver (dbscan.c).
 */
#ifndef GPUCLUST_DBSCAN_INTERNAL_H
#define GPUCLUST_DBSCAN_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "dbscan/dbscan.h"

/*
 * One run.  An index reorders the points ("positions" 0..n-1 in its own
 * order): it fills perm (position -> input row) and pts (the rows copied in
 * position order), marks core[pos], unites core points within eps in the
 * union-find parent[] (over positions, initialised by the driver), and for
 * each non-core position writes croot[perm[pos]] = the union-find root of its
 * nearest core point, or -1.  All arrays are allocated by the driver.
 */
typedef struct gc_dbscan_job
{
	const gc_ctx *ctx;
	gc_status  *st;
	int			nthreads;
	const float *X;
	int64_t		n;
	int			d;
	double		eps;
	float		eps2;
	int64_t		min_pts;

	int64_t    *perm;
	float	   *pts;
	uint8_t    *core;
	int64_t    *parent;
	int64_t    *croot;			/* input order */

	int			stop;			/* shared: set once a cancel was seen */
} gc_dbscan_job;

/* True once the run must stop; cheap enough to call per cell or leaf. */
static inline bool
gc_job_stopped(gc_dbscan_job *j)
{
	if (__atomic_load_n(&j->stop, __ATOMIC_RELAXED))
		return true;
	if (gc_cancelled(j->ctx))
	{
		__atomic_store_n(&j->stop, 1, __ATOMIC_RELAXED);
		return true;
	}
	return false;
}

/*
 * The grid (d <= 3).  Sets *applied false, touching nothing, when cell
 * numbers would overflow or eps2 is infinite; the driver then uses the
 * kd-tree.  Scratch: may use parent and croot as temporary space before the
 * union phase (it reinitialises parent).
 */
gc_code		gc_dbscan_grid_run(gc_dbscan_job *j, bool *applied);

/* The kd-tree (any d). */
gc_code		gc_dbscan_kdtree_run(gc_dbscan_job *j);

/* Tests only: use the kd-tree's plain-C (or AVX2) kernel on faster machines. */
#ifdef GC_TESTING
extern bool gc_dbscan_force_generic;
extern bool gc_dbscan_force_avx2;
#else
#define gc_dbscan_force_generic false
#define gc_dbscan_force_avx2 false
#endif

#endif							/* GPUCLUST_DBSCAN_INTERNAL_H */
