/*
 * One stopped peer holds no other channel (the proxy's parking,
 * src/proxy/proxy_park.c), over tcp between three ranks with host identities of
 * their own. Rank 0 has channel A to rank 1 and channel B to rank 2. Rank 0
 * stops rank 1 (SIGSTOP), fills A's send queue (GPUPORT_SOCKET_QUEUE=128:
 * 64 operations awaiting acknowledgement) and pushes 500 puts more, which
 * wait at the proxy; meanwhile B's 8-byte ping-pong with rank 2 goes on:
 * every round arrives, and its rate is printed beside the same run's rate
 * before the stop. Then rank 1 runs again: A's flush returns GPUPORT_OK
 * and rank 1 finds what the overlapping puts left (the last one's bytes,
 * so in order) and the value after them. Run with the host calls' own
 * sends off and on (GPUPORT_HOST_INLINE, argv[1]); before parking, B's
 * ping-pong stopped at once with them off.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

#include "gpuport/gpuport_mpi.h"

#define REGION 65536
#define NPUT 500
#define ROUNDS 300
#define VALUE_OFF 4096

#define CHECK(cond, ...)                                                                        \
    do {                                                                                        \
        if (!(cond)) {                                                                          \
            fprintf(stderr, "rank %d: %s:%d: CHECK failed: %s: ", g_rank, __FILE__, __LINE__,   \
                    #cond);                                                                     \
            fprintf(stderr, __VA_ARGS__);                                                       \
            fputc('\n', stderr);                                                                \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                       \
        }                                                                                       \
    } while (0)
#define CHECK_OK(expr)                                                                          \
    do {                                                                                        \
        gpuport_status_t st_ = (expr);                                                          \
        CHECK(st_ == GPUPORT_OK, "%s returned %s", #expr, gpuport_status_string(st_));          \
    } while (0)

static int g_rank;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* B's rounds: rank 0 sends 8 bytes and waits for the answer; rank 2
 * checks them and answers. Rounds per second. */
static double ping_pong(gpuport_channel_t b, unsigned char *src, const volatile unsigned char *dst,
                        int initiator, int first)
{
    double t0 = now_s();

    for (int r = first; r < first + ROUNDS; r++) {
        uint64_t off = (uint64_t)(r % 512) * 8;
        if (initiator) {
            memset(src + off, r & 0xff, 8);
            CHECK_OK(gpuport_channel_put_with_signal(b, off, off, 8));
            CHECK_OK(gpuport_channel_wait(b));
            CHECK(dst[off] == ((r + 1) & 0xff), "round %d: answer %u", r, dst[off]);
        } else {
            CHECK_OK(gpuport_channel_wait(b));
            CHECK(dst[off] == (r & 0xff) && dst[off + 7] == (r & 0xff), "round %d: %u", r,
                  dst[off]);
            memset(src + off, (r + 1) & 0xff, 8);
            CHECK_OK(gpuport_channel_put_with_signal(b, off, off, 8));
        }
    }
    return ROUNDS / (now_s() - t0);
}

/* 1 once /proc says pid is stopped */
static int stopped(pid_t pid)
{
    char path[64], buf[512], *p;
    FILE *f;
    size_t n;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    f = fopen(path, "r");
    if (!f)
        return 0;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    p = strrchr(buf, ')');
    return p && (p[2] == 'T' || p[2] == 't');
}

int main(int argc, char **argv)
{
    int size, pids[3], pid;
    char host[32];
    gpuport_comm_t comm;
    unsigned char *src, *dst;
    gpuport_mem_t msrc, mdst;
    gpuport_channel_t ch;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size == 3, "run on 3 ranks, not %d", size);
    snprintf(host, sizeof(host), "%x", 0x40 + g_rank);
    setenv("GPUPORT_HOST_ID", host, 1);
    setenv("GPUPORT_TRANSPORT", "tcp", 1);
    setenv("GPUPORT_SOCKET_QUEUE", "128", 1);
    setenv("GPUPORT_HOST_INLINE", argc > 1 ? argv[1] : "0", 1);
    pid = (int)getpid();
    MPI_Allgather(&pid, 1, MPI_INT, pids, 1, MPI_INT, MPI_COMM_WORLD);
    src = calloc(1, REGION);
    dst = calloc(1, REGION);
    CHECK(src && dst, "no memory");
    CHECK_OK(gpuport_comm_init_mpi(MPI_COMM_WORLD, &comm));
    CHECK_OK(gpuport_mem_register(comm, src, REGION, &msrc));
    CHECK_OK(gpuport_mem_register(comm, dst, REGION, &mdst));
    if (g_rank == 0) {
        gpuport_channel_t a, b;
        double before, beside;
        CHECK_OK(gpuport_channel_create(comm, 1, msrc, mdst, &a));
        CHECK_OK(gpuport_channel_create(comm, 2, msrc, mdst, &b));
        MPI_Barrier(MPI_COMM_WORLD); /* 1 */
        before = ping_pong(b, src, dst, 1, 0);
        CHECK(kill(pids[1], SIGSTOP) == 0, "SIGSTOP");
        for (int i = 0; i < 5000 && !stopped(pids[1]); i++)
            usleep(1000);
        CHECK(stopped(pids[1]), "rank 1 did not stop");
        /* A: overlapping 8-byte puts into destination 0 from offsets 8i of
         * a source holding i there; then a value and the signal */
        for (uint64_t i = 0; i < NPUT; i++)
            memcpy(src + REGION / 2 + 8 * i, &i, 8);
        for (uint64_t i = 0; i < NPUT; i++)
            CHECK_OK(gpuport_channel_put(a, 0, REGION / 2 + 8 * i, 8));
        CHECK_OK(gpuport_channel_put_value_with_signal(a, VALUE_OFF, 0xfeedull));
        beside = ping_pong(b, src, dst, 1, ROUNDS);
        CHECK_OK(gpuport_channel_status(a));
        printf("B's 8-byte ping-pong (GPUPORT_HOST_INLINE=%s): %.0f rounds/s beside a stopped "
               "peer's full channel, %.0f before (%.0f%%)\n",
               getenv("GPUPORT_HOST_INLINE"), beside, before, 100.0 * beside / before);
        CHECK(kill(pids[1], SIGCONT) == 0, "SIGCONT");
        CHECK_OK(gpuport_channel_flush(a));
        MPI_Barrier(MPI_COMM_WORLD); /* 2 */
        CHECK_OK(gpuport_channel_destroy(a));
        CHECK_OK(gpuport_channel_destroy(b));
    } else {
        uint64_t last, value;
        CHECK_OK(gpuport_channel_create(comm, 0, msrc, mdst, &ch));
        MPI_Barrier(MPI_COMM_WORLD); /* 1 */
        if (g_rank == 1) {
            CHECK_OK(gpuport_channel_wait(ch)); /* stopped and continued in it */
            memcpy(&last, dst, 8);
            memcpy(&value, dst + VALUE_OFF, 8);
            CHECK(last == NPUT - 1, "A's destination holds %llu (the last put: %d)",
                  (unsigned long long)last, NPUT - 1);
            CHECK(value == 0xfeedull, "A's value is 0x%llx", (unsigned long long)value);
        } else {
            ping_pong(ch, src, dst, 0, 0);
            ping_pong(ch, src, dst, 0, ROUNDS);
        }
        MPI_Barrier(MPI_COMM_WORLD); /* 2 */
        CHECK_OK(gpuport_channel_destroy(ch));
    }
    CHECK_OK(gpuport_mem_deregister(msrc));
    CHECK_OK(gpuport_mem_deregister(mdst));
    CHECK_OK(gpuport_comm_destroy(comm));
    if (g_rank == 0)
        printf("PASS head of line (GPUPORT_HOST_INLINE=%s)\n", getenv("GPUPORT_HOST_INLINE"));
    free(src);
    free(dst);
    MPI_Finalize();
    return 0;
}
