/*
 * memory_channels: two MPI ranks of one host exchange GPU buffers through a
 * gpuport memory channel: a kernel stores straight into the peer's memory
 * with its own threads and signals it, no proxy and no copy engine between.
 *
 * Both ranks allocate VMM memory (gpuport_mem_alloc_device: memory
 * channels map the peer's destination into the application's context, and
 * cudaMalloc memory cannot be mapped there; see docs/GUIDE.md, "Memory
 * channels"), register it and create the channel (pairwise). A kernel of
 * one block copies this rank's source into the peer's destination with
 * every thread (gpuport_memory_put), makes the copy visible with
 * __syncthreads and one thread's signal, and waits for the peer's signal.
 * Then 64 bytes travel each way as packets (data and flag in one store, so
 * the reader needs no signal), in two rounds with a flag each; the rounds
 * alternate between two places, so that a round's packets never overwrite
 * ones the peer has yet to read (round 3 could reuse the first place, with
 * flag 3, without clearing it).
 * The host compares every byte. Each rank pairs with rank ^ 1 (run an even
 * number of ranks, all on one host) and uses GPU local_rank % (GPUs on its
 * host); GPUPORT_TEST_ONE_GPU=1 puts every rank on GPU 0. Two processes on
 * one GPU run their kernels at once only under MPS; without it they take
 * turns, and the example still ends. Without a usable GPU every rank says
 * why and exits 77.
 *
 *   nvcc -ccbin mpicxx memory_channels.cu $(pkg-config --cflags --libs gpuport-mpi) \
 *       -o memory_channels
 *   mpirun -np 2 ./memory_channels [BYTES]      (default 1 MiB)
 */
#include <gpuport/gpuport_device.h>
#include <gpuport/gpuport_mpi.h>

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PKT_BYTES 64

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

__host__ __device__ static unsigned char pattern(int from, uint64_t i)
{
    return (unsigned char)(from * 53 + i * 7 + (i >> 9));
}

__global__ void fill(unsigned char *p, uint64_t n, int from)
{
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x)
        p[i] = pattern(from, i);
}

/* The destination holds the peer's bytes at [0, bytes) and its packets
 * after them (two places of gpuport_memory_packet_bytes(PKT_BYTES)); packets[] gets
 * the data read out of them. rc[0]: the put and signal, rc[1]: the wait,
 * rc[2]: the packets. */
__global__ void exchange(gpuport_memory_channel_dev_t ch, uint64_t bytes, unsigned char *packets,
                         int *rc)
{
    __shared__ int st;
    uint64_t pkt_at = (bytes + 15) / 16 * 16;

    if (threadIdx.x == 0)
        st = 0;
    __syncthreads();
    /* every thread its share; the source's last PKT_BYTES are the packets' */
    int mine = gpuport_memory_put(&ch, 0, 0, bytes, threadIdx.x, blockDim.x);
    if (mine)
        atomicCAS(&st, 0, mine);
    __syncthreads(); /* the block's stores, then one release: the signal */
    if (threadIdx.x == 0) {
        rc[0] = st ? st : gpuport_memory_signal(&ch);
        rc[1] = gpuport_memory_wait(&ch); /* the peer's bytes are here now */
        rc[2] = 0;
    }
    __syncthreads();
    for (uint32_t round = 1; round <= 2; round++) {
        uint64_t at = pkt_at + (round - 1) * gpuport_memory_packet_bytes(PKT_BYTES);
        if (threadIdx.x < 32) {
            int r = gpuport_memory_put_packets(&ch, at, bytes - PKT_BYTES, PKT_BYTES, round,
                                               threadIdx.x, 32);
            if (!r)
                r = gpuport_memory_read_packets(&ch, at, packets + (round - 1) * PKT_BYTES,
                                                PKT_BYTES, round, threadIdx.x, 32);
            if (r)
                atomicCAS(&rc[2], 0, r);
        }
        __syncthreads();
    }
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

/* Every byte the peer sent: its source at [0, bytes), and its last
 * PKT_BYTES twice as packets. */
static int verify(const unsigned char *dst, const unsigned char *packets, uint64_t bytes,
                  int peer)
{
    uint64_t bad = 0;

    for (uint64_t i = 0; i < bytes; i++)
        bad += dst[i] != pattern(peer, i);
    for (uint64_t i = 0; i < 2 * PKT_BYTES; i++)
        bad += packets[i] != pattern(peer, bytes - PKT_BYTES + i % PKT_BYTES);
    if (bad) {
        fprintf(stderr, "rank %d: %llu bytes from rank %d are wrong\n", rank,
                (unsigned long long)bad, peer);
        return 0;
    }
    printf("rank %d: memory channel: received %llu bytes and 2 x %d bytes of packets from rank "
           "%d: OK\n",
           rank, (unsigned long long)bytes, PKT_BYTES, peer);
    return 1;
}

int main(int argc, char **argv)
{
    gpuport_comm_t comm;
    gpuport_mem_t msrc = NULL, mdst = NULL;
    gpuport_memory_channel_t ch = NULL;
    gpuport_memory_channel_dev_t dev;
    unsigned char *src = NULL, *dst = NULL, *packets = NULL, *host = NULL;
    uint64_t bytes = 1 << 20, dst_bytes;
    int size, peer, gpu, failed = 1, rc_host[3] = {-1, -1, -1}, *rc = NULL;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 1) {
        char *end;
        bytes = strtoull(argv[1], &end, 0);
        if (*end || bytes < PKT_BYTES) {
            if (rank == 0)
                fprintf(stderr, "usage: %s [BYTES]: '%s' is not a number of at least %d\n",
                        argv[0], argv[1], PKT_BYTES);
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
    gpu = pick_gpu();
    if (gpu < 0) {
        MPI_Finalize();
        return gpu == -1 ? 77 : 1;
    }
    if (!ok(gpuport_comm_init_mpi(MPI_COMM_WORLD, &comm), "gpuport_comm_init_mpi")) {
        MPI_Finalize();
        return 1;
    }
    dst_bytes = (bytes + 15) / 16 * 16 + 2 * gpuport_memory_packet_bytes(PKT_BYTES);
    if (!ok(gpuport_mem_alloc_device(comm, bytes, (void **)&src), "gpuport_mem_alloc_device") ||
        !ok(gpuport_mem_alloc_device(comm, dst_bytes, (void **)&dst),
            "gpuport_mem_alloc_device") ||
        !cuda_ok(cudaMalloc((void **)&packets, 2 * PKT_BYTES), "cudaMalloc") ||
        !cuda_ok(cudaMalloc((void **)&rc, sizeof(rc_host)), "cudaMalloc"))
        goto out;
    fill<<<64, 256>>>(src, bytes, rank);
    if (!cuda_ok(cudaMemset(dst, 0, dst_bytes), "cudaMemset") ||
        !cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize"))
        goto out;
    if (!ok(gpuport_mem_register(comm, src, bytes, &msrc), "gpuport_mem_register(src)") ||
        !ok(gpuport_mem_register(comm, dst, dst_bytes, &mdst), "gpuport_mem_register(dst)") ||
        !ok(gpuport_memory_channel_create(comm, peer, msrc, mdst, &ch),
            "gpuport_memory_channel_create") ||
        !ok(gpuport_memory_channel_device(ch, &dev), "gpuport_memory_channel_device"))
        goto out;
    exchange<<<1, 256>>>(dev, bytes, packets, rc);
    if (!cuda_ok(cudaGetLastError(), "exchange<<<>>>") ||
        !cuda_ok(cudaDeviceSynchronize(), "exchange<<<>>> (cudaDeviceSynchronize)") ||
        !cuda_ok(cudaMemcpy(rc_host, rc, sizeof(rc_host), cudaMemcpyDeviceToHost), "cudaMemcpy"))
        goto out;
    if (!ok((gpuport_status_t)rc_host[0], "the kernel's put and signal") ||
        !ok((gpuport_status_t)rc_host[1], "the kernel's wait") ||
        !ok((gpuport_status_t)rc_host[2], "the kernel's packets"))
        goto out;
    host = (unsigned char *)malloc(bytes + 2 * PKT_BYTES);
    if (!host || !cuda_ok(cudaMemcpy(host, dst, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy") ||
        !cuda_ok(cudaMemcpy(host + bytes, packets, 2 * PKT_BYTES, cudaMemcpyDeviceToHost),
                 "cudaMemcpy"))
        goto out;
    if (verify(host, host + bytes, bytes, peer))
        failed = 0;

out:
    /* destroy is pairwise: it returns once the peer destroyed its side too,
     * so that no kernel of either stores into the other's memory any more */
    if (ch && !ok(gpuport_memory_channel_destroy(ch), "gpuport_memory_channel_destroy"))
        failed = 1;
    if (mdst && !ok(gpuport_mem_deregister(mdst), "gpuport_mem_deregister(dst)"))
        failed = 1;
    if (msrc && !ok(gpuport_mem_deregister(msrc), "gpuport_mem_deregister(src)"))
        failed = 1;
    if (dst && !ok(gpuport_mem_free(comm, dst), "gpuport_mem_free"))
        failed = 1;
    if (src && !ok(gpuport_mem_free(comm, src), "gpuport_mem_free"))
        failed = 1;
    cudaFree(packets);
    cudaFree(rc);
    free(host);
    if (!ok(gpuport_comm_destroy(comm), "gpuport_comm_destroy"))
        failed = 1;
    if (failed)
        MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Finalize();
    return 0;
}
