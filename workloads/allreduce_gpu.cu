/*
 * allreduce_gpu: a float32 sum of GPU buffers over every rank, driven by
 * kernels through gpuport, beside MPI_Allreduce in the same run, verified.
 *
 * Each rank has one window of GPU memory (gpuport_mem_alloc_device: VMM,
 * which memory channels map and every transport carries) with the same
 * layout everywhere, registered once as the source and destination of a
 * port channel to every other rank, and of a memory channel where every
 * rank is on this host, and of a peer channel to every other rank
 * (gpuport_peer_channel_create_all): IN | OUT | PORT: n chunk slots | PKT:
 * 2 x n packet slots | TMP: n vectors. One cooperative kernel runs all the
 * rounds of a size, no host call between: each round fills OUT with NaN
 * (every element must be written again), meets the other ranks (a signal to
 * and a wait for each, untimed), then does one allreduce, timed by
 * globaltimer. Four ways:
 * - peer channels (the way to write it; any rank, each pair by the fastest
 *   path it allows): port channels' reduce-scatter + allgather below, a
 *   block per peer with the block's calls: gpuport_peer_put_with_signal_block
 *   (the block's stores up to GPUPORT_PEER_STORE_MAX bytes a thread where
 *   the peer's memory is mapped, the copy engine above and elsewhere), then
 *   gpuport_peer_wait_until_block for the peer's signal of the step, numbered
 *   since the channels' creation (three a round: the meeting and the two
 *   steps), and after the allgather gpuport_peer_flush_block (OUT, the
 *   source, is refilled next round).
 * - memory channels up to PKT_MAX: a rank stores its input as packets
 *   (gpuport_memory_put_packets: data and flag in each 16-byte store) into
 *   slot `rank` of every peer's PKT, reads the peers' packets in its own
 *   (gpuport_memory_read_packets: the flags say the data is there) and adds
 *   the n vectors in rank order, each thread the packets it read. The flag
 *   is the round's number, and PKT's two sets of slots go by its parity: a
 *   rank a round ahead never overwrites packets a peer still reads.
 * - memory channels above: after a signal to and from every peer (inputs
 *   ready, previous call over), rank r sums chunk r of every rank's IN
 *   through the mapped windows (gpuport_memory_peer_ptr) in rank order and
 *   stores the sum into every rank's OUT: reduce-scatter and allgather in
 *   one pass, ended by a signal to and from every peer.
 * - port channels (any transport, between hosts too; they add nothing into
 *   GPU memory, so puts and local sums): rank r puts chunk p of its IN into
 *   slot r of rank p's PORT (gpuport_put_with_signal), waits for its peers'
 *   parts of chunk r, sums them in rank order, puts the sum into every
 *   peer's OUT, waits for theirs and flushes (IN and OUT are then reusable).
 * PKT_MAX and the grid are chosen, not tuned: no GPU where this was written.
 *
 * Each way adds every element once, in rank order, and copies the sum to
 * every rank: each rank's result must equal the float sum in rank order
 * exactly (so every rank's are identical) and lie within (gamma(n-1, 2^-24)
 * + gamma(n-1, 2^-53)) * sum |x| of the exact sum, as in allreduce.c; MPI's
 * must meet the bound. Every rank computes the reference (inputs are a hash
 * of rank and index). The baseline stages through pinned host memory
 * (cudaMemcpy, MPI_Allreduce, cudaMemcpy), each call timed after a barrier.
 * Ranks use GPU local_rank % count (GPUPORT_TEST_ONE_GPU=1: GPU 0, and the
 * ranks' kernels run at once only under MPS, scripts/with-mps.sh); without a
 * usable GPU it says so and exits 77.
 *
 *   mpirun -np 2 workloads/allreduce_gpu [--small]
 */
#define OMPI_SKIP_MPICXX 1 /* MPI's C API only, in C++ too */
#define MPICH_SKIP_MPICXX 1
#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_out.h"
#include "gpuport/gpuport_device.h"
#include "gpuport/gpuport_mpi.h"
extern "C" { /* wl.c is C, and wl.h says nothing of it */
#include "wl.h"
}
#include "wl_gpu.h"

namespace cg = cooperative_groups;

#define BLOCKS 16
#define THREADS 512
#define PKT_MAX (64 * WL_KIB) /* the largest size the memory channels send as packets */
#define MC_MAX_RANKS 16      /* the read-reduce-write pass keeps a pointer per rank */
#define MAX_ROUNDS 1000      /* timed and warm-up rounds of one launch */

enum way { WAY_PACKETS, WAY_READ, WAY_PORT, WAY_PEER, WAY_MPI /* the baseline, on the host */ };
static const char *const way_name[] = {"memory channels (packets)", "memory channels (read)",
                                       "port channels", "peer channels", "MPI"};

/* The window and channels as the kernel sees them (by value). */
typedef struct ar_dev {
    const gpuport_memory_channel_dev_t *mc; /* [n] in device memory */
    const gpuport_port_channel_dev_t *pc;   /* [n] in device memory */
    gpuport_peer_channel_dev_t *peer;       /* [n] in device memory (device_all) */
    unsigned char *win;                     /* this rank's window */
    uint64_t off_in, off_out, off_port, off_pkt, off_tmp;
    uint64_t cslot, pslot; /* bytes of a PORT slot (a chunk), of a PKT slot */
    int rank, n;
} ar_dev_t;

/* One launch: `warm` untimed rounds, then `rounds` timed ones. */
typedef struct run {
    enum way way;
    uint64_t count;         /* elements, a multiple of 4 */
    uint32_t flag;          /* the packets' flag before the first round */
    uint64_t seq;           /* signals each peer channel received before the first round */
    int warm, rounds;
    unsigned long long *ns; /* [rounds]: each timed round's time */
    int *err; /* [0]: the first failed call's status, [1]: its phase (INT_MAX: none) */
} run_t;

/* ---- device side -------------------------------------------------------- */

static __device__ unsigned long long now_ns(void)
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* A failed call's status, and the phase it happened in (the earliest wins). */
static __device__ void fail(const run_t &r, int st, int phase)
{
    if (st != GPUPORT_OK) {
        atomicCAS(&r.err[0], 0, st);
        atomicMin(&r.err[1], phase);
    }
}

/* After a grid sync: whether a call failed in this phase or before. Every
 * thread gets the same answer (a failure in a later phase is recorded as
 * later), so the grid leaves together and no grid sync waits for a block
 * that has left. */
static __device__ bool failed(const run_t &r, int phase)
{
    return *(volatile int *)&r.err[1] <= phase;
}

/* Block 0, one thread per peer: a signal to it, then a wait for its (on a
 * peer channel, its seq-th since the channel's creation). */
static __device__ void meet(const ar_dev_t &a, enum way way, const run_t &r, int phase,
                            uint64_t seq)
{
    int p = threadIdx.x, st;

    if (blockIdx.x != 0 || p >= a.n || p == a.rank)
        return;
    if (way == WAY_PEER) {
        st = gpuport_peer_signal(&a.peer[p]);
        st = st ? st : gpuport_peer_wait_until(&a.peer[p], seq);
    } else if (way == WAY_PORT) {
        st = gpuport_signal(&a.pc[p]);
        st = st ? st : gpuport_wait(&a.pc[p]);
    } else {
        st = gpuport_memory_signal(&a.mc[p]);
        st = st ? st : gpuport_memory_wait(&a.mc[p]);
    }
    fail(r, st, phase);
}

/* Quads (4 floats) [*q0, *q1) of chunk c: count / 4 quads in n chunks. */
static __device__ void chunk_of(uint64_t count, int n, int c, uint64_t *q0, uint64_t *q1)
{
    *q0 = count / 4 * (uint64_t)c / (uint64_t)n;
    *q1 = count / 4 * (uint64_t)(c + 1) / (uint64_t)n;
}

static __device__ void add4(float4 &s, float4 x)
{
    s.x += x.x;
    s.y += x.y;
    s.z += x.z;
    s.w += x.w;
}

static __device__ void packets(const ar_dev_t &a, const run_t &r, uint32_t flag, int phase)
{
    uint32_t t = blockIdx.x * blockDim.x + threadIdx.x, nt = gridDim.x * blockDim.x;
    uint64_t bytes = r.count * sizeof(float), set = a.off_pkt + (flag & 1) * a.n * a.pslot;
    const float *in = (const float *)(a.win + a.off_in);
    float *out = (float *)(a.win + a.off_out);
    unsigned char *tmp = a.win + a.off_tmp; /* the peers' vectors, read out of packets */
    int st = GPUPORT_OK;

    for (int k = 1; k < a.n && !st; k++) { /* the next rank first, not all on one */
        int p = (a.rank + k) % a.n;
        st = gpuport_memory_put_packets(&a.mc[p], set + a.rank * a.pslot, a.off_in, bytes, flag,
                                        t, nt);
    }
    for (int k = 1; k < a.n && !st; k++) {
        int p = (a.rank + k) % a.n;
        st = gpuport_memory_read_packets(&a.mc[p], set + p * a.pslot, tmp + p * PKT_MAX, bytes,
                                         flag, t, nt);
    }
    fail(r, st, phase);
    /* the packets this thread read: elements 2i and 2i + 1 */
    for (uint64_t i = t; i < bytes / 8; i += nt)
        for (uint64_t e = 2 * i; e < 2 * i + 2; e++) {
            float s = 0;
            for (int p = 0; p < a.n; p++) {
                const float *x = p == a.rank ? in : (const float *)(tmp + p * PKT_MAX);
                s = p == 0 ? x[e] : s + x[e];
            }
            out[e] = s;
        }
}

static __device__ bool read_reduce(const ar_dev_t &a, const run_t &r, cg::grid_group &grid,
                                   int &phase)
{
    uint32_t t = blockIdx.x * blockDim.x + threadIdx.x, nt = gridDim.x * blockDim.x;
    const float4 *src[MC_MAX_RANKS];
    float4 *dst[MC_MAX_RANKS];
    uint64_t q0, q1;

    meet(a, WAY_READ, r, phase, 0); /* every input ready, every previous call over */
    grid.sync();
    if (failed(r, phase++))
        return false;
    for (int p = 0; p < a.n; p++) {
        bool me = p == a.rank;
        src[p] = (const float4 *)(me ? a.win + a.off_in
                                     : gpuport_memory_peer_ptr(&a.mc[p], a.off_in));
        dst[p] = (float4 *)(me ? a.win + a.off_out : gpuport_memory_peer_ptr(&a.mc[p], a.off_out));
        if (!src[p] || !dst[p]) {
            fail(r, GPUPORT_ERR_OUT_OF_RANGE, phase);
            src[p] = (const float4 *)(a.win + a.off_in); /* harmless: the round ends below */
            dst[p] = (float4 *)(a.win + a.off_out);
        }
    }
    chunk_of(r.count, a.n, a.rank, &q0, &q1);
    for (uint64_t i = q0 + t; i < q1; i += nt) {
        float4 s = __ldcg(src[0] + i); /* from L2: other GPUs wrote these */
        for (int p = 1; p < a.n; p++)
            add4(s, __ldcg(src[p] + i));
        for (int p = 0; p < a.n; p++)
            dst[p][i] = s;
    }
    __threadfence_system(); /* the stores, then (through the grid sync) the signals */
    grid.sync();
    meet(a, WAY_READ, r, phase, 0); /* every peer's chunk is in this OUT */
    grid.sync();
    return !failed(r, phase++);
}

/* The sum of this rank's chunk (quads [q0, q1)) in rank order from the PORT slots
 * (this rank's part from IN) into OUT; every thread of the grid. */
static __device__ void sum_chunk(const ar_dev_t &a, uint64_t q0, uint64_t q1)
{
    uint32_t t = blockIdx.x * blockDim.x + threadIdx.x, nt = gridDim.x * blockDim.x;
    const float4 *in = (const float4 *)(a.win + a.off_in);
    float4 *out = (float4 *)(a.win + a.off_out);

    for (uint64_t i = q0 + t; i < q1; i += nt) {
        float4 s;
        for (int k = 0; k < a.n; k++) {
            const float4 *x = (const float4 *)(a.win + a.off_port + k * a.cslot) + (i - q0);
            float4 v = k == a.rank ? in[i] : __ldcg(x); /* a peer or a copy engine wrote x */
            if (k == 0)
                s = v;
            else
                add4(s, v);
        }
        out[i] = s;
    }
}

static __device__ bool port_rs_ag(const ar_dev_t &a, const run_t &r, cg::grid_group &grid,
                                  int &phase)
{
    int p = threadIdx.x;
    bool peer = blockIdx.x == 0 && p < a.n && p != a.rank;
    uint64_t q0, q1, f, l;

    /* reduce-scatter: this rank's part of chunk p to its owner, slot `rank` */
    if (peer) {
        chunk_of(r.count, a.n, p, &f, &l);
        int st = l > f ? gpuport_put_with_signal(&a.pc[p], a.off_port + a.rank * a.cslot,
                                                 a.off_in + f * 16, (l - f) * 16)
                       : gpuport_signal(&a.pc[p]);
        st = st ? st : gpuport_wait(&a.pc[p]); /* p's part of this rank's chunk is here */
        fail(r, st, phase);
    }
    grid.sync();
    if (failed(r, phase++))
        return false;
    chunk_of(r.count, a.n, a.rank, &q0, &q1);
    sum_chunk(a, q0, q1);
    __threadfence_system(); /* the sums visible before the copy engine reads them */
    grid.sync();
    /* allgather: the sum to every peer; theirs into this OUT */
    if (peer) {
        int st = q1 > q0 ? gpuport_put_with_signal(&a.pc[p], a.off_out + q0 * 16,
                                                   a.off_out + q0 * 16, (q1 - q0) * 16)
                         : gpuport_signal(&a.pc[p]);
        st = st ? st : gpuport_wait(&a.pc[p]);
        st = st ? st : gpuport_flush(&a.pc[p]); /* this rank's puts are done */
        fail(r, st, phase);
    }
    grid.sync();
    return !failed(r, phase++);
}

/* port_rs_ag's steps over peer channels: block b sends to the peers
 * rank + 1 + b, + 1 + b + grid, ... (the next rank first, not all on one),
 * one block call each, and only then waits for each one's signal number
 * seq + 1 (reduce-scatter) or seq + 2 (allgather): a block that waited
 * before its next send could wait in a cycle (more peers than blocks). An
 * empty chunk's put (more ranks than quads) is its signal alone. */
static __device__ bool peer_rs_ag(const ar_dev_t &a, const run_t &r, cg::grid_group &grid,
                                  int &phase, uint64_t seq)
{
    uint64_t q0, q1, f, l;
    int st = GPUPORT_OK;

    chunk_of(r.count, a.n, a.rank, &q0, &q1);
    /* exchange: begin */
    for (int k = 1 + blockIdx.x; k < a.n && !st; k += gridDim.x) {
        int p = (a.rank + k) % a.n;
        chunk_of(r.count, a.n, p, &f, &l);
        st = gpuport_peer_put_with_signal_block(&a.peer[p], a.off_port + a.rank * a.cslot,
                                                a.off_in + f * 16, (l - f) * 16);
    }
    for (int k = 1 + blockIdx.x; k < a.n && !st; k += gridDim.x)
        st = gpuport_peer_wait_until_block(&a.peer[(a.rank + k) % a.n], seq + 1);
    /* exchange: end */
    fail(r, st, phase);
    grid.sync();
    if (failed(r, phase++))
        return false;
    sum_chunk(a, q0, q1);
    __threadfence_system(); /* the sums visible before a peer or copy engine reads them */
    grid.sync();
    /* exchange: begin */
    for (int k = 1 + blockIdx.x; k < a.n && !st; k += gridDim.x)
        st = gpuport_peer_put_with_signal_block(&a.peer[(a.rank + k) % a.n], a.off_out + q0 * 16,
                                                a.off_out + q0 * 16, (q1 - q0) * 16);
    for (int k = 1 + blockIdx.x; k < a.n && !st; k += gridDim.x) {
        const gpuport_peer_channel_dev_t *pc = &a.peer[(a.rank + k) % a.n];
        st = gpuport_peer_wait_until_block(pc, seq + 2);
        st = st ? st : gpuport_peer_flush_block(pc); /* OUT is refilled next round */
    }
    /* exchange: end */
    fail(r, st, phase);
    grid.sync();
    return !failed(r, phase++);
}

__global__ void __launch_bounds__(THREADS) allreduce_rounds(ar_dev_t a, run_t r)
{
    cg::grid_group grid = cg::this_grid();
    uint32_t t = blockIdx.x * blockDim.x + threadIdx.x, nt = gridDim.x * blockDim.x;
    float *out = (float *)(a.win + a.off_out);
    int phase = 0;

    for (int round = -r.warm; round < r.rounds; round++) {
        uint32_t flag = r.flag + (uint32_t)(round + r.warm) + 1;
        uint64_t seq = r.seq + 3 * (uint64_t)(round + r.warm); /* peer channels' signals so far */
        unsigned long long t0 = 0;
        bool good;

        for (uint64_t i = t; i < r.count; i += nt)
            out[i] = __int_as_float(-1); /* NaN */
        __threadfence_system(); /* before the peers, met next, store into OUT */
        grid.sync();
        meet(a, r.way, r, phase, seq + 1);
        grid.sync();
        if (failed(r, phase++))
            return;
        if (t == 0)
            t0 = now_ns();
        if (r.way == WAY_PACKETS) {
            packets(a, r, flag, phase);
            grid.sync();
            good = !failed(r, phase++);
        } else {
            good = r.way == WAY_READ   ? read_reduce(a, r, grid, phase)
                   : r.way == WAY_PEER ? peer_rs_ag(a, r, grid, phase, seq + 1)
                                       : port_rs_ag(a, r, grid, phase);
        }
        if (!good)
            return;
        if (t == 0 && round >= 0)
            r.ns[round] = now_ns() - t0;
    }
}

/* ---- host side ----------------------------------------------------------- */

typedef struct ar {
    gpuport_comm_t comm;
    gpuport_mem_t mem;
    gpuport_channel_t *pc;             /* [n] port channels (NULL for this rank) */
    gpuport_memory_channel_t *mc;      /* [n] memory channels, where every rank is local */
    gpuport_memory_channel_dev_t *mcd; /* [n] their handles for kernels */
    gpuport_port_channel_dev_t *pcd;   /* [n] */
    gpuport_peer_channel_t *peer;      /* [n] peer channels (NULL for this rank) */
    int have_mc;                       /* every memory channel made, on every rank */
    ar_dev_t dev;                      /* dev.mc, .pc, .peer: the handles in device memory */
    uint32_t flag;                     /* the last packet flag used */
    uint64_t peer_seq;                 /* signals each peer channel has received */
    char tr[64], peer_tr[48];          /* the records' channels: the others', the peer ones' */
    unsigned long long *ns;            /* device: a launch's round times */
    int *err;                          /* device: a launch's failure */
    float *host_in, *host_out;         /* pinned: the staged baseline, results to check */
} ar_t;

/* rank r's element i: the same on every rank, in [-1, 1) (allreduce.c's) */
static float value(int r, uint64_t i)
{
    uint64_t h = ((uint64_t)r * 0x9e3779b97f4a7c15ull) ^ (i * 0xbf58476d1ce4e5b9ull);
    h ^= h >> 31;
    h *= 0x94d049bb133111ebull;
    h ^= h >> 29;
    return (float)((double)(h >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* The window for sizes up to max_bytes, with this rank's input, and the
 * channels: every pair in increasing rank order, the same on both sides; a
 * memory channel that cannot be made fails on both, and the rest are made;
 * the peer channels all at once (gpuport_peer_channel_create_all: all or
 * none, on every rank). */
static int ar_open(ar_t *a, uint64_t max_bytes, int all_local)
{
    ar_dev_t *d = &a->dev;
    int n = wl_size, mc_all = all_local && n <= MC_MAX_RANKS;
    uint64_t win;

    d->rank = wl_rank;
    d->n = n;
    /* setup: begin */
    d->cslot = (max_bytes / 16 + n - 1) / n * 16;
    d->off_out = max_bytes;
    d->off_port = 2 * max_bytes;
    /* setup: end */
    d->pslot = gpuport_memory_packet_bytes(PKT_MAX);
    d->off_pkt = d->off_port + n * d->cslot;
    d->off_tmp = d->off_pkt + 2 * n * d->pslot;
    win = d->off_tmp + n * PKT_MAX;
    a->pc = (gpuport_channel_t *)calloc(n, sizeof(*a->pc));
    a->mc = (gpuport_memory_channel_t *)calloc(n, sizeof(*a->mc));
    a->mcd = (gpuport_memory_channel_dev_t *)calloc(n, sizeof(*a->mcd));
    a->pcd = (gpuport_port_channel_dev_t *)calloc(n, sizeof(*a->pcd));
    a->peer = (gpuport_peer_channel_t *)calloc(n, sizeof(*a->peer));
    if (!a->pc || !a->mc || !a->mcd || !a->pcd || !a->peer ||
        !wl_cuda_ok(cudaMallocHost((void **)&a->host_in, max_bytes), "cudaMallocHost") ||
        !wl_cuda_ok(cudaMallocHost((void **)&a->host_out, max_bytes), "cudaMallocHost") ||
        !wl_cuda_ok(cudaMalloc((void **)&a->ns, MAX_ROUNDS * sizeof(*a->ns)), "cudaMalloc") ||
        !wl_cuda_ok(cudaMalloc((void **)&a->err, 2 * sizeof(int)), "cudaMalloc") ||
        !wl_cuda_ok(cudaMalloc((void **)&d->mc, n * sizeof(*a->mcd)), "cudaMalloc") ||
        !wl_cuda_ok(cudaMalloc((void **)&d->pc, n * sizeof(*a->pcd)), "cudaMalloc"))
        return 0;
    /* setup: begin */
    if (!WL_OK(gpuport_mem_alloc_device(a->comm, win, (void **)&d->win)) ||
        !WL_OK(gpuport_mem_register(a->comm, d->win, win, &a->mem)) ||
        !WL_OK(gpuport_peer_channel_create_all(a->comm, a->mem, a->mem, a->peer)) ||
        !WL_OK(gpuport_peer_channel_device_all(a->comm, a->peer, &d->peer)))
        return 0;
    /* setup: end */
    for (uint64_t i = 0; i < max_bytes / sizeof(float); i++)
        a->host_in[i] = value(wl_rank, i);
    if (!wl_cuda_ok(cudaMemcpy(d->win, a->host_in, max_bytes, cudaMemcpyHostToDevice),
                    "cudaMemcpy"))
        return 0;
    for (int p = 0; p < n; p++) {
        if (p == wl_rank)
            continue;
        if (!wl_ok(gpuport_channel_create(a->comm, p, a->mem, a->mem, &a->pc[p]),
                   "gpuport_channel_create") ||
            !wl_ok(gpuport_channel_device(a->pc[p], &a->pcd[p]), "gpuport_channel_device"))
            return 0;
        if (all_local && n <= MC_MAX_RANKS)
            mc_all &= wl_ok(gpuport_memory_channel_create(a->comm, p, a->mem, a->mem, &a->mc[p]),
                            "gpuport_memory_channel_create") &&
                      wl_ok(gpuport_memory_channel_device(a->mc[p], &a->mcd[p]),
                            "gpuport_memory_channel_device");
    }
    a->have_mc = wl_agree(mc_all);
    return wl_cuda_ok(cudaMemcpy((void *)d->mc, a->mcd, n * sizeof(*a->mcd),
                              cudaMemcpyHostToDevice), "cudaMemcpy") &&
           wl_cuda_ok(cudaMemcpy((void *)d->pc, a->pcd, n * sizeof(*a->pcd),
                              cudaMemcpyHostToDevice), "cudaMemcpy");
}

/* Everything in reverse order. Memory and peer channels' destroy is
 * pairwise (it waits for the peer's): in one order on every rank. */
static int ar_close(ar_t *a)
{
    int good = 1;

    MPI_Barrier(MPI_COMM_WORLD);
    for (int p = 0; a->peer && p < wl_size; p++)
        if (a->peer[p])
            good &= wl_ok(gpuport_peer_channel_destroy(a->peer[p]), "gpuport_peer_channel_destroy");
    for (int p = 0; a->mc && p < wl_size; p++)
        if (a->mc[p])
            good &=
                wl_ok(gpuport_memory_channel_destroy(a->mc[p]), "gpuport_memory_channel_destroy");
    for (int p = wl_size - 1; a->pc && p >= 0; p--)
        if (a->pc[p])
            good &= wl_ok(gpuport_channel_destroy(a->pc[p]), "gpuport_channel_destroy");
    if (a->dev.peer)
        good &= wl_ok(gpuport_mem_free(a->comm, a->dev.peer), "gpuport_mem_free(peer)");
    if (a->mem)
        good &= wl_ok(gpuport_mem_deregister(a->mem), "gpuport_mem_deregister");
    if (a->dev.win)
        good &= wl_ok(gpuport_mem_free(a->comm, a->dev.win), "gpuport_mem_free");
    cudaFree((void *)a->dev.mc);
    cudaFree((void *)a->dev.pc);
    cudaFree(a->ns);
    cudaFree(a->err);
    cudaFreeHost(a->host_in);
    cudaFreeHost(a->host_out);
    free(a->mcd);
    free(a->pcd);
    free(a->peer);
    free(a->mc);
    free(a->pc);
    return good & wl_ok(gpuport_comm_destroy(a->comm), "gpuport_comm_destroy");
}

/* One launch of `way`; us[i]: the slowest rank's time of round i. */
static int run_kernel(ar_t *a, enum way way, uint64_t count, int warm, int rounds, double *us)
{
    int err[2] = {0, INT_MAX}, good;
    unsigned long long ns[MAX_ROUNDS];
    run_t r = {way, count, a->flag, a->peer_seq, warm, rounds, a->ns, a->err};
    void *args[] = {&a->dev, &r};

    good = wl_cuda_ok(cudaMemcpy(a->err, err, sizeof(err), cudaMemcpyHostToDevice), "cudaMemcpy") &&
           wl_cuda_ok(
               cudaLaunchCooperativeKernel((void *)allreduce_rounds, BLOCKS, THREADS, args, 0, 0),
               "cudaLaunchCooperativeKernel") &&
           wl_cuda_ok(cudaDeviceSynchronize(), "allreduce_rounds (cudaDeviceSynchronize)") &&
           wl_cuda_ok(cudaMemcpy(err, a->err, sizeof(err), cudaMemcpyDeviceToHost), "cudaMemcpy") &&
           wl_cuda_ok(cudaMemcpy(ns, a->ns, rounds * sizeof(*ns), cudaMemcpyDeviceToHost),
                      "cudaMemcpy") &&
           wl_ok((gpuport_status_t)err[0], "a gpuport call in allreduce_rounds");
    a->flag += (uint32_t)(warm + rounds);
    if (way == WAY_PEER)
        a->peer_seq += 3 * (uint64_t)(warm + rounds); /* each round's: the meeting, two steps */
    for (int i = 0; i < rounds; i++)
        us[i] = good ? ns[i] / 1e3 : 0;
    MPI_Allreduce(MPI_IN_PLACE, us, rounds, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return good;
}

/* The baseline, timed as the host version times it: each call after a
 * barrier, OUT filled with NaN first; the sum lands in OUT. */
static int run_mpi(ar_t *a, uint64_t count, int warm, int rounds, double *us)
{
    uint64_t bytes = count * sizeof(float);
    float *out = (float *)(a->dev.win + a->dev.off_out);
    int good = 1;

    for (int i = -warm; i < rounds; i++) { /* every round on every rank: barriers */
        double t0;
        good &= wl_cuda_ok(cudaMemset(out, 0xff, bytes), "cudaMemset") &&
                wl_cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = wl_now();
        good &= wl_cuda_ok(cudaMemcpy(a->host_in, a->dev.win + a->dev.off_in, bytes,
                                   cudaMemcpyDeviceToHost), "cudaMemcpy");
        MPI_Allreduce(a->host_in, a->host_out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        good &= wl_cuda_ok(cudaMemcpy(out, a->host_out, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
        if (i >= 0)
            us[i] = (wl_now() - t0) * 1e6;
    }
    MPI_Allreduce(MPI_IN_PLACE, us, rounds, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return good;
}

/* The last round's OUT, copied here: 1 if, on every rank, every element is
 * within the bound (and with `exact` equals the float sum in rank order). */
static int verify(ar_t *a, uint64_t count, int exact, const char *who)
{
    double u = ldexp(1.0, -24), ud = ldexp(1.0, -53), k = wl_size - 1;
    double g = k * u / (1 - k * u) + k * ud / (1 - k * ud);
    float *res = a->host_out;
    uint64_t bad = 0, inexact = 0;

    if (!wl_cuda_ok(cudaMemcpy(res, a->dev.win + a->dev.off_out, count * sizeof(float),
                            cudaMemcpyDeviceToHost), "cudaMemcpy"))
        return wl_agree(0);
    for (uint64_t i = 0; i < count; i++) {
        double sum = 0, mag = 0;
        float ordered = 0;
        for (int r = 0; r < wl_size; r++) {
            float v = value(r, i);
            sum += v;
            mag += fabs(v);
            ordered = r == 0 ? v : ordered + v;
        }
        inexact += res[i] != ordered;
        if (!(fabs((double)res[i] - sum) <= g * mag) && bad++ < 3) /* NaN too */
            fprintf(stderr, "rank %d: %s: element %llu is %.9g, the sum is %.12g\n", wl_rank, who,
                    (unsigned long long)i, (double)res[i], sum);
    }
    if (exact && inexact)
        fprintf(stderr, "rank %d: %s: %llu sums differ from the float sum in rank order\n",
                wl_rank, who, (unsigned long long)inexact);
    return wl_agree(bad == 0 && (!exact || inexact == 0));
}

typedef struct fig {
    bench_stats_t st;
    double busbw; /* GB/s, from the median */
    int ran, good;
} fig_t;

static void measure(ar_t *a, enum way way, uint64_t count, int warm, int rounds, fig_t *f)
{
    double us[MAX_ROUNDS];
    int good = way == WAY_MPI ? run_mpi(a, count, warm, rounds, us)
                              : run_kernel(a, way, count, warm, rounds, us);

    f->ran = 1;
    bench_stats_of(us, (uint64_t)rounds, &f->st);
    f->busbw = f->st.median > 0 ? count * 4 / (f->st.median * 1e3) * 2 * (wl_size - 1) / wl_size
                                : 0;
    f->good = wl_agree(good) && verify(a, count, way != WAY_MPI, way_name[way]);
}

static int run_size(ar_t *a, const wl_opts_t *o, uint64_t bytes)
{
    uint64_t count = bytes / sizeof(float);
    int base = (int)((o->small ? 4 * WL_MIB : 256 * WL_MIB) / bytes), cap = o->small ? 50 : 900;
    int rounds = wl_rounds(o, base < 5 ? 5 : base > cap ? cap : base), warm, good;
    enum way mway = bytes <= PKT_MAX ? WAY_PACKETS : WAY_READ;
    const char *base_name = o->no_mpi ? NULL : "MPI_Allreduce staged through the host";
    fig_t mc = {}, pe = {}, pc = {}, mpi = {};
    char s[16];

    rounds = rounds > 900 ? 900 : rounds; /* with its warm-up, within MAX_ROUNDS */
    warm = rounds / 10 + 1;
    measure(a, WAY_PEER, count, warm, rounds, &pe);
    if (a->have_mc)
        measure(a, mway, count, warm, rounds, &mc);
    measure(a, WAY_PORT, count, warm, rounds, &pc);
    if (!o->no_mpi)
        measure(a, WAY_MPI, count, warm, rounds, &mpi);
    good = pe.good && (!mc.ran || mc.good) && pc.good && (!mpi.ran || mpi.good);
    if (wl_rank != 0)
        return good;
    snprintf(s, sizeof(s), bytes >= WL_MIB ? "%llu MiB" : "%llu KiB",
             (unsigned long long)(bytes >= WL_MIB ? bytes / WL_MIB : bytes / WL_KIB));
    printf("%8s | %9.1f | %-7s | %9.1f | %9.1f | %9.1f | %5.2f | %5.2f | %5.2f | %7.2f | %7.2f | "
           "%7.2f | %7.2f | %8s | %d\n",
           s, pe.st.median, !mc.ran ? "-" : mway == WAY_PACKETS ? "packets" : "read",
           mc.st.median, pc.st.median, mpi.st.median,
           mpi.ran ? pe.st.median / mpi.st.median : 0,
           mpi.ran && mc.ran ? mc.st.median / mpi.st.median : 0,
           mpi.ran ? pc.st.median / mpi.st.median : 0, pe.busbw, mc.busbw, pc.busbw, mpi.busbw,
           good ? "yes" : "NO", rounds);
    fflush(stdout);
    bench_out_channel(a->peer_tr, "gpuport_mem_alloc_device");
    bench_out_latency("allreduce_peer", bytes, &pe.st, base_name, &mpi.st, good);
    bench_out_value("allreduce_peer_busbw", bytes, "bandwidth", "GB/s", "median", pe.busbw,
                    rounds, base_name, mpi.busbw, good);
    bench_out_channel(a->tr, "gpuport_mem_alloc_device");
    if (mc.ran) {
        bench_out_latency(mway == WAY_PACKETS ? "allreduce_memchan_packets"
                                              : "allreduce_memchan_read",
                          bytes, &mc.st, base_name, &mpi.st, good);
        bench_out_value("allreduce_memchan_busbw", bytes, "bandwidth", "GB/s", "median", mc.busbw,
                        rounds, base_name, mpi.busbw, good);
    }
    bench_out_latency("allreduce_port", bytes, &pc.st, base_name, &mpi.st, good);
    bench_out_value("allreduce_port_busbw", bytes, "bandwidth", "GB/s", "median", pc.busbw,
                    rounds, base_name, mpi.busbw, good);
    return good;
}

static void print_header(ar_t *a, int gpu)
{
    cudaDeviceProp prop;
    char *tr = a->tr;
    int other = wl_rank == 0 ? 1 : 0;

    snprintf(tr, sizeof(a->tr), "%s%s", a->have_mc ? "memory channels + " : "",
             wl_size > 1 ? gpuport_channel_transport(a->pc[other]) : "-");
    snprintf(a->peer_tr, sizeof(a->peer_tr), "%s",
             wl_size < 2 ? "none"
             : gpuport_peer_channel_stores(a->peer[other]) == 1
                 ? "peer channel (stores, copy engine)"
                 : "peer channel (proxy)");
    wl_header("allreduce_gpu", "float32 sum of GPU buffers over every rank, driven by kernels, "
                               "beside MPI_Allreduce", tr);
    if (wl_rank != 0)
        return;
    if (cudaGetDeviceProperties(&prop, gpu) != cudaSuccess)
        snprintf(prop.name, sizeof(prop.name), "?");
    bench_out_context("gpu", prop.name, wl_size);
    bench_out_channel(tr, "gpuport_mem_alloc_device");
    printf("# GPU %d: %s; a cooperative grid of %d x %d threads per rank\n"
           "# peer channels (%s, rank %d's to rank %d): reduce-scatter + allgather, a block per "
           "peer\n"
           "# memory channels: %s; port channels: reduce-scatter + allgather, puts and sums\n"
           "# MPI: MPI_Allreduce staged (cudaMemcpy to pinned host memory and back)\n"
           "# us: median over the rounds of the slowest rank's time for one call (GPU: "
           "globaltimer, after a meeting of signals); pe/M, mc/M, pc/M: gpuport / MPI\n"
           "# bus: size / time * 2 (n-1) / n, GB/s (nccl-tests); verified: each rank's result "
           "exact (rank order) and within the bound, MPI's within the bound\n\n",
           gpu, prop.name, BLOCKS, THREADS, a->peer_tr, wl_rank, other,
           a->have_mc ? "packets up to 64 KiB, read-reduce-write above"
                      : "none (not every rank on this host)");
    printf("%8s | %9s | %-7s | %9s | %9s | %9s | %5s | %5s | %5s | %7s | %7s | %7s | %7s | %8s | "
           "%s\n",
           "size", "peer", "memchan", "memchan", "port", "MPI", "pe/M", "mc/M", "pc/M", "pe bus",
           "mc bus", "pc bus", "MPI bus", "verified", "rounds");
}

int main(int argc, char **argv)
{
    static const uint64_t small_sizes[] = {4 * WL_KIB, 64 * WL_KIB, WL_MIB};
    static const uint64_t sizes[] = {4 * WL_KIB, 16 * WL_KIB, 64 * WL_KIB, 256 * WL_KIB,
                                     WL_MIB,     4 * WL_MIB,  16 * WL_MIB, 64 * WL_MIB};
    wl_opts_t o;
    ar_t a = {};
    int rc, gpu, nsizes, good = 1;
    const uint64_t *list;

    rc = wl_init(&argc, &argv, NULL, &o);
    if (rc >= 0)
        return rc;
    if (argc != 1) {
        if (wl_rank == 0)
            fprintf(stderr, "%s: unknown argument '%s' (--help)\n", argv[0], argv[1]);
        MPI_Finalize();
        return 2;
    }
    gpu = wl_gpu_pick(NULL, NULL, 0);
    if (!wl_agree(gpu >= 0)) { /* 77: no GPU on some rank; 1: one could not be used */
        rc = wl_agree(gpu != -1) ? 1 : 77;
        if (wl_rank == 0 && bench_out_active())
            bench_out_close();
        MPI_Finalize();
        return rc;
    }
    a.comm = wl_comm(); /* GPU mode, on this rank's current device */
    list = o.small ? small_sizes : sizes;
    nsizes = o.small ? 3 : 8;
    if (!ar_open(&a, list[nsizes - 1], wl_agree(gpuport_comm_local_size(a.comm) == wl_size)))
        MPI_Abort(MPI_COMM_WORLD, 1); /* peers may wait in a pairwise creation */
    print_header(&a, gpu);
    for (int k = 0; k < nsizes && good; k++)
        good &= run_size(&a, &o, list[k]);
    good &= wl_agree(ar_close(&a));
    return wl_finish(good);
}
