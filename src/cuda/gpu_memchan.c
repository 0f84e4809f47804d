/*
 * A memory channel's handle for kernels (gpuport_memory_channel_device):
 * the regions as the application's kernels reach them (this rank's own by
 * their registered addresses; the peer's destination and semaphore as the
 * transport mapped them, memchan.c), the channel's words that waits read
 * (as the port channel's handle has them, gpu.c), and its signal tickets in
 * device memory. Application threads.
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_CUDA
#include <stddef.h>
#include <string.h>

#include "cuda/gpu.h"
#include "gpuport/gpuport_device.h"
#include "layout.h"
#include "log.h"

gpuport_status_t gpuport_memory_channel_device_v(uint32_t layout, gpuport_memory_channel_t mc,
                                                 gpuport_memory_channel_dev_t *dev_p)
{
    gpuport_memory_channel_dev_t d;
    gpuport_channel_t ch;
    gpuport_comm_t comm;
    struct gpuport_gpu *g;

    if (!mc || mc->magic != GPUPORT_MCHAN_MAGIC || !mc->ch) {
        log_error("gpuport_memory_channel_device: %p is not a live memory channel (NULL, "
                  "destroyed already or being destroyed, or not a memory channel)",
                  (void *)mc);
        return GPUPORT_ERR_INVALID_ARG;
    }
    if (!dev_p) {
        log_error("gpuport_memory_channel_device: dev_p is NULL");
        return GPUPORT_ERR_INVALID_ARG;
    }
    if (gpuport_layout_check("gpuport_memory_channel_device", "gpuport_memory_channel_dev_t",
                             layout, GPUPORT_MEMORY_CHANNEL_DEV_LAYOUT))
        return GPUPORT_ERR_VERSION;
    ch = mc->ch;
    comm = ch->comm;
    g = comm->gpu; /* a memory channel exists only in GPU mode */
    memset(&d, 0, sizeof(d));
    d.layout = GPUPORT_MEMORY_CHANNEL_DEV_LAYOUT;
    d.id = ch->id;
    d.rank = comm->rank;
    d.peer = ch->peer;
    if (ch->src_mem) {
        d.src = (const unsigned char *)ch->src_mem->region.ptr;
        d.src_size = ch->src_mem->region.size;
    }
    d.dst = (unsigned char *)(uintptr_t)mc->dst_d;
    d.dst_size = mc->dst_d ? ch->dst_size : 0;
    if (ch->dst_mem) {
        d.local_dst = (const unsigned char *)ch->dst_mem->region.ptr;
        d.local_dst_size = ch->dst_mem->region.size;
    }
    d.peer_sem = (unsigned long long *)(uintptr_t)mc->peer_sem_d;
    d.sem_atomic = (uint32_t)mc->atomics;
    d.tickets = (unsigned long long *)(uintptr_t)GPUPORT_GPU_TICKETS_D(g, ch->id);
    d.inbound = (const volatile uint64_t *)(uintptr_t)(mc->sem_d ? mc->sem_d
                                                                : GPUPORT_GPU_SLOT_D(g, ch->id, value));
    d.status = (const volatile int32_t *)(uintptr_t)GPUPORT_GPU_STATE_D(g, ch->id, status);
    d.peer_status = (const volatile int32_t *)(uintptr_t)GPUPORT_GPU_SLOT_D(g, ch->id, peer_status);
    d.consumed = (unsigned long long *)(uintptr_t)GPUPORT_GPU_CONSUMED_D(g, ch->id);
    d.timeout_ns = comm->timeout_ns;
    d.spin = comm->config.dev_spin;
    d.backoff_ns = comm->config.dev_backoff_ns;
    *dev_p = d;
    return GPUPORT_OK;
}
