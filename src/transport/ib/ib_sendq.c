/* The ib transport's send-queue accounting; see ib.h. No verbs calls: the
 * transport turns the planned work requests into ibv_send_wr. */
#include "transport/ib/ib.h"

#include <stdlib.h>
#include <string.h>

gpuport_status_t ib_sendq_init(ib_sendq_t *q, uint32_t cap, uint32_t sq_depth, uint64_t piece_max)
{
    memset(q, 0, sizeof(*q));
    q->ops = calloc(cap, sizeof(*q->ops));
    if (!q->ops)
        return GPUPORT_ERR_NO_MEMORY;
    q->cap = cap;
    q->sq_depth = sq_depth;
    q->piece_max = piece_max;
    return GPUPORT_OK;
}

void ib_sendq_fini(ib_sendq_t *q)
{
    free(q->ops);
    q->ops = NULL;
}

int ib_sendq_room(const ib_sendq_t *q, uint32_t nops)
{
    return q->tail - q->head + nops <= q->cap;
}

int ib_sendq_idle(const ib_sendq_t *q)
{
    return q->head == q->tail;
}

ib_op_t *ib_sendq_push(ib_sendq_t *q)
{
    ib_op_t *op = &q->ops[q->tail & (q->cap - 1)];

    memset(op, 0, sizeof(*op));
    q->tail++;
    return op;
}

static ib_op_t *op_at(const ib_sendq_t *q, uint64_t seq)
{
    return &q->ops[seq & (q->cap - 1)];
}

/* Operations of several work requests: `posted` counts their bytes. */
static int op_sized(uint32_t kind)
{
    return kind == IB_OP_PUT || kind == IB_OP_GET || kind == IB_OP_ACC;
}

uint32_t ib_sendq_plan(const ib_sendq_t *q, ib_wr_desc_t *out, uint32_t max)
{
    uint32_t room = q->sq_depth - q->sq_used, n = 0;
    uint64_t seq = q->next, posted = seq < q->tail ? op_at(q, seq)->posted : 0;
    int after_read = q->after_read;

    if (max > room)
        max = room;
    while (n < max && seq < q->tail) {
        const ib_op_t *op = op_at(q, seq);
        ib_wr_desc_t *d = &out[n];

        memset(d, 0, sizeof(*d));
        d->wr_id = seq;
        d->rkey = op->rkey;
        d->scratch = (uint32_t)((q->wrs_total + n) % q->sq_depth);
        switch (op->kind) {
        case IB_OP_PUT:
        case IB_OP_GET: {
            uint64_t left = op->len - posted;
            uint64_t piece = left < q->piece_max ? left : q->piece_max;
            d->kind = op->kind == IB_OP_PUT ? IB_WR_WRITE : IB_WR_READ;
            d->len = (uint32_t)piece;
            d->laddr = op->laddr + posted;
            d->lkey = op->lkey;
            d->raddr = op->raddr + posted;
            posted += piece;
            break;
        }
        case IB_OP_ACC:
            /* the addend travels in the request: read from the source now,
             * which the application leaves alone until a flush says done */
            d->kind = IB_WR_FETCH_ADD;
            d->len = 8;
            memcpy(&d->value, (const void *)(uintptr_t)(op->laddr + posted), 8);
            d->raddr = op->raddr + posted;
            posted += 8;
            break;
        case IB_OP_SIGNAL_ADD:
        case IB_OP_ADD:
            d->kind = IB_WR_FETCH_ADD;
            d->len = 8;
            d->raddr = op->raddr;
            d->value = op->value;
            posted = op->len;
            break;
        case IB_OP_PUT_VALUE:
            d->kind = IB_WR_WRITE_INLINE;
            d->len = 8;
            d->raddr = op->raddr;
            d->value = op->value;
            posted = op->len;
            break;
        default: /* SIGNAL_WRITE, NOTIFY */
            d->kind = IB_WR_WRITE_VALUE;
            d->len = op->kind == IB_OP_NOTIFY ? 4 : 8;
            d->raddr = op->raddr;
            d->value = op->value;
            posted = op->len;
            break;
        }
        d->fence = after_read && d->kind != IB_WR_READ;
        after_read = d->kind == IB_WR_READ;
        n++;
        if (posted >= op->len) {
            seq++;
            posted = seq < q->tail ? op_at(q, seq)->posted : 0;
        }
    }
    return n;
}

void ib_sendq_posted(ib_sendq_t *q, const ib_wr_desc_t *d, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        ib_op_t *op = op_at(q, d[i].wr_id);
        op->wrs_posted++;
        op->posted = op_sized(op->kind) ? op->posted + d[i].len : op->len;
        if (op->posted >= op->len)
            q->next = d[i].wr_id + 1;
        q->sq_used++;
    }
    if (n)
        q->after_read = d[n - 1].kind == IB_WR_READ;
    q->wrs_total += n;
}

int ib_sendq_complete(ib_sendq_t *q, uint64_t wr_id, ib_op_done_fn done, void *arg)
{
    ib_op_t *op;
    int n = 0;

    /* in flight: among the operations not complete, with a work request
     * handed to the QP and not yet done */
    if (wr_id < q->head || wr_id >= q->tail || q->sq_used == 0)
        return -1;
    op = op_at(q, wr_id);
    if (op->wrs_done >= op->wrs_posted)
        return -1;
    op->wrs_done++;
    q->sq_used--;
    while (q->head < q->next) {
        ib_op_t copy;
        op = op_at(q, q->head);
        if (op->wrs_done < op->wrs_posted)
            break;
        /* the slot is free once head passes it, and done() may push */
        copy = *op;
        q->head++;
        n++;
        done(arg, &copy, GPUPORT_OK);
    }
    return n;
}

uint64_t ib_sendq_fail_all(ib_sendq_t *q, gpuport_status_t status, ib_op_done_fn done, void *arg)
{
    uint64_t end = q->tail, n = 0;

    /* an operation pushed by a callback stays queued behind the failed ones */
    while (q->head < end) {
        ib_op_t copy = *op_at(q, q->head);
        q->head++;
        n++;
        done(arg, &copy, status);
    }
    if (q->next < end)
        q->next = end;
    q->sq_used = 0;
    return n;
}
