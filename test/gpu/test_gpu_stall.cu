/*
 * Launch-queue stall regression (docs/DESIGN.md, hazards H1-H3). Two processes on
 * two GPUs; in each, one kernel performs `iters` put_with_signal + wait
 * exchanges with the other process, and right behind it, on the same stream,
 * the host enqueues `queued` more kernels. A proxy that issued its copies in
 * the application's context would hang here (cold start, false
 * serialization with CUDA_DEVICE_MAX_CONNECTIONS=1, or a blocked
 * cudaMemcpyAsync once ~1,020 launches are queued); gpuport's flusher works
 * in its own context, so every run must complete with correct data.
 *
 * Options: --queued N, --reps R (runs in this process), --warmup (one
 * exchange before the measured runs), --graph (capture the exchange kernel in
 * a CUDA graph and replay it), --blocks B (one channel per block), --iters I,
 * --expect-hazard (prove the hazard exists: a cudaMemcpyAsync on another
 * stream of the application's context, issued during the scenario, must
 * block until the queue drains), --watchdog S.
 * A watchdog turns a hang into a failure that prints where each block was.
 */
#include <atomic>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpu_check.h"
#include "gpu_pair.h"
#include "gpuport/gpuport_device.h"

#define MAX_BLOCKS 64

typedef struct opts {
    int queued, reps, warmup, graph, blocks, iters, expect_hazard, watchdog_s;
} opts_t;

typedef struct shared_host {  /* pinned, mapped: kernels report here */
    volatile unsigned long long progress[MAX_BLOCKS];
    volatile int done;
    volatile int finished_blocks;
} shared_host_t;

__global__ void noop(void)
{
}

__global__ void exchange(const gpuport_port_channel_dev_t *chs, uint64_t *src,
                         const volatile uint64_t *dst, int rank, int iters,
                         unsigned long long *base_p, int *errors, int *status,
                         shared_host_t *host, unsigned int *finished)
{
    int b = blockIdx.x;
    gpuport_port_channel_dev_t ch = chs[b];
    unsigned long long base = *(volatile unsigned long long *)base_p;
    int st = 0;

    for (int i = 0; i < iters; i++) {
        /* Double buffer: the put of exchange i may still be reading its slot
         * when exchange i+1 writes; by exchange i+2 the wait of i+1 has
         * returned, and the peer sent that signal only after receiving ours
         * of exchange i, which followed our copy on the flusher's stream. */
        int slot = b * 2 + (i & 1);
        uint64_t v = ((base + i) << 16) | ((uint64_t)rank << 8) | (uint64_t)b;
        src[slot] = v;
        __threadfence_system();
        st = gpuport_put_with_signal(&ch, slot * 8ull, slot * 8ull, 8);
        if (!st)
            st = gpuport_wait(&ch);
        if (st)
            break;
        if (dst[slot] != (((base + i) << 16) | ((uint64_t)(1 - rank) << 8) | (uint64_t)b))
            atomicAdd(errors, 1);
        host->progress[b] = base + i + 1;
    }
    if (st)
        status[b] = st;
    __threadfence();
    if (atomicAdd(finished, 1u) == gridDim.x - 1) {
        *finished = 0;
        *base_p = base + iters;
        __threadfence_system();
        host->done = 1;
    }
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct {
    int rank;
    opts_t *o;
    shared_host_t *host;
    std::atomic<int> launched;
    std::atomic<int> phase; /* 0 idle, 1 running a rep */
    std::atomic<uint64_t> rep_start;
    std::atomic<int> rep;
    const char *what;
} g;

/* Any rep that outlives the limit is a hang: say where, and fail. */
static void *watchdog(void *arg)
{
    (void)arg;
    for (;;) {
        usleep(100000);
        if (g.phase.load() != 1)
            continue;
        if (now_ns() - g.rep_start.load() < (uint64_t)g.o->watchdog_s * 1000000000ull)
            continue;
        fprintf(stderr, "rank %d: HANG in %s rep %d after %d s: %d of %d queued kernels "
                "launched; exchange progress per block:", g.rank, g.what, g.rep.load(),
                g.o->watchdog_s, g.launched.load(), g.o->queued);
        for (int b = 0; b < g.o->blocks; b++)
            fprintf(stderr, " [%d] %llu", b, (unsigned long long)g.host->progress[b]);
        fprintf(stderr, " (cumulative count of exchanges)\n");
        _exit(2);
    }
    return NULL;
}

typedef struct hazard {
    cudaStream_t other;
    void *hbuf, *dbuf;
    std::atomic<int> go;
    uint64_t call_ns;
    int done_when_returned;
} hazard_t;

/* Issues an 8-byte copy on another stream of the application's context once
 * the main thread is stuck in a launch (the queue is full: no launch has
 * returned for 5 ms, with more to go), and times the call. */
static void *hazard_probe(void *arg)
{
    hazard_t *h = (hazard_t *)arg;
    uint64_t t0, since;
    int last = -1;
    while (!h->go.load())
        ;
    t0 = since = now_ns();
    while (now_ns() - t0 < 1000000000ull) {
        int n = g.launched.load();
        if (n != last) {
            last = n;
            since = now_ns();
        } else if (n >= 1000 && n < g.o->queued && now_ns() - since > 5000000ull) {
            break;
        }
        usleep(50);
    }
    t0 = now_ns();
    CUDA_CHECK(cudaMemcpyAsync(h->dbuf, h->hbuf, 8, cudaMemcpyHostToDevice, h->other));
    h->call_ns = now_ns() - t0;
    h->done_when_returned = g.host->done;
    return NULL;
}

int main(int argc, char **argv)
{
    opts_t o = {100, 1, 0, 0, 1, 10000, 0, 120};
    gpuport_bootstrap_t bs;
    pid_t child;
    int rank, failures = 0;

    setvbuf(stdout, NULL, _IONBF, 0);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : "0";
        if (!strcmp(a, "--queued")) o.queued = atoi(v), i++;
        else if (!strcmp(a, "--reps")) o.reps = atoi(v), i++;
        else if (!strcmp(a, "--blocks")) o.blocks = atoi(v), i++;
        else if (!strcmp(a, "--iters")) o.iters = atoi(v), i++;
        else if (!strcmp(a, "--watchdog")) o.watchdog_s = atoi(v), i++;
        else if (!strcmp(a, "--warmup")) o.warmup = 1;
        else if (!strcmp(a, "--graph")) o.graph = 1;
        else if (!strcmp(a, "--expect-hazard")) o.expect_hazard = 1;
        else {
            fprintf(stderr, "unknown option %s\n", a);
            return 2;
        }
    }
    CHECK(o.blocks >= 1 && o.blocks <= MAX_BLOCKS && o.reps >= 1 && o.iters >= 1);
    setenv("GPUPORT_TIMEOUT_MS", "60000", 0); /* a run may ask for less */
    printf("test_gpu_stall: transport %s, memory %s\n",
           getenv("GPUPORT_TRANSPORT") ? getenv("GPUPORT_TRANSPORT") : "auto",
           gpu_mem_kind_desc(gpu_mem_kind()));
    rank = gpu_pair_fork(&bs, &child);
    g.rank = rank;
    g.o = &o;
    g.what = o.graph ? "graph replay" : "kernel";

    gpuport_comm_t comm;
    uint64_t *src, *dst;
    gpuport_mem_t msrc, mdst;
    gpuport_channel_t chs[MAX_BLOCKS];
    gpuport_port_channel_dev_t hdev[MAX_BLOCKS], *ddev;
    unsigned long long *base;
    unsigned int *finished;
    int *errors, *status;
    cudaStream_t s;
    pthread_t wd;

    CHECK_OK(gpuport_comm_create(&bs, &comm));
    gpu_region_alloc(comm, 16 * MAX_BLOCKS, (void **)&src);
    gpu_region_alloc(comm, 16 * MAX_BLOCKS, (void **)&dst);
    CUDA_CHECK(cudaMemset(dst, 0, 16 * MAX_BLOCKS));
    CHECK_OK(gpuport_mem_register(comm, src, 16 * MAX_BLOCKS, &msrc));
    CHECK_OK(gpuport_mem_register(comm, dst, 16 * MAX_BLOCKS, &mdst));
    for (int b = 0; b < o.blocks; b++) {
        CHECK_OK(gpuport_channel_create(comm, 1 - rank, msrc, mdst, &chs[b]));
        CHECK_OK(gpuport_channel_device(chs[b], &hdev[b]));
    }
    CUDA_CHECK(cudaMalloc(&ddev, sizeof(hdev)));
    CUDA_CHECK(cudaMemcpy(ddev, hdev, sizeof(hdev), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMalloc(&base, sizeof(*base)));
    CUDA_CHECK(cudaMalloc(&finished, sizeof(*finished)));
    CUDA_CHECK(cudaMalloc(&errors, sizeof(int)));
    CUDA_CHECK(cudaMalloc(&status, sizeof(int) * MAX_BLOCKS));
    CUDA_CHECK(cudaMemset(base, 0, sizeof(*base)));
    CUDA_CHECK(cudaMemset(finished, 0, sizeof(*finished)));
    CUDA_CHECK(cudaMemset(errors, 0, sizeof(int)));
    CUDA_CHECK(cudaMemset(status, 0, sizeof(int) * MAX_BLOCKS));
    CUDA_CHECK(cudaHostAlloc(&g.host, sizeof(shared_host_t), cudaHostAllocMapped));
    memset((void *)g.host, 0, sizeof(shared_host_t));
    shared_host_t *host_d;
    CUDA_CHECK(cudaHostGetDevicePointer((void **)&host_d, (void *)g.host, 0));
    CUDA_CHECK(cudaStreamCreate(&s));
    CUDA_CHECK(cudaDeviceSynchronize());
    pthread_create(&wd, NULL, watchdog, NULL);

    hazard_t hz;
    memset((void *)&hz, 0, sizeof(hz));
    if (o.expect_hazard) {
        CUDA_CHECK(cudaStreamCreateWithFlags(&hz.other, cudaStreamNonBlocking));
        CUDA_CHECK(cudaHostAlloc(&hz.hbuf, 8, 0));
        CUDA_CHECK(cudaMalloc(&hz.dbuf, 8));
    }

    cudaGraphExec_t exec = NULL;
    int total = o.reps + o.warmup;
    for (int rep = 0; rep < total; rep++) {
        int warm = rep < o.warmup;
        int queued = warm ? 0 : o.queued;
        pthread_t probe;
        int probing = o.expect_hazard && !warm;

        CHECK_OK(bs.barrier(bs.ctx));
        g.host->done = 0;
        g.launched = 0;
        g.rep = rep;
        g.rep_start = now_ns();
        g.phase = 1;
        if (probing) {
            hz.go = 0;
            pthread_create(&probe, NULL, hazard_probe, &hz);
        }
        if (o.graph) {
            if (!exec) {
                /* captured once, cold, inside the scenario; replayed after */
                cudaGraph_t graph;
                CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
                exchange<<<o.blocks, 1, 0, s>>>(ddev, src, dst, rank, o.iters, base, errors,
                                                status, host_d, finished);
                CUDA_CHECK(cudaStreamEndCapture(s, &graph));
                CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
                CUDA_CHECK(cudaGraphDestroy(graph));
            }
            CUDA_CHECK(cudaGraphLaunch(exec, s));
        } else {
            exchange<<<o.blocks, 1, 0, s>>>(ddev, src, dst, rank, o.iters, base, errors, status,
                                            host_d, finished);
        }
        CUDA_CHECK(cudaGetLastError());
        if (probing)
            hz.go = 1;
        for (int k = 0; k < queued; k++) {
            noop<<<1, 1, 0, s>>>();
            g.launched++;
        }
        CUDA_CHECK(cudaStreamSynchronize(s));
        g.phase = 0;
        if (probing) {
            pthread_join(probe, NULL);
            CUDA_CHECK(cudaStreamSynchronize(hz.other));
            /* the hazard: the copy call could not return before the queue
             * drained, and the queue drained only once the exchange ended */
            CHECK_MSG(hz.done_when_returned && hz.call_ns > 1000000ull,
                      "expected cudaMemcpyAsync to block until the queue drained: it took %.3f ms "
                      "and the exchange was %s when it returned (is CUDA_DEVICE_MAX_CONNECTIONS=1 "
                      "set and --queued above ~1020?)",
                      hz.call_ns / 1e6, hz.done_when_returned ? "done" : "still running");
            if (rank == 0)
                printf("  hazard present: cudaMemcpyAsync on another stream blocked %.1f ms, until "
                       "the exchange ended\n", hz.call_ns / 1e6);
        }
        if (!warm && rank == 0)
            printf("  rep %d: %d exchanges x %d blocks then %d queued kernels: %.1f ms\n", rep,
                   o.iters, o.blocks, queued, (now_ns() - g.rep_start.load()) / 1e6);
    }
    int herr = 0, hst[MAX_BLOCKS];
    CUDA_CHECK(cudaMemcpy(&herr, errors, sizeof(int), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(hst, status, sizeof(int) * MAX_BLOCKS, cudaMemcpyDeviceToHost));
    if (herr) {
        fprintf(stderr, "rank %d: %d exchanges carried wrong data\n", rank, herr);
        failures++;
    }
    for (int b = 0; b < o.blocks; b++) {
        if (hst[b]) {
            fprintf(stderr, "rank %d block %d: %s\n", rank, b,
                    gpuport_status_string((gpuport_status_t)hst[b]));
            failures++;
        }
    }
    CHECK_OK(bs.barrier(bs.ctx));
    CHECK_OK(gpuport_comm_destroy(comm));
    gpu_pair_join(rank, child, failures ? 1 : 0);
    CHECK(failures == 0);
    printf("PASS stall: queued %d, reps %d%s%s, blocks %d, CUDA_DEVICE_MAX_CONNECTIONS=%s\n",
           o.queued, o.reps, o.warmup ? " (warm)" : " (cold)", o.graph ? ", graph" : "", o.blocks,
           getenv("CUDA_DEVICE_MAX_CONNECTIONS") ? getenv("CUDA_DEVICE_MAX_CONNECTIONS")
                                                 : "default");
    return 0;
}
