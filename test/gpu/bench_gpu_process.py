#!/usr/bin/env python3
"""What the GPU worker's hop costs, for two or more builds of the library.

  bench_gpu_process.py --restart-cmd CMD --lib PATH [--rows N] NAME=SO [NAME=SO ...]

Against the server in $PGHOST... (gpuclust preloaded: the pg-bundle on the
GPU machine).  For each build, in the order given, in one run: SO is copied
over PATH (the installed gpuclust.so), CMD restarts the server, and then
  - the first GPU call of a fresh session and the next one (gpu_kmeans on
    10k rows x 32, k 10; median of 7 sessions);
  - gpu_dbscan on 10M 2-d rows through the worker (eps 0.0005, min_pts 8,
    device 'gpu'; median of 3 calls), the whole call and the GPU job's
    part as log_timing reports it.
Prints one line per build and figure, then each build's ratio to the first.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import time

import psycopg

LAT = "SELECT count(*) FROM gpu_kmeans('SELECT id, f FROM hop_lat', 10, seed => 1, device => 'gpu')"
DB = "SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM hop_db', 0.0005, 8, device => 'gpu')"


def connect():
    return psycopg.connect("", autocommit=True)


def setup(rows):
    with connect() as c:
        c.execute("CREATE EXTENSION IF NOT EXISTS gpuclust")
        have = {r[0] for r in c.execute("SELECT relname FROM pg_class WHERE relname LIKE 'hop\\_%'")}
        if "hop_db" in have and rows != one(c, "SELECT count(*) FROM hop_db"):
            c.execute("DROP TABLE hop_db")
            have.discard("hop_db")
        if "hop_db" not in have:
            c.execute("CREATE TABLE hop_db AS SELECT i::bigint AS id, ARRAY[(hashint8(i) % 1000000) / 1000000.0,"
                      f" (hashint8(i + 17) % 1000000) / 1000000.0]::real[] AS f FROM generate_series(1, {rows}) i")
        if "hop_lat" not in have:
            c.execute("CREATE TABLE hop_lat AS SELECT i::bigint AS id, ARRAY(SELECT (hashint4(i * 100 + j) % 1000)::real"
                      " FROM generate_series(1, 32) j) AS f FROM generate_series(1, 10000) i")
        c.execute("VACUUM ANALYZE hop_db, hop_lat")


def one(c, sql, args=None):
    return c.execute(sql, args).fetchone()[0]


def wait_ready(timeout=60):
    t0 = time.time()
    while time.time() - t0 < timeout:
        try:
            with connect() as c:
                i = dict(c.execute("SELECT key, value FROM gpuclust_info()").fetchall())
                if i.get("gpu_worker") == "running" and i.get("gpu_usable") == "true":
                    return True
        except psycopg.Error:
            pass
        time.sleep(0.2)
    return False


def ms(f):
    t0 = time.perf_counter()
    f()
    return (time.perf_counter() - t0) * 1000


def measure():
    firsts, warms = [], []
    for _ in range(7):
        with connect() as c:
            c.execute("SELECT 1")
            firsts.append(ms(lambda: c.execute(LAT).fetchone()))
            warms.append(ms(lambda: c.execute(LAT).fetchone()))
    calls, jobs = [], []
    with connect() as c:
        notices = []
        c.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        c.execute("SET gpuclust.log_timing = on")
        c.execute(DB).fetchone()            # warm: the pool, the pages
        for _ in range(3):
            notices.clear()
            calls.append(ms(lambda: c.execute(DB).fetchone()))
            # log_timing's INFO: "...; ingest X ms, compute Y ms, emit Z ms"
            comp = [float(m.group(1)) for n in notices for m in [re.search(r"compute ([\d.]+) ms", n)] if m]
            jobs.append(comp[-1] if comp else float("nan"))
    return {"first call (ms)": statistics.median(firsts), "warm call (ms)": statistics.median(warms),
            "DBSCAN call (ms)": statistics.median(calls), "DBSCAN compute (ms)": statistics.median(jobs)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--restart-cmd", required=True)
    ap.add_argument("--lib", required=True, help="the installed gpuclust.so")
    ap.add_argument("--rows", type=int, default=10000000, help="DBSCAN's rows")
    ap.add_argument("builds", nargs="+", help="NAME=PATH of a gpuclust.so")
    a = ap.parse_args()
    setup(a.rows)
    results = {}
    for b in a.builds:
        name, path = b.split("=", 1)
        # a new file in place of the old: running processes keep theirs mapped
        shutil.copyfile(path, a.lib + ".new")
        os.replace(a.lib + ".new", a.lib)
        subprocess.run(a.restart_cmd, shell=True, check=True, capture_output=True, timeout=120)
        if not wait_ready():
            print(f"{name}: the worker did not get ready")
            continue
        results[name] = measure()
        for k, v in results[name].items():
            print(f"{name:>8}  {k:<28} {v:10.1f}", flush=True)
    names = list(results)
    for name in names[1:]:
        for k in results[name]:
            base = results[names[0]][k]
            print(f"{name}/{names[0]}  {k:<28} {results[name][k] / base if base else float('nan'):.3f}")


if __name__ == "__main__":
    main()
