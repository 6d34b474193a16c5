#!/usr/bin/env python3
"""The GPU worker's throughput with one GPU and with several, on one server.

  bench_gpus.py --restart-cmd CMD [--devices 0 0,1] [--rounds N]

Against the server in $PGHOST... (gpuclust preloaded; the pg-bundle on the
GPU machine), for each gpuclust.gpu_devices value of --devices (ALTER
SYSTEM, then CMD restarts the server): a warm-up call of each kind, then
N rounds of bench_worker.py's load, 16 concurrent sessions each running
gpu_kmeans on 1M rows x 32 (k = 100) and gpu_dbscan on 10M 2-d rows
(device 'gpu').  Per value: the wall time and calls/s (the best round),
each call's median latency, where the sessions' time went (log_timing's
ingest, compute and emit, summed over the calls), and per GPU its jobs
and the share of the wall time it had one running (gpuclust_gpus, read
every 20 ms).  Then each value's throughput against the first's.  The
setting is reset at the end.
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


def one_setting(devices, cmd, rounds):
    gpus = restart(cmd, devices)
    label = f"gpu_devices = '{devices or ''}'"
    print(f"{label}: " + "; ".join(f"GPU {g} {name or '-'} {state}{' (' + why + ')' if why else ''}"
                                   for g, name, state, why in gpus), flush=True)
    with connect() as c:
        c.execute(KM).fetchone()
        c.execute(DB).fetchone()
    best = None
    for r in range(rounds):
        conns = [timed_session() for _ in range(16)]
        busy = Busy()
        res = concurrent(conns)
        res["gpus"] = busy.end()
        res["split_s"] = [sum(c.split[i] for c in conns) / 1000 for i in range(3)]
        for c in conns:
            c.close()
        ing, comp, emit = res["split_s"]
        print(f"{label} round {r + 1}: 16 sessions x (k-means 1M x 32 k 100 + DBSCAN 10M 2-d): {res['wall_s']:.2f} s wall,"
              f" {32 / res['wall_s']:.2f} calls/s, median k-means {res['km_median_s']:.2f} s, DBSCAN {res['db_median_s']:.2f} s;"
              f" the sessions' time: ingest {ing:.1f} s, compute {comp:.1f} s, emit {emit:.1f} s;"
              f" errors {res['errors']}{' (' + res['error_texts'][0][:200] + ')' if res['errors'] else ''}", flush=True)
        print(f"{label} round {r + 1}: " + "; ".join(f"GPU {g}: {n} jobs, a job running {share:.0%} of the time"
                                                  for g, (n, share) in sorted(res["gpus"].items())), flush=True)
        if best is None or res["wall_s"] < best["wall_s"]:
            best = res
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--restart-cmd", required=True)
    ap.add_argument("--devices", nargs="+", default=["0", "0,1"],
                    help="gpuclust.gpu_devices values, the first the baseline")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    setup()
    results = [(d, one_setting(d, args.restart_cmd, args.rounds)) for d in args.devices]
    restart(args.restart_cmd, None)
    base_d, base = results[0]
    for d, res in results[1:]:
        print(f"throughput gpu_devices = '{d}' against '{base_d}': {base['wall_s'] / res['wall_s']:.2f}x"
              f" ({res['wall_s']:.2f} s against {base['wall_s']:.2f} s, best rounds)")


if __name__ == "__main__":
    main()
