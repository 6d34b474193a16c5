#!/usr/bin/env python3
"""The GPU worker's throughput with one GPU and with several, on one server.

  bench_gpus.py --restart-cmd CMD [--devices 0 0,1] [--rounds N]

Against the server in $PGHOST... (gpuclust preloaded; the pg-bundle on the
GPU machine), for each gpuclust.gpu_devices value of --devices (ALTER
SYSTEM, then CMD restarts the server): a warm-up call of each kind, then
N rounds of each load, 16 concurrent sessions each running
  sql   bench_worker.py's load: gpu_kmeans on 1M rows x 32 (k = 100) and
        gpu_dbscan on 10M 2-d rows (device 'gpu'), whose time goes mostly
        to reading the rows and writing the labels back on the host;
  gpu   gpu_affinity_propagation on 10,000 rows x 32 (float8, 200
        iterations), whose time goes to the GPU.
Per value and load: the wall time and calls/s (the best round), each
call's median latency, where the sessions' time went (log_timing's
ingest, compute and emit, summed over the calls), and per GPU its jobs
and the share of the wall time it had one running (gpuclust_gpus, read
every 20 ms).  Before them, once, the same 16 sessions only reading the
sql load's rows (a count over every row's array).  Then each value's
throughput against the first's, per load, and the most any number of
GPUs could give on the sql load: its wall against the sessions' own host
work (ingest and emit, a session's on average).  The setting is
reset at the end.
"""
import argparse
import re
import subprocess
import sys
import threading
import time

import psycopg
import psycopg.sql

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from bench_worker import DB, KM, concurrent, connect, setup  # noqa: E402

AP = ("SELECT count(*) FROM gpu_affinity_propagation('SELECT id, f FROM b_ap', max_iter => 200,"
      " convergence_iter => 200, device => 'gpu')")
LOADS = {
    "sql": (("km", KM), ("db", DB)),
    "gpu": (("ap", AP),),
}
# the sql load's rows, only read
SCANS = (("km", "SELECT count(f[1]) FROM b_km"), ("db", "SELECT count(f[1]) FROM b_db"))
NAMES = {"km": "k-means", "db": "DBSCAN", "ap": "affinity propagation"}
WHAT = {"sql": "k-means 1M x 32 k 100 + DBSCAN 10M 2-d", "gpu": "affinity propagation 10,000 x 32, 200 it.",
        "scan": "reading b_km and b_db only"}

TIMING = re.compile(r"ingest ([\d.]+) ms, compute ([\d.]+) ms.*emit ([\d.]+) ms")


def timed_session():
    """A session with log_timing on whose INFO lines add up in its split
    (ingest, compute, emit ms)."""
    c = connect()
    c.split = [0.0, 0.0, 0.0]

    def note(d):
        m = TIMING.search(d.message_primary or "")
        if m:
            for i in range(3):
                c.split[i] += float(m.group(i + 1))
    c.add_notice_handler(note)
    c.execute("SET gpuclust.log_timing = on")
    return c


def restart(cmd, devices):
    with connect() as c:
        if devices is None:
            c.execute("ALTER SYSTEM RESET gpuclust.gpu_devices")
        else:
            c.execute("ALTER SYSTEM SET gpuclust.gpu_devices = %s" % psycopg.sql.quote(devices))
    subprocess.run(cmd, shell=True, check=True)
    with connect() as c:
        for _ in range(300):
            if c.execute("SELECT count(*) > 0 AND bool_and(state <> 'starting') FROM gpuclust_gpus").fetchone()[0]:
                break
            time.sleep(0.1)
        return c.execute("SELECT gpu, name, state, coalesce(reason, '') FROM gpuclust_gpus ORDER BY gpu").fetchall()


class Busy:
    """Samples gpuclust_gpus every 20 ms: per GPU, the share of samples
    with a job running, and its jobs_done at the start and end."""

    def __init__(self):
        self.c = connect()
        self.start = self.jobs()
        self.busy, self.samples, self.stop = {}, 0, False
        self.t = threading.Thread(target=self.run)
        self.t.start()

    def jobs(self):
        return dict(self.c.execute("SELECT gpu, jobs_done FROM gpuclust_gpus").fetchall())

    def run(self):
        while not self.stop:
            for g, r in self.c.execute("SELECT gpu, jobs_running FROM gpuclust_gpus").fetchall():
                self.busy[g] = self.busy.get(g, 0) + (r > 0)
            self.samples += 1
            time.sleep(0.02)

    def end(self):
        self.stop = True
        self.t.join()
        done = self.jobs()
        self.c.close()
        return {g: (done[g] - self.start.get(g, 0), self.busy.get(g, 0) / max(self.samples, 1)) for g in done}


def setup_ap():
    with connect() as c:
        if not c.execute("SELECT to_regclass('b_ap') IS NOT NULL").fetchone()[0]:
            c.execute("CREATE TABLE b_ap AS SELECT id, f FROM b_km WHERE id <= 10000")
            c.execute("VACUUM ANALYZE b_ap")


def one_load(label, load, queries, rounds):
    """rounds of 16 sessions running queries at once: the best round."""
    best = None
    for r in range(rounds):
        conns = [timed_session() for _ in range(16)]
        busy = Busy()
        res = concurrent(conns, queries)
        res["gpus"] = busy.end()
        res["split_s"] = [sum(c.split[i] for c in conns) / 1000 for i in range(3)]
        for c in conns:
            c.close()
        ing, comp, emit = res["split_s"]
        calls = 16 * len(queries)
        med = ", ".join(f"{NAMES[n]} {v:.2f} s" for n, v in res["median_s"].items())
        print(f"{label} {load} round {r + 1}: 16 sessions x ({WHAT[load]}): {res['wall_s']:.2f} s wall,"
              f" {calls / res['wall_s']:.2f} calls/s, median {med};"
              f" the sessions' time: ingest {ing:.1f} s, compute {comp:.1f} s, emit {emit:.1f} s;"
              f" errors {res['errors']}{' (' + res['error_texts'][0][:200] + ')' if res['errors'] else ''}", flush=True)
        print(f"{label} {load} round {r + 1}: " + "; ".join(f"GPU {g}: {n} jobs, a job running {share:.0%} of the time"
                                                      for g, (n, share) in sorted(res["gpus"].items())), flush=True)
        if best is None or res["wall_s"] < best["wall_s"]:
            best = res
    return best


def one_setting(devices, cmd, rounds):
    gpus = restart(cmd, devices)
    label = f"gpu_devices = '{devices or ''}'"
    print(f"{label}: " + "; ".join(f"GPU {g} {name or '-'} {state}{' (' + why + ')' if why else ''}"
                                   for g, name, state, why in gpus), flush=True)
    with connect() as c:
        for queries in LOADS.values():
            for _, q in queries:
                c.execute(q).fetchone()
    return {load: one_load(label, load, queries, rounds) for load, queries in LOADS.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--restart-cmd", required=True)
    ap.add_argument("--devices", nargs="+", default=["0", "0,1"],
                    help="gpuclust.gpu_devices values, the first the baseline")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    setup()
    setup_ap()
    floor = one_load("reading only", "scan", SCANS, args.rounds)
    results = [(d, one_setting(d, args.restart_cmd, args.rounds)) for d in args.devices]
    restart(args.restart_cmd, None)
    base_d, base = results[0]
    for load in LOADS:
        for d, res in results[1:]:
            print(f"throughput {load} load, gpu_devices = '{d}' against '{base_d}': {base[load]['wall_s'] / res[load]['wall_s']:.2f}x"
                  f" ({res[load]['wall_s']:.2f} s against {base[load]['wall_s']:.2f} s, best rounds)")
    host = (base["sql"]["split_s"][0] + base["sql"]["split_s"][2]) / 16
    print(f"the sql load's host part with '{base_d}': ingest and emit {host:.2f} s a session on average,"
          f" which no GPU shortens: at most {base['sql']['wall_s'] / host:.2f}x over '{base_d}';"
          f" its 16 sessions only reading the rows: {floor['wall_s']:.2f} s")


if __name__ == "__main__":
    main()
