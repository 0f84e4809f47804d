/*
 * halo_nccl: workloads/halo_gpu.cu's 2D Jacobi with NCCL exchanging the
 * halos, as the peer baseline of gpuport's port and memory channels: the
 * same grid, split, start values and bit-for-bit checks (halo.h), the same
 * sweep (peer_halo.h), its own table.
 *
 * Both buffers are one cudaMalloc block. Iteration k is two things on one
 * stream, enqueued back to back for the whole run with no host wait: a
 * kernel sweeps buffer k % 2 into (k + 1) % 2, then a group of ncclSend
 * (this rank's new first and last rows) and ncclRecv (the neighbours' rows
 * into the halos of buffer (k + 1) % 2), one pair per neighbour. Stream
 * order keeps a source row from being rewritten before NCCL has read it.
 * One GPU per rank (two ranks on one GPU: every rank says SKIP and exits
 * 77).
 *
 *   mpirun -np N halo_nccl [--nx N] [--ny N] [--iters-per-run N]
 */
#include "peer_nccl.h"
#include "peer_halo.h"

__global__ void sweep(double *buf, halo_geom_t g, int k)
{
    halo_sweep_rows(buf, g, k);
}

static int nc_step(halo_peer_t *hp, int k, int sweeps)
{
    ncclComm_t comm = *(ncclComm_t *)hp->lib_state;
    int p = (k + 1) % 2, good = 1;

    if (sweeps && k >= 0) {
        sweep<<<hp->blocks, HALO_THREADS, 0, hp->s>>>(hp->buf, hp->geo, k);
        good = cuda_ok(cudaGetLastError(), "sweep<<<>>>");
    }
    good = good && nccl_ok(ncclGroupStart(), "ncclGroupStart");
    for (int d = UP; d <= DOWN && good; d++) {
        int peer = halo_peer_rank(d);
        if (peer < 0)
            continue;
        good = nccl_ok(ncclSend(hp->buf + halo_src(&hp->geo, d, p), hp->geo.nx, ncclDouble, peer,
                                comm, hp->s), "ncclSend") &&
               nccl_ok(ncclRecv(hp->buf + halo_own(&hp->geo, d, p), hp->geo.nx, ncclDouble, peer,
                                comm, hp->s), "ncclRecv");
    }
    return nccl_ok(ncclGroupEnd(), "ncclGroupEnd") && good;
}

int main(int argc, char **argv)
{
    wl_opts_t o;
    halo_peer_t hp = {};
    ncclComm_t comm = NULL;
    char gpu[256] = "", lib[64];
    int rc = wl_init(&argc, &argv, HALO_USAGE, &o), nx, ny, iters, dev, good;

    if (rc >= 0)
        return rc;
    if (!halo_options(argc, argv, &o, &nx, &ny, &iters)) {
        MPI_Finalize();
        return 2;
    }
    rc = peer_gpu(1, &dev, gpu, sizeof(gpu));
    if (rc >= 0)
        return rc;
    if (!peer_nccl_init(&comm))
        return wl_finish(0);
    hp.lib = "NCCL";
    hp.geo = halo_geom(nx, ny);
    hp.blocks = (int)((hp.geo.rows * (size_t)nx + HALO_THREADS - 1) / HALO_THREADS);
    hp.blocks = hp.blocks < 1024 ? hp.blocks : 1024;
    hp.step = nc_step;
    hp.lib_state = &comm;
    good = cuda_ok(cudaMalloc((void **)&hp.buf, 2 * hp.geo.slab * sizeof(double)), "cudaMalloc") &&
           cuda_ok(cudaStreamCreateWithFlags(&hp.s, cudaStreamNonBlocking), "cudaStreamCreate");
    if (wl_agree(good)) {
        peer_nccl_name(lib, sizeof(lib));
        peer_header("halo_nccl",
                    "2D Jacobi (5-point, double) on the GPU, the halos exchanged by grouped "
                    "ncclSend/ncclRecv on the sweep's stream",
                    lib, gpu);
        good = halo_peer_main(&hp, iters, gpu);
    }
    good = wl_agree(good); /* a failed rank's calls may be left pending: abort them */
    if (!nccl_ok(good ? ncclCommDestroy(comm) : ncclCommAbort(comm), "ncclCommDestroy"))
        good = 0;
    if (hp.s)
        cudaStreamDestroy(hp.s);
    cudaFree(hp.buf);
    return wl_finish(good);
}
