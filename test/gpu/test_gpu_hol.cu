/*
 * Head of line in the device FIFO: a channel whose transport has no room
 * holds none of the other channels' kernel triggers (the proxy's parking,
 * src/proxy/proxy_park.c; docs/ARCHITECTURE.md, "Parking"). The device-FIFO
 * version of test/mpi/test_mpi_hol.c. Two processes (gpu_pair.h;
 * GPUPORT_TEST_ONE_GPU=1 puts both on GPU 0), one communicator each, every
 * region gpuport_mem_alloc_device memory (VMM: tcp and cuda_ipc carry it).
 *
 * Rank 0's two port channels share its one device FIFO and proxy:
 *  - A, to rank 1, over tcp with GPUPORT_SOCKET_QUEUE=128 (64 operations
 *    may await acknowledgement);
 *  - B, to itself, over cuda_ipc: a copy by rank 0's flusher that completes
 *    without rank 1's process running.
 * A transport is chosen per communicator and peer, not per channel (one
 * connection per peer, GPUPORT_TRANSPORT for the whole communicator), so B
 * cannot go to rank 1 over cuda_ipc beside a tcp A. The processes get host
 * identities of their own (GPUPORT_HOST_ID) under GPUPORT_TRANSPORT=auto:
 * rank 1 is then reachable over tcp only, and rank 0 itself over cuda_ipc,
 * auto's first choice for GPU memory.
 *
 * Rank 0 runs B's put + flush rounds (4 KiB each, every byte checked on the
 * device after its flush) and takes their rate. It stops rank 1 (SIGSTOP),
 * and a kernel pushes NPUT overlapping 8-byte puts on A into destination
 * offset 0 (put i from a source holding i), then a put_value_with_signal:
 * more than A's queue takes and more than the FIFO holds (GPUPORT_FIFO_SIZE
 * 128), so the kernel ends only because the proxy parks A's triggers; fewer
 * of them than pushed must have been carried out. Then a kernel runs B's
 * rounds again: every round must complete within a generous deadline while
 * rank 1 is still stopped (without parking they would wait behind A's
 * triggers in the FIFO), and its rate is printed beside the rate before
 * the stop (no ratio is asserted). A is still OK. Rank 0 lets rank 1 run again
 * (SIGCONT): a kernel's flush on A and the host's flush return GPUPORT_OK,
 * and rank 0 compares B's destination (its own memory: the last round of
 * each slot). Rank 1, whose host wait for A's signal spans the stop, checks
 * A's destination: the last put's bytes (so in order), the value, zeros
 * elsewhere.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gpu_check.h"
#include "gpu_pair.h"
#include "gpuport/gpuport_device.h"

#define REGION (64u << 10)
#define NPUT 500
#define A_SRC (REGION / 2) /* put i reads 8 bytes at A_SRC + 8 i, which hold i */
#define VALUE_OFF 4096
#define VALUE 0xfeedull
#define FIFO "128"
#define BSLOT 4096u
#define BSLOTS (REGION / BSLOT)
#define WARM 50     /* B's rounds before the measured ones */
#define ROUNDS 1000 /* B's rounds measured, before the stop and during it */
#define DEADLINE_S 30.0

typedef struct shared_host { /* pinned, mapped: the kernels report here */
    volatile unsigned long long progress;
    volatile unsigned int bad;
    volatile int status;
    volatile int done;
} shared_host_t;

static pid_t g_child;
static shared_host_t *g_host, *g_host_d;
static cudaStream_t g_stream;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const char *sname(int st)
{
    return gpuport_status_string((gpuport_status_t)st);
}

/* A failed check exits the parent: the child, perhaps stopped, must not
 * outlive it. */
static void kill_child(void)
{
    if (g_child > 0)
        kill(g_child, SIGKILL);
}

/* A kernel that did not end by its deadline: the process cannot be taken
 * down in order around it. */
__attribute__((noreturn)) static void hung(const char *what)
{
    printf("FAIL head of line: %s has not ended %.0f s after its launch (%llu done, status %s)\n",
           what, DEADLINE_S, (unsigned long long)g_host->progress, sname(g_host->status));
    kill_child();
    _exit(1);
}

static void host_reset(void)
{
    memset((void *)g_host, 0, sizeof(*g_host));
}

/* Waits for the kernel reporting in g_host to say it is done; its time in
 * seconds from t0. A kernel that does not end fails the test. */
static double wait_done(const char *what, double t0)
{
    double t;

    while (!g_host->done) {
        if (now_s() - t0 > DEADLINE_S)
            hung(what);
        usleep(50);
    }
    t = now_s() - t0;
    CUDA_CHECK(cudaStreamSynchronize(g_stream));
    return t;
}

__host__ __device__ static unsigned char bpat(uint64_t round, uint32_t k)
{
    uint64_t x = (round + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)(k + 1) * 0xbf58476d1ce4e5b9ull;
    return (unsigned char)(x >> 56);
}

/* A: NPUT overlapping puts into destination offset 0, then a value and the
 * signal, pushed in order by one thread. */
__global__ void a_fill(gpuport_port_channel_dev_t a, shared_host_t *host)
{
    int st = 0;
    for (uint64_t i = 0; i < NPUT && !st; i++) {
        st = gpuport_put(&a, 0, A_SRC + 8 * i, 8);
        if (!st)
            host->progress = i + 1;
    }
    if (!st)
        st = gpuport_put_value_with_signal(&a, VALUE_OFF, VALUE);
    host->status = st;
    __threadfence_system();
    host->done = 1;
}

__global__ void a_flush(gpuport_port_channel_dev_t a, shared_host_t *host)
{
    host->status = gpuport_flush(&a);
    __threadfence_system();
    host->done = 1;
}

/* B: rounds first .. first + n - 1. The block fills the round's 4 KiB slot
 * of the source, thread 0 puts it into the same slot of the destination
 * and flushes, the block compares the destination. A slot is written again
 * BSLOTS rounds later, long after its flush. */
__global__ void b_rounds(gpuport_port_channel_dev_t b, unsigned char *src,
                         const volatile unsigned char *dst, uint64_t first, uint64_t n,
                         shared_host_t *host)
{
    __shared__ int st;
    __shared__ unsigned int bad;

    if (threadIdx.x == 0) {
        st = 0;
        bad = 0;
    }
    __syncthreads();
    for (uint64_t r = first; r < first + n; r++) {
        uint32_t off = (uint32_t)(r % BSLOTS) * BSLOT;
        for (uint32_t k = threadIdx.x; k < BSLOT; k += blockDim.x)
            src[off + k] = bpat(r, k);
        __threadfence_system();
        __syncthreads();
        if (threadIdx.x == 0) {
            int s = gpuport_put(&b, off, off, BSLOT);
            st = s ? s : gpuport_flush(&b);
        }
        __syncthreads();
        if (st)
            break;
        for (uint32_t k = threadIdx.x; k < BSLOT; k += blockDim.x)
            if (dst[off + k] != bpat(r, k))
                atomicAdd(&bad, 1u);
        __syncthreads();
        if (threadIdx.x == 0) {
            host->bad = bad;
            host->progress = r - first + 1;
        }
    }
    if (threadIdx.x == 0) {
        host->bad = bad;
        host->status = st;
        __threadfence_system();
        host->done = 1;
    }
}

/* B's rounds from first: rounds per second. All must complete with every
 * byte where the flush said. */
static double b_run(gpuport_port_channel_dev_t b, unsigned char *src, unsigned char *dst,
                    uint64_t first, uint64_t n, const char *what)
{
    double t;

    host_reset();
    t = now_s();
    b_rounds<<<1, 256, 0, g_stream>>>(b, src, dst, first, n, g_host_d);
    CUDA_CHECK(cudaGetLastError());
    t = wait_done(what, t);
    CHECK_MSG(g_host->status == GPUPORT_OK && g_host->progress == n,
              "%s: %llu of %llu rounds, then %s", what, (unsigned long long)g_host->progress,
              (unsigned long long)n, sname(g_host->status));
    CHECK_MSG(g_host->bad == 0, "%s: %u bytes not in the destination after their flush", what,
              g_host->bad);
    return (double)n / t;
}

/* Triggers the proxy carried out, once the count has not moved for 200 ms
 * (at most 3 s): the proxy has taken what it could. */
static unsigned long long carried_settled(gpuport_comm_t comm)
{
    gpuport_comm_stats_t st;
    unsigned long long last = ~0ull;
    double t0 = now_s(), still = now_s();

    for (;;) {
        CHECK_OK(gpuport_comm_stats(comm, &st));
        if (st.triggers != last) {
            last = st.triggers;
            still = now_s();
        } else if (now_s() - still >= 0.2 || now_s() - t0 >= 3.0) {
            return last;
        }
        usleep(10000);
    }
}

static int child_stopped(void)
{
    char path[64], buf[512], *p;
    FILE *f;
    size_t n;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)g_child);
    f = fopen(path, "r");
    if (!f)
        return 0;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    p = strrchr(buf, ')');
    return p && (p[2] == 'T' || p[2] == 't');
}

/* Rank 1: A's destination after the signal: the last overlapping put's
 * bytes at 0, the value at VALUE_OFF, zeros elsewhere. */
static void check_a(const unsigned char *dst)
{
    unsigned char *h = (unsigned char *)malloc(REGION);
    uint64_t last, value;

    CHECK(h);
    CUDA_CHECK(cudaMemcpy(h, dst, REGION, cudaMemcpyDeviceToHost));
    memcpy(&last, h, 8);
    memcpy(&value, h + VALUE_OFF, 8);
    CHECK_MSG(last == NPUT - 1, "A's destination holds %llu (the last put: %d): out of order",
              (unsigned long long)last, NPUT - 1);
    CHECK_MSG(value == VALUE, "A's value is 0x%llx, expected 0x%llx", (unsigned long long)value,
              VALUE);
    for (uint32_t i = 8; i < REGION; i++)
        CHECK_MSG((i >= VALUE_OFF && i < VALUE_OFF + 8) || h[i] == 0,
                  "A's destination byte %u is 0x%02x (nothing was put there)", i, h[i]);
    free(h);
}

/* Rank 0: B's destination at the end: each slot holds its last round. */
static void check_b(const unsigned char *dst, uint64_t rounds)
{
    unsigned char *h = (unsigned char *)malloc(REGION);

    CHECK(h);
    CUDA_CHECK(cudaMemcpy(h, dst, REGION, cudaMemcpyDeviceToHost));
    for (uint32_t s = 0; s < BSLOTS; s++) {
        uint64_t r = rounds - 1 - (rounds - 1 + BSLOTS - s) % BSLOTS; /* last r = s mod BSLOTS */
        for (uint32_t k = 0; k < BSLOT; k++)
            CHECK_MSG(h[s * BSLOT + k] == bpat(r, k),
                      "B's destination slot %u byte %u is 0x%02x, round %llu put 0x%02x", s, k,
                      h[s * BSLOT + k], (unsigned long long)r, bpat(r, k));
    }
    free(h);
}

int main(void)
{
    gpuport_bootstrap_t bs;
    gpuport_comm_t comm;
    gpuport_mem_t msrc, mdst, mbsrc, mbdst;
    gpuport_channel_t a, b = NULL;
    gpuport_port_channel_dev_t adev, bdev;
    unsigned char *src, *dst, *bsrc = NULL, *bdst = NULL;
    int rank;

    setvbuf(stdout, NULL, _IONBF, 0);
    rank = gpu_pair_fork(&bs, &g_child);
    if (rank == 1) {
        /* never outlive a parent that failed, stopped or not */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() == 1)
            _exit(1);
        alarm(300);
    } else {
        atexit(kill_child);
    }
    /* hosts of their own: rank 1 over tcp only, rank 0 to itself over cuda_ipc */
    setenv("GPUPORT_HOST_ID", rank ? "b1" : "a0", 1);
    setenv("GPUPORT_TRANSPORT", "auto", 1);
    setenv("GPUPORT_SOCKET_QUEUE", "128", 1);
    setenv("GPUPORT_FIFO_SIZE", FIFO, 1);
    setenv("GPUPORT_TIMEOUT_MS", "60000", 1); /* past every deadline here */
    if (rank == 0)
        printf("test_gpu_hol: channel A to rank 1 over tcp (GPUPORT_SOCKET_QUEUE=128), channel B "
               "to rank 0 itself over cuda_ipc, one device FIFO of %s slots\n", FIFO);

    CHECK_OK(gpuport_comm_create(&bs, &comm));
    CHECK_OK(gpuport_mem_alloc_device(comm, REGION, (void **)&src));
    CHECK_OK(gpuport_mem_alloc_device(comm, REGION, (void **)&dst));
    CUDA_CHECK(cudaMemset(src, 0, REGION));
    CUDA_CHECK(cudaMemset(dst, 0, REGION));
    if (rank == 0) {
        uint64_t *h = (uint64_t *)malloc(NPUT * 8);
        CHECK(h);
        for (uint64_t i = 0; i < NPUT; i++)
            h[i] = i;
        CUDA_CHECK(cudaMemcpy(src + A_SRC, h, NPUT * 8, cudaMemcpyHostToDevice));
        free(h);
        CHECK_OK(gpuport_mem_alloc_device(comm, REGION, (void **)&bsrc));
        CHECK_OK(gpuport_mem_alloc_device(comm, REGION, (void **)&bdst));
        CUDA_CHECK(cudaMemset(bsrc, 0, REGION));
        CUDA_CHECK(cudaMemset(bdst, 0, REGION));
    }
    CUDA_CHECK(cudaDeviceSynchronize());
    CHECK_OK(gpuport_mem_register(comm, src, REGION, &msrc));
    CHECK_OK(gpuport_mem_register(comm, dst, REGION, &mdst));
    CHECK_OK(gpuport_channel_create(comm, 1 - rank, msrc, mdst, &a));
    CHECK_MSG(strcmp(gpuport_channel_transport(a), "tcp") == 0,
              "channel A to rank %d uses %s, not tcp", 1 - rank, gpuport_channel_transport(a));

    if (rank == 1) {
        CHECK_OK(bs.barrier(bs.ctx)); /* 1: channels made */
        /* stopped and continued in it */
        CHECK_OK(gpuport_channel_wait(a));
        check_a(dst);
        printf("rank 1: A's destination holds put %d's bytes and the value after them\n",
               NPUT - 1);
        CHECK_OK(bs.barrier(bs.ctx)); /* 2: checked */
        CHECK_OK(gpuport_channel_destroy(a));
        CHECK_OK(gpuport_comm_destroy(comm));
        gpu_pair_join(rank, g_child, 0);
    }

    {
        double before, beside;
        unsigned long long t0, carried;
        int wst;

        CHECK_OK(gpuport_mem_register(comm, bsrc, REGION, &mbsrc));
        CHECK_OK(gpuport_mem_register(comm, bdst, REGION, &mbdst));
        CHECK_OK(gpuport_channel_create(comm, 0, mbsrc, mbdst, &b)); /* to itself: one call */
        CHECK_MSG(strcmp(gpuport_channel_transport(b), "cuda_ipc") == 0,
                  "channel B to rank 0 itself uses %s, not cuda_ipc",
                  gpuport_channel_transport(b));
        CHECK_OK(gpuport_channel_device(a, &adev));
        CHECK_OK(gpuport_channel_device(b, &bdev));
        CUDA_CHECK(cudaHostAlloc((void **)&g_host, sizeof(*g_host), cudaHostAllocMapped));
        CUDA_CHECK(cudaHostGetDevicePointer((void **)&g_host_d, (void *)g_host, 0));
        CUDA_CHECK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
        CHECK_OK(bs.barrier(bs.ctx)); /* 1 */

        b_run(bdev, bsrc, bdst, 0, WARM, "B's first rounds");
        before = b_run(bdev, bsrc, bdst, WARM, ROUNDS, "B's rounds before the stop");

        CHECK(kill(g_child, SIGSTOP) == 0);
        CHECK(waitpid(g_child, &wst, WUNTRACED) == g_child && WIFSTOPPED(wst));
        CHECK_MSG(child_stopped(), "rank 1 did not stop");

        t0 = carried_settled(comm);
        host_reset();
        a_fill<<<1, 1, 0, g_stream>>>(adev, g_host_d);
        CUDA_CHECK(cudaGetLastError());
        /* with the FIFO smaller than NPUT, this ends only if the proxy
         * takes A's triggers out of it */
        wait_done("the kernel pushing A's puts (the device FIFO waited behind A)", now_s());
        CHECK_MSG(g_host->status == GPUPORT_OK && g_host->progress == NPUT,
                  "A's pushes: %llu of %d puts, then %s", (unsigned long long)g_host->progress,
                  NPUT, sname(g_host->status));
        carried = carried_settled(comm) - t0;
        printf("A: %d puts and a value pushed by a kernel into a FIFO of %s slots beside a "
               "stopped peer; %llu of %d carried out, the rest parked\n",
               NPUT, FIFO, carried, NPUT + 1);
        CHECK_MSG(carried < NPUT + 1, "all %llu of A's triggers were carried out while rank 1 "
                  "was stopped: its queue never filled, nothing was shown", carried);

        beside = b_run(bdev, bsrc, bdst, WARM + ROUNDS, ROUNDS,
                       "B's rounds beside the stopped peer's full channel A");
        CHECK_MSG(child_stopped(), "rank 1 ran again before B's rounds ended");
        CHECK_OK(gpuport_channel_status(a));
        printf("B's put + flush rounds (4 KiB, device FIFO): %.0f rounds/s beside a stopped "
               "peer's full channel, %.0f before (%.0f%%)\n",
               beside, before, 100.0 * beside / before);

        CHECK(kill(g_child, SIGCONT) == 0);
        host_reset();
        a_flush<<<1, 1, 0, g_stream>>>(adev, g_host_d);
        CUDA_CHECK(cudaGetLastError());
        wait_done("the kernel flushing A after rank 1 ran again", now_s());
        CHECK_MSG(g_host->status == GPUPORT_OK, "a kernel's flush of A after the stop returned "
                  "%s", sname(g_host->status));
        CHECK_OK(gpuport_channel_flush(a));
        CHECK_OK(gpuport_channel_status(a));
        check_b(bdst, WARM + 2 * ROUNDS);
        CHECK_OK(bs.barrier(bs.ctx)); /* 2: rank 1 checked A */
    }

    CHECK_OK(gpuport_channel_destroy(b));
    CHECK_OK(gpuport_channel_destroy(a));
    CHECK_OK(gpuport_comm_destroy(comm));
    cudaStreamDestroy(g_stream);
    cudaFreeHost((void *)g_host);
    {
        pid_t child = g_child;
        g_child = 0; /* it ends by itself now: nothing to kill */
        gpu_pair_join(rank, child, 0);
    }
    printf("PASS head of line: B's %d put + flush rounds over cuda_ipc beside A's parked puts over "
           "tcp in one device FIFO; A's %d puts in order after the stop\n",
           ROUNDS, NPUT);
    return 0;
}
