#!/usr/bin/env bash
# Installs the Debian packages gpuport builds and tests with. Used by
# scripts/demo.sh and .ci/run; needs root (or sudo). clang and
# libclang-rt-dev (its sanitizer and libFuzzer runtimes, only recommended by
# clang) are for test/fuzz/run.sh; groff-base and python3 for
# test/tools/man_pages.sh's groff checks and test/tools/gpuport_info.sh's
# JSON checks. libudev-dev: hwloc.pc names -ludev for static links, which
# make installcheck makes (docs/GUIDE.md, "Using an installed gpuport").
# mpich and libmpich-dev install beside Open MPI (mpicc.mpich,
# mpiexec.mpich) for .ci/run's MPICH build; Open MPI keeps the plain mpicc
# and mpirun (Debian's alternatives rank it first).
# python3-matplotlib for scripts/plot-bench.py and its test; doxygen for
# test/tools/header_docs.sh (every public declaration documented); cmake for
# make installcheck's CMake part (test/install/cmake_check.sh). python3-dev,
# -numpy, -mpi4py, -pytest, -setuptools and -pip for the Python package
# (python/README.md) and its tests (test/python/run.sh).
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
    autoconf automake libtool pkg-config iproute2 clang libclang-rt-dev \
    groff-base python3 libudev-dev mpich libmpich-dev python3-matplotlib doxygen cmake \
    python3-dev python3-numpy python3-mpi4py python3-pytest python3-setuptools python3-pip
