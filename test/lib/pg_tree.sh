#!/usr/bin/env bash
# pg_tree.sh ROOT [PG_CONFIG] — a private PostgreSQL install under ROOT that
# a test can put its own gpuclust (or Citus) into without writing the shared
# one: real copies of the programs (PostgreSQL finds its files relative to
# its binary's real location), links to every other library and shared
# file, and none of gpuclust's, Citus's or pg_cron's files (the caller
# installs what it wants with make install DESTDIR=ROOT; pg_server.sh would
# preload a pg_cron it found).  Paths under ROOT are the install's own:
# ROOT$(pg_config --bindir)/pg_config is the tree's pg_config.
# PG_CONFIG (default: pg_config on PATH) names the install copied.
set -euo pipefail
ROOT=${1:?usage: $0 ROOT [PG_CONFIG]}
PG_CONFIG=${2:-${PG_CONFIG:-pg_config}}
bindir=$("$PG_CONFIG" --bindir)
libdir=$("$PG_CONFIG" --pkglibdir)
sharedir=$("$PG_CONFIG" --sharedir)
rm -rf "$ROOT"
mkdir -p "$ROOT$bindir" "$ROOT$libdir" "$ROOT$sharedir"
for b in postgres initdb pg_ctl pg_config; do cp "$bindir/$b" "$ROOT$bindir/"; done
for f in "$libdir"/*; do
	case ${f##*/} in gpuclust*|citus*|columnar*|pg_cron*) continue ;; esac
	ln -s "$f" "$ROOT$libdir/"
done
cp -rs "$sharedir/." "$ROOT$sharedir/"
rm -f "$ROOT$sharedir"/extension/gpuclust* "$ROOT$sharedir"/extension/citus* \
	"$ROOT$sharedir"/extension/columnar* "$ROOT$sharedir"/extension/pg_cron*
