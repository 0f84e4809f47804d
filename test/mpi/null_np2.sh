#!/bin/sh
# test_mpi_null on 2 ranks: the MPI bootstrap's calls refuse NULL arguments,
# and a failed gpuport_comm_init_mpi leaves NULL behind on every rank.
exec "${top_builddir:-.}/test/mpi/mpirun.sh" 2 "${top_builddir:-.}/test/mpi/test_mpi_null"
