/*
 * Probe (not part of the library): is a copy out of an application's
 * cudaMalloc memory held while that application's thread sits in a
 * synchronous cudaMemcpy, when the copy is made by ANOTHER process (the
 * peer's flusher pulling through its IPC mapping) rather than by a second
 * context of the same process (held: tools/probes/held_copy.cu,
 * docs/ARCHITECTURE.md, "a copy held by CUDA")? If the pull is not held,
 * the held pattern with cudaMalloc sources has a way out: the receiver's
 * flusher copies from the sender's memory.
 * Two processes (fork before any CUDA call, a pipe each way): A, the
 * application, cudaMalloc's 1 MiB, fills it, hands its IPC handle to B,
 * launches a kernel that spins until a releaser thread stops it after
 * 2 s, and goes into one of the calls below. B opens the handle in a
 * private context of its own (as gpuport's flusher) and, 100 ms after A's
 * call began, copies the 1 MiB out with cuMemcpyDtoDAsync into its own
 * memory, then checks the bytes. A copy that ends only when the kernel did
 * is marked held. Build and run with scripts/probes.sh.
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
#define RK(x) do { cudaError_t r_ = (x); if (r_) { printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(r_)); exit(1); } } while (0)
#define CK(x) do { CUresult r_ = (x); if (r_) { const char *e_ = "?"; cuGetErrorString(r_, &e_); printf("B: %s:%d %s: %s\n", __FILE__, __LINE__, #x, e_); exit(1); } } while (0)

static double now_ms(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e3 + t.tv_nsec / 1e6; }
static unsigned char pat(int i) { return (unsigned char)(i * 13 + (i >> 9)); }
__global__ void fill(unsigned char *p) { for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < SIZE; i += gridDim.x * blockDim.x) p[i] = (unsigned char)(i * 13 + (i >> 9)); }
__global__ void spin(volatile int *stop, int *out) { while (!*stop) ; *out = 7; }

static void xwrite(int fd, const void *b, size_t n) { if (write(fd, b, n) != (ssize_t)n) { perror("write"); exit(1); } }
static void xread(int fd, void *b, size_t n) { size_t got = 0; while (got < n) { ssize_t r = read(fd, (char *)b + got, n - got); if (r <= 0) { perror("read"); exit(1); } got += (size_t)r; } }

typedef struct { double call_ms, done_ms; int bytes_ok; } result_t;

/* B: the peer's flusher, pulling */
static int puller(int in, int out, int modes)
{
    cudaIpcMemHandle_t h;
    CUdevice dev; CUcontext ctx; CUdeviceptr src, dst; CUstream s;
    unsigned char *host = (unsigned char *)malloc(SIZE);

    xread(in, &h, sizeof(h));
    CK(cuInit(0)); CK(cuDeviceGet(&dev, 0));
    CK(cuCtxCreate(&ctx, NULL, 0, dev)); /* a private context, as gpuport's flusher's */
    CK(cuIpcOpenMemHandle(&src, *(CUipcMemHandle *)&h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    CK(cuMemAlloc(&dst, SIZE));
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    char go = 1;
    xwrite(out, &go, 1);
    for (int m = 0; m < modes; m++) {
        result_t r;
        xread(in, &go, 1);
        usleep(100000);
        CK(cuMemsetD8(dst, 0, SIZE)); CK(cuCtxSynchronize());
        double t0 = now_ms();
        CK(cuMemcpyDtoDAsync(dst, src, SIZE, s));
        r.call_ms = now_ms() - t0;
        while (cuStreamQuery(s) == CUDA_ERROR_NOT_READY)
            ;
        r.done_ms = now_ms() - t0;
        CK(cuMemcpyDtoH(host, dst, SIZE));
        r.bytes_ok = 1;
        for (int i = 0; i < SIZE; i++)
            r.bytes_ok &= host[i] == pat(i);
        xwrite(out, &r, sizeof(r));
    }
    cuIpcCloseMemHandle(src);
    return 0;
}

static volatile int *stop;
static void *releaser(void *) { usleep(2000000); *stop = 1; __sync_synchronize(); return NULL; }

int main(void)
{
    const char *modes[] = {"nothing (sleep)", "cudaMemcpy D2H pageable", "cudaMemcpy D2H pinned",
                           "cudaDeviceSynchronize"};
    const int nmodes = 4;
    int to_b[2], to_a[2];

    if (pipe(to_b) || pipe(to_a)) { perror("pipe"); return 1; }
    pid_t pid = fork();
    if (pid == 0) {
        close(to_b[1]); close(to_a[0]);
        return puller(to_b[0], to_a[1], nmodes);
    }
    close(to_b[0]); close(to_a[1]);

    /* A: the application */
    unsigned char *buf; int *out, *pinned, pageable[16]; cudaIpcMemHandle_t h; char ready;
    RK(cudaSetDevice(0));
    RK(cudaMalloc((void **)&buf, SIZE)); RK(cudaMalloc((void **)&out, 64));
    fill<<<64, 256>>>(buf); RK(cudaDeviceSynchronize());
    RK(cudaHostAlloc((void **)&stop, 64, cudaHostAllocMapped | cudaHostAllocPortable));
    RK(cudaMallocHost((void **)&pinned, 64));
    RK(cudaIpcGetMemHandle(&h, buf));
    xwrite(to_b[1], &h, sizeof(h));
    xread(to_a[0], &ready, 1);
    printf("held_pull: another process's private context copies 1 MiB out of this process's "
           "cudaMalloc memory (its IPC mapping) while this process's thread is in:\n");
    for (int m = 0; m < nmodes; m++) {
        result_t r;
        pthread_t rel;
        char go = 1;
        *stop = 0; __sync_synchronize();
        spin<<<1, 1>>>((int *)stop, out);
        pthread_create(&rel, NULL, releaser, NULL);
        xwrite(to_b[1], &go, 1);
        double t0 = now_ms();
        switch (m) {
        case 0: usleep(2100000); break;
        case 1: RK(cudaMemcpy(pageable, out, 4, cudaMemcpyDeviceToHost)); break;
        case 2: RK(cudaMemcpy(pinned, out, 4, cudaMemcpyDeviceToHost)); break;
        case 3: RK(cudaDeviceSynchronize()); break;
        }
        double blocked = now_ms() - t0;
        pthread_join(rel, NULL);
        RK(cudaDeviceSynchronize());
        xread(to_a[0], &r, sizeof(r));
        printf("  %-26s (returned after %7.1f ms): pull call %7.2f ms, done after %7.2f ms, "
               "bytes %s%s\n", modes[m], blocked, r.call_ms, r.done_ms,
               r.bytes_ok ? "correct" : "WRONG", r.done_ms > 1700 ? "  <-- held until the kernel ended" : "");
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
