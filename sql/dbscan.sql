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

-- metric => 'cosine': distance 1 - cos(a, b) (pgvector's <=>).  Directions
-- in 3 groups, rows of any length: the same partition as Euclidean DBSCAN
-- of the unit rows with eps' = sqrt(2 eps)
CREATE TABLE cos_pts AS
SELECT i AS id,
       ARRAY[(g + 1) * 10 + (hashint4(i) % 100) / 12.0,
             (3 - g) * 10 + (hashint4(i + 7) % 100) / 12.0,
             (g % 2) * 10 + (hashint4(i + 13) % 100) / 12.0]::real[]
         AS f0,
       1 + (hashint4(i + 99) % 1000 + 1000) / 100.0 AS len
FROM generate_series(1, 600) i, LATERAL (SELECT i % 3 AS g) s;
ALTER TABLE cos_pts ADD COLUMN f real[];
UPDATE cos_pts SET f = ARRAY[f0[1] * len, f0[2] * len, f0[3] * len]::real[];
CREATE TABLE cos_unit AS
SELECT id, ARRAY[f[1] / n, f[2] / n, f[3] / n]::real[] AS u
FROM (SELECT id, f, sqrt(f[1]::float8 * f[1] + f[2]::float8 * f[2] + f[3]::float8 * f[3]) AS n
      FROM cos_pts) s;
SELECT count(*) AS rows, count(DISTINCT c.cluster_id) AS clusters,
       count(*) FILTER (WHERE c.cluster_id IS NULL) AS noise,
       count(*) FILTER (WHERE c.cluster_id IS DISTINCT FROM e.cluster_id
                           OR c.is_core <> e.is_core) AS differing
FROM gpu_dbscan('SELECT id, f FROM cos_pts', 0.001, 5, metric => 'cosine') c
JOIN gpu_dbscan('SELECT id, u FROM cos_unit', sqrt(2 * 0.001), 5) e USING (id);
-- lengths do not matter: the unscaled rows give the same clusters
SELECT count(*) FILTER (WHERE a.cluster_id IS DISTINCT FROM b.cluster_id) AS differing
FROM gpu_dbscan('SELECT id, f FROM cos_pts', 0.001, 5, metric => 'cosine') a
JOIN gpu_dbscan('SELECT id, f0 FROM cos_pts', 0.001, 5, metric => 'cosine') b USING (id);
-- the window form, by name and by position
SELECT count(*) FILTER (WHERE w IS DISTINCT FROM s.cluster_id) AS differing
FROM (SELECT id, gpu_dbscan(f, 0.001, 5, metric => 'cosine') OVER (ORDER BY id) AS w
      FROM cos_pts) x
JOIN gpu_dbscan('SELECT id, f FROM cos_pts ORDER BY id', 0.001, 5, NULL, 'cosine') s USING (id);
-- the metric's name in any case; euclidean is the default
SELECT count(*) FILTER (WHERE a.cluster_id IS DISTINCT FROM b.cluster_id) AS differing
FROM gpu_dbscan('SELECT id, f FROM cos_pts', 5.0, 5) a
JOIN gpu_dbscan('SELECT id, f FROM cos_pts', 5.0, 5, metric => 'EUCLIDEAN') b USING (id);
-- a zero vector has no cosine distance: an error naming the row
SELECT * FROM gpu_dbscan($$VALUES (1, ARRAY[1.0, 0.0]), (7, ARRAY[0.0, 0.0])$$, 0.1, 1,
                         metric => 'cosine');
SELECT gpu_dbscan(f, 0.1, 1, metric => 'cosine') OVER ()
FROM (VALUES (ARRAY[1.0, 2.0]::real[]), (NULL), (ARRAY[0.0, 0.0]::real[])) v(f);
-- inner_product is refused with the reason; an unknown metric, a NULL one
SELECT * FROM gpu_dbscan('SELECT id, f FROM cos_pts', 0.1, 5, metric => 'inner_product');
SELECT * FROM gpu_dbscan('SELECT id, f FROM cos_pts', 0.1, 5, metric => 'manhattan');
SELECT * FROM gpu_dbscan('SELECT id, f FROM cos_pts', 0.1, 5, metric => NULL);
DROP TABLE cos_pts, cos_unit;

-- algorithm => 'union_find' (the default, every device) or 'dclust'
-- (CUDA-DClust, GPU only): the same labels.  Two grids of blobs and some
-- noise in 2-d
CREATE TABLE alg_pts AS
SELECT i AS id,
       CASE WHEN i % 10 = 0
            THEN ARRAY[(hashint4(i) % 1000) / 40.0, (hashint4(i + 1) % 1000) / 40.0]
            ELSE ARRAY[(i % 7) * 4 + (hashint4(i + 2) % 100) / 80.0,
                       (i % 5) * 4 + (hashint4(i + 3) % 100) / 80.0] END::real[] AS f
FROM generate_series(1, 700) i;
-- the default is union_find: by name, in any case, by position (after
-- metric), on the CPU and under 'auto'
SELECT count(*) AS rows, count(DISTINCT a.cluster_id) AS clusters,
       count(*) FILTER (WHERE a.cluster_id IS NULL) AS noise,
       count(*) FILTER (WHERE a.cluster_id IS DISTINCT FROM b.cluster_id
                           OR a.is_core <> b.is_core) AS differing_named,
       count(*) FILTER (WHERE a.cluster_id IS DISTINCT FROM c.cluster_id
                           OR a.is_core <> c.is_core) AS differing_positional
FROM gpu_dbscan('SELECT id, f FROM alg_pts', 0.5, 5) a
JOIN gpu_dbscan('SELECT id, f FROM alg_pts', 0.5, 5, algorithm => 'union_find') b USING (id)
JOIN gpu_dbscan('SELECT id, f FROM alg_pts', 0.5, 5, 'cpu', 'euclidean', 'Union_Find') c USING (id);
-- with the cosine metric, and in the keyed form (ids of another type)
SELECT count(*) FILTER (WHERE a.cluster_id IS DISTINCT FROM b.cluster_id) AS differing
FROM gpu_dbscan('SELECT id, f FROM alg_pts', 0.001, 5, metric => 'cosine') a
JOIN gpu_dbscan('SELECT id, f FROM alg_pts', 0.001, 5, metric => 'cosine',
                algorithm => 'union_find') b USING (id);
SELECT count(*) FILTER (WHERE a.cluster_id IS DISTINCT FROM b.cluster_id) AS differing
FROM gpu_dbscan('SELECT id, f FROM alg_pts', 0.5, 5) a
JOIN gpu_dbscan('SELECT ''p'' || id, f FROM alg_pts', NULL::text, 0.5, 5,
                algorithm => 'union_find') b ON b.id = 'p' || a.id;
-- the window forms take it too, by name and by position
SELECT count(*) FILTER (WHERE w IS DISTINCT FROM s.cluster_id) AS differing,
       count(*) FILTER (WHERE w8 IS DISTINCT FROM s.cluster_id) AS differing_float8
FROM (SELECT id, gpu_dbscan(f, 0.5, 5, algorithm => 'union_find') OVER (ORDER BY id) AS w,
             gpu_dbscan(f::float8[], 0.5, 5, NULL, 'euclidean', 'union_find') OVER (ORDER BY id) AS w8
      FROM alg_pts) x
JOIN gpu_dbscan('SELECT id, f FROM alg_pts ORDER BY id', 0.5, 5) s USING (id);
-- an unknown algorithm, a NULL one (set-returning and window forms)
SELECT * FROM gpu_dbscan('SELECT id, f FROM alg_pts', 0.5, 5, algorithm => 'union-find');
SELECT * FROM gpu_dbscan('SELECT id, f FROM alg_pts', 0.5, 5, algorithm => NULL);
SELECT gpu_dbscan(f, 0.5, 5, algorithm => 'optics') OVER () FROM alg_pts;
SELECT gpu_dbscan(f, 0.5, 5, algorithm => NULL) OVER () FROM alg_pts;
-- one algorithm per partition
SELECT gpu_dbscan(f, 0.5, 5, algorithm => CASE WHEN id < 10 THEN 'union_find' ELSE 'UNION_FIND' END)
       OVER (ORDER BY id) FROM alg_pts;
-- dclust runs only on the GPU: device 'cpu' is refused before the source
-- runs (its 1/0 is never reached), and so is gpuclust.device = 'cpu' with
-- device NULL, in every form
SELECT * FROM gpu_dbscan('SELECT 1/0, ARRAY[1.0]', 0.5, 5, device => 'cpu', algorithm => 'dclust');
SELECT * FROM gpu_dbscan('SELECT 1/0, ARRAY[1.0]', NULL::text, 0.5, 5, device => 'CPU', algorithm => 'DCLUST');
SET gpuclust.device = 'cpu';
SELECT * FROM gpu_dbscan('SELECT 1/0, ARRAY[1.0]', 0.5, 5, algorithm => 'dclust');
SELECT gpu_dbscan(f, 0.5, 5, algorithm => 'dclust') OVER () FROM alg_pts;
RESET gpuclust.device;
-- dclust under 'auto' (and 'gpu') runs on the GPU whenever one is usable,
-- whatever the size, and otherwise fails with the reason (0A000), never on
-- the CPU; an empty source too.  The reason depends on the machine, so
-- without a GPU only the SQLSTATE and the hint are shown; with one, the
-- labels are compared with union_find's on the CPU, and the same line is
-- printed when they are equal.
DO $$
DECLARE
  src text;
  differing bigint;
  detail text;
  hint text;
BEGIN
  FOREACH src IN ARRAY ARRAY['SELECT id, f FROM alg_pts', 'SELECT id, f FROM alg_pts WHERE false'] LOOP
    IF (SELECT value FROM gpuclust_info() WHERE key = 'gpu_usable') = 'false' THEN
      BEGIN
        PERFORM * FROM gpu_dbscan(src, 0.5, 5, algorithm => 'dclust');
        RAISE NOTICE 'dclust ran without a usable GPU';
      EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
        RAISE NOTICE 'dclust under auto, no usable GPU: % %; a reason given: %; hint: %',
          SQLSTATE, SQLERRM, CASE WHEN coalesce(detail, '') <> '' THEN 'yes' ELSE 'no' END, hint;
      END;
    ELSE
      SELECT count(*) FILTER (WHERE g.cluster_id IS DISTINCT FROM c.cluster_id
                                 OR g.is_core IS DISTINCT FROM c.is_core)
                + abs(count(g.id) - count(c.id))
        INTO differing
        FROM gpu_dbscan(src, 0.5, 5, algorithm => 'dclust') g
        FULL JOIN gpu_dbscan(src, 0.5, 5, device => 'cpu') c USING (id);
      IF differing = 0 THEN
        RAISE NOTICE 'dclust under auto, no usable GPU: 0A000 cannot run DBSCAN on the GPU; a reason given: yes; hint: DBSCAN algorithm dclust runs only on the GPU; algorithm => ''union_find'' gives the same labels on the CPU.';
      ELSE
        RAISE NOTICE 'dclust on the GPU: % rows differ from union_find on the CPU', differing;
      END IF;
    END IF;
  END LOOP;
END $$;
DROP TABLE alg_pts;
