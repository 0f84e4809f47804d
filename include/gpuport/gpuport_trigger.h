/**
 * @file gpuport_trigger.h
 * Trigger encoding: the 16-byte records that producers (host threads, and
 * CUDA threads through the device API) write into a communicator's FIFO and
 * the proxy decodes. Plain C usable from host and device code; no state.
 * Programs need none of it to use channels (gpuport_device.h wraps it); it
 * is public for the device API's inline code and for tools that read FIFOs.
 *
 * Word 0 ("tag") is written last, with release ordering, and carries the
 * lap-parity bit that makes the slot valid:
 *   63     parity   ((pos >> log2(fifo size)) & 1) ^ 1: lap 0 expects 1, so a
 *                   zeroed ring holds no valid slot and slots are never cleared
 *   62..59 op       gpuport_trigger_op_t
 *   58..44 channel  15 bits, channel id within the communicator
 *   43..12 size     bits 31..0 of the size in bytes
 *   11..6  src_hi   bits 37..32 of the source offset
 *    5..0  dst_hi   bits 37..32 of the destination offset
 * Word 1:
 *   63..32 src_lo   bits 31..0 of the source offset
 *   31..0  dst_lo   bits 31..0 of the destination offset
 *
 * A put whose size needs more than 32 bits or whose offsets need more than 38
 * bits is preceded, in the next-lower slot, by an EXT trigger of the same
 * channel carrying the high bits (two slots reserved at once, so the pair is
 * contiguous):
 *   word 0: parity, op = EXT, channel, bits 43..24 = size bits 51..32
 *   word 1: bits 57..32 = source offset bits 63..38,
 *           bits 25..0  = destination offset bits 63..38
 * So sizes up to 2^52 - 1 and any 64-bit offset are expressible; nothing is
 * ever truncated.
 *
 * A SIGNAL's size field is how many signals it carries (0 and 1: one): the
 * device API folds the signals that lanes of one warp make on one channel
 * at one moment into one trigger. The peer's count grows by that many.
 *
 * GET and the ACC_* ops are encoded as a put is (EXT slot and all): a GET's
 * src_off is where the bytes land on the pushing side, dst_off where they are
 * read on the peer's; an ACC_*'s size is in bytes, a whole number of elements.
 *
 * PUT_VALUE, PUT_VALUE_SIGNAL and ATOMIC_ADD carry a 64-bit value in the
 * trigger itself, written to (or added at) an 8-byte-aligned destination
 * offset (no source, no EXT slot):
 *   word 0: 63 parity, 62..59 op, 58..44 channel as above,
 *           43..0  dst_off / 8 (so offsets up to 2^47 - 8 bytes)
 *   word 1: the value
 * Offsets that are not 8-aligned or need more bits cannot be encoded: the
 * host and device APIs refuse them (GPUPORT_ERR_INVALID_ARG, or
 * GPUPORT_ERR_OUT_OF_RANGE as for a put outside the region) before encoding.
 * An EXT slot in front of a value trigger (no producer writes one) is
 * consumed with it and adds nothing.
 */
#ifndef GPUPORT_TRIGGER_H
#define GPUPORT_TRIGGER_H

#include <stdint.h>

/** Functions of this header: inline, for host and device code alike. */
#if defined(__CUDACC__)
#define GPUPORT_HD static __host__ __device__ __forceinline__
#else
#define GPUPORT_HD static inline
#endif

/** The operations a trigger carries. Producers outside the library push
 *  only the public API's (gpuport_trigger_pushable says which runs). */
typedef enum {
    GPUPORT_OP_NONE = 0,             /**< never pushed: a zeroed slot's op */
    GPUPORT_OP_PUT = 1,              /**< copy src_off..+size to the peer's dst_off */
    GPUPORT_OP_SIGNAL = 2,           /**< add size (0: 1) to the peer's semaphore, after the puts */
    GPUPORT_OP_PUT_SIGNAL = 3,       /**< PUT, then SIGNAL */
    GPUPORT_OP_FLUSH = 4,            /**< publish flush progress once earlier work is done */
    GPUPORT_OP_EXT = 5,              /**< high bits of the put behind it */
    GPUPORT_OP_CLOSE = 6,            /**< gpuport's own, from the host at destroy: tell the peer */
    GPUPORT_OP_PUT_VALUE = 7,        /**< 8 bytes carried in the trigger */
    GPUPORT_OP_PUT_VALUE_SIGNAL = 8, /**< ... then a signal */
    GPUPORT_OP_GET = 9,              /**< copy the peer's dst_off..+size to src_off here */
    GPUPORT_OP_ATOMIC_ADD = 10,      /**< add the 64-bit value at the peer's dst_off */
    GPUPORT_OP_ACC_INT64 = 11,       /**< add size / 8 64-bit integers from src_off into dst_off */
    GPUPORT_OP_ACC_FLOAT32 = 12,     /**< the same for float32 elements */
    GPUPORT_OP_ACC_BFLOAT16 = 13,    /**< the same for bfloat16 elements */
    GPUPORT_OP_MAX_ = 14             /**< one past the last op */
} gpuport_trigger_op_t;

/** Bits of a trigger's channel id, so channels per communicator at most. */
#define GPUPORT_TRIGGER_CHANNEL_BITS 15
/** Channel ids a trigger can name: 0 .. GPUPORT_TRIGGER_MAX_CHANNELS - 1. */
#define GPUPORT_TRIGGER_MAX_CHANNELS (1u << GPUPORT_TRIGGER_CHANNEL_BITS)
/** The largest size a put (with its EXT slot) can carry. */
#define GPUPORT_TRIGGER_SIZE_MAX ((1ull << 52) - 1)
/** Bits of dst_off / 8 in a value trigger. */
#define GPUPORT_TRG_VALUE_OFF_BITS 44
/** The largest destination offset a value trigger can carry. */
#define GPUPORT_TRIGGER_VALUE_OFF_MAX (((1ull << GPUPORT_TRG_VALUE_OFF_BITS) - 1) << 3)

/** One FIFO slot (the layout above). */
typedef struct __attribute__((aligned(16))) gpuport_trigger {
    uint64_t w[2]; /**< w[0] the tag, w[1] the payload */
} gpuport_trigger_t;

/** What the proxy works with after decoding one trigger (or an EXT pair). */
typedef struct gpuport_op_desc {
    uint32_t op;      /**< gpuport_trigger_op_t */
    uint32_t channel; /**< channel id within the communicator */
    uint64_t src_off; /**< value ops: 0 */
    uint64_t dst_off; /**< offset in the peer's destination region */
    uint64_t size;    /**< value ops: 8 */
    uint64_t value;   /**< value ops: what to write; else 0 */
} gpuport_op_desc_t;

/** @name Field positions (the layout above)
 * @{ */
#define GPUPORT_TRG_PARITY_SHIFT 63  /**< word 0: the parity bit */
#define GPUPORT_TRG_OP_SHIFT 59      /**< word 0: the op */
#define GPUPORT_TRG_CHAN_SHIFT 44    /**< word 0: the channel */
#define GPUPORT_TRG_SIZE_SHIFT 12    /**< word 0: size bits 31..0 */
#define GPUPORT_TRG_SRCHI_SHIFT 6    /**< word 0: source offset bits 37..32 */
#define GPUPORT_TRG_LOW_OFF_BITS 38  /**< offset bits a main trigger carries */
#define GPUPORT_TRG_EXT_SIZE_SHIFT 24 /**< EXT word 0: size bits 51..32 */
/** @} */

/** The parity bit that makes the slot at FIFO position pos valid.
 *  @return 0 or 1 */
GPUPORT_HD uint64_t gpuport_trigger_parity(uint64_t pos, uint32_t log2_size)
{
    return ((pos >> log2_size) & 1u) ^ 1u;
}

/** Whether a put needs an EXT slot in front of it.
 *  @return 1 if it does, else 0 */
GPUPORT_HD int gpuport_trigger_needs_ext(uint64_t src_off, uint64_t dst_off, uint64_t size)
{
    return (size >> 32) != 0 || (src_off >> GPUPORT_TRG_LOW_OFF_BITS) != 0 ||
           (dst_off >> GPUPORT_TRG_LOW_OFF_BITS) != 0;
}

/** Encodes the main trigger of a sized op; the parity bit is left 0
 *  (added at publication). */
GPUPORT_HD void gpuport_trigger_encode(gpuport_trigger_t *t, uint32_t op, uint32_t channel,
                                       uint64_t src_off, uint64_t dst_off, uint64_t size)
{
    t->w[0] = ((uint64_t)(op & 0xf) << GPUPORT_TRG_OP_SHIFT) |
              ((uint64_t)(channel & (GPUPORT_TRIGGER_MAX_CHANNELS - 1)) << GPUPORT_TRG_CHAN_SHIFT) |
              ((size & 0xffffffffull) << GPUPORT_TRG_SIZE_SHIFT) |
              (((src_off >> 32) & 0x3f) << GPUPORT_TRG_SRCHI_SHIFT) | ((dst_off >> 32) & 0x3f);
    t->w[1] = ((src_off & 0xffffffffull) << 32) | (dst_off & 0xffffffffull);
}

/** Whether an op carries a value instead of a source.
 *  @return 1 for PUT_VALUE, PUT_VALUE_SIGNAL and ATOMIC_ADD, else 0 */
GPUPORT_HD int gpuport_trigger_is_value(uint32_t op)
{
    return op == GPUPORT_OP_PUT_VALUE || op == GPUPORT_OP_PUT_VALUE_SIGNAL ||
           op == GPUPORT_OP_ATOMIC_ADD;
}

/** The element size of an accumulate op.
 *  @return 8, 4 or 2 for ACC_INT64, ACC_FLOAT32 and ACC_BFLOAT16; 0 for any other op */
GPUPORT_HD uint32_t gpuport_acc_elem_size(uint32_t op)
{
    return op == GPUPORT_OP_ACC_INT64     ? 8u
           : op == GPUPORT_OP_ACC_FLOAT32 ? 4u
           : op == GPUPORT_OP_ACC_BFLOAT16 ? 2u
                                           : 0u;
}

/** Whether an op reads the peer's memory or adds into it (GET, ATOMIC_ADD,
 *  ACC_*): the ops a transport carries through its `rma` entry.
 *  @return 1 if so, else 0 */
GPUPORT_HD int gpuport_trigger_is_rma(uint32_t op)
{
    return op >= GPUPORT_OP_GET && op <= GPUPORT_OP_ACC_BFLOAT16;
}

/** Encodes a value trigger (op PUT_VALUE or PUT_VALUE_SIGNAL); dst_off must
 *  be 8-aligned and at most GPUPORT_TRIGGER_VALUE_OFF_MAX (the callers check:
 *  other bits are dropped). Parity is left 0. */
GPUPORT_HD void gpuport_trigger_encode_value(gpuport_trigger_t *t, uint32_t op, uint32_t channel,
                                             uint64_t dst_off, uint64_t value)
{
    t->w[0] = ((uint64_t)(op & 0xf) << GPUPORT_TRG_OP_SHIFT) |
              ((uint64_t)(channel & (GPUPORT_TRIGGER_MAX_CHANNELS - 1)) << GPUPORT_TRG_CHAN_SHIFT) |
              ((dst_off >> 3) & ((1ull << GPUPORT_TRG_VALUE_OFF_BITS) - 1));
    t->w[1] = value;
}

/** Encodes the EXT slot of a put that needs one. Parity is left 0. */
GPUPORT_HD void gpuport_trigger_encode_ext(gpuport_trigger_t *t, uint32_t channel,
                                           uint64_t src_off, uint64_t dst_off, uint64_t size)
{
    t->w[0] = ((uint64_t)GPUPORT_OP_EXT << GPUPORT_TRG_OP_SHIFT) |
              ((uint64_t)(channel & (GPUPORT_TRIGGER_MAX_CHANNELS - 1)) << GPUPORT_TRG_CHAN_SHIFT) |
              (((size >> 32) & 0xfffffull) << GPUPORT_TRG_EXT_SIZE_SHIFT);
    t->w[1] = ((src_off >> GPUPORT_TRG_LOW_OFF_BITS) << 32) |
              (dst_off >> GPUPORT_TRG_LOW_OFF_BITS);
}

/** The op of a trigger's word 0.
 *  @return a gpuport_trigger_op_t value */
GPUPORT_HD uint32_t gpuport_trigger_op(uint64_t w0)
{
    return (uint32_t)((w0 >> GPUPORT_TRG_OP_SHIFT) & 0xf);
}

/** Flush progress that the proxy publishes per channel and FIFO (the
 *  position after the last complete operation) carries this bit when the
 *  channel was in error at publication: a device flush then needs no second
 *  load across PCIe to learn the channel's state on the way that succeeds. */
#define GPUPORT_FLUSHED_FAILED (1ull << 63)

/** How many signals a decoded SIGNAL trigger carries: its size, 0 counting
 *  as one (a host's signal, and one thread's, push size 0).
 *  @return 1 .. 2^32 - 1 for a lone trigger, up to GPUPORT_TRIGGER_SIZE_MAX
 *  behind an EXT slot */
GPUPORT_HD uint64_t gpuport_trigger_signals(const gpuport_op_desc_t *d)
{
    return d->size ? d->size : 1;
}

/** SIGNAL and FLUSH carry nothing in word 1: the proxy ignores it, so a
 *  producer may leave it unwritten (the device API does: one store).
 *  @return 1 for SIGNAL and FLUSH, else 0 */
GPUPORT_HD int gpuport_trigger_word1_unused(uint32_t op)
{
    return op == GPUPORT_OP_SIGNAL || op == GPUPORT_OP_FLUSH;
}

/** The channel id of a trigger's word 0.
 *  @return the id, below GPUPORT_TRIGGER_MAX_CHANNELS */
GPUPORT_HD uint32_t gpuport_trigger_channel(uint64_t w0)
{
    return (uint32_t)((w0 >> GPUPORT_TRG_CHAN_SHIFT) & (GPUPORT_TRIGGER_MAX_CHANNELS - 1));
}

/** Whether the n triggers t[0..n) are a run that a producer outside the
 *  library may push for `channel`: one operation of the public API (PUT,
 *  SIGNAL, PUT_SIGNAL, FLUSH, PUT_VALUE, PUT_VALUE_SIGNAL, GET, ATOMIC_ADD,
 *  ACC_*), behind an EXT slot only for a sized op (a put, a get, an
 *  accumulate: n == 2), every slot naming that channel. CLOSE is
 *  gpuport_channel_destroy's alone: pushed by anyone else it would close the
 *  channel under its owner; a stray EXT would lend its high bits to the next
 *  producer's trigger. The device API refuses anything else before it
 *  reserves a slot.
 *  @return 1 if the run may be pushed, else 0 */
GPUPORT_HD int gpuport_trigger_pushable(const gpuport_trigger_t *t, uint32_t n, uint32_t channel)
{
    uint32_t op;

    if (n < 1 || n > 2)
        return 0;
    for (uint32_t i = 0; i < n; i++)
        if (gpuport_trigger_channel(t[i].w[0]) != channel)
            return 0;
    op = gpuport_trigger_op(t[n - 1].w[0]);
    if (n == 2)
        return gpuport_trigger_op(t[0].w[0]) == GPUPORT_OP_EXT &&
               (op == GPUPORT_OP_PUT || op == GPUPORT_OP_PUT_SIGNAL || op == GPUPORT_OP_GET ||
                gpuport_acc_elem_size(op) != 0);
    return op == GPUPORT_OP_PUT || op == GPUPORT_OP_SIGNAL || op == GPUPORT_OP_PUT_SIGNAL ||
           op == GPUPORT_OP_FLUSH || gpuport_trigger_is_value(op) || op == GPUPORT_OP_GET ||
           gpuport_acc_elem_size(op) != 0;
}

/** Decodes a main trigger; `ext` is the EXT trigger in front of it, or NULL. */
GPUPORT_HD void gpuport_trigger_decode(const gpuport_trigger_t *t, const gpuport_trigger_t *ext,
                                       gpuport_op_desc_t *d)
{
    uint64_t w0 = t->w[0], w1 = t->w[1];
    d->op = gpuport_trigger_op(w0);
    d->channel = gpuport_trigger_channel(w0);
    if (gpuport_trigger_is_value(d->op)) {
        d->dst_off = (w0 & ((1ull << GPUPORT_TRG_VALUE_OFF_BITS) - 1)) << 3;
        d->src_off = 0;
        d->size = 8;
        d->value = w1;
        return;
    }
    d->value = 0;
    d->size = (w0 >> GPUPORT_TRG_SIZE_SHIFT) & 0xffffffffull;
    d->src_off = (((w0 >> GPUPORT_TRG_SRCHI_SHIFT) & 0x3f) << 32) | (w1 >> 32);
    d->dst_off = ((w0 & 0x3f) << 32) | (w1 & 0xffffffffull);
    if (ext) {
        d->size |= ((ext->w[0] >> GPUPORT_TRG_EXT_SIZE_SHIFT) & 0xfffffull) << 32;
        d->src_off |= (ext->w[1] >> 32) << GPUPORT_TRG_LOW_OFF_BITS;
        d->dst_off |= (ext->w[1] & 0x3ffffffull) << GPUPORT_TRG_LOW_OFF_BITS;
    }
}

/* ---- The range rule: one check for the host API, the proxy and kernels ----
 * Offsets and sizes may be any 64-bit values: nothing is added, so no
 * off + size wraps around into a range that looks inside. */

/**
 * Whether the bytes [off, off + size) lie within a region; size 0 fits at
 * any offset up to region_size. Host and device; thread-safe.
 * @param off         first byte, from the region's start
 * @param size        bytes
 * @param region_size the region's size in bytes
 * @return 1 if the range fits, else 0
 */
GPUPORT_HD int gpuport_range_fits(uint64_t off, uint64_t size, uint64_t region_size)
{
    return off <= region_size && size <= region_size - off;
}

/**
 * Whether a put is within both regions and its size can be encoded: the
 * rule gpuport_channel_put, gpuport_put and the proxy apply. A put that is
 * not is refused with GPUPORT_ERR_OUT_OF_RANGE (host and device calls,
 * nothing queued) or fails its channel with it (the proxy). Host and device;
 * thread-safe.
 * @param dst_off  offset into the destination
 * @param src_off  offset into the source
 * @param size     bytes to copy (at most GPUPORT_TRIGGER_SIZE_MAX)
 * @param src_size the source region's size
 * @param dst_size the destination region's size
 * @return 1 if the put may be queued, else 0
 */
GPUPORT_HD int gpuport_put_fits(uint64_t dst_off, uint64_t src_off, uint64_t size,
                                uint64_t src_size, uint64_t dst_size)
{
    return size <= GPUPORT_TRIGGER_SIZE_MAX && gpuport_range_fits(src_off, size, src_size) &&
           gpuport_range_fits(dst_off, size, dst_size);
}

/**
 * Whether a put_value's offset is a multiple of 8 (else the call is refused
 * with GPUPORT_ERR_INVALID_ARG). Host and device; thread-safe.
 * @param dst_off offset into the destination
 * @return 1 if aligned, else 0
 */
GPUPORT_HD int gpuport_value_aligned(uint64_t dst_off)
{
    return dst_off % 8 == 0;
}

/**
 * Whether a put_value's 8 bytes may be written at dst_off: aligned, within
 * the region (no source is read) and within what a value trigger carries.
 * When not, gpuport_value_aligned tells the two refusals apart:
 * GPUPORT_ERR_INVALID_ARG if it is not aligned, else GPUPORT_ERR_OUT_OF_RANGE.
 * Host and device; thread-safe.
 * @param dst_off  offset into the destination
 * @param dst_size the destination region's size
 * @return 1 if the value may be queued, else 0
 */
GPUPORT_HD int gpuport_value_fits(uint64_t dst_off, uint64_t dst_size)
{
    return gpuport_value_aligned(dst_off) && dst_off <= GPUPORT_TRIGGER_VALUE_OFF_MAX &&
           gpuport_range_fits(dst_off, 8, dst_size);
}

/**
 * Whether an accumulate of `size` bytes of elements of `elem` bytes is well
 * formed: at least one element, a whole number of them, both offsets
 * multiples of the element size (else GPUPORT_ERR_INVALID_ARG); the range
 * rule is gpuport_put_fits's (else GPUPORT_ERR_OUT_OF_RANGE). Host and
 * device; thread-safe.
 * @param dst_off offset into the peer's destination
 * @param src_off offset into the source
 * @param size    bytes (elements times elem)
 * @param elem    element size: 2, 4 or 8 (gpuport_acc_elem_size)
 * @return 1 if well formed, else 0
 */
GPUPORT_HD int gpuport_acc_aligned(uint64_t dst_off, uint64_t src_off, uint64_t size,
                                   uint32_t elem)
{
    return elem != 0 && size != 0 && size % elem == 0 && dst_off % elem == 0 &&
           src_off % elem == 0;
}

#endif
