/*
 * What the channel files share; only they include it. Port channels are
 * split by job:
 *   channel.c         gpuport_channel_create: the port channel's steps
 *   chan_all.c        a channel to every rank with one outcome on every rank,
 *                     for any kind: gpuport_channel_create_all (the peer
 *                     channels' is in peerchan.c)
 *   chan_handshake.c  the creation handshake between the two sides, for any
 *                     channel kind (chan_handshake.h)
 *   chan_alloc.c      what a channel takes from its communicator: its id,
 *                     and a reference on the connection to its peer
 *   chan_push.c       the host's operations, their checks, the pushes
 *   chan_wait.c       flush, wait, poll and the channel's state
 *   chan_destroy.c    destroy, and closing every channel with the communicator
 * The dead-handle list they use is handles.h's. Application threads.
 */
#ifndef GPUPORT_CHAN_INT_H
#define GPUPORT_CHAN_INT_H

#include <stdint.h>

#include "internal.h"

/* How a memory channel's kernels reach the peer (transport.h's
 * chan_kernel_map): the device addresses of its destination (0: none) and
 * of its control-segment semaphore for the channel, and whether both GPUs
 * add atomically in each other's memory (GPUPORT_MC_ATOMICS of both). */
typedef struct chan_kernel_view {
    uint64_t dst_d, sem_d;
    int atomics;
} chan_kernel_view_t;

/* The steps of gpuport_channel_create (channel.c), for both kinds: memory
 * 1 makes a port channel under a memory channel (memchan.c), whose kernels
 * store into the peer's destination themselves, and fills *view_p. A
 * failure of the caller's own (prior) fails the creation on both sides,
 * the handshake run as usual. call and out_name (the handle's argument,
 * out_p its value) are for messages. */
gpuport_status_t chan_create(const char *call, const char *out_name, gpuport_comm_t comm,
                             int peer, gpuport_mem_t src, gpuport_mem_t dst, int memory,
                             gpuport_status_t prior, const void *out_p,
                             gpuport_channel_t *channel_p, chan_kernel_view_t *view_p);

/* channel.c: the arguments every creation checks first (a live
 * communicator, out_p not NULL, a rank of it, regions of it or NULL);
 * GPUPORT_OK or GPUPORT_ERR_INVALID_ARG, logged. The peer is not waited for. */
gpuport_status_t chan_check_args(const char *call, const char *out_name, gpuport_comm_t comm,
                                 int peer, gpuport_mem_t src, gpuport_mem_t dst,
                                 const void *out_p);

/* One kind of channel for chan_create_all: how a pair is made and undone,
 * and how a handle goes into the caller's array (typed by the kind). */
typedef struct chan_all_kind {
    const char *call; /* the public call, for messages */
    /* The channel to peer into *ch_p (written on success only); with prior
     * (this rank's failure so far), the peer is only met and told, so that
     * its side fails alike and it waits for nothing more. */
    gpuport_status_t (*create)(const char *call, gpuport_comm_t comm, int peer,
                               gpuport_mem_t src, gpuport_mem_t dst, gpuport_status_t prior,
                               void **ch_p);
    gpuport_status_t (*destroy)(void *ch);
    void (*store)(void *channels, int peer, void *ch); /* channels[peer] = ch */
} chan_all_kind_t;

/* chan_all.c: a channel of the kind to every rank (to itself too where
 * with_self is 1), collectively, with one outcome on every rank
 * (gpuport_channel_create_all's contract): every entry of channels
 * written on success; on failure every entry NULL but a channel whose
 * destroy failed (kept); nothing written where channels is NULL or comm is
 * not live. */
gpuport_status_t chan_create_all(const chan_all_kind_t *kind, gpuport_comm_t comm,
                                 gpuport_mem_t src, gpuport_mem_t dst, int with_self,
                                 void *channels);

/* A handle from gpuport_channel_create not yet destroyed. */
static inline int chan_ok(gpuport_channel_t ch)
{
    return ch && ch->magic == GPUPORT_CHAN_MAGIC;
}

/* GPUPORT_OK, or the channel's error as the proxy published it */
static inline gpuport_status_t chan_state(gpuport_channel_t ch)
{
    return (gpuport_status_t)atomic_load_explicit(&ch->state->status, memory_order_acquire);
}

/* The peer's word in this side's semaphore slot, as this side reports it
 * (gpuport_peer_word_status): GPUPORT_OK, _CLOSED or _PEER. */
static inline gpuport_status_t chan_peer_state(gpuport_channel_t ch)
{
    return gpuport_peer_word_status(
        atomic_load_explicit(&ch->inbound->peer_status, memory_order_acquire));
}

/* What status, flush and the operations report: the channel's own error
 * first (it sticks), else the peer's close or failure as soon as its word
 * has arrived, before the proxy has looked at it. */
static inline gpuport_status_t chan_health(gpuport_channel_t ch)
{
    gpuport_status_t status = chan_state(ch);

    return status ? status : chan_peer_state(ch);
}

/* Returns status, which a host call of the live channel ch is about to
 * report; when it is not GPUPORT_OK and a kernel's handle of the channel
 * exists, first writes the channel's end words into their device copy
 * (gpuport_gpu_note_ends), so that a kernel launched after the report sees
 * the end in its pushes (gpuport_dev_end_words). */
static inline gpuport_status_t chan_said(gpuport_channel_t ch, gpuport_status_t status)
{
    if (status != GPUPORT_OK && atomic_load_explicit(&ch->dev_handed, memory_order_seq_cst))
        gpuport_gpu_note_ends(ch);
    return status;
}

/* The message for a handle that is not a live channel, given to `call`;
 * GPUPORT_ERR_INVALID_ARG. Every call of the channel files says it. */
static inline gpuport_status_t chan_stale(const char *call, gpuport_channel_t ch)
{
    log_error("%s: %p is not a live channel (NULL, destroyed already, or not a channel)", call,
              (void *)ch);
    return GPUPORT_ERR_INVALID_ARG;
}

/* 1 when none of ch's host operations is in flight: the proxy has
 * published every one pushed so far complete (flushed[host] reached
 * host_last). Host calls (chan_push.c) and flush (chan_wait.c) ask. */
static inline int chan_host_settled(gpuport_channel_t ch)
{
    uint64_t last = atomic_load_explicit(&ch->host_last, memory_order_acquire);
    uint64_t done =
        atomic_load_explicit(&ch->state->flushed[GPUPORT_FIFO_HOST], memory_order_acquire);

    return (done & ~GPUPORT_FLUSHED_FAILED) >= last;
}

/* chan_push.c: what every host operation checks once its arguments are
 * found good (a bad argument is reported first): a live handle, a healthy
 * channel, a peer that has not closed or failed its side (the channel then
 * takes that status); GPUPORT_OK or the refusal, logged. */
gpuport_status_t chan_usable(gpuport_channel_t ch);
/* chan_push.c: a get, atomic_add or accumulate carried out by the calling
 * thread (GPUPORT_HOST_INLINE, where the transport allows it and the
 * channel's host operations are settled); 1 if it was, 0: push it. */
int chan_try_inline_rma(gpuport_channel_t ch, const gpuport_op_desc_t *d);

/* chan_wait.c: waits until everything before host-FIFO position pos of ch
 * is complete; GPUPORT_ERR_TIMEOUT (logged) after GPUPORT_TIMEOUT_MS. */
gpuport_status_t chan_flushed_to(gpuport_channel_t ch, uint64_t pos);
/* chan_wait.c: waits until every operation that host calls of ch sent
 * themselves so far (ops->host_send) has completed; GPUPORT_ERR_TIMEOUT
 * (logged) after GPUPORT_TIMEOUT_MS. A failure shows in the channel's
 * state. */
gpuport_status_t chan_inline_drained(gpuport_channel_t ch);

/* chan_alloc.c. A free channel id (GPUPORT_ERR_NO_RESOURCE, logged with
 * the limit, when all GPUPORT_MAX_CHANNELS are in use), and giving it back
 * (the caller holds comm->lock). */
gpuport_status_t chan_id_alloc(gpuport_comm_t comm, uint32_t *id_p);
void chan_id_free_locked(gpuport_comm_t comm, uint32_t id);
/* The connection to peer over the transport tc, opened on first use, with a
 * reference taken for the channel, and dropping it (the caller holds
 * comm->lock). A connection stays open until the communicator goes. */
gpuport_status_t chan_conn_get(gpuport_comm_t comm, int peer, gpuport_tl_comm_t *tc,
                               gpuport_conn_t **conn_p);
void chan_conn_put_locked(gpuport_conn_t *conn);

#endif
