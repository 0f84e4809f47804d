#!/usr/bin/env bash
# This round's GPU runs on one GPU, in three calls of at most 10 minutes
# each (the device tool's limit), from a carried build (scripts/gpu-build.sh
# then scripts/gpu-carry.sh: _build/gpuc). Results go to OUT_DIR (the
# device tool's $OUT); docs/PERFORMANCE.md records them.
#   usage: scripts/gpu-round.sh 1|2|3|4|5|6 [BUILD_DIR] [OUT_DIR]
#   1: the tests of this round's GPU code: FIFO give-ups on the proxy's own
#      consumer, peer channels on every path, tcp get ordering on GPU
#      memory, memory channels, the workloads' peer columns
#   2: the peer baselines (NVSHMEM, built there) beside gpuport's memory
#      channel table (its peer-channel rows by size) under
#      GPUPORT_PEER_PATH=auto and proxy, and the halo exchange, twice,
#      alternating
#   3: the table under GPUPORT_PEER_PATH=stores (with 2's proxy rows: the
#      store path's crossover, GPUPORT_PEER_STORE_MAX); the held_pull probe;
#      --small-only beside
#      BASE_BENCH (an earlier build's gpuport_bench, if given), alternating;
#      the other workloads, peer death, tcp channels
#   4: cuda_ipc's relay of cudaMalloc sources: the held test with the relay
#      and without, the suites over cudaMalloc memory, and --small-only
#      (its memory is cudaMalloc) with GPUPORT_CUDA_IPC_RELAY=0 and 1
#      alternating under MPS
#   5: the device copy of channels' end words (GPUPORT_DEV_END_COPY): the
#      tests of a channel's close and death on the device, then
#      --small-only with GPUPORT_DEV_END_COPY=0 and 1 alternating under MPS
#      (the signals rows and their "pushes alone" rows)
#   6: the fold of a warp's side-by-side puts (gpuport_dev_put_lanes): the
#      channel tests (folded_puts) on cuda_ipc and tcp, then --small-only
#      over cudaMalloc (the relay) and over VMM memory (direct copies: the
#      ping-pong's copy-engine floor), each with GPUPORT_DEV_END_COPY=0 and
#      1, alternating under MPS (the 64 B rows beside "lanes in reverse")
set -u
cd "$(dirname "$0")/.." || exit 1
part=${1:?usage: scripts/gpu-round.sh 1|2|3|4|5|6 [BUILD_DIR] [OUT_DIR]}
B=${2:-_build/gpuc}
OUT=${3:-${OUT:-gpu-round-results}}
mkdir -p "$OUT"
export GPUPORT_TEST_ONE_GPU=1
T0=$SECONDS
mb() { bash scripts/with-mps.sh env GPUPORT_TEST_TIMEOUT=100 "$@"; }
table() { # PATH NAME: the memory-channel table under GPUPORT_PEER_PATH=PATH
    mb GPUPORT_PEER_PATH="$1" "$B/test/mpi/mpirun.sh" 2 "$B/tools/gpuport_bench" --memchan-only \
        >"$OUT/memchan-$2.txt" 2>&1
    echo "memchan $2 rc=$?"
    grep -A14 "ping-pong round trip" "$OUT/memchan-$2.txt" | head -16
}
case $part in
1)
    GPU_ONE_ONLY='^(gpu-fifo|memchan-mps|peer-mps|peer-cudamalloc-mps|peer-proxy-mps|rma-tcp|wl-halo-mps|wl-allreduce-mps|wl-alltoall-mps)$' \
        GPU_ONE_MAX_S=60 bash scripts/gpu-one.sh "$B" "$OUT/one" 2>&1 | tee "$OUT/one.txt"
    ;;
2)
    P=$OUT/peers-bin
    bash scripts/build-peers.sh "$P" >"$OUT/peers-build.txt" 2>&1
    echo "peers-build rc=$? at $((SECONDS - T0)) s"
    for r in 1 2; do
        GPU_ONE_ONLY='^peer-(pingpong|halo)_nvshmem$' GPU_ONE_MAX_S=100 \
            bash scripts/gpu-one.sh "$B" "$OUT/p$r" "$P" 2>&1 | tail -3
        tail -8 "$OUT/p$r/peer-pingpong_nvshmem.log" "$OUT/p$r/peer-halo_nvshmem.log" 2>/dev/null
        table auto "auto-$r"
        table proxy "proxy-$r"
        mb "$B/test/mpi/mpirun.sh" 2 "$B/workloads/halo_gpu" --csv "$OUT/halo-$r.csv" \
            >"$OUT/halo-$r.txt" 2>&1
        echo "halo $r rc=$?"; tail -12 "$OUT/halo-$r.txt"
        [ $((SECONDS - T0)) -gt 400 ] && break
    done
    ;;
3)
    table stores stores
    # the held pattern's candidate way out (docs/ARCHITECTURE.md): is a pull by
    # another process held as a second context's copy is?
    if [ -x "$B/probes/held_pull" ]; then
        timeout 60 "$B/probes/held_pull" >"$OUT/held_pull.txt" 2>&1
        echo "held_pull rc=$?"; cat "$OUT/held_pull.txt"
    fi
    for r in 1 2; do
        for w in new base; do
            bin=$B/tools/gpuport_bench
            if [ $w = base ]; then
                [ -x "${BASE_BENCH:-}" ] || continue
                bin=$BASE_BENCH
            fi
            mb "$B/test/mpi/mpirun.sh" 2 "$bin" --small-only >"$OUT/small-$w-$r.txt" 2>&1
            echo "small $w $r rc=$?"
            grep -iE "signal|put_value|push|ping|floor" "$OUT/small-$w-$r.txt" | head -12
        done
        [ $((SECONDS - T0)) -gt 250 ] && break
    done
    GPU_ONE_ONLY='^(death-cuda_ipc|channels-tcp|channels-cuda_ipc)$' GPU_ONE_MAX_S=60 \
        bash scripts/gpu-one.sh "$B" "$OUT/three" 2>&1 | tee "$OUT/three.txt"
    ;;
4)
    GPU_ONE_ONLY='^(held|held-norelay|channels-cuda_ipc|rma-cuda_ipc|death-cuda_ipc|stall-cuda_ipc-conn1-q1100|peer-cudamalloc-mps|example-device|mpi-np2)$' \
        GPU_ONE_MAX_S=100 bash scripts/gpu-one.sh "$B" "$OUT/relay" 2>&1 | tee "$OUT/relay.txt"
    for r in 1 2; do
        for relay in 0 1; do
            mb GPUPORT_CUDA_IPC_RELAY=$relay "$B/test/mpi/mpirun.sh" 2 "$B/tools/gpuport_bench" \
                --small-only >"$OUT/small-relay$relay-$r.txt" 2>&1
            echo "small relay=$relay $r rc=$?"
            grep -E "64 B puts|put +(4|64|256) KiB|ping-pong 8 B" "$OUT/small-relay$relay-$r.txt"
        done
        [ $((SECONDS - T0)) -gt 400 ] && break
    done
    ;;
5)
    GPU_ONE_ONLY='^(gpu-fifo|channels-cuda_ipc|channels-tcp|peer-mps|death-cuda_ipc|stall-cuda_ipc-conn1-q1100)$' \
        GPU_ONE_MAX_S=100 bash scripts/gpu-one.sh "$B" "$OUT/ends" 2>&1 | tee "$OUT/ends.txt"
    grep -hE "^PASS (the peer's close|pushes after)" "$OUT"/ends/channels-*.log
    for r in 1 2 3; do
        for copy in 0 1; do
            mb GPUPORT_DEV_END_COPY=$copy "$B/test/mpi/mpirun.sh" 2 "$B/tools/gpuport_bench" \
                --small-only >"$OUT/small-endcopy$copy-$r.txt" 2>&1
            echo "small GPUPORT_DEV_END_COPY=$copy $r rc=$?"
            grep -E "signals,|pushes alone|put_value|64 B puts|lanes in reverse|ping-pong 8 B" \
                "$OUT/small-endcopy$copy-$r.txt"
        done
        [ $((SECONDS - T0)) -gt 420 ] && break
    done
    ;;
6)
    GPU_ONE_ONLY='^(channels-cuda_ipc|channels-tcp)$' GPU_ONE_MAX_S=120 \
        bash scripts/gpu-one.sh "$B" "$OUT/folds" 2>&1 | tee "$OUT/folds.txt"
    grep -hE "^PASS folded" "$OUT"/folds/channels-*.log
    for r in 1 2; do
        for mem in cudamalloc vmm; do
            for copy in 0 1; do
                f=$OUT/small-$mem-endcopy$copy-$r.txt
                mb GPUPORT_DEV_END_COPY=$copy "$B/test/mpi/mpirun.sh" 2 "$B/tools/gpuport_bench" \
                    --small-only --mem $mem >"$f" 2>&1
                echo "small $mem GPUPORT_DEV_END_COPY=$copy $r rc=$?"
                grep -E "signals,|64 B puts|lanes in reverse|FIFO push|ping-pong 8 B" "$f"
            done
        done
        [ $((SECONDS - T0)) -gt 420 ] && break
    done
    ;;
*)
    echo "scripts/gpu-round.sh: part $part? (1, 2, 3, 4, 5 or 6)" >&2
    exit 2
    ;;
esac
echo "part $part ended at $((SECONDS - T0)) s"
