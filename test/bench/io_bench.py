#!/usr/bin/python3
"""io_bench.py — what reading the source query and writing the result rows
cost, against plain PostgreSQL doing the same amount of reading and writing.

Not a test: prints a table and ratios (issue 11, item 6).  Needs a running
server (libpq environment) where the gpuclust extension can be created.

  ingest  gpuclust.log_timing's ingest phase of gpu_kmeans (k = 1, one
          iteration, CPU: the compute phase is small) over a table of N rows
          of d-dimensional real[] features, against
          SELECT sum(cardinality(f)) FROM t   (a scan that reads every array)
          as PostgreSQL runs it (a parallel aggregate, where it has workers),
          and the same scan in one process (max_parallel_workers_per_gather
          = 0) for scale.
  emit    log_timing's emit phase (the N result rows written into the
          function's tuplestore), and "emit + scan": the whole statement
          SELECT count(*) FROM gpu_kmeans(...) minus its ingest and compute
          phases (writing the rows and reading them back), against
          SELECT count(*) FROM f(N)  where f is a set-returning function of
          N (bigint, int, float8) rows (a VOLATILE SQL function over
          generate_series, so that it is not inlined), and, for scale,
          SELECT count(*) FROM generate_series(1, N)  (one built-in C
          function, one column).

Every timing is the best of --repeat runs, ours and the peers' interleaved
so that load from other processes hits both alike; the ratios are what
counts on a shared machine.

  /usr/bin/python3 test/bench/io_bench.py [--rows 1000000] [--dims 32,2]
      [--repeat 5] [--rebuild] [--schema S]

--schema S uses the functions in schema S instead of CREATE EXTENSION
(to compare builds side by side).  The tables (io_bench_d32, io_bench_d2)
are kept between runs; --rebuild makes them anew.
"""
import argparse
import os
import re
import time

import psycopg

TIMING = re.compile(r"ingest ([0-9.]+) ms, compute ([0-9.]+) ms.*, emit ([0-9.]+) ms")


def log(msg=""):
    print(msg, flush=True)


def connect(schema):
    conn = psycopg.connect(autocommit=True)
    notices = []
    conn.add_notice_handler(lambda d: notices.append(d.message_primary))
    with conn.cursor() as cur:
        if schema:
            cur.execute(f"SET search_path = {schema}, public")
        else:
            cur.execute("SET client_min_messages = warning")
            cur.execute("CREATE EXTENSION IF NOT EXISTS gpuclust")
            cur.execute("RESET client_min_messages")
        cur.execute("SET gpuclust.log_timing = on")
    return conn, notices


def make_table(cur, name, n, d, rebuild):
    cur.execute("SELECT to_regclass(%s) IS NOT NULL", (name,))
    if cur.fetchone()[0] and not rebuild:
        cur.execute(f"SELECT count(*), max(cardinality(f)) FROM {name}")
        if cur.fetchone() == (n, d):
            return
    log(f"  building {name}: {n:,} rows of {d} real features ...")
    t0 = time.perf_counter()
    cur.execute(f"DROP TABLE IF EXISTS {name}")
    cur.execute(f"CREATE TABLE {name} (id bigint, f real[])")
    cur.execute(f"""INSERT INTO {name}
                    SELECT i, (SELECT array_agg(random()::real) FROM generate_series(1, {d}) j
                               WHERE i > 0)
                    FROM generate_series(1, {n}) i""")
    cur.execute(f"VACUUM ANALYZE {name}")
    log(f"  ... {time.perf_counter() - t0:.1f} s")


def wall_ms(cur, sql):
    t0 = time.perf_counter()
    cur.execute(sql)
    cur.fetchall()
    return (time.perf_counter() - t0) * 1e3


def serial_ms(cur, sql):
    cur.execute("SET max_parallel_workers_per_gather = 0")
    try:
        return wall_ms(cur, sql)
    finally:
        cur.execute("RESET max_parallel_workers_per_gather")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--dims", default="32,2")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--schema")
    args = ap.parse_args()
    n = args.rows
    dims = [int(x) for x in args.dims.split(",")]

    conn, notices = connect(args.schema)
    cur = conn.cursor()
    cur.execute("SHOW server_version")
    version = cur.fetchone()[0]
    cur.execute("SHOW max_parallel_workers_per_gather")
    workers = cur.fetchone()[0]
    cur.execute("""CREATE OR REPLACE FUNCTION public.io_bench_rows(n int)
                   RETURNS TABLE (id bigint, cluster_id int, distance float8)
                   LANGUAGE sql VOLATILE
                   AS 'SELECT i::bigint, (i % 100)::int, i::float8 FROM generate_series(1, n) i'""")
    for d in dims:
        make_table(cur, f"public.io_bench_d{d}", n, d, args.rebuild)

    log(f"PostgreSQL {version}, max_parallel_workers_per_gather = {workers}, "
        f"{n:,} rows, best of {args.repeat}")
    rows = []
    for d in dims:
        t = f"public.io_bench_d{d}"
        ours = f"""SELECT count(*) FROM gpu_kmeans('SELECT id, f FROM {t}', 1, max_iter => 1,
                                                  init => 'random', device => 'cpu')"""
        scan = f"SELECT sum(cardinality(f)) FROM {t}"
        ref3 = f"SELECT count(*) FROM public.io_bench_rows({n})"
        ref1 = f"SELECT count(*) FROM generate_series(1, {n})"
        # warm-up: caches, the library, the plans
        wall_ms(cur, scan)
        wall_ms(cur, ours)
        best = {k: float("inf") for k in
                ("ingest", "compute", "emit", "emit_scan", "total", "scan", "scan1", "ref3", "ref1")}
        for _ in range(args.repeat):
            notices.clear()
            total = wall_ms(cur, ours)
            m = next(TIMING.search(x) for x in notices if TIMING.search(x))
            ingest, compute, emit = (float(x) for x in m.groups())
            for k, v in (("ingest", ingest), ("compute", compute), ("emit", emit),
                         ("emit_scan", total - ingest - compute), ("total", total),
                         ("scan", wall_ms(cur, scan)), ("scan1", serial_ms(cur, scan)),
                         ("ref3", wall_ms(cur, ref3)),
                         ("ref1", wall_ms(cur, ref1))):
                best[k] = min(best[k], v)
        rows.append((d, best))

    us = lambda ms: ms * 1e3 / n  # noqa: E731
    t = lambda ms: f"{ms:.0f} ms ({us(ms):.3f} µs/row)"  # noqa: E731
    log()
    log("ingest: the source read into the matrix, against a scan that reads every array")
    log()
    log("| d | ingest | `SELECT sum(cardinality(f))` | ratio (target ≤ 2.5) |"
        " same scan in one process | ratio |")
    log("| --- | --- | --- | --- | --- | --- |")
    for d, b in rows:
        log(f"| {d} | {t(b['ingest'])} | {t(b['scan'])} | {b['ingest'] / b['scan']:.2f} "
            f"| {t(b['scan1'])} | {b['ingest'] / b['scan1']:.2f} |")
    log()
    log(f"emit: {n:,} result rows written (and, second column, read back by the query),"
        " against a function returning as many (bigint, int, float8) rows")
    log()
    log("| d | emit | emit + scan of the result | `SELECT count(*) FROM f(N)` |"
        " ratio emit (target ≤ 1.5) | ratio emit + scan | `generate_series(1, N)` |")
    log("| --- | --- | --- | --- | --- | --- | --- |")
    for d, b in rows:
        log(f"| {d} | {t(b['emit'])} | {t(b['emit_scan'])} | {t(b['ref3'])} "
            f"| {b['emit'] / b['ref3']:.2f} | {b['emit_scan'] / b['ref3']:.2f} | {t(b['ref1'])} |")
    log()
    for d, b in rows:
        log(f"d = {d}: whole statement {b['total']:.0f} ms = ingest {b['ingest']:.0f} + "
            f"compute {b['compute']:.0f} + emit and scan {b['emit_scan']:.0f}")
    log(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
