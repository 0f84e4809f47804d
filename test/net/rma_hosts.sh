#!/bin/sh
# test_mpi_rma with its ranks on two simulated hosts: 2 ranks (tcp between
# the hosts), then 4 (two a host: shm within a host, tcp between).
GPUPORT_SOCKET_IFNAME=gp0
export GPUPORT_SOCKET_IFNAME
"${top_srcdir:-.}/test/net/netns_mpirun.sh" 2 "${top_builddir:-.}/test/mpi/test_mpi_rma" \
    --max-get 16777219 || exit $?
GPUPORT_SOCKET_QUEUE=128 exec "${top_srcdir:-.}/test/net/netns_mpirun.sh" 4 "${top_builddir:-.}/test/mpi/test_mpi_rma" \
    --max-get 4194311
