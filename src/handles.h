/*
 * Dead handles: a destroyed channel or deregistered registration stays
 * allocated, with its magic number cleared, on its communicator's list of
 * dead handles of its kind, so that a second destroy, or any later use,
 * finds the cleared magic instead of freed memory. A list keeps the last
 * GPUPORT_DEAD_KEEP handles and frees older ones (all of them go with the
 * communicator): an application that creates and destroys channels for ever
 * must not grow without bound (the proxy fuzzer, which reopens channels
 * millions of times, ran out of memory).
 *
 * For the core's handle kinds (channel.c, chan_destroy.c, mem.c, comm.c). A
 * kind puts a gpuport_dead_link_t first in its struct, so that the list
 * frees the handle through its link, and its communicator holds one
 * gpuport_dead_list_t; callers hold the communicator's lock.
 */
#ifndef GPUPORT_HANDLES_H
#define GPUPORT_HANDLES_H

#include <stdint.h>

#define GPUPORT_DEAD_KEEP 4096

typedef struct gpuport_dead_link {
    struct gpuport_dead_link *next;
} gpuport_dead_link_t;

typedef struct gpuport_dead_list {
    gpuport_dead_link_t *first, *last; /* oldest, newest */
    uint32_t n;
} gpuport_dead_list_t;

/* Adds a handle whose magic is cleared (h: its link, the struct's first
 * member). Returns the oldest handle when that makes more than
 * GPUPORT_DEAD_KEEP, taken off the list for the caller to free once it has
 * let the lock go; else NULL. */
void *gpuport_dead_add(gpuport_dead_list_t *l, gpuport_dead_link_t *h);

/* Frees every handle on the list (the communicator's destruction). */
void gpuport_dead_free_all(gpuport_dead_list_t *l);

#endif
