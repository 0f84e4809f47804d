/*
 * gpuport_bench --rma-gpu (tools/bench_rma_gpu.cu): get, atomic_add and
 * accumulate from kernels, on a port channel over cuda_ipc and on a memory
 * channel, each beside its baseline from the same run. Called by
 * tools/gpuport_bench.c only, in GPU mode, with the pair's environment of
 * bench_gpu.h.
 */
#ifndef GPUPORT_BENCH_RMA_GPU_H
#define GPUPORT_BENCH_RMA_GPU_H

#include "bench_gpu.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Runs the tables; rank env->report prints them and writes the records.
 * Collective over the pair (exactly 2 ranks). Returns the number of rows
 * that failed verification (both sides count each); a CUDA error counts as
 * one. */
int bench_rma_gpu_run(const bench_gpu_env_t *env);

#ifdef __cplusplus
}
#endif

#endif
