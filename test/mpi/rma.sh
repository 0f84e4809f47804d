#!/bin/sh
# test_mpi_rma (get, atomic_add, accumulate through port channels) on NP
# ranks over TRANSPORT (auto: shm on this host), with the test's options.
#   usage: rma.sh NP TRANSPORT [ARGS...]   (the wrappers rma_*.sh)
np=$1
GPUPORT_TRANSPORT=$2
export GPUPORT_TRANSPORT
shift 2
exec "${top_builddir:-.}/test/mpi/mpirun.sh" "$np" "${top_builddir:-.}/test/mpi/test_mpi_rma" "$@"
