#!/usr/bin/env python3
"""bench_hdbscan.py — HDBSCAN's workloads through SQL, side by side with
scikit-learn: the table of docs/benchmarks.md's HDBSCAN section.  A
benchmark, not a test: it prints, and fails only when the GPU's result is
not the CPU's, when a call fails (statement_timeout included, but for a
CPU call: its time is then shown as more than the timeout), or when
ours on the 110k rows is not scikit-learn's (up to the order of equal MST
weights, as compare_hdbscan_sklearn.py judges it).

    python3 test/gpu/bench_hdbscan.py [--dry-run] [--only 110k,1m,1m16,10m,mst]

Against the server that $PGHOST ... name, gpuclust installed
(run_gpu_tests.sh hdbscan-sql-bench).  --dry-run needs no server: it makes
the data and times scikit-learn.  The data, float32, every workload with
min_cluster_size 15 (min_samples left NULL: 15 too):
  110k   the issue's: make_blobs(100000, centers=50, cluster_std=0.6,
         random_state=1) and 10,000 rows uniform over their bounding box
         (default_rng(1)); scikit-learn's HDBSCAN(min_cluster_size=15)
         timed once (about 72 s; BENCH_HDBSCAN_SKLEARN=0 leaves it out)
         and its labels and probabilities compared with ours;
  1m     the same recipe at 9x: 900,000 rows in 450 blobs (centre_box
         (-30, 30): the centres as dense as the 110k's) and 100,000
         uniform rows;
  10m    at 90x: 9,000,000 rows in 4,500 blobs (centre_box ±94.87) and
         1,000,000 uniform; the GPU only (BENCH_HDBSCAN_CPU_10M=1 adds the
         CPU);
  1m16   900,000 rows of 16 features in 450 blobs (make_blobs' default
         box) and 100,000 uniform rows;
  mst    gpu_minimum_spanning_tree (min_samples 1: the Euclidean MST) on
         the 10m rows, the GPU (and the CPU with BENCH_HDBSCAN_CPU_10M=1).
Each SQL call is a whole statement, SELECT count(*), count(cluster_id),
max(cluster_id) FROM gpu_hdbscan('SELECT id, f FROM t', 15, device => ...),
run twice (the second warm) unless the first took over
BENCH_HDBSCAN_REPEAT_S (30) s; gpuclust.log_timing's INFO gives the
ingest, compute (with its phases) and emit times.  Where both devices ran,
one statement joins the two results on id and counts the rows that differ
(labels, probability and outlier_score compared exactly).  Caps:
statement_timeout BENCH_HDBSCAN_CALL_S (120) s a call; a step that would
pass BENCH_HDBSCAN_BUDGET_S (330) s from the start is skipped and says so.
Parallel query is off, so the source's rows come in the table's order.
"""
import argparse
import os
import re
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "lib"))
import report  # noqa: E402
from compare_hdbscan_sklearn import (connect, copy_rows, run_hdbscan, run_mst, sklearn_hdbscan,  # noqa: E402
                                     tree_check, versus_sklearn)

SKLEARN = os.environ.get("BENCH_HDBSCAN_SKLEARN", "1") == "1"
CPU_10M = os.environ.get("BENCH_HDBSCAN_CPU_10M", "0") == "1"
CALL_S = float(os.environ.get("BENCH_HDBSCAN_CALL_S", 120))
REPEAT_S = float(os.environ.get("BENCH_HDBSCAN_REPEAT_S", 30))
BUDGET_S = float(os.environ.get("BENCH_HDBSCAN_BUDGET_S", 330))
MCS = 15
T0 = time.perf_counter()


def issue_data(blobs, centers, noise, d=2, box=10.0):
    """make_blobs(blobs, centers=centers, cluster_std=0.6, center_box=(-box,
    box), random_state=1) and noise rows uniform over their bounding box
    (default_rng(1)), float32: the issue's recipe is (100000, 50, 10000)."""
    from sklearn.datasets import make_blobs
    X, _ = make_blobs(n_samples=blobs, n_features=d, centers=centers, cluster_std=0.6,
                      center_box=(-box, box), random_state=1)
    U = np.random.default_rng(1).uniform(X.min(0), X.max(0), size=(noise, d))
    return np.vstack([X, U]).astype(np.float32)


# name: (what, data, devices)
WORKLOADS = {
    "110k": ("110k 2-d (the issue's)", lambda: issue_data(100_000, 50, 10_000), ["cpu", "gpu"]),
    "1m": ("1M 2-d", lambda: issue_data(900_000, 450, 100_000, box=30.0), ["cpu", "gpu"]),
    "1m16": ("1M 16-d", lambda: issue_data(900_000, 450, 100_000, d=16), ["cpu", "gpu"]),
    "10m": ("10M 2-d", lambda: issue_data(9_000_000, 4_500, 1_000_000, box=10.0 * 90 ** 0.5),
            ["gpu"] + (["cpu"] if CPU_10M else [])),
}


def left():
    return BUDGET_S - (time.perf_counter() - T0)


class Timing:
    """The INFO lines of gpuclust.log_timing that a session receives."""

    def __init__(self, conn):
        self.lines = []
        conn.add_notice_handler(lambda d: self.lines.append(d.message_primary or "")
                                if d.severity_nonlocalized == "INFO" else None)

    def last(self):
        """(head, ingest, compute, compute detail, emit) of the last line, or None."""
        for s in reversed(self.lines):
            m = re.search(r"^(.*?); ingest ([\d.]+) ms, compute ([\d.]+) ms(.*?), emit ([\d.]+) ms", s)
            if m:
                return m.group(1), float(m.group(2)), float(m.group(3)), m.group(4).strip(" ()"), float(m.group(5))
        return None


def timed_call(conn, timing, sql):
    """(seconds, the row, log_timing's line) of one statement; (None, error, None) on failure."""
    timing.lines.clear()
    t = time.perf_counter()
    try:
        row = conn.execute(sql).fetchone()
    except Exception as e:      # psycopg.Error: statement_timeout, the GPU's failure ...
        return None, str(e).strip().splitlines()[0], None
    return time.perf_counter() - t, row, timing.last()


def hd_sql(table, device):
    return (f"SELECT count(*), count(cluster_id), max(cluster_id) FROM gpu_hdbscan("
            f"'SELECT id, f FROM {table}', {MCS}, device => '{device}')")


def mst_sql(table, device):
    return (f"SELECT count(*), sum(distance), max(distance) FROM gpu_minimum_spanning_tree("
            f"'SELECT id, f FROM {table}', 1, device => '{device}')")


def same_sql(table):
    """The rows whose result differs between the devices (0: the same, bit for bit)."""
    f = f"gpu_hdbscan('SELECT id, f FROM {table}', {MCS}, device => '%s')"
    return (f"SELECT count(*) FILTER (WHERE c.id IS NULL OR g.id IS NULL OR c.cluster_id IS DISTINCT FROM "
            f"g.cluster_id OR c.probability <> g.probability OR c.outlier_score <> g.outlier_score), count(*) "
            f"FROM {f % 'cpu'} c FULL JOIN {f % 'gpu'} g ON c.id = g.id")


def run_twice(conn, timing, label, sql, rows):
    """Times sql once or twice; appends its row of the table to rows."""
    runs, line, out, stopped = [], None, None, None
    for k in range(2):
        if k == 1 and runs[0] > REPEAT_S:
            print(f"  {label}: second call skipped (the first took {runs[0]:.1f} s)", flush=True)
            break
        if left() < (runs[0] if runs else 1.0):
            print(f"  {label}: call {k + 1} skipped ({left():.0f} s of the budget left)", flush=True)
            break
        secs, got, got_line = timed_call(conn, timing, sql)
        if secs is None and label.endswith(", cpu") and "statement timeout" in got:
            stopped = CALL_S
            print(f"  {label}: call {k + 1} stopped by statement_timeout after {CALL_S:.0f} s", flush=True)
            break
        if secs is None:
            report.check(f"{label}: call {k + 1}", False, got)
            break
        runs.append(secs)
        out, line = got, got_line
        print(f"  {label}: call {k + 1} {secs * 1e3:,.1f} ms, result {tuple(out)}"
              + (f"; {line[0]}: ingest {line[1]} ms, compute {line[2]} ms ({line[3]}), emit {line[4]} ms"
                 if line else ""), flush=True)
    rows.append(dict(label=label, runs=runs, line=line, out=out, stopped=stopped))
    return rows[-1]


def gpu_equals_cpu(conn, timing, what, table, n, rows):
    """Where both devices ran: one statement counts the rows whose results differ."""
    first = [r["runs"][0] for r in rows if r["label"].rsplit(", ", 1)[0] == what and r["runs"]]
    if len(first) < 2 or left() < 2 * sum(first):
        return
    secs, out, _ = timed_call(conn, timing, same_sql(table))
    report.check(f"{what}: GPU = CPU on every row (labels, probability, outlier_score bit for bit)",
                 secs is not None and out[0] == 0 and out[1] == n,
                 out if secs is None else f"{out[0]} of {out[1]} rows differ")


def sklearn_110k(X):
    """scikit-learn's HDBSCAN on the 110k rows: (SK, its result as
    versus_sklearn takes it) or the reason there is none."""
    if not SKLEARN:
        return "BENCH_HDBSCAN_SKLEARN=0"
    SK, why = sklearn_hdbscan()
    if SK is None:
        return why
    print("  scikit-learn HDBSCAN(min_cluster_size=15) on the 110k rows (about 72 s) ...", flush=True)
    t = time.perf_counter()
    h = SK[0](min_cluster_size=MCS, copy=True).fit(X.astype(np.float64))
    secs = time.perf_counter() - t
    print(f"  scikit-learn: {secs:.1f} s, {h.labels_.max() + 1} clusters, {int((h.labels_ < 0).sum())} noise",
          flush=True)
    return SK, (h.labels_, h.probabilities_, np.sort(h._single_linkage_tree_["value"]), secs)


def exact_110k(conn, table, SK, res):
    """Ours on the CPU against scikit-learn (compare_hdbscan_sklearn's checks)."""
    kw = {"min_cluster_size": MCS}
    source = f"SELECT id, f FROM {table}"
    lab, prob, score = run_hdbscan(conn, source, kw, "cpu", len(res[0]))
    edges = run_mst(conn, source, {"min_samples": MCS}, "cpu")
    versus_sklearn("110k", lab, prob, edges, res, tree_check(SK, "110k", lab, prob, score, edges, kw))


def fmt_ms(s):
    return "-" if s is None else f"{s * 1e3:,.1f}"


def print_table(rows, sk_secs):
    print("\n| workload | device | call 1 ms | call 2 ms | ingest ms | compute ms | emit ms | ingest share "
          "| clusters / noise | x over scikit-learn | GPU over CPU |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |")
    best, stopped = {}, {}
    for r in rows:
        if r["runs"]:
            best[r["label"]] = min(r["runs"])
        if r.get("stopped"):
            stopped[r["label"]] = r["stopped"]
    if sk_secs:
        print(f"| 110k 2-d (the issue's) | scikit-learn {sk_version()} HDBSCAN | {sk_secs * 1e3:,.0f} | | | | | | | 1.0 | |")
    for r in rows:
        wl, dev = r["label"].rsplit(", ", 1)
        runs, line, out = r["runs"], r["line"], r["out"]
        b = best.get(r["label"])
        ing = f"{line[1]:,.1f}" if line else "-"
        share = f"{line[1] / (runs[-1] * 1e3):.0%}" if line and runs else "-"
        x_sk = f"{sk_secs / b:,.0f}x" if sk_secs and b and wl.startswith("110k") and "MST" not in wl else ""
        cpu = best.get(f"{wl}, cpu")
        g_c = f"{cpu / b:,.1f}x" if dev == "gpu" and cpu and b else ""
        if dev == "gpu" and b and f"{wl}, cpu" in stopped:
            g_c = f"> {stopped[f'{wl}, cpu'] / b:,.1f}x"
        call1 = fmt_ms(runs[0] if runs else None)
        if r.get("stopped") and not runs:
            call1 = f"> {r['stopped'] * 1e3:,.0f}"
        cl = (f"{(out[2] if out[2] is not None else -1) + 1} / {out[0] - out[1]}"
              if runs and out and "MST" not in wl else "")
        print(f"| {wl} | {dev} | {call1} | {fmt_ms(runs[1] if len(runs) > 1 else None)} "
              f"| {ing} | {f'{line[2]:,.1f}' if line else '-'} | {f'{line[4]:,.1f}' if line else '-'} | {share} "
              f"| {cl} | {x_sk} | {g_c} |")
    print("\ncompute phases (gpuclust.log_timing, the last call of each row):")
    for r in rows:
        if r["line"]:
            print(f"  {r['label']}: {r['line'][0]}; compute {r['line'][2]} ms ({r['line'][3]})")


def sk_version():
    import sklearn
    return sklearn.__version__


def machine(conn):
    info = dict(conn.execute("SELECT key, value FROM gpuclust_info()").fetchall())
    pg = conn.execute("SHOW server_version").fetchone()[0]
    return (f"GPU {info.get('gpu_name') or 'none (' + str(info.get('gpu_reason')) + ')'}, "
            f"{info.get('cpu_threads', '?')} CPU threads for gpuclust, {os.cpu_count()} cores here, "
            f"PostgreSQL {pg}, GPU worker {info.get('gpu_worker', '?')}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dry-run", action="store_true", help="no server: make the data, time scikit-learn")
    ap.add_argument("--only", default="110k,1m,1m16,10m,mst", help="workloads, comma-separated")
    a = ap.parse_args()
    only = a.only.split(",")
    try:
        sk = sk_version()
    except ImportError:
        sys.exit("bench_hdbscan: no scikit-learn (make_blobs makes the data)")
    conn = None if a.dry_run else connect()
    print(f"bench_hdbscan: scikit-learn {sk}, numpy {np.__version__}; "
          + ("dry run (no server)" if conn is None else machine(conn)), flush=True)
    if conn is not None:
        timing = Timing(conn)
        conn.execute("SET gpuclust.log_timing = on")
        conn.execute("SET max_parallel_workers_per_gather = 0")
        conn.execute(f"SET statement_timeout = '{CALL_S:.0f}s'")
    rows, sk_secs = [], None
    for name, (what, make, devices) in WORKLOADS.items():
        if name not in only and not (name == "10m" and "mst" in only):
            continue
        if left() < 10:
            print(f"== {what}: skipped ({left():.0f} s of the budget left)", flush=True)
            continue
        t = time.perf_counter()
        X = make()
        print(f"== {what}: {len(X):,} rows x {X.shape[1]} made in {time.perf_counter() - t:.1f} s", flush=True)
        sk = sklearn_110k(X) if name == "110k" else None
        if isinstance(sk, str):
            print(f"  scikit-learn not run: {sk}", flush=True)
            sk = None
        elif sk is not None:
            sk_secs = sk[1][3]
        if conn is None:
            continue
        table = f"hd_bench_{name}"
        t = time.perf_counter()
        copy_rows(conn, table, X, temp=False)
        print(f"  loaded into {table} in {time.perf_counter() - t:.1f} s (binary COPY, VACUUM FREEZE)", flush=True)
        if name in only:
            for dev in devices:
                run_twice(conn, timing, f"{what}, {dev}", hd_sql(table, dev), rows)
            gpu_equals_cpu(conn, timing, what, table, len(X), rows)
            if sk is not None and left() > 10:
                exact_110k(conn, table, *sk)
        if name == "10m" and "mst" in only:
            for dev in ["gpu"] + (["cpu"] if CPU_10M else []):
                run_twice(conn, timing, f"10M 2-d MST (min_samples 1), {dev}", mst_sql(table, dev), rows)
        conn.execute(f"DROP TABLE {table}")
    if conn is not None:
        print_table(rows, sk_secs)
    elif sk_secs:
        print(f"\nscikit-learn {sk_version()} HDBSCAN on 110k 2-d: {sk_secs:.1f} s")
    print(f"\nbench_hdbscan: {time.perf_counter() - T0:.0f} s")
    return report.summary("bench_hdbscan (its checks)")


if __name__ == "__main__":
    sys.exit(main())
