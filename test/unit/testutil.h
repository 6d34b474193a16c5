/*
 * testutil.h — a minimal harness for the core's unit tests: CHECK records a
 * failure and goes on; test_summary prints "N passed, N failed" and returns
 * the exit code.
 */
#ifndef GPUCLUST_TESTUTIL_H
#define GPUCLUST_TESTUTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpuclust_core.h"

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

/* A suite a test binary runs alone when its name is an argument. */
typedef struct tu_suite
{
	const char *name;
	void		(*run) (void);
} tu_suite;

/*
 * The suites argv[1 ..] name, run in that order: 1 when some were named
 * (the caller then reports, test_summary), 0 when none (every test);
 * -1, having said so, when one is not among the n suites.
 */
static inline int
tu_named_suites(int argc, char **argv, const tu_suite *suites, int n)
{
	for (int a = 1; a < argc; a++)
	{
		int			s = 0;

		while (s < n && strcmp(argv[a], suites[s].name) != 0)
			s++;
		if (s == n)
		{
			fprintf(stderr, "unknown suite %s (suites:", argv[a]);
			for (s = 0; s < n; s++)
				fprintf(stderr, "%s %s", s > 0 ? "," : "", suites[s].name);
			fprintf(stderr, "; none: every test)\n");
			return -1;
		}
		suites[s].run();
	}
	return argc > 1;
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

/* Test data: n x d floats of one kind, around nb random centres in
 * [-100, 100)^d (nb >= 1); data_name[kind] names the kind. */
typedef enum
{
	DATA_UNIFORM,				/* uniform in [-5, 5)^d */
	DATA_BLOBS,					/* the centres plus triangular noise in (-1, 1) */
	DATA_DUPLICATES,			/* copies of the centres: exact ties everywhere */
	DATA_GRID					/* integers 0..3: many equal distances */
} data_kind;

static const char *data_name[] __attribute__((unused)) = {"uniform", "blobs", "duplicates", "grid"};

static inline float *
tu_make_data(uint64_t *rs, int64_t n, int d, data_kind kind, int nb)
{
	float	   *X = malloc(sizeof(float) * (size_t) (n > 0 ? n : 1) * d);
	float	   *ctr = malloc(sizeof(float) * (size_t) nb * d);

	for (int i = 0; i < nb * d; i++)
		ctr[i] = (float) (tu_uniform(rs) * 200.0 - 100.0);
	for (int64_t i = 0; i < n; i++)
	{
		int			b = (int) (tu_next(rs) % nb);

		for (int j = 0; j < d; j++)
		{
			float		v;

			switch (kind)
			{
				case DATA_UNIFORM:
					v = (float) (tu_uniform(rs) * 10.0 - 5.0);
					break;
				case DATA_BLOBS:
					v = ctr[b * d + j] + (float) (tu_uniform(rs) + tu_uniform(rs) - 1.0);
					break;
				case DATA_DUPLICATES:
					v = ctr[b * d + j];
					break;
				default:
					v = (float) (tu_next(rs) % 4);
					break;
			}
			X[i * d + j] = v;
		}
	}
	free(ctr);
	return X;
}

/*
 * Labelling inputs (gc_kmeans_labels_cpu / _gpu against gc_km_nearest):
 * n rows X and k centres C (k x d, k may exceed n) of one kind;
 * lb_name[kind] names it.  Every kind but LB_UNIFORM makes exact ties.
 */
typedef enum
{
	LB_UNIFORM,					/* rows and centres uniform in [-5, 5)^d */
	LB_DUP_CENTRES,				/* centres copies of a few: ties to the lowest */
	LB_ON_CENTRES,				/* rows copies of centres (distance 0), some centres repeated */
	LB_LATTICE,					/* integers 0..3: many equidistant centres */
	LB_FAR,						/* 1e6 + [0, 1e-1): a few float steps, cancellation */
	LB_HUGE,					/* uniform in +-1e17 (no overflow for d <= 300) */
	LB_ULP,						/* centres in groups 1 ulp apart, rows on them */
	LB_KINDS
} labels_kind;

static const char *lb_name[] __attribute__((unused)) = {
	"uniform", "dup-centres", "on-centres", "lattice", "far", "huge", "ulp"
};

static inline void
tu_make_labels_case(uint64_t *rs, int64_t n, int d, int k, labels_kind kind,
					float **Xp, float **Cp)
{
	float	   *X = malloc(sizeof(float) * (size_t) (n > 0 ? n : 1) * d);
	float	   *C = malloc(sizeof(float) * (size_t) k * d);
	int			pool = 1 + (int) (tu_next(rs) % (uint64_t) (k / 4 + 1));

	for (int c = 0; c < k; c++)
		for (int j = 0; j < d; j++)
		{
			float		v;

			switch (kind)
			{
				case LB_LATTICE:
					v = (float) (tu_next(rs) % 4);
					break;
				case LB_FAR:
					v = (float) (1e6 + 0.1 * tu_uniform(rs));
					break;
				case LB_HUGE:
					v = (float) ((tu_uniform(rs) * 2.0 - 1.0) * 1e17);
					break;
				case LB_ULP:
					v = c % 8 ? nextafterf(C[(size_t) (c - c % 8) * d + j],
										   (c + j) % 2 ? INFINITY : -INFINITY)
						: (float) (tu_uniform(rs) * 10.0 - 5.0);
					if (c % 8 == 7)
						v = C[(size_t) (c - 7) * d + j];	/* and an exact copy */
					break;
				default:
					v = (float) (tu_uniform(rs) * 10.0 - 5.0);
					break;
			}
			C[(size_t) c * d + j] = v;
		}
	/* centres past the first pool: copies of those (ties to the lowest) */
	if (kind == LB_DUP_CENTRES)
		for (int c = pool; c < k; c++)
			memcpy(C + (size_t) c * d, C + (size_t) (tu_next(rs) % (uint64_t) pool) * d,
				   sizeof(float) * d);
	if (kind == LB_ON_CENTRES)
		for (int c = 1; c < k; c++)
			if (tu_next(rs) % 5 == 0)
				memcpy(C + (size_t) c * d, C + (size_t) (tu_next(rs) % (uint64_t) c) * d,
					   sizeof(float) * d);
	for (int64_t i = 0; i < n; i++)
	{
		const int	c = (int) (tu_next(rs) % (uint64_t) k);
		const bool	on = kind == LB_ON_CENTRES || kind == LB_ULP ||
			(kind != LB_UNIFORM && tu_next(rs) % 4 == 0);

		for (int j = 0; j < d; j++)
		{
			float		v;

			if (on)
				v = C[(size_t) c * d + j];	/* a row equal to a centre */
			else if (kind == LB_LATTICE)
				v = (float) (tu_next(rs) % 4);
			else if (kind == LB_FAR)
				v = (float) (1e6 + 0.1 * tu_uniform(rs));
			else if (kind == LB_HUGE)
				v = (float) ((tu_uniform(rs) * 2.0 - 1.0) * 1e17);
			else
				v = C[(size_t) c * d + j] + (float) (tu_uniform(rs) - 0.5);
			X[i * d + j] = v;
		}
	}
	*Xp = X;
	*Cp = C;
}

/* The reference labels: gc_km_nearest on every row. */
static inline void
tu_ref_labels(const float *X, int64_t n, int d, const float *C, int k, int32_t *lab)
{
#pragma omp parallel for schedule(dynamic, 64)
	for (int64_t i = 0; i < n; i++)
	{
		float		bd;

		lab[i] = gc_km_nearest(X + i * d, C, k, d, &bd);
	}
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

/*
 * Poll tests: a gc_ctx.poll (tu_poll_fn, arg a tu_poll) that stops the
 * call stop_after seconds after tu_poll_start, and keeps what the glue's
 * poll relies on: how often the calling thread (the one that started it,
 * OpenMP thread 0) polls, and the longest time between two of its polls.
 * That time leaves out the time the thread waited for a core (the run
 * queue's wait, /proc/thread-self/schedstat, read at most every
 * TU_POLL_READ_S, so a gap may lose up to that much of its own time): on
 * a machine whose cores other processes share, a wall-clock gap grows
 * with their load, not with the work between two polls.
 */
#include <pthread.h>

/*
 * The longest time the calling thread may go without a poll: 100 ms of
 * work, which AddressSanitizer's builds (make unit-sanitize) do about
 * four times slower.
 */
#if defined(__SANITIZE_ADDRESS__)
#define TU_POLL_GAP_S 0.4
#else
#define TU_POLL_GAP_S 0.1
#endif
#define TU_POLL_READ_S 0.002

typedef struct tu_poll
{
	pthread_t	caller;
	double		stop_after;		/* when to stop (now_s) */
	double		last;			/* the caller's last poll, or the start */
	double		max_gap;		/* the longest time between them less the
								 * run queue's wait, s */
	double		read_at;		/* when wait was read (now_s) */
	double		wait;			/* the caller's run queue wait then, s */
	long		caller_polls;
	long		other_polls;	/* by other threads (atomic) */
} tu_poll;

/* The calling thread's time spent waiting for a core so far, s (0 where
 * the kernel does not say). */
static inline double
tu_run_queue_wait(void)
{
	FILE	   *f = fopen("/proc/thread-self/schedstat", "r");
	unsigned long long run = 0,
				wait = 0;

	if (f == NULL)
		return 0.0;
	if (fscanf(f, "%llu %llu", &run, &wait) != 2)
		wait = 0;
	fclose(f);
	return wait * 1e-9;
}

/* The caller's gap ending at t: the gap's records updated, last = t. */
static inline void
tu_poll_gap(tu_poll *tp, double t)
{
	double		gap = t - tp->last,
				waited = 0.0;

	if (t - tp->read_at >= TU_POLL_READ_S)
	{
		const double w = tu_run_queue_wait();

		waited = w - tp->wait;
		tp->wait = w;
		tp->read_at = t;
	}
	if (gap - waited > tp->max_gap)
		tp->max_gap = gap - waited;
	tp->last = t;
}

static inline bool
tu_poll_fn(void *arg)
{
	tu_poll    *tp = arg;
	double		t = now_s();

	if (!pthread_equal(pthread_self(), tp->caller))
	{
		__atomic_add_fetch(&tp->other_polls, 1, __ATOMIC_RELAXED);
		return false;
	}
	tp->caller_polls++;
	tu_poll_gap(tp, t);
	return t >= tp->stop_after;
}

/* After the call: the time since the caller's last poll counted as a gap. */
static inline void
tu_poll_end(tu_poll *tp)
{
	tu_poll_gap(tp, now_s());
}

/* ctx polls tp, which stops the call stop_after seconds from now. */
static inline void
tu_poll_start(tu_poll *tp, gc_ctx *ctx, double stop_after)
{
	memset(tp, 0, sizeof(*tp));
	tp->caller = pthread_self();
	tp->wait = tu_run_queue_wait();
	tp->last = tp->read_at = now_s();
	tp->stop_after = tp->last + stop_after;
	ctx->poll = tu_poll_fn;
	ctx->poll_arg = tp;
}

/*
 * A GPU made up for dispatch's tests (gc_gpu, tu_fake_gpu): usable or not
 * (tu_fake.usable; unusable, its reason is "no usable GPU: made up"), with
 * tu_fake.mem bytes for a call, CUDA already started in the process or not
 * (tu_fake.started); tu_fake.probes counts the probes.
 */
static struct
{
	int			probes;
	bool		usable;
	bool		started;
	size_t		mem;
	int			gpus;			/* the GPUs one call may split over */
}			tu_fake = {0, false, true, (size_t) 1 << 40, 1};

static inline bool
tu_fake_warm(const gc_gpu *gpu)
{
	(void) gpu;
	return tu_fake.started;
}

static inline void
tu_fake_probe(const gc_gpu *gpu, gc_gpu_state *out)
{
	(void) gpu;
	tu_fake.probes++;
	memset(out, 0, sizeof(*out));
	out->usable = tu_fake.usable;
	out->gpus = tu_fake.gpus;
	if (tu_fake.usable)
		out->mem = tu_fake.mem;
	else
		snprintf(out->reason, sizeof(out->reason), "no usable GPU: made up");
}

/* Before a dispatch call: no probe counted yet, st cleared. */
static inline void
tu_fake_reset(gc_status *st)
{
	tu_fake.probes = 0;
	st->code = GC_OK;
	st->message[0] = '\0';
}

static inline gc_gpu
tu_fake_gpu(void)
{
	gc_gpu		gpu = {.device_id = 0, .warm = tu_fake_warm, .probe = tu_fake_probe};

	return gpu;
}

#endif
