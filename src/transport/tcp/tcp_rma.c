/*
 * tcp: get, atomic_add and accumulate (proxy thread): the operations sent
 * (GET, ADD, ACC: counted and acknowledged as PUT is) and their messages
 * received. A GET is answered with GET_DATA, the bytes sent from the
 * destination region here into the getter's source region; ADD and ACC add
 * into host memory here, one atomic add per element (the flusher's ADD64 and
 * ACCUMULATE work, run on this thread).
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_TL(GPUPORT_TL_KIND_TCP)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/tcp/tcp_priv.h"

/* ---- this side's operations ---- */

/* A getter's source and an adder's destination must be host memory: GET_DATA
 * is received in place (no rx staging for it yet), and only the GPU adds
 * into GPU memory atomically with respect to its own kernels' adds. */
int tcp_rma_ok(const gpuport_tl_chan_t *ch, uint32_t op, char *why, size_t len)
{
    if (op == GPUPORT_OP_GET) {
        if (!gpuport_region_is_device(ch->src.kind))
            return 1;
        snprintf(why, len, "tcp get into GPU memory is not supported yet: get into host "
                 "memory, or use cuda_ipc between ranks on one host");
        return 0;
    }
    if (!gpuport_region_is_device(ch->dst.rec.kind))
        return 1;
    snprintf(why, len, "rank %d's destination is GPU memory, and adding into GPU memory needs "
             "the GPU's own atomics: use a memory channel (gpuport_memory_atomic_add / "
             "gpuport_memory_accumulate) between ranks on one host",
             ch->peer);
    return 0;
}

/* Queued as a put is (the stream keeps the channel's order); an ACC's
 * source is sent from where it is, a GPU one through tx staging. */
int tcp_rma(gpuport_tl_chan_t *ch, const gpuport_op_desc_t *d, int behind_work,
            gpuport_work_t *work)
{
    (void)behind_work, (void)work;
    if (d->op == GPUPORT_OP_GET)
        return tcp_queue_op(ch, MSG_GET, d->dst_off, d->size, d->src_off, NULL, 0);
    if (d->op == GPUPORT_OP_ATOMIC_ADD)
        return tcp_queue_op(ch, MSG_ADD, d->dst_off, 0, d->value, NULL, 0);
    return tcp_queue_op(ch, MSG_ACC, d->dst_off, d->size, d->op,
                        (const char *)ch->src.ptr + d->src_off,
                        gpuport_region_is_device(ch->src.kind));
}

/* ---- the peer's GET ---- */

/* one GET_DATA more reads from a host region here, at src (tcp_rma_guard) */
static void answer_in_place(tcp_conn_t *tc, const char *src, uint64_t size)
{
    uintptr_t lo = (uintptr_t)src, hi = lo + size;

    if (tc->answers_in_place++ == 0) {
        tc->answers_lo = lo;
        tc->answers_hi = hi;
        return;
    }
    tc->answers_lo = lo < tc->answers_lo ? lo : tc->answers_lo;
    tc->answers_hi = hi > tc->answers_hi ? hi : tc->answers_hi;
}

/* Answered with GET_DATA, queued now (the caller checked room), its bytes
 * sent from the destination region when their turn comes (a GPU region's
 * through tx staging, ordered behind the GPU copies of earlier puts on the
 * flusher's stream, and ahead of later ones': tcp_snap.c); the GET counts
 * as applied at once, after its answer is queued. A GET this side cannot answer is answered with no bytes and
 * the status, which fails the getter's channel; one outside the region
 * fails this side's too, as a PUT there does. */
static void on_get(tcp_conn_t *tc, const tcp_msg_t *m)
{
    gpuport_tl_chan_t *ch = tcp_rx_channel(tc, m->channel);
    gpuport_status_t st = GPUPORT_OK;
    const char *src;
    tx_item_t *it;

    if (!ch) {
        log_error("rank %d asked to get %llu bytes from channel %u, which is not open here; "
                  "refused",
                  tc->peer, (unsigned long long)m->size, m->channel);
        st = GPUPORT_ERR_PEER;
    } else if (m->a > ch->local_dst.size || m->size > ch->local_dst.size - m->a) {
        log_error("rank %d asked to get %llu bytes at offset %llu of channel %u, outside its "
                  "%llu-byte destination; refused, the channel is failed",
                  tc->peer, (unsigned long long)m->size, (unsigned long long)m->a, m->channel,
                  (unsigned long long)ch->local_dst.size);
        st = GPUPORT_ERR_OUT_OF_RANGE;
        gpuport_tl_chan_fail(ch, st);
    }
    if (st) {
        it = tcp_tx_push(tc, MSG_GET_DATA, ch ? ch->peer_id : NO_CHANNEL, m->value, 0, NULL);
        it->hdr.value = (uint64_t)(int64_t)st;
    } else if (m->size == 0) {
        tcp_tx_push(tc, MSG_GET_DATA, ch->peer_id, m->value, 0, NULL);
    } else {
        src = (const char *)ch->local_dst.ptr + m->a;
        if (gpuport_region_is_device(ch->local_dst.kind)) {
            it = tcp_tx_push(tc, MSG_GET_DATA, ch->peer_id, m->value, m->size, NULL);
            it->dev_src = src;
            tc->dev_answers++;
        } else {
            tcp_tx_push(tc, MSG_GET_DATA, ch->peer_id, m->value, m->size, src);
            answer_in_place(tc, src, m->size);
        }
    }
    tcp_rx_op_done(tc);
}

/* Copies out of the region are made only where a write would change what an
 * answer still to be sent reads, which the peer asked for only by writing
 * there before its get completed; GPU regions have their own guard
 * (tcp_snap.c: the flusher copies the answer out before the write). */
void tcp_rma_guard(tcp_conn_t *tc, const tcp_msg_t *m)
{
    gpuport_tl_chan_t *ch = tcp_rx_channel(tc, m->channel);
    uint64_t len = m->type == MSG_PUT || m->type == MSG_ACC ? m->size : 8;
    uintptr_t lo, hi;

    if (!ch || gpuport_region_is_device(ch->local_dst.kind) || len == 0 ||
        m->a > ch->local_dst.size || len > ch->local_dst.size - m->a)
        return;
    lo = (uintptr_t)ch->local_dst.ptr + m->a;
    hi = lo + len;
    if (hi <= tc->answers_lo || lo >= tc->answers_hi)
        return;
    for (uint32_t i = tc->tx_head; i != tc->tx_tail && tc->answers_in_place; i++) {
        tx_item_t *it = &tc->tx[i % tc->tx_cap];
        uintptr_t p = (uintptr_t)it->payload;
        if (it->hdr.type != MSG_GET_DATA || !it->payload || it->copy || hi <= p ||
            lo >= p + it->hdr.size)
            continue;
        if (!(it->copy = malloc(it->hdr.size))) {
            tcp_conn_break(tc, GPUPORT_ERR_NO_MEMORY, "could not copy the bytes of a get "
                           "out of the way of a later write", 0);
            return;
        }
        memcpy(it->copy, it->payload, it->hdr.size);
        it->payload = it->copy;
        tcp_answer_out(tc);
    }
}

/* ---- the answer to this side's GET ---- */

/* Received in place into the source region (tcp_rma_ok keeps GPU memory
 * out); not an operation, so nothing is counted or acknowledged for it.
 * GET_DATA answers this side's GETs in order, so it must be the answer to
 * the oldest one: its bytes where that GET asked, or none and the status
 * that refused it, one of gpuport's errors (any other word, cast, could
 * read as GPUPORT_OK: a get answered with nothing whose flush succeeds).
 * Anything else is a broken peer: the connection ends before a byte of it
 * is written. */
static void on_get_data(tcp_conn_t *tc, const tcp_msg_t *m)
{
    const tcp_get_want_t *w;
    gpuport_tl_chan_t *ch;
    int refusal = m->size == 0 && m->value != 0;
    char msg[200];

    if (tc->gets_got >= tc->gets_sent) {
        tcp_protocol_error(tc, "answered a get (%llu bytes) that was not asked for (%llu asked)",
                           m->size, tc->gets_sent);
        return;
    }
    w = &tc->get_want[tc->gets_got % tc->q];
    if (refusal && !gpuport_status_is_error((int64_t)m->value)) {
        snprintf(msg, sizeof(msg), "refused the get of %llu bytes on channel %u with status "
                 "%lld (GET_DATA's status field), which is no gpuport error",
                 (unsigned long long)w->size, w->channel, (long long)m->value);
        tcp_protocol_break(tc, msg);
        return;
    }
    if (refusal ? m->channel != NO_CHANNEL && m->channel != w->channel
                : m->channel != w->channel || m->a != w->off || m->size != w->size ||
                      m->value != 0) {
        snprintf(msg, sizeof(msg), "answered the get of %llu bytes at offset %llu of channel %u "
                 "with %llu bytes at offset %llu of channel %u (status %lld)",
                 (unsigned long long)w->size, (unsigned long long)w->off, w->channel,
                 (unsigned long long)m->size, (unsigned long long)m->a, m->channel,
                 (long long)m->value);
        tcp_protocol_break(tc, msg);
        return;
    }
    ch = refusal ? gpuport_tl_chan_find(tc->conn, w->channel) : tcp_rx_channel(tc, m->channel);
    tc->in_payload = m->size > 0;
    tc->pay_type = MSG_GET_DATA;
    tc->payload_left = m->size;
    tc->big_puts = m->size >= DIRECT_MIN;
    tc->payload_dst = NULL;
    tc->dev_payload = 0;
    if (refusal) {
        /* the peer logged why */
        if (ch && gpuport_tl_chan_fail(ch, (gpuport_status_t)(int64_t)m->value))
            log_error("channel %u: rank %d refused a get (%s); the channel is failed", ch->id,
                      tc->peer, gpuport_status_string((gpuport_status_t)(int64_t)m->value));
    } else if (!ch) {
        log_error("rank %d answered a get on channel %u, which is not open here; its %llu "
                  "bytes are dropped",
                  tc->peer, m->channel, (unsigned long long)m->size);
    } else if (m->a > ch->src.size || m->size > ch->src.size - m->a ||
               (m->size && gpuport_region_is_device(ch->src.kind))) {
        log_error("rank %d answered a get on channel %u with %llu bytes for offset %llu of "
                  "its %llu-byte %s source, which cannot take them; dropped, the channel is "
                  "failed",
                  tc->peer, m->channel, (unsigned long long)m->size, (unsigned long long)m->a,
                  (unsigned long long)ch->src.size,
                  gpuport_region_is_device(ch->src.kind) ? "GPU" : "host");
        gpuport_tl_chan_fail(ch, GPUPORT_ERR_PEER);
    } else if (tc->in_payload) {
        tc->payload_dst = (char *)ch->src.ptr + m->a;
    }
    if (!tc->in_payload)
        tcp_get_data_done(tc);
}

void tcp_get_data_done(tcp_conn_t *tc)
{
    tc->gets_got++;
    if (tc->acks_seen > tc->ops_acked)
        tcp_apply_acks(tc, tc->acks_seen);
}

/* ---- the peer's ADD and ACC ---- */

/* The element size of an ACC's op (its value field, 64 bits on the wire);
 * 0 for anything but an accumulate's op. */
static uint32_t acc_elem(uint64_t op)
{
    return op <= UINT32_MAX ? gpuport_acc_elem_size((uint32_t)op) : 0;
}

/* Where an add of size bytes of elem-byte elements at offset a goes, or NULL
 * (logged, the channel failed) where it may not: outside the destination,
 * not aligned to the element there, or into GPU memory (tcp_rma_ok refused
 * that at the peer). */
static char *add_dst(tcp_conn_t *tc, gpuport_tl_chan_t *ch, const tcp_msg_t *m, uint64_t size,
                     uint32_t elem)
{
    const char *what = m->type == MSG_ADD ? "an atomic_add" : "an accumulate";
    gpuport_status_t st = GPUPORT_ERR_INVALID_ARG;
    const char *why;

    if (!ch) {
        log_error("rank %d sent %s for channel %u, which is not open here; dropped", tc->peer,
                  what, m->channel);
        return NULL;
    }
    if (elem == 0) {
        why = "of an unknown element type";
    } else if (m->a > ch->local_dst.size || size > ch->local_dst.size - m->a || size == 0) {
        why = size ? "outside the destination" : "of no elements";
        st = size ? GPUPORT_ERR_OUT_OF_RANGE : GPUPORT_ERR_INVALID_ARG;
    } else if (gpuport_region_is_device(ch->local_dst.kind)) {
        why = "into GPU memory, which tcp does not add into";
        st = GPUPORT_ERR_NOT_SUPPORTED;
    } else if (size % elem || ((uintptr_t)ch->local_dst.ptr + m->a) % elem) {
        why = "not aligned to its element";
    } else {
        return (char *)ch->local_dst.ptr + m->a;
    }
    log_error("rank %d sent %s of %llu bytes at offset %llu of channel %u (%llu-byte "
              "destination), %s; discarded, the channel is failed",
              tc->peer, what, (unsigned long long)size, (unsigned long long)m->a, m->channel,
              (unsigned long long)ch->local_dst.size, why);
    gpuport_tl_chan_fail(ch, st);
    return NULL;
}

/* Added now, into host memory, as a VALUE is stored now. */
static void on_add(tcp_conn_t *tc, const tcp_msg_t *m)
{
    gpuport_work_t w;

    memset(&w, 0, sizeof(w));
    w.dst = add_dst(tc, tcp_rx_channel(tc, m->channel), m, 8, 8);
    w.kind = GPUPORT_WORK_ADD64;
    w.value = m->value;
    if (w.dst)
        gpuport_tl_work_execute(&w);
    tcp_rx_op_done(tc);
}

/* The payload goes through acc_buf, and its whole elements are added as they
 * come (tcp_acc_take); the ACC counts as applied at its end. */
static void on_acc(tcp_conn_t *tc, const tcp_msg_t *m)
{
    char *dst = add_dst(tc, tcp_rx_channel(tc, m->channel), m, m->size, acc_elem(m->value));

    tc->in_payload = m->size > 0;
    tc->pay_type = MSG_ACC;
    tc->payload_left = m->size;
    tc->big_puts = m->size >= DIRECT_MIN;
    tc->payload_dst = NULL;
    tc->dev_payload = 0;
    tc->acc_fill = 0;
    if (dst && !tc->acc_buf && !(tc->acc_buf = malloc(ACC_BUF))) {
        tcp_conn_break(tc, GPUPORT_ERR_NO_MEMORY, "could not allocate the buffer of an "
                       "accumulate", 0);
        return;
    }
    if (dst) {
        tc->acc_dst = dst;
        tc->payload_dst = tc->acc_buf;
    }
    if (!tc->in_payload)
        tcp_rx_op_done(tc);
}

void tcp_acc_take(tcp_conn_t *tc, uint64_t n)
{
    uint32_t elem = acc_elem(tc->cur.value);
    uint64_t whole;

    if (!tc->payload_dst)
        return;
    tc->acc_fill += n;
    whole = tc->acc_fill - tc->acc_fill % elem;
    if (whole) {
        gpuport_work_t w;
        memset(&w, 0, sizeof(w));
        w.kind = GPUPORT_WORK_ACCUMULATE;
        w.dst = tc->acc_dst;
        w.src = tc->acc_buf;
        w.size = whole;
        w.value = tc->cur.value;
        gpuport_tl_work_execute(&w);
        tc->acc_dst += whole;
        /* an element split between reads: its first bytes wait for the rest */
        memmove(tc->acc_buf, tc->acc_buf + whole, (size_t)(tc->acc_fill - whole));
        tc->acc_fill -= whole;
    }
    tc->payload_dst = tc->acc_buf + tc->acc_fill;
}

void tcp_rma_header(tcp_conn_t *tc, const tcp_msg_t *m)
{
    switch (m->type) {
    case MSG_GET:
        on_get(tc, m);
        return;
    case MSG_GET_DATA:
        on_get_data(tc, m);
        return;
    case MSG_ADD:
        on_add(tc, m);
        return;
    default:
        on_acc(tc, m);
    }
}
