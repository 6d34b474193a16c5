#!/usr/bin/python3
"""demo.py — cluster the world's cities in SQL; run by test/demo.sh.

Needs a running server (libpq environment) with gpuclust installed.  Loads the
135,233 cities of test/data (GeoNames, CC BY 4.0) into world_cities, runs
gpu_dbscan (eps 0.25°, min_pts 10) and gpu_kmeans (k 50) on ARRAY[lon, lat],
prints a summary, and draws test/out/world_clusters.png.
"""
import os
import sys
import time

import numpy as np
import psycopg

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "lib"))
from cities import load_cities  # noqa: E402

OUT = os.path.join(HERE, "out", "world_clusters.png")
EPS, MIN_PTS, K = 0.25, 10, 50
EUROPE = (-11.0, 32.0, 35.0, 61.0)     # lon min, max, lat min, max of the inset

DBSCAN_SQL = ("CREATE TEMP TABLE dbscan_result AS SELECT * FROM gpu_dbscan("
              f"'SELECT id, features FROM world_cities', eps => {EPS}, min_pts => {MIN_PTS})")
KMEANS_SQL = ("CREATE TEMP TABLE kmeans_result AS SELECT * FROM gpu_kmeans("
              f"'SELECT id, features FROM world_cities', k => {K}, n_init => 3)")

TOP_SQL = """
SELECT r.cluster_id, count(*) AS cities, sum(c.population) AS population,
       (array_agg(c.name || ', ' || c.country ORDER BY c.population DESC))[1] AS largest_city,
       count(DISTINCT c.country) AS countries
FROM {table} r JOIN world_cities c USING (id)
WHERE r.cluster_id IS NOT NULL
GROUP BY r.cluster_id ORDER BY cities DESC LIMIT {limit}"""


def run(cur, sql):
    t0 = time.perf_counter()
    cur.execute(sql)
    return (time.perf_counter() - t0) * 1e3


def table(header, rows):
    rows = [tuple(str(x) for x in r) for r in rows]
    w = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    print("  " + "  ".join(h.ljust(w[i]) for i, h in enumerate(header)))
    print("  " + "  ".join("-" * x for x in w))
    for r in rows:
        print("  " + "  ".join(c.rjust(w[i]) if c.replace(".", "").isdigit() else c.ljust(w[i])
                              for i, c in enumerate(r)))


def main():
    with psycopg.connect("") as conn:
        with conn.cursor() as cur:
            # fresh: the install script grows while the version stays 0.1
            cur.execute("DROP EXTENSION IF EXISTS gpuclust CASCADE")
            cur.execute("CREATE EXTENSION gpuclust")
            cur.execute("SELECT extversion FROM pg_extension WHERE extname = 'gpuclust'")
            print(f"gpuclust {cur.fetchone()[0]}")
            try:
                cur.execute("SELECT * FROM gpuclust_info()")
                cols = [d.name for d in cur.description]
                for row in cur.fetchall():
                    if cols[:2] == ["key", "value"]:
                        print(f"  {row[0]}: {row[1]}")
                    else:
                        print("  " + ", ".join(f"{c}: {v}" for c, v in zip(cols, row)))
            except psycopg.Error:
                conn.rollback()
        conn.commit()
        t0 = time.perf_counter()
        n = load_cities(conn, "world_cities")
        print(f"loaded {n:,} cities (GeoNames, CC BY 4.0) into world_cities"
              f" in {time.perf_counter() - t0:.1f} s; features = ARRAY[lon, lat]::real[]\n")

        with conn.cursor() as cur:
            # ---- DBSCAN
            print(f"DBSCAN:  {DBSCAN_SQL}")
            ms = run(cur, DBSCAN_SQL)
            cur.execute("SELECT count(DISTINCT cluster_id), count(*) FILTER (WHERE cluster_id IS NULL),"
                        " count(*) FILTER (WHERE is_core) FROM dbscan_result")
            nc, noise, core = cur.fetchone()
            print(f"  {ms:.0f} ms: {nc} clusters, {noise:,} noise cities"
                  f" ({100 * noise / n:.1f}%), {core:,} core points")
            print("  largest clusters:")
            cur.execute(TOP_SQL.format(table="dbscan_result", limit=10))
            table(["cluster", "cities", "population", "largest city", "countries"], cur.fetchall())

            # ---- k-means
            print(f"\nk-means: {KMEANS_SQL}")
            ms = run(cur, KMEANS_SQL)
            cur.execute("SELECT count(DISTINCT cluster_id), sum(distance * distance),"
                        " avg(distance), max(distance) FROM kmeans_result")
            kc, inertia, avgd, maxd = cur.fetchone()
            print(f"  {ms:.0f} ms: {kc} clusters, inertia {inertia:,.0f} deg²,"
                  f" mean distance to centre {avgd:.2f}°, max {maxd:.2f}°")
            print("  largest clusters:")
            cur.execute(TOP_SQL.format(table="kmeans_result", limit=10))
            table(["cluster", "cities", "population", "largest city", "countries"], cur.fetchall())

            cur.execute("SELECT c.lon, c.lat, d.cluster_id, k.cluster_id FROM world_cities c"
                        " JOIN dbscan_result d USING (id) JOIN kmeans_result k USING (id)")
            rows = cur.fetchall()
            # the k-means centres: the mean of each cluster's cities (k-means
            # stops when these means move less than tol)
            cur.execute("SELECT avg(c.lon), avg(c.lat) FROM world_cities c"
                        " JOIN kmeans_result k USING (id) GROUP BY k.cluster_id")
            centres = np.array(cur.fetchall(), dtype=float)
            cur.execute("DROP TABLE dbscan_result, kmeans_result")
        conn.commit()

    lon = np.array([r[0] for r in rows])
    lat = np.array([r[1] for r in rows])
    db = np.array([-1 if r[2] is None else r[2] for r in rows])
    km = np.array([r[3] for r in rows])
    big, share, in_europe = largest_cluster(lon, lat, db)
    print(f"\nthe largest DBSCAN cluster ({big}) holds {100 * share:.1f}% of all cities,"
          f" {'most of them' if in_europe else 'but most not'} in Europe"
          f" (lon {EUROPE[0]:g}..{EUROPE[1]:g}, lat {EUROPE[2]:g}..{EUROPE[3]:g})")
    plot(lon, lat, db, km, nc, noise, centres)
    print(f"\nmap: {OUT}")


def largest_cluster(lon, lat, db):
    """The largest DBSCAN cluster: its id, its share of all cities, and
    whether most of it lies in the EUROPE box."""
    if not (db >= 0).any():
        return -1, 0.0, False
    big = int(np.bincount(db[db >= 0]).argmax())
    m = db == big
    inside = ((lon[m] >= EUROPE[0]) & (lon[m] <= EUROPE[1]) &
              (lat[m] >= EUROPE[2]) & (lat[m] <= EUROPE[3])).mean()
    return big, float(m.mean()), bool(inside > 0.5)


def plot(lon, lat, db, km, nc, noise, centres):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # a categorical palette, shuffled so that neighbouring ids differ
    base = np.vstack([plt.get_cmap(m)(np.linspace(0, 1, 20 if m.startswith("tab20") else 8))
                      for m in ("tab20", "tab20b", "Dark2", "Set1")])[:, :3]
    # no greys (grey means noise), no pale colours (they vanish on white:
    # contrast with white at least 2.5, by WCAG's relative luminance) and
    # none as dark as the noise
    lin = np.where(base <= 0.03928, base / 12.92, ((base + 0.055) / 1.055) ** 2.4)
    lum = lin @ np.array([0.2126, 0.7152, 0.0722])
    base = base[(base.max(1) - base.min(1) > 0.15) & (1.05 / (lum + 0.05) >= 2.5) & (lum >= 0.07)]
    rng = np.random.default_rng(7)

    def colours(labels, n):
        pal = base[rng.permutation(len(base))]
        return pal[np.mod(labels, len(pal))] if n else np.zeros((len(labels), 3))

    NOISE = "#404040"           # dark grey: reads on white, and no cluster is grey
    fig, axes = plt.subplots(2, 1, figsize=(14, 13), dpi=110)
    ax = axes[0]
    nm = db < 0
    dbc = np.zeros((len(db), 3))
    dbc[~nm] = colours(db[~nm], nc)

    def dbscan_points(a, s):
        a.scatter(lon[nm], lat[nm], s=s * 0.6, c=NOISE, linewidths=0, label=f"noise ({noise:,})")
        a.scatter(lon[~nm], lat[~nm], s=s, c=dbc[~nm], linewidths=0)

    dbscan_points(ax, 0.8)
    ax.set_title(f"gpu_dbscan(eps {EPS}°, min_pts {MIN_PTS}): {nc} clusters,"
                 f" {noise:,} noise cities (dark grey)", fontsize=13)
    # the legend in the empty South Atlantic, clear of the inset
    ax.legend(loc="lower left", bbox_to_anchor=(0.36, 0.0), markerscale=10, frameon=False)
    # Europe, where the largest cluster spans most of the continent: an
    # inset over the empty South Pacific (lon -178..-84, lat -57..1), its
    # share of the cities counted from the labels
    big, share, in_europe = largest_cluster(lon, lat, db)
    ins = ax.inset_axes([0.005, 0.01, 0.26, 0.43])
    dbscan_points(ins, 3.0)
    ins.set_xlim(*EUROPE[:2])
    ins.set_ylim(*EUROPE[2:])
    ins.set_aspect("equal")
    ins.set_xticks([])
    ins.set_yticks([])
    ins.set_title(f"Europe: one cluster holds {100 * share:.0f}% of all cities"
                  if in_europe else "Europe", fontsize=10)
    ax.indicate_inset_zoom(ins, edgecolor="black", lw=0.8)
    ax = axes[1]
    ax.scatter(lon, lat, s=0.6, c=colours(km, K), linewidths=0)
    ax.scatter(centres[:, 0], centres[:, 1], s=60, marker="X", c="black",
               edgecolors="white", linewidths=0.8, label=f"the {len(centres)} centres")
    ax.legend(loc="lower left", frameon=False)
    ax.set_title(f"gpu_kmeans(k {K}): centres marked", fontsize=13)
    for ax in axes:
        ax.set_xlim(-180, 180)
        ax.set_ylim(-58, 78)
        ax.set_aspect("equal")
        ax.set_xlabel("longitude")
        ax.set_ylabel("latitude")
        ax.grid(True, lw=0.3, alpha=0.5)
    fig.suptitle(f"{len(lon):,} world cities (GeoNames, CC BY 4.0) clustered in PostgreSQL with gpuclust",
                 fontsize=14)
    fig.tight_layout()
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    fig.savefig(OUT)


if __name__ == "__main__":
    main()
