#!/usr/bin/env bash
# Builds gpuport for the GPU machine into _build/gpu: static libraries, so
# the test programs are plain executables that run where libtool is absent.
# Run here (Debian with the CUDA toolkit); carry _build/gpu to the GPU host
# and run scripts/gpu-suite.sh there.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
[ -x configure ] || ./autogen.sh
mkdir -p _build/gpu
cd _build/gpu
"$root/configure" --quiet --with-cuda --disable-shared
make -j"$(nproc)"
make -j"$(nproc)" check TESTS= # builds the test programs without running them
cd "$root"
bash scripts/probes.sh build _build/gpu/probes # the driver and machine probes (scripts/probes.sh)
echo "built $root/_build/gpu"
