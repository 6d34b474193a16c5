#!/usr/bin/python3
"""Runaway arguments and vanished clients: every call can be stopped.

1. Every argument that sets a loop bound, at its type's extremes (INT_MAX,
   INT_MIN, 0, -1, the largest bigint, 2e9 and other extreme floats),
   under statement_timeout = 2s: each call returns (rows, or SQLSTATE
   22023 or 57014) within 3 s, and the server is fine afterwards (a
   session opened before still answers, a fresh connection answers).
2. A client killed (SIGKILL) mid-call on the CPU path, with
   client_connection_check_interval = 1s: its backend leaves
   pg_stat_activity within the interval + 1 s (affinity propagation,
   k-means).
3. The same for a job of the GPU worker: a second server whose worker
   emulates a GPU on the CPU (gpuclust.gpu_worker_emulate = 512MB, a
   testing build: test/lib/emulated_gpu.py, as for test/server/worker_test.py); the killed client's backend ends within
   the interval + 1 s and the worker's slot is free (the next call runs).
   Its port is GPUCLUST_FAULT_PG_PORT (default 54341), its data under
   GPUCLUST_FAULT_PG_DIR (default /tmp/gpuclust_pg_fault_worker).

Run against a server with gpuclust preloaded (libpq environment
variables), by test/run_tests.sh.  fault_test.py --gpu runs only 2., with
device 'gpu', against a server that has a GPU (test/gpu/run_gpu_tests.sh
faults: preloaded, the GPU worker's jobs; not preloaded, the backend's own
CUDA).  Prints one line per check and
"N passed, M failed"; exits 1 on a failure.
"""
import os
import subprocess
import sys
import threading
import time

import psycopg
from psycopg import errors

LIB = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib")
sys.path.insert(0, LIB)
from emulated_gpu import emulated_gpu_server  # noqa: E402
from report import check, summary  # noqa: E402

INT_EXTREMES = ["2147483647", "-2147483648", "0", "-1"]
BIG_EXTREMES = ["9223372036854775807", "-9223372036854775808", "0", "-1"]
FLOAT_EXTREMES = ["2e9", "1e308", "-1", "0", "'Infinity'::float8", "'NaN'::float8"]
SRC = "'SELECT id, f FROM fault_rows'"
FEW = "'SELECT id, f FROM fault_rows WHERE id <= 3'"
ONE = "'SELECT id, f FROM fault_rows WHERE id = 1'"
LABELS = "'SELECT id, (id % 3)::int FROM fault_rows'"

# (name, SQL with {v} for the argument, the values it takes)
CALLS = [
    ("gpu_kmeans k", f"SELECT count(*) FROM gpu_kmeans({SRC}, {{v}})", INT_EXTREMES),
    ("gpu_kmeans max_iter", f"SELECT count(*) FROM gpu_kmeans({SRC}, 3, max_iter => {{v}}, tol => 0)", INT_EXTREMES),
    ("gpu_kmeans n_init", f"SELECT count(*) FROM gpu_kmeans({SRC}, 3, n_init => {{v}})", INT_EXTREMES),
    ("gpu_kmeans seed", f"SELECT count(*) FROM gpu_kmeans({SRC}, 3, seed => {{v}})", BIG_EXTREMES),
    ("gpu_kmeans tol", f"SELECT count(*) FROM gpu_kmeans({SRC}, 3, tol => {{v}})", FLOAT_EXTREMES),
    ("gpu_kmeans k-means|| n_init", f"SELECT count(*) FROM gpu_kmeans({SRC}, 3, init => 'k-means||', n_init => {{v}})", INT_EXTREMES),
    ("gpu_kmeans window k", "SELECT count(c) FROM (SELECT gpu_kmeans(f, {v}) OVER () c FROM fault_rows) s", INT_EXTREMES),
    ("gpu_kmeans window n_init", "SELECT count(c) FROM (SELECT gpu_kmeans(f, 3, n_init => {v}) OVER () c FROM fault_rows) s", INT_EXTREMES),
    ("gpu_kmeans_fit max_iter", f"SELECT iterations FROM gpu_kmeans_fit({SRC}, 3, max_iter => {{v}}, tol => 0)", INT_EXTREMES),
    ("gpu_kmeans_fit n_init", f"SELECT iterations FROM gpu_kmeans_fit({SRC}, 3, n_init => {{v}})", INT_EXTREMES),
    ("gpu_kmeans_elbow k_min", f"SELECT count(*) FROM gpu_kmeans_elbow({SRC}, {{v}}, 3)", INT_EXTREMES),
    ("gpu_kmeans_elbow k_max", f"SELECT count(*) FROM gpu_kmeans_elbow({SRC}, 1, {{v}})", INT_EXTREMES),
    ("gpu_kmeans_elbow k range", f"SELECT count(*) FROM gpu_kmeans_elbow({SRC}, {{v}}, 2147483647)", INT_EXTREMES),
    ("gpu_kmeans_elbow n_init", f"SELECT count(*) FROM gpu_kmeans_elbow({SRC}, 1, 3, n_init => {{v}})", INT_EXTREMES),
    ("gpu_dbscan min_pts", f"SELECT count(*) FROM gpu_dbscan({SRC}, 0.5, {{v}})", INT_EXTREMES),
    ("gpu_dbscan eps", f"SELECT count(*) FROM gpu_dbscan({SRC}, {{v}}, 3)", FLOAT_EXTREMES),
    ("gpu_dbscan window min_pts", "SELECT count(c) FROM (SELECT gpu_dbscan(f, 0.5, {v}) OVER () c FROM fault_rows) s", INT_EXTREMES),
    ("gpu_hdbscan min_cluster_size", f"SELECT count(*) FROM gpu_hdbscan({SRC}, {{v}}, 3)", INT_EXTREMES),
    ("gpu_hdbscan min_samples", f"SELECT count(*) FROM gpu_hdbscan({SRC}, 5, {{v}})", INT_EXTREMES),
    ("gpu_hdbscan cluster_selection_epsilon", f"SELECT count(*) FROM gpu_hdbscan({SRC}, 5, cluster_selection_epsilon => {{v}})", FLOAT_EXTREMES),
    ("gpu_hdbscan leaf, cluster_selection_epsilon", f"SELECT count(*) FROM gpu_hdbscan({SRC}, 5, cluster_selection_epsilon => {{v}}, cluster_selection_method => 'leaf', allow_single_cluster => true)", FLOAT_EXTREMES),
    ("gpu_hdbscan alpha", f"SELECT count(*) FROM gpu_hdbscan({SRC}, 5, alpha => {{v}})", FLOAT_EXTREMES),
    ("gpu_hdbscan_tree min_cluster_size", f"SELECT count(*) FROM gpu_hdbscan_tree({SRC}, {{v}}, 2)", INT_EXTREMES),
    ("gpu_hdbscan window min_cluster_size", "SELECT count(c) FROM (SELECT gpu_hdbscan(f, {v}, 2) OVER () c FROM fault_rows) s", INT_EXTREMES),
    ("gpu_minimum_spanning_tree min_samples", f"SELECT count(*) FROM gpu_minimum_spanning_tree({SRC}, {{v}})", INT_EXTREMES),
    ("gpu_minimum_spanning_tree alpha", f"SELECT count(*) FROM gpu_minimum_spanning_tree({SRC}, 3, alpha => {{v}})", FLOAT_EXTREMES),
    ("gpu_affinity_propagation max_iter", f"SELECT count(*) FROM gpu_affinity_propagation({SRC}, max_iter => {{v}}, convergence_iter => 2147483647)", INT_EXTREMES),
    ("gpu_affinity_propagation convergence_iter", f"SELECT count(*) FROM gpu_affinity_propagation({SRC}, convergence_iter => {{v}})", INT_EXTREMES),
    ("gpu_affinity_propagation damping", f"SELECT count(*) FROM gpu_affinity_propagation({SRC}, damping => {{v}})", FLOAT_EXTREMES),
    ("gpu_affinity_propagation preference", f"SELECT count(*) FROM gpu_affinity_propagation({SRC}, preference => {{v}})", FLOAT_EXTREMES),
    ("gpu_kdistance k", f"SELECT count(*) FROM gpu_kdistance({SRC}, {{v}})", INT_EXTREMES),
    ("gpu_kdistance quantiles", f"SELECT count(*) FROM gpu_kdistance({SRC}, 2, quantiles => {{v}})", INT_EXTREMES + ["2000000000"]),
    ("gpu_kdistance quantiles, one row", f"SELECT count(*) FROM gpu_kdistance({ONE}, 1, quantiles => {{v}})", INT_EXTREMES + ["2000000000"]),
    ("gpu_silhouette sample_size", f"SELECT n FROM gpu_silhouette({SRC}, {LABELS}, sample_size => {{v}})", INT_EXTREMES),
    ("gpu_silhouette seed", f"SELECT n FROM gpu_silhouette({SRC}, {LABELS}, sample_size => 50, seed => {{v}})", BIG_EXTREMES),
    ("gpu_kmeans_distributed k", f"SELECT iterations FROM gpu_kmeans_distributed({SRC}, {{v}})", INT_EXTREMES),
    ("gpu_kmeans_distributed max_iter", f"SELECT iterations FROM gpu_kmeans_distributed({SRC}, 3, max_iter => {{v}}, tol => 0)", INT_EXTREMES),
    ("gpu_dbscan_distributed partitions", f"SELECT count(*) FROM gpu_dbscan_distributed({SRC}, 0.5, 3, partitions => {{v}})", INT_EXTREMES),
    ("gpu_dbscan_distributed min_pts", f"SELECT count(*) FROM gpu_dbscan_distributed({SRC}, 0.5, {{v}})", INT_EXTREMES),
    ("gpu_dbscan_distributed eps", f"SELECT count(*) FROM gpu_dbscan_distributed({FEW}, {{v}}, 2)", FLOAT_EXTREMES),
    ("dbscan_histogram bins", "SELECT dbscan_histogram(f, 0, 0, 10, {v}) FROM fault_rows", INT_EXTREMES),
    ("dbscan_histogram dim", "SELECT dbscan_histogram(f, {v}, 0, 10, 4) FROM fault_rows", INT_EXTREMES),
    ("dbscan_partitions plan", "SELECT count(*) FROM fault_rows, dbscan_partitions(f, ARRAY[2, 0, {v}, 1, 2, 3])", FLOAT_EXTREMES),
    ("dbscan_partitions plan dim", "SELECT count(*) FROM fault_rows, dbscan_partitions(f, ARRAY[2, {v}, 1, 1, 2, 3])", FLOAT_EXTREMES),
    ("dbscan_partition part", "SELECT length(dbscan_partition({v}, id, f, {v}, false, 0.5, 3, 'cpu')) FROM fault_rows", INT_EXTREMES),
    ("dbscan_partition home", "SELECT length(dbscan_partition(0, id, f, {v}, true, 0.5, 3, 'cpu')) FROM fault_rows", INT_EXTREMES),
    ("dbscan_partition min_pts", "SELECT length(dbscan_partition(0, id, f, 0, false, 0.5, {v}, 'cpu')) FROM fault_rows", INT_EXTREMES),
    ("kmeans_rank_counts pivots", "SELECT kmeans_rank_counts(id, ARRAY[{v}, 9223372036854775807]) FROM fault_rows", BIG_EXTREMES),
    ("kmeans_parallel_sample round", "SELECT count(*) FILTER (WHERE kmeans_parallel_sample(f, ARRAY[[0,0]]::real[], id, 0, {v}, 200, 2, 1)) FROM fault_rows", INT_EXTREMES),
    ("kmeans_parallel_sample n", "SELECT count(*) FILTER (WHERE kmeans_parallel_sample(f, ARRAY[[0,0]]::real[], id, 0, 1, {v}, 2, 1)) FROM fault_rows", BIG_EXTREMES),
    ("kmeans_parallel_sample ell", "SELECT count(*) FILTER (WHERE kmeans_parallel_sample(f, ARRAY[[0,0]]::real[], id, 0, 1, 200, {v}, 1)) FROM fault_rows", FLOAT_EXTREMES),
]

ACCEPTED = {"22023", "57014"}


def connect(**kw):
    return psycopg.connect("", autocommit=True, **kw)


def fresh_answers():
    try:
        with connect(connect_timeout=3) as c:
            return c.execute("SELECT 1").fetchone()[0] == 1
    except psycopg.Error:
        return False


def run_limited(sql):
    """(outcome, seconds) of sql under statement_timeout = 2s: "rows", a
    SQLSTATE, or "no answer" after 6 s (the call is then left behind on
    its own connection, which this test abandons)."""
    result = []

    def run():
        t0 = time.monotonic()
        try:
            with connect() as c:
                c.execute("SET statement_timeout = '2s'")
                c.execute("SET client_min_messages = warning")
                t0 = time.monotonic()
                c.execute(sql).fetchall()
                result.append(("rows", time.monotonic() - t0))
        except psycopg.Error as e:
            result.append((e.sqlstate or "no SQLSTATE", time.monotonic() - t0))

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(6.0)
    return result[0] if result else ("no answer", 6.0)


def argument_checks():
    """Each runaway argument returns within 3 s under statement_timeout = 2s."""
    with connect() as admin:
        admin.execute("CREATE EXTENSION IF NOT EXISTS gpuclust")
        admin.execute("DROP TABLE IF EXISTS fault_rows")
        admin.execute("CREATE TABLE fault_rows AS SELECT i::bigint AS id,"
                      " ARRAY[(i % 10)::real, (i * 7 % 13)::real] AS f FROM generate_series(1, 200) i")
        before = connect()
        for name, template, values in CALLS:
            worst, bad = 0.0, []
            for v in values:
                outcome, took = run_limited(template.format(v=v))
                worst = max(worst, took)
                if took > 3.0 or (outcome != "rows" and outcome not in ACCEPTED):
                    bad.append(f"{v}: {outcome} in {took:.2f} s")
            ok = not bad and fresh_answers()
            check(f"{name} at its extremes", ok,
                  "; ".join(bad) if bad else f"slowest {worst:.2f} s")
        try:
            alive = before.execute("SELECT 1").fetchone()[0] == 1
        except psycopg.Error:
            alive = False
        before.close()
        check("a session opened before the calls still answers", alive)
        # a call that never stopped still holds its lock on the table
        admin.execute("SET lock_timeout = '1s'")
        try:
            admin.execute("DROP TABLE fault_rows")
        except errors.LockNotAvailable:
            pass


CLIENT = r"""
import sys, psycopg
c = psycopg.connect("", autocommit=True)
c.execute("SET client_connection_check_interval = '1s'")
c.execute("SET application_name = 'gpuclust_fault_victim'")
print(c.execute("SELECT pg_backend_pid()").fetchone()[0], flush=True)
c.execute(sys.argv[1])
"""


def backend_gone_after_kill(admin, sql, name, expect_job=False):
    """Runs sql in a client process, kills it mid-call, times its backend's end."""
    proc = subprocess.Popen([sys.executable, "-c", CLIENT, sql], stdout=subprocess.PIPE, text=True)
    pid = int(proc.stdout.readline())
    # in the call for a second (and, for a job, in the worker's queue)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        running = admin.execute("SELECT state = 'active' AND query LIKE 'SELECT count(*) FROM gpu_%%'"
                                " FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()
        job = not expect_job or admin.execute(
            "SELECT count(*) > 0 FROM gpuclust_gpu_jobs WHERE pid = %s AND state = 'running'", (pid,)).fetchone()[0]
        if running and running[0] and job:
            break
        time.sleep(0.05)
    time.sleep(1.0)
    proc.kill()
    proc.wait()
    killed = time.monotonic()
    gone = None
    while time.monotonic() - killed < 10:
        if admin.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()[0] == 0:
            gone = time.monotonic() - killed
            break
        time.sleep(0.05)
    if gone is None:
        # do not leave it computing for the next checks
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    check(f"{name}: backend ends after its client is killed", gone is not None and gone <= 2.0,
          f"gone {gone:.2f} s after the kill" if gone is not None else "still running 10 s after the kill")
    return gone is not None


def client_checks(device="cpu"):
    """Clients killed mid-call on the device's path."""
    with connect() as admin:
        admin.execute("DROP TABLE IF EXISTS fault_big")
        admin.execute("CREATE TABLE fault_big AS SELECT i::bigint AS id,"
                      " ARRAY[(hashint4(i) % 1000)::real, (hashint4(i * 7) % 1000)::real] AS f"
                      " FROM generate_series(1, 20000) i")
        src = "'SELECT id, f FROM fault_big'"
        backend_gone_after_kill(
            admin, "SELECT count(*) FROM gpu_affinity_propagation('SELECT id, f FROM fault_big WHERE id <= 1500',"
            f" max_iter => 100000000, convergence_iter => 100000000, device => '{device}')",
            f"affinity propagation ({device})")
        backend_gone_after_kill(
            admin, f"SELECT count(*) FROM gpu_kmeans({src}, 50, max_iter => 1000000, tol => 0,"
            f" n_init => 1000000, device => '{device}')", f"k-means ({device})")
        admin.execute("DROP TABLE fault_big")


def worker_checks():
    """A client of a GPU worker's job killed mid-job (the emulated GPU)."""
    with emulated_gpu_server(os.environ.get("GPUCLUST_FAULT_PG_DIR", "/tmp/gpuclust_pg_fault_worker"),
                             os.environ.get("GPUCLUST_FAULT_PG_PORT", "54341")), connect() as admin:
        admin.execute("CREATE EXTENSION IF NOT EXISTS gpuclust")
        admin.execute("CREATE TABLE fault_job AS SELECT i::bigint AS id,"
                      " ARRAY[(hashint4(i) % 100000 / 1000.0)::real, (hashint4(i * 7) % 100000 / 1000.0)::real] AS f"
                      " FROM generate_series(1, 100000) i")
        backend_gone_after_kill(
            admin, "SELECT count(*) FROM gpu_kmeans('SELECT id, f FROM fault_job', 200, max_iter => 100000,"
            " tol => 0, init => 'random', n_init => 1000, device => 'gpu')",
            "k-means job of the GPU worker", expect_job=True)
        t0 = time.monotonic()
        freed = False
        while time.monotonic() - t0 < 5 and not freed:
            freed = admin.execute("SELECT count(*) = 0 FROM gpuclust_gpu_jobs").fetchone()[0]
            time.sleep(0.05)
        check("the GPU worker's job slot is freed", freed)
        try:
            n = admin.execute("SELECT count(*) FROM gpu_kmeans('SELECT id, f FROM fault_job WHERE id <= 1000',"
                              " 3, device => 'gpu')").fetchone()[0]
        except psycopg.Error as e:
            n = str(e)
        check("the next GPU call runs", n == 1000, f"{n}")


def main():
    if sys.argv[1:] == ["--gpu"]:
        # a server with a GPU: the backend's own CUDA path (not preloaded)
        # or the GPU worker's (preloaded)
        with connect() as c:
            c.execute("CREATE EXTENSION IF NOT EXISTS gpuclust")
        client_checks("gpu")
        return summary()
    argument_checks()
    client_checks()
    worker_checks()
    return summary()


if __name__ == "__main__":
    sys.exit(main())
