#!/usr/bin/env python3
"""bench_ap_sklearn.py — scikit-learn's AffinityPropagation, time per
iteration, on this machine's CPUs: for bench_ap_gpu's comparison.

Per iteration = (fit with max_iter=b - fit with max_iter=a) / (b - a), both
with a given preference (no median) and convergence_iter = max_iter (no
early stop), so the similarities and labelling cancel out; an untimed fit
(max_iter=1) on the same data first, so that the first timed fit does not
carry the process's start-up (which made 5k read 0.033 s an iteration).
float64, as scikit-learn computes.  Usage: bench_ap_sklearn.py [n ...]
(default 5000 10000 20000).
"""
import os
import sys
import time
import warnings

import numpy as np
import sklearn
from sklearn.cluster import AffinityPropagation
from sklearn.exceptions import ConvergenceWarning


def fit_time(X, iters):
    ap = AffinityPropagation(damping=0.5, preference=-50.0, max_iter=iters,
                             convergence_iter=iters, random_state=0)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ap.fit(X)
    return time.perf_counter() - t0


def main():
    ns = [int(a) for a in sys.argv[1:]] or [5000, 10000, 20000]
    rng = np.random.default_rng(0)
    print(f"scikit-learn {sklearn.__version__}, numpy {np.__version__}, "
          f"{os.cpu_count()} CPUs")
    print(f"  {'n':>7}  {'s/iter':>9}  {'fit(2) s':>9}  {'fit(6) s':>9}")
    for n in ns:
        centres = rng.uniform(-50, 50, size=(50, 2))
        X = centres[rng.integers(0, 50, n)] + rng.uniform(-1, 1, size=(n, 2))
        a, b = 2, 6
        fit_time(X, 1)
        ta = fit_time(X, a)
        tb = fit_time(X, b)
        print(f"  {n:7d}  {(tb - ta) / (b - a):9.4f}  {ta:9.2f}  {tb:9.2f}",
              flush=True)


if __name__ == "__main__":
    main()
