#!/bin/bash
# The test command (CI runs it): sets up, runs every suite, ends with one
# line "N passed, N failed" counting suites.  test/README.md says what each
# suite checks and how to run it alone.
#
# In order:
#   1. test/lib/setup.sh: the Debian packages, then build and install
#   2. the include layering (test/install/check_includes.sh); the core's
#      unit tests, plain and under ASan/UBSan
#   3. PostgreSQL 15, preloaded and not (test/install/pg_matrix.sh)
#   4. the testing build (make GC_TESTING=1, test/lib/testing_build.sh),
#      for the emulated GPUs of test/server/worker_test.py, gpus_test.py
#      and fault_test.py
#   5. the suites of test/server and test/distributed against one
#      preloaded server (test/lib/pg_server.sh)
#   6. PostgreSQL 18, preloaded and not; every glue file compiled against
#      PostgreSQL 17's headers (test/install/pg_versions.sh)
#   7. the Debian package (test/install/package_test.sh), last
# Before the last line, each release's own summary: "PostgreSQL 18
# not-preloaded: N passed, N failed", "PostgreSQL 17: compiles".
#
# Environment:
#   PG_CONFIG  the PostgreSQL 15 to test (default: pg_config on PATH)
#   PYTHON     the Python of the suites (default: /usr/bin/python3, Debian's,
#              where setup.sh installs python3-sklearn and python3-psycopg;
#              a python3 earlier on PATH may lack them)
#   USE_CUDA   passed to make (0: a CPU-only build)
set -uo pipefail
cd "$(dirname "$0")/.."
export PG_CONFIG=${PG_CONFIG:-pg_config} PYTHON=${PYTHON:-/usr/bin/python3}

test/lib/setup.sh || { echo "setup failed"; echo "0 passed, 1 failed"; exit 1; }

passed=0; failed=0; failures=()
suite() {
	local name=$1; shift
	echo "=== $name"
	if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); failures+=("$name"); fi
}

# the #include lines by layer and folder (a parse of the sources in Python,
# under a second: cheap, so first)
suite "include layering" test/install/check_includes.sh
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

# The testing build, once: the suites that emulate a GPU start their
# second server from its tree.  Where it fails, they fail at once
# (GPUCLUST_TESTING_BUILD_FAILED: test/lib/emulated_gpu.py) rather than
# build it again.
testing_build() {
	if GPUCLUST_TESTING_PG_CONFIG=$(test/lib/testing_build.sh); then
		export GPUCLUST_TESTING_PG_CONFIG
	else
		unset GPUCLUST_TESTING_PG_CONFIG
		export GPUCLUST_TESTING_BUILD_FAILED=1
		return 1
	fi
}
suite "testing build (GC_TESTING)" testing_build

# a fresh cluster each run: no extension left from an older build
test/lib/pg_server.sh clean >/dev/null 2>&1 || true
if eval "$(test/lib/pg_server.sh start)"; then
	trap 'test/lib/pg_server.sh stop >/dev/null 2>&1' EXIT
	suite "pg_cancel_backend" "$PYTHON" test/server/cancel_test.py
	suite "runaway arguments and vanished clients" "$PYTHON" test/server/fault_test.py
	suite "CPU threads under load" "$PYTHON" test/server/load_test.py
	suite "scikit-learn comparison (affinity propagation)" "$PYTHON" test/server/compare_sklearn_ap.py
	suite "k-means aggregate under parallel query" "$PYTHON" test/distributed/kmeans_distributed_test.py
	suite "DBSCAN over partitions under parallel query" "$PYTHON" test/distributed/dbscan_distributed_test.py
	suite "k-means and DBSCAN over Citus" "$PYTHON" test/distributed/citus_test.py
	suite "pg_cron job" "$PYTHON" test/server/cron_test.py
	suite "gpuclust_progress" "$PYTHON" test/server/progress_test.py
	suite "GPU worker" "$PYTHON" test/server/worker_test.py
	suite "GPU worker of several GPUs" "$PYTHON" test/server/gpus_test.py
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
