/*
 * NCCL's start for the peer programs (the three _nccl.cu of
 * workloads/peers/): rank 0's ncclGetUniqueId through MPI_Bcast, then
 * ncclCommInitRank on every rank, each on the GPU peer_gpu(1, ...) made
 * current (one per rank: NCCL refuses two ranks on one GPU, and peer_gpu
 * has every rank skip first).
 */
#ifndef GPUPORT_PEER_NCCL_H
#define GPUPORT_PEER_NCCL_H

#include <nccl.h>
#include <stdio.h>

#include "peer.h"

static inline int nccl_ok(ncclResult_t r, const char *call)
{
    if (r == ncclSuccess)
        return 1;
    fprintf(stderr, "rank %d: %s failed: %s\n", wl_rank, call, ncclGetErrorString(r));
    return 0;
}

/* The communicator of every rank, rank r being NCCL's rank r. Collective;
 * 1 on every rank, or 0 on every rank (after a message). */
static inline int peer_nccl_init(ncclComm_t *comm_p)
{
    ncclUniqueId id;
    int ok = wl_rank != 0 || nccl_ok(ncclGetUniqueId(&id), "ncclGetUniqueId");

    if (!wl_agree(ok))
        return 0;
    MPI_Bcast(&id, (int)sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
    return wl_agree(nccl_ok(ncclCommInitRank(comm_p, wl_size, id, wl_rank), "ncclCommInitRank"));
}

/* The library as the header line names it: the loaded NCCL's version. */
static inline void peer_nccl_name(char *buf, size_t len)
{
    int v = 0;

    ncclGetVersion(&v);
    snprintf(buf, len, "NCCL %d.%d.%d", v / 10000, v / 100 % 100, v % 100);
}

#endif
