/*
 * gpuport_bench's small-operations table ("small operations at the
 * hardware's rate"): each gpuport figure beside its limit, measured in
 * the same run on the same GPU from a private CUDA context (bench_limits.h),
 * with the ratio, the row's target and whether it is met. The benchmark
 * reports; it asserts only what the receiver got, never a timing.
 *
 * The lower rank of the pair sends over the cudaMalloc channel (k[0]), the
 * higher one receives and verifies; each measurement runs while the other
 * rank waits at a barrier, so that on a shared GPU only the sender's kernel
 * and its proxy's flusher take turns on it. Rows:
 *  - signals/s, W = 1, 4, 16, 64 warps: every lane gpuport_signal()s K
 *    times, then the last warp to finish flushes once; signals over the
 *    time from the first push to that flush complete (globaltimer). The
 *    receiver takes every signal with gpuport_poll (a kernel of 8 warps,
 *    after the sender's flush) and the count must be W*32*K exactly.
 *    Limit: batched write-values into pinned host memory, where gpuport's
 *    semaphores live (a signal without coalescing is one write-value).
 *  - put_value/s, 4 warps: every lane gpuport_put_value()s K times, each
 *    to its own 8-byte slot, then one flush; the receiver checks every slot.
 *    Limit: batched write-values into GPU memory.
 *  - 64-byte puts/s, 1, 4, 16 warps: every lane gpuport_put()s 64 bytes K
 *    times, each to its own place, then one flush; the receiver checks
 *    every byte. Limit: 64-byte copies back to back. A warp's lanes put
 *    side by side (a warp's puts of a round are one trigger); the row
 *    "lanes in reverse" puts the same bytes with each warp's lanes in the
 *    other order, which no fold joins: one trigger a put.
 *  - put bandwidth 1-256 KiB: bench_gp_bw's one-thread puts and flush,
 *    timed with events, beside copies of the same size back to back.
 *  - FIFO push + sync (sender alone) beside the raw pinned round trip.
 *  - ping-pong round trip beside twice one raw hop (copy + write-value of a
 *    flag, issue to completion, in one process).
 */
#include <stdio.h>
#include <string.h>

#include "bench_gpu_int.h"
#include "bench_limits.h"

enum { OP_SIGNAL, OP_PUT64, OP_PUT_VALUE, OP_PUT64_REV };

#define IS_PUT64(op) ((op) == OP_PUT64 || (op) == OP_PUT64_REV)

#define NO_TARGET (-2) /* met(): the row has no target */

/* the limits as the records name them (baselines of the rows) */
#define LIM_WV_HOST "batched write-values into pinned host memory, private context"
#define LIM_WV_GPU "batched write-values into GPU memory, private context"
#define LIM_COPY64 "64 B copies back to back, private context"
#define LIM_COPY "copies of the same size back to back, private context"
#define LIM_HOP2 "2 x (8 B copy + write-value + sync), private context"

/* what put_value writes into slot s */
__host__ __device__ static inline uint64_t pv_value(uint64_t s)
{
    return ((s + 1) * 0x9E3779B97F4A7C15ull) | 1;
}

/* Every lane of the grid (blocks of one warp) does `per` operations: put i
 * of global lane g goes to slot i * lanes + g, so the slots of a run are
 * [0, lanes * per). The last warp to finish flushes. */
static __global__ void k_small(gpuport_port_channel_dev_t ch, int op, int per,
                               unsigned long long *t_start, unsigned long long *t_pushed,
                               unsigned int *warps_done, uint64_t *t_end, int *rc)
{
    uint64_t lanes = (uint64_t)gridDim.x * blockDim.x;
    uint64_t g = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    int st = 0;

    atomicMin(t_start, (unsigned long long)gpuport_dev_now_ns());
    for (int i = 0; i < per && !st; i++) {
        uint64_t slot = (uint64_t)i * lanes + g;
        if (op == OP_SIGNAL)
            st = gpuport_signal(&ch);
        else if (IS_PUT64(op)) {
            if (op == OP_PUT64_REV) /* the warp's lanes in the other order */
                slot = (uint64_t)i * lanes + (g & ~31ull) + 31 - (g & 31);
            st = gpuport_put(&ch, slot * 64, slot * 64, 64);
        }
        else
            st = gpuport_put_value(&ch, slot * 8, pv_value(slot));
    }
    /* when the last lane had pushed its last: the device side's share of the time */
    atomicMax(t_pushed, (unsigned long long)gpuport_dev_now_ns());
    bench_dev_warps_done(&ch, st, warps_done, t_end, rc);
}

/* Takes every signal that has arrived. Run once all were delivered: a
 * thread stops when none is left, so the sum is exactly what came. */
static __global__ void k_take_all(gpuport_port_channel_dev_t ch, unsigned long long *taken, int *rc)
{
    unsigned long long n = 0;
    int r;

    while ((r = gpuport_poll(&ch)) == 1)
        n++;
    if (r < 0)
        atomicExch(rc, r);
    atomicAdd(taken, n);
}

static __global__ void k_check_values(const uint64_t *p, uint64_t n, unsigned long long *bad)
{
    unsigned long long b = 0;
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x)
        b += p[i] != pv_value(i);
    if (b)
        atomicAdd(bad, b);
}

typedef struct small {
    state_t *st;
    int sender;
    int have_lim;
    bench_limits_t lim; /* the sender's */
    unsigned long long *d_start, *d_taken, *d_pushed;
    unsigned int *d_done;
    uint64_t *d_end;
    int met, missed, unknown; /* targets */
} small_t;

static const char *op_name(int op)
{
    return op == OP_SIGNAL ? "signals" : IS_PUT64(op) ? "64 B puts" : "put_values";
}

/* The receiver's side before a run: no signal left to take, zeros where
 * the run's bytes will land. */
static int rx_prepare(small_t *sm, int op, uint64_t bytes)
{
    state_t *st = sm->st;

    if (op == OP_SIGNAL) {
        CK(cudaMemset(sm->d_taken, 0, sizeof(*sm->d_taken)));
        CK(cudaMemset(st->d_rc, 0, sizeof(int)));
        k_take_all<<<8, 32>>>(st->k[0].dev, sm->d_taken, st->d_rc);
        CK(cudaGetLastError());
    } else {
        CK(cudaMemset(st->k[0].dst, 0, bytes));
    }
    CK(cudaDeviceSynchronize());
    return 0;
}

/* The receiver's check after the sender's flush: *bad_p set on a mismatch. */
static int rx_verify(small_t *sm, int op, uint64_t ops, int warps, int *bad_p)
{
    state_t *st = sm->st;
    unsigned long long n = 0;
    int rc = 0;

    CK(cudaMemset(st->d_bad, 0, sizeof(*st->d_bad)));
    CK(cudaMemset(sm->d_taken, 0, sizeof(*sm->d_taken)));
    CK(cudaMemset(st->d_rc, 0, sizeof(int)));
    if (op == OP_SIGNAL)
        k_take_all<<<8, 32>>>(st->k[0].dev, sm->d_taken, st->d_rc);
    else if (IS_PUT64(op))
        k_check<<<1024, 256>>>(st->k[0].dst, ops * 64, st->d_bad);
    else
        k_check_values<<<1024, 256>>>((const uint64_t *)st->k[0].dst, ops, st->d_bad);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    if (op == OP_SIGNAL) {
        CK(cudaMemcpy(&n, sm->d_taken, sizeof(n), cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(&rc, st->d_rc, sizeof(int), cudaMemcpyDeviceToHost));
        if (n != ops || rc)
            fprintf(stderr, "gpuport_bench: rank %d: %d warps of signals: %llu arrived, expected "
                    "%llu%s%s\n", st->env->rank, warps, n, (unsigned long long)ops,
                    rc ? "; gpuport_poll: " : "",
                    rc ? gpuport_status_string((gpuport_status_t)rc) : "");
        *bad_p = n != ops || rc;
    } else {
        CK(cudaMemcpy(&n, st->d_bad, sizeof(n), cudaMemcpyDeviceToHost));
        if (n)
            fprintf(stderr, "gpuport_bench: rank %d: %d warps of %s: %llu wrong bytes or slots\n",
                    st->env->rank, warps, op_name(op), n);
        *bad_p = n != 0;
    }
    return 0;
}

/* One run of op by `warps` warps, `per` each lane: *rate_p (operations/s,
 * on the sender), *push_rate_p (operations over the time to the last
 * lane's last push, before the flush: what the device side alone allows;
 * NULL: not wanted) and *verified_p (both sides). Collective over the pair. */
static int small_run(small_t *sm, int op, int warps, int per, double *rate_p,
                     double *push_rate_p, int *verified_p)
{
    state_t *st = sm->st;
    const bench_gpu_env_t *env = st->env;
    uint64_t ops = (uint64_t)warps * 32 * per, end = 0;
    unsigned long long start = 0, pushed = 0;
    int mine = 0, theirs = 0, rc = 0;

    *rate_p = 0;
    if (push_rate_p)
        *push_rate_p = 0;
    env->barrier(env->ctx);
    if (!sm->sender && rx_prepare(sm, op, ops * (IS_PUT64(op) ? 64 : 8)))
        return -1;
    env->barrier(env->ctx);
    if (sm->sender) {
        /* on the kernel's stream: st->s does not wait for the legacy one */
        CK(cudaMemsetAsync(sm->d_start, 0xff, sizeof(*sm->d_start), st->s)); /* ~0: no push yet */
        CK(cudaMemsetAsync(sm->d_pushed, 0, sizeof(*sm->d_pushed), st->s));
        CK(cudaMemsetAsync(sm->d_done, 0, sizeof(*sm->d_done), st->s));
        CK(cudaMemsetAsync(st->d_rc, 0, sizeof(int), st->s));
        k_small<<<warps, 32, 0, st->s>>>(st->k[0].dev, op, per, sm->d_start, sm->d_pushed,
                                         sm->d_done, sm->d_end, st->d_rc);
        if (bench_wait(st->s, sm->d_end, &end, st->d_rc, &rc))
            return -1;
        CK(cudaMemcpy(&start, sm->d_start, sizeof(start), cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(&pushed, sm->d_pushed, sizeof(pushed), cudaMemcpyDeviceToHost));
        if (rc)
            fprintf(stderr, "gpuport_bench: rank %d: %d warps of %s: %s\n", env->rank, warps,
                    op_name(op), gpuport_status_string((gpuport_status_t)rc));
        else if (end > start)
            *rate_p = (double)ops / ((double)(end - start) / 1e9);
        if (!rc && push_rate_p && pushed > start)
            *push_rate_p = (double)ops / ((double)(pushed - start) / 1e9);
        mine = rc != 0;
    }
    env->barrier(env->ctx);
    if (!sm->sender && rx_verify(sm, op, ops, warps, &mine))
        return -1;
    env->exchange(env->ctx, &mine, &theirs, sizeof(mine));
    *verified_p = !mine && !theirs;
    return 0;
}

/* ---- the table ---- */

/* A figure in its unit, "-" where there is none (0 or less). */
static const char *fig_text(char *buf, size_t len, const char *unit, int decimals, double v)
{
    if (v > 0)
        snprintf(buf, len, "%.*f %s", decimals, v, unit);
    else
        snprintf(buf, len, "-");
    return buf;
}

static const char *rate_text(char *buf, size_t len, double ops_s)
{
    return fig_text(buf, len, "M/s", 2, ops_s / 1e6);
}

static const char *gbs_text(char *buf, size_t len, double gbs)
{
    return fig_text(buf, len, "GB/s", 1, gbs);
}

static const char *us_text(char *buf, size_t len, double us)
{
    return fig_text(buf, len, "us", 2, us);
}

/* a over b: "85%" for rates (pct), "1.15x" for times */
static const char *ratio_text(char *buf, size_t len, double a, double b, int pct)
{
    if (a > 0 && b > 0 && pct)
        snprintf(buf, len, "%.0f%%", 100 * a / b);
    else if (a > 0 && b > 0)
        snprintf(buf, len, "%.2fx", a / b);
    else
        snprintf(buf, len, "-");
    return buf;
}

/* met: 1 yes, 0 no, -1 unknown (a figure is missing), NO_TARGET */
static void row(small_t *sm, const char *label, const char *gp, const char *lim,
                const char *ratio, const char *target, int met, int verified)
{
    static const char *const met_text[] = {"-", "NO", "yes"};

    if (met == 1)
        sm->met++;
    else if (met == 0)
        sm->missed++;
    else if (met == -1)
        sm->unknown++;
    if (sm->st->env->report)
        printf("  %-40s %12s %12s %6s %18s %4s  %s\n", label, gp, lim, ratio, target,
               met == NO_TARGET ? "" : met_text[met + 1], verified ? "yes" : "NO");
}

/* rate against at least `frac` of a limit: 1, 0, or -1 without either */
static int at_least(double v, double limit, double frac)
{
    if (v <= 0 || limit <= 0)
        return -1;
    return v >= frac * limit;
}

static int signals(small_t *sm)
{
    static const int warps[] = {1, 4, 16, 64};
    state_t *st = sm->st;
    int total = scaled(st->env, st->shared ? 16384 : 131072), fails = 0, ok;
    double rate, pushes, lim = sm->have_lim ? sm->lim.wv_batch[1] * 1e6 : 0;
    char label[64], a[32], b[32], c[16];

    if (small_run(sm, OP_SIGNAL, 1, 1, &rate, NULL, &ok)) /* warm */
        return -1;
    fails += !ok;
    for (size_t i = 0; i < sizeof(warps) / sizeof(warps[0]); i++) {
        int w = warps[i], per = total / (w * 32) < 1 ? 1 : total / (w * 32);
        if (small_run(sm, OP_SIGNAL, w, per, &rate, &pushes, &ok))
            return -1;
        fails += !ok;
        snprintf(label, sizeof(label), "signals, %2d warp%s x 32 x %d", w, w > 1 ? "s" : "",
                 per);
        row(sm, label, rate_text(a, sizeof(a), rate), rate_text(b, sizeof(b), lim),
            ratio_text(c, sizeof(c), rate, lim, 1), w == 4 ? ">= 10 M/s" : "",
            w == 4 ? (rate > 0 ? rate >= 10e6 : -1) : NO_TARGET, ok);
        /* the same run to the last push only: where this is near the row
         * above, the device's pushes set the rate; where it is well above,
         * the proxy and the flush do */
        row(sm, "    the pushes alone (to the last push)", rate_text(a, sizeof(a), pushes), "-",
            "-", "", NO_TARGET, ok);
        snprintf(label, sizeof(label), "signals_w%d", w);
        bench_out_value(label, 0, "rate", "M/s", "total", rate / 1e6, (uint64_t)w * 32 * per,
                        sm->have_lim ? LIM_WV_HOST : NULL, lim / 1e6, ok);
    }
    return fails;
}

static int put_values(small_t *sm)
{
    state_t *st = sm->st;
    char label[64], a[32], b[32], c[16];
    const int w = 4;
    int per = scaled(st->env, st->shared ? 8192 : 65536) / (w * 32), ok, fails = 0, met;
    uint64_t room = st->region / (8 * 32 * w);
    double rate, lim = sm->have_lim ? sm->lim.wv_batch[0] * 1e6 : 0;

    if (per < 1)
        per = 1;
    if ((uint64_t)per > room)
        per = (int)room;
    if (small_run(sm, OP_PUT_VALUE, 1, 1, &rate, NULL, &ok)) /* warm */
        return -1;
    fails += !ok;
    if (small_run(sm, OP_PUT_VALUE, w, per, &rate, NULL, &ok))
        return -1;
    fails += !ok;
    /* both parts of the target: 1 M/s, and 70 % of batched write-values */
    met = rate <= 0 ? -1 : rate < 1e6 ? 0 : at_least(rate, lim, 0.7);
    snprintf(label, sizeof(label), "put_value, %d warps x 32 x %d", w, per);
    row(sm, label, rate_text(a, sizeof(a), rate), rate_text(b, sizeof(b), lim),
        ratio_text(c, sizeof(c), rate, lim, 1), ">= 1 M/s, >= 70%", met, ok);
    bench_out_value("put_value_w4", 8, "rate", "M/s", "total", rate / 1e6,
                    (uint64_t)w * 32 * per, sm->have_lim ? LIM_WV_GPU : NULL, lim / 1e6, ok);
    return fails;
}

static int puts64(small_t *sm)
{
    /* side by side at 1, 4 and 16 warps; then 4 warps with the lanes in reverse */
    static const struct { int op, warps; } rows[] = {
        {OP_PUT64, 1}, {OP_PUT64, 4}, {OP_PUT64, 16}, {OP_PUT64_REV, 4}};
    state_t *st = sm->st;
    int total = scaled(st->env, st->shared ? 4096 : 32768), fails = 0, ok;
    double rate, lim = sm->have_lim ? sm->lim.copy64 * 1e6 : 0;
    char label[64], a[32], b[32], c[16];

    if (small_run(sm, OP_PUT64, 1, 1, &rate, NULL, &ok)) /* warm */
        return -1;
    fails += !ok;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        int w = rows[i].warps, rev = rows[i].op == OP_PUT64_REV;
        int per = total / (w * 32) < 1 ? 1 : total / (w * 32);
        uint64_t room = st->region / (64 * 32 * (uint64_t)w);
        if ((uint64_t)per > room)
            per = (int)room;
        if (small_run(sm, rows[i].op, w, per, &rate, NULL, &ok))
            return -1;
        fails += !ok;
        if (rev)
            snprintf(label, sizeof(label), "  lanes in reverse, %d warps x 32 x %d", w, per);
        else
            snprintf(label, sizeof(label), "64 B puts, %2d warp%s x 32 x %d", w,
                     w > 1 ? "s" : "", per);
        row(sm, label, rate_text(a, sizeof(a), rate), rate_text(b, sizeof(b), lim),
            ratio_text(c, sizeof(c), rate, lim, 1), rev ? "" : ">= 80%",
            rev ? NO_TARGET : at_least(rate, lim, 0.8), ok);
        snprintf(label, sizeof(label), rev ? "put64_rev_w%d" : "put64_w%d", w);
        bench_out_value(label, 64, "rate", "M/s", "total", rate / 1e6, (uint64_t)w * 32 * per,
                        sm->have_lim ? LIM_COPY64 : NULL, lim / 1e6, ok);
    }
    return fails;
}

static int bandwidth(small_t *sm)
{
    state_t *st = sm->st;
    const bench_gpu_env_t *env = st->env;
    int reps = scaled(env, 200), fails = 0;
    char label[64], a[32], b[32], c[16];

    for (int i = 0; i < BENCH_LIMITS_NBW; i++) {
        uint64_t size = bench_limits_bw_size(i);
        double gbs = 0, lim = sm->have_lim ? sm->lim.bw[i] : 0;
        int mine = 0, theirs = 0;
        if (bench_gp_bw(st, &st->k[0], size, 0, reps, &gbs, &mine))
            return -1;
        env->exchange(env->ctx, &mine, &theirs, sizeof(mine));
        fails += mine || theirs;
        snprintf(label, sizeof(label), "put %3llu KiB x %d, 1 thread",
                 (unsigned long long)(size >> 10), reps);
        row(sm, label, gbs_text(a, sizeof(a), gbs), gbs_text(b, sizeof(b), lim),
            ratio_text(c, sizeof(c), gbs, lim, 1), ">= 80%", at_least(gbs, lim, 0.8),
            !mine && !theirs);
        bench_out_value("put_1thread", size, "bandwidth", "GB/s", "total", gbs, (uint64_t)reps,
                        sm->have_lim ? LIM_COPY : NULL, lim, !mine && !theirs);
    }
    return fails;
}

static int latencies(small_t *sm)
{
    state_t *st = sm->st;
    const bench_gpu_env_t *env = st->env;
    double gp, raw, hop2 = sm->have_lim ? 2 * sm->lim.hop_us : 0;
    int fails = 0;
    char label[64], a[32], b[32], c[16], stats[96];
    bench_stats_t hop_st;

    /* the FIFO alone: the receiver waits */
    env->barrier(env->ctx);
    if (sm->sender && bench_fifo_measure(st))
        return -1;
    env->barrier(env->ctx);
    if (sm->sender) {
        gp = st->fifo_ps_ns / 1e3 / st->fifo_iters;
        raw = st->fifo_rt_ns / 1e3 / st->fifo_iters;
        fails += st->fifo_rc != 0;
        double ds;
        snprintf(label, sizeof(label), "FIFO push + sync, 1 thread, x %d", st->fifo_iters);
        row(sm, label, us_text(a, sizeof(a), gp), us_text(b, sizeof(b), raw),
            ratio_text(c, sizeof(c), gp, raw, 0), "<= 1.2x",
            gp > 0 && raw > 0 ? gp <= 1.2 * raw : -1, st->fifo_rc == 0);
        ds = st->fifo_ps_serial_ns / 1e3 / st->fifo_iters;
        row(sm, "  push + sync as at 6dd63b6", us_text(a, sizeof(a), ds), us_text(b, sizeof(b), raw),
            ratio_text(c, sizeof(c), ds, raw, 0), "", NO_TARGET, st->fifo_rc == 0);
        /* where the time goes: the raw round trip with a push's device
         * work added, answered by the same host thread (no proxy) */
        double dw = st->fifo_rt_push_ns / 1e3 / st->fifo_iters;
        ds = st->fifo_rt_serial_ns / 1e3 / st->fifo_iters;
        row(sm, "  raw + a push's device work", us_text(a, sizeof(a), dw),
            us_text(b, sizeof(b), raw), ratio_text(c, sizeof(c), dw, raw, 0), "", NO_TARGET, 1);
        row(sm, "  same, tail read after the atomic", us_text(a, sizeof(a), ds),
            us_text(b, sizeof(b), raw), ratio_text(c, sizeof(c), ds, raw, 0), "", NO_TARGET, 1);
        ds = st->fifo_rt_clock_ns / 1e3 / st->fifo_iters;
        row(sm, "  same, clock read on every poll", us_text(a, sizeof(a), ds),
            us_text(b, sizeof(b), raw), ratio_text(c, sizeof(c), ds, raw, 0), "", NO_TARGET, 1);
        if (env->report) {
            bench_stats_text(stats, sizeof(stats), &st->fifo_ps_st);
            printf("  %-40s gpuport %s\n", "  per push + sync (globaltimer)", stats);
            bench_stats_text(stats, sizeof(stats), &st->fifo_rt_st);
            printf("  %-40s raw     %s\n", "", stats);
        }
        bench_fifo_rows(st, "small_");
    }
    if (bench_pingpong_measure(st))
        return -1;
    fails += st->pingpong_rc != 0;
    snprintf(label, sizeof(label), "ping-pong 8 B, round trip, x %d", st->pingpong_iters);
    row(sm, label, us_text(a, sizeof(a), st->pingpong_us), us_text(b, sizeof(b), hop2),
        ratio_text(c, sizeof(c), st->pingpong_us, hop2, 0), "", NO_TARGET,
        st->pingpong_rc == 0);
    if (env->report) {
        bench_stats_text(stats, sizeof(stats), &st->pingpong_st);
        printf("  %-40s gpuport %s\n", "  per round trip (globaltimer)", stats);
    }
    /* the limit is a mean of hops: the row compares means */
    memset(&hop_st, 0, sizeof(hop_st));
    hop_st.mean = hop2;
    bench_out_latency("small_pingpong_round_trip", 8, &st->pingpong_st,
                      hop2 > 0 ? LIM_HOP2 : NULL, &hop_st, st->pingpong_rc ? 0 : -1);
    return fails;
}

/* the sender measures the limits while the receiver waits */
static int limits(small_t *sm)
{
    state_t *st = sm->st;
    const bench_gpu_env_t *env = st->env;
    const bench_limits_t *l = &sm->lim;
    const char *where = st->shared ? "this GPU (the pair shares it)" : "the peer's GPU";
    char a[32];

    env->barrier(env->ctx);
    if (sm->sender && env->baselines)
        sm->have_lim = bench_limits_measure(st->gpu, st->peer_gpu, env->iters_scale, &sm->lim) == 0;
    env->barrier(env->ctx);
    if (!env->report)
        return 0;
    printf("\nSmall operations (rank %d -> rank %d, %s channel; each row's target beside it; the "
           "receiver checks every signal, slot and byte)\n",
           env->rank, env->peer, st->k[0].name);
    if (!env->baselines) {
        printf("  limits: not measured (--no-mpi)\n");
    } else if (!sm->have_lim) {
        printf("  limits: not measured (a driver call failed; see stderr)\n");
    } else {
        printf("  limits: a private CUDA context on GPU %d, sources in VMM memory there, "
               "destinations in VMM\n  memory on %s; host clock from the first issue to "
               "cuStreamSynchronize; read back: %s\n",
               st->gpu, where, l->verified ? "verified" : "WRONG");
        printf("    %-62s %s\n", "cuStreamWriteValue64 one by one, GPU memory",
               rate_text(a, sizeof(a), l->wv_one[0] * 1e6));
        printf("    %-62s %s\n", "cuStreamBatchMemOp, 128 write-values per call, GPU memory",
               rate_text(a, sizeof(a), l->wv_batch[0] * 1e6));
        printf("    %-62s %s\n", "cuStreamWriteValue64 one by one, pinned host memory",
               rate_text(a, sizeof(a), l->wv_one[1] * 1e6));
        printf("    %-62s %s\n", "cuStreamBatchMemOp, 128 per call, pinned host memory",
               rate_text(a, sizeof(a), l->wv_batch[1] * 1e6));
        printf("    %-62s %s\n", "64 B cuMemcpyDtoDAsync back to back (copies/s)",
               rate_text(a, sizeof(a), l->copy64 * 1e6));
        printf("    %-62s %s\n", "8 B cuMemcpyDtoDAsync + write-value of a flag, then sync (hop)",
               us_text(a, sizeof(a), l->hop_us));
        printf("    (%d values, %d copies, %d copies per size, %d hops)\n", l->n_values,
               l->n_copies, l->reps_bw, l->n_hops);
    }
    if (st->shared)
        printf("  one GPU (%s): gpuport's kernel and its flusher's context share it; the limits "
               "ran alone\n", bench_gpu_sharing());
    printf("  %-40s %12s %12s %6s %18s %4s  %s\n", "", "gpuport", "limit", "ratio", "target",
           "met?", "verified");
    return sm->have_lim && !l->verified;
}

int bench_small(state_t *st)
{
    const bench_gpu_env_t *env = st->env;
    small_t sm;
    int fails = 0, r = 0;

    memset(&sm, 0, sizeof(sm));
    sm.st = st;
    sm.sender = env->rank < env->peer;
    CK(cudaMalloc(&sm.d_start, sizeof(*sm.d_start)));
    CK(cudaMalloc(&sm.d_taken, sizeof(*sm.d_taken)));
    CK(cudaMalloc(&sm.d_pushed, sizeof(*sm.d_pushed)));
    CK(cudaMalloc(&sm.d_done, sizeof(*sm.d_done)));
    CK(cudaMalloc(&sm.d_end, sizeof(*sm.d_end)));
    fails += limits(&sm);
    /* a CUDA error ends the table (as in the others, the peer's barriers go unmatched) */
    if ((r = signals(&sm)) >= 0)
        fails += r;
    if (r >= 0 && (r = put_values(&sm)) >= 0)
        fails += r;
    if (r >= 0 && (r = puts64(&sm)) >= 0)
        fails += r;
    if (r >= 0 && (r = bandwidth(&sm)) >= 0)
        fails += r;
    if (r >= 0 && (r = latencies(&sm)) >= 0)
        fails += r;
    if (env->report) {
        printf("  (signals, put_value, 64 B puts: first push to the last flush complete, "
               "globaltimer; KiB puts: events\n"
               "   around the kernel of puts + flush. Limits: signals, batched write-values "
               "to host memory; put_value,\n"
               "   batched write-values to GPU memory; puts, copies of their size back to "
               "back; FIFO, a kernel\n"
               "   thread's flag through pinned memory echoed by a host thread; ping-pong, "
               "2 hops of copy + write-value + sync)\n");
        printf("  targets: %d met, %d missed, %d not measured%s\n", sm.met, sm.missed, sm.unknown,
               r < 0 ? "; stopped by a CUDA error" : "");
    }
    cudaFree(sm.d_start);
    cudaFree(sm.d_taken);
    cudaFree(sm.d_pushed);
    cudaFree(sm.d_done);
    cudaFree(sm.d_end);
    return r < 0 ? -1 : fails;
}
