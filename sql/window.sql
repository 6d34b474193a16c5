--
-- Window functions: gpu_dbscan(features, eps, min_pts) OVER (...) and
-- gpu_kmeans(features, k, ...) OVER (...) give the labels of the
-- set-returning forms over the same rows in the same order, per partition
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gpuclust;
RESET client_min_messages;
\set SHOW_CONTEXT errors

-- 3 groups (g) of 4 blobs each, with noise, some NULL features, 2-d
CREATE TABLE w_pts AS
SELECT i AS id, i % 3 AS g,
       CASE WHEN i % 97 = 0 THEN NULL
            ELSE ARRAY[((i / 3) % 4) * 10 + ((i * 7919) % 200) / 100.0,
                       ((i / 12) % 2) * 10 + ((i * 104729) % 300) / 100.0]
       END::real[] AS f
FROM generate_series(1, 1500) i;
-- a few isolated points: DBSCAN noise
INSERT INTO w_pts VALUES (2001, 0, '{100,100}'), (2002, 1, '{-100,50}'), (2003, 2, '{55,-70}');

-- mismatches between the window form and the SRF over the same ordered rows
CREATE FUNCTION w_dbscan_diff(eps float8, min_pts int) RETURNS bigint
LANGUAGE sql AS $$
  SELECT count(*) FROM
    (SELECT id, gpu_dbscan(f, eps, min_pts) OVER (ORDER BY id) AS w FROM w_pts) w
    FULL JOIN gpu_dbscan('SELECT id, f FROM w_pts ORDER BY id', eps, min_pts) s USING (id)
  WHERE w.w IS DISTINCT FROM s.cluster_id OR w.id IS NULL OR s.id IS NULL
$$;

-- DBSCAN over the whole table: same labels, and not a trivial result
SELECT w_dbscan_diff(1.0, 4) AS diff, w_dbscan_diff(0.3, 5) AS diff2, w_dbscan_diff(5, 1) AS diff3;
SELECT count(DISTINCT c) AS clusters, count(*) FILTER (WHERE c IS NULL) AS null_rows
FROM (SELECT gpu_dbscan(f, 1.0, 4) OVER (ORDER BY id) AS c FROM w_pts) x;

-- labels follow the window's order, as the SRF's follow its source order
SELECT count(*) AS diff FROM
  (SELECT id, gpu_dbscan(f, 1.0, 4) OVER (ORDER BY id DESC) AS w FROM w_pts) w
  JOIN gpu_dbscan('SELECT id, f FROM w_pts ORDER BY id DESC', 1.0, 4) s USING (id)
WHERE w.w IS DISTINCT FROM s.cluster_id;
SELECT * FROM
  (SELECT id, gpu_dbscan(f, 1.0, 4) OVER (ORDER BY id) AS asc_order,
          gpu_dbscan(f, 1.0, 4) OVER (ORDER BY id DESC) AS desc_order FROM w_pts) x
WHERE id IN (1, 2, 3, 12, 97, 2001) ORDER BY id;

-- PARTITION BY: each partition is clustered on its own, as the SRF over
-- that partition's rows
SELECT count(*) AS diff FROM
  (SELECT id, gpu_dbscan(f, 1.0, 4) OVER (PARTITION BY g ORDER BY id) AS w FROM w_pts) w
  JOIN (SELECT s.* FROM generate_series(0, 2) AS g,
        LATERAL gpu_dbscan(format('SELECT id, f FROM w_pts WHERE g = %s ORDER BY id', g), 1.0, 4) s) s
  USING (id)
WHERE w.w IS DISTINCT FROM s.cluster_id;
SELECT g, count(DISTINCT c) AS clusters, count(*) FILTER (WHERE c IS NULL) AS null_rows
FROM (SELECT g, gpu_dbscan(f, 1.0, 4) OVER (PARTITION BY g ORDER BY id) AS c FROM w_pts) x
GROUP BY g ORDER BY g;

-- k-means: the same labels as the SRF with the same arguments
CREATE FUNCTION w_kmeans_diff(k int, init text, n_init int, seed bigint) RETURNS bigint
LANGUAGE sql AS $$
  SELECT count(*) FROM
    (SELECT id, gpu_kmeans(f, k, 300, 1e-4, init, n_init, seed) OVER (ORDER BY id) AS w FROM w_pts) w
    FULL JOIN gpu_kmeans('SELECT id, f FROM w_pts ORDER BY id', k, 300, 1e-4, init, n_init, seed) s USING (id)
  WHERE w.w IS DISTINCT FROM s.cluster_id OR w.id IS NULL OR s.id IS NULL
$$;
SELECT w_kmeans_diff(8, 'k-means++', 1, 0) AS d1, w_kmeans_diff(5, 'random', 3, 42) AS d2,
       w_kmeans_diff(1, 'k-means++', 1, 0) AS d3, w_kmeans_diff(20, 'k-means++', 2, -7) AS d4;
SELECT count(DISTINCT c) AS clusters, count(*) FILTER (WHERE c IS NULL) AS null_rows
FROM (SELECT gpu_kmeans(f, 8) OVER (ORDER BY id) AS c FROM w_pts) x;

-- k-means per partition
SELECT count(*) AS diff FROM
  (SELECT id, gpu_kmeans(f, 4, seed => 3) OVER (PARTITION BY g ORDER BY id) AS w FROM w_pts) w
  JOIN (SELECT s.* FROM generate_series(0, 2) AS g,
        LATERAL gpu_kmeans(format('SELECT id, f FROM w_pts WHERE g = %s ORDER BY id', g), 4, seed => 3) s) s
  USING (id)
WHERE w.w IS DISTINCT FROM s.cluster_id;

-- defaults, named and positional arguments, device
SELECT count(*) AS diff FROM
  (SELECT id,
          gpu_kmeans(f, 4) OVER w AS a,
          gpu_kmeans(f, 4, 300, 1e-4, 'k-means++', 1, 0, NULL) OVER w AS b,
          gpu_kmeans(features => f, k => 4, device => 'cpu') OVER w AS c,
          gpu_kmeans(f, 4, device => 'auto') OVER w AS d
   FROM w_pts WINDOW w AS (ORDER BY id)) x
WHERE a IS DISTINCT FROM b OR a IS DISTINCT FROM c OR a IS DISTINCT FROM d;
SELECT count(*) AS diff FROM
  (SELECT gpu_dbscan(f, 1.0, 4) OVER w AS a, gpu_dbscan(f, 1.0, 4, 'cpu') OVER w AS b,
          gpu_dbscan(features => f, eps => 1.0, min_pts => 4, device => NULL) OVER w AS c
   FROM w_pts WINDOW w AS (ORDER BY id)) x
WHERE a IS DISTINCT FROM b OR a IS DISTINCT FROM c;

-- double precision[] features (narrowed to real as the SRFs do)
SELECT count(*) AS diff FROM
  (SELECT id, gpu_dbscan(f::float8[], 1.0, 4) OVER (ORDER BY id) AS a,
              gpu_dbscan(f, 1.0, 4) OVER (ORDER BY id) AS b,
              gpu_kmeans(f::float8[], 6) OVER (ORDER BY id) AS c,
              gpu_kmeans(f, 6) OVER (ORDER BY id) AS d FROM w_pts) x
WHERE a IS DISTINCT FROM b OR c IS DISTINCT FROM d;

-- the frame is ignored: the whole partition is clustered
SELECT count(*) AS diff FROM
  (SELECT gpu_dbscan(f, 1.0, 4) OVER (ORDER BY id) AS a,
          gpu_dbscan(f, 1.0, 4) OVER (ORDER BY id ROWS BETWEEN CURRENT ROW AND CURRENT ROW) AS b
   FROM w_pts) x
WHERE a IS DISTINCT FROM b;

-- a small example, row by row: noise and NULL features give NULL
SELECT id, f, gpu_dbscan(f, 1.5, 2) OVER (ORDER BY id) AS dbscan,
       gpu_kmeans(f, 2) OVER (ORDER BY id) AS kmeans
FROM (VALUES (1, '{0,0}'::real[]), (2, '{1,0}'), (3, NULL), (4, '{10,10}'),
             (5, '{11,10}'), (6, '{50,50}')) AS t(id, f)
ORDER BY id;

-- a partition whose rows all have NULL features: all NULL, no k check
SELECT id, gpu_kmeans(f, 5) OVER (PARTITION BY g) AS km, gpu_dbscan(f, 1, 1) OVER (PARTITION BY g) AS db
FROM (VALUES (1, 1, NULL::real[]), (2, 1, NULL), (3, 2, '{1}'), (4, 2, '{2}'), (5, 2, '{3}'),
             (6, 2, '{4}'), (7, 2, '{5}')) AS t(id, g, f)
WHERE g = 1 ORDER BY id;

-- the partition is read once: a volatile argument is evaluated once per row
CREATE SEQUENCE w_seq;
CREATE FUNCTION w_counted(f real[]) RETURNS real[] LANGUAGE plpgsql VOLATILE AS
$$ BEGIN PERFORM nextval('w_seq'); RETURN f; END $$;
SELECT count(*) AS rows, count(DISTINCT c) AS clusters
FROM (SELECT gpu_dbscan(w_counted(f), 1.0, 4) OVER (PARTITION BY g ORDER BY id) AS c FROM w_pts) x;
SELECT nextval('w_seq') - 1 AS argument_evaluations;
SELECT setval('w_seq', 1, false) IS NOT NULL AS reset;
SELECT count(*) AS rows, count(DISTINCT c) AS clusters
FROM (SELECT gpu_kmeans(w_counted(f), 3) OVER () AS c FROM w_pts) x;
SELECT nextval('w_seq') - 1 AS argument_evaluations;

-- parameters may come from columns when constant within each partition
SELECT g, eps, count(DISTINCT c) AS clusters
FROM (SELECT g, eps, gpu_dbscan(f, eps, 4) OVER (PARTITION BY g ORDER BY id) AS c
      FROM w_pts JOIN (VALUES (0, 1.0), (1, 0.01), (2, 100)) AS e(g, eps) USING (g)) x
GROUP BY g, eps ORDER BY g;

-- errors: parameters
SELECT gpu_dbscan(f, 0, 4) OVER () FROM w_pts;
\echo :LAST_ERROR_SQLSTATE
SELECT gpu_dbscan(f, 'NaN', 4) OVER () FROM w_pts;
\echo :LAST_ERROR_SQLSTATE
SELECT gpu_dbscan(f, 1.0, 0) OVER () FROM w_pts;
\echo :LAST_ERROR_SQLSTATE
SELECT gpu_dbscan(f, NULL, 4) OVER () FROM w_pts;
\echo :LAST_ERROR_SQLSTATE
SELECT gpu_dbscan(f, 1.0, NULL) OVER () FROM w_pts;
\echo :LAST_ERROR_SQLSTATE
SELECT gpu_dbscan(f, 1.0, 4, 'tpu') OVER () FROM w_pts;
\echo :LAST_ERROR_SQLSTATE
SELECT gpu_dbscan(f, id / 1000.0 + 1, 4) OVER (ORDER BY id) FROM w_pts;
\echo :LAST_ERROR_SQLSTATE
SELECT gpu_dbscan(f, 1.0, CASE WHEN id < 5 THEN 4 END) OVER (ORDER BY id) FROM w_pts;
\echo :LAST_ERROR_SQLSTATE
SELECT gpu_kmeans(f, 0) OVER () FROM w_pts;
\echo :LAST_ERROR_SQLSTATE
SELECT gpu_kmeans(f, NULL) OVER () FROM w_pts;
\echo :LAST_ERROR_SQLSTATE
SELECT gpu_kmeans(f, 2, max_iter => 0) OVER () FROM w_pts;
\echo :LAST_ERROR_SQLSTATE
SELECT gpu_kmeans(f, 2, tol => -1) OVER () FROM w_pts;
\echo :LAST_ERROR_SQLSTATE
SELECT gpu_kmeans(f, 2, init => 'kmeans||') OVER () FROM w_pts;
\echo :LAST_ERROR_SQLSTATE
SELECT gpu_kmeans(f, 2, n_init => 0) OVER () FROM w_pts;
\echo :LAST_ERROR_SQLSTATE
SELECT gpu_kmeans(f, 2, seed => NULL) OVER () FROM w_pts;
\echo :LAST_ERROR_SQLSTATE
SELECT gpu_kmeans(f, 2, device => 'GPU0') OVER () FROM w_pts;
\echo :LAST_ERROR_SQLSTATE
SELECT gpu_kmeans(f, g + 2) OVER () FROM w_pts;
\echo :LAST_ERROR_SQLSTATE
SELECT gpu_kmeans(f, 2) FROM w_pts;
\echo :LAST_ERROR_SQLSTATE

-- errors: features, naming the row number within the partition
SELECT gpu_dbscan(f, 1, 1) OVER (ORDER BY id)
FROM (VALUES (1, '{1,2}'::real[]), (2, '{1,2}'), (3, '{1,2,3}')) AS t(id, f);
\echo :LAST_ERROR_SQLSTATE
SELECT gpu_kmeans(f, 1) OVER (PARTITION BY g ORDER BY id)
FROM (VALUES (1, 1, '{1,2}'::real[]), (2, 2, '{1}'), (3, 2, '{1,2}')) AS t(id, g, f);
\echo :LAST_ERROR_SQLSTATE
SELECT gpu_dbscan(f, 1, 1) OVER (ORDER BY id)
FROM (VALUES (1, '{1,2}'::real[]), (2, '{NaN,2}')) AS t(id, f);
\echo :LAST_ERROR_SQLSTATE
SELECT gpu_dbscan(f, 1, 1) OVER (ORDER BY id)
FROM (VALUES (1, '{1,2}'::float8[]), (2, '{1,-Infinity}')) AS t(id, f);
\echo :LAST_ERROR_SQLSTATE
SELECT gpu_kmeans(f, 1) OVER (ORDER BY id)
FROM (VALUES (1, '{1,2}'::float8[]), (2, '{1e300,2}')) AS t(id, f);
\echo :LAST_ERROR_SQLSTATE
SELECT gpu_dbscan(f, 1, 1) OVER (ORDER BY id)
FROM (VALUES (1, '{1,NULL}'::real[])) AS t(id, f);
\echo :LAST_ERROR_SQLSTATE
SELECT gpu_dbscan(f, 1, 1) OVER (ORDER BY id)
FROM (VALUES (1, '{1}'::real[]), (2, '{}')) AS t(id, f);
\echo :LAST_ERROR_SQLSTATE
SELECT gpu_kmeans(f, 1) OVER (ORDER BY id)
FROM (VALUES (1, '{{1,2},{3,4}}'::real[])) AS t(id, f);
\echo :LAST_ERROR_SQLSTATE

-- a partition of fewer rows with features than k is no error, as with
-- PostGIS's ST_ClusterKMeans: each distinct row is its own cluster
-- (numbered in the order of its first row; -0 and 0 are one value), with
-- a NOTICE naming the partition's size; the other partitions cluster as
-- ever.  Under cosine a direction is one point.
SELECT id, g, f, gpu_kmeans(f, 6) OVER (PARTITION BY g ORDER BY id) AS c
FROM (VALUES (1, 0, '{1,1}'::real[]), (2, 0, '{0,0}'), (3, 0, '{1,1}'), (4, 0, NULL),
             (5, 0, '{-0.0,0}'), (6, 0, '{2,1}'),
             (7, 1, '{0,0}'), (8, 1, '{1,0}'), (9, 1, '{2,0}'), (10, 1, '{3,0}'),
             (11, 1, '{4,0}'), (12, 1, '{5,0}'), (13, 2, NULL)) AS t(id, g, f)
ORDER BY id;
SELECT id, gpu_kmeans(f, 4, metric => 'cosine') OVER (ORDER BY id) AS c
FROM (VALUES (1, '{1,1}'::real[]), (2, '{3,3}'), (3, '{0,2}')) AS t(id, f);
SELECT gpu_kmeans(f, 4, metric => 'cosine') OVER (ORDER BY id)
FROM (VALUES (1, '{1,1}'::real[]), (2, '{0,0}')) AS t(id, f);
\echo :LAST_ERROR_SQLSTATE
-- every partition smaller than k: as many clusters as distinct rows
SELECT g, count(DISTINCT c) AS clusters, count(DISTINCT f) AS distinct_rows,
       count(c) AS labelled, count(f) AS with_features
FROM (SELECT id % 2 AS g, f, gpu_kmeans(f, 800) OVER (PARTITION BY id % 2) AS c
      FROM w_pts) x
GROUP BY g ORDER BY g;
-- DBSCAN: a partition of fewer rows than min_pts is all noise (as ever),
-- now with a NOTICE saying why
SELECT id, g, gpu_dbscan(f, 10, 3) OVER (PARTITION BY g ORDER BY id) AS c
FROM (VALUES (1, 0, '{1,1}'::real[]), (2, 0, '{1,2}'), (3, 0, NULL),
             (4, 1, '{0,0}'), (5, 1, '{0,1}'), (6, 1, '{1,0}')) AS t(id, g, f)
ORDER BY id;

-- the SRFs are still chosen for a source text
SELECT * FROM gpu_dbscan('SELECT 1, ARRAY[1.0]', 1, 1);
SELECT id, cluster_id FROM gpu_kmeans('SELECT 1, ARRAY[1.0]', 1);

DROP TABLE w_pts;
DROP FUNCTION w_dbscan_diff, w_kmeans_diff, w_counted;
DROP SEQUENCE w_seq;
