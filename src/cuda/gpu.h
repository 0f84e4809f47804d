/*
 * GPU mode of a communicator: the device FIFO (slots and consumer counter in
 * pinned host memory mapped into the device, producer counter in device
 * memory), the host-mapped views of channel state and semaphores that
 * kernels read, and device memory registration. Application threads only;
 * CUDA calls here run in the application's context, never on the proxy.
 */
#ifndef GPUPORT_GPU_H
#define GPUPORT_GPU_H

#include <cuda.h>

#include "internal.h"

struct gpuport_gpu {
    CUdevice dev;
    CUcontext app_ctx;
    int retained;          /* we retained (and made current) the primary context */
    void *fifo_host;       /* [tail][pad][slots] */
    CUdeviceptr fifo_host_d;
    size_t fifo_host_len;
    CUdeviceptr fifo_dmem; /* [head line][tail_cache line] */
    CUdeviceptr consumed;  /* per channel: signals taken by device waiters */
    CUdeviceptr tickets;   /* per channel, 16 bytes: a memory channel's signals begun and
                            * published (gpuport_memory_signal) */
    CUdeviceptr states_d;
    CUdeviceptr ctrl_d;
    int states_registered;
    int ctrl_registered;
};

#define GPUPORT_DFIFO_HDR 128

#endif
