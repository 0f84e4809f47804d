/*
 * GPU mode of gpuport_bench (tools/bench_gpu.cu): FIFO push+sync latency
 * beside a raw GPU<->CPU round trip, FIFO throughput by pushing warps, IPC
 * ping-pong beside a raw copy-engine copy, and IPC put bandwidth beside
 * cudaMemcpyAsync into the same peer buffer, for channels over cudaMalloc
 * or VMM memory (gpuport_mem_alloc_device), or both side by side; then
 * small operations (signals, put_value, 64-byte puts, 1-256 KiB puts, FIFO
 * round trip, ping-pong), each beside its limit measured from a private
 * CUDA context (tools/bench_small.cu). The pair may share one GPU
 * (time-sliced). The MPI side (tools/gpuport_bench.c)
 * provides the pairing and a bootstrap-like exchange.
 */
#ifndef GPUPORT_BENCH_GPU_H
#define GPUPORT_BENCH_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "gpuport/gpuport.h"

#ifdef __cplusplus
extern "C" {
#endif

/* the memory of the channels (bits of bench_gpu_env_t.mem) */
#define BENCH_GPU_MEM_CUDAMALLOC 1 /* cudaMalloc: CUDA IPC handles on cuda_ipc */
#define BENCH_GPU_MEM_VMM 2        /* gpuport_mem_alloc_device: VMM, shared by fd */
#define BENCH_GPU_MEM_POOL 4       /* cudaMallocFromPoolAsync from a pool made with the POSIX
                                    * descriptor handle type: shared by the pool's fd */

typedef struct bench_gpu_env {
    gpuport_comm_t comm;
    int rank;       /* in the communicator */
    int nranks;     /* in the communicator (for the records) */
    int peer;       /* the pair's other rank */
    int report;     /* 1: this rank prints the tables */
    uint64_t min_size, max_size;
    double iters_scale;
    int baselines;  /* 0: skip the raw copy-engine baselines (and the context
                     * they need on the peer GPU) */
    int mem;        /* BENCH_GPU_MEM_* bits, one channel per kind (at most two);
                     * with two, the IPC bandwidth table shows them side by side
                     * and the other figures use the first (cudaMalloc before
                     * VMM before pool) */
    int small_only; /* 1: only the small-operations table */
    int bandwidth_only; /* 1: only the IPC bandwidth table */
    int backoff_only;   /* 1: only the device back-off table (tools/bench_backoff.cu) */
    int memchan_only;   /* 1: only the memory-channel table (tools/bench_memchan.cu) */
    void *ctx;
    void (*barrier)(void *ctx); /* the pair, or everyone */
    void (*exchange)(void *ctx, const void *mine, void *theirs, size_t bytes); /* with peer */
} bench_gpu_env_t;

/* GPUs this process can use; 0 when CUDA or a driver is missing. */
int bench_gpu_count(void);
/* Makes device `dev` current; call before the communicator is created. */
int bench_gpu_select(int dev);
/* Runs every GPU benchmark; returns the number of verification failures. */
int bench_gpu_run(const bench_gpu_env_t *env);

#ifdef __cplusplus
}
#endif

#endif
