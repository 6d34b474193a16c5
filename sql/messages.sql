--
-- Messages: k-means's NOTICE when it finds fewer distinct clusters than k
-- (every form), and gpuclust.log_timing's INFO lines (one per call, one per
-- window partition).
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gpuclust;
RESET client_min_messages;

-- group 1: six rows, two distinct points; group 2: five distinct points
CREATE TABLE msg_pts (id int, grp int, f real[]);
INSERT INTO msg_pts VALUES
  (1, 1, '{0,0}'), (2, 1, '{0,0}'), (3, 1, '{5,5}'),
  (4, 1, '{5,5}'), (5, 1, '{0,0}'), (6, 1, '{5,5}'),
  (7, 2, '{0,0}'), (8, 2, '{1,0}'), (9, 2, '{10,0}'),
  (10, 2, '{11,0}'), (11, 2, '{20,0}');

-- fewer distinct points than k: a NOTICE, as scikit-learn warns
SELECT id, cluster_id, distance
FROM gpu_kmeans('SELECT id, f FROM msg_pts WHERE grp = 1 ORDER BY id', 3);
SELECT id, cluster_id
FROM gpu_kmeans('SELECT id, f FROM msg_pts WHERE grp = 1 ORDER BY id', 5, n_init => 3);
SELECT centroids, inertia, n
FROM gpu_kmeans_fit('SELECT id, f FROM msg_pts WHERE grp = 1 ORDER BY id', 3);
-- the window form: for the partition that has too few, and only for it
SELECT grp, id, gpu_kmeans(f, 3) OVER (PARTITION BY grp ORDER BY id) AS cluster_id
FROM msg_pts ORDER BY grp, id;
-- one row, k = 1, and enough distinct points: no notice
SELECT count(*) FROM gpu_kmeans('SELECT 1, ARRAY[1]', 1);
SELECT count(DISTINCT cluster_id)
FROM gpu_kmeans('SELECT id, f FROM msg_pts WHERE grp = 2', 3);
SELECT count(DISTINCT cluster_id)
FROM gpu_kmeans('SELECT id, f FROM msg_pts', 2);

-- gpuclust.log_timing: one INFO per call.  The line carries timings, so
-- only its severity and SQLSTATE are shown here (VERBOSITY sqlstate).
SET gpuclust.log_timing = on;
\set VERBOSITY sqlstate
SELECT count(*) FROM gpu_kmeans('SELECT id, f FROM msg_pts WHERE grp = 2', 2);
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM msg_pts', 1.5, 2);
SELECT count(*) FROM gpu_affinity_propagation('SELECT id, f FROM msg_pts WHERE grp = 2');
SELECT n FROM gpu_kmeans_fit('SELECT id, f FROM msg_pts WHERE grp = 2', 2);
-- window forms: one line per partition (two partitions here)
SELECT count(cl) FROM (
  SELECT gpu_kmeans(f, 2) OVER (PARTITION BY grp ORDER BY id) AS cl FROM msg_pts) s;
SELECT count(cl) FROM (
  SELECT gpu_dbscan(f, 1.5, 2) OVER (PARTITION BY grp ORDER BY id) AS cl FROM msg_pts) s;
-- a partition whose features are all NULL still logs (nothing ran)
SELECT count(cl) FROM (
  SELECT gpu_dbscan(NULL::real[], 1.5, 2) OVER () AS cl FROM msg_pts) s;
-- the scalar scorers log nothing (per-row: EXPLAIN ANALYZE times them)
SELECT count(kmeans_assign(f, '{{0,0},{10,0}}')) FROM msg_pts;
SELECT count(kmeans_assign_distance(f, '{{0,0},{10,0}}')) FROM msg_pts;
\set VERBOSITY default
RESET gpuclust.log_timing;
-- and nothing once it is off
SELECT count(*) FROM gpu_kmeans('SELECT id, f FROM msg_pts WHERE grp = 2', 2);

DROP TABLE msg_pts;
