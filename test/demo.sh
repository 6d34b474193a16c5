#!/bin/bash
# The demo: cluster the 135,233 cities of the world (GeoNames, CC BY 4.0) in
# PostgreSQL with gpu_dbscan and gpu_kmeans, print a summary and draw
# test/out/world_clusters.png.
#   test/demo.sh
# Builds and installs first (test/lib/setup.sh, idempotent; GC_SKIP_SETUP=1 skips
# it), starts a throwaway server (test/lib/pg_server.sh) and stops it at the end
# (unless it was already running before).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${GC_SKIP_SETUP:-0}" != 1 ]; then
	test/lib/setup.sh
fi
# Its own throwaway server (not the one the test suite uses), so that other
# runs starting and stopping theirs do not disturb this one.
export GPUCLUST_PG_DIR=${GPUCLUST_PG_DIR:-/tmp/gpuclust_pg_demo}
export GPUCLUST_PG_PORT=${GPUCLUST_PG_PORT:-54359}
if test/lib/pg_server.sh status; then was_running=1; else was_running=0; fi
eval "$(test/lib/pg_server.sh start)"
[ "$was_running" = 1 ] || trap 'test/lib/pg_server.sh stop >/dev/null 2>&1 || true' EXIT
mkdir -p test/out
"${PYTHON:-/usr/bin/python3}" test/demo.py
