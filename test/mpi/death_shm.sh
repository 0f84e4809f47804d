#!/bin/sh
# A rank killed mid-traffic, 2 ranks on this host: shm.
exec sh "${top_srcdir:-.}/test/mpi/death.sh" 2
