#!/usr/bin/env bash
# The tcp transport's GPU paths on a machine with ONE GPU: both processes of
# each test on GPU 0 (GPUPORT_TEST_ONE_GPU=1). Their contexts take turns on
# the GPU, so exchanges run at time-slice pace; what this shows is that data
# arrives intact and that nothing hangs when the launch queue is full.
#   usage: scripts/gpu-one.sh [BUILD_DIR] [OUT_DIR]   (build: scripts/gpu-build.sh)
set -u
cd "$(dirname "$0")/.."
build=${1:-_build/gpu}
out=${2:-gpu-one-results}
mkdir -p "$out"
export GPUPORT_TEST_ONE_GPU=1 top_builddir=$build top_srcdir=. GPUPORT_LOG_LEVEL=${GPUPORT_LOG_LEVEL:-warn}
pass=0 fail=0
step() {
    local name=$1 limit=$2 rc=0 t0=$SECONDS
    shift 2
    timeout --kill-after=10 "$limit" "$@" >"$out/$name.log" 2>&1 || rc=$?
    if [ $rc -eq 0 ]; then pass=$((pass + 1)); echo "PASS $name ($((SECONDS - t0)) s)"
    else fail=$((fail + 1)); echo "FAIL (exit $rc) $name ($((SECONDS - t0)) s)"; tail -n 15 "$out/$name.log"; fi
}
nvidia-smi --query-gpu=name,driver_version --format=csv >"$out/machine.txt" 2>&1
stall=$build/test/gpu/test_gpu_stall
step channels-tcp 300 env GPUPORT_TRANSPORT=tcp "$build/test/gpu/test_gpu_channels"
# the launch-queue hazard (1 connection, 1,100 kernels queued) and without
export GPUPORT_TIMEOUT_MS=${GPUPORT_TIMEOUT_MS:-20000}
step stall-tcp-conn1-q1100 100 env GPUPORT_TRANSPORT=tcp CUDA_DEVICE_MAX_CONNECTIONS=1 \
    "$stall" --queued 1100 --reps 2 --iters 1000 --expect-hazard
step stall-tcp-default-q1100 100 env -u CUDA_DEVICE_MAX_CONNECTIONS GPUPORT_TRANSPORT=tcp \
    "$stall" --queued 1100 --reps 2 --iters 1000
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
