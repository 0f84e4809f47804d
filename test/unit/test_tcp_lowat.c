/*
 * tcp's low-water mark (GPUPORT_SOCKET_RCVLOWAT): while a large payload
 * arrives the receiving proxy has its socket reported only once half of the
 * payload's rest is there, and before it waits for a header the mark is 1
 * again. Checked:
 *  - the rule (tcp_rx_lowat): half of the rest, at most the setting, and 1
 *    below 16 KiB or with the setting below 16 KiB;
 *  - two ranks as threads, one tcp channel, the proxies asleep at once when
 *    idle (100 ms): each round a 4 MiB put with a signal, every byte
 *    compared; then, with rank 0's proxy asleep, its socket's SO_RCVLOWAT
 *    is 1 and a 64-byte put with a signal wakes it (bytes compared; the
 *    time is printed, not bounded). A mark left at the payload's would
 *    hide that put from epoll: the wait would run into its timeout;
 *  - with the setting's default the mark was raised during the large puts
 *    (the receiver's count of raises); with GPUPORT_SOCKET_RCVLOWAT=0 it
 *    never is, and the same rounds pass.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "internal.h"
#include "local_bootstrap.h"
#include "transport/tcp/tcp_priv.h"
#include "util.h"
#include "waker.h"

#define BIG (4u << 20)
#define SMALL 64
#define REGION (BIG + SMALL)
#define CAP_US 100000
#define ROUNDS 5

static _Atomic uint64_t put_at_ns;
static uint64_t raised_total; /* rank 0's, after the rounds */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static unsigned char pattern(int round, uint64_t i)
{
    return (unsigned char)((i * 131 + (uint64_t)round * 7 + (i >> 12)) & 0xff);
}

static void until_asleep(gpuport_comm_t comm)
{
    for (int i = 0; i < 20000 && !atomic_load(&comm->proxy.waker.sleeping); i++)
        usleep(100);
    CHECK_MSG(atomic_load(&comm->proxy.waker.sleeping), "the proxy never went to sleep");
    usleep(2000);
}

/* rank 0's one tcp connection */
static tcp_conn_t *the_conn(gpuport_comm_t comm)
{
    struct gpuport_tcp_comm *t = comm->tls[GPUPORT_TL_KIND_TCP].priv;

    CHECK(t && atomic_load(&t->nconns) == 1);
    return t->conns[0];
}

static int run(int rank, int size, gpuport_bootstrap_t *bs, void *arg)
{
    gpuport_comm_t comm;
    gpuport_mem_t msrc, mdst;
    gpuport_channel_t ch;
    unsigned char *src, *dst;
    double wake_ms[ROUNDS];

    (void)size, (void)arg;
    CHECK_OK(gpuport_comm_create(bs, &comm));
    CHECK_OK(gpuport_mem_alloc(comm, REGION, (void **)&src));
    CHECK_OK(gpuport_mem_alloc(comm, REGION, (void **)&dst));
    memset(dst, 0, REGION);
    CHECK_OK(gpuport_mem_register(comm, src, REGION, &msrc));
    CHECK_OK(gpuport_mem_register(comm, dst, REGION, &mdst));
    CHECK_OK(gpuport_channel_create(comm, 1 - rank, msrc, mdst, &ch));
    CHECK_MSG(strcmp(gpuport_channel_transport(ch), "tcp") == 0, "the channel is %s, not tcp",
              gpuport_channel_transport(ch));

    for (int r = 1; r <= ROUNDS; r++) {
        /* a large put: every byte arrives */
        if (rank == 1) {
            for (uint64_t i = 0; i < BIG; i++)
                src[i] = pattern(r, i);
            CHECK_OK(gpuport_channel_put_with_signal(ch, 0, 0, BIG));
            CHECK_OK(gpuport_channel_flush(ch));
        } else {
            CHECK_OK(gpuport_channel_wait(ch));
            for (uint64_t i = 0; i < BIG; i++)
                CHECK_MSG(dst[i] == pattern(r, i), "round %d: byte %llu is %u, expected %u", r,
                          (unsigned long long)i, dst[i], pattern(r, i));
        }
        CHECK_OK(bs->barrier(bs->ctx));
        /* asleep, waiting for a header: the mark is 1, a small put wakes it */
        if (rank == 0) {
            int lowat = -1;
            socklen_t len = sizeof(lowat);
            until_asleep(comm);
            CHECK(getsockopt(the_conn(comm)->fd_rx, SOL_SOCKET, SO_RCVLOWAT, &lowat, &len) == 0);
            CHECK_MSG(lowat == 1, "round %d: the sleeping proxy's socket has SO_RCVLOWAT %d", r,
                      lowat);
        }
        CHECK_OK(bs->barrier(bs->ctx));
        if (rank == 1) {
            memset(src + BIG, 200 + r, SMALL);
            atomic_store(&put_at_ns, gpuport_now_ns());
            CHECK_OK(gpuport_channel_put_with_signal(ch, BIG, BIG, SMALL));
            CHECK_OK(gpuport_channel_flush(ch));
        } else {
            CHECK_OK(gpuport_channel_wait(ch));
            wake_ms[r - 1] = (double)(gpuport_now_ns() - atomic_load(&put_at_ns)) / 1e6;
            for (int i = 0; i < SMALL; i++)
                CHECK_MSG(dst[BIG + i] == 200 + r, "round %d: small put byte %d is %u", r, i,
                          dst[BIG + i]);
            printf("round %d: 4 MiB in order; then the sleeping proxy woke for 64 B in %.3f ms\n",
                   r, wake_ms[r - 1]);
        }
        CHECK_OK(bs->barrier(bs->ctx));
    }
    if (rank == 0) {
        /* no bound on the time: a mark left high hides the put for good,
         * so the wait above would have failed with its timeout; how fast a
         * sleeping proxy wakes is test_tcp_many's (CI's ASan build took
         * 26-126 ms here under load) */
        qsort(wake_ms, ROUNDS, sizeof(wake_ms[0]), cmp_double);
        printf("median wake-up %.3f ms\n", wake_ms[ROUNDS / 2]);
        raised_total = __atomic_load_n(&the_conn(comm)->lowat_raised, __ATOMIC_RELAXED);
    }
    CHECK_OK(bs->barrier(bs->ctx));
    CHECK_OK(gpuport_channel_destroy(ch));
    CHECK_OK(gpuport_mem_deregister(msrc));
    CHECK_OK(gpuport_mem_deregister(mdst));
    CHECK_OK(gpuport_mem_free(comm, src));
    CHECK_OK(gpuport_mem_free(comm, dst));
    CHECK_OK(gpuport_comm_destroy(comm));
    return 0;
}

static void rule(void)
{
    CHECK(tcp_rx_lowat(0, 512 << 10) == 1);              /* a header next */
    CHECK(tcp_rx_lowat(1 << 20, 512 << 10) == 512 << 10); /* half of 1 MiB */
    CHECK(tcp_rx_lowat(600 << 10, 512 << 10) == 300 << 10);
    CHECK(tcp_rx_lowat(8u << 20, 512 << 10) == 512 << 10); /* the cap */
    CHECK(tcp_rx_lowat(8u << 20, 4u << 20) == 4 << 20);
    CHECK(tcp_rx_lowat(32 << 10, 512 << 10) == 16 << 10);
    CHECK(tcp_rx_lowat((32 << 10) - 2, 512 << 10) == 1); /* half below 16 KiB */
    CHECK(tcp_rx_lowat(4u << 20, 0) == 1);               /* off */
    CHECK(tcp_rx_lowat(4u << 20, 8 << 10) == 1);         /* below 16 KiB: off */
    printf("rule: ok\n");
}

int main(void)
{
    char cap[32];

    rule();
    snprintf(cap, sizeof(cap), "%d", CAP_US);
    setenv("GPUPORT_TRANSPORT", "tcp", 1);
    setenv("GPUPORT_GPU", "off", 1);
    setenv("GPUPORT_PROXY_IDLE_CPU", "0", 1);
    setenv("GPUPORT_PROXY_IDLE_US", "0", 1);
    setenv("GPUPORT_PROXY_SLEEP_HOST_MAX_US", cap, 1);
    setenv("GPUPORT_PROXY_SLEEP_SCALE", "0", 1);
    unsetenv("GPUPORT_SOCKET_RCVLOWAT");
    CHECK(local_run(2, run, NULL) == 0);
    printf("GPUPORT_SOCKET_RCVLOWAT at its default: the mark was raised %llu times\n",
           (unsigned long long)raised_total);
    CHECK_MSG(raised_total > 0, "the receiver never raised its mark in %d puts of 4 MiB",
              ROUNDS);
    setenv("GPUPORT_SOCKET_RCVLOWAT", "0", 1);
    CHECK(local_run(2, run, NULL) == 0);
    CHECK_MSG(raised_total == 0, "GPUPORT_SOCKET_RCVLOWAT=0, yet the mark was raised %llu times",
              (unsigned long long)raised_total);
    printf("GPUPORT_SOCKET_RCVLOWAT=0: never raised, same rounds passed\nlow-water mark: ok\n");
    return 0;
}
