#!/usr/bin/python3
"""One GPU worker, several GPUs (gpuclust.gpu_devices).

Two modes:
  gpus_test.py               (CI, no GPU) starts a server of its own
                             (test/lib/emulated_gpu.py: GPUCLUST_GPUS_PG_DIR
                             (default /tmp/gpuclust_pg_gpus),
                             GPUCLUST_GPUS_PG_PORT (default 54343), the
                             testing build of test/lib/testing_build.sh) whose
                             worker owns two emulated GPUs
                             (gpuclust.gpu_worker_emulate = 512MB,
                             gpuclust.gpu_devices = '0,1') and checks:
                             gpuclust_gpus lists both 'ready' with a budget of
                             512 MiB each, gpuclust_info's gpu_worker_devices
                             is '0, 1'; gpuclust.gpu_devices refuses a list
                             that is not of distinct device numbers (22023,
                             saying why); with gpuclust.gpu_worker_jobs = 1 (per
                             GPU) two long jobs run at once, one on each GPU
                             (gpuclust_gpu_jobs.gpu), a third queues (gpu
                             NULL), all three cancelled; 16 sessions x 20
                             mixed calls equal a serial run, both GPUs' jobs_done
                             grow; with gpuclust.gpu_worker_split_rows = 1000 a
                             long k-means holds both GPUs (each running it, its
                             memory held: a shard's plan on each, GPU 0 too,
                             seeded on the host or over the shards; listed
                             once on GPU 0), lets both go
                             when cancelled, holds one under a session's
                             gpuclust.gpu_worker_gpus_per_call = 1, and a split
                             call equals device 'cpu' with both GPUs' jobs_done
                             grown by one (seeded by k-means++ and by
                             k-means||), and so does a DBSCAN split (from 8,000
                             rows at 2 features), which gpu_worker_gpus_per_call =
                             1 keeps on one, and an affinity propagation of 400
                             rows with split rows 100,000 (from 390 rows), kept
                             on one alike; with gpuclust.gpu_worker_memory = 3MB
                             one of 350 rows, too large for one GPU, splits (=
                             device 'cpu', both GPUs +1) and fails (53200) under
                             gpu_worker_gpus_per_call = 1 or pinned to one GPU,
                             at 1MB on both too; a session's gpuclust.gpu_device_id pins its
                             jobs: = 1 runs on GPU 1 and a second such job waits
                             though GPU 0 is free, = 0 runs on GPU 0, = 2 (not
                             the worker's) fails under 'gpu' naming
                             gpuclust.gpu_devices and runs on the CPU under
                             'auto'; a job that loses its GPU
                             (gpuclust.gpu_worker_emulate_lose_gpu) is redone on
                             the other, that GPU 'lost' with a reason while the
                             other serves; one that loses the last usable GPU
                             fails under 'gpu' ("failed during the job", naming
                             it; gpuclust_info's gpu_usable false meanwhile)
                             and falls back to the CPU with a NOTICE under
                             'auto'; the lost GPUs come back 'ready' (the GPU
                             process restarted) within 30 s and run jobs.
  gpus_test.py --gpu [--devices 0,1] [--present N]
                             against the server in $PGHOST... whose worker owns
                             real GPUs (shared_preload_libraries = 'gpuclust',
                             gpuclust.gpu_devices = the --devices list; without
                             --devices, the server's setting, '' meaning every
                             GPU present).  N: the GPUs the machine has
                             (default: nvidia-smi -L's count), so a listed one
                             from N up does not exist.  gpuclust_gpus lists
                             exactly the listed GPUs; each present one 'ready'
                             with a real name and a budget, each missing one
                             'unusable' with a reason; 'gpu' calls run on the
                             others and equal device 'cpu'; a running job's GPU
                             shows in gpuclust_gpu_jobs; with two usable GPUs or
                             more, one long job on each at once
                             (gpu_worker_jobs = 1), 16 sessions x 20 mixed
                             calls equal the serial run with every GPU's
                             jobs_done grown, a k-means and a DBSCAN split over
                             every GPU (gpu_worker_split_rows lowered; the
                             emulated mode's checks, affinity propagation's
                             too) equal device 'cpu', and a session's
                             gpuclust.gpu_device_id pins its job.  One GPU
                             listed works too.
Prints PASS/FAIL per check and "N passed, N failed"; exits 1 on a failure.
"""
import argparse
import os
import subprocess
import sys
import time

import psycopg
import psycopg.sql

LIB = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib")
sys.path.insert(0, LIB)
from emulated_gpu import emulated_gpu_server  # noqa: E402
import report  # noqa: E402
from report import check, summary  # noqa: E402
# the GPU worker's suite, beside this file: its helpers and calls (its main
# runs only as a script)
from worker_test import (Bg, Work, connect, fingerprint, info, job_state, many_sessions, no_jobs,  # noqa: E402
                         one, wait_for)

EMULATED_BUDGET = 512 << 20

GPUS = ("SELECT gpu, name, state, reason, memory_total_bytes, memory_free_bytes, memory_budget_bytes,"
        " memory_reserved_bytes, jobs_running, jobs_done FROM gpuclust_gpus ORDER BY gpu")


def gpus(c):
    """gpuclust_gpus: a dict of each row's columns, by GPU number."""
    cur = c.execute(GPUS)
    names = [d.name for d in cur.description]
    return {r[0]: dict(zip(names, r)) for r in cur.fetchall()}


def gpus_line(rows):
    """gpuclust_gpus in one line, for a check's detail."""
    return "; ".join(f"{g} {r['state']}" + (f" ({r['reason']})" if r["reason"] else "") +
                     f" budget {r['memory_budget_bytes']} done {r['jobs_done']}" for g, r in rows.items()) or "no rows"


def all_ready(n):
    """SQL: the worker's n GPUs are all 'ready'."""
    return f"SELECT count(*) = {n} AND bool_and(state = 'ready') FROM gpuclust_gpus"


def job_gpu(c, pid):
    """(state, gpu) of pid's job in gpuclust_gpu_jobs, or None."""
    return c.execute("SELECT state, gpu FROM gpuclust_gpu_jobs WHERE pid = %s", (pid,)).fetchone()


def running_on(c, pids):
    """The GPUs the running jobs of pids run on, sorted."""
    return sorted(r[0] for r in c.execute("SELECT gpu FROM gpuclust_gpu_jobs WHERE state = 'running'"
                                          " AND pid = ANY(%s)", (list(pids),)).fetchall())


def set_jobs(c, n):
    """gpuclust.gpu_worker_jobs = n (None: reset), the configuration reloaded."""
    c.execute(f"ALTER SYSTEM SET gpuclust.gpu_worker_jobs = {n}" if n else
              "ALTER SYSTEM RESET gpuclust.gpu_worker_jobs")
    c.execute("SELECT pg_reload_conf()")
    time.sleep(0.5)                         # the worker reads it at its SIGHUP, as in worker_test.py


def err_text(e):
    """An error's message, detail and hint in one line."""
    if e is None:
        return ""
    return " / ".join(x for x in (e.diag.message_primary, e.diag.message_detail, e.diag.message_hint) if x)


def cancel_all(c, bgs):
    """Cancels the statements of bgs in that order, each once the one
    before has ended.  (ok, detail): ok when every one ended with the
    usual error and their jobs are gone."""
    ended = []
    for b in bgs:
        c.execute("SELECT pg_cancel_backend(%s)", (b.pid,))
        b.join()
        ended.append(b.err)
        b.close()
    gone = wait_for(c, "SELECT NOT EXISTS (SELECT 1 FROM gpuclust_gpu_jobs WHERE pid IN (%s))" %
                    ", ".join(str(b.pid) for b in bgs), timeout=10)
    ok = all(isinstance(e, psycopg.errors.QueryCanceled) for e in ended) and gone is not None
    return ok, "; ".join(f"{type(e).__name__} {err_text(e)}" if e else "no error" for e in ended) + \
        ("" if gone is not None else "; their jobs still listed after 10 s")


def attempt(c, sql):
    """(fingerprint, None) of sql, or (None, its error)."""
    try:
        return fingerprint(c, sql), None
    except psycopg.Error as e:
        return None, e


def on_cpu(sql):
    """A set-returning call of worker_test.py's Work, on device 'cpu'."""
    return sql[:-1] + ", device => 'cpu')"


def group(c, fn, *args):
    """Runs one group of checks; an error that escapes it is a failed
    check, the server is put back (no statement running, gpu_worker_jobs
    reset) and the next group runs."""
    try:
        fn(c, *args)
    except psycopg.Error as e:
        check(f"{fn.__name__}: ran to its end", False, f"{e.sqlstate} {err_text(e)}")
        c.execute("SELECT pg_cancel_backend(pid) FROM pg_stat_activity"
                  " WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() AND state = 'active'")
        c.execute("ALTER SYSTEM RESET gpuclust.gpu_worker_jobs")
        c.execute("ALTER SYSTEM RESET gpuclust.gpu_worker_split_rows")
        c.execute("ALTER SYSTEM RESET gpuclust.gpu_worker_memory")
        c.execute("SELECT pg_reload_conf()")
        wait_for(c, no_jobs(), timeout=10)


# --- CI: two emulated GPUs ---------------------------------------------

def listed(c):
    """Both GPUs listed and ready; gpuclust_info names them."""
    took = wait_for(c, all_ready(2), timeout=30, every=0.05)
    rows = gpus(c)
    check("gpuclust_gpus lists GPUs 0 and 1, both 'ready' (no reason)",
          took is not None and list(rows) == [0, 1] and
          all(r["state"] == "ready" and r["reason"] is None for r in rows.values()), gpus_line(rows))
    check("... each an emulated GPU of 512 MiB: its budget, nothing reserved or running",
          len(rows) == 2 and all("gpu_worker_emulate" in (r["name"] or "") and
                                 r["memory_budget_bytes"] == EMULATED_BUDGET and
                                 r["memory_total_bytes"] == EMULATED_BUDGET and
                                 r["memory_reserved_bytes"] == 0 and r["jobs_running"] == 0
                                 for r in rows.values()),
          "; ".join(f"{g} {r['name']!r} total {r['memory_total_bytes']} budget {r['memory_budget_bytes']}"
                    f" reserved {r['memory_reserved_bytes']} running {r['jobs_running']}" for g, r in rows.items()))
    i = info(c)
    check("gpuclust_info: gpu_worker_devices = '0, 1'", i.get("gpu_worker_devices") == "0, 1",
          f"{i.get('gpu_worker_devices')!r}")
    bad = {}
    for value in ("0,0", "0,x", "-1", "1025", ",", ",".join(str(g) for g in range(17))):
        try:
            c.execute("ALTER SYSTEM SET gpuclust.gpu_devices = %s" % psycopg.sql.quote(value))
            bad[value] = "accepted"
            c.execute("ALTER SYSTEM RESET gpuclust.gpu_devices")
        except psycopg.Error as e:
            bad[value] = (e.sqlstate, e.diag.message_detail)
    check("gpuclust.gpu_devices refuses what is not a list of distinct device numbers (22023, saying why)",
          all(v != "accepted" and v[0] == "22023" and v[1] for v in bad.values()),
          "; ".join(f"{k!r}: {v}" for k, v in bad.items()))


def spread(c, w):
    """gpu_worker_jobs = 1: a long job on each GPU, a third queued."""
    set_jobs(c, 1)
    a, b = Bg(w.long()), Bg(w.long())
    both = wait_for(c, f"SELECT count(*) = 2 FROM gpuclust_gpu_jobs WHERE state = 'running'"
                       f" AND pid IN ({a.pid}, {b.pid})", timeout=10)
    on = running_on(c, (a.pid, b.pid))
    check("gpu_worker_jobs = 1: two long jobs from two sessions run at once, one on GPU 0, one on GPU 1",
          both is not None and on == [0, 1], f"running on {on}")
    rows = gpus(c)
    check("... gpuclust_gpus: a job running on each, its memory reserved",
          all(r["jobs_running"] == 1 and r["memory_reserved_bytes"] > 0 for r in rows.values()) and len(rows) == 2,
          "; ".join(f"{g} running {r['jobs_running']} reserved {r['memory_reserved_bytes']}"
                    for g, r in rows.items()))
    q = Bg(w.long())
    queued = wait_for(c, job_state(q.pid) % "queued", timeout=10)
    time.sleep(0.3)
    row = job_gpu(c, q.pid)
    check("... a third queues, its gpu NULL", queued is not None and row == ("queued", None), f"{row}")
    t0 = time.time()
    ok, how = cancel_all(c, [q, a, b])
    check("... the three cancelled: the usual error, the jobs gone", ok, f"{time.time() - t0:.1f} s: {how}")
    set_jobs(c, None)


def sessions(c, w, serial):
    """16 sessions x 20 mixed calls, spread over both GPUs."""
    before = gpus(c)
    bad, took = many_sessions(w, serial)
    check("16 sessions x 20 mixed calls on two GPUs = the serial run", not bad,
          f"{len(bad)} differ, {took:.1f} s")
    after = gpus(c)
    grew = {g: after[g]["jobs_done"] - before[g]["jobs_done"] for g in after if g in before}
    check("... both GPUs' jobs_done grew", len(grew) == 2 and all(v > 0 for v in grew.values()),
          ", ".join(f"GPU {g} +{v}" for g, v in grew.items()))


def set_split_rows(c, n):
    """gpuclust.gpu_worker_split_rows = n (None: reset), reloaded."""
    c.execute(f"ALTER SYSTEM SET gpuclust.gpu_worker_split_rows = {n}" if n else
              "ALTER SYSTEM RESET gpuclust.gpu_worker_split_rows")
    c.execute("SELECT pg_reload_conf()")
    time.sleep(0.5)


def split_equals(c, usable, what, q):
    """The set-returning call q on device 'gpu' runs split over the GPUs
    usable (each one's jobs_done +1) and equals it on device 'cpu'."""
    before = gpus(c)
    t0 = time.time()
    got = fingerprint(c, q[:-1] + ", device => 'gpu')")
    took = time.time() - t0
    after = gpus(c)
    grew = [after[g]["jobs_done"] - before[g]["jobs_done"] for g in usable]
    check(f"{what} split over GPUs {usable} = device 'cpu' ({took:.2f} s), each GPU's jobs_done +1",
          got == fingerprint(c, on_cpu(q)) and grew == [1] * len(usable), f"jobs_done grew {grew}")


def split(c, w, usable):
    """A k-means call of gpuclust.gpu_worker_split_rows rows or more runs
    split over every idle GPU; a session caps it with
    gpuclust.gpu_worker_gpus_per_call; the result is device 'cpu''s."""
    set_split_rows(c, 1000)
    b = Bg(w.long())
    wait_for(c, job_state(b.pid) % "running", timeout=30)
    time.sleep(0.2)
    rows = gpus(c)
    check(f"a long k-means of {w.n_long} rows (split rows 1000) holds every idle GPU: each runs it, its memory held",
          all(rows[g]["jobs_running"] == 1 and rows[g]["memory_reserved_bytes"] > 0 for g in usable),
          "; ".join(f"{g} running {r['jobs_running']} reserved {r['memory_reserved_bytes']}" for g, r in rows.items()))
    held = [rows[g]["memory_reserved_bytes"] for g in usable]
    check("... seeded on the host (init 'random'): each GPU holds a shard's plan, the first too",
          len(set(held)) == 1 and held[0] > 0, f"reserved {held}")
    row = job_gpu(c, b.pid)
    check("... gpuclust_gpu_jobs lists it once, on its first GPU", row == ("running", usable[0]), f"{row}")
    check("... cancelled: the usual error, the job gone", *cancel_all(c, [b]))
    wait_for(c, no_jobs(), timeout=10)
    b = Bg(w.long().replace("init => 'random'", "init => 'k-means++'"))
    wait_for(c, job_state(b.pid) % "running", timeout=30)
    time.sleep(0.2)
    held = [gpus(c)[g]["memory_reserved_bytes"] for g in usable]
    check("... init 'k-means++', seeded over the shards: each GPU holds a shard's plan, the first too",
          len(set(held)) == 1 and held[0] > 0, f"reserved {held}")
    cancel_all(c, [b])
    wait_for(c, "SELECT bool_and(jobs_running = 0 AND memory_reserved_bytes = 0) FROM gpuclust_gpus", timeout=10)
    rows = gpus(c)
    check("... every GPU's memory and job let go",
          all(r["jobs_running"] == 0 and r["memory_reserved_bytes"] == 0 for r in rows.values()),
          "; ".join(f"{g} running {r['jobs_running']} reserved {r['memory_reserved_bytes']}" for g, r in rows.items()))
    b = Bg(w.long(), setup=["SET gpuclust.gpu_worker_gpus_per_call = 1"])
    wait_for(c, job_state(b.pid) % "running", timeout=30)
    time.sleep(0.2)
    rows = gpus(c)
    check("gpuclust.gpu_worker_gpus_per_call = 1: the session's long k-means runs on one GPU",
          sum(r["jobs_running"] for r in rows.values()) == 1,
          "; ".join(f"{g} running {r['jobs_running']}" for g, r in rows.items()))
    cancel_all(c, [b])
    wait_for(c, no_jobs(), timeout=10)
    split_equals(c, usable, f"a k-means of {w.n_long} rows",
                 "SELECT * FROM gpu_kmeans('SELECT id, f FROM w_long', 100, max_iter => 20, seed => 11)")
    split_equals(c, usable, f"a k-means of {w.n_long} rows seeded by k-means|| (over the shards)",
                 "SELECT * FROM gpu_kmeans('SELECT id, f FROM w_long', 100, max_iter => 20, init => 'k-means||', seed => 12)")
    check("... and the mixed k-means over the small table",
          fingerprint(c, w.mixed("gpu")[0]) == fingerprint(c, w.mixed("cpu")[0]))
    split_equals(c, usable, f"a DBSCAN of {w.n_long} rows x 2 (split from 8,000 rows at 2 features)",
                 "SELECT * FROM gpu_dbscan('SELECT id, f[1:2] FROM w_long', 0.5, 4)")
    after = gpus(c)
    b = Bg(f"SELECT count(*) FROM gpu_dbscan('SELECT id, f[1:2] FROM w_long', 0.5, 4, device => 'gpu')",
           setup=["SET gpuclust.gpu_worker_gpus_per_call = 1"])
    b.join()
    b.close()
    after2 = gpus(c)
    grew = [after2[g]["jobs_done"] - after[g]["jobs_done"] for g in usable]
    check("... with gpuclust.gpu_worker_gpus_per_call = 1 on one GPU", sum(grew) == 1, f"jobs_done grew {grew}")
    set_split_rows(c, None)


def set_worker_memory(c, mb):
    """gpuclust.gpu_worker_memory = mb MB (None: reset), reloaded; waits
    until every GPU's budget shows it (at most mb MB)."""
    c.execute(f"ALTER SYSTEM SET gpuclust.gpu_worker_memory = {mb}" if mb else
              "ALTER SYSTEM RESET gpuclust.gpu_worker_memory")
    c.execute("SELECT pg_reload_conf()")
    wait_for(c, f"SELECT bool_and(memory_budget_bytes <= {mb << 20}) FROM gpuclust_gpus" if mb else
             "SELECT bool_and(memory_budget_bytes > 64 << 20) FROM gpuclust_gpus", timeout=10)
    time.sleep(0.5)


def used_gpus(c, usable, sql, setup=()):
    """How much each GPU's jobs_done grew over sql, run in a session of its
    own (setup first), and its error."""
    before = gpus(c)
    b = Bg(sql, setup=list(setup))
    b.join()
    b.close()
    after = gpus(c)
    return [after[g]["jobs_done"] - before[g]["jobs_done"] for g in usable], b.err


def split_ap(c, w, usable):
    """Affinity propagation splits by rows from gc_ap_split_rows (a 256th
    of gpuclust.gpu_worker_split_rows) rows, and, too large for one GPU's
    budget, over the fewest GPUs whose parts fit, whatever its rows."""
    ap = "SELECT * FROM gpu_affinity_propagation('SELECT id, f FROM w_small WHERE id <= {}')"
    set_split_rows(c, 100000)
    split_equals(c, usable, "an affinity propagation of 400 rows (split rows 100,000: from 390 rows)",
                 ap.format(400))
    grew, err = used_gpus(c, usable, ap.format(400)[:-1] + ", device => 'gpu')",
                          ["SET gpuclust.gpu_worker_gpus_per_call = 1"])
    check("... with gpuclust.gpu_worker_gpus_per_call = 1 on one GPU", sum(grew) == 1 and err is None,
          f"jobs_done grew {grew} {err_text(err)}")
    set_split_rows(c, None)
    # 3 MiB a GPU: 350 rows x 3 need about 3.9 MiB on one GPU, 2.5 MiB on each of two
    set_worker_memory(c, 3)
    split_equals(c, usable, "an affinity propagation of 350 rows, too large for one GPU's 3 MiB (split rows"
                 " at their default)", ap.format(350))
    most = "SELECT value::int FROM gpuclust_info() WHERE key = 'ap_max_rows_gpu_float8'"
    split_most = one(c, most)
    c.execute("SET gpuclust.gpu_worker_gpus_per_call = 1")
    one_most = one(c, most)
    c.execute("RESET gpuclust.gpu_worker_gpus_per_call")
    check("... gpuclust_info's ap_max_rows_gpu_float8 counts every GPU a call may split over",
          split_most >= 350 > one_most, f"{split_most} rows split, {one_most} on one GPU")
    grew, err = used_gpus(c, usable, ap.format(350)[:-1] + ", device => 'gpu')",
                          ["SET gpuclust.gpu_worker_gpus_per_call = 1"])
    check("... with gpuclust.gpu_worker_gpus_per_call = 1 it fits no GPU: 53200 under 'gpu', naming the rows"
          " that fit, no job run",
          isinstance(err, psycopg.errors.OutOfMemory) and "rows fit" in err_text(err) and sum(grew) == 0,
          f"jobs_done grew {grew}; {type(err).__name__} {err_text(err)}")
    server_id = int(one(c, "SELECT reset_val FROM pg_settings WHERE name = 'gpuclust.gpu_device_id'"))
    pin = [g for g in usable if g != server_id][0]
    grew, err = used_gpus(c, usable, ap.format(350)[:-1] + ", device => 'gpu')",
                          [f"SET gpuclust.gpu_device_id = {pin}"])
    check(f"... a session pinned to GPU {pin} (gpuclust.gpu_device_id) fails alike",
          isinstance(err, psycopg.errors.OutOfMemory) and sum(grew) == 0,
          f"jobs_done grew {grew}; {type(err).__name__} {err_text(err)}")
    set_worker_memory(c, 1)
    grew, err = used_gpus(c, usable, ap.format(350)[:-1] + ", device => 'gpu')")
    check(f"... at 1 MiB a GPU, split over all {len(usable)} too large too: 53200 naming the rows that fit on each",
          isinstance(err, psycopg.errors.OutOfMemory) and "on each GPU" in err_text(err) and sum(grew) == 0,
          f"jobs_done grew {grew}; {type(err).__name__} {err_text(err)}")
    set_worker_memory(c, None)


def pinned(c, w, cpu_auto):
    """A session's gpuclust.gpu_device_id pins its jobs to that GPU."""
    set_jobs(c, 1)
    pin1 = ["SET gpuclust.gpu_device_id = 1"]
    a = Bg(w.long(), setup=pin1)
    wait_for(c, job_state(a.pid) % "running", timeout=10)
    row_a = job_gpu(c, a.pid)
    check("gpuclust.gpu_device_id = 1 (not the server's 0): the session's long job runs on GPU 1",
          row_a == ("running", 1), f"{row_a}")
    b = Bg(w.long(), setup=pin1)
    queued = wait_for(c, job_state(b.pid) % "queued", timeout=10)
    time.sleep(0.5)
    row_b = job_gpu(c, b.pid)
    idle0 = gpus(c).get(0, {}).get("jobs_running")
    check("... a second such job waits for GPU 1 though GPU 0 is free (gpu_worker_jobs = 1)",
          queued is not None and row_b == ("queued", None) and idle0 == 0,
          f"{row_b}; GPU 0 running {idle0}")
    ok_b, how_b = cancel_all(c, [b])
    d = Bg(w.long(), setup=["SET gpuclust.gpu_device_id = 0"])
    wait_for(c, job_state(d.pid) % "running", timeout=10)
    row_d = job_gpu(c, d.pid)
    check("gpuclust.gpu_device_id = 0: the session's long job runs on GPU 0 (beside the one on GPU 1)",
          row_d == ("running", 0) and job_gpu(c, a.pid) == ("running", 1), f"{row_d}")
    ok, how = cancel_all(c, [d, a])
    check("... the pinned jobs cancelled: the usual error, the jobs gone", ok_b and ok, f"{how_b}; {how}")
    set_jobs(c, None)

    # a GPU the worker does not own
    with connect() as p:
        p.execute("SET gpuclust.gpu_device_id = 2")
        notices = []
        p.add_notice_handler(lambda diag: notices.append(diag.message_primary))
        try:
            p.execute(w.mixed("gpu")[0])
            err = None
        except psycopg.Error as e:
            err = e
        check("gpuclust.gpu_device_id = 2 (not the worker's): device 'gpu' fails (0A000) naming gpuclust.gpu_devices",
              err is not None and err.sqlstate == "0A000" and "gpuclust.gpu_devices" in err_text(err),
              f"{err.sqlstate} {err_text(err)}" if err else "it ran")
        r = fingerprint(p, w.outage_auto())
        check("... 'auto' (a call it would send to the GPU) runs on the CPU: the CPU's result",
              r == cpu_auto, f"notices {notices}")


def lost(c, w, serial, ref, cpu_auto):
    """gpuclust.gpu_worker_emulate_lose_gpu: a job that makes its GPU fail."""
    q, q2 = w.mixed("gpu")[0], w.mixed("gpu")[1]
    p = connect()
    p.execute("SET gpuclust.gpu_worker_emulate_lose_gpu = on")
    notices = []
    p.add_notice_handler(lambda d: notices.append((d.message_primary or "", d.message_detail or "")))

    def lose(sql):
        """sql's fingerprint in the losing session, or its error."""
        notices.clear()
        return attempt(p, sql)

    def one_lost(how):
        """A 'gpu' call that loses its GPU, redone on the other; the GPU left."""
        r, err = lose(q)
        rows = gpus(c)
        gone = [g for g, x in rows.items() if x["state"] == "lost"]
        left = [g for g, x in rows.items() if x["state"] == "ready"]
        check(f"{how}a k-means job that loses its GPU ('gpu') is redone on the other: the CPU's result",
              err is None and r == ref[q], f"{err.sqlstate} {err_text(err)}" if err else "")
        check("... gpuclust_gpus: that GPU 'lost' with a reason, the other 'ready'",
              len(gone) == 1 and len(left) == 1 and bool(rows[gone[0]]["reason"]), gpus_line(rows))
        return left[0] if len(left) == 1 and len(gone) == 1 else None

    def back(how):
        t = wait_for(c, all_ready(2), timeout=30, every=0.1)
        rows = gpus(c)
        check(f"{how}both GPUs 'ready' again within 30 s (the GPU process restarted)", t is not None,
              f"after {t and round(t, 1)} s: {gpus_line(rows)}")

    left = one_lost("")
    done = gpus(c).get(left, {}).get("jobs_done") if left is not None else None
    r, err = attempt(c, q2)
    after = gpus(c).get(left, {}).get("jobs_done") if left is not None else None
    check("... meanwhile a 'gpu' call of another session runs, on the GPU left",
          r == serial[q2] and done is not None and after is not None and after > done,
          f"GPU {left} jobs_done {done} -> {after}" + (f"; {err.sqlstate} {err_text(err)}" if err else ""))

    # the last usable GPU lost too, under 'gpu'
    r, err = lose(q)
    text = err_text(err)
    check("a job that loses the last usable GPU fails under 'gpu' (\"failed during the job\", naming the GPU)",
          err is not None and "failed during the job" in text and f"GPU {left}" in text,
          f"{err.sqlstate} {text}" if err else f"it ran ({'the CPU' if r == ref[q] else 'a wrong'} result)")
    i = info(c)
    check("... gpuclust_info: gpu_usable false while both are lost, the reason pointing at gpuclust_gpus",
          i.get("gpu_usable") == "false" and "gpuclust_gpus" in (i.get("gpu_reason") or ""),
          f"{i.get('gpu_usable')} {i.get('gpu_reason')!r}")
    back("")

    # again, then under 'auto'
    one_lost("after the restart, ")
    r, err = lose(w.outage_auto())
    moved = [n for n in notices if "falls back to the CPU" in n[0]]
    check("a job that loses the last usable GPU under 'auto' falls back to the CPU with a NOTICE: the CPU's result",
          err is None and r == cpu_auto and any("failed during the job" in d for _, d in moved),
          f"{err.sqlstate} {err_text(err)}" if err else f"notices {notices}")
    p.close()
    back("... ")
    r, err = attempt(c, q)
    check("... and a 'gpu' call runs on them: the CPU's result", r == ref[q],
          f"{err.sqlstate} {err_text(err)}" if err else "")


def emulated():
    with emulated_gpu_server(os.environ.get("GPUCLUST_GPUS_PG_DIR", "/tmp/gpuclust_pg_gpus"),
                             os.environ.get("GPUCLUST_GPUS_PG_PORT", "54343"),
                             "-c gpuclust.gpu_devices=0,1"):
        c = connect()
        c.execute("CREATE EXTENSION IF NOT EXISTS gpuclust")
        t0 = time.time()
        group(c, listed)
        w = Work(False)
        w.setup(c)
        # each call once: through the worker, and on the CPU
        serial, ref = {}, {}
        for q_gpu, q_cpu in zip(w.mixed("gpu"), w.mixed("cpu")):
            serial[q_gpu], ref[q_gpu] = fingerprint(c, q_gpu), fingerprint(c, q_cpu)
        check("device 'gpu' through a worker of two GPUs = device 'cpu' (k-means, DBSCAN, cosine)",
              all(serial[q] == ref[q] for q in serial))
        cpu_auto = fingerprint(c, on_cpu(w.outage_auto()))
        group(c, spread, w)
        group(c, sessions, w, serial)
        group(c, split, w, [0, 1])
        group(c, split_ap, w, [0, 1])
        group(c, pinned, w, cpu_auto)
        group(c, lost, w, serial, ref, cpu_auto)
        report.info(f"the checks took {time.time() - t0:.1f} s")
        c.close()


# --- a real server's GPUs ----------------------------------------------

def present_gpus():
    """How many GPUs nvidia-smi lists."""
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    return sum(1 for l in out.splitlines() if l.startswith("GPU "))


def real(devices, present):
    c = connect()
    c.execute("CREATE EXTENSION IF NOT EXISTS gpuclust")
    setting = one(c, "SELECT current_setting('gpuclust.gpu_devices')")
    if present is None:
        present = present_gpus()
    if devices is None:
        devices = setting
    if present is None:
        check("the GPUs present (nvidia-smi -L, or --present)", False, "nvidia-smi did not answer")
        return
    want = [int(x) for x in devices.split(",") if x.strip()] if devices.strip() else list(range(present))
    usable = [g for g in want if g < present]
    missing = [g for g in want if g >= present]
    report.info(f"gpuclust.gpu_devices = '{setting}'; expected GPUs {want}, {present} present")
    wait_for(c, f"SELECT count(*) = {len(want)} AND bool_and(state <> 'starting') FROM gpuclust_gpus", timeout=60)
    rows = gpus(c)
    check(f"gpuclust_gpus lists exactly GPUs {want}", list(rows) == want, gpus_line(rows))
    i = info(c)
    check(f"gpuclust_info: gpu_worker_devices = '{', '.join(map(str, want))}'",
          i.get("gpu_worker_devices") == ", ".join(map(str, want)), f"{i.get('gpu_worker_devices')!r}")
    for g in usable:
        r = rows.get(g)
        check(f"GPU {g} 'ready', a real name, a budget within its memory",
              r is not None and r["state"] == "ready" and r["reason"] is None and bool(r["name"]) and
              "gpu_worker_emulate" not in r["name"] and
              0 < (r["memory_budget_bytes"] or 0) <= (r["memory_total_bytes"] or 0),
              f"{r}")
    for g in missing:
        r = rows.get(g)
        check(f"GPU {g} (not present) 'unusable', with a reason",
              r is not None and r["state"] == "unusable" and bool(r["reason"]), f"{r}")
    if not missing:
        report.info("no listed GPU is missing: 'unusable' not exercised (list one, e.g. gpu_devices = '0,1'"
                    " on a one-GPU machine)")
    if not usable:
        check("a usable GPU listed", False, f"{want}, {present} present")
        return

    w = Work(True)
    w.setup(c)
    serial = {}
    ok = True
    for q_gpu, q_cpu in zip(w.mixed("gpu"), w.mixed("cpu")):
        serial[q_gpu] = fingerprint(c, q_gpu)
        ok = ok and serial[q_gpu] == fingerprint(c, q_cpu)
    check("device 'gpu' = device 'cpu' (k-means, DBSCAN, cosine)" +
          (f", with GPU {', '.join(map(str, missing))} unusable" if missing else ""), ok)
    if len(usable) >= 2:
        group(c, sessions, w, serial)
        group(c, split, w, usable)
        group(c, split_ap, w, usable)

    b = Bg(w.long())
    wait_for(c, job_state(b.pid) % "running", timeout=30)
    row = job_gpu(c, b.pid)
    check("gpuclust_gpu_jobs shows the GPU a running job runs on",
          row is not None and row[0] == "running" and row[1] in usable, f"{row}")
    check("... cancelled: the usual error, the job gone", *cancel_all(c, [b]))

    if len(usable) >= 2:
        set_jobs(c, 1)
        bs = [Bg(w.long()) for _ in usable]
        wait_for(c, f"SELECT count(*) = {len(bs)} FROM gpuclust_gpu_jobs WHERE state = 'running'", timeout=30)
        on = running_on(c, (b.pid for b in bs))
        check(f"gpu_worker_jobs = 1: {len(bs)} long jobs run at once, one on each usable GPU",
              on == sorted(usable), f"running on {on}")
        check("... cancelled", *cancel_all(c, bs))
        server_id = int(one(c, "SELECT reset_val FROM pg_settings WHERE name = 'gpuclust.gpu_device_id'"))
        for g in usable:
            if g == server_id:
                continue
            b = Bg(w.long(), setup=[f"SET gpuclust.gpu_device_id = {g}"])
            wait_for(c, job_state(b.pid) % "running", timeout=30)
            row = job_gpu(c, b.pid)
            check(f"gpuclust.gpu_device_id = {g}: the session's long job runs on GPU {g}",
                  row == ("running", g), f"{row}")
            cancel_all(c, [b])
        set_jobs(c, None)
    c.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpu", action="store_true")
    ap.add_argument("--devices", help="the server's gpuclust.gpu_devices, e.g. '0,1'"
                    " (default: its setting; '' is every GPU present)")
    ap.add_argument("--present", type=int, help="the GPUs the machine has (default: nvidia-smi -L's count)")
    args = ap.parse_args()
    if args.gpu:
        real(args.devices, args.present)
    else:
        emulated()
    sys.exit(summary())


if __name__ == "__main__":
    main()
