"""cities.py — load test/data/world_cities.csv.gz into a PostgreSQL table.

Shared by test/server/compare_sklearn.py, test/demo.py and the benchmarks.  Run with
/usr/bin/python3 (Debian's psycopg 3).  The table is

    <name> (id bigint PRIMARY KEY,      -- GeoNames geoname_id
            name text, country text, population bigint,
            lon float8, lat float8,
            features real[])            -- ARRAY[lon, lat]::real[]
"""
import gzip
import os

HERE = os.path.dirname(os.path.abspath(__file__))
CSV_GZ = os.path.join(os.path.dirname(HERE), "data", "world_cities.csv.gz")
N_CITIES = 135233


def load_cities(conn, table="world_cities", temp=False, path=CSV_GZ):
    """(Re)creates `table` and fills it; returns the row count."""
    with conn.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {table}")
        cur.execute(
            f"CREATE {'TEMP ' if temp else ''}TABLE {table}_raw ("
            " geoname_id bigint, name text, country text,"
            " lat float8, lon float8, population bigint)")
        with gzip.open(path, "rb") as f, cur.copy(
                f"COPY {table}_raw FROM STDIN WITH (FORMAT csv, HEADER true)") as cp:
            while True:
                chunk = f.read(1 << 20)
                if not chunk:
                    break
                cp.write(chunk)
        cur.execute(
            f"CREATE {'TEMP ' if temp else ''}TABLE {table} AS"
            " SELECT geoname_id AS id, name, country, population, lon, lat,"
            "        ARRAY[lon, lat]::real[] AS features"
            f" FROM {table}_raw")
        cur.execute(f"DROP TABLE {table}_raw")
        cur.execute(f"ALTER TABLE {table} ADD PRIMARY KEY (id)")
        cur.execute(f"ANALYZE {table}")
        cur.execute(f"SELECT count(*) FROM {table}")
        n = cur.fetchone()[0]
    conn.commit()
    return n


def fetch_features(conn, table="world_cities"):
    """(ids int64[n], X float32[n, 2]) in id order, exactly as stored (real)."""
    import numpy as np
    with conn.cursor() as cur:
        cur.execute(f"SELECT id, features[1], features[2] FROM {table} ORDER BY id")
        rows = cur.fetchall()
    ids = np.array([r[0] for r in rows], dtype=np.int64)
    X = np.array([(r[1], r[2]) for r in rows], dtype=np.float64).astype(np.float32)
    return ids, X
