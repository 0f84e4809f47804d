/*
 * cuda_ipc's relay for channels whose source is cudaMalloc memory
 * (GPUPORT_CUDA_IPC_RELAY=1, the default). While a thread of the
 * application sits in a synchronous cudaMemcpy, CUDA holds every call of
 * another context of that process that names the application's context,
 * so a copy out of (or into) its cudaMalloc memory by this rank's flusher
 * waits until the cudaMemcpy returns; copies by another process through an
 * IPC mapping of that memory, and copies between a flusher's own memory
 * and IPC mappings, are not held (tools/probes/held_relay.cu, measured on
 * one H100 with both processes' threads in cudaMemcpy; docs/ARCHITECTURE.md).
 * So a put goes in two copies, neither of which names an application's
 * context:
 *   stage    the peer's flusher copies the source (its IPC mapping of this
 *            side's cudaMalloc memory) into this side's staging buffer (its
 *            IPC mapping of memory of this side's flusher's context);
 *   relay    this side's flusher copies the staging buffer into the peer's
 *            destination (this side's IPC mapping, as for a direct put).
 * A get goes the other way: this side's flusher copies the peer's
 * destination into the staging buffer, then the peer's flusher copies it
 * into this side's source (unstage).
 *
 * The side that relays is the client; its peer serves. The client asks for
 * one copy at a time through the transport's words of the peer's slot for
 * the channel (tl_word: W_OFF, W_SIZE, W_STG, then W_SEQ, released), and
 * the server answers in the client's slot (W_DONE = that sequence number)
 * once its flusher finished the copy. The staging buffer has two halves: a
 * put larger than a half goes in pieces, the next one staged while the
 * last one is copied on. Every operation of a relay channel (puts, values,
 * signals, gets) is taken by the transport (GPUPORT_TRANSPORT_ASYNC) and
 * kept in its queue, in order; values and signals are flusher writes posted
 * behind the relay copies before them, so a signal after puts means they
 * landed, and completions are reported in the queue's order. A request the
 * server leaves unanswered for GPUPORT_TIMEOUT_MS fails the channel, named;
 * a server checks every word of a request against the sizes the client
 * declared at creation, and a bad one fails the channel as the peer's
 * protocol error.
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_TL(GPUPORT_TL_KIND_CUDA_IPC)
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/cuda_ipc/cipc.h"

/* the transport's words of a slot: a request to the slot's owner (written
 * by its peer) and the answer to the owner's own last request */
enum { W_SEQ, W_OFF, W_SIZE, W_STG, W_DONE };
/* W_STG: the staging offset, the request's kind in the top two bits
 * (cipc_check.h) */
#define REQ_SHIFT CIPC_REQ_SHIFT
#define REQ_STAGE CIPC_REQ_STAGE
#define REQ_UNSTAGE CIPC_REQ_UNSTAGE
#define STG_MASK ((1ull << REQ_SHIFT) - 1)

/* what a posted flusher item means when it completes */
#define T_COMPLETE 0x1u /* the client's oldest operation completes */
#define T_HALF0 0x2u    /* a relay copy out of staging half 0 is done */
#define T_HALF1 0x4u
#define T_GETCOPY 0x8u  /* a get's copy into staging is done */
#define T_SERVE 0x10u   /* a served request's answer is written */
#define T_SERVE_COPY 0x20u /* a served request's copy is done */

#define ITEMS_MAX 1024u /* items a connection keeps posted at once */
#define QUEUE_SOFT 1024u /* has_room says no beyond this many queued operations */

enum { OP_PUT, OP_VALUE, OP_SIGNAL, OP_GET };

/* A put no larger than a staging half is small: the small puts queued
 * together go in one batch, one request staging the span of source that
 * covers them all (at most a half), so that a stream of them costs a
 * round trip to the server per batch, not per put (on one time-sliced GPU,
 * a round trip is a time slice or two: measured, 64 B puts one by one
 * reached 0.00 M/s). A larger put goes in pieces of a half. */
typedef struct relay_op {
    uint32_t kind;
    uint8_t batched, staged, last, half; /* small PUT: in a batch, in staging, its batch's
                                          * last, and which half */
    uint64_t dst_off, src_off, size, value;
    uint64_t stg_off; /* small PUT: where its source is in its half */
    uint64_t asked;   /* large PUT and GET: bytes whose copy was asked of the server */
    uint64_t posted;  /* large PUT: bytes whose relay copy is posted; GET: bytes unstaged */
} relay_op_t;

enum { OPEN_BATCH, OPEN_PIECE, OPEN_UNSTAGE };

/* Operations are numbered from the channel's first (base: the one at
 * head); next: the first not fully posted; scan: the first not yet looked
 * at for a batch. base <= next <= base + n, and scan >= next once ops
 * before next are dropped from view. */
struct cipc_relay {
    CUdeviceptr stg;
    uint64_t stg_size, half;
    relay_op_t *q;
    uint32_t cap, head, n; /* the queue: n operations from head */
    uint64_t base, next, scan;
    uint64_t seq;          /* requests written */
    int open;              /* the last one is not answered yet */
    int open_what;         /* OPEN_* */
    uint64_t open_first, open_last; /* OPEN_BATCH: its operations' numbers */
    uint64_t open_ns, open_off, open_size;
    uint32_t open_half;
    int ready;             /* a large put's piece is staged, its copy not posted yet */
    int busy[2];           /* a half is being filled, or read by relay copies */
    uint32_t next_half;
    int get_phase;         /* a get's piece: 0 copy it, 1 copying, 2 ask to unstage */
    uint32_t inflight;     /* this channel's items at the flusher */
    gpuport_status_t aborted; /* nothing more is posted; what is left completes with it */
};

struct cipc_serve {
    CUdeviceptr src_map, stg_map; /* the client's memory opened here (mapping bases) */
    CUdeviceptr src, stg;         /* its source and staging in them */
    uint64_t src_size, stg_size;
    uint64_t served;              /* the last request taken */
    int posting;                  /* its copy and answer are at the flusher */
    int answer_on_copy;           /* the answer could not be posted: written at the copy's end */
    int broken;
    uint32_t inflight;
};

typedef struct relay_item {
    uint32_t id, tag;
    uint64_t serial, arg;
} relay_item_t;

/* a staging buffer made by chan_prepare, waiting for its channel's connect */
typedef struct relay_prep {
    struct relay_prep *next;
    uint32_t id;
    CUdeviceptr stg;
    uint64_t size;
} relay_prep_t;

struct cipc_relay_conn {
    pthread_mutex_t lock; /* prepared and the left_ lists: set-up threads of any channel */
    relay_prep_t *prepared;
    relay_item_t items[ITEMS_MAX];
    uint32_t ihead, in;
    /* channels that relay or serve: set-up threads change it, the proxy reads it */
    _Atomic int nchans;
    /* resources of channels gone with items still posted: freed at the
     * connection's close */
    CUdeviceptr left_free[64], left_close[128];
    int nleft_free, nleft_close;
};

/* ---- set-up (application threads) ---- */

/* made with the connection, before the proxy can see it, so that the
 * proxy never reads a pointer a set-up thread writes */
gpuport_status_t cipc_relay_conn_open(gpuport_conn_t *conn)
{
    cipc_conn_t *cc = conn->priv;

    cc->relay = calloc(1, sizeof(*cc->relay));
    if (!cc->relay)
        return GPUPORT_ERR_NO_MEMORY;
    pthread_mutex_init(&cc->relay->lock, NULL);
    return GPUPORT_OK;
}

static cipc_relay_conn_t *rconn(gpuport_conn_t *conn)
{
    return ((cipc_conn_t *)conn->priv)->relay;
}

gpuport_status_t cipc_relay_prepare(gpuport_conn_t *conn, uint32_t id, const gpuport_region_t *src,
                                    gpuport_channel_rec_t *mine)
{
    const cipc_settings_t *set = gpuport_tl_settings(conn->comm, GPUPORT_TL_KIND_CUDA_IPC);
    cipc_relay_rec_t rec;
    cipc_relay_conn_t *rc;
    relay_prep_t *p;
    CUdeviceptr base, stg = 0;
    size_t len;
    gpuport_status_t st;

    /* port channels only: a memory channel's kernels store from the source
     * themselves and put nothing through the proxy; and a channel to this
     * rank itself cannot relay: a process cannot open its own memory by IPC
     * handle */
    if (!src || src->kind != GPUPORT_REGION_DEVICE || src->size == 0 || !set || !set->relay ||
        mine->chan_kind != GPUPORT_CHAN_KIND_PORT || conn->peer == gpuport_tl_rank(conn->comm))
        return GPUPORT_OK;
    if (!(rc = rconn(conn)) || !(p = calloc(1, sizeof(*p))))
        return GPUPORT_ERR_NO_MEMORY;
    memset(&rec, 0, sizeof(rec));
    st = gpuport_tl_gpu_ctx_push(conn->comm);
    if (st) {
        free(p);
        return st;
    }
    st = CU_CALL(cuMemGetAddressRange, (&base, &len, (CUdeviceptr)(uintptr_t)src->ptr));
    if (!st)
        st = CU_CALL(cuIpcGetMemHandle, ((CUipcMemHandle *)rec.src_ipc, base));
    if (!st)
        st = CU_CALL(cuMemAlloc, (&stg, set->relay_bytes));
    if (!st)
        st = CU_CALL(cuIpcGetMemHandle, ((CUipcMemHandle *)rec.stg_ipc, stg));
    if (st && stg)
        gpuport_cu.cuMemFree(stg);
    gpuport_tl_gpu_ctx_pop();
    if (st) {
        log_error("channel %u (to rank %d): cannot set up the relay of its cudaMalloc source "
                  "(%llu bytes of staging; GPUPORT_CUDA_IPC_RELAY=0 copies directly)",
                  id, conn->peer, (unsigned long long)set->relay_bytes);
        free(p);
        return st;
    }
    rec.relay = 1;
    rec.src_fd_offset = (uint64_t)((CUdeviceptr)(uintptr_t)src->ptr - base);
    rec.src_size = src->size;
    rec.stg_size = set->relay_bytes;
    memcpy(mine->tdata, &rec, sizeof(rec));
    pthread_mutex_lock(&rc->lock);
    /* a failed creation that reuses the id left its buffer here: replace it */
    for (relay_prep_t **pp = &rc->prepared; *pp; pp = &(*pp)->next) {
        if ((*pp)->id == id) {
            relay_prep_t *old = *pp;
            *pp = old->next;
            if (gpuport_tl_gpu_ctx_push(conn->comm) == GPUPORT_OK) {
                gpuport_cu.cuMemFree(old->stg);
                gpuport_tl_gpu_ctx_pop();
            }
            free(old);
            break;
        }
    }
    p->id = id;
    p->stg = stg;
    p->size = set->relay_bytes;
    p->next = rc->prepared;
    rc->prepared = p;
    pthread_mutex_unlock(&rc->lock);
    return GPUPORT_OK;
}

static void drop_mem(gpuport_comm_t comm, CUdeviceptr p, int is_map)
{
    if (!p)
        return;
    if (gpuport_tl_gpu_ctx_push(comm) == GPUPORT_OK) {
        if (is_map)
            gpuport_cu.cuIpcCloseMemHandle(p);
        else
            gpuport_cu.cuMemFree(p);
        gpuport_tl_gpu_ctx_pop();
    }
}

/* Keeps p for the connection's close (an item still posted may use it). */
static void leave_mem(cipc_relay_conn_t *rc, CUdeviceptr p, int is_map)
{
    if (!p)
        return;
    if (is_map && rc->nleft_close < 128)
        rc->left_close[rc->nleft_close++] = p;
    else if (!is_map && rc->nleft_free < 64)
        rc->left_free[rc->nleft_free++] = p;
    else
        log_warn("relay memory at 0x%llx is left mapped (too many channels went with copies "
                 "still posted)",
                 (unsigned long long)p);
}

/* Opens the client's memory for serving, checking what it declared. */
static gpuport_status_t serve_open(gpuport_tl_chan_t *ch, const cipc_relay_rec_t *r,
                                   cipc_serve_t **out)
{
    cipc_serve_t *sv;
    CUdeviceptr b;
    size_t len = 0, slen = 0;
    gpuport_status_t st;

    if (r->stg_size < (64u << 10) || (r->stg_size & (r->stg_size - 1)) || r->src_size == 0) {
        log_error("channel to rank %d: the peer declared a relay with %llu bytes of staging and a "
                  "source of %llu bytes, which this rank refuses (a power of two of 64 KiB or "
                  "more, and a source, are needed)",
                  ch->peer, (unsigned long long)r->stg_size, (unsigned long long)r->src_size);
        return GPUPORT_ERR_PEER;
    }
    if (!(sv = calloc(1, sizeof(*sv))))
        return GPUPORT_ERR_NO_MEMORY;
    st = gpuport_tl_gpu_ctx_push(ch->comm);
    if (st) {
        free(sv);
        return st;
    }
    st = CU_CALL(cuIpcOpenMemHandle, (&sv->src_map, *(const CUipcMemHandle *)r->src_ipc,
                                      CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    if (!st)
        st = CU_CALL(cuMemGetAddressRange, (&b, &len, sv->src_map));
    if (!st)
        st = CU_CALL(cuIpcOpenMemHandle, (&sv->stg_map, *(const CUipcMemHandle *)r->stg_ipc,
                                          CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    if (!st)
        st = CU_CALL(cuMemGetAddressRange, (&b, &slen, sv->stg_map));
    if (!st &&
        (r->src_fd_offset > len || r->src_size > len - r->src_fd_offset || slen < r->stg_size)) {
        log_error("channel to rank %d: the peer's relay source (%llu bytes at %llu) or staging "
                  "(%llu bytes) runs past the memory it shared (%zu and %zu bytes)",
                  ch->peer, (unsigned long long)r->src_size, (unsigned long long)r->src_fd_offset,
                  (unsigned long long)r->stg_size, len, slen);
        st = GPUPORT_ERR_PEER;
    }
    if (st) {
        if (sv->stg_map)
            gpuport_cu.cuIpcCloseMemHandle(sv->stg_map);
        if (sv->src_map)
            gpuport_cu.cuIpcCloseMemHandle(sv->src_map);
        gpuport_tl_gpu_ctx_pop();
        log_error("channel to rank %d: cannot open the peer's relay memory in this rank's flusher "
                  "context",
                  ch->peer);
        free(sv);
        return st;
    }
    gpuport_tl_gpu_ctx_pop();
    sv->src = sv->src_map + r->src_fd_offset;
    sv->stg = sv->stg_map;
    sv->src_size = r->src_size;
    sv->stg_size = r->stg_size;
    *out = sv;
    return GPUPORT_OK;
}

gpuport_status_t cipc_relay_connect(gpuport_tl_chan_t *ch, const gpuport_channel_rec_t *peer)
{
    cipc_chan_t *cs = ch->priv;
    cipc_relay_conn_t *rc = rconn(ch->conn);
    cipc_relay_rec_t r;
    gpuport_status_t st;

    if (!rc)
        return GPUPORT_ERR_NO_MEMORY;
    pthread_mutex_lock(&rc->lock);
    for (relay_prep_t **pp = &rc->prepared; *pp; pp = &(*pp)->next) {
        if ((*pp)->id != ch->id)
            continue;
        relay_prep_t *p = *pp;
        cipc_relay_t *r2 = calloc(1, sizeof(*r2));
        *pp = p->next;
        if (!r2) {
            leave_mem(rc, p->stg, 0);
            free(p);
            pthread_mutex_unlock(&rc->lock);
            return GPUPORT_ERR_NO_MEMORY;
        }
        r2->stg = p->stg;
        r2->stg_size = p->size;
        r2->half = p->size / 2;
        free(p);
        cs->relay = r2;
        rc->nchans++;
        break;
    }
    pthread_mutex_unlock(&rc->lock);
    memcpy(&r, peer->tdata, sizeof(r));
    if (!r.relay)
        return GPUPORT_OK;
    st = serve_open(ch, &r, &cs->serve);
    if (!st)
        rc->nchans++;
    return st;
}

void cipc_relay_disconnect(gpuport_tl_chan_t *ch)
{
    cipc_chan_t *cs = ch->priv;
    cipc_relay_conn_t *rc = ((cipc_conn_t *)ch->conn->priv)->relay;

    if (!cs || !rc)
        return;
    pthread_mutex_lock(&rc->lock);
    if (cs->relay) {
        cipc_relay_t *r = cs->relay;
        if (r->n)
            log_warn("channel %u (to rank %d) is destroyed with %u operation(s) its relay did "
                     "not carry out (its destroy gave up waiting for them)",
                     ch->id, ch->peer, r->n);
        if (r->inflight || r->open)
            leave_mem(rc, r->stg, 0);
        else
            drop_mem(ch->comm, r->stg, 0);
        free(r->q);
        free(r);
        cs->relay = NULL;
        rc->nchans--;
    }
    if (cs->serve) {
        cipc_serve_t *sv = cs->serve;
        if (sv->inflight) {
            leave_mem(rc, sv->src_map, 1);
            leave_mem(rc, sv->stg_map, 1);
        } else {
            drop_mem(ch->comm, sv->src_map, 1);
            drop_mem(ch->comm, sv->stg_map, 1);
        }
        free(sv);
        cs->serve = NULL;
        rc->nchans--;
    }
    pthread_mutex_unlock(&rc->lock);
}

void cipc_relay_conn_close(gpuport_conn_t *conn)
{
    cipc_relay_conn_t *rc = ((cipc_conn_t *)conn->priv)->relay;

    if (!rc)
        return;
    while (rc->prepared) {
        relay_prep_t *p = rc->prepared;
        rc->prepared = p->next;
        drop_mem(conn->comm, p->stg, 0);
        free(p);
    }
    for (int i = 0; i < rc->nleft_close; i++)
        drop_mem(conn->comm, rc->left_close[i], 1);
    for (int i = 0; i < rc->nleft_free; i++)
        drop_mem(conn->comm, rc->left_free[i], 0);
    pthread_mutex_destroy(&rc->lock);
    free(rc);
    ((cipc_conn_t *)conn->priv)->relay = NULL;
}

/* ---- the client's queue (proxy thread) ---- */

int cipc_relay_on(const gpuport_tl_chan_t *ch)
{
    const cipc_chan_t *cs = ch->priv;

    return cs && cs->relay;
}

int cipc_relay_has_room(gpuport_tl_chan_t *ch)
{
    cipc_chan_t *cs = ch->priv;

    return !cs->relay || cs->relay->n < QUEUE_SOFT;
}

static relay_op_t *q_at(cipc_relay_t *r, uint32_t i)
{
    return &r->q[(r->head + i) % r->cap];
}

/* the operation numbered k (base <= k < base + n) */
static relay_op_t *op_no(cipc_relay_t *r, uint64_t k)
{
    return q_at(r, (uint32_t)(k - r->base));
}

/* Takes an operation (put, value, signal or get: the values of
 * cipc_relay_put and its kin below); it completes through
 * gpuport_tl_chan_complete. Signals are never refused for room: the queue
 * grows. */
static int enqueue(gpuport_tl_chan_t *ch, uint32_t kind, uint64_t dst_off, uint64_t src_off,
                   uint64_t size, uint64_t value)
{
    cipc_relay_t *r = ((cipc_chan_t *)ch->priv)->relay;
    relay_op_t *op;

    if (r->n == r->cap) {
        uint32_t cap = r->cap ? 2 * r->cap : 64;
        relay_op_t *q = malloc(cap * sizeof(*q));
        if (!q)
            return GPUPORT_ERR_NO_MEMORY;
        for (uint32_t i = 0; i < r->n; i++)
            q[i] = *q_at(r, i);
        free(r->q);
        r->q = q;
        r->cap = cap;
        r->head = 0;
    }
    op = q_at(r, r->n++);
    memset(op, 0, sizeof(*op));
    op->kind = kind;
    op->dst_off = dst_off;
    op->src_off = src_off;
    op->size = size;
    op->value = value;
    return GPUPORT_TRANSPORT_ASYNC;
}

int cipc_relay_put(gpuport_tl_chan_t *ch, uint64_t dst_off, uint64_t src_off, uint64_t size)
{
    return enqueue(ch, OP_PUT, dst_off, src_off, size, 0);
}

int cipc_relay_value(gpuport_tl_chan_t *ch, uint64_t dst_off, uint64_t value)
{
    return enqueue(ch, OP_VALUE, dst_off, 0, 8, value);
}

int cipc_relay_signal(gpuport_tl_chan_t *ch, uint64_t absolute)
{
    return enqueue(ch, OP_SIGNAL, 0, 0, 0, absolute);
}

int cipc_relay_get(gpuport_tl_chan_t *ch, uint64_t dst_off, uint64_t src_off, uint64_t size)
{
    return enqueue(ch, OP_GET, dst_off, src_off, size, 0);
}

static uint32_t rc_room(gpuport_conn_t *conn)
{
    return ITEMS_MAX - ((cipc_conn_t *)conn->priv)->relay->in;
}

static int post(gpuport_tl_chan_t *ch, const gpuport_work_t *w, uint32_t tag, uint64_t arg)
{
    cipc_chan_t *cs = ch->priv;
    cipc_relay_conn_t *rc = ((cipc_conn_t *)ch->conn->priv)->relay;
    relay_item_t *it;

    if (rc->in == ITEMS_MAX || !gpuport_tl_post(ch->conn, w))
        return 0;
    it = &rc->items[(rc->ihead + rc->in++) % ITEMS_MAX];
    it->id = ch->id;
    it->serial = cs->serial;
    it->tag = tag;
    it->arg = arg;
    if (tag & (T_SERVE | T_SERVE_COPY))
        cs->serve->inflight++;
    else
        cs->relay->inflight++;
    return 1;
}

static void ask(gpuport_tl_chan_t *ch, uint64_t kind, uint64_t off, uint64_t size, uint64_t stg_off)
{
    cipc_relay_t *r = ((cipc_chan_t *)ch->priv)->relay;
    gpuport_sem_slot_t *s = ch->remote_slot;

    atomic_store_explicit(&s->tl_word[W_OFF], off, memory_order_relaxed);
    atomic_store_explicit(&s->tl_word[W_SIZE], size, memory_order_relaxed);
    atomic_store_explicit(&s->tl_word[W_STG], (kind << REQ_SHIFT) | stg_off, memory_order_relaxed);
    atomic_store_explicit(&s->tl_word[W_SEQ], ++r->seq, memory_order_release);
    r->open = 1;
    r->open_ns = gpuport_now_ns();
    r->open_off = off;
    r->open_size = size;
}

static void complete_head(gpuport_tl_chan_t *ch, gpuport_status_t st)
{
    cipc_relay_t *r = ((cipc_chan_t *)ch->priv)->relay;

    r->head = (r->head + 1) % r->cap;
    r->n--;
    r->base++;
    if (r->next < r->base)
        r->next = r->base;
    if (r->scan < r->next)
        r->scan = r->next;
    gpuport_tl_chan_complete(ch, st);
}

static int small_put(const cipc_relay_t *r, const relay_op_t *op)
{
    return op->kind == OP_PUT && op->size <= r->half;
}

/* Asks the server to stage the next batch of small puts (from scan, values
 * and signals between them skipped, while their sources' span fits a half)
 * into a free half; 1 if it asked. */
static int ask_batch(gpuport_tl_chan_t *ch, cipc_relay_t *r)
{
    uint64_t end = r->base + r->n, first, last, k, lo, hi;
    uint32_t h = r->next_half, count = 0;

    if (r->open || r->busy[h])
        return 0;
    if (r->scan < r->next)
        r->scan = r->next;
    while (r->scan < end && !small_put(r, op_no(r, r->scan)) &&
           (op_no(r, r->scan)->kind == OP_VALUE || op_no(r, r->scan)->kind == OP_SIGNAL))
        r->scan++;
    if (r->scan == end || !small_put(r, op_no(r, r->scan)))
        return 0; /* a large put or a get: taken when it is next */
    first = last = r->scan;
    lo = op_no(r, first)->src_off;
    hi = lo + op_no(r, first)->size;
    for (k = first + 1; k < end && count < 512; k++) {
        relay_op_t *op = op_no(r, k);
        uint64_t nlo, nhi;
        if (op->kind == OP_VALUE || op->kind == OP_SIGNAL)
            continue;
        if (!small_put(r, op))
            break;
        nlo = op->src_off < lo ? op->src_off : lo;
        nhi = op->src_off + op->size > hi ? op->src_off + op->size : hi;
        if (nhi - nlo > r->half)
            break;
        lo = nlo;
        hi = nhi;
        last = k;
        count++;
    }
    for (k = first; k <= last; k++) {
        relay_op_t *op = op_no(r, k);
        if (op->kind != OP_PUT)
            continue;
        op->batched = 1;
        op->half = (uint8_t)h;
        op->stg_off = op->src_off - lo;
        op->last = k == last;
    }
    r->scan = last + 1;
    r->busy[h] = 1;
    r->next_half ^= 1;
    r->open_what = OPEN_BATCH;
    r->open_first = first;
    r->open_last = last;
    r->open_half = h;
    ask(ch, REQ_STAGE, lo, hi - lo, h * r->half);
    return 1;
}

/* Posts what it can of the operation numbered next; 1 if it moved. */
static int advance_one(gpuport_tl_chan_t *ch, cipc_relay_t *r)
{
    cipc_chan_t *cs = ch->priv;
    relay_op_t *op = op_no(r, r->next);
    gpuport_work_t w;

    memset(&w, 0, sizeof(w));
    switch (op->kind) {
    case OP_VALUE:
    case OP_SIGNAL:
        w.kind = GPUPORT_WORK_CU_WRITE;
        w.value = op->value;
        if (op->kind == OP_SIGNAL) {
            w.dst = (void *)(uintptr_t)cs->sem_d;
        } else {
            w.dst = (char *)ch->dst.base + op->dst_off;
            if (ch->dst.rec.kind == GPUPORT_REGION_DEVICE_POOL)
                w.flags |= GPUPORT_WORK_VALUE_COPY;
        }
        if (!post(ch, &w, T_COMPLETE, 0))
            return 0;
        r->next++;
        return 1;
    case OP_PUT:
        if (small_put(r, op)) {
            if (!op->staged)
                return 0; /* its batch is asked for, or will be */
            w.kind = GPUPORT_WORK_CU_COPY;
            w.dst = (char *)ch->dst.base + op->dst_off;
            w.src = (const void *)(uintptr_t)(r->stg + op->half * r->half + op->stg_off);
            w.size = op->size;
            /* the flusher runs in order: its batch's last copy done, the
             * half is read */
            if (!post(ch, &w, T_COMPLETE | (op->last ? (op->half ? T_HALF1 : T_HALF0) : 0), 0))
                return 0;
            r->next++;
            return 1;
        }
        if (r->ready) { /* a piece is staged: on to the destination */
            uint64_t at = op->posted;
            w.kind = GPUPORT_WORK_CU_COPY;
            w.dst = (char *)ch->dst.base + op->dst_off + at;
            w.src = (const void *)(uintptr_t)(r->stg + r->open_half * r->half);
            w.size = r->open_size;
            if (!post(ch, &w, (r->open_half ? T_HALF1 : T_HALF0) |
                                  (at + r->open_size == op->size ? T_COMPLETE : 0), 0))
                return 0;
            r->ready = 0;
            op->posted += r->open_size;
            if (op->posted == op->size) {
                r->next++;
                if (r->scan < r->next)
                    r->scan = r->next;
            }
            return 1;
        }
        if (r->open || op->asked == op->size || r->busy[r->next_half])
            return 0;
        r->open_half = r->next_half;
        r->busy[r->open_half] = 1;
        r->next_half ^= 1;
        r->open_what = OPEN_PIECE;
        ask(ch, REQ_STAGE, op->src_off + op->asked,
            op->size - op->asked < r->half ? op->size - op->asked : r->half,
            r->open_half * r->half);
        op->asked += r->open_size;
        return 1;
    case OP_GET:
        if (r->open || r->get_phase == 1)
            return 0;
        if (r->get_phase == 0) {
            /* the flusher runs in order: earlier relay copies out of half
             * 0 are done before this copy writes it, and no later batch is
             * asked for before the get is done */
            uint64_t n = op->size - op->asked < r->half ? op->size - op->asked : r->half;
            w.kind = GPUPORT_WORK_CU_COPY;
            w.dst = (void *)(uintptr_t)r->stg;
            w.src = (const char *)ch->dst.base + op->dst_off + op->asked;
            w.size = n;
            if (!post(ch, &w, T_GETCOPY, 0))
                return 0;
            r->get_phase = 1;
            r->open_size = n;
            return 1;
        }
        r->open_what = OPEN_UNSTAGE;
        ask(ch, REQ_UNSTAGE, op->src_off + op->asked, r->open_size, 0);
        r->get_phase = 0;
        op->asked += r->open_size;
        return 1;
    }
    return 0;
}

/* The server answered the open request. */
static void answered(gpuport_tl_chan_t *ch, cipc_relay_t *r)
{
    relay_op_t *op;

    r->open = 0;
    switch (r->open_what) {
    case OPEN_BATCH:
        for (uint64_t k = r->open_first; k <= r->open_last; k++)
            if (op_no(r, k)->kind == OP_PUT)
                op_no(r, k)->staged = 1;
        return;
    case OPEN_PIECE:
        r->ready = 1;
        return;
    }
    /* a get's piece is in its source */
    op = op_no(r, r->next);
    op->posted += r->open_size;
    if (op->posted == op->size) {
        r->next++;
        complete_head(ch, GPUPORT_OK);
    }
}

/* Nothing more is posted; what is left completes with st. fail: the
 * failure is this side's (a timeout, the peer's bad answer), so the channel
 * fails with it here; a peer's failure is the core's to report. */
static void abort_relay(gpuport_tl_chan_t *ch, cipc_relay_t *r, gpuport_status_t st, int fail)
{
    if (!r->aborted)
        r->aborted = st;
    if (fail)
        gpuport_tl_chan_fail(ch, st);
}

static int client_pass(gpuport_tl_chan_t *ch, cipc_relay_t *r)
{
    gpuport_comm_t comm = ch->comm;
    gpuport_sem_slot_t *mine = gpuport_tl_sem(comm, ch->id);
    int moved = 0, step;

    if (!r->aborted && r->n) {
        int32_t word = atomic_load_explicit(&mine->peer_status, memory_order_acquire);
        /* a peer that closed in order still serves what came before; one
         * that failed or died serves nothing more */
        if (word != GPUPORT_OK && word != GPUPORT_ERR_CLOSED)
            abort_relay(ch, r, GPUPORT_ERR_PEER, 0);
    }
    if (!r->aborted && r->open) {
        uint64_t done = atomic_load_explicit(&mine->tl_word[W_DONE], memory_order_acquire);
        if (done > r->seq) {
            log_error("channel %u (to rank %d): the peer answered relay request %llu, and only "
                      "%llu were made; the channel fails (a protocol error)",
                      ch->id, ch->peer, (unsigned long long)done, (unsigned long long)r->seq);
            abort_relay(ch, r, GPUPORT_ERR_PEER, 1);
        } else if (done == r->seq) {
            answered(ch, r);
            moved = 1;
        } else {
            uint64_t limit = gpuport_tl_timeout_ns(comm), now = gpuport_now_ns();
            if (limit && now - r->open_ns > limit) {
                log_error("channel %u (to rank %d): rank %d's proxy did not copy %llu bytes at "
                          "offset %llu for the relay of this rank's cudaMalloc memory within "
                          "GPUPORT_TIMEOUT_MS=%llu (stopped, or its flusher held); the channel "
                          "fails",
                          ch->id, ch->peer, ch->peer, (unsigned long long)r->open_size,
                          (unsigned long long)r->open_off,
                          (unsigned long long)(limit / 1000000));
                abort_relay(ch, r, GPUPORT_ERR_TIMEOUT, 1);
            }
        }
    }
    if (r->aborted) {
        /* nothing more is posted; once the posted items are back, what is
         * left completes with the error, in order */
        if (r->inflight == 0)
            while (r->n) {
                complete_head(ch, r->aborted);
                moved = 1;
            }
        return moved;
    }
    do {
        step = 0;
        while (r->next < r->base + r->n && advance_one(ch, r))
            step = 1;
        step |= ask_batch(ch, r);
        moved |= step;
    } while (step);
    if (r->n)
        gpuport_tl_keep_awake(comm, gpuport_now_ns() + 1000000);
    return moved;
}

/* ---- the server (proxy thread) ---- */

static int serve_pass(gpuport_tl_chan_t *ch, cipc_serve_t *sv)
{
    gpuport_sem_slot_t *mine = gpuport_tl_sem(ch->comm, ch->id);
    uint64_t seq, off, size, stg, kind, stg_off;
    gpuport_work_t w;

    if (sv->broken || sv->posting)
        return 0;
    seq = atomic_load_explicit(&mine->tl_word[W_SEQ], memory_order_acquire);
    if (seq == sv->served)
        return 0;
    off = atomic_load_explicit(&mine->tl_word[W_OFF], memory_order_relaxed);
    size = atomic_load_explicit(&mine->tl_word[W_SIZE], memory_order_relaxed);
    stg = atomic_load_explicit(&mine->tl_word[W_STG], memory_order_relaxed);
    kind = stg >> REQ_SHIFT;
    stg_off = stg & STG_MASK;
    if (!cipc_relay_request_ok(seq, sv->served, kind, off, size, stg_off, sv->src_size,
                               sv->stg_size)) {
        log_error("channel %u (to rank %d): relay request %llu from the peer is not one this "
                  "rank can carry (after %llu; kind %llu, %llu bytes at source offset %llu, "
                  "staging offset %llu; its source has %llu bytes, its staging %llu); the "
                  "channel fails (a protocol error)",
                  ch->id, ch->peer, (unsigned long long)seq, (unsigned long long)sv->served,
                  (unsigned long long)kind, (unsigned long long)size, (unsigned long long)off,
                  (unsigned long long)stg_off, (unsigned long long)sv->src_size,
                  (unsigned long long)sv->stg_size);
        sv->broken = 1;
        gpuport_tl_chan_fail(ch, GPUPORT_ERR_PEER);
        return 1;
    }
    /* the copy, then the answer written by the flusher's stream behind it
     * into the client's slot (its control segment, registered in the
     * flusher's context), so the client sees it as soon as the copy is
     * done */
    if (!gpuport_tl_flusher_room(ch->comm, 2) || rc_room(ch->conn) < 2)
        return 0;
    memset(&w, 0, sizeof(w));
    w.kind = GPUPORT_WORK_CU_COPY;
    w.size = size;
    if (kind == REQ_STAGE) {
        w.dst = (void *)(uintptr_t)(sv->stg + stg_off);
        w.src = (const void *)(uintptr_t)(sv->src + off);
    } else {
        w.dst = (void *)(uintptr_t)(sv->src + off);
        w.src = (const void *)(uintptr_t)(sv->stg + stg_off);
    }
    if (!post(ch, &w, T_SERVE_COPY, seq))
        return 0;
    memset(&w, 0, sizeof(w));
    w.kind = GPUPORT_WORK_CU_WRITE;
    w.dst = (void *)(uintptr_t)(((cipc_conn_t *)ch->conn->priv)->ctrl_d +
                                ch->peer_id * sizeof(gpuport_sem_slot_t) +
                                offsetof(gpuport_sem_slot_t, tl_word[W_DONE]));
    w.value = seq;
    if (!post(ch, &w, T_SERVE, seq)) {
        /* room was counted: not expected; the copy's completion answers */
        sv->answer_on_copy = 1;
    }
    sv->served = seq;
    sv->posting = 1;
    /* a put larger than a staging half asks again at once */
    gpuport_tl_keep_awake(ch->comm, gpuport_now_ns() + 1000000);
    return 1;
}

typedef struct pass_arg {
    int moved;
} pass_arg_t;

static void chan_pass(gpuport_tl_chan_t *ch, void *arg)
{
    cipc_chan_t *cs = ch->priv;
    pass_arg_t *a = arg;

    if (!cs)
        return;
    if (cs->serve)
        a->moved += serve_pass(ch, cs->serve);
    if (cs->relay)
        a->moved += client_pass(ch, cs->relay);
}

int cipc_relay_progress(gpuport_conn_t *conn)
{
    cipc_relay_conn_t *rc = ((cipc_conn_t *)conn->priv)->relay;
    pass_arg_t a = {0};

    if (!rc || rc->nchans == 0)
        return 0;
    gpuport_tl_conn_each(conn, chan_pass, &a);
    return a.moved;
}

void cipc_relay_work_done(gpuport_conn_t *conn, gpuport_status_t st)
{
    cipc_relay_conn_t *rc = ((cipc_conn_t *)conn->priv)->relay;
    relay_item_t it;
    gpuport_tl_chan_t *ch;
    cipc_chan_t *cs;

    if (!rc || rc->in == 0)
        return;
    it = rc->items[rc->ihead];
    rc->ihead = (rc->ihead + 1) % ITEMS_MAX;
    rc->in--;
    ch = gpuport_tl_chan_find(conn, it.id);
    cs = ch ? ch->priv : NULL;
    if (!cs || cs->serial != it.serial)
        return; /* its channel is gone */
    if (it.tag & (T_SERVE | T_SERVE_COPY)) {
        cipc_serve_t *sv = cs->serve;
        sv->inflight--;
        if (st != GPUPORT_OK) {
            sv->broken = 1;
            sv->posting = 0;
            gpuport_tl_chan_fail(ch, st);
            return;
        }
        if ((it.tag & T_SERVE_COPY) && sv->answer_on_copy) {
            sv->answer_on_copy = 0;
            atomic_store_explicit(&ch->remote_slot->tl_word[W_DONE], it.arg,
                                  memory_order_release);
            sv->posting = 0;
        }
        if (it.tag & T_SERVE)
            sv->posting = 0;
        return;
    }
    cipc_relay_t *r = cs->relay;
    r->inflight--;
    if (st != GPUPORT_OK)
        abort_relay(ch, r, st, 1);
    if (it.tag & T_HALF0)
        r->busy[0] = 0;
    if (it.tag & T_HALF1)
        r->busy[1] = 0;
    if (it.tag & T_GETCOPY)
        r->get_phase = 2;
    if (it.tag & T_COMPLETE)
        complete_head(ch, st);
}
