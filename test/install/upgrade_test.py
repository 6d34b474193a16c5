#!/usr/bin/python3
"""ALTER EXTENSION gpuclust UPDATE keeps what users built on the extension.

In a database of its own on the server of the libpq environment variables:
installs the oldest version (0.1), builds on it what a user would (a view
over gpu_dbscan, a materialized view over gpu_kmeans, a table holding a
gpu_kmeans_fit model and a view that scores rows with kmeans_assign over
it, a view over a window function), reads them, runs ALTER EXTENSION
gpuclust UPDATE, and checks:
  - the extension is at the control file's default version;
  - every dependent object still works and returns the same rows, and the
    materialized view refreshes to the same rows;
  - the upgraded extension's objects equal a fresh installation's, object by
    object (every function's definition, every comment, every type,
    aggregate, view and cast), so that an upgrade script cannot lag behind
    the install scripts.
"""
import os
import sys

import psycopg

LIB = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib")
sys.path.insert(0, LIB)
from report import check, summary  # noqa: E402

OLDEST = "0.1"
PTS = ("SELECT i::bigint AS id, ARRAY[(i % 7)::real, (i / 7)::real] AS f "
       "FROM generate_series(1, 60) i")
# The source queries name their table with its schema: from PostgreSQL 17
# on, CREATE and REFRESH MATERIALIZED VIEW run with search_path =
# pg_catalog, pg_temp, and a source query is resolved when the call runs.
DEPENDENTS = {
    "view over gpu_dbscan": (
        "CREATE VIEW u_dbscan AS SELECT * FROM gpu_dbscan('SELECT id, f FROM public.pts', 1.5, 3)",
        "SELECT * FROM u_dbscan ORDER BY id"),
    "materialized view over gpu_kmeans": (
        "CREATE MATERIALIZED VIEW u_kmeans AS "
        "SELECT * FROM gpu_kmeans('SELECT id, f FROM public.pts', 3, seed => 7, device => 'cpu')",
        "SELECT * FROM u_kmeans ORDER BY id"),
    "model table of gpu_kmeans_fit": (
        "CREATE TABLE u_model AS SELECT * FROM gpu_kmeans_fit('SELECT id, f FROM public.pts', 3, "
        "seed => 7, device => 'cpu')",
        "SELECT centroids, n, d FROM u_model"),
    "view scoring rows with kmeans_assign": (
        "CREATE VIEW u_assign AS SELECT p.id, kmeans_assign(p.f, m.centroids) AS c, "
        "kmeans_assign_distance(p.f, m.centroids) AS dist FROM pts p, u_model m",
        "SELECT * FROM u_assign ORDER BY id"),
    "view over a window function": (
        "CREATE VIEW u_window AS SELECT id, gpu_dbscan(f, 1.5, 3) OVER () AS c FROM pts",
        "SELECT * FROM u_window ORDER BY id"),
}

# Each member object of the extension, described fully enough that two
# installations with the same rows are the same SQL surface.
MEMBERS = """
SELECT pg_describe_object(d.classid, d.objid, 0) AS object,
       CASE d.classid
         WHEN 'pg_proc'::regclass THEN
           (SELECT concat_ws(' | ', pg_get_function_arguments(p.oid),
                             pg_get_function_result(p.oid), p.prokind, p.provolatile,
                             p.proparallel, p.proisstrict, p.prosrc, p.procost, p.prorows,
                             (SELECT concat_ws(',', a.aggtransfn, a.aggfinalfn,
                                               a.aggcombinefn, a.aggserialfn,
                                               a.aggdeserialfn, a.aggtranstype::regtype,
                                               a.agginitval)
                              FROM pg_aggregate a WHERE a.aggfnoid = p.oid))
            FROM pg_proc p WHERE p.oid = d.objid)
         WHEN 'pg_class'::regclass THEN
           coalesce(pg_get_viewdef(d.objid),
                    (SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod),
                                       ', ' ORDER BY attnum)
                     FROM pg_attribute WHERE attrelid = d.objid AND attnum > 0))
         WHEN 'pg_type'::regclass THEN
           (SELECT concat_ws(' | ', t.typtype, t.typlen, t.typinput, t.typoutput, t.typalign,
                             t.typstorage)
            FROM pg_type t WHERE t.oid = d.objid)
         ELSE ''
       END AS definition,
       obj_description(d.objid, (SELECT relname FROM pg_class WHERE oid = d.classid)) AS comment
FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
WHERE e.extname = 'gpuclust' AND d.deptype = 'e'
ORDER BY 1, 2
"""


def fresh_database(admin, name):
    admin.execute(f"DROP DATABASE IF EXISTS {name}")
    admin.execute(f"CREATE DATABASE {name}")
    return psycopg.connect("", dbname=name, autocommit=True)


def main():
    with psycopg.connect("", autocommit=True) as admin:
        with fresh_database(admin, "gc_upgrade_old") as old, \
                fresh_database(admin, "gc_upgrade_new") as new:
            new.execute("CREATE EXTENSION gpuclust")
            default = new.execute("SELECT extversion FROM pg_extension "
                                  "WHERE extname = 'gpuclust'").fetchone()[0]
            paths = old.execute("SELECT path FROM pg_extension_update_paths('gpuclust') "
                                "WHERE source = %s AND target = %s", (OLDEST, default)).fetchone()
            check(f"an update path from {OLDEST} to {default}",
                  default == OLDEST or (paths and paths[0]), paths)

            old.execute(f"CREATE EXTENSION gpuclust VERSION '{OLDEST}'")
            old.execute("CREATE TABLE pts AS " + PTS)
            before = {}
            for name, (create, read) in DEPENDENTS.items():
                old.execute(create)
                before[name] = old.execute(read).fetchall()
                check(f"{OLDEST}: {name}", len(before[name]) > 0)

            old.execute("ALTER EXTENSION gpuclust UPDATE")
            now = old.execute("SELECT extversion FROM pg_extension "
                              "WHERE extname = 'gpuclust'").fetchone()[0]
            check(f"ALTER EXTENSION UPDATE: {OLDEST} -> {now}", now == default, now)

            old.execute("REFRESH MATERIALIZED VIEW u_kmeans")
            for name, (_, read) in DEPENDENTS.items():
                try:
                    after = old.execute(read).fetchall()
                    check(f"after the update: {name}, same rows", after == before[name],
                          f"{len(after)} rows, {sum(a != b for a, b in zip(after, before[name]))} differ")
                except psycopg.Error as e:
                    check(f"after the update: {name}", False, f"{e.sqlstate}: {e}")

            upgraded = old.execute(MEMBERS).fetchall()
            installed = new.execute(MEMBERS).fetchall()
            only_up = sorted(set(upgraded) - set(installed))
            only_new = sorted(set(installed) - set(upgraded))
            check(f"upgraded objects = a fresh {default}'s ({len(installed)} objects)",
                  not only_up and not only_new,
                  f"only upgraded: {[r[0] for r in only_up][:5]}; "
                  f"only fresh: {[r[0] for r in only_new][:5]}")
        admin.execute("DROP DATABASE gc_upgrade_old")
        admin.execute("DROP DATABASE gc_upgrade_new")
    return summary('upgrade')


if __name__ == "__main__":
    sys.exit(main())
