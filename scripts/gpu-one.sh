#!/usr/bin/env bash
# Every GPU test that can run on a machine with ONE GPU: both processes of
# each pair on GPU 0 (GPUPORT_TEST_ONE_GPU=1). Their contexts take turns on
# the GPU, so exchanges run at time-slice pace; what this shows is that
# data arrives intact over cuda_ipc and tcp, over cudaMalloc, gpuport's VMM
# and the application's own VMM memory (GPUPORT_TEST_MEM), and that nothing
# hangs when the application's launch queue is full.
#   usage: scripts/gpu-one.sh [BUILD_DIR] [OUT_DIR] [PEERS_DIR]   (build: scripts/gpu-build.sh)
# PEERS_DIR (also from the environment): the peer baselines
# scripts/build-peers.sh built on THIS machine. Unset, the script builds them
# here first (step peers-build, about a minute): a program links NVSHMEM's
# device half statically and loads its host half at run time, and the two
# must be one version, so a build carried from another machine's wheel fails
# where the wheels differ (and finds no library where their paths do).
# GPU_ONE_ONLY=REGEX runs only the steps whose names match (grep -E).
# GPU_ONE_MAX_S=N caps every step's time limit at N seconds (a short first look).
set -u
cd "$(dirname "$0")/.."
build=${1:-_build/gpu}
out=${2:-gpu-one-results}
mkdir -p "$out"
export GPUPORT_TEST_ONE_GPU=1 top_builddir=$build top_srcdir=. GPUPORT_LOG_LEVEL=${GPUPORT_LOG_LEVEL:-warn}
unset GPUPORT_TEST_MEM # each step names the memory it wants; unset: the transport's default
pass=0 fail=0
step() {
    local name=$1 limit=$2 rc=0 t0=$SECONDS
    shift 2
    if [ -n "${GPU_ONE_MAX_S:-}" ] && [ "$limit" -gt "$GPU_ONE_MAX_S" ]; then limit=$GPU_ONE_MAX_S; fi
    if [ -n "${GPU_ONE_ONLY:-}" ] && ! echo "$name" | grep -Eq "$GPU_ONE_ONLY"; then
        return
    fi
    timeout --kill-after=10 "$limit" "$@" >"$out/$name.log" 2>&1 || rc=$?
    if [ $rc -eq 0 ]; then pass=$((pass + 1)); echo "PASS $name ($((SECONDS - t0)) s)"
    else fail=$((fail + 1)); echo "FAIL (exit $rc) $name ($((SECONDS - t0)) s)"; tail -n 15 "$out/$name.log"; fi
}
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv; } >"$out/machine.txt" 2>&1
stall=$build/test/gpu/test_gpu_stall
step info 60 "$build/tools/gpuport_info"
step gpu-fifo 120 "$build/test/gpu/test_gpu_fifo"
step channels-cuda_ipc 300 "$build/test/gpu/test_gpu_channels"
step channels-cuda_ipc-vmm 300 env GPUPORT_TEST_MEM=vmm "$build/test/gpu/test_gpu_channels"
step channels-cuda_ipc-appvmm 300 env GPUPORT_TEST_MEM=appvmm "$build/test/gpu/test_gpu_channels"
step channels-tcp 300 env GPUPORT_TRANSPORT=tcp "$build/test/gpu/test_gpu_channels"
step channels-tcp-appvmm 300 env GPUPORT_TRANSPORT=tcp GPUPORT_TEST_MEM=appvmm \
    "$build/test/gpu/test_gpu_channels"
# stream-ordered pools: an exportable one over both transports, the default one over tcp
step channels-cuda_ipc-pool 300 env GPUPORT_TEST_MEM=pool "$build/test/gpu/test_gpu_channels"
step channels-tcp-pool 300 env GPUPORT_TRANSPORT=tcp GPUPORT_TEST_MEM=pool \
    "$build/test/gpu/test_gpu_channels"
step channels-tcp-defpool 300 env GPUPORT_TRANSPORT=tcp GPUPORT_TEST_MEM=defpool \
    "$build/test/gpu/test_gpu_channels"
# one buffer for cuda_ipc and tcp channels at once, the application's legacy
# IPC beside VMM channels, VMM memory without an fd handle, frees refused
# while channels are open, regions across an allocation boundary
step vmm 300 "$build/test/gpu/test_gpu_vmm"
# gpuport_mem_alloc_device and a cuda_ipc channel in a process with no CUDA context of its own
step noctx 60 "$build/test/gpu/test_gpu_noctx"
# every memory kind: classified, queried, moved over the transports docs/GUIDE.md says carry it
step kinds 300 "$build/test/gpu/test_gpu_kinds"
# memory channels: kernels store into the peer's memory themselves; under MPS
# the pair's kernels run at once, without it they take turns (slow, must end)
step memchan-mps 300 bash scripts/with-mps.sh "$build/test/gpu/test_gpu_memchan"
step memchan-appvmm-mps 300 bash scripts/with-mps.sh env GPUPORT_TEST_MEM=appvmm \
    "$build/test/gpu/test_gpu_memchan"
step memchan-pool-mps 300 bash scripts/with-mps.sh env GPUPORT_TEST_MEM=pool \
    "$build/test/gpu/test_gpu_memchan"
step memchan-store-mps 300 bash scripts/with-mps.sh env GPUPORT_MEMORY_SIGNAL=store \
    "$build/test/gpu/test_gpu_memchan"
# peer channels: small operations by stores, large by the proxy, one signal
# over both (VMM memory); every operation by the proxy (cudaMalloc memory,
# and GPUPORT_PEER_PATH=proxy)
step peer-mps 300 bash scripts/with-mps.sh "$build/test/gpu/test_gpu_peer"
step peer-cudamalloc-mps 300 bash scripts/with-mps.sh env GPUPORT_TEST_MEM=cudamalloc \
    "$build/test/gpu/test_gpu_peer"
step peer-proxy-mps 300 bash scripts/with-mps.sh env GPUPORT_PEER_PATH=proxy \
    "$build/test/gpu/test_gpu_peer"
step memchan-cudamalloc 120 env GPUPORT_TEST_MEM=cudamalloc "$build/test/gpu/test_gpu_memchan"
step memchan 300 "$build/test/gpu/test_gpu_memchan"
# get, atomic_add and accumulate from kernels: port channels' gets (1 B ..
# 64 MiB, every byte) and refused adds over cuda_ipc and tcp; memory
# channels' adds from both ranks into the same memory, exact or within the
# float bound, and their order with signals (under MPS: the kernels at once)
step rma-cuda_ipc 300 "$build/test/gpu/test_gpu_rma" port
step rma-cuda_ipc-vmm 300 env GPUPORT_TEST_MEM=vmm "$build/test/gpu/test_gpu_rma" port
step rma-tcp 300 env GPUPORT_TRANSPORT=tcp "$build/test/gpu/test_gpu_rma" port
step rma-memchan-mps 300 bash scripts/with-mps.sh "$build/test/gpu/test_gpu_rma" memory
# the held pattern (both hosts in cudaMemcpy behind the kernel) over cudaMalloc
# memory: cuda_ipc's relay carries it (every byte); the direct copy, which CUDA
# holds, ends in the timeout and the proxy's warning
step held 120 "$build/test/gpu/test_gpu_held"
step held-norelay 120 env GPUPORT_CUDA_IPC_RELAY=0 "$build/test/gpu/test_gpu_held"
# the same pattern over memory mapped for the device: not held, every byte checked
step held-vmm 120 env GPUPORT_TEST_MEM=vmm "$build/test/gpu/test_gpu_held"
step held-appvmm 120 env GPUPORT_TEST_MEM=appvmm "$build/test/gpu/test_gpu_held"
step held-pool 120 env GPUPORT_TEST_MEM=pool "$build/test/gpu/test_gpu_held"
step held-tcp-defpool 120 env GPUPORT_TRANSPORT=tcp GPUPORT_TEST_MEM=defpool \
    "$build/test/gpu/test_gpu_held"
# host operations inline beside a kernel's pushes and the proxy's on one shm
# channel, then on one tcp channel (GPUPORT_HOST_INLINE on, then off)
step inline 120 "$build/test/gpu/test_gpu_inline"
step inline-tcp 180 env GPUPORT_TRANSPORT=tcp "$build/test/gpu/test_gpu_inline"
# a peer killed mid-traffic: the survivor's device and host waiters return
step death-cuda_ipc 120 "$build/test/gpu/test_gpu_death"
step death-tcp 120 env GPUPORT_TRANSPORT=tcp "$build/test/gpu/test_gpu_death"
# head of line in the device FIFO: a kernel's puts on a tcp channel to a stopped
# peer park while a cuda_ipc channel of the same FIFO (rank 0 to itself) goes on
step hol-tcp 120 "$build/test/gpu/test_gpu_hol"
# the launch-queue hazard (1 connection, 1,100 kernels queued) and without,
# cold (first use of everything inside the scenario)
export GPUPORT_TIMEOUT_MS=${GPUPORT_TIMEOUT_MS:-20000}
for t in cuda_ipc tcp; do
    step stall-$t-conn1-q1100 100 env GPUPORT_TRANSPORT=$t CUDA_DEVICE_MAX_CONNECTIONS=1 \
        CUDA_MODULE_LOADING=LAZY "$stall" --queued 1100 --reps 2 --iters 1000 --expect-hazard
    step stall-$t-default-q1100 100 env -u CUDA_DEVICE_MAX_CONNECTIONS GPUPORT_TRANSPORT=$t \
        CUDA_MODULE_LOADING=LAZY "$stall" --queued 1100 --reps 2 --iters 1000
done
# the same on cuda_ipc over VMM memory (tcp uses it already)
step stall-cuda_ipc-vmm-conn1-q1100 100 env GPUPORT_TRANSPORT=cuda_ipc GPUPORT_TEST_MEM=vmm \
    CUDA_DEVICE_MAX_CONNECTIONS=1 CUDA_MODULE_LOADING=LAZY "$stall" --queued 1100 --reps 2 \
    --iters 1000 --expect-hazard
step stall-cuda_ipc-vmm-default-q1100 100 env -u CUDA_DEVICE_MAX_CONNECTIONS \
    GPUPORT_TRANSPORT=cuda_ipc GPUPORT_TEST_MEM=vmm CUDA_MODULE_LOADING=LAZY "$stall" \
    --queued 1100 --reps 2 --iters 1000
# and over pool memory: an exportable pool on cuda_ipc, the default pool on tcp
for m in cuda_ipc:pool tcp:defpool; do
    t=${m%%:*} mem=${m#*:}
    step stall-$t-$mem-conn1-q1100 100 env GPUPORT_TRANSPORT=$t GPUPORT_TEST_MEM=$mem \
        CUDA_DEVICE_MAX_CONNECTIONS=1 CUDA_MODULE_LOADING=LAZY "$stall" --queued 1100 --reps 2 \
        --iters 1000 --expect-hazard
    step stall-$t-$mem-default-q1100 100 env -u CUDA_DEVICE_MAX_CONNECTIONS \
        GPUPORT_TRANSPORT=$t GPUPORT_TEST_MEM=$mem CUDA_MODULE_LOADING=LAZY "$stall" \
        --queued 1100 --reps 2 --iters 1000
done
# the CPU suites with GPU mode on in every communicator
for t in test_local_channels test_process_channels; do
    step "unit-$t" 120 "$build/test/unit/$t"
done
step mpi-np2 180 "$build/test/mpi/mpirun.sh" 2 "$build/test/mpi/test_mpi_channels"
# examples/device_channels.cu, both ranks on GPU 0: a kernel over a cudaMalloc
# and a VMM channel, every byte compared on the host (4 OK lines expected)
step example-device 120 sh test/examples/device_channels.sh
step example-memory 120 bash scripts/with-mps.sh sh test/examples/memory_channels.sh
# examples/reduce_kernel.cu at 3 ranks on GPU 0: two ranks' kernels accumulate
# float32 into rank 0's buffer, rank 0's kernel waits for both signals
step example-reduce 120 bash scripts/with-mps.sh sh test/examples/reduce_kernel.sh
# the workloads from kernels (workloads/README.md), beside MPI staged through
# the host, verified; both ranks' kernels at once: under MPS
for w in halo allreduce alltoall; do
    step wl-$w-mps 300 bash scripts/with-mps.sh env GPUPORT_TEST_TIMEOUT=280 \
        "$build/test/mpi/mpirun.sh" 2 "$build/workloads/${w}_gpu" --csv "$out/wl-$w.csv"
done
# the benchmark with both ranks on the GPU: IPC bandwidth over cudaMalloc
# and VMM memory side by side, beside the raw copy within the GPU
step bench-mem-both 420 env GPUPORT_TEST_TIMEOUT=400 "$build/test/mpi/mpirun.sh" 2 \
    "$build/tools/gpuport_bench" --mem both
# pool memory's IPC bandwidth beside VMM memory's, same run
step bench-mem-pool 300 env GPUPORT_TEST_TIMEOUT=280 "$build/test/mpi/mpirun.sh" 2 \
    "$build/tools/gpuport_bench" --mem vmm-pool --bandwidth-only --min-size 1M
# the small operations (signals, put_value, puts, FIFO round trip) beside
# their limits: time-sliced, and under MPS (the pair's contexts at once)
bench="$build/tools/gpuport_bench"
step bench-small 300 env GPUPORT_TEST_TIMEOUT=280 "$build/test/mpi/mpirun.sh" 2 "$bench" --small-only
step bench-small-mps 300 bash scripts/with-mps.sh env GPUPORT_TEST_TIMEOUT=280 \
    "$build/test/mpi/mpirun.sh" 2 "$bench" --small-only
# the device back-off beside the same handle spinning: busy path and a
# compute kernel beside pending waits (meaningful under MPS only)
step bench-memchan-mps 300 bash scripts/with-mps.sh env GPUPORT_TEST_TIMEOUT=280 \
    "$build/test/mpi/mpirun.sh" 2 "$bench" --memchan-only
step bench-memchan-store-mps 300 bash scripts/with-mps.sh env GPUPORT_TEST_TIMEOUT=280 \
    GPUPORT_MEMORY_SIGNAL=store "$build/test/mpi/mpirun.sh" 2 "$bench" --memchan-only
# get, atomic_add and accumulate from kernels (port and memory channel) beside
# the raw copy engine and the same accesses through the mapping, verified
step bench-rma-gpu-mps 300 bash scripts/with-mps.sh env GPUPORT_TEST_TIMEOUT=280 \
    "$build/test/mpi/mpirun.sh" 2 "$bench" --rma-gpu
step bench-backoff-mps 300 bash scripts/with-mps.sh env GPUPORT_TEST_TIMEOUT=280 \
    "$build/test/mpi/mpirun.sh" 2 "$bench" --backoff-only
# tcp beside MPI over TCP in the same run (OMPI_MCA_btl=tcp,self: MPI's
# point-to-point path over loopback sockets), with the ACK delay and without;
# shm beside MPI's shared memory; GPU memory over tcp under MPS beside the
# raw staging copy
step bench-host-tcp 300 env GPUPORT_TEST_TIMEOUT=280 GPUPORT_TRANSPORT=tcp OMPI_MCA_btl=tcp,self \
    "$build/test/mpi/mpirun.sh" 2 "$bench" --host --max-size 1m --csv "$out/host-tcp.csv"
step bench-host-tcp-ack0 300 env GPUPORT_TEST_TIMEOUT=280 GPUPORT_TRANSPORT=tcp \
    GPUPORT_SOCKET_ACK_DELAY_US=0 OMPI_MCA_btl=tcp,self \
    "$build/test/mpi/mpirun.sh" 2 "$bench" --host --max-size 1m --csv "$out/host-tcp-ack0.csv"
step bench-host-shm 300 env GPUPORT_TEST_TIMEOUT=280 \
    "$build/test/mpi/mpirun.sh" 2 "$bench" --host --max-size 1m --csv "$out/host-shm.csv"
step bench-gpu-tcp-mps 300 bash scripts/with-mps.sh env GPUPORT_TEST_TIMEOUT=280 \
    GPUPORT_TRANSPORT=tcp OMPI_MCA_btl=tcp,self "$build/test/mpi/mpirun.sh" 2 "$bench" \
    --max-size 64m --iters 0.25 --csv "$out/gpu-tcp.csv"
# the idle proxy by sleep policy: CPU while idle, first operation after a pause
step bench-idle-host 300 env GPUPORT_TEST_TIMEOUT=280 "$build/test/mpi/mpirun.sh" 2 "$bench" \
    --host --idle --idle-pauses 3
step bench-idle-gpu 300 env GPUPORT_TEST_TIMEOUT=280 "$build/test/mpi/mpirun.sh" 2 "$bench" \
    --idle --idle-pauses 3
# the default GPU tables, shortened (up to 64 MiB, a quarter of the rounds),
# recorded for scripts/plot-bench.py
step bench-records 300 env GPUPORT_TEST_TIMEOUT=280 "$build/test/mpi/mpirun.sh" 2 "$bench" \
    --max-size 64m --iters 0.25 --csv "$out/gpu-records.csv" --json "$out/gpu-records.json"
# the peer-library baselines (workloads/README.md), default sizes, verified as
# the wl-* steps' programs are. NVSHMEM's two PEs share GPU 0 under MPS, in
# NVSHMEM's full multiple-PEs-per-GPU mode (each PE may use the whole GPU,
# as gpuport's pairs do; NCCL inside NVSHMEM is off under MPS anyway, and
# there is no remote transport to load). NCCL refuses two ranks on one GPU:
# its programs say SKIP and exit 77, which step() would count as a FAIL, so
# their steps turn 77 into a pass that logs "SKIP (exit 77)". pingpong_nvshmem
# is NVSHMEM's side of gpuport_bench's memory-channel rows (bench-memchan-mps):
# the 8 B ping-pong and 64 B put + signal rate, each beside its floor.
peers=${3:-${PEERS_DIR:-}}
wanted=0
for p in halo_nvshmem allreduce_nvshmem alltoall_nvshmem pingpong_nvshmem \
    halo_nccl allreduce_nccl alltoall_nccl; do
    if [ -z "${GPU_ONE_ONLY:-}" ] || echo "peer-$p" | grep -Eq "$GPU_ONE_ONLY"; then wanted=1; fi
done
if [ -z "$peers" ] && [ $wanted = 1 ]; then
    peers=$(mktemp -d)/peers
    GPU_ONE_ONLY= step peers-build 600 bash scripts/build-peers.sh "$peers"
    grep -E '^(NVSHMEM|NCCL)' "$out/peers-build.log"
fi
if [ -n "$peers" ] && [ -d "$peers" ]; then
    for w in halo allreduce alltoall pingpong; do
        step peer-${w}_nvshmem 300 bash scripts/with-mps.sh env GPUPORT_TEST_TIMEOUT=280 \
            NVSHMEM_IGNORE_CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=1 NVSHMEM_DISABLE_NCCL=1 \
            NVSHMEM_REMOTE_TRANSPORT=none "$build/test/mpi/mpirun.sh" 2 "$peers/${w}_nvshmem"
    done
    for w in halo allreduce alltoall; do
        # shellcheck disable=SC2016  # "$@" and $rc are the inner shell's
        step peer-${w}_nccl 300 env GPUPORT_TEST_TIMEOUT=280 sh -c \
            '"$@"; rc=$?; [ $rc -eq 77 ] && { echo "SKIP (exit 77)"; exit 0; }; exit $rc' \
            sh "$build/test/mpi/mpirun.sh" 2 "$peers/${w}_nccl"
    done
else
    echo "peer-* steps skipped: no peer baselines${peers:+ in $peers} (scripts/build-peers.sh)"
fi
# the probes behind docs/ARCHITECTURE.md's and docs/PERFORMANCE.md's driver facts
if [ -d "$build/probes" ]; then
    step probes 400 bash scripts/probes.sh run "$build/probes"
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
