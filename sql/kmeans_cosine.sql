--
-- k-means with metric => 'cosine': spherical k-means (unit rows, unit
-- centres, the cosine distance), in every form (on the CPU here; the GPU's
-- runs equal it: test/gpu/sql_gpu_test.sh)
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gpuclust;
RESET client_min_messages;
SET extra_float_digits = 0;
\set SHOW_CONTEXT errors

-- three directions (around x, y and z) at lengths 1 to 1000: Euclidean
-- k-means groups by length, spherical k-means by direction
CREATE TABLE kc AS
SELECT (c * 100 + j)::int AS id,
       ARRAY[(dx + 0.02 * (j % 3)) * len, (dy + 0.02 * (j / 3 % 3)) * len, dz * len]::real[] AS f,
       len
FROM (VALUES (0, 1.0, 0.05, 0.05), (1, 0.05, 1.0, 0.05), (2, 0.05, 0.05, 1.0)) AS c(c, dx, dy, dz),
     generate_series(0, 11) AS j,
     LATERAL (SELECT (ARRAY[1, 10, 100, 1000])[j % 4 + 1]::float8 AS len) l;

-- one cluster per direction, whatever the lengths
SELECT cluster_id, count(*), min(id), max(id), count(DISTINCT len) AS lengths
FROM gpu_kmeans('SELECT id, f FROM kc', 3, metric => 'cosine', seed => 1) JOIN kc USING (id)
GROUP BY 1 ORDER BY 1;
-- Euclidean k-means splits them by length instead
SELECT count(DISTINCT id / 100) AS directions_in_largest_cluster
FROM gpu_kmeans('SELECT id, f FROM kc', 3, seed => 1)
WHERE cluster_id = (SELECT mode() WITHIN GROUP (ORDER BY cluster_id)
                    FROM gpu_kmeans('SELECT id, f FROM kc', 3, seed => 1));
-- the metric's name is case-insensitive, as DBSCAN's
SELECT count(DISTINCT cluster_id) FROM gpu_kmeans('SELECT id, f FROM kc', 3, metric => 'Cosine');

-- k-means|| on the unit rows: one cluster per direction too
SELECT count(DISTINCT cluster_id) AS clusters, count(DISTINCT (cluster_id, id / 100)) AS pairs
FROM gpu_kmeans('SELECT id, f FROM kc', 3, metric => 'cosine', init => 'k-means||', seed => 2);

-- the model: unit centres; inertia the sum of the cosine distances
CREATE TABLE kc_fit AS
SELECT * FROM gpu_kmeans_fit('SELECT id, f FROM kc', 3, metric => 'cosine', seed => 1);
SELECT iterations, converged, n, d, round(inertia::numeric, 6) AS inertia FROM kc_fit;
SELECT c, round(sqrt(centroids[c][1] ^ 2 + centroids[c][2] ^ 2 + centroids[c][3] ^ 2)::numeric, 6) AS length
FROM kc_fit, generate_series(1, 3) AS c ORDER BY c;
-- distance = 1 - cos(row, its centre), within float rounding; the fit's
-- inertia is their sum
WITH j AS (
  SELECT k.distance, kc.f::float8[] AS x, m.centroids::float8[] AS c, k.cluster_id + 1 AS r, m.inertia
  FROM gpu_kmeans('SELECT id, f FROM kc', 3, metric => 'cosine', seed => 1) k
  JOIN kc USING (id), kc_fit m)
SELECT count(*) AS rows,
       max(abs(distance - (1 - (x[1] * c[r][1] + x[2] * c[r][2] + x[3] * c[r][3])
                               / sqrt(x[1] ^ 2 + x[2] ^ 2 + x[3] ^ 2)
                               / sqrt(c[r][1] ^ 2 + c[r][2] ^ 2 + c[r][3] ^ 2)))) < 1e-6 AS is_cosine_distance,
       abs(sum(distance) - min(inertia)) <= 1e-9 * min(inertia) AS inertia_is_sum
FROM j;
-- kmeans_assign scores with the model's metric: the fit's labels and distances
SELECT count(*) AS rows,
       count(*) FILTER (WHERE k.cluster_id <> kmeans_assign(kc.f, m.centroids, 'cosine')) AS labels_differ,
       count(*) FILTER (WHERE k.distance <> kmeans_assign_distance(kc.f, m.centroids, 'cosine')) AS distances_differ,
       count(*) FILTER (WHERE k.cluster_id <> kmeans_assign(kc.f::float8[], m.centroids, metric => 'cosine')) AS float8_differ
FROM gpu_kmeans('SELECT id, f FROM kc', 3, metric => 'cosine', seed => 1) k
JOIN kc USING (id), kc_fit m;
-- lengths do not matter: a row scaled by any factor keeps its cluster
SELECT count(*) FILTER (WHERE a.cluster_id <> b.cluster_id) AS differ
FROM gpu_kmeans('SELECT id, f FROM kc', 3, metric => 'cosine', seed => 1) a
JOIN gpu_kmeans('SELECT id, ARRAY[f[1] * 7, f[2] * 7, f[3] * 7]::real[] FROM kc', 3,
                metric => 'cosine', seed => 1) b USING (id);
SELECT kmeans_assign(ARRAY[0.5, 0.001, 0.001]::real[], '{{0,1,0},{1000,0,0}}', 'cosine') AS cosine,
       kmeans_assign(ARRAY[0.5, 0.001, 0.001]::real[], '{{0,1,0},{1000,0,0}}') AS euclidean,
       round(kmeans_assign_distance(ARRAY[1, 1, 0]::real[], '{{0,1,0},{1000,0,0}}', 'cosine')::numeric, 6) AS distance;

-- every form: window (same labels as the set-returning form), keyed, double precision
SELECT count(*) FILTER (WHERE w.c <> k.cluster_id) AS window_differs
FROM (SELECT id, gpu_kmeans(f, 3, metric => 'cosine', seed => 1) OVER (ORDER BY id) AS c FROM kc) w
JOIN gpu_kmeans('SELECT id, f FROM kc ORDER BY id', 3, metric => 'cosine', seed => 1) k USING (id);
SELECT count(*) FILTER (WHERE w.c <> k.cluster_id) AS float8_window_differs
FROM (SELECT id, gpu_kmeans(f::float8[], 3, metric => 'cosine', seed => 1) OVER (ORDER BY id) AS c FROM kc) w
JOIN gpu_kmeans('SELECT id, f::float8[] FROM kc ORDER BY id', 3, metric => 'cosine', seed => 1) k USING (id);
SELECT count(*) FILTER (WHERE k.cluster_id <> t.cluster_id::int) AS keyed_differs
FROM gpu_kmeans('SELECT id, f FROM kc ORDER BY id', 3, metric => 'cosine', seed => 1) k
JOIN gpu_kmeans('SELECT id::text, f FROM kc ORDER BY kc.id', NULL::text, 3, metric => 'cosine', seed => 1) t
  ON t.id = k.id::text;
-- with weights, given centroids (normalized first) and an init query
SELECT count(DISTINCT cluster_id) FROM gpu_kmeans('SELECT id, f, len FROM kc', 3, metric => 'cosine');
SELECT centroids FROM gpu_kmeans_fit('SELECT id, f FROM kc WHERE id % 100 = 0', 3, max_iter => 1,
                                     init_centroids => '{{0,0,0.5},{0,30,0},{500,0,0}}', metric => 'cosine');
SELECT cluster_id, min(id), max(id) FROM gpu_kmeans('SELECT id, f FROM kc', 3,
    init_centroids => '{{0,0,0.5},{0,30,0},{500,0,0}}', metric => 'cosine') GROUP BY 1 ORDER BY 1;
SELECT cluster_id, min(id), max(id) FROM gpu_kmeans('SELECT id, f FROM kc', 3,
    init => 'SELECT f FROM kc WHERE id IN (5, 105, 205) ORDER BY id DESC', metric => 'cosine') GROUP BY 1 ORDER BY 1;
SELECT count(DISTINCT cluster_id) FROM gpu_kmeans('SELECT id, f FROM kc', 3, init => 'random',
                                                 n_init => 3, metric => 'cosine');

-- the elbow takes the metric: each k's row is the cosine fit's
SELECT e.k, round(e.inertia::numeric, 6) = round(f.inertia::numeric, 6) AS same_as_fit
FROM gpu_kmeans_elbow('SELECT id, f FROM kc', 2, 4, seed => 3, metric => 'cosine') e,
     LATERAL gpu_kmeans_fit('SELECT id, f FROM kc', e.k, seed => 3, metric => 'cosine') f ORDER BY 1;

-- devices: cosine runs on every device (on the GPU test/gpu/sql_gpu_test.sh
-- checks the CPU's results); 'auto' runs this small input on the CPU
SELECT count(*) FROM gpu_kmeans('SELECT id, f FROM kc', 3, metric => 'cosine', device => 'auto');

-- errors: rows and centroids of all 0, other metrics
SELECT * FROM gpu_kmeans('SELECT id, CASE WHEN id = 105 THEN ''{0,0,0}''::real[] ELSE f END FROM kc', 3,
                         metric => 'cosine');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT id::text, CASE WHEN id = 105 THEN ''{0,0,0}''::real[] ELSE f END FROM kc ORDER BY id',
                         NULL::text, 3, metric => 'cosine');
\echo :LAST_ERROR_SQLSTATE
SELECT gpu_kmeans(CASE WHEN id = 105 THEN '{0,0,0}'::real[] ELSE f END, 3, metric => 'cosine') OVER (ORDER BY id)
FROM kc LIMIT 1;
\echo :LAST_ERROR_SQLSTATE
-- (a row of all 0 is fine under the Euclidean metric)
SELECT count(*) FROM gpu_kmeans('SELECT id, CASE WHEN id = 105 THEN ''{0,0,0}''::real[] ELSE f END FROM kc', 3);
SELECT * FROM gpu_kmeans('SELECT id, f FROM kc', 3, init_centroids => '{{1,0,0},{0,0,0},{0,0,1}}',
                         metric => 'cosine');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT id, f FROM kc', 3, metric => 'inner_product');
\echo :LAST_ERROR_SQLSTATE
SELECT centroids FROM gpu_kmeans_fit('SELECT id, f FROM kc', 3, metric => 'inner_product');
\echo :LAST_ERROR_SQLSTATE
SELECT gpu_kmeans(f, 3, metric => 'inner_product') OVER () FROM kc LIMIT 1;
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT id, f FROM kc', 3, metric => 'manhattan');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT id, f FROM kc', 3, metric => NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT kmeans_assign(f, centroids, 'inner_product') FROM kc, kc_fit LIMIT 1;
\echo :LAST_ERROR_SQLSTATE
SELECT kmeans_assign('{0,0,0}'::real[], centroids, 'cosine') FROM kc_fit;
\echo :LAST_ERROR_SQLSTATE
SELECT kmeans_assign('{1,2,3}'::real[], '{{1,0,0},{0,0,0}}', 'cosine');
\echo :LAST_ERROR_SQLSTATE
SELECT kmeans_assign('{1,2,3}'::real[], '{{1,0,0},{0,0,0}}');
SELECT kmeans_assign('{1,2,3}'::real[], '{{1,0,0},{0,1,0}}', 'dot');
\echo :LAST_ERROR_SQLSTATE

DROP TABLE kc, kc_fit;
