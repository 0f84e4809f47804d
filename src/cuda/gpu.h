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
    void *fifo_host;       /* [tail][pad][slots][void marks] */
    CUdeviceptr fifo_host_d;
    size_t fifo_host_len;
    CUdeviceptr fifo_dmem; /* [head][tail_cache, poller][granted]: a line each */
    /* per channel, GPUPORT_GPU_WORDS 64-bit words, zeroed together when an
     * id is taken: [0] signals taken by device waiters, [1] and [2] a memory
     * channel's signals begun and published (gpuport_memory_signal), [4]
     * and [5] a peer channel's proxy operations pushed and flushed */
    CUdeviceptr words;
    /* per channel, 8 bytes: its two end words ([0] this side's error, [1]
     * the peer's word) as the pushes read them (gpuport_dev_end_words), in
     * VMM memory, which the flusher's context writes too
     * (gpuport_gpu_note_ends); 0: none (the pushes read the host words) */
    CUdeviceptr ends;
    size_t ends_len;
    CUdeviceptr states_d;
    CUdeviceptr ctrl_d;
    int states_registered;
    int ctrl_registered;
};

/* The device FIFO's pinned host memory: the tail's line, the gave_up_any
 * line, then the slots; and its device memory (fifo_dmem). */
#define GPUPORT_DFIFO_HDR 128
#define GPUPORT_DFIFO_DMEM 192

/* The device addresses kernels read a channel's words at, for both
 * handles (gpu.c, gpu_memchan.c): a field of its state (pinned host
 * memory) and of its semaphore slot (the control segment), and its count
 * of signals device waiters took. */
#define GPUPORT_GPU_STATE_D(g, id, field)                                                       \
    ((g)->states_d + (id) * sizeof(gpuport_chan_state_t) + offsetof(gpuport_chan_state_t, field))
#define GPUPORT_GPU_SLOT_D(g, id, field)                                                        \
    ((g)->ctrl_d + (id) * sizeof(gpuport_sem_slot_t) + offsetof(gpuport_sem_slot_t, field))
#define GPUPORT_GPU_WORDS 8
#define GPUPORT_GPU_WORD_D(g, id, w) ((g)->words + ((id) * GPUPORT_GPU_WORDS + (w)) * sizeof(uint64_t))
#define GPUPORT_GPU_CONSUMED_D(g, id) GPUPORT_GPU_WORD_D(g, id, 0)
#define GPUPORT_GPU_ENDS_D(g, id) ((g)->ends + (id) * 2 * sizeof(int32_t))
/* three words: signals begun, published, and the publisher's hold */
#define GPUPORT_GPU_TICKETS_D(g, id) GPUPORT_GPU_WORD_D(g, id, 1)
/* a peer channel's proxy operations pushed, and the count flushes covered */
#define GPUPORT_GPU_PORT_OPS_D(g, id) GPUPORT_GPU_WORD_D(g, id, 4)
#define GPUPORT_GPU_PORT_DONE_D(g, id) GPUPORT_GPU_WORD_D(g, id, 5)

#endif
