/*
 * fuzz_tcp_frame: the tcp transport's receive side (src/transport/tcp/
 * tcp_rx.c: tcp_recv_some, tcp_on_header and the payload state machine, and
 * tcp_hrx.c: a waiting host thread's tcp_host_recv) on an
 * arbitrary byte stream from the peer, over a real socket.
 *
 * A connection (tcp_conn_t, as tcp_conn_open makes it) to rank 1 reads from
 * one end of a socketpair; the harness writes the stream into the other end
 * in pieces of a size the input picks, calling tcp_recv_some in between as
 * the proxy would, and plays the flusher for GPU destinations (it carries
 * out the staging copies, value writes and semaphore updates in order and
 * reports them to tcp's work_done; the staging copies out of it too), and
 * the sender for GET's answers (it takes each GET_DATA out of the send ring
 * as it comes, its bytes from where tcp_send_some would send them, and
 * frees tx staging as sending would). The communicator is a fake with the core's real
 * services (tl_core.c, proxy_*.c) and 8 channel ids:
 *   0  host destination of 64 B, host source of 48 B
 *   1  host destination of 20000 B, host source of 3000 B
 *   2  GPU destination of 5000 B (staged), GPU source of 100 B
 *   3  no destination, no source
 *   4  on this connection, not receiving; host source of 32 B
 *   5  another connection's              6, 7  not open
 * Input: byte 0 (bit 0: the peer closes the socket at the end; bits 1-3:
 * the write size, at least 1/256 of the stream; bit 4: before each of the
 * proxy's calls a host thread waiting on channel 0 receives what it may
 * itself, tcp_host_recv, with the same end state required; bits 5-7: the
 * operations in flight that are GETs, the k-th when bit k % 3 is set),
 * bytes 1-4 the operations this side has in flight (awaiting the peer's
 * ACK) and their channels (byte 4's top bit: see ask_for), then the
 * stream.
 * Invariants, against a model of the wire protocol (tcp_priv.h, tcp_rma.c):
 *   - nothing outside a destination or source region is written (canaries,
 *     and the sanitizer's redzones), and each region holds exactly what the
 *     messages that fit it put, stored and added there, in order;
 *   - a PUT that does not fit fails its channel and writes nothing; a VALUE
 *     lands whole at its aligned offset (through the flusher for the GPU
 *     destination), or, misaligned or outside, fails its channel and writes
 *     nothing; SIGNALs count on open channels only; FAIL marks only a channel open on this
 *     connection; ACKs complete exactly the operations acknowledged, a GET
 *     only once its GET_DATA has come too;
 *   - an ADD adds its 64-bit value (wrapping), an ACC its elements
 *     (fuzz_acc_model: int64 wrapping, float32 and bfloat16 rounded to
 *     nearest even per add), those that have come whole; one outside the
 *     destination, of no elements, of an unknown op, not aligned to its
 *     element there, or into GPU memory fails its channel and adds nothing;
 *   - a GET is answered with one GET_DATA in the send ring, in order: the
 *     getter's offset echoed, and the region's bytes as they were when the
 *     GET came (later writes there copy them out first: tcp_rma_guard; for
 *     the GPU destination the flusher's staging copies read them, or a
 *     snapshot that a later write waits for: tcp_snap.c); a GET
 *     outside the destination fails the channel, and it and one for a
 *     channel not open here are answered with no bytes and the status;
 *   - a GET_DATA answers the oldest get in flight: its bytes exactly where
 *     that get asked (its channel, offset and size, no status) land there,
 *     unless that source cannot take them (outside it, or a GPU source:
 *     the channel fails); no bytes and a status (naming the get's channel
 *     or none) fail that channel with the status, which must be one of
 *     gpuport's errors; anything else (another channel, offset or size,
 *     bytes with no channel, a status that is no error, no get in flight)
 *     is a protocol error and writes nothing;
 *   - a protocol error (unknown type, an ACK count outside what was sent,
 *     a FAIL whose status is no gpuport error),
 *     or a close without goodbye, breaks the connection and fails its
 *     channels; a close after goodbye ends it quietly, unless operations
 *     of this side are still unacknowledged; nothing is read past a
 *     break.
 * What each get in flight asked for (the connection's get_want) is taken
 * from the stream's answers (ask_for), so that answers match what was
 * asked, except where the top bit of byte 4 says to ask 8 bytes more of
 * each: then every answer with bytes is a protocol error.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "internal.h"
#include "transport/tcp/tcp_priv.h"

#define NCH 8
#define Q 128
#define PEER 1
#define HDR ((size_t)sizeof(tcp_msg_t))
#define PEER_IDS 100 /* a channel's id at the peer: its id here plus this */
#define SRC_FILL 0x5a

typedef struct {
    uint64_t size;
    int kind;
    int rx_ok;   /* connected on this connection */
    int on_conn; /* the channel's connection is this one */
    int active;
    uint64_t src_size; /* where this side's gets land */
    int src_kind;
} chdef_t;

static const chdef_t defs[NCH] = {
    {64, GPUPORT_REGION_HOST, 1, 1, 1, 48, GPUPORT_REGION_HOST},
    {20000, GPUPORT_REGION_HOST, 1, 1, 1, 3000, GPUPORT_REGION_HOST},
    {5000, GPUPORT_REGION_DEVICE_VMM, 1, 1, 1, 100, GPUPORT_REGION_DEVICE_VMM},
    {0, GPUPORT_REGION_NONE, 1, 1, 1, 0, GPUPORT_REGION_NONE},
    {256, GPUPORT_REGION_HOST, 0, 1, 1, 32, GPUPORT_REGION_HOST},
    {256, GPUPORT_REGION_HOST, 0, 0, 1, 32, GPUPORT_REGION_HOST},
    {0, GPUPORT_REGION_NONE, 0, 0, 0, 0, GPUPORT_REGION_NONE},
    {0, GPUPORT_REGION_NONE, 0, 0, 0, 0, GPUPORT_REGION_NONE},
};

static struct gpuport_comm g_comm;
static const gpuport_transport_ops_t *g_tcp; /* the transport list's tcp row */
static gpuport_tl_comm_t g_tl;
static gpuport_conn_t g_conn, g_other;
static tcp_conn_t g_tc, g_other_tc;
static unsigned char *g_buf[NCH]; /* canaries, region, canaries */
static unsigned char *g_shadow[NCH];
static unsigned char *g_src[NCH]; /* the same for the sources */
static unsigned char *g_src_shadow[NCH];
static tx_item_t g_tx[Q];
static uint32_t g_inflight[Q];
static tcp_get_want_t g_want[Q]; /* what the gets in flight asked for, by number */
static char *g_rxbuf, *g_rxs, *g_txs;
static _Atomic uint8_t g_rx_ok[NCH];

/* ---- the model's state ---- */
typedef struct {
    int32_t status, peer_status;
    uint64_t sem, work_done;
} mch_t;

static mch_t g_m[NCH];

/* a GET's answer as the model expects it in the send ring */
typedef struct {
    tcp_msg_t hdr;
    int dev;       /* its bytes are copied out of the GPU destination */
    uint64_t from; /* where they are in g_log */
} answer_t;

static answer_t *g_ans;
static size_t g_nans, g_ans_cap, g_ndrained; /* expected; taken out of the ring */
static unsigned char *g_log; /* the answers' bytes */
static size_t g_log_len, g_log_cap;

static int model_rx_channel(uint32_t id)
{
    return id < NCH && defs[id].rx_ok && defs[id].on_conn;
}

static void cas(int32_t *v, int32_t status)
{
    if (*v == GPUPORT_OK)
        *v = status;
}

static void model_fail(uint32_t id, int32_t status)
{
    cas(&g_m[id].status, status);
    cas(&g_m[id].peer_status, status);
}

static void model_complete(uint32_t id, int32_t status)
{
    id &= ~INFLIGHT_GET;
    if (id >= NCH || !defs[id].on_conn)
        return; /* not this connection's: tcp_complete logs it */
    g_m[id].work_done++;
    if (status != GPUPORT_OK)
        cas(&g_m[id].status, status);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    g_comm.rank = 0;
    g_comm.size = 2;
    gpuport_config_load(&g_comm.config); /* the transports' settings in place */
    g_comm.config.max_channels = NCH;
    ((tcp_settings_t *)gpuport_config_tl_settings(&g_comm.config, GPUPORT_TL_KIND_TCP))->queue = Q;
    g_comm.procs = calloc(2, sizeof(*g_comm.procs));
    snprintf(g_comm.procs[PEER].hostname, sizeof(g_comm.procs[PEER].hostname), "peer");
    g_comm.ctrl = aligned_alloc(64, NCH * sizeof(*g_comm.ctrl));
    g_comm.states = aligned_alloc(64, NCH * sizeof(*g_comm.states));
    g_comm.pchans = calloc(NCH, sizeof(*g_comm.pchans));
    FUZZ_CHECK(gpuport_ring_init(&g_comm.proxy.flusher.work, 64, sizeof(gpuport_work_t)) == 0 &&
                   gpuport_ring_init(&g_comm.proxy.flusher.done, 64,
                                     sizeof(gpuport_work_done_t)) == 0,
               "rings");
    g_comm.proxy.flusher.capacity = 64;
    /* the thread that takes the rings' work is this harness (flusher_drain):
     * gpuport_flusher_post must not start a real one */
    atomic_store(&g_comm.proxy.flusher.running, 1);
    for (int k = 1; k < gpuport_transport_nkinds(); k++)
        if (strcmp(gpuport_transport_name(k), "tcp") == 0)
            g_tl.kind = k;
    g_tcp = gpuport_transport_ops(g_tl.kind);
    FUZZ_CHECK(g_tcp && g_tcp->work_done, "tcp is not built");
    g_tl.comm = &g_comm;
    g_tl.ops = g_tcp;
    g_conn.comm = g_other.comm = &g_comm;
    g_conn.tl = g_other.tl = &g_tl;
    g_conn.peer = PEER;
    g_other.peer = PEER + 1;
    g_other.priv = &g_other_tc;
    g_other_tc.broken = GPUPORT_ERR_PEER; /* only ever asked to report a failure: it does not */
    g_rxbuf = malloc(RXBUF);
    g_rxs = malloc((size_t)NSLOT * CHUNK);
    g_txs = malloc(TXS_BYTES);
    for (int i = 0; i < NCH; i++) {
        g_buf[i] = malloc(defs[i].size + 2 * FUZZ_CANARY_BYTES);
        g_shadow[i] = malloc(defs[i].size + 1);
        g_src[i] = malloc(defs[i].src_size + 2 * FUZZ_CANARY_BYTES);
        g_src_shadow[i] = malloc(defs[i].src_size + 1);
    }
    return 0;
}

static void reset(uint64_t sent, uint64_t acked, uint8_t seed, uint8_t gets, int fd)
{
    char *acc_buf = g_tc.acc_buf; /* made at the first ACC, kept as a connection keeps it */

    memset(&g_tc, 0, sizeof(g_tc));
    g_tc.acc_buf = acc_buf;
    g_tc.comm = &g_comm;
    g_tc.peer = PEER;
    g_tc.fd_tx = -1;
    g_tc.fd_rx = fd;
    g_tc.host_recv = 1;
    g_tc.q = Q;
    g_tc.tx = g_tx;
    g_tc.tx_cap = Q;
    g_tc.inflight = g_inflight;
    g_tc.get_want = g_want;
    g_tc.ops_sent = sent;
    g_tc.ops_acked = acked;
    g_tc.acks_seen = acked; /* the highest count an ACK carried (tcp_apply_acks) */
    g_tc.rxbuf = g_rxbuf;
    g_tc.rx_ok = g_rx_ok;
    g_tc.rxs = g_rxs;
    g_tc.txs = g_txs;
    g_tc.conn = &g_conn;
    g_tc.readable = 1;
    g_tc.no_epoll = 1;
    g_conn.priv = &g_tc;
    for (uint64_t k = acked; k < sent; k++) {
        int get = (gets >> ((k - acked) % 3)) & 1;
        g_inflight[k % Q] = (uint32_t)(seed + k * 5) % 10 | (get ? INFLIGHT_GET : 0);
        g_tc.gets_sent += get;
    }
    memset(g_comm.ctrl, 0, NCH * sizeof(*g_comm.ctrl));
    memset(g_comm.states, 0, NCH * sizeof(*g_comm.states));
    memset(g_comm.pchans, 0, NCH * sizeof(*g_comm.pchans));
    g_comm.proxy.async_outstanding = 1ull << 40;
    g_nans = g_ndrained = g_log_len = 0;
    for (int i = 0; i < NCH; i++) {
        gpuport_pchan_t *pc = &g_comm.pchans[i];
        const chdef_t *d = &defs[i];
        memset(g_buf[i], FUZZ_CANARY, d->size + 2 * FUZZ_CANARY_BYTES);
        memset(g_buf[i] + FUZZ_CANARY_BYTES, 0, d->size);
        memset(g_shadow[i], 0, d->size);
        memset(g_src[i], FUZZ_CANARY, d->src_size + 2 * FUZZ_CANARY_BYTES);
        memset(g_src[i] + FUZZ_CANARY_BYTES, SRC_FILL, d->src_size);
        memset(g_src_shadow[i], SRC_FILL, d->src_size);
        memset(&g_m[i], 0, sizeof(g_m[i]));
        atomic_store(&g_rx_ok[i], (uint8_t)d->rx_ok);
        pc->tl.id = (uint32_t)i;
        pc->tl.peer_id = (uint32_t)i + PEER_IDS;
        pc->tl.peer = d->on_conn ? PEER : PEER + 1;
        pc->tl.comm = &g_comm;
        pc->tl.conn = !d->active ? NULL : d->on_conn ? &g_conn : &g_other;
        pc->tl.src.ptr = d->src_size ? g_src[i] + FUZZ_CANARY_BYTES : NULL;
        pc->tl.src.size = d->src_size;
        pc->tl.src.kind = d->src_kind;
        pc->tl.src.alloc_fd = -1;
        pc->tl.local_dst.ptr = d->size ? g_buf[i] + FUZZ_CANARY_BYTES : NULL;
        pc->tl.local_dst.size = d->size;
        pc->tl.local_dst.kind = d->kind;
        pc->tl.local_dst.alloc_fd = -1;
        pc->ops = d->active ? g_tcp : NULL;
        pc->state = &g_comm.states[i];
        atomic_store(&pc->active, d->active);
    }
}

/* The flusher, in order: the staging copies to GPU destinations and the
 * semaphore updates behind them. Returns how many items it completed. */
static int flusher_drain(void)
{
    gpuport_flusher_t *fl = &g_comm.proxy.flusher;
    gpuport_work_t *w;
    int n = 0;

    while ((w = gpuport_ring_peek(&fl->work)) != NULL) {
        FUZZ_CHECK(w->channel == GPUPORT_WORK_CONN, "flusher item for %x", w->channel);
        if (w->kind == GPUPORT_WORK_CU_WRITE) {
            /* a VALUE for the GPU destination: 8 aligned bytes inside it */
            char *dst = w->dst, *base = (char *)g_buf[2] + FUZZ_CANARY_BYTES;
            FUZZ_CHECK(dst >= base && dst - base <= (ptrdiff_t)(defs[2].size - 8) &&
                           ((uintptr_t)dst & 7) == 0,
                       "a value written at offset %td of the GPU destination", dst - base);
            memcpy(dst, &w->value, 8);
        } else if (w->kind == GPUPORT_WORK_CU_FROM_DEVICE) {
            /* an answer's bytes out of the GPU destination, into tx staging */
            const char *src = w->src, *base = (const char *)g_buf[2] + FUZZ_CANARY_BYTES;
            FUZZ_CHECK(src >= base && w->size <= defs[2].size &&
                           src - base <= (ptrdiff_t)(defs[2].size - w->size),
                       "a copy of %llu bytes from offset %td of the GPU destination",
                       (unsigned long long)w->size, src - base);
            FUZZ_CHECK((char *)w->dst >= g_txs && (char *)w->dst + w->size <= g_txs + TXS_BYTES,
                       "a copy out of the GPU destination to outside tx staging");
            memcpy(w->dst, w->src, w->size);
        } else if (w->kind == GPUPORT_WORK_CU_TO_DEVICE) {
            const char *dst = w->dst, *base = (const char *)g_buf[2] + FUZZ_CANARY_BYTES;
            const char *src = w->src;
            FUZZ_CHECK(dst >= base && w->size <= defs[2].size &&
                           dst - base <= (ptrdiff_t)(defs[2].size - w->size),
                       "a staging copy of %llu bytes to offset %td of the GPU destination",
                       (unsigned long long)w->size, dst - base);
            FUZZ_CHECK(src >= g_rxs && src + w->size <= g_rxs + (size_t)NSLOT * CHUNK,
                       "a staging copy from outside rx staging");
            memcpy(w->dst, w->src, w->size);
        } else {
            FUZZ_CHECK(w->kind == GPUPORT_WORK_SEM_ADD && w->value >= 1 &&
                           w->sem >= &g_comm.ctrl[0].value && w->sem <= &g_comm.ctrl[NCH - 1].value,
                       "flusher item of kind %u", w->kind);
            atomic_fetch_add(w->sem, w->value);
        }
        gpuport_ring_pop(&fl->work);
        fl->outstanding--;
        g_tcp->work_done(&g_conn, GPUPORT_OK);
        n++;
    }
    return n;
}

/* A GPU answer's bytes as tcp_send_some would send them: from tx staging
 * where its copies are there, from a snapshot, and where neither, from the
 * region now (the staging copy posted later reads it then: every write
 * posted so far has run). NULL (its bytes not all there yet: a sender
 * would wait) or a buffer the caller frees. */
static unsigned char *dev_bytes(uint32_t idx, const tx_item_t *it)
{
    const unsigned char *region = (const unsigned char *)it->dev_src;
    uint64_t end = tcp_staged_end(it), size = it->hdr.size;
    unsigned char *b = malloc(size ? size : 1);

    FUZZ_CHECK(b != NULL, "out of memory");
    memcpy(b, region, (size_t)end);
    for (uint32_t c = g_tc.tc_head; c != g_tc.tc_tail; c++) {
        const tx_chunk_t *k = &g_tc.tchunk[c % NSLOT];
        if (k->item != idx)
            continue;
        FUZZ_CHECK(c - g_tc.tc_head < g_tc.tc_ready - g_tc.tc_head,
                   "a staging copy still at the flusher after it drained");
        memcpy(b + k->off, g_txs + (size_t)(c % NSLOT) * CHUNK, (size_t)k->len);
    }
    if (it->snap && it->snap_from + it->snap_have < size) {
        free(b);
        return NULL;
    }
    if (it->snap)
        memcpy(b + it->snap_from, it->snap, (size_t)(size - it->snap_from));
    return b;
}

/* The sender, for the answers to the peer's GETs: each GET_DATA checked
 * against the model's next one, bytes and all (read now, as tcp_send_some
 * reads them when it sends), then gone as once sent, with its staging
 * pieces freed. Returns how many. */
static int answers_drain(void)
{
    int n = 0;

    for (; g_tc.tx_head != g_tc.tx_tail; g_tc.tx_head++, g_ndrained++, n++) {
        tx_item_t *it = &g_tc.tx[g_tc.tx_head % g_tc.tx_cap];
        const tcp_msg_t *h = &it->hdr;
        const answer_t *want;
        unsigned char *bytes = NULL;
        FUZZ_CHECK(h->type == MSG_GET_DATA, "message of type %u in the send ring", h->type);
        if (it->dev_src && !(bytes = dev_bytes(g_tc.tx_head, it)))
            break;
        FUZZ_CHECK(g_ndrained < g_nans, "more answers than the model's %zu", g_nans);
        want = &g_ans[g_ndrained];
        FUZZ_CHECK(h->channel == want->hdr.channel && h->a == want->hdr.a &&
                       h->size == want->hdr.size && h->value == want->hdr.value,
                   "answer %zu: channel %u, offset %llu, %llu bytes, status %lld; the model's "
                   "channel %u, offset %llu, %llu bytes, status %lld",
                   g_ndrained, h->channel, (unsigned long long)h->a,
                   (unsigned long long)h->size, (long long)h->value, want->hdr.channel,
                   (unsigned long long)want->hdr.a, (unsigned long long)want->hdr.size,
                   (long long)want->hdr.value);
        if (want->dev)
            FUZZ_CHECK(!it->payload && bytes && memcmp(bytes, g_log + want->from, h->size) == 0,
                       "answer %zu: its bytes from the GPU destination are not the region's "
                       "when the GET came",
                       g_ndrained);
        else
            FUZZ_CHECK(!it->dev_src && (h->size == 0 ? !it->payload
                                                     : it->payload && memcmp(it->payload,
                                                                             g_log + want->from,
                                                                             h->size) == 0),
                       "answer %zu: its bytes are not the region's when the GET came",
                       g_ndrained);
        free(bytes);
        tcp_answer_gone(&g_tc, it);
    }
    /* sent: their staging pieces are free (the flusher drained first) */
    if (n && g_tc.tx_head == g_tc.tx_tail)
        g_tc.tc_head = g_tc.tc_ready;
    return n;
}

enum { OPEN, QUIET, BROKEN };

/* the model's next answer; its bytes (size of them at p) kept in g_log */
static answer_t *answer_add(uint32_t channel, uint64_t a, uint64_t size, int32_t status,
                            const unsigned char *p)
{
    answer_t *ans;

    if (g_nans == g_ans_cap) {
        g_ans_cap = g_ans_cap ? 2 * g_ans_cap : 64;
        g_ans = realloc(g_ans, g_ans_cap * sizeof(*g_ans));
        FUZZ_CHECK(g_ans != NULL, "out of memory");
    }
    ans = &g_ans[g_nans++];
    memset(ans, 0, sizeof(*ans));
    ans->hdr.type = MSG_GET_DATA;
    ans->hdr.channel = channel;
    ans->hdr.a = a;
    ans->hdr.size = size;
    ans->hdr.value = (uint64_t)(int64_t)status;
    if (!p || size == 0)
        return ans;
    while (g_log_cap - g_log_len < size) {
        g_log_cap = g_log_cap ? 2 * g_log_cap : 65536;
        g_log = realloc(g_log, g_log_cap);
        FUZZ_CHECK(g_log != NULL, "out of memory");
    }
    memcpy(g_log + g_log_len, p, size);
    ans->from = g_log_len;
    g_log_len += size;
    return ans;
}

/* on_get: answered with the region's bytes as they are now (a GPU
 * region's later, by reference), or with none and the status */
static void model_get(const tcp_msg_t *m)
{
    uint32_t id = m->channel;
    answer_t *ans;

    if (!model_rx_channel(id)) {
        answer_add(NO_CHANNEL, m->value, 0, GPUPORT_ERR_PEER, NULL);
    } else if (m->a > defs[id].size || m->size > defs[id].size - m->a) {
        model_fail(id, GPUPORT_ERR_OUT_OF_RANGE);
        answer_add(id + PEER_IDS, m->value, 0, GPUPORT_ERR_OUT_OF_RANGE, NULL);
    } else if (gpuport_region_is_device(defs[id].kind)) {
        ans = answer_add(id + PEER_IDS, m->value, m->size, GPUPORT_OK, g_shadow[id] + m->a);
        ans->dev = m->size > 0;
    } else {
        answer_add(id + PEER_IDS, m->value, m->size, GPUPORT_OK, g_shadow[id] + m->a);
    }
}

/* add_dst: 1, the channel failed, where an add of size bytes of elem-byte
 * elements (0: an unknown op) at offset a may not go */
static int model_add_refused(uint32_t id, uint64_t a, uint64_t size, uint32_t elem)
{
    const chdef_t *d = &defs[id];
    int32_t st;

    if (elem == 0 || size == 0)
        st = GPUPORT_ERR_INVALID_ARG;
    else if (a > d->size || size > d->size - a)
        st = GPUPORT_ERR_OUT_OF_RANGE;
    else if (gpuport_region_is_device(d->kind))
        st = GPUPORT_ERR_NOT_SUPPORTED;
    else if (size % elem || ((uintptr_t)g_buf[id] + FUZZ_CANARY_BYTES + a) % elem)
        st = GPUPORT_ERR_INVALID_ARG;
    else
        return 0;
    model_fail(id, st);
    return 1;
}

/* gpuport_status_t's errors, written out again: the only statuses a peer
 * may report (a GET_DATA's refusal, a FAIL) */
static int model_status_error(uint64_t word)
{
    static const int32_t errors[] = {
        GPUPORT_ERR_INVALID_ARG, GPUPORT_ERR_INVALID_CONFIG, GPUPORT_ERR_OUT_OF_RANGE,
        GPUPORT_ERR_NOT_SUPPORTED, GPUPORT_ERR_NO_MEMORY, GPUPORT_ERR_NO_RESOURCE,
        GPUPORT_ERR_AGAIN, GPUPORT_ERR_BUSY, GPUPORT_ERR_TRANSPORT, GPUPORT_ERR_PEER,
        GPUPORT_ERR_CLOSED, GPUPORT_ERR_TIMEOUT, GPUPORT_ERR_VERSION, GPUPORT_ERR_SHUTDOWN,
        GPUPORT_ERR_INTERNAL,
    };

    for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++)
        if (word == (uint64_t)(int64_t)errors[i])
            return 1;
    return 0;
}

/* on_get_data, for an answer to the get that asked w: 1 if it is one (a
 * refusal's status, one of gpuport's errors, fails the get's channel;
 * bytes land where it asked, unless that source cannot take them), 0 for
 * a protocol error */
static int model_get_data(const tcp_msg_t *m, const uint8_t *bytes, size_t avail,
                          const tcp_get_want_t *w)
{
    uint32_t id = w->channel;

    if (m->size == 0 && m->value != 0) {
        if (!model_status_error(m->value))
            return 0;
        if (m->channel != NO_CHANNEL && m->channel != id)
            return 0;
        if (id < NCH && defs[id].active && defs[id].on_conn)
            model_fail(id, (int32_t)(int64_t)m->value);
        return 1;
    }
    if (m->channel != id || m->a != w->off || m->size != w->size || m->value != 0)
        return 0;
    if (!model_rx_channel(id)) {
        /* dropped */
    } else if (m->a > defs[id].src_size || m->size > defs[id].src_size - m->a ||
               (m->size && gpuport_region_is_device(defs[id].src_kind))) {
        model_fail(id, GPUPORT_ERR_PEER);
    } else {
        memcpy(g_src_shadow[id] + m->a, bytes, avail);
    }
    return 1;
}

/* tcp_apply_acks' walk: operations complete in order up to the peer's
 * count, a GET only once its data has come; returns how far it got */
static uint64_t model_acks(uint64_t acked, uint64_t count, uint64_t gets_got,
                           uint64_t *gets_done)
{
    for (; acked < count; acked++) {
        uint32_t id = g_inflight[acked % Q];
        if (id & INFLIGHT_GET) {
            if (*gets_done == gets_got)
                break;
            ++*gets_done;
        }
        model_complete(id, GPUPORT_OK);
    }
    return acked;
}

/* The protocol as tcp_priv.h, tcp_rx.c's and tcp_rma.c's comments state it,
 * over the whole stream s (what reaches the socket): the model's state in
 * g_m, g_shadow, g_src_shadow and g_ans; returns how the connection ends,
 * with *rx_ops_p the operations received whole (not GET_DATA, an answer),
 * *acked_p the operations acknowledged and *gets_p the GET_DATA received
 * whole. */
static int model(const uint8_t *s, size_t len, int eof, uint64_t sent, uint64_t acked,
                 uint64_t *rx_ops_p, uint64_t *acked_p, uint64_t *gets_p)
{
    size_t pos = 0;
    uint64_t rx_ops = 0, acks_seen = acked, gets_sent = 0, gets_got = 0, gets_done = 0;
    int bye = 0, in_payload = 0, end = OPEN;

    for (uint64_t k = acked; k < sent; k++)
        gets_sent += (g_inflight[k % Q] & INFLIGHT_GET) != 0;

    while (end == OPEN && len - pos >= HDR) {
        tcp_msg_t m;
        uint32_t id;
        memcpy(&m, s + pos, HDR);
        pos += HDR;
        id = m.channel;
        switch (m.type) {
        case MSG_PUT: {
            size_t avail = m.size < len - pos ? (size_t)m.size : len - pos;
            if (!model_rx_channel(id)) {
                /* discarded */
            } else if (m.a > defs[id].size || m.size > defs[id].size - m.a) {
                cas(&g_m[id].status, GPUPORT_ERR_OUT_OF_RANGE);
                cas(&g_m[id].peer_status, GPUPORT_ERR_OUT_OF_RANGE);
            } else if (defs[id].kind == GPUPORT_REGION_HOST || avail == m.size) {
                /* host regions take what arrives; GPU ones whole pieces */
                memcpy(g_shadow[id] + m.a, s + pos, avail);
            }
            if (avail < m.size) {
                in_payload = 1;
                pos = len;
                break;
            }
            pos += avail;
            rx_ops++;
            break;
        }
        case MSG_VALUE:
            if (!model_rx_channel(id)) {
                /* dropped */
            } else if (m.a % 8 || m.a > defs[id].size || defs[id].size - m.a < 8) {
                int32_t st = m.a % 8 ? GPUPORT_ERR_INVALID_ARG : GPUPORT_ERR_OUT_OF_RANGE;
                cas(&g_m[id].status, st);
                cas(&g_m[id].peer_status, st);
            } else {
                memcpy(g_shadow[id] + m.a, &m.value, 8);
            }
            rx_ops++;
            break;
        case MSG_SIGNAL:
            /* a count of folded signals; none is a protocol error */
            if (m.a == 0) {
                end = BROKEN;
                break;
            }
            if (model_rx_channel(id))
                g_m[id].sem += m.a;
            rx_ops++;
            break;
        case MSG_ACK:
            if (m.a > sent || m.a < acks_seen) {
                end = BROKEN;
                break;
            }
            acks_seen = m.a;
            acked = model_acks(acked, acks_seen, gets_got, &gets_done);
            break;
        case MSG_GET:
            model_get(&m);
            rx_ops++;
            break;
        case MSG_GET_DATA: {
            size_t avail = m.size < len - pos ? (size_t)m.size : len - pos;
            if (gets_got == gets_sent) {
                end = BROKEN; /* no get in flight to answer */
                break;
            }
            if (!model_get_data(&m, s + pos, avail, &g_want[gets_got % Q])) {
                end = BROKEN;
                break;
            }
            if (avail < m.size) {
                in_payload = 1;
                pos = len;
                break;
            }
            pos += avail;
            gets_got++;
            acked = model_acks(acked, acks_seen, gets_got, &gets_done);
            break;
        }
        case MSG_ADD:
            if (model_rx_channel(id) && !model_add_refused(id, m.a, 8, 8))
                fuzz_acc_model(g_shadow[id] + m.a, (const unsigned char *)&m.value, 8,
                               GPUPORT_OP_ACC_INT64);
            rx_ops++;
            break;
        case MSG_ACC: {
            size_t avail = m.size < len - pos ? (size_t)m.size : len - pos;
            uint32_t elem = m.value == GPUPORT_OP_ACC_INT64     ? 8
                            : m.value == GPUPORT_OP_ACC_FLOAT32 ? 4
                            : m.value == GPUPORT_OP_ACC_BFLOAT16 ? 2
                                                                 : 0;
            /* the elements that have come whole are added */
            if (model_rx_channel(id) && !model_add_refused(id, m.a, m.size, elem))
                fuzz_acc_model(g_shadow[id] + m.a, s + pos, avail, (uint32_t)m.value);
            if (avail < m.size) {
                in_payload = 1;
                pos = len;
                break;
            }
            pos += avail;
            rx_ops++;
            break;
        }
        case MSG_FAIL:
            if (!model_status_error(m.a)) {
                end = BROKEN;
                break;
            }
            if (model_rx_channel(id))
                cas(&g_m[id].peer_status, (int32_t)(int64_t)m.a);
            break;
        case MSG_BYE:
            bye = 1;
            break;
        default:
            end = BROKEN;
        }
    }
    /* quiet: the peer's orderly end, which comes only once this side's
     * operations are acknowledged */
    if (end == OPEN && eof)
        end = bye && !in_payload && acked == sent ? QUIET : BROKEN;
    if (end == BROKEN) {
        for (uint32_t i = 0; i < NCH; i++) {
            if (defs[i].active && defs[i].on_conn) {
                cas(&g_m[i].status, GPUPORT_ERR_PEER);
                cas(&g_m[i].peer_status, GPUPORT_ERR_PEER);
            }
        }
        for (; acked < sent; acked++)
            model_complete(g_inflight[acked % Q], GPUPORT_ERR_PEER);
    }
    *rx_ops_p = rx_ops;
    *acked_p = acked;
    *gets_p = gets_got;
    return end;
}

/* The sender's side of the gets in flight: what each asked for, as the
 * stream's n-th GET_DATA answers the n-th (its channel the get's own, its
 * offset and size the answer's), or 8 bytes more where `more` is set; a
 * get the stream leaves unanswered, or answers with a refusal, asked for
 * 8 bytes at 0. */
static void ask_for(const uint8_t *s, size_t len, uint64_t acked, uint64_t sent, int more)
{
    size_t pos = 0;
    uint64_t n = 0;

    for (uint64_t k = acked; k < sent; k++)
        if (g_inflight[k % Q] & INFLIGHT_GET)
            g_want[n++ % Q] = (tcp_get_want_t){g_inflight[k % Q] & ~INFLIGHT_GET, 0, 8};
    for (uint64_t a = 0; a < n && len - pos >= HDR;) {
        tcp_msg_t m;
        memcpy(&m, s + pos, HDR);
        pos += HDR;
        if (m.type == MSG_GET_DATA && !(m.size == 0 && m.value != 0)) {
            g_want[a % Q].off = m.a;
            g_want[a % Q].size = m.size + (more ? 8 : 0);
        }
        a += m.type == MSG_GET_DATA;
        if (tcp_msg_has_payload(m.type)) {
            if (m.size >= len - pos)
                return;
            pos += (size_t)m.size;
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    static const size_t pieces[8] = {0, 1, 3, 31, 32, 33, 1000, 16384};
    fuzz_in_t in = {data, len};
    uint8_t flags = fuzz_u8(&in), nsent = fuzz_u8(&in), nacked = fuzz_u8(&in);
    uint8_t high = fuzz_u8(&in), seed = fuzz_u8(&in);
    int eof = flags & 1, host = flags & 16, shut = 0, end, idle = 0, sv[2];
    size_t piece = pieces[(flags >> 1) & 7], written = 0;
    uint64_t acked = ((uint64_t)high << 40) + nacked, sent = acked + nsent % (Q + 1);
    uint64_t rx_ops, want_acked, gets;
    size_t slen = in.left;
    uint8_t *s = malloc(slen ? slen : 1);

    FUZZ_CHECK(s != NULL, "out of memory");
    memcpy(s, in.p, slen);

    FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0,
               "socketpair: %s", strerror(errno));
    reset(sent, acked, seed, flags >> 5, sv[0]);
    ask_for(s, slen, acked, sent, seed & 0x80);
    /* first, so that the answers are checked as they are taken */
    end = model(s, slen, eof, sent, acked, &rx_ops, &want_acked, &gets);
    if (piece == 0)
        piece = slen ? slen : 1;
    /* at most 256 writes: small pieces split headers, without a system
     * call per byte of a long stream */
    if (piece < slen / 256)
        piece = slen / 256;
    for (long round = 0; idle < 2; round++) {
        int progress = 0;
        FUZZ_CHECK(round < 10000000, "no end after %ld rounds", round);
        if (g_tc.broken) {
            written = slen; /* nothing reads past a break: the rest stays unsent */
            shut = 1;
        } else if (written < slen) {
            size_t n = slen - written < piece ? slen - written : piece;
            ssize_t k = send(sv[1], s + written, n, MSG_DONTWAIT | MSG_NOSIGNAL);
            if (k > 0) {
                written += (size_t)k;
                progress = 1;
            }
        } else if (eof && !shut) {
            shutdown(sv[1], SHUT_WR);
            shut = progress = 1;
        }
        if (!g_tc.broken && host) {
            /* a host wait on channel 0 first, its hint as an unlock leaves it */
            atomic_store(&g_tc.host_rx_hint, tcp_host_recv_ok(&g_tc));
            progress |= tcp_host_recv(&g_comm.pchans[0].tl);
        }
        if (!g_tc.broken)
            progress |= tcp_recv_some(&g_tc);
        progress |= flusher_drain() > 0;
        progress |= answers_drain() > 0;
        idle = progress || written < slen || (eof && !shut) ? 0 : idle + 1;
    }
    close(sv[0]);
    close(sv[1]);

    FUZZ_CHECK(end == OPEN ? g_tc.broken == 0 : g_tc.broken == GPUPORT_ERR_PEER,
               "connection ends %d, broken %d", end, g_tc.broken);
    FUZZ_CHECK(g_tc.fail_status == (end == BROKEN ? GPUPORT_ERR_PEER : 0), "fail status %d",
               g_tc.fail_status);
    FUZZ_CHECK(g_tc.ops_acked == want_acked, "acknowledged %llu, the model %llu",
               (unsigned long long)g_tc.ops_acked, (unsigned long long)want_acked);
    FUZZ_CHECK(end != OPEN || g_tc.rx_ops == rx_ops, "received %llu operations, the model %llu",
               (unsigned long long)g_tc.rx_ops, (unsigned long long)rx_ops);
    FUZZ_CHECK(g_tc.rx_pending == 0, "%llu items left at the flusher",
               (unsigned long long)g_tc.rx_pending);
    FUZZ_CHECK(end != OPEN || g_tc.gets_got == gets, "received %llu answers, the model %llu",
               (unsigned long long)g_tc.gets_got, (unsigned long long)gets);
    /* a break drops the answers not yet sent: those taken are the first */
    FUZZ_CHECK(end == BROKEN || g_ndrained == g_nans, "%zu answers sent, the model %zu",
               g_ndrained, g_nans);
    FUZZ_CHECK(g_tc.answers_in_place == 0, "%u answers still read from a region",
               g_tc.answers_in_place);
    FUZZ_CHECK(g_tc.dev_answers == 0 && !g_tc.snapping, "%u answers from GPU memory still "
               "counted (a copy out under way: %d)",
               g_tc.dev_answers, g_tc.snapping);
    for (int i = 0; i < NCH; i++) {
        const unsigned char *b = g_buf[i];
        uint64_t size = defs[i].size;
        int32_t st = atomic_load(&g_comm.states[i].status);
        int32_t ps = atomic_load(&g_comm.ctrl[i].peer_status);
        uint64_t sem = atomic_load(&g_comm.ctrl[i].value);
        FUZZ_CHECK(fuzz_canary_ok(b, FUZZ_CANARY_BYTES) &&
                       fuzz_canary_ok(b + FUZZ_CANARY_BYTES + size, FUZZ_CANARY_BYTES),
                   "channel %d: a canary around the destination changed", i);
        FUZZ_CHECK(memcmp(b + FUZZ_CANARY_BYTES, g_shadow[i], size) == 0,
                   "channel %d: the destination differs from the model's", i);
        FUZZ_CHECK(fuzz_canary_ok(g_src[i], FUZZ_CANARY_BYTES) &&
                       fuzz_canary_ok(g_src[i] + FUZZ_CANARY_BYTES + defs[i].src_size,
                                      FUZZ_CANARY_BYTES),
                   "channel %d: a canary around the source changed", i);
        FUZZ_CHECK(memcmp(g_src[i] + FUZZ_CANARY_BYTES, g_src_shadow[i], defs[i].src_size) == 0,
                   "channel %d: the source differs from the model's", i);
        FUZZ_CHECK(st == g_m[i].status, "channel %d: state %d, the model's %d", i, st,
                   g_m[i].status);
        FUZZ_CHECK(ps == g_m[i].peer_status, "channel %d: peer status %d, the model's %d", i, ps,
                   g_m[i].peer_status);
        FUZZ_CHECK(sem == g_m[i].sem, "channel %d: %llu signals, the model's %llu", i,
                   (unsigned long long)sem, (unsigned long long)g_m[i].sem);
        FUZZ_CHECK(g_comm.pchans[i].work_done == g_m[i].work_done,
                   "channel %d: %llu completions, the model's %llu", i,
                   (unsigned long long)g_comm.pchans[i].work_done,
                   (unsigned long long)g_m[i].work_done);
    }
    free(s);
    return 0;
}
