#!/bin/sh
# Runs test_mpi_stress on NP ranks, then the same with damage planted, which
# must fail, and for the planted reason: a test that cannot fail is a defect.
#   usage: stress.sh NP 'PLANT:SCENARIO ...' [ARGS...]
# ARGS go to every run (e.g. -s NAME,...). The seed is printed; replay a run
# with GPUPORT_TEST_SEED=N. The wrappers stress_np2.sh and stress_np4.sh
# choose NP, the plants and the scenarios.
np=$1
plants=$2
shift 2
run=${top_builddir:-.}/test/mpi/mpirun.sh
prog=${top_builddir:-.}/test/mpi/test_mpi_stress
# a hung run fails instead of hanging make check
GPUPORT_TEST_TIMEOUT=${GPUPORT_TEST_TIMEOUT:-90}
export GPUPORT_TEST_TIMEOUT
fails=0

"$run" "$np" "$prog" "$@" || fails=$((fails + 1))

# what the failed check must say for each kind of damage
reason() {
    case $1 in
        data) echo 'CHECK failed: .*(destination == shadow|when the signal came)' ;;
        dst-guard) echo 'CHECK failed: .*guard byte [0-9]+ after the destination is 0x' ;;
        src-guard) echo 'CHECK failed: .*guard byte [0-9]+ before the source is 0x' ;;
    esac
}

out=$(mktemp "${TMPDIR:-/tmp}/gpuport-stress.XXXXXX") || exit 1
trap 'rm -f "$out"' EXIT
for p in $plants; do
    kind=${p%%:*}
    scenario=${p#*:}
    # The damaged rank fails at once; its peers then wait for it until
    # GPUPORT_TIMEOUT_MS: short here, so that the run ends soon.
    GPUPORT_TIMEOUT_MS=2000 "$run" "$np" "$prog" --plant "$kind" -s "$scenario" >"$out" 2>&1
    rc=$?
    sed 's/^/    | /' "$out"
    if [ $rc -eq 0 ]; then
        echo "FAIL: --plant $kind ($scenario, $np ranks) passed: the damage went unseen"
        fails=$((fails + 1))
    elif ! grep -q 'planted' "$out"; then
        echo "FAIL: --plant $kind ($scenario, $np ranks) failed before any damage was planted"
        fails=$((fails + 1))
    elif ! grep -Eq "$(reason "$kind")" "$out"; then
        echo "FAIL: --plant $kind ($scenario, $np ranks) failed, but not for the planted damage"
        fails=$((fails + 1))
    else
        echo "ok: --plant $kind ($scenario, $np ranks) failed as it must:"
        grep -E "$(reason "$kind")" "$out" | head -n 1
    fi
done
[ $fails -eq 0 ]
