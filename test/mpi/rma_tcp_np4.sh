#!/bin/sh
# get, atomic_add, accumulate: 4 ranks over tcp (rank 0 to every rank).
exec sh "${top_srcdir:-.}/test/mpi/rma.sh" 4 tcp --max-get 16777219
