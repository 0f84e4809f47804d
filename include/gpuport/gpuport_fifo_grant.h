/*
 * gpuport_fifo_grant.h: how a device-FIFO pusher reserves slots; not API.
 * The device calls (gpuport_device_impl.h) include it with CUDA's atomics,
 * and the unit tests with the host's, so both run this one code.
 *
 * The rule: a position is handed out only with room behind it, so a pusher
 * never holds a slot it cannot write at once, and one that gives up (its
 * time limit ran out) has reserved nothing: there is no slot to void, no
 * mark that a later lap could overwrite, and any number of give-ups leaves
 * the FIFO whole. Two counters in device memory:
 *   granted  slots promised: every pusher adds its n first; one that finds
 *            more promised than the ring holds past the tail it has seen
 *            takes its n back and waits (test, then add: a waiter adds only
 *            when the counter showed room, so waiters do not keep the
 *            counter high for those that could go);
 *   head     the positions, added to only by pushers whose promise held.
 * Why a promised position has room: let Z be the latest promise among the
 * pushers whose head add came up to and including this one's. Z's own add
 * saw every earlier promise that still held (taken-back adds only make it
 * more cautious), so pos + n <= (promises that held) <= g_Z + n_Z <=
 * tail_cache_Z + size <= tail + size: every slot of the run is free. The
 * tail's device copy only ever holds values read from the host's tail, and
 * only grows (atomicMax), so it never runs ahead of the real tail.
 *
 * The includer defines, before including this file:
 *   GPUPORT_GRANT_FN        the functions' qualifiers
 *   gpuport_grant_add(p, v) atomic fetch-and-add on an unsigned long long
 *                           (returns the old value)
 *   gpuport_grant_load(p)   a load of an unsigned long long that another
 *                           thread may have changed (volatile is enough)
 */
#ifndef GPUPORT_FIFO_GRANT_H
#define GPUPORT_FIFO_GRANT_H

#if !defined(GPUPORT_GRANT_FN) || !defined(gpuport_grant_add) || !defined(gpuport_grant_load)
#error "define GPUPORT_GRANT_FN, gpuport_grant_add and gpuport_grant_load first"
#endif

/** One try at n slots (n <= size). first: the pusher's first try (it adds
 *  without looking: on the busy path the FIFO has room, and a look first
 *  would cost a round trip to memory). Returns 1 and the first position in
 *  *pos_p when the slots are the pusher's, with room; 0 when the ring
 *  looked full: nothing is held, and the pusher may wait and try again or
 *  give up. */
GPUPORT_GRANT_FN int gpuport_fifo_grant(unsigned long long *granted, unsigned long long *head,
                                        unsigned long long *tail_cache, unsigned long long size,
                                        unsigned long long n, int first,
                                        unsigned long long *pos_p)
{
    unsigned long long cached = gpuport_grant_load(tail_cache);
    unsigned long long g;

    if (!first && gpuport_grant_load(granted) + n - cached > size)
        return 0;
    g = gpuport_grant_add(granted, n);
    if (g + n - cached > size) {
        gpuport_grant_add(granted, 0ull - n);
        return 0;
    }
    *pos_p = gpuport_grant_add(head, n);
    return 1;
}

#endif
