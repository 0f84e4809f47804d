/*
 * gpuport_bench --rma-gpu (bench_rma_gpu.h): get, atomic_add and accumulate
 * from kernels, each beside a baseline from the same run, on one pair of VMM
 * regions (gpuport_mem_alloc_device) under a port channel and a memory
 * channel. The lower rank times; the other runs no kernel meanwhile, then
 * checks what landed in its memory (the timing rank checks what gets bring).
 *  1. Port channel: one thread's rounds of get + flush and of put + flush,
 *     beside rounds of cudaMemcpyPeerAsync + cudaStreamSynchronize (host
 *     clock) to, then from, a buffer this process holds on the peer's GPU.
 *  2. gpuport_memory_get and _put by one block and by every SM (blocks of
 *     512), beside the same 16-byte loads or stores through the mapping
 *     (gpuport_memory_peer_ptr).
 *  3. gpuport_memory_atomic_add of 1 by every thread of every SM into one
 *     word, then each into its own, beside atomicAdd_system through the
 *     mapping and gpuport_memory_put_value; the port channel's put_value
 *     for scale (its atomic_add into GPU memory is refused).
 *  4. gpuport_memory_accumulate of float32 and bfloat16 by every SM, beside
 *     the same element adds through the mapping and gpuport_memory_put.
 * Each run zeroes its target first and checks it after: every byte moved
 * (the raw copies: what came back), each counter's exact total, each
 * accumulated element equal to the launches (a source of 1.0; at most 201
 * launches, which bfloat16 counts exactly).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_gpu_int.h"
#include "bench_rma_gpu.h"

#define MIB (1ull << 20)
#define BIG (16 * MIB) /* the largest size */
/* The regions' areas: gets read the peer's destination and write this
 * side's source at A_GET; puts use A_PUT, accumulates A_ACC, adds A_CNT. */
#define A_GET 0
#define A_PUT BIG
#define A_ACC (2 * BIG)
#define A_CNT (3 * BIG)
#define REGION (3 * BIG + MIB)
#define THREADS 512        /* a memory-channel block */
#define PV_THREADS 128     /* the port channel's put_value block */
#define PV_VALUE 0x5eedull /* what the memory channel's put_values store */

/* k_pattern's: bytes bpat and gpat (bpat ^ 0xa5, which differs in every
 * byte), 8-byte words of one value or of their index + 1, floats */
enum { P_BPAT, P_GPAT, P_U64, P_SLOT, P_F32, P_BF16 };
static const int elem_size[] = {1, 1, 8, 8, 4, 2};

/* what run() launches: k_mc (gpuport's call, or the same accesses through
 * the mapping: _RAW) or k_port; its target's place and pattern, in the
 * other rank's destination, or the timing rank's source for gets */
enum { MV_GET, MV_GET_RAW, MV_PUT, MV_PUT_RAW, MV_F32, MV_F32_RAW, MV_BF16, MV_BF16_RAW,
       AT_ADD, AT_RAW, AT_PUT_VALUE, PORT_GET, PORT_PUT, PORT_PV };
static const struct mode {
    const char *name;
    int pat;
    uint64_t off;
} modes[] = {
    {"memory get", P_GPAT, A_GET}, {"raw loads", P_GPAT, A_GET},
    {"memory put", P_BPAT, A_PUT}, {"raw stores", P_BPAT, A_PUT},
    {"accumulate float32", P_F32, A_ACC}, {"raw float32 adds", P_F32, A_ACC},
    {"accumulate bfloat16", P_BF16, A_ACC}, {"raw bfloat16 adds", P_BF16, A_ACC},
    {"memory atomic_add", P_U64, A_CNT}, {"raw atomicAdd_system", P_U64, A_CNT},
    {"memory put_value", P_U64, A_CNT}, {"port channel get", P_GPAT, A_GET},
    {"port channel put", P_BPAT, A_PUT}, {"port channel put_value", P_SLOT, A_PUT}};

/* Stores e as element i of p, or (check) says whether it differs. */
template <typename T>
__device__ static unsigned long long fill_or_check(unsigned char *p, uint64_t i, T e, bool check)
{
    if (check)
        return ((T *)p)[i] != e;
    ((T *)p)[i] = e;
    return 0;
}

/* Writes pattern pat over n elements of p (bad NULL), or adds to *bad the
 * elements that differ from it. Floats by their bits: values and sums here
 * are small integers, exact in both types. */
static __global__ void k_pattern(unsigned char *p, int pat, uint64_t base, uint64_t n, double v,
                                 unsigned long long *bad)
{
    unsigned long long b = 0;
    unsigned f32 = __float_as_uint((float)v);
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        if (pat <= P_GPAT)
            b += fill_or_check<unsigned char>(
                p, i, (unsigned char)(bpat(base + i) ^ (pat == P_GPAT ? 0xa5 : 0)), bad != NULL);
        else if (pat <= P_SLOT)
            b += fill_or_check<unsigned long long>(
                p, i, pat == P_SLOT ? i + 1 : (unsigned long long)v, bad != NULL);
        else if (pat == P_F32)
            b += fill_or_check<unsigned>(p, i, f32, bad != NULL);
        else
            b += fill_or_check<unsigned short>(p, i, (unsigned short)(f32 >> 16), bad != NULL);
    }
    if (b)
        atomicAdd(bad, b);
}

/* Port channel: one thread's rounds of (get or put of size) + flush, each
 * round's us into us where given; or (PORT_PV) every thread of a block
 * `rounds` put_values, number i of thread g into slot i * blockDim + g (the
 * value slot + 1), then one flush. */
static __global__ void k_port(gpuport_port_channel_dev_t ch, int mode, uint64_t size, int rounds,
                              double *us, int *rc)
{
    uint64_t prev = gpuport_dev_now_ns(), t, slot;
    int st = 0;
    for (int i = 0; i < rounds && !st; i++) {
        if (mode == PORT_PV) {
            slot = (uint64_t)i * blockDim.x + threadIdx.x;
            st = gpuport_put_value(&ch, A_PUT + slot * 8, slot + 1);
            continue;
        }
        st = mode == PORT_GET ? gpuport_get(&ch, A_GET, A_GET, size)
                              : gpuport_put(&ch, A_PUT, A_PUT, size);
        st = st ? st : gpuport_flush(&ch);
        if (us) {
            t = gpuport_dev_now_ns();
            us[i] = (t - prev) / 1e3;
            prev = t;
        }
    }
    if (mode == PORT_PV) {
        __syncthreads();
        if (threadIdx.x == 0 && !st)
            st = gpuport_flush(&ch);
    }
    if (st)
        atomicCAS(rc, 0, st);
}

/* A memory-channel move of arg bytes by the grid at off, or (AT_*) arg adds
 * of 1 or put_values by every thread into the counter at off (one) or its
 * own after it. */
static __global__ void k_mc(gpuport_memory_channel_dev_t ch, int mode, uint64_t off,
                            uint64_t arg, int one, int *rc)
{
    uint32_t t = blockIdx.x * blockDim.x + threadIdx.x, nt = gridDim.x * blockDim.x;
    unsigned char *peer, *mine = (unsigned char *)ch.src + off;
    int st = 0;

    off += mode >= AT_ADD && !one ? t * 8ull : 0;
    peer = gpuport_memory_peer_ptr(&ch, off);
    if (mode == MV_GET)
        st = gpuport_memory_get(&ch, off, off, arg, t, nt);
    else if (mode == MV_PUT)
        st = gpuport_memory_put(&ch, off, off, arg, t, nt);
    else if (mode == MV_F32 || mode == MV_BF16)
        st = gpuport_memory_accumulate(&ch, off, off, arg / (mode == MV_F32 ? 4 : 2),
                                       mode == MV_F32 ? GPUPORT_FLOAT32 : GPUPORT_BFLOAT16, t, nt);
    else if (mode == MV_GET_RAW || mode == MV_PUT_RAW)
        for (uint64_t i = t; i < arg / 16; i += nt)
            ((uint4 *)(mode == MV_GET_RAW ? mine : peer))[i] =
                ((const uint4 *)(mode == MV_GET_RAW ? peer : mine))[i];
    else if (mode == MV_F32_RAW)
        for (uint64_t i = t; i < arg / 4; i += nt)
            atomicAdd_system((float *)peer + i, ((const float *)mine)[i]);
    else if (mode == MV_BF16_RAW)
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
        for (uint64_t i = t; i < arg / 2; i += nt)
            asm volatile("red.relaxed.sys.global.add.noftz.bf16 [%0], %1;" ::"l"(
                             (unsigned short *)peer + i),
                         "h"(((const unsigned short *)mine)[i])
                         : "memory");
#else
        st = GPUPORT_ERR_NOT_SUPPORTED;
#endif
    else
        for (uint64_t i = 0; i < arg && !st; i++)
            if (mode == AT_ADD)
                st = gpuport_memory_atomic_add(&ch, off, 1);
            else if (mode == AT_RAW)
                atomicAdd_system((unsigned long long *)peer, 1ull);
            else
                st = gpuport_memory_put_value(&ch, off, PV_VALUE);
    if (st)
        atomicCAS(rc, 0, st);
}

typedef struct rg {
    const bench_gpu_env_t *env;
    int timer; /* 1: this rank times (the lower of the pair) */
    int gpu, peer_gpu, sms;
    cudaStream_t s;
    cudaEvent_t e0, e1;
    uint64_t *d_w;     /* device words: [0] mismatches, [1] a kernel's status (int) */
    double *d_us, *us; /* per round */
    unsigned char *src, *dst; /* both channels' regions */
    gpuport_mem_t msrc, mdst;
    gpuport_channel_t pch;
    gpuport_port_channel_dev_t pdev;
    gpuport_memory_channel_t mch;
    gpuport_memory_channel_dev_t mdev;
    unsigned char *raw_loc, *raw_far; /* the raw copies': here, on the peer's GPU */
} rg_t;

#define D_BAD(x) ((unsigned long long *)(x)->d_w)
#define D_RC(x) ((int *)((x)->d_w + 1))

/* Fills (bad_p NULL) or checks n elements of p with pattern pat. */
static int pattern(rg_t *x, unsigned char *p, int pat, uint64_t base, uint64_t n, double v,
                   unsigned long long *bad_p)
{
    CK(cudaMemsetAsync(D_BAD(x), 0, sizeof(uint64_t), x->s));
    k_pattern<<<1024, 256, 0, x->s>>>(p, pat, base, n, v, bad_p ? D_BAD(x) : NULL);
    CK(cudaGetLastError());
    CK(cudaStreamSynchronize(x->s));
    if (bad_p)
        CK(cudaMemcpy(bad_p, D_BAD(x), sizeof(*bad_p), cudaMemcpyDeviceToHost));
    return 0;
}

/* After a run: the target's owner checks n elements of its pattern; both
 * learn that and the timing rank's status rc; *ok_p cleared on a failure. */
static int verify(rg_t *x, int mode, unsigned char *p, uint64_t n, double v, int rc, int *ok_p)
{
    const struct mode *md = &modes[mode];
    unsigned long long mine[2] = {0, rc != 0}, theirs[2] = {0, 0};

    x->env->barrier(x->env->ctx);
    if (x->timer == (md->pat == P_GPAT) && pattern(x, p, md->pat, md->off, n, v, &mine[0]))
        return -1;
    if (rc)
        fprintf(stderr, "gpuport_bench: --rma-gpu %s failed: %s\n", md->name,
                gpuport_status_string((gpuport_status_t)rc));
    if (mine[0])
        fprintf(stderr, "gpuport_bench: rank %d: --rma-gpu %s: %llu of %llu elements wrong\n",
                x->env->rank, md->name, mine[0], (unsigned long long)n);
    x->env->exchange(x->env->ctx, mine, theirs, sizeof(mine));
    *ok_p &= !(mine[0] || mine[1] || theirs[0] || theirs[1]);
    return 0;
}

/* Runs `mode` on the timing rank after its target's owner zeroed the
 * target, then checks it. Port gets and puts: one untimed launch of 4
 * rounds, one of reps rounds of arg bytes (st_p: per round); the adds and
 * put_values: one untimed launch of 1 per thread, one of arg per thread;
 * moves: one untimed and reps timed launches of arg bytes. *ms_p: the timed
 * launches (events), 0 where a call failed. */
static int run(rg_t *x, int mode, int blocks, uint64_t arg, int one, int reps, float *ms_p,
               bench_stats_t *st_p, int *ok_p)
{
    const struct mode *md = &modes[mode];
    int pat = md->pat, acc = pat >= P_F32, rc = 0, launches = mode >= AT_ADD ? 1 : reps;
    uint64_t nt = (uint64_t)blocks * THREADS;
    uint64_t n = pat == P_SLOT ? PV_THREADS * arg : pat == P_U64 ? (one ? 1 : nt)
                 : arg / elem_size[pat];
    double v = acc ? reps + 1 : mode == AT_PUT_VALUE ? PV_VALUE : one ? nt * (arg + 1.0)
               : arg + 1.0;
    unsigned char *target = (pat == P_GPAT ? x->src : x->dst) + md->off;

    if (x->timer && acc && pattern(x, x->src + md->off, pat, 0, n, 1.0, NULL))
        return -1;
    if (x->timer == (pat == P_GPAT)) {
        CK(cudaMemsetAsync(target, 0, n * elem_size[pat], x->s));
        CK(cudaStreamSynchronize(x->s));
    }
    x->env->barrier(x->env->ctx);
    if (x->timer) {
        for (int i = -1; i < launches; i++) {
            int rounds = mode == PORT_PV ? (i < 0 ? 1 : (int)arg) : i < 0 ? 4 : reps;
            if (i == 0)
                CK(cudaEventRecord(x->e0, x->s));
            if (mode >= PORT_GET)
                k_port<<<1, mode == PORT_PV ? PV_THREADS : 1, 0, x->s>>>(
                    x->pdev, mode, arg, rounds, i < 0 ? NULL : x->d_us, D_RC(x));
            else
                k_mc<<<blocks, THREADS, 0, x->s>>>(x->mdev, mode, md->off,
                                                   i < 0 && mode >= AT_ADD ? 1 : arg, one, D_RC(x));
        }
        CK(cudaEventRecord(x->e1, x->s));
        CK(cudaGetLastError());
        CK(cudaEventSynchronize(x->e1));
        CK(cudaEventElapsedTime(ms_p, x->e0, x->e1));
        CK(cudaMemcpy(&rc, D_RC(x), sizeof(int), cudaMemcpyDeviceToHost));
        CK(cudaMemsetAsync(D_RC(x), 0, sizeof(int), x->s));
        *ms_p = rc ? 0 : *ms_p;
        if (st_p) {
            CK(cudaMemcpy(x->us, x->d_us, reps * sizeof(double), cudaMemcpyDeviceToHost));
            bench_stats_of(x->us, rc ? 0 : (uint64_t)reps, st_p);
        }
    }
    return verify(x, mode, target, n, v, rc, ok_p);
}

/* The raw copy engine, timing rank only: rounds of copies of raw_loc's
 * pattern to the peer's GPU (st[3], gbs[3]), then back into raw_loc,
 * zeroed (st[1], gbs[1]), which must then hold its pattern again. */
static int raw_run(rg_t *x, uint64_t size, int rounds, bench_stats_t *st, double *gbs, int *ok_p)
{
    unsigned long long bad = 0;

    CK(cudaSetDevice(x->peer_gpu));
    CK(cudaMemset(x->raw_far, 0, size));
    CK(cudaDeviceSynchronize());
    CK(cudaSetDevice(x->gpu));
    for (int back = 0; back < 2; back++) {
        uint64_t t0 = 0, t1;
        if (back)
            CK(cudaMemsetAsync(x->raw_loc, 0, size, x->s));
        for (int i = -4; i < rounds; i++) { /* 4 untimed */
            t1 = host_ns();
            t0 = i == 0 ? t1 : t0;
            if (back)
                CK(cudaMemcpyPeerAsync(x->raw_loc, x->gpu, x->raw_far, x->peer_gpu, size, x->s));
            else
                CK(cudaMemcpyPeerAsync(x->raw_far, x->peer_gpu, x->raw_loc, x->gpu, size, x->s));
            CK(cudaStreamSynchronize(x->s));
            if (i >= 0)
                x->us[i] = (host_ns() - t1) / 1e3;
        }
        gbs[back ? 1 : 3] = (double)size * rounds / (host_ns() - t0); /* B/ns: GB/s */
        bench_stats_of(x->us, (uint64_t)rounds, &st[back ? 1 : 3]);
    }
    if (pattern(x, x->raw_loc, P_BPAT, 0, size, 0, &bad))
        return -1;
    if (bad)
        fprintf(stderr, "gpuport_bench: --rma-gpu raw copies of %llu B: %llu bytes wrong\n",
                (unsigned long long)size, bad);
    *ok_p &= !bad;
    return 0;
}

/* One printed line: the label, then for each of cols 'n' the next figure
 * ("-" where not measured), '%' the last two's ratio, '|' a separator; the
 * column names instead where names is given. */
static void line(const char *label, const char *cols, const char *const *names, const double *v,
                 int ok)
{
    int k = 0, j = 0;

    printf("  %-24s", label);
    for (const char *c = cols; *c; c++) {
        if (*c == '|')
            printf(" |");
        else if (names)
            printf(" %9s", names[j++]);
        else if (*c == 'n' && v[k++] > 0)
            printf(v[k - 1] < 1 ? " %9.4f" : " %9.2f", v[k - 1]);
        else if (*c == '%' && v[k - 2] > 0 && v[k - 1] > 0)
            printf(" %8.0f%%", 100 * v[k - 2] / v[k - 1]);
        else
            printf(" %9s", "-");
    }
    printf(" | %s\n", names ? "verified" : ok ? "yes" : "NO");
}

static const char *size_text(char *buf, uint64_t size)
{
    snprintf(buf, 16, size >= MIB ? "%llu MiB" : size >= 1024 ? "%llu KiB" : "%llu B",
             (unsigned long long)(size >= MIB ? size >> 20 : size >= 1024 ? size >> 10 : size));
    return buf;
}

/* GB/s of `size` bytes moved `reps` times in ms */
static double gbs(uint64_t size, int reps, float ms)
{
    return ms > 0 ? (double)size * reps / (ms * 1e6) : 0;
}

static int port_table(rg_t *x)
{
    const bench_gpu_env_t *env = x->env;
    static const uint64_t sizes[] = {8, 64 << 10, MIB, BIG};
    static const int base_rounds[] = {1000, 1000, 200, 30};
    static const char *const names[] = {"get us", "raw", "put us", "raw", "get GB/s", "raw",
                                        "put GB/s", "raw"};
    const char *base = !env->baselines ? NULL : x->gpu == x->peer_gpu
                           ? "cudaMemcpyPeerAsync + sync, within the GPU"
                           : "cudaMemcpyPeerAsync + sync, between the GPUs";
    int fails = 0;

    if (env->report) {
        printf("\nPort channel over %s: one kernel thread's rounds of get + flush and put + "
               "flush beside the raw copy\nengine (%s); median us per round, GB/s over all "
               "timed rounds\n", gpuport_channel_transport(x->pch),
               base ? "cudaMemcpyPeerAsync + cudaStreamSynchronize per round, host clock"
                    : "not measured: --no-mpi");
        line("size, rounds", "nn|nn|nn|nn", names, NULL, 0);
    }
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        uint64_t size = sizes[k];
        int rounds = scaled(env, base_rounds[k]), ok = 1, theirs = 1;
        bench_stats_t st[4]; /* get, raw get, put, raw put */
        double g[4] = {0, 0, 0, 0}, v[8]; /* GB/s of the same; what the line shows */
        float ms = 0;
        char label[40], sz[16];

        memset(st, 0, sizeof(st));
        for (int put = 0; put < 2; put++) {
            if (run(x, put ? PORT_PUT : PORT_GET, 1, size, 0, rounds, &ms, &st[2 * put], &ok))
                return -1;
            g[2 * put] = gbs(size, rounds, ms);
        }
        if (x->timer && base && raw_run(x, size, rounds, st, g, &ok))
            return -1;
        env->exchange(env->ctx, &ok, &theirs, sizeof(ok)); /* the raw copies' check */
        fails += !(ok &= theirs);
        for (int i = 0; i < 4; i++)
            v[i] = st[i].median, v[4 + i] = g[i];
        if (!env->report)
            continue;
        snprintf(label, sizeof(label), "%s, %d", size_text(sz, size), rounds);
        line(label, "nn|nn|nn|nn", NULL, v, ok);
        for (int put = 0; put < 2; put++) {
            bench_out_latency(put ? "rma_gpu_port_put_flush" : "rma_gpu_port_get_flush", size,
                              &st[2 * put], base, &st[2 * put + 1], ok);
            bench_out_value(put ? "rma_gpu_port_put_flush_bw" : "rma_gpu_port_get_flush_bw",
                            size, "bandwidth", "GB/s", "total", g[2 * put], rounds, base,
                            g[2 * put + 1], ok);
        }
    }
    return fails;
}

/* The memory channel's bandwidth tables: for sizes lo .. 16 MiB (x 16) and
 * one block, then every SM (all: every SM only), the modes in order, GB/s;
 * each mode beside the next (its floor) in the records. */
static int bw_table(rg_t *x, const int *ms_modes, int nmodes, const char *cols,
                    const char *const *names, uint64_t lo, int all)
{
    const bench_gpu_env_t *env = x->env;
    static const char *const rec[] = {
        "get", "raw 16-byte loads of the same grid, same mapping", "put",
        "raw 16-byte stores of the same grid, same mapping", "accumulate_float32",
        "atomicAdd_system per element through the same mapping, same grid",
        "accumulate_bfloat16", "red.add.noftz.bf16 per element through the same mapping"};
    int fails = 0;

    if (env->report)
        line("size x launches, blocks", cols, names, NULL, 0);
    for (uint64_t size = lo; size <= BIG; size *= 16) {
        for (int grid = all; grid < 2; grid++) {
            int blocks = grid ? x->sms : 1, ok = 1;
            int reps = scaled(env, size < MIB ? 200 : size == MIB ? 50 : 10);
            double g[8];
            float ms = 0;
            char sz[16], label[40], name[64];
            reps = reps > 200 ? 200 : reps; /* bfloat16 counts launches exactly to 256 */
            for (int m = 0; m < nmodes; m++) {
                if (run(x, ms_modes[m], blocks, size, 0, reps, &ms, NULL, &ok))
                    return -1;
                g[m] = gbs(size, reps, ms);
            }
            fails += !ok;
            if (!env->report)
                continue;
            snprintf(label, sizeof(label), "%s x %d, %d", size_text(sz, size), reps + 1, blocks);
            line(label, cols, NULL, g, ok);
            for (int m = 0; m < nmodes; m++) {
                int paired = m + 1 < nmodes && ms_modes[m + 1] == ms_modes[m] + 1;
                snprintf(name, sizeof(name), "memchan_%s_bw_%s%s", rec[ms_modes[m]],
                         grid ? "all_sms" : "1block", paired ? "" : "_beside_acc");
                bench_out_value(name, size, "bandwidth", "GB/s", "total", g[m], reps,
                                paired ? rec[ms_modes[m] + 1] : NULL, paired ? g[m + 1] : 0, ok);
                m += paired;
            }
        }
    }
    return fails;
}

static int atomic_table(rg_t *x)
{
    const bench_gpu_env_t *env = x->env;
    static const char *const names[] = {"atomic_add", "floor", "of floor", "put_value"};
    int blocks = x->sms, per = scaled(env, 32), pv_per = scaled(env, 512), fails = 0, ok = 1;
    uint64_t ops;
    float ms = 0;
    double r[3];
    char name[48];

    blocks = blocks * THREADS * 8 > (int)MIB ? (int)(MIB / 8 / THREADS) : blocks; /* room */
    pv_per = pv_per > (int)(BIG / 8 / PV_THREADS) ? (int)(BIG / 8 / PV_THREADS) : pv_per;
    ops = (uint64_t)blocks * THREADS * per;
    if (env->report) {
        printf("\nMemory channel atomic_add, M/s: %d blocks x %d threads x %d adds of 1 (floor: "
               "atomicAdd_system through\nthe mapping; put_value: the same threads' stores); "
               "every total checked exactly\n", blocks, THREADS, per);
        line("target", "nn%|n", names, NULL, 0);
    }
    for (int one = 1; one >= 0; one--, ok = 1) {
        for (int m = AT_ADD; m <= AT_PUT_VALUE; m++) {
            if (run(x, m, blocks, per, one, 1, &ms, NULL, &ok))
                return -1;
            r[m - AT_ADD] = ms > 0 ? ops / (ms * 1e3) : 0;
        }
        fails += !ok;
        if (!env->report)
            continue;
        line(one ? "one word (every thread)" : "a word per thread", "nn%|n", NULL, r, ok);
        snprintf(name, sizeof(name), "memchan_atomic_add_rate_%s", one ? "one_word" : "distinct");
        bench_out_value(name, 8, "rate", "M/s", "total", r[0], ops,
                        "atomicAdd_system through the same mapping, same grid", r[1], ok);
        snprintf(name, sizeof(name), "memchan_put_value_rate_%s", one ? "one_word" : "distinct");
        bench_out_value(name, 8, "rate", "M/s", "total", r[2], ops, NULL, 0, ok);
    }
    if (run(x, PORT_PV, 1, pv_per, 0, 1, &ms, NULL, &ok))
        return -1;
    fails += !ok;
    ops = (uint64_t)PV_THREADS * pv_per;
    r[0] = ms > 0 ? ops / (ms * 1e3) : 0;
    if (env->report) {
        printf("  port channel put_value over %s, %d threads x %d into distinct words, then a "
               "flush: %.2f M/s | %s\n", gpuport_channel_transport(x->pch), PV_THREADS, pv_per,
               r[0], ok ? "yes" : "NO");
        bench_out_channel(gpuport_channel_transport(x->pch), "VMM");
        bench_out_value("rma_gpu_port_put_value_rate", 8, "rate", "M/s", "total", r[0], ops,
                        NULL, 0, ok);
        bench_out_channel("memory channel", "VMM");
    }
    return fails;
}

static int memory_tables(rg_t *x)
{
    static const int get_modes[] = {MV_GET, MV_GET_RAW, MV_PUT, MV_PUT_RAW};
    static const char *const get_names[] = {"get", "floor", "of floor", "put", "floor"};
    static const int acc_modes[] = {MV_F32, MV_F32_RAW, MV_BF16, MV_BF16_RAW, MV_PUT};
    static const char *const acc_names[] = {"float32", "floor", "of floor", "bfloat16",
                                            "floor", "of floor", "put"};
    int f1, f2, f3;

    if (x->env->report)
        printf("\nMemory channel get beside put, GB/s over all timed launches (blocks of %d "
               "threads; floor: the same\n16-byte loads or stores through the mapping; "
               "launches: one untimed, then the timed)\n", THREADS);
    if ((f1 = bw_table(x, get_modes, 4, "nn%|nn", get_names, MIB, 0)) < 0 ||
        (f2 = atomic_table(x)) < 0)
        return -1;
    if (x->env->report)
        printf("\nMemory channel accumulate by every SM, GB/s of source; floor: the same "
               "element adds through the\nmapping (atomicAdd_system, red.add.noftz.bf16); a "
               "source of 1.0, every element checked equal to\nthe launches\n");
    f3 = bw_table(x, acc_modes, 5, "nn%|nn%|n", acc_names, 64 << 10, 1);
    return f3 < 0 ? -1 : f1 + f2 + f3;
}

/* The regions, both channels, the raw copies' buffers. *skip_p: the pair is
 * not reached over cuda_ipc (no memory channel then). */
static int open_all(rg_t *x, int *skip_p)
{
    const bench_gpu_env_t *env = x->env;
    int rounds_max = scaled(env, 1000);
    cudaDeviceProp prop;
    char gpu[320];

    CK(cudaGetDevice(&x->gpu));
    env->exchange(env->ctx, &x->gpu, &x->peer_gpu, sizeof(int));
    CK(cudaGetDeviceProperties(&prop, x->gpu));
    x->sms = prop.multiProcessorCount;
    CK(cudaStreamCreateWithFlags(&x->s, cudaStreamNonBlocking));
    CK(cudaEventCreate(&x->e0));
    CK(cudaEventCreate(&x->e1));
    CK(cudaMalloc(&x->d_w, 2 * sizeof(uint64_t)));
    CK(cudaMemsetAsync(x->d_w, 0, 2 * sizeof(uint64_t), x->s));
    CK(cudaMalloc(&x->d_us, rounds_max * sizeof(double)));
    if (!(x->us = (double *)malloc(rounds_max * sizeof(double))))
        return -1;
    GK(gpuport_mem_alloc_device(env->comm, REGION, (void **)&x->src));
    GK(gpuport_mem_alloc_device(env->comm, REGION, (void **)&x->dst));
    if (pattern(x, x->src, P_BPAT, 0, REGION, 0, NULL) ||
        pattern(x, x->dst, P_GPAT, 0, REGION, 0, NULL))
        return -1;
    GK(gpuport_mem_register(env->comm, x->src, REGION, &x->msrc));
    GK(gpuport_mem_register(env->comm, x->dst, REGION, &x->mdst));
    GK(gpuport_channel_create(env->comm, env->peer, x->msrc, x->mdst, &x->pch));
    GK(gpuport_channel_device(x->pch, &x->pdev));
    if ((*skip_p = strcmp(gpuport_channel_transport(x->pch), "cuda_ipc") != 0))
        return 0;
    GK(gpuport_memory_channel_create(env->comm, env->peer, x->msrc, x->mdst, &x->mch));
    GK(gpuport_memory_channel_device(x->mch, &x->mdev));
    if (x->timer && env->baselines) {
        CK(cudaMalloc(&x->raw_loc, BIG));
        if (pattern(x, x->raw_loc, P_BPAT, 0, BIG, 0, NULL))
            return -1;
        CK(cudaSetDevice(x->peer_gpu));
        CK(cudaMalloc(&x->raw_far, BIG));
        CK(cudaSetDevice(x->gpu));
        if (x->gpu != x->peer_gpu && cudaDeviceEnablePeerAccess(x->peer_gpu, 0) != cudaSuccess)
            cudaGetLastError(); /* already enabled, or copies go through the host */
    }
    snprintf(gpu, sizeof(gpu), "%s (GPU %d; %s)", prop.name, x->gpu,
             x->gpu == x->peer_gpu ? "the pair shares it" : "peer on another GPU");
    if (env->report)
        bench_out_context("gpu", gpu, env->nranks);
    return 0;
}

static void close_all(rg_t *x)
{
    const bench_gpu_env_t *env = x->env;

    env->barrier(env->ctx);
    if (x->mch)
        gpuport_memory_channel_destroy(x->mch);
    gpuport_channel_destroy(x->pch);
    gpuport_mem_deregister(x->msrc);
    gpuport_mem_deregister(x->mdst);
    env->barrier(env->ctx); /* the peer's imports go with its channels */
    gpuport_mem_free(env->comm, x->src);
    gpuport_mem_free(env->comm, x->dst);
    if (x->raw_far) {
        cudaSetDevice(x->peer_gpu);
        cudaFree(x->raw_far);
        cudaSetDevice(x->gpu);
    }
    cudaFree(x->raw_loc);
    cudaFree(x->d_w);
    cudaFree(x->d_us);
    free(x->us);
    cudaEventDestroy(x->e0);
    cudaEventDestroy(x->e1);
    cudaStreamDestroy(x->s);
}

extern "C" int bench_rma_gpu_run(const bench_gpu_env_t *env)
{
    rg_t x;
    int skip = 0, fails = 0, r;

    memset(&x, 0, sizeof(x));
    x.env = env;
    x.timer = env->rank < env->peer;
    if (open_all(&x, &skip))
        return 1;
    if (env->report && skip)
        printf("\n--rma-gpu: skipped (the pair is reached over %s, which refuses gets into GPU "
               "memory; memory channels\nneed GPUs of one host that map each other's memory)\n",
               gpuport_channel_transport(x.pch));
    if (env->report && !skip) {
        printf("\nget, atomic_add and accumulate from kernels, VMM memory (gpuport_mem_alloc_"
               "device) under both channels:\nrank %d times, rank %d runs no kernel meanwhile and "
               "checks what landed in its memory; %s;\nCUDA_MPS_PIPE_DIRECTORY %s\n", env->rank,
               env->peer, x.gpu == x.peer_gpu ? "the pair shares one GPU" : "the pair on two GPUs",
               getenv("CUDA_MPS_PIPE_DIRECTORY") ? "set (MPS)" : "unset");
        bench_out_channel(gpuport_channel_transport(x.pch), "VMM");
    }
    if (!skip) {
        r = port_table(&x);
        fails += r < 0 ? 1 : r; /* a CUDA error counts as one */
        if (env->report)
            bench_out_channel("memory channel", "VMM");
        r = memory_tables(&x);
        fails += r < 0 ? 1 : r;
    }
    close_all(&x);
    return fails;
}
