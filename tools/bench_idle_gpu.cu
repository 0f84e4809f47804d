/* GPU operations of gpuport_bench --idle; see bench_idle.h. */
#include <cuda_runtime.h>

#include "bench_gpu_tail.h"
#include "bench_idle.h"

__global__ static void k_timed(gpuport_port_channel_dev_t ch, int put, uint64_t *ns, int *rc)
{
    uint64_t t0 = gpuport_dev_now_ns();
    int st = put ? gpuport_put(&ch, 0, 0, 64) : GPUPORT_OK;

    if (!st)
        st = gpuport_flush(&ch);
    bench_dev_done(t0, st, ns, rc);
}

static int timed(const gpuport_port_channel_dev_t *ch, int put, double *us)
{
    static uint64_t *d_ns;
    static int *d_rc;
    uint64_t ns = 0;
    int rc = -1;

    if (!d_ns && (cudaMalloc(&d_ns, 8) != cudaSuccess || cudaMalloc(&d_rc, sizeof(int)) != cudaSuccess))
        return -1;
    k_timed<<<1, 1>>>(*ch, put, d_ns, d_rc);
    if (bench_wait(0, d_ns, &ns, d_rc, &rc))
        return -1;
    *us = ns / 1e3;
    return rc;
}

extern "C" int bench_idle_gpu_alloc(size_t bytes, void **p)
{
    if (cudaMalloc(p, bytes) != cudaSuccess)
        return -1;
    return cudaMemset(*p, 0, bytes) == cudaSuccess ? 0 : -1;
}

extern "C" void bench_idle_gpu_free(void *p)
{
    cudaFree(p);
}

extern "C" int bench_idle_gpu_flush(const gpuport_port_channel_dev_t *ch, double *us)
{
    return timed(ch, 0, us);
}

extern "C" int bench_idle_gpu_put_flush(const gpuport_port_channel_dev_t *ch, double *us)
{
    return timed(ch, 1, us);
}
