#!/bin/sh
# test_mpi_comm_timeout at 3 ranks: a communicator's creation that a rank
# comes to late, or never, ends at GPUPORT_TIMEOUT_MS on every rank that came
# (test/mpi/test_mpi_comm_timeout.c says how).
exec "${top_builddir:-.}/test/mpi/mpirun.sh" 3 "${top_builddir:-.}/test/mpi/test_mpi_comm_timeout"
