#!/bin/sh
# examples/device_channels at 2 ranks: exit 0 with two OK lines per rank
# (the cudaMalloc and the VMM channel), or 77 where there is no GPU.
build=${top_builddir:-.}
out=${TMPDIR:-/tmp}/gpuport_device_channels.$$
trap 'rm -f "$out"' EXIT

"$build/test/mpi/mpirun.sh" 2 "$build/examples/device_channels" >"$out" 2>&1
rc=$?
cat "$out"
if test $rc -eq 77; then
    grep -m1 'SKIP' "$out"
    exit 77
fi
oks=$(grep -c '^rank [01]: \(cudaMalloc\|VMM\) channel over [a-z_]*: received 1048576 bytes from rank [01]: OK$' "$out")
if test $rc -ne 0 || test "$oks" -ne 4; then
    echo "FAIL: device_channels exited $rc with $oks OK lines (expected 0 and 4)"
    exit 1
fi
echo "PASS: device_channels exchanged 1 MiB both ways over cudaMalloc and VMM memory"
