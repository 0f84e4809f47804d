#!/bin/sh
# examples/memory_channels at 2 ranks: exit 0 with one OK line per rank, or
# 77 where there is no GPU. On one GPU, run it under MPS
# (scripts/with-mps.sh) for the pair's kernels to run at once.
build=${top_builddir:-.}
out=${TMPDIR:-/tmp}/gpuport_memory_channels.$$
trap 'rm -f "$out"' EXIT

"$build/test/mpi/mpirun.sh" 2 "$build/examples/memory_channels" >"$out" 2>&1
rc=$?
cat "$out"
if test $rc -eq 77; then
    grep -m1 'SKIP' "$out"
    exit 77
fi
oks=$(grep -c '^rank [01]: memory channel: received 1048576 bytes and 2 x 64 bytes of packets from rank [01]: OK$' "$out")
if test $rc -ne 0 || test "$oks" -ne 2; then
    echo "FAIL: memory_channels exited $rc with $oks OK lines (expected 0 and 2)"
    exit 1
fi
echo "PASS: memory_channels exchanged 1 MiB and packets both ways by the kernels' own stores"
