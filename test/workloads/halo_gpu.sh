#!/bin/sh
# workloads/halo_gpu at 2 ranks: kernels drive the exchange, beside MPI, verified; exits
# 77 without a GPU (on one GPU both ranks share it: scripts/gpu-one.sh runs it under MPS).
exec "${top_builddir:-.}/test/mpi/mpirun.sh" 2 "${top_builddir:-.}/workloads/halo_gpu" --small
