/*
 * reduce_host: every MPI rank adds its vector of float32 values into rank
 * 0's, through gpuport port channels (gpuport_channel_accumulate), and rank
 * 0 checks the sum. Works on any number of ranks, on one host (shm) or many
 * (tcp, ib where it can add integers only: see docs/GUIDE.md).
 *
 * Rank 0 opens a channel to every rank, itself included; every other rank
 * one to rank 0. Each rank accumulates COUNT elements (each element one
 * atomic add, so the ranks' adds may land at once) and then signals; rank 0
 * waits for one signal per channel, after which every sum is in its
 * destination, and compares each element with the sum computed in rank
 * order on the host. Floating-point adds from several ranks land in any
 * order: the two sums may differ by the rounding bound gpuport.h documents,
 * (ranks - 1) * 2^-24 * sum |x|, and by no more.
 *
 *   mpicc reduce_host.c $(pkg-config --cflags --libs gpuport-mpi) -lm -o reduce_host
 *   mpirun -np 4 ./reduce_host [COUNT]       (default 1,000,000 elements)
 */
#include <gpuport/gpuport_mpi.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank = -1;

/* 1 when the call succeeded, else 0 after saying what failed */
static int ok(gpuport_status_t st, const char *call)
{
    if (st == GPUPORT_OK)
        return 1;
    fprintf(stderr, "rank %d: %s failed: %s (%d)\n", rank, call, gpuport_status_string(st),
            (int)st);
    return 0;
}

/* rank r's element i: the same on every rank, in [-1, 1) */
static float value(int r, size_t i)
{
    uint64_t h = ((uint64_t)r * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)i * 0xbf58476d1ce4e5b9ull);
    h ^= h >> 31;
    h *= 0x94d049bb133111ebull;
    h ^= h >> 29;
    return (float)((double)(h >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* rank 0: every element against the sum in rank order, within the bound */
static size_t check(const float *sum, size_t count, int size)
{
    size_t bad = 0;
    double worst = 0;

    for (size_t i = 0; i < count; i++) {
        double exact = 0, mag = 0, err;
        for (int r = 0; r < size; r++) {
            exact += value(r, i);
            mag += fabs(value(r, i));
        }
        err = fabs((double)sum[i] - exact);
        if (err > (size - 1) * ldexp(1.0, -24) * mag * 1.000001) {
            if (bad++ < 5)
                fprintf(stderr, "rank 0: element %zu is %.9g, the sum is %.12g\n", i,
                        (double)sum[i], exact);
        }
        if (mag > 0 && err / mag > worst)
            worst = err / mag;
    }
    printf("rank 0: worst relative error %.3g, bound %.3g\n", worst,
           (size - 1) * ldexp(1.0, -24));
    return bad;
}

int main(int argc, char **argv)
{
    gpuport_comm_t comm;
    gpuport_mem_t msrc, mdst;
    gpuport_channel_t *ch;
    float *src, *dst;
    size_t count = 1000000, bad = 0;
    int size, nch, failed = 1, made = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 1) {
        char *end;
        count = strtoull(argv[1], &end, 0);
        if (*end || count == 0) {
            if (rank == 0)
                fprintf(stderr, "usage: %s [COUNT]: '%s' is not a positive number\n", argv[0],
                        argv[1]);
            MPI_Finalize();
            return 2;
        }
    }
    if (!ok(gpuport_comm_init_mpi(MPI_COMM_WORLD, &comm), "gpuport_comm_init_mpi")) {
        MPI_Finalize();
        return 1;
    }
    /* The destination is added into atomically by the peers: memory from
     * gpuport_mem_alloc, which same-host peers map (shm adds through the
     * mapping; it cannot add into private memory). */
    nch = rank == 0 ? size : 1;
    ch = calloc((size_t)nch, sizeof(*ch));
    if (!ch || !ok(gpuport_mem_alloc(comm, count * sizeof(float), (void **)&src), "alloc src") ||
        !ok(gpuport_mem_alloc(comm, count * sizeof(float), (void **)&dst), "alloc dst"))
        goto out_comm;
    memset(dst, 0, count * sizeof(float));
    for (size_t i = 0; i < count; i++)
        src[i] = value(rank, i);
    if (!ok(gpuport_mem_register(comm, src, count * sizeof(float), &msrc), "register src"))
        goto out_mem;
    if (!ok(gpuport_mem_register(comm, dst, count * sizeof(float), &mdst), "register dst"))
        goto out_src;
    /* rank 0 meets every rank in turn; each of the others meets rank 0 */
    for (made = 0; made < nch; made++)
        if (!ok(gpuport_channel_create(comm, rank == 0 ? made : 0, msrc, mdst, &ch[made]),
                "gpuport_channel_create"))
            goto out_channels;

    /* rank 0's destination is zero on every rank before anyone adds */
    MPI_Barrier(MPI_COMM_WORLD);
    if (!ok(gpuport_channel_accumulate(ch[0], 0, 0, count, GPUPORT_FLOAT32),
            "gpuport_channel_accumulate") ||
        !ok(gpuport_channel_signal(ch[0]), "gpuport_channel_signal"))
        goto out_channels;
    if (rank == 0) {
        for (int c = 0; c < nch; c++)
            if (!ok(gpuport_channel_wait(ch[c]), "gpuport_channel_wait"))
                goto out_channels;
        bad = check(dst, count, size);
        if (bad)
            fprintf(stderr, "rank 0: %zu of %zu sums beyond the bound\n", bad, count);
        else
            printf("rank 0: %zu float32 sums of %d ranks over %s: OK\n", count, size,
                   gpuport_channel_transport(ch[size > 1 ? 1 : 0]));
    }
    if (!ok(gpuport_channel_flush(ch[0]), "gpuport_channel_flush"))
        goto out_channels;
    failed = bad != 0;

out_channels:
    /* nobody destroys a channel another rank still adds through */
    MPI_Barrier(MPI_COMM_WORLD);
    while (made-- > 0)
        failed |= !ok(gpuport_channel_destroy(ch[made]), "gpuport_channel_destroy");
    gpuport_mem_deregister(mdst);
out_src:
    gpuport_mem_deregister(msrc);
out_mem:
    gpuport_mem_free(comm, src);
    gpuport_mem_free(comm, dst);
out_comm:
    free(ch);
    failed |= !ok(gpuport_comm_destroy(comm), "gpuport_comm_destroy");
    MPI_Finalize();
    return failed;
}
