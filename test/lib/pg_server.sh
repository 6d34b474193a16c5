#!/usr/bin/env bash
# pg_server.sh — a throwaway PostgreSQL server for gpuclust's tests and demos.
#
#   test/lib/pg_server.sh start    initdb (first time) and start; prints the env
#   test/lib/pg_server.sh stop     stop (data is kept for the next start)
#   test/lib/pg_server.sh status   exit 0 when running
#   test/lib/pg_server.sh env      print the env lines only
#   test/lib/pg_server.sh clean    stop and remove the data directory
#
# Usage:  eval "$(test/lib/pg_server.sh start)" && make installcheck
#
# stdout carries only the `export ...` line; everything else goes to stderr.
# Idempotent: start on a running server, or stop on a stopped one, succeeds.
# As root the server runs as the `postgres` user (initdb refuses root).
# Everything lives under GPUCLUST_PG_DIR (default /tmp/gpuclust_pg); the
# server listens only on a Unix socket in that directory, port
# GPUCLUST_PG_PORT (default 54329).  PG_CONFIG picks the PostgreSQL
# installation (default: pg_config on PATH).  GPUCLUST_PG_OPTS adds server
# options (test/lib/emulated_gpu.py: "-c gpuclust.gpu_worker_emulate=512MB",
# with PG_CONFIG the tree of test/lib/testing_build.sh, whose testing build
# alone has that setting);
# GPUCLUST_PG_PRELOAD names libraries preloaded before the others
# (test/distributed/citus_cluster.sh: citus, which must come first);
# GPUCLUST_PG_NOPRELOAD=1 preloads nothing at all, as a server that the
# extension was just installed into (the setting is read at every start).
set -euo pipefail

BASE=${GPUCLUST_PG_DIR:-/tmp/gpuclust_pg}
PORT=${GPUCLUST_PG_PORT:-54329}
PG_CONFIG=${PG_CONFIG:-pg_config}
BINDIR=$("$PG_CONFIG" --bindir)
DATA=$BASE/data
SOCK=$BASE/socket
LOG=$BASE/server.log

log() { echo "pg_server: $*" >&2; }

if [ "$(id -u)" -eq 0 ]; then
	RUNAS=postgres
	if ! id "$RUNAS" >/dev/null 2>&1; then
		log "creating system user $RUNAS"
		useradd --system --home-dir "$BASE" --shell /bin/bash "$RUNAS"
	fi
	as_owner() { runuser -u "$RUNAS" -- "$@"; }
	SUPERUSER=postgres
else
	RUNAS=$(id -un)
	as_owner() { "$@"; }
	SUPERUSER=$RUNAS
fi

print_env() {
	echo "export PGHOST=$SOCK PGPORT=$PORT PGUSER=$SUPERUSER PGDATABASE=postgres"
}

running() {
	[ -f "$DATA/PG_VERSION" ] && as_owner "$BINDIR/pg_ctl" -D "$DATA" status >/dev/null 2>&1
}

start() {
	if running; then
		log "already running ($DATA, port $PORT)"
		print_env
		return 0
	fi
	mkdir -p "$BASE" "$SOCK"
	[ "$(id -u)" -eq 0 ] && chown "$RUNAS" "$BASE" "$SOCK"
	chmod 700 "$BASE" "$SOCK"
	if [ ! -f "$DATA/PG_VERSION" ]; then
		log "initdb $DATA"
		rm -rf "$DATA"
		as_owner "$BINDIR/initdb" -D "$DATA" -U "$SUPERUSER" --auth=trust \
			--encoding=UTF8 --locale=C.UTF-8 >"$BASE/initdb.log" 2>&1 || {
			cat "$BASE/initdb.log" >&2
			exit 1
		}
	fi
	# A server killed without stop leaves a stale postmaster.pid behind;
	# pg_ctl start copes with it when the pid is not alive.
	# Preloaded, when installed: gpuclust (its gpuclust_progress view needs
	# shared memory: test/server/progress_test.py) and pg_cron (test/server/cron_test.py;
	# jobs run in background workers, the server has no TCP listener, in
	# database postgres).
	local libdir preload=${GPUCLUST_PG_PRELOAD:-} cron=""
	libdir=$("$PG_CONFIG" --pkglibdir)
	if [ "${GPUCLUST_PG_NOPRELOAD:-0}" != 1 ]; then
		[ -f "$libdir/gpuclust.so" ] && preload=${preload:+$preload,}gpuclust
		[ -f "$libdir/pg_cron.so" ] && {
			preload=${preload:+$preload,}pg_cron
			cron="-c cron.database_name=postgres -c cron.use_background_workers=on"
		}
		[ -n "$preload" ] && cron="-c shared_preload_libraries=$preload $cron"
	fi
	log "starting on $SOCK port $PORT"
	# The server gets no descriptor but 0-2: one inherited from the caller,
	# such as the lock of `flock /tmp/gpuclust-pg.lock test/run_tests.sh`,
	# would stay open in the server (and every process it forks) until it
	# stops, and keep the lock from everyone else.
	(
		for fd in /proc/self/fd/*; do
			fd=${fd##*/}
			[ "$fd" -gt 2 ] 2>/dev/null && eval "exec $fd>&-" 2>/dev/null
		done
		as_owner "$BINDIR/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 \
			-o "-p $PORT -k $SOCK -c listen_addresses='' -c fsync=off -c full_page_writes=off -c synchronous_commit=off -c max_connections=30 $cron ${GPUCLUST_PG_OPTS:-}" \
			start >&2
	) || {
		tail -n 30 "$LOG" >&2 || true
		exit 1
	}
	print_env
}

stop() {
	if running; then
		log "stopping"
		as_owner "$BINDIR/pg_ctl" -D "$DATA" -m fast -w stop >&2
	else
		log "not running"
	fi
}

case "${1:-}" in
	start) start ;;
	stop) stop ;;
	status) running ;;
	env) print_env ;;
	clean) stop; rm -rf "$DATA" "$SOCK" "$LOG" "$BASE/initdb.log" ;;
	*)
		echo "usage: $0 start|stop|status|env|clean" >&2
		exit 2
		;;
esac
