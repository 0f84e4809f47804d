/*
 * tcp: a connection that breaks or ends, and completions of operations in
 * flight (proxy thread). Kept apart so that sending and receiving, which break
 * connections and complete operations, depend on this file and not on the
 * ops table in tcp.c.
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_TL(GPUPORT_TL_KIND_TCP)
#include <stdio.h>
#include <string.h>

#include "transport/tcp/tcp_priv.h"

_Thread_local char tcp_lock_self;

/* Fails every channel on the connection here and completes what was in
 * flight with the error, so flushes and waits return. Logged where that
 * loses something, or always (a peer that broke the protocol). */
static void conn_break(tcp_conn_t *tc, gpuport_status_t status, const char *what, int err,
                       int always)
{
    gpuport_comm_t comm = tc->comm;
    int failed;

    if (tc->broken)
        return;
    tc->broken = status;
    /* atomic: tcp_chan_connect reads it from the application's thread */
    __atomic_store_n(&tc->fail_status, status, __ATOMIC_RELAXED);
    tc->next_rescan_ns = gpuport_now_ns() + RESCAN_NS;
    failed = gpuport_tl_conn_fail(tc->conn, status);
    if (always || failed || tc->ops_sent > tc->ops_acked)
        log_error("connection to rank %d (%s) %s%s%s; %d channel(s) failed, %llu "
                  "operation(s) lost in flight",
                  tc->peer, gpuport_tl_proc(comm, tc->peer)->hostname, what, err ? ": " : "",
                  err ? strerror(err) : "", failed,
                  (unsigned long long)(tc->ops_sent - tc->ops_acked));
    while (tc->ops_acked < tc->ops_sent) {
        uint32_t id = tc->inflight[tc->ops_acked % tc->q];
        tc->ops_acked++;
        tcp_complete(tc, id, status);
    }
    for (; tc->tx_head != tc->tx_tail; tc->tx_head++)
        if (tc->tx[tc->tx_head % tc->tx_cap].hdr.type == MSG_GET_DATA)
            tcp_answer_gone(tc, &tc->tx[tc->tx_head % tc->tx_cap]);
    tc->sg_item = tc->tx_tail;
    tc->tc_head = tc->tc_ready = tc->tc_tail;
    tc->snapping = tc->snap_in_slot = 0; /* its item is gone; its piece's end is ignored */
    tc->ack_queued = 0;
}

void tcp_conn_break(tcp_conn_t *tc, gpuport_status_t status, const char *what, int err)
{
    conn_break(tc, status, what, err, 0);
}

void tcp_protocol_break(tcp_conn_t *tc, const char *what)
{
    conn_break(tc, GPUPORT_ERR_PEER, what, 0, 1);
}

void tcp_protocol_error(tcp_conn_t *tc, const char *fmt, uint64_t a, uint64_t b)
{
    char msg[160];

    snprintf(msg, sizeof(msg), fmt, (unsigned long long)a, (unsigned long long)b);
    tcp_protocol_break(tc, msg);
}

/* A goodbye followed by the end of the stream is how a peer's destroy
 * ends the connection, whether or not this side is destroying too; a reset
 * in place of the end is the same where this side's own goodbye met the
 * peer's socket closed. The peer said goodbye and closed only once this
 * side's operations were acknowledged and its closes answered, so nothing
 * is lost; an operation still in flight, or a payload cut short, is. */
void tcp_conn_end(tcp_conn_t *tc, gpuport_status_t status, const char *what, int err)
{
    if (tc->broken)
        return;
    if (tc->bye_seen && !tc->in_payload && tc->ops_acked == tc->ops_sent) {
        tc->broken = GPUPORT_ERR_PEER;
        log_debug("rank %d ended the connection after its goodbye", tc->peer);
        return;
    }
    tcp_conn_break(tc, status, what, err);
}

void tcp_complete(tcp_conn_t *tc, uint32_t id, gpuport_status_t status)
{
    gpuport_tl_chan_t *ch;

    if (id == NO_CHANNEL)
        return;
    ch = gpuport_tl_chan_find(tc->conn, id & ~(INFLIGHT_INLINE | INFLIGHT_GET));
    if (ch && (id & INFLIGHT_INLINE))
        gpuport_tl_inline_complete(ch, status);
    else if (ch)
        gpuport_tl_chan_complete(ch, status);
    else
        log_error("an operation of channel %u completed, but that channel is not on the "
                  "connection to rank %d",
                  id & ~(INFLIGHT_INLINE | INFLIGHT_GET), tc->peer);
}

/* A GET is complete once the ACK that covers it and its data (GET_DATA)
 * are both here, in either order: the peer raises an ACK already queued in
 * place (tcp_queue_ack), which may so pass a GET_DATA queued behind it.
 * ops_acked waits at such a GET until tcp_get_data_done. */
void tcp_apply_acks(tcp_conn_t *tc, uint64_t count)
{
    if (count > tc->ops_sent || count < tc->acks_seen) {
        tcp_protocol_error(tc, "acknowledged %llu operations of %llu sent", count,
                           tc->ops_sent);
        return;
    }
    tc->acks_seen = count;
    while (tc->ops_acked < count) {
        uint32_t id = tc->inflight[tc->ops_acked % tc->q];
        if (id != NO_CHANNEL && (id & INFLIGHT_GET)) {
            if (tc->gets_done == tc->gets_got)
                return;
            tc->gets_done++;
        }
        tc->ops_acked++;
        tcp_complete(tc, id, GPUPORT_OK);
    }
}
