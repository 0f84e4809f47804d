/*
 * Triggers taken from a FIFO (proxy.c calls proxy_consume_fifo): a batch
 * decoded and each carried out (proxy_exec.c), or parked with its channel
 * (proxy_park.c) when its transport has no room, and so is every later
 * trigger of that channel until its park is empty, so that one stuck
 * channel holds no other. A trigger that finds the flusher full (which
 * every channel shares) stays in the FIFO for a later pass. A device-FIFO
 * slot that its kernel gave up (a void mark, fifo.h) is skipped and its
 * channel failed, named.
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_PROXY
#include "proxy_int.h"

/* triggers consumed per pass before completions are read again */
#define BATCH 64

/* The channel a trigger names, if it is active: the one whose park it may
 * join. */
static gpuport_pchan_t *live_channel(gpuport_comm_t comm, uint32_t id)
{
    if (id >= comm->config.max_channels ||
        !atomic_load_explicit(&comm->pchans[id].active, memory_order_acquire))
        return NULL;
    return &comm->pchans[id];
}

/* One trigger taken from the FIFO: carried out, or parked behind its
 * channel's parked ones or because its transport has no room. 0: it stays
 * in the FIFO (the flusher is full, or the channel's park is). */
static int take(gpuport_comm_t comm, const gpuport_op_desc_t *d, int fifo, uint64_t pos,
                uint32_t used)
{
    gpuport_pchan_t *ch = live_channel(comm, d->channel);

    if (ch && proxy_parked(comm, ch))
        return proxy_park(comm, ch, d, fifo, pos, used);
    if (proxy_execute(comm, d, fifo, pos) == EXEC_DONE) {
        proxy_carried(comm, d, fifo, pos, used);
        return 1;
    }
    if (!ch || !gpuport_flusher_has_room(&comm->proxy.flusher, 1))
        return 0;
    return proxy_park(comm, ch, d, fifo, pos, used);
}

/* The slot at the consumer's position + k was given up by a kernel that
 * reserved it and timed out (gpuport_fifo_void_at): said, its channel
 * failed, the slot skipped; what is behind it is carried out. */
static void skip_void(gpuport_comm_t comm, gpuport_fifo_t *f, uint32_t k, uint32_t channel)
{
    gpuport_pchan_t *ch = live_channel(comm, channel);

    log_error("device FIFO position %llu: a kernel's push on channel %u%s gave up its slot (the "
              "FIFO stayed full for its time limit); skipped, and the channel is failed with "
              "'timed out'",
              (unsigned long long)(f->pos + k), channel, ch ? "" : " (no such channel now)");
    GPUPORT_STAT_INC(comm->proxy.rejected);
    if (ch)
        gpuport_pchan_fail(ch, GPUPORT_ERR_TIMEOUT);
}

int proxy_consume_fifo(gpuport_comm_t comm, gpuport_fifo_t *f, int fifo)
{
    uint32_t consumed = 0;
    int n;

    for (n = 0; n < BATCH; n++) {
        gpuport_trigger_t t[2];
        gpuport_op_desc_t d;
        uint32_t used = 1;

        uint32_t channel;

        if (!gpuport_fifo_peek(f, consumed, &t[0])) {
            if (!gpuport_fifo_void_at(f, consumed, &channel))
                break;
            skip_void(comm, f, consumed, channel);
            gpuport_fifo_void_clear(f, consumed);
            consumed++;
            continue;
        }
        if (gpuport_trigger_op(t[0].w[0]) == GPUPORT_OP_EXT) {
            if (!gpuport_fifo_peek(f, consumed + 1, &t[1]))
                break; /* its partner is still being written (a pusher gives
                        * up both slots of a run or neither) */
            gpuport_trigger_decode(&t[1], &t[0], &d);
            used = 2;
        } else {
            gpuport_trigger_decode(&t[0], NULL, &d);
        }
        if (!take(comm, &d, fifo, f->pos + consumed + used - 1, used))
            break;
        consumed += used;
    }
    /* one release store for the batch: the tail's cache line is shared with
     * pushers polling it, on the GPU across PCIe */
    if (consumed)
        gpuport_fifo_advance(f, consumed);
    if (comm->proxy.nsig)
        proxy_sig_emit_all(comm);
    return n;
}
