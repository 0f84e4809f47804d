/*
 * Stopping the proxy (proxy.c asks proxy_may_exit once gpuport_proxy_stop
 * has set stop): it keeps passing until its FIFOs and work are drained and
 * every network peer has answered this rank's closes, or until the drain
 * deadline, when what is left is failed with a message (abandon).
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_PROXY
#include "proxy_int.h"

static int outstanding_work(gpuport_comm_t comm)
{
    return comm->proxy.flusher.outstanding > 0 || comm->proxy.async_outstanding > 0 ||
           comm->proxy.nsig > 0;
}

/* The first active channel over a network connection (one whose transport
 * has quiesce) that has no word from its peer yet, or NULL. Its word (a
 * close, the answer to this side's, a failure, a goodbye's or a break's)
 * says the peer sends nothing more for the channel: it answers a close
 * once its own operations on the channel are acknowledged here
 * (proxy_close.c). Same-host channels are waited for after the proxy has
 * stopped (gpuport_channels_await_peers). */
static const gpuport_pchan_t *unanswered(gpuport_comm_t comm)
{
    for (uint32_t i = 0; i < comm->config.max_channels; i++) {
        const gpuport_pchan_t *ch = &comm->pchans[i];
        if (atomic_load_explicit(&ch->active, memory_order_acquire) && ch->tl.conn &&
            ch->tl.conn->tl->ops->quiesce && proxy_peer_word(comm, ch) == GPUPORT_OK)
            return ch;
    }
    return NULL;
}

/* 1 when nothing of this rank's awaits a network peer: each used
 * connection's quiesce() says when its operations are acknowledged and its
 * goodbye is out. */
static int conns_quiet(gpuport_comm_t comm)
{
    int n = atomic_load_explicit(&comm->npconns, memory_order_acquire), all = 1;

    for (int i = 0; i < n; i++) {
        gpuport_conn_t *c = comm->pconns[i];
        /* a connection that never carried a channel (its first channel was
         * refused on one side) has no traffic to end: the peer may not even
         * know it exists */
        if (!atomic_load_explicit(&c->used, memory_order_acquire))
            continue;
        if (c->tl->ops->quiesce && !c->tl->ops->quiesce(c))
            all = 0;
    }
    return all;
}

/* Stopping with nothing left to send. A network peer's data for this rank
 * goes through this rank (tcp: only this proxy receives it; ib: its
 * registrations), so the connections end only once the peers send nothing
 * more: every channel on them has the peer's word (unanswered); and once
 * nothing of this rank's awaits them (conns_quiet). That is all: destroy
 * is bounded by this rank's own work and its peers' proxies' answers,
 * never by a peer's own destroy, which later finds this side's goodbye and
 * the connection's end, an orderly close. */
static int quiesced(gpuport_comm_t comm)
{
    return conns_quiet(comm) && !unanswered(comm);
}

/* Triggers known to be queued but not carried out: in the FIFOs, or parked
 * (proxy_park.c). The device FIFO's head is in device memory, which the
 * proxy does not read: there, a valid slot at the consumer's position is
 * what says work is left. */
static uint64_t fifo_backlog(gpuport_comm_t comm)
{
    uint64_t left = gpuport_fifo_head(&comm->fifo) - comm->fifo.pos + comm->proxy.parked_total;
    gpuport_trigger_t t;

    if (comm->dfifo.slots && gpuport_fifo_peek(&comm->dfifo, 0, &t))
        left++;
    return left;
}

/* Names, by channel, the triggers still in FIFO f (written, from the
 * consumer's position on) and fails those channels; returns how many
 * channels. Only the written run at the tail is seen: a slot being written
 * ends it. */
static uint32_t name_left(gpuport_comm_t comm, const gpuport_fifo_t *f, const char *name)
{
    uint32_t k, named = 0;

    if (!f->slots)
        return 0;
    for (k = 0; k < f->size; k++) {
        gpuport_trigger_t t;
        uint32_t ch, n = 0;
        if (!gpuport_fifo_peek(f, k, &t))
            break;
        ch = gpuport_trigger_channel(t.w[0]);
        /* each channel once: at its first trigger, counted to the end */
        for (uint32_t j = 0; j < k && n == 0; j++) {
            gpuport_trigger_t u;
            if (gpuport_fifo_peek(f, j, &u) && gpuport_trigger_channel(u.w[0]) == ch)
                n = 1;
        }
        if (n)
            continue;
        for (uint32_t j = k; j < f->size; j++) {
            gpuport_trigger_t u;
            if (!gpuport_fifo_peek(f, j, &u))
                break;
            n += gpuport_trigger_channel(u.w[0]) == ch;
        }
        log_error("channel %u: %u trigger(s) in the %s FIFO not carried out", ch, n, name);
        if (ch < comm->config.max_channels && atomic_load(&comm->pchans[ch].active))
            gpuport_pchan_fail(&comm->pchans[ch], GPUPORT_ERR_SHUTDOWN);
        named++;
    }
    return named;
}

/* Fails what could not be drained before the deadline, so no waiter hangs
 * and nothing is dropped without a word: by channel where it can tell. */
static void abandon(gpuport_comm_t comm)
{
    uint64_t left = fifo_backlog(comm), parked = proxy_park_abandon(comm);

    comm->proxy.abandoned = left + comm->proxy.flusher.outstanding + comm->proxy.async_outstanding;
    if (comm->proxy.abandoned == 0) {
        /* all of ours is carried out; a network peer's acknowledgement or
         * answer is missing: its proxy is stuck, or it is gone without a
         * word */
        const gpuport_pchan_t *ch;
        if (!conns_quiet(comm))
            log_warn("stopping after %llu ms with a network peer that has not acknowledged "
                     "this rank's operations or taken its goodbye (its proxy is stuck, or it "
                     "is gone without a word)",
                     (unsigned long long)comm->config.timeout_ms);
        else if ((ch = unanswered(comm)))
            log_warn("stopping after %llu ms without rank %d's answer to the close of channel "
                     "%u (its proxy is stuck, or it is gone without a word); nothing this rank "
                     "sent was lost",
                     (unsigned long long)comm->config.timeout_ms, ch->tl.peer, ch->tl.id);
        return;
    }
    log_error("stopping with %llu trigger(s) not carried out (%llu of them parked), %u flusher "
              "item(s) and %llu network operation(s) not completed after %llu ms; their channels "
              "are failed with 'shutting down'",
              (unsigned long long)left, (unsigned long long)parked,
              comm->proxy.flusher.outstanding,
              (unsigned long long)comm->proxy.async_outstanding,
              (unsigned long long)comm->config.timeout_ms);
    name_left(comm, &comm->fifo, "host");
    name_left(comm, &comm->dfifo, "device");
    for (uint32_t i = 0; i < comm->config.max_channels; i++) {
        gpuport_pchan_t *ch = &comm->pchans[i];
        /* what the FIFOs still held may include slots being written, whose
         * channel no one can name: every channel is stopped then */
        if (atomic_load(&ch->active) &&
            (ch->work_done < ch->work_posted || ch->nflush > 0 || left > parked))
            gpuport_pchan_fail(ch, GPUPORT_ERR_SHUTDOWN);
    }
}

/* The stop's condition: nothing of this rank's is left and every network
 * peer has answered (quiesced); or the drain deadline (GPUPORT_TIMEOUT_MS
 * from the stop) has passed, and what is left is failed. */
int proxy_may_exit(gpuport_comm_t comm)
{
    int drained = fifo_backlog(comm) == 0 && !outstanding_work(comm);

    if (drained && quiesced(comm))
        return 1;
    if (gpuport_deadline_passed(comm->proxy.drain_deadline_ns)) {
        abandon(comm);
        return 1;
    }
    return 0;
}
