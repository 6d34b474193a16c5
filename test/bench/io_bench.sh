#!/bin/bash
# Ingest and emit cost against plain PostgreSQL (issue 11, item 6): starts
# its own throwaway server (not the test suite's), runs io_bench.py against
# the installed extension, stops the server.  Install first (make install).
#   test/bench/io_bench.sh [io_bench.py options]
# The tables (1M rows of 32-d and of 2-d real[]) stay in the server's data
# directory between runs; test/lib/pg_server.sh clean (with the same
# GPUCLUST_PG_DIR) removes them.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PG_CONFIG=${PG_CONFIG:-pg_config}
export GPUCLUST_PG_DIR=${GPUCLUST_PG_DIR:-/tmp/gpuclust_pg_iobench}
export GPUCLUST_PG_PORT=${GPUCLUST_PG_PORT:-54369}
eval "$(test/lib/pg_server.sh start)"
trap 'test/lib/pg_server.sh stop >/dev/null 2>&1 || true' EXIT
mkdir -p test/out
"${PYTHON:-/usr/bin/python3}" test/bench/io_bench.py "$@" 2>&1 | tee test/out/io_bench.txt
exit "${PIPESTATUS[0]}"
