/*
 * Descriptor passing between the ranks of one host; see fdpass.h. The
 * records on the connection are fdpass_wire.c's; here the socket, who
 * connects to whom, and whose connection is whose.
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_FDPASS
#include "fdpass.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "fdpass_wire.h"
#include "log.h"
#include "util.h"

#define BACKLOG 64
#define NAME_LEN 96

_Static_assert(NAME_LEN + 1 <= sizeof(((struct sockaddr_un *)0)->sun_path),
               "a name and the abstract namespace's NUL fit sun_path");

void gpuport_fdsock_name(char *buf, size_t len, uint64_t host_id, int pid, uint32_t serial,
                         int rank)
{
    snprintf(buf, len, "gpuport.%016llx.%d.%u.r%d", (unsigned long long)host_id, pid, serial,
             rank);
}

/* The abstract namespace (sun_path[0] = '\0'): no file to remove, and the
 * name goes away with the last descriptor of the socket, even on a crash.
 * The length is exact: abstract names are not NUL-terminated, every byte
 * passed is part of the name. */
static socklen_t sock_addr(struct sockaddr_un *sa, const char *name)
{
    size_t len = strlen(name);

    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    memcpy(sa->sun_path + 1, name, len);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len);
}

gpuport_status_t gpuport_fdsock_open(gpuport_fdsock_t *s, uint64_t host_id, int pid,
                                     uint32_t serial, int rank)
{
    char name[NAME_LEN];
    struct sockaddr_un sa;
    socklen_t sl;
    const char *call;
    int fd, err;

    memset(s, 0, sizeof(*s));
    s->lfd = -1;
    s->rank = rank;
    s->host_id = host_id;
    s->pid = pid;
    s->serial = serial;
    gpuport_fdsock_name(name, sizeof(name), host_id, pid, serial, rank);
    sl = sock_addr(&sa, name);
    fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        call = "socket(AF_UNIX, SOCK_SEQPACKET)";
        goto err_why;
    }
    if (bind(fd, (struct sockaddr *)&sa, sl) != 0) {
        call = "bind";
        goto err_close;
    }
    if (listen(fd, BACKLOG) != 0) {
        call = "listen";
        goto err_close;
    }
    s->lfd = fd;
    log_debug("rank %d listens on @%s", rank, name);
    return GPUPORT_OK;

err_close:
    err = errno;
    close(fd);
    errno = err;
err_why:
    snprintf(s->why, sizeof(s->why), "%s(@%s) failed: %s", call, name, strerror(errno));
    log_debug("rank %d has no descriptor socket: %s", rank, s->why);
    return GPUPORT_OK;
}

void gpuport_fdsock_close(gpuport_fdsock_t *s)
{
    if (s->lfd >= 0)
        close(s->lfd);
    s->lfd = -1;
    for (uint32_t i = 0; i < s->nstash; i++)
        close(s->stash[i].fd);
    free(s->stash);
    s->stash = NULL;
    s->nstash = s->cap = 0;
}

/* The kernel's record of who is at the other end: for the connector the
 * process that called listen(), for the acceptor the one that called
 * connect(). SO_PEERCRED's pid is in this process's pid namespace, so ranks
 * in different pid namespaces do not match their records. */
static int peer_cred(int fd, struct ucred *uc)
{
    socklen_t len = sizeof(*uc);

    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, uc, &len) == 0 ? 0 : errno;
}

static int cred_matches(const struct ucred *uc, const gpuport_fdpeer_t *peer)
{
    return uc->uid == getuid() && uc->uid == peer->uid && uc->pid == peer->pid;
}

/* One connect() of fd to the name: 0, or the errno of its failure. */
static int try_connect(int fd, const struct sockaddr_un *sa, socklen_t sl, uint64_t deadline)
{
    socklen_t el;
    int err;

    if (connect(fd, (const struct sockaddr *)sa, sl) == 0)
        return 0;
    err = errno;
    if (err != EINPROGRESS)
        return err;
    el = sizeof(err);
    err = fdwire_wait(fd, POLLOUT, deadline);
    if (!err && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0)
        err = errno;
    return err;
}

/* A connection that could not be made, logged with what it means. */
static gpuport_status_t connect_failed(const gpuport_fdpeer_t *peer, const char *name, int err,
                                       uint64_t tag)
{
    if (err == ETIMEDOUT) {
        log_error("rank %d's descriptor socket @%s did not take a connection before "
                  "the deadline (tag %#llx)",
                  peer->rank, name, (unsigned long long)tag);
        return GPUPORT_ERR_TIMEOUT;
    }
    if (err == ECONNREFUSED || err == ENOENT) {
        log_error("rank %d (pid %d) has no descriptor socket @%s: %s (it exited, or "
                  "could not open one; tag %#llx)",
                  peer->rank, peer->pid, name, strerror(err), (unsigned long long)tag);
        return GPUPORT_ERR_PEER;
    }
    log_error("connect to rank %d's descriptor socket @%s failed: %s (tag %#llx)", peer->rank,
              name, strerror(err), (unsigned long long)tag);
    return fdwire_status(err);
}

/* A connected socket to the peer's name, trying again while its backlog is
 * full. */
static gpuport_status_t dial(const gpuport_fdpeer_t *peer, const char *name, uint64_t tag,
                             uint64_t deadline, int *fd_p)
{
    struct sockaddr_un sa;
    socklen_t sl = sock_addr(&sa, name);
    int fd, err;

    for (;;) {
        fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) {
            err = errno;
            log_error("socket(AF_UNIX, SOCK_SEQPACKET) failed: %s (connecting to rank %d)",
                      strerror(err), peer->rank);
            return fdwire_status(err);
        }
        err = try_connect(fd, &sa, sl, deadline);
        if (!err) {
            *fd_p = fd;
            return GPUPORT_OK;
        }
        close(fd);
        if (err == EAGAIN) {
            /* The peer's backlog is full while many ranks connect at once;
             * it drains as the peer accepts. */
            int ms = gpuport_deadline_ms(deadline, 10);
            struct timespec ts = {0, (long)ms * 1000000L};

            if (ms > 0) {
                nanosleep(&ts, NULL);
                continue;
            }
            err = ETIMEDOUT;
        }
        return connect_failed(peer, name, err, tag);
    }
}

/* The greeting goes before the check of the listener's credentials: it
 * holds nothing but ranks and the tag, and an acceptor whose peer then
 * refuses it sees that peer close instead of waiting for its deadline. No
 * descriptor leaves before the check. */
static gpuport_status_t greet_listener(int fd, const gpuport_fdpeer_t *peer, const char *name,
                                       int my_rank, uint64_t tag, uint64_t deadline)
{
    struct ucred uc;
    int err;

    err = fdwire_send_hello(fd, my_rank, tag, deadline);
    if (err) {
        log_error("connected to rank %d at @%s, but sending the greeting failed: %s "
                  "(tag %#llx)",
                  peer->rank, name, strerror(err), (unsigned long long)tag);
        return fdwire_status(err);
    }
    err = peer_cred(fd, &uc);
    if (err) {
        log_error("SO_PEERCRED on the connection to rank %d failed: %s", peer->rank,
                  strerror(err));
        return GPUPORT_ERR_TRANSPORT;
    }
    if (!cred_matches(&uc, peer)) {
        log_error("the descriptor socket @%s of rank %d belongs to pid %d uid %u, "
                  "expected pid %d uid %u (this process's uid %u): not sending descriptors",
                  name, peer->rank, (int)uc.pid, (unsigned)uc.uid, peer->pid, peer->uid,
                  (unsigned)getuid());
        return GPUPORT_ERR_PEER;
    }
    return GPUPORT_OK;
}

static gpuport_status_t connect_peer(const gpuport_fdpeer_t *peer, int my_rank, uint64_t tag,
                                     uint64_t deadline, int *fd_p)
{
    char name[NAME_LEN];
    gpuport_status_t st;
    int fd = -1;

    gpuport_fdsock_name(name, sizeof(name), peer->host_id, peer->pid, peer->serial, peer->rank);
    st = dial(peer, name, tag, deadline, &fd);
    if (st != GPUPORT_OK)
        return st;
    st = greet_listener(fd, peer, name, my_rank, tag, deadline);
    if (st != GPUPORT_OK) {
        close(fd);
        return st;
    }
    *fd_p = fd;
    return GPUPORT_OK;
}

static gpuport_status_t stash_put(gpuport_fdsock_t *s, int fd, int rank, uint64_t tag)
{
    if (s->nstash == s->cap) {
        uint32_t cap = s->cap ? 2 * s->cap : 8;
        gpuport_fdstash_t *a = realloc(s->stash, cap * sizeof(*a));

        if (!a)
            return GPUPORT_ERR_NO_MEMORY;
        s->stash = a;
        s->cap = cap;
    }
    s->stash[s->nstash].fd = fd;
    s->stash[s->nstash].rank = rank;
    s->stash[s->nstash].tag = tag;
    s->nstash++;
    return GPUPORT_OK;
}

/* The connections an acceptor refused while it waited: the count and the
 * last reason, for the timeout's message. */
typedef struct {
    char last[192];
    unsigned n;
} refusals_t;

/* A refused connection is closed and the acceptor waits on for the right
 * one: anyone may connect to an abstract name. */
static void refuse(int fd, const gpuport_fdpeer_t *peer, refusals_t *r, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void refuse(int fd, const gpuport_fdpeer_t *peer, refusals_t *r, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(r->last, sizeof(r->last), fmt, ap);
    va_end(ap);
    close(fd);
    r->n++;
    log_warn("refused a descriptor connection while waiting for rank %d: %s", peer->rank,
             r->last);
}

/* The peer's connection for tag if an earlier wait kept it: 1 and *fd_p,
 * else 0. Kept ones of the peer whose credentials do not match are
 * refused. */
static int stash_take(gpuport_fdsock_t *s, const gpuport_fdpeer_t *peer, uint64_t tag,
                      refusals_t *r, int *fd_p)
{
    struct ucred uc;
    int fd, err;

    for (uint32_t i = 0; i < s->nstash;) {
        if (s->stash[i].rank != peer->rank || s->stash[i].tag != tag) {
            i++;
            continue;
        }
        fd = s->stash[i].fd;
        s->stash[i] = s->stash[--s->nstash];
        if ((err = peer_cred(fd, &uc)) != 0)
            refuse(fd, peer, r, "SO_PEERCRED failed: %s", strerror(err));
        else if (!cred_matches(&uc, peer))
            refuse(fd, peer, r,
                   "one kept from earlier came from pid %d uid %u, expected pid %d uid %u",
                   (int)uc.pid, (unsigned)uc.uid, peer->pid, peer->uid);
        else {
            *fd_p = fd;
            return 1;
        }
    }
    return 0;
}

/* The next connection on the listening socket; GPUPORT_ERR_TIMEOUT, not
 * logged, at the deadline. */
static gpuport_status_t accept_next(gpuport_fdsock_t *s, const gpuport_fdpeer_t *peer,
                                    uint64_t deadline, int *fd_p)
{
    for (;;) {
        int fd, err = fdwire_wait(s->lfd, POLLIN, deadline);

        if (err == ETIMEDOUT)
            return GPUPORT_ERR_TIMEOUT;
        if (err) {
            log_error("poll on the descriptor socket failed: %s (waiting for rank %d)",
                      strerror(err), peer->rank);
            return GPUPORT_ERR_TRANSPORT;
        }
        fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd >= 0) {
            *fd_p = fd;
            return GPUPORT_OK;
        }
        err = errno;
        if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR || err == ECONNABORTED)
            continue;
        log_error("accept on the descriptor socket failed: %s (waiting for rank %d)",
                  strerror(err), peer->rank);
        return fdwire_status(err);
    }
}

/* A new connection's greeting, from a process of this user that says it is
 * a rank that connects to this one: 0 with *h and *uc; else fd is closed and
 * the result is ETIMEDOUT (the deadline passed) or -1 (refused). */
static int greeting_of(const gpuport_fdsock_t *s, const gpuport_fdpeer_t *peer, int fd,
                       uint64_t deadline, refusals_t *r, fdwire_hello_t *h, struct ucred *uc)
{
    int err;

    /* Its uid now, before reading anything; its pid once the greeting says
     * whose it is. */
    if ((err = peer_cred(fd, uc)) != 0) {
        refuse(fd, peer, r, "SO_PEERCRED failed: %s", strerror(err));
        return -1;
    }
    if (uc->uid != getuid()) {
        refuse(fd, peer, r, "it came from pid %d uid %u, expected uid %u", (int)uc->pid,
               (unsigned)uc->uid, (unsigned)getuid());
        return -1;
    }
    err = fdwire_recv_hello(fd, h, deadline);
    if (err == ETIMEDOUT) {
        close(fd);
        return ETIMEDOUT;
    }
    if (err == EPROTO) {
        refuse(fd, peer, r, "pid %d sent no descriptor-exchange greeting of version %u",
               (int)uc->pid, FDWIRE_VERSION);
        return -1;
    }
    if (err) {
        refuse(fd, peer, r, "pid %d closed it before its greeting (%s)", (int)uc->pid,
               err == ECONNRESET ? "end of file" : strerror(err));
        return -1;
    }
    if (h->rank < 0 || h->rank >= s->rank) {
        refuse(fd, peer, r, "pid %d says it is rank %d, which does not connect to rank %d",
               (int)uc->pid, h->rank, s->rank);
        return -1;
    }
    return 0;
}

static gpuport_status_t accept_timeout(const gpuport_fdpeer_t *peer, uint64_t tag,
                                       const refusals_t *r)
{
    if (r->n)
        log_error("rank %d (pid %d) did not connect for the descriptor exchange (tag "
                  "%#llx) before the deadline; refused %u connection(s), the last: %s",
                  peer->rank, peer->pid, (unsigned long long)tag, r->n, r->last);
    else
        log_error("rank %d (pid %d) did not connect for the descriptor exchange (tag "
                  "%#llx) before the deadline",
                  peer->rank, peer->pid, (unsigned long long)tag);
    return GPUPORT_ERR_TIMEOUT;
}

/* The peer's connection for tag. Connections of other ranks of this host
 * (their exchanges with this rank come later) are kept for those. */
static gpuport_status_t accept_peer(gpuport_fdsock_t *s, const gpuport_fdpeer_t *peer,
                                    uint64_t tag, uint64_t deadline, int *fd_p)
{
    refusals_t r = {"", 0};
    gpuport_status_t st;
    int fd = -1, err;

    if (stash_take(s, peer, tag, &r, fd_p))
        return GPUPORT_OK;
    for (;;) {
        fdwire_hello_t h;
        struct ucred uc;

        st = accept_next(s, peer, deadline, &fd);
        if (st == GPUPORT_ERR_TIMEOUT)
            return accept_timeout(peer, tag, &r);
        if (st != GPUPORT_OK)
            return st;
        err = greeting_of(s, peer, fd, deadline, &r, &h, &uc);
        if (err == ETIMEDOUT)
            return accept_timeout(peer, tag, &r);
        if (err)
            continue;
        if (h.rank == peer->rank && h.tag == tag) {
            if (!cred_matches(&uc, peer)) {
                refuse(fd, peer, &r, "it came from pid %d uid %u, expected pid %d uid %u",
                       (int)uc.pid, (unsigned)uc.uid, peer->pid, peer->uid);
                continue;
            }
            *fd_p = fd;
            return GPUPORT_OK;
        }
        if (stash_put(s, fd, h.rank, h.tag) != GPUPORT_OK) {
            log_error("no memory to keep rank %d's connection (tag %#llx) while waiting "
                      "for rank %d",
                      h.rank, (unsigned long long)h.tag, peer->rank);
            close(fd);
            return GPUPORT_ERR_NO_MEMORY;
        }
        log_debug("kept rank %d's connection (tag %#llx) while waiting for rank %d", h.rank,
                  (unsigned long long)h.tag, peer->rank);
    }
}

/* With this rank itself: the same descriptors under new numbers, so that
 * the caller may close either set. */
static gpuport_status_t dup_pieces(const gpuport_fdpiece_t *mine, uint32_t n,
                                   gpuport_fdpiece_t **theirs_p, uint32_t *m_p)
{
    gpuport_fdpiece_t *p = NULL;
    uint32_t i;
    int err;

    if (n > 0 && !(p = calloc(n, sizeof(*p)))) {
        log_error("no memory for %u pieces", n);
        return GPUPORT_ERR_NO_MEMORY;
    }
    for (i = 0; i < n; i++) {
        p[i] = mine[i];
        p[i].reserved = 0;
        p[i].fd = fcntl(mine[i].fd, F_DUPFD_CLOEXEC, 0);
        if (p[i].fd < 0) {
            err = errno;
            log_error("duplicating piece %u's descriptor %d failed: %s (exchange with "
                      "this rank itself)",
                      i, mine[i].fd, strerror(err));
            goto err_close;
        }
    }
    *theirs_p = p;
    *m_p = n;
    return GPUPORT_OK;

err_close:
    gpuport_fdpieces_free(p, i);
    return fdwire_status(err);
}

/* How long the acceptor waits for the connector's close: at most a second,
 * and never past the exchange's deadline (0: none). */
static uint64_t close_deadline(uint64_t deadline_ns)
{
    uint64_t soon = gpuport_deadline(1000000000ull);

    return deadline_ns < soon ? deadline_ns : soon;
}

gpuport_status_t gpuport_fdsock_exchange(gpuport_fdsock_t *s, const gpuport_fdpeer_t *peer,
                                         uint64_t tag, const gpuport_fdpiece_t *mine, uint32_t n,
                                         gpuport_fdpiece_t **theirs_p, uint32_t *m_p,
                                         uint64_t deadline_ns)
{
    gpuport_fdpiece_t *theirs = NULL;
    gpuport_status_t st;
    uint32_t m = 0;
    int fd = -1;

    if (!s || !peer || (n > 0 && !mine) || !theirs_p || !m_p) {
        log_error("exchange called with a NULL argument");
        return GPUPORT_ERR_INVALID_ARG;
    }
    if (n > GPUPORT_FDPASS_MAX_PIECES) {
        log_error("%u pieces for rank %d, more than GPUPORT_FDPASS_MAX_PIECES (%u)", n,
                  peer->rank, GPUPORT_FDPASS_MAX_PIECES);
        return GPUPORT_ERR_INVALID_ARG;
    }
    if (peer->rank == s->rank)
        return dup_pieces(mine, n, theirs_p, m_p);
    /* The connector sends first and the acceptor receives first, so
     * neither waits on the other with both send queues full. */
    if (s->rank < peer->rank) {
        st = connect_peer(peer, s->rank, tag, deadline_ns, &fd);
        if (st != GPUPORT_OK)
            return st;
        st = fdwire_send_pieces(fd, peer, tag, mine, n, deadline_ns);
        if (st != GPUPORT_OK)
            goto err_close;
        st = fdwire_recv_pieces(fd, peer, tag, deadline_ns, &theirs, &m);
        if (st != GPUPORT_OK)
            goto err_close;
    } else {
        if (s->lfd < 0) {
            log_error("rank %d cannot take rank %d's descriptors: it has no descriptor "
                      "socket (%s)",
                      s->rank, peer->rank, s->why);
            return GPUPORT_ERR_NOT_SUPPORTED;
        }
        st = accept_peer(s, peer, tag, deadline_ns, &fd);
        if (st != GPUPORT_OK)
            return st;
        st = fdwire_recv_pieces(fd, peer, tag, deadline_ns, &theirs, &m);
        if (st != GPUPORT_OK)
            goto err_close;
        st = fdwire_send_pieces(fd, peer, tag, mine, n, deadline_ns);
        if (st != GPUPORT_OK)
            goto err_free;
        /* sent last: close only after the connector, which closes once it
         * has read them (fdwire_await_close says why) */
        if (fdwire_await_close(fd, close_deadline(deadline_ns)) > 0)
            log_warn("rank %d sent more after its pieces (tag %#llx); ignored",
                     peer->rank, (unsigned long long)tag);
    }
    close(fd);
    *theirs_p = theirs;
    *m_p = m;
    return GPUPORT_OK;

err_free:
    gpuport_fdpieces_free(theirs, m);
err_close:
    close(fd);
    return st;
}
