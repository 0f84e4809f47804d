#!/bin/sh
# The host workloads (halo exchange, allreduce, all-to-all dispatch/combine,
# --small) across two simulated hosts: 2 ranks (tcp between the hosts) and
# 4 (shm within a host, tcp between), each beside MPI and verified.
GPUPORT_SOCKET_IFNAME=gp0
export GPUPORT_SOCKET_IFNAME
for prog in halo allreduce alltoall; do
    for np in 2 4; do
        "${top_srcdir:-.}/test/net/netns_mpirun.sh" "$np" "${top_builddir:-.}/workloads/$prog" \
            --small || exit $?
    done
done
