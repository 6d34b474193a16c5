/* gpuclust_postgis--0.1--0.2.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION gpuclust_postgis UPDATE TO '0.2'" to load this file. \quit

-- 0.2 gives an EMPTY geometry or geography NULL features, as a NULL one:
-- PostGIS's cluster functions give an EMPTY geometry a NULL cluster and go
-- on, and so does every gpuclust form now (0.1 raised an error).  Only a
-- shape that is not a point is an error.  It also names every built-in
-- that the error function calls with its schema: its PL/pgSQL body is
-- bound when it runs, under the caller's search_path.  (The cast
-- functions are SQL bodies, bound when they are created.)  A new
-- installation runs gpuclust_postgis--0.1.sql and then this script, an
-- upgraded one this script alone, so both end with these bodies.

CREATE OR REPLACE FUNCTION @extschema@.gpuclust_not_a_point(geometry_type text)
RETURNS real[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    RAISE EXCEPTION USING
        ERRCODE = 'invalid_parameter_value',
        MESSAGE = pg_catalog.format('features are a %s, not a point'::pg_catalog.text,
                                    pg_catalog.upper(pg_catalog.substr(geometry_type, 4))),
        DETAIL = 'A geometry or geography is cast to real[] as the coordinates of a point: [x, y], or [x, y, z]; an EMPTY one gives NULL.',
        HINT = 'Cluster a point of each shape: ST_Centroid(geom) or ST_PointOnSurface(geom); ST_Dump(geom) splits a MULTIPOINT.';
END
$$;

COMMENT ON FUNCTION @extschema@.gpuclust_not_a_point(text) IS
'The error of gpuclust_point_features for a geometry that is not a point.';

DO $$
DECLARE
    postgis CONSTANT text := (
        SELECT pg_catalog.quote_ident(n.nspname)
        FROM pg_catalog.pg_extension e
        JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
        WHERE e.extname OPERATOR(pg_catalog.=) 'postgis'::pg_catalog.name);
BEGIN
    EXECUTE pg_catalog.replace($sql$
CREATE OR REPLACE FUNCTION @extschema@.gpuclust_point_features(g @postgis@.geometry)
RETURNS real[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE
    WHEN g IS NULL OR @postgis@.ST_IsEmpty(g) THEN NULL
    WHEN @postgis@.ST_GeometryType(g) OPERATOR(pg_catalog.<>) 'ST_Point'::pg_catalog.text
        THEN @extschema@.gpuclust_not_a_point(@postgis@.ST_GeometryType(g))
    WHEN @postgis@.ST_Zmflag(g) OPERATOR(pg_catalog.>=) 2::pg_catalog.int2
        THEN ARRAY[@postgis@.ST_X(g), @postgis@.ST_Y(g), @postgis@.ST_Z(g)]::real[]
    ELSE ARRAY[@postgis@.ST_X(g), @postgis@.ST_Y(g)]::real[]
END;

COMMENT ON FUNCTION @extschema@.gpuclust_point_features(@postgis@.geometry) IS
'The features of a point: [x, y], or [x, y, z] for a point with Z (M is '
'dropped); NULL for NULL and for an EMPTY geometry of any type (a NULL '
'cluster, as PostGIS''s cluster functions give it); an error (22023) for '
'any other geometry.  The cast from geometry to real[].';
COMMENT ON FUNCTION @extschema@.gpuclust_point_features(@postgis@.geography) IS
'The features of a geography point: [longitude, latitude] in degrees (and '
'z), clustered as planar coordinates; NULL for NULL and EMPTY.  The cast '
'from geography to real[].';
$sql$, '@postgis@'::pg_catalog.text, postgis);
END
$$;

-- The window forms for geometry and geography of every window function of
-- gpuclust, as gpuclust_postgis--0.1.sql declares them: gpuclust 0.2 adds
-- gpu_hdbscan(features, ...) OVER (...).  A new installation's 0.1 script
-- has declared them all already (it reads gpuclust's, 0.2's); an upgraded
-- one gets gpu_hdbscan's here.  CREATE OR REPLACE, so that both paths end
-- with the same objects, and objects depending on the others keep
-- working.  gpuclust must be at 0.2 first.
DO $$
DECLARE
    f record;
    t text;
BEGIN
    IF (SELECT e.extversion FROM pg_catalog.pg_extension e
        WHERE e.extname OPERATOR(pg_catalog.=) 'gpuclust'::pg_catalog.name)
       OPERATOR(pg_catalog.=) '0.1'::pg_catalog.text THEN
        RAISE EXCEPTION USING
            ERRCODE = 'object_not_in_prerequisite_state',
            MESSAGE = 'gpuclust_postgis 0.2 needs gpuclust 0.2',
            HINT = 'Run ALTER EXTENSION gpuclust UPDATE first, then ALTER EXTENSION gpuclust_postgis UPDATE.';
    END IF;
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
                'CREATE OR REPLACE FUNCTION @extschema@.%I(%s) RETURNS int AS %L, %L '
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
