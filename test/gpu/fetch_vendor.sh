#!/bin/bash
# fetch_vendor.sh — unpack the benchmark baselines that must never enter the
# repository into .vendor/ (ignored by git), to be carried to the GPU
# machine beside the working tree (carry [".vendor"]):
#   .vendor/flash_kmeans   flash-kmeans (Apache-2.0, Triton, exact Lloyd), the
#                          package folder of ../shared/vendor/flash-kmeans-*.tar.gz,
#                          with its LICENSE.txt and a VERSION line
# bench_kmeans.py puts .vendor on sys.path; without it the flash-kmeans
# columns of the bench say "not carried".
#   test/gpu/fetch_vendor.sh [TARBALL]
set -euo pipefail
cd "$(dirname "$0")/../.."
tarball=${1:-$(ls ../shared/vendor/flash-kmeans-*.tar.gz 2>/dev/null | tail -1)}
[ -n "$tarball" ] && [ -f "$tarball" ] || { echo "fetch_vendor: no flash-kmeans tarball (../shared/vendor/flash-kmeans-*.tar.gz)" >&2; exit 1; }
git check-ignore -q .vendor/x || { echo "fetch_vendor: .vendor/ is not ignored by git" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar -xzf "$tarball" -C "$tmp"
src=$(find "$tmp" -mindepth 2 -maxdepth 2 -type d -name flash_kmeans | head -1)
[ -n "$src" ] || { echo "fetch_vendor: no flash_kmeans/ folder in $tarball" >&2; exit 1; }
rm -rf .vendor/flash_kmeans
mkdir -p .vendor
cp -r "$src" .vendor/flash_kmeans
find .vendor/flash_kmeans -name __pycache__ -prune -exec rm -rf {} +
cp "$(dirname "$src")/LICENSE.txt" .vendor/flash_kmeans/ 2>/dev/null || true
echo "flash-kmeans $(basename "$tarball" .tar.gz | sed 's/^flash-kmeans-//') (Apache-2.0)" > .vendor/flash_kmeans/VERSION
echo "fetch_vendor: $(cat .vendor/flash_kmeans/VERSION) in .vendor/flash_kmeans ($(du -sh .vendor | cut -f1)); carry \".vendor\""
