#!/bin/bash
# Installs what gpuclust needs on Debian 12 (when missing), then builds and
# installs the extension into the PostgreSQL 15 server.  Idempotent.
#   test/lib/setup.sh            CUDA build when nvcc is found
#   USE_CUDA=0 test/lib/setup.sh CPU-only build
# PG_CONFIG picks the PostgreSQL to install into (default: pg_config on
# PATH, which is 15's once these packages are in).
set -euo pipefail
cd "$(dirname "$0")/../.."

# the server and its headers (libkrb5-dev: libpq-be.h includes gssapi.h,
# which Debian's postgresql-server-dev-15 does not pull in); PostGIS and
# pg_cron for their tests; the
# Python the tests run; bison and flex to build PostgreSQL 18
# (test/install/pg_versions.sh); the Debian packaging tools (test/install/package_test.sh)
packages=(build-essential postgresql-15 postgresql-server-dev-15 libkrb5-dev
          postgresql-15-postgis-3 postgresql-15-cron
          python3-numpy python3-sklearn python3-psycopg python3-matplotlib
          bison flex debhelper dpkg-dev postgresql-server-dev-all)
test/lib/apt_install.sh "${packages[@]}"

export PG_CONFIG=${PG_CONFIG:-pg_config}
make -s config ${USE_CUDA:+USE_CUDA=$USE_CUDA}
if ! make -s -j"$(nproc)" ${USE_CUDA:+USE_CUDA=$USE_CUDA}; then
	# A CUDA toolkit that compiles but cannot build this library (a broken
	# or partial install) must not stop a CPU server: remember USE_CUDA=0.
	[ -z "${USE_CUDA:-}" ] && [ ! -e config.mk ] || exit 1
	echo "setup: the CUDA build failed (above); building CPU-only (config.mk: USE_CUDA = 0)"
	make -s clean
	echo "USE_CUDA = 0" > config.mk
	make -s -j"$(nproc)"
fi
sudo_cmd=""; [ "$(id -u)" -eq 0 ] || sudo_cmd=sudo
$sudo_cmd make -s install ${USE_CUDA:+USE_CUDA=$USE_CUDA} >/dev/null
echo "setup: gpuclust built and installed into $($PG_CONFIG --pkglibdir)"
