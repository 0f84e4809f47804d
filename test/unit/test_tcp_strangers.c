/*
 * Strangers at the tcp listener must not delay a channel. Two processes
 * (fork, socketpair bootstrap) with two host identities, so their channel
 * is tcp; rank 1 accepts the connection. Before its first channel, rank 1
 * opens connections of its own to its listener, as anyone who can reach
 * the port could: idle ones that send nothing, ones that send half a
 * greeting, ones that send a wrong greeting, slow ones that send a byte
 * every 300 ms, and, while the channel is being created, a thread opens
 * more idle ones than the listener keeps at once. The channel's creation
 * must take about as long as without them (measured first, in the same
 * run; the bound is loose, since a loaded machine varies, but far below
 * the 5 s per idle stranger an acceptor that reads one greeting at a time
 * would take), the channel must carry bytes, and the strangers must be
 * logged in a line or two, not one each.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "capture.h"
#include "check.h"
#include "internal.h"
#include "pair_bootstrap.h"
#include "transport/tcp/tcp_priv.h"

#define REGION 65536
#define IDLE 8
#define HALF 4
#define WRONG 2
#define SLOW 2
#define DURING 40 /* beyond the 32 connections the listener awaits at once */
#define SLACK_MS 8000

static uint64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static struct sockaddr_storage g_addr;
static socklen_t g_addr_len;

static int dial(void)
{
    int fd = socket(g_addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

    CHECK(fd >= 0);
    CHECK_MSG(connect(fd, (struct sockaddr *)&g_addr, g_addr_len) == 0, "connect to own listener");
    return fd;
}

typedef struct strangers {
    int fds[IDLE + HALF + WRONG + SLOW + DURING];
    int n;
    pthread_t slow, during;
    _Atomic int stop, dialed;
} strangers_t;

/* one byte of a greeting-sized run every 300 ms, until told to stop */
static void *slow_writer(void *arg)
{
    strangers_t *s = arg;
    int first = IDLE + HALF + WRONG;

    for (int k = 0; k < 40 && !atomic_load(&s->stop); k++) {
        for (int i = 0; i < SLOW; i++)
            (void)!send(s->fds[first + i], "G", 1, MSG_NOSIGNAL);
        usleep(300 * 1000);
    }
    return NULL;
}

/* more idle connections while the channel is being created */
static void *during_dialer(void *arg)
{
    strangers_t *s = arg;
    int first = IDLE + HALF + WRONG + SLOW;

    for (int i = 0; i < DURING && !atomic_load(&s->stop); i++) {
        s->fds[first + i] = dial();
        atomic_fetch_add(&s->dialed, 1);
        usleep(5 * 1000);
    }
    return NULL;
}

static void strangers_open(strangers_t *s, gpuport_comm_t comm)
{
    struct gpuport_tcp_comm *t = comm->tls[GPUPORT_TL_KIND_TCP].priv;
    unsigned char junk[64];

    memset(s, 0, sizeof(*s));
    for (size_t i = 0; i < sizeof(s->fds) / sizeof(s->fds[0]); i++)
        s->fds[i] = -1;
    CHECK(t && t->listen_fd >= 0);
    g_addr_len = sizeof(g_addr);
    CHECK(getsockname(t->listen_fd, (struct sockaddr *)&g_addr, &g_addr_len) == 0);
    for (int i = 0; i < IDLE + HALF + WRONG + SLOW; i++)
        s->fds[i] = dial();
    memset(junk, 0x47, sizeof(junk));
    for (int i = IDLE; i < IDLE + HALF; i++)
        CHECK(send(s->fds[i], junk, sizeof(tcp_hello_t) / 2, MSG_NOSIGNAL) > 0);
    for (int i = IDLE + HALF; i < IDLE + HALF + WRONG; i++)
        CHECK(send(s->fds[i], junk, sizeof(tcp_hello_t), MSG_NOSIGNAL) > 0);
    CHECK(pthread_create(&s->slow, NULL, slow_writer, s) == 0);
    CHECK(pthread_create(&s->during, NULL, during_dialer, s) == 0);
    /* half of them before the channel (the listener then holds more than
     * it keeps at once), the rest while it is made */
    while (atomic_load(&s->dialed) < DURING / 2)
        usleep(1000);
}

static void strangers_close(strangers_t *s)
{
    atomic_store(&s->stop, 1);
    pthread_join(s->slow, NULL);
    pthread_join(s->during, NULL);
    for (size_t i = 0; i < sizeof(s->fds) / sizeof(s->fds[0]); i++)
        if (s->fds[i] >= 0)
            close(s->fds[i]);
}

/* One communicator and its first channel (the tcp connection is made
 * here); returns rank 1's creation time in ms (rank 0: 0). With
 * strangers, rank 1 opens them first, then the pair creates the channel. */
static uint64_t one_channel(gpuport_bootstrap_t *bs, int with_strangers, int *log_lines)
{
    gpuport_comm_t comm;
    gpuport_mem_t msrc, mdst;
    gpuport_channel_t ch;
    unsigned char *src, *dst;
    strangers_t s;
    uint64_t t0, ms = 0;
    const char *log;

    CHECK_OK(gpuport_comm_create(bs, &comm));
    CHECK_OK(gpuport_mem_alloc(comm, REGION, (void **)&src));
    CHECK_OK(gpuport_mem_alloc(comm, REGION, (void **)&dst));
    for (int i = 0; i < REGION; i++)
        src[i] = (unsigned char)(i * 7 + bs->rank);
    memset(dst, 0, REGION);
    CHECK_OK(gpuport_mem_register(comm, src, REGION, &msrc));
    CHECK_OK(gpuport_mem_register(comm, dst, REGION, &mdst));
    if (with_strangers && bs->rank == 1)
        strangers_open(&s, comm);
    CHECK_OK(bs->barrier(bs->ctx));
    capture_begin();
    t0 = now_ms();
    CHECK_OK(gpuport_channel_create(comm, 1 - bs->rank, msrc, mdst, &ch));
    ms = now_ms() - t0;
    CHECK_MSG(strcmp(gpuport_channel_transport(ch), "tcp") == 0, "transport %s",
              gpuport_channel_transport(ch));
    CHECK_OK(gpuport_channel_put_with_signal(ch, 0, 0, REGION));
    CHECK_OK(gpuport_channel_wait(ch));
    for (int i = 0; i < REGION; i++)
        CHECK_MSG(dst[i] == (unsigned char)(i * 7 + 1 - bs->rank), "byte %d: 0x%02x", i, dst[i]);
    CHECK_OK(gpuport_channel_flush(ch));
    CHECK_OK(bs->barrier(bs->ctx));
    CHECK_OK(gpuport_channel_destroy(ch));
    if (with_strangers && bs->rank == 1)
        strangers_close(&s);
    CHECK_OK(gpuport_comm_destroy(comm)); /* drops the strangers still greeting */
    log = capture_end();
    *log_lines = count_of(log, "not from this communicator");
    return bs->rank == 1 ? ms : 0;
}

static int run(gpuport_bootstrap_t *bs)
{
    uint64_t base, with;
    int lines = 0;

    base = one_channel(bs, 0, &lines);
    CHECK_MSG(lines == 0, "a line about strangers without any:\n%d", lines);
    with = one_channel(bs, 1, &lines);
    if (bs->rank == 1) {
        CHECK_MSG(with < base + SLACK_MS,
                  "with %d strangers at the listener the channel took %llu ms to create, "
                  "without %llu ms", IDLE + HALF + WRONG + SLOW + DURING,
                  (unsigned long long)with, (unsigned long long)base);
        CHECK_MSG(lines >= 1 && lines <= 4,
                  "%d lines about strangers (expected one or a few, not one each)", lines);
        printf("PASS strangers: channel created in %llu ms with %d strangers at the listener "
               "(%d idle, %d half greetings, %d wrong, %d slow, %d more, half of them while it was "
               "made), "
               "%llu ms without; %d log line(s) about them\n",
               (unsigned long long)with, IDLE + HALF + WRONG + SLOW + DURING, IDLE, HALF, WRONG,
               SLOW, DURING, (unsigned long long)base, lines);
    }
    return 0;
}

int main(void)
{
    gpuport_bootstrap_t bs;
    pid_t child;
    int rank;

    setvbuf(stdout, NULL, _IONBF, 0);
    setenv("GPUPORT_TIMEOUT_MS", "30000", 1);
    setenv("GPUPORT_GPU", "off", 1);
    rank = pair_fork(&bs, &child);
    CHECK(rank >= 0);
    setenv("GPUPORT_HOST_ID", rank ? "b" : "a", 1);
    /* one socketpair serves both communicators: released here, not by them */
    void (*bs_destroy)(void *) = bs.destroy;
    bs.destroy = NULL;
    if (rank == 1)
        _exit(run(&bs));
    run(&bs);
    CHECK_MSG(pair_join(child) == 0, "the child failed");
    bs_destroy(bs.ctx);
    return 0;
}
