/*
 * gpuport_bench: a port-channel demo and benchmark between pairs of MPI ranks.
 *
 * Ranks pair up (0-1, 2-3, ...; an odd last rank only joins the collectives)
 * and every pair runs the same sweep of message sizes at the same time; rank 0
 * prints its own pair's figures. Each pair holds one gpuport channel over
 * whole buffers of the largest size. In each pair, A is the even rank and B
 * the odd one. For each size:
 *
 *   gpuport lat  A put_with_signal(size) -> B wait -> B put_with_signal(size)
 *                back -> A wait. A times every round; the column is half the
 *                median round trip, and a second table gives half the
 *                minimum, median, mean and 99th percentile.
 *   MPI lat      the same ping-pong with MPI_Send/MPI_Recv, same statistics.
 *   gpuport bw   A puts a window of W messages of `size` to the same place in
 *                B's buffer, the last one as put_with_signal; B waits and
 *                answers with a signal; A waits. W*size*rounds bytes over the
 *                time of all timed rounds (1 GB = 1e9 bytes).
 *   MPI bw       the same with MPI one-sided: W MPI_Put into a window held
 *                under MPI_Win_lock_all, MPI_Win_flush, then a zero-byte
 *                MPI_Send/MPI_Recv acknowledgement each way. The window comes
 *                from MPI_Win_allocate_shared when the pair shares a node (MPI's
 *                fastest path there: Open MPI 4.1 would otherwise pick osc/rdma,
 *                several times slower on one host), else MPI_Win_allocate.
 *                Beside tcp, two-sided instead (W MPI_Isend/MPI_Irecv, then
 *                the acknowledgements), so that MPI's figure is its
 *                point-to-point path, which --mca btl tcp,self makes TCP: a
 *                shared window is shared memory whatever the BTL.
 *
 * Every measurement runs warm-up rounds, then timed rounds, then one
 * verification round. Messages carry a pattern made from the size, the test,
 * the sending rank and the round: word 0 changes every round and the receiver
 * checks it after every round it receives; after the timed rounds the
 * receiver checks every byte of the region, then the sender refills the whole
 * source with a new pattern, the receiver overwrites its region with garbage,
 * one more round runs and every byte is checked again. A mismatch is printed
 * (byte, expected, actual) and makes the exit status 1 after the table.
 *
 * --csv FILE and --json FILE record every figure (tools/bench_out.h), rank 0
 * writing; -v / --version prints the version without starting MPI.
 *
 * --idle (tools/bench_idle.c) and --rma (tools/bench_rma.c: get, atomic_add
 * and accumulate beside put, MPI_Get / MPI_Accumulate and the host's own
 * atomics, on host memory) run their own tables instead, on exactly 2 ranks;
 * so does --rma-gpu in GPU mode (tools/bench_rma_gpu.cu: the same operations
 * from kernels, on a port channel and a memory channel, beside the raw copy
 * engine and the same loads, stores and atomics through the mapping).
 *
 * Host mode's buffers live behind a mem_kind_t table (allocate, release,
 * write pattern, check pattern). GPU mode, chosen where every rank sees a
 * GPU, is tools/bench_gpu.cu's with its own buffers; this file pairs the
 * ranks and gives it a bootstrap-like exchange.
 */
#ifndef _GNU_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

#include "gpuport/gpuport.h"
#include "gpuport/gpuport_mpi.h"
#include "bench_idle.h"
#include "bench_out.h"
#include "bench_rma.h"
#if GPUPORT_BENCH_GPU
#include "bench_gpu.h"
#include "bench_rma_gpu.h"
#endif

#define KIB (1ull << 10)
#define MIB (1ull << 20)
#define GIB (1ull << 30)

/* Round counts before --iters scaling; large sizes move fewer rounds so that
 * the default sweep takes a minute or two on a small machine. */
#define LAT_BYTES (512 * MIB) /* bytes each way over the timed ping-pong rounds */
#define LAT_ROUNDS_MIN 16
#define LAT_ROUNDS_MAX 2000
#define BW_BYTES (2 * GIB) /* bytes over the timed bandwidth rounds */
#define BW_ROUNDS_MIN 4
#define BW_ROUNDS_MAX 500
#define WARM_MAX 20

#define TAG_DATA 1
#define TAG_ACK 2
#define MAX_WINDOW 64 /* largest W of the bandwidth rounds */
#define MAX_REPORTS 5 /* mismatch messages per rank and test */

/* ---- options ---------------------------------------------------------- */

/* --mem: the GPU memory of GPU mode's channels */
enum { MEM_DEFAULT, MEM_CUDAMALLOC, MEM_VMM, MEM_BOTH, MEM_POOL, MEM_VMM_POOL, MEM_COUNT };
static const char *const mem_names[] = {"", "cudamalloc", "vmm", "both", "pool", "vmm-pool"};

typedef struct opts {
    uint64_t min_size;
    uint64_t max_size;
    double iter_scale;
    int use_malloc;
    int no_mpi;
    int host;
    int mem;
    int small_only;
    int bandwidth_only;
    int backoff_only; /* --backoff-only: only the device back-off table */
    int memchan_only; /* --memchan-only: only the memory-channel table */
    int idle;        /* --idle: only the idle-proxy table (bench_idle.c) */
    int rma;         /* --rma: only the get / atomic_add / accumulate tables (bench_rma.c) */
    int rma_gpu;     /* --rma-gpu: the same from kernels, GPU mode (bench_rma_gpu.cu) */
    int idle_pauses;
    double idle_pause;
    int help;
    const char *csv;  /* --csv FILE */
    const char *json; /* --json FILE */
} opts_t;

static void usage(FILE *f, const char *prog)
{
    fprintf(f,
            "usage: mpirun -np N %s [options]\n"
            "Port-channel latency and bandwidth between rank pairs (0-1, 2-3, ...), with MPI\n"
            "baselines, on host memory, or on GPUs where every rank sees one (raw copy-engine\n"
            "baselines; see --host, --mem). Every transfer is verified.\n"
            "  --min-size S   smallest message (default 8); k, m, g suffixes allowed\n"
            "  --max-size S   largest message (default 256m); sizes double from min to max\n"
            "  --iters X      scale every round count by X (default 1, may be fractional)\n"
            "  --malloc       buffers from malloc + gpuport_mem_register (peers write by\n"
            "                 cross-memory attach) instead of gpuport_mem_alloc (shared mapping)\n"
            "  --no-mpi       skip the baselines (MPI; on GPUs the raw copy-engine copies\n"
            "                 and the small operations' limits)\n"
            "  --host         host memory even where GPUs are present (GPU mode is chosen\n"
            "                 when every rank sees a GPU; where a host has fewer GPUs than\n"
            "                 ranks, local rank r uses GPU r %% count, time-sliced)\n"
            "  --mem M        GPU mode: the channels' memory: cudamalloc (default; CUDA IPC),\n"
            "                 vmm (gpuport_mem_alloc_device; the default under\n"
            "                 GPUPORT_TRANSPORT=tcp, which refuses cudaMalloc memory),\n"
            "                 both (the IPC bandwidth table for both side by side),\n"
            "                 pool (cudaMallocFromPoolAsync from a pool made with\n"
            "                 cudaMemHandleTypePosixFileDescriptor), or vmm-pool (the\n"
            "                 bandwidth table for VMM and pool memory side by side)\n"
            "  --idle         only the idle-proxy table: for each sleep policy, the proxy's\n"
            "                 and flusher's CPU while idle and the first operation after a\n"
            "                 pause (host mode: 8 B round trip; GPU mode: a kernel's flush,\n"
            "                 and put + flush); exactly 2 ranks\n"
            "  --idle-pauses N  long pauses per operation (default 5, at most 64)\n"
            "  --idle-pause S   their length in seconds (default 1)\n"
            "  --rma          only the get, atomic_add and accumulate tables, host memory:\n"
            "                 get beside put and MPI_Get (8 B - 16 MiB), atomic_add beside\n"
            "                 put_value, MPI_Accumulate and the host's own atomic add,\n"
            "                 accumulate (float32 1 KiB - 16 MiB, int64 1 MiB) beside put,\n"
            "                 MPI_Accumulate and the host's own adds; exactly 2 ranks\n"
            "  --rma-gpu      GPU mode: only the same operations from kernels, exactly 2\n"
            "                 ranks: a port channel's get + flush beside put + flush and\n"
            "                 the raw copy engine (8 B - 16 MiB); a memory channel's get,\n"
            "                 atomic_add and accumulate (float32, bfloat16) beside put,\n"
            "                 put_value and the same loads and atomics through the mapping\n"
            "                 (run it under MPS where the pair shares a GPU)\n"
            "  --small-only   GPU mode: only the small-operations table (signals, put_value,\n"
            "                 64 B puts, 1-256 KiB puts, FIFO round trip, ping-pong, each\n"
            "                 beside its limit from a private CUDA context, with its target)\n"
            "  --bandwidth-only  GPU mode: only the IPC put bandwidth table\n"
            "  --backoff-only  GPU mode: only the device back-off table (GPUPORT_DEV_SPIN\n"
            "                 and GPUPORT_DEV_BACKOFF_NS beside spinning; run it under MPS)\n"
            "  --memchan-only  GPU mode: only the memory-channel table (ping-pong, 64 B\n"
            "                 put + signal, bandwidth, each beside its floor; under MPS)\n"
            "  --csv FILE     also write every figure to FILE as CSV: one row per size of each\n"
            "                 measurement, gpuport beside its baseline, with the machine,\n"
            "                 version, commit and date (scripts/plot-bench.py plots them)\n"
            "  --json FILE    the same rows as JSON: {\"header\": {...}, \"rows\": [...]}\n"
            "  -v, --version  print the version and exit (MPI is not started)\n"
            "  -h, --help     this text\n",
            prog);
}

static int parse_size(const char *s, uint64_t *v_p)
{
    char *end;
    unsigned long long v;
    uint64_t mult = 1;

    if (*s < '0' || *s > '9')
        return -1;
    v = strtoull(s, &end, 10);
    switch (*end) {
    case 'k': case 'K': mult = KIB; end++; break;
    case 'm': case 'M': mult = MIB; end++; break;
    case 'g': case 'G': mult = GIB; end++; break;
    default: break;
    }
    if (*end != '\0' || v == 0 || v > UINT64_MAX / mult)
        return -1;
    *v_p = v * mult;
    return 0;
}

/* The value of option `name` at argv[*i] ("--name V" or "--name=V"), or NULL
 * if argv[*i] is another option; *missing_p is set if the value is absent. */
static const char *opt_value(int argc, char **argv, int *i, const char *name, int *missing_p)
{
    size_t len = strlen(name);

    if (strncmp(argv[*i], name, len) != 0)
        return NULL;
    if (argv[*i][len] == '=')
        return argv[*i] + len + 1;
    if (argv[*i][len] != '\0')
        return NULL;
    if (*i + 1 >= argc) {
        *missing_p = 1;
        return NULL;
    }
    return argv[++*i];
}

/* 0 on success; -1 with a message on rank 0 */
static int parse_args(int argc, char **argv, int rank, opts_t *o)
{
    const char *bad = NULL, *v = NULL;
    int missing = 0;

    o->min_size = 8;
    o->max_size = 256 * MIB;
    o->iter_scale = 1.0;
    o->use_malloc = o->no_mpi = o->host = o->small_only = o->help = 0;
    o->bandwidth_only = o->backoff_only = o->memchan_only = 0;
    o->idle = o->rma = o->rma_gpu = 0;
    o->idle_pauses = 5;
    o->idle_pause = 1.0;
    o->mem = MEM_DEFAULT;
    o->csv = o->json = NULL;
    for (int i = 1; i < argc && !bad; i++) {
        const char *arg = argv[i];
        char *end;

        v = NULL;
        if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
            o->help = 1;
        } else if (!strcmp(arg, "--malloc")) {
            o->use_malloc = 1;
        } else if (!strcmp(arg, "--no-mpi")) {
            o->no_mpi = 1;
        } else if (!strcmp(arg, "--host")) {
            o->host = 1;
        } else if (!strcmp(arg, "--small-only")) {
            o->small_only = 1;
        } else if (!strcmp(arg, "--bandwidth-only")) {
            o->bandwidth_only = 1;
        } else if (!strcmp(arg, "--backoff-only")) {
            o->backoff_only = 1;
        } else if (!strcmp(arg, "--memchan-only")) {
            o->memchan_only = 1;
        } else if (!strcmp(arg, "--idle")) {
            o->idle = 1;
        } else if (!strcmp(arg, "--rma")) {
            o->rma = 1;
        } else if (!strcmp(arg, "--rma-gpu")) {
            o->rma_gpu = 1;
        } else if ((v = opt_value(argc, argv, &i, "--idle-pauses", &missing))) {
            char *end;
            long n = strtol(v, &end, 10);
            if (*end || n < 1 || n > 64)
                bad = arg;
            o->idle_pauses = (int)n;
        } else if ((v = opt_value(argc, argv, &i, "--idle-pause", &missing))) {
            char *end;
            o->idle_pause = strtod(v, &end);
            if (*end || !(o->idle_pause >= 0.001 && o->idle_pause <= 60))
                bad = arg;
        } else if ((v = opt_value(argc, argv, &i, "--min-size", &missing))) {
            if (parse_size(v, &o->min_size))
                bad = arg;
        } else if ((v = opt_value(argc, argv, &i, "--max-size", &missing))) {
            if (parse_size(v, &o->max_size))
                bad = arg;
        } else if ((v = opt_value(argc, argv, &i, "--mem", &missing))) {
            o->mem = MEM_DEFAULT;
            for (int k = MEM_CUDAMALLOC; k < MEM_COUNT; k++)
                if (!strcmp(v, mem_names[k]))
                    o->mem = k;
            if (o->mem == MEM_DEFAULT)
                bad = arg;
        } else if ((v = opt_value(argc, argv, &i, "--iters", &missing))) {
            o->iter_scale = strtod(v, &end);
            if (*end != '\0' || !(o->iter_scale > 0 && o->iter_scale < 1e6))
                bad = arg;
        } else if ((v = opt_value(argc, argv, &i, "--csv", &missing))) {
            o->csv = v;
            if (!*v)
                bad = arg;
        } else if ((v = opt_value(argc, argv, &i, "--json", &missing))) {
            o->json = v;
            if (!*v)
                bad = arg;
        } else {
            bad = arg;
        }
    }
    if (bad && rank == 0)
        fprintf(stderr, "%s: %s %s%s%s\n", argv[0], missing ? "missing value for" :
                v ? "bad value for" : "unknown option", bad, v ? ": " : "", v ? v : "");
    else if (!bad && o->min_size > o->max_size && rank == 0)
        fprintf(stderr, "%s: --min-size is larger than --max-size\n", argv[0]);
    if (!bad && o->min_size <= o->max_size)
        return 0;
    if (rank == 0)
        usage(stderr, argv[0]);
    return -1;
}

/* -v / --version anywhere among the options (not as an option's value).
 * Checked before MPI_Init, so that it answers without a launcher, and
 * under one without starting MPI in any process. */
static int version_wanted(int argc, char **argv)
{
    static const char *const with_value[] = {"--min-size", "--max-size", "--iters", "--mem",
                                             "--csv", "--json"};

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-v") || !strcmp(argv[i], "--version"))
            return 1;
        for (size_t k = 0; k < sizeof(with_value) / sizeof(with_value[0]); k++) {
            if (!strcmp(argv[i], with_value[k])) {
                i++; /* its value */
                break;
            }
        }
    }
    return 0;
}

/* Under mpirun every process prints the version unless it knows it is not
 * the first: the launchers' rank variables (Open MPI, PMIx, MPICH's hydra). */
static int launcher_rank(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"};

    for (size_t k = 0; k < sizeof(vars) / sizeof(vars[0]); k++) {
        const char *v = getenv(vars[k]);
        if (v && *v)
            return atoi(v);
    }
    return 0;
}

/* ---- data pattern and memory kinds ------------------------------------ */

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Word j of a message: word 0 depends on the round, so that a round's arrival
 * can be checked for the cost of 8 bytes; the rest depends on the seed. */
static uint64_t pattern_word(uint64_t seed, uint64_t round, uint64_t j)
{
    return j ? mix64(seed + j) : mix64(seed ^ mix64(~round));
}

typedef struct mismatch {
    uint64_t offset;
    unsigned expected;
    unsigned actual;
} mismatch_t;

static void host_write(void *buf, uint64_t nbytes, uint64_t seed, uint64_t round)
{
    unsigned char *p = buf;

    for (uint64_t off = 0; off < nbytes; off += 8) {
        uint64_t w = pattern_word(seed, round, off / 8);
        memcpy(p + off, &w, nbytes - off < 8 ? nbytes - off : 8);
    }
}

static int host_check(const void *buf, uint64_t nbytes, uint64_t seed, uint64_t round,
                      mismatch_t *m_p)
{
    const unsigned char *p = buf;

    for (uint64_t off = 0; off < nbytes; off += 8) {
        uint64_t w = pattern_word(seed, round, off / 8), got = 0;
        size_t n = nbytes - off < 8 ? (size_t)(nbytes - off) : 8;
        const unsigned char *e = (const unsigned char *)&w;

        memcpy(&got, p + off, n);
        if (n == 8 ? got == w : memcmp(p + off, e, n) == 0)
            continue;
        for (size_t i = 0; i < n; i++) {
            if (p[off + i] != e[i]) {
                m_p->offset = off + i;
                m_p->expected = e[i];
                m_p->actual = p[off + i];
                return -1;
            }
        }
    }
    return 0;
}

static gpuport_status_t host_malloc(gpuport_comm_t comm, size_t size, void **ptr_p)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    void *p = aligned_alloc(page, (size + page - 1) / page * page);

    (void)comm;
    if (!p)
        return GPUPORT_ERR_NO_MEMORY;
    *ptr_p = p;
    return GPUPORT_OK;
}

static gpuport_status_t host_free(gpuport_comm_t comm, void *ptr)
{
    (void)comm;
    free(ptr);
    return GPUPORT_OK;
}

/* Where host mode's buffers live; the tests only touch buffers through
 * here and through gpuport and MPI calls. */
typedef struct mem_kind {
    const char *mode;
    const char *desc;
    gpuport_status_t (*alloc)(gpuport_comm_t comm, size_t size, void **ptr_p);
    gpuport_status_t (*release)(gpuport_comm_t comm, void *ptr);
    /* writes / checks bytes [0, nbytes) of the message (seed, round) */
    void (*write)(void *buf, uint64_t nbytes, uint64_t seed, uint64_t round);
    int (*check)(const void *buf, uint64_t nbytes, uint64_t seed, uint64_t round, mismatch_t *m_p);
} mem_kind_t;

static const mem_kind_t mem_host_shared = {
    .mode = "host memory",
    .desc = "gpuport_mem_alloc (memfd shared mapping: the proxy memcpys into the peer's mapping)",
    .alloc = gpuport_mem_alloc,
    .release = gpuport_mem_free,
    .write = host_write,
    .check = host_check,
};

static const mem_kind_t mem_host_malloc = {
    .mode = "host memory",
    .desc = "malloc + gpuport_mem_register (private: the proxy writes by cross-memory attach)",
    .alloc = host_malloc,
    .release = host_free,
    .write = host_write,
    .check = host_check,
};

/* ---- benchmark state and helpers -------------------------------------- */

typedef struct bench {
    const opts_t *o;
    const mem_kind_t *mem;
    int rank;
    int nranks;
    int role; /* 0: A (even rank), 1: B (odd rank), -1: idle */
    int peer; /* world rank of the other side */
    MPI_Comm pair; /* A is rank 0 and B rank 1 in it; MPI_COMM_NULL when idle */
    gpuport_comm_t comm;
    gpuport_mem_t reg_src, reg_dst;
    gpuport_channel_t ch;
    unsigned char *src, *dst;
    MPI_Win win;
    unsigned char *win_base;
    int win_twosided; /* MPI bw is two-sided: over tcp, or no window between the hosts */
    const char *twosided_why;
    const char *win_alloc; /* the MPI call that made the window */
    /* the measurement being run */
    const char *test;
    uint64_t size;
    int window;
    unsigned char *rx; /* where this rank receives data */
    uint64_t seed_tx, seed_rx;
    int mismatches;
} bench_t;

static void gp_check(gpuport_status_t status, const char *call, int line)
{
    int rank = 0;

    if (status == GPUPORT_OK)
        return;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    fprintf(stderr, "rank %d: %s failed: %s (gpuport_bench.c:%d)\n", rank, call,
            gpuport_status_string(status), line);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* MPI calls need no wrapper: MPI_COMM_WORLD's default handler aborts on error. */
#define GP_CHECK(call) gp_check((call), #call, __LINE__)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t stamp_bytes(const bench_t *b)
{
    return b->size < 8 ? b->size : 8;
}

static void report(bench_t *b, const char *when, uint64_t round, const mismatch_t *m)
{
    if (b->mismatches++ >= MAX_REPORTS)
        return;
    fprintf(stderr,
            "rank %d: MISMATCH in %s, %llu-byte messages from rank %d, %s (round %llu): byte "
            "%llu is 0x%02x, expected 0x%02x%s\n",
            b->rank, b->test, (unsigned long long)b->size, b->peer, when,
            (unsigned long long)round, (unsigned long long)m->offset, m->actual, m->expected,
            b->mismatches == MAX_REPORTS ? " (further mismatches of this test not shown)" : "");
}

static void check_rx(bench_t *b, uint64_t nbytes, uint64_t round, const char *when)
{
    mismatch_t m;

    if (b->mem->check(b->rx, nbytes, b->seed_rx, round, &m))
        report(b, when, round, &m);
}

static void tx_stamp(bench_t *b, uint64_t round)
{
    b->mem->write(b->src, stamp_bytes(b), b->seed_tx, round);
}

/* ---- the rounds ------------------------------------------------------- */

static void gp_send(bench_t *b, uint64_t round)
{
    tx_stamp(b, round);
    GP_CHECK(gpuport_channel_put_with_signal(b->ch, 0, 0, b->size));
}

static void gp_recv(bench_t *b, uint64_t round)
{
    GP_CHECK(gpuport_channel_wait(b->ch));
    check_rx(b, stamp_bytes(b), round, "word 0 after its round");
}

static void mpi_send(bench_t *b, uint64_t round)
{
    tx_stamp(b, round);
    MPI_Send(b->src, (int)b->size, MPI_BYTE, 1 - b->role, TAG_DATA, b->pair);
}

static void mpi_recv(bench_t *b, uint64_t round)
{
    MPI_Recv(b->rx, (int)b->size, MPI_BYTE, 1 - b->role, TAG_DATA, b->pair, MPI_STATUS_IGNORE);
    check_rx(b, stamp_bytes(b), round, "word 0 after its round");
}

static void mpi_ack(bench_t *b, int send)
{
    if (send)
        MPI_Send(NULL, 0, MPI_BYTE, 1 - b->role, TAG_ACK, b->pair);
    else
        MPI_Recv(NULL, 0, MPI_BYTE, 1 - b->role, TAG_ACK, b->pair, MPI_STATUS_IGNORE);
}

typedef void (*half_fn)(bench_t *b, uint64_t round);

static void ping_pong(bench_t *b, uint64_t round, half_fn send, half_fn recv)
{
    if (b->role == 0) {
        send(b, round);
        recv(b, round);
    } else {
        recv(b, round);
        send(b, round);
    }
}

static void gp_lat_round(bench_t *b, uint64_t round)
{
    ping_pong(b, round, gp_send, gp_recv);
}

static void mpi_lat_round(bench_t *b, uint64_t round)
{
    ping_pong(b, round, mpi_send, mpi_recv);
}

static void gp_bw_round(bench_t *b, uint64_t round)
{
    if (b->role == 0) {
        tx_stamp(b, round);
        for (int i = 1; i < b->window; i++)
            GP_CHECK(gpuport_channel_put(b->ch, 0, 0, b->size));
        GP_CHECK(gpuport_channel_put_with_signal(b->ch, 0, 0, b->size));
        GP_CHECK(gpuport_channel_wait(b->ch));
    } else {
        gp_recv(b, round);
        GP_CHECK(gpuport_channel_signal(b->ch));
    }
}

static void mpi_bw_round(bench_t *b, uint64_t round)
{
    if (b->win_twosided) {
        MPI_Request req[MAX_WINDOW];
        for (int i = 0; i < b->window; i++) {
            if (b->role == 0) {
                if (i == 0)
                    tx_stamp(b, round);
                MPI_Isend(b->src, (int)b->size, MPI_BYTE, 1, TAG_DATA, b->pair, &req[i]);
            } else {
                MPI_Irecv(b->win_base, (int)b->size, MPI_BYTE, 0, TAG_DATA, b->pair, &req[i]);
            }
        }
        MPI_Waitall(b->window, req, MPI_STATUSES_IGNORE);
        if (b->role == 0) {
            mpi_ack(b, 0);
        } else {
            check_rx(b, stamp_bytes(b), round, "word 0 after its round");
            mpi_ack(b, 1);
        }
        return;
    }
    if (b->role == 0) {
        tx_stamp(b, round);
        for (int i = 0; i < b->window; i++)
            MPI_Put(b->src, (int)b->size, MPI_BYTE, 1, 0, (int)b->size, MPI_BYTE, b->win);
        MPI_Win_flush(1, b->win);
        mpi_ack(b, 1);
        mpi_ack(b, 0);
    } else {
        mpi_ack(b, 0);
        MPI_Win_sync(b->win); /* the puts are complete: make them visible to loads */
        check_rx(b, stamp_bytes(b), round, "word 0 after its round");
        mpi_ack(b, 1);
    }
}

/* ---- the tests and their driver --------------------------------------- */

typedef struct test {
    const char *name;
    const char *column; /* table header; its width is the column's */
    int decimals;
    int mpi;         /* a baseline: --no-mpi skips it, and sizes above INT_MAX */
    int latency;     /* ping-pong: both ranks send data; else A sends, B acknowledges */
    int into_window; /* B receives into the MPI window, not the gpuport buffer */
    void (*round)(bench_t *b, uint64_t round);
} test_t;

/* in the order of the table's columns */
static const test_t tests[] = {
    {.name = "gpuport ping-pong", .column = "gpuport lat us", .decimals = 2, .latency = 1,
     .round = gp_lat_round},
    {.name = "MPI ping-pong", .column = "MPI lat us", .decimals = 2, .mpi = 1, .latency = 1,
     .round = mpi_lat_round},
    {.name = "gpuport put bandwidth", .column = "gpuport GB/s", .decimals = 3,
     .round = gp_bw_round},
    {.name = "MPI_Put bandwidth", .column = "MPI GB/s", .decimals = 3, .mpi = 1,
     .into_window = 1, .round = mpi_bw_round},
};
#define NTESTS (sizeof(tests) / sizeof(tests[0]))

typedef struct counts {
    uint64_t warm;
    uint64_t timed;
    int window;
} counts_t;

static uint64_t clamp_u64(uint64_t v, uint64_t lo, uint64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

static counts_t test_counts(const opts_t *o, const test_t *t, uint64_t size)
{
    counts_t c;
    double timed;

    if (t->latency) {
        c.window = 1;
        timed = (double)clamp_u64(LAT_BYTES / size, LAT_ROUNDS_MIN, LAT_ROUNDS_MAX);
    } else {
        c.window = size <= 64 * KIB ? 64 : size <= MIB ? 32 : size <= 16 * MIB ? 16
                 : size <= 64 * MIB ? 8 : 4;
        timed = (double)clamp_u64(BW_BYTES / (size * (uint64_t)c.window), BW_ROUNDS_MIN,
                                  BW_ROUNDS_MAX);
    }
    timed *= o->iter_scale;
    c.timed = timed < 1 ? 1 : (uint64_t)timed;
    c.warm = clamp_u64(c.timed / 10, 1, WARM_MAX);
    return c;
}

static int sends(const bench_t *b, const test_t *t)
{
    return t->latency || b->role == 0;
}

static int receives(const bench_t *b, const test_t *t)
{
    return t->latency || b->role == 1;
}

static uint64_t message_seed(uint64_t size, size_t test, int sender, int generation)
{
    return mix64(mix64(mix64(size) ^ test) ^ ((uint64_t)sender << 8 | (uint64_t)generation));
}

/* Fresh pattern in the source, garbage in the receive region, then both sides
 * meet: nothing of an earlier round can be mistaken for this one's data. */
static void prepare(bench_t *b, const test_t *t, int generation, uint64_t round)
{
    size_t idx = (size_t)(t - tests);

    b->seed_tx = message_seed(b->size, idx, b->rank, generation);
    b->seed_rx = message_seed(b->size, idx, b->peer, generation);
    if (sends(b, t))
        b->mem->write(b->src, b->size, b->seed_tx, round);
    if (receives(b, t)) {
        b->mem->write(b->rx, b->size, ~b->seed_rx, round);
        if (t->into_window && !b->win_twosided)
            MPI_Win_sync(b->win);
    }
    MPI_Barrier(b->pair);
}

typedef struct result {
    int ran;
    double value;     /* us (the median) or GB/s */
    bench_stats_t st; /* latency tests: half the round trip in us, over the timed rounds */
} result_t;

static int test_runs(const bench_t *b, const test_t *t, uint64_t size)
{
    return !(t->mpi && (b->o->no_mpi || size > INT_MAX));
}

/* The last ping-pong message has no answer, so only a flush tells its
 * sender that the source may be rewritten. MPI's sends and flushes already
 * returned with their sources free. */
static void settle(bench_t *b, const test_t *t)
{
    if (t->mpi)
        return;
    GP_CHECK(gpuport_channel_flush(b->ch));
    GP_CHECK(gpuport_channel_status(b->ch));
}

/* Collective over MPI_COMM_WORLD (the barrier lines all pairs up); the result
 * is meaningful on A. Adds mismatches to b->mismatches. */
static result_t run_test(bench_t *b, const test_t *t, uint64_t size, counts_t c)
{
    result_t r;
    uint64_t last = c.warm + c.timed, k;
    double *samples = NULL, start;

    memset(&r, 0, sizeof(r));
    MPI_Barrier(MPI_COMM_WORLD);
    if (b->role < 0 || !test_runs(b, t, size))
        return r;
    b->test = t->name;
    b->size = size;
    b->window = c.window;
    b->rx = t->into_window ? b->win_base : b->dst;
    if (t->latency && b->role == 0 && !(samples = malloc(c.timed * sizeof(*samples)))) {
        fprintf(stderr, "rank %d: no memory for %llu samples\n", b->rank,
                (unsigned long long)c.timed);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    prepare(b, t, 0, 0);
    for (k = 0; k < c.warm; k++)
        t->round(b, k);
    MPI_Barrier(b->pair);
    start = now_s();
    for (; k < last; k++) {
        double t0 = now_s();
        t->round(b, k);
        if (samples)
            samples[k - c.warm] = (now_s() - t0) / 2 * 1e6;
    }
    r.value = now_s() - start;
    settle(b, t);
    if (receives(b, t))
        check_rx(b, size, last - 1, "every byte after the timed rounds");

    prepare(b, t, 1, last);
    t->round(b, last);
    settle(b, t);
    if (receives(b, t))
        check_rx(b, size, last, "every byte of the verification round");

    r.ran = 1;
    if (samples) {
        bench_stats_of(samples, c.timed, &r.st);
        r.value = r.st.median;
    } else
        r.value = (double)size * (double)c.window * (double)c.timed / r.value / 1e9;
    free(samples);
    return r;
}

/* ---- output ----------------------------------------------------------- */

static void format_size(uint64_t size, char *buf, size_t len)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB"};
    int u = 0;

    while (u < 3 && size >= 1024 && size % 1024 == 0) {
        size /= 1024;
        u++;
    }
    snprintf(buf, len, "%llu %s", (unsigned long long)size, units[u]);
}

static int column_width(const test_t *t)
{
    int w = (int)strlen(t->column);
    return w < 12 ? 12 : w;
}

/* Other work on the machine shows in every figure; say how much there was. */
static void load_average(char *buf, size_t len)
{
    FILE *f = fopen("/proc/loadavg", "r");
    double l1;

    snprintf(buf, len, "unknown");
    if (f) {
        if (fscanf(f, "%lf", &l1) == 1)
            snprintf(buf, len, "%.2f", l1);
        fclose(f);
    }
}

static const char *mpi_onesided_text(const char *alloc)
{
    static char text[256];
    snprintf(text, sizeof(text),
             "#       MPI: one-sided, W MPI_Put into a window from %s\n"
             "#       under MPI_Win_lock_all, MPI_Win_flush, 0-byte MPI_Send/MPI_Recv ack\n"
             "#       each way\n",
             alloc);
    return text;
}

static const char *mpi_twosided_text(const char *why)
{
    static char text[320];

    snprintf(text, sizeof(text),
             "#       MPI: two-sided, W MPI_Isend / MPI_Irecv and MPI_Waitall, 0-byte\n"
             "#       ack back (%s)\n",
             why);
    return text;
}

/* Which MPI, and which of its paths the baseline took, as far as the run
 * says: Open MPI takes --mca NAME VALUE as OMPI_MCA_NAME in each rank's
 * environment, and MPICH's ch3/ch4 netmod as MPIR_CVAR_CH4_NETMOD. */
static void print_mpi_path(void)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "?";
    const char *btl = getenv("OMPI_MCA_btl"), *pml = getenv("OMPI_MCA_pml");
    const char *netmod = getenv("MPIR_CVAR_CH4_NETMOD");
    int len = 0;

    MPI_Get_library_version(lib, &len);
    lib[strcspn(lib, "\n,")] = '\0';
    printf("# MPI path:  %s; ", lib);
    if (btl || pml)
        printf("btl %s, pml %s (OMPI_MCA_btl, OMPI_MCA_pml: --mca)", btl ? btl : "(default)",
               pml ? pml : "(default)");
    else if (netmod)
        printf("netmod %s (MPIR_CVAR_CH4_NETMOD)", netmod);
    else
        printf("MPI's default transports (no --mca btl: shared memory on one host; "
               "--mca btl tcp,self for MPI over TCP)");
    printf("\n");
}

static void print_header(const bench_t *b)
{
    char host[256] = "?", when[64] = "?", lo[32], hi[32], load[32];
    time_t now = time(NULL);
    struct tm tm;
    int pairs = b->nranks / 2;

    gethostname(host, sizeof(host) - 1);
    if (localtime_r(&now, &tm))
        strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S %Z", &tm);
    format_size(b->o->min_size, lo, sizeof(lo));
    format_size(b->o->max_size, hi, sizeof(hi));
    load_average(load, sizeof(load));
    printf("# gpuport_bench, gpuport %s\n", gpuport_version_string());
    printf("# date:      %s\n", when);
    printf("# host:      %s, %ld cores online, load average %s (1 min)\n", host,
           sysconf(_SC_NPROCESSORS_ONLN), load);
    printf("# ranks:     %d, %d pair(s)%s\n", b->nranks, pairs,
           b->nranks % 2 ? ", last rank idle" : "");
    printf("# mode:      %s\n", b->mem->mode);
    printf("# memory:    %s\n", b->mem->desc);
    printf("# transport: %s\n", gpuport_channel_transport(b->ch));
    printf("# sizes:     %s to %s, round counts x %g\n", lo, hi, b->o->iter_scale);
    printf("# lat:  half the round trip in us, median of the timed rounds (after warm-up;\n"
           "#       min, mean and p99 in the table after this one)\n"
           "#       gpuport: put_with_signal -> wait -> put_with_signal back -> wait;\n"
           "#       MPI: MPI_Send/MPI_Recv ping-pong\n"
           "# GB/s: 1e9 bytes/s, W*size*rounds / time of all timed rounds; per round A sends\n"
           "#       W messages to the same destination, then B acknowledges:\n"
           "#       gpuport: (W-1) put + put_with_signal, B wait + signal, A wait;\n"
           "%s"
           "# verified: every byte of the last timed round and of an extra round with a\n"
           "#       fresh pattern checked (and word 0 of every round), all tests, all ranks\n",
           b->win_twosided ? mpi_twosided_text(b->twosided_why)
           : b->win_alloc  ? mpi_onesided_text(b->win_alloc)
                           : "#       MPI: (none: --no-mpi)\n");
    if (b->win_alloc)
        print_mpi_path();
    if (pairs > 1)
        printf("# the table is for pair 0<->1; %d pairs run concurrently\n", pairs);
    printf("\n%10s", "size");
    for (size_t i = 0; i < NTESTS; i++)
        printf(" | %*s", column_width(&tests[i]), tests[i].column);
    printf(" | verified | rounds lat, bw x W\n");
    fflush(stdout);
}

/* The last column gives the timed rounds: gpuport and MPI tests of a kind
 * run the same counts. */
static void print_row(uint64_t size, const result_t *r, const counts_t *c, int ok)
{
    const counts_t *lat = NULL, *bw = NULL;
    char s[32];

    for (size_t i = 0; i < NTESTS; i++) {
        if (tests[i].latency && !lat)
            lat = &c[i];
        else if (!tests[i].latency && !bw)
            bw = &c[i];
    }

    format_size(size, s, sizeof(s));
    printf("%10s", s);
    for (size_t i = 0; i < NTESTS; i++) {
        if (r[i].ran)
            printf(" | %*.*f", column_width(&tests[i]), tests[i].decimals, r[i].value);
        else
            printf(" | %*s", column_width(&tests[i]), "-");
    }
    printf(" | %8s | %llu, %llu x %d\n", ok ? "yes" : "NO", (unsigned long long)lat->timed,
           (unsigned long long)bw->timed, bw->window);
    fflush(stdout);
}

/* ---- set-up, sweep, tear-down ----------------------------------------- */

/* Collective over the pair. */
static void window_setup(bench_t *b, uint64_t bytes)
{
    MPI_Comm node;
    MPI_Info info;
    int node_size;

    MPI_Comm_split_type(b->pair, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &node_size);
    MPI_Comm_free(&node);
    if (strcmp(gpuport_channel_transport(b->ch), "tcp") == 0) {
        /* Beside tcp, MPI over its own point-to-point path (the BTL the
         * run chose: --mca btl tcp,self for MPI over TCP). A shared window
         * would be one-sided shared memory whatever the BTL (osc/sm). */
        b->win_twosided = 1;
        b->twosided_why = "beside tcp: MPI's point-to-point path, not a shared window";
    } else if (node_size == 2) {
        MPI_Info_create(&info);
        MPI_Info_set(info, "alloc_shared_noncontig", "true");
        MPI_Win_allocate_shared((MPI_Aint)bytes, 1, info, b->pair, &b->win_base, &b->win);
        MPI_Info_free(&info);
        b->win_alloc = "MPI_Win_allocate_shared";
    } else {
        int rc, ok;
        /* Open MPI over the tcp BTL alone (no RDMA) has no one-sided
         * component between hosts: measure two-sided messages instead. */
        MPI_Comm_set_errhandler(b->pair, MPI_ERRORS_RETURN);
        rc = MPI_Win_allocate((MPI_Aint)bytes, 1, MPI_INFO_NULL, b->pair, &b->win_base, &b->win);
        MPI_Comm_set_errhandler(b->pair, MPI_ERRORS_ARE_FATAL);
        ok = rc == MPI_SUCCESS;
        MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, b->pair);
        if (ok) {
            b->win_alloc = "MPI_Win_allocate";
        } else {
            if (rc == MPI_SUCCESS)
                MPI_Win_free(&b->win);
            b->win = MPI_WIN_NULL;
            b->win_twosided = 1;
            b->twosided_why = "MPI_Win_allocate failed between these hosts";
        }
    }
    if (b->win_twosided) {
        b->win_base = malloc(bytes);
        if (!b->win_base) {
            fprintf(stderr, "rank %d: malloc(%llu) failed\n", b->rank,
                    (unsigned long long)bytes);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        b->win_alloc = "(none)";
        return;
    }
    MPI_Win_lock_all(0, b->win);
}

static void bench_setup(bench_t *b, const opts_t *o)
{
    memset(b, 0, sizeof(*b));
    b->o = o;
    b->mem = o->use_malloc ? &mem_host_malloc : &mem_host_shared;
    b->pair = MPI_COMM_NULL;
    MPI_Comm_rank(MPI_COMM_WORLD, &b->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &b->nranks);
    b->role = b->rank % 2 ? 1 : b->rank + 1 < b->nranks ? 0 : -1;
    b->peer = b->role < 0 ? -1 : b->rank ^ 1;
    MPI_Comm_split(MPI_COMM_WORLD, b->role < 0 ? MPI_UNDEFINED : b->rank / 2, b->rank, &b->pair);

    GP_CHECK(gpuport_comm_init_mpi(MPI_COMM_WORLD, &b->comm));
    if (b->role < 0)
        return;
    GP_CHECK(b->mem->alloc(b->comm, o->max_size, (void **)&b->src));
    GP_CHECK(b->mem->alloc(b->comm, o->max_size, (void **)&b->dst));
    GP_CHECK(gpuport_mem_register(b->comm, b->src, o->max_size, &b->reg_src));
    GP_CHECK(gpuport_mem_register(b->comm, b->dst, o->max_size, &b->reg_dst));
    GP_CHECK(gpuport_channel_create(b->comm, b->peer, b->reg_src, b->reg_dst, &b->ch));
    if (!o->no_mpi && o->min_size <= INT_MAX)
        window_setup(b, o->max_size > INT_MAX ? INT_MAX : o->max_size);
}

/* ---- idle proxy ------------------------------------------------------- */

#define IDLE_SECONDS 2.0
#define BUSY_ROUNDS 1000

/* One 8-byte put_with_signal ping-pong round trip, in microseconds. */
static double round_trip_us(bench_t *b)
{
    double t0 = now_s();
    if (b->role == 0) {
        GP_CHECK(gpuport_channel_put_with_signal(b->ch, 0, 0, 8));
        GP_CHECK(gpuport_channel_wait(b->ch));
    } else {
        GP_CHECK(gpuport_channel_wait(b->ch));
        GP_CHECK(gpuport_channel_put_with_signal(b->ch, 0, 0, 8));
    }
    return (now_s() - t0) * 1e6;
}

/* What the proxy service costs while the job does nothing, and what the
 * first operation after such a pause costs against one on a busy channel. */
static void idle_report(bench_t *b)
{
    gpuport_comm_stats_t s0, s1;
    double t0, secs, first, busy[BUSY_ROUNDS], proxy, flusher;
    bench_stats_t st;
    bench_row_t row;

    if (b->role < 0)
        return;
    MPI_Barrier(b->pair);
    GP_CHECK(gpuport_comm_stats(b->comm, &s0));
    t0 = now_s();
    while (now_s() - t0 < IDLE_SECONDS)
        usleep(100000);
    GP_CHECK(gpuport_comm_stats(b->comm, &s1));
    secs = now_s() - t0;
    /* the pair idled together; now the first operation after the pause */
    first = round_trip_us(b);
    for (int i = 0; i < BUSY_ROUNDS; i++)
        busy[i] = round_trip_us(b);
    bench_stats_of(busy, BUSY_ROUNDS, &st);
    if (b->rank != 0)
        return;
    proxy = 100.0 * (double)(s1.proxy_cpu_ns - s0.proxy_cpu_ns) / (secs * 1e9);
    flusher = 100.0 * (double)(s1.flusher_cpu_ns - s0.flusher_cpu_ns) / (secs * 1e9);
    printf("\n# idle proxy (%.1f s without operations; GPUPORT_PROXY_IDLE_US, "
           "GPUPORT_PROXY_SLEEP_HOST_MAX_US and GPUPORT_PROXY_SLEEP_SCALE set the back-off; "
           "--idle compares policies)\n", secs);
    printf("#   CPU used while idle: proxy %.2f %% of a core, flusher %.2f %%\n", proxy, flusher);
    printf("#   8 B round trip: first after idle %.1f us, busy median %.1f us (%d rounds;\n"
           "#   min %.1f, mean %.1f, p99 %.1f us)\n",
           first, st.median, BUSY_ROUNDS, st.min, st.mean, st.p99);
    bench_out_value("idle_proxy_cpu", 0, "cpu", "% of a core", "total", proxy, 1, NULL, 0, -1);
    bench_out_value("idle_flusher_cpu", 0, "cpu", "% of a core", "total", flusher, 1, NULL, 0, -1);
    /* the first round trip after the pause beside the busy ones */
    memset(&row, 0, sizeof(row));
    row.measurement = "idle_first_round_trip";
    row.size = 8;
    row.metric = "latency";
    row.unit = "us";
    row.stat = "once";
    row.value = first;
    row.samples = 1;
    row.baseline = "busy round trips (median)";
    row.baseline_value = st.median;
    row.bst = st;
    row.baseline_samples = st.n;
    row.verified = -1;
    bench_out_row(&row);
}

static void bench_teardown(bench_t *b)
{
    if (b->role >= 0) {
        if (b->win_twosided) {
            free(b->win_base);
        } else if (b->win_base) {
            MPI_Win_unlock_all(b->win);
            MPI_Win_free(&b->win);
        }
        GP_CHECK(gpuport_channel_destroy(b->ch));
        GP_CHECK(gpuport_mem_deregister(b->reg_src));
        GP_CHECK(gpuport_mem_deregister(b->reg_dst));
        GP_CHECK(b->mem->release(b->comm, b->src));
        GP_CHECK(b->mem->release(b->comm, b->dst));
        MPI_Comm_free(&b->pair);
    }
    GP_CHECK(gpuport_comm_destroy(b->comm));
}

/* What one size measured, for the latency table after the sweep. */
typedef struct size_result {
    uint64_t size;
    result_t r[NTESTS];
    counts_t c[NTESTS];
    int ok;
} size_result_t;

#define MAX_SIZES 64 /* sizes double: at most 64 from 1 byte */

/* The record of one size: gpuport's latency beside MPI's, then gpuport's
 * bandwidth beside MPI's (tests[] pairs them in that order). */
static void write_rows(const bench_t *b, const size_result_t *sr)
{
    char bw_base[160], lat_base[128];
    const char *btl = getenv("OMPI_MCA_btl");
    char via[64] = "";

    /* the path the run forced, in the baseline's name (--mca btl) */
    if (btl)
        snprintf(via, sizeof(via), " (btl %s)", btl);
    snprintf(bw_base, sizeof(bw_base), "%s%s",
             b->win_twosided ? "MPI_Isend/MPI_Irecv + 0-byte ack"
             : b->win_alloc ? "MPI_Put + MPI_Win_flush + 0-byte ack" : "",
             b->win_twosided ? via : "");
    snprintf(lat_base, sizeof(lat_base), "MPI_Send/MPI_Recv ping-pong%s", via);
    for (size_t i = 0; i + 1 < NTESTS; i += 2) {
        const result_t *gp = &sr->r[i], *mpi = &sr->r[i + 1];
        const char *base = mpi->ran ? (tests[i].latency ? lat_base : bw_base) : NULL;
        bench_row_t row;

        if (!gp->ran)
            continue;
        if (tests[i].latency) {
            bench_out_latency("pingpong", sr->size, &gp->st, base, &mpi->st, sr->ok);
            continue;
        }
        memset(&row, 0, sizeof(row));
        row.measurement = "put_bw";
        row.size = sr->size;
        row.metric = "bandwidth";
        row.unit = "GB/s";
        row.stat = "total";
        row.value = gp->value;
        row.samples = sr->c[i].timed;
        row.baseline = base;
        row.baseline_value = mpi->ran ? mpi->value : 0;
        row.baseline_samples = mpi->ran ? sr->c[i + 1].timed : 0;
        row.verified = sr->ok;
        bench_out_row(&row);
    }
}

static void print_stats(const result_t *r, int width)
{
    if (r->ran)
        printf(" %*.2f %*.2f %*.2f %*.2f", width, r->st.min, width, r->st.median, width,
               r->st.mean, width, r->st.p99);
    else
        printf(" %*s %*s %*s %*s", width, "-", width, "-", width, "-", width, "-");
}

/* The latency tests' statistics, one line per size. */
static void print_latency_table(const size_result_t *sr, int n)
{
    const int w = 8;

    printf("\n# latency, half the round trip in us over the timed rounds: minimum, median,\n"
           "# mean, 99th percentile (nearest rank: the largest below 100 rounds)\n");
    printf("%10s | %-*s | %s\n", "", 4 * (w + 1) - 1, "gpuport", "MPI");
    printf("%10s | %*s %*s %*s %*s | %*s %*s %*s %*s\n", "size", w, "min", w, "median", w, "mean",
           w, "p99", w, "min", w, "median", w, "mean", w, "p99");
    for (int k = 0; k < n; k++) {
        char s[32];

        format_size(sr[k].size, s, sizeof(s));
        printf("%10s", s);
        for (size_t i = 0; i < NTESTS; i++) {
            if (!tests[i].latency)
                continue;
            printf(" |");
            print_stats(&sr[k].r[i], w);
        }
        printf("\n");
    }
    fflush(stdout);
}

/* Returns the number of sizes that failed verification on some rank. */
static int sweep(bench_t *b)
{
    size_result_t *all = calloc(MAX_SIZES, sizeof(*all));
    int failed = 0, n = 0;

    if (!all) {
        fprintf(stderr, "rank %d: no memory for the results\n", b->rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (uint64_t size = b->o->min_size; size <= b->o->max_size && n < MAX_SIZES; size *= 2) {
        size_result_t *sr = &all[n++];
        int before = b->mismatches, ok;

        sr->size = size;
        for (size_t i = 0; i < NTESTS; i++) {
            sr->c[i] = test_counts(b->o, &tests[i], size);
            sr->r[i] = run_test(b, &tests[i], size, sr->c[i]);
        }
        ok = b->mismatches == before;
        MPI_Allreduce(&ok, &sr->ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        failed += !sr->ok;
        if (b->rank == 0) {
            print_row(size, sr->r, sr->c, sr->ok);
            write_rows(b, sr);
        }
        if (size > UINT64_MAX / 2)
            break;
    }
    if (b->rank == 0)
        print_latency_table(all, n);
    free(all);
    return failed;
}

#if GPUPORT_BENCH_GPU
static MPI_Comm gpu_pair = MPI_COMM_NULL;

static void gpu_barrier(void *ctx)
{
    (void)ctx;
    MPI_Barrier(gpu_pair);
}

static void gpu_exchange(void *ctx, const void *mine, void *theirs, size_t bytes)
{
    int peer = *(int *)ctx;
    MPI_Sendrecv(mine, (int)bytes, MPI_BYTE, peer, TAG_DATA, theirs, (int)bytes, MPI_BYTE, peer,
                 TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

/* GPU mode when every rank sees a GPU: local rank r uses GPU r % count, so
 * ranks share GPUs (time-sliced) where a host has fewer GPUs than ranks;
 * *shared_p says whether any host does. */
static int gpu_mode_wanted(const opts_t *o, int *device_p, int *shared_p)
{
    MPI_Comm local;
    int lrank, lsize, ngpu = o->host ? 0 : bench_gpu_count(), ok, all_ok, shared;

    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
    MPI_Comm_rank(local, &lrank);
    MPI_Comm_size(local, &lsize);
    MPI_Comm_free(&local);
    ok = ngpu >= 1;
    shared = ok && ngpu < lsize;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&shared, shared_p, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    *device_p = ngpu ? lrank % ngpu : 0;
    return all_ok;
}

/* The channels' memory as bench_gpu wants it; -1 (with a message on rank 0)
 * when the transport cannot carry it. */
static int gpu_mem_bits(const opts_t *o, int rank)
{
    const char *t = getenv("GPUPORT_TRANSPORT");
    int tcp = t && !strcmp(t, "tcp");

    if (o->mem == MEM_DEFAULT)
        return tcp ? BENCH_GPU_MEM_VMM : BENCH_GPU_MEM_CUDAMALLOC;
    if (o->mem == MEM_VMM)
        return BENCH_GPU_MEM_VMM;
    if (o->mem == MEM_POOL)
        return BENCH_GPU_MEM_POOL;
    if (o->mem == MEM_VMM_POOL)
        return BENCH_GPU_MEM_VMM | BENCH_GPU_MEM_POOL;
    if (tcp) {
        if (rank == 0)
            fprintf(stderr, "gpuport_bench: --mem %s: GPUPORT_TRANSPORT=tcp refuses cudaMalloc "
                    "memory; use --mem vmm\n", mem_names[o->mem]);
        return -1;
    }
    return o->mem == MEM_BOTH ? BENCH_GPU_MEM_CUDAMALLOC | BENCH_GPU_MEM_VMM
                              : BENCH_GPU_MEM_CUDAMALLOC;
}

static int run_gpu(const opts_t *o, int rank, int nranks, int device, int shared, int mem)
{
    bench_gpu_env_t env;
    gpuport_comm_t comm;
    int peer = rank ^ 1, role = rank % 2 ? 1 : rank + 1 < nranks ? 0 : -1, fails = 0;
    int peer_device = -1;
    char host[256] = "";

    if (bench_gpu_select(device) != 0) {
        fprintf(stderr, "gpuport_bench: rank %d cannot use GPU %d\n", rank, device);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Comm_split(MPI_COMM_WORLD, role < 0 ? MPI_UNDEFINED : rank / 2, rank, &gpu_pair);
    GP_CHECK(gpuport_comm_init_mpi(MPI_COMM_WORLD, &comm));
    /* a pair is on one host (the baselines copy to the peer's GPU by its
     * ordinal): the same ordinal is the same GPU */
    if (role >= 0)
        MPI_Sendrecv(&device, 1, MPI_INT, peer, TAG_DATA, &peer_device, 1, MPI_INT, peer,
                     TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (rank == 0) {
        gethostname(host, sizeof(host) - 1);
        printf("# gpuport_bench %s: %d ranks, %d pair(s), host %s\n", gpuport_version_string(),
               nranks, nranks / 2, host);
        if (peer_device == device)
            printf("# mode: GPU memory, ranks share GPU %d (%s)", device, bench_gpu_sharing());
        else if (shared)
            printf("# mode: GPU memory, fewer GPUs than ranks: local rank r on GPU r %% count "
                   "(%s); pair 0-1 on GPUs %d and %d", bench_gpu_sharing(), device, peer_device);
        else
            printf("# mode: GPU memory, one GPU per rank");
        printf(" (table for the pair 0-1%s)\n", nranks > 2 ? ", other pairs run at once" : "");
    }
    if (role >= 0) {
        memset(&env, 0, sizeof(env));
        env.comm = comm;
        env.rank = rank;
        env.nranks = nranks;
        env.peer = peer;
        env.report = rank == 0;
        env.min_size = o->min_size;
        env.max_size = o->max_size > GIB ? GIB : o->max_size < MIB ? MIB : o->max_size;
        env.iters_scale = o->iter_scale;
        env.baselines = !o->no_mpi;
        env.mem = mem;
        env.small_only = o->small_only;
        env.bandwidth_only = o->bandwidth_only;
        env.backoff_only = o->backoff_only;
        env.memchan_only = o->memchan_only;
        env.ctx = &peer;
        env.barrier = gpu_barrier;
        env.exchange = gpu_exchange;
        fails = o->rma_gpu ? bench_rma_gpu_run(&env) : bench_gpu_run(&env);
        MPI_Comm_free(&gpu_pair);
    }
    GP_CHECK(gpuport_comm_destroy(comm));
    MPI_Allreduce(MPI_IN_PLACE, &fails, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    return fails;
}
#endif

/* --idle: the idle-proxy table alone, in GPU mode where it would be
 * chosen, else on host memory (no --csv/--json rows: the table only). */
static int idle_main(const opts_t *o, int rank, int nranks, const char *prog)
{
    int gpu = 0, fails;

    if (nranks != 2) {
        if (rank == 0)
            fprintf(stderr, "%s: --idle needs exactly 2 ranks (it has %d)\n", prog, nranks);
        return 2;
    }
#if GPUPORT_BENCH_GPU
    int device, shared;
    if (gpu_mode_wanted(o, &device, &shared)) {
        if (bench_gpu_select(device) != 0) {
            fprintf(stderr, "%s: rank %d cannot use GPU %d\n", prog, rank, device);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        gpu = 1;
    }
#endif
    if (rank == 0)
        printf("# gpuport_bench %s --idle: %s\n", gpuport_version_string(),
               gpu ? "GPU mode" : "host memory");
    fails = bench_idle_run(MPI_COMM_WORLD, gpu, o->idle_pauses, o->idle_pause);
    MPI_Allreduce(MPI_IN_PLACE, &fails, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && fails)
        fprintf(stderr, "%s --idle: %d operation(s) failed\n", prog, fails);
    return fails ? 1 : 0;
}

/* Rank 0 opens the record files before anything is measured; every rank
 * learns whether it could. */
static int open_records(const opts_t *o, int rank, int argc, char **argv)
{
    int ok = 1;

    if (!o->csv && !o->json)
        return 0;
    if (rank == 0)
        ok = bench_out_open(o->csv, o->json, argc, argv) == 0;
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return ok ? 0 : -1;
}

/* 0, or 1 after a message where a record file could not be written. */
static int close_records(int rank)
{
    int bad = rank == 0 && bench_out_close() != 0;

    MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return bad;
}

int main(int argc, char **argv)
{
    opts_t o;
    bench_t b;
    int rank, nranks, failed, records_bad;
    double start;

    if (version_wanted(argc, argv)) {
        if (launcher_rank() == 0)
            printf("gpuport_bench (gpuport) %s\n", gpuport_version_string());
        return 0;
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (parse_args(argc, argv, rank, &o)) {
        MPI_Finalize();
        return 2;
    }
    if (o.help || nranks < 2) {
        if (rank == 0 && o.help)
            usage(stdout, argv[0]);
        else if (rank == 0)
            fprintf(stderr, "%s: needs at least 2 ranks (mpirun -np 2 ...)\n", argv[0]);
        MPI_Finalize();
        return o.help ? 0 : 2;
    }
    if (open_records(&o, rank, argc, argv)) {
        MPI_Finalize();
        return 2;
    }
    start = now_s();
    if (o.idle) {
        int rc = idle_main(&o, rank, nranks, argv[0]);
        rc |= close_records(rank);
        MPI_Finalize();
        return rc;
    }
    if (o.rma) {
        int rc = bench_rma_run(MPI_COMM_WORLD, o.iter_scale, !o.no_mpi, argv[0]);
        if (rank == 0 && rc != 2)
            printf("# after %.1f s\n", now_s() - start);
        rc |= close_records(rank);
        MPI_Finalize();
        return rc;
    }
    if (o.rma_gpu && nranks != 2) {
        if (rank == 0)
            fprintf(stderr, "%s: --rma-gpu needs exactly 2 ranks (it has %d)\n", argv[0], nranks);
        close_records(rank);
        MPI_Finalize();
        return 2;
    }
#if GPUPORT_BENCH_GPU
    int device, shared, mem;
    if (gpu_mode_wanted(&o, &device, &shared)) {
        mem = gpu_mem_bits(&o, rank);
        if (mem < 0) {
            close_records(rank);
            MPI_Finalize();
            return 2;
        }
        failed = run_gpu(&o, rank, nranks, device, shared, mem);
        failed += close_records(rank);
        if (rank == 0)
            printf("\n# %s after %.1f s\n", failed ? "FAILED (see stderr)" : "all verified",
                   now_s() - start);
        MPI_Finalize();
        return failed ? 1 : 0;
    }
#endif
    if (o.small_only || o.bandwidth_only || o.backoff_only || o.memchan_only || o.rma_gpu) {
        if (rank == 0)
            fprintf(stderr, "%s: %s needs GPU mode (a GPU on every rank, no --host)\n", argv[0],
                    o.small_only       ? "--small-only"
                    : o.bandwidth_only ? "--bandwidth-only"
                    : o.backoff_only   ? "--backoff-only"
                    : o.memchan_only   ? "--memchan-only"
                                       : "--rma-gpu");
        close_records(rank);
        MPI_Finalize();
        return 2;
    }
    bench_setup(&b, &o);
    if (rank == 0) {
        print_header(&b);
        bench_out_context("host", "", nranks);
        bench_out_channel(gpuport_channel_transport(b.ch),
                          o.use_malloc ? "malloc + gpuport_mem_register" : "gpuport_mem_alloc");
    }
    {
        gpuport_comm_stats_t s0, s1;
        GP_CHECK(gpuport_comm_stats(b.comm, &s0));
        failed = sweep(&b);
        GP_CHECK(gpuport_comm_stats(b.comm, &s1));
        if (rank == 0)
            printf("\n# rank 0's host operations: %llu carried out by the calling thread "
                   "(GPUPORT_HOST_INLINE), %llu triggers through the proxy\n",
                   (unsigned long long)(s1.host_inline - s0.host_inline),
                   (unsigned long long)(s1.triggers - s0.triggers));
    }
    idle_report(&b);
    bench_teardown(&b);
    records_bad = close_records(rank);
    if (rank == 0) {
        printf("\n# %s after %.1f s\n",
               failed ? "FAILED: data mismatches (see stderr)" : "all sizes verified",
               now_s() - start);
        if (failed)
            fprintf(stderr, "gpuport_bench: %d size(s) failed verification\n", failed);
    }
    MPI_Finalize();
    return failed || records_bad ? 1 : 0;
}
