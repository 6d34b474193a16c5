#!/usr/bin/env bash
# testing_build.sh — gpuclust built with `make GC_TESTING=1`, the test-only
# switches compiled in (gpuclust.gpu_worker_emulate: the GPU worker runs its
# jobs with the CPU code on a pretend GPU), installed into a private
# PostgreSQL tree (test/lib/pg_tree.sh) and never into the shared install,
# whose product build has no such switch.  Prints the tree's pg_config, for
# PG_CONFIG=... test/lib/pg_server.sh start (test/server/worker_test.py and
# test/server/fault_test.py start their emulated-GPU servers so).
#
#   test/lib/testing_build.sh            build if the sources changed; print
#
# The build runs in a copy of this tree (test/lib/tree_copy.sh: the files
# git tracks and the untracked ones it does not ignore, with this tree's
# CUDA objects, built by the product build and reused as they are, and its
# config.mk).  A second call with the same files that make reads
# (tree_copy.sh --key: the Makefile, config.mk, the control files, src/,
# sql/, cuda/ with its objects), PG_CONFIG and USE_CUDA prints the same
# tree at once; a change under test/ or docs/ keeps it.
#   PG_CONFIG             the PostgreSQL built against (default: pg_config on PATH)
#   GPUCLUST_TESTING_DIR  where the copy and the tree go (default /tmp/gpuclust_testing)
#   USE_CUDA              passed to make, as test/lib/setup.sh passes it
# stdout carries only the path; the build's output goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/../.."
PG_CONFIG=${PG_CONFIG:-pg_config}
DIR=${GPUCLUST_TESTING_DIR:-/tmp/gpuclust_testing}
BUILD=$DIR/build
ROOT=$DIR/root
tree_pg_config=$ROOT$("$PG_CONFIG" --bindir)/pg_config

log() { echo "testing_build: $*" >&2; }

# what the build reads (not test/ nor docs/: editing a test keeps the build)
key=$(echo "$PG_CONFIG ${USE_CUDA:-} $("$PG_CONFIG" --version) $(test/lib/tree_copy.sh --key)" |
	sha1sum | cut -d' ' -f1)
if [ -x "$tree_pg_config" ] && [ "$(cat "$DIR/key" 2>/dev/null)" = "$key" ]; then
	echo "$tree_pg_config"
	exit 0
fi

log "building gpuclust with GC_TESTING=1 in $BUILD"
rm -rf "$DIR"
test/lib/tree_copy.sh "$BUILD"
make_args=(GC_TESTING=1 PG_CONFIG="$PG_CONFIG" ${USE_CUDA:+USE_CUDA=$USE_CUDA})
(cd "$BUILD" && make -s -j"$(nproc)" "${make_args[@]}" >&2) || { log "the build failed"; exit 1; }
test/lib/pg_tree.sh "$ROOT" "$PG_CONFIG"
(cd "$BUILD" && make -s install DESTDIR="$ROOT" "${make_args[@]}" >&2) || { log "make install failed"; exit 1; }
chmod -R a+rX "$DIR"
echo "$key" >"$DIR/key"
echo "$tree_pg_config"
