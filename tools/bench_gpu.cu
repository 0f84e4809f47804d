/*
 * GPU benchmarks of gpuport_bench; see bench_gpu.h. Every figure is printed
 * beside its baseline measured in the same run on the same GPUs:
 *  - FIFO push + sync: a kernel thread pushes a flush trigger and waits for
 *    the proxy to publish it, beside a raw round trip of a flag through
 *    pinned host memory answered by a host thread (the floor for any
 *    GPU->proxy->GPU interaction);
 *  - FIFO throughput: every lane of W warps pushes triggers; triggers/s from
 *    the first push to the proxy having consumed the last;
 *  - IPC ping-pong: 8-byte put_with_signal, wait for the reply, per round
 *    trip, beside an 8-byte cudaMemcpyPeerAsync to the peer GPU plus stream
 *    synchronize (the raw copy-engine latency);
 *  - IPC put bandwidth, one direction and both: R puts then a flush, beside
 *    R cudaMemcpyPeerAsync of the same size from this process's GPU to a
 *    buffer it allocated on the peer GPU (over tcp, the raw staging copy:
 *    device to pinned host memory, then host to that buffer), both timed
 *    with events; gpuport's
 *    and the baseline's received bytes are verified after each size. With
 *    both memory kinds, one channel over cudaMalloc and one over VMM memory
 *    (gpuport_mem_alloc_device), their columns beside one baseline;
 *  - then the small-operations table (bench_small.cu), alone under
 *    --small-only.
 * The baseline cannot write the peer process's buffer through CUDA IPC:
 * handles from one process may be opened by one context per device in
 * another, and gpuport's flusher context holds them (for cudaMalloc
 * regions).
 * Where the pair shares one GPU (fewer GPUs than ranks), its contexts take
 * turns on it: the baseline copies within that GPU, and ping-pong runs a
 * twentieth of its round trips, each of which waits for time slices.
 */
#include <atomic>
#include <math.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_gpu_int.h"

extern "C" int bench_gpu_count(void)
{
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

extern "C" int bench_gpu_select(int dev)
{
    if (cudaSetDevice(dev) != cudaSuccess || cudaFree(0) != cudaSuccess)
        return -1;
    return 0;
}

/* ---- FIFO latency ---- */

/* mode RT_RAW: a release store of the flag, then polling for the answer;
 * RT_PUSH: the device work of a FIFO push first (the tail's device copy
 * read, an atomic on the head in device memory, the room check) and a
 * relaxed store of the flag, as gpuport_dev_fifo_push does for a flush;
 * RT_PUSH_SERIAL: the same with the tail read after the atomic (each
 * waiting for the other, as pushes did before 2026-12-01); RT_PUSH_CLOCK:
 * RT_PUSH with the clock read on every poll, as a flush's deadline check
 * does. The host thread answers the same way in every mode, so the
 * differences are the device's. */
enum { RT_RAW, RT_PUSH, RT_PUSH_SERIAL, RT_PUSH_CLOCK, RT_MODES };

/* where samples is not NULL: iteration i's time since the one before */
__device__ static inline void sample(uint64_t *samples, int i, uint64_t *prev)
{
    if (samples) {
        uint64_t t = gpuport_dev_now_ns();
        samples[i] = t - *prev;
        *prev = t;
    }
}

__global__ void k_roundtrip(volatile uint64_t *ping, volatile uint64_t *pong, int iters, int mode,
                            unsigned long long *head, unsigned long long *tail_cache, uint64_t *ns,
                            uint64_t *samples)
{
    uint64_t t0 = gpuport_dev_now_ns(), room = 0, prev = t0;
    for (int i = 1; i <= iters; i++) {
        if (mode == RT_RAW) {
            asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(ping), "l"((uint64_t)i)
                         : "memory");
        } else {
            uint64_t pos, tail;
            if (mode != RT_PUSH_SERIAL) {
                tail = *(volatile unsigned long long *)tail_cache;
                pos = atomicAdd(head, 1ull);
            } else {
                pos = atomicAdd(head, 1ull);
                tail = *(volatile unsigned long long *)tail_cache;
            }
            room += pos - tail; /* the room check's arithmetic; tail stays 0 */
            asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(ping), "l"((uint64_t)i)
                         : "memory");
        }
        while (gpuport_dev_load_sys(pong) != (uint64_t)i)
            if (mode == RT_PUSH_CLOCK)
                room += gpuport_dev_now_ns() == 0;
        sample(samples, i - 1, &prev);
    }
    *ns = gpuport_dev_now_ns() - t0;
    if (room == 1) /* never: keeps the loads */
        *ns = 0;
}

__global__ void k_push_sync(gpuport_port_channel_dev_t ch, int iters, uint64_t *ns, int *rc,
                            uint64_t *samples)
{
    uint64_t t0 = gpuport_dev_now_ns(), prev = t0;
    int st = 0;
    for (int i = 0; i < iters && !st; i++) {
        st = gpuport_flush(&ch);
        sample(samples, i, &prev);
    }
    bench_dev_done(t0, st, ns, rc);
}

/* The flush of commit 6dd63b6 (before 2026-12-01's change): the tail's
 * device copy read after the reservation, the two device-memory accesses
 * one after the other. Kept beside the library's to compare in one run; no
 * deadline (the library's flush in the same run has one). */
__device__ static int flush_serial(const gpuport_port_channel_dev_t *ch)
{
    const gpuport_fifo_dev_t *f = &ch->fifo;
    uint64_t pos, cached, fl;
    gpuport_trigger_t t;

    /* promised as the library's pushers count (gpuport_fifo_grant.h), so
     * that they still find room after this run: nothing else pushes
     * meanwhile */
    atomicAdd(f->granted, 1ull);
    pos = atomicAdd(f->head, 1ull);

    while (pos + 1 - (cached = *(volatile unsigned long long *)f->tail_cache) > f->size) {
        uint64_t tail = gpuport_dev_load_sys(f->tail);
        if (tail > cached)
            atomicMax(f->tail_cache, (unsigned long long)tail);
    }
    gpuport_trigger_encode(&t, GPUPORT_OP_FLUSH, ch->id, 0, 0, 0);
    uint64_t w0 = t.w[0] | (gpuport_trigger_parity(pos, f->log2_size) << GPUPORT_TRG_PARITY_SHIFT);
    asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(&f->slots[pos & (f->size - 1)].w[0]),
                 "l"(w0)
                 : "memory");
    while (((fl = gpuport_dev_load_sys(ch->flushed)) & ~GPUPORT_FLUSHED_FAILED) <= pos)
        ;
    return fl & GPUPORT_FLUSHED_FAILED ? gpuport_dev_check(ch) : GPUPORT_OK;
}

__global__ void k_push_sync_serial(gpuport_port_channel_dev_t ch, int iters, uint64_t *ns, int *rc)
{
    uint64_t t0 = gpuport_dev_now_ns();
    int st = 0;
    for (int i = 0; i < iters && !st; i++)
        st = flush_serial(&ch);
    bench_dev_done(t0, st, ns, rc);
}

typedef struct echo {
    volatile uint64_t *ping, *pong;
    int iters;
} echo_t;

static void *echo_main(void *arg)
{
    echo_t *e = (echo_t *)arg;
    for (int i = 1; i <= e->iters; i++) {
        while (__atomic_load_n(e->ping, __ATOMIC_ACQUIRE) != (uint64_t)i)
            ;
        __atomic_store_n(e->pong, (uint64_t)i, __ATOMIC_RELEASE);
    }
    return NULL;
}

/* ---- FIFO throughput ---- */

__global__ void k_throughput(gpuport_port_channel_dev_t ch, int per_thread,
                             unsigned long long *t_start, unsigned int *warps_done,
                             uint64_t *t_end, int *rc)
{
    uint64_t pos;
    int st = 0;
    atomicMin(t_start, (unsigned long long)gpuport_dev_now_ns());
    for (int i = 0; i < per_thread && !st; i++)
        st = gpuport_dev_push_op(&ch, GPUPORT_OP_FLUSH, 0, 0, 0, &pos);
    /* the last pusher waits until the proxy has consumed everything */
    bench_dev_warps_done(&ch, st, warps_done, t_end, rc);
}

/* ---- IPC ---- */

__global__ void k_pingpong(gpuport_port_channel_dev_t ch, int first, int iters, uint64_t *ns,
                           int *rc, uint64_t *samples)
{
    uint64_t t0 = gpuport_dev_now_ns(), prev = t0;
    int st = 0;
    for (int i = 0; i < iters && !st; i++) {
        if (first) {
            st = gpuport_put_with_signal(&ch, 0, 0, 8);
            if (!st)
                st = gpuport_wait(&ch);
        } else {
            st = gpuport_wait(&ch);
            if (!st)
                st = gpuport_put_with_signal(&ch, 0, 0, 8);
        }
        sample(samples, i, &prev);
    }
    bench_dev_done(t0, st, ns, rc);
}

__global__ void k_puts(gpuport_port_channel_dev_t ch, uint64_t size, int reps, int *rc)
{
    int st = 0;
    for (int r = 0; r < reps && !st; r++)
        st = gpuport_put(&ch, 0, 0, size);
    if (!st)
        st = gpuport_flush(&ch);
    *rc = st;
}

__global__ void k_fill(unsigned char *p, uint64_t n)
{
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x)
        p[i] = bpat(i);
}

int bench_samples_room(state_t *st, int n)
{
    if (n <= st->samples_cap)
        return 0;
    cudaFree(st->d_samples);
    st->d_samples = NULL;
    st->samples_cap = 0;
    CK(cudaMalloc(&st->d_samples, (size_t)n * sizeof(uint64_t)));
    st->samples_cap = n;
    return 0;
}

int bench_samples_stats(state_t *st, int n, bench_stats_t *out)
{
    uint64_t *ns = (uint64_t *)malloc((size_t)n * sizeof(*ns));
    double *us = (double *)malloc((size_t)n * sizeof(*us));
    cudaError_t e = ns && us ? cudaMemcpy(ns, st->d_samples, (size_t)n * sizeof(*ns),
                                          cudaMemcpyDeviceToHost)
                             : cudaErrorMemoryAllocation;

    memset(out, 0, sizeof(*out));
    if (e == cudaSuccess) {
        for (int i = 0; i < n; i++)
            us[i] = ns[i] / 1e3;
        bench_stats_of(us, (uint64_t)n, out);
    } else {
        fprintf(stderr, "gpuport_bench: %d samples: %s\n", n, cudaGetErrorString(e));
    }
    free(ns);
    free(us);
    return e == cudaSuccess ? 0 : -1;
}

int bench_fifo_measure(state_t *st)
{
    const bench_gpu_env_t *env = st->env;
    int iters = scaled(env, 20000), rc = 0;
    uint64_t *ping, *pong, *dping, *dpong, ns_rt[RT_MODES] = {0}, ns_ps = 0;
    unsigned long long *dhead;
    echo_t e;
    pthread_t thr;

    if (bench_samples_room(st, iters))
        return -1;
    CK(cudaHostAlloc(&ping, 128, cudaHostAllocMapped));
    CK(cudaMalloc(&dhead, 128));
    pong = ping + 8;
    CK(cudaHostGetDevicePointer((void **)&dping, ping, 0));
    dpong = dping + 8;
    for (int mode = 0; mode < RT_MODES; mode++) {
        memset(ping, 0, 128);
        CK(cudaMemset(dhead, 0, 128));
        e.ping = ping;
        e.pong = pong;
        e.iters = iters;
        pthread_create(&thr, NULL, echo_main, &e);
        /* the raw round trip per iteration; the other modes' totals */
        k_roundtrip<<<1, 1, 0, st->s>>>(dping, dpong, iters, mode, dhead, dhead + 8, st->d_ns,
                                        mode == RT_RAW ? st->d_samples : NULL);
        if (bench_wait(st->s, st->d_ns, &ns_rt[mode], NULL, NULL))
            return -1;
        pthread_join(thr, NULL);
        if (mode == RT_RAW && bench_samples_stats(st, iters, &st->fifo_rt_st))
            return -1;
    }
    cudaFree(dhead);
    k_push_sync<<<1, 1, 0, st->s>>>(st->k[0].dev, 100, st->d_ns, st->d_rc, NULL); /* warm */
    k_push_sync<<<1, 1, 0, st->s>>>(st->k[0].dev, iters, st->d_ns, st->d_rc, st->d_samples);
    if (bench_wait(st->s, st->d_ns, &ns_ps, st->d_rc, &rc))
        return -1;
    /* a failed flush ends the loop early: only the iterations that ran */
    memset(&st->fifo_ps_st, 0, sizeof(st->fifo_ps_st));
    if (!rc && bench_samples_stats(st, iters, &st->fifo_ps_st))
        return -1;
    if (!rc) {
        k_push_sync_serial<<<1, 1, 0, st->s>>>(st->k[0].dev, iters, st->d_ns, st->d_rc);
        if (bench_wait(st->s, st->d_ns, &st->fifo_ps_serial_ns, st->d_rc, &rc))
            return -1;
    }
    cudaFreeHost(ping);
    st->fifo_iters = iters;
    st->fifo_rc = rc;
    st->fifo_rt_ns = ns_rt[RT_RAW];
    st->fifo_rt_push_ns = ns_rt[RT_PUSH];
    st->fifo_rt_serial_ns = ns_rt[RT_PUSH_SERIAL];
    st->fifo_rt_clock_ns = ns_rt[RT_PUSH_CLOCK];
    st->fifo_ps_ns = ns_ps;
    return 0;
}

/* "min / median / p99" of a latency, or the reason there is none */
void bench_stats_text(char *buf, size_t len, const bench_stats_t *s)
{
    if (s->n)
        snprintf(buf, len, "min %.2f, median %.2f, p99 %.2f us", s->min, s->median, s->p99);
    else
        snprintf(buf, len, "(no samples)");
}

/* The FIFO rows of the records: push + sync beside the raw round trip, per
 * iteration; the round trips with a push's device work, totals only. */
void bench_fifo_rows(const state_t *st, const char *prefix)
{
    static const char *raw = "raw GPU->CPU->GPU round trip (pinned flag; host thread echoes)";
    static const struct {
        const char *name;
        size_t off;
    } diag[] = {
        {"fifo_push_sync_6dd63b6", offsetof(state_t, fifo_ps_serial_ns)},
        {"fifo_rt_push_work", offsetof(state_t, fifo_rt_push_ns)},
        {"fifo_rt_push_work_serial", offsetof(state_t, fifo_rt_serial_ns)},
        {"fifo_rt_push_work_clock", offsetof(state_t, fifo_rt_clock_ns)},
    };
    double n = st->fifo_iters, raw_mean = st->fifo_rt_ns / 1e3 / n;
    char name[64];

    snprintf(name, sizeof(name), "%sfifo_push_sync", prefix);
    bench_out_latency(name, 0, &st->fifo_ps_st, raw, &st->fifo_rt_st, st->fifo_rc ? 0 : -1);
    for (size_t i = 0; i < sizeof(diag) / sizeof(diag[0]); i++) {
        uint64_t ns = *(const uint64_t *)((const char *)st + diag[i].off);
        snprintf(name, sizeof(name), "%s%s", prefix, diag[i].name);
        bench_out_value(name, 0, "latency", "us", "mean", ns / 1e3 / n, st->fifo_iters, raw,
                        raw_mean, -1);
    }
}

static int fifo_latency(state_t *st)
{
    const bench_gpu_env_t *env = st->env;
    char a[96];

    if (bench_fifo_measure(st))
        return -1;
    if (env->report) {
        int iters = st->fifo_iters;
        printf("\nFIFO push + sync latency (one kernel thread, %d iterations, mean; per iteration\n"
               "beneath, globaltimer)\n", iters);
        printf("  %-44s %8.2f us\n", "raw GPU->CPU->GPU round trip, pinned memory",
               st->fifo_rt_ns / 1e3 / iters);
        bench_stats_text(a, sizeof(a), &st->fifo_rt_st);
        printf("  %-44s %s\n", "", a);
        printf("  %-44s %8.2f us\n", "the same with a push's device work",
               st->fifo_rt_push_ns / 1e3 / iters);
        printf("  %-44s %8.2f us   (%.2fx the raw round trip)%s\n",
               "gpuport push flush trigger + proxy publish", st->fifo_ps_ns / 1e3 / iters,
               (double)st->fifo_ps_ns / (double)st->fifo_rt_ns, st->fifo_rc ? "  ERROR" : "");
        bench_stats_text(a, sizeof(a), &st->fifo_ps_st);
        printf("  %-44s %s\n", "", a);
        bench_fifo_rows(st, "");
    }
    return st->fifo_rc ? 1 : 0;
}

static int fifo_throughput(state_t *st)
{
    const bench_gpu_env_t *env = st->env;
    static const int warps[] = {1, 4, 16, 64};
    unsigned long long *d_start;
    unsigned int *d_done;
    uint64_t *d_end;
    int fails = 0;

    CK(cudaMalloc(&d_start, 8));
    CK(cudaMalloc(&d_done, 4));
    CK(cudaMalloc(&d_end, 8));
    if (env->report)
        printf("\nFIFO throughput (every lane of W warps pushes; FIFO of %s triggers)\n",
               getenv("GPUPORT_FIFO_SIZE") ? getenv("GPUPORT_FIFO_SIZE") : "1024");
    for (size_t k = 0; k < sizeof(warps) / sizeof(warps[0]); k++) {
        int w = warps[k], per = scaled(env, 2000) * 4 / (w < 4 ? 4 : w) + 1;
        unsigned long long start = ~0ull;
        uint64_t end = 0;
        int rc = 0;
        CK(cudaMemcpy(d_start, &start, 8, cudaMemcpyHostToDevice));
        CK(cudaMemset(d_done, 0, 4));
        CK(cudaMemset(st->d_rc, 0, sizeof(int)));
        k_throughput<<<w, 32, 0, st->s>>>(st->k[0].dev, per, d_start, d_done, d_end, st->d_rc);
        if (bench_wait(st->s, d_end, &end, st->d_rc, &rc))
            return -1;
        CK(cudaMemcpy(&start, d_start, 8, cudaMemcpyDeviceToHost));
        fails += rc != 0;
        if (env->report) {
            double rate = (double)w * 32 * per / ((end - start) / 1e9) / 1e6;
            char name[32];
            printf("  %3d warps (%4d pushers) x %6d triggers: %8.2f M triggers/s%s\n", w, w * 32,
                   per, rate, rc ? "  ERROR" : "");
            snprintf(name, sizeof(name), "fifo_throughput_w%d", w);
            bench_out_value(name, 0, "rate", "M/s", "total", rc ? 0 : rate,
                            (uint64_t)w * 32 * per, NULL, 0, rc ? 0 : -1);
        }
    }
    cudaFree(d_start);
    cudaFree(d_done);
    cudaFree(d_end);
    return fails;
}

int bench_pingpong_measure(state_t *st)
{
    const bench_gpu_env_t *env = st->env;
    int iters = scaled(env, st->shared ? 500 : 10000), rc = 0;
    uint64_t ns = 0;

    if (bench_samples_room(st, iters))
        return -1;
    env->barrier(env->ctx);
    k_pingpong<<<1, 1, 0, st->s>>>(st->k[0].dev, env->rank < env->peer, 100, st->d_ns, st->d_rc,
                                   NULL);
    CK(cudaStreamSynchronize(st->s));
    env->barrier(env->ctx);
    k_pingpong<<<1, 1, 0, st->s>>>(st->k[0].dev, env->rank < env->peer, iters, st->d_ns, st->d_rc,
                                   st->d_samples);
    if (bench_wait(st->s, st->d_ns, &ns, st->d_rc, &rc))
        return -1;
    st->pingpong_iters = iters;
    st->pingpong_rc = rc;
    st->pingpong_us = ns / 1e3 / iters;
    memset(&st->pingpong_st, 0, sizeof(st->pingpong_st));
    if (!rc && bench_samples_stats(st, iters, &st->pingpong_st))
        return -1;
    return 0;
}

static int ipc_pingpong(state_t *st)
{
    const bench_gpu_env_t *env = st->env;
    uint64_t t0, raw;
    bench_stats_t raw_st;
    double *raw_us = NULL;
    char a[96];

    if (bench_pingpong_measure(st))
        return -1;
    env->barrier(env->ctx);
    /* raw copy engine: 8 bytes into the peer's buffer, issue to completion */
    int raw_iters = env->baselines ? scaled(env, 2000) : 0;
    if (raw_iters && !(raw_us = (double *)malloc(raw_iters * sizeof(*raw_us)))) {
        fprintf(stderr, "gpuport_bench: no memory for %d samples\n", raw_iters);
        return -1;
    }
    for (int i = 0; i < 50 && raw_iters; i++)
        CK(cudaMemcpyPeerAsync(st->raw_dst + 64, st->peer_gpu, st->k[0].src, st->gpu, 8, st->s));
    CK(cudaStreamSynchronize(st->s));
    t0 = host_ns();
    for (int i = 0; i < raw_iters; i++) {
        uint64_t t1 = host_ns();
        CK(cudaMemcpyPeerAsync(st->raw_dst + 64, st->peer_gpu, st->k[0].src, st->gpu, 8, st->s));
        CK(cudaStreamSynchronize(st->s));
        raw_us[i] = (host_ns() - t1) / 1e3;
    }
    raw = host_ns() - t0;
    bench_stats_of(raw_us, (uint64_t)raw_iters, &raw_st);
    free(raw_us);
    env->barrier(env->ctx);
    if (env->report) {
        printf("\nIPC ping-pong, 8 B (%d round trips, mean%s; per iteration beneath)\n",
               st->pingpong_iters,
               st->shared ? "; one GPU shared: a twentieth of the round trips" : "");
        if (raw_iters) {
            printf("  %-44s %8.2f us\n", "raw copy engine: 8 B cudaMemcpyPeerAsync + sync",
                   raw / 1e3 / raw_iters);
            bench_stats_text(a, sizeof(a), &raw_st);
            printf("  %-44s %s (host clock)\n", "", a);
        }
        printf("  %-44s %8.2f us per round trip%s\n", "gpuport put_with_signal + wait for reply",
               st->pingpong_us, st->pingpong_rc ? "  ERROR" : "");
        bench_stats_text(a, sizeof(a), &st->pingpong_st);
        printf("  %-44s %s (globaltimer)\n", "", a);
        bench_out_latency("ipc_pingpong_round_trip", 8, &st->pingpong_st,
                          raw_iters ? (st->shared ? "8 B cudaMemcpyPeerAsync + sync, same GPU"
                                                  : "8 B cudaMemcpyPeerAsync + sync to the peer")
                                    : NULL,
                          &raw_st, st->pingpong_rc ? 0 : -1);
    }
    return st->pingpong_rc ? 1 : 0;
}

/* The proxy service's cost while the job idles, and the first round trip
 * after the pause beside the busy one measured before. */
static int idle_proxy(state_t *st)
{
    const bench_gpu_env_t *env = st->env;
    gpuport_comm_stats_t s0, s1;
    uint64_t t0, ns = 0;
    double secs;
    int rc = 0;

    env->barrier(env->ctx);
    GK(gpuport_comm_stats(env->comm, &s0));
    t0 = host_ns();
    while (host_ns() - t0 < 2000000000ull)
        usleep(100000);
    GK(gpuport_comm_stats(env->comm, &s1));
    secs = (host_ns() - t0) / 1e9;
    k_pingpong<<<1, 1, 0, st->s>>>(st->k[0].dev, env->rank < env->peer, 1, st->d_ns, st->d_rc,
                                   NULL);
    if (bench_wait(st->s, st->d_ns, &ns, st->d_rc, &rc))
        return -1;
    if (env->report) {
        double proxy = 100.0 * (double)(s1.proxy_cpu_ns - s0.proxy_cpu_ns) / (secs * 1e9);
        double flusher = 100.0 * (double)(s1.flusher_cpu_ns - s0.flusher_cpu_ns) / (secs * 1e9);
        printf("\nIdle proxy (%.1f s without operations)\n", secs);
        printf("  CPU used while idle: proxy %.2f %% of a core, flusher %.2f %%\n", proxy, flusher);
        printf("  8 B round trip: first after idle %.2f us, busy mean %.2f us%s\n", ns / 1e3,
               st->pingpong_us, rc ? "  ERROR" : "");
        bench_out_value("idle_proxy_cpu", 0, "cpu", "% of a core", "total", proxy, 1, NULL, 0, -1);
        bench_out_value("idle_flusher_cpu", 0, "cpu", "% of a core", "total", flusher, 1, NULL, 0,
                        -1);
        bench_out_value("idle_first_round_trip", 8, "latency", "us", "once", rc ? 0 : ns / 1e3, 1,
                        "busy round trips (mean)", st->pingpong_us, rc ? 0 : -1);
    }
    return rc ? 1 : 0;
}

int bench_gp_bw(state_t *st, kind_t *k, uint64_t size, int both, int reps, double *gbs,
                int *failed_p)
{
    const bench_gpu_env_t *env = st->env;
    int sender = both || env->rank < env->peer;
    float ms = 0;
    int rc = 0;
    unsigned long long bad = 0;

    CK(cudaMemset(k->dst, 0, size));
    CK(cudaDeviceSynchronize());
    env->barrier(env->ctx);
    if (sender) {
        k_puts<<<1, 1, 0, st->s>>>(k->dev, size, 1, st->d_rc); /* warm */
        CK(cudaEventRecord(st->e0, st->s));
        k_puts<<<1, 1, 0, st->s>>>(k->dev, size, reps, st->d_rc);
        CK(cudaEventRecord(st->e1, st->s));
        CK(cudaEventSynchronize(st->e1));
        CK(cudaEventElapsedTime(&ms, st->e0, st->e1));
        CK(cudaMemcpy(&rc, st->d_rc, sizeof(int), cudaMemcpyDeviceToHost));
        *gbs = (double)size * reps / (ms / 1e3) / 1e9;
    }
    env->barrier(env->ctx);
    /* the receiver checks what arrived: the puts were flushed, so it is all
     * there (the default stream, which the copy back to the host follows) */
    if (both || env->rank > env->peer) {
        CK(cudaMemset(st->d_bad, 0, sizeof(*st->d_bad)));
        k_check<<<1024, 256>>>(k->dst, size, st->d_bad);
        CK(cudaMemcpy(&bad, st->d_bad, sizeof(bad), cudaMemcpyDeviceToHost));
    }
    if (rc || bad)
        *failed_p = 1;
    return 0;
}

/* The baseline: cudaMemcpyPeerAsync of `size` from k[0]'s source to this
 * process's buffer on the peer GPU, timed and checked there. Over tcp, the
 * raw staging copy instead: the source into pinned host memory and from
 * there into the same buffer, one after the other on one stream (the two
 * copies tcp's GPU path makes, without the socket between them). */
static int raw_bw(state_t *st, uint64_t size, int both, int reps, double *gbs, int *failed_p)
{
    const bench_gpu_env_t *env = st->env;
    int sender = both || env->rank < env->peer;
    float ms = 0;
    unsigned long long bad = 0;

    CK(cudaSetDevice(st->peer_gpu));
    CK(cudaMemset(st->raw_dst, 0, size));
    CK(cudaMemset(st->d_bad_peer, 0, sizeof(*st->d_bad_peer)));
    CK(cudaDeviceSynchronize());
    CK(cudaSetDevice(st->gpu));
    env->barrier(env->ctx);
    if (sender) {
        const unsigned char *src = st->k[0].src;
        for (int r = -1; r < reps; r++) {
            if (r == 0)
                CK(cudaEventRecord(st->e0, st->s));
            if (st->staging) {
                CK(cudaMemcpyAsync(st->staging, src, size, cudaMemcpyDeviceToHost, st->s));
                CK(cudaMemcpyAsync(st->raw_dst, st->staging, size, cudaMemcpyHostToDevice,
                                   st->s));
            } else {
                CK(cudaMemcpyPeerAsync(st->raw_dst, st->peer_gpu, src, st->gpu, size, st->s));
            }
        }
        CK(cudaEventRecord(st->e1, st->s));
        CK(cudaEventSynchronize(st->e1));
        CK(cudaEventElapsedTime(&ms, st->e0, st->e1));
        *gbs = (double)size * reps / (ms / 1e3) / 1e9;
        /* the baseline's bytes landed on the peer GPU: check them there */
        CK(cudaSetDevice(st->peer_gpu));
        k_check<<<1024, 256>>>(st->raw_dst, size, st->d_bad_peer);
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(&bad, st->d_bad_peer, sizeof(bad), cudaMemcpyDeviceToHost));
        CK(cudaSetDevice(st->gpu));
    }
    env->barrier(env->ctx);
    if (bad)
        *failed_p = 1;
    return 0;
}

typedef struct bw_row {
    double raw;   /* 0 without baselines */
    double gp[2]; /* per kind */
    int verified; /* both sides, every kind and the baseline */
    int reps;     /* puts (and copies) in the timed kernel */
} bw_row_t;

/* One size, one direction or both: every kind's puts and the raw copies. */
static int ipc_bw_size(state_t *st, uint64_t size, int both, bw_row_t *row)
{
    const bench_gpu_env_t *env = st->env;
    int reps = size >= (64u << 20) ? 10 : size >= (1u << 20) ? 50 : 200;
    int mine = 0, theirs = 0;

    memset(row, 0, sizeof(*row));
    reps = scaled(env, reps);
    row->reps = reps;
    for (int i = 0; i < st->nkinds; i++)
        if (bench_gp_bw(st, &st->k[i], size, both, reps, &row->gp[i], &mine))
            return -1;
    if (env->baselines && raw_bw(st, size, both, reps, &row->raw, &mine))
        return -1;
    env->exchange(env->ctx, &mine, &theirs, sizeof(mine));
    row->verified = !mine && !theirs;
    return row->verified ? 0 : 1;
}

static void size_name(char *buf, size_t len, uint64_t size)
{
    if (size >= (1u << 30))
        snprintf(buf, len, "%llu GiB", (unsigned long long)(size >> 30));
    else if (size >= (1u << 20))
        snprintf(buf, len, "%llu MiB", (unsigned long long)(size >> 20));
    else
        snprintf(buf, len, "%llu KiB", (unsigned long long)(size >> 10));
}

/* "12.3" or, where there was no measurement, "-" */
static const char *gbs_text(char *buf, size_t len, double v)
{
    if (v > 0)
        snprintf(buf, len, "%.1f", v);
    else
        snprintf(buf, len, "-");
    return buf;
}

/* a over b in per cent with `dec` decimals, or "-" */
static const char *pct_text(char *buf, size_t len, double a, double b, int dec)
{
    if (a > 0 && b > 0)
        snprintf(buf, len, "%.*f%%", dec, 100 * a / b);
    else
        snprintf(buf, len, "-");
    return buf;
}

/* The records of one size: each kind, each direction, beside the copies. */
static void bw_rows(const state_t *st, uint64_t size, const bw_row_t *r1, const bw_row_t *r2)
{
    const char *base = !st->env->baselines ? NULL
                       : st->staging ? "raw staging copy: cudaMemcpyAsync to pinned host memory, "
                                       "then from it, same size"
                       : st->shared  ? "cudaMemcpyPeerAsync, same size, within the GPU"
                                     : "cudaMemcpyPeerAsync, same size, to the peer GPU";

    for (int d = 0; d < 2; d++) {
        const bw_row_t *r = d ? r2 : r1;
        for (int i = 0; i < st->nkinds; i++) {
            bench_row_t row;
            memset(&row, 0, sizeof(row));
            row.measurement = d ? "ipc_put_bw_2way" : "ipc_put_bw_1way";
            row.size = size;
            row.metric = "bandwidth";
            row.unit = "GB/s";
            row.stat = "total";
            row.value = r->gp[i];
            row.samples = (uint64_t)r->reps;
            row.baseline = base;
            row.baseline_value = r->raw;
            row.baseline_samples = base ? (uint64_t)r->reps : 0;
            row.verified = r->verified;
            row.memory = st->k[i].name;
            bench_out_row(&row);
        }
    }
}

/* one kind: gpuport beside the baseline, one direction and both */
static void print_one(const char *sz, const bw_row_t *r1, const bw_row_t *r2)
{
    char a[16], b[16], c[16], d[16], e[16], f[16];
    printf("  %10s | %12s %12s %6s | %12s %12s %6s | %s\n", sz,
           gbs_text(a, sizeof(a), r1->gp[0]), gbs_text(b, sizeof(b), r1->raw),
           pct_text(c, sizeof(c), r1->gp[0], r1->raw, 0), gbs_text(d, sizeof(d), r2->gp[0]),
           gbs_text(e, sizeof(e), r2->raw), pct_text(f, sizeof(f), r2->gp[0], r2->raw, 0),
           r1->verified && r2->verified ? "yes" : "NO");
}

/* two kinds: baseline, the first kind, the second, second over first */
static void print_both(const char *sz, const bw_row_t *r1, const bw_row_t *r2)
{
    char t[8][16];
    printf("  %10s | %8s %10s %8s %7s | %8s %10s %8s %7s | %s\n", sz,
           gbs_text(t[0], 16, r1->raw), gbs_text(t[1], 16, r1->gp[0]),
           gbs_text(t[2], 16, r1->gp[1]), pct_text(t[3], 16, r1->gp[1], r1->gp[0], 1),
           gbs_text(t[4], 16, r2->raw), gbs_text(t[5], 16, r2->gp[0]),
           gbs_text(t[6], 16, r2->gp[1]), pct_text(t[7], 16, r2->gp[1], r2->gp[0], 1),
           r1->verified && r2->verified ? "yes" : "NO");
}

static int ipc_bandwidth(state_t *st)
{
    const bench_gpu_env_t *env = st->env;
    int fails = 0, both = st->nkinds == 2;
    uint64_t lo = env->min_size < 1024 ? 1024 : env->min_size;
    uint64_t hi = env->max_size > st->region ? st->region : env->max_size;
    /* the second kind against the first at >= 1 MiB: the largest difference,
     * either way */
    double worst = 0;
    uint64_t worst_size = 0;
    const char *worst_dir = "";
    char kinds[64], ratio[16];

    snprintf(kinds, sizeof(kinds), both ? "%s and %s memory" : "%s memory", st->k[0].name,
             both ? st->k[1].name : "");
    snprintf(ratio, sizeof(ratio), "%s/%s", both ? st->k[1].short_name : "",
             st->k[0].short_name);

    if (env->report) {
        if (st->staging)
            printf("\nIPC put bandwidth, %s (GB/s = 1e9 B/s; baseline: the raw staging copy, "
                   "cudaMemcpyAsync of the same size into pinned host memory, then from it "
                   "into a buffer %s, one stream)\n",
                   kinds, st->shared ? "on the same GPU" : "on the peer GPU");
        else
            printf("\nIPC put bandwidth, %s (GB/s = 1e9 B/s; baseline: cudaMemcpyPeerAsync of "
                   "the same size %s)\n",
                   kinds, st->shared ? "to another buffer on the same GPU" : "to the peer GPU");
        if (both)
            printf("  %10s | %8s %10s %8s %7s | %8s %10s %8s %7s | %s\n", "size", "memcpy",
                   st->k[0].name, st->k[1].name, ratio, "memcpy", st->k[0].name,
                   st->k[1].name, ratio, "verified");
        else
            printf("  %10s | %12s %12s %6s | %12s %12s %6s | %s\n", "size", "gpuport 1-way",
                   "memcpy 1-way", "ratio", "gpuport 2-way", "memcpy 2-way", "ratio",
                   "verified");
    }
    for (uint64_t size = lo; size <= hi; size *= 4) {
        bw_row_t r1, r2;
        char sz[32];
        int f1 = ipc_bw_size(st, size, 0, &r1), f2 = ipc_bw_size(st, size, 1, &r2);
        if (f1 < 0 || f2 < 0)
            return fails + 1;
        fails += f1 + f2;
        /* on a shared GPU the two directions take turns on it, and which
         * one gets the slice decides the 2-way figures (measured on one
         * H200: VMM over cudaMalloc 2-way from 0.52x to 1.9x in one run,
         * 1-way within 0.3 %): only 1-way compares the memory kinds there */
        for (int d = 0; both && size >= (1u << 20) && d < (st->shared ? 1 : 2); d++) {
            const bw_row_t *r = d ? &r2 : &r1;
            double diff = r->gp[0] > 0 ? r->gp[1] / r->gp[0] - 1 : 0;
            if (worst_size == 0 || fabs(diff) > fabs(worst)) {
                worst = diff;
                worst_size = size;
                worst_dir = d ? "2-way" : "1-way";
            }
        }
        if (env->report) {
            size_name(sz, sizeof(sz), size);
            /* both-direction figures: this rank's direction; the pair moves twice that */
            if (both)
                print_both(sz, &r1, &r2);
            else
                print_one(sz, &r1, &r2);
            bw_rows(st, size, &r1, &r2);
        }
    }
    if (env->report) {
        printf("  (2-way: rank %d's direction while both send at once", env->rank);
        if (both)
            printf("; left 1-way, right 2-way; %s: %s over %s)\n", ratio, st->k[1].name,
                   st->k[0].name);
        else
            fputs(")\n", stdout);
        if (both && worst_size) {
            char sz[32];
            size_name(sz, sizeof(sz), worst_size);
            printf("  %s against %s at >= 1 MiB%s: largest difference %+.1f %% (%s %s; "
                   "negative: %s slower); within 3 %%: %s\n",
                   st->k[1].name, st->k[0].name,
                   st->shared ? ", 1-way (a shared GPU's 2-way figures measure its time slices)"
                              : "",
                   100 * worst, sz, worst_dir, st->k[1].name, fabs(worst) <= 0.03 ? "yes" : "NO");
        }
    }
    return fails;
}

/* A kind's buffers, registrations and channel. */
static int kind_open(state_t *st, kind_t *k, int mem)
{
    const bench_gpu_env_t *env = st->env;

    k->mem = mem;
    switch (mem) {
    case BENCH_GPU_MEM_VMM:
        k->name = "VMM";
        k->short_name = "VMM";
        GK(gpuport_mem_alloc_device(env->comm, st->region, (void **)&k->src));
        GK(gpuport_mem_alloc_device(env->comm, st->region, (void **)&k->dst));
        break;
    case BENCH_GPU_MEM_POOL:
        k->name = "pool";
        k->short_name = "pool";
        if (!st->pool) {
            cudaMemPoolProps props;
            memset(&props, 0, sizeof(props));
            props.allocType = cudaMemAllocationTypePinned;
            props.handleTypes = cudaMemHandleTypePosixFileDescriptor;
            props.location.type = cudaMemLocationTypeDevice;
            CK(cudaGetDevice(&props.location.id));
            CK(cudaMemPoolCreate(&st->pool, &props));
        }
        CK(cudaMallocFromPoolAsync((void **)&k->src, st->region, st->pool, 0));
        CK(cudaMallocFromPoolAsync((void **)&k->dst, st->region, st->pool, 0));
        CK(cudaStreamSynchronize(0));
        break;
    default:
        k->name = "cudaMalloc";
        k->short_name = "cM";
        CK(cudaMalloc(&k->src, st->region));
        CK(cudaMalloc(&k->dst, st->region));
        break;
    }
    k_fill<<<1024, 256>>>(k->src, st->region);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    GK(gpuport_mem_register(env->comm, k->src, st->region, &k->msrc));
    GK(gpuport_mem_register(env->comm, k->dst, st->region, &k->mdst));
    GK(gpuport_channel_create(env->comm, env->peer, k->msrc, k->mdst, &k->ch));
    GK(gpuport_channel_device(k->ch, &k->dev));
    return 0;
}

static void kind_close(state_t *st, kind_t *k)
{
    const bench_gpu_env_t *env = st->env;

    gpuport_channel_destroy(k->ch);
    gpuport_mem_deregister(k->msrc);
    gpuport_mem_deregister(k->mdst);
    if (k->mem == BENCH_GPU_MEM_VMM) {
        gpuport_mem_free(env->comm, k->src);
        gpuport_mem_free(env->comm, k->dst);
    } else if (k->mem == BENCH_GPU_MEM_POOL) {
        /* the peer's imports go with its channel: free after it (barrier) */
        env->barrier(env->ctx);
        cudaFreeAsync(k->src, 0);
        cudaFreeAsync(k->dst, 0);
        cudaStreamSynchronize(0);
    } else {
        cudaFree(k->src);
        cudaFree(k->dst);
    }
}

/* a table's failures; a CUDA error (-1) counts as one */
static int failures(int rc)
{
    return rc < 0 ? 1 : rc;
}

/* What the run is on: the transport, the memory, the GPUs; printed and in
 * the records. */
static int run_header(state_t *st)
{
    cudaDeviceProp prop;
    char gpu[320];

    printf("\nGPU mode: transport %s, memory %s", gpuport_channel_transport(st->k[0].ch),
           st->k[0].name);
    if (st->nkinds == 2)
        printf(" and %s (bandwidth only)", st->k[1].name);
    printf(", ");
    if (st->shared)
        printf("ranks share GPU %d (%s)\n", st->gpu, bench_gpu_sharing());
    else
        printf("GPU %d, peer on GPU %d\n", st->gpu, st->peer_gpu);
    CK(cudaGetDeviceProperties(&prop, st->gpu));
    if (st->shared)
        snprintf(gpu, sizeof(gpu), "%s (GPU %d; the pair shares it)", prop.name, st->gpu);
    else
        snprintf(gpu, sizeof(gpu), "%s (GPU %d; peer on GPU %d)", prop.name, st->gpu,
                 st->peer_gpu);
    bench_out_context("gpu", gpu, st->env->nranks);
    bench_out_channel(gpuport_channel_transport(st->k[0].ch), st->k[0].name);
    return 0;
}

extern "C" int bench_gpu_run(const bench_gpu_env_t *env)
{
    state_t st;
    int fails = 0;

    memset(&st, 0, sizeof(st));
    st.env = env;
    st.region = env->max_size < (1u << 20) ? (1u << 20) : env->max_size;
    if (st.region > (1ull << 30))
        st.region = 1ull << 30;
    CK(cudaMalloc(&st.d_ns, 8));
    CK(cudaMalloc(&st.d_rc, sizeof(int)));
    CK(cudaMalloc(&st.d_bad, sizeof(*st.d_bad)));
    CK(cudaStreamCreateWithFlags(&st.s, cudaStreamNonBlocking));
    CK(cudaEventCreate(&st.e0));
    CK(cudaEventCreate(&st.e1));
    /* both ranks open their channels in the same order: cudaMalloc, VMM, pool */
    for (int bit = BENCH_GPU_MEM_CUDAMALLOC; bit <= BENCH_GPU_MEM_POOL; bit <<= 1) {
        if (!(env->mem & bit))
            continue;
        if (st.nkinds == 2) {
            fprintf(stderr, "gpuport_bench: at most two memory kinds at once (mem %d)\n",
                    env->mem);
            return -1;
        }
        if (kind_open(&st, &st.k[st.nkinds++], bit))
            return -1;
    }
    if (st.nkinds == 0) {
        fprintf(stderr, "gpuport_bench: no memory kind to run (mem %d)\n", env->mem);
        return -1;
    }
    /* the baseline writes a buffer this process allocates on the peer GPU
     * (on this one, where the pair shares it) */
    CK(cudaGetDevice(&st.gpu));
    env->exchange(env->ctx, &st.gpu, &st.peer_gpu, sizeof(int));
    st.shared = st.peer_gpu == st.gpu;
    if (env->baselines) {
        CK(cudaSetDevice(st.peer_gpu));
        CK(cudaMalloc(&st.raw_dst, st.region));
        CK(cudaMalloc(&st.d_bad_peer, sizeof(*st.d_bad_peer)));
        CK(cudaMemset(st.d_bad_peer, 0, sizeof(*st.d_bad_peer)));
        CK(cudaSetDevice(st.gpu));
        if (!st.shared && cudaDeviceEnablePeerAccess(st.peer_gpu, 0) != cudaSuccess)
            cudaGetLastError(); /* already enabled, or copies go through the host */
        if (strcmp(gpuport_channel_transport(st.k[0].ch), "tcp") == 0)
            CK(cudaMallocHost(&st.staging, st.region));
    }
    if (env->report && run_header(&st))
        return -1;
    if (env->bandwidth_only) {
        fails += failures(ipc_bandwidth(&st));
    } else if (env->backoff_only) {
        fails += failures(bench_backoff(&st));
    } else if (env->memchan_only) {
        fails += failures(bench_memchan(&st));
    } else {
        if (!env->small_only) {
            fails += failures(fifo_latency(&st));
            fails += failures(fifo_throughput(&st));
            fails += failures(ipc_pingpong(&st));
            fails += failures(idle_proxy(&st));
            fails += failures(ipc_bandwidth(&st));
        }
        fails += failures(bench_small(&st));
        if (!env->small_only) {
            fails += failures(bench_backoff(&st));
            fails += failures(bench_memchan(&st));
        }
    }

    env->barrier(env->ctx);
    for (int i = 0; i < st.nkinds; i++)
        kind_close(&st, &st.k[i]);
    if (st.pool)
        cudaMemPoolDestroy(st.pool);
    if (env->baselines) {
        cudaSetDevice(st.peer_gpu);
        cudaFree(st.raw_dst);
        cudaFree(st.d_bad_peer);
        cudaSetDevice(st.gpu);
        if (st.staging)
            cudaFreeHost(st.staging);
    }
    cudaFree(st.d_ns);
    cudaFree(st.d_rc);
    cudaFree(st.d_bad);
    cudaFree(st.d_samples);
    cudaStreamDestroy(st.s);
    return fails;
}
