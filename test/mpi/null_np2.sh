#!/bin/sh
# test_mpi_null on 2 ranks, then 3: the MPI bootstrap's calls refuse NULL
# arguments, a failed gpuport_comm_init_mpi leaves NULL behind on every
# rank, and the host queries count ranks per host (3: hosts of 2 and 1).
"${top_builddir:-.}/test/mpi/mpirun.sh" 2 "${top_builddir:-.}/test/mpi/test_mpi_null" || exit $?
exec "${top_builddir:-.}/test/mpi/mpirun.sh" 3 "${top_builddir:-.}/test/mpi/test_mpi_null"
