#!/bin/sh
# A program of the other MPI family than libgpuport_mpi's must be refused at
# gpuport_comm_init_mpi (test_mpi_foreign.c says how). It needs a second MPI
# (configure's MPICC_OTHER: Debian installs openmpi and mpich side by side);
# without one this test skips.
prog=${top_builddir:-.}/test/mpi/test_mpi_foreign
if test ! -x "$prog"; then
    echo "SKIP: no MPI of the other family was found at configure time (MPICC_OTHER; see the configure summary's 'other MPI')"
    exit 77
fi
# not under a launcher: MPI is never started
exec "$prog"
