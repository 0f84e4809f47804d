#!/bin/sh
# test_mpi_channels with its 2 ranks on two simulated hosts: auto must pick
# tcp between them (GPUPORT_TEST_REMOTE_TRANSPORT tells the test so), over
# gp0, the name netns_mpirun.sh gives the veth on both hosts.
GPUPORT_SOCKET_IFNAME=gp0
GPUPORT_TEST_REMOTE_TRANSPORT=tcp
export GPUPORT_SOCKET_IFNAME GPUPORT_TEST_REMOTE_TRANSPORT
exec "${top_srcdir:-.}/test/net/netns_mpirun.sh" 2 "${top_builddir:-.}/test/mpi/test_mpi_channels"
