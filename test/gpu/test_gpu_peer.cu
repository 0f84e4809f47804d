/*
 * Peer channels on GPUs (gpuport_peer_channel_create): one channel whose
 * operations go by the kernel's stores or through the proxy, by size. Two
 * processes (fork + socketpair bootstrap; on one GPU, GPUPORT_TEST_ONE_GPU=1,
 * their kernels run at once under MPS, scripts/with-mps.sh). Regions of
 * GPUPORT_TEST_MEM's kind (vmm when unset): VMM and pool memory take the
 * store path where the GPUs map each other (one GPU always does), unless
 * GPUPORT_PEER_PATH=proxy; cudaMalloc memory goes through the proxy.
 * Cases, every byte checked:
 *  - paths: the handle's store path is what the memory kind and the
 *    setting say, the same on both sides;
 *  - mixed rounds: 200 rounds of a small put (8 B .. 1 KiB: stores) and a
 *    large one (4 KiB .. 1 MiB: the proxy's copy engine) of the round's
 *    data, then one signal; the peer waits until its count reaches the
 *    round (wait_until), finds both ranges exact, and answers with a
 *    put_with_signal that rank 0 checks the same way: a signal covers the
 *    puts of both paths;
 *  - counts: 64 signals in a row, taken by one wait_until(64); poll then
 *    finds none;
 *  - get and atomic_add: rank 0 reads rank 1's destination back (both
 *    sizes) and adds to a word of it, checked after a flush;
 *  - block rounds: 50 rounds where a block of 256 threads puts 64 KiB by
 *    stores (put_with_signal_block) after 1 MiB through the proxy
 *    (put_block), the peer's block waits until its count reaches the round
 *    (wait_until_block) and checks every byte, every thread's status the
 *    same;
 *  - bad offsets: a put past the region is refused on both paths;
 *  - device_all: the array in device memory holds the peer's handle byte
 *    for byte as gpuport_peer_channel_device fills it, and zeroes its own.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu_check.h"
#include "gpu_pair.h"
#include "gpuport/gpuport_device.h"

#define REGION (4ull << 20)
#define SMALL_OFF 0ull
#define BIG_OFF (1ull << 20)
#define ROUNDS 200
#define NSIG 64
#define ADD_OFF (REGION - 8)

__host__ __device__ static inline unsigned char pat(int rank, int round, uint64_t i)
{
    return (unsigned char)(rank * 89 + round * 7 + (i * 131) % 251 + 1);
}

__device__ static uint64_t small_size(int r) { return 8ull << (r % 8); }      /* 8 .. 1 KiB */
__device__ static uint64_t big_size(int r) { return 4096ull << (r % 9); }     /* 4 KiB .. 1 MiB */

/* the round's data into this rank's source, both ranges */
__device__ static void fill(unsigned char *src, int rank, int r)
{
    for (uint64_t i = 0; i < small_size(r); i++)
        src[SMALL_OFF + i] = pat(rank, r, SMALL_OFF + i);
    for (uint64_t i = 0; i < big_size(r); i++)
        src[BIG_OFF + i] = pat(rank, r, BIG_OFF + i);
}

/* bytes of both ranges of `dst` that are not the peer's data of round r */
__device__ static unsigned long long check(const unsigned char *dst, int peer, int r)
{
    unsigned long long bad = 0;
    for (uint64_t i = 0; i < small_size(r); i++)
        bad += dst[SMALL_OFF + i] != pat(peer, r, SMALL_OFF + i);
    for (uint64_t i = 0; i < big_size(r); i++)
        bad += dst[BIG_OFF + i] != pat(peer, r, BIG_OFF + i);
    return bad;
}

__device__ static void note(int *rc, int st)
{
    if (st)
        atomicCAS(rc, 0, st);
}

/* Both ranks: rank 0 sends first each round; each side's round r is its
 * r-th signal, so wait_until(r) waits for exactly the peer's round r. */
static __global__ void k_rounds(gpuport_peer_channel_dev_t ch, unsigned char *src,
                                const unsigned char *dst, int rank, int *rc,
                                unsigned long long *bad)
{
    for (int r = 1; r <= ROUNDS; r++) {
        if (rank == 1) {
            note(rc, gpuport_peer_wait_until(&ch, (uint64_t)r));
            *bad += check(dst, 0, r);
        }
        fill(src, rank, r);
        if (rank == 0) {
            note(rc, gpuport_peer_put(&ch, SMALL_OFF, SMALL_OFF, small_size(r)));
            note(rc, gpuport_peer_put(&ch, BIG_OFF, BIG_OFF, big_size(r)));
            note(rc, gpuport_peer_signal(&ch));
            note(rc, gpuport_peer_wait_until(&ch, (uint64_t)r));
            *bad += check(dst, 1, r);
        } else {
            note(rc, gpuport_peer_put(&ch, BIG_OFF, BIG_OFF, big_size(r)));
            note(rc, gpuport_peer_put_with_signal(&ch, SMALL_OFF, SMALL_OFF, small_size(r)));
        }
        if (*rc)
            return;
    }
}

/* rank 0: NSIG signals; rank 1: one wait_until for all, then poll finds none */
static __global__ void k_counts(gpuport_peer_channel_dev_t ch, int rank, int *rc, int *left)
{
    if (rank == 0) {
        /* after a flush no proxy operation is in flight: these go by stores
         * where the channel has them */
        note(rc, gpuport_peer_flush(&ch));
        for (int i = 0; i < NSIG; i++)
            note(rc, gpuport_peer_signal(&ch));
        note(rc, gpuport_peer_flush(&ch));
    } else {
        note(rc, gpuport_peer_wait_until(&ch, ROUNDS + NSIG));
        *left = gpuport_peer_poll(&ch);
    }
}

/* rank 0: reads rank 1's destination back into its source (both sizes),
 * adds 5 to its last word, flushes */
static __global__ void k_get_add(gpuport_peer_channel_dev_t ch, int *rc, int *add_rc)
{
    note(rc, gpuport_peer_get(&ch, SMALL_OFF, SMALL_OFF, 64));
    note(rc, gpuport_peer_get(&ch, BIG_OFF, BIG_OFF, 1 << 20));
    *add_rc = gpuport_peer_atomic_add(&ch, ADD_OFF, 5);
    note(rc, gpuport_peer_flush(&ch));
}

#define BLK_ROUNDS 50
#define BLK_SMALL (64u << 10)
#define BLK_BIG (1u << 20)

/* the block's share of the round's data, both ranges */
__device__ static void fill_block(unsigned char *src, int rank, int r)
{
    for (uint64_t i = threadIdx.x; i < BLK_SMALL; i += blockDim.x)
        src[SMALL_OFF + i] = pat(rank, r, SMALL_OFF + i);
    for (uint64_t i = threadIdx.x; i < BLK_BIG; i += blockDim.x)
        src[BIG_OFF + i] = pat(rank, r, BIG_OFF + i);
}

__device__ static unsigned long long check_block(const unsigned char *dst, int peer, int r)
{
    unsigned long long bad = 0;
    for (uint64_t i = threadIdx.x; i < BLK_SMALL; i += blockDim.x)
        bad += dst[SMALL_OFF + i] != pat(peer, r, SMALL_OFF + i);
    for (uint64_t i = threadIdx.x; i < BLK_BIG; i += blockDim.x)
        bad += dst[BIG_OFF + i] != pat(peer, r, BIG_OFF + i);
    return bad;
}

/* base: the signals this rank received before (the earlier cases') */
static __global__ void k_block_rounds(gpuport_peer_channel_dev_t ch, unsigned char *src,
                                      const unsigned char *dst, int rank, uint64_t base,
                                      int *rc, unsigned long long *bad, int *mixed)
{
    for (int r = 1; r <= BLK_ROUNDS; r++) {
        int st[3];
        if (rank == 1) {
            st[0] = gpuport_peer_wait_until_block(&ch, base + r);
            atomicAdd(bad, check_block(dst, 0, r));
            __syncthreads(); /* every thread read the round before the source is rewritten */
        } else {
            st[0] = GPUPORT_OK;
        }
        fill_block(src, rank, r);
        st[1] = gpuport_peer_put_block(&ch, BIG_OFF, BIG_OFF, BLK_BIG);
        st[2] = gpuport_peer_put_with_signal_block(&ch, SMALL_OFF, SMALL_OFF, BLK_SMALL);
        if (rank == 0) {
            st[0] = gpuport_peer_wait_until_block(&ch, base + r);
            atomicAdd(bad, check_block(dst, 1, r));
            __syncthreads();
        }
        for (int k = 0; k < 3; k++) {
            /* every thread's status the same: thread 0's, shared through rc */
            if (threadIdx.x == 0)
                note(rc, st[k]);
            if (__syncthreads_or(st[k] != __shfl_sync(0xffffffffu, st[k], 0)))
                atomicAdd(mixed, 1);
        }
        if (__syncthreads_or(*(volatile int *)rc != 0))
            return;
    }
}

static __global__ void k_bad(gpuport_peer_channel_dev_t ch, int *out)
{
    out[0] = gpuport_peer_put(&ch, REGION - 4, 0, 8);          /* stores' size */
    out[1] = gpuport_peer_put(&ch, REGION - 4096, 0, 1 << 16); /* the proxy's size */
}

static void barrier(gpuport_bootstrap_t *bs)
{
    CHECK_OK(bs->barrier(bs->ctx));
}

int main(void)
{
    gpuport_bootstrap_t bs;
    pid_t child;
    gpuport_comm_t comm;
    gpuport_mem_t msrc, mdst;
    gpuport_peer_channel_t pc;
    gpuport_peer_channel_dev_t dev;
    unsigned char *src, *dst, *host;
    unsigned long long *d_bad, bad = 0;
    int *d_rc, rc = 0, *d_out, out[2];
    gpu_mem_kind_t kind;
    int rank, want_stores, adds = 0, adds_all[2] = {0, 0};
    const char *path;

    setvbuf(stdout, NULL, _IONBF, 0);
    if (!getenv("GPUPORT_TEST_MEM"))
        setenv("GPUPORT_TEST_MEM", "vmm", 1);
    rank = gpu_pair_fork(&bs, &child);
    bs.destroy = NULL;
    kind = gpu_mem_kind();
    path = getenv("GPUPORT_PEER_PATH");
    CHECK_OK(gpuport_comm_create(&bs, &comm));
    gpu_region_alloc(comm, REGION, (void **)&src);
    gpu_region_alloc(comm, REGION, (void **)&dst);
    CUDA_CHECK(cudaMemset(src, 0, REGION));
    CUDA_CHECK(cudaMemset(dst, 0, REGION));
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMalloc(&d_rc, sizeof(int)));
    CUDA_CHECK(cudaMemset(d_rc, 0, sizeof(int)));
    CUDA_CHECK(cudaMalloc(&d_bad, sizeof(*d_bad)));
    CUDA_CHECK(cudaMemset(d_bad, 0, sizeof(*d_bad)));
    CUDA_CHECK(cudaMalloc(&d_out, 2 * sizeof(int)));
    host = (unsigned char *)malloc(REGION);
    CHECK(host);
    CHECK_OK(gpuport_mem_register(comm, src, REGION, &msrc));
    CHECK_OK(gpuport_mem_register(comm, dst, REGION, &mdst));
    CHECK_OK(gpuport_peer_channel_create(comm, 1 - rank, msrc, mdst, &pc));
    CHECK_OK(gpuport_peer_channel_device(pc, &dev));

    /* device_all: every rank's handle in device memory, by rank */
    {
        gpuport_peer_channel_t all[2];
        gpuport_peer_channel_dev_t *d_all = NULL, back[2], zero;
        all[rank] = NULL;
        all[1 - rank] = pc;
        memset(&zero, 0, sizeof(zero));
        CHECK_OK(gpuport_peer_channel_device_all(comm, all, &d_all));
        CHECK(d_all != NULL);
        CUDA_CHECK(cudaMemcpy(back, d_all, sizeof(back), cudaMemcpyDeviceToHost));
        CHECK_MSG(memcmp(&back[1 - rank], &dev, sizeof(dev)) == 0,
                  "device_all: the peer's entry differs from gpuport_peer_channel_device's");
        CHECK_MSG(memcmp(&back[rank], &zero, sizeof(zero)) == 0,
                  "device_all: this rank's own entry is not zeroed");
        CHECK_OK(gpuport_mem_free(comm, d_all));
        if (rank == 0)
            printf("PASS device_all: the handles in device memory, by rank\n");
    }

    /* paths: one GPU maps itself; cudaMalloc and the proxy setting do not store */
    want_stores = kind != GPU_MEM_CUDAMALLOC && kind != GPU_MEM_DEFPOOL &&
                  !(path && strcmp(path, "proxy") == 0);
    CHECK_MSG(gpuport_peer_channel_stores(pc) == want_stores && (int)dev.stores == want_stores,
              "store path %d (handle %u), expected %d for %s memory, GPUPORT_PEER_PATH=%s",
              gpuport_peer_channel_stores(pc), dev.stores, want_stores,
              gpu_mem_kind_desc(kind), path ? path : "(unset)");
    if (rank == 0)
        printf("test_gpu_peer: %s memory, store path %s (up to %llu bytes a thread)\n",
               gpu_mem_kind_desc(kind), dev.stores ? "on" : "off",
               (unsigned long long)dev.store_max);
    barrier(&bs);

    /* mixed rounds */
    k_rounds<<<1, 1>>>(dev, src, dst, rank, d_rc, d_bad);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(&rc, d_rc, sizeof(int), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(&bad, d_bad, sizeof(bad), cudaMemcpyDeviceToHost));
    CHECK_MSG(rc == 0, "rounds: status %s", gpuport_status_string((gpuport_status_t)rc));
    CHECK_MSG(bad == 0, "rounds: %llu bytes wrong after the peer's signal", bad);
    if (rank == 0)
        printf("PASS %d rounds of a stored and a proxied put under one signal, both ways\n",
               ROUNDS);
    barrier(&bs);

    /* counts */
    {
        int *d_left, left = -99;
        CUDA_CHECK(cudaMalloc(&d_left, sizeof(int)));
        k_counts<<<1, 1>>>(dev, rank, d_rc, d_left);
        CUDA_CHECK(cudaDeviceSynchronize());
        CUDA_CHECK(cudaMemcpy(&rc, d_rc, sizeof(int), cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(&left, d_left, sizeof(int), cudaMemcpyDeviceToHost));
        CHECK_MSG(rc == 0, "counts: status %s", gpuport_status_string((gpuport_status_t)rc));
        if (rank == 1)
            CHECK_MSG(left == 0, "counts: poll after wait_until(%d) returned %d", ROUNDS + NSIG,
                      left);
        cudaFree(d_left);
        if (rank == 0)
            printf("PASS %d signals taken by one wait_until\n", NSIG);
    }
    barrier(&bs);

    /* get and atomic_add (rank 1's destination holds round ROUNDS's data) */
    if (rank == 0) {
        k_get_add<<<1, 1>>>(dev, d_rc, d_out);
        CUDA_CHECK(cudaDeviceSynchronize());
        CUDA_CHECK(cudaMemcpy(out, d_out, sizeof(int), cudaMemcpyDeviceToHost));
        /* by stores an add is an atomic; through the proxy, where the
         * transport carries adds */
        adds = dev.stores || (dev.port.rma_ops & (1u << GPUPORT_OP_ATOMIC_ADD));
        CHECK_MSG(out[0] == (adds ? GPUPORT_OK : GPUPORT_ERR_NOT_SUPPORTED),
                  "atomic_add returned %d (adds carried: %d)", out[0], adds);
        CUDA_CHECK(cudaMemcpy(&rc, d_rc, sizeof(int), cudaMemcpyDeviceToHost));
        CHECK_MSG(rc == 0, "get/add: status %s", gpuport_status_string((gpuport_status_t)rc));
        CUDA_CHECK(cudaMemcpy(host, src, REGION, cudaMemcpyDeviceToHost));
        /* the last round's small put was 8 << (ROUNDS % 8) bytes: those are that round's */
        for (uint64_t i = 0; i < (8ull << (ROUNDS % 8)); i++)
            CHECK_MSG(host[SMALL_OFF + i] == pat(0, ROUNDS, SMALL_OFF + i),
                      "get: byte %llu", (unsigned long long)i);
        for (uint64_t i = 0; i < (1 << 20); i++)
            if (i < (4096ull << (ROUNDS % 9)))
                CHECK_MSG(host[BIG_OFF + i] == pat(0, ROUNDS, BIG_OFF + i),
                          "get: byte %llu of the large range", (unsigned long long)i);
    }
    barrier(&bs);
    CHECK_OK(bs.allgather(bs.ctx, &adds, &adds_all, sizeof(int)));
    if (rank == 1) {
        uint64_t word;
        adds = adds_all[0];
        CUDA_CHECK(cudaMemcpy(&word, dst + ADD_OFF, 8, cudaMemcpyDeviceToHost));
        CHECK_MSG(word == (adds ? 5u : 0u), "atomic_add: the word is %llu, expected %d",
                  (unsigned long long)word, adds ? 5 : 0);
        printf("PASS get of both sizes and atomic_add\n");
    }
    barrier(&bs);

    /* block rounds */
    {
        int *d_mixed, mixed = 0;
        CUDA_CHECK(cudaMalloc(&d_mixed, sizeof(int)));
        CUDA_CHECK(cudaMemset(d_mixed, 0, sizeof(int)));
        CUDA_CHECK(cudaMemset(d_bad, 0, sizeof(*d_bad)));
        k_block_rounds<<<1, 256>>>(dev, src, dst, rank, rank == 0 ? ROUNDS : ROUNDS + NSIG, d_rc,
                                   d_bad, d_mixed);
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(cudaDeviceSynchronize());
        CUDA_CHECK(cudaMemcpy(&rc, d_rc, sizeof(int), cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(&bad, d_bad, sizeof(bad), cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(&mixed, d_mixed, sizeof(int), cudaMemcpyDeviceToHost));
        CHECK_MSG(rc == 0, "block rounds: status %s", gpuport_status_string((gpuport_status_t)rc));
        CHECK_MSG(bad == 0, "block rounds: %llu bytes wrong", bad);
        CHECK_MSG(mixed == 0, "block rounds: threads of one block got different statuses (%d)",
                  mixed);
        cudaFree(d_mixed);
        if (rank == 0)
            printf("PASS %d block rounds: 64 KiB by stores after 1 MiB by the proxy, one signal\n",
                   BLK_ROUNDS);
    }
    barrier(&bs);

    /* bad offsets */
    k_bad<<<1, 1>>>(dev, d_out);
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(out, d_out, sizeof(out), cudaMemcpyDeviceToHost));
    CHECK_MSG(out[0] == GPUPORT_ERR_OUT_OF_RANGE && out[1] == GPUPORT_ERR_OUT_OF_RANGE,
              "bad offsets: %d %d", out[0], out[1]);
    barrier(&bs);

    CHECK_OK(gpuport_peer_channel_destroy(pc));
    CHECK(gpuport_peer_channel_destroy(pc) == GPUPORT_ERR_INVALID_ARG);
    CHECK_OK(gpuport_mem_deregister(msrc));
    CHECK_OK(gpuport_mem_deregister(mdst));
    CHECK_OK(gpuport_comm_destroy(comm));
    barrier(&bs);
    gpu_region_free(src);
    gpu_region_free(dst);
    if (rank == 0)
        printf("PASS peer channel\n");
    gpu_pair_join(rank, child, 0);
    return 0;
}
