--
-- k-means as a combinable aggregate (kmeans_step) and its driver
-- (gpu_kmeans_distributed)
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gpuclust;
RESET client_min_messages;
SET extra_float_digits = 0;
\set SHOW_CONTEXT errors

-- three well-separated 3x3 grids (spacing 0.1) around (0,0), (10,0), (0,10)
CREATE TABLE kd_pts AS
SELECT (c * 10 + j)::int AS id,
       ARRAY[cx + (j % 3) * 0.1, cy + (j / 3) * 0.1]::real[] AS f
FROM (VALUES (0, 0.0, 0.0), (1, 10.0, 0.0), (2, 0.0, 10.0)) AS c(c, cx, cy),
     generate_series(0, 8) AS j;

-- one iteration from given centres: new centres, counts, inertia, shift
SELECT (s).centroids, (s).counts, round((s).inertia::numeric, 4) AS inertia,
       round((s).shift::numeric, 4) AS shift, (s).n, array_length((s).members, 1) AS k
FROM (SELECT kmeans_step(f, '{{1,1},{9,1},{1,9}}') AS s FROM kd_pts) q;
-- double precision features, and the id form, give the same
SELECT (kmeans_step(f::float8[], '{{1,1},{9,1},{1,9}}', id)).centroids FROM kd_pts;
-- centroids NULL: the rows' count and mean
SELECT (s).centroids, (s).counts FROM (SELECT kmeans_step(f, NULL) AS s FROM kd_pts) q;
-- a centre with no row is re-seeded with the row farthest from its centre
-- (ties: the lowest id), which leaves its cluster, as gpu_kmeans re-seeds
SELECT (s).centroids, (s).counts
FROM (SELECT kmeans_step(f, '{{1,1},{9,1},{1,9},{100,100}}', id) AS s FROM kd_pts) q;
SELECT (s).centroids, (s).counts
FROM (SELECT kmeans_step(f, '{{1,1},{9,1},{1,9},{100,100},{-100,-100}}', id) AS s FROM kd_pts) q;
-- NULL features are not clustered; no row at all gives NULL
SELECT (kmeans_step(f, '{{0,0}}')).n FROM (SELECT NULL::real[] AS f UNION ALL SELECT '{1,1}') t;
SELECT kmeans_step(f, '{{0,0}}') IS NULL AS empty FROM kd_pts WHERE false;
-- the members hash: same rows, same hash, whatever the order
SELECT (SELECT (kmeans_step(f, '{{1,1},{9,1},{1,9}}')).members FROM (SELECT * FROM kd_pts ORDER BY id) a) =
       (SELECT (kmeans_step(f, '{{1,1},{9,1},{1,9}}')).members FROM (SELECT * FROM kd_pts ORDER BY id DESC) b)
       AS same_members;

-- the aggregate is combinable, parallel safe, and its state a type of its
-- own, not internal (Citus ships only such states, in their text form)
SELECT aggcombinefn, aggtranstype::regtype, aggserialfn, aggfinalfn
FROM pg_aggregate WHERE aggfnoid = 'kmeans_step(real[], real[], bigint)'::regprocedure;
-- the state's text form (base64, little-endian here), read back and
-- checked: centres 1 and 10 on a line, rows 2 and 4 (ids 2, 4) at the
-- first; the empty second is re-seeded with the farther row (4)
SELECT (kmeans_step_final(s)).* FROM (SELECT 'kms1:AQAAAAIAAAABAAAAAAAAAAIAAAACAAAAAAAAAAAAAAAAACRAAAAAAAAAJEAAAAAAAAAYQAAAAAAAAAAAAgAAAAAAAAAAAAAAAAAAAAsAAAAAAAAAAAAAAAAAAAAAAIA/AAAAAAAAAAAAAAAAAgAAAAAAAAAAABBBAAAAAAEAAAAAAAAABAAAAAAAAAAAAIA/AAAgQQAAAEAAAIBA'::kmeans_step_state AS s) q;
SELECT 'kms1:AQAAAAIAAAABAAAAAAAAAAIAAAACAAAAAAAAAAAAAAAAACRAAAAAAAAAJEAAAAAAAAAYQAAAAAAAAAAAAgAAAAAAAAAAAAAAAAAAAAsAAAAAAAAAAAAAAAAAAAAAAIA/AAAAAAAAAAAAAAAAAgAAAAAAAAAAABBBAAAAAAEAAAAAAAAABAAAAAAAAAAAAIA/AAAgQQAAAEAAAIBA'::kmeans_step_state::text
     = 'kms1:AQAAAAIAAAABAAAAAAAAAAIAAAACAAAAAAAAAAAAAAAAACRAAAAAAAAAJEAAAAAAAAAYQAAAAAAAAAAAAgAAAAAAAAAAAAAAAAAAAAsAAAAAAAAAAAAAAAAAAAAAAIA/AAAAAAAAAAAAAAAAAgAAAAAAAAAAABBBAAAAAAEAAAAAAAAABAAAAAAAAAAAAIA/AAAgQQAAAEAAAIBA' AS round_trip;
-- what is not a state: 22P02
SELECT 'abc'::kmeans_step_state;
SELECT 'kms1:not base64!'::kmeans_step_state;
SELECT 'kms1:AQAAAAIAAAA='::kmeans_step_state;
-- 3 far rows for k = 2, a far row in slot 5
SELECT 'kms1:AQAAAAIAAAABAAAAAAAAAAMAAAACAAAAAAAAAAAAAAAAACRAAAAAAAAAJEAAAAAAAAAYQAAAAAAAAAAAAgAAAAAAAAAAAAAAAAAAAAsAAAAAAAAAAAAAAAAAAAAAAIA/AAAAAAAAAAAAAAAAAgAAAAAAAAAAABBBAAAAAAEAAAAAAAAABAAAAAAAAAAAAIA/AAAgQQAAAEAAAIBA'::kmeans_step_state;
SELECT 'kms1:AQAAAAIAAAABAAAAAAAAAAIAAAACAAAAAAAAAAAAAAAAACRAAAAAAAAAJEAAAAAAAAAYQAAAAAAAAAAAAgAAAAAAAAAAAAAAAAAAAAsAAAAAAAAAAAAAAAAAAAAAAIA/AAAAAAAAAAAAAAAAAgAAAAAAAAAAABBBAAAAAAUAAAAAAAAABAAAAAAAAAAAAIA/AAAgQQAAAEAAAIBA'::kmeans_step_state;
SELECT DISTINCT proparallel FROM pg_proc WHERE proname LIKE 'kmeans_step%';

-- a partitioned table: with enable_partitionwise_aggregate, one partial
-- aggregate per partition, combined; the same result up to the order of
-- the double sums (the inertia's last bits)
CREATE TABLE kd_part (id int, f real[]) PARTITION BY RANGE (id);
CREATE TABLE kd_part1 PARTITION OF kd_part FOR VALUES FROM (0) TO (15);
CREATE TABLE kd_part2 PARTITION OF kd_part FOR VALUES FROM (15) TO (100);
INSERT INTO kd_part SELECT * FROM kd_pts;
SET enable_partitionwise_aggregate = on;
EXPLAIN (COSTS OFF) SELECT kmeans_step(f, '{{1,1},{9,1},{1,9}}', id) FROM kd_part;
SELECT a.centroids = b.centroids AND a.counts = b.counts AND a.members = b.members AND
       a.n = b.n AND abs(a.inertia / b.inertia - 1) < 1e-12 AS same_step
FROM (SELECT (kmeans_step(f, '{{1,1},{9,1},{1,9}}', id)).* FROM kd_part) a,
     (SELECT (kmeans_step(f, '{{1,1},{9,1},{1,9}}', id)).* FROM kd_pts) b;
SELECT centroids, iterations FROM gpu_kmeans_distributed('SELECT id, f FROM kd_part', 3,
                                                        init_centroids => '{{1,1},{9,1},{1,9}}');
RESET enable_partitionwise_aggregate;
DROP TABLE kd_part;

-- errors, naming the row when the id is given
SELECT kmeans_step(f, '{{1,1,1}}', id) FROM kd_pts;
SELECT kmeans_step(f, '{{1,1,1}}') FROM kd_pts;
SELECT kmeans_step(CASE WHEN id = 4 THEN '{1,NaN}' ELSE f END, '{{0,0}}', id) FROM kd_pts;
SELECT kmeans_step(CASE WHEN id = 5 THEN '{1,NULL}' ELSE f END, '{{0,0}}', id) FROM kd_pts;
SELECT kmeans_step(f, '{{0,0}}', NULL) FROM kd_pts;
SELECT kmeans_step(f, '{0,0}') FROM kd_pts;
SELECT kmeans_step(f, '{{0,NaN}}') FROM kd_pts;
SELECT kmeans_step(f, CASE WHEN id = 3 THEN '{{1,1}}' ELSE '{{0,0}}' END::real[]) FROM kd_pts;

-- the driver: the model of gpu_kmeans_fit, from the same initial centres
SELECT * FROM gpu_kmeans_distributed('SELECT id, f FROM kd_pts', 3,
                                     init_centroids => '{{1,1},{9,1},{1,9}}');
SELECT d.centroids = f.centroids AS same_centroids, d.iterations = f.iterations AS same_iterations,
       abs(d.inertia - f.inertia) < 1e-9 AS same_inertia
FROM gpu_kmeans_distributed('SELECT id, f FROM kd_pts', 3, init_centroids => '{{1,1},{9,1},{1,9}}') d,
     gpu_kmeans_fit('SELECT id, f FROM kd_pts', 3, init_centroids => '{{1,1},{9,1},{1,9}}') f;
-- an empty cluster re-seeded as gpu_kmeans_fit re-seeds it
SELECT d.centroids = f.centroids AS same_centroids, d.iterations = f.iterations AS same_iterations,
       d.centroids
FROM gpu_kmeans_distributed('SELECT id, f FROM kd_pts ORDER BY id', 4,
                            init_centroids => '{{1,1},{9,1},{1,9},{100,100}}') d,
     gpu_kmeans_fit('SELECT id, f FROM kd_pts ORDER BY id', 4,
                    init_centroids => '{{1,1},{9,1},{1,9},{100,100}}') f;
-- re-seeding and convergence, as gpu_kmeans_fit (tol 0).  Case 1: a step
-- that re-seeds is not converged, even with the labels unchanged: rows 100,
-- 100, 0..4 from centres 2, 103, 1000; step 1 re-seeds the empty centre with
-- the first 100, both 100s then tie to centre 2, and step 2 (labels
-- unchanged) re-seeds it with the row 0; the fixpoint is (3, 100, 0.5)
-- after 4 steps.  Case 2: a row on its centre seeds no cluster: rows 100,
-- 100, 0 from centres 0, 0, 0; step 1 re-seeds the two empty centres with
-- the 100s (d2 > 0), then every row sits on a centre and the spare one
-- keeps its place
CREATE TABLE kd_line AS
SELECT i::int AS id, ARRAY[v]::real[] AS f
FROM unnest('{100,100,0,1,2,3,4}'::real[]) WITH ORDINALITY AS t(v, i);
SELECT c.no, d.centroids, d.iterations, d.converged, d.centroids = f.centroids AS same_centroids,
       d.iterations = f.iterations AS same_iterations
FROM (VALUES (1, 'SELECT id, f FROM kd_line ORDER BY id', '{{2},{103},{1000}}'::real[]),
             (2, 'SELECT id, f FROM kd_line WHERE id <= 3 ORDER BY id', '{{0},{0},{0}}'))
       AS c(no, src, init),
     LATERAL gpu_kmeans_distributed(c.src, 3, tol => 0, init_centroids => c.init) d,
     LATERAL gpu_kmeans_fit(c.src, 3, tol => 0, init_centroids => c.init) f
ORDER BY c.no;
DROP TABLE kd_line;
-- random seeding draws the rows gpu_kmeans's random init draws (same seed, same order)
SELECT d.centroids = f.centroids AS same_centroids, d.iterations = f.iterations AS same_iterations
FROM gpu_kmeans_distributed('SELECT id, f FROM kd_pts ORDER BY id', 3, init => 'random', seed => 7) d,
     gpu_kmeans_fit('SELECT id, f FROM kd_pts ORDER BY id', 3, init => 'random', seed => 7, device => 'cpu') f;

-- a harder problem: 3000 random points in 5-d, k = 12, tol 0 (to convergence)
CREATE TABLE kd_rand AS
SELECT i AS id,
       ARRAY(SELECT ((i * 2654435761 + j * 40503) % 10007) / 1000.0
             FROM generate_series(1, 5) j)::real[] AS f
FROM generate_series(1, 3000) i;
WITH d AS (SELECT * FROM gpu_kmeans_distributed('SELECT id, f FROM kd_rand ORDER BY id', 12,
                                               tol => 0, init => 'random', seed => 3)),
     f AS (SELECT * FROM gpu_kmeans_fit('SELECT id, f FROM kd_rand ORDER BY id', 12, tol => 0,
                                        init => 'random', seed => 3, device => 'cpu'))
SELECT d.iterations = f.iterations AS same_iterations, d.converged, f.converged,
       (SELECT max(abs(a - b)) FROM unnest(d.centroids, f.centroids) AS u(a, b)) < 1e-5 AS centroids_close,
       abs(d.inertia / f.inertia - 1) < 1e-9 AS same_inertia,
       (SELECT count(*) FROM kd_rand p
        WHERE kmeans_assign(p.f, d.centroids) <> kmeans_assign(p.f, f.centroids)) AS label_diff
FROM d, f;

-- k-means|| (the default): the core's k-means|| with each row's draw keyed
-- by its id, so the same seeds in any row order (then the Lloyd iterations,
-- up to the order of the sums)
SELECT centroids, iterations, converged
FROM gpu_kmeans_distributed('SELECT id, f FROM kd_pts', 3, seed => 1);
SELECT a.iterations = b.iterations AND
       (SELECT max(abs(x - y)) FROM unnest(a.centroids, b.centroids) AS u(x, y)) < 1e-5
       AS same_in_any_order
FROM gpu_kmeans_distributed('SELECT id, f FROM kd_rand ORDER BY id', 12, seed => 5) a,
     gpu_kmeans_distributed('SELECT id, f FROM kd_rand ORDER BY id DESC', 12, seed => 5) b;
-- ids that are the rows' 0-based positions: gpu_kmeans's k-means||
SELECT d.iterations = f.iterations AS same_iterations,
       (SELECT max(abs(x - y)) FROM unnest(d.centroids, f.centroids) AS u(x, y)) < 1e-5 AS same_centroids
FROM gpu_kmeans_distributed('SELECT id - 1, f FROM kd_rand ORDER BY id', 12, seed => 5) d,
     gpu_kmeans_fit('SELECT id - 1, f FROM kd_rand ORDER BY id', 12, init => 'k-means||',
                    seed => 5, device => 'cpu') f;
-- the sampling scalar
SELECT count(*) FILTER (WHERE kmeans_parallel_sample(f, '{{0,0}}', id, 1, 1, 27, 1e9, 1)) AS all_sampled,
       count(*) FILTER (WHERE kmeans_parallel_sample(f, '{{0,0}}', id, 1, 1, 27, 0, 1)) AS none_sampled
FROM kd_pts;

-- the positional draw's counts: per pivot, the rows whose id is below it
SELECT kmeans_rank_counts(id, '{0,5,5,11,20,1000}') FROM kd_pts;
SELECT kmeans_rank_counts(id, '{-9223372036854775808,9223372036854775807}') FROM kd_pts;
SELECT kmeans_rank_counts(id / 3, '{1,2,3}') FROM kd_pts;	-- equal ids
SELECT kmeans_rank_counts(id, '{}') FROM kd_pts;
SELECT kmeans_rank_counts(id, '{1}') FROM kd_pts WHERE false;	-- no rows: NULL
-- combined over parallel workers: the counts of a serial scan
CREATE TABLE kd_ranks AS SELECT (i * 7919) % 100003 AS id FROM generate_series(1, 100000) i;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
EXPLAIN (COSTS OFF) SELECT kmeans_rank_counts(id, '{1000}') FROM kd_ranks;
SELECT kmeans_rank_counts(id, '{0,1000,50000,99999,100003}') =
       ARRAY[count(*) FILTER (WHERE id < 0), count(*) FILTER (WHERE id < 1000),
             count(*) FILTER (WHERE id < 50000), count(*) FILTER (WHERE id < 99999),
             count(*) FILTER (WHERE id < 100003)] AS parallel_equals_count
FROM kd_ranks;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET max_parallel_workers_per_gather;
DROP TABLE kd_ranks;
-- the combine function called directly leaves its arguments as they are
SELECT kmeans_rank_counts_combine('{5,1,2}', '{5,3,4}'), kmeans_rank_counts_combine(NULL, '{5,3,4}'),
       kmeans_rank_counts_combine('{5,1,2}', NULL), kmeans_rank_counts_combine(NULL, NULL);
SELECT kmeans_rank_counts_final('{5,7,1,2}');	-- malformed: even length
-- its errors
SELECT kmeans_rank_counts(id, '{5,1}') FROM kd_pts;
SELECT kmeans_rank_counts(id, NULL) FROM kd_pts;
SELECT kmeans_rank_counts(id, '{1,NULL}') FROM kd_pts;
SELECT kmeans_rank_counts(id, '{{1,2},{3,4}}') FROM kd_pts;
SELECT kmeans_rank_counts(NULLIF(id, 12), '{1}') FROM kd_pts;
SELECT kmeans_rank_counts(id, ARRAY[id]) FROM kd_pts;
SELECT kmeans_rank_counts_combine('{5,1,2}', '{6,3,4}');
SELECT kmeans_rank_counts_combine('{5,1,2}', '{3,4}');
SELECT kmeans_rank_counts_combine('{9,5,1,2,0}', '{9,5,1,2,0}');
-- the draw narrows by id ranges, in (id, features) order: ids spread over
-- the whole bigint range, or equal for many rows, draw the rows that ids
-- numbering the rows in that order draw
SELECT a.centroids = b.centroids AS same_centroids
FROM gpu_kmeans_distributed('SELECT id * 3000000000000000 - 4500000000000000000, f FROM kd_rand', 12,
                            init => 'random', seed => 9, max_iter => 1) a,
     gpu_kmeans_distributed('SELECT id, f FROM kd_rand', 12, init => 'random', seed => 9, max_iter => 1) b;
SELECT a.centroids = b.centroids AS same_centroids
FROM gpu_kmeans_distributed('SELECT id % 7, f FROM kd_rand', 12, init => 'random', seed => 9, max_iter => 1) a,
     gpu_kmeans_distributed('SELECT row_number() OVER (ORDER BY id % 7, f), f FROM kd_rand', 12,
                            init => 'random', seed => 9, max_iter => 1) b;
-- errors of the driver
SELECT setseed(0.25);	-- a source that changes from pass to pass
SELECT * FROM gpu_kmeans_distributed('SELECT id, f FROM kd_pts WHERE random() < 0.7', 3, init => 'random');
SELECT * FROM gpu_kmeans_distributed('SELECT id, f FROM kd_pts', 28);
SELECT * FROM gpu_kmeans_distributed('SELECT id, f FROM kd_pts WHERE false', 2);
SELECT * FROM gpu_kmeans_distributed('SELECT id, f FROM kd_pts', 0);
SELECT * FROM gpu_kmeans_distributed('SELECT id, f FROM kd_pts', 2, max_iter => 0);
SELECT * FROM gpu_kmeans_distributed('SELECT id, f FROM kd_pts', 2, tol => -1);
SELECT * FROM gpu_kmeans_distributed('SELECT id, f FROM kd_pts', 2, init => 'k-means++');
SELECT * FROM gpu_kmeans_distributed('SELECT id, f FROM kd_pts', 2, init => 'kmeans');
SELECT * FROM gpu_kmeans_distributed('SELECT id, f FROM kd_pts', 2, init => 'random',
                                     init_centroids => '{{0,0},{1,1}}');
SELECT * FROM gpu_kmeans_distributed('SELECT id, ''{1,1}''::real[] FROM kd_pts', 2);
SELECT * FROM gpu_kmeans_distributed('SELECT id, f FROM kd_pts', NULL);
SELECT * FROM gpu_kmeans_distributed('SELECT id, f FROM kd_pts', 2, init_centroids => '{{0,0}}');
SELECT * FROM gpu_kmeans_distributed('SELECT id, f FROM kd_pts', 1, init_centroids => '{{0,0,0}}');
SELECT * FROM gpu_kmeans_distributed('SELECT id, f, 1 FROM kd_pts', 2);
SELECT * FROM gpu_kmeans_distributed('DELETE FROM kd_pts RETURNING id, f', 2);
SELECT * FROM gpu_kmeans_distributed('kd_pts', 2);
SELECT * FROM gpu_kmeans_distributed('SELECT id, CASE WHEN id = 12 THEN ''{1,2,3}'' ELSE f END FROM kd_pts', 2);
SELECT * FROM gpu_kmeans_distributed('SELECT NULL::int, f FROM kd_pts', 2);

-- statement_timeout cancels it between (or within) its passes
CREATE TABLE kd_big AS
SELECT i AS id, ARRAY[random(), random(), random(), random()]::real[] AS f
FROM generate_series(1, 200000) i;
SET statement_timeout = '300ms';
\set SHOW_CONTEXT never
SELECT * FROM gpu_kmeans_distributed('SELECT id, f FROM kd_big', 50, tol => 0);
\set SHOW_CONTEXT errors
RESET statement_timeout;


-- the device argument (kmeans_step(features, centroids, id, device)): the
-- rows are buffered and labelled a block at a time, on any device the
-- labels of kmeans_assign and the sums in the rows' order, so every field
-- is the same, bit for bit, as without the argument.  kd_5k: 5,000 rows,
-- far more than the first buffer (256 rows, doubled as rows come)
CREATE TABLE kd_5k AS
SELECT i AS id,
       ARRAY(SELECT ((i * 2654435761 + j * 40503) % 10007) / 1000.0
             FROM generate_series(1, 5) j)::real[] AS f
FROM generate_series(1, 5000) i;
ALTER TABLE kd_5k ADD PRIMARY KEY (id);
SELECT array_agg(f ORDER BY id) AS c12 FROM kd_5k WHERE id <= 12 \gset
WITH ref AS (SELECT kmeans_step(f, :'c12'::real[], id) AS r FROM kd_5k)
SELECT dev, (SELECT r FROM ref) IS NOT DISTINCT FROM
            (SELECT kmeans_step(f, :'c12'::real[], id, dev) FROM kd_5k) AS same_step
FROM unnest(ARRAY['cpu', 'auto', NULL]) AS dev;
SELECT (SELECT kmeans_step(f::float8[], :'c12'::real[], id, 'cpu') FROM kd_5k) IS NOT DISTINCT FROM
       (SELECT kmeans_step(f, :'c12'::real[], id) FROM kd_5k) AS same_float8;
-- against the rows without the aggregate: the counts of kmeans_assign's
-- labels, and the centres the float32 rounding of each label's avg (the
-- same double sums in the same order); the members whatever the order
WITH s AS (SELECT (kmeans_step(f, :'c12'::real[], id, 'cpu')).* FROM kd_5k),
     a AS (SELECT kmeans_assign(f, :'c12'::real[]) AS c, count(*) AS cnt,
                  ARRAY[avg(f[1])::real, avg(f[2])::real, avg(f[3])::real, avg(f[4])::real,
                        avg(f[5])::real] AS mean
           FROM kd_5k GROUP BY 1)
SELECT s.n, s.counts = (SELECT array_agg(cnt ORDER BY c) FROM a) AS counts_of_kmeans_assign,
       s.centroids = (SELECT array_agg(mean ORDER BY c) FROM a) AS centroids_of_avg,
       s.members = (SELECT (kmeans_step(f, :'c12'::real[], id)).members
                    FROM (SELECT * FROM kd_5k ORDER BY id DESC) r) AS same_members_reversed
FROM s;
-- 'gpu' with no usable GPU: 0A000, the reason in the detail (where there
-- is one, the same result as 'cpu', and the same notice)
CREATE TABLE kd_c12 AS SELECT :'c12'::real[] AS c;
DO $$
DECLARE
  detail text;
  hint text;
BEGIN
  IF (SELECT value FROM gpuclust_info() WHERE key = 'gpu_usable') = 'false' THEN
    BEGIN
      PERFORM kmeans_step(f, (SELECT c FROM kd_c12), id, 'gpu') FROM kd_5k;
      RAISE NOTICE 'kmeans_step ran on device gpu without a usable GPU';
    EXCEPTION WHEN OTHERS THEN
      GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
      RAISE NOTICE 'kmeans_step on device gpu, no usable GPU: % %; a reason given: %; hint: %',
        SQLSTATE, SQLERRM, CASE WHEN coalesce(detail, '') <> '' THEN 'yes' ELSE 'no' END, hint;
    END;
  ELSIF (SELECT kmeans_step(f, (SELECT c FROM kd_c12), id, 'gpu') FROM kd_5k) IS NOT DISTINCT FROM
        (SELECT kmeans_step(f, (SELECT c FROM kd_c12), id, 'cpu') FROM kd_5k) THEN
    RAISE NOTICE 'kmeans_step on device gpu, no usable GPU: 0A000 cannot run k-means on the GPU; a reason given: yes; hint: Use device => ''cpu'' or ''auto'', or set gpuclust.device to ''cpu'' or ''auto''.';
  ELSE
    RAISE NOTICE 'kmeans_step on device gpu differs from device cpu';
  END IF;
END $$;
DROP TABLE kd_c12;
-- a device that is not one: 22023
\set VERBOSITY sqlstate
SELECT kmeans_step(f, :'c12'::real[], id, 'tpu') FROM kd_5k;
\set VERBOSITY default
SELECT kmeans_step(f, :'c12'::real[], id, 'tpu') FROM kd_5k;

-- a full buffer flushed: 2,500 rows of 16,384 features, 64 MiB of them a
-- block (1,024 rows), so three blocks; each row two halves of equal
-- values.  The same counts and members in the reverse order, the counts
-- of kmeans_assign, the centres each label's avg
CREATE TEMP VIEW kd_wide AS
SELECT i AS id, array_fill(((i * 37) % 101 / 10.0)::real, ARRAY[8192]) ||
                array_fill(((i * 53) % 97 / 10.0)::real, ARRAY[8192]) AS f
FROM generate_series(1, 2500) i;
CREATE TEMP VIEW kd_wide_c AS
SELECT ARRAY[array_fill(1::real, ARRAY[16384]),
             array_fill(5::real, ARRAY[8192]) || array_fill(2::real, ARRAY[8192]),
             array_fill(2::real, ARRAY[8192]) || array_fill(8::real, ARRAY[8192])] AS c;
CREATE TEMP TABLE kd_wide_s AS
SELECT (kmeans_step(w.f, c.c, w.id)).* FROM kd_wide w, kd_wide_c c;
SELECT n, counts, array_length(centroids, 2) AS d,
       (SELECT count(*) FROM unnest(members) m WHERE m = 0) AS zero_members
FROM kd_wide_s;
WITH a AS (SELECT kmeans_assign(w.f, c.c) AS c, count(*) AS cnt,
                  avg(w.f[1])::real AS lo, avg(w.f[16384])::real AS hi
           FROM kd_wide w, kd_wide_c c GROUP BY 1)
SELECT s.counts = (SELECT array_agg(cnt ORDER BY c) FROM a) AS counts_of_kmeans_assign,
       ARRAY(SELECT s.centroids[c + 1][1] FROM a ORDER BY c) = ARRAY(SELECT lo FROM a ORDER BY c) AND
       ARRAY(SELECT s.centroids[c + 1][8192] FROM a ORDER BY c) = ARRAY(SELECT lo FROM a ORDER BY c) AND
       ARRAY(SELECT s.centroids[c + 1][8193] FROM a ORDER BY c) = ARRAY(SELECT hi FROM a ORDER BY c) AND
       ARRAY(SELECT s.centroids[c + 1][16384] FROM a ORDER BY c) = ARRAY(SELECT hi FROM a ORDER BY c)
       AS centroids_of_avg
FROM kd_wide_s s;
SELECT s.counts = r.counts AND s.members = r.members AS same_reversed,
       s.centroids = a.centroids AND s.inertia = a.inertia AND s.members = a.members AS same_auto
FROM kd_wide_s s,
     (SELECT (kmeans_step(f, c.c, i)).*
      FROM generate_series(2500, 1, -1) i,
           LATERAL (SELECT array_fill(((i * 37) % 101 / 10.0)::real, ARRAY[8192]) ||
                           array_fill(((i * 53) % 97 / 10.0)::real, ARRAY[8192]) AS f) w,
           kd_wide_c c) r,
     (SELECT (kmeans_step(w.f, c.c, w.id, 'auto')).* FROM kd_wide w, kd_wide_c c) a;
DROP TABLE kd_wide_s;
DROP VIEW kd_wide, kd_wide_c;

-- the window form: the final function flushes the buffer and the state
-- goes on; each row the aggregate over its prefix
SELECT count(*) AS rows_,
       count(*) FILTER (WHERE w IS NOT DISTINCT FROM
                        (SELECT kmeans_step(p.f, :'c12'::real[], p.id) FROM kd_5k p WHERE p.id <= q.id))
       AS same_as_prefix
FROM (SELECT id, kmeans_step(f, :'c12'::real[], id, 'cpu')
                   OVER (ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS w
      FROM kd_5k WHERE id <= 300) q;

-- GROUP BY with 2,000 groups (a state each, hashed; spilled past
-- work_mem): each group the aggregate over its own rows
SET enable_sort = off;
SELECT count(*) AS groups,
       count(*) FILTER (WHERE g.s IS NOT DISTINCT FROM
                        (SELECT kmeans_step(p.f, :'c12'::real[], p.id) FROM kd_5k p
                         WHERE p.id = ANY (ARRAY[g.k, g.k + 2000, g.k + 4000]))) AS same_as_group
FROM (SELECT id % 2000 AS k, kmeans_step(f, :'c12'::real[], id, 'cpu') AS s
      FROM kd_5k GROUP BY 1) g;
RESET enable_sort;

-- the driver on a device: the same model; a device that is not one is an
-- error before any pass
SELECT a.centroids = b.centroids AND a.inertia = b.inertia AND a.iterations = b.iterations AND
       a.converged = b.converged AS same_model
FROM gpu_kmeans_distributed('SELECT id, f FROM kd_5k', 12, tol => 0, init => 'random', seed => 2,
                            device => 'cpu') a,
     gpu_kmeans_distributed('SELECT id, f FROM kd_5k', 12, tol => 0, init => 'random', seed => 2) b;
SELECT * FROM gpu_kmeans_distributed('SELECT id, f FROM kd_5k', 12, device => 'tpu');
SELECT * FROM gpu_kmeans_distributed('SELECT 1/0, f FROM kd_5k', 12, device => 'tpu');
DROP TABLE kd_5k;

DROP TABLE kd_pts, kd_rand, kd_big;
