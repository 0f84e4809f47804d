/*
 * The proxy thread: consumes the communicator's FIFO, validates and decodes
 * triggers, has transports carry them out or queues their work at the
 * flusher, and publishes channel progress. It makes no CUDA call and never
 * blocks: when the flusher has no room it leaves the trigger in the FIFO and
 * comes back to it after reading completions.
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_PROXY
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

/* triggers consumed per pass before completions are read again */
#define BATCH 64

enum { EXEC_DONE, EXEC_RETRY };

static void promise_if_done(gpuport_pchan_t *ch);

/* Once per channel: the peer's word for this side (in its slot, or by
 * report_fail) may arrive after the peer has let the channel's id go, so a
 * second one could land on a later channel with that id. */
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

/* Everything before FIFO position pos + 1 is complete; the channel's error,
 * if it has one by now, travels with it. */
static void publish_flushed(gpuport_pchan_t *ch, int fifo, uint64_t pos)
{
    uint64_t v = pos + 1;

    if (atomic_load_explicit(&ch->state->status, memory_order_relaxed) != GPUPORT_OK)
        v |= GPUPORT_FLUSHED_FAILED;
    atomic_store_explicit(&ch->state->flushed[fifo], v, memory_order_release);
}

static void publish_flushes(gpuport_pchan_t *ch)
{
    uint32_t n = 0;
    /* entries are in FIFO order, and positions grow within each FIFO */
    while (n < ch->nflush && ch->work_done >= ch->flush_target[n]) {
        publish_flushed(ch, ch->flush_fifo[n], ch->flush_pos[n]);
        n++;
    }
    if (n == 0)
        return;
    memmove(ch->flush_pos, ch->flush_pos + n, (ch->nflush - n) * sizeof(uint64_t));
    memmove(ch->flush_target, ch->flush_target + n, (ch->nflush - n) * sizeof(uint64_t));
    memmove(ch->flush_fifo, ch->flush_fifo + n, (ch->nflush - n) * sizeof(uint8_t));
    ch->nflush -= n;
}

void gpuport_tl_chan_complete(gpuport_tl_chan_t *tl, gpuport_status_t status)
{
    gpuport_pchan_t *ch = gpuport_pchan_of(tl);

    if (status != GPUPORT_OK)
        gpuport_pchan_fail(ch, status);
    ch->work_done++;
    tl->comm->proxy.async_outstanding--;
    publish_flushes(ch);
    promise_if_done(ch);
}

/* What the core does with a transport's answer to put or signal. */
static void transport_result(gpuport_comm_t comm, gpuport_pchan_t *ch, int rc,
                             const gpuport_work_t *w);

int gpuport_tl_post(gpuport_conn_t *conn, const gpuport_work_t *w)
{
    gpuport_flusher_t *fl = &conn->comm->proxy.flusher;
    gpuport_work_t item = *w;

    if (!gpuport_flusher_has_room(fl, 1))
        return 0;
    item.channel = GPUPORT_WORK_CONN | (uint32_t)conn->pindex;
    return gpuport_flusher_post(fl, &item) == GPUPORT_OK;
}

static void queue_work(gpuport_comm_t comm, gpuport_pchan_t *ch, const gpuport_work_t *w)
{
    gpuport_work_t item = *w;
    item.channel = ch->tl.id;
    if (gpuport_flusher_post(&comm->proxy.flusher, &item) != GPUPORT_OK) {
        /* not queued: the channel fails rather than report delivery later */
        gpuport_pchan_fail(ch, GPUPORT_ERR_INTERNAL);
        return;
    }
    ch->work_posted++;
}

static int range_ok(uint64_t off, uint64_t size, uint64_t region)
{
    return off <= region && size <= region - off;
}

int gpuport_op_fits(const gpuport_op_desc_t *d, uint64_t src_size, uint64_t dst_size)
{
    return range_ok(d->src_off, d->size, src_size) && range_ok(d->dst_off, d->size, dst_size);
}

static int exec_put(gpuport_comm_t comm, gpuport_pchan_t *ch, const gpuport_op_desc_t *d)
{
    gpuport_work_t w;
    int rc;

    if (!gpuport_op_fits(d, ch->tl.src.size, ch->tl.dst.rec.size)) {
        log_error("channel %u (to rank %d): put of %llu bytes from source offset %llu to "
                  "destination offset %llu is outside the regions (source %llu bytes, "
                  "destination %llu bytes); the channel is now in error",
                  ch->tl.id, ch->tl.peer, (unsigned long long)d->size,
                  (unsigned long long)d->src_off, (unsigned long long)d->dst_off,
                  (unsigned long long)ch->tl.src.size, (unsigned long long)ch->tl.dst.rec.size);
        GPUPORT_STAT_INC(comm->proxy.rejected);
        gpuport_pchan_fail(ch, GPUPORT_ERR_OUT_OF_RANGE);
        return EXEC_DONE;
    }
    if (d->size == 0)
        return EXEC_DONE;
    /* A put behind queued work of its channel must queue too: overlapping
     * puts land in the order they were issued. */
    memset(&w, 0, sizeof(w));
    rc = ch->ops->put(&ch->tl, d->dst_off, d->src_off, d->size, ch->work_done < ch->work_posted, &w);
    transport_result(comm, ch, rc, &w);
    return EXEC_DONE;
}

static void transport_result(gpuport_comm_t comm, gpuport_pchan_t *ch, int rc,
                             const gpuport_work_t *w)
{
    if (rc == GPUPORT_TRANSPORT_QUEUE) {
        queue_work(comm, ch, w);
    } else if (rc == GPUPORT_TRANSPORT_ASYNC) {
        ch->work_posted++;
        comm->proxy.async_outstanding++;
    } else if (rc < 0) {
        gpuport_pchan_fail(ch, (gpuport_status_t)rc);
    }
}

/* A value is an 8-byte put whose bytes travel in the trigger: the same range
 * rule (no source is read), alignment besides, and the same order (queued
 * behind the channel's work at the flusher, like a put). */
static int exec_put_value(gpuport_comm_t comm, gpuport_pchan_t *ch, const gpuport_op_desc_t *d)
{
    gpuport_work_t w;
    int rc, aligned = d->dst_off % 8 == 0;

    if (!aligned || !gpuport_op_fits(d, UINT64_MAX, ch->tl.dst.rec.size)) {
        log_error("channel %u (to rank %d): put_value at destination offset %llu is %s "
                  "(destination %llu bytes); the channel is now in error",
                  ch->tl.id, ch->tl.peer, (unsigned long long)d->dst_off,
                  aligned ? "outside the region" : "not a multiple of 8",
                  (unsigned long long)ch->tl.dst.rec.size);
        GPUPORT_STAT_INC(comm->proxy.rejected);
        gpuport_pchan_fail(ch, aligned ? GPUPORT_ERR_OUT_OF_RANGE : GPUPORT_ERR_INVALID_ARG);
        return EXEC_DONE;
    }
    if (!ch->ops->put_value) {
        log_error("channel %u (to rank %d): the %s transport cannot carry put_value; the "
                  "channel is now in error",
                  ch->tl.id, ch->tl.peer, ch->ops->name);
        GPUPORT_STAT_INC(comm->proxy.rejected);
        gpuport_pchan_fail(ch, GPUPORT_ERR_NOT_SUPPORTED);
        return EXEC_DONE;
    }
    memset(&w, 0, sizeof(w));
    rc = ch->ops->put_value(&ch->tl, d->dst_off, d->value, ch->work_done < ch->work_posted, &w);
    transport_result(comm, ch, rc, &w);
    return EXEC_DONE;
}

static void exec_signal(gpuport_comm_t comm, gpuport_pchan_t *ch, uint64_t n)
{
    gpuport_work_t w;
    int rc;

    memset(&w, 0, sizeof(w));
    rc = ch->ops->signal(&ch->tl, n, ch->work_done < ch->work_posted, &w);
    transport_result(comm, ch, rc, &w);
}

/* ---- signals, folded ----
 * A signal raises the peer's count, and what the peer sees of consecutive
 * signals of a channel (no put between them) is only the last count: so
 * the proxy takes a channel's signals from the FIFO, counts them, and hands
 * them to the transport as one, at the end of the batch of triggers, or
 * before the channel's next put, flush or close. Deferring only delays a
 * signal, so it is still never seen before the data of the puts ahead of
 * it; a flush waits for it like for any earlier operation. */

static void sig_defer(gpuport_comm_t comm, gpuport_pchan_t *ch)
{
    GPUPORT_STAT_INC(comm->proxy.sig_taken);
    ch->sig_pending++;
    if (!ch->sig_listed) {
        ch->sig_listed = 1;
        comm->proxy.sig_list[comm->proxy.nsig++] = ch->tl.id;
    }
}

/* Hands the channel's deferred signals to its transport as one; a channel
 * in error drops them (it carries out nothing more). 0: no room now. */
static int sig_emit(gpuport_comm_t comm, gpuport_pchan_t *ch)
{
    if (!ch->sig_pending)
        return 1;
    if (atomic_load_explicit(&ch->state->status, memory_order_relaxed) != GPUPORT_OK) {
        ch->sig_pending = 0;
        return 1;
    }
    if (!gpuport_flusher_has_room(&comm->proxy.flusher, 1) ||
        (ch->ops->has_room && !ch->ops->has_room(&ch->tl, 1)))
        return 0;
    exec_signal(comm, ch, ch->sig_pending);
    GPUPORT_STAT_INC(comm->proxy.sig_sent);
    ch->sig_pending = 0;
    return 1;
}

/* Every channel's deferred signals; those without room stay listed. */
static void sig_emit_all(gpuport_comm_t comm)
{
    uint32_t keep = 0;

    for (uint32_t i = 0; i < comm->proxy.nsig; i++) {
        gpuport_pchan_t *ch = &comm->pchans[comm->proxy.sig_list[i]];
        if (sig_emit(comm, ch))
            ch->sig_listed = 0;
        else
            comm->proxy.sig_list[keep++] = ch->tl.id;
    }
    comm->proxy.nsig = keep;
}

/* The peer's word in this rank's slot for the channel: it failed or
 * closed its side. */
static int32_t peer_word(gpuport_comm_t comm, const gpuport_pchan_t *ch)
{
    return atomic_load_explicit(&comm->ctrl[ch->tl.id].peer_status, memory_order_acquire);
}

/* gpuport_channel_destroy: the peer is told that this side is closing, in
 * order behind this side's earlier operations (its waiters take the
 * signals sent before, then see the close). */
static int exec_close(gpuport_pchan_t *ch)
{
    int32_t ok = GPUPORT_OK;

    if (ch->work_done < ch->work_posted)
        return EXEC_RETRY;
    atomic_compare_exchange_strong(&ch->state->status, &ok, GPUPORT_ERR_SHUTDOWN);
    tell_peer(ch, GPUPORT_ERR_PEER);
    promise_if_done(ch);
    return EXEC_DONE;
}

/* This side will write nothing more into the peer's memory for the channel
 * once it carries out nothing more (it failed, or the peer closed or failed
 * its side, which makes this side refuse new operations) and what it
 * posted has drained: say so, so that the peer may release its regions.
 * Same host: the promise in the peer's slot (remote_slot); over a network,
 * where this rank's own receiver or NIC is what writes into its memory,
 * the answer to a peer's close is this side's word for the peer (tell). */
static void promise_if_done(gpuport_pchan_t *ch)
{
    gpuport_comm_t comm = ch->tl.comm;
    int32_t peer;

    if (ch->promised || ch->work_done != ch->work_posted)
        return;
    peer = peer_word(comm, ch);
    if (peer == GPUPORT_OK &&
        atomic_load_explicit(&ch->state->status, memory_order_relaxed) == GPUPORT_OK)
        return;
    if (ch->tl.remote_slot) {
        atomic_store_explicit(&ch->tl.remote_slot->peer_closed, 1, memory_order_release);
        ch->promised = 1;
    } else if (peer != GPUPORT_OK) {
        tell_peer(ch, GPUPORT_ERR_PEER);
        ch->promised = 1;
    }
}

static int exec_flush(gpuport_pchan_t *ch, int fifo, uint64_t pos)
{
    uint32_t last = ch->nflush - 1;

    if (ch->nflush == 0 && ch->work_done == ch->work_posted) {
        publish_flushed(ch, fifo, pos);
        return EXEC_DONE;
    }
    if (ch->nflush == GPUPORT_PENDING_FLUSHES) {
        /* Fold into the newest of the same FIFO: its waiters wait for a
         * little more work. Another FIFO's entry cannot take it. */
        if (ch->flush_fifo[last] != fifo)
            return EXEC_RETRY;
        ch->flush_pos[last] = pos;
        ch->flush_target[last] = ch->work_posted;
        return EXEC_DONE;
    }
    ch->flush_pos[ch->nflush] = pos;
    ch->flush_target[ch->nflush] = ch->work_posted;
    ch->flush_fifo[ch->nflush] = (uint8_t)fifo;
    ch->nflush++;
    return EXEC_DONE;
}

/* Carries out one decoded trigger at position pos of FIFO `fifo`. */
static int execute(gpuport_comm_t comm, const gpuport_op_desc_t *d, int fifo, uint64_t pos)
{
    gpuport_pchan_t *ch;

    if (d->channel >= comm->config.max_channels ||
        !atomic_load_explicit(&comm->pchans[d->channel].active, memory_order_acquire)) {
        log_error("trigger at %s FIFO position %llu names channel %u, which does not exist "
                  "(op %u); dropped",
                  fifo ? "device" : "host", (unsigned long long)pos, d->channel, d->op);
        GPUPORT_STAT_INC(comm->proxy.rejected);
        return EXEC_DONE;
    }
    ch = &comm->pchans[d->channel];
    /* whatever comes after the channel's signals (a put, a flush, a close,
     * also an op that fails the channel) finds them handed over */
    if (d->op != GPUPORT_OP_SIGNAL && !sig_emit(comm, ch))
        return EXEC_RETRY;
    if (d->op == GPUPORT_OP_FLUSH)
        return exec_flush(ch, fifo, pos);
    if (d->op == GPUPORT_OP_CLOSE)
        return exec_close(ch);
    if (atomic_load_explicit(&ch->state->status, memory_order_relaxed) == GPUPORT_OK &&
        peer_word(comm, ch) != GPUPORT_OK) {
        /* an operation after the peer closed or failed its side: refused,
         * and the channel with it */
        log_error("channel %u (to rank %d): rank %d has closed or failed its side; the "
                  "operation is not carried out and the channel is failed",
                  ch->tl.id, ch->tl.peer, ch->tl.peer);
        gpuport_pchan_fail(ch, GPUPORT_ERR_PEER);
        promise_if_done(ch);
    }
    /* a channel in error carries out nothing more, but its flushes complete
     * so that waiters wake and see the error */
    if (atomic_load_explicit(&ch->state->status, memory_order_relaxed) != GPUPORT_OK)
        return EXEC_DONE;
    if (d->op == GPUPORT_OP_SIGNAL) {
        sig_defer(comm, ch);
        return EXEC_DONE;
    }
    /* one item: a put's signal goes out later, folded */
    if (!gpuport_flusher_has_room(&comm->proxy.flusher, 1) ||
        (ch->ops->has_room && !ch->ops->has_room(&ch->tl, 1)))
        return EXEC_RETRY;
    switch (d->op) {
    case GPUPORT_OP_PUT:
        return exec_put(comm, ch, d);
    case GPUPORT_OP_PUT_SIGNAL:
        exec_put(comm, ch, d);
        if (atomic_load_explicit(&ch->state->status, memory_order_relaxed) == GPUPORT_OK)
            sig_defer(comm, ch);
        return EXEC_DONE;
    case GPUPORT_OP_PUT_VALUE:
        return exec_put_value(comm, ch, d);
    case GPUPORT_OP_PUT_VALUE_SIGNAL:
        exec_put_value(comm, ch, d);
        if (atomic_load_explicit(&ch->state->status, memory_order_relaxed) == GPUPORT_OK)
            sig_defer(comm, ch);
        return EXEC_DONE;
    default:
        log_error("trigger at FIFO position %llu on channel %u has unknown op %u; the channel "
                  "is now in error",
                  (unsigned long long)pos, d->channel, d->op);
        GPUPORT_STAT_INC(comm->proxy.rejected);
        gpuport_pchan_fail(ch, GPUPORT_ERR_INVALID_ARG);
        return EXEC_DONE;
    }
}

static int read_completions(gpuport_comm_t comm)
{
    gpuport_work_done_t *c;
    int n = 0;

    while ((c = gpuport_flusher_poll(&comm->proxy.flusher)) != NULL) {
        gpuport_pchan_t *ch;
        if (c->channel & GPUPORT_WORK_CONN) {
            gpuport_conn_t *conn = comm->pconns[c->channel & ~GPUPORT_WORK_CONN];
            gpuport_status_t st = (gpuport_status_t)c->status;
            gpuport_flusher_release(&comm->proxy.flusher);
            conn->tl->ops->work_done(conn, st);
            n++;
            continue;
        }
        ch = &comm->pchans[c->channel];
        if (c->status != GPUPORT_OK)
            gpuport_pchan_fail(ch, (gpuport_status_t)c->status);
        ch->work_done++;
        publish_flushes(ch);
        promise_if_done(ch);
        gpuport_flusher_release(&comm->proxy.flusher);
        n++;
    }
    return n;
}

/* GPUPORT_LOG_LEVEL=trace: a line per trigger carried out (or dropped),
 * with the channel's state after it. Called only with trace on. */
static void trace_trigger(gpuport_comm_t comm, const gpuport_op_desc_t *d, int fifo, uint64_t pos,
                          uint32_t used)
{
    static const char *const names[GPUPORT_OP_MAX_] = {
        [GPUPORT_OP_NONE] = "none",           [GPUPORT_OP_PUT] = "put",
        [GPUPORT_OP_SIGNAL] = "signal",       [GPUPORT_OP_PUT_SIGNAL] = "put_signal",
        [GPUPORT_OP_FLUSH] = "flush",         [GPUPORT_OP_EXT] = "ext",
        [GPUPORT_OP_CLOSE] = "close",         [GPUPORT_OP_PUT_VALUE] = "put_value",
        [GPUPORT_OP_PUT_VALUE_SIGNAL] = "put_value_signal"};
    const char *name = d->op < GPUPORT_OP_MAX_ && names[d->op] ? names[d->op] : "unknown";
    gpuport_status_t st = GPUPORT_ERR_INVALID_ARG; /* no such channel: the trigger was dropped */
    char value[40] = "";

    if (d->channel < comm->config.max_channels &&
        atomic_load_explicit(&comm->pchans[d->channel].active, memory_order_acquire))
        st = (gpuport_status_t)atomic_load_explicit(&comm->pchans[d->channel].state->status,
                                                    memory_order_relaxed);
    if (gpuport_trigger_is_value(d->op))
        snprintf(value, sizeof(value), ", value 0x%llx", (unsigned long long)d->value);
    log_trace("%s FIFO position %llu (%u slot%s): %s on channel %u, dst_off %llu, src_off %llu, "
              "size %llu%s; channel %s%s%s",
              fifo ? "device" : "host", (unsigned long long)pos, used, used == 1 ? "" : "s", name,
              d->channel, (unsigned long long)d->dst_off, (unsigned long long)d->src_off,
              (unsigned long long)d->size, value,
              st == GPUPORT_OK ? "ok" : st == GPUPORT_ERR_SHUTDOWN ? "closed" : "in error (",
              st == GPUPORT_OK || st == GPUPORT_ERR_SHUTDOWN ? "" : gpuport_status_string(st),
              st == GPUPORT_OK || st == GPUPORT_ERR_SHUTDOWN ? "" : ")");
}

static int consume_fifo(gpuport_comm_t comm, gpuport_fifo_t *f, int fifo)
{
    uint32_t consumed = 0;
    int n;

    for (n = 0; n < BATCH; n++) {
        gpuport_trigger_t t[2];
        gpuport_op_desc_t d;
        uint32_t used = 1;

        if (!gpuport_fifo_peek(f, consumed, &t[0]))
            break;
        if (gpuport_trigger_op(t[0].w[0]) == GPUPORT_OP_EXT) {
            if (!gpuport_fifo_peek(f, consumed + 1, &t[1]))
                break; /* its partner is still being written */
            gpuport_trigger_decode(&t[1], &t[0], &d);
            used = 2;
        } else {
            gpuport_trigger_decode(&t[0], NULL, &d);
        }
        if (execute(comm, &d, fifo, f->pos + consumed + used - 1) == EXEC_RETRY)
            break;
        if (GPUPORT_LOG_ON(GPUPORT_LOG_TRACE))
            trace_trigger(comm, &d, fifo, f->pos + consumed + used - 1, used);
        consumed += used;
        GPUPORT_STAT_INC(comm->proxy.triggers);
    }
    /* one release store for the batch: the tail's cache line is shared with
     * pushers polling it, on the GPU across PCIe */
    if (consumed)
        gpuport_fifo_advance(f, consumed);
    if (comm->proxy.nsig)
        sig_emit_all(comm);
    return n;
}

static int outstanding_work(gpuport_comm_t comm)
{
    return comm->proxy.flusher.outstanding > 0 || comm->proxy.async_outstanding > 0 ||
           comm->proxy.nsig > 0;
}

/* Network transports' traffic: sends, receives, acknowledgements. */
static int progress_conns(gpuport_comm_t comm)
{
    int n = atomic_load_explicit(&comm->npconns, memory_order_acquire), done = 0;

    if (n == 0)
        return 0;
    for (int i = 0; i < comm->proxy.nactive_tls; i++) {
        gpuport_tl_comm_t *tc = comm->proxy.active_tls[i];
        if (tc->ops->comm_progress)
            done += tc->ops->comm_progress(tc);
    }
    for (int i = 0; i < n; i++)
        done += comm->pconns[i]->tl->ops->progress(comm->pconns[i]);
    return done;
}

/* Stopping with nothing left to send: network peers may still be sending
 * to this rank, and only this proxy can receive it. Each connection says
 * goodbye and waits for the peer's (quiesce() is 1 once both are done). */
static int quiesced(gpuport_comm_t comm)
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

/* Work that can wake the proxy is visible (host pushes, flusher
 * completions, a stop): its last look before it sleeps. */
static int wakeable_work(gpuport_comm_t comm)
{
    gpuport_trigger_t t;

    return gpuport_fifo_peek(&comm->fifo, 0, &t) ||
           !gpuport_ring_empty(&comm->proxy.flusher.done) ||
           atomic_load_explicit(&comm->proxy.stop, memory_order_relaxed);
}

/* The longest sleep the configuration allows: without a device FIFO
 * everything that brings work wakes the proxy (ib's completions aside), so
 * a host-only communicator has its own bound. */
static uint64_t sleep_bound(gpuport_comm_t comm)
{
    return comm->dfifo.slots ? comm->config.proxy_sleep_max_us
                             : comm->config.proxy_sleep_host_max_us;
}

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;

    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* After each sleep: what GPUPORT_IDLE_WINDOW sleeps in a row cost this
 * thread, sleep and pass, becomes the wake-up cost the budget divides
 * (a running mean, so one noisy window moves it a quarter). A pass with
 * work ends the window (proxy_main): work is not the cost of sleeping. */
static void measure_wake_cost(gpuport_comm_t comm)
{
    gpuport_proxy_t *px = &comm->proxy;
    uint64_t now, cost;

    if (px->window_cpu_ns == 0) {
        px->window_cpu_ns = thread_cpu_ns();
        px->window_sleeps = 0;
        return;
    }
    if (++px->window_sleeps < GPUPORT_IDLE_WINDOW)
        return;
    now = thread_cpu_ns();
    cost = now > px->window_cpu_ns ? (now - px->window_cpu_ns) / GPUPORT_IDLE_WINDOW : 0;
    px->window_cpu_ns = now;
    px->window_sleeps = 0;
    if (cost == 0)
        return;
    px->wake_cost_ns = px->wake_cost_told ? (3 * px->wake_cost_ns + cost) / 4 : cost;
    if (!px->wake_cost_told) {
        const gpuport_config_t *cfg = &comm->config;
        uint64_t max = sleep_bound(comm);
        px->wake_cost_told = 1;
        log_info("idle proxy: a sleep and the pass after it cost %.1f us of CPU here, so sleeps "
                 "of up to %llu us keep it within %llu%% of a core (GPUPORT_PROXY_IDLE_CPU; at "
                 "most %llu us)",
                 (double)cost / 1000.0,
                 (unsigned long long)gpuport_idle_budget_us(cost, cfg->proxy_idle_cpu * 10, max),
                 (unsigned long long)cfg->proxy_idle_cpu, (unsigned long long)max);
    }
}

/* An idle proxy sleeps in ppoll on its eventfd (host pushes, flusher
 * completions, stop and quiet write it when it sleeps: waker.h) and on the
 * network connections' sockets, so that any of those wakes it at once;
 * kernels' triggers are seen when the sleep ends. */
static void idle_sleep(gpuport_comm_t comm, uint32_t us)
{
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
    struct pollfd fds[65];
    int nfds = 0;

    fds[nfds].fd = comm->proxy.waker.fd;
    fds[nfds].events = POLLIN;
    nfds++;
    for (int i = 0; i < comm->proxy.nactive_tls && nfds < 65; i++) {
        gpuport_tl_comm_t *tc = comm->proxy.active_tls[i];
        if (tc->ops->poll_fds)
            nfds += tc->ops->poll_fds(tc, fds + nfds, 65 - nfds);
    }
    gpuport_waker_sleepy(&comm->proxy.waker);
    if (!wakeable_work(comm))
        ppoll(fds, (nfds_t)nfds, &ts, NULL);
    gpuport_waker_awake(&comm->proxy.waker);
    if (comm->config.proxy_idle_cpu)
        measure_wake_cost(comm);
}

/* How often the proxy looks for same-host peers that have exited. */
#define PEER_WATCH_NS (50 * 1000 * 1000ull)
/* How often it looks for peers that closed or failed their side of a
 * channel this side is not using now (a channel in use finds out at its
 * next operation): a peer's gpuport_channel_destroy waits for the answer. */
#define CLOSE_SCAN_NS (2 * 1000 * 1000ull)

static void scan_closes(gpuport_comm_t comm)
{
    for (uint32_t i = 0; i < comm->config.max_channels; i++) {
        gpuport_pchan_t *ch = &comm->pchans[i];
        if (atomic_load_explicit(&ch->active, memory_order_acquire))
            promise_if_done(ch);
    }
}

/* A kernel waiting for a dead peer's signal cannot look for the peer
 * itself: the proxy does, for ranks on this host, and fails their channels
 * on this side (state and inbound slot), so that host and device waiters
 * return GPUPORT_ERR_PEER within PEER_WATCH_NS instead of waiting out
 * GPUPORT_TIMEOUT_MS. Peers on other hosts are the transports' to watch. */
#define PEER_DEAD 1
#define PEER_WATCHED 2

static void watch_peers(gpuport_comm_t comm)
{
    const gpuport_proc_rec_t *me = &comm->procs[comm->rank];
    unsigned char *flags = comm->proxy.peer_dead;

    /* Only peers with a live channel: creating one over a same-host transport
     * proved their /proc entries are ours to see (no false "exited" for a
     * rank in another pid namespace). */
    for (uint32_t i = 0; i < comm->config.max_channels; i++) {
        gpuport_pchan_t *ch = &comm->pchans[i];
        if (atomic_load_explicit(&ch->active, memory_order_acquire))
            flags[ch->tl.peer] |= PEER_WATCHED;
    }
    for (int p = 0; p < comm->size; p++) {
        const gpuport_proc_rec_t *peer = &comm->procs[p];
        int failed = 0, watched = flags[p] & PEER_WATCHED;

        flags[p] &= (unsigned char)~PEER_WATCHED;
        if (!watched || p == comm->rank || (flags[p] & PEER_DEAD) ||
            peer->host_id != me->host_id || gpuport_pid_alive(peer->pid))
            continue;
        flags[p] |= PEER_DEAD;
        for (uint32_t i = 0; i < comm->config.max_channels; i++) {
            gpuport_pchan_t *ch = &comm->pchans[i];
            if (!atomic_load_explicit(&ch->active, memory_order_acquire) || ch->tl.peer != p)
                continue;
            gpuport_pchan_fail(ch, GPUPORT_ERR_PEER);
            gpuport_tl_sem_fail(comm, i, GPUPORT_ERR_PEER);
            failed++;
        }
        if (failed)
            log_error("rank %d (pid %d) has exited: its %d channel(s) with this rank are failed",
                      p, peer->pid, failed);
    }
}

/* A flusher call that names the application's context and has not
 * returned after this long is held by CUDA (docs/ARCHITECTURE.md). */
#define FLUSHER_HELD_NS (500 * 1000 * 1000ull)

/* Says once per held call why the flusher stopped: no error can, as the
 * flusher cannot return before CUDA lets it, and a kernel waiting on the
 * copy's signal (GPUPORT_TIMEOUT_MS=0: for ever) sees only silence. */
static void watch_flusher(gpuport_comm_t comm)
{
    uint64_t since = atomic_load_explicit(&comm->proxy.flusher.app_call_since_ns,
                                          memory_order_relaxed);
    /* read after the stamp: a call stamped after an earlier reading of the
     * clock would look older than time itself */
    uint64_t now = gpuport_now_ns();

    if (since == 0 || since == comm->proxy.held_warned || now < since ||
        now - since < FLUSHER_HELD_NS)
        return;
    comm->proxy.held_warned = since;
    log_warn("the flusher has waited %llu ms inside CUDA for a copy from the application's "
             "cudaMalloc memory to be accepted: CUDA holds such copies while a thread of the "
             "application is in a synchronous cudaMemcpy waiting for a kernel, and if that "
             "kernel waits on this rank's or a peer's channel, neither ends (until "
             "GPUPORT_TIMEOUT_MS). Synchronize the kernel's stream before cudaMemcpy, or "
             "use VMM memory (gpuport_mem_alloc_device), which is copied without the "
             "application's context",
             (unsigned long long)((now - since) / 1000000));
}

/* Triggers known to be queued but not consumed. The device FIFO's head is
 * in device memory, which the proxy does not read: there, a valid slot at
 * the consumer's position is what says work is left. */
static uint64_t fifo_backlog(gpuport_comm_t comm)
{
    uint64_t left = gpuport_fifo_head(&comm->fifo) - comm->fifo.pos;
    gpuport_trigger_t t;

    if (comm->dfifo.slots && gpuport_fifo_peek(&comm->dfifo, 0, &t))
        left++;
    return left;
}

/* Fails what could not be drained before the deadline, so no waiter hangs
 * and nothing is dropped without a word. */
static void abandon(gpuport_comm_t comm)
{
    uint64_t left = fifo_backlog(comm);

    comm->proxy.abandoned = left + comm->proxy.flusher.outstanding + comm->proxy.async_outstanding;
    if (comm->proxy.abandoned == 0) {
        /* all of ours is done; only network peers' goodbyes are missing */
        log_warn("stopping after %llu ms without the goodbye of every network peer (a peer that "
                 "has not destroyed its communicator yet); nothing of this rank's was lost",
                 (unsigned long long)comm->config.timeout_ms);
        return;
    }
    log_error("stopping with %llu trigger(s) not carried out, %u flusher item(s) and %llu network "
              "operation(s) not completed after %llu ms; their channels are failed with 'shutting "
              "down'",
              (unsigned long long)left, comm->proxy.flusher.outstanding,
              (unsigned long long)comm->proxy.async_outstanding,
              (unsigned long long)comm->config.timeout_ms);
    for (uint32_t i = 0; i < comm->config.max_channels; i++) {
        gpuport_pchan_t *ch = &comm->pchans[i];
        if (atomic_load(&ch->active) &&
            (ch->work_done < ch->work_posted || ch->nflush > 0 || left > 0))
            gpuport_pchan_fail(ch, GPUPORT_ERR_SHUTDOWN);
    }
}

/* Spin briefly, then poll with sched_yield (as fast as spinning on a free
 * core, polite on a crowded one) until GPUPORT_PROXY_IDLE_US without work,
 * then sleep, longer the longer the pause (gpuport_idle_step), up to what
 * the CPU budget allows (gpuport_idle_budget_us, with the measured cost of
 * a wake-up): a sleeping proxy sees a kernel's first trigger when its
 * sleep ends. */
static void idle_wait(gpuport_comm_t comm, uint64_t idle_since)
{
    const gpuport_config_t *cfg = &comm->config;
    gpuport_idle_policy_t policy = {
        cfg->proxy_idle_us,
        gpuport_idle_budget_us(comm->proxy.wake_cost_ns, cfg->proxy_idle_cpu * 10,
                               sleep_bound(comm)),
        cfg->proxy_sleep_scale};
    uint32_t us;

    switch (gpuport_idle_step(&policy, gpuport_now_ns() - idle_since, &us)) {
    case GPUPORT_IDLE_SPIN:
        return;
    case GPUPORT_IDLE_YIELD:
        sched_yield();
        return;
    case GPUPORT_IDLE_SLEEP:
        idle_sleep(comm, us);
        return;
    }
}

/* The proxy's timer slack, in ns: the kernel may end a sleep this much
 * late (the default, 50 us, would be most of a 50 us sleep). */
#define PROXY_TIMER_SLACK_NS 1000

static void *proxy_main(void *arg)
{
    gpuport_comm_t comm = arg;
    uint64_t idle_since = gpuport_now_ns(), next_watch = idle_since + PEER_WATCH_NS;
    uint64_t next_scan = idle_since + CLOSE_SCAN_NS, pass = 0;
    int device_first = 0;

    gpuport_log_set_rank(comm->rank);
    gpuport_topology_bind_self(comm->topo, comm->placement.proxy_cpu);
    if (prctl(PR_SET_TIMERSLACK, PROXY_TIMER_SLACK_NS, 0, 0, 0) != 0)
        log_debug("proxy: PR_SET_TIMERSLACK failed (%s); sleeps end up to 50 us late",
                  strerror(errno));
    atomic_store_explicit(&comm->proxy.running, 1, memory_order_release);
    for (;;) {
        int progressed, from_device = 0, from_host;
        uint64_t now;
        /* the only writer: a release store, no locked add, on every pass */
        atomic_store_explicit(&comm->proxy.passes, ++pass, memory_order_release);
        /* the FIFO that last had triggers first: a kernel waiting on its
         * flush is answered before the other FIFO and the connections are
         * looked at */
        if (device_first)
            from_device = consume_fifo(comm, &comm->dfifo, GPUPORT_FIFO_DEVICE);
        progressed = from_device + read_completions(comm) + progress_conns(comm);
        from_host = consume_fifo(comm, &comm->fifo, GPUPORT_FIFO_HOST);
        if (!device_first && comm->dfifo.slots)
            from_device = consume_fifo(comm, &comm->dfifo, GPUPORT_FIFO_DEVICE);
        progressed += from_host + (device_first ? 0 : from_device);
        if (from_device || from_host)
            device_first = from_device > 0;
        now = gpuport_now_ns();
        if (now >= next_watch) {
            watch_peers(comm);
            watch_flusher(comm);
            next_watch = now + PEER_WATCH_NS;
        }
        if (now >= next_scan) {
            scan_closes(comm);
            next_scan = now + CLOSE_SCAN_NS;
        }
        if (progressed) {
            idle_since = now;
            comm->proxy.window_cpu_ns = 0; /* work is not the cost of sleeping */
            continue;
        }
        if (atomic_load_explicit(&comm->proxy.stop, memory_order_acquire)) {
            int drained = fifo_backlog(comm) == 0 && !outstanding_work(comm);
            if (drained && quiesced(comm))
                break;
            if (gpuport_deadline_passed(comm->proxy.drain_deadline_ns)) {
                abandon(comm);
                break;
            }
        }
        idle_wait(comm, idle_since);
    }
    atomic_store_explicit(&comm->proxy.exited, 1, memory_order_release);
    return NULL;
}

gpuport_status_t gpuport_proxy_start(gpuport_comm_t comm)
{
    gpuport_status_t status;
    int rc;

    comm->proxy.peer_dead = calloc((size_t)comm->size, 1);
    comm->proxy.sig_list = calloc(comm->config.max_channels, sizeof(uint32_t));
    if (!comm->proxy.peer_dead || !comm->proxy.sig_list)
        return GPUPORT_ERR_NO_MEMORY;
    status = gpuport_waker_init(&comm->proxy.waker);
    if (status)
        return status;
    comm->proxy.wake_cost_ns = GPUPORT_IDLE_COST_GUESS_NS; /* until measured */
    /* Room for every FIFO entry to need two work items. */
    status = gpuport_flusher_start(&comm->proxy.flusher, 2 * comm->config.fifo_size, comm->rank,
                                   comm->gpu_device, comm->gpu, comm->timeout_ns, comm->topo,
                                   comm->placement.flusher_cpu);
    if (status) {
        gpuport_waker_fini(&comm->proxy.waker);
        return status;
    }
    /* before any work is posted: the flusher reads it after taking work */
    comm->proxy.flusher.proxy_waker = &comm->proxy.waker;
    rc = pthread_create(&comm->proxy.thread, NULL, proxy_main, comm);
    if (rc) {
        log_error("pthread_create(proxy) failed: %s", strerror(rc));
        gpuport_flusher_stop(&comm->proxy.flusher);
        gpuport_waker_fini(&comm->proxy.waker);
        return GPUPORT_ERR_NO_RESOURCE;
    }
    comm->proxy.started = 1;
    /* placed (like the flusher) by the time the communicator is returned */
    while (!atomic_load_explicit(&comm->proxy.running, memory_order_acquire))
        sched_yield();
    return GPUPORT_OK;
}

void gpuport_proxy_quiet(gpuport_comm_t comm)
{
    uint64_t start = atomic_load_explicit(&comm->proxy.passes, memory_order_acquire);
    uint32_t iter = 0;

    if (comm->proxy.started)
        gpuport_waker_poke(&comm->proxy.waker); /* a sleeping proxy passes at once */
    /* two starts: the pass that may have seen the slot active has ended */
    while (atomic_load_explicit(&comm->proxy.passes, memory_order_acquire) < start + 2 &&
           comm->proxy.started &&
           !atomic_load_explicit(&comm->proxy.exited, memory_order_acquire)) {
        if (gpuport_wait_backoff(&iter))
            usleep(20);
    }
}

void gpuport_proxy_stop(gpuport_comm_t comm)
{
    if (!comm->proxy.started)
        return;
    comm->proxy.drain_deadline_ns = gpuport_deadline(comm->timeout_ns);
    atomic_store_explicit(&comm->proxy.stop, 1, memory_order_release);
    gpuport_waker_poke(&comm->proxy.waker);
    pthread_join(comm->proxy.thread, NULL);
    comm->proxy.started = 0;
    /* What the proxy abandoned, the flusher may still be copying: it drains
     * its ring (bounded work) before it exits. */
    gpuport_flusher_stop(&comm->proxy.flusher);
    gpuport_waker_fini(&comm->proxy.waker);
    log_debug("proxy stopped: %llu triggers, %llu rejected, %llu abandoned",
              (unsigned long long)atomic_load(&comm->proxy.triggers),
              (unsigned long long)atomic_load(&comm->proxy.rejected),
              (unsigned long long)comm->proxy.abandoned);
}
