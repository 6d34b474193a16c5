#!/bin/bash
# Benchmarks (not a test): gpuclust against PostGIS and scikit-learn on this
# machine, side by side; prints tables and ratios, and writes them also to
# test/out/bench.txt.  One command, a few minutes:
#   test/bench/run.sh
# Set GC_SKIP_SETUP=1 to skip test/lib/setup.sh (build + install) when it has run.
set -euo pipefail
cd "$(dirname "$0")/../.."

if [ "${GC_SKIP_SETUP:-0}" != 1 ]; then
	test/lib/setup.sh
fi
make -s cli ${USE_CUDA:+USE_CUDA=$USE_CUDA}

mkdir -p test/out
# Stops the server at the end unless it was running before.
# Its own throwaway server (not the one the test suite uses), so that other
# runs starting and stopping theirs do not disturb this one.
export GPUCLUST_PG_DIR=${GPUCLUST_PG_DIR:-/tmp/gpuclust_pg_bench}
export GPUCLUST_PG_PORT=${GPUCLUST_PG_PORT:-54349}
if test/lib/pg_server.sh status; then was_running=1; else was_running=0; fi
eval "$(test/lib/pg_server.sh start)"
[ "$was_running" = 1 ] || trap 'test/lib/pg_server.sh stop >/dev/null 2>&1 || true' EXIT

"${PYTHON:-/usr/bin/python3}" test/bench/bench.py 2>&1 | tee test/out/bench.txt
exit "${PIPESTATUS[0]}"
