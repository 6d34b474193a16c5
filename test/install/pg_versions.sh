#!/usr/bin/env bash
# pg_versions.sh — the PostgreSQL releases besides the system's 15 that
# gpuclust is built and tested on, fetched from Debian's archive by package
# name and cached outside the checkout, so that clean clones share them.
#
#   test/install/pg_versions.sh pg_config 18   builds PostgreSQL 18 from Debian's
#                                              source package once; prints its pg_config
#   test/install/pg_versions.sh headers 17     unpacks Debian's binary
#                                              postgresql-server-dev-17 once; prints
#                                              its server include directory
#   test/install/pg_versions.sh compile 17     compiles every glue file (src/gpuclust.c, src/*/*.c but src/core)
#                                              against those headers; exit 1 on an error
#
# Debian 12 ships PostgreSQL 15 only.  18's source package comes from
# unstable and 17's server headers from Debian 13, each through a private
# sources list, lists and cache (-o Dir::...), so the machine's own apt
# configuration, package lists and cache stay as they are.  The archive is the one
# this machine's apt already uses.  PostgreSQL 16 is in neither suite.
#
# The cache: $GPUCLUST_PG_CACHE (default ~/.cache/gpuclust)/postgresql-VERSION
# (the build, about 3 minutes on 2 cores) and .../server-dev-VERSION.
# stdout carries only the path printed; everything else goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD
CACHE=${GPUCLUST_PG_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuclust}
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo

log() { echo "pg_versions: $*" >&2; }
die() { log "$*"; exit 1; }

# Which suite of Debian's archive carries each release.
source_suite() { case $1 in 18) echo sid ;; *) return 1 ;; esac; }
binary_suite() { case $1 in 17) echo trixie ;; *) return 1 ;; esac; }

# The archive of this machine's own Debian entries (from apt's policy;
# its package lists are fetched first where there are none yet).
archive() {
	local url
	policy_url() {
		apt-cache policy 2>/dev/null |
			awk '$2 ~ /^https?:\/\// && $3 ~ /^bookworm\/main/ { print $2; exit }'
	}
	url=$(policy_url)
	if [ -z "$url" ]; then
		$SUDO apt-get update -qq >&2 || true
		url=$(policy_url)
	fi
	echo "$url"
}

# A private apt configuration over one suite: $1 deb or deb-src, $2 suite.
# Prints the apt options that use it, after refreshing its lists.
private_apt() {
	local kind=$1 suite=$2 dir url
	url=$(archive)
	[ -n "$url" ] || die "no Debian archive in this machine's apt configuration"
	dir=$CACHE/apt-$kind-$suite
	mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial"
	echo "$kind [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $url $suite main" \
		>"$dir/sources.list"
	local opts="-o Dir::Etc::SourceList=$dir/sources.list -o Dir::Etc::SourceParts=/dev/null -o Dir::State::Lists=$dir/lists -o Dir::Cache=$dir/cache -o APT::Sandbox::User=root"
	# shellcheck disable=SC2086
	apt-get $opts update -qq >&2 || die "apt-get update of $suite failed"
	echo "$opts"
}

ensure_packages() { "$REPO/test/lib/apt_install.sh" "$@"; }

# ---- a release built from source ----
built_dir() { ls -d "$CACHE"/postgresql-"$1".* 2>/dev/null | sort -V | while read -r d; do
	[ -f "$d/built" ] && echo "$d"; done | tail -n 1; }

build() {
	local major=$1 suite opts work tarball version prefix
	prefix=$(built_dir "$major")
	if [ -n "$prefix" ]; then echo "$prefix"; return 0; fi
	suite=$(source_suite "$major") || die "no source suite known for PostgreSQL $major"
	ensure_packages bison flex build-essential
	opts=$(private_apt deb-src "$suite")
	work=$(mktemp -d)
	# shellcheck disable=SC2086
	(cd "$work" && apt-get $opts source --download-only -qq "postgresql-$major") >&2 ||
		die "apt-get source postgresql-$major failed"
	tarball=$(ls "$work"/postgresql-"$major"_*.orig.tar.* | head -n 1)
	version=${tarball##*/postgresql-"$major"_}
	version=${version%.orig.tar.*}
	prefix=$CACHE/postgresql-$version
	log "building PostgreSQL $version into $prefix (once)"
	tar -xf "$tarball" -C "$work"
	rm -rf "$prefix"
	(
		cd "$work"/postgresql-"$version"
		./configure --prefix="$prefix" --without-icu --without-readline \
			--without-zlib --without-llvm >"$work/configure.log" 2>&1 ||
			{ tail -n 30 "$work/configure.log"; exit 1; }
		make -s -j"$(nproc)" >"$work/build.log" 2>&1 || { tail -n 30 "$work/build.log"; exit 1; }
		make -s install >"$work/install.log" 2>&1 || { tail -n 30 "$work/install.log"; exit 1; }
	) >&2 || die "building PostgreSQL $version failed"
	touch "$prefix/built"
	rm -rf "$work"
	echo "$prefix"
}

# ---- a release's server headers from its binary package ----
headers() {
	local major=$1 suite opts dir work
	dir=$CACHE/server-dev-$major
	if [ ! -f "$dir/unpacked" ]; then
		suite=$(binary_suite "$major") || die "no binary suite known for PostgreSQL $major"
		opts=$(private_apt deb "$suite")
		work=$(mktemp -d)
		chmod 755 "$work"
		# shellcheck disable=SC2086
		(cd "$work" && apt-get $opts download -qq "postgresql-server-dev-$major") >&2 ||
			die "apt-get download postgresql-server-dev-$major failed"
		rm -rf "$dir"
		mkdir -p "$dir"
		dpkg-deb -x "$work"/postgresql-server-dev-"$major"_*.deb "$dir"
		rm -rf "$work"
		touch "$dir/unpacked"
	fi
	echo "$dir/usr/include/postgresql/$major/server"
}

# Every glue file compiled (not linked) against a release's headers, with
# the extension's own definitions and warnings that catch a changed API.
# Those headers assume the C library of their own release (strlcpy and
# strlcat from glibc 2.38), which this machine's may lack: both are
# declared here as that glibc declares them.
compile() {
	local major=$1 inc shim failed=0 cuda_def=""
	inc=$(headers "$major")
	shim=$(mktemp --suffix=.h)
	printf '#include <stddef.h>\nextern size_t strlcpy(char *, const char *, size_t);\nextern size_t strlcat(char *, const char *, size_t);\n' >"$shim"
	[ "$(make -s --no-print-directory config 2>/dev/null | sed -n 's/.*USE_CUDA=\([01]\).*/\1/p')" = 1 ] &&
		cuda_def=-DGPUCLUST_CUDA
	for f in src/gpuclust.c src/*/*.c; do
		case $f in src/core/*) continue ;; esac
		${CC:-gcc} -std=gnu11 -c -o /dev/null -include "$shim" -O1 -fPIC -fopenmp \
			-Wall -Wmissing-prototypes -Wno-declaration-after-statement \
			-Werror=implicit-function-declaration -Werror=incompatible-pointer-types \
			-Werror=int-conversion -Werror=return-type $cuda_def \
			-Isrc -Isrc/core -I"$inc" "$f" || { log "$f does not compile against PostgreSQL $major"; failed=1; }
	done
	rm -f "$shim"
	return $failed
}

case "${1:-}:${2:-}" in
	pg_config:?*) echo "$(build "$2")/bin/pg_config" ;;
	headers:?*) headers "$2" ;;
	compile:?*) compile "$2" ;;
	*)
		echo "usage: $0 pg_config MAJOR | headers MAJOR | compile MAJOR" >&2
		exit 2
		;;
esac
