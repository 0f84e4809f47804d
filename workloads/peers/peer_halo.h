/*
 * The halo workload for the peer programs (halo_nvshmem.cu, halo_nccl.cu):
 * halo_gpu.cu's sweep (the CPU's operations in the CPU's order, so that
 * the grids agree with rank 0's Jacobi bit for bit), the neighbours' rows,
 * and the runs, timed and checked as halo_gpu.cu's are; the library gives
 * one step: iteration k's sweep and the exchange of the rows it wrote,
 * enqueued on the stream. Included by those two programs only, after
 * peer.h; the grid, its split, the neighbours' offsets and the checks are
 * halo.h's.
 *
 * A run: the start values into both buffers, a barrier, the exchange of
 * buffer 0 (step k = -1), then the iterations back to back with no host
 * call between, a CUDA event after each; iteration k's time is the span
 * between the events around it (halo_gpu.cu reads globaltimer at the end
 * of each kernel instead).
 */
#ifndef GPUPORT_PEER_HALO_H
#define GPUPORT_PEER_HALO_H

#include <stdio.h>
#include <stdlib.h>

#include "peer.h"
#include "halo.h"

#define HALO_THREADS 256

/* One rank's grid as the library's step sees it. */
typedef struct halo_peer {
    const char *lib;  /* the table's column: "NVSHMEM", "NCCL" */
    double *buf;      /* device: both buffers, geo.slab doubles apart */
    halo_geom_t geo;  /* this rank's part of the grid */
    int blocks;       /* of a sweep */
    cudaStream_t s;
    /* Enqueues on s iteration k's sweep of buffer k % 2 (none when !sweeps
     * or k == -1) and the exchange of the rows of buffer (k + 1) % 2, which
     * ends with the neighbours' rows in this rank's halos. 1 when enqueued. */
    int (*step)(struct halo_peer *h, int k, int sweeps);
    void *lib_state;
} halo_peer_t;

/* halo_gpu.cu's point: each operation rounded on its own (_rn: never fused). */
__device__ static inline double halo_point(const double *c, size_t pitch)
{
    return __dmul_rn(0.25,
                     __dadd_rn(__dadd_rn(c[-(ptrdiff_t)pitch], c[pitch]), __dadd_rn(c[-1], c[1])));
}

/* The grid's share of the sweep of buffer k % 2 into (k + 1) % 2. */
__device__ static inline void halo_sweep_rows(double *buf, const halo_geom_t &g, int k)
{
    const double *cur = buf + (size_t)(k % 2) * g.slab;
    double *next = buf + (size_t)((k + 1) % 2) * g.slab;
    size_t n = (size_t)g.rows * g.nx;

    for (size_t x = blockIdx.x * (size_t)blockDim.x + threadIdx.x; x < n;
         x += (size_t)gridDim.x * blockDim.x) {
        size_t at = (x / g.nx + 1) * g.pitch + x % g.nx + 1;
        next[at] = halo_point(cur + at, g.pitch);
    }
}

/* One run from the start values (h: the host copy, which gets the result):
 * `iters` iterations; t[k]: iteration k's seconds. ev: iters + 1 events. */
static int halo_peer_run(halo_peer_t *hp, int iters, int sweeps, double *h, cudaEvent_t *ev,
                         double *t)
{
    size_t bytes = 2 * hp->geo.slab * sizeof(double);
    int good;

    halo_fill(&hp->geo, h);
    good = cuda_ok(cudaMemcpy(hp->buf, h, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
    if (!wl_agree(good))
        return 0;
    MPI_Barrier(MPI_COMM_WORLD);
    good = hp->step(hp, -1, 0) && cuda_ok(cudaEventRecord(ev[0], hp->s), "cudaEventRecord");
    for (int k = 0; k < iters && good; k++)
        good = hp->step(hp, k, sweeps) &&
               cuda_ok(cudaEventRecord(ev[k + 1], hp->s), "cudaEventRecord");
    good = good && cuda_ok(cudaStreamSynchronize(hp->s), "the iterations (cudaStreamSynchronize)");
    for (int k = 0; k < iters && good; k++) {
        float ms = 0;
        good = cuda_ok(cudaEventElapsedTime(&ms, ev[k], ev[k + 1]), "cudaEventElapsedTime");
        t[k] = ms * 1e-3;
    }
    return good && cuda_ok(cudaMemcpy(h, hp->buf, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
}

/* Both runs (the iterations, then the exchange alone), each checked, and
 * rank 0's table. 1 on every rank when every check passed. Collective. */
static int halo_peer_main(halo_peer_t *hp, int iters, const char *gpu)
{
    int warm = iters >= 10 ? iters / 10 : iters > 1, timed = iters - warm, verified[2] = {0, 0};
    size_t bytes = 2 * hp->geo.slab * sizeof(double);
    double *h = (double *)malloc(bytes), *t = (double *)malloc(iters * sizeof(double));
    double *us = (double *)malloc(2 * (size_t)iters * sizeof(double)), *ref = NULL;
    cudaEvent_t *ev = (cudaEvent_t *)calloc(iters + 1, sizeof(cudaEvent_t));
    int good = h && t && us && ev, nev = 0;
    char col[32];

    if (!good)
        fprintf(stderr, "rank %d: out of memory for a %d x %d slab\n", wl_rank, hp->geo.rows,
                hp->geo.nx);
    while (good && nev <= iters)
        good = cuda_ok(cudaEventCreate(&ev[nev++]), "cudaEventCreate");
    if (wl_rank == 0 && !(ref = halo_reference(hp->geo.nx, hp->geo.ny, iters))) {
        fprintf(stderr, "rank 0: out of memory for the %d x %d reference\n", hp->geo.ny,
                hp->geo.nx);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int sweeps = 1; sweeps >= 0 && wl_agree(good); sweeps--) {
        char who[64];
        snprintf(who, sizeof(who), "%s%s", hp->lib, sweeps ? "" : ", exchange alone");
        good = wl_agree(halo_peer_run(hp, iters, sweeps, h, ev, t));
        if (!good)
            break;
        halo_slowest(t + warm, timed, us + !sweeps * (size_t)iters);
        verified[!sweeps] = sweeps ? halo_check_grid(&hp->geo, h, iters % 2, ref, who)
                                   : halo_check_halos(&hp->geo, h, who);
    }
    if (good && wl_rank == 0) {
        printf("# GPU: %s; %d x %d interior points, slabs of %d to %d rows, %d iterations "
               "(%d warm-up) per run\n",
               gpu, hp->geo.ny, hp->geo.nx, halo_rows_of(wl_size - 1, hp->geo.ny),
               halo_rows_of(0, hp->geo.ny), iters, warm);
        printf("# us per iteration: the slowest rank's, median of the timed iterations "
               "(CUDA events between\n# the iterations on the stream)\n");
        printf("# verified: iteration: every grid equals rank 0's CPU Jacobi bit for bit; "
               "exchange: every halo\n# equals the neighbour's row\n\n");
        snprintf(col, sizeof(col), "%s us", hp->lib);
        printf("%-14s | %8s | %10s | %8s | %5s\n", "step", "halo row", col, "verified", "timed");
        for (int s = 0; s < 2; s++)
            printf("%-14s | %6zu B | %10.2f | %8s | %5d\n", s ? "exchange alone" : "iteration",
                   hp->geo.nx * sizeof(double), wl_median(us + s * (size_t)iters, timed),
                   verified[s] ? "yes" : "NO", timed);
    }
    while (nev > 0)
        cudaEventDestroy(ev[--nev]);
    free(ev);
    free(ref);
    free(us);
    free(t);
    free(h);
    return good && verified[0] && verified[1];
}

#endif
