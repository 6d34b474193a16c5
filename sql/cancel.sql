--
-- Cancellation: statement_timeout stops a long clustering run (in the core
-- or while reading the source) within moments, and the session goes on.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gpuclust;
RESET client_min_messages;

-- 200000 points in 16-D: far more work than a second for either algorithm.
-- device => 'cpu': this tests the CPU core's cancel polling, on any machine.
SELECT setseed(0.25);
CREATE TABLE cancel_pts AS
SELECT i AS id,
       ARRAY(SELECT random()::real FROM generate_series(1, 16) WHERE i > 0) AS f
FROM generate_series(1, 200000) AS i;

-- k-means: a million restarts
SET statement_timeout = '1s';
SELECT count(*) FROM gpu_kmeans('SELECT id, f FROM cancel_pts', 50,
                                max_iter => 1000000, tol => 0, n_init => 1000000, device => 'cpu');
RESET statement_timeout;
SELECT count(*) FROM gpu_kmeans('SELECT i, ARRAY[i] FROM generate_series(1, 3) i', 1);

-- DBSCAN: quadratic in 16-D (an index cannot prune much)
SET statement_timeout = '1s';
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM cancel_pts', 0.6, 50, device => 'cpu');
RESET statement_timeout;
SELECT count(*) FROM gpu_dbscan('SELECT i, ARRAY[i] FROM generate_series(1, 3) i', 1, 1);

-- while the source query is still being read
SET statement_timeout = '1s';
SELECT count(*) FROM gpu_dbscan('SELECT i, ARRAY[i] FROM generate_series(1, 100000) i WHERE pg_sleep(0.001) IS NOT NULL', 1, 1);
RESET statement_timeout;

-- the cancel arrives promptly: less than 5 s after the start of a statement
-- that times out after 1 s
CREATE FUNCTION timed_cancel(src text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  t0 timestamptz := clock_timestamp();
BEGIN
  EXECUTE src;
  RETURN 'not canceled';
EXCEPTION WHEN query_canceled THEN
  RETURN SQLERRM || CASE WHEN clock_timestamp() - t0 < interval '5 s'
                         THEN ', promptly' ELSE ', late' END;
END $$;
SET statement_timeout = '1s';
SELECT timed_cancel($$SELECT count(*) FROM gpu_kmeans('SELECT id, f FROM cancel_pts', 50,
                        max_iter => 1000000, tol => 0, n_init => 1000000, device => 'cpu')$$);
SELECT timed_cancel($$SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM cancel_pts', 0.6, 50, device => 'cpu')$$);
RESET statement_timeout;
SELECT 1 AS still_alive;

DROP FUNCTION timed_cancel(text);
DROP TABLE cancel_pts;
