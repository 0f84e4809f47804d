/*
 * A port channel's waits on what the proxy and the peer publish, from host
 * threads: gpuport_channel_flush (the proxy's flush progress),
 * gpuport_channel_wait, _poll, _wait_until and _signal_count (the peer's
 * signals in this rank's semaphore slot), and the channel's state (gpuport_channel_status,
 * _transport). Every wait is bounded by GPUPORT_TIMEOUT_MS and stops early
 * when the peer closed its side (GPUPORT_ERR_CLOSED), failed it or, on this
 * host, its process exited (GPUPORT_ERR_PEER).
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_CHANNEL
#include <stdio.h>
#include <stdlib.h>

#include "chan_int.h"

/* how often a long wait checks that a same-host peer still exists */
#define PEER_CHECK_NS (20 * 1000 * 1000ull)

static gpuport_status_t timed_out(gpuport_channel_t ch, const char *what)
{
    log_error("channel %u (to rank %d): %s did not complete within GPUPORT_TIMEOUT_MS=%llu", ch->id,
              ch->peer, what, (unsigned long long)ch->comm->config.timeout_ms);
    return GPUPORT_ERR_TIMEOUT;
}

/* Waits until *count, without the bits of `ignore`, reaches target, for at
 * most GPUPORT_TIMEOUT_MS; `what` names the wait in the timeout's message. */
static gpuport_status_t wait_count(gpuport_channel_t ch, _Atomic uint64_t *count,
                                   uint64_t ignore, uint64_t target, const char *what)
{
    uint64_t deadline = gpuport_deadline(ch->comm->timeout_ns);
    uint32_t iter = 0, polls = 0;

    while ((atomic_load_explicit(count, memory_order_acquire) & ~ignore) < target) {
        if ((iter > GPUPORT_SPIN_POLLS || (++polls & 1023) == 0) &&
            gpuport_deadline_passed(deadline))
            return timed_out(ch, what);
        gpuport_wait_backoff(&iter);
    }
    return GPUPORT_OK;
}

/* Waits until everything before FIFO position pos of ch is complete. */
gpuport_status_t chan_flushed_to(gpuport_channel_t ch, uint64_t pos)
{
    return wait_count(ch, &ch->state->flushed[GPUPORT_FIFO_HOST], GPUPORT_FLUSHED_FAILED, pos + 1,
                      "flush");
}

gpuport_status_t chan_inline_drained(gpuport_channel_t ch)
{
    gpuport_pchan_t *pc = ch->pchan;
    uint64_t sent = atomic_load_explicit(&pc->inline_sent, memory_order_relaxed);

    /* nothing sent by host calls, or all of it done: no clock read */
    if (atomic_load_explicit(&pc->inline_done, memory_order_acquire) >= sent)
        return GPUPORT_OK;
    return wait_count(ch, &pc->inline_done, 0, sent, "flush of operations sent by host calls");
}

static gpuport_status_t flush(gpuport_channel_t ch)
{
    uint64_t pos;
    gpuport_status_t status;

    /* the channel's own state, not the peer's word: a flush answers for
     * this side's earlier operations, and those carried out before the
     * peer's close did land (the peer's destroy waited for them). One that
     * the close kept from being carried out put the channel in
     * GPUPORT_ERR_CLOSED, which the flush then returns. */
    status = chan_state(ch);
    if (status)
        return status;
    /* what host calls sent themselves is complete once the peer has it */
    status = chan_inline_drained(ch);
    if (status)
        return status;
    status = chan_state(ch);
    if (status)
        return status;
    /* nothing in flight (every earlier host operation carried out by its
     * caller or published complete by the proxy): nothing to wait for */
    if (ch->comm->config.host_inline && chan_host_settled(ch))
        return GPUPORT_OK;
    status = gpuport_channel_push(ch, GPUPORT_OP_FLUSH, 0, 0, 0, &pos);
    if (!status)
        status = chan_flushed_to(ch, pos);
    return status ? status : chan_state(ch);
}

gpuport_status_t gpuport_channel_flush(gpuport_channel_t ch)
{
    if (!chan_ok(ch))
        return chan_stale("gpuport_channel_flush", ch);
    return chan_said(ch, flush(ch));
}

/* the polls of a wait that may receive for themselves (host_recv) */
#define HOST_RECV_POLLS 32

/* GPUPORT_HOST_INLINE: where the transport lets a waiting thread receive
 * what the channel's connection holds (ops->host_recv), it does, instead of
 * waiting for a proxy pass to; the proxy is told (and woken if it sleeps),
 * as it now owes the peer an acknowledgement, or has bytes to go on with. */
static void host_recv(gpuport_channel_t ch)
{
    gpuport_proxy_t *px = &ch->comm->proxy;
    const gpuport_transport_ops_t *ops = ch->pchan->ops;

    if (!ch->comm->config.host_inline || !ops || !ops->host_recv || !ops->host_recv(&ch->pchan->tl))
        return;
    atomic_store_explicit(&px->conn_work, 1, memory_order_relaxed);
    gpuport_waker_poke(&px->waker);
}

/* Takes signals: with until 0, one if one is there; else every signal up
 * to number `until`, once the count has reached it (the consumed count
 * rises to until, never down). 1 taken (or already taken), 0 not yet.
 * consumed never passes the count: both takes raise it only to a count
 * they saw arrive. */
static int take_one(gpuport_channel_t ch, uint64_t until)
{
    uint64_t consumed = atomic_load_explicit(&ch->consumed, memory_order_relaxed);

    if (until) {
        if (consumed >= until)
            return 1;
        if (atomic_load_explicit(&ch->inbound->value, memory_order_acquire) < until)
            return 0;
        while (consumed < until &&
               !atomic_compare_exchange_weak_explicit(&ch->consumed, &consumed, until,
                                                      memory_order_acq_rel, memory_order_relaxed))
            ;
        return 1;
    }
    while (atomic_load_explicit(&ch->inbound->value, memory_order_acquire) > consumed) {
        if (atomic_compare_exchange_weak_explicit(&ch->consumed, &consumed, consumed + 1,
                                                  memory_order_acq_rel, memory_order_relaxed))
            return 1;
    }
    return 0;
}

/* The peer's word, or, before it has come, what this side already knows
 * of the peer's end: a wait that saw the peer's process gone, or the
 * proxy, put the channel in GPUPORT_ERR_PEER (or _CLOSED). Every call
 * agrees from then on: a poll does not answer "no signal yet" while a
 * put or status says the peer is gone. */
static int32_t peer_end(gpuport_channel_t ch)
{
    int32_t word = atomic_load_explicit(&ch->inbound->peer_status, memory_order_acquire);
    int32_t own;

    if (word)
        return word;
    own = atomic_load_explicit(&ch->state->status, memory_order_acquire);
    return own == GPUPORT_ERR_PEER || own == GPUPORT_ERR_CLOSED ? own : GPUPORT_OK;
}

/* take_one, then what it answers once the peer is gone: 1 taken, 0 none
 * yet, or below 0 the peer's close (GPUPORT_ERR_CLOSED) or failure
 * (GPUPORT_ERR_PEER) with what was asked for not there. */
static int take_signal(gpuport_channel_t ch, uint64_t until)
{
    int32_t word;

    if (take_one(ch, until))
        return 1;
    word = peer_end(ch);
    /* the peer's word comes after its last signal: one that arrived since
     * the look above is still this wait's */
    if (word && take_one(ch, until))
        return 1;
    if (!word)
        return 0;
    if (gpuport_peer_word_status(word) == GPUPORT_ERR_CLOSED) {
        /* info, not a warning: the end of the peer's signals is the normal
         * end of a channel, and the caller has GPUPORT_ERR_CLOSED to act on;
         * a warning would print at every orderly shutdown */
        log_info("channel %u: rank %d closed its side of the channel; no more signals will come",
                 ch->id, ch->peer);
        return GPUPORT_ERR_CLOSED;
    }
    log_error("channel %u: rank %d's side of the channel failed (%s); no more signals will come",
              ch->id, ch->peer, gpuport_status_string((gpuport_status_t)word));
    return GPUPORT_ERR_PEER;
}

gpuport_status_t gpuport_channel_poll(gpuport_channel_t ch, int *ready_p)
{
    int rc;

    if (!chan_ok(ch))
        return chan_stale("gpuport_channel_poll", ch);
    if (!ready_p) {
        log_error("gpuport_channel_poll: ready_p is NULL");
        return GPUPORT_ERR_INVALID_ARG;
    }
    rc = take_signal(ch, 0);
    if (rc == 0) {
        host_recv(ch);
        rc = take_signal(ch, 0);
    }
    if (rc < 0)
        return chan_said(ch, (gpuport_status_t)rc);
    *ready_p = rc;
    return GPUPORT_OK;
}

/* The timeout of a wait for one signal (until 0) or for the count to
 * reach until: the message names the value and the count. */
static gpuport_status_t wait_timed_out(gpuport_channel_t ch, uint64_t until)
{
    char what[128];

    if (!until)
        return timed_out(ch, "wait for the peer's signal");
    snprintf(what, sizeof(what), "wait until the signal count reaches %llu (it is %llu)",
             (unsigned long long)until,
             (unsigned long long)atomic_load_explicit(&ch->inbound->value, memory_order_acquire));
    return timed_out(ch, what);
}

/* gpuport_channel_wait (until 0) and _wait_until (until > 0): take_signal
 * until it answers, within GPUPORT_TIMEOUT_MS, looking every
 * PEER_CHECK_NS for a same-host peer that exited. */
static gpuport_status_t wait_for(gpuport_channel_t ch, uint64_t until)
{
    uint64_t next_check, deadline;
    uint32_t iter = 0, polls = 0;
    int rc;

    rc = take_signal(ch, until);
    if (rc)
        return rc > 0 ? GPUPORT_OK : (gpuport_status_t)rc;
    deadline = gpuport_deadline(ch->comm->timeout_ns);
    next_check = gpuport_now_ns() + PEER_CHECK_NS;
    for (;;) {
        rc = take_signal(ch, until);
        if (rc)
            return rc > 0 ? GPUPORT_OK : (gpuport_status_t)rc;
        if (iter > GPUPORT_SPIN_POLLS || (++polls & 1023) == 0) {
            uint64_t now = gpuport_now_ns();
            if (deadline != UINT64_MAX && now > deadline)
                return wait_timed_out(ch, until);
            if (now > next_check) {
                next_check = now + PEER_CHECK_NS;
                int pid = ch->comm->procs[ch->peer].pid;
                if (ch->peer_same_host && !gpuport_pid_alive(pid)) {
                    int32_t ok = GPUPORT_OK;
                    /* its close (or a last signal) may have come just
                     * before it exited: then it closed, it did not fail */
                    rc = take_signal(ch, until);
                    if (rc)
                        return rc > 0 ? GPUPORT_OK : (gpuport_status_t)rc;
                    log_error("channel %u: rank %d (pid %d) exited while this rank waited for "
                              "its signal; the channel is failed",
                              ch->id, ch->peer, pid);
                    /* the channel itself, not only this wait: its puts and
                     * flushes must not report delivery to a dead process */
                    atomic_compare_exchange_strong(&ch->state->status, &ok, GPUPORT_ERR_PEER);
                    return GPUPORT_ERR_PEER;
                }
            }
        }
        /* the first polls only: a wait that lasts is left to the proxy, so
         * that its system calls do not take a crowded core from the
         * threads it waits for */
        if (iter < HOST_RECV_POLLS)
            host_recv(ch);
        gpuport_wait_backoff(&iter);
    }
}

gpuport_status_t gpuport_channel_wait(gpuport_channel_t ch)
{
    if (!chan_ok(ch))
        return chan_stale("gpuport_channel_wait", ch);
    return chan_said(ch, wait_for(ch, 0));
}

gpuport_status_t gpuport_channel_wait_until(gpuport_channel_t ch, uint64_t value)
{
    if (!chan_ok(ch))
        return chan_stale("gpuport_channel_wait_until", ch);
    /* nothing to wait for: not even the peer's end is news to this call */
    if (value == 0)
        return GPUPORT_OK;
    return chan_said(ch, wait_for(ch, value));
}

gpuport_status_t gpuport_channel_signal_count(gpuport_channel_t ch, uint64_t *count_p)
{
    if (!chan_ok(ch))
        return chan_stale("gpuport_channel_signal_count", ch);
    if (!count_p) {
        log_error("gpuport_channel_signal_count: count_p is NULL");
        return GPUPORT_ERR_INVALID_ARG;
    }
    host_recv(ch);
    *count_p = atomic_load_explicit(&ch->inbound->value, memory_order_acquire);
    return GPUPORT_OK;
}

gpuport_status_t gpuport_channel_wait_all(const gpuport_channel_t *chs, int n)
{
    uint64_t deadline = UINT64_MAX, taken[8] = {0}, *mask = taken;
    uint32_t iter = 0;
    int left = n, rc;
    gpuport_status_t status = GPUPORT_OK;

    if (n < 0 || (n > 0 && !chs)) {
        log_error("gpuport_channel_wait_all: %s", n < 0 ? "n is negative" : "chs is NULL");
        return GPUPORT_ERR_INVALID_ARG;
    }
    for (int i = 0; i < n; i++)
        if (!chan_ok(chs[i]))
            return chan_stale("gpuport_channel_wait_all", chs[i]);
    if (n > 512 && !(mask = calloc(((size_t)n + 63) / 64, sizeof(*mask))))
        return GPUPORT_ERR_NO_MEMORY;
    if (n > 0)
        deadline = gpuport_deadline(chs[0]->comm->timeout_ns);
    while (left > 0 && status == GPUPORT_OK) {
        for (int i = 0; i < n && status == GPUPORT_OK; i++) {
            if (mask[i / 64] >> (i % 64) & 1)
                continue;
            rc = take_signal(chs[i], 0);
            if (rc == 0 && iter < HOST_RECV_POLLS) {
                host_recv(chs[i]);
                rc = take_signal(chs[i], 0);
            }
            if (rc < 0)
                status = chan_said(chs[i], (gpuport_status_t)rc);
            else if (rc > 0) {
                mask[i / 64] |= 1ull << (i % 64);
                left--;
            }
        }
        if (left == 0 || status != GPUPORT_OK)
            break;
        if (deadline != UINT64_MAX && gpuport_now_ns() > deadline) {
            for (int i = 0; i < n; i++)
                if (!(mask[i / 64] >> (i % 64) & 1)) {
                    status = timed_out(chs[i], "wait for the peer's signal (wait_all)");
                    break;
                }
            break;
        }
        /* a same-host peer that exited: its one wait reports it (and fails
         * the channel) as gpuport_channel_wait does */
        if (iter > GPUPORT_SPIN_POLLS && (iter & 1023) == 0)
            for (int i = 0; i < n && status == GPUPORT_OK; i++)
                if (!(mask[i / 64] >> (i % 64) & 1) && chs[i]->peer_same_host &&
                    !gpuport_pid_alive(chs[i]->comm->procs[chs[i]->peer].pid))
                    status = gpuport_channel_wait(chs[i]);
        gpuport_wait_backoff(&iter);
    }
    if (mask != taken)
        free(mask);
    return status;
}

gpuport_status_t gpuport_channel_flush_all(const gpuport_channel_t *chs, int n)
{
    gpuport_status_t first = GPUPORT_OK;

    if (n < 0 || (n > 0 && !chs)) {
        log_error("gpuport_channel_flush_all: %s", n < 0 ? "n is negative" : "chs is NULL");
        return GPUPORT_ERR_INVALID_ARG;
    }
    for (int i = 0; i < n; i++) {
        gpuport_status_t st = gpuport_channel_flush(chs[i]);
        if (st != GPUPORT_OK && first == GPUPORT_OK)
            first = st;
    }
    return first;
}

gpuport_status_t gpuport_channel_status(gpuport_channel_t ch)
{
    return chan_ok(ch) ? chan_said(ch, chan_health(ch)) : chan_stale("gpuport_channel_status", ch);
}

const char *gpuport_channel_transport(gpuport_channel_t ch)
{
    return chan_ok(ch) && ch->pchan->ops ? ch->pchan->ops->name : "none";
}
