/* gpuclust_postgis--0.1.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION gpuclust_postgis" to load this file. \quit

-- ---------------------------------------------------------------------
-- PostGIS points as features, so that gpuclust itself needs no PostGIS:
--
-- * casts from geometry and geography to real[]: a POINT gives [x, y], a
--   POINT Z (or ZM) [x, y, z]; M is dropped (a measure, not a coordinate).
--   A geography point gives [longitude, latitude] in degrees, clustered
--   as planar coordinates, as ST_ClusterDBSCAN clusters a geometry.  Any
--   other geometry (LINESTRING, POLYGON, MULTIPOINT ...) and an empty
--   point are an error (22023); NULL gives NULL.  The set-returning forms
--   use these casts for a source query returning (id, geom), as for any
--   type with a cast to real[] (src/common/ingest.c);
--
-- * the window forms gpu_dbscan(geom, eps, min_pts) OVER (...) and
--   gpu_kmeans(geom, k, ...) OVER (...) for geometry and geography: the
--   same C functions as the real[] forms, which cast any other features
--   type to real[] (src/common/window.c).  They are needed because PostGIS
--   casts geometry to text implicitly, which would otherwise pick the
--   set-returning gpu_dbscan(source text, ...).
--
-- The cast functions are SQL bodies (parsed and bound here) that the
-- planner inlines into the casting expression; only the error goes
-- through PL/pgSQL.
--
-- Every name is qualified: the extension's own with @extschema@, the
-- built-ins with pg_catalog, PostGIS's with the schema PostGIS lives in
-- (read from its pg_extension row, as this script cannot name it
-- otherwise on every release), so that no object of another schema on
-- the search_path is bound here or run later.  The error function's
-- PL/pgSQL body, bound only when it runs, is 0.1's as released:
-- gpuclust_postgis--0.1--0.2.sql, which every installation runs after
-- this script, replaces it with the qualified one.
-- ---------------------------------------------------------------------

CREATE FUNCTION @extschema@.gpuclust_not_a_point(geometry_type text)
RETURNS real[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    RAISE EXCEPTION USING
        ERRCODE = 'invalid_parameter_value',
        MESSAGE = CASE WHEN geometry_type = 'ST_Point'
                       THEN 'features are an empty point'
                       ELSE format('features are a %s, not a point',
                                   upper(substr(geometry_type, 4))) END,
        DETAIL = 'A geometry or geography is cast to real[] as the coordinates of a point: [x, y], or [x, y, z].',
        HINT = CASE WHEN geometry_type = 'ST_Point'
                    THEN 'Leave the row out (WHERE NOT ST_IsEmpty(geom)), or give it NULL features to leave it unclustered.'
                    ELSE 'Cluster a point of each shape: ST_Centroid(geom) or ST_PointOnSurface(geom); ST_Dump(geom) splits a MULTIPOINT.' END;
END
$$;

COMMENT ON FUNCTION @extschema@.gpuclust_not_a_point(text) IS
'The error of gpuclust_point_features for a geometry that is not a '
'non-empty point.';

-- The cast functions and the casts, written with @postgis@ for PostGIS's
-- schema.
DO $$
DECLARE
    postgis CONSTANT text := (
        SELECT pg_catalog.quote_ident(n.nspname)
        FROM pg_catalog.pg_extension e
        JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
        WHERE e.extname OPERATOR(pg_catalog.=) 'postgis'::pg_catalog.name);
BEGIN
    EXECUTE pg_catalog.replace($sql$
CREATE FUNCTION @extschema@.gpuclust_point_features(g @postgis@.geometry)
RETURNS real[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE
    WHEN g IS NULL THEN NULL
    WHEN @postgis@.ST_GeometryType(g) OPERATOR(pg_catalog.<>) 'ST_Point'::pg_catalog.text
         OR @postgis@.ST_IsEmpty(g)
        THEN @extschema@.gpuclust_not_a_point(@postgis@.ST_GeometryType(g))
    WHEN @postgis@.ST_Zmflag(g) OPERATOR(pg_catalog.>=) 2::pg_catalog.int2
        THEN ARRAY[@postgis@.ST_X(g), @postgis@.ST_Y(g), @postgis@.ST_Z(g)]::real[]
    ELSE ARRAY[@postgis@.ST_X(g), @postgis@.ST_Y(g)]::real[]
END;

CREATE FUNCTION @extschema@.gpuclust_point_features(g @postgis@.geography)
RETURNS real[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN @extschema@.gpuclust_point_features(g::@postgis@.geometry);

COMMENT ON FUNCTION @extschema@.gpuclust_point_features(@postgis@.geometry) IS
'The features of a point: [x, y], or [x, y, z] for a point with Z (M is '
'dropped); NULL for NULL; an error (22023) for any other geometry and for '
'an empty point.  The cast from geometry to real[].';
COMMENT ON FUNCTION @extschema@.gpuclust_point_features(@postgis@.geography) IS
'The features of a geography point: [longitude, latitude] in degrees (and '
'z), clustered as planar coordinates.  The cast from geography to real[].';

-- Explicit casts: "geom::real[]" and the clustering functions use them; an
-- implicit one could make other calls ambiguous.
CREATE CAST (@postgis@.geometry AS real[])
    WITH FUNCTION @extschema@.gpuclust_point_features(@postgis@.geometry);
CREATE CAST (@postgis@.geography AS real[])
    WITH FUNCTION @extschema@.gpuclust_point_features(@postgis@.geography);
$sql$, '@postgis@'::pg_catalog.text, postgis);
END
$$;

-- The window forms for geometry and geography: declared as gpuclust
-- declares its real[] forms (same C function, arguments and defaults,
-- read from the catalog here, so that the defaults stay written once, in
-- gpuclust's install script), with geometry or geography features.
DO $$
DECLARE
    f record;
    t text;
BEGIN
    FOR f IN
        SELECT p.proname, pg_catalog.pg_get_function_arguments(p.oid) AS args,
               p.probin, p.prosrc,
               pg_catalog.pg_get_function_identity_arguments(p.oid) AS ident,
               p.oid::pg_catalog.regprocedure AS real_form
        FROM pg_catalog.pg_proc p
        JOIN pg_catalog.pg_depend d
          ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass::pg_catalog.oid
         AND d.objid OPERATOR(pg_catalog.=) p.oid
         AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass::pg_catalog.oid
         AND d.deptype OPERATOR(pg_catalog.=) 'e'::pg_catalog."char"
        JOIN pg_catalog.pg_extension e ON e.oid OPERATOR(pg_catalog.=) d.refobjid
                                      AND e.extname OPERATOR(pg_catalog.=) 'gpuclust'::pg_catalog.name
        WHERE p.prokind OPERATOR(pg_catalog.=) 'w'::pg_catalog."char"
          AND p.proargtypes[0] OPERATOR(pg_catalog.=) 'pg_catalog.float4[]'::pg_catalog.regtype::pg_catalog.oid
        ORDER BY p.proname
    LOOP
        FOR t IN
            SELECT pg_catalog.format('%I.%I'::pg_catalog.text, n.nspname, ty.typname)
            FROM pg_catalog.pg_type ty
            JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) ty.typnamespace
            JOIN pg_catalog.pg_extension e ON e.extnamespace OPERATOR(pg_catalog.=) n.oid
                                          AND e.extname OPERATOR(pg_catalog.=) 'postgis'::pg_catalog.name
            WHERE ty.typname OPERATOR(pg_catalog.=) ANY ('{geometry, geography}'::pg_catalog.name[])
            ORDER BY ty.typname DESC
        LOOP
            EXECUTE pg_catalog.format(
                'CREATE FUNCTION @extschema@.%I(%s) RETURNS int AS %L, %L '
                'LANGUAGE C WINDOW STABLE PARALLEL SAFE'::pg_catalog.text,
                f.proname,
                pg_catalog.regexp_replace(f.args, '^(\S+) real\[\]'::pg_catalog.text,
                                          '\1 '::pg_catalog.text OPERATOR(pg_catalog.||) t),
                f.probin, f.prosrc);
            EXECUTE pg_catalog.format(
                'COMMENT ON FUNCTION @extschema@.%I(%s) IS %L'::pg_catalog.text,
                f.proname,
                pg_catalog.regexp_replace(f.ident, '^(\S+) real\[\]'::pg_catalog.text,
                                          '\1 '::pg_catalog.text OPERATOR(pg_catalog.||) t),
                pg_catalog.format('Window function: %s of %s points (their coordinates, '
                                  'as the cast to real[] gives them); see %s.'::pg_catalog.text,
                                  f.proname, pg_catalog.regexp_replace(t, '^.*\.'::pg_catalog.text,
                                                                       ''::pg_catalog.text),
                                  f.real_form));
        END LOOP;
    END LOOP;
END
$$;
