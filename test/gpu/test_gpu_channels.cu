/*
 * GPU port channels between two processes on two GPUs (fork + socketpair
 * bootstrap): kernels push put / signal / flush / wait and the data moves by
 * copy engine (cuda_ipc) from the flusher's private context, or, with
 * GPUPORT_TRANSPORT=tcp, over a socket through the flushers' staging copies;
 * the regions are of the memory kind GPUPORT_TEST_MEM names (gpu_pair.h).
 *  - integrity: sizes 1 B .. 1 GiB at random offsets, both directions at
 *    once, every byte and the guard bytes around it checked on the GPU;
 *  - ordering: a signal is never seen before the data of earlier puts, and
 *    after flush the source may be overwritten at once;
 *  - many pushers: 8192 threads, more than the FIFO's slots, each one
 *    put_with_signal; every operation arrives exactly once;
 *  - put_value: 8192 threads push put_value / put_value_with_signal at
 *    scattered aligned offsets, both directions at once; the receiver takes
 *    the signals and checks every value on the GPU; misaligned and
 *    out-of-range values are refused on the device;
 *  - bad triggers: a put outside the region is refused on the device, a raw
 *    trigger past the region is rejected by the proxy, the channel fails on
 *    both sides, and nothing outside the region changes;
 *  - forbidden pushes: CLOSE, a stray EXT, an unknown op and another
 *    channel's trigger, through the device helpers that take any op or
 *    trigger, are refused on the device before a slot is reserved; handles
 *    of another layout, or never filled, are refused by every call; the
 *    channel then still carries data both ways, the proxy rejected nothing;
 *  - merged puts: runs of puts that continue one another (one copy at the
 *    flusher) between puts that jump, every run whole, gaps untouched;
 *  - sequence numbers: a ping-pong of put_value_with_signal where every
 *    thread of a grid waits until the round's count (gpuport_wait_until) and
 *    then finds the round's value; no thread takes a signal from another,
 *    so the count and the consumed count end equal (a poll finds nothing);
 *  - the peer's close: once the peer destroyed its side in order, a kernel
 *    takes the signal sent before the close, then its poll, wait and
 *    wait_until past the count return
 *    GPUPORT_ERR_CLOSED (not a failure's GPUPORT_ERR_PEER), its put is
 *    refused by the proxy and its flush says GPUPORT_ERR_CLOSED, and so do
 *    the host's calls;
 *  - the host API on the same GPU channels;
 *  - scoped calls: 200 rounds each way of a block's put_with_signal_block,
 *    flush_block, then wait_block (and of 8 warps' _warp calls on their
 *    slices), the source written by the threads with no fence or barrier of
 *    their own and scribbled over after the flush, every byte checked by
 *    every thread after the wait, every thread's status the same; a put past
 *    the end first: GPUPORT_ERR_OUT_OF_RANGE in every thread, and the
 *    channel carries on; then 200 rounds of gpuport_barrier_block over two
 *    channels to the peer, each round's value of the peer found after it.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu_check.h"
#include "gpu_pair.h"
#include "gpuport/gpuport_device.h"

#define GIB (1ull << 30)

/* cuda_ipc unless the run forces another transport */
static const char *expected_transport(void)
{
    const char *t = getenv("GPUPORT_TRANSPORT");
    return t && strcmp(t, "auto") != 0 ? t : "cuda_ipc";
}

__host__ __device__ static unsigned char pat(int rank, uint64_t i)
{
    uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)(rank + 1) * 0xbf58476d1ce4e5b9ull;
    return (unsigned char)(x >> 56);
}

__global__ void fill(unsigned char *p, uint64_t n, int rank)
{
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x)
        p[i] = pat(rank, i);
}

/* counts bytes of dst[off, off+size) != pat(from, src_off + k), and guard
 * bytes around the range that are not 0 */
__global__ void verify(const unsigned char *dst, uint64_t off, uint64_t size, uint64_t src_off,
                       int from, uint64_t region, unsigned long long *bad)
{
    unsigned long long n = 0;
    for (uint64_t k = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; k < size;
         k += (uint64_t)gridDim.x * blockDim.x)
        n += dst[off + k] != pat(from, src_off + k);
    if (blockIdx.x == 0 && threadIdx.x < 64) {
        if (off >= 64 && dst[off - 1 - threadIdx.x] != 0)
            n++;
        if (off + size + threadIdx.x < region && dst[off + size + threadIdx.x] != 0)
            n++;
    }
    if (n)
        atomicAdd(bad, n);
}

__global__ void put_wait(gpuport_port_channel_dev_t ch, uint64_t dst_off, uint64_t src_off,
                         uint64_t size, int *rc)
{
    rc[0] = gpuport_put_with_signal(&ch, dst_off, src_off, size);
    rc[1] = rc[0] ? rc[0] : gpuport_wait(&ch);
}

typedef struct side {
    int rank;
    gpuport_comm_t comm;
    unsigned char *src, *dst;
    uint64_t region;
    gpuport_mem_t msrc, mdst;
    gpuport_channel_t ch;
    gpuport_port_channel_dev_t dev;
    int *rc;
    unsigned long long *bad;
    gpuport_bootstrap_t *bs;
} side_t;

static void side_open(side_t *s, gpuport_bootstrap_t *bs, uint64_t region)
{
    memset(s, 0, sizeof(*s));
    s->rank = bs->rank;
    s->bs = bs;
    s->region = region;
    CHECK_OK(gpuport_comm_create(bs, &s->comm));
    gpu_region_alloc(s->comm, region, (void **)&s->src);
    gpu_region_alloc(s->comm, region, (void **)&s->dst);
    CUDA_CHECK(cudaMalloc(&s->rc, 64 * sizeof(int)));
    CUDA_CHECK(cudaMalloc(&s->bad, sizeof(*s->bad)));
    fill<<<1024, 256>>>(s->src, region, s->rank);
    CUDA_CHECK(cudaMemset(s->dst, 0, region));
    CUDA_CHECK(cudaDeviceSynchronize());
    CHECK_OK(gpuport_mem_register(s->comm, s->src, region, &s->msrc));
    CHECK_OK(gpuport_mem_register(s->comm, s->dst, region, &s->mdst));
    CHECK_OK(gpuport_channel_create(s->comm, 1 - s->rank, s->msrc, s->mdst, &s->ch));
    CHECK(strcmp(gpuport_channel_transport(s->ch), expected_transport()) == 0);
    CHECK_OK(gpuport_channel_device(s->ch, &s->dev));
}

static void side_close(side_t *s)
{
    CHECK_OK(gpuport_comm_destroy(s->comm));
    if (gpu_mem_kind() == GPU_MEM_POOL)
        CHECK_OK(s->bs->barrier(s->bs->ctx)); /* the peer's imports are freed first */
    gpu_region_free(s->src);
    gpu_region_free(s->dst);
    cudaFree(s->rc);
    cudaFree(s->bad);
}

static int rcs(side_t *s, int i)
{
    int h[64];
    CUDA_CHECK(cudaMemcpy(h, s->rc, sizeof(h), cudaMemcpyDeviceToHost));
    return h[i];
}

static unsigned long long count_bad(side_t *s, uint64_t off, uint64_t size, uint64_t src_off)
{
    unsigned long long h = 0;
    CUDA_CHECK(cudaMemset(s->bad, 0, sizeof(*s->bad)));
    verify<<<1024, 256>>>(s->dst, off, size, src_off, 1 - s->rank, s->region, s->bad);
    CUDA_CHECK(cudaMemcpy(&h, s->bad, sizeof(h), cudaMemcpyDeviceToHost));
    return h;
}

static void integrity(gpuport_bootstrap_t *bs)
{
    static const uint64_t sizes[] = {1, 3, 4103, (1u << 20) + 13, 64u << 20, GIB};
    side_t s;
    uint64_t seed = 7;

    side_open(&s, bs, GIB + 8192);
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        uint64_t size = sizes[k], dst_off, src_off;
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        dst_off = 64 + (seed >> 20) % (s.region - size - 127);
        src_off = (seed >> 7) % (s.region - size + 1);
        CUDA_CHECK(cudaMemset(s.dst, 0, s.region));
        CUDA_CHECK(cudaDeviceSynchronize());
        CHECK_OK(bs->barrier(bs->ctx));
        put_wait<<<1, 1>>>(s.dev, dst_off, src_off, size, s.rc);
        CUDA_CHECK(cudaDeviceSynchronize());
        CHECK_MSG(rcs(&s, 0) == 0 && rcs(&s, 1) == 0, "size %llu: put %d wait %d",
                  (unsigned long long)size, rcs(&s, 0), rcs(&s, 1));
        unsigned long long bad = count_bad(&s, dst_off, size, src_off);
        CHECK_MSG(bad == 0, "size %llu at %llu: %llu bad bytes", (unsigned long long)size,
                  (unsigned long long)dst_off, bad);
        CHECK_OK(bs->barrier(bs->ctx));
    }
    CHECK_OK(gpuport_channel_flush(s.ch));
    side_close(&s);
    if (s.rank == 0)
        printf("PASS integrity: 1 B .. 1 GiB, random offsets, both directions at once\n");
}

/* Rounds alternate direction. The sender fills its source, put_with_signal,
 * flush, then at once scribbles over the source; the receiver checks the
 * data right after wait returns. */
__global__ void pingpong(gpuport_port_channel_dev_t ch, unsigned char *src,
                         const unsigned char *dst, int rank, int rounds, uint32_t bytes, int *rc)
{
    __shared__ int status;
    __shared__ int errors;
    if (threadIdx.x == 0) {
        status = 0;
        errors = 0;
    }
    __syncthreads();
    for (int r = 0; r < rounds && status == 0; r++) {
        if ((r & 1) == rank) {
            for (uint32_t i = threadIdx.x; i < bytes; i += blockDim.x)
                src[i] = (unsigned char)(r * 131 + i);
            __threadfence_system();
            __syncthreads();
            if (threadIdx.x == 0) {
                int st = gpuport_put_with_signal(&ch, 0, 0, bytes);
                if (!st)
                    st = gpuport_flush(&ch);
                status = st;
            }
            __syncthreads();
            for (uint32_t i = threadIdx.x; i < bytes; i += blockDim.x)
                src[i] = 0xff;
        } else {
            if (threadIdx.x == 0)
                status = gpuport_wait(&ch);
            __syncthreads();
            for (uint32_t i = threadIdx.x; i < bytes; i += blockDim.x)
                if (dst[i] != (unsigned char)(r * 131 + i))
                    atomicAdd(&errors, 1);
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        rc[0] = status;
        rc[1] = errors;
    }
}

static void ordering(gpuport_bootstrap_t *bs)
{
    side_t s;
    const int rounds = 2000;

    side_open(&s, bs, 1u << 20);
    CHECK_OK(bs->barrier(bs->ctx));
    pingpong<<<1, 256>>>(s.dev, s.src, s.dst, s.rank, rounds, 64u << 10, s.rc);
    CUDA_CHECK(cudaDeviceSynchronize());
    CHECK_MSG(rcs(&s, 0) == 0, "status %d", rcs(&s, 0));
    CHECK_MSG(rcs(&s, 1) == 0, "%d bytes seen before their data or after flush", rcs(&s, 1));
    side_close(&s);
    if (s.rank == 0)
        printf("PASS ordering: %d rounds of 64 KiB, data before signal, source reusable after "
               "flush\n", rounds);
}

__global__ void many_put(gpuport_port_channel_dev_t ch, uint32_t chunk, int *rc)
{
    uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
    int st = gpuport_put_with_signal(&ch, (uint64_t)t * chunk, (uint64_t)t * chunk, chunk);
    if (st)
        atomicAdd(&rc[2], 1);
}

__global__ void many_wait(gpuport_port_channel_dev_t ch, uint32_t n, int *rc)
{
    int st = 0;
    for (uint32_t i = 0; i < n && !st; i++)
        st = gpuport_wait(&ch);
    rc[0] = st;
    rc[1] = gpuport_poll(&ch); /* exactly n signals: none left */
}

static void many_pushers(gpuport_bootstrap_t *bs)
{
    side_t s;
    const uint32_t blocks = 64, threads = 128, chunk = 256, n = blocks * threads;

    setenv("GPUPORT_FIFO_SIZE", "64", 1);
    side_open(&s, bs, (uint64_t)n * chunk);
    unsetenv("GPUPORT_FIFO_SIZE");
    CUDA_CHECK(cudaMemset(s.rc, 0, 64 * sizeof(int)));
    CHECK_OK(bs->barrier(bs->ctx));
    if (s.rank == 0)
        many_put<<<blocks, threads>>>(s.dev, chunk, s.rc);
    else
        many_wait<<<1, 1>>>(s.dev, n, s.rc);
    CUDA_CHECK(cudaDeviceSynchronize());
    if (s.rank == 0) {
        CHECK_MSG(rcs(&s, 2) == 0, "%d pushes failed", rcs(&s, 2));
        CHECK_OK(gpuport_channel_flush(s.ch));
    } else {
        CHECK_MSG(rcs(&s, 0) == 0, "wait failed: %d", rcs(&s, 0));
        CHECK_MSG(rcs(&s, 1) == 0, "a signal more than the %u sent arrived", n);
        CHECK(count_bad(&s, 0, (uint64_t)n * chunk, 0) == 0);
    }
    CHECK_OK(bs->barrier(bs->ctx));
    side_close(&s);
    if (s.rank == 0)
        printf("PASS many pushers: %u threads, FIFO of 64, each op exactly once\n", n);
}

/* Signals from every lane, folded per warp (gpuport_signal): thread t of
 * the grid signals 1 + t % 3 times, so the warp's later rounds have fewer
 * lanes, and every 5th thread through a second copy of the handle; a FIFO
 * of 64 slots fills, so the pushing lanes wait for room. The receiver
 * must count exactly their sum: wait_until(sum), then nothing more. */
__host__ __device__ static uint32_t lane_signals(uint32_t t)
{
    return 1 + t % 3;
}

__global__ void lane_signal(gpuport_port_channel_dev_t ch, int *rc)
{
    gpuport_port_channel_dev_t copy = ch;
    uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;

    for (uint32_t i = 0; i < lane_signals(t); i++) {
        int st = t % 5 == 0 ? gpuport_signal(&copy) : gpuport_signal(&ch);
        if (st != GPUPORT_OK)
            atomicAdd(&rc[2], 1);
    }
}

__global__ void count_signals(gpuport_port_channel_dev_t ch, uint64_t n, int *rc)
{
    rc[0] = gpuport_wait_until(&ch, n);
    rc[1] = gpuport_poll(&ch); /* exactly n: none left */
}

static void folded_signals(gpuport_bootstrap_t *bs)
{
    side_t s;
    const uint32_t blocks = 8, threads = 96, n = blocks * threads;
    uint64_t sum = 0;

    for (uint32_t t = 0; t < n; t++)
        sum += lane_signals(t);
    setenv("GPUPORT_FIFO_SIZE", "64", 1);
    side_open(&s, bs, 1u << 20);
    unsetenv("GPUPORT_FIFO_SIZE");
    CUDA_CHECK(cudaMemset(s.rc, 0, 64 * sizeof(int)));
    CHECK_OK(bs->barrier(bs->ctx));
    if (s.rank == 0) {
        lane_signal<<<blocks, threads>>>(s.dev, s.rc);
        CUDA_CHECK(cudaDeviceSynchronize());
        CHECK_MSG(rcs(&s, 2) == 0, "%d signals failed", rcs(&s, 2));
        CHECK_OK(gpuport_channel_flush(s.ch));
    }
    CHECK_OK(bs->barrier(bs->ctx)); /* every signal delivered */
    if (s.rank == 1) {
        count_signals<<<1, 1>>>(s.dev, sum, s.rc);
        CUDA_CHECK(cudaDeviceSynchronize());
        CHECK_MSG(rcs(&s, 0) == GPUPORT_OK, "wait_until(%llu): %d", (unsigned long long)sum,
                  rcs(&s, 0));
        CHECK_MSG(rcs(&s, 1) == 0, "a signal more than the %llu sent arrived",
                  (unsigned long long)sum);
    }
    CHECK_OK(bs->barrier(bs->ctx));
    side_close(&s);
    if (s.rank == 0)
        printf("PASS folded signals: %u lanes, %llu signals, FIFO of 64, counted exactly\n", n,
               (unsigned long long)sum);
}

/* Puts by the lanes of warps (folded_puts). Pattern 0: lane g of the grid
 * puts 64 bytes at slot i * lanes + g of round i, so a warp's lanes lie
 * side by side (one trigger a warp and round); 1: each warp's lanes in
 * the other order (lane 31 lowest: every lane its own trigger); 2: lanes
 * 0-15 on channel a, 16-31 on channel b, side by side in each (two
 * triggers a warp and round). rc[2] counts failed puts. The __syncwarp
 * makes the lanes call together (converged), which the fold needs and
 * nothing else promises. */
__global__ void lane_puts(gpuport_port_channel_dev_t a, gpuport_port_channel_dev_t b,
                          int pattern, int per, int *rc)
{
    uint64_t lanes = (uint64_t)gridDim.x * blockDim.x;
    uint64_t g = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    uint64_t in_warp = g & 31, warp = g - in_warp;
    const gpuport_port_channel_dev_t *ch = pattern == 2 && in_warp >= 16 ? &b : &a;

    for (int i = 0; i < per; i++) {
        uint64_t slot = (uint64_t)i * lanes + (pattern == 1 ? warp + 31 - in_warp : g);
        __syncwarp();
        if (gpuport_put(ch, slot * 64, slot * 64, 64))
            atomicAdd(&rc[2], 1);
    }
}

/* One warp side by side at the end of the region: lanes 0-27 fit, 28-31
 * do not. rc[10 + lane] gets each lane's status. */
__global__ void lane_puts_past_end(gpuport_port_channel_dev_t ch, uint64_t region, int *rc)
{
    uint64_t off = region - 28 * 64 + (uint64_t)threadIdx.x * 64;
    __syncwarp();
    rc[10 + threadIdx.x] = gpuport_put(&ch, off, off, 64);
}

/* The sender's triggers carried out by its proxy, before and after. */
static uint64_t triggers_of(gpuport_comm_t comm)
{
    gpuport_comm_stats_t st;
    CHECK_OK(gpuport_comm_stats(comm, &st));
    return st.triggers;
}

static void folded_puts(gpuport_bootstrap_t *bs)
{
    const uint32_t blocks = 2, threads = 64, lanes = blocks * threads;
    const int per = 16;
    const uint64_t bytes = (uint64_t)lanes * per * 64, region = 1u << 20;
    uint64_t carried[3] = {0, 0, 0};
    gpuport_channel_t ch2;
    gpuport_port_channel_dev_t b;
    side_t s;

    side_open(&s, bs, region);
    CHECK_OK(gpuport_channel_create(s.comm, 1 - s.rank, s.msrc, s.mdst, &ch2));
    CHECK_OK(gpuport_channel_device(ch2, &b));
    for (int pattern = 0; pattern < 3; pattern++) {
        CUDA_CHECK(cudaMemset(s.dst, 0, region));
        CUDA_CHECK(cudaMemset(s.rc, 0, 64 * sizeof(int)));
        CUDA_CHECK(cudaDeviceSynchronize());
        CHECK_OK(bs->barrier(bs->ctx));
        if (s.rank == 0) {
            uint64_t t0 = triggers_of(s.comm);
            lane_puts<<<blocks, threads>>>(s.dev, b, pattern, per, s.rc);
            CUDA_CHECK(cudaDeviceSynchronize());
            CHECK_MSG(rcs(&s, 2) == 0, "pattern %d: %d puts failed", pattern, rcs(&s, 2));
            CHECK_OK(gpuport_channel_flush(s.ch));
            CHECK_OK(gpuport_channel_flush(ch2));
            carried[pattern] = triggers_of(s.comm) - t0;
        }
        CHECK_OK(bs->barrier(bs->ctx)); /* every put landed */
        if (s.rank == 1)
            CHECK_MSG(count_bad(&s, 0, bytes, 0) == 0,
                      "pattern %d: bytes wrong or beyond the %llu written", pattern,
                      (unsigned long long)bytes);
        CHECK_OK(bs->barrier(bs->ctx));
    }
    if (s.rank == 0) {
        /* the flushes add a few triggers; the folds cut 32 (16) to 1 */
        uint64_t rounds = (uint64_t)(lanes / 32) * per;
        CHECK_MSG(carried[0] <= rounds + 16, "side by side: %llu triggers for %llu warp rounds "
                  "(not folded)", (unsigned long long)carried[0], (unsigned long long)rounds);
        CHECK_MSG(carried[1] >= (uint64_t)lanes * per, "other order: %llu triggers for %llu "
                  "puts (folded, though no lane follows the lower one)",
                  (unsigned long long)carried[1], (unsigned long long)lanes * per);
        CHECK_MSG(carried[2] <= 2 * rounds + 16, "two channels: %llu triggers for %llu warp rounds",
                  (unsigned long long)carried[2], (unsigned long long)rounds);
    }
    /* a run past the end: each lane its own status, the fitting ones land */
    CUDA_CHECK(cudaMemset(s.dst, 0, region));
    CUDA_CHECK(cudaMemset(s.rc, 0, 64 * sizeof(int)));
    CUDA_CHECK(cudaDeviceSynchronize());
    CHECK_OK(bs->barrier(bs->ctx));
    if (s.rank == 0) {
        int h[64];
        lane_puts_past_end<<<1, 32>>>(s.dev, region, s.rc);
        CUDA_CHECK(cudaDeviceSynchronize());
        CUDA_CHECK(cudaMemcpy(h, s.rc, sizeof(h), cudaMemcpyDeviceToHost));
        for (int l = 0; l < 32; l++)
            CHECK_MSG(h[10 + l] == (l < 28 ? GPUPORT_OK : GPUPORT_ERR_OUT_OF_RANGE),
                      "past the end: lane %d got %d", l, h[10 + l]);
        CHECK_OK(gpuport_channel_flush(s.ch));
    }
    CHECK_OK(bs->barrier(bs->ctx));
    if (s.rank == 1)
        CHECK_MSG(count_bad(&s, region - 28 * 64, 28 * 64, region - 28 * 64) == 0,
                  "past the end: the 28 fitting lanes' bytes wrong, or bytes before them written");
    CHECK_OK(bs->barrier(bs->ctx));
    side_close(&s);
    if (s.rank == 0)
        printf("PASS folded puts: %u lanes x %d rounds of 64 B, side by side %llu triggers, "
               "other order %llu, two channels %llu; a run past the end: 28 lanes OK, 4 "
               "GPUPORT_ERR_OUT_OF_RANGE\n", lanes, per, (unsigned long long)carried[0],
               (unsigned long long)carried[1], (unsigned long long)carried[2]);
}

/* put_value from many threads: thread t writes its value into slot
 * (t * 0x9e3779b1) mod n of the peer's region, a permutation of the slots
 * (n a power of two, the factor odd), so every slot is written once, at
 * offsets scattered over the region; odd threads with the signal. */
__host__ __device__ static uint64_t slot_of(uint32_t t, uint32_t n)
{
    return (uint64_t)((t * 0x9e3779b1u) & (n - 1));
}

__host__ __device__ static uint64_t value_of(int rank, uint32_t t)
{
    return ((uint64_t)(rank + 1) << 56) ^ ((uint64_t)t * 0xbf58476d1ce4e5b9ull);
}

__global__ void values_put(gpuport_port_channel_dev_t ch, uint32_t n, int rank, int *rc)
{
    uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
    uint64_t off = slot_of(t, n) * 8;
    int st = t & 1 ? gpuport_put_value_with_signal(&ch, off, value_of(rank, t))
                   : gpuport_put_value(&ch, off, value_of(rank, t));
    if (st)
        atomicAdd(&rc[2], 1);
    if (t == 0) {
        /* refused on the device, nothing pushed */
        rc[3] = gpuport_put_value(&ch, 4, 1);
        rc[4] = gpuport_put_value_with_signal(&ch, (uint64_t)n * 8 - 4, 1);
        rc[5] = gpuport_put_value(&ch, (uint64_t)n * 8, 1);
        rc[6] = gpuport_put_value_with_signal(&ch, (uint64_t)n * 8, 1);
    }
}

/* after every value (a later kernel): one signal behind them all */
__global__ void values_close(gpuport_port_channel_dev_t ch, int *rc)
{
    rc[7] = gpuport_signal(&ch);
}

__global__ void values_wait(gpuport_port_channel_dev_t ch, uint32_t nsignals, int *rc)
{
    int st = 0;
    for (uint32_t i = 0; i < nsignals && !st; i++)
        st = gpuport_wait(&ch);
    rc[0] = st;
    rc[1] = gpuport_poll(&ch); /* exactly nsignals: none left */
}

__global__ void values_verify(const uint64_t *dst, uint32_t n, int from, unsigned long long *bad)
{
    for (uint32_t t = blockIdx.x * blockDim.x + threadIdx.x; t < n; t += gridDim.x * blockDim.x)
        if (dst[slot_of(t, n)] != value_of(from, t))
            atomicAdd(bad, 1ull);
}

static void values(gpuport_bootstrap_t *bs)
{
    side_t s;
    const uint32_t blocks = 64, threads = 128, n = blocks * threads;
    int h[8];
    unsigned long long hbad = 0;

    side_open(&s, bs, (uint64_t)n * 8);
    CUDA_CHECK(cudaMemset(s.rc, 0, 64 * sizeof(int)));
    CHECK_OK(bs->barrier(bs->ctx));
    values_put<<<blocks, threads>>>(s.dev, n, s.rank, s.rc);
    values_close<<<1, 1>>>(s.dev, s.rc);
    values_wait<<<1, 1>>>(s.dev, n / 2 + 1, s.rc);
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(h, s.rc, sizeof(h), cudaMemcpyDeviceToHost));
    CHECK_MSG(h[2] == 0 && h[7] == 0, "%d put_values failed, the last signal %d", h[2], h[7]);
    CHECK_MSG(h[3] == GPUPORT_ERR_INVALID_ARG && h[4] == GPUPORT_ERR_INVALID_ARG &&
                  h[5] == GPUPORT_ERR_OUT_OF_RANGE && h[6] == GPUPORT_ERR_OUT_OF_RANGE,
              "device refusals: %d %d %d %d", h[3], h[4], h[5], h[6]);
    CHECK_MSG(h[0] == 0, "wait failed: %d", h[0]);
    CHECK_MSG(h[1] == 0, "a signal more than the %u sent arrived", n / 2 + 1);
    CUDA_CHECK(cudaMemset(s.bad, 0, sizeof(*s.bad)));
    values_verify<<<64, 256>>>((const uint64_t *)s.dst, n, 1 - s.rank, s.bad);
    CUDA_CHECK(cudaMemcpy(&hbad, s.bad, sizeof(hbad), cudaMemcpyDeviceToHost));
    CHECK_MSG(hbad == 0, "%llu of %u values wrong", hbad, n);
    CHECK_OK(gpuport_channel_status(s.ch));
    CHECK_OK(bs->barrier(bs->ctx));
    side_close(&s);
    if (s.rank == 0)
        printf("PASS put_value: %u threads, values at scattered aligned offsets, both "
               "directions, refusals on the device\n", n);
}

__global__ void bad_puts(gpuport_port_channel_dev_t ch, uint64_t region, int *rc)
{
    uint64_t pos;
    rc[0] = gpuport_put(&ch, region - 8, 0, 16);          /* refused here */
    rc[1] = gpuport_put(&ch, 0, region, 1);
    rc[2] = gpuport_dev_check(&ch);                       /* still fine */
    /* bypass the device check, as a buggy kernel could */
    rc[3] = gpuport_dev_push_op(&ch, GPUPORT_OP_PUT_SIGNAL, region - 100, 0, 200, &pos);
    rc[4] = gpuport_flush(&ch);
}

__global__ void wait_one(gpuport_port_channel_dev_t ch, int *rc)
{
    rc[0] = gpuport_wait(&ch);
}

__global__ void guard_check(const unsigned char *p, uint64_t n, unsigned long long *bad)
{
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x)
        if (p[i] != 0x5a)
            atomicAdd(bad, 1ull);
}

static void bad_triggers(gpuport_bootstrap_t *bs)
{
    gpuport_comm_t comm;
    unsigned char *buf, *src;
    gpuport_mem_t mdst, msrc;
    gpuport_channel_t ch;
    gpuport_port_channel_dev_t dev;
    int *rc, h[8];
    unsigned long long *bad, hbad = 0;
    const uint64_t region = 1u << 20, guard = 1u << 16;

    setenv("GPUPORT_LOG_LEVEL", "none", 1);
    CHECK_OK(gpuport_comm_create(bs, &comm));
    unsetenv("GPUPORT_LOG_LEVEL");
    gpu_region_alloc(comm, region + 2 * guard, (void **)&buf);
    gpu_region_alloc(comm, region, (void **)&src);
    CUDA_CHECK(cudaMalloc(&rc, 8 * sizeof(int)));
    CUDA_CHECK(cudaMalloc(&bad, sizeof(*bad)));
    CUDA_CHECK(cudaMemset(buf, 0x5a, region + 2 * guard));
    CUDA_CHECK(cudaMemset(src, 0x11, region));
    CUDA_CHECK(cudaMemset(bad, 0, sizeof(*bad)));
    CHECK_OK(gpuport_mem_register(comm, buf + guard, region, &mdst));
    CHECK_OK(gpuport_mem_register(comm, src, region, &msrc));
    CHECK_OK(gpuport_channel_create(comm, 1 - bs->rank, msrc, mdst, &ch));
    CHECK_OK(gpuport_channel_device(ch, &dev));
    if (bs->rank == 0) {
        bad_puts<<<1, 1>>>(dev, region, rc);
        CUDA_CHECK(cudaDeviceSynchronize());
        CUDA_CHECK(cudaMemcpy(h, rc, sizeof(h), cudaMemcpyDeviceToHost));
        CHECK(h[0] == GPUPORT_ERR_OUT_OF_RANGE && h[1] == GPUPORT_ERR_OUT_OF_RANGE);
        CHECK(h[2] == GPUPORT_OK && h[3] == GPUPORT_OK);
        CHECK_MSG(h[4] == GPUPORT_ERR_OUT_OF_RANGE, "device flush returned %d", h[4]);
        CHECK_STATUS(gpuport_channel_status(ch), GPUPORT_ERR_OUT_OF_RANGE);
    } else {
        wait_one<<<1, 1>>>(dev, rc);
        CUDA_CHECK(cudaDeviceSynchronize());
        CUDA_CHECK(cudaMemcpy(h, rc, sizeof(h), cudaMemcpyDeviceToHost));
        CHECK_MSG(h[0] == GPUPORT_ERR_PEER, "device wait returned %d", h[0]);
        guard_check<<<256, 256>>>(buf, region + 2 * guard, bad);
        CUDA_CHECK(cudaMemcpy(&hbad, bad, sizeof(hbad), cudaMemcpyDeviceToHost));
        CHECK_MSG(hbad == 0, "%llu bytes changed by a rejected put", hbad);
    }
    CHECK_OK(bs->barrier(bs->ctx));
    setenv("GPUPORT_LOG_LEVEL", "none", 1);
    gpuport_comm_destroy(comm);
    unsetenv("GPUPORT_LOG_LEVEL");
    if (gpu_mem_kind() == GPU_MEM_POOL)
        CHECK_OK(bs->barrier(bs->ctx)); /* the peer's imports are freed first */
    gpu_region_free(buf);
    gpu_region_free(src);
    cudaFree(rc);
    cudaFree(bad);
    if (bs->rank == 0)
        printf("PASS bad triggers: refused on the device, rejected by the proxy, both sides "
               "failed, guard bytes intact\n");
}

__global__ void forbidden(gpuport_port_channel_dev_t ch, int *rc)
{
    gpuport_port_channel_dev_t other = ch, zero;
    gpuport_trigger_t t[2];
    uint64_t pos;

    rc[0] = gpuport_dev_push_op(&ch, GPUPORT_OP_CLOSE, 0, 0, 0, &pos);
    rc[1] = gpuport_dev_push_op(&ch, GPUPORT_OP_EXT, 0, 0, 0, &pos);
    rc[2] = gpuport_dev_push_op(&ch, GPUPORT_OP_NONE, 0, 0, 0, &pos);
    gpuport_trigger_encode(&t[0], GPUPORT_OP_SIGNAL, ch.id + 1, 0, 0, 0);
    rc[3] = gpuport_dev_fifo_push(&ch, t, 1, &pos);
    gpuport_trigger_encode_ext(&t[0], ch.id, 1ull << 40, 0, 0);
    gpuport_trigger_encode(&t[1], GPUPORT_OP_FLUSH, ch.id, 0, 0, 0);
    rc[4] = gpuport_dev_fifo_push(&ch, t, 2, &pos);
    other.layout = GPUPORT_LAYOUT(GPUPORT_CHANNEL_DEV_VERSION + 1, gpuport_port_channel_dev_t);
    memset(&zero, 0, sizeof(zero));
    rc[5] = gpuport_put(&other, 0, 0, 8);
    rc[6] = gpuport_signal(&zero);
    rc[7] = gpuport_flush(&zero);
    rc[8] = gpuport_poll(&zero);
    rc[9] = gpuport_wait(&other);
    rc[10] = gpuport_put_value(&zero, 0, 1);
    /* nothing was reserved and left unwritten: the FIFO still flows */
    rc[11] = gpuport_put_with_signal(&ch, 0, 0, 4096);
    rc[12] = gpuport_wait(&ch);
    rc[13] = gpuport_flush(&ch);
}

static void forbidden_pushes(gpuport_bootstrap_t *bs)
{
    side_t s;
    gpuport_comm_stats_t stats;
    int h[14];
    struct {
        gpuport_port_channel_dev_t d;
        unsigned char after[16];
    } old;

    side_open(&s, bs, 1u << 20);
    CHECK(s.dev.layout == GPUPORT_CHANNEL_DEV_LAYOUT);
    /* a program of other headers gets no handle (test_layouts: host-only) */
    memset(&old, 0x5a, sizeof(old));
    setenv("GPUPORT_LOG_LEVEL", "none", 1);
    CHECK_STATUS(gpuport_channel_device_v(GPUPORT_LAYOUT(0, gpuport_fifo_dev_t), s.ch, &old.d),
                 GPUPORT_ERR_VERSION);
    unsetenv("GPUPORT_LOG_LEVEL");
    for (size_t i = 0; i < sizeof(old); i++)
        CHECK(((const unsigned char *)&old)[i] == 0x5a);
    CHECK_OK(bs->barrier(bs->ctx));
    forbidden<<<1, 1>>>(s.dev, s.rc);
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(h, s.rc, sizeof(h), cudaMemcpyDeviceToHost));
    for (int i = 0; i <= 4; i++)
        CHECK_MSG(h[i] == GPUPORT_ERR_INVALID_ARG, "forbidden push %d returned %d", i, h[i]);
    for (int i = 5; i <= 10; i++)
        CHECK_MSG(h[i] == GPUPORT_ERR_VERSION, "call %d on a handle of another layout returned %d",
                  i, h[i]);
    CHECK_MSG(h[11] == 0 && h[12] == 0 && h[13] == 0, "put %d, wait %d, flush %d afterwards",
              h[11], h[12], h[13]);
    CHECK(count_bad(&s, 0, 4096, 0) == 0);
    CHECK_OK(gpuport_channel_status(s.ch));
    CHECK_OK(gpuport_comm_stats(s.comm, &stats));
    CHECK_MSG(stats.rejected == 0, "the proxy rejected %llu triggers",
              (unsigned long long)stats.rejected);
    CHECK_OK(bs->barrier(bs->ctx));
    side_close(&s);
    if (s.rank == 0)
        printf("PASS forbidden pushes: CLOSE, stray EXT, unknown op, another channel refused on "
               "the device; handles of another layout refused; the channel unharmed\n");
}

/* Runs of puts whose sources and destinations continue one another (the
 * flusher merges them into one copy) between puts that jump: every run
 * lands whole, and the zero gaps between runs stay zero. Both directions at
 * once; each side draws the peer's plan from the same seed to verify it. */
#define MERGE_ROUNDS 20
#define MERGE_MAX_RUNS 8
#define MERGE_MAX_PUTS 16

typedef struct {
    uint64_t dst, src, total;
    int nputs;
    uint64_t sizes[MERGE_MAX_PUTS];
} merge_run_t;

static uint64_t merge_rng(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static int merge_plan(int sender, int round, uint64_t region, merge_run_t *runs)
{
    uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(round + 1) + (uint64_t)sender * 7919u + 1;
    uint64_t at = 64;
    int n = 1 + (int)(merge_rng(&x) % MERGE_MAX_RUNS);

    for (int r = 0; r < n; r++) {
        merge_run_t *m = &runs[r];
        m->nputs = 1 + (int)(merge_rng(&x) % MERGE_MAX_PUTS);
        m->total = 0;
        for (int k = 0; k < m->nputs; k++) {
            m->sizes[k] = 1 + merge_rng(&x) % 4096;
            m->total += m->sizes[k];
        }
        m->dst = at;
        m->src = merge_rng(&x) % (region - m->total);
        at += m->total + 64 + merge_rng(&x) % 1000; /* a gap the verify kernel checks */
    }
    return n;
}

static void merged_puts(gpuport_bootstrap_t *bs)
{
    const uint64_t region = 1u << 20;
    merge_run_t mine[MERGE_MAX_RUNS], theirs[MERGE_MAX_RUNS];
    side_t s;

    side_open(&s, bs, region);
    for (int round = 0; round < MERGE_ROUNDS; round++) {
        int n = merge_plan(s.rank, round, region, mine);
        int m = merge_plan(1 - s.rank, round, region, theirs);
        CUDA_CHECK(cudaMemset(s.dst, 0, region));
        CUDA_CHECK(cudaDeviceSynchronize());
        CHECK_OK(bs->barrier(bs->ctx));
        for (int r = 0; r < n; r++) {
            uint64_t d = mine[r].dst, sr = mine[r].src;
            for (int k = 0; k < mine[r].nputs; k++) {
                CHECK_OK(gpuport_channel_put(s.ch, d, sr, mine[r].sizes[k]));
                d += mine[r].sizes[k];
                sr += mine[r].sizes[k];
            }
        }
        CHECK_OK(gpuport_channel_signal(s.ch));
        CHECK_OK(gpuport_channel_flush(s.ch));
        CHECK_OK(gpuport_channel_wait(s.ch));
        for (int r = 0; r < m; r++)
            CHECK_MSG(count_bad(&s, theirs[r].dst, theirs[r].total, theirs[r].src) == 0,
                      "round %d run %d: %d puts, %llu bytes at %llu from %llu: bytes wrong or a "
                      "gap written",
                      round, r, theirs[r].nputs, (unsigned long long)theirs[r].total,
                      (unsigned long long)theirs[r].dst, (unsigned long long)theirs[r].src);
        CHECK_OK(bs->barrier(bs->ctx));
    }
    side_close(&s);
    if (s.rank == 0)
        printf("PASS merged puts: %d rounds of up to %d runs of up to %d contiguous puts, every "
               "run whole, gaps untouched\n",
               MERGE_ROUNDS, MERGE_MAX_RUNS, MERGE_MAX_PUTS);
}

/* Round k of SEQ_ROUNDS: rank 0's first thread puts k at offset 0 with a
 * signal; every thread of rank 1's grid waits until its count is k, finds
 * at least k there (a later round's value may already have come), and its
 * first thread answers 1000 + k at offset 8 with a signal, which every
 * thread of rank 0's grid waits for likewise. */
#define SEQ_ROUNDS 500
__global__ void sequenced(gpuport_port_channel_dev_t ch, const unsigned char *dst, int rank,
                          int *rc)
{
    const volatile uint64_t *got = (const volatile uint64_t *)(dst + (rank == 0 ? 8 : 0));
    const uint64_t add = rank == 0 ? 1000 : 0;
    int first = blockIdx.x == 0 && threadIdx.x == 0, st = 0;

    for (uint64_t k = 1; k <= SEQ_ROUNDS && !st; k++) {
        if (rank == 0 && first)
            st = gpuport_put_value_with_signal(&ch, 0, k);
        if (!st)
            st = gpuport_wait_until(&ch, k);
        if (!st && *got < add + k)
            atomicAdd(&rc[1], 1);
        if (!st && rank == 1 && first)
            st = gpuport_put_value_with_signal(&ch, 8, 1000 + k);
    }
    if (st)
        atomicCAS(&rc[0], 0, st);
    if (first && !st) {
        uint64_t count = 0;
        st = gpuport_signal_count(&ch, &count);
        rc[2] = st ? st : (int)count;
        rc[3] = gpuport_wait_until(&ch, SEQ_ROUNDS / 2); /* passed: at once */
    }
}

__global__ void seq_left(gpuport_port_channel_dev_t ch, int *rc)
{
    rc[4] = gpuport_poll(&ch); /* every signal taken by the waits that compared */
}

static void sequence_numbers(gpuport_bootstrap_t *bs)
{
    side_t s;
    int h[5];

    side_open(&s, bs, 1u << 20);
    CUDA_CHECK(cudaMemset(s.rc, 0, 64 * sizeof(int)));
    CHECK_OK(bs->barrier(bs->ctx));
    sequenced<<<8, 128>>>(s.dev, s.dst, s.rank, s.rc);
    CUDA_CHECK(cudaDeviceSynchronize());
    seq_left<<<1, 1>>>(s.dev, s.rc);
    CUDA_CHECK(cudaMemcpy(h, s.rc, sizeof(h), cudaMemcpyDeviceToHost));
    CHECK_MSG(h[0] == 0, "sequenced: status %d", h[0]);
    CHECK_MSG(h[1] == 0, "sequenced: %d threads found an earlier round's value at their count",
              h[1]);
    CHECK_MSG(h[2] == SEQ_ROUNDS && h[3] == GPUPORT_OK && h[4] == 0,
              "sequenced: count %d (expected %d), wait_until of a passed count %d, poll %d",
              h[2], SEQ_ROUNDS, h[3], h[4]);
    CHECK_OK(bs->barrier(bs->ctx));
    side_close(&s);
    if (s.rank == 0)
        printf("PASS sequence numbers: %d rounds, 1024 threads a side waiting until each "
               "round's count\n", SEQ_ROUNDS);
}

/* After the peer's close: the signal from before it, then the close. */
__global__ void after_close(gpuport_port_channel_dev_t ch, int *rc)
{
    uint64_t count = 0;

    rc[0] = gpuport_poll(&ch); /* 1: the signal sent before the close */
    rc[1] = gpuport_poll(&ch);
    rc[2] = gpuport_wait(&ch);
    rc[3] = gpuport_put(&ch, 0, 0, 64); /* says the close; the proxy refuses it */
    rc[4] = gpuport_flush(&ch);
    rc[5] = gpuport_wait(&ch);
    rc[6] = gpuport_wait_until(&ch, 2); /* the count is 1, and final */
    /* the failed wait claimed signal 2 at its start and gave it back */
    rc[10] = (int)*(volatile unsigned long long *)ch.consumed;
    rc[7] = gpuport_wait_until(&ch, 1);
    rc[8] = gpuport_signal_count(&ch, &count);
    rc[9] = (int)count;
}

/* every lane of 64 signals after the close: each gets GPUPORT_ERR_CLOSED
 * (the lanes of a warp push one trigger and share its status) */
__global__ void signals_after_close(gpuport_port_channel_dev_t ch, int *rc)
{
    if (gpuport_signal(&ch) != GPUPORT_ERR_CLOSED)
        atomicAdd(&rc[11], 1);
}

static void peer_close(gpuport_bootstrap_t *bs)
{
    const uint64_t region = 2u << 20;
    side_t s;
    gpuport_status_t st = GPUPORT_OK;
    int h[12];

    side_open(&s, bs, region);
    /* signals are taken on the device only (host and device waiters count
     * them apart) */
    if (s.rank == 1) {
        put_wait<<<1, 1>>>(s.dev, 0, 0, 4096, s.rc); /* its wait: rank 0's signal below */
        CUDA_CHECK(cudaDeviceSynchronize());
        CHECK_MSG(rcs(&s, 0) == GPUPORT_OK && rcs(&s, 1) == GPUPORT_OK, "put %d, wait %d",
                  rcs(&s, 0), rcs(&s, 1));
        CHECK_OK(gpuport_channel_destroy(s.ch)); /* the close, in order behind the put */
        s.ch = NULL;
        CHECK_OK(bs->barrier(bs->ctx)); /* rank 0 has looked */
        side_close(&s);
        return;
    }
    CHECK_OK(gpuport_channel_put_with_signal(s.ch, 0, 0, 64)); /* for rank 1's kernel */
    for (int i = 0; i < 200000 && (st = gpuport_channel_status(s.ch)) == GPUPORT_OK; i++)
        usleep(100); /* 20 s at most */
    CHECK_MSG(st == GPUPORT_ERR_CLOSED, "status after the peer's close: %s",
              gpuport_status_string(st));
    /* first, before any device call of this rank has seen the close: the
     * pushes read the channel's end from its device copy, which the host's
     * status call above wrote before it returned GPUPORT_ERR_CLOSED */
    signals_after_close<<<1, 64>>>(s.dev, s.rc);
    after_close<<<1, 1>>>(s.dev, s.rc); /* its put's refusal is logged, a warning */
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(h, s.rc, sizeof(h), cudaMemcpyDeviceToHost));
    CHECK_MSG(h[0] == 1, "device poll of the signal sent before the close: %d", h[0]);
    CHECK_MSG(count_bad(&s, 0, 4096, 0) == 0, "the put before the close is not whole");
    CHECK_MSG(h[1] == GPUPORT_ERR_CLOSED && h[2] == GPUPORT_ERR_CLOSED,
              "device poll %d, wait %d after the close (GPUPORT_ERR_CLOSED is %d)", h[1], h[2],
              GPUPORT_ERR_CLOSED);
    CHECK_MSG(h[3] == GPUPORT_ERR_CLOSED && h[4] == GPUPORT_ERR_CLOSED &&
                  h[5] == GPUPORT_ERR_CLOSED,
              "device put %d, flush %d, wait %d after the close", h[3], h[4], h[5]);
    CHECK_MSG(h[6] == GPUPORT_ERR_CLOSED && h[7] == GPUPORT_OK && h[8] == GPUPORT_OK &&
                  h[9] == 1,
              "device wait_until(2) %d, wait_until(1) %d, signal_count %d (count %d) after the "
              "close",
              h[6], h[7], h[8], h[9]);
    CHECK_MSG(h[10] == 1, "the consumed count after a failed wait_until(2): %d (1: nothing taken)",
              h[10]);
    CHECK_MSG(h[11] == 0, "%d of 64 lanes' signals after the close did not return "
              "GPUPORT_ERR_CLOSED", h[11]);
    CHECK_STATUS(gpuport_channel_status(s.ch), GPUPORT_ERR_CLOSED);
    CHECK_STATUS(gpuport_channel_put(s.ch, 0, 0, 64), GPUPORT_ERR_CLOSED);
    CHECK_STATUS(gpuport_channel_flush(s.ch), GPUPORT_ERR_CLOSED);
    /* the host counts signals apart from the device (gpuport.h): the one
     * sent before the close is still the host's to take, then the close */
    CHECK_STATUS(gpuport_channel_wait(s.ch), GPUPORT_OK);
    CHECK_STATUS(gpuport_channel_wait(s.ch), GPUPORT_ERR_CLOSED);
    CHECK_OK(bs->barrier(bs->ctx));
    side_close(&s);
    printf("PASS the peer's close on %s channels: the signal before it taken, then "
           "GPUPORT_ERR_CLOSED on the device and the host\n", expected_transport());
}

/* Thread 0 waits for a signal that never comes: the peer closes. Then
 * every thread pushes (a signal, a put), with no host call of this rank
 * between: each must say the close, which the device copy of the
 * channel's end has from the wait (gpuport_dev_note_end). rc[0]: the
 * wait's status; rc[1]: threads whose push did not say it. */
__global__ void wait_then_push(gpuport_port_channel_dev_t ch, int *rc)
{
    __shared__ int waited;

    if (threadIdx.x == 0)
        waited = gpuport_wait(&ch);
    __syncthreads();
    if (threadIdx.x == 0)
        rc[0] = waited;
    if (gpuport_signal(&ch) != GPUPORT_ERR_CLOSED)
        atomicAdd(&rc[1], 1);
    if (gpuport_put(&ch, 0, 0, 64) != GPUPORT_ERR_CLOSED)
        atomicAdd(&rc[1], 1);
}

/* Two channels to the peer, which closes both. On channel a, thread 0
 * of a kernel waits across the close, then every thread pushes, with no
 * host call of this rank between (wait_then_push). Channel b's close is
 * reported by gpuport_channel_status before b has a kernel's handle; the
 * handle made after it must carry the end: its pushes say the close. */
static void device_saw_close(gpuport_bootstrap_t *bs)
{
    side_t s;
    gpuport_channel_t b = NULL;
    gpuport_port_channel_dev_t db;
    gpuport_status_t st = GPUPORT_OK;
    int h[12];

    side_open(&s, bs, 1u << 20);
    CHECK_OK(gpuport_channel_create(s.comm, 1 - s.rank, s.msrc, s.mdst, &b));
    if (s.rank == 1) {
        CHECK_OK(bs->barrier(bs->ctx)); /* rank 0's kernel is launched */
        CHECK_OK(gpuport_channel_destroy(s.ch));
        s.ch = NULL;
        CHECK_OK(gpuport_channel_destroy(b));
        CHECK_OK(bs->barrier(bs->ctx));
        side_close(&s);
        return;
    }
    CUDA_CHECK(cudaMemset(s.rc, 0, sizeof(h)));
    wait_then_push<<<1, 64>>>(s.dev, s.rc);
    CHECK_OK(bs->barrier(bs->ctx));
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(h, s.rc, sizeof(h), cudaMemcpyDeviceToHost));
    CHECK_MSG(h[0] == GPUPORT_ERR_CLOSED, "device wait across the peer's close: %d", h[0]);
    CHECK_MSG(h[1] == 0, "%d of 128 pushes after a device wait saw the close did not return "
              "GPUPORT_ERR_CLOSED", h[1]);
    for (int i = 0; i < 200000 && (st = gpuport_channel_status(b)) == GPUPORT_OK; i++)
        usleep(100); /* 20 s at most */
    CHECK_MSG(st == GPUPORT_ERR_CLOSED, "status of the second channel after the peer's close: %s",
              gpuport_status_string(st));
    CHECK_OK(gpuport_channel_device(b, &db));
    signals_after_close<<<1, 64>>>(db, s.rc);
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(h, s.rc, sizeof(h), cudaMemcpyDeviceToHost));
    CHECK_MSG(h[11] == 0, "%d of 64 lanes' signals through a handle made after the close was "
              "reported did not return GPUPORT_ERR_CLOSED", h[11]);
    CHECK_OK(gpuport_channel_destroy(b));
    CHECK_OK(bs->barrier(bs->ctx));
    side_close(&s);
    printf("PASS pushes after a device wait saw the peer's close, and through a handle made after "
           "the host reported it: GPUPORT_ERR_CLOSED\n");
}

static void host_api(gpuport_bootstrap_t *bs)
{
    side_t s;
    side_open(&s, bs, 1u << 20);
    CHECK_OK(gpuport_channel_put_with_signal(s.ch, 4096, 8192, 100000));
    CHECK_OK(gpuport_channel_wait(s.ch));
    CHECK(count_bad(&s, 4096, 100000, 8192) == 0);
    CHECK_OK(gpuport_channel_flush(s.ch));
    {
        /* the flusher's CUDA completions are counted: the copy and the
         * write-value of cuda_ipc, or tcp's staging copy */
        gpuport_comm_stats_t stats;
        CHECK_OK(gpuport_comm_stats(s.comm, &stats));
        CHECK_MSG(stats.flusher_items >= (gpu_mem_mapped() ? 1u : 2u),
                  "%llu flusher items counted after a put_with_signal",
                  (unsigned long long)stats.flusher_items);
    }
    CHECK_STATUS(gpuport_channel_put(s.ch, (1u << 20) - 4, 0, 8), GPUPORT_ERR_OUT_OF_RANGE);
    {
        /* a value from the host into the peer's GPU memory, over the bytes
         * of the put above: it lands after it, whole */
        const uint64_t v = 0x0123456789abcdefull + (uint64_t)s.rank, at = 4096 + 64;
        uint64_t got = 0;
        CHECK_STATUS(gpuport_channel_put_value(s.ch, at + 4, v), GPUPORT_ERR_INVALID_ARG);
        CHECK_STATUS(gpuport_channel_put_value(s.ch, 1u << 20, v), GPUPORT_ERR_OUT_OF_RANGE);
        CHECK_OK(bs->barrier(bs->ctx));
        CHECK_OK(gpuport_channel_put_value_with_signal(s.ch, at, v));
        CHECK_OK(gpuport_channel_wait(s.ch));
        CUDA_CHECK(cudaMemcpy(&got, s.dst + at, 8, cudaMemcpyDeviceToHost));
        CHECK_MSG(got == 0x0123456789abcdefull + (uint64_t)(1 - s.rank), "value 0x%llx",
                  (unsigned long long)got);
        CHECK_OK(gpuport_channel_flush(s.ch));
    }
    CHECK_OK(bs->barrier(bs->ctx));
    if (gpu_mem_mapped()) {
        /* cudaMalloc memory, as destination and as source, is refused on
         * both sides, with a reason */
        gpuport_channel_t bad_ch = NULL;
        gpuport_mem_t mplain;
        void *plain;
        gpuport_status_t st;
        CUDA_CHECK(cudaMalloc(&plain, 4096));
        CHECK_OK(gpuport_mem_register(s.comm, plain, 4096, &mplain));
        st = gpuport_channel_create(s.comm, 1 - s.rank, s.msrc, mplain, &bad_ch);
        CHECK_MSG(st == GPUPORT_ERR_NOT_SUPPORTED || st == GPUPORT_ERR_PEER,
                  "tcp channel into cudaMalloc memory: %s", gpuport_status_string(st));
        CHECK(bad_ch == NULL);
        st = gpuport_channel_create(s.comm, 1 - s.rank, mplain, s.mdst, &bad_ch);
        CHECK_MSG(st == GPUPORT_ERR_NOT_SUPPORTED || st == GPUPORT_ERR_PEER,
                  "tcp channel from cudaMalloc memory: %s", gpuport_status_string(st));
        CHECK(bad_ch == NULL);
        CHECK_OK(gpuport_mem_deregister(mplain));
        cudaFree(plain);
    }
    side_close(&s);
    if (s.rank == 0)
        printf("PASS host API on %s channels\n", expected_transport());
}

/* Rounds alternate direction, as pingpong's, by the block (warp == 0) or by
 * each warp on its slice of `bytes`. rc[0]: the first failure; rc[1]: bytes
 * seen wrong; rc[2]: calls whose status differed between the threads. */
__global__ void scoped_pingpong(gpuport_port_channel_dev_t ch, unsigned char *src,
                                const unsigned char *dst, int rank, int rounds, uint32_t bytes,
                                int warp, int *rc)
{
    uint32_t t = threadIdx.x, nt = blockDim.x, part = bytes / (nt / 32);
    uint32_t lo = warp ? t / 32 * part : 0, hi = warp ? lo + part : bytes;
    uint32_t step = warp ? 32 : nt, mine = warp ? lo + t % 32 : t;
    int st = warp ? gpuport_put_warp(&ch, ch.dst_size - 8, 0, 16)
                  : gpuport_put_block(&ch, ch.dst_size - 8, 0, 16);
    int errors = 0, mixed = st != GPUPORT_ERR_OUT_OF_RANGE;

    for (int r = 0; r < rounds; r++) {
        if ((r & 1) == rank) {
            for (uint32_t i = mine; i < hi; i += step)
                src[i] = (unsigned char)(r * 131 + i);
            st = warp ? gpuport_put_with_signal_warp(&ch, lo, lo, hi - lo)
                      : gpuport_put_with_signal_block(&ch, 0, 0, bytes);
            if (!st)
                st = warp ? gpuport_flush_warp(&ch) : gpuport_flush_block(&ch);
            for (uint32_t i = mine; i < hi; i += step)
                src[i] = 0xff;
        } else {
            st = warp ? gpuport_wait_warp(&ch) : gpuport_wait_block(&ch);
            if (warp)
                __syncthreads(); /* every warp's signal taken: every slice here */
            for (uint32_t i = 0; !st && i < bytes; i++)
                errors += dst[i] != (unsigned char)(r * 131 + i);
        }
        int ok = __syncthreads_count(st == 0);
        mixed += ok != 0 && ok != (int)nt;
        if (ok != (int)nt)
            break;
    }
    if (st)
        atomicCAS(&rc[0], 0, st);
    if (errors)
        atomicAdd(&rc[1], errors);
    if (mixed)
        atomicAdd(&rc[2], mixed);
}

/* 200 rounds: the block's value for round r into the peer's slot r % 2 by
 * chs[0], gpuport_barrier_block over both channels, then every thread
 * reads the peer's value of the round in its slot. */
__global__ void scoped_barrier(const gpuport_port_channel_dev_t *chs, const unsigned char *dst,
                               int rank, int *rc)
{
    int st = 0, bad = 0;
    for (int r = 0; r < 200 && !st; r++) {
        st = gpuport_put_value_block(&chs[0], 8 * (r % 2), 1000ull * rank + r + 1);
        if (!st)
            st = gpuport_barrier_block(chs, 2);
        if (!st && *(const volatile unsigned long long *)(dst + 8 * (r % 2)) !=
                       1000ull * (1 - rank) + r + 1)
            bad++;
    }
    if (st)
        atomicCAS(&rc[0], 0, st);
    if (bad)
        atomicAdd(&rc[1], bad);
}

static void scoped(gpuport_bootstrap_t *bs)
{
    side_t s;
    gpuport_channel_t ch2;
    gpuport_port_channel_dev_t chs[2], *d_chs;
    const int rounds = 200;

    side_open(&s, bs, 1u << 20);
    for (int warp = 0; warp < 2; warp++) {
        CUDA_CHECK(cudaMemset(s.rc, 0, 64 * sizeof(int)));
        CUDA_CHECK(cudaDeviceSynchronize());
        CHECK_OK(bs->barrier(bs->ctx));
        scoped_pingpong<<<1, 256>>>(s.dev, s.src, s.dst, s.rank, rounds, 64u << 10, warp, s.rc);
        CUDA_CHECK(cudaDeviceSynchronize());
        CHECK_MSG(rcs(&s, 0) == 0, "%s: status %d", warp ? "warps" : "block", rcs(&s, 0));
        CHECK_MSG(rcs(&s, 1) == 0, "%s: %d bytes seen wrong after the wait",
                  warp ? "warps" : "block", rcs(&s, 1));
        CHECK_MSG(rcs(&s, 2) == 0, "%s: %d calls whose status differed between threads (or the "
                  "refused put's was not GPUPORT_ERR_OUT_OF_RANGE)", warp ? "warps" : "block",
                  rcs(&s, 2));
    }
    CHECK_OK(gpuport_channel_create(s.comm, 1 - s.rank, s.msrc, s.mdst, &ch2));
    chs[0] = s.dev;
    CHECK_OK(gpuport_channel_device(ch2, &chs[1]));
    CUDA_CHECK(cudaMalloc(&d_chs, sizeof(chs)));
    CUDA_CHECK(cudaMemcpy(d_chs, chs, sizeof(chs), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemset(s.dst, 0, 16));
    CUDA_CHECK(cudaMemset(s.rc, 0, 64 * sizeof(int)));
    CUDA_CHECK(cudaDeviceSynchronize());
    CHECK_OK(bs->barrier(bs->ctx));
    scoped_barrier<<<1, 128>>>(d_chs, s.dst, s.rank, s.rc);
    CUDA_CHECK(cudaDeviceSynchronize());
    CHECK_MSG(rcs(&s, 0) == 0, "barrier: status %d", rcs(&s, 0));
    CHECK_MSG(rcs(&s, 1) == 0, "barrier: %d reads without the peer's value", rcs(&s, 1));
    CHECK_OK(gpuport_channel_status(s.ch));
    CHECK_OK(bs->barrier(bs->ctx));
    cudaFree(d_chs);
    side_close(&s);
    if (s.rank == 0)
        printf("PASS scoped calls: %d rounds of 64 KiB by a block and by 8 warps, every byte, "
               "one status per scope, a refused put in every thread; %d rounds of "
               "gpuport_barrier_block over two channels\n", rounds, 200);
}

int main(void)
{
    gpuport_bootstrap_t bs;
    pid_t child;
    int rank;

    setvbuf(stdout, NULL, _IONBF, 0);
    setenv("GPUPORT_TIMEOUT_MS", "60000", 1);
    printf("test_gpu_channels: transport %s, memory %s\n", expected_transport(),
           gpu_mem_kind_desc(gpu_mem_kind()));
    rank = gpu_pair_fork(&bs, &child);
    bs.destroy = NULL; /* one socketpair serves every scenario's communicator */
    integrity(&bs);
    ordering(&bs);
    sequence_numbers(&bs);
    many_pushers(&bs);
    folded_signals(&bs);
    folded_puts(&bs);
    values(&bs);
    merged_puts(&bs);
    peer_close(&bs);
    device_saw_close(&bs);
    host_api(&bs);
    scoped(&bs);
    forbidden_pushes(&bs);
    bad_triggers(&bs);
    gpu_pair_join(rank, child, 0);
    printf("all GPU channel tests passed\n");
    return 0;
}
