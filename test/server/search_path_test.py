#!/usr/bin/python3
"""No code of an untrusted role runs inside gpuclust (search_path safety).

In a database of its own on the server of the libpq environment variables,
with two roles: mallory, untrusted, who may create objects in a schema
others use, and alice, who calls gpuclust.

  a. Install time: mallory plants in schema "shared" an operator
     =(oid, regtype) and a function format(text, text), each a better match
     than the built-in for what an install script that leaves names
     unqualified would call, and functions of PostGIS's names; a superuser
     then runs CREATE EXTENSION gpuclust SCHEMA shared (and
     gpuclust_postgis, where PostGIS is installed).  Pass: none of
     mallory's functions ran, and the extension's objects were all made.

  b. Run time: with the extension in schema "gc" and alice's search_path
     "$user", public, gc, pg_catalog (pg_catalog last, so that even a
     built-in's name can be shadowed), mallory creates in public functions,
     aggregates and operators of the names and argument types that SQL
     built by gpuclust would resolve to there (dbscan_bounds,
     dbscan_histogram, dbscan_partition(s), kmeans_step, kmeans_rank_counts,
     kmeans_parallel_sample, count, min, max, >=, <=, +, prefix -, and the built-ins
     gpuclust_postgis's PL/pgSQL calls).  Alice then calls every form, each
     named with its schema as a careful caller does.  Pass: none of
     mallory's functions ran, and every result equals the one before the
     plants.

Each planted function records that it ran by raising a WARNING (an install script hides NOTICEs).
"""
import os
import sys

import psycopg

LIB = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib")
sys.path.insert(0, LIB)
from report import check, summary  # noqa: E402

DB = "gc_search_path"
MALLORY = "gc_sp_mallory"
ALICE = "gc_sp_alice"
PATH = '"$user", public, gc, pg_catalog'


def connect(user=None):
    conn = psycopg.connect("", dbname=DB, autocommit=True, **({"user": user} if user else {}))
    conn.notices = []
    conn.add_notice_handler(lambda d: conn.notices.append(d.message_primary))
    return conn


def plant(schema, name, args, returns, value):
    """A plpgsql function that raises a NOTICE naming itself, then returns value."""
    return (f"CREATE FUNCTION {schema}.{name}({args}) RETURNS {returns} LANGUAGE plpgsql AS "
            f"$f$BEGIN RAISE WARNING 'mallory ran: {name}({args})'; RETURN {value}; END$f$")


INSTALL_PLANTS = [
    plant("shared", "mallory_eq", "oid, regtype", "boolean",
          "$1 OPERATOR(pg_catalog.=) $2::pg_catalog.oid"),
    "CREATE OPERATOR shared.= (LEFTARG = oid, RIGHTARG = regtype, FUNCTION = shared.mallory_eq)",
    plant("shared", "format", "text, text", "text", "pg_catalog.format($1, $2)"),
]
POSTGIS_INSTALL_PLANTS = [
    plant("shared", "st_geometrytype", "public.geometry", "text", "public.st_geometrytype($1)"),
    plant("shared", "st_x", "public.geometry", "double precision", "public.st_x($1)"),
]

RUN_PLANTS = [
    plant("public", "dbscan_bounds", "real[], bigint", "double precision[]", "NULL"),
    plant("public", "dbscan_histogram", "real[], integer, double precision, double precision, integer",
          "double precision[]", "NULL"),
    "CREATE FUNCTION public.dbscan_partitions(real[], double precision[], OUT part int, OUT home int, "
    "OUT shared boolean, OUT x real[]) RETURNS SETOF record LANGUAGE plpgsql AS "
    "$f$BEGIN RAISE WARNING 'mallory ran: dbscan_partitions'; END$f$",
    plant("public", "dbscan_partition",
          "integer, bigint, real[], integer, boolean, double precision, integer, text", "bytea", "NULL"),
    plant("public", "kmeans_step", "real[], real[], bigint", "text", "NULL"),
    plant("public", "kmeans_step", "real[], real[], bigint, text", "text", "NULL"),
    plant("public", "kmeans_rank_counts", "bigint, bigint[]", "bigint[]", "NULL"),
    plant("public", "kmeans_parallel_sample",
          "real[], real[], bigint, bigint, integer, bigint, double precision, double precision",
          "boolean", "false"),
    plant("public", "mallory_count", "bigint", "bigint", "$1 OPERATOR(pg_catalog.+) 1"),
    "CREATE AGGREGATE public.count(*) (SFUNC = public.mallory_count, STYPE = bigint, INITCOND = '0')",
    plant("public", "mallory_pick", "bigint, bigint", "bigint", "$2"),
    "CREATE AGGREGATE public.min(bigint) (SFUNC = public.mallory_pick, STYPE = bigint)",
    "CREATE AGGREGATE public.max(bigint) (SFUNC = public.mallory_pick, STYPE = bigint)",
    plant("public", "mallory_ge", "bigint, bigint", "boolean", "true"),
    "CREATE OPERATOR public.>= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = public.mallory_ge)",
    "CREATE OPERATOR public.<= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = public.mallory_ge)",
    plant("public", "mallory_plus", "integer, integer", "integer", "0"),
    "CREATE OPERATOR public.+ (LEFTARG = integer, RIGHTARG = integer, FUNCTION = public.mallory_plus)",
    plant("public", "mallory_neg", "bigint", "bigint", "0"),
    "CREATE OPERATOR public.- (RIGHTARG = bigint, FUNCTION = public.mallory_neg)",
    plant("public", "format", "text, text", "text", "pg_catalog.format($1, $2)"),
    plant("public", "upper", "text", "text", "pg_catalog.upper($1)"),
    plant("public", "substr", "text, integer", "text", "pg_catalog.substr($1, $2)"),
]

SRC = "SELECT id, f FROM alice.pts"
NEG = "SELECT id OPERATOR(pg_catalog.-) 1000, f FROM alice.pts"
LABELS = "SELECT id, cluster_id FROM gc.gpu_dbscan(''SELECT id, f FROM alice.pts'', 1.5, 3)"
CALLS = {
    "gpu_kmeans": f"SELECT * FROM gc.gpu_kmeans('{SRC}', 3, seed => 7, device => 'cpu') ORDER BY id",
    "gpu_kmeans, keyed": f"SELECT * FROM gc.gpu_kmeans('{SRC}', NULL::bigint, 3, seed => 7, "
                         "device => 'cpu') ORDER BY id",
    "gpu_dbscan": f"SELECT * FROM gc.gpu_dbscan('{SRC}', 1.5, 3) ORDER BY id",
    "gpu_dbscan, keyed": f"SELECT * FROM gc.gpu_dbscan('{SRC}', NULL::bigint, 1.5, 3) ORDER BY id",
    "gpu_affinity_propagation": f"SELECT * FROM gc.gpu_affinity_propagation('{SRC}', device => 'cpu') "
                                "ORDER BY id",
    "gpu_kmeans_fit": f"SELECT * FROM gc.gpu_kmeans_fit('{SRC}', 3, seed => 7, device => 'cpu')",
    "gpu_kmeans_elbow": f"SELECT * FROM gc.gpu_kmeans_elbow('{SRC}', 2, 4, seed => 7, device => 'cpu')",
    "kmeans_assign": "SELECT p.id, gc.kmeans_assign(p.f, m.centroids), "
                     "gc.kmeans_assign_distance(p.f, m.centroids) FROM alice.pts p, "
                     f"gc.gpu_kmeans_fit('{SRC}', 3, seed => 7, device => 'cpu') m ORDER BY p.id",
    "kmeans_step": "SELECT (gc.kmeans_step(f, NULL::real[], id)).n FROM alice.pts",
    "gpu_kmeans_distributed, k-means||": f"SELECT * FROM gc.gpu_kmeans_distributed('{SRC}', 3, seed => 7)",
    "gpu_kmeans_distributed, random": f"SELECT * FROM gc.gpu_kmeans_distributed('{SRC}', 3, seed => 7, "
                                      "init => 'random')",
    "gpu_kmeans_distributed, random, negative ids": "SELECT * FROM gc.gpu_kmeans_distributed("
                                                    f"'{NEG}', 3, seed => 7, init => 'random')",
    "gpu_kmeans_distributed, on the CPU": f"SELECT * FROM gc.gpu_kmeans_distributed('{SRC}', 3, seed => 7, "
                                          "device => 'cpu')",
    "gpu_dbscan_distributed": f"SELECT * FROM gc.gpu_dbscan_distributed('{SRC}', 1.5, 3) ORDER BY id",
    "gpu_dbscan_distributed, on the CPU": f"SELECT * FROM gc.gpu_dbscan_distributed('{SRC}', 1.5, 3, "
                                          "device => 'cpu') ORDER BY id",
    "gpu_dbscan_distributed, 3 partitions": f"SELECT * FROM gc.gpu_dbscan_distributed('{SRC}', 1.5, 3, "
                                            "partitions => 3) ORDER BY id",
    "window gpu_dbscan": "SELECT id, gc.gpu_dbscan(f, 1.5, 3) OVER (ORDER BY id) FROM alice.pts ORDER BY id",
    "window gpu_kmeans": "SELECT id, gc.gpu_kmeans(f, 3, seed => 7, device => 'cpu') OVER (ORDER BY id) "
                         "FROM alice.pts ORDER BY id",
    "gpu_hdbscan": f"SELECT * FROM gc.gpu_hdbscan('{SRC}', 4) ORDER BY id",
    "gpu_hdbscan, keyed": f"SELECT * FROM gc.gpu_hdbscan('{SRC}', NULL::bigint, 4) ORDER BY id",
    "gpu_hdbscan_tree": f"SELECT * FROM gc.gpu_hdbscan_tree('{SRC}', 4)",
    "gpu_minimum_spanning_tree": f"SELECT * FROM gc.gpu_minimum_spanning_tree('{SRC}', 2)",
    "window gpu_hdbscan": "SELECT id, gc.gpu_hdbscan(f, 4) OVER (ORDER BY id) FROM alice.pts ORDER BY id",
    "gpu_kdistance": f"SELECT * FROM gc.gpu_kdistance('{SRC}', 3) ORDER BY rank",
    "gpu_silhouette": f"SELECT * FROM gc.gpu_silhouette('{SRC}', '{LABELS}')",
    "gpu_cluster_centers": f"SELECT * FROM gc.gpu_cluster_centers('{SRC}', '{LABELS}')",
    "gpuclust_info": "SELECT key FROM gc.gpuclust_info() ORDER BY key",
    "gpuclust_progress": "SELECT pid FROM gc.gpuclust_progress",
    "gpuclust_gpu_jobs": "SELECT pid FROM gc.gpuclust_gpu_jobs",
}
POSTGIS_CALLS = {
    "gpu_dbscan of points": "SELECT * FROM gc.gpu_dbscan('SELECT id, public.st_makepoint(f[1], f[2]) "
                            "FROM alice.pts', 1.5, 3) ORDER BY id",
    "window gpu_dbscan of points": "SELECT id, gc.gpu_dbscan(public.st_makepoint(f[1], f[2]), 1.5, 3) "
                                   "OVER (ORDER BY id) FROM alice.pts ORDER BY id",
    "window gpu_hdbscan of points": "SELECT id, gc.gpu_hdbscan(public.st_makepoint(f[1], f[2]), 4) "
                                    "OVER (ORDER BY id) FROM alice.pts ORDER BY id",
    "a line's error": "SELECT * FROM gc.gpu_dbscan('SELECT 1::bigint, "
                      "public.st_geomfromtext(''LINESTRING(0 0, 1 1)'')', 1.5, 3)",
}


def run_all(conn, calls):
    out = {}
    for name, sql in calls.items():
        try:
            out[name] = conn.execute(sql).fetchall()
        except psycopg.Error as e:
            out[name] = f"{e.sqlstate}: {e.diag.message_primary}"
    return out


def install_time(admin, postgis):
    admin.execute("CREATE SCHEMA shared")
    admin.execute(f"GRANT USAGE, CREATE ON SCHEMA shared TO {MALLORY}")
    with connect(MALLORY) as m:
        for sql in INSTALL_PLANTS + (POSTGIS_INSTALL_PLANTS if postgis else []):
            m.execute(sql)
    admin.notices.clear()
    admin.execute("CREATE EXTENSION gpuclust SCHEMA shared")
    check("CREATE EXTENSION gpuclust SCHEMA shared: nothing of mallory's ran",
          not admin.notices, admin.notices[:3])
    keyed = admin.execute("SELECT count(*) FROM pg_proc WHERE pronamespace = 'shared'::regnamespace "
                          "AND proargtypes[1] = 'anyelement'::regtype").fetchone()[0]
    check("CREATE EXTENSION gpuclust SCHEMA shared: the 6 keyed forms made", keyed == 6, keyed)
    if postgis:
        admin.notices.clear()
        admin.execute("CREATE EXTENSION gpuclust_postgis SCHEMA shared")
        check("CREATE EXTENSION gpuclust_postgis SCHEMA shared: nothing of mallory's ran",
              not admin.notices, admin.notices[:3])
        forms = admin.execute("SELECT count(*) FROM pg_proc WHERE pronamespace = 'shared'::regnamespace "
                              "AND prokind = 'w' AND proargtypes[0] IN ('geometry'::regtype, "
                              "'geography'::regtype)").fetchone()[0]
        check("CREATE EXTENSION gpuclust_postgis SCHEMA shared: the 6 window forms made",
              forms == 6, forms)
        admin.execute("DROP EXTENSION gpuclust_postgis")
    admin.execute("DROP EXTENSION gpuclust")
    admin.execute("DROP SCHEMA shared CASCADE")


def run_time(admin, postgis):
    admin.execute("CREATE SCHEMA gc")
    admin.execute("CREATE EXTENSION gpuclust SCHEMA gc")
    if postgis:
        admin.execute("CREATE EXTENSION gpuclust_postgis SCHEMA gc")
    admin.execute(f"GRANT USAGE ON SCHEMA gc TO {ALICE}")
    admin.execute(f"GRANT CREATE ON SCHEMA public TO {MALLORY}")
    admin.execute(f"CREATE SCHEMA alice AUTHORIZATION {ALICE}")
    calls = dict(CALLS, **(POSTGIS_CALLS if postgis else {}))
    with connect(ALICE) as a:
        a.execute("CREATE TABLE alice.pts AS SELECT i::bigint AS id, "
                  "ARRAY[(i % 7)::real, (i / 7)::real] AS f FROM generate_series(1, 60) i")
        a.execute(f"SET search_path = {PATH}")
        before = run_all(a, calls)
        with connect(MALLORY) as m:
            for sql in RUN_PLANTS:
                m.execute(sql)
        a.notices.clear()
        for name, sql in calls.items():
            a.notices.clear()
            after = run_all(a, {name: sql})[name]
            check(f"{name}: nothing of mallory's ran, same result",
                  not a.notices and after == before[name],
                  a.notices[:2] or (str(after)[:160], str(before[name])[:160]))


def main():
    with psycopg.connect("", autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {DB}")
        for role in (MALLORY, ALICE):
            admin.execute(f"DROP ROLE IF EXISTS {role}")
            admin.execute(f"CREATE ROLE {role} LOGIN")
        admin.execute(f"CREATE DATABASE {DB}")
        with connect() as conn:
            postgis = conn.execute("SELECT EXISTS (SELECT FROM pg_available_extensions "
                                   "WHERE name = 'postgis')").fetchone()[0]
            if postgis:
                conn.execute("CREATE EXTENSION postgis")
            else:
                print("postgis is not installed: its checks skipped")
            install_time(conn, postgis)
            run_time(conn, postgis)
        admin.execute(f"DROP DATABASE {DB}")
        for role in (MALLORY, ALICE):
            admin.execute(f"DROP ROLE {role}")
    return summary('search_path')


if __name__ == "__main__":
    sys.exit(main())
