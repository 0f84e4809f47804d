/*
 * Probe (not part of the library): which application calls, made while an
 * application kernel runs, hold a second context's copy out of the
 * application's cudaMalloc memory (docs/ARCHITECTURE.md, "a copy held by
 * CUDA")? The kernel spins until a releaser thread stops it after 2 s;
 * 100 ms in, a thread of a private context copies 8 bytes, either with
 * cuMemcpyPeerAsync naming the application's context or cuMemcpyDtoDAsync
 * from that memory (UVA), while the main thread is in one of the calls
 * below; a copy held until the kernel ended is marked. First: whether the
 * private context can be a peer of the application's (same device), and
 * whether the plain DtoD copy moves the right bytes. Build and run with
 * scripts/probes.sh.
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#define RK(x) do { cudaError_t r_ = (x); if (r_) { printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(r_)); exit(1);} } while (0)
static double now_ms(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e3 + t.tv_nsec / 1e6; }
__global__ void spin(volatile int *stop, int *out) { while (!*stop) ; *out = 7; }
static CUcontext pctx, actx; static CUdeviceptr appbuf, privbuf; static int *stop; static int copy_kind;
static double t_launch, t_call, t_done;
static void *worker(void *)
{
    cuCtxSetCurrent(pctx);
    CUstream s; cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
    usleep(100000);
    double t0 = now_ms();
    if (copy_kind == 0) cuMemcpyPeerAsync(privbuf, pctx, appbuf, actx, 8, s);
    else if (copy_kind == 1) cuMemcpyDtoDAsync(privbuf, privbuf + 64, 8, s);
    else { CUresult r = cuMemcpyDtoDAsync(privbuf + 128, appbuf, 8, s); if (r) printf("  DtoD from app memory in the private ctx: error %d\n", (int)r); }
    t_call = now_ms() - t0;
    while (cuStreamQuery(s) == CUDA_ERROR_NOT_READY) ;
    t_done = now_ms() - t0;
    return NULL;
}
static void *releaser(void *) { usleep(2000000); *stop = 1; __sync_synchronize(); return NULL; }
int main(int argc, char **argv)
{
    const char *modes[] = {"nothing (sleep)", "cudaMemcpy D2H pageable", "cudaMemcpy D2H pinned", "cudaDeviceSynchronize", "cudaStreamSynchronize(0)", "cudaEventSynchronize", "cudaMemcpyAsync pinned + cudaStreamSynchronize", "cudaMemcpy D2D", "cudaMemset"};
    RK(cudaSetDevice(0)); RK(cudaFree(0));
    cuCtxGetCurrent(&actx);
    CUdevice dev; cuDeviceGet(&dev, 0);
    RK(cudaMalloc((void **)&appbuf, 1 << 20));
    int *out; RK(cudaMalloc((void **)&out, 64));
    cuCtxCreate(&pctx, NULL, 0, dev);
    cuCtxSetCurrent(pctx); cuMemAlloc(&privbuf, 1 << 20);
    CUstream ws; cuStreamCreate(&ws, CU_STREAM_NON_BLOCKING);
    cuMemcpyPeerAsync(privbuf, pctx, appbuf, actx, 8, ws); cuStreamSynchronize(ws);
    cuCtxSetCurrent(actx);
    RK(cudaHostAlloc((void **)&stop, 64, cudaHostAllocMapped | cudaHostAllocPortable));
    int *pinned; RK(cudaMallocHost((void **)&pinned, 64)); int pageable[16];
    { /* can the private context be a peer of the application's (same device)? */
        cuCtxSetCurrent(pctx);
        CUresult r = cuCtxEnablePeerAccess(actx, 0);
        const char *e = ""; cuGetErrorString(r, &e);
        int can = -1; cuDeviceCanAccessPeer(&can, dev, dev);
        printf("cuCtxEnablePeerAccess(app ctx) from the private ctx: %d (%s); cuDeviceCanAccessPeer(dev, dev) = %d\n", (int)r, e, can);
        unsigned long long pat = 0x1122334455667788ull, got = 0;
        cuCtxSetCurrent(actx); RK(cudaMemcpy((void *)appbuf, &pat, 8, cudaMemcpyHostToDevice));
        cuCtxSetCurrent(pctx);
        r = cuMemcpyDtoDAsync(privbuf + 256, appbuf, 8, ws); cuStreamSynchronize(ws);
        cuMemcpyDtoH(&got, privbuf + 256, 8);
        printf("DtoD in the private ctx from app memory: rc %d, bytes %s\n", (int)r, got == pat ? "correct" : "WRONG");
        cuCtxSetCurrent(actx);
    }
    for (copy_kind = 0; copy_kind < 3; copy_kind++)
    for (int m = 0; m < 9; m++) {
        *stop = 0; __sync_synchronize();
        cudaEvent_t ev; RK(cudaEventCreate(&ev));
        spin<<<1, 1>>>(stop, out);
        RK(cudaEventRecord(ev, 0));
        t_call = t_done = -1;
        pthread_t w, r; pthread_create(&w, NULL, worker, NULL); pthread_create(&r, NULL, releaser, NULL);
        double t0 = now_ms();
        switch (m) {
        case 0: usleep(2100000); break;
        case 1: RK(cudaMemcpy(pageable, out, 4, cudaMemcpyDeviceToHost)); break;
        case 2: RK(cudaMemcpy(pinned, out, 4, cudaMemcpyDeviceToHost)); break;
        case 3: RK(cudaDeviceSynchronize()); break;
        case 4: RK(cudaStreamSynchronize(0)); break;
        case 5: RK(cudaEventSynchronize(ev)); break;
        case 6: RK(cudaMemcpyAsync(pinned, out, 4, cudaMemcpyDeviceToHost, 0)); RK(cudaStreamSynchronize(0)); break;
        case 7: RK(cudaMemcpy((void *)(appbuf + 4096), out, 4, cudaMemcpyDeviceToDevice)); break;
        case 8: RK(cudaMemset((void *)(appbuf + 4096), 0, 4)); break;
        }
        double blocked = now_ms() - t0;
        pthread_join(w, NULL); pthread_join(r, NULL);
        RK(cudaDeviceSynchronize());
        printf("%-20s while app thread in %-48s (returned after %7.1f ms): copy call %7.2f ms, done after %7.2f ms%s\n", copy_kind == 2 ? "DtoD from app mem" : copy_kind ? "own-ctx DtoD" : "peer copy from app", modes[m], blocked, t_call, t_done, t_done > 1800 ? "  <-- held until the kernel ended" : "");
        cudaEventDestroy(ev);
    }
    return 0;
}
