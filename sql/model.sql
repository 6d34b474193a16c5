--
-- k-means models: gpu_kmeans_fit, kmeans_assign, kmeans_assign_distance
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gpuclust;
RESET client_min_messages;
SET extra_float_digits = 0;
\set SHOW_CONTEXT errors

-- three well-separated 3x3 grids (spacing 0.1) around (0,0), (10,0), (0,10)
CREATE TABLE m_pts AS
SELECT (c * 10 + j)::int AS id,
       ARRAY[cx + (j % 3) * 0.1, cy + (j / 3) * 0.1]::real[] AS f
FROM (VALUES (0, 0.0, 0.0), (1, 10.0, 0.0), (2, 0.0, 10.0)) AS c(c, cx, cy),
     generate_series(0, 8) AS j;

-- the model: k x d centroids and the fit's statistics
SELECT * FROM gpu_kmeans_fit('SELECT id, f FROM m_pts', 3);
SELECT array_dims(centroids), pg_typeof(centroids), round(inertia::numeric, 4) AS inertia
FROM gpu_kmeans_fit('SELECT id, f FROM m_pts', 3, max_iter => 50, tol => 0,
                    init => 'random', n_init => 3, seed => 11, device => 'cpu');
SELECT (gpu_kmeans_fit('SELECT id, f FROM m_pts', 2)).n;

-- the fit is gpu_kmeans: its labels are kmeans_assign over the centroids,
-- its distances kmeans_assign_distance (bit for bit), its inertia their sum
WITH m AS (SELECT * FROM gpu_kmeans_fit('SELECT id, f FROM m_pts', 3, seed => 5)),
     s AS (SELECT * FROM gpu_kmeans('SELECT id, f FROM m_pts', 3, seed => 5))
SELECT count(*) AS rows,
       count(*) FILTER (WHERE kmeans_assign(p.f, m.centroids) <> s.cluster_id) AS label_diff,
       count(*) FILTER (WHERE kmeans_assign_distance(p.f, m.centroids) <> s.distance) AS distance_diff,
       abs(sum(s.distance ^ 2) - min(m.inertia)) < 1e-9 AS inertia_matches
FROM m, s JOIN m_pts p USING (id);

-- the same on a harder problem: 3000 random points in 5-d, k = 12, where
-- many rows lie near the boundary between two centres
CREATE TABLE m_rand AS
SELECT i AS id,
       ARRAY(SELECT ((i * 2654435761 + j * 40503) % 10007) / 1000.0
             FROM generate_series(1, 5) j)::real[] AS f
FROM generate_series(1, 3000) i;
CREATE FUNCTION m_roundtrip(k int, init text, n_init int, seed bigint)
RETURNS TABLE (label_diff bigint, distance_diff bigint, inertia_matches boolean)
LANGUAGE sql AS $$
  WITH m AS (SELECT * FROM gpu_kmeans_fit('SELECT id, f FROM m_rand', k, 300, 1e-4, init, n_init, seed)),
       s AS (SELECT * FROM gpu_kmeans('SELECT id, f FROM m_rand', k, 300, 1e-4, init, n_init, seed))
  SELECT count(*) FILTER (WHERE kmeans_assign(p.f, m.centroids) <> s.cluster_id),
         count(*) FILTER (WHERE kmeans_assign_distance(p.f, m.centroids) <> s.distance),
         abs(sum(s.distance ^ 2) - min(m.inertia)) <= 1e-9 * min(m.inertia)
  FROM m, s JOIN m_rand p USING (id)
$$;
SELECT * FROM m_roundtrip(12, 'k-means++', 1, 0);
SELECT * FROM m_roundtrip(7, 'random', 3, 99);
SELECT * FROM m_roundtrip(40, 'k-means++', 2, -3);
-- ... and with max_iter 1 (not converged: the labels still match)
SELECT converged, iterations FROM gpu_kmeans_fit('SELECT id, f FROM m_rand', 12, max_iter => 1);
SELECT label_diff, distance_diff FROM
  (WITH m AS (SELECT * FROM gpu_kmeans_fit('SELECT id, f FROM m_rand', 12, max_iter => 1)),
        s AS (SELECT * FROM gpu_kmeans('SELECT id, f FROM m_rand', 12, max_iter => 1))
   SELECT count(*) FILTER (WHERE kmeans_assign(p.f, m.centroids) <> s.cluster_id) AS label_diff,
          count(*) FILTER (WHERE kmeans_assign_distance(p.f, m.centroids) <> s.distance) AS distance_diff
   FROM m, s JOIN m_rand p USING (id)) x;

-- a model stored in a table scores new rows
CREATE TABLE m_model AS
SELECT 'grids' AS name, * FROM gpu_kmeans_fit('SELECT id, f FROM m_pts', 3);
SELECT v.f, kmeans_assign(v.f, m.centroids) = kmeans_assign(p.f, m.centroids) AS same_as_grid_point,
       round(kmeans_assign_distance(v.f, m.centroids)::numeric, 4) AS distance
FROM m_model m,
     (VALUES ('{0.5,0.5}'::real[], 0), ('{9,1}', 10), ('{-1,12}', 20)) AS v(f, ref)
     JOIN m_pts p ON p.id = v.ref
ORDER BY v.ref;

-- double precision features; NULL in, NULL out (STRICT)
SELECT kmeans_assign('{9.5,0.2}'::float8[], '{{0,0},{10,0}}') AS a,
       kmeans_assign_distance('{3,4}'::float8[], '{{0,0},{10,0}}') AS b,
       kmeans_assign(NULL::real[], '{{0,0}}') IS NULL AS c,
       kmeans_assign('{1,1}'::real[], NULL) IS NULL AS d;

-- ties go to the lowest index; duplicate centroids too
SELECT kmeans_assign('{0,0}'::real[], '{{1,0},{-1,0}}') AS tie,
       kmeans_assign('{0,0}'::real[], '{{5,5},{0,0},{0,0}}') AS duplicate,
       kmeans_assign('{7}'::real[], '{{1},{5},{9},{7}}') AS exact,
       kmeans_assign_distance('{7}'::real[], '{{1},{5},{9},{7}}') AS zero;

-- the distance is the core's float32 one: 1 + 2^-24 rounds to 1 in real
SELECT kmeans_assign('{1.0000001}'::real[], '{{0},{2}}') AS nearest;

-- the centroids cache: many different models in one query
SELECT count(*) AS rows,
       count(*) FILTER (WHERE kmeans_assign(ARRAY[i]::real[], ARRAY[[i - 1], [i + 0.5]]::real[]) <> 1) AS wrong
FROM generate_series(1, 1000) i;
-- ... and one large (out-of-line, TOASTed) model read from a table
CREATE TABLE m_big AS
SELECT ARRAY(SELECT ARRAY[c, c] FROM generate_series(0, 2999) c)::real[] AS centroids;
SELECT pg_column_size(centroids) < 24000 AS compressed_or_toasted FROM m_big;
SELECT count(*) AS rows,
       count(*) FILTER (WHERE kmeans_assign(ARRAY[i + 0.25, i - 0.25]::real[], b.centroids) <> i) AS wrong
FROM generate_series(0, 2999, 7) i, m_big b;

-- kmeans_assign in a parallel query gives the serial answers: the rows are
-- scored in two parallel workers (the leader does not participate)
\set model '\'{{1,1,1,1,1},{5,5,5,5,5},{9,9,9,9,9},{1,9,1,9,1},{9,1,9,1,9}}\''
CREATE TABLE m_serial AS
SELECT id, kmeans_assign(f, :model) AS c, kmeans_assign_distance(f, :model) AS dist FROM m_rand;
CREATE FUNCTION m_workers_launched(q text) RETURNS int LANGUAGE plpgsql AS $$
DECLARE plan json;
BEGIN
  EXECUTE 'EXPLAIN (ANALYZE, FORMAT JSON) ' || q INTO plan;
  RETURN (SELECT max((m[1])::int) FROM regexp_matches(plan::text, '"Workers Launched": (\d+)', 'g') m);
END $$;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
SET parallel_leader_participation = off;
-- parallel plans even for small tables (debug_parallel_query; before
-- PostgreSQL 16, force_parallel_mode)
SELECT CASE WHEN current_setting('server_version_num')::int >= 160000
            THEN 'debug_parallel_query' ELSE 'force_parallel_mode' END AS parallel_guc \gset
SET :parallel_guc = on;
EXPLAIN (COSTS OFF)
SELECT kmeans_assign(f, :model) AS c, count(*) FROM m_rand GROUP BY 1;
SELECT m_workers_launched($$SELECT kmeans_assign(f, $$ || quote_literal(:model) || $$::real[]), count(*)
                            FROM m_rand GROUP BY 1$$) AS workers_launched;
CREATE TEMP TABLE m_par AS
SELECT kmeans_assign(f, :model) AS c, count(*) AS n FROM m_rand GROUP BY 1;
SELECT count(*) AS groups, sum(n) AS rows FROM m_par;
SELECT count(*) AS groups_differing FROM
  (SELECT * FROM m_par
   EXCEPT ALL
   SELECT c, count(*) FROM m_serial GROUP BY c) x;
SELECT m_workers_launched($$SELECT count(*) FROM m_rand r JOIN m_serial s USING (id)
                            WHERE kmeans_assign(r.f, $$ || quote_literal(:model) || $$::real[]) <> s.c
                               OR kmeans_assign_distance(r.f, $$ || quote_literal(:model) || $$::real[]) <> s.dist$$)
       AS workers_launched;
SELECT count(*) AS rows_differing FROM m_rand r JOIN m_serial s USING (id)
WHERE kmeans_assign(r.f, :model) <> s.c OR kmeans_assign_distance(r.f, :model) <> s.dist;
RESET :parallel_guc;
RESET parallel_leader_participation;
RESET max_parallel_workers_per_gather;
RESET min_parallel_table_scan_size;
RESET parallel_tuple_cost;
RESET parallel_setup_cost;

-- errors of gpu_kmeans_fit
SELECT * FROM gpu_kmeans_fit('SELECT id, f FROM m_pts', 28);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans_fit('SELECT id, f FROM m_pts WHERE false', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans_fit('SELECT id, f FROM m_pts', 0);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans_fit(NULL, 2);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans_fit('SELECT id, f FROM m_pts', 2, init => 'kmeans||');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans_fit('SELECT id, f FROM m_pts', 2, tol => 'NaN');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans_fit('SELECT id, f FROM m_pts', 2, device => 'tpu');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans_fit('SELECT id, ARRAY[1, id] FROM m_pts UNION ALL SELECT 99, ARRAY[1.0]', 2);
\echo :LAST_ERROR_SQLSTATE

-- errors of kmeans_assign: features against centroids
SELECT kmeans_assign('{1,2,3}'::real[], '{{0,0},{1,1}}');
\echo :LAST_ERROR_SQLSTATE
SELECT kmeans_assign_distance('{1}'::float8[], '{{0,0},{1,1}}');
\echo :LAST_ERROR_SQLSTATE
SELECT kmeans_assign('{}'::real[], '{{0,0},{1,1}}');
\echo :LAST_ERROR_SQLSTATE
SELECT kmeans_assign('{{1,2}}'::real[], '{{0,0},{1,1}}');
\echo :LAST_ERROR_SQLSTATE
SELECT kmeans_assign('{1,NULL}'::real[], '{{0,0},{1,1}}');
\echo :LAST_ERROR_SQLSTATE
SELECT kmeans_assign('{1,NaN}'::real[], '{{0,0},{1,1}}');
\echo :LAST_ERROR_SQLSTATE
SELECT kmeans_assign('{1,-Infinity}'::float8[], '{{0,0},{1,1}}');
\echo :LAST_ERROR_SQLSTATE
SELECT kmeans_assign('{1,1e300}'::float8[], '{{0,0},{1,1}}');
\echo :LAST_ERROR_SQLSTATE
-- bad centroid arrays
SELECT kmeans_assign('{1,2}'::real[], '{1,2}');
\echo :LAST_ERROR_SQLSTATE
SELECT kmeans_assign('{1,2}'::real[], '{}');
\echo :LAST_ERROR_SQLSTATE
SELECT kmeans_assign('{1,2}'::real[], '{{{1,2}}}');
\echo :LAST_ERROR_SQLSTATE
SELECT kmeans_assign('{1,2}'::real[], '{{0,0},{1,NULL}}');
\echo :LAST_ERROR_SQLSTATE
SELECT kmeans_assign('{1,2}'::real[], '{{0,0},{NaN,1}}');
\echo :LAST_ERROR_SQLSTATE
SELECT kmeans_assign('{1,2}'::real[], '{{0,0},{1,Infinity}}');
\echo :LAST_ERROR_SQLSTATE

-- catalog: the scalars are IMMUTABLE STRICT PARALLEL SAFE, the window
-- functions WINDOW STABLE PARALLEL SAFE, the fit VOLATILE PARALLEL UNSAFE
SELECT p.oid::regprocedure AS function, p.prokind, p.provolatile, p.proparallel, p.proisstrict
FROM pg_proc p
WHERE p.proname IN ('kmeans_assign', 'kmeans_assign_distance', 'gpu_kmeans_fit', 'gpu_kmeans', 'gpu_dbscan')
ORDER BY p.oid::regprocedure::text COLLATE "C";

DROP TABLE m_pts, m_rand, m_model, m_big, m_serial;
DROP FUNCTION m_roundtrip, m_workers_launched;
