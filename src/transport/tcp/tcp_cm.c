/*
 * tcp: connection set-up (application thread, under comm->lock). The lower
 * rank connects and greets with the listener's cookie; the higher accepts
 * (tcp_accept.c), keeping connections from other ranks for their turn.
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_TL(GPUPORT_TL_KIND_TCP)
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "transport/tcp/tcp_priv.h"

/* poll() waits of at most a second, so that a wait without deadline still
 * looks around */
static int ms_left(uint64_t deadline)
{
    return gpuport_deadline_ms(deadline, 1000);
}

/* Moves len bytes through a blocking-style loop on a nonblocking socket. */
static int io_full(int fd, void *buf, size_t len, int writing, uint64_t deadline)
{
    size_t done = 0;

    while (done < len) {
        ssize_t n = writing ? send(fd, (char *)buf + done, len - done, MSG_NOSIGNAL)
                            : recv(fd, (char *)buf + done, len - done, 0);
        if (n > 0) {
            done += (size_t)n;
            continue;
        }
        if (n == 0)
            return ECONNRESET;
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return errno;
        struct pollfd pf = {fd, writing ? POLLOUT : POLLIN, 0};
        int wait = ms_left(deadline);
        if (wait == 0)
            return ETIMEDOUT;
        poll(&pf, 1, wait);
    }
    return 0;
}

static void set_nonblock(int fd)
{
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/* Keepalive and TCP_USER_TIMEOUT bound how long a dead link goes unnoticed,
 * whether or not data is in flight. */
static void tune(int fd, const tcp_settings_t *cfg)
{
    int one = 1;
    int idle = (int)(cfg->timeout_ms / 3000) > 0 ? (int)(cfg->timeout_ms / 3000) : 1;
    int intvl = 1, cnt = (int)(cfg->timeout_ms / 1000);
    unsigned int user_timeout = (unsigned int)cfg->timeout_ms;

    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof(user_timeout));
}

static int connect_to(gpuport_tl_comm_t *tl, int peer, uint64_t deadline)
{
    const tcp_rec_t *p = gpuport_tl_blob(tl, peer);
    const char *host = gpuport_tl_proc(tl->comm, peer)->hostname;
    struct sockaddr_storage ss;
    socklen_t sl = tcp_sockaddr_of(p, &ss);
    char where[80];
    tcp_hello_t h;
    int fd = -1, err = 0;

    if (!p)
        return -1; /* logged by gpuport_tl_blob */
    tcp_addr_text(p, where, sizeof(where));
    for (;;) {
        fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) {
            err = errno;
            break;
        }
        if (connect(fd, (struct sockaddr *)&ss, sl) == 0) {
            err = 0;
        } else if (errno == EINPROGRESS) {
            struct pollfd pf = {fd, POLLOUT, 0};
            socklen_t el = sizeof(err);
            int r;
            while ((r = poll(&pf, 1, ms_left(deadline))) == 0 && ms_left(deadline) > 0)
                ;
            if (r <= 0)
                err = ETIMEDOUT;
            else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0)
                err = errno;
        } else {
            err = errno;
        }
        if (err == 0)
            break;
        close(fd);
        fd = -1;
        /* a listener's backlog can overflow while many ranks connect */
        if ((err != ECONNREFUSED && err != EAGAIN) || ms_left(deadline) == 0)
            break;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (fd < 0) {
        log_error("cannot connect to rank %d (%s at %s): %s", peer, host, where,
                  strerror(err));
        return -1;
    }
    memset(&h, 0, sizeof(h));
    h.magic = TCP_HELLO_MAGIC;
    h.version_major = GPUPORT_VERSION_MAJOR;
    h.version_minor = GPUPORT_VERSION_MINOR;
    h.version_patch = GPUPORT_VERSION_PATCH;
    h.layout = GPUPORT_RECORD_LAYOUT;
    h.from_rank = gpuport_tl_rank(tl->comm);
    h.to_rank = peer;
    h.cookie = p->tcp_cookie;
    err = io_full(fd, &h, sizeof(h), 1, deadline);
    if (err) {
        log_error("connected to rank %d at %s, but sending the greeting failed: %s", peer,
                  where, strerror(err));
        close(fd);
        return -1;
    }
    return fd;
}

static void conn_free(tcp_conn_t *tc)
{
    for (uint32_t i = tc->tx_head; tc->tx && i != tc->tx_tail; i++) {
        free(tc->tx[i % tc->tx_cap].copy);
        free(tc->tx[i % tc->tx_cap].snap);
    }
    gpuport_tl_stage_free(tc->comm, tc->txs, TXS_BYTES);
    gpuport_tl_stage_free(tc->comm, tc->rxs, (size_t)NSLOT * CHUNK);
    if (tc->fd_tx >= 0)
        close(tc->fd_tx);
    if (tc->fd_rx >= 0 && tc->fd_rx != tc->fd_tx)
        close(tc->fd_rx);
    free(tc->tx);
    free(tc->inflight);
    free(tc->get_want);
    free(tc->rxbuf);
    free(tc->acc_buf);
    free((void *)tc->rx_ok);
    free(tc);
}

gpuport_status_t tcp_conn_open(gpuport_conn_t *conn)
{
    gpuport_comm_t comm = conn->comm;
    const tcp_settings_t *cfg = gpuport_tl_settings(comm, GPUPORT_TL_KIND_TCP);
    struct gpuport_tcp_comm *t = conn->tl->priv;
    uint64_t deadline = gpuport_deadline(gpuport_tl_timeout_ns(comm));
    tcp_conn_t *tc = calloc(1, sizeof(*tc));
    int peer = conn->peer, rank = gpuport_tl_rank(comm);

    if (!tc)
        return GPUPORT_ERR_NO_MEMORY;
    tc->comm = comm;
    tc->t = t;
    tc->peer = peer;
    tc->fd_tx = tc->fd_rx = -1;
    /* Powers of two, so that ring positions stay consistent when the 32-bit
     * counters wrap; operations leave CONTROL_SPARE entries of the window
     * to ACK, FAIL, BYE. */
    tc->q = (uint32_t)cfg->queue;
    tc->ack_delay_ns = cfg->ack_delay_us * 1000;
    tc->lowat_max = cfg->rcvlowat;
    tc->inline_max = cfg->inline_max;
    tc->host_recv = cfg->host_recv;
    /* the peer's GETs in flight (its window, the same where it runs with
     * this GPUPORT_SOCKET_QUEUE) are answered through tx too */
    tc->tx_cap = 2 * tc->q;
    tc->tx = calloc(tc->tx_cap, sizeof(*tc->tx));
    tc->inflight = calloc(tc->q, sizeof(*tc->inflight));
    tc->rxbuf = malloc(RXBUF);
    tc->rx_ok = calloc(gpuport_tl_max_channels(comm), 1);
    if (!tc->tx || !tc->inflight || !tc->rxbuf || !tc->rx_ok) {
        conn_free(tc);
        return GPUPORT_ERR_NO_MEMORY;
    }
    /* The lower rank connects, the higher accepts; a rank and itself do
     * both and send on one socket, receive on the other. */
    if (rank <= peer)
        tc->fd_tx = connect_to(conn->tl, peer, deadline);
    if (rank >= peer && (rank != peer || tc->fd_tx >= 0))
        tc->fd_rx = tcp_accept_from(conn->tl, peer, deadline);
    if (rank < peer)
        tc->fd_rx = tc->fd_tx;
    else if (rank > peer)
        tc->fd_tx = tc->fd_rx;
    if (tc->fd_tx < 0 || tc->fd_rx < 0) {
        conn_free(tc);
        return GPUPORT_ERR_TRANSPORT;
    }
    tune(tc->fd_tx, cfg);
    if (tc->fd_rx != tc->fd_tx)
        tune(tc->fd_rx, cfg);
    set_nonblock(tc->fd_tx);
    set_nonblock(tc->fd_rx);
    tc->conn = conn;
    tc->readable = 1;
    if (t->epfd >= 0) {
        struct epoll_event ev;
        memset(&ev, 0, sizeof(ev));
        ev.events = EPOLLIN;
        ev.data.ptr = tc;
        tc->no_epoll = epoll_ctl(t->epfd, EPOLL_CTL_ADD, tc->fd_rx, &ev) != 0;
        if (tc->no_epoll)
            log_warn("epoll_ctl(ADD) for rank %d failed (%s); its socket is tried on every "
                     "pass", peer, strerror(errno));
    } else {
        tc->no_epoll = 1;
    }
    conn->priv = tc;
    {
        int n = atomic_load_explicit(&t->nconns, memory_order_relaxed);
        t->conns[n] = tc;
        atomic_store_explicit(&t->nconns, n + 1, memory_order_release);
    }
    log_debug("connected to rank %d (%s)", peer, gpuport_tl_proc(comm, peer)->hostname);
    return GPUPORT_OK;
}

void tcp_conn_close(gpuport_conn_t *conn)
{
    tcp_conn_t *tc = conn->priv;

    if (tc && (tc->host_sent || tc->host_queued || tc->host_busy))
        log_debug("to rank %d: %llu host calls sent their own messages (%llu leaving a rest to "
                  "the proxy); %llu found messages queued or no room, %llu the proxy in a "
                  "pass over the connection, and went through the proxy",
                  tc->peer, (unsigned long long)tc->host_sent,
                  (unsigned long long)tc->host_rests, (unsigned long long)tc->host_queued,
                  (unsigned long long)tc->host_busy);
    if (tc && tc->host_recvs)
        log_debug("from rank %d: %llu host waits received messages themselves", tc->peer,
                  (unsigned long long)tc->host_recvs);
    if (tc)
        conn_free(tc);
    conn->priv = NULL;
}
