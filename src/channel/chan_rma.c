/*
 * gpuport_channel_get, _atomic_add and _accumulate: checked here by the rules
 * the proxy applies too (gpuport_rma_check: ranges, alignment, element type,
 * what the channel's transport can carry), before the channel's state (a bad
 * argument is reported as such on a closed or failed channel too), refused
 * with a message and nothing queued, else pushed into the host FIFO like a
 * put. The proxy hands them to the transport in the channel's order.
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_CHANNEL
#include "accumulate.h"
#include "chan_int.h"

/* As the other operations (chan_push.c): a live handle, the arguments, then
 * the channel's and its peer's state. */
static gpuport_status_t push_rma(gpuport_channel_t ch, const gpuport_op_desc_t *d)
{
    gpuport_status_t status;
    char msg[400];
    uint64_t pos;

    status = gpuport_rma_check(&ch->pchan->tl, ch->pchan->ops, d, msg, sizeof(msg));
    if (status) {
        log_error("channel %u (to rank %d): %s; nothing was queued", ch->id, ch->peer, msg);
        return status;
    }
    status = chan_usable(ch);
    if (status)
        return status;
    if (d->size > 0 && chan_try_inline_rma(ch, d))
        return GPUPORT_OK;
    if (gpuport_trigger_is_value(d->op))
        return gpuport_channel_push_value(ch, d->op, d->dst_off, d->value, &pos);
    return gpuport_channel_push(ch, d->op, d->dst_off, d->src_off, d->size, &pos);
}

gpuport_status_t gpuport_channel_get(gpuport_channel_t ch, uint64_t peer_off,
                                     uint64_t local_off, uint64_t size)
{
    /* the trigger's fields are the put's: dst the peer's region, src this side's */
    gpuport_op_desc_t d = {GPUPORT_OP_GET, 0, local_off, peer_off, size, 0};

    if (!chan_ok(ch))
        return chan_stale("gpuport_channel_get", ch);
    return push_rma(ch, &d);
}

gpuport_status_t gpuport_channel_atomic_add(gpuport_channel_t ch, uint64_t dst_off, int64_t value)
{
    gpuport_op_desc_t d = {GPUPORT_OP_ATOMIC_ADD, 0, 0, dst_off, 8, (uint64_t)value};

    if (!chan_ok(ch))
        return chan_stale("gpuport_channel_atomic_add", ch);
    return push_rma(ch, &d);
}

gpuport_status_t gpuport_channel_accumulate(gpuport_channel_t ch, uint64_t dst_off,
                                            uint64_t src_off, uint64_t count,
                                            gpuport_dtype_t type)
{
    uint32_t op = gpuport_acc_op_of((int)type);
    uint32_t elem = gpuport_acc_elem_size(op);
    gpuport_op_desc_t d = {op, 0, src_off, dst_off, 0, 0};

    if (!chan_ok(ch))
        return chan_stale("gpuport_channel_accumulate", ch);
    if (!op) {
        log_error("channel %u (to rank %d): accumulate of element type %d, which is not a "
                  "gpuport_dtype_t (GPUPORT_INT64, _UINT64, _FLOAT32, _BFLOAT16); nothing was "
                  "queued",
                  ch->id, ch->peer, (int)type);
        return GPUPORT_ERR_INVALID_ARG;
    }
    if (count > GPUPORT_TRIGGER_SIZE_MAX / elem) {
        log_error("channel %u (to rank %d): accumulate of %llu elements, more than a trigger "
                  "carries; nothing was queued",
                  ch->id, ch->peer, (unsigned long long)count);
        return GPUPORT_ERR_OUT_OF_RANGE;
    }
    d.size = count * elem;
    return push_rma(ch, &d);
}
