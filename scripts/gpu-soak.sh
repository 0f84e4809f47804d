#!/usr/bin/env bash
# Soak of the launch-queue stall scenario (test/gpu/test_gpu_stall): N cold
# process pairs, each with parameters drawn from a seeded generator:
#   queued kernels behind the exchange   0..1100
#   CUDA_DEVICE_MAX_CONNECTIONS          1 or unset
#   blocks (one channel each)            1, 2, 4 or 8
#   transport and memory                 cuda_ipc over cudaMalloc, or
#                                        GPUPORT_TRANSPORT=tcp over VMM memory
#                                        (gpuport_mem_alloc_device)
#   the exchange in a CUDA graph         GRAPH_PCT percent of the runs
# Each run does ITERS put_with_signal + wait exchanges per block, under a
# time limit; at the end a table: runs, passes, hangs (time limit or the
# test's own watchdog or a device wait that timed out), data mismatches,
# other failures, and the parameters and replay command of every failure.
#
#   usage: scripts/gpu-soak.sh N [BUILD_DIR] [OUT_DIR]
#     BUILD_DIR  a build with test/gpu/test_gpu_stall (default _build/gpu,
#                from scripts/gpu-build.sh)
#     OUT_DIR    logs of failed runs, runs.tsv, summary.txt (default gpu-soak-results)
#   SEED=S       replays a soak (the seed is printed); default: from the clock
#   ITERS=I      exchanges per block and run (default 50)
#   RUN_LIMIT=S  seconds before a run counts as hung (default 30)
#   GRAPH_PCT=P  share of runs with --graph (default 10)
#   KEEP_LOGS=1  keep the logs of passing runs too
#   MAX_SECONDS=S  start no run after S seconds (the table says how many ran)
# GPUPORT_TEST_ONE_GPU=1 (both processes on GPU 0) is the default where
# nvidia-smi lists one GPU; set it to 0 to insist on two.
#
# Sized to fit 200 runs in under 9 minutes on one H200 (an estimate, not a
# measurement): there, with the two processes' contexts taking turns on the
# GPU, an exchange took 5 ms over cuda_ipc (1,000 in about 5 s with 1,100
# kernels queued) and 9.3 ms over tcp (docs/PERFORMANCE.md), so 50 take
# 0.25-0.5 s; with a cold pair's start and teardown (fork, two CUDA contexts
# per process, communicator, channels) of 1.5-2 s, about 2.5 s a run at
# most. The summary gives the mean per run and what 200 would take.
set -u
cd "$(dirname "$0")/.." || exit 2

if [ $# -lt 1 ] || ! [[ $1 =~ ^[1-9][0-9]*$ ]]; then
    echo "usage: $0 N [BUILD_DIR] [OUT_DIR]   (N: number of runs)" >&2
    exit 2
fi
n=$1
build=${2:-_build/gpu}
out=${3:-gpu-soak-results}
bin=$build/test/gpu/test_gpu_stall
iters=${ITERS:-50}
limit=${RUN_LIMIT:-30}
graph_pct=${GRAPH_PCT:-10}
if [ ! -x "$bin" ]; then
    echo "gpu-soak: $bin not found; build with scripts/gpu-build.sh (or name BUILD_DIR)" >&2
    exit 2
fi
mkdir -p "$out" || exit 2

gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [ -z "${GPUPORT_TEST_ONE_GPU+set}" ] && [ "$gpus" -eq 1 ]; then
    export GPUPORT_TEST_ONE_GPU=1
fi
seed=${SEED:-$(( $(date +%s%N) % 1000000007 ))}
if ! [[ $seed =~ ^[0-9]+$ ]]; then
    echo "gpu-soak: SEED must be a number, not '$seed'" >&2
    exit 2
fi

# The generator: a 64-bit LCG in bash arithmetic (which wraps), so that a
# seed replays the same runs on any bash; rand N draws 0..N-1 into $r.
state=$seed
rand() {
    state=$(( state * 6364136223846793005 + 1442695040888963407 ))
    r=$(( ((state >> 33) & 0x7fffffff) % $1 ))
}

# Leave the test's watchdog (which prints where each block was) time to
# fire before the outer limit kills the pair.
# A device or host wait that times out (GPUPORT_TIMEOUT_MS, never 0: that
# waits forever) fails earlier still.
if ! [[ $limit =~ ^[0-9]+$ ]] || [ "$limit" -lt 5 ]; then
    echo "gpu-soak: RUN_LIMIT must be at least 5 seconds, not '$limit'" >&2
    exit 2
fi
watchdog=$(( limit > 10 ? limit - 5 : limit - 2 ))
export GPUPORT_TIMEOUT_MS=${GPUPORT_TIMEOUT_MS:-$(( watchdog * 900 ))}
export CUDA_MODULE_LOADING=LAZY

{
    echo "gpu-soak: $n runs, seed $seed (replay: SEED=$seed $0 $n $build $out)"
    echo "  $gpus GPU(s) listed, GPUPORT_TEST_ONE_GPU=${GPUPORT_TEST_ONE_GPU:-unset}," \
         "$iters exchanges per block, limit ${limit}s per run (watchdog ${watchdog}s," \
         "GPUPORT_TIMEOUT_MS=$GPUPORT_TIMEOUT_MS)"
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/  /'
} | tee "$out/summary.txt"
printf 'run\ttransport\tconn\tblocks\tqueued\tgraph\tresult\tseconds\n' >"$out/runs.tsv"
printf '%5s  %-8s  %-5s  %6s  %6s  %5s  %-9s  %s\n' run transport conn blocks queued graph \
    result seconds

passes=0 hangs=0 mismatches=0 others=0
failures=()
t_start=$SECONDS
ran=0
for ((i = 1; i <= n; i++)); do
    if [ -n "${MAX_SECONDS:-}" ] && [ $(( SECONDS - t_start )) -ge "$MAX_SECONDS" ]; then
        echo "gpu-soak: MAX_SECONDS=$MAX_SECONDS reached; stopping after $ran of $n runs"
        break
    fi
    ran=$i
    rand 1101; queued=$r
    rand 2; conn=$(( r ? 1 : 0 ))
    rand 4; blocks=$(( 1 << r ))
    rand 2; transport=$([ "$r" -eq 1 ] && echo tcp || echo cuda_ipc)
    rand 100; graph=$(( r < graph_pct ? 1 : 0 ))

    envs=()
    if [ "$conn" -eq 1 ]; then envs+=(CUDA_DEVICE_MAX_CONNECTIONS=1); fi
    if [ "$transport" = tcp ]; then envs+=(GPUPORT_TRANSPORT=tcp); fi
    args=(--queued "$queued" --blocks "$blocks" --iters "$iters" --reps 1 --watchdog "$watchdog")
    if [ "$graph" -eq 1 ]; then args+=(--graph); fi
    unset_conn=()
    if [ "$conn" -eq 0 ]; then unset_conn=(-u CUDA_DEVICE_MAX_CONNECTIONS); fi
    log=$(printf '%s/run-%04d.log' "$out" "$i")

    t0=$(date +%s%N)
    timeout --kill-after=5 "$limit" env "${unset_conn[@]}" "${envs[@]}" "$bin" "${args[@]}" \
        >"$log" 2>&1 </dev/null
    rc=$?
    ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    secs=$(( ms / 1000 )).$(( ms % 1000 / 100 ))
    if [ $rc -eq 0 ]; then
        result=pass
    elif [ $rc -eq 77 ]; then
        echo "gpu-soak: the test skipped (no usable GPU?):" >&2
        tail -n 5 "$log" >&2
        exit 77
    elif [ $rc -eq 124 ] || [ $rc -eq 137 ] ||
         grep -Eq 'HANG in|stuck for more than|: timed out$' "$log"; then
        result=hang
    elif grep -q 'carried wrong data' "$log"; then
        result=mismatch
    else
        result="fail($rc)"
    fi
    case $result in
        pass) passes=$((passes + 1)); [ "${KEEP_LOGS:-0}" = 1 ] || rm -f "$log" ;;
        hang) hangs=$((hangs + 1)) ;;
        mismatch) mismatches=$((mismatches + 1)) ;;
        *) others=$((others + 1)) ;;
    esac
    conn_word=$([ "$conn" -eq 1 ] && echo 1 || echo unset)
    printf '%5d  %-8s  %-5s  %6d  %6d  %5d  %-9s  %s\n' "$i" "$transport" "$conn_word" \
        "$blocks" "$queued" "$graph" "$result" "$secs"
    printf '%d\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n' "$i" "$transport" "$conn_word" "$blocks" \
        "$queued" "$graph" "$result" "$secs" >>"$out/runs.tsv"
    if [ "$result" != pass ]; then
        replay=(env "${unset_conn[@]}" "${envs[@]}")
        if [ -n "${GPUPORT_TEST_ONE_GPU+set}" ]; then
            replay+=(GPUPORT_TEST_ONE_GPU="$GPUPORT_TEST_ONE_GPU")
        fi
        replay+=(CUDA_MODULE_LOADING=LAZY GPUPORT_TIMEOUT_MS="$GPUPORT_TIMEOUT_MS" "$bin" \
                 "${args[@]}")
        failures+=("run $i: $result: transport=$transport CUDA_DEVICE_MAX_CONNECTIONS=$conn_word \
blocks=$blocks queued=$queued graph=$graph (log $log)
      replay: ${replay[*]}")
    fi
done

{
    echo
    total=$(( SECONDS - t_start ))
    per=$(( ran ? total * 10 / ran : 0 ))
    echo "gpu-soak summary (seed $seed, $total s, $(( per / 10 )).$(( per % 10 )) s per run:" \
         "200 runs would take about $(( ran ? total * 200 / ran : 0 )) s):"
    printf '  %6s  %6s  %6s  %10s  %6s\n' runs passes hangs mismatches other
    printf '  %6d  %6d  %6d  %10d  %6d\n' "$ran" "$passes" "$hangs" "$mismatches" "$others"
    if [ ${#failures[@]} -gt 0 ]; then
        echo "failures:"
        for f in "${failures[@]}"; do echo "  $f"; done
    fi
} | tee -a "$out/summary.txt"
[ "$passes" -eq "$n" ]
