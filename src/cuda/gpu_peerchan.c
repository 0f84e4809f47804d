/*
 * A peer channel's handle for kernels (gpuport_peer_channel_device): its
 * port channel's handle, its memory channel's where it has the store path,
 * how large a put goes by stores (GPUPORT_PEER_PATH, GPUPORT_PEER_STORE_MAX),
 * and the two counts of its proxy operations in device memory (zeroed with
 * the channel's other words when its id is taken). Application threads.
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_CUDA
#include <stdlib.h>
#include <string.h>

#include "cuda/cudrv.h"
#include "cuda/fcuda.h"
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

/* One handle per rank, the caller's own entry zeroed (its layout 0: every
 * device call on it returns GPUPORT_ERR_VERSION), copied into device memory
 * of gpuport_mem_alloc_device's kind, which every context on the device
 * reaches: the copy is made in the flusher's context, the application's
 * being unknown here (it may have none). */
gpuport_status_t gpuport_peer_channel_device_all_v(uint32_t layout, gpuport_comm_t comm,
                                                   const gpuport_peer_channel_t *channels,
                                                   gpuport_peer_channel_dev_t **dev_p)
{
    static const char *fn = "gpuport_peer_channel_device_all";
    gpuport_peer_channel_dev_t *h;
    void *d = NULL;
    size_t n, bytes;
    gpuport_status_t st = gpuport_peer_all_args(fn, comm, channels, dev_p);

    if (st)
        return st;
    if (gpuport_layout_check(fn, "gpuport_peer_channel_dev_t", layout,
                             GPUPORT_PEER_CHANNEL_DEV_LAYOUT))
        return GPUPORT_ERR_VERSION;
    n = comm->size > 0 ? (size_t)comm->size : 1;
    bytes = n * sizeof(*h);
    h = calloc(n, sizeof(*h));
    if (!h)
        return GPUPORT_ERR_NO_MEMORY;
    for (int p = 0; p < comm->size && !st; p++)
        if (p != comm->rank)
            st = gpuport_peer_channel_device_v(layout, channels[p], &h[p]);
    if (!st)
        st = gpuport_mem_alloc_device(comm, bytes, &d);
    if (!st) {
        st = gpuport_fcuda_ctx_push(&comm->proxy.flusher);
        if (!st) {
            st = CU_CALL(cuMemcpyHtoD, ((CUdeviceptr)(uintptr_t)d, h, bytes));
            gpuport_fcuda_ctx_pop();
        }
        if (st)
            gpuport_mem_free(comm, d);
    }
    free(h);
    if (!st)
        *dev_p = (gpuport_peer_channel_dev_t *)d;
    return st;
}
