/*
 * halo_gpu: the 2D Jacobi stencil of workloads/halo.c on the GPU, its halo
 * exchange driven by the kernels: over peer channels (the last block calls
 * gpuport_peer_put_with_signal_block, then gpuport_peer_wait_until_block
 * with the step's number: the way to write it), over port channels (a
 * same thread pushes gpuport_put_with_signal, then gpuport_wait), over
 * memory channels (the last block stores the rows into the neighbours'
 * memory with gpuport_memory_put, then signals and waits), beside MPI
 * staged through the host (cudaMemcpy, MPI_Sendrecv, cudaMemcpy) in the
 * same run, each verified bit for bit against rank 0's Jacobi on the CPU.
 *
 * A peer channel's row goes by the block's stores up to
 * GPUPORT_PEER_STORE_MAX bytes a thread (the default grid's 32 KiB rows,
 * with 256 threads: stores), by the copy engine above.
 *
 * The grid, its split and its two buffers are halo.c's, in one block of
 * gpuport_mem_alloc_device memory (VMM: both kinds of channel write into
 * it). One kernel per iteration, launched back to back with no host call
 * between: kernel k sweeps buffer k % 2 into (k + 1) % 2 with every block;
 * each block then counts itself done, and the last one (which sees every
 * block's rows) sends this rank's new first and last rows into the
 * neighbours' halos of buffer (k + 1) % 2 and waits for their signals, so
 * kernel k + 1 starts with its halos in place. A kernel before the first
 * sends the rows of buffer 0.
 *
 * Who may overwrite what (halo.c's argument at kernel boundaries): the
 * neighbour's send at the end of its kernel k + 1 lands in the halo this
 * rank's kernel k reads, but the neighbour's kernel k + 1 started after its
 * kernel k took this rank's signal, sent once all of kernel k had swept. A
 * send's source rows (buffer (k + 1) % 2) are next written by kernel k + 2,
 * which starts after this rank took the neighbour's signal of kernel k + 1,
 * sent after the neighbour took this rank's signal of kernel k: the rows
 * had landed, so they had been read. Hence no device flush per iteration (a
 * trip through the proxy); the host flushes the port channels at the end.
 * The peer channels count their signals since creation: kernel k's wait
 * is for the neighbour's signal numbered as this rank's own (peer_seq,
 * one per kernel of every peer-channel run), so no count is ever reset.
 *
 * A kernel that fails records the status and every later kernel of the run
 * returns at once: a run ends within one GPUPORT_TIMEOUT_MS. Iterations end
 * at the GPU's globaltimer, so nothing on the host interrupts the kernels.
 * Ranks use GPU local rank % GPUs (GPUPORT_TEST_ONE_GPU=1: GPU 0, where the
 * ranks' kernels run at once only under MPS, scripts/with-mps.sh; without
 * it they take turns and the run still ends). Memory channels need every
 * rank on one host. Without a usable GPU every rank exits 77.
 *
 *   mpirun -np N workloads/halo_gpu [--nx N] [--ny N] [--iters-per-run N] [common options]
 */
#include <mpi.h>

#include "gpuport/gpuport_device.h"
#include "gpuport/gpuport_mpi.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "wl.h"
}
#include "wl_gpu.h"
#include "bench_out.h"
#include "halo.h"

enum { BY_PEER, BY_PORT, BY_MEMORY, BY_MPI, NBY }; /* who exchanges the halos */
static const char *const by_name[NBY] = {"peer channels", "port channels", "memory channels",
                                         "MPI staged"};
#define THREADS 256

/* One neighbour as the kernels see it. */
typedef struct side {
    int on;                          /* 0: the grid's edge */
    uint64_t src_off[2], dst_off[2]; /* per parity: this rank's row, the neighbour's halo */
    gpuport_peer_channel_dev_t peer;
    gpuport_port_channel_dev_t port;
    gpuport_memory_channel_dev_t mem;
} side_t;

/* [UP], [DOWN]: every kernel's, set once before the first. */
__constant__ side_t sides[2];

/* One rank's grid (gpuport's or MPI's), as every kernel gets it. */
typedef struct grid {
    double *buf;               /* both buffers, geo.slab doubles apart */
    halo_geom_t geo;           /* this rank's part of the grid */
    unsigned *arrived;         /* blocks done sweeping in the running kernel */
    int *rc;                   /* the first failure of the run */
    unsigned long long *stamp; /* stamp[k + 1]: globaltimer at the end of kernel k */
} grid_t;

/* The GPU's point: the CPU's operations in the CPU's order, each rounded
 * on its own (_rn: never fused), so that the grids agree bit for bit. */
__device__ static double point(const double *c, size_t pitch)
{
    return __dmul_rn(0.25,
                     __dadd_rn(__dadd_rn(c[-(ptrdiff_t)pitch], c[pitch]), __dadd_rn(c[-1], c[1])));
}

/* true in the block that finishes the sweep last (every block calls it):
 * each block's stores, then its count; the last block reads after all. */
__device__ static bool last_block(unsigned *arrived)
{
    __shared__ bool last;

    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        last = atomicAdd(arrived, 1u) == gridDim.x - 1;
        if (last)
            *arrived = 0; /* for the next kernel, which starts after this one ends */
        __threadfence();
    }
    __syncthreads();
    return last;
}

/* The block: the rows of parity p into the neighbours' halos, each with a
 * signal, then until each neighbour's seq-th signal (its rows are then in
 * this rank's halos); every thread gets the status. */
__device__ static int peer_exchange(const grid_t &g, int p, uint64_t seq)
{
    uint64_t bytes = (uint64_t)g.geo.nx * sizeof(double);
    int st = GPUPORT_OK;

    /* exchange: begin */
    for (const side_t *s = sides; s < sides + 2 && !st; s++)
        if (s->on)
            st = gpuport_peer_put_with_signal_block(&s->peer, s->dst_off[p], s->src_off[p],
                                                    bytes);
    for (const side_t *s = sides; s < sides + 2 && !st; s++)
        if (s->on)
            st = gpuport_peer_wait_until_block(&s->peer, seq);
    /* exchange: end */
    return st;
}

/* Thread 0: the rows of parity p into the neighbours' halos, then one
 * signal from each neighbour (its rows are then in this rank's halos). */
__device__ static int port_exchange(const grid_t &g, int p)
{
    uint64_t bytes = (uint64_t)g.geo.nx * sizeof(double);
    int st = GPUPORT_OK;

    for (int d = UP; d <= DOWN && !st; d++)
        if (sides[d].on)
            st = gpuport_put_with_signal(&sides[d].port, sides[d].dst_off[p],
                                         sides[d].src_off[p], bytes);
    for (int d = UP; d <= DOWN && !st; d++)
        if (sides[d].on)
            st = gpuport_wait(&sides[d].port);
    return st;
}

/* The block stores the rows into the neighbours' memory; after the
 * barrier, thread 0's signals release them, then it waits. The status is
 * thread 0's. */
__device__ static int memory_exchange(const grid_t &g, int p)
{
    __shared__ int put_st;
    uint64_t bytes = (uint64_t)g.geo.nx * sizeof(double);
    int st;

    if (threadIdx.x == 0)
        put_st = GPUPORT_OK;
    __syncthreads();
    for (int d = UP; d <= DOWN; d++)
        if (sides[d].on) {
            st = gpuport_memory_put(&sides[d].mem, sides[d].dst_off[p], sides[d].src_off[p],
                                    bytes, threadIdx.x, blockDim.x);
            if (st)
                atomicCAS(&put_st, GPUPORT_OK, st);
        }
    __syncthreads();
    st = put_st;
    for (int d = UP; d <= DOWN && !st && threadIdx.x == 0; d++)
        if (sides[d].on)
            st = gpuport_memory_signal(&sides[d].mem);
    for (int d = UP; d <= DOWN && !st && threadIdx.x == 0; d++)
        if (sides[d].on)
            st = gpuport_memory_wait(&sides[d].mem);
    return st;
}

/* Kernel k: the sweep of buffer k % 2 into (k + 1) % 2 (none when
 * !sweeps: the exchange alone; k = -1: the rows of buffer 0 before the
 * first sweep), then the exchange of the new rows by the last block (for
 * MPI the host exchanges); seq: the peer channels' step number. */
__global__ void iterate(grid_t g, int k, int by, int sweeps, uint64_t seq)
{
    int p = (k + 1) % 2, st;

    if (*(volatile int *)g.rc)
        return; /* an earlier kernel failed: end the run */
    if (sweeps) {
        const double *cur = g.buf + (size_t)(k % 2) * g.geo.slab;
        double *next = g.buf + (size_t)p * g.geo.slab;
        size_t n = (size_t)g.geo.rows * g.geo.nx;
        for (size_t x = blockIdx.x * (size_t)blockDim.x + threadIdx.x; x < n;
             x += (size_t)gridDim.x * blockDim.x) {
            size_t at = (x / g.geo.nx + 1) * g.geo.pitch + x % g.geo.nx + 1;
            next[at] = point(cur + at, g.geo.pitch);
        }
    }
    if (by == BY_MPI || !last_block(g.arrived))
        return;
    if (by == BY_MEMORY)
        st = memory_exchange(g, p);
    else if (by == BY_PEER)
        st = peer_exchange(g, p, seq);
    else if (threadIdx.x == 0)
        st = port_exchange(g, p);
    else
        st = 0;
    if (threadIdx.x == 0) {
        unsigned long long now;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        g.stamp[k + 1] = now;
        if (st)
            atomicCAS(g.rc, 0, st);
    }
}

/* MPI's exchange of the rows of buffer p, staged through pinned host
 * memory (stage: 4 rows). */
static int staged_exchange(const grid_t *g, int p, double *stage)
{
    const halo_geom_t *s = &g->geo;
    double *b = g->buf + p * s->slab, *first = b + s->pitch + 1, *last = b + s->rows * s->pitch + 1;
    double *above = b + 1, *below = b + (s->rows + 1) * s->pitch + 1;
    double *from_up = stage + 2 * s->nx, *from_down = stage + 3 * s->nx;
    size_t bytes = s->nx * sizeof(double);
    int up = wl_rank > 0 ? wl_rank - 1 : MPI_PROC_NULL;
    int down = wl_rank < wl_size - 1 ? wl_rank + 1 : MPI_PROC_NULL;

    if (!wl_cuda_ok(cudaMemcpy(stage, first, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy") ||
        !wl_cuda_ok(cudaMemcpy(stage + s->nx, last, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy"))
        return 0;
    MPI_Sendrecv(stage, s->nx, MPI_DOUBLE, up, 1, from_down, s->nx, MPI_DOUBLE, down, 1,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Sendrecv(stage + s->nx, s->nx, MPI_DOUBLE, down, 2, from_up, s->nx, MPI_DOUBLE, up, 2,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (up != MPI_PROC_NULL &&
        !wl_cuda_ok(cudaMemcpy(above, from_up, bytes, cudaMemcpyHostToDevice), "cudaMemcpy"))
        return 0;
    return down == MPI_PROC_NULL ||
           wl_cuda_ok(cudaMemcpy(below, from_down, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
}

/* The peer channels' signals so far, each way: one a kernel of their runs. */
static uint64_t peer_seq;

/* One run from the start values (h: the host copy, which gets the result):
 * `iters` iterations exchanged `by`; t[k]: iteration k's seconds. */
static int run(const grid_t *g, int by, int iters, int sweeps, int blocks, double *h, double *stage,
               unsigned long long *stamp, double *t)
{
    size_t bytes = 2 * g->geo.slab * sizeof(double);
    int rc = 0, good = 1;

    halo_fill(&g->geo, h);
    if (!wl_cuda_ok(cudaMemcpy(g->buf, h, bytes, cudaMemcpyHostToDevice), "cudaMemcpy") ||
        !wl_cuda_ok(cudaMemset(g->rc, 0, sizeof(int)), "cudaMemset") ||
        !wl_cuda_ok(cudaMemset(g->arrived, 0, sizeof(unsigned)), "cudaMemset"))
        return 0;
    MPI_Barrier(MPI_COMM_WORLD);
    if (by == BY_MPI) {
        good = staged_exchange(g, 0, stage);
        for (int k = 0; k < iters && good; k++) {
            double t0 = wl_now();
            if (sweeps)
                iterate<<<blocks, THREADS>>>(*g, k, by, 1, 0);
            good = staged_exchange(g, (k + 1) % 2, stage);
            t[k] = wl_now() - t0;
        }
    } else {
        /* the kernels alone from here to the synchronize */
        iterate<<<1, THREADS>>>(*g, -1, by, 0, by == BY_PEER ? ++peer_seq : 0);
        for (int k = 0; k < iters; k++)
            iterate<<<sweeps ? blocks : 1, THREADS>>>(*g, k, by, sweeps,
                                                      by == BY_PEER ? ++peer_seq : 0);
        good =
            wl_cuda_ok(cudaGetLastError(), "iterate<<<>>>") &&
            wl_cuda_ok(cudaDeviceSynchronize(), "iterate<<<>>> (cudaDeviceSynchronize)") &&
            wl_cuda_ok(cudaMemcpy(&rc, g->rc, sizeof(int), cudaMemcpyDeviceToHost), "cudaMemcpy") &&
            wl_ok((gpuport_status_t)rc, by == BY_PEER   ? "a kernel's peer-channel exchange"
                                        : by == BY_PORT ? "a kernel's port-channel exchange"
                                                        : "a kernel's memory-channel exchange") &&
            wl_cuda_ok(
                cudaMemcpy(stamp, g->stamp, (iters + 1) * sizeof(*stamp), cudaMemcpyDeviceToHost),
                "cudaMemcpy");
        for (int k = 0; k < iters && good; k++)
            t[k] = (stamp[k + 1] - stamp[k]) * 1e-9;
    }
    return good && wl_cuda_ok(cudaMemcpy(h, g->buf, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
}

/* Peer channels to both neighbours over the one grid, pairwise in rank
 * order (rank - 1 first; both tried whatever the first gave, so that no
 * neighbour waits for a creation this rank skips), their handles, and the
 * offsets of the rows (every way's). */
static int peer_connect(gpuport_comm_t comm, gpuport_mem_t mem, const halo_geom_t *g,
                        gpuport_peer_channel_t *pc, side_t *sd)
{
    int good = 1;

    /* setup: begin */
    for (int d = UP; d <= DOWN; d++) {
        int peer = halo_peer_rank(d);
        for (int p = 0; p < 2 && peer >= 0; p++) {
            sd[d].src_off[p] = halo_src(g, d, p) * sizeof(double);
            sd[d].dst_off[p] = halo_dst(g, d, p) * sizeof(double);
        }
        if ((sd[d].on = peer >= 0))
            good &= wl_ok(gpuport_peer_channel_create(comm, peer, mem, mem, &pc[d]),
                          "gpuport_peer_channel_create") &&
                    wl_ok(gpuport_peer_channel_device(pc[d], &sd[d].peer),
                          "gpuport_peer_channel_device");
    }
    /* setup: end */
    return good;
}

/* Port and memory channels to both neighbours (after peer_connect: the
 * neighbours and offsets are set), pairwise in rank order as there, and
 * their handles. */
static int connect(gpuport_comm_t comm, gpuport_mem_t mem, int memory, gpuport_channel_t *pch,
                   gpuport_memory_channel_t *mch, side_t *sd)
{
    int good = 1;

    for (int d = UP; d <= DOWN; d++) {
        int peer = halo_peer_rank(d);
        if (peer < 0)
            continue;
        good &=
            wl_ok(gpuport_channel_create(comm, peer, mem, mem, &pch[d]), "gpuport_channel_create");
        if (memory)
            good &= wl_ok(gpuport_memory_channel_create(comm, peer, mem, mem, &mch[d]),
                          "gpuport_memory_channel_create");
        good = good &&
               wl_ok(gpuport_channel_device(pch[d], &sd[d].port), "gpuport_channel_device") &&
               (!memory || wl_ok(gpuport_memory_channel_device(mch[d], &sd[d].mem),
                                 "gpuport_memory_channel_device"));
    }
    return good;
}

/* Rank 0: one table row (s 0: the iterations, 1: the exchange alone) and
 * its records; way b's times at us + b * stride, where ran[b]; chan[b]:
 * the record's channel. */
static void report(int s, int nx, double *us, int stride, const int *ran, int n, int verified,
                   const char *const *chan)
{
    static const char *const rec[NBY] = {"peer", "port", "memory", "mpi"};
    const char *base = ran[BY_MPI] ? "MPI_Sendrecv staged through host memory (cudaMemcpy)" : NULL;
    uint64_t bytes = (uint64_t)nx * sizeof(double);
    char col[NBY][32], ratio[NBY][32], name[64];
    bench_stats_t st[NBY];

    for (int b = 0; b < NBY; b++) {
        bench_stats_of(us + b * (size_t)stride, ran[b] ? (uint64_t)n : 0, &st[b]);
        snprintf(col[b], sizeof(col[b]), ran[b] ? "%.2f" : "-", st[b].median);
    }
    for (int b = BY_PEER; b <= BY_MEMORY; b++)
        snprintf(ratio[b], sizeof(ratio[b]), ran[b] && ran[BY_MPI] ? "%.2f" : "-",
                 st[b].median / st[BY_MPI].median);
    printf("%-14s | %6llu B | %8s | %8s | %8s | %8s | %8s | %8s | %8s | %8s | %5d\n",
           s ? "exchange alone" : "iteration", (unsigned long long)bytes, col[BY_PEER],
           col[BY_PORT], col[BY_MEMORY], col[BY_MPI], ratio[BY_PEER], ratio[BY_PORT],
           ratio[BY_MEMORY], verified ? "yes" : "NO", n);
    for (int b = BY_PEER; b <= BY_MEMORY; b++)
        if (ran[b]) {
            snprintf(name, sizeof(name), "halo_gpu_%s_%s", rec[b], s ? "exchange" : "iteration");
            bench_out_channel(chan[b], "gpuport_mem_alloc_device");
            bench_out_latency(name, bytes, &st[b], base, &st[BY_MPI], verified);
        }
}

int main(int argc, char **argv)
{
    wl_opts_t o;
    gpuport_comm_t comm;
    gpuport_mem_t mem = NULL;
    gpuport_peer_channel_t pc[2] = {NULL, NULL};
    gpuport_channel_t pch[2] = {NULL, NULL};
    gpuport_memory_channel_t mch[2] = {NULL, NULL};
    side_t sd[2];
    grid_t gp, mp; /* gpuport's grid, MPI's */
    char gpu_name[256] = "";
    const char *transport, *chan[NBY];
    double *h = NULL, *ref = NULL, *stage = NULL, *t = NULL, *us = NULL; /* us[s][b][i] */
    unsigned long long *stamp = NULL;
    int rc = wl_init(&argc, &argv, HALO_USAGE, &o), nx, ny, iters, warm, timed, gpu, blocks;
    int ready, good = 0, ran[NBY] = {1, 1, 1, 1}, verified[2] = {1, 1};
    size_t bytes;

    if (rc >= 0)
        return rc;
    if (!halo_options(argc, argv, &o, &nx, &ny, &iters)) {
        MPI_Finalize();
        return 2;
    }
    gpu = wl_gpu_pick(NULL, gpu_name, sizeof(gpu_name));
    if (!wl_agree(gpu >= 0)) {
        rc = wl_agree(gpu != -2) ? 77 : 1; /* 77: no GPU here, nothing failed */
        MPI_Finalize();
        return rc;
    }
    warm = iters >= 10 ? iters / 10 : iters > 1;
    timed = iters - warm;
    comm = wl_comm();
    /* memory channels: every rank on one host, as gpuport sees hosts */
    ran[BY_MEMORY] = wl_agree(gpuport_comm_local_size(comm) == wl_size);
    ran[BY_MPI] = !o.no_mpi;
    memset(&gp, 0, sizeof(gp));
    memset(sd, 0, sizeof(sd));
    gp.geo = halo_geom(nx, ny);
    bytes = 2 * gp.geo.slab * sizeof(double);
    blocks = (int)((gp.geo.rows * (size_t)nx + THREADS - 1) / THREADS);
    blocks = blocks < 1024 ? blocks : 1024;
    h = (double *)malloc(bytes);
    t = (double *)malloc(iters * sizeof(double));
    us = (double *)malloc(2 * NBY * (size_t)iters * sizeof(double));
    ready = h && t && us;
    if (!ready)
        fprintf(stderr, "rank %d: out of memory for a %d x %d slab\n", wl_rank, gp.geo.rows, nx);
    /* setup: begin */
    ready = ready &&
            wl_ok(gpuport_mem_alloc_device(comm, bytes, (void **)&gp.buf),
                  "gpuport_mem_alloc_device") &&
            wl_ok(gpuport_mem_register(comm, gp.buf, bytes, &mem), "gpuport_mem_register");
    /* setup: end */
    ready = ready &&
            wl_cuda_ok(cudaMalloc((void **)&gp.arrived, sizeof(unsigned)), "cudaMalloc") &&
            wl_cuda_ok(cudaMalloc((void **)&gp.rc, sizeof(int)), "cudaMalloc") &&
            wl_cuda_ok(cudaMalloc((void **)&gp.stamp, (iters + 1) * sizeof(*stamp)), "cudaMalloc") &&
            wl_cuda_ok(cudaMallocHost((void **)&stamp, (iters + 1) * sizeof(*stamp)),
                    "cudaMallocHost") &&
            wl_cuda_ok(cudaMallocHost((void **)&stage, 4 * nx * sizeof(double)), "cudaMallocHost");
    mp = gp; /* MPI's grid: the same but for its memory, cudaMalloc */
    mp.buf = NULL;
    ready = ready && wl_cuda_ok(cudaMalloc((void **)&mp.buf, bytes), "cudaMalloc");
    /* every rank or none goes on to the pairwise calls */
    if (!wl_agree(ready) || !wl_agree(peer_connect(comm, mem, &gp.geo, pc, sd)) ||
        !wl_agree(connect(comm, mem, ran[BY_MEMORY], pch, mch, sd)))
        goto out;
    /* setup: begin */
    ready = wl_cuda_ok(cudaMemcpyToSymbol(sides, sd, sizeof(sd)), "cudaMemcpyToSymbol");
    /* setup: end */
    if (!wl_agree(ready))
        goto out;
    transport = wl_size > 1 ? gpuport_channel_transport(pch[wl_rank ? UP : DOWN]) : "none";
    chan[BY_PEER] = "none";
    if (wl_size > 1)
        chan[BY_PEER] = gpuport_peer_channel_stores(pc[wl_rank ? UP : DOWN]) == 1
                            ? "peer channel (stores, copy engine)"
                            : "peer channel (proxy)";
    chan[BY_PORT] = transport;
    chan[BY_MEMORY] = "memory channel";
    chan[BY_MPI] = "MPI";
    wl_header("halo_gpu", "2D Jacobi (5-point, double) on the GPU, kernels drive the halo exchange",
              transport);
    bench_out_context("gpu", gpu_name, wl_size);
    if (wl_rank == 0 && !(ref = halo_reference(nx, ny, iters))) {
        fprintf(stderr, "rank 0: out of memory for the %d x %d reference\n", ny, nx);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    /* each way: the iterations, checked; then the exchange alone, checked */
    for (int b = 0; b < NBY; b++)
        for (int sweeps = 1; ran[b] && sweeps >= 0; sweeps--) {
            char who[64];
            snprintf(who, sizeof(who), "%s%s", by_name[b], sweeps ? "" : ", exchange alone");
            if (!wl_agree(
                    run(b == BY_MPI ? &mp : &gp, b, iters, sweeps, blocks, h, stage, stamp, t)))
                goto out;
            halo_slowest(t + warm, timed, us + (!sweeps * NBY + b) * (size_t)iters);
            verified[!sweeps] &= sweeps ? halo_check_grid(&gp.geo, h, iters % 2, ref, who)
                                        : halo_check_halos(&gp.geo, h, who);
        }
    /* the port channels' device operations are complete (the peer channels'
     * have landed: each was followed by a signal its neighbour took) */
    for (int d = UP; d <= DOWN; d++)
        if (pch[d] && !wl_ok(gpuport_channel_flush(pch[d]), "gpuport_channel_flush"))
            goto out;

    if (wl_rank == 0) {
        printf("# GPU: %s; %d x %d interior points, slabs of %d to %d rows, %d iterations "
               "(%d warm-up) per run\n",
               gpu_name, ny, nx, halo_rows_of(wl_size - 1, ny), halo_rows_of(0, ny), iters, warm);
        printf("# us per iteration: the slowest rank's, median of the timed iterations (kernels: "
               "globaltimer;\n# MPI: host clock, cudaMemcpy + MPI_Sendrecv + cudaMemcpy); "
               "ratios to MPI staged (below 1: faster)\n");
        printf("# verified: iteration: every grid equals rank 0's CPU Jacobi bit for bit; "
               "exchange: every halo\n# equals the neighbour's row%s\n",
               ran[BY_MEMORY] ? "" : "; memory channels: not every rank on one host, not run");
        printf("# peer channels: %s\n\n", chan[BY_PEER]);
        printf("%-14s | %8s | %8s | %8s | %8s | %8s | %8s | %8s | %8s | %8s | %5s\n", "step",
               "halo row", "peer us", "port us", "mem us", "MPI us", "peer/MPI", "port/MPI",
               "mem/MPI", "verified", "timed");
        for (int s = 0; s < 2; s++)
            report(s, nx, us + s * NBY * (size_t)iters, iters, ran, timed, verified[s], chan);
    }
    good = verified[0] && verified[1];

out:
    /* port channels go from either side; memory and peer channels pairwise,
     * in the order of their creation, once no kernel uses them (all have
     * ended) */
    MPI_Barrier(MPI_COMM_WORLD);
    for (int d = UP; d <= DOWN; d++)
        if (pc[d] && !wl_ok(gpuport_peer_channel_destroy(pc[d]), "gpuport_peer_channel_destroy"))
            good = 0;
    for (int d = UP; d <= DOWN; d++) {
        if (pch[d] && !wl_ok(gpuport_channel_destroy(pch[d]), "gpuport_channel_destroy"))
            good = 0;
        if (mch[d] &&
            !wl_ok(gpuport_memory_channel_destroy(mch[d]), "gpuport_memory_channel_destroy"))
            good = 0;
    }
    if (mem && !wl_ok(gpuport_mem_deregister(mem), "gpuport_mem_deregister"))
        good = 0;
    if (gp.buf && !wl_ok(gpuport_mem_free(comm, gp.buf), "gpuport_mem_free"))
        good = 0;
    if (!wl_ok(gpuport_comm_destroy(comm), "gpuport_comm_destroy"))
        good = 0;
    cudaFree(mp.buf);
    cudaFree(gp.arrived);
    cudaFree(gp.rc);
    cudaFree(gp.stamp);
    cudaFreeHost(stamp);
    cudaFreeHost(stage);
    free(h);
    free(t);
    free(ref);
    free(us);
    return wl_finish(good);
}
