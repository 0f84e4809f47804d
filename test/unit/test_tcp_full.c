/*
 * tcp's sending with a full socket (tcp_send_some, tcp_tx.c): a peer that
 * reads nothing (a stopped process) holds no thread. The proxy's one loop
 * serves every connection, so a send that waited for room, or looped on a
 * socket that takes nothing, would hold every other channel of the
 * communicator behind one stopped peer. A loopback connection whose far end
 * is not read, 16 PUTs of 4 MiB queued on it (the head-of-line scenario of
 * test_mpi_hol's big load). Checked:
 *  - the first call sends what the socket takes and returns, within a
 *    generous bound (a copy of a few MiB into the socket);
 *  - with the socket full, calls return at once without progress (each
 *    within 100 ms on a loaded machine; a send that blocks fails the test
 *    after 120 s) and the queue is left as it was;
 *  - a second connection, served between those calls as the proxy's next
 *    connection would be, carries an 8-byte PUT to its reader meanwhile;
 *  - once the far end reads, everything arrives: 16 headers and payloads
 *    in order, byte for byte.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "transport/tcp/tcp_priv.h"

#define BIG (4u << 20)
#define NBIG 16
#define CAP 64

/* a send that blocks never returns: this says so instead of hanging */
static void blocked(int sig)
{
    static const char msg[] = "test_tcp_full: FAIL: a send did not return in 120 s (it blocks "
                              "on the full socket)\n";

    (void)sig;
    if (write(2, msg, sizeof(msg) - 1) < 0)
        _exit(1);
    _exit(1);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* a connected loopback pair: *tx sends, *rx receives */
static void tcp_pair(int *tx, int *rx)
{
    struct sockaddr_in a;
    socklen_t len = sizeof(a);
    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;

    CHECK(l >= 0);
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(bind(l, (struct sockaddr *)&a, sizeof(a)) == 0);
    CHECK(listen(l, 1) == 0);
    CHECK(getsockname(l, (struct sockaddr *)&a, &len) == 0);
    *tx = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(*tx >= 0);
    CHECK(connect(*tx, (struct sockaddr *)&a, sizeof(a)) == 0);
    *rx = accept(l, NULL, NULL);
    CHECK(*rx >= 0);
    setsockopt(*tx, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    close(l);
}

static void conn_init(tcp_conn_t *tc, int fd)
{
    memset(tc, 0, sizeof(*tc));
    tc->fd_tx = tc->fd_rx = fd;
    tc->tx_cap = CAP;
    tc->tx = calloc(CAP, sizeof(*tc->tx));
    CHECK(tc->tx);
}

static void queue_put(tcp_conn_t *tc, uint64_t dst_off, uint64_t size, const void *payload)
{
    CHECK(tcp_tx_room(tc, 1));
    tcp_tx_push(tc, MSG_PUT, 7, dst_off, size, payload);
}

/* exactly n bytes from fd (blocking) */
static void read_all(int fd, void *buf, size_t n)
{
    for (size_t got = 0; got < n;) {
        ssize_t r = recv(fd, (char *)buf + got, n - got, 0);
        CHECK_MSG(r > 0, "recv: %zd after %zu of %zu bytes", r, got, n);
        got += (size_t)r;
    }
}

int main(void)
{
    uint64_t *src = malloc(BIG + 8 * NBIG), word;
    char *got = malloc(BIG);
    tcp_conn_t a, b;
    int a_tx, a_rx, b_tx, b_rx;
    double t, slowest = 0;
    uint32_t head;
    uint64_t sent;
    tcp_msg_t m;

    CHECK(src && got);
    signal(SIGALRM, blocked);
    alarm(120);
    for (uint64_t k = 0; k < BIG / 8 + NBIG; k++)
        src[k] = k;
    tcp_pair(&a_tx, &a_rx);
    tcp_pair(&b_tx, &b_rx);
    conn_init(&a, a_tx);
    conn_init(&b, b_tx);
    for (int i = 0; i < NBIG; i++)
        queue_put(&a, 0, BIG, src + i);

    t = now_s();
    CHECK(tcp_send_some(&a) == 1);
    t = now_s() - t;
    CHECK_MSG(t < 10.0, "the first send took %.3f s", t);
    CHECK(a.tx_head < NBIG); /* 64 MiB do not fit in loopback's buffers */

    /* full: each call returns without progress, the queue as it was; the
     * other connection is served between them */
    for (int pass = 0; pass < 1000 && tcp_send_some(&a); pass++)
        ; /* what the socket still took, piece by piece */
    head = a.tx_head;
    sent = a.tx[head % CAP].sent;
    for (int pass = 0; pass < 200; pass++) {
        t = now_s();
        CHECK(tcp_send_some(&a) == 0);
        t = now_s() - t;
        slowest = t > slowest ? t : slowest;
        CHECK(a.tx_head == head && a.tx[head % CAP].sent == sent && a.tx_tail == NBIG);
        if (pass == 100) {
            queue_put(&b, 8, 8, src + 1);
            CHECK(tcp_send_some(&b) == 1 && b.tx_head == b.tx_tail);
            read_all(b_rx, &m, sizeof(m));
            read_all(b_rx, &word, 8);
            CHECK(m.type == MSG_PUT && m.a == 8 && m.size == 8 && word == 1);
        }
    }
    CHECK_MSG(slowest < 0.1, "a send on the full socket took %.3f s", slowest);

    /* the far end reads: every PUT arrives, in order, byte for byte */
    for (int i = 0; i < NBIG; i++) {
        size_t have = 0;
        memset(got, 0, BIG);
        /* the header, sending whenever the socket has room */
        while (have < sizeof(m) + BIG) {
            struct pollfd p = {a_rx, POLLIN, 0};
            ssize_t r;
            tcp_send_some(&a);
            if (poll(&p, 1, 100) <= 0)
                continue;
            if (have < sizeof(m))
                r = recv(a_rx, (char *)&m + have, sizeof(m) - have, MSG_DONTWAIT);
            else
                r = recv(a_rx, got + (have - sizeof(m)), sizeof(m) + BIG - have, MSG_DONTWAIT);
            if (r <= 0)
                continue;
            have += (size_t)r;
        }
        CHECK_MSG(m.type == MSG_PUT && m.channel == 7 && m.a == 0 && m.size == BIG,
                  "message %d: type %u, size %llu", i, m.type, (unsigned long long)m.size);
        CHECK_MSG(memcmp(got, src + i, BIG) == 0, "message %d's payload differs", i);
    }
    CHECK(a.tx_head == a.tx_tail);
    printf("PASS tcp send with a full socket: %d PUTs of %u MiB queued, sends on the full socket "
           "returned in %.3f ms at most, the other connection carried its PUT meanwhile, all "
           "delivered in order\n",
           NBIG, BIG >> 20, slowest * 1e3);
    close(a_tx);
    close(a_rx);
    close(b_tx);
    close(b_rx);
    free(a.tx);
    free(b.tx);
    free(src);
    free(got);
    return 0;
}
