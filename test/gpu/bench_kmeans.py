#!/usr/bin/env python3
"""Baselines for bench_kmeans.c, on the very same data and initial centres.

    bench_kmeans.py RESULTS_FILE [--vendor DIR]

The data are bench_kmeans.c's, bit for bit: make_blobs (a splitmix64
generator from state 12345, run on through the three workloads in order)
and, for FAISS's workload, uniform [0,1) floats from state FAISS_SEED; the
initial centres are rows 0, n/k, 2n/k ... of X.  A fingerprint of each
data set (the XOR of X's and of C0's float bits) goes to RESULTS_FILE so
that bench_kmeans.c can confirm it timed the same thing.

Per workload, timed with CUDA events after a warm-up:
  torch    the PyTorch Lloyd iteration (||x||^2 - 2 x.c^T + ||c||^2, argmin,
           index_add_, bincount, one scalar read-back), float32, TF32 off;
           rows in chunks where the n x k distance matrix would pass 6 GB
  flash32  flash-kmeans (Triton, exact Lloyd) batch_kmeans_Euclid on float32
           input (Triton's tl.dot on float32 uses TF32), fixed iterations
           (tol = -1), from C0: (time of 2 + N iterations - time of 2) / N
  flash16  the same on float16 input and centres
FAISS's workload (1M x 256, k = 20000): flash32_fit / flash16_fit, one call
of 25 iterations from C0 (data already on the GPU); flash32 / flash16 are
that / 25; torch: a few chunked iterations.

flash-kmeans is never in the repository: test/gpu/fetch_vendor.sh unpacks
it into .vendor/flash_kmeans, which is carried to the GPU machine; without
it the flash columns say "not carried".

RESULTS_FILE lines, written as each number is measured (a run cut short
keeps what it has):  NAME N D K VALUE [NOTE...]
  data  N D K 0xXXXXXXXXYYYYYYYY   XOR of X's bits (high), of C0's (low)
  torch|flash32|flash16  N D K MS_PER_ITERATION
  flash32_fit|flash16_fit  N D K MS_FOR_25_ITERATIONS
VALUE is nan when that baseline failed or was skipped; NOTE says why.
"""
import concurrent.futures
import math
import os
import signal
import sys
import time
import traceback

try:
    import numpy as np
except ImportError as e:    # reported per workload by main()
    np = None
    NUMPY_ERR = f"no numpy ({e})"

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
W = [(10_000_000, 2, 100), (4_000_000, 32, 256), (1_000_000, 128, 1000)]
FAISS = (1_000_000, 256, 20_000)
FAISS_ITERS = 25
BLOB_SEED = 12345
FAISS_SEED = 20000          # bench_kmeans.c's FAISS_SEED
LIMIT_S = float(os.environ.get("BENCH_BASELINE_LIMIT", "75"))   # per baseline
TORCH_CHUNK_BYTES = 6e9     # PyTorch's n x k distances in row chunks beyond this

# ---- splitmix64, as bench_kmeans.c's next() and unif() ----
if np is not None:
    G = np.uint64(0x9E3779B97F4A7C15)
    M1 = np.uint64(0xBF58476D1CE4E5B9)
    M2 = np.uint64(0x94D049BB133111EB)
MASK64 = (1 << 64) - 1


def unif(s0, first, count):
    """Outputs first .. first+count-1 (0-based call numbers) of unif() from
    state s0: call j sees state s0 + (j+1) * golden."""
    z = np.arange(first + 1, first + 1 + count, dtype=np.uint64)
    z *= G                      # wraps mod 2^64, as the C does
    z += np.uint64(s0)
    z ^= z >> np.uint64(30)
    z *= M1
    z ^= z >> np.uint64(27)
    z *= M2
    z ^= z >> np.uint64(31)
    z >>= np.uint64(11)
    u = z.astype(np.float64)    # < 2^53: exact
    u *= 2.0 ** -53
    return u


def advance(s0, calls):
    return (s0 + calls * 0x9E3779B97F4A7C15) & MASK64


def _chunks(n, rows):
    return [(a, min(n, a + rows)) for a in range(0, n, rows)]


_pool = concurrent.futures.ThreadPoolExecutor(max_workers=min(16, os.cpu_count() or 1))


def make_blobs(n, d, k, s0):
    """bench_kmeans.c's make_blobs from state s0: (X, C0, state after)."""
    m = 4 * k
    cent = (20.0 * unif(s0, 0, m * d) - 10.0).astype(np.float32).reshape(m, d)
    X = np.empty((n, d), dtype=np.float32)
    base = m * d

    def rows(a, b):
        u = unif(s0, base + a * (d + 1), (b - a) * (d + 1)).reshape(b - a, d + 1)
        c = (u[:, 0] * m).astype(np.int64)          # (int)(unif * m)
        X[a:b] = cent[c] + (u[:, 1:] - 0.5).astype(np.float32)   # float + float

    list(_pool.map(lambda ab: rows(*ab), _chunks(n, max(1, (1 << 22) // (d + 1)))))
    C0 = X[np.arange(k, dtype=np.int64) * (n // k)].copy()
    return X, C0, advance(s0, base + n * (d + 1))


def make_uniform(n, d, k, s0):
    X = np.empty((n, d), dtype=np.float32)
    flat = X.reshape(-1)

    def part(a, b):
        flat[a:b] = unif(s0, a, b - a).astype(np.float32)   # (float) unif

    list(_pool.map(lambda ab: part(*ab), _chunks(n * d, 1 << 22)))
    C0 = X[np.arange(k, dtype=np.int64) * (n // k)].copy()
    return X, C0


def fingerprint(X, C0):
    fx = int(np.bitwise_xor.reduce(X.reshape(-1).view(np.uint32)))
    fc = int(np.bitwise_xor.reduce(C0.reshape(-1).view(np.uint32)))
    return (fx << 32) | fc


# ---- output ----
out = sys.stdout


def emit(name, n, d, k, value, note=""):
    v = f"{value:#018x}" if name == "data" else ("nan" if value is None or not math.isfinite(value) else f"{value:.6g}")
    line = f"{name} {n} {d} {k} {v}" + (f" {' '.join(note.split())}" if note else "")
    print(line, file=out, flush=True)
    print("  " + line, file=sys.stderr, flush=True)


class Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise Timeout()


signal.signal(signal.SIGALRM, _alarm)


def guarded(name, n, d, k, fn, limit=None):
    """fn() -> value, under a time limit (s; default LIMIT_S); None, and a
    nan line with the reason, when it fails."""
    limit = LIMIT_S if limit is None else limit
    signal.alarm(int(math.ceil(limit)))
    t0 = time.time()
    try:
        return fn()
    except Timeout:
        print(f"{name} n={n} d={d} k={k}: over its {limit:.0f} s limit", file=sys.stderr)
        emit(name, n, d, k, None, f"over {limit:.0f} s")
    except Exception as e:   # noqa: BLE001 -- report and go on
        msg = f"{type(e).__name__}: {e}".splitlines()[0][:120]
        print(f"{name} n={n} d={d} k={k} failed after {time.time() - t0:.1f} s: {msg}", file=sys.stderr)
        traceback.print_exc(limit=3, file=sys.stderr)
        emit(name, n, d, k, None, "failed: " + msg)
    finally:
        signal.alarm(0)
    return None


# ---- torch and flash-kmeans ----
try:
    import torch
except Exception as e:   # noqa: BLE001
    torch = None
    TORCH_ERR = f"no torch ({type(e).__name__}: {e})".splitlines()[0]

flash = None
FLASH_NOTE = "not carried"


def flash_on_path(vendor):
    """VENDOR on sys.path for flash_kmeans, with a stand-in tqdm when none is
    installed (flash-kmeans imports trange; unused in the timed paths)."""
    sys.path.insert(0, vendor)
    try:
        import tqdm  # noqa: F401
    except ImportError:
        import types
        stub = types.ModuleType("tqdm")
        stub.trange = lambda *a, **kw: range(*a)
        stub.tqdm = lambda it=None, *a, **kw: it
        sys.modules["tqdm"] = stub


def load_flash(vendor):
    """flash-kmeans's batch_kmeans_Euclid from VENDOR/flash_kmeans, or None
    with FLASH_NOTE saying why."""
    global flash, FLASH_NOTE
    if torch is None:
        FLASH_NOTE = "no torch"
        return
    if not os.path.isdir(os.path.join(vendor, "flash_kmeans")):
        FLASH_NOTE = "not carried"
        print(f"flash-kmeans: not carried (no {vendor}/flash_kmeans; test/gpu/fetch_vendor.sh)", file=sys.stderr)
        return
    flash_on_path(vendor)
    try:
        # the module itself, not the package's __init__, which silently falls
        # back to a PyTorch implementation when Triton fails to import
        from flash_kmeans.kmeans_triton_impl import batch_kmeans_Euclid
        flash = batch_kmeans_Euclid
        ver = os.path.join(vendor, "flash_kmeans", "VERSION")
        FLASH_NOTE = open(ver).read().strip() if os.path.exists(ver) else "flash_kmeans"
        print(f"flash-kmeans: {FLASH_NOTE} from {vendor}", file=sys.stderr)
    except Exception as e:   # noqa: BLE001
        FLASH_NOTE = f"import failed: {type(e).__name__}: {e}".splitlines()[0][:100]
        print(f"flash-kmeans: {FLASH_NOTE}", file=sys.stderr)
        traceback.print_exc(limit=3, file=sys.stderr)


def cuda_ms(fn):
    """Device time of fn() with CUDA events (synchronised)."""
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    fn()
    e1.record()
    torch.cuda.synchronize()
    return e0.elapsed_time(e1)


def torch_per_iter(X, C0, iters):
    n, d = X.shape
    k = C0.shape[0]
    dev = X.device
    x2 = (X * X).sum(1, keepdim=True)
    rows = n if n * k * 4 <= TORCH_CHUNK_BYTES else max(1, int(TORCH_CHUNK_BYTES // (k * 4)))

    def step(C):
        c2 = (C * C).sum(1)[None, :]
        if rows >= n:
            lab = (x2 - 2.0 * (X @ C.T) + c2).argmin(1)
        else:
            lab = torch.cat([(x2[a:a + rows] - 2.0 * (X[a:a + rows] @ C.T) + c2).argmin(1)
                             for a in range(0, n, rows)])
        sums = torch.zeros(k, d, device=dev).index_add_(0, lab, X)
        cnt = torch.bincount(lab, minlength=k).clamp(min=1).to(X.dtype)
        Cn = sums / cnt[:, None]
        ((Cn - C) ** 2).sum().item()    # the convergence read-back
        return Cn

    C = C0.clone()
    for _ in range(1 if rows < n else 3):
        C = step(C)
    box = [C]

    def run():
        for _ in range(iters):
            box[0] = step(box[0])
    return cuda_ms(run) / iters


def flash_calls(X, C0, iters):
    """Device ms of one batch_kmeans_Euclid call of iters fixed iterations."""
    Xb, Cb = X[None], C0[None]
    return cuda_ms(lambda: flash(Xb, C0.shape[0], max_iters=iters, tol=-1.0,
                                 init_centroids=Cb.clone()))


def flash_per_iter(X, C0, iters):
    flash_calls(X, C0, 2)        # Triton compiles on the first call
    lo = flash_calls(X, C0, 2)
    hi = flash_calls(X, C0, 2 + iters)
    return (hi - lo) / iters


def main():
    global out
    args = sys.argv[1:]
    vendor = os.environ.get("GC_VENDOR_DIR", os.path.join(REPO, ".vendor"))
    if "--vendor" in args:
        i = args.index("--vendor")
        vendor = args[i + 1]
        del args[i:i + 2]
    if args:
        out = open(args[0], "w")
    load_flash(vendor)
    t_start = time.time()
    s = BLOB_SEED
    work = [("blobs", n, d, k) for n, d, k in W] + [("uniform",) + FAISS]
    if os.environ.get("BENCH_ONLY_FAISS"):
        work = work[3:]
    for kind, n, d, k in work:
        t0 = time.time()
        if np is None:
            for name in ("torch", "flash32", "flash16") + (("flash32_fit", "flash16_fit") if kind == "uniform" else ()):
                emit(name, n, d, k, None, NUMPY_ERR)
            continue
        if kind == "blobs":
            Xh, C0h, s = make_blobs(n, d, k, s)
        else:
            Xh, C0h = make_uniform(n, d, k, FAISS_SEED)
        emit("data", n, d, k, fingerprint(Xh, C0h))
        print(f"data n={n} d={d} k={k}: {time.time() - t0:.1f} s to make", file=sys.stderr)
        faiss = kind == "uniform"
        if torch is None or not torch.cuda.is_available():
            why = TORCH_ERR if torch is None else "no CUDA device"
            for name in ("torch", "flash32", "flash16") + (("flash32_fit", "flash16_fit") if faiss else ()):
                emit(name, n, d, k, None, why)
            continue
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        X = torch.from_numpy(Xh).cuda()
        C0 = torch.from_numpy(C0h).cuda()
        del Xh, C0h

        ms = guarded("torch", n, d, k, lambda: torch_per_iter(X, C0, 3 if faiss else 20))
        if ms is not None:
            emit("torch", n, d, k, ms)
        for name, dt in (("flash32", torch.float32), ("flash16", torch.float16)):
            if flash is None:
                emit(name, n, d, k, None, FLASH_NOTE)
                if faiss:
                    emit(name + "_fit", n, d, k, None, FLASH_NOTE)
                continue
            Xc, Cc = (X, C0) if dt == torch.float32 else (X.to(dt), C0.to(dt))
            if faiss:
                def fit():
                    flash_calls(Xc, Cc, 1)                  # compile
                    return flash_calls(Xc, Cc, FAISS_ITERS)
                ms = guarded(name + "_fit", n, d, k, fit, 2 * LIMIT_S)
                if ms is not None:
                    emit(name + "_fit", n, d, k, ms)
                    emit(name, n, d, k, ms / FAISS_ITERS)
                else:
                    emit(name, n, d, k, None, "see " + name + "_fit")
            else:
                ms = guarded(name, n, d, k, lambda: flash_per_iter(Xc, Cc, 20))
                if ms is not None:
                    emit(name, n, d, k, ms)
            del Xc, Cc
            torch.cuda.empty_cache()
        del X, C0
        torch.cuda.empty_cache()
        print(f"n={n} d={d} k={k}: {time.time() - t0:.1f} s in all ({time.time() - t_start:.0f} s so far)",
              file=sys.stderr)


if __name__ == "__main__":
    main()
