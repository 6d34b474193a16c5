#!/usr/bin/env python3
"""PyTorch baseline of one Lloyd iteration (||x||^2 - 2 x.c^T + ||c||^2,
argmin, index_add_, bincount, one scalar read-back like ours), float32 with
TF32 off, timed with CUDA events.  Same workloads and data recipe as
bench_kmeans.c.  Writes "n d k ms" lines to the file named by argv[1]."""
import sys
import torch

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
W = [(10_000_000, 2, 100), (4_000_000, 32, 256), (1_000_000, 128, 1000)]
out = open(sys.argv[1], "w") if len(sys.argv) > 1 else sys.stdout
dev = torch.device("cuda")
g = torch.Generator(device=dev).manual_seed(1)
for n, d, k in W:
    m = 4 * k
    cent = torch.rand(m, d, device=dev, generator=g) * 20 - 10
    lab0 = torch.randint(0, m, (n,), device=dev, generator=g)
    X = cent[lab0] + (torch.rand(n, d, device=dev, generator=g) - 0.5)
    del lab0
    C = X[torch.arange(k, device=dev) * (n // k)].clone()
    x2 = (X * X).sum(1, keepdim=True)

    def step(C):
        dist = x2 - 2.0 * (X @ C.T) + (C * C).sum(1)[None, :]
        lab = dist.argmin(1)
        sums = torch.zeros(k, d, device=dev).index_add_(0, lab, X)
        cnt = torch.bincount(lab, minlength=k).clamp(min=1).to(X.dtype)
        Cn = sums / cnt[:, None]
        shift = ((Cn - C) ** 2).sum().item()   # the convergence read-back
        return Cn

    for _ in range(3):
        C = step(C)
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    iters = 20
    e0.record()
    for _ in range(iters):
        C = step(C)
    e1.record()
    torch.cuda.synchronize()
    ms = e0.elapsed_time(e1) / iters
    print(f"torch n={n} d={d} k={k}: {ms:.3f} ms/iter", file=sys.stderr)
    print(n, d, k, ms, file=out)
    del X, x2, C
    torch.cuda.empty_cache()
