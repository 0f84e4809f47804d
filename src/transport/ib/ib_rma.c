/*
 * ib transport: get, atomic_add and accumulate (transport.h's rma and
 * rma_ok), queued in the connection's send queue as puts are; ib_proxy.c
 * posts them and completes them in the channel's order.
 *
 *   get         RDMA READs from the peer's destination (the address and key
 *               puts write with) into this side's source, in pieces no
 *               larger than a put's; the first request after a read
 *               carries IBV_SEND_FENCE (ib.h, the send queue), so a signal
 *               after a get reaches the peer only once the bytes are here;
 *   atomic_add  one IBV_WR_ATOMIC_FETCH_AND_ADD at the peer's 8-aligned
 *               address; the old value lands in a scratch slot, unread;
 *   accumulate  int64 only: one fetch-and-add an element, its addend read
 *               by the proxy from this side's source as the request is
 *               posted.
 *
 * Size. An accumulate takes one slot of the connection's ring however many
 * elements it has: has_room counts operations, and ib_sendq_plan hands its
 * requests to the QP as the send queue frees, as it does a large put's
 * pieces. So has_room(ch, 1) is all an accumulate needs, and no size is
 * refused.
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_TL(GPUPORT_TL_KIND_IB)
#include <stdio.h>

#include "transport/ib/ib_priv.h"

#define ADD_INSTEAD "add over tcp, or with a memory channel between ranks on one host"

/* RDMA READs need the QP's read and atomic resources (max_rd_atomic),
 * which ib_rd_atomic_init grants only where both devices have atomics. */
static int reads_ok(const ib_conn_t *c, char *why, size_t len)
{
    char which[128];

    if (c->rd_init > 0)
        return 1;
    if (c->ic->dev->atomic_cap == IBV_ATOMIC_NONE)
        snprintf(which, sizeof(which), "this rank's device %s has none (IBV_ATOMIC_NONE)",
                 c->ic->dev->name);
    else if (c->remote.atomic_cap == IBV_ATOMIC_NONE)
        snprintf(which, sizeof(which), "rank %d's device has none (IBV_ATOMIC_NONE)", c->peer);
    else
        snprintf(which, sizeof(which), "a device allows none (max_rd_atomic 0)");
    snprintf(why, len, "the QP may have no RDMA READ outstanding: gpuport gives a QP read "
             "resources only where both devices have atomics, and %s; get over tcp", which);
    return 0;
}

static int atomics_ok(const ib_conn_t *c, char *why, size_t len)
{
    if (c->ic->dev->atomic_cap == IBV_ATOMIC_NONE)
        snprintf(why, len, "this rank's device %s has no atomics (atomic_cap IBV_ATOMIC_NONE); "
                 ADD_INSTEAD, c->ic->dev->name);
    else if (c->remote.atomic_cap == IBV_ATOMIC_NONE)
        snprintf(why, len, "rank %d's device has no atomics (atomic_cap IBV_ATOMIC_NONE); "
                 ADD_INSTEAD, c->peer);
    else if (c->rd_init == 0)
        snprintf(why, len, "the QP may have no atomic outstanding (max_rd_atomic 0: a device "
                 "allows none); " ADD_INSTEAD);
    else
        return 1;
    return 0;
}

/*
 * Atomicity (gpuport.h's rule). The NIC of the destination's owner carries
 * out every add: each rank's requests reach the destination through it
 * (one device per communicator), so ib's adds are atomic with one another.
 * With respect to atomics of the owner's CPU or GPU on the same word (shm's
 * adds from a rank on the owner's host, memory channels', a kernel's own)
 * they are atomic only where that device reports IBV_ATOMIC_GLOB in
 * ibv_device_attr.atomic_cap; most report IBV_ATOMIC_HCA, and then
 * gpuport.h's promise holds among ib's adds only: a word that ib adds into
 * must not also be added into by another transport. Refused: devices
 * without atomics (IBV_ATOMIC_NONE), float types (NIC atomics add
 * integers), GPU memory destinations (a NIC's atomics on GPU memory,
 * through dma-buf or a peer-memory module, are not atomic with the GPU's
 * own) and, for accumulate, GPU memory sources (the proxy reads each
 * addend from the host).
 */
int ib_rma_ok(const gpuport_tl_chan_t *ch, uint32_t op, char *why, size_t len)
{
    const ib_conn_t *c = ch->conn->priv;

    if (op == GPUPORT_OP_GET)
        return reads_ok(c, why, len);
    if (op != GPUPORT_OP_ATOMIC_ADD && op != GPUPORT_OP_ACC_INT64) {
        snprintf(why, len, "ib atomics add integers only; accumulate floats over tcp, or with a "
                 "memory channel between ranks on one host");
        return 0;
    }
    if (!atomics_ok(c, why, len))
        return 0;
    if (gpuport_region_is_device((int)ch->dst.rec.kind)) {
        snprintf(why, len, "rank %d's destination is GPU memory, where NIC atomics are atomic "
                 "only with other NIC atomics, not the GPU's; add into it with a memory channel "
                 "(ranks on one host)", ch->peer);
        return 0;
    }
    if (op == GPUPORT_OP_ACC_INT64 && gpuport_region_is_device(ch->src.kind)) {
        snprintf(why, len, "this side's source is GPU memory, which the proxy cannot read for "
                 "the addends; accumulate from host memory, or send each value with atomic_add");
        return 0;
    }
    return 1;
}

int ib_rma(gpuport_tl_chan_t *ch, const gpuport_op_desc_t *d, int behind_work,
           gpuport_work_t *work)
{
    ib_conn_t *c = ch->conn->priv;
    const ib_chan_t *cs = &c->ic->chans[ch->id];
    uint64_t src = (uint64_t)(uintptr_t)ch->src.ptr + d->src_off;
    ib_op_t *op;

    (void)behind_work, (void)work;
    if (c->broken)
        return c->broken;
    if (d->op != GPUPORT_OP_GET && d->op != GPUPORT_OP_ATOMIC_ADD &&
        d->op != GPUPORT_OP_ACC_INT64)
        return GPUPORT_ERR_NOT_SUPPORTED; /* rma_ok refused it */
    op = ib_sendq_push(&c->q);
    op->chan = ch->id;
    op->raddr = cs->dst_raddr + d->dst_off;
    op->rkey = cs->dst_rkey;
    op->len = d->size;
    if (d->op == GPUPORT_OP_GET) {
        op->kind = IB_OP_GET;
        op->laddr = src;
        op->lkey = cs->src_lkey;
    } else if (d->op == GPUPORT_OP_ATOMIC_ADD) {
        op->kind = IB_OP_ADD;
        op->len = 8;
        op->value = d->value;
    } else {
        op->kind = IB_OP_ACC;
        op->laddr = src;
    }
    return GPUPORT_TRANSPORT_ASYNC;
}
