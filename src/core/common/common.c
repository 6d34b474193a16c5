/*
 * common.c — status reporting, the clock and the parallel copy shared by
 * the core (and the CUDA side).  Thread counts: threads.c.
 */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/core.h"

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

int
gc_cmp_int64(const void *a, const void *b)
{
	int64_t		x = *(const int64_t *) a,
				y = *(const int64_t *) b;

	return x < y ? -1 : x > y;
}

double
gc_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/*
 * memcpy on a team of threads (gc_team_adapt's), or on one thread when the
 * copy is too small for more to pay (under 256 KiB a thread).
 */
void
gc_copy(void *dst, const void *src, size_t bytes, int threads)
{
	const size_t piece = (size_t) 256 << 10;
	const int	T = threads;

	if (T <= 1 || bytes < piece * (size_t) T)
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

void
gc_team_run(int team, void (*fn) (void *arg, int t, int team), void *arg)
{
	if (team <= 1)
	{
		fn(arg, 0, 1);
		return;
	}
#pragma omp parallel num_threads(team)
	fn(arg, omp_get_thread_num(), omp_get_num_threads());
}

void *
gc_malloc_touched(size_t bytes, int threads)
{
	char	   *p = malloc(bytes);
	const size_t page = (size_t) sysconf(_SC_PAGESIZE);
	const int64_t pages = (int64_t) (bytes / page);
	const int	T = bytes / threads < ((size_t) 1 << 20) ? 1 : threads;

	if (p == NULL)
		return NULL;
#pragma omp parallel for num_threads(T) schedule(static)
	for (int64_t i = 0; i < pages; i++)
		p[i * page] = 0;
	return p;
}

const char *
gc_phase_name(gc_phase phase)
{
	static const char *const names[] = {"ingest", "upload", "index", "init",
	"iterate", "label", "emit"};

	return (unsigned) phase < sizeof(names) / sizeof(names[0]) ? names[phase] : "?";
}

/* the caller reports once per this many items: 1% of them */
static int64_t
loop_step(const gc_loop_progress *lp)
{
	return lp->total >= 100 ? lp->total / 100 : 1;
}

void
gc_loop_progress_start(gc_loop_progress *lp, const gc_ctx *ctx,
					   gc_phase phase, int64_t total)
{
	lp->ctx = ctx;
	lp->phase = phase;
	lp->total = total;
	lp->done = 0;
	lp->next = loop_step(lp);
	gc_report(ctx, phase, 0, 0, 0, total, NAN);
}

void
gc_loop_progress_add(gc_loop_progress *lp, int64_t items, bool caller)
{
	int64_t		done;

	if (lp->ctx == NULL || lp->ctx->progress == NULL)
		return;
	done = __atomic_add_fetch(&lp->done, items, __ATOMIC_RELAXED);
	/* lp->next is the calling thread's alone */
	if (caller && done >= lp->next)
	{
		gc_report(lp->ctx, lp->phase, 0, 0, done, lp->total, NAN);
		lp->next = done + loop_step(lp);
	}
}

void
gc_loop_progress_end(gc_loop_progress *lp)
{
	gc_report(lp->ctx, lp->phase, 0, 0, lp->total, lp->total, NAN);
}
