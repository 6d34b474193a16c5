/* gpuclust--0.1--0.2.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION gpuclust UPDATE TO '0.2'" to load this file. \quit

-- 0.2 is the library that loads without shared_preload_libraries and builds
-- on PostgreSQL 15 to 18, and adds HDBSCAN.  A new installation runs
-- gpuclust--0.1.sql and then this script, an upgraded one this script
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

-- ---------------------------------------------------------------------
-- HDBSCAN (src/hdbscan/: hdbscan_sql.c, hdbscan_window_sql.c)
--
-- gpu_hdbscan(source, ...), gpu_hdbscan_tree(source, ...) and the window
-- forms gpu_hdbscan(features, ...) OVER (...) take one parameter list,
-- written once here with its defaults (the window forms require
-- min_cluster_size, as gpu_dbscan's require eps and min_pts);
-- gpu_minimum_spanning_tree takes the part that the minimum spanning tree
-- uses, with min_samples 1 by default (the Euclidean MST).
-- ---------------------------------------------------------------------

DO $hdbscan$
DECLARE
    params CONSTANT text := $params$min_samples int DEFAULT NULL,
                           cluster_selection_epsilon float8 DEFAULT 0,
                           cluster_selection_method text DEFAULT 'eom',
                           allow_single_cluster boolean DEFAULT false,
                           alpha float8 DEFAULT 1.0,
                           metric text DEFAULT 'euclidean',
                           device text DEFAULT NULL$params$;
BEGIN
    EXECUTE pg_catalog.format($sql$
CREATE FUNCTION @extschema@.gpu_hdbscan(source text, min_cluster_size int DEFAULT 5, %1$s)
RETURNS TABLE (id bigint, cluster_id int, probability float8, outlier_score float8)
AS 'MODULE_PATHNAME', 'gpu_hdbscan'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION @extschema@.gpu_hdbscan_tree(source text, min_cluster_size int DEFAULT 5, %1$s)
RETURNS TABLE (parent int, child int, id bigint, lambda float8, child_size bigint, cluster_id int)
AS 'MODULE_PATHNAME', 'gpu_hdbscan_tree'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION @extschema@.gpu_hdbscan(features real[], min_cluster_size int, %1$s)
RETURNS int
AS 'MODULE_PATHNAME', 'gpu_hdbscan_window'
LANGUAGE C WINDOW STABLE PARALLEL SAFE;

CREATE FUNCTION @extschema@.gpu_hdbscan(features float8[], min_cluster_size int, %1$s)
RETURNS int
AS 'MODULE_PATHNAME', 'gpu_hdbscan_window'
LANGUAGE C WINDOW STABLE PARALLEL SAFE;
$sql$, params);
END
$hdbscan$;

CREATE FUNCTION @extschema@.gpu_minimum_spanning_tree(source text,
                                          min_samples int DEFAULT 1,
                                          alpha float8 DEFAULT 1.0,
                                          metric text DEFAULT 'euclidean',
                                          device text DEFAULT NULL)
RETURNS TABLE (id_a bigint, id_b bigint, distance float8)
AS 'MODULE_PATHNAME', 'gpu_minimum_spanning_tree'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION @extschema@.gpu_hdbscan(text, int, int, float8, text, boolean, float8, text, text) IS
'HDBSCAN (Campello, Moulavi and Sander) of the rows of source, a query '
'returning (id, features), with scikit-learn''s HDBSCAN semantics: core '
'distance = the distance to the min_samples-th nearest row, the row itself '
'counted (NULL: min_cluster_size); the minimum spanning tree of the mutual '
'reachability distance max(core_a, core_b, d(a, b) / alpha); its '
'condensed tree of clusters of at least min_cluster_size rows; the flat '
'clusters by excess of mass (''eom'') or its leaves (''leaf''), merged below '
'cluster_selection_epsilon, the root allowed with allow_single_cluster.  '
'Returns each row''s cluster (0, 1, 2 ... in order of their first row; '
'NULL for noise), its membership probability (scikit-learn''s '
'probabilities_) and its GLOSH outlier score, in input order; rows with '
'NULL features get NULL.  metric is ''euclidean'' or ''cosine''.  device is '
'''auto'', ''cpu'' or ''gpu''; NULL uses gpuclust.device; the same result on '
'either device.  Any other NULL argument is an error.  An empty source '
'returns no rows.';

COMMENT ON FUNCTION @extschema@.gpu_hdbscan_tree(text, int, int, float8, text, boolean, float8, text, text) IS
'The condensed tree of gpu_hdbscan(source, ...) with the same arguments, '
'one row per edge (scikit-learn''s condensed_tree_): parent the cluster '
'(0 the root, then the clusters breadth first), child the child cluster, '
'or NULL for a row, whose id is then given; lambda = 1 / the distance at '
'which the child leaves the parent; child_size its rows (1 for a row); '
'cluster_id gpu_hdbscan''s cluster of a selected child cluster, else NULL.  '
'Rows with NULL features are not in the tree.';

COMMENT ON FUNCTION @extschema@.gpu_minimum_spanning_tree(text, int, float8, text, text) IS
'The minimum spanning tree of the rows of source, a query returning (id, '
'features), under the mutual reachability distance of HDBSCAN: '
'max(core_a, core_b, d(a, b) / alpha), core = the distance to the '
'min_samples-th nearest row, the row itself counted (min_samples 1: the '
'Euclidean or cosine minimum spanning tree).  Returns its n - 1 edges '
'in order of (distance, a, b), a < b the input positions of the two rows, '
'id_a the row of position a; ties are broken by that order, on every '
'device.  Rows with NULL features are left out.  device as gpu_hdbscan''s.';

COMMENT ON FUNCTION @extschema@.gpu_hdbscan(real[], int, int, float8, text, boolean, float8, text, text) IS
'Window function: HDBSCAN of the rows of the window partition, in the '
'window''s order; returns the row''s cluster (0, 1, 2 ... by first row of '
'the partition), NULL for noise and for NULL features.  Same labels as the '
'set-returning gpu_hdbscan(source, ...) over the same rows in the same '
'order.  Every argument but the features must be the same on every row of '
'a partition.';
COMMENT ON FUNCTION @extschema@.gpu_hdbscan(float8[], int, int, float8, text, boolean, float8, text, text) IS
'Window function: HDBSCAN of the rows of the window partition; see '
'gpu_hdbscan(real[], int, int, float8, text, boolean, float8, text, text).';

-- The keyed forms of HDBSCAN's set-returning functions (ids of any type),
-- declared from the plain forms above as gpuclust--0.1.sql declares the
-- others': id_type anyelement right after the source, and the result's
-- id columns of that type.
DO $keyed$
DECLARE
    f record;
BEGIN
    FOR f IN
        SELECT p.proname, pg_catalog.pg_get_function_arguments(p.oid) AS args,
               pg_catalog.pg_get_function_result(p.oid) AS result,
               pg_catalog.pg_get_function_identity_arguments(p.oid) AS ident,
               p.probin, p.prosrc, p.oid::pg_catalog.regprocedure AS plain_form
        FROM pg_catalog.pg_proc p
        WHERE p.pronamespace OPERATOR(pg_catalog.=) '@extschema@'::pg_catalog.regnamespace
          AND p.proname OPERATOR(pg_catalog.=) ANY ('{gpu_hdbscan, gpu_hdbscan_tree, gpu_minimum_spanning_tree}'::pg_catalog.name[])
          AND p.proretset
          AND p.proargtypes[0] OPERATOR(pg_catalog.=) 'pg_catalog.text'::pg_catalog.regtype::pg_catalog.oid
        ORDER BY p.proname
    LOOP
        IF f.args OPERATOR(pg_catalog.!~) '^source text, '::pg_catalog.text
           OR f.result OPERATOR(pg_catalog.!~) '\m(id|id_a) bigint\M'::pg_catalog.text THEN
            RAISE EXCEPTION 'unexpected declaration of %', f.plain_form;
        END IF;
        EXECUTE pg_catalog.format(
            'CREATE FUNCTION @extschema@.%I(source pg_catalog.text, id_type anyelement, %s) RETURNS %s '
            'AS %L, %L LANGUAGE C VOLATILE PARALLEL UNSAFE',
            f.proname, pg_catalog.substr(f.args, pg_catalog.length('source text, '::pg_catalog.text) OPERATOR(pg_catalog.+) 1),
            pg_catalog.regexp_replace(f.result, '\m(id|id_a|id_b) bigint\M'::pg_catalog.text,
                                      '\1 anyelement'::pg_catalog.text, 'g'::pg_catalog.text),
            f.probin, f.prosrc);
        EXECUTE pg_catalog.format(
            'COMMENT ON FUNCTION @extschema@.%I(pg_catalog.text, anyelement, %s) IS %L',
            f.proname, pg_catalog.substr(f.ident, pg_catalog.length('source text, '::pg_catalog.text) OPERATOR(pg_catalog.+) 1),
            pg_catalog.format('%s for ids of any type: id_type is a NULL of the source''s '
                   'id type (NULL::uuid, NULL::text ...), and the ids it returns '
                   'have that type; see %s.'::pg_catalog.text, f.proname, f.plain_form));
    END LOOP;
END
$keyed$;

-- ---------------------------------------------------------------------
-- The GPU worker's GPUs, and the GPU each of its jobs runs on
-- (src/worker/info_sql.c).  gpuclust_gpu_jobs gains its gpu column through
-- a function of its own: 0.1's gpuclust_gpu_jobs_rows stays as it was for
-- what may be built on it.
-- ---------------------------------------------------------------------

CREATE FUNCTION @extschema@.gpuclust_gpus_rows()
RETURNS TABLE (gpu int, name text, state text, reason text,
               memory_total_bytes bigint, memory_free_bytes bigint,
               memory_budget_bytes bigint, memory_reserved_bytes bigint,
               jobs_running int, jobs_done bigint)
AS 'MODULE_PATHNAME', 'gpuclust_gpus'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE VIEW @extschema@.gpuclust_gpus AS
SELECT * FROM @extschema@.gpuclust_gpus_rows();

COMMENT ON VIEW @extschema@.gpuclust_gpus IS
'The GPUs the GPU worker owns (gpuclust.gpu_devices; empty without the '
'worker), one row each: the CUDA device number, its name, its state '
'(starting, ready, unusable: its probe failed, lost: it failed during a '
'job and takes no more until the worker restarts its GPU process), why it '
'is not ready, its total and free memory, the memory jobs may hold on it '
'(its budget) and hold now, and its running jobs and the jobs that ended '
'on it.  The free and held memory are NULL to roles without '
'pg_read_all_stats.';
GRANT SELECT ON @extschema@.gpuclust_gpus TO PUBLIC;

CREATE FUNCTION @extschema@.gpuclust_gpu_job_rows()
RETURNS TABLE (pid int, algorithm text, n bigint, d int, state text,
               gpu_memory_bytes bigint, elapsed_ms float8,
               running_ms float8, gpu int)
AS 'MODULE_PATHNAME', 'gpuclust_gpu_jobs'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE OR REPLACE VIEW @extschema@.gpuclust_gpu_jobs AS
SELECT * FROM @extschema@.gpuclust_gpu_job_rows();

COMMENT ON VIEW @extschema@.gpuclust_gpu_jobs IS
'The GPU worker''s queued and running jobs (when gpuclust is in '
'shared_preload_libraries with gpuclust.gpu_worker on; otherwise empty): '
'the pid of the backend that asked, the function, rows and features, '
'queued or running, the GPU memory it holds or waits for, the time since '
'it was queued, since it started, and the GPU it runs on (its CUDA device '
'number; NULL while queued).  Roles without pg_read_all_stats see their '
'own jobs only.';

-- ---------------------------------------------------------------------
-- The scores of a labelling in one call (src/tools/labelled_rows_sql.c;
-- the core: tools/cluster_scores.c and silhouette.c)
-- ---------------------------------------------------------------------

CREATE FUNCTION @extschema@.gpu_cluster_scores(source text, labels_query text,
                                   sample_size int DEFAULT NULL,
                                   seed bigint DEFAULT 0,
                                   device text DEFAULT NULL,
                                   OUT silhouette float8,
                                   OUT davies_bouldin float8,
                                   OUT calinski_harabasz float8,
                                   OUT inertia float8,
                                   OUT n bigint,
                                   OUT clusters bigint,
                                   OUT sampled boolean)
RETURNS record
AS 'MODULE_PATHNAME', 'gpu_cluster_scores'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION @extschema@.gpu_cluster_scores(text, text, int, bigint, text) IS
'The scores of the labelling labels_query returns as (id, label) for the '
'rows of source, from one read of both: the silhouette as gpu_silhouette '
'gives it (sample_size, seed and device as there), scikit-learn''s '
'Davies-Bouldin index (lower is better) and Calinski-Harabasz index '
'(higher is better), and the inertia, the sum of the squared Euclidean '
'distances of the rows to their cluster''s mean; n the labelled rows, '
'clusters the labels among them, sampled whether the silhouette scored a '
'sample.  Rows with a NULL label, or none, are noise and left out.  The '
'indices and the inertia are exact, in double precision, on the CPU.';
