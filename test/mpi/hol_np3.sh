#!/bin/sh
# test_mpi_hol on 3 ranks over tcp: a stopped peer's full channel holds no
# other; with the host calls' own sends off, then on.
set -e
"${top_builddir:-.}/test/mpi/mpirun.sh" 3 "${top_builddir:-.}/test/mpi/test_mpi_hol" 0
exec "${top_builddir:-.}/test/mpi/mpirun.sh" 3 "${top_builddir:-.}/test/mpi/test_mpi_hol" 1
