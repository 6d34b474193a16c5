/* gpuclust_postgis--0.1--0.2.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION gpuclust_postgis UPDATE TO '0.2'" to load this file. \quit

-- 0.2 names every built-in that the error function of the casts calls
-- with its schema: its PL/pgSQL body is bound when it runs, under the
-- caller's search_path.  (The cast functions are SQL bodies, bound when
-- they were created.)  A new installation runs gpuclust_postgis--0.1.sql
-- and then this script, an upgraded one this script alone, so both end
-- with this body.

CREATE OR REPLACE FUNCTION @extschema@.gpuclust_not_a_point(geometry_type text)
RETURNS real[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    RAISE EXCEPTION USING
        ERRCODE = 'invalid_parameter_value',
        MESSAGE = CASE WHEN geometry_type OPERATOR(pg_catalog.=) 'ST_Point'::pg_catalog.text
                       THEN 'features are an empty point'
                       ELSE pg_catalog.format('features are a %s, not a point'::pg_catalog.text,
                                              pg_catalog.upper(pg_catalog.substr(geometry_type, 4))) END,
        DETAIL = 'A geometry or geography is cast to real[] as the coordinates of a point: [x, y], or [x, y, z].',
        HINT = CASE WHEN geometry_type OPERATOR(pg_catalog.=) 'ST_Point'::pg_catalog.text
                    THEN 'Leave the row out (WHERE NOT ST_IsEmpty(geom)), or give it NULL features to leave it unclustered.'
                    ELSE 'Cluster a point of each shape: ST_Centroid(geom) or ST_PointOnSurface(geom); ST_Dump(geom) splits a MULTIPOINT.' END;
END
$$;
