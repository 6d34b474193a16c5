#!/usr/bin/env python3
"""bench_tools.py — the peers of bench_tools.c on the rows it wrote in DIR
(bt_run.json and the sidecars of its last run: bt_kd_*.json, bt_sil_*.json),
side by side with our figures:

k-distances
  scikit-learn  NearestNeighbors(n_neighbors=k, n_jobs=-1).fit(X).kneighbors(X),
                its column k-1 (the row counts itself, as ours); the time is
                the fit's (its index, as ours includes our tree) plus the
                query's.  Compared in float32: ours is the root, taken in double,
                of our float32 sum (README), float32(sqrt(ours)) against
                float32(theirs); and the largest relative difference.
  PyTorch       brute force on the GPU in float32: chunks of rows,
                ||x||² + ||y||² - 2 x.y (a matmul, TF32 off), topk; not exact
                (the matrix form rounds otherwise): the k-distances that
                differ from ours in float32.
silhouette
  scikit-learn  silhouette_score(X, labels) on the CPU.
  PyTorch       float64 on the GPU: chunks of rows, torch.cdist, the sums per
                cluster by index_add_, then a, b and s.
Every peer's call is timed after a warm-up of the same code; one whose
estimate (a slice of its work, or r² from the r before) passes
BENCH_TOOLS_PEER_S (default 60) seconds, or that would end past
BENCH_TOOLS_PEERS_TOTAL_S (default 270) from the start, is skipped, and
says so.  The tables give each peer's time over our GPU's ("x": how many
times faster ours is).

  bench_tools.py DIR
"""
import glob
import json
import os
import sys
import time

try:
    import numpy as np
except ImportError:
    print("bench_tools.py: skipped: no numpy")
    sys.exit(0)

PEER_S = float(os.environ.get("BENCH_TOOLS_PEER_S", 60))
TOTAL_S = float(os.environ.get("BENCH_TOOLS_PEERS_TOTAL_S", 270))
T0 = time.perf_counter()


class Skip(Exception):
    """A peer not run here: the reason is the column's text."""


def too_long(est_s):
    """Raises Skip when a call estimated at est_s seconds is not worth it."""
    left = TOTAL_S - (time.perf_counter() - T0)
    if est_s > PEER_S:
        raise Skip(f"skip ~{est_s:.0f}s")
    if est_s > left:
        raise Skip(f"skip (time: ~{est_s:.0f}s)")


def load(path):
    try:
        with open(f"{path}/bt_run.json") as f:
            run = json.load(f)
    except OSError as e:
        sys.exit(f"bench_tools.py: no bt_run.json in {path} (run bench_tools {path} first): {e}")
    cases = []
    for fn in glob.glob(f"{path}/bt_kd_*.json") + glob.glob(f"{path}/bt_sil_*.json"):
        with open(fn) as f:
            c = json.load(f)
        if c.get("run") == run["run"]:
            cases.append(c)
    cases.sort(key=lambda c: c["seq"])
    return run, cases


_rows = {}


def rows(path, name, dtype, shape):
    """The file's first shape[0] rows, read once per file."""
    if name not in _rows:
        _rows[name] = np.fromfile(f"{path}/{name}", dtype=dtype)
    width = shape[1] if len(shape) > 1 else 1
    return _rows[name][: shape[0] * width].reshape(shape)


def torch_cuda():
    """(torch, device) or the reason there is none."""
    try:
        import torch
    except ImportError:
        return None, "no torch"
    if not torch.cuda.is_available():
        return None, "no CUDA"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.zeros(1, device="cuda")           # the context, outside every timing
    return torch, torch.device("cuda")


def timed(fn, *args):
    t = time.perf_counter()
    out = fn(*args)
    return out, (time.perf_counter() - t) * 1e3


def f32_compare(ours_kd2, theirs):
    """Ours float32(sqrt(kd2 in double)) against float32(theirs): equal count, max relative."""
    ours = np.sqrt(ours_kd2.astype(np.float64))
    theirs = np.asarray(theirs, dtype=np.float64)
    equal = int(np.count_nonzero(ours.astype(np.float32) == theirs.astype(np.float32)))
    den = np.maximum(np.abs(ours), np.abs(theirs))
    rel = np.divide(np.abs(ours - theirs), den, out=np.zeros_like(den), where=den > 0)
    return equal, float(rel.max()) if len(rel) else 0.0


# ---- k-distances ----

def sklearn_kdist(X, k):
    from sklearn.neighbors import NearestNeighbors

    n = len(X)
    m = min(n, max(2000, n // 50))
    nn = NearestNeighbors(n_neighbors=k, n_jobs=-1)
    nn.fit(X[:m]).kneighbors(X[:m])                 # warm: the pool, the code
    (_, fit_ms) = timed(nn.fit, X)
    (_, q_ms) = timed(nn.kneighbors, X[:m])
    too_long((fit_ms + q_ms * n / m) * 1e-3)
    (dist, _), q_ms = timed(nn.kneighbors, X)
    return dist[:, k - 1], fit_ms + q_ms, nn._fit_method


def torch_kdist(torch, dev, X, k):
    n = len(X)
    Xt = torch.from_numpy(X).to(dev)
    sq = (Xt * Xt).sum(1)
    out = torch.empty(n, device=dev)
    chunk = max(1, min(n, (1 << 29) // n))          # 2 GiB of float32 distances a chunk
    starts = list(range(0, n, chunk))

    def part(lo):
        hi = min(lo + chunk, n)
        D = torch.addmm(sq[None, :], Xt[lo:hi], Xt.T, beta=1, alpha=-2).add_(sq[lo:hi, None])
        out[lo:hi] = D.topk(k, dim=1, largest=False).values[:, -1]

    part(starts[0])                                 # warm
    torch.cuda.synchronize()
    probe = starts[: min(len(starts), 4)]
    t = time.perf_counter()
    for lo in probe:
        part(lo)
    torch.cuda.synchronize()
    too_long((time.perf_counter() - t) * len(starts) / len(probe))
    t = time.perf_counter()
    for lo in starts:
        part(lo)
    torch.cuda.synchronize()
    ms = (time.perf_counter() - t) * 1e3
    return out.clamp_min_(0).sqrt_().cpu().numpy(), ms


# ---- silhouette ----

def sklearn_sil(X, labels):
    from sklearn.metrics import silhouette_score

    return timed(silhouette_score, X, labels)


def torch_sil(torch, dev, X, labels, m):
    r = len(X)
    Xt = torch.from_numpy(X).to(dev, torch.float64)
    lab = torch.from_numpy(labels.astype(np.int64)).to(dev)
    chunk = max(1, min(r, (1 << 27) // r))          # 1 GiB of float64 distances a chunk

    def score():
        size = torch.bincount(lab, minlength=m).double()
        s = torch.empty(r, dtype=torch.float64, device=dev)
        for lo in range(0, r, chunk):
            hi = min(lo + chunk, r)
            D = torch.cdist(Xt[lo:hi], Xt)
            sums = torch.zeros(hi - lo, m, dtype=torch.float64, device=dev).index_add_(1, lab, D)
            li = lab[lo:hi, None]
            own = size[lab[lo:hi]]
            a = sums.gather(1, li).squeeze(1) / (own - 1).clamp_min(1)
            mean = torch.where(size > 0, sums / size.clamp_min(1), torch.inf)
            b = mean.scatter(1, li, torch.inf).min(1).values
            top = torch.maximum(a, b)
            si = torch.where(top > 0, (b - a) / top, torch.zeros_like(a))
            s[lo:hi] = torch.where(own > 1, si, torch.zeros_like(a))
        out = s.mean().item()                       # synchronises
        return out

    score()                                         # warm
    return timed(score)


# ---- the tables ----

def col(v, fmt):
    if v is None:
        return "-"
    return fmt.format(v) if isinstance(v, (int, float)) else str(v)


def ratio(peer_ms, ours_ms):
    if isinstance(peer_ms, (int, float)) and ours_ms:
        return f"{peer_ms / ours_ms:.1f}x"
    return "-"


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    path = sys.argv[1]
    run, cases = load(path)
    torch, dev = torch_cuda()
    why = None if torch else dev                    # the reason there is no torch peer
    try:
        import sklearn
        have_sk = f"scikit-learn {sklearn.__version__}"
    except ImportError:
        sklearn, have_sk = None, None
    print(f"bench_tools.py: run {run['run']}, our GPU {run['gpu']}, {run['cpu_threads']} CPU threads, "
          f"{len(cases)} cases; numpy {np.__version__}; {have_sk or 'skipped: no scikit-learn'}; "
          + (f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}" if torch
             else f"skipped: {why}"), flush=True)

    kd = [c for c in cases if c["kind"] == "kdistance"]
    sil = [c for c in cases if c["kind"] == "silhouette"]
    if kd:
        print("\nk-distances: ours (GPU, CPU) vs scikit-learn NearestNeighbors (CPU, all cores) "
              "and PyTorch brute force (GPU, float32)")
        print("  f32 equal: of n, float32(sqrt(ours)) == float32(theirs); rel: their largest relative "
              "difference; x: their time over our GPU's")
        print(f"{'n':>8} {'d':>3} {'k':>4} {'ours GPU':>9} {'ours CPU':>9} | {'sk alg':>7} {'sklearn':>10} {'x':>7} "
              f"{'f32 equal':>10} {'rel':>8} | {'torch':>10} {'x':>7} {'f32 differ':>10} {'rel':>8}")
    for c in kd:
        n, d, k = c["n"], c["d"], c["k"]
        X = rows(path, c["X"], np.float32, (n, d))
        ours = rows(path, c["kdist2"], np.float32, (n,)) if c["kdist2"] else None
        sk = tc = alg = "-"
        sk_eq = sk_rel = tc_diff = tc_rel = "-"
        try:
            if sklearn is None:
                raise Skip("no sklearn")
            theirs, sk, alg = sklearn_kdist(X, k)
            if ours is not None:
                sk_eq, sk_rel = f32_compare(ours, theirs)
        except Skip as e:
            sk = str(e)
        except Exception as e:                      # a peer's failure is a note, not the end
            sk = "failed"
            print(f"  sklearn n={n} d={d} k={k}: {type(e).__name__}: {e}")
        try:
            if not torch:
                raise Skip(why)
            theirs, tc = torch_kdist(torch, dev, X, k)
            if ours is not None:
                eq, tc_rel = f32_compare(ours, theirs)
                tc_diff = n - eq
        except Skip as e:
            tc = str(e)
        except Exception as e:
            tc = "failed"
            print(f"  torch n={n} d={d} k={k}: {type(e).__name__}: {e}")
        g, cpu = c.get("gpu_ms"), c.get("cpu_ms")
        print(f"{n:>8} {d:>3} {k:>4} {col(g, '{:9.1f}'):>9} {col(cpu, '{:9.1f}'):>9} | "
              f"{alg:>7} {col(sk, '{:10.1f}'):>10} {ratio(sk, g):>7} {col(sk_eq, '{:d}'):>10} {col(sk_rel, '{:8.1e}'):>8} | "
              f"{col(tc, '{:10.1f}'):>10} {ratio(tc, g):>7} {col(tc_diff, '{:d}'):>10} {col(tc_rel, '{:8.1e}'):>8}",
              flush=True)

    if sil:
        print("\nsilhouette: ours (GPU, CPU; exact, float64 sums) vs scikit-learn silhouette_score (CPU) "
              "and PyTorch float64 (GPU)")
        print("  diff: |their score - ours|; x: their time over our GPU's")
        print(f"{'r':>7} {'d':>4} {'ours GPU':>9} {'ours CPU':>9} {'our score':>18} | {'sklearn':>10} {'x':>7} "
              f"{'diff':>8} | {'torch f64':>10} {'x':>7} {'diff':>8}")
    prev = {}                                       # (peer, d) -> (r, ms): r² estimates
    for c in sil:
        r, d, m = c["r"], c["d"], c["m"]
        X = rows(path, c["X"], np.float32, (r, d))
        labels = rows(path, c["labels"], np.int32, (r,))
        score = c.get("score")
        res = {}
        for peer in ("sklearn", "torch"):
            try:
                if peer == "sklearn" and sklearn is None:
                    raise Skip("no sklearn")
                if peer == "torch" and not torch:
                    raise Skip(why)
                if (peer, d) in prev:
                    pr, pms = prev[(peer, d)]
                    too_long(pms * 1e-3 * (r / pr) ** 2)
                s, ms = sklearn_sil(X, labels) if peer == "sklearn" else torch_sil(torch, dev, X, labels, m)
                prev[(peer, d)] = (r, ms)
                res[peer] = (ms, abs(s - score) if score is not None else "-")
            except Skip as e:
                res[peer] = (str(e), "-")
            except Exception as e:
                res[peer] = ("failed", "-")
                print(f"  {peer} r={r} d={d}: {type(e).__name__}: {e}")
        g, cpu = c.get("gpu_ms"), c.get("cpu_ms")
        (sk, skd), (tc, tcd) = res["sklearn"], res["torch"]
        print(f"{r:>7} {d:>4} {col(g, '{:9.1f}'):>9} {col(cpu, '{:9.1f}'):>9} {col(score, '{:18.15f}'):>18} | "
              f"{col(sk, '{:10.1f}'):>10} {ratio(sk, g):>7} {col(skd, '{:8.1e}'):>8} | "
              f"{col(tc, '{:10.1f}'):>10} {ratio(tc, g):>7} {col(tcd, '{:8.1e}'):>8}", flush=True)
    print(f"\nbench_tools.py: {time.perf_counter() - T0:.1f} s in all")


if __name__ == "__main__":
    main()
