#!/usr/bin/python3
"""dbscan_distributed_test.py — DBSCAN over partitions (gpu_dbscan_distributed)
under parallel query equals the single-node DBSCAN, exactly.

Run against a running server with the extension installed (libpq
environment variables), by test/run_tests.sh.

Data:
  - the 135,233 world cities of test/data ([lon, lat], real);
  - 100,000 rows of 3 float32 features around 30 Gaussian blobs of
    different spreads plus 5% uniform rows, 300 exact duplicates of other
    rows and 50 rows with NULL features; ids distinct but random, so that
    the table's order is not the ids';
  - 30,000 rows of 8 features around 20 blobs (d = 8);
  - a 1025 x 40 integer lattice with 10% of its points removed, eps 1:
    neighbours exactly at eps; its x spans 1024, so that the histogram's
    bin edges, and the cuts made from them, are integers: rows lie exactly
    on the cuts.

For each data set and several (eps, min_pts), gpu_dbscan_distributed(
'SELECT id, f FROM t', eps, min_pts, partitions => P) for P in 1, 2, 5, 16
must equal gpu_dbscan('SELECT id, f FROM t ORDER BY id', eps, min_pts)
exactly: cluster_id and is_core of every id (NULL for rows with NULL
features), both without parallel query and with it forced
(parallel_setup_cost = 0, parallel_tuple_cost = 0,
min_parallel_table_scan_size = 0, max_parallel_workers_per_gather = 4).
The parallel runs log their nested queries through auto_explain: the
partitions' query (dbscan_partition grouped by partition over
dbscan_partitions) must be a Finalize aggregate over a Gather over a
Partial aggregate with workers launched, and so must the bounds' and
histogram's aggregates.  One case runs again with work_mem = 64kB and
sorts off: the hash aggregates of the partitions spill to disk, and the
result must not change.

Options (a machine with a GPU, test/gpu/run_gpu_tests.sh's dbdist stage):
  --device gpu   the partitions' local runs with device => 'gpu' (no
                 fallback: an unusable GPU is an error), against gpu_dbscan
                 with device => 'cpu';
  --bench N      instead of the checks above, N rows of 2 features (blobs)
                 clustered by gpu_dbscan on each device and by
                 gpu_dbscan_distributed with 1, 4 and 16 partitions under
                 parallel query, timed in the server, each checked equal to
                 the CPU's gpu_dbscan.

Prints PASS/FAIL per check, INFO with counts and timings, and
"N passed, N failed"; exits 1 on any failure.
"""
import os
import re
import sys
import time

import numpy as np
import psycopg

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from notices import nested_plans  # noqa: E402
from report import check, info, summary  # noqa: E402
from cities import load_cities  # noqa: E402


PARALLEL = ("SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0; "
            "SET min_parallel_table_scan_size = 0; SET max_parallel_workers_per_gather = 4")
SERIAL = "SET max_parallel_workers_per_gather = 0"
PARTITIONS = (1, 2, 5, 16)
DEVICE = None   # --device: the local runs' device


def literal(row):
    return "{" + ",".join(repr(float(v)) for v in row) + "}"


def load(cur, table, ids, X, null_ids=()):
    cur.execute(f"DROP TABLE IF EXISTS {table}")
    cur.execute(f"CREATE TABLE {table} (id bigint PRIMARY KEY, f real[])")
    with cur.copy(f"COPY {table} (id, f) FROM STDIN") as cp:
        for i, row in zip(ids, X):
            cp.write_row((int(i), literal(row)))
        for i in null_ids:
            cp.write_row((int(i), None))
    cur.execute(f"ANALYZE {table}")


def blobs(rng, n, d, k, lo, hi, spread):
    centres = rng.uniform(lo, hi, size=(k, d))
    s = rng.uniform(*spread, size=k)
    which = rng.integers(0, k, size=n)
    return (centres[which] + rng.normal(size=(n, d)) * s[which, None]).astype(np.float32)


def make_blobs3(cur):
    rng = np.random.default_rng(31)
    X = blobs(rng, 95_000, 3, 30, -50, 50, (0.4, 3.0))
    U = rng.uniform(-60, 60, size=(5_000, 3)).astype(np.float32)
    X = np.vstack([X, U])
    X = np.vstack([X, X[rng.choice(len(X), size=300, replace=False)]])
    ids = rng.choice(10**12, size=len(X) + 50, replace=False) + 1
    load(cur, "gc_dd_blobs3", ids[:len(X)], X, ids[len(X):])
    return len(X) + 50


def make_blobs8(cur):
    rng = np.random.default_rng(32)
    X = blobs(rng, 30_000, 8, 20, -20, 20, (0.5, 2.0))
    ids = rng.permutation(len(X)) * 3 + 7
    load(cur, "gc_dd_blobs8", ids, X)
    return len(X)


def make_lattice(cur):
    rng = np.random.default_rng(33)
    g = np.array([(i, j) for i in range(1025) for j in range(40)], dtype=np.float32)
    keep = rng.random(len(g)) >= 0.10
    X = g[keep]
    ids = rng.permutation(len(X)) + 1
    load(cur, "gc_dd_lattice", ids, X)
    return len(X)


def labelling(cur, sql, params):
    """(ids, cluster_id, is_core) as arrays sorted by id, and the time:
    cluster_id -2 for NULL (noise, or NULL features), is_core -1 for NULL
    (NULL features)."""
    t0 = time.perf_counter()
    cur.execute(sql, params)
    rows = cur.fetchall()
    t = time.perf_counter() - t0
    rows.sort(key=lambda r: r[0])
    ids = np.array([r[0] for r in rows], dtype=np.int64)
    cl = np.array([-2 if r[1] is None else r[1] for r in rows], dtype=np.int64)
    core = np.array([-1 if r[2] is None else int(r[2]) for r in rows], dtype=np.int64)
    return (ids, cl, core), t


def same(a, b):
    """'' when equal, else what differs."""
    (ia, ca, ka), (ib, cb, kb) = a, b
    if len(ia) != len(ib) or not np.array_equal(ia, ib):
        return f"ids differ: {len(ia)} vs {len(ib)} rows"
    dc, dk = int((ca != cb).sum()), int((ka != kb).sum())
    if dc or dk:
        j = int(np.flatnonzero((ca != cb) | (ka != kb))[0])
        return (f"{dc} cluster_id and {dk} is_core differ; first id {ia[j]}: "
                f"({ca[j]}, {ka[j]}) vs ({cb[j]}, {kb[j]})")
    return ""


def parallel_aggregate(plan):
    """Finalize over Gather over Partial, with workers launched."""
    launched = [int(m) for m in re.findall(r"Workers Launched: (\d+)", plan)]
    return ("Finalize" in plan and "Gather" in plan and "Partial" in plan
            and bool(launched) and max(launched) > 0), launched


def run_case(conn, cur, name, table, eps, min_pts, expect=None):
    ref, t_ref = labelling(
        cur, "SELECT id, cluster_id, is_core FROM gpu_dbscan(%s, %s, %s, device => 'cpu')",
        (f"SELECT id, f FROM {table} ORDER BY id", eps, min_pts))
    clusters = int(ref[1].max()) + 1 if len(ref[1]) else 0
    noise = int(((ref[1] == -2) & (ref[2] == 0)).sum())
    info(f"{name}, eps {eps}, min_pts {min_pts}: {len(ref[0])} rows, {clusters} clusters, "
         f"{noise} noise, {int((ref[2] == 1).sum())} core; gpu_dbscan {t_ref:.2f} s")
    if expect is not None:
        check(f"{name}, eps {eps}, min_pts {min_pts}: gpu_dbscan finds {expect[0]} clusters "
              f"and {expect[1]} noise", (clusters, noise) == expect, f"{clusters}, {noise}")
    source = f"SELECT id, f FROM {table}"
    q = ("SELECT id, cluster_id, is_core FROM gpu_dbscan_distributed(%s, %s, %s, partitions => %s, "
         f"device => {'NULL' if DEVICE is None else repr(DEVICE)})")
    times = []
    for P in PARTITIONS:
        cur.execute(SERIAL)
        ser, t_ser = labelling(cur, q, (source, eps, min_pts, P))
        diff = same(ser, ref)
        check(f"{name}, eps {eps}, min_pts {min_pts}, P = {P}, serial: equals gpu_dbscan",
              diff == "", diff)
        cur.execute(PARALLEL)
        (par, t_par), plans = nested_plans(conn, lambda: labelling(cur, q, (source, eps, min_pts, P)))
        diff = same(par, ref)
        check(f"{name}, eps {eps}, min_pts {min_pts}, P = {P}, parallel: equals gpu_dbscan",
              diff == "", diff)
        parts = [p for p in plans if "dbscan_partition(" in p]
        others = [p for p in plans if "dbscan_bounds(" in p or "dbscan_histogram(" in p]
        verdicts = [parallel_aggregate(p) for p in parts + others]
        check(f"{name}, eps {eps}, min_pts {min_pts}, P = {P}, parallel: the partitions', "
              "bounds' and histogram's aggregates ran in parallel workers",
              len(parts) >= 1 and all(ok for ok, _ in verdicts),
              f"{len(parts)} partition queries, {len(others)} bounds / histogram queries, "
              f"workers launched {[w for _, w in verdicts]}")
        # the partitions the driver cut: the groups of its partition query
        used = [int(m) for p in parts
                for m in re.findall(r"Finalize \w+[^\n]*?\(actual rows=(\d+)", p)]
        if P > 1:
            check(f"{name}, eps {eps}, min_pts {min_pts}, P = {P}: more than one partition",
                  bool(used) and used[0] > 1, f"partitions {used}")
        times.append(f"P {P} ({used[0] if used else '?'} used): serial {t_ser:.2f} s, "
                     f"parallel {t_par:.2f} s")
    info(f"{name}, eps {eps}, min_pts {min_pts} (times with the rows fetched into Python): "
         + "; ".join(times))


def run_spilling(conn, cur, name, table, eps, min_pts, P):
    """The same with work_mem = 64kB and sorts off: hash aggregates whose
    partitions' states outgrow their memory, so that they spill rows (and,
    finalizing, the workers' serialized states) to disk in batches."""
    ref, _ = labelling(cur, "SELECT id, cluster_id, is_core FROM gpu_dbscan(%s, %s, %s)",
                       (f"SELECT id, f FROM {table} ORDER BY id", eps, min_pts))
    q = "SELECT id, cluster_id, is_core FROM gpu_dbscan_distributed(%s, %s, %s, partitions => %s)"
    cur.execute("SET work_mem = '64kB'; SET enable_sort = off")
    try:
        for mode, setting in (("serial", SERIAL), ("parallel", PARALLEL)):
            cur.execute(setting)
            (got, t), plans = nested_plans(conn, lambda: labelling(
                cur, q, (f"SELECT id, f FROM {table}", eps, min_pts, P)))
            parts = [p for p in plans if "dbscan_partition(" in p]
            batches = [int(m) for p in parts for m in re.findall(r"Batches: (\d+)", p)]
            diff = same(got, ref)
            check(f"{name}, eps {eps}, min_pts {min_pts}, P = {P}, {mode}, work_mem 64kB: "
                  "equals gpu_dbscan", diff == "", diff)
            check(f"{name}, P = {P}, {mode}, work_mem 64kB: the partitions' hash aggregates "
                  "spilled", bool(batches) and max(batches) > 1,
                  f"batches {batches}, {t:.2f} s")
    finally:
        cur.execute("RESET work_mem; RESET enable_sort")


def explain_shape(cur, table, eps, min_pts):
    """EXPLAIN ANALYZE of the driver's partition query, its plan from the
    building blocks: the plan forced parallel, workers launched."""
    cur.execute(f"SELECT dbscan_bounds(f, id) FROM {table}")
    b = cur.fetchone()[0]
    d = (len(b) - 1) // 2
    lo, hi = b[1:1 + d], b[1 + d:]
    dim = int(np.argmax(np.array(hi) - np.array(lo)))
    cuts = [float(c) for c in np.linspace(lo[dim], hi[dim], 6)[1:-1]]
    plan = [float(d), float(dim), 2.0001 * eps] + cuts
    cur.execute(PARALLEL)
    cur.execute(
        "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) "
        "SELECT p.part, dbscan_partition(p.part, s.id, p.x, p.home, p.shared, %s, %s, NULL) "
        f"FROM (SELECT id, f FROM {table}) AS s(id, f) "
        "CROSS JOIN LATERAL dbscan_partitions(s.f, %s::float8[]) AS p GROUP BY p.part",
        (eps, min_pts, plan))
    text = "\n".join(r[0] for r in cur.fetchall())
    ok, launched = parallel_aggregate(text)
    check(f"EXPLAIN of the driver's partition query on {table}: Finalize over Gather over "
          "Partial aggregate, workers launched", ok, f"workers launched {launched}")
    nodes = [ln.strip().lstrip("-> ") for ln in text.splitlines()
             if re.search(r"Aggregate|Gather|Sort|Loop|Scan", ln) and ":" not in ln]
    info(f"{table}: the partition query's plan: " + " / ".join(nodes))


def bench(cur, n):
    """--bench: n rows of 2 features, timed in the server (clock_timestamp
    around a count over the call), each labelling checked equal to the
    CPU's gpu_dbscan."""
    cur.execute("SELECT setseed(0.5)")
    cur.execute("DROP TABLE IF EXISTS gc_dd_bench")
    cur.execute("CREATE TABLE gc_dd_bench AS SELECT i::bigint AS id, "
                "ARRAY[mod(i, 1000) / 10.0 + random() * 0.5, mod(i / 1000, 1000) / 10.0 + random() * 0.5]::real[] AS f "
                "FROM generate_series(1, %s) i ORDER BY random()", (n,))
    cur.execute("ANALYZE gc_dd_bench")
    src, eps, mp = "SELECT id, f FROM gc_dd_bench", 0.08, 8
    cur.execute("DROP TABLE IF EXISTS gc_dd_ref")
    cur.execute("CREATE TABLE gc_dd_ref AS SELECT * FROM gpu_dbscan(%s, %s, %s, device => 'cpu')",
                (src + " ORDER BY id", eps, mp))
    timed = ("SELECT extract(epoch FROM clock_timestamp() - t0) * 1000 FROM "
             "(SELECT clock_timestamp() AS t0) a, LATERAL (SELECT count(*) FROM {}) b")
    dev = DEVICE or "gpu"
    runs = [("gpu_dbscan, cpu", "gpu_dbscan(%(s)s || ' ORDER BY id', %(e)s, %(m)s, device => 'cpu')", SERIAL),
            (f"gpu_dbscan, {dev}", f"gpu_dbscan(%(s)s || ' ORDER BY id', %(e)s, %(m)s, device => '{dev}')", SERIAL)]
    for P in (1, 4, 16):
        runs.append((f"gpu_dbscan_distributed, {dev}, {P} partitions, parallel query",
                     f"gpu_dbscan_distributed(%(s)s, %(e)s, %(m)s, partitions => {P}, device => '{dev}')",
                     PARALLEL))
    args = {"s": src, "e": eps, "m": mp}
    for name, call, setting in runs:
        cur.execute(setting)
        ms = []
        for _ in range(2):
            cur.execute(timed.format(call), args)
            ms.append(cur.fetchone()[0])
        cur.execute(f"SELECT count(*) FILTER (WHERE g.cluster_id IS DISTINCT FROM r.cluster_id "
                    f"OR g.is_core IS DISTINCT FROM r.is_core), count(*) FROM {call} g "
                    "FULL JOIN gc_dd_ref r USING (id)", args)
        differ, rows = cur.fetchone()
        check(f"bench {n} x 2: {name} equals the CPU's gpu_dbscan", differ == 0 and rows == n,
              f"{differ} of {rows} differ")
        info(f"bench {n} x 2, eps {eps}, min_pts {mp}: {name}: {ms[0]:.0f} / {ms[1]:.0f} ms")
    cur.execute("DROP TABLE gc_dd_bench, gc_dd_ref")


def main():
    global DEVICE
    args = sys.argv[1:]
    if "--device" in args:
        DEVICE = args[args.index("--device") + 1]
    with psycopg.connect("", autocommit=True) as conn:
        cur = conn.cursor()
        cur.execute("SET client_min_messages = warning")
        cur.execute("CREATE EXTENSION IF NOT EXISTS gpuclust")
        cur.execute("RESET client_min_messages")
        if "--bench" in args:
            bench(cur, int(args[args.index("--bench") + 1]))
            return summary()

        n = load_cities(conn, "gc_dd_cities_raw")
        cur.execute("DROP TABLE IF EXISTS gc_dd_cities")
        cur.execute("CREATE TABLE gc_dd_cities AS SELECT id, features AS f FROM gc_dd_cities_raw")
        cur.execute("ALTER TABLE gc_dd_cities ADD PRIMARY KEY (id)")
        cur.execute("ANALYZE gc_dd_cities")
        cur.execute("DROP TABLE gc_dd_cities_raw")
        info(f"{n} world cities in gc_dd_cities")
        info(f"{make_blobs3(cur)} rows of 3 features in gc_dd_blobs3 "
             "(300 duplicates, 50 NULL features)")
        info(f"{make_blobs8(cur)} rows of 8 features in gc_dd_blobs8")
        info(f"{make_lattice(cur)} lattice points in gc_dd_lattice")

        explain_shape(cur, "gc_dd_cities", 0.25, 10)
        explain_shape(cur, "gc_dd_blobs3", 0.3, 5)

        run_case(conn, cur, "world cities", "gc_dd_cities", 0.25, 10, expect=(576, 37864))
        run_case(conn, cur, "world cities", "gc_dd_cities", 1.0, 4)
        run_case(conn, cur, "world cities", "gc_dd_cities", 0.05, 3)
        run_case(conn, cur, "blobs d = 3", "gc_dd_blobs3", 0.3, 5)
        run_case(conn, cur, "blobs d = 3", "gc_dd_blobs3", 0.8, 20)
        run_case(conn, cur, "blobs d = 8", "gc_dd_blobs8", 1.5, 8)
        run_case(conn, cur, "lattice", "gc_dd_lattice", 1.0, 5)
        run_spilling(conn, cur, "blobs d = 3", "gc_dd_blobs3", 0.3, 5, 16)

        for t in ("gc_dd_cities", "gc_dd_blobs3", "gc_dd_blobs8", "gc_dd_lattice"):
            cur.execute(f"DROP TABLE {t}")

    return summary()


if __name__ == "__main__":
    sys.exit(main())
