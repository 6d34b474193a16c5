/*
 * common.c — status reporting and thread counts shared by the core.
 */
#include <stdarg.h>
#include <stdio.h>
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

int
gc_threads(const gc_ctx *ctx)
{
	if (ctx != NULL && ctx->n_threads > 0)
		return ctx->n_threads;
	return omp_get_num_procs();
}
