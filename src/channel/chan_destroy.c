/*
 * Destroying port channels: gpuport_channel_destroy, and at communicator
 * destruction (comm.c) gpuport_channels_close_all and _await_peers.
 * Pairwise-safe: this side tells the peer through the proxy (in order behind
 * its own operations), drains, and waits until the peer can write nothing
 * more into this rank's regions; then the channel's id and connection
 * reference are given back and its handle joins the dead ones (handles.h).
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_CHANNEL
#include <stdlib.h>
#include <unistd.h>

#include "chan_int.h"

/* 1 once the peer can write nothing more into this rank's memory for the
 * channel: where it writes directly (remote_slot: same host) its promise
 * that its side is closed and drained; else its side has failed or closed,
 * so its later operations fail (this rank's receiver or NIC is what writes
 * here, and stops with the channel); or it has exited. */
static int peer_done(gpuport_channel_t ch)
{
    if (ch->pchan->tl.remote_slot ? atomic_load_explicit(&ch->inbound->peer_closed,
                                                         memory_order_acquire)
                                  : atomic_load_explicit(&ch->inbound->peer_status,
                                                         memory_order_acquire) != GPUPORT_OK)
        return 1;
    if (atomic_load_explicit(&ch->pchan->tl.conn->broken, memory_order_acquire))
        return 1;
    return ch->peer_same_host && !gpuport_pid_alive(ch->comm->procs[ch->peer].pid);
}

/* This side is closed and drained (its proxy has promised the peer so):
 * wait for the peer's answer. */
static gpuport_status_t await_peer(gpuport_channel_t ch, uint64_t deadline)
{
    uint32_t iter = 0;

    while (!peer_done(ch)) {
        if (gpuport_deadline_passed(deadline))
            return GPUPORT_ERR_TIMEOUT;
        if (gpuport_wait_backoff(&iter))
            usleep(50);
    }
    return GPUPORT_OK;
}

/* Takes the channel's entry away; the handle joins the dead ones. */
static void release(gpuport_channel_t ch)
{
    gpuport_comm_t comm = ch->comm;
    void *old = NULL;

    atomic_store_explicit(&ch->pchan->active, 0, memory_order_release);
    /* the proxy may still be reading the entry (its periodic scan): the
     * entry is undone and its id reused only once it has moved on */
    gpuport_proxy_quiet(comm);
    ch->pchan->ops->chan_disconnect(&ch->pchan->tl);
    ch->pchan->ops = NULL;
    pthread_mutex_lock(&comm->lock);
    chan_conn_put_locked(ch->pchan->tl.conn);
    if (ch->src_mem)
        ch->src_mem->users--;
    if (ch->dst_mem)
        ch->dst_mem->users--;
    comm->chans[ch->id] = NULL;
    chan_id_free_locked(comm, ch->id);
    ch->magic = 0;
    old = gpuport_dead_add(&comm->dead_chans, &ch->dead);
    pthread_mutex_unlock(&comm->lock);
    free(old);
}

/* Destroy is pairwise-safe: this side tells the peer (in order behind its
 * own operations), drains, and waits until the peer can write nothing more
 * into this rank's regions, so that they may be deregistered and freed
 * once this returns; the peer's later operations on the channel return
 * GPUPORT_ERR_CLOSED (a close, not a failure: proxy_close.c's word). */
gpuport_status_t gpuport_channel_destroy(gpuport_channel_t ch)
{
    gpuport_comm_t comm;
    gpuport_status_t status = GPUPORT_OK;
    uint64_t pos, deadline;

    if (!chan_ok(ch))
        return chan_stale("gpuport_channel_destroy", ch);
    comm = ch->comm;
    deadline = gpuport_deadline(comm->timeout_ns);
    if (!atomic_load(&comm->proxy.stop)) {
        /* a failed channel carries out nothing, but what it posted earlier
         * may still be moving: the flush waits for that too */
        /* what host calls sent themselves first: their completions name
         * the channel, so it must outlive them */
        status = chan_inline_drained(ch);
        if (!status)
            status = gpuport_channel_push(ch, GPUPORT_OP_CLOSE, 0, 0, 0, &pos);
        if (!status)
            status = gpuport_channel_push(ch, GPUPORT_OP_FLUSH, 0, 0, 0, &pos);
        if (!status)
            status = chan_flushed_to(ch, pos);
        if (!status)
            status = await_peer(ch, deadline);
    }
    if (status == GPUPORT_ERR_TIMEOUT) {
        log_error("channel %u: rank %d did not confirm within GPUPORT_TIMEOUT_MS=%llu that its "
                  "side is closed and drained; the channel is kept (its regions stay "
                  "registered) until the communicator is destroyed",
                  ch->id, ch->peer, (unsigned long long)comm->config.timeout_ms);
        return status;
    }
    release(ch);
    return GPUPORT_OK;
}

void gpuport_channels_close_all(gpuport_comm_t comm)
{
    for (uint32_t i = 0; i < comm->config.max_channels; i++) {
        gpuport_channel_t ch = comm->chans[i];
        uint64_t pos;
        if (ch && atomic_load_explicit(&ch->pchan->active, memory_order_acquire))
            gpuport_channel_push(ch, GPUPORT_OP_CLOSE, 0, 0, 0, &pos);
    }
}

void gpuport_channels_await_peers(gpuport_comm_t comm)
{
    uint64_t deadline = gpuport_deadline(comm->timeout_ns);
    int late = 0;

    for (uint32_t i = 0; i < comm->config.max_channels; i++) {
        gpuport_channel_t ch = comm->chans[i];
        /* network peers' answers are the proxy's to wait for (proxy_drain.c) */
        if (!ch || !ch->pchan->tl.remote_slot)
            continue;
        if (!late && await_peer(ch, deadline) != GPUPORT_OK) {
            late = 1;
            log_warn("rank %d did not confirm within GPUPORT_TIMEOUT_MS=%llu that it stopped "
                     "writing into this rank's memory (channel %u; it has not destroyed its "
                     "communicator or channel yet); releasing anyway",
                     ch->peer, (unsigned long long)comm->config.timeout_ms, ch->id);
        }
    }
}
