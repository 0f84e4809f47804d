#!/bin/sh
# A rank killed mid-traffic, 4 ranks in two host-id groups: rank 3 dies;
# rank 2 sees it over shm, ranks 0 and 1 over tcp.
exec sh "${top_srcdir:-.}/test/mpi/death.sh" 4 --ranks-per-host 2
