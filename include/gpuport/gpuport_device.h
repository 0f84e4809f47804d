/*
 * gpuport device API: port-channel operations called from CUDA kernels.
 *
 * The host hands out a gpuport_port_channel_dev_t (gpuport_channel_device())
 * as plain data; pass it to kernels by value or in device memory. Any number
 * of threads, warps and blocks may push into one FIFO at once, also more of
 * them than the FIFO has slots: pushers that find the ring full wait for the
 * proxy. Every call that can wait has a time limit (GPUPORT_TIMEOUT_MS at
 * the time the handle was made); on expiry it prints the rank, channel and
 * operation that is stuck and returns GPUPORT_ERR_TIMEOUT instead of hanging.
 * A channel the proxy put into an error state makes waiters return that
 * error.
 *
 * Memory model: triggers live in pinned host memory mapped into the device;
 * the producer counter in device memory (atomicAdd); the proxy's consumer
 * counter and flush progress in pinned host memory, read here with volatile
 * system-scope loads. A trigger's second word is stored first and its tag
 * word (with the lap-parity bit) last, with release semantics at system
 * scope, so the proxy never sees a valid tag with a stale payload.
 */
#ifndef GPUPORT_GPUPORT_DEVICE_H
#define GPUPORT_GPUPORT_DEVICE_H

#include <stdint.h>

#include "gpuport/gpuport.h"
#include "gpuport/gpuport_trigger.h"

typedef struct gpuport_fifo_dev {
    gpuport_trigger_t *slots;      /* pinned host memory, device-mapped */
    unsigned long long *head;      /* device memory: next position to reserve */
    const volatile uint64_t *tail; /* pinned host memory: written by the proxy */
    unsigned long long *tail_cache; /* device memory: last tail seen by any pusher */
    uint32_t size;
    uint32_t log2_size;
} gpuport_fifo_dev_t;

typedef struct gpuport_port_channel_dev {
    gpuport_fifo_dev_t fifo;
    uint32_t id;
    int32_t rank;
    int32_t peer;
    uint32_t reserved;
    uint64_t src_size;
    uint64_t dst_size;
    const volatile uint64_t *flushed;  /* host-mapped: device-FIFO flush progress */
    const volatile int32_t *status;    /* host-mapped: the channel's error state */
    const volatile uint64_t *inbound;  /* device memory: signals received */
    const volatile int32_t *peer_status; /* device memory: the peer's side failed */
    unsigned long long *consumed;      /* device memory: signals taken by wait/poll */
    uint64_t timeout_ns;               /* 0: wait forever */
} gpuport_port_channel_dev_t;

#ifdef __cplusplus
extern "C" {
#endif

/* The plain-data handle of a channel for kernels. Needs a communicator in
 * GPU mode; the handle stays valid until the channel is destroyed. Device
 * waiters and host waiters on one channel count signals separately: consume
 * a channel's signals on one side only. */
GPUPORT_API gpuport_status_t gpuport_channel_device(gpuport_channel_t ch,
                                                    gpuport_port_channel_dev_t *dev_p);

#ifdef __cplusplus
}
#endif

#if defined(__CUDACC__)

#include <stdio.h> /* device printf, for the stuck-operation report */

#define GPUPORT_DEV static __device__ __forceinline__

GPUPORT_DEV uint64_t gpuport_dev_now_ns(void)
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

GPUPORT_DEV uint64_t gpuport_dev_load_sys(const volatile uint64_t *p)
{
    uint64_t v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

GPUPORT_DEV int32_t gpuport_dev_load_sys32(const volatile int32_t *p)
{
    int32_t v;
    asm volatile("ld.acquire.sys.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

/* Deadline bookkeeping for spinning calls: returns 1 once the limit passed. */
GPUPORT_DEV int gpuport_dev_expired(const gpuport_port_channel_dev_t *ch, uint64_t *start)
{
    uint64_t now;
    if (ch->timeout_ns == 0)
        return 0;
    now = gpuport_dev_now_ns();
    if (*start == 0) {
        *start = now;
        return 0;
    }
    return now - *start > ch->timeout_ns;
}

GPUPORT_DEV int gpuport_dev_stuck(const gpuport_port_channel_dev_t *ch, const char *op)
{
    printf("gpuport: rank %d, channel %u (to rank %d): %s stuck for more than %llu ms "
           "(block %d, thread %d); failing with GPUPORT_ERR_TIMEOUT\n",
           ch->rank, ch->id, ch->peer, op, (unsigned long long)(ch->timeout_ns / 1000000),
           (int)blockIdx.x, (int)threadIdx.x);
    return GPUPORT_ERR_TIMEOUT;
}

/* Appends n (1 or 2) encoded triggers as one contiguous run; *pos_p gets the
 * position of the last. A pusher that times out has reserved its slots: the
 * proxy will wait for them until the communicator's own timeout fails the
 * remaining work, so a timeout here is fatal for the channel's FIFO. */
GPUPORT_DEV int gpuport_dev_fifo_push(const gpuport_port_channel_dev_t *ch,
                                      const gpuport_trigger_t *t, uint32_t n, uint64_t *pos_p)
{
    const gpuport_fifo_dev_t *f = &ch->fifo;
    /* The tail's device copy is read before the reservation, so that the
     * two accesses to device memory are in flight together instead of one
     * after the other: the copy only grows, and an older value can only
     * make the check below more cautious (it then reads again). */
    uint64_t cached = *(volatile unsigned long long *)f->tail_cache;
    uint64_t pos = atomicAdd(f->head, (unsigned long long)n);
    uint64_t start = 0;

    /* Wait for room. Only the first waiter reads the host's tail across
     * PCIe; the rest watch the copy in device memory, so that thousands of
     * waiting threads do not flood the bus the triggers travel on. */
    while (pos + n - cached > f->size) {
        if (pos + n - cached <= f->size + n) {
            uint64_t tail = gpuport_dev_load_sys(f->tail);
            if (tail > cached)
                atomicMax(f->tail_cache, (unsigned long long)tail);
        } else {
            __nanosleep(100);
        }
        if (gpuport_dev_expired(ch, &start))
            return gpuport_dev_stuck(ch, "push into a full FIFO");
        cached = *(volatile unsigned long long *)f->tail_cache;
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

GPUPORT_DEV int gpuport_dev_check(const gpuport_port_channel_dev_t *ch)
{
    return gpuport_dev_load_sys32(ch->status);
}

/* Pushes one operation. It does not read the channel's error state (a read
 * across PCIe on every push); a failed channel's operations are dropped by
 * the proxy and the error reaches flush and wait. */
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

GPUPORT_DEV int gpuport_put(const gpuport_port_channel_dev_t *ch, uint64_t dst_off,
                            uint64_t src_off, uint64_t size)
{
    uint64_t pos;
    if (!gpuport_dev_put_fits(ch, dst_off, src_off, size))
        return GPUPORT_ERR_OUT_OF_RANGE;
    return gpuport_dev_push_op(ch, GPUPORT_OP_PUT, dst_off, src_off, size, &pos);
}

GPUPORT_DEV int gpuport_signal(const gpuport_port_channel_dev_t *ch)
{
    uint64_t pos;
    return gpuport_dev_push_op(ch, GPUPORT_OP_SIGNAL, 0, 0, 0, &pos);
}

GPUPORT_DEV int gpuport_put_with_signal(const gpuport_port_channel_dev_t *ch, uint64_t dst_off,
                                        uint64_t src_off, uint64_t size)
{
    uint64_t pos;
    if (!gpuport_dev_put_fits(ch, dst_off, src_off, size))
        return GPUPORT_ERR_OUT_OF_RANGE;
    return gpuport_dev_push_op(ch, GPUPORT_OP_PUT_SIGNAL, dst_off, src_off, size, &pos);
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

GPUPORT_DEV int gpuport_dev_push_value(const gpuport_port_channel_dev_t *ch, uint32_t op,
                                       uint64_t dst_off, uint64_t value, uint64_t *pos_p)
{
    gpuport_trigger_t t;

    gpuport_trigger_encode_value(&t, op, ch->id, dst_off, value);
    return gpuport_dev_fifo_push(ch, &t, 1, pos_p);
}

GPUPORT_DEV int gpuport_put_value(const gpuport_port_channel_dev_t *ch, uint64_t dst_off,
                                  uint64_t value)
{
    uint64_t pos;
    int st = gpuport_dev_value_check(ch, dst_off);

    if (st)
        return st;
    return gpuport_dev_push_value(ch, GPUPORT_OP_PUT_VALUE, dst_off, value, &pos);
}

GPUPORT_DEV int gpuport_put_value_with_signal(const gpuport_port_channel_dev_t *ch,
                                              uint64_t dst_off, uint64_t value)
{
    uint64_t pos;
    int st = gpuport_dev_value_check(ch, dst_off);

    if (st)
        return st;
    return gpuport_dev_push_value(ch, GPUPORT_OP_PUT_VALUE_SIGNAL, dst_off, value, &pos);
}

/* Returns when every operation this channel pushed before it is complete. */
GPUPORT_DEV int gpuport_flush(const gpuport_port_channel_dev_t *ch)
{
    uint64_t pos, start = 0, f;
    int st = gpuport_dev_push_op(ch, GPUPORT_OP_FLUSH, 0, 0, 0, &pos);

    if (st)
        return st;
    /* the proxy completes flushes of failed channels too, marked */
    while (((f = gpuport_dev_load_sys(ch->flushed)) & ~GPUPORT_FLUSHED_FAILED) <= pos) {
        if (gpuport_dev_expired(ch, &start))
            return gpuport_dev_stuck(ch, "flush");
    }
    /* the channel's state is read across PCIe only when the proxy said
     * it had failed by the time the flush completed */
    return f & GPUPORT_FLUSHED_FAILED ? gpuport_dev_check(ch) : GPUPORT_OK;
}

GPUPORT_DEV int gpuport_dev_take(const gpuport_port_channel_dev_t *ch)
{
    unsigned long long c = *(volatile unsigned long long *)ch->consumed;
    while (gpuport_dev_load_sys(ch->inbound) > c) {
        unsigned long long seen = atomicCAS(ch->consumed, c, c + 1);
        if (seen == c)
            return 1;
        c = seen;
    }
    return 0;
}

/* Either side's failure: no signal will come. */
GPUPORT_DEV int gpuport_dev_failed(const gpuport_port_channel_dev_t *ch)
{
    int st = gpuport_dev_check(ch);
    if (st)
        return st;
    return gpuport_dev_load_sys32(ch->peer_status) ? GPUPORT_ERR_PEER : 0;
}

/* Takes one signal if one has arrived: 1 taken, 0 none, <0 error. */
GPUPORT_DEV int gpuport_poll(const gpuport_port_channel_dev_t *ch)
{
    int st;

    if (gpuport_dev_take(ch))
        return 1;
    st = gpuport_dev_failed(ch);
    /* the peer's failure or close is written after its last signal: one
     * that arrived since the look above is still to be taken */
    if (st && gpuport_dev_take(ch))
        return 1;
    return st;
}

GPUPORT_DEV int gpuport_wait(const gpuport_port_channel_dev_t *ch)
{
    uint64_t start = 0;
    for (uint32_t i = 1;; i++) {
        if (gpuport_dev_take(ch))
            return GPUPORT_OK;
        /* failures are rare: look for them every 64th pass, not on each */
        if ((i & 63) == 0) {
            int st = gpuport_dev_failed(ch);
            if (st && gpuport_dev_take(ch))
                return GPUPORT_OK; /* arrived just before the word, as above */
            if (st)
                return st;
            if (gpuport_dev_expired(ch, &start))
                return gpuport_dev_stuck(ch, "wait for the peer's signal");
        }
    }
}

#endif /* __CUDACC__ */

#endif
