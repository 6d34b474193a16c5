#!/bin/bash
# sql_kmeans_timing.sh — the end-to-end SQL time of gpu_kmeans on 1M rows x
# 32, k = 100 (issue 13), split into ingest, upload, init, Lloyd, download
# and emit: gpuclust.log_timing's INFO line of 3 calls with device 'gpu'
# and one with 'cpu', in one session, as a table.  Against a running server
# (psql on PATH, PGHOST etc. set), e.g. run_gpu_tests.sh's sql-bench stage:
#   eval "$(bash .carry/pg-bundle start .carry)"; test/gpu/sql_kmeans_timing.sh
# The table is sql_gpu_test.sh's "big" (same rows), made here when it is not
# there.  max_iter 100, seed 3, default tol and init (k-means++).
# Output: stdout and $OUT/sql_kmeans_timing.{log,md}.  Exit status 0 when
# all four calls logged a line.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUTDIR=${OUT:-test/out}
mkdir -p "$OUTDIR"
P="psql -X -q -v ON_ERROR_STOP=1 -At"
. test/gpu/big_table.sh

$P -c 'CREATE EXTENSION IF NOT EXISTS gpuclust' || exit 1
rows=$($P -c "SELECT count(*) FROM big" 2>/dev/null)
if [ "$rows" != 1000000 ]; then
	make_big_table || exit 1
fi
call="SELECT count(*) FROM gpu_kmeans('SELECT id, f FROM big', 100, max_iter => 100, seed => 3, device => '%s');"
{
	echo '\timing on'
	echo 'SET gpuclust.log_timing = on;'
	for dev in gpu gpu gpu cpu; do
		echo "SELECT 'run $dev';"
		printf "$call\n" "$dev"
	done
} > /tmp/sql_kmeans_timing.sql
psql -X -At -f /tmp/sql_kmeans_timing.sql > "$OUTDIR/sql_kmeans_timing.log" 2> "$OUTDIR/sql_kmeans_timing.err"
echo "== gpu_kmeans end to end in SQL: 1M rows x 32, k = 100 (gpuclust.log_timing; ms)"
threads=$($P -c "SELECT value FROM gpuclust_info() WHERE key = 'cpu_threads'" 2>/dev/null)
preload=$($P -c "SHOW shared_preload_libraries" 2>/dev/null)
# stdout (.log): "run gpu", the count, "Time: 453.123 ms" per call;
# stderr (.err), one per call, in order:
# psql:...: INFO:  gpu_kmeans: device gpu, n 1000000, d 32, k 100, iterations 47; ingest 152.3 ms,
#        compute 163.0 ms (upload 15.5, init 88.8, lloyd 52.0, download 5.3), emit 75.0 ms
awk -v threads="${threads:-?}" -v preload="$preload" '
	function num(s, key) { return match(s, key " [0-9.]+") ? substr(s, RSTART + length(key) + 1, RLENGTH - length(key) - 1) : "" }
	FNR == NR {		# stdout
		if (/^run /) { ncall[$2]++; label[++nl] = $2 " " ncall[$2]; dev[nl] = $2; counted = 0 }
		else if (/^[0-9]+$/ && nl > 0) counted = 1
		else if (/^Time: / && counted) { total[nl] = $2; counted = 0 }
		next
	}
	/ERROR|FATAL/ { err[++ne] = $0; next }
	/gpu_kmeans: device/ { info[++ni] = $0 }
	END {
		print "| call | device | iterations | ingest | upload | init | Lloyd | download | compute | of which outside the phases | emit | total (psql) |"
		print "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
		for (i = 1; i <= ni; i++) {
			s = info[i]
			match(s, /device [a-z]+/); d = substr(s, RSTART + 7, RLENGTH - 7)
			it = num(s, "iterations"); ing = num(s, "ingest"); cmp = num(s, "compute"); em = num(s, "emit")
			up = num(s, "upload"); ini = num(s, "init"); ll = num(s, "lloyd"); dn = num(s, "download")
			rest = up != "" ? sprintf("%.1f", cmp - up - ini - ll - dn) : ""
			if (d == "cpu") d = "cpu (" threads " threads)"
			print "| " label[i] (label[i] == "gpu 1" ? " (first GPU call of the session)" : "") " | " d " | " it " | " ing " | " up " | " ini " | " ll " | " dn " | " cmp " | " rest " | " em " | " total[i] " |"
		}
		for (i = 1; i <= ne; i++) print err[i]
		print ""
		print "(shared_preload_libraries = \x27" preload "\x27: " (preload ~ /gpuclust/ ? "GPU calls go through the GPU worker; \"outside the phases\" is its hand-off" : "each backend its own CUDA context; the first GPU call pays its start-up") ")"
		if (ni != 4 || ne > 0) { print "sql_kmeans_timing: " ni + 0 " of 4 calls logged, " ne + 0 " errors"; exit 1 }
	}' "$OUTDIR/sql_kmeans_timing.log" "$OUTDIR/sql_kmeans_timing.err" | tee "$OUTDIR/sql_kmeans_timing.md"
exit "${PIPESTATUS[0]}"
