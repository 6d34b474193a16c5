--
-- Every validation error, with its SQLSTATE
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gpuclust;
RESET client_min_messages;
\set SHOW_CONTEXT errors

-- arguments of gpu_kmeans
SELECT * FROM gpu_kmeans('SELECT 1, ARRAY[1.0]', 0);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT 1, ARRAY[1.0]', -5);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT i, ARRAY[i] FROM generate_series(1, 3) i', 4);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT i, CASE WHEN i > 1 THEN ARRAY[i] END FROM generate_series(1, 3) i', 3);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT 1, ARRAY[1.0]', 1, max_iter => 0);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT 1, ARRAY[1.0]', 1, n_init => 0);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT 1, ARRAY[1.0]', 1, tol => -1e-9);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT 1, ARRAY[1.0]', 1, tol => 'NaN');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT 1, ARRAY[1.0]', 1, tol => 'Infinity');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT 1, ARRAY[1.0]', 1, init => 'kmeans||');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT 1, ARRAY[1.0]', 1, device => 'tpu');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT 1, ARRAY[1.0]', 1, device => '');
\echo :LAST_ERROR_SQLSTATE

-- arguments of gpu_dbscan
SELECT * FROM gpu_dbscan('SELECT 1, ARRAY[1.0]', 0, 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_dbscan('SELECT 1, ARRAY[1.0]', -1, 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_dbscan('SELECT 1, ARRAY[1.0]', 'NaN', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_dbscan('SELECT 1, ARRAY[1.0]', 'Infinity', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_dbscan('SELECT 1, ARRAY[1.0]', 1, 0);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_dbscan('SELECT 1, ARRAY[1.0]', 1, 1, device => 'GPU0');
\echo :LAST_ERROR_SQLSTATE

-- NULL arguments are errors (only device may be NULL)
SELECT * FROM gpu_kmeans(NULL, 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT 1, ARRAY[1.0]', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT 1, ARRAY[1.0]', 1, max_iter => NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT 1, ARRAY[1.0]', 1, tol => NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT 1, ARRAY[1.0]', 1, init => NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT 1, ARRAY[1.0]', 1, n_init => NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT 1, ARRAY[1.0]', 1, seed => NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_dbscan(NULL, 1, 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_dbscan('SELECT 1, ARRAY[1.0]', NULL, 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_dbscan('SELECT 1, ARRAY[1.0]', 1, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM gpu_dbscan('SELECT 1, ARRAY[1.0]', 1, 1, NULL);

-- the source query itself
SELECT * FROM gpu_kmeans('SELEC 1, ARRAY[1.0]', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT 1, ARRAY[1.0] FROM no_such_table', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT 1, ARRAY[1.0]; SELECT 2, ARRAY[2.0]', 1);
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE err_t (id int, f real[]);
SELECT * FROM gpu_kmeans('INSERT INTO err_t VALUES (1, ARRAY[1.0])', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT 1/0, ARRAY[1.0]', 1);
\echo :LAST_ERROR_SQLSTATE

-- columns of the source
SELECT * FROM gpu_kmeans('SELECT 1', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT 1, ARRAY[1.0], 3, 4', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT 1.5 AS id, ARRAY[1.0]', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans($$SELECT 'a'::text AS id, ARRAY[1.0]$$, 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT 1, 2.0 AS features', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans($$SELECT 1, point '(1,2)' AS features$$, 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans($$SELECT 1, ARRAY['x'] AS features$$, 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_dbscan($$SELECT 1, '{1,two}'::text$$, 1, 1);
\echo :LAST_ERROR_SQLSTATE

-- rows of the source
SELECT * FROM gpu_kmeans('SELECT NULL::int, ARRAY[1.0]', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT i, ARRAY[i] FROM generate_series(1, 5) i UNION ALL SELECT NULL, ARRAY[1]', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT 11, ARRAY[[1.0, 2.0], [3.0, 4.0]]', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT 12, ARRAY[1.0, NULL, 3.0]', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans($$SELECT 13, '{}'::real[]$$, 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT 14, ARRAY[1.0, 2.0] UNION ALL SELECT 15, ARRAY[1.0, 2.0, 3.0]', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans($$SELECT 16, ARRAY[1.0, 'NaN']::real[]$$, 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans($$SELECT 17, ARRAY['Infinity', 1.0]::real[]$$, 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans($$SELECT 18, ARRAY[1.0, 2.0, '-Infinity']::float8[]$$, 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans($$SELECT 19, ARRAY['NaN']::float8[]$$, 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans($$SELECT 20, ARRAY[1.0, 1e39]::float8[]$$, 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans($$SELECT 21, ARRAY[-1e300]::float8[]$$, 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans($$SELECT 22, ARRAY[1e39]::numeric[]$$, 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_dbscan($$SELECT 23, ARRAY['NaN']::numeric[]$$, 1, 1);
\echo :LAST_ERROR_SQLSTATE

-- nothing is half-written: an error at row 1000 leaves no result rows
CREATE TABLE err_result (id bigint, cluster_id int, distance float8);
INSERT INTO err_result
SELECT * FROM gpu_kmeans($$SELECT i, CASE WHEN i = 1000 THEN ARRAY['NaN'::real] ELSE ARRAY[i::real] END
                           FROM generate_series(1, 2000) i$$, 2);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO err_result
SELECT * FROM gpu_kmeans($$SELECT i, ARRAY[1.0 / (1000 - i)] FROM generate_series(1, 2000) i$$, 2);
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM err_result;
-- a good call afterwards works
INSERT INTO err_result
SELECT * FROM gpu_kmeans('SELECT i, ARRAY[i] FROM generate_series(1, 2000) i', 2);
SELECT count(*) FROM err_result;

DROP TABLE err_t, err_result;
