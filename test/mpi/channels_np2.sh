#!/bin/sh
# test_mpi_channels on 2 ranks (oversubscribed on small machines).
exec "${top_builddir:-.}/test/mpi/mpirun.sh" 2 "${top_builddir:-.}/test/mpi/test_mpi_channels"
