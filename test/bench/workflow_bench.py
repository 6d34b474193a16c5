#!/usr/bin/python3
"""workflow_bench.py — the workflow the extension replaces: exporting the rows
to Python, clustering them with scikit-learn and writing the labels back,
against the one SQL statement that does the same in the database.

Not a test: prints a markdown table and ratios.  Needs a running server
(libpq environment: PGHOST, PGPORT, ...) where the gpuclust extension can be
created or already is (preloaded or not).

For each workload, one run of each side, back to back (so that load from
other processes hits both alike; the ratios are what counts on a shared
machine):

  round trip       what a user does today, each phase timed:
    export         COPY (SELECT id, f FROM t) TO STDOUT (FORMAT BINARY) read
                   with psycopg 3 (Copy.read() appended to one bytearray)
                   and parsed with numpy: every row of t has the same layout
                   (a bigint and a real[] of d elements, no NULLs), so the
                   buffer is one structured array, converted to an n x d
                   float32 matrix.  The fastest of the ways tried (1M rows,
                   this file's tables, psycopg 3.1 in its pure-Python
                   build, Debian's): text COPY read the same way and parsed
                   with numpy.fromstring took 1.1x as long for d = 2 and
                   2.3x for d = 32 (32M decimal numbers to parse); binary
                   COPY through set_types() and rows() 2.5x and 6x (a
                   Python loader per value); the buffers kept in a list
                   and joined, or iterating over the Copy object, 1.8x.
    fit            scikit-learn: DBSCAN(eps, min_samples, n_jobs=-1), or
                   KMeans(n_clusters=k, init='k-means++', n_init=1,
                   max_iter, tol, random_state=0)
    import         CREATE TABLE (id bigint, cluster_id int), then COPY ...
                   FROM STDIN (FORMAT BINARY) of one buffer built with numpy
                   (noise as NULL, as gpu_dbscan writes it): the fastest of
                   the ways tried (text built with f-strings: 1.5x;
                   set_types() and write_row(): 3x)
  in the database  CREATE TABLE ... AS SELECT id, cluster_id FROM
                   gpu_dbscan(...) / gpu_kmeans(...), the whole statement

The ratio is round trip / in the database; the target is 10x on the CPU and
50x with --device gpu.  Sanity checks follow the table: for DBSCAN the
clusters and noise of each side and the adjusted Rand index between the two
label tables (read back on the client); for k-means the iterations each side
ran (gpuclust.log_timing's for the database) and the inertia of each
labelling (the squared distances to its clusters' means, computed on the
client the same way for both).  For scale, it also prints what psql takes to
receive the same COPY into /dev/null (the export's floor: the server and
libpq without Python) and each ratio with the export taking that long.

Workloads (--workloads, comma-separated; default all):

  dbscan-2d    DBSCAN on the 2-d table: 20 uniform discs of radius 2 (19
               clusters: two touch) in a 100 x 100 square, every 20th row
               uniform noise; eps 0.05 x sqrt(1M / rows), so that a row has
               about 30 neighbours at any --rows; min_pts 10
  kmeans-2d    k-means on the 2-d table, k = 100
  kmeans-32d   k-means on the 32-d table: 100 Gaussian blobs (sd 1, centres
               uniform in [-2, 2]^32: they touch, and Lloyd's algorithm runs
               tens of iterations; well apart, both sides stop after 2),
               k = 100

k-means runs at most 300 iterations with tol 1e-4 (scikit-learn's defaults,
the same rule on both sides) from k-means++ seeding, one run.  The tables
(public.workflow_bench_d2, public.workflow_bench_d32: real[] features made
in SQL with setseed and random(), centres from numpy's RandomState) are kept
between runs; --rebuild makes them anew.

  /usr/bin/python3 test/bench/workflow_bench.py [--rows 1000000]
      [--workloads dbscan-2d,kmeans-2d,kmeans-32d] [--device cpu|gpu]
      [--torch] [--rebuild] [--schema S]

--device gpu runs the in-database calls with device => 'gpu' (the target is
then 50x; scikit-learn stays the round trip's fit), and --torch adds a second
peer for the k-means workloads: a plain Lloyd loop in PyTorch on CUDA
(torch.cdist, argmin, index_add_) from the first k rows, with the same
max_iter and tol, its time including the upload and the labels' download,
between the same export and import (the CUDA context made beforehand,
untimed).  torch is imported only then.
--schema S uses the functions in schema S instead of CREATE EXTENSION.
"""
import argparse
import os
import re
import shutil
import subprocess
import time

import numpy as np
import psycopg
from psycopg import sql

from io_bench import connect, log   # the session both benchmarks use

MAX_ITER = 300
TOL = 1e-4
SEED = 0
ITERATIONS = re.compile(r"iterations (\d+)")
TARGET = {"cpu": 10.0, "gpu": 50.0}

WORKLOADS = {
    "dbscan-2d": dict(table="d2", algo="dbscan", min_pts=10),
    "kmeans-2d": dict(table="d2", algo="kmeans", k=100),
    "kmeans-32d": dict(table="d32", algo="kmeans", k=100),
}




# The tables ------------------------------------------------------------------

# Each table's comment names its recipe: a table of another recipe is made anew.
RECIPE = {"d2": "workflow_bench d2: 20 discs of radius 2, every 20th row noise",
          "d32": "workflow_bench d32: 100 Gaussian blobs, centres in [-2, 2]^32"}


def table_ok(cur, which, name, n, d):
    cur.execute("SELECT to_regclass(%s) IS NOT NULL", (name,))
    if not cur.fetchone()[0]:
        return False
    cur.execute("SELECT obj_description(%s::regclass, 'pg_class')", (name,))
    if cur.fetchone()[0] != RECIPE[which]:
        return False
    cur.execute(f"SELECT count(*), min(cardinality(f)), max(cardinality(f)) FROM {name}")
    return cur.fetchone() == (n, d, d)


def make_d2(cur, name, n):
    """20 discs of radius 2, uniform inside, centres uniform in the
    100 x 100 square; every 20th row uniform noise over the square."""
    centres = np.random.RandomState(0).uniform(0, 100, size=(20, 2)).round(3).tolist()
    cur.execute(f"CREATE TABLE {name} (id bigint, f real[])")
    cur.execute("SELECT setseed(0.25)")
    cur.execute(f"""INSERT INTO {name}
        SELECT i, CASE WHEN i %% 20 = 0 THEN ARRAY[random() * 100, random() * 100]
                       ELSE ARRAY[c[b][1] + r * cos(a), c[b][2] + r * sin(a)] END::real[]
        FROM (SELECT i, i %% 20 + 1 AS b, 2 * sqrt(random()) AS r, 2 * pi() * random() AS a
              FROM generate_series(1, %(n)s) i) g,
             (SELECT %(c)s::float8[] AS c) s""", {"n": n, "c": centres})


def make_d32(cur, name, n):
    """100 Gaussian blobs (sd 1, Box-Muller), centres uniform in [-2, 2]^32:
    blobs that touch, so that Lloyd's algorithm runs tens of iterations."""
    centres = np.random.RandomState(1).uniform(-2, 2, size=(100, 32)).round(3).tolist()
    cur.execute(f"CREATE TABLE {name} (id bigint, f real[])")
    cur.execute("SELECT setseed(0.5)")
    cur.execute(f"""INSERT INTO {name}
        SELECT i, (SELECT array_agg((c[i %% 100 + 1][j]
                                     + sqrt(-2 * ln(1 - random())) * cos(2 * pi() * random()))::real
                                    ORDER BY j)
                   FROM generate_series(1, 32) j)
        FROM generate_series(1, %(n)s) i, (SELECT %(c)s::float8[] AS c) s""",
                {"n": n, "c": centres})


def make_table(cur, which, n, rebuild):
    name, d = f"public.workflow_bench_{which}", int(which[1:])
    if not rebuild and table_ok(cur, which, name, n, d):
        return name, d
    log(f"  building {name}: {n:,} rows of {d} real features ...")
    t0 = time.perf_counter()
    cur.execute(f"DROP TABLE IF EXISTS {name}")
    (make_d2 if which == "d2" else make_d32)(cur, name, n)
    cur.execute(sql.SQL("COMMENT ON TABLE {} IS {}").format(sql.SQL(name), sql.Literal(RECIPE[which])))
    cur.execute(f"VACUUM ANALYZE {name}")
    log(f"  ... {time.perf_counter() - t0:.1f} s")
    return name, d


# The round trip ----------------------------------------------------------------

PGCOPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)   # signature, flags, extension length


def copy_out(cur, statement):
    """What a COPY ... TO STDOUT statement sends, in one bytearray."""
    buf = bytearray()
    with cur.copy(statement) as cp:
        while True:
            data = cp.read()
            if not data:
                break
            buf += data
    return buf


def export(cur, table, d):
    """The rows of SELECT id, f FROM table as (ids int64[n], X float32[n, d])."""
    buf = copy_out(cur, f"COPY (SELECT id, f FROM {table}) TO STDOUT (FORMAT BINARY)")
    # Each row: field count, then (length, bigint), then (length, the array:
    # ndim, has-null flag, element type, dimension, lower bound, and d
    # (length, float4) pairs), all big-endian; the file ends with -1 (int16).
    row = np.dtype([("nfields", ">i2"), ("id_len", ">i4"), ("id", ">i8"), ("f_len", ">i4"),
                    ("ndim", ">i4"), ("flags", ">i4"), ("elemtype", ">i4"), ("dim", ">i4"),
                    ("lbound", ">i4"), ("f", [("len", ">i4"), ("x", ">f4")], (d,))])
    body = memoryview(buf)[len(PGCOPY_HEADER):len(buf) - 2]
    if buf[:len(PGCOPY_HEADER)] != PGCOPY_HEADER or len(body) % row.itemsize:
        raise SystemExit(f"{table}: unexpected COPY layout (rows of other than {d} features?)")
    r = np.frombuffer(body, dtype=row)
    if not ((r["nfields"] == 2) & (r["f_len"] == row.itemsize - 18) & (r["dim"] == d)
            & (r["flags"] == 0)).all():
        raise SystemExit(f"{table}: unexpected COPY layout (NULLs, or rows of other than {d} features?)")
    return r["id"].astype(np.int64), r["f"]["x"].astype(np.float32)


def import_labels(cur, table, ids, labels):
    """CREATE TABLE table (id bigint, cluster_id int) and COPY the labels in,
    negative labels (noise) as NULL."""
    n = len(ids)
    row = np.dtype([("nfields", ">i2"), ("id_len", ">i4"), ("id", ">i8"),
                    ("c_len", ">i4"), ("c", ">i4")])
    r = np.empty(n, dtype=row)
    r["nfields"] = 2
    r["id_len"] = 8
    r["id"] = ids
    null = labels < 0
    r["c_len"] = np.where(null, -1, 4)
    r["c"] = labels
    keep = np.ones((n, row.itemsize), dtype=bool)
    keep[null, row.itemsize - 4:] = False       # a NULL field has no value bytes
    body = r.view(np.uint8).reshape(n, row.itemsize)[keep].tobytes()
    cur.execute(f"CREATE TABLE {table} (id bigint, cluster_id int)")
    with cur.copy(f"COPY {table} (id, cluster_id) FROM STDIN (FORMAT BINARY)") as cp:
        cp.write(PGCOPY_HEADER + body + b"\xff\xff")


def sklearn_fit(w, X, eps):
    if w["algo"] == "dbscan":
        from sklearn.cluster import DBSCAN
        return DBSCAN(eps=eps, min_samples=w["min_pts"], n_jobs=-1).fit(X).labels_, None
    from sklearn.cluster import KMeans
    km = KMeans(n_clusters=w["k"], init="k-means++", n_init=1, max_iter=MAX_ITER, tol=TOL,
                random_state=SEED).fit(X)
    return km.labels_, km.n_iter_


def torch_warm_up():
    """The CUDA context and the kernels made before the first timed fit, as
    in a Python session that has used the GPU already."""
    import torch
    x = torch.rand(4096, 8, device="cuda")
    labels = torch.cdist(x, x[:16]).argmin(dim=1)
    torch.zeros(16, 8, device="cuda").index_add_(0, labels, x)
    torch.bincount(labels, minlength=16).cpu()


def torch_kmeans(X, k):
    """Lloyd's algorithm on CUDA from the first k rows: scikit-learn's stopping
    rule (labels unchanged, or the centres' total squared shift at most tol x
    the mean variance of the features), the last labels those of the
    returned centres.  Includes the upload and the labels' download."""
    import torch
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    x = torch.from_numpy(X).cuda()
    c = x[:k].clone()
    tol = TOL * x.var(dim=0, unbiased=False).mean()
    chunk = max(1, (1 << 28) // (4 * k))   # the n x k distance matrix in 1 GiB pieces

    def assign(c):
        return torch.cat([torch.cdist(x[i:i + chunk], c).argmin(dim=1)
                          for i in range(0, x.shape[0], chunk)])

    labels, it = None, 0
    while it < MAX_ITER:
        it += 1
        new = assign(c)
        if labels is not None and torch.equal(new, labels):
            break
        labels = new
        sums = torch.zeros_like(c).index_add_(0, labels, x)
        counts = torch.bincount(labels, minlength=k).unsqueeze(1)
        moved = torch.where(counts > 0, sums / counts.clamp(min=1), c)
        shift = ((moved - c) ** 2).sum()
        c = moved
        if shift <= tol:
            labels = assign(c)
            break
    out = labels.cpu().numpy()
    return out, it, (time.perf_counter() - t0) * 1e3


# The database side and the checks --------------------------------------------

def checkpoint(cur):
    """Start each timed write with the WAL checkpointed (skipped where the
    role may not)."""
    try:
        cur.execute("CHECKPOINT")
    except psycopg.errors.InsufficientPrivilege:
        pass


def timed(cur, query):
    t0 = time.perf_counter()
    cur.execute(query)
    return (time.perf_counter() - t0) * 1e3


def read_labels(cur, table, order):
    """cluster_id of table's rows in the order of the ids in order, -1 for
    NULL."""
    buf = copy_out(cur, f"COPY (SELECT id, coalesce(cluster_id, -1) FROM {table}) TO STDOUT")
    a = np.fromstring(bytes(buf).replace(b"\t", b" "), dtype=np.int64, sep=" ").reshape(-1, 2)
    pos = np.argsort(a[:, 0])
    idx = np.searchsorted(a[pos, 0], order)
    if len(a) != len(order) or not (a[pos, 0][idx] == order).all():
        raise SystemExit(f"{table}: not one row per source row")
    return a[pos, 1][idx]


def inertia(X, labels):
    """Σ ‖x − mean of its cluster‖² in float64."""
    X = X.astype(np.float64)
    k = labels.max() + 1
    counts = np.bincount(labels, minlength=k)
    sums = np.stack([np.bincount(labels, weights=X[:, j], minlength=k)
                     for j in range(X.shape[1])], axis=1)
    means = sums / np.maximum(counts, 1)[:, None]
    return float(((X - means[labels]) ** 2).sum())


def psql_copy_ms(table):
    """What psql takes to receive the export's COPY into /dev/null."""
    if not shutil.which("psql"):
        return None
    query = f"COPY (SELECT id, f FROM {table}) TO STDOUT (FORMAT BINARY)"
    t0 = time.perf_counter()
    subprocess.run(["psql", "-X", "-q", "-c", query], stdout=subprocess.DEVNULL, check=True)
    return (time.perf_counter() - t0) * 1e3


def fmt(ms):
    return f"{ms:,.0f} ms"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    ap.add_argument("--torch", action="store_true",
                    help="with --device gpu: a PyTorch k-means on CUDA as a second peer")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--schema")
    args = ap.parse_args()
    if args.torch and args.device != "gpu":
        ap.error("--torch goes with --device gpu")
    chosen = [w.strip() for w in args.workloads.split(",") if w.strip()]
    for w in chosen:
        if w not in WORKLOADS:
            ap.error(f"unknown workload {w} (known: {', '.join(WORKLOADS)})")
    n = args.rows
    eps = round(0.05 * (1e6 / n) ** 0.5, 6)
    target = TARGET[args.device]

    conn, notices = connect(args.schema)
    cur = conn.cursor()
    cur.execute("SHOW server_version")
    version = cur.fetchone()[0]
    import sklearn
    tables = {}
    for which in sorted({WORKLOADS[w]["table"] for w in chosen}):
        tables[which] = make_table(cur, which, n, args.rebuild)
    log(f"PostgreSQL {version}, scikit-learn {sklearn.__version__}, numpy {np.__version__}, "
        f"psycopg {psycopg.__version__} ({psycopg.pq.__impl__}), {os.cpu_count()} cores, "
        f"{n:,} rows, device {args.device}")
    py_t, db_t = "public.workflow_bench_labels_py", "public.workflow_bench_labels_db"

    if args.torch:
        torch_warm_up()
    results, checks, floors = [], [], {}
    for name in chosen:
        w = WORKLOADS[name]
        table, d = tables[w["table"]]
        if w["algo"] == "dbscan":
            title = f"DBSCAN, {n / 1e6:g}M × {d}-d (eps {eps:g}, min_pts {w['min_pts']})"
            call = (f"gpu_dbscan('SELECT id, f FROM {table}', eps => {eps}, "
                    f"min_pts => {w['min_pts']}, device => '{args.device}')")
        else:
            title = f"k-means, {n / 1e6:g}M × {d}-d, k = {w['k']}"
            call = (f"gpu_kmeans('SELECT id, f FROM {table}', k => {w['k']}, max_iter => {MAX_ITER}, "
                    f"tol => {TOL}, init => 'k-means++', n_init => 1, seed => {SEED}, "
                    f"device => '{args.device}')")
        log(f"{title}:")
        cur.execute(f"SELECT sum(cardinality(f)) FROM {table}")   # the table in the caches
        cur.execute(f"DROP TABLE IF EXISTS {py_t}, {db_t}")

        t0 = time.perf_counter()
        ids, X = export(cur, table, d)
        t_exp = (time.perf_counter() - t0) * 1e3
        t0 = time.perf_counter()
        labels_sk, iter_sk = sklearn_fit(w, X, eps)
        t_fit = (time.perf_counter() - t0) * 1e3
        checkpoint(cur)
        t0 = time.perf_counter()
        import_labels(cur, py_t, ids, labels_sk)
        t_imp = (time.perf_counter() - t0) * 1e3
        log(f"  round trip: export {fmt(t_exp)}, scikit-learn {fmt(t_fit)}, import {fmt(t_imp)}")

        checkpoint(cur)
        notices.clear()
        t_db = timed(cur, f"CREATE TABLE {db_t} AS SELECT id, cluster_id FROM {call}")
        iter_db = next((int(m.group(1)) for m in map(ITERATIONS.search, notices) if m), None)
        info = next((x for x in notices if x.startswith("gpu_")), None)
        log(f"  in the database: {fmt(t_db)}" + (f" ({info})" if info else ""))
        rt = t_exp + t_fit + t_imp
        results.append((title + ", scikit-learn", table, t_exp, t_fit, t_imp, rt, t_db))

        labels_db = read_labels(cur, db_t, ids)
        labels_py = read_labels(cur, py_t, ids)
        if w["algo"] == "dbscan":
            from sklearn.metrics import adjusted_rand_score
            ari = adjusted_rand_score(labels_py, labels_db)
            count = lambda lab: f"{len(np.unique(lab[lab >= 0]))} clusters, {(lab < 0).sum():,} noise"  # noqa: E731
            checks.append(f"{title}: scikit-learn {count(labels_py)}; in the database "
                          f"{count(labels_db)}; adjusted Rand index {ari:.6f}")
        else:
            i_sk, i_db = inertia(X, labels_py), inertia(X, labels_db)
            line = (f"{title}: scikit-learn {len(np.unique(labels_py))} clusters, {iter_sk} iterations, "
                    f"inertia {i_sk:.6g}; in the database {len(np.unique(labels_db))} clusters, "
                    f"{iter_db} iterations, inertia {i_db:.6g} ({i_db / i_sk:.4f}× scikit-learn's)")
            if args.torch:
                cur.execute(f"DROP TABLE IF EXISTS {py_t}")
                labels_t, iter_t, t_fit_t = torch_kmeans(X, w["k"])
                checkpoint(cur)
                t0 = time.perf_counter()
                import_labels(cur, py_t, ids, labels_t)
                t_imp_t = (time.perf_counter() - t0) * 1e3
                log(f"  PyTorch: fit {fmt(t_fit_t)}, import {fmt(t_imp_t)}")
                results.append((title + ", PyTorch", table, t_exp, t_fit_t, t_imp_t,
                                t_exp + t_fit_t + t_imp_t, t_db))
                line += (f"; PyTorch {len(np.unique(labels_t))} clusters, {iter_t} iterations, "
                         f"inertia {inertia(X, labels_t):.6g}")
            checks.append(line)
        cur.execute(f"DROP TABLE IF EXISTS {py_t}, {db_t}")
        if table not in floors:
            floors[table] = psql_copy_ms(table)

    log()
    log(f"| workload | export | fit | import | round trip | in the database ({args.device}) "
        f"| ratio | target |")
    log("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for title, table, t_exp, t_fit, t_imp, rt, t_db in results:
        ratio = rt / t_db
        met = "met" if ratio >= target else "not met"
        log(f"| {title} | {fmt(t_exp)} | {fmt(t_fit)} | {fmt(t_imp)} | {fmt(rt)} | {fmt(t_db)} "
            f"| {ratio:.1f}× | ≥ {target:g}×: {met} |")
    log()
    for line in checks:
        log(line)
    for table, ms in floors.items():
        if ms is not None:
            log(f"the export's COPY of {table} received by psql into /dev/null: {fmt(ms)}")
    for title, table, t_exp, t_fit, t_imp, rt, t_db in results:
        if floors.get(table) is not None:
            rt_floor = floors[table] + t_fit + t_imp
            log(f"{title}, with the export in psql's time: round trip {fmt(rt_floor)}, "
                f"ratio {rt_floor / t_db:.1f}×")
    log(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
