#!/usr/bin/python3
"""citus_bench.py — k-means over many rows: one node, parallel query, and
Citus with two workers on this machine.  A benchmark, not a test: prints.

    /usr/bin/python3 test/bench/citus_bench.py [--rows 10000000] [--d 32] [--k 100] [--iters 5]

Starts the cluster of test/citus_cluster.sh (as test/citus_test.py does)
and removes it at the end.  Data: --rows rows of --d float32 features
(100,000 distinct rows of Gaussian blobs, numpy, each repeated; the work
per row is the same as for distinct ones) in bench_local, a plain table
on the coordinator, and bench_dist, distributed by id over 4 shards (2 per
worker).  From the same k initial centres, --iters Lloyd iterations (tol 0),
timed as whole statements:
  - gpu_kmeans_fit(device => 'cpu') on bench_local: one backend reads every
    row once into a float32 matrix, then iterates on it (2 OpenMP threads);
  - gpu_kmeans_distributed on bench_local, serial and with parallel query
    (max_parallel_workers_per_gather = 2): one kmeans_step pass per
    iteration, plus one for the count and mean and one for the final
    inertia;
  - gpu_kmeans_distributed on bench_dist: the same passes, each a
    worker_partial_agg on the 4 shards and a coord_combine_agg.
The time of a pass over 1,000 rows (its fixed cost), on one node and over
Citus.  And the bytes one iteration moves between the coordinator and the workers
(the shard queries' text, the centroids in it, and the states' text form)
against the table's size.  The centroids of all runs are compared (float32
steps).
"""
import argparse
import os
import re
import sys
import time

import numpy as np
import psycopg

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import citus_test  # noqa: E402  (the cluster's start and stop)
import kmeans_distributed_test as kd  # noqa: E402  (centroids_literal, ulps)

DISTINCT = 100_000


def patterns(d, seed=18):
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-50, 50, size=(64, d))
    which = rng.integers(0, 64, size=DISTINCT)
    return (centres[which] + rng.normal(size=(DISTINCT, d)) * 4).astype(np.float32)


def timed(cur, sql, params=None):
    t0 = time.perf_counter()
    cur.execute(sql, params)
    r = cur.fetchone()
    return time.perf_counter() - t0, r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--d", type=int, default=32)
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--iters", type=int, default=5)
    a = ap.parse_args()
    if citus_test.cluster("find").returncode == 3:
        print("skipped: no Citus")
        return 0
    env = citus_test.start()
    os.environ.update({k: v for k, v in env.items() if k.startswith("PG")})
    try:
        run(a)
    finally:
        citus_test.cluster("clean")
    return 0


def run(a):
    P = patterns(a.d)
    with psycopg.connect("", autocommit=True) as conn:
        cur = conn.cursor()
        t0 = time.perf_counter()
        cur.execute("CREATE TABLE bench_patterns (pid int, f real[])")
        with cur.copy("COPY bench_patterns (pid, f) FROM STDIN") as cp:
            for i, row in enumerate(P):
                cp.write_row((i, "{" + ",".join(repr(float(v)) for v in row) + "}"))
        cur.execute(f"CREATE TABLE bench_local AS SELECT i::bigint AS id, p.f FROM "
                    f"generate_series(0, {a.rows - 1}) i JOIN bench_patterns p ON p.pid = i % {DISTINCT}")
        t_local = time.perf_counter() - t0
        cur.execute("CREATE TABLE bench_dist (id bigint, f real[])")
        cur.execute("SELECT create_distributed_table('bench_dist', 'id')")
        t0 = time.perf_counter()
        cur.execute("INSERT INTO bench_dist SELECT * FROM bench_local")
        t_dist = time.perf_counter() - t0
        cur.execute("VACUUM ANALYZE bench_local")
        cur.execute("VACUUM ANALYZE bench_dist")
        local_mb = cur.execute("SELECT pg_total_relation_size('bench_local')").fetchone()[0] / 2**20
        dist_mb = cur.execute("SELECT citus_table_size('bench_dist')").fetchone()[0] / 2**20
        print(f"{a.rows:,} rows x {a.d} features ({DISTINCT:,} distinct), k = {a.k}, "
              f"{a.iters} iterations from the same centres")
        print(f"  bench_local {local_mb:,.0f} MB (made in {t_local:.0f} s); bench_dist {dist_mb:,.0f} MB "
              f"over 4 shards on 2 workers (INSERT ... SELECT through the coordinator: {t_dist:.0f} s)")

        C0 = P[np.random.default_rng(7).choice(DISTINCT, size=a.k, replace=False)]
        lit = kd.centroids_literal(C0)
        passes = a.iters + 2
        fit_q = ("SELECT centroids, iterations FROM gpu_kmeans_fit(%s, %s, max_iter => %s, tol => 0, "
                 "init_centroids => %s::real[], device => 'cpu')")
        dist_q = ("SELECT centroids, iterations FROM gpu_kmeans_distributed(%s, %s, max_iter => %s, tol => 0, "
                  "init_centroids => %s::real[])")
        rows = []
        t, (C_fit, it) = timed(cur, fit_q, ("SELECT id, f FROM bench_local", a.k, a.iters, lit))
        rows.append(("one node: gpu_kmeans_fit (reads the rows once, 2 threads)", t, it, None, C_fit))
        cur.execute("SET max_parallel_workers_per_gather = 0")
        t, (C, it) = timed(cur, dist_q, ("SELECT id, f FROM bench_local", a.k, a.iters, lit))
        rows.append(("one node: gpu_kmeans_distributed, serial", t, it, t / passes, C))
        cur.execute("SET max_parallel_workers_per_gather = 2; SET parallel_setup_cost = 0; "
                    "SET parallel_tuple_cost = 0")
        t, (C, it) = timed(cur, dist_q, ("SELECT id, f FROM bench_local", a.k, a.iters, lit))
        plan = "\n".join(r[0] for r in cur.execute(
            "EXPLAIN SELECT kmeans_step(f, NULL::real[], id) FROM bench_local").fetchall())
        workers = re.findall(r"Workers Planned: (\d+)", plan)
        rows.append((f"one node: gpu_kmeans_distributed, parallel query ({workers[0] if workers else 0} "
                     "workers + leader)", t, it, t / passes, C))
        cur.execute("RESET max_parallel_workers_per_gather; RESET parallel_setup_cost; "
                    "RESET parallel_tuple_cost")
        (t, (C, it)), sent = citus_test.remote_commands(
            conn, lambda: timed(cur, dist_q, ("SELECT id, f FROM bench_dist", a.k, a.iters, lit)))
        rows.append(("Citus, 2 workers on this machine: gpu_kmeans_distributed", t, it, t / passes, C))

        print(f"\n| run | total | iterations | per pass (iterations + 2) | centroids vs gpu_kmeans_fit |")
        print("| --- | --- | --- | --- | --- |")
        for name, t, it, per, C in rows:
            u = int(kd.ulps(np.array(C, dtype=np.float32), np.array(C_fit, dtype=np.float32)).max())
            print(f"| {name} | {t:.1f} s | {it} | {'' if per is None else f'{per:.2f} s'} | "
                  f"max {u} float32 steps |")

        # the fixed cost of a pass: 1,000 rows, 50 iterations
        cur.execute("CREATE TABLE bench_small_local AS SELECT * FROM bench_local WHERE id < 1000")
        cur.execute("CREATE TABLE bench_small (id bigint, f real[])")
        cur.execute("SELECT create_distributed_table('bench_small', 'id')")
        cur.execute("INSERT INTO bench_small SELECT * FROM bench_small_local")
        small = []
        for table in ("bench_small_local", "bench_small"):
            t, (C, it) = timed(cur, dist_q, (f"SELECT id, f FROM {table}", a.k, 50, lit))
            small.append(1000 * t / (it + 2))
        print(f"\na pass over 1,000 rows (k = {a.k}; the fixed cost of a pass): {small[0]:.1f} ms on one node, "
              f"{small[1]:.1f} ms over Citus")

        # the traffic of one iteration
        partial = [c for c in sent if "worker_partial_agg('public.kmeans_step(" in c]
        shards = 4
        q_out = max(len(c.encode()) for c in partial)
        cur.execute("SELECT length(worker_partial_agg('kmeans_step(real[],real[],bigint)'::regprocedure, "
                    "ROW(f, %s::real[], pid::bigint))::text) FROM bench_patterns", (lit,))
        s_back = cur.fetchone()[0]
        per_it = shards * (q_out + s_back)
        print(f"\nper iteration: {shards} shard queries of {q_out:,} bytes out (the centroids as text), "
              f"{shards} states of {s_back:,} bytes back: {per_it / 1024:,.0f} KB, "
              f"{per_it / (dist_mb * 2**20):.1e} of the table's {dist_mb:,.0f} MB "
              f"({len(partial)} shard queries in the run: {len(partial) // shards} passes)")
        cur.execute("DROP TABLE bench_patterns, bench_local, bench_dist, bench_small, bench_small_local")


if __name__ == "__main__":
    sys.exit(main())
