#!/bin/sh
# get, atomic_add, accumulate: 2 ranks over tcp, gets up to 64 MiB.
exec sh "${top_srcdir:-.}/test/mpi/rma.sh" 2 tcp
