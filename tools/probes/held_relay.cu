/*
 * Probe (not part of the library): the held pattern with cudaMalloc memory
 * at BOTH ends. Each of two processes has a thread in a synchronous
 * cudaMemcpy behind a spinning kernel (as test_gpu_held's "held" case), and
 * a flusher thread with a private context of its own that copies while
 * both are held. Which copies does CUDA hold until the kernels end?
 *   push    own app src (cudaMalloc) -> peer's dst (IPC mapping): gpuport today
 *   pull    peer's src (IPC mapping) -> own app dst (cudaMalloc)
 *   stage   peer's src (IPC mapping) -> own staging (private-context memory)
 *   relay   peer's staging (IPC mapping) -> peer's dst (IPC mapping)
 * In stage, each process X pulls its peer P's source into X's staging; in
 * relay, X pushes P's staging (which holds X's source) into P's
 * destination. After both, each destination holds the other process's
 * source (cleared before each step):
 * checked byte for byte once the kernels ended. If stage and relay are not
 * held, a put from a cudaMalloc source to a cudaMalloc destination has a
 * path no host thread in cudaMemcpy holds: the receiver's flusher pulls
 * into its staging, the sender's flusher pushes from there.
 * Two processes, fork before any CUDA call, a pipe each way. Build and run
 * with scripts/probes.sh.
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SIZE (1 << 20)
#define RK(x) do { cudaError_t r_ = (x); if (r_) { printf("%d: %s:%d %s: %s\n", me, __FILE__, __LINE__, #x, cudaGetErrorString(r_)); exit(1); } } while (0)
#define CK(x) do { CUresult r_ = (x); if (r_) { const char *e_ = "?"; cuGetErrorString(r_, &e_); printf("%d: %s:%d %s: %s\n", me, __FILE__, __LINE__, #x, e_); exit(1); } } while (0)

static int me;
static int rd, wr; /* pipe ends to the peer */
static double now_ms(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e3 + t.tv_nsec / 1e6; }
static unsigned char pat(int who, int i) { return (unsigned char)(who * 101 + i * 13 + (i >> 9)); }
__global__ void fill(unsigned char *p, int who) { for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < SIZE; i += gridDim.x * blockDim.x) p[i] = (unsigned char)(who * 101 + i * 13 + (i >> 9)); }
__global__ void spin(volatile int *stop, int *out) { while (!*stop) ; *out = 7; }
static void xwrite(const void *b, size_t n) { if (write(wr, b, n) != (ssize_t)n) { perror("write"); exit(1); } }
static void xread(void *b, size_t n) { size_t got = 0; while (got < n) { ssize_t r = read(rd, (char *)b + got, n - got); if (r <= 0) { perror("read"); exit(1); } got += (size_t)r; } }

enum { PUSH, PULL, STAGE, RELAY, NKINDS };
static const char *kname[] = {"push: own cudaMalloc src -> peer dst (IPC)",
                              "pull: peer src (IPC) -> own cudaMalloc dst",
                              "stage: peer src (IPC) -> own private staging",
                              "relay: peer staging (IPC) -> peer dst (IPC)"};

static unsigned char *src, *dst;     /* the application's cudaMalloc memory */
static CUcontext fctx;                /* the flusher's private context */
static CUdeviceptr stg;               /* staging in it */
static CUdeviceptr psrc, pdst, pstg;  /* the peer's, opened in it */
static CUstream fs;
static int kind;
static double call_ms, done_ms;

static void *flusher(void *)
{
    CK(cuCtxSetCurrent(fctx));
    usleep(150000); /* the application's thread is in cudaMemcpy by now */
    CUdeviceptr d = 0, s = 0;
    switch (kind) {
    case PUSH: d = pdst; s = (CUdeviceptr)src; break;
    case PULL: d = (CUdeviceptr)dst; s = psrc; break;
    case STAGE: d = stg; s = psrc; break;
    case RELAY: d = pdst; s = pstg; break;
    }
    double t0 = now_ms();
    CK(cuMemcpyAsync(d, s, SIZE, fs));
    call_ms = now_ms() - t0;
    while (cuStreamQuery(fs) == CUDA_ERROR_NOT_READY)
        ;
    done_ms = now_ms() - t0;
    return NULL;
}

static volatile int *stop;
static void *releaser(void *) { usleep(2000000); *stop = 1; __sync_synchronize(); return NULL; }

static int run(void)
{
    int *out, pageable[4];
    cudaIpcMemHandle_t h[3], ph[3];
    CUdevice dev;
    unsigned char *host = (unsigned char *)malloc(SIZE);

    RK(cudaSetDevice(0));
    RK(cudaMalloc((void **)&src, SIZE)); RK(cudaMalloc((void **)&dst, SIZE)); RK(cudaMalloc((void **)&out, 64));
    RK(cudaHostAlloc((void **)&stop, 64, cudaHostAllocMapped | cudaHostAllocPortable));
    CK(cuDeviceGet(&dev, 0));
    CK(cuCtxCreate(&fctx, NULL, 0, dev));
    CK(cuMemAlloc(&stg, SIZE));
    CK(cuStreamCreate(&fs, CU_STREAM_NON_BLOCKING));
    CK(cuIpcGetMemHandle((CUipcMemHandle *)&h[2], stg));
    CK(cuCtxPopCurrent(NULL)); /* the primary context is current again */
    RK(cudaIpcGetMemHandle(&h[0], src)); RK(cudaIpcGetMemHandle(&h[1], dst));
    xwrite(h, sizeof(h)); xread(ph, sizeof(ph));
    CK(cuCtxPushCurrent(fctx));
    CK(cuIpcOpenMemHandle(&psrc, *(CUipcMemHandle *)&ph[0], CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    CK(cuIpcOpenMemHandle(&pdst, *(CUipcMemHandle *)&ph[1], CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    CK(cuIpcOpenMemHandle(&pstg, *(CUipcMemHandle *)&ph[2], CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    CK(cuCtxPopCurrent(NULL));
    RK(cudaSetDevice(0));
    fill<<<64, 256>>>(src, me); RK(cudaMemset(dst, 0, SIZE)); RK(cudaDeviceSynchronize());
    if (me == 0)
        printf("held_relay: both processes' threads in cudaMemcpy (pageable) behind a 2 s kernel; "
               "each one's flusher (private context) copies 1 MiB:\n");
    for (kind = 0; kind < NKINDS; kind++) {
        pthread_t rel, fl;
        char go = 1;
        RK(cudaMemset(dst, 0, SIZE)); RK(cudaDeviceSynchronize());
        xwrite(&go, 1); xread(&go, 1); /* both start together */
        *stop = 0; __sync_synchronize();
        spin<<<1, 1>>>((int *)stop, out);
        pthread_create(&rel, NULL, releaser, NULL);
        pthread_create(&fl, NULL, flusher, NULL);
        double t0 = now_ms();
        RK(cudaMemcpy(pageable, out, 4, cudaMemcpyDeviceToHost));
        double blocked = now_ms() - t0;
        pthread_join(rel, NULL); pthread_join(fl, NULL);
        RK(cudaDeviceSynchronize());
        char line[300];
        snprintf(line, sizeof(line), "  [%d] %-46s (app returned after %6.1f ms): call %7.2f ms, done %7.2f ms%s\n",
                 me, kname[kind], blocked, call_ms, done_ms, done_ms > 1700 ? "  <-- HELD until the kernel ended" : "");
        if (me == 1) { xwrite(line, sizeof(line)); }
        else { char other[300]; xread(other, sizeof(other)); fputs(line, stdout); fputs(other, stdout); fflush(stdout); }
    }
    /* relay, the last step, filled dst (cleared before it) with the peer's source */
    RK(cudaMemcpy(host, dst, SIZE, cudaMemcpyDeviceToHost));
    int ok = 1;
    for (int i = 0; i < SIZE; i++)
        ok &= host[i] == pat(1 - me, i);
    char go = 1;
    xwrite(&go, 1); xread(&go, 1);
    printf("  [%d] destination after the relay: %s\n", me, ok ? "the peer's source, every byte" : "WRONG");
    xwrite(&go, 1); xread(&go, 1);
    CK(cuCtxPushCurrent(fctx));
    cuIpcCloseMemHandle(psrc); cuIpcCloseMemHandle(pdst); cuIpcCloseMemHandle(pstg);
    return ok ? 0 : 1;
}

int main(void)
{
    int a[2], b[2];

    if (pipe(a) || pipe(b)) { perror("pipe"); return 1; }
    pid_t pid = fork();
    if (pid == 0) {
        me = 1; rd = a[0]; wr = b[1];
        return run();
    }
    me = 0; rd = b[0]; wr = a[1];
    int rc = run();
    int status = 0;
    waitpid(pid, &status, 0);
    return rc ? rc : WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
