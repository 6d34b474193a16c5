#!/usr/bin/python3
"""sk_runner.py — one scikit-learn workload, timed; prints one JSON line.

Run by test/bench/bench.py in its own process, so that the OpenBLAS settings
of the environment can be dropped for scikit-learn alone.

    sk_runner.py dbscan FILE DIM EPS MIN_PTS REPEAT [N_JOBS]
    sk_runner.py lloyd  FILE DIM K MAX_ITER SEED REPEAT
    sk_runner.py kmeanspp FILE DIM K REPEAT
"""
import json
import sys
import time

import numpy as np


def load(path, dim):
    return np.fromfile(path, dtype=np.float32).reshape(-1, int(dim))


def main(argv):
    what = argv[1]
    if what == "dbscan":
        from sklearn.cluster import DBSCAN
        _, _, path, dim, eps, min_pts, repeat = argv[:7]
        n_jobs = int(argv[7]) if len(argv) > 7 else 2
        X = load(path, dim)
        times = []
        for _ in range(int(repeat)):
            t0 = time.perf_counter()
            db = DBSCAN(eps=float(eps), min_samples=int(min_pts), n_jobs=n_jobs).fit(X)
            times.append(time.perf_counter() - t0)
        lab = db.labels_
        print(json.dumps({"n": len(X), "ms": min(times) * 1e3,
                          "ms_all": [t * 1e3 for t in times],
                          "clusters": int(lab.max() + 1), "noise": int((lab < 0).sum()),
                          "core": int(len(db.core_sample_indices_))}))
    elif what == "lloyd":
        from sklearn.cluster import KMeans
        _, _, path, dim, k, max_iter, seed, repeat = argv[:8]
        X = load(path, dim)
        rng = np.random.default_rng(int(seed))
        init = X[rng.choice(len(X), int(k), replace=False)]
        best = None
        for _ in range(int(repeat)):
            t0 = time.perf_counter()
            km = KMeans(n_clusters=int(k), init=init, n_init=1, max_iter=int(max_iter),
                        tol=0.0, algorithm="lloyd", random_state=0).fit(X)
            t = time.perf_counter() - t0
            per = t / km.n_iter_
            if best is None or per < best["ms_per_iter"] / 1e3:
                best = {"n": len(X), "k": int(k), "ms": t * 1e3, "iterations": int(km.n_iter_),
                        "ms_per_iter": per * 1e3, "inertia": float(km.inertia_)}
        print(json.dumps(best))
    elif what == "kmeanspp":
        from sklearn.cluster import kmeans_plusplus
        _, _, path, dim, k, repeat = argv[:6]
        X = load(path, dim)
        times = []
        for r in range(int(repeat)):
            t0 = time.perf_counter()
            kmeans_plusplus(X, int(k), random_state=r)
            times.append(time.perf_counter() - t0)
        print(json.dumps({"n": len(X), "k": int(k), "ms": min(times) * 1e3,
                          "ms_all": [t * 1e3 for t in times]}))
    else:
        raise SystemExit(f"unknown workload {what}")


if __name__ == "__main__":
    main(sys.argv)
