#!/usr/bin/env bash
# pg_matrix.sh MAJOR MODE — gpuclust on one PostgreSQL release, loaded one
# way: pg_regress, the scikit-learn comparison, the upgrade test and the
# install test (test/install/upgrade_test.py, test/install/install_test.py) against a
# throwaway server of that release.
#
#   MAJOR  15 (that of PG_CONFIG, default pg_config on PATH, as
#          test/lib/setup.sh installed it) or 18 (built
#          from Debian's source by test/install/pg_versions.sh and cached; a copy
#          of that build under /tmp runs the server, and the extension is
#          built for it in a copy of this tree and installed there, once
#          for both modes while the sources stay the same)
#   MODE   preloaded (shared_preload_libraries = 'gpuclust': the GPU
#          worker) or not-preloaded (as right after installing: CREATE
#          EXTENSION loads the library in each backend)
#
# Ends with one line "PostgreSQL MAJOR MODE: N passed, M failed", counting
# pg_regress's tests and the other suites' checks;
# exit 0 only when none failed.  USE_CUDA is passed to make as test/lib/setup.sh
# passes it; PYTHON runs the suites (default /usr/bin/python3).
set -uo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD
PYTHON=${PYTHON:-/usr/bin/python3}
MAJOR=${1:?usage: $0 MAJOR preloaded|not-preloaded}
MODE=${2:?usage: $0 MAJOR preloaded|not-preloaded}
case $MODE in
	preloaded) NOPRELOAD=0 ;;
	not-preloaded) NOPRELOAD=1 ;;
	*) echo "pg_matrix: MODE is preloaded or not-preloaded" >&2; exit 2 ;;
esac

passed=0; failed=0
summary() {
	echo "PostgreSQL $MAJOR $MODE: $passed passed, $failed failed"
	[ "$failed" -eq 0 ]
}
broken() { echo "pg_matrix: $*" >&2; failed=$((failed + 1)); summary; exit 1; }

# The extension built and installed for this release.
if [ "$MAJOR" = 15 ]; then
	export PG_CONFIG=${PG_CONFIG:-pg_config}
	BUILD=$REPO
else
	cached=$(test/install/pg_versions.sh pg_config "$MAJOR") || broken "no PostgreSQL $MAJOR"
	# The server runs from a copy under /tmp: the cache may sit in a home
	# that the postgres user cannot enter, and stays as built.  PostgreSQL
	# finds its files relative to its binaries, so a copy runs as it is.
	PG_ROOT=/tmp/gpuclust_pgsql_$MAJOR
	export PG_CONFIG=$PG_ROOT/bin/pg_config
	# gpuclust built in a copy of the sources (no objects of another
	# release) with this tree's CUDA objects, which do not depend on
	# PostgreSQL, and installed into that copy of PostgreSQL.  Both copies
	# are made once for the two modes, and again only when the key changes:
	# the cached release, USE_CUDA, and what the build and make installcheck
	# read (tree_copy.sh --key expected).  The key is written last, so a
	# build that failed is made again.
	BUILD=/tmp/gpuclust_build_$MAJOR
	key=$(echo "$cached $(stat -c %Y "$cached") ${USE_CUDA:-} $(test/lib/tree_copy.sh --key expected)" |
		sha1sum | cut -d' ' -f1)
	if [ "$(cat "$PG_ROOT/gpuclust.key" 2>/dev/null)" = "$key" ] && [ -f "$BUILD/gpuclust.so" ]; then
		echo "pg_matrix: gpuclust as built for PostgreSQL $MAJOR before (same key)"
	else
		rm -rf "$PG_ROOT"
		cp -a "$(dirname "$(dirname "$cached")")" "$PG_ROOT"
		test/lib/tree_copy.sh "$BUILD" || broken "copying the tree to $BUILD failed"
		(cd "$BUILD" && make -s -j"$(nproc)" ${USE_CUDA:+USE_CUDA=$USE_CUDA} >/dev/null &&
			make -s install ${USE_CUDA:+USE_CUDA=$USE_CUDA} >/dev/null) ||
			broken "building gpuclust for PostgreSQL $MAJOR failed"
		echo "$key" >"$PG_ROOT/gpuclust.key"
	fi
fi
echo "pg_matrix: $($PG_CONFIG --version), gpuclust from $BUILD, $MODE"

# Its server.
export GPUCLUST_PG_DIR=/tmp/gpuclust_pg_${MAJOR}_$MODE
export GPUCLUST_PG_PORT=$((54330 + MAJOR * 2 + NOPRELOAD))
export GPUCLUST_PG_NOPRELOAD=$NOPRELOAD
test/lib/pg_server.sh clean >/dev/null 2>&1 || true
env_line=$(test/lib/pg_server.sh start) || broken "could not start PostgreSQL $MAJOR"
eval "$env_line"
trap 'test/lib/pg_server.sh clean >/dev/null 2>&1' EXIT

# pg_regress: its tests, passed and failed.
out=$(cd "$BUILD" && make -s installcheck ${USE_CUDA:+USE_CUDA=$USE_CUDA} 2>&1)
echo "$out" | grep -E '^(ok|not ok) |^test .*\.\.\. ' || true
r_total=$(echo "$out" | grep -cE '^(ok|not ok) |^test .*\.\.\. +(ok|FAILED|failed)')
r_failed=$(echo "$out" | grep -cE '^not ok |\.\.\. +(FAILED|failed)')
if [ "$r_total" -eq 0 ] || [ "$r_failed" -gt 0 ]; then
	echo "$out" | tail -n 5
	head -n 200 "$BUILD/test/regress_out/regression.diffs" 2>/dev/null
	[ "$r_total" -eq 0 ] && r_failed=1
fi
passed=$((passed + r_total - r_failed)); failed=$((failed + r_failed))

# A Python suite that ends with "N passed, M failed".
count() {
	local out last
	out=$("$@" 2>&1)
	echo "$out"
	last=$(echo "$out" | grep -E '[0-9]+ passed, [0-9]+ failed' | tail -n 1)
	if [ -z "$last" ]; then
		failed=$((failed + 1))
		return
	fi
	passed=$((passed + $(echo "$last" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+')))
	failed=$((failed + $(echo "$last" | grep -oE '[0-9]+ failed' | grep -oE '[0-9]+')))
}
count "$PYTHON" test/server/compare_sklearn.py
count "$PYTHON" test/install/upgrade_test.py
count "$PYTHON" test/install/install_test.py "$MODE"
count "$PYTHON" test/server/search_path_test.py
count "$PYTHON" test/server/faults_small_test.py

summary
