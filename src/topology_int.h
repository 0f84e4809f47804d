/*
 * The topology module's internals, for its two files only (the only ones
 * that include hwloc): topology.c (loading, cpu lists, where devices are,
 * the running machine, descriptions) and topology_place.c (the placement
 * rules, gpuport_place). The topology, text built up in a caller's buffer,
 * and the device lookups placement shares with the rest.
 */
#ifndef GPUPORT_TOPOLOGY_INT_H
#define GPUPORT_TOPOLOGY_INT_H

#include <hwloc.h>
#include <stdarg.h>
#include <stdio.h>

#include "topology.h"

struct gpuport_topology {
    hwloc_topology_t h;
};

/* ---- text ---- */

typedef struct {
    char *buf;
    size_t len, used;
} text_t;

static inline void text_init(text_t *t, char *buf, size_t len)
{
    t->buf = buf;
    t->len = len;
    t->used = 0;
    if (len)
        buf[0] = '\0';
}

static inline void text_add(text_t *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static inline void text_add(text_t *t, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (t->used + 1 >= t->len)
        return;
    va_start(ap, fmt);
    n = vsnprintf(t->buf + t->used, t->len - t->used, fmt, ap);
    va_end(ap);
    if (n > 0)
        t->used = t->used + (size_t)n < t->len ? t->used + (size_t)n : t->len - 1;
}

/* A set as a list ("0-15,32-47"), in buf. */
static inline const char *list_of(char *buf, size_t len, hwloc_const_bitmap_t set)
{
    if (hwloc_bitmap_list_snprintf(buf, len, set) < 0)
        snprintf(buf, len, "?");
    return buf;
}

#define LIST(set) list_of((char[96]){0}, 96, (set))

/* ---- where devices are (topology.c) ---- */

/* The object whose PUs are near I/O object io, or NULL: locality unknown. */
hwloc_obj_t topo_io_locality(hwloc_topology_t h, hwloc_obj_t io);
/* The OS device of that name ("mlx5_0") in the topology, or NULL. */
hwloc_obj_t topo_find_osdev(hwloc_topology_t h, const char *name);

#endif
