#!/bin/sh
# Runs the Python package's tests under mpirun and prints one PASS, FAIL or
# SKIP line per case, then "python: N pass, M fail, K skip"; exits 1 if any
# case failed, 77 if every case was skipped (gpuport, pytest or mpirun
# missing), else 0. The package must be installed for $PYTHON (default
# python3): python/README.md says how.
#   usage: test/python/run.sh        (from the repository root or anywhere)
# Cases: the pytest suite at 2 and 4 ranks over shm and tcp (each rank's
# pytest must pass; its log is printed when it does not), the interpreter
# exiting with live channels (2 ranks over shm, 4 over tcp), and a peer
# dying under a Python wait (2 ranks, shm and tcp), and
# python/examples/pingpong_numpy.py (2 ranks).
# GPUPORT_MPIRUN_SH: a build's test/mpi/mpirun.sh (the launcher and flags
# configure found, and how to outlive a dying rank); without it, Open MPI's
# mpirun with --oversubscribe --bind-to none.
# GPUPORT_PY_TIMEOUT: seconds per case (default 120).
here=$(cd "$(dirname "$0")" && pwd)
PYTHON=${PYTHON:-python3}
limit=${GPUPORT_PY_TIMEOUT:-120}
logs=$(mktemp -d "${TMPDIR:-/tmp}/gpuport-py.XXXXXX") || exit 1
trap 'rm -rf "$logs"' EXIT
pass=0 fail=0 skip=0

say() { echo "$1: python/$2${3:+: $3}"; }
skip_all() {
    echo "SKIP: python: $1"
    echo "python: 0 pass, 0 fail, 1 skip"
    exit 77
}

$PYTHON -c 'import gpuport' 2>"$logs/import.err" ||
    skip_all "the gpuport package is not importable by $PYTHON ($(tail -n 1 "$logs/import.err")); install it: python/README.md"
$PYTHON -c 'import pytest' 2>/dev/null || skip_all "pytest is missing for $PYTHON (apt-get install python3-pytest)"

# launch NP [ENV=VALUE...] -- ARGS...: the command under mpirun with a time limit.
launch() {
    np=$1
    shift
    if [ -n "${GPUPORT_MPIRUN_SH:-}" ]; then
        GPUPORT_TEST_TIMEOUT=$limit sh "$GPUPORT_MPIRUN_SH" "$np" "$@"
        return
    fi
    command -v mpirun >/dev/null 2>&1 || { echo "no mpirun"; return 77; }
    root=
    [ "$(id -u)" = 0 ] && root=--allow-run-as-root
    [ "${GPUPORT_TEST_OUTLIVE:-0}" = 1 ] && export OMPI_MCA_orte_enable_recovery=1
    timeout --foreground --kill-after=10 "$limit" \
        mpirun -np "$np" --oversubscribe --bind-to none $root "$@" </dev/null
}

# Each rank writes its own log (rank from Open MPI's or MPICH's variable).
per_rank='r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-x}}; exec "$@" >"$LOGS/rank$r.log" 2>&1'

pytest_case() {
    np=$1 tr=$2 name="pytest np$np $2"
    rm -f "$logs"/rank*.log
    LOGS=$logs GPUPORT_TRANSPORT=$tr launch "$np" env LOGS="$logs" GPUPORT_TRANSPORT="$tr" \
        sh -c "$per_rank" sh $PYTHON -m pytest -q -p no:cacheprovider --color=no \
        --tb=short -rs "$here" >"$logs/mpirun.out" 2>&1
    rc=$?
    bad=0 counts=
    for r in $(seq 0 $((np - 1))); do
        log=$logs/rank$r.log
        line=$(grep -E '^[0-9]+ (passed|failed|skipped)|(passed|failed|error).* in [0-9.]+s' "$log" 2>/dev/null | tail -n 1)
        counts="$counts rank$r: ${line:-no summary};"
        case $line in
            *failed*|*error*|'') bad=1 ;;
        esac
    done
    if [ $rc -eq 77 ]; then
        say SKIP "$name" "no MPI launcher"; skip=$((skip + 1))
    elif [ $rc -ne 0 ] || [ $bad -ne 0 ]; then
        say FAIL "$name" "mpirun exit $rc;$counts"
        cat "$logs/mpirun.out"
        for f in "$logs"/rank*.log; do echo "----- $f"; cat "$f"; done
        fail=$((fail + 1))
    else
        say PASS "$name" "${counts# }"
        pass=$((pass + 1))
    fi
}

exit_case() {
    np=$1 tr=$2 name="exit with live channels np$1 $2"
    start=$(date +%s)
    GPUPORT_TIMEOUT_MS=10000 GPUPORT_TRANSPORT=$tr launch "$np" env GPUPORT_TIMEOUT_MS=10000 \
        GPUPORT_TRANSPORT="$tr" $PYTHON -W always "$here/exit_live.py" >"$logs/exit.out" 2>&1
    rc=$? took=$(( $(date +%s) - start ))
    closed=$(grep -c 'gpuport: at exit, rank [0-9]*: closed a communicator that was not closed.*left open: .*PortChannel(peer [0-9]*, '"$tr"').*dropped without close()' "$logs/exit.out")
    warned=$(grep -c 'LeakWarning: gpuport: a PortChannel to peer' "$logs/exit.out")
    if [ $rc -eq 0 ] && [ "$closed" -eq "$np" ] && [ "$warned" -eq "$np" ] && [ $took -lt 30 ]; then
        say PASS "$name" "every rank closed at exit and said what was left, ${took}s"
        pass=$((pass + 1))
    else
        say FAIL "$name" "exit $rc, $closed of $np ranks reported, $warned leak warnings, ${took}s"
        cat "$logs/exit.out"
        fail=$((fail + 1))
    fi
}

example_case() {
    name="example pingpong_numpy np2 shm"
    GPUPORT_TRANSPORT=shm launch 2 env GPUPORT_TRANSPORT=shm \
        $PYTHON "$here/../../python/examples/pingpong_numpy.py" >"$logs/example.out" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && [ "$(grep -o 'all checked' "$logs/example.out" | wc -l)" -eq 2 ]; then
        say PASS "$name"
        pass=$((pass + 1))
    else
        say FAIL "$name" "exit $rc"
        cat "$logs/example.out"
        fail=$((fail + 1))
    fi
}

death_case() {
    tr=$1 name="peer dies under wait np2 $1"
    GPUPORT_TEST_OUTLIVE=1 GPUPORT_TIMEOUT_MS=10000 GPUPORT_TRANSPORT=$tr launch 2 \
        env GPUPORT_TIMEOUT_MS=10000 GPUPORT_TRANSPORT="$tr" $PYTHON "$here/peer_death.py" \
        >"$logs/death.out" 2>&1
    if grep -q '^PASS rank 0' "$logs/death.out" && ! grep -q '^FAIL' "$logs/death.out"; then
        say PASS "$name" "$(grep '^PASS rank 0' "$logs/death.out" | cut -c1-100)"
        pass=$((pass + 1))
    else
        say FAIL "$name" "no PASS line from rank 0"
        cat "$logs/death.out"
        fail=$((fail + 1))
    fi
}

for np in 2 4; do
    for tr in shm tcp; do
        pytest_case "$np" "$tr"
    done
done
exit_case 2 shm
exit_case 4 tcp
death_case shm
death_case tcp
example_case

echo "python: $pass pass, $fail fail, $skip skip"
[ $fail -gt 0 ] && exit 1
[ $pass -eq 0 ] && exit 77
exit 0
