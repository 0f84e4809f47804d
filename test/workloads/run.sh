#!/bin/sh
# Runs a workload program (workloads/) with --small at 2 and 4 ranks, over
# shm and over tcp, each run beside its MPI baseline and verified; fails if
# any run fails, skips (77) if every run skipped.
#   usage: run.sh PROGRAM [ARGS...]   (the wrappers halo.sh, allreduce.sh, ...)
prog=$1
shift
build=${top_builddir:-.}
rc_all=0 ran=0
for np in 2 4; do
    for t in auto tcp; do
        echo "=== $prog at $np ranks, GPUPORT_TRANSPORT=$t"
        GPUPORT_TRANSPORT=$t "$build/test/mpi/mpirun.sh" "$np" "$build/workloads/$prog" --small "$@"
        rc=$?
        if [ $rc -eq 77 ]; then
            continue
        fi
        ran=1
        if [ $rc -ne 0 ]; then
            echo "FAIL: $prog at $np ranks over $t exited $rc"
            rc_all=1
        fi
    done
done
[ $ran -eq 0 ] && exit 77
exit $rc_all
