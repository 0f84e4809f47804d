#!/bin/sh
# The launch-queue stall suite (docs/DESIGN.md, hazards H1-H3), run on
# a machine with 2 GPUs; exits 77 where there are fewer.
#   queued kernels N in {100, 1100} x CUDA_DEVICE_MAX_CONNECTIONS in {1, default}
#   cold: 5 fresh process pairs, first use of everything inside the scenario
#   warm: 20 runs in one process pair after a warm-up exchange
#   with MAX_CONNECTIONS=1 and N=1100 each run also proves the hazard exists
# plus the exchange captured in a CUDA graph and replayed, and 4 channels/blocks.
bin=${top_builddir:-.}/test/gpu/test_gpu_stall
fails=0
runs=0

run() {
    runs=$((runs + 1))
    echo "== $*"
    "$@"
    rc=$?
    if [ $rc -eq 77 ]; then
        echo "SKIP: $bin needs 2 GPUs"
        exit 77
    fi
    if [ $rc -ne 0 ]; then
        echo "FAIL (exit $rc): $*"
        fails=$((fails + 1))
    fi
}

for conn in 1 default; do
    for n in 100 1100; do
        hazard=
        if [ "$conn" = 1 ] && [ "$n" = 1100 ]; then
            hazard=--expect-hazard
        fi
        if [ "$conn" = default ]; then
            envset="env -u CUDA_DEVICE_MAX_CONNECTIONS CUDA_MODULE_LOADING=LAZY"
        else
            envset="env CUDA_DEVICE_MAX_CONNECTIONS=$conn CUDA_MODULE_LOADING=LAZY"
        fi
        for i in 1 2 3 4 5; do
            run $envset "$bin" --queued $n --reps 1 $hazard
        done
        run $envset "$bin" --queued $n --reps 20 --warmup $hazard
    done
    run $envset "$bin" --queued 1100 --reps 20 --graph
    run $envset "$bin" --queued 1100 --reps 5 --blocks 4
done

echo "stall suite: $((runs - fails)) of $runs runs completed with correct data"
[ $fails -eq 0 ]
