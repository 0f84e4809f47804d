#!/usr/bin/env bash
# Host-memory rows on the GPU machine, each variant ROUNDS times (default
# 2), in turn, so that a variant's figures sit beside its neighbours' from
# the same minutes: shm and tcp (beside MPI over TCP) with the callers'
# inline path on and off (GPUPORT_HOST_INLINE), and tcp with it on but the
# waits' own receives off (GPUPORT_SOCKET_HOST_RECV=0).
#   usage: [ROUNDS=N] [VARIANTS=REGEX] scripts/gpu-host-rows.sh [BUILD_DIR] [OUT_DIR]
# VARIANTS runs only the variants whose names match (grep -E), e.g. ^tcp.
set -u
cd "$(dirname "$0")/.."
build=${1:-_build/gpu}
out=${2:-gpu-host-rows}
mkdir -p "$out"
export GPUPORT_TEST_TIMEOUT=120 GPUPORT_LOG_LEVEL=${GPUPORT_LOG_LEVEL:-warn}
run() {
    local name=$1
    shift
    if [ -n "${VARIANTS:-}" ] && ! echo "$name" | grep -Eq "$VARIANTS"; then return; fi
    echo "== $name: $*"
    env "$@" "$build/test/mpi/mpirun.sh" 2 "$build/tools/gpuport_bench" --host --max-size 1m \
        --csv "$out/$name.csv" >"$out/$name.log" 2>&1 || echo "FAIL $name"
    grep -E '^ +(8 B|1 KiB|4 KiB|64 KiB|1 MiB) \|' "$out/$name.log" | head -5
}
for i in $(seq 1 "${ROUNDS:-2}"); do
    run shm-inline-$i GPUPORT_HOST_INLINE=1
    run shm-noinline-$i GPUPORT_HOST_INLINE=0
    run tcp-inline-$i GPUPORT_TRANSPORT=tcp GPUPORT_HOST_INLINE=1 OMPI_MCA_btl=tcp,self
    run tcp-nohostrecv-$i GPUPORT_TRANSPORT=tcp GPUPORT_HOST_INLINE=1 GPUPORT_SOCKET_HOST_RECV=0 \
        OMPI_MCA_btl=tcp,self
    run tcp-noinline-$i GPUPORT_TRANSPORT=tcp GPUPORT_HOST_INLINE=0 OMPI_MCA_btl=tcp,self
done
