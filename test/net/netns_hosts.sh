#!/bin/sh
# The two-host harness checks itself: 2 ranks, one per simulated host.
exec "${top_srcdir:-.}/test/net/netns_mpirun.sh" 2 "${top_builddir:-.}/test/net/test_netns_hosts"
