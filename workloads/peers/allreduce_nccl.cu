/*
 * allreduce_nccl: workloads/allreduce_gpu.cu's float32 sum of GPU buffers
 * over every rank with ncclAllReduce, as the peer baseline of gpuport's
 * memory and port channels: the same sizes, inputs, rounds and bound
 * (peer_allreduce.h), its own table. IN and OUT are cudaMalloc memory; a
 * round is an ncclAllReduce of one float (the meeting, untimed), then
 * ncclAllReduce of the size, timed by CUDA events on the stream. One GPU
 * per rank (two ranks on one GPU: every rank says SKIP and exits 77).
 *
 *   mpirun -np N allreduce_nccl [--small]
 */
#include "peer_nccl.h"
#include "peer_allreduce.h"

typedef struct nccl_state {
    ncclComm_t comm;
    float *one; /* device: the meeting's float */
} nccl_state_t;

static int nc_meet(ar_peer_t *a)
{
    nccl_state_t *st = (nccl_state_t *)a->lib_state;

    return nccl_ok(ncclAllReduce(st->one, st->one, 1, ncclFloat, ncclSum, st->comm, a->s),
                   "ncclAllReduce (meeting)");
}

static int nc_reduce(ar_peer_t *a, size_t count)
{
    nccl_state_t *st = (nccl_state_t *)a->lib_state;

    return nccl_ok(ncclAllReduce(a->in, a->out, count, ncclFloat, ncclSum, st->comm, a->s),
                   "ncclAllReduce");
}

int main(int argc, char **argv)
{
    wl_opts_t o;
    ar_peer_t a = {};
    nccl_state_t st = {};
    char gpu[256] = "", lib[64];
    size_t bytes;
    int rc = wl_init(&argc, &argv, NULL, &o), dev, good;

    if (rc >= 0)
        return rc;
    if (argc != 1) {
        if (wl_rank == 0)
            fprintf(stderr, "%s: unknown argument '%s' (--help)\n", argv[0], argv[1]);
        MPI_Finalize();
        return 2;
    }
    rc = peer_gpu(1, &dev, gpu, sizeof(gpu));
    if (rc >= 0)
        return rc;
    if (!peer_nccl_init(&st.comm))
        return wl_finish(0);
    bytes = (o.small ? 1 : 64) * WL_MIB; /* the largest size of the list */
    a.lib = "NCCL";
    a.call = "ncclAllReduce (ncclFloat, ncclSum)";
    a.meet = "ncclAllReduce of one float";
    a.meet_fn = nc_meet;
    a.reduce_fn = nc_reduce;
    a.lib_state = &st;
    good = cuda_ok(cudaMalloc((void **)&a.in, bytes), "cudaMalloc") &&
           cuda_ok(cudaMalloc((void **)&a.out, bytes), "cudaMalloc") &&
           cuda_ok(cudaMalloc((void **)&st.one, sizeof(float)), "cudaMalloc") &&
           cuda_ok(cudaMemset(st.one, 0, sizeof(float)), "cudaMemset") &&
           cuda_ok(cudaStreamCreateWithFlags(&a.s, cudaStreamNonBlocking), "cudaStreamCreate");
    if (wl_agree(good)) {
        peer_nccl_name(lib, sizeof(lib));
        peer_header("allreduce_nccl",
                    "float32 sum of GPU buffers over every rank, ncclAllReduce on a stream", lib,
                    gpu);
        good = ar_peer_main(&a, &o, gpu);
    }
    good = wl_agree(good); /* a failed rank's calls may be left pending: abort them */
    if (!nccl_ok(good ? ncclCommDestroy(st.comm) : ncclCommAbort(st.comm), "ncclCommDestroy"))
        good = 0;
    if (a.s)
        cudaStreamDestroy(a.s);
    cudaFree(st.one);
    cudaFree(a.out);
    cudaFree(a.in);
    return wl_finish(good);
}
