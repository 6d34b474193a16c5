/* gpuclust--0.1--0.2.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION gpuclust UPDATE TO '0.2'" to load this file. \quit

-- 0.2 is the library that loads without shared_preload_libraries and builds
-- on PostgreSQL 15 to 18.  Its SQL objects are 0.1's: a new installation
-- runs gpuclust--0.1.sql and then this script, an upgraded one this script
-- alone, so that both end with the same objects (test/install/upgrade_test.py
-- compares them).  Every change to the SQL surface goes into the newest
-- such script, written so that objects depending on the extension's
-- functions (views, materialized views, tables of their results) keep
-- working: CREATE OR REPLACE, never DROP and CREATE.

COMMENT ON FUNCTION @extschema@.gpuclust_info() IS
'Whether gpuclust was built with CUDA, whether the GPU can be used (and why '
'not), its name, memory and compute capability, and the device ''auto'' '
'picks for each algorithm.  The free memory of the GPU and of the host (and '
'the sizes of affinity propagation derived from it) and the GPU worker''s '
'jobs of other roles are shown to roles with pg_read_all_stats only, as '
'pg_stat_activity shows other sessions: to others those values are NULL, '
'and the job counts their own.';
