/*
 * alltoall: the all-to-all of an expert-parallel mixture-of-experts layer,
 * dispatch and combine, over gpuport port channels beside MPI_Alltoallv in
 * the same run, timed and verified; host memory (alltoall_gpu.cu does the
 * same from kernels). alltoall_moe.h has the case: DeepEP's low-latency
 * one, T tokens of H float32 values per rank, each to its top K of E
 * experts, routed by a seeded generator that gives every rank the same
 * table.
 *
 * Dispatch sends a token once per destination rank, however many of its
 * experts live there (as DeepEP's normal kernels do; its low-latency ones
 * send once per expert): a 16-byte header (token, source rank, mask of the
 * destination's experts it picked) and the row. Rank r's messages for rank
 * d land in d's receive area at slot r, sized for the worst case, and how
 * many came travels with the signal: after the put, put_value_with_signal
 * stores (exchange number << 32 | count) into d's count word for r. A real
 * MoE layer can do exactly this. It could not compute the counts from a
 * shared table instead: its routing is the gate's output, known only on
 * the token's rank; here every rank could, and uses the table only to
 * verify. MPI_Alltoallv needs the counts before it starts, so the MPI
 * dispatch is MPI_Alltoall of the counts, then MPI_Alltoallv into the same
 * slots.
 *
 * The expert step (untimed) multiplies the row by (e + 1) for each local
 * expert e the header names; combine returns each expert's output row to
 * the token's rank (once per expert) into a worst-case slot per expert
 * rank, with put_with_signal. The token's rank knows from its own routing
 * how many rows come back from each rank and in what order, so combine
 * needs no counts (nor does MPI's); it sums them with the routing weights
 * into the token's output row (untimed).
 *
 * Every channel is a port channel, one to each rank, this one's own
 * included (so that a rank's rows to itself take the same path); one
 * region from gpuport_mem_alloc holds the count words and the four areas,
 * and is every channel's source and destination.
 *
 * Verification, every round, of both methods: the counts and every byte
 * of the dispatched messages against the messages packed from the table,
 * and every output row, bit for bit, against the reference (the sums are
 * exact: alltoall_moe.h says why); after the last round, rank 0 gathers
 * every rank's output and checks it against the reference computed there.
 * The places a phase fills are poisoned (NaN) before it.
 *
 * Timing: each phase starts after an MPI_Barrier; a rank's time runs until
 * its data is in place and its own operations are complete (gpuport: every
 * rank's signal consumed, every channel flushed); a round's figure is its
 * slowest rank's, and the table shows the median over the timed rounds.
 *
 *   mpirun -np 4 workloads/alltoall [--tokens T] [--hidden H] [--topk K]
 *                                   [--experts-per-rank N] [--seed S]
 */
#include "wl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alltoall_moe.h"
#include "bench_out.h"

#define WARMUP 2

/* What both methods exchange, the counts they learn, the checks' data. */
typedef struct xchg {
    const moe_t *m;
    moe_areas_t a;
    unsigned char *base;   /* the region (gpuport_mem_alloc) */
    gpuport_channel_t *ch; /* one per rank, this one's own included */
    int *nsend;            /* messages to each rank (packed once) */
    int *nrecv;            /* messages from each rank (learned each dispatch) */
    int *cback;            /* rows returned to each rank (from the expert step) */
    int *crows;            /* rows that come back from each rank (own routing) */
    int *ddsp, *cdsp;      /* MPI displacements: slot p at p * T messages, p * T * L rows */
    int *expect_n;         /* messages each rank must send here */
    size_t *pos;           /* [T][K]: the row of crecv holding token t's k-th expert */
    MPI_Datatype msg_type, row_type;
    unsigned char *expect; /* the messages each rank must send here, at its slot */
    float *ref, *out;      /* [T][H]: the reference output, the output */
} xchg_t;

/* The expert step: each received row times (e + 1) for each local expert e
 * its header names, into the combine slot of the row's rank, in order. */
static void expert_step(xchg_t *x)
{
    const moe_t *m = x->m;

    for (int s = 0; s < m->ranks; s++) {
        const unsigned char *in = x->base + x->a.drecv + s * x->a.dslot;
        float *out = (float *)(x->base + x->a.csend + s * x->a.cslot);
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

/* Each token's returned rows summed with the routing weights. */
static void weighted_sum(const xchg_t *x, float *out)
{
    const moe_t *m = x->m;
    const float *in = (const float *)(x->base + x->a.crecv);

    for (int t = 0; t < m->T; t++) {
        const int *w = moe_weights(m, m->me, t);
        float *o = out + (size_t)t * m->H;
        memset(o, 0, m->row);
        for (int k = 0; k < m->K; k++) {
            const float *r = in + x->pos[(size_t)t * m->K + k] * m->H;
            for (int h = 0; h < m->H; h++)
                o[h] += (float)w[k] / 64.0f * r[h];
        }
    }
}

/* exchange: begin */
/* Every rank's signal consumed (its puts are then here), then this rank's
 * operations complete on every channel (a failed wait names the first
 * channel that had no signal). */
static int gp_complete(xchg_t *x)
{
    return wl_ok(gpuport_channel_wait_all(x->ch, x->m->ranks), "gpuport_channel_wait_all") &&
           wl_ok(gpuport_channel_flush_all(x->ch, x->m->ranks), "gpuport_channel_flush_all");
}

/* Dispatch over the channels: this rank's messages for each rank into its
 * slot there, their count with the signal; then every rank's, and the
 * counts read. Ranks in turn from this one's successor, so that they do not
 * all start with the same. */
static int gp_dispatch(xchg_t *x, uint64_t seq)
{
    const moe_t *m = x->m;
    const volatile uint64_t *counts = (const uint64_t *)(x->base + x->a.count);

    for (int i = 1; i <= m->ranks; i++) {
        int d = (m->me + i) % m->ranks;
        uint64_t n = (uint64_t)x->nsend[d];
        if (n && !wl_ok_peer(gpuport_channel_put(x->ch[d], x->a.drecv + m->me * x->a.dslot,
                                                 x->a.dsend + d * x->a.dslot, n * m->msg),
                             "gpuport_channel_put", d))
            return 0;
        if (!wl_ok_peer(gpuport_channel_put_value_with_signal(
                            x->ch[d], x->a.count + 8 * (size_t)m->me, seq << 32 | n),
                        "gpuport_channel_put_value_with_signal", d))
            return 0;
    }
    if (!gp_complete(x))
        return 0;
    for (int s = 0; s < m->ranks; s++) {
        if (counts[s] >> 32 != seq || (counts[s] & 0xffffffffu) > (uint64_t)m->T) {
            fprintf(stderr, "rank %d: count word from rank %d is %#llx in exchange %llu\n", m->me,
                    s, (unsigned long long)counts[s], (unsigned long long)seq);
            return 0;
        }
        x->nrecv[s] = (int)(counts[s] & 0xffffffffu);
    }
    return 1;
}

/* Combine over the channels: the rows each rank's tokens get back from
 * this rank's experts, into its slot there, with the signal. */
static int gp_combine(xchg_t *x)
{
    const moe_t *m = x->m;

    for (int i = 1; i <= m->ranks; i++) {
        int d = (m->me + i) % m->ranks;
        uint64_t rows = (uint64_t)x->cback[d];
        gpuport_status_t st =
            rows ? gpuport_channel_put_with_signal(x->ch[d], x->a.crecv + m->me * x->a.cslot,
                                                   x->a.csend + d * x->a.cslot, rows * m->row)
                 : gpuport_channel_signal(x->ch[d]);
        if (!wl_ok_peer(st, rows ? "gpuport_channel_put_with_signal" : "gpuport_channel_signal", d))
            return 0;
    }
    return gp_complete(x);
}
/* exchange: end */

/* The same two exchanges with MPI, over the same slots. */
/* mpi exchange: begin */
static int mpi_dispatch(xchg_t *x, uint64_t seq)
{
    (void)seq;
    return MPI_Alltoall(x->nsend, 1, MPI_INT, x->nrecv, 1, MPI_INT, MPI_COMM_WORLD) ==
               MPI_SUCCESS &&
           MPI_Alltoallv(x->base + x->a.dsend, x->nsend, x->ddsp, x->msg_type, x->base + x->a.drecv,
                         x->nrecv, x->ddsp, x->msg_type, MPI_COMM_WORLD) == MPI_SUCCESS;
}

static int mpi_combine(xchg_t *x)
{
    return MPI_Alltoallv(x->base + x->a.csend, x->cback, x->cdsp, x->row_type, x->base + x->a.crecv,
                         x->crows, x->cdsp, x->row_type, MPI_COMM_WORLD) == MPI_SUCCESS;
}
/* mpi exchange: end */

/* NaN in the places a phase must fill: a place it misses fails the check. */
static void poison(const xchg_t *x, size_t area, size_t slot, const int *n, size_t unit)
{
    for (int p = 0; p < x->m->ranks; p++)
        memset(x->base + area + p * slot, 0xff, (size_t)n[p] * unit);
}

typedef struct method {
    const char *name;
    int (*dispatch)(xchg_t *, uint64_t);
    int (*combine)(xchg_t *);
} method_t;

static const method_t methods[2] = {
    {"gpuport", gp_dispatch, gp_combine},
    {"MPI", mpi_dispatch, mpi_combine},
};

/* One round of one method, the same collective calls on every rank
 * whatever fails: dispatch, its check, the expert step, combine, the
 * weighted sum, its check. The phases' times go to t[0] and t[1], the
 * checks' verdicts to v[0] and v[1]. Returns 0 once an exchange failed
 * anywhere. */
static int round_of(xchg_t *x, const method_t *mt, uint64_t seq, double *t, int *v)
{
    const moe_t *m = x->m;
    double t0;
    int good;

    poison(x, x->a.drecv, x->a.dslot, x->expect_n, m->msg);
    memset(x->base + x->a.count, 0, 8 * (size_t)m->ranks);
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = wl_now();
    good = mt->dispatch(x, seq);
    t[0] = wl_now() - t0;
    if (!wl_agree(good))
        return 0;
    v[0] &= moe_check_messages(m, mt->name, x->base + x->a.drecv, x->nrecv, x->expect, x->expect_n,
                               x->a.dslot);
    expert_step(x);
    poison(x, x->a.crecv, x->a.cslot, x->crows, m->row);
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = wl_now();
    good = mt->combine(x);
    t[1] = wl_now() - t0;
    if (!wl_agree(good))
        return 0;
    weighted_sum(x, x->out);
    v[1] &= moe_check_output(m, mt->name, m->me, x->out, x->ref);
    return 1;
}

/* The rounds: gpuport's, then MPI's, each verified; warm-up rounds
 * untimed. t[(2 * method + phase) * rounds + round]. */
static int run(xchg_t *x, int rounds, int nmethods, double *t, int *v)
{
    for (int r = 0; r < WARMUP + rounds; r++)
        for (int k = 0; k < nmethods; k++) {
            double tt[2];
            if (!round_of(x, &methods[k], (uint64_t)r * 2 + k + 1, tt, v))
                return 0;
            for (int ph = 0; ph < 2 && r >= WARMUP; ph++)
                t[(2 * k + ph) * rounds + r - WARMUP] = tt[ph];
            if (r == WARMUP + rounds - 1)
                v[1] &= moe_check_all(x->m, methods[k].name, x->out, x->ref);
        }
    return 1;
}

/* Rank 0: a phase's row, from each round's slowest rank (mp NULL: no MPI). */
static void report(const char *phase, const char *baseline, double *gp, double *mp, int n,
                   size_t rows, size_t bytes, int verified)
{
    bench_stats_t s, b = {0, 0, 0, 0, 0};
    char name[64], mpi[32] = "-", ratio[32] = "-";

    for (int i = 0; i < n; i++) {
        gp[i] *= 1e6;
        if (mp)
            mp[i] *= 1e6;
    }
    bench_stats_of(gp, (uint64_t)n, &s);
    if (mp) {
        bench_stats_of(mp, (uint64_t)n, &b);
        snprintf(mpi, sizeof(mpi), "%.2f", b.median);
        snprintf(ratio, sizeof(ratio), "%.2f", s.median / b.median);
    }
    printf("%10s | %7zu | %9.3f | %10.2f | %10s | %5s | %s\n", phase, rows, (double)bytes / WL_MIB,
           s.median, mpi, ratio, verified ? "yes" : "NO");
    snprintf(name, sizeof(name), "alltoall_%s", phase);
    bench_out_latency(name, bytes, &s, mp ? baseline : NULL, &b, verified);
}

static void table(const moe_t *m, double *t, int rounds, int mpi, const int *v)
{
    size_t drows, crows;

    moe_describe(m, &drows, &crows);
    printf("# rows, MiB: all ranks' in a round, to themselves included; us: each round's "
           "slowest rank, median of %d rounds (%d warm-up); ratio: gpuport / MPI\n#\n",
           rounds, WARMUP);
    printf("%10s | %7s | %9s | %10s | %10s | %5s | %s\n", "phase", "rows", "MiB", "gpuport us",
           "MPI us", "ratio", "verified");
    report("dispatch", "MPI_Alltoall (counts) + MPI_Alltoallv", t, mpi ? t + 2 * rounds : NULL,
           rounds, drows, drows * m->msg, v[0]);
    report("combine", "MPI_Alltoallv", t + rounds, mpi ? t + 3 * rounds : NULL, rounds, crows,
           crows * m->row, v[1]);
}

/* The transports of this rank's channels to the others, "shm+tcp" say. */
static const char *transports(const xchg_t *x, char *buf, size_t len)
{
    buf[0] = 0;
    for (int p = 0; p < x->m->ranks; p++) {
        const char *tl = gpuport_channel_transport(x->ch[p]);
        if ((p != x->m->me || x->m->ranks == 1) && !strstr(buf, tl))
            snprintf(buf + strlen(buf), len - strlen(buf), "%s%s", buf[0] ? "+" : "", tl);
    }
    return buf;
}

int main(int argc, char **argv)
{
    wl_opts_t o;
    moe_t m;
    xchg_t x;
    gpuport_comm_t comm;
    gpuport_mem_t mem = NULL;
    int good, v[2] = {1, 1}, rounds, rc = wl_init(&argc, &argv, MOE_USAGE, &o);
    double *t;
    char tl[64];

    if (rc >= 0)
        return rc;
    if (!moe_options(argc, argv, o.small, wl_rank, wl_size, &m)) {
        MPI_Finalize();
        return 2;
    }
    rounds = wl_rounds(&o, o.small ? 20 : 50);
    comm = wl_comm();
    memset(&x, 0, sizeof(x));
    x.m = &m;
    x.a = moe_areas(&m);
    /* setup: begin */
    x.ch = calloc((size_t)m.ranks, sizeof(*x.ch));
    /* setup: end */
    x.nsend = calloc(7 * (size_t)m.ranks, sizeof(int));
    x.pos = malloc((size_t)m.T * m.K * sizeof(size_t));
    x.expect = malloc(m.ranks * x.a.dslot);
    x.ref = malloc((size_t)m.T * m.row);
    x.out = malloc((size_t)m.T * m.row);
    t = calloc(4 * (size_t)rounds, sizeof(double));
    good = moe_route(&m) && x.ch && x.nsend && x.pos && x.expect && x.ref && x.out && t;
    if (!good)
        fprintf(stderr, "rank %d: out of memory\n", wl_rank);
    /* setup: begin */
    good = good && wl_ok(gpuport_mem_alloc(comm, x.a.bytes, (void **)&x.base), "gpuport_mem_alloc");
    good =
        good && wl_ok(gpuport_mem_register(comm, x.base, x.a.bytes, &mem), "gpuport_mem_register");
    /* setup: end */
    if (!wl_agree(good)) {
        good = 0;
        goto out;
    }
    x.nrecv = x.nsend + m.ranks;
    x.cback = x.nrecv + m.ranks;
    x.crows = x.cback + m.ranks;
    x.ddsp = x.crows + m.ranks;
    x.cdsp = x.ddsp + m.ranks;
    x.expect_n = x.cdsp + m.ranks;
    moe_tables(&m, x.a.dslot, x.base + x.a.dsend, x.nsend, x.expect, x.expect_n, x.ddsp, x.cdsp,
               x.pos, x.crows, x.ref, &x.msg_type, &x.row_type);

    /* A port channel to every rank, this one included, the region its
     * source and destination (collective; none is left waiting) */
    /* setup: begin */
    good &=
        wl_ok(gpuport_channel_create_all(comm, mem, mem, 1, x.ch), "gpuport_channel_create_all");
    /* setup: end */
    if (wl_agree(good)) {
        wl_header("alltoall",
                  "MoE dispatch and combine, gpuport port channels beside MPI_Alltoallv",
                  transports(&x, tl, sizeof(tl)));
        good = run(&x, rounds, o.no_mpi ? 1 : 2, t, v);
        MPI_Reduce(wl_rank == 0 ? MPI_IN_PLACE : t, t, 4 * rounds, MPI_DOUBLE, MPI_MAX, 0,
                   MPI_COMM_WORLD);
        v[0] = wl_agree(v[0]);
        v[1] = wl_agree(v[1]);
        if (good && wl_rank == 0)
            table(&m, t, rounds, !o.no_mpi, v);
    } else {
        good = 0;
    }
    /* nobody destroys a channel that a peer still puts through */
    MPI_Barrier(MPI_COMM_WORLD);
    for (int p = 0; p < m.ranks; p++)
        if (x.ch[p] && !wl_ok_peer(gpuport_channel_destroy(x.ch[p]), "gpuport_channel_destroy", p))
            good = 0;
    MPI_Type_free(&x.msg_type);
    MPI_Type_free(&x.row_type);
out:
    if (mem && !wl_ok(gpuport_mem_deregister(mem), "gpuport_mem_deregister"))
        good = 0;
    if (x.base && !wl_ok(gpuport_mem_free(comm, x.base), "gpuport_mem_free"))
        good = 0;
    if (!wl_ok(gpuport_comm_destroy(comm), "gpuport_comm_destroy"))
        good = 0;
    moe_free(&m);
    free(x.ch);
    free(x.nsend);
    free(x.pos);
    free(x.expect);
    free(x.ref);
    free(x.out);
    free(t);
    return wl_finish(good && v[0] && v[1]);
}
