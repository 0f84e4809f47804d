#!/usr/bin/env bash
# Runs a command with the CUDA MPS control daemon up, so that the processes
# of a pair sharing one GPU run their kernels and gpuport's private
# contexts at once instead of taking turns (time slices). The daemon's pipe
# and log directories are private to this run; it is stopped afterwards
# whatever the command's result, which is this script's exit status.
#   usage: scripts/with-mps.sh COMMAND [ARGS...]
set -u
if ! command -v nvidia-cuda-mps-control >/dev/null; then
    echo "with-mps.sh: nvidia-cuda-mps-control not found (needs the NVIDIA driver's MPS tools)" >&2
    exit 77
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/gpuport-mps.XXXXXX")
export CUDA_MPS_PIPE_DIRECTORY=$dir/pipe CUDA_MPS_LOG_DIRECTORY=$dir/log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
if ! nvidia-cuda-mps-control -d; then
    echo "with-mps.sh: the MPS control daemon did not start" >&2
    rm -rf "$dir"
    exit 1
fi
rc=0
"$@" || rc=$?
echo quit | nvidia-cuda-mps-control
sleep 1
rm -rf "$dir"
exit $rc
