#!/usr/bin/env python3
"""
Writes the HDBSCAN fixtures: small inputs and scikit-learn's HDBSCAN
outputs on them (scikit-learn 1.3 or later; Debian 12's 1.2 has none), for
the core's unit tests (test/unit/test_hdbscan.c reads them from
test/data/hdbscan/).  Run it where a current scikit-learn is installed (the
GPU machine's python3):

    python3 test/gpu/make_hdbscan_fixtures.py OUTDIR

One file per case, plain text:

    gpuclust-hdbscan-fixture 1
    name NAME
    sklearn VERSION
    n N d D
    min_cluster_size M
    min_samples S            (as scikit-learn used it: min_cluster_size when None)
    epsilon E
    method eom|leaf
    allow_single_cluster 0|1
    alpha A
    metric euclidean|cosine
    X                        then N lines of D float32 values (%.9g: exact)
    labels                   then one line of N labels (-1: noise)
    probabilities            then one line of N values (%.17g)
    core                     then one line of N core distances (%.17g)
    mst                      then one line of the N-1 sorted mutual-
                             reachability weights of scikit-learn's tree
    single_linkage           then one line of scikit-learn's single-linkage
                             tree, N-1 rows of "left right value" in its
                             own order (its order of equal weights is its
                             unstable argsort's)
    end

The inputs are float32 values; scikit-learn computes on them in double,
as gpuclust's HDBSCAN does.  The seeds are fixed, so the files are the same
on every run of one scikit-learn.
"""
import os
import sys

import numpy as np
import sklearn
from sklearn.cluster import HDBSCAN
from sklearn.datasets import make_blobs
from sklearn.neighbors import NearestNeighbors


def blobs(n, d, centers, std, seed, noise=0, box=None):
    X, _ = make_blobs(n_samples=n, n_features=d, centers=centers,
                      cluster_std=std, random_state=seed)
    if noise:
        rng = np.random.default_rng(seed + 1000)
        lo, hi = X.min(0), X.max(0)
        X = np.vstack([X, rng.uniform(lo, hi, size=(noise, d))])
    return X.astype(np.float32)


def cases():
    rng = np.random.default_rng(7)
    yield "blobs2d", blobs(300, 2, 4, [0.3, 0.8, 1.5, 0.5], 1, noise=30), {}
    yield "blobs2d_mcs15", blobs(1500, 2, 8, 0.6, 2, noise=150), dict(min_cluster_size=15)
    dens = np.vstack([rng.normal(0, 0.1, (300, 2)), rng.normal(3, 1.0, (300, 2)),
                      rng.normal((-4, 4), 0.4, (200, 2)),
                      rng.uniform(-8, 8, (100, 2))]).astype(np.float32)
    yield "densities", dens, dict(min_cluster_size=10, min_samples=5)
    yield "noise_only", rng.uniform(0, 1, (200, 2)).astype(np.float32), {}
    base = rng.normal(0, 1, (20, 2)).astype(np.float32)
    dups = np.vstack([base[rng.integers(0, 20, 180)],
                      rng.normal(5, 1, (20, 2)).astype(np.float32)])
    yield "duplicates", dups.astype(np.float32), dict(min_samples=3)
    yield "duplicates_ms10", dups.astype(np.float32), dict(min_cluster_size=8, min_samples=10)
    g = np.array([(i, j) for i in range(12) for j in range(12)], dtype=np.float32)
    yield "lattice", g, {}
    g2 = np.vstack([g, g + np.float32(20)]).astype(np.float32)
    yield "lattice_two", g2, dict(min_cluster_size=10)
    yield "d1", blobs(400, 1, 5, 0.4, 3, noise=20), dict(min_cluster_size=8)
    yield "d3", blobs(600, 3, 6, 0.7, 4, noise=40), dict(min_cluster_size=10)
    yield "d8", blobs(500, 8, 5, 1.0, 5, noise=30), dict(min_cluster_size=10, min_samples=4)
    yield "d64", blobs(300, 64, 4, 2.0, 6, noise=20), dict(min_cluster_size=8)
    X = blobs(400, 2, 6, [0.2, 0.3, 0.5, 1.0, 1.2, 0.4], 8, noise=40)
    yield "epsilon_eom", X, dict(cluster_selection_epsilon=1.5)
    yield "leaf", X, dict(cluster_selection_method="leaf")
    yield "leaf_epsilon", X, dict(cluster_selection_method="leaf", cluster_selection_epsilon=1.0)
    yield "alpha_half", X, dict(alpha=0.5)
    yield "alpha_two", X, dict(alpha=2.0, min_samples=3)
    yield "min_samples_1", X, dict(min_samples=1)
    yield "mcs2", X[:120], dict(min_cluster_size=2)
    one = blobs(250, 2, 1, 1.0, 9)
    yield "single_blob", one, {}
    yield "allow_single", one, dict(allow_single_cluster=True)
    yield "allow_single_eps", one, dict(allow_single_cluster=True, cluster_selection_epsilon=0.5)
    yield "allow_single_leaf", one, dict(allow_single_cluster=True, cluster_selection_method="leaf")
    yield "allow_single_many", X, dict(allow_single_cluster=True)
    yield "n2", np.array([[0, 0], [1, 1]], np.float32), dict(min_cluster_size=2, min_samples=1)
    yield "n3", np.array([[0, 0], [0, 1], [5, 5]], np.float32), dict(min_cluster_size=2, min_samples=2)
    yield "n5_ms5", blobs(5, 2, 1, 1.0, 10), dict(min_cluster_size=2, min_samples=5)
    yield "cosine", blobs(300, 8, 4, 1.0, 11) + np.float32(3), dict(metric="cosine", min_cluster_size=8)


def fmt17(v):
    return " ".join("%.17g" % x for x in v)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, X, kw in cases():
        mcs = kw.get("min_cluster_size", 5)
        ms = kw.get("min_samples") or mcs
        eps = kw.get("cluster_selection_epsilon", 0.0)
        method = kw.get("cluster_selection_method", "eom")
        single = kw.get("allow_single_cluster", False)
        alpha = kw.get("alpha", 1.0)
        metric = kw.get("metric", "euclidean")
        try:
            h = HDBSCAN(copy=True, **kw).fit(X)
        except Exception as e:  # scikit-learn's own failures are skipped
            print("%-20s skipped: scikit-learn failed: %r" % (name, e))
            continue
        Xd = X.astype(np.float64)
        nn = NearestNeighbors(n_neighbors=ms, metric=metric).fit(Xd)
        core = nn.kneighbors(Xd, ms)[0][:, -1]
        slt = h._single_linkage_tree_
        with open(os.path.join(out, name + ".txt"), "w") as f:
            f.write("gpuclust-hdbscan-fixture 1\n")
            f.write("name %s\nsklearn %s\n" % (name, sklearn.__version__))
            f.write("n %d d %d\n" % X.shape)
            f.write("min_cluster_size %d\nmin_samples %d\n" % (mcs, ms))
            f.write("epsilon %.17g\nmethod %s\n" % (eps, method))
            f.write("allow_single_cluster %d\nalpha %.17g\n" % (int(single), alpha))
            f.write("metric %s\nX\n" % metric)
            for row in X:
                f.write(" ".join("%.9g" % v for v in row) + "\n")
            f.write("labels\n" + " ".join(str(int(v)) for v in h.labels_) + "\n")
            f.write("probabilities\n" + fmt17(h.probabilities_) + "\n")
            f.write("core\n" + fmt17(core) + "\n")
            f.write("mst\n" + fmt17(np.sort(slt["value"])) + "\n")
            f.write("single_linkage\n" + " ".join(
                "%d %d %.17g" % (r["left_node"], r["right_node"], r["value"])
                for r in slt) + "\n")
            f.write("end\n")
        print("%-20s n=%5d d=%2d clusters=%d noise=%d" %
              (name, X.shape[0], X.shape[1], h.labels_.max() + 1,
               int((h.labels_ < 0).sum())))


if __name__ == "__main__":
    main()
