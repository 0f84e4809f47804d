/*
 * Pairwise conversations over the communicator's bootstrap (gpuport.h's
 * gpuport_bootstrap_t), for the core and the transports. Application
 * threads only.
 *
 * A conversation (a channel's creation) begins with a meeting
 * (gpuport_bs_meet) and goes on with exchanges (gpuport_bs_exchange): both
 * ranks call with the same tag and size, in the same order. Every wait
 * ends at the session's limit (GPUPORT_TIMEOUT_MS) with GPUPORT_ERR_TIMEOUT,
 * logged here naming the peer and what was awaited, where the bootstrap
 * has recv_timed. A side that gave up leaves its messages behind in the
 * bootstrap; each carries its sender's attempt number, which only grows
 * per pair, and the meeting makes both sides agree on the two current
 * ones, so a later conversation drops what an earlier one left.
 *
 * Tags: below 0x4800 the core's; from 0x4800 the transports' (each keeps
 * its own in its folder).
 */
#ifndef GPUPORT_BOOTSTRAP_H
#define GPUPORT_BOOTSTRAP_H

#include <stddef.h>
#include <stdint.h>

#include "gpuport/gpuport.h"

#define GPUPORT_TAG_TRANSPORT 0x4800

typedef struct gpuport_bs_session {
    const gpuport_bootstrap_t *bs;
    int peer;
    const char *call;     /* the public call, for messages */
    uint64_t timeout_ms;  /* each wait's limit; 0: none */
    uint32_t mine;        /* this side's attempt number (from 1) */
    uint32_t theirs;      /* the peer's, agreed by the meeting */
} gpuport_bs_session_t;

/* Meets the peer: both sides have called, each naming the other, and agree
 * on their attempts. *attempts counts this rank's attempts with the peer
 * (kept per peer by the caller, starting at 0) and is raised here.
 * `awaited` says what the peer must call, for the timeout's message.
 * With itself, at once. */
gpuport_status_t gpuport_bs_meet(gpuport_bs_session_t *s, const gpuport_bootstrap_t *bs,
                                 int peer, const char *call, uint64_t timeout_ms,
                                 uint32_t *attempts, const char *awaited);

/* Sends `mine` to the peer and receives its `theirs` of the same size
 * (lower rank sends first, so blocking sends cannot deadlock); with itself,
 * a copy. `what` names the peer's part for the timeout's message ("its
 * channel record"). */
gpuport_status_t gpuport_bs_exchange(const gpuport_bs_session_t *s, int tag, const void *mine,
                                     void *theirs, size_t bytes, const char *what);

#endif
