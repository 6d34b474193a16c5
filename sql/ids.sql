--
-- Ids of any type: the keyed forms gpu_dbscan(source, NULL::uuid, ...),
-- gpu_kmeans(source, NULL::text, ...), gpu_affinity_propagation(...)
-- carry the source's own ids back, with their type
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gpuclust;
RESET client_min_messages;
\set SHOW_CONTEXT errors

-- three blobs; each row has an integer, a text and a uuid key
CREATE TABLE i_docs AS
SELECT i AS n, 'doc-' || i AS name, md5(i::text)::uuid AS uid,
       ARRAY[(i % 3) * 10 + (i % 7) * 0.1, (i % 5) * 0.1]::real[] AS emb
FROM generate_series(1, 300) AS i;
CREATE DOMAIN i_uid AS uuid;

-- the results' id has the type of id_type, and joins back to the table
SELECT pg_typeof(id), count(*) FROM gpu_dbscan('SELECT uid, emb FROM i_docs', NULL::uuid, 1, 5) GROUP BY 1;
SELECT pg_typeof(id), count(*) FROM gpu_dbscan('SELECT name, emb FROM i_docs', NULL::text, eps => 1, min_pts => 5) GROUP BY 1;
SELECT d.id, d.cluster_id, d.is_core, i_docs.n
FROM gpu_dbscan('SELECT name, emb FROM i_docs ORDER BY n', NULL::text, 1, 5) d
JOIN i_docs ON i_docs.name = d.id
ORDER BY n LIMIT 4;

-- the same labels, in the same order, as with integer ids
SELECT count(*) AS rows,
       count(*) FILTER (WHERE k.cluster_id IS DISTINCT FROM n.cluster_id
                           OR k.is_core IS DISTINCT FROM n.is_core
                           OR k.ord <> n.ord) AS differ
FROM gpu_dbscan('SELECT uid, emb FROM i_docs ORDER BY n', NULL::uuid, 1, 5) WITH ORDINALITY k(id, cluster_id, is_core, ord)
JOIN i_docs ON i_docs.uid = k.id
JOIN gpu_dbscan('SELECT n, emb FROM i_docs ORDER BY n', 1, 5) WITH ORDINALITY n(id, cluster_id, is_core, ord)
  ON n.id = i_docs.n;
SELECT count(*) AS rows,
       count(*) FILTER (WHERE k.cluster_id <> n.cluster_id OR k.distance <> n.distance) AS differ
FROM gpu_kmeans('SELECT name, emb FROM i_docs ORDER BY n', NULL::text, 3, seed => 7) k
JOIN i_docs ON i_docs.name = k.id
JOIN gpu_kmeans('SELECT n, emb FROM i_docs ORDER BY n', 3, seed => 7) n ON n.id = i_docs.n;
SELECT count(*) AS rows,
       count(*) FILTER (WHERE k.cluster_id <> n.cluster_id OR k.is_exemplar <> n.is_exemplar) AS differ
FROM gpu_affinity_propagation('SELECT uid, emb FROM i_docs WHERE n <= 60 ORDER BY n', NULL::uuid, damping => 0.9) k
JOIN i_docs ON i_docs.uid = k.id
JOIN gpu_affinity_propagation('SELECT n, emb FROM i_docs WHERE n <= 60 ORDER BY n', damping => 0.9) n
  ON n.id = i_docs.n;

-- named: id_type right after source
SELECT count(*) FROM gpu_dbscan(source => 'SELECT uid, emb FROM i_docs', id_type => NULL::uuid, eps => 1, min_pts => 5);
-- bigint as id_type: the plain form's result
SELECT pg_typeof(id), sum(id) FROM gpu_dbscan('SELECT n::bigint, emb FROM i_docs', NULL::bigint, 1, 5) GROUP BY 1;
-- a domain over the type; a date; NULL features and noise
SELECT pg_typeof(id), count(*) FROM gpu_dbscan('SELECT uid::i_uid, emb FROM i_docs', NULL::uuid, 1, 5) GROUP BY 1;
SELECT * FROM gpu_dbscan($$SELECT d, CASE WHEN d = '2024-01-02' THEN NULL ELSE ARRAY[extract(day FROM d)] END
                           FROM (VALUES (date '2024-01-01'), ('2024-01-02'), ('2024-01-03'), ('2024-01-09')) v(d)$$,
                         NULL::date, 2, 2);
-- long keys (stored out of line) come back whole
CREATE TABLE i_long AS
SELECT string_agg(md5(i::text || j::text), '' ORDER BY j) AS k, ARRAY[i]::real[] AS f
FROM generate_series(1, 3) i, generate_series(1, 200) j GROUP BY i;
SELECT length(d.id), d.id = i_long.k AS same, cluster_id
FROM gpu_dbscan('SELECT k, f FROM i_long ORDER BY f', NULL::text, 1.5, 1) d
JOIN i_long ON i_long.k = d.id ORDER BY f;
-- an empty source; many rows
SELECT * FROM gpu_kmeans('SELECT name, emb FROM i_docs WHERE false', NULL::text, 2);
SELECT count(*), count(DISTINCT id) FROM gpu_dbscan($$SELECT 'k' || i, ARRAY[i % 100] FROM generate_series(1, 100000) i$$, NULL::text, 0.5, 3);
-- a model fit takes ids of any type (they are not used)
SELECT n, d FROM gpu_kmeans_fit('SELECT uid, emb FROM i_docs', 3);
-- the window form returns the cluster beside any key
SELECT name, gpu_dbscan(emb, 1, 5) OVER (ORDER BY n) AS cluster FROM i_docs ORDER BY n LIMIT 3;

-- errors
-- a key that is not an integer, without id_type: the hint shows the keyed form
SELECT * FROM gpu_dbscan('SELECT uid, emb FROM i_docs', 1, 5);
\echo :LAST_ERROR_SQLSTATE
-- id_type of another type than the column
SELECT * FROM gpu_dbscan('SELECT name, emb FROM i_docs', NULL::uuid, 1, 5);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans('SELECT n, emb FROM i_docs', NULL::text, 3);
\echo :LAST_ERROR_SQLSTATE
-- a NULL id
SELECT * FROM gpu_dbscan($$SELECT NULL::text, ARRAY[1.0]$$, NULL::text, 1, 1);
\echo :LAST_ERROR_SQLSTATE
-- a bad row is named by its position in the source, its id in the context
SELECT * FROM gpu_dbscan($$SELECT name, CASE WHEN n = 7 THEN '{1,2,3}' ELSE emb END FROM i_docs ORDER BY n$$, NULL::text, 1, 5);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_kmeans($$SELECT uid, CASE WHEN n = 9 THEN '{1,NaN}' ELSE emb END FROM i_docs ORDER BY n$$, NULL::uuid, 2);
\echo :LAST_ERROR_SQLSTATE
-- the other arguments are checked as in the plain form
SELECT * FROM gpu_dbscan('SELECT name, emb FROM i_docs', NULL::text, -1, 5);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_dbscan('SELECT name, emb FROM i_docs', NULL::text, 1, NULL);
\echo :LAST_ERROR_SQLSTATE

DROP TABLE i_docs, i_long;
DROP DOMAIN i_uid;
