#!/bin/sh
# A program of the other MPI family than libgpuport_mpi's must be refused at
# gpuport_comm_init_mpi (test_mpi_foreign.c says how). It needs a second MPI
# (configure's MPICC_OTHER: Debian installs openmpi and mpich side by side);
# without one, or where the build was copied to a machine without its
# libraries, this test skips.
prog=${top_builddir:-.}/test/mpi/test_mpi_foreign
if test ! -x "$prog"; then
    echo "SKIP: no MPI of the other family was found at configure time (MPICC_OTHER; see the configure summary's 'other MPI')"
    exit 77
fi
out=$(mktemp "${TMPDIR:-/tmp}/gpuport-mismatch.XXXXXX") || exit 1
trap 'rm -f "$out"' EXIT
# not under a launcher: MPI is never started
"$prog" >"$out" 2>&1
rc=$?
cat "$out"
if test $rc -eq 127 && grep -q 'error while loading shared libraries' "$out"; then
    echo "SKIP: the other MPI's library is not installed here"
    exit 77
fi
exit $rc
