/*
 * reduce_kernel: every MPI rank of one host adds its float32 vector into
 * rank 0's buffer from a CUDA kernel, through gpuport memory channels: the
 * kernels add into rank 0's GPU memory themselves, element by element with
 * system-scope atomic adds (gpuport_memory_accumulate), no proxy between.
 *
 * Rank 0's buffer starts as its own vector, before any channel exists; then
 * rank 0 makes a memory channel to each other rank (its buffer as the
 * destination, no source) and each other rank one to rank 0 (its vector as
 * the source, no destination). A rank's kernel of one block accumulates the
 * vector with every thread, makes the adds visible with __syncthreads and
 * one thread's signal; rank 0's kernel waits for every rank's signal, one
 * thread per channel. Rank 0 then compares each element with the exact sum
 * on the host: adds from several ranks land in any order, so a float sum of
 * k terms may differ from it by up to (k - 1) * 2^-24 * (the sum of |terms|)
 * (gpuport.h). Memory, all of it GPU memory, comes from
 * gpuport_mem_alloc_device: memory channels map the peer's destination into
 * the application's context, which cudaMalloc memory cannot be. Memory
 * channels reach ranks of one host only (whose GPUs map each other's
 * memory); between hosts, adds into GPU memory have no channel yet (port
 * channels of tcp and ib refuse them, saying so).
 *
 * Each rank uses GPU local_rank % (GPUs on its host); GPUPORT_TEST_ONE_GPU=1
 * puts every rank on GPU 0, whose kernels then run at once only under MPS
 * (without it they take turns, and the example still ends). Without a
 * usable GPU every rank says why and exits 77.
 *
 *   nvcc -ccbin mpicxx reduce_kernel.cu $(pkg-config --cflags --libs gpuport-mpi) \
 *       -o reduce_kernel
 *   mpirun -np 4 ./reduce_kernel [ELEMENTS]      (default 1048576)
 */
#include <gpuport/gpuport_device.h>
#include <gpuport/gpuport_mpi.h>

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank = -1;

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

/* rank r's element i: not a short binary fraction, so the sums round */
static float value(int r, uint64_t i)
{
    return (float)(r + 1) / 3.0f * (float)(1 + i % 17) - (float)(i % 5);
}

/* Another rank: its vector into rank 0's buffer, then one signal. */
__global__ void contribute(gpuport_memory_channel_dev_t ch, uint64_t n, int *rc)
{
    __shared__ int st;

    if (threadIdx.x == 0)
        st = 0;
    __syncthreads();
    int mine = gpuport_memory_accumulate(&ch, 0, 0, n, GPUPORT_FLOAT32, threadIdx.x, blockDim.x);
    if (mine)
        atomicCAS(&st, 0, mine);
    __syncthreads(); /* the block's adds, then one release: the signal */
    if (threadIdx.x == 0)
        *rc = st ? st : gpuport_memory_signal(&ch);
}

/* Rank 0: one thread per channel waits for its rank's signal; the adds
 * before it are then in the buffer. */
__global__ void gather(const gpuport_memory_channel_dev_t *chs, int n, int *rc)
{
    if ((int)threadIdx.x < n)
        rc[threadIdx.x] = gpuport_memory_wait(&chs[threadIdx.x]);
}

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

/* Rank 0: every element against the exact sum, within the bound. */
static int verify(const float *sum, uint64_t n, int size)
{
    uint64_t bad = 0;

    for (uint64_t i = 0; i < n; i++) {
        double exact = 0, abs_sum = 0;
        for (int r = 0; r < size; r++) {
            exact += value(r, i);
            abs_sum += fabs(value(r, i));
        }
        if (fabs(sum[i] - exact) > (size - 1) * ldexp(1.0, -24) * abs_sum && bad++ < 5)
            fprintf(stderr, "rank 0: element %llu is %.9g, the exact sum %.9g\n",
                    (unsigned long long)i, sum[i], exact);
    }
    if (bad) {
        fprintf(stderr, "rank 0: %llu of %llu elements outside the bound\n",
                (unsigned long long)bad, (unsigned long long)n);
        return 0;
    }
    printf("rank 0: reduce of %llu float32 elements from %d ranks by their kernels: OK\n",
           (unsigned long long)n, size);
    return 1;
}

int main(int argc, char **argv)
{
    gpuport_comm_t comm;
    gpuport_mem_t mem = NULL;
    gpuport_memory_channel_t *chs = NULL;
    gpuport_memory_channel_dev_t *devs = NULL, *d_devs = NULL;
    float *vec = NULL, *host = NULL;
    uint64_t n = 1 << 20;
    int size, gpu, nch = 0, made = 0, failed = 1, *rc = NULL, *rc_host = NULL;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 1) {
        char *end;
        n = strtoull(argv[1], &end, 0);
        if (*end || n == 0) {
            if (rank == 0)
                fprintf(stderr, "usage: %s [ELEMENTS]: '%s' is not a positive number\n",
                        argv[0], argv[1]);
            MPI_Finalize();
            return 2;
        }
    }
    if (size < 2 || size > 1025) {
        if (rank == 0)
            fprintf(stderr, "%s reduces into rank 0 from 1 to 1024 other ranks: run 2 to 1025 "
                            "ranks, not %d\n",
                    argv[0], size);
        MPI_Finalize();
        return 2;
    }
    gpu = pick_gpu();
    if (gpu < 0) {
        MPI_Finalize();
        return gpu == -1 ? 77 : 1;
    }
    if (!ok(gpuport_comm_init_mpi(MPI_COMM_WORLD, &comm), "gpuport_comm_init_mpi")) {
        MPI_Finalize();
        return 1;
    }
    nch = rank == 0 ? size - 1 : 1;
    chs = (gpuport_memory_channel_t *)calloc(nch, sizeof(*chs));
    devs = (gpuport_memory_channel_dev_t *)calloc(nch, sizeof(*devs));
    host = (float *)malloc(n * sizeof(float));
    if (!chs || !devs || !host)
        goto out;
    /* rank 0's buffer starts as its own vector; the others' are sources */
    for (uint64_t i = 0; i < n; i++)
        host[i] = value(rank, i);
    if (!ok(gpuport_mem_alloc_device(comm, n * sizeof(float), (void **)&vec),
            "gpuport_mem_alloc_device") ||
        !cuda_ok(cudaMemcpy(vec, host, n * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy") ||
        !cuda_ok(cudaMalloc((void **)&rc, nch * sizeof(int)), "cudaMalloc") ||
        !ok(gpuport_mem_register(comm, vec, n * sizeof(float), &mem), "gpuport_mem_register"))
        goto out;
    /* pairwise: rank 0 with each other rank in turn */
    for (made = 0; made < nch; made++) {
        int peer = rank == 0 ? made + 1 : 0;
        if (!ok(gpuport_memory_channel_create(comm, peer, rank == 0 ? NULL : mem,
                                              rank == 0 ? mem : NULL, &chs[made]),
                "gpuport_memory_channel_create") ||
            !ok(gpuport_memory_channel_device(chs[made], &devs[made]),
                "gpuport_memory_channel_device")) {
            made += chs[made] != NULL;
            goto out;
        }
    }
    if (rank == 0) {
        if (!cuda_ok(cudaMalloc((void **)&d_devs, nch * sizeof(*devs)), "cudaMalloc") ||
            !cuda_ok(cudaMemcpy(d_devs, devs, nch * sizeof(*devs), cudaMemcpyHostToDevice),
                     "cudaMemcpy"))
            goto out;
        gather<<<1, nch>>>(d_devs, nch, rc);
    } else {
        contribute<<<1, 256>>>(devs[0], n, rc);
    }
    rc_host = (int *)malloc(nch * sizeof(int));
    if (!rc_host || !cuda_ok(cudaGetLastError(), "kernel launch") ||
        !cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize") ||
        !cuda_ok(cudaMemcpy(rc_host, rc, nch * sizeof(int), cudaMemcpyDeviceToHost), "cudaMemcpy"))
        goto out;
    for (int i = 0; i < nch; i++)
        if (!ok((gpuport_status_t)rc_host[i], rank == 0 ? "the kernel's wait" :
                                                          "the kernel's accumulate and signal"))
            goto out;
    if (rank == 0) {
        if (!cuda_ok(cudaMemcpy(host, vec, n * sizeof(float), cudaMemcpyDeviceToHost),
                     "cudaMemcpy") ||
            !verify(host, n, size))
            goto out;
    }
    failed = 0;

out:
    /* destroy is pairwise, in the order of creation: once it returns, no
     * kernel of the peer adds into this rank's memory any more */
    for (int i = 0; i < made; i++)
        if (!ok(gpuport_memory_channel_destroy(chs[i]), "gpuport_memory_channel_destroy"))
            failed = 1;
    if (mem && !ok(gpuport_mem_deregister(mem), "gpuport_mem_deregister"))
        failed = 1;
    if (vec && !ok(gpuport_mem_free(comm, vec), "gpuport_mem_free"))
        failed = 1;
    cudaFree(rc);
    cudaFree(d_devs);
    free(rc_host);
    free(host);
    free(devs);
    free(chs);
    if (!ok(gpuport_comm_destroy(comm), "gpuport_comm_destroy"))
        failed = 1;
    if (failed)
        MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Finalize();
    return 0;
}
