--
-- Choosing eps and k, and reading clusters: gpu_kdistance, gpu_silhouette,
-- gpu_cluster_scores, gpu_cluster_centers, gpu_kmeans_elbow, and their
-- errors.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gpuclust;
RESET client_min_messages;

-- a 10 x 10 grid of unit spacing, and two blobs with noise
CREATE TABLE tool_grid AS
SELECT i AS id, ARRAY[(i % 10)::real, (i / 10)::real] AS f
FROM generate_series(0, 99) AS i;
SELECT setseed(0.5);
CREATE TABLE tool_blobs AS
SELECT i AS id,
       CASE WHEN i <= 150 THEN ARRAY[random()::real, random()::real]
            WHEN i <= 300 THEN ARRAY[(5 + random())::real, (5 + random())::real]
            ELSE ARRAY[(10 * random())::real, (10 * random())::real] END AS f
FROM generate_series(1, 320) AS i;

-- The GPU: tool_gpu(q) runs q (a query with {device} for the device) with
-- device 'gpu' and 'cpu' and says 'ok' when, with a usable GPU, both give
-- the same rows (every float bit for bit: float8's text is exact) or the
-- same error, and without one, 'gpu' fails with 0A000 and a reason (or
-- returns no rows when the source has none); else what differs.  gpu
-- (default 'gpu') is the device expression of the GPU run: NULL uses
-- gpuclust.device.
CREATE FUNCTION tool_outcome(q text) RETURNS text LANGUAGE plpgsql AS $f$
DECLARE
  outcome text;
  detail text;
BEGIN
  EXECUTE 'SELECT count(*) || '' rows, md5 '' || md5(coalesce(string_agg(r::text, '';'' ORDER BY r::text), ''''))
           FROM (' || q || ') r' INTO outcome;
  RETURN outcome;
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
  RETURN SQLSTATE || ' ' || SQLERRM || coalesce(': ' || nullif(detail, ''), '');
END $f$;
CREATE FUNCTION tool_gpu(q text, gpu text DEFAULT $$'gpu'$$) RETURNS text LANGUAGE plpgsql AS $f$
DECLARE
  usable boolean := (SELECT value::boolean FROM gpuclust_info() WHERE key = 'gpu_usable');
  on_gpu text := tool_outcome(replace(q, '{device}', gpu));
  on_cpu text := tool_outcome(replace(q, '{device}', $$'cpu'$$));
BEGIN
  -- (an empty source returns no rows without asking for a device)
  IF on_gpu = on_cpu AND (usable OR on_gpu LIKE '0 rows,%') THEN
    RETURN 'ok';
  ELSIF NOT usable AND on_gpu ~ '^0A000 cannot run .* on the GPU: .' THEN
    RETURN 'ok';
  END IF;
  RETURN 'gpu: ' || on_gpu || ' | cpu: ' || on_cpu || CASE WHEN usable THEN '' ELSE ' | no usable GPU' END;
END $f$;

-- k-distance: k = 1 is the row itself
SELECT count(*), max(kdistance) FROM gpu_kdistance('SELECT id, f FROM tool_grid', 1);
-- k = 2: every grid point has a neighbour at 1; k = 4: corners need sqrt(2)
SELECT count(*), min(kdistance), max(kdistance) FROM gpu_kdistance('SELECT id, f FROM tool_grid', 2);
SELECT kdistance, count(*) FROM gpu_kdistance('SELECT id, f FROM tool_grid', 4) GROUP BY 1 ORDER BY 1;
-- ranks ascend with the distances; one knee
SELECT bool_and(kdistance >= lag) AS sorted, count(*) FILTER (WHERE is_knee) AS knees,
       min(rank), max(rank), min(fraction), max(fraction)
FROM (SELECT *, lag(kdistance, 1, 0.0) OVER (ORDER BY rank) AS lag
      FROM gpu_kdistance('SELECT id, f FROM tool_blobs', 5)) s;
-- quantiles: the ranks 1 + round(i (n - 1) / q), and the knee's row
SELECT * FROM gpu_kdistance('SELECT id, f FROM tool_grid', 4, quantiles => 4);
SELECT rank, fraction, is_knee FROM gpu_kdistance('SELECT id, f FROM tool_blobs', 5, quantiles => 1);
SELECT count(*) FROM gpu_kdistance('SELECT id, f FROM tool_grid', 3, quantiles => 1000);
-- the knee suggests eps; a row is core at (eps, min_pts = k) exactly when
-- its k-distance is at most eps
SELECT (SELECT count(*) FILTER (WHERE is_core)
        FROM gpu_dbscan('SELECT id, f FROM tool_blobs', e.kdistance, 5))
     = (SELECT count(*) FROM gpu_kdistance('SELECT id, f FROM tool_blobs', 5)
        WHERE kdistance <= e.kdistance) AS core_iff_kdistance_le_eps
FROM gpu_kdistance('SELECT id, f FROM tool_blobs', 5) e WHERE e.rank IN (1, 100, 250, 300, 320);
-- empty source, NULL features left out
SELECT * FROM gpu_kdistance('SELECT 1, ARRAY[1]::real[] WHERE false', 3);
SELECT rank, kdistance FROM gpu_kdistance('SELECT i, CASE WHEN i = 2 THEN NULL ELSE ARRAY[i]::real[] END FROM generate_series(1, 4) i', 2);
-- errors
SELECT * FROM gpu_kdistance('SELECT id, f FROM tool_grid', 0);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kdistance('SELECT id, f FROM tool_grid', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kdistance('SELECT id, f FROM tool_grid', 101);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kdistance('SELECT id, f FROM tool_grid', 3, quantiles => 0);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kdistance('DELETE FROM tool_grid RETURNING id, f', 3);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kdistance('SELECT id, ARRAY[''NaN''::real] FROM tool_grid', 3);
\echo :LAST_ERROR_SQLSTATE
-- the device: 'gpu' (argument, or gpuclust.device when NULL) gives the
-- CPU's k-distances bit for bit where a GPU is usable, else fails with the
-- reason once the source is read; 'cpu' and 'auto' run
SELECT count(*) FROM gpu_kdistance('SELECT id, f FROM tool_grid', 2, device => 'cpu');
SELECT count(*) FROM gpu_kdistance('SELECT id, f FROM tool_grid', 2, device => 'auto');
SELECT k, tool_gpu(replace($$SELECT * FROM gpu_kdistance('SELECT id, f FROM tool_blobs', {k}, device => {device})$$, '{k}', k::text)) AS gpu_kdistance
FROM unnest(ARRAY[1, 2, 5, 50, 320]) k;
SELECT tool_gpu($$SELECT * FROM gpu_kdistance('SELECT id, f FROM tool_grid', 4, quantiles => 4, device => {device})$$) AS quantiles,
       tool_gpu($$SELECT * FROM gpu_kdistance('SELECT i, ARRAY[i % 3, 0]::real[] FROM generate_series(1, 90) i', 40, device => {device})$$) AS duplicates,
       tool_gpu($$SELECT * FROM gpu_kdistance('SELECT 1, ARRAY[1]::real[] WHERE false', 3, device => {device})$$) AS empty;
-- the source is read first: its errors come before the device's
SELECT * FROM gpu_kdistance('SELECT 1/0, ARRAY[1]::real[]', 1, device => 'gpu');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kdistance('SELECT id, f FROM tool_grid', 2, device => 'tpu');
\echo :LAST_ERROR_SQLSTATE
SET gpuclust.device = 'gpu';
SELECT tool_gpu($$SELECT * FROM gpu_kdistance('SELECT id, f FROM tool_grid', 2, device => {device})$$, 'NULL') AS setting_gpu;
SELECT count(*) FROM gpu_kdistance('SELECT id, f FROM tool_grid', 2, device => 'cpu');
RESET gpuclust.device;

-- silhouette: two halves of the grid
SELECT round(silhouette::numeric, 12), n, clusters, sampled
FROM gpu_silhouette('SELECT id, f FROM tool_grid', 'SELECT id, (id % 10) / 5 FROM tool_grid');
-- DBSCAN's labelling, noise (NULL) left out; labels of any integer type
SELECT round(silhouette::numeric, 12) > 0.7 AS good, n, clusters, sampled
FROM gpu_silhouette('SELECT id, f FROM tool_blobs',
                    'SELECT id, cluster_id FROM gpu_dbscan(''SELECT id, f FROM tool_blobs'', 0.3, 5)');
SELECT n, clusters FROM gpu_silhouette('SELECT id, f FROM tool_grid',
                                       'SELECT id::smallint, ((id % 10) / 5)::bigint FROM tool_grid WHERE id < 50');
-- sampled: sample_size rows, reproducible by seed; a sample as large as the rows is exact
SELECT a.n, a.sampled, a.silhouette = b.silhouette AS same_seed_same_score
FROM gpu_silhouette('SELECT id, f FROM tool_grid', 'SELECT id, (id % 10) / 5 FROM tool_grid', sample_size => 40, seed => 7) a,
     gpu_silhouette('SELECT id, f FROM tool_grid', 'SELECT id, (id % 10) / 5 FROM tool_grid', sample_size => 40, seed => 7) b;
SELECT n, sampled FROM gpu_silhouette('SELECT id, f FROM tool_grid', 'SELECT id, (id % 10) / 5 FROM tool_grid', sample_size => 100);
-- errors
SELECT * FROM gpu_silhouette('SELECT id, f FROM tool_grid', 'SELECT id, 0 FROM tool_grid');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_silhouette('SELECT id, f FROM tool_grid', 'SELECT id, id FROM tool_grid');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_silhouette('SELECT id, f FROM tool_grid', 'SELECT id, id % 2 FROM tool_grid', sample_size => 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_silhouette('SELECT id, f FROM tool_grid', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_silhouette('SELECT id, f FROM tool_grid', 'SELECT id FROM tool_grid');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_silhouette('SELECT id, f FROM tool_grid', 'SELECT id, ''a''::text FROM tool_grid');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_silhouette('SELECT id, f FROM tool_grid', 'SELECT id + 1000, id % 2 FROM tool_grid');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_silhouette('SELECT id, f FROM tool_grid', 'SELECT 5, 1 UNION ALL SELECT 5, 0');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_silhouette('SELECT id, f FROM tool_grid', 'SELECT NULL::int, 1');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_silhouette('SELECT 1, ARRAY[1]::real[] UNION ALL SELECT 1, ARRAY[2]::real[]', 'SELECT 1, 1');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_silhouette('SELECT id, f FROM tool_grid', 'DELETE FROM tool_grid RETURNING id, 1');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_silhouette('SELECT id, f FROM tool_grid', 'SELECT id, 1 FROM tool_grid FOR UPDATE');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_silhouette('SELECT id, f FROM tool_grid', 'SELECT id, 1 FROM tool_grid; SELECT 1, 2');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_silhouette('SELECT id, f FROM tool_grid', 'SELEC id, 1');
\echo :LAST_ERROR_SQLSTATE
-- the device: 'gpu' gives the CPU's score, rows, clusters and sample bit
-- for bit where a GPU is usable (and its errors), else fails with the
-- reason; 'cpu' and 'auto' run
SELECT n, clusters FROM gpu_silhouette('SELECT id, f FROM tool_grid', 'SELECT id, (id % 10) / 5 FROM tool_grid', device => 'cpu');
SELECT n, clusters FROM gpu_silhouette('SELECT id, f FROM tool_grid', 'SELECT id, (id % 10) / 5 FROM tool_grid', device => 'auto');
SELECT tool_gpu($$SELECT * FROM gpu_silhouette('SELECT id, f FROM tool_grid', 'SELECT id, (id % 10) / 5 FROM tool_grid', device => {device})$$) AS halves,
       tool_gpu($$SELECT * FROM gpu_silhouette('SELECT id, f FROM tool_blobs',
                  'SELECT id, cluster_id FROM gpu_dbscan(''SELECT id, f FROM tool_blobs'', 0.3, 5)', device => {device})$$) AS dbscan_noise,
       tool_gpu($$SELECT * FROM gpu_silhouette('SELECT id, f FROM tool_blobs',
                  'SELECT id, cluster_id FROM gpu_kmeans(''SELECT id, f FROM tool_blobs'', 4, seed => 1)', sample_size => 100, seed => 3, device => {device})$$) AS kmeans_sampled,
       tool_gpu($$SELECT * FROM gpu_silhouette('SELECT id, f FROM tool_grid', 'SELECT id, id % 3 FROM tool_grid WHERE id < 4', device => {device})$$) AS a_singleton,
       tool_gpu($$SELECT * FROM gpu_silhouette('SELECT id, f FROM tool_grid', 'SELECT id, 0 FROM tool_grid', device => {device})$$) AS one_cluster;
SELECT * FROM gpu_silhouette('SELECT 1/0, ARRAY[1]::real[]', 'SELECT 1, 1', device => 'gpu');
\echo :LAST_ERROR_SQLSTATE
-- scores: the silhouette beside the Davies-Bouldin and Calinski-Harabasz
-- indices and the inertia.  The halves of the grid by hand: inertia 1025
-- (each half 100 in x, 412.5 in y), Calinski-Harabasz 625 * 98 / 1025
SELECT round(silhouette::numeric, 12) AS silhouette, round(davies_bouldin::numeric, 12) AS davies_bouldin,
       round(calinski_harabasz::numeric, 12) AS calinski_harabasz,
       round(625 * 98 / 1025.0, 12) AS by_hand, inertia, n, clusters, sampled
FROM gpu_cluster_scores('SELECT id, f FROM tool_grid', 'SELECT id, (id % 10) / 5 FROM tool_grid');
-- its silhouette is gpu_silhouette's (noise left out; sampled alike), its
-- inertia the squared distances to the clusters' means summed in SQL
SELECT s.silhouette = g.silhouette AS same_silhouette, s.n = g.n AS same_n, s.sampled,
       abs(s.inertia - i.inertia) <= 1e-9 * i.inertia AS inertia_as_sql, s.davies_bouldin > 0 AS db_positive
FROM gpu_cluster_scores('SELECT id, f FROM tool_blobs',
       'SELECT id, cluster_id FROM gpu_dbscan(''SELECT id, f FROM tool_blobs'', 0.3, 5)') s,
     gpu_silhouette('SELECT id, f FROM tool_blobs',
       'SELECT id, cluster_id FROM gpu_dbscan(''SELECT id, f FROM tool_blobs'', 0.3, 5)') g,
     (SELECT sum((b.f[1] - c.centroid[1]) ^ 2 + (b.f[2] - c.centroid[2]) ^ 2) AS inertia
      FROM tool_blobs b
      JOIN gpu_dbscan('SELECT id, f FROM tool_blobs', 0.3, 5) l USING (id)
      JOIN gpu_cluster_centers('SELECT id, f FROM tool_blobs',
             'SELECT id, cluster_id FROM gpu_dbscan(''SELECT id, f FROM tool_blobs'', 0.3, 5)') c
        ON c.cluster_id = l.cluster_id) i;
SELECT s.silhouette = g.silhouette AS same_sampled_silhouette, s.n AS labelled, g.n AS scored, s.sampled
FROM gpu_cluster_scores('SELECT id, f FROM tool_blobs', 'SELECT id, id % 4 FROM tool_blobs', sample_size => 100, seed => 3) s,
     gpu_silhouette('SELECT id, f FROM tool_blobs', 'SELECT id, id % 4 FROM tool_blobs', sample_size => 100, seed => 3) g;
-- every row where its cluster's mean is: every index but the silhouette's
-- defined (Davies-Bouldin 0, Calinski-Harabasz 1, inertia 0)
SELECT silhouette, davies_bouldin, calinski_harabasz, inertia, n, clusters
FROM gpu_cluster_scores('SELECT id, ARRAY[(id % 2)::real] FROM tool_grid', 'SELECT id, id % 2 FROM tool_grid');
-- errors: as the silhouette's, for the labelled rows
SELECT * FROM gpu_cluster_scores('SELECT id, f FROM tool_grid', 'SELECT id, 0 FROM tool_grid');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_cluster_scores('SELECT id, f FROM tool_grid', 'SELECT id, id FROM tool_grid');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_cluster_scores('SELECT id, f FROM tool_grid', 'SELECT id + 1000, id % 2 FROM tool_grid');
\echo :LAST_ERROR_SQLSTATE
SELECT tool_gpu($$SELECT * FROM gpu_cluster_scores('SELECT id, f FROM tool_blobs',
                  'SELECT id, cluster_id FROM gpu_kmeans(''SELECT id, f FROM tool_blobs'', 4, seed => 1)', device => {device})$$) AS scores;

SET gpuclust.device = 'gpu';
SELECT tool_gpu($$SELECT * FROM gpu_silhouette('SELECT id, f FROM tool_grid', 'SELECT id, (id % 10) / 5 FROM tool_grid', device => {device})$$, 'NULL') AS setting_gpu;
RESET gpuclust.device;
-- labels of a domain over an integer type
CREATE DOMAIN tool_label AS int CHECK (VALUE >= 0);
SELECT n, clusters FROM gpu_silhouette('SELECT id, f FROM tool_grid', 'SELECT id, ((id % 10) / 5)::tool_label FROM tool_grid');
DROP DOMAIN tool_label;

-- cluster summaries: centroid, size, radius of each label, noise left out
SELECT * FROM gpu_cluster_centers('SELECT id, f FROM tool_grid', 'SELECT id, (id % 10) / 5 FROM tool_grid');
SELECT cluster_id, size, round(centroid[1]::numeric, 1) AS x, round(centroid[2]::numeric, 1) AS y,
       radius < 1 AS compact, mean_distance <= radius AS mean_le_radius
FROM gpu_cluster_centers('SELECT id, f FROM tool_blobs',
                         'SELECT id, cluster_id FROM gpu_dbscan(''SELECT id, f FROM tool_blobs'', 0.3, 5)');
-- the same as the SQL it stands for
SELECT bool_and(c.size = s.size AND abs(c.centroid[1] - s.x) < 1e-9 AND abs(c.centroid[2] - s.y) < 1e-9) AS same
FROM gpu_cluster_centers('SELECT id, f FROM tool_blobs', 'SELECT id, (id > 150)::int FROM tool_blobs') c
JOIN (SELECT (id > 150)::int AS cluster_id, count(*) AS size, avg(f[1]::float8) AS x, avg(f[2]::float8) AS y
      FROM tool_blobs GROUP BY 1) s USING (cluster_id);
-- user labels of any values, missing ones are noise; no labels, no rows
SELECT cluster_id, size, centroid FROM gpu_cluster_centers('SELECT id, f FROM tool_grid', 'SELECT id, -7 FROM tool_grid WHERE id < 3');
SELECT * FROM gpu_cluster_centers('SELECT id, f FROM tool_grid', 'SELECT id, NULL::int FROM tool_grid');
SELECT * FROM gpu_cluster_centers('SELECT id, f FROM tool_grid', 'SELECT id + 1000, 1 FROM tool_grid');
\echo :LAST_ERROR_SQLSTATE

-- the elbow: one ingest, gpu_kmeans_fit's inertia for each k
SELECT e.k, e.inertia = f.inertia AS same_as_fit, e.iterations = f.iterations AS same_iterations
FROM gpu_kmeans_elbow('SELECT id, f FROM tool_blobs', 1, 5, seed => 3) e,
     LATERAL gpu_kmeans_fit('SELECT id, f FROM tool_blobs', e.k, seed => 3) f
ORDER BY e.k;
SELECT k, inertia FROM gpu_kmeans_elbow('SELECT id, f FROM tool_grid', 1, 2);
SELECT * FROM gpu_kmeans_elbow('SELECT 1, ARRAY[1]::real[] WHERE false', 1, 3);
-- errors
SELECT * FROM gpu_kmeans_elbow('SELECT id, f FROM tool_grid', 0, 3);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans_elbow('SELECT id, f FROM tool_grid', 4, 3);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans_elbow('SELECT id, f FROM tool_grid', 2, 101);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans_elbow('SELECT id, f FROM tool_grid', 1, 3, init => 'nope');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans_elbow('SELECT id, f FROM tool_grid', 1, NULL);
\echo :LAST_ERROR_SQLSTATE

-- cancel: statement_timeout stops the O(n^2) silhouette and a large
-- k-distance on the CPU (the GPU's: test/gpu/sql_gpu_test.sh)
SELECT setseed(0.25);
CREATE TABLE tool_big AS
SELECT i AS id, ARRAY(SELECT random()::real FROM generate_series(1, 16) WHERE i > 0) AS f
FROM generate_series(1, 100000) AS i;
SET statement_timeout = '1s';
SELECT * FROM gpu_silhouette('SELECT id, f FROM tool_big', 'SELECT id, id % 7 FROM tool_big', sample_size => 100000, device => 'cpu');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM gpu_kdistance('SELECT id, f FROM tool_big', 20000, device => 'cpu');
\echo :LAST_ERROR_SQLSTATE
RESET statement_timeout;
SELECT count(*) FROM gpu_kdistance('SELECT id, f FROM tool_grid', 2);

DROP TABLE tool_grid, tool_blobs, tool_big;
DROP FUNCTION tool_gpu(text, text), tool_outcome(text);
