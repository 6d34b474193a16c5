#!/usr/bin/python3
"""citus_bench.py — k-means and DBSCAN over many rows: one node, parallel
query, and Citus with two workers on this machine.  A benchmark, not a
test: prints.

    /usr/bin/python3 test/bench/citus_bench.py [--only kmeans|dbscan]
        [--rows 10000000] [--d 32] [--k 100] [--iters 5]
        [--db-rows 10000000] [--db-d 2] [--eps 0.05] [--min-pts 20]

Starts the cluster of test/distributed/citus_cluster.sh (as test/distributed/citus_test.py does)
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
import threading
import time

import numpy as np
import psycopg

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "lib"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "distributed"))
import citus_test  # noqa: E402  (the cluster's start and stop)
from notices import notices_during  # noqa: E402
import kmeans_distributed_test as kd  # noqa: E402  (centroids_literal, ulps)

DISTINCT = 100_000


def patterns(d, seed=18):
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-50, 50, size=(64, d))
    which = rng.integers(0, 64, size=DISTINCT)
    return (centres[which] + rng.normal(size=(DISTINCT, d)) * 4).astype(np.float32)


def make_local(cur, P, rows):
    """bench_local: rows rows (id 0, 1, ...) cycling through the patterns P
    (kept in bench_patterns)."""
    cur.execute("CREATE TABLE bench_patterns (pid int, f real[])")
    with cur.copy("COPY bench_patterns (pid, f) FROM STDIN") as cp:
        for i, row in enumerate(P):
            cp.write_row((i, "{" + ",".join(repr(float(v)) for v in row) + "}"))
    cur.execute(f"CREATE TABLE bench_local AS SELECT i::bigint AS id, p.f FROM "
                f"generate_series(0, {rows - 1}) i JOIN bench_patterns p ON p.pid = i % {len(P)}")


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
    ap.add_argument("--only", choices=("kmeans", "dbscan"))
    ap.add_argument("--db-rows", type=int, default=10_000_000)
    ap.add_argument("--db-d", type=int, default=2)
    ap.add_argument("--eps", type=float, default=None)
    ap.add_argument("--min-pts", type=int, default=20)
    a = ap.parse_args()
    if citus_test.cluster("find").returncode == 3:
        print("skipped: no Citus")
        return 0
    env = citus_test.start()
    os.environ.update({k: v for k, v in env.items() if k.startswith("PG") or k.startswith("GPUCLUST")})
    try:
        if a.only != "dbscan":
            run(a)
        if a.only != "kmeans":
            run_dbscan(a)
    finally:
        citus_test.cluster("clean")
    return 0


def run(a):
    P = patterns(a.d)
    with psycopg.connect("", autocommit=True) as conn:
        cur = conn.cursor()
        t0 = time.perf_counter()
        make_local(cur, P, a.rows)
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


# ---------------------------------------------------------------------------
# DBSCAN
# ---------------------------------------------------------------------------

NOCITUS = "gc_bench_nocitus"
DB_HASH = ("SELECT count(*), sum(((hashint8(id)::bigint # ((coalesce(cluster_id, -1)::bigint << 2) "
           "+ coalesce(is_core::int, 2))) %% 1000000007)::bigint), count(DISTINCT cluster_id), "
           "count(*) FILTER (WHERE cluster_id IS NULL), count(*) FILTER (WHERE is_core) FROM ")


def db_rows_sql(a):
    """The rows, made in SQL: 64 blobs (spread 1 to 4) in [-100, 100]^d, 5% uniform."""
    blob = ", ".join(f"(c.m[{j}] + c.s * sqrt(-2 * ln(1 - random())) * cos(2 * pi() * random()))::real"
                     for j in range(1, a.db_d + 1))
    flat = ", ".join("(-110 + 220 * random())::real" for _ in range(a.db_d))
    return [
        "SELECT setseed(0.25)",
        "CREATE TABLE db_centres AS SELECT c, ARRAY(SELECT -100 + 200 * random() "
        f"FROM generate_series(1, {a.db_d}) j WHERE c >= 0) AS m, 1 + 3 * random() AS s "
        "FROM generate_series(0, 63) c",
        f"CREATE TABLE db_local AS SELECT i::bigint AS id, CASE WHEN i % 20 = 7 THEN ARRAY[{flat}] "
        f"ELSE ARRAY[{blob}] END AS features FROM generate_series(0, {a.db_rows - 1}) i "
        "JOIN db_centres c ON c.c = (i::bigint * 40503) % 64",
        "ALTER TABLE db_local ADD PRIMARY KEY (id)",
        "VACUUM ANALYZE db_local",
    ]


def notices(conn, run):
    """run() with gpuclust.log_timing on: its result and the INFO lines."""
    return notices_during(
        conn, run, "SET gpuclust.log_timing = on", "RESET gpuclust.log_timing",
        lambda d: f"{d.message_primary} | {d.message_detail or ''}"
        if (d.severity_nonlocalized or d.severity) == "INFO" else None)


def phases(lines):
    """The driver's phases (ms), partitions and summary bytes from its INFO line."""
    text = " ".join(x for x in lines if "gpu_dbscan_distributed" in x)
    out = {}
    for key in ("bounds", "slabs", "partitions", "merge", "emit"):
        m = re.search(rf"\b{key} ([\d.]+) ms", text)
        if m:
            out[key] = float(m.group(1)) / 1000
    m = re.search(r"(\d+) partitions along feature (\d+)", text)
    if m:
        out["parts"], out["dim"] = int(m.group(1)), int(m.group(2))
    m = re.search(r"(\d+) summaries of (\d+) bytes", text)
    if m:
        out["summaries"], out["summary_bytes"] = int(m.group(1)), int(m.group(2))
    return out


class PhaseMonitor:
    """Polls the workers' pg_stat_activity (every 20 ms) while the Citus run
    goes: the first and last time each phase's shard commands were seen."""
    KINDS = (("bounds", "dbscan_bounds("), ("histogram", "dbscan_histogram("),
             ("repartition: map", "worker_partition_query_result("),
             ("repartition: fetch", "fetch_intermediate_results("),
             ("repartition: insert", "INSERT INTO"), ("partitions' DBSCAN", "dbscan_partition("))

    def __init__(self, ports):
        self.ports, self.seen, self.stop = ports, {}, threading.Event()
        self.thread = threading.Thread(target=self.run)

    def run(self):
        conns = [psycopg.connect(f"port={p}", autocommit=True) for p in self.ports]
        while not self.stop.is_set():
            now = time.perf_counter()
            for c in conns:
                for (q,) in c.execute("SELECT query FROM pg_stat_activity WHERE state = 'active' "
                                      "AND pid <> pg_backend_pid()").fetchall():
                    for kind, mark in self.KINDS:
                        if mark in (q or ""):
                            first, _ = self.seen.get(kind, (now, now))
                            self.seen[kind] = (first, now)
                            break
            time.sleep(0.02)
        for c in conns:
            c.close()

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


def run_dbscan(a):
    eps = a.eps if a.eps is not None else round(0.05 * (10_000_000 / a.db_rows) ** (1 / a.db_d), 4)
    admin = psycopg.connect("", autocommit=True)
    admin.execute(f"DROP DATABASE IF EXISTS {NOCITUS}")
    admin.execute(f"CREATE DATABASE {NOCITUS}")
    local = psycopg.connect(f"dbname={NOCITUS}", autocommit=True)
    lcur = local.cursor()
    lcur.execute("CREATE EXTENSION gpuclust")
    t0 = time.perf_counter()
    for q in db_rows_sql(a):
        lcur.execute(q)
    t_make = time.perf_counter() - t0
    cur = admin.cursor()
    cur.execute("DROP TABLE IF EXISTS db_dist")
    cur.execute("CREATE TABLE db_dist (id bigint, features real[])")
    cur.execute("SET client_min_messages = warning")
    cur.execute("SELECT create_distributed_table('db_dist', 'id')")
    cur.execute("RESET client_min_messages")
    t0 = time.perf_counter()
    with lcur.copy("COPY db_local (id, features) TO STDOUT (FORMAT binary)") as out, \
            cur.copy("COPY db_dist (id, features) FROM STDIN (FORMAT binary)") as inp:
        for block in out:
            inp.write(block)
    cur.execute("VACUUM ANALYZE db_dist")
    t_copy = time.perf_counter() - t0
    local_mb = lcur.execute("SELECT pg_table_size('db_local')").fetchone()[0] / 2**20
    dist_mb = cur.execute("SELECT citus_table_size('db_dist')").fetchone()[0] / 2**20
    print(f"\nDBSCAN: {a.db_rows:,} rows x {a.db_d} features (64 Gaussian blobs of spread 1 to 4 "
          f"in [-100, 100]^{a.db_d}, 5% uniform noise), eps {eps}, min_pts {a.min_pts}")
    print(f"  db_local {local_mb:,.0f} MB (made in SQL in {t_make:.0f} s, in a database without Citus); "
          f"db_dist {dist_mb:,.0f} MB over 4 shards on 2 workers (COPY through the coordinator: {t_copy:.0f} s)")

    src_local, src_dist = "SELECT id, features FROM db_local", "SELECT id, features FROM db_dist"
    args = (eps, a.min_pts)
    rows = []

    def timed_hash(conn, sql, params):
        t0 = time.perf_counter()
        r = conn.execute(DB_HASH + sql, params).fetchone()
        return time.perf_counter() - t0, r

    t, ref = timed_hash(local, "gpu_dbscan(%s, %s, %s, device => 'cpu')", (src_local + " ORDER BY id",) + args)
    rows.append(("one node: gpu_dbscan(device => 'cpu') (reads the rows once, 2 threads)", t, ref, {}))
    local.execute("SET max_parallel_workers_per_gather = 0")
    (t, r), lines = notices(local, lambda: timed_hash(
        local, "gpu_dbscan_distributed(%s, %s, %s, device => 'cpu')", (src_local,) + args))
    rows.append(("one node: gpu_dbscan_distributed, serial (1 partition)", t, r, phases(lines)))
    (t, r), lines = notices(local, lambda: timed_hash(
        local, "gpu_dbscan_distributed(%s, %s, %s, partitions => 3, device => 'cpu')", (src_local,) + args))
    rows.append(("one node: gpu_dbscan_distributed, serial, 3 partitions", t, r, phases(lines)))
    local.execute("SET max_parallel_workers_per_gather = 2; SET parallel_setup_cost = 0; "
                  "SET parallel_tuple_cost = 0")
    (t, r), lines = notices(local, lambda: timed_hash(
        local, "gpu_dbscan_distributed(%s, %s, %s, device => 'cpu')", (src_local,) + args))
    rows.append(("one node: gpu_dbscan_distributed, parallel query (2 workers + leader)", t, r, phases(lines)))
    with PhaseMonitor(citus_test_ports()) as mon:
        ((t, r), lines), sent = citus_test.remote_commands(admin, lambda: notices(admin, lambda: timed_hash(
            admin, "gpu_dbscan_distributed(%s, %s, %s, device => 'cpu')", (src_dist,) + args)))
    cit = phases(lines)
    rows.append(("Citus, 2 workers on this machine: gpu_dbscan_distributed", t, r, cit))

    print("\n| run | total | bounds | slabs | partitions' DBSCAN | merge + labels | partitions "
          "| labels vs gpu_dbscan |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, t, r, ph in rows:
        same = "—" if r is ref else ("identical" if r[:2] == ref[:2] else f"DIFFER ({r} vs {ref})")
        f = (lambda k: f"{ph[k]:.1f} s" if k in ph else "")
        mrg = f"{ph['merge'] + ph['emit']:.1f} s" if "merge" in ph and "emit" in ph else ""
        print(f"| {name} | {t:.1f} s | {f('bounds')} | {f('slabs')} | {f('partitions')} | {mrg} | "
              f"{ph.get('parts', '')} | {same} |")
    print(f"\n{ref[2]:,} clusters, {ref[3]:,} noise rows, {ref[4]:,} core rows (the times include "
          "counting and hashing the returned rows)")
    if mon.seen:
        print("\nThe Citus run's phases as seen on the workers (pg_stat_activity every 20 ms):")
        for kind, _ in PhaseMonitor.KINDS:
            if kind in mon.seen:
                first, last = mon.seen[kind]
                print(f"  {kind}: {last - first:.1f} s")

    # the Citus run's plan, and what each phase moved
    plans = [m.group(1) for c in sent for m in [re.search(r"dbscan_partitions\([^']*'+(\{[^}]*\})'", c)] if m]
    if not plans:
        print("\n(no dbscan_partitions plan seen in the remote commands)")
    else:
        plan = plans[0]
        held, home, row_bytes = cur.execute(
            "SELECT count(*), count(*) FILTER (WHERE p.part = p.home), "
            "sum(pg_column_size(ROW(0, p.part, s.id, p.home, p.shared, p.x)))::bigint "
            "FROM db_dist s CROSS JOIN LATERAL dbscan_partitions(s.features, %s::float8[]) p",
            (plan,)).fetchone()
        vals = plan.strip("{}").split(",")
        bounds_q = [c for c in sent if "worker_partial_agg('public.dbscan_bounds(" in c]
        hist_q = [c for c in sent if "worker_partial_agg('public.dbscan_histogram(" in c]
        runs = [c for c in sent if "dbscan_partition(" in c and "GROUP BY" in c]
        repart = [c for c in sent if "worker_partition_query_result(" in c]
        fetches = [c for c in sent if "fetch_intermediate_results(" in c]
        # the states' text, as Citus sends them back (one shard's; the others alike)
        b_len = cur.execute("SELECT length(dbscan_bounds(features, id)::text) FROM db_dist").fetchone()[0]
        m = re.search(r"ROW\(features, (\d+), '([^']+)'::double precision, '([^']+)'::double precision, (\d+)\)",
                      hist_q[0]) if hist_q else None
        h_len = cur.execute("SELECT length(dbscan_histogram(features, %s, %s, %s, %s)::text) FROM db_dist",
                            (int(m.group(1)), float(m.group(2)), float(m.group(3)), int(m.group(4)))
                            ).fetchone()[0] if m else 0
        out = lambda qs: sum(len(c.encode()) for c in qs)  # noqa: E731
        print(f"\nCitus run: {cit.get('parts', len(vals) - 2)} partitions along feature "
              f"{cit.get('dim', int(float(vals[1])) + 1)}, halo {float(vals[2]):.4g} (2 eps and a margin)")
        print(f"rows held by the partitions: {held:,} for n = {a.db_rows:,}: {held - home:,} halo copies, "
              f"{held / a.db_rows:.4f} x n")
        print("\n| phase | moves | bytes |")
        print("| --- | --- | --- |")
        print(f"| bounds | {len(bounds_q)} shard queries out; {len(bounds_q)} float8[] states back "
              f"(text, about {b_len} bytes each) | {out(bounds_q):,} + {len(bounds_q) * b_len:,} |")
        print(f"| histogram | {len(hist_q)} shard queries out; {len(hist_q)} states of "
              f"{m.group(4) if m else '?'} bins back (text, at most {h_len:,} bytes each) | "
              f"{out(hist_q):,} + {len(hist_q) * h_len:,} |")
        print(f"| repartition | {len(repart)} worker_partition_query_result and {len(fetches)} "
              f"fetch_intermediate_results, worker to worker: {held:,} rows of "
              f"{row_bytes / max(held, 1):.1f} bytes (key, part, id, home, shared, x) | "
              f"{row_bytes:,} ({row_bytes / 2**20:,.0f} MB; {row_bytes / (dist_mb * 2**20):.2f} of the "
              f"source table) |")
        print(f"| partitions' DBSCAN | {len(runs)} shard queries out; {cit.get('summaries', '?')} "
              f"summaries back (bytea) | {out(runs):,} + {cit.get('summary_bytes', 0):,} |")
        print(f"\nthrough the coordinator: the queries, the states and the summaries "
              f"({(out(bounds_q + hist_q + runs + repart) + len(bounds_q) * (b_len + h_len) + cit.get('summary_bytes', 0)) / 2**20:,.1f} MB) "
              f"against a source of {dist_mb:,.0f} MB; between the workers at most the repartition's "
              f"{row_bytes / 2**20:,.0f} MB (the part each worker keeps does not move)")
    admin.execute("DROP TABLE db_dist")
    local.close()
    admin.execute(f"DROP DATABASE {NOCITUS}")
    admin.close()


def citus_test_ports():
    return [int(p) for p in os.environ.get("GPUCLUST_CITUS_PORTS", "55432,55433,55434").split(",")[1:]]

if __name__ == "__main__":
    sys.exit(main())
