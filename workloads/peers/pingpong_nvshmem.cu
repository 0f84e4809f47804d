/*
 * pingpong_nvshmem: NVSHMEM's small operations between two PEs, each beside
 * its floor measured in the same run through the same mapping, as the peer
 * baseline of gpuport_bench's memory-channel rows (tools/bench_memchan.cu:
 * its 8 B ping-pong and 64 B put + signal rate, same shapes and counts).
 * Rows:
 *  - 8 B ping-pong round trip, one thread a side, the mean over N rounds:
 *    put+sig: nvshmem_putmem_signal_nbi of 8 B with NVSHMEM_SIGNAL_SET of
 *    the round, nvshmem_signal_wait_until(GE round) on the other side;
 *    p+fence+sig: nvshmem_uint64_p, nvshmem_fence, nvshmemx_signal_op
 *    (SET); the floor: a release store of the round into the peer's flag
 *    through nvshmem_ptr, an acquire poll of its own. The three run in
 *    turn, R times, every repeat printed, so that drift shows. Each run
 *    starts with one untimed round (the two kernels start apart). Every
 *    8 B received is compared with what the peer sent that round, and
 *    every floor flag with the round.
 *  - 64 B put + signal rate at 1, 8 and 64 warps of PE 0: each warp puts
 *    64 B at its own place PER times with nvshmemx_putmem_signal_nbi_warp
 *    (NVSHMEM_SIGNAL_ADD of 1 a put), then nvshmem_quiet; the floor: the
 *    same stores through nvshmem_ptr, __threadfence_system and
 *    atomicAdd_system on a counter of PE 1. PE 1 waits meanwhile
 *    (nvshmem_signal_wait_until GE warps * PER; the floor: an acquire poll
 *    of the counter), then finds exactly that count and checks every
 *    byte. M/s from PE 0's kernel time (its slowest block). gpuport's floor
 *    row has no waiting kernel on the receiver; this one has, on both
 *    columns, so that the pair's load is the same.
 * The signal words, messages, flags and the counter share one symmetric
 * block, 128 B apart. Ping-pong signals and flags carry rounds counted
 * across the whole run, so none is reset between runs (a wait for round r
 * cannot be met by an older one); the rate rows' count and bytes are
 * zeroed by PE 1 before each run. Only under MPS do two PEs sharing a GPU run their kernels at once
 * (the header says whether CUDA_MPS_PIPE_DIRECTORY is set); without it a
 * round trip takes a time slice, and the default rounds drop to 50.
 *
 *   mpirun -np 2 pingpong_nvshmem [-n ROUNDS] [-r REPEATS] [--per N] [--bootstrap mpi|uid]
 */
#include "peer_nvshmem.h"

#include <stdint.h>
#include <stdlib.h>

#define PP_ROUNDS 2000
#define PP_ROUNDS_TURNS 50 /* a shared GPU without MPS: each round trip takes turns */
#define PP_REPEATS 5
#define PP_PER 200 /* gpuport_bench's per-warp count */

static const int pp_warps[] = {1, 8, 64};
#define PP_MAX_WARPS 64

#define PP_USAGE                                                                                   \
    "  -n ROUNDS     ping-pong rounds a run (default 2000; 50 on a GPU shared without MPS)\n"     \
    "  -r REPEATS    runs of each row, alternating (default 5)\n"                                 \
    "  --per N       64 B puts of each warp in a rate run (default 200)\n"

enum { PP_PUTSIG, PP_PFENCE, PP_FLOOR, PP_MODES };
static const char *const pp_names[PP_MODES] = {"put+sig", "p+fence+sig", "floor"};

/* The symmetric block: each word on a 128-byte line of its own. */
typedef struct pp_word {
    uint64_t v;
    uint64_t pad[15];
} pp_word_t;

typedef struct pp_sym {
    pp_word_t sig;      /* put+sig, p+fence+sig: the peer's round */
    pp_word_t msg;      /* their 8 B, from the peer */
    pp_word_t src;      /* put+sig: this PE's 8 B, the put's source */
    pp_word_t flag;     /* floor: the peer's round, by its release store */
    pp_word_t rate_sig; /* rate: NVSHMEM_SIGNAL_ADD of 1 a put */
    pp_word_t counter;  /* rate floor: atomicAdd_system of 1 a put */
} pp_sym_t;

/* What the kernels get, by value. */
typedef struct pp_dev {
    pp_sym_t *sym;             /* symmetric: this PE's (NVSHMEM calls name the peer's by it) */
    pp_sym_t *peer_sym;        /* nvshmem_ptr(sym, peer): the floors' stores */
    unsigned char *rdst;       /* symmetric: the rate rows' 64 B pieces arrive here */
    unsigned char *rsrc;       /* symmetric: and leave from here (rate_pat) */
    unsigned char *peer_rdst;  /* nvshmem_ptr(rdst, peer) */
    int peer;
} pp_dev_t;

typedef struct pp {
    pp_dev_t dev;
    cudaStream_t s;
    unsigned long long *d_ns, *d_bad; /* device: kernel time, wrong words or bytes */
    uint64_t seq;                     /* the last round used, the same on both PEs */
    size_t rate_bytes;                /* rdst and rsrc, each */
} pp_t;

/* The 8 B that PE pe sends in round r: every byte changes with r. */
__device__ static uint64_t pp_payload(uint64_t r, int pe)
{
    return (r * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)(pe + 1) << 56);
}

/* Byte i of the rate rows' source; never 0, so an unwritten byte shows. */
__device__ static unsigned char rate_pat(uint64_t i)
{
    return (unsigned char)(1 + (i * 131 + (i >> 8)) % 255);
}

__device__ static uint64_t pp_now(void)
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ static uint64_t pp_acquire(const uint64_t *p)
{
    uint64_t v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

/* Rounds base + 1 .. base + n + 1 of one mode, the first untimed; first:
 * this side sends first. Adds the wrong messages (or flags) to *bad. */
__global__ void k_pingpong(pp_dev_t d, int mode, int first, uint64_t base, int n,
                           unsigned long long *ns, unsigned long long *bad)
{
    pp_sym_t *me = d.sym;
    unsigned long long wrong = 0;
    uint64_t t0 = 0;
    int self = nvshmem_my_pe();

    for (int k = 0; k <= n; k++) {
        uint64_t r = base + 1 + (uint64_t)k;
        if (k == 1)
            t0 = pp_now();
        for (int turn = 0; turn < 2; turn++) {
            if ((turn == 0) == (first != 0)) {
                if (mode == PP_PUTSIG) {
                    /* the peer's reply to round r - 1 means that round's put
                     * was delivered, so its source has been read */
                    me->src.v = pp_payload(r, self);
                    nvshmem_putmem_signal_nbi(&me->msg.v, &me->src.v, 8, &me->sig.v, r,
                                              NVSHMEM_SIGNAL_SET, d.peer);
                } else if (mode == PP_PFENCE) {
                    nvshmem_uint64_p(&me->msg.v, pp_payload(r, self), d.peer);
                    nvshmem_fence();
                    nvshmemx_signal_op(&me->sig.v, r, NVSHMEM_SIGNAL_SET, d.peer);
                } else {
                    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(&d.peer_sym->flag.v),
                                 "l"(r)
                                 : "memory");
                }
            } else if (mode == PP_FLOOR) {
                uint64_t v;
                while ((v = pp_acquire(&me->flag.v)) < r)
                    ;
                wrong += v != r;
            } else {
                nvshmem_signal_wait_until(&me->sig.v, NVSHMEM_CMP_GE, r);
                wrong += *(volatile uint64_t *)&me->msg.v != pp_payload(r, d.peer);
            }
        }
    }
    *ns = pp_now() - t0;
    *bad += wrong;
}

/* PE 0's side of a rate run: each warp `per` 64 B pieces at its own places
 * (piece i of warp w at (i * warps + w) * 64), by NVSHMEM or the floor. */
__global__ void k_rate(pp_dev_t d, int floor, int per, unsigned long long *ns)
{
    unsigned lane = threadIdx.x & 31, warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    unsigned warps = gridDim.x * blockDim.x / 32;
    unsigned long long *counter = (unsigned long long *)&d.peer_sym->counter.v;
    uint64_t t0 = pp_now();

    for (int i = 0; i < per; i++) {
        size_t off = ((size_t)i * warps + warp) * 64;
        if (!floor) {
            nvshmemx_putmem_signal_nbi_warp(d.rdst + off, d.rsrc + off, 64, &d.sym->rate_sig.v, 1,
                                            NVSHMEM_SIGNAL_ADD, d.peer);
        } else {
            if (lane < 4)
                ((uint4 *)(d.peer_rdst + off))[lane] = ((const uint4 *)(d.rsrc + off))[lane];
            __syncwarp();
            if (lane == 0) {
                __threadfence_system();
                atomicAdd_system(counter, 1ull);
            }
        }
    }
    if (!floor && lane == 0)
        nvshmem_quiet();
    __syncthreads();
    if (threadIdx.x == 0)
        atomicMax(ns, (unsigned long long)(pp_now() - t0));
}

/* PE 1's side: waits for n puts' signals (or n adds to the counter). */
__global__ void k_rate_wait(pp_dev_t d, int floor, unsigned long long n)
{
    if (!floor)
        nvshmem_signal_wait_until(&d.sym->rate_sig.v, NVSHMEM_CMP_GE, n);
    else
        while (pp_acquire(&d.sym->counter.v) < n)
            ;
}

__global__ void k_rate_fill(unsigned char *p, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = rate_pat(i);
}

/* Adds to *bad the bytes of p[0, n) that are not rate_pat. */
__global__ void k_rate_check(const unsigned char *p, size_t n, unsigned long long *bad)
{
    unsigned long long b = 0;

    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        b += p[i] != rate_pat(i);
    if (b)
        atomicAdd(bad, b);
}

/* The device counters read back and cleared; 0 after a message on a CUDA error. */
static int pp_collect(pp_t *p, unsigned long long *ns, unsigned long long *bad)
{
    return cuda_ok(cudaStreamSynchronize(p->s), "cudaStreamSynchronize") &&
           cuda_ok(cudaMemcpy(ns, p->d_ns, sizeof(*ns), cudaMemcpyDeviceToHost), "cudaMemcpy") &&
           cuda_ok(cudaMemcpy(bad, p->d_bad, sizeof(*bad), cudaMemcpyDeviceToHost),
                   "cudaMemcpy") &&
           cuda_ok(cudaMemset(p->d_ns, 0, sizeof(*p->d_ns)), "cudaMemset") &&
           cuda_ok(cudaMemset(p->d_bad, 0, sizeof(*p->d_bad)), "cudaMemset");
}

/* One run of a ping-pong mode: this rank's mean round trip in us, or -1
 * after a message; *bad gets the wrong messages this rank received. */
static double pingpong(pp_t *p, int mode, int n, unsigned long long *bad)
{
    unsigned long long ns = 0;

    MPI_Barrier(MPI_COMM_WORLD);
    k_pingpong<<<1, 1, 0, p->s>>>(p->dev, mode, wl_rank == 0, p->seq, n, p->d_ns, p->d_bad);
    p->seq += (uint64_t)n + 1;
    if (!cuda_ok(cudaGetLastError(), "k_pingpong<<<>>>") || !pp_collect(p, &ns, bad))
        return -1;
    if (*bad)
        fprintf(stderr, "rank %d: %s ping-pong: %llu of %d rounds brought the wrong 8 B\n",
                wl_rank, pp_names[mode], *bad, n + 1);
    return ns / 1e3 / n;
}

/* One rate run at `warps` warps: PE 0's M puts/s (0 on PE 1), or -1 after
 * a message; *bad (PE 1): wrong bytes, plus 1 for a wrong count. */
static double rate(pp_t *p, int floor, int warps, int per, unsigned long long *bad)
{
    unsigned long long n = (unsigned long long)warps * per, ns = 0, got = 0;
    size_t bytes = n * 64;
    uint64_t *count = floor ? &p->dev.sym->counter.v : &p->dev.sym->rate_sig.v;
    int ok = 1;

    if (wl_rank == 1)
        ok = cuda_ok(cudaMemset(p->dev.rdst, 0, bytes), "cudaMemset") &&
             cuda_ok(cudaMemset(count, 0, sizeof(*count)), "cudaMemset") &&
             cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    if (!wl_agree(ok))
        return -1;
    if (wl_rank == 0)
        k_rate<<<warps, 32, 0, p->s>>>(p->dev, floor, per, p->d_ns);
    else
        k_rate_wait<<<1, 1, 0, p->s>>>(p->dev, floor, n);
    ok = cuda_ok(cudaGetLastError(), "rate kernel") && pp_collect(p, &ns, bad);
    MPI_Barrier(MPI_COMM_WORLD); /* PE 0's puts all delivered (quiet, fence) */
    if (ok && wl_rank == 1) {
        k_rate_check<<<256, 256, 0, p->s>>>(p->dev.rdst, bytes, p->d_bad);
        ok = cuda_ok(cudaMemcpy(&got, count, sizeof(got), cudaMemcpyDeviceToHost), "cudaMemcpy") &&
             pp_collect(p, &ns, bad);
        if (ok && *bad)
            fprintf(stderr, "rank 1: 64 B puts (%s, %d warps): %llu bytes wrong\n",
                    floor ? "floor" : "NVSHMEM", warps, *bad);
        if (ok && got != n) {
            fprintf(stderr, "rank 1: 64 B puts (%s, %d warps): count %llu, %llu puts sent\n",
                    floor ? "floor" : "NVSHMEM", warps, got, n);
            *bad += 1;
        }
    }
    if (!wl_agree(ok))
        return -1;
    return wl_rank == 0 ? n / (ns / 1e3) : 0;
}

/* 1: both ranks run on one GPU (by UUID). Collective. */
static int pair_shares_gpu(int dev)
{
    cudaDeviceProp prop;
    char all[2][sizeof(prop.uuid)];

    memset(&prop, 0, sizeof(prop));
    cudaGetDeviceProperties(&prop, dev);
    MPI_Allgather(&prop.uuid, (int)sizeof(prop.uuid), MPI_BYTE, all, (int)sizeof(prop.uuid),
                  MPI_BYTE, MPI_COMM_WORLD);
    return !memcmp(all[0], all[1], sizeof(prop.uuid));
}

/* -n, -r and --per taken out of argv; 0 after a message on a bad one. */
static int pp_options(int argc, char **argv, int *rounds, int *repeats, int *per)
{
    for (int i = 1; i < argc; i++) {
        int *v = !strcmp(argv[i], "-n") ? rounds
                 : !strcmp(argv[i], "-r") ? repeats
                 : !strcmp(argv[i], "--per") ? per
                                             : NULL;
        char *end = NULL;
        long x = 0;
        if (v && i + 1 < argc)
            x = strtol(argv[i + 1], &end, 10);
        if (!v || !end || *end || x < 1 || x > 100000000) {
            if (wl_rank == 0)
                fprintf(stderr, "%s: %s '%s' (--help)\n", argv[0],
                        v ? "needs a count from 1 to 1e8, not" : "unknown argument",
                        v ? (i + 1 < argc ? argv[i + 1] : "") : argv[i]);
            return 0;
        }
        *v = (int)x;
        i++;
    }
    return 1;
}

/* The ping-pong rows: every repeat, then the medians. 1 when all verified. */
static int pingpong_rows(pp_t *p, int n, int repeats)
{
    double *us = (double *)calloc((size_t)PP_MODES * repeats, sizeof(double));
    int good = us != NULL;

    char label[64];

    snprintf(label, sizeof(label), "8 B ping-pong round trip (%d, mean)", n);
    if (wl_rank == 0)
        printf("  %-41s %12s %12s %12s\n", label, pp_names[PP_PUTSIG], pp_names[PP_PFENCE],
               pp_names[PP_FLOOR]);
    for (int k = 0; k < repeats && good; k++) {
        unsigned long long bad = 0, mode_bad;
        for (int m = 0; m < PP_MODES && good; m++) {
            mode_bad = 0;
            us[m * repeats + k] = pingpong(p, m, n, &mode_bad);
            good = wl_agree(us[m * repeats + k] >= 0);
            bad += mode_bad;
        }
        if (!good)
            break;
        MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
        good = bad == 0;
        snprintf(label, sizeof(label), "repeat %d", k + 1);
        if (wl_rank == 0)
            printf("  %-41s %9.2f us %9.2f us %9.2f us%s\n", label, us[k], us[repeats + k],
                   us[2 * repeats + k], bad ? "  ERROR" : "");
    }
    if (good && wl_rank == 0) {
        double med[PP_MODES];
        for (int m = 0; m < PP_MODES; m++)
            med[m] = wl_median(us + m * repeats, repeats);
        snprintf(label, sizeof(label), "median of %d", repeats);
        printf("  %-41s %9.2f us %9.2f us %9.2f us   put+sig %.2fx the floor\n", label, med[0],
               med[1], med[2], med[2] > 0 ? med[0] / med[2] : 0.0);
    }
    free(us);
    return good;
}

/* The rate rows at 1, 8 and 64 warps: every repeat, then the medians. */
static int rate_rows(pp_t *p, int per, int repeats)
{
    double *r = (double *)calloc(2 * (size_t)repeats, sizeof(double));
    int good = r != NULL;

    char label[64];

    snprintf(label, sizeof(label), "64 B put + signal, M/s (%d per warp)", per);
    if (wl_rank == 0)
        printf("  %-41s %12s %12s\n", label, "NVSHMEM", "floor");
    for (size_t w = 0; w < sizeof(pp_warps) / sizeof(pp_warps[0]) && good; w++) {
        for (int k = 0; k < repeats && good; k++) {
            unsigned long long bad = 0, floor_bad = 0;
            r[k] = rate(p, 0, pp_warps[w], per, &bad);
            r[repeats + k] = r[k] < 0 ? -1 : rate(p, 1, pp_warps[w], per, &floor_bad);
            if (r[k] < 0 || r[repeats + k] < 0) {
                good = 0;
                break;
            }
            bad += floor_bad;
            MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
            good = bad == 0;
            snprintf(label, sizeof(label), "%3d warp(s), repeat %d", pp_warps[w], k + 1);
            if (wl_rank == 0)
                printf("  %-41s %12.2f %12.2f%s\n", label, r[k], r[repeats + k],
                       bad ? "  ERROR" : "");
        }
        if (good && wl_rank == 0) {
            double nv = wl_median(r, repeats), fl = wl_median(r + repeats, repeats);
            snprintf(label, sizeof(label), "%3d warp(s), median of %d", pp_warps[w], repeats);
            printf("  %-41s %12.2f %12.2f   %.0f%% of the floor\n", label, nv, fl,
                   fl > 0 ? 100 * nv / fl : 0.0);
        }
    }
    free(r);
    return good;
}

int main(int argc, char **argv)
{
    wl_opts_t o;
    pp_t p = {};
    char gpu[256] = "", lib[96];
    const char *boot, *mps = getenv("CUDA_MPS_PIPE_DIRECTORY");
    int rc = wl_init(&argc, &argv, PP_USAGE PEER_NVSHMEM_USAGE, &o), dev, good, shared;
    int rounds = 0, repeats = PP_REPEATS, per = PP_PER;

    if (rc >= 0)
        return rc;
    boot = peer_nvshmem_option(&argc, argv);
    if (!boot || !pp_options(argc, argv, &rounds, &repeats, &per)) {
        MPI_Finalize();
        return 2;
    }
    if (wl_size != 2) {
        if (wl_rank == 0)
            fprintf(stderr, "%s: runs on exactly 2 ranks, not %d\n", argv[0], wl_size);
        MPI_Finalize();
        return 2;
    }
    rc = peer_gpu(0, &dev, gpu, sizeof(gpu));
    if (rc >= 0)
        return rc;
    shared = pair_shares_gpu(dev);
    if (!rounds)
        rounds = o.small ? 100 : shared && !mps ? PP_ROUNDS_TURNS : PP_ROUNDS;
    if (o.small) {
        per = per < 20 ? per : 20;
        repeats = repeats < 2 ? repeats : 2;
    }
    rounds = wl_rounds(&o, rounds);
    per = wl_rounds(&o, per);
    if (!peer_nvshmem_init(boot)) {
        nvshmem_finalize();
        return wl_finish(0);
    }
    p.rate_bytes = (size_t)PP_MAX_WARPS * per * 64;
    p.dev.peer = 1 - wl_rank;
    p.dev.sym = (pp_sym_t *)nvshmem_calloc(1, sizeof(pp_sym_t));
    p.dev.rdst = (unsigned char *)nvshmem_malloc(p.rate_bytes);
    p.dev.rsrc = (unsigned char *)nvshmem_malloc(p.rate_bytes);
    good = p.dev.sym && p.dev.rdst && p.dev.rsrc;
    if (!good)
        fprintf(stderr,
                "rank %d: nvshmem_malloc of 2 x %zu bytes failed (NVSHMEM_SYMMETRIC_SIZE?)\n",
                wl_rank, p.rate_bytes);
    if (good) {
        /* the floors store through the mapping NVSHMEM's own P2P path uses */
        p.dev.peer_sym = (pp_sym_t *)nvshmem_ptr(p.dev.sym, p.dev.peer);
        p.dev.peer_rdst = (unsigned char *)nvshmem_ptr(p.dev.rdst, p.dev.peer);
        good = p.dev.peer_sym && p.dev.peer_rdst;
        if (!good)
            fprintf(stderr, "rank %d: nvshmem_ptr gives no mapping of PE %d's memory: the "
                            "floors need one (PEs of one host whose GPUs map each other)\n",
                    wl_rank, p.dev.peer);
    }
    good = good && cuda_ok(cudaMalloc((void **)&p.d_ns, sizeof(*p.d_ns)), "cudaMalloc") &&
           cuda_ok(cudaMalloc((void **)&p.d_bad, sizeof(*p.d_bad)), "cudaMalloc") &&
           cuda_ok(cudaMemset(p.d_ns, 0, sizeof(*p.d_ns)), "cudaMemset") &&
           cuda_ok(cudaMemset(p.d_bad, 0, sizeof(*p.d_bad)), "cudaMemset") &&
           cuda_ok(cudaStreamCreateWithFlags(&p.s, cudaStreamNonBlocking), "cudaStreamCreate");
    if (good) {
        k_rate_fill<<<256, 256>>>(p.dev.rsrc, p.rate_bytes);
        good = cuda_ok(cudaDeviceSynchronize(), "k_rate_fill");
    }
    if (wl_agree(good)) {
        peer_nvshmem_name(boot, lib, sizeof(lib));
        peer_header("pingpong_nvshmem",
                    "8 B ping-pong and 64 B put + signal rate from kernels with NVSHMEM, each "
                    "beside raw stores through nvshmem_ptr (the floor), same run",
                    lib, gpu);
        if (wl_rank == 0)
            printf("# %s; CUDA_MPS_PIPE_DIRECTORY %s\n",
                   shared ? "the pair shares one GPU" : "the pair on two GPUs",
                   mps ? "set (MPS)" : "unset (no MPS: a shared GPU's kernels take turns)");
        good = pingpong_rows(&p, rounds, repeats) && rate_rows(&p, per, repeats);
    }
    nvshmem_barrier_all(); /* no kernel of either PE still touches the other's memory */
    if (p.s)
        cudaStreamDestroy(p.s);
    cudaFree(p.d_bad);
    cudaFree(p.d_ns);
    nvshmem_free(p.dev.rsrc);
    nvshmem_free(p.dev.rdst);
    nvshmem_free(p.dev.sym);
    nvshmem_finalize();
    return wl_finish(good);
}
