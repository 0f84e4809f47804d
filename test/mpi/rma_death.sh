#!/bin/sh
# A peer killed while rank 0 gets from it, over shm and then tcp: rank 0's
# get or flush returns GPUPORT_ERR_PEER (or _TRANSPORT), nothing hangs, and
# its destroy returns. The job is told to outlive the dead rank
# (GPUPORT_TEST_OUTLIVE=1), so rank 0's verdict line decides.
out=$(mktemp "${TMPDIR:-/tmp}/gpuport-rma-death.XXXXXX") || exit 1
trap 'rm -f "$out"' EXIT
GPUPORT_TEST_OUTLIVE=1
GPUPORT_TEST_TIMEOUT=${GPUPORT_TEST_TIMEOUT:-60}
export GPUPORT_TEST_OUTLIVE GPUPORT_TEST_TIMEOUT
for t in shm tcp; do
    GPUPORT_TRANSPORT=$t "${top_builddir:-.}/test/mpi/mpirun.sh" 2 \
        "${top_builddir:-.}/test/mpi/test_mpi_rma" --death >"$out" 2>&1
    rc=$?
    cat "$out"
    [ $rc -eq 77 ] && exit 77
    if grep -q '^TIMEOUT after' "$out" || ! grep -q '^PASS rank 0' "$out" ||
        grep -q -E '^FAIL rank|CHECK failed' "$out"; then
        echo "FAIL: rma death over $t (mpirun exit $rc)"
        exit 1
    fi
done
echo "rma death: rank 0 saw the peer's death during its gets over shm and tcp"
