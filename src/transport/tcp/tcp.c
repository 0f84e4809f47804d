/*
 * tcp transport: port channels between hosts without RDMA. Each pair of
 * ranks shares one TCP connection (two for a rank and itself), set up on the
 * application thread at the first channel and then driven only by the proxy
 * thread, without blocking:
 *
 *   put     a PUT header and the source bytes, sent straight from the
 *           source region (it must stay unchanged until the put is flushed);
 *   signal  a SIGNAL header; the stream orders it after every earlier put;
 *   receive the peer's proxy reads headers and writes payloads straight
 *           into the destination region, increments the semaphore for a
 *           SIGNAL, and acknowledges what it has applied (ACK, cumulative);
 *   flush   completes when the peer has acknowledged every earlier op.
 *
 * A connection that breaks (reset, closed without goodbye, data or keepalive
 * probes unanswered for GPUPORT_SOCKET_TIMEOUT_MS) fails every channel on it
 * on this side, waiters included; the peer sees its own socket break. At
 * destroy each side says goodbye (BYE) once it has nothing left to send and
 * keeps receiving until the peer's goodbye.
 *
 * GPU memory (from gpuport_mem_alloc_device: mapped for the device, so the
 * flusher's own context copies it) moves through pinned host staging of NSLOT
 * chunks per direction and connection: the sender's flusher copies each chunk
 * of a GPU source into staging before the proxy sends it; the receiver's
 * proxy receives a chunk into staging and its flusher copies it to the GPU
 * destination. A signal (and the acknowledgement) that follows a GPU put
 * waits for those copies: it goes to the flusher behind them.
 *
 * Headers are host byte order: the ranks of a job share an architecture.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#define HELLO_MAGIC 0x43545047u /* "GPTC" */
#define RXBUF 65536
#define DIRECT_MIN 16384        /* payload rest this large is received in place */
#define IOV_BATCH 64
#define PASS_BYTES (8u << 20)   /* per direction and progress call, so one big put
                                 * does not starve the FIFO and other peers */
#define NO_CHANNEL UINT32_MAX
#define CHUNK (1u << 20)        /* GPU staging piece */
#define NSLOT 8                 /* staging pieces per direction and connection */
#define POSTED_CAP 256          /* flusher items of one connection in flight */
#define CONTROL_SPARE 64        /* send-queue entries kept from operations */
/* A channel whose creation was finishing when its connection broke becomes
 * active after the break: a broken connection's channels are looked at again
 * this often. */
#define RESCAN_NS (10 * 1000 * 1000ull)

enum { POST_TX = 1, POST_RX_CHUNK = 2, POST_RX_SIGNAL = 3 };

enum { MSG_PUT = 1, MSG_SIGNAL = 2, MSG_ACK = 3, MSG_FAIL = 4, MSG_BYE = 5 };

typedef struct tcp_msg {
    uint32_t type;
    uint32_t channel; /* the receiver's channel id */
    uint64_t a;       /* PUT: destination offset; ACK: count applied; FAIL: status */
    uint64_t size;    /* PUT: payload bytes that follow */
    uint64_t reserved;
} tcp_msg_t;

typedef struct tcp_hello {
    uint32_t magic;
    uint16_t version_major, version_minor, version_patch, layout;
    int32_t from_rank, to_rank;
    uint32_t reserved;
    uint64_t cookie; /* the listener's, from its rank record */
} tcp_hello_t;

struct gpuport_tcp_comm {
    int listen_fd;
    uint64_t cookie;
    int *pending; /* by rank: accepted, hello read, not yet claimed (comm->lock) */
    char why[256]; /* why there is no listener */
    /* The connections' receiving sockets: the proxy asks once per pass which
     * are readable instead of trying a recv on each (-1: try each). */
    int epfd;
    _Atomic int nconns;
};

typedef struct tx_item {
    tcp_msg_t hdr;
    const char *payload;
    const char *dev_src; /* GPU source: the payload comes through tx staging */
    uint64_t sent;       /* bytes of header and payload already sent */
} tx_item_t;

/* A piece of a GPU source in tx staging (slot = its index % NSLOT). */
typedef struct tx_chunk {
    uint32_t item; /* tx index */
    uint64_t off, len; /* in the item's payload */
} tx_chunk_t;

typedef struct posted {
    uint8_t kind;    /* POST_* */
    uint64_t marker; /* rx: operations applied once this completes */
} posted_t;

typedef struct tcp_conn {
    gpuport_comm_t comm;
    int peer;
    int fd_tx, fd_rx; /* one socket, or two for a rank and itself */
    int broken;       /* a gpuport_status_t once the connection failed */
    int fail_status;  /* broken without goodbye: channels on it must fail */
    uint64_t next_rescan_ns; /* ... including those activated after the break */
    /* sending (proxy thread) */
    tx_item_t *tx;    /* ring of messages to send */
    uint32_t tx_cap, tx_head, tx_tail;
    uint32_t *inflight; /* local channel ids of sent PUT/SIGNAL, awaiting ACK */
    uint32_t q;         /* GPUPORT_SOCKET_QUEUE, power of two: tx and inflight sizes */
    uint64_t ops_sent, ops_acked;
    int ack_queued;     /* an ACK is in tx and not yet started */
    uint32_t ack_slot;
    int bye_sent, bye_seen;
    int bye_applied; /* channels closed after the peer's goodbye */
    int readable;    /* epoll said so, and no recv has come back empty since */
    int no_epoll;    /* not in the epoll set: always try */
    /* receiving (proxy thread) */
    char *rxbuf;
    size_t rx_len, rx_pos;
    tcp_msg_t cur;
    int in_payload;
    char *payload_dst; /* NULL: discard */
    uint64_t payload_left;
    uint64_t applied; /* PUT/SIGNAL applied, acknowledged cumulatively */
    uint64_t acked_sent;
    uint64_t rx_ops;  /* PUT/SIGNAL received and handled (applied or posted) */
    _Atomic uint8_t *rx_ok; /* by local channel id: connected, may receive */
    /* GPU regions: staging (pinned, NSLOT * CHUNK each; made by chan_connect
     * on the application thread before the channel can carry anything) */
    char *txs, *rxs;
    tx_chunk_t tchunk[NSLOT];
    uint32_t tc_head, tc_ready, tc_tail; /* pieces freed, staged, posted */
    uint32_t sg_item;                    /* tx item being staged */
    uint64_t sg_off;                     /* its payload bytes posted */
    int dev_payload;                     /* the payload in progress goes to a GPU */
    char *dev_dst;                       /* its destination (device address) */
    uint32_t rc_head, rc_tail;           /* rx pieces copied out, posted */
    uint64_t rc_fill;                    /* bytes in the piece being filled */
    uint64_t rx_pending;                 /* rx items at the flusher */
    posted_t posted[POSTED_CAP];
    uint32_t po_head, po_tail;
    gpuport_conn_t *conn;
} tcp_conn_t;

static int tx_room(const tcp_conn_t *tc, uint32_t n)
{
    return tc->tx_tail - tc->tx_head + n <= tc->tx_cap;
}

static tx_item_t *tx_push(tcp_conn_t *tc, uint32_t type, uint32_t channel, uint64_t a,
                          uint64_t size, const void *payload)
{
    tx_item_t *it = &tc->tx[tc->tx_tail % tc->tx_cap];

    memset(it, 0, sizeof(*it));
    it->hdr.type = type;
    it->hdr.channel = channel;
    it->hdr.a = a;
    it->hdr.size = size;
    it->payload = payload;
    tc->tx_tail++;
    return it;
}

/* ---- addresses and the listener ---- */

static socklen_t sockaddr_of(const gpuport_proc_rec_t *p, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof(*ss));
    if (p->tcp_family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = p->tcp_port;
        a->sin6_scope_id = p->tcp_scope;
        memcpy(&a->sin6_addr, p->tcp_addr, 16);
        return sizeof(*a);
    }
    struct sockaddr_in *a = (struct sockaddr_in *)ss;
    a->sin_family = AF_INET;
    a->sin_port = p->tcp_port;
    memcpy(&a->sin_addr, p->tcp_addr, 4);
    return sizeof(*a);
}

static void addr_text(const gpuport_proc_rec_t *p, char *buf, size_t len)
{
    char host[INET6_ADDRSTRLEN] = "?";

    inet_ntop(p->tcp_family == AF_INET6 ? AF_INET6 : AF_INET, p->tcp_addr, host, sizeof(host));
    snprintf(buf, len, p->tcp_family == AF_INET6 ? "[%s]:%u" : "%s:%u", host,
             (unsigned)ntohs(p->tcp_port));
}

/* Does interface name match the GPUPORT_SOCKET_IFNAME list? */
static int if_selected(const char *list, const char *name)
{
    int exclude = list[0] == '^';
    const char *s = list + exclude;

    while (*s) {
        size_t n = strcspn(s, ",");
        if (n && strncmp(name, s, n) == 0)
            return !exclude;
        s += n + (s[n] == ',');
    }
    return exclude;
}

static int usable_v6(const struct sockaddr_in6 *a)
{
    return !IN6_IS_ADDR_LINKLOCAL(&a->sin6_addr) && !IN6_IS_ADDR_LOOPBACK(&a->sin6_addr);
}

/* Picks the interface and address to listen on: the first listed (or, with
 * no list, the first up and not loopback) with an IPv4 address, else with a
 * global IPv6 one; loopback when there is nothing else. */
static gpuport_status_t pick_address(const gpuport_config_t *cfg, gpuport_proc_rec_t *me,
                                     char *why, size_t len)
{
    struct ifaddrs *ifs, *i, *best = NULL;
    const char *list = cfg->socket_ifname;
    char seen[256] = "";
    size_t used = 0;

    if (getifaddrs(&ifs) != 0) {
        snprintf(why, len, "getifaddrs failed: %s", strerror(errno));
        return GPUPORT_ERR_TRANSPORT;
    }
    for (int pass = 0; pass < 3 && !best; pass++) {
        for (i = ifs; i && !best; i = i->ifa_next) {
            int loop;
            if (!i->ifa_addr || !(i->ifa_flags & IFF_UP))
                continue;
            loop = (i->ifa_flags & IFF_LOOPBACK) != 0;
            if (pass == 0 && used < sizeof(seen) && !strstr(seen, i->ifa_name))
                used += (size_t)snprintf(seen + used, sizeof(seen) - used, "%s%s",
                                         used ? ", " : "", i->ifa_name);
            if (list[0] ? !if_selected(list, i->ifa_name) : (pass < 2) == loop)
                continue;
            if (pass == 0 && i->ifa_addr->sa_family == AF_INET)
                best = i;
            else if (pass == 1 && i->ifa_addr->sa_family == AF_INET6 &&
                     (loop || usable_v6((struct sockaddr_in6 *)i->ifa_addr)))
                best = i;
            else if (pass == 2 && !list[0] &&
                     (i->ifa_addr->sa_family == AF_INET || i->ifa_addr->sa_family == AF_INET6))
                best = i;
        }
    }
    if (!best) {
        freeifaddrs(ifs);
        if (list[0]) {
            snprintf(why, len, "GPUPORT_SOCKET_IFNAME=%.64s matches no interface that is up with "
                     "an address (interfaces up here: %.96s)", list, seen[0] ? seen : "none");
            return GPUPORT_ERR_INVALID_CONFIG;
        }
        snprintf(why, len, "no network interface is up with an address");
        return GPUPORT_ERR_TRANSPORT;
    }
    snprintf(me->tcp_ifname, sizeof(me->tcp_ifname), "%s", best->ifa_name);
    if (best->ifa_addr->sa_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)best->ifa_addr;
        me->tcp_family = AF_INET6;
        me->tcp_scope = a->sin6_scope_id;
        memcpy(me->tcp_addr, &a->sin6_addr, 16);
    } else {
        me->tcp_family = AF_INET;
        memcpy(me->tcp_addr, &((const struct sockaddr_in *)best->ifa_addr)->sin_addr, 4);
    }
    if (best->ifa_flags & IFF_LOOPBACK)
        log_info("tcp: no interface but loopback is up; tcp reaches only ranks on this host");
    freeifaddrs(ifs);
    return GPUPORT_OK;
}

gpuport_status_t gpuport_tcp_comm_init(gpuport_comm_t comm, gpuport_proc_rec_t *me)
{
    struct gpuport_tcp_comm *t = calloc(1, sizeof(*t));
    struct sockaddr_storage ss;
    socklen_t sl;
    gpuport_status_t status;
    int forced = comm->config.transport == GPUPORT_TRANSPORT_TCP;
    char where[80];

    if (!t)
        return GPUPORT_ERR_NO_MEMORY;
    t->listen_fd = -1;
    t->epfd = -1;
    comm->tcp = t;
    t->pending = malloc((size_t)comm->size * sizeof(int));
    if (!t->pending)
        return GPUPORT_ERR_NO_MEMORY;
    for (int r = 0; r < comm->size; r++)
        t->pending[r] = -1;
    if (getrandom(&t->cookie, sizeof(t->cookie), 0) != sizeof(t->cookie))
        t->cookie = gpuport_now_ns() ^ ((uint64_t)getpid() << 32);
    status = pick_address(&comm->config, me, t->why, sizeof(t->why));
    if (status == GPUPORT_OK) {
        sl = sockaddr_of(me, &ss); /* port 0: any */
        t->listen_fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (t->listen_fd < 0 || bind(t->listen_fd, (struct sockaddr *)&ss, sl) != 0 ||
            listen(t->listen_fd, 1024) != 0 ||
            getsockname(t->listen_fd, (struct sockaddr *)&ss, &sl) != 0) {
            snprintf(t->why, sizeof(t->why), "cannot listen on %s: %s", me->tcp_ifname,
                     strerror(errno));
            status = GPUPORT_ERR_TRANSPORT;
        }
    }
    if (status != GPUPORT_OK) {
        if (t->listen_fd >= 0)
            close(t->listen_fd);
        t->listen_fd = -1;
        me->tcp_port = 0;
        if (forced || status == GPUPORT_ERR_INVALID_CONFIG) {
            log_error("tcp: %s", t->why);
            return status;
        }
        log_info("tcp: not available: %s", t->why);
        return GPUPORT_OK;
    }
    me->tcp_port = ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                            : ((struct sockaddr_in *)&ss)->sin_port;
    me->tcp_cookie = t->cookie;
    t->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (t->epfd < 0)
        log_warn("tcp: epoll_create1 failed (%s); the proxy will try every connection on every "
                 "pass", strerror(errno));
    addr_text(me, where, sizeof(where));
    log_debug("tcp: listening on %s (%s)", where, me->tcp_ifname);
    return GPUPORT_OK;
}

void gpuport_tcp_comm_fini(gpuport_comm_t comm)
{
    struct gpuport_tcp_comm *t = comm->tcp;

    if (!t)
        return;
    if (t->listen_fd >= 0)
        close(t->listen_fd);
    if (t->epfd >= 0)
        close(t->epfd);
    for (int r = 0; t->pending && r < comm->size; r++)
        if (t->pending[r] >= 0)
            close(t->pending[r]);
    free(t->pending);
    free(t);
    comm->tcp = NULL;
}

static int tcp_reachable(gpuport_comm_t comm, int peer, char *why, size_t len)
{
    const gpuport_proc_rec_t *p = &comm->procs[peer];

    if (!comm->tcp || comm->tcp->listen_fd < 0) {
        snprintf(why, len, "this rank has no tcp listener (%s)",
                 comm->tcp ? comm->tcp->why : "not set up");
        return 0;
    }
    if (p->tcp_port == 0) {
        snprintf(why, len, "rank %d (%s) has no tcp listener; its log says why", peer,
                 p->hostname);
        return 0;
    }
    return 1;
}

/* ---- connection set-up (application thread, under comm->lock) ---- */

static uint64_t deadline_of(gpuport_comm_t comm)
{
    return comm->timeout_ns ? gpuport_now_ns() + comm->timeout_ns : UINT64_MAX;
}

static int ms_left(uint64_t deadline)
{
    uint64_t now = gpuport_now_ns();
    if (deadline == UINT64_MAX)
        return 1000;
    if (now >= deadline)
        return 0;
    return (int)((deadline - now) / 1000000 + 1 > 1000 ? 1000 : (deadline - now) / 1000000 + 1);
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
static void tune(int fd, const gpuport_config_t *cfg)
{
    int one = 1;
    int idle = (int)(cfg->socket_timeout_ms / 3000) > 0 ? (int)(cfg->socket_timeout_ms / 3000) : 1;
    int intvl = 1, cnt = (int)(cfg->socket_timeout_ms / 1000);
    unsigned int user_timeout = (unsigned int)cfg->socket_timeout_ms;

    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof(user_timeout));
}

static int connect_to(gpuport_comm_t comm, int peer, uint64_t deadline)
{
    const gpuport_proc_rec_t *p = &comm->procs[peer];
    struct sockaddr_storage ss;
    socklen_t sl = sockaddr_of(p, &ss);
    char where[80];
    tcp_hello_t h;
    int fd = -1, err = 0;

    addr_text(p, where, sizeof(where));
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
        log_error("tcp: cannot connect to rank %d (%s at %s): %s", peer, p->hostname, where,
                  strerror(err));
        return -1;
    }
    memset(&h, 0, sizeof(h));
    h.magic = HELLO_MAGIC;
    h.version_major = GPUPORT_VERSION_MAJOR;
    h.version_minor = GPUPORT_VERSION_MINOR;
    h.version_patch = GPUPORT_VERSION_PATCH;
    h.layout = GPUPORT_RECORD_LAYOUT;
    h.from_rank = comm->rank;
    h.to_rank = peer;
    h.cookie = p->tcp_cookie;
    err = io_full(fd, &h, sizeof(h), 1, deadline);
    if (err) {
        log_error("tcp: connected to rank %d at %s, but sending the greeting failed: %s", peer,
                  where, strerror(err));
        close(fd);
        return -1;
    }
    return fd;
}

/* Accepts until peer's connection arrives; others are kept for their turn. */
static int accept_from(gpuport_comm_t comm, int peer, uint64_t deadline)
{
    struct gpuport_tcp_comm *t = comm->tcp;

    for (;;) {
        struct pollfd pf = {t->listen_fd, POLLIN, 0};
        tcp_hello_t h;
        int fd, err, wait;

        if (t->pending[peer] >= 0) {
            fd = t->pending[peer];
            t->pending[peer] = -1;
            return fd;
        }
        wait = ms_left(deadline);
        if (wait == 0) {
            log_error("tcp: rank %d did not connect within GPUPORT_TIMEOUT_MS=%llu", peer,
                      (unsigned long long)comm->config.timeout_ms);
            return -1;
        }
        if (poll(&pf, 1, wait) <= 0)
            continue;
        fd = accept4(t->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            continue;
        err = io_full(fd, &h, sizeof(h), 0, gpuport_now_ns() + 5000000000ull);
        if (err || h.magic != HELLO_MAGIC || h.cookie != t->cookie || h.to_rank != comm->rank ||
            h.from_rank < 0 || h.from_rank >= comm->size) {
            log_warn("tcp: dropped a connection that is not from this communicator (%s)",
                     err ? strerror(err) : "wrong greeting");
            close(fd);
            continue;
        }
        if (h.version_major != GPUPORT_VERSION_MAJOR || h.version_minor != GPUPORT_VERSION_MINOR ||
            h.layout != GPUPORT_RECORD_LAYOUT) {
            log_error("tcp: rank %d runs gpuport %u.%u.%u (layout %u), this rank %d.%d.%d "
                      "(layout %d)",
                      h.from_rank, h.version_major, h.version_minor, h.version_patch, h.layout,
                      GPUPORT_VERSION_MAJOR, GPUPORT_VERSION_MINOR, GPUPORT_VERSION_PATCH,
                      GPUPORT_RECORD_LAYOUT);
            close(fd);
            return -1;
        }
        if (h.from_rank == peer)
            return fd;
        if (t->pending[h.from_rank] >= 0)
            close(t->pending[h.from_rank]);
        t->pending[h.from_rank] = fd;
    }
}

static void conn_free(tcp_conn_t *tc)
{
    gpuport_gpu_stage_free(tc->comm, tc->txs, (size_t)NSLOT * CHUNK);
    gpuport_gpu_stage_free(tc->comm, tc->rxs, (size_t)NSLOT * CHUNK);
    if (tc->fd_tx >= 0)
        close(tc->fd_tx);
    if (tc->fd_rx >= 0 && tc->fd_rx != tc->fd_tx)
        close(tc->fd_rx);
    free(tc->tx);
    free(tc->inflight);
    free(tc->rxbuf);
    free((void *)tc->rx_ok);
    free(tc);
}

static gpuport_status_t tcp_conn_open(gpuport_conn_t *conn)
{
    gpuport_comm_t comm = conn->comm;
    uint64_t deadline = deadline_of(comm);
    tcp_conn_t *tc = calloc(1, sizeof(*tc));
    int peer = conn->peer;

    if (!tc)
        return GPUPORT_ERR_NO_MEMORY;
    tc->comm = comm;
    tc->peer = peer;
    tc->fd_tx = tc->fd_rx = -1;
    /* Powers of two, so that ring positions stay consistent when the 32-bit
     * counters wrap; CONTROL_SPARE entries of tx are for ACK, FAIL, BYE. */
    tc->q = (uint32_t)comm->config.socket_queue;
    tc->tx_cap = tc->q;
    tc->tx = calloc(tc->tx_cap, sizeof(*tc->tx));
    tc->inflight = calloc(tc->q, sizeof(*tc->inflight));
    tc->rxbuf = malloc(RXBUF);
    tc->rx_ok = calloc(comm->config.max_channels, 1);
    if (!tc->tx || !tc->inflight || !tc->rxbuf || !tc->rx_ok) {
        conn_free(tc);
        return GPUPORT_ERR_NO_MEMORY;
    }
    /* The lower rank connects, the higher accepts; a rank and itself do
     * both and send on one socket, receive on the other. */
    if (comm->rank <= peer)
        tc->fd_tx = connect_to(comm, peer, deadline);
    if (comm->rank >= peer && (comm->rank != peer || tc->fd_tx >= 0))
        tc->fd_rx = accept_from(comm, peer, deadline);
    if (comm->rank < peer)
        tc->fd_rx = tc->fd_tx;
    else if (comm->rank > peer)
        tc->fd_tx = tc->fd_rx;
    if (tc->fd_tx < 0 || tc->fd_rx < 0) {
        conn_free(tc);
        return GPUPORT_ERR_TRANSPORT;
    }
    tune(tc->fd_tx, &comm->config);
    if (tc->fd_rx != tc->fd_tx)
        tune(tc->fd_rx, &comm->config);
    set_nonblock(tc->fd_tx);
    set_nonblock(tc->fd_rx);
    tc->conn = conn;
    tc->readable = 1;
    if (comm->tcp->epfd >= 0) {
        struct epoll_event ev;
        memset(&ev, 0, sizeof(ev));
        ev.events = EPOLLIN;
        ev.data.ptr = tc;
        tc->no_epoll = epoll_ctl(comm->tcp->epfd, EPOLL_CTL_ADD, tc->fd_rx, &ev) != 0;
        if (tc->no_epoll)
            log_warn("tcp: epoll_ctl(ADD) for rank %d failed (%s); its socket is tried on every "
                     "pass", peer, strerror(errno));
    } else {
        tc->no_epoll = 1;
    }
    conn->priv = tc;
    atomic_fetch_add_explicit(&comm->tcp->nconns, 1, memory_order_release);
    log_debug("tcp: connected to rank %d (%s)", peer, comm->procs[peer].hostname);
    return GPUPORT_OK;
}

static void tcp_conn_close(gpuport_conn_t *conn)
{
    if (conn->priv)
        conn_free(conn->priv);
    conn->priv = NULL;
}

static gpuport_status_t stage_get(tcp_conn_t *tc, char **stage, const char *what)
{
    gpuport_status_t st;
    void *p;

    if (*stage)
        return GPUPORT_OK;
    if (!tc->comm->gpu) {
        log_error("tcp: a GPU region (%s) on a communicator without a GPU", what);
        return GPUPORT_ERR_NOT_SUPPORTED;
    }
    st = gpuport_gpu_stage_alloc(tc->comm, (size_t)NSLOT * CHUNK, &p);
    if (st)
        return st;
    *stage = p;
    log_debug("tcp: %u MiB of pinned staging for GPU %s to/from rank %d", NSLOT * CHUNK >> 20,
              what, tc->peer);
    return GPUPORT_OK;
}

static int gpu_kind(int kind)
{
    return kind == GPUPORT_REGION_DEVICE || kind == GPUPORT_REGION_DEVICE_VMM;
}

static gpuport_status_t tcp_chan_connect(gpuport_pchan_t *ch, const gpuport_channel_rec_t *peer)
{
    tcp_conn_t *tc = ch->conn->priv;
    gpuport_status_t st = GPUPORT_OK;

    /* the proxy's word; a break it has not seen yet is caught by its rescan */
    if (__atomic_load_n(&tc->fail_status, __ATOMIC_RELAXED)) {
        log_error("channel to rank %d: the tcp connection to it has broken; no channel to it can "
                  "be made in this communicator",
                  ch->conn->peer);
        return GPUPORT_ERR_PEER;
    }
    /* The flusher copies GPU data between staging and the regions from its
     * own context. cudaMalloc memory belongs to the application's context,
     * and such copies were measured to wait for that context's time slice
     * and to hang behind kernels queued there, writing into it and reading
     * from it alike: only memory mapped for the device will do. */
    if (ch->local_dst_kind == GPUPORT_REGION_DEVICE || ch->src_kind == GPUPORT_REGION_DEVICE) {
        log_error("channel to rank %d: the %s is cudaMalloc memory, which the tcp transport "
                  "cannot copy without the application's CUDA context (the copies would wait for "
                  "its queued kernels); allocate the GPU regions of tcp channels with "
                  "gpuport_mem_alloc_device",
                  ch->conn->peer,
                  ch->local_dst_kind == GPUPORT_REGION_DEVICE ? "local destination"
                                                              : "local source");
        return GPUPORT_ERR_NOT_SUPPORTED;
    }
    if (gpu_kind(ch->src_kind))
        st = stage_get(tc, &tc->txs, "sources");
    if (!st && ch->local_dst_kind == GPUPORT_REGION_DEVICE_VMM)
        st = stage_get(tc, &tc->rxs, "destinations");
    if (st)
        return st;
    memset(&ch->dst, 0, sizeof(ch->dst));
    ch->dst.rec = peer->dst;
    ch->remote_sem = NULL;
    ch->remote_status = NULL;
    atomic_store_explicit(&tc->rx_ok[ch->id], 1, memory_order_release);
    return GPUPORT_OK;
}

static void tcp_chan_disconnect(gpuport_pchan_t *ch)
{
    tcp_conn_t *tc = ch->conn->priv;

    if (tc)
        atomic_store_explicit(&tc->rx_ok[ch->id], 0, memory_order_release);
    memset(&ch->dst, 0, sizeof(ch->dst));
}

/* ---- failure ---- */

/* Fails every channel on the connection here and completes what was in
 * flight with the error, so flushes and waits return. */
static void conn_break(tcp_conn_t *tc, gpuport_status_t status, const char *what, int err)
{
    gpuport_comm_t comm = tc->comm;
    int failed = 0;

    if (tc->broken)
        return;
    tc->broken = status;
    tc->fail_status = status;
    tc->next_rescan_ns = gpuport_now_ns() + RESCAN_NS;
    for (uint32_t i = 0; i < comm->config.max_channels; i++) {
        gpuport_pchan_t *ch = &comm->pchans[i];
        if (!atomic_load_explicit(&ch->active, memory_order_acquire) || ch->conn->priv != tc)
            continue;
        gpuport_pchan_fail_local(ch, status);
        failed++;
    }
    if (failed || tc->ops_sent > tc->ops_acked)
        log_error("tcp: connection to rank %d (%s) %s%s%s; %d channel(s) failed, %llu "
                  "operation(s) lost in flight",
                  tc->peer, comm->procs[tc->peer].hostname, what, err ? ": " : "",
                  err ? strerror(err) : "", failed,
                  (unsigned long long)(tc->ops_sent - tc->ops_acked));
    while (tc->ops_acked < tc->ops_sent) {
        uint32_t id = tc->inflight[tc->ops_acked % tc->q];
        tc->ops_acked++;
        gpuport_pchan_complete(&comm->pchans[id], status);
    }
    tc->tx_head = tc->tx_tail;
    tc->sg_item = tc->tx_tail;
    tc->tc_head = tc->tc_ready = tc->tc_tail;
    tc->ack_queued = 0;
}

/* ---- proxy thread: operations ---- */

static int tcp_has_room(gpuport_pchan_t *ch, uint32_t nops)
{
    tcp_conn_t *tc = ch->conn->priv;

    return tc->broken ||
           (tc->ops_sent - tc->ops_acked + nops <= tc->q - CONTROL_SPARE && tx_room(tc, nops));
}

static int queue_op(gpuport_pchan_t *ch, uint32_t type, uint64_t off, uint64_t size,
                    const void *payload, int device)
{
    tx_item_t *it;
    tcp_conn_t *tc = ch->conn->priv;

    if (tc->broken)
        return tc->broken;
    if (tc->bye_seen || tc->bye_sent) {
        log_error("channel %u: rank %d has closed its communicator; nothing more can be sent",
                  ch->id, tc->peer);
        return GPUPORT_ERR_PEER;
    }
    it = tx_push(tc, type, ch->peer_id, off, size, device ? NULL : payload);
    it->dev_src = device ? payload : NULL;
    tc->inflight[tc->ops_sent % tc->q] = ch->id;
    tc->ops_sent++;
    return GPUPORT_TRANSPORT_ASYNC;
}

static int tcp_put(gpuport_pchan_t *ch, uint64_t dst_off, uint64_t src_off, uint64_t size,
                   int behind_work, gpuport_work_t *work)
{
    (void)behind_work, (void)work;
    return queue_op(ch, MSG_PUT, dst_off, size, (const char *)ch->src_base + src_off,
                    gpu_kind(ch->src_kind));
}

static int tcp_signal(gpuport_pchan_t *ch, int behind_work, gpuport_work_t *work)
{
    (void)behind_work, (void)work;
    return queue_op(ch, MSG_SIGNAL, 0, 0, NULL, 0);
}

static void tcp_report_fail(gpuport_pchan_t *ch, gpuport_status_t status)
{
    tcp_conn_t *tc = ch->conn->priv;

    if (tc->broken || tc->bye_sent)
        return;
    if (tx_room(tc, 1))
        tx_push(tc, MSG_FAIL, ch->peer_id, (uint64_t)(int64_t)status, 0, NULL);
    else
        log_warn("channel %u: the send queue to rank %d is full; its waiters learn of this "
                 "channel's failure only by their timeout",
                 ch->id, tc->peer);
}

/* ---- proxy thread: staging of GPU regions ---- */

static int post_full(const tcp_conn_t *tc)
{
    return tc->po_tail - tc->po_head == POSTED_CAP;
}

static void post_push(tcp_conn_t *tc, uint8_t kind, uint64_t marker)
{
    posted_t *p = &tc->posted[tc->po_tail % POSTED_CAP];

    p->kind = kind;
    p->marker = marker;
    tc->po_tail++;
}

/* The receiving side has handled one more PUT or SIGNAL; it is applied now
 * unless GPU copies are still ahead of it at the flusher. */
static void rx_op_done(tcp_conn_t *tc)
{
    tc->rx_ops++;
    if (tc->rx_pending == 0)
        tc->applied = tc->rx_ops;
}

static void tcp_work_done(gpuport_conn_t *conn, gpuport_status_t status)
{
    tcp_conn_t *tc = conn->priv;
    posted_t p = tc->posted[tc->po_head % POSTED_CAP];

    tc->po_head++;
    if (p.kind != POST_TX) {
        tc->rx_pending--;
        if (p.kind == POST_RX_CHUNK)
            tc->rc_head++;
    }
    if (tc->broken)
        return;
    if (status != GPUPORT_OK) {
        conn_break(tc, status, "lost a staging copy of GPU memory", 0);
        return;
    }
    if (p.kind == POST_TX)
        tc->tc_ready++;
    else
        tc->applied = tc->rx_pending ? p.marker : tc->rx_ops;
}

/* Posts flusher copies of GPU sources into tx staging, piece by piece, in
 * the order the items will be sent. */
static void stage_tx(tcp_conn_t *tc)
{
    while (tc->tc_tail - tc->tc_head < NSLOT && !tc->broken && !post_full(tc)) {
        gpuport_work_t w;
        tx_item_t *it;
        uint64_t len;
        uint32_t slot;

        if ((int32_t)(tc->sg_item - tc->tx_head) < 0) {
            tc->sg_item = tc->tx_head;
            tc->sg_off = 0;
        }
        if (tc->sg_item == tc->tx_tail)
            return;
        it = &tc->tx[tc->sg_item % tc->tx_cap];
        if (!it->dev_src || tc->sg_off >= it->hdr.size) {
            tc->sg_item++;
            tc->sg_off = 0;
            continue;
        }
        len = it->hdr.size - tc->sg_off < CHUNK ? it->hdr.size - tc->sg_off : CHUNK;
        slot = tc->tc_tail % NSLOT;
        memset(&w, 0, sizeof(w));
        w.kind = GPUPORT_WORK_CU_FROM_DEVICE;
        w.dst = tc->txs + (size_t)slot * CHUNK;
        w.src = it->dev_src + tc->sg_off;
        w.size = len;
        w.aux = NULL; /* sources are VMM memory (tcp_chan_connect) */
        if (!gpuport_proxy_post(tc->conn, &w))
            return;
        tc->tchunk[slot].item = tc->sg_item;
        tc->tchunk[slot].off = tc->sg_off;
        tc->tchunk[slot].len = len;
        post_push(tc, POST_TX, 0);
        tc->tc_tail++;
        tc->sg_off += len;
    }
}

/* iovecs for the staged bytes of item idx's payload from off on */
static int staged_iov(tcp_conn_t *tc, uint32_t idx, uint64_t off, struct iovec *iov, int room,
                      uint64_t *avail)
{
    int n = 0;

    *avail = 0;
    for (uint32_t c = tc->tc_head; c != tc->tc_ready && n < room; c++) {
        const tx_chunk_t *k = &tc->tchunk[c % NSLOT];
        if (k->item != idx)
            break;
        if (k->off + k->len <= off)
            continue;
        iov[n].iov_base = tc->txs + (size_t)(c % NSLOT) * CHUNK + (off - k->off);
        iov[n++].iov_len = (size_t)(k->off + k->len - off);
        *avail += k->off + k->len - off;
        off = k->off + k->len;
    }
    return n;
}

/* Staging pieces whose bytes are all sent are free again. */
static void free_chunks(tcp_conn_t *tc)
{
    while (tc->tc_head != tc->tc_ready) {
        const tx_chunk_t *k = &tc->tchunk[tc->tc_head % NSLOT];
        int32_t ahead = (int32_t)(k->item - tc->tx_head);
        if (ahead > 0)
            break;
        if (ahead == 0 && tc->tx[k->item % tc->tx_cap].sent < sizeof(tcp_msg_t) + k->off + k->len)
            break;
        tc->tc_head++;
    }
}

/* ---- proxy thread: sending ---- */

static int send_some(tcp_conn_t *tc)
{
    uint64_t budget = PASS_BYTES;
    int progressed = 0;

    while (tc->tx_head != tc->tx_tail && budget > 0 && !tc->broken) {
        struct iovec iov[IOV_BATCH];
        struct msghdr mh;
        int n = 0;
        ssize_t sent;

        for (uint32_t i = tc->tx_head; i != tc->tx_tail && n < IOV_BATCH - 1; i++) {
            tx_item_t *it = &tc->tx[i % tc->tx_cap];
            uint64_t off = it->sent;
            if (off < sizeof(tcp_msg_t)) {
                iov[n].iov_base = (char *)&it->hdr + off;
                iov[n++].iov_len = sizeof(tcp_msg_t) - off;
                off = 0;
            } else {
                off -= sizeof(tcp_msg_t);
            }
            if (it->hdr.type != MSG_PUT || off >= it->hdr.size)
                continue;
            if (it->dev_src) {
                uint64_t avail;
                n += staged_iov(tc, i, off, iov + n, IOV_BATCH - n, &avail);
                /* the rest is not staged yet: nothing may follow */
                if (off + avail < it->hdr.size)
                    break;
            } else {
                uint64_t len = it->hdr.size - off;
                iov[n].iov_base = (char *)it->payload + off;
                iov[n++].iov_len = (size_t)(len < budget ? len : budget);
                /* nothing may follow a payload cut short in this call */
                if (len > budget)
                    break;
            }
        }
        if (n == 0)
            break;
        memset(&mh, 0, sizeof(mh));
        mh.msg_iov = iov;
        mh.msg_iovlen = (size_t)n;
        sent = sendmsg(tc->fd_tx, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (sent < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                break;
            conn_break(tc, GPUPORT_ERR_TRANSPORT, "failed while sending", errno);
            break;
        }
        progressed = 1;
        budget = (uint64_t)sent < budget ? budget - (uint64_t)sent : 0;
        while (sent > 0) {
            tx_item_t *it = &tc->tx[tc->tx_head % tc->tx_cap];
            uint64_t total = sizeof(tcp_msg_t) + (it->hdr.type == MSG_PUT ? it->hdr.size : 0);
            uint64_t take = total - it->sent < (uint64_t)sent ? total - it->sent : (uint64_t)sent;
            it->sent += take;
            sent -= (ssize_t)take;
            if (it->sent == total) {
                if (it->hdr.type == MSG_ACK && tc->ack_queued &&
                    tc->ack_slot == tc->tx_head % tc->tx_cap)
                    tc->ack_queued = 0;
                tc->tx_head++;
            }
        }
        if (tc->txs)
            free_chunks(tc);
    }
    return progressed;
}

/* One ACK at a time in the queue, updated in place until it starts going. */
static void queue_ack(tcp_conn_t *tc)
{
    if (tc->applied == tc->acked_sent || tc->broken)
        return;
    if (tc->ack_queued) {
        tx_item_t *it = &tc->tx[tc->ack_slot];
        if (it->sent == 0) {
            it->hdr.a = tc->applied;
            tc->acked_sent = tc->applied;
        }
        return;
    }
    if (!tx_room(tc, 1))
        return;
    tc->ack_slot = tc->tx_tail % tc->tx_cap;
    tx_push(tc, MSG_ACK, NO_CHANNEL, tc->applied, 0, NULL);
    tc->ack_queued = 1;
    tc->acked_sent = tc->applied;
}

/* ---- proxy thread: receiving ---- */

static gpuport_pchan_t *rx_channel(tcp_conn_t *tc, uint32_t id)
{
    gpuport_comm_t comm = tc->comm;

    if (id >= comm->config.max_channels ||
        !atomic_load_explicit(&tc->rx_ok[id], memory_order_acquire))
        return NULL;
    return &comm->pchans[id];
}

static void protocol_error(tcp_conn_t *tc, const char *fmt, uint64_t a, uint64_t b)
{
    char msg[160];

    snprintf(msg, sizeof(msg), fmt, (unsigned long long)a, (unsigned long long)b);
    conn_break(tc, GPUPORT_ERR_PEER, msg, 0);
}

static void apply_acks(tcp_conn_t *tc, uint64_t count)
{
    if (count > tc->ops_sent || count < tc->ops_acked) {
        protocol_error(tc, "acknowledged %llu operations of %llu sent", count, tc->ops_sent);
        return;
    }
    while (tc->ops_acked < count) {
        uint32_t id = tc->inflight[tc->ops_acked % tc->q];
        tc->ops_acked++;
        gpuport_pchan_complete(&tc->comm->pchans[id], GPUPORT_OK);
    }
}

/* A whole header is in cur: act on it, or start its payload. */
static void on_header(tcp_conn_t *tc)
{
    gpuport_comm_t comm = tc->comm;
    tcp_msg_t *m = &tc->cur;
    gpuport_pchan_t *ch;

    switch (m->type) {
    case MSG_PUT:
        ch = rx_channel(tc, m->channel);
        tc->in_payload = m->size > 0;
        tc->payload_left = m->size;
        tc->payload_dst = NULL;
        tc->dev_payload = 0;
        if (!ch) {
            log_error("tcp: rank %d put %llu bytes on channel %u, which is not open here; "
                      "discarded",
                      tc->peer, (unsigned long long)m->size, m->channel);
        } else if (m->a > ch->local_dst_size || m->size > ch->local_dst_size - m->a) {
            log_error("tcp: rank %d put %llu bytes at offset %llu on channel %u, outside its "
                      "%llu-byte destination; discarded, the channel is failed",
                      tc->peer, (unsigned long long)m->size, (unsigned long long)m->a, m->channel,
                      (unsigned long long)ch->local_dst_size);
            gpuport_pchan_fail_local(ch, GPUPORT_ERR_OUT_OF_RANGE);
        } else if (gpu_kind(ch->local_dst_kind)) {
            tc->dev_payload = tc->in_payload;
            tc->dev_dst = (char *)ch->local_dst + m->a;
        } else {
            tc->payload_dst = (char *)ch->local_dst + m->a;
        }
        if (!tc->in_payload)
            rx_op_done(tc);
        return;
    case MSG_SIGNAL:
        ch = rx_channel(tc, m->channel);
        if (!ch) {
            log_error("tcp: rank %d signalled channel %u, which is not open here; dropped",
                      tc->peer, m->channel);
            rx_op_done(tc);
        } else if (tc->rx_pending) {
            /* behind GPU copies still at the flusher (room was checked) */
            gpuport_work_t w;
            memset(&w, 0, sizeof(w));
            w.kind = GPUPORT_WORK_SEM_ADD;
            w.sem = &comm->ctrl[m->channel].value;
            w.value = 1;
            gpuport_proxy_post(tc->conn, &w);
            tc->rx_ops++;
            post_push(tc, POST_RX_SIGNAL, tc->rx_ops);
            tc->rx_pending++;
        } else {
            atomic_fetch_add_explicit(&comm->ctrl[m->channel].value, 1, memory_order_release);
            rx_op_done(tc);
        }
        return;
    case MSG_ACK:
        apply_acks(tc, m->a);
        return;
    case MSG_FAIL:
        if (m->channel < comm->config.max_channels) {
            int32_t ok = GPUPORT_OK;
            atomic_compare_exchange_strong(&comm->ctrl[m->channel].peer_status, &ok,
                                           (int32_t)(int64_t)m->a);
        }
        return;
    case MSG_BYE:
        tc->bye_seen = 1;
        return;
    default:
        protocol_error(tc, "sent message type %llu (size %llu)", m->type, m->size);
    }
}

static void payload_done(tcp_conn_t *tc, uint64_t n)
{
    if (tc->payload_dst)
        tc->payload_dst += n;
    tc->payload_left -= n;
    if (tc->payload_left == 0) {
        tc->in_payload = 0;
        rx_op_done(tc);
    }
}

static void rx_closed(tcp_conn_t *tc)
{
    if (tc->bye_seen && !tc->in_payload)
        tc->broken = GPUPORT_ERR_PEER; /* closed after goodbye: quietly */
    else
        conn_break(tc, GPUPORT_ERR_PEER, "was closed by the peer without goodbye "
                   "(process exited?)", 0);
}

/* A payload for GPU memory: into an rx staging piece (buffered bytes first,
 * then the socket), and each full piece to the flusher. 1: progress; 0:
 * blocked (no piece free, no flusher room, no data); -1: the connection
 * ended. */
static int recv_device(tcp_conn_t *tc, uint64_t *budget)
{
    uint64_t target = tc->rc_fill + tc->payload_left < CHUNK ? tc->rc_fill + tc->payload_left
                                                              : CHUNK;
    char *slot = tc->rxs + (size_t)(tc->rc_tail % NSLOT) * CHUNK;
    gpuport_work_t w;
    int last;

    if (tc->rc_fill < target) {
        size_t avail = tc->rx_len - tc->rx_pos, want = (size_t)(target - tc->rc_fill);
        ssize_t got;
        if (tc->rc_fill == 0 && tc->rc_tail - tc->rc_head == NSLOT)
            return 0;
        if (avail) {
            got = (ssize_t)(avail < want ? avail : want);
            memcpy(slot + tc->rc_fill, tc->rxbuf + tc->rx_pos, (size_t)got);
            tc->rx_pos += (size_t)got;
        } else {
            got = recv(tc->fd_rx, slot + tc->rc_fill, want, MSG_DONTWAIT);
            if (got == 0) {
                rx_closed(tc);
                return -1;
            }
            if (got < 0) {
                if (errno == EAGAIN || errno == EWOULDBLOCK) {
                    tc->readable = 0;
                    return 0;
                }
                if (errno == EINTR)
                    return 0;
                conn_break(tc, GPUPORT_ERR_TRANSPORT, "failed while receiving", errno);
                return -1;
            }
        }
        tc->rc_fill += (uint64_t)got;
        tc->payload_left -= (uint64_t)got;
        *budget -= (uint64_t)got < *budget ? (uint64_t)got : *budget;
        if (tc->rc_fill < target)
            return 1;
    }
    if (post_full(tc))
        return 0;
    memset(&w, 0, sizeof(w));
    w.kind = GPUPORT_WORK_CU_TO_DEVICE;
    w.dst = tc->dev_dst;
    w.src = slot;
    w.size = tc->rc_fill;
    w.aux = NULL; /* destinations are VMM memory (tcp_chan_connect) */
    if (!gpuport_proxy_post(tc->conn, &w))
        return 0;
    last = tc->payload_left == 0;
    if (last)
        tc->rx_ops++;
    post_push(tc, POST_RX_CHUNK, tc->rx_ops);
    tc->rx_pending++;
    tc->rc_tail++;
    tc->dev_dst += tc->rc_fill;
    tc->rc_fill = 0;
    if (last) {
        tc->in_payload = 0;
        tc->dev_payload = 0;
    }
    return 1;
}

static int recv_some(tcp_conn_t *tc)
{
    uint64_t budget = PASS_BYTES;
    int progressed = 0;

    while (budget > 0 && !tc->broken) {
        size_t avail = tc->rx_len - tc->rx_pos;
        ssize_t n;

        if (tc->in_payload && tc->dev_payload) {
            int r = recv_device(tc, &budget);
            if (r <= 0)
                break;
            progressed = 1;
            continue;
        }
        if (tc->in_payload && avail > 0) {
            size_t take = avail < tc->payload_left ? avail : (size_t)tc->payload_left;
            if (tc->payload_dst)
                memcpy(tc->payload_dst, tc->rxbuf + tc->rx_pos, take);
            tc->rx_pos += take;
            payload_done(tc, take);
            continue;
        }
        /* behind GPU copies, a SIGNAL goes to the flusher: room first */
        if (!tc->in_payload && tc->rx_pending &&
            (post_full(tc) || !gpuport_flusher_has_room(&tc->comm->proxy.flusher, 1)))
            break;
        if (!tc->in_payload && avail >= sizeof(tcp_msg_t)) {
            memcpy(&tc->cur, tc->rxbuf + tc->rx_pos, sizeof(tcp_msg_t));
            tc->rx_pos += sizeof(tcp_msg_t);
            on_header(tc);
            progressed = 1;
            continue;
        }
        /* need bytes from the socket */
        if (tc->in_payload && tc->payload_dst && tc->payload_left >= DIRECT_MIN) {
            size_t want = tc->payload_left < budget ? (size_t)tc->payload_left : (size_t)budget;
            n = recv(tc->fd_rx, tc->payload_dst, want, MSG_DONTWAIT);
            if (n > 0) {
                payload_done(tc, (uint64_t)n);
                budget -= (uint64_t)n < budget ? (uint64_t)n : budget;
                progressed = 1;
                continue;
            }
        } else {
            if (tc->rx_pos > 0) {
                memmove(tc->rxbuf, tc->rxbuf + tc->rx_pos, avail);
                tc->rx_len = avail;
                tc->rx_pos = 0;
            }
            n = recv(tc->fd_rx, tc->rxbuf + tc->rx_len, RXBUF - tc->rx_len, MSG_DONTWAIT);
            if (n > 0) {
                tc->rx_len += (size_t)n;
                budget -= (uint64_t)n < budget ? (uint64_t)n : budget;
                progressed = 1;
                continue;
            }
        }
        if (n == 0) {
            rx_closed(tc);
            break;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            tc->readable = 0; /* until epoll says otherwise */
            break;
        }
        if (errno == EINTR)
            break;
        conn_break(tc, GPUPORT_ERR_TRANSPORT, "failed while receiving", errno);
        break;
    }
    return progressed;
}

/* Errors that arrive while nothing is sent or received (a keepalive that
 * went unanswered) show on the socket, not in a call's result. */
static void check_socket(tcp_conn_t *tc)
{
    int err = 0;
    socklen_t len = sizeof(err);

    if (getsockopt(tc->fd_rx, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err)
        conn_break(tc, GPUPORT_ERR_TRANSPORT, "broke", err);
}

/* The peer closed its communicator: no more signals will come from it.
 * Once what it sent is applied, this side's waiters on its channels stop
 * (signals already there can still be taken). The channels themselves stay
 * usable until this side closes too: the peer keeps receiving until this
 * side's goodbye. */
static void peer_closed(tcp_conn_t *tc)
{
    gpuport_comm_t comm = tc->comm;
    int n = 0;

    tc->bye_applied = 1;
    for (uint32_t i = 0; i < comm->config.max_channels; i++) {
        gpuport_pchan_t *ch = &comm->pchans[i];
        int32_t ok = GPUPORT_OK;
        if (!atomic_load_explicit(&ch->active, memory_order_acquire) || ch->conn->priv != tc)
            continue;
        atomic_compare_exchange_strong(&comm->ctrl[i].peer_status, &ok, GPUPORT_ERR_PEER);
        n++;
    }
    if (n)
        log_debug("tcp: rank %d closed its communicator; waits on its %d channel(s) end here",
                  tc->peer, n);
}

/* The connection broke while a channel on it was being created: it became
 * active afterwards and must fail too (fail_local is idempotent). */
static void fail_late_channels(tcp_conn_t *tc)
{
    gpuport_comm_t comm = tc->comm;

    tc->next_rescan_ns = gpuport_now_ns() + RESCAN_NS;
    for (uint32_t i = 0; i < comm->config.max_channels; i++) {
        gpuport_pchan_t *ch = &comm->pchans[i];
        if (!atomic_load_explicit(&ch->active, memory_order_acquire) || ch->conn->priv != tc ||
            atomic_load_explicit(&ch->state->status, memory_order_relaxed) != GPUPORT_OK)
            continue;
        gpuport_pchan_fail_local(ch, (gpuport_status_t)tc->fail_status);
        log_error("tcp: channel %u to rank %d was created as its connection broke; it is failed",
                  ch->id, tc->peer);
    }
}

/* Is there anything for recv_some to do: the socket is readable (or
 * cannot be asked), bytes are buffered, or a full staging piece is waiting
 * for flusher room? */
static int rx_wanted(const tcp_conn_t *tc)
{
    if (tc->readable || tc->no_epoll || tc->rx_pos < tc->rx_len)
        return 1;
    return tc->dev_payload && tc->rc_fill > 0 && (tc->rc_fill == CHUNK || tc->payload_left == 0);
}

/* Once per proxy pass, before the connections' progress: which receiving
 * sockets are readable (or in error). Level-triggered: a socket left with
 * data is reported again on the next pass. */
int gpuport_tcp_poll(gpuport_comm_t comm)
{
    struct gpuport_tcp_comm *t = comm->tcp;
    struct epoll_event ev[64];
    int n, total = 0;

    if (!t || t->epfd < 0 || atomic_load_explicit(&t->nconns, memory_order_acquire) == 0)
        return 0;
    do {
        n = epoll_wait(t->epfd, ev, 64, 0);
        for (int i = 0; i < n; i++)
            ((tcp_conn_t *)ev[i].data.ptr)->readable = 1;
        total += n > 0 ? n : 0;
    } while (n == 64 && total < 4096);
    return 0;
}

static int tcp_progress(gpuport_conn_t *conn)
{
    tcp_conn_t *tc = conn->priv;
    int n;

    if (tc->bye_seen && !tc->bye_applied && tc->rx_pending == 0)
        peer_closed(tc);
    if (tc->broken) {
        if (tc->fail_status && gpuport_now_ns() >= tc->next_rescan_ns)
            fail_late_channels(tc);
        return 0;
    }
    n = rx_wanted(tc) ? recv_some(tc) : 0;
    if (tc->txs)
        stage_tx(tc);
    queue_ack(tc);
    n += send_some(tc);
    return n;
}

static int tcp_poll_fd(gpuport_conn_t *conn)
{
    tcp_conn_t *tc = conn->priv;

    if (tc->broken)
        return -1;
    check_socket(tc);
    return tc->broken ? -1 : tc->fd_rx;
}

static int tcp_quiesce(gpuport_conn_t *conn)
{
    tcp_conn_t *tc = conn->priv;

    if (tc->broken)
        return 1;
    if (!tc->bye_sent && tx_room(tc, 1)) {
        tx_push(tc, MSG_BYE, NO_CHANNEL, 0, 0, NULL);
        tc->bye_sent = 1;
    }
    /* the peer's BYE follows every op it sent; ours must have gone out */
    return tc->bye_sent && tc->bye_seen && tc->tx_head == tc->tx_tail;
}

const gpuport_transport_ops_t gpuport_transport_tcp = {
    .name = "tcp",
    .kind = GPUPORT_TRANSPORT_TCP,
    .reachable = tcp_reachable,
    .conn_open = tcp_conn_open,
    .conn_close = tcp_conn_close,
    .chan_connect = tcp_chan_connect,
    .chan_disconnect = tcp_chan_disconnect,
    .put = tcp_put,
    .signal = tcp_signal,
    .has_room = tcp_has_room,
    .progress = tcp_progress,
    .poll_fd = tcp_poll_fd,
    .quiesce = tcp_quiesce,
    .report_fail = tcp_report_fail,
    .work_done = tcp_work_done,
};

/* For gpuport_info: where a communicator created now would listen. */
int gpuport_tcp_describe(const gpuport_config_t *cfg, char *buf, size_t len)
{
    gpuport_proc_rec_t me;
    char why[256], host[INET6_ADDRSTRLEN] = "?";

    memset(&me, 0, sizeof(me));
    if (pick_address(cfg, &me, why, sizeof(why)) != GPUPORT_OK) {
        snprintf(buf, len, "%s", why);
        return 0;
    }
    inet_ntop(me.tcp_family, me.tcp_addr, host, sizeof(host));
    snprintf(buf, len, "interface %s, address %s%s", me.tcp_ifname, host,
             cfg->socket_ifname[0] ? " (GPUPORT_SOCKET_IFNAME)" : "");
    return 1;
}
