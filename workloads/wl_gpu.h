/*
 * The GPU programs' shared host side (halo_gpu.cu, allreduce_gpu.cu,
 * alltoall_gpu.cu): a CUDA call's check and the choice of this rank's GPU.
 * Header-only, for CUDA C++ sources, after wl.h (which it uses).
 */
#ifndef WL_GPU_H
#define WL_GPU_H

#include <cuda_runtime.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>



/* 1 where the CUDA call succeeded; else says which call failed and why. */
static inline int wl_cuda_ok(cudaError_t e, const char *call)
{
    if (e == cudaSuccess)
        return 1;
    fprintf(stderr, "rank %d: %s failed: %s\n", wl_rank, call, cudaGetErrorString(e));
    return 0;
}

/* Makes this rank's GPU current, with its context: its local rank (among
 * the ranks MPI places on its host) % the host's GPUs, or GPU 0 under
 * GPUPORT_TEST_ONE_GPU=1. The gpuport communicator made after it takes the
 * current device. Collective over MPI_COMM_WORLD. local_size_p (or NULL):
 * the ranks on this host; name (or NULL): the GPU's name. Returns the
 * device; -1 where there is none (said, as SKIP); -2 where CUDA failed. */
static inline int wl_gpu_pick(int *local_size_p, char *name, size_t len)
{
    const char *one = getenv("GPUPORT_TEST_ONE_GPU");
    cudaDeviceProp prop;
    MPI_Comm host;
    int local_rank, local_size, n = 0, dev;
    cudaError_t e;

    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, wl_rank, MPI_INFO_NULL, &host);
    MPI_Comm_rank(host, &local_rank);
    MPI_Comm_size(host, &local_size);
    MPI_Comm_free(&host);
    if (local_size_p)
        *local_size_p = local_size;
    e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        printf("rank %d: SKIP: no usable GPU (cudaGetDeviceCount: %s, %d devices)\n", wl_rank,
               cudaGetErrorString(e), n);
        return -1;
    }
    dev = one && strcmp(one, "1") == 0 ? 0 : local_rank % n;
    if (!wl_cuda_ok(cudaSetDevice(dev), "cudaSetDevice") ||
        !wl_cuda_ok(cudaFree(0), "cudaFree(0)"))
        return -2;
    if (name) {
        if (!wl_cuda_ok(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties"))
            return -2;
        snprintf(name, len, "%s", prop.name);
    }
    return dev;
}

#endif
