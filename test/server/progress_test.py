#!/usr/bin/python3
"""gpuclust_progress shows a running call from a second session.

Against a server with gpuclust in shared_preload_libraries (test/lib/pg_server.sh
preloads it).  One session runs a long k-means (its source computes 300,000
8-d rows, so that ingest takes a while too), then a DBSCAN and an affinity
propagation, then the tools (gpu_kdistance, gpu_silhouette whose labels
query runs gpu_kmeans, gpu_kmeans_elbow); a second session polls the view
every 10 ms.  Checks:
  - the call's row appears with its pid, function, device and rows, and its
    phase advances: ingest, then iterate with a growing iteration of
    max_iter and an inertia that does not rise, DBSCAN's points of its rows,
    affinity propagation's iterations; gpu_kdistance's index, then its
    queries' points done of total, growing; gpu_silhouette's rows scored of
    its sample, growing, and the call inside its labels query not shown
    apart from it; gpu_kmeans_elbow's k-means iterations under its name;
  - the row is gone when the call returns, and when it fails;
  - a role without pg_read_all_stats sees its own calls only; with it, all.
Prints PASS/FAIL per check and "N passed, N failed"; exits 1 on a failure.
"""
import os
import sys
import threading
import time

import psycopg

LIB = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib")
sys.path.insert(0, LIB)
from report import check, summary  # noqa: E402

N = 300000
KMEANS = (f"SELECT count(*) FROM gpu_kmeans($$SELECT i, ARRAY[(i % 97) * 1.0, (i % 89) * 1.0,"
          f" (i % 83) * 1.0, (i % 79) * 1.0, sin(i), cos(i), (i % 7) * 1.0, (i % 11) * 1.0]::real[]"
          f" FROM generate_series(1, {N}) i$$, 200, max_iter => 60, tol => 0, seed => 1,"
          f" device => 'cpu')")
DBSCAN = ("SELECT count(*) FROM gpu_dbscan('SELECT i, ARRAY[(i::bigint * 7919 % 100003) / 100003.0 * 30,"
          " (i::bigint * 104729 % 99991) / 99991.0 * 30, (i % 1000) / 1000.0]::real[]"
          " FROM generate_series(1, 400000) i', 0.05, 5, device => 'cpu')")
AP = ("SELECT count(*) FROM gpu_affinity_propagation('SELECT i, ARRAY[sin(i), cos(i * 1.3)]"
      " FROM generate_series(1, 3000) i', max_iter => 100, convergence_iter => 100)")

# 8-d rows computed by the source (the k-means one's) for the tools
ROWS8 = ("SELECT i, ARRAY[(i % 97) * 1.0, (i % 89) * 1.0, (i % 83) * 1.0, (i % 79) * 1.0,"
         " sin(i), cos(i), (i % 7) * 1.0, (i % 11) * 1.0]::real[] FROM generate_series(1, {n}) i")
KDIST = (f"SELECT count(*) FROM gpu_kdistance($${ROWS8.format(n=200000)}$$, 20, quantiles => 10,"
         f" device => 'cpu')")
SIL_SAMPLE = 12000
SILHOUETTE = (f"SELECT silhouette FROM gpu_silhouette($${ROWS8.format(n=40000)}$$,"
              f" $$SELECT id, cluster_id FROM gpu_kmeans('{ROWS8.format(n=40000)}', 4, seed => 1,"
              f" device => 'cpu')$$, sample_size => {SIL_SAMPLE}, device => 'cpu')")
ELBOW = (f"SELECT count(*) FROM gpu_kmeans_elbow($${ROWS8.format(n=100000)}$$, 2, 5, max_iter => 25,"
         f" tol => 0, device => 'cpu')")


def watch(sql, role=None):
    """Run sql in one session while another polls the view; (pid, rows seen)."""
    runner = psycopg.connect("", autocommit=True)
    pid = runner.info.backend_pid
    poller = psycopg.connect("", autocommit=True)
    if role:
        poller.execute(f"SET ROLE {role}")
    seen = []
    err = []

    def run():
        try:
            runner.execute(sql)
        except psycopg.Error as e:
            err.append(e)

    t = threading.Thread(target=run)
    t.start()
    while t.is_alive():
        for r in poller.execute("SELECT algorithm, device, phase, iteration, max_iter, rows,"
                                " points_done, points_total, inertia, elapsed_ms, pid"
                                " FROM gpuclust_progress").fetchall():
            if r[10] == pid:
                seen.append(r)
        time.sleep(0.01)
    t.join()
    after = poller.execute("SELECT count(*) FROM gpuclust_progress WHERE pid = %s",
                           (pid,)).fetchone()[0]
    runner.close()
    poller.close()
    if err:
        raise err[0]
    return seen, after


def main():
    with psycopg.connect("", autocommit=True) as c:
        # this build's objects (an older one may have created the extension)
        c.execute("DROP EXTENSION IF EXISTS gpuclust CASCADE")
        c.execute("CREATE EXTENSION gpuclust")
        preloaded = c.execute("SELECT 'gpuclust' = ANY(string_to_array(current_setting("
                              "'shared_preload_libraries'), ','))").fetchone()[0]
        if not check("gpuclust is preloaded", preloaded):
            return summary()
        c.execute("DROP ROLE IF EXISTS gc_prog_user")
        c.execute("CREATE ROLE gc_prog_user")

    seen, after = watch(KMEANS)
    phases = [r[2] for r in seen]
    check("k-means: the call is shown while it runs", len(seen) > 0, f"{len(seen)} polls saw it")
    check("k-means: function, and device and rows once chosen",
          all(r[0] == "gpu_kmeans" for r in seen) and
          all(r[1] in (None, "cpu") for r in seen) and
          any(r[1] == "cpu" and r[5] == N for r in seen))
    check("k-means: ingest, then iterate", "ingest" in phases and "iterate" in phases and
          phases.index("ingest") < phases.index("iterate"), f"phases {sorted(set(phases))}")
    its = [r[3] for r in seen if r[2] == "iterate"]
    check("k-means: the iteration grows, of max_iter 60",
          len(set(its)) >= 3 and its == sorted(its) and
          all(r[4] == 60 for r in seen if r[2] == "iterate"), f"{len(set(its))} iterations seen, {min(its, default=0)} to {max(its, default=0)}")
    inertia = [r[8] for r in seen if r[2] == "iterate" and r[8] is not None]
    check("k-means: the inertia is reported and does not rise",
          len(inertia) >= 2 and all(b <= a * (1 + 1e-9) for a, b in zip(inertia, inertia[1:])),
          f"{len(inertia)} values, first {inertia[0] if inertia else None},"
          f" last {inertia[-1] if inertia else None}")
    el = [r[9] for r in seen]
    check("k-means: elapsed time grows", el == sorted(el) and el[-1] > 0)
    check("k-means: gone when the call returns", after == 0)

    seen, after = watch(DBSCAN)
    check("DBSCAN: its points of its rows", any(r[0] == "gpu_dbscan" and r[7] == 400000 and
                                                 r[2] in ("index", "label") for r in seen),
          f"phases {sorted(set(r[2] for r in seen))}")
    check("DBSCAN: gone when the call returns", after == 0)

    seen, after = watch(AP)
    its = [r[3] for r in seen if r[2] == "iterate"]
    check("affinity propagation: its iterations of max_iter 100",
          len(its) > 0 and its == sorted(its) and all(r[4] == 100 for r in seen if r[2] == "iterate"),
          f"iterations seen {sorted(set(its))[:5]} ...")

    # the tools: k-distances, silhouette (with a k-means inside), elbow
    seen, after = watch(KDIST)
    phases = [r[2] for r in seen]
    done = [r[6] for r in seen if r[2] == "iterate"]
    check("gpu_kdistance: index, then its queries' points done of total, growing",
          all(r[0] == "gpu_kdistance" for r in seen) and "index" in phases and "iterate" in phases
          and phases.index("index") < phases.index("iterate") and len(set(done)) >= 3
          and done == sorted(done) and all(r[7] == 200000 for r in seen if r[2] == "iterate"),
          f"phases {sorted(set(phases))}, {len(set(done))} counts seen, up to {max(done, default=0)}")
    check("gpu_kdistance: gone when the call returns", after == 0)

    seen, after = watch(SILHOUETTE)
    done = [r[6] for r in seen if r[2] == "iterate"]
    check("gpu_silhouette: its rows scored of the sample, growing",
          len(set(done)) >= 3 and done == sorted(done) and
          all(r[7] == SIL_SAMPLE for r in seen if r[2] == "iterate"),
          f"{len(set(done))} counts seen, up to {max(done, default=0)}")
    check("gpu_silhouette: the k-means of its labels query is not shown apart",
          len(seen) > 0 and all(r[0] == "gpu_silhouette" for r in seen),
          f"functions {sorted(set(r[0] for r in seen))}")
    check("gpu_silhouette: gone when the call returns", after == 0)

    seen, after = watch(ELBOW)
    check("gpu_kmeans_elbow: its k-means iterations of max_iter 25, under its name",
          len(seen) > 0 and all(r[0] == "gpu_kmeans_elbow" for r in seen) and
          any(r[2] == "iterate" and r[4] == 25 and r[3] >= 1 for r in seen),
          f"phases {sorted(set(r[2] for r in seen))}")
    check("gpu_kmeans_elbow: gone when the call returns", after == 0)

    # a failed call leaves nothing behind
    with psycopg.connect("", autocommit=True) as c:
        try:
            c.execute("SELECT * FROM gpu_kmeans('SELECT 1, ARRAY[1.0]', 5)")
        except psycopg.Error:
            pass
        left = c.execute("SELECT count(*) FROM gpuclust_progress WHERE pid = pg_backend_pid()"
                         ).fetchone()[0]
        check("a call that fails leaves no row", left == 0)

    # other roles' calls: hidden without pg_read_all_stats
    seen, _ = watch(KMEANS.replace("max_iter => 60", "max_iter => 15"), role="gc_prog_user")
    check("a role without pg_read_all_stats does not see others' calls", len(seen) == 0,
          f"{len(seen)} rows seen")
    with psycopg.connect("", autocommit=True) as c:
        c.execute("GRANT pg_read_all_stats TO gc_prog_user")
    seen, _ = watch(KMEANS.replace("max_iter => 60", "max_iter => 15"), role="gc_prog_user")
    check("with pg_read_all_stats it does", len(seen) > 0, f"{len(seen)} rows seen")
    with psycopg.connect("", autocommit=True) as c:
        c.execute("DROP ROLE gc_prog_user")

    return summary()


if __name__ == "__main__":
    sys.exit(main())
