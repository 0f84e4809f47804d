"""Interpreter exit with live channels (run by run.sh under mpirun): every
rank exchanges on a channel to its partner, drops a second channel without
close, and exits without closing anything. The atexit hook must close the
communicator within GPUPORT_TIMEOUT_MS and say what was left
("gpuport: at exit, rank R: ... left open: ..."), and the process must exit 0."""
import sys

import numpy as np
from mpi4py import MPI

import gpuport

comm = gpuport.Comm(MPI.COMM_WORLD)
partner = comm.rank ^ 1
if partner >= comm.size:
    sys.exit(0)
buf = np.zeros(64, np.uint8)
region = gpuport.Region(comm, buf)
live = gpuport.PortChannel(comm, partner, region, region)
dropped = gpuport.PortChannel(comm, partner, region, region)
live.put_with_signal(0, 0, 64)
live.wait()
del dropped            # LeakWarning now; destroyed at exit
print("rank %d: exiting with channels open" % comm.rank, flush=True)
