/*
 * Peer channels (gpuport_peer_channel_create, _create_all, _destroy,
 * _stores): one channel to a peer for kernels, over a memory channel where
 * this GPU maps the peer's destination (its port channel, memchan.c's ch,
 * carries what goes through the proxy), else over a port channel. The two
 * sides first agree which: each says whether it can take the store path
 * (GPU mode, a peer of this host whose GPU adds atomically in this one's
 * memory, the regions kernels can reach, a transport that maps the peer for
 * kernels, GPUPORT_PEER_PATH not proxy), and the store path is taken only
 * where both can, so neither side makes a memory channel the other
 * refuses. _create_all is chan_all.c's collective creation over this
 * pairwise one. The kernels' handle is filled in src/cuda/gpu_peerchan.c;
 * _device_all puts every channel's handle in one device array. Application
 * threads.
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_CHANNEL
#include <stdio.h>
#include <stdlib.h>

#include "bootstrap.h"
#include "chan_int.h"
#include "gpuport/gpuport_device.h"
#include "layout.h"

#define TAG_PEER_CHANNEL 0x4753

/* What this side says in the agreement. */
typedef struct peer_caps {
    uint32_t stores;    /* 1: this side can take the store path */
    uint32_t path;      /* its GPUPORT_PEER_PATH, for the message */
} peer_caps_t;

/* Whether this side can take the store path, and if not why (for the
 * info line). Runs on both sides, in the peer's session: the transport's
 * selection may exchange with the peer. */
static int can_store(gpuport_comm_t comm, int peer, gpuport_mem_t src, gpuport_mem_t dst,
                     const char **why_p)
{
    gpuport_tl_comm_t *tc = NULL;
    char why[256];
    int dev_src = !src || gpuport_region_is_device(src->region.kind);
    int dev_dst = !dst || dst->region.kind == GPUPORT_REGION_DEVICE_VMM ||
                  dst->region.kind == GPUPORT_REGION_DEVICE_POOL;
    gpuport_status_t sel = gpuport_transport_select(comm, peer, 1, &tc, why, sizeof(why));

    if (comm->config.peer_path == 2)
        *why_p = "GPUPORT_PEER_PATH=proxy";
    else if (!comm->gpu)
        *why_p = "this rank's communicator is host-only";
    else if (!gpuport_comm_same_host(comm, peer))
        *why_p = "the peer is on another host";
    else if (sel != GPUPORT_OK || !tc->ops->kernel_dst_ok || !tc->ops->chan_kernel_map)
        *why_p = "the transport to the peer does not map its memory for kernels";
    else if (comm->config.memory_signal != 0 ||
             !gpuport_gpu_peer_atomics(comm, comm->procs[peer].gpu))
        *why_p = "the GPUs cannot add atomically in each other's memory (or "
                 "GPUPORT_MEMORY_SIGNAL=store)";
    else if (!dev_src)
        *why_p = "the source is not GPU memory";
    else if (!dev_dst)
        *why_p = "the destination is not VMM or exportable pool memory (cudaMalloc memory "
                 "opens in one context per process, the flusher's)";
    else
        return 1;
    return 0;
}

/* Meets the peer and agrees on the path: *stores_p is 1 where both sides
 * can store. With a failure of this side's (prior), it says it cannot, so
 * that both go on to a port channel's creation, where the failure is told. */
static gpuport_status_t agree(const char *call, gpuport_comm_t comm, int peer, gpuport_mem_t src,
                              gpuport_mem_t dst, gpuport_status_t prior, int *stores_p,
                              const char **why_p)
{
    gpuport_bs_session_t session;
    peer_caps_t mine = {0, 0}, theirs;
    char awaited[160];
    gpuport_status_t status;

    snprintf(awaited, sizeof(awaited), "rank %d to create its side of this peer channel "
             "(gpuport_peer_channel_create or gpuport_peer_channel_create_all naming rank %d)",
             peer, comm->rank);
    status = gpuport_bs_meet(&session, &comm->bs, peer, call, comm->config.timeout_ms,
                             &comm->bs_attempts[peer], awaited);
    if (status)
        return status;
    comm->session = &session;
    /* asked even after a failure: the transport's selection may exchange */
    mine.stores = (uint32_t)can_store(comm, peer, src, dst, why_p) && !prior;
    mine.path = (uint32_t)comm->config.peer_path;
    status = gpuport_bs_exchange(&session, TAG_PEER_CHANNEL, &mine, &theirs, sizeof(theirs),
                                 "its peer channel's paths");
    comm->session = NULL;
    if (status)
        return status;
    if (mine.stores && !theirs.stores)
        *why_p = theirs.path == 2 ? "the peer's GPUPORT_PEER_PATH=proxy"
                                  : "the peer cannot store into this rank's memory";
    *stores_p = mine.stores && theirs.stores;
    return GPUPORT_OK;
}

/* The steps of a peer channel to peer, the arguments checked: the
 * agreement, then the memory or port channel's creation. With a failure of
 * the caller's own (prior), both steps run only to tell the peer, whose
 * side then fails at the same step. */
static gpuport_status_t peer_create(const char *call, const char *out_name, gpuport_comm_t comm,
                                    int peer, gpuport_mem_t src, gpuport_mem_t dst,
                                    gpuport_status_t prior, gpuport_peer_channel_t *channel_p)
{
    gpuport_peer_channel_t pc = NULL;
    gpuport_channel_t ch;
    const char *why = NULL;
    int stores = 0;
    gpuport_status_t status;

    if (!prior && !(pc = calloc(1, sizeof(*pc)))) {
        log_error("%s: no memory for the peer channel to rank %d", call, peer);
        prior = GPUPORT_ERR_NO_MEMORY;
    }
    status = agree(call, comm, peer, src, dst, prior, &stores, &why);
    if (!status && prior)
        status = chan_create(call, out_name, comm, peer, src, dst, 0, prior, &ch, &ch, NULL);
    else if (!status && stores)
        status = gpuport_memory_channel_create(comm, peer, src, dst, &pc->mc);
    else if (!status)
        status = chan_create(call, out_name, comm, peer, src, dst, 0, GPUPORT_OK, &ch, &pc->ch,
                             NULL);
    if (status) {
        free(pc);
        return status;
    }
    if (pc->mc)
        pc->ch = pc->mc->ch;
    pc->magic = GPUPORT_PCHAN_PEER_MAGIC;
    pc->id = pc->ch->id;
    pthread_mutex_lock(&comm->lock);
    comm->peerchans[pc->id] = pc;
    pthread_mutex_unlock(&comm->lock);
    if (stores)
        log_info("peer channel %u to rank %d: small operations by the kernels' stores, large "
                 "puts by the proxy",
                 pc->id, peer);
    else
        log_info("peer channel %u to rank %d: every operation by the proxy (%s)", pc->id, peer,
                 why ? why : "the peer cannot take the store path");
    *channel_p = pc;
    return GPUPORT_OK;
}

gpuport_status_t gpuport_peer_channel_create(gpuport_comm_t comm, int peer, gpuport_mem_t src,
                                             gpuport_mem_t dst, gpuport_peer_channel_t *channel_p)
{
    static const char call[] = "gpuport_peer_channel_create";
    /* this side's alone, before the peer is met (as a port channel's) */
    gpuport_status_t status = chan_check_args(call, "channel_p", comm, peer, src, dst, channel_p);

    return status ? status
                  : peer_create(call, "channel_p", comm, peer, src, dst, GPUPORT_OK, channel_p);
}

/* gpuport_peer_channel_create_all's pair and array (chan_all.c). */
static gpuport_status_t all_create(const char *call, gpuport_comm_t comm, int peer,
                                   gpuport_mem_t src, gpuport_mem_t dst, gpuport_status_t prior,
                                   void **ch_p)
{
    gpuport_peer_channel_t pc;
    gpuport_status_t status = peer_create(call, "channels", comm, peer, src, dst, prior, &pc);

    if (!status)
        *ch_p = pc;
    return status;
}

static gpuport_status_t all_destroy(void *pc)
{
    return gpuport_peer_channel_destroy(pc);
}

static void all_store(void *channels, int peer, void *pc)
{
    ((gpuport_peer_channel_t *)channels)[peer] = pc;
}

static const chan_all_kind_t peer_all = {
    .call = "gpuport_peer_channel_create_all",
    .create = all_create,
    .destroy = all_destroy,
    .store = all_store,
};

gpuport_status_t gpuport_peer_channel_create_all(gpuport_comm_t comm, gpuport_mem_t src,
                                                 gpuport_mem_t dst,
                                                 gpuport_peer_channel_t *channels)
{
    return chan_create_all(&peer_all, comm, src, dst, 0, channels);
}

static int peer_ok(gpuport_peer_channel_t pc)
{
    return pc && pc->magic == GPUPORT_PCHAN_PEER_MAGIC;
}

gpuport_status_t gpuport_peer_channel_destroy(gpuport_peer_channel_t pc)
{
    gpuport_comm_t comm;
    gpuport_status_t status;
    void *old;

    if (!peer_ok(pc)) {
        log_error("gpuport_peer_channel_destroy: %p is not a live peer channel (NULL, destroyed "
                  "already, or not a peer channel)",
                  (void *)pc);
        return GPUPORT_ERR_INVALID_ARG;
    }
    comm = pc->ch->comm;
    status = pc->mc ? gpuport_memory_channel_destroy(pc->mc) : gpuport_channel_destroy(pc->ch);
    if (status)
        return status; /* kept: a second destroy goes on from there */
    pthread_mutex_lock(&comm->lock);
    comm->peerchans[pc->id] = NULL;
    pc->magic = 0;
    pc->ch = NULL;
    pc->mc = NULL;
    old = gpuport_dead_add(&comm->dead_peerchans, &pc->dead);
    pthread_mutex_unlock(&comm->lock);
    free(old);
    return GPUPORT_OK;
}

int gpuport_peer_channel_stores(gpuport_peer_channel_t pc)
{
    if (!peer_ok(pc))
        return -1;
    return pc->mc != NULL;
}

static gpuport_status_t peer_all_args(const char *fn, gpuport_comm_t comm,
                                      const gpuport_peer_channel_t *channels, const void *out_p)
{
    if (!gpuport_comm_live(comm) || !channels || !out_p) {
        log_error("%s: comm %p (a live communicator), channels %p and dev_p %p must be set", fn,
                  (void *)comm, (void *)channels, out_p);
        return GPUPORT_ERR_INVALID_ARG;
    }
    for (int p = 0; p < comm->size; p++) {
        const gpuport_peer_channel_t pc = channels[p];
        if (p == comm->rank)
            continue;
        if (!peer_ok(pc) || !pc->ch || pc->ch->comm != comm || pc->ch->peer != p) {
            log_error("%s: channels[%d] is not a live peer channel of this communicator to rank "
                      "%d (each entry but this rank's own, %d, is the channel to the rank of its "
                      "index, as gpuport_peer_channel_create_all fills it)",
                      fn, p, p, comm->rank);
            return GPUPORT_ERR_INVALID_ARG;
        }
    }
    return GPUPORT_OK;
}

/* One handle per rank, the caller's own entry zeroed (its layout 0: every
 * device call on it returns GPUPORT_ERR_VERSION), copied into device memory
 * of gpuport_mem_alloc_device's kind, which every context on the device
 * reaches: the copy is made in the flusher's context, the application's
 * being unknown here (it may have none). */
gpuport_status_t gpuport_peer_channel_device_all_v(uint32_t layout, gpuport_comm_t comm,
                                                   const gpuport_peer_channel_t *channels,
                                                   gpuport_peer_channel_dev_t **dev_p)
{
    static const char *fn = "gpuport_peer_channel_device_all";
    gpuport_peer_channel_dev_t *h;
    void *d = NULL;
    size_t n, bytes;
    gpuport_status_t st = peer_all_args(fn, comm, channels, dev_p);

    if (st)
        return st;
    if (gpuport_layout_check(fn, "gpuport_peer_channel_dev_t", layout,
                             GPUPORT_PEER_CHANNEL_DEV_LAYOUT))
        return GPUPORT_ERR_VERSION;
    n = comm->size > 0 ? (size_t)comm->size : 1;
    bytes = n * sizeof(*h);
    h = calloc(n, sizeof(*h));
    if (!h)
        return GPUPORT_ERR_NO_MEMORY;
    for (int p = 0; p < comm->size && !st; p++)
        if (p != comm->rank)
            st = gpuport_peer_channel_device_v(layout, channels[p], &h[p]);
    if (!st)
        st = gpuport_mem_alloc_device(comm, bytes, &d);
    if (!st) {
        st = gpuport_gpu_copy_in(comm, d, h, bytes);
        if (st)
            gpuport_mem_free(comm, d);
    }
    free(h);
    if (!st)
        *dev_p = (gpuport_peer_channel_dev_t *)d;
    return st;
}
