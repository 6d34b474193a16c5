#!/usr/bin/env bash
# package_test.sh — builds the Debian package of this working tree and checks
# it: dpkg-buildpackage -b in a copy of the tree (the files git tracks plus
# the untracked ones it does not ignore), dpkg -i of postgresql-15-gpuclust,
# then in a throwaway server (test/lib/pg_server.sh, port 54349, nothing
# preloaded) CREATE EXTENSION and one call of each algorithm, gpuclust_info()
# and the package's file list.  On exit, whatever happened, the server is
# removed, the package removed and the gpuclust files that were installed
# before (by make install) put back, so the machine is left as it was.
#
#   test/install/package_test.sh              library as the Makefile detects it
#                                     (CUDA when nvcc is found)
#   USE_CUDA=0 test/install/package_test.sh   CPU-only library
#
# As root, or as a user with sudo (for dpkg).  The build log is kept in
# test/out/package_build.log.  Prints "package: N passed, M failed"; exits 0
# only when every check passed.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD

# the package installs into the system's PostgreSQL 15, whatever PG_CONFIG says
export PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config
export GPUCLUST_PG_DIR=/tmp/gpuclust_pkg GPUCLUST_PG_PORT=54349 GPUCLUST_PG_NOPRELOAD=1
PSQL="$($PG_CONFIG --bindir)/psql"
pkg=postgresql-15-gpuclust
libdir=$($PG_CONFIG --pkglibdir)
extdir=$($PG_CONFIG --sharedir)/extension
sudo_cmd=""; [ "$(id -u)" -eq 0 ] || sudo_cmd=sudo
log=$root/test/out/package_build.log

passed=0 failed=0
ok() { passed=$((passed + 1)); echo "ok   - $1"; }
fail() { failed=$((failed + 1)); echo "FAIL - $1${2:+: $2}"; }
# check NAME EXPECTED ACTUAL
check() { if [ "$2" = "$3" ]; then ok "$1"; else fail "$1" "expected '$2', got '$3'"; fi; }

if dpkg-query -W -f='${Status}' $pkg 2>/dev/null | grep -q 'install ok installed'; then
	echo "package_test: $pkg is installed already; remove it first (dpkg -r $pkg)" >&2
	exit 1
fi

version=$(dpkg-parsechangelog -S Version)
tmp=$(mktemp -d /tmp/gpuclust-pkg.XXXXXX)
src=$tmp/gpuclust-${version%-*}
saved=$tmp/saved
installed=0

cleanup() {
	"$root/test/lib/pg_server.sh" clean >/dev/null 2>&1 && rmdir "$GPUCLUST_PG_DIR" 2>/dev/null || true
	if [ $installed = 1 ]; then
		$sudo_cmd dpkg -r $pkg >/dev/null 2>&1 || echo "package_test: dpkg -r $pkg failed" >&2
		# dpkg -r removed the paths that a make install had written too:
		# put back what was there before the package came.
		$sudo_cmd cp -a "$saved/lib/." "$libdir/" && $sudo_cmd cp -a "$saved/ext/." "$extdir/" || {
			echo "package_test: could not put back the files saved in $saved" >&2
			failed=$((failed + 1)) tmp=""
		}
	fi
	[ -z "$tmp" ] || rm -rf "$tmp"
	echo "package: $passed passed, $failed failed"
	[ $failed -eq 0 ] && [ $passed -gt 0 ] && exit 0
	exit 1
}
trap cleanup EXIT

# ---- build ----
mkdir -p "$saved/lib" "$saved/ext" "$(dirname "$log")"
test/lib/tree_copy.sh --sources "$src"
echo "package_test: dpkg-buildpackage -b in $src (USE_CUDA=${USE_CUDA-auto}), log $log"
start=$SECONDS
# USE_CUDA, when set, reaches the Makefile through the environment
if (cd "$src" && dpkg-buildpackage -us -uc -b) >"$log" 2>&1; then
	ok "dpkg-buildpackage ($((SECONDS - start)) s)"
else
	fail "dpkg-buildpackage ($((SECONDS - start)) s)"
	tail -n 40 "$log"
	exit 1
fi
deb=$(ls "$tmp"/${pkg}_*.deb)

# ---- install ----
cp -a "$libdir"/gpuclust.so "$saved/lib/" 2>/dev/null || true
cp -a "$extdir"/gpuclust.control "$extdir"/gpuclust--*.sql \
	"$extdir"/gpuclust_postgis.control "$extdir"/gpuclust_postgis--*.sql "$saved/ext/" 2>/dev/null || true
installed=1
if $sudo_cmd dpkg -i "$deb" >"$tmp/dpkg.log" 2>&1; then
	ok "dpkg -i $(basename "$deb")"
else
	fail "dpkg -i $(basename "$deb")"
	cat "$tmp/dpkg.log"
	exit 1
fi

files=$(dpkg -L $pkg)
for f in "$libdir/gpuclust.so" "$extdir/gpuclust.control" "$extdir/gpuclust--0.1.sql" \
	"$extdir/gpuclust--0.1--0.2.sql" "$extdir/gpuclust_postgis.control" \
	"$extdir/gpuclust_postgis--0.1.sql" "$extdir/gpuclust_postgis--0.1--0.2.sql"; do
	if grep -qxF "$f" <<<"$files"; then ok "package holds $f"; else fail "package holds $f"; fi
done

# ---- a server with the package's library ----
if env_line=$("$root/test/lib/pg_server.sh" start); then
	eval "$env_line"
	ok "server started (port $GPUCLUST_PG_PORT, nothing preloaded)"
else
	fail "server started"
	exit 1
fi
q() { "$PSQL" -X -q -A -t -v ON_ERROR_STOP=1 -c "$1" 2>&1 || true; }

check "CREATE EXTENSION gpuclust" "0.2" "$(q "CREATE EXTENSION gpuclust;
	SELECT extversion FROM pg_extension WHERE extname = 'gpuclust'")"

# three blobs of 10 points each, centred at (0,0), (10,10) and (20,20)
q "CREATE TABLE pts AS SELECT g::bigint AS id,
	ARRAY[(g % 3) * 10 + (g % 5) * 0.1, (g % 3) * 10 + (g % 7) * 0.1]::real[] AS f
	FROM generate_series(1, 30) g" >/dev/null
# rows, clusters, and whether every cluster is one blob (id % 3)
agree="count(*) || ' ' || count(DISTINCT cluster_id) || ' ' || count(DISTINCT (id % 3, cluster_id))"

check "gpu_kmeans: 30 rows, 3 clusters, the blobs" "30 3 3" \
	"$(q "SELECT $agree FROM gpu_kmeans('SELECT id, f FROM pts', 3)")"
check "gpu_dbscan: 30 rows, 3 clusters, the blobs, no noise" "30 3 3 0" \
	"$(q "SELECT $agree || ' ' || count(*) FILTER (WHERE cluster_id IS NULL)
	      FROM gpu_dbscan('SELECT id, f FROM pts', 1.0, 3)")"
check "gpu_affinity_propagation: 30 rows, each cluster within a blob" "30 true" \
	"$(q "SELECT count(*) || ' ' || (count(DISTINCT (id % 3, cluster_id)) = count(DISTINCT cluster_id))
	      FROM gpu_affinity_propagation('SELECT id, f FROM pts')")"
check "gpu_kmeans_fit: n 30, d 2, 3 x 2 centroids, converged" "30|2|3|2|t" \
	"$(q "SELECT n, d, array_length(centroids, 1), array_length(centroids, 2), converged
	      FROM gpu_kmeans_fit('SELECT id, f FROM pts', 3)")"

# The library is the one the build made: CUDA objects compiled or not.
cuda=false
grep -q -- '-c cuda/.*\.cu' "$log" && cuda=true
check "gpuclust_info(): cuda_build" "$cuda" \
	"$(q "SELECT value FROM gpuclust_info() WHERE key = 'cuda_build'")"
