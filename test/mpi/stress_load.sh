#!/bin/sh
# The all-pairs stress under load, bounded: CPU hogs (one per core plus one)
# keep every core busy while test_mpi_stress runs again and again, each run
# with a new seed, alternating 2 ranks (auto-fifo4: shm; tcp-fifo4) and 4
# ranks (the same, and hosts-fifo4: shm within two host identities, tcp
# between), every host FIFO of 4 slots. New runs start until LOAD_SECONDS
# (default 240) have passed; each is bounded by GPUPORT_TEST_TIMEOUT (120).
# Prints a line per run and "stress under load: N runs, F failed"; a failed
# run's output is shown. .ci/run runs it once; scripts/load-loop.sh is for
# longer hunts.
#   usage: stress_load.sh   (top_builddir: a built tree with MPI)
build=${top_builddir:-.}
run=$build/test/mpi/mpirun.sh
prog=$build/test/mpi/test_mpi_stress
limit=${LOAD_SECONDS:-240}
GPUPORT_TEST_TIMEOUT=${GPUPORT_TEST_TIMEOUT:-120}
export GPUPORT_TEST_TIMEOUT
if [ ! -x "$prog" ] || [ ! -x "$run" ]; then
    echo "stress_load: SKIP: $prog not built (no MPI?)"
    exit 77
fi
hogs=$(( $(nproc) + 1 ))
pids=
i=0
while [ $i -lt $hogs ]; do
    sh -c 'while :; do :; done' &
    pids="$pids $!"
    i=$((i + 1))
done
out=$(mktemp "${TMPDIR:-/tmp}/gpuport-load.XXXXXX") || exit 1
trap 'kill $pids 2>/dev/null; rm -f "$out"' EXIT INT TERM
seed=${GPUPORT_TEST_SEED:-$(( $(date +%s) % 100000 ))}
start=$(date +%s)
runs=0 fails=0
while [ $(( $(date +%s) - start )) -lt "$limit" ]; do
    if [ $((runs % 2)) -eq 0 ]; then
        np=2 scen=auto-fifo4,tcp-fifo4
    else
        np=4 scen=auto-fifo4,tcp-fifo4,hosts-fifo4
    fi
    t0=$(date +%s)
    GPUPORT_TEST_SEED=$((seed + runs)) "$run" $np "$prog" -s $scen >"$out" 2>&1
    rc=$?
    runs=$((runs + 1))
    if [ $rc -ne 0 ]; then
        fails=$((fails + 1))
        echo "run $runs: $np ranks, seed $((seed + runs - 1)): FAILED (exit $rc) after $(( $(date +%s) - t0 )) s:"
        sed 's/^/    | /' "$out"
    else
        echo "run $runs: $np ranks, seed $((seed + runs - 1)): ok in $(( $(date +%s) - t0 )) s"
    fi
done
echo "stress under load ($hogs CPU hogs): $runs runs, $fails failed"
[ $fails -eq 0 ] && [ $runs -gt 0 ]
