"""Host ping-pong and accumulate with NumPy over gpuport port channels.

    mpirun -np 2 --bind-to none python3 python/examples/pingpong_numpy.py

Ranks 0 and 1 bounce a buffer back and forth (each side checks every byte
it receives), then each adds its float32 vector into the other's with
accumulate, and both check the sums. Exits 0 when every check passed.
"""
import sys

import numpy as np
from mpi4py import MPI

import gpuport

ROUNDS, N = 100, 1 << 16

with gpuport.Comm(MPI.COMM_WORLD) as comm:      # collective
    if comm.size != 2:
        sys.exit("run with 2 ranks")
    peer = 1 - comm.rank
    send = np.zeros(N, np.uint8)                   # any buffer can be a source
    recv = gpuport.alloc(comm, N)                  # shared memory: peers copy straight in
    with gpuport.Region(comm, send) as src, gpuport.Region(comm, recv) as dst:
        with gpuport.PortChannel(comm, peer, src, dst) as ch:   # pairwise
            for i in range(ROUNDS):
                # check what arrived before replying: the reply lets the
                # peer write recv again
                if comm.rank == 0:
                    send[:] = (np.arange(N) + i) % 256
                    ch.put_with_signal(0, 0, N)
                    ch.wait()                      # the reply is in recv
                    expect = (np.arange(N) + i + 1) % 256
                else:
                    ch.wait()                      # rank 0's bytes are in recv
                    expect = (np.arange(N) + i) % 256
                if not np.array_equal(recv, expect.astype(np.uint8)):
                    sys.exit("rank %d: round %d: wrong bytes" % (comm.rank, i))
                if comm.rank == 1:
                    send[:] = (recv + 1) % 256
                    ch.put_with_signal(0, 0, N)
                ch.flush()                         # send may be rewritten

            # accumulate: each rank adds its vector into the other's
            mine = np.full(1024, comm.rank + 1.5, np.float32)
            send[:mine.nbytes] = mine.view(np.uint8)
            acc = recv[:mine.nbytes].view(np.float32)
            acc[:] = 10.0
            ch.signal()                            # my acc is initialized
            ch.wait()                              # and so is the peer's
            ch.accumulate(0, 0, mine.size, np.float32)
            ch.flush()
            ch.signal()                            # my adds are complete
            ch.wait()
            if not np.all(acc == 10.0 + peer + 1.5):
                sys.exit("rank %d: accumulate: got %r" % (comm.rank, acc[:4]))
            ch.signal()                            # done with the channel
            ch.wait()
    del recv, acc                                  # the views of the allocation
    print("rank %d: %d round trips of %d bytes and an accumulate, all checked"
          % (comm.rank, ROUNDS, N))
