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
 * reports them to tcp's work_done). The communicator is a fake with the
 * core's real services (tl_core.c, proxy_*.c) and 8 channel ids:
 *   0  host destination of 64 B          1  host destination of 20000 B
 *   2  GPU destination of 5000 B (staged) 3  no destination
 *   4  on this connection, not receiving  5  another connection's
 *   6, 7  not open
 * Input: byte 0 (bit 0: the peer closes the socket at the end; bits 1-3:
 * the write size, at least 1/256 of the stream; bit 4: before each of the
 * proxy's calls a host thread waiting on channel 0 receives what it may
 * itself, tcp_host_recv, with the same end state required), bytes 1-4 the operations this side has in flight
 * (awaiting the peer's ACK) and their channels, then the stream.
 * Invariants, against a model of the wire protocol (tcp_priv.h):
 *   - nothing outside a destination region is written (canaries, and the
 *     sanitizer's redzones), and each region holds exactly the payloads of
 *     the PUTs that fit it, in order;
 *   - a PUT that does not fit fails its channel and writes nothing; a VALUE
 *     lands whole at its aligned offset (through the flusher for the GPU
 *     destination), or, misaligned or outside, fails its channel and writes
 *     nothing; SIGNALs count on open channels only; FAIL marks only a channel open on this
 *     connection; ACKs complete exactly the operations acknowledged;
 *   - a protocol error (unknown type, an ACK count outside what was sent),
 *     or a close without goodbye, breaks the connection and fails its
 *     channels; a close after goodbye ends it quietly, unless operations
 *     of this side are still unacknowledged; nothing is read past a
 *     break.
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

typedef struct {
    uint64_t size;
    int kind;
    int rx_ok;   /* connected on this connection */
    int on_conn; /* the channel's connection is this one */
    int active;
} chdef_t;

static const chdef_t defs[NCH] = {
    {64, GPUPORT_REGION_HOST, 1, 1, 1},
    {20000, GPUPORT_REGION_HOST, 1, 1, 1},
    {5000, GPUPORT_REGION_DEVICE_VMM, 1, 1, 1},
    {0, GPUPORT_REGION_NONE, 1, 1, 1},
    {256, GPUPORT_REGION_HOST, 0, 1, 1},
    {256, GPUPORT_REGION_HOST, 0, 0, 1},
    {0, GPUPORT_REGION_NONE, 0, 0, 0},
    {0, GPUPORT_REGION_NONE, 0, 0, 0},
};

static struct gpuport_comm g_comm;
static const gpuport_transport_ops_t *g_tcp; /* the transport list's tcp row */
static gpuport_tl_comm_t g_tl;
static gpuport_conn_t g_conn, g_other;
static tcp_conn_t g_tc, g_other_tc;
static unsigned char *g_buf[NCH]; /* canaries, region, canaries */
static unsigned char *g_shadow[NCH];
static tx_item_t g_tx[Q];
static uint32_t g_inflight[Q];
static char *g_rxbuf, *g_rxs;
static _Atomic uint8_t g_rx_ok[NCH];

/* ---- the model's state ---- */
typedef struct {
    int32_t status, peer_status;
    uint64_t sem, work_done;
} mch_t;

static mch_t g_m[NCH];

static int model_rx_channel(uint32_t id)
{
    return id < NCH && defs[id].rx_ok && defs[id].on_conn;
}

static void cas(int32_t *v, int32_t status)
{
    if (*v == GPUPORT_OK)
        *v = status;
}

static void model_complete(uint32_t id, int32_t status)
{
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
    for (int i = 0; i < NCH; i++) {
        g_buf[i] = malloc(defs[i].size + 2 * FUZZ_CANARY_BYTES);
        g_shadow[i] = malloc(defs[i].size + 1);
    }
    return 0;
}

static void reset(uint64_t sent, uint64_t acked, uint8_t seed, int fd)
{
    memset(&g_tc, 0, sizeof(g_tc));
    g_tc.comm = &g_comm;
    g_tc.peer = PEER;
    g_tc.fd_tx = -1;
    g_tc.fd_rx = fd;
    g_tc.host_recv = 1;
    g_tc.q = Q;
    g_tc.tx = g_tx;
    g_tc.tx_cap = Q;
    g_tc.inflight = g_inflight;
    g_tc.ops_sent = sent;
    g_tc.ops_acked = acked;
    g_tc.acks_seen = acked; /* the highest count an ACK carried (tcp_apply_acks) */
    g_tc.rxbuf = g_rxbuf;
    g_tc.rx_ok = g_rx_ok;
    g_tc.rxs = g_rxs;
    g_tc.conn = &g_conn;
    g_tc.readable = 1;
    g_tc.no_epoll = 1;
    g_conn.priv = &g_tc;
    for (uint64_t k = acked; k < sent; k++)
        g_inflight[k % Q] = (uint32_t)(seed + k * 5) % 10;
    memset(g_comm.ctrl, 0, NCH * sizeof(*g_comm.ctrl));
    memset(g_comm.states, 0, NCH * sizeof(*g_comm.states));
    memset(g_comm.pchans, 0, NCH * sizeof(*g_comm.pchans));
    g_comm.proxy.async_outstanding = 1ull << 40;
    for (int i = 0; i < NCH; i++) {
        gpuport_pchan_t *pc = &g_comm.pchans[i];
        const chdef_t *d = &defs[i];
        memset(g_buf[i], FUZZ_CANARY, d->size + 2 * FUZZ_CANARY_BYTES);
        memset(g_buf[i] + FUZZ_CANARY_BYTES, 0, d->size);
        memset(g_shadow[i], 0, d->size);
        memset(&g_m[i], 0, sizeof(g_m[i]));
        atomic_store(&g_rx_ok[i], (uint8_t)d->rx_ok);
        pc->tl.id = (uint32_t)i;
        pc->tl.peer_id = (uint32_t)i + 100;
        pc->tl.peer = d->on_conn ? PEER : PEER + 1;
        pc->tl.comm = &g_comm;
        pc->tl.conn = !d->active ? NULL : d->on_conn ? &g_conn : &g_other;
        pc->tl.src.kind = GPUPORT_REGION_NONE;
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

enum { OPEN, QUIET, BROKEN };

/* The protocol as tcp_priv.h and tcp_rx.c's comments state it, over the
 * whole stream s (what reaches the socket): the model's state in g_m and
 * g_shadow; returns how the connection ends, with *rx_ops_p the PUT and
 * SIGNAL operations received whole and *acked_p the operations acknowledged. */
static int model(const uint8_t *s, size_t len, int eof, uint64_t sent, uint64_t acked,
                 uint64_t *rx_ops_p, uint64_t *acked_p)
{
    size_t pos = 0;
    uint64_t rx_ops = 0;
    int bye = 0, in_payload = 0, end = OPEN;

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
            if (m.a > sent || m.a < acked) {
                end = BROKEN;
                break;
            }
            for (; acked < m.a; acked++)
                model_complete(g_inflight[acked % Q], GPUPORT_OK);
            break;
        case MSG_FAIL:
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
    return end;
}

/* The get/atomic_add/accumulate messages (GET, GET_DATA, ADD, ACC: types 7
 * to 10) are not in the model yet (test_mpi_rma tests them over tcp): the
 * first such header in the stream becomes type 99, which model and
 * receiver alike take for a protocol error that ends the connection. */
static void unmodelled_to_unknown(uint8_t *s, size_t len)
{
    size_t pos = 0;

    while (len - pos >= HDR) {
        tcp_msg_t m;
        memcpy(&m, s + pos, HDR);
        if (m.type >= 7 && m.type <= 10) {
            m.type = 99;
            memcpy(s + pos, &m, HDR);
            return;
        }
        pos += HDR;
        if (m.type == MSG_PUT) {
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
    uint64_t rx_ops, want_acked;
    size_t slen = in.left;
    uint8_t *s = malloc(slen ? slen : 1);

    FUZZ_CHECK(s != NULL, "out of memory");
    memcpy(s, in.p, slen);
    unmodelled_to_unknown(s, slen);

    FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0,
               "socketpair: %s", strerror(errno));
    reset(sent, acked, seed, sv[0]);
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
        idle = progress || written < slen || (eof && !shut) ? 0 : idle + 1;
    }
    close(sv[0]);
    close(sv[1]);

    end = model(s, slen, eof, sent, acked, &rx_ops, &want_acked);
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
