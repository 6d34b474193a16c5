/*
 * common.c — status reporting, the clock and the parallel copy shared by
 * the core (and the CUDA side).  Thread counts: team.c.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

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

const char *
gc_phase_name(gc_phase phase)
{
	static const char *const names[] = {"ingest", "upload", "index", "init",
	"iterate", "label", "emit"};

	return (unsigned) phase < sizeof(names) / sizeof(names[0]) ? names[phase] : "?";
}
