/*
 * common.c — status reporting, thread counts, the clock and the parallel
 * copy shared by the core (and the CUDA side).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <omp.h>

#include "gpuclust_core.h"

gc_code
gc_fail(gc_status *st, gc_code code, const char *fmt,...)
{
	va_list		ap;

	if (st == NULL)
		return code;
	st->code = code;
	va_start(ap, fmt);
	vsnprintf(st->message, sizeof(st->message), fmt, ap);
	va_end(ap);
	return code;
}

double
gc_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* memcpy on up to threads OpenMP threads, each a piece of at least 256 KiB. */
void
gc_copy(void *dst, const void *src, size_t bytes, int threads)
{
	const size_t piece = (size_t) 256 << 10;
	int			T = (int) (bytes / piece);

	if (T > threads)
		T = threads;
	if (T <= 1)
	{
		memcpy(dst, src, bytes);
		return;
	}
#pragma omp parallel for num_threads(T) schedule(static, 1)
	for (int t = 0; t < T; t++)
	{
		size_t		lo = bytes / T * t & ~(size_t) 63,
					hi = t == T - 1 ? bytes : bytes / T * (t + 1) & ~(size_t) 63;

		memcpy((char *) dst + lo, (const char *) src + lo, hi - lo);
	}
}

int
gc_threads(const gc_ctx *ctx)
{
	if (ctx != NULL && ctx->n_threads > 0)
		return ctx->n_threads;
	return omp_get_num_procs();
}

/* gc_threads(ctx), but at most one thread per rows_per_thread rows */
static int
threads_for(const gc_ctx *ctx, int64_t n, int64_t rows_per_thread)
{
	int64_t		cap = n / rows_per_thread;
	int			t = gc_threads(ctx);

	if (cap < 1)
		cap = 1;
	return cap < t ? (int) cap : t;
}

/*
 * Measured on the 2-core development machine, whole calls, 1 thread
 * against 2.  k-means: with k*d < 1024, one thread is faster up to
 * n = 20,000 (by 13-77%: n = 10,000 d 2 k 50; 20,000 d 2 k 8; 20,000 d 8
 * k 64) and slower from 30,000 (by 25%: d 2 k 8), so three blocks of
 * 4096 rows (GC_KM_BLOCK) per thread; with more work per row (n = 10,000,
 * d 32, k 300: three blocks) two threads win by 20%, so one block per
 * thread.  DBSCAN (2-d grid): one thread is faster at n = 1,000 (12%) and
 * slower from 4,000.
 */
#define KMEANS_ROWS_PER_THREAD 12288
#define KMEANS_HEAVY_KD 1024
#define DBSCAN_ROWS_PER_THREAD 2048

int
gc_kmeans_threads(const gc_ctx *ctx, int64_t n, int d, int k)
{
	return threads_for(ctx, n, (int64_t) k * d >= KMEANS_HEAVY_KD ?
					   KMEANS_ROWS_PER_THREAD / 3 : KMEANS_ROWS_PER_THREAD);
}

int
gc_dbscan_threads(const gc_ctx *ctx, int64_t n)
{
	return threads_for(ctx, n, DBSCAN_ROWS_PER_THREAD);
}
