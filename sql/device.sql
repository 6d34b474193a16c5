--
-- Device selection, the gpuclust.* settings and gpuclust_info().
-- The output is the same with or without a usable GPU.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gpuclust;
RESET client_min_messages;
-- the settings exist once the library is loaded (by LOAD, a call of one of
-- its functions, or shared/session_preload_libraries)
LOAD 'gpuclust';

SHOW gpuclust.device;
SHOW gpuclust.cpu_threads;
SHOW gpuclust.gpu_device_id;

-- cpu and auto always run
SELECT count(*) FROM gpu_kmeans('SELECT i, ARRAY[i] FROM generate_series(1, 10) i', 2, device => 'cpu');
SELECT count(*) FROM gpu_kmeans('SELECT i, ARRAY[i] FROM generate_series(1, 10) i', 2, device => 'auto');
SELECT count(*) FROM gpu_dbscan('SELECT i, ARRAY[i] FROM generate_series(1, 10) i', 1, 2, device => 'CPU');
SELECT count(*) FROM gpu_dbscan('SELECT i, ARRAY[i] FROM generate_series(1, 10) i', 1, 2, device => 'Auto');

-- gpu runs when the GPU can run the algorithm, and otherwise fails with
-- feature_not_supported; the reason (driver message etc.) is in the DETAIL
CREATE FUNCTION try_gpu(src text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  usable boolean := (SELECT value::boolean FROM gpuclust_info() WHERE key = 'gpu_usable');
  outcome text;
  detail text;
BEGIN
  BEGIN
    EXECUTE src;
    outcome := 'ran';
  EXCEPTION WHEN feature_not_supported THEN
    GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
    outcome := SQLSTATE || ' ' || SQLERRM;
    IF coalesce(detail, '') = '' THEN
      outcome := outcome || ' (no reason given)';
    END IF;
  END;
  IF outcome = 'ran' AND NOT usable THEN
    RETURN 'ran although no GPU is usable';
  END IF;
  RETURN CASE WHEN outcome = 'ran' THEN 'expected' ELSE outcome END;
END $$;

SELECT try_gpu($$SELECT * FROM gpu_kmeans('SELECT i, ARRAY[i] FROM generate_series(1, 10) i', 2, device => 'gpu')$$)
  IN ('expected', '0A000 cannot run k-means on the GPU') AS kmeans_gpu_ok;
SELECT try_gpu($$SELECT * FROM gpu_dbscan('SELECT i, ARRAY[i] FROM generate_series(1, 10) i', 1, 2, device => 'GPU')$$)
  IN ('expected', '0A000 cannot run DBSCAN on the GPU') AS dbscan_gpu_ok;
SELECT try_gpu($$SELECT * FROM gpu_affinity_propagation('SELECT i, ARRAY[i] FROM generate_series(1, 10) i', device => 'gpu')$$)
  IN ('expected', '0A000 cannot run affinity propagation on the GPU') AS ap_gpu_ok;

-- without a GPU, the failure is an ordinary error with an SQLSTATE
DO $$
BEGIN
  IF (SELECT value FROM gpuclust_info() WHERE key = 'gpu_usable') = 'false' THEN
    BEGIN
      PERFORM * FROM gpu_kmeans('SELECT 1, ARRAY[1]', 1, device => 'gpu');
      RAISE NOTICE 'k-means ran on the GPU';
    EXCEPTION WHEN OTHERS THEN
      RAISE NOTICE '% %', SQLSTATE, SQLERRM;
    END;
  ELSE
    RAISE NOTICE '0A000 cannot run k-means on the GPU';
  END IF;
END $$;

-- the setting is used when device is NULL, and the argument overrides it
SET gpuclust.device = 'gpu';
SELECT try_gpu($$SELECT * FROM gpu_kmeans('SELECT i, ARRAY[i] FROM generate_series(1, 10) i', 2)$$)
  IN ('expected', '0A000 cannot run k-means on the GPU') AS kmeans_gpu_ok;
SELECT count(*) FROM gpu_kmeans('SELECT i, ARRAY[i] FROM generate_series(1, 10) i', 2, device => 'cpu');
SET gpuclust.device = 'cpu';
SELECT count(*) FROM gpu_dbscan('SELECT i, ARRAY[i] FROM generate_series(1, 10) i', 1, 2);
SET gpuclust.device = 'tpu';
RESET gpuclust.device;
SHOW gpuclust.device;

-- thread count
SET gpuclust.cpu_threads = 1;
SELECT id, cluster_id FROM gpu_dbscan('SELECT i, ARRAY[i % 3] FROM generate_series(1, 6) i', 0.5, 2);
SET gpuclust.cpu_threads = 3;
SELECT count(*), count(DISTINCT cluster_id) FROM gpu_kmeans('SELECT i, ARRAY[i % 3] FROM generate_series(1, 3000) i', 3);
SET gpuclust.cpu_threads = -1;
SET gpuclust.cpu_threads = 1025;
RESET gpuclust.cpu_threads;
SET gpuclust.gpu_device_id = -1;

-- the gpuclust prefix is reserved
SET gpuclust.no_such_setting = 1;

-- gpuclust_info(): the same keys on every build
SELECT key FROM gpuclust_info() ORDER BY key;
SELECT key, value FROM gpuclust_info()
WHERE key IN ('device_setting', 'gpu_device_id');
SELECT bool_and(value IN ('cpu', 'gpu')) AS auto_picks_a_device
FROM gpuclust_info() WHERE key LIKE 'auto_device_%';
SELECT value IN ('true', 'false') AS cuda_build_known
FROM gpuclust_info() WHERE key = 'cuda_build';
-- when the GPU is unusable there is a reason, and no device details
SELECT CASE WHEN i.usable THEN i.reason IS NULL AND i.name IS NOT NULL
            ELSE i.reason IS NOT NULL AND i.name IS NULL END AS consistent
FROM (SELECT max(value) FILTER (WHERE key = 'gpu_usable')::boolean AS usable,
             max(value) FILTER (WHERE key = 'gpu_reason') AS reason,
             max(value) FILTER (WHERE key = 'gpu_name') AS name
      FROM gpuclust_info()) AS i;
-- where DBSCAN's algorithm dclust runs: the GPU when one is usable, else
-- none, and why
SELECT CASE WHEN i.usable THEN i.dclust = 'gpu' ELSE i.dclust LIKE 'none (_%)' END
         AS dclust_device_consistent
FROM (SELECT max(value) FILTER (WHERE key = 'gpu_usable')::boolean AS usable,
             max(value) FILTER (WHERE key = 'dbscan_dclust_device') AS dclust
      FROM gpuclust_info()) AS i;
-- where affinity propagation runs: under 'auto' in float8 (from
-- auto_ap_gpu_min_rows rows) on the GPU when one is usable, else on the
-- CPU; in float4 on the GPU, or none, and why.  The most rows a call may
-- take: on the CPU always, on the GPU (float4: more) when it is usable
SELECT CASE WHEN i.usable
            THEN i.auto_ap = 'gpu' AND i.float4 = 'gpu' AND i.gpu8 > 0 AND i.gpu4 >= i.gpu8
            ELSE i.auto_ap = 'cpu' AND i.float4 LIKE 'none (_%)' AND i.gpu8 IS NULL AND i.gpu4 IS NULL END
       AND i.cpu_rows > 0 AND i.min_rows > 0 AS ap_devices_consistent
FROM (SELECT max(value) FILTER (WHERE key = 'gpu_usable')::boolean AS usable,
             max(value) FILTER (WHERE key = 'auto_device_ap') AS auto_ap,
             max(value) FILTER (WHERE key = 'ap_float4_device') AS float4,
             max(value) FILTER (WHERE key = 'auto_ap_gpu_min_rows')::int AS min_rows,
             max(value) FILTER (WHERE key = 'ap_max_rows_cpu')::bigint AS cpu_rows,
             max(value) FILTER (WHERE key = 'ap_max_rows_gpu_float8')::bigint AS gpu8,
             max(value) FILTER (WHERE key = 'ap_max_rows_gpu_float4')::bigint AS gpu4
      FROM gpuclust_info()) AS i;
-- the session's matrix memory limit bounds them (24 n^2 bytes on the CPU)
SET gpuclust.matrix_memory = '1MB';
SELECT value AS ap_max_rows_cpu FROM gpuclust_info() WHERE key = 'ap_max_rows_cpu';
RESET gpuclust.matrix_memory;
SELECT value::int > 0 AS has_threads FROM gpuclust_info() WHERE key = 'cpu_threads';
-- a CUDA build on a machine with no driver at all says so
SELECT CASE WHEN i.cuda_build AND i.driver IS NULL
            THEN i.reason = 'no CUDA driver found (libcuda.so.1)'
            ELSE true END AS no_driver_named
FROM (SELECT max(value) FILTER (WHERE key = 'cuda_build')::boolean AS cuda_build,
             max(value) FILTER (WHERE key = 'cuda_driver_version') AS driver,
             max(value) FILTER (WHERE key = 'gpu_reason') AS reason
      FROM gpuclust_info()) AS i;

DROP FUNCTION try_gpu(text);

-- catalog: volatility, parallel safety, strictness and comments
SELECT p.oid::regprocedure AS function, p.provolatile, p.proparallel, p.proisstrict,
       obj_description(p.oid, 'pg_proc') IS NOT NULL AS has_comment
FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.classid = 'pg_proc'::regclass
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'gpuclust'
ORDER BY p.oid::regprocedure::text COLLATE "C";
