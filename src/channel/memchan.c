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
 * kernels store without the proxy.
 *
 * Signals go where the receiver polls fastest: each rank keeps one arena of
 * 64-bit counts in its GPU memory (VMM, from gpuport_mem_alloc_device),
 * one per channel id, and a second port channel of the pair, with the
 * arenas as destinations and no source, maps the peer's for this rank's
 * kernels, which add to its slot with system-scope atomics; where either
 * GPU cannot add atomically in the other's memory (GPUs without native
 * peer atomics), signals are release stores of exact counts into the
 * peer's control segment instead (host memory, gpuport_memory_signal's
 * tickets). The kernels' handle is filled in src/cuda/gpu_memchan.c.
 * Application threads.
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_CHANNEL
#include <stdlib.h>

#include "chan_int.h"

/* One count per channel id; gpuport_gpu_channel_reset zeroes a channel's
 * slot when the id is taken. */
static gpuport_status_t arena_get(gpuport_comm_t comm)
{
    size_t bytes = (size_t)comm->config.max_channels * sizeof(uint64_t);
    gpuport_status_t st;
    void *p;

    if (comm->mc_arena || !comm->gpu)
        return GPUPORT_OK; /* host-only: the creation refuses, saying why */
    st = gpuport_mem_alloc_device(comm, bytes, &p);
    if (st) {
        log_error("memory channels: cannot allocate their semaphores (%zu bytes of GPU memory "
                  "from gpuport_mem_alloc_device)",
                  bytes);
        return st;
    }
    st = gpuport_mem_register(comm, p, bytes, &comm->mc_arena_mem);
    if (st) {
        gpuport_mem_free(comm, p);
        return st;
    }
    comm->mc_arena = p;
    return GPUPORT_OK;
}

gpuport_status_t gpuport_memory_channel_create(gpuport_comm_t comm, int peer, gpuport_mem_t src,
                                               gpuport_mem_t dst,
                                               gpuport_memory_channel_t *channel_p)
{
    static const char call[] = "gpuport_memory_channel_create";
    gpuport_memory_channel_t mc;
    gpuport_channel_t ch = NULL, sems = NULL;
    chan_kernel_view_t view, sview;
    gpuport_status_t status, prior;

    if (!gpuport_comm_live(comm) || !channel_p) /* chan_create says which */
        return chan_create(call, "channel_p", comm, peer, src, dst, 1, GPUPORT_OK, channel_p,
                           &ch, &view);
    /* every step below runs on both sides, each carrying this side's
     * failure so far, so that the peer fails at the same step */
    mc = calloc(1, sizeof(*mc));
    prior = mc ? GPUPORT_OK : GPUPORT_ERR_NO_MEMORY;
    if (!prior)
        prior = arena_get(comm);
    status = chan_create(call, "channel_p", comm, peer, src, dst, 1, prior, channel_p, &ch, &view);
    if (status) {
        free(mc);
        return status;
    }
    status = chan_create(call, "channel_p", comm, peer, NULL, comm->mc_arena_mem, 1, GPUPORT_OK,
                         channel_p, &sems, &sview);
    if (status) {
        log_error("%s to rank %d: the channel of the two sides' semaphores failed; the channel "
                  "is closed again",
                  call, peer);
        gpuport_channel_destroy(ch); /* the peer does the same */
        free(mc);
        return status;
    }
    mc->magic = GPUPORT_MCHAN_MAGIC;
    mc->ch = ch;
    mc->id = ch->id;
    mc->sems = sems;
    mc->dst_d = view.dst_d;
    mc->atomics = view.atomics;
    if (view.atomics) {
        mc->peer_sem_d = sview.dst_d + (uint64_t)ch->pchan->tl.peer_id * sizeof(uint64_t);
        mc->sem_d = (uint64_t)(uintptr_t)comm->mc_arena + (uint64_t)ch->id * sizeof(uint64_t);
    } else {
        mc->peer_sem_d = view.sem_d;
        mc->sem_d = 0;
    }
    pthread_mutex_lock(&comm->lock);
    comm->mchans[ch->id] = mc;
    pthread_mutex_unlock(&comm->lock);
    log_info("memory channel %u to rank %d: signals by %s", ch->id, peer,
             view.atomics ? "atomic adds in the peer's GPU memory"
                          : "stores into the peer's control segment (no atomics between the "
                            "GPUs)");
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
    comm = mc->sems->comm;
    id = mc->id;
    /* the channel over the application's regions first: its close is the
     * word the peer's waiting kernels read; its destroy returns once the
     * peer destroyed its side too, so that no kernel of either stores any
     * more, and the semaphores' channel follows, on both sides alike. A
     * destroy that timed out leaves what is left to the communicator's
     * destruction; a second call goes on from there */
    if (mc->ch) {
        status = gpuport_channel_destroy(mc->ch);
        if (status)
            return status; /* kept, with its regions, until the communicator goes */
        mc->ch = NULL;
    }
    status = gpuport_channel_destroy(mc->sems);
    if (status)
        return status;
    pthread_mutex_lock(&comm->lock);
    comm->mchans[id] = NULL;
    mc->magic = 0;
    mc->ch = mc->sems = NULL;
    old = gpuport_dead_add(&comm->dead_mchans, &mc->dead);
    pthread_mutex_unlock(&comm->lock);
    free(old);
    return GPUPORT_OK;
}
