#!/bin/sh
# test_mpi_stress with 4 ranks, 2 on each of two simulated hosts: auto picks
# shm on a host and tcp between them (GPUPORT_TEST_REMOTE_TRANSPORT tells the
# test so), and tcp forced everywhere, over gp0.
GPUPORT_SOCKET_IFNAME=gp0
GPUPORT_TEST_REMOTE_TRANSPORT=tcp
export GPUPORT_SOCKET_IFNAME GPUPORT_TEST_REMOTE_TRANSPORT
exec "${top_srcdir:-.}/test/net/netns_mpirun.sh" 4 "${top_builddir:-.}/test/mpi/test_mpi_stress" \
    -s auto-fifo4,auto-fifo16,tcp-fifo4 --seconds 3
