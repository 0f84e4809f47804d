/*
 * tcp: receiving (proxy thread): headers, payloads written in place or
 * through rx staging for GPU destinations, values, signals,
 * acknowledgements, and the end of the stream. A waiting host thread's own
 * receive (GPUPORT_HOST_INLINE) is tcp_hrx.c; get, atomic_add and
 * accumulate's messages are tcp_rma.c's.
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_TL(GPUPORT_TL_KIND_TCP)
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "transport/tcp/tcp_priv.h"

/* A VALUE: stored like a PUT of its 8 bytes would be written. A host
 * destination takes a release store now, as a put's payload is copied now
 * whatever GPU copies of other channels are still queued (the ACK count
 * waits for those). A GPU destination needs the flusher: a CU_WRITE on the
 * stream of this connection's staging copies, which orders it after every
 * earlier piece (copying the 8 bytes through an rx staging piece would order
 * it the same, but takes a piece and needs piece accounting for nothing); the
 * caller checked flusher room for it. */
static void on_value(tcp_conn_t *tc, const tcp_msg_t *m)
{
    gpuport_tl_chan_t *ch = tcp_rx_channel(tc, m->channel);
    gpuport_work_t w;
    char *dst;

    if (!ch) {
        log_error("rank %d put a value on channel %u, which is not open here; dropped",
                  tc->peer, m->channel);
        tcp_rx_op_done(tc);
        return;
    }
    if (m->a % 8 || m->a > ch->local_dst.size || ch->local_dst.size - m->a < 8) {
        log_error("rank %d put a value at offset %llu on channel %u, %s its %llu-byte "
                  "destination; discarded, the channel is failed",
                  tc->peer, (unsigned long long)m->a, m->channel,
                  m->a % 8 ? "not 8-byte aligned in" : "outside",
                  (unsigned long long)ch->local_dst.size);
        gpuport_tl_chan_fail(ch, m->a % 8 ? GPUPORT_ERR_INVALID_ARG : GPUPORT_ERR_OUT_OF_RANGE);
        tcp_rx_op_done(tc);
        return;
    }
    dst = (char *)ch->local_dst.ptr + m->a;
    memset(&w, 0, sizeof(w));
    w.dst = dst;
    w.value = m->value;
    if (gpuport_region_is_device(ch->local_dst.kind)) {
        if ((uintptr_t)dst & 7) {
            log_error("rank %d put a value on channel %u, whose GPU destination starts at "
                      "an address that is not 8-byte aligned (a GPU write of a value needs "
                      "one); discarded, the channel is failed",
                      tc->peer, m->channel);
            gpuport_tl_chan_fail(ch, GPUPORT_ERR_INVALID_ARG);
            tcp_rx_op_done(tc);
            return;
        }
        w.kind = GPUPORT_WORK_CU_WRITE;
        if (ch->local_dst.kind == GPUPORT_REGION_DEVICE_POOL)
            w.flags = GPUPORT_WORK_VALUE_COPY;
        if (!gpuport_tl_post(tc->conn, &w)) {
            tcp_conn_break(tc, GPUPORT_ERR_INTERNAL, "found the flusher full after checking it "
                           "had room for a value", 0);
            return;
        }
        tc->rx_ops++;
        tcp_post_push(tc, POST_RX_VALUE, tc->rx_ops);
        tc->rx_pending++;
        return;
    }
    w.kind = GPUPORT_WORK_STORE64; /* as shm stores a value, on this thread */
    gpuport_tl_work_execute(&w);
    tcp_rx_op_done(tc);
}

/* 1 if the next header must wait before it is taken: for room, as behind
 * GPU copies any header may go to the flusher, and a VALUE may at any time;
 * a GET's answer goes into the send ring (where the peer's GETs in flight
 * always fit beside this side's operations when both use one
 * GPUPORT_SOCKET_QUEUE; with another, the ring drains as the peer reads);
 * or for the flusher to copy out of GPU memory the answers still to be
 * read from where it writes (tcp_snap.c: only the flusher, never the peer,
 * is waited for). */
static int next_waits(tcp_conn_t *tc)
{
    tcp_msg_t m;

    memset(&m, 0, sizeof(m));
    if (tc->rx_len - tc->rx_pos >= sizeof(tcp_msg_t))
        memcpy(&m, tc->rxbuf + tc->rx_pos, sizeof(m));
    if ((tc->rx_pending || m.type == MSG_VALUE) &&
        (tcp_post_full(tc) || !gpuport_tl_flusher_room(tc->comm, 1)))
        return 1;
    if (m.type == MSG_GET && !tcp_tx_room(tc, 1))
        return 1;
    return (m.type || tc->snapping) && tcp_snap_wait(tc, &m);
}

/* A PUT's header: where its payload goes (host memory, a GPU destination
 * through rx staging, or nowhere when it is discarded). */
static void on_put(tcp_conn_t *tc, const tcp_msg_t *m)
{
    gpuport_tl_chan_t *ch = tcp_rx_channel(tc, m->channel);

    tc->in_payload = m->size > 0;
    tc->pay_type = MSG_PUT;
    tc->payload_left = m->size;
    tc->big_puts = m->size >= DIRECT_MIN;
    tc->payload_dst = NULL;
    tc->dev_payload = 0;
    if (!ch) {
        log_error("rank %d put %llu bytes on channel %u, which is not open here; "
                  "discarded",
                  tc->peer, (unsigned long long)m->size, m->channel);
    } else if (m->a > ch->local_dst.size || m->size > ch->local_dst.size - m->a) {
        log_error("rank %d put %llu bytes at offset %llu on channel %u, outside its "
                  "%llu-byte destination; discarded, the channel is failed",
                  tc->peer, (unsigned long long)m->size, (unsigned long long)m->a, m->channel,
                  (unsigned long long)ch->local_dst.size);
        gpuport_tl_chan_fail(ch, GPUPORT_ERR_OUT_OF_RANGE);
    } else if (!tc->in_payload) {
        /* empty: nothing to write, maybe no region to point into (NULL + 0) */
    } else if (gpuport_region_is_device(ch->local_dst.kind)) {
        tc->dev_payload = tc->in_payload;
        tc->dev_dst = (char *)ch->local_dst.ptr + m->a;
    } else {
        tc->payload_dst = (char *)ch->local_dst.ptr + m->a;
    }
    if (!tc->in_payload)
        tcp_rx_op_done(tc);
}

/* A SIGNAL: added now, or behind GPU copies still at the flusher (room was
 * checked). */
static void on_signal(tcp_conn_t *tc, const tcp_msg_t *m)
{
    gpuport_tl_chan_t *ch = tcp_rx_channel(tc, m->channel);
    gpuport_work_t w;

    tc->signal_unacked = 1; /* its ACK may wait for an answer (tcp_queue_ack) */
    tc->ack_now |= tc->ops_acked != tc->ops_sent;

    if (m->a == 0) {
        tcp_protocol_error(tc, "a signal message for channel %llu carried no signal (count "
                           "%llu)",
                           m->channel, m->a);
        return;
    }
    if (!ch) {
        log_error("rank %d signalled channel %u, which is not open here; dropped", tc->peer,
                  m->channel);
        tcp_rx_op_done(tc);
    } else if (tc->rx_pending) {
        memset(&w, 0, sizeof(w));
        w.kind = GPUPORT_WORK_SEM_ADD;
        w.sem = &gpuport_tl_sem(tc->comm, m->channel)->value;
        w.value = m->a;
        gpuport_tl_post(tc->conn, &w);
        tc->rx_ops++;
        tcp_post_push(tc, POST_RX_SIGNAL, tc->rx_ops);
        tc->rx_pending++;
    } else {
        gpuport_tl_sem_add(tc->comm, m->channel, m->a);
        tcp_rx_op_done(tc);
    }
}

/* A FAIL: only of a channel open on this connection; any other id is
 * another peer's channel, or one closed (and its id reused) since. Its
 * status must be one of gpuport's errors: any other word, cast, could read
 * as GPUPORT_OK (1 << 32), and the failure would be lost. */
static void on_fail(tcp_conn_t *tc, const tcp_msg_t *m)
{
    if (!gpuport_status_is_error((int64_t)m->a)) {
        char msg[160];
        snprintf(msg, sizeof(msg), "reported a failure of channel %u with status %lld (FAIL's "
                 "status field), which is no gpuport error",
                 m->channel, (long long)m->a);
        tcp_protocol_break(tc, msg);
        return;
    }
    if (tcp_rx_channel(tc, m->channel))
        gpuport_tl_sem_fail(tc->comm, m->channel, (gpuport_status_t)(int64_t)m->a);
    else
        log_error("rank %d reported a failure of channel %u, which is not open here; "
                  "dropped",
                  tc->peer, m->channel);
}

/* A whole header is in cur: act on it, or start its payload. */
void tcp_on_header(tcp_conn_t *tc)
{
    const tcp_msg_t *m = &tc->cur;

    if (tc->answers_in_place && (m->type == MSG_PUT || m->type == MSG_VALUE ||
                                 m->type == MSG_ADD || m->type == MSG_ACC))
        tcp_rma_guard(tc, m);
    switch (m->type) {
    case MSG_PUT:
        on_put(tc, m);
        return;
    case MSG_SIGNAL:
        on_signal(tc, m);
        return;
    case MSG_VALUE:
        on_value(tc, m);
        return;
    case MSG_GET:
    case MSG_GET_DATA:
    case MSG_ADD:
    case MSG_ACC:
        tcp_rma_header(tc, m);
        return;
    case MSG_ACK:
        tcp_apply_acks(tc, m->a);
        return;
    case MSG_FAIL:
        on_fail(tc, m);
        return;
    case MSG_BYE:
        tc->bye_seen = 1;
        return;
    default:
        tcp_protocol_error(tc, "sent message type %llu (size %llu)", m->type, m->size);
    }
}

void tcp_payload_done(tcp_conn_t *tc, uint64_t n)
{
    tc->payload_left -= n;
    if (tc->pay_type == MSG_ACC)
        tcp_acc_take(tc, n);
    else if (tc->payload_dst)
        tc->payload_dst += n;
    if (tc->payload_left == 0) {
        tc->in_payload = 0;
        /* a GET_DATA is the answer to an operation of this side's, not one */
        if (tc->pay_type == MSG_GET_DATA)
            tcp_get_data_done(tc);
        else
            tcp_rx_op_done(tc);
    }
}

static void rx_closed(tcp_conn_t *tc)
{
    tcp_conn_end(tc, GPUPORT_ERR_PEER, "was closed by the peer without goodbye (process exited?)",
                 0);
}

int tcp_rx_lowat(uint64_t rest, uint64_t max)
{
    uint64_t half = rest / 2;

    if (half < DIRECT_MIN || max < DIRECT_MIN)
        return 1;
    return (int)(half < max ? half : max);
}

/* The socket has nothing more for now: the next pass's epoll_wait (or the
 * idle proxy's ppoll) says when it has. In a payload with `rest` bytes
 * still to come, not before half of them (at most GPUPORT_SOCKET_RCVLOWAT)
 * are there: the kernel holds the wake-up (SO_RCVLOWAT, which poll and
 * epoll honour; a recv with MSG_DONTWAIT still returns what is there), so
 * each recv takes a large piece instead of the 64 KiB or so that loopback
 * delivers at a time. Measured on 16 cores (docs/PERFORMANCE.md): host
 * bandwidth from 1 MiB up 10-35 % higher, GPU memory over tcp a third. Half,
 * not all of the rest: the first half is copied out while the second is
 * still coming, which keeps one large message's latency (waiting for all of
 * it made a 1 MiB ping-pong 50 % slower). The rest is always sent (a
 * payload is never cut), and a socket that closes or fails is readable
 * whatever the mark, so the wait cannot outlast the peer; Linux also
 * reports a socket readable below its mark under memory pressure. Outside
 * a large payload any byte will do: the next header may be all there is. */
static void rx_wait_for(tcp_conn_t *tc, uint64_t rest)
{
    int want = tcp_rx_lowat(rest, tc->lowat_max);

    tc->readable = 0;
    if (want == tc->rx_lowat || (tc->rx_lowat == 0 && want == 1))
        return;
    if (setsockopt(tc->fd_rx, SOL_SOCKET, SO_RCVLOWAT, &want, sizeof(want)) != 0) {
        /* a mark left high would hide the next header from epoll */
        tcp_conn_break(tc, GPUPORT_ERR_TRANSPORT, "could not set SO_RCVLOWAT", errno);
        return;
    }
    tc->rx_lowat = want;
    if (want > 1)
        __atomic_fetch_add(&tc->lowat_raised, 1, __ATOMIC_RELAXED);
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
                    rx_wait_for(tc, want);
                    return 0;
                }
                if (errno == EINTR)
                    return 0;
                tcp_conn_end(tc, GPUPORT_ERR_TRANSPORT, "failed while receiving", errno);
                return -1;
            }
        }
        tc->rc_fill += (uint64_t)got;
        tc->payload_left -= (uint64_t)got;
        *budget -= (uint64_t)got < *budget ? (uint64_t)got : *budget;
        if (tc->rc_fill < target)
            return 1;
    }
    if (tcp_post_full(tc))
        return 0;
    memset(&w, 0, sizeof(w));
    w.kind = GPUPORT_WORK_CU_TO_DEVICE;
    w.dst = tc->dev_dst;
    w.src = slot;
    w.size = tc->rc_fill;
    /* destinations are VMM memory (tcp_chan_connect): the flusher's own context */
    if (!gpuport_tl_post(tc->conn, &w))
        return 0;
    last = tc->payload_left == 0;
    if (last)
        tc->rx_ops++;
    tcp_post_push(tc, POST_RX_CHUNK, tc->rx_ops);
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

/* The payload's rest straight into its destination, and what follows it
 * (the next headers) into the buffer, in one call. Returns recvmsg's
 * result; on bytes, the state moved on and *drained says whether the
 * socket ran dry. */
static ssize_t read_direct(tcp_conn_t *tc, uint64_t *budget, int *drained)
{
    struct iovec iov[2];
    struct msghdr mh;
    uint64_t room = tcp_payload_room(tc);
    size_t want = room < *budget ? (size_t)room : (size_t)*budget;
    int parts = 1;
    ssize_t n;

    iov[0].iov_base = tc->payload_dst;
    iov[0].iov_len = want;
    if (want == tc->payload_left) {
        iov[1].iov_base = tc->rxbuf + tc->rx_len;
        iov[1].iov_len = RX_TAIL < RXBUF - tc->rx_len ? RX_TAIL : RXBUF - tc->rx_len;
        parts = 2;
    }
    memset(&mh, 0, sizeof(mh));
    mh.msg_iov = iov;
    mh.msg_iovlen = (size_t)parts;
    n = recvmsg(tc->fd_rx, &mh, MSG_DONTWAIT);
    if (n > 0) {
        size_t direct = (size_t)n < want ? (size_t)n : want;
        *drained = (size_t)n < want + (parts == 2 ? iov[1].iov_len : 0);
        tc->rx_len += (size_t)n - direct;
        tcp_payload_done(tc, (uint64_t)direct);
        *budget -= (uint64_t)n < *budget ? (uint64_t)n : *budget;
    }
    return n;
}

/* Bytes into the buffer; behind a large put, little past the next header:
 * the rest of its payload then goes in place. As read_direct. */
static ssize_t read_buffered(tcp_conn_t *tc, uint64_t *budget, int *drained)
{
    size_t room = RXBUF - tc->rx_len;
    ssize_t n;

    if (tc->big_puts && room > RX_TAIL)
        room = RX_TAIL;
    n = recv(tc->fd_rx, tc->rxbuf + tc->rx_len, room, MSG_DONTWAIT);
    if (n > 0) {
        *drained = (size_t)n < room;
        tc->rx_len += (size_t)n;
        *budget -= (uint64_t)n < *budget ? (uint64_t)n : *budget;
    }
    return n;
}

/* A read that brought nothing (n <= 0): the end of the stream, nothing
 * more for now (wait for the socket), or an error that ends the
 * connection. */
static void read_ended(tcp_conn_t *tc, ssize_t n)
{
    if (n == 0)
        rx_closed(tc);
    else if (errno == EAGAIN || errno == EWOULDBLOCK)
        rx_wait_for(tc, tc->in_payload && tc->payload_dst ? tc->payload_left : 0);
    else if (errno != EINTR)
        tcp_conn_end(tc, GPUPORT_ERR_TRANSPORT, "failed while receiving", errno);
}

int tcp_recv_some(tcp_conn_t *tc)
{
    uint64_t budget = PASS_BYTES;
    int progressed = 0, drained = 0;

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
            uint64_t room = tcp_payload_room(tc);
            size_t take = avail < room ? avail : (size_t)room;
            if (tc->payload_dst)
                memcpy(tc->payload_dst, tc->rxbuf + tc->rx_pos, take);
            tc->rx_pos += take;
            tcp_payload_done(tc, take);
            continue;
        }
        if (!tc->in_payload && next_waits(tc))
            break;
        if (!tc->in_payload && avail >= sizeof(tcp_msg_t)) {
            memcpy(&tc->cur, tc->rxbuf + tc->rx_pos, sizeof(tcp_msg_t));
            tc->rx_pos += sizeof(tcp_msg_t);
            tcp_on_header(tc);
            progressed = 1;
            continue;
        }
        /* need bytes from the socket; after a short read it is empty (the
         * next pass's epoll_wait says when more came), so no recv is spent
         * on EAGAIN */
        if (drained && !tc->no_epoll) {
            rx_wait_for(tc, tc->in_payload && tc->payload_dst ? tc->payload_left : 0);
            break;
        }
        if (tc->rx_pos > 0) {
            memmove(tc->rxbuf, tc->rxbuf + tc->rx_pos, avail);
            tc->rx_len = avail;
            tc->rx_pos = 0;
        }
        if (tc->in_payload && tc->payload_dst && tcp_payload_room(tc) >= DIRECT_MIN)
            n = read_direct(tc, &budget, &drained);
        else
            n = read_buffered(tc, &budget, &drained);
        if (n <= 0) {
            read_ended(tc, n);
            break;
        }
        progressed = 1;
    }
    return progressed;
}

/* Errors that arrive while nothing is sent or received (a keepalive that
 * went unanswered, a reset) show on the socket, not in a call's result.
 * Bytes that arrived before the error are read first: they may end in the
 * peer's goodbye (a reset after it is an orderly end: tcp_conn_end). */
void tcp_check_socket(tcp_conn_t *tc)
{
    int err = 0, queued = 0;
    socklen_t len = sizeof(err);

    if (getsockopt(tc->fd_rx, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || !err)
        return;
    if (ioctl(tc->fd_rx, FIONREAD, &queued) == 0 && queued > 0) {
        tc->readable = 1;
        tcp_recv_some(tc);
    }
    tcp_conn_end(tc, GPUPORT_ERR_TRANSPORT, "broke", err);
}
