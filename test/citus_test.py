#!/usr/bin/python3
"""citus_test.py — k-means over a Citus distributed table equals the
single-node k-means.

Starts its own cluster (test/citus_cluster.sh: Citus built once from
../shared/vendor and cached, or an installed Citus; a private PostgreSQL
tree with this checkout's gpuclust; a coordinator and two workers on
localhost, ports 55432-55434, data under /tmp/gpuclust_citus), stops and
removes it at the end.  Where there is neither the vendored source, nor a
cached build, nor an installed Citus, it prints "skipped: no Citus" and
passes.

Data: kmeans_distributed_test's 122,000 rows of 8 features, in
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
sys.path.insert(0, HERE)
import compare_sklearn as report  # noqa: E402  (its check / info and counts)
import kmeans_distributed_test as kd  # noqa: E402  (rows, ulps, compare)

check, info = report.check, report.info
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


def remote_commands(conn, run):
    """run() with citus.log_remote_commands: the commands sent to workers."""
    sent = []

    def on_notice(diag):
        msg = diag.message_primary or ""
        if msg.startswith("issuing "):
            sent.append(msg[len("issuing "):])
    conn.add_notice_handler(on_notice)
    conn.execute("SET citus.log_remote_commands = on; SET client_min_messages = log")
    try:
        result = run()
    finally:
        conn.execute("RESET client_min_messages; RESET citus.log_remote_commands")
        conn.remove_notice_handler(on_notice)
    return result, sent


def row_shipping(sent):
    """The commands that read shards and are not a partial kmeans_step or a
    k-means|| sampling filter (transaction control and the like aside)."""
    return [c for c in sent if re.search(r"\bFROM public\.\w+_\d+\b", c)
            and "worker_partial_agg('public.kmeans_step(" not in c
            and "kmeans_parallel_sample(" not in c]


def stopped_worker_check(ports, X):
    """A worker stopped in the middle of gpu_kmeans_distributed."""
    C0 = X[np.random.default_rng(3).choice(len(X), size=40, replace=False)]
    # tol 0: runs until the labels settle (108 iterations here), seconds
    q = ("CREATE TABLE gc_kd_model AS SELECT * FROM gpu_kmeans_distributed("
         f"'SELECT id, f FROM {TABLE}', 40, tol => 0, max_iter => 10000, "
         "init_centroids => %s::real[])")
    outcome = {}

    def run():
        try:
            with psycopg.connect("", autocommit=True) as c:
                c.execute(q, (kd.centroids_literal(C0),))
            outcome["error"] = None
        except psycopg.Error as e:
            outcome["error"] = e

    t = threading.Thread(target=run)
    t.start()
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
    e = outcome.get("error")
    state = getattr(e, "sqlstate", None) or ""
    diag = e.diag if e is not None else None
    text = "" if e is None else f"{diag.message_primary} | {diag.context}"
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
        par = kd.model(cur, "SELECT * FROM gpu_kmeans_distributed(%s, 30, tol => 1e-6, "
                       "init => 'random', seed => 11)", (ordered.format(TABLE),))
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
        kd.compare(cur, "k-means||, Citus vs gpu_kmeans_fit(init => 'k-means||')", par, kp)

    # c) a worker stopped mid-run (the session above keeps its connections to
    # the stopped worker, which Citus finds broken at their next use)
    stopped_worker_check(ports, X)
    with psycopg.connect("", autocommit=True) as conn:
        conn.execute(f"DROP TABLE {TABLE}, {LOCAL}")

    print(f"{report.passed} passed, {report.failed} failed")
    return 0 if report.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
