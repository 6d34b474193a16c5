#!/usr/bin/python3
"""bench_kmeans_step.py — the k-means aggregate (kmeans_step, through
gpu_kmeans_distributed) on the GPU against its CPU path and against
gpu_kmeans_fit, in one server (the GPU machine's, test/gpu/run_gpu_tests.sh
kagg).  A benchmark, not a test: prints, and fails only when two runs that
must give the same centres do not.

    python3 test/gpu/bench_kmeans_step.py [--rows 10000000] [--d 32]
        [--k 100] [--iters 5] [--workers 8] [--devices cpu,gpu]

Data: citus_bench.py's (--rows rows of --d float32 features, 100,000
distinct rows of Gaussian blobs, each repeated) in bench_local.  From the
same k initial centres, --iters Lloyd iterations (tol 0), timed as whole
statements:
  - gpu_kmeans_fit on the CPU and on the GPU: one backend reads every row
    once into a float32 matrix, then iterates on it;
  - gpu_kmeans_distributed with device 'cpu' and 'gpu', serial and with
    parallel query (--workers workers + the leader): one kmeans_step pass per
    iteration, plus one for the count and mean and one for the final
    inertia; each process buffers its rows and labels them a block at a
    time (the CPU's blocked kernel on its threads, or a GPU worker job);
  - a pass over the rows that only reads them (count(f)), the floor of any
    pass;
  - PyTorch's assignment of the same rows, resident on the GPU (argmin of
    torch.cdist), for the arithmetic's own time.
The device does not change the result: serially, 'cpu' and 'gpu' end at
the same centres bit for bit (checked); every run is within float32 steps
of the fit's (the order of the double sums; under parallel query, the
order the rows reach the workers).
"""
import argparse
import os
import re
import sys
import time

import numpy as np
import psycopg

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "bench"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "distributed"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "lib"))
from citus_bench import DISTINCT, make_local, patterns, timed  # noqa: E402  (the same rows)
import kmeans_distributed_test as kd  # noqa: E402  (centroids_literal, ulps)


def torch_assign(P, rows, C0, reps=5):
    """ms of one assignment of rows rows (P repeated) to C0 on the GPU, resident."""
    try:
        import torch
    except ImportError:
        return None
    X = torch.from_numpy(np.resize(P, (rows, P.shape[1]))).cuda()
    C = torch.from_numpy(C0).cuda()
    best = None
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for s in range(0, rows, 1 << 22):
            torch.cdist(X[s:s + (1 << 22)], C).argmin(dim=1)
        torch.cuda.synchronize()
        t = (time.perf_counter() - t0) * 1e3
        best = t if best is None else min(best, t)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--d", type=int, default=32)
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--devices", default="cpu,gpu", help="cpu,gpu; cpu alone where there is no GPU")
    a = ap.parse_args()
    devices = a.devices.split(",")
    P = patterns(a.d)
    C0 = P[np.random.default_rng(7).choice(DISTINCT, size=a.k, replace=False)]
    lit = kd.centroids_literal(C0)
    passes = a.iters + 2
    src = "SELECT id, f FROM bench_local"
    with psycopg.connect("", autocommit=True) as conn:
        cur = conn.cursor()
        t0 = time.perf_counter()
        cur.execute("CREATE EXTENSION IF NOT EXISTS gpuclust")
        cur.execute("DROP TABLE IF EXISTS bench_patterns, bench_local")
        make_local(cur, P, a.rows)
        cur.execute("VACUUM ANALYZE bench_local")
        mb = cur.execute("SELECT pg_total_relation_size('bench_local')").fetchone()[0] / 2**20
        print(f"{a.rows:,} rows x {a.d} features ({DISTINCT:,} distinct), k = {a.k}, {a.iters} "
              f"iterations from the same centres; bench_local {mb:,.0f} MB (made in "
              f"{time.perf_counter() - t0:.0f} s)", flush=True)
        fit_q = ("SELECT centroids, iterations FROM gpu_kmeans_fit(%s, %s, max_iter => %s, tol => 0, "
                 "init_centroids => %s::real[], device => %s)")
        dist_q = ("SELECT centroids, iterations FROM gpu_kmeans_distributed(%s, %s, max_iter => %s, tol => 0, "
                  "init_centroids => %s::real[], device => %s)")
        rows = []
        for dev in devices:
            t, (C, it) = timed(cur, fit_q, (src, a.k, a.iters, lit, dev))
            rows.append((f"gpu_kmeans_fit, {dev}", t, it, None, C))
            print(f"  {rows[-1][0]}: {t:.2f} s", flush=True)
        for par in (0, a.workers):
            cur.execute(f"SET max_parallel_workers_per_gather = {par}; SET parallel_setup_cost = 0; "
                        "SET parallel_tuple_cost = 0")
            if par:
                cur.execute(f"ALTER TABLE bench_local SET (parallel_workers = {par})")
            plan = "\n".join(r[0] for r in cur.execute(
                "EXPLAIN SELECT kmeans_step(f, NULL::real[], id) FROM bench_local").fetchall())
            w = re.findall(r"Workers Planned: (\d+)", plan)
            how = f"parallel query ({w[0] if w else 0} workers + leader)" if par else "serial"
            t, _ = timed(cur, "SELECT count(f) FROM bench_local")
            rows.append((f"read every row once (count(f)), {how}", t, None, t, None))
            print(f"  {rows[-1][0]}: {t:.2f} s", flush=True)
            for dev in devices:
                t, (C, it) = timed(cur, dist_q, (src, a.k, a.iters, lit, dev))
                rows.append((f"gpu_kmeans_distributed, {dev}, {how}", t, it, t / passes, C))
                print(f"  {rows[-1][0]}: {t:.2f} s", flush=True)
        ms_torch = torch_assign(P, a.rows, C0) if "gpu" in devices else None

    C_ref = np.array(rows[0][4], dtype=np.float32)
    print(f"\n| run | total | per pass ({passes} passes) | centroids vs gpu_kmeans_fit (cpu) |")
    print("| --- | --- | --- | --- |")
    for name, t, it, per, C in rows:
        steps = "" if C is None else \
            f"max {int(kd.ulps(np.array(C, dtype=np.float32), C_ref).max())} float32 steps"
        print(f"| {name} | {t:.2f} s | {'' if per is None else f'{per:.3f} s'} | {steps} |")
    if ms_torch is not None:
        print(f"| PyTorch on the GPU: one assignment (cdist + argmin), rows resident | "
              f"{ms_torch:.1f} ms | | |")
    bytes_pass = a.rows * a.d * 4
    print(f"\nper pass: {bytes_pass / 1e9:.2f} GB of features to label, {2.0 * a.rows * a.k * a.d / 1e9:.1f} "
          f"GFLOP (2 n k d); H100 and H200: PCIe 5 x16 about 50 GB/s host to device, FP32 about 60 TFLOP/s")
    serial = [C for name, t, it, per, C in rows
              if name.startswith("gpu_kmeans_distributed") and name.endswith("serial")]
    same = all(np.array_equal(np.array(serial[0], dtype=np.float32), np.array(C, dtype=np.float32))
               for C in serial[1:])
    print(f"gpu_kmeans_distributed, serial: cpu and gpu end at the same centres bit for bit: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
