#!/usr/bin/env bash
# The main job: installs what gpuport needs, builds it, and runs the 2-rank
# port-channel benchmark (gpuport_bench under mpirun -np 2). Extra arguments
# go to gpuport_bench (try --help).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build=$root/_build/demo

mkdir -p "$build"
echo "installing packages (log: $build/setup.log) and building gpuport ..."
if ! bash scripts/install-deps.sh >"$build/setup.log" 2>&1 || ! ./autogen.sh >>"$build/setup.log" 2>&1; then
    tail -n 30 "$build/setup.log"
    exit 1
fi
cd "$build"
if [ ! -f Makefile ]; then
    "$root/configure" --quiet
fi
make -j"$(nproc)" >/dev/null
echo
GPUPORT_TEST_TIMEOUT=${GPUPORT_TEST_TIMEOUT:-1800} exec test/mpi/mpirun.sh 2 tools/gpuport_bench "$@"
