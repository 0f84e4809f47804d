/*
 * GPU mode of a communicator; see gpu.h: its set-up and end (the device,
 * the device FIFO, the host-mapped views kernels read), a channel's device
 * words and handle, and what the driver says of the GPU. Its memory (what
 * a region is, VMM and staging allocations, dma-buf) is in gpu_mem.c.
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_CUDA
#include "cuda/gpu.h"

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda/cudrv.h"
#include "cuda/fcuda.h"
#include "gpuport/gpuport_device.h"
#include "layout.h"

static gpuport_status_t pick_device(gpuport_comm_t comm, struct gpuport_gpu *g)
{
    CUcontext cur = NULL;
    gpuport_status_t st = CU_CALL(cuCtxGetCurrent, (&cur));

    if (st)
        return st;
    if (cur) {
        g->app_ctx = cur;
        return CU_CALL(cuCtxGetDevice, (&g->dev));
    }
    /* The application has not chosen a device: one per local rank, as
     * cudaSetDevice(local_rank % count) would. */
    st = CU_CALL(cuDeviceGet, (&g->dev, comm->bs.local_rank % gpuport_cudrv_device_count()));
    if (!st)
        st = CU_CALL(cuDevicePrimaryCtxRetain, (&g->app_ctx, g->dev));
    if (st)
        return st;
    g->retained = 1;
    log_info("no CUDA context was current: using device %d (local rank %d of %d) and making its "
             "primary context current",
             (int)g->dev, comm->bs.local_rank, comm->bs.local_size);
    return CU_CALL(cuCtxSetCurrent, (g->app_ctx));
}

static gpuport_status_t map_host(void *ptr, size_t len, CUdeviceptr *d_p, int *registered_p)
{
    gpuport_status_t st = CU_CALL(cuMemHostRegister, (ptr, len, CU_MEMHOSTREGISTER_PORTABLE |
                                                                     CU_MEMHOSTREGISTER_DEVICEMAP));
    if (st)
        return st;
    *registered_p = 1;
    return CU_CALL(cuMemHostGetDevicePointer, (d_p, ptr, 0));
}

/* The channels' end words for the pushes (gpuport_dev_end_words), zeroed.
 * Without them (no VMM) kernels' pushes read the host words, as before;
 * nothing fails. */
static void ends_open(gpuport_comm_t comm, struct gpuport_gpu *g)
{
    size_t size = comm->config.max_channels * 2 * sizeof(int32_t), len = 0;
    void *p = NULL;
    int fd = -1;

    if (!comm->config.dev_end_copy) {
        log_info("GPUPORT_DEV_END_COPY=0: kernels' pushes read the channels' end words across "
                 "the bus");
        return;
    }
    if (gpuport_gpu_vmm_alloc(comm, size, &p, &len, &fd) != GPUPORT_OK) {
        log_info("no device copy of the channels' end words (VMM memory refused): kernels' "
                 "pushes read the host words across the bus");
        return;
    }
    if (fd >= 0)
        close(fd);
    if (CU_CALL(cuMemsetD8, ((CUdeviceptr)(uintptr_t)p, 0, len)) != GPUPORT_OK) {
        gpuport_gpu_vmm_free(comm, p, len);
        return;
    }
    g->ends = (CUdeviceptr)(uintptr_t)p;
    g->ends_len = len;
}

static void gpu_free(gpuport_comm_t comm, struct gpuport_gpu *g)
{
    if (g->ctrl_registered)
        gpuport_cu.cuMemHostUnregister(comm->ctrl);
    if (g->states_registered)
        gpuport_cu.cuMemHostUnregister(comm->states);
    if (g->words)
        gpuport_cu.cuMemFree(g->words);
    if (g->ends)
        gpuport_gpu_vmm_free(comm, (void *)(uintptr_t)g->ends, g->ends_len);
    if (g->fifo_dmem)
        gpuport_cu.cuMemFree(g->fifo_dmem);
    if (g->fifo_host)
        gpuport_cu.cuMemFreeHost(g->fifo_host);
    if (g->retained) {
        /* we made it current: leave no destroyed context current behind */
        CUcontext cur = NULL;
        if (gpuport_cu.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == g->app_ctx)
            gpuport_cu.cuCtxSetCurrent(NULL);
        gpuport_cu.cuDevicePrimaryCtxRelease(g->dev);
    }
    free(g);
}

gpuport_status_t gpuport_gpu_open(gpuport_comm_t comm)
{
    struct gpuport_gpu *g;
    size_t nslots = comm->config.fifo_size;
    char why[256];
    gpuport_status_t st;

    comm->gpu_device = -1;
    if (comm->config.gpu == GPUPORT_GPU_OFF) {
        snprintf(comm->no_gpu_why, sizeof(comm->no_gpu_why), "GPUPORT_GPU=off");
        return GPUPORT_OK;
    }
    if (gpuport_cudrv_load(why, sizeof(why)) != GPUPORT_OK) {
        snprintf(comm->no_gpu_why, sizeof(comm->no_gpu_why), "%s", why);
        if (comm->config.gpu == GPUPORT_GPU_ON) {
            log_error("GPUPORT_GPU=on, but %s", why);
            return GPUPORT_ERR_NOT_SUPPORTED;
        }
        log_info("host-only communicator: %s", why);
        return GPUPORT_OK;
    }
    g = calloc(1, sizeof(*g));
    if (!g)
        return GPUPORT_ERR_NO_MEMORY;
    st = pick_device(comm, g);
    if (st)
        goto err;
    /* [tail line][gave_up_any line] then the slots */
    g->fifo_host_len = GPUPORT_DFIFO_HDR + nslots * sizeof(gpuport_trigger_t);
    st = CU_CALL(cuMemHostAlloc, (&g->fifo_host, g->fifo_host_len,
                                  CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP));
    if (st)
        goto err;
    memset(g->fifo_host, 0, g->fifo_host_len);
    st = CU_CALL(cuMemHostGetDevicePointer, (&g->fifo_host_d, g->fifo_host, 0));
    if (!st)
        st = CU_CALL(cuMemAlloc, (&g->fifo_dmem, GPUPORT_DFIFO_DMEM));
    if (!st)
        st = CU_CALL(cuMemsetD8, (g->fifo_dmem, 0, GPUPORT_DFIFO_DMEM));
    if (!st)
        st = CU_CALL(cuMemAlloc, (&g->words, comm->config.max_channels * GPUPORT_GPU_WORDS *
                                                 sizeof(uint64_t)));
    if (!st)
        st = CU_CALL(cuMemsetD8, (g->words, 0, comm->config.max_channels * GPUPORT_GPU_WORDS *
                                                   sizeof(uint64_t)));
    if (!st)
        st = map_host(comm->states, comm->states_size, &g->states_d, &g->states_registered);
    if (!st)
        st = map_host(comm->ctrl, comm->ctrl_size, &g->ctrl_d, &g->ctrl_registered);
    if (st)
        goto err;

    memset(&comm->dfifo, 0, sizeof(comm->dfifo));
    comm->dfifo.tail = (_Atomic uint64_t *)g->fifo_host;
    comm->dfifo.slots = (gpuport_trigger_t *)((char *)g->fifo_host + GPUPORT_DFIFO_HDR);
    comm->dfifo.size = (uint32_t)nslots;
    comm->dfifo.gave_up_any = (_Atomic uint32_t *)((char *)g->fifo_host + 64);
    comm->dfifo.log2_size = (uint32_t)__builtin_ctz((uint32_t)nslots);
    comm->gpu = g;
    comm->gpu_device = (int)g->dev;
    ends_open(comm, g);
    log_info("GPU mode on device %d", (int)g->dev);
    return GPUPORT_OK;

err:
    log_error("cannot set up GPU mode on device %d; GPUPORT_GPU=off runs host-only",
              (int)g->dev);
    gpu_free(comm, g);
    return st;
}

void gpuport_gpu_close(gpuport_comm_t comm)
{
    if (!comm->gpu)
        return;
    gpu_free(comm, comm->gpu);
    comm->gpu = NULL;
    memset(&comm->dfifo, 0, sizeof(comm->dfifo));
}


gpuport_status_t gpuport_gpu_channel_reset(gpuport_comm_t comm, uint32_t id)
{
    gpuport_status_t st;

    if (!comm->gpu)
        return GPUPORT_OK;
    st = CU_CALL(cuMemsetD8, (GPUPORT_GPU_WORD_D(comm->gpu, id, 0), 0,
                              GPUPORT_GPU_WORDS * sizeof(uint64_t)));
    if (!st && comm->mc_arena)
        st = CU_CALL(cuMemsetD8, ((CUdeviceptr)(uintptr_t)comm->mc_arena + id * sizeof(uint64_t),
                                  0, sizeof(uint64_t)));
    if (!st && comm->gpu->ends)
        st = CU_CALL(cuMemsetD8, (GPUPORT_GPU_ENDS_D(comm->gpu, id), 0, 2 * sizeof(int32_t)));
    return st;
}

/* Writes the end words own and peer, those not 0, into channel id's
 * device copy, in the flusher's context, and waits for the writes. */
static void note_end(gpuport_comm_t comm, uint32_t id, int32_t own, int32_t peer)
{
    int32_t w[2] = {own, peer};
    CUdeviceptr at = GPUPORT_GPU_ENDS_D(comm->gpu, id);

    for (int i = 0; i < 2; i++) {
        /* only an end: a 0 would overwrite one a kernel noted */
        if (w[i] && gpuport_gpu_copy_in(comm, (void *)(uintptr_t)(at + i * sizeof(int32_t)),
                                        &w[i], sizeof(int32_t)) != GPUPORT_OK)
            log_warn("channel %u: kernels' pushes may not report its end (%s) until a device "
                     "wait, poll or flush of it sees it: its device copy could not be written",
                     id, gpuport_status_string((gpuport_status_t)w[i]));
    }
}

void gpuport_gpu_note_ends(gpuport_channel_t ch)
{
    int noted = atomic_load_explicit(&ch->ends_noted, memory_order_acquire);
    int32_t own = noted & 1 ? 0 : atomic_load(&ch->state->status);
    int32_t peer = noted & 2 ? 0 : atomic_load(&ch->inbound->peer_status);

    if (!ch->comm->gpu || !ch->comm->gpu->ends || (!own && !peer))
        return;
    note_end(ch->comm, ch->id, own, peer);
    atomic_fetch_or_explicit(&ch->ends_noted, (own ? 1 : 0) | (peer ? 2 : 0),
                             memory_order_release);
}

int gpuport_gpu_peer_atomics(gpuport_comm_t comm, int ordinal)
{
    CUdevice peer;
    int v = 0;

    if (!comm->gpu || ordinal < 0)
        return 0;
    if (ordinal == comm->gpu_device)
        return 1;
    if (gpuport_cu.cuDeviceGet(&peer, ordinal) != CUDA_SUCCESS ||
        gpuport_cu.cuDeviceGetP2PAttribute(&v, CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED,
                                           comm->gpu->dev, peer) != CUDA_SUCCESS)
        return 0;
    return v != 0;
}

int gpuport_gpu_bus_id(gpuport_comm_t comm, char *buf, size_t len)
{
    if (!comm->gpu || len > INT_MAX)
        return -1;
    return CU_CALL(cuDeviceGetPCIBusId, (buf, (int)len, comm->gpu->dev)) == GPUPORT_OK ? 0 : -1;
}

/* The handle's device addresses: the FIFO's slots and tail and the
 * channel's state (flush progress, error state) are pinned host memory, its
 * inbound semaphore and the peer's word are in the control segment (host
 * memory registered with CUDA), the FIFO's head and tail copy and the
 * consumed-signal count are device memory. A program's handle of another
 * layout is not written. */
gpuport_status_t gpuport_channel_device_v(uint32_t layout, gpuport_channel_t ch,
                                          gpuport_port_channel_dev_t *dev_p)
{
    gpuport_comm_t comm;
    struct gpuport_gpu *g;
    gpuport_port_channel_dev_t d;

    if (!ch || ch->magic != GPUPORT_CHAN_MAGIC) {
        log_error("gpuport_channel_device: %p is not a live channel (NULL, destroyed already, or "
                  "not a channel)",
                  (void *)ch);
        return GPUPORT_ERR_INVALID_ARG;
    }
    if (!dev_p) {
        log_error("gpuport_channel_device: dev_p is NULL");
        return GPUPORT_ERR_INVALID_ARG;
    }
    if (gpuport_layout_check("gpuport_channel_device", "gpuport_port_channel_dev_t", layout,
                             GPUPORT_CHANNEL_DEV_LAYOUT))
        return GPUPORT_ERR_VERSION;
    comm = ch->comm;
    g = comm->gpu;
    if (!g) {
        log_error("channel %u: device handles need a communicator in GPU mode (this one is "
                  "host-only; see GPUPORT_GPU)",
                  ch->id);
        return GPUPORT_ERR_NOT_SUPPORTED;
    }
    memset(&d, 0, sizeof(d));
    d.layout = GPUPORT_CHANNEL_DEV_LAYOUT;
    d.fifo.slots = (gpuport_trigger_t *)(uintptr_t)(g->fifo_host_d + GPUPORT_DFIFO_HDR);
    d.fifo.head = (unsigned long long *)(uintptr_t)g->fifo_dmem;
    d.fifo.tail = (const volatile uint64_t *)(uintptr_t)g->fifo_host_d;
    d.fifo.tail_cache = (unsigned long long *)(uintptr_t)(g->fifo_dmem + 64);
    d.fifo.poller = (unsigned int *)(uintptr_t)(g->fifo_dmem + 72);
    d.fifo.granted = (unsigned long long *)(uintptr_t)(g->fifo_dmem + 128);
    d.fifo.gave_up_any = (uint32_t *)(uintptr_t)(g->fifo_host_d + 64);
    d.fifo.size = comm->dfifo.size;
    d.fifo.log2_size = comm->dfifo.log2_size;
    d.id = ch->id;
    d.rank = comm->rank;
    d.peer = ch->peer;
    d.src_size = ch->src_size;
    d.dst_size = ch->dst_size;
    d.rma_ops = ch->rma_ops;
    d.dst_addr_mod8 = ch->dst_addr_mod8;
    d.flushed = (const volatile uint64_t *)(uintptr_t)(GPUPORT_GPU_STATE_D(g, ch->id, flushed) +
                                                       GPUPORT_FIFO_DEVICE * sizeof(uint64_t));
    d.status = (const volatile int32_t *)(uintptr_t)GPUPORT_GPU_STATE_D(g, ch->id, status);
    d.inbound = (const volatile uint64_t *)(uintptr_t)GPUPORT_GPU_SLOT_D(g, ch->id, value);
    d.peer_status = (const volatile int32_t *)(uintptr_t)GPUPORT_GPU_SLOT_D(g, ch->id, peer_status);
    d.consumed = (unsigned long long *)(uintptr_t)GPUPORT_GPU_CONSUMED_D(g, ch->id);
    d.gave_up = (int32_t *)(uintptr_t)GPUPORT_GPU_STATE_D(g, ch->id, gave_up);
    d.timeout_ns = comm->timeout_ns;
    d.spin = comm->config.dev_spin;
    d.backoff_ns = comm->config.dev_backoff_ns;
    if (g->ends) {
        d.state = (int32_t *)(uintptr_t)GPUPORT_GPU_ENDS_D(g, ch->id);
        /* from here a host call's report writes the copy (chan_said); an
         * end reported before is written now (both sides seq_cst: one of
         * the two sees the other) */
        atomic_store_explicit(&ch->dev_handed, 1, memory_order_seq_cst);
        gpuport_gpu_note_ends(ch);
    }
    *dev_p = d;
    return GPUPORT_OK;
}


gpuport_status_t gpuport_gpu_ctx_push(gpuport_comm_t comm)
{
    return gpuport_fcuda_ctx_push(&comm->proxy.flusher);
}

void gpuport_gpu_ctx_pop(void)
{
    gpuport_fcuda_ctx_pop();
}
