/*
 * Channels' creation: gpuport_channel_create, and the same steps for
 * memory channels (memchan.c: a port channel whose peer's destination the
 * application's kernels store into themselves); application threads.
 * Its steps: the arguments checked; this side prepared (an id and the
 * peer's connection from chan_alloc.c, the transport chosen, the
 * transport's part of the record); the creation handshake with the peer
 * (chan_handshake.c), to which the port channel adds the transport's
 * agreement, the proxy's entry and the transport's connect; then the handle
 * published to the proxy. The channel's operations, waits and destroy are
 * in chan_push.c, chan_wait.c and chan_destroy.c; gpuport_channel_create_all
 * is chan_all.c's, over this file's pairwise creation.
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_CHANNEL
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap.h"
#include "chan_handshake.h"
#include "chan_int.h"

/* One port channel being created, this side: what the steps share. */
typedef struct port_new {
    gpuport_comm_t comm;
    int peer;
    gpuport_mem_t src, dst;
    uint32_t id;
    int have_id;
    gpuport_tl_comm_t *tc;
    const gpuport_transport_ops_t *ops;
    gpuport_conn_t *conn;
    gpuport_channel_t ch;
    gpuport_pchan_t *pc;
    gpuport_chan_shake_t hs;
    const char *call;  /* the public call, for messages */
    int memory;        /* a memory channel's */
    chan_kernel_view_t view; /* memory: the kernels' view of the peer */
} port_new_t;

static int mem_ok(gpuport_comm_t comm, gpuport_mem_t mem)
{
    return mem == NULL || (mem->magic == GPUPORT_MEM_MAGIC && mem->comm == comm);
}

static int is_device(gpuport_mem_t mem)
{
    return mem && gpuport_region_is_device(mem->region.kind);
}

/* A region's kind in a channel's info line. */
static const char *region_word(int kind)
{
    switch (kind) {
    case GPUPORT_REGION_NONE: return "none";
    case GPUPORT_REGION_HOST: return "host";
    case GPUPORT_REGION_HOST_SHARED: return "host-shared";
    case GPUPORT_REGION_DEVICE: return "device";
    case GPUPORT_REGION_DEVICE_VMM: return "device-vmm";
    case GPUPORT_REGION_DEVICE_POOL: return "device-pool";
    default: return "?";
    }
}

static const gpuport_region_t none_region = {.kind = GPUPORT_REGION_NONE, .alloc_fd = -1};

/* Errors here are this side's alone: the peer is not waited for. */
gpuport_status_t chan_check_args(const char *call, const char *out_name, gpuport_comm_t comm,
                                 int peer, gpuport_mem_t src, gpuport_mem_t dst,
                                 const void *channel_p)
{
    if (!gpuport_comm_live(comm)) {
        log_error("%s: comm %p is not a live communicator", call, (void *)comm);
        return GPUPORT_ERR_INVALID_ARG;
    }
    if (!channel_p) {
        log_error("%s: %s is NULL", call, out_name);
        return GPUPORT_ERR_INVALID_ARG;
    }
    if (peer < 0 || peer >= comm->size) {
        log_error("%s: peer %d is not a rank of this communicator (0..%d)", call, peer,
                  comm->size - 1);
        return GPUPORT_ERR_INVALID_ARG;
    }
    if (!mem_ok(comm, src) || !mem_ok(comm, dst)) {
        log_error("%s: %s %p is not a live registration of this "
                  "communicator (gpuport_mem_register, not yet deregistered) or NULL",
                  call, mem_ok(comm, src) ? "dst" : "src", mem_ok(comm, src) ? (void *)dst : (void *)src);
        return GPUPORT_ERR_INVALID_ARG;
    }
    return GPUPORT_OK;
}

/* This side's regions against the chosen transport's region_ok: the same
 * text gpuport_mem_info shows, logged and sent to the peer. */
static gpuport_status_t regions_check(port_new_t *c, char *why, size_t len)
{
    gpuport_mem_t mems[2] = {c->src, c->dst};
    char text[GPUPORT_MEM_INFO_WHY];

    for (int as_dst = 0; as_dst < 2; as_dst++) {
        gpuport_mem_t m = mems[as_dst];
        if (!m || gpuport_region_carried(c->tc, &m->region, as_dst, text, sizeof(text)))
            continue;
        log_error("channel to rank %d: %s cannot carry the %s (%p, %llu bytes, %s memory): %s",
                  c->peer, c->ops->name, as_dst ? "destination" : "source", m->region.ptr,
                  (unsigned long long)m->region.size, gpuport_mem_kind_string(m->region.mem_kind),
                  text);
        /* the record's why is shorter than the text: the log has it whole */
        if (snprintf(why, len, "%s cannot carry its %s: %s", c->ops->name,
                     as_dst ? "destination" : "source", text) >= (int)len)
            why[len - 1] = '\0';
        return GPUPORT_ERR_NOT_SUPPORTED;
    }
    return GPUPORT_OK;
}

/* A memory channel's own conditions on this side: GPU mode, a source in
 * GPU memory (kernels load it), and a transport that lets kernels reach
 * the peer. Its destination is checked in agree, where both sides see
 * both. */
static gpuport_status_t memory_check(port_new_t *c, char *why, size_t len)
{
    char text[256];

    if (!c->comm->gpu)
        snprintf(text, sizeof(text), "memory channels need GPU mode, and this rank's "
                 "communicator is host-only (GPUPORT_GPU, a GPU, a build with CUDA)");
    else if (c->src && !gpuport_region_is_device(c->src->region.kind))
        snprintf(text, sizeof(text), "a memory channel's source is GPU memory (its kernels load "
                 "it), and this one is host memory");
    else if (!c->ops->kernel_dst_ok || !c->ops->chan_kernel_map)
        snprintf(text, sizeof(text), "kernels cannot store into memory reached over %s: memory "
                 "channels reach ranks of one host whose GPUs map each other's memory (the same "
                 "GPU, or peers over NVLink or PCIe)",
                 c->ops->name);
    else
        return GPUPORT_OK;
    log_error("%s to rank %d: %s", c->call, c->peer, text);
    /* the record's why is shorter than the text: the log has it whole */
    if (snprintf(why, len, "%s", text) >= (int)len)
        why[len - 1] = '\0';
    return GPUPORT_ERR_NOT_SUPPORTED;
}

/* This side's part before the handshake: its id, its transport and
 * connection, the handle, and the transport's data in the record. A
 * failure is carried into the handshake, which tells the peer. */
static gpuport_status_t prepare(port_new_t *c)
{
    gpuport_channel_rec_t *mine = &c->hs.mine;
    gpuport_status_t status, sel;

    status = chan_id_alloc(c->comm, &c->id);
    c->have_id = status == GPUPORT_OK;
    c->hs.id = c->id;
    /* Selection runs even when this side has already failed: a transport may
     * agree on reachability with the peer through the bootstrap (ib), and
     * the peer must not wait for an exchange this side skips. */
    sel = gpuport_transport_select(c->comm, c->peer,
                                   c->memory || is_device(c->src) || is_device(c->dst),
                                   &c->tc, mine->why, sizeof(mine->why));
    if (!status) {
        status = sel;
        c->ops = sel ? NULL : c->tc->ops;
    } else {
        c->tc = NULL;
        mine->why[0] = '\0'; /* the reason is this side's own failure */
    }
    if (!status)
        status = regions_check(c, mine->why, sizeof(mine->why));
    if (!status && c->memory)
        status = memory_check(c, mine->why, sizeof(mine->why));
    if (!status && (status = chan_conn_get(c->comm, c->peer, c->tc, &c->conn)) != GPUPORT_OK)
        snprintf(mine->why, sizeof(mine->why), "%s could not connect (its log says why)",
                 c->ops->name);
    if (!status && !(c->ch = calloc(1, sizeof(*c->ch))))
        status = GPUPORT_ERR_NO_MEMORY;
    /* the kind first: chan_prepare may prepare for port channels only */
    mine->chan_kind = c->memory ? GPUPORT_CHAN_KIND_MEMORY : GPUPORT_CHAN_KIND_PORT;
    if (!status && c->ops->chan_prepare)
        status = c->ops->chan_prepare(c->conn, c->id, c->src ? &c->src->region : NULL,
                                      c->dst ? &c->dst->region : NULL, mine);
    mine->transport = c->tc ? (uint32_t)c->tc->kind : 0;
    if (c->memory && c->comm->config.memory_signal == 0 &&
        gpuport_gpu_peer_atomics(c->comm, c->comm->procs[c->peer].gpu))
        mine->kind_flags |= GPUPORT_MC_ATOMICS;
    c->hs.pass_fds = c->ops && c->ops->pass_fds;
    return status;
}

/* ---- the port channel's part of the handshake (gpuport_chan_kind_t) ---- */

static gpuport_status_t port_agree(void *arg, const gpuport_channel_rec_t *mine,
                                   const gpuport_channel_rec_t *theirs)
{
    port_new_t *c = arg;
    char why[400]; /* a refusal names the memory to use instead: room for it */

    if (theirs->chan_kind != mine->chan_kind) {
        static const char *const kinds[] = {"a port", "a memory"};
        log_error("rank %d creates %s channel where this rank creates %s channel: both sides of a "
                  "channel call the same create (gpuport_channel_create or "
                  "gpuport_memory_channel_create)",
                  c->peer, kinds[theirs->chan_kind == GPUPORT_CHAN_KIND_MEMORY],
                  kinds[mine->chan_kind == GPUPORT_CHAN_KIND_MEMORY]);
        return GPUPORT_ERR_INVALID_ARG;
    }
    if (theirs->transport != mine->transport) {
        log_error("rank %d chose transport %s for this channel and this rank chose %s: set "
                  "GPUPORT_TRANSPORT the same on every rank",
                  c->peer, gpuport_transport_name((int)theirs->transport), c->ops->name);
        return GPUPORT_ERR_INVALID_CONFIG;
    }
    if (!c->memory)
        return GPUPORT_OK;
    /* both destinations, on both sides: both refuse alike */
    if (!c->ops->kernel_dst_ok(&theirs->dst, why, sizeof(why))) {
        log_error("%s to rank %d: this rank's kernels cannot store into rank %d's destination: "
                  "%s",
                  c->call, c->peer, c->peer, why);
        return GPUPORT_ERR_NOT_SUPPORTED;
    }
    if (!c->ops->kernel_dst_ok(&mine->dst, why, sizeof(why))) {
        log_error("%s to rank %d: rank %d's kernels cannot store into this rank's destination: "
                  "%s",
                  c->call, c->peer, c->peer, why);
        return GPUPORT_ERR_NOT_SUPPORTED;
    }
    return GPUPORT_OK;
}

/* The proxy's entry for the channel, and the channel's slots, as new. */
static gpuport_status_t port_setup(void *arg, const gpuport_channel_rec_t *theirs)
{
    port_new_t *c = arg;
    gpuport_comm_t comm = c->comm;
    uint32_t id = c->id;
    gpuport_pchan_t *pc = &comm->pchans[id];

    memset(pc, 0, sizeof(*pc));
    pc->tl.id = id;
    pc->tl.peer_id = theirs->channel_id;
    pc->tl.peer = c->peer;
    pc->tl.comm = comm;
    pc->tl.conn = c->conn;
    pc->tl.src = c->src ? c->src->region : none_region;
    pc->tl.local_dst = c->dst ? c->dst->region : none_region;
    pc->ops = c->ops;
    pc->kernel_stores = c->memory;
    pc->state = &comm->states[id];
    for (int f = 0; f < GPUPORT_NFIFOS; f++)
        atomic_store(&pc->state->flushed[f], 0);
    atomic_store(&pc->state->status, GPUPORT_OK);
    atomic_store(&pc->state->gave_up, 0);
    atomic_store(&comm->ctrl[id].value, 0);
    atomic_store(&comm->ctrl[id].peer_status, GPUPORT_OK);
    atomic_store(&comm->ctrl[id].peer_closed, 0);
    for (int i = 0; i < 5; i++)
        atomic_store(&comm->ctrl[id].tl_word[i], 0);
    c->pc = pc;
    return gpuport_gpu_channel_reset(comm, id);
}

static gpuport_status_t port_connect(void *arg, const gpuport_channel_rec_t *theirs,
                                     const gpuport_fdpiece_t *pieces, uint32_t npieces)
{
    port_new_t *c = arg;
    gpuport_status_t status;

    c->pc->tl.dst_pieces = pieces;
    c->pc->tl.dst_npieces = npieces;
    status = c->ops->chan_connect(&c->pc->tl, theirs);
    /* closed when this returns: chan_connect has mapped what it needed */
    c->pc->tl.dst_pieces = NULL;
    c->pc->tl.dst_npieces = 0;
    if (!status && c->memory) {
        status = c->ops->chan_kernel_map(&c->pc->tl, &c->view.dst_d, &c->view.sem_d);
        /* both sides decide alike: atomics only where both GPUs can */
        c->view.atomics = (c->hs.mine.kind_flags & theirs->kind_flags & GPUPORT_MC_ATOMICS) != 0;
    }
    return status;
}

static void port_undo(void *arg)
{
    port_new_t *c = arg;

    c->ops->chan_disconnect(&c->pc->tl);
    c->pc->ops = NULL;
}

static const gpuport_chan_kind_t port_kind = {
    .agree = port_agree,
    .setup = port_setup,
    .connect = port_connect,
    .undo = port_undo,
};

/* The rma ops (GET, ATOMIC_ADD, ACC_*) the channel's transport carries, as
 * gpuport_rma_check asks it, one bit (1u << op) each: kernels refuse the
 * others before they push (gpuport_device.h). Connected regions only. */
static uint32_t rma_carried(const gpuport_pchan_t *pc)
{
    uint32_t mask = 0;
    char why[320];

    if (!pc->ops->rma)
        return 0;
    for (uint32_t op = GPUPORT_OP_GET; op < GPUPORT_OP_MAX_; op++)
        if (gpuport_trigger_is_rma(op) &&
            (!pc->ops->rma_ok || pc->ops->rma_ok(&pc->tl, op, why, sizeof(why))))
            mask |= 1u << op;
    return mask;
}

/* Both sides connected: the handle is filled, holds its regions, and the
 * proxy takes the channel's entry. */
static void publish(port_new_t *c)
{
    gpuport_comm_t comm = c->comm;
    gpuport_channel_t ch = c->ch;
    gpuport_pchan_t *pc = c->pc;
    const gpuport_channel_rec_t *theirs = &c->hs.theirs;

    ch->magic = GPUPORT_CHAN_MAGIC;
    ch->src_mem = c->src;
    ch->dst_mem = c->dst;
    ch->comm = comm;
    ch->id = c->id;
    ch->peer = c->peer;
    ch->pchan = pc;
    ch->state = pc->state;
    ch->inbound = &comm->ctrl[c->id];
    ch->src_size = pc->tl.src.size;
    ch->dst_size = theirs->dst.size;
    ch->peer_same_host = comm->procs[c->peer].host_id == comm->procs[comm->rank].host_id;
    ch->rma_ops = rma_carried(pc);
    ch->dst_addr_mod8 = (uint32_t)(pc->tl.dst.rec.addr % 8); /* as gpuport_rma_check sees it */
    pthread_mutex_lock(&comm->lock);
    comm->chans[c->id] = ch;
    if (c->src)
        c->src->users++;
    if (c->dst)
        c->dst->users++;
    pthread_mutex_unlock(&comm->lock);
    atomic_store_explicit(&c->conn->used, 1, memory_order_release);
    atomic_store_explicit(&pc->active, 1, memory_order_release);
    log_info("channel %u to rank %d (its channel %u) over %s: source %s, %llu bytes; "
             "destination %s, %llu bytes; inbound destination %s, %llu bytes",
             c->id, c->peer, theirs->channel_id, c->ops->name, region_word(pc->tl.src.kind),
             (unsigned long long)ch->src_size, region_word(theirs->dst.kind),
             (unsigned long long)ch->dst_size, region_word(pc->tl.local_dst.kind),
             (unsigned long long)pc->tl.local_dst.size);
}

/* What prepare took, given back after a failed handshake. */
static void unprepare(port_new_t *c)
{
    free(c->ch);
    pthread_mutex_lock(&c->comm->lock);
    if (c->conn)
        chan_conn_put_locked(c->conn);
    if (c->have_id)
        chan_id_free_locked(c->comm, c->id);
    pthread_mutex_unlock(&c->comm->lock);
}

/* chan_create's steps once the two sides have met (c zeroed). */
static gpuport_status_t create_met(port_new_t *c, const char *call, gpuport_comm_t comm, int peer,
                                   gpuport_mem_t src, gpuport_mem_t dst, int memory,
                                   gpuport_status_t prior)
{
    gpuport_status_t status;

    c->call = call;
    c->memory = memory;
    c->comm = comm;
    c->peer = peer;
    c->src = src;
    c->dst = dst;
    chan_shake_begin(&c->hs, comm, peer);
    c->hs.dst = dst;
    c->hs.kind = &port_kind;
    c->hs.arg = c;
    status = prepare(c);
    if (!status && prior) {
        status = prior; /* the caller's failure, told to the peer */
        snprintf(c->hs.mine.why, sizeof(c->hs.mine.why),
                 "%s failed on this side (its log says why)", call);
    }
    status = chan_handshake(&c->hs, status);
    if (status) {
        unprepare(c);
        return status;
    }
    publish(c);
    return GPUPORT_OK;
}

gpuport_status_t chan_create(const char *call, const char *out_name, gpuport_comm_t comm,
                             int peer, gpuport_mem_t src, gpuport_mem_t dst, int memory,
                             gpuport_status_t prior, const void *out_p,
                             gpuport_channel_t *channel_p, chan_kernel_view_t *view_p)
{
    port_new_t c;
    gpuport_bs_session_t session;
    char awaited[160];
    gpuport_status_t status = chan_check_args(call, out_name, comm, peer, src, dst, out_p);

    if (status)
        return status;
    snprintf(awaited, sizeof(awaited), "rank %d to create its side of this channel (%s naming "
             "rank %d)", peer, memory ? "gpuport_memory_channel_create" :
             "gpuport_channel_create or gpuport_channel_create_all", comm->rank);
    /* first, since the transports' selection may exchange with the peer */
    status = gpuport_bs_meet(&session, &comm->bs, peer, call, comm->config.timeout_ms,
                             &comm->bs_attempts[peer], awaited);
    if (status)
        return status;
    comm->session = &session;
    memset(&c, 0, sizeof(c));
    status = create_met(&c, call, comm, peer, src, dst, memory, prior);
    comm->session = NULL;
    if (status)
        return status;
    *channel_p = c.ch;
    if (memory)
        *view_p = c.view;
    return GPUPORT_OK;
}

gpuport_status_t gpuport_channel_create(gpuport_comm_t comm, int peer, gpuport_mem_t src,
                                        gpuport_mem_t dst, gpuport_channel_t *channel_p)
{
    return chan_create("gpuport_channel_create", "channel_p", comm, peer, src, dst, 0, GPUPORT_OK,
                       channel_p, channel_p, NULL);
}
