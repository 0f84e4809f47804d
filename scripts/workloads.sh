#!/usr/bin/env bash
# Runs the workloads (workloads/README.md) with their MPI baselines and
# verification: the host versions at NP ranks (default 2), then the GPU
# versions where every rank sees a GPU (on one GPU both ranks share it:
# under MPS, scripts/with-mps.sh). CSV rows of every run go to OUT.
#   usage: scripts/workloads.sh [BUILD_DIR] [OUT_DIR] [NP]   (extra options in WL_ARGS, e.g. --small)
set -u
cd "$(dirname "$0")/.."
build=${1:-_build/dev}
out=${2:-workloads-results}
np=${3:-2}
mkdir -p "$out"
fail=0
export top_builddir=$build
for prog in halo allreduce alltoall; do
    echo "=== $prog, $np ranks"
    # shellcheck disable=SC2086
    "$build/test/mpi/mpirun.sh" "$np" "$build/workloads/$prog" ${WL_ARGS:-} --csv "$out/$prog.csv" ||
        fail=1
done
if [ -x "$build/workloads/halo_gpu" ] && nvidia-smi -L >/dev/null 2>&1; then
    for prog in halo_gpu allreduce_gpu alltoall_gpu; do
        echo "=== $prog, 2 ranks (under MPS where they share a GPU)"
        # shellcheck disable=SC2086
        bash scripts/with-mps.sh "$build/test/mpi/mpirun.sh" 2 "$build/workloads/$prog" ${WL_ARGS:-} \
            --csv "$out/$prog.csv" || fail=1
    done
else
    echo "=== GPU versions: not run (no GPU here, or a build without CUDA)"
fi
exit $fail
