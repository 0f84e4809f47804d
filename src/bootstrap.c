/* Pairwise conversations over the bootstrap; see bootstrap.h. */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_BOOTSTRAP
#include "bootstrap.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "util.h"

#define TAG_MEET 0x4700

/* A meeting's message: a hello (took 0), or the sender's answer to the
 * hello of the peer's attempt `took`. */
typedef struct meet_msg {
    uint32_t attempt;
    uint32_t took;
} meet_msg_t;

/* Every exchanged message: the sender's attempt, then the caller's bytes. */
typedef struct envelope {
    uint32_t attempt;
    uint32_t pad;
} envelope_t;

static gpuport_status_t send_to(const gpuport_bs_session_t *s, int tag, const void *buf,
                                size_t bytes)
{
    gpuport_status_t st = s->bs->send(s->bs->ctx, s->peer, tag, buf, bytes);

    if (st)
        log_error("%s: bootstrap send to rank %d failed: %s", s->call, s->peer,
                  gpuport_status_string(st));
    return st;
}

/* One message from the peer, or GPUPORT_ERR_TIMEOUT at the deadline
 * (logged here, naming what was awaited). */
static gpuport_status_t recv_by(const gpuport_bs_session_t *s, int tag, void *buf, size_t bytes,
                                uint64_t deadline, const char *what)
{
    const gpuport_bootstrap_t *bs = s->bs;
    gpuport_status_t st;

    if (!bs->recv_timed) {
        st = bs->recv(bs->ctx, s->peer, tag, buf, bytes);
    } else {
        do
            st = bs->recv_timed(bs->ctx, s->peer, tag, buf, bytes,
                                gpuport_deadline_ms(deadline, 100));
        while (st == GPUPORT_ERR_TIMEOUT && !gpuport_deadline_passed(deadline));
    }
    if (st == GPUPORT_ERR_TIMEOUT)
        log_error("%s: rank %d did not answer within GPUPORT_TIMEOUT_MS=%llu ms: this rank "
                  "waited for %s",
                  s->call, s->peer, (unsigned long long)s->timeout_ms, what);
    else if (st)
        log_error("%s: bootstrap receive from rank %d failed (waiting for %s): %s", s->call,
                  s->peer, what, gpuport_status_string(st));
    return st;
}

/* Hellos and answers until the peer has answered this attempt's hello
 * with the attempt whose hello this side answered last. Whatever an
 * abandoned attempt of either side left is passed over: an older hello
 * is followed by newer ones, and answers that do not pair the two
 * current attempts are dropped. */
gpuport_status_t gpuport_bs_meet(gpuport_bs_session_t *s, const gpuport_bootstrap_t *bs,
                                 int peer, const char *call, uint64_t timeout_ms,
                                 uint32_t *attempts, const char *awaited)
{
    uint64_t deadline = gpuport_deadline(timeout_ms * 1000000ull);
    meet_msg_t hello, msg, answer;
    uint32_t candidate = 0;
    gpuport_status_t st;

    memset(s, 0, sizeof(*s));
    s->bs = bs;
    s->peer = peer;
    s->call = call;
    s->timeout_ms = timeout_ms;
    s->mine = ++*attempts;
    if (peer == bs->rank) {
        s->theirs = s->mine;
        return GPUPORT_OK;
    }
    hello.attempt = s->mine;
    hello.took = 0;
    st = send_to(s, TAG_MEET, &hello, sizeof(hello));
    while (!st) {
        st = recv_by(s, TAG_MEET, &msg, sizeof(msg), deadline, awaited);
        if (st)
            break;
        if (msg.took == 0) {
            candidate = msg.attempt;
            answer.attempt = s->mine;
            answer.took = candidate;
            st = send_to(s, TAG_MEET, &answer, sizeof(answer));
        } else if (msg.attempt == candidate && msg.took == s->mine) {
            s->theirs = candidate;
            return GPUPORT_OK;
        } else {
            log_debug("%s: rank %d's answer of its attempt %u to this rank's %u is stale "
                      "(attempts now: rank %d's %u, this rank's %u)",
                      call, peer, msg.attempt, msg.took, peer, candidate, s->mine);
        }
    }
    return st;
}

/* The peer's message of the agreed attempt; older ones, left by attempts
 * that gave up, are dropped. */
static gpuport_status_t recv_current(const gpuport_bs_session_t *s, int tag, void *buf,
                                     size_t bytes, const char *what)
{
    uint64_t deadline = gpuport_deadline(s->timeout_ms * 1000000ull);
    const envelope_t *env = buf;
    gpuport_status_t st;

    for (;;) {
        st = recv_by(s, tag, buf, bytes, deadline, what);
        if (st || env->attempt == s->theirs)
            return st;
        if (env->attempt > s->theirs) {
            log_error("%s: rank %d sent %s of its attempt %u during its attempt %u: the two "
                      "sides' set-up calls are out of step",
                      s->call, s->peer, what, env->attempt, s->theirs);
            return GPUPORT_ERR_PEER;
        }
        log_debug("%s: dropped rank %d's %s of its abandoned attempt %u (now %u)", s->call,
                  s->peer, what, env->attempt, s->theirs);
    }
}

gpuport_status_t gpuport_bs_exchange(const gpuport_bs_session_t *s, int tag, const void *mine,
                                     void *theirs, size_t bytes, const char *what)
{
    size_t total = sizeof(envelope_t) + bytes;
    unsigned char *out, *in;
    gpuport_status_t st;

    if (s->peer == s->bs->rank) {
        memcpy(theirs, mine, bytes);
        return GPUPORT_OK;
    }
    out = malloc(2 * total);
    if (!out)
        return GPUPORT_ERR_NO_MEMORY;
    in = out + total;
    memset(out, 0, sizeof(envelope_t));
    ((envelope_t *)out)->attempt = s->mine;
    memcpy(out + sizeof(envelope_t), mine, bytes);
    if (s->bs->rank < s->peer) {
        st = send_to(s, tag, out, total);
        if (!st)
            st = recv_current(s, tag, in, total, what);
    } else {
        st = recv_current(s, tag, in, total, what);
        if (!st)
            st = send_to(s, tag, out, total);
    }
    if (!st)
        memcpy(theirs, in + sizeof(envelope_t), bytes);
    free(out);
    return st;
}
