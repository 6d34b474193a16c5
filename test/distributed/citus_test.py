#!/usr/bin/python3
"""citus_test.py — k-means and DBSCAN over a Citus distributed table equal
the single-node k-means and DBSCAN.

Starts its own cluster (test/distributed/citus_cluster.sh: Citus built once from
../shared/vendor and cached, or an installed Citus; a private PostgreSQL
tree with this checkout's gpuclust; a coordinator and two workers on
localhost, ports 55432-55434, data under /tmp/gpuclust_citus), stops and
removes it at the end.  Where there is neither the vendored source, nor a
cached build, nor an installed Citus, it prints "skipped: no Citus" and
passes.

k-means.  Data: kmeans_distributed_test's 122,000 rows of 8 features, in
gc_kd_rows distributed by id over 4 shards (2 per worker), and the same rows
in gc_kd_local, a plain table on the coordinator (the single node).
Checks:
  - gpuclust is on every node (CREATE EXTENSION on the coordinator reaches
    the workers through Citus);
  - EXPLAIN: kmeans_step over the distributed table is a Citus
    Adaptive scan whose shard queries run worker_partial_agg(kmeans_step),
    combined on the coordinator by coord_combine_agg; and every query
    gpu_kmeans_distributed sends to the workers (citus.log_remote_commands)
    is such a partial aggregate, or a k-means|| sampling filter: no query
    ships the rows;
  - seeding (random, k = 30; k-means||'s first candidate): the shards send
    no rows but those of the narrow id ranges of the positional draw (one
    read per shard, at most 1000 ids); the rest is partial aggregates
    (kmeans_rank_counts, the ids' count, min and max, kmeans_step) and the
    sampling filters;
  - from the same initial centres (k = 24), gpu_kmeans_distributed over the
    distributed table equals gpu_kmeans_fit(device => 'cpu') over the local
    table within the tolerance of kmeans_distributed_test (README: same
    iterations and convergence, every label equal, centroids at most one
    float32 step apart, inertia within 1e-9 relative); random seeding over a
    source in id order and k-means|| seeding (ids the 0-based positions)
    equal gpu_kmeans_fit's the same way;
  - labels: kmeans_assign over the distributed table runs on the shards
    (EXPLAIN VERBOSE: the shard query calls it), and its labels from the
    distributed model equal gpu_kmeans's (the single-node SRF) row by row;
  - a worker stopped mid-run: CREATE TABLE ... AS SELECT FROM
    gpu_kmeans_distributed(...) fails with an SQLSTATE (admin shutdown 57P01
    or a connection exception 08xxx) naming the worker and the driver's
    pass, the table does not exist afterwards, and once the worker is back
    the same call succeeds.

DBSCAN.  Data: the world cities (test/lib/cities.py, 135,233 rows, features
[lon, lat]) and 100,000 rows of 3 features (Gaussian blobs of several
spreads and uniform noise), each distributed by id (gc_db_cities,
gc_db_blobs) with a plain copy on the coordinator.  Checks:
  - gpu_dbscan_distributed over the distributed table equals
    gpu_dbscan(device => 'cpu') over the local copy in id order EXACTLY:
    the same ids, every id's cluster_id and is_core, for several eps /
    min_pts, the default partitions and explicit ones (1, 2, 7, 16);
  - citus.log_remote_commands: the local DBSCANs ran on the workers
    (dbscan_partition in shard queries of the work table, grouped, not a
    worker_partial_agg), the rows went to the work table by a repartitioned
    INSERT ... SELECT (worker_partition_query_result of dbscan_partitions on
    the source's shards, fetch_intermediate_results between the workers),
    and no command read the source's rows out to the coordinator (every
    read of a source shard is a partial dbscan_bounds / dbscan_histogram or
    a worker_partition_query_result; no COPY into the work table);
  - with two partitions or more, both workers ran some (the work table's
    keys spread the partitions over the workers);
  - no gpuclust_dbscan_* work table is left afterwards: not in the
    coordinator's catalog nor Citus's metadata, not on either worker;
  - a plain table on the coordinator as the source (the Citus route pulls
    its rows into the work table): the same labels, no work table left;
  - a worker stopped while the partitions' DBSCANs run on it (2,000,000
    rows of 2 features, gc_db_big, made in SQL): CREATE TABLE ... AS
    SELECT FROM gpu_dbscan_distributed(...) fails with an SQLSTATE
    (57P01 / 08xxx) naming the worker and the driver's pass, leaves neither
    the table nor a work table (coordinator, the other worker, and the
    stopped one once back), and after node-start the same call succeeds.

Prints PASS/FAIL per check and "N passed, N failed"; exits 1 on any failure.
"""
import os
import re
import subprocess
import sys
import threading
import time

import numpy as np
import psycopg

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "lib"))
import cities  # noqa: E402  (the world cities)
from notices import notices_during  # noqa: E402
from report import check, info, summary  # noqa: E402
import kmeans_distributed_test as kd  # noqa: E402  (rows, ulps, compare)

CLUSTER = os.path.join(HERE, "citus_cluster.sh")
TABLE, LOCAL = kd.TABLE, "gc_kd_local"
K = 24


def cluster(*args, env=None):
    return subprocess.run([CLUSTER, *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})})


def start():
    """A fresh cluster: its env (libpq variables, ports)."""
    cluster("clean")
    r = cluster("start")
    if r.returncode != 0:
        sys.stderr.write(r.stderr[-4000:])
        raise SystemExit(f"citus_cluster.sh start failed ({r.returncode})")
    env = {}
    for word in r.stdout.split():
        if "=" in word:
            key, value = word.split("=", 1)
            env[key] = value
    return env


def remote_commands_at(conn, run):
    """run() with citus.log_remote_commands: [(command, port)] sent to workers."""
    def pick(diag):
        msg = diag.message_primary or ""
        if not msg.startswith("issuing "):
            return None
        m = re.search(r"@[\w.-]+:(\d+)", diag.message_detail or "")
        return msg[len("issuing "):], int(m.group(1)) if m else None
    return notices_during(
        conn, run, "SET citus.log_remote_commands = on; SET client_min_messages = log",
        "RESET client_min_messages; RESET citus.log_remote_commands", pick)


def remote_commands(conn, run):
    """run() with citus.log_remote_commands: the commands sent to workers."""
    result, sent = remote_commands_at(conn, run)
    return result, [c for c, _ in sent]


# the seeding's passes on a shard (gpu_kmeans_distributed's fetch_rows):
# the ids' range, aggregated there, and the read of the narrow id ranges
ID_RANGE = re.compile(r"^SELECT count\(\*\) AS count, min\(\(worker_column_1\)::bigint\) AS min, "
                      r"max\(\(worker_column_1\)::bigint\) AS max FROM \(SELECT s\.id AS worker_column_1 FROM ")
NARROW_READ = re.compile(r"WHERE \(\(s\.f IS NOT NULL\) AND \(+s\.id OPERATOR\(pg_catalog\.>=\) ")


def row_shipping(sent):
    """The commands that read shards and are not a partial kmeans_step or
    kmeans_rank_counts, the seeding's id range or narrow read, or a
    k-means|| sampling filter (transaction control and the like aside)."""
    return [c for c in sent if re.search(r"\bFROM public\.\w+_\d+\b", c)
            and "worker_partial_agg('public.kmeans_step(" not in c
            and "worker_partial_agg('public.kmeans_rank_counts(" not in c
            and not ID_RANGE.search(c) and not NARROW_READ.search(c)
            and "kmeans_parallel_sample(" not in c]


def seeding_reads(sent, shards, name):
    """Checks that seeding read no rows out but those of its narrow id
    ranges: one read per shard, of the same ranges, at most 1000 ids (the
    driver's KM_RANK_FETCH)
    (ids are unique integers here, so the ids bound the rows)."""
    shipping = row_shipping(sent)
    narrow = [c for c in sent if NARROW_READ.search(c)]
    ranks = [c for c in sent if "worker_partial_agg('public.kmeans_rank_counts(" in c]
    # the bounds as the driver writes them ('5'::bigint) or as plain numbers
    bound = r"'?(-?\d+)'?(?:::bigint)?"
    ranges = [re.findall(rf"s\.id OPERATOR\(pg_catalog\.>=\) {bound}\) AND "
                         rf"\(s\.id OPERATOR\(pg_catalog\.<=\) {bound}\)", c) for c in narrow]
    ids = sum(int(b) - int(a) + 1 for a, b in ranges[0]) if ranges else 0
    check(f"{name}: the shards sent no rows but the seeding's narrow id ranges",
          not shipping and len(narrow) == shards and all(r == ranges[0] for r in ranges)
          and 0 < ids <= 1000,
          f"{len(narrow)} narrow reads of {len(ranges[0]) if ranges else 0} ranges, {ids} ids, "
          f"after {len(ranks) // max(shards, 1)} kmeans_rank_counts passes; "
          f"{len(shipping)} other shard reads" + (f": {shipping[0][:900]}" if shipping else ""))


def in_background(q, params=None):
    """q run in another session, in a thread: (the thread, its outcome,
    {"error": the psycopg.Error or None} once it ends)."""
    outcome = {}

    def run():
        try:
            with psycopg.connect("", autocommit=True) as c:
                c.execute(q, params)
            outcome["error"] = None
        except psycopg.Error as e:
            outcome["error"] = e

    t = threading.Thread(target=run)
    t.start()
    return t, outcome


def error_of(outcome):
    """(the error, its SQLSTATE, "message | context") of a background run."""
    e = outcome.get("error")
    state = getattr(e, "sqlstate", None) or ""
    text = "" if e is None else f"{e.diag.message_primary} | {e.diag.context}"
    return e, state, text


def stopped_worker_check(ports, X):
    """A worker stopped in the middle of gpu_kmeans_distributed."""
    C0 = X[np.random.default_rng(3).choice(len(X), size=40, replace=False)]
    # tol 0: runs until the labels settle (108 iterations here), seconds
    q = ("CREATE TABLE gc_kd_model AS SELECT * FROM gpu_kmeans_distributed("
         f"'SELECT id, f FROM {TABLE}', 40, tol => 0, max_iter => 10000, "
         "init_centroids => %s::real[])")
    t, outcome = in_background(q, (kd.centroids_literal(C0),))
    # stop worker 2 once the run is a second into its iterations
    deadline = time.time() + 30
    with psycopg.connect("", autocommit=True) as mon:
        while time.time() < deadline:
            r = mon.execute("SELECT now() - query_start FROM pg_stat_activity "
                            "WHERE query LIKE 'CREATE TABLE gc_kd_model%' AND state = 'active'").fetchone()
            if r and r[0].total_seconds() > 1.0:
                break
            time.sleep(0.05)
    stopped = cluster("node-stop", "2")
    t.join(120)
    e, state, text = error_of(outcome)
    check("worker stopped mid-run: the call fails with an SQLSTATE",
          stopped.returncode == 0 and e is not None and
          (state == "57P01" or state.startswith("08")),
          f"SQLSTATE {state}: {text[:300]}")
    check("worker stopped mid-run: the error names the worker and the driver's pass",
          e is not None and f":{ports[2]}" in text and "gpu_kmeans_distributed:" in text,
          text[:300])
    with psycopg.connect("", autocommit=True) as c:
        left = c.execute("SELECT to_regclass('gc_kd_model')").fetchone()[0]
    check("worker stopped mid-run: no partial result (the table was not created)",
          left is None, f"to_regclass: {left}")
    restarted = cluster("node-start", "2")
    ok, detail = False, restarted.stderr[-300:]
    if restarted.returncode == 0:
        with psycopg.connect("", autocommit=True) as c:
            c.execute(q.replace("max_iter => 10000", "max_iter => 3"), (kd.centroids_literal(C0),))
            n = c.execute("SELECT n FROM gc_kd_model").fetchone()[0]
            c.execute("DROP TABLE gc_kd_model")
            ok, detail = n == len(X), f"n {n}"
    check("worker back: the same call succeeds", ok, detail)

# ---------------------------------------------------------------------------
# DBSCAN
# ---------------------------------------------------------------------------

DB_CITIES, DB_BLOBS = "gc_db_cities", "gc_db_blobs"
WORK = re.compile(r"\bgpuclust_dbscan_\d+_\d+")
# (table, eps, min_pts, partitions): the default partitions and explicit ones
DB_CASES = [
    (DB_CITIES, 0.25, 10, None),
    (DB_CITIES, 1.0, 5, None),
    (DB_CITIES, 0.05, 3, 7),
    (DB_CITIES, 0.5, 20, 16),
    (DB_CITIES, 0.25, 10, 1),
    (DB_BLOBS, 0.3, 10, None),
    (DB_BLOBS, 0.6, 30, 2),
    (DB_BLOBS, 0.15, 4, 16),
]


def blobs(n=100_000, d=3, seed=21):
    """Gaussian blobs of several spreads and 5% uniform noise, float32."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-20, 20, size=(16, d))
    spread = rng.uniform(0.3, 2.0, size=16)
    m = n - n // 20
    which = rng.integers(0, 16, size=m)
    X = centres[which] + rng.normal(size=(m, d)) * spread[which, None]
    X = np.vstack([X, rng.uniform(-25, 25, size=(n - m, d))])
    return X[rng.permutation(n)].astype(np.float32)


def distribute(cur, table, local):
    """table: (id bigint, features real[]) distributed by id, from local."""
    cur.execute(f"DROP TABLE IF EXISTS {table}")
    cur.execute(f"CREATE TABLE {table} (id bigint, features real[])")
    cur.execute("SET client_min_messages = warning")
    cur.execute(f"SELECT create_distributed_table('{table}', 'id')")
    cur.execute("RESET client_min_messages")
    cur.execute(f"INSERT INTO {table} SELECT id, features FROM {local}")
    cur.execute(f"ANALYZE {table}")


def load_dbscan(conn, cur):
    t0 = time.perf_counter()
    n_cities = cities.load_cities(conn, DB_CITIES + "_local")
    distribute(cur, DB_CITIES, DB_CITIES + "_local")
    X = blobs()
    cur.execute(f"DROP TABLE IF EXISTS {DB_BLOBS}_local")
    cur.execute(f"CREATE TABLE {DB_BLOBS}_local (id bigint PRIMARY KEY, features real[])")
    with cur.copy(f"COPY {DB_BLOBS}_local (id, features) FROM STDIN") as cp:
        for i, row in enumerate(X):
            cp.write_row((3 * i + 7, "{" + ",".join(repr(float(v)) for v in row) + "}"))
    cur.execute(f"ANALYZE {DB_BLOBS}_local")
    distribute(cur, DB_BLOBS, DB_BLOBS + "_local")
    info(f"DBSCAN data: {n_cities} cities (2 features), {len(X)} blob rows (3 features), "
         f"each distributed by id and a plain copy on the coordinator ({time.perf_counter() - t0:.1f} s)")
    return {DB_CITIES: n_cities, DB_BLOBS: len(X)}


def labels(cur, q, params):
    cur.execute(q, params)
    return {r[0]: (r[1], r[2]) for r in cur.fetchall()}


def work_tables_left(ports):
    """Every gpuclust_dbscan_* relation on any node, and Citus's metadata of them."""
    left = []
    for p in ports:
        try:
            with psycopg.connect(f"port={p}", autocommit=True) as c:
                left += [f"{p}:{r[0]}" for r in c.execute(
                    "SELECT relname FROM pg_class WHERE relname LIKE 'gpuclust\\_dbscan\\_%'").fetchall()]
                if p == ports[0]:
                    left += [f"pg_dist_partition:{r[0]}" for r in c.execute(
                        "SELECT logicalrelid::text FROM pg_dist_partition "
                        "WHERE logicalrelid::text LIKE '%gpuclust\\_dbscan\\_%'").fetchall()]
        except psycopg.OperationalError as e:
            left.append(f"{p}: unreachable ({str(e).strip()[:80]})")
    return left


def route_of(sent, table):
    """What the remote commands of one run show: (partition runs [(cmd, port)],
    repartition commands, fetches between workers, source reads out)."""
    source_shard = re.compile(rf"\bpublic\.{table}_\d+\b")
    runs = [(c, p) for c, p in sent if "dbscan_partition(" in c and WORK.search(c)
            and "GROUP BY" in c and "worker_partial_agg" not in c]
    repart = [c for c, _ in sent if "worker_partition_query_result(" in c and "dbscan_partitions(" in c
              and source_shard.search(c)]
    fetches = [c for c, _ in sent if "fetch_intermediate_results(" in c]
    shipped = [c for c, _ in sent if source_shard.search(c)
               and "worker_partition_query_result(" not in c
               and not re.search(r"worker_partial_agg\('public\.dbscan_(bounds|histogram)\(", c)]
    shipped += [c for c, _ in sent if c.lstrip().upper().startswith("COPY") and WORK.search(c)]
    return runs, repart, fetches, shipped


def dbscan_checks(ports, n_rows):
    with psycopg.connect("", autocommit=True) as conn:
        cur = conn.cursor()
        for table, eps, min_pts, parts in DB_CASES:
            name = f"{table} eps {eps} min_pts {min_pts} partitions {parts or 'default'}"
            t0 = time.perf_counter()
            dist, sent = remote_commands_at(conn, lambda: labels(
                cur, "SELECT id, cluster_id, is_core FROM gpu_dbscan_distributed(%s, %s, %s, %s)",
                (f"SELECT id, features FROM {table}", eps, min_pts, parts)))
            t_dist = time.perf_counter() - t0
            t0 = time.perf_counter()
            single = labels(cur, "SELECT id, cluster_id, is_core FROM gpu_dbscan(%s, %s, %s, device => 'cpu')",
                            (f"SELECT id, features FROM {table}_local ORDER BY id", eps, min_pts))
            t_single = time.perf_counter() - t0
            differ = [i for i in single if dist.get(i) != single[i]]
            clusters = len({c for c, _ in single.values() if c is not None})
            noise = sum(1 for c, _ in single.values() if c is None)
            core = sum(1 for _, k in single.values() if k)
            check(f"DBSCAN {name}: = gpu_dbscan(device => 'cpu') on one node, every id's "
                  "cluster_id and is_core",
                  len(dist) == len(single) == n_rows[table] and set(dist) == set(single) and not differ,
                  f"{len(dist)} / {len(single)} rows, {len(differ)} differ"
                  + (f" (id {differ[0]}: {dist.get(differ[0])} vs {single[differ[0]]})" if differ else "")
                  + f"; {clusters} clusters, {core} core, {noise} noise; Citus {t_dist:.2f} s, "
                  f"one node {t_single:.2f} s")
            runs, repart, fetches, shipped = route_of(sent, table)
            on = sorted({p for _, p in runs})
            # two partitions or more: on both workers (the work table's keys spread them)
            check(f"DBSCAN {name}: the local DBSCANs ran on the workers (dbscan_partition grouped "
                  "in the work table's shard queries)" + ("" if parts == 1 else ", on both"),
                  len(runs) >= 1 and all(p in ports[1:] for p in on)
                  and (parts == 1 or on == sorted(ports[1:])),
                  f"{len(runs)} shard queries on ports {on}"
                  + (f": {runs[0][0][:160]}" if runs else ""))
            check(f"DBSCAN {name}: the rows went worker to worker (repartitioned INSERT ... SELECT), "
                  "none to the coordinator",
                  len(repart) >= 1 and not shipped,
                  f"{len(repart)} worker_partition_query_result, {len(fetches)} fetch_intermediate_results, "
                  f"{len(shipped)} other reads of the source" + (f": {shipped[0][:200]}" if shipped else ""))
            left = work_tables_left(ports)
            check(f"DBSCAN {name}: no work table left (coordinator, metadata, workers)", not left,
                  ", ".join(left[:5]))

        # a plain table on the coordinator as the source: Citus's route still
        # (its rows pulled through the coordinator into the work table)
        eps, min_pts = 0.25, 10
        dist = labels(cur, "SELECT id, cluster_id, is_core FROM gpu_dbscan_distributed(%s, %s, %s)",
                      (f"SELECT id, features FROM {DB_CITIES}_local", eps, min_pts))
        single = labels(cur, "SELECT id, cluster_id, is_core FROM gpu_dbscan(%s, %s, %s, device => 'cpu')",
                        (f"SELECT id, features FROM {DB_CITIES}_local ORDER BY id", eps, min_pts))
        differ = sum(1 for i in single if dist.get(i) != single[i])
        check("DBSCAN over a plain table on the coordinator (Citus's route) = gpu_dbscan",
              len(dist) == len(single) and differ == 0, f"{len(dist)} rows, {differ} differ")
        left = work_tables_left(ports)
        check("DBSCAN over a plain table: no work table left", not left, ", ".join(left[:5]))


def dbscan_stopped_worker_check(ports):
    """A worker stopped while the partitions' DBSCANs run on it."""
    # 2,000,000 rows of 2 features: over a second of DBSCAN on each worker
    n = 2_000_000
    with psycopg.connect("", autocommit=True) as c:
        c.execute("SET client_min_messages = warning")
        c.execute("DROP TABLE IF EXISTS gc_db_big")
        c.execute("CREATE TABLE gc_db_big (id bigint, features real[])")
        c.execute("SELECT create_distributed_table('gc_db_big', 'id')")
        c.execute("SELECT setseed(0.5)")
        c.execute("INSERT INTO gc_db_big SELECT i, ARRAY[(i % 50) * 4 + 3 * sqrt(-2 * ln(1 - random())) "
                  "* cos(2 * pi() * random()), (i % 7) * 10 + 3 * sqrt(-2 * ln(1 - random())) "
                  f"* cos(2 * pi() * random())]::real[] FROM generate_series(1, {n}) i")
    q = ("CREATE TABLE gc_db_result AS SELECT * FROM gpu_dbscan_distributed("
         "'SELECT id, features FROM gc_db_big', 0.05, 10)")
    t, outcome = in_background(q)
    # the first worker seen running a partition's DBSCAN is stopped
    victim, deadline = None, time.time() + 120
    mons = {i: psycopg.connect(f"port={p}", autocommit=True) for i, p in enumerate(ports) if i > 0}
    while victim is None and time.time() < deadline and t.is_alive():
        for i, mon in mons.items():
            r = mon.execute("SELECT count(*) FROM pg_stat_activity WHERE state = 'active' "
                            "AND query LIKE '%dbscan_partition(%' AND pid <> pg_backend_pid()").fetchone()
            if r[0] > 0:
                victim = i
                break
        else:
            time.sleep(0.02)
    for mon in mons.values():
        mon.close()
    stopped = cluster("node-stop", str(victim)) if victim else None
    t.join(180)
    e, state, text = error_of(outcome)
    check("DBSCAN, worker stopped during the partitions' DBSCAN: the call fails with an SQLSTATE",
          victim is not None and stopped.returncode == 0 and e is not None and
          (state == "57P01" or state.startswith("08")),
          f"worker {victim}; SQLSTATE {state}: {text[:300]}")
    check("DBSCAN, worker stopped: the error names the worker and the driver's pass",
          e is not None and victim is not None and f":{ports[victim]}" in text
          and "gpu_dbscan_distributed:" in text, text[:300])
    with psycopg.connect("", autocommit=True) as c:
        result = c.execute("SELECT to_regclass('gc_db_result')").fetchone()[0]
    left = work_tables_left([p for i, p in enumerate(ports) if i != victim])
    check("DBSCAN, worker stopped: no partial result (no table, no work table on the coordinator "
          "or the other worker)", result is None and not left, f"to_regclass {result}; {left[:3]}")
    restarted = cluster("node-start", str(victim or 2))
    left = work_tables_left(ports)
    check("DBSCAN, worker back: no work table on it either", restarted.returncode == 0 and not left,
          ", ".join(left[:3]) if restarted.returncode == 0 else restarted.stderr[-200:])
    ok, detail = False, restarted.stderr[-300:]
    if restarted.returncode == 0:
        with psycopg.connect("", autocommit=True) as c:
            t0 = time.perf_counter()
            c.execute(q)
            got = c.execute("SELECT count(*) FROM gc_db_result").fetchone()[0]
            c.execute("DROP TABLE gc_db_result, gc_db_big")
            ok, detail = got == n, f"{got} rows in {time.perf_counter() - t0:.1f} s"
    check("DBSCAN, worker back: the same call succeeds", ok, detail)
    left = work_tables_left(ports)
    check("DBSCAN: no work table left at the end", not left, ", ".join(left[:3]))



def main():
    found = cluster("find")
    if found.returncode == 3:
        print("skipped: no Citus (no vendored citus-*.tar.gz, no cached build, none installed)")
        return 0
    info(f"Citus: {found.stdout.strip()}")
    t0 = time.perf_counter()
    env = start()
    info(f"cluster up in {time.perf_counter() - t0:.1f} s: ports {env['GPUCLUST_CITUS_PORTS']}")
    os.environ.update({k: v for k, v in env.items() if k.startswith("PG")})
    ports = [int(p) for p in env["GPUCLUST_CITUS_PORTS"].split(",")]
    try:
        return run_checks(ports, found.stdout.startswith("installed"))
    finally:
        cluster("clean")


def run_checks(ports, installed):
    if not installed:
        # what makes this test print "skipped: no Citus" (main above)
        none = cluster("find", env={"GPUCLUST_VENDOR": "/nonexistent",
                                    "GPUCLUST_CITUS_CACHE": "/nonexistent"})
        check("with no Citus source, cache or install, citus_cluster.sh find exits 3",
              none.returncode == 3, f"exit {none.returncode}: {none.stdout.strip()}")
    X = kd.make_rows()
    with psycopg.connect("", autocommit=True) as conn:
        cur = conn.cursor()
        versions = []
        for p in ports:
            with psycopg.connect(f"port={p}", autocommit=True) as c:
                versions.append(c.execute("SELECT string_agg(extname || ' ' || extversion, ', ' "
                                          "ORDER BY extname) FROM pg_extension WHERE extname IN "
                                          "('citus', 'gpuclust')").fetchone()[0])
        check("gpuclust and citus on every node", all(v and "gpuclust" in v and "citus" in v
                                                      for v in versions), "; ".join(map(str, versions)))

        t0 = time.perf_counter()
        kd.load(cur, X)
        cur.execute(f"CREATE TABLE {LOCAL} AS SELECT * FROM {TABLE}")
        cur.execute("SET client_min_messages = warning")
        cur.execute(f"SELECT create_distributed_table('{TABLE}', 'id')")
        cur.execute(f"SELECT truncate_local_data_after_distributing_table('{TABLE}')")
        cur.execute("RESET client_min_messages")
        shards = cur.execute("SELECT count(*), count(DISTINCT nodeport) FROM citus_shards "
                             f"WHERE table_name = '{TABLE}'::regclass").fetchone()
        info(f"{len(X)} rows of {kd.D} features: {TABLE} over {shards[0]} shards on "
             f"{shards[1]} workers, {LOCAL} on the coordinator ({time.perf_counter() - t0:.1f} s)")

        rng = np.random.default_rng(7)
        C0 = X[rng.choice(len(X), size=K, replace=False)]
        lit = kd.centroids_literal(C0)

        # the plan: the partial aggregate on the shards, combined on the coordinator
        cur.execute("EXPLAIN (VERBOSE, COSTS OFF) SELECT kmeans_step(s.f, %s::real[], s.id) "
                    f"FROM (SELECT id, f FROM {TABLE}) AS s(id, f)", (lit,))
        plan = "\n".join(r[0] for r in cur.fetchall())
        tasks = re.findall(r"Task Count: (\d+)", plan)
        check("EXPLAIN: kmeans_step runs as worker_partial_agg on the shards, coord_combine_agg "
              "on the coordinator", "Custom Scan (Citus Adaptive)" in plan and
              "worker_partial_agg('public.kmeans_step(real[],real[],bigint)'" in plan and
              "coord_combine_agg(" in plan and tasks == [str(shards[0])],
              f"task count {tasks}")

        # shards with no row give no state (NULL partials): the same step as one node's
        step = ("SELECT (s).centroids, (s).counts, (s).n FROM (SELECT kmeans_step(f, %s::real[], id) AS s "
                "FROM {} WHERE id <= 3) q")
        a = cur.execute(step.format(TABLE), (lit,)).fetchone()
        b = cur.execute(step.format(LOCAL), (lit,)).fetchone()
        check("a step over 3 rows (some shards without a row) = the same step on one node",
              a == b and a[2] == 3, f"n {a[2]} / {b[2]}")

        # a) distributed k-means = single-node k-means from the same centres
        q = ("SELECT * FROM gpu_kmeans_distributed(%s, %s, tol => 1e-6, "
             "init_centroids => %s::real[])")
        t0 = time.perf_counter()
        dist, sent = remote_commands(conn, lambda: kd.model(cur, q, (f"SELECT id, f FROM {TABLE}", K, lit)))
        t_dist = time.perf_counter() - t0
        partial = [c for c in sent if "worker_partial_agg('public.kmeans_step(" in c]
        shipping = row_shipping(sent)
        check("every query gpu_kmeans_distributed sent is a partial kmeans_step on a shard",
              len(partial) >= shards[0] * (dist["iterations"] + 2) and not shipping,
              f"{len(partial)} partial aggregates for {dist['iterations']} iterations x "
              f"{shards[0]} shards; {len(shipping)} other shard reads"
              + (f": {shipping[0][:200]}" if shipping else ""))
        t0 = time.perf_counter()
        fit = kd.model(cur, "SELECT * FROM gpu_kmeans_fit(%s, %s, tol => 1e-6, "
                       "init_centroids => %s::real[], device => 'cpu')",
                       (f"SELECT id, f FROM {LOCAL}", K, lit))
        t_fit = time.perf_counter() - t0
        info(f"k = {K}: {dist['iterations']} iterations; Citus {t_dist:.2f} s "
             f"({1000 * t_dist / (dist['iterations'] + 3):.0f} ms a pass), "
             f"gpu_kmeans_fit on the coordinator {t_fit:.2f} s")
        kd.compare(cur, f"k = {K}, Citus vs gpu_kmeans_fit", dist, fit)
        check(f"k = {K}: n and d", dist["n"] == len(X) and dist["d"] == kd.D,
              f"n {dist['n']}, d {dist['d']}")

        # the bytes of one iteration: the centroids to each shard, a state back
        qlen = max(len(c.encode()) for c in partial)
        cur.execute(f"SELECT length(worker_partial_agg('kmeans_step(real[],real[],bigint)'::regprocedure, "
                    f"ROW(f, %s::real[], id::bigint))::text) FROM {LOCAL}", (lit,))
        slen = cur.fetchone()[0]
        size = cur.execute(f"SELECT citus_table_size('{TABLE}')").fetchone()[0]
        info(f"per iteration: {shards[0]} shard queries of {qlen} bytes out, {shards[0]} states of "
             f"{slen} bytes back ({shards[0] * (qlen + slen) / 1024:.0f} KB) against "
             f"{size / 2**20:.1f} MB of table")

        # b) labels: kmeans_assign per row on the shards = gpu_kmeans's labels
        dlit = kd.centroids_literal(dist["C"])
        cur.execute(f"EXPLAIN (VERBOSE, COSTS OFF) SELECT id, kmeans_assign(f, %s::real[]) FROM {TABLE}",
                    (dlit,))
        plan = "\n".join(r[0] for r in cur.fetchall())
        check("EXPLAIN: kmeans_assign runs on the shards", "Custom Scan (Citus Adaptive)" in plan and
              re.search(r"Query: SELECT id, public\.kmeans_assign\(f, ", plan) is not None,
              re.search(r"Query: .{0,80}", plan).group(0) if "Query:" in plan else "no shard query")
        cur.execute(f"SELECT id, kmeans_assign(f, %s::real[]) FROM {TABLE} ORDER BY id", (dlit,))
        dl = np.array([r[1] for r in cur.fetchall()])
        cur.execute("SELECT id, cluster_id FROM gpu_kmeans(%s, %s, tol => 1e-6, "
                    "init_centroids => %s::real[], device => 'cpu') ORDER BY id",
                    (f"SELECT id, f FROM {LOCAL}", K, lit))
        sl = np.array([r[1] for r in cur.fetchall()])
        check("labels: kmeans_assign on the shards = gpu_kmeans's, row by row",
              len(dl) == len(sl) == len(X) and int((dl != sl).sum()) == 0,
              f"{int((dl != sl).sum()) if len(dl) == len(sl) else 'n/a'} of {len(dl)} differ")

        # seeding over the shards: random (source in id order) and k-means||
        ordered = f"SELECT id, f FROM {{}} ORDER BY id"
        par, sent = remote_commands(conn, lambda: kd.model(
            cur, "SELECT * FROM gpu_kmeans_distributed(%s, 30, tol => 1e-6, "
            "init => 'random', seed => 11)", (ordered.format(TABLE),)))
        seeding_reads(sent, shards[0], "random seeding, k = 30")
        fit = kd.model(cur, "SELECT * FROM gpu_kmeans_fit(%s, 30, tol => 1e-6, init => 'random', "
                       "seed => 11, device => 'cpu')", (ordered.format(LOCAL),))
        kd.compare(cur, "random seeding, Citus vs gpu_kmeans_fit", par, fit)
        positions = f"SELECT id - 1, f FROM {{}} ORDER BY id"
        t0 = time.perf_counter()
        (par, sent) = remote_commands(conn, lambda: kd.model(
            cur, "SELECT * FROM gpu_kmeans_distributed(%s, 40, tol => 1e-6, seed => 5)",
            (positions.format(TABLE),)))
        t_par = time.perf_counter() - t0
        kp = kd.model(cur, "SELECT * FROM gpu_kmeans_fit(%s, 40, tol => 1e-6, seed => 5, "
                      "init => 'k-means||', device => 'cpu')", (positions.format(LOCAL),))
        samples = [c for c in sent if "kmeans_parallel_sample(" in c]
        info(f"k-means|| k = 40: {par['iterations']} iterations in {t_par:.2f} s, "
             f"{len(samples)} sampling queries on the shards")
        check("k-means||: its sampling filters ran on the shards", len(samples) >= shards[0])
        seeding_reads(sent, shards[0], "k-means||, its first candidate")
        kd.compare(cur, "k-means||, Citus vs gpu_kmeans_fit(init => 'k-means||')", par, kp)

    # c) a worker stopped mid-run (the session above keeps its connections to
    # the stopped worker, which Citus finds broken at their next use)
    stopped_worker_check(ports, X)
    with psycopg.connect("", autocommit=True) as conn:
        conn.execute(f"DROP TABLE {TABLE}, {LOCAL}")

    # d) DBSCAN
    with psycopg.connect("", autocommit=True) as conn:
        n_rows = load_dbscan(conn, conn.cursor())
    dbscan_checks(ports, n_rows)
    dbscan_stopped_worker_check(ports)
    with psycopg.connect("", autocommit=True) as conn:
        for t in (DB_CITIES, DB_BLOBS):
            conn.execute(f"DROP TABLE {t}, {t}_local")

    return summary()


if __name__ == "__main__":
    sys.exit(main())
