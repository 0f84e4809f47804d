/*
 * Probe (not part of the library): can a kernel's push wake a sleeping host
 * thread faster than polling finds it? A thread with a private context
 * waits with cuStreamWaitValue64 (GEQ) on a counter and a blocking-sync
 * event behind it; an application kernel, still running, bumps the counter
 * (atomicAdd on VMM memory, or a store to pinned host memory: argument
 * "host") 40 times, 2 or 20 ms apart. Reports the waiter's wake-up after
 * a busy-polling host thread saw the same write, and the waiter's CPU.
 * Argument "ctxflag": no blocking-sync event (the context's flag instead),
 * i.e. the driver's polling wait. Meanwhile another thread copies in the
 * private context every millisecond (its longest copy is printed). Build
 * and run with scripts/probes.sh.
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <atomic>
#include <algorithm>

#define CK(x) do { CUresult r_ = (x); if (r_) { const char *s; cuGetErrorString(r_, &s); fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, s); exit(1);} } while (0)
#define RK(x) do { cudaError_t r_ = (x); if (r_) { fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(r_)); exit(1);} } while (0)
static uint64_t now(clockid_t c = CLOCK_MONOTONIC) { struct timespec t; clock_gettime(c, &t); return t.tv_sec * 1000000000ull + t.tv_nsec; }

#define N 40
struct hostblk { volatile int go; volatile int stop; volatile unsigned long long echo; };
__global__ void pusher(unsigned long long *head, hostblk *h, int host_mode)
{
    int seen = 0;
    while (!h->stop) {
        int g = h->go;
        if (g != seen) {
            seen = g;
            if (host_mode) { *(volatile unsigned long long *)head = g; __threadfence_system(); }
            else { atomicAdd(head, 1ull); __threadfence_system(); }
            h->echo = g;
            __threadfence_system();
        }
    }
}
static CUcontext pctx; static CUdeviceptr head_d; static hostblk *hb; static int mode_host;
static uint64_t t_seen[N + 1], t_woken[N + 1], t_go[N + 1];
static std::atomic<int> waiter_done{0}; static uint64_t waiter_cpu; static int use_ctx_flag;
static volatile uint64_t side_max_ns; static std::atomic<int> side_stop{0};
static void *waiter(void *)
{
    CK(cuCtxSetCurrent(pctx));
    CUstream s; CUevent ev;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING | (use_ctx_flag ? 0 : CU_EVENT_BLOCKING_SYNC)));
    uint64_t c0 = now(CLOCK_THREAD_CPUTIME_ID);
    for (int i = 1; i <= N; i++) {
        CK(cuStreamWaitValue64(s, head_d, i, CU_STREAM_WAIT_VALUE_GEQ));
        CK(cuEventRecord(ev, s));
        CK(cuEventSynchronize(ev));
        t_woken[i] = now();
    }
    waiter_cpu = now(CLOCK_THREAD_CPUTIME_ID) - c0;
    waiter_done = 1;
    return NULL;
}
static void *busy(void *)
{
    for (int i = 1; i <= N; i++) { while (hb->echo < (unsigned long long)i) ; t_seen[i] = now(); }
    return NULL;
}
static void *side(void *)  /* a "flusher" issuing copies in the private ctx meanwhile */
{
    CK(cuCtxSetCurrent(pctx));
    CUstream s; CUdeviceptr a; CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING)); CK(cuMemAlloc(&a, 4096));
    uint64_t mx = 0;
    while (!side_stop) {
        uint64_t t0 = now();
        CK(cuMemcpyDtoDAsync(a + 2048, a, 64, s));
        while (cuStreamQuery(s) == CUDA_ERROR_NOT_READY) ;
        uint64_t d = now() - t0; if (d > mx) mx = d;
        usleep(1000);
    }
    side_max_ns = mx;
    return NULL;
}
int main(int argc, char **argv)
{
    mode_host = argc > 1 && !strcmp(argv[1], "host");
    use_ctx_flag = argc > 2 && !strcmp(argv[2], "ctxflag");
    RK(cudaSetDevice(0)); RK(cudaFree(0));
    CUdevice dev; CK(cuDeviceGet(&dev, 0));
    int a64 = 0, wv = 0; cuDeviceGetAttribute(&a64, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, dev);
    cuDeviceGetAttribute(&wv, CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR, dev);
    printf("mode %s, event %s; 64-bit memops %d, wait NOR %d\n", mode_host ? "pinned-host store" : "VMM atomicAdd", use_ctx_flag ? "ctx BLOCKING_SYNC" : "event BLOCKING_SYNC", a64, wv);
    RK(cudaHostAlloc((void **)&hb, 4096, cudaHostAllocPortable | cudaHostAllocMapped));
    memset((void *)hb, 0, 4096);
    unsigned long long *head_app;
    if (mode_host) {
        head_app = (unsigned long long *)((char *)hb + 1024);
        head_d = (CUdeviceptr)head_app; /* UVA: same address */
    } else {
        CUmemAllocationProp p; memset(&p, 0, sizeof(p));
        p.type = CU_MEM_ALLOCATION_TYPE_PINNED; p.location.type = CU_MEM_LOCATION_TYPE_DEVICE; p.location.id = 0;
        size_t g; CK(cuMemGetAllocationGranularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
        CUmemGenericAllocationHandle h; CK(cuMemCreate(&h, g, &p, 0));
        CK(cuMemAddressReserve(&head_d, g, 0, 0, 0)); CK(cuMemMap(head_d, g, 0, h, 0));
        CUmemAccessDesc ad; ad.location = p.location; ad.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        CK(cuMemSetAccess(head_d, g, &ad, 1));
        RK(cudaMemset((void *)head_d, 0, 8)); RK(cudaDeviceSynchronize());
        head_app = (unsigned long long *)head_d;
    }
    CK(cuCtxCreate(&pctx, NULL, use_ctx_flag ? CU_CTX_SCHED_BLOCKING_SYNC : 0, dev));
    CUcontext prim; RK(cudaSetDevice(0)); cuCtxGetCurrent(&prim);
    RK(cudaSetDevice(0));
    { CUcontext pc; CK(cuDevicePrimaryCtxRetain(&pc, dev)); CK(cuCtxSetCurrent(pc)); }
    hostblk *hb_d; RK(cudaHostGetDevicePointer((void **)&hb_d, (void *)hb, 0));
    pusher<<<1, 1>>>(head_app, hb_d, mode_host);
    RK(cudaGetLastError());
    usleep(200000);
    pthread_t tw, tb, ts;
    pthread_create(&tw, NULL, waiter, NULL); pthread_create(&tb, NULL, busy, NULL); pthread_create(&ts, NULL, side, NULL);
    usleep(100000);
    uint64_t w0 = now();
    for (int i = 1; i <= N; i++) {
        usleep(i % 2 ? 20000 : 2000);
        t_go[i] = now(); hb->go = i; __sync_synchronize();
        uint64_t dl = now() + 2000000000ull;
        while (hb->echo < (unsigned long long)i && now() < dl) ;
        if (hb->echo < (unsigned long long)i) { printf("kernel did not echo %d\n", i); break; }
        uint64_t dl2 = now() + 500000000ull;
        while (!t_woken[i] && now() < dl2) usleep(100);
        if (!t_woken[i]) { printf("waiter not woken for %d within 500 ms (kernel running)\n", i); hb->stop = 1; break; }
    }
    uint64_t wall = now() - w0;
    hb->stop = 1; __sync_synchronize();
    RK(cudaDeviceSynchronize());
    side_stop = 1; pthread_join(ts, NULL); pthread_join(tb, NULL);
    if (!waiter_done) { printf("waiter stuck; stopping\n"); return 1; }
    pthread_join(tw, NULL);
    double lat[N], lat2[N]; int n = 0;
    for (int i = 1; i <= N; i++) if (t_woken[i] && t_seen[i]) { lat[n] = ((double)t_woken[i] - (double)t_seen[i]) / 1e3; lat2[n] = ((double)t_woken[i] - (double)t_go[i]) / 1e3; n++; }
    std::sort(lat, lat + n); std::sort(lat2, lat2 + n);
    printf("wakes %d: woken - busy-seen: min %.1f median %.1f max %.1f us; woken - go: min %.1f median %.1f max %.1f us\n", n, lat[0], lat[n / 2], lat[n - 1], lat2[0], lat2[n / 2], lat2[n - 1]);
    printf("waiter CPU %.1f us total over %.1f ms wall (%.2f %%), %.1f us per wake; side copy max %.1f us\n", waiter_cpu / 1e3, wall / 1e6, 100.0 * waiter_cpu / wall, waiter_cpu / 1e3 / N, side_max_ns / 1e3);
    return 0;
}
