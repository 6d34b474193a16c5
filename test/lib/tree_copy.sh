#!/usr/bin/env bash
# tree_copy.sh DEST | --sources DEST | --list — this tree's sources with its
# CUDA objects, for a build in a private place (test/lib/testing_build.sh,
# and test/install/pg_matrix.sh for a release other than 15), or its
# sources alone (test/install/package_test.sh, whose package builds all).
#
#   test/lib/tree_copy.sh DEST            DEST emptied, then the copy made
#                                         in it
#   test/lib/tree_copy.sh --sources DEST  the same without the objects
#   test/lib/tree_copy.sh --list          the paths the copy takes,
#                                         NUL-separated, relative to the
#                                         repository root (for a key that
#                                         changes when any of them does)
#
# The copy takes the files git tracks and the untracked ones it does not
# ignore (those deleted from the working tree left out), every object under
# cuda/ as built, and config.mk where there is one.  The CUDA objects do not
# depend on PostgreSQL, so a build for another release or with GC_TESTING
# reuses them: they are touched in the copy, newer than their sources and
# the core's headers, so that make never compiles CUDA there.
set -euo pipefail
ARG=${1:?usage: $0 DEST | --sources DEST | --list}
OBJECTS=1
if [ "$ARG" = --sources ]; then
	OBJECTS=0
	ARG=${2:?usage: $0 --sources DEST}
fi
[ "$ARG" = --list ] || DEST=$(realpath -m "$ARG")
cd "$(dirname "$0")/../.."

sources() {
	git ls-files -co --exclude-standard -z |
		while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done
}
cuda_objects() { find cuda -name '*.o' -print0 2>/dev/null || true; }
config() { if [ -f config.mk ]; then printf 'config.mk\0'; fi; }

if [ "$ARG" = --list ]; then
	sources; cuda_objects; config
	exit 0
fi
rm -rf "$DEST"
mkdir -p "$DEST"
sources | xargs -0 cp --parents -p -t "$DEST"
[ "$OBJECTS" = 1 ] || exit 0
{ cuda_objects; config; } | xargs -0 -r cp --parents -p -t "$DEST"
find "$DEST/cuda" -name '*.o' -exec touch {} + 2>/dev/null || true
