/*
 * The end every timing kernel of gpuport_bench shares, and the end of its
 * launch on the host: a kernel thread stores its time and status (or the
 * last of many warps flushes and stamps the end), the host waits for the
 * stream and reads them back. For the GPU mode's .cu files (bench_gpu.cu,
 * bench_small.cu, bench_idle_gpu.cu); CUDA C++ only.
 */
#ifndef GPUPORT_BENCH_GPU_TAIL_H
#define GPUPORT_BENCH_GPU_TAIL_H

#include <stdint.h>
#include <stdio.h>

#include "gpuport/gpuport_device.h"
#include <cuda_runtime.h>

/* One kernel thread's result: the globaltimer since t0 and its status. */
__device__ static inline void bench_dev_done(uint64_t t0, int st, uint64_t *ns, int *rc)
{
    *ns = gpuport_dev_now_ns() - t0;
    *rc = st;
}

/* Every lane of a grid of whole warps calls this after its pushes: a
 * failure goes into *rc; the last warp to arrive flushes, so every other
 * warp's pushes came before that flush, and stamps *t_end. */
__device__ static inline void bench_dev_warps_done(gpuport_port_channel_dev_t *ch, int st,
                                                   unsigned int *warps_done, uint64_t *t_end,
                                                   int *rc)
{
    if (st)
        atomicExch(rc, st);
    __syncwarp();
    __threadfence();
    if ((threadIdx.x & 31) == 0) {
        unsigned int nwarps = gridDim.x * (blockDim.x / 32);
        if (atomicAdd(warps_done, 1u) == nwarps - 1) {
            st = gpuport_flush(ch);
            if (st)
                atomicExch(rc, st);
            *t_end = gpuport_dev_now_ns();
        }
    }
}

/* After a launch on stream s: its launch error, the stream waited for, and
 * the kernel's time and status read back where d_ns and d_rc are given. 0,
 * or -1 with the failing call on stderr. */
static inline int bench_wait(cudaStream_t s, const uint64_t *d_ns, uint64_t *ns, const int *d_rc,
                             int *rc)
{
    const char *call = "the kernel's launch";
    cudaError_t e = cudaGetLastError();

    if (e == cudaSuccess) {
        call = "cudaStreamSynchronize";
        e = cudaStreamSynchronize(s);
    }
    if (e == cudaSuccess && d_ns) {
        call = "cudaMemcpy(its time)";
        e = cudaMemcpy(ns, d_ns, sizeof(*ns), cudaMemcpyDeviceToHost);
    }
    if (e == cudaSuccess && d_rc) {
        call = "cudaMemcpy(its status)";
        e = cudaMemcpy(rc, d_rc, sizeof(*rc), cudaMemcpyDeviceToHost);
    }
    if (e != cudaSuccess) {
        fprintf(stderr, "gpuport_bench: %s failed: %s\n", call, cudaGetErrorString(e));
        return -1;
    }
    return 0;
}

#endif
