/*
 * gpuport_bench's memory-channel table: kernels storing into the peer's
 * memory themselves (gpuport_memory_*), each figure beside its floor
 * measured in the same run between the same two processes through the same
 * mapping (gpuport_memory_peer_ptr: raw stores and flags of the kernel's
 * own), and beside the port channel's figure for the same operation. The
 * channel's regions are VMM memory (gpuport_mem_alloc_device) of their own.
 * Rows:
 *  - 8 B ping-pong round trip: by signal (put_with_signal + wait), by
 *    packet (put_packets + read_packets, a flag per round), the floor (a
 *    release store of the round into the peer's flag, an acquire poll on
 *    its own), the port channel's put_with_signal + wait, and a peer
 *    channel's (gpuport_peer_put_with_signal + gpuport_peer_wait_until of
 *    the round, as NVSHMEM's ping-pong waits, over the same regions: its
 *    store path);
 *  - 64 B put + signal rate at 1, 8 and 64 warps (each warp puts 64 B at
 *    its own place, then one lane signals), the floor (the same stores, a
 *    system fence and an atomic add on a counter in the peer's memory), and
 *    the port channel's 64 B put_with_signal by one lane per warp; the peer
 *    then takes exactly that many signals and checks every byte;
 *  - put bandwidth 1 KiB .. the region at 1, 8 and all SMs' blocks of 512
 *    threads, then one signal, beside raw 16-byte stores of the same grid
 *    into the same mapping; the peer checks the last put's bytes.
 * Only under MPS do the pair's kernels run at once on a shared GPU; the
 * header says whether CUDA_MPS_PIPE_DIRECTORY is set (ping-pongs take turns
 * otherwise: milliseconds per round trip).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_gpu_int.h"

__global__ void k_pingpong(gpuport_port_channel_dev_t ch, int first, int iters, uint64_t *ns,
                           int *rc, uint64_t *samples);
__global__ void k_fill(unsigned char *p, uint64_t n);

/* Adds to *bad the bytes of p[0, n) that are not bpat(off + i). */
static __global__ void k_mc_check(const unsigned char *p, uint64_t off, uint64_t n,
                                  unsigned long long *bad)
{
    unsigned long long b = 0;
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x)
        b += p[i] != bpat(off + i);
    if (b)
        atomicAdd(bad, b);
}

/* The port channel's receiver in a rate row: n signals by device waits (its
 * signals are taken on the device side only, as everywhere in the bench). */
static __global__ void k_port_take(gpuport_port_channel_dev_t ch, unsigned long long n, int *rc)
{
    int st = 0;
    for (unsigned long long i = 0; i < n && !st; i++)
        st = gpuport_wait(&ch);
    *rc = st;
}

#define MC_FLAGS 0          /* the floor's flags: two 8-byte words, 128 B apart */
#define MC_PKT 4096         /* the packets' place */
#define MC_COUNTER 256      /* the floor's counter */
#define MC_RATE (64u << 10) /* the 64 B puts' place */

/* PP_COPY .. PP_SPLIT are the steps from the floor to a peer channel's
 * put_with_signal + wait_until, each adding one part of it: the 8-byte
 * copy before the release store, the count by a release add instead of a
 * store, the receiver's raise of its consumed count, the sender's load of
 * its two counts of proxy operations (all raw code, no checks), then the
 * receiver's read of the proxy's count (pinned host memory) at its first
 * poll, as the peer channel's wait reads it. */
enum { PP_SIGNAL, PP_PACKET, PP_RAW, PP_COPY, PP_ADD, PP_MAX, PP_OPS, PP_SPLIT, PP_MODES };
static const char *const pp_step_name[PP_MODES] = {
    "", "", "floor: release store of the round, acquire poll",
    "+ the 8 B copy (load, store) before the store", "+ the count by a release add",
    "+ the receiver's atomicMax of its consumed count",
    "+ the sender's load of two counts (device memory)",
    "+ the receiver's read of a host word at its first poll"};

static __global__ void k_mc_pingpong(gpuport_memory_channel_dev_t ch, int mode, int first,
                                     int iters, const volatile uint64_t *ch_port_inbound,
                                     uint64_t *ns, int *rc)
{
    uint64_t t0 = gpuport_dev_now_ns();
    volatile uint64_t *mine = (volatile uint64_t *)(ch.local_dst + MC_FLAGS + (first ? 128 : 0));
    uint64_t *theirs = (uint64_t *)gpuport_memory_peer_ptr(&ch, MC_FLAGS + (first ? 0 : 128));
    unsigned char msg[8];
    int st = 0;

    for (int i = 1; i <= iters && !st; i++) {
        for (int turn = 0; turn < 2 && !st; turn++) {
            int send = (turn == 0) == (first != 0);
            if (mode == PP_SIGNAL) {
                st = send ? gpuport_memory_put_with_signal(&ch, 64, 64, 8)
                          : gpuport_memory_wait(&ch);
            } else if (mode == PP_PACKET) {
                /* packets to the peer at MC_PKT + 16 * side, from the source */
                if (send)
                    st = gpuport_memory_put_packets(&ch, MC_PKT + (first ? 0 : 16), 64, 8,
                                                    (uint32_t)i, 0, 1);
                else
                    st = gpuport_memory_read_packets(&ch, MC_PKT + (first ? 16 : 0), msg, 8,
                                                     (uint32_t)i, 0, 1);
            } else if (send && mode == PP_RAW) {
                asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(theirs),
                             "l"((uint64_t)i)
                             : "memory");
            } else if (send) {
                unsigned long long o = 1, d = 1;
                if (mode >= PP_OPS) {
                    o = *(volatile unsigned long long *)(ch.local_dst + MC_FLAGS + 64);
                    d = *(volatile unsigned long long *)(ch.local_dst + MC_FLAGS + 72);
                }
                *(volatile uint64_t *)(ch.dst + 64) = *(const uint64_t *)(ch.src + 64);
                if (mode == PP_COPY || o != d)
                    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(theirs),
                                 "l"((uint64_t)i)
                                 : "memory");
                else
                    asm volatile("red.release.sys.global.add.u64 [%0], 1;" ::"l"(theirs)
                                 : "memory");
            } else if (mode == PP_SPLIT) {
                uint64_t v;
                (void)gpuport_dev_load_sys(ch_port_inbound); /* its acquire orders the polls */
                do
                    v = gpuport_dev_load_sys(mine);
                while (v < (uint64_t)i);
                atomicMax((unsigned long long *)(ch.local_dst + MC_FLAGS + 192), v);
            } else {
                uint64_t v;
                do
                    asm volatile("ld.acquire.sys.global.u64 %0, [%1];"
                                 : "=l"(v)
                                 : "l"(mine)
                                 : "memory");
                while (v < (uint64_t)i);
                if (mode >= PP_MAX)
                    atomicMax((unsigned long long *)(ch.local_dst + MC_FLAGS + 192), v);
            }
        }
    }
    *ns = gpuport_dev_now_ns() - t0;
    *rc = st;
}

/* The 8 B ping-pong over a peer channel (its store path here): the
 * receiver waits until the channel's count reaches the round
 * (gpuport_peer_wait_until), as NVSHMEM's ping-pong waits until its signal
 * reaches the round (workloads/peers/pingpong_nvshmem.cu). The count goes
 * on from earlier runs on the channel, every signal of which was taken:
 * the consumed count at the start is where this run's rounds count from. */
static __global__ void k_peer_pingpong(gpuport_peer_channel_dev_t ch, int first, int iters,
                                       int raw, uint64_t *ns, int *rc)
{
    uint64_t t0 = gpuport_dev_now_ns();
    uint64_t base = *(volatile unsigned long long *)ch.port.consumed;
    int st = 0;

    for (int i = 1; i <= iters && !st; i++)
        for (int turn = 0; turn < 2 && !st; turn++) {
            int send = (turn == 0) == (first != 0);
            if (send && raw == 1) {
                /* the library's put_with_signal by its parts, without checks */
                unsigned long long o = *(volatile unsigned long long *)ch.port_ops;
                unsigned long long d = *(volatile unsigned long long *)ch.port_done;
                *(volatile uint64_t *)(ch.mem.dst + 64) = *(const uint64_t *)(ch.mem.src + 64);
                if (o > d)
                    st = GPUPORT_ERR_INTERNAL;
                else
                    asm volatile("red.release.sys.global.add.u64 [%0], 1;" ::"l"(ch.mem.peer_sem)
                                 : "memory");
            } else if (!send && raw == 2) {
                /* the library's wait_until by its parts: no host word, no pause */
                while (gpuport_dev_load_sys(ch.mem.inbound) < base + i)
                    ;
                atomicMax(ch.port.consumed, base + i);
            } else {
                st = send ? gpuport_peer_put_with_signal(&ch, 64, 64, 8)
                          : gpuport_peer_wait_until(&ch, base + i);
            }
        }
    *ns = gpuport_dev_now_ns() - t0;
    *rc = st;
}

/* The block-scoped ping-pong over a peer channel: `size` bytes from offset
 * MC_RATE by put_with_signal_block, answered alike; the path each put takes
 * is the channel's (its store_max, GPUPORT_PEER_PATH). */
static __global__ void k_peer_pp_block(gpuport_peer_channel_dev_t ch, int first, int iters,
                                       uint64_t size, uint64_t *ns, int *rc)
{
    uint64_t t0 = gpuport_dev_now_ns();
    int st = 0;

    for (int i = 1; i <= iters && !st; i++)
        for (int turn = 0; turn < 2 && !st; turn++)
            st = (turn == 0) == (first != 0)
                     ? gpuport_peer_put_with_signal_block(&ch, MC_RATE, MC_RATE, size)
                     : gpuport_peer_wait_block(&ch);
    if (threadIdx.x == 0) {
        *ns = gpuport_dev_now_ns() - t0;
        *rc = st;
    }
}

/* Each warp: `per` times 64 B at its own place, then its lane 0 signals
 * (mode 0), or the floor's fence and atomic add (mode 1), or a port
 * channel's put_with_signal by lane 0 (mode 2, flush at the end). */
static __global__ void k_mc_rate(gpuport_memory_channel_dev_t ch, gpuport_port_channel_dev_t pc,
                                 int mode, int per, uint64_t *ns, int *rc)
{
    unsigned long long *counter = (unsigned long long *)gpuport_memory_peer_ptr(&ch, MC_COUNTER);
    uint32_t lane = threadIdx.x & 31, warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    uint32_t nwarps = gridDim.x * blockDim.x / 32;
    uint64_t t0 = gpuport_dev_now_ns();
    int st = 0;

    for (int i = 0; i < per && !st; i++) {
        uint64_t off = MC_RATE + ((uint64_t)i * nwarps + warp) * 64;
        if (mode == 0) {
            st = gpuport_memory_put(&ch, off, off, 64, lane, 32);
            __syncwarp();
            if (lane == 0 && !st)
                st = gpuport_memory_signal(&ch);
        } else if (mode == 1) {
            unsigned char *d = gpuport_memory_peer_ptr(&ch, off);
            if (lane < 4)
                ((uint4 *)d)[lane] = ((const uint4 *)(ch.src + off))[lane];
            __syncwarp();
            if (lane == 0) {
                __threadfence_system();
                atomicAdd_system(counter, 1ull);
            }
        } else if (lane == 0) {
            st = gpuport_put_with_signal(&pc, off, off, 64);
        }
        st = __shfl_sync(0xffffffffu, st, 0);
    }
    if (mode == 2 && lane == 0 && !st)
        st = gpuport_flush(&pc);
    if (st)
        atomicCAS(rc, 0, st);
    __syncthreads();
    if (threadIdx.x == 0)
        atomicMax((unsigned long long *)ns, (unsigned long long)(gpuport_dev_now_ns() - t0));
}

/* The receiver's side of a rate row: takes signals until n (then sees no
 * more in 100 polls); *taken gets the count. */
static __global__ void k_mc_take(gpuport_memory_channel_dev_t ch, unsigned long long n,
                                 unsigned long long *taken, int *rc)
{
    unsigned long long got = 0;
    int st = 0;
    while (got < n && !st) {
        st = gpuport_memory_wait(&ch);
        got += st == 0;
    }
    for (int i = 0; i < 100 && !st; i++) {
        int r = gpuport_memory_poll(&ch);
        if (r < 0)
            st = r;
        got += r == 1;
    }
    *taken = got;
    *rc = st;
}

static __global__ void k_mc_put(gpuport_memory_channel_dev_t ch, uint64_t size, int raw, int *rc)
{
    uint32_t t = blockIdx.x * blockDim.x + threadIdx.x, nt = gridDim.x * blockDim.x;
    if (raw) {
        uint4 *d = (uint4 *)gpuport_memory_peer_ptr(&ch, 0);
        const uint4 *s = (const uint4 *)ch.src;
        for (uint64_t i = t; i < size / 16; i += nt)
            d[i] = s[i];
        return;
    }
    int st = gpuport_memory_put(&ch, 0, 0, size, t, nt);
    if (st)
        atomicCAS(rc, 0, st);
}

static __global__ void k_mc_signal(gpuport_memory_channel_dev_t ch, int *rc)
{
    int st = gpuport_memory_signal(&ch);
    if (st)
        *rc = st;
}

static __global__ void k_mc_wait(gpuport_memory_channel_dev_t ch, int *rc)
{
    *rc = gpuport_memory_wait(&ch);
}

typedef struct mc {
    unsigned char *src, *dst;
    gpuport_mem_t msrc, mdst;
    gpuport_memory_channel_t ch;
    gpuport_memory_channel_dev_t dev;
    uint64_t region;
} mc_t;

static int mc_rc(state_t *st)
{
    int rc = 0;
    CK(cudaStreamSynchronize(st->s));
    CK(cudaMemcpy(&rc, st->d_rc, sizeof(int), cudaMemcpyDeviceToHost));
    CK(cudaMemset(st->d_rc, 0, sizeof(int)));
    return rc;
}

/* mean round trip in us, or -1 on a CUDA error; *bad_p: a failed call */
static double pingpong(state_t *st, mc_t *m, int mode, int iters, int *bad_p,
                       const volatile uint64_t *host_word = NULL)
{
    const bench_gpu_env_t *env = st->env;
    int first = env->rank < env->peer, rc = 0;
    uint64_t ns = 0;

    /* the floor's flags start from 0 on both sides */
    if (cudaMemset(m->dst + MC_FLAGS, 0, 256) != cudaSuccess || cudaDeviceSynchronize())
        return -1;
    env->barrier(env->ctx);
    k_mc_pingpong<<<1, 1, 0, st->s>>>(m->dev, mode, first, iters, host_word, st->d_ns,
                                      st->d_rc);
    if (bench_wait(st->s, st->d_ns, &ns, st->d_rc, &rc))
        return -1;
    env->barrier(env->ctx);
    *bad_p |= rc != 0;
    return ns / 1e3 / iters;
}

static double peer_pingpong(state_t *st, const gpuport_peer_channel_dev_t *dev, int iters,
                            int *bad_p, int raw = 0)
{
    const bench_gpu_env_t *env = st->env;
    uint64_t ns = 0;
    int rc = 0;

    env->barrier(env->ctx);
    k_peer_pingpong<<<1, 1, 0, st->s>>>(*dev, env->rank < env->peer, iters, raw, st->d_ns,
                                        st->d_rc);
    if (bench_wait(st->s, st->d_ns, &ns, st->d_rc, &rc))
        return -1;
    env->barrier(env->ctx);
    *bad_p |= rc != 0;
    return ns / 1e3 / iters;
}

static double peer_pp_block(state_t *st, const gpuport_peer_channel_dev_t *dev, int iters,
                            uint64_t size, int *bad_p)
{
    const bench_gpu_env_t *env = st->env;
    uint64_t ns = 0;
    int rc = 0;

    env->barrier(env->ctx);
    k_peer_pp_block<<<1, 256, 0, st->s>>>(*dev, env->rank < env->peer, iters, size, st->d_ns,
                                          st->d_rc);
    if (bench_wait(st->s, st->d_ns, &ns, st->d_rc, &rc))
        return -1;
    env->barrier(env->ctx);
    *bad_p |= rc != 0;
    return ns / 1e3 / iters;
}

static double port_pingpong(state_t *st, int iters, int *bad_p)
{
    const bench_gpu_env_t *env = st->env;
    uint64_t ns = 0;
    int rc = 0;

    env->barrier(env->ctx);
    k_pingpong<<<1, 1, 0, st->s>>>(st->k[0].dev, env->rank < env->peer, iters, st->d_ns,
                                   st->d_rc, NULL);
    if (bench_wait(st->s, st->d_ns, &ns, st->d_rc, &rc))
        return -1;
    env->barrier(env->ctx);
    *bad_p |= rc != 0;
    return ns / 1e3 / iters;
}

/* M operations/s of mode at `warps` warps (sender: the lower rank); the
 * receiver checks the signals' count (modes 0 and 2) and every byte. */
static double rate(state_t *st, mc_t *m, int mode, int warps, int per, int *bad_p)
{
    const bench_gpu_env_t *env = st->env;
    int sender = env->rank < env->peer, rc = 0;
    unsigned long long n = (unsigned long long)warps * per, taken = 0, *d_taken;
    uint64_t ns = 0, bytes = n * 64;
    double mops = 0;

    if (cudaMemset((mode == 2 ? st->k[0].dst : m->dst) + MC_RATE, 0, bytes) != cudaSuccess ||
        cudaMemset(st->d_ns, 0, 8) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess)
        return -1;
    CK(cudaMalloc(&d_taken, sizeof(*d_taken)));
    env->barrier(env->ctx);
    if (sender) {
        k_mc_rate<<<warps, 32, 0, st->s>>>(m->dev, st->k[0].dev, mode, per, st->d_ns, st->d_rc);
        if (bench_wait(st->s, st->d_ns, &ns, st->d_rc, &rc))
            return -1;
        mops = n / (ns / 1e3);
    } else if (mode == 0) {
        k_mc_take<<<1, 1, 0, st->s>>>(m->dev, n, d_taken, st->d_rc);
        rc = mc_rc(st);
        CK(cudaMemcpy(&taken, d_taken, sizeof(taken), cudaMemcpyDeviceToHost));
        if (taken != n)
            fprintf(stderr, "gpuport_bench: memory channel: %llu signals taken, %llu sent\n",
                    taken, n);
        rc |= taken != n;
    } else if (mode == 2) {
        k_port_take<<<1, 1, 0, st->s>>>(st->k[0].dev, n, st->d_rc);
        rc = mc_rc(st);
    }
    env->barrier(env->ctx);
    if (!sender) {
        /* every 64 B piece the sender stored, from its source at the same offset */
        const unsigned char *d = mode == 2 ? st->k[0].dst : m->dst;
        unsigned long long nbad = 0;
        CK(cudaMemset(st->d_bad, 0, sizeof(*st->d_bad)));
        k_mc_check<<<256, 256, 0, st->s>>>(d + MC_RATE, MC_RATE, bytes, st->d_bad);
        CK(cudaStreamSynchronize(st->s));
        CK(cudaMemcpy(&nbad, st->d_bad, sizeof(nbad), cudaMemcpyDeviceToHost));
        if (nbad)
            fprintf(stderr, "gpuport_bench: 64 B puts (mode %d, %d warps): %llu bytes wrong\n",
                    mode, warps, nbad);
        rc |= nbad != 0;
    }
    cudaFree(d_taken);
    *bad_p |= rc != 0;
    return mops;
}

int bench_memchan(state_t *st)
{
    const bench_gpu_env_t *env = st->env;
    static const int warps[] = {1, 8, 64};
    cudaDeviceProp prop;
    mc_t m;
    int bad = 0, fails = 0, iters = scaled(env, 2000), per = scaled(env, 200);
    uint64_t room;
    const char *mps = getenv("CUDA_MPS_PIPE_DIRECTORY");
    char name[64];

    if (strcmp(gpuport_channel_transport(st->k[0].ch), "cuda_ipc") != 0) {
        if (env->report)
            printf("\nMemory channels: skipped (the pair is reached over %s; memory channels "
                   "need GPUs of one host that map each other's memory)\n",
                   gpuport_channel_transport(st->k[0].ch));
        return 0;
    }
    memset(&m, 0, sizeof(m));
    m.region = st->region < (16u << 20) ? (16u << 20) : st->region;
    GK(gpuport_mem_alloc_device(env->comm, m.region, (void **)&m.src));
    GK(gpuport_mem_alloc_device(env->comm, m.region, (void **)&m.dst));
    k_fill<<<1024, 256>>>(m.src, m.region);
    CK(cudaMemset(m.dst, 0, m.region));
    CK(cudaDeviceSynchronize());
    GK(gpuport_mem_register(env->comm, m.src, m.region, &m.msrc));
    GK(gpuport_mem_register(env->comm, m.dst, m.region, &m.mdst));
    GK(gpuport_memory_channel_create(env->comm, env->peer, m.msrc, m.mdst, &m.ch));
    GK(gpuport_memory_channel_device(m.ch, &m.dev));
    CK(cudaGetDeviceProperties(&prop, st->gpu));
    /* the rate rows' 64 B pieces fit both channels' regions */
    room = (st->region < m.region ? st->region : m.region) - MC_RATE;
    if ((uint64_t)per * 64 * 64 > room)
        per = (int)(room / (64 * 64));
    if (env->report)
        printf("\nMemory channels (kernels' own stores, VMM memory; signals by %s), beside the "
               "floor through the same\nmapping and the port channel (%s), same run; %s; "
               "CUDA_MPS_PIPE_DIRECTORY %s\n",
               m.dev.sem_atomic ? "atomic adds in the peer's GPU memory"
                                : "stores into the peer's control segment",
               st->k[0].name, st->shared ? "the pair shares one GPU" : "the pair on two GPUs",
               mps ? "set (MPS)" : "unset (no MPS: the pair's kernels take turns)");

    {
        int n = st->shared && !mps ? scaled(env, 50) : iters;
        gpuport_peer_channel_t pc;
        gpuport_peer_channel_dev_t pdev;
        GK(gpuport_peer_channel_create(env->comm, env->peer, m.msrc, m.mdst, &pc));
        GK(gpuport_peer_channel_device(pc, &pdev));
        double sig = pingpong(st, &m, PP_SIGNAL, n, &bad);
        double pkt = pingpong(st, &m, PP_PACKET, n, &bad);
        double raw = pingpong(st, &m, PP_RAW, n, &bad);
        double port = port_pingpong(st, n, &bad);
        double peer = peer_pingpong(st, &pdev, n, &bad);
        /* the steps from the floor to the peer channel, two rounds in turn */
        double step[2][PP_MODES];
        for (int r = 0; r < 2; r++)
            for (int k = PP_RAW; k < PP_MODES; k++)
                if ((step[r][k] = pingpong(st, &m, k, n, &bad, pdev.port.inbound)) < 0)
                    return -1;
        /* the peer channel with one side's call replaced by its parts: the
         * store path's, so only where it is mapped (GPUPORT_PEER_PATH=proxy
         * leaves the handle's memory-channel half empty) */
        double split[2][2] = {{0, 0}, {0, 0}};
        for (int r = 0; r < 2 && pdev.stores; r++)
            for (int k = 0; k < 2; k++)
                if ((split[r][k] = peer_pingpong(st, &pdev, n, &bad, k + 1)) < 0)
                    return -1;
        /* the block's put + signal round trip by size: where the store path
         * stops paying (run under GPUPORT_PEER_PATH=stores and =proxy to
         * set GPUPORT_PEER_STORE_MAX) */
        if (env->report)
            printf("  peer ch. put_with_signal_block (256 threads) round trip, %s, store_max %llu "
                   "B/thread:\n",
                   pdev.stores ? "store path mapped" : "proxy path only",
                   (unsigned long long)pdev.store_max);
        for (uint64_t size = 64; size <= (1u << 20) && size <= m.region - MC_RATE; size *= 4) {
            int k = size >= (256u << 10) ? (n + 3) / 4 : n;
            double t = peer_pp_block(st, &pdev, k, size, &bad);
            if (t < 0)
                return -1;
            if (env->report) {
                printf("    %8llu B  %8.2f us  %s%s\n", (unsigned long long)size, t,
                       pdev.stores && (size + 255) / 256 <= pdev.store_max ? "stores" : "proxy",
                       bad ? "  ERROR" : "");
                bench_out_value("peer_pp_block", size, "latency", "us", "mean", t, k, NULL, 0,
                                bad ? 0 : -1);
            }
        }
        env->barrier(env->ctx);
        GK(gpuport_peer_channel_destroy(pc));
        if (sig < 0 || pkt < 0 || raw < 0 || port < 0 || peer < 0)
            return -1;
        if (env->report) {
            printf("  8 B ping-pong round trip (%d, mean)      %10s %10s %10s %10s %10s\n", n,
                   "signal", "packet", "floor", "port ch.", "peer ch.");
            printf("  %-41s %7.2f us %7.2f us %7.2f us %7.2f us %7.2f us   packet %.2fx the "
                   "floor%s\n",
                   "", sig, pkt, raw, port, peer, raw > 0 ? pkt / raw : 0.0,
                   bad ? "  ERROR" : "");
            bench_out_value("peer_pingpong", 8, "latency", "us", "mean", peer, n,
                            "raw release-store ping-pong through the same mapping", raw,
                            bad ? 0 : -1);
            bench_out_value("memchan_pingpong_signal", 8, "latency", "us", "mean", sig, n,
                            "raw release-store ping-pong through the same mapping", raw,
                            bad ? 0 : -1);
            bench_out_value("memchan_pingpong_packet", 8, "latency", "us", "mean", pkt, n,
                            "raw release-store ping-pong through the same mapping", raw,
                            bad ? 0 : -1);
            bench_out_value("memchan_pingpong_port", 8, "latency", "us", "mean", port, n,
                            "memory channel by packet", pkt, bad ? 0 : -1);
        }
        if (env->report) {
            printf("  8 B ping-pong round trip, from the floor to the peer channel (%d, mean; "
                   "two rounds in turn):\n",
                   n);
            for (int k = PP_RAW; k < PP_MODES; k++)
                printf("    %-56s %7.2f us %7.2f us\n", pp_step_name[k], step[0][k], step[1][k]);
            printf("    %-56s %7.2f us\n", "peer channel (put_with_signal, wait_until)", peer);
            if (pdev.stores) {
                printf("    %-56s %7.2f us %7.2f us\n",
                       "peer channel, its put_with_signal by parts", split[0][0], split[1][0]);
                printf("    %-56s %7.2f us %7.2f us\n", "peer channel, its wait_until by parts",
                       split[0][1], split[1][1]);
            } else {
                printf("    (the peer channel by parts: no store path mapped, none)\n");
            }
        }
        fails += bad;
    }
    if (env->report)
        printf("  64 B put + signal, M/s (%d per warp)      %10s %10s %10s\n", per, "memory",
               "floor", "port ch.");
    for (size_t k = 0; k < sizeof(warps) / sizeof(warps[0]); k++) {
        int w = warps[k];
        double r[3];
        bad = 0;
        for (int mode = 0; mode < 3; mode++) {
            r[mode] = rate(st, &m, mode, w, per, &bad);
            if (r[mode] < 0)
                return -1;
        }
        fails += bad;
        if (env->report) {
            printf("  %3d warp(s)%-30s %10.2f %10.2f %10.2f   %.0f%% of the floor%s\n", w, "",
                   r[0], r[1], r[2], r[1] > 0 ? 100 * r[0] / r[1] : 0.0, bad ? "  ERROR" : "");
            snprintf(name, sizeof(name), "memchan_put64_signal_w%d", w);
            bench_out_value(name, 64, "rate", "M/s", "total", r[0], (uint64_t)w * per,
                            "64 B stores + system fence + atomic add, same mapping", r[1],
                            bad ? 0 : -1);
        }
    }
    if (env->report)
        printf("  put bandwidth, GB/s (blocks of 512)       %10s %10s %10s %10s %10s %10s\n",
               "1 block", "floor", "8 blocks", "floor", "all SMs", "floor");
    for (uint64_t size = 1024; size <= m.region; size *= 4) {
        int blocks[3] = {1, 8, prop.multiProcessorCount}, reps = size < (1u << 20) ? 50 : 5;
        double g[3][2];
        bad = 0;
        for (int b = 0; b < 3; b++) {
            for (int raw = 0; raw < 2; raw++) {
                int sender = env->rank < env->peer, rc = 0;
                float ms = 0;
                env->barrier(env->ctx);
                if (sender) {
                    CK(cudaEventRecord(st->e0, st->s));
                    for (int i = 0; i < reps; i++)
                        k_mc_put<<<blocks[b], 512, 0, st->s>>>(m.dev, size, raw, st->d_rc);
                    if (!raw)
                        k_mc_signal<<<1, 1, 0, st->s>>>(m.dev, st->d_rc);
                    CK(cudaEventRecord(st->e1, st->s));
                    CK(cudaEventSynchronize(st->e1));
                    CK(cudaEventElapsedTime(&ms, st->e0, st->e1));
                    rc = mc_rc(st);
                } else if (!raw) {
                    unsigned long long nbad = 0;
                    k_mc_wait<<<1, 1, 0, st->s>>>(m.dev, st->d_rc);
                    rc = mc_rc(st);
                    CK(cudaMemset(st->d_bad, 0, sizeof(*st->d_bad)));
                    k_check<<<256, 256, 0, st->s>>>(m.dst, size, st->d_bad);
                    CK(cudaStreamSynchronize(st->s));
                    CK(cudaMemcpy(&nbad, st->d_bad, sizeof(nbad), cudaMemcpyDeviceToHost));
                    rc |= nbad != 0;
                }
                env->barrier(env->ctx);
                bad |= rc != 0;
                g[b][raw] = ms > 0 ? (double)size * reps / (ms / 1e3) / 1e9 : 0;
            }
        }
        fails += bad;
        if (env->report) {
            char sz[32];
            if (size >= (1u << 20))
                snprintf(sz, sizeof(sz), "%llu MiB", (unsigned long long)(size >> 20));
            else
                snprintf(sz, sizeof(sz), "%llu KiB", (unsigned long long)(size >> 10));
            printf("  %-41s %10.1f %10.1f %10.1f %10.1f %10.1f %10.1f%s\n", sz, g[0][0],
                   g[0][1], g[1][0], g[1][1], g[2][0], g[2][1], bad ? "  ERROR" : "");
            snprintf(name, sizeof(name), "memchan_put_bw_all_blocks");
            bench_out_value(name, size, "bandwidth", "GB/s", "mean", g[2][0], (uint64_t)reps,
                            "raw 16-byte stores of the same grid, same mapping", g[2][1],
                            bad ? 0 : -1);
        }
    }
    env->barrier(env->ctx);
    GK(gpuport_memory_channel_destroy(m.ch));
    GK(gpuport_mem_deregister(m.msrc));
    GK(gpuport_mem_deregister(m.mdst));
    return fails;
}
