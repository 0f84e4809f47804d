#!/usr/bin/env bash
# Trims a GPU build (scripts/gpu-build.sh) to what the GPU scripts run, for
# the device machine's carry limit (64 MiB): every executable program and
# script of the build tree, stripped, in the same layout; no objects, no
# archives. The GPU scripts take the copy as their BUILD_DIR.
#   usage: scripts/gpu-carry.sh [BUILD_DIR] [CARRY_DIR]   (default _build/gpu _build/gpuc)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-_build/gpu}
carry=${2:-_build/gpuc}
[ -x "$build/tools/gpuport_bench" ] || { echo "no build in $build (scripts/gpu-build.sh)" >&2; exit 1; }
rm -rf "$carry"
mkdir -p "$carry"
(cd "$build" && find . -type f -perm -u+x ! -name '*.o' ! -name '*.a' ! -name config.status \
    ! -name libtool ! -path './.libs/*' ! -path '*/.libs/*' ! -path '*/.deps/*') |
while read -r f; do
    mkdir -p "$carry/$(dirname "$f")"
    cp -p "$build/$f" "$carry/$f"
    if file -b "$carry/$f" | grep -q '^ELF'; then strip "$carry/$f" 2>/dev/null || true; fi
done
du -sh "$carry"
