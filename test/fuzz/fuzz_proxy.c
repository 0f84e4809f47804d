/*
 * fuzz_proxy: raw triggers through a running proxy (src/proxy/proxy.c): its FIFO
 * consumer (EXT pairs), its checks (unknown channel ids, unknown ops, puts
 * and put_values outside a region, gets, atomic_adds and accumulates that
 * gpuport_rma_check refuses, channels in error) and the shm transport that
 * carries out what passes, copies, values and adds inline and at the flusher
 * alike, in order.
 *
 * One communicator of one rank (a bootstrap of its own, below) holds, for
 * the whole run, shm channels to itself whose source and destination
 * regions lie inside larger buffers filled with canary bytes:
 *   0  host memory (malloc: copied in place), source 4096 B, destination 4096 B
 *   1  gpuport_mem_alloc memory (a second mapping of a memfd), 5000 B from 3000 B
 *   2  no source, destination 16 B
 *   3  source 1 B, no destination
 * and ids 4..7 of its 8 are never opened. Channel 1's destination starts at
 * an address that is 4- but not 8-aligned, so put_value's fallback for such
 * regions (bytes after a fence instead of one store) is exercised too, and
 * atomic_adds and int64 accumulates there are refused (an atomic add needs
 * an aligned address). Every destination is reachable by a mapping (this
 * process's own memory, or gpuport_mem_alloc's), so shm carries every get
 * and add that the rules let through: none is refused as not supported.
 * Each input is a run of 16-byte triggers, pushed into the host FIFO as a
 * producer would (parity bits set there), followed by a flush of every
 * channel; once the flushes complete:
 *   - every canary is intact: nothing outside the regions was touched;
 *   - each destination and source region (gets write the source) holds what
 *     a model of the proxy's rules (the same triggers, decoded and checked
 *     independently; adds as fuzz.h's fuzz_acc_model) says, and each
 *     channel's state, semaphore and peer status are the model's: a trigger
 *     is carried out, or dropped, or puts its channel in error;
 *   - the proxy counted every trigger, and rejected the ones the model does.
 * A channel left in error is destroyed and created again for the next input;
 * every source region is given its first bytes again.
 */
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "fuzz.h"
#include "internal.h"

#define NCHAN 4
#define MAX_CHANNELS 8
#define PARITY (1ull << 63)
#define TIMEOUT_NS (10 * 1000000000ull)

typedef struct {
    size_t src_size, dst_size;
    size_t src_at, dst_at;  /* region offsets in their buffers */
    size_t src_buf, dst_buf; /* buffer sizes (0: no region) */
    int shared;             /* buffers from gpuport_mem_alloc */
} layout_t;

static const layout_t layouts[NCHAN] = {
    {4096, 4096, FUZZ_CANARY_BYTES, FUZZ_CANARY_BYTES, 4096 + 2 * FUZZ_CANARY_BYTES,
     4096 + 2 * FUZZ_CANARY_BYTES, 0},
    {5000, 3000, 100, 204, 8192, 8192, 1},
    {0, 16, 0, FUZZ_CANARY_BYTES, 0, 16 + 2 * FUZZ_CANARY_BYTES, 0},
    {1, 0, FUZZ_CANARY_BYTES, 0, 1 + 2 * FUZZ_CANARY_BYTES, 0, 0},
};

typedef struct {
    unsigned char *src_buf, *dst_buf;
    gpuport_mem_t msrc, mdst;
    gpuport_channel_t ch;
    unsigned char *pattern;   /* each input's first source bytes */
    unsigned char *src_model; /* the model's source */
    unsigned char *shadow;    /* the model's destination */
    int32_t status;           /* the model's channel state */
    int32_t peer_status;      /* ... and what its peer (itself) was told */
    uint64_t signals;
} chan_t;

static gpuport_comm_t g_comm;
static chan_t g_ch[NCHAN];

/* ---- a bootstrap of one rank: every exchange is with itself ---- */

static gpuport_status_t self_allgather(void *ctx, const void *send, void *recv, size_t bytes)
{
    (void)ctx;
    memcpy(recv, send, bytes);
    return GPUPORT_OK;
}

static gpuport_status_t self_barrier(void *ctx)
{
    (void)ctx;
    return GPUPORT_OK;
}

static gpuport_status_t self_send(void *ctx, int peer, int tag, const void *buf, size_t bytes)
{
    (void)ctx, (void)peer, (void)tag, (void)buf, (void)bytes;
    return GPUPORT_ERR_INTERNAL; /* a rank's exchange with itself is a copy (bootstrap.c) */
}

static gpuport_status_t self_recv(void *ctx, int peer, int tag, void *buf, size_t bytes)
{
    (void)ctx, (void)peer, (void)tag, (void)buf, (void)bytes;
    return GPUPORT_ERR_INTERNAL;
}

/* ---- set-up ---- */

static unsigned char *buffer(size_t n, int shared)
{
    unsigned char *p = NULL;

    if (n == 0)
        return NULL;
    if (shared)
        FUZZ_CHECK(gpuport_mem_alloc(g_comm, n, (void **)&p) == GPUPORT_OK, "mem_alloc");
    else
        p = malloc(n);
    memset(p, FUZZ_CANARY, n);
    return p;
}

static void channel_open(int i)
{
    chan_t *c = &g_ch[i];
    gpuport_status_t st = gpuport_channel_create(g_comm, 0, c->msrc, c->mdst, &c->ch);

    FUZZ_CHECK(st == GPUPORT_OK, "channel %d: create: %s", i, gpuport_status_string(st));
    FUZZ_CHECK(c->ch->id == (uint32_t)i, "channel %d got id %u", i, c->ch->id);
    c->status = GPUPORT_OK;
    c->peer_status = GPUPORT_OK;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    gpuport_bootstrap_t bs = {0};

    (void)argc;
    (void)argv;
    setenv("GPUPORT_MAX_CHANNELS", "8", 1);
    setenv("GPUPORT_FIFO_SIZE", "64", 1);
    setenv("GPUPORT_SHM_ASYNC_MIN", "1k", 1); /* puts of 1 KiB and more go to the flusher */
    setenv("GPUPORT_TIMEOUT_MS", "10000", 1);
    setenv("GPUPORT_PROXY_IDLE_US", "10000000", 1); /* poll, do not sleep between inputs */
    setenv("GPUPORT_TRANSPORT", "shm", 1);
    setenv("GPUPORT_GPU", "off", 1);
    setenv("GPUPORT_BIND", "0", 1);
    bs.size = 1;
    bs.local_size = 1;
    bs.allgather = self_allgather;
    bs.barrier = self_barrier;
    bs.send = self_send;
    bs.recv = self_recv;
    FUZZ_CHECK(gpuport_comm_create(&bs, &g_comm) == GPUPORT_OK, "comm_create");
    for (int i = 0; i < NCHAN; i++) {
        const layout_t *l = &layouts[i];
        chan_t *c = &g_ch[i];
        c->src_buf = buffer(l->src_buf, l->shared);
        c->dst_buf = buffer(l->dst_buf, l->shared);
        c->pattern = malloc(l->src_size + 1);
        c->src_model = malloc(l->src_size + 1);
        for (size_t k = 0; k < l->src_size; k++)
            c->pattern[k] = (unsigned char)(k * 7 + i + 1);
        if (l->src_buf)
            FUZZ_CHECK(gpuport_mem_register(g_comm, c->src_buf + l->src_at, l->src_size,
                                            &c->msrc) == GPUPORT_OK, "register");
        if (l->dst_buf)
            FUZZ_CHECK(gpuport_mem_register(g_comm, c->dst_buf + l->dst_at, l->dst_size,
                                            &c->mdst) == GPUPORT_OK, "register");
        c->shadow = malloc(l->dst_size + 1);
        channel_open(i);
    }
    return 0;
}

/* ---- the model: execute(), exec_put() and proxy_exec_rma() as their rules read ---- */

static void model_put(chan_t *c, const layout_t *l, const gpuport_op_desc_t *d, uint64_t *rej)
{
    if ((unsigned __int128)d->src_off + d->size > l->src_size ||
        (unsigned __int128)d->dst_off + d->size > l->dst_size) {
        ++*rej;
        c->status = c->peer_status = GPUPORT_ERR_OUT_OF_RANGE;
        return;
    }
    if (d->size)
        memmove(c->shadow + d->dst_off, c->src_model + d->src_off, d->size);
}

/* exec_put_value: 8 bytes carried in the trigger, at an aligned offset */
static void model_value(chan_t *c, const layout_t *l, const gpuport_op_desc_t *d, uint64_t *rej)
{
    if (d->dst_off % 8 || (unsigned __int128)d->dst_off + 8 > l->dst_size) {
        ++*rej;
        c->status = c->peer_status =
            d->dst_off % 8 ? GPUPORT_ERR_INVALID_ARG : GPUPORT_ERR_OUT_OF_RANGE;
        return;
    }
    memcpy(c->shadow + d->dst_off, &d->value, 8);
}

/* gpuport_rma_check's answer, from gpuport_trigger.h's rules: a get is a
 * put the other way (the peer's destination into this side's source); an
 * atomic_add is a value's range rule; an accumulate needs whole, aligned
 * elements, then the put's range rule; an add needs an aligned address in
 * the peer's region besides (the peer's address: this process's here) */
static int32_t rma_refusal(const chan_t *c, const layout_t *l, const gpuport_op_desc_t *d)
{
    uint64_t peer_addr = (uintptr_t)c->dst_buf + l->dst_at + d->dst_off;
    uint64_t elem = d->op == GPUPORT_OP_ACC_INT64     ? 8
                    : d->op == GPUPORT_OP_ACC_FLOAT32 ? 4
                                                      : 2;

    if (d->op == GPUPORT_OP_GET)
        return (unsigned __int128)d->src_off + d->size > l->src_size ||
                       (unsigned __int128)d->dst_off + d->size > l->dst_size
                   ? GPUPORT_ERR_OUT_OF_RANGE
                   : GPUPORT_OK;
    if (d->op == GPUPORT_OP_ATOMIC_ADD) {
        if ((unsigned __int128)d->dst_off + 8 > l->dst_size)
            return GPUPORT_ERR_OUT_OF_RANGE;
        return peer_addr % 8 ? GPUPORT_ERR_INVALID_ARG : GPUPORT_OK;
    }
    if (d->size == 0 || d->size % elem || d->src_off % elem || d->dst_off % elem)
        return GPUPORT_ERR_INVALID_ARG;
    if ((unsigned __int128)d->src_off + d->size > l->src_size ||
        (unsigned __int128)d->dst_off + d->size > l->dst_size)
        return GPUPORT_ERR_OUT_OF_RANGE;
    return peer_addr % elem ? GPUPORT_ERR_INVALID_ARG : GPUPORT_OK;
}

/* get, atomic_add, accumulate: refused as gpuport_rma_check says, else
 * carried out (a get of nothing does nothing) */
static void model_rma(chan_t *c, const layout_t *l, const gpuport_op_desc_t *d, uint64_t *rej)
{
    int32_t st = rma_refusal(c, l, d);
    uint64_t sum;

    if (st != GPUPORT_OK) {
        ++*rej;
        c->status = c->peer_status = st;
        return;
    }
    if (d->op == GPUPORT_OP_GET) {
        if (d->size)
            memmove(c->src_model + d->src_off, c->shadow + d->dst_off, d->size);
    } else if (d->op == GPUPORT_OP_ATOMIC_ADD) {
        memcpy(&sum, c->shadow + d->dst_off, 8);
        sum += d->value;
        memcpy(c->shadow + d->dst_off, &sum, 8);
    } else {
        fuzz_acc_model(c->shadow + d->dst_off, c->src_model + d->src_off, d->size, d->op);
    }
}

static void model(const gpuport_op_desc_t *d, uint64_t *rej)
{
    chan_t *c;
    const layout_t *l;

    if (d->channel >= NCHAN) {
        ++*rej; /* ids 4..7 are closed, 8 and up outside the table */
        return;
    }
    c = &g_ch[d->channel];
    l = &layouts[d->channel];
    if (d->op == GPUPORT_OP_FLUSH || c->status != GPUPORT_OK)
        return;
    switch (d->op) {
    case GPUPORT_OP_PUT:
        model_put(c, l, d, rej);
        break;
    case GPUPORT_OP_SIGNAL:
        /* the signals a SIGNAL carries: its size, 0 counting one (a warp's
         * signals go as one trigger) */
        c->signals += d->size ? d->size : 1;
        break;
    case GPUPORT_OP_PUT_SIGNAL:
        model_put(c, l, d, rej);
        if (c->status == GPUPORT_OK)
            c->signals++;
        break;
    case GPUPORT_OP_PUT_VALUE:
        model_value(c, l, d, rej);
        break;
    case GPUPORT_OP_PUT_VALUE_SIGNAL:
        model_value(c, l, d, rej);
        if (c->status == GPUPORT_OK)
            c->signals++;
        break;
    case GPUPORT_OP_GET:
    case GPUPORT_OP_ATOMIC_ADD:
    case GPUPORT_OP_ACC_INT64:
    case GPUPORT_OP_ACC_FLOAT32:
    case GPUPORT_OP_ACC_BFLOAT16:
        model_rma(c, l, d, rej);
        break;
    case GPUPORT_OP_CLOSE:
        /* gpuport_channel_destroy's: this side closed, the peer (itself,
         * here) told so; not a rejection */
        c->status = GPUPORT_ERR_SHUTDOWN;
        c->peer_status = GPUPORT_ERR_CLOSED;
        break;
    default:
        ++*rej;
        c->status = c->peer_status = GPUPORT_ERR_INVALID_ARG;
    }
}

static void push(const gpuport_trigger_t *t, uint64_t *pos_p)
{
    gpuport_status_t st = gpuport_fifo_push(&g_comm->fifo, t, 1, TIMEOUT_NS, pos_p);

    FUZZ_CHECK(st == GPUPORT_OK, "the FIFO stayed full for 10 s: %s", gpuport_status_string(st));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    size_t n = len / sizeof(gpuport_trigger_t), total = n + NCHAN;
    gpuport_trigger_t *t = malloc(total * sizeof(*t));
    uint64_t flush_pos[NCHAN], sem_before[NCHAN], rejected = 0, triggers = 0, deadline;
    uint64_t trig0 = atomic_load(&g_comm->proxy.triggers);
    uint64_t rej0 = atomic_load(&g_comm->proxy.rejected);

    memcpy(t, data, n * sizeof(*t));
    for (size_t i = 0; i < n; i++)
        t[i].w[0] &= ~PARITY; /* a producer's triggers leave it 0 (gpuport_trigger.h) */
    for (int i = 0; i < NCHAN; i++) {
        chan_t *c = &g_ch[i];
        const layout_t *l = &layouts[i];
        gpuport_trigger_encode(&t[n + i], GPUPORT_OP_FLUSH, (uint32_t)i, 0, 0, 0);
        if (l->dst_size)
            memset(c->dst_buf + l->dst_at, 0, l->dst_size);
        memset(c->shadow, 0, l->dst_size);
        if (l->src_size)
            memcpy(c->src_buf + l->src_at, c->pattern, l->src_size);
        memcpy(c->src_model, c->pattern, l->src_size);
        c->signals = 0;
        sem_before[i] = atomic_load(&g_comm->ctrl[i].value);
    }

    /* the model, over the same slots as consume_fifo reads them */
    for (size_t i = 0; i < total; triggers++) {
        gpuport_op_desc_t d;
        if (gpuport_trigger_op(t[i].w[0]) == GPUPORT_OP_EXT && i + 1 < total) {
            gpuport_trigger_decode(&t[i + 1], &t[i], &d);
            i += 2;
        } else {
            gpuport_trigger_decode(&t[i], NULL, &d);
            i += 1;
        }
        model(&d, &rejected);
    }

    for (size_t i = 0; i < total; i++) {
        uint64_t pos;
        push(&t[i], &pos);
        if (i >= n)
            flush_pos[i - n] = pos;
    }
    deadline = gpuport_now_ns() + TIMEOUT_NS;
    for (int i = 0; i < NCHAN; i++) {
        _Atomic uint64_t *f = &g_ch[i].ch->state->flushed[GPUPORT_FIFO_HOST];
        while ((atomic_load_explicit(f, memory_order_acquire) & ~GPUPORT_FLUSHED_FAILED) <=
               flush_pos[i]) {
            FUZZ_CHECK(gpuport_now_ns() < deadline, "channel %d's flush did not complete", i);
            sched_yield();
        }
    }
    /* the proxy counts a trigger once it is carried out, after its flush
     * is published: the last count may trail a little */
    while (atomic_load(&g_comm->proxy.triggers) - trig0 < triggers) {
        FUZZ_CHECK(gpuport_now_ns() < deadline, "the proxy counted %llu of %llu triggers",
                   (unsigned long long)(atomic_load(&g_comm->proxy.triggers) - trig0),
                   (unsigned long long)triggers);
        sched_yield();
    }
    FUZZ_CHECK(atomic_load(&g_comm->proxy.triggers) - trig0 == triggers, "triggers counted");
    FUZZ_CHECK(atomic_load(&g_comm->proxy.rejected) - rej0 == rejected,
               "the proxy rejected %llu triggers, the model %llu",
               (unsigned long long)(atomic_load(&g_comm->proxy.rejected) - rej0),
               (unsigned long long)rejected);

    for (int i = 0; i < NCHAN; i++) {
        chan_t *c = &g_ch[i];
        const layout_t *l = &layouts[i];
        gpuport_status_t st = gpuport_channel_status(c->ch);
        uint64_t sem = atomic_load(&g_comm->ctrl[i].value) - sem_before[i];
        int32_t peer_status = atomic_load(&g_comm->ctrl[i].peer_status);

        FUZZ_CHECK(!c->src_buf || (fuzz_canary_ok(c->src_buf, l->src_at) &&
                                   fuzz_canary_ok(c->src_buf + l->src_at + l->src_size,
                                                  l->src_buf - l->src_at - l->src_size)),
                   "channel %d: a canary around the source region changed", i);
        FUZZ_CHECK(!c->dst_buf || (fuzz_canary_ok(c->dst_buf, l->dst_at) &&
                                   fuzz_canary_ok(c->dst_buf + l->dst_at + l->dst_size,
                                                  l->dst_buf - l->dst_at - l->dst_size)),
                   "channel %d: a canary around the destination region changed", i);
        FUZZ_CHECK(!l->dst_size || memcmp(c->dst_buf + l->dst_at, c->shadow, l->dst_size) == 0,
                   "channel %d: the destination differs from the model's", i);
        FUZZ_CHECK(!l->src_size || memcmp(c->src_buf + l->src_at, c->src_model, l->src_size) == 0,
                   "channel %d: the source differs from the model's", i);
        FUZZ_CHECK(st == c->status, "channel %d: state %d, the model's %d", i, st, c->status);
        FUZZ_CHECK(peer_status == c->peer_status, "channel %d: peer status %d, the model's %d",
                   i, peer_status, c->peer_status);
        FUZZ_CHECK(sem == c->signals, "channel %d: %llu signals, the model's %llu", i,
                   (unsigned long long)sem, (unsigned long long)c->signals);
        if (st != GPUPORT_OK) {
            FUZZ_CHECK(gpuport_channel_destroy(c->ch) == GPUPORT_OK, "channel %d: destroy", i);
            channel_open(i);
        }
    }
    free(t);
    return 0;
}
