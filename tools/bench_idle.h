/*
 * gpuport_bench --idle (tools/bench_idle.c): what an idle proxy costs and
 * how late the first operation after a pause is, for each sleep policy
 * (GPUPORT_PROXY_SLEEP_MAX_US, GPUPORT_PROXY_SLEEP_SCALE), in host mode
 * (shm) and GPU mode (cuda_ipc, kernels' triggers). One communicator per
 * policy. The GPU side (tools/bench_idle_gpu.cu) is built with CUDA only.
 */
#ifndef GPUPORT_BENCH_IDLE_H
#define GPUPORT_BENCH_IDLE_H

#include <stddef.h>

#include "gpuport/gpuport_device.h"

#ifndef __CUDACC__ /* the CUDA side sees no MPI */
#include <mpi.h>

/* Runs the table for `pair` (2 ranks; rank 0 prints); gpu: 1 for GPU mode
 * (the CUDA device is current); `pauses` long pauses of `pause` seconds
 * per operation. Returns the number of failed operations (0). */
int bench_idle_run(MPI_Comm pair, int gpu, int pauses, double pause);
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* GPU side (bench_idle_gpu.cu): device memory for a region, and one timed
 * operation from a kernel thread: a flush (one proxy hop) or a 64 B put
 * then a flush (proxy and flusher). *us: in-kernel time, push to return. */
int bench_idle_gpu_alloc(size_t bytes, void **p);
void bench_idle_gpu_free(void *p);
int bench_idle_gpu_flush(const gpuport_port_channel_dev_t *ch, double *us);
int bench_idle_gpu_put_flush(const gpuport_port_channel_dev_t *ch, double *us);

#ifdef __cplusplus
}
#endif

#endif
