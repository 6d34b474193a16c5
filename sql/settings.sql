--
-- Resource settings: the ceilings (threads, matrix memory, GPU choice) are
-- superuser settings; a session may lower the first two for itself with
-- gpuclust.cpu_threads and gpuclust.matrix_memory, never raise them.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gpuclust;
DROP ROLE IF EXISTS regress_gpuclust_user;
RESET client_min_messages;
LOAD 'gpuclust';

SELECT name, context, setting, unit, min_val, max_val
FROM pg_settings WHERE name LIKE 'gpuclust.%' AND name NOT LIKE 'gpuclust.gpu\_worker%'
  AND name <> 'gpuclust.gpu_devices'
ORDER BY name;

-- the GPU worker's settings exist only when the library is preloaded
SELECT coalesce(string_agg(concat_ws(' ', name, context, nullif(setting, ''), unit, min_val, max_val),
                           '; ' ORDER BY name), 'none')
       = CASE WHEN current_setting('shared_preload_libraries') ~ 'gpuclust'
              THEN 'gpuclust.gpu_devices postmaster; '
                   'gpuclust.gpu_worker postmaster on; '
                   'gpuclust.gpu_worker_gpus_per_call user 0 0 16; '
                   'gpuclust.gpu_worker_jobs sighup 4 1 64; '
                   'gpuclust.gpu_worker_memory sighup 0 MB 0 2147483647; '
                   'gpuclust.gpu_worker_split_rows sighup 4194304 1 2147483647'
              ELSE 'none' END AS worker_settings_as_loaded
FROM pg_settings WHERE name LIKE 'gpuclust.gpu\_worker%' OR name = 'gpuclust.gpu_devices';

-- the test-only switches (gpuclust.gpu_worker_emulate*) are not in the
-- product: only a test build (make GC_TESTING=1) defines them
SELECT count(*) AS test_only_settings
FROM pg_settings WHERE name LIKE 'gpuclust.gpu\_worker\_emulate%';

-- the effective thread count, as gpuclust_info() reports it
CREATE FUNCTION threads() RETURNS int LANGUAGE sql
AS $$ SELECT value::int FROM gpuclust_info() WHERE key = 'cpu_threads' $$;

-- never more threads than cores, whatever the settings say
SET gpuclust.max_cpu_threads = 1024;
SELECT threads() AS all_cores \gset
SELECT :all_cores < 1024 AS fewer_than_asked;
SET gpuclust.cpu_threads = 1024;
SELECT threads() = :all_cores AS capped_at_cores;
RESET gpuclust.max_cpu_threads;
SELECT threads() = :all_cores AS capped_at_cores;
SET gpuclust.cpu_threads = 1;
SELECT threads();
RESET gpuclust.cpu_threads;
-- the memory the O(n^2) check compares with (MemAvailable or a cgroup's room)
SELECT value::numeric > 0 AS memory_known
FROM gpuclust_info() WHERE key = 'memory_available_bytes';

-- the ceiling binds the wish
SET gpuclust.max_cpu_threads = 1;
SELECT threads();
SET gpuclust.cpu_threads = 2;
SELECT threads();
SELECT count(*), count(DISTINCT cluster_id)
FROM gpu_kmeans('SELECT i, ARRAY[i % 3] FROM generate_series(1, 3000) i', 3);
RESET gpuclust.cpu_threads;
RESET gpuclust.max_cpu_threads;

-- an ordinary user
CREATE ROLE regress_gpuclust_user;
SET gpuclust.max_cpu_threads = 1;		-- the superuser's ceiling, for this session
SET ROLE regress_gpuclust_user;
SELECT current_user, threads();
-- cannot set, raise or reset a ceiling
SET gpuclust.max_cpu_threads = 2;
\echo :LAST_ERROR_SQLSTATE
SET gpuclust.max_cpu_threads = 0;
RESET gpuclust.max_cpu_threads;
SET gpuclust.max_matrix_memory = '8GB';
\echo :LAST_ERROR_SQLSTATE
SET gpuclust.max_matrix_memory = '1MB';
SET gpuclust.gpu_device_id = 1;
\echo :LAST_ERROR_SQLSTATE
SET gpuclust.gpu_memory_limit = '1GB';
\echo :LAST_ERROR_SQLSTATE
SELECT set_config('gpuclust.max_cpu_threads', '4', false);
SHOW gpuclust.max_cpu_threads;
-- asking for more threads than the ceiling gets the ceiling
SET gpuclust.cpu_threads = 2;
SELECT threads();
SELECT count(*), count(DISTINCT cluster_id)
FROM gpu_kmeans('SELECT i, ARRAY[i % 3] FROM generate_series(1, 3000) i', 3);
RESET gpuclust.cpu_threads;
-- the settings a session may lower
SET gpuclust.device = 'cpu';
SET gpuclust.log_timing = off;
RESET gpuclust.device;
RESET ROLE;
RESET gpuclust.max_cpu_threads;

-- the GPU memory limit: a superuser setting, shown by gpuclust_info()
SELECT value IS NULL AS no_gpu_limit FROM gpuclust_info() WHERE key = 'gpu_memory_limit_bytes';
SET gpuclust.gpu_memory_limit = '100MB';
SHOW gpuclust.gpu_memory_limit;
SELECT value FROM gpuclust_info() WHERE key = 'gpu_memory_limit_bytes';
-- on the CPU the limit changes nothing
SELECT count(*), count(DISTINCT cluster_id)
FROM gpu_kmeans('SELECT i, ARRAY[i % 3] FROM generate_series(1, 3000) i', 3, device => 'cpu');
-- (22023; the message's range names its unit from PostgreSQL 18 on)
\set VERBOSITY sqlstate
SET gpuclust.gpu_memory_limit = -1;
\set VERBOSITY default
RESET gpuclust.gpu_memory_limit;

-- matrix memory: the smaller of the session's limit and the ceiling
SET gpuclust.max_matrix_memory = '1MB';
SET ROLE regress_gpuclust_user;
SET gpuclust.matrix_memory = '2GB';		-- above the ceiling: the ceiling holds
SELECT count(*) FROM gpu_affinity_propagation('SELECT i, ARRAY[i] FROM generate_series(1, 208) i');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
RESET gpuclust.max_matrix_memory;
SET ROLE regress_gpuclust_user;
SET gpuclust.matrix_memory = '1MB';		-- below it: the session's own limit
SHOW gpuclust.matrix_memory;
SET client_min_messages = warning;  -- (evenly spaced: does not converge)
SELECT count(*) FROM gpu_affinity_propagation('SELECT i, ARRAY[i] FROM generate_series(1, 207) i', max_iter => 5);
RESET client_min_messages;
SELECT count(*) FROM gpu_affinity_propagation('SELECT i, ARRAY[i] FROM generate_series(1, 208) i');
\echo :LAST_ERROR_SQLSTATE
RESET gpuclust.matrix_memory;
RESET ROLE;

-- a superuser may delegate a ceiling (PostgreSQL 15: GRANT SET ON PARAMETER)
GRANT SET ON PARAMETER gpuclust.max_cpu_threads TO regress_gpuclust_user;
SET ROLE regress_gpuclust_user;
SET gpuclust.max_cpu_threads = 1;
SHOW gpuclust.max_cpu_threads;
SELECT threads();
RESET gpuclust.max_cpu_threads;
RESET ROLE;
REVOKE SET ON PARAMETER gpuclust.max_cpu_threads FROM regress_gpuclust_user;
SET ROLE regress_gpuclust_user;
SET gpuclust.max_cpu_threads = 1;
RESET ROLE;

DROP ROLE regress_gpuclust_user;
DROP FUNCTION threads();
