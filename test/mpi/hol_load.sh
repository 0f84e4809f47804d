#!/bin/sh
# test_mpi_hol's big load under CPU load, again and again: two CPU hogs
# (`yes > /dev/null`, killed at the end) while rank 0 ping-pongs with rank 2
# beside 16 puts of 4 MiB queued to the stopped rank 1, which a thread lets
# run again after GPUPORT_TEST_HOL_STOP_MS (1000). A run fails when one of
# B's rounds was held until rank 1 resumed (or on any other check). Each
# big run is followed by a control run (the same timing, nothing stopped,
# nothing queued): a round held there waited on the machine, not on the
# stopped peer. A failed run's output is shown, with the threads' states
# that ranks 0 and 2 print while a round is outstanding
# (GPUPORT_TEST_HOL_WATCH_MS, 300).
# Prints a line per run and a summary per mode: runs, failures, runs with a
# round held until the resume, the worst round of all runs (and before the
# resume), the lowest rate beside the stopped peer. Not in make check's
# list: 50 runs of each take about 10 minutes on 2 cores.
#   usage: hol_load.sh [RUNS (50)] [GPUPORT_HOST_INLINE (0)] [MODES ("big control")]
#   (top_builddir: a built tree with MPI; HOL_HOGS: hogs, default 2)
build=${top_builddir:-.}
run=$build/test/mpi/mpirun.sh
prog=$build/test/mpi/test_mpi_hol
runs=${1:-50}
inl=${2:-0}
modes=${3:-big control}
GPUPORT_TEST_TIMEOUT=${GPUPORT_TEST_TIMEOUT:-120}
export GPUPORT_TEST_TIMEOUT
if [ ! -x "$prog" ] || [ ! -x "$run" ]; then
    echo "hol_load: SKIP: $prog not built (no MPI?)"
    exit 77
fi
pids=
i=0
while [ $i -lt "${HOL_HOGS:-2}" ]; do
    yes >/dev/null &
    pids="$pids $!"
    i=$((i + 1))
done
out=$(mktemp "${TMPDIR:-/tmp}/gpuport-hol.XXXXXX") || exit 1
trap 'kill $pids 2>/dev/null; rm -f "$out"' EXIT
trap 'exit 130' INT TERM

# per mode: runs fails held worst worst_before low
for m in $modes; do
    eval "n_$m=0 fails_$m=0 held_$m=0 worst_$m=0 before_$m=0 low_$m="
done
max() { awk -v a="$1" -v b="$2" 'BEGIN { print (b + 0 > a + 0) ? b : a }'; }

k=0
while [ $k -lt "$runs" ]; do
    k=$((k + 1))
    for m in $modes; do
        "$run" 3 "$prog" "$inl" "$m" >"$out" 2>&1
        rc=$?
        eval "n_$m=\$((n_$m + 1))"
        if [ $rc -ne 0 ]; then
            eval "fails_$m=\$((fails_$m + 1))"
            grep -q 'waited until rank 1 resumed' "$out" && eval "held_$m=\$((held_$m + 1))"
            echo "run $k $m: FAILED (exit $rc):"
            sed 's/^/    | /' "$out"
            continue
        fi
        # "... (P%); worst round W ms (from S ms of the resume; B ms before it) ..."
        pat='s/.* (\([0-9]*\)%); worst round \([0-9.]*\) ms (from \([-+0-9]*\) ms of the resume;'
        pat="$pat"' \([0-9.]*\) ms before it).*/\1 \2 \3 \4/p'
        fields=$(sed -n "$pat" "$out")
        set -- $fields
        p=${1:-0} w=${2:-0} at=${3:-?} b=${4:-0}
        eval "worst_$m=\$(max \"\$worst_$m\" $w)"
        eval "before_$m=\$(max \"\$before_$m\" $b)"
        eval "low=\$low_$m"
        if [ -z "$low" ] || [ "$p" -lt "$low" ]; then eval "low_$m=$p"; fi
        echo "run $k $m: ok: worst round $w ms (from $at ms of the resume; $b ms before it)," \
             "rate beside $p% of the rate before"
    done
done
bad=0
for m in $modes; do
    eval "echo \"hol under load, $m (\${HOL_HOGS:-2} hogs, GPUPORT_HOST_INLINE=$inl):" \
         "\$n_$m runs, \$fails_$m failed, \$held_$m with a round held until the resume;" \
         "worst round \$worst_$m ms (\$before_$m ms before the resume), lowest rate beside" \
         "\${low_$m:-?}%\""
    eval "bad=\$((bad + fails_$m))"
done
[ $bad -eq 0 ]
