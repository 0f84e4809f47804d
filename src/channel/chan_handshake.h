/*
 * The creation handshake of a channel, for every channel kind (port
 * channels: channel.c). Pairwise: both sides run it for the same channel,
 * in the same order, and always reach both exchanges carrying their local
 * result, so that a failure on one side fails the other too instead of
 * hanging it:
 *   1. the channel records are exchanged (each side's result, channel id,
 *      destination and the kind's own data) and checked: the record's
 *      version, the peer's result, and whether the kind pairs the two
 *      (kind->agree: both sides see both records, so both decide alike);
 *   2. this side sets up (kind->setup), the two destinations' descriptors
 *      travel where the kind maps the peer's memory (pass_fds), and this
 *      side connects to the peer's (kind->connect);
 *   3. both sides' results of step 2 are exchanged, so that both agree
 *      that both connected; where either failed, kind->undo takes step 2
 *      back.
 * A second kind (memory channels: kernels storing straight into same-host
 * peers' memory) fills a gpuport_chan_kind_t of its own (setup: reset its
 * semaphore slot; connect: map the peer's destination from its descriptors
 * into the application's context; undo: unmap it), takes its id and gives
 * it back through chan_alloc.c, and keeps the handshake, the descriptor
 * passing and the agreement on failure as they are here. Application
 * threads, once the two sides have met (comm->session, bootstrap.h);
 * blocking, each wait bounded by GPUPORT_TIMEOUT_MS.
 */
#ifndef GPUPORT_CHAN_HANDSHAKE_H
#define GPUPORT_CHAN_HANDSHAKE_H

#include <stdint.h>

#include "internal.h"

/* What a channel kind adds to the handshake; arg is the kind's creation. */
typedef struct gpuport_chan_kind {
    /* Step 1, once both sides succeeded so far: GPUPORT_OK if this side
     * pairs with the peer's record, else the status (logged). NULL: any. */
    gpuport_status_t (*agree)(void *arg, const gpuport_channel_rec_t *mine,
                              const gpuport_channel_rec_t *theirs);
    /* Step 2, before descriptors travel. NULL: nothing to set up. */
    gpuport_status_t (*setup)(void *arg, const gpuport_channel_rec_t *theirs);
    /* Step 2: makes the peer's side usable from here. pieces: the
     * descriptors of the peer's destination (npieces, theirs->dst.npieces;
     * none without pass_fds), open during the call only. */
    gpuport_status_t (*connect)(void *arg, const gpuport_channel_rec_t *theirs,
                                const gpuport_fdpiece_t *pieces, uint32_t npieces);
    /* Takes setup and connect back (whichever ran) when this side or the
     * peer failed in step 2; called whenever step 2 began. */
    void (*undo)(void *arg);
} gpuport_chan_kind_t;

typedef struct gpuport_chan_shake {
    gpuport_comm_t comm;
    int peer;
    uint32_t id;         /* this side's channel id (meaningful once allocated) */
    gpuport_mem_t dst;   /* this side's destination, or NULL */
    int pass_fds;        /* the destinations' descriptors travel in step 2 */
    const gpuport_chan_kind_t *kind;
    void *arg;
    gpuport_channel_rec_t mine;   /* the kind fills its own data (chan_shake_begin zeroes) */
    gpuport_channel_rec_t theirs; /* the peer's, after step 1 */
} gpuport_chan_shake_t;

/* Zeroes hs and makes hs->mine a channel record, for the kind to fill. */
void chan_shake_begin(gpuport_chan_shake_t *hs, gpuport_comm_t comm, int peer);

/* Runs the handshake, status being this side's result so far (its reason
 * in hs->mine.why, or the status's text is sent). GPUPORT_OK once both
 * sides connected; else this side's error, or what failed between the two
 * (the bootstrap, the peer's record or result: GPUPORT_ERR_PEER). */
gpuport_status_t chan_handshake(gpuport_chan_shake_t *hs, gpuport_status_t status);

#endif
