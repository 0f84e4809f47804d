#!/bin/sh
# Runs test_mpi_death on NP ranks with the job told to outlive a rank
# (GPUPORT_TEST_OUTLIVE=1: test/mpi/mpirun.sh says how for each MPI), so
# that the rank the test kills does not take the job down with it. The
# launcher's exit status then says nothing about the survivors: the test
# passes when each of the NP - 1 survivors prints a PASS line, none prints
# FAIL or a failed check, and the run ends within GPUPORT_TEST_TIMEOUT.
#   usage: death.sh NP [ARGS...]   (the wrappers death_*.sh)
# Every check is enforced; GPUPORT_TEST_STRICT_DEATH=0 prints the ones older
# libraries failed as KNOWN lines instead (for bisecting).
np=$1
shift
out=$(mktemp "${TMPDIR:-/tmp}/gpuport-death.XXXXXX") || exit 1
trap 'rm -f "$out"' EXIT
GPUPORT_TEST_OUTLIVE=1
GPUPORT_TEST_TIMEOUT=${GPUPORT_TEST_TIMEOUT:-60}
export GPUPORT_TEST_OUTLIVE GPUPORT_TEST_TIMEOUT
"${top_builddir:-.}/test/mpi/mpirun.sh" "$np" "${top_builddir:-.}/test/mpi/test_mpi_death" "$@" \
    >"$out" 2>&1
rc=$?
cat "$out"
[ $rc -eq 77 ] && exit 77
pass=$(grep -c '^PASS rank' "$out")
bad=$(grep -c -E '^FAIL rank|CHECK failed' "$out")
known=$(grep -c '^KNOWN rank' "$out")
if grep -q '^TIMEOUT after' "$out"; then
    echo "FAIL: the run did not end within ${GPUPORT_TEST_TIMEOUT}s"
    exit 1
fi
if [ "$pass" -ne $((np - 1)) ] || [ "$bad" -ne 0 ]; then
    echo "FAIL: $pass of $((np - 1)) survivors passed, $bad failure line(s) (mpirun exit $rc)"
    exit 1
fi
if [ "$known" -gt 0 ]; then
    echo "death: all $pass survivors passed; $known KNOWN line(s): checks that need a library fix"
else
    echo "death: all $pass survivors passed"
fi
