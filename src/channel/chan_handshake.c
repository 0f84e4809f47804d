/*
 * The creation handshake of a channel of any kind (chan_handshake.h says
 * its steps and how a kind plugs in; channel.c runs it for port channels).
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_CHANNEL
#include <stdio.h>
#include <string.h>

#include "bootstrap.h"
#include "chan_handshake.h"

#define TAG_CHANNEL 0x4750
#define TAG_CHANNEL_ACK 0x4751

void chan_shake_begin(gpuport_chan_shake_t *hs, gpuport_comm_t comm, int peer)
{
    memset(hs, 0, sizeof(*hs));
    hs->comm = comm;
    hs->peer = peer;
    gpuport_record_header_init(&hs->mine.hdr, GPUPORT_REC_CHANNEL, sizeof(hs->mine));
}

/* The generic part of this side's record, with its result so far. */
static void record_finish(gpuport_chan_shake_t *hs, gpuport_status_t status)
{
    gpuport_channel_rec_t *mine = &hs->mine;

    if (status && !mine->why[0])
        snprintf(mine->why, sizeof(mine->why), "%s (its log says why)",
                 gpuport_status_string(status));
    mine->status = status;
    mine->channel_id = status ? 0 : hs->id;
    mine->fdsock_ok = hs->comm->fdsock.lfd >= 0;
    if (hs->dst)
        mine->dst = hs->dst->rec;
}

/* Step 1: the records, and whether both sides can go on. */
static gpuport_status_t records(gpuport_chan_shake_t *hs, gpuport_status_t status)
{
    gpuport_comm_t comm = hs->comm;
    int peer = hs->peer;
    gpuport_status_t peer_status;

    peer_status = gpuport_bs_exchange(comm->session, TAG_CHANNEL, &hs->mine, &hs->theirs,
                                      sizeof(hs->theirs), "its channel record");
    if (!peer_status)
        peer_status =
            gpuport_record_check(&hs->theirs.hdr, GPUPORT_REC_CHANNEL, sizeof(hs->theirs), peer);
    if (peer_status || status)
        return status ? status : peer_status;
    if (hs->theirs.status) {
        log_error("rank %d could not create its side of the channel: %.*s", peer,
                  (int)sizeof(hs->theirs.why), hs->theirs.why);
        return GPUPORT_ERR_PEER;
    }
    return hs->kind->agree ? hs->kind->agree(hs->arg, &hs->mine, &hs->theirs) : GPUPORT_OK;
}

/* The descriptors of both sides' destinations, for a kind that maps the
 * peer's (pass_fds): both sides take part whenever either has some to
 * give, and both see from the records whether it can work, so that neither
 * waits for an exchange the other will not make. */
static gpuport_status_t pass_fds(gpuport_chan_shake_t *hs, gpuport_fdpiece_t **pieces_p,
                                 uint32_t *n_p)
{
    gpuport_comm_t comm = hs->comm;
    int peer = hs->peer;
    const gpuport_channel_rec_t *mine = &hs->mine, *theirs = &hs->theirs;
    const gpuport_proc_rec_t *p = &comm->procs[peer];
    gpuport_fdpeer_t fp = {peer, p->pid, p->uid, p->sock_serial, p->host_id};
    uint64_t tag;
    gpuport_fdpiece_t *pieces = NULL;
    uint32_t n = 0;
    gpuport_status_t st;

    if (mine->dst.npieces == 0 && theirs->dst.npieces == 0)
        return GPUPORT_OK;
    if (!mine->fdsock_ok) {
        log_error("channel to rank %d: the regions' descriptors cannot be passed: this rank has "
                  "no descriptor socket (%s)",
                  peer, comm->fdsock.why);
        return GPUPORT_ERR_NOT_SUPPORTED;
    }
    if (!theirs->fdsock_ok) {
        log_error("channel to rank %d: the regions' descriptors cannot be passed: rank %d has no "
                  "descriptor socket (its log says why)",
                  peer, peer);
        return GPUPORT_ERR_PEER;
    }
    /* the lower rank's channel id first, on both sides */
    tag = comm->rank < peer ? (uint64_t)hs->id << 32 | theirs->channel_id
                            : (uint64_t)theirs->channel_id << 32 | hs->id;
    st = gpuport_fdsock_exchange(&comm->fdsock, &fp, tag, hs->dst ? hs->dst->region.pieces : NULL,
                                 mine->dst.npieces, &pieces, &n,
                                 gpuport_deadline(comm->timeout_ns));
    if (st)
        return st;
    if (n != theirs->dst.npieces) {
        log_error("channel to rank %d: its destination has %u descriptors, but %u came", peer,
                  theirs->dst.npieces, n);
        gpuport_fdpieces_free(pieces, n);
        return GPUPORT_ERR_PEER;
    }
    *pieces_p = pieces;
    *n_p = n;
    return GPUPORT_OK;
}

/* Steps 2 and 3: this side connects, and both sides learn whether both did. */
static gpuport_status_t connect_both(gpuport_chan_shake_t *hs)
{
    const gpuport_chan_kind_t *kind = hs->kind;
    gpuport_fdpiece_t *pieces = NULL;
    uint32_t npieces = 0;
    gpuport_status_t status = GPUPORT_OK, peer_status;
    int32_t ack, peer_ack;

    if (kind->setup)
        status = kind->setup(hs->arg, &hs->theirs);
    if (!status && hs->pass_fds)
        status = pass_fds(hs, &pieces, &npieces);
    if (!status)
        status = kind->connect(hs->arg, &hs->theirs, pieces, npieces);
    /* what connect needed it has mapped */
    gpuport_fdpieces_free(pieces, npieces);
    ack = status;
    peer_status = gpuport_bs_exchange(hs->comm->session, TAG_CHANNEL_ACK, &ack, &peer_ack,
                                      sizeof(ack), "its result of connecting its side");
    if (!status && !peer_status && peer_ack) {
        log_error("rank %d could not connect its side of the channel (%s)", hs->peer,
                  gpuport_status_string((gpuport_status_t)peer_ack));
        status = GPUPORT_ERR_PEER;
    }
    if (status || peer_status) {
        kind->undo(hs->arg);
        return status ? status : peer_status;
    }
    return GPUPORT_OK;
}

gpuport_status_t chan_handshake(gpuport_chan_shake_t *hs, gpuport_status_t status)
{
    record_finish(hs, status);
    status = records(hs, status);
    return status ? status : connect_both(hs);
}
