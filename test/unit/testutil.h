/*
 * testutil.h — a minimal harness for the core's unit tests: CHECK records a
 * failure and goes on; test_summary prints "N passed, N failed" and returns
 * the exit code.
 */
#ifndef GPUCLUST_TESTUTIL_H
#define GPUCLUST_TESTUTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static int	tu_passed;
static int	tu_failed;

#define CHECK(cond, ...) \
	do { \
		if (cond) \
			tu_passed++; \
		else \
		{ \
			tu_failed++; \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__); \
			fputc('\n', stderr); \
		} \
	} while (0)

static inline int
test_summary(const char *name)
{
	printf("%s: %d passed, %d failed\n", name, tu_passed, tu_failed);
	return tu_failed == 0 ? 0 : 1;
}

/* Test-local random numbers (not the core's generator). */
static inline uint64_t
tu_next(uint64_t *s)
{
	uint64_t	z = (*s += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

static inline double
tu_uniform(uint64_t *s)
{
	return (double) (tu_next(s) >> 11) * 0x1.0p-53;
}

/* Seed for a run: GPUCLUST_TEST_SEED if set, else fresh from the clock. */
#include <time.h>
static inline uint64_t
tu_seed(void)
{
	const char *e = getenv("GPUCLUST_TEST_SEED");
	struct timespec ts;

	if (e != NULL)
		return strtoull(e, NULL, 10);
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t) ts.tv_sec * 1000000007u + (uint64_t) ts.tv_nsec;
}

/* Cancel tests: a flag for gc_ctx.cancel_flags, raised 30 ms after
 * raise_later starts (run it in a thread); now_s() times the stop. */
#include <signal.h>
static volatile sig_atomic_t cancel_flag;

static inline void *
raise_later(void *arg)
{
	struct timespec ts = {0, 30 * 1000 * 1000};

	(void) arg;
	nanosleep(&ts, NULL);
	cancel_flag = 1;
	return NULL;
}

static inline double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

#endif
