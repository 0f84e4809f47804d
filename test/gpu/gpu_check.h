/* Helpers for gpuport's GPU tests: CUDA runtime calls that must succeed, and
 * the skip rule (exit 77 with the reason) where the hardware is absent. */
#ifndef GPUPORT_TEST_GPU_CHECK_H
#define GPUPORT_TEST_GPU_CHECK_H

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

#define CUDA_CHECK(call)                                                                        \
    do {                                                                                        \
        cudaError_t e_ = (call);                                                                \
        if (e_ != cudaSuccess) {                                                                \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,                \
                    cudaGetErrorString(e_));                                                    \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

/* Exits 77 unless at least `need` GPUs are usable. Call before anything else
 * touches CUDA in a process that will fork. */
static inline void gpu_require(int need)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess)
        SKIP("no usable GPU: cudaGetDeviceCount: %s", cudaGetErrorString(e));
    if (n < need)
        SKIP("needs %d GPUs, this machine has %d", need, n);
}

#endif
