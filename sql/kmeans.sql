--
-- gpu_kmeans: arguments, defaults, input types, NULL features, input order
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gpuclust;
RESET client_min_messages;
SET extra_float_digits = 0;

-- three well-separated 3x3 grids (spacing 0.1) around (0,0), (10,0), (0,10)
CREATE TABLE km_pts AS
SELECT (c * 10 + j)::int AS id,
       ARRAY[cx + (j % 3) * 0.1, cy + (j / 3) * 0.1]::real[] AS f
FROM (VALUES (0, 0.0, 0.0), (1, 10.0, 0.0), (2, 0.0, 10.0)) AS c(c, cx, cy),
     generate_series(0, 8) AS j;

-- the partition, independent of how the clusters are numbered
CREATE FUNCTION km_partition(src text, k int, init text DEFAULT 'k-means++',
                             n_init int DEFAULT 1, seed bigint DEFAULT 0)
RETURNS SETOF int[] LANGUAGE sql AS $$
  SELECT array_agg(id::int ORDER BY id)
  FROM gpu_kmeans(src, k, init => init, n_init => n_init, seed => seed)
  GROUP BY cluster_id ORDER BY min(id)
$$;

-- all defaults
SELECT count(*), count(DISTINCT cluster_id), min(cluster_id), max(cluster_id)
FROM gpu_kmeans('SELECT id, f FROM km_pts', 3);
SELECT * FROM km_partition('SELECT id, f FROM km_pts', 3);

-- every argument by name
SELECT * FROM km_partition('SELECT id, f FROM km_pts', 3, init => 'k-means++', n_init => 3, seed => 7);
SELECT count(*), count(DISTINCT cluster_id)
FROM gpu_kmeans(source => 'SELECT id, f FROM km_pts', k => 3, max_iter => 50,
                tol => 0, init => 'k-means++', n_init => 2, seed => 123,
                device => 'cpu');
-- positional
SELECT count(*), count(DISTINCT cluster_id)
FROM gpu_kmeans('SELECT id, f FROM km_pts', 3, 100, 1e-6, 'K-Means++', 1, 5, 'auto');

-- init random: two far-apart groups are found from any start
SELECT * FROM km_partition('SELECT id, f FROM km_pts WHERE id < 20', 2, init => 'random');
SELECT * FROM km_partition('SELECT id, f FROM km_pts WHERE id < 20', 2, init => 'RANDOM', n_init => 4, seed => 99);

-- init k-means|| (Bahmani et al.) and auto: the three grids
SELECT * FROM km_partition('SELECT id, f FROM km_pts', 3, init => 'k-means||');
SELECT * FROM km_partition('SELECT id, f FROM km_pts', 3, init => 'K-Means||', n_init => 3, seed => 11);
SELECT * FROM km_partition('SELECT id, f FROM km_pts', 3, init => 'auto', seed => 5);
-- auto is k-means++ below k = 256 and k-means|| from k = 256: the same
-- results; k-means||, same seed, same result; k = n
SELECT count(*) AS differing FROM (
  (SELECT * FROM gpu_kmeans('SELECT id, f FROM km_pts', 5, init => 'auto', seed => 42)
   EXCEPT ALL
   SELECT * FROM gpu_kmeans('SELECT id, f FROM km_pts', 5, init => 'k-means++', seed => 42))
  UNION ALL
  (SELECT * FROM gpu_kmeans('SELECT i, ARRAY[i % 97, i % 89]::real[] FROM generate_series(1, 1500) i',
                            256, init => 'auto', seed => 3, max_iter => 3)
   EXCEPT ALL
   SELECT * FROM gpu_kmeans('SELECT i, ARRAY[i % 97, i % 89]::real[] FROM generate_series(1, 1500) i',
                            256, init => 'k-means||', seed => 3, max_iter => 3))
  UNION ALL
  (SELECT * FROM gpu_kmeans('SELECT id, f FROM km_pts', 4, init => 'k-means||', n_init => 2, seed => -8)
   EXCEPT ALL
   SELECT * FROM gpu_kmeans('SELECT id, f FROM km_pts', 4, init => 'k-means||', n_init => 2, seed => -8))
) AS d;
SELECT count(DISTINCT cluster_id), max(distance)
FROM gpu_kmeans('SELECT id, f FROM km_pts WHERE id < 5', 5, init => 'k-means||');

-- max_iter 1: one assignment step, every row labelled
SELECT count(*), bool_and(cluster_id BETWEEN 0 AND 2), bool_and(distance >= 0)
FROM gpu_kmeans('SELECT id, f FROM km_pts', 3, max_iter => 1);

-- same seed, same result (k-means++ and random, several n_init)
SELECT count(*) AS differing FROM (
  (SELECT * FROM gpu_kmeans('SELECT id, f FROM km_pts', 5, seed => 42)
   EXCEPT ALL
   SELECT * FROM gpu_kmeans('SELECT id, f FROM km_pts', 5, seed => 42))
  UNION ALL
  (SELECT * FROM gpu_kmeans('SELECT id, f FROM km_pts', 4, init => 'random', n_init => 3, seed => -1)
   EXCEPT ALL
   SELECT * FROM gpu_kmeans('SELECT id, f FROM km_pts', 4, init => 'random', n_init => 3, seed => -1))
) AS d;

-- distance is the Euclidean distance to the mean of the row's cluster
WITH r AS (SELECT * FROM gpu_kmeans('SELECT id, f FROM km_pts', 3, tol => 0)),
     j AS (SELECT r.cluster_id, r.distance, p.f FROM r JOIN km_pts p USING (id)),
     c AS (SELECT cluster_id, avg(f[1]) AS c1, avg(f[2]) AS c2 FROM j GROUP BY cluster_id)
SELECT bool_and(abs(distance - sqrt((f[1] - c1) ^ 2 + (f[2] - c2) ^ 2)) < 1e-4) AS consistent,
       round(sum(distance ^ 2)::numeric, 3) AS inertia
FROM j JOIN c USING (cluster_id);

-- k = n: every row is its own centre
SELECT count(DISTINCT cluster_id), max(distance)
FROM gpu_kmeans('SELECT id, f FROM km_pts WHERE id < 5', 5);

-- k = 1: distance to the overall mean
SELECT id, cluster_id, round(distance::numeric, 4) AS distance
FROM gpu_kmeans('SELECT i, ARRAY[i, 0] FROM generate_series(1, 5) i', 1);

-- id types: smallint, integer, bigint (result is bigint); features real[],
-- double precision[], numeric[], integer[], text (cast to real[]), domains
SELECT * FROM km_partition('SELECT id::smallint, f FROM km_pts', 3);
SELECT * FROM km_partition('SELECT id::bigint, f::float8[] FROM km_pts', 3);
SELECT * FROM km_partition('SELECT id, f::numeric[] FROM km_pts', 3);
SELECT * FROM km_partition('SELECT id, (f::numeric[])::int[] FROM km_pts', 3);
SELECT * FROM km_partition('SELECT id, f::text FROM km_pts', 3);
CREATE DOMAIN km_vec AS real[];
CREATE DOMAIN km_id AS bigint;
SELECT * FROM km_partition('SELECT id::km_id, f::km_vec FROM km_pts', 3);
-- a type with a cast function to real[], as pgvector's vector has
-- (vector_to_float4(vector, integer, boolean))
CREATE TYPE km_point AS (x real, y real);
CREATE FUNCTION km_point_to_real(p km_point, typmod int, explicit boolean)
RETURNS real[] LANGUAGE sql IMMUTABLE STRICT AS 'SELECT ARRAY[p.x, p.y]';
CREATE CAST (km_point AS real[]) WITH FUNCTION km_point_to_real(km_point, int, boolean);
SELECT * FROM km_partition('SELECT id, ROW(f[1], f[2])::km_point FROM km_pts', 3);
SELECT id, pg_typeof(id), cluster_id
FROM gpu_kmeans('SELECT x, ARRAY[1.5] FROM (VALUES (-9223372036854775808), (9223372036854775807)) v(x)', 1);
SELECT id, pg_typeof(id), cluster_id
FROM gpu_kmeans('SELECT x::smallint, ARRAY[x] FROM (VALUES (-32768), (32767)) v(x)', 1);
SELECT id, pg_typeof(id), cluster_id
FROM gpu_kmeans('SELECT x::int, ARRAY[x] FROM (VALUES (-2147483648), (2147483647)) v(x)', 1);

-- NULL features: kept, unclustered, NULL distance; in input order
SELECT id, cluster_id IS NULL AS unclustered, distance IS NULL AS no_distance
FROM gpu_kmeans($$SELECT id, CASE WHEN id % 10 = 4 THEN NULL ELSE f END
                  FROM km_pts ORDER BY id DESC$$, 3);
-- only NULL features: rows come back unclustered
SELECT * FROM gpu_kmeans('SELECT i, NULL::real[] FROM generate_series(1, 3) i', 2);
-- empty source: no rows, whatever k
SELECT * FROM gpu_kmeans('SELECT id, f FROM km_pts WHERE false', 100);
SELECT count(*) FROM gpu_kmeans('SELECT 1::int, ARRAY[1.0] LIMIT 0', 1);

-- duplicate ids are returned as given; trailing semicolon, comment, VALUES
SELECT id FROM gpu_kmeans('SELECT 7, ARRAY[1.0] UNION ALL SELECT 7, ARRAY[2.0];', 1);
SELECT count(*) FROM gpu_kmeans(E'VALUES (1, ARRAY[1.0]), (2, ARRAY[2.0]) -- comment', 2);
SELECT count(*) FROM gpu_kmeans('TABLE km_pts', 3);

-- more rows than one fetch batch, many dimensions
SELECT count(*), count(DISTINCT cluster_id)
FROM gpu_kmeans($$SELECT i, array_fill((i % 4)::real, ARRAY[64])
                  FROM generate_series(1, 25000) i$$, 4, seed => 3);

-- called in the select list
SELECT (gpu_kmeans('SELECT i, ARRAY[i] FROM generate_series(1, 2) i', 2)).id;

DROP FUNCTION km_partition(text, int, text, int, bigint);
DROP TABLE km_pts;
DROP DOMAIN km_vec;
DROP DOMAIN km_id;
DROP CAST (km_point AS real[]);
DROP FUNCTION km_point_to_real(km_point, int, boolean);
DROP TYPE km_point;
