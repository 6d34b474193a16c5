--
-- gpu_dbscan: a hand-checked example, core/border/noise, numbering,
-- duplicates, min_pts 1
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gpuclust;
RESET client_min_messages;

-- 1-D points, eps = 1, min_pts = 4 (a point counts itself):
--   A = {0, 0.25, 0.5, 1}: all core (4 or 5 neighbours)
--   C = {3, 3.5, 3.75, 4}: all core
--   2 is border: neighbours 1, 2, 3 (3 < 4); its nearest cores 1 and 3
--     tie at distance 1 (<= eps counts), so it joins the core that comes
--     first in the input, 3 (row 2), i.e. cluster C
--   5 is border of C (neighbour 4); 6 and 7 are noise (no core in reach)
--   A is cluster 0 (its first row is row 1), C is cluster 1 (row 2)
CREATE TABLE db_pts (id int, x real);
INSERT INTO db_pts VALUES
  (1, 0), (2, 3), (3, 2), (4, 0.25), (5, 1), (6, 3.5), (7, 0.5),
  (8, 3.75), (9, 4), (10, 7), (11, 5), (12, 6), (13, NULL);

SELECT r.id, p.x, r.cluster_id, r.is_core
FROM gpu_dbscan('SELECT id, CASE WHEN x IS NOT NULL THEN ARRAY[x] END FROM db_pts ORDER BY id', 1.0, 4) r
JOIN db_pts p USING (id);

-- the input order decides the numbering: reversed, C comes first
SELECT id, cluster_id, is_core
FROM gpu_dbscan('SELECT id, ARRAY[x] FROM db_pts WHERE x IS NOT NULL ORDER BY id DESC', 1.0, 4);

-- eps just below 1: 0, 1, 3 and 4 are no longer core but stay as border
-- points; 2 and 5 lose their cores and become noise
SELECT id, cluster_id, is_core
FROM gpu_dbscan('SELECT id, ARRAY[x] FROM db_pts WHERE x IS NOT NULL ORDER BY id', 0.99, 4);

-- min_pts 1: every point is core; isolated points are their own clusters
SELECT id, cluster_id, is_core
FROM gpu_dbscan('SELECT id, ARRAY[x]::float8[] FROM db_pts WHERE x IS NOT NULL ORDER BY id', 0.3, 1);

-- min_pts larger than the input: everything is noise
SELECT count(*), count(cluster_id), bool_or(is_core)
FROM gpu_dbscan('SELECT id, ARRAY[x] FROM db_pts WHERE x IS NOT NULL', 1.0, 100);

-- duplicates: three identical points are within any eps of each other
SELECT id, cluster_id, is_core
FROM gpu_dbscan($$VALUES (1, ARRAY[1.0, 1.0]), (2, ARRAY[5.0, 5.0]), (3, ARRAY[1.0, 1.0]),
                         (4, ARRAY[1.0, 1.0]), (5, ARRAY[5.0, 5.0])$$, 1e-6, 3);

-- 2-D, two blobs and a far point, integer features and bigint ids
SELECT cluster_id, count(*), bool_and(is_core), min(id), max(id)
FROM gpu_dbscan($$SELECT i::bigint * 1000000000000, ARRAY[(i / 100) * 100 + i % 10, (i % 100) / 10]
                  FROM generate_series(0, 199) i
                  UNION ALL SELECT -1, ARRAY[1000, 1000]$$, 1.5, 5)
GROUP BY cluster_id ORDER BY cluster_id;

-- numeric[] features, device by name, empty source
SELECT id, cluster_id, is_core
FROM gpu_dbscan('SELECT id, ARRAY[x]::numeric[] FROM db_pts WHERE id <= 5 ORDER BY id', 1.0, 2, device => 'cpu');
SELECT * FROM gpu_dbscan('SELECT id, ARRAY[x] FROM db_pts WHERE false', 1.0, 2);

DROP TABLE db_pts;

-- features stored out of line (TOAST): 3000-d arrays, two close rows and one far
CREATE TABLE wide (id int, f real[]);
ALTER TABLE wide ALTER COLUMN f SET STORAGE EXTERNAL;
INSERT INTO wide
SELECT r, array_agg(CASE WHEN r = 3 THEN 100 ELSE 0 END + (j % 7) * 0.001 * r)::real[]
FROM generate_series(1, 3) r, generate_series(1, 3000) j GROUP BY r;
SELECT pg_column_size(f) > 2000 AS toasted FROM wide ORDER BY id LIMIT 1;
SELECT * FROM gpu_dbscan('SELECT id, f FROM wide ORDER BY id', 1.0, 2);
DROP TABLE wide;
