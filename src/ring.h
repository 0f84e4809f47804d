/*
 * Single-producer single-consumer ring of fixed-size items, lock-free. The
 * proxy hands work to the flusher through one and the flusher reports
 * completions through another; neither side ever blocks on the other: a full
 * ring makes the producer try again later.
 */
#ifndef GPUPORT_RING_H
#define GPUPORT_RING_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpuport/gpuport.h"

#define GPUPORT_CACHELINE 64

/* A counter with one writer and any readers: a plain add, no locked RMW. */
#define GPUPORT_STAT_ADD(counter, n)                                                            \
    atomic_store_explicit(&(counter),                                                           \
                          atomic_load_explicit(&(counter), memory_order_relaxed) + (n),         \
                          memory_order_relaxed)
#define GPUPORT_STAT_INC(counter) GPUPORT_STAT_ADD(counter, 1)

typedef struct gpuport_ring {
    _Alignas(GPUPORT_CACHELINE) _Atomic uint64_t head; /* written by the producer */
    uint64_t tail_cache;                                /* producer's view of tail */
    _Alignas(GPUPORT_CACHELINE) _Atomic uint64_t tail; /* written by the consumer */
    uint64_t head_cache;                                /* consumer's view of head */
    _Alignas(GPUPORT_CACHELINE) uint32_t mask;
    uint32_t item_size;
    unsigned char *items;
} gpuport_ring_t;

/* capacity: a power of two >= 2 */
static inline gpuport_status_t gpuport_ring_init(gpuport_ring_t *r, uint32_t capacity,
                                                 uint32_t item_size)
{
    if (capacity < 2 || (capacity & (capacity - 1)) || item_size == 0)
        return GPUPORT_ERR_INVALID_ARG;
    memset(r, 0, sizeof(*r));
    r->items = (unsigned char *)calloc(capacity, item_size);
    if (!r->items)
        return GPUPORT_ERR_NO_MEMORY;
    r->mask = capacity - 1;
    r->item_size = item_size;
    return GPUPORT_OK;
}

static inline void gpuport_ring_fini(gpuport_ring_t *r)
{
    free(r->items);
    r->items = NULL;
}

/* Producer side: 0 on success, -1 when full. */
static inline int gpuport_ring_push(gpuport_ring_t *r, const void *item)
{
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    if (h - r->tail_cache > r->mask) {
        r->tail_cache = atomic_load_explicit(&r->tail, memory_order_acquire);
        if (h - r->tail_cache > r->mask)
            return -1;
    }
    memcpy(r->items + (size_t)(h & r->mask) * r->item_size, item, r->item_size);
    atomic_store_explicit(&r->head, h + 1, memory_order_release);
    return 0;
}

/* Producer side: free slots right now (may grow as the consumer pops). */
static inline uint32_t gpuport_ring_space(gpuport_ring_t *r)
{
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    r->tail_cache = atomic_load_explicit(&r->tail, memory_order_acquire);
    return (uint32_t)(r->mask + 1 - (h - r->tail_cache));
}

/* Consumer side: pointer to the oldest item or NULL; gpuport_ring_pop
 * releases it. Peek/pop lets the consumer finish with the item in place. */
static inline void *gpuport_ring_peek(gpuport_ring_t *r)
{
    uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
    if (t == r->head_cache) {
        r->head_cache = atomic_load_explicit(&r->head, memory_order_acquire);
        if (t == r->head_cache)
            return NULL;
    }
    return r->items + (size_t)(t & r->mask) * r->item_size;
}

static inline void gpuport_ring_pop(gpuport_ring_t *r)
{
    uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
    atomic_store_explicit(&r->tail, t + 1, memory_order_release);
}

/* Consumer side: the k-th oldest item (0: what peek gives) or NULL. */
static inline void *gpuport_ring_peek_at(gpuport_ring_t *r, uint32_t k)
{
    uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
    if (r->head_cache - t <= k) {
        r->head_cache = atomic_load_explicit(&r->head, memory_order_acquire);
        if (r->head_cache - t <= k)
            return NULL;
    }
    return r->items + (size_t)((t + k) & r->mask) * r->item_size;
}

/* Consumer side: releases the n oldest items. */
static inline void gpuport_ring_pop_n(gpuport_ring_t *r, uint32_t n)
{
    uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
    atomic_store_explicit(&r->tail, t + n, memory_order_release);
}

static inline int gpuport_ring_empty(gpuport_ring_t *r)
{
    return atomic_load_explicit(&r->tail, memory_order_acquire) ==
           atomic_load_explicit(&r->head, memory_order_acquire);
}

#endif
