/*
 * host_channels: two MPI ranks exchange a buffer of host memory over one
 * gpuport port channel, checking every call.
 *
 * Each rank pairs with rank ^ 1 (run an even number of ranks), fills its
 * source with a pattern of its own, puts the whole source into the peer's
 * destination with a signal, waits for the peer's signal, compares every
 * byte it received, flushes its own put and releases everything in the
 * reverse order of creation. A failed call prints what failed and why, and
 * the program exits non-zero.
 *
 *   mpicc host_channels.c $(pkg-config --cflags --libs gpuport-mpi) -o host_channels
 *   mpirun -np 2 ./host_channels [BYTES]       (default 1 MiB)
 */
#include <gpuport/gpuport_mpi.h>
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

static unsigned char pattern(int from, size_t i)
{
    return (unsigned char)(from * 37 + i * 11 + (i >> 8));
}

int main(int argc, char **argv)
{
    gpuport_comm_t comm;
    gpuport_mem_t msrc, mdst;
    gpuport_channel_t ch;
    unsigned char *src, *dst;
    size_t bytes = 1 << 20, bad = 0;
    int size, peer, failed = 1;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 1) {
        char *end;
        bytes = strtoull(argv[1], &end, 0);
        if (*end || bytes == 0) {
            if (rank == 0)
                fprintf(stderr, "usage: %s [BYTES]: '%s' is not a positive number\n", argv[0],
                        argv[1]);
            MPI_Finalize();
            return 2;
        }
    }
    if (size % 2) {
        if (rank == 0)
            fprintf(stderr, "%s pairs rank r with rank r ^ 1: run an even number of ranks, not "
                            "%d\n",
                    argv[0], size);
        MPI_Finalize();
        return 2;
    }
    peer = rank ^ 1;

    /* Collective, and so is its failure: every rank returns an error (a bad
     * GPUPORT_* value on any rank fails them all), and comm is NULL then. */
    if (!ok(gpuport_comm_init_mpi(MPI_COMM_WORLD, &comm), "gpuport_comm_init_mpi")) {
        MPI_Finalize();
        return 1;
    }

    /* The source is ordinary heap memory; the destination comes from
     * gpuport_mem_alloc, which a same-host peer maps and writes directly. */
    src = malloc(bytes);
    if (!src) {
        fprintf(stderr, "rank %d: malloc(%zu) failed\n", rank, bytes);
        goto err_comm;
    }
    if (!ok(gpuport_mem_alloc(comm, bytes, (void **)&dst), "gpuport_mem_alloc"))
        goto err_src;
    for (size_t i = 0; i < bytes; i++)
        src[i] = pattern(rank, i);
    memset(dst, 0, bytes);
    if (!ok(gpuport_mem_register(comm, src, bytes, &msrc), "gpuport_mem_register(src)"))
        goto err_dst;
    if (!ok(gpuport_mem_register(comm, dst, bytes, &mdst), "gpuport_mem_register(dst)"))
        goto err_msrc;

    /* Pairwise: the peer makes the same call with this rank as its peer. */
    if (!ok(gpuport_channel_create(comm, peer, msrc, mdst, &ch), "gpuport_channel_create"))
        goto err_mdst;

    /* Queued at once; the proxy thread carries it out. The peer's signal
     * tells this rank that the peer's put has landed in dst. */
    if (!ok(gpuport_channel_put_with_signal(ch, 0, 0, bytes), "gpuport_channel_put_with_signal"))
        goto err_ch;
    if (!ok(gpuport_channel_wait(ch), "gpuport_channel_wait"))
        goto err_ch;
    for (size_t i = 0; i < bytes; i++)
        bad += dst[i] != pattern(peer, i);
    /* This rank's own put is complete: src could be reused from here on. */
    if (!ok(gpuport_channel_flush(ch), "gpuport_channel_flush"))
        goto err_ch;
    if (bad) {
        fprintf(stderr, "rank %d: %zu of %zu bytes from rank %d are wrong\n", rank, bad, bytes,
                peer);
        goto err_ch;
    }
    printf("rank %d: received %zu bytes from rank %d over %s: OK\n", rank, bytes, peer,
           gpuport_channel_transport(ch));
    failed = 0;

err_ch:
    /* From either side at any time; returns once the peer can no longer
     * write into this rank's regions. */
    if (!ok(gpuport_channel_destroy(ch), "gpuport_channel_destroy"))
        failed = 1;
err_mdst:
    if (!ok(gpuport_mem_deregister(mdst), "gpuport_mem_deregister(dst)"))
        failed = 1;
err_msrc:
    if (!ok(gpuport_mem_deregister(msrc), "gpuport_mem_deregister(src)"))
        failed = 1;
err_dst:
    if (!ok(gpuport_mem_free(comm, dst), "gpuport_mem_free"))
        failed = 1;
err_src:
    free(src);
err_comm:
    if (!ok(gpuport_comm_destroy(comm), "gpuport_comm_destroy"))
        failed = 1;
    if (failed) {
        /* The peer may be waiting in a pairwise call (channel creation, a
         * wait) that this rank will not make: end the job rather than leave
         * it waiting. */
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Finalize();
    return 0;
}
