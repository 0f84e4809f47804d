/*
 * A communicator's creation that a rank does not come to ends at
 * GPUPORT_TIMEOUT_MS. Run at 2 and 3 ranks (comm_timeout_np2.sh, _np3.sh),
 * every rank under GPUPORT_TIMEOUT_MS=2000; the last rank, L, is the one
 * that does not come. Each scenario is one argument ("late", "stall",
 * "layout2", "absent"; none: all of them, "absent" last, since it ends the
 * job).
 *
 * late: L sleeps 5 s, then calls gpuport_comm_init_mpi. The others return
 * GPUPORT_ERR_TIMEOUT after the limit (at least 1.5 s, less than 12 s from
 * the call: a loaded machine may be slow, the library must not be early)
 * with one error line naming the step (the duplicate of the communicator,
 * MPI_Comm_idup), then wait in MPI_Barrier. L's call completes the
 * duplicate they abandoned and times out in the next step (the node
 * split), naming rank 0. Then every rank creates a communicator over the
 * same MPI communicator, which serves again.
 *
 * stall: every rank fills a bootstrap; L sleeps 5 s before
 * gpuport_comm_create. The others time out in its first exchange, rank 0
 * naming L; L completes that exchange and times out in the second.
 *
 * layout2: gpuport_bootstrap_mpi_v with the layout before
 * allgather_timed writes nothing past it, and gpuport_comm_create_v
 * accepts it (that creation has no limit: every rank comes here).
 *
 * absent: L never calls; the others time out as in late, tell L so by a
 * message of the test's own, and all of them finalize: the job ends.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "capture.h"
#include "check.h"
#include "gpuport/gpuport_mpi.h"

#define LATE_S 5
#define TAG_DONE 7

static int rank, size, last;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The call returns the limit's status within the bound, with one error
 * line holding each of the needles (NULL ends them). */
static void expect_timeout(gpuport_status_t st, double t0, const char *log, const char *call,
                           const char *needle1, const char *needle2)
{
    double dt = now_s() - t0;

    CHECK_MSG(st == GPUPORT_ERR_TIMEOUT, "rank %d: %s returned %s", rank, call,
              gpuport_status_string(st));
    CHECK_MSG(dt >= 1.5 && dt < 12, "rank %d: %s returned after %.2f s", rank, call, dt);
    CHECK_MSG(count_of(log, "ERROR") == 1 && strstr(log, "GPUPORT_TIMEOUT_MS=2000") &&
                  strstr(log, needle1) && (!needle2 || strstr(log, needle2)),
              "rank %d: %s: the log lacks \"%s\" and \"%s\" in one error: %s", rank, call,
              needle1, needle2 ? needle2 : "", log);
}

static void late(void)
{
    gpuport_comm_t comm = (gpuport_comm_t)(uintptr_t)1;
    gpuport_status_t st;
    const char *log;
    double t0;

    if (rank == last)
        sleep(LATE_S);
    t0 = now_s();
    capture_begin();
    st = gpuport_comm_init_mpi(MPI_COMM_WORLD, &comm);
    log = capture_end();
    if (rank != last)
        expect_timeout(st, t0, log, "gpuport_comm_init_mpi",
                       "not every rank of the MPI communicator called", "(MPI_Comm_idup)");
    else
        expect_timeout(st, t0, log, "the late gpuport_comm_init_mpi",
                       "rank 0 did not reach the node split", NULL);
    CHECK_MSG(comm == NULL, "rank %d: comm_p is %p after the timeout", rank, (void *)comm);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK_OK(gpuport_comm_init_mpi(MPI_COMM_WORLD, &comm));
    CHECK_OK(gpuport_comm_destroy(comm));
}

static void stall(void)
{
    gpuport_bootstrap_t bs;
    gpuport_comm_t comm;
    gpuport_status_t st;
    const char *log;
    char who[64];
    double t0;

    CHECK_OK(gpuport_bootstrap_mpi(MPI_COMM_WORLD, &bs));
    if (rank == last)
        sleep(LATE_S);
    snprintf(who, sizeof(who), "rank %d did not reach", last);
    t0 = now_s();
    capture_begin();
    st = gpuport_comm_create(&bs, &comm);
    log = capture_end();
    if (rank == last)
        expect_timeout(st, t0, log, "the late gpuport_comm_create", "rank 0 did not reach",
                       "the second exchange of gpuport_comm_create");
    else
        expect_timeout(st, t0, log, "gpuport_comm_create", rank == 0 ? who : "not every rank",
                       "the first exchange of gpuport_comm_create");
    MPI_Barrier(MPI_COMM_WORLD);
}

/* gpuport_bootstrap_t as a program built against layout version 2 has it */
typedef struct v2_bootstrap {
    unsigned char bytes[offsetof(gpuport_bootstrap_t, allgather_timed)];
} v2_bootstrap_t;

static void layout2(void)
{
    struct {
        v2_bootstrap_t bs;
        unsigned char after[64];
    } v2;
    gpuport_comm_t comm;

    memset(&v2, 0xa5, sizeof(v2));
    CHECK_OK(gpuport_bootstrap_mpi_v(GPUPORT_LAYOUT(2, v2_bootstrap_t), MPI_COMM_WORLD,
                                     (gpuport_bootstrap_t *)&v2.bs));
    for (size_t i = 0; i < sizeof(v2.after); i++)
        CHECK_MSG(v2.after[i] == 0xa5, "rank %d: byte %zu after a layout-2 bootstrap written",
                  rank, i);
    CHECK_OK(gpuport_comm_create_v(GPUPORT_LAYOUT(2, v2_bootstrap_t),
                                   (const gpuport_bootstrap_t *)&v2.bs, &comm));
    CHECK_OK(gpuport_comm_destroy(comm));
    MPI_Barrier(MPI_COMM_WORLD);
}

/* No collective on MPI_COMM_WORLD after this: the abandoned duplicate
 * would match it. */
static void absent(void)
{
    gpuport_comm_t comm;
    gpuport_status_t st;
    const char *log;
    double t0;

    if (rank == last) {
        for (int r = 0; r < size - 1; r++)
            MPI_Recv(NULL, 0, MPI_BYTE, MPI_ANY_SOURCE, TAG_DONE, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        return;
    }
    t0 = now_s();
    capture_begin();
    st = gpuport_comm_init_mpi(MPI_COMM_WORLD, &comm);
    log = capture_end();
    expect_timeout(st, t0, log, "gpuport_comm_init_mpi",
                   "not every rank of the MPI communicator called", "(MPI_Comm_idup)");
    MPI_Send(NULL, 0, MPI_BYTE, last, TAG_DONE, MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        void (*fn)(void);
    } scenarios[] = {{"late", late}, {"stall", stall}, {"layout2", layout2}, {"absent", absent}};

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    last = size - 1;
    CHECK(setenv("GPUPORT_LOG_LEVEL", "warn", 1) == 0);
    CHECK(setenv("GPUPORT_TIMEOUT_MS", "2000", 1) == 0);
    for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++) {
        int run = argc < 2;
        for (int a = 1; a < argc; a++)
            run |= strcmp(argv[a], scenarios[i].name) == 0;
        if (!run)
            continue;
        scenarios[i].fn();
        if (rank == 0)
            printf("PASS: %s at %d ranks\n", scenarios[i].name, size);
        fflush(stdout);
    }
    MPI_Finalize();
    return 0;
}
