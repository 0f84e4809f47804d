#!/bin/sh
# test_mpi_stress on 2 ranks, every scenario (auto: shm; tcp forced; a host
# id per rank: tcp between, shm to self), then damage planted in a shm and a
# tcp scenario, which must be caught.
exec sh "${top_srcdir:-.}/test/mpi/stress.sh" 2 \
    'data:auto-fifo4 dst-guard:auto-fifo16 src-guard:tcp-fifo4 data:tcp-fifo16'
