#!/usr/bin/python3
"""Clustering calls stay fast when other processes want the cores.

Runs gpu_kmeans (200,000 2-d points, k = 100) and gpu_dbscan (1,000,000 2-d
points) through SQL on the CPU, with the default thread settings and with
gpuclust.cpu_threads = 1, first on an idle machine and then while one
busy loop per core runs beside them.  The compute time of each call comes
from gpuclust.log_timing (median of three calls).  Passes when, for both:
  - idle, the default is not slower than one thread (within 15%: noise);
  - under load, the default takes at most 1.5x the one-thread time under
    the same load (issue 11's target; it was 8x for k-means when the
    threads waited for descheduled teammates).  The two settings alternate
    call by call, so that both see the same load; a 2-core machine shared
    with other processes still moves the ratio by tens of percent from run
    to run, so a call that misses is measured again, up to three times in
    all, and every attempt is printed.  A regression to descheduled
    teammates misses every attempt.
Also prints the idle speed-up of the compute phase from 1 thread to all,
and the wall time of as many concurrent sessions as cores with the default
threads against the best fixed count (issue 11: within 1.3x).
Run against a server with the extension installed (libpq environment), by
test/run_tests.sh; --bench prints the table without judging.  --wide adds
issue 11's 16-core workload (k-means on 200,000 x 32 features, k = 100, 50
iterations; slow on 2 cores), --scaling the idle compute time of each call
at 1, 2, 4 ... all cores.
"""
import os
import re
import statistics
import subprocess
import sys
import threading
import time

import psycopg

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from report import check, summary  # noqa: E402

CALLS = {
    "k-means 200k x 2-d, k = 100":
        "SELECT count(*) FROM gpu_kmeans('SELECT id, f FROM load_km', 100, seed => 1, device => 'cpu')",
    "DBSCAN 1M x 2-d":
        "SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM load_db', 0.02, 10, device => 'cpu')",
}
WIDE = ("k-means 200k x 32-d, k = 100, 50 iterations",
        "SELECT count(*) FROM gpu_kmeans('SELECT id, f FROM load_wide', 100, max_iter => 50,"
        " tol => 0, seed => 1, device => 'cpu')")
WIDE_SETUP = [
    "DROP TABLE IF EXISTS load_wide",
    # 100 blobs in 32-d; coordinates from hashes of (row, column)
    """CREATE TABLE load_wide AS
       SELECT i AS id,
              ARRAY(SELECT (hashint4(i % 100 * 64 + j) % 1000) / 10.0
                           + (hashint4(i * 64 + j) % 1000) / 500.0
                    FROM generate_series(1, 32) j)::real[] AS f
       FROM generate_series(1, 200000) i""",
    "VACUUM ANALYZE load_wide",
]
SETUP = [
    "CREATE EXTENSION IF NOT EXISTS gpuclust",
    "DROP TABLE IF EXISTS load_km, load_db",
    # 100 blobs of sd 2 in [0, 100)^2; u(i, k): a uniform number from a hash
    """CREATE TABLE load_km AS
       SELECT i AS id, ARRAY[(i % 100) * 7 % 100 + 2 * sqrt(-2 * ln(u1)) * cos(2 * pi() * u2),
                             (i % 100) * 13 % 100 + 2 * sqrt(-2 * ln(u1)) * sin(2 * pi() * u2)]::real[] AS f
       FROM (SELECT i, (hashint4(i) + 2147483649.0::float8) / 4294967298.0 AS u1,
                       (hashint4(i # 77777) + 2147483649.0::float8) / 4294967298.0 AS u2
             FROM generate_series(1, 200000) i) s""",
    """CREATE TABLE load_db AS
       SELECT i AS id, ARRAY[(hashint4(i) + 2147483649.0::float8) / 4294967298.0 * 20,
                             (hashint4(i # 55555) + 2147483649.0::float8) / 4294967298.0 * 20]::real[] AS f
       FROM generate_series(1, 1000000) i""",
    "VACUUM ANALYZE load_km, load_db",
]
COMPUTE = re.compile(r"compute ([0-9.]+) ms")


def compute_ms(conn, sql, settings, calls=3):
    """Median compute ms of `calls` calls for each thread setting, the
    settings alternating call by call (after one warm-up call each)."""
    notes = []
    conn.add_notice_handler(lambda d: notes.append(d.message_primary))
    conn.execute("SET gpuclust.log_timing = on")
    times = {t: [] for t in settings}
    for r in range(calls + 1):
        for t in settings:
            conn.execute(f"SET gpuclust.cpu_threads = {t}")
            notes.clear()
            conn.execute(sql)
            m = [COMPUTE.search(n) for n in notes]
            m = [float(x.group(1)) for x in m if x]
            if r > 0 and m:
                times[t].append(m[-1])
    conn.execute("RESET gpuclust.cpu_threads")
    return {t: statistics.median(v) for t, v in times.items()}


def measure(conn, names=None):
    return {name: compute_ms(conn, CALLS[name], (0, 1))
            for name in (CALLS if names is None else names)}


def concurrent_wall(sql, sessions, threads):
    """Wall seconds for `sessions` sessions running sql at once (after a warm-up)."""
    conns = [psycopg.connect("", autocommit=True) for _ in range(sessions)]
    for c in conns:
        c.execute(f"SET gpuclust.cpu_threads = {threads}")
        c.execute(sql)
    start = time.monotonic()
    ts = [threading.Thread(target=c.execute, args=(sql,)) for c in conns]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    wall = time.monotonic() - start
    for c in conns:
        c.close()
    return wall


def main():
    bench = "--bench" in sys.argv
    cores = len(os.sched_getaffinity(0))
    if "--wide" in sys.argv:
        CALLS[WIDE[0]] = WIDE[1]
    with psycopg.connect("", autocommit=True) as conn:
        for s in SETUP + (WIDE_SETUP if "--wide" in sys.argv else []):
            conn.execute(s)
        if "--scaling" in sys.argv:
            counts = sorted({1 << i for i in range(cores.bit_length()) if 1 << i <= cores} | {cores})
            print(f"idle compute ms (median of 3) by gpuclust.cpu_threads, {cores} cores:")
            for name, sql in CALLS.items():
                ms = compute_ms(conn, sql, counts)
                print(f"  {name}: " + ", ".join(f"{t}: {ms[t]:.0f} ms ({ms[1] / ms[t]:.2f}x)"
                                                for t in counts), flush=True)
        idle = measure(conn)
        loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                 for _ in range(cores)]
        try:
            time.sleep(0.5)
            loaded = {name: [m] for name, m in measure(conn).items()}
            for _ in range(2):
                missed = [name for name, a in loaded.items()
                          if not any(m[0] <= 1.5 * m[1] for m in a)]
                for name, m in measure(conn, missed).items():
                    loaded[name].append(m)
        finally:
            for p in loops:
                p.kill()
            for p in loops:
                p.wait()
        # as many sessions at once as there are cores: default threads
        # against the best fixed count (1, or all cores)
        conc = {}
        for name, sql in CALLS.items():
            conc[name] = {t: concurrent_wall(sql, cores, t) for t in (0, 1, cores)}
        conn.execute("DROP TABLE IF EXISTS load_km, load_db, load_wide")

    print(f"{cores} cores; compute ms (median of 3), default threads vs gpuclust.cpu_threads = 1;"
          f" load: {cores} busy loops")
    for name in CALLS:
        i0, i1 = idle[name][0], idle[name][1]
        ok_idle = i0 <= 1.15 * i1
        ok_load = any(m[0] <= 1.5 * m[1] for m in loaded[name])
        print(f"  {name}: idle {i0:.0f} vs {i1:.0f} (speed-up {i1 / i0:.2f}x); under load "
              + "; again ".join(f"{m[0]:.0f} vs {m[1]:.0f} ({m[0] / m[1]:.2f}x the one-thread"
                                f" time, {m[0] / i1:.2f}x its idle time)" for m in loaded[name]))
        if not bench:
            for what, ok in (("idle: default not slower than one thread", ok_idle),
                             ("under load: default <= 1.5x one thread", ok_load)):
                check(f"{name}: {what}", ok)
    print(f"{cores} sessions at once, wall seconds: default threads vs a fixed count")
    for name in CALLS:
        c = conc[name]
        best = min(c[1], c[cores])
        print(f"  {name}: default {c[0]:.2f} s; 1 thread each {c[1]:.2f} s; {cores} threads each"
              f" {c[cores]:.2f} s; default / best fixed {c[0] / best:.2f} (target <= 1.3)")
    return 0 if bench else summary()


if __name__ == "__main__":
    sys.exit(main())
