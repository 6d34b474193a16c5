# big_table.sh — sourced by sql_gpu_test.sh and sql_kmeans_timing.sh: the
# one definition of their 1M-row x 32 table "big" (16 parallel inserts).
# make_big_table: (re)creates it through $P (psql -At ...), prints its size
# and how long it took.
make_big_table() {
	local t0 p
	t0=$(date +%s.%N)
	$P -c "DROP TABLE IF EXISTS big" -c "CREATE UNLOGGED TABLE big (id bigint, f real[])" || return 1
	for p in $(seq 0 15); do
		$P -c "INSERT INTO big SELECT i, ARRAY(SELECT ((((i % 400) * 7919 + j * 104729) % 2000) / 100.0
		                     + (hashint4(i * 100 + j) % 1000) / 1000.0)::real FROM generate_series(1, 32) j)
		       FROM generate_series($p * 62500 + 1, ($p + 1) * 62500) i" &
	done
	wait
	$P -c "VACUUM ANALYZE big" || return 1
	echo "table big: $($P -c 'SELECT count(*) FROM big') rows x 32, made in $(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $t0}") s"
}
