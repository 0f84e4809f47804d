/*
 * gpuport_comm_destroy is not collective. Two processes (fork, socketpair
 * bootstrap): the child destroys its communicator while the parent is alive
 * and has not called destroy, blocked on a pipe until the child reports.
 * The child's destroy must return GPUPORT_OK within the bound its steps
 * have (the proxy's drain, then the wait for same-host peers' answers: each
 * GPUPORT_TIMEOUT_MS, lowered to TIMEOUT_MS once the channels exist (see
 * short_timeout.h), plus slack for a loaded machine); a destroy that waited for the parent would not return at all,
 * and the parent gives up on it after HANG_S. The parent, then, finds its
 * channel to the child closed (GPUPORT_ERR_CLOSED from every call, a log
 * that says "closed" and never "failed"), and destroys its own
 * communicator within the same bound, while the child is still alive.
 * With a channel open at destroy, with one destroyed before (no channel
 * open, the connection used), and with none ever made; on one host (shm)
 * and between two host identities (tcp; test_destroy_alone times the
 * child's destroy against a long GPUPORT_TIMEOUT_MS). And against that,
 * the child killed (SIGKILL) with its channel open: every call then
 * returns GPUPORT_ERR_PEER, the log says the peer failed, and the parent's
 * destroy returns GPUPORT_OK in the same bound.
 */
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "capture.h"
#include "check.h"
#include "pair_bootstrap.h"
#include "short_timeout.h"

#define TIMEOUT_MS 300
/* the limit while the two processes create the communicator and channels */
#define CREATE_TIMEOUT_MS 30000
/* two steps of GPUPORT_TIMEOUT_MS each, and thread joins and unmapping on
 * a machine that other builds share */
#define BOUND_MS (2 * TIMEOUT_MS + 4000)
#define HANG_S 60

enum { OPEN_CHANNEL, CLOSED_CHANNEL, NO_CHANNEL, KILLED };
static const char *const case_names[] = {"a channel open", "its channel destroyed before",
                                         "no channel ever", "killed with a channel open"};

typedef struct report {
    int32_t status;
    uint32_t ms;
} report_t;

static uint64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Both sides: the communicator, and per case a channel that carried a put
 * and a signal each way. */
typedef struct side {
    gpuport_comm_t comm;
    unsigned char *src, *dst;
    gpuport_mem_t msrc, mdst;
    gpuport_channel_t ch;
} side_t;

static void side_open(side_t *s, gpuport_bootstrap_t *bs, int kind)
{
    int peer = 1 - bs->rank;

    memset(s, 0, sizeof(*s));
    CHECK_OK(gpuport_comm_create(bs, &s->comm));
    if (kind == NO_CHANNEL) {
        test_short_timeout(s->comm, TIMEOUT_MS);
        return;
    }
    CHECK_OK(gpuport_mem_alloc(s->comm, 4096, (void **)&s->src));
    CHECK_OK(gpuport_mem_alloc(s->comm, 4096, (void **)&s->dst));
    memset(s->src, 0x30 + bs->rank, 4096);
    CHECK_OK(gpuport_mem_register(s->comm, s->src, 4096, &s->msrc));
    CHECK_OK(gpuport_mem_register(s->comm, s->dst, 4096, &s->mdst));
    CHECK_OK(gpuport_channel_create(s->comm, peer, s->msrc, s->mdst, &s->ch));
    CHECK_OK(gpuport_channel_put_with_signal(s->ch, 0, 0, 4096));
    CHECK_OK(gpuport_channel_wait(s->ch));
    for (int i = 0; i < 4096; i++)
        CHECK_MSG(s->dst[i] == 0x30 + peer, "byte %d: 0x%02x", i, s->dst[i]);
    CHECK_OK(gpuport_channel_flush(s->ch));
    if (kind == CLOSED_CHANNEL) {
        CHECK_OK(gpuport_channel_destroy(s->ch)); /* waits for the peer's close */
        s->ch = NULL;
    }
    test_short_timeout(s->comm, TIMEOUT_MS);
}

/* The child: destroys first, reports, and lives on until the parent has
 * destroyed its side too. */
static int child_main(gpuport_bootstrap_t *bs, int kind, int report_fd, int done_fd)
{
    side_t s;
    report_t r;
    uint64_t t0;
    char done;

    side_open(&s, bs, kind);
    if (kind == KILLED) {
        pause(); /* until the parent's SIGKILL */
        return 1;
    }
    t0 = now_ms();
    r.status = gpuport_comm_destroy(s.comm);
    r.ms = (uint32_t)(now_ms() - t0);
    CHECK(write(report_fd, &r, sizeof(r)) == (ssize_t)sizeof(r));
    CHECK(read(done_fd, &done, 1) == 1);
    return 0;
}

/* Between hosts a killed peer's socket may end with a reset (it died with
 * bytes unread) instead of an end of stream: then the channel's own state,
 * which status, flush and the operations report, is the reset's
 * GPUPORT_ERR_TRANSPORT, while poll and wait read the peer's failure as
 * GPUPORT_ERR_PEER. Never a close. */
static int death_by_reset(const side_t *s, gpuport_status_t st, int call)
{
    return st == GPUPORT_ERR_TRANSPORT && call != 6 && call != 7 &&
           strcmp(gpuport_channel_transport(s->ch), "tcp") == 0;
}

/* The parent's channel once the child's side ended: by its destroy
 * (GPUPORT_ERR_CLOSED) or its death (GPUPORT_ERR_PEER). Every call says
 * which, the first poll as soon as the word reaches this side (over tcp
 * through this proxy's receiver, so poll rather than a wait of
 * TIMEOUT_MS); a flush with nothing refused after a close is OK (what this
 * side did before it was carried out), after a death the death; the log
 * names what happened and not the other. */
static void after_peer_end(side_t *s, int kind, const char *where)
{
    gpuport_status_t want = kind == KILLED ? GPUPORT_ERR_PEER : GPUPORT_ERR_CLOSED;
    gpuport_status_t st, got[9];
    const char *log;
    int ready = 0;
    uint64_t t0 = now_ms();

    capture_begin();
    while ((st = gpuport_channel_poll(s->ch, &ready)) == GPUPORT_OK && !ready &&
           now_ms() - t0 < HANG_S * 1000)
        usleep(1000);
    got[0] = gpuport_channel_status(s->ch);
    got[1] = gpuport_channel_flush(s->ch);
    got[2] = gpuport_channel_put(s->ch, 0, 0, 64);
    got[3] = gpuport_channel_flush(s->ch);
    got[4] = gpuport_channel_put_value(s->ch, 0, 1);
    got[5] = gpuport_channel_signal(s->ch);
    got[6] = gpuport_channel_wait(s->ch);
    got[7] = gpuport_channel_poll(s->ch, &ready);
    got[8] = gpuport_channel_status(s->ch);
    log = capture_end();
    CHECK_MSG(st == want, "%s, %s: poll returned %d (%s), ready %d; expected %s", where,
              case_names[kind], (int)st, gpuport_status_string(st), ready,
              gpuport_status_string(want));
    for (int i = 0; i < 9; i++)
        CHECK_MSG(got[i] == (i == 1 && kind != KILLED ? GPUPORT_OK : want) ||
                      (kind == KILLED && death_by_reset(s, got[i], i)),
                  "%s, %s: call %d returned %s", where, case_names[kind], i,
                  gpuport_status_string(got[i]));
    if (kind == KILLED)
        CHECK_MSG(strstr(log, "failed") && !strstr(log, "closed its side"), "%s, %s: log: %s",
                  where, case_names[kind], log);
    else /* the refused put's warning; the waits' messages are info */
        CHECK_MSG(strstr(log, "rank 1 closed its side of the channel") &&
                  !strstr(log, "failed") && !strstr(log, "ERROR"),
                  "%s, %s: log: %s", where, case_names[kind], log);
}

/* The parent, KILLED: kills the child once both sides are set up, and
 * reaps it (a SIGKILL, not an exit). */
static void kill_child(pid_t child, const char *where)
{
    int status;

    CHECK(kill(child, SIGKILL) == 0);
    CHECK(waitpid(child, &status, 0) == child);
    CHECK_MSG(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "%s: the child ended with "
              "status 0x%x, not by the SIGKILL", where, status);
}

/* The parent: alive and not destroying until the child reports. */
static void parent_main(gpuport_bootstrap_t *bs, pid_t child, int kind, int report_fd,
                        int done_fd, const char *where)
{
    struct pollfd pfd = {.fd = report_fd, .events = POLLIN};
    side_t s;
    report_t r = {0, 0};
    gpuport_status_t st;
    uint64_t t0, ms;

    side_open(&s, bs, kind);
    if (kind == KILLED) {
        kill_child(child, where);
        after_peer_end(&s, kind, where);
    } else if (poll(&pfd, 1, HANG_S * 1000) != 1) {
        kill(child, SIGKILL);
        CHECK_MSG(0, "%s, %s: the child's gpuport_comm_destroy did not return within %d s "
                  "while the parent, alive, had not called destroy",
                  where, case_names[kind], HANG_S);
    } else {
        CHECK(read(report_fd, &r, sizeof(r)) == (ssize_t)sizeof(r));
        CHECK_MSG(r.status == GPUPORT_OK, "%s, %s: the first destroy returned %d (%s)", where,
                  case_names[kind], (int)r.status,
                  gpuport_status_string((gpuport_status_t)r.status));
        CHECK_MSG(r.ms < BOUND_MS, "%s, %s: the first destroy took %u ms (GPUPORT_TIMEOUT_MS=%d)",
                  where, case_names[kind], (unsigned)r.ms, TIMEOUT_MS);
        if (kind == OPEN_CHANNEL)
            after_peer_end(&s, kind, where);
    }
    t0 = now_ms();
    st = gpuport_comm_destroy(s.comm);
    ms = now_ms() - t0;
    CHECK_MSG(st == GPUPORT_OK, "%s, %s: the second destroy returned %d (%s)", where,
              case_names[kind], (int)st, gpuport_status_string(st));
    CHECK_MSG(ms < BOUND_MS, "%s, %s: the second destroy took %llu ms", where, case_names[kind],
              (unsigned long long)ms);
    if (kind == KILLED) {
        printf("PASS %s, %s: every call returned %s; the destroy returned GPUPORT_OK in %llu "
               "ms\n", where, case_names[kind], gpuport_status_string(GPUPORT_ERR_PEER),
               (unsigned long long)ms);
        return;
    }
    CHECK(write(done_fd, "d", 1) == 1);
    CHECK_MSG(pair_join(child) == 0, "%s, %s: the child failed", where, case_names[kind]);
    printf("PASS %s, %s: the first destroy returned GPUPORT_OK in %u ms with its peer alive and "
           "not destroying; the peer's in %llu ms\n",
           where, case_names[kind], (unsigned)r.ms, (unsigned long long)ms);
}

static void run(int kind, int distinct_hosts)
{
    const char *where = distinct_hosts ? "tcp between two host identities" : "one host";
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
        _exit(child_main(&bs, kind, report[1], done[0]));
    }
    close(report[1]);
    close(done[0]);
    parent_main(&bs, child, kind, report[0], done[1], where);
    close(report[0]);
    close(done[1]);
    CHECK(unsetenv("GPUPORT_HOST_ID") == 0);
}

int main(void)
{
    char ms[16];

    setvbuf(stdout, NULL, _IONBF, 0);
    snprintf(ms, sizeof(ms), "%d", CREATE_TIMEOUT_MS);
    CHECK(setenv("GPUPORT_TIMEOUT_MS", ms, 1) == 0);
    CHECK(setenv("GPUPORT_GPU", "off", 1) == 0);
    for (int hosts = 0; hosts <= 1; hosts++)
        for (int kind = OPEN_CHANNEL; kind <= KILLED; kind++)
            run(kind, hosts);
    return 0;
}
