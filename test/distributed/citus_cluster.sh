#!/usr/bin/env bash
# citus_cluster.sh — a Citus cluster on localhost for gpuclust's tests and
# benchmarks: a coordinator and two workers, each a test/lib/pg_server.sh server.
#
#   test/distributed/citus_cluster.sh COMMAND, where COMMAND is
#     find     how Citus is had: "installed", "cached", "source TARBALL";
#              exit 3 when none is
#     build    the cached build (builds it once); prints its dir
#     start    a private PostgreSQL tree with Citus and this checkout's
#              gpuclust, the 3 nodes started and joined; prints the env
#              (coordinator's libpq variables, GPUCLUST_CITUS_PORTS,
#              ..._PG_CONFIG)
#     stop     stop the nodes (data kept)
#     clean    stop and remove the nodes and the tree
#     node-stop I | node-start I    one node (0 = coordinator)
#
# Citus comes from, in this order: a Citus installed in the PostgreSQL of
# PG_CONFIG (used as it is: gpuclust must be installed there too, as
# test/lib/setup.sh does); the cached build; the vendored source
# citus-*.tar.gz, looked for in $GPUCLUST_VENDOR when it is set, else in
# ../shared/vendor beside this checkout and beside the repository it was
# cloned from.  The build
# (about 2-3 minutes on 2 cores; ../shared/vendor/README.md) is cached in
# $GPUCLUST_CITUS_CACHE (default ~/.cache/gpuclust/citus-VERSION-pgMAJOR),
# outside the checkout, so that clean clones share it.
#
# With a built (not installed) Citus the nodes run from a private copy of the
# PostgreSQL install under $GPUCLUST_CITUS_DIR/root (PostgreSQL finds its
# libraries and extensions relative to its binaries): links to the system's
# files, Citus's files and this checkout's gpuclust (make install DESTDIR=...),
# so the shared system install is never written.  Nodes: data under
# $GPUCLUST_CITUS_DIR (default /tmp/gpuclust_citus)/nodeI, TCP on localhost
# at ports $GPUCLUST_CITUS_PORT (default 55432) + I, trust authentication.
# stdout carries only the env lines; everything else goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD

SYS_PG_CONFIG=${PG_CONFIG:-pg_config}
DIR=${GPUCLUST_CITUS_DIR:-/tmp/gpuclust_citus}
PORT0=${GPUCLUST_CITUS_PORT:-55432}
NODES=3
PG_MAJOR=$("$SYS_PG_CONFIG" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')

log() { echo "citus_cluster: $*" >&2; }

# The vendored source, or nothing.
tarball() {
	local d origin dirs
	if [ -n "${GPUCLUST_VENDOR+set}" ]; then
		dirs=("$GPUCLUST_VENDOR")
	else
		dirs=("$REPO/../shared/vendor")
		origin=$(git -C "$REPO" config --get remote.origin.url 2>/dev/null || true)
		[ -n "$origin" ] && [ -d "$origin" ] && dirs+=("$origin/../shared/vendor")
	fi
	for d in "${dirs[@]}"; do
		[ -n "$d" ] && ls "$d"/citus-*.tar.gz >/dev/null 2>&1 || continue
		ls "$d"/citus-*.tar.gz | sort -V | tail -n 1
		return 0
	done
	return 1
}

cache_dir() {	# $1: the tarball's name (citus-X.Y.Z.tar.gz)
	local v=${1##*/}
	v=${v%.tar.gz}
	echo "${GPUCLUST_CITUS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuclust/$v-pg$PG_MAJOR}"
}

installed() { [ -f "$("$SYS_PG_CONFIG" --pkglibdir)/citus.so" ]; }

# The cached build of any version, newest first (when the source is gone).
any_cache() {
	local base=${XDG_CACHE_HOME:-$HOME/.cache}/gpuclust
	if [ -n "${GPUCLUST_CITUS_CACHE:-}" ]; then
		[ -f "$GPUCLUST_CITUS_CACHE/built" ] && echo "$GPUCLUST_CITUS_CACHE"
		return 0
	fi
	ls -d "$base"/citus-*-pg"$PG_MAJOR" 2>/dev/null | sort -V -r | while read -r c; do
		[ -f "$c/built" ] && { echo "$c"; break; }
	done
}

find_citus() {
	local t c
	if installed; then echo installed; return 0; fi
	if t=$(tarball); then
		c=$(cache_dir "$t")
		[ -f "$c/built" ] && echo "cached $c" || echo "source $t"
		return 0
	fi
	c=$(any_cache)
	[ -n "$c" ] && { echo "cached $c"; return 0; }
	return 3
}

# Builds Citus from the tarball into the cache, once; prints the cache dir.
build() {
	local t c work
	t=$(tarball) || { c=$(any_cache); [ -n "$c" ] && { echo "$c"; return 0; }; log "no Citus source"; return 3; }
	c=$(cache_dir "$t")
	if [ -f "$c/built" ]; then echo "$c"; return 0; fi
	# ../shared/vendor/README.md: the packages Citus builds with
	test/lib/apt_install.sh build-essential "postgresql-server-dev-$PG_MAJOR" libcurl4-openssl-dev liblz4-dev libzstd-dev libkrb5-dev libssl-dev \
		libselinux1-dev libxslt1-dev libpam0g-dev libreadline-dev
	log "building $(basename "$t") once into $c (a few minutes)"
	rm -rf "$c"
	mkdir -p "$c"
	work=$(mktemp -d "$c/build.XXXXXX")
	tar -xzf "$t" -C "$work" --strip-components=1
	(
		cd "$work"
		PG_CONFIG=$SYS_PG_CONFIG ./configure --without-libcurl >"$c/configure.log" 2>&1 &&
			make -j"$(nproc)" >"$c/make.log" 2>&1 &&
			make install DESTDIR="$c/stage" >"$c/install.log" 2>&1
	) || { log "the Citus build failed (logs in $c)"; tail -n 20 "$c"/*.log >&2; rm -rf "$work"; return 1; }
	rm -rf "$work" "$c/stage"/usr/lib/postgresql/*/lib/bitcode
	basename "$t" >"$c/built"
	echo "$c"
}

ROOT=$DIR/root
tree_pg_config() { echo "$ROOT$("$SYS_PG_CONFIG" --bindir)/pg_config"; }

# The private tree (test/lib/pg_tree.sh): the system install without
# gpuclust, Citus or pg_cron, then Citus and this checkout's gpuclust.
make_tree() {
	local c=$1
	test/lib/pg_tree.sh "$ROOT" "$SYS_PG_CONFIG"
	cp -a "$c/stage/." "$ROOT/"
	make -s install DESTDIR="$ROOT" PG_CONFIG="$SYS_PG_CONFIG" ${USE_CUDA:+USE_CUDA=$USE_CUDA} >/dev/null
	chmod -R a+rX "$DIR"
}

node_env() {	# $1: node index
	echo "GPUCLUST_PG_DIR=$DIR/node$1 GPUCLUST_PG_PORT=$((PORT0 + $1))"
}

node() {	# $1: index, $2: pg_server.sh command
	local pgc
	pgc=$(cat "$DIR/pg_config")
	env $(node_env "$1") PG_CONFIG="$pgc" GPUCLUST_PG_PRELOAD=citus \
		GPUCLUST_PG_OPTS="-c listen_addresses=localhost -c max_connections=100 -c citus.shard_count=4 -c citus.node_conninfo=sslmode=disable -c jit=off ${GPUCLUST_CITUS_OPTS:-}" \
		test/lib/pg_server.sh "$2"
}

sql() {	# $1: node index, $2: SQL
	local psql
	psql=$("$SYS_PG_CONFIG" --bindir)/psql
	"$psql" -X -q -o /dev/null -v ON_ERROR_STOP=1 -h localhost -p $((PORT0 + $1)) -U "$(superuser)" -d postgres -c "$2" >&2
}

superuser() { [ "$(id -u)" -eq 0 ] && echo postgres || id -un; }

start() {
	local how c i
	how=$(find_citus) || { log "no Citus"; return 3; }
	stop
	mkdir -p "$DIR"
	case $how in
		installed) echo "$SYS_PG_CONFIG" >"$DIR/pg_config" ;;
		*)
			c=$(build) || return $?
			make_tree "$c"
			tree_pg_config >"$DIR/pg_config"
			;;
	esac
	for i in $(seq 0 $((NODES - 1))); do
		node "$i" start >/dev/null
	done
	for i in $(seq 0 $((NODES - 1))); do
		sql "$i" "SET client_min_messages = warning; CREATE EXTENSION IF NOT EXISTS citus"
	done
	# the workers join; gpuclust goes to every node (CREATE EXTENSION on the
	# coordinator propagates to the workers: Citus's own means)
	sql 0 "SET client_min_messages = warning;
		SELECT citus_set_coordinator_host('localhost', $PORT0);
		SELECT citus_add_node('localhost', $((PORT0 + 1))) WHERE NOT EXISTS (SELECT FROM pg_dist_node WHERE nodeport = $((PORT0 + 1)));
		SELECT citus_add_node('localhost', $((PORT0 + 2))) WHERE NOT EXISTS (SELECT FROM pg_dist_node WHERE nodeport = $((PORT0 + 2)));
		CREATE EXTENSION IF NOT EXISTS gpuclust"
	echo "export PGHOST=localhost PGPORT=$PORT0 PGUSER=$(superuser) PGDATABASE=postgres" \
		"GPUCLUST_CITUS_PORTS=$PORT0,$((PORT0 + 1)),$((PORT0 + 2))" \
		"GPUCLUST_CITUS_PG_CONFIG=$(cat "$DIR/pg_config")"
}

stop() {
	local i
	[ -f "$DIR/pg_config" ] || return 0
	for i in $(seq 0 $((NODES - 1))); do node "$i" stop || true; done
}

case "${1:-}" in
	find) find_citus ;;
	build) build ;;
	start) start ;;
	stop) stop ;;
	clean) stop; rm -rf "$DIR" ;;
	node-stop) node "$2" stop ;;
	node-start) node "$2" start >/dev/null ;;
	*)
		echo "usage: $0 find|build|start|stop|clean|node-stop I|node-start I" >&2
		exit 2
		;;
esac
