/*
 * tcp: the answers to the peer's GETs read from GPU memory, kept in the
 * channel's order (proxy thread). Such an answer's bytes are copied out by
 * the flusher (tx staging, in send order, as far as staging has room),
 * and a later PUT or VALUE into that memory is applied by the flusher too.
 * The flusher runs its work in posting order on one stream, so a GET reads
 * what was there when it came exactly where its copies are posted before
 * the later write's. Staging's room comes back only as the peer reads, and
 * the peer may itself be waiting for this side to read: a header reader
 * that waited for staging room could wait on a peer waiting on it. So a
 * write that meets bytes of an answer not yet staged has the rest of that
 * answer copied out first, through a slot of its own (the last piece of tx
 * staging), into host memory the answer is then sent from; the header
 * waits for the flusher alone, never for the peer, and each piece for at
 * most GPUPORT_TIMEOUT_MS.
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_TL(GPUPORT_TL_KIND_TCP)
#include <stdlib.h>
#include <string.h>

#include "transport/tcp/tcp_priv.h"

static char *snap_slot(const tcp_conn_t *tc)
{
    return tc->txs + (size_t)NSLOT * CHUNK;
}

/* Bytes of tx item idx's payload whose staging copies are posted: all of
 * an item before the one staging is at, sg_off of that one, none after
 * (tcp_stage_tx: an sg_item behind tx_head stands for tx_head at 0). */
static uint64_t staged_upto(const tcp_conn_t *tc, uint32_t idx, const tx_item_t *it)
{
    uint32_t at = tc->sg_item;
    uint64_t off = tc->sg_off;
    int32_t d;

    if ((int32_t)(at - tc->tx_head) < 0) {
        at = tc->tx_head;
        off = 0;
    }
    d = (int32_t)(idx - at);
    return d < 0 ? tcp_staged_end(it) : d == 0 ? off : 0;
}

/* [lo, hi): the GPU memory here that m writes, if it is a PUT or VALUE
 * that will write there (one that does not fit is refused and writes
 * nothing); 0 for anything else. */
static int gpu_write(const tcp_conn_t *tc, const tcp_msg_t *m, uintptr_t *lo, uintptr_t *hi)
{
    uint64_t len = m->type == MSG_PUT ? m->size : m->type == MSG_VALUE ? 8 : 0;
    gpuport_tl_chan_t *ch;

    if (len == 0 || !(ch = tcp_rx_channel(tc, m->channel)) ||
        !gpuport_region_is_device(ch->local_dst.kind) || m->a > ch->local_dst.size ||
        len > ch->local_dst.size - m->a)
        return 0;
    *lo = (uintptr_t)ch->local_dst.ptr + m->a;
    *hi = *lo + len;
    return 1;
}

/* The next piece of the answer being copied out goes to the flusher, into
 * the slot, when the slot is free and the flusher has room. */
static void snap_post(tcp_conn_t *tc)
{
    tx_item_t *it = &tc->tx[tc->snap_item % tc->tx_cap];
    uint64_t left = it->hdr.size - it->snap_from - it->snap_have;
    gpuport_work_t w;

    if (tc->snap_in_slot || tcp_post_full(tc))
        return;
    memset(&w, 0, sizeof(w));
    w.kind = GPUPORT_WORK_CU_FROM_DEVICE;
    w.dst = snap_slot(tc);
    w.src = it->dev_src + it->snap_from + it->snap_have;
    w.size = left < CHUNK ? left : CHUNK;
    /* regions are VMM memory (tcp_chan_connect): the flusher's own context */
    if (!gpuport_tl_post(tc->conn, &w))
        return;
    tcp_post_push(tc, POST_SNAP, w.size);
    tc->snap_in_slot = 1;
}

/* The answer at tx index idx, from its first byte not staged on, is copied
 * out before anything behind it is posted. */
static void snap_start(tcp_conn_t *tc, uint32_t idx, tx_item_t *it, uint64_t from)
{
    if (!(it->snap = malloc((size_t)(it->hdr.size - from)))) {
        tcp_conn_break(tc, GPUPORT_ERR_NO_MEMORY, "could not copy the bytes of a get out of "
                       "the way of a later write into GPU memory", 0);
        return;
    }
    it->snap_from = from;
    it->snap_have = 0;
    tc->snapping = 1;
    tc->snap_item = idx;
    tc->snap_since_ns = gpuport_now_ns();
    tc->snaps++;
    snap_post(tc);
}

/* A copy under way that made no progress for GPUPORT_TIMEOUT_MS ends the
 * connection: the flusher is stuck (the proxy is kept awake to see it). */
static int snap_late(tcp_conn_t *tc)
{
    uint64_t limit = gpuport_tl_timeout_ns(tc->comm);

    if (limit == 0)
        return 0;
    if (gpuport_now_ns() - tc->snap_since_ns < limit) {
        gpuport_tl_keep_awake(tc->comm, tc->snap_since_ns + limit);
        return 0;
    }
    tcp_conn_break(tc, GPUPORT_ERR_TIMEOUT, "timed out: the flusher copied no piece of a get's "
                   "answer out of GPU memory within GPUPORT_TIMEOUT_MS (a later write there "
                   "waits for it)", 0);
    return 1;
}

/* The first answer queued with bytes in [lo, hi) that no staging copy
 * posted reads yet (*from_p: its first such byte), or NULL. */
static tx_item_t *unread(const tcp_conn_t *tc, uintptr_t lo, uintptr_t hi, uint32_t *idx_p,
                         uint64_t *from_p)
{
    for (uint32_t i = tc->tx_head; i != tc->tx_tail; i++) {
        tx_item_t *it = &tc->tx[i % tc->tx_cap];
        uint64_t from;
        uintptr_t p;
        if (it->hdr.type != MSG_GET_DATA || !it->dev_src || it->snap)
            continue;
        from = staged_upto(tc, i, it);
        p = (uintptr_t)it->dev_src;
        if (from >= it->hdr.size || hi <= p + from || lo >= p + it->hdr.size)
            continue;
        *idx_p = i;
        *from_p = from;
        return it;
    }
    return NULL;
}

int tcp_snap_wait(tcp_conn_t *tc, const tcp_msg_t *m)
{
    uintptr_t lo, hi;
    tx_item_t *it;
    uint32_t idx;
    uint64_t from;

    if (tc->snapping) {
        if (!snap_late(tc))
            snap_post(tc);
        return 1;
    }
    /* most writes meet no answer from GPU memory: no walk of the ring */
    if (tc->dev_answers == 0 || !gpu_write(tc, m, &lo, &hi) ||
        !unread(tc, lo, hi, &idx, &from))
        return 0;
    /* staging's copies, in send order, may reach it now (an answer queued
     * in this same read, with staging room): no snapshot then */
    tcp_stage_tx(tc);
    if (!(it = unread(tc, lo, hi, &idx, &from)))
        return 0;
    snap_start(tc, idx, it, from);
    return 1;
}

void tcp_snap_done(tcp_conn_t *tc, uint64_t len)
{
    tx_item_t *it = &tc->tx[tc->snap_item % tc->tx_cap];

    memcpy(it->snap + it->snap_have, snap_slot(tc), (size_t)len);
    it->snap_have += len;
    tc->snap_in_slot = 0;
    tc->snap_since_ns = gpuport_now_ns();
    if (it->snap_from + it->snap_have == it->hdr.size)
        tc->snapping = 0;
    else
        snap_post(tc);
}
