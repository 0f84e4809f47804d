/* The process's live communicators (internal.h): a leaf of the link graph,
 * asked by every public call that takes a communicator. */
#include <pthread.h>

#include "internal.h"

/* Handles are checked against this list
 * before they are used, so a destroyed one is refused, not dereferenced. */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static gpuport_comm_t live_list;

void gpuport_comm_live_add(gpuport_comm_t comm)
{
    pthread_mutex_lock(&live_lock);
    comm->live_next = live_list;
    live_list = comm;
    pthread_mutex_unlock(&live_lock);
}

int gpuport_comm_live_remove(gpuport_comm_t comm)
{
    int found = 0;

    pthread_mutex_lock(&live_lock);
    for (gpuport_comm_t *pp = &live_list; comm && *pp; pp = &(*pp)->live_next) {
        if (*pp == comm) {
            *pp = comm->live_next;
            found = 1;
            break;
        }
    }
    pthread_mutex_unlock(&live_lock);
    return found;
}

int gpuport_comm_live(gpuport_comm_t comm)
{
    int found = 0;

    pthread_mutex_lock(&live_lock);
    for (gpuport_comm_t c = live_list; comm && c; c = c->live_next)
        if (c == comm)
            found = 1;
    pthread_mutex_unlock(&live_lock);
    return found;
}
