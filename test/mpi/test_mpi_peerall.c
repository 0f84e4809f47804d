/*
 * gpuport_peer_channel_create_all in host mode (GPUPORT_GPU=off: a peer
 * channel is then its port channel, whose host calls carry the puts; the
 * test reaches it through internal.h, as test_peer_channels does). Run at
 * 2, 3 and 4 ranks (peerall_np2.sh, _np3.sh, _np4.sh); each scenario is one
 * argument ("use", "args", "pair", "absent"; none: all of them).
 *
 * use: every rank's entry for itself is NULL, every other a peer channel
 * without the store path; each rank puts 256 bytes of its own pattern per
 * peer (the pattern names sender, receiver and byte) with a signal, and
 * each compares every byte that each peer put into its slot; each
 * channel takes one id, and destroying them gives every id back.
 * gpuport_peer_channel_device_all refuses NULL channels, NULL dev_p and an
 * entry that is not the channel to its index's rank, naming each, and
 * says GPUPORT_ERR_NOT_SUPPORTED in host mode (test_gpu_peer runs it on a
 * GPU).
 * args: one rank's arguments refused (the first, a middle, the last rank;
 * a dead registration as src, or channels NULL): every rank returns
 * GPUPORT_ERR_INVALID_ARG within 15 s although GPUPORT_TIMEOUT_MS is 60 s,
 * the refusing rank's log names the argument and the others' name its rank,
 * every entry is NULL and no id is kept. pair (3 ranks and more): the pair
 * (a, b) fails in the middle of the sequence (rank a has GPUPORT_MAX_CHANNELS
 * ids for its lower peers only, so it learns at that pair, after channels
 * were made): every rank returns GPUPORT_ERR_NO_RESOURCE, every entry NULL,
 * no id kept. After args and pair, the same communicator's create_all
 * succeeds and is used as in "use". absent: under GPUPORT_TIMEOUT_MS=2000
 * the last rank never calls: the others return GPUPORT_ERR_TIMEOUT after
 * the limit (at least 1.5 s, at most 30 s) with one error naming it and
 * what they waited for, every entry NULL, no id kept.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "capture.h"
#include "check.h"
#include "gpuport/gpuport_device.h"
#include "gpuport/gpuport_mpi.h"
#include "internal.h"

#define SLOT 256 /* bytes a rank puts to each peer */

static int rank, size;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint32_t ids_in_use(gpuport_comm_t comm)
{
    uint32_t n = 0;

    pthread_mutex_lock(&comm->lock);
    for (uint32_t i = 0; i < comm->config.max_channels; i++)
        n += comm->id_used[i] != 0;
    pthread_mutex_unlock(&comm->lock);
    return n;
}

static gpuport_comm_t comm_with(const char *timeout_ms, const char *max_channels)
{
    gpuport_comm_t comm;

    CHECK(setenv("GPUPORT_TIMEOUT_MS", timeout_ms, 1) == 0);
    if (max_channels)
        CHECK(setenv("GPUPORT_MAX_CHANNELS", max_channels, 1) == 0);
    CHECK_OK(gpuport_comm_init_mpi(MPI_COMM_WORLD, &comm));
    CHECK(unsetenv("GPUPORT_TIMEOUT_MS") == 0);
    CHECK(unsetenv("GPUPORT_MAX_CHANNELS") == 0);
    return comm;
}

/* Byte i of what rank `from` puts to rank `to`. */
static unsigned char pattern(int from, int to, int i)
{
    return (unsigned char)(from * 67 + to * 13 + i * 7 + 1);
}

/* One window of 2 x size slots: [0, size) received, slot q from rank q;
 * [size, 2 size) sent, slot size + p for rank p. */
typedef struct win {
    unsigned char *buf;
    gpuport_mem_t mem;
} win_t;

static void win_open(gpuport_comm_t comm, win_t *w)
{
    size_t bytes = 2 * (size_t)size * SLOT;

    CHECK_OK(gpuport_mem_alloc(comm, bytes, (void **)&w->buf));
    CHECK_OK(gpuport_mem_register(comm, w->buf, bytes, &w->mem));
}

static void win_close(gpuport_comm_t comm, win_t *w)
{
    CHECK_OK(gpuport_mem_deregister(w->mem));
    CHECK_OK(gpuport_mem_free(comm, w->buf));
}

/* create_all's channels checked, used both ways with every peer (bytes
 * compared) and destroyed, every id given back. */
static void all_used(gpuport_comm_t comm, win_t *w, gpuport_peer_channel_t *all, uint32_t ids)
{
    unsigned char *in = w->buf, *out = w->buf + (size_t)size * SLOT;

    for (int p = 0; p < size; p++) {
        CHECK_MSG(p == rank ? all[p] == NULL : gpuport_peer_channel_stores(all[p]) == 0,
                  "rank %d: entry %d is %p (stores %d)", rank, p, (void *)all[p],
                  p == rank ? -2 : gpuport_peer_channel_stores(all[p]));
        for (int i = 0; i < SLOT; i++)
            out[(size_t)p * SLOT + i] = pattern(rank, p, i);
    }
    CHECK(ids_in_use(comm) == ids + (uint32_t)size - 1);
    memset(in, 0, (size_t)size * SLOT);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int p = 0; p < size; p++)
        if (p != rank)
            CHECK_OK(gpuport_channel_put_with_signal(all[p]->ch, (uint64_t)rank * SLOT,
                                                     (uint64_t)(size + p) * SLOT, SLOT));
    for (int p = 0; p < size; p++) {
        if (p == rank)
            continue;
        CHECK_OK(gpuport_channel_wait(all[p]->ch));
        for (int i = 0; i < SLOT; i++)
            CHECK_MSG(in[(size_t)p * SLOT + i] == pattern(p, rank, i),
                      "rank %d: byte %d from rank %d is %u, not %u", rank, i, p,
                      in[(size_t)p * SLOT + i], pattern(p, rank, i));
        CHECK_OK(gpuport_channel_flush(all[p]->ch));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    for (int p = 0; p < size; p++)
        if (p != rank)
            CHECK_OK(gpuport_peer_channel_destroy(all[p]));
    CHECK_MSG(ids_in_use(comm) == ids, "rank %d: %u ids in use after the destroys, %u before",
              rank, ids_in_use(comm), ids);
}

static void sentinels(gpuport_peer_channel_t *all)
{
    for (int p = 0; p < size; p++)
        all[p] = (gpuport_peer_channel_t)(uintptr_t)1; /* overwritten: NULL or kept */
}

static void expect_none_kept(gpuport_comm_t comm, gpuport_peer_channel_t *all, uint32_t ids,
                             const char *what)
{
    for (int p = 0; all && p < size; p++)
        CHECK_MSG(all[p] == NULL, "rank %d: %s: the entry for %d is %p", rank, what, p,
                  (void *)all[p]);
    CHECK_MSG(ids_in_use(comm) == ids, "rank %d: %s: %u ids in use, %u before", rank, what,
              ids_in_use(comm), ids);
}

/* gpuport_peer_channel_device_all's refusals, each naming what was wrong;
 * nothing is written to *dev_p. Host mode has no device handles: a right
 * call says so (GPUPORT_ERR_NOT_SUPPORTED). */
static void device_all_refused(gpuport_comm_t comm, gpuport_peer_channel_t *all)
{
    gpuport_peer_channel_dev_t *dev = (gpuport_peer_channel_dev_t *)&dev, *was = dev;
    int other = (rank + 1) % size;
    gpuport_peer_channel_t keep = all[other];
    gpuport_status_t st;
    const char *log;

    capture_begin();
    st = gpuport_peer_channel_device_all(comm, NULL, &dev);
    log = capture_end();
    CHECK_MSG(st == GPUPORT_ERR_INVALID_ARG && strstr(log, "channels") && dev == was,
              "rank %d: device_all without channels: %s, log %s", rank, gpuport_status_string(st),
              log);
    capture_begin();
    st = gpuport_peer_channel_device_all(comm, all, NULL);
    log = capture_end();
    CHECK_MSG(st == GPUPORT_ERR_INVALID_ARG && strstr(log, "dev_p"),
              "rank %d: device_all without dev_p: %s, log %s", rank, gpuport_status_string(st), log);
    /* an entry that is not the channel to its index's rank */
    all[other] = size > 2 ? all[(rank + 2) % size] : NULL;
    capture_begin();
    st = gpuport_peer_channel_device_all(comm, all, &dev);
    log = capture_end();
    all[other] = keep;
    {
        char named[48];
        snprintf(named, sizeof(named), "channels[%d]", other);
        CHECK_MSG(st == GPUPORT_ERR_INVALID_ARG && strstr(log, named) && dev == was,
                  "rank %d: device_all with a wrong entry %d: %s, log %s", rank, other,
                  gpuport_status_string(st), log);
    }
    capture_begin();
    st = gpuport_peer_channel_device_all(comm, all, &dev);
    log = capture_end();
    CHECK_MSG(st == GPUPORT_ERR_NOT_SUPPORTED && dev == was,
              "rank %d: device_all on a host-mode communicator: %s (want "
              "GPUPORT_ERR_NOT_SUPPORTED), log %s",
              rank, gpuport_status_string(st), log);
}

static void use(void)
{
    gpuport_peer_channel_t *all = calloc((size_t)size, sizeof(*all));
    gpuport_comm_t comm = comm_with("20000", NULL);
    uint32_t ids = ids_in_use(comm);
    win_t w;

    CHECK(all != NULL);
    win_open(comm, &w);
    sentinels(all);
    CHECK_OK(gpuport_peer_channel_create_all(comm, w.mem, w.mem, all));
    device_all_refused(comm, all);
    all_used(comm, &w, all, ids);
    /* again on the same communicator: nothing of the first is in the way */
    CHECK_OK(gpuport_peer_channel_create_all(comm, w.mem, w.mem, all));
    all_used(comm, &w, all, ids);
    win_close(comm, &w);
    CHECK_OK(gpuport_comm_destroy(comm));
    free(all);
}

static void args(void)
{
    const int bad[3] = {0, size / 2, size - 1};
    gpuport_peer_channel_t *all = calloc((size_t)size, sizeof(*all));
    gpuport_comm_t comm = comm_with("60000", NULL);
    gpuport_mem_t dead;
    uint32_t ids;
    win_t w;

    CHECK(all != NULL);
    win_open(comm, &w);
    CHECK_OK(gpuport_mem_register(comm, w.buf, 8, &dead));
    CHECK_OK(gpuport_mem_deregister(dead));
    ids = ids_in_use(comm);
    for (int i = 0; i < 3; i++) {
        for (int how = 0; how < 2; how++) {
            int me = rank == bad[i];
            char named[64];
            double t0 = now_s();
            gpuport_status_t st;
            const char *log;

            sentinels(all);
            capture_begin();
            st = gpuport_peer_channel_create_all(comm, me && how ? dead : w.mem, w.mem,
                                                 me && !how ? NULL : all);
            log = capture_end();
            CHECK_MSG(st == GPUPORT_ERR_INVALID_ARG,
                      "rank %d: rank %d's %s refused: gpuport_peer_channel_create_all returned %s",
                      rank, bad[i], how ? "src" : "channels", gpuport_status_string(st));
            CHECK_MSG(now_s() - t0 < 15, "rank %d: rank %d's refusal took %.1f s", rank, bad[i],
                      now_s() - t0);
            snprintf(named, sizeof(named), "rank %d's failure (%s)", bad[i],
                     gpuport_status_string(GPUPORT_ERR_INVALID_ARG));
            CHECK_MSG(me ? strstr(log, how ? "src" : "channels is NULL") != NULL
                         : strstr(log, named) != NULL,
                      "rank %d: the refusal is not named (%s): %s", rank,
                      me ? (how ? "src" : "channels is NULL") : named, log);
            expect_none_kept(comm, me && !how ? NULL : all, ids, "arguments refused");
        }
    }
    CHECK_OK(gpuport_peer_channel_create_all(comm, w.mem, w.mem, all));
    all_used(comm, &w, all, ids);
    win_close(comm, &w);
    CHECK_OK(gpuport_comm_destroy(comm));
    free(all);
}

/* The pair (a, b), a < b, fails: rank a has ids for its channels to
 * 0 .. b-1 (itself excluded) only. */
static void pair_fails(int a, int b, const char *where)
{
    char max[16];
    gpuport_peer_channel_t *all = calloc((size_t)size, sizeof(*all));
    gpuport_comm_t comm;
    gpuport_status_t st;
    uint32_t ids;
    double t0;
    win_t w;

    CHECK(all != NULL && b - 1 >= 1);
    snprintf(max, sizeof(max), "%d", b - 1);
    comm = comm_with("20000", rank == a ? max : NULL);
    win_open(comm, &w);
    ids = ids_in_use(comm);
    sentinels(all);
    t0 = now_s();
    capture_begin();
    st = gpuport_peer_channel_create_all(comm, w.mem, w.mem, all);
    capture_end();
    CHECK_MSG(st == GPUPORT_ERR_NO_RESOURCE,
              "rank %d: the %s pair (%d, %d) failing: gpuport_peer_channel_create_all returned %s",
              rank, where, a, b, gpuport_status_string(st));
    CHECK_MSG(now_s() - t0 < 15, "rank %d: the %s pair failing took %.1f s", rank, where,
              now_s() - t0);
    expect_none_kept(comm, all, ids, where);
    win_close(comm, &w);
    CHECK_OK(gpuport_comm_destroy(comm));
    free(all);
}

static void absent(void)
{
    gpuport_peer_channel_t *all = calloc((size_t)size, sizeof(*all));
    gpuport_comm_t comm = comm_with("2000", NULL);
    uint32_t ids = ids_in_use(comm);
    char who[64];
    const char *log;
    gpuport_status_t st;
    double t0, dt;
    win_t w;

    CHECK(all != NULL);
    win_open(comm, &w);
    if (rank < size - 1) {
        sentinels(all);
        t0 = now_s();
        capture_begin();
        st = gpuport_peer_channel_create_all(comm, w.mem, w.mem, all);
        dt = now_s() - t0;
        log = capture_end();
        snprintf(who, sizeof(who), "rank %d did not answer within GPUPORT_TIMEOUT_MS=2000",
                 size - 1);
        CHECK_MSG(st == GPUPORT_ERR_TIMEOUT, "rank %d: returned %s", rank,
                  gpuport_status_string(st));
        CHECK_MSG(dt >= 1.5 && dt < 30, "rank %d: returned after %.2f s", rank, dt);
        CHECK_MSG(strstr(log, who) && strstr(log, "to create its side of this peer channel") &&
                      count_of(log, "ERROR") == 1,
                  "rank %d: the log lacks \"%s\" and what was awaited in one error: %s", rank,
                  who, log);
        expect_none_kept(comm, all, ids, "a rank absent");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    win_close(comm, &w);
    CHECK_OK(gpuport_comm_destroy(comm));
    free(all);
}

static void pair(void)
{
    if (size < 3) {
        if (rank == 0)
            printf("pair: not at 2 ranks (the failing pair's lower rank makes a channel "
                   "first)\n");
        return;
    }
    pair_fails(0, 2, "middle");
    pair_fails(size - 2, size - 1, "last");
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        void (*fn)(void);
    } scenarios[] = {{"use", use}, {"args", args}, {"pair", pair}, {"absent", absent}};

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(setenv("GPUPORT_LOG_LEVEL", "warn", 1) == 0);
    CHECK(setenv("GPUPORT_GPU", "off", 1) == 0);
    for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++) {
        int run = argc < 2;
        for (int a = 1; a < argc; a++)
            run |= strcmp(argv[a], scenarios[i].name) == 0;
        if (!run)
            continue;
        scenarios[i].fn();
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0)
            printf("PASS: %s at %d ranks\n", scenarios[i].name, size);
    }
    MPI_Finalize();
    return 0;
}
