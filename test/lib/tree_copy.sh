#!/usr/bin/env bash
# tree_copy.sh DEST | --sources DEST | --key [PATH...] — this tree's sources
# with its CUDA objects, for a build in a private place
# (test/lib/testing_build.sh, and test/install/pg_matrix.sh for a release
# other than 15), or its sources alone (test/install/package_test.sh, whose
# package builds all).
#
#   test/lib/tree_copy.sh DEST            DEST emptied, then the copy made
#                                         in it
#   test/lib/tree_copy.sh --sources DEST  the same without the objects
#   test/lib/tree_copy.sh --key [PATH...] a hash of the files of the copy
#                                         that make's build and install
#                                         read (Makefile, config.mk, the
#                                         *.control files, src/, sql/,
#                                         cuda/ with its objects), and of
#                                         those under each PATH named (as
#                                         expected/, for make installcheck):
#                                         a build of an earlier copy with
#                                         the same key is this one's
#
# The copy takes the files git tracks and the untracked ones it does not
# ignore (those deleted from the working tree left out), every object under
# cuda/ as built, and config.mk where there is one.  The CUDA objects do not
# depend on PostgreSQL, so a build for another release or with GC_TESTING
# reuses them.  Every file keeps its time stamp (cp -p), so make in the copy
# judges the objects as make in this tree does: built after their sources
# and the core's headers, they are up to date; a stale one is compiled
# again there as it would be here.
set -euo pipefail
ARG=${1:?usage: $0 DEST | --sources DEST | --key [PATH...]}
OBJECTS=1
if [ "$ARG" = --sources ]; then
	OBJECTS=0
	ARG=${2:?usage: $0 --sources DEST}
fi
[ "$ARG" = --key ] || DEST=$(realpath -m "$ARG")
cd "$(dirname "$0")/../.."

sources() {
	git ls-files -co --exclude-standard -z |
		while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done
}
cuda_objects() { find cuda -name '*.o' -print0 2>/dev/null || true; }
config() { if [ -f config.mk ]; then printf 'config.mk\0'; fi; }

# What make reads to build and install (the Makefile, its config.mk, the
# control files, src/, sql/ and cuda/: test/ and docs/ are not built), and
# the files under the paths given.
build_inputs() {
	local f p
	sources | while IFS= read -r -d '' f; do
		case $f in
			Makefile | *.control | src/* | sql/* | cuda/*) printf '%s\0' "$f" ;;
			*) for p in "$@"; do
				case $f in "$p" | "${p%/}"/*) printf '%s\0' "$f"; break ;; esac
			done ;;
		esac
	done
	cuda_objects; config
}

if [ "$ARG" = --key ]; then
	shift
	build_inputs "$@" | sort -z | xargs -0 -r sha1sum | sha1sum | cut -d' ' -f1
	exit 0
fi
rm -rf "$DEST"
mkdir -p "$DEST"
sources | xargs -0 cp --parents -p -t "$DEST"
[ "$OBJECTS" = 1 ] || exit 0
{ cuda_objects; config; } | xargs -0 -r cp --parents -p -t "$DEST"
