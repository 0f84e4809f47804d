#!/bin/sh
# examples/reduce_host at 2 and 4 ranks (shm), then at 2 over tcp: each
# must exit 0 with rank 0's OK line (every float32 sum within the bound).
build=${top_builddir:-.}
out=${TMPDIR:-/tmp}/gpuport_reduce_host.$$
trap 'rm -f "$out"' EXIT
fail=0
for run in "2 auto" "4 auto" "2 tcp"; do
    np=${run% *}
    GPUPORT_TRANSPORT=${run#* } "$build/test/mpi/mpirun.sh" "$np" "$build/examples/reduce_host" \
        100000 >"$out" 2>&1
    rc=$?
    cat "$out"
    test $rc -eq 77 && exit 77
    if test $rc -ne 0 || ! grep -q "^rank 0: 100000 float32 sums of $np ranks over [a-z_]*: OK$" "$out"
    then
        echo "FAIL: reduce_host on $np ranks (GPUPORT_TRANSPORT=${run#* }) exited $rc"
        fail=1
    fi
done
exit $fail
