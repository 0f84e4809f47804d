/*
 * Memory channels (gpuport_memory_channel_create and _destroy): the
 * application's kernels store into a same-host peer's memory and raise its
 * semaphore themselves (gpuport_device.h's gpuport_memory_*). Underneath is
 * a port channel made by the same steps (channel.c, with memory set): it
 * takes the id and the semaphore slot, its transport maps the peer's
 * destination for the process and says where kernels reach it and the
 * peer's semaphore (transport.h's kernel_dst_ok and chan_kernel_map), the
 * proxy's watch fails it when the peer dies, and its destroy is the
 * handshake, with one difference (proxy_close.c, kernel_stores): a side
 * promises to store nothing more only after its own destroy, since its
 * kernels store without the proxy. The kernels' handle is filled in
 * src/cuda/gpu_memchan.c. Application threads.
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_CHANNEL
#include <stdlib.h>

#include "chan_int.h"

gpuport_status_t gpuport_memory_channel_create(gpuport_comm_t comm, int peer, gpuport_mem_t src,
                                               gpuport_mem_t dst,
                                               gpuport_memory_channel_t *channel_p)
{
    gpuport_memory_channel_t mc = calloc(1, sizeof(*mc));
    gpuport_channel_t ch = NULL;
    uint64_t dst_d = 0, sem_d = 0;
    gpuport_status_t status;

    /* the handshake runs whatever this side's state, so that the peer
     * fails too; only a missing handle leaves it out (as the argument
     * checks of channel.c do) */
    status = chan_create("gpuport_memory_channel_create", "channel_p", comm, peer, src, dst, 1,
                         channel_p, &ch, &dst_d, &sem_d);
    if (status) {
        free(mc);
        return status;
    }
    if (!mc) {
        log_error("gpuport_memory_channel_create: out of memory for the handle; the channel to "
                  "rank %d is closed again",
                  peer);
        gpuport_channel_destroy(ch);
        return GPUPORT_ERR_NO_MEMORY;
    }
    mc->magic = GPUPORT_MCHAN_MAGIC;
    mc->ch = ch;
    mc->dst_d = dst_d;
    mc->sem_d = sem_d;
    pthread_mutex_lock(&comm->lock);
    comm->mchans[ch->id] = mc;
    pthread_mutex_unlock(&comm->lock);
    *channel_p = mc;
    return GPUPORT_OK;
}

gpuport_status_t gpuport_memory_channel_destroy(gpuport_memory_channel_t mc)
{
    gpuport_comm_t comm;
    uint32_t id;
    gpuport_status_t status;
    void *old;

    if (!mc || mc->magic != GPUPORT_MCHAN_MAGIC) {
        log_error("gpuport_memory_channel_destroy: %p is not a live memory channel (NULL, "
                  "destroyed already, or not a memory channel)",
                  (void *)mc);
        return GPUPORT_ERR_INVALID_ARG;
    }
    comm = mc->ch->comm;
    id = mc->ch->id;
    status = gpuport_channel_destroy(mc->ch);
    if (status)
        return status; /* kept, with its regions, until the communicator goes */
    pthread_mutex_lock(&comm->lock);
    comm->mchans[id] = NULL;
    mc->magic = 0;
    mc->ch = NULL;
    old = gpuport_dead_add(&comm->dead_mchans, &mc->dead);
    pthread_mutex_unlock(&comm->lock);
    free(old);
    return GPUPORT_OK;
}
