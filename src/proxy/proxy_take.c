/*
 * Triggers taken from a FIFO (proxy.c calls proxy_consume_fifo): a batch
 * decoded and each carried out (proxy_exec.c), or parked with its channel
 * (proxy_park.c) when its transport has no room, and so is every later
 * trigger of that channel until its park is empty, so that one stuck
 * channel holds no other. A trigger that finds the flusher full (which
 * every channel shares) stays in the FIFO for a later pass. A channel
 * whose kernel's push gave up (the device FIFO stayed full for its time
 * limit; fifo.h) is failed, named, before any later trigger is taken.
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

/* 1 where trigger d is a signal that proxy_execute would defer at once: a
 * healthy channel whose peer has not failed or closed (its checks, in its
 * order). The commonest trigger then costs no call into proxy_exec.c: the
 * calls and the checks done twice cost a device-FIFO signal 78 more
 * instructions than when the dispatch was in this file (205 against 127 a
 * trigger, counted by callgrind; 13.7 against 7.5 ns on this project's
 * 2-core test machine). */
static int plain_signal(gpuport_comm_t comm, gpuport_pchan_t *ch, const gpuport_op_desc_t *d)
{
    return d->op == GPUPORT_OP_SIGNAL && ch &&
           atomic_load_explicit(&ch->state->status, memory_order_relaxed) == GPUPORT_OK &&
           proxy_peer_word(comm, ch) == GPUPORT_OK;
}

/* One trigger taken from the FIFO: carried out, or parked behind its
 * channel's parked ones or because its transport has no room. 0: it stays
 * in the FIFO (the flusher is full, or the channel's park is). */
static int take(gpuport_comm_t comm, const gpuport_op_desc_t *d, int fifo, uint64_t pos,
                uint32_t used)
{
    gpuport_pchan_t *ch = live_channel(comm, d->channel);

    /* parked_total first: no park to look at in the common case */
    if (ch && comm->proxy.parked_total && proxy_parked(comm, ch))
        return proxy_park(comm, ch, d, fifo, pos, used);
    if (plain_signal(comm, ch, d)) {
        proxy_sig_defer(comm, ch, gpuport_trigger_signals(d));
        proxy_carried(comm, d, fifo, pos, used);
        return 1;
    }
    if (proxy_execute(comm, d, fifo, pos) == EXEC_DONE) {
        proxy_carried(comm, d, fifo, pos, used);
        return 1;
    }
    if (!ch || !gpuport_flusher_has_room(&comm->proxy.flusher, 1))
        return 0;
    return proxy_park(comm, ch, d, fifo, pos, used);
}

/* A kernel's push gave up (gpuport_fifo_gave_up): each channel whose
 * give-up word is set is failed with GPUPORT_ERR_TIMEOUT, said once per
 * finding; nothing of the push was queued. A word of a channel no longer
 * active is cleared and said too. */
static void take_give_ups(gpuport_comm_t comm)
{
    for (uint32_t id = 0; id < comm->config.max_channels; id++) {
        gpuport_chan_state_t *state = &comm->states[id];
        gpuport_pchan_t *ch;

        if (!atomic_load_explicit(&state->gave_up, memory_order_relaxed) ||
            !atomic_exchange_explicit(&state->gave_up, 0, memory_order_acquire))
            continue;
        ch = live_channel(comm, id);
        log_error("channel %u%s: a kernel's push gave up (the device FIFO stayed full for its "
                  "time limit; nothing of it was queued); the channel is failed with 'timed "
                  "out'",
                  id, ch ? "" : " (no such channel now)");
        GPUPORT_STAT_INC(comm->proxy.rejected);
        if (ch)
            gpuport_pchan_fail(ch, GPUPORT_ERR_TIMEOUT);
    }
}

int proxy_consume_fifo(gpuport_comm_t comm, gpuport_fifo_t *f, int fifo)
{
    uint32_t consumed = 0;
    int n;

    /* give-ups are said even when no trigger follows them */
    if (gpuport_fifo_gave_up(f))
        take_give_ups(comm);
    for (n = 0; n < BATCH; n++) {
        gpuport_trigger_t t[2];
        gpuport_op_desc_t d;
        uint32_t used = 1;

        if (!gpuport_fifo_peek(f, consumed, &t[0]))
            break;
        /* after the peek: a trigger pushed after a give-up is seen only
         * with its give-up word (fifo.h) */
        if (gpuport_fifo_gave_up(f))
            take_give_ups(comm);
        if (gpuport_trigger_op(t[0].w[0]) == GPUPORT_OP_EXT) {
            if (!gpuport_fifo_peek(f, consumed + 1, &t[1]))
                break; /* its partner is still being written */
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
