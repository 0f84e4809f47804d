#!/bin/sh
# test_mpi_create at 2 ranks: a channel's creation that its peer does not
# answer ends at GPUPORT_TIMEOUT_MS, what it left behind is passed over, and
# gpuport_channel_create_all has one outcome on every rank
# (test/mpi/test_mpi_create.c says how).
exec "${top_builddir:-.}/test/mpi/mpirun.sh" 2 "${top_builddir:-.}/test/mpi/test_mpi_create"
