#!/usr/bin/python3
"""The GPU worker: hand-off, queue, cancellation, failures.

Two modes:
  worker_test.py             (CI, no GPU) first checks the test server
                             ($PGHOST...; gpuclust preloaded): the worker runs,
                             reports "no GPU", and 'auto' falls back to the CPU.
                             Then starts a second server (test/lib/emulated_gpu.py:
                             GPUCLUST_WORKER_PG_DIR (default /tmp/gpuclust_pg_worker),
                             GPUCLUST_WORKER_PG_PORT (default 54339),
                             the testing build of test/lib/testing_build.sh)
                             whose worker emulates a GPU on the CPU
                             (gpuclust.gpu_worker_emulate = 512MB) and runs the
                             protocol checks below against it.
  worker_test.py --gpu       against the server in $PGHOST... whose worker owns
                             a real GPU (the pg-bundle on the GPU machine, with
                             shared_preload_libraries = 'gpuclust'); the same
                             checks with GPU-sized work, plus the GPU memory of
                             16 idle sessions (nvidia-smi) and the first call's
                             latency.  --stop-cmd / --start-cmd control that server.
The protocol checks: results through the worker equal the CPU's (DBSCAN's
algorithm 'dclust' included: the job carries it; affinity propagation in
float8, and float4 refused by the emulation or run on a real GPU; an
affinity propagation job listed and cancelled; kmeans_step and
gpu_kmeans_distributed on device 'gpu' bit for bit device 'cpu''s, refused
without a GPU, and over 5,000 rows of 8,192 features a job per 64 MiB
block of 2,048 rows, one seen queued); 16 sessions
x 20 mixed calls equal a serial run; the jobs view and the progress view show
a running job; a job cancelled while queued and one while running (and by
statement_timeout) end at once with the usual error, and free their slot; a
job larger than the GPU is refused under 'gpu' (53200) and runs on the CPU
under 'auto'; jobs wait for GPU memory in arrival order (emulated only); the
worker killed with SIGTERM mid-job fails the job ('gpu') or falls back
('auto') and is restarted; the GPU process (the worker's child that holds
CUDA) killed with SIGKILL mid-job fails the job ('gpu') or falls back
('auto'), and while a new one starts 'gpu' fails at once with the reason
and 'auto' runs on the CPU, a session opened before still answers and the
server log (--server-log) shows no crash recovery; the server stops
promptly with jobs queued.
Prints PASS/FAIL per check and "N passed, N failed"; exits 1 on a failure.
"""
import argparse
import os
import signal
import subprocess
import sys
import threading
import time

import psycopg

LIB = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib")
sys.path.insert(0, LIB)
from emulated_gpu import emulated_gpu_server  # noqa: E402
from report import check, summary  # noqa: E402


def connect(**kw):
    return psycopg.connect("", autocommit=True, **kw)


def one(c, sql, args=None):
    return c.execute(sql, args).fetchone()[0]


def info(c):
    return dict(c.execute("SELECT key, value FROM gpuclust_info()").fetchall())


def fingerprint(c, sql):
    """md5 of a clustering call's rows in id order (sql: a set-returning call)."""
    return one(c, f"SELECT md5(string_agg(id || ':' || coalesce(cluster_id::text, '-'), ',' ORDER BY id))"
                  f" FROM ({sql}) r")


class Bg:
    """A statement running in its own session and thread."""

    def __init__(self, sql, setup=()):
        self.conn = connect()
        self.pid = self.conn.info.backend_pid
        for s in setup:
            self.conn.execute(s)
        self.err = None
        self.result = None
        self.notices = []
        self.conn.add_notice_handler(lambda d: self.notices.append(d.message_primary))
        self.t0 = time.time()
        self.t1 = None
        self.thread = threading.Thread(target=self._run, args=(sql,))
        self.thread.start()

    def _run(self, sql):
        try:
            self.result = self.conn.execute(sql).fetchall()
        except psycopg.Error as e:
            self.err = e
        self.t1 = time.time()

    def join(self, timeout=120):
        self.thread.join(timeout)
        return not self.thread.is_alive()

    def close(self):
        try:
            self.conn.close()
        except Exception:
            pass


def wait_for(c, sql, timeout=30, every=0.02):
    """Polls sql until it returns true; the seconds it took, or None."""
    t0 = time.time()
    while time.time() - t0 < timeout:
        r = c.execute(sql).fetchone()
        if r is not None and r[0]:
            return time.time() - t0
        time.sleep(every)
    return None


def job_state(pid):
    return f"SELECT EXISTS (SELECT 1 FROM gpuclust_gpu_jobs WHERE pid = {pid} AND state = '%s')"


def no_jobs():
    return "SELECT NOT EXISTS (SELECT 1 FROM gpuclust_gpu_jobs)"


def worker_pid(c):
    v = info(c).get("gpu_worker_pid")
    return int(v) if v else None


def wait_worker(c, old_pid=None, timeout=30):
    t0 = time.time()
    while time.time() - t0 < timeout:
        i = info(c)
        if i["gpu_worker"] == "running" and i.get("gpu_worker_pid") and \
                int(i["gpu_worker_pid"]) != old_pid:
            return int(i["gpu_worker_pid"]), time.time() - t0
        time.sleep(0.1)
    return None, None


class Work:
    """The tables and calls, sized for the mode."""

    def __init__(self, gpu):
        self.gpu = gpu
        if gpu:
            self.n_small, self.d_small = 100000, 3
            self.n_long, self.d_long, self.k_long = 1000000, 32, 1000
            self.long_iter = 100000
        else:
            self.n_small, self.d_small = 20000, 3
            self.n_long, self.d_long, self.k_long = 200000, 2, 300
            self.long_iter = 100000

    def setup(self, c):
        c.execute("DROP TABLE IF EXISTS w_small, w_long")
        c.execute(f"CREATE TABLE w_small AS SELECT i::bigint AS id, ARRAY(SELECT ((i % 17) + (hashint4(i * 100 + j) % 1000) / 2500.0)::real"
                  f" FROM generate_series(1, {self.d_small}) j) AS f FROM generate_series(1, {self.n_small}) i")
        c.execute(f"CREATE TABLE w_long AS SELECT i::bigint AS id, ARRAY(SELECT (hashint4(i * 100 + j) % 100000 / 1000.0)::real"
                  f" FROM generate_series(1, {self.d_long}) j) AS f FROM generate_series(1, {self.n_long}) i")
        c.execute("ANALYZE w_small, w_long")

    def long(self, device="gpu", algo="kmeans"):
        """A call that runs until cancelled (tol 0, a huge max_iter)."""
        return (f"SELECT count(*) FROM gpu_kmeans('SELECT id, f FROM w_long', {self.k_long},"
                f" max_iter => {self.long_iter}, tol => 0, init => 'random', n_init => 1000,"
                f" device => '{device}')")

    def auto_long(self):
        """A call 'auto' sends to the GPU (n k d >= 5e8), short enough to redo on the CPU."""
        k = 1000 if self.gpu else 1300
        return (f"SELECT count(*) FROM gpu_kmeans('SELECT id, f FROM w_long', {k},"
                f" max_iter => {30 if self.gpu else 5}, tol => 0, init => 'random')")

    def outage_auto(self):
        """A short k-means that 'auto' sends to the GPU (n k d >= 5e8): one iteration."""
        k = 160 if self.gpu else 2600
        return (f"SELECT * FROM gpu_kmeans('SELECT id, f FROM w_long WHERE id <= 100000', {k},"
                f" max_iter => 1, init => 'random', seed => 7)")

    def mixed(self, device="gpu"):
        s = "SELECT id, f FROM w_small"
        return [f"SELECT * FROM gpu_kmeans('{s}', 8, seed => 3, device => '{device}')",
                f"SELECT * FROM gpu_dbscan('{s}', 0.08, 5, device => '{device}')",
                f"SELECT * FROM gpu_kmeans('{s}', 40, init => 'random', seed => 5, device => '{device}')",
                f"SELECT * FROM gpu_dbscan('{s}', 0.02, 4, device => '{device}', metric => 'cosine')"]


def no_gpu_checks():
    """The test server: its worker runs without a GPU; 'auto' uses the CPU."""
    with connect() as c:
        i = info(c)
        check("worker running without a GPU reports it", i["gpu_worker"] == "running, no GPU" and
              i["gpu_usable"] == "false" and i["gpu_worker_pid"] is not None,
              f"gpu_worker = {i['gpu_worker']}, reason = {i['gpu_reason']}")
        src = "SELECT i, ARRAY[i % 100, i / 100]::real[] FROM generate_series(1, 20000) i"
        notices = []
        c.add_notice_handler(lambda d: notices.append(d.message_primary))
        a = fingerprint(c, f"SELECT * FROM gpu_dbscan('{src}', 1.5, 3)")
        b = fingerprint(c, f"SELECT * FROM gpu_dbscan('{src}', 1.5, 3, device => 'cpu')")
        check("'auto' runs on the CPU, silently, with the CPU's labels", a == b and not notices,
              f"notices {notices}")

        def fails_with_reason(name, sql, hint=""):
            """sql fails 0A000 with the worker's reason (and hint in its hint)."""
            try:
                c.execute(sql)
                check(name, False, "it ran")
            except psycopg.Error as e:
                check(name + ", naming the worker's reason",
                      e.sqlstate == "0A000" and "worker" in (e.diag.message_detail or "") and
                      hint in (e.diag.message_hint or ""),
                      f"{e.sqlstate} {e.diag.message_primary} / {e.diag.message_detail} / {e.diag.message_hint}")
        fails_with_reason("'gpu' fails without a GPU", f"SELECT * FROM gpu_dbscan('{src}', 1.5, 3, device => 'gpu')")
        # kmeans_step and gpu_kmeans_distributed on device 'gpu': refused
        # here (with the worker's reason), run through the emulated worker
        # below (protocol_checks)
        fails_with_reason("kmeans_step on device 'gpu' fails without a GPU",
                          f"SELECT kmeans_step(f, '{{{{0,0}},{{50,100}}}}', id, 'gpu') FROM ({src}) s(id, f)")
        fails_with_reason("gpu_kmeans_distributed on device 'gpu' fails without a GPU",
                          f"SELECT * FROM gpu_kmeans_distributed('{src}', 2, device => 'gpu')")
        fails_with_reason("algorithm 'dclust' under 'auto' fails without a GPU (never the CPU)",
                          f"SELECT * FROM gpu_dbscan('{src}', 1.5, 3, algorithm => 'dclust')", "union_find")
        # affinity propagation: 'auto' asks the worker from auto_ap_gpu_min_rows
        # rows up, and runs on the CPU without a word; float4 fails with the
        # worker's reason
        n_ap = int(i["auto_ap_gpu_min_rows"])
        def ap(args):
            return one(c, "SELECT md5(string_agg(id || ':' || coalesce(cluster_id::text, '-') || is_exemplar::text,"
                          " ',' ORDER BY id)) FROM gpu_affinity_propagation('SELECT i, ARRAY[i % 50, i / 50]::real[]"
                          f" FROM generate_series(1, {n_ap}) i', max_iter => 20{args})")
        notices.clear()
        a = ap("")
        b = ap(", device => 'cpu'")
        moved = [n for n in notices if "CPU" in n]
        check(f"affinity propagation of {n_ap} rows under 'auto' runs on the CPU, silently, with the CPU's labels",
              a == b and not moved, f"notices {notices}")
        fails_with_reason("affinity propagation in float4 under 'auto' fails without a GPU (never the CPU)",
                          "SELECT * FROM gpu_affinity_propagation('SELECT 1, ARRAY[1.0]', \"precision\" => 'float4')",
                          "float8")
        check("no jobs listed", one(c, "SELECT count(*) FROM gpuclust_gpu_jobs") == 0)


def many_sessions(w, serial, sessions=16, calls=20):
    """sessions sessions at once, each making calls of w's mixed calls on
    device 'gpu' in turn: ((session, call) of each result that differs
    from serial's, seconds taken)."""
    qs = w.mixed("gpu")
    bad = []
    t0 = time.time()

    def session(s):
        with connect() as cc:
            for k in range(calls):
                q = qs[(s + k) % len(qs)]
                if fingerprint(cc, q) != serial[q]:
                    bad.append((s, k))
    ts = [threading.Thread(target=session, args=(s,)) for s in range(sessions)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return bad, time.time() - t0


def protocol_checks(w, gpu, stop_cmd, start_cmd, server_log=None):
    c = connect()
    i = info(c)
    check("the worker owns the (emulated) GPU", i["gpu_worker"] == "running" and i["gpu_usable"] == "true",
          f"{i['gpu_worker']}, {i['gpu_name']}, budget {i['gpu_worker_memory_budget_bytes']}")
    w.setup(c)

    # results through the worker = the CPU's (each call once)
    serial = {}
    ok = True
    for q_gpu, q_cpu in zip(w.mixed("gpu"), w.mixed("cpu")):
        serial[q_gpu] = fingerprint(c, q_gpu)
        ok &= serial[q_gpu] == fingerprint(c, q_cpu)
    check("device 'gpu' through the worker = device 'cpu' (k-means, DBSCAN, cosine)", ok)
    # DBSCAN's algorithm travels with the job: dclust (the emulation runs it
    # by union-find) gives union-find's labels, under 'gpu' and 'auto' alike
    s = "SELECT id, f FROM w_small"
    ref = fingerprint(c, f"SELECT * FROM gpu_dbscan('{s}', 0.08, 5, device => 'cpu')")
    dcl = [fingerprint(c, f"SELECT * FROM gpu_dbscan('{s}', 0.08, 5, device => '{dev}', algorithm => 'dclust')")
           for dev in ("gpu", "auto")]
    check("algorithm 'dclust' through the worker = union_find on the CPU ('gpu' and 'auto')",
          dcl == [ref, ref], f"{dcl} vs {ref}")

    kmeans_step_checks(c, w)

    # affinity propagation through the worker: float8 gives the CPU's
    # labels and exemplars; float4 runs only on a real GPU (the emulation
    # has no CPU code to stand in for it: refused, 0A000, never the CPU)
    def ap_fp(args):
        return one(c, "SELECT md5(string_agg(id || ':' || coalesce(cluster_id::text, '-') || is_exemplar::text,"
                      " ',' ORDER BY id)) FROM gpu_affinity_propagation("
                      f"'SELECT id, f FROM w_small WHERE id <= 600'{args})")
    ap_cpu = ap_fp(", device => 'cpu'")
    check("affinity propagation through the worker = device 'cpu' (float8)",
          ap_fp(", device => 'gpu'") == ap_cpu and ap_fp(", device => 'gpu', \"precision\" => 'float8'") == ap_cpu)
    try:
        n4 = one(c, "SELECT count(*) FILTER (WHERE cluster_id IS NOT NULL) FROM gpu_affinity_propagation("
                    "'SELECT id, f FROM w_small WHERE id <= 600', \"precision\" => 'float4')")
        check("affinity propagation in float4 under 'auto' runs on the worker's GPU, every row labelled",
              gpu and n4 == 600, f"{n4} rows labelled{'' if gpu else ' on an emulated GPU'}")
    except psycopg.Error as e:
        check("affinity propagation in float4 on the emulated GPU: refused (0A000), never the CPU",
              not gpu and e.sqlstate == "0A000" and "gpu_worker_emulate" in (e.diag.message_detail or ""),
              f"{e.sqlstate} {e.diag.message_primary} / {e.diag.message_detail}")
    # a long affinity propagation job: listed, then cancelled
    b = Bg("SELECT count(*) FROM gpu_affinity_propagation('SELECT i, ARRAY[i % 101, i % 97]"
           " FROM generate_series(1, 3000) i', max_iter => 1000000, convergence_iter => 1000001, device => 'gpu')")
    took = wait_for(c, job_state(b.pid) % "running")
    row = c.execute("SELECT algorithm, n, d FROM gpuclust_gpu_jobs WHERE pid = %s", (b.pid,)).fetchone()
    t_cancel = time.time()
    c.execute("SELECT pg_cancel_backend(%s)", (b.pid,))
    b.join()
    check("an affinity propagation job is listed, and cancelled at once",
          took is not None and row == ("gpu_affinity_propagation", 3000, 2) and
          isinstance(b.err, psycopg.errors.QueryCanceled) and b.t1 - t_cancel < 2 and
          wait_for(c, no_jobs(), timeout=10) is not None,
          f"{row}; {type(b.err).__name__} after {b.t1 - t_cancel:.2f} s")
    b.close()

    # 16 sessions x 20 mixed calls = the serial run
    qs = w.mixed("gpu")
    bad, took = many_sessions(w, serial)
    check("16 sessions x 20 mixed calls = the serial run", not bad,
          f"{len(bad)} differ, {took:.1f} s")

    # a running job: the jobs view and the progress view
    b = Bg(w.long())
    took = wait_for(c, job_state(b.pid) % "running")
    row = c.execute("SELECT algorithm, n, d, gpu_memory_bytes, elapsed_ms FROM gpuclust_gpu_jobs"
                    " WHERE pid = %s", (b.pid,)).fetchone()
    check("gpuclust_gpu_jobs lists the running job", took is not None and row is not None and
          row[0] == "gpu_kmeans" and row[1] == w.n_long and row[2] == w.d_long, f"{row}")
    it = wait_for(c, f"SELECT iteration > 1 FROM gpuclust_progress WHERE pid = {b.pid} AND device = 'gpu'"
                     f" AND phase = 'iterate'", timeout=20)
    check("gpuclust_progress shows the worker's iterations", it is not None)
    i = info(c)
    check("gpuclust_info counts it", i["gpu_worker_jobs_running"] == "1", i["gpu_worker_jobs_running"])

    # cancel while running
    t_cancel = time.time()
    c.execute("SELECT pg_cancel_backend(%s)", (b.pid,))
    b.join()
    gone = wait_for(c, no_jobs(), timeout=10)
    check("a running job cancelled: the usual error at once, the job gone",
          isinstance(b.err, psycopg.errors.QueryCanceled) and b.t1 - t_cancel < 2 and gone is not None,
          f"{type(b.err).__name__} after {b.t1 - t_cancel:.2f} s, gone after {gone}")
    r = fingerprint(b.conn, qs[0])
    check("the session's next GPU call runs", r == serial[qs[0]])
    b.close()

    # statement_timeout on a running job
    b = Bg(w.long(), setup=["SET statement_timeout = '1500ms'"])
    b.join()
    check("statement_timeout cancels a running job", isinstance(b.err, psycopg.errors.QueryCanceled) and
          b.t1 - b.t0 < 4, f"{type(b.err).__name__} after {b.t1 - b.t0:.2f} s")
    b.close()
    check("... and its job is gone", wait_for(c, no_jobs(), timeout=10) is not None)

    # cancel while queued: one job at a time
    c.execute("ALTER SYSTEM SET gpuclust.gpu_worker_jobs = 1")
    c.execute("SELECT pg_reload_conf()")
    time.sleep(0.5)
    a = Bg(w.long())
    wait_for(c, job_state(a.pid) % "running")
    q = Bg(qs[1])
    queued = wait_for(c, job_state(q.pid) % "queued", timeout=10)
    check("with gpuclust.gpu_worker_jobs = 1 a second job queues", queued is not None)
    t_cancel = time.time()
    c.execute("SELECT pg_cancel_backend(%s)", (q.pid,))
    q.join()
    check("a queued job cancelled: the usual error at once",
          isinstance(q.err, psycopg.errors.QueryCanceled) and q.t1 - t_cancel < 1,
          f"{type(q.err).__name__} after {q.t1 - t_cancel:.2f} s")
    check("... it leaves the queue, the running job runs on",
          one(c, f"SELECT count(*) FROM gpuclust_gpu_jobs WHERE pid = {q.pid}") == 0 and
          one(c, job_state(a.pid) % "running"))
    q2 = Bg(qs[1], setup=["SET statement_timeout = '1s'"])
    q2.join()
    check("statement_timeout cancels a queued job", isinstance(q2.err, psycopg.errors.QueryCanceled) and
          q2.t1 - q2.t0 < 3, f"{type(q2.err).__name__} after {q2.t1 - q2.t0:.2f} s")
    c.execute("SELECT pg_cancel_backend(%s)", (a.pid,))
    a.join()
    for x in (a, q, q2):
        x.close()
    c.execute("ALTER SYSTEM RESET gpuclust.gpu_worker_jobs")
    c.execute("SELECT pg_reload_conf()")
    wait_for(c, no_jobs(), timeout=10)

    # GPU memory: jobs wait for it in arrival order; a job larger than the
    # GPU is refused under 'gpu' and runs on the CPU under 'auto'.  The
    # worker's budget is lowered with gpuclust.gpu_worker_memory.
    def dbscan_src(n):
        return (f"SELECT i, ARRAY[(hashint4(i) % 10000) / 100.0, (hashint4(i + 1) % 10000) / 100.0]::real[]"
                f" FROM generate_series(1, {n}) i")

    def dbscan_mem(n):                      # gc_dbscan_gpu_mem_bytes, d = 2
        return n * 216 + (16 << 20)
    a = Bg(w.long())
    wait_for(c, job_state(a.pid) % "running")
    mem_a = one(c, f"SELECT gpu_memory_bytes FROM gpuclust_gpu_jobs WHERE pid = {a.pid}")
    n_b, n_d = 200000, 1000
    mem_b, mem_d = dbscan_mem(n_b), dbscan_mem(n_d)
    # A and D fit together, A and B do not, B alone does
    cap_mb = (mem_a + (mem_b + mem_d) // 2) >> 20
    assert mem_a + mem_d <= cap_mb << 20 < mem_a + mem_b and mem_b <= cap_mb << 20
    c.execute(f"ALTER SYSTEM SET gpuclust.gpu_worker_memory = {cap_mb}")
    c.execute("SELECT pg_reload_conf()")
    set_ok = wait_for(c, f"SELECT value::bigint = {cap_mb << 20} FROM gpuclust_info()"
                         f" WHERE key = 'gpu_worker_memory_budget_bytes'", timeout=10)
    b = Bg(f"SELECT * FROM gpu_dbscan($${dbscan_src(n_b)}$$, 0.3, 4, device => 'gpu')")
    b_q = wait_for(c, job_state(b.pid) % "queued", timeout=10)
    d_ = Bg(f"SELECT * FROM gpu_dbscan($${dbscan_src(n_d)}$$, 0.3, 4, device => 'gpu')")  # fits, but B came first
    d_q = wait_for(c, job_state(d_.pid) % "queued", timeout=10)
    time.sleep(1)
    still = one(c, f"SELECT count(*) FROM gpuclust_gpu_jobs WHERE state = 'queued' AND pid IN ({b.pid}, {d_.pid})")
    check("a job waits for GPU memory, and later ones behind it, with threads free",
          set_ok is not None and b_q is not None and d_q is not None and still == 2,
          f"A holds {mem_a >> 20} MiB, B needs {mem_b >> 20}, D {mem_d >> 20}, budget {cap_mb} MiB; {still} of 2 queued after 1 s")
    n_c = ((cap_mb << 20) - (16 << 20)) // 216 + 20000
    try:
        c.execute(f"SELECT count(*) FROM gpu_dbscan($${dbscan_src(n_c)}$$, 0.3, 4, device => 'gpu')")
        check("a job larger than the GPU is refused under 'gpu'", False, "it ran")
    except psycopg.Error as e:
        check("a job larger than the GPU is refused under 'gpu' (53200, with the sizes)",
              e.sqlstate == "53200" and "MiB" in e.diag.message_detail,
              f"{e.sqlstate} {e.diag.message_primary} / {e.diag.message_detail}")
    r_auto = fingerprint(c, f"SELECT * FROM gpu_dbscan($${dbscan_src(n_c)}$$, 0.3, 4)")
    r_cpu = fingerprint(c, f"SELECT * FROM gpu_dbscan($${dbscan_src(n_c)}$$, 0.3, 4, device => 'cpu')")
    check("... and runs on the CPU under 'auto'", r_auto == r_cpu)
    c.execute("SELECT pg_cancel_backend(%s)", (a.pid,))
    a.join(); b.join(); d_.join()
    check("when memory frees, the waiting jobs run, in order",
          b.err is None and d_.err is None and
          len(b.result) == n_b and len(d_.result) == n_d,
          f"B {b.err}, D {d_.err}")
    for x in (a, b, d_):
        x.close()
    c.execute("ALTER SYSTEM RESET gpuclust.gpu_worker_memory")
    c.execute("SELECT pg_reload_conf()")
    wait_for(c, no_jobs(), timeout=10)

    # SIGTERM to the worker mid-job
    for pid in killed_mid_job(c, w, worker_pid, signal.SIGTERM, "worker", "worker exited"):
        new, after = wait_worker(c, pid)
        check("... and the worker restarts", new is not None, f"new pid {new} after {after and round(after, 1)} s")
    check("the restarted worker runs jobs", fingerprint(c, qs[1]) == serial[qs[1]])

    gpu_process_checks(c, w, qs, serial, server_log)

    c.close()
    # shutdown with jobs queued
    if stop_cmd:
        with connect() as cc:
            cc.execute("ALTER SYSTEM SET gpuclust.gpu_worker_jobs = 1")
            cc.execute("SELECT pg_reload_conf()")
        time.sleep(0.5)
        a = Bg(w.long())
        with connect() as cc:
            wait_for(cc, job_state(a.pid) % "running")
        qq = [Bg(qs[k % len(qs)]) for k in range(3)]
        with connect() as cc:
            n_q = wait_for(cc, "SELECT count(*) = 3 FROM gpuclust_gpu_jobs WHERE state = 'queued'", timeout=10)
            cc.execute("ALTER SYSTEM RESET gpuclust.gpu_worker_jobs")
        t0 = time.time()
        rc = subprocess.run(stop_cmd, shell=True, capture_output=True, text=True, timeout=120).returncode
        took = time.time() - t0
        ends = all(x.join(30) for x in [a] + qq)
        check("server stopped with 1 job running and 3 queued: promptly, every client told",
              n_q is not None and rc == 0 and took < 30 and ends and all(x.err is not None for x in [a] + qq),
              f"stop took {took:.1f} s, rc {rc}")
        for x in [a] + qq:
            x.close()
        subprocess.run(start_cmd, shell=True, check=True, capture_output=True, timeout=120)
        with connect() as cc:
            new, after = wait_worker(cc)
            check("after a restart the worker runs jobs", new is not None and
                  fingerprint(cc, qs[0]) == serial[qs[0]])


def killed_mid_job(c, w, pid_of, sig, who, reason):
    """Sends sig to process pid_of(c) during a 'gpu' job, then during an
    'auto' one: the first fails naming reason, the second is redone on the
    CPU.  Yields each process's pid once its job has ended."""
    for device in ("gpu", "auto"):
        pid = pid_of(c)
        b = Bg(w.long() if device == "gpu" else w.auto_long())
        wait_for(c, job_state(b.pid) % "running")
        os.kill(pid, sig)
        b.join(300)
        how = f"{who} killed ({signal.Signals(sig).name}) mid-job"
        if device == "gpu":
            check(f"{how}: the job fails with the reason (device 'gpu')",
                  b.err is not None and reason in (b.err.diag.message_detail or ""),
                  f"{b.err and b.err.sqlstate} {b.err and b.err.diag.message_detail}")
        else:
            check(f"{how}: 'auto' redoes the call on the CPU",
                  b.err is None and b.result == [(w.n_long,)] and
                  any("falls back to the CPU" in n for n in b.notices), f"{b.err} {b.notices}")
        b.close()
        yield pid


def gpu_process_pid(c):
    v = info(c).get("gpu_worker_gpu_process_pid")
    return int(v) if v else None


def wait_gpu_process(c, old_pid, timeout=30):
    """Waits for a new GPU process to be ready: its pid and the seconds it took."""
    t0 = time.time()
    while time.time() - t0 < timeout:
        i = info(c)
        pid = i.get("gpu_worker_gpu_process_pid")
        if i["gpu_worker"] == "running" and i["gpu_usable"] == "true" and pid and int(pid) != old_pid:
            return int(pid), time.time() - t0
        time.sleep(0.05)
    return None, None


def crash_lines(server_log, offset):
    """The lines of a crash and restart of the server in its log after offset."""
    if not server_log:
        return []
    with open(server_log, errors="replace") as f:
        f.seek(offset)
        return [l.strip() for l in f if "terminated by signal" in l or "reinitializing" in l or
                "terminating any other active server processes" in l or "was interrupted" in l]


def gpu_process_checks(c, w, qs, serial, server_log):
    """kill -9 of the process that holds the GPU: its jobs fail ('auto' redoes
    them on the CPU), the worker starts another, and nothing else notices."""
    before = connect()
    started = one(before, "SELECT pg_postmaster_start_time()")
    log_at = os.path.getsize(server_log) if server_log else 0
    check("the GPU process is the worker's child, not the postmaster's",
          gpu_process_pid(c) is not None and
          int(open(f"/proc/{gpu_process_pid(c)}/stat").read().rsplit(")", 1)[1].split()[1]) == worker_pid(c))
    for gp in killed_mid_job(c, w, gpu_process_pid, signal.SIGKILL, "GPU process",
                             "GPU process was killed by signal 9"):
        new, after = wait_gpu_process(c, gp)
        check("... and the worker starts another GPU process, which runs jobs",
              new is not None and fingerprint(c, qs[1]) == serial[qs[1]],
              f"pid {gp} -> {new} after {after and round(after, 1)} s")

    # during an outage: 'gpu' fails at once with the reason, 'auto' runs on the CPU
    gp = gpu_process_pid(c)
    os.kill(gp, signal.SIGKILL)
    down = wait_for(c, "SELECT value = 'running, restarting its GPU process' FROM gpuclust_info()"
                       " WHERE key = 'gpu_worker'", timeout=5, every=0.005)
    i = info(c)
    check("during the outage gpuclust_info says why",
          down is not None and "GPU process was killed by signal 9" in (i["gpu_reason"] or ""),
          f"{i['gpu_worker']}: {i['gpu_reason']}")
    t0 = time.time()
    try:
        c.execute("SELECT count(*) FROM gpu_kmeans('SELECT id, f FROM w_small', 8, device => 'gpu')")
        err = None
    except psycopg.Error as e:
        err = e
    check("... a 'gpu' call fails at once, naming the GPU process",
          err is not None and "GPU process" in (err.diag.message_detail or "") and time.time() - t0 < 1,
          f"{err and err.sqlstate} {err and err.diag.message_detail}")
    notices = []
    c.add_notice_handler(lambda d: notices.append(d.message_primary))
    q_auto = w.outage_auto()
    r_auto = fingerprint(c, q_auto)
    still = info(c)["gpu_worker"] == "running, restarting its GPU process"
    r_cpu = fingerprint(c, q_auto[:-1] + ", device => 'cpu')")
    check("... an 'auto' call that the GPU would take runs on the CPU",
          r_auto == r_cpu and still and not notices, f"still down after it: {still}; notices {notices}")
    new, after = wait_gpu_process(c, gp)
    check("... and the GPU side comes back", new is not None and fingerprint(c, qs[0]) == serial[qs[0]],
          f"after {after and round(after, 1)} s")

    check("a session opened before the kills still answers, the postmaster never restarted",
          one(before, "SELECT pg_postmaster_start_time()") == started)
    before.close()
    lines = crash_lines(server_log, log_at)
    check("the server log shows no crash recovery", not lines,
          "; ".join(lines[:3]) if lines else (server_log or "no log given"))


# kmeans_step's fields, one row
STEP_FIELDS = "(s).centroids, (s).counts, (s).inertia, (s).shift, (s).n, (s).members, (s).cost, (s).reseeded"


def wide_rows(n, d):
    """n rows of d features (d even): two halves of equal values, made in SQL."""
    return (f"SELECT i::bigint AS id, array_fill(((i * 37) % 101 / 10.0)::real, ARRAY[{d // 2}]) ||"
            f" array_fill(((i * 53) % 97 / 10.0)::real, ARRAY[{d // 2}]) AS f FROM generate_series(1, {n}) i")


def kmeans_step_checks(c, w):
    """kmeans_step (and gpu_kmeans_distributed) on device 'gpu': the blocks
    of rows labelled by the worker's jobs ('kmeans_step' in gpuclust_gpu_jobs),
    every field equal to device 'cpu''s, bit for bit (serial plans: the
    rows in one order)."""
    c.execute("SET max_parallel_workers_per_gather = 0")

    def step(src, C, dev):
        return c.execute(f"SELECT {STEP_FIELDS} FROM (SELECT kmeans_step(f, %s::real[], id, %s) AS s"
                         f" FROM ({src.replace('%', '%%')}) r) q", (C, dev)).fetchone()
    src = "SELECT id, f FROM w_small"
    C = c.execute("SELECT array_agg(f ORDER BY id) FROM w_small WHERE id <= 8").fetchone()[0]
    g, cpu = step(src, C, "gpu"), step(src, C, "cpu")
    check(f"kmeans_step on device 'gpu' through the worker = device 'cpu', every field ({w.n_small} rows, k = 8)",
          g == cpu and g[4] == w.n_small, f"counts {g[1]} / {cpu[1]}")
    models = [c.execute("SELECT * FROM gpu_kmeans_distributed('SELECT id, f FROM w_small', 8, tol => 0,"
                        " init => 'random', seed => 4, device => %s)", (dev,)).fetchone()
              for dev in ("gpu", "cpu")]
    check("gpu_kmeans_distributed on device 'gpu' through the worker = device 'cpu', bit for bit",
          models[0] == models[1], f"{models[0][1:]} / {models[1][1:]}")

    # more rows than one 64 MiB block: 5,000 rows of 8,192 features, 2,048
    # rows a block (three jobs, the first two from the buffer in shared
    # memory).  One job at a time and a long one running: the step's first
    # job queues behind it, a full block of rows
    n, d = 5000, 8192
    src = wide_rows(n, d)
    C = [[1.0] * d, [5.0] * (d // 2) + [2.0] * (d // 2), [2.0] * (d // 2) + [8.0] * (d // 2),
         [9.0] * d]
    cpu = step(src, C, "cpu")
    c.execute("ALTER SYSTEM SET gpuclust.gpu_worker_jobs = 1")
    c.execute("SELECT pg_reload_conf()")
    time.sleep(0.5)
    a = Bg(w.long())
    wait_for(c, job_state(a.pid) % "running")
    b = Bg(f"SELECT {STEP_FIELDS} FROM (SELECT kmeans_step(f, %s::real[], id, 'gpu') AS s"
           f" FROM ({src}) r) q".replace("%s", "'" + "{" + ",".join(
               "{" + ",".join(repr(v) for v in row) + "}" for row in C) + "}'"))
    queued = wait_for(c, job_state(b.pid) % "queued", timeout=30)
    row = c.execute("SELECT algorithm, n, d FROM gpuclust_gpu_jobs WHERE pid = %s", (b.pid,)).fetchone()
    c.execute("SELECT pg_cancel_backend(%s)", (a.pid,))
    a.join()
    seen = set()
    while b.thread.is_alive():
        for r in c.execute("SELECT n, state FROM gpuclust_gpu_jobs WHERE pid = %s", (b.pid,)).fetchall():
            seen.add(r)
        time.sleep(0.005)
    b.join()
    check(f"kmeans_step over {n} rows of {d} features on device 'gpu': a block of 2048 rows a worker's job",
          queued is not None and row == ("kmeans_step", 2048, d), f"{row}; also seen {sorted(seen)}")
    check(f"... every field = device 'cpu''s ({n} rows, 3 blocks)",
          b.err is None and b.result is not None and b.result[0] == cpu and cpu[4] == n,
          f"{b.err}; counts {b.result and b.result[0][1]} / {cpu[1]}")
    for x in (a, b):
        x.close()
    c.execute("ALTER SYSTEM RESET gpuclust.gpu_worker_jobs")
    c.execute("SELECT pg_reload_conf()")
    wait_for(c, no_jobs(), timeout=10)
    c.execute("RESET max_parallel_workers_per_gather")


def gpu_only_checks(w):
    """Idle sessions' GPU memory and the first call's latency."""
    # 16 sessions that each made a GPU call, then idle
    conns = [connect() for _ in range(16)]
    for cc in conns:
        one(cc, "SELECT count(*) FROM gpu_kmeans('SELECT id, f FROM w_small', 8, device => 'gpu')")
    out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip().splitlines()
    used = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                          capture_output=True, text=True).stdout.strip()
    with connect() as c:
        wpid = worker_pid(c)
    # in a container nvidia-smi may not list processes: the memory in use then
    check("16 idle sessions after GPU calls: one CUDA context on the GPU (the worker's)",
          len(out) <= 1 and int(used.split()[0]) < 4000,
          f"worker pid {wpid}; processes: {'; '.join(out) or 'none listed'}; GPU memory used {used} MiB")
    for cc in conns:
        cc.close()

    # first GPU call of a fresh session vs warm: 10k rows x 32
    with connect() as c:
        c.execute("DROP TABLE IF EXISTS w_lat")
        c.execute("CREATE TABLE w_lat AS SELECT i::bigint AS id, ARRAY(SELECT (hashint4(i * 100 + j) % 1000)::real"
                  " FROM generate_series(1, 32) j) AS f FROM generate_series(1, 10000) i")
    q = "SELECT count(*) FROM gpu_kmeans('SELECT id, f FROM w_lat', 10, seed => 1, device => 'gpu')"
    firsts, warms = [], []
    for _ in range(5):
        with connect() as cc:
            one(cc, "SELECT 1")
            t0 = time.perf_counter(); one(cc, q); firsts.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter(); one(cc, q); warms.append((time.perf_counter() - t0) * 1000)
    firsts.sort(); warms.sort()
    check("first GPU call of a session within 5 ms of a warm one (10k x 32, median of 5)",
          firsts[2] <= warms[2] + 5, f"first {firsts[2]:.1f} ms, warm {warms[2]:.1f} ms")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpu", action="store_true")
    ap.add_argument("--stop-cmd")
    ap.add_argument("--start-cmd")
    ap.add_argument("--server-log", help="the server's log, checked for crash recovery")
    args = ap.parse_args()
    if args.gpu:
        with connect() as c:
            c.execute("CREATE EXTENSION IF NOT EXISTS gpuclust")
        w = Work(True)
        protocol_checks(w, True, args.stop_cmd, args.start_cmd, args.server_log)
        gpu_only_checks(w)
    else:
        no_gpu_checks()
        with emulated_gpu_server(os.environ.get("GPUCLUST_WORKER_PG_DIR", "/tmp/gpuclust_pg_worker"),
                                 os.environ.get("GPUCLUST_WORKER_PG_PORT", "54339")) as (stop, start, log):
            with connect() as c:
                c.execute("CREATE EXTENSION IF NOT EXISTS gpuclust")
            protocol_checks(Work(False), False, stop, start, log)
    sys.exit(summary())


if __name__ == "__main__":
    main()
