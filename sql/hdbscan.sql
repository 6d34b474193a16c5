--
-- gpu_hdbscan, gpu_hdbscan_tree, gpu_minimum_spanning_tree and the window
-- form: hand-checked examples, ids of any type, errors
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gpuclust;
RESET client_min_messages;
\set SHOW_CONTEXT errors

-- 1-D, min_cluster_size 3, min_samples 2 (the row and its nearest other):
--   A = {0, 1, 2, 4}: core distances 1, 1, 1 and 2
--   B1 = {10, 11, 12}, B2 = {13.2, 14.2, 15.2}: core distances 1
--   30: core distance 14.8, so it leaves the root at lambda 1/14.8
-- The mutual-reachability MST links A and B = B1 + B2 at 6 (4 -> 10),
-- B1 and B2 at 1.2 (12 -> 13.2).  So A and B are born at lambda 1/6; in A
-- the row 4 leaves at 1/2 and the others at 1; B splits into B1 and B2 at
-- 1/1.2, whose rows leave at 1.  Stabilities: A 2.83, B 6 (1/1.2 - 1/6) =
-- 4, B1 and B2 3 (1 - 1/1.2) = 0.5 each: excess of mass selects A and B
-- (clusters 0 and 1), leaf A, B1 and B2.  Probabilities: 4 gets 1/2 / 1,
-- every other clustered row 1; outlier scores (GLOSH): 4 (1 - 1/2) / 1,
-- 30 (1 - 1/14.8) / 1 = 0.9324, the others 0.
CREATE TABLE hd_pts (id int, grp int, f real[]);
INSERT INTO hd_pts VALUES
  (1, 1, '{0}'), (2, 1, '{1}'), (3, 1, '{2}'), (4, 1, '{4}'),
  (5, 2, '{10}'), (6, 2, '{11}'), (7, 2, '{12}'), (8, 2, '{13.2}'), (9, 2, '{14.2}'),
  (10, 2, '{15.2}'), (11, 2, '{30}'), (12, 2, NULL);

SELECT id, cluster_id, round(probability::numeric, 6) AS probability,
       round(outlier_score::numeric, 6) AS outlier_score
FROM gpu_hdbscan('SELECT id, f FROM hd_pts ORDER BY id', 3, 2);
-- leaf: B's two halves
SELECT id, cluster_id
FROM gpu_hdbscan('SELECT id, f FROM hd_pts ORDER BY id', 3, 2,
                 cluster_selection_method => 'LEAF');
-- leaf with cluster_selection_epsilon 1.5: B1 and B2, born at distance 1.2,
-- give way to B, born at 6
SELECT count(DISTINCT cluster_id) AS clusters, count(cluster_id) AS clustered
FROM gpu_hdbscan('SELECT id, f FROM hd_pts ORDER BY id', 3, 2,
                 cluster_selection_epsilon => 1.5, cluster_selection_method => 'leaf');
-- min_samples NULL is min_cluster_size
SELECT count(*) FILTER (WHERE d.cluster_id IS DISTINCT FROM g.cluster_id
                           OR d.probability <> g.probability) AS differ_from_3
FROM gpu_hdbscan('SELECT id, f FROM hd_pts ORDER BY id', 3) d
JOIN gpu_hdbscan('SELECT id, f FROM hd_pts ORDER BY id', 3, 3) g USING (id);
-- the condensed tree: parent 0 is the root; a row's edge names its id, a
-- cluster's its node and, when selected, its gpu_hdbscan cluster
SELECT parent, child, id, round(lambda::numeric, 6) AS lambda, child_size, cluster_id
FROM gpu_hdbscan_tree('SELECT id, f FROM hd_pts ORDER BY id', 3, 2);

-- B1, B2 and the far row: excess of mass selects B1 and B2; with
-- allow_single_cluster the root may be selected, and its stability,
-- 6 / 1.2 + 1 / 14.8, beats theirs, 1: one cluster, the far row noise
SELECT a.id, a.cluster_id AS single, n.cluster_id AS not_single
FROM gpu_hdbscan('SELECT id, f FROM hd_pts WHERE id >= 5 ORDER BY id', 3, 2,
                 allow_single_cluster => true) a
JOIN gpu_hdbscan('SELECT id, f FROM hd_pts WHERE id >= 5 ORDER BY id', 3, 2) n USING (id);

-- duplicates: core distance 0, rows leave at lambda +Infinity (probability
-- 1, outlier score 0)
SELECT * FROM gpu_hdbscan($$VALUES (1, ARRAY[0, 0]), (2, ARRAY[5, 5]), (3, ARRAY[0, 0]),
                                   (4, ARRAY[5, 5]), (5, ARRAY[0, 0]), (6, ARRAY[5, 5])$$, 2, 2);
SELECT * FROM gpu_hdbscan_tree($$VALUES (1, ARRAY[0, 0]), (2, ARRAY[5, 5]), (3, ARRAY[0, 0]),
                                        (4, ARRAY[5, 5]), (5, ARRAY[0, 0]), (6, ARRAY[5, 5])$$, 2, 2);

-- the minimum spanning tree: a unit square and a far corner.  min_samples
-- 1 is the Euclidean MST; its four sides tie at 1 and the edges come in
-- (distance, a, b) order, so (0, 1), (0, 2), (1, 3) and not (2, 3)
CREATE TABLE hd_sq (id int, f real[]);
INSERT INTO hd_sq VALUES (10, '{0,0}'), (11, '{1,0}'), (12, '{0,1}'), (13, '{1,1}'), (14, '{5,5}');
SELECT * FROM gpu_minimum_spanning_tree('SELECT id, f FROM hd_sq ORDER BY id');
-- min_samples 2, alpha 2: every core distance of the square is 1 and each
-- of its 6 pairs weighs max(1, 1, d / 2) = 1, so the star on row 10; the
-- far corner's weight, its core distance, ties with all four
SELECT * FROM gpu_minimum_spanning_tree('SELECT id, f FROM hd_sq ORDER BY id', 2, alpha => 2);
-- the input order decides the ties: reversed
SELECT * FROM gpu_minimum_spanning_tree('SELECT id, f FROM hd_sq ORDER BY id DESC', 2, alpha => 2);

-- ids of any type: the keyed forms
SELECT pg_typeof(id), count(*), count(cluster_id)
FROM gpu_hdbscan('SELECT ''p'' || id, f FROM hd_pts ORDER BY id', NULL::text, 3, 2) GROUP BY 1;
SELECT id, cluster_id FROM gpu_hdbscan_tree('SELECT ''p'' || id, f FROM hd_pts ORDER BY id',
                                            NULL::text, 3, 2)
WHERE id IN ('p4', 'p11') OR cluster_id IS NOT NULL;
SELECT * FROM gpu_minimum_spanning_tree('SELECT ''s'' || id, f FROM hd_sq ORDER BY id', NULL::text);

-- the window form: each partition on its own, the labels of the
-- set-returning form over the same rows in the same order
SELECT id, grp, gpu_hdbscan(f, 3, 2) OVER (PARTITION BY grp ORDER BY id) AS by_grp,
       gpu_hdbscan(f::float8[], 3, 2) OVER (ORDER BY id) AS whole
FROM hd_pts ORDER BY id;
SELECT count(*) FILTER (WHERE w.c IS DISTINCT FROM s.cluster_id) AS differ
FROM (SELECT id, gpu_hdbscan(f, 3, cluster_selection_method => 'leaf')
                   OVER (ORDER BY id) AS c FROM hd_pts) w
JOIN gpu_hdbscan('SELECT id, f FROM hd_pts ORDER BY id', 3,
                 cluster_selection_method => 'leaf') s USING (id);

-- cosine: two directions, rows of any length
SELECT id, cluster_id
FROM gpu_hdbscan($$VALUES (1, ARRAY[10, 1]), (2, ARRAY[1, 10]), (3, ARRAY[20, 2.2]), (4, ARRAY[2.2, 20]),
                          (5, ARRAY[30, 3.1]), (6, ARRAY[3.1, 30]), (7, ARRAY[40, 4.4]), (8, ARRAY[4.4, 40])$$,
                 3, 2, metric => 'cosine');

-- one row: noise; no rows, or no features: nothing to cluster
SELECT * FROM gpu_hdbscan('SELECT 1, ARRAY[1.0]', 2, 1);
SELECT * FROM gpu_minimum_spanning_tree('SELECT 1, ARRAY[1.0]');
SELECT * FROM gpu_hdbscan('SELECT id, f FROM hd_pts WHERE false');
SELECT * FROM gpu_hdbscan('SELECT id, NULL::real[] FROM hd_pts WHERE id <= 2');
SELECT * FROM gpu_hdbscan_tree('SELECT id, NULL::real[] FROM hd_pts');
SELECT * FROM gpu_minimum_spanning_tree('SELECT id, f FROM hd_pts WHERE false');

-- errors: the arguments, checked before the source runs (22023, 22004,
-- 0A000), then against the rows and the rows themselves
SELECT * FROM gpu_hdbscan('SELECT 1/0, ARRAY[1.0]', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_hdbscan('SELECT 1/0, ARRAY[1.0]', 5, 0);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_hdbscan('SELECT 1/0, ARRAY[1.0]', cluster_selection_epsilon => -0.5);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_hdbscan('SELECT 1/0, ARRAY[1.0]', cluster_selection_epsilon => 'NaN');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_hdbscan_tree('SELECT 1/0, ARRAY[1.0]', cluster_selection_method => 'excess');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_hdbscan('SELECT 1/0, ARRAY[1.0]', alpha => 0);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_minimum_spanning_tree('SELECT 1/0, ARRAY[1.0]', alpha => 'Infinity');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_minimum_spanning_tree('SELECT 1/0, ARRAY[1.0]', 0);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_minimum_spanning_tree('SELECT 1/0, ARRAY[1.0]', metric => 'manhattan');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_hdbscan('SELECT 1/0, ARRAY[1.0]', metric => 'inner_product');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_hdbscan('SELECT 1/0, ARRAY[1.0]', device => 'tpu');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_hdbscan('SELECT 1/0, ARRAY[1.0]', min_cluster_size => NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_hdbscan('SELECT 1/0, ARRAY[1.0]', allow_single_cluster => NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_minimum_spanning_tree('SELECT 1/0, ARRAY[1.0]', min_samples => NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_hdbscan('SELECT id, f FROM hd_pts WHERE id <= 4');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_minimum_spanning_tree('SELECT id, f FROM hd_pts WHERE id <= 4', 5);
\echo :LAST_ERROR_SQLSTATE
-- a partition of fewer rows than min_samples is no error: all noise, with
-- a NOTICE (as DBSCAN's with fewer rows than min_pts)
SELECT id < 2 AS first, count(*) AS rows, count(c) AS clustered
FROM (SELECT id, gpu_hdbscan(f, 3, 2) OVER (PARTITION BY id < 2) AS c FROM hd_pts) s
GROUP BY 1 ORDER BY 1;
SELECT gpu_hdbscan(f, 3) OVER () FROM hd_pts WHERE id <= 2;
SELECT * FROM gpu_hdbscan($$SELECT i, ARRAY[CASE WHEN i = 7 THEN 'NaN'::real ELSE i END]
                            FROM generate_series(1, 10) i$$);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM gpu_hdbscan('SELECT i, ARRAY[i % 3, 0] FROM generate_series(1, 10) i', metric => 'cosine');
\echo :LAST_ERROR_SQLSTATE

-- gpuclust.log_timing: one INFO per call, per window partition (only its
-- severity and SQLSTATE shown: the line carries timings)
SET gpuclust.log_timing = on;
\set VERBOSITY sqlstate
SELECT count(*) FROM gpu_hdbscan('SELECT id, f FROM hd_pts', 3, 2);
SELECT count(*) FROM gpu_hdbscan_tree('SELECT id, f FROM hd_pts', 3, 2);
SELECT count(*) FROM gpu_minimum_spanning_tree('SELECT id, f FROM hd_pts');
SELECT count(c) FROM (SELECT gpu_hdbscan(f, 3, 2) OVER (PARTITION BY grp) AS c FROM hd_pts) s;
\set VERBOSITY default
RESET gpuclust.log_timing;

DROP TABLE hd_pts, hd_sq;
