/* Dead handles, kept a while so that using one is an error, not a crash
 * (handles.h). A leaf of the link graph: it calls nothing of the core. */
#include <stdlib.h>

#include "handles.h"

void *gpuport_dead_add(gpuport_dead_list_t *l, gpuport_dead_link_t *h)
{
    gpuport_dead_link_t *old;

    h->next = NULL;
    if (l->last)
        l->last->next = h;
    else
        l->first = h;
    l->last = h;
    if (++l->n <= GPUPORT_DEAD_KEEP)
        return NULL;
    old = l->first;
    l->first = old->next;
    l->n--;
    return old;
}

void gpuport_dead_free_all(gpuport_dead_list_t *l)
{
    while (l->first) {
        gpuport_dead_link_t *h = l->first;
        l->first = h->next;
        free(h);
    }
    l->last = NULL;
    l->n = 0;
}
