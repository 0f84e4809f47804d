/*
 * gpuport_peer.h: peer channels for kernels (gpuport_peer_channel_create):
 * the plain-data handle and the device calls. Included by
 * gpuport_device.h; include that.
 *
 * A peer channel carries each operation by the fastest path its peer
 * allows. With the store path (gpuport_peer_channel_stores: a peer whose
 * destination this GPU maps), a put of up to store_max bytes per calling
 * thread is the calling threads' own stores, a larger one one trigger for
 * the proxy, whose copy engine moves it (no SMs); values, gets and adds go
 * by stores and loads; signals by a system-scope atomic add in the peer's
 * GPU memory. Without it, every operation is the port channel's.
 *
 * Order across the paths: a put by stores is made visible before any
 * trigger that follows it in the calling thread (a system-scope fence
 * before the push), so a signal that goes by the proxy covers it; a signal
 * that goes by stores covers the proxy's puts only once they are complete,
 * so a signal goes by the proxy whenever the channel's proxy operations
 * may still be in flight (port_ops, counted after each push, ahead of
 * port_done, raised by flushes to the count read before their push), and
 * by stores otherwise. The receiver counts both: its signals are the port
 * channel's inbound count plus the memory channel's, and wait, poll and
 * wait_until take from their sum, with one consumed count.
 */
#ifndef GPUPORT_GPUPORT_PEER_H
#define GPUPORT_GPUPORT_PEER_H

#if !defined(GPUPORT_GPUPORT_DEVICE_H)
#error "include gpuport/gpuport_device.h, not gpuport/gpuport_peer.h"
#endif

/** The plain-data handle of a peer channel for kernels, filled by
 *  gpuport_peer_channel_device; passed and copied like the others. */
typedef struct gpuport_peer_channel_dev {
    uint32_t layout;    /**< GPUPORT_PEER_CHANNEL_DEV_LAYOUT of the library that filled it */
    uint32_t stores;    /**< 1: the store path (mem) exists */
    uint64_t store_max; /**< bytes per calling thread a put carries by stores (0: none) */
    unsigned long long *port_ops;  /**< device memory: operations pushed for the proxy */
    unsigned long long *port_done; /**< device memory: of those, the count flushes covered */
    gpuport_port_channel_dev_t port;  /**< the proxy's path (always) */
    gpuport_memory_channel_dev_t mem; /**< the store path (stores == 1) */
} gpuport_peer_channel_dev_t;

/** This header's gpuport_peer_channel_dev_t layout version. */
#define GPUPORT_PEER_CHANNEL_DEV_VERSION 1
/** This header's gpuport_peer_channel_dev_t layout. */
#define GPUPORT_PEER_CHANNEL_DEV_LAYOUT                                                         \
    GPUPORT_LAYOUT(GPUPORT_PEER_CHANNEL_DEV_VERSION, gpuport_peer_channel_dev_t)

#ifdef __cplusplus
extern "C" {
#endif

/** The entry point of gpuport_peer_channel_device; `layout` is
 *  GPUPORT_PEER_CHANNEL_DEV_LAYOUT. */
GPUPORT_API gpuport_status_t gpuport_peer_channel_device_v(uint32_t layout,
                                                           gpuport_peer_channel_t ch,
                                                           gpuport_peer_channel_dev_t *dev_p);
/** The entry point of gpuport_peer_channel_device_all; `layout` is
 *  GPUPORT_PEER_CHANNEL_DEV_LAYOUT. */
GPUPORT_API gpuport_status_t gpuport_peer_channel_device_all_v(
    uint32_t layout, gpuport_comm_t comm, const gpuport_peer_channel_t *channels,
    gpuport_peer_channel_dev_t **dev_p);

#ifdef __cplusplus
}
#endif

/**
 * Fills the plain-data handle of a peer channel for kernels; valid until
 * the channel is destroyed. Local. One set-up call at a time.
 *
 * @param ch a live peer channel
 * @param[out] dev_p the handle
 * @retval GPUPORT_OK *dev_p is filled
 * @retval GPUPORT_ERR_INVALID_ARG not a live peer channel, or dev_p NULL
 * @retval GPUPORT_ERR_NOT_SUPPORTED a communicator without GPU mode
 * @retval GPUPORT_ERR_VERSION a program built with another handle layout: nothing is
 *         written
 */
static inline gpuport_status_t gpuport_peer_channel_device(gpuport_peer_channel_t ch,
                                                           gpuport_peer_channel_dev_t *dev_p)
{
    return gpuport_peer_channel_device_v(GPUPORT_PEER_CHANNEL_DEV_LAYOUT, ch, dev_p);
}

/**
 * The handles of every peer channel of gpuport_peer_channel_create_all, in
 * device memory, for kernels to index by peer rank: (*dev_p)[p] is
 * channels[p]'s handle, as gpuport_peer_channel_device fills it, and the
 * caller's own entry is zeroed (a device call on it returns
 * GPUPORT_ERR_VERSION). The array is allocated as gpuport_mem_alloc_device
 * allocates (reachable by every context on the device, whether or not the
 * application made one; rounded up to the device's allocation granularity,
 * 2 MiB on an H100, so call it once for a set of channels); free it with
 * gpuport_mem_free, or it goes with the communicator. Valid until a channel
 * it holds is destroyed. Local. One set-up call at a time.
 *
 * @param comm the channels' communicator, in GPU mode
 * @param channels gpuport_comm_size() entries by peer rank, as
 *        gpuport_peer_channel_create_all fills them (this rank's own entry is
 *        not read)
 * @param[out] dev_p the device array of gpuport_comm_size() handles
 * @retval GPUPORT_OK *dev_p is set
 * @retval GPUPORT_ERR_INVALID_ARG not a live communicator, channels or dev_p NULL, or
 *         an entry that is not a live peer channel of comm to the rank of its
 *         index (logged with the index)
 * @retval GPUPORT_ERR_NOT_SUPPORTED a communicator without GPU mode
 * @retval GPUPORT_ERR_VERSION a program built with another handle layout
 * @retval GPUPORT_ERR_NO_MEMORY the device (or the host) is out of memory
 * @retval GPUPORT_ERR_TRANSPORT a CUDA driver failure (logged with the call)
 */
static inline gpuport_status_t gpuport_peer_channel_device_all(
    gpuport_comm_t comm, const gpuport_peer_channel_t *channels, gpuport_peer_channel_dev_t **dev_p)
{
    return gpuport_peer_channel_device_all_v(GPUPORT_PEER_CHANNEL_DEV_LAYOUT, comm, channels,
                                             dev_p);
}

#if defined(__CUDACC__)

/** @name Peer channels (gpuport_peer_channel_create)
 * Each call has a per-thread form, a _warp and a _block form: every thread
 * of the scope calls with the same arguments and gets the same status. A
 * put by stores is copied by the scope's threads together (store_max bytes
 * per calling thread); anything through the proxy is one trigger, pushed
 * by the scope's first thread after a barrier of the scope and a
 * system-scope fence, so that the trigger comes after every store the
 * scope made before the call. Waits are the first thread's, then a
 * barrier: every thread then sees what the peer put before its signal.
 * The statuses are the port channel's calls' (gpuport_put, gpuport_wait,
 * ...) or the memory channel's, whichever path carried the call.
 * @{ */

/** 0, or GPUPORT_ERR_VERSION for a handle of another layout (said once, by
 *  the scope's first thread). */
GPUPORT_DEV int gpuport_pdev_layout(const gpuport_peer_channel_dev_t *ch, gpuport_scope_t s)
{
    if (ch->layout == GPUPORT_PEER_CHANNEL_DEV_LAYOUT)
        return GPUPORT_OK;
    if (gpuport_scope_leader(s))
        printf("gpuport: a peer channel handle of layout %#x reached device code compiled for "
               "layout %#x (block %d, thread %d); failing with GPUPORT_ERR_VERSION\n",
               ch->layout, (unsigned)GPUPORT_PEER_CHANNEL_DEV_LAYOUT, (int)blockIdx.x,
               (int)threadIdx.x);
    return GPUPORT_ERR_VERSION;
}

/** 1 where a put of `size` bytes by scope s goes by stores. */
GPUPORT_DEV int gpuport_pdev_by_stores(const gpuport_peer_channel_dev_t *ch, uint64_t size,
                                       gpuport_scope_t s)
{
    uint64_t n = gpuport_scope_size(s);
    /* per thread, rounded up: store_max may be UINT64_MAX (GPUPORT_PEER_PATH=stores) */
    return ch->stores && size / n + (size % n != 0) <= ch->store_max;
}

/** The proxy's operation op (PUT, PUT_SIGNAL, SIGNAL, GET, PUT_VALUE,
 *  ATOMIC_ADD) for scope s: after a barrier of the scope, the first
 *  thread fences its (and through the barrier, the scope's) stores at
 *  system scope, pushes, and counts the operation once pushed; the status
 *  shared. */
GPUPORT_DEV int gpuport_pdev_port_s(const gpuport_peer_channel_dev_t *ch, uint32_t op,
                                    uint64_t dst_off, uint64_t src_off, uint64_t arg,
                                    gpuport_scope_t s)
{
    int st = GPUPORT_OK;

    gpuport_scope_sync(s);
    if (gpuport_scope_leader(s)) {
        if (ch->stores)
            __threadfence_system();
        st = gpuport_dev_op_s(&ch->port, op, dst_off, src_off, arg, GPUPORT_SCOPE_THREAD);
        if (st == GPUPORT_OK)
            atomicAdd(ch->port_ops, 1ull);
    }
    return gpuport_scope_share(s, st);
}

/** The channel's two counts of proxy operations, loaded for a later
 *  gpuport_pdev_signal_ops: the loads are issued here and waited for only
 *  where the values are compared, so a caller that loads them before its
 *  stores has their trip overlap the stores'. */
typedef struct gpuport_pdev_ops {
    unsigned long long ops;  /**< proxy operations pushed (port_ops) */
    unsigned long long done; /**< of those, completed by a flush (port_done) */
} gpuport_pdev_ops_t;

GPUPORT_DEV gpuport_pdev_ops_t gpuport_pdev_ops_load(const gpuport_peer_channel_dev_t *ch)
{
    gpuport_pdev_ops_t o = {1, 0}; /* no store path: as if pending */
    if (ch->stores) {
        o.ops = *(volatile unsigned long long *)ch->port_ops;
        o.done = *(volatile unsigned long long *)ch->port_done;
    }
    return o;
}

/** One thread's signal, with the counts loaded before this thread's puts
 *  (gpuport_pdev_ops_load): by a store where no proxy operation was in
 *  flight, else through the proxy. Counts loaded before the puts are as
 *  good as counts loaded after them: the proxy operations the signal must
 *  cover were counted before the load (this thread's own, each counted
 *  after its push; its scope's, through the barrier the caller passes
 *  before loading), another thread's concurrent ones are ordered by
 *  nothing either way, and a flush's raise of the done count seen late
 *  sends the signal by the proxy, which is always correct. */
GPUPORT_DEV int gpuport_pdev_signal_ops(const gpuport_peer_channel_dev_t *ch,
                                        gpuport_pdev_ops_t o)
{
    if (ch->stores && o.ops <= o.done)
        return gpuport_mdev_signal_s(&ch->mem, GPUPORT_SCOPE_THREAD);
    return gpuport_pdev_port_s(ch, GPUPORT_OP_SIGNAL, 0, 0, 0, GPUPORT_SCOPE_THREAD);
}

/** One thread's signal: by a store where no proxy operation may be in
 *  flight, else through the proxy (gpuport_peer_signal). */
GPUPORT_DEV int gpuport_pdev_signal_1(const gpuport_peer_channel_dev_t *ch)
{
    return gpuport_pdev_signal_ops(ch, gpuport_pdev_ops_load(ch));
}

GPUPORT_DEV int gpuport_pdev_put_s(const gpuport_peer_channel_dev_t *ch, uint64_t dst_off,
                                   uint64_t src_off, uint64_t size, gpuport_scope_t s)
{
    int st = gpuport_pdev_layout(ch, s);

    if (st)
        return st;
    if (gpuport_pdev_by_stores(ch, size, s))
        return gpuport_mdev_copy_in(&ch->mem, 0, dst_off, src_off, size, s);
    return gpuport_pdev_port_s(ch, GPUPORT_OP_PUT, dst_off, src_off, size, s);
}

GPUPORT_DEV int gpuport_pdev_signal_s(const gpuport_peer_channel_dev_t *ch, gpuport_scope_t s)
{
    int st = gpuport_pdev_layout(ch, s);

    if (st)
        return st;
    /* the barrier first: the first thread's release (or fence) then covers
     * every store of the scope */
    gpuport_scope_sync(s);
    if (gpuport_scope_leader(s))
        st = gpuport_pdev_signal_1(ch);
    return gpuport_scope_share(s, st);
}

GPUPORT_DEV int gpuport_pdev_put_with_signal_s(const gpuport_peer_channel_dev_t *ch,
                                               uint64_t dst_off, uint64_t src_off, uint64_t size,
                                               gpuport_scope_t s)
{
    int st = gpuport_pdev_layout(ch, s);

    if (st)
        return st;
    if (!gpuport_pdev_by_stores(ch, size, s))
        return gpuport_pdev_port_s(ch, GPUPORT_OP_PUT_SIGNAL, dst_off, src_off, size, s);
    /* the signaller's counts are loaded first: their trip overlaps the
     * copy's. In a warp or block, after a barrier: proxy operations that
     * other threads of the scope pushed before this call are counted then */
    gpuport_pdev_ops_t o = {1, 0};
    if (s != GPUPORT_SCOPE_THREAD)
        gpuport_scope_sync(s);
    if (gpuport_scope_leader(s))
        o = gpuport_pdev_ops_load(ch);
    st = gpuport_mdev_copy_in(&ch->mem, 0, dst_off, src_off, size, s);
    if (st)
        return st;
    /* the barrier first: the leader's release then covers every store of the scope */
    gpuport_scope_sync(s);
    if (gpuport_scope_leader(s))
        st = gpuport_pdev_signal_ops(ch, o);
    return gpuport_scope_share(s, st);
}

GPUPORT_DEV int gpuport_pdev_put_value_s(const gpuport_peer_channel_dev_t *ch, uint64_t dst_off,
                                         uint64_t value, gpuport_scope_t s)
{
    int st = gpuport_pdev_layout(ch, s);

    if (st)
        return st;
    if (!ch->stores)
        return gpuport_pdev_port_s(ch, GPUPORT_OP_PUT_VALUE, dst_off, 0, value, s);
    gpuport_scope_sync(s);
    if (gpuport_scope_leader(s))
        st = gpuport_memory_put_value(&ch->mem, dst_off, value);
    return gpuport_scope_share(s, st);
}

GPUPORT_DEV int gpuport_pdev_get_s(const gpuport_peer_channel_dev_t *ch, uint64_t peer_off,
                                   uint64_t local_off, uint64_t size, gpuport_scope_t s)
{
    int st = gpuport_pdev_layout(ch, s);

    if (st)
        return st;
    if (gpuport_pdev_by_stores(ch, size, s))
        return gpuport_mdev_copy_in(&ch->mem, 1, peer_off, local_off, size, s);
    return gpuport_pdev_port_s(ch, GPUPORT_OP_GET, peer_off, local_off, size, s);
}

GPUPORT_DEV int gpuport_pdev_flush_s(const gpuport_peer_channel_dev_t *ch, gpuport_scope_t s)
{
    int st = gpuport_pdev_layout(ch, s);

    if (st)
        return st;
    if (!ch->stores)
        return gpuport_dev_flush_s(&ch->port, s);
    __threadfence_system(); /* every thread's own stores */
    gpuport_scope_sync(s);
    if (gpuport_scope_leader(s)) {
        /* proxy operations in flight: the flush covers those counted here */
        gpuport_pdev_ops_t o = gpuport_pdev_ops_load(ch);
        if (o.ops > o.done) {
            st = gpuport_dev_flush_s(&ch->port, GPUPORT_SCOPE_THREAD);
            if (st == GPUPORT_OK)
                atomicMax(ch->port_done, o.ops);
        }
    }
    return gpuport_scope_share(s, st);
}

/** The signals received so far on the channel, by both paths.
 *  @return the count since the channel's creation */
GPUPORT_DEV uint64_t gpuport_peer_received(const gpuport_peer_channel_dev_t *ch)
{
    uint64_t n = gpuport_dev_load_sys(ch->port.inbound);
    if (ch->stores)
        n += gpuport_dev_load_sys(ch->mem.inbound);
    return n;
}

/** The signals received by both paths, for a waiter's poll: the store
 *  path's count (GPU memory, near) at every poll, the proxy's (pinned host
 *  memory, a trip across PCIe) only where `refresh` is set, else the value
 *  *port_seen kept from an earlier poll. Both counts only grow, so a kept
 *  value is a lower bound: a poll may find a proxy signal a few polls late,
 *  never one that has not arrived. A channel without the store path reads
 *  the proxy's count at every poll. */
GPUPORT_DEV uint64_t gpuport_pdev_count(const gpuport_peer_channel_dev_t *ch,
                                        uint64_t *port_seen, int refresh)
{
    if (!ch->stores)
        return *port_seen = gpuport_dev_load_sys(ch->port.inbound);
    if (refresh)
        *port_seen = gpuport_dev_load_sys(ch->port.inbound);
    return *port_seen + gpuport_dev_load_sys(ch->mem.inbound);
}

/** Takes one arrived signal (either path's): 1 taken, 0 none
 *  (gpuport_pdev_count's port_seen and refresh). */
GPUPORT_DEV int gpuport_pdev_take(const gpuport_peer_channel_dev_t *ch, uint64_t *port_seen,
                                  int refresh)
{
    unsigned long long c = *(volatile unsigned long long *)ch->port.consumed;
    while (gpuport_pdev_count(ch, port_seen, refresh) > c) {
        unsigned long long seen = atomicCAS(ch->port.consumed, c, c + 1);
        if (seen == c)
            return 1;
        c = seen;
        refresh = 0;
    }
    return 0;
}

/** What a wait waits for: until == 0, one signal, taken; else the count
 *  reaching `until` (whose signals the wait claimed at its start:
 *  gpuport_dev_claim). 1 done, 0 not yet. */
GPUPORT_DEV int gpuport_pdev_got(const gpuport_peer_channel_dev_t *ch, uint64_t until,
                                 uint64_t *port_seen, int refresh)
{
    if (!until)
        return gpuport_pdev_take(ch, port_seen, refresh);
    return gpuport_pdev_count(ch, port_seen, refresh) >= until;
}

/** One thread's wait (gpuport_pdev_got's until). The proxy's count is
 *  read at every 8th poll: a signal by stores is seen at the next poll of
 *  GPU memory, not after a trip across PCIe. */
GPUPORT_DEV int gpuport_pdev_wait_1(const gpuport_peer_channel_dev_t *ch, uint64_t until)
{
    uint64_t start = 0, port_seen = 0;
    gpuport_dev_backoff_t b = {0, 0};
    unsigned long long was = until ? gpuport_dev_claim(ch->port.consumed, until) : 0;

    for (uint32_t i = 0;; i++) {
        if (gpuport_pdev_got(ch, until, &port_seen, (i & 7) == 0))
            return GPUPORT_OK;
        gpuport_dev_pause(&b, ch->port.spin, ch->port.backoff_ns);
        if ((i & 63) == 63) {
            int st = gpuport_dev_failed(&ch->port);
            if (st && gpuport_pdev_got(ch, until, &port_seen, 1))
                return GPUPORT_OK; /* arrived just before the word */
            if (!st && !gpuport_dev_expired(&ch->port, &start))
                continue;
            if (until)
                gpuport_dev_unclaim(ch->port.consumed, until, was);
            return st ? st
                      : gpuport_dev_stuck(&ch->port, until ? "wait until the peer channel's "
                                                             "signal count reaches a value"
                                                           : "wait for the peer's signal "
                                                             "(peer channel)");
        }
    }
}

GPUPORT_DEV int gpuport_pdev_wait_s(const gpuport_peer_channel_dev_t *ch, uint64_t until,
                                    gpuport_scope_t s)
{
    int st = gpuport_pdev_layout(ch, s);

    if (st)
        return st;
    return gpuport_scope_share(s, gpuport_scope_leader(s) ? gpuport_pdev_wait_1(ch, until)
                                                          : GPUPORT_OK);
}

/** Copies `size` bytes from the source at src_off to the peer's destination
 *  at dst_off: by this thread's stores up to store_max bytes (visible after
 *  a signal or flush of the channel), else by the proxy (queued).
 *  @return as gpuport_memory_put or gpuport_put */
GPUPORT_DEV int gpuport_peer_put(const gpuport_peer_channel_dev_t *ch, uint64_t dst_off,
                                 uint64_t src_off, uint64_t size)
{
    return gpuport_pdev_put_s(ch, dst_off, src_off, size, GPUPORT_SCOPE_THREAD);
}

/** gpuport_peer_put by every thread of the warp: stores up to 32 x store_max bytes.
 *  @return as gpuport_peer_put, in every thread */
GPUPORT_DEV int gpuport_peer_put_warp(const gpuport_peer_channel_dev_t *ch, uint64_t dst_off,
                                      uint64_t src_off, uint64_t size)
{
    return gpuport_pdev_put_s(ch, dst_off, src_off, size, GPUPORT_SCOPE_WARP);
}

/** gpuport_peer_put by every thread of the block: stores up to blockDim x store_max bytes.
 *  @return as gpuport_peer_put, in every thread */
GPUPORT_DEV int gpuport_peer_put_block(const gpuport_peer_channel_dev_t *ch, uint64_t dst_off,
                                       uint64_t src_off, uint64_t size)
{
    return gpuport_pdev_put_s(ch, dst_off, src_off, size, GPUPORT_SCOPE_BLOCK);
}

/** Raises the peer's signal count by one once every earlier put of this
 *  thread (by either path) and every proxy operation pushed before it is
 *  visible at the peer: by a store where no proxy operation may be in
 *  flight, else through the proxy.
 *  @return as gpuport_memory_signal or gpuport_signal */
GPUPORT_DEV int gpuport_peer_signal(const gpuport_peer_channel_dev_t *ch)
{
    return gpuport_pdev_signal_s(ch, GPUPORT_SCOPE_THREAD);
}

/** gpuport_peer_signal once for the warp, covering every thread's puts.
 *  @return as gpuport_peer_signal, in every thread */
GPUPORT_DEV int gpuport_peer_signal_warp(const gpuport_peer_channel_dev_t *ch)
{
    return gpuport_pdev_signal_s(ch, GPUPORT_SCOPE_WARP);
}

/** gpuport_peer_signal once for the block, covering every thread's puts.
 *  @return as gpuport_peer_signal, in every thread */
GPUPORT_DEV int gpuport_peer_signal_block(const gpuport_peer_channel_dev_t *ch)
{
    return gpuport_pdev_signal_s(ch, GPUPORT_SCOPE_BLOCK);
}

/** gpuport_peer_put, then gpuport_peer_signal; one trigger where both go
 *  through the proxy.
 *  @return as gpuport_peer_put */
GPUPORT_DEV int gpuport_peer_put_with_signal(const gpuport_peer_channel_dev_t *ch,
                                             uint64_t dst_off, uint64_t src_off, uint64_t size)
{
    return gpuport_pdev_put_with_signal_s(ch, dst_off, src_off, size, GPUPORT_SCOPE_THREAD);
}

/** gpuport_peer_put_with_signal by every thread of the warp: one signal.
 *  @return as gpuport_peer_put_with_signal, in every thread */
GPUPORT_DEV int gpuport_peer_put_with_signal_warp(const gpuport_peer_channel_dev_t *ch,
                                                  uint64_t dst_off, uint64_t src_off,
                                                  uint64_t size)
{
    return gpuport_pdev_put_with_signal_s(ch, dst_off, src_off, size, GPUPORT_SCOPE_WARP);
}

/** gpuport_peer_put_with_signal by every thread of the block: one signal.
 *  @return as gpuport_peer_put_with_signal, in every thread */
GPUPORT_DEV int gpuport_peer_put_with_signal_block(const gpuport_peer_channel_dev_t *ch,
                                                   uint64_t dst_off, uint64_t src_off,
                                                   uint64_t size)
{
    return gpuport_pdev_put_with_signal_s(ch, dst_off, src_off, size, GPUPORT_SCOPE_BLOCK);
}

/** An 8-byte value at dst_off of the peer's destination: a store, or one
 *  trigger.
 *  @return as gpuport_memory_put_value or gpuport_put_value */
GPUPORT_DEV int gpuport_peer_put_value(const gpuport_peer_channel_dev_t *ch, uint64_t dst_off,
                                       uint64_t value)
{
    return gpuport_pdev_put_value_s(ch, dst_off, value, GPUPORT_SCOPE_THREAD);
}

/** gpuport_peer_put_value once for the block.
 *  @return as gpuport_peer_put_value, in every thread */
GPUPORT_DEV int gpuport_peer_put_value_block(const gpuport_peer_channel_dev_t *ch,
                                             uint64_t dst_off, uint64_t value)
{
    return gpuport_pdev_put_value_s(ch, dst_off, value, GPUPORT_SCOPE_BLOCK);
}

/** Every earlier operation of the channel complete: the proxy's (a flush
 *  through it, where any may be in flight) and this thread's stores (a
 *  system-scope fence).
 *  @return as gpuport_flush or gpuport_memory_flush */
GPUPORT_DEV int gpuport_peer_flush(const gpuport_peer_channel_dev_t *ch)
{
    return gpuport_pdev_flush_s(ch, GPUPORT_SCOPE_THREAD);
}

/** gpuport_peer_flush for the warp (every thread's stores).
 *  @return as gpuport_peer_flush, in every thread */
GPUPORT_DEV int gpuport_peer_flush_warp(const gpuport_peer_channel_dev_t *ch)
{
    return gpuport_pdev_flush_s(ch, GPUPORT_SCOPE_WARP);
}

/** gpuport_peer_flush for the block (every thread's stores).
 *  @return as gpuport_peer_flush, in every thread */
GPUPORT_DEV int gpuport_peer_flush_block(const gpuport_peer_channel_dev_t *ch)
{
    return gpuport_pdev_flush_s(ch, GPUPORT_SCOPE_BLOCK);
}

/** Takes one signal if one has arrived, without waiting.
 *  @return 1 taken; 0 none; below 0 as gpuport_poll */
GPUPORT_DEV int gpuport_peer_poll(const gpuport_peer_channel_dev_t *ch)
{
    int st = gpuport_pdev_layout(ch, GPUPORT_SCOPE_THREAD);
    uint64_t port_seen = 0;

    if (st)
        return st;
    if (gpuport_pdev_take(ch, &port_seen, 1))
        return 1;
    st = gpuport_dev_failed(&ch->port);
    if (st && gpuport_pdev_take(ch, &port_seen, 1))
        return 1;
    return st;
}

/** Takes one signal, waiting up to the time limit; the peer's puts before
 *  it (by either path) are then in this rank's destination.
 *  @return as gpuport_wait */
GPUPORT_DEV int gpuport_peer_wait(const gpuport_peer_channel_dev_t *ch)
{
    return gpuport_pdev_wait_s(ch, 0, GPUPORT_SCOPE_THREAD);
}

/** gpuport_peer_wait for the warp: one signal taken, every thread then
 *  sees the peer's puts before it.
 *  @return as gpuport_peer_wait, in every thread */
GPUPORT_DEV int gpuport_peer_wait_warp(const gpuport_peer_channel_dev_t *ch)
{
    return gpuport_pdev_wait_s(ch, 0, GPUPORT_SCOPE_WARP);
}

/** gpuport_peer_wait for the block: one signal taken, every thread then
 *  sees the peer's puts before it.
 *  @return as gpuport_peer_wait, in every thread */
GPUPORT_DEV int gpuport_peer_wait_block(const gpuport_peer_channel_dev_t *ch)
{
    return gpuport_pdev_wait_s(ch, 0, GPUPORT_SCOPE_BLOCK);
}

/** Waits until the channel has received `count` signals in all (by either
 *  path, since its creation), and takes them: the consumed count is raised
 *  to `count` if below (signals already taken count), so that wait, poll
 *  and wait_until mix on one channel; raised when the wait starts, given
 *  back if it fails (as gpuport_wait_until). The peer's puts before its
 *  count-th signal are then in this rank's destination. count 0 returns
 *  at once.
 *  @return as gpuport_peer_wait */
GPUPORT_DEV int gpuport_peer_wait_until(const gpuport_peer_channel_dev_t *ch, uint64_t count)
{
    return count ? gpuport_pdev_wait_s(ch, count, GPUPORT_SCOPE_THREAD)
                 : gpuport_pdev_layout(ch, GPUPORT_SCOPE_THREAD);
}

/** gpuport_peer_wait_until for the block.
 *  @return as gpuport_peer_wait_until, in every thread */
GPUPORT_DEV int gpuport_peer_wait_until_block(const gpuport_peer_channel_dev_t *ch,
                                              uint64_t count)
{
    return count ? gpuport_pdev_wait_s(ch, count, GPUPORT_SCOPE_BLOCK)
                 : gpuport_pdev_layout(ch, GPUPORT_SCOPE_BLOCK);
}

/** Reads `size` bytes of the peer's destination at peer_off into this
 *  rank's source at local_off (the order of gpuport_get's offsets): by this
 *  thread's loads up to store_max bytes where the store path exists (the
 *  bytes are here on return), else by the proxy (here once a later flush
 *  returns).
 *  @return as gpuport_memory_get or gpuport_get */
GPUPORT_DEV int gpuport_peer_get(const gpuport_peer_channel_dev_t *ch, uint64_t peer_off,
                                 uint64_t local_off, uint64_t size)
{
    return gpuport_pdev_get_s(ch, peer_off, local_off, size, GPUPORT_SCOPE_THREAD);
}

/** gpuport_peer_get by every thread of the block (loads up to blockDim x store_max bytes).
 *  @return as gpuport_peer_get, in every thread */
GPUPORT_DEV int gpuport_peer_get_block(const gpuport_peer_channel_dev_t *ch, uint64_t peer_off,
                                       uint64_t local_off, uint64_t size)
{
    return gpuport_pdev_get_s(ch, peer_off, local_off, size, GPUPORT_SCOPE_BLOCK);
}

/** Adds value to the 64-bit word at dst_off of the peer's destination: a
 *  system-scope atomic, or one trigger.
 *  @return as gpuport_memory_atomic_add or gpuport_atomic_add */
GPUPORT_DEV int gpuport_peer_atomic_add(const gpuport_peer_channel_dev_t *ch, uint64_t dst_off,
                                        int64_t value)
{
    int st = gpuport_pdev_layout(ch, GPUPORT_SCOPE_THREAD);

    if (st)
        return st;
    if (ch->stores)
        return gpuport_memory_atomic_add(&ch->mem, dst_off, value);
    return gpuport_pdev_port_s(ch, GPUPORT_OP_ATOMIC_ADD, dst_off, 0, (uint64_t)value,
                               GPUPORT_SCOPE_THREAD);
}

/** @} */

#endif /* __CUDACC__ */

#endif
