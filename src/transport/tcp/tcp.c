/*
 * tcp transport: port channels between hosts without RDMA. Each pair of
 * ranks shares one TCP connection (two for a rank and itself), set up on the
 * application thread at the first channel and then driven by the proxy
 * thread, without blocking, and by host calls that send or receive their
 * own messages (GPUPORT_HOST_INLINE: tcp_host_send, tcp_host_recv), each
 * under the connection's lock (tcp_priv.h):
 *
 *   put     a PUT header and the source bytes, sent straight from the
 *           source region (it must stay unchanged until the put is flushed);
 *   signal  a SIGNAL header; the stream orders it after every earlier put;
 *   put_value a VALUE header carrying the destination offset and the value;
 *   get     a GET header (where to read in the peer's destination, how much,
 *           where it lands here); the peer answers with GET_DATA, the bytes
 *           sent from its destination region, into this side's source;
 *   atomic_add an ADD header carrying the offset and the addend;
 *   accumulate an ACC header (offset, element op) and the source elements;
 *   receive the peer's proxy (or a host thread waiting there) reads headers
 *           and writes payloads straight into the destination region,
 *           stores a VALUE's value there, increments the semaphore for a
 *           SIGNAL, adds an ADD's addend and an ACC's elements each with
 *           one atomic add (accumulate.h), queues a GET's answer; the proxy
 *           acknowledges what was applied (ACK, cumulative);
 *   flush   completes when the peer has acknowledged every earlier op, and
 *           a get once its GET_DATA has come too.
 *
 * Every operation (GET, ADD and ACC too) is counted and acknowledged in the
 * stream's order; a GET_DATA is an answer, not an operation. The peer sends
 * it before it counts the GET applied, but an ACK it queued earlier may be
 * raised past it, so a get completes when both are here (tcp_apply_acks).
 * The answers wait in the send ring beside this side's operations: it holds
 * twice the window, the peer's GETs in flight being at most its window.
 * Adds need host memory at the peer (rma_ok says so for GPU memory): a GPU
 * adds only with its own atomics.
 *
 * A connection that breaks (reset, closed without goodbye, data or keepalive
 * probes unanswered for GPUPORT_SOCKET_TIMEOUT_MS) fails every channel on it
 * on this side, waiters included; the peer sees its own socket break. At
 * destroy a side says goodbye (BYE) once it has nothing left to send, keeps
 * receiving until its operations are acknowledged and the peer has answered
 * the close of every channel (after which the peer sends nothing more for
 * them), and closes the socket; it never waits for the peer's own destroy.
 * The peer reads the goodbye and then the end of the stream (or a reset,
 * should its own goodbye meet the closed socket): an orderly end.
 *
 * GPU memory (from gpuport_mem_alloc_device: mapped for the device, so the
 * flusher's own context copies it) moves through pinned host staging of NSLOT
 * chunks per direction and connection: the sender's flusher copies each chunk
 * of a GPU source (or of a GPU destination a GET reads) into staging before
 * the proxy sends it; the receiver's
 * proxy receives a chunk into staging and its flusher copies it to the GPU
 * destination. A signal (and the acknowledgement) that follows a GPU put
 * waits for those copies: it goes to the flusher behind them. A write into
 * GPU memory that a GET's answer has yet to read waits for the flusher to
 * copy that answer out first (tcp_snap.c). A value for a
 * GPU destination is written by the flusher too (cuStreamWriteValue64 on the
 * stream of those copies, so after them).
 *
 * Headers are host byte order: the ranks of a job share an architecture.
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_TL(GPUPORT_TL_KIND_TCP)
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "transport/tcp/tcp_priv.h"

static gpuport_status_t stage_get(tcp_conn_t *tc, char **stage, size_t size, const char *what)
{
    gpuport_status_t st;
    void *p;

    if (*stage)
        return GPUPORT_OK;
    if (!gpuport_tl_has_gpu(tc->comm)) {
        log_error("a GPU region (%s) on a communicator without a GPU", what);
        return GPUPORT_ERR_NOT_SUPPORTED;
    }
    st = gpuport_tl_stage_alloc(tc->comm, size, &p);
    if (st)
        return st;
    *stage = p;
    log_debug("%zu MiB of pinned staging for GPU %s to/from rank %d", size >> 20, what,
              tc->peer);
    return GPUPORT_OK;
}

/* The flusher copies GPU data between staging and the regions from its own
 * context. cudaMalloc memory belongs to the application's context, and such
 * copies were measured to wait for that context's time slice and to hang
 * behind kernels queued there, writing into it and reading from it alike:
 * only memory mapped for the device will do. Host memory of every kind
 * (pinned too) is sent and received from where it is. */
static int tcp_region_ok(const gpuport_region_t *r, int as_dst, char *why, size_t len)
{
    (void)as_dst;
    if (r->kind != GPUPORT_REGION_DEVICE)
        return 1;
    snprintf(why, len, "cudaMalloc memory cannot be copied by tcp without the application's "
             "CUDA context (measured: the staging copies hung behind 1,100 kernels queued "
             "there); use VMM memory (gpuport_mem_alloc_device, or cuMemCreate + cuMemMap)");
    return 0;
}

static gpuport_status_t tcp_chan_connect(gpuport_tl_chan_t *ch, const gpuport_channel_rec_t *peer)
{
    tcp_conn_t *tc = ch->conn->priv;
    gpuport_status_t st = GPUPORT_OK;

    /* the proxy's word; a break it has not seen yet is caught by its rescan */
    if (__atomic_load_n(&tc->fail_status, __ATOMIC_RELAXED)) {
        log_error("channel to rank %d: the tcp connection to it has broken; no channel to it can "
                  "be made in this communicator",
                  ch->peer);
        return GPUPORT_ERR_PEER;
    }
    /* sent from: GPU sources, and GPU destinations that the peer's gets read */
    if (gpuport_region_is_device(ch->src.kind) ||
        gpuport_region_is_mapped_device(ch->local_dst.kind))
        st = stage_get(tc, &tc->txs, TXS_BYTES, "sources and destinations read by gets");
    if (!st && gpuport_region_is_mapped_device(ch->local_dst.kind))
        st = stage_get(tc, &tc->rxs, (size_t)NSLOT * CHUNK, "destinations");
    if (st)
        return st;
    memset(&ch->dst, 0, sizeof(ch->dst));
    ch->dst.rec = peer->dst;
    ch->remote_slot = NULL;
    atomic_store_explicit(&tc->rx_ok[ch->id], 1, memory_order_release);
    return GPUPORT_OK;
}

static void tcp_chan_disconnect(gpuport_tl_chan_t *ch)
{
    tcp_conn_t *tc = ch->conn->priv;

    if (tc)
        atomic_store_explicit(&tc->rx_ok[ch->id], 0, memory_order_release);
    memset(&ch->dst, 0, sizeof(ch->dst));
}

/* ---- failure (tcp_fail.c has the connection's break) ---- */

/* The peer closed its communicator, in order: no more signals will come
 * from it. Once what it sent is applied, this side's waiters on its
 * channels stop (signals already there can still be taken) and its later
 * operations are refused, with GPUPORT_ERR_CLOSED: a goodbye is a close,
 * not a failure (a connection that ends without one is: tcp_conn_end).
 * Each channel's own close word came before the goodbye and stays; this
 * one is for a channel whose close the peer could not send. The peer
 * closes the socket once this side has answered its closes and
 * acknowledged its operations, whether or not this side is destroying. */
static void end_waits(gpuport_tl_chan_t *ch, void *arg)
{
    gpuport_tl_sem_fail(ch->comm, ch->id, GPUPORT_ERR_CLOSED);
    ++*(int *)arg;
}

static void peer_closed(tcp_conn_t *tc)
{
    int n = 0;

    tc->bye_applied = 1;
    gpuport_tl_conn_each(tc->conn, end_waits, &n);
    if (n)
        log_debug("rank %d closed its communicator; waits on its %d channel(s) end here",
                  tc->peer, n);
}

/* The connection broke while a channel on it was being created: it became
 * active afterwards and must fail too (gpuport_tl_chan_fail keeps the
 * first error, so a channel failed already is not failed again). */
static void fail_late(gpuport_tl_chan_t *ch, void *arg)
{
    tcp_conn_t *tc = arg;

    if (gpuport_tl_chan_fail(ch, (gpuport_status_t)tc->fail_status))
        log_error("channel %u to rank %d was created as its connection broke; it is failed",
                  ch->id, tc->peer);
}

static void fail_late_channels(tcp_conn_t *tc)
{
    tc->next_rescan_ns = gpuport_now_ns() + RESCAN_NS;
    gpuport_tl_conn_each(tc->conn, fail_late, tc);
}

/* ---- proxy thread: progress ---- */

static void work_done_locked(tcp_conn_t *tc, gpuport_status_t status)
{
    posted_t p = tc->posted[tc->po_head % POSTED_CAP];

    tc->po_head++;
    if (p.kind != POST_TX && p.kind != POST_SNAP) {
        tc->rx_pending--;
        if (p.kind == POST_RX_CHUNK)
            tc->rc_head++;
    }
    if (tc->broken)
        return;
    if (status != GPUPORT_OK) {
        tcp_conn_break(tc, status, "lost a staging copy of GPU memory", 0);
        return;
    }
    if (p.kind == POST_TX)
        tc->tc_ready++;
    else if (p.kind == POST_SNAP)
        tcp_snap_done(tc, p.marker);
    else
        tc->applied = tc->rx_pending ? p.marker : tc->rx_ops;
}

static void tcp_work_done(gpuport_conn_t *conn, gpuport_status_t status)
{
    tcp_conn_t *tc = conn->priv;

    tcp_lock(tc);
    work_done_locked(tc, status);
    tcp_unlock(tc);
}

/* Is there anything for tcp_recv_some to do: the socket is readable (or
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
static int tcp_comm_progress(gpuport_tl_comm_t *tl)
{
    struct gpuport_tcp_comm *t = tl->priv;
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

static int progress_locked(tcp_conn_t *tc)
{
    int n;

    if (tc->bye_seen && !tc->bye_applied && tc->rx_pending == 0)
        peer_closed(tc);
    if (tc->rx_err && !tc->broken)
        tcp_conn_end(tc, GPUPORT_ERR_TRANSPORT, "failed while receiving", tc->rx_err);
    if (tc->broken) {
        if (tc->fail_status && gpuport_now_ns() >= tc->next_rescan_ns)
            fail_late_channels(tc);
        return 0;
    }
    n = rx_wanted(tc) ? tcp_recv_some(tc) : 0;
    tc->rx_busy = n > 0; /* a stream the proxy has in hand: no waiter cuts in */
    if (tc->txs)
        tcp_stage_tx(tc);
    tcp_queue_ack(tc);
    n += tcp_send_some(tc);
    /* an ACK waiting for an answer to ride with keeps the proxy from
     * sleeping until it is due (tcp_queue_ack), not from yielding */
    return n;
}

static int tcp_progress(gpuport_conn_t *conn)
{
    tcp_conn_t *tc = conn->priv;
    int n;

    tcp_lock(tc);
    n = progress_locked(tc);
    tcp_unlock(tc);
    return n;
}

/* The idle proxy sleeps in ppoll on the epoll descriptor, which is readable
 * while any connection in it is (data, an error or a hang-up), however many
 * connections there are, and on the sockets of connections epoll could not
 * take; asking each socket first catches errors that came while it was
 * quiet. */
static int tcp_poll_fds(gpuport_tl_comm_t *tl, struct pollfd *fds, int max)
{
    struct gpuport_tcp_comm *t = tl->priv;
    int n = t ? atomic_load_explicit(&t->nconns, memory_order_acquire) : 0, nfds = 0;
    int in_epoll = 0;

    for (int i = 0; i < n; i++) {
        tcp_conn_t *tc = t->conns[i];
        int broken;
        tcp_lock(tc);
        if (!tc->broken)
            tcp_check_socket(tc);
        broken = tc->broken;
        tcp_unlock(tc);
        if (broken)
            continue;
        if (!tc->no_epoll) {
            in_epoll = 1;
            continue;
        }
        if (nfds < max) {
            fds[nfds].fd = tc->fd_rx;
            fds[nfds].events = POLLIN;
            fds[nfds].revents = 0;
            nfds++;
        }
    }
    if (in_epoll && nfds < max) {
        fds[nfds].fd = t->epfd;
        fds[nfds].events = POLLIN;
        fds[nfds].revents = 0;
        nfds++;
    }
    return nfds;
}

/* between hosts, for host and GPU memory alike; same-host transports
 * rank higher where they apply */
static int tcp_auto_rank(int device_regions)
{
    (void)device_regions;
    return 10;
}

/* Nothing of this side's awaits the peer once its goodbye and every ACK
 * it owes are out and its operations are acknowledged. The peer's BYE is
 * not waited for: the core waits instead for its answer to every channel's
 * close (proxy_drain.c), after which it sends nothing more that only this
 * proxy could receive; then this side may close the socket, and the peer,
 * when it reads the goodbye and the end of the stream, takes it as an
 * orderly end (tcp_conn_end). */
static int tcp_quiesce(gpuport_conn_t *conn)
{
    tcp_conn_t *tc = conn->priv;
    int done = 1;

    tcp_lock(tc);
    if (!tc->broken) {
        if (!tc->bye_sent && tcp_tx_room(tc, 1)) {
            tcp_tx_push(tc, MSG_BYE, NO_CHANNEL, 0, 0, NULL);
            tc->bye_sent = 1;
        }
        done = tc->bye_sent && tc->tx_head == tc->tx_tail && tc->ops_acked == tc->ops_sent &&
               tc->applied == tc->acked_sent;
    }
    tcp_unlock(tc);
    return done;
}

const gpuport_transport_ops_t gpuport_transport_tcp = {
    .name = "tcp",
    .comm_open = tcp_comm_open,
    .comm_close = tcp_comm_close,
    .comm_progress = tcp_comm_progress,
    .poll_fds = tcp_poll_fds,
    .settings = &gpuport_tcp_settings,
    .describe = tcp_describe,
    .reachable = tcp_reachable,
    .auto_rank = tcp_auto_rank,
    .conn_open = tcp_conn_open,
    .conn_close = tcp_conn_close,
    .region_ok = tcp_region_ok,
    .chan_connect = tcp_chan_connect,
    .chan_disconnect = tcp_chan_disconnect,
    .put = tcp_put,
    .put_value = tcp_put_value,
    .signal = tcp_signal,
    .rma = tcp_rma,
    .rma_ok = tcp_rma_ok,
    .host_send = tcp_host_send,
    .host_recv = tcp_host_recv,
    .has_room = tcp_has_room,
    .progress = tcp_progress,
    .quiesce = tcp_quiesce,
    .report_fail = tcp_report_fail,
    .work_done = tcp_work_done,
};
