#!/bin/bash
# The test command: sets up (test/lib/setup.sh), then runs every test suite and
# ends with one line "N passed, N failed" counting suites:
#   - the core's unit tests, plain and under ASan/UBSan;
#   - on PostgreSQL 15, preloaded and not (test/install/pg_matrix.sh: pg_regress,
#     the scikit-learn comparison, ALTER EXTENSION UPDATE from 0.1 with
#     objects built on it, every way of loading the library with a call of
#     every public function);
#   - against one preloaded server: pg_cancel_backend from a second session,
#     every loop-bounding argument at its extremes and clients killed
#     mid-call (test/server/fault_test.py), clustering beside busy loops (test/server/load_test.py), the affinity
#     propagation comparison, the k-means aggregate and DBSCAN over
#     partitions under parallel query against the single-node runs, k-means
#     and DBSCAN over a 3-node Citus cluster on localhost (test/distributed/citus_test.py:
#     builds Citus once from ../shared/vendor into ~/.cache, says "skipped:
#     no Citus" where there is none), a pg_cron job, the progress view read
#     from a second session, the GPU worker's hand-off, queue, cancellation
#     and failures (test/server/worker_test.py);
#   - PostgreSQL 18 (built once from Debian's source into ~/.cache by
#     test/install/pg_versions.sh), preloaded and not, as 15 above; every glue file
#     compiled against PostgreSQL 17's headers;
#   - the Debian package built, installed with dpkg -i and used
#     (test/install/package_test.sh).
# The releases' results are repeated together before the last line:
# "PostgreSQL 18 not-preloaded: N passed, N failed", "PostgreSQL 17: compiles".
set -uo pipefail
cd "$(dirname "$0")/.."

test/lib/setup.sh || { echo "setup failed"; echo "0 passed, 1 failed"; exit 1; }

passed=0; failed=0; failures=()
suite() {
	local name=$1; shift
	echo "=== $name"
	if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); failures+=("$name"); fi
}

suite "core unit tests" make -s unit ${USE_CUDA:+USE_CUDA=$USE_CUDA}
suite "core unit tests under ASan/UBSan" make -s unit-sanitize

# One PostgreSQL release, loaded one way; its summary line is kept.
releases=()
release() {
	local out
	out=$(mktemp)
	suite "PostgreSQL $1 $2" bash -c 'test/install/pg_matrix.sh "$1" "$2" | tee "$3"; exit "${PIPESTATUS[0]}"' \
		_ "$1" "$2" "$out"
	releases+=("$(grep -E "^PostgreSQL $1 $2: " "$out" | tail -n 1)")
	[ -n "${releases[-1]}" ] || releases[-1]="PostgreSQL $1 $2: did not finish"
	rm -f "$out"
}
release 15 preloaded
release 15 not-preloaded

# a fresh cluster each run: no extension left from an older build
test/lib/pg_server.sh clean >/dev/null 2>&1 || true
if eval "$(test/lib/pg_server.sh start)"; then
	trap 'test/lib/pg_server.sh stop >/dev/null 2>&1' EXIT
	suite "pg_cancel_backend" /usr/bin/python3 test/server/cancel_test.py
	suite "runaway arguments and vanished clients" /usr/bin/python3 test/server/fault_test.py
	suite "CPU threads under load" /usr/bin/python3 test/server/load_test.py
	suite "scikit-learn comparison (affinity propagation)" /usr/bin/python3 test/server/compare_sklearn_ap.py
	suite "k-means aggregate under parallel query" /usr/bin/python3 test/distributed/kmeans_distributed_test.py
	suite "DBSCAN over partitions under parallel query" /usr/bin/python3 test/distributed/dbscan_distributed_test.py
	suite "k-means and DBSCAN over Citus" /usr/bin/python3 test/distributed/citus_test.py
	suite "pg_cron job" /usr/bin/python3 test/server/cron_test.py
	suite "gpuclust_progress" /usr/bin/python3 test/server/progress_test.py
	suite "GPU worker" /usr/bin/python3 test/server/worker_test.py
	test/lib/pg_server.sh stop >/dev/null 2>&1
else
	echo "could not start PostgreSQL"
	failed=$((failed + 1)); failures+=("PostgreSQL 15 server")
fi

release 18 preloaded
release 18 not-preloaded
if suite "PostgreSQL 17: compiles" test/install/pg_versions.sh compile 17; then
	releases+=("PostgreSQL 17: compiles")
else
	releases+=("PostgreSQL 17: does not compile")
fi

# last: it puts the package's files where make install put the tree's
# (and puts those back after)
suite "Debian package" test/install/package_test.sh

echo
printf '%s\n' "${releases[@]}"
[ ${#failures[@]} -eq 0 ] || echo "failed suites: ${failures[*]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
