/*
 * gpuport_bench's device back-off table: what GPUPORT_DEV_SPIN and
 * GPUPORT_DEV_BACKOFF_NS cost on the busy path and what they save beside a
 * working kernel, each figure with the back-off as configured beside the
 * same channel's handle with it off (backoff_ns 0: spin without pause), in
 * the same run. Rows:
 *  - FIFO push + sync, one kernel thread (median of the per-iteration times);
 *  - put_with_signal + wait ping-pong round trip (median; collective);
 *  - FIFO throughput, 64 warps pushing (pushers wait for room: the FIFO-full
 *    path);
 *  - a waiter beside a working kernel: the lower rank times a fixed
 *    compute kernel alone, then while the higher rank has one block per SM
 *    resident: an idle kernel that sleeps in __nanosleep and reads a host
 *    flag (no gpuport: what a resident neighbour costs whatever it does),
 *    then one gpuport_wait per SM pending, spinning, then pausing. Two
 *    compute kernels: latency-bound (256 threads per SM, one dependent FMA
 *    chain each: issue slots to spare) and issue-bound (1024 threads per SM,
 *    eight independent chains each: every slot a spinning warp takes is
 *    lost). The waits end with signals the lower rank sends from the host
 *    once its kernel is timed, so every wait must succeed. Only under MPS
 *    do the two processes' kernels run at once on a shared GPU; the header
 *    says whether CUDA_MPS_PIPE_DIRECTORY is set.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_gpu_int.h"

__global__ void k_push_sync(gpuport_port_channel_dev_t ch, int iters, uint64_t *ns, int *rc,
                            uint64_t *samples);
__global__ void k_pingpong(gpuport_port_channel_dev_t ch, int first, int iters, uint64_t *ns,
                           int *rc, uint64_t *samples);
__global__ void k_throughput(gpuport_port_channel_dev_t ch, int per_thread,
                             unsigned long long *t_start, unsigned int *warps_done,
                             uint64_t *t_end, int *rc);

/* A fixed amount of latency-bound work per thread; the sum keeps it. */
static __global__ void k_work(int iters, float *out)
{
    float a = threadIdx.x * 1e-3f, b = 1.0f + blockIdx.x * 1e-6f;
    for (int i = 0; i < iters; i++)
        a = fmaf(a, b, 0.5f) * 0.999f;
    if (a == 12345.0f) /* never: keeps the chain */
        out[0] = a;
}

/* Issue-bound work: eight independent chains per thread. */
static __global__ void k_work_ilp(int iters, float *out)
{
    float a[8], b = 1.0f + blockIdx.x * 1e-6f, sum = 0;
    for (int j = 0; j < 8; j++)
        a[j] = threadIdx.x * 1e-3f + j;
    for (int i = 0; i < iters; i++)
#pragma unroll
        for (int j = 0; j < 8; j++)
            a[j] = fmaf(a[j], b, 0.5f) * 0.999f;
    for (int j = 0; j < 8; j++)
        sum += a[j];
    if (sum == 12345.0f)
        out[0] = sum;
}

/* One wait per block (thread 0); *bad counts the waits that failed. */
static __global__ void k_waiters(gpuport_port_channel_dev_t ch, unsigned long long *bad)
{
    if (threadIdx.x == 0 && gpuport_wait(&ch) != GPUPORT_OK)
        atomicAdd(bad, 1ull);
}

/* A resident neighbour that does nothing: thread 0 of each block sleeps
 * 1 us between reads of a host flag until it is set. */
static __global__ void k_sleepers(const volatile int *flag)
{
    if (threadIdx.x == 0)
        while (*flag == 0)
            __nanosleep(1000);
}

typedef struct variant {
    const char *name;
    gpuport_port_channel_dev_t dev;
} variant_t;

static int push_sync_median(state_t *st, const gpuport_port_channel_dev_t *dev, int iters,
                            double *us_p)
{
    bench_stats_t s;
    uint64_t ns = 0;
    int rc = 0;

    if (bench_samples_room(st, iters))
        return -1;
    k_push_sync<<<1, 1, 0, st->s>>>(*dev, 100, st->d_ns, st->d_rc, NULL);
    k_push_sync<<<1, 1, 0, st->s>>>(*dev, iters, st->d_ns, st->d_rc, st->d_samples);
    if (bench_wait(st->s, st->d_ns, &ns, st->d_rc, &rc))
        return -1;
    if (rc || bench_samples_stats(st, iters, &s))
        return rc ? 1 : -1;
    *us_p = s.median;
    return 0;
}

static int pingpong_median(state_t *st, const gpuport_port_channel_dev_t *dev, int iters,
                           double *us_p)
{
    const bench_gpu_env_t *env = st->env;
    bench_stats_t s;
    uint64_t ns = 0;
    int rc = 0, first = env->rank < env->peer;

    if (bench_samples_room(st, iters))
        return -1;
    env->barrier(env->ctx);
    k_pingpong<<<1, 1, 0, st->s>>>(*dev, first, 50, st->d_ns, st->d_rc, NULL);
    CK(cudaStreamSynchronize(st->s));
    env->barrier(env->ctx);
    k_pingpong<<<1, 1, 0, st->s>>>(*dev, first, iters, st->d_ns, st->d_rc, st->d_samples);
    if (bench_wait(st->s, st->d_ns, &ns, st->d_rc, &rc))
        return -1;
    if (rc || bench_samples_stats(st, iters, &s))
        return rc ? 1 : -1;
    *us_p = s.median;
    return 0;
}

static int throughput(state_t *st, const gpuport_port_channel_dev_t *dev, double *mps_p)
{
    const int warps = 64, per = scaled(st->env, 2000) / 16 + 1;
    unsigned long long *d_start, start = ~0ull;
    unsigned int *d_done;
    uint64_t *d_end, end = 0;
    int rc = 0;

    CK(cudaMalloc(&d_start, 8));
    CK(cudaMalloc(&d_done, 4));
    CK(cudaMalloc(&d_end, 8));
    CK(cudaMemcpy(d_start, &start, 8, cudaMemcpyHostToDevice));
    CK(cudaMemset(d_done, 0, 4));
    CK(cudaMemset(st->d_rc, 0, sizeof(int)));
    k_throughput<<<warps, 32, 0, st->s>>>(*dev, per, d_start, d_done, d_end, st->d_rc);
    if (bench_wait(st->s, d_end, &end, st->d_rc, &rc))
        return -1;
    CK(cudaMemcpy(&start, d_start, 8, cudaMemcpyDeviceToHost));
    cudaFree(d_start);
    cudaFree(d_done);
    cudaFree(d_end);
    if (rc)
        return 1;
    *mps_p = (double)warps * 32 * per / ((end - start) / 1e9) / 1e6;
    return 0;
}

enum { NB_NONE, NB_SLEEPERS, NB_WAITERS };

/* The lower rank's kernel time (ms, best of 3: issue-bound `ilp` or the
 * latency-bound one) with the higher rank's neighbour resident, one block
 * per SM: none, idle sleepers, or waiters of `dev`. Collective. *bad_p:
 * waits that failed on the waiting side. */
static int work_beside(state_t *st, int nb, const gpuport_port_channel_dev_t *dev, int ilp,
                       int sms, int iters, double *ms_p, int *bad_p)
{
    const bench_gpu_env_t *env = st->env;
    int worker = env->rank < env->peer, threads = ilp ? 1024 : 256;
    unsigned long long bad = 0;
    volatile int *flag = NULL;
    int *d_flag = NULL;
    float *out;

    *bad_p = 0;
    CK(cudaMalloc(&out, sizeof(float)));
    CK(cudaMemset(st->d_bad, 0, sizeof(*st->d_bad)));
    if (!worker && nb == NB_SLEEPERS) {
        CK(cudaHostAlloc((void **)&flag, sizeof(int), cudaHostAllocMapped));
        *flag = 0;
        CK(cudaHostGetDevicePointer((void **)&d_flag, (void *)flag, 0));
    }
    env->barrier(env->ctx);
    if (!worker && nb != NB_NONE) {
        if (nb == NB_WAITERS)
            k_waiters<<<sms, 32, 0, st->s>>>(*dev, st->d_bad);
        else
            k_sleepers<<<sms, 32, 0, st->s>>>(d_flag);
        CK(cudaGetLastError());
        struct timespec ts = {0, 20 * 1000 * 1000}; /* the neighbour is running */
        nanosleep(&ts, NULL);
    }
    env->barrier(env->ctx);
    if (worker) {
        float best = 0;
        for (int r = -1; r < 3; r++) { /* r -1: warm-up */
            float ms;
            CK(cudaEventRecord(st->e0, st->s));
            if (ilp)
                k_work_ilp<<<sms, threads, 0, st->s>>>(r < 0 ? iters / 10 : iters, out);
            else
                k_work<<<sms, threads, 0, st->s>>>(r < 0 ? iters / 10 : iters, out);
            CK(cudaEventRecord(st->e1, st->s));
            CK(cudaEventSynchronize(st->e1));
            CK(cudaEventElapsedTime(&ms, st->e0, st->e1));
            if (r == 0 || (r > 0 && ms < best))
                best = ms;
        }
        *ms_p = best;
        for (int i = 0; nb == NB_WAITERS && i < sms; i++)
            GK(gpuport_channel_signal(st->k[0].ch));
    }
    /* the worker's kernel is timed: the sleepers may go */
    env->barrier(env->ctx);
    if (!worker && nb != NB_NONE) {
        if (flag)
            *(volatile int *)flag = 1;
        CK(cudaStreamSynchronize(st->s));
        CK(cudaMemcpy(&bad, st->d_bad, sizeof(bad), cudaMemcpyDeviceToHost));
        *bad_p = (int)bad;
    }
    if (flag)
        CK(cudaFreeHost((void *)flag));
    cudaFree(out);
    /* the worker reports the waiters' failures too */
    {
        int mine = *bad_p, theirs = 0;
        env->exchange(env->ctx, &mine, &theirs, sizeof(int));
        if (worker)
            *bad_p = theirs;
    }
    env->barrier(env->ctx);
    return 0;
}

static void pair_row(const char *label, const char *unit, double on, double off, int ok)
{
    printf("  %-46s %10.2f %10.2f %s   %+.1f%%%s\n", label, on, off, unit,
           off > 0 ? (on / off - 1) * 100 : 0.0, ok ? "" : "  ERROR");
}

int bench_backoff(state_t *st)
{
    const bench_gpu_env_t *env = st->env;
    variant_t v[2];
    cudaDeviceProp prop;
    /* work[k][n]: kernel k (0 latency-bound, 1 issue-bound) beside n: alone,
     * sleepers, spinning waiters, pausing waiters */
    double ps[2] = {0, 0}, pp[2] = {0, 0}, tp[2] = {0, 0}, work[2][4];
    int rc[3] = {0, 0, 0}, bad[2][4], fails = 0;
    int iters = scaled(env, 5000), pp_iters = scaled(env, st->shared ? 200 : 5000);
    int worker = env->rank < env->peer, witers = scaled(env, 200000);
    const char *mps = getenv("CUDA_MPS_PIPE_DIRECTORY");

    CK(cudaGetDeviceProperties(&prop, st->gpu));
    v[0].name = "as configured";
    v[0].dev = st->k[0].dev;
    v[1].name = "spinning";
    v[1].dev = st->k[0].dev;
    v[1].dev.backoff_ns = 0;
    for (int i = 0; i < 2; i++) {
        rc[0] |= push_sync_median(st, &v[i].dev, iters, &ps[i]);
        rc[1] |= pingpong_median(st, &v[i].dev, pp_iters, &pp[i]);
    }
    /* throughput swings run to run: the best of three, the variants in turn */
    for (int r = 0; r < 3; r++)
        for (int i = 0; i < 2; i++) {
            double mps = 0;
            rc[2] |= throughput(st, &v[i].dev, &mps);
            if (mps > tp[i])
                tp[i] = mps;
        }
    for (int i = 0; i < 3; i++)
        if (rc[i] < 0)
            return -1;
    /* alone, beside sleepers, beside spinning waiters, beside pausing ones */
    memset(work, 0, sizeof(work));
    memset(bad, 0, sizeof(bad));
    for (int k = 0; k < 2; k++) {
        const int nbs[4] = {NB_NONE, NB_SLEEPERS, NB_WAITERS, NB_WAITERS};
        const gpuport_port_channel_dev_t *devs[4] = {NULL, NULL, &v[1].dev, &v[0].dev};
        /* the issue-bound kernel does 8 chains of witers / 8 */
        for (int n = 0; n < 4; n++)
            if (work_beside(st, nbs[n], devs[n], k, prop.multiProcessorCount,
                            k ? witers / 8 : witers, &work[k][n], &bad[k][n]))
                return -1;
    }
    /* each side counts its own failures: the waiters' are the waiting side's */
    fails = (rc[0] > 0) + (rc[1] > 0) + (rc[2] > 0);
    for (int k = 0; k < 2; k++)
        fails += !worker && (bad[k][2] > 0 || bad[k][3] > 0);
    if (!env->report)
        return fails;
    printf("\nDevice back-off (GPUPORT_DEV_SPIN=%u, GPUPORT_DEV_BACKOFF_NS=%u) beside the same "
           "handle spinning\n(backoff 0), same run; %s; CUDA_MPS_PIPE_DIRECTORY %s\n",
           st->k[0].dev.spin, st->k[0].dev.backoff_ns,
           st->shared ? "the pair shares one GPU" : "the pair on two GPUs",
           mps ? "set (MPS: the pair's kernels run at once)"
               : "unset (no MPS: on a shared GPU the pair's kernels take turns)");
    printf("  %-46s %10s %10s\n", "", "back-off", "spinning");
    pair_row("FIFO push + sync, median", "us", ps[0], ps[1], rc[0] == 0);
    pair_row("put_with_signal + wait round trip, median", "us", pp[0], pp[1], rc[1] == 0);
    pair_row("FIFO throughput, 64 warps, best of 3", "M/s", tp[0], tp[1], rc[2] == 0);
    if (worker) {
        static const char *kind[2] = {"latency-bound, %d blocks x 256 threads, 1 FMA chain",
                                      "issue-bound, %d blocks x 1024 threads, 8 FMA chains"};
        for (int k = 0; k < 2; k++) {
            char label[96];
            int ok = bad[k][2] == 0 && bad[k][3] == 0;
            printf("  compute kernel (");
            printf(kind[k], prop.multiProcessorCount);
            printf("), best of 3: alone %.3f ms\n", work[k][0]);
            snprintf(label, sizeof(label), "  ... beside an idle block per SM (no gpuport)");
            printf("  %-46s %10.3f ms %+.1f%% over alone: the floor\n", label, work[k][1],
                   work[k][0] > 0 ? (work[k][1] / work[k][0] - 1) * 100 : 0.0);
            pair_row("  ... beside one pending wait per SM", "ms", work[k][3], work[k][2], ok);
            printf("  %-46s %10.1f %10.1f %%  over the floor (back-off, spinning)\n", "",
                   work[k][1] > 0 ? (work[k][3] / work[k][1] - 1) * 100 : 0.0,
                   work[k][1] > 0 ? (work[k][2] / work[k][1] - 1) * 100 : 0.0);
        }
    }
    bench_out_value("backoff_fifo_push_sync", 0, "latency", "us", "median", ps[0], iters,
                    "the same handle spinning (GPUPORT_DEV_BACKOFF_NS=0)", ps[1],
                    rc[0] ? 0 : -1);
    bench_out_value("backoff_pingpong", 0, "latency", "us", "median", pp[0], pp_iters,
                    "the same handle spinning (GPUPORT_DEV_BACKOFF_NS=0)", pp[1],
                    rc[1] ? 0 : -1);
    bench_out_value("backoff_fifo_throughput_w64", 0, "rate", "M/s", "total", tp[0], 0,
                    "the same handle spinning (GPUPORT_DEV_BACKOFF_NS=0)", tp[1],
                    rc[2] ? 0 : -1);
    if (worker) {
        bench_out_value("backoff_work_beside_waiters", 0, "latency", "ms", "min", work[0][3], 3,
                        "the same kernel beside spinning waiters", work[0][2], -1);
        bench_out_value("backoff_work_beside_sleepers", 0, "latency", "ms", "min", work[0][1], 3,
                        "the same kernel alone", work[0][0], -1);
        bench_out_value("backoff_ilp_work_beside_waiters", 0, "latency", "ms", "min",
                        work[1][3], 3, "the same kernel beside spinning waiters", work[1][2], -1);
        bench_out_value("backoff_ilp_work_beside_sleepers", 0, "latency", "ms", "min",
                        work[1][1], 3, "the same kernel alone", work[1][0], -1);
    }
    return fails;
}
