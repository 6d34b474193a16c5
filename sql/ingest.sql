--
-- What a source (or a features argument) may be: the range of a feature,
-- a source that only reads, and a table name given for a query.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gpuclust;
RESET client_min_messages;
\set SHOW_CONTEXT errors

--
-- The range of a feature: |v| <= 2^62/sqrt(d), so that no squared distance
-- overflows float32.  Larger values are refused at ingest (22003), in every
-- SQL form, with the row, the position and the limit.
--

-- DBSCAN on 0 and 3e38 with eps 2e19 (was: one cluster, both core)
SELECT * FROM gpu_dbscan($$SELECT * FROM (VALUES (1, '{0}'::real[]), (2, '{3e38}')) v$$, 2e19, 1);
\echo :LAST_ERROR_SQLSTATE
-- k-means on {-3e38, 3e38, 2.9e38} (was: -3e38 and 3e38 together)
SELECT * FROM gpu_kmeans($$SELECT * FROM (VALUES (1, '{-3e38}'::real[]), (2, '{3e38}'), (3, '{2.9e38}')) v$$, 2);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_affinity_propagation($$SELECT * FROM (VALUES (1, '{0, 1}'::real[]), (2, '{1, -2e18}'), (3, '{5e18, 0}')) v$$);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans_fit($$SELECT 1, '{1e30}'::real[]$$, 1);
\echo :LAST_ERROR_SQLSTATE
-- the limit depends on d: 4e18 is inside it in 1 dimension, outside in 2
SELECT * FROM gpu_dbscan($$SELECT 1, '{4e18}'::real[]$$, 1, 1);
SELECT * FROM gpu_dbscan($$SELECT 1, '{4e18, 0}'::real[]$$, 1, 1);
\echo :LAST_ERROR_SQLSTATE
-- double precision[]: beyond real is its own error, beyond the limit this one
SELECT * FROM gpu_dbscan($$SELECT 1, '{1, 1e300}'::float8[]$$, 1, 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_dbscan($$SELECT 1, '{1, 1e30}'::float8[]$$, 1, 1);
\echo :LAST_ERROR_SQLSTATE
-- through a cast to real[]
SELECT * FROM gpu_dbscan($$SELECT 1, '{-1e20}'::numeric[]$$, 1, 1);
\echo :LAST_ERROR_SQLSTATE
-- window functions name the partition row
SELECT id, gpu_dbscan(f, 1, 1) OVER () FROM (VALUES (1, '{0}'::real[]), (2, '{-3e38}')) v(id, f);
\echo :LAST_ERROR_SQLSTATE
SELECT id, gpu_kmeans(f, 1) OVER () FROM (VALUES (1, '{0}'::float8[]), (2, '{1e19}')) v(id, f);
\echo :LAST_ERROR_SQLSTATE
-- kmeans_assign: the features and the centroids alike (was: the centroid at
-- distance 8.49e38 chosen over the one at 6e38)
SELECT kmeans_assign('{3e38, 0}'::real[], '{{-3e38, 0}, {-3e38, -3e38}}');
\echo :LAST_ERROR_SQLSTATE
SELECT kmeans_assign('{1, 0}'::real[], '{{-3e38, 0}, {-3e38, -3e38}}');
\echo :LAST_ERROR_SQLSTATE
SELECT kmeans_assign_distance('{1, 0}'::real[], '{{0, 0}, {0, 5e18}}');
\echo :LAST_ERROR_SQLSTATE

-- values at the limit work, and are clustered right: 2^62 in 1 dimension
SELECT * FROM gpu_dbscan($$SELECT * FROM (VALUES (1, '{0}'::real[]), (2, '{4611686018427387904}'),
                                                  (3, '{-4611686018427387904}')) v$$, 1e19, 2);
-- the next float above it is refused
SELECT * FROM gpu_dbscan($$SELECT 1, ARRAY[2^62 * (1 + 2^(-23))]::real[]$$, 1, 1);
\echo :LAST_ERROR_SQLSTATE
-- eps2 overflows float (eps > 1.8e19): every pair is within eps
SELECT * FROM gpu_dbscan($$SELECT * FROM (VALUES (1, '{-4.6e18}'::real[]), (2, '{4.6e18}')) v$$, 1e20, 2);
-- k-means near the limit in 2 dimensions (2^62/sqrt(2) = 3.26e18)
SELECT id, cluster_id FROM gpu_kmeans($$SELECT * FROM (VALUES (1, '{-3.2e18, 0}'::real[]), (2, '{3.2e18, 0}'),
                                                                 (3, '{3.1e18, 0}')) v$$, 2, seed => 1)
ORDER BY id;
SELECT id, cluster_id FROM gpu_kmeans($$SELECT * FROM (VALUES (1, '{-3.2e18, 0}'::real[]), (2, '{3.2e18, 0}'),
                                                                 (3, '{3.1e18, 0}')) v$$, 2, seed => 1, device => 'cpu')
ORDER BY id;
-- kmeans_assign near the limit: the nearer centroid
SELECT kmeans_assign('{3.2e18, 3.2e18}'::real[], '{{-3.2e18, -3.2e18}, {0, 0}}');
SELECT round((kmeans_assign_distance('{3.2e18, 3.2e18}'::real[], '{{-3.2e18, -3.2e18}, {0, 0}}') / 1e18)::numeric, 4);

--
-- The source only reads: a statement that writes, locks rows, or is a
-- utility statement is refused before it runs (25006), and the table is
-- unchanged afterwards.
--
CREATE TABLE ro (id int, pos real[]);
INSERT INTO ro SELECT i, ARRAY[i, 0] FROM generate_series(1, 20) i;
SELECT * FROM gpu_dbscan('DELETE FROM ro RETURNING id, pos', 1.5, 2);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_dbscan('INSERT INTO ro VALUES (100, ARRAY[1, 1]) RETURNING id, pos', 1.5, 2);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('UPDATE ro SET pos = ARRAY[0, 0] RETURNING id, pos', 2);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('INSERT INTO ro VALUES (101, ARRAY[1, 1])', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_dbscan('WITH d AS (DELETE FROM ro RETURNING id, pos) SELECT * FROM d', 1.5, 2);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_dbscan('WITH d AS (INSERT INTO ro VALUES (102, ARRAY[1, 1]) RETURNING id) SELECT id, pos FROM ro', 1.5, 2);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_affinity_propagation('WITH u AS (UPDATE ro SET id = id RETURNING id, pos) SELECT * FROM u');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans_fit('DELETE FROM ro RETURNING id, pos', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_dbscan('SELECT id, pos FROM ro FOR UPDATE', 1.5, 2);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_dbscan('SELECT id, pos FROM ro FOR SHARE', 1.5, 2);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_dbscan('SELECT id, pos FROM (SELECT * FROM ro FOR NO KEY UPDATE) s', 1.5, 2);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_dbscan('EXPLAIN ANALYZE DELETE FROM ro', 1.5, 2);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_dbscan('TRUNCATE ro', 1.5, 2);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_dbscan('SELECT id, pos INTO ro_copy FROM ro', 1.5, 2);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_dbscan('SELECT id, pos FROM ro; DELETE FROM ro', 1.5, 2);
\echo :LAST_ERROR_SQLSTATE
-- a function called by the source cannot write either
CREATE FUNCTION ro_delete() RETURNS int LANGUAGE plpgsql AS $$ BEGIN DELETE FROM ro; RETURN 1; END $$;
SELECT * FROM gpu_dbscan('SELECT ro_delete(), ARRAY[1.0]', 1.5, 2);
\echo :LAST_ERROR_SQLSTATE
CREATE SEQUENCE ro_seq;
SELECT * FROM gpu_dbscan($$SELECT nextval('ro_seq'), ARRAY[1.0]$$, 1.5, 2);
\echo :LAST_ERROR_SQLSTATE
-- nothing changed, and the session is still read-write
SELECT count(*), sum(id), min(pos[1]), max(pos[1]) FROM ro;
SELECT to_regclass('ro_copy') IS NULL AS no_copy;
SHOW transaction_read_only;
-- a reading source works, inside a transaction that then writes
BEGIN;
SELECT count(*), count(cluster_id) FROM gpu_dbscan('SELECT id, pos FROM ro', 1.5, 2);
INSERT INTO ro VALUES (21, ARRAY[21, 0]);
SELECT count(*) FROM gpu_dbscan('SELECT id, pos FROM ro', 1.5, 2);
ROLLBACK;
-- a caught error inside a PL/pgSQL block leaves the session read-write
DO $$
BEGIN
  PERFORM * FROM gpu_dbscan('SELECT ro_delete(), ARRAY[1.0]', 1.5, 2);
EXCEPTION WHEN read_only_sql_transaction THEN
  RAISE NOTICE 'refused: %', SQLERRM;
END $$;
SHOW transaction_read_only;
INSERT INTO ro VALUES (22, ARRAY[22, 0]);
SELECT count(*) FROM ro;

--
-- A table name given for a query: the syntax error gets a hint
--
SELECT * FROM gpu_dbscan('ro', 1.5, 2);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans(' public.ro; ', 2);
\echo :LAST_ERROR_SQLSTATE
-- other syntax errors do not
SELECT * FROM gpu_kmeans('SELEC id, pos FROM ro', 2);
\echo :LAST_ERROR_SQLSTATE

--
-- How the rows are read: inline, short (1-byte header), compressed and
-- out-of-line features, NULL features, and double precision[], all give
-- the same labels
--
CREATE TABLE rd (id int, f real[], g float8[], h real[]);
ALTER TABLE rd ALTER COLUMN g SET STORAGE EXTERNAL;
INSERT INTO rd
SELECT i, ARRAY[i % 7, i % 5]::real[],
       array_fill((i % 7)::float8, ARRAY[300]) || array_fill((i % 5)::float8, ARRAY[300]),
       array_fill((i % 7)::real, ARRAY[500]) || array_fill((i % 5)::real, ARRAY[500])
FROM generate_series(1, 200) i;
UPDATE rd SET f = NULL, g = NULL, h = NULL WHERE id % 10 = 0;
-- f: short (1-byte header), g: out of line, h: compressed inline
SELECT count(*) FILTER (WHERE pg_column_size(f) < 127) AS short_f,
       count(*) FILTER (WHERE pg_column_size(g) > 4000) AS external_g,
       count(*) FILTER (WHERE pg_column_size(h) < 1000) AS compressed_h FROM rd;
-- the same points, scaled by sqrt(300) and sqrt(500): the same labels
SELECT count(*), count(cluster_id), count(DISTINCT cluster_id) FROM gpu_dbscan('SELECT id, f FROM rd', 1.5, 3);
SELECT (SELECT array_agg(cluster_id ORDER BY id) FROM gpu_dbscan('SELECT id, f FROM rd', 1.5, 3))
     = (SELECT array_agg(cluster_id ORDER BY id) FROM gpu_dbscan('SELECT id, g FROM rd', 1.5 * sqrt(300), 3)) AS same_external,
       (SELECT array_agg(cluster_id ORDER BY id) FROM gpu_dbscan('SELECT id, f FROM rd', 1.5, 3))
     = (SELECT array_agg(cluster_id ORDER BY id) FROM gpu_dbscan('SELECT id, h FROM rd', 1.5 * sqrt(500), 3)) AS same_compressed,
       (SELECT array_agg(cluster_id ORDER BY id) FROM gpu_kmeans('SELECT id, f FROM rd', 3, seed => 7))
     = (SELECT array_agg(cluster_id ORDER BY id) FROM gpu_kmeans('SELECT id, f::float8[] FROM rd', 3, seed => 7)) AS same_float8,
       (SELECT array_agg(cluster_id ORDER BY id) FROM gpu_kmeans('SELECT id, f FROM rd', 3, seed => 7))
     = (SELECT array_agg(cluster_id ORDER BY id) FROM gpu_kmeans('SELECT id, f::numeric[] FROM rd', 3, seed => 7)) AS same_cast;

DROP TABLE ro, rd;
DROP FUNCTION ro_delete();
DROP SEQUENCE ro_seq;
