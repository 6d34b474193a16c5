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
--   type with a cast to real[] (src/ingest.c);
--
-- * the window forms gpu_dbscan(geom, eps, min_pts) OVER (...) and
--   gpu_kmeans(geom, k, ...) OVER (...) for geometry and geography: the
--   same C functions as the real[] forms, which cast any other features
--   type to real[] (src/window_sql.c).  They are needed because PostGIS
--   casts geometry to text implicitly, which would otherwise pick the
--   set-returning gpu_dbscan(source text, ...).
--
-- The cast functions are SQL bodies (parsed and bound here) that the
-- planner inlines into the casting expression; only the error goes
-- through PL/pgSQL.
-- ---------------------------------------------------------------------

CREATE FUNCTION gpuclust_not_a_point(geometry_type text)
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

COMMENT ON FUNCTION gpuclust_not_a_point(text) IS
'The error of gpuclust_point_features for a geometry that is not a '
'non-empty point.';

CREATE FUNCTION gpuclust_point_features(g geometry)
RETURNS real[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE
    WHEN g IS NULL THEN NULL
    WHEN ST_GeometryType(g) <> 'ST_Point' OR ST_IsEmpty(g)
        THEN gpuclust_not_a_point(ST_GeometryType(g))
    WHEN ST_Zmflag(g) >= 2 THEN ARRAY[ST_X(g), ST_Y(g), ST_Z(g)]::real[]
    ELSE ARRAY[ST_X(g), ST_Y(g)]::real[]
END;

CREATE FUNCTION gpuclust_point_features(g geography)
RETURNS real[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN gpuclust_point_features(g::geometry);

COMMENT ON FUNCTION gpuclust_point_features(geometry) IS
'The features of a point: [x, y], or [x, y, z] for a point with Z (M is '
'dropped); NULL for NULL; an error (22023) for any other geometry and for '
'an empty point.  The cast from geometry to real[].';
COMMENT ON FUNCTION gpuclust_point_features(geography) IS
'The features of a geography point: [longitude, latitude] in degrees (and '
'z), clustered as planar coordinates.  The cast from geography to real[].';

-- Explicit casts: "geom::real[]" and the clustering functions use them; an
-- implicit one could make other calls ambiguous.
CREATE CAST (geometry AS real[])
    WITH FUNCTION gpuclust_point_features(geometry);
CREATE CAST (geography AS real[])
    WITH FUNCTION gpuclust_point_features(geography);

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
        SELECT p.proname, pg_get_function_arguments(p.oid) AS args,
               p.probin, p.prosrc,
               pg_get_function_identity_arguments(p.oid) AS ident,
               p.oid::regprocedure AS real_form
        FROM pg_proc p
        JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
                        AND d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
        JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'gpuclust'
        WHERE p.prokind = 'w' AND p.proargtypes[0] = 'real[]'::regtype
        ORDER BY p.proname
    LOOP
        FOREACH t IN ARRAY ARRAY['geometry', 'geography'] LOOP
            EXECUTE format(
                'CREATE FUNCTION %I(%s) RETURNS int AS %L, %L '
                'LANGUAGE C WINDOW STABLE PARALLEL SAFE',
                f.proname,
                regexp_replace(f.args, '^(\S+) real\[\]', '\1 ' || t),
                f.probin, f.prosrc);
            EXECUTE format(
                'COMMENT ON FUNCTION %I(%s) IS %L',
                f.proname,
                regexp_replace(f.ident, '^(\S+) real\[\]', '\1 ' || t),
                format('Window function: %s of %s points (their coordinates, '
                       'as the cast to real[] gives them); see %s.',
                       f.proname, t, f.real_form));
        END LOOP;
    END LOOP;
END
$$;
