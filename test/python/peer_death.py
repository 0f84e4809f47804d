"""A peer dying under a Python wait (run by run.sh under mpirun, 2 ranks, the
job told to outlive a rank): rank 1 kills itself with SIGKILL; rank 0's
wait() must raise gpuport.Error(ERR_PEER) within GPUPORT_TIMEOUT_MS, and
rank 0 prints "PASS rank 0" or "FAIL rank 0"."""
import os
import signal
import sys
import time

import numpy as np
from mpi4py import MPI

import gpuport

timeout_s = int(os.environ.get("GPUPORT_TIMEOUT_MS", "60000")) / 1000.0
comm = gpuport.Comm(MPI.COMM_WORLD)
buf = np.zeros(64, np.uint8)
region = gpuport.Region(comm, buf)
ch = gpuport.PortChannel(comm, 1 - comm.rank, region, region)
ch.put_with_signal(0, 0, 8)     # both alive and connected
ch.wait()
ch.flush()
if comm.rank == 1:
    time.sleep(0.5)             # rank 0 is in its wait by now
    os.kill(os.getpid(), signal.SIGKILL)
t0 = time.monotonic()
try:
    ch.wait()
    print("FAIL rank 0: wait returned although the peer sent nothing and died", flush=True)
    sys.exit(1)
except gpuport.Error as e:
    took = time.monotonic() - t0
    ok = e.status == gpuport.ERR_PEER and took < timeout_s
    print("%s rank 0: wait raised %s after %.2f s (limit %.0f s): %s"
          % ("PASS" if ok else "FAIL", e.name, took, timeout_s, e), flush=True)
ch.close()
region.close()
comm.close()
sys.exit(0 if ok else 1)
