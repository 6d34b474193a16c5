/* gpuclust--0.1.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION gpuclust" to load this file. \quit

-- Names are qualified: the extension's own objects with @extschema@ (so
-- the extension is not relocatable), and the functions and operators
-- that run here with pg_catalog, operators as OPERATOR(pg_catalog.=), so
-- that no object another role created in a schema of the search_path is
-- bound here or run by the superuser who installs it.  (Built-in type
-- names need not be: pg_catalog, searched first, has them, and an exact
-- name is never a better match elsewhere.)  The distributed drivers
-- qualify the SQL they build the same way (src/distributed/passes.h).

-- ---------------------------------------------------------------------
-- Every clustering function takes the same arguments in each of its forms
-- (src/common/args.c reads them alike): the rows first, then the
-- parameters, device after the first ones; parameters added later (metric,
-- init_centroids, algorithm, precision) come after device, so that older
-- calls keep their positions.  A parameter named by a keyword (precision)
-- is quoted: in named notation a call writes "precision" => ... too.
--
-- Set-returning functions and the k-means model fit: the rows are a source
-- query returning (id, features).  VOLATILE PARALLEL UNSAFE: the query
-- runs through SPI.
--
-- Window functions (src/common/window.c): gpu_dbscan(features, eps, min_pts)
-- OVER (...) and gpu_kmeans(features, k, ...) OVER (...) return each row's
-- cluster id; PARTITION BY clusters each partition on its own.
--
-- Not STRICT: the executor does not apply strictness to window functions
-- (a NULL argument still reaches the function), and NULL features are
-- legitimate (the row gets NULL); NULL parameters are errors.  STABLE: the
-- labels depend on the partition and, for k-means, on the device that the
-- gpuclust.* settings pick; nothing is written.  PARALLEL SAFE: no SPI, no
-- shared state (PostgreSQL 15 evaluates window functions above any Gather
-- anyway, so this only keeps a parallel scan below the WindowAgg possible).
-- ---------------------------------------------------------------------

-- ---------------------------------------------------------------------
-- k-means (src/kmeans/: kmeans_sql.c, kmeans_window_sql.c, kmeans_model_sql.c)
--
-- gpu_kmeans(source, ...), its window forms gpu_kmeans(features, ...) OVER
-- (...) and gpu_kmeans_fit(source, ...) take one parameter list, written
-- once here with its defaults: CREATE FUNCTION cannot share defaults, so
-- the four declarations are formatted around it.  The C code has no copy
-- of the defaults: PostgreSQL passes every argument, the window functions'
-- included (the planner inserts the defaults).
-- ---------------------------------------------------------------------

DO $kmeans$
DECLARE
    params CONSTANT text := $params$k int,
                           max_iter int DEFAULT 300,
                           tol float8 DEFAULT 1e-4,
                           init text DEFAULT 'k-means++',
                           n_init int DEFAULT 1,
                           seed bigint DEFAULT 0,
                           device text DEFAULT NULL$params$;
    -- given initial centroids fix k: every form but the elbow's
    one_k CONSTANT text := params OPERATOR(pg_catalog.||) $one_k$,
                           init_centroids real[] DEFAULT NULL$one_k$;
    -- last, in every form
    metric_arg CONSTANT text := $metric$,
                           metric text DEFAULT 'euclidean'$metric$;
BEGIN
    EXECUTE pg_catalog.format($sql$
CREATE FUNCTION @extschema@.gpu_kmeans(source text, %s)
RETURNS TABLE (id bigint, cluster_id int, distance float8)
AS 'MODULE_PATHNAME', 'gpu_kmeans'
LANGUAGE C VOLATILE PARALLEL UNSAFE$sql$, one_k OPERATOR(pg_catalog.||) metric_arg);

    EXECUTE pg_catalog.format($sql$
CREATE FUNCTION @extschema@.gpu_kmeans(features real[], %s)
RETURNS int
AS 'MODULE_PATHNAME', 'gpu_kmeans_window'
LANGUAGE C WINDOW STABLE PARALLEL SAFE$sql$, one_k OPERATOR(pg_catalog.||) metric_arg);

    EXECUTE pg_catalog.format($sql$
CREATE FUNCTION @extschema@.gpu_kmeans(features float8[], %s)
RETURNS int
AS 'MODULE_PATHNAME', 'gpu_kmeans_window'
LANGUAGE C WINDOW STABLE PARALLEL SAFE$sql$, one_k OPERATOR(pg_catalog.||) metric_arg);

    EXECUTE pg_catalog.format($sql$
CREATE FUNCTION @extschema@.gpu_kmeans_fit(source text, %s,
                               OUT centroids real[],
                               OUT inertia float8,
                               OUT iterations int,
                               OUT converged boolean,
                               OUT n bigint,
                               OUT d int)
RETURNS record
AS 'MODULE_PATHNAME', 'gpu_kmeans_fit'
LANGUAGE C VOLATILE PARALLEL UNSAFE$sql$, one_k OPERATOR(pg_catalog.||) metric_arg);

    -- the elbow: k-means for every k in [k_min, k_max], one ingest (kmeans_elbow_sql.c)
    EXECUTE pg_catalog.format($sql$
CREATE FUNCTION @extschema@.gpu_kmeans_elbow(source text, k_min int, k_max int, %s)
RETURNS TABLE (k int, inertia float8, iterations int, converged boolean)
AS 'MODULE_PATHNAME', 'gpu_kmeans_elbow'
LANGUAGE C VOLATILE PARALLEL UNSAFE$sql$,
        pg_catalog.substr(params, pg_catalog.length('k int,'::pg_catalog.text) OPERATOR(pg_catalog.+) 1)
        OPERATOR(pg_catalog.||) metric_arg);
END
$kmeans$;

COMMENT ON FUNCTION gpu_kmeans_elbow(text, int, int, int, float8, text, int, bigint, text, text) IS
'Choosing k by the elbow: the source is read once, then k-means runs for '
'every k from k_min to k_max with the other arguments of gpu_kmeans_fit, '
'returning each k''s inertia (sum of squared distances; of cosine '
'distances under metric => ''cosine''), iterations and convergence: the '
'row for k is what gpu_kmeans_fit(source, k, ...) returns.';

COMMENT ON FUNCTION gpu_kmeans(text, int, int, float8, text, int, bigint, text, real[], text) IS
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
'''gpu''; NULL uses gpuclust.device; weights, given centroids and the cosine '
'metric run on the CPU (''gpu'' is an error).  Any other NULL argument is an error.  An empty '
'source returns no rows.';

COMMENT ON FUNCTION gpu_kmeans(real[], int, int, float8, text, int, bigint, text, real[], text) IS
'Window function: k-means of the rows of the window partition, in the '
'window''s order; returns the row''s cluster (0 .. k-1), NULL for NULL '
'features.  Same labels as the set-returning gpu_kmeans(source, ...) over '
'the same rows in the same order with the same arguments.  The parameters '
'must be the same on every row of a partition.';
COMMENT ON FUNCTION gpu_kmeans(float8[], int, int, float8, text, int, bigint, text, real[], text) IS
'Window function: k-means of the rows of the window partition; see '
'gpu_kmeans(real[], int, int, float8, text, int, bigint, text, real[], text).';

COMMENT ON FUNCTION gpu_kmeans_fit(text, int, int, float8, text, int, bigint, text, real[], text) IS
'Fits k-means to the rows of source, a query returning (id, features), '
'exactly as gpu_kmeans(source, ...) clusters them, and returns the model: '
'centroids (a k x d real[], row c is the centre of cluster c; unit length '
'under metric => ''cosine''), inertia (sum of squared distances; of cosine '
'distances under cosine), iterations and converged of the kept run, and n '
'(rows with features) and d (features per row).  Needs at least k rows with '
'features.  Score rows with kmeans_assign(features, centroids), '
'kmeans_assign(features, centroids, ''cosine'') for a cosine model.';

CREATE FUNCTION @extschema@.kmeans_assign(features real[], centroids real[],
                              metric text DEFAULT 'euclidean')
RETURNS int
AS 'MODULE_PATHNAME', 'kmeans_assign'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION @extschema@.kmeans_assign(features float8[], centroids real[],
                              metric text DEFAULT 'euclidean')
RETURNS int
AS 'MODULE_PATHNAME', 'kmeans_assign'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION kmeans_assign(real[], real[], text) IS
'The 0-based index of the centroid (a row of the k x d array centroids, as '
'gpu_kmeans_fit returns it) nearest to features, by the distance k-means '
'itself uses (float32 sum of squared differences in dimension order; under '
'metric => ''cosine'', of the unit-length features and centroids, as '
'spherical k-means assigns); ties go to the lowest index.  For the rows a '
'model was fitted on, with the fit''s metric, it returns the fit''s labels.';
COMMENT ON FUNCTION kmeans_assign(float8[], real[], text) IS
'kmeans_assign for double precision features (narrowed to real first, as '
'the clustering functions do); see kmeans_assign(real[], real[], text).';

CREATE FUNCTION @extschema@.kmeans_assign_distance(features real[], centroids real[],
                                       metric text DEFAULT 'euclidean')
RETURNS float8
AS 'MODULE_PATHNAME', 'kmeans_assign_distance'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION @extschema@.kmeans_assign_distance(features float8[], centroids real[],
                                       metric text DEFAULT 'euclidean')
RETURNS float8
AS 'MODULE_PATHNAME', 'kmeans_assign_distance'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION kmeans_assign_distance(real[], real[], text) IS
'The distance from features to the centroid kmeans_assign picks (Euclidean, '
'or the cosine distance under metric => ''cosine''), computed in double '
'precision as gpu_kmeans''s distance column.';
COMMENT ON FUNCTION kmeans_assign_distance(float8[], real[], text) IS
'kmeans_assign_distance for double precision features; see '
'kmeans_assign_distance(real[], real[]).';

-- ---------------------------------------------------------------------
-- DBSCAN (src/dbscan/: dbscan_sql.c, dbscan_window_sql.c)
-- ---------------------------------------------------------------------

CREATE FUNCTION @extschema@.gpu_dbscan(source text, eps float8, min_pts int,
                           device text DEFAULT NULL,
                           metric text DEFAULT 'euclidean',
                           algorithm text DEFAULT 'union_find')
RETURNS TABLE (id bigint, cluster_id int, is_core boolean)
AS 'MODULE_PATHNAME', 'gpu_dbscan'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION gpu_dbscan(text, float8, int, text, text, text) IS
'DBSCAN clustering of the rows of source, a query returning (id, features).  '
'A point is core when at least min_pts points, itself included, lie within '
'distance eps: Euclidean, or with metric => ''cosine'' the cosine distance '
'1 - cos(a, b) (pgvector''s <=>; rows with all features 0 are an error).  '
'Clusters are numbered 0, 1, 2 ... in order of '
'their first row; noise gets a NULL cluster_id, and rows with NULL features '
'NULL cluster_id and is_core.  Rows come back in input order.  device is '
'''auto'', ''cpu'' or ''gpu''; NULL uses gpuclust.device.  algorithm is '
'''union_find'' (every device) or ''dclust'' (CUDA-DClust: chains of seeds '
'expanded in parallel on the GPU; GPU only: under ''auto'' it runs on the '
'GPU or fails with the reason, and ''cpu'' is an error); both give the same '
'labels.  Any other NULL argument is an error.  An empty source returns no '
'rows.';

CREATE FUNCTION @extschema@.gpu_dbscan(features real[], eps float8, min_pts int,
                           device text DEFAULT NULL,
                           metric text DEFAULT 'euclidean',
                           algorithm text DEFAULT 'union_find')
RETURNS int
AS 'MODULE_PATHNAME', 'gpu_dbscan_window'
LANGUAGE C WINDOW STABLE PARALLEL SAFE;

CREATE FUNCTION @extschema@.gpu_dbscan(features float8[], eps float8, min_pts int,
                           device text DEFAULT NULL,
                           metric text DEFAULT 'euclidean',
                           algorithm text DEFAULT 'union_find')
RETURNS int
AS 'MODULE_PATHNAME', 'gpu_dbscan_window'
LANGUAGE C WINDOW STABLE PARALLEL SAFE;

COMMENT ON FUNCTION gpu_dbscan(real[], float8, int, text, text, text) IS
'Window function: DBSCAN of the rows of the window partition, in the '
'window''s order; returns the row''s cluster (0, 1, 2 ... by first row of '
'the partition), NULL for noise and for NULL features.  Same labels as the '
'set-returning gpu_dbscan(source, ...) over the same rows in the same '
'order.  eps, min_pts, device, metric and algorithm must be the same on '
'every row of a partition.';
COMMENT ON FUNCTION gpu_dbscan(float8[], float8, int, text, text, text) IS
'Window function: DBSCAN of the rows of the window partition; see '
'gpu_dbscan(real[], float8, int, text, text, text).';

-- ---------------------------------------------------------------------
-- Affinity propagation (src/affinity/affinity_sql.c)
-- ---------------------------------------------------------------------

CREATE FUNCTION @extschema@.gpu_affinity_propagation(source text,
                                         damping float8 DEFAULT 0.5,
                                         preference float8 DEFAULT NULL,
                                         max_iter int DEFAULT 200,
                                         convergence_iter int DEFAULT 15,
                                         device text DEFAULT NULL,
                                         "precision" text DEFAULT 'float8')
RETURNS TABLE (id bigint, cluster_id int, is_exemplar boolean)
AS 'MODULE_PATHNAME', 'gpu_affinity_propagation'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION gpu_affinity_propagation(text, float8, float8, int, int, text, text) IS
'Affinity propagation (Frey and Dueck) of the rows of source, a query '
'returning (id, features), with scikit-learn''s AffinityPropagation '
'semantics: similarity = minus the squared Euclidean distance; preference '
'NULL = the median of the similarities; damping in [0.5, 1); stops when the '
'exemplars have not changed for convergence_iter iterations, or after '
'max_iter (then a NOTICE, and the last iteration''s exemplars still label '
'the rows; with none, every cluster_id is NULL).  Clusters are numbered '
'0, 1, ... by their exemplar''s input position; is_exemplar marks the '
'exemplars.  Rows with NULL features get NULL.  Runs on the CPU or the GPU '
'(device; ''auto'': the GPU for larger inputs when it fits); needs 24 n^2 '
'bytes (float4: 12 n^2 on the GPU), at most gpuclust.max_matrix_memory, '
'checked before anything runs.  "precision" (a keyword: quote it when '
'naming it) ''float8'' (the default) gives the same result on every '
'device; ''float4'' stores the matrices as float, on the GPU only.';

-- ---------------------------------------------------------------------
-- Keyed forms (src/common/args.c, ingest.c): ids of any type
--
-- gpu_dbscan(source, id_type anyelement, eps, ...) and likewise for
-- gpu_kmeans and gpu_affinity_propagation: a NULL of the source's id type
-- right after the source (NULL::uuid, NULL::text ...) makes the results'
-- id that type, carried back as the source returned it.  Declared from the
-- set-returning forms above (same C function, parameters and defaults,
-- read from the catalog, so that they stay written once); the C function
-- tells the keyed form by its one more argument.  id_type comes second,
-- not first: before the source, a NULL::text would let the plain form
-- take the source for its second parameter.
-- ---------------------------------------------------------------------

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
          AND p.proname OPERATOR(pg_catalog.=) ANY ('{gpu_dbscan, gpu_kmeans, gpu_affinity_propagation}'::pg_catalog.name[])
          AND p.proretset
          AND p.proargtypes[0] OPERATOR(pg_catalog.=) 'pg_catalog.text'::pg_catalog.regtype::pg_catalog.oid
        ORDER BY p.proname
    LOOP
        IF f.args OPERATOR(pg_catalog.!~) '^source text, '::pg_catalog.text
           OR f.result OPERATOR(pg_catalog.!~) '^TABLE\(id bigint, '::pg_catalog.text THEN
            RAISE EXCEPTION 'unexpected declaration of %', f.plain_form;
        END IF;
        EXECUTE pg_catalog.format(
            'CREATE FUNCTION @extschema@.%I(source pg_catalog.text, id_type anyelement, %s) RETURNS %s '
            'AS %L, %L LANGUAGE C VOLATILE PARALLEL UNSAFE',
            f.proname, pg_catalog.substr(f.args, pg_catalog.length('source text, '::pg_catalog.text) OPERATOR(pg_catalog.+) 1),
            pg_catalog.regexp_replace(f.result, '^TABLE\(id bigint, '::pg_catalog.text,
                                      'TABLE(id anyelement, '::pg_catalog.text),
            f.probin, f.prosrc);
        EXECUTE pg_catalog.format(
            'COMMENT ON FUNCTION @extschema@.%I(pg_catalog.text, anyelement, %s) IS %L',
            f.proname, pg_catalog.substr(f.ident, pg_catalog.length('source text, '::pg_catalog.text) OPERATOR(pg_catalog.+) 1),
            pg_catalog.format('%s for ids of any type: id_type is a NULL of the source''s '
                   'id type (NULL::uuid, NULL::text ...), and the results'' id '
                   'has that type; see %s.'::pg_catalog.text, f.proname, f.plain_form));
    END LOOP;
END
$keyed$;

-- ---------------------------------------------------------------------
-- Information (info_sql.c)
-- ---------------------------------------------------------------------

CREATE FUNCTION @extschema@.gpuclust_info()
RETURNS TABLE (key text, value text)
AS 'MODULE_PATHNAME', 'gpuclust_info'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION gpuclust_info() IS
'Whether gpuclust was built with CUDA, whether the GPU can be used (and why '
'not), its name, memory and compute capability, and the device ''auto'' '
'picks for each algorithm.';

-- ---------------------------------------------------------------------
-- Progress of running calls (progress.c)
-- ---------------------------------------------------------------------

CREATE FUNCTION @extschema@.gpuclust_progress_rows()
RETURNS TABLE (pid int, algorithm text, device text, phase text,
               iteration bigint, max_iter bigint, rows bigint,
               points_done bigint, points_total bigint, inertia float8,
               elapsed_ms float8, userid oid)
AS 'MODULE_PATHNAME', 'gpuclust_progress'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE VIEW @extschema@.gpuclust_progress AS
SELECT p.pid, p.userid, r.rolname AS usename, p.algorithm, p.device, p.phase,
       p.iteration, p.max_iter, p.rows, p.points_done, p.points_total,
       p.inertia, p.elapsed_ms
FROM @extschema@.gpuclust_progress_rows() p
     LEFT JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) p.userid;

COMMENT ON VIEW gpuclust_progress IS
'One row per running gpuclust call (when gpuclust is in '
'shared_preload_libraries; otherwise empty): its pid, role, function, '
'device (NULL until chosen), phase (ingest, upload, index, init, iterate, '
'label, emit), iteration of max_iter (k-means, affinity propagation), rows '
'clustered, the points done of total (DBSCAN, gpu_kdistance''s queries, '
'gpu_silhouette''s rows scored), the inertia after the last '
'k-means iteration, and the time since it started.  Roles without '
'pg_read_all_stats see their own calls only.';
GRANT SELECT ON @extschema@.gpuclust_progress TO PUBLIC;

-- ---------------------------------------------------------------------
-- Choosing eps and k, reading clusters (src/tools/kdistance_sql.c,
-- src/kmeans/kmeans_elbow_sql.c, src/tools/labelled_rows_sql.c)
-- ---------------------------------------------------------------------

CREATE FUNCTION @extschema@.gpu_kdistance(source text, k int, quantiles int DEFAULT NULL,
                              device text DEFAULT NULL)
RETURNS TABLE (rank bigint, fraction float8, kdistance float8, is_knee boolean)
AS 'MODULE_PATHNAME', 'gpu_kdistance'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION gpu_kdistance(text, int, int, text) IS
'Choosing DBSCAN''s eps: every row''s Euclidean distance to its k-th nearest '
'row, the row itself counted first (so a row is core at min_pts = k exactly '
'when its k-distance is at most eps), sorted ascending (rank 1 .. n, '
'fraction (rank - 1) / (n - 1)).  is_knee marks the knee of the curve, the '
'suggested eps.  quantiles q returns only the ranks 1 + round(i (n - 1) / q), '
'i = 0 .. q, and the knee.  On the GPU (the DBSCAN kd-tree) or the CPU, '
'with the same result bit for bit.';

CREATE FUNCTION @extschema@.gpu_silhouette(source text, labels_query text,
                               sample_size int DEFAULT NULL,
                               seed bigint DEFAULT 0,
                               device text DEFAULT NULL,
                               OUT silhouette float8,
                               OUT n bigint,
                               OUT clusters bigint,
                               OUT sampled boolean)
RETURNS record
AS 'MODULE_PATHNAME', 'gpu_silhouette'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION gpu_silhouette(text, text, int, bigint, text) IS
'The mean silhouette coefficient (scikit-learn''s silhouette_score) of the '
'labelling labels_query returns as (id, label) for the rows of source; rows '
'with a NULL label, or none, are noise and not scored.  Exact up to 20,000 '
'labelled rows when sample_size is NULL; otherwise on a sample of '
'sample_size (NULL: 20,000) rows drawn by seed.  On the GPU or the CPU, with '
'the same score bit for bit.';

CREATE FUNCTION @extschema@.gpu_cluster_centers(source text, labels_query text)
RETURNS TABLE (cluster_id bigint, size bigint, centroid float8[],
               radius float8, mean_distance float8)
AS 'MODULE_PATHNAME', 'gpu_cluster_centers'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION gpu_cluster_centers(text, text) IS
'For each label of the labelling labels_query returns as (id, label) for the '
'rows of source, in ascending order: its rows, their mean (centroid), and '
'the largest (radius) and mean Euclidean distance of its rows to it.  Rows '
'with a NULL label, or none, are noise and left out.  Runs on the CPU.';

-- ---------------------------------------------------------------------
-- The GPU worker's jobs (src/worker/info_sql.c; the worker: worker.c)
-- ---------------------------------------------------------------------

CREATE FUNCTION @extschema@.gpuclust_gpu_jobs_rows()
RETURNS TABLE (pid int, algorithm text, n bigint, d int, state text,
               gpu_memory_bytes bigint, elapsed_ms float8,
               running_ms float8)
AS 'MODULE_PATHNAME', 'gpuclust_gpu_jobs'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE VIEW @extschema@.gpuclust_gpu_jobs AS
SELECT * FROM @extschema@.gpuclust_gpu_jobs_rows();

COMMENT ON VIEW gpuclust_gpu_jobs IS
'The GPU worker''s queued and running jobs (when gpuclust is in '
'shared_preload_libraries with gpuclust.gpu_worker on; otherwise empty): '
'the pid of the backend that asked, the function, rows and features, '
'queued or running, the GPU memory it holds or waits for, the time since '
'it was queued, and since it started.  Roles without pg_read_all_stats '
'see their own jobs only.';
GRANT SELECT ON @extschema@.gpuclust_gpu_jobs TO PUBLIC;

-- k-means as a combinable aggregate (one Lloyd iteration), and its driver

CREATE TYPE @extschema@.kmeans_step_result AS (
    centroids real[],     -- k x d: the new centres (a centre with no row keeps its given one)
    counts bigint[],      -- rows per centre
    inertia float8,       -- sum of squared distances to the given centres
    shift float8,         -- sum of squared moves of the centres
    n bigint,             -- rows aggregated
    members bigint[],     -- per centre, an order-independent hash of its rows
    cost float8,          -- sum of the float32 squared distances (k-means++'s potential)
    reseeded int          -- centres with no row that took the farthest row (a step that
                          -- re-seeds has not converged, however little the labels moved)
);

-- The state: one flat value (src/distributed/kmeans_step.c), not internal, so that
-- Citus moves it (its worker_partial_agg sends the type's text form from
-- each shard to the coordinator); parallel query ships it as any value.
CREATE TYPE @extschema@.kmeans_step_state;
CREATE FUNCTION @extschema@.kmeans_step_state_in(cstring)
RETURNS @extschema@.kmeans_step_state AS 'MODULE_PATHNAME', 'kmeans_step_state_in'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.kmeans_step_state_out(@extschema@.kmeans_step_state)
RETURNS cstring AS 'MODULE_PATHNAME', 'kmeans_step_state_out'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE TYPE @extschema@.kmeans_step_state (
    INPUT = @extschema@.kmeans_step_state_in, OUTPUT = @extschema@.kmeans_step_state_out,
    INTERNALLENGTH = VARIABLE, ALIGNMENT = double);
COMMENT ON TYPE @extschema@.kmeans_step_state IS
'kmeans_step''s state: per centre the count, double sums, a hash of its rows, '
'and the rows farthest from their centres.  Its text form (base64, in the '
'server''s byte order) is what Citus sends from the shards to the coordinator.';
COMMENT ON FUNCTION kmeans_step_state_in(cstring) IS
'kmeans_step_state from its text form, checked.';
COMMENT ON FUNCTION kmeans_step_state_out(@extschema@.kmeans_step_state) IS
'kmeans_step_state''s text form.';

CREATE FUNCTION @extschema@.kmeans_step_transfn(@extschema@.kmeans_step_state, real[], real[])
RETURNS @extschema@.kmeans_step_state AS 'MODULE_PATHNAME', 'kmeans_step_transfn'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION @extschema@.kmeans_step_transfn(@extschema@.kmeans_step_state, float8[], real[])
RETURNS @extschema@.kmeans_step_state AS 'MODULE_PATHNAME', 'kmeans_step_transfn'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION @extschema@.kmeans_step_transfn(@extschema@.kmeans_step_state, real[], real[], bigint)
RETURNS @extschema@.kmeans_step_state AS 'MODULE_PATHNAME', 'kmeans_step_transfn'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION @extschema@.kmeans_step_transfn(@extschema@.kmeans_step_state, float8[], real[], bigint)
RETURNS @extschema@.kmeans_step_state AS 'MODULE_PATHNAME', 'kmeans_step_transfn'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION @extschema@.kmeans_step_transfn(@extschema@.kmeans_step_state, real[], real[], bigint, text)
RETURNS @extschema@.kmeans_step_state AS 'MODULE_PATHNAME', 'kmeans_step_transfn'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION @extschema@.kmeans_step_transfn(@extschema@.kmeans_step_state, float8[], real[], bigint, text)
RETURNS @extschema@.kmeans_step_state AS 'MODULE_PATHNAME', 'kmeans_step_transfn'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION @extschema@.kmeans_step_combine(@extschema@.kmeans_step_state, @extschema@.kmeans_step_state)
RETURNS @extschema@.kmeans_step_state AS 'MODULE_PATHNAME', 'kmeans_step_combine'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION @extschema@.kmeans_step_final(@extschema@.kmeans_step_state)
RETURNS @extschema@.kmeans_step_result AS 'MODULE_PATHNAME', 'kmeans_step_final'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

CREATE AGGREGATE @extschema@.kmeans_step(features real[], centroids real[]) (
    SFUNC = @extschema@.kmeans_step_transfn, STYPE = @extschema@.kmeans_step_state,
    COMBINEFUNC = @extschema@.kmeans_step_combine,
    FINALFUNC = @extschema@.kmeans_step_final, PARALLEL = SAFE);
CREATE AGGREGATE @extschema@.kmeans_step(features float8[], centroids real[]) (
    SFUNC = @extschema@.kmeans_step_transfn, STYPE = @extschema@.kmeans_step_state,
    COMBINEFUNC = @extschema@.kmeans_step_combine,
    FINALFUNC = @extschema@.kmeans_step_final, PARALLEL = SAFE);
CREATE AGGREGATE @extschema@.kmeans_step(features real[], centroids real[], id bigint) (
    SFUNC = @extschema@.kmeans_step_transfn, STYPE = @extschema@.kmeans_step_state,
    COMBINEFUNC = @extschema@.kmeans_step_combine,
    FINALFUNC = @extschema@.kmeans_step_final, PARALLEL = SAFE);
CREATE AGGREGATE @extschema@.kmeans_step(features float8[], centroids real[], id bigint) (
    SFUNC = @extschema@.kmeans_step_transfn, STYPE = @extschema@.kmeans_step_state,
    COMBINEFUNC = @extschema@.kmeans_step_combine,
    FINALFUNC = @extschema@.kmeans_step_final, PARALLEL = SAFE);
CREATE AGGREGATE @extschema@.kmeans_step(features real[], centroids real[], id bigint, device text) (
    SFUNC = @extschema@.kmeans_step_transfn, STYPE = @extschema@.kmeans_step_state,
    COMBINEFUNC = @extschema@.kmeans_step_combine,
    FINALFUNC = @extschema@.kmeans_step_final, PARALLEL = SAFE);
CREATE AGGREGATE @extschema@.kmeans_step(features float8[], centroids real[], id bigint, device text) (
    SFUNC = @extschema@.kmeans_step_transfn, STYPE = @extschema@.kmeans_step_state,
    COMBINEFUNC = @extschema@.kmeans_step_combine,
    FINALFUNC = @extschema@.kmeans_step_final, PARALLEL = SAFE);

COMMENT ON AGGREGATE kmeans_step(real[], real[]) IS
'One k-means (Lloyd) iteration over the rows from the k x d centroids: each '
'row goes to its nearest centroid exactly as kmeans_assign assigns it, and '
'the result has the new centres (double means rounded to real), the counts, '
'the inertia, the squared shift and a hash of each cluster''s rows.  '
'Combinable, with a state of its own type: parallel query runs it in parallel '
'workers, and Citus on the shards of a distributed table.  '
'NULL centroids: one centre at the origin (the rows'' count and mean).  With '
'an id argument, errors name the row.';

COMMENT ON AGGREGATE kmeans_step(float8[], real[]) IS
'kmeans_step for double precision features (narrowed to real first); see kmeans_step(real[], real[]).';
COMMENT ON AGGREGATE kmeans_step(real[], real[], bigint) IS
'kmeans_step(features, centroids) whose errors name the row by id; see kmeans_step(real[], real[]).';
COMMENT ON AGGREGATE kmeans_step(float8[], real[], bigint) IS
'kmeans_step(features, centroids) whose errors name the row by id; see kmeans_step(real[], real[]).';
COMMENT ON AGGREGATE kmeans_step(real[], real[], bigint, text) IS
'kmeans_step(features, centroids, id) on the given device (''auto'', ''cpu'', ''gpu''; '
'NULL: gpuclust.device), where each block of rows is labelled: the same result '
'on every device; see kmeans_step(real[], real[]).';
COMMENT ON AGGREGATE kmeans_step(float8[], real[], bigint, text) IS
'kmeans_step(features, centroids, id) on the given device; see kmeans_step(real[], real[], bigint, text).';
COMMENT ON FUNCTION kmeans_step_transfn(@extschema@.kmeans_step_state, real[], real[]) IS 'kmeans_step''s transition function.';
COMMENT ON FUNCTION kmeans_step_transfn(@extschema@.kmeans_step_state, float8[], real[]) IS 'kmeans_step''s transition function.';
COMMENT ON FUNCTION kmeans_step_transfn(@extschema@.kmeans_step_state, real[], real[], bigint) IS 'kmeans_step''s transition function.';
COMMENT ON FUNCTION kmeans_step_transfn(@extschema@.kmeans_step_state, float8[], real[], bigint) IS 'kmeans_step''s transition function.';
COMMENT ON FUNCTION kmeans_step_transfn(@extschema@.kmeans_step_state, real[], real[], bigint, text) IS 'kmeans_step''s transition function.';
COMMENT ON FUNCTION kmeans_step_transfn(@extschema@.kmeans_step_state, float8[], real[], bigint, text) IS 'kmeans_step''s transition function.';
COMMENT ON FUNCTION kmeans_step_combine(@extschema@.kmeans_step_state, @extschema@.kmeans_step_state) IS
'kmeans_step''s combine function: adds two partial states over the same centroids '
'(parallel workers'', or Citus shards'').';
COMMENT ON FUNCTION kmeans_step_final(@extschema@.kmeans_step_state) IS
'kmeans_step''s final function: the new centres and the iteration''s statistics.';

-- The ranks behind gpu_kmeans_distributed's positional draw (random
-- seeding, k-means||'s first candidate): an int8[] state, a real type, so
-- that Citus runs it on the shards (src/distributed/kmeans_rank_counts.c).
CREATE FUNCTION @extschema@.kmeans_rank_counts_transfn(bigint[], bigint, bigint[])
RETURNS bigint[] AS 'MODULE_PATHNAME', 'kmeans_rank_counts_transfn'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION @extschema@.kmeans_rank_counts_combine(bigint[], bigint[])
RETURNS bigint[] AS 'MODULE_PATHNAME', 'kmeans_rank_counts_combine'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION @extschema@.kmeans_rank_counts_final(bigint[])
RETURNS bigint[] AS 'MODULE_PATHNAME', 'kmeans_rank_counts_final'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE AGGREGATE @extschema@.kmeans_rank_counts(id bigint, pivots bigint[]) (
    SFUNC = @extschema@.kmeans_rank_counts_transfn, STYPE = bigint[],
    COMBINEFUNC = @extschema@.kmeans_rank_counts_combine,
    FINALFUNC = @extschema@.kmeans_rank_counts_final, PARALLEL = SAFE);
COMMENT ON AGGREGATE kmeans_rank_counts(bigint, bigint[]) IS
'For each of the pivots (ascending, the same in every row), the count of rows '
'whose id is below it; NULL over no rows.  Combinable, with a bigint[] state: '
'parallel query runs it in parallel workers, and Citus on the shards.  '
'gpu_kmeans_distributed draws rows by position with it.';
COMMENT ON FUNCTION kmeans_rank_counts_transfn(bigint[], bigint, bigint[]) IS
'kmeans_rank_counts''s transition function.';
COMMENT ON FUNCTION kmeans_rank_counts_combine(bigint[], bigint[]) IS
'kmeans_rank_counts''s combine function: the counts added, over the same pivots.';
COMMENT ON FUNCTION kmeans_rank_counts_final(bigint[]) IS
'kmeans_rank_counts''s final function: the counts below each pivot.';

CREATE FUNCTION @extschema@.gpu_kmeans_distributed(source text, k int, max_iter int DEFAULT 300,
                                       tol float8 DEFAULT 1e-4, init text DEFAULT 'k-means||',
                                       seed bigint DEFAULT 0, init_centroids real[] DEFAULT NULL,
                                       device text DEFAULT NULL,
                                       OUT centroids real[], OUT inertia float8,
                                       OUT iterations int, OUT converged boolean,
                                       OUT n bigint, OUT d int)
RETURNS record
AS 'MODULE_PATHNAME', 'gpu_kmeans_distributed'
LANGUAGE C VOLATILE;

COMMENT ON FUNCTION gpu_kmeans_distributed(text, int, int, float8, text, bigint, real[], text) IS
'k-means as repeated kmeans_step aggregates over the source query (id, '
'features), each of which parallel query can run in parallel workers; '
'returns the model as gpu_kmeans_fit does.  Seeds with k-means|| (rounds of '
'per-row sampling) or ''random'', or starts from init_centroids.  From the '
'same initial centres (init_centroids, or init => ''random'' from the same '
'seed, which draws among the rows in id order, over a source in id order) its '
'centres equal gpu_kmeans_fit''s up '
'to the order of the double sums; label the rows with kmeans_assign.';

CREATE FUNCTION @extschema@.kmeans_parallel_sample(features real[], centroids real[], id bigint,
                                       seed bigint, round int, n bigint, ell float8, phi float8)
RETURNS boolean
AS 'MODULE_PATHNAME', 'kmeans_parallel_sample'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.kmeans_parallel_sample(features float8[], centroids real[], id bigint,
                                       seed bigint, round int, n bigint, ell float8, phi float8)
RETURNS boolean
AS 'MODULE_PATHNAME', 'kmeans_parallel_sample'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION kmeans_parallel_sample(real[], real[], bigint, bigint, int, bigint, float8, float8) IS
'k-means|| sampling of one row (gpu_kmeans_distributed): true when the row''s '
'own uniform draw, keyed by seed, round, n and id as the core''s k-means|| '
'keys it by position, is below ell times its float distance squared to the '
'nearest centroid over phi.';
COMMENT ON FUNCTION kmeans_parallel_sample(float8[], real[], bigint, bigint, int, bigint, float8, float8) IS
'kmeans_parallel_sample for double precision features.';

-- DBSCAN over partitioned / distributed tables (src/distributed/:
-- dbscan_partitioned_agg.c, the building blocks; dbscan_partitioned_driver.c,
-- the driver; the method:
-- src/core/dbscan/dbscan.h).  Slabs along one dimension, each clustered with
-- a halo of two eps where its rows live, joined on the coordinator.

-- {n, lo_1 .. lo_d, hi_1 .. hi_d} of the rows with features; NULL when none.
CREATE FUNCTION @extschema@.dbscan_bounds_transfn(float8[], real[], bigint)
RETURNS float8[] AS 'MODULE_PATHNAME', 'dbscan_bounds_transfn'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION @extschema@.dbscan_bounds_transfn(float8[], float8[], bigint)
RETURNS float8[] AS 'MODULE_PATHNAME', 'dbscan_bounds_transfn'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION @extschema@.dbscan_bounds_combine(float8[], float8[])
RETURNS float8[] AS 'MODULE_PATHNAME', 'dbscan_bounds_combine'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE AGGREGATE @extschema@.dbscan_bounds(features real[], id bigint) (
    SFUNC = @extschema@.dbscan_bounds_transfn, STYPE = float8[],
    COMBINEFUNC = @extschema@.dbscan_bounds_combine, PARALLEL = SAFE);
CREATE AGGREGATE @extschema@.dbscan_bounds(features float8[], id bigint) (
    SFUNC = @extschema@.dbscan_bounds_transfn, STYPE = float8[],
    COMBINEFUNC = @extschema@.dbscan_bounds_combine, PARALLEL = SAFE);
COMMENT ON AGGREGATE dbscan_bounds(real[], bigint) IS
'The rows'' count and the bounds of each feature, {n, lo_1 .. lo_d, hi_1 .. hi_d} '
'(features as real), checked as every source''s rows are (errors name the id); '
'combinable (parallel query, Citus).  gpu_dbscan_distributed''s first pass.';
COMMENT ON AGGREGATE dbscan_bounds(float8[], bigint) IS
'dbscan_bounds for double precision features (narrowed to real first).';

-- counts[bins] of the rows' feature dim (0-based) in equal bins over [lo, hi]
CREATE FUNCTION @extschema@.dbscan_histogram_transfn(float8[], real[], int, float8, float8, int)
RETURNS float8[] AS 'MODULE_PATHNAME', 'dbscan_histogram_transfn'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION @extschema@.dbscan_histogram_transfn(float8[], float8[], int, float8, float8, int)
RETURNS float8[] AS 'MODULE_PATHNAME', 'dbscan_histogram_transfn'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION @extschema@.dbscan_histogram_combine(float8[], float8[])
RETURNS float8[] AS 'MODULE_PATHNAME', 'dbscan_histogram_combine'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE AGGREGATE @extschema@.dbscan_histogram(features real[], dim int, lo float8, hi float8, bins int) (
    SFUNC = @extschema@.dbscan_histogram_transfn, STYPE = float8[],
    COMBINEFUNC = @extschema@.dbscan_histogram_combine, PARALLEL = SAFE);
CREATE AGGREGATE @extschema@.dbscan_histogram(features float8[], dim int, lo float8, hi float8, bins int) (
    SFUNC = @extschema@.dbscan_histogram_transfn, STYPE = float8[],
    COMBINEFUNC = @extschema@.dbscan_histogram_combine, PARALLEL = SAFE);
COMMENT ON AGGREGATE dbscan_histogram(real[], int, float8, float8, int) IS
'Counts of the rows'' feature dim (0-based, as real) in bins of equal width '
'over [lo, hi] (outside: the end bins); combinable.  gpu_dbscan_distributed''s '
'second pass, from which it cuts the slabs.';
COMMENT ON AGGREGATE dbscan_histogram(float8[], int, float8, float8, int) IS
'dbscan_histogram for double precision features.';

-- plan: {d, dim (0-based), halo, cut_1 .. cut_(P-1)}
CREATE FUNCTION @extschema@.dbscan_partitions(features real[], plan float8[],
                                  OUT part int, OUT home int, OUT shared boolean, OUT x real[])
RETURNS SETOF record AS 'MODULE_PATHNAME', 'dbscan_partitions'
LANGUAGE C IMMUTABLE PARALLEL SAFE ROWS 2;
CREATE FUNCTION @extschema@.dbscan_partitions(features float8[], plan float8[],
                                  OUT part int, OUT home int, OUT shared boolean, OUT x real[])
RETURNS SETOF record AS 'MODULE_PATHNAME', 'dbscan_partitions'
LANGUAGE C IMMUTABLE PARALLEL SAFE ROWS 2;
COMMENT ON FUNCTION dbscan_partitions(real[], float8[]) IS
'The partitions that hold a row under a plan {d, dim, halo, cut_1 .. cut_(P-1)}: '
'its home slab and every slab within halo of it, with its home, whether it is '
'held more than once, and its features as real.  NULL features: one row, '
'partition 0, x NULL.';
COMMENT ON FUNCTION dbscan_partitions(float8[], float8[]) IS
'dbscan_partitions for double precision features.';

-- one partition's local DBSCAN and its summary (src/core/dbscan/dbscan.h)
CREATE FUNCTION @extschema@.dbscan_partition_transfn(internal, int, bigint, real[], int, boolean,
                                         float8, int, text)
RETURNS internal AS 'MODULE_PATHNAME', 'dbscan_partition_transfn'
LANGUAGE C PARALLEL SAFE;
CREATE FUNCTION @extschema@.dbscan_partition_combine(internal, internal)
RETURNS internal AS 'MODULE_PATHNAME', 'dbscan_partition_combine'
LANGUAGE C PARALLEL SAFE;
CREATE FUNCTION @extschema@.dbscan_partition_serialize(internal)
RETURNS bytea AS 'MODULE_PATHNAME', 'dbscan_partition_serialize'
LANGUAGE C STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.dbscan_partition_deserialize(bytea, internal)
RETURNS internal AS 'MODULE_PATHNAME', 'dbscan_partition_deserialize'
LANGUAGE C STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.dbscan_partition_final(internal)
RETURNS bytea AS 'MODULE_PATHNAME', 'dbscan_partition_final'
LANGUAGE C PARALLEL SAFE;
CREATE AGGREGATE @extschema@.dbscan_partition(part int, id bigint, x real[], home int, shared boolean,
                                  eps float8, min_pts int, device text) (
    SFUNC = @extschema@.dbscan_partition_transfn, STYPE = internal,
    COMBINEFUNC = @extschema@.dbscan_partition_combine,
    SERIALFUNC = @extschema@.dbscan_partition_serialize, DESERIALFUNC = @extschema@.dbscan_partition_deserialize,
    FINALFUNC = @extschema@.dbscan_partition_final, PARALLEL = SAFE);
COMMENT ON AGGREGATE dbscan_partition(int, bigint, real[], int, boolean, float8, int, text) IS
'DBSCAN of one partition''s rows (dbscan_partitions'' output, grouped by part) '
'on this node''s GPU or CPUs, as gpu_dbscan over them in id order; returns its '
'summary for gpu_dbscan_distributed''s merge: the local clusters, the home '
'rows'' labels and core flags, and the core rows other partitions hold too.';

CREATE FUNCTION @extschema@.gpu_dbscan_distributed(source text, eps float8, min_pts int,
                                       partitions int DEFAULT NULL, device text DEFAULT NULL)
RETURNS TABLE (id bigint, cluster_id int, is_core boolean)
AS 'MODULE_PATHNAME', 'gpu_dbscan_distributed'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION gpu_dbscan_distributed(text, float8, int, int, text) IS
'DBSCAN over the source query (id, features) without gathering its rows: '
'slabs along the widest feature, each clustered with a halo of two eps where '
'its rows live (Citus: on the worker holding it, through a work table '
'distributed by partition; otherwise one aggregate, run by parallel query), '
'joined by a union-find of the core rows partitions share.  Returns exactly '
'gpu_dbscan''s labels over the source in id order (ids unique).';
COMMENT ON FUNCTION dbscan_bounds_transfn(float8[], real[], bigint) IS 'dbscan_bounds''s transition function.';
COMMENT ON FUNCTION dbscan_bounds_transfn(float8[], float8[], bigint) IS 'dbscan_bounds''s transition function.';
COMMENT ON FUNCTION dbscan_bounds_combine(float8[], float8[]) IS
'dbscan_bounds''s combine function: the counts added, the bounds widened.';
COMMENT ON FUNCTION dbscan_histogram_transfn(float8[], real[], int, float8, float8, int) IS 'dbscan_histogram''s transition function.';
COMMENT ON FUNCTION dbscan_histogram_transfn(float8[], float8[], int, float8, float8, int) IS 'dbscan_histogram''s transition function.';
COMMENT ON FUNCTION dbscan_histogram_combine(float8[], float8[]) IS
'dbscan_histogram''s combine function: the counts added.';
COMMENT ON FUNCTION dbscan_partition_transfn(internal, int, bigint, real[], int, boolean, float8, int, text) IS
'dbscan_partition''s transition function: keeps the row.';
COMMENT ON FUNCTION dbscan_partition_combine(internal, internal) IS
'dbscan_partition''s combine function: the rows of two partial states of one partition.';
COMMENT ON FUNCTION dbscan_partition_serialize(internal) IS
'dbscan_partition''s state as bytea (parallel query).';
COMMENT ON FUNCTION dbscan_partition_deserialize(bytea, internal) IS
'dbscan_partition''s state from bytea (parallel query).';
COMMENT ON FUNCTION dbscan_partition_final(internal) IS
'dbscan_partition''s final function: the partition''s DBSCAN and its summary.';
