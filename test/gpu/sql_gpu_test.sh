#!/bin/bash
# sql_gpu_test.sh — gpuclust's SQL surface on a machine with a GPU, against a
# running server (psql on PATH, PGHOST etc. set; e.g. from the pg-bundle:
#   eval "$(bash .carry/pg-bundle start .carry)"; test/gpu/sql_gpu_test.sh).
# Checks: the extension loads, gpuclust_info() sees the GPU, pg_regress's
# suite passes with the GPU present (when pg_regress is found), gpu_kmeans
# on the GPU returns the CPU's labels and distances on several shapes (same
# seed), 'auto' picks the GPU for a large problem and the CPU for a small
# one, gpu_dbscan on the GPU returns the CPU's labels and core flags; then
# times gpu_kmeans end to end on a 1M-row table (d = 32, k = 100)
# on both devices, with gpuclust.log_timing's breakdown.
# Logs to $OUT (or test/out).  Exit status: the number of failed checks.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUTDIR=${OUT:-test/out}
mkdir -p "$OUTDIR"
fails=0
P="psql -X -q -v ON_ERROR_STOP=1 -At"
check() {	# name, sql that returns 't' on success
	local r
	r=$($P -c "$2" 2>&1)
	if [ "$r" = "t" ]; then echo "ok   $1"; else echo "FAIL $1: $r"; fails=$((fails + 1)); fi
}

$P -c 'DROP EXTENSION IF EXISTS gpuclust' -c 'CREATE EXTENSION gpuclust' || { echo "FAIL CREATE EXTENSION"; exit 100; }
echo "== gpuclust_info()"
$P -F ' = ' -c 'SELECT key, value FROM gpuclust_info() ORDER BY key'
check "gpuclust_info sees a usable GPU" \
	"SELECT value = 'true' FROM gpuclust_info() WHERE key = 'gpu_usable'"
check "auto_device_kmeans is gpu" \
	"SELECT value = 'gpu' FROM gpuclust_info() WHERE key = 'auto_device_kmeans'"

PGR=$(dirname "$(command -v psql)")/../lib/pgxs/src/test/regress/pg_regress
if [ -x "$PGR" ]; then
	echo "== pg_regress (GPU present)"
	tests=$(ls sql/*.sql | grep -v 'gpuclust--' | xargs -n1 basename | sed 's/\.sql$//')
	mkdir -p "$OUTDIR/regress"
	if "$PGR" --inputdir=. --outputdir="$OUTDIR/regress" --bindir="$(dirname "$(command -v psql)")" \
		--dbname=contrib_regression $tests > "$OUTDIR/regress/summary.txt" 2>&1; then
		echo "ok   pg_regress: $(grep -E 'tests passed' "$OUTDIR/regress/summary.txt")"
	else
		cat "$OUTDIR/regress/summary.txt"; head -80 "$OUTDIR/regress/regression.diffs" 2>/dev/null
		echo "FAIL pg_regress"; fails=$((fails + 1))
	fi
else
	echo "(no pg_regress at $PGR: suite skipped)"
fi

echo "== GPU labels = CPU labels (same seed)"
# name n d k blob-centres init n_init
shapes="s1 20000 2 10 7 k-means++ 1
s2 50000 16 50 40 k-means++ 1
s3 30000 64 300 100 random 2
s4 20000 200 120 60 k-means++ 1
s5 200000 5 64 30 k-means++ 1
s6 40000 33 257 80 random 1"
while read -r name n d k m init ninit; do
	$P -c "DROP TABLE IF EXISTS t_$name" -c "CREATE TABLE t_$name AS
		SELECT i::bigint AS id,
		       ARRAY(SELECT ((((i % $m) * 7919 + j * 104729) % 2000) / 100.0
		                     + (hashint4(i * 1000 + j) % 1000) / 1000.0)::real
		             FROM generate_series(1, $d) j) AS f
		FROM generate_series(1, $n) i"
	src="SELECT id, f FROM t_$name"
	r=$($P -c "SELECT (count(*) = $n AND count(*) FILTER (WHERE g.cluster_id IS DISTINCT FROM c.cluster_id) = 0)::text
		|| ' rows ' || count(*) || ', labels differing ' || count(*) FILTER (WHERE g.cluster_id IS DISTINCT FROM c.cluster_id)
		|| ', max |distance diff| ' || max(abs(g.distance - c.distance))
		FROM gpu_kmeans('$src', $k, init => '$init', n_init => $ninit, seed => 7, device => 'gpu') g
		JOIN gpu_kmeans('$src', $k, init => '$init', n_init => $ninit, seed => 7, device => 'cpu') c USING (id)" 2>&1)
	case "$r" in
		true*) echo "ok   n=$n d=$d k=$k init=$init n_init=$ninit:${r#true}";;
		*) echo "FAIL n=$n d=$d k=$k init=$init n_init=$ninit: $r"; fails=$((fails + 1));;
	esac
done <<< "$shapes"

echo "== gpu_dbscan: device gpu = device cpu (labels and is_core, row for row)"
# name n d eps min_pts
dshapes="d1 200000 2 0.02 10
d2 100000 3 0.08 5
d3 20000 8 0.9 5
d4 50000 2 0.5 1"
while read -r name n d eps mp; do
	$P -c "DROP TABLE IF EXISTS $name" -c "CREATE TABLE $name AS
		SELECT i::bigint AS id,
		       ARRAY(SELECT ((i % 13) + (hashint4(i * 1000 + j) % 1000) / 2000.0)::real
		             FROM generate_series(1, $d) j) AS f
		FROM generate_series(1, $n) i"
	r=$($P -c "SELECT (count(*) = $n AND count(*) FILTER (WHERE g.cluster_id IS DISTINCT FROM c.cluster_id
		                                 OR g.is_core IS DISTINCT FROM c.is_core) = 0)::text
		|| ' rows ' || count(*) || ', clusters ' || count(DISTINCT c.cluster_id)
		|| ', differing ' || count(*) FILTER (WHERE g.cluster_id IS DISTINCT FROM c.cluster_id
		                                      OR g.is_core IS DISTINCT FROM c.is_core)
		FROM gpu_dbscan('SELECT id, f FROM $name', $eps, $mp, device => 'gpu') g
		JOIN gpu_dbscan('SELECT id, f FROM $name', $eps, $mp, device => 'cpu') c USING (id)" 2>&1)
	case "$r" in
		true*) echo "ok   dbscan n=$n d=$d eps=$eps min_pts=$mp:${r#true}";;
		*) echo "FAIL dbscan n=$n d=$d eps=$eps min_pts=$mp: $r"; fails=$((fails + 1));;
	esac
done <<< "$dshapes"
check "auto_device_dbscan is gpu" \
	"SELECT value = 'gpu' FROM gpuclust_info() WHERE key = 'auto_device_dbscan'"

echo "== auto"
r=$($P -c "SET gpuclust.log_timing = on" -c "SELECT count(*) FROM gpu_kmeans('SELECT id, f[1:2] FROM t_s1 WHERE id <= 1000', 3)" 2>&1)
echo "$r" | grep -q "device cpu" && echo "ok   auto, n*k*d = 6e3: cpu" || { echo "FAIL auto small: $r"; fails=$((fails + 1)); }
r=$($P -c "SELECT count(*) FROM gpu_kmeans('SELECT id, f FROM t_s1', 3, device => 'gpu')" -c "SET gpuclust.gpu_device_id = 7" \
	-c "SELECT count(*) FROM gpu_kmeans('SELECT id, f FROM t_s1', 3, device => 'gpu')" 2>&1)
echo "$r" | grep -q "cannot run k-means on the GPU" && echo "ok   gpuclust.gpu_device_id = 7 is refused: $(echo "$r" | grep DETAIL)" \
	|| { echo "FAIL gpu_device_id: $r"; fails=$((fails + 1)); }

echo "== 1M rows, d = 32, k = 100: end to end"
$P -c "DROP TABLE IF EXISTS big" -c "CREATE UNLOGGED TABLE big (id bigint, f real[])"
t0=$(date +%s.%N)
for p in $(seq 0 15); do
	$P -c "INSERT INTO big SELECT i, ARRAY(SELECT ((((i % 400) * 7919 + j * 104729) % 2000) / 100.0
	                     + (hashint4(i * 100 + j) % 1000) / 1000.0)::real FROM generate_series(1, 32) j)
	       FROM generate_series($p * 62500 + 1, ($p + 1) * 62500) i" &
done
wait
$P -c "VACUUM ANALYZE big"
echo "table: $($P -c 'SELECT count(*) FROM big') rows, $(awk "BEGIN{print $(date +%s.%N) - $t0}") s to make"
r=$($P -c "SET gpuclust.log_timing = on" -c "SELECT count(*) FROM gpu_kmeans('SELECT id, f FROM big', 100, max_iter => 5)" 2>&1)
echo "$r" | grep -q "device gpu" && echo "ok   auto, n*k*d = 3.2e9: gpu" || { echo "FAIL auto large: $r"; fails=$((fails + 1)); }
cat > /tmp/timing.sql <<'SQL'
\timing on
SET gpuclust.log_timing = on;
SELECT 'gpu (first call in this backend: CUDA initialised here)';
SELECT count(*) FROM gpu_kmeans('SELECT id, f FROM big', 100, max_iter => 100, seed => 3, device => 'gpu');
SELECT 'gpu';
SELECT count(*) FROM gpu_kmeans('SELECT id, f FROM big', 100, max_iter => 100, seed => 3, device => 'gpu');
SELECT 'auto';
SELECT count(*) FROM gpu_kmeans('SELECT id, f FROM big', 100, max_iter => 100, seed => 3);
SELECT 'cpu (16 cores)';
SELECT count(*) FROM gpu_kmeans('SELECT id, f FROM big', 100, max_iter => 100, seed => 3, device => 'cpu');
SELECT 'cpu (16 cores)';
SELECT count(*) FROM gpu_kmeans('SELECT id, f FROM big', 100, max_iter => 100, seed => 3, device => 'cpu');
SELECT 'ingest alone: the source query through SPI, no clustering (k-means on 1 row)';
SELECT count(*) FROM big;
SELECT 'same labels on the 1M rows';
SELECT count(*) FILTER (WHERE g.cluster_id <> c.cluster_id) AS labels_differing
FROM gpu_kmeans('SELECT id, f FROM big', 100, max_iter => 100, seed => 3, device => 'gpu') g
JOIN gpu_kmeans('SELECT id, f FROM big', 100, max_iter => 100, seed => 3, device => 'cpu') c USING (id);
SQL
psql -X -At -f /tmp/timing.sql 2>&1 | tee "$OUTDIR/sql_timing.log"
grep -q "^0$" "$OUTDIR/sql_timing.log" || { echo "FAIL 1M rows: labels differ"; fails=$((fails + 1)); }
echo "sql_gpu_test: $fails failed"
exit $fails
