/* gpuclust--0.1.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION gpuclust" to load this file. \quit

CREATE FUNCTION gpu_kmeans(source text, k int,
                           max_iter int DEFAULT 300,
                           tol float8 DEFAULT 1e-4,
                           init text DEFAULT 'k-means++',
                           n_init int DEFAULT 1,
                           seed bigint DEFAULT 0,
                           device text DEFAULT NULL)
RETURNS TABLE (id bigint, cluster_id int, distance float8)
AS 'MODULE_PATHNAME', 'gpu_kmeans'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION gpu_kmeans(text, int, int, float8, text, int, bigint, text) IS
'k-means clustering of the rows of source, a query returning (id, features): '
'id smallint, integer or bigint; features real[], double precision[] or a '
'type with a cast to real[].  Returns each row''s cluster (0 .. k-1) and its '
'Euclidean distance to the cluster centre, in input order; rows with NULL '
'features get NULL.  init is ''k-means++'' or ''random''; the best of n_init '
'runs is kept; the same seed gives the same result.  device is ''auto'', '
'''cpu'' or ''gpu''; NULL uses gpuclust.device.  Any other NULL argument is '
'an error.  An empty source returns no rows.';

CREATE FUNCTION gpu_dbscan(source text, eps float8, min_pts int,
                           device text DEFAULT NULL)
RETURNS TABLE (id bigint, cluster_id int, is_core boolean)
AS 'MODULE_PATHNAME', 'gpu_dbscan'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION gpu_dbscan(text, float8, int, text) IS
'DBSCAN clustering of the rows of source, a query returning (id, features).  '
'A point is core when at least min_pts points, itself included, lie within '
'Euclidean distance eps.  Clusters are numbered 0, 1, 2 ... in order of '
'their first row; noise gets a NULL cluster_id, and rows with NULL features '
'NULL cluster_id and is_core.  Rows come back in input order.  device is '
'''auto'', ''cpu'' or ''gpu''; NULL uses gpuclust.device.  Any other NULL '
'argument is an error.  An empty source returns no rows.';

CREATE FUNCTION gpuclust_info()
RETURNS TABLE (key text, value text)
AS 'MODULE_PATHNAME', 'gpuclust_info'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION gpuclust_info() IS
'Whether gpuclust was built with CUDA, whether the GPU can be used (and why '
'not), its name, memory and compute capability, and the device ''auto'' '
'picks for each algorithm.';
