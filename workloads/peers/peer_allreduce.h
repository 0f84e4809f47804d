/*
 * The allreduce workload for the peer programs (allreduce_nvshmem.cu,
 * allreduce_nccl.cu): allreduce_gpu.cu's sizes, inputs, round counts, bus
 * bandwidth and error bound, and the rounds, timed and checked; the
 * library gives a meeting and a call. Included by those two programs only,
 * after peer.h.
 *
 * A size: each round fills OUT with NaN (every element must be written
 * again), meets (the library's barrier, untimed), then makes one call
 * between two CUDA events on the stream; all the rounds are enqueued back
 * to back and the host waits once. A round's figure is its slowest rank's,
 * the table's the median (allreduce_gpu.cu times its rounds the same way,
 * by globaltimer inside its kernel). The check is the one allreduce_gpu.cu
 * makes of MPI's result: every element of every rank within
 * (gamma(n-1, 2^-24) + gamma(n-1, 2^-53)) * sum |x| of the exact sum. A
 * library sums in its own order, so the float sum in rank order, which
 * gpuport's kernels must equal, is not asked of it.
 */
#ifndef GPUPORT_PEER_ALLREDUCE_H
#define GPUPORT_PEER_ALLREDUCE_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "peer.h"

#define AR_MAX_ROUNDS 1000 /* timed and warm-up rounds of one size */

typedef struct ar_peer {
    const char *lib;  /* the table's columns: "NVSHMEM", "NCCL" */
    const char *call; /* what a round calls, for the '#' lines */
    const char *meet; /* what the meeting is */
    float *in, *out;  /* device, the largest size each; in: this rank's values */
    cudaStream_t s;
    int (*meet_fn)(struct ar_peer *a);                /* enqueues the meeting */
    int (*reduce_fn)(struct ar_peer *a, size_t count); /* enqueues in -> out, count floats */
    void *lib_state;
} ar_peer_t;

/* Rank r's element i: allreduce.c's and allreduce_gpu.cu's value(), the
 * same on every rank, in [-1, 1). */
static inline float ar_value(int r, uint64_t i)
{
    uint64_t h = ((uint64_t)r * 0x9e3779b97f4a7c15ull) ^ (i * 0xbf58476d1ce4e5b9ull);
    h ^= h >> 31;
    h *= 0x94d049bb133111ebull;
    h ^= h >> 29;
    return (float)((double)(h >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* One size: `warm` untimed rounds, then `rounds` timed; us[i]: the slowest
 * rank's time of round i. ev: 2 * AR_MAX_ROUNDS events. */
static int ar_peer_measure(ar_peer_t *a, uint64_t count, int warm, int rounds, cudaEvent_t *ev,
                           double *us)
{
    int good = 1;

    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = -warm; i < rounds && good; i++) {
        cudaEvent_t *e = ev + 2 * (i + warm);
        good = cuda_ok(cudaMemsetAsync(a->out, 0xff, count * sizeof(float), a->s),
                       "cudaMemsetAsync") &&
               a->meet_fn(a) && cuda_ok(cudaEventRecord(e[0], a->s), "cudaEventRecord") &&
               a->reduce_fn(a, count) && cuda_ok(cudaEventRecord(e[1], a->s), "cudaEventRecord");
    }
    good = good && cuda_ok(cudaStreamSynchronize(a->s), "the rounds (cudaStreamSynchronize)");
    for (int i = 0; i < rounds; i++) {
        float ms = 0;
        good = good && cuda_ok(cudaEventElapsedTime(&ms, ev[2 * (i + warm)],
                                                    ev[2 * (i + warm) + 1]),
                               "cudaEventElapsedTime");
        us[i] = ms * 1e3;
    }
    MPI_Allreduce(MPI_IN_PLACE, us, rounds, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return wl_agree(good);
}

/* The last round's OUT (copied to res): 1 if, on every rank, every element
 * is within the bound. */
static int ar_peer_verify(ar_peer_t *a, uint64_t count, float *res)
{
    double u = ldexp(1.0, -24), ud = ldexp(1.0, -53), k = wl_size - 1;
    double g = k * u / (1 - k * u) + k * ud / (1 - k * ud);
    uint64_t bad = 0;

    if (!cuda_ok(cudaMemcpy(res, a->out, count * sizeof(float), cudaMemcpyDeviceToHost),
                 "cudaMemcpy"))
        return wl_agree(0);
    for (uint64_t i = 0; i < count; i++) {
        double sum = 0, mag = 0;
        for (int r = 0; r < wl_size; r++) {
            float v = ar_value(r, i);
            sum += v;
            mag += fabs(v);
        }
        if (!(fabs((double)res[i] - sum) <= g * mag) && bad++ < 3) /* NaN too */
            fprintf(stderr, "rank %d: %s: element %llu is %.9g, the sum is %.12g\n", wl_rank,
                    a->lib, (unsigned long long)i, (double)res[i], sum);
    }
    return wl_agree(bad == 0);
}

/* Every size of allreduce_gpu.cu's list (--small: its short one), each
 * checked, and rank 0's table; IN is filled here. 1 on every rank when
 * every check passed. Collective. */
static int ar_peer_main(ar_peer_t *a, const wl_opts_t *o, const char *gpu)
{
    static const uint64_t small_sizes[] = {4 * WL_KIB, 64 * WL_KIB, WL_MIB};
    static const uint64_t sizes[] = {4 * WL_KIB, 16 * WL_KIB, 64 * WL_KIB, 256 * WL_KIB,
                                     WL_MIB,     4 * WL_MIB,  16 * WL_MIB, 64 * WL_MIB};
    const uint64_t *list = o->small ? small_sizes : sizes;
    int nsizes = o->small ? 3 : 8, nev = 0, good;
    uint64_t max = list[nsizes - 1] / sizeof(float);
    float *host = (float *)malloc(max * sizeof(float));
    cudaEvent_t ev[2 * AR_MAX_ROUNDS];
    double us[AR_MAX_ROUNDS];
    char col[2][32];

    good = host != NULL;
    for (uint64_t i = 0; good && i < max; i++)
        host[i] = ar_value(wl_rank, i);
    good = good && cuda_ok(cudaMemcpy(a->in, host, max * sizeof(float), cudaMemcpyHostToDevice),
                           "cudaMemcpy");
    while (good && nev < 2 * AR_MAX_ROUNDS)
        good = cuda_ok(cudaEventCreate(&ev[nev++]), "cudaEventCreate");
    if (wl_agree(good) && wl_rank == 0) {
        printf("# GPU: %s; %s, one call per round on a stream\n"
               "# us: median over the rounds of the slowest rank's time for one call (CUDA "
               "events around it, after\n# an untimed meeting: %s)\n"
               "# bus: size / time * 2 (n-1) / n, GB/s (nccl-tests); verified: every rank's "
               "result within the bound\n# of the exact sum (allreduce_gpu.cu's check of MPI)\n\n",
               gpu, a->call, a->meet);
        snprintf(col[0], sizeof(col[0]), "%s us", a->lib);
        snprintf(col[1], sizeof(col[1]), "%s bus", a->lib);
        printf("%8s | %10s | %11s | %8s | %s\n", "size", col[0], col[1], "verified", "rounds");
    }
    for (int k = 0; k < nsizes && wl_agree(good); k++) {
        uint64_t bytes = list[k], count = bytes / sizeof(float);
        int base = (int)((o->small ? 4 * WL_MIB : 256 * WL_MIB) / bytes), cap = o->small ? 50 : 900;
        int rounds = wl_rounds(o, base < 5 ? 5 : base > cap ? cap : base), warm;
        double median, busbw;
        char s[16];

        rounds = rounds > 900 ? 900 : rounds; /* with its warm-up, within AR_MAX_ROUNDS */
        warm = rounds / 10 + 1;
        good = ar_peer_measure(a, count, warm, rounds, ev, us) && ar_peer_verify(a, count, host);
        median = wl_median(us, rounds);
        busbw = median > 0 ? count * 4 / (median * 1e3) * 2 * (wl_size - 1) / wl_size : 0;
        snprintf(s, sizeof(s), bytes >= WL_MIB ? "%llu MiB" : "%llu KiB",
                 (unsigned long long)(bytes >= WL_MIB ? bytes / WL_MIB : bytes / WL_KIB));
        if (wl_rank == 0)
            printf("%8s | %10.1f | %11.2f | %8s | %d\n", s, median, busbw, good ? "yes" : "NO",
                   rounds);
        fflush(stdout);
    }
    while (nev > 0)
        cudaEventDestroy(ev[--nev]);
    free(host);
    return good;
}

#endif
