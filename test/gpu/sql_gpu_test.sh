#!/bin/bash
# sql_gpu_test.sh — gpuclust's SQL surface on a machine with a GPU, against a
# running server (psql on PATH, PGHOST etc. set; e.g. from the pg-bundle:
#   eval "$(bash .carry/pg-bundle start .carry)"; test/gpu/sql_gpu_test.sh).
# Checks: the extension loads, gpuclust_info() sees the GPU, pg_regress's
# suite passes with the GPU present (when pg_regress is found), gpu_kmeans
# on the GPU returns the CPU's labels and distances on several shapes (same
# seed), 'auto' picks the GPU for a large problem and the CPU for a small
# one, gpu_dbscan on the GPU returns the CPU's labels and core flags (many
# shapes, the edge cases, d = 4 to 64 on blobs, uniform, heavy duplicates
# and all-noise data, 8 concurrent sessions), with both of its algorithms
# (union_find, and dclust: CUDA-DClust), and 'auto' runs DBSCAN union_find
# on the GPU from the measured crossovers (2-d, 3-d, 5-d, 16-d, 64-d) and
# dclust on the GPU whatever the size; gpu_affinity_propagation on the
# GPU returns the CPU's labels and exemplars in float8 (blobs in 2-d and
# 8-d, heavy duplicates, a given preference, not converged, one row, NULL
# features), a whole labelling in float4, 'auto' picks the CPU below
# auto_ap_gpu_min_rows rows and the GPU from there (float4: always), a call
# too large for gpuclust.matrix_memory or the GPU's memory fails naming the
# largest n (under 'auto': the CPU), and with the GPU worker its job is
# listed and cancelled; gpu_kdistance on the GPU returns the CPU's
# k-distances row for row, bit for bit (random 2-d, 3-d and 16-d tables,
# heavy duplicates; k = 1 to 100; quantiles and the knee), gpu_silhouette
# the CPU's score, rows, clusters and sample (labellings of gpu_kmeans and
# of gpu_dbscan with noise; exact, the default sample and a given one),
# 'auto' runs both on the GPU from auto_kdistance_gpu_min_rows /
# auto_silhouette_gpu_min_rows rows and on the CPU below (and, the GPU's
# memory too small, on the CPU with a NOTICE), and a GPU call of either is
# stopped by statement_timeout (and, with the GPU worker, by
# pg_cancel_backend, as affinity propagation's); gpu_kmeans on a 1M-row table
# (d = 32, k = 100) under gpuclust.gpu_memory_limit = 100MB streams it in
# several chunks and equals the unlimited GPU run bit for bit and the CPU
# row for row; then times gpu_kmeans end to end on that table and gpu_dbscan on a 10M-row 2-d
# table (SQL_SKIP_10M=1 skips it) on both devices, with
# gpuclust.log_timing's breakdown.  HDBSCAN: hdbscan_checks below (alone:
# SQL_ONLY=hdbscan).
# Logs to $OUT (or test/out).  Exit status: the number of failed checks.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUTDIR=${OUT:-test/out}
mkdir -p "$OUTDIR"
fails=0
P="psql -X -q -v ON_ERROR_STOP=1 -At"
# the DBSCAN algorithms each GPU run is checked with against the CPU
DB_ALGS="union_find dclust"
. test/gpu/big_table.sh
check() {	# name, sql that returns 't' on success
	local r
	r=$($P -c "$2" 2>&1)
	if [ "$r" = "t" ]; then echo "ok   $1"; else echo "FAIL $1: $r"; fails=$((fails + 1)); fi
}

# gpu_cancel NAME SEEN SET SQL WANT: runs SET then SQL in another session;
# polls SEEN (SQL returning that session's pid once its call runs on the
# GPU; empty: not polled) for up to 30 s; when WANT is "user request",
# cancels that pid (pg_cancel_backend); passes when the call was seen and
# ended with "canceling statement due to WANT"
gpu_cancel() {
	local name=$1 seen_sql=$2 set=$3 sql=$4 want=$5 seen="" bg k
	local log="$OUTDIR/cancel_$(echo "$name" | tr -c 'a-zA-Z0-9\n' '_').log"
	$P -c "$set" -c "$sql" > "$log" 2>&1 &
	bg=$!
	if [ -n "$seen_sql" ]; then
		for k in $(seq 1 300); do
			seen=$($P -c "$seen_sql")
			[ -n "$seen" ] && break
			kill -0 $bg 2>/dev/null || break
			sleep 0.1
		done
	else
		seen="(not watched)"
	fi
	[ "$want" = "user request" ] && [ -n "$seen" ] && $P -c "SELECT pg_cancel_backend($seen)" >/dev/null
	wait $bg
	if [ -n "$seen" ] && grep -q "canceling statement due to $want" "$log"; then
		echo "ok   $name"
	else
		echo "FAIL $name: seen '$seen': $(cat "$log")"; fails=$((fails + 1))
	fi
}

# hdbscan_checks: HDBSCAN through SQL on the GPU gives the CPU's result bit
# for bit (gpu_hdbscan's labels, probabilities and outlier scores,
# gpu_hdbscan_tree's rows and gpu_minimum_spanning_tree's edges in their
# order, the window form's labels) on blobs in 2-d (the benchmark's shape),
# 3-d and 16-d, cosine, heavy duplicates and every option; 'auto' runs it
# on the CPU below auto_hdbscan_gpu_min_rows rows and on the GPU from there
# (a warm backend), on the CPU with a NOTICE when the GPU's memory is too
# small, where 'gpu' fails with 53200; gpuclust.log_timing itemises the GPU
# phases; a GPU call stops at statement_timeout and, with the GPU worker,
# its job (listed in gpuclust_gpu_jobs as gpu_hdbscan) is cancelled; the
# benchmark's 110,000 rows (mcs 15) timed end to end on both devices.
# Run by the main flow, or alone: SQL_ONLY=hdbscan test/gpu/sql_gpu_test.sh.
hdbscan_checks() {
	local mode="not preloaded: CUDA in each backend" r n min name src args ms
	[ "$($P -c "SELECT value FROM gpuclust_info() WHERE key = 'gpu_worker'")" = running ] &&
		mode="through the GPU worker"
	echo "== HDBSCAN: device gpu = device cpu, bit for bit ($mode)"
	# hd_u(x): a uniform value in (0, 1) from a hash; hd_n(x): a normal one
	$P -c "CREATE OR REPLACE FUNCTION hd_u(bigint) RETURNS float8 IMMUTABLE LANGUAGE sql
	         AS 'SELECT (hashint8(\$1) + 2147483649.0::float8) / 4294967298.0'" \
	   -c "CREATE OR REPLACE FUNCTION hd_n(bigint) RETURNS float8 IMMUTABLE LANGUAGE sql
	         AS 'SELECT sqrt(-2 * ln(hd_u(\$1))) * cos(2 * pi() * hd_u(\$1 # 987654321))'" \
	   -c "DROP TABLE IF EXISTS hd_b2, hd_b3, hd_b16, hd_dup" \
	   -c "CREATE TABLE hd_b2 AS SELECT i::bigint AS id,
	         CASE WHEN i > 100000 THEN ARRAY[-10 + 20 * hd_u(i), -10 + 20 * hd_u(i + 10000000)]
	              ELSE ARRAY[-10 + 20 * hd_u(i % 50 + 777) + 0.6 * hd_n(i),
	                         -10 + 20 * hd_u(i % 50 + 888) + 0.6 * hd_n(i + 20000000)] END::real[] AS f
	         FROM generate_series(1, 110000) i" \
	   -c "CREATE TABLE hd_b3 AS SELECT i::bigint AS id,
	         ARRAY(SELECT 10 * hd_u((i % 12) * 3 + j) + (0.2 + (i % 3) * 0.3) * hd_n(i * 4 + j)
	               FROM generate_series(1, 3) j)::real[] AS f
	         FROM generate_series(1, 30000) i" \
	   -c "CREATE TABLE hd_b16 AS SELECT i::bigint AS id,
	         ARRAY(SELECT 10 * hd_u((i % 12) * 16 + j) + 0.8 * hd_n(i * 16 + j)
	               FROM generate_series(1, 16) j)::real[] AS f
	         FROM generate_series(1, 20000) i" \
	   -c "CREATE TABLE hd_dup AS SELECT i::bigint AS id,
	         ARRAY[(i % 400) / 20, (i % 400) % 20 + (i % 400) / 200 * 0.5]::real[] AS f
	         FROM generate_series(1, 20000) i" || { echo "FAIL HDBSCAN tables"; fails=$((fails + 1)); return; }
	# hdcmp NAME SOURCE ARGS: gpu_hdbscan's three columns equal, row for row
	hdcmp() {
		r=$($P -c "SELECT (count(*) = (SELECT count(*) FROM ($2) s) AND count(*) FILTER (WHERE
		           g.cluster_id IS DISTINCT FROM c.cluster_id OR g.probability IS DISTINCT FROM c.probability
		           OR g.outlier_score IS DISTINCT FROM c.outlier_score) = 0)::text
		    || ' rows ' || count(*) || ', clusters ' || count(DISTINCT c.cluster_id)
		    || ', noise ' || count(*) FILTER (WHERE c.cluster_id IS NULL)
		    || ', labels differing ' || count(*) FILTER (WHERE g.cluster_id IS DISTINCT FROM c.cluster_id)
		    || ', scores differing ' || count(*) FILTER (WHERE g.probability IS DISTINCT FROM c.probability
		                                                 OR g.outlier_score IS DISTINCT FROM c.outlier_score)
		    FROM gpu_hdbscan(\$q\$$2\$q\$, $3, device => 'gpu') g
		    JOIN gpu_hdbscan(\$q\$$2\$q\$, $3, device => 'cpu') c USING (id)" 2>&1)
		case "$r" in
			true*) echo "ok   hdbscan $1:${r#true}";;
			*) echo "FAIL hdbscan $1: $r"; fails=$((fails + 1));;
		esac
	}
	# ordcmp NAME FUNCTION SOURCE ARGS COLUMNS: a tree function's rows equal, in order
	ordcmp() {
		r=$($P -c "SELECT (count(*) > 0 AND count(*) FILTER (WHERE ($5) IS DISTINCT FROM ($(echo "$5" | sed 's/g\./c./g'))) = 0)::text
		    || ' rows ' || count(*) || ', differing ' || count(*) FILTER (WHERE ($5) IS DISTINCT FROM ($(echo "$5" | sed 's/g\./c./g')))
		    FROM $2(\$q\$$3\$q\$, $4, device => 'gpu') WITH ORDINALITY g
		    FULL JOIN $2(\$q\$$3\$q\$, $4, device => 'cpu') WITH ORDINALITY c USING (ordinality)" 2>&1)
		case "$r" in
			true*) echo "ok   $2 $1:${r#true}";;
			*) echo "FAIL $2 $1: $r"; fails=$((fails + 1));;
		esac
	}
	hdcmp "2-d, 110,000 rows (50 blobs + 10,000 uniform), the defaults" "SELECT id, f FROM hd_b2" "5"
	hdcmp "2-d, 110,000 rows, min_cluster_size 15" "SELECT id, f FROM hd_b2" "15"
	hdcmp "2-d, 110,000 rows, leaf, epsilon 0.3" "SELECT id, f FROM hd_b2" \
		"15, cluster_selection_method => 'leaf', cluster_selection_epsilon => 0.3"
	hdcmp "2-d, min_samples 1, alpha 0.5" "SELECT id, f FROM hd_b2 WHERE id % 4 = 0" "10, 1, alpha => 0.5"
	hdcmp "2-d, one blob, allow_single_cluster" "SELECT id, f FROM hd_b2 WHERE id % 50 = 3 AND id <= 100000" \
		"20, allow_single_cluster => true"
	hdcmp "3-d, 30,000 rows, min_samples 4" "SELECT id, f FROM hd_b3" "10, 4"
	hdcmp "3-d, NULL features in every tenth row" \
		"SELECT id, CASE WHEN id % 10 <> 0 THEN f END FROM hd_b3 WHERE id <= 5000" "10"
	hdcmp "16-d, 20,000 rows" "SELECT id, f FROM hd_b16" "20"
	hdcmp "16-d, cosine" "SELECT id, f FROM hd_b16" "20, metric => 'cosine'"
	hdcmp "heavy duplicates (400 points), min_samples 10" "SELECT id, f FROM hd_dup" "5, 10"
	hdcmp "heavy duplicates, min_samples 100" "SELECT id, f FROM hd_dup" "60, 100"
	ordcmp "3-d" gpu_hdbscan_tree "SELECT id, f FROM hd_b3" "10, 4" \
		"g.parent, g.child, g.id, g.lambda, g.child_size, g.cluster_id"
	ordcmp "heavy duplicates" gpu_hdbscan_tree "SELECT id, f FROM hd_dup" "5, 10" \
		"g.parent, g.child, g.id, g.lambda, g.child_size, g.cluster_id"
	ordcmp "2-d, min_samples 1 (Euclidean)" gpu_minimum_spanning_tree "SELECT id, f FROM hd_b2" "1" \
		"g.id_a, g.id_b, g.distance"
	ordcmp "16-d, min_samples 5, alpha 2" gpu_minimum_spanning_tree "SELECT id, f FROM hd_b16" "5, alpha => 2" \
		"g.id_a, g.id_b, g.distance"
	ordcmp "heavy duplicates, min_samples 7 (ties)" gpu_minimum_spanning_tree "SELECT id, f FROM hd_dup" "7" \
		"g.id_a, g.id_b, g.distance"
	r=$($P -c "SELECT count(*) FILTER (WHERE g IS DISTINCT FROM c)::text || ' of ' || count(*) FROM (
	             SELECT gpu_hdbscan(f, 10, device => 'gpu') OVER w AS g, gpu_hdbscan(f, 10, device => 'cpu') OVER w AS c
	             FROM hd_b3 WINDOW w AS (PARTITION BY id % 3 ORDER BY id)) s" 2>&1)
	case "$r" in
		"0 of 30000") echo "ok   window gpu_hdbscan, 3 partitions: gpu = cpu ($r rows differ)";;
		*) echo "FAIL window gpu_hdbscan, 3 partitions: $r"; fails=$((fails + 1));;
	esac

	echo "== HDBSCAN under auto: the CPU below auto_hdbscan_gpu_min_rows, the GPU from there (warm)"
	check "auto_device_hdbscan is gpu" \
		"SELECT value = 'gpu' FROM gpuclust_info() WHERE key = 'auto_device_hdbscan'"
	min=$($P -c "SELECT value FROM gpuclust_info() WHERE key = 'auto_hdbscan_gpu_min_rows'")
	for n in $((min - 1)) $min; do
		dev=gpu; [ "$n" -lt "$min" ] && dev=cpu
		r=$($P -c "SET gpuclust.log_timing = on" -c "SELECT count(*) FROM gpuclust_info()" \
			-c "SELECT count(*) FROM gpu_hdbscan('SELECT id, f FROM hd_b2 WHERE id <= $n', 15)" 2>&1)
		echo "$r" | grep -q "gpu_hdbscan: device $dev, n $n," && echo "ok   gpu_hdbscan, auto, $n rows: $dev" \
			|| { echo "FAIL gpu_hdbscan, auto, $n rows: $r"; fails=$((fails + 1)); }
	done
	r=$($P -c "SET gpuclust.log_timing = on" -c "SELECT count(*) FROM gpu_minimum_spanning_tree('SELECT id, f FROM hd_b2', device => 'gpu')" 2>&1)
	echo "$r" | grep -q "gpu_minimum_spanning_tree: device gpu, n 110000, d 2, min_samples 1, alpha 1;.* (upload .*rounds" \
		&& echo "ok   log_timing itemises the GPU phases: $(echo "$r" | grep INFO | sed 's/.*compute/compute/')" \
		|| { echo "FAIL log_timing of a GPU MST: $r"; fails=$((fails + 1)); }
	r=$($P -c "SET gpuclust.gpu_memory_limit = '1MB'" -c "SET gpuclust.log_timing = on" -c "SELECT count(*) FROM gpuclust_info()" \
		-c "SELECT count(*) FROM gpu_hdbscan('SELECT id, f FROM hd_b2', 15)" 2>&1)
	echo "$r" | grep -q "NOTICE:  HDBSCAN runs on the CPU" && echo "$r" | grep -q "gpu_hdbscan: device cpu" \
		&& echo "ok   gpu_hdbscan, auto, gpu_memory_limit 1MB: the CPU, with a NOTICE: $(echo "$r" | grep DETAIL)" \
		|| { echo "FAIL gpu_hdbscan, auto, gpu_memory_limit 1MB: $r"; fails=$((fails + 1)); }
	r=$($P -c "SET gpuclust.gpu_memory_limit = '1MB'" -c "\\set VERBOSITY verbose" \
		-c "SELECT count(*) FROM gpu_hdbscan('SELECT id, f FROM hd_b2', 15, device => 'gpu')" 2>&1)
	echo "$r" | grep -q "ERROR:  53200: out of memory" && echo "ok   gpu_hdbscan, gpu, gpu_memory_limit 1MB: 53200" \
		|| { echo "FAIL gpu_hdbscan, gpu, gpu_memory_limit 1MB: $r"; fails=$((fails + 1)); }

	echo "== HDBSCAN on the GPU: stopped by statement_timeout (and pg_cancel_backend)"
	[ -n "$($P -c "SELECT 1 FROM pg_class WHERE relname = 'big'")" ] || make_big_table
	local call="SELECT count(*) FROM gpu_hdbscan('SELECT id, f FROM big WHERE id <= 250000', 10, device => 'gpu')" watch=""
	[ -n "$($P -c "SELECT 1 FROM pg_settings WHERE name = 'shared_preload_libraries' AND setting ~ 'gpuclust'")" ] && watch=1
	ms=$(psql -X -q -At -c '\timing on' -c "$call" 2>&1 | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p')
	ms=${ms%.*}
	if [ -z "$ms" ] || [ "$ms" -lt 300 ]; then
		echo "FAIL gpu_hdbscan on 250k x 32 on the GPU, timed: '${ms}' ms (an error, or too short to stop)"; fails=$((fails + 1))
	else
		gpu_cancel "gpu_hdbscan on 250k x 32 on the GPU ($ms ms), statement_timeout $((ms * 6 / 10)) ms" \
			"${watch:+SELECT pid FROM gpuclust_progress WHERE algorithm = 'gpu_hdbscan' AND device = 'gpu' AND phase NOT IN ('ingest', 'emit')}" \
			"SET statement_timeout = $((ms * 6 / 10))" "$call" "statement timeout"
		if [ "$($P -c "SELECT value FROM gpuclust_info() WHERE key = 'gpu_worker'")" = running ]; then
			for k in $(seq 1 300); do
				[ -z "$($P -c "SELECT 1 FROM gpuclust_gpu_jobs WHERE algorithm = 'gpu_hdbscan'")" ] && break
				sleep 0.1
			done
			gpu_cancel "gpu_hdbscan: a job of the worker (gpuclust_gpu_jobs), cancelled" \
				"SELECT pid FROM gpuclust_gpu_jobs WHERE algorithm = 'gpu_hdbscan' AND state = 'running'" \
				"SET statement_timeout = '60s'" "$call" "user request"
		fi
	fi

	echo "== HDBSCAN, 110,000 rows 2-d (the benchmark's shape, min_cluster_size 15), end to end"
	cat > /tmp/timing_hd.sql <<'SQL'
\timing on
SET gpuclust.log_timing = on;
SELECT 'gpu (first call in this backend)';
SELECT count(DISTINCT cluster_id) FROM gpu_hdbscan('SELECT id, f FROM hd_b2', 15, device => 'gpu');
SELECT 'gpu';
SELECT count(DISTINCT cluster_id) FROM gpu_hdbscan('SELECT id, f FROM hd_b2', 15, device => 'gpu');
SELECT 'gpu';
SELECT count(DISTINCT cluster_id) FROM gpu_hdbscan('SELECT id, f FROM hd_b2', 15, device => 'gpu');
SELECT 'auto';
SELECT count(DISTINCT cluster_id) FROM gpu_hdbscan('SELECT id, f FROM hd_b2', 15);
SELECT 'cpu';
SELECT count(DISTINCT cluster_id) FROM gpu_hdbscan('SELECT id, f FROM hd_b2', 15, device => 'cpu');
SELECT 'ingest alone';
SELECT count(*) FROM hd_b2;
SQL
	psql -X -At -f /tmp/timing_hd.sql 2>&1 | tee "$OUTDIR/sql_timing_hdbscan.log"
	$P -c "DROP TABLE hd_b2, hd_b3, hd_b16, hd_dup" -c "DROP FUNCTION hd_n(bigint), hd_u(bigint)"
}

if [ "${SQL_ONLY:-}" = hdbscan ]; then
	$P -c 'DROP EXTENSION IF EXISTS gpuclust' -c 'CREATE EXTENSION gpuclust' || { echo "FAIL CREATE EXTENSION"; exit 100; }
	hdbscan_checks
	echo "sql_gpu_test: $fails failed"
	exit $fails
fi

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
	tests=$(ls sql/*.sql | grep -v -- '--' | xargs -n1 basename | sed 's/\.sql$//')
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

echo "== gpu_kmeans with sample weights, metric cosine, given centres: device gpu = device cpu"
# label; the arguments after the source; the source; labels allowed to differ
# (weighted: the GPU sums in the CPU's order, so none; cosine without
# weights: its fixed-point sums, 1 in 1000 rows at most)
kfeat="weighted;50, seed => 7;SELECT id, f, (1 + id % 7)::float8 FROM t_s2;0
weighted, heavy and zero weights;64, seed => 3;SELECT id, f, CASE WHEN id % 3 = 0 THEN 0 ELSE power(10, (id % 13) - 6) END FROM t_s5;0
weighted, k-means||, 257 clusters;257, init => 'k-means||', seed => 5;SELECT id, f, (id % 5)::real FROM t_s6;0
weighted, random, n_init 3;10, init => 'random', n_init => 3, seed => 2;SELECT id, f, 1 + (id % 4) FROM t_s1;0
cosine;50, metric => 'cosine', seed => 7;SELECT id, f FROM t_s2;50
cosine, d 200, n_init 2;120, metric => 'cosine', n_init => 2, seed => 4;SELECT id, f FROM t_s4;20
cosine, weighted;50, metric => 'cosine', seed => 9;SELECT id, f, 1 + id % 3 FROM t_s2;0
given centres;10, init_centroids => (SELECT array_agg(f ORDER BY id) FROM t_s1 WHERE id <= 10);SELECT id, f FROM t_s1;0
given centres by a query, cosine, weighted;10, init => 'SELECT f FROM t_s1 WHERE id <= 10 ORDER BY id', metric => 'cosine';SELECT id, f, 1 + id % 2 FROM t_s1;0"
while IFS=';' read -r name args src tolrows; do
	n=$($P -c "SELECT count(*) FROM ($src) s")
	r=$($P -c "SELECT (count(*) = $n AND count(*) FILTER (WHERE g.cluster_id IS DISTINCT FROM c.cluster_id) <= $tolrows)::text
		|| ' rows ' || count(*) || ', labels differing ' || count(*) FILTER (WHERE g.cluster_id IS DISTINCT FROM c.cluster_id)
		|| ', distances differing ' || count(*) FILTER (WHERE g.distance IS DISTINCT FROM c.distance)
		FROM gpu_kmeans('${src//\'/\'\'}', $args, device => 'gpu') g
		JOIN gpu_kmeans('${src//\'/\'\'}', $args, device => 'cpu') c USING (id)" 2>&1)
	case "$r" in
		true*) echo "ok   $name:${r#true}";;
		*) echo "FAIL $name: $r"; fails=$((fails + 1));;
	esac
done <<< "$kfeat"
check "gpu_kmeans_fit, weighted and cosine: the GPU's model = the CPU's" \
	"SELECT g.centroids = c.centroids AND g.inertia = c.inertia AND g.iterations = c.iterations
	 FROM gpu_kmeans_fit('SELECT id, f, 1 + id % 7 FROM t_s2', 20, metric => 'cosine', seed => 1, device => 'gpu') g,
	      gpu_kmeans_fit('SELECT id, f, 1 + id % 7 FROM t_s2', 20, metric => 'cosine', seed => 1, device => 'cpu') c"
check "gpu_kmeans_elbow, weighted: the GPU's inertia per k = the CPU's" \
	"SELECT bool_and(g.inertia = c.inertia)
	 FROM gpu_kmeans_elbow('SELECT id, f, 1 + id % 7 FROM t_s2', 2, 6, device => 'gpu') g
	 JOIN gpu_kmeans_elbow('SELECT id, f, 1 + id % 7 FROM t_s2', 2, 6, device => 'cpu') c USING (k)"
check "window form, cosine: the GPU's labels = the CPU's" \
	"SELECT bool_and(g = c) FROM (SELECT gpu_kmeans(f, 10, metric => 'cosine', seed => 3, device => 'gpu') OVER () AS g,
	                                     gpu_kmeans(f, 10, metric => 'cosine', seed => 3, device => 'cpu') OVER () AS c FROM t_s1) s"
r=$($P -c "SET gpuclust.log_timing = on" -c "SELECT count(*) FROM gpu_kmeans('SELECT id, f, 1 + id % 7 FROM t_s5', 1000, metric => 'cosine', max_iter => 20)" 2>&1)
case "$r" in *"device gpu"*) echo "ok   'auto', weighted and cosine, 200000 x 5, k 1000: the GPU";;
	*) echo "FAIL 'auto', weighted and cosine: $r"; fails=$((fails + 1));; esac

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
	$P -c "DROP TABLE IF EXISTS ${name}_cpu" -c "CREATE TABLE ${name}_cpu AS
		SELECT * FROM gpu_dbscan('SELECT id, f FROM $name', $eps, $mp, device => 'cpu')"
	for alg in $DB_ALGS; do
		r=$($P -c "SELECT (count(*) = $n AND count(*) FILTER (WHERE g.cluster_id IS DISTINCT FROM c.cluster_id
			                                 OR g.is_core IS DISTINCT FROM c.is_core) = 0)::text
			|| ' rows ' || count(*) || ', clusters ' || count(DISTINCT c.cluster_id)
			|| ', differing ' || count(*) FILTER (WHERE g.cluster_id IS DISTINCT FROM c.cluster_id
			                                      OR g.is_core IS DISTINCT FROM c.is_core)
			FROM gpu_dbscan('SELECT id, f FROM $name', $eps, $mp, device => 'gpu', algorithm => '$alg') g
			JOIN ${name}_cpu c USING (id)" 2>&1)
		case "$r" in
			true*) echo "ok   dbscan $alg n=$n d=$d eps=$eps min_pts=$mp:${r#true}";;
			*) echo "FAIL dbscan $alg n=$n d=$d eps=$eps min_pts=$mp: $r"; fails=$((fails + 1));;
		esac
	done
done <<< "$dshapes"
check "auto_device_dbscan is gpu" \
	"SELECT value = 'gpu' FROM gpuclust_info() WHERE key = 'auto_device_dbscan'"
check "dbscan_dclust_device is gpu" \
	"SELECT value = 'gpu' FROM gpuclust_info() WHERE key = 'dbscan_dclust_device'"

echo "== gpu_dbscan: the edge cases, device gpu = device cpu"
# dbcmp NAME SOURCE EPS MIN_PTS [EXPECT]: rows, cluster ids and core flags of
# the two devices equal, row for row, for each algorithm of DB_ALGS on the
# GPU (one line each); EXPECT (SQL over the CPU's result "c") says the case
# is what its name says
dbcmp() {
	local name=$1 src=$2 eps=$3 mp=$4 expect=${5:-true} r alg
	for alg in $DB_ALGS; do
		r=$($P -c "WITH c AS (SELECT * FROM gpu_dbscan(\$q\$$src\$q\$, $eps, $mp, device => 'cpu')),
			g AS (SELECT * FROM gpu_dbscan(\$q\$$src\$q\$, $eps, $mp, device => 'gpu', algorithm => '$alg'))
			SELECT ((SELECT count(*) FROM c) = (SELECT count(*) FROM g)
			        AND (SELECT count(*) FROM c JOIN g USING (id)
			             WHERE g.cluster_id IS DISTINCT FROM c.cluster_id
			                OR g.is_core IS DISTINCT FROM c.is_core) = 0
			        AND (SELECT count(*) FROM c JOIN g USING (id)) = (SELECT count(*) FROM c)
			        AND (SELECT $expect FROM (SELECT 1) x))::text
			|| ' rows ' || (SELECT count(*) FROM c) || ', clusters ' || (SELECT count(DISTINCT cluster_id) FROM c)
			|| ', core ' || (SELECT count(*) FILTER (WHERE is_core) FROM c)
			|| ', noise ' || (SELECT count(*) FILTER (WHERE cluster_id IS NULL) FROM c)" 2>&1)
		case "$r" in
			true*) echo "ok   dbscan $alg $name:${r#true}";;
			*) echo "FAIL dbscan $alg $name: $r"; fails=$((fails + 1));;
		esac
	done
}
line="SELECT i::bigint, ARRAY[i, 0]::real[] FROM generate_series(1, 5000) i"
dbcmp "all noise (no core point)" "$line" 0.5 2 "(SELECT bool_and(cluster_id IS NULL AND NOT is_core) FROM c)"
dbcmp "all core (no border point)" "$line" 1.0 2 "(SELECT bool_and(is_core) FROM c)"
dbcmp "exact duplicates" "SELECT i::bigint, ARRAY[i % 7, (i % 7) * 2]::real[] FROM generate_series(1, 20000) i" 0.5 3 \
	"(SELECT count(DISTINCT cluster_id) = 7 FROM c)"
dbcmp "all rows identical" "SELECT i::bigint, ARRAY[1.5, 2.5, 3.5]::real[] FROM generate_series(1, 3000) i" 0.1 5 \
	"(SELECT bool_and(is_core AND cluster_id = 0) FROM c)"
dbcmp "min_pts 1" "SELECT i::bigint, ARRAY[(hashint4(i) % 1000) / 10.0, (hashint4(i + 7) % 1000) / 10.0]::real[] FROM generate_series(1, 30000) i" \
	0.2 1 "(SELECT bool_and(is_core) FROM c)"
dbcmp "min_pts > n" "SELECT i::bigint, ARRAY[i % 10, i % 3]::real[] FROM generate_series(1, 1000) i" 100 1001 \
	"(SELECT bool_and(cluster_id IS NULL) FROM c)"
dbcmp "n = 1, min_pts 1" "SELECT 42::bigint, ARRAY[0.5, 0.5]::real[]" 1 1 "(SELECT bool_and(is_core) FROM c)"
dbcmp "n = 1, min_pts 2" "SELECT 42::bigint, ARRAY[0.5, 0.5]::real[]" 1 2 "(SELECT bool_and(cluster_id IS NULL) FROM c)"
dbcmp "NULL features and 1-d" "SELECT i::bigint, CASE WHEN i % 5 = 0 THEN NULL ELSE ARRAY[i % 100]::real[] END FROM generate_series(1, 4000) i" \
	0.5 4 "(SELECT count(*) FILTER (WHERE is_core IS NULL) = 800 FROM c)"

echo "== gpu_dbscan in d = 4 to 64: blobs, uniform, heavy duplicates, all noise; device gpu = device cpu"
# hu(a, b): a uniform number in [0, 1) from a hash of (a, b), 0 <= b < 4096
$P -c "CREATE OR REPLACE FUNCTION hu(a bigint, b int) RETURNS float8 IMMUTABLE LANGUAGE sql
	AS 'SELECT (hashint8(\$1 * 4096 + \$2)::float8 + 2147483648) / 4294967296'"
# kdist SRC K Q: the k-distance at fraction Q of the sorted curve (gpu_kdistance, on the CPU)
kdist() {
	$P -c "SELECT kdistance FROM gpu_kdistance(\$q\$$1\$q\$, $2, 100, device => 'cpu')
	       WHERE NOT is_knee ORDER BY abs(fraction - $3), fraction LIMIT 1"
}
for d in 4 8 16 32 64; do
	# blobs: 8 centres in [0, 20)^d, triangular offsets in (-1, 1) per
	# coordinate, every 20th row uniform in [0, 20)^d
	$P -c "DROP TABLE IF EXISTS hd_blobs" -c "CREATE TABLE hd_blobs AS
		SELECT i::bigint AS id,
		       ARRAY(SELECT CASE WHEN i % 20 = 0 THEN 20 * hu(i, j)
		                         ELSE 20 * hu(i % 8, 1000 + j) + hu(i, 128 + j) + hu(i, 256 + j) - 1 END
		             FROM generate_series(1, $d) j)::real[] AS f
		FROM generate_series(1, 4000) i"
	# uniform in [0, 1)^d
	$P -c "DROP TABLE IF EXISTS hd_uniform" -c "CREATE TABLE hd_uniform AS
		SELECT i::bigint AS id, ARRAY(SELECT hu(i, 512 + j) FROM generate_series(1, $d) j)::real[] AS f
		FROM generate_series(1, 3000) i"
	# heavy duplicates: 3000 rows on 40 points of the lattice {0, 1, 2}^d,
	# skewed (point k of 40 has from about 19 to 470 copies); eps 1 and
	# integer coordinates: many distances exactly eps
	$P -c "DROP TABLE IF EXISTS hd_dups" -c "CREATE TABLE hd_dups AS
		SELECT i::bigint AS id,
		       ARRAY(SELECT floor(3 * hu(floor(40 * hu(i, 2000) ^ 4)::bigint, 3000 + j))
		             FROM generate_series(1, $d) j)::real[] AS f
		FROM generate_series(1, 3000) i"
	# eps: blobs and uniform, the median k-distance (about half the rows
	# core); all noise, half the smallest distance between two rows
	eb=$(kdist "SELECT id, f FROM hd_blobs" 8 0.5)
	eu=$(kdist "SELECT id, f FROM hd_uniform" 5 0.5)
	en=$($P -c "SELECT kdistance / 2 FROM gpu_kdistance('SELECT id, f FROM hd_uniform', 2, 1, device => 'cpu') ORDER BY rank LIMIT 1")
	dbcmp "${d}-d blobs (eps $eb)" "SELECT id, f FROM hd_blobs" "$eb" 8 \
		"(SELECT count(*) FILTER (WHERE is_core) > 0 AND count(*) FILTER (WHERE cluster_id IS NULL) > 0 FROM c)"
	dbcmp "${d}-d uniform (eps $eu)" "SELECT id, f FROM hd_uniform" "$eu" 5 \
		"(SELECT count(*) FILTER (WHERE is_core) > 0 FROM c)"
	dbcmp "${d}-d heavy duplicates (eps 1)" "SELECT id, f FROM hd_dups" 1 30 \
		"(SELECT count(*) FILTER (WHERE is_core) > 0 AND count(DISTINCT f) <= 40 FROM c JOIN hd_dups USING (id))"
	dbcmp "${d}-d all noise (eps $en)" "SELECT id, f FROM hd_uniform" "$en" 2 \
		"(SELECT $en > 0 AND bool_and(cluster_id IS NULL AND NOT is_core) FROM c)"
done
$P -c "DROP TABLE hd_blobs, hd_uniform, hd_dups" -c "DROP FUNCTION hu(bigint, int)"

echo "== 300,000 rows 3-d, eps 0.3, min_pts 8"
# u(i, k): a uniform number in [0, 1) from a hash of (i, k)
$P -c "CREATE OR REPLACE FUNCTION u(i int, k int) RETURNS float8 IMMUTABLE LANGUAGE sql
	AS 'SELECT (hashint8(i::bigint * 64 + k)::float8 + 2147483648) / 4294967296'"
# 40 blobs on an 8 x 5 grid, 4 apart, triangular offsets in (-2, 2) (dense
# centres, sparse fringes: core, border and noise points), 5% uniform noise
$P -c "DROP TABLE IF EXISTS t3" -c "CREATE TABLE t3 AS
	SELECT i::bigint AS id,
	       CASE WHEN i % 20 = 0
	            THEN ARRAY[-2 + 36 * u(i, 1), -2 + 24 * u(i, 2), -2 + 4 * u(i, 3)]
	            ELSE ARRAY[(i % 40 % 8) * 4 + 2 * (u(i, 4) + u(i, 5)) - 2,
	                       (i % 40 / 8) * 4 + 2 * (u(i, 6) + u(i, 7)) - 2,
	                       2 * (u(i, 8) + u(i, 9)) - 2] END::real[] AS f
	FROM generate_series(1, 300000) i"
dbcmp "300k 3-d" "SELECT id, f FROM t3" 0.3 8 "(SELECT count(*) = 300000 FROM c)"

echo "== 8 concurrent sessions, 5 GPU calls each on the 300k 3-d table"
$P -c "DROP TABLE IF EXISTS t3_ref" -c "CREATE TABLE t3_ref AS SELECT * FROM gpu_dbscan('SELECT id, f FROM t3', 0.3, 8, device => 'cpu')"
for s in $(seq 1 8); do
	(for c in 1 2 3 4 5; do
		$P -c "SELECT count(*) || ' ' || count(*) FILTER (WHERE g.cluster_id IS DISTINCT FROM c.cluster_id
		                                             OR g.is_core IS DISTINCT FROM c.is_core)
		       FROM gpu_dbscan('SELECT id, f FROM t3', 0.3, 8, device => 'gpu') g JOIN t3_ref c USING (id)" 2>&1
	done) > "$OUTDIR/concurrent_$s.log" &
done
wait
good=$(cat "$OUTDIR"/concurrent_*.log | grep -c '^300000 0$')
if [ "$good" -eq 40 ]; then echo "ok   40 of 40 concurrent GPU calls equal the CPU"
else echo "FAIL concurrent: $good of 40 equal the CPU"; cat "$OUTDIR"/concurrent_*.log | grep -v '^300000 0$' | head; fails=$((fails + 1)); fi

echo "== gpu_dbscan metric => 'cosine': device gpu = device cpu"
for q in "3|0.00002" "16|0.0007"; do
	d=${q%|*}; eps=${q#*|}
	for alg in $DB_ALGS; do
		r=$($P -c "CREATE TEMP TABLE tc AS SELECT i AS id, ARRAY(SELECT ((hashint4(i % 40 * 100 + j) % 1000) / 100.0
		             + (hashint4(i * 100 + j) % 1000) / 2000.0) * (1 + (hashint4(-i) % 1000 + 1000) / 100.0)
		             FROM generate_series(1, $d) j)::real[] AS f FROM generate_series(1, 100000) i" \
			-c "SELECT count(*) || ' rows, ' || count(*) FILTER (WHERE g.cluster_id IS DISTINCT FROM c.cluster_id
			                                                  OR g.is_core IS DISTINCT FROM c.is_core) || ' differing, '
			          || count(DISTINCT c.cluster_id) || ' clusters, ' || count(*) FILTER (WHERE c.cluster_id IS NULL) || ' noise'
			    FROM gpu_dbscan('SELECT id, f FROM tc', $eps, 5, device => 'gpu', metric => 'cosine', algorithm => '$alg') g
			    JOIN gpu_dbscan('SELECT id, f FROM tc', $eps, 5, device => 'cpu', metric => 'cosine') c USING (id)" 2>&1)
		case "$r" in
			*" rows, 0 differing"*) echo "ok   dbscan $alg cosine 100k ${d}-d eps $eps: $r";;
			*) echo "FAIL dbscan $alg cosine ${d}-d: $r"; fails=$((fails + 1));;
		esac
	done
done

echo "== auto: DBSCAN on the GPU where it wins end to end"
# WARM: CUDA already runs in the backend (gpuclust_info() probed it); a
# cold backend's first call would also pay CUDA's start-up (dispatch.c).
# With the GPU worker every backend is warm: its context is the worker's.
cold_t3=cpu
[ "$($P -c "SELECT value FROM gpuclust_info() WHERE key = 'gpu_worker'")" = running ] && cold_t3=gpu
for q in "cold|t3|$cold_t3" "warm|t3|gpu" "warm|t3 WHERE id <= 5000|cpu" "cold|t3 WHERE id <= 5000|cpu"; do
	IFS='|' read -r state src dev <<< "$q"
	warm=""; [ "$state" = warm ] && warm="SELECT count(*) FROM gpuclust_info()"
	r=$($P -c "SET gpuclust.log_timing = on" ${warm:+-c "$warm"} -c "SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM $src', 0.3, 8)" 2>&1)
	echo "$r" | grep -q "device $dev" && echo "ok   auto on $src ($state backend): $dev" || { echo "FAIL auto on $src ($state backend): $r"; fails=$((fails + 1)); }
done

# above 3 dimensions (the GPU's kd-tree): warm, the GPU from 5,000 rows in
# 5-d to 64-d; cold, from 1M rows in 5-d to 8-d (dispatch.c's measured
# crossovers)
cold_s5=cpu; [ "$cold_t3" = gpu ] && cold_s5=gpu
for q in "warm|t_s2|gpu" "warm|t_s2 WHERE id <= 4000|cpu" "warm|t_s3|gpu" "warm|t_s5|gpu" "cold|t_s5|$cold_s5"; do
	IFS='|' read -r state src dev <<< "$q"
	warm=""; [ "$state" = warm ] && warm="SELECT count(*) FROM gpuclust_info()"
	r=$($P -c "SET gpuclust.log_timing = on" ${warm:+-c "$warm"} -c "SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM $src', 0.01, 8)" 2>&1)
	echo "$r" | grep -q "device $dev" && echo "ok   auto on $src ($state backend): $dev" || { echo "FAIL auto on $src ($state backend): $r"; fails=$((fails + 1)); }
done

# dclust asks for the GPU: 'auto' runs it there however small the input,
# where union_find stays on the CPU
for q in "dclust|gpu" "union_find|cpu"; do
	IFS='|' read -r alg dev <<< "$q"
	r=$($P -c "SET gpuclust.log_timing = on" -c "SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM t_s3 WHERE id <= 500', 30, 5, algorithm => '$alg')" 2>&1)
	echo "$r" | grep -q "device $dev, n 500, d 64, algorithm $alg" && echo "ok   auto, $alg on 500 rows in 64-d: $dev" \
		|| { echo "FAIL auto, $alg on 500 rows in 64-d: $r"; fails=$((fails + 1)); }
done

echo "== gpu_affinity_propagation: device gpu = device cpu (labels and is_exemplar, row for row)"
# apcmp NAME SOURCE ARGS [EXPECT]: in float8, rows, cluster ids and exemplar
# flags of the two devices equal, row for row (one line); ARGS are more
# arguments (", preference => -50"); EXPECT (SQL over the CPU's result
# "c") says the case is what its name says.  Notices (not converged) are
# not shown.
apcmp() {
	local name=$1 src=$2 args=$3 expect=${4:-true} r
	r=$($P -c "SET client_min_messages = warning" -c "
		WITH c AS (SELECT * FROM gpu_affinity_propagation(\$q\$$src\$q\$$args, device => 'cpu')),
		g AS (SELECT * FROM gpu_affinity_propagation(\$q\$$src\$q\$$args, device => 'gpu'))
		SELECT ((SELECT count(*) FROM c) = (SELECT count(*) FROM g)
		        AND (SELECT count(*) FROM c JOIN g USING (id)) = (SELECT count(*) FROM c)
		        AND (SELECT count(*) FROM c JOIN g USING (id)
		             WHERE g.cluster_id IS DISTINCT FROM c.cluster_id
		                OR g.is_exemplar IS DISTINCT FROM c.is_exemplar) = 0
		        AND (SELECT $expect FROM (SELECT 1) x))::text
		|| ' rows ' || (SELECT count(*) FROM c) || ', clusters ' || (SELECT count(DISTINCT cluster_id) FROM c)
		|| ', unlabelled ' || (SELECT count(*) FILTER (WHERE cluster_id IS NULL) FROM c)" 2>&1)
	case "$r" in
		true*) echo "ok   ap $name:${r#true}";;
		*) echo "FAIL ap $name: $r"; fails=$((fails + 1));;
	esac
}
# blobs: m centres in [0, 20)^d (u() from the 300k section), triangular
# offsets in (-1, 1) per coordinate
ap_blobs() {	# table n d m
	$P -c "DROP TABLE IF EXISTS $1" -c "CREATE TABLE $1 AS
		SELECT i::bigint AS id,
		       ARRAY(SELECT 20 * u(i % $4, 10 + j) + u(i, 20 + j) + u(i, 40 + j) - 1
		             FROM generate_series(1, $3) j)::real[] AS f
		FROM generate_series(1, $2) i"
}
ap_blobs ap_b2 300 2 6
ap_blobs ap_b8 1500 8 10
# heavy duplicates: 1000 rows on the 12 points of a 4 x 3 lattice, skewed
# (the most common point has about half the rows): exact ties everywhere
$P -c "DROP TABLE IF EXISTS ap_dup" -c "CREATE TABLE ap_dup AS
	SELECT i::bigint AS id, ARRAY[k % 4, k / 4]::real[] AS f
	FROM (SELECT i, floor(12 * u(i, 1) ^ 4)::int AS k FROM generate_series(1, 1000) i) s"
# (damping 0.9: at scikit-learn's default 0.5 the messages oscillate on
# these blobs, and 200 iterations end unconverged: the next case but one)
apcmp "300 2-d blobs" "SELECT id, f FROM ap_b2" ", damping => 0.9" "(SELECT count(*) FILTER (WHERE cluster_id IS NULL) = 0 FROM c)"
apcmp "1500 8-d blobs" "SELECT id, f FROM ap_b8" ", damping => 0.9" "(SELECT count(*) FILTER (WHERE cluster_id IS NULL) = 0 FROM c)"
apcmp "heavy duplicates (12 distinct points of 1000)" "SELECT id, f FROM ap_dup" ", damping => 0.9" \
	"(SELECT count(DISTINCT f) = 12 FROM ap_dup)"
apcmp "a given preference (-50), damping 0.7" "SELECT id, f FROM ap_b2" ", preference => -50, damping => 0.7"
apcmp "oscillating (damping 0.5): not converged in 200 iterations" "SELECT id, f FROM ap_b2" ""
apcmp "not converged within max_iter (12 < convergence_iter 15)" "SELECT id, f FROM ap_b8" ", max_iter => 12"
for q in "ap_b8|, max_iter => 12|12" "ap_b2||200"; do
	IFS='|' read -r t args it <<< "$q"
	r=$($P -c "SELECT count(*) FROM gpu_affinity_propagation('SELECT id, f FROM $t'$args, device => 'gpu')" 2>&1)
	echo "$r" | grep -q "did not converge in $it iterations" && echo "ok   ap on the GPU says it did not converge in $it iterations" \
		|| { echo "FAIL ap not converged on the GPU ($t$args): $r"; fails=$((fails + 1)); }
done
apcmp "one row" "SELECT 42::bigint, ARRAY[1, 2]::real[]" "" "(SELECT bool_and(is_exemplar) FROM c)"
apcmp "NULL features" "SELECT id, CASE WHEN id % 7 = 0 THEN NULL ELSE f END FROM ap_b2" "" \
	"(SELECT count(*) FILTER (WHERE is_exemplar IS NULL) = 42 FROM c)"

echo "== gpu_affinity_propagation in float4: a whole labelling"
# S, R and A stored as float: not the CPU's result bit for bit, but every
# row labelled by one of the exemplars (the inputs converge), as many
# clusters as exemplars; the rows whose cluster differs from float8's are
# reported, not checked
for t in ap_b2 ap_b8 ap_dup; do
	r=$($P -c "SET client_min_messages = warning" -c "
		WITH g AS (SELECT * FROM gpu_affinity_propagation('SELECT id, f FROM $t', damping => 0.9, device => 'gpu', \"precision\" => 'float4')),
		c AS (SELECT * FROM gpu_affinity_propagation('SELECT id, f FROM $t', damping => 0.9, device => 'cpu'))
		SELECT ((SELECT count(*) FROM g) = (SELECT count(*) FROM $t)
		        AND (SELECT count(*) FILTER (WHERE cluster_id IS NULL) FROM g) = 0
		        AND (SELECT count(*) FILTER (WHERE is_exemplar) = count(DISTINCT cluster_id) FROM g))::text
		|| ' rows ' || (SELECT count(*) FROM g) || ', clusters ' || (SELECT count(DISTINCT cluster_id) FROM g)
		|| ' (float8: ' || (SELECT count(DISTINCT cluster_id) FROM c) || '), rows in another cluster than float8''s '
		|| (SELECT count(*) FROM g JOIN c USING (id) WHERE g.cluster_id IS DISTINCT FROM c.cluster_id)" 2>&1)
	case "$r" in
		true*) echo "ok   ap float4 $t:${r#true}";;
		*) echo "FAIL ap float4 $t: $r"; fails=$((fails + 1));;
	esac
done
check "ap_float4_device is gpu" \
	"SELECT value = 'gpu' FROM gpuclust_info() WHERE key = 'ap_float4_device'"
check "auto_device_ap is gpu" \
	"SELECT value = 'gpu' FROM gpuclust_info() WHERE key = 'auto_device_ap'"

echo "== gpu_affinity_propagation under auto: the CPU below auto_ap_gpu_min_rows, the GPU from there"
# each call in a warm backend (gpuclust_info() first): without the GPU
# worker, 'auto' keeps a cold backend's moderate calls on the CPU
ap_min=$($P -c "SELECT value FROM gpuclust_info() WHERE key = 'auto_ap_gpu_min_rows'")
for q in "$((ap_min - 1))|cpu|float8" "$ap_min|gpu|float8" "10|gpu|float4"; do
	IFS='|' read -r n dev prec <<< "$q"
	r=$($P -c "SET gpuclust.log_timing = on" -c "SELECT count(*) FROM gpuclust_info()" -c "SELECT count(*) FROM gpu_affinity_propagation(
		'SELECT i, ARRAY[u(i, 1) * 30, u(i, 2) * 30] FROM generate_series(1, $n) i', max_iter => 5, \"precision\" => '$prec')" 2>&1)
	echo "$r" | grep -q "device $dev, precision $prec, n $n," && echo "ok   auto, $prec, $n rows: $dev" \
		|| { echo "FAIL auto, $prec, $n rows: $r"; fails=$((fails + 1)); }
done

echo "== gpu_affinity_propagation too large: an error naming the largest n (or, under auto, the CPU)"
# SETTING VALUE DEVICE PRECISION MESSAGE: under gpuclust.SETTING = VALUE
# the call fails with MESSAGE, its detail naming the largest n that fits.
# The session's matrix memory bounds the GPU's matrices too: 10 MB holds
# neither device's matrices for 1500 rows (54 MB in float8).  The GPU's
# memory (gpuclust.gpu_memory_limit, 20 MB): 'gpu' fails (53200) in float8
# and float4 (27 MB); 'auto' runs float8 on the CPU (below)
for q in "matrix_memory|10MB|gpu|float8|more than gpuclust.matrix_memory" \
	"matrix_memory|10MB|gpu|float4|more than gpuclust.matrix_memory" \
	"matrix_memory|10MB|auto|float8|more than gpuclust.matrix_memory" \
	"gpu_memory_limit|20MB|gpu|float8|does not fit the GPU's memory" \
	"gpu_memory_limit|20MB|gpu|float4|does not fit the GPU's memory"; do
	IFS='|' read -r set val dev prec want <<< "$q"
	r=$($P -c "SET gpuclust.$set = '$val'" -c "SELECT count(*) FROM gpu_affinity_propagation('SELECT id, f FROM ap_b8',
		device => '$dev', \"precision\" => '$prec')" 2>&1)
	echo "$r" | grep -q "$want" && echo "$r" | grep -q "at most [0-9]* rows fit" \
		&& echo "ok   $dev, $prec, gpuclust.$set $val: $(echo "$r" | grep -E 'ERROR|DETAIL' | tr '\n' ' ')" \
		|| { echo "FAIL $dev, $prec, gpuclust.$set $val: $r"; fails=$((fails + 1)); }
done
# (from auto_ap_gpu_min_rows rows: below, 'auto' never asks the GPU)
if [ "$ap_min" -le 8000 ]; then
	n=$((ap_min > 1500 ? ap_min : 1500))
	r=$($P -c "SET gpuclust.gpu_memory_limit = '20MB'" -c "SET gpuclust.log_timing = on" -c "SELECT count(*) FROM gpuclust_info()" -c "SELECT count(*) FROM gpu_affinity_propagation(
		'SELECT i, ARRAY[u(i, 1) * 30, u(i, 2) * 30] FROM generate_series(1, $n) i', max_iter => 5)" 2>&1)
	echo "$r" | grep -q "affinity propagation runs on the CPU" && echo "$r" | grep -q "device cpu, precision float8, n $n," \
		&& echo "ok   auto, $n rows, gpuclust.gpu_memory_limit 20MB: the CPU, with a NOTICE" \
		|| { echo "FAIL auto, $n rows, gpuclust.gpu_memory_limit 20MB: $r"; fails=$((fails + 1)); }
else
	echo "(auto_ap_gpu_min_rows = $ap_min: too many rows to run on the CPU here; 'auto' too large for the GPU skipped)"
fi

echo "== gpu_affinity_propagation through the GPU worker"
if [ "$($P -c "SELECT value FROM gpuclust_info() WHERE key = 'gpu_worker'")" = running ]; then
	# a long job (never converges) in another session: listed as the
	# worker's, then cancelled
	gpu_cancel "an affinity propagation job runs on the worker (gpuclust_gpu_jobs) and is cancelled" \
		"SELECT pid FROM gpuclust_gpu_jobs WHERE algorithm = 'gpu_affinity_propagation' AND state = 'running'" \
		"SET statement_timeout = '60s'" "SELECT count(*) FROM gpu_affinity_propagation(
		'SELECT i, ARRAY[i % 101, i % 97] FROM generate_series(1, 5000) i',
		max_iter => 1000000, convergence_iter => 1000001, device => 'gpu')" "user request"
else
	echo "(the GPU worker is not running: each backend ran its own GPU calls above)"
fi
$P -c "DROP TABLE ap_b2, ap_b8, ap_dup"

echo "== gpu_kdistance: device gpu = device cpu (every row: rank, fraction, kdistance, is_knee bit for bit)"
# rt(i, k): a uniform number in [0, 1) from a hash of (i, k)
$P -c "CREATE OR REPLACE FUNCTION rt(i int, k int) RETURNS float8 IMMUTABLE LANGUAGE sql
	AS 'SELECT (hashint8(i::bigint * 64 + k)::float8 + 2147483648) / 4294967296'"
# name n d: uniform in [0, 100)^d; kd_dup: 100,000 2-d rows on 500 points
for q in "kd_2 200000 2" "kd_3 100000 3" "kd_16 50000 16"; do
	read -r name n d <<< "$q"
	$P -c "DROP TABLE IF EXISTS $name" -c "CREATE TABLE $name AS
		SELECT i::bigint AS id, ARRAY(SELECT 100 * rt(i, j) FROM generate_series(1, $d) j)::real[] AS f
		FROM generate_series(1, $n) i"
done
$P -c "DROP TABLE IF EXISTS kd_dup" -c "CREATE TABLE kd_dup AS
	SELECT i::bigint AS id, ARRAY[floor(20 * rt(i % 500, 1)), floor(25 * rt(i % 500, 2))]::real[] AS f
	FROM generate_series(1, 100000) i"
# kdcmp TABLE K [ARGS]: the GPU's rows equal the CPU's, every one (a full
# join on rank: none missing on either side)
kdcmp() {
	local t=$1 k=$2 args=${3:-} r
	r=$($P -c "SELECT (count(*) > 0 AND count(*) FILTER (WHERE g.fraction IS DISTINCT FROM c.fraction OR g.kdistance IS DISTINCT FROM c.kdistance
		                               OR g.is_knee IS DISTINCT FROM c.is_knee) = 0)::text
		|| ' rows ' || count(*) || ', differing ' || count(*) FILTER (WHERE g.fraction IS DISTINCT FROM c.fraction
		       OR g.kdistance IS DISTINCT FROM c.kdistance OR g.is_knee IS DISTINCT FROM c.is_knee)
		|| ', knee at ' || max(c.kdistance) FILTER (WHERE c.is_knee) || ', max ' || max(c.kdistance)
		FROM gpu_kdistance('SELECT id, f FROM $t', $k$args, device => 'gpu') g
		FULL JOIN gpu_kdistance('SELECT id, f FROM $t', $k$args, device => 'cpu') c USING (rank)" 2>&1)
	case "$r" in
		true*) echo "ok   kdistance $t k=$k$args:${r#true}";;
		*) echo "FAIL kdistance $t k=$k$args: $r"; fails=$((fails + 1));;
	esac
}
for t in kd_2 kd_3 kd_16 kd_dup; do
	for k in 1 4 10 100; do kdcmp $t $k; done
	kdcmp $t 10 ", quantiles => 100"
done
kdcmp kd_dup 300
check "gpu_kdistance, gpu: a row is core at (eps, min_pts = k) exactly when its k-distance is at most eps" \
	"SELECT (SELECT count(*) FILTER (WHERE is_core) FROM gpu_dbscan('SELECT id, f FROM kd_3', e.kdistance, 10, device => 'gpu'))
	      = (SELECT count(*) FROM gpu_kdistance('SELECT id, f FROM kd_3', 10, device => 'gpu') WHERE kdistance <= e.kdistance)
	 FROM gpu_kdistance('SELECT id, f FROM kd_3', 10, quantiles => 4, device => 'gpu') e WHERE e.rank = 50001"

echo "== gpu_silhouette: device gpu = device cpu (score, rows, clusters, sampled)"
# the labellings: k-means (every row), DBSCAN with noise (eps the 60th
# percentile k-distance: about 40% noise)
eps=$($P -c "SELECT kdistance FROM gpu_kdistance('SELECT id, f FROM kd_3', 10, 100) WHERE NOT is_knee AND rank > 1
	ORDER BY abs(fraction - 0.6) LIMIT 1")
$P -c "DROP TABLE IF EXISTS sil_km, sil_db" \
	-c "CREATE TABLE sil_km AS SELECT id, cluster_id FROM gpu_kmeans('SELECT id, f FROM kd_3', 8, seed => 1)" \
	-c "CREATE TABLE sil_db AS SELECT id, cluster_id FROM gpu_dbscan('SELECT id, f FROM kd_3', $eps, 10)"
# silcmp NAME SOURCE LABELS ARGS [EXPECT]: the four columns equal; EXPECT
# (SQL over the CPU's row "c") says the case is what its name says
silcmp() {
	local name=$1 src=$2 labels=$3 args=$4 expect=${5:-true} r
	r=$($P -c "SELECT (g.silhouette = c.silhouette AND g.n = c.n AND g.clusters = c.clusters
		         AND g.sampled = c.sampled AND $expect)::text
		|| ' score ' || c.silhouette || ', n ' || c.n || ', clusters ' || c.clusters || ', sampled ' || c.sampled
		|| CASE WHEN g.silhouette <> c.silhouette THEN ', gpu score ' || g.silhouette ELSE '' END
		FROM gpu_silhouette(\$q\$$src\$q\$, \$q\$$labels\$q\$$args, device => 'gpu') g,
		     gpu_silhouette(\$q\$$src\$q\$, \$q\$$labels\$q\$$args, device => 'cpu') c" 2>&1)
	case "$r" in
		true*) echo "ok   silhouette $name:${r#true}";;
		*) echo "FAIL silhouette $name: $r"; fails=$((fails + 1));;
	esac
}
silcmp "k-means, 15,000 rows, exact" "SELECT id, f FROM kd_3 WHERE id <= 15000" "SELECT * FROM sil_km WHERE id <= 15000" "" "NOT c.sampled"
silcmp "k-means, 100,000 rows: the default sample" "SELECT id, f FROM kd_3" "SELECT * FROM sil_km" "" \
	"c.sampled AND c.n = 20000"
silcmp "k-means, sample_size 5000, seed 3" "SELECT id, f FROM kd_3" "SELECT * FROM sil_km" ", sample_size => 5000, seed => 3" \
	"c.sampled AND c.n = 5000"
silcmp "k-means, sample_size 50000" "SELECT id, f FROM kd_3" "SELECT * FROM sil_km" ", sample_size => 50000, seed => 9" \
	"c.n = 50000"
silcmp "DBSCAN with noise ($eps, 10), 15,000 rows, exact" "SELECT id, f FROM kd_3 WHERE id <= 15000" "SELECT * FROM sil_db WHERE id <= 15000" "" \
	"NOT c.sampled AND c.n < 15000 AND c.n > 1000"
silcmp "DBSCAN with noise: the default sample" "SELECT id, f FROM kd_3" "SELECT * FROM sil_db" "" \
	"c.sampled AND (SELECT count(*) FILTER (WHERE cluster_id IS NULL) > 0 FROM sil_db)"
silcmp "DBSCAN with noise, sample_size 8000, seed 5" "SELECT id, f FROM kd_3" "SELECT * FROM sil_db" ", sample_size => 8000, seed => 5"
silcmp "16-d, 50,000 rows in 7 stripes, sample_size 30000" "SELECT id, f FROM kd_16" "SELECT id, (f[1] / 15)::int FROM kd_16" \
	", sample_size => 30000"
r=$($P -c "SELECT * FROM gpu_silhouette('SELECT id, f FROM kd_3', 'SELECT id, 0 FROM kd_3 WHERE id <= 500', device => 'gpu')" 2>&1)
echo "$r" | grep -q "needs at least 2 clusters" && echo "$r" | grep -q "DETAIL:  500 labelled rows, in 1 cluster" \
	&& echo "ok   silhouette on the GPU, one cluster: the CPU's error (22023)" \
	|| { echo "FAIL silhouette on the GPU, one cluster: $r"; fails=$((fails + 1)); }

echo "== gpu_kdistance and gpu_silhouette under auto: the CPU below their crossovers, the GPU from there"
check "auto_device_kdistance is gpu" \
	"SELECT value = 'gpu' FROM gpuclust_info() WHERE key = 'auto_device_kdistance'"
check "auto_device_silhouette is gpu" \
	"SELECT value = 'gpu' FROM gpuclust_info() WHERE key = 'auto_device_silhouette'"
# warm: CUDA already runs in the backend (gpuclust_info() probed it; with
# the GPU worker every backend is)
kd_min=$($P -c "SELECT value FROM gpuclust_info() WHERE key = 'auto_kdistance_gpu_min_rows'")
sil_min=$($P -c "SELECT value FROM gpuclust_info() WHERE key = 'auto_silhouette_gpu_min_rows'")
# FUNCTION|CROSSOVER|CALL|INFO: CALL with @n rows (scored) runs on the CPU
# at CROSSOVER - 1 and on the GPU at CROSSOVER, log_timing's INFO says
for q in "gpu_kdistance|$kd_min|SELECT count(*) FROM gpu_kdistance('SELECT id, f FROM kd_2 WHERE id <= @n', 10, quantiles => 10)|n @n," \
	"gpu_silhouette|$sil_min|SELECT n FROM gpu_silhouette('SELECT id, f FROM kd_3', 'SELECT * FROM sil_km WHERE id <= @n')|n 100000, d 3, rows scored @n;"; do
	IFS='|' read -r fn min call info <<< "$q"
	for n in $((min - 1)) $min; do
		dev=gpu; [ "$n" -lt "$min" ] && dev=cpu
		r=$($P -c "SET gpuclust.log_timing = on" -c "SELECT count(*) FROM gpuclust_info()" -c "${call//@n/$n}" 2>&1)
		echo "$r" | grep -q "$fn: device $dev, ${info//@n/$n}" && echo "ok   $fn, auto, $n rows: $dev" \
			|| { echo "FAIL $fn, auto, $n rows: $r"; fails=$((fails + 1)); }
	done
done
# the GPU's memory too small (gpuclust.gpu_memory_limit = 1MB): 'auto' runs
# on the CPU with a NOTICE, 'gpu' fails with 53200
for q in "gpu_kdistance('SELECT id, f FROM kd_2', 10, quantiles => 10|k-distance|gpu_kdistance" \
	"gpu_silhouette('SELECT id, f FROM kd_3', 'SELECT * FROM sil_km', sample_size => 50000|silhouette|gpu_silhouette"; do
	IFS='|' read -r call what fn <<< "$q"
	r=$($P -c "SET gpuclust.gpu_memory_limit = '1MB'" -c "SET gpuclust.log_timing = on" -c "SELECT count(*) FROM gpuclust_info()" -c "SELECT count(*) FROM $call)" 2>&1)
	echo "$r" | grep -q "NOTICE:  $what runs on the CPU" && echo "$r" | grep -q "$fn: device cpu" \
		&& echo "ok   $fn, auto, gpu_memory_limit 1MB: the CPU, with a NOTICE: $(echo "$r" | grep DETAIL)" \
		|| { echo "FAIL $fn, auto, gpu_memory_limit 1MB: $r"; fails=$((fails + 1)); }
	r=$($P -c "SET gpuclust.gpu_memory_limit = '1MB'" -c "\\set VERBOSITY verbose" -c "SELECT count(*) FROM $call, device => 'gpu')" 2>&1)
	echo "$r" | grep -q "ERROR:  53200: out of memory" && echo "ok   $fn, gpu, gpu_memory_limit 1MB: 53200" \
		|| { echo "FAIL $fn, gpu, gpu_memory_limit 1MB: $r"; fails=$((fails + 1)); }
done
$P -c "DROP TABLE kd_2, kd_3, kd_16, kd_dup, sil_km, sil_db" -c "DROP FUNCTION rt(int, int)"

hdbscan_checks

echo "== auto"
r=$($P -c "SET gpuclust.log_timing = on" -c "SELECT count(*) FROM gpu_kmeans('SELECT id, f[1:2] FROM t_s1 WHERE id <= 1000', 3)" 2>&1)
echo "$r" | grep -q "device cpu" && echo "ok   auto, n*k*d = 6e3: cpu" || { echo "FAIL auto small: $r"; fails=$((fails + 1)); }
r=$($P -c "SELECT count(*) FROM gpu_kmeans('SELECT id, f FROM t_s1', 3, device => 'gpu')" -c "SET gpuclust.gpu_device_id = 7" \
	-c "SELECT count(*) FROM gpu_kmeans('SELECT id, f FROM t_s1', 3, device => 'gpu')" 2>&1)
echo "$r" | grep -q "cannot run k-means on the GPU" && echo "ok   gpuclust.gpu_device_id = 7 is refused: $(echo "$r" | grep DETAIL)" \
	|| { echo "FAIL gpu_device_id: $r"; fails=$((fails + 1)); }

echo "== 1M rows, d = 32, k = 100: end to end"
make_big_table
r=$($P -c "SET gpuclust.log_timing = on" -c "SELECT count(*) FROM gpu_kmeans('SELECT id, f FROM big', 100, max_iter => 5)" 2>&1)
echo "$r" | grep -q "device gpu" && echo "ok   auto, n*k*d = 3.2e9: gpu" || { echo "FAIL auto large: $r"; fails=$((fails + 1)); }

echo "== gpu_kdistance and gpu_silhouette on the GPU: stopped by statement_timeout (and pg_cancel_backend)"
# on the 1M x 32 rows: a whole GPU call is timed first (ms), then the
# same call under statement_timeout at 60% of that, seen computing on the
# GPU (gpuclust_progress, when gpuclust is preloaded) before it stops
watch=""
[ -n "$($P -c "SELECT 1 FROM pg_settings WHERE name = 'shared_preload_libraries' AND setting ~ 'gpuclust'")" ] && watch=1
for q in "gpu_kdistance|SELECT count(*) FROM gpu_kdistance('SELECT id, f FROM big', 100, device => 'gpu')" \
	"gpu_silhouette|SELECT n FROM gpu_silhouette('SELECT id, f FROM big', 'SELECT id, id % 7 FROM big', sample_size => 500000, device => 'gpu')"; do
	IFS='|' read -r fn call <<< "$q"
	ms=$(psql -X -q -At -c '\timing on' -c "$call" 2>&1 | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p')
	ms=${ms%.*}
	if [ -z "$ms" ] || [ "$ms" -lt 300 ]; then
		echo "FAIL $fn on the GPU, timed: '${ms}' ms (an error, or too short to stop)"; fails=$((fails + 1))
		continue
	fi
	gpu_cancel "$fn on the GPU ($ms ms), statement_timeout $((ms * 6 / 10)) ms" \
		"${watch:+SELECT pid FROM gpuclust_progress WHERE algorithm = '$fn' AND device = 'gpu' AND phase IN ('upload', 'index', 'init', 'iterate')}" \
		"SET statement_timeout = $((ms * 6 / 10))" "$call" "statement timeout"
	if [ "$($P -c "SELECT value FROM gpuclust_info() WHERE key = 'gpu_worker'")" = running ]; then
		# the timed-out call's job, abandoned, runs on to its next poll of
		# the cancel flag (the end of a launch): gone before the next call,
		# so that the job seen below is that call's
		t0=$(date +%s%N)
		for k in $(seq 1 300); do
			[ -z "$($P -c "SELECT 1 FROM gpuclust_gpu_jobs WHERE algorithm = '$fn'")" ] && break
			sleep 0.1
		done
		left=$(( ($(date +%s%N) - t0) / 1000000 ))
		if [ -z "$($P -c "SELECT 1 FROM gpuclust_gpu_jobs WHERE algorithm = '$fn'")" ]; then
			echo "ok   $fn: the abandoned job left the worker ${left} ms after its call stopped"
		else
			echo "FAIL $fn: the abandoned job is still on the worker after ${left} ms"; fails=$((fails + 1))
		fi
		gpu_cancel "$fn: a job of the worker (gpuclust_gpu_jobs), cancelled" \
			"SELECT pid FROM gpuclust_gpu_jobs WHERE algorithm = '$fn' AND state = 'running'" \
			"SET statement_timeout = '60s'" "$call" "user request"
	fi
done

echo "== 1M rows, d = 32, k = 100, streamed in chunks: gpuclust.gpu_memory_limit = 100MB"
# the 1M rows need about 300 MB resident; under the limit the GPU k-means
# streams them in chunks on every pass: labels and distances equal the
# unlimited GPU run's bit for bit, and the CPU's labels row for row
for q in "gpu|0" "cpu|"; do
	IFS='|' read -r ref exact <<< "$q"
	r=$($P -c "SET gpuclust.log_timing = on" -c "CREATE TEMP TABLE ref AS
			SELECT * FROM gpu_kmeans('SELECT id, f FROM big', 100, max_iter => 100, seed => 3, device => '$ref')" \
		-c "SET gpuclust.gpu_memory_limit = '100MB'" \
		-c "SELECT (count(*) = 1000000 AND count(*) FILTER (WHERE g.cluster_id IS DISTINCT FROM c.cluster_id) = 0
		           ${exact:+AND max(abs(g.distance - c.distance)) = 0})::text
		|| ' rows ' || count(*) || ', labels differing ' || count(*) FILTER (WHERE g.cluster_id IS DISTINCT FROM c.cluster_id)
		|| ', max |distance diff| ' || max(abs(g.distance - c.distance))
		FROM gpu_kmeans('SELECT id, f FROM big', 100, max_iter => 100, seed => 3, device => 'gpu') g
		JOIN ref c USING (id)" 2>&1)
	res=$(echo "$r" | grep -E '^(true|false)')
	chunks=$(echo "$r" | grep -o 'streamed in [0-9]* chunks of [0-9]* rows, [0-9]* passes, [0-9.]* GB in [0-9.]* ms')
	case "$res" in
		true*) if [ -n "$chunks" ] && ! echo "$chunks" | grep -q '^streamed in 1 chunks'; then
				echo "ok   1M x 32 streamed ($chunks) = $ref:${res#true}"
			else echo "FAIL 1M x 32 streamed = $ref: not streamed in several chunks: $r"; fails=$((fails + 1)); fi;;
		*) echo "FAIL 1M x 32 streamed = $ref: $r"; fails=$((fails + 1));;
	esac
	echo "$r" | grep INFO | sed 's/^/     /'
done
r=$($P -c "SET gpuclust.gpu_memory_limit = '1MB'" -c "SELECT count(*) FROM gpu_kmeans('SELECT id, f FROM big', 100, max_iter => 2, device => 'gpu')" 2>&1)
echo "$r" | grep -q "streaming its rows" && echo "ok   gpu_memory_limit = 1MB: 'gpu' refused: $(echo "$r" | grep -E 'ERROR|DETAIL' | tr '\n' ' ')" \
	|| { echo "FAIL gpu_memory_limit = 1MB: $r"; fails=$((fails + 1)); }
r=$($P -c "SET gpuclust.gpu_memory_limit = '1MB'" -c "SET gpuclust.log_timing = on" -c "SELECT count(*) FROM gpu_kmeans('SELECT id, f FROM big', 100, max_iter => 2)" 2>&1)
echo "$r" | grep -q "device cpu" && echo "ok   gpu_memory_limit = 1MB: 'auto' runs on the CPU" \
	|| { echo "FAIL gpu_memory_limit = 1MB, auto: $r"; fails=$((fails + 1)); }
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
if [ -z "${SQL_SKIP_10M:-}" ]; then
echo "== DBSCAN, 10M rows 2-d (20 blobs + 10% noise), end to end"
$P -c "DROP TABLE IF EXISTS big2" -c "CREATE UNLOGGED TABLE big2 (id bigint, f real[])"
t0=$(date +%s.%N)
for p in $(seq 0 9); do
	# blob i % 20 around a fixed centre, Box-Muller offsets from hashes; 10% uniform
	$P -c "INSERT INTO big2 SELECT i,
	         CASE WHEN u0 < 0.1 THEN ARRAY[100 * u1, 100 * u2]
	              ELSE ARRAY[5 + ((b * 7919) % 90) + sqrt(-2 * ln(u1)) * cos(2 * pi() * u2),
	                         5 + ((b * 104729) % 90) + sqrt(-2 * ln(u1)) * sin(2 * pi() * u2)] END::real[]
	       FROM (SELECT i, i % 20 AS b,
	                    (hashint4(i) + 2147483649.0::float8) / 4294967298.0 AS u0,
	                    (hashint4(i # 1234567) + 2147483649.0::float8) / 4294967298.0 AS u1,
	                    (hashint4(i # 7654321) + 2147483649.0::float8) / 4294967298.0 AS u2
	             FROM generate_series($p * 1000000 + 1, ($p + 1) * 1000000) i) s" &
done
wait
$P -c "VACUUM ANALYZE big2"
echo "table: $($P -c 'SELECT count(*) FROM big2') rows, $(awk "BEGIN{print $(date +%s.%N) - $t0}") s to make"
# eps: 30 neighbours on average inside a blob of 450,000 (sigma 1)
cat > /tmp/timing_db.sql <<'SQL'
\timing on
SET gpuclust.log_timing = on;
SELECT 'gpu (first call in this backend: CUDA initialised here)';
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM big2', 0.0163299, 10, device => 'gpu');
SELECT 'gpu';
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM big2', 0.0163299, 10, device => 'gpu');
SELECT 'auto';
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM big2', 0.0163299, 10);
SELECT 'gpu, algorithm dclust';
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM big2', 0.0163299, 10, device => 'gpu', algorithm => 'dclust');
SELECT 'cpu (16 cores)';
SELECT count(*) FROM gpu_dbscan('SELECT id, f FROM big2', 0.0163299, 10, device => 'cpu');
SELECT 'same labels on the 10M rows (union_find, then dclust, on the GPU)';
CREATE TEMP TABLE big2_cpu AS SELECT * FROM gpu_dbscan('SELECT id, f FROM big2', 0.0163299, 10, device => 'cpu');
SELECT count(*) AS rows, count(*) FILTER (WHERE g.cluster_id IS DISTINCT FROM c.cluster_id
                                          OR g.is_core IS DISTINCT FROM c.is_core) AS differing
FROM gpu_dbscan('SELECT id, f FROM big2', 0.0163299, 10, device => 'gpu') g
JOIN big2_cpu c USING (id);
SELECT count(*) AS rows, count(*) FILTER (WHERE g.cluster_id IS DISTINCT FROM c.cluster_id
                                          OR g.is_core IS DISTINCT FROM c.is_core) AS differing
FROM gpu_dbscan('SELECT id, f FROM big2', 0.0163299, 10, device => 'gpu', algorithm => 'dclust') g
JOIN big2_cpu c USING (id);
SQL
psql -X -At -f /tmp/timing_db.sql 2>&1 | tee "$OUTDIR/sql_timing_dbscan.log"
[ "$(grep -c "^10000000|0$" "$OUTDIR/sql_timing_dbscan.log")" -eq 2 ] || { echo "FAIL 10M rows: labels differ"; fails=$((fails + 1)); }
fi

echo "sql_gpu_test: $fails failed"
exit $fails
