/*
 * gpuport_bench --rma: what get, atomic_add and accumulate cost on a port
 * channel, each measured in the same run beside the channel's own put (or
 * put_value), MPI's one-sided call on a window of the same pair, and for the
 * adds the floor: the host's own atomic adds, in a loop, into memory from
 * gpuport_mem_alloc, which is what shm's proxy does per element. See
 * bench_rma.h.
 *
 * Rank 0 alone times, on its channel to rank 1; rank 1 waits in a barrier
 * that sleeps (so that a waiting rank takes no core from rank 0's proxy on a
 * small machine), then checks what landed in its memory:
 *  1. get beside put, 8 B .. 16 MiB: rounds of (get + flush), (put + flush),
 *     (MPI_Get + MPI_Win_flush). After the timed rounds rank 1 checks every
 *     byte the puts wrote; then rank 0 scribbles over its region and gets the
 *     whole size once more (and MPI_Gets it), every byte checked against the
 *     pattern rank 1 wrote.
 *  2. atomic_add: N adds of 1 to one 8-aligned word, then one flush; beside
 *     N put_values and a flush, N MPI_Accumulate(1 x MPI_INT64_T, MPI_SUM)
 *     and an MPI_Win_flush, and N __atomic_fetch_add in a loop. Each counter
 *     must hold exactly its number of operations (the last put_value, its
 *     sequence number).
 *  3. accumulate float32 1 KiB .. 16 MiB and int64 1 MiB: rounds of
 *     (accumulate + flush) beside (put + flush), (MPI_Accumulate(MPI_SUM) +
 *     MPI_Win_flush) and the floor (an atomic add per element, a CAS loop for
 *     float32). The source holds 1 everywhere, so every element of each
 *     destination must end equal to its number of rounds, exactly (fewer
 *     than 2^24 rounds: float32 counts exactly).
 * A transport that refuses an operation (GPUPORT_ERR_NOT_SUPPORTED) gets
 * "refused: <status>" in that row; any other failed operation is printed
 * and, like a mismatch, makes the exit status 1.
 */
#ifndef _GNU_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_out.h"
#include "bench_rma.h"
#include "gpuport/gpuport_mpi.h"

#define KIB (1ull << 10)
#define MIB (1ull << 20)
#define REGION (16 * MIB + 4 * KIB) /* the largest size, and slack */

/* Round counts before --iters scaling: about BYTES per measurement. */
#define BYTES (256 * MIB)
#define ROUNDS_MIN 8
#define ROUNDS_MAX 2000
#define ATOMIC_OPS 100000
#define FLOAT_EXACT (1ull << 24) /* float32 counts exactly below this */

enum op {
    OP_PUT, OP_GET, OP_MPI_GET,
    OP_ACC_F32, OP_MPI_ACC_F32, OP_FLOOR_F32,
    OP_ACC_I64, OP_MPI_ACC_I64, OP_FLOOR_I64,
    OP_ADD, OP_PUT_VALUE, OP_MPI_ADD, OP_FLOOR_ADD,
};

typedef struct {
    MPI_Comm pair;
    int rank;
    double scale;
    gpuport_comm_t comm;
    gpuport_mem_t ms, md;
    gpuport_channel_t ch;
    unsigned char *src, *dst; /* gpuport_mem_alloc; rank 0's dst holds the floors */
    MPI_Win win;              /* MPI_WIN_NULL: no baselines */
    unsigned char *win_base;  /* this rank's part of the window */
    unsigned char *obuf;      /* rank 0: MPI_Get's origin */
    const char *win_alloc;
    int win_shared;
    int mismatches; /* this rank's */
    int failures;   /* operations that failed (refusals not counted) */
} rma_t;

/* One measurement on rank 0; rank 1 learns `done` from it. */
typedef struct {
    int ran;                 /* every round carried out */
    gpuport_status_t status; /* the refusal or failure, where one stopped it */
    uint64_t rounds;         /* timed (operations, for the atomic batches) */
    uint64_t done;           /* carried out, warm-up included: what the adds summed */
    double total_s;          /* time of the timed rounds */
    bench_stats_t st;        /* per timed round, us */
} res_t;

static void fatal(gpuport_status_t st, const char *call)
{
    int rank = 0;

    if (st == GPUPORT_OK)
        return;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    fprintf(stderr, "rank %d: %s failed: %s (gpuport_bench --rma)\n", rank, call,
            gpuport_status_string(st));
    MPI_Abort(MPI_COMM_WORLD, 1);
}
#define SETUP(call) fatal((call), #call)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A barrier whose waiters sleep 50 us between tests, where no one-sided
 * MPI progress is needed from them (a shared window, or none). */
static void quiet_barrier(const rma_t *x)
{
    struct timespec nap = {0, 50000};
    MPI_Request rq;
    int done = 0;

    MPI_Ibarrier(x->pair, &rq);
    for (;;) {
        MPI_Test(&rq, &done, MPI_STATUS_IGNORE);
        if (done)
            return;
        if (x->win == MPI_WIN_NULL || x->win_shared)
            nanosleep(&nap, NULL);
    }
}

/* Rank 0's counts to rank 1, after rank 0's measurements. */
static void share(const rma_t *x, uint64_t *n, int count)
{
    quiet_barrier(x);
    MPI_Bcast(n, count, MPI_UINT64_T, 0, x->pair);
}

static uint64_t counts_of(const res_t *r)
{
    return r->ran ? r->done : 0;
}

/* ---- data and checks -------------------------------------------------- */

static uint64_t mix64(uint64_t v)
{
    v += 0x9e3779b97f4a7c15ull;
    v = (v ^ (v >> 30)) * 0xbf58476d1ce4e5b9ull;
    v = (v ^ (v >> 27)) * 0x94d049bb133111ebull;
    return v ^ (v >> 31);
}

static void pattern_write(void *buf, uint64_t size, uint64_t seed)
{
    for (uint64_t j = 0; j < size / 8; j++) {
        uint64_t w = mix64(seed + j);
        memcpy((char *)buf + 8 * j, &w, 8);
    }
}

static void report(rma_t *x, const char *test, uint64_t size, const char *what)
{
    x->mismatches++;
    fprintf(stderr, "rank %d: MISMATCH in --rma %s, %llu bytes: %s\n", x->rank, test,
            (unsigned long long)size, what);
}

static void pattern_check(rma_t *x, const void *buf, uint64_t size, uint64_t seed,
                          const char *test)
{
    const unsigned char *p = buf;
    char what[96];

    for (uint64_t j = 0; j < size / 8; j++) {
        uint64_t w = mix64(seed + j);
        const unsigned char *e = (const unsigned char *)&w;

        if (memcmp(p + 8 * j, e, 8) == 0)
            continue;
        for (int i = 0; i < 8; i++) {
            if (p[8 * j + i] != e[i]) {
                snprintf(what, sizeof(what), "byte %llu is 0x%02x, expected 0x%02x",
                         (unsigned long long)(8 * j + i), p[8 * j + i], e[i]);
                break;
            }
        }
        report(x, test, size, what);
        return;
    }
}

/* Every element of buf (count of them) equal to want. */
static void count_check(rma_t *x, const void *buf, uint64_t count, int f32, uint64_t want,
                        const char *test)
{
    char what[96];

    for (uint64_t i = 0; i < count; i++) {
        float f;
        int64_t v;

        if (f32)
            memcpy(&f, (const char *)buf + 4 * i, 4);
        else
            memcpy(&v, (const char *)buf + 8 * i, 8);
        if (f32 ? f == (float)want : (uint64_t)v == want)
            continue;
        if (f32)
            snprintf(what, sizeof(what), "element %llu is %.9g, expected %llu",
                     (unsigned long long)i, f, (unsigned long long)want);
        else
            snprintf(what, sizeof(what), "element %llu is %lld, expected %llu",
                     (unsigned long long)i, (long long)v, (unsigned long long)want);
        report(x, test, count * (f32 ? 4 : 8), what);
        return;
    }
}

static void fill(void *buf, uint64_t count, int f32)
{
    const float one_f = 1.0f;
    const int64_t one_i = 1;

    for (uint64_t i = 0; i < count; i++) {
        if (f32)
            memcpy((char *)buf + 4 * i, &one_f, 4);
        else
            memcpy((char *)buf + 8 * i, &one_i, 8);
    }
}

/* ---- the floors: the host's own atomics, as shm's proxy adds ---------- */

static void floor_f32(uint32_t *dst, const float *src, uint64_t count)
{
    for (uint64_t i = 0; i < count; i++) {
        uint32_t old = __atomic_load_n(&dst[i], __ATOMIC_RELAXED), next;

        do {
            float f;
            memcpy(&f, &old, sizeof(f));
            f += src[i];
            memcpy(&next, &f, sizeof(next));
        } while (!__atomic_compare_exchange_n(&dst[i], &old, next, 1, __ATOMIC_RELEASE,
                                              __ATOMIC_RELAXED));
    }
}

static void floor_i64(uint64_t *dst, const uint64_t *src, uint64_t count)
{
    for (uint64_t i = 0; i < count; i++)
        __atomic_fetch_add(&dst[i], src[i], __ATOMIC_RELEASE);
}

/* ---- rounds ----------------------------------------------------------- */

/* One round of `size` bytes, complete when it returns. */
static gpuport_status_t one_round(rma_t *x, int op, uint64_t size)
{
    int n4 = (int)(size / 4), n8 = (int)(size / 8);
    gpuport_status_t st = GPUPORT_OK;

    switch (op) {
    case OP_PUT:
        st = gpuport_channel_put(x->ch, 0, 0, size);
        break;
    case OP_GET:
        st = gpuport_channel_get(x->ch, 0, 0, size);
        break;
    case OP_ACC_F32:
        st = gpuport_channel_accumulate(x->ch, 0, 0, size / 4, GPUPORT_FLOAT32);
        break;
    case OP_ACC_I64:
        st = gpuport_channel_accumulate(x->ch, 0, 0, size / 8, GPUPORT_INT64);
        break;
    case OP_MPI_GET:
        MPI_Get(x->obuf, (int)size, MPI_BYTE, 1, 0, (int)size, MPI_BYTE, x->win);
        MPI_Win_flush(1, x->win);
        return GPUPORT_OK;
    case OP_MPI_ACC_F32:
        MPI_Accumulate(x->src, n4, MPI_FLOAT, 1, 0, n4, MPI_FLOAT, MPI_SUM, x->win);
        MPI_Win_flush(1, x->win);
        return GPUPORT_OK;
    case OP_MPI_ACC_I64:
        MPI_Accumulate(x->src, n8, MPI_INT64_T, 1, 0, n8, MPI_INT64_T, MPI_SUM, x->win);
        MPI_Win_flush(1, x->win);
        return GPUPORT_OK;
    case OP_FLOOR_F32:
        floor_f32((uint32_t *)x->dst, (const float *)x->src, size / 4);
        return GPUPORT_OK;
    case OP_FLOOR_I64:
        floor_i64((uint64_t *)x->dst, (const uint64_t *)x->src, size / 8);
        return GPUPORT_OK;
    }
    return st == GPUPORT_OK ? gpuport_channel_flush(x->ch) : st;
}

static const char *op_name(int op)
{
    static const char *const names[] = {
        "put", "get", "MPI_Get", "accumulate float32", "MPI_Accumulate float32",
        "floor float32", "accumulate int64", "MPI_Accumulate int64", "floor int64",
        "atomic_add", "put_value", "MPI_Accumulate", "__atomic_fetch_add"};
    return names[op];
}

/* Where a gpuport call stopped a measurement: a refusal is the transport's
 * answer; anything else is a failure. */
static void stopped(rma_t *x, int op, gpuport_status_t st, res_t *r)
{
    r->status = st;
    if (st == GPUPORT_ERR_NOT_SUPPORTED)
        return;
    x->failures++;
    fprintf(stderr, "rank %d: --rma %s failed: %s\n", x->rank, op_name(op),
            gpuport_status_string(st));
}

static uint64_t rounds_of(const rma_t *x, uint64_t size)
{
    uint64_t r = BYTES / size;

    r = r < ROUNDS_MIN ? ROUNDS_MIN : r > ROUNDS_MAX ? ROUNDS_MAX : r;
    r = (uint64_t)((double)r * x->scale + 0.5);
    return r ? r : 1;
}

static uint64_t warm_of(uint64_t timed)
{
    uint64_t w = timed / 10;
    return w < 2 ? 2 : w > 20 ? 20 : w;
}

/* Rank 0: warm-up rounds, then `timed` timed ones, each timed alone. */
static void run_rounds(rma_t *x, int op, uint64_t size, uint64_t timed, res_t *r)
{
    uint64_t warm = warm_of(timed);
    double *us = malloc(timed * sizeof(*us));

    memset(r, 0, sizeof(*r));
    if (!us) {
        fprintf(stderr, "rank 0: --rma: no memory for %llu samples\n",
                (unsigned long long)timed);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (uint64_t i = 0; i < warm + timed; i++) {
        double t0 = now_s(), dt;
        gpuport_status_t st = one_round(x, op, size);

        dt = now_s() - t0;
        if (st != GPUPORT_OK) {
            stopped(x, op, st, r);
            break;
        }
        r->done++;
        if (i >= warm) {
            us[i - warm] = dt * 1e6;
            r->total_s += dt;
        }
    }
    if (r->status == GPUPORT_OK) {
        r->ran = 1;
        r->rounds = timed;
        bench_stats_of(us, timed, &r->st);
    }
    free(us);
}

static gpuport_status_t one_op(rma_t *x, int op, uint64_t seq)
{
    static const int64_t one = 1;

    switch (op) {
    case OP_ADD:
        return gpuport_channel_atomic_add(x->ch, 0, 1);
    case OP_PUT_VALUE:
        return gpuport_channel_put_value(x->ch, 8, seq);
    case OP_MPI_ADD:
        MPI_Accumulate(&one, 1, MPI_INT64_T, 1, 0, 1, MPI_INT64_T, MPI_SUM, x->win);
        return GPUPORT_OK;
    default:
        __atomic_fetch_add((uint64_t *)x->dst, 1, __ATOMIC_RELEASE);
        return GPUPORT_OK;
    }
}

static gpuport_status_t batch_end(rma_t *x, int op)
{
    if (op == OP_MPI_ADD)
        MPI_Win_flush(1, x->win);
    if (op == OP_ADD || op == OP_PUT_VALUE)
        return gpuport_channel_flush(x->ch);
    return GPUPORT_OK;
}

/* Rank 0: n/10 (at most 10,000) operations and their completion untimed,
 * then n timed as one batch. */
static void run_batch(rma_t *x, int op, uint64_t n, res_t *r)
{
    uint64_t warm = n / 10 > 10000 ? 10000 : n / 10;

    memset(r, 0, sizeof(*r));
    for (int pass = 0; pass < 2 && r->status == GPUPORT_OK; pass++) {
        uint64_t count = pass ? n : warm;
        double t0 = now_s();
        gpuport_status_t st = GPUPORT_OK;

        for (uint64_t i = 0; i < count && st == GPUPORT_OK; i++)
            st = one_op(x, op, r->done + i + 1);
        if (st == GPUPORT_OK)
            st = batch_end(x, op);
        if (st != GPUPORT_OK) {
            stopped(x, op, st, r);
            break;
        }
        r->done += count;
        r->total_s = now_s() - t0;
    }
    if (r->status == GPUPORT_OK) {
        r->ran = 1;
        r->rounds = n;
    }
}

/* ---- output ----------------------------------------------------------- */

static void format_size(uint64_t size, char *buf, size_t len)
{
    static const char *const units[] = {"B", "KiB", "MiB"};
    int u = 0;

    while (u < 2 && size >= 1024 && size % 1024 == 0) {
        size /= 1024;
        u++;
    }
    snprintf(buf, len, "%llu %s", (unsigned long long)size, units[u]);
}

static double gbps(const res_t *r, uint64_t size)
{
    return r->ran && r->total_s > 0 ? (double)size * (double)r->rounds / r->total_s / 1e9 : 0;
}

static double mops(const res_t *r)
{
    return r->ran && r->total_s > 0 ? (double)r->rounds / r->total_s / 1e6 : 0;
}

/* a figure, or "-" where it was not measured */
static void cell(double v, int width, int decimals)
{
    if (v > 0)
        printf(" %*.*f", width, decimals, v);
    else
        printf(" %*s", width, "-");
}

static void ratio_cell(double a, double b, int width)
{
    cell(a > 0 && b > 0 ? a / b : 0, width, 2);
}

/* why a row lacks figures: "; get refused: not supported" */
static void why_not(int op, const res_t *r)
{
    if (r->status != GPUPORT_OK)
        printf("; %s %s: %s", op_name(op),
               r->status == GPUPORT_ERR_NOT_SUPPORTED ? "refused" : "failed",
               gpuport_status_string(r->status));
}

static const char *verdict(int ok, int checked)
{
    return !ok ? "NO" : checked ? "yes" : "-";
}

static int bench_verified(int ok, int checked)
{
    return !ok ? 0 : checked ? 1 : -1;
}

/* 1 if no rank found a mismatch since `before` */
static int row_ok(const rma_t *x, int before)
{
    int ok = x->mismatches == before, all;

    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, x->pair);
    return all;
}

/* ---- 1. get beside put ------------------------------------------------ */

static void get_head(const rma_t *x)
{
    printf("\n# get beside put: rank 0's rounds of (get of size + flush), (put + flush)%s\n"
           "#   us: median round; GB/s: size * rounds / time of all timed rounds (1e9 B/s);\n"
           "#   get/MPI: latency ratio. verified: every byte the puts wrote (rank 1), and one\n"
           "#   more get%s of the whole size into scribbled memory against rank 1's pattern\n",
           x->win != MPI_WIN_NULL ? ", (MPI_Get + MPI_Win_flush)" : "",
           x->win != MPI_WIN_NULL ? " and MPI_Get" : "");
    printf("%8s | %9s %9s %9s %7s | %9s %9s %9s | %8s | %s\n", "size", "get us", "put us",
           "MPI_Get", "get/MPI", "get GB/s", "put GB/s", "MPI_Get", "verified", "rounds");
}

static void get_row(rma_t *x, uint64_t size)
{
    uint64_t timed = rounds_of(x, size), n[1];
    uint64_t seed_put = mix64(size ^ 0x707574), seed_get = mix64(size ^ 0x676574);
    int before = x->mismatches, ok;
    res_t put, get, mpi;
    char s[32];

    memset(&put, 0, sizeof(put));
    memset(&get, 0, sizeof(get));
    memset(&mpi, 0, sizeof(mpi));
    if (x->rank == 0) {
        pattern_write(x->src, size, seed_put);
    } else if (x->win != MPI_WIN_NULL) {
        pattern_write(x->win_base, size, seed_get);
        MPI_Win_sync(x->win);
    }
    quiet_barrier(x);
    if (x->rank == 0)
        run_rounds(x, OP_PUT, size, timed, &put);
    n[0] = x->rank == 0 ? counts_of(&put) : 0;
    share(x, n, 1);
    if (x->rank == 1) {
        if (n[0])
            pattern_check(x, x->dst, size, seed_put, "put");
        pattern_write(x->dst, size, seed_get);
    }
    quiet_barrier(x);
    if (x->rank == 0) {
        run_rounds(x, OP_GET, size, timed, &get);
        if (get.ran) {
            gpuport_status_t st;

            memset(x->src, 0x5a, size);
            st = gpuport_channel_get(x->ch, 0, 0, size);
            st = st == GPUPORT_OK ? gpuport_channel_flush(x->ch) : st;
            if (st != GPUPORT_OK)
                stopped(x, OP_GET, st, &get);
            else
                pattern_check(x, x->src, size, seed_get, "get");
        }
        if (x->win != MPI_WIN_NULL) {
            run_rounds(x, OP_MPI_GET, size, timed, &mpi);
            memset(x->obuf, 0x5a, size);
            one_round(x, OP_MPI_GET, size);
            pattern_check(x, x->obuf, size, seed_get, "MPI_Get");
        }
    }
    ok = row_ok(x, before);
    if (x->rank != 0)
        return;
    format_size(size, s, sizeof(s));
    printf("%8s |", s);
    cell(get.ran ? get.st.median : 0, 9, 2);
    cell(put.ran ? put.st.median : 0, 9, 2);
    cell(mpi.ran ? mpi.st.median : 0, 9, 2);
    ratio_cell(get.ran ? get.st.median : 0, mpi.ran ? mpi.st.median : 0, 7);
    printf(" |");
    cell(gbps(&get, size), 9, 3);
    cell(gbps(&put, size), 9, 3);
    cell(gbps(&mpi, size), 9, 3);
    printf(" | %8s | %llu", verdict(ok, get.ran || put.ran), (unsigned long long)timed);
    why_not(OP_GET, &get);
    why_not(OP_PUT, &put);
    printf("\n");
    fflush(stdout);

    bench_out_latency("get_flush", size, &get.st, mpi.ran ? "MPI_Get + MPI_Win_flush" : NULL,
                      &mpi.st, bench_verified(ok, get.ran));
    bench_out_value("get_flush_bw", size, "bandwidth", "GB/s", "total", gbps(&get, size),
                    get.rounds, mpi.ran ? "MPI_Get + MPI_Win_flush" : NULL, gbps(&mpi, size),
                    bench_verified(ok, get.ran));
    bench_out_latency("put_flush", size, &put.st, NULL, NULL, bench_verified(ok, put.ran));
    bench_out_value("put_flush_bw", size, "bandwidth", "GB/s", "total", gbps(&put, size),
                    put.rounds, NULL, 0, bench_verified(ok, put.ran));
}

/* ---- 2. atomic_add ----------------------------------------------------- */

static void atomic_table(rma_t *x)
{
    static const int ops[] = {OP_ADD, OP_PUT_VALUE, OP_MPI_ADD, OP_FLOOR_ADD};
    static const char *const labels[] = {
        "gpuport atomic_add(+1), then flush",
        "gpuport put_value(seq), then flush",
        "MPI_Accumulate(1 x MPI_INT64_T, MPI_SUM), MPI_Win_flush",
        "floor: __atomic_fetch_add, gpuport_mem_alloc memory"};
    uint64_t n = (uint64_t)((double)ATOMIC_OPS * x->scale + 0.5), done[4] = {0, 0, 0, 0};
    int ok[4] = {1, 1, 1, 1};
    res_t r[4];

    n = n ? n : 1;
    memset(r, 0, sizeof(r));
    if (x->rank == 1) {
        memset(x->dst, 0, 16);
        if (x->win != MPI_WIN_NULL) {
            memset(x->win_base, 0, 8);
            MPI_Win_sync(x->win);
        }
    } else {
        memset(x->dst, 0, 8);
    }
    quiet_barrier(x);
    if (x->rank == 0) {
        for (int k = 0; k < 4; k++) {
            if (ops[k] == OP_MPI_ADD && x->win == MPI_WIN_NULL)
                continue;
            run_batch(x, ops[k], n, &r[k]);
            done[k] = counts_of(&r[k]);
        }
    }
    share(x, done, 4);
    for (int k = 0; k < 4; k++) {
        int before = x->mismatches;
        const unsigned char *word = k == 1 ? x->dst + 8 : k == 2 ? x->win_base : x->dst;

        if (!done[k] || (k == 3) != (x->rank == 0))
            continue;
        if (k == 2)
            MPI_Win_sync(x->win);
        count_check(x, word, 1, 0, done[k], op_name(ops[k]));
        ok[k] = x->mismatches == before;
    }
    MPI_Allreduce(MPI_IN_PLACE, ok, 4, MPI_INT, MPI_MIN, x->pair);
    if (x->rank != 0)
        return;
    printf("\n# atomic_add: rank 0 issues N operations on one 8-aligned word of rank 1's\n"
           "#   region (after N/10 untimed), then one flush; M ops/s over the batch and its\n"
           "#   flush. verified: the word holds exactly the operations' count (put_value:\n"
           "#   the last sequence number); the floor's word is rank 0's own\n");
    printf("%-56s | %9s | %9s | %7s | %8s\n", "operation", "N", "M ops/s", "vs MPI", "verified");
    for (int k = 0; k < 4; k++) {
        printf("%-56s | %9llu |", labels[k], (unsigned long long)n);
        cell(mops(&r[k]), 9, 3);
        printf(" |");
        ratio_cell(mops(&r[k]), mops(&r[2]), 7);
        printf(" | %8s", verdict(ok[k], r[k].ran));
        why_not(ops[k], &r[k]);
        printf("\n");
    }
    fflush(stdout);
    bench_out_value("atomic_add_rate", 0, "rate", "M/s", "total", mops(&r[0]), n,
                    r[2].ran ? "MPI_Accumulate(MPI_INT64_T, MPI_SUM) + MPI_Win_flush" : NULL,
                    mops(&r[2]), bench_verified(ok[0], r[0].ran));
    bench_out_value("put_value_rate", 0, "rate", "M/s", "total", mops(&r[1]), n, NULL, 0,
                    bench_verified(ok[1], r[1].ran));
    bench_out_value("atomic_add_floor_rate", 0, "rate", "M/s", "total", mops(&r[3]), n, NULL, 0,
                    bench_verified(ok[3], r[3].ran));
}

/* ---- 3. accumulate beside put ----------------------------------------- */

static void acc_head(const rma_t *x)
{
    printf("\n# accumulate beside put: rank 0's rounds of (accumulate + flush), (put + flush)%s\n"
           "#   and the floor (rank 0 adds into its own memory: a CAS loop per float32, an\n"
           "#   __atomic_fetch_add per int64); GB/s of source bytes, size * rounds / time of\n"
           "#   all timed rounds. verified: a source of 1s, every element of each destination\n"
           "#   equal to its number of rounds\n",
           x->win != MPI_WIN_NULL ? ", (MPI_Accumulate(MPI_SUM) + MPI_Win_flush)" : "");
    printf("%8s | %7s | %9s %9s %9s %9s | %7s %9s | %8s | %s\n", "size", "type", "acc GB/s",
           "put GB/s", "MPI_Acc", "floor", "acc/MPI", "acc/floor", "verified", "rounds");
}

static void acc_row(rma_t *x, uint64_t size, int f32)
{
    const int op_acc = f32 ? OP_ACC_F32 : OP_ACC_I64;
    const int op_mpi = f32 ? OP_MPI_ACC_F32 : OP_MPI_ACC_I64;
    const int op_floor = f32 ? OP_FLOOR_F32 : OP_FLOOR_I64;
    const char *type = f32 ? "float32" : "int64";
    uint64_t timed = rounds_of(x, size), count = size / (f32 ? 4 : 8), n[3];
    int before = x->mismatches, ok;
    res_t put, acc, mpi, flo;
    char s[32], name[64], base[96];

    if (warm_of(timed) + timed >= FLOAT_EXACT)
        timed = FLOAT_EXACT - 1 - warm_of(timed);
    memset(&put, 0, sizeof(put));
    memset(&acc, 0, sizeof(acc));
    memset(&mpi, 0, sizeof(mpi));
    memset(&flo, 0, sizeof(flo));
    if (x->rank == 0) {
        fill(x->src, count, f32);
    } else if (x->win != MPI_WIN_NULL) {
        memset(x->win_base, 0, size);
        MPI_Win_sync(x->win);
    }
    quiet_barrier(x);
    if (x->rank == 0)
        run_rounds(x, OP_PUT, size, timed, &put);
    n[0] = x->rank == 0 ? counts_of(&put) : 0;
    share(x, n, 1);
    if (x->rank == 1) {
        if (n[0])
            count_check(x, x->dst, count, f32, 1, "put");
        memset(x->dst, 0, size);
    }
    quiet_barrier(x);
    if (x->rank == 0) {
        run_rounds(x, op_acc, size, timed, &acc);
        if (x->win != MPI_WIN_NULL)
            run_rounds(x, op_mpi, size, timed, &mpi);
        memset(x->dst, 0, size);
        run_rounds(x, op_floor, size, timed, &flo);
        count_check(x, x->dst, count, f32, flo.done, op_name(op_floor));
    }
    n[0] = x->rank == 0 ? counts_of(&acc) : 0;
    n[1] = x->rank == 0 ? counts_of(&mpi) : 0;
    share(x, n, 2);
    if (x->rank == 1) {
        if (n[0])
            count_check(x, x->dst, count, f32, n[0], op_name(op_acc));
        if (n[1]) {
            MPI_Win_sync(x->win);
            count_check(x, x->win_base, count, f32, n[1], op_name(op_mpi));
        }
    }
    ok = row_ok(x, before);
    if (x->rank != 0)
        return;
    format_size(size, s, sizeof(s));
    printf("%8s | %7s |", s, type);
    cell(gbps(&acc, size), 9, 3);
    cell(gbps(&put, size), 9, 3);
    cell(gbps(&mpi, size), 9, 3);
    cell(gbps(&flo, size), 9, 3);
    printf(" |");
    ratio_cell(gbps(&acc, size), gbps(&mpi, size), 7);
    ratio_cell(gbps(&acc, size), gbps(&flo, size), 9);
    printf(" | %8s | %llu", verdict(ok, acc.ran || put.ran), (unsigned long long)timed);
    why_not(op_acc, &acc);
    why_not(OP_PUT, &put);
    printf("\n");
    fflush(stdout);

    snprintf(name, sizeof(name), "accumulate_%s_bw", type);
    snprintf(base, sizeof(base), "MPI_Accumulate(%s, MPI_SUM) + MPI_Win_flush",
             f32 ? "MPI_FLOAT" : "MPI_INT64_T");
    bench_out_value(name, size, "bandwidth", "GB/s", "total", gbps(&acc, size), acc.rounds,
                    mpi.ran ? base : NULL, gbps(&mpi, size), bench_verified(ok, acc.ran));
    snprintf(name, sizeof(name), "accumulate_%s_floor_bw", type);
    bench_out_value(name, size, "bandwidth", "GB/s", "total", gbps(&flo, size), flo.rounds,
                    NULL, 0, bench_verified(ok, flo.ran));
}

/* ---- set-up and the run ----------------------------------------------- */

/* Collective: the window as gpuport_bench's host mode picks it. */
static void window_setup(rma_t *x)
{
    MPI_Comm node;
    int node_size, rc, ok;

    MPI_Comm_split_type(x->pair, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &node_size);
    MPI_Comm_free(&node);
    if (node_size == 2) {
        MPI_Info info;

        MPI_Info_create(&info);
        MPI_Info_set(info, "alloc_shared_noncontig", "true");
        MPI_Win_allocate_shared((MPI_Aint)REGION, 1, info, x->pair, &x->win_base, &x->win);
        MPI_Info_free(&info);
        x->win_alloc = "MPI_Win_allocate_shared (the ranks share a node)";
        x->win_shared = 1;
    } else {
        /* Open MPI over the tcp BTL alone has no one-sided component between hosts */
        MPI_Comm_set_errhandler(x->pair, MPI_ERRORS_RETURN);
        rc = MPI_Win_allocate((MPI_Aint)REGION, 1, MPI_INFO_NULL, x->pair, &x->win_base,
                              &x->win);
        MPI_Comm_set_errhandler(x->pair, MPI_ERRORS_ARE_FATAL);
        ok = rc == MPI_SUCCESS;
        MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, x->pair);
        if (!ok) {
            if (rc == MPI_SUCCESS)
                MPI_Win_free(&x->win);
            x->win = MPI_WIN_NULL;
            x->win_alloc = "none: MPI_Win_allocate failed between these hosts";
            return;
        }
        x->win_alloc = "MPI_Win_allocate (the ranks are on two nodes)";
    }
    MPI_Win_lock_all(0, x->win);
}

static void rma_setup(rma_t *x, MPI_Comm pair, double scale, int baselines)
{
    memset(x, 0, sizeof(*x));
    x->pair = pair;
    x->scale = scale;
    x->win = MPI_WIN_NULL;
    x->win_alloc = "none (--no-mpi)";
    MPI_Comm_rank(pair, &x->rank);
    SETUP(gpuport_comm_init_mpi(pair, &x->comm));
    SETUP(gpuport_mem_alloc(x->comm, REGION, (void **)&x->src));
    SETUP(gpuport_mem_alloc(x->comm, REGION, (void **)&x->dst));
    SETUP(gpuport_mem_register(x->comm, x->src, REGION, &x->ms));
    SETUP(gpuport_mem_register(x->comm, x->dst, REGION, &x->md));
    SETUP(gpuport_channel_create(x->comm, 1 - x->rank, x->ms, x->md, &x->ch));
    if (baselines)
        window_setup(x);
    if (x->rank == 0 && x->win != MPI_WIN_NULL) {
        x->obuf = aligned_alloc(4096, REGION);
        if (!x->obuf) {
            fprintf(stderr, "rank 0: --rma: no memory for MPI_Get's buffer\n");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
}

static void rma_teardown(rma_t *x)
{
    if (x->win != MPI_WIN_NULL) {
        MPI_Win_unlock_all(x->win);
        MPI_Win_free(&x->win);
    }
    free(x->obuf);
    SETUP(gpuport_channel_destroy(x->ch));
    SETUP(gpuport_mem_deregister(x->ms));
    SETUP(gpuport_mem_deregister(x->md));
    SETUP(gpuport_mem_free(x->comm, x->src));
    SETUP(gpuport_mem_free(x->comm, x->dst));
    SETUP(gpuport_comm_destroy(x->comm));
}

static void print_header(const rma_t *x)
{
    char host[256] = "?", when[64] = "?", load[32] = "unknown";
    char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "?";
    time_t now = time(NULL);
    FILE *f = fopen("/proc/loadavg", "r");
    struct tm tm;
    double l1;
    int len = 0;

    gethostname(host, sizeof(host) - 1);
    if (localtime_r(&now, &tm))
        strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S %Z", &tm);
    if (f) {
        if (fscanf(f, "%lf", &l1) == 1)
            snprintf(load, sizeof(load), "%.2f", l1);
        fclose(f);
    }
    MPI_Get_library_version(lib, &len);
    lib[strcspn(lib, "\n,")] = '\0';
    printf("# gpuport_bench --rma, gpuport %s\n", gpuport_version_string());
    printf("# date:      %s\n", when);
    printf("# host:      %s, %ld cores online, load average %s (1 min)\n", host,
           sysconf(_SC_NPROCESSORS_ONLN), load);
    printf("# ranks:     2: rank 0 times on its channel to rank 1; rank 1 waits in a sleeping\n"
           "#            barrier, then checks its memory\n");
    printf("# memory:    host memory, gpuport_mem_alloc: source and destination regions of\n"
           "#            16 MiB + 4 KiB on each rank\n");
    printf("# transport: %s\n", gpuport_channel_transport(x->ch));
    printf("# MPI:       %s; window: %s%s\n", lib, x->win_alloc,
           x->win != MPI_WIN_NULL ? ",\n#            passive target under MPI_Win_lock_all" : "");
    if (x->win_shared && strcmp(gpuport_channel_transport(x->ch), "shm") != 0)
        printf("#            (a shared window is shared memory whatever the BTL: beside %s,\n"
               "#            MPI's figures are not over the same path)\n",
               gpuport_channel_transport(x->ch));
    printf("# rounds:    x %g (--iters), after untimed warm-up rounds\n", x->scale);
    fflush(stdout);
}

int bench_rma_run(MPI_Comm pair, double iter_scale, int baselines, const char *prog)
{
    static const uint64_t get_sizes[] = {8, 4 * KIB, 64 * KIB, MIB, 16 * MIB};
    static const uint64_t acc_sizes[] = {KIB, 64 * KIB, MIB, 16 * MIB};
    gpuport_comm_stats_t s0, s1;
    int nranks, me, bad;
    rma_t x;

    MPI_Comm_size(pair, &nranks);
    MPI_Comm_rank(pair, &me);
    if (nranks != 2) {
        if (me == 0)
            fprintf(stderr, "%s: --rma needs exactly 2 ranks (it has %d)\n", prog, nranks);
        return 2;
    }
    rma_setup(&x, pair, iter_scale, baselines);
    if (x.rank == 0) {
        print_header(&x);
        bench_out_context("host", "", 2);
        bench_out_channel(gpuport_channel_transport(x.ch), "gpuport_mem_alloc");
        get_head(&x);
    }
    SETUP(gpuport_comm_stats(x.comm, &s0));
    for (size_t i = 0; i < sizeof(get_sizes) / sizeof(get_sizes[0]); i++)
        get_row(&x, get_sizes[i]);
    atomic_table(&x);
    if (x.rank == 0)
        acc_head(&x);
    for (size_t i = 0; i < sizeof(acc_sizes) / sizeof(acc_sizes[0]); i++)
        acc_row(&x, acc_sizes[i], 1);
    acc_row(&x, MIB, 0);
    SETUP(gpuport_comm_stats(x.comm, &s1));
    if (x.rank == 0)
        printf("\n# rank 0's host operations: %llu carried out by the calling thread "
               "(GPUPORT_HOST_INLINE), %llu triggers through the proxy\n",
               (unsigned long long)(s1.host_inline - s0.host_inline),
               (unsigned long long)(s1.triggers - s0.triggers));
    bad = x.mismatches + x.failures;
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_SUM, pair);
    rma_teardown(&x);
    if (x.rank == 0) {
        printf("\n# %s\n", bad ? "FAILED: mismatches or failed operations (see stderr)"
                               : "all verified");
        fflush(stdout);
    }
    return bad ? 1 : 0;
}
