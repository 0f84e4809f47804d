#!/usr/bin/env bash
# Every GPU test and benchmark, on a machine with 2 GPUs, from a build made
# by scripts/gpu-build.sh: the GPU tests, the launch-queue stall matrix,
# gpuport_bench in GPU mode, then the CPU suites of the CUDA build (where
# every communicator now runs in GPU mode). Logs go to OUT.
#   usage: scripts/gpu-suite.sh [BUILD_DIR] [OUT_DIR]
# GPU_SUITE_ONLY=REGEX runs only the steps whose names match (grep -E).
set -u
cd "$(dirname "$0")/.."
build=${1:-_build/gpu}
out=${2:-gpu-results}
mkdir -p "$out"
# Build here when there is no build: needs the CUDA toolkit and either
# libtool (for autogen) or a carried configure. On a GPU host without them,
# build with scripts/gpu-build.sh elsewhere and bring BUILD_DIR along.
if [ ! -x "$build/tools/gpuport_bench" ]; then
    echo "no build in $build: building one with scripts/gpu-build.sh"
    bash scripts/gpu-build.sh || exit 1
    build=_build/gpu
fi
GPUPORT_LOG_LEVEL=${GPUPORT_LOG_LEVEL:-warn}
export top_builddir=$build top_srcdir=. GPUPORT_LOG_LEVEL
pass=0 fail=0 skip=0

{
    date -u
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    nvidia-smi topo -m
} >"$out/machine.txt" 2>&1

# step NAME LIMIT COMMAND...: runs with a time limit, log in OUT/NAME.log
step() {
    local name=$1 limit=$2
    shift 2
    if [ -n "${GPU_SUITE_ONLY:-}" ] && ! echo "$name" | grep -Eq "$GPU_SUITE_ONLY"; then
        return
    fi
    local t0=$SECONDS rc=0
    timeout --kill-after=10 "$limit" "$@" >"$out/$name.log" 2>&1 || rc=$?
    case $rc in
    0) pass=$((pass + 1)); verdict=PASS ;;
    77) skip=$((skip + 1)); verdict=SKIP ;;
    124 | 137) fail=$((fail + 1)); verdict="FAIL (timeout ${limit}s)" ;;
    *) fail=$((fail + 1)); verdict="FAIL (exit $rc)" ;;
    esac
    echo "$verdict $name ($((SECONDS - t0)) s)"
    if [ "$verdict" != PASS ]; then tail -n 25 "$out/$name.log"; fi
}

# what gpuport sees here: build, GPUs, transports, variables, placement
step info 60 "$build/tools/gpuport_info"
step info-placement 60 "$build/tools/gpuport_info" -n 2
step info-config 60 "$build/tools/gpuport_info" -c
step unit-test_topology 60 "$build/test/unit/test_topology"
step gpu-fifo 120 "$build/test/gpu/test_gpu_fifo"
step gpu-channels 180 "$build/test/gpu/test_gpu_channels"
step gpu-death 120 "$build/test/gpu/test_gpu_death"
step gpu-stall 300 sh test/gpu/stall_suite.sh
step gpu-vmm 300 "$build/test/gpu/test_gpu_vmm"
step gpu-noctx 60 "$build/test/gpu/test_gpu_noctx"
step gpu-held 120 "$build/test/gpu/test_gpu_held"
step bench-gpu 180 "$build/test/mpi/mpirun.sh" 2 "$build/tools/gpuport_bench"
# IPC bandwidth over cudaMalloc and VMM memory side by side, one baseline
step bench-gpu-mem-both 300 "$build/test/mpi/mpirun.sh" 2 "$build/tools/gpuport_bench" --mem both
# the CPU suites again, now with GPU mode on in every communicator
for t in test_local_channels test_process_channels test_fifo test_config test_record; do
    step "unit-$t" 60 "$build/test/unit/$t"
done
step mpi-np2 120 "$build/test/mpi/mpirun.sh" 2 "$build/test/mpi/test_mpi_channels"
# tcp between the two GPUs' processes (loopback here): GPU memory through
# the flushers' staging copies, the launch-queue stall matrix over it, the
# host-memory suite in GPU mode, and the benchmark
step gpu-channels-tcp 300 env GPUPORT_TRANSPORT=tcp "$build/test/gpu/test_gpu_channels"
step gpu-death-tcp 120 env GPUPORT_TRANSPORT=tcp "$build/test/gpu/test_gpu_death"
step gpu-stall-tcp 300 env GPUPORT_TRANSPORT=tcp sh test/gpu/stall_suite.sh
step mpi-np2-tcp 120 env GPUPORT_TRANSPORT=tcp "$build/test/mpi/mpirun.sh" 2 "$build/test/mpi/test_mpi_channels"
step bench-gpu-tcp 300 env GPUPORT_TRANSPORT=tcp "$build/test/mpi/mpirun.sh" 2 "$build/tools/gpuport_bench"
# the same cuda_ipc benchmark with the threads left unbound, for comparison
step bench-gpu-unbound 180 env GPUPORT_BIND=0 "$build/test/mpi/mpirun.sh" 2 "$build/tools/gpuport_bench"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
