/*
 * More tcp connections than the idle proxy's poll set has room for still
 * wake it. 66 ranks as threads of one process, every channel over tcp
 * (loopback): rank 0 holds a channel, so a connection, to each of the 65
 * others, opened in rank order, so the connection to rank 65 is the 65th.
 * The proxies sleep 100 ms at once when idle (GPUPORT_PROXY_IDLE_US=0,
 * GPUPORT_PROXY_SLEEP_SCALE=0, GPUPORT_PROXY_IDLE_CPU=0). Checked:
 *  - every channel carries bytes: each peer puts 64 bytes of its own into
 *    its slot of rank 0's one destination region, and rank 0 compares all
 *    65 slots;
 *  - wake-up: with rank 0's proxy asleep, rank 65 puts with a signal; rank
 *    0's wait returns within 20 ms (median of five rounds) with the bytes.
 *    An idle proxy that polls each socket itself, at most 64 of them plus
 *    its eventfd, never watches the 65th: the message waits out the sleep
 *    (about 98 ms each round, since the put comes 2 ms into it).
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "internal.h"
#include "local_bootstrap.h"
#include "util.h"
#include "waker.h"

#define RANKS 66
#define SLOT 64
#define REGION (SLOT * RANKS)
#define CAP_US 100000
#define ROUNDS 5

static _Atomic uint64_t put_at_ns;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* until the proxy has gone to sleep, then 2 ms into its 100 ms sleep */
static void until_asleep(gpuport_comm_t comm)
{
    for (int i = 0; i < 10000 && !atomic_load(&comm->proxy.waker.sleeping); i++)
        usleep(100);
    CHECK_MSG(atomic_load(&comm->proxy.waker.sleeping), "the proxy never went to sleep");
    usleep(2000);
}

static void check_slot(const unsigned char *dst, int peer, unsigned char v)
{
    for (int i = 0; i < SLOT; i++)
        CHECK_MSG(dst[peer * SLOT + i] == v, "rank %d's slot, byte %d: %u, expected %u", peer,
                  i, dst[peer * SLOT + i], v);
}

static int run(int rank, int size, gpuport_bootstrap_t *bs, void *arg)
{
    gpuport_comm_t comm;
    gpuport_mem_t msrc, mdst;
    gpuport_channel_t ch[RANKS] = {0};
    unsigned char *src, *dst;
    double wake_ms[ROUNDS];

    (void)arg;
    CHECK_OK(gpuport_comm_create(bs, &comm));
    CHECK(comm->config.proxy_sleep_host_max_us == CAP_US);
    CHECK_OK(gpuport_mem_alloc(comm, REGION, (void **)&src));
    CHECK_OK(gpuport_mem_alloc(comm, REGION, (void **)&dst));
    memset(dst, 0, REGION);
    CHECK_OK(gpuport_mem_register(comm, src, REGION, &msrc));
    CHECK_OK(gpuport_mem_register(comm, dst, REGION, &mdst));
    if (rank == 0) {
        for (int p = 1; p < size; p++)
            CHECK_OK(gpuport_channel_create(comm, p, msrc, mdst, &ch[p]));
        CHECK_MSG(strcmp(gpuport_channel_transport(ch[size - 1]), "tcp") == 0,
                  "the channel to rank %d is %s, not tcp", size - 1,
                  gpuport_channel_transport(ch[size - 1]));
    } else {
        CHECK_OK(gpuport_channel_create(comm, 0, msrc, mdst, &ch[0]));
    }

    /* every connection carries bytes */
    if (rank == 0) {
        for (int p = 1; p < size; p++) {
            CHECK_OK(gpuport_channel_wait(ch[p]));
            check_slot(dst, p, (unsigned char)p);
        }
    } else {
        memset(src, rank, SLOT);
        CHECK_OK(gpuport_channel_put_with_signal(ch[0], (uint64_t)rank * SLOT, 0, SLOT));
        CHECK_OK(gpuport_channel_flush(ch[0]));
    }
    CHECK_OK(bs->barrier(bs->ctx));
    if (rank == 0)
        printf("%d tcp channels carried their bytes\n", size - 1);

    /* the 65th connection wakes the sleeping proxy */
    for (int r = 1; r <= ROUNDS; r++) {
        if (rank == 0)
            until_asleep(comm);
        CHECK_OK(bs->barrier(bs->ctx));
        if (rank == size - 1) {
            memset(src, 100 + r, SLOT);
            atomic_store(&put_at_ns, gpuport_now_ns());
            CHECK_OK(gpuport_channel_put_with_signal(ch[0], (uint64_t)rank * SLOT, 0, SLOT));
            CHECK_OK(gpuport_channel_flush(ch[0]));
        } else if (rank == 0) {
            CHECK_OK(gpuport_channel_wait(ch[size - 1]));
            wake_ms[r - 1] = (double)(gpuport_now_ns() - atomic_load(&put_at_ns)) / 1e6;
            printf("round %d: rank %d's put reached rank 0 in %.3f ms (sleep %d ms)\n", r,
                   size - 1, wake_ms[r - 1], CAP_US / 1000);
            check_slot(dst, size - 1, (unsigned char)(100 + r));
        }
        CHECK_OK(bs->barrier(bs->ctx));
    }
    if (rank == 0) {
        qsort(wake_ms, ROUNDS, sizeof(wake_ms[0]), cmp_double);
        CHECK_MSG(wake_ms[ROUNDS / 2] < 20.0,
                  "median %.3f ms: the %dth connection did not wake the sleeping proxy",
                  wake_ms[ROUNDS / 2], size - 1);
        for (int p = 1; p < size - 1; p++)
            check_slot(dst, p, (unsigned char)p); /* the others untouched */
    }

    CHECK_OK(bs->barrier(bs->ctx));
    for (int p = 0; p < size; p++)
        if (ch[p])
            CHECK_OK(gpuport_channel_destroy(ch[p]));
    CHECK_OK(gpuport_mem_deregister(msrc));
    CHECK_OK(gpuport_mem_deregister(mdst));
    CHECK_OK(gpuport_mem_free(comm, src));
    CHECK_OK(gpuport_mem_free(comm, dst));
    CHECK_OK(gpuport_comm_destroy(comm));
    return 0;
}

int main(void)
{
    char cap[32];

    snprintf(cap, sizeof(cap), "%d", CAP_US);
    setenv("GPUPORT_TRANSPORT", "tcp", 1);
    setenv("GPUPORT_GPU", "off", 1);
    setenv("GPUPORT_PROXY_IDLE_CPU", "0", 1);
    setenv("GPUPORT_PROXY_IDLE_US", "0", 1);
    setenv("GPUPORT_PROXY_SLEEP_HOST_MAX_US", cap, 1);
    setenv("GPUPORT_PROXY_SLEEP_SCALE", "0", 1);
    CHECK(local_run(RANKS, run, NULL) == 0);
    printf("many connections: ok\n");
    return 0;
}
