/*
 * get, atomic_add and accumulate at the proxy: the rules that the host calls
 * (channel/chan_rma.c) and the proxy apply alike (gpuport_rma_check), and a
 * trigger carried out (proxy_exec_rma): checked, then handed to the
 * transport's rma entry, whose answer is a put's (done, flusher work, or
 * taken and completed later).
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_PROXY
#include <stdio.h>
#include <string.h>

#include "proxy_int.h"

/* The peer's region must hold its elements at aligned addresses, not only
 * at aligned offsets: an atomic add needs one. */
static int peer_aligned(const gpuport_tl_chan_t *tl, uint64_t dst_off, uint32_t elem)
{
    return (tl->dst.rec.addr + dst_off) % elem == 0;
}

static gpuport_status_t check_get(const gpuport_tl_chan_t *tl, const gpuport_op_desc_t *d,
                                  char *msg, size_t len)
{
    if (gpuport_put_fits(d->dst_off, d->src_off, d->size, tl->src.size, tl->dst.rec.size))
        return GPUPORT_OK;
    snprintf(msg, len, "get of %llu bytes from the peer's offset %llu to this side's offset "
             "%llu does not fit (this side's source region %llu bytes, the peer's destination "
             "region %llu bytes)",
             (unsigned long long)d->size, (unsigned long long)d->dst_off,
             (unsigned long long)d->src_off, (unsigned long long)tl->src.size,
             (unsigned long long)tl->dst.rec.size);
    return GPUPORT_ERR_OUT_OF_RANGE;
}

static gpuport_status_t check_add(const gpuport_tl_chan_t *tl, const gpuport_op_desc_t *d,
                                  char *msg, size_t len)
{
    if (!gpuport_value_aligned(d->dst_off)) {
        snprintf(msg, len, "atomic_add at the peer's offset %llu, which is not a multiple of 8",
                 (unsigned long long)d->dst_off);
        return GPUPORT_ERR_INVALID_ARG;
    }
    if (!gpuport_value_fits(d->dst_off, tl->dst.rec.size)) {
        snprintf(msg, len, "atomic_add at the peer's offset %llu does not fit (the peer's "
                 "destination region %llu bytes)",
                 (unsigned long long)d->dst_off, (unsigned long long)tl->dst.rec.size);
        return GPUPORT_ERR_OUT_OF_RANGE;
    }
    if (!peer_aligned(tl, d->dst_off, 8)) {
        snprintf(msg, len, "atomic_add at the peer's offset %llu: its region starts at an "
                 "address that is not 8-byte aligned, and an atomic add needs one",
                 (unsigned long long)d->dst_off);
        return GPUPORT_ERR_INVALID_ARG;
    }
    return GPUPORT_OK;
}

static gpuport_status_t check_acc(const gpuport_tl_chan_t *tl, const gpuport_op_desc_t *d,
                                  char *msg, size_t len)
{
    uint32_t elem = gpuport_acc_elem_size(d->op);

    if (d->size == 0) {
        snprintf(msg, len, "%s of zero elements", gpuport_op_name(d->op));
        return GPUPORT_ERR_INVALID_ARG;
    }
    if (!gpuport_acc_aligned(d->dst_off, d->src_off, d->size, elem)) {
        snprintf(msg, len, "%s of %llu bytes from offset %llu to the peer's offset %llu: "
                 "offsets and size must be multiples of the %u-byte element",
                 gpuport_op_name(d->op), (unsigned long long)d->size,
                 (unsigned long long)d->src_off, (unsigned long long)d->dst_off, elem);
        return GPUPORT_ERR_INVALID_ARG;
    }
    if (!gpuport_put_fits(d->dst_off, d->src_off, d->size, tl->src.size, tl->dst.rec.size)) {
        snprintf(msg, len, "%s of %llu elements from offset %llu to the peer's offset %llu "
                 "does not fit (source region %llu bytes, the peer's destination region %llu "
                 "bytes)",
                 gpuport_op_name(d->op), (unsigned long long)(d->size / elem),
                 (unsigned long long)d->src_off, (unsigned long long)d->dst_off,
                 (unsigned long long)tl->src.size, (unsigned long long)tl->dst.rec.size);
        return GPUPORT_ERR_OUT_OF_RANGE;
    }
    if (!peer_aligned(tl, d->dst_off, elem)) {
        snprintf(msg, len, "%s at the peer's offset %llu: its region starts at an address "
                 "that is not %u-byte aligned, and an atomic add needs one",
                 gpuport_op_name(d->op), (unsigned long long)d->dst_off, elem);
        return GPUPORT_ERR_INVALID_ARG;
    }
    return GPUPORT_OK;
}

gpuport_status_t gpuport_rma_check(const gpuport_tl_chan_t *tl,
                                   const struct gpuport_transport_ops *ops,
                                   const gpuport_op_desc_t *d, char *msg, size_t len)
{
    gpuport_status_t st;
    char why[320] = ""; /* a transport's reason names what to use instead */

    if (d->op == GPUPORT_OP_GET)
        st = check_get(tl, d, msg, len);
    else if (d->op == GPUPORT_OP_ATOMIC_ADD)
        st = check_add(tl, d, msg, len);
    else if (gpuport_acc_elem_size(d->op))
        st = check_acc(tl, d, msg, len);
    else {
        snprintf(msg, len, "op %u is not get, atomic_add or accumulate", d->op);
        return GPUPORT_ERR_INVALID_ARG;
    }
    if (st)
        return st;
    if (!ops->rma) {
        snprintf(msg, len, "the %s transport cannot carry %s", ops->name,
                 gpuport_op_name(d->op));
        return GPUPORT_ERR_NOT_SUPPORTED;
    }
    if (ops->rma_ok && !ops->rma_ok(tl, d->op, why, sizeof(why))) {
        snprintf(msg, len, "%s over %s: %s", gpuport_op_name(d->op), ops->name, why);
        return GPUPORT_ERR_NOT_SUPPORTED;
    }
    return GPUPORT_OK;
}

int proxy_exec_rma(gpuport_comm_t comm, gpuport_pchan_t *ch, const gpuport_op_desc_t *d)
{
    char msg[400];
    gpuport_status_t st = gpuport_rma_check(&ch->tl, ch->ops, d, msg, sizeof(msg));
    gpuport_work_t w;
    int rc;

    if (st) {
        log_error("channel %u (to rank %d): %s; the channel is now in error", ch->tl.id,
                  ch->tl.peer, msg);
        GPUPORT_STAT_INC(comm->proxy.rejected);
        gpuport_pchan_fail(ch, st);
        return EXEC_DONE;
    }
    if (d->size == 0)
        return EXEC_DONE; /* a get of nothing */
    memset(&w, 0, sizeof(w));
    rc = ch->ops->rma(&ch->tl, d, ch->work_done < ch->work_posted, &w);
    proxy_transport_result(comm, ch, rc, &w);
    return EXEC_DONE;
}
