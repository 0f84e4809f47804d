#!/bin/sh
# The link between two simulated hosts is cut under tcp traffic: both ranks
# must report a channel error within GPUPORT_SOCKET_TIMEOUT_MS (2 s here)
# plus a margin, and never hang (test/net/test_link_cut.c). The cut comes 1 s
# after rank 0 has finished 20 rounds; the link comes back 10 s after the cut
# so that MPI can gather the verdict.
GPUPORT_SOCKET_IFNAME=gp0
GPUPORT_SOCKET_TIMEOUT_MS=2000
export GPUPORT_SOCKET_IFNAME GPUPORT_SOCKET_TIMEOUT_MS
exec "${top_srcdir:-.}/test/net/netns_mpirun.sh" --cut-after 1 --cut-when-ready --restore-after 10 \
    2 "${top_builddir:-.}/test/net/test_link_cut"
