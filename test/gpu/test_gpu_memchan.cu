/*
 * Memory channels on GPUs: kernels store into the peer's memory and signal
 * it themselves. Two processes (fork + socketpair bootstrap); on one GPU
 * (GPUPORT_TEST_ONE_GPU=1) their kernels run at once only under MPS
 * (scripts/with-mps.sh), and without it take turns: every case still ends,
 * slowly. Regions of GPUPORT_TEST_MEM's kind (vmm when unset); with
 * cudamalloc only the refusal runs. Cases, every byte checked:
 *  - refusal: cudaMalloc destinations are refused on both sides, the message
 *    naming VMM memory as the way out, and nothing is kept;
 *  - puts: 1 B to 64 MiB at odd offsets by one thread, a warp and a grid,
 *    both directions; after the peer's signal the whole destination is
 *    compared (the copy in place, zeros around it);
 *  - values and signals: 1024 threads each put_value their own slot and
 *    signal at once; the peer takes exactly 1024 signals (then none) and
 *    finds every value;
 *  - packets and ping-pong: 300 rounds of 200-byte packet messages each way
 *    with a new flag per round over one buffer, checked in the kernels; then
 *    300 rounds of put_with_signal + wait;
 *  - bad offsets: every refusal returns its status and the peer's memory
 *    stays untouched; peer_ptr past the end is NULL;
 *  - beside a port channel: one kernel puts by both channels over the same
 *    regions, both signals taken, both ranges checked;
 *  - sequence numbers: a ping-pong of put_value + signal where every thread
 *    of a grid waits until the round's count (gpuport_memory_wait_until)
 *    and finds the round's value; the counts end exact, nothing left to
 *    poll;
 *  - close: rank 0 destroys; rank 1's waiting kernel returns
 *    GPUPORT_ERR_CLOSED, then rank 1 destroys and both return;
 *  - scoped calls: a block's and 8 warps' put_with_signal, put_value and
 *    signal, taken by the peer's block- and warp-scoped waits, every thread
 *    then checking every byte itself (no barrier of its own) and the whole
 *    destination compared on the host; every thread's status recorded and
 *    compared, a put past the region's end first: every thread
 *    GPUPORT_ERR_OUT_OF_RANGE, nothing stored, no signal sent;
 *  - block barrier: 200 rounds of a block's put_value then
 *    gpuport_memory_barrier_block, each side finding the peer's value of the
 *    round; gpuport_last_block: one block of 64 per launch sums every
 *    block's part, over three launches of one counter;
 *  - signals stored by count (store mode only): a signaller that took its
 *    ticket and gave up, and one that timed out because the count's store
 *    was held, hold no later signal back: the next signal returns
 *    GPUPORT_OK and the peer takes all three.
 * GPUPORT_MEMORY_SIGNAL=store runs every case with signals stored into the
 * control segment in ticket order instead of atomic adds (the path between
 * GPUs without native atomics).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu_check.h"
#include "gpu_pair.h"
#include "gpuport/gpuport_device.h"
extern "C" {
#include "capture.h"
}

#define REGION (64ull << 20)
#define PKT_OFF (REGION - (1u << 20)) /* the packet buffers: the last MiB */

__host__ __device__ static inline unsigned char pat(int rank, uint64_t i)
{
    return (unsigned char)(rank * 89 + (i * 131) % 251 + 1);
}

typedef struct side {
    gpuport_bootstrap_t *bs;
    int rank;
    gpuport_comm_t comm;
    unsigned char *src, *dst;
    gpuport_mem_t msrc, mdst;
    gpuport_memory_channel_t mc;
    gpuport_memory_channel_dev_t dev;
    int *d_rc;
    unsigned long long *d_count;
    unsigned char *host;
} side_t;

static __global__ void k_fill(unsigned char *p, uint64_t n, int rank)
{
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x)
        p[i] = pat(rank, i);
}

/* The whole grid puts, then (a later kernel) one thread signals. */
static __global__ void k_put(gpuport_memory_channel_dev_t ch, uint64_t dst_off, uint64_t src_off,
                             uint64_t size, int *rc)
{
    uint32_t t = blockIdx.x * blockDim.x + threadIdx.x, nt = gridDim.x * blockDim.x;
    int st = gpuport_memory_put(&ch, dst_off, src_off, size, t, nt);
    if (st)
        atomicCAS(rc, 0, st);
}

static __global__ void k_signal(gpuport_memory_channel_dev_t ch, int *rc)
{
    int st = gpuport_memory_flush(&ch);
    if (!st)
        st = gpuport_memory_signal(&ch);
    if (st)
        *rc = st;
}

static __global__ void k_wait(gpuport_memory_channel_dev_t ch, int *rc)
{
    *rc = gpuport_memory_wait(&ch);
}

/* Every thread: a value into its slot, then its own signal. */
static __global__ void k_values(gpuport_memory_channel_dev_t ch, int *rc)
{
    uint64_t slot = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    int st = gpuport_memory_put_value(&ch, slot * 8, slot * 0x9E3779B97F4A7C15ull | 1);
    if (!st)
        st = gpuport_memory_signal(&ch);
    if (st)
        atomicCAS(rc, 0, st);
}

/* Takes signals until n are taken (bounded), then counts what more polls find. */
static __global__ void k_take(gpuport_memory_channel_dev_t ch, unsigned long long n,
                              unsigned long long *count, int *rc)
{
    unsigned long long got = 0;
    while (got < n) {
        int r = gpuport_memory_wait(&ch);
        if (r) {
            *rc = r;
            break;
        }
        got++;
    }
    for (int i = 0; i < 1000; i++) {
        int r = gpuport_memory_poll(&ch);
        if (r == 1)
            got++;
        else if (r < 0)
            *rc = r;
    }
    *count = got;
}

/* Packet ping-pong, one warp: rank 0 sends first. Message r holds bytes
 * pat(rank, r * 7 + i); each side checks what it reads. */
static __global__ void k_packets(gpuport_memory_channel_dev_t ch, int first, int rank, int rounds,
                                 unsigned char *scratch, int *rc)
{
    const uint64_t size = 200, pb = gpuport_memory_packet_bytes(size);
    uint32_t lane = threadIdx.x;
    int st = 0;

    for (int r = 0; r < rounds && !st; r++) {
        for (int turn = 0; turn < 2 && !st; turn++) {
            int mine = (turn == 0) == (first != 0);
            if (mine) {
                /* the message in the source's scratch place, then as packets */
                for (uint64_t i = lane; i < size; i += 32)
                    scratch[i] = pat(rank, (uint64_t)r * 7 + i);
                __syncwarp();
                st = gpuport_memory_put_packets(&ch, PKT_OFF + (first ? 0 : pb), PKT_OFF, size,
                                                (uint32_t)r + 1, lane, 32);
            } else {
                st = gpuport_memory_read_packets(&ch, PKT_OFF + (first ? pb : 0),
                                                 scratch + 4096, size, (uint32_t)r + 1, lane, 32);
                __syncwarp();
                for (uint64_t i = lane; !st && i < size; i += 32)
                    if (scratch[4096 + i] != pat(1 - rank, (uint64_t)r * 7 + i))
                        st = -1000 - r;
            }
            /* the warp goes on together: a lane's failure stops every lane */
            if (__any_sync(0xffffffffu, st != 0) && !st)
                st = -999;
        }
    }
    if (lane == 0 && st)
        atomicCAS(rc, 0, st);
}

static __global__ void k_pingpong(gpuport_memory_channel_dev_t ch, int first, int rounds, int *rc)
{
    int st = 0;
    for (int r = 0; r < rounds && !st; r++) {
        if (first) {
            st = gpuport_memory_put_with_signal(&ch, 64, 64, 8);
            if (!st)
                st = gpuport_memory_wait(&ch);
        } else {
            st = gpuport_memory_wait(&ch);
            if (!st)
                st = gpuport_memory_put_with_signal(&ch, 64, 64, 8);
        }
    }
    *rc = st;
}

/* Round k of SEQ_ROUNDS (counts from base, the signals before the case):
 * rank 0's first thread stores k at SEQ_OFF of the peer's destination and
 * signals; every thread of rank 1's grid waits until base + k, finds at
 * least k there, and its first thread answers 1000 + k at SEQ_OFF + 8,
 * which every thread of rank 0's grid waits for likewise. */
#define SEQ_ROUNDS 500
#define SEQ_OFF (PKT_OFF - 64)
static __global__ void k_sequenced(gpuport_memory_channel_dev_t ch, const unsigned char *dst,
                                   int rank, uint64_t base, int *rc, unsigned long long *count)
{
    const volatile uint64_t *got =
        (const volatile uint64_t *)(dst + SEQ_OFF + (rank == 0 ? 8 : 0));
    const uint64_t add = rank == 0 ? 1000 : 0;
    int first = blockIdx.x == 0 && threadIdx.x == 0, st = 0;

    for (uint64_t k = 1; k <= SEQ_ROUNDS && !st; k++) {
        if (rank == 0 && first) {
            st = gpuport_memory_put_value(&ch, SEQ_OFF, k);
            if (!st)
                st = gpuport_memory_signal(&ch);
        }
        if (!st)
            st = gpuport_memory_wait_until(&ch, base + k);
        if (!st && *got < add + k)
            st = -1000; /* the round's value not there at its count */
        if (!st && rank == 1 && first) {
            st = gpuport_memory_put_value(&ch, SEQ_OFF + 8, 1000 + k);
            if (!st)
                st = gpuport_memory_signal(&ch);
        }
    }
    if (st)
        atomicCAS(rc, 0, st);
    if (first && !st) {
        uint64_t c = 0;
        st = gpuport_memory_signal_count(&ch, &c);
        *count = c;
        if (!st)
            st = gpuport_memory_wait_until(&ch, base + 1); /* passed: at once */
        if (st)
            atomicCAS(rc, 0, st);
    }
}

static __global__ void k_count(gpuport_memory_channel_dev_t ch, unsigned long long *count,
                               int *rc)
{
    uint64_t c = 0;
    *rc = gpuport_memory_signal_count(&ch, &c);
    *count = c;
}

static __global__ void k_poll(gpuport_memory_channel_dev_t ch, int *rc)
{
    *rc = gpuport_memory_poll(&ch);
}

/* Each refusal's status; nothing may be stored. */
static __global__ void k_bad(gpuport_memory_channel_dev_t ch, int *out)
{
    uint64_t s = ch.dst_size;
    out[0] = gpuport_memory_put(&ch, s - 8, 0, 16, 0, 1);
    out[1] = gpuport_memory_put(&ch, 0, ch.src_size - 8, 16, 0, 1);
    out[2] = gpuport_memory_put(&ch, UINT64_MAX - 7, 0, 16, 0, 1);
    out[3] = gpuport_memory_put(&ch, 0, 0, 16, 1, 1); /* thread not below nthreads */
    out[4] = gpuport_memory_put_value(&ch, 4, 1);
    out[5] = gpuport_memory_put_value(&ch, s, 1);
    out[6] = gpuport_memory_put_packets(&ch, 0, 0, 64, 0, 0, 1); /* flag 0 */
    out[7] = gpuport_memory_put_packets(&ch, 8, 0, 64, 1, 0, 1); /* not 16-aligned */
    out[8] = gpuport_memory_put_packets(&ch, s - 64, 0, 64, 1, 0, 1); /* 128 B of packets */
    out[9] = gpuport_memory_peer_ptr(&ch, s) == NULL && gpuport_memory_peer_ptr(&ch, 0) != NULL
                 ? 0
                 : 1;
    gpuport_memory_channel_dev_t other = ch;
    other.layout = GPUPORT_LAYOUT(GPUPORT_MEMORY_CHANNEL_DEV_VERSION + 1,
                                  gpuport_memory_channel_dev_t);
    out[10] = gpuport_memory_put(&other, 0, 0, 16, 0, 1);
    __threadfence_system();
}

/* Both kinds in one kernel: the port channel puts [0, 4096), the memory
 * channel [4096, 8192), each signals. */
static __global__ void k_both(gpuport_port_channel_dev_t pc, gpuport_memory_channel_dev_t mc,
                              int *rc)
{
    int st = gpuport_put_with_signal(&pc, 0, 0, 4096);
    if (!st)
        st = gpuport_memory_put_with_signal(&mc, 4096, 4096, 4096);
    if (!st)
        st = gpuport_flush(&pc);
    *rc = st;
}

static __global__ void k_wait_both(gpuport_port_channel_dev_t pc, gpuport_memory_channel_dev_t mc,
                                   int *rc)
{
    int st = gpuport_wait(&pc);
    if (!st)
        st = gpuport_memory_wait(&mc);
    *rc = st;
}

/* A ticket taken by a signaller that gave up, then a signal that finds the
 * count's store held (1 ms limit), then one that finds it free. */
static __global__ void k_abandon(gpuport_memory_channel_dev_t ch, int *rc)
{
    int st;

    atomicAdd(&ch.tickets[0], 1ull);
    atomicExch(&ch.tickets[2], 1ull);
    ch.timeout_ns = 1000000ull;
    st = gpuport_memory_signal(&ch);
    if (st != GPUPORT_ERR_TIMEOUT) {
        *rc = st ? st : -1000;
        return;
    }
    atomicExch(&ch.tickets[2], 0ull);
    ch.timeout_ns = 10ull * 1000000000ull;
    st = gpuport_memory_signal(&ch);
    if (st)
        *rc = st;
}

/* Scoped sends of one block: every thread's status of each call in
 * st[call * blockDim.x + thread]. The block: a refused put, then
 * put_with_signal of [0, n) (warps: warp w its slice n / 8 at w * n / 8),
 * then a value at n + 64 and a signal. */
static __global__ void k_scoped_send(gpuport_memory_channel_dev_t ch, int warp, uint64_t n,
                                     int *st)
{
    uint32_t t = threadIdx.x, w = t / 32, nt = blockDim.x;
    uint64_t part = n / (nt / 32);

    if (warp) {
        st[0 * nt + t] = gpuport_memory_put_with_signal_warp(&ch, ch.dst_size - 8, 0, 16);
        st[1 * nt + t] = gpuport_memory_put_with_signal_warp(&ch, w * part, w * part, part);
        st[2 * nt + t] = gpuport_memory_put_value_warp(&ch, n + 64 + w * 8, 0x5eed0000ull + w);
        st[3 * nt + t] = gpuport_memory_signal_warp(&ch);
    } else {
        st[0 * nt + t] = gpuport_memory_put_with_signal_block(&ch, ch.dst_size - 8, 0, 16);
        st[1 * nt + t] = gpuport_memory_put_with_signal_block(&ch, 0, 0, n);
        st[2 * nt + t] = gpuport_memory_put_value_block(&ch, n + 64, 0x5eed0000ull);
        st[3 * nt + t] = gpuport_memory_signal_block(&ch);
    }
}

/* The peer's side: a scoped wait for each signal (warps: each warp two), then
 * every thread checks every byte of [0, n) and the values, counting in
 * st[2 * nt + t] what it found wrong. */
static __global__ void k_scoped_recv(gpuport_memory_channel_dev_t ch, int warp, uint64_t n,
                                     const unsigned char *dst, int peer, int *st)
{
    uint32_t t = threadIdx.x, nt = blockDim.x, warps = nt / 32;
    int bad = 0;

    if (warp) {
        st[0 * nt + t] = gpuport_memory_wait_warp(&ch);
        st[1 * nt + t] = gpuport_memory_wait_warp(&ch);
        __syncthreads(); /* every warp's two: all 16 signals taken */
    } else {
        st[0 * nt + t] = gpuport_memory_wait_block(&ch);
        st[1 * nt + t] = gpuport_memory_wait_block(&ch);
    }
    for (uint64_t i = 0; i < n; i++)
        bad += dst[i] != pat(peer, i);
    for (uint32_t w = 0; w < (warp ? warps : 1); w++)
        bad += *(const volatile unsigned long long *)(dst + n + 64 + w * 8) != 0x5eed0000ull + w;
    st[2 * nt + t] = bad;
}

/* 200 rounds: the block's value for the round into the peer's slot r % 2,
 * the barrier, then every thread reads the peer's value there (the peer
 * cannot store into that slot again before this side's next barrier). */
static __global__ void k_barrier(const gpuport_memory_channel_dev_t *chs, const unsigned char *dst,
                                 int rank, int *rc)
{
    int bad = 0, st = 0;
    for (int r = 0; r < 200 && !st; r++) {
        st = gpuport_memory_put_value_block(&chs[0], 8 * (r % 2), 1000ull * rank + r + 1);
        if (!st)
            st = gpuport_memory_barrier_block(chs, 1);
        if (!st && *(const volatile unsigned long long *)(dst + 8 * (r % 2)) !=
                       1000ull * (1 - rank) + r + 1)
            bad++;
    }
    if (st)
        atomicCAS(&rc[0], 0, st);
    if (bad)
        atomicAdd(&rc[1], bad);
}

/* Each block writes its part and arrives; the last sums every part. */
static __global__ void k_last(unsigned int *counter, unsigned long long *parts, int launch,
                              unsigned long long *out)
{
    if (threadIdx.x == 0)
        parts[blockIdx.x] = (unsigned long long)launch * 1000 + blockIdx.x;
    int last = gpuport_last_block(counter);
    if (threadIdx.x == 0 && last)
        atomicAdd(&out[0], 1ull); /* blocks that saw 1 */
    if (last) {
        unsigned long long sum = 0;
        for (unsigned b = 0; b < gridDim.x; b++)
            sum += *(volatile unsigned long long *)&parts[b];
        atomicAdd(&out[1], sum); /* every thread of the last block */
    }
}

static int rc_of(side_t *s)
{
    int rc = 0;
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(&rc, s->d_rc, sizeof(int), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemset(s->d_rc, 0, sizeof(int)));
    return rc;
}

static void barrier(side_t *s)
{
    CHECK_OK(s->bs->barrier(s->bs->ctx));
}

/* The receiver's whole destination: the peer's bytes in [off, off + n)
 * (src_off their source offset), zeros elsewhere. */
static void verify_dst(side_t *s, uint64_t off, uint64_t src_off, uint64_t n, const char *what)
{
    CUDA_CHECK(cudaMemcpy(s->host, s->dst, REGION, cudaMemcpyDeviceToHost));
    for (uint64_t i = 0; i < REGION; i++) {
        unsigned char want = i >= off && i < off + n ? pat(1 - s->rank, src_off + (i - off)) : 0;
        CHECK_MSG(s->host[i] == want, "%s: destination byte %llu is 0x%02x, expected 0x%02x",
                  what, (unsigned long long)i, s->host[i], want);
    }
}

static void puts_case(side_t *s)
{
    static const uint64_t sizes[] = {1, 7, 16, 100, 4097, 65539, (1u << 20) + 5,
                                     REGION - (1u << 20) - 64};
    static const struct {
        unsigned blocks, threads;
        const char *name;
    } groups[] = {{1, 1, "one thread"}, {1, 32, "a warp"}, {64, 256, "a grid"}};
    char what[128];

    /* then small puts whose two addresses agree mod 16 or mod 8 (8 B, 12 B,
     * 24 B: whole 8- or 16-byte accesses where they fit, bytes at the ends) */
    static const uint64_t small[] = {8, 12, 24};
    const size_t nk = sizeof(sizes) / sizeof(sizes[0]), ns = sizeof(small) / sizeof(small[0]);

    for (int dir = 0; dir < 2; dir++) {
        int sender = dir;
        for (size_t g = 0; g < 3; g++) {
            for (size_t k = 0; k < nk + 2 * ns; k++) {
                uint64_t n = k < nk ? sizes[k] : 0, dst_off = 5 + 16 * k % 48, src_off = 3 + 8 * g;
                if (k >= nk) {
                    if (g == 2)
                        break; /* a grid's threads would hold a byte or none */
                    n = small[(k - nk) % ns];
                    src_off = 128;
                    dst_off = 128 + ((k - nk) / ns ? 8 : 0);
                }
                if (g == 0 && n > (1u << 20))
                    continue; /* one thread: a MiB is enough */
                snprintf(what, sizeof(what), "put of %llu B by %s, rank %d to %d",
                         (unsigned long long)n, groups[g].name, sender, 1 - sender);
                CUDA_CHECK(cudaMemset(s->dst, 0, REGION));
                CUDA_CHECK(cudaDeviceSynchronize());
                barrier(s);
                if (s->rank == sender) {
                    k_put<<<groups[g].blocks, groups[g].threads>>>(s->dev, dst_off, src_off, n,
                                                                   s->d_rc);
                    k_signal<<<1, 1>>>(s->dev, s->d_rc);
                    CHECK_MSG(rc_of(s) == 0, "%s: the sender's calls failed", what);
                } else {
                    k_wait<<<1, 1>>>(s->dev, s->d_rc);
                    CHECK_MSG(rc_of(s) == 0, "%s: the wait failed", what);
                    verify_dst(s, dst_off, src_off, n, what);
                }
                barrier(s);
            }
        }
    }
    printf("PASS puts (rank %d): 1 B .. %llu B at odd offsets, one thread / a warp / a grid, "
           "both ways; 8, 12 and 24 B at offsets 16- and 8-aligned alike\n",
           s->rank, (unsigned long long)sizes[7]);
}

static void values_case(side_t *s)
{
    const unsigned blocks = 8, threads = 128;
    const uint64_t n = blocks * threads;
    unsigned long long got = 0;

    CUDA_CHECK(cudaMemset(s->dst, 0, REGION));
    CUDA_CHECK(cudaDeviceSynchronize());
    barrier(s);
    if (s->rank == 0) {
        k_values<<<blocks, threads>>>(s->dev, s->d_rc);
        CHECK_MSG(rc_of(s) == 0, "values: the sender's calls failed");
    } else {
        k_take<<<1, 1>>>(s->dev, n, s->d_count, s->d_rc);
        CHECK_MSG(rc_of(s) == 0, "values: taking the signals failed");
        CUDA_CHECK(cudaMemcpy(&got, s->d_count, sizeof(got), cudaMemcpyDeviceToHost));
        CHECK_MSG(got == n, "values: %llu signals taken, %llu sent", got,
                  (unsigned long long)n);
        CUDA_CHECK(cudaMemcpy(s->host, s->dst, n * 8, cudaMemcpyDeviceToHost));
        for (uint64_t slot = 0; slot < n; slot++) {
            uint64_t v;
            memcpy(&v, s->host + slot * 8, 8);
            CHECK_MSG(v == (slot * 0x9E3779B97F4A7C15ull | 1), "values: slot %llu is 0x%llx",
                      (unsigned long long)slot, (unsigned long long)v);
        }
    }
    barrier(s);
    printf("PASS values and signals (rank %d): %llu threads, each a value and a signal at once, "
           "exactly as many signals taken\n",
           s->rank, (unsigned long long)n);
}

static void packets_case(side_t *s)
{
    const int rounds = 300;

    barrier(s);
    k_packets<<<1, 32>>>(s->dev, s->rank == 0, s->rank, rounds, s->src + PKT_OFF, s->d_rc);
    CHECK_MSG(rc_of(s) == 0, "packets: a round failed or read wrong data");
    barrier(s);
    k_pingpong<<<1, 1>>>(s->dev, s->rank == 0, rounds, s->d_rc);
    CHECK_MSG(rc_of(s) == 0, "ping-pong by signal failed");
    /* the sources' packet place is scratch: give back the pattern */
    k_fill<<<64, 256>>>(s->src, REGION, s->rank);
    CUDA_CHECK(cudaDeviceSynchronize());
    barrier(s);
    printf("PASS packets (rank %d): %d rounds of 200 B each way, one buffer, a flag per round; "
           "%d put_with_signal + wait round trips\n",
           s->rank, rounds, rounds);
}

static void bad_case(side_t *s)
{
    int out[11], *d_out;
    static const int want[11] = {GPUPORT_ERR_OUT_OF_RANGE, GPUPORT_ERR_OUT_OF_RANGE,
                                 GPUPORT_ERR_OUT_OF_RANGE, GPUPORT_ERR_INVALID_ARG,
                                 GPUPORT_ERR_INVALID_ARG,  GPUPORT_ERR_OUT_OF_RANGE,
                                 GPUPORT_ERR_INVALID_ARG,  GPUPORT_ERR_INVALID_ARG,
                                 GPUPORT_ERR_OUT_OF_RANGE, 0,
                                 GPUPORT_ERR_VERSION};

    CUDA_CHECK(cudaMemset(s->dst, 0, REGION));
    CUDA_CHECK(cudaMalloc(&d_out, sizeof(out)));
    CUDA_CHECK(cudaDeviceSynchronize());
    barrier(s);
    if (s->rank == 0) {
        k_bad<<<1, 1>>>(s->dev, d_out);
        CUDA_CHECK(cudaDeviceSynchronize());
        CUDA_CHECK(cudaMemcpy(out, d_out, sizeof(out), cudaMemcpyDeviceToHost));
        for (int i = 0; i < 11; i++)
            CHECK_MSG(out[i] == want[i], "bad offsets: call %d returned %d, expected %d", i,
                      out[i], want[i]);
    }
    barrier(s);
    if (s->rank == 1)
        verify_dst(s, 0, 0, 0, "after the refused calls");
    barrier(s);
    cudaFree(d_out);
    printf("PASS bad offsets (rank %d): each refused with its status, the peer's memory "
           "untouched\n",
           s->rank);
}

static void both_case(side_t *s)
{
    gpuport_channel_t pc;
    gpuport_port_channel_dev_t pdev;

    CHECK_OK(gpuport_channel_create(s->comm, 1 - s->rank, s->msrc, s->mdst, &pc));
    CHECK_OK(gpuport_channel_device(pc, &pdev));
    CUDA_CHECK(cudaMemset(s->dst, 0, REGION));
    CUDA_CHECK(cudaDeviceSynchronize());
    barrier(s);
    if (s->rank == 0) {
        k_both<<<1, 1>>>(pdev, s->dev, s->d_rc);
        CHECK_MSG(rc_of(s) == 0, "port and memory channel: the sender failed");
    } else {
        k_wait_both<<<1, 1>>>(pdev, s->dev, s->d_rc);
        CHECK_MSG(rc_of(s) == 0, "port and memory channel: the waits failed");
        verify_dst(s, 0, 0, 8192, "a port and a memory channel over the same regions");
    }
    barrier(s);
    CHECK_OK(gpuport_channel_destroy(pc));
    printf("PASS beside a port channel (rank %d): one kernel puts by both over the same regions\n",
           s->rank);
}

static void sequence_case(side_t *s)
{
    unsigned long long base = 0, count = 0;

    barrier(s); /* the earlier cases' signals all sent */
    k_count<<<1, 1>>>(s->dev, s->d_count, s->d_rc);
    CHECK_MSG(rc_of(s) == 0, "sequence: signal_count refused");
    CUDA_CHECK(cudaMemcpy(&base, s->d_count, sizeof(base), cudaMemcpyDeviceToHost));
    barrier(s);
    k_sequenced<<<8, 128>>>(s->dev, s->dst, s->rank, base, s->d_rc, s->d_count);
    int rc = rc_of(s);
    CHECK_MSG(rc == 0, "sequence: %d%s", rc,
              rc == -1000 ? " (a thread found an earlier round's value at its count)" : "");
    CUDA_CHECK(cudaMemcpy(&count, s->d_count, sizeof(count), cudaMemcpyDeviceToHost));
    CHECK_MSG(count == base + SEQ_ROUNDS, "sequence: count %llu, expected %llu + %d", count,
              base, SEQ_ROUNDS);
    k_poll<<<1, 1>>>(s->dev, s->d_rc);
    rc = rc_of(s);
    CHECK_MSG(rc == 0, "sequence: a poll after the rounds returned %d (nothing was left)", rc);
    barrier(s);
    printf("PASS sequence numbers (rank %d): %d rounds, 1024 threads waiting until each round's "
           "count\n",
           s->rank, SEQ_ROUNDS);
}

static void close_case(side_t *s)
{
    if (s->rank == 1) {
        k_wait<<<1, 1>>>(s->dev, s->d_rc);
        barrier(s); /* the kernel is waiting */
        int rc = rc_of(s);
        CHECK_MSG(rc == GPUPORT_ERR_CLOSED, "close: the waiting kernel returned %d (%s)", rc,
                  gpuport_status_string((gpuport_status_t)rc));
        CHECK_OK(gpuport_memory_channel_destroy(s->mc));
    } else {
        barrier(s);
        usleep(100 * 1000);
        CHECK_OK(gpuport_memory_channel_destroy(s->mc)); /* returns once rank 1 destroyed */
    }
    CHECK_STATUS(gpuport_memory_channel_destroy(s->mc), GPUPORT_ERR_INVALID_ARG);
    printf("PASS close (rank %d): the peer's waiting kernel returns GPUPORT_ERR_CLOSED, destroy "
           "is pairwise\n",
           s->rank);
}

/* Every thread's status in row `row` of h equal to want. */
static void check_row(const int *h, unsigned threads, int row, int want, const char *what)
{
    for (unsigned t = 0; t < threads; t++)
        CHECK_MSG(h[row * threads + t] == want, "%s: thread %u returned %d, expected %d", what, t,
                  h[row * threads + t], want);
}

static void scoped_case(side_t *s)
{
    const unsigned threads = 256;
    const uint64_t n = 8 * 4099; /* 8 warps' slices of an odd size */
    int *d_st, h[4 * 256];

    CUDA_CHECK(cudaMalloc(&d_st, sizeof(h)));
    for (int warp = 0; warp < 2; warp++) {
        const char *name = warp ? "warp-scoped" : "block-scoped";
        char what[96];
        CUDA_CHECK(cudaMemset(s->dst, 0, REGION));
        CUDA_CHECK(cudaMemset(d_st, 0x7f, sizeof(h)));
        CUDA_CHECK(cudaDeviceSynchronize());
        barrier(s);
        if (s->rank == 0) {
            k_scoped_send<<<1, threads>>>(s->dev, warp, n, d_st);
            CUDA_CHECK(cudaDeviceSynchronize());
            CUDA_CHECK(cudaMemcpy(h, d_st, sizeof(h), cudaMemcpyDeviceToHost));
            snprintf(what, sizeof(what), "%s put past the end", name);
            check_row(h, threads, 0, GPUPORT_ERR_OUT_OF_RANGE, what);
            for (int row = 1; row < 4; row++) {
                snprintf(what, sizeof(what), "%s send, call %d", name, row);
                check_row(h, threads, row, GPUPORT_OK, what);
            }
        } else {
            k_scoped_recv<<<1, threads>>>(s->dev, warp, n, s->dst, 0, d_st);
            CUDA_CHECK(cudaDeviceSynchronize());
            CUDA_CHECK(cudaMemcpy(h, d_st, sizeof(h), cudaMemcpyDeviceToHost));
            snprintf(what, sizeof(what), "%s waits", name);
            check_row(h, threads, 0, GPUPORT_OK, what);
            check_row(h, threads, 1, GPUPORT_OK, what);
            snprintf(what, sizeof(what), "%s: wrong bytes seen by a thread after the wait", name);
            check_row(h, threads, 2, 0, what);
            /* the whole region: the put, the values, zeros elsewhere (the
             * refused put stored nothing) */
            CUDA_CHECK(cudaMemcpy(s->host, s->dst, REGION, cudaMemcpyDeviceToHost));
            for (uint64_t i = 0; i < REGION; i++) {
                unsigned char want = i < n ? pat(0, i) : 0;
                uint64_t v = i >= n + 64 && i < n + 64 + (warp ? 64 : 8) ? i - n - 64 : ~0ull;
                if (v != ~0ull)
                    want = (unsigned char)((0x5eed0000ull + v / 8) >> (8 * (v % 8)));
                CHECK_MSG(s->host[i] == want, "%s: destination byte %llu is 0x%02x, expected "
                          "0x%02x", name, (unsigned long long)i, s->host[i], want);
            }
            k_take<<<1, 1>>>(s->dev, 0, s->d_count, s->d_rc); /* no signal more */
            CHECK_MSG(rc_of(s) == 0, "%s: polling after the waits failed", name);
            unsigned long long more = 1;
            CUDA_CHECK(cudaMemcpy(&more, s->d_count, sizeof(more), cudaMemcpyDeviceToHost));
            CHECK_MSG(more == 0, "%s: %llu signals more than sent (the refused put's?)", name,
                      more);
        }
        barrier(s);
    }
    cudaFree(d_st);
    printf("PASS scoped calls (rank %d): a block's and 8 warps' put_with_signal, put_value and "
           "signal; every thread the same status, every byte; a refused put: "
           "GPUPORT_ERR_OUT_OF_RANGE in every thread, nothing stored or signalled\n",
           s->rank);
}

static void helpers_case(side_t *s)
{
    gpuport_memory_channel_dev_t *d_chs;
    unsigned int *counter;
    unsigned long long *parts, *out, h[2];
    int rc[2];

    CUDA_CHECK(cudaMalloc(&d_chs, sizeof(*d_chs)));
    CUDA_CHECK(cudaMemcpy(d_chs, &s->dev, sizeof(*d_chs), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemset(s->dst, 0, REGION));
    CUDA_CHECK(cudaMemset(s->d_rc, 0, sizeof(int)));
    int *d_rc2;
    CUDA_CHECK(cudaMalloc(&d_rc2, 2 * sizeof(int)));
    CUDA_CHECK(cudaMemset(d_rc2, 0, 2 * sizeof(int)));
    CUDA_CHECK(cudaDeviceSynchronize());
    barrier(s);
    k_barrier<<<1, 128>>>(d_chs, s->dst, s->rank, d_rc2);
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(rc, d_rc2, sizeof(rc), cudaMemcpyDeviceToHost));
    CHECK_MSG(rc[0] == 0, "memory barrier: status %d", rc[0]);
    CHECK_MSG(rc[1] == 0, "memory barrier: %d rounds without the peer's value", rc[1]);
    barrier(s);

    CUDA_CHECK(cudaMalloc(&counter, sizeof(*counter)));
    CUDA_CHECK(cudaMemset(counter, 0, sizeof(*counter)));
    CUDA_CHECK(cudaMalloc(&parts, 64 * sizeof(*parts)));
    CUDA_CHECK(cudaMalloc(&out, 2 * sizeof(*out)));
    for (int launch = 1; launch <= 3; launch++) {
        unsigned int left = 1;
        CUDA_CHECK(cudaMemset(out, 0, 2 * sizeof(*out)));
        k_last<<<64, 96>>>(counter, parts, launch, out);
        CUDA_CHECK(cudaDeviceSynchronize());
        CUDA_CHECK(cudaMemcpy(h, out, sizeof(h), cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(&left, counter, sizeof(left), cudaMemcpyDeviceToHost));
        CHECK_MSG(h[0] == 1, "last block, launch %d: %llu blocks saw 1", launch, h[0]);
        CHECK_MSG(h[1] == 96ull * (64ull * launch * 1000 + 63 * 64 / 2),
                  "last block, launch %d: the threads' sums add to %llu", launch, h[1]);
        CHECK_MSG(left == 0, "last block, launch %d: the counter is %u after", launch, left);
    }
    cudaFree(counter);
    cudaFree(parts);
    cudaFree(out);
    cudaFree(d_rc2);
    cudaFree(d_chs);
    printf("PASS helpers (rank %d): 200 rounds of gpuport_memory_barrier_block, each finding the "
           "peer's value; gpuport_last_block: one block, every part summed, the counter back "
           "to 0, three launches\n",
           s->rank);
}

/* cudaMalloc destinations: refused on both sides, naming VMM memory. */
static void abandon_case(side_t *s)
{
    unsigned long long got = 0;

    if (s->dev.sem_atomic)
        return; /* no tickets: atomic adds */
    barrier(s);
    if (s->rank == 0) {
        k_abandon<<<1, 1>>>(s->dev, s->d_rc);
        CHECK_MSG(rc_of(s) == 0, "abandoned ticket: the next signal failed");
    } else {
        k_take<<<1, 1>>>(s->dev, 3, s->d_count, s->d_rc);
        CHECK_MSG(rc_of(s) == 0, "abandoned ticket: taking the signals failed");
        CUDA_CHECK(cudaMemcpy(&got, s->d_count, sizeof(got), cudaMemcpyDeviceToHost));
        CHECK_MSG(got == 3, "abandoned ticket: %llu signals taken, 3 counted", got);
    }
    barrier(s);
    printf("PASS stored counts (rank %d): a signaller that gave up holds no later one back\n",
           s->rank);
}

static void refusal_case(side_t *s)
{
    void *a, *b;
    gpuport_mem_t ma, mb;
    gpuport_memory_channel_t mc = NULL;
    gpuport_status_t st;
    const char *log;

    CUDA_CHECK(cudaMalloc(&a, 1 << 20));
    CUDA_CHECK(cudaMalloc(&b, 1 << 20));
    CHECK_OK(gpuport_mem_register(s->comm, a, 1 << 20, &ma));
    CHECK_OK(gpuport_mem_register(s->comm, b, 1 << 20, &mb));
    capture_begin();
    st = gpuport_memory_channel_create(s->comm, 1 - s->rank, ma, mb, &mc);
    log = capture_end();
    CHECK_MSG(st == GPUPORT_ERR_NOT_SUPPORTED && mc == NULL, "cudaMalloc: %s",
              gpuport_status_string(st));
    CHECK_MSG(strstr(log, "legacy CUDA IPC") && strstr(log, "gpuport_mem_alloc_device"),
              "cudaMalloc refusal: log: %s", log);
    CHECK_OK(gpuport_mem_deregister(ma));
    CHECK_OK(gpuport_mem_deregister(mb));
    cudaFree(a);
    cudaFree(b);
    printf("PASS refusal (rank %d): cudaMalloc destinations refused on both sides, naming VMM "
           "memory\n",
           s->rank);
}

int main(void)
{
    gpuport_bootstrap_t bs;
    pid_t child;
    side_t s;
    gpu_mem_kind_t kind;
    int rank;

    setvbuf(stdout, NULL, _IONBF, 0);
    if (!getenv("GPUPORT_TEST_MEM"))
        setenv("GPUPORT_TEST_MEM", "vmm", 1);
    rank = gpu_pair_fork(&bs, &child);
    bs.destroy = NULL; /* the pair's socket outlives the communicator: a barrier after it */
    kind = gpu_mem_kind();
    memset(&s, 0, sizeof(s));
    s.bs = &bs;
    s.rank = rank;
    if (rank == 0)
        printf("test_gpu_memchan: memory %s\n", gpu_mem_kind_desc(kind));
    CHECK_OK(gpuport_comm_create(&bs, &s.comm));
    refusal_case(&s);
    if (kind == GPU_MEM_CUDAMALLOC) {
        CHECK_OK(gpuport_comm_destroy(s.comm));
        gpu_pair_join(rank, child, 0);
        return 0;
    }
    gpu_region_alloc(s.comm, REGION, (void **)&s.src);
    gpu_region_alloc(s.comm, REGION, (void **)&s.dst);
    k_fill<<<256, 256>>>(s.src, REGION, rank);
    CUDA_CHECK(cudaMemset(s.dst, 0, REGION));
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMalloc(&s.d_rc, sizeof(int)));
    CUDA_CHECK(cudaMemset(s.d_rc, 0, sizeof(int)));
    CUDA_CHECK(cudaMalloc(&s.d_count, sizeof(unsigned long long)));
    s.host = (unsigned char *)malloc(REGION);
    CHECK(s.host);
    CHECK_OK(gpuport_mem_register(s.comm, s.src, REGION, &s.msrc));
    CHECK_OK(gpuport_mem_register(s.comm, s.dst, REGION, &s.mdst));
    CHECK_OK(gpuport_memory_channel_create(s.comm, 1 - rank, s.msrc, s.mdst, &s.mc));
    CHECK_OK(gpuport_memory_channel_device(s.mc, &s.dev));
    CHECK(s.dev.dst != NULL && s.dev.dst_size == REGION && s.dev.src_size == REGION);
    {
        /* one GPU: atomics in each other's memory, unless told to store */
        const char *how = getenv("GPUPORT_MEMORY_SIGNAL");
        int store = how && strcmp(how, "store") == 0;
        if (getenv("GPUPORT_TEST_ONE_GPU") && atoi(getenv("GPUPORT_TEST_ONE_GPU")) == 1)
            CHECK_MSG(s.dev.sem_atomic == (uint32_t)!store, "signals by %s on one GPU",
                      s.dev.sem_atomic ? "atomics" : "stores");
        if (store)
            CHECK_MSG(s.dev.sem_atomic == 0, "GPUPORT_MEMORY_SIGNAL=store: signals by atomics");
        if (rank == 0)
            printf("signals by %s\n", s.dev.sem_atomic ? "atomic adds in the peer's GPU memory"
                                                       : "stores into its control segment");
    }
    puts_case(&s);
    values_case(&s);
    packets_case(&s);
    bad_case(&s);
    scoped_case(&s);
    helpers_case(&s);
    both_case(&s);
    abandon_case(&s);
    sequence_case(&s);
    close_case(&s);
    CHECK_OK(gpuport_comm_destroy(s.comm));
    barrier(&s);
    gpu_region_free(s.src);
    gpu_region_free(s.dst);
    free(s.host);
    gpu_pair_join(rank, child, 0);
    return 0;
}
