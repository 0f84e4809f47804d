/*
 * What the two-process GPU tests (test_gpu_channels, test_gpu_stall) share:
 * the process pair with its bootstrap, each process on its GPU, and GPU
 * memory that a channel of this run's transport can use.
 *
 * GPUs: process r uses GPU r, so the pair needs 2. GPUPORT_TEST_ONE_GPU=1
 * puts both on GPU 0 (their contexts then take turns on it: slow, but every
 * path is exercised). Where the GPUs are missing, both processes exit 77 and
 * the parent says why.
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

/* 1 when a channel's GPU regions must be mapped for the device by
 * gpuport_mem_alloc_device: under GPUPORT_TRANSPORT=tcp the flusher copies
 * GPU data from its own context, which cannot reach cudaMalloc memory. */
int gpu_mem_mapped(void);

/* `bytes` of GPU memory for a region: from gpuport_mem_alloc_device (freed
 * with the communicator) where gpu_mem_mapped(), else cudaMalloc. */
void gpu_region_alloc(gpuport_comm_t comm, size_t bytes, void **p);

/* Frees what gpu_region_alloc took from cudaMalloc, once the communicator
 * is destroyed; the mapped kind went with it. */
void gpu_region_free(void *p);

#endif
