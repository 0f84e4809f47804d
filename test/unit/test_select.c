/*
 * Which transport carries a channel (src/comm/select.c). On a communicator whose
 * transports are stubs with scripted answers: a forced transport is the
 * only one asked, and one that cannot reach the peer, or is not built,
 * fails with the reason; auto asks the transports that rank themselves for
 * the channel's kind of memory, best first (ties in list order), takes the
 * first reachable one, and with none names every one's reason. Then on
 * real communicators of two ranks (with the loop test transport, whose
 * auto rank is a setting): the highest-ranked reachable transport wins, and
 * both ranks choose the same.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "check.h"
#include "internal.h"
#include "local_bootstrap.h"
#include "testenv.h"
#include "tl_loop/loop.h"

#define NSTUB 8

/* by kind: what auto_rank answers for host (0) and GPU (1) memory, whether
 * reachable says yes; the kinds reachable was asked, in order */
static int stub_rank[NSTUB][2];
static int stub_reach[NSTUB];
static int asked[NSTUB * 2], nasked;
static gpuport_transport_ops_t stub_ops[NSTUB];

static int stub_reachable(gpuport_tl_comm_t *tc, int peer, char *why, size_t len)
{
    (void)peer;
    asked[nasked++] = tc->kind;
    if (!stub_reach[tc->kind])
        snprintf(why, len, "stub %d says no", tc->kind);
    return stub_reach[tc->kind];
}

#define STUB_RANK(k)                                                                            \
    static int stub_rank_##k(int device_regions)                                                \
    {                                                                                           \
        return stub_rank[k][device_regions != 0];                                               \
    }
STUB_RANK(1)
STUB_RANK(2)
STUB_RANK(3)
STUB_RANK(4)
STUB_RANK(5)
static int (*const stub_rank_fn[])(int) = {NULL, stub_rank_1, stub_rank_2, stub_rank_3,
                                           stub_rank_4, stub_rank_5};

/* A communicator with only what select.c reads: its rank, GPUPORT_TRANSPORT
 * and its transports, every kind a stub named as the registry names it. */
static struct gpuport_comm *stub_comm(int transport)
{
    static struct gpuport_comm comm;

    memset(&comm, 0, sizeof(comm));
    comm.rank = 0;
    comm.config.transport = transport;
    for (int k = 1; k < gpuport_transport_nkinds(); k++) {
        CHECK(k < (int)(sizeof(stub_rank_fn) / sizeof(stub_rank_fn[0])));
        stub_ops[k].name = gpuport_transport_name(k);
        stub_ops[k].reachable = stub_reachable;
        stub_ops[k].auto_rank = stub_rank_fn[k];
        comm.tls[k].comm = &comm;
        comm.tls[k].kind = k;
        comm.tls[k].ops = &stub_ops[k];
        stub_rank[k][0] = stub_rank[k][1] = 0;
        stub_reach[k] = 1;
    }
    nasked = 0;
    return &comm;
}

/* select for peer 1; the chosen kind, or -status on an error (why filled) */
static int choose(struct gpuport_comm *comm, int device_regions, char *why, size_t len,
                  const char **log_p)
{
    gpuport_tl_comm_t *tc = NULL;
    gpuport_status_t st;

    why[0] = '\0';
    capture_begin();
    st = gpuport_transport_select(comm, 1, device_regions, &tc, why, len);
    *log_p = capture_end();
    if (st != GPUPORT_OK)
        return -(int)st;
    CHECK(tc && tc->comm == comm);
    CHECK_MSG((*log_p)[0] == '\0', "a choice logged: %s", *log_p);
    return tc->kind;
}

static void test_forced(void)
{
    struct gpuport_comm *comm = stub_comm(GPUPORT_TL_KIND_TCP);
    char why[512];
    const char *log;

    /* the forced one only, whatever the others rank */
    stub_rank[GPUPORT_TL_KIND_SHM][0] = 99;
    CHECK(choose(comm, 0, why, sizeof(why), &log) == GPUPORT_TL_KIND_TCP);
    CHECK(nasked == 1 && asked[0] == GPUPORT_TL_KIND_TCP);
    /* forced and unreachable: the error names it and its reason */
    comm = stub_comm(GPUPORT_TL_KIND_TCP);
    stub_reach[GPUPORT_TL_KIND_TCP] = 0;
    CHECK(choose(comm, 0, why, sizeof(why), &log) == -(int)GPUPORT_ERR_NOT_SUPPORTED);
    CHECK(nasked == 1);
    CHECK_MSG(strcmp(why, "tcp: stub 4 says no") == 0, "why: %s", why);
    CHECK_MSG(count_of(log, "ERROR") == 1 &&
                  strstr(log, "cannot connect rank 0 to rank 1 with GPUPORT_TRANSPORT=tcp: tcp: "
                              "stub 4 says no"),
              "log: %s", log);
    /* forced and not built: the build's reason and what is built */
    for (int k = 1; k < gpuport_transport_nkinds(); k++) {
        char want[256];
        if (!gpuport_transport_missing(k))
            continue;
        comm = stub_comm(k);
        comm->tls[k].ops = NULL;
        CHECK(choose(comm, 0, why, sizeof(why), &log) == -(int)GPUPORT_ERR_NOT_SUPPORTED);
        snprintf(want, sizeof(want), "GPUPORT_TRANSPORT=%s is not available in this build of "
                 "gpuport: %s (built: ", gpuport_transport_name(k), gpuport_transport_missing(k));
        CHECK_MSG(strncmp(why, want, strlen(want)) == 0 && nasked == 0, "why: %s", why);
        CHECK(count_of(log, "ERROR") == 1);
    }
}

static void test_auto(void)
{
    struct gpuport_comm *comm = stub_comm(GPUPORT_TRANSPORT_AUTO);
    char why[512];
    const char *log;

    /* host memory: by rank (ties in list order); rank 0 is never asked */
    stub_rank[GPUPORT_TL_KIND_SHM][0] = 20;
    stub_rank[GPUPORT_TL_KIND_TCP][0] = 10;
    stub_rank[GPUPORT_TL_KIND_IB][0] = 20;
    stub_rank[GPUPORT_TL_KIND_CUDA_IPC][1] = 30;
    CHECK(choose(comm, 0, why, sizeof(why), &log) == GPUPORT_TL_KIND_SHM);
    CHECK(nasked == 1 && asked[0] == GPUPORT_TL_KIND_SHM);
    /* the best unreachable: the next in order */
    stub_reach[GPUPORT_TL_KIND_SHM] = 0;
    nasked = 0;
    CHECK(choose(comm, 0, why, sizeof(why), &log) == GPUPORT_TL_KIND_IB);
    CHECK(nasked == 2 && asked[0] == GPUPORT_TL_KIND_SHM && asked[1] == GPUPORT_TL_KIND_IB);
    stub_reach[GPUPORT_TL_KIND_IB] = 0;
    nasked = 0;
    CHECK(choose(comm, 0, why, sizeof(why), &log) == GPUPORT_TL_KIND_TCP);
    CHECK(nasked == 3 && asked[2] == GPUPORT_TL_KIND_TCP);
    /* none reachable: every reason, in the order asked */
    stub_reach[GPUPORT_TL_KIND_TCP] = 0;
    nasked = 0;
    CHECK(choose(comm, 0, why, sizeof(why), &log) == -(int)GPUPORT_ERR_NOT_SUPPORTED);
    CHECK_MSG(strcmp(why, "shm: stub 1 says no; ib: stub 3 says no; tcp: stub 4 says no") == 0,
              "why: %s", why);
    CHECK_MSG(strstr(log, "with GPUPORT_TRANSPORT=auto: shm: stub 1 says no;"), "log: %s", log);
    /* GPU memory: its own ranking; cuda_ipc the one candidate */
    nasked = 0;
    CHECK(choose(comm, 1, why, sizeof(why), &log) == GPUPORT_TL_KIND_CUDA_IPC);
    CHECK(nasked == 1 && asked[0] == GPUPORT_TL_KIND_CUDA_IPC);
    /* no candidate at all for the kind of memory */
    stub_rank[GPUPORT_TL_KIND_CUDA_IPC][1] = 0;
    nasked = 0;
    CHECK(choose(comm, 1, why, sizeof(why), &log) == -(int)GPUPORT_ERR_NOT_SUPPORTED);
    CHECK_MSG(strncmp(why, "no transport for GPU memory is built (built: ", 45) == 0 &&
                  nasked == 0,
              "why: %s", why);
    /* a higher rank later in the list goes first */
    comm = stub_comm(GPUPORT_TRANSPORT_AUTO);
    stub_rank[GPUPORT_TL_KIND_SHM][0] = 20;
    stub_rank[GPUPORT_TL_KIND_TCP][0] = 25;
    CHECK(choose(comm, 0, why, sizeof(why), &log) == GPUPORT_TL_KIND_TCP);
}

/* ---- real transports, two ranks ---- */

typedef struct {
    int want; /* the kind both must choose */
} real_case_t;

static int real_choice(int rank, int size, gpuport_bootstrap_t *bs, void *arg)
{
    real_case_t *c = arg;
    gpuport_comm_t comm;
    gpuport_tl_comm_t *tc = NULL;
    char why[512];
    int mine, theirs;

    (void)size;
    CHECK_OK(gpuport_comm_create(bs, &comm));
    CHECK_OK(gpuport_transport_select(comm, 1 - rank, 0, &tc, why, sizeof(why)));
    mine = tc->kind;
    CHECK_OK(bs->send(bs->ctx, 1 - rank, 77, &mine, sizeof(mine)));
    CHECK_OK(bs->recv(bs->ctx, 1 - rank, 77, &theirs, sizeof(theirs)));
    CHECK_MSG(mine == theirs, "rank %d chose %s, its peer %s", rank, gpuport_transport_name(mine),
              gpuport_transport_name(theirs));
    CHECK_MSG(mine == c->want, "rank %d chose %s, expected %s", rank,
              gpuport_transport_name(mine), gpuport_transport_name(c->want));
    CHECK_OK(gpuport_comm_destroy(comm));
    return 0;
}

static void run_real(const char *transport, const char *loop_rank, int want)
{
    real_case_t c = {want};

    setenv("GPUPORT_TRANSPORT", transport, 1);
    setenv("GPUPORT_LOOP_AUTO_RANK", loop_rank, 1);
    CHECK_MSG(local_run(2, real_choice, &c) == 0, "GPUPORT_TRANSPORT=%s, loop ranked %s",
              transport, loop_rank);
    unsetenv("GPUPORT_TRANSPORT");
    unsetenv("GPUPORT_LOOP_AUTO_RANK");
}

int main(void)
{
    testenv_clear_gpuport();
    CHECK(loop_kind > 0);
    test_forced();
    test_auto();
    /* auto over host memory: shm (20) beats tcp (10) and a loop ranked 15;
     * a loop ranked 50 beats shm; forced, the one named */
    run_real("auto", "15", GPUPORT_TL_KIND_SHM);
    run_real("auto", "50", loop_kind);
    run_real("auto", "0", GPUPORT_TL_KIND_SHM);
    run_real("tcp", "50", GPUPORT_TL_KIND_TCP);
    run_real("loop", "0", loop_kind);
    printf("select: all checks passed\n");
    return 0;
}
