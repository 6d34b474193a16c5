--
-- PostGIS points as features: ARRAY[ST_X(geom), ST_Y(geom)], and geometry
-- and geography points as they are with gpuclust_postgis
-- (skipped where PostGIS is not installed: expected/postgis_1.out)
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gpuclust;
DO $$ BEGIN CREATE EXTENSION IF NOT EXISTS postgis; EXCEPTION WHEN OTHERS THEN NULL; END $$;
RESET client_min_messages;
SELECT NOT EXISTS (SELECT FROM pg_extension WHERE extname = 'postgis') AS no_postgis \gset
\if :no_postgis
\echo 'PostGIS is not installed: skipped'
\quit
\endif
\set SHOW_CONTEXT errors

-- 150 points within about 1 km of each of three cities (lon/lat, SRID
-- 4326), 5 isolated points, and 2 rows without a geometry
CREATE TABLE g_pts AS
SELECT (c.n * 1000 + i) AS id, c.city,
       ST_SetSRID(ST_MakePoint(c.lon + ((i * 7919) % 1000) / 1000.0 * 0.02,
                               c.lat + ((i * 104729) % 1000) / 1000.0 * 0.01), 4326) AS geom
FROM (VALUES (1, 'Berlin', 13.40, 52.52), (2, 'Paris', 2.35, 48.86), (3, 'Rome', 12.50, 41.90))
       AS c(n, city, lon, lat),
     generate_series(1, 150) AS i;
INSERT INTO g_pts VALUES
  (9001, 'Berlin', 'SRID=4326;POINT(13.9 52.9)'), (9002, 'Paris', 'SRID=4326;POINT(2.0 49.5)'),
  (9003, 'Rome', 'SRID=4326;POINT(12.0 41.0)'), (9004, 'Rome', 'SRID=4326;POINT(15.0 40.0)'),
  (9005, 'Berlin', 'SRID=4326;POINT(10.0 50.0)'),
  (9006, 'Paris', NULL), (9007, 'Rome', NULL);

-- the set-returning form: the features query builds the array; rows
-- without a geometry get NULL features (and a NULL cluster)
SELECT city, cluster_id, count(*)
FROM gpu_dbscan($$SELECT id, CASE WHEN geom IS NOT NULL THEN ARRAY[ST_X(geom), ST_Y(geom)] END
                  FROM g_pts ORDER BY id$$, eps => 0.05, min_pts => 5) d
JOIN g_pts USING (id)
GROUP BY 1, 2 ORDER BY 1, 2;

-- ... the same partition as PostGIS's ST_ClusterDBSCAN: pairs = gpu =
-- postgis + 1 (the noise pair); here every cluster is one dense blob, so
-- numbering and border rules do not matter
SELECT count(DISTINCT (d.cluster_id, p.c)) AS pairs, count(DISTINCT d.cluster_id) AS gpu,
       count(DISTINCT p.c) AS postgis,
       count(*) FILTER (WHERE (d.cluster_id IS NULL) <> (p.c IS NULL)) AS noise_differs
FROM gpu_dbscan('SELECT id, ARRAY[ST_X(geom), ST_Y(geom)] FROM g_pts WHERE geom IS NOT NULL',
                0.05, 5) d
JOIN (SELECT id, ST_ClusterDBSCAN(geom, 0.05, 5) OVER () AS c FROM g_pts WHERE geom IS NOT NULL) p
USING (id);

-- the window form, per city, beside ST_ClusterDBSCAN: pairs = gpu, same noise
SELECT count(*) AS rows,
       count(*) FILTER (WHERE (g IS NULL) <> (p IS NULL)) AS noise_differs,
       count(DISTINCT (city, g, p)) AS pairs, count(DISTINCT (city, g)) AS gpu
FROM (SELECT city,
             gpu_dbscan(ARRAY[ST_X(geom), ST_Y(geom)], 0.05, 5) OVER w AS g,
             ST_ClusterDBSCAN(geom, 0.05, 5) OVER w AS p
      FROM g_pts WHERE geom IS NOT NULL
      WINDOW w AS (PARTITION BY city ORDER BY id)) x;

-- in metres: project first (UTM zone 33N); eps is then 500 m
SELECT cluster_id, count(*) FROM
  gpu_dbscan($$SELECT id, ARRAY[ST_X(g), ST_Y(g)]
               FROM (SELECT id, ST_Transform(geom, 32633) AS g FROM g_pts
                     WHERE city = 'Berlin' AND geom IS NOT NULL) s$$, 500, 5)
GROUP BY 1 ORDER BY 1;

-- k-means: the three cities, as ST_ClusterKMeans finds them
SELECT city, count(DISTINCT cluster_id) AS clusters, count(*)
FROM gpu_kmeans('SELECT id, ARRAY[ST_X(geom), ST_Y(geom)] FROM g_pts WHERE id < 9000', 3) k
JOIN g_pts USING (id) GROUP BY city ORDER BY city;
SELECT count(DISTINCT (g, p)) AS pairs, count(DISTINCT g) AS gpu, count(DISTINCT p) AS postgis
FROM (SELECT gpu_kmeans(ARRAY[ST_X(geom), ST_Y(geom)], 3) OVER (ORDER BY id) AS g,
             ST_ClusterKMeans(geom, 3) OVER (ORDER BY id) AS p
      FROM g_pts WHERE id < 9000) x;

-- a model of the cities scores new points
CREATE TABLE g_model AS
SELECT centroids FROM gpu_kmeans_fit('SELECT id, ARRAY[ST_X(geom), ST_Y(geom)] FROM g_pts WHERE id < 9000', 3);
SELECT q.name, c.city
FROM (VALUES ('Potsdam', 'SRID=4326;POINT(13.06 52.39)'::geometry),
             ('Versailles', 'SRID=4326;POINT(2.13 48.80)'), ('Tivoli', 'SRID=4326;POINT(12.80 41.96)')) AS q(name, geom),
     g_model m,
     LATERAL (SELECT city FROM g_pts
              WHERE id < 9000
                AND kmeans_assign(ARRAY[ST_X(geom), ST_Y(geom)], m.centroids)
                    = kmeans_assign(ARRAY[ST_X(q.geom), ST_Y(q.geom)], m.centroids)
              LIMIT 1) c
ORDER BY q.name;

-- 3-D points
SELECT count(DISTINCT cluster_id) AS clusters FROM
  gpu_dbscan($$SELECT i, ARRAY[ST_X(p), ST_Y(p), ST_Z(p)]
               FROM (SELECT i, ST_MakePoint(i % 2 * 100, 0, i % 3 * 100) AS p
                     FROM generate_series(1, 60) i) s$$, 1, 3);

-- a NULL geometry inside ARRAY[...] is an array of NULLs, not NULL features
SELECT * FROM gpu_dbscan('SELECT id, ARRAY[ST_X(geom), ST_Y(geom)] FROM g_pts ORDER BY id', 0.05, 5);
\echo :LAST_ERROR_SQLSTATE
SELECT gpu_dbscan(ARRAY[ST_X(geom), ST_Y(geom)], 0.05, 5) OVER (ORDER BY id) FROM g_pts;
\echo :LAST_ERROR_SQLSTATE
-- ST_X wants points: use ST_Centroid (or ST_PointOnSurface) for other shapes
SELECT gpu_dbscan(ARRAY[ST_X(g), ST_Y(g)], 1, 1) OVER ()
FROM (VALUES ('POLYGON((0 0, 1 0, 1 1, 0 0))'::geometry)) AS t(g);
SELECT gpu_dbscan(ARRAY[ST_X(ST_Centroid(g)), ST_Y(ST_Centroid(g))], 1, 1) OVER () AS cluster
FROM (VALUES ('POLYGON((0 0, 1 0, 1 1, 0 0))'::geometry)) AS t(g);


--
-- geometry and geography points as features, as they are
--
-- without gpuclust_postgis a geometry has no cast to real[], and one given
-- without OVER is taken for a source query: the hints say what to do
SELECT * FROM gpu_dbscan('SELECT id, geom FROM g_pts', 0.05, 5);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_dbscan((SELECT geom FROM g_pts WHERE id = 1001), 0.05, 5);
\echo :LAST_ERROR_SQLSTATE

CREATE EXTENSION gpuclust_postgis;
-- the casts: [x, y], [x, y, z] (M is dropped), a geography's [lon, lat]
SELECT 'SRID=4326;POINT(13.4 52.5)'::geometry::real[] AS xy,
       'POINT Z (1 2 3)'::geometry::real[] AS xyz,
       'POINT ZM (1 2 3 4)'::geometry::real[] AS xyzm,
       'POINT M (1 2 3)'::geometry::real[] AS xym,
       'POINT(13.4 52.5)'::geography::real[] AS lonlat,
       NULL::geometry::real[] AS null;

-- lattice points: every distance is the square root of an integer, none
-- near eps = 1.5, so single precision and PostGIS's double precision
-- decide every pair alike; many clusters of every shape, some points
-- repeated
CREATE TABLE g_lat AS
SELECT i AS id,
       ST_MakePoint(('x' || substr(md5(i::text), 1, 4))::bit(16)::int % 100,
                    ('x' || substr(md5(i::text), 5, 4))::bit(16)::int % 100) AS geom
FROM generate_series(1, 3000) AS i;

-- min_pts 2: every point with a neighbour is core, so the clusters are
-- the components and the partition must be ST_ClusterDBSCAN's exactly:
-- pairs = gpu = postgis, the same noise.  The window form ...
SELECT count(*) AS rows,
       count(*) FILTER (WHERE (g IS NULL) <> (p IS NULL)) AS noise_differs,
       count(DISTINCT (g, p)) FILTER (WHERE g IS NOT NULL) AS pairs,
       count(DISTINCT g) AS gpu, count(DISTINCT p) AS postgis
FROM (SELECT gpu_dbscan(geom, 1.5, 2) OVER () AS g,
             ST_ClusterDBSCAN(geom, 1.5, 2) OVER () AS p
      FROM g_lat) x;
-- ... and the set-returning form
SELECT count(*) AS rows,
       count(*) FILTER (WHERE (d.cluster_id IS NULL) <> (p.c IS NULL)) AS noise_differs,
       count(DISTINCT (d.cluster_id, p.c)) FILTER (WHERE d.cluster_id IS NOT NULL) AS pairs,
       count(DISTINCT d.cluster_id) AS gpu, count(DISTINCT p.c) AS postgis
FROM gpu_dbscan('SELECT id, geom FROM g_lat ORDER BY id', 1.5, 2) d
JOIN (SELECT id, ST_ClusterDBSCAN(geom, 1.5, 2) OVER () AS c FROM g_lat) p USING (id);
-- min_pts 5: border points within eps of two clusters may join either
-- (gpuclust: the nearest core point's; PostGIS: the first to reach
-- them), so the core points' partition and the noise must agree
SELECT count(*) FILTER (WHERE (d.cluster_id IS NULL) <> (p.c IS NULL)) AS noise_differs,
       count(DISTINCT (d.cluster_id, p.c)) FILTER (WHERE d.is_core) AS core_pairs,
       count(DISTINCT d.cluster_id) AS gpu, count(DISTINCT p.c) AS postgis
FROM gpu_dbscan('SELECT id, geom FROM g_lat ORDER BY id', 1.5, 5) d
JOIN (SELECT id, ST_ClusterDBSCAN(geom, 1.5, 5) OVER () AS c FROM g_lat) p USING (id);

-- the cities, per city, with geometry and with geography: as
-- ST_ClusterDBSCAN, and NULL geometries get a NULL cluster
SELECT count(*) AS rows, count(*) FILTER (WHERE g IS NULL) AS null_or_noise,
       count(*) FILTER (WHERE (g IS NULL) <> (p IS NULL)) AS noise_differs,
       count(*) FILTER (WHERE g IS DISTINCT FROM gg) AS geography_differs,
       count(DISTINCT (city, g, p)) FILTER (WHERE g IS NOT NULL) AS pairs,
       count(DISTINCT (city, g)) FILTER (WHERE g IS NOT NULL) AS gpu
FROM (SELECT city,
             gpu_dbscan(geom, 0.05, 5) OVER w AS g,
             gpu_dbscan(geom::geography, 0.05, 5) OVER w AS gg,
             ST_ClusterDBSCAN(geom, 0.05, 5) OVER w AS p
      FROM g_pts
      WINDOW w AS (PARTITION BY city ORDER BY id)) x;
SELECT city, cluster_id, count(*)
FROM gpu_dbscan('SELECT id, geom FROM g_pts ORDER BY id', eps => 0.05, min_pts => 5) d
JOIN g_pts USING (id)
GROUP BY 1, 2 ORDER BY 1, 2;
SELECT count(*) FILTER (WHERE a.cluster_id IS DISTINCT FROM b.cluster_id) AS geography_differs
FROM gpu_dbscan('SELECT id, geom::geography FROM g_pts ORDER BY id', 0.05, 5) a
JOIN gpu_dbscan('SELECT id, geom FROM g_pts ORDER BY id', 0.05, 5) b USING (id);

-- k-means of geometries: the window form beside ST_ClusterKMeans, the
-- set-returning form, a model and kmeans_assign of a cast point
SELECT count(DISTINCT (g, p)) AS pairs, count(DISTINCT g) AS gpu, count(DISTINCT p) AS postgis
FROM (SELECT gpu_kmeans(geom, 3) OVER (ORDER BY id) AS g,
             ST_ClusterKMeans(geom, 3) OVER (ORDER BY id) AS p
      FROM g_pts WHERE id < 9000) x;
SELECT city, count(DISTINCT cluster_id) AS clusters, count(*)
FROM gpu_kmeans('SELECT id, geom FROM g_pts WHERE id < 9000', 3) k
JOIN g_pts USING (id) GROUP BY city ORDER BY city;
SELECT q.name, c.city
FROM (VALUES ('Potsdam', 'SRID=4326;POINT(13.06 52.39)'::geometry),
             ('Versailles', 'SRID=4326;POINT(2.13 48.80)'), ('Tivoli', 'SRID=4326;POINT(12.80 41.96)')) AS q(name, geom),
     (SELECT centroids FROM gpu_kmeans_fit('SELECT id, geom FROM g_pts WHERE id < 9000', 3)) m,
     LATERAL (SELECT city FROM g_pts
              WHERE id < 9000
                AND kmeans_assign(geom::real[], m.centroids) = kmeans_assign(q.geom::real[], m.centroids)
              LIMIT 1) c
ORDER BY q.name;

-- 3-D points
SELECT count(DISTINCT c) AS clusters
FROM (SELECT gpu_dbscan(ST_MakePoint(i % 2 * 100, 0, i % 3 * 100), 1, 3) OVER () AS c
      FROM generate_series(1, 60) i) s;

-- the geometry and geography window forms take the real[] forms'
-- arguments, algorithm included
SELECT p.oid::regprocedure AS function
FROM pg_proc p WHERE p.proname = 'gpu_dbscan'
  AND p.proargtypes[0] IN ('geometry'::regtype, 'geography'::regtype)
ORDER BY p.oid::regprocedure::text COLLATE "C";
SELECT count(*) FILTER (WHERE a IS DISTINCT FROM b) AS differing,
       count(*) FILTER (WHERE a IS DISTINCT FROM c) AS differing_geography
FROM (SELECT gpu_dbscan(geom, 0.05, 5) OVER w AS a,
             gpu_dbscan(geom, 0.05, 5, algorithm => 'union_find') OVER w AS b,
             gpu_dbscan(geom::geography, 0.05, 5, NULL, 'euclidean', 'union_find') OVER w AS c
      FROM g_pts WINDOW w AS (ORDER BY id)) x;
SELECT gpu_dbscan(geom, 0.05, 5, device => 'cpu', algorithm => 'dclust') OVER () FROM g_pts;

-- a shape that is not a point is an error naming the row; the hint offers
-- ST_Centroid
SELECT * FROM gpu_dbscan($$SELECT id, g FROM (VALUES (1, 'POINT(0 0)'::geometry),
                           (7, 'POLYGON((0 0, 1 0, 1 1, 0 0))')) v(id, g)$$, 1, 1);
\echo :LAST_ERROR_SQLSTATE
SELECT gpu_dbscan(g, 1, 1) OVER ()
FROM (VALUES ('POINT(0 0)'::geometry), ('LINESTRING(0 0, 1 1)')) AS t(g);
\echo :LAST_ERROR_SQLSTATE
SELECT gpu_kmeans(g, 1) OVER ()
FROM (VALUES ('MULTIPOINT((0 0), (1 1))'::geography)) AS t(g);
\echo :LAST_ERROR_SQLSTATE
-- an EMPTY geometry or geography of any type is a NULL feature row: a NULL
-- cluster, as NULL gets, in every form
SELECT * FROM gpu_kmeans($$SELECT id, g FROM (VALUES (3, 'POINT EMPTY'::geometry),
                           (4, 'POINT(1 1)'), (5, 'POLYGON EMPTY')) v(id, g)$$, 1);
SELECT * FROM gpu_dbscan($$SELECT 'a' || id, g FROM (VALUES (3, 'POINT EMPTY'::geometry)) v(id, g)$$, NULL::text, 1, 1);
SELECT id, gpu_dbscan(g, 1, 1) OVER (ORDER BY id) AS dbscan,
       gpu_kmeans(g::geography, 1) OVER (ORDER BY id) AS kmeans_geography
FROM (VALUES (1, 'POINT(0 0)'::geometry), (2, 'POINT EMPTY'), (3, 'MULTIPOINT EMPTY'),
             (4, NULL), (5, 'POINT(0.5 0)')) AS t(id, g);
SELECT 'POINT EMPTY'::geometry::real[] AS empty, 'LINESTRING EMPTY'::geography::real[] AS empty_geography;

-- PostGIS's own cases for its cluster functions (regress/core/cluster.sql),
-- through the window forms beside ST_ClusterDBSCAN / ST_ClusterKMeans: the
-- same partition of the rows with a point.  NULL and EMPTY rows get a NULL
-- cluster here in every form; ST_ClusterKMeans puts them into one more
-- cluster of their own (its expected #4101b|1, #4071|2|3|4), so they are
-- counted apart (np: those rows given a cluster).
CREATE TABLE g_dbscan_inputs (id int, geom geometry);
INSERT INTO g_dbscan_inputs VALUES (1, 'POINT (0 0)'), (2, 'POINT (0 1)'), (3, 'POINT (-0.5 0.5)'),
  (4, 'POINT (1 0)'), (5, 'POINT (1 1)'), (6, 'POINT (1.0 0.5)');
SELECT t, count(*) FILTER (WHERE (g IS NULL) <> (p IS NULL)) AS noise_differs,
       count(DISTINCT (g, p)) AS pairs, count(DISTINCT g) AS gpu, count(DISTINCT p) AS postgis
FROM (SELECT 't101' AS t, gpu_dbscan(geom, 0.8, 1) OVER () AS g, ST_ClusterDBSCAN(geom, 0.8, 1) OVER () AS p FROM g_dbscan_inputs
      UNION ALL
      SELECT 't102', gpu_dbscan(geom, 0.8, 4) OVER (), ST_ClusterDBSCAN(geom, 0.8, 4) OVER () FROM g_dbscan_inputs
      UNION ALL
      SELECT 't103', gpu_dbscan(geom, 0.6, 3) OVER (), ST_ClusterDBSCAN(geom, 0.6, 3) OVER () FROM g_dbscan_inputs
      UNION ALL
      SELECT '#3612b', gpu_dbscan(ST_Point(1, 1), 20.1, 5) OVER (), ST_ClusterDBSCAN(ST_Point(1, 1), 20.1, 5) OVER ()) x
GROUP BY t ORDER BY t;
-- k-means: the distinct clusters of the rows with a point (p), and the
-- rows without one (NULL or EMPTY) that got a cluster (np)
CREATE FUNCTION g_kmeans_counts(k int, rows text, OUT gpu_p bigint, OUT gpu_np bigint,
                                OUT postgis_p bigint, OUT postgis_np bigint)
LANGUAGE plpgsql AS $f$
BEGIN
  EXECUTE format($q$
    SELECT count(DISTINCT g) FILTER (WHERE has_point), count(g) FILTER (WHERE NOT has_point),
           count(DISTINCT p) FILTER (WHERE has_point), count(p) FILTER (WHERE NOT has_point)
    FROM (SELECT coalesce(NOT ST_IsEmpty(geom), false) AS has_point,
                 gpu_kmeans(geom, %1$s) OVER () AS g, ST_ClusterKMeans(geom, %1$s) OVER () AS p
          FROM (VALUES %2$s) v(geom)) x$q$, k, rows)
  INTO gpu_p, gpu_np, postgis_p, postgis_np;
END
$f$;
SELECT '#4100b' AS t, * FROM g_kmeans_counts(2, $$('POINT(0 0)'::geometry), ('POINT(0 0)')$$);
SELECT '#4101b' AS t, * FROM g_kmeans_counts(2, $$('POINT EMPTY'::geometry), ('POINT EMPTY')$$);
SELECT '3d_support-1' AS t, * FROM g_kmeans_counts(2, $$('POINT(0 0 1)'::geometry), ('POINT(0 0 5)'), ('POINT(0 0 7)')$$);
SELECT '#4071 k ' || k AS t, c.*
FROM generate_series(1, 3) k,
     g_kmeans_counts(k, $$(NULL::geometry), ('POINT(1 1)'), ('POINT EMPTY'), ('POINT(0 0)'), ('POINT(4 4)')$$) c;
-- fewer points than k (PostGIS: a NOTICE, and an error when even the
-- rows are fewer than k): one cluster per point on both sides
SELECT 'few points' AS t, * FROM g_kmeans_counts(5,
  $$('POINT(0 0)'::geometry), ('POINT(1 0)'), ('POINT EMPTY'), ('POINT(2 2)'), ('POINT EMPTY')$$);
DROP FUNCTION g_kmeans_counts;
DROP TABLE g_dbscan_inputs;
SELECT gpu_dbscan(ST_Centroid(g), 1, 1) OVER () AS cluster
FROM (VALUES ('POLYGON((0 0, 1 0, 1 1, 0 0))'::geometry)) AS t(g);

DROP TABLE g_lat;
DROP EXTENSION gpuclust_postgis;
DROP TABLE g_pts, g_model;
