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

COMMENT ON FUNCTION @extschema@.gpu_kmeans(pg_catalog.text, pg_catalog.int4, pg_catalog.int4, pg_catalog.float8,
	pg_catalog.text, pg_catalog.int4, pg_catalog.int8, pg_catalog.text, pg_catalog.float4[], pg_catalog.text) IS
'k-means clustering of the rows of source, a query returning (id, features): '
'id smallint, integer or bigint; features real[], double precision[] or a '
'type with a cast to real[].  Returns each row''s cluster (0 .. k-1) and its '
'distance to the cluster centre, in input order; rows with NULL features '
'get NULL.  metric is ''euclidean'' or ''cosine'' (spherical k-means: '
'unit-length rows and centres, the cosine distance 1 - cos; rows with all '
'features 0 are an error).  A third source column, (id, features, weight), '
'gives sample weights (>= 0; scikit-learn''s sample_weight).  init is '
'''k-means++'', ''k-means||'' (Bahmani et al.''s parallel k-means++), '
'''random'', ''auto'' (k-means|| when k >= 256, else k-means++), or a '
'query returning the k initial centroids '
'(one features column); init_centroids gives them as a k x d real[] '
'instead (one run then, whatever n_init); the best of n_init runs is kept; '
'the same seed gives the same result.  device is ''auto'', ''cpu'' or '
'''gpu''; NULL uses gpuclust.device; every option (weights, given '
'centroids, cosine) runs on either device.  Any other NULL argument is an '
'error.  An empty '
'source returns no rows.';
