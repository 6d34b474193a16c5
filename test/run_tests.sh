#!/bin/bash
# The test command: sets up (test/setup.sh), then runs every test suite —
# the core's unit tests (plain, then under ASan/UBSan), pg_regress against a
# throwaway server, pg_cancel_backend from a second session, clustering
# beside busy loops (test/load_test.py), the comparisons
# with scikit-learn on real data (DBSCAN, k-means, affinity propagation), the
# k-means aggregate under parallel query against the single-node k-means
# (test/kmeans_distributed_test.py), DBSCAN over partitions under parallel
# query against the single-node DBSCAN (test/dbscan_distributed_test.py),
# the k-means aggregate over a 3-node Citus cluster
# on localhost (test/citus_test.py: builds Citus once from ../shared/vendor
# into ~/.cache, says "skipped: no Citus" where there is none), and
# a pg_cron job in that server (test/cron_test.py), the progress view read
# from a second session (test/progress_test.py), the GPU worker's hand-off,
# queue, cancellation and failures (test/worker_test.py) — and ends with one line
# "N passed, N failed" counting suites.
set -uo pipefail
cd "$(dirname "$0")/.."

test/setup.sh || { echo "setup failed"; echo "0 passed, 1 failed"; exit 1; }

passed=0; failed=0; failures=()
suite() {
	local name=$1; shift
	echo "=== $name"
	if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); failures+=("$name"); fi
}

suite "core unit tests" make -s unit ${USE_CUDA:+USE_CUDA=$USE_CUDA}
suite "core unit tests under ASan/UBSan" make -s unit-sanitize

# a fresh cluster each run: no extension left from an older build
test/pg_server.sh clean >/dev/null 2>&1 || true
eval "$(test/pg_server.sh start)" || { echo "could not start PostgreSQL"; echo "$passed passed, $((failed + 1)) failed"; exit 1; }
trap 'test/pg_server.sh stop >/dev/null 2>&1' EXIT

regress() {
	make -s installcheck PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config || {
		cat test/regress_out/regression.diffs 2>/dev/null | head -200; return 1; }
}
suite "pg_regress" regress
suite "pg_cancel_backend" /usr/bin/python3 test/cancel_test.py
suite "CPU threads under load" /usr/bin/python3 test/load_test.py
suite "scikit-learn comparison" /usr/bin/python3 test/compare_sklearn.py
suite "scikit-learn comparison (affinity propagation)" /usr/bin/python3 test/compare_sklearn_ap.py
suite "k-means aggregate under parallel query" /usr/bin/python3 test/kmeans_distributed_test.py
suite "DBSCAN over partitions under parallel query" /usr/bin/python3 test/dbscan_distributed_test.py
suite "k-means and DBSCAN over Citus" /usr/bin/python3 test/citus_test.py
suite "pg_cron job" /usr/bin/python3 test/cron_test.py
suite "gpuclust_progress" /usr/bin/python3 test/progress_test.py
suite "GPU worker" /usr/bin/python3 test/worker_test.py

echo
[ ${#failures[@]} -eq 0 ] || echo "failed suites: ${failures[*]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
