#!/usr/bin/python3
"""Source text, id types, DROP EXTENSION mid-call, and what gpuclust_info shows.

In a database of its own on the server of the libpq environment variables:
  - every form that takes a source query accepts it with a trailing ';',
    a trailing '-- comment', a '/* comment */' and blank lines, with the
    same result as the plain query; two statements are still refused;
  - the distributed drivers given text ids raise 42804 with the hint every
    other form gives;
  - DROP EXTENSION gpuclust in a second session during gpu_kmeans_distributed
    and gpu_dbscan_distributed waits for the call, which ends normally;
  - gpuclust_info() shows the server's free memory to a role with
    pg_read_all_stats only (NULL to others), with the same keys for all.
"""
import os
import sys
import threading
import time

import psycopg

LIB = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib")
sys.path.insert(0, LIB)
from report import check, summary  # noqa: E402

DB = "gc_faults_small"
ROLE = "gc_small_reader"


SRC = "SELECT id, f FROM pts"
LABELS = "SELECT id, id % 3 FROM pts"
# each form, with {s} for the source text (quoted for a literal)
FORMS = {
    "gpu_kmeans": "SELECT * FROM gpu_kmeans('{s}', 3, seed => 7, device => 'cpu') ORDER BY id",
    "gpu_kmeans, keyed": "SELECT * FROM gpu_kmeans('{s}', NULL::bigint, 3, seed => 7, device => 'cpu') "
                         "ORDER BY id",
    "gpu_dbscan": "SELECT * FROM gpu_dbscan('{s}', 1.5, 3) ORDER BY id",
    "gpu_dbscan, keyed": "SELECT * FROM gpu_dbscan('{s}', NULL::bigint, 1.5, 3) ORDER BY id",
    "gpu_affinity_propagation": "SELECT * FROM gpu_affinity_propagation('{s}', device => 'cpu') ORDER BY id",
    "gpu_kmeans_fit": "SELECT * FROM gpu_kmeans_fit('{s}', 3, seed => 7, device => 'cpu')",
    "gpu_kmeans_elbow": "SELECT * FROM gpu_kmeans_elbow('{s}', 2, 3, seed => 7, device => 'cpu')",
    "gpu_kdistance": "SELECT * FROM gpu_kdistance('{s}', 3) ORDER BY rank",
    "gpu_silhouette": f"SELECT * FROM gpu_silhouette('{{s}}', '{LABELS}')",
    "gpu_cluster_centers": f"SELECT * FROM gpu_cluster_centers('{{s}}', '{LABELS}')",
    "gpu_kmeans_distributed, k-means||": "SELECT * FROM gpu_kmeans_distributed('{s}', 3, seed => 7)",
    "gpu_kmeans_distributed, random": "SELECT * FROM gpu_kmeans_distributed('{s}', 3, seed => 7, "
                                      "init => 'random')",
    "gpu_dbscan_distributed": "SELECT * FROM gpu_dbscan_distributed('{s}', 1.5, 3, partitions => 2) "
                              "ORDER BY id",
}
ENDINGS = {
    "';'": SRC + ";",
    "'; ' and a blank line": SRC + " ;  \n\n",
    "'-- comment'": SRC + " -- the points",
    "'; -- comment'": SRC + "; -- the points",
    "'/* comment */' and a newline": "/* the points */ " + SRC + "\n",
}
# the hint of gpu_dbscan for text ids
TEXT_IDS = "SELECT id::text AS id, f FROM pts"
TEXT_ID_CALLS = {
    "gpu_dbscan_distributed": f"SELECT * FROM gpu_dbscan_distributed('{TEXT_IDS}', 1.5, 3)",
    "gpu_kmeans_distributed": f"SELECT * FROM gpu_kmeans_distributed('{TEXT_IDS}', 3)",
}
# slow sources: each pass over them sleeps
SLOW = "SELECT id, f FROM pts, pg_sleep(0.2)"
DROP_CALLS = {
    "gpu_kmeans_distributed": f"SELECT iterations FROM gpu_kmeans_distributed('{SLOW}', 3, seed => 7, "
                              "max_iter => 2, tol => 0, init => 'random')",
    "gpu_dbscan_distributed": f"SELECT count(*) FROM gpu_dbscan_distributed('{SLOW}', 1.5, 3, "
                              "partitions => 2)",
}
HIDDEN = {"gpu_memory_free_bytes", "memory_available_bytes", "ap_max_rows_cpu",
          "ap_max_rows_gpu_float8", "ap_max_rows_gpu_float4"}


def result(conn, sql):
    try:
        return conn.execute(sql).fetchall()
    except psycopg.Error as e:
        return f"{e.sqlstate}: {e.diag.message_primary}"


def sources(conn):
    for form, sql in FORMS.items():
        plain = result(conn, sql.format(s=SRC))
        for ending, src in ENDINGS.items():
            got = result(conn, sql.format(s=src.replace("'", "''")))
            check(f"{form}: a source with {ending} as the plain one",
                  got == plain and not isinstance(plain, str), str(got)[:200])
    for form in ("gpu_dbscan", "gpu_dbscan_distributed", "gpu_kmeans_distributed, random"):
        got = result(conn, FORMS[form].format(s="SELECT id, f FROM pts; SELECT id, f FROM pts"))
        check(f"{form}: two statements refused (22023)", got.startswith("22023"), got)


def text_ids(conn):
    try:
        conn.execute(f"SELECT * FROM gpu_dbscan('{TEXT_IDS}', 1.5, 3)")
        want = None
    except psycopg.Error as e:
        want = (e.sqlstate, e.diag.message_primary, e.diag.message_hint)
    for form, sql in TEXT_ID_CALLS.items():
        try:
            conn.execute(sql)
            got = None
        except psycopg.Error as e:
            got = (e.sqlstate, e.diag.message_primary, e.diag.message_hint)
        check(f"{form}: text ids give gpu_dbscan's 42804 and hint",
              want is not None and want[0] == "42804" and got == want, got)


def drop_during(admin, form, sql):
    out = {}

    def call():
        with psycopg.connect("", dbname=DB, autocommit=True) as c:
            try:
                out["rows"] = c.execute(sql).fetchall()
            except psycopg.Error as e:
                out["error"] = f"{e.sqlstate}: {e.diag.message_primary}"
            out["call_end"] = time.monotonic()

    t = threading.Thread(target=call)
    t.start()
    time.sleep(0.3)
    with psycopg.connect("", dbname=DB, autocommit=True) as c:
        c.execute("SET lock_timeout = '30s'")
        try:
            c.execute("DROP EXTENSION gpuclust")
            dropped = None
        except psycopg.Error as e:
            dropped = f"{e.sqlstate}: {e.diag.message_primary}"
        drop_end = time.monotonic()
    t.join()
    check(f"{form}: DROP EXTENSION during the call succeeds", dropped is None, dropped)
    # the call's end and the DROP's, once it no longer waits, are close
    # (either may be seen first); without waiting, the DROP ends 0.3 s or
    # more before the call
    check(f"{form}: the call ends normally, DROP EXTENSION waiting for it",
          "rows" in out and drop_end >= out["call_end"] - 0.1,
          out.get("error") or f"DROP ended {out['call_end'] - drop_end:.2f} s before the call")
    admin.execute("CREATE EXTENSION IF NOT EXISTS gpuclust")


def info(admin):
    def values(conn):
        return dict(conn.execute("SELECT key, value FROM gpuclust_info()").fetchall())

    su = values(admin)
    admin.execute(f"GRANT pg_read_all_stats TO {ROLE}")
    with psycopg.connect("", dbname=DB, user=ROLE, autocommit=True) as c:
        stats = values(c)
    admin.execute(f"REVOKE pg_read_all_stats FROM {ROLE}")
    with psycopg.connect("", dbname=DB, user=ROLE, autocommit=True) as c:
        plain = values(c)
    check("gpuclust_info: the same keys for every role", set(su) == set(stats) == set(plain))
    check("gpuclust_info: free memory shown with pg_read_all_stats",
          all((stats[k] is None) == (su[k] is None) for k in HIDDEN),
          {k: stats[k] for k in HIDDEN})
    check("gpuclust_info: free memory hidden (NULL) without pg_read_all_stats",
          all(plain[k] is None for k in HIDDEN) and any(su[k] is not None for k in HIDDEN),
          {k: plain[k] for k in HIDDEN})
    same = [k for k in su if k not in HIDDEN and k != "gpu_worker_pid"]
    check("gpuclust_info: the other values alike without pg_read_all_stats",
          all((plain[k] is None) == (su[k] is None) for k in same),
          [k for k in same if (plain[k] is None) != (su[k] is None)])


def main():
    with psycopg.connect("", autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {DB}")
        admin.execute(f"DROP ROLE IF EXISTS {ROLE}")
        admin.execute(f"CREATE ROLE {ROLE} LOGIN")
        admin.execute(f"CREATE DATABASE {DB}")
        with psycopg.connect("", dbname=DB, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION gpuclust")
            conn.execute("CREATE TABLE pts AS SELECT i::bigint AS id, "
                         "ARRAY[(i % 7)::real, (i / 7)::real] AS f FROM generate_series(1, 60) i")
            sources(conn)
            text_ids(conn)
            for form, sql in DROP_CALLS.items():
                drop_during(conn, form, sql)
            info(conn)
        admin.execute(f"DROP DATABASE {DB}")
        admin.execute(f"DROP ROLE {ROLE}")
    return summary('faults_small')


if __name__ == "__main__":
    sys.exit(main())
