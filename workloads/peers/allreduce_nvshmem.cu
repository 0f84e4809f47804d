/*
 * allreduce_nvshmem: workloads/allreduce_gpu.cu's float32 sum of GPU
 * buffers over every rank with NVSHMEM's reduction, as the peer baseline of
 * gpuport's memory and port channels: the same sizes, inputs, rounds and
 * bound (peer_allreduce.h), its own table. IN and OUT are symmetric
 * (nvshmem_malloc); a round is nvshmemx_barrier_all_on_stream (the meeting,
 * untimed), then nvshmemx_float_sum_reduce_on_stream on NVSHMEM_TEAM_WORLD,
 * timed by CUDA events on the stream.
 *
 *   mpirun -np N allreduce_nvshmem [--small] [--bootstrap mpi|uid]
 */
#include "peer_nvshmem.h"
#include "peer_allreduce.h"

static int nv_meet(ar_peer_t *a)
{
    nvshmemx_barrier_all_on_stream(a->s);
    return cuda_ok(cudaGetLastError(), "nvshmemx_barrier_all_on_stream");
}

static int nv_reduce(ar_peer_t *a, size_t count)
{
    /* exchange: begin */
    int st = nvshmemx_float_sum_reduce_on_stream(NVSHMEM_TEAM_WORLD, a->out, a->in, count, a->s);
    /* exchange: end */

    if (st != 0)
        fprintf(stderr, "rank %d: nvshmemx_float_sum_reduce_on_stream(%zu floats) failed: %d\n",
                wl_rank, count, st);
    return st == 0;
}

int main(int argc, char **argv)
{
    wl_opts_t o;
    ar_peer_t a = {};
    char gpu[256] = "", lib[96];
    const char *boot;
    size_t bytes;
    int rc = wl_init(&argc, &argv, PEER_NVSHMEM_USAGE, &o), dev, good;

    if (rc >= 0)
        return rc;
    boot = peer_nvshmem_option(&argc, argv);
    if (!boot || argc != 1) {
        if (boot && wl_rank == 0)
            fprintf(stderr, "%s: unknown argument '%s' (--help)\n", argv[0], argv[1]);
        MPI_Finalize();
        return 2;
    }
    rc = peer_gpu(0, &dev, gpu, sizeof(gpu));
    if (rc >= 0)
        return rc;
    if (!peer_nvshmem_init(boot)) {
        nvshmem_finalize();
        return wl_finish(0);
    }
    bytes = (o.small ? 1 : 64) * WL_MIB; /* the largest size of the list */
    a.lib = "NVSHMEM";
    a.call = "nvshmemx_float_sum_reduce_on_stream on NVSHMEM_TEAM_WORLD";
    a.meet = "nvshmemx_barrier_all_on_stream";
    a.meet_fn = nv_meet;
    a.reduce_fn = nv_reduce;
    /* setup: begin */
    a.in = (float *)nvshmem_malloc(bytes);
    a.out = (float *)nvshmem_malloc(bytes);
    good = a.in && a.out;
    if (!good)
        fprintf(stderr,
                "rank %d: nvshmem_malloc of 2 x %zu bytes failed (NVSHMEM_SYMMETRIC_SIZE?)\n",
                wl_rank, bytes);
    /* setup: end */
    good = good && cuda_ok(cudaStreamCreateWithFlags(&a.s, cudaStreamNonBlocking),
                           "cudaStreamCreate");
    if (wl_agree(good)) {
        peer_nvshmem_name(boot, lib, sizeof(lib));
        peer_header("allreduce_nvshmem",
                    "float32 sum of GPU buffers over every rank, NVSHMEM's reduction on a stream",
                    lib, gpu);
        good = ar_peer_main(&a, &o, gpu);
    }
    nvshmem_barrier_all();
    if (a.s)
        cudaStreamDestroy(a.s);
    nvshmem_free(a.out);
    nvshmem_free(a.in);
    nvshmem_finalize();
    return wl_finish(good);
}
