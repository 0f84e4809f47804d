/*
 * gpuport_device_impl.h: the implementation of the device calls of
 * gpuport_device.h, which includes it; not API. The gpuport_dev_* (port
 * channels) and gpuport_mdev_* (memory channels) functions, the back-off
 * type and the copy macro here may change or go in any release: call
 * gpuport_put, gpuport_memory_put and the other calls of gpuport_device.h
 * instead. The API reference and the man pages leave this file out.
 */
#ifndef GPUPORT_GPUPORT_DEVICE_IMPL_H
#define GPUPORT_GPUPORT_DEVICE_IMPL_H

#if !defined(GPUPORT_GPUPORT_DEVICE_H) || !defined(GPUPORT_DEV)
#error "include gpuport/gpuport_device.h, not gpuport/gpuport_device_impl.h"
#endif

/* the device FIFO's reservation, with CUDA's atomics */
#define GPUPORT_GRANT_FN static __device__ __forceinline__
#define gpuport_grant_add(p, v) atomicAdd((p), (v))
#define gpuport_grant_load(p) (*(volatile unsigned long long *)(p))
#include "gpuport/gpuport_fifo_grant.h"
#undef gpuport_grant_load
#undef gpuport_grant_add
#undef GPUPORT_GRANT_FN

/* The scope of a call (gpuport_scope_t): which threads call it together,
 * every one with the same arguments. The helpers below are what a scope
 * changes in an operation's one implementation; with GPUPORT_SCOPE_THREAD,
 * a constant in every per-thread call, each folds to a constant or to
 * nothing (no barrier, no shuffle). A warp's threads are the block's linear
 * thread indices 32k .. 32k + 31, the last warp of a block of other than a
 * multiple of 32 threads fewer: every one of them must call. */

/** This thread's linear index in its block. */
GPUPORT_DEV uint32_t gpuport_scope_block_rank(void)
{
    return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}

/** The threads of this thread's warp, as a mask of lanes. */
GPUPORT_DEV unsigned int gpuport_scope_warp_mask(void)
{
    uint32_t left = blockDim.x * blockDim.y * blockDim.z - (gpuport_scope_block_rank() & ~31u);
    return left >= 32 ? 0xffffffffu : (1u << left) - 1;
}

/** This thread's rank in scope s: 0 for a thread, its lane, its index in the block. */
GPUPORT_DEV uint32_t gpuport_scope_rank(gpuport_scope_t s)
{
    if (s == GPUPORT_SCOPE_THREAD)
        return 0;
    return s == GPUPORT_SCOPE_WARP ? gpuport_scope_block_rank() & 31u : gpuport_scope_block_rank();
}

/** The threads of scope s. */
GPUPORT_DEV uint32_t gpuport_scope_size(gpuport_scope_t s)
{
    if (s == GPUPORT_SCOPE_THREAD)
        return 1;
    return s == GPUPORT_SCOPE_WARP ? (uint32_t)__popc(gpuport_scope_warp_mask())
                                   : blockDim.x * blockDim.y * blockDim.z;
}

/** A barrier of scope s, which orders memory too: nothing, __syncwarp, __syncthreads. */
GPUPORT_DEV void gpuport_scope_sync(gpuport_scope_t s)
{
    if (s == GPUPORT_SCOPE_WARP)
        __syncwarp(gpuport_scope_warp_mask());
    else if (s == GPUPORT_SCOPE_BLOCK)
        __syncthreads();
}

/** 1 in the thread of scope s that acts alone for it (rank 0). */
GPUPORT_DEV int gpuport_scope_leader(gpuport_scope_t s)
{
    return gpuport_scope_rank(s) == 0;
}

/** The leader's st, in every thread of scope s, after a barrier of the
 *  scope: what the leader did before it (a wait's acquire, a flush) is then
 *  every thread's. A block's word is written between two barriers, so a
 *  share right after another cannot overwrite it before every thread has
 *  read it. */
GPUPORT_DEV int gpuport_scope_share(gpuport_scope_t s, int st)
{
    if (s == GPUPORT_SCOPE_THREAD)
        return st;
    if (s == GPUPORT_SCOPE_WARP) {
        unsigned int mask = gpuport_scope_warp_mask();
        __syncwarp(mask); /* orders memory; a shuffle alone does not */
        return __shfl_sync(mask, st, 0);
    }
    __shared__ int word;
    __syncthreads();
    if (gpuport_scope_leader(s))
        word = st;
    __syncthreads();
    return word;
}

/** A waiting call's back-off: after `spin` polls that found nothing, each
 *  further poll is preceded by a pause that doubles from 32 ns up to `cap`
 *  (__nanosleep sleeps between 0 and twice its argument, at most 1 ms: PTX
 *  ISA, nanosleep). A waiter that finds its word early, as on the busy path,
 *  never pauses; one that waits long issues a load per pause instead of
 *  back to back, leaving the issue slots of a shared GPU to the kernels it
 *  waits for. cap 0: no pause ever. */
typedef struct gpuport_dev_backoff {
    uint32_t polls;    /**< polls so far */
    uint32_t pause_ns; /**< the last pause */
} gpuport_dev_backoff_t;

/** The GPU's global timer, in nanoseconds. */
GPUPORT_DEV uint64_t gpuport_dev_now_ns(void)
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/** A system-scope acquire load: a word that the host (or the proxy) writes. */
GPUPORT_DEV uint64_t gpuport_dev_load_sys(const volatile uint64_t *p)
{
    uint64_t v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

/** gpuport_dev_load_sys of a 32-bit word. */
GPUPORT_DEV int32_t gpuport_dev_load_sys32(const volatile int32_t *p)
{
    int32_t v;
    asm volatile("ld.acquire.sys.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

/** A relaxed system-scope load of a 32-bit word in host memory: for the
 *  error words an operation reports after it pushes. Unlike
 *  gpuport_dev_load_sys32 it orders nothing after it, so its trip across
 *  PCIe overlaps the push and the other word's load (two acquire loads cost
 *  two round trips before the push: 1 KiB puts at 61-67 % of the copy
 *  engine on one H100, against 92 % without them). */
GPUPORT_DEV int32_t gpuport_dev_peek_sys32(const volatile int32_t *p)
{
    int32_t v;
    asm volatile("ld.relaxed.sys.global.s32 %0, [%1];" : "=r"(v) : "l"(p));
    return v;
}

/** Deadline bookkeeping for spinning calls of either channel kind: returns
 *  1 once timeout_ns (0: none) passed (*start, 0 at first, holds when the
 *  spin began). */
GPUPORT_DEV int gpuport_dev_deadline(uint64_t timeout_ns, uint64_t *start)
{
    uint64_t now;
    if (timeout_ns == 0)
        return 0;
    now = gpuport_dev_now_ns();
    if (*start == 0) {
        *start = now;
        return 0;
    }
    return now - *start > timeout_ns;
}

/** Prints which operation of which channel (`kind`: "channel", "memory
 *  channel") is stuck; returns GPUPORT_ERR_TIMEOUT. */
GPUPORT_DEV int gpuport_dev_report_stuck(const char *kind, int rank, uint32_t id, int peer,
                                         uint64_t timeout_ns, const char *op)
{
    printf("gpuport: rank %d, %s %u (to rank %d): %s stuck for more than %llu ms "
           "(block %d, thread %d); failing with GPUPORT_ERR_TIMEOUT\n",
           rank, kind, id, peer, op, (unsigned long long)(timeout_ns / 1000000),
           (int)blockIdx.x, (int)threadIdx.x);
    return GPUPORT_ERR_TIMEOUT;
}

/** Takes one arrived signal of a channel of either kind: 1 taken, 0 none
 *  (inbound: the count received; consumed: the count device waiters took,
 *  in device memory, shared by every device waiter of the channel). */
GPUPORT_DEV int gpuport_dev_take_from(const volatile uint64_t *inbound,
                                      unsigned long long *consumed)
{
    unsigned long long c = *(volatile unsigned long long *)consumed;
    while (gpuport_dev_load_sys(inbound) > c) {
        unsigned long long seen = atomicCAS(consumed, c, c + 1);
        if (seen == c)
            return 1;
        c = seen;
    }
    return 0;
}

/** A channel's own error (its status word), else the peer's word:
 *  GPUPORT_ERR_CLOSED for its orderly close, GPUPORT_ERR_PEER for its
 *  failure or death; else 0. Anything but 0: no signal will come. */
GPUPORT_DEV int gpuport_dev_failed_from(const volatile int32_t *status,
                                        const volatile int32_t *peer_status)
{
    int st = gpuport_dev_load_sys32(status);
    if (st)
        return st;
    st = gpuport_dev_load_sys32(peer_status);
    if (st == GPUPORT_OK)
        return 0;
    return st == GPUPORT_ERR_CLOSED ? GPUPORT_ERR_CLOSED : GPUPORT_ERR_PEER;
}

/** gpuport_dev_deadline of a port channel's limit. */
GPUPORT_DEV int gpuport_dev_expired(const gpuport_port_channel_dev_t *ch, uint64_t *start)
{
    return gpuport_dev_deadline(ch->timeout_ns, start);
}

/** One step of a gpuport_dev_backoff_t (zeroed before the first poll). */
GPUPORT_DEV void gpuport_dev_pause(gpuport_dev_backoff_t *b, uint32_t spin, uint32_t cap)
{
    if (cap == 0 || b->polls < spin) {
        b->polls++;
        return;
    }
    b->pause_ns = b->pause_ns ? b->pause_ns * 2 : 32;
    if (b->pause_ns > cap)
        b->pause_ns = cap;
    __nanosleep(b->pause_ns);
}

/** Prints which operation of which channel is stuck; returns GPUPORT_ERR_TIMEOUT. */
GPUPORT_DEV int gpuport_dev_stuck(const gpuport_port_channel_dev_t *ch, const char *op)
{
    return gpuport_dev_report_stuck("channel", ch->rank, ch->id, ch->peer, ch->timeout_ns, op);
}

/** GPUPORT_OK for a handle of this header's layout; else prints both layouts
 *  and returns GPUPORT_ERR_VERSION. Reads only the layout word, which every
 *  version keeps first: the rest of a handle of another layout is not this
 *  code's to read. */
GPUPORT_DEV int gpuport_dev_layout(const gpuport_port_channel_dev_t *ch)
{
    if (ch->layout == GPUPORT_CHANNEL_DEV_LAYOUT)
        return GPUPORT_OK;
    printf("gpuport: a channel handle of layout version %u (%u bytes; version 0: never filled "
           "by gpuport_channel_device) reached device code compiled for layout version %u (%u "
           "bytes) (block %d, thread %d); failing with GPUPORT_ERR_VERSION\n",
           GPUPORT_LAYOUT_VERSION(ch->layout), GPUPORT_LAYOUT_SIZE(ch->layout),
           GPUPORT_LAYOUT_VERSION(GPUPORT_CHANNEL_DEV_LAYOUT),
           GPUPORT_LAYOUT_SIZE(GPUPORT_CHANNEL_DEV_LAYOUT), (int)blockIdx.x, (int)threadIdx.x);
    return GPUPORT_ERR_VERSION;
}

/** Appends n (1 or 2) encoded triggers of this channel as one contiguous run;
 *  *pos_p gets the position of the last. Refuses (GPUPORT_ERR_INVALID_ARG),
 *  before it reserves a slot, any run that gpuport_trigger_pushable refuses:
 *  another channel's, CLOSE, a stray EXT, an unknown op. Slots are reserved
 *  only with room behind them (gpuport_fifo_grant.h), so a pusher never
 *  holds a slot it cannot write. One that times out (the FIFO stayed full
 *  for the time limit: the proxy stopped consuming, or every slot was taken
 *  all that time) has reserved nothing: it says so in the channel's
 *  give-up word, and the proxy fails the channel with GPUPORT_ERR_TIMEOUT
 *  before it carries out any trigger pushed after (a later put or signal
 *  of the channel never passes for one whose data was not sent). Other
 *  channels and kernels go on, whatever the number of give-ups.
 *  @retval GPUPORT_OK pushed
 *  @retval GPUPORT_ERR_VERSION a handle of another layout
 *  @retval GPUPORT_ERR_INVALID_ARG a run this channel's user may not push
 *  @retval GPUPORT_ERR_TIMEOUT the FIFO stayed full for the handle's time limit */
GPUPORT_DEV int gpuport_dev_fifo_push(const gpuport_port_channel_dev_t *ch,
                                      const gpuport_trigger_t *t, uint32_t n, uint64_t *pos_p)
{
    const gpuport_fifo_dev_t *f = &ch->fifo;
    unsigned long long pos;
    uint64_t start = 0;
    int st = gpuport_dev_layout(ch);

    if (st)
        return st;
    if (!gpuport_trigger_pushable(t, n, ch->id)) {
        printf("gpuport: rank %d, channel %u (to rank %d): %u trigger(s) starting with op %u is "
               "not a run a kernel may push (only the device API's operations, on their own "
               "channel) (block %d, thread %d); refused with GPUPORT_ERR_INVALID_ARG\n",
               ch->rank, ch->id, ch->peer, n, n ? gpuport_trigger_op(t[0].w[0]) : 0u,
               (int)blockIdx.x, (int)threadIdx.x);
        return GPUPORT_ERR_INVALID_ARG;
    }
    if (!gpuport_fifo_grant(f->granted, f->head, f->tail_cache, f->size, n, 1, &pos)) {
        gpuport_dev_backoff_t b = {0, 0};
        /* Wait for room, holding nothing. One waiter at a time reads the
         * host's tail across PCIe (the one that takes the poller word),
         * so that thousands of waiting threads do not flood the bus the
         * triggers travel on; the others watch its device copy. */
        do {
            gpuport_dev_pause(&b, ch->spin, ch->backoff_ns);
            if (atomicExch(f->poller, 1u) == 0u) {
                atomicMax(f->tail_cache, (unsigned long long)gpuport_dev_load_sys(f->tail));
                atomicExch(f->poller, 0u);
            }
            if (gpuport_dev_expired(ch, &start)) {
                /* nothing reserved; the proxy is told which channel gave
                 * up before any later trigger of this thread can reach it
                 * (the fence orders both words before this thread's later
                 * stores) */
                asm volatile("st.relaxed.sys.global.s32 [%0], %1;" ::"l"(ch->gave_up), "r"(1)
                             : "memory");
                asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(f->gave_up_any), "r"(1u)
                             : "memory");
                __threadfence_system();
                return gpuport_dev_stuck(ch, "push into a full FIFO (nothing was queued)");
            }
        } while (!gpuport_fifo_grant(f->granted, f->head, f->tail_cache, f->size, n, 0, &pos));
    }
    for (uint32_t i = 0; i < n; i++) {
        uint64_t p = pos + i;
        gpuport_trigger_t *slot = &f->slots[p & (f->size - 1)];
        uint64_t w0 = t[i].w[0] | (gpuport_trigger_parity(p, f->log2_size) << GPUPORT_TRG_PARITY_SHIFT);
        if (gpuport_trigger_word1_unused(gpuport_trigger_op(w0))) {
            /* one relaxed store: nothing in word 1 to order before it, and
             * no data of this thread's that the proxy acts on (the FIFO
             * keeps the order with earlier triggers); saves a system-scope
             * fence and a PCIe write on the flush a kernel waits for */
            asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(&slot->w[0]), "l"(w0)
                         : "memory");
            continue;
        }
        asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(&slot->w[1]), "l"(t[i].w[1])
                     : "memory");
        asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(&slot->w[0]), "l"(w0)
                     : "memory");
    }
    *pos_p = pos + n - 1;
    return GPUPORT_OK;
}

/** The channel's error state (GPUPORT_OK or the error), read across the bus. */
GPUPORT_DEV int gpuport_dev_check(const gpuport_port_channel_dev_t *ch)
{
    return gpuport_dev_load_sys32(ch->status);
}

/** The channel's state as the calls below return it, from its two words
 *  loaded before the push (own: this side's status, peer: the peer's word)
 *  and the push's result: the push's error, else this side's error, else
 *  GPUPORT_ERR_CLOSED once the peer closed its side, GPUPORT_ERR_PEER once
 *  it failed or died. The words are loaded first and used last, so their
 *  trip across PCIe overlaps the push. An operation pushed into a channel
 *  that had failed or closed is dropped by the proxy, not carried out. */
GPUPORT_DEV int gpuport_dev_pushed(int rc, int32_t own, int32_t peer)
{
    if (rc)
        return rc;
    if (own)
        return own;
    if (peer == GPUPORT_OK)
        return GPUPORT_OK;
    return peer == GPUPORT_ERR_CLOSED ? GPUPORT_ERR_CLOSED : GPUPORT_ERR_PEER;
}

/** The channel's two end words as the pushes read them (own: this side's
 *  error, peer: the peer's word): from the channel's copy in device memory
 *  (ch->state, a read that stays on the GPU), else, for a handle without
 *  one, from the host words. Reading the host words across PCIe on every
 *  push set the 4-warp signal rate (its pushes at 28-30 M/s with the two
 *  reads, 188 M/s without, one H100). The copy holds what a host call of
 *  the channel reported and what a device wait, poll or flush of it saw
 *  (gpuport_dev_note_end): a push after either says the end; one before
 *  it is dropped by the proxy, and the flush or wait after it says the end. */
GPUPORT_DEV void gpuport_dev_end_words(const gpuport_port_channel_dev_t *ch, int32_t *own,
                                       int32_t *peer)
{
    if (ch->state) {
        uint64_t v;
        asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(ch->state));
        *own = (int32_t)(uint32_t)v;
        *peer = (int32_t)(uint32_t)(v >> 32);
        return;
    }
    *own = gpuport_dev_peek_sys32(ch->status);
    *peer = gpuport_dev_peek_sys32(ch->peer_status);
}

/** Copies the channel's two host end words into its device copy, each
 *  only while the copy's is 0 (the first end sticks, as on the host): for
 *  the device calls that saw an end in the host words. */
GPUPORT_DEV void gpuport_dev_note_end(const gpuport_port_channel_dev_t *ch)
{
    int32_t own, peer;

    if (!ch->state)
        return;
    own = gpuport_dev_load_sys32(ch->status);
    peer = gpuport_dev_load_sys32(ch->peer_status);
    if (own)
        atomicCAS((int *)&ch->state[0], 0, own);
    if (peer)
        atomicCAS((int *)&ch->state[1], 0, peer);
}

/** Pushes one sized operation (PUT, SIGNAL, PUT_SIGNAL, FLUSH, GET, ACC_*)
 *  without the checks of the calls below; gpuport_dev_fifo_push refuses any other op.
 *  It does not read the channel's error state (the calls below do); a
 *  failed channel's operations are dropped by the proxy and the error
 *  reaches flush and wait. Returns as gpuport_dev_fifo_push. */
GPUPORT_DEV int gpuport_dev_push_op(const gpuport_port_channel_dev_t *ch, uint32_t op,
                                    uint64_t dst_off, uint64_t src_off, uint64_t size,
                                    uint64_t *pos_p)
{
    gpuport_trigger_t t[2];
    uint32_t n = 0;

    if (gpuport_trigger_needs_ext(src_off, dst_off, size))
        gpuport_trigger_encode_ext(&t[n++], ch->id, src_off, dst_off, size);
    gpuport_trigger_encode(&t[n++], op, ch->id, src_off, dst_off, size);
    return gpuport_dev_fifo_push(ch, t, n, pos_p);
}

/* The proxy checks offsets again and fails the channel on a bad trigger;
 * checking here too lets a kernel see its own mistake at once. */
GPUPORT_DEV int gpuport_dev_put_fits(const gpuport_port_channel_dev_t *ch, uint64_t dst_off,
                                     uint64_t src_off, uint64_t size)
{
    return gpuport_put_fits(dst_off, src_off, size, ch->src_size, ch->dst_size);
}

/* Writes value (8 bytes) at dst_off of the peer's destination, as the host's
 * gpuport_channel_put_value: dst_off a multiple of 8, else
 * GPUPORT_ERR_INVALID_ARG; dst_off + 8 within the region, else
 * GPUPORT_ERR_OUT_OF_RANGE; one trigger, no source. */
GPUPORT_DEV int gpuport_dev_value_check(const gpuport_port_channel_dev_t *ch, uint64_t dst_off)
{
    if (gpuport_value_fits(dst_off, ch->dst_size))
        return GPUPORT_OK;
    return gpuport_value_aligned(dst_off) ? GPUPORT_ERR_OUT_OF_RANGE : GPUPORT_ERR_INVALID_ARG;
}

/** Pushes one value op (PUT_VALUE, PUT_VALUE_SIGNAL, ATOMIC_ADD) without the
 *  checks of the calls below; returns as gpuport_dev_fifo_push. */
GPUPORT_DEV int gpuport_dev_push_value(const gpuport_port_channel_dev_t *ch, uint32_t op,
                                       uint64_t dst_off, uint64_t value, uint64_t *pos_p)
{
    gpuport_trigger_t t;

    gpuport_trigger_encode_value(&t, op, ch->id, dst_off, value);
    return gpuport_dev_fifo_push(ch, &t, 1, pos_p);
}

/** The accumulate op of a gpuport_dtype_t (GPUPORT_OP_ACC_*: INT64 and
 *  UINT64 add the same bits); 0 for any other value. */
GPUPORT_DEV uint32_t gpuport_dev_acc_op(int type)
{
    switch (type) {
    case GPUPORT_INT64:
    case GPUPORT_UINT64: return GPUPORT_OP_ACC_INT64;
    case GPUPORT_FLOAT32: return GPUPORT_OP_ACC_FLOAT32;
    case GPUPORT_BFLOAT16: return GPUPORT_OP_ACC_BFLOAT16;
    default: return 0;
    }
}

/** Whether the channel's transport carries rma op `op` (GET, ATOMIC_ADD,
 *  ACC_*), as the host calls and the proxy ask it (gpuport_rma_check). The
 *  proxy would fail the channel on one it does not; a kernel is told first. */
GPUPORT_DEV int gpuport_dev_rma_carried(const gpuport_port_channel_dev_t *ch, uint32_t op)
{
    return op < 32 && ((ch->rma_ops >> op) & 1u);
}

/** Whether an element of `elem` bytes (2, 4 or 8) at dst_off of the peer's
 *  destination has an aligned address there, as an atomic add needs (the
 *  proxy fails the channel on one that has not). */
GPUPORT_DEV int gpuport_dev_peer_aligned(const gpuport_port_channel_dev_t *ch, uint64_t dst_off,
                                         uint32_t elem)
{
    return (ch->dst_addr_mod8 + dst_off) % elem == 0;
}

/** An accumulate's rules, in the order of the host's (gpuport_rma_check):
 *  elements whole and offsets aligned (GPUPORT_ERR_INVALID_ARG), both ranges
 *  within their regions (GPUPORT_ERR_OUT_OF_RANGE), the peer's address
 *  aligned (GPUPORT_ERR_INVALID_ARG), the op carried
 *  (GPUPORT_ERR_NOT_SUPPORTED); GPUPORT_OK when all hold. */
GPUPORT_DEV int gpuport_dev_acc_check(const gpuport_port_channel_dev_t *ch, uint32_t op,
                                      uint64_t dst_off, uint64_t src_off, uint64_t size)
{
    uint32_t elem = gpuport_acc_elem_size(op);

    if (!gpuport_acc_aligned(dst_off, src_off, size, elem))
        return GPUPORT_ERR_INVALID_ARG;
    if (!gpuport_dev_put_fits(ch, dst_off, src_off, size))
        return GPUPORT_ERR_OUT_OF_RANGE;
    if (!gpuport_dev_peer_aligned(ch, dst_off, elem))
        return GPUPORT_ERR_INVALID_ARG;
    if (!gpuport_dev_rma_carried(ch, op))
        return GPUPORT_ERR_NOT_SUPPORTED;
    return GPUPORT_OK;
}

/** Takes one arrived signal: 1 taken, 0 none (the count in device memory
 *  is shared by every device waiter of the channel). */
GPUPORT_DEV int gpuport_dev_take(const gpuport_port_channel_dev_t *ch)
{
    return gpuport_dev_take_from(ch->inbound, ch->consumed);
}

/** This side's error (its status), else the peer's word: GPUPORT_ERR_CLOSED
 *  for its orderly close, GPUPORT_ERR_PEER for its failure or death; else 0.
 *  Anything but 0: no signal will come. */
GPUPORT_DEV int gpuport_dev_failed(const gpuport_port_channel_dev_t *ch)
{
    int st = gpuport_dev_failed_from(ch->status, ch->peer_status);

    if (st)
        gpuport_dev_note_end(ch);
    return st;
}

/** GPUPORT_OK for a memory-channel handle of this header's layout; else
 *  prints both and returns GPUPORT_ERR_VERSION. */
GPUPORT_DEV int gpuport_mdev_layout(const gpuport_memory_channel_dev_t *ch)
{
    if (ch->layout == GPUPORT_MEMORY_CHANNEL_DEV_LAYOUT)
        return GPUPORT_OK;
    printf("gpuport: a memory-channel handle of layout version %u (%u bytes; version 0: never "
           "filled by gpuport_memory_channel_device) reached device code compiled for layout "
           "version %u (%u bytes) (block %d, thread %d); failing with GPUPORT_ERR_VERSION\n",
           GPUPORT_LAYOUT_VERSION(ch->layout), GPUPORT_LAYOUT_SIZE(ch->layout),
           GPUPORT_LAYOUT_VERSION(GPUPORT_MEMORY_CHANNEL_DEV_LAYOUT),
           GPUPORT_LAYOUT_SIZE(GPUPORT_MEMORY_CHANNEL_DEV_LAYOUT), (int)blockIdx.x,
           (int)threadIdx.x);
    return GPUPORT_ERR_VERSION;
}

/** As gpuport_dev_expired, for a memory channel. */
GPUPORT_DEV int gpuport_mdev_expired(const gpuport_memory_channel_dev_t *ch, uint64_t *start)
{
    return gpuport_dev_deadline(ch->timeout_ns, start);
}

/** As gpuport_dev_stuck, for a memory channel. */
GPUPORT_DEV int gpuport_mdev_stuck(const gpuport_memory_channel_dev_t *ch, const char *op)
{
    return gpuport_dev_report_stuck("memory channel", ch->rank, ch->id, ch->peer, ch->timeout_ns,
                                    op);
}

/** As gpuport_dev_failed, for a memory channel. */
GPUPORT_DEV int gpuport_mdev_failed(const gpuport_memory_channel_dev_t *ch)
{
    return gpuport_dev_failed_from(ch->status, ch->peer_status);
}

/** One step of gpuport_mdev_copy: accesses of W bytes (type T) between single
 * bytes at the ends. */
#define GPUPORT_MDEV_COPY_AS(T, W)                                                              \
    do {                                                                                        \
        uint64_t head = (W - ((uintptr_t)d & (W - 1))) & (W - 1), nv;                           \
        if (head > n)                                                                           \
            head = n;                                                                           \
        nv = (n - head) / W;                                                                    \
        for (uint64_t i = t; i < head; i += nt)                                                 \
            d[i] = s[i];                                                                        \
        for (uint64_t i = t; i < nv; i += nt)                                                   \
            ((T *)(d + head))[i] = ((const T *)(s + head))[i];                                  \
        for (uint64_t i = head + nv * W + t; i < n; i += nt)                                    \
            d[i] = s[i];                                                                        \
    } while (0)

/** Copies n bytes from s to d by threads t of nt, each with a stride of
 *  nt: the widest accesses (16, 8, 4 bytes) that the two addresses'
 *  alignment allows and n fills, single bytes at the ends (an 8-byte put
 *  is one 8-byte load and store, not eight of a byte). */
GPUPORT_DEV void gpuport_mdev_copy(unsigned char *d, const unsigned char *s, uint64_t n,
                                   uint32_t t, uint32_t nt)
{
    uintptr_t phase = (uintptr_t)d ^ (uintptr_t)s;

    if ((phase & 15) == 0 && n >= 16)
        GPUPORT_MDEV_COPY_AS(uint4, 16);
    else if ((phase & 7) == 0 && n >= 8)
        GPUPORT_MDEV_COPY_AS(unsigned long long, 8);
    else if ((phase & 3) == 0 && n >= 4)
        GPUPORT_MDEV_COPY_AS(unsigned int, 4);
    else
        for (uint64_t i = t; i < n; i += nt)
            d[i] = s[i];
}

/** A memory accumulate's checks beyond the layout, in the port channel's
 *  order, then the group's and the GPU's: GPUPORT_OK or the refusal. */
GPUPORT_DEV int gpuport_mdev_acc_check(const gpuport_memory_channel_dev_t *ch, uint32_t op,
                                       uint64_t dst_off, uint64_t src_off, uint64_t count,
                                       uint32_t thread, uint32_t nthreads)
{
    uint32_t elem = gpuport_acc_elem_size(op);
    uint64_t size = count * elem;

    if (op == 0)
        return GPUPORT_ERR_INVALID_ARG;
    if (count > UINT64_MAX / elem)
        return GPUPORT_ERR_OUT_OF_RANGE;
    if (!gpuport_acc_aligned(dst_off, src_off, size, elem))
        return GPUPORT_ERR_INVALID_ARG;
    if (!gpuport_range_fits(src_off, size, ch->src_size) ||
        !gpuport_range_fits(dst_off, size, ch->dst_size))
        return GPUPORT_ERR_OUT_OF_RANGE;
    /* the regions' own alignment: an atomic needs an aligned address, and
     * so does a load of the element */
    if ((uintptr_t)(ch->dst + dst_off) % elem || (uintptr_t)(ch->src + src_off) % elem)
        return GPUPORT_ERR_INVALID_ARG;
    if (thread >= nthreads)
        return GPUPORT_ERR_INVALID_ARG;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
    if (op == GPUPORT_OP_ACC_BFLOAT16)
        return GPUPORT_ERR_NOT_SUPPORTED; /* red.add.noftz.bf16: sm_90 and later */
#endif
    return GPUPORT_OK;
}

/** Adds the n elements of op's type at s into d, each with one relaxed
 *  atomic add at system scope, by threads t of nt (a stride of nt). The
 *  float32 add is the GPU's (atom.add.f32: rounds to nearest even, flushes
 *  subnormal inputs and results to zero in global memory); bfloat16's
 *  keeps subnormals (.noftz). */
GPUPORT_DEV void gpuport_mdev_accumulate(uint32_t op, unsigned char *d, const unsigned char *s,
                                         uint64_t n, uint32_t t, uint32_t nt)
{
    if (op == GPUPORT_OP_ACC_INT64) {
        for (uint64_t i = t; i < n; i += nt)
            atomicAdd_system((unsigned long long *)d + i, ((const unsigned long long *)s)[i]);
    } else if (op == GPUPORT_OP_ACC_FLOAT32) {
        for (uint64_t i = t; i < n; i += nt)
            atomicAdd_system((float *)d + i, ((const float *)s)[i]);
    } else {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
        for (uint64_t i = t; i < n; i += nt)
            asm volatile("red.relaxed.sys.global.add.noftz.bf16 [%0], %1;" ::"l"(
                             (unsigned short *)d + i),
                         "h"(((const unsigned short *)s)[i])
                         : "memory");
#endif
    }
}

/** Takes one arrived signal: 1 taken, 0 none. */
GPUPORT_DEV int gpuport_mdev_take(const gpuport_memory_channel_dev_t *ch)
{
    return gpuport_dev_take_from(ch->inbound, ch->consumed);
}

/** The 8 bytes of data of packet i: the source's, zero past its end. */
GPUPORT_DEV uint64_t gpuport_mdev_packet_data(const unsigned char *s, uint64_t size, uint64_t i)
{
    uint64_t v = 0, at = i * 8;
    if (at + 8 <= size && ((uintptr_t)(s + at) & 7) == 0)
        return *(const uint64_t *)(s + at);
    for (uint32_t k = 0; k < 8 && at + k < size; k++)
        v |= (uint64_t)s[at + k] << (8 * k);
    return v;
}

/** A wait until the count reaches `value` claims the signals up to value
 *  at its start: the consumed count (device memory) is raised to value
 *  then, so that the atomic is done while the wait polls. Raised once the
 *  count had arrived, it sat in front of the caller's next release (a
 *  signal): the release waits for the thread's earlier atomics, 0.3-0.4 us
 *  of an 8-byte round trip on one H100. Takes one at a time
 *  (gpuport_dev_take_from) then find no signal up to value to take, as
 *  after the wait; consumed only rises (atomicMax) while waits succeed.
 *  @return the consumed count before, for gpuport_dev_unclaim */
GPUPORT_DEV unsigned long long gpuport_dev_claim(unsigned long long *consumed, uint64_t value)
{
    return atomicMax(consumed, (unsigned long long)value);
}

/** A wait that failed gives its claim back: the consumed count returns to
 *  `was` unless another wait or take moved it since (then it is theirs). */
GPUPORT_DEV void gpuport_dev_unclaim(unsigned long long *consumed, uint64_t value,
                                     unsigned long long was)
{
    if (was < value)
        atomicCAS(consumed, (unsigned long long)value, was);
}

/** 1 once a channel's signal count (inbound) has reached `value`, else 0.
 *  Each caller loads the count itself, with acquire semantics, so what the
 *  peer wrote before its value-th signal is visible to it. */
GPUPORT_DEV int gpuport_dev_reach_from(const volatile uint64_t *inbound, uint64_t value)
{
    return gpuport_dev_load_sys(inbound) >= value;
}

/** gpuport_dev_note_end for the wait below, by handle kind: a memory
 *  channel's pushes are stores and read no copy. */
GPUPORT_DEV void gpuport_dev_noted(const gpuport_port_channel_dev_t *ch)
{
    gpuport_dev_note_end(ch);
}

GPUPORT_DEV void gpuport_dev_noted(const gpuport_memory_channel_dev_t *ch)
{
    (void)ch;
}

/** The body of gpuport_wait_until and gpuport_memory_wait_until, for a
 *  handle of either kind (Ch: gpuport_port_channel_dev_t or
 *  gpuport_memory_channel_dev_t, whose members of the same names it reads;
 *  kind: "channel" or "memory channel", for the report). Waits, with the
 *  handle's back-off, until the count reaches value; looks for the
 *  channel's or the peer's end every 64th pass (a count that reached value
 *  before the end was written still answers GPUPORT_OK); past the time
 *  limit, prints the channel, the value and the count. */
template <class Ch>
GPUPORT_DEV int gpuport_dev_wait_until(const Ch *ch, uint64_t value, const char *kind)
{
    uint64_t start = 0;
    gpuport_dev_backoff_t b = {0, 0};
    unsigned long long was = gpuport_dev_claim(ch->consumed, value);

    for (uint32_t i = 1;; i++) {
        if (gpuport_dev_reach_from(ch->inbound, value))
            return GPUPORT_OK;
        gpuport_dev_pause(&b, ch->spin, ch->backoff_ns);
        if ((i & 63) == 0) {
            int st = gpuport_dev_failed_from(ch->status, ch->peer_status);
            if (st)
                gpuport_dev_noted(ch);
            if (st && gpuport_dev_reach_from(ch->inbound, value))
                return GPUPORT_OK;
            if (st) {
                gpuport_dev_unclaim(ch->consumed, value, was);
                return st;
            }
            if (gpuport_dev_deadline(ch->timeout_ns, &start)) {
                gpuport_dev_unclaim(ch->consumed, value, was);
                printf("gpuport: rank %d, %s %u (to rank %d): wait until the signal count "
                       "reaches %llu stuck for more than %llu ms (the count is %llu) (block %d, "
                       "thread %d); failing with GPUPORT_ERR_TIMEOUT\n",
                       ch->rank, kind, ch->id, ch->peer, (unsigned long long)value,
                       (unsigned long long)(ch->timeout_ns / 1000000),
                       (unsigned long long)gpuport_dev_load_sys(ch->inbound), (int)blockIdx.x,
                       (int)threadIdx.x);
                return GPUPORT_ERR_TIMEOUT;
            }
        }
    }
}

/* Each operation below has one implementation, for every scope: the
 * per-thread calls pass GPUPORT_SCOPE_THREAD, the _warp and _block calls
 * their scope. A proxy operation is one trigger, pushed by the scope's
 * leader after a barrier of the scope (so that what its threads stored
 * into the source, and pushed, comes before it); a wait is the leader's,
 * then a barrier; the status is the leader's, shared (gpuport_scope_share).
 * Where the threads' own stores move the data (memory channels), every
 * thread copies its share; their checks are pure functions of the
 * arguments every thread passes alike, so every thread finds the same
 * status without sharing it. */

/** A port-channel operation's checks after the layout's, in the order of
 *  the host's: GPUPORT_OK or the refusal (size: a sized op's bytes). */
GPUPORT_DEV int gpuport_dev_op_check(const gpuport_port_channel_dev_t *ch, uint32_t op,
                                     uint64_t dst_off, uint64_t src_off, uint64_t size)
{
    int st;

    switch (op) {
    case GPUPORT_OP_SIGNAL:
        return GPUPORT_OK;
    case GPUPORT_OP_PUT:
    case GPUPORT_OP_PUT_SIGNAL:
        return gpuport_dev_put_fits(ch, dst_off, src_off, size) ? GPUPORT_OK
                                                                : GPUPORT_ERR_OUT_OF_RANGE;
    case GPUPORT_OP_PUT_VALUE:
    case GPUPORT_OP_PUT_VALUE_SIGNAL:
        return gpuport_dev_value_check(ch, dst_off);
    case GPUPORT_OP_ATOMIC_ADD:
        st = gpuport_dev_value_check(ch, dst_off);
        if (st)
            return st;
        if (!gpuport_dev_peer_aligned(ch, dst_off, 8))
            return GPUPORT_ERR_INVALID_ARG;
        break;
    case GPUPORT_OP_GET:
        if (!gpuport_dev_put_fits(ch, dst_off, src_off, size))
            return GPUPORT_ERR_OUT_OF_RANGE;
        break;
    default: /* the accumulates */
        return gpuport_dev_acc_check(ch, op, dst_off, src_off, size);
    }
    return gpuport_dev_rma_carried(ch, op) ? GPUPORT_OK : GPUPORT_ERR_NOT_SUPPORTED;
}

/** Pushes one checked operation (a value op by gpuport_dev_push_value, any
 *  other by gpuport_dev_push_op) with the channel's two end words loaded
 *  before it: gpuport_dev_pushed's status. */
GPUPORT_DEV int gpuport_dev_push_1(const gpuport_port_channel_dev_t *ch, uint32_t op,
                                   uint64_t dst_off, uint64_t src_off, uint64_t arg)
{
    uint64_t pos;
    int32_t own, peer;

    gpuport_dev_end_words(ch, &own, &peer);
    return gpuport_dev_pushed(gpuport_trigger_is_value(op)
                                  ? gpuport_dev_push_value(ch, op, dst_off, arg, &pos)
                                  : gpuport_dev_push_op(ch, op, dst_off, src_off, arg, &pos),
                              own, peer);
}

#if defined(__CUDA_ARCH__)
/** The lanes of the warp calling now (__activemask) that call on this
 *  channel: the same FIFO and channel id. The group a folded push stands
 *  for (gpuport_dev_signal_lanes, gpuport_dev_put_lanes). */
GPUPORT_DEV unsigned gpuport_dev_lane_group(const gpuport_port_channel_dev_t *ch)
{
    unsigned active = __activemask(), group;

    if (!(active & (active - 1)))
        return active;
    group = __match_any_sync(active, (unsigned long long)(uintptr_t)ch->fifo.head);
    return __match_any_sync(group, ch->id);
}
#endif

/** Port-channel operation op (any the device API pushes but FLUSH) in scope
 *  s, as gpuport_put and the others document it: arg is a sized op's size
 *  (SIGNAL: unused), a value op's value. The channel's two error words are
 *  loaded before the push and used after it (gpuport_dev_pushed). */
GPUPORT_DEV int gpuport_dev_op_s(const gpuport_port_channel_dev_t *ch, uint32_t op,
                                 uint64_t dst_off, uint64_t src_off, uint64_t arg,
                                 gpuport_scope_t s)
{
    int st = GPUPORT_OK;

    gpuport_scope_sync(s);
    if (gpuport_scope_leader(s)) {
        /* the layout before the sizes of a handle it cannot read */
        st = gpuport_dev_layout(ch);
        if (!st)
            st = gpuport_dev_op_check(ch, op, dst_off, src_off, arg);
        if (!st)
            st = gpuport_dev_push_1(ch, op, dst_off, src_off, arg);
    }
    return gpuport_scope_share(s, st);
}

/** gpuport_signal: the lanes of the warp that call it together on one
 *  channel (those __activemask names, grouped by FIFO and channel id) push
 *  one SIGNAL trigger whose size is their number, by the group's lowest
 *  lane, and share its status. 32 lanes signalling at once were 32
 *  triggers, 32 slot writes across PCIe and 32 turns of the proxy, whose
 *  cost per trigger then set the rate (about 20 M/s for 4 warps on one
 *  H100). A signal carries none of the caller's data (its puts went before
 *  it, each in its own trigger, and keep their FIFO order: every lane of
 *  the group pushed them before it reached this call), so which lane
 *  pushes does not matter. Where a lane's checks fail it returns alone. */
GPUPORT_DEV int gpuport_dev_signal_lanes(const gpuport_port_channel_dev_t *ch)
{
#if defined(__CUDA_ARCH__)
    unsigned group, lane;
    int st = gpuport_dev_layout(ch), leader;

    if (st)
        return st;
    group = gpuport_dev_lane_group(ch);
    leader = __ffs(group) - 1;
    asm("mov.u32 %0, %%laneid;" : "=r"(lane));
    if (lane == (unsigned)leader)
        st = gpuport_dev_push_1(ch, GPUPORT_OP_SIGNAL, 0, 0, (uint64_t)__popc(group));
    return __shfl_sync(group, st, leader);
#else
    return gpuport_dev_op_s(ch, GPUPORT_OP_SIGNAL, 0, 0, 0, GPUPORT_SCOPE_THREAD);
#endif
}

/** gpuport_put: the lanes of the warp that put on one channel together
 *  (those __activemask names, grouped by FIFO and channel id) whose bytes
 *  lie side by side in lane order, each lane's starting where the next
 *  lower lane's ended in both regions (every size above 0), push one PUT
 *  trigger of all their bytes, by the group's lowest lane, and share its
 *  status. A warp whose 32 lanes put 64 bytes each, side by side, was 32
 *  triggers, 32 slot writes across PCIe and 32 turns of the proxy, and the
 *  flusher merged the copies back into one only where the FIFO kept the
 *  warps' runs whole. The __syncwarp before the push orders every lane's
 *  stores to the source before the pushing lane's release, as in the
 *  warp-scoped calls. Any other group (a gap, another order, a size of 0)
 *  pushes lane by lane, as does a group whose whole run does not fit the
 *  regions, so that each lane gets its own put's status. */
GPUPORT_DEV int gpuport_dev_put_lanes(const gpuport_port_channel_dev_t *ch, uint64_t dst_off,
                                      uint64_t src_off, uint64_t size)
{
#if defined(__CUDA_ARCH__)
    unsigned group, lane, lower;
    int st = gpuport_dev_layout(ch);

    if (st)
        return st;
    group = gpuport_dev_lane_group(ch);
    if (group & (group - 1)) {
        int leader = __ffs(group) - 1, last = 31 - __clz(group), prev, next;
        uint64_t end_d, end_s;

        asm("mov.u32 %0, %%laneid;" : "=r"(lane));
        lower = group & ((1u << lane) - 1u);
        prev = lower ? 31 - __clz(lower) : (int)lane;
        end_d = __shfl_sync(group, dst_off + size, prev);
        end_s = __shfl_sync(group, src_off + size, prev);
        next = size > 0 && (prev == (int)lane || (end_d == dst_off && end_s == src_off));
        if (__all_sync(group, next)) {
            end_d = __shfl_sync(group, dst_off + size, last);
            __syncwarp(group);
            if (lane == (unsigned)leader) {
                uint64_t total = end_d - dst_off;

                if (end_d < dst_off || !gpuport_dev_put_fits(ch, dst_off, src_off, total))
                    st = GPUPORT_ERR_OUT_OF_RANGE;
                else
                    st = gpuport_dev_push_1(ch, GPUPORT_OP_PUT, dst_off, src_off, total);
            }
            st = __shfl_sync(group, st, leader);
            if (st != GPUPORT_ERR_OUT_OF_RANGE)
                return st;
        }
    }
#endif
    return gpuport_dev_op_s(ch, GPUPORT_OP_PUT, dst_off, src_off, size, GPUPORT_SCOPE_THREAD);
}

/** One thread's flush (gpuport_flush). */
GPUPORT_DEV int gpuport_dev_flush_1(const gpuport_port_channel_dev_t *ch)
{
    uint64_t pos, start = 0, f;
    gpuport_dev_backoff_t b = {0, 0};
    int st = gpuport_dev_push_op(ch, GPUPORT_OP_FLUSH, 0, 0, 0, &pos);

    if (st)
        return st;
    /* the proxy completes flushes of failed channels too, marked */
    while (((f = gpuport_dev_load_sys(ch->flushed)) & ~GPUPORT_FLUSHED_FAILED) <= pos) {
        if (gpuport_dev_expired(ch, &start))
            return gpuport_dev_stuck(ch, "flush");
        gpuport_dev_pause(&b, ch->spin, ch->backoff_ns);
    }
    /* the channel's state is read across PCIe only when the proxy said
     * it had failed by the time the flush completed */
    if (!(f & GPUPORT_FLUSHED_FAILED))
        return GPUPORT_OK;
    gpuport_dev_note_end(ch);
    return gpuport_dev_check(ch);
}

/** gpuport_flush in scope s: after a barrier (the scope's pushes before
 *  it), the leader's flush, its status shared. */
GPUPORT_DEV int gpuport_dev_flush_s(const gpuport_port_channel_dev_t *ch, gpuport_scope_t s)
{
    int st = GPUPORT_OK;

    gpuport_scope_sync(s);
    if (gpuport_scope_leader(s))
        st = gpuport_dev_flush_1(ch);
    return gpuport_scope_share(s, st);
}

/** One thread's wait (gpuport_wait). */
GPUPORT_DEV int gpuport_dev_wait_1(const gpuport_port_channel_dev_t *ch)
{
    uint64_t start = 0;
    gpuport_dev_backoff_t b = {0, 0};

    if (gpuport_dev_layout(ch))
        return GPUPORT_ERR_VERSION;
    for (uint32_t i = 1;; i++) {
        if (gpuport_dev_take(ch))
            return GPUPORT_OK;
        gpuport_dev_pause(&b, ch->spin, ch->backoff_ns);
        /* failures are rare: look for them every 64th pass, not on each */
        if ((i & 63) == 0) {
            int st = gpuport_dev_failed(ch);
            if (st && gpuport_dev_take(ch))
                return GPUPORT_OK; /* arrived just before the word (gpuport_poll) */
            if (st)
                return st;
            if (gpuport_dev_expired(ch, &start))
                return gpuport_dev_stuck(ch, "wait for the peer's signal");
        }
    }
}

/** gpuport_wait in scope s: the leader takes the one signal; the barrier
 *  of the share then gives every thread what the leader's acquire saw. */
GPUPORT_DEV int gpuport_dev_wait_s(const gpuport_port_channel_dev_t *ch, gpuport_scope_t s)
{
    return gpuport_scope_share(s, gpuport_scope_leader(s) ? gpuport_dev_wait_1(ch) : GPUPORT_OK);
}

/** gpuport_mdev_layout said by the leader of scope s only: a scope's
 *  threads find the same, and one message is enough. */
GPUPORT_DEV int gpuport_mdev_layout_s(const gpuport_memory_channel_dev_t *ch, gpuport_scope_t s)
{
    if (ch->layout == GPUPORT_MEMORY_CHANNEL_DEV_LAYOUT)
        return GPUPORT_OK;
    return gpuport_scope_leader(s) ? gpuport_mdev_layout(ch) : GPUPORT_ERR_VERSION;
}

/** A memory channel's put (get: its get) of `size` bytes by thread t of
 *  nt, in scope s (which only says who reports a bad handle; a get then
 *  waits at the scope's barrier, so that every thread may read all the
 *  bytes): the checks, then this thread's share of the copy. */
GPUPORT_DEV int gpuport_mdev_copy_s(const gpuport_memory_channel_dev_t *ch, int get,
                                    uint64_t dst_off, uint64_t src_off, uint64_t size,
                                    uint32_t t, uint32_t nt, gpuport_scope_t s)
{
    int st = gpuport_mdev_layout_s(ch, s);

    if (st)
        return st;
    if (!gpuport_range_fits(src_off, size, ch->src_size) ||
        !gpuport_range_fits(dst_off, size, ch->dst_size))
        return GPUPORT_ERR_OUT_OF_RANGE;
    if (t >= nt)
        return GPUPORT_ERR_INVALID_ARG;
    if (get) {
        gpuport_mdev_copy((unsigned char *)ch->src + src_off, ch->dst + dst_off, size, t, nt);
        gpuport_scope_sync(s);
    } else {
        gpuport_mdev_copy(ch->dst + dst_off, ch->src + src_off, size, t, nt);
    }
    return GPUPORT_OK;
}

/** gpuport_mdev_copy_s by the threads of scope s. */
GPUPORT_DEV int gpuport_mdev_copy_in(const gpuport_memory_channel_dev_t *ch, int get,
                                     uint64_t dst_off, uint64_t src_off, uint64_t size,
                                     gpuport_scope_t s)
{
    return gpuport_mdev_copy_s(ch, get, dst_off, src_off, size, gpuport_scope_rank(s),
                               gpuport_scope_size(s), s);
}

/** The checks of an 8-byte store or add at dst_off of the peer's
 *  destination: GPUPORT_OK or the refusal. */
GPUPORT_DEV int gpuport_mdev_value_check(const gpuport_memory_channel_dev_t *ch, uint64_t dst_off)
{
    if (!gpuport_value_aligned(dst_off))
        return GPUPORT_ERR_INVALID_ARG;
    if (!gpuport_range_fits(dst_off, 8, ch->dst_size))
        return GPUPORT_ERR_OUT_OF_RANGE;
    if ((uintptr_t)(ch->dst + dst_off) & 7)
        return GPUPORT_ERR_INVALID_ARG; /* the peer's region starts unaligned */
    return GPUPORT_OK;
}

/** gpuport_memory_put_value in scope s: the checks in every thread, the
 *  store by the leader. */
GPUPORT_DEV int gpuport_mdev_put_value_s(const gpuport_memory_channel_dev_t *ch,
                                         uint64_t dst_off, uint64_t value, gpuport_scope_t s)
{
    int st = gpuport_mdev_layout_s(ch, s);

    if (!st)
        st = gpuport_mdev_value_check(ch, dst_off);
    if (st)
        return st;
    if (gpuport_scope_leader(s))
        *(volatile unsigned long long *)(ch->dst + dst_off) = value;
    return GPUPORT_OK;
}

/** One thread's signal (gpuport_memory_signal), the layout checked. */
GPUPORT_DEV int gpuport_mdev_signal_1(const gpuport_memory_channel_dev_t *ch)
{
    unsigned long long t, seen;
    uint64_t start = 0;
    gpuport_dev_backoff_t b = {0, 0};

    if (gpuport_mdev_layout(ch))
        return GPUPORT_ERR_VERSION;
    if (ch->sem_atomic) {
        asm volatile("red.release.sys.global.add.u64 [%0], 1;" ::"l"(ch->peer_sem) : "memory");
        return GPUPORT_OK;
    }
    /* this thread's stores (its group's, through a barrier) visible before
     * its ticket: any count up to the tickets taken may then be stored */
    __threadfence_system();
    t = atomicAdd(&ch->tickets[0], 1ull) + 1;
    for (;;) {
        asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(seen) : "l"(&ch->tickets[1])
                     : "memory");
        if (seen >= t)
            return GPUPORT_OK; /* a later signaller stored it with its own */
        if (atomicCAS(&ch->tickets[2], 0ull, 1ull) == 0ull) {
            unsigned long long n;
            __threadfence(); /* after the previous holder's stores */
            n = *(volatile unsigned long long *)&ch->tickets[0];
            asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(ch->peer_sem), "l"(n)
                         : "memory");
            asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(&ch->tickets[1]), "l"(n)
                         : "memory");
            __threadfence();
            atomicExch(&ch->tickets[2], 0ull);
            return GPUPORT_OK;
        }
        if (gpuport_mdev_expired(ch, &start))
            return gpuport_mdev_stuck(ch, "signal (another signaller's store of the count)");
        gpuport_dev_pause(&b, ch->spin, ch->backoff_ns);
    }
}

/** gpuport_memory_signal in scope s: a barrier, then the leader's one
 *  signal, whose system-scope release is cumulative: it covers every store
 *  that the scope's threads made before the barrier, not only the
 *  leader's (the PTX memory model's release pattern, with the barrier's
 *  ordering between the threads). Its status is shared. */
GPUPORT_DEV int gpuport_mdev_signal_s(const gpuport_memory_channel_dev_t *ch, gpuport_scope_t s)
{
    int st = GPUPORT_OK;

    gpuport_scope_sync(s);
    if (gpuport_scope_leader(s))
        st = gpuport_mdev_signal_1(ch);
    return gpuport_scope_share(s, st);
}

/** gpuport_memory_put_with_signal in scope s: every thread its share of
 *  the copy, then gpuport_mdev_signal_s (one signal covering every store).
 *  A refused put stores nothing and signals nothing, in every thread. */
GPUPORT_DEV int gpuport_mdev_put_with_signal_s(const gpuport_memory_channel_dev_t *ch,
                                               uint64_t dst_off, uint64_t src_off,
                                               uint64_t size, gpuport_scope_t s)
{
    int st = gpuport_mdev_copy_in(ch, 0, dst_off, src_off, size, s);

    return st ? st : gpuport_mdev_signal_s(ch, s);
}

/** gpuport_memory_flush in scope s: every thread fences its own stores,
 *  then the barrier: on return the whole scope's are visible. */
GPUPORT_DEV int gpuport_mdev_flush_s(const gpuport_memory_channel_dev_t *ch, gpuport_scope_t s)
{
    (void)ch;
    __threadfence_system();
    gpuport_scope_sync(s);
    return GPUPORT_OK;
}

/** One thread's wait (gpuport_memory_wait). */
GPUPORT_DEV int gpuport_mdev_wait_1(const gpuport_memory_channel_dev_t *ch)
{
    uint64_t start = 0;
    gpuport_dev_backoff_t b = {0, 0};

    if (gpuport_mdev_layout(ch))
        return GPUPORT_ERR_VERSION;
    for (uint32_t i = 1;; i++) {
        if (gpuport_mdev_take(ch))
            return GPUPORT_OK;
        gpuport_dev_pause(&b, ch->spin, ch->backoff_ns);
        if ((i & 63) == 0) {
            int st = gpuport_mdev_failed(ch);
            if (st && gpuport_mdev_take(ch))
                return GPUPORT_OK;
            if (st)
                return st;
            if (gpuport_mdev_expired(ch, &start))
                return gpuport_mdev_stuck(ch, "wait for the peer's signal");
        }
    }
}

/** gpuport_memory_wait in scope s: the leader's, then the share's barrier
 *  (the peer's stores before its signal are then every thread's to read). */
GPUPORT_DEV int gpuport_mdev_wait_s(const gpuport_memory_channel_dev_t *ch, gpuport_scope_t s)
{
    return gpuport_scope_share(s, gpuport_scope_leader(s) ? gpuport_mdev_wait_1(ch) : GPUPORT_OK);
}

/** The least v of the threads of scope s, in every one of them (a block's
 *  word between barriers, as gpuport_scope_share's). */
GPUPORT_DEV unsigned long long gpuport_scope_min64(gpuport_scope_t s, unsigned long long v)
{
    if (s == GPUPORT_SCOPE_WARP) {
        unsigned int mask = gpuport_scope_warp_mask();
        __syncwarp(mask); /* orders memory, as in gpuport_scope_share */
        for (int lane = 0; lane < 32; lane++)
            if (mask >> lane & 1u) {
                unsigned long long o = __shfl_sync(mask, v, lane);
                v = o < v ? o : v;
            }
    } else if (s == GPUPORT_SCOPE_BLOCK) {
        __shared__ unsigned long long word;
        __syncthreads();
        if (gpuport_scope_leader(s))
            word = ~0ull;
        __syncthreads();
        if (v != ~0ull)
            atomicMin(&word, v);
        __syncthreads();
        v = word;
    }
    return v;
}

/** A barrier over n channels (port channels, or memory channels where
 *  `memory`) by the threads of scope s, thread r of k taking channels r,
 *  r + k, ...: after a barrier of the scope (its stores and pushes before
 *  the signals), each signals every channel it takes, then takes one
 *  signal of each. Every signal goes out before any wait, so no order of
 *  the channels on the peers can deadlock, and a failed channel does not
 *  keep the others' counts out of step (their waits still take their
 *  signals). Returns, in every thread, the first error of the
 *  lowest-numbered channel that had one (its signal's, else its wait's),
 *  else GPUPORT_OK. */
GPUPORT_DEV int gpuport_dev_barrier_s(const void *chs, int memory, int n, gpuport_scope_t s)
{
    const gpuport_port_channel_dev_t *pc = (const gpuport_port_channel_dev_t *)chs;
    const gpuport_memory_channel_dev_t *mc = (const gpuport_memory_channel_dev_t *)chs;
    unsigned long long first = ~0ull; /* (channel << 32) | its status, as unsigned */
    int k = (int)gpuport_scope_size(s);

    gpuport_scope_sync(s);
    for (int pass = 0; pass < 2; pass++) {
        for (int i = (int)gpuport_scope_rank(s); i < n; i += k) {
            int st;
            if (pass == 0)
                st = memory ? gpuport_mdev_signal_s(&mc[i], GPUPORT_SCOPE_THREAD)
                            : gpuport_dev_op_s(&pc[i], GPUPORT_OP_SIGNAL, 0, 0, 0,
                                               GPUPORT_SCOPE_THREAD);
            else
                st = memory ? gpuport_mdev_wait_s(&mc[i], GPUPORT_SCOPE_THREAD)
                            : gpuport_dev_wait_s(&pc[i], GPUPORT_SCOPE_THREAD);
            if (st && (unsigned long long)i < first >> 32)
                first = (unsigned long long)i << 32 | (uint32_t)st;
        }
    }
    first = gpuport_scope_min64(s, first);
    return first == ~0ull ? GPUPORT_OK : (int)(uint32_t)first;
}

#endif
