"""GPU-only (needs a GPU per rank or ranks sharing one, CuPy and nvcc).
A 1-D Jacobi halo exchange whose kernel drives the communication: a
CuPy RawKernel includes gpuport_device.h and calls gpuport_put_with_signal,
gpuport_wait and gpuport_flush on the port channels to its two neighbours.

    mpirun -np 4 --bind-to none python3 python/examples/halo_cupy.py

Each rank owns N cells plus two halo cells (u[0], u[N+1]) in VMM memory from
gpuport.alloc_device (every transport carries it), and four landing cells
after them, two per step parity. Per step the kernel sends u[1] to the left
neighbour's landing cell and u[N] to the right neighbour's, waits for both
of its own, copies them into its halo cells, and a second kernel averages.
The landing cells alternate with the step's parity because a neighbour may
be one step ahead: its next cell can arrive while this rank still averages
(the first version put straight into u[0] and u[N+1] and failed on one
GPU at 3 ranks). After STEPS steps every rank compares its cells with a
NumPy run of the whole domain.
"""
import sys

import cupy as cp
import numpy as np
from mpi4py import MPI

import gpuport

N, STEPS = 1 << 16, 20

SOURCE = r"""
#include <gpuport/gpuport_device.h>

extern "C" __global__ void exchange(const gpuport_port_channel_dev_t *left,
                                    const gpuport_port_channel_dev_t *right,
                                    float *u, unsigned long long n, int parity, int *rc)
{
    /* thread 0 talks to the left neighbour, thread 1 to the right; the
     * landing cell of side s (0: from the left, 1: from the right) for this
     * step's parity is u[n + 2 + 2 * parity + s] */
    const gpuport_port_channel_dev_t *ch = threadIdx.x == 0 ? left : right;
    unsigned long long cell = sizeof(float), land = n + 2 + 2 * parity;
    int st;

    if (threadIdx.x == 0) /* my u[1] -> left's landing cell from its right */
        st = gpuport_put_with_signal(ch, (land + 1) * cell, 1 * cell, cell);
    else                  /* my u[n] -> right's landing cell from its left */
        st = gpuport_put_with_signal(ch, land * cell, n * cell, cell);
    if (st == GPUPORT_OK)
        st = gpuport_wait(ch);  /* the neighbour's cell has landed here */
    if (st == GPUPORT_OK)       /* into the halo: u[0] from the left, u[n + 1] from the right */
        u[threadIdx.x == 0 ? 0 : n + 1] = u[land + threadIdx.x];
    if (st == GPUPORT_OK)
        st = gpuport_flush(ch); /* my cell left: it may be overwritten */
    rc[threadIdx.x] = st;
}

extern "C" __global__ void jacobi(const float *u, float *v, unsigned long long n)
{
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x + 1;
    if (i <= n)
        v[i] = 0.5f * u[i] + 0.25f * (u[i - 1] + u[i + 1]);
}
"""


def reference(size):
    """The whole periodic domain on the host."""
    u = np.concatenate([np.sin(np.arange(N, dtype=np.float32) * 0.001 + r) for r in range(size)])
    for _ in range(STEPS):
        u = (0.5 * u + 0.25 * (np.roll(u, 1) + np.roll(u, -1))).astype(np.float32)
    return u


def main():
    world = MPI.COMM_WORLD
    ngpu = cp.cuda.runtime.getDeviceCount()
    cp.cuda.Device(world.Get_rank() % ngpu).use()      # before the communicator
    with gpuport.Comm(world) as comm:
        if not comm.gpu_mode():
            print("rank %d: SKIP: the communicator is host-only (no GPU mode)" % comm.rank)
            return 77
        size, rank = comm.size, comm.rank
        if size < 3:
            sys.exit("run with 3 ranks or more (two distinct neighbours)")
        left, right = (rank - 1) % size, (rank + 1) % size
        u = gpuport.alloc_device(comm, N + 6, np.float32, like="cupy")  # + 4 landing cells
        v = cp.zeros(N + 2, cp.float32)
        u[:] = 0
        u[1:N + 1] = cp.sin(cp.arange(N, dtype=cp.float32) * 0.001 + rank)
        region = gpuport.Region(comm, u)                # __cuda_array_interface__
        # Pairwise creation in one order on every rank: first to the lower
        # rank of each pair, so that no cycle of waits forms.
        peers = sorted({left, right})
        chans = {p: gpuport.PortChannel(comm, p, region, region) for p in peers}
        handles = {p: cp.frombuffer(chans[p].device_handle(), cp.uint8) for p in peers}
        mod = cp.RawModule(code=SOURCE, backend="nvcc",
                           options=("-I" + gpuport.include_dir(), "-std=c++17"))
        exchange, jacobi = mod.get_function("exchange"), mod.get_function("jacobi")
        rc = cp.zeros(2, cp.int32)
        for step in range(STEPS):
            exchange((1,), (2,), (handles[left], handles[right], u, cp.uint64(N),
                                  cp.int32(step % 2), rc))
            cp.cuda.runtime.deviceSynchronize()
            if rc.get().any():
                sys.exit("rank %d: device call failed: %s" % (rank, rc.get()))
            jacobi(((N + 255) // 256,), (256,), (u, v, cp.uint64(N)))
            u[1:N + 1] = v[1:N + 1]
        cp.cuda.runtime.deviceSynchronize()
        mine = cp.asnumpy(u[1:N + 1])
        want = reference(size)[rank * N:(rank + 1) * N]
        ok = np.allclose(mine, want, rtol=1e-5, atol=1e-6)
        for ch in chans.values():
            ch.close()
        region.close()
        del u, handles
        print("rank %d: %s after %d steps" % (rank, "PASS" if ok else "FAIL", STEPS))
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
