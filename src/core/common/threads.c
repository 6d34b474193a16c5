/*
 * threads.c — how many OpenMP threads a call uses, and when the team changes.
 *
 * A database server is shared: other backends and other programs want the
 * cores too.  OpenMP's threads wait at the end of every parallel region for
 * their teammates, and a teammate that the kernel has descheduled keeps
 * everyone waiting for a time slice (libgomp also spins while it waits,
 * unless the server runs with OMP_WAIT_POLICY=PASSIVE): with two busy
 * programs on two cores, a two-thread k-means took 11x its idle time and 8x
 * its one-thread time under the same load.
 * So a call sizes its team from the cores free right now, and again at
 * every phase or iteration boundary (gc_team_adapt):
 *   team = min(gc_threads(ctx), available - others), at least 1,
 * where available is the cores this process may use (its affinity mask and
 * its cgroup's CPU quota) and others the tasks runnable on the machine that
 * are not this process's own threads (/proc/loadavg's count less our own
 * threads in state R, scaled by available/online cores when the process
 * may use only part of the machine).  The probe costs tens of microseconds
 * and runs at most every GC_TEAM_PROBE_MS.  Results never depend on the
 * team size.
 *
 * Signals: libgomp keeps a pool of worker threads; a team smaller than the
 * pool ends the surplus threads, a larger one creates threads, and a new
 * thread inherits the signal mask of the thread that starts the team.  In a
 * PostgreSQL backend, signal handlers must run only on the backend's own
 * thread, so the pool is resized only here, with every signal blocked, and
 * a parallel region uses either the current team (gc_team_adapt's value) or
 * one thread, which leaves the pool alone.
 */
#include <ctype.h>
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <omp.h>

#include "common/core.h"

#define GC_TEAM_PROBE_MS 10.0

/* One integer or "max" from a small file; -1 when absent or unreadable. */
static long long
read_ll(const char *path, int which)
{
	FILE	   *f = fopen(path, "r");
	long long	v[2] = {-1, -1};
	char		buf[64];

	if (f == NULL)
		return -1;
	for (int i = 0; i < 2 && fscanf(f, "%63s", buf) == 1; i++)
		v[i] = strcmp(buf, "max") == 0 ? -1 : strtoll(buf, NULL, 10);
	fclose(f);
	return v[which];
}

/*
 * The cores this process may use: its affinity mask, and the CPU quota of
 * its cgroup (v2 cpu.max "quota period", v1 cpu.cfs_quota_us and
 * cpu.cfs_period_us), rounded up.  Read once per process.
 */
int
gc_cores_available(void)
{
	static int	cached = 0;

	if (cached == 0)
	{
		int			n = omp_get_num_procs();
		long long	quota = read_ll("/sys/fs/cgroup/cpu.max", 0),
					period = read_ll("/sys/fs/cgroup/cpu.max", 1);

		if (quota <= 0 || period <= 0)
		{
			quota = read_ll("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", 0);
			period = read_ll("/sys/fs/cgroup/cpu/cpu.cfs_period_us", 0);
		}
		if (quota > 0 && period > 0)
		{
			long long	q = (quota + period - 1) / period;

			if (q < n)
				n = (int) q;
		}
		cached = n > 0 ? n : 1;
	}
	return cached;
}

/* Threads of this process in state R (running or runnable); -1 if unknown. */
static int
own_runnable(void)
{
	DIR		   *dir = opendir("/proc/self/task");
	struct dirent *e;
	int			n = 0;

	if (dir == NULL)
		return -1;
	while ((e = readdir(dir)) != NULL)
	{
		char		path[64],
					buf[512];
		FILE	   *f;
		size_t		len;
		char	   *rp;

		if (!isdigit((unsigned char) e->d_name[0]))
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%.20s/stat", e->d_name);
		if ((f = fopen(path, "r")) == NULL)
			continue;
		len = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[len] = '\0';
		/* "tid (comm) S ...": the state follows the last ')' */
		rp = strrchr(buf, ')');
		if (rp != NULL && rp[1] == ' ' && rp[2] == 'R')
			n++;
	}
	closedir(dir);
	return n;
}

/*
 * Cores free for this process now: available less the other runnable
 * tasks' share of them; available when /proc cannot tell.
 */
static int
cores_free(void)
{
	const int	avail = gc_cores_available();
	FILE	   *f = fopen("/proc/loadavg", "r");
	int			running = 0,
				total = 0,
				own;
	long		online = sysconf(_SC_NPROCESSORS_ONLN);
	double		others;

	if (f == NULL)
		return avail;
	if (fscanf(f, "%*f %*f %*f %d/%d", &running, &total) != 2)
		running = -1;
	fclose(f);
	own = own_runnable();
	if (running < 1 || own < 1)
		return avail;
	others = running > own ? running - own : 0;
	if (online > avail)
		others = others * avail / (double) online;
	return avail - (int) ceil(others - 0.5) > 0 ? avail - (int) ceil(others - 0.5) : 1;
}

int
gc_threads(const gc_ctx *ctx)
{
	if (ctx != NULL && ctx->n_threads > 0)
		return ctx->n_threads;
	return gc_cores_available();
}

/* libgomp's pool size as last set here (1: no pool yet). */
static int	pool_size = 1;

void
gc_team_set(int team)
{
	sigset_t	all,
				old;
	volatile int started = 0;

	if (team < 1)
		team = 1;
	if (team == pool_size)
		return;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	/* not empty: the compiler drops an empty parallel region altogether */
#pragma omp parallel num_threads(team)
	{
#pragma omp atomic
		started++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pool_size = team;
}

int
gc_team_adapt(const gc_ctx *ctx)
{
	static double last_probe = -1e9;
	static int	last_free = 1;
	const int	max = gc_threads(ctx);
	int			team;

	if (max <= 1)
		return 1;				/* one thread: the pool is left alone */
	if (gc_now_ms() - last_probe >= GC_TEAM_PROBE_MS)
	{
		last_free = cores_free();
		last_probe = gc_now_ms();
	}
	team = last_free < max ? last_free : max;
	if (team > 1)
		gc_team_set(team);
	return team;
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
