#!/usr/bin/env bash
# test/fuzz/run.sh [SECONDS] [HARNESS...]
# test/fuzz/run.sh --seeds      rewrites the seed corpora (test/fuzz/make_seeds.c)
#
# Builds the libFuzzer harnesses of test/fuzz/ with clang (address and
# undefined-behaviour sanitizers) from this source tree and a configured
# build directory's build_config.h, runs each for SECONDS (default 20)
# against a copy of its seed corpus (test/fuzz/corpus/HARNESS/), and prints
# one line per harness:
#   PASS: fuzz_x  N executions, R exec/s, ...
#   FAIL: fuzz_x  ... reproducer: PATH
# Exit status: 0 when every harness passed, 1 when any failed (a crash,
# leak, sanitizer report, timeout or broken invariant) or did not build, 77
# when clang or libFuzzer is missing.
#
# The build directory: $GPUPORT_BUILD_DIR, else the first of _build/nocuda,
# _build/cuda, _build/*, . that holds a build_config.h (run configure
# first). The harnesses' build is host-only (GPUPORT_HAVE_CUDA forced to 0);
# ib's record parsers are fuzzed where the build has GPUPORT_HAVE_IBVERBS.
# Work files go to $GPUPORT_FUZZ_DIR (default _build/fuzz): the build,
# corpus copies, logs, and crash reproducers in artifacts/HARNESS/.
# Reproduce one: _build/fuzz/bin/HARNESS PATH.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
seeds=0
if [ "${1:-}" = --seeds ]; then
    seeds=1
    shift
fi
secs=${1:-20}
[ $# -gt 0 ] && shift
all=(fuzz_trigger fuzz_proxy fuzz_records fuzz_tcp_frame fuzz_config fuzz_fdpass)
if [ $# -gt 0 ]; then harnesses=("$@"); else harnesses=("${all[@]}"); fi
for h in "${harnesses[@]}"; do
    case " ${all[*]} " in
    *" $h "*) ;;
    *) echo "run.sh: unknown harness '$h' (known: ${all[*]})" >&2; exit 2 ;;
    esac
done
case $secs in
'' | *[!0-9]* | 0) echo "run.sh: SECONDS must be a whole number of 1 or more, not '$secs'" >&2
    exit 2 ;;
esac
jobs=${GPUPORT_FUZZ_JOBS:-2}
work=${GPUPORT_FUZZ_DIR:-$root/_build/fuzz}

cc=${CC_FUZZ:-}
if [ -z "$cc" ]; then
    for c in clang clang-19 clang-18 clang-17 clang-16 clang-15 clang-14; do
        command -v "$c" >/dev/null 2>&1 && { cc=$c; break; }
    done
fi
if [ -z "$cc" ]; then
    echo "SKIP: fuzzing needs clang (Debian: apt-get install clang), which is not installed"
    exit 77
fi
mkdir -p "$work"
probe=$work/probe.c
printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
    'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }' \
    >"$probe"
if ! "$cc" -fsanitize=fuzzer,address,undefined "$probe" -o "$work/probe" 2>"$work/probe.log"; then
    echo "SKIP: $cc cannot build a libFuzzer program (-fsanitize=fuzzer,address,undefined):"
    head -n 5 "$work/probe.log"
    exit 77
fi

build=${GPUPORT_BUILD_DIR:-}
if [ -z "$build" ]; then
    for d in "$root/_build/nocuda" "$root/_build/cuda" "$root"/_build/* "$root"; do
        [ -f "$d/build_config.h" ] && { build=$d; break; }
    done
fi
if [ -z "$build" ] || [ ! -f "$build/build_config.h" ]; then
    echo "run.sh: no configured build directory with a build_config.h (run configure, or set" \
         "GPUPORT_BUILD_DIR)" >&2
    for h in "${harnesses[@]}"; do echo "FAIL: $h  not built: no configured build directory"; done
    exit 1
fi

# The harnesses' build_config.h: the configured one, host-only. Rewritten
# only when it changes, so that make rebuilds only what changed.
mkdir -p "$work/include"
sed -e 's/^#define GPUPORT_HAVE_CUDA 1$/#define GPUPORT_HAVE_CUDA 0/' \
    -e 's/^#define GPUPORT_BUILD_CUDA .*/#define GPUPORT_BUILD_CUDA "no"/' \
    "$build/build_config.h" >"$work/include/build_config.h.new"
if cmp -s "$work/include/build_config.h.new" "$work/include/build_config.h"; then
    rm -f "$work/include/build_config.h.new"
else
    mv "$work/include/build_config.h.new" "$work/include/build_config.h"
fi
have_ib=0
grep -q '^#define GPUPORT_HAVE_IBVERBS 1' "$work/include/build_config.h" && have_ib=1
mkvar() { sed -n "s/^$1 = //p" "$build/Makefile" 2>/dev/null | head -n 1; }
hwloc_cflags=$(mkvar HWLOC_CFLAGS)
hwloc_libs=$(mkvar HWLOC_LIBS)
ib_cflags=$(mkvar IBVERBS_CFLAGS)
[ -n "$hwloc_libs" ] || hwloc_libs=-lhwloc

# The library as the harnesses link it: the core and the host transports,
# with coverage instrumentation; src/log.c is replaced by fuzz_log.c.
cd "$root"
srcs=$(ls src/*.c src/channel/*.c src/comm/*.c src/fdpass/*.c src/mem/*.c src/proxy/*.c \
       src/transport/registry.c src/transport/sm/*.c src/transport/shm/*.c \
       src/transport/tcp/*.c src/transport/ib/ib_settings.c \
       src/transport/cuda_ipc/cipc_settings.c src/transport/cuda_ipc/cipc_check.c |
       grep -v '^src/log\.c$')
# ib's and cuda_ipc's settings are in every build (the registry names them), and
# cuda_ipc's check of its peer's relay requests; ib's rest with verbs
[ "$have_ib" = 1 ] && srcs="$srcs $(ls src/transport/ib/*.c | grep -v '/ib_settings\.c$')"
mk=$work/Makefile.new
# obj OBJECT SOURCE [FLAGS]: a compile rule (objects follow the Makefile too:
# a change of flags rebuilds them)
obj() {
    echo "$1: $2 Makefile"
    printf '\t@mkdir -p obj\n\t$(COMPILE) %s -c $< -o $@\n' "${3:-}"
}
{
    echo "CC = $cc"
    echo "SAN = -fsanitize=address,undefined -fno-sanitize-recover=all"
    echo "CFLAGS = -g -O1 -std=gnu11 -fno-omit-frame-pointer -Wall -Wno-unused-parameter \$(SAN)"
    echo "CPPFLAGS = -D_GNU_SOURCE -I$work/include -I$root/include -I$root/src" \
         "-I$root/test/fuzz $hwloc_cflags $ib_cflags"
    echo "COMPILE = \$(CC) \$(CPPFLAGS) \$(CFLAGS) -MMD -MP"
    echo "COVERAGE = -fsanitize=fuzzer-no-link"
    echo "LIBS = $hwloc_libs -ldl -lpthread"
    objs=""
    for s in $srcs; do
        o=obj/$(echo "${s%.c}" | tr / _).o
        objs="$objs $o"
        obj "$o" "$root/$s" '$(COVERAGE)'
    done
    echo "libgpuport_fuzz.a:$objs"
    printf '\trm -f $@\n\tar rcs $@ $^\n'
    obj obj/fuzz_log.o "$root/test/fuzz/fuzz_log.c"
    for h in "${all[@]}"; do
        obj "obj/$h.o" "$root/test/fuzz/$h.c" '$(COVERAGE)'
        echo "bin/$h: obj/$h.o obj/fuzz_log.o libgpuport_fuzz.a"
        printf '\t@mkdir -p bin\n\t$(CC) $(CFLAGS) -fsanitize=fuzzer $^ $(LIBS) -o $@\n'
    done
    obj obj/make_seeds.o "$root/test/fuzz/make_seeds.c"
    echo "bin/make_seeds: obj/make_seeds.o obj/fuzz_log.o libgpuport_fuzz.a"
    printf '\t@mkdir -p bin\n\t$(CC) $(CFLAGS) $^ $(LIBS) -o $@\n'
    echo "-include obj/*.d"
} >"$mk"
cmp -s "$mk" "$work/Makefile" && rm -f "$mk" || mv "$mk" "$work/Makefile"

echo "=== fuzz: building with $cc (build_config.h of $build) in $work"
if [ "$seeds" = 1 ]; then
    make -C "$work" -j"$jobs" -s bin/make_seeds || exit 1
    find "$here/corpus" -type f ! -name 'regress-*' -delete
    "$work/bin/make_seeds" "$here/corpus" || exit 1
    for d in "$here"/corpus/*/; do echo "$(ls "$d" | wc -l) seeds in ${d#"$root"/}"; done
    exit 0
fi
targets=()
for h in "${harnesses[@]}"; do targets+=("bin/$h"); done
if ! make -C "$work" -j"$jobs" -s "${targets[@]}" >"$work/build.log" 2>&1; then
    tail -n 40 "$work/build.log"
    for h in "${harnesses[@]}"; do echo "FAIL: $h  did not build (see $work/build.log)"; done
    exit 1
fi

# Per-harness libFuzzer options: inputs long enough for what they parse.
opts_of() {
    case $1 in
    fuzz_tcp_frame) echo "-max_len=70000" ;;
    fuzz_proxy) echo "-max_len=2048" ;;
    fuzz_config) echo "-max_len=600" ;;
    fuzz_fdpass) echo "-max_len=8192" ;;
    *) echo "-max_len=4096" ;;
    esac
}

failed=0
for h in "${harnesses[@]}"; do
    corpus=$work/corpus/$h
    art=$work/artifacts/$h
    log=$work/logs/$h.log
    rm -rf "$corpus"
    mkdir -p "$corpus" "$art" "$work/logs"
    [ -d "$here/corpus/$h" ] && cp "$here/corpus/$h"/* "$corpus"/ 2>/dev/null
    nseeds=$(ls "$corpus" | wc -l)
    before=$(ls "$art" | wc -l)
    # shellcheck disable=SC2046
    ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1} \
    UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
        "$work/bin/$h" -max_total_time="$secs" -timeout=20 -error_exitcode=1 \
        -print_final_stats=1 -artifact_prefix="$art/" $(opts_of "$h") "$corpus" >"$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
    cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$log" | tail -n 1)
    units=$(ls "$corpus" | wc -l)
    repro=none
    [ "$(ls "$art" | wc -l)" -gt "$before" ] && repro=$art/$(ls -t "$art" | head -n 1)
    if [ "$rc" -ne 0 ] || [ "$repro" != none ]; then
        failed=$((failed + 1))
        echo "----- $h: last 60 lines of $log"
        tail -n 60 "$log"
        echo "FAIL: $h  exit $rc after ${execs:-?} executions; reproducer: $repro" \
             "(rerun: $work/bin/$h $repro)"
    else
        echo "PASS: $h  ${execs:-?} executions, ${rate:-?} exec/s, ${secs} s, $cov," \
             "corpus $nseeds -> $units"
    fi
done
[ "$failed" -eq 0 ]
