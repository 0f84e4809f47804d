/*
 * The tcp transport's internals, for its own files only (src/transport/tcp/
 * *.c): the wire format, a connection's state, and the functions the files
 * share. tcp.c says how the transport works and holds its table of
 * operations; tcp_addr.c picks the address and runs the communicator's
 * listener; tcp_cm.c sets connections up; tcp_tx.c sends (and stages GPU
 * sources through the flusher); tcp_rx.c receives, and tcp_hrx.c is a
 * waiting host thread's own receive; tcp_rma.c carries get, atomic_add and
 * accumulate, and tcp_snap.c keeps answers read from GPU memory in the
 * channel's order. The core reaches the transport only through
 * gpuport_transport_tcp.
 */
#ifndef GPUPORT_TCP_PRIV_H
#define GPUPORT_TCP_PRIV_H

#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "transport/tcp/tcp_settings.h"
#include "transport/transport.h"

#define RXBUF 65536
#define DIRECT_MIN 16384        /* payload rest this large is received in place */
#define RX_TAIL 4096            /* read past such a payload, and behind a large put */
#define IOV_BATCH 64
#define PASS_BYTES (8u << 20)   /* per direction and progress call, so one big put
                                 * does not starve the FIFO and other peers */
#define NO_CHANNEL UINT32_MAX
/* inflight[]: the operation a host call sent itself (tcp_host_send), whose
 * completion goes to gpuport_tl_inline_complete; NO_CHANNEL there: an
 * operation that completes nothing (the rest of such a call's) */
#define INFLIGHT_INLINE 0x80000000u
/* inflight[]: a GET, complete once the ACK covering it and its data are
 * both here (channel ids stay below GPUPORT_MAX_CHANNELS' 32768) */
#define INFLIGHT_GET 0x40000000u
#define CHUNK (1u << 20)        /* GPU staging piece */
#define NSLOT 8                 /* staging pieces per direction and connection */
/* tx staging: NSLOT pieces, then the snapshot slot (tcp_snap.c) */
#define TXS_BYTES ((size_t)(NSLOT + 1) * CHUNK)
#define POSTED_CAP 256          /* flusher items of one connection in flight */
#define CONTROL_SPARE 64        /* send-queue entries kept from operations */
#define ACC_BUF (1u << 20)      /* an ACC payload is added from here, piece by piece */
/* A channel whose creation was finishing when its connection broke becomes
 * active after the break: a broken connection's channels are looked at again
 * this often. */
#define RESCAN_NS (10 * 1000 * 1000ull)

enum { POST_TX = 1, POST_RX_CHUNK = 2, POST_RX_SIGNAL = 3, POST_RX_VALUE = 4, POST_SNAP = 5 };

/* VALUE (put_value), GET, ADD (atomic_add) and ACC (accumulate) are
 * operations, acknowledged and counted like PUT and SIGNAL; GET_DATA, a
 * GET's answer, is not (tcp_rma.c). */
enum {
    MSG_PUT = 1,
    MSG_SIGNAL = 2,
    MSG_ACK = 3,
    MSG_FAIL = 4,
    MSG_BYE = 5,
    MSG_VALUE = 6,
    MSG_GET = 7,
    MSG_GET_DATA = 8,
    MSG_ADD = 9,
    MSG_ACC = 10
};

typedef struct tcp_msg {
    uint32_t type;
    uint32_t channel; /* the receiver's channel id (GET_DATA: NO_CHANNEL when refused
                       * for a channel the answering side does not have) */
    uint64_t a;       /* PUT, VALUE, GET, ADD, ACC: destination offset (a GET's: where
                       * it reads); GET_DATA: the getter's source offset; SIGNAL:
                       * signals (>= 1); ACK: count applied; FAIL: status */
    uint64_t size;    /* PUT, GET_DATA, ACC: payload bytes that follow; GET: bytes to
                       * read (no payload) */
    uint64_t value;   /* VALUE: the 8 bytes to store; GET: the getter's source offset;
                       * ADD: the addend; ACC: its op (GPUPORT_OP_ACC_*); GET_DATA:
                       * 0, or the status of a GET refused (size 0) */
} tcp_msg_t;

/* messages whose header is followed by hdr.size bytes */
static inline int tcp_msg_has_payload(uint32_t type)
{
    return type == MSG_PUT || type == MSG_GET_DATA || type == MSG_ACC;
}

/* This rank's part of its rank record: where it listens (port 0: it does
 * not). Its version is the wire protocol's too: 2 added MSG_VALUE and the count of
 * folded signals in MSG_SIGNAL, 3 GET, GET_DATA, ADD and ACC. */
#define TCP_REC_VERSION 3
typedef struct tcp_rec {
    uint16_t tcp_family; /* AF_INET or AF_INET6 */
    uint16_t tcp_port;   /* network byte order */
    uint32_t tcp_scope;  /* IPv6 scope id */
    uint8_t tcp_addr[16];
    uint64_t tcp_cookie; /* echoed by connecting peers: the listener is this communicator's */
    char tcp_ifname[16];
} tcp_rec_t;

/* The greeting a connecting rank sends first (tcp_cm.c), checked by the
 * listener (tcp_accept.c). */
#define TCP_HELLO_MAGIC 0x43545047u /* "GPTC" */

typedef struct tcp_hello {
    uint32_t magic;
    uint16_t version_major, version_minor, version_patch, layout;
    int32_t from_rank, to_rank;
    uint32_t reserved;
    uint64_t cookie; /* the listener's, from its rank record */
} tcp_hello_t;

struct tcp_greeting;

struct gpuport_tcp_comm {
    gpuport_tl_comm_t *tl;
    int listen_fd;
    uint64_t cookie;
    int *pending; /* by rank: accepted, hello read, not yet claimed (comm->lock) */
    /* connections accepted whose greeting has not arrived whole (comm->lock;
     * tcp_accept.c), and the strangers dropped since the last line about them */
    struct tcp_greeting *greet;
    int ngreet;
    uint64_t strangers[4];
    uint64_t strangers_logged_ns;
    char why[256]; /* why there is no listener */
    /* The connections' receiving sockets: the proxy asks once per pass which
     * are readable instead of trying a recv on each (-1: try each). */
    int epfd;
    _Atomic int nconns;       /* published with release after conns[] */
    struct tcp_conn **conns;  /* in opening order (one per peer at most) */
};

typedef struct tx_item {
    tcp_msg_t hdr;
    const char *payload;
    const char *dev_src; /* GPU source: the payload comes through tx staging */
    char *copy;          /* GET_DATA: its bytes, copied out of the region before a
                          * later write there (tcp_rma_guard); freed once sent */
    /* GET_DATA from GPU memory: its payload from snap_from on, copied out
     * of the region before a later write there (tcp_snap.c), snap_have
     * bytes of it so far; freed once sent. Staging stops at snap_from. */
    char *snap;
    uint64_t snap_from, snap_have;
    uint64_t sent;       /* bytes of header and payload already sent */
} tx_item_t;

/* A piece of a GPU source in tx staging (slot = its index % NSLOT). */
typedef struct tx_chunk {
    uint32_t item; /* tx index */
    uint64_t off, len; /* in the item's payload */
} tx_chunk_t;

typedef struct posted {
    uint8_t kind;    /* POST_* */
    uint64_t marker; /* rx: operations applied once this completes; POST_SNAP: bytes */
} posted_t;

/* A GET sent: the local channel and the source bytes its answer fills. */
typedef struct tcp_get_want {
    uint32_t channel;
    uint64_t off, size;
} tcp_get_want_t;

/* A connection's state belongs to whoever holds its lock: the proxy thread
 * in every call into the connection (tcp.c, tcp_tx.c), or an application
 * thread in tcp_host_send, which only tries it. It is held for work that
 * does not block (a sendmsg with MSG_DONTWAIT at most), so the proxy's wait
 * for it is short: it spins, then yields, the holder being perhaps an
 * application thread that lost its core. The proxy takes it again inside
 * (a completion that fails a channel tells the peer: tcp_report_fail), so
 * it counts its owner's takes. */
typedef struct tcp_conn {
    _Atomic(const void *) lock_owner; /* NULL: free */
    uint32_t lock_depth;              /* the owner's takes beyond the first */
    /* what tcp_host_recv_ok said when the lock was last let go: a waiting
     * host thread reads it before it tries the lock, so that it does not
     * contend with a proxy that has the connection's traffic in hand. A
     * line of its own, written only when it changes: a waiter polling the
     * lock's line would slow each of the proxy's takes */
    _Alignas(64) _Atomic int host_rx_hint;
    _Alignas(64) gpuport_comm_t comm;
    struct gpuport_tcp_comm *t;
    int peer;
    int fd_tx, fd_rx; /* one socket, or two for a rank and itself */
    int broken;       /* a gpuport_status_t once the connection failed or ended */
    int fail_status;  /* broken without goodbye: channels on it must fail */
    uint64_t next_rescan_ns; /* ... including those activated after the break */
    /* sending (proxy thread) */
    /* ring of messages to send: 2 * q, this side's operations and the
     * answers to the peer's GETs (at most its window) side by side */
    tx_item_t *tx;
    uint32_t tx_cap, tx_head, tx_tail;
    uint32_t *inflight; /* local channel ids of operations sent, awaiting ACK */
    uint32_t q;         /* GPUPORT_SOCKET_QUEUE, power of two: inflight's size */
    uint64_t ops_sent, ops_acked;
    uint64_t acks_seen; /* the peer's last ACK count (ops_acked waits at a GET whose
                         * data has not come) */
    uint64_t gets_sent, gets_got, gets_done; /* GETs sent; their GET_DATA received
                                              * whole; completed */
    /* What each GET in flight asked for, by its number % q (allocated at
     * the first GET): its GET_DATA must answer exactly that */
    tcp_get_want_t *get_want;
    /* GET_DATA queued with its payload in a host region here, and the
     * addresses they span (tcp_rma_guard) */
    uint32_t answers_in_place;
    uintptr_t answers_lo, answers_hi;
    uint64_t proxy_ops_end; /* ops_sent after the proxy's last operation */
    int ack_queued;     /* an ACK is in tx and not yet started */
    uint32_t ack_slot;
    /* An ACK owed for operations that include a signal waits up to
     * ack_delay_ns (GPUPORT_SOCKET_ACK_DELAY_US) for a message to ride
     * with: the application woken by the signal often answers at once, and
     * ACK and answer then go in one sendmsg (tcp_queue_ack). */
    uint64_t ack_delay_ns;
    uint64_t ack_owed_ns; /* since when, 0: none waiting */
    int signal_unacked;   /* a SIGNAL among the operations not yet acknowledged */
    /* ... which came while this side's own operations awaited their ACK:
     * the peer sent before it received (an exchange, not an answer) and
     * holds its ACK as this side would, so each would wait for the other
     * and each flush would wait the delay out; this ACK goes at once */
    int ack_now;
    int bye_sent, bye_seen;
    int bye_applied; /* channels closed after the peer's goodbye */
    int readable;    /* epoll said so, and no recv has come back empty since */
    int no_epoll;    /* not in the epoll set: always try */
    int rx_lowat;    /* SO_RCVLOWAT of fd_rx as this side last set it (0: never, the
                      * kernel's 1) */
    uint64_t lowat_max; /* GPUPORT_SOCKET_RCVLOWAT */
    uint64_t lowat_raised; /* times set above 1 (__atomic: test_tcp_lowat reads it) */
    uint64_t inline_max;   /* GPUPORT_SOCKET_INLINE_MAX */
    uint64_t host_rests;   /* host sends whose rest the socket did not take and the
                            * proxy sent (__atomic: test_tcp_inline reads it) */
    uint64_t host_sent;    /* host sends (lock held) */
    uint64_t host_queued;  /* ... declined: messages queued, or no room (lock held) */
    uint64_t host_busy;    /* ... declined: the lock taken (__atomic) */
    int host_recv;         /* GPUPORT_SOCKET_HOST_RECV */
    uint64_t host_recvs;   /* calls in which a waiting host thread received messages
                            * itself (__atomic: test_tcp_inline reads it) */
    uint64_t no_room_ns;   /* since when has_room refuses (0: it does not) */
    int no_room_logged;
    /* receiving (the proxy, or a waiting host thread: tcp_host_recv) */
    int rx_err;        /* an errno a host thread's recv met, for the proxy to break with */
    int rx_busy;       /* the proxy's last progress call received something */
    int rx_declined;   /* a waiter stopped at the buffered header (the proxy's to take) */
    char *rxbuf;
    size_t rx_len, rx_pos;
    tcp_msg_t cur;
    int in_payload;
    uint32_t pay_type; /* the message whose payload is under way (MSG_PUT, ...) */
    int big_puts;      /* the last payload (PUT, GET_DATA, ACC) was at least DIRECT_MIN */
    char *payload_dst; /* NULL: discard */
    uint64_t payload_left;
    /* ACC: its payload goes to acc_buf (ACC_BUF bytes, made at the first),
     * whose whole elements are added at acc_dst after every read; acc_fill:
     * the bytes of a split element kept */
    char *acc_buf;
    char *acc_dst;
    uint64_t acc_fill;
    uint64_t applied; /* operations applied, acknowledged cumulatively */
    uint64_t acked_sent;
    uint64_t rx_ops;  /* operations received and handled (applied or posted) */
    _Atomic uint8_t *rx_ok; /* by local channel id: connected, may receive */
    /* GPU regions: staging (pinned, TXS_BYTES and NSLOT * CHUNK; made by
     * chan_connect on the application thread before the channel can carry
     * anything) */
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
    /* tcp_snap.c: a GET_DATA from GPU memory (tx index snap_item) being
     * copied out through the snapshot slot before a later write there; the
     * next header waits until it is whole */
    int snapping;
    uint32_t dev_answers;   /* GET_DATA from GPU memory in the send ring */
    int snap_in_slot;       /* a piece of it is at the flusher */
    uint32_t snap_item;
    uint64_t snap_since_ns; /* the last piece's progress, for GPUPORT_TIMEOUT_MS */
    uint64_t snaps;         /* answers copied out so far (tests read it) */
    posted_t posted[POSTED_CAP];
    uint32_t po_head, po_tail;
    gpuport_conn_t *conn;
} tcp_conn_t;

extern _Thread_local char tcp_lock_self; /* its address names the thread */

static inline int tcp_trylock(tcp_conn_t *tc)
{
    const void *none = NULL;

    if (atomic_load_explicit(&tc->lock_owner, memory_order_relaxed) == &tcp_lock_self) {
        tc->lock_depth++;
        return 1;
    }
    return atomic_compare_exchange_strong_explicit(&tc->lock_owner, &none, &tcp_lock_self,
                                                   memory_order_acquire, memory_order_relaxed);
}

static inline void tcp_lock(tcp_conn_t *tc)
{
    for (uint32_t i = 0; !tcp_trylock(tc); i++)
        if (i >= 64)
            sched_yield();
}

/* Lock held: may a waiting host thread receive for itself now
 * (tcp_host_recv)? Not where the proxy must be the one (a break, a
 * goodbye, GPU copies ahead, a large payload or one of GET_DATA or ACC
 * under way or its SO_RCVLOWAT mark set, an error to report), nor where the proxy is busy with the
 * connection anyway (its last pass received something, a header a waiter
 * left it is still waiting for it, the last PUT carried a large payload,
 * messages to send,
 * its own operations awaiting ACKs, which the waiter would have to leave to
 * it): there the waiter would only take the lock and the connection's
 * lines from it. */
static inline int tcp_host_recv_ok(const tcp_conn_t *tc)
{
    return tc->host_recv && !tc->rx_busy && !tc->rx_declined && !tc->big_puts &&
           !tc->broken && !tc->bye_seen && !tc->rx_err &&
           tc->rx_pending == 0 && !tc->snapping && tc->rx_lowat <= 1 &&
           !(tc->in_payload && (tc->dev_payload || tc->payload_left >= DIRECT_MIN ||
                                tc->pay_type != MSG_PUT)) &&
           tc->tx_head == tc->tx_tail && tc->ops_acked >= tc->proxy_ops_end;
}

static inline void tcp_unlock(tcp_conn_t *tc)
{
    int hint;

    if (tc->lock_depth) {
        tc->lock_depth--;
        return;
    }
    hint = tcp_host_recv_ok(tc);
    if (atomic_load_explicit(&tc->host_rx_hint, memory_order_relaxed) != hint)
        atomic_store_explicit(&tc->host_rx_hint, hint, memory_order_relaxed);
    atomic_store_explicit(&tc->lock_owner, NULL, memory_order_release);
}

static inline int tcp_tx_room(const tcp_conn_t *tc, uint32_t n)
{
    return tc->tx_tail - tc->tx_head + n <= tc->tx_cap;
}

static inline tx_item_t *tcp_tx_push(tcp_conn_t *tc, uint32_t type, uint32_t channel,
                                     uint64_t a, uint64_t size, const void *payload)
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

/* bytes payload_dst takes now: the payload's rest, or for an ACC what
 * acc_buf has room for */
static inline uint64_t tcp_payload_room(const tcp_conn_t *tc)
{
    uint64_t room = tc->pay_type == MSG_ACC && tc->payload_dst ? ACC_BUF - tc->acc_fill
                                                                : tc->payload_left;

    return room < tc->payload_left ? room : tc->payload_left;
}

/* The receiving side has handled one more operation; it is applied now
 * unless GPU copies are still ahead of it at the flusher. */
static inline void tcp_rx_op_done(tcp_conn_t *tc)
{
    tc->rx_ops++;
    if (tc->rx_pending == 0)
        tc->applied = tc->rx_ops;
}

/* channel id's channel if it receives on this connection, else NULL */
static inline gpuport_tl_chan_t *tcp_rx_channel(const tcp_conn_t *tc, uint32_t id)
{
    if (id >= gpuport_tl_max_channels(tc->comm) ||
        !atomic_load_explicit(&tc->rx_ok[id], memory_order_acquire))
        return NULL;
    return gpuport_tl_chan_find(tc->conn, id);
}

/* one GET_DATA less reads from a region here (tcp_rma_guard) */
static inline void tcp_answer_out(tcp_conn_t *tc)
{
    if (--tc->answers_in_place == 0)
        tc->answers_lo = tc->answers_hi = 0;
}

/* A GET_DATA was sent, or dropped with the send ring. */
static inline void tcp_answer_gone(tcp_conn_t *tc, tx_item_t *it)
{
    free(it->snap);
    it->snap = NULL;
    if (it->dev_src)
        tc->dev_answers--;
    if (it->copy) {
        free(it->copy);
        it->copy = NULL;
    } else if (it->payload) {
        tcp_answer_out(tc);
    }
}

static inline int tcp_post_full(const tcp_conn_t *tc)
{
    return tc->po_tail - tc->po_head == POSTED_CAP;
}

static inline void tcp_post_push(tcp_conn_t *tc, uint8_t kind, uint64_t marker)
{
    posted_t *p = &tc->posted[tc->po_tail % POSTED_CAP];

    p->kind = kind;
    p->marker = marker;
    tc->po_tail++;
}

/* ---- shared between the files ---- */

/* tcp_addr.c */
socklen_t tcp_sockaddr_of(const tcp_rec_t *p, struct sockaddr_storage *ss);
void tcp_addr_text(const tcp_rec_t *p, char *buf, size_t len);
gpuport_status_t tcp_comm_open(gpuport_tl_comm_t *tl, void *blob);
void tcp_comm_close(gpuport_tl_comm_t *tl);
int tcp_reachable(gpuport_tl_comm_t *tl, int peer, char *why, size_t len);
void tcp_describe(const void *settings, char *buf, size_t len);

/* tcp_cm.c */
gpuport_status_t tcp_conn_open(gpuport_conn_t *conn);
void tcp_conn_close(gpuport_conn_t *conn);

/* tcp_accept.c: the connection `peer` opened to this rank's listener
 * (greeted and checked), or -1 (logged) at the deadline or where the peer
 * runs another version. Connections of other ranks wait in pending. */
int tcp_accept_from(gpuport_tl_comm_t *tl, int peer, uint64_t deadline);
/* Closes the connections still greeting, at the listener's end. */
void tcp_accept_close(struct gpuport_tcp_comm *t);

/* tcp_tx.c */
int tcp_has_room(gpuport_tl_chan_t *ch, uint32_t nops);
int tcp_put(gpuport_tl_chan_t *ch, uint64_t dst_off, uint64_t src_off, uint64_t size,
            int behind_work, gpuport_work_t *work);
int tcp_signal(gpuport_tl_chan_t *ch, uint64_t n, int behind_work, gpuport_work_t *work);
int tcp_put_value(gpuport_tl_chan_t *ch, uint64_t dst_off, uint64_t value, int behind_work,
                  gpuport_work_t *work);
/* an operation into the send ring, awaiting its ACK (payload: a GPU
 * source where device) */
int tcp_queue_op(gpuport_tl_chan_t *ch, uint32_t type, uint64_t off, uint64_t size,
                 uint64_t value, const void *payload, int device);
void tcp_report_fail(gpuport_tl_chan_t *ch, gpuport_status_t status);
void tcp_stage_tx(tcp_conn_t *tc);
int tcp_send_some(tcp_conn_t *tc);
void tcp_queue_ack(tcp_conn_t *tc);
/* application thread (GPUPORT_HOST_INLINE): ops->host_send */
int tcp_host_send(gpuport_tl_chan_t *ch, uint32_t op, uint64_t dst_off, uint64_t src_off,
                  uint64_t size, uint64_t value);

/* tcp_rx.c */
int tcp_recv_some(tcp_conn_t *tc);
/* an error the socket holds (a keepalive unanswered) ends the connection */
void tcp_check_socket(tcp_conn_t *tc);
/* The SO_RCVLOWAT to wait with when `rest` bytes of a payload are still to
 * come (0: not in a payload) and GPUPORT_SOCKET_RCVLOWAT is `max`: half of
 * the rest, at most max, or 1 (any byte) where that is below DIRECT_MIN. */
int tcp_rx_lowat(uint64_t rest, uint64_t max);
/* acts on the whole header in tc->cur, or starts its payload */
void tcp_on_header(tcp_conn_t *tc);
/* n more bytes of the payload under way were written (or discarded) */
void tcp_payload_done(tcp_conn_t *tc, uint64_t n);

/* tcp_rma.c */
int tcp_rma(gpuport_tl_chan_t *ch, const gpuport_op_desc_t *d, int behind_work,
            gpuport_work_t *work);
int tcp_rma_ok(const gpuport_tl_chan_t *ch, uint32_t op, char *why, size_t len);
/* a GET, GET_DATA, ADD or ACC header in tc->cur (a GET: the caller checked
 * the send ring's room for its answer) */
void tcp_rma_header(tcp_conn_t *tc, const tcp_msg_t *m);
/* n more bytes of an ACC's payload are in acc_buf (or discarded) */
void tcp_acc_take(tcp_conn_t *tc, uint64_t n);
/* a GET_DATA's payload has all come */
void tcp_get_data_done(tcp_conn_t *tc);
/* A PUT, VALUE, ADD or ACC header in m, while answers_in_place: the
 * answers queued that read bytes it writes are copied out first, so that a
 * GET reads what was there when it came (the channel's order). */
void tcp_rma_guard(tcp_conn_t *tc, const tcp_msg_t *m);

/* tcp_snap.c */
/* The whole header m is next, and nothing makes it wait yet: 1 if it must
 * wait, for the copy out of GPU memory of an answer still to be read from
 * where m writes (started here, or under way). */
int tcp_snap_wait(tcp_conn_t *tc, const tcp_msg_t *m);
/* POST_SNAP's work completed: its len bytes are in the slot */
void tcp_snap_done(tcp_conn_t *tc, uint64_t len);
/* the bytes of a GET_DATA from GPU memory that tx staging copies: the
 * payload up to where a snapshot took over */
static inline uint64_t tcp_staged_end(const tx_item_t *it)
{
    return it->snap ? it->snap_from : it->hdr.size;
}

/* tcp_hrx.c */
/* application thread (GPUPORT_HOST_INLINE): ops->host_recv */
int tcp_host_recv(gpuport_tl_chan_t *ch);

/* tcp_fail.c */
void tcp_conn_break(tcp_conn_t *tc, gpuport_status_t status, const char *what, int err);
/* The socket ended (closed, reset, an error): after the peer's goodbye,
 * with nothing of this side's in flight and no payload cut short, the
 * peer's orderly end; else the connection breaks with status. */
void tcp_conn_end(tcp_conn_t *tc, gpuport_status_t status, const char *what, int err);
/* the oldest operation in flight, of local channel id, completed */
void tcp_complete(tcp_conn_t *tc, uint32_t id, gpuport_status_t status);
/* the peer's ACK of count operations */
void tcp_apply_acks(tcp_conn_t *tc, uint64_t count);
/* The peer broke the protocol: the connection breaks, logged whatever it
 * loses, with what (it names the field and its value; the log line adds
 * the peer). tcp_protocol_error formats what (fmt: two %llu). */
void tcp_protocol_break(tcp_conn_t *tc, const char *what);
void tcp_protocol_error(tcp_conn_t *tc, const char *fmt, uint64_t a, uint64_t b);

#endif
