/*
 * The MoE all-to-all for the peer programs (alltoall_nvshmem.cu,
 * alltoall_nccl.cu): alltoall_gpu.cu's rounds, timed and checked as it
 * times and checks them, over the case, routing, region layout and checks
 * of alltoall_moe.h; the library gives the two exchanges. Included by those
 * two programs only, after peer.h.
 *
 * A round: the receive slots poisoned (NaN) and the count words zeroed, a
 * barrier, dispatch (timed: from the barrier to the library's phase seen
 * complete on the host, launch included), the count words and every
 * received byte checked, the expert step (on the host, untimed: alltoall.c's),
 * its rows copied into the combine send slots, a barrier, combine (timed),
 * the weighted sum (host) checked bit for bit. A round's figure is its
 * slowest rank's; the table shows medians.
 */
#ifndef GPUPORT_PEER_MOE_H
#define GPUPORT_PEER_MOE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peer.h"
#include "alltoall_moe.h"

#define MOE_WARMUP 2

typedef struct moe_peer {
    const char *lib;     /* the table's column: "NVSHMEM", "NCCL" */
    const char *how[2];  /* how dispatch and combine move the rows, for the '#' lines */
    moe_t m;             /* the case and its routing */
    moe_areas_t a;       /* the region's layout */
    unsigned char *base; /* device: the region, in the library's memory */
    cudaStream_t s;
    int *nsend, *nrecv, *cback, *crows, *expect_n; /* [ranks] each, host */
    size_t *pos;                                   /* [T][K]: moe_returns' */
    uint64_t *words;                               /* [ranks]: the count words, read back */
    unsigned char *expect, *got, *csend;           /* host: [ranks] dispatch / combine slots */
    float *crecv, *ref, *out;                      /* host: combine slots, [T][H], [T][H] */
    /* The library's part. prepare(comb): before the barrier that opens a
     * phase, done once it returns (the count words are zeroed already).
     * phase(comb): the exchange, complete on return; dispatch fills the
     * count words. counts(): nrecv from words, 0 after a message when a
     * word is not what the library writes. Each returns 1 on success. */
    int (*prepare)(struct moe_peer *x, int comb);
    int (*phase)(struct moe_peer *x, int comb);
    int (*counts)(struct moe_peer *x);
    void *lib_state;
} moe_peer_t;

/* Host and device tables (moe_tables: this rank's messages packed once
 * into the region's send slots); base must be allocated. 1 on success. */
static int moe_peer_prepare(moe_peer_t *x)
{
    const moe_t *m = &x->m;
    size_t n = m->ranks, tk = (size_t)m->T * m->K;
    unsigned char *send = (unsigned char *)malloc(n * x->a.dslot);
    int *ddsp = (int *)calloc(2 * n, sizeof(int));
    MPI_Datatype types[2]; /* moe_tables' MPI types, unused here */
    int good;

    x->nsend = (int *)calloc(5 * n, sizeof(int));
    x->pos = (size_t *)malloc(tk * sizeof(size_t));
    x->words = (uint64_t *)calloc(n, sizeof(uint64_t));
    x->expect = (unsigned char *)malloc(n * x->a.dslot);
    x->got = (unsigned char *)malloc(n * x->a.dslot);
    x->csend = (unsigned char *)malloc(n * x->a.cslot);
    x->crecv = (float *)malloc(n * x->a.cslot);
    x->ref = (float *)malloc(m->T * m->row);
    x->out = (float *)malloc(m->T * m->row);
    good = send && ddsp && x->nsend && x->pos && x->words && x->expect && x->got && x->csend &&
           x->crecv && x->ref && x->out;
    if (!good) {
        fprintf(stderr, "rank %d: out of memory\n", wl_rank);
    } else {
        x->nrecv = x->nsend + n;
        x->cback = x->nrecv + n;
        x->crows = x->cback + n;
        x->expect_n = x->crows + n;
        moe_tables(m, x->a.dslot, send, x->nsend, x->expect, x->expect_n, ddsp, ddsp + n, x->pos,
                   x->crows, x->ref, &types[0], &types[1]);
        MPI_Type_free(&types[0]);
        MPI_Type_free(&types[1]);
        good = cuda_ok(cudaMemcpy(x->base + x->a.dsend, send, n * x->a.dslot,
                                  cudaMemcpyHostToDevice), "cudaMemcpy(send)");
    }
    free(ddsp);
    free(send);
    return good;
}

static void moe_peer_release(moe_peer_t *x)
{
    free(x->nsend);
    free(x->pos);
    free(x->words);
    free(x->expect);
    free(x->got);
    free(x->csend);
    free(x->crecv);
    free(x->ref);
    free(x->out);
}

/* alltoall.c's expert step on the received messages (got): each row times
 * (e + 1) for each local expert e its header names, into the combine send
 * slot of the row's rank, in order; cback[s]: the rows for rank s. */
static void moe_peer_expert(moe_peer_t *x)
{
    const moe_t *m = &x->m;

    for (int s = 0; s < m->ranks; s++) {
        const unsigned char *in = x->got + s * x->a.dslot;
        float *out = (float *)(x->csend + s * x->a.cslot);
        int rows = 0;
        for (int i = 0; i < x->nrecv[s] && i < m->T; i++) {
            moe_hdr_t h;
            const float *v = (const float *)(in + (size_t)i * m->msg + sizeof(h));
            memcpy(&h, in + (size_t)i * m->msg, sizeof(h));
            for (int j = 0; j < m->epr; j++) {
                float scale = (float)(m->me * m->epr + j + 1);
                float *o = out + (size_t)rows * m->H;
                if (!(h.mask >> j & 1) || rows == m->T * m->L) /* a bad header stays in */
                    continue;
                for (int k = 0; k < m->H; k++)
                    o[k] = v[k] * scale;
                rows++;
            }
        }
        x->cback[s] = rows;
    }
}

/* alltoall.c's weighted sum of each token's returned rows (crecv). */
static void moe_peer_sum(moe_peer_t *x)
{
    const moe_t *m = &x->m;

    for (int t = 0; t < m->T; t++) {
        const int *w = moe_weights(m, m->me, t);
        float *o = x->out + (size_t)t * m->H;
        memset(o, 0, m->row);
        for (int k = 0; k < m->K; k++) {
            const float *r = x->crecv + x->pos[(size_t)t * m->K + k] * m->H;
            for (int h = 0; h < m->H; h++)
                o[h] += (float)w[k] / 64.0f * r[h];
        }
    }
}

/* Slots of `area` (n[p] units of slot p): NaN (dir 0), to the host at h
 * (dir 1) or from it (dir 2). */
static int moe_peer_slots(moe_peer_t *x, size_t area, size_t slot, const int *n, size_t unit,
                          unsigned char *h, int dir)
{
    int good = 1;

    for (int p = 0; good && p < x->m.ranks; p++) {
        unsigned char *d = x->base + area + p * slot;
        size_t b = n[p] * unit;
        if (b)
            good = cuda_ok(dir == 0   ? cudaMemset(d, 0xff, b)
                           : dir == 1 ? cudaMemcpy(h + p * slot, d, b, cudaMemcpyDeviceToHost)
                                      : cudaMemcpy(d, h + p * slot, b, cudaMemcpyHostToDevice),
                           "cudaMemset/cudaMemcpy(slots)");
    }
    return good;
}

/* One timed phase, opened by a barrier on every rank. */
static int moe_peer_phase(moe_peer_t *x, int comb, double *t)
{
    double t0;
    int good = x->prepare(x, comb) && cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");

    if (!wl_agree(good))
        return 0;
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = wl_now();
    good = x->phase(x, comb);
    *t = wl_now() - t0;
    return wl_agree(good);
}

/* One round (see the file's comment); t[0], t[1]: the phases' seconds,
 * v[0], v[1]: their checks. 0 once an exchange failed anywhere. */
static int moe_peer_round(moe_peer_t *x, double *t, int *v)
{
    const moe_t *m = &x->m;
    const moe_areas_t *a = &x->a;
    int good = moe_peer_slots(x, a->drecv, a->dslot, x->expect_n, m->msg, NULL, 0) &&
               cuda_ok(cudaMemset(x->base + a->count, 0, 8 * m->ranks), "cudaMemset(counts)");

    if (!wl_agree(good) || !moe_peer_phase(x, 0, &t[0]))
        return 0;
    good = cuda_ok(cudaMemcpy(x->words, x->base + a->count, 8 * m->ranks, cudaMemcpyDeviceToHost),
                   "cudaMemcpy(counts)") &&
           cuda_ok(cudaMemcpy(x->got, x->base + a->drecv, m->ranks * a->dslot,
                              cudaMemcpyDeviceToHost), "cudaMemcpy(received)");
    v[0] &= good && x->counts(x) &&
            moe_check_messages(m, x->lib, x->got, x->nrecv, x->expect, x->expect_n, a->dslot);
    moe_peer_expert(x);
    good = good && moe_peer_slots(x, a->csend, a->cslot, x->cback, m->row, x->csend, 2) &&
           moe_peer_slots(x, a->crecv, a->cslot, x->crows, m->row, NULL, 0);
    if (!wl_agree(good) || !moe_peer_phase(x, 1, &t[1]))
        return 0;
    good = moe_peer_slots(x, a->crecv, a->cslot, x->crows, m->row, (unsigned char *)x->crecv, 1);
    if (good)
        moe_peer_sum(x);
    v[1] &= good && moe_check_output(m, x->lib, m->me, x->out, x->ref);
    return wl_agree(good);
}

/* Rank 0: a phase's row; t: each round's slowest rank, seconds. */
static void moe_peer_row(const char *phase, double *t, int n, size_t rows, size_t bytes, int v)
{
    for (int i = 0; i < n; i++)
        t[i] *= 1e6;
    printf("%10s | %7zu | %9.3f | %10.2f | %s\n", phase, rows, (double)bytes / WL_MIB,
           wl_median(t, n), v ? "yes" : "NO");
}

/* The rounds, each checked (the last one's outputs by rank 0 too), and
 * rank 0's table. 1 on every rank when every check passed. Collective. */
static int moe_peer_main(moe_peer_t *x, int rounds)
{
    const moe_t *m = &x->m;
    double *t = (double *)calloc(2 * (size_t)rounds, sizeof(double)), tt[2];
    size_t drows = 0, crows = 0;
    int v[2] = {1, 1}, good = wl_agree(t != NULL);
    char col[32];

    for (int i = 0; good && i < MOE_WARMUP + rounds; i++) {
        good = moe_peer_round(x, tt, v);
        for (int ph = 0; ph < 2 && i >= MOE_WARMUP; ph++)
            t[ph * rounds + i - MOE_WARMUP] = tt[ph];
        if (good && i == MOE_WARMUP + rounds - 1)
            v[1] &= moe_check_all(m, x->lib, x->out, x->ref);
    }
    if (good)
        MPI_Reduce(wl_rank == 0 ? MPI_IN_PLACE : t, t, 2 * rounds, MPI_DOUBLE, MPI_MAX, 0,
                   MPI_COMM_WORLD);
    v[0] = wl_agree(v[0]);
    v[1] = wl_agree(v[1]);
    for (int r = 0; r < m->ranks; r++) /* moe_describe's counts, without its MPI lines */
        for (int tk = 0; tk < m->T; tk++)
            for (int d = 0; d < m->ranks; d++) {
                uint64_t mask = moe_mask(m, r, tk, d);
                drows += mask != 0;
                crows += (size_t)__builtin_popcountll(mask);
            }
    if (good && wl_rank == 0) {
        printf("# T %d tokens per rank, H %d float32, top-%d of E %d experts (%d per rank), "
               "seed %llu\n# dispatch: %s\n# combine: %s\n",
               m->T, m->H, m->K, m->E, m->epr, (unsigned long long)m->seed, x->how[0], x->how[1]);
        printf("# rows, MiB: all ranks' in a round; us: from a barrier to the phase seen complete "
               "on the host (launch\n# included), each round's slowest rank, median of %d rounds "
               "(%d warm-up)\n#\n", rounds, MOE_WARMUP);
        snprintf(col, sizeof(col), "%s us", x->lib);
        printf("%10s | %7s | %9s | %10s | %s\n", "phase", "rows", "MiB", col, "verified");
        moe_peer_row("dispatch", t, rounds, drows, drows * m->msg, v[0]);
        moe_peer_row("combine", t + rounds, rounds, crows, crows * m->row, v[1]);
    }
    free(t);
    return good && v[0] && v[1];
}

#endif
