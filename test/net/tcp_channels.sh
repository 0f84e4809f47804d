#!/bin/sh
# test_mpi_channels with its 2 ranks on two simulated hosts, so that the tcp
# transport carries the channels over the veth that joins them; gp0 is the
# name netns_mpirun.sh gives the veth on both hosts.
GPUPORT_SOCKET_IFNAME=gp0
export GPUPORT_SOCKET_IFNAME
exec "${top_srcdir:-.}/test/net/netns_mpirun.sh" 2 "${top_builddir:-.}/test/mpi/test_mpi_channels"
