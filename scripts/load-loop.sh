#!/usr/bin/env bash
# Runs test suites again and again while CPU hogs keep every core busy: the
# failures a slow, loaded machine shows (a timing assumption in a test, a
# race in the library) and a quiet one hides.
#
#   usage: scripts/load-loop.sh [-n RUNS] [-s SEED] [-H HOGS] [-o OUT] BUILD SUITE...
#
#   BUILD  a configured and built tree (for a sanitizer build, export its
#          options first, as .ci/run does: TSAN_OPTIONS=suppressions=...)
#   SUITE  unit (every unit test: processes and in-process ranks over shm,
#          tcp and the test transport), mpi (test/mpi's scripts: channels,
#          stress and death at 2 and 4 ranks), net (test/net's: two hosts in
#          network namespaces; root only, else they skip), or a test's path
#          as make check names it (test/unit/test_process_channels)
#   -n     runs of each suite (default 10)
#   -s     seed (default: from the clock, printed); run r exports
#          GPUPORT_TEST_SEED=SEED+r (test_mpi_stress draws its traffic from
#          it) and shuffles the suite's order with the same number, so a
#          failure is replayed with the run's seed
#   -H     CPU hogs (default: one per core plus one)
#   -o     where failed runs' logs are kept (default: a new /tmp directory)
#
# Each run is `make check TESTS=...` of the suite in BUILD. A test that
# fails keeps its log as OUT/SUITE.RUN.TEST.log. The last lines say, per
# suite, "SUITE: N runs, F failed" and which tests failed how often; the
# exit status is 1 if any run failed.
set -u
runs=10 seed= hogs= out=
while getopts n:s:H:o: opt; do
    case $opt in
        n) runs=$OPTARG ;;
        s) seed=$OPTARG ;;
        H) hogs=$OPTARG ;;
        o) out=$OPTARG ;;
        *) sed -n '2,30p' "$0" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
if [ $# -lt 2 ] || [ ! -f "$1/Makefile" ]; then
    echo "usage: $0 [-n RUNS] [-s SEED] [-H HOGS] [-o OUT] BUILD SUITE... (BUILD: a built tree)" >&2
    exit 2
fi
case $runs in '' | *[!0-9]*) echo "$0: -n $runs: a number of runs" >&2; exit 2 ;; esac
build=$(cd "$1" && pwd)
shift
seed=${seed:-$(( $(date +%s) % 100000 ))}
case $seed in '' | *[!0-9]*) echo "$0: -s $seed: a number" >&2; exit 2 ;; esac
hogs=${hogs:-$(( $(nproc) + 1 ))}
out=${out:-$(mktemp -d /tmp/gpuport-load.XXXXXX)}
mkdir -p "$out"

# the suite's tests, as make check names them
tests_of() {
    case $1 in
        unit) make -s -C "$build" print-unit-tests | sed -n 's/^unit-tests: //p' ;;
        mpi) make -s -C "$build" print-tests | sed -n 's/^tests: //p' | tr ' ' '\n' |
                 grep -E '^test/mpi/(channels|stress|death)_[a-z0-9]+\.sh$' | tr '\n' ' ' ;;
        net) make -s -C "$build" print-tests | sed -n 's/^tests: //p' | tr ' ' '\n' |
                 grep -E '^test/net/' | tr '\n' ' ' ;;
        *) echo "$1" ;;
    esac
}

# the words in a random order drawn from the number $1
shuffled() {
    local n=$1
    shift
    printf '%s\n' "$@" | awk -v s="$n" 'BEGIN { srand(s) } { print rand() "\t" $0 }' |
        sort -k1,1 | cut -f2 | tr '\n' ' '
}

hog_pids=()
stop_hogs() {
    [ ${#hog_pids[@]} -gt 0 ] && kill "${hog_pids[@]}" 2>/dev/null
    hog_pids=()
}
trap stop_hogs EXIT
for _ in $(seq 1 "$hogs"); do
    sh -c 'while :; do :; done' &
    hog_pids+=($!)
done

echo "load-loop: build $build, $runs run(s) of: $*; seed $seed; $hogs CPU hog(s) on $(nproc) core(s); logs of failures in $out"
any=0
summary=()
for suite in "$@"; do
    list=$(tests_of "$suite")
    if [ -z "$list" ]; then
        echo "load-loop: suite $suite has no tests in $build" >&2
        any=1
        continue
    fi
    failed=0
    declare -A count=()
    for r in $(seq 1 "$runs"); do
        s=$((seed + r))
        # shellcheck disable=SC2086
        order=$(shuffled "$s" $list)
        t0=$(date +%s)
        # shellcheck disable=SC2086
        GPUPORT_TEST_SEED=$s make -s -C "$build" check TESTS="$order" >"$out/.make.log" 2>&1
        rc=$?
        bad=$(grep -E '^(FAIL|ERROR):' "$out/.make.log" | sed 's/^[A-Z]*: //')
        if [ $rc -ne 0 ] || [ -n "$bad" ]; then
            failed=$((failed + 1))
            [ -n "$bad" ] || bad="(make: exit $rc)"
            for t in $bad; do
                count[$t]=$(( ${count[$t]:-0} + 1 ))
                # automake's log: the test's name with .sh (a script's) replaced
                log=$build/${t%.sh}.log
                [ -f "$log" ] && cp "$log" "$out/$suite.$r.$(echo "$t" | tr / _).log"
            done
            cp "$out/.make.log" "$out/$suite.$r.make.log"
            echo "load-loop: $suite run $r (seed $s): FAILED: $bad ($(( $(date +%s) - t0 )) s)"
        else
            echo "load-loop: $suite run $r (seed $s): passed ($(( $(date +%s) - t0 )) s)"
        fi
    done
    line="$suite: $runs runs, $failed failed"
    for t in "${!count[@]}"; do
        line="$line; $t ${count[$t]}x"
    done
    unset count
    summary+=("$line")
    [ $failed -eq 0 ] || any=1
done
rm -f "$out/.make.log"
stop_hogs
for l in "${summary[@]}"; do
    echo "$l"
done
exit $any
