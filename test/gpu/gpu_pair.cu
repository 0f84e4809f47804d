/* The two-process GPU tests' pair, GPUs and region memory; see gpu_pair.h. */
#include "gpu_pair.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu_check.h"
extern "C" {
#include "pair_bootstrap.h"
}

int gpu_pair_fork(gpuport_bootstrap_t *bs, pid_t *child_p)
{
    const char *one = getenv("GPUPORT_TEST_ONE_GPU");
    int one_gpu = one && strcmp(one, "1") == 0;
    int rank, n = 0;

    rank = pair_fork(bs, child_p);
    CHECK(rank >= 0);
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < (one_gpu ? 1 : 2)) {
        if (rank == 1)
            _exit(77);
        pair_join(*child_p);
        SKIP("needs 2 GPUs (found %d)", n);
    }
    CUDA_CHECK(cudaSetDevice(one_gpu ? 0 : rank));
    return rank;
}

void gpu_pair_join(int rank, pid_t child, int status)
{
    if (rank == 1)
        _exit(status);
    CHECK_MSG(pair_join(child) == 0, "rank 1 failed");
}

int gpu_mem_mapped(void)
{
    const char *t = getenv("GPUPORT_TRANSPORT");
    return t && strcmp(t, "tcp") == 0;
}

void gpu_region_alloc(gpuport_comm_t comm, size_t bytes, void **p)
{
    if (gpu_mem_mapped())
        CHECK_OK(gpuport_mem_alloc_device(comm, bytes, p));
    else
        CUDA_CHECK(cudaMalloc(p, bytes));
}

void gpu_region_free(void *p)
{
    if (!gpu_mem_mapped())
        cudaFree(p);
}
