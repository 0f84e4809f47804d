#!/bin/sh
# examples/reduce_kernel at 3 ranks: exit 0 with rank 0's OK line (two
# ranks' kernels accumulate into its buffer, its kernel waits for both), or
# 77 where there is no GPU. On one GPU, run it under MPS
# (scripts/with-mps.sh) for the ranks' kernels to run at once.
build=${top_builddir:-.}
out=${TMPDIR:-/tmp}/gpuport_reduce_kernel.$$
trap 'rm -f "$out"' EXIT

"$build/test/mpi/mpirun.sh" 3 "$build/examples/reduce_kernel" >"$out" 2>&1
rc=$?
cat "$out"
if test $rc -eq 77; then
    grep -m1 'SKIP' "$out"
    exit 77
fi
oks=$(grep -c '^rank 0: reduce of 1048576 float32 elements from 3 ranks by their kernels: OK$' "$out")
if test $rc -ne 0 || test "$oks" -ne 1; then
    echo "FAIL: reduce_kernel exited $rc with $oks OK lines (expected 0 and 1)"
    exit 1
fi
echo "PASS: reduce_kernel summed 3 ranks' float32 vectors into rank 0's GPU memory from kernels"
