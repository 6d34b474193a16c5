--
-- k-means features of scikit-learn and MADlib: sample weights (a third
-- source column), initial centroids (init_centroids, or init => a query),
-- labels and model together; weights and given centroids run on the CPU
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gpuclust;
RESET client_min_messages;
SET extra_float_digits = 0;
\set SHOW_CONTEXT errors

-- three 3x3 grids (spacing 0.1) around (0,0), (10,0), (0,10); weights 0 to 3
CREATE TABLE kf AS
SELECT (c * 10 + j)::int AS id,
       ARRAY[cx + (j % 3) * 0.1, cy + (j / 3) * 0.1]::real[] AS f,
       ((c + j) % 4)::float8 AS w
FROM (VALUES (0, 0.0, 0.0), (1, 10.0, 0.0), (2, 0.0, 10.0)) AS c(c, cx, cy),
     generate_series(0, 8) AS j;

-- weighted centres are the weighted means of their rows (checked in SQL)
CREATE TABLE kf_fit AS
SELECT * FROM gpu_kmeans_fit('SELECT id, f, w FROM kf', 3,
                             init_centroids => '{{0,0},{10,0},{0,10}}');
SELECT centroids, round(inertia::numeric, 6) AS inertia, iterations, converged, n
FROM kf_fit;
SELECT kmeans_assign(f, centroids) AS c,
       round((sum(w * f[1]) / sum(w))::numeric, 4) AS mean_x,
       round((sum(w * f[2]) / sum(w))::numeric, 4) AS mean_y,
       round(centroids[kmeans_assign(f, centroids) + 1][1]::numeric, 4) AS cx,
       round(centroids[kmeans_assign(f, centroids) + 1][2]::numeric, 4) AS cy
FROM kf, kf_fit GROUP BY 1, 4, 5 ORDER BY 1;
-- the weighted inertia: sum of w times the squared distance
SELECT round(sum(w * kmeans_assign_distance(f, centroids) ^ 2)::numeric, 6) AS weighted_inertia
FROM kf, kf_fit;

-- integer weights are multiplicities: the same model as the repeated rows
SELECT a.centroids = b.centroids AS same_as_repeated_rows,
       round(a.inertia::numeric, 6) = round(b.inertia::numeric, 6) AS same_inertia
FROM gpu_kmeans_fit('SELECT id, f, w FROM kf', 3,
                    init_centroids => '{{0,0},{10,0},{0,10}}') a,
     gpu_kmeans_fit('SELECT id, f FROM kf, generate_series(1, w::int)', 3,
                    init_centroids => '{{0,0},{10,0},{0,10}}') b;

-- every numeric type is a weight; weight 0 rows are clustered, move nothing
SELECT count(DISTINCT cluster_id) AS clusters, count(*) AS rows,
       count(*) FILTER (WHERE cluster_id IS NULL) AS unclustered
FROM gpu_kmeans('SELECT id, f, (id % 2)::numeric FROM kf', 3, seed => 1);
SELECT count(*) FROM gpu_kmeans('SELECT id, f, 1::smallint FROM kf', 3);
SELECT count(*) FROM gpu_kmeans('SELECT id, f, 2::real FROM kf', 3);
SELECT count(*) FROM gpu_kmeans('SELECT id, f, 3::bigint FROM kf', 3);
-- the keyed form takes weights too
SELECT id, cluster_id FROM gpu_kmeans('SELECT id::text, f, w FROM kf ORDER BY id', NULL::text, 3,
                                      init_centroids => '{{0,0},{10,0},{0,10}}')
ORDER BY id LIMIT 3;
-- the same seed, the same weighted result; k-means++ and random
SELECT (SELECT array_agg(cluster_id ORDER BY id) FROM gpu_kmeans('SELECT id, f, w FROM kf', 3, seed => 9, n_init => 3)) =
       (SELECT array_agg(cluster_id ORDER BY id) FROM gpu_kmeans('SELECT id, f, w FROM kf', 3, seed => 9, n_init => 3)) AS deterministic;
SELECT count(DISTINCT cluster_id) FROM gpu_kmeans('SELECT id, f, w FROM kf', 3, init => 'random', seed => 3);
-- k-means|| weighs its draws and candidates by the weights too
SELECT count(DISTINCT cluster_id) FROM gpu_kmeans('SELECT id, f, w FROM kf', 3, init => 'k-means||', seed => 3);
SELECT (SELECT array_agg(cluster_id ORDER BY id) FROM gpu_kmeans('SELECT id, f, w FROM kf', 3, init => 'k-means||', seed => 4)) =
       (SELECT array_agg(cluster_id ORDER BY id) FROM gpu_kmeans('SELECT id, f, w FROM kf', 3, init => 'k-means||', seed => 4)) AS deterministic;

-- initial centroids: clusters numbered as the given centres
SELECT cluster_id, min(id), max(id) FROM gpu_kmeans('SELECT id, f FROM kf', 3,
    init_centroids => '{{0,10},{0,0},{10,0}}') GROUP BY 1 ORDER BY 1;
-- from a query (one features column, its row order), as MADlib's rel_initial_centroids
CREATE TABLE kf_centres (id int, c real[]);
INSERT INTO kf_centres VALUES (1, '{10,0}'), (2, '{0,10}'), (3, '{0,0}');
SELECT cluster_id, min(id), max(id) FROM gpu_kmeans('SELECT id, f FROM kf', 3,
    init => 'SELECT c FROM kf_centres ORDER BY id') GROUP BY 1 ORDER BY 1;
SELECT centroids FROM gpu_kmeans_fit('SELECT id, f FROM kf', 3,
    init => 'SELECT c::float8[] FROM kf_centres ORDER BY id DESC');
-- n_init is one run with given centroids; a fit's own centroids converge at once
SELECT iterations, converged FROM gpu_kmeans_fit('SELECT id, f FROM kf', 3, n_init => 5,
    init_centroids => (SELECT centroids FROM kf_fit));
SELECT iterations, converged FROM gpu_kmeans_fit('SELECT id, f, w FROM kf', 3,
    init_centroids => (SELECT centroids FROM kf_fit));
-- the window form takes init_centroids, also built from rows by a subquery
SELECT c, count(*) FROM (
  SELECT gpu_kmeans(f, 3, init_centroids => (SELECT array_agg(c ORDER BY id) FROM kf_centres)) OVER () AS c
  FROM kf) s GROUP BY 1 ORDER BY 1;
SELECT gpu_kmeans(f, 3, init_centroids => CASE WHEN id < 20 THEN '{{0,0},{10,0},{0,10}}'::real[]
                                             ELSE '{{0,0},{10,0},{0,11}}' END) OVER () FROM kf LIMIT 1;
\echo :LAST_ERROR_SQLSTATE
SELECT c, count(*) FROM (
  SELECT gpu_kmeans(f::float8[], 3, init_centroids => '{{0,0},{10,0},{0,10}}') OVER () AS c
  FROM kf) s GROUP BY 1 ORDER BY 1;

-- labels and model from one fit: the fit's centroids give its labels
WITH m AS (SELECT * FROM gpu_kmeans_fit('SELECT id, f, w FROM kf', 3, seed => 4))
SELECT kf.id, kmeans_assign(kf.f, m.centroids) AS cluster_id,
       round(kmeans_assign_distance(kf.f, m.centroids)::numeric, 4) AS distance
FROM kf, m ORDER BY kf.id LIMIT 4;
SELECT count(*) AS rows, count(*) FILTER (WHERE k.cluster_id <> kmeans_assign(kf.f, m.centroids)) AS differ
FROM gpu_kmeans('SELECT id, f, w FROM kf', 3, seed => 4) k
JOIN kf USING (id), gpu_kmeans_fit('SELECT id, f, w FROM kf', 3, seed => 4) m;

-- the elbow weighs rows as the fit does; given centroids fix k: none there
SELECT e.k, round(e.inertia::numeric, 6) = round(f.inertia::numeric, 6) AS same_as_fit
FROM gpu_kmeans_elbow('SELECT id, f, w FROM kf', 2, 4, seed => 2) e,
     LATERAL gpu_kmeans_fit('SELECT id, f, w FROM kf', e.k, seed => 2) f ORDER BY 1;
SELECT * FROM gpu_kmeans_elbow('SELECT id, f FROM kf', 2, 3, init => 'SELECT c FROM kf_centres');
\echo :LAST_ERROR_SQLSTATE

-- devices: weights and given centroids run on every device (on the GPU
-- test/gpu/sql_gpu_test.sh checks the CPU's results); 'auto' runs this small
-- input on the CPU
SELECT count(*) FROM gpu_kmeans('SELECT id, f, w FROM kf', 3, device => 'auto');

-- errors: initial centroids
SELECT * FROM gpu_kmeans('SELECT id, f FROM kf', 3, init_centroids => '{{0,0},{10,0}}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT id, f FROM kf', 2, init_centroids => '{{0,0,1},{10,0,1}}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT id, f FROM kf', 2, init_centroids => '{0,0}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT id, f FROM kf', 2, init_centroids => '{}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT id, f FROM kf', 2, init_centroids => '{{0,NULL},{10,0}}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT id, f FROM kf', 2, init_centroids => '{{0,NaN},{10,0}}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT id, f FROM kf', 2, init_centroids => '{{0,Infinity},{10,0}}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT id, f FROM kf', 2, init_centroids => '{{0,3e38},{10,0}}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT id, f FROM kf', 2, init => 'random', init_centroids => '{{0,0},{10,0}}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT id, f FROM kf', 2, init => 'kmeans++');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT id, f FROM kf', 2, init => 'SELECT c FROM kf_centres');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT id, f FROM kf', 3, init => 'SELECT id, c FROM kf_centres');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT id, f FROM kf', 3, init => 'SELECT NULL::real[] FROM kf_centres');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT id, f FROM kf', 3, init => 'SELECT ''{1,NaN}''::real[] FROM kf_centres');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT id, f FROM kf', 3, init => 'SELECT ARRAY[1,2,3]::real[] FROM kf_centres');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT id, f FROM kf', 3, init => 'DELETE FROM kf_centres RETURNING c');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM kf_centres;
SELECT gpu_kmeans(f, 3, init => 'SELECT c FROM kf_centres') OVER () FROM kf LIMIT 1;
\echo :LAST_ERROR_SQLSTATE

-- errors: weights
SELECT * FROM gpu_kmeans('SELECT id, f, CASE WHEN id = 13 THEN -0.5 ELSE 1 END FROM kf', 3);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT id, f, CASE WHEN id = 13 THEN ''NaN''::float8 ELSE 1 END FROM kf', 3);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT id, f, CASE WHEN id = 13 THEN ''Infinity''::float8 ELSE 1 END FROM kf', 3);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT id, f, CASE WHEN id = 13 THEN 1e300 ELSE 1 END FROM kf', 3);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT id, f, CASE WHEN id <> 13 THEN 1 END FROM kf', 3);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT id::text, f, CASE WHEN id <> 13 THEN 1 END FROM kf ORDER BY id', NULL::text, 3);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT id, f, ''1''::text FROM kf', 3);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT id, f, CASE WHEN id < 2 THEN 1 ELSE 0 END FROM kf', 3);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT id, f, w, w FROM kf', 3);
\echo :LAST_ERROR_SQLSTATE
-- NULL features: unclustered, whatever the weight
SELECT count(*) FILTER (WHERE cluster_id IS NULL) FROM gpu_kmeans(
    'SELECT id, CASE WHEN id <> 13 THEN f END, CASE WHEN id <> 13 THEN 1 END FROM kf', 3);
-- DBSCAN and affinity propagation take no weights
SELECT * FROM gpu_dbscan('SELECT id, f, w FROM kf', 1, 2);
\echo :LAST_ERROR_SQLSTATE

DROP TABLE kf, kf_fit, kf_centres;
