/*
 * A link cut under traffic (run by test/net/link_cut.sh): two ranks on two
 * simulated hosts, one tcp channel each way. Rank 0 sends 4 MiB puts with a
 * signal, rank 1 checks every byte it can see change and answers with a
 * put_with_signal, until netns_mpirun.sh cuts the link. Each rank must then
 * see an operation fail (flush, wait, put) with a transport or peer error,
 * never a timeout or a hang, within GPUPORT_SOCKET_TIMEOUT_MS plus a margin
 * after the cut, and its channel must stay failed. Once the link is back,
 * the ranks compare notes over MPI and rank 0 prints PASS or the failures.
 * Rank set-up is test/mpi/harness.h's; the verdict is rank 0's, which
 * compares both ranks' first errors with the time of the cut.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

#include "../mpi/harness.h"

#define BIG (4u << 20)
#define REPLY (64u << 10)
#define MARGIN_MS 5000 /* scheduling, keepalive rounding, the proxy's idle sleep */
#define RUN_LIMIT_S 120

typedef struct result {
    int32_t failed_check; /* 1: a data or state check failed */
    int32_t status;       /* the first error seen */
    int64_t error_ns;     /* CLOCK_REALTIME of that error */
    int64_t rounds;
    char what[160];
} result_t;

static int64_t now_real(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* what rank 0 sends in a round: every sampled byte changes from round to round */
static unsigned char sent_byte(int64_t round, size_t i)
{
    return (unsigned char)(round * 131 + (int64_t)(i * 7) + (int64_t)(i >> 12));
}

/* The cut time that netns_mpirun.sh writes once the link is down. */
static int64_t read_cut(const char *path)
{
    long long ns = 0;
    FILE *f;

    for (int i = 0; i < 600; i++) {
        f = fopen(path, "r");
        if (f) {
            int ok = fscanf(f, "%lld", &ns) == 1;
            fclose(f);
            if (ok)
                return ns;
        }
        usleep(100000);
    }
    return 0;
}

static void note(result_t *r, gpuport_status_t st, const char *what)
{
    if (r->status)
        return;
    r->status = st;
    r->error_ns = now_real();
    snprintf(r->what, sizeof(r->what), "%s returned %s", what, gpuport_status_string(st));
}

/* Traffic until the first error; rank 0 sends, rank 1 answers. */
static void traffic(gpuport_channel_t ch, unsigned char *src, unsigned char *dst, int rank,
                    result_t *r)
{
    int64_t end = now_real() + (int64_t)RUN_LIMIT_S * 1000000000;
    gpuport_status_t st;

    for (int64_t round = 1; now_real() < end; round++) {
        if (rank == 0) {
            for (size_t i = 0; i < BIG; i += 4096)
                src[i] = sent_byte(round, i);
            if ((st = gpuport_channel_put_with_signal(ch, 0, 0, BIG)) != GPUPORT_OK)
                { note(r, st, "put_with_signal"); return; }
            if ((st = gpuport_channel_flush(ch)) != GPUPORT_OK)
                { note(r, st, "flush"); return; }
            if ((st = gpuport_channel_wait(ch)) != GPUPORT_OK)
                { note(r, st, "wait for the reply"); return; }
            if (dst[0] != (unsigned char)round || dst[REPLY - 1] != (unsigned char)~round) {
                r->failed_check = 1;
                snprintf(r->what, sizeof(r->what), "round %" PRId64 ": reply bytes %u %u",
                         round, dst[0], dst[REPLY - 1]);
                return;
            }
        } else {
            if ((st = gpuport_channel_wait(ch)) != GPUPORT_OK)
                { note(r, st, "wait for the data"); return; }
            for (size_t i = 0; i < BIG; i += 4096) {
                if (dst[i] != sent_byte(round, i)) {
                    r->failed_check = 1;
                    snprintf(r->what, sizeof(r->what),
                             "round %" PRId64 ": byte %zu is %u, expected %u", round, i, dst[i],
                             sent_byte(round, i));
                    return;
                }
            }
            src[0] = (unsigned char)round;
            src[REPLY - 1] = (unsigned char)~round;
            if ((st = gpuport_channel_put_with_signal(ch, 0, 0, REPLY)) != GPUPORT_OK)
                { note(r, st, "put_with_signal of the reply"); return; }
            if ((st = gpuport_channel_flush(ch)) != GPUPORT_OK)
                { note(r, st, "flush of the reply"); return; }
        }
        r->rounds = round;
        if (round == 20 && rank == 0 && getenv("GPUPORT_TEST_READY_FILE")) {
            FILE *f = fopen(getenv("GPUPORT_TEST_READY_FILE"), "w");
            if (f)
                fclose(f);
        }
    }
    snprintf(r->what, sizeof(r->what), "no error within %d s: was the link cut?", RUN_LIMIT_S);
    r->failed_check = 1;
}

int main(int argc, char **argv)
{
    const char *cut_file = getenv("GPUPORT_TEST_CUT_FILE");
    const char *sock_ms = getenv("GPUPORT_SOCKET_TIMEOUT_MS");
    gpuport_comm_t comm;
    gpuport_mem_t smem, dmem;
    gpuport_channel_t ch;
    void *src, *dst;
    result_t mine, all[2];
    int bad = 0;
    int64_t cut_ns, bound_ms;
    gpuport_status_t st;

    harness_init(&argc, &argv);
    if (g_size != 2 || !cut_file || !sock_ms) {
        if (g_rank == 0)
            fprintf(stderr, "test_link_cut: needs 2 ranks, GPUPORT_TEST_CUT_FILE and "
                            "GPUPORT_SOCKET_TIMEOUT_MS (run it through test/net/link_cut.sh)\n");
        MPI_Finalize();
        return 2;
    }
    bound_ms = atoll(sock_ms) + MARGIN_MS;
    memset(&mine, 0, sizeof(mine));
    st = gpuport_comm_init_mpi(MPI_COMM_WORLD, &comm);
    if (st == GPUPORT_OK)
        st = gpuport_mem_alloc(comm, BIG, &src);
    if (st == GPUPORT_OK)
        st = gpuport_mem_alloc(comm, BIG, &dst);
    if (st == GPUPORT_OK)
        st = gpuport_mem_register(comm, src, BIG, &smem);
    if (st == GPUPORT_OK)
        st = gpuport_mem_register(comm, dst, BIG, &dmem);
    if (st == GPUPORT_OK)
        st = gpuport_channel_create(comm, 1 - g_rank, smem, dmem, &ch);
    if (st != GPUPORT_OK) {
        fprintf(stderr, "rank %d: set-up failed: %s\n", g_rank, gpuport_status_string(st));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (strcmp(gpuport_channel_transport(ch), "tcp") != 0) {
        mine.failed_check = 1;
        snprintf(mine.what, sizeof(mine.what), "the channel uses %s, not tcp",
                 gpuport_channel_transport(ch));
    } else {
        traffic(ch, src, dst, g_rank, &mine);
    }
    if (!mine.failed_check) {
        /* the failure sticks, and new operations are refused at once */
        int64_t t0 = now_real();
        if (gpuport_channel_status(ch) == GPUPORT_OK ||
            gpuport_channel_put(ch, 0, 0, 1) == GPUPORT_OK ||
            now_real() - t0 > 1000000000) {
            mine.failed_check = 1;
            snprintf(mine.what + strlen(mine.what), sizeof(mine.what) - strlen(mine.what),
                     "; but afterwards the channel status is %s",
                     gpuport_status_string(gpuport_channel_status(ch)));
        }
    }
    cut_ns = read_cut(cut_file);
    /* The link comes back a few seconds after the cut; MPI's own
     * connections ride it out. */
    MPI_Gather(&mine, sizeof(mine), MPI_BYTE, all, sizeof(mine), MPI_BYTE, 0, MPI_COMM_WORLD);
    gpuport_channel_destroy(ch);
    st = gpuport_comm_destroy(comm);
    if (g_rank == 0) {
        if (!cut_ns) {
            printf("FAIL: the cut file %s never appeared\n", cut_file);
            bad = 1;
        }
        for (int r = 0; r < 2; r++) {
            const result_t *x = &all[r];
            int64_t after_ms = (x->error_ns - cut_ns) / 1000000;
            int ok = !x->failed_check && x->status != 0 && cut_ns &&
                     (x->status == GPUPORT_ERR_TRANSPORT || x->status == GPUPORT_ERR_PEER) &&
                     x->error_ns >= cut_ns && after_ms <= bound_ms;
            printf("%s rank %d: %s, %" PRId64 " ms after the cut (bound %" PRId64 " ms), %" PRId64
                   " rounds before\n",
                   ok ? "ok  " : "FAIL", r, x->what, after_ms, bound_ms, x->rounds);
            bad |= !ok;
        }
        printf("%s link-cut: both ranks saw the broken link as a channel error\n",
               bad ? "FAIL" : "PASS");
    }
    MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return bad;
}
