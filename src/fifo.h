/*
 * The trigger FIFO: producers (any number of host threads here; CUDA threads
 * through the device API) append 16-byte triggers, the proxy thread is the
 * only consumer. Layout and validity rules are in gpuport_trigger.h: a slot
 * is valid when its lap-parity bit matches the lap of the position the
 * consumer expects, so slots written are never cleared and the consumer
 * publishes its progress with one release store of `tail`.
 *
 * Every producer reserves slots only when the ring has room behind them
 * (host threads with a compare-and-swap here; kernels with the promise
 * counter of gpuport_fifo_grant.h), so a reserved slot is always written
 * at once and a producer that gives up (timeout) holds none: the consumer
 * never waits at a slot nobody will write, whatever the number of
 * give-ups. A kernel that gives up says so in its channel's give-up word
 * and the FIFO's (gave_up_any); the proxy fails that channel before it
 * takes another trigger (gpuport_fifo_gave_up).
 */
#ifndef GPUPORT_FIFO_H
#define GPUPORT_FIFO_H

#include <stdatomic.h>
#include <stdint.h>

#include "gpuport/gpuport.h"
#include "gpuport/gpuport_trigger.h"

#define GPUPORT_FIFO_MIN_SIZE 4u
#define GPUPORT_FIFO_MAX_SIZE (1u << 24)

typedef struct gpuport_fifo {
    gpuport_trigger_t *slots;
    _Atomic uint64_t *head;  /* next position to reserve (producers) */
    _Atomic uint64_t *tail;  /* first position not yet consumed (proxy) */
    uint32_t size;
    uint32_t log2_size;
    uint64_t pos;            /* consumer's next position; only the proxy touches it */
    /* the device FIFO's word "a kernel's push gave up" (pinned host memory,
     * set by kernels, cleared by the proxy); NULL for the host FIFO */
    _Atomic uint32_t *gave_up_any;
    void *own_mem;           /* allocation owned by this FIFO, or NULL */
} gpuport_fifo_t;

/* Allocates the ring in ordinary host memory. size: a power of two. */
gpuport_status_t gpuport_fifo_init(gpuport_fifo_t *fifo, uint32_t size);
void gpuport_fifo_fini(gpuport_fifo_t *fifo);

/*
 * Producer: appends `n` (1 or 2) triggers as one contiguous run, waiting for
 * room up to timeout_ns (0: do not wait). Parity bits are set here. On
 * success *pos_p is the position of the last trigger. GPUPORT_ERR_AGAIN when
 * the ring stayed full (timeout_ns == 0) and GPUPORT_ERR_TIMEOUT when waiting
 * ran out; nothing was reserved in either case.
 */
gpuport_status_t gpuport_fifo_push(gpuport_fifo_t *fifo, const gpuport_trigger_t *triggers,
                                   uint32_t n, uint64_t timeout_ns, uint64_t *pos_p);

/* Consumer: copies the trigger at position pos + k if it is valid; 1 if so. */
static inline int gpuport_fifo_peek(const gpuport_fifo_t *f, uint32_t k, gpuport_trigger_t *t)
{
    uint64_t p = f->pos + k;
    gpuport_trigger_t *slot = &f->slots[p & (f->size - 1)];
    uint64_t w0 = atomic_load_explicit((_Atomic uint64_t *)&slot->w[0], memory_order_acquire);
    if ((w0 >> GPUPORT_TRG_PARITY_SHIFT) != gpuport_trigger_parity(p, f->log2_size))
        return 0;
    t->w[0] = w0 & ~(1ull << GPUPORT_TRG_PARITY_SHIFT);
    t->w[1] = slot->w[1];
    return 1;
}

/* Consumer: 1 once a kernel's push gave up since the last call that
 * returned 1 (the word is cleared here); the caller then looks for the
 * channels (their give-up words). A pusher sets the word, with a
 * system-scope fence, before any later store of its own, so a trigger it
 * pushed after giving up is seen only after the word: a consumer that
 * asks before it takes each trigger never carries out such a trigger
 * before it failed the channel. */
static inline int gpuport_fifo_gave_up(gpuport_fifo_t *f)
{
    if (!f->gave_up_any || !atomic_load_explicit(f->gave_up_any, memory_order_relaxed))
        return 0;
    /* an exchange, not a store: a pusher's word set since the load is
     * read (and acquired) here, never overwritten unseen */
    return atomic_exchange_explicit(f->gave_up_any, 0, memory_order_acquire) != 0;
}

/* Consumer: the next n slots are done; frees them for producers. */
static inline void gpuport_fifo_advance(gpuport_fifo_t *f, uint32_t n)
{
    f->pos += n;
    atomic_store_explicit(f->tail, f->pos, memory_order_release);
}

static inline uint64_t gpuport_fifo_head(const gpuport_fifo_t *f)
{
    return atomic_load_explicit(f->head, memory_order_acquire);
}

/* A trigger's op as messages name it ("put", "put_signal", ...; "unknown"
 * for no op). Any thread. */
const char *gpuport_op_name(uint32_t op);

#endif
