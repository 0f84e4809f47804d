/*
 * What the GPU mode's .cu files share (tools/bench_gpu.cu, the tables up to
 * the IPC bandwidth; tools/bench_small.cu, the small-operations table): the
 * state of one run, its channels, and the measurements both use. CUDA C++
 * only; the C side sees bench_gpu.h.
 */
#ifndef GPUPORT_BENCH_GPU_INT_H
#define GPUPORT_BENCH_GPU_INT_H

#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "bench_gpu.h"
#include "bench_gpu_tail.h"
#include "bench_out.h"
#include "gpuport/gpuport_device.h"
#include <cuda_runtime.h>

#define CK(call)                                                                                \
    do {                                                                                        \
        cudaError_t e_ = (call);                                                                \
        if (e_ != cudaSuccess) {                                                                \
            fprintf(stderr, "gpuport_bench: %s failed: %s (%s:%d)\n", #call,                    \
                    cudaGetErrorString(e_), __FILE__, __LINE__);                                \
            return -1;                                                                          \
        }                                                                                       \
    } while (0)

#define GK(call)                                                                                \
    do {                                                                                        \
        gpuport_status_t s_ = (call);                                                           \
        if (s_ != GPUPORT_OK) {                                                                 \
            fprintf(stderr, "gpuport_bench: %s failed: %s\n", #call, gpuport_status_string(s_)); \
            return -1;                                                                          \
        }                                                                                       \
    } while (0)

/* One memory kind's buffers and the channel over them. */
typedef struct kind {
    int mem;          /* BENCH_GPU_MEM_*: one bit */
    const char *name; /* for the tables */
    const char *short_name; /* for a ratio's column head */
    unsigned char *src, *dst;
    gpuport_mem_t msrc, mdst;
    gpuport_channel_t ch;
    gpuport_port_channel_dev_t dev;
} kind_t;

typedef struct state {
    const bench_gpu_env_t *env;
    kind_t k[2]; /* k[0] serves every figure; k[1] only the bandwidth table */
    cudaMemPool_t pool;     /* BENCH_GPU_MEM_POOL's exportable pool, or NULL */
    int nkinds;
    unsigned char *raw_dst; /* the baseline's destination, on the peer GPU */
    unsigned char *staging; /* over tcp: pinned host memory the bandwidth baseline copies
                             * through (device to host, host to device), as tcp does */
    int gpu, peer_gpu;
    int shared;             /* gpu == peer_gpu: contexts time-sliced on one GPU */
    uint64_t region;        /* bytes of every src and dst buffer */
    uint64_t *d_ns;
    int *d_rc;
    unsigned long long *d_bad, *d_bad_peer; /* d_bad_peer lives on the peer GPU */
    cudaStream_t s;
    cudaEvent_t e0, e1;
    uint64_t *d_samples; /* per-iteration times (ns) that timing kernels write */
    int samples_cap;     /* entries of d_samples */
    /* bench_fifo_measure's last figures */
    int fifo_iters, fifo_rc;
    uint64_t fifo_rt_ns, fifo_ps_ns; /* raw round trips, push + sync: total of fifo_iters */
    /* raw round trips with a push's device work (bench_gpu.cu's RT_PUSH),
     * and with its two device-memory accesses one after the other */
    uint64_t fifo_rt_push_ns, fifo_rt_serial_ns, fifo_rt_clock_ns; /* ... and reading the clock */
    uint64_t fifo_ps_serial_ns; /* push + sync with the reservation of commit 6dd63b6 */
    bench_stats_t fifo_rt_st, fifo_ps_st; /* per iteration, us: raw round trip, push + sync */
    /* bench_pingpong_measure's last figures */
    int pingpong_iters, pingpong_rc;
    double pingpong_us; /* busy round trip, mean */
    bench_stats_t pingpong_st; /* per round trip, us, on this rank */
} state_t;

/* the pattern k_fill writes into every source buffer: byte i is bpat(i) */
__host__ __device__ static inline unsigned char bpat(uint64_t i)
{
    return (unsigned char)((i * 2654435761u) >> 13);
}

/* Adds to *bad the bytes of p[0, n) that are not bpat(i), over any grid:
 * the receiver's check of what arrived. */
static __global__ void k_check(const unsigned char *p, uint64_t n, unsigned long long *bad)
{
    unsigned long long b = 0;
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x)
        b += p[i] != bpat(i);
    if (b)
        atomicAdd(bad, b);
}

static inline int scaled(const bench_gpu_env_t *env, int n)
{
    int v = (int)(n * env->iters_scale);
    return v < 1 ? 1 : v;
}

static inline uint64_t host_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Per-iteration samples: a timing kernel given st->d_samples writes the
 * globaltimer difference of each iteration there (the store is not waited
 * for; it falls into the next iteration's time). samples_room makes room for
 * n; samples_stats turns the first n into statistics in us. 0, or -1 on a
 * CUDA error. */
int bench_samples_room(state_t *st, int n);
int bench_samples_stats(state_t *st, int n, bench_stats_t *out);

/* "min ..., median ..., p99 ... us" of s, or that there were no samples */
void bench_stats_text(char *buf, size_t len, const bench_stats_t *s);
/* The FIFO latency rows of st->fifo_* for the records, measurement names
 * after `prefix` (the small-operations table measures them again). */
void bench_fifo_rows(const state_t *st, const char *prefix);

/* FIFO push + sync on k[0] beside the raw pinned round trip, fifo_iters of
 * each by one kernel thread, into st->fifo_* (statistics of both per
 * iteration). Needs no peer. 0, or -1 on a
 * CUDA error. */
int bench_fifo_measure(state_t *st);
/* put_with_signal + wait ping-pong on k[0], after 100 warm-up round trips,
 * into st->pingpong_*. Collective over the pair. 0, or -1 on a CUDA error. */
int bench_pingpong_measure(state_t *st);
/* gpuport puts of `size` over kind k's channel, one direction or both:
 * reps puts and a flush by one kernel thread, timed with events; *gbs where
 * this rank sends; the receiver checks every byte; a failure on this side
 * sets *failed_p. Collective over the pair. 0, or -1 on a CUDA error. */
int bench_gp_bw(state_t *st, kind_t *k, uint64_t size, int both, int reps, double *gbs,
                int *failed_p);

/* The small-operations table (bench_small.cu). Collective over the pair;
 * the number of verification failures, or -1 on a CUDA error. */
int bench_small(state_t *st);

/* The device back-off table (bench_backoff.cu). Collective over the pair;
 * the number of failures on this side, or -1 on a CUDA error. */
int bench_backoff(state_t *st);

/* The memory-channel table (bench_memchan.cu). Collective over the pair;
 * the number of failures on this side, or -1 on a CUDA error. */
int bench_memchan(state_t *st);

#endif
