#!/usr/bin/env python3
"""compare_hdbscan_sklearn.py — gpu_hdbscan and gpu_minimum_spanning_tree
against scikit-learn's HDBSCAN (1.3 or later; the GPU machine has 1.9.1),
on fresh random data each run.

    python3 test/gpu/compare_hdbscan_sklearn.py [--dry-run]

Against the server that $PGHOST ... name, gpuclust installed
(run_gpu_tests.sh hdbscan-sklearn: the pg-bundle, psycopg from .carry/py).
The seed is printed; HDBSCAN_CMP_SEED=N replays a run.  --dry-run needs no
server: it makes the cases, runs scikit-learn on them (its times, its own
failures) and, on the cases of at most REF_MAX_N rows, checks the
comparison itself against a numpy reference standing in for the server
(Kruskal over every pair in (w, a, b) order, then scikit-learn's tree code).

The cases: Gaussian blobs of varying sizes and densities with uniform
noise, noise alone, duplicates, lattices (ties everywhere), tiny inputs
(n = 2 ...), d = 1, 2, 3, 8, 16, 64, n up to 100,000; options drawn at
random, and a sweep of every one (min_cluster_size, min_samples from 1 to
n, cluster_selection_epsilon with eom and leaf, allow_single_cluster, alpha
0.5 and 2, cosine).  The rows are float32 values, loaded by a binary COPY;
scikit-learn gets them widened to double, as the core computes.  Each case
runs gpu_hdbscan and gpu_minimum_spanning_tree on device 'cpu' and, when
gpuclust_info() says the GPU is usable, on 'gpu'; the checks:

  GPU = CPU      labels, probability, outlier_score and the MST's edges bit
                 for bit (float8 read back with extra_float_digits = 3);
  numbering      clusters 0, 1, ... in order of their lowest input position;
  MST            n - 1 edges that span the rows, each weight exactly
                 max(core_a, core_b, dist(a, b) / alpha), the core distances
                 from NearestNeighbors' kd-tree as HDBSCAN takes them;
  tree           scikit-learn's own tree code (make_single_linkage,
                 tree_to_labels) on our MST in our (w, a, b) order gives our
                 labels and probabilities exactly, and the GLOSH scores of
                 its condensed tree are ours to 1e-12 (where a row's
                 lambda is finite and lambda_max infinite, duplicates in
                 its cluster, the score is undefined: only bounded);
                 every outlier_score in [0, 1];
  condensed      gpu_hdbscan_tree's rows on each device are scikit-learn's
                 _condense_tree of our MST, row for row in its order
                 (parent, child, lambda bit for bit, size);
  scikit-learn   HDBSCAN(...).fit(X): the same labels up to a renumbering,
                 probabilities within 1e-12, and the MST's weights
                 (_single_linkage_tree_['value'], sorted) equal to ours.  A
                 difference with equal weights, where the tree check above
                 passed, comes from the order of equal weights alone:
                 reported as TIE and counted apart, not as a failure.  Ties
                 are common, not only on lattices and duplicates: with
                 min_samples > 1 rows share core distances, and scikit-learn
                 orders its MST with an unstable argsort, so that its own
                 probabilities, and at times labels, move with that order
                 (we order equal weights by (w, a, b)).

Cosine: the core clusters float32 unit rows (gc_unit_row) at distance d²/2;
the exact reference is HDBSCAN(metric='precomputed') on those distances,
computed in numpy with the same operations, and HDBSCAN(metric='cosine') on
the rows is compared for information only.  alpha stays 1 under cosine:
scikit-learn's brute path divides the core distances by alpha as well.

scikit-learn's HDBSCAN takes O(n²) time (110k 2-d rows: 71.6 s); a case
whose estimated time passes HDBSCAN_CMP_CASE_S (90 s) or what is left of
HDBSCAN_CMP_BUDGET_S (210 s, the whole run's) is checked without it (the
MST and tree checks still run) and says so.  scikit-learn 1.9.1 under
numpy 2.5 raises a TypeError ("only 0-dimensional arrays can be converted
to Python scalars", its epsilon_search's traverse_upwards) whenever
cluster_selection_epsilon moves a selected cluster up the tree: such a
case's scikit-learn comparisons (stock, and its tree code on our MST) are
skipped, printed and counted, as any other failure of scikit-learn's own;
GPU = CPU and the MST checks still run.
"""
import argparse
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
import report  # noqa: E402
from report import check, info, summary  # noqa: E402

SEED = int(os.environ.get("HDBSCAN_CMP_SEED") or np.random.SeedSequence().entropy % 10**9)
CASE_S = float(os.environ.get("HDBSCAN_CMP_CASE_S", 90))
BUDGET_S = float(os.environ.get("HDBSCAN_CMP_BUDGET_S", 210))
REF_MAX_N = 600         # --dry-run's numpy reference: every pair, sorted
PROB_TOL = 1e-12
TABLE = "gc_hd_cmp"
T0 = time.perf_counter()
ties, skipped = [], []


# ---- scikit-learn ----

def sklearn_hdbscan():
    """(HDBSCAN, its tree module's functions) or the reason there are none."""
    try:
        import sklearn
        from sklearn.cluster import HDBSCAN
    except ImportError as e:
        return None, f"scikit-learn has no HDBSCAN (1.3 or later needed): {e}"
    try:
        from sklearn.cluster._hdbscan._linkage import MST_edge_dtype, make_single_linkage
        from sklearn.cluster._hdbscan._tree import _condense_tree, tree_to_labels
    except ImportError as e:
        return None, f"scikit-learn {sklearn.__version__}'s HDBSCAN tree code moved: {e}"
    return (HDBSCAN, MST_edge_dtype, make_single_linkage, _condense_tree, tree_to_labels), None


def sklearn_estimate_s(n, d, metric):
    """scikit-learn's HDBSCAN time on this machine, roughly: Prim over
    every pair (2-d: 71.6 s for 110k rows), more per pair in more dimensions."""
    if metric == "cosine":
        return 1.2e-7 * n * n
    return 5.9e-9 * n * n * (1 + d / 12)


def sklearn_kw(kw):
    return {k: v for k, v in kw.items() if k != "metric" or v != "cosine"}


def run_sklearn(SK, X, kw):
    """HDBSCAN(...).fit on the rows (cosine: on our unit rows' distances,
    precomputed): (labels, probabilities, sorted MST weights, seconds)."""
    HDBSCAN = SK[0]
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if kw.get("metric") == "cosine":
            h = HDBSCAN(metric="precomputed", copy=True, **sklearn_kw(kw)).fit(cosine_matrix(X))
        else:
            h = HDBSCAN(copy=True, n_jobs=-1, **kw).fit(X.astype(np.float64))
    return h.labels_, h.probabilities_, np.sort(h._single_linkage_tree_["value"]), time.perf_counter() - t


def sklearn_tree(SK, n, edges, kw):
    """scikit-learn's tree code on our MST, edges in our order: labels,
    probabilities and the GLOSH scores of its condensed tree."""
    _, MST_edge_dtype, make_single_linkage, condense, tree_to_labels = SK
    mst = np.empty(len(edges), dtype=MST_edge_dtype)
    mst["current_node"], mst["next_node"], mst["distance"] = edges["a"], edges["b"], edges["w"]
    slt = make_single_linkage(mst)
    mcs = kw.get("min_cluster_size", 5)
    labels, probs = tree_to_labels(slt, mcs, kw.get("cluster_selection_method", "eom"),
                                   kw.get("allow_single_cluster", False),
                                   kw.get("cluster_selection_epsilon", 0.0), None)
    return labels, probs, glosh(condense(slt, mcs), n)


def glosh(ct, n):
    """GLOSH from a condensed tree, as hdbscan.h defines it: (lambda_max -
    lambda) / lambda_max, lambda_max the largest lambda of a row in the
    subtree of the cluster the row leaves; 0 where lambda_max is 0 or lambda
    infinite; NaN (undefined) where lambda_max alone is infinite."""
    parent, child, lam = ct["parent"], ct["child"], ct["value"]
    lmax = np.zeros(max(parent.max(), child.max()) + 1)
    pts = child < n
    np.maximum.at(lmax, parent[pts], lam[pts])
    for i in np.flatnonzero(~pts)[np.argsort(-child[~pts])]:    # leaves first
        lmax[parent[i]] = max(lmax[parent[i]], lmax[child[i]])
    lp, m = lam[pts], lmax[parent[pts]]
    with np.errstate(invalid="ignore", divide="ignore"):
        s = np.where((m == 0) | np.isinf(lp), 0.0, (m - lp) / m)
    out = np.empty(n)
    out[child[pts]] = s
    return out


# ---- distances as the core computes them ----

def unit_rows(X):
    """gc_unit_row: x / sqrt(sum x² in double, in dimension order), to float32."""
    x = X.astype(np.float64)
    s = np.zeros(len(x))
    for j in range(x.shape[1]):
        s = s + x[:, j] * x[:, j]
    norm = np.sqrt(s)[:, None]
    return np.where(norm > 0, x / np.where(norm > 0, norm, 1), 0).astype(np.float32)


def pair_dist(Y, a, b, metric):
    """dist(a, b) in double: the sum of squared float32 differences in
    dimension order, its root (Euclidean) or half (cosine, on unit rows)."""
    s = np.zeros(len(a))
    for j in range(Y.shape[1]):
        t = Y[a, j].astype(np.float64) - Y[b, j].astype(np.float64)
        s = s + t * t
    return s / 2 if metric == "cosine" else np.sqrt(s)


def cosine_matrix(X):
    U = unit_rows(X)
    a, b = np.divmod(np.arange(len(U) ** 2), len(U))
    return pair_dist(U, a, b, "cosine").reshape(len(U), len(U))


def core_distances(X, ms, metric):
    """Each row's distance to its ms-th nearest row, itself counted."""
    if metric == "cosine":
        return np.partition(cosine_matrix(X), ms - 1, axis=1)[:, ms - 1]
    from sklearn.neighbors import NearestNeighbors
    X64 = X.astype(np.float64)
    return NearestNeighbors(n_neighbors=ms, algorithm="kd_tree").fit(X64).kneighbors(X64, ms)[0][:, -1]


def mst_weights(X, edges, core, alpha, metric):
    """The mutual-reachability weight of each edge, computed here."""
    Y = unit_rows(X) if metric == "cosine" else X
    d = pair_dist(Y, edges["a"], edges["b"], metric) / alpha
    return np.maximum(np.maximum(core[edges["a"]], core[edges["b"]]), d)


EDGE = np.dtype([("a", np.int64), ("b", np.int64), ("w", np.float64)])


def sort_edges(a, b, w):
    """Edges as rows a < b, in (w, a, b) order."""
    a, b = np.minimum(a, b), np.maximum(a, b)
    e = np.empty(len(a), EDGE)
    e["a"], e["b"], e["w"] = a, b, w
    return e[np.lexsort((e["b"], e["a"], e["w"]))]


def spans(n, edges):
    """n - 1 edges joining all n rows."""
    if len(edges) != n - 1:
        return False
    parent = np.arange(n)

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i
    for a, b in zip(edges["a"].tolist(), edges["b"].tolist()):
        ra, rb = find(a), find(b)
        if ra == rb:
            return False
        parent[ra] = rb
    return True


def ref_mst(X, core, alpha, metric):
    """The reference MST (--dry-run): Kruskal over every pair in (w, a, b) order."""
    n = len(X)
    a, b = np.triu_indices(n, 1)
    e = sort_edges(a, b, np.zeros(len(a)))
    e["w"] = mst_weights(X, e, core, alpha, metric)
    e = e[np.lexsort((e["b"], e["a"], e["w"]))]
    parent, keep = np.arange(n), []

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i
    for k, (i, j) in enumerate(zip(e["a"].tolist(), e["b"].tolist())):
        ri, rj = find(i), find(j)
        if ri != rj:
            parent[ri] = rj
            keep.append(k)
            if len(keep) == n - 1:
                break
    return e[keep]


# ---- labels ----

def renumber(labels):
    """Clusters 0, 1, ... in order of their lowest row; noise -1."""
    out = np.full(len(labels), -1, dtype=np.int64)
    m = labels >= 0
    _, first, inv = np.unique(labels[m], return_index=True, return_inverse=True)
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first)] = np.arange(len(first))
    out[m] = rank[inv]
    return out


def same_partition(a, b):
    """The same noise rows and a bijection between the cluster ids."""
    if not np.array_equal(a < 0, b < 0):
        return False
    m = a >= 0
    pairs = np.unique(np.stack([a[m], b[m]]), axis=1).shape[1] if m.any() else 0
    return pairs == len(np.unique(a[m])) == len(np.unique(b[m]))


def describe(a, b):
    diff = np.flatnonzero((a < 0) != (b < 0))
    return (f"{len(np.unique(a[a >= 0]))} vs {len(np.unique(b[b >= 0]))} clusters, "
            f"{int((a < 0).sum())} vs {int((b < 0).sum())} noise"
            + (f", noise differs on {len(diff)} rows e.g. {diff[:5].tolist()}" if len(diff) else ""))


def max_diff(p, q):
    return float(np.abs(p - q).max()) if len(p) else 0.0


# ---- the server ----

def connect():
    try:
        import psycopg
    except ImportError as e:
        sys.exit(f"no psycopg ({e}): on the GPU machine carry Debian's python3-psycopg under "
                 ".carry/py and put it on PYTHONPATH (run_gpu_tests.sh does)")
    conn = psycopg.connect("", autocommit=True)
    conn.execute("CREATE EXTENSION IF NOT EXISTS gpuclust")
    conn.execute("SET extra_float_digits = 3")
    return conn


def gpu_usable(conn):
    r = conn.execute("SELECT value FROM gpuclust_info() WHERE key = 'gpu_usable'").fetchone()
    return bool(r) and r[0] == "true"


COPY_SIG = b"PGCOPY\n\xff\r\n\x00" + bytes(8)


def copy_rows(conn, table, X, temp=True, chunk=1 << 20):
    """Makes table (id bigint, f real[]) holding X's float32 rows, ids 0 ..
    n - 1, by a binary COPY that numpy writes (the rows' exact values)."""
    n, d = X.shape
    rec = np.dtype([("nf", ">i2"), ("il", ">i4"), ("id", ">i8"), ("fl", ">i4"), ("ndim", ">i4"),
                    ("nulls", ">i4"), ("oid", ">i4"), ("dim", ">i4"), ("lb", ">i4"),
                    ("v", [("len", ">i4"), ("x", ">f4")], (d,))])
    conn.execute(f"DROP TABLE IF EXISTS {table}")
    conn.execute(f"CREATE {'TEMP' if temp else 'UNLOGGED'} TABLE {table} (id bigint, f real[])")
    with conn.cursor().copy(f"COPY {table} (id, f) FROM STDIN (FORMAT binary)") as cp:
        cp.write(COPY_SIG)
        for s in range(0, n, chunk):
            m = min(chunk, n - s)
            r = np.zeros(m, rec)
            r["nf"], r["il"], r["id"], r["fl"] = 2, 8, np.arange(s, s + m), 20 + 8 * d
            r["ndim"], r["oid"], r["dim"], r["lb"] = 1, 700, d, 1
            r["v"]["len"], r["v"]["x"] = 4, X[s:s + m]
            cp.write(r.tobytes())
        cp.write(b"\xff\xff")
    conn.execute(f"VACUUM (FREEZE, ANALYZE) {table}" if not temp else f"ANALYZE {table}")


def call_sql(fn, source, kw, device, cols):
    """SELECT cols FROM fn(source, name => value ..., device => device)."""
    from psycopg import sql
    args = [sql.Literal(source)] + [sql.SQL("{} => {}").format(sql.Identifier(k), sql.Literal(v))
                                    for k, v in kw.items()]
    args.append(sql.SQL("device => {}").format(sql.Literal(device)))
    return sql.SQL("SELECT {} FROM {}({})").format(sql.SQL(cols), sql.Identifier(fn), sql.SQL(", ").join(args))


def copy_out(conn, query):
    """The rows of query, as lists of text fields (None for NULL)."""
    from psycopg import sql
    with conn.cursor().copy(sql.SQL("COPY ({}) TO STDOUT").format(query)) as cp:
        data = b"".join(bytes(b) for b in cp)
    return [[None if f == b"\\N" else f for f in line.split(b"\t")] for line in data.splitlines()]


def run_hdbscan(conn, source, kw, device, n):
    """gpu_hdbscan's (labels, probability, outlier_score) by id 0 .. n - 1."""
    rows = copy_out(conn, call_sql("gpu_hdbscan", source, kw, device,
                                   "id, cluster_id, probability, outlier_score"))
    lab, prob, out = np.full(n, -2, np.int64), np.full(n, np.nan), np.full(n, np.nan)
    for i, c, p, o in rows:
        i = int(i)
        lab[i], prob[i], out[i] = -1 if c is None else int(c), float(p), float(o)
    return lab, prob, out


def run_mst(conn, source, kw, device):
    """gpu_minimum_spanning_tree's edges in (w, a, b) order."""
    rows = copy_out(conn, call_sql("gpu_minimum_spanning_tree", source, kw, device, "id_a, id_b, distance"))
    a = np.array([int(r[0]) for r in rows], dtype=np.int64)
    b = np.array([int(r[1]) for r in rows], dtype=np.int64)
    return sort_edges(a, b, np.array([float(r[2]) for r in rows]))


# ---- the cases ----

def blobs(rng, n, d, k, noise=0.1, spread=(0.1, 1.5), box=10.0):
    """k Gaussian blobs of random sizes and spreads, and a fraction noise of
    rows uniform over their bounding box, shuffled, as float32."""
    m = n - int(n * noise)
    sizes = rng.multinomial(m, rng.dirichlet(np.full(k, 2.0)))
    centres, std = rng.uniform(-box, box, (k, d)), rng.uniform(*spread, k)
    X = np.vstack([c + rng.normal(size=(s, d)) * sd for c, s, sd in zip(centres, sizes, std)])
    if n > m:
        lo, hi = (X.min(0), X.max(0)) if m else (-box, box)
        X = np.vstack([X, rng.uniform(lo, hi, (n - m, d))])
    return rng.permutation(X).astype(np.float32)


def duplicates(rng, n, d):
    """Rows drawn with repetition from a few distinct ones, and a blob."""
    base = blobs(rng, int(rng.integers(5, 40)), d, 3, noise=0)
    X = np.vstack([base[rng.integers(0, len(base), n - n // 5)], blobs(rng, n // 5, d, 1, noise=0)])
    return rng.permutation(X).astype(np.float32)


def lattice(rng, d):
    """An integer lattice (every distance repeated), with holes, and a
    sparser one beside it."""
    side = int(rng.integers(6, 36)) if d == 2 else int(rng.integers(4, 11))
    g = np.stack(np.meshgrid(*[np.arange(side)] * d), -1).reshape(-1, d)
    g = g[rng.random(len(g)) < 0.9]
    return np.vstack([g, g[: len(g) // 3] * 3 + side * 2]).astype(np.float32)


def spacing(X):
    """The median distance from a row to its nearest other row (a sample)."""
    from sklearn.neighbors import NearestNeighbors
    S = X[: 2000].astype(np.float64)
    d = NearestNeighbors(n_neighbors=2).fit(S).kneighbors(S)[0][:, 1]
    return float(np.median(d[d > 0])) if (d > 0).any() else 1.0


def random_options(rng, X, cosine=False):
    n = len(X)
    kw = {"min_cluster_size": int(rng.choice([2, 3, 5, 8, 15, 30]))}
    r = rng.random()
    ms = (None if r < 0.3 else 1 if r < 0.45 else n if r < 0.5 and n <= 2000
          else int(rng.integers(2, min(n, 40) + 1)))
    if ms is None and kw["min_cluster_size"] > n:
        ms = n
    kw["min_samples"] = ms
    if rng.random() < 0.35:
        kw["cluster_selection_method"] = "leaf"
    if rng.random() < 0.3:
        kw["cluster_selection_epsilon"] = float(spacing(X) * rng.choice([1, 3, 10, 30]))
    if rng.random() < 0.2:
        kw["allow_single_cluster"] = True
    if cosine:
        kw["metric"] = "cosine"
    elif rng.random() < 0.3:
        kw["alpha"] = float(rng.choice([0.5, 2.0]))
    return kw


def cases(rng):
    """(name, X, options), small to large."""
    yield "n2", np.array([[0, 0], [1, 1]], np.float32), dict(min_cluster_size=2, min_samples=1)
    for t in range(5):
        n, d = int(rng.integers(2, 13)), int(rng.choice([1, 2, 3]))
        X = rng.integers(0, 4, (n, d)).astype(np.float32) if t % 2 else rng.normal(size=(n, d)).astype(np.float32)
        kw = dict(min_cluster_size=int(rng.integers(2, n + 2)), min_samples=int(rng.integers(1, n + 1)))
        if t == 4:
            kw["min_samples"] = n
        yield f"tiny {t}", X, kw
    for d in (1, 2, 3, 8, 16, 64):
        X = blobs(rng, int(rng.integers(200, 3000)), d, int(rng.integers(2, 9)), noise=rng.uniform(0, 0.2))
        yield f"blobs d={d}", X, random_options(rng, X)
    for d in (2, 3):
        X = rng.uniform(0, 1, (int(rng.integers(300, 2000)), d)).astype(np.float32)
        yield f"uniform noise d={d}", X, random_options(rng, X)
    for d in (1, 2, 3):
        X = duplicates(rng, int(rng.integers(200, 2000)), d)
        yield f"duplicates d={d}", X, random_options(rng, X)
    for d in (2, 2, 3):
        X = lattice(rng, d)
        yield f"lattice d={d}", X, random_options(rng, X)
    # every option on one data set
    X = blobs(rng, int(rng.integers(800, 2500)), 2, 6, noise=0.1, spread=(0.2, 1.2))
    one = blobs(rng, int(rng.integers(200, 800)), 2, 1, noise=0)
    eps = float(spacing(X) * rng.choice([3, 10, 30]))
    for name, data, kw in (
            ("epsilon eom", X, dict(cluster_selection_epsilon=eps)),
            ("leaf", X, dict(cluster_selection_method="leaf")),
            ("epsilon leaf", X, dict(cluster_selection_method="leaf", cluster_selection_epsilon=eps)),
            ("alpha 0.5", X, dict(alpha=0.5)),
            ("alpha 2", X, dict(alpha=2.0, min_samples=3)),
            ("min_samples 1", X, dict(min_samples=1)),
            ("min_samples n", X[:300], dict(min_samples=300, min_cluster_size=10)),
            ("min_cluster_size 2", X[:400], dict(min_cluster_size=2)),
            ("min_cluster_size n/4", X, dict(min_cluster_size=len(X) // 4)),
            ("allow_single_cluster, one blob", one, dict(allow_single_cluster=True)),
            ("allow_single_cluster, leaf", one, dict(allow_single_cluster=True, cluster_selection_method="leaf")),
            ("allow_single_cluster, epsilon", one, dict(allow_single_cluster=True, cluster_selection_epsilon=eps)),
            ("allow_single_cluster, many", X, dict(allow_single_cluster=True, min_cluster_size=15))):
        yield f"option {name}", data, kw
    for d in (8, 16):
        X = blobs(rng, int(rng.integers(500, 2500)), d, 4, noise=0.1) + np.float32(5)
        yield f"cosine d={d}", X, random_options(rng, X, cosine=True)
    # larger: scikit-learn's time grows as n²
    for n, d in ((10_000, 8), (10_000, 16), (5_000, 64), (20_000, 3), (30_000, 2), (50_000, 2)):
        X = blobs(rng, n, d, int(rng.integers(5, 40)), noise=0.1)
        kw = random_options(rng, X)
        kw["min_samples"] = min(kw["min_samples"] or 0, 40) or None     # kd-tree queries stay cheap
        yield f"blobs {n} x {d}", X, kw
    X = duplicates(rng, 10_000, 2)
    yield "duplicates 10000 x 2", X, dict(min_cluster_size=15, min_samples=int(rng.integers(2, 20)))
    X = blobs(rng, 100_000, 2, 50, noise=0.1, spread=(0.3, 0.9))
    yield "blobs 100000 x 2", X, dict(min_cluster_size=15)


# ---- one case ----

def describe_kw(kw):
    return ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in kw.items())


def compare_case(conn, SK, devices, name, X, kw, dry):
    n, d = X.shape
    metric = kw.get("metric", "euclidean")
    ms = kw.get("min_samples") or kw.get("min_cluster_size", 5)
    mst_kw = {k: v for k, v in kw.items() if k in ("alpha", "metric")} | {"min_samples": ms}
    label = f"{name} (n={n} d={d}; {describe_kw(kw)})"
    info(f"{label}")
    core = core_distances(X, ms, metric)
    alpha = kw.get("alpha", 1.0)

    # ours: the server's, or (--dry-run) the numpy reference
    ours, msts = {}, {}
    if dry:
        if n > REF_MAX_N:
            devices = []
        else:
            msts["ref"] = ref_mst(X, core, alpha, metric)
            try:
                lab, prob, score = sklearn_tree(SK, n, msts["ref"], kw)
                ours["ref"] = (renumber(lab), prob, np.nan_to_num(score, nan=1.0))
            except TypeError as e:
                skip(name, f"scikit-learn's tree code raised TypeError on the reference MST: {e}")
    else:
        source = f"SELECT id, f FROM {TABLE} ORDER BY id"
        copy_rows(conn, TABLE, X)
        for dev in devices:
            try:
                ours[dev] = run_hdbscan(conn, source, kw, dev, n)
                msts[dev] = run_mst(conn, source, mst_kw, dev)
            except Exception as e:      # psycopg.Error: the call's message
                check(f"{name}: gpu_hdbscan / gpu_minimum_spanning_tree on {dev}", False, str(e).strip()[:300])
                ours.pop(dev, None)
    if not ours:
        if dry:
            stock(SK, name, X, kw)
        return
    first = next(iter(ours))
    lab, prob, score = ours[first]
    edges = msts[first]
    for dev in list(ours)[1:]:
        l2, p2, s2 = ours[dev]
        check(f"{name}: {dev} = {first} bit for bit (labels, probability, outlier_score, MST edges)",
              np.array_equal(lab, l2) and np.array_equal(prob, p2) and np.array_equal(score, s2)
              and np.array_equal(edges, msts[dev]),
              f"labels differ on {int((lab != l2).sum())} rows, probability on {int((prob != p2).sum())}, "
              f"outlier_score on {int((score != s2).sum())}; MST edges equal {np.array_equal(edges, msts[dev])}")
    check(f"{name}: every row once, clusters numbered by their lowest row, outlier_score in [0, 1]",
          (lab >= -1).all() and np.array_equal(lab, renumber(lab)) and ((score >= 0) & (score <= 1)).all()
          and ((prob >= 0) & (prob <= 1)).all(),
          f"{len(np.unique(lab[lab >= 0]))} clusters, {int((lab < 0).sum())} noise; outlier_score in "
          f"[{np.nanmin(score):.3g}, {np.nanmax(score):.3g}]")
    w = mst_weights(X, edges, core, alpha, metric)
    check(f"{name}: MST of n - 1 edges spanning the rows, each weight max(core_a, core_b, dist/alpha) exactly",
          spans(n, edges) and np.array_equal(edges["w"], w),
          f"{len(edges)} edges, {int((edges['w'] != w).sum())} weights differ"
          + (f", largest difference {max_diff(edges['w'], w):.3g}" if len(w) == len(edges) else ""))

    tree_ok = tree_check(SK, name, lab, prob, score, edges, kw)
    if not dry:
        for dev in ours:
            condensed_check(conn, SK, name, source, kw, dev, n, edges)
    res = stock(SK, name, X, kw)
    if res is not None:
        versus_sklearn(name, lab, prob, edges, res, tree_ok)
    if res is not None and metric == "cosine":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            c = SK[0](copy=True, **kw).fit(X.astype(np.float64)).labels_
        info(f"{name}: HDBSCAN(metric='cosine') on the rows, 1 - cos in double: "
             f"{'the same partition' if same_partition(lab, c) else describe(lab, c)}")


def tree_check(SK, name, lab, prob, score, edges, kw):
    """scikit-learn's tree code on our MST, in our order, gives our labels,
    probabilities and GLOSH scores: True, False, or None when it failed
    (scikit-learn 1.9.1's epsilon_search TypeError)."""
    try:
        t_lab, t_prob, t_score = sklearn_tree(SK, len(lab), edges, kw)
    except Exception as e:      # its epsilon_search's TypeError; a malformed MST fails the MST check
        skip(name, f"scikit-learn's tree code on our MST raised {type(e).__name__}: {e}")
        return None
    defined = ~np.isnan(t_score)
    return check(f"{name}: scikit-learn's tree code on our MST gives our labels, probabilities, GLOSH",
                 np.array_equal(lab, renumber(t_lab)) and max_diff(prob, t_prob) <= PROB_TOL
                 and max_diff(score[defined], t_score[defined]) <= PROB_TOL,
                 f"{describe(lab, t_lab)}; probability max diff {max_diff(prob, t_prob):.3g}, "
                 f"GLOSH max diff {max_diff(score[defined], t_score[defined]):.3g}"
                 + (f" ({int((~defined).sum())} rows under an infinite lambda_max only bounded)"
                    if (~defined).any() else ""))


def condensed_check(conn, SK, name, source, kw, device, n, edges):
    """gpu_hdbscan_tree's rows on device are scikit-learn's _condense_tree
    of our MST in our order, row for row in its order: parent, child (a
    cluster n + number, or a row's id), lambda bit for bit, child_size."""
    _, MST_edge_dtype, make_single_linkage, condense, _ = SK
    mst = np.empty(len(edges), dtype=MST_edge_dtype)
    mst["current_node"], mst["next_node"], mst["distance"] = edges["a"], edges["b"], edges["w"]
    ct = condense(make_single_linkage(mst), kw.get("min_cluster_size", 5))
    try:
        rows = copy_out(conn, call_sql("gpu_hdbscan_tree", source, kw, device,
                                       "parent, child, id, lambda, child_size"))
    except Exception as e:      # psycopg.Error: the call's message
        return check(f"{name}: gpu_hdbscan_tree on {device}", False, str(e).strip()[:300])
    parent = np.array([n + int(r[0]) for r in rows], dtype=np.int64)
    child = np.array([int(r[2]) if r[1] is None else n + int(r[1]) for r in rows], dtype=np.int64)
    lam = np.array([float(r[3]) for r in rows])
    size = np.array([int(r[4]) for r in rows], dtype=np.int64)
    same = (len(rows) == len(ct) and np.array_equal(parent, ct["parent"]) and np.array_equal(child, ct["child"])
            and np.array_equal(lam, ct["value"]) and np.array_equal(size, ct["cluster_size"]))
    first = next((i for i in range(min(len(rows), len(ct)))
                  if (parent[i], child[i], size[i]) != (ct["parent"][i], ct["child"][i], ct["cluster_size"][i])
                  or lam[i] != ct["value"][i]), None)
    return check(f"{name}: gpu_hdbscan_tree on {device} = scikit-learn's condensed tree of our MST, row for row",
                 same, f"{len(rows)} rows against {len(ct)}; first difference at row {first}")


def versus_sklearn(name, lab, prob, edges, res, tree_ok):
    """Stock scikit-learn's result res against ours: the MST's weights, then
    the labels and probabilities; a difference that the order of equal
    weights explains (same weights, tree_ok) is a TIE."""
    s_lab, s_prob, s_w, secs = res
    w = np.sort(edges["w"])
    same_w = len(s_w) == len(w) and np.array_equal(s_w, w)
    check(f"{name}: MST weights (sorted) = scikit-learn's _single_linkage_tree_['value']", same_w,
          f"{len(s_w)} weights" + ("" if same_w or len(s_w) != len(w) else
                                   f", {int((s_w != w).sum())} differ, largest by {max_diff(s_w, w):.3g}"))
    part = same_partition(lab, s_lab)
    detail = (f"scikit-learn {secs:.2f} s; {describe(lab, s_lab)}; "
              + (f"probability max diff {max_diff(prob, s_prob):.3g} "
                 f"({int((np.abs(prob - s_prob) > PROB_TOL).sum())} rows over 1e-12)" if part else "labels differ on "
                 f"{int((renumber(lab) != renumber(s_lab)).sum())} rows"))
    if part and max_diff(prob, s_prob) <= PROB_TOL:
        check(f"{name}: = scikit-learn HDBSCAN (labels up to renumbering, probabilities to 1e-12)", True, detail)
    elif same_w and tree_ok:
        ties.append(name)
        report.passed += 1
        print(f"TIE   {name}: differs from scikit-learn HDBSCAN by the order of equal MST weights alone "
              f"(same weights; its tree code on our MST gives ours)  ({detail})", flush=True)
    else:
        check(f"{name}: = scikit-learn HDBSCAN (labels up to renumbering, probabilities to 1e-12)", False, detail)


def stock(SK, name, X, kw):
    """run_sklearn's result, or None (skipped, and why) when it would take
    too long or fails (scikit-learn 1.9.1's epsilon_search TypeError)."""
    est = sklearn_estimate_s(*X.shape, kw.get("metric", "euclidean"))
    allowed = min(CASE_S, BUDGET_S - (time.perf_counter() - T0))
    if est > allowed:
        skip(name, f"HDBSCAN(...).fit not run: ~{est:.0f} s estimated, {max(allowed, 0):.0f} s allowed")
        return None
    try:
        res = run_sklearn(SK, X, kw)
    except Exception as e:      # its epsilon_search's TypeError, or another failure of its own
        skip(name, f"scikit-learn's HDBSCAN raised {type(e).__name__}: {e}")
        return None
    info(f"{name}: scikit-learn {res[3]:.2f} s (estimated {est:.2f} s)")
    return res


def skip(name, why):
    skipped.append(name)
    print(f"SKIP  {name}: {why}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dry-run", action="store_true",
                    help="no server: the cases, scikit-learn on them, the reference for the small ones")
    args = ap.parse_args()
    SK, why = sklearn_hdbscan()
    import sklearn
    print(f"compare_hdbscan_sklearn: seed {SEED} (HDBSCAN_CMP_SEED={SEED} replays it); scikit-learn "
          f"{sklearn.__version__}, numpy {np.__version__}; budget {BUDGET_S:.0f} s, {CASE_S:.0f} s a case",
          flush=True)
    if SK is None:
        check("scikit-learn's HDBSCAN is there", False, why)
        if args.dry_run:
            for name, X, kw in cases(np.random.default_rng(SEED)):
                info(f"{name} (n={X.shape[0]} d={X.shape[1]}; {describe_kw(kw)}); scikit-learn ~"
                     f"{sklearn_estimate_s(*X.shape, kw.get('metric', 'euclidean')):.1f} s")
        return summary("compare_hdbscan_sklearn")
    conn, devices = None, ["ref"]
    if not args.dry_run:
        conn = connect()
        devices = ["cpu"] + (["gpu"] if gpu_usable(conn) else [])
        info(f"devices: {', '.join(devices)}"
             + ("" if "gpu" in devices else " (gpuclust_info(): no usable GPU; GPU = CPU not checked)"))
    for name, X, kw in cases(np.random.default_rng(SEED)):
        try:
            compare_case(conn, SK, devices, name, X, kw, args.dry_run)
        except Exception as e:      # a failure of this script or of scikit-learn: the case fails, the run goes on
            check(f"{name}: compared", False, f"{type(e).__name__}: {e}")
    if conn is not None:
        conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
    print(f"\n{len(ties)} ties (TIE above, counted as passes: {', '.join(ties) or 'none'}); "
          f"{len(skipped)} skipped (SKIP above); {time.perf_counter() - T0:.0f} s", flush=True)
    return summary("compare_hdbscan_sklearn")


if __name__ == "__main__":
    sys.exit(main())
