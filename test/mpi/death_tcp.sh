#!/bin/sh
# A rank killed mid-traffic, 2 ranks, GPUPORT_TRANSPORT=tcp (over this
# machine's interface).
GPUPORT_TRANSPORT=tcp
export GPUPORT_TRANSPORT
exec sh "${top_srcdir:-.}/test/mpi/death.sh" 2
