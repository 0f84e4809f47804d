/* The descriptor exchange's records; see fdpass_wire.h. */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_FDPASS
#include "fdpass_wire.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

#define PER_MSG FDWIRE_PIECES_PER_MSG

typedef struct fdwire_msg {
    fdwire_head_t h;
    fdwire_piece_t p[PER_MSG];
} fdwire_msg_t;

typedef union fdwire_ctl {
    struct cmsghdr align;
    char buf[CMSG_SPACE(PER_MSG * sizeof(int))];
} fdwire_ctl_t;

_Static_assert(sizeof(fdwire_hello_t) == 24, "hello is 24 bytes on the wire");
_Static_assert(sizeof(fdwire_msg_t) == 16 + PER_MSG * 16, "pieces message layout");

int fdwire_wait(int fd, short events, uint64_t deadline)
{
    struct pollfd pf = {fd, events, 0};

    for (;;) {
        /* at most a second at a time, so that a wait without deadline
         * still comes round */
        int ms = gpuport_deadline_ms(deadline, 1000), r;

        if (ms == 0)
            return ETIMEDOUT;
        r = poll(&pf, 1, ms);
        if (r > 0)
            return 0;
        if (r < 0 && errno != EINTR)
            return errno;
    }
}

gpuport_status_t fdwire_status(int err)
{
    switch (err) {
    case ETIMEDOUT:
        return GPUPORT_ERR_TIMEOUT;
    case ECONNRESET:
    case EPIPE:
        return GPUPORT_ERR_PEER;
    case ENOMEM:
        return GPUPORT_ERR_NO_MEMORY;
    case EMFILE:
    case ENFILE:
        return GPUPORT_ERR_NO_RESOURCE;
    case EBADF:
        return GPUPORT_ERR_INVALID_ARG;
    default:
        return GPUPORT_ERR_TRANSPORT;
    }
}

/* Here rather than in fdpass.c, which uses this file: the arrays of pieces
 * are made here, and the core's link graph stays free of cycles. */
void gpuport_fdpieces_free(gpuport_fdpiece_t *p, uint32_t n)
{
    for (uint32_t i = 0; p && i < n; i++)
        if (p[i].fd >= 0)
            close(p[i].fd);
    free(p);
}

/* After a send or receive on the non-blocking fd failed with errno: 0 to
 * try again (interrupted, or fd ready for events now), else the errno to
 * give up with (ETIMEDOUT at the deadline). */
static int io_again(int fd, short events, uint64_t deadline)
{
    if (errno == EINTR)
        return 0;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
        return errno;
    return fdwire_wait(fd, events, deadline);
}

/* A seqpacket record goes whole or not at all: no partial send to resume. */
static int send_rec(int fd, const struct msghdr *mh, uint64_t deadline)
{
    for (;;) {
        int err;

        if (sendmsg(fd, mh, MSG_NOSIGNAL) >= 0)
            return 0;
        err = io_again(fd, POLLOUT, deadline);
        if (err)
            return err;
    }
}

/* One record of at most len bytes and the descriptors that came with it
 * (*nfds_p of them in fds, which the caller then owns); *flags_p has
 * MSG_TRUNC or MSG_CTRUNC where something did not fit. ECONNRESET: the
 * peer closed. On an error nothing was received. */
static int recv_rec(int fd, void *buf, size_t len, int *fds, int *nfds_p, int *flags_p,
                    size_t *got_p, uint64_t deadline)
{
    fdwire_ctl_t ctl;
    struct iovec iov = {buf, len};
    struct msghdr mh;
    struct cmsghdr *cm;
    ssize_t n;
    int nfds = 0, extra = 0;

    for (;;) {
        int err;

        memset(&mh, 0, sizeof(mh));
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        mh.msg_control = ctl.buf;
        mh.msg_controllen = sizeof(ctl.buf);
        n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
        if (n >= 0)
            break;
        err = io_again(fd, POLLIN, deadline);
        if (err)
            return err;
    }
    /* The kernel installs descriptors whatever the record (malformed,
     * empty): collect every one, so that they can be closed. */
    for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
        size_t k;

        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
            continue;
        k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
            int f;

            memcpy(&f, CMSG_DATA(cm) + i * sizeof(int), sizeof(f));
            if (nfds < PER_MSG) {
                fds[nfds++] = f;
            } else {
                close(f);
                extra = 1;
            }
        }
    }
    if (n == 0 && nfds == 0)
        return ECONNRESET;
    *nfds_p = nfds;
    *flags_p = mh.msg_flags | (extra ? MSG_CTRUNC : 0);
    *got_p = (size_t)n;
    return 0;
}

static void close_all(const int *fds, int n)
{
    for (int i = 0; i < n; i++)
        close(fds[i]);
}

int fdwire_await_close(int fd, uint64_t deadline)
{
    int records = 0;

    for (;;) {
        int fds[PER_MSG], nfds = 0, flags = 0;
        size_t got = 0;
        fdwire_msg_t msg;
        int err = recv_rec(fd, &msg, sizeof(msg), fds, &nfds, &flags, &got, deadline);

        if (err)
            return records; /* closed (ECONNRESET is recv_rec's end of stream), or the wait
                               ran out */
        close_all(fds, nfds);
        records++;
    }
}

int fdwire_send_hello(int fd, int rank, uint64_t tag, uint64_t deadline)
{
    fdwire_hello_t h;
    struct iovec iov = {&h, sizeof(h)};
    struct msghdr mh;

    memset(&h, 0, sizeof(h));
    h.magic = FDWIRE_HELLO_MAGIC;
    h.version = FDWIRE_VERSION;
    h.rank = rank;
    h.tag = tag;
    memset(&mh, 0, sizeof(mh));
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    return send_rec(fd, &mh, deadline);
}

int fdwire_recv_hello(int fd, fdwire_hello_t *h, uint64_t deadline)
{
    int fds[PER_MSG], nfds = 0, flags = 0, err;
    size_t got = 0;

    err = recv_rec(fd, h, sizeof(*h), fds, &nfds, &flags, &got, deadline);
    if (err)
        return err;
    close_all(fds, nfds);
    if (got != sizeof(*h) || nfds > 0 || (flags & (MSG_TRUNC | MSG_CTRUNC)) ||
        h->magic != FDWIRE_HELLO_MAGIC || h->version != FDWIRE_VERSION)
        return EPROTO;
    return 0;
}

gpuport_status_t fdwire_send_pieces(int fd, const gpuport_fdpeer_t *peer, uint64_t tag,
                                    const gpuport_fdpiece_t *mine, uint32_t n, uint64_t deadline)
{
    fdwire_ctl_t ctl;
    fdwire_msg_t msg;
    uint32_t i = 0, c;
    int err;

    do {
        struct iovec iov;
        struct msghdr mh;

        c = n - i < PER_MSG ? n - i : PER_MSG;
        memset(&msg.h, 0, sizeof(msg.h));
        msg.h.magic = FDWIRE_PIECES_MAGIC;
        msg.h.total = n;
        msg.h.count = c;
        iov.iov_base = &msg;
        iov.iov_len = sizeof(msg.h) + c * sizeof(msg.p[0]);
        memset(&mh, 0, sizeof(mh));
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        if (c > 0) {
            struct cmsghdr *cm;

            memset(&ctl, 0, sizeof(ctl));
            mh.msg_control = ctl.buf;
            mh.msg_controllen = CMSG_SPACE(c * sizeof(int));
            cm = CMSG_FIRSTHDR(&mh);
            cm->cmsg_level = SOL_SOCKET;
            cm->cmsg_type = SCM_RIGHTS;
            cm->cmsg_len = CMSG_LEN(c * sizeof(int));
            for (uint32_t k = 0; k < c; k++) {
                msg.p[k].size = mine[i + k].size;
                msg.p[k].offset = mine[i + k].offset;
                memcpy(CMSG_DATA(cm) + k * sizeof(int), &mine[i + k].fd, sizeof(int));
            }
        }
        err = send_rec(fd, &mh, deadline);
        if (err)
            goto err_log;
        i += c;
    } while (i < n);
    return GPUPORT_OK;

err_log:
    if (err == ECONNRESET || err == EPIPE)
        log_error("rank %d closed the descriptor connection before receiving this "
                  "rank's pieces (tag %#llx, %u of %u sent)",
                  peer->rank, (unsigned long long)tag, i, n);
    else if (err == ETIMEDOUT)
        log_error("rank %d did not take this rank's pieces before the deadline (tag "
                  "%#llx, %u of %u sent)",
                  peer->rank, (unsigned long long)tag, i, n);
    else if (err == EBADF)
        log_error("a descriptor among pieces %u..%u for rank %d is not open (tag %#llx)",
                  i, i + c - 1, peer->rank, (unsigned long long)tag);
    else
        log_error("sending pieces to rank %d failed: %s (tag %#llx, %u of %u sent)",
                  peer->rank, strerror(err), (unsigned long long)tag, i, n);
    return fdwire_status(err);
}

/* Why the bytes of a pieces message are malformed, or NULL. `first`: no
 * message came before it, so its total is not known yet. */
static const char *malformed(const fdwire_msg_t *msg, size_t got, int flags, int first,
                             uint32_t total, uint32_t have)
{
    if (flags & MSG_TRUNC)
        return "a record longer than a pieces message";
    if (got < sizeof(msg->h) || msg->h.magic != FDWIRE_PIECES_MAGIC)
        return "a record that is not a pieces message";
    if (first && msg->h.total > GPUPORT_FDPASS_MAX_PIECES)
        return "more pieces than GPUPORT_FDPASS_MAX_PIECES";
    if (!first && msg->h.total != total)
        return "a total that differs from its first message's";
    if (msg->h.count > PER_MSG || msg->h.count > msg->h.total - have ||
        (msg->h.count == 0 && msg->h.total != 0))
        return "a piece count out of range";
    if (got != sizeof(msg->h) + msg->h.count * sizeof(msg->p[0]))
        return "a length that does not match its piece count";
    for (uint32_t k = 0; k < msg->h.count; k++)
        if (msg->p[k].offset + msg->p[k].size < msg->p[k].offset)
            return "a piece whose offset plus size wraps";
    return NULL;
}

/* A pieces message that did not arrive, logged with how far the receiver
 * got. */
static gpuport_status_t recv_failed(const gpuport_fdpeer_t *peer, uint64_t tag, int err, int first,
                                    uint32_t have, uint32_t total)
{
    char so_far[64] = "";

    if (!first)
        snprintf(so_far, sizeof(so_far), ", %u of its %u received", have, total);
    if (err == ECONNRESET)
        log_error("rank %d closed the descriptor connection before sending its "
                  "pieces (tag %#llx%s)",
                  peer->rank, (unsigned long long)tag, so_far);
    else if (err == ETIMEDOUT)
        log_error("rank %d did not send its pieces before the deadline (tag "
                  "%#llx%s)",
                  peer->rank, (unsigned long long)tag, so_far);
    else
        log_error("receiving pieces from rank %d failed: %s (tag %#llx%s)", peer->rank,
                  strerror(err), (unsigned long long)tag, so_far);
    return fdwire_status(err);
}

/* A received pieces message checked, its descriptors included; on failure
 * they are closed and the failure logged. */
static gpuport_status_t msg_check(const gpuport_fdpeer_t *peer, uint64_t tag,
                                  const fdwire_msg_t *msg, size_t got, int flags, int *fds,
                                  int nfds, int first, uint32_t total, uint32_t have)
{
    const char *bad = malformed(msg, got, flags, first, total, have);

    if (!bad && (flags & MSG_CTRUNC) && (uint32_t)nfds < msg->h.count) {
        /* Room was there for PER_MSG: fewer arrived because installing
         * them failed here. */
        struct rlimit rl = {0, 0};

        getrlimit(RLIMIT_NOFILE, &rl);
        log_error("descriptors from rank %d were cut off (%d of %u arrived; this "
                  "process may be at its open-file limit, RLIMIT_NOFILE %llu; tag %#llx)",
                  peer->rank, nfds, msg->h.count, (unsigned long long)rl.rlim_cur,
                  (unsigned long long)tag);
        close_all(fds, nfds);
        return GPUPORT_ERR_NO_RESOURCE;
    }
    if (!bad && ((flags & MSG_CTRUNC) || (uint32_t)nfds != msg->h.count))
        bad = "a descriptor count that does not match its piece count";
    if (bad) {
        log_error("rank %d sent a malformed pieces message: %s (tag %#llx, %zu "
                  "bytes, %d descriptors, after %u of its pieces)",
                  peer->rank, bad, (unsigned long long)tag, got, nfds, have);
        close_all(fds, nfds);
        return GPUPORT_ERR_PEER;
    }
    return GPUPORT_OK;
}

gpuport_status_t fdwire_recv_pieces(int fd, const gpuport_fdpeer_t *peer, uint64_t tag,
                                    uint64_t deadline, gpuport_fdpiece_t **theirs_p,
                                    uint32_t *m_p)
{
    gpuport_fdpiece_t *p = NULL;
    uint32_t total = 0, have = 0;
    int first = 1, fds[PER_MSG];
    gpuport_status_t st;
    fdwire_msg_t msg;

    do {
        int nfds = 0, flags = 0, err;
        size_t got = 0;

        err = recv_rec(fd, &msg, sizeof(msg), fds, &nfds, &flags, &got, deadline);
        if (err) {
            st = recv_failed(peer, tag, err, first, have, total);
            goto err_free;
        }
        st = msg_check(peer, tag, &msg, got, flags, fds, nfds, first, total, have);
        if (st != GPUPORT_OK)
            goto err_free;
        if (first) {
            first = 0;
            total = msg.h.total;
            if (total > 0 && !(p = calloc(total, sizeof(*p)))) {
                log_error("no memory for %u pieces from rank %d", total, peer->rank);
                close_all(fds, nfds);
                st = GPUPORT_ERR_NO_MEMORY;
                goto err_free;
            }
        }
        for (uint32_t k = 0; k < msg.h.count; k++, have++) {
            p[have].fd = fds[k];
            p[have].reserved = 0;
            p[have].size = msg.p[k].size;
            p[have].offset = msg.p[k].offset;
        }
    } while (have < total);
    *theirs_p = p;
    *m_p = total;
    return GPUPORT_OK;

err_free:
    gpuport_fdpieces_free(p, have);
    return st;
}
