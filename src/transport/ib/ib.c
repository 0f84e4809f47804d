/*
 * ib transport: port channels over InfiniBand or RoCE verbs. One RC QP per
 * pair of ranks (a rank's channels to itself use a QP connected to itself),
 * set up on the application thread at the first channel and then driven
 * only by the proxy thread, without blocking:
 *
 *   put     RDMA WRITE from the registered source into the peer's
 *           registered destination, in pieces no larger than the port's
 *           largest message (2^31 at most);
 *   put_value an RDMA WRITE of the 8 bytes, inline in the request (from a
 *           registered scratch slot where the provider takes no inline data);
 *   signal  atomic FETCH_AND_ADD of n (the signals the proxy folded into
 *           one) on the peer's semaphore (its control segment's slot), or,
 *           where either device has no atomics, an RDMA WRITE of the
 *           channel's new signal count;
 *   get, atomic_add, accumulate  RDMA READ into the source, fetch-and-adds
 *           into the peer's destination (ib_rma.c);
 *   flush   the core's counters: an operation completes when its last
 *           work request completes (every one is signaled);
 *   receive nothing: the peer's NIC writes this rank's memory.
 *
 * Order. put, put_value and signal only queue the operation (ib_sendq);
 * progress() posts them in issue order, as many as the send queue holds,
 * and reads the CQ with ibv_poll_cq. A signal needs no IBV_SEND_FENCE after the
 * writes before it: an RC QP's requests are executed at the responder in
 * the order they were posted (InfiniBand Architecture Specification vol. 1,
 * 9.5 "Transaction ordering"), so the atomic or the write of the count is
 * applied after the data of every earlier write. The fence indicator only
 * holds a request until earlier RDMA READs and atomics have *completed*,
 * because their responses land in local memory that a later request might
 * read (rdmamojo.com, "Fence", 2013-12-06, and ibv_post_send(3)); this
 * transport never reads an atomic's result, and sets it on the first
 * request after a get's RDMA READ (ib.h, the send queue), so that what
 * follows a get waits for its bytes. Nor do the registrations use relaxed
 * ordering (ib_mr.c).
 *
 * A work request that fails (or a post that is refused) breaks the
 * connection: every channel on it fails on this side, with the completion
 * status text, and what was in flight completes with the error. The peer
 * learns of it through its own QP's errors (it is connected to a QP in the
 * error state) or through report_fail's write to its channel's
 * peer_status while the QP still works.
 *
 * Here: reachability, connection set-up and channels (application thread)
 * and the table of operations. The proxy thread's side (queueing the
 * operations, posting, completions, a connection's failure) is ib_proxy.c.
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_TL(GPUPORT_TL_KIND_IB)
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "transport/ib/ib_priv.h"

#define SQ_DEPTH 128     /* work requests in the QP's send queue (and CQ entries) */
#define OPS 1024         /* operations queued per connection, posted or not */

static gpuport_status_t conn_broken(const ib_conn_t *c)
{
    return __atomic_load_n(&c->broken, __ATOMIC_ACQUIRE);
}

static void gid_text(const uint8_t *gid, char *buf, size_t len)
{
    if (!inet_ntop(AF_INET6, gid, buf, (socklen_t)len))
        snprintf(buf, len, "?");
}

static int ib_reachable(gpuport_tl_comm_t *tl, int peer, char *why, size_t len)
{
    gpuport_comm_t comm = tl->comm;
    int other = 0;
    const gpuport_conn_t *conn = gpuport_tl_conn_find(tl, peer, &other);
    ib_reach_rec_t mine, theirs;
    char local[512];
    int ll = IB_LINK_LAYER_IB, usable, agreed;
    gpuport_status_t st;

    if (conn) {
        gpuport_status_t broken = conn_broken(conn->priv);
        if (broken) {
            snprintf(why, len, "the ib connection to rank %d has failed (%s)", peer,
                     gpuport_status_string(broken));
            return 0;
        }
        return 1;
    }
    usable = ib_dev_probe(comm, &ll, local, sizeof(local)) == GPUPORT_OK;
    if (other) {
        /* connected over another transport, on both sides: nothing to agree */
        snprintf(why, len, "%s", local);
        return usable;
    }
    /* Both ranks must take the same decision, or one would wait in
     * conn_open's exchange while the other has moved on: each tells the
     * other whether it has a port. */
    ib_reach_pack(&mine, usable, ll, local);
    st = gpuport_tl_exchange(comm, peer, IB_TAG_REACH, &mine, &theirs, sizeof(theirs));
    if (st) {
        snprintf(why, len, "the bootstrap exchange with rank %d failed (%s)", peer,
                 gpuport_status_string(st));
        return 0;
    }
    agreed = ib_reach_agree(&mine, &theirs, sizeof(theirs), peer, why, len);
    if (!usable)
        snprintf(why, len, "%s", local);
    return agreed;
}

/* ---- connection set-up (application thread, under comm->lock) ---- */

static void conn_free(ib_conn_t *c)
{
    int rc;

    if (c->qp && (rc = IBV(ibv_destroy_qp)(c->qp)) != 0)
        log_warn("ibv_destroy_qp(qpn 0x%x) failed: %s", c->qp->qp_num, strerror(ib_err(rc)));
    if (c->cq && (rc = IBV(ibv_destroy_cq)(c->cq)) != 0)
        log_warn("ibv_destroy_cq failed: %s", strerror(ib_err(rc)));
    if (c->scratch_mr && (rc = IBV(ibv_dereg_mr)(c->scratch_mr)) != 0)
        log_warn("ibv_dereg_mr(scratch) failed: %s", strerror(ib_err(rc)));
    free(c->scratch);
    ib_sendq_fini(&c->q);
    if (c->ic)
        ib_comm_release(c->ic);
    free(c);
}

static int min_int(int a, int b)
{
    return a < b ? a : b;
}

/* The RC QP on c->cq. put_value's 8 bytes go inline, in the request itself;
 * a provider that refuses inline data gets a QP without, and the value goes
 * from the scratch slot instead. */
static gpuport_status_t qp_create(ib_conn_t *c, const ib_dev_t *dev, int depth)
{
    struct ibv_qp_init_attr ia;
    char what[200];

    memset(&ia, 0, sizeof(ia));
    ia.send_cq = c->cq;
    ia.recv_cq = c->cq;
    ia.qp_type = IBV_QPT_RC;
    ia.sq_sig_all = 0;
    ia.cap.max_send_wr = (uint32_t)depth;
    ia.cap.max_recv_wr = 1; /* nothing is received: RDMA writes use no receive */
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    ia.cap.max_inline_data = 8;
    errno = 0;
    c->qp = IBV(ibv_create_qp)(c->ic->pd, &ia);
    c->inline_ok = c->qp != NULL;
    if (!c->qp) {
        ia.cap.max_inline_data = 0;
        errno = 0;
        c->qp = IBV(ibv_create_qp)(c->ic->pd, &ia);
        if (c->qp)
            log_info("%s takes no inline data in an RC QP: put_value writes from a "
                     "registered buffer", dev->name);
    }
    if (!c->qp) {
        int err = ib_err(0);
        snprintf(what, sizeof(what), "RC, %d send work requests, on %s port %u", depth,
                 dev->name, dev->port);
        return ib_status(err, "ibv_create_qp", what);
    }
    return GPUPORT_OK;
}

/* The send queue's bookkeeping and the registered scratch slots (one a
 * work request) that values go from without inline data. */
static gpuport_status_t scratch_make(ib_conn_t *c, const ib_dev_t *dev, int depth)
{
    size_t bytes = (size_t)depth * sizeof(uint64_t);
    char what[200];

    c->scratch = aligned_alloc(64, bytes);
    if (!c->scratch || ib_sendq_init(&c->q, OPS, (uint32_t)depth, dev->piece_max)) {
        log_error("out of memory for a connection's queues");
        return GPUPORT_ERR_NO_MEMORY;
    }
    memset(c->scratch, 0, bytes);
    errno = 0;
    c->scratch_mr = IBV(ibv_reg_mr)(c->ic->pd, c->scratch, bytes, IBV_ACCESS_LOCAL_WRITE);
    if (!c->scratch_mr) {
        int err = ib_err(0);
        snprintf(what, sizeof(what), "scratch %p, %zu bytes, on %s", (void *)c->scratch, bytes,
                 dev->name);
        return ib_status(err, "ibv_reg_mr", what);
    }
    return GPUPORT_OK;
}

/* The QP to INIT, and what the peer needs of it into c->mine. */
static gpuport_status_t qp_init(ib_conn_t *c, const ib_dev_t *dev)
{
    struct ibv_qp_attr a;
    char what[200];
    uint32_t psn;
    int mask, rc;

    ib_qp_attr_init(&a, &mask, dev->port, dev->atomic_cap != IBV_ATOMIC_NONE);
    rc = IBV(ibv_modify_qp)(c->qp, &a, mask);
    if (rc) {
        snprintf(what, sizeof(what), "qpn 0x%x, port %u", c->qp->qp_num, dev->port);
        return ib_status(ib_err(rc), "ibv_modify_qp(INIT)", what);
    }
    if (getrandom(&psn, sizeof(psn), 0) != (ssize_t)sizeof(psn))
        psn = (uint32_t)gpuport_now_ns();
    ib_qp_rec_pack(&c->mine, dev->lid, dev->gid.raw, c->qp->qp_num, psn, dev->active_mtu,
                   dev->port, (uint8_t)dev->gid_index, (uint8_t)dev->link_layer);
    c->mine.atomic_cap = (uint8_t)dev->atomic_cap;
    c->mine.rd_atom = ib_rd_atom_resp(dev->atomic_cap, dev->max_qp_rd_atom);
    return GPUPORT_OK;
}

/* Makes the CQ, the QP and its scratch buffer and takes the QP to INIT;
 * fills c->mine. What is made stays in c for conn_free on failure. */
static gpuport_status_t qp_make(ib_conn_t *c, gpuport_tl_comm_t *tl)
{
    const ib_dev_t *dev;
    char what[200];
    int depth;
    gpuport_status_t status;

    status = ib_comm_acquire(tl, &c->ic);
    if (status)
        return status;
    dev = c->ic->dev;
    depth = min_int(SQ_DEPTH, min_int(dev->max_qp_wr, dev->max_cqe));
    if (depth < 2) {
        log_error("%s allows %d work requests per QP and %d CQ entries; gpuport needs 2",
                  dev->name, dev->max_qp_wr, dev->max_cqe);
        return GPUPORT_ERR_NOT_SUPPORTED;
    }
    errno = 0;
    c->cq = IBV(ibv_create_cq)(dev->ctx, depth, NULL, NULL, 0);
    if (!c->cq) {
        int err = ib_err(0);
        snprintf(what, sizeof(what), "%d entries on %s", depth, dev->name);
        return ib_status(err, "ibv_create_cq", what);
    }
    status = qp_create(c, dev, depth);
    if (status)
        return status;
    status = scratch_make(c, dev, depth);
    if (status)
        return status;
    return qp_init(c, dev);
}

/* INIT -> RTR -> RTS towards the peer's QP (this rank's own for itself). */
static gpuport_status_t qp_connect(ib_conn_t *c)
{
    const ib_dev_t *dev = c->ic->dev;
    const ib_qp_rec_t *r = &c->remote;
    struct ibv_qp_attr a;
    char what[320], rgid[64], sig[160];
    uint8_t init;
    int mask, rc, eth = dev->link_layer == IB_LINK_LAYER_ETH;

    if (r->link_layer != dev->link_layer) {
        log_error("rank %d's port is %s and this rank's (%s:%u) is %s: they cannot connect",
                  c->peer, r->link_layer == IB_LINK_LAYER_ETH ? "RoCE" : "InfiniBand", dev->name,
                  dev->port, eth ? "RoCE" : "InfiniBand");
        return GPUPORT_ERR_NOT_SUPPORTED;
    }
    gid_text(r->gid, rgid, sizeof(rgid));
    ib_qp_attr_rtr(&a, &mask, r, eth, (uint8_t)dev->gid_index, dev->port, dev->active_mtu,
                   c->mine.rd_atom);
    rc = IBV(ibv_modify_qp)(c->qp, &a, mask);
    if (rc) {
        snprintf(what, sizeof(what), "qpn 0x%x, port %u, gid index %d, to rank %d's qpn 0x%x, "
                 "lid 0x%x, gid %s, path MTU %d, %u responder resources",
                 c->qp->qp_num, dev->port, dev->gid_index, c->peer, r->qpn, r->lid, rgid,
                 128 << a.path_mtu, c->mine.rd_atom);
        return ib_status(ib_err(rc), "ibv_modify_qp(RTR)", what);
    }
    init = ib_rd_atomic_init(dev->atomic_cap, dev->max_qp_init_rd_atom, r->rd_atom);
    ib_qp_attr_rts(&a, &mask, c->mine.psn, init);
    rc = IBV(ibv_modify_qp)(c->qp, &a, mask);
    if (rc) {
        snprintf(what, sizeof(what), "qpn 0x%x, to rank %d's qpn 0x%x, psn 0x%x, %u atomics "
                 "outstanding", c->qp->qp_num, c->peer, r->qpn, c->mine.psn, init);
        return ib_status(ib_err(rc), "ibv_modify_qp(RTS)", what);
    }
    c->rd_init = init;
    c->signal = ib_signal_choose(dev->atomic_cap, r->atomic_cap, init, sig, sizeof(sig));
    log_info("connected to rank %d (%s)%s: qpn 0x%x -> 0x%x on %s:%u, %s", c->peer,
             gpuport_tl_proc(c->comm, c->peer)->hostname,
             c->peer == gpuport_tl_rank(c->comm) ? " itself, a QP connected to itself" : "", c->qp->qp_num,
             r->qpn, dev->name, dev->port, sig);
    return GPUPORT_OK;
}

static gpuport_status_t ib_conn_open(gpuport_conn_t *conn)
{
    gpuport_comm_t comm = conn->comm;
    int peer = conn->peer;
    ib_conn_t *c = calloc(1, sizeof(*c));
    ib_qp_rec_t mine, theirs;
    int32_t ack, peer_ack = 0;
    gpuport_status_t status, ex;

    if (c) {
        c->comm = comm;
        c->peer = peer;
        c->conn = conn;
        status = qp_make(c, conn->tl);
    } else {
        log_error("out of memory for a connection");
        status = GPUPORT_ERR_NO_MEMORY;
    }
    /* Both sides always reach both exchanges, so that a failure on one
     * side fails the other instead of leaving it waiting. */
    if (status) {
        static const uint8_t zero[IB_GID_LEN];
        ib_qp_rec_pack(&mine, 0, zero, 0, 0, IBV_MTU_256, 0, 0, 0);
        mine.status = (int8_t)status;
    } else {
        mine = c->mine;
    }
    ex = gpuport_tl_exchange(comm, peer, IB_TAG_QP, &mine, &theirs, sizeof(theirs));
    if (ex) {
        if (c)
            conn_free(c);
        return ex;
    }
    if (!status)
        status = ib_qp_rec_unpack(&theirs, sizeof(theirs), peer, &c->remote);
    if (!status && c->remote.status) {
        log_error("rank %d could not make its side of the connection (%s)", peer,
                  gpuport_status_string((gpuport_status_t)c->remote.status));
        status = GPUPORT_ERR_PEER;
    }
    if (!status)
        status = qp_connect(c);
    ack = status;
    ex = gpuport_tl_exchange(comm, peer, IB_TAG_QP_ACK, &ack, &peer_ack, sizeof(ack));
    if (!status && ex)
        status = ex;
    if (!status && peer_ack) {
        log_error("rank %d could not connect its side of the connection (%s)", peer,
                  gpuport_status_string((gpuport_status_t)peer_ack));
        status = GPUPORT_ERR_PEER;
    }
    if (status) {
        if (c)
            conn_free(c);
        return status;
    }
    conn->priv = c;
    return GPUPORT_OK;
}

static void ib_conn_close(gpuport_conn_t *conn)
{
    if (conn->priv)
        conn_free(conn->priv);
    conn->priv = NULL;
}

/* ---- channels (application thread) ---- */

static gpuport_status_t ib_chan_prepare(gpuport_conn_t *conn, uint32_t id,
                                        const gpuport_region_t *src, const gpuport_region_t *dst,
                                        gpuport_channel_rec_t *mine)
{
    ib_conn_t *c = conn->priv;
    ib_comm_t *ic = c->ic;
    ib_chan_t *cs = &ic->chans[id];
    gpuport_comm_t comm = conn->comm;
    gpuport_status_t status = GPUPORT_OK;
    ib_tdata_t t;

    /* what a creation of this id that failed after preparing left */
    ib_chan_release(ic, cs);
    if (src && src->size)
        status = ib_mr_get(ic, src, &cs->src_mr, mine->why, sizeof(mine->why));
    if (!status && dst && dst->size)
        status = ib_mr_get(ic, dst, &cs->dst_mr, mine->why, sizeof(mine->why));
    if (status) {
        ib_chan_release(ic, cs);
        return status;
    }
    cs->src_lkey = cs->src_mr ? ib_mr_lkey(cs->src_mr) : 0;
    memset(&t, 0, sizeof(t));
    t.channel_id = id;
    t.flags = IB_TDATA_CTRL | (cs->dst_mr ? IB_TDATA_DST : 0);
    t.dst_rkey = cs->dst_mr ? ib_mr_rkey(cs->dst_mr) : 0;
    t.dst_addr = dst ? (uint64_t)(uintptr_t)dst->ptr : 0;
    t.dst_size = dst ? dst->size : 0;
    t.sem_addr = (uint64_t)(uintptr_t)&gpuport_tl_sem(comm, id)->value;
    t.status_addr = (uint64_t)(uintptr_t)&gpuport_tl_sem(comm, id)->peer_status;
    t.ctrl_rkey = ic->ctrl_mr->rkey;
    ib_tdata_pack(&t, mine->tdata);
    return GPUPORT_OK;
}

static gpuport_status_t ib_chan_connect(gpuport_tl_chan_t *ch, const gpuport_channel_rec_t *peer)
{
    ib_conn_t *c = ch->conn->priv;
    ib_chan_t *cs = &c->ic->chans[ch->id];
    gpuport_status_t status, broken = conn_broken(c);
    ib_tdata_t t;

    if (broken) {
        log_error("channel %u: the ib connection to rank %d has failed (%s)", ch->id, c->peer,
                  gpuport_status_string(broken));
        return broken;
    }
    status = ib_tdata_unpack(peer, ch->peer, &t);
    if (status)
        return status;
    if (ch->src.size && !cs->src_mr) {
        log_error("channel %u: its source region was not registered for ib", ch->id);
        return GPUPORT_ERR_INTERNAL;
    }
    cs->dst_raddr = t.dst_addr;
    cs->dst_rkey = t.dst_rkey;
    cs->ctrl_rkey = t.ctrl_rkey;
    cs->sem_raddr = t.sem_addr;
    cs->status_raddr = t.status_addr;
    cs->connected = 1;
    memset(&ch->dst, 0, sizeof(ch->dst));
    ch->dst.rec = peer->dst;
    /* not mapped here: failures reach the peer through report_fail */
    ch->remote_slot = NULL;
    return GPUPORT_OK;
}

static void ib_chan_disconnect(gpuport_tl_chan_t *ch)
{
    ib_conn_t *c = ch->conn ? ch->conn->priv : NULL;

    memset(&ch->dst, 0, sizeof(ch->dst));
    if (!c)
        return;
    c->ic->chans[ch->id].connected = 0;
    /* At communicator destruction conn_close releases them all with the
     * connection, after the proxy's drain and the peers' answers to the
     * closes. A channel destroyed alone lets go of them now. */
    if (!gpuport_tl_stopping(ch->comm))
        ib_chan_release(c->ic, &c->ic->chans[ch->id]);
}

/* Only a forced ib is ever used (auto does not pick it): then the threads
 * go near its device. */
static int ib_near_device(gpuport_tl_comm_t *tl, char *name, size_t len)
{
    return gpuport_tl_forced(tl) && ib_dev_name(tl->comm, name, len);
}

static void ib_describe(const void *settings, char *buf, size_t len)
{
    char why[192];

    (void)settings;
    if (!ib_devices_present(why, sizeof(why)))
        snprintf(buf, len, "built, not usable here: %s", why);
    else
        snprintf(buf, len, "built, devices present: used only when forced (GPUPORT_TRANSPORT=ib); "
                 "not yet run on RDMA hardware by its developers");
}

const gpuport_transport_ops_t gpuport_transport_ib = {
    .name = "ib",
    .settings = &gpuport_ib_settings,
    .records = ib_records,
    .nrecords = IB_NRECORDS,
    .describe = ib_describe,
    .near_device = ib_near_device,
    .reachable = ib_reachable,
    .conn_open = ib_conn_open,
    .chan_prepare = ib_chan_prepare,
    .conn_close = ib_conn_close,
    .chan_connect = ib_chan_connect,
    .chan_disconnect = ib_chan_disconnect,
    .put = ib_put,
    .put_value = ib_put_value,
    .signal = ib_signal,
    .rma = ib_rma,
    .rma_ok = ib_rma_ok,
    .has_room = ib_has_room,
    .progress = ib_progress,
    .quiesce = ib_quiesce,
    .report_fail = ib_report_fail,
};
