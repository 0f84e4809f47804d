/*
 * Port channels, application side: creation (a pairwise exchange of channel
 * records through the bootstrap), the operations that push triggers into the
 * FIFO, and the waits on what the proxy publishes.
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_CHANNEL
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap.h"
#include "internal.h"

#define TAG_CHANNEL 0x4750
#define TAG_CHANNEL_ACK 0x4751
/* how often a long wait checks that a same-host peer still exists */
#define PEER_CHECK_NS (20 * 1000 * 1000ull)

static gpuport_status_t id_alloc(gpuport_comm_t comm, uint32_t *id_p)
{
    gpuport_status_t status = GPUPORT_ERR_NO_RESOURCE;

    pthread_mutex_lock(&comm->lock);
    for (uint32_t i = 0; i < comm->config.max_channels; i++) {
        if (!comm->id_used[i]) {
            comm->id_used[i] = 1;
            *id_p = i;
            status = GPUPORT_OK;
            break;
        }
    }
    pthread_mutex_unlock(&comm->lock);
    if (status)
        log_error("all %u channels of this communicator are in use (raise GPUPORT_MAX_CHANNELS)",
                  comm->config.max_channels);
    return status;
}

static void id_free(gpuport_comm_t comm, uint32_t id)
{
    pthread_mutex_lock(&comm->lock);
    comm->id_used[id] = 0;
    pthread_mutex_unlock(&comm->lock);
}

static gpuport_status_t conn_get(gpuport_comm_t comm, int peer, gpuport_tl_comm_t *tc,
                                 gpuport_conn_t **conn_p)
{
    const gpuport_transport_ops_t *ops = tc->ops;
    gpuport_conn_t *conn;
    gpuport_status_t status = GPUPORT_OK;

    pthread_mutex_lock(&comm->lock);
    conn = comm->conns[peer];
    if (conn && conn->tl != tc) {
        log_error("rank %d is already connected over %s; GPUPORT_TRANSPORT changed to %s", peer,
                  conn->tl->ops->name, ops->name);
        status = GPUPORT_ERR_INVALID_CONFIG;
    } else if (!conn) {
        conn = calloc(1, sizeof(*conn));
        if (!conn) {
            status = GPUPORT_ERR_NO_MEMORY;
        } else {
            conn->comm = comm;
            conn->peer = peer;
            conn->tl = tc;
            status = ops->conn_open(conn);
            if (status) {
                free(conn);
                conn = NULL;
            } else {
                comm->conns[peer] = conn;
                if (ops->progress) {
                    int n = atomic_load_explicit(&comm->npconns, memory_order_relaxed);
                    conn->pindex = n;
                    comm->pconns[n] = conn;
                    atomic_store_explicit(&comm->npconns, n + 1, memory_order_release);
                }
            }
        }
    }
    if (!status)
        conn->refs++;
    pthread_mutex_unlock(&comm->lock);
    if (!status)
        *conn_p = conn;
    return status;
}

static int mem_ok(gpuport_comm_t comm, gpuport_mem_t mem)
{
    return mem == NULL || (mem->magic == GPUPORT_MEM_MAGIC && mem->comm == comm);
}

/* A handle from gpuport_channel_create not yet destroyed. */
static int chan_ok(gpuport_channel_t ch)
{
    return ch && ch->magic == GPUPORT_CHAN_MAGIC;
}

static gpuport_status_t stale(const char *call, gpuport_channel_t ch)
{
    log_error("%s: %p is not a live channel (NULL, destroyed already, or not a channel)", call,
              (void *)ch);
    return GPUPORT_ERR_INVALID_ARG;
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
    default: return "?";
    }
}

static const gpuport_region_t none_region = {.kind = GPUPORT_REGION_NONE, .alloc_fd = -1};

/* The descriptors of both sides' destinations, for a transport that maps
 * the peer's (pass_fds): both sides take part whenever either has some to
 * give, and both see from the records whether it can work, so that neither
 * waits for an exchange the other will not make. */
static gpuport_status_t pass_fds(gpuport_comm_t comm, int peer, uint32_t id, gpuport_mem_t dst,
                                 const gpuport_channel_rec_t *mine,
                                 const gpuport_channel_rec_t *theirs, gpuport_fdpiece_t **pieces_p,
                                 uint32_t *n_p)
{
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
    tag = comm->rank < peer ? (uint64_t)id << 32 | theirs->channel_id
                            : (uint64_t)theirs->channel_id << 32 | id;
    st = gpuport_fdsock_exchange(&comm->fdsock, &fp, tag, dst ? dst->region.pieces : NULL,
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

gpuport_status_t gpuport_channel_create(gpuport_comm_t comm, int peer, gpuport_mem_t src,
                                        gpuport_mem_t dst, gpuport_channel_t *channel_p)
{
    gpuport_channel_rec_t mine, theirs;
    const gpuport_transport_ops_t *ops = NULL;
    gpuport_tl_comm_t *tc = NULL;
    gpuport_conn_t *conn = NULL;
    gpuport_channel_t ch = NULL;
    gpuport_pchan_t *pc;
    gpuport_status_t status, peer_status;
    int32_t ack, peer_ack;
    uint32_t id = 0, npieces = 0;
    gpuport_fdpiece_t *pieces = NULL;
    int have_id = 0;

    if (!gpuport_comm_live(comm)) {
        log_error("gpuport_channel_create: comm %p is not a live communicator", (void *)comm);
        return GPUPORT_ERR_INVALID_ARG;
    }
    if (!channel_p) {
        log_error("gpuport_channel_create: channel_p is NULL");
        return GPUPORT_ERR_INVALID_ARG;
    }
    if (peer < 0 || peer >= comm->size) {
        log_error("gpuport_channel_create: peer %d is not a rank of this communicator (0..%d)",
                  peer, comm->size - 1);
        return GPUPORT_ERR_INVALID_ARG;
    }
    if (!mem_ok(comm, src) || !mem_ok(comm, dst)) {
        log_error("gpuport_channel_create: %s %p is not a live registration of this "
                  "communicator (gpuport_mem_register, not yet deregistered) or NULL",
                  mem_ok(comm, src) ? "dst" : "src", mem_ok(comm, src) ? (void *)dst : (void *)src);
        return GPUPORT_ERR_INVALID_ARG;
    }
    /* Both sides always reach the exchange, carrying their local result, so
     * that a failure on one side fails the other too instead of hanging it. */
    memset(&mine, 0, sizeof(mine));
    gpuport_record_header_init(&mine.hdr, GPUPORT_REC_CHANNEL, sizeof(mine));
    status = id_alloc(comm, &id);
    have_id = status == GPUPORT_OK;
    /* Selection runs even when this side has already failed: a transport may
     * agree on reachability with the peer through the bootstrap (ib), and
     * the peer must not wait for an exchange this side skips. */
    {
        gpuport_status_t sel = gpuport_transport_select(comm, peer, is_device(src) || is_device(dst),
                                                        &tc, mine.why, sizeof(mine.why));
        if (!status) {
            status = sel;
            ops = sel ? NULL : tc->ops;
        } else {
            tc = NULL;
            mine.why[0] = '\0'; /* the reason is this side's own failure */
        }
    }
    if (!status)
        status = conn_get(comm, peer, tc, &conn);
    if (!status && !(ch = calloc(1, sizeof(*ch))))
        status = GPUPORT_ERR_NO_MEMORY;
    if (!status && ops->chan_prepare)
        status = ops->chan_prepare(conn, id, src ? &src->region : NULL,
                                   dst ? &dst->region : NULL, &mine);
    if (status && !mine.why[0])
        snprintf(mine.why, sizeof(mine.why), "%s", gpuport_status_string(status));
    mine.status = status;
    mine.transport = tc ? (uint32_t)tc->kind : 0;
    mine.channel_id = status ? 0 : id;
    mine.fdsock_ok = comm->fdsock.lfd >= 0;
    if (dst)
        mine.dst = dst->rec;

    peer_status =
        gpuport_bootstrap_exchange(&comm->bs, peer, TAG_CHANNEL, &mine, &theirs, sizeof(theirs));
    if (peer_status)
        goto fail;
    peer_status = gpuport_record_check(&theirs.hdr, GPUPORT_REC_CHANNEL, sizeof(theirs), peer);
    if (peer_status)
        goto fail;
    if (status)
        goto fail;
    if (theirs.status) {
        log_error("rank %d could not create its side of the channel: %.*s", peer,
                  (int)sizeof(theirs.why), theirs.why);
        status = GPUPORT_ERR_PEER;
        goto fail;
    }
    if (theirs.transport != mine.transport) {
        log_error("rank %d chose transport %s for this channel and this rank chose %s: set "
                  "GPUPORT_TRANSPORT the same on every rank",
                  peer, gpuport_transport_name((int)theirs.transport), ops->name);
        status = GPUPORT_ERR_INVALID_CONFIG;
        goto fail;
    }

    pc = &comm->pchans[id];
    memset(pc, 0, sizeof(*pc));
    pc->tl.id = id;
    pc->tl.peer_id = theirs.channel_id;
    pc->tl.peer = peer;
    pc->tl.comm = comm;
    pc->tl.conn = conn;
    pc->tl.src = src ? src->region : none_region;
    pc->tl.local_dst = dst ? dst->region : none_region;
    pc->ops = ops;
    pc->state = &comm->states[id];
    for (int f = 0; f < GPUPORT_NFIFOS; f++)
        atomic_store(&pc->state->flushed[f], 0);
    atomic_store(&pc->state->status, GPUPORT_OK);
    atomic_store(&comm->ctrl[id].value, 0);
    atomic_store(&comm->ctrl[id].peer_status, GPUPORT_OK);
    atomic_store(&comm->ctrl[id].peer_closed, 0);
    status = gpuport_gpu_channel_reset(comm, id);
    if (!status && ops->pass_fds)
        status = pass_fds(comm, peer, id, dst, &mine, &theirs, &pieces, &npieces);
    if (!status) {
        pc->tl.dst_pieces = pieces;
        pc->tl.dst_npieces = npieces;
        status = ops->chan_connect(&pc->tl, &theirs);
    }
    /* what chan_connect needed it has mapped */
    gpuport_fdpieces_free(pieces, npieces);
    pc->tl.dst_pieces = NULL;
    pc->tl.dst_npieces = 0;
    /* The second exchange makes both sides agree that both connected. */
    ack = status;
    peer_status =
        gpuport_bootstrap_exchange(&comm->bs, peer, TAG_CHANNEL_ACK, &ack, &peer_ack, sizeof(ack));
    if (!status && !peer_status && peer_ack) {
        log_error("rank %d could not connect its side of the channel (%s)", peer,
                  gpuport_status_string((gpuport_status_t)peer_ack));
        status = GPUPORT_ERR_PEER;
    }
    if (status || peer_status) {
        ops->chan_disconnect(&pc->tl);
        pc->ops = NULL;
        goto fail;
    }

    ch->magic = GPUPORT_CHAN_MAGIC;
    ch->src_mem = src;
    ch->dst_mem = dst;
    ch->comm = comm;
    ch->id = id;
    ch->peer = peer;
    ch->pchan = pc;
    ch->state = pc->state;
    ch->inbound = &comm->ctrl[id];
    ch->src_size = pc->tl.src.size;
    ch->dst_size = theirs.dst.size;
    ch->peer_same_host = comm->procs[peer].host_id == comm->procs[comm->rank].host_id;
    pthread_mutex_lock(&comm->lock);
    comm->chans[id] = ch;
    if (src)
        src->users++;
    if (dst)
        dst->users++;
    pthread_mutex_unlock(&comm->lock);
    atomic_store_explicit(&conn->used, 1, memory_order_release);
    atomic_store_explicit(&pc->active, 1, memory_order_release);
    log_info("channel %u to rank %d (its channel %u) over %s: source %s, %llu bytes; "
             "destination %s, %llu bytes; inbound destination %s, %llu bytes",
             id, peer, theirs.channel_id, ops->name, region_word(pc->tl.src.kind),
             (unsigned long long)ch->src_size, region_word(theirs.dst.kind),
             (unsigned long long)ch->dst_size, region_word(pc->tl.local_dst.kind),
             (unsigned long long)pc->tl.local_dst.size);
    *channel_p = ch;
    return GPUPORT_OK;

fail:
    free(ch);
    if (conn) {
        pthread_mutex_lock(&comm->lock);
        conn->refs--;
        pthread_mutex_unlock(&comm->lock);
    }
    if (have_id)
        id_free(comm, id);
    return status ? status : peer_status;
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
    if (gpuport_trigger_needs_ext(src_off, dst_off, size))
        gpuport_trigger_encode_ext(&t[n++], ch->id, src_off, dst_off, size);
    gpuport_trigger_encode(&t[n++], op, ch->id, src_off, dst_off, size);
    status = gpuport_fifo_push(&comm->fifo, t, n, comm->timeout_ns ? comm->timeout_ns : UINT64_MAX,
                               pos_p);
    if (status == GPUPORT_OK)
        gpuport_waker_poke(&comm->proxy.waker); /* a sleeping proxy takes it at once */
    if (status == GPUPORT_ERR_TIMEOUT)
        log_error("channel %u: the FIFO stayed full for %llu ms; is the proxy thread stuck?",
                  ch->id, (unsigned long long)comm->config.timeout_ms);
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
    gpuport_trigger_encode_value(&t, op, ch->id, dst_off, value);
    status = gpuport_fifo_push(&comm->fifo, &t, 1,
                               comm->timeout_ns ? comm->timeout_ns : UINT64_MAX, pos_p);
    if (status == GPUPORT_OK)
        gpuport_waker_poke(&comm->proxy.waker);
    if (status == GPUPORT_ERR_TIMEOUT)
        log_error("channel %u: the FIFO stayed full for %llu ms; is the proxy thread stuck?",
                  ch->id, (unsigned long long)comm->config.timeout_ms);
    return status;
}

static gpuport_status_t check_put(gpuport_channel_t ch, uint64_t dst_off, uint64_t src_off,
                                  uint64_t size)
{
    if (size > GPUPORT_TRIGGER_SIZE_MAX || src_off > ch->src_size ||
        size > ch->src_size - src_off || dst_off > ch->dst_size || size > ch->dst_size - dst_off) {
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

static gpuport_status_t channel_state(gpuport_channel_t ch)
{
    return (gpuport_status_t)atomic_load_explicit(&ch->state->status, memory_order_acquire);
}

/* The same rule as a put's (a value is an 8-byte put), plus alignment. */
static gpuport_status_t check_value(gpuport_channel_t ch, uint64_t dst_off)
{
    if (dst_off % 8) {
        log_error("channel %u (to rank %d): put_value at destination offset %llu, which is not "
                  "a multiple of 8; nothing was queued",
                  ch->id, ch->peer, (unsigned long long)dst_off);
        return GPUPORT_ERR_INVALID_ARG;
    }
    if (dst_off > GPUPORT_TRIGGER_VALUE_OFF_MAX || dst_off > ch->dst_size ||
        ch->dst_size - dst_off < 8) {
        log_error("channel %u (to rank %d): put_value at destination offset %llu does not fit "
                  "(destination region %llu bytes); nothing was queued",
                  ch->id, ch->peer, (unsigned long long)dst_off,
                  (unsigned long long)ch->dst_size);
        return GPUPORT_ERR_OUT_OF_RANGE;
    }
    return GPUPORT_OK;
}

/* What every operation checks first: a live handle, a healthy channel, a
 * peer that has not closed or failed its side. */
static gpuport_status_t usable(gpuport_channel_t ch)
{
    gpuport_status_t status;

    if (!chan_ok(ch))
        return stale("gpuport_channel_put/signal", ch);
    status = channel_state(ch);
    if (status)
        return status;
    if (atomic_load_explicit(&ch->inbound->peer_status, memory_order_acquire) != GPUPORT_OK) {
        int32_t ok = GPUPORT_OK;
        log_error("channel %u (to rank %d): rank %d has closed or failed its side; nothing was "
                  "queued, and the channel is failed",
                  ch->id, ch->peer, ch->peer);
        /* as the proxy does with an operation it finds after the close */
        atomic_compare_exchange_strong(&ch->state->status, &ok, GPUPORT_ERR_PEER);
        return GPUPORT_ERR_PEER;
    }
    return GPUPORT_OK;
}

static gpuport_status_t push_op(gpuport_channel_t ch, uint32_t op, uint64_t dst_off,
                                uint64_t src_off, uint64_t size)
{
    uint64_t pos;
    gpuport_status_t status = usable(ch);

    if (status)
        return status;
    if (op == GPUPORT_OP_PUT || op == GPUPORT_OP_PUT_SIGNAL) {
        status = check_put(ch, dst_off, src_off, size);
        if (status)
            return status;
    }
    return gpuport_channel_push(ch, op, dst_off, src_off, size, &pos);
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
    uint64_t pos;
    gpuport_status_t status = usable(ch);

    if (!status)
        status = check_value(ch, dst_off);
    if (status)
        return status;
    return gpuport_channel_push_value(ch, op, dst_off, value, &pos);
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

static gpuport_status_t timed_out(gpuport_channel_t ch, const char *what)
{
    log_error("channel %u (to rank %d): %s did not complete within GPUPORT_TIMEOUT_MS=%llu", ch->id,
              ch->peer, what, (unsigned long long)ch->comm->config.timeout_ms);
    return GPUPORT_ERR_TIMEOUT;
}

/* Waits until everything before FIFO position pos of ch is complete. */
static gpuport_status_t flushed_to(gpuport_channel_t ch, uint64_t pos)
{
    uint64_t deadline;
    uint32_t iter = 0, polls = 0;

    deadline = gpuport_deadline(ch->comm->timeout_ns);
    while ((atomic_load_explicit(&ch->state->flushed[GPUPORT_FIFO_HOST], memory_order_acquire) &
            ~GPUPORT_FLUSHED_FAILED) <= pos) {
        if ((iter > GPUPORT_SPIN_POLLS || (++polls & 1023) == 0) &&
            gpuport_deadline_passed(deadline))
            return timed_out(ch, "flush");
        gpuport_wait_backoff(&iter);
    }
    return GPUPORT_OK;
}

gpuport_status_t gpuport_channel_flush(gpuport_channel_t ch)
{
    uint64_t pos;
    gpuport_status_t status;

    if (!chan_ok(ch))
        return stale("gpuport_channel_flush", ch);
    status = channel_state(ch);
    if (status)
        return status;
    status = gpuport_channel_push(ch, GPUPORT_OP_FLUSH, 0, 0, 0, &pos);
    if (!status)
        status = flushed_to(ch, pos);
    return status ? status : channel_state(ch);
}

/* Takes one signal if one is there: 1 taken, 0 none, <0 error. */
static int take_one(gpuport_channel_t ch)
{
    uint64_t consumed = atomic_load_explicit(&ch->consumed, memory_order_relaxed);

    while (atomic_load_explicit(&ch->inbound->value, memory_order_acquire) > consumed) {
        if (atomic_compare_exchange_weak_explicit(&ch->consumed, &consumed, consumed + 1,
                                                  memory_order_acq_rel, memory_order_relaxed))
            return 1;
    }
    return 0;
}

static int take_signal(gpuport_channel_t ch)
{
    int32_t peer_status;

    if (take_one(ch))
        return 1;
    peer_status = atomic_load_explicit(&ch->inbound->peer_status, memory_order_acquire);
    /* the peer's word comes after its last signal: one that arrived since
     * the look above is still this wait's */
    if (peer_status && take_one(ch))
        return 1;
    if (peer_status) {
        log_error("channel %u: rank %d's side of the channel failed (%s); no more signals will "
                  "come",
                  ch->id, ch->peer, gpuport_status_string((gpuport_status_t)peer_status));
        return GPUPORT_ERR_PEER;
    }
    return 0;
}

gpuport_status_t gpuport_channel_poll(gpuport_channel_t ch, int *ready_p)
{
    int rc;

    if (!chan_ok(ch))
        return stale("gpuport_channel_poll", ch);
    if (!ready_p) {
        log_error("gpuport_channel_poll: ready_p is NULL");
        return GPUPORT_ERR_INVALID_ARG;
    }
    rc = take_signal(ch);
    if (rc < 0)
        return (gpuport_status_t)rc;
    *ready_p = rc;
    return GPUPORT_OK;
}

gpuport_status_t gpuport_channel_wait(gpuport_channel_t ch)
{
    uint64_t next_check, deadline;
    uint32_t iter = 0, polls = 0;
    int rc;

    if (!chan_ok(ch))
        return stale("gpuport_channel_wait", ch);
    rc = take_signal(ch);
    if (rc)
        return rc > 0 ? GPUPORT_OK : (gpuport_status_t)rc;
    deadline = gpuport_deadline(ch->comm->timeout_ns);
    next_check = gpuport_now_ns() + PEER_CHECK_NS;
    for (;;) {
        rc = take_signal(ch);
        if (rc)
            return rc > 0 ? GPUPORT_OK : (gpuport_status_t)rc;
        if (iter > GPUPORT_SPIN_POLLS || (++polls & 1023) == 0) {
            uint64_t now = gpuport_now_ns();
            if (deadline != UINT64_MAX && now > deadline)
                return timed_out(ch, "wait for the peer's signal");
            if (now > next_check) {
                next_check = now + PEER_CHECK_NS;
                int pid = ch->comm->procs[ch->peer].pid;
                if (ch->peer_same_host && !gpuport_pid_alive(pid)) {
                    int32_t ok = GPUPORT_OK;
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
        gpuport_wait_backoff(&iter);
    }
}

gpuport_status_t gpuport_channel_status(gpuport_channel_t ch)
{
    return chan_ok(ch) ? channel_state(ch) : stale("gpuport_channel_status", ch);
}

const char *gpuport_channel_transport(gpuport_channel_t ch)
{
    return chan_ok(ch) && ch->pchan->ops ? ch->pchan->ops->name : "none";
}

/* 1 once the peer can write nothing more into this rank's memory for the
 * channel: where it writes directly (remote_slot: same host) its promise
 * that its side is closed and drained; else its side has failed or closed,
 * so its later operations fail (this rank's receiver or NIC is what writes
 * here, and stops with the channel); or it has exited. */
static int peer_done(gpuport_channel_t ch)
{
    if (ch->pchan->tl.remote_slot ? atomic_load_explicit(&ch->inbound->peer_closed,
                                                         memory_order_acquire)
                                  : atomic_load_explicit(&ch->inbound->peer_status,
                                                         memory_order_acquire) != GPUPORT_OK)
        return 1;
    if (atomic_load_explicit(&ch->pchan->tl.conn->broken, memory_order_acquire))
        return 1;
    return ch->peer_same_host && !gpuport_pid_alive(ch->comm->procs[ch->peer].pid);
}

/* This side is closed and drained (its proxy has promised the peer so):
 * wait for the peer's answer. */
static gpuport_status_t await_peer(gpuport_channel_t ch, uint64_t deadline)
{
    uint32_t iter = 0;

    while (!peer_done(ch)) {
        if (gpuport_deadline_passed(deadline))
            return GPUPORT_ERR_TIMEOUT;
        if (gpuport_wait_backoff(&iter))
            usleep(50);
    }
    return GPUPORT_OK;
}

/* Takes the channel's entry away; the handle joins the dead ones. */
static void release(gpuport_channel_t ch)
{
    gpuport_channel_t old = NULL;
    gpuport_comm_t comm = ch->comm;

    atomic_store_explicit(&ch->pchan->active, 0, memory_order_release);
    /* the proxy may still be reading the entry (its periodic scan): the
     * entry is undone and its id reused only once it has moved on */
    gpuport_proxy_quiet(comm);
    ch->pchan->ops->chan_disconnect(&ch->pchan->tl);
    ch->pchan->ops = NULL;
    pthread_mutex_lock(&comm->lock);
    ch->pchan->tl.conn->refs--;
    if (ch->src_mem)
        ch->src_mem->users--;
    if (ch->dst_mem)
        ch->dst_mem->users--;
    comm->chans[ch->id] = NULL;
    comm->id_used[ch->id] = 0;
    ch->magic = 0;
    ch->next_dead = NULL;
    if (comm->dead_chans_last)
        comm->dead_chans_last->next_dead = ch;
    else
        comm->dead_chans = ch;
    comm->dead_chans_last = ch;
    if (++comm->ndead_chans > GPUPORT_DEAD_KEEP) {
        old = comm->dead_chans;
        comm->dead_chans = old->next_dead;
        comm->ndead_chans--;
    }
    pthread_mutex_unlock(&comm->lock);
    free(old);
}

/* Destroy is pairwise-safe: this side tells the peer (in order behind its
 * own operations), drains, and waits until the peer can write nothing more
 * into this rank's regions, so that they may be deregistered and freed
 * once this returns; the peer's later operations on the channel fail with
 * GPUPORT_ERR_PEER. */
gpuport_status_t gpuport_channel_destroy(gpuport_channel_t ch)
{
    gpuport_comm_t comm;
    gpuport_status_t status = GPUPORT_OK;
    uint64_t pos, deadline;

    if (!chan_ok(ch))
        return stale("gpuport_channel_destroy", ch);
    comm = ch->comm;
    deadline = gpuport_deadline(comm->timeout_ns);
    if (!atomic_load(&comm->proxy.stop)) {
        /* a failed channel carries out nothing, but what it posted earlier
         * may still be moving: the flush waits for that too */
        status = gpuport_channel_push(ch, GPUPORT_OP_CLOSE, 0, 0, 0, &pos);
        if (!status)
            status = gpuport_channel_push(ch, GPUPORT_OP_FLUSH, 0, 0, 0, &pos);
        if (!status)
            status = flushed_to(ch, pos);
        if (!status)
            status = await_peer(ch, deadline);
    }
    if (status == GPUPORT_ERR_TIMEOUT) {
        log_error("channel %u: rank %d did not confirm within GPUPORT_TIMEOUT_MS=%llu that its "
                  "side is closed and drained; the channel is kept (its regions stay "
                  "registered) until the communicator is destroyed",
                  ch->id, ch->peer, (unsigned long long)comm->config.timeout_ms);
        return status;
    }
    release(ch);
    return GPUPORT_OK;
}

void gpuport_channels_close_all(gpuport_comm_t comm)
{
    for (uint32_t i = 0; i < comm->config.max_channels; i++) {
        gpuport_channel_t ch = comm->chans[i];
        uint64_t pos;
        if (ch && atomic_load_explicit(&ch->pchan->active, memory_order_acquire))
            gpuport_channel_push(ch, GPUPORT_OP_CLOSE, 0, 0, 0, &pos);
    }
}

void gpuport_channels_await_peers(gpuport_comm_t comm)
{
    uint64_t deadline = gpuport_deadline(comm->timeout_ns);
    int late = 0;

    for (uint32_t i = 0; i < comm->config.max_channels; i++) {
        gpuport_channel_t ch = comm->chans[i];
        /* the network transports' goodbye is the proxy's (quiesce) */
        if (!ch || !ch->pchan->tl.remote_slot)
            continue;
        if (!late && await_peer(ch, deadline) != GPUPORT_OK) {
            late = 1;
            log_warn("rank %d did not confirm within GPUPORT_TIMEOUT_MS=%llu that it stopped "
                     "writing into this rank's memory (channel %u; it has not destroyed its "
                     "communicator or channel yet); releasing anyway",
                     ch->peer, (unsigned long long)comm->config.timeout_ms, ch->id);
        }
    }
}
