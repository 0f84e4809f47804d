#!/bin/sh
# test_mpi_peerall at 2 ranks: gpuport_peer_channel_create_all makes a peer
# channel to every other rank, used and compared byte for byte, and has one
# outcome on every rank when one rank's arguments are refused, a pair fails
# or a rank is absent (test/mpi/test_mpi_peerall.c says how).
exec "${top_builddir:-.}/test/mpi/mpirun.sh" 2 "${top_builddir:-.}/test/mpi/test_mpi_peerall"
