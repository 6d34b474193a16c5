--
-- DBSCAN over partitions (gpu_dbscan_distributed's building blocks:
-- dbscan_bounds, dbscan_histogram, dbscan_partitions, dbscan_partition;
-- the method: src/core/dbscan/dbscan.h)
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gpuclust;
RESET client_min_messages;
SET extra_float_digits = 0;
\set SHOW_CONTEXT errors

-- 2-D points: a line of 8 rows 0.5 apart along x from 0 to 3.5 (a cluster
-- at eps 0.6, min_pts 3, its ends border), a pair at x = 10 (noise at
-- min_pts 3), and a row with NULL features
CREATE TABLE dd_pts AS
SELECT i AS id, ARRAY[(i - 1) * 0.5, 1]::real[] AS f FROM generate_series(1, 8) i
UNION ALL SELECT 9, '{10,0}' UNION ALL SELECT 10, '{10,0.5}' UNION ALL SELECT 11, NULL;

-- the aggregates are combinable and parallel safe; dbscan_bounds' and
-- dbscan_histogram's states are float8[] (Citus ships them in their text
-- form), dbscan_partition's internal with a serialization for parallel query
SELECT a.aggfnoid::regprocedure, a.aggcombinefn, a.aggtranstype::regtype, a.aggserialfn,
       a.aggdeserialfn, a.aggfinalfn
FROM pg_aggregate a JOIN pg_proc p ON p.oid = a.aggfnoid
WHERE p.proname IN ('dbscan_bounds', 'dbscan_histogram', 'dbscan_partition')
ORDER BY a.aggfnoid::regprocedure::text COLLATE "C";
SELECT proname, proparallel, count(*)
FROM pg_proc WHERE proname LIKE 'dbscan\_%' GROUP BY 1, 2 ORDER BY 1;

--
-- dbscan_bounds(features, id): {n, lo_1 .. lo_d, hi_1 .. hi_d}
--
SELECT dbscan_bounds(f, id) FROM dd_pts;
-- double precision features give the same (as real)
SELECT dbscan_bounds(f::float8[], id) FROM dd_pts;
SELECT dbscan_bounds(ARRAY[0.1::float8, 1e-50], 1);
-- no row with features: NULL
SELECT dbscan_bounds(f, id) IS NULL AS empty FROM dd_pts WHERE false;
SELECT dbscan_bounds(NULL::real[], 1) IS NULL AS all_null;
-- combined: with enable_partitionwise_aggregate one partial aggregate per
-- partition, then the combine function
CREATE TABLE dd_part (id int, f real[]) PARTITION BY RANGE (id);
CREATE TABLE dd_part1 PARTITION OF dd_part FOR VALUES FROM (0) TO (5);
CREATE TABLE dd_part2 PARTITION OF dd_part FOR VALUES FROM (5) TO (100);
INSERT INTO dd_part SELECT * FROM dd_pts;
SET enable_partitionwise_aggregate = on;
EXPLAIN (COSTS OFF) SELECT dbscan_bounds(f, id) FROM dd_part;
SELECT dbscan_bounds(f, id) FROM dd_part;
-- another d in another partition: the combine function's error
CREATE TABLE dd_part3 PARTITION OF dd_part FOR VALUES FROM (100) TO (200);
INSERT INTO dd_part VALUES (150, '{1,2,3}');
SELECT dbscan_bounds(f, id) FROM dd_part;
DROP TABLE dd_part3;
-- the combine function reads a state as any float8[] (Citus sends its text)
SELECT dbscan_bounds_combine('{2,0,0,1,1}', '{1,-1,5,-1,5}');
SELECT dbscan_bounds_combine(NULL, '{1,-1,5,-1,5}');
SELECT dbscan_bounds_combine('{2,0,0,1,1}', '{1,-1,-1,-1,5,5,5}');
SELECT dbscan_bounds_combine('{2,0,0,1,1}', '{1,-1}');
SELECT dbscan_bounds_combine('{2,0,0,1,1}', '{1,NULL,0}');
-- errors, naming the row
SELECT dbscan_bounds(CASE WHEN id = 4 THEN '{1,2,3}' ELSE f END, id) FROM dd_pts;
SELECT dbscan_bounds(CASE WHEN id = 4 THEN '{1,NaN}' ELSE f END, id) FROM dd_pts;
SELECT dbscan_bounds(CASE WHEN id = 5 THEN '{1,NULL}' ELSE f END, id) FROM dd_pts;
SELECT dbscan_bounds(CASE WHEN id = 6 THEN '{}' ELSE f END, id) FROM dd_pts;
SELECT dbscan_bounds(CASE WHEN id = 7 THEN '{1e300,0}'::float8[] ELSE f::float8[] END, id) FROM dd_pts;
SELECT dbscan_bounds(f, CASE WHEN id <> 3 THEN id END) FROM dd_pts;

--
-- dbscan_histogram(features, dim, lo, hi, bins): counts of feature dim
--
SELECT dbscan_histogram(f, 0, 0, 10, 5) FROM dd_pts;
SELECT dbscan_histogram(f::float8[], 1, 0, 1, 2) FROM dd_pts;
-- outside [lo, hi]: the end bins; lo = hi: every row in bin 0
SELECT dbscan_histogram(f, 0, 1, 3, 4) FROM dd_pts;
SELECT dbscan_histogram(f, 0, 2, 2, 3) FROM dd_pts;
SELECT dbscan_histogram(f, 0, 0, 10, 5) IS NULL AS empty FROM dd_pts WHERE id = 11;
SELECT dbscan_histogram(f, 0, 0, 10, 5) FROM dd_part;
SELECT dbscan_histogram_combine('{1,2,3}', '{10,20,30}');
SELECT dbscan_histogram_combine('{1,2,3}', '{10,20}');
-- errors
SELECT dbscan_histogram(f, 0, 0, 10, 0) FROM dd_pts;
SELECT dbscan_histogram(f, 0, 0, 10, 1048577) FROM dd_pts;
SELECT dbscan_histogram(f, 0, 10, 0, 5) FROM dd_pts;
SELECT dbscan_histogram(f, 0, 'NaN', 10, 5) FROM dd_pts;
SELECT dbscan_histogram(f, 0, 0, 'Infinity', 5) FROM dd_pts;
SELECT dbscan_histogram(f, -1, 0, 10, 5) FROM dd_pts;
SELECT dbscan_histogram(f, 2, 0, 10, 5) FROM dd_pts;
SELECT dbscan_histogram(f, NULL, 0, 10, 5) FROM dd_pts;
SELECT dbscan_histogram(f, 0, 0, 10, CASE WHEN id = 5 THEN 6 ELSE 5 END) FROM dd_pts;
SELECT dbscan_histogram(CASE WHEN id = 2 THEN '{1,Infinity}' ELSE f END, 0, 0, 10, 5) FROM dd_pts;

--
-- dbscan_partitions(features, plan): plan {d, dim, halo, cut_1 .. cut_(P-1)}
--
-- three slabs along x cut at 1 and 2.5, halo 0.6: a row within 0.6 of a
-- cut is held by both sides (shared); its home is the slab it lies in
SELECT p.id, p.f, q.*
FROM dd_pts p, dbscan_partitions(p.f, '{2,0,0.6,1,2.5}') q ORDER BY p.id, q.part;
-- double precision features: x as real
SELECT * FROM dbscan_partitions('{0.1,7}'::float8[], '{2,0,0.6,1,2.5}');
SELECT * FROM dbscan_partitions('{0.1,7}'::float8[], '{2,1,0.6,1,2.5}');
-- one partition; a halo of +Infinity (every row everywhere)
SELECT * FROM dbscan_partitions('{5,5}'::real[], '{2,1,0}');
SELECT * FROM dbscan_partitions('{5,5}'::real[], '{2,0,Infinity,1,2}');
-- NULL features: one row, partition 0, no x
SELECT * FROM dbscan_partitions(NULL::real[], '{2,0,0.6,1,2.5}');
-- bad plans (22023)
SELECT * FROM dbscan_partitions('{1,1}'::real[], NULL);
SELECT * FROM dbscan_partitions('{1,1}'::real[], '{2,0}');
SELECT * FROM dbscan_partitions('{1,1}'::real[], '{{2,0},{0.6,1}}');
SELECT * FROM dbscan_partitions('{1,1}'::real[], '{2,0,NULL}');
SELECT * FROM dbscan_partitions('{1,1}'::real[], '{2.5,0,0.6}');
SELECT * FROM dbscan_partitions('{1,1}'::real[], '{0,0,0.6}');
SELECT * FROM dbscan_partitions('{1,1}'::real[], '{2,-1,0.6}');
SELECT * FROM dbscan_partitions('{1,1}'::real[], '{2,2,0.6}');
SELECT * FROM dbscan_partitions('{1,1}'::real[], '{2,0,-0.6}');
SELECT * FROM dbscan_partitions('{1,1}'::real[], '{2,0,NaN}');
SELECT * FROM dbscan_partitions('{1,1}'::real[], '{2,0,0.6,2,1}');
SELECT * FROM dbscan_partitions('{1,1}'::real[], '{2,0,0.6,1,1}');
SELECT * FROM dbscan_partitions('{1,1}'::real[], '{2,0,0.6,1,Infinity}');
SELECT * FROM dbscan_partitions('{1,1}'::real[], array_fill(1::float8, ARRAY[65539]));
-- a row that does not match the plan, or bad features
SELECT * FROM dbscan_partitions('{1,1,1}'::real[], '{2,0,0.6,1,2.5}');
SELECT * FROM dbscan_partitions('{1,NaN}'::real[], '{2,0,0.6,1,2.5}');
SELECT * FROM dbscan_partitions('{1,1e300}'::float8[], '{2,0,0.6,1,2.5}');
-- a plan that changes from row to row is read again: one cut at 1, the
-- halo 0.3 x id
SELECT p.id, p.f, q.part, q.home, q.shared
FROM dd_pts p, dbscan_partitions(p.f, ARRAY[2, 0, p.id * 0.3, 1]::float8[]) q
WHERE p.id <= 4 ORDER BY p.id, q.part;

--
-- dbscan_partition(part, id, x, home, shared, eps, min_pts, device): one
-- partition's DBSCAN, its summary as a bytea (core/dbscan/dbscan.h's layout,
-- in the host's byte order)
--
-- one partition holding every row: the header's part, clusters, home rows
-- and links, then the lowest id of each cluster
SELECT q.part, octet_length(s) AS bytes,
       encode(substring(s from 1 for 4), 'escape') AS magic,
       get_byte(s, 12) + (get_byte(s, 13) << 8) AS comps,
       get_byte(s, 16) + (get_byte(s, 17) << 8) AS rows,
       get_byte(s, 24) + (get_byte(s, 25) << 8) AS links,
       get_byte(s, 32) AS comp0_min
FROM (SELECT q.part, dbscan_partition(q.part, p.id, q.x, q.home, q.shared, 0.6, 3, 'cpu') AS s
      FROM dd_pts p, dbscan_partitions(p.f, '{2,0,1.5}') q GROUP BY q.part) q;
-- the rows' order does not matter: the summary is the same
SELECT (SELECT dbscan_partition(0, id, f, 0, false, 0.6, 3, 'cpu')
        FROM (SELECT * FROM dd_pts ORDER BY id) a) =
       (SELECT dbscan_partition(0, id, f, 0, false, 0.6, 3, 'cpu')
        FROM (SELECT * FROM dd_pts ORDER BY id DESC) b) AS same_summary;
-- three slabs: a summary each
SELECT q.part, octet_length(dbscan_partition(q.part, p.id, q.x, q.home, q.shared, 0.6, 3, 'cpu'))
FROM dd_pts p, dbscan_partitions(p.f, '{2,0,1.2,1,2.5}') q GROUP BY q.part ORDER BY q.part;
-- no rows: NULL; only rows without features: a summary of them
SELECT dbscan_partition(0, id, f, 0, false, 0.6, 3, 'cpu') IS NULL AS empty FROM dd_pts WHERE false;
SELECT octet_length(dbscan_partition(0, id, f, 0, false, 0.6, 3, 'cpu')) FROM dd_pts WHERE id = 11;
-- device NULL: gpuclust.device
SET gpuclust.device = 'cpu';
SELECT octet_length(dbscan_partition(0, id, f, 0, false, 0.6, 3, NULL)) FROM dd_pts;
RESET gpuclust.device;

-- partial aggregates combined (a partitioned table, partitionwise): the
-- same summary as in one piece
EXPLAIN (COSTS OFF)
SELECT dbscan_partition(0, id, f, 0, false, 0.6, 3, 'cpu') FROM dd_part;
SELECT (SELECT dbscan_partition(0, id, f, 0, false, 0.6, 3, 'cpu') FROM dd_part) =
       (SELECT dbscan_partition(0, id, f, 0, false, 0.6, 3, 'cpu') FROM dd_pts) AS same_summary;
RESET enable_partitionwise_aggregate;

-- the driver's query under parallel query: Partial HashAggregate in the
-- workers (their states serialized), Finalize over Gather; the summaries
-- are those of a plan without workers
CREATE TABLE dd_many AS
SELECT i AS id, ARRAY[(i % 100) * 0.25, (i / 100) * 0.25]::real[] AS f
FROM generate_series(1, 5000) i;
ANALYZE dd_many;
CREATE TABLE dd_serial AS
SELECT q.part, dbscan_partition(q.part, s.id, q.x, q.home, q.shared, 0.3, 4, 'cpu') AS summary
FROM (SELECT id, f FROM dd_many) AS s(id, f)
CROSS JOIN LATERAL dbscan_partitions(s.f, '{2,0,0.6,5,10,15}') AS q GROUP BY q.part;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
EXPLAIN (COSTS OFF)
SELECT q.part, dbscan_partition(q.part, s.id, q.x, q.home, q.shared, 0.3, 4, 'cpu')
FROM (SELECT id, f FROM dd_many) AS s(id, f)
CROSS JOIN LATERAL dbscan_partitions(s.f, '{2,0,0.6,5,10,15}') AS q GROUP BY q.part;
SELECT p.part, p.summary = dd_serial.summary AS same_summary
FROM (SELECT q.part, dbscan_partition(q.part, s.id, q.x, q.home, q.shared, 0.3, 4, 'cpu') AS summary
      FROM (SELECT id, f FROM dd_many) AS s(id, f)
      CROSS JOIN LATERAL dbscan_partitions(s.f, '{2,0,0.6,5,10,15}') AS q GROUP BY q.part) p
JOIN dd_serial USING (part) ORDER BY part;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET max_parallel_workers_per_gather;
DROP TABLE dd_many, dd_serial;

-- errors: the parameters as gpu_dbscan checks them
SELECT dbscan_partition(0, id, f, 0, false, 0, 3, 'cpu') FROM dd_pts;
SELECT dbscan_partition(0, id, f, 0, false, 'NaN', 3, 'cpu') FROM dd_pts;
SELECT dbscan_partition(0, id, f, 0, false, 'Infinity', 3, 'cpu') FROM dd_pts;
SELECT dbscan_partition(0, id, f, 0, false, NULL, 3, 'cpu') FROM dd_pts;
SELECT dbscan_partition(0, id, f, 0, false, 0.6, 0, 'cpu') FROM dd_pts;
SELECT dbscan_partition(0, id, f, 0, false, 0.6, NULL, 'cpu') FROM dd_pts;
SELECT dbscan_partition(0, id, f, 0, false, 0.6, 3, 'tpu') FROM dd_pts;
-- the same parameters in every row, one partition per group
SELECT dbscan_partition(0, id, f, 0, false, CASE WHEN id = 3 THEN 0.7 ELSE 0.6 END, 3, 'cpu') FROM dd_pts;
SELECT dbscan_partition(0, id, f, 0, false, 0.6, 3, CASE WHEN id = 3 THEN 'auto' ELSE 'cpu' END) FROM dd_pts;
SELECT dbscan_partition(0, id, f, 0, false, 0.6, 3, CASE WHEN id = 3 THEN 'cpu' END) FROM dd_pts;
SELECT dbscan_partition(id % 2, id, f, 0, true, 0.6, 3, 'cpu') FROM dd_pts;
-- rows: NULL part or id, a part out of range, bad features (named by id),
-- a home out of range, a row of another partition not marked shared
SELECT dbscan_partition(NULL, id, f, 0, false, 0.6, 3, 'cpu') FROM dd_pts;
SELECT dbscan_partition(0, CASE WHEN id <> 2 THEN id END, f, 0, false, 0.6, 3, 'cpu') FROM dd_pts;
SELECT dbscan_partition(-1, id, f, 0, false, 0.6, 3, 'cpu') FROM dd_pts;
SELECT dbscan_partition(0, id, CASE WHEN id = 4 THEN '{1,2,3}' ELSE f END, 0, false, 0.6, 3, 'cpu') FROM dd_pts;
SELECT dbscan_partition(0, id, CASE WHEN id = 4 THEN '{1,NaN}' ELSE f END, 0, false, 0.6, 3, 'cpu') FROM dd_pts;
SELECT dbscan_partition(0, id, f, CASE WHEN id = 4 THEN 70000 ELSE 0 END, false, 0.6, 3, 'cpu') FROM dd_pts;
SELECT dbscan_partition(0, id, f, NULL, false, 0.6, 3, 'cpu') FROM dd_pts WHERE id = 1;
SELECT dbscan_partition(0, id, f, 0, NULL, 0.6, 3, 'cpu') FROM dd_pts WHERE id = 1;
SELECT dbscan_partition(0, id, f, CASE WHEN id = 4 THEN 1 ELSE 0 END, false, 0.6, 3, 'cpu') FROM dd_pts;
-- an id twice in a partition (23505), with features or without
SELECT dbscan_partition(0, id, f, 0, false, 0.6, 3, 'cpu')
FROM (SELECT * FROM dd_pts UNION ALL SELECT 5, '{7,7}') t;
SELECT dbscan_partition(0, id, f, 0, false, 0.6, 3, 'cpu')
FROM (SELECT * FROM dd_pts UNION ALL SELECT 11, NULL) t;
SELECT dbscan_partition(0, id, f, 0, false, 0.6, 3, 'cpu')
FROM (SELECT * FROM dd_pts UNION ALL SELECT 3, NULL) t;

DROP TABLE dd_part;

-- the SQLSTATEs of the errors above
CREATE FUNCTION dd_sqlstate(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END $$;
SELECT e.what, dd_sqlstate(e.q) AS sqlstate
FROM (VALUES
  ('bounds: d differs', $q$SELECT dbscan_bounds(CASE WHEN id = 4 THEN '{1,2,3}' ELSE f END, id) FROM dd_pts$q$),
  ('bounds: NaN', $q$SELECT dbscan_bounds(CASE WHEN id = 4 THEN '{1,NaN}' ELSE f END, id) FROM dd_pts$q$),
  ('bounds: NULL id', $q$SELECT dbscan_bounds(f, NULL) FROM dd_pts$q$),
  ('bounds: malformed state', $q$SELECT dbscan_bounds_combine('{2,0,0,1,1}', '{1,-1}')$q$),
  ('histogram: bins', $q$SELECT dbscan_histogram(f, 0, 0, 10, 0) FROM dd_pts$q$),
  ('histogram: range', $q$SELECT dbscan_histogram(f, 0, 10, 0, 5) FROM dd_pts$q$),
  ('histogram: dim', $q$SELECT dbscan_histogram(f, 2, 0, 10, 5) FROM dd_pts$q$),
  ('partitions: plan NULL', $q$SELECT * FROM dbscan_partitions('{1,1}'::real[], NULL)$q$),
  ('partitions: plan shape', $q$SELECT * FROM dbscan_partitions('{1,1}'::real[], '{2,0}')$q$),
  ('partitions: plan checked by the core', $q$SELECT * FROM dbscan_partitions('{1,1}'::real[], '{2,0,0.6,2,1}')$q$),
  ('partitions: row not of the plan', $q$SELECT * FROM dbscan_partitions('{1,1,1}'::real[], '{2,0,0.6,1,2.5}')$q$),
  ('partition: eps', $q$SELECT dbscan_partition(0, id, f, 0, false, 0, 3, 'cpu') FROM dd_pts$q$),
  ('partition: eps NULL', $q$SELECT dbscan_partition(0, id, f, 0, false, NULL, 3, 'cpu') FROM dd_pts$q$),
  ('partition: min_pts', $q$SELECT dbscan_partition(0, id, f, 0, false, 0.6, 0, 'cpu') FROM dd_pts$q$),
  ('partition: device', $q$SELECT dbscan_partition(0, id, f, 0, false, 0.6, 3, 'tpu') FROM dd_pts$q$),
  ('partition: parameters differ', $q$SELECT dbscan_partition(0, id, f, 0, false, 0.6, id, 'cpu') FROM dd_pts$q$),
  ('partition: two partitions', $q$SELECT dbscan_partition(id % 2, id, f, 0, true, 0.6, 3, 'cpu') FROM dd_pts$q$),
  ('partition: d differs', $q$SELECT dbscan_partition(0, id, CASE WHEN id = 4 THEN '{1,2,3}' ELSE f END, 0, false, 0.6, 3, 'cpu') FROM dd_pts$q$),
  ('partition: not shared', $q$SELECT dbscan_partition(0, id, f, id % 2, false, 0.6, 3, 'cpu') FROM dd_pts$q$),
  ('partition: id twice', $q$SELECT dbscan_partition(0, 1, f, 0, false, 0.6, 3, 'cpu') FROM dd_pts$q$)
) AS e(what, q);
DROP FUNCTION dd_sqlstate(text);

-- ====================================================================
-- gpu_dbscan_distributed (the driver): cases below
-- ====================================================================
-- the labels of gpu_dbscan over the source in id order, in 1, 2 and 5
-- partitions; rows with NULL features come back with NULL label and flag
CREATE TABLE dd_drv AS
SELECT i AS id, CASE WHEN i % 50 = 7 THEN NULL
                     ELSE ARRAY[(i * 7919 % 1000) / 100.0, (i * 104729 % 1000) / 250.0]::real[] END AS f
FROM generate_series(1, 3000) i;
SELECT p AS partitions, count(*) AS rows,
       count(*) FILTER (WHERE a.cluster_id IS DISTINCT FROM b.cluster_id
                          OR a.is_core IS DISTINCT FROM b.is_core) AS differ,
       count(*) FILTER (WHERE a.is_core IS NULL) AS no_features,
       count(DISTINCT a.cluster_id) AS clusters
FROM generate_series(1, 5, 2) p,
     LATERAL (SELECT * FROM gpu_dbscan_distributed('SELECT id, f FROM dd_drv', 0.12, 4, partitions => p)) a
     FULL JOIN gpu_dbscan('SELECT id, f FROM dd_drv ORDER BY id', 0.12, 4) b USING (id)
GROUP BY p ORDER BY p;
SELECT count(*) AS rows FROM gpu_dbscan_distributed('SELECT id, f FROM dd_drv WHERE false', 0.12, 4);
SELECT * FROM gpu_dbscan_distributed('SELECT id, NULL::real[] FROM dd_drv WHERE id <= 2', 0.12, 4) ORDER BY id;
SELECT * FROM gpu_dbscan_distributed('SELECT 1, ARRAY[0, 0]::real[]', 0.5, 1, device => 'cpu');

-- errors, before anything runs where the arguments say so
SELECT * FROM gpu_dbscan_distributed(NULL, 0.1, 4);
SELECT * FROM gpu_dbscan_distributed('SELECT id, f FROM dd_drv', NULL, 4);
SELECT * FROM gpu_dbscan_distributed('SELECT id, f FROM dd_drv', 0, 4);
SELECT * FROM gpu_dbscan_distributed('SELECT id, f FROM dd_drv', 0.1, 0);
SELECT * FROM gpu_dbscan_distributed('SELECT id, f FROM dd_drv', 0.1, 4, partitions => 0);
SELECT * FROM gpu_dbscan_distributed('SELECT id, f FROM dd_drv', 0.1, 4, partitions => 65537);
SELECT * FROM gpu_dbscan_distributed('SELECT id, f FROM dd_drv', 0.1, 4, device => 'tpu');
SELECT * FROM gpu_dbscan_distributed('SELECT id, f, 1.0 FROM dd_drv', 0.1, 4);
SELECT * FROM gpu_dbscan_distributed('DELETE FROM dd_drv RETURNING id, f', 0.1, 4);
SELECT * FROM gpu_dbscan_distributed('SELECT id, ARRAY[1, ''NaN'']::real[] FROM dd_drv', 0.1, 4);
SELECT * FROM gpu_dbscan_distributed('SELECT 5, ARRAY[1, 2]::real[] UNION ALL SELECT 5, ARRAY[1, 2]::real[]', 0.1, 4);
DROP TABLE dd_drv;
