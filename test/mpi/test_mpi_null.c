/*
 * The MPI bootstrap's calls with NULL arguments and MPI_COMM_NULL, on the
 * installed-style libraries (libgpuport_mpi + libgpuport), at any number of
 * ranks: each returns GPUPORT_ERR_INVALID_ARG with a message naming what is
 * wrong, and a failed gpuport_comm_init_mpi leaves NULL in *comm_p. Then
 * a program built with another gpuport_bootstrap_t layout (the layout it
 * would pass to gpuport_bootstrap_mpi_v) is refused with GPUPORT_ERR_VERSION
 * and its struct left unwritten. Then
 * the README's old unchecked fragment under GPUPORT_TRANSPORT=foo: creation
 * fails on every rank, and every later call of the fragment, handed the
 * NULL, is refused instead of crashing. Last, a live communicator's
 * queries: rank, size, and which ranks share a host (all of them; then,
 * under two GPUPORT_HOST_IDs, even and odd ranks apart); and
 * gpuport_channel_create_all (create_all, below).
 * test/unit/test_null_args.c checks the rest of the API.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "check.h"
#include "gpuport/gpuport_mpi.h"

/* expr must return `want` and log a line containing `text` */
#define EXPECT(expr, want, text)                                                                \
    do {                                                                                        \
        const char *log_;                                                                       \
        capture_begin();                                                                        \
        gpuport_status_t st_ = (expr);                                                          \
        log_ = capture_end();                                                                   \
        CHECK_MSG(st_ == (want), "%s returned %d (%s), expected %d", #expr, (int)st_,           \
                  gpuport_status_string(st_), (int)(want));                                     \
        CHECK_MSG(strstr(log_, text), "%s: the log lacks \"%s\": %s", #expr, text, log_);       \
    } while (0)

/* gpuport_channel_create_all: a channel to every rank over one region (a
 * word per rank, then this rank's source word), each rank's word put to
 * every rank and checked; without the channel to itself; refused
 * arguments; then, at 3 ranks and more, rank 0 with room for 2 channels
 * only: every rank's call fails with rank 0's failure (want of channel
 * ids), none is left waiting, nothing is kept. */
static void create_all(int rank, int size)
{
    gpuport_channel_t *all = calloc((size_t)size, sizeof(*all));
    gpuport_comm_t comm;
    gpuport_mem_t m;
    uint64_t *win;
    gpuport_status_t st;

    CHECK(all != NULL);
    CHECK_OK(gpuport_comm_init_mpi(MPI_COMM_WORLD, &comm));
    CHECK_OK(gpuport_mem_alloc(comm, 8 * ((size_t)size + 1), (void **)&win));
    memset(win, 0, 8 * (size_t)size);
    win[size] = 1000 + (uint64_t)rank;
    CHECK_OK(gpuport_mem_register(comm, win, 8 * ((size_t)size + 1), &m));
    EXPECT(gpuport_channel_create_all(comm, m, m, 2, all), GPUPORT_ERR_INVALID_ARG, "with_self");
    EXPECT(gpuport_channel_create_all(comm, m, m, 1, NULL), GPUPORT_ERR_INVALID_ARG, "channels");
    EXPECT(gpuport_channel_create_all(NULL, m, m, 1, all), GPUPORT_ERR_INVALID_ARG, "comm");
    for (int self = 1; self >= 0; self--) {
        CHECK_OK(gpuport_channel_create_all(comm, m, m, self, all));
        for (int p = 0; p < size; p++) {
            CHECK_MSG((all[p] != NULL) == (p != rank || self), "rank %d: channel to %d is %p",
                      rank, p, (void *)all[p]);
            if (all[p])
                CHECK_OK(gpuport_channel_put_with_signal(all[p], 8 * (uint64_t)rank,
                                                         8 * (uint64_t)size, 8));
        }
        if (!self)
            all[rank] = all[(rank + 1) % size]; /* wait_all takes no NULL: a peer's twice */
        for (int p = 0; p < size; p++)
            if (p != rank || self)
                CHECK_OK(gpuport_channel_wait(all[p]));
        for (int p = 0; p < size; p++)
            if (p != rank || self)
                CHECK_MSG(win[p] == 1000 + (uint64_t)p, "rank %d: word of rank %d is %llu", rank,
                          p, (unsigned long long)win[p]);
        if (!self)
            all[rank] = NULL;
        for (int p = 0; p < size; p++)
            if (all[p])
                CHECK_OK(gpuport_channel_flush(all[p]));
        MPI_Barrier(MPI_COMM_WORLD);
        for (int p = 0; p < size; p++)
            if (all[p])
                CHECK_OK(gpuport_channel_destroy(all[p]));
        memset(win, 0, 8 * (size_t)size);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    CHECK_OK(gpuport_mem_deregister(m));
    CHECK_OK(gpuport_mem_free(comm, win));
    CHECK_OK(gpuport_comm_destroy(comm));
    if (size < 3) {
        free(all);
        return;
    }

    if (rank == 0)
        CHECK(setenv("GPUPORT_MAX_CHANNELS", "2", 1) == 0);
    CHECK_OK(gpuport_comm_init_mpi(MPI_COMM_WORLD, &comm));
    CHECK(unsetenv("GPUPORT_MAX_CHANNELS") == 0);
    st = gpuport_channel_create_all(comm, NULL, NULL, 1, all);
    CHECK_MSG(st == GPUPORT_ERR_NO_RESOURCE,
              "rank %d: gpuport_channel_create_all returned %s", rank, gpuport_status_string(st));
    for (int p = 0; p < size; p++)
        CHECK_MSG(all[p] == NULL, "rank %d: the channel to %d was kept", rank, p);
    CHECK_OK(gpuport_comm_destroy(comm));
    free(all);
}

int main(int argc, char **argv)
{
    gpuport_bootstrap_t bs;
    gpuport_comm_t comm;
    gpuport_mem_t msrc = NULL, mdst = NULL;
    gpuport_channel_t ch = NULL;
    void *src = NULL, *dst = NULL;
    int rank, size;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(setenv("GPUPORT_LOG_LEVEL", "warn", 1) == 0);

    EXPECT(gpuport_bootstrap_mpi(MPI_COMM_WORLD, NULL), GPUPORT_ERR_INVALID_ARG,
           "bootstrap_p is NULL");
    EXPECT(gpuport_bootstrap_mpi(MPI_COMM_NULL, &bs), GPUPORT_ERR_INVALID_ARG, "MPI_COMM_NULL");
    EXPECT(gpuport_comm_init_mpi(MPI_COMM_WORLD, NULL), GPUPORT_ERR_INVALID_ARG,
           "comm_p is NULL");
    comm = (gpuport_comm_t)&bs; /* anything but NULL */
    EXPECT(gpuport_comm_init_mpi(MPI_COMM_NULL, &comm), GPUPORT_ERR_INVALID_ARG,
           "MPI_COMM_NULL");
    CHECK_MSG(comm == NULL, "comm is %p after a failed gpuport_comm_init_mpi", (void *)comm);
    {
        /* an older program's bootstrap: one member short */
        struct {
            unsigned char bs[sizeof(gpuport_bootstrap_t) - sizeof(void *)];
            unsigned char after[sizeof(void *) + 16];
        } old;
        memset(&old, 0x5a, sizeof(old));
        EXPECT(gpuport_bootstrap_mpi_v(GPUPORT_LAYOUT(0, old.bs), MPI_COMM_WORLD,
                                       (gpuport_bootstrap_t *)(void *)&old),
               GPUPORT_ERR_VERSION, "gpuport_bootstrap_t of layout version 0");
        for (size_t i = 0; i < sizeof(old); i++)
            CHECK_MSG(((unsigned char *)&old)[i] == 0x5a, "byte %zu of a refused bootstrap "
                      "written", i);
        EXPECT(gpuport_bootstrap_mpi_v(GPUPORT_BOOTSTRAP_LAYOUT, MPI_COMM_WORLD, NULL),
               GPUPORT_ERR_INVALID_ARG, "bootstrap_p is NULL");
    }

    /* the fragment, statuses ignored as it ignored them */
    comm = (gpuport_comm_t)&bs;
    CHECK(setenv("GPUPORT_TRANSPORT", "foo", 1) == 0);
    EXPECT(gpuport_comm_init_mpi(MPI_COMM_WORLD, &comm), GPUPORT_ERR_INVALID_CONFIG,
           "GPUPORT_TRANSPORT");
    CHECK(unsetenv("GPUPORT_TRANSPORT") == 0);
    CHECK_MSG(comm == NULL, "comm is %p after a failed gpuport_comm_init_mpi", (void *)comm);
    EXPECT(gpuport_mem_alloc(comm, 4096, &src), GPUPORT_ERR_INVALID_ARG, "gpuport_mem_alloc");
    EXPECT(gpuport_mem_alloc(comm, 4096, &dst), GPUPORT_ERR_INVALID_ARG, "gpuport_mem_alloc");
    EXPECT(gpuport_mem_register(comm, src, 4096, &msrc), GPUPORT_ERR_INVALID_ARG,
           "gpuport_mem_register");
    EXPECT(gpuport_mem_register(comm, dst, 4096, &mdst), GPUPORT_ERR_INVALID_ARG,
           "gpuport_mem_register");
    EXPECT(gpuport_channel_create(comm, (rank + 1) % size, msrc, mdst, &ch),
           GPUPORT_ERR_INVALID_ARG, "gpuport_channel_create");
    EXPECT(gpuport_channel_put_with_signal(ch, 0, 0, 8), GPUPORT_ERR_INVALID_ARG,
           "gpuport_channel_put");
    EXPECT(gpuport_channel_wait(ch), GPUPORT_ERR_INVALID_ARG, "gpuport_channel_wait");
    EXPECT(gpuport_channel_flush(ch), GPUPORT_ERR_INVALID_ARG, "gpuport_channel_flush");
    EXPECT(gpuport_channel_destroy(ch), GPUPORT_ERR_INVALID_ARG, "gpuport_channel_destroy");
    EXPECT(gpuport_mem_deregister(msrc), GPUPORT_ERR_INVALID_ARG, "gpuport_mem_deregister");
    EXPECT(gpuport_comm_destroy(comm), GPUPORT_ERR_INVALID_ARG, "gpuport_comm_destroy");
    CHECK(src == NULL && dst == NULL && msrc == NULL && mdst == NULL && ch == NULL);

    /* nothing was left half made: a communicator comes up and goes */
    CHECK_OK(gpuport_comm_init_mpi(MPI_COMM_WORLD, &comm));
    CHECK(gpuport_comm_rank(comm) == rank && gpuport_comm_size(comm) == size);
    /* the host queries: every rank runs on this machine (unless the caller
     * set GPUPORT_HOST_ID for some) */
    if (!getenv("GPUPORT_HOST_ID")) {
        for (int p = 0; p < size; p++)
            CHECK_MSG(gpuport_comm_same_host(comm, p) == 1, "rank %d: peer %d not on this host", rank,
                      p);
        CHECK(gpuport_comm_local_rank(comm) == rank && gpuport_comm_local_size(comm) == size);
    }
    CHECK(gpuport_comm_same_host(comm, size) == -1 && gpuport_comm_same_host(comm, -1) == -1);
    CHECK_OK(gpuport_comm_destroy(comm));

    /* two host identities, even ranks on one and odd on the other: the
     * queries follow them (rank 2k + h is local rank k of host h) */
    CHECK(setenv("GPUPORT_HOST_ID", rank % 2 ? "b0b0" : "a0a0", 1) == 0);
    CHECK_OK(gpuport_comm_init_mpi(MPI_COMM_WORLD, &comm));
    for (int p = 0; p < size; p++)
        CHECK_MSG(gpuport_comm_same_host(comm, p) == (p % 2 == rank % 2),
                  "rank %d: gpuport_comm_same_host(peer %d) is %d", rank, p,
                  gpuport_comm_same_host(comm, p));
    CHECK_MSG(gpuport_comm_local_rank(comm) == rank / 2 &&
                  gpuport_comm_local_size(comm) == (size - rank % 2 + 1) / 2,
              "rank %d of %d: local rank %d of %d", rank, size, gpuport_comm_local_rank(comm),
              gpuport_comm_local_size(comm));
    CHECK_OK(gpuport_comm_destroy(comm));
    CHECK(unsetenv("GPUPORT_HOST_ID") == 0);

    create_all(rank, size);
    printf("rank %d: the MPI bootstrap refused NULL arguments; the failed fragment was refused "
           "call by call\n",
           rank);
    MPI_Finalize();
    return 0;
}
