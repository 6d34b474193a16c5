#!/usr/bin/python3
"""gpuclust installs and runs however a user loads it.

Against PostgreSQL of PG_CONFIG (default: pg_config on PATH), with gpuclust installed
there, two throwaway servers of test/lib/pg_server.sh on their own directory
and port (GPUCLUST_INSTALL_PG_DIR, default /tmp/gpuclust_install_MAJOR;
GPUCLUST_INSTALL_PG_PORT, default 54400 + MAJOR):

1. Nothing in shared_preload_libraries, as right after installing:
   CREATE EXTENSION; LOAD in the same session and in a fresh one; one call
   of every public function (a function of the extension that no call names
   fails the test, so that new ones are added here); the GPU worker's
   settings absent and gpuclust_info() saying why there is no worker;
   session_preload_libraries; a session opened before all this still
   answers.
2. Preloaded: CREATE EXTENSION in a second database while the first has it
   too, and every call there.

After each, the server's log must show no crash: no backend ended by a
signal or a FATAL of the library, no server restart.

    PG_CONFIG=/path/to/pg_config /usr/bin/python3 test/install/install_test.py [not-preloaded|preloaded]

(the one phase named, or both).
"""
import os
import re
import subprocess
import sys

import psycopg
from psycopg import errors

LIB = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib")
sys.path.insert(0, LIB)
from report import check, summary  # noqa: E402

PG_CONFIG = os.environ.get("PG_CONFIG", "pg_config")
MAJOR = subprocess.run([PG_CONFIG, "--version"], capture_output=True, text=True,
                       check=True).stdout.split()[1].split(".")[0]
BASE = os.environ.get("GPUCLUST_INSTALL_PG_DIR", f"/tmp/gpuclust_install_{MAJOR}")
PORT = os.environ.get("GPUCLUST_INSTALL_PG_PORT", str(54400 + int(MAJOR)))

PTS = ("SELECT i::bigint AS id, ARRAY[(i % 7)::real, (i / 7)::real] AS f "
       "FROM generate_series(1, 60) i")

# One call of every public function; each returns one row whose first
# column must not be NULL.  Functions a call reaches only through another
# (aggregates' support functions, the views' row functions, a type's I/O)
# are named in SUPPORT.
CALLS = [
    ("gpu_kmeans", "SELECT count(*) FROM gpu_kmeans('SELECT * FROM pts', 3)"),
    ("gpu_kmeans keyed", "SELECT count(*) FROM gpu_kmeans('SELECT id::text, f FROM pts', "
     "NULL::text, 3)"),
    ("gpu_kmeans window", "SELECT count(*) FROM (SELECT gpu_kmeans(f, 3) OVER () FROM pts) s"),
    ("gpu_kmeans window float8", "SELECT count(*) FROM (SELECT gpu_kmeans(f::float8[], 3) OVER () "
     "FROM pts) s"),
    ("gpu_kmeans_fit", "SELECT iterations FROM gpu_kmeans_fit('SELECT * FROM pts', 3)"),
    ("gpu_kmeans_elbow", "SELECT count(*) FROM gpu_kmeans_elbow('SELECT * FROM pts', 2, 4)"),
    ("kmeans_assign", "SELECT kmeans_assign(f, '{{0,0},{5,5}}') FROM pts LIMIT 1"),
    ("kmeans_assign float8", "SELECT kmeans_assign(f::float8[], '{{0,0},{5,5}}') FROM pts LIMIT 1"),
    ("kmeans_assign_distance", "SELECT kmeans_assign_distance(f, '{{0,0},{5,5}}') FROM pts LIMIT 1"),
    ("gpu_dbscan", "SELECT count(*) FROM gpu_dbscan('SELECT * FROM pts', 1.5, 3)"),
    ("gpu_dbscan keyed", "SELECT count(*) FROM gpu_dbscan('SELECT id::text, f FROM pts', "
     "NULL::text, 1.5, 3)"),
    ("gpu_dbscan window", "SELECT count(*) FROM (SELECT gpu_dbscan(f, 1.5, 3) OVER () FROM pts) s"),
    ("gpu_hdbscan", "SELECT count(*) FROM gpu_hdbscan('SELECT * FROM pts', 4)"),
    ("gpu_hdbscan keyed", "SELECT count(*) FROM gpu_hdbscan('SELECT id::text, f FROM pts', "
     "NULL::text, 4)"),
    ("gpu_hdbscan window", "SELECT count(*) FROM (SELECT gpu_hdbscan(f, 4) OVER () FROM pts) s"),
    ("gpu_hdbscan_tree", "SELECT count(*) FROM gpu_hdbscan_tree('SELECT * FROM pts', 4)"),
    ("gpu_minimum_spanning_tree", "SELECT count(*) FROM gpu_minimum_spanning_tree('SELECT * FROM pts')"),
    ("gpu_affinity_propagation", "SELECT count(*) FROM gpu_affinity_propagation('SELECT * FROM pts')"),
    ("gpu_affinity_propagation keyed", "SELECT count(*) FROM gpu_affinity_propagation("
     "'SELECT id::text, f FROM pts', NULL::text)"),
    ("gpuclust_info", "SELECT count(*) FROM gpuclust_info()"),
    ("gpuclust_progress", "SELECT count(*) FROM gpuclust_progress"),
    ("gpuclust_gpu_jobs", "SELECT count(*) FROM gpuclust_gpu_jobs"),
    ("gpu_kdistance", "SELECT count(*) FROM gpu_kdistance('SELECT * FROM pts', 3)"),
    ("gpu_silhouette", "SELECT gpu_silhouette('SELECT * FROM pts', "
     "'SELECT id, cluster_id FROM gpu_kmeans(''SELECT * FROM pts'', 3)')"),
    ("gpu_cluster_centers", "SELECT count(*) FROM gpu_cluster_centers('SELECT * FROM pts', "
     "'SELECT id, cluster_id FROM gpu_kmeans(''SELECT * FROM pts'', 3)')"),
    ("gpu_cluster_scores", "SELECT davies_bouldin FROM gpu_cluster_scores('SELECT * FROM pts', "
     "'SELECT id, cluster_id FROM gpu_kmeans(''SELECT * FROM pts'', 3)')"),
    ("kmeans_step", "SELECT (kmeans_step(f, '{{0,0},{5,5}}')).inertia FROM pts"),
    ("kmeans_step id device", "SELECT (kmeans_step(f::float8[], '{{0,0},{5,5}}', id, 'cpu')).inertia "
     "FROM pts"),
    ("kmeans_rank_counts", "SELECT kmeans_rank_counts(id, '{10,20}') FROM pts"),
    ("kmeans_parallel_sample", "SELECT count(*) FROM pts WHERE kmeans_parallel_sample("
     "f, '{{0,0}}', id, 1, 1, 60, 2, 100) IS NOT NULL"),
    ("gpu_kmeans_distributed", "SELECT iterations FROM gpu_kmeans_distributed('SELECT * FROM pts', 3)"),
    ("dbscan_bounds", "SELECT dbscan_bounds(f, id) FROM pts"),
    ("dbscan_histogram", "SELECT dbscan_histogram(f, 0, 0, 7, 4) FROM pts"),
    ("dbscan_partitions", "SELECT count(*) FROM pts, dbscan_partitions(f, '{2,0,3,3.5}')"),
    ("dbscan_partition", "SELECT count(*) FROM (SELECT dbscan_partition(p.part, id, p.x, p.home, "
     "p.shared, 1.5, 3, 'cpu') FROM pts, dbscan_partitions(f, '{2,0,3,3.5}') p "
     "GROUP BY p.part) s"),
    ("gpu_dbscan_distributed", "SELECT count(*) FROM gpu_dbscan_distributed('SELECT * FROM pts', 1.5, 3)"),
]
SUPPORT = re.compile(r"_(transfn|combine|final|serialize|deserialize|rows|in|out)$")

# What a crash, or a library that cannot load, leaves in the server's log.
CRASH = re.compile(r"terminated by signal|was terminated|exited with exit code|"
                   r"all server processes terminated|PGC_POSTMASTER|"
                   r"server closed the connection|reinitializing")


class Server:
    """A test/lib/pg_server.sh server of its own, preloaded or not."""

    def __init__(self, preload):
        self.env = dict(os.environ, PG_CONFIG=PG_CONFIG, GPUCLUST_PG_DIR=BASE,
                        GPUCLUST_PG_PORT=PORT, GPUCLUST_PG_NOPRELOAD="0" if preload else "1")
        self.log = os.path.join(BASE, "server.log")

    def __enter__(self):
        self.sh("clean")
        out = self.sh("start")
        self.conninfo = dict(kv.split("=", 1) for kv in out.split()[1:])
        return self

    def __exit__(self, *exc):
        self.sh("clean")

    def sh(self, what):
        r = subprocess.run([os.path.join(LIB, "pg_server.sh"), what], env=self.env,
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"pg_server.sh {what}: {r.stderr[-2000:]}")
        return r.stdout

    def connect(self, dbname="postgres"):
        c = self.conninfo
        return psycopg.connect(host=c["PGHOST"], port=c["PGPORT"], user=c["PGUSER"],
                               dbname=dbname, autocommit=True)

    def crashes(self):
        with open(self.log, errors="replace") as f:
            return [line.strip() for line in f if CRASH.search(line)]


def every_call(conn, where):
    conn.execute("CREATE TABLE IF NOT EXISTS pts AS " + PTS)
    for name, sql in CALLS:
        try:
            row = conn.execute(sql).fetchone()
            check(f"{where}: {name}", row is not None and row[0] is not None, repr(row))
        except psycopg.Error as e:
            check(f"{where}: {name}", False, f"{e.sqlstate}: {e}")
    covered = " ".join(sql for _, sql in CALLS)
    names = [r[0] for r in conn.execute(
        "SELECT DISTINCT p.proname FROM pg_depend d JOIN pg_proc p ON p.oid = d.objid "
        "JOIN pg_extension e ON e.oid = d.refobjid "
        "WHERE d.classid = 'pg_proc'::regclass AND e.extname = 'gpuclust' AND d.deptype = 'e'")]
    missing = sorted(n for n in names
                     if not SUPPORT.search(n) and not re.search(rf"\b{n}\b", covered))
    check(f"{where}: a call of every public function ({len(names)} names)", not missing,
          f"no call of {', '.join(missing)}")


def not_preloaded():
    with Server(preload=False) as srv:
        with srv.connect() as early, srv.connect() as conn:
            shared = conn.execute("SHOW shared_preload_libraries").fetchone()[0]
            check("nothing preloaded", shared == "", shared)
            conn.execute("CREATE EXTENSION gpuclust")
            check("CREATE EXTENSION without preload", True)
            conn.execute("LOAD 'gpuclust'")
            check("LOAD after CREATE EXTENSION", True)
            for guc in ("gpuclust.gpu_worker", "gpuclust.gpu_worker_jobs",
                        "gpuclust.gpu_worker_memory"):
                try:
                    conn.execute(f"SHOW {guc}")
                    check(f"{guc} absent without preload", False, "it is defined")
                except errors.UndefinedObject:
                    check(f"{guc} absent without preload", True)
            why = conn.execute("SELECT value FROM gpuclust_info() "
                               "WHERE key = 'gpu_worker'").fetchone()[0]
            check("gpuclust_info says why there is no worker",
                  "shared_preload_libraries" in why, why)
            every_call(conn, "not preloaded")
            check("a session opened before still answers",
                  early.execute("SELECT 1").fetchone()[0] == 1)
        with srv.connect() as fresh:
            fresh.execute("LOAD 'gpuclust'")
            n = fresh.execute("SELECT count(*) FROM gpu_dbscan('SELECT * FROM pts', 1.5, 3)"
                              ).fetchone()[0]
            check("LOAD first in a fresh session, then a call", n == 60, n)
        with srv.connect() as conn:
            conn.execute("ALTER DATABASE postgres SET session_preload_libraries = 'gpuclust'")
        with srv.connect() as sp:
            loaded = sp.execute("SELECT current_setting('gpuclust.device', true)").fetchone()[0]
            check("session_preload_libraries loads it at connection", loaded == "auto", loaded)
            n = sp.execute("SELECT count(*) FROM gpu_kmeans('SELECT * FROM pts', 3)").fetchone()[0]
            check("session_preload_libraries: a call", n == 60, n)
            sp.execute("ALTER DATABASE postgres RESET session_preload_libraries")
        crashes = srv.crashes()
        check("no crash in the log (not preloaded)", not crashes, "; ".join(crashes[:3]))


def preloaded():
    with Server(preload=True) as srv:
        with srv.connect() as conn:
            shared = conn.execute("SHOW shared_preload_libraries").fetchone()[0]
            check("preloaded", "gpuclust" in shared, shared)
            conn.execute("CREATE EXTENSION gpuclust")
            conn.execute("CREATE DATABASE second")
            worker = conn.execute("SHOW gpuclust.gpu_worker").fetchone()[0]
            check("gpuclust.gpu_worker defined when preloaded", worker == "on", worker)
        with srv.connect("second") as conn:
            conn.execute("CREATE EXTENSION gpuclust")
            check("CREATE EXTENSION in a second database", True)
            every_call(conn, "preloaded, second database")
        with srv.connect() as conn:
            n = conn.execute("SELECT count(*) FROM gpu_dbscan('SELECT i, ARRAY[i] "
                             "FROM generate_series(1, 10) i', 1, 2)").fetchone()[0]
            check("the first database still works", n == 10, n)
        crashes = srv.crashes()
        check("no crash in the log (preloaded)", not crashes, "; ".join(crashes[:3]))


def main():
    phases = {"not-preloaded": [not_preloaded], "preloaded": [preloaded]}.get(
        sys.argv[1] if len(sys.argv) > 1 else "", [not_preloaded, preloaded])
    for phase in phases:
        try:
            phase()
        except Exception as e:  # a server that would not start, a lost session
            check(f"{phase.__name__} ran to its end", False, f"{type(e).__name__}: {e}")
    return summary(f"install ({MAJOR})")


if __name__ == "__main__":
    sys.exit(main())
