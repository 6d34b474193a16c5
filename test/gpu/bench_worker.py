#!/usr/bin/env python3
"""The GPU worker against per-backend CUDA contexts, on one server.

  bench_worker.py --restart-cmd CMD

Against the server in $PGHOST... (gpuclust preloaded; the pg-bundle on the GPU
machine).  For each mode, worker (gpuclust.gpu_worker = on) then per-backend
(off; CMD restarts the server after ALTER SYSTEM), in one run:
  - 16 concurrent sessions, each running gpu_kmeans on 1M rows x 32 (k = 100)
    and gpu_dbscan on 10M 2-d rows (device 'gpu'): the wall time, calls/s,
    and each call's median latency;
  - the first GPU call of a fresh session against a warm one (10k x 32, k 10);
  - the GPU memory held by the 16 sessions once idle (nvidia-smi: processes
    and MiB).
Prints one line per figure and the worker/per-backend ratios.
"""
import argparse
import statistics
import subprocess
import threading
import time

import psycopg

KM = "SELECT count(*) FROM gpu_kmeans('SELECT id, f FROM b_km', 100, seed => 1, device => 'gpu')"
DB = "SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM b_db', 0.0005, 8, device => 'gpu')"
LAT = "SELECT count(*) FROM gpu_kmeans('SELECT id, f FROM b_lat', 10, seed => 1, device => 'gpu')"


def connect():
    return psycopg.connect("", autocommit=True)


def setup():
    with connect() as c:
        c.execute("CREATE EXTENSION IF NOT EXISTS gpuclust")
        have = {r[0] for r in c.execute("SELECT relname FROM pg_class WHERE relname LIKE 'b\\_%'")}
        if "b_km" not in have:
            c.execute("CREATE TABLE b_km AS SELECT i::bigint AS id, ARRAY(SELECT ((i % 100) * 3 + (hashint4(i * 64 + j) % 1000) / 1000.0)::real"
                      " FROM generate_series(1, 32) j) AS f FROM generate_series(1, 1000000) i")
        if "b_db" not in have:
            c.execute("CREATE TABLE b_db AS SELECT i::bigint AS id, ARRAY[(hashint8(i) % 1000000) / 1000000.0,"
                      " (hashint8(i + 17) % 1000000) / 1000000.0]::real[] AS f FROM generate_series(1, 10000000) i")
        if "b_lat" not in have:
            c.execute("CREATE TABLE b_lat AS SELECT i::bigint AS id, ARRAY(SELECT (hashint4(i * 100 + j) % 1000)::real"
                      " FROM generate_series(1, 32) j) AS f FROM generate_series(1, 10000) i")
        c.execute("VACUUM ANALYZE b_km, b_db, b_lat")


def gpu_procs():
    """Processes nvidia-smi lists on the GPU, and the GPU's memory in use (MiB)."""
    out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True).stdout.strip().splitlines()
    used = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                          capture_output=True, text=True).stdout.strip()
    return len([l for l in out if l.strip()]), int(used.split()[0])


def concurrent(conns, queries=(("km", KM), ("db", DB))):
    """Each session of conns runs each of queries, (name, SQL), once (every
    other one in the reverse order), all at once: wall_s, the median latency
    of each (median_s[name]; km_median_s and db_median_s for KM and DB),
    errors and error_texts."""
    lat = {name: [] for name, _ in queries}
    errs = []

    def session(c, s):
        try:
            for name, q in queries if s % 2 == 0 else tuple(reversed(queries)):
                t0 = time.perf_counter()
                c.execute(q).fetchone()
                lat[name].append(time.perf_counter() - t0)
        except psycopg.Error as e:
            errs.append(str(e))
    t0 = time.perf_counter()
    ts = [threading.Thread(target=session, args=(c, s)) for s, c in enumerate(conns)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    med = {name: statistics.median(v) if v else float("nan") for name, v in lat.items()}
    return {"wall_s": time.perf_counter() - t0, "median_s": med,
            "km_median_s": med.get("km", float("nan")), "db_median_s": med.get("db", float("nan")),
            "errors": len(errs), "error_texts": errs}


def run_mode(label):
    res = {}
    # first call of a fresh session vs warm (median of 5 sessions)
    firsts, warms = [], []
    for _ in range(5):
        with connect() as c:
            c.execute("SELECT 1")
            t0 = time.perf_counter(); c.execute(LAT).fetchone(); firsts.append((time.perf_counter() - t0) * 1e3)
            t0 = time.perf_counter(); c.execute(LAT).fetchone(); warms.append((time.perf_counter() - t0) * 1e3)
    res["first_ms"] = statistics.median(firsts)
    res["warm_ms"] = statistics.median(warms)

    conns = [connect() for _ in range(16)]
    res.update(concurrent(conns))
    errs = res["error_texts"]
    time.sleep(1)
    res["gpu_procs"], res["gpu_mib_1s"] = gpu_procs()
    time.sleep(7)                   # the worker gives pooled memory back after 5 s idle
    res["gpu_procs"], res["gpu_mib"] = gpu_procs()
    for c in conns:
        c.close()
    print(f"{label}: 16 sessions x (k-means 1M x 32 k 100 + DBSCAN 10M 2-d): {res['wall_s']:.2f} s wall,"
          f" {32 / res['wall_s']:.2f} calls/s, median k-means {res['km_median_s']:.2f} s, DBSCAN {res['db_median_s']:.2f} s,"
          f" errors {res['errors']}{' (' + errs[0][:200] + ')' if errs else ''}", flush=True)
    print(f"{label}: first GPU call of a session {res['first_ms']:.1f} ms, warm {res['warm_ms']:.1f} ms (10k x 32, k 10)", flush=True)
    print(f"{label}: 16 idle sessions after GPU calls: {res['gpu_procs']} processes on the GPU,"
          f" {res['gpu_mib_1s']} MiB after 1 s, {res['gpu_mib']} MiB after 8 s", flush=True)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--restart-cmd", required=True)
    args = ap.parse_args()
    setup()
    with connect() as c:
        c.execute("ALTER SYSTEM RESET gpuclust.gpu_worker")
    subprocess.run(args.restart_cmd, shell=True, check=True)
    time.sleep(3)
    w = run_mode("worker")
    with connect() as c:
        c.execute("ALTER SYSTEM SET gpuclust.gpu_worker = off")
    subprocess.run(args.restart_cmd, shell=True, check=True)
    b = run_mode("per-backend")
    with connect() as c:
        c.execute("ALTER SYSTEM RESET gpuclust.gpu_worker")
    subprocess.run(args.restart_cmd, shell=True, check=True)
    print(f"ratio per-backend/worker: wall {b['wall_s'] / w['wall_s']:.2f}x, first call {b['first_ms'] / w['first_ms']:.1f}x,"
          f" idle GPU memory {b['gpu_mib'] / max(w['gpu_mib'], 1):.1f}x")


if __name__ == "__main__":
    main()
