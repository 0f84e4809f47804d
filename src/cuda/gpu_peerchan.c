/*
 * A peer channel's handle for kernels (gpuport_peer_channel_device): its
 * port channel's handle, its memory channel's where it has the store path,
 * how large a put goes by stores (GPUPORT_PEER_PATH, GPUPORT_PEER_STORE_MAX),
 * and the two counts of its proxy operations in device memory (zeroed with
 * the channel's other words when its id is taken). Application threads.
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_CUDA
#include <string.h>

#include "cuda/gpu.h"
#include "gpuport/gpuport_device.h"
#include "layout.h"
#include "log.h"

gpuport_status_t gpuport_peer_channel_device_v(uint32_t layout, gpuport_peer_channel_t pc,
                                               gpuport_peer_channel_dev_t *dev_p)
{
    gpuport_peer_channel_dev_t d;
    gpuport_comm_t comm;
    gpuport_status_t st;

    if (!pc || pc->magic != GPUPORT_PCHAN_PEER_MAGIC || !pc->ch) {
        log_error("gpuport_peer_channel_device: %p is not a live peer channel (NULL, destroyed "
                  "already, or not a peer channel)",
                  (void *)pc);
        return GPUPORT_ERR_INVALID_ARG;
    }
    if (!dev_p) {
        log_error("gpuport_peer_channel_device: dev_p is NULL");
        return GPUPORT_ERR_INVALID_ARG;
    }
    if (gpuport_layout_check("gpuport_peer_channel_device", "gpuport_peer_channel_dev_t", layout,
                             GPUPORT_PEER_CHANNEL_DEV_LAYOUT))
        return GPUPORT_ERR_VERSION;
    comm = pc->ch->comm;
    memset(&d, 0, sizeof(d));
    st = gpuport_channel_device(pc->ch, &d.port);
    if (!st && pc->mc)
        st = gpuport_memory_channel_device(pc->mc, &d.mem);
    if (st)
        return st;
    d.layout = GPUPORT_PEER_CHANNEL_DEV_LAYOUT;
    d.stores = pc->mc != NULL;
    if (d.stores)
        d.store_max = comm->config.peer_path == 1 ? UINT64_MAX : comm->config.peer_store_max;
    d.port_ops = (unsigned long long *)(uintptr_t)GPUPORT_GPU_PORT_OPS_D(comm->gpu, pc->id);
    d.port_done = (unsigned long long *)(uintptr_t)GPUPORT_GPU_PORT_DONE_D(comm->gpu, pc->id);
    *dev_p = d;
    return GPUPORT_OK;
}
