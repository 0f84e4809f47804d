/*
 * Probe (not part of the library): what would a reduction kernel in the
 * flusher's private context cost, the way port channels could accumulate
 * into GPU memory without a kernel of the application's (docs/ARCHITECTURE.md,
 * "Reading and adding")? A private context (cuCtxCreate, as the flusher's)
 * launches dst[i] += src[i] over N floats and waits for it, 50 times,
 * (a) with the GPU otherwise idle, (b) while the application's context runs
 * one spinning block, the common case of a kernel that waits for a signal.
 * The same reduction launched in the application's own context on another
 * stream (c, beside the spinner) is the floor. Run it as is (contexts
 * time-slice) and under MPS (scripts/with-mps.sh). Build and run with
 * scripts/probes.sh.
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#define CK(x)                                                                                   \
    do {                                                                                        \
        CUresult r_ = (x);                                                                      \
        if (r_) {                                                                               \
            const char *s_ = "?";                                                               \
            cuGetErrorString(r_, &s_);                                                          \
            printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, s_);                               \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

__global__ void spin(volatile int *stop)
{
    while (!*stop)
        ;
}

__global__ void reduce(float *dst, const float *src, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dst[i] += src[i];
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* 50 launches + synchronizations of the reduction over n floats in the
 * current context; prints the median and the worst */
static void run(const char *what, size_t n)
{
    CUdeviceptr d, s;
    CUstream st;
    double t[50];

    CK(cuMemAlloc(&d, n * 4));
    CK(cuMemAlloc(&s, n * 4));
    CK(cuMemsetD32(d, 0, n));
    CK(cuMemsetD32(s, 0x3f800000u, n));
    CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    for (int i = 0; i < 50; i++) {
        double t0 = now_us();
        reduce<<<(unsigned)((n + 255) / 256 < 1024 ? (n + 255) / 256 : 1024), 256, 0, st>>>(
            (float *)d, (const float *)s, n);
        CK(cuStreamSynchronize(st));
        t[i] = now_us() - t0;
    }
    qsort(t, 50, sizeof(t[0]), cmp);
    printf("  %-52s %9zu floats: median %10.1f us, worst %10.1f us\n", what, n, t[25], t[49]);
    CK(cuStreamDestroy(st));
    CK(cuMemFree(d));
    CK(cuMemFree(s));
}

/* if the private context cannot run beside the spinner at all, (b) would
 * wait forever: the spinner is released after 20 s, and (b) shows it */
static int *g_stop;
static void *watchdog(void *arg)
{
    (void)arg;
    for (;;) {
        sleep(20);
        if (!*(volatile int *)g_stop) {
            printf("  (watchdog: the spinner ran 20 s; released)\n");
            *(volatile int *)g_stop = 1;
        }
    }
    return NULL;
}

int main(void)
{
    pthread_t wd;
    CUdevice dev;
    CUcontext app, priv;
    CUctxCreateParams params;
    CUstream spinner;
    int *stop;
    static const size_t sizes[] = {16, 256 * 1024};

    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&app, dev));
    CK(cuCtxSetCurrent(app));
    memset(&params, 0, sizeof(params));
    CK(cuCtxCreate(&priv, &params, 0, dev));
    CK(cuCtxSetCurrent(app));
    if (cudaHostAlloc((void **)&stop, sizeof(int), cudaHostAllocMapped) != cudaSuccess) {
        printf("cudaHostAlloc failed\n");
        return 1;
    }
    g_stop = stop;
    *stop = 1;
    pthread_create(&wd, NULL, watchdog, NULL);
    for (size_t k = 0; k < 2; k++) {
        CK(cuCtxSetCurrent(priv));
        run("(a) private context, GPU idle", sizes[k]);
        /* (b), (c): one spinning block of the application's */
        *stop = 0;
        CK(cuCtxSetCurrent(app));
        CK(cuStreamCreate(&spinner, CU_STREAM_NON_BLOCKING));
        spin<<<1, 1, 0, spinner>>>(stop);
        CK(cuCtxSetCurrent(priv));
        run("(b) private context, an application kernel spinning", sizes[k]);
        CK(cuCtxSetCurrent(app));
        run("(c) the application's context, beside its spinner", sizes[k]);
        *stop = 1;
        CK(cuStreamSynchronize(spinner));
        CK(cuStreamDestroy(spinner));
    }
    return 0;
}
