/**
 * @file gpuport_device.h
 * gpuport device API: port-channel operations called from CUDA kernels.
 *
 * The host hands out a gpuport_port_channel_dev_t (gpuport_channel_device())
 * as plain data; pass it to kernels by value or in device memory. The calls
 * are gpuport_put, gpuport_signal, gpuport_put_with_signal,
 * gpuport_put_value, gpuport_put_value_with_signal, gpuport_get,
 * gpuport_atomic_add, gpuport_accumulate, gpuport_flush, gpuport_wait,
 * gpuport_poll, gpuport_wait_until and gpuport_signal_count (and the
 * gpuport_memory_* calls of memory channels, below);
 * the gpuport_dev_* and gpuport_mdev_* functions, in gpuport_device_impl.h,
 * are their implementation, not API (they may change in any release). Each
 * call returns an int: GPUPORT_OK (0) or a negative gpuport_status_t value;
 * gpuport_poll returns 1, 0 or a negative value. Any number of threads,
 * warps and blocks may call them at once, on one channel too, also more of
 * them than the FIFO has slots: pushers that find the ring full wait for the
 * proxy. Every call that can wait has a time limit (GPUPORT_TIMEOUT_MS at
 * the time the handle was made); on expiry it prints the rank, channel and
 * operation that is stuck and returns GPUPORT_ERR_TIMEOUT instead of hanging.
 * A channel the proxy put into an error state makes waiters return that
 * error. A push (put, signal, any operation but flush) reports the
 * channel's end (its own error, the peer's close or failure) once this
 * rank knew of it: a host call of the channel reported it, or a device
 * wait, poll or flush of the channel saw it; the pushes read that from a
 * copy in device memory, not across the bus. A push that reaches the proxy
 * after the end is not carried out either way, and the flush or wait after
 * it reports the end. Every call checks the handle's layout first (GPUPORT_LAYOUT in
 * gpuport.h): a handle filled by code built against other headers, or never
 * filled, is refused with GPUPORT_ERR_VERSION, nothing pushed.
 *
 * Memory model: triggers live in pinned host memory mapped into the device;
 * the producer counter (head) and a copy of the consumer counter in device
 * memory (atomicAdd, atomicMax); the proxy's consumer counter, the flush
 * progress and the channel's error state in pinned host memory; the signals
 * received and the peer's failure word in the communicator's control
 * segment, shared host memory registered with CUDA: all of those host words
 * are read here with system-scope acquire loads across the bus. The count
 * of signals that device waiters consumed is in device memory. A trigger's
 * second word is stored first and its tag word (with the lap-parity bit)
 * last, with release semantics at system scope, so the proxy never sees a
 * valid tag with a stale payload.
 */
#ifndef GPUPORT_GPUPORT_DEVICE_H
#define GPUPORT_GPUPORT_DEVICE_H

#include <stdint.h>

#include "gpuport/gpuport.h"
#include "gpuport/gpuport_trigger.h"

/** The communicator's device FIFO, as a kernel reaches it (device addresses). */
typedef struct gpuport_fifo_dev {
    gpuport_trigger_t *slots;       /**< pinned host memory, device-mapped */
    unsigned long long *head;       /**< device memory: next position to reserve */
    const volatile uint64_t *tail;  /**< pinned host memory: written by the proxy */
    unsigned long long *tail_cache; /**< device memory: last tail seen by any pusher */
    unsigned long long *granted;    /**< device memory: slots promised to pushers */
    unsigned int *poller;           /**< device memory: 1 while a waiter reads the tail */
    uint32_t *gave_up_any;          /**< pinned host memory: a pusher gave up (any channel) */
    uint32_t size;                  /**< slots, a power of two */
    uint32_t log2_size;             /**< log2(size) */
} gpuport_fifo_dev_t;

/**
 * The plain-data handle of a port channel for kernels, filled by
 * gpuport_channel_device. Its members are the device API's business; a
 * kernel passes the handle (by value or in device memory) and touches none
 * of them. layout is first in every version, so that code of any version
 * can tell a handle of another.
 */
typedef struct gpuport_port_channel_dev {
    uint32_t layout;  /**< GPUPORT_CHANNEL_DEV_LAYOUT of the library that filled it */
    uint32_t id;      /**< the channel's id in its communicator */
    int32_t rank;     /**< this rank, for messages */
    int32_t peer;     /**< the peer's rank, for messages */
    gpuport_fifo_dev_t fifo; /**< the communicator's device FIFO */
    uint64_t src_size; /**< bytes of the source region */
    uint64_t dst_size; /**< bytes of the peer's destination region */
    uint32_t rma_ops;  /**< bit (1u << op) for each of GPUPORT_OP_GET, _ATOMIC_ADD and
                        *   _ACC_* that the channel's transport carries */
    uint32_t dst_addr_mod8; /**< the peer's destination address mod 8: the alignment
                             *   of its elements, which an add needs */
    const volatile uint64_t *flushed;    /**< pinned host memory: device-FIFO flush progress */
    const volatile int32_t *status;      /**< pinned host memory: the channel's error state */
    const volatile uint64_t *inbound;    /**< control segment (host): signals received */
    const volatile int32_t *peer_status; /**< control segment (host): the peer's side failed
                                          *   (its status) or closed (GPUPORT_ERR_CLOSED) */
    unsigned long long *consumed;        /**< device memory: signals taken by wait/poll */
    int32_t *gave_up;                    /**< pinned host memory: a push of this channel
                                          *   gave up (the FIFO stayed full) */
    uint64_t timeout_ns;                 /**< 0: wait forever */
    uint32_t spin;                       /**< GPUPORT_DEV_SPIN: polls before pausing */
    uint32_t backoff_ns;                 /**< GPUPORT_DEV_BACKOFF_NS: longest pause, 0 none */
    int32_t *state; /**< device memory: [0] this side's error, [1] the peer's word, as a host
                     *   call or a device wait, poll or flush of the channel last saw them (the
                     *   pushes read these); NULL: the pushes read the host words */
} gpuport_port_channel_dev_t;

/** This header's gpuport_port_channel_dev_t layout version (2: the back-off
 *  settings; 3: the rma ops carried and the peer's address alignment; 4:
 *  reservations with room, give-ups said by word; 5: a SIGNAL trigger's size
 *  is its count, so that a warp's signals go as one; 6: the pushes read the
 *  channel's end from a copy in device memory). */
#define GPUPORT_CHANNEL_DEV_VERSION 6
/** This header's gpuport_port_channel_dev_t layout, as gpuport_channel_device
 *  passes it and the device calls expect it. */
#define GPUPORT_CHANNEL_DEV_LAYOUT                                                              \
    GPUPORT_LAYOUT(GPUPORT_CHANNEL_DEV_VERSION, gpuport_port_channel_dev_t)

#ifdef __cplusplus
extern "C" {
#endif

/** The entry point of gpuport_channel_device; `layout` is GPUPORT_CHANNEL_DEV_LAYOUT. */
GPUPORT_API gpuport_status_t gpuport_channel_device_v(uint32_t layout, gpuport_channel_t ch,
                                                      gpuport_port_channel_dev_t *dev_p);

#ifdef __cplusplus
}
#endif

/**
 * Fills the plain-data handle of a channel for kernels.
 *
 * Needs a communicator in GPU mode; the handle stays valid until the
 * channel is destroyed, and may be copied freely. Device waiters and host
 * waiters on one channel count signals separately: consume a channel's
 * signals on one side only. Fill the handle with the same gpuport headers
 * as the kernels that use it are compiled with.
 *
 * Local. One set-up call at a time (gpuport.h).
 *
 * @param ch a live channel
 * @param[out] dev_p the handle
 * @retval GPUPORT_OK *dev_p is filled
 * @retval GPUPORT_ERR_INVALID_ARG not a live channel, or dev_p NULL
 * @retval GPUPORT_ERR_VERSION a program built with another handle layout: nothing
 *         is written
 * @retval GPUPORT_ERR_NOT_SUPPORTED a host-only communicator (GPUPORT_GPU, no GPU, or
 *         a build without CUDA)
 */
static inline gpuport_status_t gpuport_channel_device(gpuport_channel_t ch,
                                                      gpuport_port_channel_dev_t *dev_p)
{
    return gpuport_channel_device_v(GPUPORT_CHANNEL_DEV_LAYOUT, ch, dev_p);
}

/**
 * The plain-data handle of a memory channel for kernels, filled by
 * gpuport_memory_channel_device; passed and copied like the port channel's.
 * Every address in it is a device address of the application's context.
 */
typedef struct gpuport_memory_channel_dev {
    uint32_t layout;     /**< GPUPORT_MEMORY_CHANNEL_DEV_LAYOUT of the library that filled it */
    uint32_t id;         /**< the channel's id in its communicator */
    int32_t rank;        /**< this rank, for messages */
    int32_t peer;        /**< the peer's rank, for messages */
    const unsigned char *src; /**< this rank's source region (NULL: none); GPU memory,
                               *   which gpuport_memory_get writes into */
    uint64_t src_size;        /**< its bytes */
    unsigned char *dst;       /**< the peer's destination, mapped here (NULL: none) */
    uint64_t dst_size;        /**< its bytes */
    const unsigned char *local_dst; /**< this rank's destination: the peer's stores and
                                     *   packets land there (NULL: none) */
    uint64_t local_dst_size;        /**< its bytes */
    unsigned long long *peer_sem; /**< the count this side's signals raise: the peer's slot in
                                   *   its GPU memory (sem_atomic), else in its control
                                   *   segment (host) */
    uint32_t sem_atomic;          /**< 1: signals add atomically to peer_sem; 0: they store
                                   *   exact counts in ticket order */
    uint32_t pad_;                /**< zero */
    unsigned long long *tickets;  /**< device memory: [0] signals begun, [1] published,
                                   *   [2] held by the signaller storing the count */
    const volatile uint64_t *inbound;    /**< signals received: this rank's slot in its GPU
                                          *   memory (sem_atomic), else in its control segment */
    const volatile int32_t *status;      /**< pinned host memory: the channel's error state */
    const volatile int32_t *peer_status; /**< control segment (host): the peer's failure or
                                          *   close (GPUPORT_ERR_CLOSED) */
    unsigned long long *consumed; /**< device memory: signals taken by wait/poll */
    uint64_t timeout_ns;          /**< 0: wait forever */
    uint32_t spin;                /**< GPUPORT_DEV_SPIN */
    uint32_t backoff_ns;          /**< GPUPORT_DEV_BACKOFF_NS */
} gpuport_memory_channel_dev_t;

/** This header's gpuport_memory_channel_dev_t layout version. */
#define GPUPORT_MEMORY_CHANNEL_DEV_VERSION 1
/** This header's gpuport_memory_channel_dev_t layout. */
#define GPUPORT_MEMORY_CHANNEL_DEV_LAYOUT                                                       \
    GPUPORT_LAYOUT(GPUPORT_MEMORY_CHANNEL_DEV_VERSION, gpuport_memory_channel_dev_t)

#ifdef __cplusplus
extern "C" {
#endif

/** The entry point of gpuport_memory_channel_device; `layout` is
 *  GPUPORT_MEMORY_CHANNEL_DEV_LAYOUT. */
GPUPORT_API gpuport_status_t gpuport_memory_channel_device_v(uint32_t layout,
                                                             gpuport_memory_channel_t ch,
                                                             gpuport_memory_channel_dev_t *dev_p);

#ifdef __cplusplus
}
#endif

/**
 * Fills the plain-data handle of a memory channel for kernels; valid until
 * the channel is destroyed. Local. One set-up call at a time.
 *
 * @param ch a live memory channel
 * @param[out] dev_p the handle
 * @retval GPUPORT_OK *dev_p is filled
 * @retval GPUPORT_ERR_INVALID_ARG not a live memory channel, or dev_p NULL
 * @retval GPUPORT_ERR_VERSION a program built with another handle layout: nothing is
 *         written
 */
static inline gpuport_status_t gpuport_memory_channel_device(gpuport_memory_channel_t ch,
                                                             gpuport_memory_channel_dev_t *dev_p)
{
    return gpuport_memory_channel_device_v(GPUPORT_MEMORY_CHANNEL_DEV_LAYOUT, ch, dev_p);
}

/**
 * Which threads call a device call together. A per-thread call (gpuport_put,
 * gpuport_memory_signal, ...) is the calling thread's alone; its _warp and
 * _block forms are called by every thread of the warp or of the block, each
 * with the same arguments, and give every one of them the same status.
 * The data of memory channels is copied by all of them, each its share; a
 * proxy operation is one trigger, pushed by one of them once all have
 * reached the call; a wait is one of them waiting, then a barrier of the
 * scope, after which every thread sees what the signal covered. A warp is
 * the block's threads 32k .. 32k + 31 in linear order (fewer in the last
 * warp of a block whose size is not a multiple of 32): all of them must
 * call, as all of a block's must call a _block form (these calls contain
 * __syncwarp and __syncthreads).
 */
typedef enum {
    GPUPORT_SCOPE_THREAD = 0, /**< the calling thread alone */
    GPUPORT_SCOPE_WARP = 1,   /**< every thread of the calling warp */
    GPUPORT_SCOPE_BLOCK = 2   /**< every thread of the calling block */
} gpuport_scope_t;

#if defined(__CUDACC__)

#include <stdio.h> /* device printf, for the stuck-operation report */

/** Functions of the device API: inline, device code only. */
#define GPUPORT_DEV static __device__ __forceinline__

/* The calls' implementation: gpuport_dev_* and gpuport_mdev_*, not API. */
#include "gpuport/gpuport_device_impl.h"


/** Queues a copy of `size` bytes from the source region at src_off to the
 *  peer's destination region at dst_off, as gpuport_channel_put. The lanes
 *  of a warp that put on the same channel together (converged at the call),
 *  each lane's bytes just after the next lower lane's in both regions,
 *  push one trigger for all of them and each gets its status; other puts
 *  go one trigger each.
 *  @retval GPUPORT_OK queued
 *  @retval GPUPORT_ERR_OUT_OF_RANGE the put does not fit in both regions (nothing queued)
 *  @retval GPUPORT_ERR_VERSION a handle of another layout (nothing queued)
 *  @retval GPUPORT_ERR_TIMEOUT the FIFO stayed full past the time limit
 *  @retval GPUPORT_ERR_CLOSED the peer had closed its side (the operation is not carried out)
 *  @retval GPUPORT_ERR_PEER the peer had failed or died (not carried out)
 *  @retval other the channel's own error (gpuport_channel_status; not carried out) */
GPUPORT_DEV int gpuport_put(const gpuport_port_channel_dev_t *ch, uint64_t dst_off,
                            uint64_t src_off, uint64_t size)
{
    return gpuport_dev_put_lanes(ch, dst_off, src_off, size);
}

/** Queues a signal: the peer's semaphore goes up once the channel's puts
 *  that kernels pushed before it are visible there (the host's puts only if
 *  the proxy had already taken them), as gpuport_channel_signal for host
 *  pushes. The lanes of a warp that signal the same channel together
 *  (converged at the call) push one trigger that counts them all: the
 *  peer's semaphore goes up by their number at once, and each of them gets
 *  the same status.
 *  @retval GPUPORT_OK queued
 *  @retval GPUPORT_ERR_VERSION a handle of another layout (nothing queued)
 *  @retval GPUPORT_ERR_TIMEOUT the FIFO stayed full past the time limit
 *  @retval GPUPORT_ERR_CLOSED the peer had closed its side (the operation is not carried out)
 *  @retval GPUPORT_ERR_PEER the peer had failed or died (not carried out)
 *  @retval other the channel's own error (gpuport_channel_status; not carried out) */
GPUPORT_DEV int gpuport_signal(const gpuport_port_channel_dev_t *ch)
{
    return gpuport_dev_signal_lanes(ch);
}

/** gpuport_put, then gpuport_signal, in one trigger.
 *  @return as gpuport_put */
GPUPORT_DEV int gpuport_put_with_signal(const gpuport_port_channel_dev_t *ch, uint64_t dst_off,
                                        uint64_t src_off, uint64_t size)
{
    return gpuport_dev_op_s(ch, GPUPORT_OP_PUT_SIGNAL, dst_off, src_off, size,
                            GPUPORT_SCOPE_THREAD);
}

/** Queues an 8-byte store of value at dst_off of the peer's destination, as
 *  gpuport_channel_put_value: one trigger, no source.
 *  @retval GPUPORT_OK queued
 *  @retval GPUPORT_ERR_INVALID_ARG dst_off not a multiple of 8 (nothing queued)
 *  @retval GPUPORT_ERR_OUT_OF_RANGE dst_off + 8 beyond the region (nothing queued)
 *  @retval GPUPORT_ERR_VERSION a handle of another layout (nothing queued)
 *  @retval GPUPORT_ERR_TIMEOUT the FIFO stayed full past the time limit
 *  @retval GPUPORT_ERR_CLOSED the peer had closed its side (the operation is not carried out)
 *  @retval GPUPORT_ERR_PEER the peer had failed or died (not carried out)
 *  @retval other the channel's own error (gpuport_channel_status; not carried out) */
GPUPORT_DEV int gpuport_put_value(const gpuport_port_channel_dev_t *ch, uint64_t dst_off,
                                  uint64_t value)
{
    return gpuport_dev_op_s(ch, GPUPORT_OP_PUT_VALUE, dst_off, 0, value, GPUPORT_SCOPE_THREAD);
}

/** gpuport_put_value, then a signal, in one trigger.
 *  @return as gpuport_put_value */
GPUPORT_DEV int gpuport_put_value_with_signal(const gpuport_port_channel_dev_t *ch,
                                              uint64_t dst_off, uint64_t value)
{
    return gpuport_dev_op_s(ch, GPUPORT_OP_PUT_VALUE_SIGNAL, dst_off, 0, value,
                            GPUPORT_SCOPE_THREAD);
}

/** Queues a copy of `size` bytes from the peer's destination region at
 *  peer_off into this side's source region at local_off, as
 *  gpuport_channel_get: the put's two regions, read the other way. The
 *  bytes are here once a later gpuport_flush returns GPUPORT_OK; the get
 *  reads what the channel's earlier puts wrote there.
 *  @param ch the channel's handle
 *  @param peer_off where to read: an offset of the peer's destination region
 *  @param local_off where to write: an offset of this side's source region
 *  @param size bytes
 *  @retval GPUPORT_OK queued
 *  @retval GPUPORT_ERR_OUT_OF_RANGE either range outside its region (nothing queued)
 *  @retval GPUPORT_ERR_NOT_SUPPORTED the channel's transport does not carry gets
 *          (gpuport_channel_get on the host logs why; nothing queued)
 *  @retval GPUPORT_ERR_VERSION a handle of another layout (nothing queued)
 *  @retval GPUPORT_ERR_TIMEOUT the FIFO stayed full past the time limit
 *  @retval GPUPORT_ERR_CLOSED the peer had closed its side (the operation is not carried out)
 *  @retval GPUPORT_ERR_PEER the peer had failed or died (not carried out)
 *  @retval other the channel's own error (gpuport_channel_status; not carried out) */
GPUPORT_DEV int gpuport_get(const gpuport_port_channel_dev_t *ch, uint64_t peer_off,
                            uint64_t local_off, uint64_t size)
{
    return gpuport_dev_op_s(ch, GPUPORT_OP_GET, peer_off, local_off, size, GPUPORT_SCOPE_THREAD);
}

/** Queues an atomic add of value (two's complement: a negative value
 *  subtracts) to the 8 bytes at dst_off of the peer's destination, as
 *  gpuport_channel_atomic_add: one trigger, no source, nothing fetched.
 *  gpuport.h states the atomicity rule; between GPUs, memory channels add
 *  (gpuport_memory_atomic_add), and port channels of cuda_ipc, tcp and ib
 *  refuse adds into GPU memory.
 *  @retval GPUPORT_OK queued
 *  @retval GPUPORT_ERR_INVALID_ARG dst_off not a multiple of 8, or the peer's region not
 *          starting 8-aligned (nothing queued)
 *  @retval GPUPORT_ERR_OUT_OF_RANGE dst_off + 8 beyond the region (nothing queued)
 *  @retval GPUPORT_ERR_NOT_SUPPORTED the channel's transport cannot add into the peer's
 *          region (gpuport_channel_atomic_add on the host logs why; nothing queued)
 *  @retval other as gpuport_put_value */
GPUPORT_DEV int gpuport_atomic_add(const gpuport_port_channel_dev_t *ch, uint64_t dst_off,
                                   int64_t value)
{
    return gpuport_dev_op_s(ch, GPUPORT_OP_ATOMIC_ADD, dst_off, 0, (uint64_t)value,
                            GPUPORT_SCOPE_THREAD);
}

/** Queues the add of `count` elements of `type` from this side's source
 *  region at src_off, element by element, into the peer's destination at
 *  dst_off, as gpuport_channel_accumulate (each element one atomic add;
 *  gpuport.h states the rules). The source may be reused once a later
 *  gpuport_flush returns GPUPORT_OK; a signal pushed after it reaches the
 *  peer after the sum.
 *  @retval GPUPORT_OK queued
 *  @retval GPUPORT_ERR_INVALID_ARG count 0, type not a gpuport_dtype_t, an offset not a
 *          multiple of the element size, or the peer's region not aligned to it (nothing
 *          queued)
 *  @retval GPUPORT_ERR_OUT_OF_RANGE count elements at either offset outside its region
 *          (nothing queued)
 *  @retval GPUPORT_ERR_NOT_SUPPORTED the channel's transport cannot add into the peer's
 *          region (gpuport_channel_accumulate on the host logs why; nothing queued)
 *  @retval other as gpuport_put */
GPUPORT_DEV int gpuport_accumulate(const gpuport_port_channel_dev_t *ch, uint64_t dst_off,
                                   uint64_t src_off, uint64_t count, gpuport_dtype_t type)
{
    uint32_t op = gpuport_dev_acc_op((int)type), elem = gpuport_acc_elem_size(op);
    int st = gpuport_dev_layout(ch);

    if (st)
        return st;
    if (op == 0)
        return GPUPORT_ERR_INVALID_ARG;
    if (count > GPUPORT_TRIGGER_SIZE_MAX / elem)
        return GPUPORT_ERR_OUT_OF_RANGE;
    return gpuport_dev_op_s(ch, op, dst_off, src_off, count * elem, GPUPORT_SCOPE_THREAD);
}

/** Returns when the channel's operations that kernels pushed before it (any
 *  thread, any kernel) are complete: sources reusable, data in the peer's
 *  memory. The host's operations travel through the host FIFO, which is not
 *  ordered with the device's: a device flush covers those only if the proxy
 *  took them first (gpuport_channel_flush covers them).
 *  @retval GPUPORT_OK complete
 *  @retval GPUPORT_ERR_TIMEOUT not complete within the time limit
 *  @retval GPUPORT_ERR_VERSION a handle of another layout (nothing queued)
 *  @retval other the channel's error (gpuport_channel_status), when it failed */
GPUPORT_DEV int gpuport_flush(const gpuport_port_channel_dev_t *ch)
{
    return gpuport_dev_flush_s(ch, GPUPORT_SCOPE_THREAD);
}

/** Takes one signal if one has arrived, without waiting.
 *  @return 1 a signal was taken; 0 none has arrived; below 0 an error:
 *          GPUPORT_ERR_CLOSED (the peer closed its side in order, no signal
 *          left), GPUPORT_ERR_PEER (the peer failed or exited, no signal left),
 *          the channel's own error, or GPUPORT_ERR_VERSION (a handle of another
 *          layout) */
GPUPORT_DEV int gpuport_poll(const gpuport_port_channel_dev_t *ch)
{
    int st = gpuport_dev_layout(ch);

    if (st)
        return st;
    if (gpuport_dev_take(ch))
        return 1;
    st = gpuport_dev_failed(ch);
    /* the peer's failure or close is written after its last signal: one
     * that arrived since the look above is still to be taken */
    if (st && gpuport_dev_take(ch))
        return 1;
    return st;
}

/** Takes one signal, waiting for it up to the time limit; the peer's puts
 *  before that signal are then in this rank's destination.
 *  @retval GPUPORT_OK a signal was taken
 *  @retval GPUPORT_ERR_CLOSED the peer closed its side in order, no signal left
 *  @retval GPUPORT_ERR_PEER the peer failed or exited, no signal left
 *  @retval GPUPORT_ERR_TIMEOUT no signal within the time limit
 *  @retval GPUPORT_ERR_VERSION a handle of another layout
 *  @retval other the channel's own error */
GPUPORT_DEV int gpuport_wait(const gpuport_port_channel_dev_t *ch)
{
    return gpuport_dev_wait_s(ch, GPUPORT_SCOPE_THREAD);
}

/** Waits until the channel's signal count reaches `value`, up to the time
 *  limit: gpuport_channel_wait_until for kernels (the same counts and
 *  rules), what a sequence-numbered exchange waits on. The signal count is
 *  the signals this side received on the channel since its creation; it
 *  only grows. Device waits share one consumed count per channel (device
 *  memory, apart from the host's): gpuport_wait and gpuport_poll raise it
 *  by one signal each; this call raises it to `value` where it was lower
 *  (never down), so a later gpuport_wait takes signal value + 1 first. It
 *  raises it when it starts (the signals up to value are its claim, and
 *  the atomic is done while it polls, not before the caller's next
 *  signal); a wait that fails gives the claim back unless another wait
 *  moved the count since. Any
 *  number of threads of a grid may call it at once, with the same value or
 *  others: each returns once the count has reached its own value (every
 *  thread of a grid that waits for round k returns at round k, none takes a
 *  signal from another). The peer's puts before its value-th signal are
 *  then in this rank's destination, for the calling thread. value 0
 *  returns at once.
 *  @retval GPUPORT_OK the count is value or more; the consumed count is at least value
 *  @retval GPUPORT_ERR_CLOSED the peer closed its side in order, the count below value
 *  @retval GPUPORT_ERR_PEER the peer failed or exited, the count below value
 *  @retval GPUPORT_ERR_TIMEOUT the count stayed below value past the time limit
 *          (printed with the channel, the value and the count; nothing consumed)
 *  @retval GPUPORT_ERR_VERSION a handle of another layout
 *  @retval other the channel's own error */
GPUPORT_DEV int gpuport_wait_until(const gpuport_port_channel_dev_t *ch, uint64_t value)
{
    if (gpuport_dev_layout(ch))
        return GPUPORT_ERR_VERSION;
    return gpuport_dev_wait_until(ch, value, "channel");
}

/** Reads the channel's signal count (the signals this side received since
 *  the channel's creation, those already taken included) without waiting
 *  and without taking any, as gpuport_channel_signal_count does on the
 *  host; whatever the peer's state (then the count is final).
 *  @param ch the channel's handle
 *  @param[out] count_p the count
 *  @retval GPUPORT_OK *count_p is the count
 *  @retval GPUPORT_ERR_VERSION a handle of another layout (nothing written) */
GPUPORT_DEV int gpuport_signal_count(const gpuport_port_channel_dev_t *ch, uint64_t *count_p)
{
    if (gpuport_dev_layout(ch))
        return GPUPORT_ERR_VERSION;
    *count_p = gpuport_dev_load_sys(ch->inbound);
    return GPUPORT_OK;
}

/** @name Memory channels (gpuport_memory_channel_create)
 * The calling threads store into the peer's destination themselves. put,
 * put_value and put_packets are plain stores: once they return, nothing is
 * visible to the peer until a fence (gpuport_memory_flush) or a signal by
 * the same thread. A group of threads that put together makes its stores
 * visible with a barrier of the group (__syncwarp, __syncthreads, a grid
 * sync) followed by one thread's signal: the signal's system-scope release
 * covers what the thread saw through the barrier (the _warp and _block
 * calls below do this for their scope). signal is safe from any
 * number of threads at once and counted exactly (an atomic add in the
 * peer's GPU memory, or, between GPUs without native atomics, exact counts
 * published in the order the signals began); wait and poll take signals as
 * port channels' do.
 * get loads from the peer's destination into this rank's source region
 * (GPU memory: a get writes into it): it sees the peer's stores that a
 * signal covered once this side took that signal (for a group: the wait,
 * then a barrier of the group). atomic_add and accumulate add with
 * system-scope atomics, each element one atomic add with respect to every
 * other add on it (gpuport.h's rule), but are ordered for the peer as
 * stores are: visible after a fence or signal of the adding thread (or a
 * barrier, then one thread's signal).
 * Offsets are checked before any store: a bad one returns an error and
 * writes nothing. Packets (put_packets / read_packets) carry 8 bytes of data
 * and two copies of a flag in each 16-byte store, so a reader that sees
 * both flags of a packet has its data without a separate signal (the
 * layout of NCCL's and MSCCL++'s LL protocols); a new flag per round lets a
 * buffer be reused without clearing.
 * @{ */

/** Copies `size` bytes from the source region at src_off to the peer's
 *  destination at dst_off, by the calling group: thread `thread` of
 *  `nthreads` (a warp: lane and 32; a block: threadIdx.x and blockDim.x; a
 *  grid's share: the global index and the grid's size), every thread of
 *  the group with the same arguments. 16-byte stores where the two
 *  addresses' alignment allows; any size and alignment is correct.
 *  @retval GPUPORT_OK this thread's share is stored (not yet visible: see above)
 *  @retval GPUPORT_ERR_OUT_OF_RANGE the copy does not fit both regions (nothing stored)
 *  @retval GPUPORT_ERR_INVALID_ARG thread not below nthreads (nothing stored)
 *  @retval GPUPORT_ERR_VERSION a handle of another layout */
GPUPORT_DEV int gpuport_memory_put(const gpuport_memory_channel_dev_t *ch, uint64_t dst_off,
                                   uint64_t src_off, uint64_t size, uint32_t thread,
                                   uint32_t nthreads)
{
    return gpuport_mdev_copy_s(ch, 0, dst_off, src_off, size, thread, nthreads,
                               GPUPORT_SCOPE_THREAD);
}

/** One 8-byte store of value at dst_off of the peer's destination.
 *  @retval GPUPORT_OK stored (not yet visible)
 *  @retval GPUPORT_ERR_INVALID_ARG dst_off, or the address, not a multiple of 8
 *  @retval GPUPORT_ERR_OUT_OF_RANGE dst_off + 8 beyond the region
 *  @retval GPUPORT_ERR_VERSION a handle of another layout */
GPUPORT_DEV int gpuport_memory_put_value(const gpuport_memory_channel_dev_t *ch,
                                         uint64_t dst_off, uint64_t value)
{
    return gpuport_mdev_put_value_s(ch, dst_off, value, GPUPORT_SCOPE_THREAD);
}

/** Copies `size` bytes from the peer's destination at peer_off into this
 *  rank's source region at local_off, by the calling group (thread of
 *  nthreads, as gpuport_memory_put): loads from the peer's memory, stores
 *  into this rank's. The bytes are this thread's to use at once, its
 *  group's after a barrier; what the peer stored before a signal is read
 *  only after that signal was taken (see above).
 *  @param ch the channel's handle
 *  @param peer_off where to read: an offset of the peer's destination
 *  @param local_off where to write: an offset of this rank's source region
 *  @param size bytes
 *  @param thread this thread's index in the group
 *  @param nthreads the group's threads
 *  @retval GPUPORT_OK this thread's share is copied
 *  @retval GPUPORT_ERR_OUT_OF_RANGE the copy does not fit both regions (nothing stored)
 *  @retval GPUPORT_ERR_INVALID_ARG thread not below nthreads (nothing stored)
 *  @retval GPUPORT_ERR_VERSION a handle of another layout */
GPUPORT_DEV int gpuport_memory_get(const gpuport_memory_channel_dev_t *ch, uint64_t peer_off,
                                   uint64_t local_off, uint64_t size, uint32_t thread,
                                   uint32_t nthreads)
{
    return gpuport_mdev_copy_s(ch, 1, peer_off, local_off, size, thread, nthreads,
                               GPUPORT_SCOPE_THREAD);
}

/** Adds value (two's complement: a negative value subtracts) to the 8 bytes
 *  at dst_off of the peer's destination with one system-scope atomic add
 *  (atomicAdd_system), atomic with respect to every other add on them.
 *  @retval GPUPORT_OK added (visible to the peer's loads after a fence or signal)
 *  @retval GPUPORT_ERR_INVALID_ARG dst_off, or the address, not a multiple of 8
 *  @retval GPUPORT_ERR_OUT_OF_RANGE dst_off + 8 beyond the region
 *  @retval GPUPORT_ERR_VERSION a handle of another layout */
GPUPORT_DEV int gpuport_memory_atomic_add(const gpuport_memory_channel_dev_t *ch,
                                          uint64_t dst_off, int64_t value)
{
    int st = gpuport_mdev_layout(ch);

    if (!st)
        st = gpuport_mdev_value_check(ch, dst_off);
    if (st)
        return st;
    atomicAdd_system((unsigned long long *)(ch->dst + dst_off), (unsigned long long)value);
    return GPUPORT_OK;
}

/** Adds `count` elements of `type` from this rank's source at src_off into
 *  the peer's destination at dst_off, by the calling group (thread of
 *  nthreads, every thread with the same arguments): each thread adds its
 *  share of the elements, each element with one system-scope atomic add
 *  (int64 and uint64: integer adds that wrap; float32: the GPU's float add,
 *  which rounds to nearest even and flushes subnormal inputs and results to
 *  zero; bfloat16: rounds to nearest even, subnormals kept). Adds from
 *  several threads and ranks land in any order: gpuport.h bounds the float
 *  sums' difference from a fixed order. Visible to the peer as stores are.
 *  @retval GPUPORT_OK this thread's share is added
 *  @retval GPUPORT_ERR_INVALID_ARG count 0, type not a gpuport_dtype_t, an offset or
 *          either address not a multiple of the element size, thread not below
 *          nthreads (nothing added)
 *  @retval GPUPORT_ERR_OUT_OF_RANGE count elements at either offset outside its region
 *          (nothing added)
 *  @retval GPUPORT_ERR_NOT_SUPPORTED bfloat16 in code compiled for a GPU before sm_90,
 *          which has no bfloat16 atomic add (nothing added)
 *  @retval GPUPORT_ERR_VERSION a handle of another layout */
GPUPORT_DEV int gpuport_memory_accumulate(const gpuport_memory_channel_dev_t *ch,
                                          uint64_t dst_off, uint64_t src_off, uint64_t count,
                                          gpuport_dtype_t type, uint32_t thread,
                                          uint32_t nthreads)
{
    uint32_t op = gpuport_dev_acc_op((int)type);
    int st;

    if (gpuport_mdev_layout(ch))
        return GPUPORT_ERR_VERSION;
    st = gpuport_mdev_acc_check(ch, op, dst_off, src_off, count, thread, nthreads);
    if (st)
        return st;
    gpuport_mdev_accumulate(op, ch->dst + dst_off, ch->src + src_off, count, thread, nthreads);
    return GPUPORT_OK;
}

/** Makes the calling thread's earlier stores (and, through a barrier, its
 *  group's) visible to the peer: a system-scope fence.
 *  @return GPUPORT_OK; errors show in signal, wait and poll */
GPUPORT_DEV int gpuport_memory_flush(const gpuport_memory_channel_dev_t *ch)
{
    return gpuport_mdev_flush_s(ch, GPUPORT_SCOPE_THREAD);
}

/** Raises the peer's semaphore by one after the calling thread's earlier
 *  stores (a system-scope release). Any number of threads may signal at
 *  once: an atomic add where the GPUs allow it (sem_atomic); else each
 *  makes its stores visible, takes a ticket, and one signaller at a time
 *  (the one holding tickets[2]) stores the count of every ticket taken so
 *  far: a signal is published by its own call or by any later one, so a
 *  signaller that gives up holds no other back.
 *  @retval GPUPORT_OK signalled
 *  @retval GPUPORT_ERR_TIMEOUT the count was not stored within the limit
 *          (another signaller held the store that long); the signal is
 *          counted and goes out with the channel's next one: do not repeat it
 *  @retval GPUPORT_ERR_VERSION a handle of another layout */
GPUPORT_DEV int gpuport_memory_signal(const gpuport_memory_channel_dev_t *ch)
{
    return gpuport_mdev_signal_s(ch, GPUPORT_SCOPE_THREAD);
}

/** gpuport_memory_put by the calling thread alone, then its signal.
 *  @return as gpuport_memory_put, then as gpuport_memory_signal */
GPUPORT_DEV int gpuport_memory_put_with_signal(const gpuport_memory_channel_dev_t *ch,
                                               uint64_t dst_off, uint64_t src_off,
                                               uint64_t size)
{
    return gpuport_mdev_put_with_signal_s(ch, dst_off, src_off, size, GPUPORT_SCOPE_THREAD);
}

/** Takes one signal if one has arrived, without waiting.
 *  @return 1, 0 or below 0, as gpuport_poll */
GPUPORT_DEV int gpuport_memory_poll(const gpuport_memory_channel_dev_t *ch)
{
    int st = gpuport_mdev_layout(ch);

    if (st)
        return st;
    if (gpuport_mdev_take(ch))
        return 1;
    st = gpuport_mdev_failed(ch);
    if (st && gpuport_mdev_take(ch))
        return 1; /* arrived before the word */
    return st;
}

/** Takes one signal, waiting up to the time limit; the peer's stores before
 *  it are then visible here.
 *  @return as gpuport_wait */
GPUPORT_DEV int gpuport_memory_wait(const gpuport_memory_channel_dev_t *ch)
{
    return gpuport_mdev_wait_s(ch, GPUPORT_SCOPE_THREAD);
}

/** Waits until the channel's signal count reaches `value`, up to the time
 *  limit, as gpuport_wait_until (the same counts, rules and statuses); the
 *  peer's stores before its value-th signal are then visible to the
 *  calling thread (to its group after a barrier).
 *  @return as gpuport_wait_until */
GPUPORT_DEV int gpuport_memory_wait_until(const gpuport_memory_channel_dev_t *ch, uint64_t value)
{
    if (gpuport_mdev_layout(ch))
        return GPUPORT_ERR_VERSION;
    return gpuport_dev_wait_until(ch, value, "memory channel");
}

/** Reads the channel's signal count without waiting and without taking
 *  any, as gpuport_signal_count.
 *  @param ch the channel's handle
 *  @param[out] count_p the count
 *  @return as gpuport_signal_count */
GPUPORT_DEV int gpuport_memory_signal_count(const gpuport_memory_channel_dev_t *ch,
                                            uint64_t *count_p)
{
    if (gpuport_mdev_layout(ch))
        return GPUPORT_ERR_VERSION;
    *count_p = gpuport_dev_load_sys(ch->inbound);
    return GPUPORT_OK;
}

/** Bytes of destination that `size` bytes of data take as packets: 16 per
 *  8 bytes of data (the last packet padded).
 *  @return the bytes */
__host__ __device__ static __forceinline__ uint64_t gpuport_memory_packet_bytes(uint64_t size)
{
    return (size / 8 + (size % 8 != 0)) * 16;
}

/** Stores `size` bytes of the source at src_off into the peer's
 *  destination at dst_off as packets (gpuport_memory_packet_bytes of them),
 *  each 8 bytes of data with `flag` beside each half in one 16-byte store,
 *  by the calling group (thread of nthreads). The reader needs no signal:
 *  gpuport_memory_read_packets polls the packets for the same flag. Use a
 *  new flag for each round over the same place (a round number from 1).
 *  @retval GPUPORT_OK this thread's packets are stored
 *  @retval GPUPORT_ERR_INVALID_ARG flag 0 (fresh memory reads as 0), dst_off or the
 *          address not a multiple of 16, thread not below nthreads (nothing stored)
 *  @retval GPUPORT_ERR_OUT_OF_RANGE the data does not fit the source, or its packets the
 *          peer's destination (nothing stored)
 *  @retval GPUPORT_ERR_VERSION a handle of another layout */
GPUPORT_DEV int gpuport_memory_put_packets(const gpuport_memory_channel_dev_t *ch,
                                           uint64_t dst_off, uint64_t src_off, uint64_t size,
                                           uint32_t flag, uint32_t thread, uint32_t nthreads)
{
    uint64_t pb = gpuport_memory_packet_bytes(size), npk = pb / 16;

    if (gpuport_mdev_layout(ch))
        return GPUPORT_ERR_VERSION;
    if (flag == 0 || (dst_off & 15) || thread >= nthreads ||
        (ch->dst && ((uintptr_t)(ch->dst + dst_off) & 15)))
        return GPUPORT_ERR_INVALID_ARG;
    if (size > UINT64_MAX / 4 || !gpuport_range_fits(dst_off, pb, ch->dst_size) ||
        !gpuport_range_fits(src_off, size, ch->src_size))
        return GPUPORT_ERR_OUT_OF_RANGE;
    for (uint64_t i = thread; i < npk; i += nthreads) {
        uint64_t v = gpuport_mdev_packet_data(ch->src + src_off, size, i);
        asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(
                         ch->dst + dst_off + i * 16),
                     "r"((uint32_t)v), "r"(flag), "r"((uint32_t)(v >> 32)), "r"(flag)
                     : "memory");
    }
    return GPUPORT_OK;
}

/** Reads `size` bytes of data that the peer's gpuport_memory_put_packets
 *  stores at offset `off` of this rank's destination with `flag`, into
 *  `out` (this rank's memory), by the calling group: each thread polls its
 *  packets until both halves carry the flag, waiting up to the time limit.
 *  @retval GPUPORT_OK this thread's share of the data is in out
 *  @retval GPUPORT_ERR_INVALID_ARG flag 0, off or the address not a multiple of 16,
 *          thread not below nthreads
 *  @retval GPUPORT_ERR_OUT_OF_RANGE the packets do not fit this rank's destination
 *  @retval GPUPORT_ERR_CLOSED, GPUPORT_ERR_PEER the peer closed or failed its side
 *          before the packets came
 *  @retval GPUPORT_ERR_TIMEOUT they did not come within the limit
 *  @retval GPUPORT_ERR_VERSION a handle of another layout */
GPUPORT_DEV int gpuport_memory_read_packets(const gpuport_memory_channel_dev_t *ch, uint64_t off,
                                            unsigned char *out, uint64_t size, uint32_t flag,
                                            uint32_t thread, uint32_t nthreads)
{
    uint64_t pb = gpuport_memory_packet_bytes(size), npk = pb / 16, start = 0;

    if (gpuport_mdev_layout(ch))
        return GPUPORT_ERR_VERSION;
    if (flag == 0 || (off & 15) || thread >= nthreads ||
        (ch->local_dst && ((uintptr_t)(ch->local_dst + off) & 15)))
        return GPUPORT_ERR_INVALID_ARG;
    if (size > UINT64_MAX / 4 || !gpuport_range_fits(off, pb, ch->local_dst_size))
        return GPUPORT_ERR_OUT_OF_RANGE;
    for (uint64_t i = thread; i < npk; i += nthreads) {
        const unsigned char *p = ch->local_dst + off + i * 16;
        gpuport_dev_backoff_t b = {0, 0};
        uint32_t d0, f0, d1, f1;
        uint64_t v;
        for (uint32_t k = 1;; k++) {
            asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                         : "=r"(d0), "=r"(f0), "=r"(d1), "=r"(f1)
                         : "l"(p)
                         : "memory");
            if (f0 == flag && f1 == flag)
                break;
            gpuport_dev_pause(&b, ch->spin, ch->backoff_ns);
            if ((k & 63) == 0) {
                int st = gpuport_mdev_failed(ch);
                if (st)
                    return st;
                if (gpuport_mdev_expired(ch, &start))
                    return gpuport_mdev_stuck(ch, "read of the peer's packets");
            }
        }
        v = (uint64_t)d0 | (uint64_t)d1 << 32;
        for (uint32_t k = 0; k < 8 && i * 8 + k < size; k++)
            out[i * 8 + k] = (unsigned char)(v >> (8 * k));
    }
    return GPUPORT_OK;
}

/** The peer's destination at dst_off as this rank's kernels reach it, for
 *  loads and stores of their own.
 *  @return the address; NULL where dst_off is not inside the destination (or
 *          the handle is of another layout) */
GPUPORT_DEV unsigned char *gpuport_memory_peer_ptr(const gpuport_memory_channel_dev_t *ch,
                                                   uint64_t dst_off)
{
    if (ch->layout != GPUPORT_MEMORY_CHANNEL_DEV_LAYOUT || !ch->dst || dst_off >= ch->dst_size)
        return NULL;
    return ch->dst + dst_off;
}

/** @} */

/** @name Warp- and block-scoped calls
 * The _warp and _block forms of the calls above (gpuport_scope_t): every
 * thread of the warp or block calls with the same arguments and gets the
 * same status, and none writes a barrier, a shared status or a branch for
 * one thread around them. A port channel's operation is one trigger, pushed
 * once every thread of the scope has reached the call, so what the threads
 * stored into the source before it is in what the copy reads (the
 * barrier's ordering, then the pushing thread's system-scope release). A
 * memory channel's put and get are copied by all of the threads, each its
 * share; its put_with_signal is the threads' copy, a barrier, then one
 * signal, which covers every thread's stores (the barrier orders them
 * before the signal's system-scope release, and a release covers what its
 * thread has seen: cumulativity in the PTX memory model). A wait is one
 * thread's, then a barrier: on return every thread of the scope reads what
 * the peer's signal covered, and after a get every thread reads all of its
 * bytes. An argument that a call refuses is refused in every thread, with
 * nothing pushed or stored.
 * @{ */
/** gpuport_put by every thread of the warp: one copy, queued once all have called.
 *  @return as gpuport_put, in every thread */
GPUPORT_DEV int gpuport_put_warp(const gpuport_port_channel_dev_t *ch,
                                 uint64_t dst_off, uint64_t src_off, uint64_t size)
{
    return gpuport_dev_op_s(ch, GPUPORT_OP_PUT, dst_off, src_off, size, GPUPORT_SCOPE_WARP);
}

/** gpuport_put by every thread of the block: one copy, queued once all have called.
 *  @return as gpuport_put, in every thread */
GPUPORT_DEV int gpuport_put_block(const gpuport_port_channel_dev_t *ch,
                                  uint64_t dst_off, uint64_t src_off, uint64_t size)
{
    return gpuport_dev_op_s(ch, GPUPORT_OP_PUT, dst_off, src_off, size, GPUPORT_SCOPE_BLOCK);
}

/** gpuport_put_with_signal by every thread of the warp: one trigger.
 *  @return as gpuport_put, in every thread */
GPUPORT_DEV int gpuport_put_with_signal_warp(const gpuport_port_channel_dev_t *ch,
                                             uint64_t dst_off, uint64_t src_off, uint64_t size)
{
    return gpuport_dev_op_s(ch, GPUPORT_OP_PUT_SIGNAL, dst_off, src_off, size, GPUPORT_SCOPE_WARP);
}

/** gpuport_put_with_signal by every thread of the block: one trigger.
 *  @return as gpuport_put, in every thread */
GPUPORT_DEV int gpuport_put_with_signal_block(const gpuport_port_channel_dev_t *ch,
                                              uint64_t dst_off, uint64_t src_off, uint64_t size)
{
    return gpuport_dev_op_s(ch, GPUPORT_OP_PUT_SIGNAL, dst_off, src_off, size,
                            GPUPORT_SCOPE_BLOCK);
}

/** gpuport_put_value by every thread of the warp: one value, one trigger.
 *  @return as gpuport_put_value, in every thread */
GPUPORT_DEV int gpuport_put_value_warp(const gpuport_port_channel_dev_t *ch,
                                       uint64_t dst_off, uint64_t value)
{
    return gpuport_dev_op_s(ch, GPUPORT_OP_PUT_VALUE, dst_off, 0, value, GPUPORT_SCOPE_WARP);
}

/** gpuport_put_value by every thread of the block: one value, one trigger.
 *  @return as gpuport_put_value, in every thread */
GPUPORT_DEV int gpuport_put_value_block(const gpuport_port_channel_dev_t *ch,
                                        uint64_t dst_off, uint64_t value)
{
    return gpuport_dev_op_s(ch, GPUPORT_OP_PUT_VALUE, dst_off, 0, value, GPUPORT_SCOPE_BLOCK);
}

/** gpuport_signal by every thread of the warp: one signal, after every put the threads pushed
 *  before the call.
 *  @return as gpuport_signal, in every thread */
GPUPORT_DEV int gpuport_signal_warp(const gpuport_port_channel_dev_t *ch)
{
    return gpuport_dev_op_s(ch, GPUPORT_OP_SIGNAL, 0, 0, 0, GPUPORT_SCOPE_WARP);
}

/** gpuport_signal by every thread of the block: one signal, after every put the threads pushed
 *  before the call.
 *  @return as gpuport_signal, in every thread */
GPUPORT_DEV int gpuport_signal_block(const gpuport_port_channel_dev_t *ch)
{
    return gpuport_dev_op_s(ch, GPUPORT_OP_SIGNAL, 0, 0, 0, GPUPORT_SCOPE_BLOCK);
}

/** gpuport_get by every thread of the warp: one copy from the peer.
 *  @return as gpuport_get, in every thread */
GPUPORT_DEV int gpuport_get_warp(const gpuport_port_channel_dev_t *ch,
                                 uint64_t dst_off, uint64_t src_off, uint64_t size)
{
    return gpuport_dev_op_s(ch, GPUPORT_OP_GET, dst_off, src_off, size, GPUPORT_SCOPE_WARP);
}

/** gpuport_get by every thread of the block: one copy from the peer.
 *  @return as gpuport_get, in every thread */
GPUPORT_DEV int gpuport_get_block(const gpuport_port_channel_dev_t *ch,
                                  uint64_t dst_off, uint64_t src_off, uint64_t size)
{
    return gpuport_dev_op_s(ch, GPUPORT_OP_GET, dst_off, src_off, size, GPUPORT_SCOPE_BLOCK);
}

/** gpuport_flush by every thread of the warp: covers the operations every thread pushed before the
 *  call.
 *  @return as gpuport_flush, in every thread */
GPUPORT_DEV int gpuport_flush_warp(const gpuport_port_channel_dev_t *ch)
{
    return gpuport_dev_flush_s(ch, GPUPORT_SCOPE_WARP);
}

/** gpuport_flush by every thread of the block: covers the operations every thread pushed before
 *  the call.
 *  @return as gpuport_flush, in every thread */
GPUPORT_DEV int gpuport_flush_block(const gpuport_port_channel_dev_t *ch)
{
    return gpuport_dev_flush_s(ch, GPUPORT_SCOPE_BLOCK);
}

/** gpuport_wait by every thread of the warp: takes one signal; the peer's puts before it are then
 *  in this rank's destination for every thread.
 *  @return as gpuport_wait, in every thread */
GPUPORT_DEV int gpuport_wait_warp(const gpuport_port_channel_dev_t *ch)
{
    return gpuport_dev_wait_s(ch, GPUPORT_SCOPE_WARP);
}

/** gpuport_wait by every thread of the block: takes one signal; the peer's puts before it are then
 *  in this rank's destination for every thread.
 *  @return as gpuport_wait, in every thread */
GPUPORT_DEV int gpuport_wait_block(const gpuport_port_channel_dev_t *ch)
{
    return gpuport_dev_wait_s(ch, GPUPORT_SCOPE_BLOCK);
}

/** gpuport_memory_put by every thread of the warp, each storing its share (not yet visible: a
 *  signal or flush of the scope follows).
 *  @return as gpuport_memory_put, in every thread */
GPUPORT_DEV int gpuport_memory_put_warp(const gpuport_memory_channel_dev_t *ch,
                                        uint64_t dst_off, uint64_t src_off, uint64_t size)
{
    return gpuport_mdev_copy_in(ch, 0, dst_off, src_off, size, GPUPORT_SCOPE_WARP);
}

/** gpuport_memory_put by every thread of the block, each storing its share (not yet visible: a
 *  signal or flush of the scope follows).
 *  @return as gpuport_memory_put, in every thread */
GPUPORT_DEV int gpuport_memory_put_block(const gpuport_memory_channel_dev_t *ch,
                                         uint64_t dst_off, uint64_t src_off, uint64_t size)
{
    return gpuport_mdev_copy_in(ch, 0, dst_off, src_off, size, GPUPORT_SCOPE_BLOCK);
}

/** gpuport_memory_put by every thread of the warp, then one signal that covers every thread's
 *  stores.
 *  @return as gpuport_memory_put, then as gpuport_memory_signal, in every thread */
GPUPORT_DEV int gpuport_memory_put_with_signal_warp(const gpuport_memory_channel_dev_t *ch,
                                                    uint64_t dst_off, uint64_t src_off,
                                                    uint64_t size)
{
    return gpuport_mdev_put_with_signal_s(ch, dst_off, src_off, size, GPUPORT_SCOPE_WARP);
}

/** gpuport_memory_put by every thread of the block, then one signal that covers every thread's
 *  stores.
 *  @return as gpuport_memory_put, then as gpuport_memory_signal, in every thread */
GPUPORT_DEV int gpuport_memory_put_with_signal_block(const gpuport_memory_channel_dev_t *ch,
                                                     uint64_t dst_off, uint64_t src_off,
                                                     uint64_t size)
{
    return gpuport_mdev_put_with_signal_s(ch, dst_off, src_off, size, GPUPORT_SCOPE_BLOCK);
}

/** gpuport_memory_put_value by every thread of the warp: one store, by one of them.
 *  @return as gpuport_memory_put_value, in every thread */
GPUPORT_DEV int gpuport_memory_put_value_warp(const gpuport_memory_channel_dev_t *ch,
                                              uint64_t dst_off, uint64_t value)
{
    return gpuport_mdev_put_value_s(ch, dst_off, value, GPUPORT_SCOPE_WARP);
}

/** gpuport_memory_put_value by every thread of the block: one store, by one of them.
 *  @return as gpuport_memory_put_value, in every thread */
GPUPORT_DEV int gpuport_memory_put_value_block(const gpuport_memory_channel_dev_t *ch,
                                               uint64_t dst_off, uint64_t value)
{
    return gpuport_mdev_put_value_s(ch, dst_off, value, GPUPORT_SCOPE_BLOCK);
}

/** gpuport_memory_get by every thread of the warp, each loading its share; on return every thread
 *  may read all the bytes.
 *  @return as gpuport_memory_get, in every thread */
GPUPORT_DEV int gpuport_memory_get_warp(const gpuport_memory_channel_dev_t *ch,
                                        uint64_t dst_off, uint64_t src_off, uint64_t size)
{
    return gpuport_mdev_copy_in(ch, 1, dst_off, src_off, size, GPUPORT_SCOPE_WARP);
}

/** gpuport_memory_get by every thread of the block, each loading its share; on return every thread
 *  may read all the bytes.
 *  @return as gpuport_memory_get, in every thread */
GPUPORT_DEV int gpuport_memory_get_block(const gpuport_memory_channel_dev_t *ch,
                                         uint64_t dst_off, uint64_t src_off, uint64_t size)
{
    return gpuport_mdev_copy_in(ch, 1, dst_off, src_off, size, GPUPORT_SCOPE_BLOCK);
}

/** gpuport_memory_signal by every thread of the warp: one signal, covering every store the threads
 *  made before the call.
 *  @return as gpuport_memory_signal, in every thread */
GPUPORT_DEV int gpuport_memory_signal_warp(const gpuport_memory_channel_dev_t *ch)
{
    return gpuport_mdev_signal_s(ch, GPUPORT_SCOPE_WARP);
}

/** gpuport_memory_signal by every thread of the block: one signal, covering every store the
 *  threads made before the call.
 *  @return as gpuport_memory_signal, in every thread */
GPUPORT_DEV int gpuport_memory_signal_block(const gpuport_memory_channel_dev_t *ch)
{
    return gpuport_mdev_signal_s(ch, GPUPORT_SCOPE_BLOCK);
}

/** gpuport_memory_flush by every thread of the warp: on return every store the threads made before
 *  the call is visible to the peer.
 *  @return GPUPORT_OK, in every thread */
GPUPORT_DEV int gpuport_memory_flush_warp(const gpuport_memory_channel_dev_t *ch)
{
    return gpuport_mdev_flush_s(ch, GPUPORT_SCOPE_WARP);
}

/** gpuport_memory_flush by every thread of the block: on return every store the threads made
 *  before the call is visible to the peer.
 *  @return GPUPORT_OK, in every thread */
GPUPORT_DEV int gpuport_memory_flush_block(const gpuport_memory_channel_dev_t *ch)
{
    return gpuport_mdev_flush_s(ch, GPUPORT_SCOPE_BLOCK);
}

/** gpuport_memory_wait by every thread of the warp: takes one signal; the peer's stores before it
 *  are then every thread's to read.
 *  @return as gpuport_memory_wait, in every thread */
GPUPORT_DEV int gpuport_memory_wait_warp(const gpuport_memory_channel_dev_t *ch)
{
    return gpuport_mdev_wait_s(ch, GPUPORT_SCOPE_WARP);
}

/** gpuport_memory_wait by every thread of the block: takes one signal; the peer's stores before it
 *  are then every thread's to read.
 *  @return as gpuport_memory_wait, in every thread */
GPUPORT_DEV int gpuport_memory_wait_block(const gpuport_memory_channel_dev_t *ch)
{
    return gpuport_mdev_wait_s(ch, GPUPORT_SCOPE_BLOCK);
}

/** @} */

/** @name Helpers for a grid and a set of peers
 * @{ */

/** Called by every thread of every block of the grid: 1 in every thread of
 *  the last block to call, 0 in the others. What the grid's threads stored
 *  before their call is visible to the last block's threads after it (each
 *  block's barrier and fence before it counts itself in, the last block's
 *  fence after): the place for a grid's last step, such as a sum of every
 *  block's part. `counter` is device memory, zero before the first launch
 *  (cudaMemset); the last block sets it back to zero, so the same counter
 *  serves the next launch that is ordered after this one (the same
 *  stream). A launch in which a block returned without calling leaves it
 *  counting: zero it again before the next. Kernels running at once need
 *  counters of their own.
 *  @return 1 in the last block, 0 in the others, the same in every thread of a block */
GPUPORT_DEV int gpuport_last_block(unsigned int *counter)
{
    unsigned int blocks = gridDim.x * gridDim.y * gridDim.z;
    int last = 0;

    __syncthreads(); /* the block's stores before it counts itself in */
    if (gpuport_scope_leader(GPUPORT_SCOPE_BLOCK)) {
        __threadfence();
        last = atomicAdd(counter, 1u) == blocks - 1;
        if (last) {
            atomicExch(counter, 0u); /* every block has counted: ready for the next launch */
            __threadfence();
        }
    }
    return gpuport_scope_share(GPUPORT_SCOPE_BLOCK, last);
}

/** A barrier of this block with the peers of n port channels: called by
 *  every thread of the block, it signals each channel once and takes one
 *  signal of each, the channels spread over the threads, every signal sent
 *  before any wait (so the peers may list their channels in any order).
 *  The peers call it (or signal and wait) on their channels to this rank.
 *  On return every thread sees what the peers' puts before their signals
 *  wrote; the block's puts before the call go before its signals.
 *  `chs` is readable by every thread (device or shared memory).
 *  @retval GPUPORT_OK every signal sent and taken
 *  @retval other the error of the lowest-numbered channel that failed, its signal's
 *          (as gpuport_signal) else its wait's (as gpuport_wait), in every thread; the
 *          other channels' signals are still sent and taken */
GPUPORT_DEV int gpuport_barrier_block(const gpuport_port_channel_dev_t *chs, int n)
{
    return gpuport_dev_barrier_s(chs, 0, n, GPUPORT_SCOPE_BLOCK);
}

/** gpuport_barrier_block over n memory channels: on return every thread
 *  sees every store the peers made before their signals, and the peers see
 *  every store the block made before the call.
 *  @return as gpuport_barrier_block (as gpuport_memory_signal and
 *          gpuport_memory_wait) */
GPUPORT_DEV int gpuport_memory_barrier_block(const gpuport_memory_channel_dev_t *chs, int n)
{
    return gpuport_dev_barrier_s(chs, 1, n, GPUPORT_SCOPE_BLOCK);
}

/** @} */

#endif /* __CUDACC__ */

#include "gpuport/gpuport_peer.h"

#endif
