/*-------------------------------------------------------------------------
 *
 * kmeans_distributed.h
 *	  What the files of gpu_kmeans_distributed share: the k x d real[] of
 *	  centres (kmeans_step.c), one Lloyd pass of kmeans_step over the
 *	  source and the seeding's draw of rows by rank
 *	  (kmeans_distributed_passes.c), and k-means|| over the rows where they
 *	  are (kmeans_parallel_init.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef GPUCLUST_KMEANS_DISTRIBUTED_H
#define GPUCLUST_KMEANS_DISTRIBUTED_H

#include "executor/spi.h"
#include "utils/array.h"

#include "distributed/passes.h"

/* The float32 rows of a k x d real[] (checked when it was made). */
extern const float *kmd_array_rows(ArrayType *a);

/* A k x d real[] of the k x d floats C. */
extern ArrayType *kmd_rows_array(const float *C, int k, int d);

/* One pass of kmeans_step over the source: its result, copied to cxt. */
typedef struct KmdStepOut
{
	bool		empty;			/* no row with features */
	ArrayType  *centroids;
	int64	   *counts;
	uint64	   *members;
	double		inertia;
	double		cost;
	double		shift;
	int64		n;
	int			k;
	int			reseeded;		/* clusters re-seeded in this step */
} KmdStepOut;

/* A pass of gpu_kmeans_distributed (distributed/passes.h). */
#define KM_PASS(what_, round_) ((GcPass) {"gpu_kmeans_distributed", (what_), (round_)})

/*
 * Runs plan, kmeans_step over the source given the centres C (NULL: the
 * pass for the rows' count and mean), its result copied to cxt.
 */
extern void kmd_run_step(const GcPass *pass, SPIPlanPtr plan, ArrayType *C,
						 MemoryContext cxt, KmdStepOut *out);

/*
 * The k rows at the 0-based positions rows[] among the n source rows with
 * features, in the order of their ids: a k x d real[] in cxt.
 */
extern ArrayType *kmd_fetch_rows(const char *what, const char *nsp,
								 const char *source, int64 n,
								 const int64 *rows, int k, int d,
								 MemoryContext cxt);

/* k-means|| seeding of k centres over the rows where they are. */
extern ArrayType *kmd_parallel_init(const char *nsp, const char *source,
									SPIPlanPtr step, int64 n, int d, int k,
									int64 seed, MemoryContext cxt);

#endif							/* GPUCLUST_KMEANS_DISTRIBUTED_H */
