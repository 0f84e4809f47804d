/*
 * device_channels: two MPI ranks exchange GPU buffers from a CUDA kernel
 * over two gpuport port channels, checking every call.
 *
 * One channel binds cudaMalloc memory, the other VMM memory from
 * gpuport_mem_alloc_device. A kernel of two threads, one per channel, puts
 * its rank's source into the peer's destination with a signal, waits for
 * the peer's signal and flushes; the host then copies both destinations
 * back and compares every byte. Each rank pairs with rank ^ 1 (run an even
 * number of ranks) and uses GPU local_rank % (GPUs on its host), so ranks
 * share a GPU where there are fewer GPUs than ranks; GPUPORT_TEST_ONE_GPU=1
 * puts every rank on GPU 0, as gpuport's GPU tests do. Without a usable GPU
 * every rank says why and exits 77. A failed call prints what failed and
 * why, and the program exits non-zero.
 *
 * The cudaMalloc channel needs both ranks on one host (cuda_ipc): tcp, the
 * transport between hosts, refuses cudaMalloc memory; the VMM channel works
 * over every transport.
 *
 *   nvcc -ccbin mpicxx device_channels.cu $(pkg-config --cflags --libs gpuport-mpi) \
 *       -o device_channels
 *   mpirun -np 2 ./device_channels [BYTES]      (default 1 MiB)
 */
#include <gpuport/gpuport_device.h>
#include <gpuport/gpuport_mpi.h>

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank = -1;

/* 1 when the call succeeded, else 0 after saying what failed */
static int ok(gpuport_status_t st, const char *call)
{
    if (st == GPUPORT_OK)
        return 1;
    fprintf(stderr, "rank %d: %s failed: %s (%d)\n", rank, call, gpuport_status_string(st),
            (int)st);
    return 0;
}

static int cuda_ok(cudaError_t e, const char *call)
{
    if (e == cudaSuccess)
        return 1;
    fprintf(stderr, "rank %d: %s failed: %s\n", rank, call, cudaGetErrorString(e));
    return 0;
}

__host__ __device__ static unsigned char pattern(int from, int which, uint64_t i)
{
    return (unsigned char)(from * 37 + which * 101 + i * 11 + (i >> 8));
}

__global__ void fill(unsigned char *p, uint64_t n, int from, int which)
{
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x)
        p[i] = pattern(from, which, i);
}

/* Thread t drives channel t. Every call returns GPUPORT_OK or an error
 * (after GPUPORT_TIMEOUT_MS at most): a kernel never hangs on a channel. */
__global__ void exchange(gpuport_port_channel_dev_t a, gpuport_port_channel_dev_t b,
                         uint64_t bytes, int *rc)
{
    const gpuport_port_channel_dev_t *ch = threadIdx.x == 0 ? &a : &b;
    int st = gpuport_put_with_signal(ch, 0, 0, bytes);

    if (st == GPUPORT_OK)
        st = gpuport_wait(ch); /* the peer's data is in this rank's destination */
    if (st == GPUPORT_OK)
        st = gpuport_flush(ch); /* this rank's put is complete */
    rc[threadIdx.x] = st;
}

/* One channel and the GPU memory it binds. */
typedef struct link {
    const char *memory;
    int vmm;
    void *src, *dst;
    gpuport_mem_t msrc, mdst;
    gpuport_channel_t ch;
    gpuport_port_channel_dev_t dev;
} link_t;

static int gpu_alloc(gpuport_comm_t comm, link_t *l, size_t bytes, void **p)
{
    if (l->vmm)
        return ok(gpuport_mem_alloc_device(comm, bytes, p), "gpuport_mem_alloc_device");
    return cuda_ok(cudaMalloc(p, bytes), "cudaMalloc");
}

/* Memory, registrations, the channel (pairwise: the peer sets up the same
 * links in the same order) and the kernel's handle. */
static int link_setup(gpuport_comm_t comm, link_t *l, int which, int peer, size_t bytes)
{
    if (!gpu_alloc(comm, l, bytes, &l->src) || !gpu_alloc(comm, l, bytes, &l->dst))
        return 0;
    fill<<<64, 256>>>((unsigned char *)l->src, bytes, rank, which);
    if (!cuda_ok(cudaGetLastError(), "fill<<<>>>") ||
        !cuda_ok(cudaMemset(l->dst, 0, bytes), "cudaMemset") ||
        !cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize"))
        return 0;
    return ok(gpuport_mem_register(comm, l->src, bytes, &l->msrc), "gpuport_mem_register(src)") &&
           ok(gpuport_mem_register(comm, l->dst, bytes, &l->mdst), "gpuport_mem_register(dst)") &&
           ok(gpuport_channel_create(comm, peer, l->msrc, l->mdst, &l->ch),
              "gpuport_channel_create") &&
           ok(gpuport_channel_device(l->ch, &l->dev), "gpuport_channel_device");
}

/* Releases what link_setup made, in the reverse order; 1 if all went. */
static int link_teardown(gpuport_comm_t comm, link_t *l)
{
    int good = 1;

    if (l->ch)
        good &= ok(gpuport_channel_destroy(l->ch), "gpuport_channel_destroy");
    if (l->mdst)
        good &= ok(gpuport_mem_deregister(l->mdst), "gpuport_mem_deregister(dst)");
    if (l->msrc)
        good &= ok(gpuport_mem_deregister(l->msrc), "gpuport_mem_deregister(src)");
    for (int i = 0; i < 2; i++) {
        void *p = i == 0 ? l->dst : l->src;
        if (p && l->vmm)
            good &= ok(gpuport_mem_free(comm, p), "gpuport_mem_free");
        else if (p)
            good &= cuda_ok(cudaFree(p), "cudaFree");
    }
    return good;
}

/* Compares the destination with what the peer put; 1 if every byte is right. */
static int link_verify(const link_t *l, int which, int peer, size_t bytes)
{
    unsigned char *got = (unsigned char *)malloc(bytes);
    size_t bad = 0;

    if (!got) {
        fprintf(stderr, "rank %d: malloc(%zu) failed\n", rank, bytes);
        return 0;
    }
    if (!cuda_ok(cudaMemcpy(got, l->dst, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy")) {
        free(got);
        return 0;
    }
    for (size_t i = 0; i < bytes; i++)
        bad += got[i] != pattern(peer, which, i);
    free(got);
    if (bad) {
        fprintf(stderr, "rank %d: %s channel: %zu of %zu bytes from rank %d are wrong\n", rank,
                l->memory, bad, bytes, peer);
        return 0;
    }
    printf("rank %d: %s channel over %s: received %zu bytes from rank %d: OK\n", rank, l->memory,
           gpuport_channel_transport(l->ch), bytes, peer);
    return 1;
}

/* This rank's GPU, made current before the communicator is created (a
 * communicator uses the device current then); -1 after saying why there is
 * none. */
static int pick_gpu(void)
{
    const char *one = getenv("GPUPORT_TEST_ONE_GPU");
    MPI_Comm host;
    int local_rank, n = 0, dev;
    cudaError_t e;

    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &host);
    MPI_Comm_rank(host, &local_rank);
    MPI_Comm_free(&host);
    e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        printf("rank %d: SKIP: no usable GPU (cudaGetDeviceCount: %s, %d devices)\n", rank,
               cudaGetErrorString(e), n);
        return -1;
    }
    dev = one && strcmp(one, "1") == 0 ? 0 : local_rank % n;
    if (!cuda_ok(cudaSetDevice(dev), "cudaSetDevice") || !cuda_ok(cudaFree(0), "cudaFree(0)"))
        return -2;
    return dev;
}

int main(int argc, char **argv)
{
    gpuport_comm_t comm;
    link_t links[2] = {{"cudaMalloc", 0}, {"VMM", 1}};
    size_t bytes = 1 << 20;
    int size, peer, dev, failed = 1, rc_host[2] = {-1, -1}, *rc = NULL;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 1) {
        char *end;
        bytes = strtoull(argv[1], &end, 0);
        if (*end || bytes == 0) {
            if (rank == 0)
                fprintf(stderr, "usage: %s [BYTES]: '%s' is not a positive number\n", argv[0],
                        argv[1]);
            MPI_Finalize();
            return 2;
        }
    }
    if (size % 2) {
        if (rank == 0)
            fprintf(stderr, "%s pairs rank r with rank r ^ 1: run an even number of ranks, not "
                            "%d\n",
                    argv[0], size);
        MPI_Finalize();
        return 2;
    }
    peer = rank ^ 1;
    dev = pick_gpu();
    if (dev < 0) {
        MPI_Finalize();
        return dev == -1 ? 77 : 1;
    }

    /* Collective, and so is its failure; comm is NULL then. */
    if (!ok(gpuport_comm_init_mpi(MPI_COMM_WORLD, &comm), "gpuport_comm_init_mpi")) {
        MPI_Finalize();
        return 1;
    }
    if (!link_setup(comm, &links[0], 0, peer, bytes) ||
        !link_setup(comm, &links[1], 1, peer, bytes))
        goto out;
    if (!cuda_ok(cudaMalloc((void **)&rc, sizeof(rc_host)), "cudaMalloc(rc)"))
        goto out;
    exchange<<<1, 2>>>(links[0].dev, links[1].dev, bytes, rc);
    /* Wait for the kernel here, not inside cudaMemcpy: while a thread is in
     * a synchronous cudaMemcpy that waits for a kernel, CUDA holds every
     * other context's copy out of this process's cudaMalloc memory, gpuport's
     * too, so the peer's kernel would never get the cudaMalloc channel's
     * data and this kernel never its signal (docs/ARCHITECTURE.md, "a copy
     * held by CUDA"). VMM memory has no such wait. */
    if (!cuda_ok(cudaGetLastError(), "exchange<<<>>>") ||
        !cuda_ok(cudaDeviceSynchronize(), "exchange<<<>>> (cudaDeviceSynchronize)") ||
        !cuda_ok(cudaMemcpy(rc_host, rc, sizeof(rc_host), cudaMemcpyDeviceToHost),
                 "exchange<<<>>> (cudaMemcpy of its results)"))
        goto out;
    if (!ok((gpuport_status_t)rc_host[0], "the kernel's put_with_signal/wait/flush on the "
                                          "cudaMalloc channel") ||
        !ok((gpuport_status_t)rc_host[1], "the kernel's put_with_signal/wait/flush on the VMM "
                                          "channel"))
        goto out;
    /* & rather than &&: both channels are checked and reported */
    if (link_verify(&links[0], 0, peer, bytes) & link_verify(&links[1], 1, peer, bytes))
        failed = 0;

out:
    if (rc && !cuda_ok(cudaFree(rc), "cudaFree(rc)"))
        failed = 1;
    for (int i = 1; i >= 0; i--)
        if (!link_teardown(comm, &links[i]))
            failed = 1;
    if (!ok(gpuport_comm_destroy(comm), "gpuport_comm_destroy"))
        failed = 1;
    if (failed) {
        /* The peer may be waiting in a pairwise call (channel creation) or
         * its kernel in a wait that this rank will not answer: end the job
         * rather than leave it waiting. */
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Finalize();
    return 0;
}
