/*
 * The frame of the peer-library baselines (workloads/peers/: the three GPU
 * workloads written with NVSHMEM and with NCCL, and NVSHMEM's ping-pong
 * and put + signal rate), which gpuport neither
 * builds nor links: scripts/build-peers.sh builds them, and they compile
 * against gpuport's headers only for wl.h's declarations. Included by every
 * peer program; peer.cu defines it.
 *
 * wl.h's calls, for programs without gpuport: wl_init (the same options;
 * --no-mpi is accepted and changes nothing, the peers having no MPI column;
 * --csv and --json are refused, their rows being gpuport_bench's), wl_now,
 * wl_agree, wl_median, wl_rounds, wl_finish. Not wl_comm or wl_header,
 * which are gpuport's. Exit statuses as wl.h says: 0 only if every check
 * passed on every rank, 77 when the program cannot run here (said why).
 */
#ifndef GPUPORT_PEER_H
#define GPUPORT_PEER_H

#define OMPI_SKIP_MPICXX 1 /* MPI's C API only, in C++ too */
#define MPICH_SKIP_MPICXX 1
#include <cuda_runtime.h>
#include <mpi.h>
#include <stddef.h>

extern "C" {
#include "wl.h" /* wl.h speaks C; peer.cu defines its calls with C linkage */
}

/* 1 when e is cudaSuccess, else 0 after a line naming the call. */
int cuda_ok(cudaError_t e, const char *call);

/* This rank's GPU, made current: local rank % GPUs, or GPU 0 under
 * GPUPORT_TEST_ONE_GPU=1 (as the gpuport versions pick it). own: the
 * library needs a GPU of its own per rank (NCCL refuses two ranks on one),
 * so two ranks of a host on one GPU make every rank skip. Collective.
 * Returns -1 to go on (*dev_p and name set), else the exit status with MPI
 * finalized: 77 after a "SKIP:" line, 1 after a failure. */
int peer_gpu(int own, int *dev_p, char *name, size_t len);

/* Rank 0: the table's opening lines: "# NAME: WHAT", then ranks, hosts,
 * the library and its version, the GPU, the date. */
void peer_header(const char *name, const char *what, const char *lib, const char *gpu);

#endif
