#!/usr/bin/env bash
# Probes: small programs, outside the library, that measured what
# docs/ARCHITECTURE.md and docs/PERFORMANCE.md say about the CUDA driver
# and the machine (tools/probes/*.c, *.cu; each file says what it shows).
#   scripts/probes.sh build [DIR]   compile them into DIR (default _build/probes;
#                                   the CUDA ones only where nvcc is found)
#   scripts/probes.sh run [DIR]     run each one found in DIR, output to stdout
# scripts/gpu-build.sh builds them into _build/gpu/probes; scripts/gpu-one.sh
# runs them there (steps probe-*).
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-}
dir=${2:-_build/probes}
case $what in
build)
    mkdir -p "$dir"
    cc=${CC:-gcc}
    "$cc" -O2 -Wall -o "$dir/wake_cost" tools/probes/wake_cost.c -lpthread
    nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
    if [ -x "$nvcc" ]; then
        for p in gpu_wake held_copy held_pull held_relay ctx_reduce; do
            "$nvcc" -O2 -arch=sm_90 -o "$dir/$p" "tools/probes/$p.cu" -lcuda -lpthread
        done
    else
        echo "probes: no nvcc: the CUDA probes are not built" >&2
    fi
    echo "probes built in $dir"
    ;;
run)
    [ -x "$dir/wake_cost" ] || { echo "probes: nothing built in $dir (scripts/probes.sh build)" >&2; exit 2; }
    echo "== wake_cost"; timeout 60 "$dir/wake_cost"
    if [ -x "$dir/held_copy" ]; then echo "== held_copy"; timeout 120 "$dir/held_copy"; fi
    if [ -x "$dir/held_pull" ]; then echo "== held_pull"; timeout 60 "$dir/held_pull"; fi
    if [ -x "$dir/held_relay" ]; then echo "== held_relay"; timeout 60 "$dir/held_relay"; fi
    if [ -x "$dir/ctx_reduce" ]; then echo "== ctx_reduce"; timeout 120 "$dir/ctx_reduce"; fi
    if [ -x "$dir/gpu_wake" ]; then
        for m in vmm host "vmm ctxflag"; do echo "== gpu_wake $m"; timeout 60 "$dir/gpu_wake" $m; done
    fi
    ;;
*)
    echo "usage: $0 build|run [DIR]" >&2
    exit 2
    ;;
esac
