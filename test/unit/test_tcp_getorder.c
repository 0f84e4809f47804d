/*
 * tcp: a GET answered from GPU memory reads the bytes as of its place in
 * the channel's order, whatever later PUT or VALUE writes there
 * (tcp_snap.c), and the answering side's reader never waits for its peer
 * to read meanwhile.
 *
 * One connection's proxy side (tcp_conn_t as tcp_conn_open makes it, driven
 * through the transport's own progress and work_done) over two
 * socketpairs: the test writes the peer's stream into one and reads this
 * side's messages from the other. Channel 0's destination stands for GPU
 * memory (a VMM region, host bytes here); the test is the flusher, running
 * its staging copies and value writes in posting order as the real one does
 * on its one stream. Cases:
 *  - a GET larger than tx staging (its first 8 MiB staged, then staging is
 *    full: nothing is read from this side yet), then a PUT and a VALUE into
 *    its unstaged part: the reader takes both without any byte read by the
 *    peer, the answer is the bytes from before them, the region ends with
 *    the writes; one answer copied out (tcp_snap.c's snapshot);
 *  - two GETs (the second not staged at all) and writes into each, and one
 *    beside them that touches neither: two answers copied out, both right;
 *  - a small GET and a PUT over it in one read, staging free: staged in
 *    order, no copy out, the answer right;
 *  - the flusher stops: the reader's wait for the copy out ends the
 *    connection after GPUPORT_TIMEOUT_MS (GPUPORT_ERR_TIMEOUT, the channel
 *    failed), and the flusher's late completions are harmless.
 * Without tcp_snap.c's ordering the first three fail: the later write's
 * copy to the GPU is posted before the answer's staging copy reads there.
 * `test_tcp_getorder [big|two|small|stuck]` runs one case.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "capture.h"
#include "check.h"
#include "internal.h"
#include "transport/tcp/tcp_priv.h"
#include "util.h"

#define MIB (1ull << 20)
#define REGION (16 * MIB)
#define NCH 2
#define Q 128
#define PEER 1
#define HDR sizeof(tcp_msg_t)
#define VALUE 0x0123456789abcdefull

static struct gpuport_comm g_comm;
static const gpuport_transport_ops_t *g_tcp;
static gpuport_tl_comm_t g_tl;
static gpuport_conn_t g_conn;
static tcp_conn_t *g_tc;
static unsigned char *g_dst;     /* channel 0's destination: "GPU" memory */
static unsigned char g_src[64];  /* its source, host memory (not used here) */
static _Atomic uint8_t g_rx_ok[NCH];
static int g_flusher_on = 1;
static int g_in[2], g_out[2]; /* the peer's stream in; this side's messages out */

static unsigned char pat_a(uint64_t i)
{
    return (unsigned char)((i * 131 + (i >> 20) * 7 + 1) & 0xff);
}

static unsigned char pat_b(uint64_t i)
{
    return (unsigned char)((i * 29 + 0x5a) & 0xff);
}

static void setup(void)
{
    g_comm.rank = 0;
    g_comm.size = 2;
    gpuport_config_load(&g_comm.config);
    g_comm.config.max_channels = NCH;
    g_comm.timeout_ns = 100 * 1000 * 1000ull;
    g_comm.procs = calloc(2, sizeof(*g_comm.procs));
    snprintf(g_comm.procs[PEER].hostname, sizeof(g_comm.procs[PEER].hostname), "peer");
    g_comm.ctrl = aligned_alloc(64, NCH * sizeof(*g_comm.ctrl));
    g_comm.states = aligned_alloc(64, NCH * sizeof(*g_comm.states));
    g_comm.pchans = calloc(NCH, sizeof(*g_comm.pchans));
    CHECK(g_comm.procs && g_comm.ctrl && g_comm.states && g_comm.pchans);
    CHECK(gpuport_ring_init(&g_comm.proxy.flusher.work, 256, sizeof(gpuport_work_t)) == 0);
    CHECK(gpuport_ring_init(&g_comm.proxy.flusher.done, 256, sizeof(gpuport_work_done_t)) == 0);
    g_comm.proxy.flusher.capacity = 256;
    /* this test is the flusher: gpuport_flusher_post must not start one */
    atomic_store(&g_comm.proxy.flusher.running, 1);
    for (int k = 1; k < gpuport_transport_nkinds(); k++)
        if (strcmp(gpuport_transport_name(k), "tcp") == 0)
            g_tl.kind = k;
    g_tcp = gpuport_transport_ops(g_tl.kind);
    CHECK_MSG(g_tcp && g_tcp->progress && g_tcp->work_done, "tcp is not built");
    g_tl.comm = &g_comm;
    g_tl.ops = g_tcp;
    g_conn.comm = &g_comm;
    g_conn.tl = &g_tl;
    g_conn.peer = PEER;
    g_dst = malloc(REGION);
    CHECK(g_dst);
}

/* A fresh connection, channel 0 open on it, the region holding A. */
static void reset(void)
{
    tcp_conn_t *tc = calloc(1, sizeof(*tc));
    gpuport_pchan_t *pc = &g_comm.pchans[0];

    CHECK(tc);
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, g_in) == 0);
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, g_out) == 0);
    tc->comm = &g_comm;
    tc->peer = PEER;
    tc->fd_rx = g_in[0];
    tc->fd_tx = g_out[0];
    tc->q = Q;
    tc->tx_cap = 2 * Q;
    tc->tx = calloc(tc->tx_cap, sizeof(*tc->tx));
    tc->inflight = calloc(Q, sizeof(*tc->inflight));
    tc->rxbuf = malloc(RXBUF);
    tc->rx_ok = g_rx_ok;
    tc->txs = malloc(TXS_BYTES);
    tc->rxs = malloc((size_t)NSLOT * CHUNK);
    CHECK(tc->tx && tc->inflight && tc->rxbuf && tc->txs && tc->rxs);
    tc->conn = &g_conn;
    tc->readable = 1;
    tc->no_epoll = 1;
    g_conn.priv = tc;
    atomic_store(&g_conn.broken, 0);
    g_tc = tc;
    memset(g_comm.ctrl, 0, NCH * sizeof(*g_comm.ctrl));
    memset(g_comm.states, 0, NCH * sizeof(*g_comm.states));
    memset(g_comm.pchans, 0, NCH * sizeof(*g_comm.pchans));
    pc->tl.id = 0;
    pc->tl.peer_id = 0;
    pc->tl.peer = PEER;
    pc->tl.comm = &g_comm;
    pc->tl.conn = &g_conn;
    pc->tl.src.ptr = g_src;
    pc->tl.src.size = sizeof(g_src);
    pc->tl.src.kind = GPUPORT_REGION_HOST;
    pc->tl.src.alloc_fd = -1;
    pc->tl.local_dst.ptr = g_dst;
    pc->tl.local_dst.size = REGION;
    pc->tl.local_dst.kind = GPUPORT_REGION_DEVICE_VMM;
    pc->tl.local_dst.alloc_fd = -1;
    pc->ops = g_tcp;
    pc->state = &g_comm.states[0];
    atomic_store(&pc->active, 1);
    atomic_store(&g_rx_ok[0], 1);
    for (uint64_t i = 0; i < REGION; i++)
        g_dst[i] = pat_a(i);
    g_flusher_on = 1;
}

static void teardown(void)
{
    tcp_conn_t *tc = g_tc;
    gpuport_work_t *w;

    /* what the flusher still holds completes as it would, late */
    while ((w = gpuport_ring_peek(&g_comm.proxy.flusher.work)) != NULL) {
        gpuport_ring_pop(&g_comm.proxy.flusher.work);
        g_comm.proxy.flusher.outstanding--;
        g_tcp->work_done(&g_conn, GPUPORT_OK);
    }
    for (uint32_t i = tc->tx_head; i != tc->tx_tail; i++) {
        free(tc->tx[i % tc->tx_cap].copy);
        free(tc->tx[i % tc->tx_cap].snap);
    }
    free(tc->tx);
    free(tc->inflight);
    free(tc->rxbuf);
    free(tc->txs);
    free(tc->rxs);
    free(tc->acc_buf);
    free(tc);
    close(g_in[0]);
    close(g_in[1]);
    close(g_out[0]);
    close(g_out[1]);
}

/* The flusher: every item posted, in order, as its one stream runs them. */
static int flusher_run(void)
{
    gpuport_flusher_t *fl = &g_comm.proxy.flusher;
    gpuport_work_t *w;
    int n = 0;

    while (g_flusher_on && (w = gpuport_ring_peek(&fl->work)) != NULL) {
        CHECK_MSG(w->channel == GPUPORT_WORK_CONN, "flusher item for %x", w->channel);
        switch (w->kind) {
        case GPUPORT_WORK_CU_TO_DEVICE:
        case GPUPORT_WORK_CU_FROM_DEVICE:
            memcpy(w->dst, w->src, w->size);
            break;
        case GPUPORT_WORK_CU_WRITE:
            memcpy(w->dst, &w->value, 8);
            break;
        case GPUPORT_WORK_SEM_ADD:
            atomic_fetch_add(w->sem, w->value);
            break;
        default:
            CHECK_MSG(0, "flusher item of kind %u", w->kind);
        }
        gpuport_ring_pop(&fl->work);
        fl->outstanding--;
        g_tcp->work_done(&g_conn, GPUPORT_OK);
        n++;
    }
    return n;
}

/* ---- the peer's stream ---- */

static unsigned char *g_stream;
static size_t g_len, g_cap, g_written;

static void emit(const void *p, size_t n)
{
    if (g_cap - g_len < n) {
        g_cap = (g_len + n) * 2;
        g_stream = realloc(g_stream, g_cap);
        CHECK(g_stream);
    }
    memcpy(g_stream + g_len, p, n);
    g_len += n;
}

static void emit_hdr(uint32_t type, uint64_t a, uint64_t size, uint64_t value)
{
    tcp_msg_t m;

    memset(&m, 0, sizeof(m));
    m.type = type;
    m.channel = 0;
    m.a = a;
    m.size = size;
    m.value = value;
    emit(&m, sizeof(m));
}

static void emit_get(uint64_t off, uint64_t size)
{
    emit_hdr(MSG_GET, off, size, off); /* lands at the getter's offset off */
}

static void emit_put(uint64_t off, uint64_t size)
{
    unsigned char *p = malloc(size);

    CHECK(p);
    emit_hdr(MSG_PUT, off, size, 0);
    for (uint64_t i = 0; i < size; i++)
        p[i] = pat_b(off + i);
    emit(p, size);
    free(p);
}

static void emit_value(uint64_t off)
{
    emit_hdr(MSG_VALUE, off, 0, VALUE);
}

/* The proxy's passes and the flusher, with the stream written as the socket
 * takes it and nothing of this side's read: the reader must take every
 * operation (nops) and apply it all the same. */
static void feed(uint64_t nops)
{
    uint64_t deadline = gpuport_now_ns() + 5000 * 1000 * 1000ull;

    while (g_tc->rx_ops < nops || g_tc->applied < nops) {
        CHECK_MSG(gpuport_now_ns() < deadline, "the reader took %llu of %llu operations (%llu "
                  "applied) in 5 s while the peer read nothing: it waits for the peer",
                  (unsigned long long)g_tc->rx_ops, (unsigned long long)nops,
                  (unsigned long long)g_tc->applied);
        CHECK_MSG(!g_tc->broken, "the connection broke (%d)", g_tc->broken);
        if (g_written < g_len) {
            ssize_t k = send(g_in[1], g_stream + g_written, g_len - g_written, MSG_DONTWAIT);
            if (k > 0)
                g_written += (size_t)k;
        }
        g_tc->readable = 1;
        g_tcp->progress(&g_conn);
        flusher_run();
    }
}

/* ---- this side's messages ---- */

typedef struct answer {
    uint64_t off, size;
    unsigned char *bytes;
} answer_t;

/* Reads this side's messages until n GET_DATA have come whole, passes and
 * flusher going on; ACKs are skipped. */
static void collect(answer_t *ans, int n)
{
    uint64_t deadline = gpuport_now_ns() + 10000 * 1000 * 1000ull;
    unsigned char hdr[HDR];
    size_t have = 0;
    int got = 0;
    uint64_t left = 0;
    answer_t *cur = NULL;

    while (got < n) {
        ssize_t k;
        CHECK_MSG(gpuport_now_ns() < deadline, "%d of %d answers came in 10 s", got, n);
        CHECK_MSG(!g_tc->broken, "the connection broke (%d)", g_tc->broken);
        g_tc->readable = 1;
        g_tcp->progress(&g_conn);
        flusher_run();
        for (;;) {
            if (cur) {
                k = recv(g_out[1], cur->bytes + (cur->size - left), left, MSG_DONTWAIT);
                if (k <= 0)
                    break;
                left -= (uint64_t)k;
                if (left == 0) {
                    cur = NULL;
                    got++;
                }
                continue;
            }
            k = recv(g_out[1], hdr + have, HDR - have, MSG_DONTWAIT);
            if (k <= 0)
                break;
            have += (size_t)k;
            if (have == HDR) {
                tcp_msg_t m;
                memcpy(&m, hdr, HDR);
                have = 0;
                if (m.type == MSG_ACK)
                    continue;
                CHECK_MSG(m.type == MSG_GET_DATA && got < n, "message of type %u", m.type);
                CHECK_MSG(m.a == ans[got].off && m.size == ans[got].size && m.value == 0,
                          "answer %d: offset %llu, %llu bytes, status %lld; asked %llu at %llu",
                          got, (unsigned long long)m.a, (unsigned long long)m.size,
                          (long long)m.value, (unsigned long long)ans[got].size,
                          (unsigned long long)ans[got].off);
                cur = &ans[got];
                cur->bytes = malloc(m.size);
                CHECK(cur->bytes);
                left = m.size;
            }
        }
    }
}

static void check_answer(const answer_t *a, const char *what)
{
    CHECK_MSG(g_tc->dev_answers == 0 && !g_tc->snapping,
              "%s: %u answers from GPU memory still counted after all were sent", what,
              g_tc->dev_answers);
    for (uint64_t i = 0; i < a->size; i++)
        CHECK_MSG(a->bytes[i] == pat_a(a->off + i),
                  "%s: byte %llu of the answer (offset %llu) is 0x%02x, the region's before "
                  "the later write 0x%02x (the write's 0x%02x): the get saw a later put",
                  what, (unsigned long long)i, (unsigned long long)(a->off + i), a->bytes[i],
                  pat_a(a->off + i), pat_b(a->off + i));
}

/* the region: B over each put, the value at each value, A elsewhere */
static void check_region(const uint64_t (*puts)[2], int nputs, const uint64_t *values, int nvals,
                         const char *what)
{
    for (uint64_t i = 0; i < REGION; i++) {
        unsigned char want = pat_a(i);
        for (int k = 0; k < nputs; k++)
            if (i >= puts[k][0] && i - puts[k][0] < puts[k][1])
                want = pat_b(i);
        for (int k = 0; k < nvals; k++)
            if (i >= values[k] && i - values[k] < 8)
                want = (unsigned char)(VALUE >> (8 * (i - values[k])));
        CHECK_MSG(g_dst[i] == want, "%s: byte %llu of the region is 0x%02x, expected 0x%02x",
                  what, (unsigned long long)i, g_dst[i], want);
    }
}

static void start(void)
{
    reset();
    g_len = g_written = 0;
}

/* A GET of 12 MiB (8 staged before staging is full), then a PUT and a
 * VALUE into its unstaged part. */
static void case_big_get(void)
{
    static const uint64_t puts[1][2] = {{10 * MIB + 3, MIB}};
    static const uint64_t values[1] = {11 * MIB + 512 * 1024};
    answer_t ans = {0, 12 * MIB, NULL};

    start();
    emit_get(ans.off, ans.size);
    emit_put(puts[0][0], puts[0][1]);
    emit_value(values[0]);
    feed(3);
    check_region(puts, 1, values, 1, "big get");
    collect(&ans, 1);
    check_answer(&ans, "big get");
    CHECK_MSG(g_tc->snaps == 1, "%llu answers copied out, expected 1",
              (unsigned long long)g_tc->snaps);
    free(ans.bytes);
    teardown();
    printf("PASS a 12 MiB get (8 MiB staged), then a put and a value into its rest: the reader "
           "took both with nothing read, the answer is the bytes before them\n");
}

/* Two GETs, the second not staged at all; a write into each, one beside. */
static void case_two_gets(void)
{
    static const uint64_t puts[3][2] = {{13 * MIB + 100, 4096}, {8 * MIB + 5, 4096},
                                        {15 * MIB, 4096}};
    answer_t ans[2] = {{0, 9 * MIB, NULL}, {13 * MIB, 64 * 1024, NULL}};

    start();
    emit_get(ans[0].off, ans[0].size);
    emit_get(ans[1].off, ans[1].size);
    emit_put(puts[0][0], puts[0][1]);
    emit_put(puts[1][0], puts[1][1]);
    emit_put(puts[2][0], puts[2][1]);
    feed(5);
    check_region(puts, 3, NULL, 0, "two gets");
    collect(ans, 2);
    check_answer(&ans[0], "two gets, the first");
    check_answer(&ans[1], "two gets, the second");
    CHECK_MSG(g_tc->snaps == 2, "%llu answers copied out, expected 2",
              (unsigned long long)g_tc->snaps);
    free(ans[0].bytes);
    free(ans[1].bytes);
    teardown();
    printf("PASS two gets (the second not staged) and a put into each: two answers copied out, "
           "both the bytes before the puts; a put beside them copied nothing\n");
}

/* A small GET and a PUT over it, read in one pass, staging free. */
static void case_small_get(void)
{
    static const uint64_t puts[1][2] = {{1000, 4096}};
    answer_t ans = {0, 8192, NULL};

    start();
    emit_get(ans.off, ans.size);
    emit_put(puts[0][0], puts[0][1]);
    feed(2);
    check_region(puts, 1, NULL, 0, "small get");
    collect(&ans, 1);
    check_answer(&ans, "small get");
    CHECK_MSG(g_tc->snaps == 0, "%llu answers copied out, expected none (staging had room)",
              (unsigned long long)g_tc->snaps);
    free(ans.bytes);
    teardown();
    printf("PASS a small get and a put over it in one read: staged in order, nothing copied "
           "out, the answer the bytes before the put\n");
}

/* The flusher stops: the copy out never comes. */
static void case_stuck_flusher(void)
{
    uint64_t t0, deadline;
    const char *log;

    start();
    emit_get(0, 12 * MIB);
    emit_put(10 * MIB, 4096);
    g_flusher_on = 0;
    capture_begin();
    t0 = gpuport_now_ns();
    deadline = t0 + 5000 * 1000 * 1000ull;
    while (!g_tc->broken && gpuport_now_ns() < deadline) {
        if (g_written < g_len) {
            ssize_t k = send(g_in[1], g_stream + g_written, g_len - g_written, MSG_DONTWAIT);
            if (k > 0)
                g_written += (size_t)k;
        }
        g_tc->readable = 1;
        g_tcp->progress(&g_conn);
        usleep(1000);
    }
    log = capture_end();
    CHECK_MSG(g_tc->broken == GPUPORT_ERR_TIMEOUT, "the connection: broken %d after %.0f ms",
              g_tc->broken, (double)(gpuport_now_ns() - t0) / 1e6);
    CHECK_MSG(count_of(log, "copied no piece of a get's answer out of GPU memory within "
                            "GPUPORT_TIMEOUT_MS") == 1,
              "the log: %s", log);
    CHECK_MSG(g_tc->snaps == 1 && g_tc->rx_ops == 1, "%llu copied out, %llu operations taken",
              (unsigned long long)g_tc->snaps, (unsigned long long)g_tc->rx_ops);
    CHECK(atomic_load(&g_comm.states[0].status) == GPUPORT_ERR_TIMEOUT);
    printf("PASS the flusher stopped: the write's wait for the copy out ended the connection "
           "after %.0f ms (GPUPORT_TIMEOUT_MS 100), the channel failed with "
           "GPUPORT_ERR_TIMEOUT\n",
           (double)(gpuport_now_ns() - t0) / 1e6);
    teardown();
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        void (*run)(void);
    } cases[] = {{"big", case_big_get}, {"two", case_two_gets}, {"small", case_small_get},
                 {"stuck", case_stuck_flusher}};
    int ran = 0;

    setup();
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (argc > 1 && strcmp(argv[1], cases[i].name) != 0)
            continue;
        cases[i].run();
        ran++;
    }
    CHECK_MSG(ran > 0, "no case named %s (big, two, small, stuck)", argv[1]);
    free(g_stream);
    free(g_dst);
    return 0;
}
