#!/bin/sh
# workloads/halo (--small) at 2 and 4 ranks over shm and tcp, beside MPI, verified.
exec sh "${top_srcdir:-.}/test/workloads/run.sh" halo
