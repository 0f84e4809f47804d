/*
 * What the two-process GPU tests (test_gpu_channels, test_gpu_stall,
 * test_gpu_death, test_gpu_vmm) share: the process pair with its bootstrap,
 * each process on its GPU, and GPU memory of the kind this run asks for.
 *
 * GPUs: process r uses GPU r, so the pair needs 2. GPUPORT_TEST_ONE_GPU=1
 * puts both on GPU 0 (their contexts then take turns on it: slow, but every
 * path is exercised). Where the GPUs are missing, both processes exit 77 and
 * the parent says why.
 *
 * Memory: GPUPORT_TEST_MEM=cudamalloc|vmm|appvmm|pool|defpool picks what gpu_region_alloc
 * returns (see gpu_mem_kind).
 */
#ifndef GPUPORT_TEST_GPU_PAIR_H
#define GPUPORT_TEST_GPU_PAIR_H

#include <stddef.h>
#include <sys/types.h>

#include "gpuport/gpuport.h"

/* Forks the pair (before anything initializes CUDA: a child may not inherit
 * a CUDA state), each process with a bootstrap over one end of a socketpair,
 * then makes this process's GPU current. Returns the rank: 0 in the parent,
 * which gets the child's pid in *child_p, 1 in the child. */
int gpu_pair_fork(gpuport_bootstrap_t *bs, pid_t *child_p);

/* The end of the run: the child exits with `status`; the parent waits for
 * it and fails (exit 1) unless it exited 0. */
void gpu_pair_join(int rank, pid_t child, int status);

/* 1 under GPUPORT_TRANSPORT=tcp, which refuses cudaMalloc memory (its
 * flusher copies GPU data from its own context, which cannot reach it). */
int gpu_mem_mapped(void);

/* The GPU memory of this run's regions, from GPUPORT_TEST_MEM:
 *   cudamalloc  cudaMalloc (CUDA IPC handles on cuda_ipc; tcp refuses it)
 *   vmm         gpuport_mem_alloc_device (VMM with a POSIX-FD handle)
 *   appvmm      the application's own VMM memory, the way PyTorch's
 *               expandable segments grow: two cuMemCreate allocations
 *               (POSIX-FD handle type) mapped side by side in one reserved
 *               range, the region spanning both (gpu_appvmm_region)
 *   pool        cudaMallocFromPoolAsync from one pool of the process made
 *               with cudaMemHandleTypePosixFileDescriptor (exportable)
 *   defpool     cudaMallocAsync: the device's default pool, which cannot be
 *               exported (tcp only: cuda_ipc refuses it as a destination)
 * Unset: vmm where gpu_mem_mapped(), else cudamalloc. A bad value,
 * cudamalloc under tcp or defpool under another transport fails the
 * test. */
typedef enum gpu_mem_kind {
    GPU_MEM_CUDAMALLOC,
    GPU_MEM_VMM,
    GPU_MEM_APPVMM,
    GPU_MEM_POOL,
    GPU_MEM_DEFPOOL
} gpu_mem_kind_t;

gpu_mem_kind_t gpu_mem_kind(void);
/* "cudamalloc (cudaMalloc)", ...: for the first line of a test's output */
const char *gpu_mem_kind_desc(gpu_mem_kind_t kind);

/* `bytes` of GPU memory of this run's kind for a region. */
void gpu_region_alloc(gpuport_comm_t comm, size_t bytes, void **p);

/* Frees what gpu_region_alloc returned, once the communicator is destroyed
 * (the vmm kind went with it) and, for pool memory, once the peer's has
 * been too (it imported the allocations: CUDA wants importers to free
 * first). */
void gpu_region_free(void *p);

/* The process's pool made with cudaMemHandleTypePosixFileDescriptor on the
 * current device (made at the first call; GPUPORT_TEST_MEM=pool allocates
 * from it). */
#ifdef __CUDACC__
#include <cuda_runtime.h>
cudaMemPool_t gpu_exportable_pool(void);
#endif

/* The VMM allocation granularity (minimum) of the current device for
 * pinned device memory with (fd_handle) or without a POSIX-FD handle. */
size_t gpu_vmm_granularity(int fd_handle);

/* Application VMM memory on the current device: `n` allocations of sizes[i]
 * bytes (each rounded up to the granularity; cuMemCreate, pinned,
 * requestedHandleTypes CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR if
 * fd_handle, else none) mapped side by side from the start of one reserved
 * range, read-write for the current device. The allocation handles are
 * released at once: the mappings hold the memory, as in an application
 * that keeps only the pointer. Returns the range's start. Any failure fails
 * the test. */
void *gpu_appvmm_alloc(const size_t *sizes, int n, int fd_handle);

/* A region of `bytes` from gpu_appvmm_alloc that spans two allocations:
 * its first half (rounded down to 256 bytes) ends the first allocation and
 * the rest starts the second, so the region begins inside the first. */
void *gpu_appvmm_region(size_t bytes, int fd_handle);

/* Unmaps and frees the range from gpu_appvmm_alloc that contains p. */
void gpu_appvmm_free(void *p);

#endif
