/*
 * The trigger FIFO: producers (any number of host threads here; CUDA threads
 * through the device API) append 16-byte triggers, the proxy thread is the
 * only consumer. Layout and validity rules are in gpuport_trigger.h: a slot
 * is valid when its lap-parity bit matches the lap of the position the
 * consumer expects, so slots written are never cleared and the consumer
 * publishes its progress with one release store of `tail`. (A slot given up
 * is restamped by the consumer: gpuport_fifo_void_clear.)
 *
 * Host producers reserve slots with a compare-and-swap only when the ring has
 * room, so a producer that gives up (timeout) never leaves a reserved slot
 * unwritten, which would stall the consumer forever. Kernels reserve with
 * an atomic add and wait for room after it; one that gives up marks its
 * slots void (voids, gpuport_fifo_void_at) and the consumer skips them.
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
    /* the device FIFO's void marks (GPUPORT_FIFO_VOIDS); NULL for the host
     * FIFO, whose pushers reserve only with room and never give a slot up */
    gpuport_trigger_t *voids;
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

/* Consumer: 1 if the slot at pos + k, not written, was given up by its
 * pusher (its void mark holds that position); *channel_p is the pusher's
 * channel. */
static inline int gpuport_fifo_void_at(const gpuport_fifo_t *f, uint32_t k, uint32_t *channel_p)
{
    uint64_t p = f->pos + k;
    gpuport_trigger_t *v;

    if (!f->voids)
        return 0;
    v = &f->voids[p & (f->size - 1)];
    if (atomic_load_explicit((_Atomic uint64_t *)&v->w[0], memory_order_acquire) != p + 1)
        return 0;
    *channel_p = (uint32_t)v->w[1];
    return 1;
}

/* Consumer: forget the given-up slot at pos + k (gpuport_fifo_void_at).
 * Nobody wrote it in this lap, so it still holds the trigger of the lap
 * before, whose parity bit is also the next lap's: left so, that old
 * trigger would read as valid when the consumer comes round again and be
 * carried out a second time. Stamped with this lap's parity and no op, the
 * slot reads as not yet written until a pusher of the next lap writes it;
 * those pushers wait for the tail to pass this position, which
 * gpuport_fifo_advance publishes after this store (release), so none
 * writes the slot before it. */
static inline void gpuport_fifo_void_clear(gpuport_fifo_t *f, uint32_t k)
{
    uint64_t p = f->pos + k;
    gpuport_trigger_t *slot = &f->slots[p & (f->size - 1)];

    atomic_store_explicit((_Atomic uint64_t *)&slot->w[0],
                          gpuport_trigger_parity(p, f->log2_size) << GPUPORT_TRG_PARITY_SHIFT,
                          memory_order_relaxed);
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
