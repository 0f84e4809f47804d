/*
 * A port channel's operations from host threads: gpuport_channel_put,
 * _signal, _put_with_signal, _put_value and _put_value_with_signal, and the
 * pushes into the host FIFO that they, flush and destroy make
 * (gpuport_channel_push, _push_value: internal.h). What every operation
 * checks first is here too, in this order: a live handle (chan_int.h), the
 * offsets by the one range rule of gpuport_trigger.h, a healthy channel, a
 * peer that has not closed its side; a refused operation queues nothing.
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_CHANNEL
#include <unistd.h>

#include "chan_int.h"

/* The channel's last host trigger is at pos: host_last only grows (host
 * threads push at once). */
static void note_pushed(gpuport_channel_t ch, uint64_t pos)
{
    uint64_t cur = atomic_load_explicit(&ch->host_last, memory_order_relaxed);

    while (cur < pos + 1 &&
           !atomic_compare_exchange_weak_explicit(&ch->host_last, &cur, pos + 1,
                                                  memory_order_release, memory_order_relaxed))
        ;
}

/* A push that timed out: says whether the proxy still makes passes (it
 * then takes no trigger because the one at the FIFO's head waits, for room
 * at its transport) or none at all (it is stuck), over 20 ms. */
static void fifo_full(gpuport_channel_t ch)
{
    gpuport_comm_t comm = ch->comm;
    uint64_t before = atomic_load_explicit(&comm->proxy.passes, memory_order_acquire), after;

    gpuport_waker_poke(&comm->proxy.waker);
    usleep(20000);
    after = atomic_load_explicit(&comm->proxy.passes, memory_order_acquire);
    if (after > before)
        log_error("channel %u: the FIFO stayed full for %llu ms although the proxy thread runs "
                  "(%llu passes in 20 ms): the trigger at the FIFO's head waits for room at its "
                  "channel's transport",
                  ch->id, (unsigned long long)comm->config.timeout_ms,
                  (unsigned long long)(after - before));
    else
        log_error("channel %u: the FIFO stayed full for %llu ms and the proxy thread made no "
                  "pass in 20 ms: it is stuck",
                  ch->id, (unsigned long long)comm->config.timeout_ms);
}

/* A channel whose transport has had no room holds many triggers parked at
 * the proxy (proxy_park.c): its host operations wait for the channel's own
 * room, bounded, instead of filling the FIFO that every channel shares.
 * Closes and flushes do not (gpuport_channel_push). */
static gpuport_status_t park_room(gpuport_channel_t ch)
{
    gpuport_pchan_t *pc = ch->pchan;
    uint64_t deadline;
    uint32_t iter = 0;

    if (atomic_load_explicit(&pc->parked, memory_order_relaxed) < GPUPORT_PARK_HOST_MAX)
        return GPUPORT_OK;
    deadline = gpuport_deadline(ch->comm->timeout_ns);
    while (atomic_load_explicit(&pc->parked, memory_order_relaxed) >= GPUPORT_PARK_HOST_MAX) {
        int32_t st = atomic_load_explicit(&ch->state->status, memory_order_acquire);
        if (st != GPUPORT_OK)
            return (gpuport_status_t)st;
        if (gpuport_deadline_passed(deadline)) {
            log_error("channel %u (to rank %d): %u operations waited at the proxy for room at "
                      "the transport for %llu ms; nothing more was queued",
                      ch->id, ch->peer, atomic_load(&pc->parked),
                      (unsigned long long)ch->comm->config.timeout_ms);
            return GPUPORT_ERR_TIMEOUT;
        }
        if (gpuport_wait_backoff(&iter))
            usleep(50);
    }
    return GPUPORT_OK;
}

gpuport_status_t gpuport_channel_push(gpuport_channel_t ch, uint32_t op, uint64_t dst_off,
                                      uint64_t src_off, uint64_t size, uint64_t *pos_p)
{
    gpuport_comm_t comm = ch->comm;
    gpuport_trigger_t t[2];
    uint32_t n = 0;
    gpuport_status_t status;

    if (atomic_load_explicit(&comm->proxy.stop, memory_order_acquire))
        return GPUPORT_ERR_SHUTDOWN;
    /* A close or a flush moves no data and joins the park behind the
     * channel's triggers at the cost of one entry: it never waits for room.
     * Destroy's drain starts with them; one that waited here could end in
     * the channel's error, and destroy would release the channel without
     * its flush, the peer's answer or the end of the work it posted. */
    if (op != GPUPORT_OP_CLOSE && op != GPUPORT_OP_FLUSH) {
        status = park_room(ch);
        if (status)
            return status;
    }
    if (gpuport_trigger_needs_ext(src_off, dst_off, size))
        gpuport_trigger_encode_ext(&t[n++], ch->id, src_off, dst_off, size);
    gpuport_trigger_encode(&t[n++], op, ch->id, src_off, dst_off, size);
    status = gpuport_fifo_push(&comm->fifo, t, n, comm->timeout_ns ? comm->timeout_ns : UINT64_MAX,
                               pos_p);
    if (status == GPUPORT_OK) {
        note_pushed(ch, *pos_p);
        gpuport_waker_poke(&comm->proxy.waker); /* a sleeping proxy takes it at once */
    }
    if (status == GPUPORT_ERR_TIMEOUT)
        fifo_full(ch);
    return status;
}

gpuport_status_t gpuport_channel_push_value(gpuport_channel_t ch, uint32_t op, uint64_t dst_off,
                                            uint64_t value, uint64_t *pos_p)
{
    gpuport_comm_t comm = ch->comm;
    gpuport_trigger_t t;
    gpuport_status_t status;

    if (atomic_load_explicit(&comm->proxy.stop, memory_order_acquire))
        return GPUPORT_ERR_SHUTDOWN;
    status = park_room(ch);
    if (status)
        return status;
    gpuport_trigger_encode_value(&t, op, ch->id, dst_off, value);
    status = gpuport_fifo_push(&comm->fifo, &t, 1,
                               comm->timeout_ns ? comm->timeout_ns : UINT64_MAX, pos_p);
    if (status == GPUPORT_OK) {
        note_pushed(ch, *pos_p);
        gpuport_waker_poke(&comm->proxy.waker);
    }
    if (status == GPUPORT_ERR_TIMEOUT)
        fifo_full(ch);
    return status;
}

static gpuport_status_t check_put(gpuport_channel_t ch, uint64_t dst_off, uint64_t src_off,
                                  uint64_t size)
{
    if (!gpuport_put_fits(dst_off, src_off, size, ch->src_size, ch->dst_size)) {
        log_error("channel %u (to rank %d): put of %llu bytes from source offset %llu to "
                  "destination offset %llu does not fit (source region %llu bytes, destination "
                  "region %llu bytes); nothing was queued",
                  ch->id, ch->peer, (unsigned long long)size, (unsigned long long)src_off,
                  (unsigned long long)dst_off, (unsigned long long)ch->src_size,
                  (unsigned long long)ch->dst_size);
        return GPUPORT_ERR_OUT_OF_RANGE;
    }
    return GPUPORT_OK;
}

/* gpuport_value_fits, and when it refuses, which of its rules did. */
static gpuport_status_t check_value(gpuport_channel_t ch, uint64_t dst_off)
{
    if (gpuport_value_fits(dst_off, ch->dst_size))
        return GPUPORT_OK;
    if (!gpuport_value_aligned(dst_off)) {
        log_error("channel %u (to rank %d): put_value at destination offset %llu, which is not "
                  "a multiple of 8; nothing was queued",
                  ch->id, ch->peer, (unsigned long long)dst_off);
        return GPUPORT_ERR_INVALID_ARG;
    }
    log_error("channel %u (to rank %d): put_value at destination offset %llu does not fit "
              "(destination region %llu bytes); nothing was queued",
              ch->id, ch->peer, (unsigned long long)dst_off, (unsigned long long)ch->dst_size);
    return GPUPORT_ERR_OUT_OF_RANGE;
}

/* What every operation checks first: a live handle, a healthy channel, a
 * peer that has not closed or failed its side (GPUPORT_ERR_CLOSED or
 * _PEER, which the channel keeps from then on). */
gpuport_status_t chan_usable(gpuport_channel_t ch)
{
    gpuport_status_t status;

    if (!chan_ok(ch))
        return chan_stale("gpuport_channel_put/signal", ch);
    status = chan_state(ch);
    if (status)
        return chan_said(ch, status);
    status = chan_peer_state(ch);
    if (status) {
        int32_t ok = GPUPORT_OK;
        /* a close is the peer's normal end, so a warning (the operation is
         * not carried out); a failure an error */
        if (status == GPUPORT_ERR_CLOSED)
            log_warn("channel %u (to rank %d): rank %d closed its side of the channel; nothing "
                     "was queued, and the channel is closed here too",
                     ch->id, ch->peer, ch->peer);
        else
            log_error("channel %u (to rank %d): rank %d's side of the channel failed; nothing "
                      "was queued, and the channel is failed",
                      ch->id, ch->peer, ch->peer);
        /* as the proxy does with an operation it finds after the word */
        if (!atomic_compare_exchange_strong(&ch->state->status, &ok, (int32_t)status))
            return chan_said(ch, (gpuport_status_t)ok); /* the proxy was first: it sticks */
    }
    return chan_said(ch, status);
}

/* What a host call carried out itself (GPUPORT_HOST_INLINE). */
enum { INLINE_NONE, INLINE_DATA, INLINE_ALL };

/* A transport that sends the operation itself and completes it later
 * (ops->host_send): counted first, so that the count is never behind its
 * completion, which may come at once; a flush and a destroy wait for it.
 * A send the transport declines is settled like a completion (inline_done
 * one more), never taken back from inline_sent: a flush on another thread
 * may have read the count in between and waits for done to reach it. */
static int try_send(gpuport_channel_t ch, uint32_t op, uint64_t dst_off, uint64_t src_off,
                    uint64_t size, uint64_t value)
{
    gpuport_pchan_t *pc = ch->pchan;

    atomic_fetch_add_explicit(&pc->inline_sent, 1, memory_order_relaxed);
    if (pc->ops->host_send(&pc->tl, op, dst_off, src_off, size, value) ==
        GPUPORT_TRANSPORT_ASYNC) {
        /* what the transport could not send at once is the proxy's to finish */
        gpuport_waker_poke(&ch->comm->proxy.waker);
        return INLINE_ALL;
    }
    atomic_fetch_add_explicit(&pc->inline_done, 1, memory_order_release);
    return INLINE_NONE;
}

/* A transport whose operations are a copy, a store and an atomic add that
 * any thread may do (ops->host_inline): the data first (a put, or a value),
 * then the signal, released after it as the proxy would. */
static int try_copy(gpuport_channel_t ch, uint32_t op, uint64_t dst_off, uint64_t src_off,
                    uint64_t size, uint64_t value)
{
    const gpuport_transport_ops_t *ops = ch->pchan->ops;
    gpuport_tl_chan_t *tl = &ch->pchan->tl;
    int rc = GPUPORT_TRANSPORT_DONE;
    gpuport_work_t w;

    memset(&w, 0, sizeof(w));
    if ((op == GPUPORT_OP_PUT || op == GPUPORT_OP_PUT_SIGNAL) && size > 0)
        rc = ops->put(tl, dst_off, src_off, size, 0, &w);
    else if (gpuport_trigger_is_value(op))
        rc = ops->put_value ? ops->put_value(tl, dst_off, value, 0, &w) : GPUPORT_TRANSPORT_QUEUE;
    if (rc != GPUPORT_TRANSPORT_DONE)
        return INLINE_NONE;
    if (op == GPUPORT_OP_PUT || op == GPUPORT_OP_PUT_VALUE)
        return INLINE_ALL;
    memset(&w, 0, sizeof(w));
    return ops->signal(tl, 1, 0, &w) == GPUPORT_TRANSPORT_DONE ? INLINE_ALL : INLINE_DATA;
}

/* The gate every operation a calling thread carries out itself passes
 * (GPUPORT_HOST_INLINE): the setting on, none of the channel's host
 * operations in flight (chan_host_settled), the communicator not stopping;
 * then inside, counted in inline_users, unless the proxy is promising the
 * peer to write nothing more (the peer closed or failed, or this side
 * failed: proxy_close.c). 1: inside, and inline_leave must follow. */
static int inline_enter(gpuport_channel_t ch)
{
    gpuport_comm_t comm = ch->comm;

    if (!comm->config.host_inline || !chan_host_settled(ch) ||
        atomic_load_explicit(&comm->proxy.stop, memory_order_acquire))
        return 0;
    atomic_fetch_add_explicit(&ch->pchan->inline_users, 1, memory_order_seq_cst);
    if (!atomic_load_explicit(&ch->pchan->no_inline, memory_order_seq_cst) &&
        chan_peer_state(ch) == GPUPORT_OK)
        return 1;
    atomic_fetch_sub_explicit(&ch->pchan->inline_users, 1, memory_order_release);
    return 0;
}

/* Leaves the gate; `done`: the operation was carried out (counted). */
static void inline_leave(gpuport_channel_t ch, int done)
{
    atomic_fetch_sub_explicit(&ch->pchan->inline_users, 1, memory_order_release);
    if (done)
        atomic_fetch_add_explicit(&ch->comm->host_inline_ops, 1, memory_order_relaxed);
}

/* GPUPORT_HOST_INLINE: the calling thread carries out the operation itself
 * where the channel's transport allows it (ops->host_inline: try_copy;
 * ops->host_send: try_send) and none of the channel's host operations is
 * in flight (the proxy has published them all complete:
 * chan_host_settled), so it keeps its place in the channel's order, and no
 * proxy pass is spent on it. Returns what was carried out: nothing (push it
 * all), the data only (push the signal), or all. A declined or failed
 * attempt is pushed as usual: the proxy carries it out again (a put
 * rewrites the same bytes) or fails the channel with the message. */
static int try_inline(gpuport_channel_t ch, uint32_t op, uint64_t dst_off, uint64_t src_off,
                      uint64_t size, uint64_t value)
{
    const gpuport_transport_ops_t *ops = ch->pchan->ops;
    int done;

    if (!ops || !(ops->host_inline || ops->host_send) || !inline_enter(ch))
        return INLINE_NONE;
    done = ops->host_send ? try_send(ch, op, dst_off, src_off, size, value)
                          : try_copy(ch, op, dst_off, src_off, size, value);
    inline_leave(ch, done != INLINE_NONE);
    if (done == INLINE_NONE)
        return INLINE_NONE;
    if (GPUPORT_LOG_ON(GPUPORT_LOG_TRACE))
        log_trace("channel %u (to rank %d): %s, dst_off %llu, %s %llu, carried out by the "
                  "calling thread (GPUPORT_HOST_INLINE)%s",
                  ch->id, ch->peer, gpuport_op_name(op), (unsigned long long)dst_off,
                  gpuport_trigger_is_value(op) ? "value" : "size",
                  (unsigned long long)(gpuport_trigger_is_value(op) ? value : size),
                  done == INLINE_DATA ? "; its signal goes through the proxy" : "");
    return done;
}

/* GPUPORT_HOST_INLINE for get, atomic_add and accumulate: where the
 * channel's transport carries them on any thread (ops->host_inline) and
 * none of the channel's host operations is in flight, the calling thread
 * carries out d itself when the transport can finish it at once (a short
 * copy or add); 1 if it did, 0 if the caller must push it. */
int chan_try_inline_rma(gpuport_channel_t ch, const gpuport_op_desc_t *d)
{
    const gpuport_transport_ops_t *ops = ch->pchan->ops;
    gpuport_work_t w;
    int done;

    if (!ops || !ops->host_inline || !ops->rma || !inline_enter(ch))
        return 0;
    memset(&w, 0, sizeof(w));
    done = ops->rma(&ch->pchan->tl, d, 0, &w) == GPUPORT_TRANSPORT_DONE;
    inline_leave(ch, done);
    return done;
}

/* Pushes what the caller did not carry out itself (try_inline's answer). */
static gpuport_status_t push_rest(gpuport_channel_t ch, int done, uint32_t op, uint64_t dst_off,
                                  uint64_t src_off, uint64_t size, uint64_t value)
{
    uint64_t pos;

    if (done == INLINE_ALL)
        return GPUPORT_OK;
    if (done == INLINE_DATA)
        return gpuport_channel_push(ch, GPUPORT_OP_SIGNAL, 0, 0, 0, &pos);
    return gpuport_trigger_is_value(op) ? gpuport_channel_push_value(ch, op, dst_off, value, &pos)
                                        : gpuport_channel_push(ch, op, dst_off, src_off, size,
                                                               &pos);
}

/* The arguments first, then the channel (chan_usable): a call with a bad
 * argument says so whatever state the channel or its peer is in. */
static gpuport_status_t push_op(gpuport_channel_t ch, uint32_t op, uint64_t dst_off,
                                uint64_t src_off, uint64_t size)
{
    gpuport_status_t status;

    if (!chan_ok(ch))
        return chan_stale("gpuport_channel_put/signal", ch);
    if (op == GPUPORT_OP_PUT || op == GPUPORT_OP_PUT_SIGNAL) {
        status = check_put(ch, dst_off, src_off, size);
        if (status)
            return status;
    }
    status = chan_usable(ch);
    if (status)
        return status;
    return push_rest(ch, try_inline(ch, op, dst_off, src_off, size, 0), op, dst_off, src_off,
                     size, 0);
}

gpuport_status_t gpuport_channel_put(gpuport_channel_t ch, uint64_t dst_off, uint64_t src_off,
                                     uint64_t size)
{
    return push_op(ch, GPUPORT_OP_PUT, dst_off, src_off, size);
}

gpuport_status_t gpuport_channel_signal(gpuport_channel_t ch)
{
    return push_op(ch, GPUPORT_OP_SIGNAL, 0, 0, 0);
}

gpuport_status_t gpuport_channel_put_with_signal(gpuport_channel_t ch, uint64_t dst_off,
                                                 uint64_t src_off, uint64_t size)
{
    return push_op(ch, GPUPORT_OP_PUT_SIGNAL, dst_off, src_off, size);
}

static gpuport_status_t push_value(gpuport_channel_t ch, uint32_t op, uint64_t dst_off,
                                   uint64_t value)
{
    gpuport_status_t status;

    if (!chan_ok(ch))
        return chan_stale("gpuport_channel_put_value", ch);
    status = check_value(ch, dst_off);
    if (!status)
        status = chan_usable(ch);
    if (status)
        return status;
    return push_rest(ch, try_inline(ch, op, dst_off, 0, 8, value), op, dst_off, 0, 8, value);
}

gpuport_status_t gpuport_channel_put_value(gpuport_channel_t ch, uint64_t dst_off, uint64_t value)
{
    return push_value(ch, GPUPORT_OP_PUT_VALUE, dst_off, value);
}

gpuport_status_t gpuport_channel_put_value_with_signal(gpuport_channel_t ch, uint64_t dst_off,
                                                       uint64_t value)
{
    return push_value(ch, GPUPORT_OP_PUT_VALUE_SIGNAL, dst_off, value);
}
