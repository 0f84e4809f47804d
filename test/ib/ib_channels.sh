#!/bin/sh
# test_mpi_channels over the ib transport (GPUPORT_TRANSPORT=ib: every
# channel, a rank's channel to itself too, must use ib). Needs an RDMA
# device; without one it skips (77) and says why.
#
#   GPUPORT_IB_TEST_NP      ranks (default 2)
#   GPUPORT_IB_TEST_LAUNCH  a launcher to use instead of test/mpi/mpirun.sh,
#                           for ranks on several hosts, e.g.
#                           "mpirun -np 4 --hostfile hosts -x GPUPORT_TRANSPORT"
#                           (the program and its arguments are appended)
#
# Scenarios: all but transport-forced, which sets GPUPORT_TRANSPORT itself
# and expects ib to be refused.
builddir=${top_builddir:-.}
scenarios=all-pairs,signal-after-data,flush,many-channels,out-of-range,malloc-vs-alloc,poll,bad-config

devices=
if test -d /sys/class/infiniband; then
    devices=$(ls /sys/class/infiniband 2>/dev/null)
fi
if test -z "$devices" && command -v ibv_devices >/dev/null 2>&1; then
    # a header of two lines, then one device per line
    devices=$(ibv_devices 2>/dev/null | awk 'NR > 2 && NF { print $1 }')
fi
if test -z "$devices"; then
    echo "SKIP: no RDMA device here (/sys/class/infiniband is empty or missing, ibv_devices lists none)"
    exit 77
fi
echo "RDMA devices: $(echo $devices)"

program="$builddir/test/mpi/test_mpi_channels"
if test ! -x "$program"; then
    echo "ib_channels.sh: $program is not built (make check builds it)" >&2
    exit 1
fi
GPUPORT_TRANSPORT=ib
export GPUPORT_TRANSPORT
if test -n "$GPUPORT_IB_TEST_LAUNCH"; then
    echo "ib_channels.sh: $GPUPORT_IB_TEST_LAUNCH $program -s $scenarios"
    # shellcheck disable=SC2086  # the launcher is a command line
    exec $GPUPORT_IB_TEST_LAUNCH "$program" -s "$scenarios" </dev/null
fi
exec "$builddir/test/mpi/mpirun.sh" "${GPUPORT_IB_TEST_NP:-2}" "$program" -s "$scenarios"
