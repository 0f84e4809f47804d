/*
 * A channel's end on the proxy side (proxy_exec.c, proxy_flush.c and the
 * watchers call it; a transport fails its channels through
 * gpuport_tl_chan_fail instead, which tells the peer nothing): a failure
 * sticks and is told to the peer once; a close (gpuport_channel_destroy)
 * is told in order behind the channel's earlier operations; and once this
 * side carries out nothing more and what it posted has drained, it promises
 * the peer to write nothing more into its memory, so that the peer may
 * release its regions.
 */
#include "proxy_int.h"

/* Once per channel, and never after the promise: the peer's word for this
 * side (in its slot, or by report_fail) may arrive after the peer has let
 * the channel's id go, so a second one, or one after the promise, could
 * land on a later channel with that id. */
static void tell_peer(gpuport_pchan_t *ch, gpuport_status_t status)
{
    if (ch->told_peer)
        return;
    ch->told_peer = 1;
    if (ch->tl.remote_slot) {
        int32_t ok = GPUPORT_OK;
        atomic_compare_exchange_strong(&ch->tl.remote_slot->peer_status, &ok, (int32_t)status);
    } else if (ch->ops && ch->ops->report_fail) {
        ch->ops->report_fail(&ch->tl, status);
    }
}

void gpuport_pchan_fail(gpuport_pchan_t *ch, gpuport_status_t status)
{
    int32_t ok = GPUPORT_OK;
    /* the first error sticks; the peer learns of it so its waiters stop */
    if (atomic_compare_exchange_strong(&ch->state->status, &ok, (int32_t)status))
        tell_peer(ch, status);
}

/* The peer's word in this rank's slot for the channel: it failed or
 * closed its side. */
int32_t proxy_peer_word(gpuport_comm_t comm, const gpuport_pchan_t *ch)
{
    return atomic_load_explicit(&comm->ctrl[ch->tl.id].peer_status, memory_order_acquire);
}

/* gpuport_channel_destroy: the peer is told that this side is closing, in
 * order behind this side's earlier operations (its waiters take the
 * signals sent before, then see the close). The word is GPUPORT_ERR_CLOSED,
 * not a failure's: the peer's calls then say the channel was closed. */
int proxy_exec_close(gpuport_pchan_t *ch)
{
    int32_t ok = GPUPORT_OK;

    if (ch->work_done < ch->work_posted)
        return EXEC_RETRY;
    atomic_compare_exchange_strong(&ch->state->status, &ok, GPUPORT_ERR_SHUTDOWN);
    ch->closed_here = 1;
    tell_peer(ch, GPUPORT_ERR_CLOSED);
    proxy_promise_if_done(ch);
    return EXEC_DONE;
}

/* This side will write nothing more into the peer's memory for the channel
 * once it carries out nothing more (it failed, or the peer closed or failed
 * its side, which makes this side refuse new operations) and what it
 * posted has drained: say so, so that the peer may release its regions.
 * Same host: the promise in the peer's slot (remote_slot); over a network,
 * where this rank's own receiver or NIC is what writes into its memory,
 * the answer to a peer's close is this side's word for the peer (tell). */
void proxy_promise_if_done(gpuport_pchan_t *ch)
{
    gpuport_comm_t comm = ch->tl.comm;
    int32_t peer;

    if (ch->promised || ch->work_done != ch->work_posted)
        return;
    /* a memory channel's kernels may store until its destroy here */
    if (ch->kernel_stores && !ch->closed_here)
        return;
    peer = proxy_peer_word(comm, ch);
    if (peer == GPUPORT_OK &&
        atomic_load_explicit(&ch->state->status, memory_order_relaxed) == GPUPORT_OK)
        return;
    /* no host call may go on writing into the peer's memory after the
     * promise (chan_push.c's try_inline): closed to them first, then none
     * may be inside; one that is delays the promise to a later scan */
    atomic_store_explicit(&ch->no_inline, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&ch->inline_users, memory_order_seq_cst) != 0)
        return;
    if (ch->tl.remote_slot) {
        atomic_store_explicit(&ch->tl.remote_slot->peer_closed, 1, memory_order_release);
        ch->promised = 1;
        /* the peer may give the slot to its next channel now: this side's
         * own close, carried out later, must not write its word there */
        ch->told_peer = 1;
    } else if (peer != GPUPORT_OK) {
        /* the answer to a close is a close (the peer reads it only as the
         * promise), to a failure a peer error, as before */
        tell_peer(ch, gpuport_peer_word_status(peer));
        ch->promised = 1;
    }
}

void proxy_scan_closes(gpuport_comm_t comm)
{
    for (uint32_t i = 0; i < comm->config.max_channels; i++) {
        gpuport_pchan_t *ch = &comm->pchans[i];
        if (atomic_load_explicit(&ch->active, memory_order_acquire))
            proxy_promise_if_done(ch);
    }
}
