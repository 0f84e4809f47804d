/*
 * tcp: sending (proxy thread). Operations wait in the connection's send
 * ring; GPU sources are copied into tx staging by the flusher, piece by
 * piece, before they are sent.
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_TL(GPUPORT_TL_KIND_TCP)
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "transport/tcp/tcp_priv.h"

/* ---- proxy thread: operations ---- */

static void ack_ahead(tcp_conn_t *tc);

/* room for nops more operations in flight, in nitems entries of the send
 * ring (lock held) */
static int room_locked(const tcp_conn_t *tc, uint32_t nops, uint32_t nitems)
{
    return tc->ops_sent - tc->ops_acked + nops <= tc->q - CONTROL_SPARE &&
           tcp_tx_room(tc, nitems);
}

/* Refused for ROOM_WARN_NS on end: what the connection holds is logged
 * once, to tell a peer that stopped acknowledging from a socket that stopped
 * taking bytes. */
#define ROOM_WARN_NS (5 * 1000 * 1000 * 1000ull)

static void no_room(tcp_conn_t *tc)
{
    uint64_t now = gpuport_now_ns();

    if (tc->no_room_ns == 0)
        tc->no_room_ns = now;
    if (tc->no_room_logged || now - tc->no_room_ns < ROOM_WARN_NS)
        return;
    tc->no_room_logged = 1;
    log_warn("to rank %d: no room for operations for 5 s: %llu in flight (%llu sent, %llu "
             "acknowledged, window %u), %u messages queued (%llu bytes of the first sent); "
             "%llu applied from the peer, %llu acknowledged to it",
             tc->peer, (unsigned long long)(tc->ops_sent - tc->ops_acked),
             (unsigned long long)tc->ops_sent, (unsigned long long)tc->ops_acked,
             tc->q - CONTROL_SPARE, tc->tx_tail - tc->tx_head,
             (unsigned long long)(tc->tx_head != tc->tx_tail
                                      ? tc->tx[tc->tx_head % tc->tx_cap].sent
                                      : 0),
             (unsigned long long)tc->applied, (unsigned long long)tc->acked_sent);
}

int tcp_has_room(gpuport_tl_chan_t *ch, uint32_t nops)
{
    tcp_conn_t *tc = ch->conn->priv;
    int ok;

    tcp_lock(tc);
    ok = tc->broken || room_locked(tc, nops, nops);
    if (ok) {
        tc->no_room_ns = 0;
        tc->no_room_logged = 0;
    } else {
        no_room(tc);
    }
    tcp_unlock(tc);
    return ok;
}

static int queue_locked(gpuport_tl_chan_t *ch, uint32_t type, uint64_t off, uint64_t size,
                        uint64_t value, const void *payload, int device)
{
    tx_item_t *it;
    tcp_conn_t *tc = ch->conn->priv;

    if (tc->broken)
        return tc->broken;
    if (tc->bye_seen) {
        /* an orderly end: a warning, and the close's own status */
        log_warn("channel %u: rank %d has closed its communicator; nothing more can be sent",
                 ch->id, tc->peer);
        return GPUPORT_ERR_CLOSED;
    }
    if (tc->bye_sent) {
        log_error("channel %u: an operation after this rank's goodbye to rank %d (its "
                  "communicator is being destroyed); not sent",
                  ch->id, tc->peer);
        return GPUPORT_ERR_SHUTDOWN;
    }
    if (type == MSG_GET) {
        if (!tc->get_want && !(tc->get_want = calloc(tc->q, sizeof(*tc->get_want)))) {
            log_error("channel %u: no memory for the records of gets to rank %d; not sent",
                      ch->id, tc->peer);
            return GPUPORT_ERR_NO_MEMORY;
        }
        tc->get_want[tc->gets_sent % tc->q] = (tcp_get_want_t){ch->id, value, size};
    }
    ack_ahead(tc);
    it = tcp_tx_push(tc, type, ch->peer_id, off, size, device ? NULL : payload);
    it->hdr.value = value;
    it->dev_src = device ? payload : NULL;
    tc->inflight[tc->ops_sent % tc->q] = ch->id | (type == MSG_GET ? INFLIGHT_GET : 0);
    tc->gets_sent += type == MSG_GET;
    tc->ops_sent++;
    tc->proxy_ops_end = tc->ops_sent;
    return GPUPORT_TRANSPORT_ASYNC;
}

int tcp_queue_op(gpuport_tl_chan_t *ch, uint32_t type, uint64_t off, uint64_t size,
                 uint64_t value, const void *payload, int device)
{
    tcp_conn_t *tc = ch->conn->priv;
    int rc;

    tcp_lock(tc);
    rc = queue_locked(ch, type, off, size, value, payload, device);
    tcp_unlock(tc);
    return rc;
}

int tcp_put(gpuport_tl_chan_t *ch, uint64_t dst_off, uint64_t src_off, uint64_t size,
            int behind_work, gpuport_work_t *work)
{
    (void)behind_work, (void)work;
    return tcp_queue_op(ch, MSG_PUT, dst_off, size, 0, (const char *)ch->src.ptr + src_off,
                        gpuport_region_is_device(ch->src.kind));
}

/* A header alone: the value rides in it. */
int tcp_put_value(gpuport_tl_chan_t *ch, uint64_t dst_off, uint64_t value, int behind_work,
                  gpuport_work_t *work)
{
    (void)behind_work, (void)work;
    return tcp_queue_op(ch, MSG_VALUE, dst_off, 0, value, NULL, 0);
}

int tcp_signal(gpuport_tl_chan_t *ch, uint64_t n, int behind_work, gpuport_work_t *work)
{
    (void)behind_work, (void)work;
    return tcp_queue_op(ch, MSG_SIGNAL, n, 0, 0, NULL, 0);
}

void tcp_report_fail(gpuport_tl_chan_t *ch, gpuport_status_t status)
{
    tcp_conn_t *tc = ch->conn->priv;
    int full = 0;

    tcp_lock(tc);
    if (!tc->broken && !tc->bye_sent) {
        full = !tcp_tx_room(tc, 1);
        if (!full)
            tcp_tx_push(tc, MSG_FAIL, ch->peer_id, (uint64_t)(int64_t)status, 0, NULL);
    }
    tcp_unlock(tc);
    if (full)
        log_warn("channel %u: the send queue to rank %d is full; its waiters learn of this "
                 "channel's failure only by their timeout",
                 ch->id, tc->peer);
}

/* ---- application threads: a host call's own send (GPUPORT_HOST_INLINE) ---- */

/* What a host call sends: an ACK owed (it rides along, as it would with the
 * proxy's next message), the data (PUT and payload, or VALUE) and the
 * SIGNAL; at most 3 messages, 4 iovecs. */
typedef struct host_msgs {
    tcp_msg_t m[3];
    const char *payload; /* behind the PUT */
    int n, nops;
    struct iovec iov[4];
    int niov;
    uint64_t total;
} host_msgs_t;

static void host_add(host_msgs_t *h, uint32_t type, uint32_t channel, uint64_t a, uint64_t size,
                     uint64_t value)
{
    tcp_msg_t *m = &h->m[h->n++];

    memset(m, 0, sizeof(*m));
    m->type = type;
    m->channel = channel;
    m->a = a;
    m->size = size;
    m->value = value;
    h->iov[h->niov].iov_base = m;
    h->iov[h->niov++].iov_len = sizeof(*m);
    h->total += sizeof(*m);
    if (type != MSG_ACK)
        h->nops++;
    if (type == MSG_PUT) {
        h->iov[h->niov].iov_base = (void *)h->payload;
        h->iov[h->niov++].iov_len = (size_t)size;
        h->total += size;
    }
}

/* What sendmsg did not take goes to the send ring, each message with the
 * bytes of it already sent, so the proxy carries on from there (the ring
 * was empty: these are next). */
static void host_rest(tcp_conn_t *tc, const host_msgs_t *h, uint64_t sent)
{
    for (int i = 0; i < h->n; i++) {
        const tcp_msg_t *m = &h->m[i];
        uint64_t len = sizeof(*m) + (m->type == MSG_PUT ? m->size : 0);
        tx_item_t *it;
        if (sent >= len) {
            sent -= len;
            continue;
        }
        if (m->type == MSG_ACK) {
            tc->ack_slot = tc->tx_tail % tc->tx_cap;
            tc->ack_queued = 1;
        }
        it = tcp_tx_push(tc, m->type, m->channel, m->a, m->size,
                         m->type == MSG_PUT ? h->payload : NULL);
        it->hdr.value = m->value;
        it->sent = sent;
        sent = 0;
    }
}

/* Only what someone waits for: an operation with a signal. Plain puts and
 * values are the proxy's, which sends many in one call; so are GPU sources
 * (staged by the flusher) and payloads above GPUPORT_SOCKET_INLINE_MAX.
 * The caller's message goes out only where nothing is queued to send (it
 * is then simply next in the stream: the core has checked that none of
 * the channel's host operations is in flight, and other channels' order is
 * not affected) and the connection is up and saying no goodbye. */
int tcp_host_send(gpuport_tl_chan_t *ch, uint32_t op, uint64_t dst_off, uint64_t src_off,
                  uint64_t size, uint64_t value)
{
    tcp_conn_t *tc = ch->conn->priv;
    host_msgs_t h;
    struct msghdr mh;
    ssize_t sent;
    int data = (op == GPUPORT_OP_PUT_SIGNAL && size > 0) || op == GPUPORT_OP_PUT_VALUE_SIGNAL;

    if (op != GPUPORT_OP_PUT_SIGNAL && op != GPUPORT_OP_PUT_VALUE_SIGNAL &&
        op != GPUPORT_OP_SIGNAL)
        return GPUPORT_TRANSPORT_QUEUE;
    if (op == GPUPORT_OP_PUT_SIGNAL && size > 0 &&
        (size > tc->inline_max || gpuport_region_is_device(ch->src.kind)))
        return GPUPORT_TRANSPORT_QUEUE;
    /* the proxy holds the lock for a pass over the connection: a moment,
     * unless it lost its core, which a push then waits out instead */
    for (int i = 0; !tcp_trylock(tc); i++) {
        if (i == 64) {
            __atomic_fetch_add(&tc->host_busy, 1, __ATOMIC_RELAXED);
            return GPUPORT_TRANSPORT_QUEUE;
        }
    }
    if (tc->broken || tc->bye_seen || tc->bye_sent || tc->tx_head != tc->tx_tail ||
        !room_locked(tc, data ? 2 : 1, 3)) {
        tc->host_queued++;
        tcp_unlock(tc);
        return GPUPORT_TRANSPORT_QUEUE;
    }
    memset(&h, 0, sizeof(h));
    h.payload = (const char *)ch->src.ptr + src_off;
    if (tc->applied != tc->acked_sent)
        host_add(&h, MSG_ACK, NO_CHANNEL, tc->applied, 0, 0);
    if (data && op == GPUPORT_OP_PUT_SIGNAL)
        host_add(&h, MSG_PUT, ch->peer_id, dst_off, size, 0);
    else if (data)
        host_add(&h, MSG_VALUE, ch->peer_id, dst_off, 0, value);
    host_add(&h, MSG_SIGNAL, ch->peer_id, 1, 0, 0);
    memset(&mh, 0, sizeof(mh));
    mh.msg_iov = h.iov;
    mh.msg_iovlen = (size_t)h.niov;
    sent = sendmsg(tc->fd_tx, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent <= 0) {
        /* a full socket, or an error the proxy meets on its next send */
        tc->host_queued++;
        tcp_unlock(tc);
        return GPUPORT_TRANSPORT_QUEUE;
    }
    tc->host_sent++;
    if (h.m[0].type == MSG_ACK) {
        tc->acked_sent = h.m[0].a;
        tc->ack_owed_ns = 0;
        tc->signal_unacked = tc->ack_now = 0;
    }
    /* one completion per call, at its last operation */
    for (int i = 0; i < h.nops; i++) {
        tc->inflight[tc->ops_sent % tc->q] = i == h.nops - 1 ? ch->id | INFLIGHT_INLINE
                                                              : NO_CHANNEL;
        tc->ops_sent++;
    }
    if ((uint64_t)sent < h.total) {
        host_rest(tc, &h, (uint64_t)sent);
        __atomic_fetch_add(&tc->host_rests, 1, __ATOMIC_RELAXED);
    }
    tcp_unlock(tc);
    return GPUPORT_TRANSPORT_ASYNC;
}

/* ---- proxy thread: staging of GPU regions ---- */

/* Posts flusher copies of GPU sources into tx staging, piece by piece, in
 * the order the items will be sent (an answer's up to where a snapshot took
 * over: tcp_snap.c). */
void tcp_stage_tx(tcp_conn_t *tc)
{
    while (tc->tc_tail - tc->tc_head < NSLOT && !tc->broken && !tcp_post_full(tc)) {
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
        if (!it->dev_src || tc->sg_off >= tcp_staged_end(it)) {
            tc->sg_item++;
            tc->sg_off = 0;
            continue;
        }
        len = tcp_staged_end(it) - tc->sg_off;
        len = len < CHUNK ? len : CHUNK;
        slot = tc->tc_tail % NSLOT;
        memset(&w, 0, sizeof(w));
        w.kind = GPUPORT_WORK_CU_FROM_DEVICE;
        w.dst = tc->txs + (size_t)slot * CHUNK;
        w.src = it->dev_src + tc->sg_off;
        w.size = len;
        /* sources are VMM memory (tcp_chan_connect): the flusher's own context */
        if (!gpuport_tl_post(tc->conn, &w))
            return;
        tc->tchunk[slot].item = tc->sg_item;
        tc->tchunk[slot].off = tc->sg_off;
        tc->tchunk[slot].len = len;
        tcp_post_push(tc, POST_TX, 0);
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

int tcp_send_some(tcp_conn_t *tc)
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
            if (!tcp_msg_has_payload(it->hdr.type) || off >= it->hdr.size)
                continue;
            if (it->dev_src) {
                uint64_t avail, end = tcp_staged_end(it), have, len;
                if (off < end) {
                    n += staged_iov(tc, i, off, iov + n, IOV_BATCH - n, &avail);
                    /* the rest is not staged yet: nothing may follow */
                    if (off + avail < end)
                        break;
                    off = end;
                }
                if (off == it->hdr.size)
                    continue;
                /* the rest from the snapshot, as far as it is copied out */
                have = it->snap_from + it->snap_have;
                if (off >= have || n == IOV_BATCH)
                    break;
                len = have - off;
                iov[n].iov_base = it->snap + (off - it->snap_from);
                iov[n++].iov_len = (size_t)(len < budget ? len : budget);
                if (have < it->hdr.size || len > budget)
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
            tcp_conn_end(tc, GPUPORT_ERR_TRANSPORT, "failed while sending", errno);
            break;
        }
        progressed = 1;
        budget = (uint64_t)sent < budget ? budget - (uint64_t)sent : 0;
        while (sent > 0) {
            tx_item_t *it = &tc->tx[tc->tx_head % tc->tx_cap];
            uint64_t total = sizeof(tcp_msg_t) +
                             (tcp_msg_has_payload(it->hdr.type) ? it->hdr.size : 0);
            uint64_t take = total - it->sent < (uint64_t)sent ? total - it->sent : (uint64_t)sent;
            it->sent += take;
            sent -= (ssize_t)take;
            if (it->sent == total) {
                if (it->hdr.type == MSG_ACK && tc->ack_queued &&
                    tc->ack_slot == tc->tx_head % tc->tx_cap)
                    tc->ack_queued = 0;
                if (it->hdr.type == MSG_GET_DATA)
                    tcp_answer_gone(tc, it);
                tc->tx_head++;
            }
        }
        if (tc->txs)
            free_chunks(tc);
    }
    return progressed;
}

/* May the ACK owed wait? Only one for operations that include a signal
 * and came while this side awaited no ACK itself (ack_now), only while
 * nothing else is queued to ride with (an operation queued goes behind
 * it: ack_ahead), only up to ack_delay_ns, and only while the peer has
 * room to keep sending (a quarter of its window). */
static int ack_may_wait(tcp_conn_t *tc)
{
    uint64_t now;

    if (!tc->signal_unacked || tc->ack_now || tc->ack_delay_ns == 0 ||
        tc->tx_head != tc->tx_tail || tc->applied - tc->acked_sent >= tc->q / 4)
        return 0;
    now = gpuport_now_ns();
    if (tc->ack_owed_ns == 0)
        tc->ack_owed_ns = now;
    return now - tc->ack_owed_ns < tc->ack_delay_ns;
}

/* The ACK owed, queued now. */
static void ack_push(tcp_conn_t *tc)
{
    tc->ack_owed_ns = 0;
    tc->signal_unacked = tc->ack_now = 0;
    tc->ack_slot = tc->tx_tail % tc->tx_cap;
    tcp_tx_push(tc, MSG_ACK, NO_CHANNEL, tc->applied, 0, NULL);
    tc->ack_queued = 1;
    tc->acked_sent = tc->applied;
}

/* One ACK at a time in the queue, updated in place until it starts going. */
void tcp_queue_ack(tcp_conn_t *tc)
{
    if (tc->applied == tc->acked_sent || tc->broken) {
        tc->ack_owed_ns = 0;
        return;
    }
    if (!tc->ack_queued && ack_may_wait(tc)) {
        gpuport_tl_keep_awake(tc->conn->comm, tc->ack_owed_ns + tc->ack_delay_ns);
        return;
    }
    if (tc->ack_queued) {
        tx_item_t *it = &tc->tx[tc->ack_slot];
        tc->ack_owed_ns = 0;
        tc->signal_unacked = tc->ack_now = 0;
        if (it->sent == 0) {
            it->hdr.a = tc->applied;
            tc->acked_sent = tc->applied;
        }
        return;
    }
    if (tcp_tx_room(tc, 1))
        ack_push(tc);
}

/* An operation about to be queued: an ACK owed goes ahead of it, in the
 * same sendmsg, so that the peer has its operations acknowledged before it
 * sees the signal this one may carry (it then holds its own ACK for an
 * answer: a ping-pong's ACKs ride with the answers both ways). */
static void ack_ahead(tcp_conn_t *tc)
{
    if (!tc->ack_queued && tc->applied != tc->acked_sent && !tc->broken && tcp_tx_room(tc, 2))
        ack_push(tc);
}
