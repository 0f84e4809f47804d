#!/bin/sh
# test_mpi_channels with 4 ranks, 2 on each of two simulated hosts: auto must
# pick shm on a host and tcp between them (GPUPORT_TEST_REMOTE_TRANSPORT tells the test so), over
# gp0, the name netns_mpirun.sh gives the veth on both hosts.
# The smallest send queue (128, 64 of them for operations): back-pressure
# from the network reaches the FIFO often.
GPUPORT_SOCKET_IFNAME=gp0
GPUPORT_SOCKET_QUEUE=128
GPUPORT_TEST_REMOTE_TRANSPORT=tcp
export GPUPORT_SOCKET_IFNAME GPUPORT_SOCKET_QUEUE GPUPORT_TEST_REMOTE_TRANSPORT
exec "${top_srcdir:-.}/test/net/netns_mpirun.sh" 4 "${top_builddir:-.}/test/mpi/test_mpi_channels"
