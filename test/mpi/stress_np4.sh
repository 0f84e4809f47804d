#!/bin/sh
# test_mpi_stress on 4 ranks, every scenario (hosts-fifo4: ranks 0-1 and 2-3
# share host ids: shm within, tcp between), then damage planted where the
# transports mix, which must be caught.
exec sh "${top_srcdir:-.}/test/mpi/stress.sh" 4 'data:hosts-fifo4'
