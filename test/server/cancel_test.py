#!/usr/bin/python3
"""pg_cancel_backend stops a long clustering call promptly.

One session runs gpu_kmeans with a million restarts, and
gpu_kmeans_distributed and gpu_dbscan over a slow source; another cancels
each after a second with pg_cancel_backend.  The call must end with SQLSTATE 57014 within 2 s of the cancel, and the session
must go on working.  Run against a server with the extension installed
(libpq environment variables), by test/run_tests.sh.
"""
import os
import sys
import threading
import time

import psycopg
from psycopg import errors

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from report import check, summary  # noqa: E402

CALLS = {
    "k-means (core)":
        "SELECT count(*) FROM gpu_kmeans('SELECT i, ARRAY[i % 1000, i % 7]::real[] "
        "FROM generate_series(1, 100000) i', 50, max_iter => 1000000, tol => 0, "
        "n_init => 1000000, device => 'cpu')",
    "distributed k-means (the kmeans_step passes)":
        "SELECT * FROM gpu_kmeans_distributed('SELECT i, ARRAY[i % 1000, i % 7]::real[] "
        "FROM generate_series(1, 100000) i WHERE pg_sleep(0.00001) IS NOT NULL', 50, "
        "max_iter => 1000000, tol => 0)",
    "DBSCAN (reading the source)":
        "SELECT count(*) FROM gpu_dbscan('SELECT i, ARRAY[i] FROM generate_series(1, 100000) i "
        "WHERE pg_sleep(0.001) IS NOT NULL', 1, 1)",
}


def main():
    with psycopg.connect("", autocommit=True) as admin, \
            psycopg.connect("", autocommit=True) as worker:
        admin.execute("CREATE EXTENSION IF NOT EXISTS gpuclust")
        pid = worker.execute("SELECT pg_backend_pid()").fetchone()[0]
        for name, sql in CALLS.items():
            cancelled_at = []

            def cancel():
                time.sleep(1.0)
                cancelled_at.append(time.monotonic())
                admin.execute("SELECT pg_cancel_backend(%s)", (pid,))

            t = threading.Thread(target=cancel)
            t.start()
            outcome = "finished without being cancelled"
            try:
                worker.execute(sql)
            except errors.QueryCanceled:
                outcome = "cancelled"
            ended = time.monotonic()
            t.join()
            lag = ended - cancelled_at[0] if cancelled_at else float("nan")
            usable = worker.execute("SELECT 1").fetchone()[0] == 1
            check(name, outcome == "cancelled" and lag < 2.0 and usable,
                  f"{outcome} {lag:.2f} s after pg_cancel_backend; session usable afterwards: {usable}")
    return summary()


if __name__ == "__main__":
    sys.exit(main())
