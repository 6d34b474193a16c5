#!/usr/bin/python3
"""kmeans_distributed_test.py — k-means as a combinable aggregate under
parallel query equals the single-node k-means.

Run against a running server with the extension installed (libpq
environment variables), by test/run_tests.sh.

Data: 120,000 rows of 8 float32 features around 24 Gaussian blobs of
different spreads (numpy, fixed seed), plus 2,000 uniform rows, so that
many rows lie between clusters; k = 24 and k = 40.

For each k, from the same initial centres C0 (k rows of the table):
  - gpu_kmeans_distributed with parallel query forced on
    (parallel_setup_cost = 0, parallel_tuple_cost = 0,
    min_parallel_table_scan_size = 0, max_parallel_workers_per_gather = 4),
    with auto_explain logging the driver's own nested queries: each of them
    must be a Gather over a Partial Aggregate with workers launched;
  - the same without parallel query (max_parallel_workers_per_gather = 0);
  - gpu_kmeans_fit(init_centroids => C0, device => 'cpu'), the single-node
    k-means.
The three must agree within the documented tolerance: the same iteration
count and convergence, every label equal (kmeans_assign over each one's
centroids, on every row), the centroids at most one float32 step apart
(README: "k-means over partitioned / distributed tables"), and the inertia
within 1e-9 relative.  Random seeding (init => 'random', seed) over a source
in id order is checked the same way against gpu_kmeans_fit(init =>
'random', same seed), and so is a start with three centres far from every
row, whose empty clusters are re-seeded as gpu_kmeans re-seeds them.
k-means|| seeding (k = 40, ids the rows' 0-based positions): the parallel
run equals the serial run and gpu_kmeans_fit(init => 'k-means||') within
the tolerance (its draws are keyed by row id, the core's by position), its
sampling queries run in workers, and its inertia is at most 1.05 x
gpu_kmeans_fit's k-means++.

--device DEV (default: none, gpuclust.device) is passed to
gpu_kmeans_distributed (device => DEV) and to the kmeans_step calls made
here (kmeans_step(f, C, id, DEV)), so that the suite runs on the GPU
(--device gpu on a machine with one); every check holds on any device, and
the device's results are checked equal, bit for bit, to device 'cpu''s
(one kmeans_step over every row from C0, and the serial driver: the
labels are kmeans_assign's on every device and the sums are added in the
rows' order).

Prints PASS/FAIL per check and "N passed, N failed"; exits 1 on any failure.
"""
import argparse
import os
import re
import sys
import time

import numpy as np
import psycopg

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from notices import nested_plans  # noqa: E402
from report import check, info, summary  # noqa: E402


TABLE = "gc_kd_rows"
N_BLOB, N_UNIFORM, D, BLOBS = 120_000, 2_000, 8, 24
PARALLEL = ("SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0; "
            "SET min_parallel_table_scan_size = 0; SET max_parallel_workers_per_gather = 4")
SERIAL = "SET max_parallel_workers_per_gather = 0"
DEVICE = None   # --device: gpu_kmeans_distributed's and kmeans_step's device


def dev_arg():
    """kmeans_step's device argument, when one is given, for the SQL."""
    return "" if DEVICE is None else ", " + "'" + DEVICE.replace("'", "''") + "'"

def make_rows():
    rng = np.random.default_rng(18)
    centres = rng.uniform(-50, 50, size=(BLOBS, D))
    spread = rng.uniform(1.0, 6.0, size=BLOBS)
    which = rng.integers(0, BLOBS, size=N_BLOB)
    X = centres[which] + rng.normal(size=(N_BLOB, D)) * spread[which, None]
    U = rng.uniform(-60, 60, size=(N_UNIFORM, D))
    return np.vstack([X, U]).astype(np.float32)


def load(cur, X):
    cur.execute(f"DROP TABLE IF EXISTS {TABLE}")
    cur.execute(f"CREATE TABLE {TABLE} (id int PRIMARY KEY, f real[])")
    with cur.copy(f"COPY {TABLE} (id, f) FROM STDIN") as cp:
        for i, row in enumerate(X):
            cp.write_row((i + 1, "{" + ",".join(repr(float(v)) for v in row) + "}"))
    cur.execute(f"ANALYZE {TABLE}")


def centroids_literal(C):
    return "{" + ",".join("{" + ",".join(repr(float(v)) for v in r) + "}" for r in C) + "}"


def ulps(a, b):
    """float32 steps between a and b, elementwise (finite values)."""
    def key(x):
        i = np.asarray(x, dtype=np.float32).view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7fffffff), i)
    return np.abs(key(a) - key(b))


def model(cur, sql, params):
    cur.execute(sql, params)
    c, inertia, iters, conv, n, d = cur.fetchone()
    return {"C": np.array(c, dtype=np.float32), "inertia": inertia, "iterations": iters,
            "converged": conv, "n": n, "d": d}


def labels(cur, C):
    cur.execute(f"SELECT kmeans_assign(f, %s::real[]) FROM {TABLE} ORDER BY id",
                (centroids_literal(C),))
    return np.array([r[0] for r in cur.fetchall()], dtype=np.int32)


def same_model(name, a, b):
    """a and b the same model, bit for bit."""
    check(f"{name}: the same model, bit for bit",
          a["C"].tobytes() == b["C"].tobytes() and a["inertia"] == b["inertia"] and
          a["iterations"] == b["iterations"] and a["converged"] == b["converged"] and
          a["n"] == b["n"] and a["d"] == b["d"],
          f"max {int(ulps(a['C'], b['C']).max()) if a['C'].shape == b['C'].shape else '?'} steps, "
          f"inertia {a['inertia']!r} / {b['inertia']!r}, "
          f"{a['iterations']} / {b['iterations']} iterations")


def compare(cur, name, a, b):
    la, lb = labels(cur, a["C"]), labels(cur, b["C"])
    u = int(ulps(a["C"], b["C"]).max())
    rel = abs(a["inertia"] / b["inertia"] - 1)
    check(f"{name}: same iterations and convergence",
          a["iterations"] == b["iterations"] and a["converged"] == b["converged"],
          f"{a['iterations']} / {b['iterations']} iterations, converged {a['converged']} / {b['converged']}")
    check(f"{name}: every label equal", int((la != lb).sum()) == 0,
          f"{int((la != lb).sum())} of {len(la)} differ")
    check(f"{name}: centroids at most 1 float32 step apart", u <= 1, f"max {u} steps")
    check(f"{name}: inertia within 1e-9", rel <= 1e-9, f"relative difference {rel:.2e}")


def main():
    global DEVICE
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default=None,
                    help="gpu_kmeans_distributed's and kmeans_step's device "
                         "(auto, cpu, gpu; default none: gpuclust.device)")
    DEVICE = ap.parse_args().device
    X = make_rows()
    with psycopg.connect("", autocommit=True) as conn:
        cur = conn.cursor()
        cur.execute("SET client_min_messages = warning")
        cur.execute("CREATE EXTENSION IF NOT EXISTS gpuclust")
        cur.execute("RESET client_min_messages")
        load(cur, X)
        info(f"{len(X)} rows of {D} features in {TABLE}; device {DEVICE}")
        source = f"SELECT id, f FROM {TABLE}"

        # the plan of the driver's query: Gather over a Partial Aggregate
        cur.execute(PARALLEL)
        cur.execute("EXPLAIN (ANALYZE, COSTS OFF, FORMAT TEXT) "
                    f"SELECT kmeans_step(s.f, NULL::real[], s.id{dev_arg()}) FROM ({source}) AS s(id, f)")
        plan = "\n".join(r[0] for r in cur.fetchall())
        launched = [int(m) for m in re.findall(r"Workers Launched: (\d+)", plan)]
        check("EXPLAIN: Finalize Aggregate over Gather over Partial Aggregate, workers launched",
              "Finalize Aggregate" in plan and "Gather" in plan and "Partial Aggregate" in plan
              and launched and max(launched) > 0, f"workers launched {launched}")

        rng = np.random.default_rng(7)
        for k in (24, 40):
            C0 = X[rng.choice(len(X), size=k, replace=False)]
            lit = centroids_literal(C0)
            q = ("SELECT * FROM gpu_kmeans_distributed(%s, %s, tol => 1e-6, "
                 "init_centroids => %s::real[], device => %s::text)")
            cur.execute(PARALLEL)
            t0 = time.perf_counter()
            par, plans = nested_plans(conn, lambda: model(cur, q, (source, k, lit, DEVICE)))
            plans = [p for p in plans if "kmeans_step(" in p]
            t_par = time.perf_counter() - t0
            workers = [int(m) for p in plans for m in re.findall(r"Workers Launched: (\d+)", p)]
            check(f"k = {k}: every query of the parallel driver ran a Partial Aggregate in workers",
                  len(plans) >= par["iterations"] and
                  all("Partial Aggregate" in p for p in plans) and
                  len(workers) == len(plans) and min(workers) > 0,
                  f"{len(plans)} queries, workers launched {sorted(set(workers))}")
            cur.execute(SERIAL)
            t0 = time.perf_counter()
            ser = model(cur, q, (source, k, lit, DEVICE))
            t_ser = time.perf_counter() - t0
            t0 = time.perf_counter()
            fit = model(cur, "SELECT * FROM gpu_kmeans_fit(%s, %s, tol => 1e-6, "
                        "init_centroids => %s::real[], device => 'cpu')", (source, k, lit))
            t_fit = time.perf_counter() - t0
            info(f"k = {k}: {par['iterations']} iterations; parallel {t_par:.2f} s, "
                 f"serial {t_ser:.2f} s, gpu_kmeans_fit {t_fit:.2f} s")
            compare(cur, f"k = {k}, parallel vs gpu_kmeans_fit", par, fit)
            compare(cur, f"k = {k}, parallel vs not parallel", par, ser)
            check(f"k = {k}: n and d", par["n"] == len(X) and par["d"] == D,
                  f"n {par['n']}, d {par['d']}")
            # the device's results are device 'cpu''s, bit for bit (serial:
            # the rows in one order)
            same_model(f"k = {k}, serial, device {DEVICE} vs device 'cpu'", ser,
                       model(cur, q, (source, k, lit, "cpu")))
            cur.execute(f"SELECT (s).centroids, (s).counts, (s).inertia, (s).shift, (s).n, "
                        f"(s).members, (s).cost, (s).reseeded FROM (SELECT "
                        f"kmeans_step(f, %s::real[], id{dev_arg()}) AS s FROM {TABLE}) q "
                        f"UNION ALL SELECT (s).centroids, (s).counts, (s).inertia, (s).shift, "
                        f"(s).n, (s).members, (s).cost, (s).reseeded FROM (SELECT "
                        f"kmeans_step(f, %s::real[], id, 'cpu') AS s FROM {TABLE}) q",
                        (lit, lit))
            a, b = cur.fetchall()
            check(f"k = {k}: kmeans_step over every row, device {DEVICE} vs device 'cpu', "
                  "every field bit for bit", a == b and a[4] == len(X),
                  f"counts {a[1][:4]}... / {b[1][:4]}..., inertia {a[2]!r} / {b[2]!r}")

        # empty clusters: three centres far from every row, re-seeded with the
        # farthest rows (ties: lowest position, here the lowest id)
        C0 = X[rng.choice(len(X), size=20, replace=False)].copy()
        C0[[3, 9, 15]] = np.float32(500.0)
        C0[9] = -500
        ordered = f"SELECT id, f FROM {TABLE} ORDER BY id"
        q = ("SELECT * FROM gpu_kmeans_distributed(%s, 20, tol => 1e-6, "
             "init_centroids => %s::real[], device => %s::text)")
        cur.execute(PARALLEL)
        par = model(cur, q, (ordered, centroids_literal(C0), DEVICE))
        fit = model(cur, "SELECT * FROM gpu_kmeans_fit(%s, 20, tol => 1e-6, "
                    "init_centroids => %s::real[], device => 'cpu')", (ordered, centroids_literal(C0)))
        compare(cur, "3 empty clusters re-seeded, parallel vs gpu_kmeans_fit", par, fit)

        # random seeding: the rows gpu_kmeans's random init draws
        par = model(cur, "SELECT * FROM gpu_kmeans_distributed(%s, 30, tol => 1e-6, "
                    "init => 'random', seed => 11, device => %s::text)", (ordered, DEVICE))
        fit = model(cur, "SELECT * FROM gpu_kmeans_fit(%s, 30, tol => 1e-6, init => 'random', "
                    "seed => 11, device => 'cpu')", (ordered,))
        compare(cur, "random seeding, parallel vs gpu_kmeans_fit", par, fit)

        # k-means|| (the default): its sampling is keyed by row id, so the
        # seeds, and then the fit up to the tolerance, are those of a serial
        # run; with ids that are the 0-based positions, those of gpu_kmeans's
        # k-means|| too
        source = f"SELECT id - 1, f FROM {TABLE} ORDER BY id"
        q = ("SELECT * FROM gpu_kmeans_distributed(%s, 40, tol => 1e-6, seed => 5, "
             "device => %s::text)")
        cur.execute(PARALLEL)
        t0 = time.perf_counter()
        par, plans = nested_plans(conn, lambda: model(cur, q, (source, DEVICE)))
        t_par = time.perf_counter() - t0
        samples = [p for p in plans if "kmeans_parallel_sample" in p]
        cur.execute(SERIAL)
        t0 = time.perf_counter()
        ser = model(cur, q, (source, DEVICE))
        t_ser = time.perf_counter() - t0
        pp = model(cur, "SELECT * FROM gpu_kmeans_fit(%s, 40, tol => 1e-6, seed => 5, "
                   "device => 'cpu')", (source,))
        kp = model(cur, "SELECT * FROM gpu_kmeans_fit(%s, 40, tol => 1e-6, seed => 5, "
                   "init => 'k-means||', device => 'cpu')", (source,))
        info(f"k-means|| k = 40: {par['iterations']} iterations, parallel {t_par:.2f} s, "
             f"serial {t_ser:.2f} s; inertia {par['inertia']:.6g}, gpu_kmeans_fit k-means++ "
             f"{pp['inertia']:.6g} ({pp['iterations']} iterations)")
        check("k-means||: sampling rounds ran in parallel workers",
              len(samples) >= 1 and all("Workers Launched: 0" not in p and "Workers Launched" in p
                                        for p in samples), f"{len(samples)} sampling queries")
        compare(cur, "k-means||, parallel vs not parallel", par, ser)
        same_model(f"k-means||, serial, device {DEVICE} vs device 'cpu'", ser,
                   model(cur, q, (source, "cpu")))
        compare(cur, "k-means||, parallel vs gpu_kmeans_fit(init => 'k-means||')", par, kp)
        check("k-means||: inertia at most 1.05 x gpu_kmeans_fit's k-means++",
              par["inertia"] <= 1.05 * pp["inertia"], f"ratio {par['inertia'] / pp['inertia']:.4f}")
        cur.execute(f"DROP TABLE {TABLE}")

    return summary()


if __name__ == "__main__":
    sys.exit(main())
