#!/usr/bin/env python3
"""bench_kmeans_features.py — the peers of bench_kmeans_features.c on the
rows it wrote (bkf_X.f32, bkf_w.f64, bkf_C0.f32 in DIR): scikit-learn's
KMeans (all CPU cores) with sample_weight, and on the unit rows (it has no
spherical k-means: the same work, centres left unnormalized), and a PyTorch
Lloyd on the GPU (weighted sums by index_add_, unit centres under cosine),
from the same given centres for ITERS iterations.  Prints ms a fit and an
iteration.

  bench_kmeans_features.py DIR N D K ITERS
"""
import sys
import time

import numpy as np


def main():
    path, n, d, k, iters = sys.argv[1], *map(int, sys.argv[2:6])
    X = np.fromfile(f"{path}/bkf_X.f32", dtype=np.float32).reshape(n, d)
    w = np.fromfile(f"{path}/bkf_w.f64", dtype=np.float64)
    C0 = np.fromfile(f"{path}/bkf_C0.f32", dtype=np.float32).reshape(k, d)
    U = (X / np.linalg.norm(X.astype(np.float64), axis=1, keepdims=True)).astype(np.float32)
    U0 = (C0 / np.linalg.norm(C0.astype(np.float64), axis=1, keepdims=True)).astype(np.float32)
    try:
        import sklearn
        from sklearn.cluster import KMeans
        for name, rows, c0, sw in (("weighted", X, C0, w), ("weighted cosine (unit rows)", U, U0, w)):
            km = KMeans(n_clusters=k, init=c0, n_init=1, max_iter=iters, tol=0.0, algorithm="lloyd")
            km.fit(rows[:20000], sample_weight=sw[:20000])      # warm: the process's first fit
            t = time.perf_counter()
            km.fit(rows, sample_weight=sw)
            ms = (time.perf_counter() - t) * 1e3
            print(f"sklearn {sklearn.__version__} {name}: {ms:.1f} ms, {km.n_iter_} iterations, "
                  f"{ms / km.n_iter_:.2f} ms an iteration", flush=True)
    except ImportError as e:
        print(f"scikit-learn: {e}")
    try:
        import torch
        dev = torch.device("cuda")
        Xt, Ut = torch.from_numpy(X).to(dev), torch.from_numpy(U).to(dev)
        wt = torch.from_numpy(w).to(dev)
        for name, rows, c0, unit in (("weighted", Xt, C0, False), ("weighted cosine", Ut, U0, True)):
            for rep in range(2):                                  # the first warms up
                C = torch.from_numpy(c0).to(dev)
                torch.cuda.synchronize()
                t = time.perf_counter()
                for _ in range(iters):
                    dist = (rows * rows).sum(1, keepdim=True) - 2 * rows @ C.T + (C * C).sum(1)
                    lab = dist.argmin(1)
                    s = torch.zeros(k, d, dtype=torch.float64, device=dev)
                    s.index_add_(0, lab, rows.double() * wt[:, None])
                    sw = torch.zeros(k, dtype=torch.float64, device=dev).index_add_(0, lab, wt)
                    Cn = torch.where(sw[:, None] > 0, s / sw.clamp_min(1e-300)[:, None], C.double())
                    if unit:
                        Cn = Cn / Cn.norm(dim=1, keepdim=True)
                    C = Cn.float()
                torch.cuda.synchronize()
                ms = (time.perf_counter() - t) * 1e3
            print(f"pytorch {torch.__version__} {name}: {ms:.1f} ms, {iters} iterations, "
                  f"{ms / iters:.3f} ms an iteration", flush=True)
    except Exception as e:      # no torch, or no CUDA
        print(f"pytorch: {e}")


if __name__ == "__main__":
    main()
