/*
 * gpuport_comm_destroy is bounded by this rank's own work: it waits for its
 * data to be delivered and acknowledged and for its channels' closes to be
 * answered, never for a peer's own destroy. Two processes (fork, socketpair
 * bootstrap), with two channels each way over the one connection: both
 * sides exchange a put first; then the child (rank 1) puts on both channels
 * (a large put and a small one, with signals, neither flushed) and destroys
 * its communicator at once, while the parent (rank 0) is alive and not
 * destroying; the child then waits on a pipe, as a rank waits in a barrier
 * after its destroy. The parent destroys its own 2 s after the child's
 * returned. Over tcp (two host identities) and on one host (shm, the
 * control):
 *  - the child's destroy returns GPUPORT_OK within BOUND_MS, its own call
 *    timed, logging no warning or error; GPUPORT_TIMEOUT_MS is set far
 *    above, so a destroy that waited for the parent's would take that long;
 *  - every byte the child put before its destroy arrived, compared;
 *  - the parent's channels are then closed (GPUPORT_ERR_CLOSED), and its
 *    destroy returns GPUPORT_OK within BOUND_MS logging no warning or error.
 */
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "capture.h"
#include "check.h"
#include "pair_bootstrap.h"

/* what a destroy that waits for the peer's would take */
#define TIMEOUT_MS 20000
/* a destroy's own steps take milliseconds; this leaves room for a loaded
 * 2-core machine and sanitizers */
#define BOUND_MS 3000
#define LATER_MS 2000 /* the parent's destroy after the child's */
#define HANG_S 60
#define BIG (4u << 20)
#define SMALL (64u << 10)

typedef struct report {
    int32_t status;
    uint32_t ms;
    int32_t warnings; /* WARN and ERROR lines its destroy logged */
} report_t;

typedef struct side {
    gpuport_comm_t comm;
    unsigned char *src, *dst;
    gpuport_mem_t msrc, mdst;
    gpuport_channel_t ch[2]; /* [0]: BIG, [1]: SMALL, both over one connection */
} side_t;

static uint64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static unsigned char pat(int rank, int round, uint64_t i)
{
    return (unsigned char)(rank * 37 + round * 101 + (int)(i * 13 % 251));
}

/* channel c's bytes land at c * BIG of the destination */
static void put_round(side_t *s, int rank, int round)
{
    for (int c = 0; c < 2; c++) {
        uint64_t n = c ? SMALL : BIG, off = (uint64_t)c * BIG;
        for (uint64_t i = 0; i < n; i++)
            s->src[off + i] = pat(rank, round, i + off);
        CHECK_OK(gpuport_channel_put_with_signal(s->ch[c], off, off, n));
    }
}

/* The first of n bytes at dst + off that is not what peer put in round,
 * or n. Not instrumented: the peer's writes (this proxy's receive) are
 * ordered before these reads through another process, which TSan does not
 * see (test/sanitizers/tsan.supp says why). */
__attribute__((no_sanitize_thread)) static uint64_t first_wrong(const unsigned char *dst,
                                                                 int peer, int round,
                                                                 uint64_t off, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        if (dst[off + i] != pat(peer, round, i + off))
            return i;
    return n;
}

static void check_round(side_t *s, int peer, int round, const char *where)
{
    for (int c = 0; c < 2; c++) {
        uint64_t n = c ? SMALL : BIG, off = (uint64_t)c * BIG, i;
        CHECK_OK(gpuport_channel_wait(s->ch[c]));
        i = first_wrong(s->dst, peer, round, off, n);
        CHECK_MSG(i == n, "%s: round %d, channel %d, byte %llu is 0x%02x, rank %d put 0x%02x",
                  where, round, c, (unsigned long long)i, s->dst[off + i], peer,
                  pat(peer, round, i + off));
    }
}

static void side_open(side_t *s, gpuport_bootstrap_t *bs, const char *where)
{
    int peer = 1 - bs->rank;

    memset(s, 0, sizeof(*s));
    CHECK_OK(gpuport_comm_create(bs, &s->comm));
    CHECK_OK(gpuport_mem_alloc(s->comm, 2 * BIG, (void **)&s->src));
    CHECK_OK(gpuport_mem_alloc(s->comm, 2 * BIG, (void **)&s->dst));
    CHECK_OK(gpuport_mem_register(s->comm, s->src, 2 * BIG, &s->msrc));
    CHECK_OK(gpuport_mem_register(s->comm, s->dst, 2 * BIG, &s->mdst));
    for (int c = 0; c < 2; c++)
        CHECK_OK(gpuport_channel_create(s->comm, peer, s->msrc, s->mdst, &s->ch[c]));
    /* a round each way: the connection carried data in both directions */
    put_round(s, bs->rank, 0);
    check_round(s, peer, 0, where);
    for (int c = 0; c < 2; c++)
        CHECK_OK(gpuport_channel_flush(s->ch[c]));
    /* both compared: the next round may land */
    CHECK_OK(bs->barrier(bs->ctx));
}

/* The child: puts, destroys at once, reports, and waits for the parent. */
static int child_main(gpuport_bootstrap_t *bs, const char *where, int report_fd, int done_fd)
{
    side_t s;
    report_t r;
    const char *log;
    uint64_t t0;
    char done;

    side_open(&s, bs, where);
    put_round(&s, 1, 1);
    capture_begin();
    t0 = now_ms();
    r.status = gpuport_comm_destroy(s.comm);
    r.ms = (uint32_t)(now_ms() - t0);
    log = capture_end();
    r.warnings = count_of(log, "WARN") + count_of(log, "ERROR");
    if (r.warnings)
        fprintf(stderr, "%s: the child's destroy logged:\n%s", where, log);
    CHECK(write(report_fd, &r, sizeof(r)) == (ssize_t)sizeof(r));
    CHECK(read(done_fd, &done, 1) == 1);
    return 0;
}

static void parent_main(gpuport_bootstrap_t *bs, pid_t child, const char *where, int report_fd,
                        int done_fd)
{
    struct pollfd pfd = {.fd = report_fd, .events = POLLIN};
    side_t s;
    report_t r;
    gpuport_status_t st;
    const char *log;
    uint64_t t0, ms;

    side_open(&s, bs, where);
    /* the child's last puts arrive while it destroys */
    check_round(&s, 1, 1, where);
    if (poll(&pfd, 1, HANG_S * 1000) != 1) {
        kill(child, SIGKILL);
        CHECK_MSG(0, "%s: the child's gpuport_comm_destroy did not return within %d s", where,
                  HANG_S);
    }
    CHECK(read(report_fd, &r, sizeof(r)) == (ssize_t)sizeof(r));
    CHECK_MSG(r.status == GPUPORT_OK, "%s: the child's destroy returned %d (%s)", where,
              (int)r.status, gpuport_status_string((gpuport_status_t)r.status));
    CHECK_MSG(r.ms < BOUND_MS, "%s: the child's destroy took %u ms with the parent alive and "
              "not destroying (bound %d ms, GPUPORT_TIMEOUT_MS=%d)",
              where, (unsigned)r.ms, BOUND_MS, TIMEOUT_MS);
    CHECK_MSG(r.warnings == 0, "%s: the child's destroy logged %d warning(s) or error(s)", where,
              (int)r.warnings);
    usleep(LATER_MS * 1000);
    capture_begin();
    for (int c = 0; c < 2; c++) {
        int ready = 1;
        CHECK_STATUS(gpuport_channel_status(s.ch[c]), GPUPORT_ERR_CLOSED);
        CHECK_STATUS(gpuport_channel_poll(s.ch[c], &ready), GPUPORT_ERR_CLOSED);
    }
    t0 = now_ms();
    st = gpuport_comm_destroy(s.comm);
    ms = now_ms() - t0;
    log = capture_end();
    CHECK_MSG(st == GPUPORT_OK, "%s: the parent's destroy returned %d (%s)", where, (int)st,
              gpuport_status_string(st));
    CHECK_MSG(ms < BOUND_MS, "%s: the parent's destroy took %llu ms", where,
              (unsigned long long)ms);
    CHECK_MSG(count_of(log, "WARN") == 0 && count_of(log, "ERROR") == 0,
              "%s: the parent logged:\n%s", where, log);
    CHECK(write(done_fd, "d", 1) == 1);
    CHECK_MSG(pair_join(child) == 0, "%s: the child failed", where);
    printf("PASS %s: the child's destroy returned GPUPORT_OK in %u ms, its %u bytes delivered, "
           "with the parent alive and not destroying; the parent's, %d ms later, in %llu ms\n",
           where, (unsigned)r.ms, BIG + SMALL, LATER_MS, (unsigned long long)ms);
}

static void run(int distinct_hosts)
{
    const char *where = distinct_hosts ? "tcp between two host identities" : "one host (shm)";
    gpuport_bootstrap_t bs;
    int report[2], done[2], rank;
    pid_t child;

    CHECK(pipe(report) == 0 && pipe(done) == 0);
    rank = pair_fork(&bs, &child);
    CHECK(rank >= 0);
    if (distinct_hosts)
        CHECK(setenv("GPUPORT_HOST_ID", rank ? "b" : "a", 1) == 0);
    if (rank == 1) {
        close(report[0]);
        close(done[1]);
        _exit(child_main(&bs, where, report[1], done[0]));
    }
    close(report[1]);
    close(done[0]);
    parent_main(&bs, child, where, report[0], done[1]);
    close(report[0]);
    close(done[1]);
    CHECK(unsetenv("GPUPORT_HOST_ID") == 0);
}

int main(void)
{
    char ms[16];

    setvbuf(stdout, NULL, _IONBF, 0);
    snprintf(ms, sizeof(ms), "%d", TIMEOUT_MS);
    CHECK(setenv("GPUPORT_TIMEOUT_MS", ms, 1) == 0);
    CHECK(setenv("GPUPORT_GPU", "off", 1) == 0);
    CHECK(setenv("GPUPORT_LOG_LEVEL", "warn", 1) == 0);
    run(0);
    run(1);
    return 0;
}
