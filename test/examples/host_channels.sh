#!/bin/sh
# examples/host_channels at 2 ranks: it must exit 0 with one OK line per
# rank. Then under GPUPORT_TRANSPORT=foo, the failure the README's old
# unchecked fragment turned into a crash: the example must report
# gpuport_comm_init_mpi's error, naming the variable, on both ranks and exit
# non-zero without a signal.
build=${top_builddir:-.}
out=${TMPDIR:-/tmp}/gpuport_host_channels.$$
trap 'rm -f "$out"' EXIT
fail=0

"$build/test/mpi/mpirun.sh" 2 "$build/examples/host_channels" >"$out" 2>&1
rc=$?
cat "$out"
test $rc -eq 77 && exit 77
oks=$(grep -c '^rank [01]: received 1048576 bytes from rank [01] over [a-z_]*: OK$' "$out")
if test $rc -ne 0 || test "$oks" -ne 2; then
    echo "FAIL: host_channels exited $rc with $oks OK lines (expected 0 and 2)"
    fail=1
else
    echo "PASS: host_channels exchanged 1 MiB both ways"
fi

GPUPORT_TRANSPORT=foo "$build/test/mpi/mpirun.sh" 2 "$build/examples/host_channels" >"$out" 2>&1
rc=$?
cat "$out"
said=$(grep -c '^rank [01]: gpuport_comm_init_mpi failed: ' "$out")
if test $rc -eq 0 || test $rc -ge 124 || test "$said" -ne 2 ||
    ! grep -q 'GPUPORT_TRANSPORT' "$out"; then
    echo "FAIL: GPUPORT_TRANSPORT=foo: exit $rc and $said 'gpuport_comm_init_mpi failed' lines" \
        "(expected an exit of 1..123, 2 such lines, and the variable named)"
    fail=1
else
    echo "PASS: GPUPORT_TRANSPORT=foo fails gpuport_comm_init_mpi on both ranks (exit $rc)"
fi
exit $fail
