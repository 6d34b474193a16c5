--
-- gpu_affinity_propagation: results, numbering, NULL rows, degenerate and
-- non-converging inputs, the memory limit, cancellation, every error
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gpuclust;
RESET client_min_messages;
\set SHOW_CONTEXT errors

-- two groups of four points in 2-D and a row without features; the default
-- preference is the median of the similarities.  The exemplars are 1 and 2,
-- and clusters are numbered by their exemplar's input position.  (All
-- results here are scikit-learn's, AffinityPropagation(random_state=0).)
CREATE TABLE ap_pts (id int, x real, y real);
INSERT INTO ap_pts VALUES
  (1, 0, 0), (2, 5, 5), (3, 0.1, 0), (4, 5.2, 5), (5, 0, 0.2),
  (6, 5, 4.9), (7, -0.1, -0.1), (8, 4.8, 5.1), (9, NULL, NULL);
SELECT r.id, p.x, p.y, r.cluster_id, r.is_exemplar
FROM gpu_affinity_propagation(
       'SELECT id, CASE WHEN x IS NOT NULL THEN ARRAY[x, y] END FROM ap_pts ORDER BY id') r
JOIN ap_pts p USING (id);

-- the input order decides the numbering: reversed, the 5-group comes first
SELECT id, cluster_id, is_exemplar
FROM gpu_affinity_propagation('SELECT id, ARRAY[x, y] FROM ap_pts WHERE x IS NOT NULL ORDER BY id DESC');

-- damping, an explicit preference, the device by name, float8[] and
-- numeric[] features, bigint ids
SELECT id, cluster_id, is_exemplar
FROM gpu_affinity_propagation('SELECT id::bigint * 10000000000, ARRAY[x, y]::float8[] FROM ap_pts WHERE x IS NOT NULL ORDER BY id',
                              damping => 0.9, preference => -1, device => 'cpu');
-- a preference near 0 makes (almost) every row its own exemplar
SELECT count(DISTINCT cluster_id) AS clusters, count(*) FILTER (WHERE is_exemplar) AS exemplars
FROM gpu_affinity_propagation('SELECT id, ARRAY[x, y]::numeric[] FROM ap_pts WHERE x IS NOT NULL',
                              preference => -1e-6, device => 'auto');

-- 1-D, three well-separated groups of 10; every group is a cluster
SELECT cluster_id, count(*), min(id), max(id), count(*) FILTER (WHERE is_exemplar) AS exemplars
FROM gpu_affinity_propagation($$SELECT i, ARRAY[(i / 10) * 100 + (i % 10) * 0.5] FROM generate_series(0, 29) i$$)
GROUP BY cluster_id ORDER BY cluster_id;

-- the result does not depend on the thread count
CREATE TABLE ap_rand AS
SELECT i AS id, ARRAY[(i * 7919 % 1000) / 10.0, (i * 104729 % 997) / 10.0]::real[] AS f
FROM generate_series(1, 400) i;
SET gpuclust.cpu_threads = 1;
CREATE TABLE ap_r1 AS SELECT * FROM gpu_affinity_propagation('SELECT id, f FROM ap_rand');
SET gpuclust.cpu_threads = 3;
CREATE TABLE ap_r3 AS SELECT * FROM gpu_affinity_propagation('SELECT id, f FROM ap_rand');
RESET gpuclust.cpu_threads;
SELECT count(*) AS rows, count(DISTINCT cluster_id) > 1 AS several_clusters,
       (SELECT count(*) FROM (SELECT * FROM ap_r1 EXCEPT SELECT * FROM ap_r3) d) AS differ
FROM ap_r1;
-- clusters are 0 .. k-1, one exemplar each, numbered by the exemplar's id
-- (the source's order is by id here)
SELECT count(DISTINCT cluster_id) = max(cluster_id) + 1 AS gapless,
       count(*) FILTER (WHERE is_exemplar) = count(DISTINCT cluster_id) AS one_exemplar_each,
       (SELECT array_agg(cluster_id ORDER BY id) = array_agg(cluster_id ORDER BY cluster_id)
        FROM ap_r1 WHERE is_exemplar) AS numbered_by_exemplar
FROM ap_r1;
-- every row's cluster has an exemplar, which is in it
SELECT count(*) AS orphans FROM ap_r1 a
WHERE NOT EXISTS (SELECT 1 FROM ap_r1 e WHERE e.is_exemplar AND e.cluster_id = a.cluster_id);

-- one row; empty source; only NULL features
SELECT * FROM gpu_affinity_propagation('SELECT 42, ARRAY[1.0, 2.0]');
SELECT * FROM gpu_affinity_propagation('SELECT id, ARRAY[x] FROM ap_pts WHERE false');
SELECT * FROM gpu_affinity_propagation('SELECT 1, NULL::real[]');

-- all rows at the same distance (scikit-learn's equal-similarity case):
-- preference >= similarity: every row its own exemplar; below: row 1 alone
SELECT * FROM gpu_affinity_propagation('VALUES (1, ARRAY[-1, 1]), (2, ARRAY[1, -1])', preference => 0);
SELECT * FROM gpu_affinity_propagation('VALUES (1, ARRAY[-1, 1]), (2, ARRAY[1, -1])', preference => -10);
SELECT * FROM gpu_affinity_propagation('VALUES (1, ARRAY[3, 3]), (2, ARRAY[3, 3]), (3, ARRAY[3, 3])');

-- not converged (scikit-learn's test): after one iteration no row is an
-- exemplar, so no row has a cluster
SELECT * FROM gpu_affinity_propagation('VALUES (1, ARRAY[0, 0]), (2, ARRAY[1, 1]), (3, ARRAY[-2, -2])',
                                       preference => -10, max_iter => 1);
-- not converged, but with exemplars: they label the rows (as scikit-learn)
SELECT * FROM gpu_affinity_propagation('VALUES (1, ARRAY[0, 0]), (2, ARRAY[1, 1]), (3, ARRAY[-2, -2]),
                                               (4, ARRAY[0.1, 0]), (5, ARRAY[1, 1.1])',
                                       max_iter => 3);
-- convergence_iter larger than max_iter: never converged
SELECT count(*), count(cluster_id)
FROM gpu_affinity_propagation('SELECT id, ARRAY[x, y] FROM ap_pts WHERE x IS NOT NULL',
                              max_iter => 10, convergence_iter => 11);
-- convergence_iter 1 is allowed
SELECT id, cluster_id, is_exemplar
FROM gpu_affinity_propagation('SELECT id, ARRAY[x, y] FROM ap_pts WHERE x IS NOT NULL ORDER BY id',
                              convergence_iter => 1);

-- the memory limit: 24 n^2 bytes, checked before anything is allocated
SET gpuclust.max_matrix_memory = '1MB';
SHOW gpuclust.max_matrix_memory;
SET client_min_messages = warning;  -- (evenly spaced: does not converge)
SELECT count(*) FROM gpu_affinity_propagation('SELECT i, ARRAY[i] FROM generate_series(1, 207) i', max_iter => 5);
RESET client_min_messages;
SELECT count(*) FROM gpu_affinity_propagation('SELECT i, ARRAY[i] FROM generate_series(1, 208) i');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM gpu_affinity_propagation('SELECT i, ARRAY[i] FROM generate_series(1, 208) i', device => 'cpu');
SET gpuclust.max_matrix_memory = '2GB';
SHOW gpuclust.max_matrix_memory;
SELECT count(*) FROM gpu_affinity_propagation('SELECT i, ARRAY[i] FROM generate_series(1, 10000) i');
\echo :LAST_ERROR_SQLSTATE
RESET gpuclust.max_matrix_memory;
SHOW gpuclust.max_matrix_memory;
-- more than the server's memory (a million rows need 22 TB): OUT_OF_MEMORY
SET gpuclust.max_matrix_memory = '2147483647MB';
DO $$
BEGIN
  PERFORM count(*) FROM gpu_affinity_propagation('SELECT i, ARRAY[i] FROM generate_series(1, 1000000) i');
EXCEPTION WHEN out_of_memory THEN
  RAISE NOTICE '%: %', SQLSTATE, regexp_replace(SQLERRM, '[0-9.]+ MB', 'N MB', 'g');
END $$;
RESET gpuclust.max_matrix_memory;

-- arguments
SELECT * FROM gpu_affinity_propagation('SELECT 1, ARRAY[1.0]', damping => 0.49);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_affinity_propagation('SELECT 1, ARRAY[1.0]', damping => 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_affinity_propagation('SELECT 1, ARRAY[1.0]', damping => 'NaN');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_affinity_propagation('SELECT 1, ARRAY[1.0]', damping => '-Infinity');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_affinity_propagation('SELECT 1, ARRAY[1.0]', preference => 'NaN');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_affinity_propagation('SELECT 1, ARRAY[1.0]', preference => 'Infinity');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_affinity_propagation('SELECT 1, ARRAY[1.0]', preference => '-Infinity');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_affinity_propagation('SELECT 1, ARRAY[1.0]', max_iter => 0);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_affinity_propagation('SELECT 1, ARRAY[1.0]', convergence_iter => 0);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_affinity_propagation('SELECT 1, ARRAY[1.0]', device => 'tpu');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_affinity_propagation(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_affinity_propagation('SELECT 1, ARRAY[1.0]', damping => NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_affinity_propagation('SELECT 1, ARRAY[1.0]', max_iter => NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_affinity_propagation('SELECT 1, ARRAY[1.0]', convergence_iter => NULL);
\echo :LAST_ERROR_SQLSTATE
-- preference and device may be NULL
SELECT * FROM gpu_affinity_propagation('SELECT 1, ARRAY[1.0]', preference => NULL, device => NULL);

-- "precision": 'float8' (the default, every device: the same result) or
-- 'float4' (S, R and A stored as float, on the GPU only).  precision is an
-- SQL keyword: in named notation it is quoted
SELECT count(*) AS rows,
       count(*) FILTER (WHERE a.cluster_id IS DISTINCT FROM b.cluster_id
                           OR a.is_exemplar <> b.is_exemplar) AS differing_named,
       count(*) FILTER (WHERE a.cluster_id IS DISTINCT FROM c.cluster_id
                           OR a.is_exemplar <> c.is_exemplar) AS differing_positional
FROM ap_r1 a
JOIN gpu_affinity_propagation('SELECT id, f FROM ap_rand', "precision" => 'float8') b USING (id)
JOIN gpu_affinity_propagation('SELECT id, f FROM ap_rand', 0.5, NULL, 200, 15, 'cpu', 'FLOAT8') c USING (id);
-- the keyed form takes it too
SELECT count(*) FILTER (WHERE a.cluster_id IS DISTINCT FROM b.cluster_id) AS differing
FROM ap_r1 a
JOIN gpu_affinity_propagation('SELECT ''p'' || id, f FROM ap_rand', NULL::text,
                              device => 'cpu', "precision" => 'Float8') b ON b.id = 'p' || a.id;
SELECT * FROM gpu_affinity_propagation('SELECT 1, ARRAY[1.0]', precision => 'float8');
-- an unknown precision, a NULL one
SELECT * FROM gpu_affinity_propagation('SELECT 1, ARRAY[1.0]', "precision" => 'float16');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_affinity_propagation('SELECT 1, ARRAY[1.0]', NULL::text, "precision" => 'double');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_affinity_propagation('SELECT 1, ARRAY[1.0]', "precision" => NULL);
\echo :LAST_ERROR_SQLSTATE
-- float4 runs only on the GPU: device 'cpu' is refused before the source
-- runs (its 1/0 is never reached), and so is gpuclust.device = 'cpu' with
-- device NULL, in every form
SELECT * FROM gpu_affinity_propagation('SELECT 1/0, ARRAY[1.0]', device => 'cpu', "precision" => 'float4');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_affinity_propagation('SELECT 1/0, ARRAY[1.0]', NULL::text, device => 'CPU', "precision" => 'FLOAT4');
SET gpuclust.device = 'cpu';
SELECT * FROM gpu_affinity_propagation('SELECT 1/0, ARRAY[1.0]', "precision" => 'float4');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_affinity_propagation('SELECT 1, ARRAY[1.0]');
RESET gpuclust.device;

-- device 'gpu' (the argument, or gpuclust.device with device NULL) runs
-- on the GPU when one is usable, and otherwise fails with the usual error
-- (0A000, the reason in the DETAIL); float4 under 'auto' asks for the GPU
-- whatever the size, and fails the same way without one, never running on
-- the CPU; an empty source too.  The reason depends on the machine, so
-- without a GPU only the SQLSTATE, the message and the hint are shown;
-- with one, float8's labels are compared with the CPU's (and float4's
-- labelling checked whole), and the same lines are printed when they are
-- right.
CREATE FUNCTION ap_try(label text, src text, setup text, args text, want text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  detail text;
  hint text;
  bad bigint;
BEGIN
  EXECUTE setup;
  IF (SELECT value FROM gpuclust_info() WHERE key = 'gpu_usable') = 'false' THEN
    BEGIN
      EXECUTE format('SELECT count(*) FROM gpu_affinity_propagation(%L%s)', src, args);
      RAISE NOTICE '%: ran without a usable GPU', label;
    EXCEPTION WHEN OTHERS THEN
      GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
      RAISE NOTICE '%: % %; a reason given: %; hint: %', label, SQLSTATE, SQLERRM,
        CASE WHEN coalesce(detail, '') <> '' THEN 'yes' ELSE 'no' END, hint;
    END;
  ELSE
    -- float8: the CPU's result row for row; float4: as many rows, each
    -- labelled when there is an exemplar, one exemplar a cluster (its
    -- NOTICEs, which may differ, are not shown)
    PERFORM set_config('client_min_messages', 'warning', false);
    EXECUTE format($q$
      SELECT abs(count(g.id) - count(c.id)) +
             CASE WHEN %L LIKE '%%float4%%'
                  THEN CASE WHEN count(*) FILTER (WHERE g.is_exemplar) > 0
                            THEN count(*) FILTER (WHERE g.cluster_id IS NULL) ELSE 0 END
                       + CASE WHEN count(*) FILTER (WHERE g.is_exemplar)
                                  <> count(DISTINCT g.cluster_id) THEN 1 ELSE 0 END
                  ELSE count(*) FILTER (WHERE g.cluster_id IS DISTINCT FROM c.cluster_id
                                           OR g.is_exemplar IS DISTINCT FROM c.is_exemplar) END
      FROM gpu_affinity_propagation(%L%s) g
      FULL JOIN gpu_affinity_propagation(%L, device => 'cpu') c USING (id)$q$,
      args, src, args, src) INTO bad;
    PERFORM set_config('client_min_messages', 'notice', false);
    IF bad = 0 THEN
      RAISE NOTICE '%: %', label, want;
    ELSE
      RAISE NOTICE '%: % rows wrong on the GPU', label, bad;
    END IF;
  END IF;
  RESET gpuclust.device;
END $$;
SELECT ap_try('gpu', 'SELECT id, f FROM ap_rand', 'SET gpuclust.device = ''auto''', ', device => ''gpu''',
              '0A000 cannot run affinity propagation on the GPU; a reason given: yes; hint: Use device => ''cpu'' or ''auto'', or set gpuclust.device to ''cpu'' or ''auto''.');
SELECT ap_try('gpu by the setting', 'SELECT id, f FROM ap_rand', 'SET gpuclust.device = ''gpu''', '',
              '0A000 cannot run affinity propagation on the GPU; a reason given: yes; hint: Use device => ''cpu'' or ''auto'', or set gpuclust.device to ''cpu'' or ''auto''.');
SELECT ap_try('gpu, empty source', 'SELECT id, f FROM ap_rand WHERE false', 'SET gpuclust.device = ''auto''', ', device => ''gpu''',
              '0A000 cannot run affinity propagation on the GPU; a reason given: yes; hint: Use device => ''cpu'' or ''auto'', or set gpuclust.device to ''cpu'' or ''auto''.');
SELECT ap_try('float4 under auto', 'SELECT id, f FROM ap_rand', 'SET gpuclust.device = ''auto''', ', "precision" => ''float4''',
              '0A000 cannot run affinity propagation on the GPU; a reason given: yes; hint: Affinity propagation in float4 runs only on the GPU; "precision" => ''float8'' runs on the CPU too.');
SELECT ap_try('float4 under auto, empty source', 'SELECT id, f FROM ap_rand WHERE false', 'SET gpuclust.device = ''auto''', ', "precision" => ''float4''',
              '0A000 cannot run affinity propagation on the GPU; a reason given: yes; hint: Affinity propagation in float4 runs only on the GPU; "precision" => ''float8'' runs on the CPU too.');
DROP FUNCTION ap_try(text, text, text, text, text);
-- 'auto' in float8 runs a small input on the CPU, GPU or not
SET gpuclust.device = 'auto';
SELECT * FROM gpu_affinity_propagation('SELECT 1, ARRAY[1.0]');
RESET gpuclust.device;

-- bad rows are the ingest's errors, naming the row
SELECT * FROM gpu_affinity_propagation('SELECT 7, ARRAY[1.0, ''NaN'']::real[]');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_affinity_propagation('SELECT 1, ARRAY[1.0] UNION ALL SELECT 2, ARRAY[1.0, 2.0]');
\echo :LAST_ERROR_SQLSTATE

-- cancellation: 4000 rows that never converge, stopped by statement_timeout
SET statement_timeout = '1s';
SELECT count(*) FROM gpu_affinity_propagation('SELECT i, ARRAY[i % 101, i % 97] FROM generate_series(1, 4000) i',
                                              max_iter => 1000000, convergence_iter => 1000001);
RESET statement_timeout;
SELECT count(*) FROM gpu_affinity_propagation('SELECT i, ARRAY[i] FROM generate_series(1, 3) i');

DROP TABLE ap_pts, ap_rand, ap_r1, ap_r3;
