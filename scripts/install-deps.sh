#!/usr/bin/env bash
# Installs the Debian packages gpuport builds and tests with. Used by
# scripts/demo.sh and .ci/run; needs root (or sudo). clang and
# libclang-rt-dev (its sanitizer and libFuzzer runtimes, only recommended by
# clang) are for test/fuzz/run.sh; python3-matplotlib for scripts/plot-bench.py
# and its test.
set -euo pipefail
as_root=()
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "install-deps: run as root or install sudo" >&2; exit 1; }
    as_root=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
# A failed update (mirror hiccup) only matters if the install then fails.
"${as_root[@]}" apt-get update -qq || echo "install-deps: apt-get update failed; trying the install anyway" >&2
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    build-essential openmpi-bin libopenmpi-dev libibverbs-dev libhwloc-dev \
    autoconf automake libtool pkg-config iproute2 clang libclang-rt-dev python3-matplotlib
