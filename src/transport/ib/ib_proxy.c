/*
 * ib transport: the proxy thread's side of a connection (see ib.c): the
 * operations the table names (put, put_value, signal, report_fail queue
 * them in the connection's ib_sendq; has_room; get and the adds are
 * ib_rma.c's), progress, which posts them as work requests and reads their
 * completions, quiesce, and the failure of a connection (conn_break).
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_TL(GPUPORT_TL_KIND_IB)
#include <stdio.h>
#include <string.h>

#include "transport/ib/ib_priv.h"

#define NOTIFY_SPARE 8   /* ring slots kept for report_fail */
#define POST_BATCH 32
#define POLL_BATCH 32

/* ---- failure ---- */

static void op_done(void *arg, const ib_op_t *op, gpuport_status_t status)
{
    ib_conn_t *c = arg;
    gpuport_tl_chan_t *ch;

    if (op->kind == IB_OP_NOTIFY)
        return;
    ch = gpuport_tl_chan_find(c->conn, op->chan);
    if (ch)
        gpuport_tl_chan_complete(ch, status);
}

/* Fails every channel on the connection here and completes what was in
 * flight with the error, so flushes and waits return. The QP is put in the
 * error state (a failed work request already did that): what it still
 * holds comes back flushed and is drained without effect, and the peer's
 * requests to it fail, so the peer learns of it too. */
static void conn_break(ib_conn_t *c, gpuport_status_t status, const char *what)
{
    struct ibv_qp_attr a;
    int failed, rc;
    uint64_t lost;

    if (c->broken)
        return;
    __atomic_store_n(&c->broken, status, __ATOMIC_RELEASE);
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_ERR;
    rc = IBV(ibv_modify_qp)(c->qp, &a, IBV_QP_STATE);
    if (rc)
        log_warn("ibv_modify_qp(ERR) failed: %s (qpn 0x%x)", strerror(ib_err(rc)),
                 c->qp->qp_num);
    failed = gpuport_tl_conn_fail(c->conn, status);
    lost = c->q.tail - c->q.head;
    /* while the communicator is stopping, a peer that has already gone
     * takes this side's close notice with it: worth a word, not an error */
    GPUPORT_LOG(gpuport_tl_stopping(c->comm) ? GPUPORT_LOG_WARN : GPUPORT_LOG_ERROR,
                "connection to rank %d (%s): %s; %d channel(s) failed, %llu operation(s) "
                "lost in flight",
                c->peer, gpuport_tl_proc(c->comm, c->peer)->hostname, what, failed,
                (unsigned long long)lost);
    ib_sendq_fail_all(&c->q, status, op_done, c);
}

/* ---- proxy thread: operations ---- */

int ib_has_room(gpuport_tl_chan_t *ch, uint32_t nops)
{
    ib_conn_t *c = ch->conn->priv;

    return c->broken || ib_sendq_room(&c->q, nops + NOTIFY_SPARE);
}

/* One write into the channel's destination at dst_off: len bytes of its
 * source at laddr (IB_OP_PUT), or the 8 bytes of value (IB_OP_PUT_VALUE). */
static int dst_write(gpuport_tl_chan_t *ch, uint32_t kind, uint64_t dst_off, uint64_t laddr,
                     uint64_t len, uint64_t value)
{
    ib_conn_t *c = ch->conn->priv;
    const ib_chan_t *cs = &c->ic->chans[ch->id];
    ib_op_t *op;

    if (c->broken)
        return c->broken;
    op = ib_sendq_push(&c->q);
    op->chan = ch->id;
    op->kind = kind;
    if (kind == IB_OP_PUT) {
        op->laddr = laddr;
        op->lkey = cs->src_lkey;
    }
    op->raddr = cs->dst_raddr + dst_off;
    op->rkey = cs->dst_rkey;
    op->len = len;
    op->value = value;
    return GPUPORT_TRANSPORT_ASYNC;
}

int ib_put(gpuport_tl_chan_t *ch, uint64_t dst_off, uint64_t src_off, uint64_t size,
           int behind_work, gpuport_work_t *work)
{
    (void)behind_work, (void)work;
    return dst_write(ch, IB_OP_PUT, dst_off, (uint64_t)(uintptr_t)ch->src.ptr + src_off, size,
                     0);
}

int ib_put_value(gpuport_tl_chan_t *ch, uint64_t dst_off, uint64_t value,
                 int behind_work, gpuport_work_t *work)
{
    (void)behind_work, (void)work;
    return dst_write(ch, IB_OP_PUT_VALUE, dst_off, 0, 8, value);
}

int ib_signal(gpuport_tl_chan_t *ch, uint64_t n, int behind_work, gpuport_work_t *work)
{
    ib_conn_t *c = ch->conn->priv;
    ib_chan_t *cs = &c->ic->chans[ch->id];
    ib_op_t *op;

    (void)behind_work, (void)work;
    if (c->broken)
        return c->broken;
    op = ib_sendq_push(&c->q);
    op->chan = ch->id;
    op->raddr = cs->sem_raddr;
    op->rkey = cs->ctrl_rkey;
    op->len = 8;
    if (c->signal == IB_SIGNAL_ATOMIC) {
        op->kind = IB_OP_SIGNAL_ADD;
        op->value = n;
    } else {
        /* only this channel writes the peer's slot, in order: the count
         * is exact, and readers see it grow */
        op->kind = IB_OP_SIGNAL_WRITE;
        cs->signals_sent += n;
        op->value = cs->signals_sent;
    }
    return GPUPORT_TRANSPORT_ASYNC;
}

void ib_report_fail(gpuport_tl_chan_t *ch, gpuport_status_t status)
{
    ib_conn_t *c = ch->conn->priv;
    const ib_chan_t *cs = &c->ic->chans[ch->id];
    ib_op_t *op;

    if (c->broken || !cs->connected || !ib_sendq_room(&c->q, 1))
        return;
    op = ib_sendq_push(&c->q);
    op->chan = ch->id;
    op->kind = IB_OP_NOTIFY;
    op->raddr = cs->status_raddr;
    op->rkey = cs->ctrl_rkey;
    op->len = 4;
    op->value = (uint64_t)(uint32_t)(int32_t)status;
}

/* ---- proxy thread: posting and completions ---- */

static void wr_fill(ib_conn_t *c, const ib_wr_desc_t *d, struct ibv_send_wr *wr,
                    struct ibv_sge *sge)
{
    uint64_t *slot = &c->scratch[d->scratch];

    memset(wr, 0, sizeof(*wr));
    wr->wr_id = d->wr_id;
    wr->sg_list = sge;
    wr->num_sge = 1;
    wr->send_flags = IBV_SEND_SIGNALED | (d->fence ? IBV_SEND_FENCE : 0);
    sge->length = d->len;
    switch (d->kind) {
    case IB_WR_WRITE:
    case IB_WR_READ:
        wr->opcode = d->kind == IB_WR_WRITE ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
        sge->addr = d->laddr;
        sge->lkey = d->lkey;
        wr->wr.rdma.remote_addr = d->raddr;
        wr->wr.rdma.rkey = d->rkey;
        break;
    case IB_WR_WRITE_INLINE:
        /* with inline data the provider copies the 8 bytes into the request
         * during ibv_post_send; without, the HCA reads the slot later, as
         * for WRITE_VALUE */
        *slot = d->value;
        wr->opcode = IBV_WR_RDMA_WRITE;
        if (c->inline_ok)
            wr->send_flags |= IBV_SEND_INLINE;
        sge->addr = (uint64_t)(uintptr_t)slot;
        sge->lkey = c->scratch_mr->lkey;
        wr->wr.rdma.remote_addr = d->raddr;
        wr->wr.rdma.rkey = d->rkey;
        break;
    case IB_WR_WRITE_VALUE:
        /* read by the HCA after the post: the slot is not reused before
         * this request completes (one slot per send-queue entry) */
        if (d->len == 8) {
            *slot = d->value;
        } else {
            int32_t v = (int32_t)(uint32_t)d->value;
            memcpy(slot, &v, sizeof(v));
        }
        wr->opcode = IBV_WR_RDMA_WRITE;
        sge->addr = (uint64_t)(uintptr_t)slot;
        sge->lkey = c->scratch_mr->lkey;
        wr->wr.rdma.remote_addr = d->raddr;
        wr->wr.rdma.rkey = d->rkey;
        break;
    default: /* IB_WR_FETCH_ADD: the old value lands in the slot, unread */
        wr->opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
        sge->addr = (uint64_t)(uintptr_t)slot;
        sge->lkey = c->scratch_mr->lkey;
        wr->wr.atomic.remote_addr = d->raddr;
        wr->wr.atomic.rkey = d->rkey;
        wr->wr.atomic.compare_add = d->value;
        break;
    }
}

/* Posts what the send queue has room for, one doorbell per batch. */
static int post_some(ib_conn_t *c)
{
    ib_wr_desc_t d[POST_BATCH];
    struct ibv_send_wr wr[POST_BATCH], *bad = NULL;
    struct ibv_sge sge[POST_BATCH];
    int total = 0;

    while (!c->broken) {
        uint32_t n = ib_sendq_plan(&c->q, d, POST_BATCH), posted;
        int rc;

        if (n == 0)
            break;
        for (uint32_t i = 0; i < n; i++) {
            wr_fill(c, &d[i], &wr[i], &sge[i]);
            wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
        }
        rc = ibv_post_send(c->qp, wr, &bad);
        posted = rc ? (bad >= wr && bad < wr + n ? (uint32_t)(bad - wr) : 0) : n;
        ib_sendq_posted(&c->q, d, posted);
        total += (int)posted;
        if (rc) {
            char what[200];
            snprintf(what, sizeof(what), "ibv_post_send failed: %s (qpn 0x%x, %u of %u work "
                     "requests taken, %u in the send queue of %u)",
                     strerror(ib_err(rc)), c->qp->qp_num, posted, n, c->q.sq_used,
                     c->q.sq_depth);
            conn_break(c, GPUPORT_ERR_TRANSPORT, what);
            break;
        }
        if (n < POST_BATCH)
            break;
    }
    return total;
}

static void on_completion(ib_conn_t *c, const struct ibv_wc *wc)
{
    char what[200];

    if (c->broken)
        return;
    if (wc->status != IBV_WC_SUCCESS) {
        const char *text;
        gpuport_status_t st = ib_wc_status(wc->status, &text);
        snprintf(what, sizeof(what), "a work request failed: %s (status %d, vendor error 0x%x, "
                 "qpn 0x%x, operation %llu)",
                 text, (int)wc->status, wc->vendor_err, wc->qp_num,
                 (unsigned long long)wc->wr_id);
        conn_break(c, st, what);
        return;
    }
    if (ib_sendq_complete(&c->q, wc->wr_id, op_done, c) < 0) {
        snprintf(what, sizeof(what), "completion for operation %llu, which is not in flight "
                 "(operations %llu..%llu)",
                 (unsigned long long)wc->wr_id, (unsigned long long)c->q.head,
                 (unsigned long long)c->q.tail);
        conn_break(c, GPUPORT_ERR_INTERNAL, what);
    }
}

int ib_progress(gpuport_conn_t *conn)
{
    ib_conn_t *c = conn->priv;
    struct ibv_wc wc[POLL_BATCH];
    int n, done = 0;

    /* drained even when broken: the QP flushes what it held */
    while ((n = ibv_poll_cq(c->cq, POLL_BATCH, wc)) > 0) {
        done += n;
        for (int i = 0; i < n; i++)
            on_completion(c, &wc[i]);
        if (n < POLL_BATCH)
            break;
    }
    if (n < 0 && !c->broken)
        conn_break(c, GPUPORT_ERR_TRANSPORT, "ibv_poll_cq failed");
    if (!c->broken)
        done += post_some(c);
    return done;
}

/* The receiver is passive: once nothing of this rank's is in flight, the
 * connection has nothing more to do. The core still waits for the peer's
 * answer to every channel's close before this rank deregisters its memory
 * (proxy_drain.c), so that no write of the peer's comes after. */
int ib_quiesce(gpuport_conn_t *conn)
{
    const ib_conn_t *c = conn->priv;

    return c->broken || ib_sendq_idle(&c->q);
}
