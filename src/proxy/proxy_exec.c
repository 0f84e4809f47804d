/*
 * The proxy's dispatch of triggers (proxy.c calls proxy_consume_fifo): a
 * batch taken from a FIFO, decoded, checked (the channel exists, its offsets
 * fit its regions by the one range rule of gpuport_trigger.h, the peer has
 * not closed) and carried out: puts and values handed to the transport,
 * signals to proxy_signal.c, flushes to proxy_flush.c, closes to
 * proxy_close.c. A bad trigger fails its channel, with a message, and is
 * consumed. One that finds no room answers EXEC_RETRY: proxy_take.c parks
 * it or leaves it in its FIFO.
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_PROXY
#include <stdio.h>
#include <string.h>

#include "proxy_int.h"

int gpuport_op_fits(const gpuport_op_desc_t *d, uint64_t src_size, uint64_t dst_size)
{
    return gpuport_put_fits(d->dst_off, d->src_off, d->size, src_size, dst_size);
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
    proxy_transport_result(comm, ch, rc, &w);
    return EXEC_DONE;
}

/* A value is an 8-byte put whose bytes travel in the trigger: the same range
 * rule (no source is read), alignment besides, and the same order (queued
 * behind the channel's work at the flusher, like a put). */
static int exec_put_value(gpuport_comm_t comm, gpuport_pchan_t *ch, const gpuport_op_desc_t *d)
{
    gpuport_work_t w;
    int rc, aligned = gpuport_value_aligned(d->dst_off);

    if (!gpuport_value_fits(d->dst_off, ch->tl.dst.rec.size)) {
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
    proxy_transport_result(comm, ch, rc, &w);
    return EXEC_DONE;
}

/* An operation after the peer closed or failed its side: refused, and the
 * channel takes the peer's status (GPUPORT_ERR_CLOSED or _PEER), which its
 * later calls, flushes and kernels' waits report. After a close this is a
 * warning, not an error: nothing failed, but an operation the program
 * asked for is not carried out. */
static void refuse_after_peer(gpuport_pchan_t *ch, uint32_t op, int fifo)
{
    gpuport_status_t st = gpuport_peer_word_status(proxy_peer_word(ch->tl.comm, ch));

    if (st == GPUPORT_ERR_CLOSED)
        log_warn("channel %u (to rank %d): rank %d closed its side of the channel; a %s from "
                 "the %s FIFO is not carried out, and the channel is closed here too",
                 ch->tl.id, ch->tl.peer, ch->tl.peer, gpuport_op_name(op), fifo ? "device" : "host");
    else
        log_error("channel %u (to rank %d): rank %d's side of the channel failed; a %s from "
                  "the %s FIFO is not carried out and the channel is failed",
                  ch->tl.id, ch->tl.peer, ch->tl.peer, gpuport_op_name(op), fifo ? "device" : "host");
    gpuport_pchan_fail(ch, st);
    proxy_promise_if_done(ch);
}

int proxy_execute(gpuport_comm_t comm, const gpuport_op_desc_t *d, int fifo, uint64_t pos)
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
    if (d->op != GPUPORT_OP_SIGNAL && !proxy_sig_emit(comm, ch))
        return EXEC_RETRY;
    if (d->op == GPUPORT_OP_FLUSH)
        return proxy_exec_flush(ch, fifo, pos);
    if (d->op == GPUPORT_OP_CLOSE && fifo == GPUPORT_FIFO_DEVICE) {
        /* only gpuport_channel_destroy closes, from the host; a kernel that
         * wrote a close into its FIFO would end the channel under its host */
        log_error("channel %u (to rank %d): close at device FIFO position %llu refused (only "
                  "gpuport_channel_destroy closes a channel); the channel is now in error",
                  ch->tl.id, ch->tl.peer, (unsigned long long)pos);
        GPUPORT_STAT_INC(comm->proxy.rejected);
        gpuport_pchan_fail(ch, GPUPORT_ERR_INVALID_ARG);
        return EXEC_DONE;
    }
    if (d->op == GPUPORT_OP_CLOSE)
        return proxy_exec_close(ch);
    if (atomic_load_explicit(&ch->state->status, memory_order_relaxed) == GPUPORT_OK &&
        proxy_peer_word(comm, ch) != GPUPORT_OK)
        refuse_after_peer(ch, d->op, fifo);
    /* a channel in error carries out nothing more, but its flushes complete
     * so that waiters wake and see the error */
    if (atomic_load_explicit(&ch->state->status, memory_order_relaxed) != GPUPORT_OK)
        return EXEC_DONE;
    if (d->op == GPUPORT_OP_SIGNAL) {
        proxy_sig_defer(comm, ch, gpuport_trigger_signals(d));
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
            proxy_sig_defer(comm, ch, 1);
        return EXEC_DONE;
    case GPUPORT_OP_PUT_VALUE:
        return exec_put_value(comm, ch, d);
    case GPUPORT_OP_PUT_VALUE_SIGNAL:
        exec_put_value(comm, ch, d);
        if (atomic_load_explicit(&ch->state->status, memory_order_relaxed) == GPUPORT_OK)
            proxy_sig_defer(comm, ch, 1);
        return EXEC_DONE;
    case GPUPORT_OP_GET:
    case GPUPORT_OP_ATOMIC_ADD:
    case GPUPORT_OP_ACC_INT64:
    case GPUPORT_OP_ACC_FLOAT32:
    case GPUPORT_OP_ACC_BFLOAT16:
        return proxy_exec_rma(comm, ch, d);
    default:
        log_error("trigger at FIFO position %llu on channel %u has unknown op %u; the channel "
                  "is now in error",
                  (unsigned long long)pos, d->channel, d->op);
        GPUPORT_STAT_INC(comm->proxy.rejected);
        gpuport_pchan_fail(ch, GPUPORT_ERR_INVALID_ARG);
        return EXEC_DONE;
    }
}

/* GPUPORT_LOG_LEVEL=trace: a line per trigger carried out (or dropped),
 * with the channel's state after it. Called only with trace on. */
void proxy_trace_trigger(gpuport_comm_t comm, const gpuport_op_desc_t *d, int fifo,
                         uint64_t pos, uint32_t used)
{
    const char *name = gpuport_op_name(d->op);
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
