"""GPU-only (needs a GPU per rank or ranks sharing one, and PyTorch with
CUDA; passed at 2 ranks on one H100 under MPS). A mixture-of-experts
dispatch and combine with PyTorch tensors over gpuport port channels,
beside mpi4py's Alltoallv doing the same.

    mpirun -np 4 --bind-to none python3 python/examples/dispatch_combine_torch.py

Each rank holds T tokens of H floats and sends each token to the rank of its
expert (dispatch); the expert rank scales what it received by (rank + 1) and
sends every token back to where it came from (combine). The puts are issued
from Python on GPU memory (VMM memory from gpuport.alloc_device, which the
copy engine moves between GPUs of a host, or tcp between hosts); the counts
go by mpi4py. The result is compared with the same exchange done by
MPI Alltoallv on host copies, and the time of each is printed.
"""
import sys
import time

import numpy as np
import torch
from mpi4py import MPI

import gpuport

T, H = 4096, 1024


def main():
    world = MPI.COMM_WORLD
    torch.cuda.set_device(world.Get_rank() % torch.cuda.device_count())
    with gpuport.Comm(world) as comm:
        if not comm.gpu_mode():
            print("rank %d: SKIP: the communicator is host-only (no GPU mode)" % comm.rank)
            return 77
        size, rank = comm.size, comm.rank
        g = torch.Generator(device="cuda").manual_seed(rank)
        tokens = torch.randn(T, H, device="cuda", generator=g)
        expert = torch.randint(0, size, (T,), device="cuda", generator=g)
        order = torch.argsort(expert)
        counts = torch.bincount(expert, minlength=size).cpu().numpy().astype(np.int64)
        recv_counts = np.empty(size, np.int64)
        world.Alltoall(counts, recv_counts)
        send_off = np.concatenate([[0], np.cumsum(counts)[:-1]])
        recv_off = np.concatenate([[0], np.cumsum(recv_counts)[:-1]])
        # where my tokens land in each peer's receive buffer: peers' offsets
        land_off = np.empty(size, np.int64)
        world.Alltoall(recv_off, land_off)

        row = H * 4
        cap = T * size                                  # any split fits
        send = gpuport.alloc_device(comm, (T, H), "float32", like="torch")
        recv = gpuport.alloc_device(comm, (cap, H), "float32", like="torch")
        back = gpuport.alloc_device(comm, (T, H), "float32", like="torch")
        send.copy_(tokens[order])
        r_send, r_recv, r_back = (gpuport.Region(comm, t) for t in (send, recv, back))
        # dispatch channels: send -> peers' recv; combine channels: recv -> peers' back
        disp = gpuport.create_all(comm, r_send, r_recv, with_self=True)   # collective
        comb = gpuport.create_all(comm, r_recv, r_back, with_self=True)   # collective
        torch.cuda.synchronize()

        t0 = time.perf_counter()
        for p in range(size):
            if counts[p]:
                disp[p].put(int(land_off[p]) * row, int(send_off[p]) * row, int(counts[p]) * row)
            disp[p].signal()
        gpuport.wait_all(disp)                          # every peer's tokens are here
        n_in = int(recv_counts.sum())
        recv[:n_in] *= rank + 1                         # the "expert"
        torch.cuda.synchronize()
        # combine: each block goes back to the slot it came from
        back_off = np.empty(size, np.int64)
        world.Alltoall(send_off, back_off)
        for p in range(size):
            if recv_counts[p]:
                comb[p].put(int(back_off[p]) * row, int(recv_off[p]) * row,
                            int(recv_counts[p]) * row)
            comb[p].signal()
        gpuport.wait_all(comb)
        gpuport.flush_all([c for c in disp + comb])
        t_gp = time.perf_counter() - t0

        # the same with mpi4py on host copies
        t0 = time.perf_counter()
        h_send = tokens[order].cpu().numpy()
        h_recv = np.empty((n_in, H), np.float32)
        world.Alltoallv([h_send, counts * H], [h_recv, recv_counts * H])
        h_recv *= rank + 1
        h_back = np.empty((T, H), np.float32)
        world.Alltoallv([h_recv, recv_counts * H], [h_back, counts * H])
        t_mpi = time.perf_counter() - t0

        ok = np.allclose(back.cpu().numpy(), h_back) and np.allclose(
            h_back, tokens[order].cpu().numpy() * (expert[order].cpu().numpy()[:, None] + 1))
        for c in disp + comb:
            c.signal()
        gpuport.wait_all(disp + comb)                   # nobody closes early
        for c in disp + comb:
            c.close()
        for r in (r_send, r_recv, r_back):
            r.close()
        del send, recv, back
        print("rank %d: %s; gpuport %.2f ms, mpi4py Alltoallv (host copies) %.2f ms"
              % (rank, "PASS" if ok else "FAIL", t_gp * 1e3, t_mpi * 1e3))
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
