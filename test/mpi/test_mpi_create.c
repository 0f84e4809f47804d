/*
 * Channel creation that a peer does not answer, and gpuport_channel_create_all's
 * one outcome. Run at 2, 3 and 4 ranks (create_np2.sh, _np3.sh, _np4.sh);
 * each scenario is one argument ("stray", "all-fail", "all-args",
 * "all-absent"; none: all of them).
 *
 * stray (2 ranks and more; ranks above 1 only meet the barriers): under
 * GPUPORT_TIMEOUT_MS=2000 and GPUPORT_MAX_CHANNELS=1, rank 0 creates a
 * channel to rank 1 while rank 1 creates one to itself; then rank 1 never
 * calls; then a memory channel the same; then rank 1 waits for rank 0, which
 * never calls. Each waiting call returns GPUPORT_ERR_TIMEOUT after the
 * limit (at least 1.5 s, at most 30 s: a loaded machine may be slow, the
 * library must not be early) with one error line naming the rank and what
 * it waited for. Then both create the right channel (one id each: a leaked
 * id would refuse it) and put a word each way, compared.
 *
 * all-fail: gpuport_channel_create_all with the first, a middle and the last
 * pair failing (the pair's lower rank has too few channel ids, which it
 * learns at that pair): every rank returns GPUPORT_ERR_NO_RESOURCE, keeps no
 * channel, and the same ranks then create all channels and use them.
 * all-args: one rank's arguments refused (the first, a middle, the last
 * rank; with_self 2 or a dead registration): every rank returns
 * GPUPORT_ERR_INVALID_ARG within 15 s although GPUPORT_TIMEOUT_MS is 60 s
 * (nobody waits out the limit), nothing kept. all-absent: the last rank
 * never calls: the others return GPUPORT_ERR_TIMEOUT naming it, nothing kept.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "capture.h"
#include "check.h"
#include "gpuport/gpuport_mpi.h"

static int rank, size;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
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

/* A call that waits for a peer that does not come: the limit's status
 * after the limit, and one error line naming the peer and what was
 * awaited. */
#define EXPECT_TIMEOUT(expr, peer, awaited)                                                     \
    do {                                                                                        \
        char who_[64];                                                                          \
        double t0_ = now_s(), dt_;                                                              \
        const char *log_;                                                                       \
        capture_begin();                                                                        \
        gpuport_status_t st_ = (expr);                                                          \
        dt_ = now_s() - t0_;                                                                    \
        log_ = capture_end();                                                                   \
        snprintf(who_, sizeof(who_), "rank %d did not answer within GPUPORT_TIMEOUT_MS=2000",  \
                 (peer));                                                                       \
        CHECK_MSG(st_ == GPUPORT_ERR_TIMEOUT, "rank %d: %s returned %s", rank, #expr,           \
                  gpuport_status_string(st_));                                                  \
        CHECK_MSG(dt_ >= 1.5 && dt_ < 30, "rank %d: %s returned after %.2f s", rank, #expr,    \
                  dt_);                                                                         \
        CHECK_MSG(strstr(log_, who_) && strstr(log_, awaited) && count_of(log_, "ERROR") == 1, \
                  "rank %d: %s: the log lacks \"%s\" and \"%s\" in one error: %s", rank, #expr, \
                  who_, awaited, log_);                                                         \
    } while (0)

/* One word each way over a and b's channel, compared. */
static void one_word_each_way(gpuport_channel_t ch, uint64_t *win, int peer)
{
    win[0] = 0;
    win[1] = 7000 + (uint64_t)rank;
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK_OK(gpuport_channel_put_with_signal(ch, 0, 8, 8));
    CHECK_OK(gpuport_channel_wait(ch));
    CHECK_MSG(win[0] == 7000 + (uint64_t)peer, "rank %d: word from rank %d is %llu", rank, peer,
              (unsigned long long)win[0]);
    CHECK_OK(gpuport_channel_flush(ch));
}

static void stray(void)
{
    gpuport_comm_t comm = comm_with("2000", "1");
    gpuport_channel_t ch;
    gpuport_memory_channel_t mc;
    gpuport_mem_t m;
    uint64_t *win;

    CHECK_OK(gpuport_mem_alloc(comm, 16, (void **)&win));
    CHECK_OK(gpuport_mem_register(comm, win, 16, &m));
    /* rank 1 names itself */
    if (rank == 0)
        EXPECT_TIMEOUT(gpuport_channel_create(comm, 1, m, m, &ch), 1,
                       "rank 1 to create its side of this channel (gpuport_channel_create");
    if (rank == 1) {
        CHECK_OK(gpuport_channel_create(comm, 1, m, m, &ch));
        CHECK_OK(gpuport_channel_destroy(ch));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    /* rank 1 never calls */
    if (rank == 0)
        EXPECT_TIMEOUT(gpuport_channel_create(comm, 1, m, m, &ch), 1, "rank 1 to create");
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        double t0 = now_s();
        const char *log;
        gpuport_status_t st;

        capture_begin();
        st = gpuport_memory_channel_create(comm, 1, NULL, NULL, &mc);
        log = capture_end();
        CHECK_MSG(st == GPUPORT_ERR_TIMEOUT && now_s() - t0 >= 1.5,
                  "gpuport_memory_channel_create returned %s after %.2f s",
                  gpuport_status_string(st), now_s() - t0);
        CHECK_MSG(strstr(log, "rank 1 did not answer within GPUPORT_TIMEOUT_MS=2000") &&
                      strstr(log, "(gpuport_memory_channel_create naming rank 0)"),
                  "the memory channel's log lacks the wait: %s", log);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    /* the higher rank waits: it receives first */
    if (rank == 1)
        EXPECT_TIMEOUT(gpuport_channel_create(comm, 0, m, m, &ch), 0, "rank 0 to create");
    MPI_Barrier(MPI_COMM_WORLD);
    /* what the abandoned calls left is passed over */
    if (rank <= 1) {
        CHECK_OK(gpuport_channel_create(comm, 1 - rank, m, m, &ch));
        one_word_each_way(ch, win, 1 - rank);
    } else {
        MPI_Barrier(MPI_COMM_WORLD);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank <= 1)
        CHECK_OK(gpuport_channel_destroy(ch));
    CHECK_OK(gpuport_mem_deregister(m));
    CHECK_OK(gpuport_mem_free(comm, win));
    CHECK_OK(gpuport_comm_destroy(comm));
}

/* Every rank's word put to every other rank over create_all's channels. */
static void all_used(gpuport_comm_t comm, gpuport_mem_t m, uint64_t *win, gpuport_channel_t *all)
{
    memset(win, 0, 8 * (size_t)size);
    win[size] = 1000 + (uint64_t)rank;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int p = 0; p < size; p++)
        if (p != rank)
            CHECK_OK(gpuport_channel_put_with_signal(all[p], 8 * (uint64_t)rank,
                                                     8 * (uint64_t)size, 8));
    for (int p = 0; p < size; p++)
        if (p != rank) {
            CHECK_OK(gpuport_channel_wait(all[p]));
            CHECK_MSG(win[p] == 1000 + (uint64_t)p, "rank %d: word of rank %d is %llu", rank, p,
                      (unsigned long long)win[p]);
            CHECK_OK(gpuport_channel_flush(all[p]));
        }
    MPI_Barrier(MPI_COMM_WORLD);
    for (int p = 0; p < size; p++)
        if (p != rank)
            CHECK_OK(gpuport_channel_destroy(all[p]));
    (void)comm;
    (void)m;
}

static void expect_none_kept(gpuport_channel_t *all, const char *what)
{
    for (int p = 0; p < size; p++)
        CHECK_MSG(all[p] == NULL, "rank %d: %s: the channel to %d was kept", rank, what, p);
}

/* The pair (a, b), a < b, fails: rank a makes its channels to 0 .. b-1
 * (itself included) and has ids for those only. */
static void all_fail_pair(int a, int b, const char *where)
{
    char ids[16];
    gpuport_channel_t *all = calloc((size_t)size, sizeof(*all));
    gpuport_comm_t comm;
    gpuport_status_t st;
    double t0;

    CHECK(all != NULL);
    snprintf(ids, sizeof(ids), "%d", b);
    comm = comm_with("20000", rank == a ? ids : NULL);
    for (int p = 0; p < size; p++)
        all[p] = (gpuport_channel_t)(uintptr_t)1; /* overwritten: NULL or kept */
    t0 = now_s();
    capture_begin();
    st = gpuport_channel_create_all(comm, NULL, NULL, 1, all);
    capture_end();
    CHECK_MSG(st == GPUPORT_ERR_NO_RESOURCE,
              "rank %d: the %s pair (%d, %d) failing: gpuport_channel_create_all returned %s", rank,
              where, a, b, gpuport_status_string(st));
    CHECK_MSG(now_s() - t0 < 15, "rank %d: the %s pair failing took %.1f s", rank, where,
              now_s() - t0);
    expect_none_kept(all, where);
    CHECK_OK(gpuport_comm_destroy(comm));
    free(all);
}

static void all_fail(void)
{
    gpuport_channel_t *all = calloc((size_t)size, sizeof(*all));
    gpuport_comm_t comm;
    gpuport_mem_t m;
    uint64_t *win;

    CHECK(all != NULL);
    all_fail_pair(0, 1, "first");
    if (size == 3)
        all_fail_pair(0, 2, "middle");
    if (size >= 4)
        all_fail_pair(1, 2, "middle");
    if (size >= 3)
        all_fail_pair(size - 2, size - 1, "last");
    comm = comm_with("20000", NULL);
    CHECK_OK(gpuport_mem_alloc(comm, 8 * ((size_t)size + 1), (void **)&win));
    CHECK_OK(gpuport_mem_register(comm, win, 8 * ((size_t)size + 1), &m));
    CHECK_OK(gpuport_channel_create_all(comm, m, m, 0, all));
    all_used(comm, m, win, all);
    CHECK_OK(gpuport_mem_deregister(m));
    CHECK_OK(gpuport_mem_free(comm, win));
    CHECK_OK(gpuport_comm_destroy(comm));
    free(all);
}

static void all_args(void)
{
    const int bad[3] = {0, size / 2, size - 1};
    gpuport_channel_t *all = calloc((size_t)size, sizeof(*all));
    gpuport_comm_t comm = comm_with("60000", NULL);
    gpuport_mem_t m, dead;
    uint64_t *win;

    CHECK(all != NULL);
    CHECK_OK(gpuport_mem_alloc(comm, 8 * ((size_t)size + 1), (void **)&win));
    CHECK_OK(gpuport_mem_register(comm, win, 8 * ((size_t)size + 1), &m));
    CHECK_OK(gpuport_mem_register(comm, win, 8, &dead));
    CHECK_OK(gpuport_mem_deregister(dead));
    for (int i = 0; i < 3; i++) {
        for (int how = 0; how < 2; how++) {
            int me = rank == bad[i];
            double t0 = now_s();
            gpuport_status_t st;
            const char *log;

            capture_begin();
            st = gpuport_channel_create_all(comm, me && how ? dead : m, m, me && !how ? 2 : 0,
                                            all);
            log = capture_end();
            CHECK_MSG(st == GPUPORT_ERR_INVALID_ARG,
                      "rank %d: rank %d's %s refused: gpuport_channel_create_all returned %s",
                      rank, bad[i], how ? "src" : "with_self", gpuport_status_string(st));
            CHECK_MSG(now_s() - t0 < 15, "rank %d: rank %d's refusal took %.1f s", rank, bad[i],
                      now_s() - t0);
            CHECK_MSG(!me || strstr(log, how ? "src" : "with_self is 2"),
                      "rank %d: the refusal is not named: %s", rank, log);
            expect_none_kept(all, "arguments refused");
        }
    }
    CHECK_OK(gpuport_channel_create_all(comm, m, m, 0, all));
    all_used(comm, m, win, all);
    CHECK_OK(gpuport_mem_deregister(m));
    CHECK_OK(gpuport_mem_free(comm, win));
    CHECK_OK(gpuport_comm_destroy(comm));
    free(all);
}

static void all_absent(void)
{
    gpuport_channel_t *all = calloc((size_t)size, sizeof(*all));
    gpuport_comm_t comm = comm_with("2000", NULL);

    CHECK(all != NULL);
    if (rank < size - 1)
        EXPECT_TIMEOUT(gpuport_channel_create_all(comm, NULL, NULL, 0, all), size - 1,
                       "to create its side of this channel");
    expect_none_kept(all, "a rank absent");
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK_OK(gpuport_comm_destroy(comm));
    free(all);
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        void (*fn)(void);
    } scenarios[] = {{"stray", stray},
                     {"all-fail", all_fail},
                     {"all-args", all_args},
                     {"all-absent", all_absent}};

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(setenv("GPUPORT_LOG_LEVEL", "warn", 1) == 0);
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
