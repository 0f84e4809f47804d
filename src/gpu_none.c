/*
 * GPU mode in a build without CUDA: every communicator is host-only, no
 * memory is GPU memory, and the flusher never receives CUDA work, so its
 * CUDA entry points are unreachable.
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_CUDA
#include "cuda/fcuda.h"
#include "gpuport/gpuport_device.h"
#include "internal.h"
#include "layout.h"

#include <stdio.h>

gpuport_status_t gpuport_gpu_open(gpuport_comm_t comm)
{
    comm->gpu_device = -1;
    snprintf(comm->no_gpu_why, sizeof(comm->no_gpu_why), "%s",
             comm->config.gpu == GPUPORT_GPU_OFF
                 ? "GPUPORT_GPU=off"
                 : "this gpuport was built without CUDA (configure --with-cuda)");
    if (comm->config.gpu == GPUPORT_GPU_ON) {
        log_error("GPUPORT_GPU=on, but this gpuport was built without CUDA (configure "
                  "--with-cuda)");
        return GPUPORT_ERR_NOT_SUPPORTED;
    }
    return GPUPORT_OK;
}

void gpuport_gpu_close(gpuport_comm_t comm)
{
    (void)comm;
}

int gpuport_gpu_mem_describe(gpuport_comm_t comm, void *ptr, size_t size, gpuport_region_rec_t *rec,
                             gpuport_region_t *r)
{
    (void)comm, (void)ptr, (void)size, (void)rec, (void)r;
    return 0;
}

gpuport_status_t gpuport_gpu_channel_reset(gpuport_comm_t comm, uint32_t id)
{
    (void)comm;
    (void)id;
    return GPUPORT_OK;
}

void gpuport_gpu_note_ends(gpuport_channel_t ch)
{
    (void)ch;
}

int gpuport_gpu_peer_atomics(gpuport_comm_t comm, int ordinal)
{
    (void)comm;
    (void)ordinal;
    return 0;
}

int gpuport_gpu_bus_id(gpuport_comm_t comm, char *buf, size_t len)
{
    (void)comm;
    (void)buf;
    (void)len;
    return -1;
}

gpuport_status_t gpuport_channel_device_v(uint32_t layout, gpuport_channel_t ch,
                                          gpuport_port_channel_dev_t *dev_p)
{
    /* argument and layout errors first, as in a CUDA build */
    if (!ch || ch->magic != GPUPORT_CHAN_MAGIC || !dev_p) {
        log_error("gpuport_channel_device: channel %p (a live channel) and dev_p %p must be set",
                  (void *)ch, (void *)dev_p);
        return GPUPORT_ERR_INVALID_ARG;
    }
    if (gpuport_layout_check("gpuport_channel_device", "gpuport_port_channel_dev_t", layout,
                             GPUPORT_CHANNEL_DEV_LAYOUT))
        return GPUPORT_ERR_VERSION;
    log_error("gpuport_channel_device: this gpuport was built without CUDA");
    return GPUPORT_ERR_NOT_SUPPORTED;
}

/* No memory channel exists without CUDA (creation needs GPU mode). */
gpuport_status_t gpuport_memory_channel_device_v(uint32_t layout, gpuport_memory_channel_t mc,
                                                 gpuport_memory_channel_dev_t *dev_p)
{
    if (!mc || mc->magic != GPUPORT_MCHAN_MAGIC || !dev_p) {
        log_error("gpuport_memory_channel_device: channel %p (a live memory channel) and dev_p "
                  "%p must be set",
                  (void *)mc, (void *)dev_p);
        return GPUPORT_ERR_INVALID_ARG;
    }
    if (gpuport_layout_check("gpuport_memory_channel_device", "gpuport_memory_channel_dev_t",
                             layout, GPUPORT_MEMORY_CHANNEL_DEV_LAYOUT))
        return GPUPORT_ERR_VERSION;
    log_error("gpuport_memory_channel_device: this gpuport was built without CUDA");
    return GPUPORT_ERR_NOT_SUPPORTED;
}

/* A peer channel here is a port channel, whose handle needs CUDA. */
gpuport_status_t gpuport_peer_channel_device_v(uint32_t layout, gpuport_peer_channel_t pc,
                                               gpuport_peer_channel_dev_t *dev_p)
{
    if (!pc || pc->magic != GPUPORT_PCHAN_PEER_MAGIC || !dev_p) {
        log_error("gpuport_peer_channel_device: channel %p (a live peer channel) and dev_p %p "
                  "must be set",
                  (void *)pc, (void *)dev_p);
        return GPUPORT_ERR_INVALID_ARG;
    }
    if (gpuport_layout_check("gpuport_peer_channel_device", "gpuport_peer_channel_dev_t", layout,
                             GPUPORT_PEER_CHANNEL_DEV_LAYOUT))
        return GPUPORT_ERR_VERSION;
    log_error("gpuport_peer_channel_device: this gpuport was built without CUDA");
    return GPUPORT_ERR_NOT_SUPPORTED;
}

gpuport_status_t gpuport_fcuda_start(gpuport_flusher_t *fl)
{
    (void)fl;
    return GPUPORT_ERR_NOT_SUPPORTED;
}

void gpuport_fcuda_stop(gpuport_flusher_t *fl)
{
    (void)fl;
}

void gpuport_fcuda_release(gpuport_flusher_t *fl)
{
    (void)fl;
}

int gpuport_fcuda_room(gpuport_flusher_t *fl)
{
    (void)fl;
    return 0;
}

uint32_t gpuport_fcuda_inflight(gpuport_flusher_t *fl)
{
    (void)fl;
    return 0;
}

int gpuport_fcuda_idle(gpuport_flusher_t *fl)
{
    (void)fl;
    return 1;
}

void gpuport_fcuda_issue(gpuport_flusher_t *fl, const gpuport_work_t *w, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        gpuport_flusher_complete(fl, w[i].channel, GPUPORT_ERR_NOT_SUPPORTED);
}

int gpuport_fcuda_progress(gpuport_flusher_t *fl)
{
    (void)fl;
    return 0;
}

gpuport_status_t gpuport_fcuda_ctx_push(gpuport_flusher_t *fl)
{
    (void)fl;
    return GPUPORT_ERR_NOT_SUPPORTED;
}

void gpuport_fcuda_ctx_pop(void)
{
}

gpuport_status_t gpuport_gpu_stage_alloc(gpuport_comm_t comm, size_t size, void **p)
{
    (void)comm, (void)size, (void)p;
    log_error("staging memory for GPU regions needs CUDA; this gpuport was built without it");
    return GPUPORT_ERR_NOT_SUPPORTED;
}

void gpuport_gpu_stage_free(gpuport_comm_t comm, void *p, size_t size)
{
    (void)comm, (void)p, (void)size;
}

gpuport_status_t gpuport_gpu_vmm_alloc(gpuport_comm_t comm, size_t size, void **ptr_p,
                                       size_t *len_p, int *fd_p)
{
    (void)comm, (void)size, (void)ptr_p, (void)len_p, (void)fd_p;
    log_error("GPU memory needs CUDA; this gpuport was built without it");
    return GPUPORT_ERR_NOT_SUPPORTED;
}

void gpuport_gpu_vmm_free(gpuport_comm_t comm, void *ptr, size_t len)
{
    (void)comm, (void)ptr, (void)len;
}

gpuport_status_t gpuport_gpu_copy_in(gpuport_comm_t comm, void *dst, const void *src, size_t size)
{
    (void)comm, (void)dst, (void)src, (void)size;
    log_error("copies to GPU memory need CUDA; this gpuport was built without it");
    return GPUPORT_ERR_NOT_SUPPORTED;
}

gpuport_status_t gpuport_gpu_ctx_push(gpuport_comm_t comm)
{
    (void)comm;
    return GPUPORT_ERR_NOT_SUPPORTED;
}

void gpuport_gpu_ctx_pop(void)
{
}

gpuport_status_t gpuport_gpu_dmabuf(gpuport_comm_t comm, uint64_t start, uint64_t len,
                                    int *fd_p, char *why, size_t why_len)
{
    (void)comm, (void)start, (void)len, (void)fd_p;
    snprintf(why, why_len, "this gpuport was built without CUDA");
    return GPUPORT_ERR_NOT_SUPPORTED;
}
