#!/usr/bin/python3
"""compare_sklearn.py — gpuclust against scikit-learn on real data.

Run against a running server with the extension installed (connection from
the libpq environment: PGHOST, PGPORT, PGUSER, PGDATABASE ...):

    eval "$(test/lib/pg_server.sh start)"; /usr/bin/python3 test/server/compare_sklearn.py

Data: the 135,233 world cities of test/data (GeoNames, CC BY 4.0), features
ARRAY[lon, lat]::real[]; scikit-learn gets the very same float32 values, read
back from the table.

DBSCAN (eps 0.25, min_pts 10): same core points, same partition of the core
points (a bijection between our cluster ids and scikit-learn's), the same
noise points, 576 clusters and 37,864 noise points.  Border points may differ:
scikit-learn gives a border point to the first cluster that reaches it, we to
its nearest core point (ties: lowest input position); the differences are
counted, and our rule is checked against a brute-force float32 reference.

Cosine DBSCAN (metric => 'cosine' against DBSCAN(metric='cosine')): 20,000
embedding-like rows (16-d, 20 directions with noise, lengths 0.5 to 20):
the same core points, partition of the core points, clusters and noise, up
to rows within rounding of eps (scikit-learn computes 1 - cos in double
from the rows, we in float32 on the unit rows: metric.h); such rows are
counted, and must be few.

k-means (n_init 10, k = 10 and k = 100): our inertia (sum of distance²) is at
most 1.01 × scikit-learn's KMeans(n_init=10, random_state=0).

k-distances (gpu_kdistance against NearestNeighbors(n_neighbors=k)
.kneighbors on its training set, whose first neighbour is the row itself,
column k - 1): on 20,000 3-d integer rows, where every float32 step is exact,
the sorted k-distances equal scikit-learn's rounded to float32 bit for bit;
on the world cities (k = 10 = min_pts) they are counted equal in float32,
and the rest must be within float32 rounding (ours sums in float32, as DBSCAN
decides, scikit-learn's kd-tree in double).

Silhouette (gpu_silhouette against silhouette_score): the first 5,000 cities
labelled by gpu_kmeans (k = 8) and by gpu_dbscan (noise left out), to 1e-6.

Cluster scores (gpu_cluster_scores against davies_bouldin_score,
calinski_harabasz_score and the inertia, the sum of squared distances to
the clusters' means): the same two labellings (its silhouette also
silhouette_score's to 1e-6, and gpu_silhouette's bit for bit), and fresh
random blobs labelled by blob, with an empty label and noise rows; to 1e-9
relative (Davies-Bouldin, where scikit-learn's distances between nearly
coincident centres lose digits, against its formula with |a - b|).

Weighted k-means (sample weights = the cities' population, zeros included;
k = 10 and k = 100): from the same given initial centroids (init_centroids,
KMeans(init=C0, n_init=1, sample_weight=w)), at least 99.9% of the labels
agree and the weighted inertia (sum of w × distance², float64, from each
side's own centres and labels) is within 1e-4 of scikit-learn's; with
k-means++ (n_init 10) our weighted inertia is at most 1.01 × scikit-learn's.

Spherical k-means (metric => 'cosine', 20,000 16-d rows around 20 directions
at lengths 0.5 to 20): scikit-learn has no spherical k-means (KMeans on
L2-normalized rows differs from it by not normalizing the centres, which
changes the assignment), so from the same given initial centroids it is
compared with a small numpy spherical Lloyd in float64 (argmax cosine,
normalized means, until no label changes): at least 99.9% of the labels
agree, the sum of cosine distances is within 1e-5 and the centres within
1e-4; with k-means++ (n_init 10) our sum of cosine distances is at most 1.01
× that of KMeans(n_init=10) on the unit rows, its centres normalized.

Prints PASS/FAIL per check and "N passed, N failed"; exits 1 on any failure.
"""
import os
import sys
import time

import numpy as np
import psycopg
from scipy.spatial import cKDTree
from sklearn.cluster import DBSCAN, KMeans
from sklearn.metrics import calinski_harabasz_score, davies_bouldin_score, silhouette_score
from sklearn.neighbors import NearestNeighbors

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from cities import N_CITIES, fetch_features, load_cities  # noqa: E402
from report import check, info, summary  # noqa: E402

EPS, MIN_PTS = 0.25, 10
EXPECT_CLUSTERS, EXPECT_NOISE = 576, 37864
KMEANS_KS = (10, 100)
KMEANS_N_INIT = 10
KMEANS_SLACK = 1.01
TABLE = "gc_cmp_cities"


def timed(cur, sql, params=None):
    t0 = time.perf_counter()
    cur.execute(sql, params)
    rows = cur.fetchall()
    return rows, time.perf_counter() - t0


def dist2_f32(a, b):
    """The core's distance: float32 sum of squared differences, dimension order."""
    s = np.zeros(a.shape[0], dtype=np.float32)
    for j in range(a.shape[1]):
        t = (a[:, j] - b[:, j]).astype(np.float32)
        s = (s + t * t).astype(np.float32)
    return s


def compare_dbscan(cur, ids, X):
    pos = {int(i): p for p, i in enumerate(ids)}
    n = len(ids)
    rows, secs = timed(cur, "SELECT id, cluster_id, is_core FROM gpu_dbscan("
                       f"'SELECT id, features FROM {TABLE} ORDER BY id', %s, %s)",
                       (EPS, MIN_PTS))
    info(f"gpu_dbscan eps={EPS} min_pts={MIN_PTS}: {len(rows)} rows in {secs*1e3:.0f} ms")
    if not check("gpu_dbscan returns one row per input row",
                 len(rows) == n and len({r[0] for r in rows}) == n,
                 f"{len(rows)} rows for {n} inputs"):
        return
    ours = np.full(n, -2, dtype=np.int64)
    ours_core = np.zeros(n, dtype=bool)
    for rid, cid, core in rows:
        p = pos[int(rid)]
        ours[p] = -1 if cid is None else cid
        ours_core[p] = bool(core)

    t0 = time.perf_counter()
    sk = DBSCAN(eps=EPS, min_samples=MIN_PTS).fit(X)
    info(f"sklearn DBSCAN: {(time.perf_counter() - t0)*1e3:.0f} ms")
    theirs = sk.labels_.astype(np.int64)
    theirs_core = np.zeros(n, dtype=bool)
    theirs_core[sk.core_sample_indices_] = True

    # core points
    diff = np.flatnonzero(ours_core != theirs_core)
    detail = f"{ours_core.sum()} ours, {theirs_core.sum()} sklearn"
    if len(diff):
        detail += f"; {len(diff)} differ, e.g. ids {[int(ids[p]) for p in diff[:5]]}"
        # a boundary case? count neighbours in float32 and in float64
        tree = cKDTree(X.astype(np.float64))
        for p in diff[:5]:
            cand = np.array(tree.query_ball_point(X[p].astype(np.float64), EPS * 1.001))
            d32 = dist2_f32(np.repeat(X[p:p + 1], len(cand), 0), X[cand])
            d64 = ((X[cand].astype(np.float64) - X[p].astype(np.float64)) ** 2).sum(1)
            info(f"  id {ids[p]}: neighbours float32 {int((d32 <= np.float32(EPS * EPS)).sum())}"
                 f", float64 {int((d64 <= EPS * EPS).sum())}")
    check("DBSCAN: same core points", len(diff) == 0, detail)

    # partition of the core points: a bijection between the label sets
    both = ours_core & theirs_core
    pairs = set(zip(ours[both].tolist(), theirs[both].tolist()))
    o_labels = set(ours[both].tolist())
    t_labels = set(theirs[both].tolist())
    bij = len(pairs) == len(o_labels) == len(t_labels)
    check("DBSCAN: same partition of core points (bijective label map)", bij,
          f"{len(pairs)} label pairs, {len(o_labels)} ours, {len(t_labels)} sklearn")
    o2t = dict(pairs) if bij else {}

    n_ours = len(set(ours[ours >= 0].tolist()))
    n_theirs = len(set(theirs[theirs >= 0].tolist()))
    check(f"DBSCAN: cluster count = sklearn = {EXPECT_CLUSTERS}",
          n_ours == n_theirs == EXPECT_CLUSTERS,
          f"ours {n_ours}, sklearn {n_theirs}")
    check("DBSCAN: cluster ids are 0 .. n-1",
          n_ours == 0 or (ours[ours >= 0].min() == 0 and ours.max() == n_ours - 1))
    noise_o, noise_t = int((ours == -1).sum()), int((theirs == -1).sum())
    check(f"DBSCAN: noise count = sklearn = {EXPECT_NOISE}",
          noise_o == noise_t == EXPECT_NOISE, f"ours {noise_o}, sklearn {noise_t}")
    check("DBSCAN: same noise points", np.array_equal(ours == -1, theirs == -1),
          f"{int(((ours == -1) != (theirs == -1)).sum())} differ")

    # border points: nearest core point (float32 distance, ties lowest position)
    border = np.flatnonzero(~ours_core & (ours >= 0))
    core_idx = np.flatnonzero(ours_core)
    tree = cKDTree(X[core_idx].astype(np.float64))
    eps2 = np.float32(EPS * EPS)
    wrong = 0
    for p in border:
        cand = core_idx[np.array(tree.query_ball_point(X[p].astype(np.float64),
                                                       EPS * 1.001), dtype=np.int64)]
        d = dist2_f32(np.repeat(X[p:p + 1], len(cand), 0), X[cand])
        ok = d <= eps2
        cand, d = cand[ok], d[ok]
        if len(cand) == 0:
            wrong += 1
            continue
        best = cand[d == d.min()].min()
        if ours[best] != ours[p]:
            wrong += 1
    check("DBSCAN: each border point joins its nearest core point's cluster",
          wrong == 0, f"{len(border)} border points, {wrong} wrong")
    if bij:
        b = np.flatnonzero(~ours_core & (ours >= 0) & (theirs >= 0))
        moved = sum(1 for p in b if o2t.get(int(ours[p])) != int(theirs[p]))
        info(f"DBSCAN: border points assigned differently from sklearn "
             f"(allowed: sklearn assigns by discovery order): {moved} of {len(b)}")


COS_N, COS_D, COS_CENTRES, COS_EPS, COS_MIN_PTS = 20000, 16, 20, 0.02, 10


def embeddings_table(cur, table, seed, n, d, directions, noise):
    """n float32 rows of d values around random unit directions (Gaussian
    noise of the given scale), at lengths 0.5 to 20, loaded into table
    (id int, f real[]); returns them and the generator, to draw on."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(directions, d))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    X = centres[rng.integers(0, directions, n)] + rng.normal(scale=noise, size=(n, d))
    X *= rng.uniform(0.5, 20.0, size=(n, 1))
    X = X.astype(np.float32)
    cur.execute(f"DROP TABLE IF EXISTS {table}")
    cur.execute(f"CREATE TABLE {table} (id int, f real[])")
    with cur.copy(f"COPY {table} (id, f) FROM STDIN") as cp:
        for i in range(n):
            cp.write_row((i, X[i].tolist()))
    return X, rng


def compare_dbscan_cosine(cur):
    X, _ = embeddings_table(cur, "gc_cmp_cos", 7, COS_N, COS_D, COS_CENTRES, 0.06)
    rows, secs = timed(cur, "SELECT id, cluster_id, is_core FROM gpu_dbscan("
                       "'SELECT id, f FROM gc_cmp_cos', %s, %s, metric => 'cosine')",
                       (COS_EPS, COS_MIN_PTS))
    ours = np.full(COS_N, -2, dtype=np.int64)
    ours_core = np.zeros(COS_N, dtype=bool)
    for rid, cid, core in rows:
        ours[rid] = -1 if cid is None else cid
        ours_core[rid] = bool(core)
    t0 = time.perf_counter()
    sk = DBSCAN(eps=COS_EPS, min_samples=COS_MIN_PTS, metric="cosine", algorithm="brute").fit(X)
    sk_secs = time.perf_counter() - t0
    info(f"cosine DBSCAN n={COS_N} d={COS_D} eps={COS_EPS} min_pts={COS_MIN_PTS}: "
         f"gpu_dbscan {secs*1e3:.0f} ms, sklearn {sk_secs*1e3:.0f} ms")
    theirs = sk.labels_.astype(np.int64)
    theirs_core = np.zeros(COS_N, dtype=bool)
    theirs_core[sk.core_sample_indices_] = True

    # rows with a neighbour within rounding of eps (double cosine distance)
    X64 = X.astype(np.float64)
    U64 = X64 / np.linalg.norm(X64, axis=1, keepdims=True)
    near = np.zeros(COS_N, dtype=bool)
    for a in range(0, COS_N, 2000):
        dist = 1.0 - U64[a:a + 2000] @ U64.T
        near[a:a + 2000] = (np.abs(dist - COS_EPS) < 4e-6).any(axis=1)
    diff = ours_core != theirs_core
    check("cosine DBSCAN: same core points, but for rows within rounding of eps",
          not (diff & ~near).any() and diff.sum() <= 10,
          f"{ours_core.sum()} ours, {theirs_core.sum()} sklearn, {int(diff.sum())} differ,"
          f" {int((diff & ~near).sum())} of them not near eps; {int(near.sum())} rows near eps")
    both = ours_core & theirs_core
    pairs = set(zip(ours[both].tolist(), theirs[both].tolist()))
    n_o, n_t = len(set(ours[both].tolist())), len(set(theirs[both].tolist()))
    check("cosine DBSCAN: same partition of the core points (bijective label map)",
          len(pairs) == n_o == n_t, f"{len(pairs)} label pairs, {n_o} ours, {n_t} sklearn")
    # a row's noise status also follows its neighbours' core status
    explained = near.copy()
    for p in np.flatnonzero(diff):
        explained |= (1.0 - U64 @ U64[p]) <= COS_EPS + 4e-6
    noise_diff = (ours == -1) != (theirs == -1)
    check("cosine DBSCAN: same noise points, but for rows within rounding of eps"
          " or beside a core point that is",
          not (noise_diff & ~explained).any() and noise_diff.sum() <= 10,
          f"ours {int((ours == -1).sum())}, sklearn {int((theirs == -1).sum())},"
          f" {int(noise_diff.sum())} differ")
    check("cosine DBSCAN: clusters and noise are not trivial",
          n_o >= 10 and 0 < (ours == -1).sum() < COS_N // 2,
          f"{n_o} clusters, {int((ours == -1).sum())} noise")
    cur.execute("DROP TABLE gc_cmp_cos")


def compare_kmeans(cur, X, k):
    rows, secs = timed(
        cur,
        "SELECT count(*), count(DISTINCT cluster_id), sum(distance * distance)"
        " FROM gpu_kmeans(%s, %s, 300, 1e-4, 'k-means++', %s, 0)",
        (f"SELECT id, features FROM {TABLE}", k, KMEANS_N_INIT))
    cnt, nclus, ours = rows[0]
    t0 = time.perf_counter()
    km = KMeans(n_clusters=k, n_init=KMEANS_N_INIT, random_state=0).fit(X)
    sk_secs = time.perf_counter() - t0
    X64 = X.astype(np.float64)
    theirs = float(((X64 - km.cluster_centers_.astype(np.float64)[km.labels_]) ** 2).sum())
    info(f"k-means k={k} n_init={KMEANS_N_INIT}: gpu_kmeans {secs*1e3:.0f} ms, "
         f"sklearn {sk_secs*1e3:.0f} ms ({km.n_iter_} iterations)")
    check(f"k-means k={k}: one row per input, {k} clusters used",
          cnt == len(X) and nclus == k, f"{cnt} rows, {nclus} clusters")
    check(f"k-means k={k}: inertia <= {KMEANS_SLACK} x sklearn",
          ours is not None and ours <= KMEANS_SLACK * theirs,
          f"ours {ours:.6g}, sklearn {theirs:.6g}, ratio {ours / theirs:.4f}"
          if ours is not None else "no inertia")


def compare_kdistance(cur, X):
    # integer rows: every float32 difference, square and sum is exact
    rng = np.random.default_rng(17)
    Z = rng.integers(0, 300, size=(20000, 3)).astype(np.float32)
    cur.execute("CREATE TEMP TABLE gc_cmp_int AS SELECT i AS id, ARRAY[x, y, z]::real[] AS f "
                "FROM unnest(%s::int[], %s::real[], %s::real[], %s::real[]) AS t(i, x, y, z)",
                (list(range(len(Z))), Z[:, 0].tolist(), Z[:, 1].tolist(), Z[:, 2].tolist()))
    for k in (1, 2, 10, 50):
        cur.execute("SELECT kdistance FROM gpu_kdistance('SELECT id, f FROM gc_cmp_int', %s::int) "
                    "ORDER BY rank", (k,))
        ours = np.array([r[0] for r in cur.fetchall()], dtype=np.float64).astype(np.float32)
        d, _ = NearestNeighbors(n_neighbors=k).fit(Z).kneighbors(Z)
        theirs = np.sort(d[:, k - 1]).astype(np.float32)
        check(f"k-distance k={k}, 20,000 3-d integer rows: = NearestNeighbors, float32 bit for bit",
              len(ours) == len(theirs) and np.array_equal(ours, theirs),
              f"{int((ours != theirs).sum()) if len(ours) == len(theirs) else 'length'} differ")
    cur.execute("DROP TABLE gc_cmp_int")

    k = MIN_PTS
    rows, secs = timed(cur, f"SELECT kdistance FROM gpu_kdistance('SELECT id, features FROM {TABLE}', {k}) ORDER BY rank")
    ours = np.array([r[0] for r in rows], dtype=np.float64)
    t0 = time.perf_counter()
    d, _ = NearestNeighbors(n_neighbors=k).fit(X).kneighbors(X)
    sk_secs = time.perf_counter() - t0
    theirs = np.sort(d[:, k - 1])
    o32, t32 = ours.astype(np.float32), theirs.astype(np.float32)
    same = int((o32 == t32).sum())
    rel = float(np.max(np.abs(ours - theirs) / np.maximum(theirs, 1e-30))) if len(ours) == len(theirs) else 1.0
    info(f"k-distance k={k} on {len(X)} cities: gpu_kdistance {secs*1e3:.0f} ms, NearestNeighbors {sk_secs*1e3:.0f} ms; "
         f"{same} of {len(X)} equal in float32, largest relative difference {rel:.2e}")
    check(f"k-distance k={k}, world cities: equal in float32 but for float32 rounding (relative <= 2^-21)",
          len(ours) == len(theirs) and rel <= 2.0 ** -21, f"{same} of {len(X)} equal, max relative {rel:.2e}")


def fetch_labels(cur, labels_sql, pos, n):
    """The labels query's (id, label) rows as an array of n labels by
    position (pos: id -> position); -1 where the label is NULL."""
    cur.execute(labels_sql)
    lab = np.full(n, -1, dtype=np.int64)
    for i, c in cur.fetchall():
        if c is not None:
            lab[pos[int(i)]] = c
    return lab


def city_labellings(ids, X):
    """The first 5,000 cities: their source query, rows (float64) and
    positions by id, and the two labellings of them that the silhouette and
    the scores are compared on (name, labels query)."""
    src = f"SELECT id, features FROM {TABLE} WHERE id <= {int(ids[4999])}"
    sub = X[:5000].astype(np.float64)
    pos = {int(i): j for j, i in enumerate(ids[:5000])}
    return src, sub, pos, (
        ("gpu_kmeans k=8", f"SELECT id, cluster_id FROM gpu_kmeans($${src}$$, 8, seed => 1)"),
        ("gpu_dbscan, noise left out", f"SELECT id, cluster_id FROM gpu_dbscan($${src}$$, 1.0, 5)"))


def compare_silhouette(cur, ids, X):
    src, sub, pos, labellings = city_labellings(ids, X)
    for name, labels_sql in labellings:
        lab = fetch_labels(cur, labels_sql, pos, 5000)
        keep = lab >= 0
        (ours, n, _, sampled), = timed(cur, "SELECT * FROM gpu_silhouette(%s, %s)", (src, labels_sql))[0]
        t0 = time.perf_counter()
        theirs = silhouette_score(sub[keep], lab[keep])
        sk_secs = time.perf_counter() - t0
        info(f"silhouette {name}: ours {ours:.12f}, sklearn {theirs:.12f} ({sk_secs*1e3:.0f} ms)")
        check(f"silhouette {name}, 5,000 cities: = silhouette_score to 1e-6",
              abs(ours - theirs) <= 1e-6 and n == int(keep.sum()) and not sampled,
              f"ours {ours:.9f}, sklearn {theirs:.9f}, {n} rows")


def sklearn_scores(Xl, lab):
    """scikit-learn's Davies-Bouldin and Calinski-Harabasz, and the inertia
    (squared distances to the clusters' means), of the labelled rows."""
    inertia = sum(float(((Xl[lab == c] - Xl[lab == c].mean(axis=0)) ** 2).sum())
                  for c in np.unique(lab))
    return davies_bouldin_score(Xl, lab), calinski_harabasz_score(Xl, lab), inertia


def davies_bouldin_direct(Xl, lab):
    """davies_bouldin_score with the centres' distances taken as |a - b|:
    scikit-learn's sqrt(|a|^2 - 2 a.b + |b|^2) loses digits when two
    centres nearly coincide, beyond the 1e-9 compared."""
    cs = np.unique(lab)
    C = np.array([Xl[lab == c].mean(axis=0) for c in cs])
    intra = np.array([np.linalg.norm(Xl[lab == c] - C[i], axis=1).mean() for i, c in enumerate(cs)])
    D = np.linalg.norm(C[:, None, :] - C[None, :, :], axis=2)
    if np.allclose(intra, 0) or np.allclose(D, 0):
        return 0.0
    D[D == 0] = np.inf
    return float(np.max((intra[:, None] + intra[None, :]) / D, axis=1).mean())


def rel_diff(a, b):
    return abs(a - b) / max(abs(b), 1e-300)


def check_scores(name, got, X64, lab, sil_too):
    """got: gpu_cluster_scores' row; lab -1 for noise."""
    keep = lab >= 0
    sil, db, ch, inertia, n, clusters, sampled = got
    sdb, sch, sin = sklearn_scores(X64[keep], lab[keep])
    if rel_diff(db, sdb) > 1e-9:
        ddb = davies_bouldin_direct(X64[keep], lab[keep])
        info(f"scores {name}: Davies-Bouldin {db!r}, scikit-learn's {sdb!r}, with direct "
             f"differences {ddb!r}")
        sdb = ddb
    worst = max(rel_diff(db, sdb), rel_diff(ch, sch), rel_diff(inertia, sin))
    info(f"scores {name}: Davies-Bouldin {db:.12g} (sklearn {sdb:.12g}), Calinski-Harabasz "
         f"{ch:.12g} ({sch:.12g}), inertia {inertia:.12g} ({sin:.12g}); largest relative difference {worst:.1e}")
    ok = worst <= 1e-9 and n == int(keep.sum()) and clusters == len(np.unique(lab[keep]))
    if sil_too:
        ssil = silhouette_score(X64[keep], lab[keep])
        ok = ok and abs(sil - ssil) <= 1e-6 and not sampled
    check(f"gpu_cluster_scores {name}: = davies_bouldin_score, calinski_harabasz_score and the inertia "
          f"to 1e-9 relative" + (", silhouette_score to 1e-6" if sil_too else ""),
          ok, f"largest relative difference {worst:.1e}, {n} rows, {clusters} clusters")


def compare_scores(cur, ids, X):
    """gpu_cluster_scores against scikit-learn: the world cities labelled by
    gpu_kmeans and gpu_dbscan (noise left out), and fresh random blobs
    labelled by blob, with an empty label and noise rows."""
    src, sub, pos, labellings = city_labellings(ids, X)
    for name, labels_sql in labellings:
        lab = fetch_labels(cur, labels_sql, pos, 5000)
        got, = timed(cur, "SELECT * FROM gpu_cluster_scores(%s, %s)", (src, labels_sql))[0]
        sil_alone, = timed(cur, "SELECT silhouette FROM gpu_silhouette(%s, %s)", (src, labels_sql))[0]
        check_scores(f"{name}, 5,000 cities", got, sub, lab, True)
        check(f"gpu_cluster_scores {name}: its silhouette = gpu_silhouette's", got[0] == sil_alone[0],
              f"{got[0]!r} and {sil_alone[0]!r}")
    rng = np.random.default_rng(int(time.time()))
    for case in range(4):
        n, d, m = int(rng.integers(50, 3000)), int(rng.integers(1, 9)), int(rng.integers(2, 30))
        blob = rng.integers(0, m, n)
        Xr = (rng.normal(size=(n, d)) * rng.uniform(0.1, 10) +
              rng.normal(size=(m, d))[blob] * 10).astype(np.float32)
        lab = blob + 1                        # label 0 empty
        lab[rng.random(n) < 0.1] = -1         # noise, left out
        lab[:2] = [1, 2]
        cur.execute("DROP TABLE IF EXISTS gc_cmp_scores")
        cur.execute("CREATE TEMP TABLE gc_cmp_scores (id int, f real[], c int)")
        with cur.copy("COPY gc_cmp_scores (id, f, c) FROM STDIN") as cp:
            for i in range(n):
                cp.write_row((i, [float(v) for v in Xr[i]], None if lab[i] < 0 else int(lab[i])))
        got, = timed(cur, "SELECT * FROM gpu_cluster_scores('SELECT id, f FROM gc_cmp_scores', "
                          "'SELECT id, c FROM gc_cmp_scores', device => 'cpu')")[0]
        check_scores(f"fresh rows {case + 1} (n {n}, d {d}, {m} labels)", got,
                     Xr.astype(np.float64), lab, n <= 20000)
    cur.execute("DROP TABLE gc_cmp_scores")


KMEANS_W_AGREE = 0.999
KMEANS_W_REL = 1e-4


def weighted_inertia(X64, w, C, labels):
    return float((w * ((X64 - C[labels]) ** 2).sum(axis=1)).sum())


def compare_weighted_kmeans(cur, ids, X, w, k):
    X64 = X.astype(np.float64)
    # the initial centres: k distinct rows of positive weight, by a fixed draw
    rng = np.random.default_rng(k)
    pos = np.flatnonzero(w > 0)
    C0 = X[np.sort(rng.choice(pos, size=k, replace=False))]
    c0_sql = "{" + ",".join("{%r,%r}" % (float(a), float(b)) for a, b in C0) + "}"
    src = f"SELECT id, features, population::float8 FROM {TABLE} ORDER BY id"
    rows, secs = timed(
        cur, "SELECT id, cluster_id FROM gpu_kmeans(%s, %s, 300, 1e-4, init_centroids => %s)",
        (src, k, c0_sql))
    ours = dict(rows)
    lab = np.array([ours[i] for i in ids], dtype=np.int64)
    cur.execute("SELECT centroids, inertia FROM gpu_kmeans_fit(%s, %s, 300, 1e-4,"
                " init_centroids => %s)", (src, k, c0_sql))
    cent, fit_inertia = cur.fetchone()
    C = np.array(cent, dtype=np.float64)
    t0 = time.perf_counter()
    km = KMeans(n_clusters=k, init=C0, n_init=1, tol=1e-4, max_iter=300,
                algorithm="lloyd").fit(X, sample_weight=w)
    sk_secs = time.perf_counter() - t0
    ours_in = weighted_inertia(X64, w, C, lab)
    theirs = weighted_inertia(X64, w, km.cluster_centers_.astype(np.float64), km.labels_)
    agree = float((lab == km.labels_).mean())
    info(f"weighted k-means k={k}, given centroids: gpu_kmeans {secs*1e3:.0f} ms, "
         f"sklearn {sk_secs*1e3:.0f} ms ({km.n_iter_} iterations); labels agree {agree:.6f}, "
         f"weighted inertia ours {ours_in:.10g}, sklearn {theirs:.10g}")
    check(f"weighted k-means k={k}, given centroids: labels agree >= {KMEANS_W_AGREE}",
          agree >= KMEANS_W_AGREE, f"{agree:.6f}, {int((lab != km.labels_).sum())} differ")
    check(f"weighted k-means k={k}, given centroids: weighted inertia within {KMEANS_W_REL}",
          abs(ours_in - theirs) <= KMEANS_W_REL * theirs,
          f"ours {ours_in:.10g}, sklearn {theirs:.10g}, ratio {ours_in / theirs:.8f}")
    check(f"weighted k-means k={k}: the fit's inertia is the weighted sum",
          abs(fit_inertia - ours_in) <= 1e-6 * ours_in,
          f"fit {fit_inertia:.10g}, recomputed {ours_in:.10g}")
    # k-means++ (weighted seeding), best of n_init
    rows, secs = timed(
        cur, "SELECT inertia FROM gpu_kmeans_fit(%s, %s, 300, 1e-4, 'k-means++', %s, 0)",
        (src, k, KMEANS_N_INIT))
    ours_pp = rows[0][0]
    km = KMeans(n_clusters=k, n_init=KMEANS_N_INIT, random_state=0).fit(X, sample_weight=w)
    theirs_pp = weighted_inertia(X64, w, km.cluster_centers_.astype(np.float64), km.labels_)
    check(f"weighted k-means k={k}, k-means++ n_init={KMEANS_N_INIT}: weighted inertia <= {KMEANS_SLACK} x sklearn",
          ours_pp <= KMEANS_SLACK * theirs_pp,
          f"ours {ours_pp:.6g}, sklearn {theirs_pp:.6g}, ratio {ours_pp / theirs_pp:.4f}")


SPH_N = 20000
SPH_D = 16
SPH_CENTRES = 20
SPH_K = 20
SPH_AGREE = 0.999
SPH_REL = 1e-5


def spherical_lloyd(U, C0, w=None, max_iter=300):
    """Spherical k-means (Dhillon & Modha) in float64: rows U of unit length,
    centres normalized means; stops when no label changes (tol 0)."""
    C = C0 / np.linalg.norm(C0, axis=1, keepdims=True)
    labels = None
    for it in range(max_iter):
        new = np.argmax(U @ C.T, axis=1)
        if labels is not None and np.array_equal(new, labels):
            break
        labels = new
        M = np.zeros_like(C)
        np.add.at(M, labels, U if w is None else U * w[:, None])
        norm = np.linalg.norm(M, axis=1, keepdims=True)
        keep = norm[:, 0] > 0
        C[keep] = M[keep] / norm[keep]
    return C, labels, it + 1


def cosine_objective(U, C, labels):
    """sum of 1 - cos(row, its centre), centres normalized, float64"""
    Cn = C / np.linalg.norm(C, axis=1, keepdims=True)
    return float((1.0 - np.einsum("ij,ij->i", U, Cn[labels])).sum())


def compare_spherical_kmeans(cur):
    X, rng = embeddings_table(cur, "gc_cmp_sph", 11, SPH_N, SPH_D, SPH_CENTRES, 0.25)
    X64 = X.astype(np.float64)
    U = X64 / np.linalg.norm(X64, axis=1, keepdims=True)
    # the same initial centres on both sides: k rows by a fixed draw
    C0 = X[np.sort(rng.choice(SPH_N, size=SPH_K, replace=False))]
    c0_sql = "{" + ",".join("{" + ",".join(repr(float(v)) for v in row) + "}" for row in C0) + "}"
    # named: positionally an integer k (a smallint to psycopg) would pick the keyed form
    rows, secs = timed(cur, "SELECT id, cluster_id, distance FROM gpu_kmeans('SELECT id, f FROM gc_cmp_sph', "
                       "k => %s, max_iter => 300, tol => 0, init_centroids => %s, metric => 'cosine')",
                       (SPH_K, c0_sql))
    lab = np.zeros(SPH_N, dtype=np.int64)
    dist = np.zeros(SPH_N)
    for rid, cid, dd in rows:
        lab[rid], dist[rid] = cid, dd
    cur.execute("SELECT centroids, inertia, iterations FROM gpu_kmeans_fit('SELECT id, f FROM gc_cmp_sph', "
                "k => %s, max_iter => 300, tol => 0, init_centroids => %s, metric => 'cosine')",
                (SPH_K, c0_sql))
    cent, inertia, iters = cur.fetchone()
    C = np.array(cent, dtype=np.float64)
    t0 = time.perf_counter()
    Cr, labr, itr = spherical_lloyd(U, C0.astype(np.float64))
    ref_secs = time.perf_counter() - t0
    ours_obj, ref_obj = cosine_objective(U, C, lab), cosine_objective(U, Cr, labr)
    agree = float((lab == labr).mean())
    info(f"spherical k-means n={SPH_N} d={SPH_D} k={SPH_K} from given centroids: gpu_kmeans {secs*1e3:.0f} ms "
         f"({iters} iterations), numpy spherical Lloyd {ref_secs*1e3:.0f} ms ({itr} iterations); labels agree "
         f"{agree:.6f}; sum of cosine distances ours {ours_obj:.10g}, numpy {ref_obj:.10g}")
    check(f"spherical k-means k={SPH_K}, given centroids: labels agree with numpy spherical Lloyd >= {SPH_AGREE}",
          agree >= SPH_AGREE, f"{agree:.6f}, {int((lab != labr).sum())} differ")
    check(f"spherical k-means k={SPH_K}, given centroids: sum of cosine distances within {SPH_REL} of numpy's",
          abs(ours_obj - ref_obj) <= SPH_REL * ref_obj, f"ours {ours_obj:.10g}, numpy {ref_obj:.10g}")
    check(f"spherical k-means k={SPH_K}: unit centres, the same centres as numpy's within 1e-4",
          np.abs(np.linalg.norm(C, axis=1) - 1).max() <= 1e-6 and np.abs(C - Cr).max() <= 1e-4,
          f"max |norm - 1| {np.abs(np.linalg.norm(C, axis=1) - 1).max():.2e}, max centre difference {np.abs(C - Cr).max():.2e}")
    check(f"spherical k-means k={SPH_K}: distance = 1 - cos, inertia = their sum",
          np.abs(dist - (1.0 - np.einsum("ij,ij->i", U, (C / np.linalg.norm(C, axis=1, keepdims=True))[lab]))).max() <= 1e-6
          and abs(inertia - dist.sum()) <= 1e-9 * dist.sum(),
          f"fit inertia {inertia:.10g}, sum of distances {dist.sum():.10g}")
    # k-means++ (n_init 10) against scikit-learn's KMeans on the unit rows,
    # both judged by the spherical objective (sklearn's centres normalized,
    # each row to its largest cosine): only the centre normalization differs
    rows, _ = timed(cur, "SELECT inertia FROM gpu_kmeans_fit('SELECT id, f FROM gc_cmp_sph', "
                    "%s, 300, 1e-4, 'k-means++', %s, 0, metric => 'cosine')", (SPH_K, KMEANS_N_INIT))
    ours_pp = rows[0][0]
    km = KMeans(n_clusters=SPH_K, n_init=KMEANS_N_INIT, random_state=0).fit(U)
    Ck = km.cluster_centers_ / np.linalg.norm(km.cluster_centers_, axis=1, keepdims=True)
    theirs_pp = cosine_objective(U, Ck, np.argmax(U @ Ck.T, axis=1))
    check(f"spherical k-means k={SPH_K}, k-means++ n_init={KMEANS_N_INIT}: sum of cosine distances <= "
          f"{KMEANS_SLACK} x KMeans on the unit rows",
          ours_pp <= KMEANS_SLACK * theirs_pp, f"ours {ours_pp:.6g}, sklearn {theirs_pp:.6g}, ratio {ours_pp / theirs_pp:.4f}")
    cur.execute("DROP TABLE gc_cmp_sph")


def main():
    with psycopg.connect("", autocommit=False) as conn:
        with conn.cursor() as cur:
            cur.execute("CREATE EXTENSION IF NOT EXISTS gpuclust")
        conn.commit()
        n = load_cities(conn, TABLE)
        check("world cities loaded", n == N_CITIES, f"{n} rows")
        ids, X = fetch_features(conn, TABLE)
        with conn.cursor() as cur:
            try:
                compare_dbscan(cur, ids, X)
            except psycopg.Error as e:
                conn.rollback()
                check("DBSCAN: gpu_dbscan runs", False, str(e).strip())
            try:
                compare_dbscan_cosine(cur)
            except psycopg.Error as e:
                conn.rollback()
                check("cosine DBSCAN: gpu_dbscan runs", False, str(e).strip())
            try:
                compare_kdistance(cur, X)
            except psycopg.Error as e:
                conn.rollback()
                check("k-distance: gpu_kdistance runs", False, str(e).strip())
            try:
                compare_silhouette(cur, ids, X)
            except psycopg.Error as e:
                conn.rollback()
                check("silhouette: gpu_silhouette runs", False, str(e).strip())
            try:
                compare_scores(cur, ids, X)
            except psycopg.Error as e:
                conn.rollback()
                check("scores: gpu_cluster_scores runs", False, str(e).strip())
            for k in KMEANS_KS:
                try:
                    compare_kmeans(cur, X, k)
                except psycopg.Error as e:
                    conn.rollback()
                    check(f"k-means k={k}: gpu_kmeans runs", False, str(e).strip())
            try:
                compare_spherical_kmeans(cur)
            except psycopg.Error as e:
                conn.rollback()
                check("spherical k-means: gpu_kmeans runs", False, str(e).strip())
            cur.execute(f"SELECT population::float8 FROM {TABLE} ORDER BY id")
            w = np.array([r[0] for r in cur.fetchall()], dtype=np.float64)
            info(f"weights: population, {int((w == 0).sum())} of {len(w)} zero")
            for k in KMEANS_KS:
                try:
                    compare_weighted_kmeans(cur, ids, X, w, k)
                except psycopg.Error as e:
                    conn.rollback()
                    check(f"weighted k-means k={k}: gpu_kmeans runs", False, str(e).strip())
            conn.rollback()
            cur.execute(f"DROP TABLE IF EXISTS {TABLE}")
        conn.commit()
    return summary()


if __name__ == "__main__":
    sys.exit(main())
