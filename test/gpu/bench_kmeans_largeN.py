#!/usr/bin/env python3
"""bench_kmeans_largeN.py — flash-kmeans's kmeans_largeN (its streamed
k-means for data larger than the GPU: rows in host memory, copied to the GPU
in blocks every iteration) on the shape bench_kmeans_stream streams, for the
rows-per-second comparison of issue 13.  Needs a GPU, torch and the carried
.vendor/flash_kmeans (test/gpu/fetch_vendor.sh); GC_VENDOR_DIR overrides.

    bench_kmeans_largeN.py N D K ITERS

The rows are uniform in [0, 1) (uniform_, in place) in pinned host memory
when the system grants that much (kmeans_largeN copies from it; else in
pageable memory, which slows its copies, and the row says so), the initial centres the rows 0, N/K, 2N/K ... as bench_kmeans_stream
takes them.  Not the same rows as bench_kmeans_stream's (its generator is
not reproduced here: at 82 GB that alone would take minutes): a streamed
Lloyd iteration costs the upload of every row plus an assignment that
hardly depends on the values, so the rows-per-second of the two stand side
by side.  One untimed iteration first (Triton compiles its kernels), then
ITERS timed iterations (tol 0: all of them run).  Prints one table row.
"""
import os
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    if len(sys.argv) != 5:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    n, d, k, iters = (int(a) for a in sys.argv[1:])
    vendor = os.environ.get("GC_VENDOR_DIR", os.path.join(REPO, ".vendor"))
    if not os.path.isdir(os.path.join(vendor, "flash_kmeans")):
        print(f"| {n} x {d}, k = {k} | flash-kmeans kmeans_largeN: not carried "
              f"(no {vendor}/flash_kmeans; test/gpu/fetch_vendor.sh) |")
        return 0
    import torch
    from bench_kmeans import flash_on_path
    flash_on_path(vendor)
    from flash_kmeans.kmeans_large import kmeans_largeN

    t0 = time.time()
    try:
        x = torch.empty((n, d), dtype=torch.float32, pin_memory=True)
        where = "pinned rows"
    except Exception as e:   # noqa: BLE001  (page-locking that much can fail)
        print(f"pinned host memory for {n * d * 4 / 1e9:.1f} GB refused ({type(e).__name__}); "
              "pageable rows", file=sys.stderr)
        x = torch.empty((n, d), dtype=torch.float32)
        where = "pageable rows: pinning them was refused"
    step = 1 << 24
    for r in range(0, n, step):
        x[r:r + step].uniform_()
    made = time.time() - t0
    c0 = x[torch.arange(k, dtype=torch.int64) * (n // k)].clone()
    print(f"data: {n} x {d} float32 = {n * d * 4 / 1e9:.1f} GB, {where}, made in {made:.1f} s",
          file=sys.stderr)

    kmeans_largeN(x, k, max_iters=1, tol=0.0, init_centroids=c0.clone(), device="cuda:0")
    torch.cuda.synchronize()
    t0 = time.time()
    kmeans_largeN(x, k, max_iters=iters, tol=0.0, init_centroids=c0.clone(), device="cuda:0")
    torch.cuda.synchronize()
    ms = (time.time() - t0) * 1e3 / iters
    print(f"| {n} x {d}, k = {k}, {iters} iterations, flash-kmeans kmeans_largeN "
          f"({where}) | {ms:.0f} | {n / (ms / 1e3):.3g} | "
          f"{n * d * 4 / (ms / 1e3) / 1e9:.1f} | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
