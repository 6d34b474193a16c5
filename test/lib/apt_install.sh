#!/bin/bash
# apt_install.sh PACKAGE... — installs those of the Debian packages that are
# missing (apt-get update first), as root or with sudo; says which.
# Used by test/lib/setup.sh and test/distributed/citus_cluster.sh.
set -euo pipefail
missing=()
for p in "$@"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -gt 0 ] || exit 0
echo "apt_install.sh: installing ${missing[*]}" >&2
sudo_cmd=""; [ "$(id -u)" -eq 0 ] || sudo_cmd=sudo
$sudo_cmd apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
