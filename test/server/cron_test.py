#!/usr/bin/python3
"""cron_test.py — a scheduled clustering job, run by pg_cron in the throwaway
server (test/lib/pg_server.sh preloads pg_cron when it is installed).

The job is the documented pattern: a function that refreshes a *_clusters
table from gpu_dbscan(...) with DELETE + INSERT in one transaction, so a
reader sees either the whole previous result or the whole new one.

  1. builds gc_cron_test.pts (source points) and gc_cron_test.pts_clusters,
     and fills the latter once by calling the refresh function directly;
  2. changes the source (more points: the next result differs in size);
  3. schedules the refresh with pg_cron ('* * * * *': pg_cron 1.4 has no
     seconds interval; '5 seconds' is used where the version accepts it);
  4. meanwhile a reader polls the table in its own connection, and checks
     that every snapshot is one whole refresh: all rows from the same
     refresh (one refreshed_at), as many rows as that refresh wrote;
  5. waits (at most 80 s) until pg_cron reports the run succeeded,
     unschedules the job, and checks the table against a direct gpu_dbscan
     call over the same source, and that the reader saw the new result.

Connection from the usual PG* variables (eval "$(test/lib/pg_server.sh start)").
Prints a line per check and "N passed, M failed" (test/lib/report.py); exit
status 0 on success.
"""
import os
import sys
import threading
import time

import psycopg

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from report import check, summary  # noqa: E402

SCHEMA = "gc_cron_test"
JOB = "gc_cron_test_refresh"
EPS, MIN_PTS = 0.3, 5
N1, N2 = 60000, 90000          # source rows before / after the change
DEADLINE_S = 80


def log(msg):
    print(f"cron_test: {msg}", flush=True)


def fail(msg):
    """A failure that ends the test: its check, then the counts."""
    check(msg, False)
    sys.exit(summary())


SETUP = f"""
DROP SCHEMA IF EXISTS {SCHEMA} CASCADE;
CREATE SCHEMA {SCHEMA};
CREATE EXTENSION IF NOT EXISTS gpuclust;

-- source: points in blobs on a 10 x 10 grid
CREATE TABLE {SCHEMA}.pts (id bigint PRIMARY KEY, features real[] NOT NULL);
CREATE FUNCTION {SCHEMA}.add_points(lo bigint, hi bigint) RETURNS void
LANGUAGE sql AS $$
  INSERT INTO {SCHEMA}.pts
  SELECT i, ARRAY[(i % 10) * 5 + ((i * 7919) % 1000) / 1000.0,
                  ((i / 10) % 10) * 5 + ((i * 104729) % 1000) / 1000.0]
  FROM generate_series(lo, hi) i
$$;

-- the pattern: the result table and its refresh (README, "Scheduled
-- clustering with pg_cron")
CREATE TABLE {SCHEMA}.pts_clusters (
  id bigint PRIMARY KEY,
  cluster_id int,
  is_core boolean,
  refreshed_at timestamptz NOT NULL
);
CREATE FUNCTION {SCHEMA}.refresh_pts_clusters() RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE n bigint;
BEGIN
  -- one refresh at a time; readers (ACCESS SHARE) are not blocked
  LOCK TABLE {SCHEMA}.pts_clusters IN EXCLUSIVE MODE;
  DELETE FROM {SCHEMA}.pts_clusters;
  INSERT INTO {SCHEMA}.pts_clusters (id, cluster_id, is_core, refreshed_at)
  SELECT id, cluster_id, is_core, now()
  FROM gpu_dbscan('SELECT id, features FROM {SCHEMA}.pts', {EPS}, {MIN_PTS});
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END $$;
"""


class Reader(threading.Thread):
    """Polls the clusters table; every snapshot must be one whole refresh."""

    def __init__(self, conninfo):
        super().__init__(daemon=True)
        self.conninfo = conninfo
        self.stop = threading.Event()
        self.polls = 0
        self.states = {}          # refreshed_at -> row count seen
        self.errors = []

    def run(self):
        try:
            with psycopg.connect(self.conninfo, autocommit=True) as conn:
                while not self.stop.is_set():
                    row = conn.execute(
                        f"SELECT count(*), count(DISTINCT refreshed_at), min(refreshed_at), "
                        f"count(*) FILTER (WHERE cluster_id IS NOT NULL) "
                        f"FROM {SCHEMA}.pts_clusters").fetchone()
                    n, n_ts, ts, n_clustered = row
                    self.polls += 1
                    if n_ts != 1:
                        self.errors.append(f"snapshot with {n} rows from {n_ts} refreshes")
                    elif n not in (N1, N2):
                        self.errors.append(f"partial snapshot: {n} rows (refresh at {ts})")
                    elif self.states.setdefault(ts, n) != n:
                        self.errors.append(f"refresh {ts} seen with {self.states[ts]} and {n} rows")
                    if len(self.errors) > 20:
                        break
                    time.sleep(0.005)
        except Exception as e:        # noqa: BLE001 (reported by the main thread)
            self.errors.append(f"reader failed: {e}")


def main():
    t0 = time.monotonic()
    conninfo = ""  # libpq takes PGHOST, PGPORT, PGUSER, PGDATABASE
    with psycopg.connect(conninfo, autocommit=True) as conn:
        spl = conn.execute("SHOW shared_preload_libraries").fetchone()[0]
        if "pg_cron" not in spl:
            fail("pg_cron is not preloaded by this server (shared_preload_libraries = "
                 f"'{spl}'); restart it: test/lib/pg_server.sh stop; test/lib/pg_server.sh start")
        cron_db = conn.execute("SHOW cron.database_name").fetchone()[0]
        db = conn.execute("SELECT current_database()").fetchone()[0]
        if cron_db != db:
            fail(f"cron.database_name is {cron_db}, but the test connects to {db}")
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_cron")
        version = conn.execute(
            "SELECT extversion FROM pg_extension WHERE extname = 'pg_cron'").fetchone()[0]
        # an old job of an interrupted run
        conn.execute("SELECT cron.unschedule(jobid) FROM cron.job WHERE jobname = %s", (JOB,))

        conn.execute(SETUP)
        conn.execute(f"SELECT {SCHEMA}.add_points(1, {N1})")
        n = conn.execute(f"SELECT {SCHEMA}.refresh_pts_clusters()").fetchone()[0]
        if n != N1:
            fail(f"first refresh wrote {n} rows, expected {N1}")
        first_ts = conn.execute(
            f"SELECT min(refreshed_at) FROM {SCHEMA}.pts_clusters").fetchone()[0]
        # the source changes: the scheduled run must replace every row
        conn.execute(f"SELECT {SCHEMA}.add_points({N1 + 1}, {N2})")
        log(f"pg_cron {version}; source {N1} -> {N2} rows; setup {time.monotonic() - t0:.1f} s")

        reader = Reader(conninfo)
        reader.start()

        command = f"SELECT {SCHEMA}.refresh_pts_clusters()"
        schedule = "5 seconds"
        try:
            with conn.transaction():
                jobid = conn.execute("SELECT cron.schedule(%s, %s, %s)",
                                     (JOB, schedule, command)).fetchone()[0]
        except psycopg.Error:
            schedule = "* * * * *"   # pg_cron < 1.5: minutes only
            jobid = conn.execute("SELECT cron.schedule(%s, %s, %s)",
                                 (JOB, schedule, command)).fetchone()[0]
        log(f"job {jobid} scheduled '{schedule}': {command}")

        run = None
        while time.monotonic() - t0 < DEADLINE_S:
            run = conn.execute(
                "SELECT status, return_message, end_time - start_time FROM cron.job_run_details "
                "WHERE jobid = %s AND status IN ('succeeded', 'failed') "
                "ORDER BY runid LIMIT 1", (jobid,)).fetchone()
            if run is not None:
                break
            time.sleep(0.5)
        conn.execute("SELECT cron.unschedule(%s)", (jobid,))
        # let a run that has started meanwhile finish
        while conn.execute("SELECT count(*) FROM cron.job_run_details WHERE jobid = %s "
                           "AND status NOT IN ('succeeded', 'failed')", (jobid,)).fetchone()[0]:
            time.sleep(0.2)
        time.sleep(0.2)
        reader.stop.set()
        reader.join()

        if run is None:
            fail(f"pg_cron did not run the job within {DEADLINE_S} s")
        status, message, took = run
        log(f"pg_cron ran the job: {status} ({message}) in {took}")
        if status != "succeeded":
            fail(f"the job failed: {message}")

        # the result equals a direct gpu_dbscan call over the same source
        diff = conn.execute(f"""
            SELECT count(*) FROM (
              (SELECT id, cluster_id, is_core FROM {SCHEMA}.pts_clusters
               EXCEPT ALL
               SELECT id, cluster_id, is_core
               FROM gpu_dbscan('SELECT id, features FROM {SCHEMA}.pts', {EPS}, {MIN_PTS}))
              UNION ALL
              (SELECT id, cluster_id, is_core
               FROM gpu_dbscan('SELECT id, features FROM {SCHEMA}.pts', {EPS}, {MIN_PTS})
               EXCEPT ALL
               SELECT id, cluster_id, is_core FROM {SCHEMA}.pts_clusters)) d""").fetchone()[0]
        rows, clusters, noise, last_ts = conn.execute(
            f"SELECT count(*), count(DISTINCT cluster_id), count(*) FILTER (WHERE cluster_id IS NULL), "
            f"max(refreshed_at) FROM {SCHEMA}.pts_clusters").fetchone()
        log(f"result: {rows} rows, {clusters} clusters, {noise} noise; "
            f"{diff} rows differ from a direct gpu_dbscan call")
        log(f"reader: {reader.polls} snapshots, refreshes seen: "
            + ", ".join(f"{n} rows" for n in reader.states.values()))

        check("the refreshed table is gpu_dbscan's result", diff == 0 and rows == N2,
              f"{diff} rows differ, {rows} rows")
        check("the table was refreshed by the job", last_ts != first_ts)
        check("the reader saw only whole results, without an error", not reader.errors,
              "; ".join(reader.errors[:10]))
        check("the reader saw both the old and the new result",
              reader.states.get(first_ts) == N1 and N2 in reader.states.values())
        conn.execute(f"DROP SCHEMA {SCHEMA} CASCADE")
    log(f"done in {time.monotonic() - t0:.1f} s")
    return summary()


if __name__ == "__main__":
    sys.exit(main())
