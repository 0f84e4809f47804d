/*
 * Ranks built from different gpuport releases must refuse to talk, on every
 * rank, with a message that says who runs what; anything else (a hang in the
 * bootstrap, a crash on a misread record, one rank carrying on) is far worse
 * to debug on a cluster. Checked on the header alone, then end to end: one
 * rank of a local job announces another minor version in the version round.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capture.h"
#include "check.h"
#include "testenv.h"
#include "local_bootstrap.h"
#include "record.h"

/* ---- the header alone ---- */

/* One field of a header set to what another release or program would send. */
enum { BAD_MAGIC, BAD_MAJOR, BAD_MINOR, BAD_LAYOUT, BAD_TYPE, BAD_SIZE, NBAD };
static const char *const bad_names[NBAD] = {"magic", "major", "minor", "layout", "type", "size"};

static void mutate(gpuport_rec_header_t *h, int which)
{
    switch (which) {
    case BAD_MAGIC: h->magic ^= 1; break;
    case BAD_MAJOR: h->version_major++; break;
    case BAD_MINOR: h->version_minor++; break;
    case BAD_LAYOUT: h->layout++; break;
    case BAD_TYPE: h->type = GPUPORT_REC_CHANNEL; break;
    case BAD_SIZE: h->size--; break;
    }
}

static void expect_version_error(int which)
{
    const char *what = bad_names[which];
    gpuport_rec_header_t h;
    char peer_version[64], my_version[64];
    const char *log;
    gpuport_status_t status;

    gpuport_record_header_init(&h, GPUPORT_REC_PROC, sizeof(gpuport_proc_rec_t));
    mutate(&h, which);
    capture_begin();
    status = gpuport_record_check(&h, GPUPORT_REC_PROC, sizeof(gpuport_proc_rec_t), 5);
    log = capture_end();
    CHECK_MSG(status == GPUPORT_ERR_VERSION, "%s: %s", what, gpuport_status_string(status));
    CHECK_MSG(strstr(log, "ERROR") && strstr(log, "rank 5 "), "%s: log lacks the peer: %s", what,
              log);
    if (which == BAD_MAJOR || which == BAD_MINOR) {
        snprintf(peer_version, sizeof(peer_version), "rank 5 runs gpuport %u.%u.%u",
                 h.version_major, h.version_minor, h.version_patch);
        snprintf(my_version, sizeof(my_version), "this rank runs %d.%d.%d", GPUPORT_VERSION_MAJOR,
                 GPUPORT_VERSION_MINOR, GPUPORT_VERSION_PATCH);
        CHECK_MSG(strstr(log, peer_version) && strstr(log, my_version),
                  "%s: log does not name both versions: %s", what, log);
    }
}

static void test_header(void)
{
    gpuport_rec_header_t h;
    char peer_layout[64], my_layout[64];
    const char *log;

    gpuport_record_header_init(&h, GPUPORT_REC_CHANNEL, sizeof(gpuport_channel_rec_t));
    CHECK(h.magic == GPUPORT_RECORD_MAGIC && h.layout == GPUPORT_RECORD_LAYOUT);
    CHECK(h.version_major == GPUPORT_VERSION_MAJOR && h.version_minor == GPUPORT_VERSION_MINOR &&
          h.version_patch == GPUPORT_VERSION_PATCH);
    CHECK(h.type == GPUPORT_REC_CHANNEL && h.size == sizeof(gpuport_channel_rec_t));
    /* sizes must fit the 16-bit field */
    CHECK(sizeof(gpuport_channel_rec_t) <= UINT16_MAX && sizeof(gpuport_proc_rec_t) <= UINT16_MAX);

    capture_begin();
    CHECK_OK(gpuport_record_check(&h, GPUPORT_REC_CHANNEL, sizeof(gpuport_channel_rec_t), 1));
    gpuport_record_header_init(&h, GPUPORT_REC_PROC, sizeof(gpuport_proc_rec_t));
    CHECK_OK(gpuport_record_check(&h, GPUPORT_REC_PROC, sizeof(gpuport_proc_rec_t), 1));
    /* patch releases keep layouts */
    h.version_patch = GPUPORT_VERSION_PATCH + 3;
    CHECK_OK(gpuport_record_check(&h, GPUPORT_REC_PROC, sizeof(gpuport_proc_rec_t), 1));
    log = capture_end();
    CHECK_MSG(log[0] == '\0', "a good header logged: %s", log);

    for (int which = 0; which < NBAD; which++)
        expect_version_error(which);

    /* a layout mismatch names both layouts */
    gpuport_record_header_init(&h, GPUPORT_REC_PROC, sizeof(gpuport_proc_rec_t));
    h.layout = GPUPORT_RECORD_LAYOUT + 1;
    capture_begin();
    CHECK_STATUS(gpuport_record_check(&h, GPUPORT_REC_PROC, sizeof(gpuport_proc_rec_t), 2),
                 GPUPORT_ERR_VERSION);
    log = capture_end();
    snprintf(peer_layout, sizeof(peer_layout), "(record layout %d)", GPUPORT_RECORD_LAYOUT + 1);
    snprintf(my_layout, sizeof(my_layout), "(record layout %d)", GPUPORT_RECORD_LAYOUT);
    CHECK_MSG(strstr(log, peer_layout) && strstr(log, my_layout), "layouts not named: %s", log);
}

/* ---- end to end through gpuport_comm_create ---- */

/* Wraps a rank's bootstrap; with skew set, the header it contributes to the
 * first allgather (the version round) claims the next minor version. */
typedef struct {
    gpuport_bootstrap_t inner;
    int skew;
    int allgathers;
} wrap_ctx_t;

static atomic_int destroys;

static gpuport_status_t w_allgather(void *ctx, const void *send, void *recv, size_t bytes)
{
    wrap_ctx_t *w = ctx;
    gpuport_rec_header_t h;

    if (w->skew && w->allgathers++ == 0) {
        CHECK(bytes == sizeof(h));
        memcpy(&h, send, sizeof(h));
        h.version_minor++;
        return w->inner.allgather(w->inner.ctx, &h, recv, bytes);
    }
    return w->inner.allgather(w->inner.ctx, send, recv, bytes);
}

static gpuport_status_t w_barrier(void *ctx)
{
    wrap_ctx_t *w = ctx;
    return w->inner.barrier(w->inner.ctx);
}

static gpuport_status_t w_send(void *ctx, int peer, int tag, const void *buf, size_t bytes)
{
    wrap_ctx_t *w = ctx;
    return w->inner.send(w->inner.ctx, peer, tag, buf, bytes);
}

static gpuport_status_t w_recv(void *ctx, int peer, int tag, void *buf, size_t bytes)
{
    wrap_ctx_t *w = ctx;
    return w->inner.recv(w->inner.ctx, peer, tag, buf, bytes);
}

static void w_destroy(void *ctx)
{
    wrap_ctx_t *w = ctx;
    w->inner.destroy(w->inner.ctx);
    free(w);
    atomic_fetch_add(&destroys, 1);
}

/* 1 if some line of log contains tag, a and b */
static int line_has(const char *log, const char *tag, const char *a, const char *b)
{
    char line[1024];

    for (const char *p = log; *p;) {
        size_t len = strcspn(p, "\n");
        if (len < sizeof(line)) {
            memcpy(line, p, len);
            line[len] = '\0';
            if (strstr(line, tag) && strstr(line, a) && strstr(line, b))
                return 1;
        }
        p += len + (p[len] == '\n');
    }
    return 0;
}

typedef struct {
    int skew_rank; /* -1: none */
    gpuport_status_t result[8];
} run_t;

static int create_rank(int rank, int size, gpuport_bootstrap_t *bs, void *arg)
{
    run_t *run = arg;
    wrap_ctx_t *w = calloc(1, sizeof(*w));
    gpuport_bootstrap_t wbs = *bs;
    static char not_a_comm;
    gpuport_comm_t comm = (gpuport_comm_t)&not_a_comm; /* NULL after a failure (gpuport.h) */

    (void)size;
    CHECK(w != NULL && rank < 8);
    w->inner = *bs;
    w->skew = rank == run->skew_rank;
    wbs.ctx = w;
    wbs.allgather = w_allgather;
    wbs.barrier = w_barrier;
    wbs.send = w_send;
    wbs.recv = w_recv;
    wbs.destroy = w_destroy;
    run->result[rank] = gpuport_comm_create(&wbs, &comm);
    if (run->result[rank] != GPUPORT_OK) {
        CHECK(comm == NULL);
        return 0;
    }
    CHECK(gpuport_comm_rank(comm) == rank && gpuport_comm_size(comm) == size);
    run->result[rank] = gpuport_comm_destroy(comm);
    return 0;
}

static void test_skew(int size)
{
    run_t run = {.skew_rank = 1};
    char peer[96], mine[64], tag[32];
    const char *log;

    atomic_store(&destroys, 0);
    capture_begin();
    CHECK(local_run(size, create_rank, &run) == 0);
    log = capture_end();
    CHECK_MSG(atomic_load(&destroys) == size, "%d of %d bootstraps destroyed",
              atomic_load(&destroys), size);
    CHECK_MSG(count_of(log, "ERROR") == size, "expected one error per rank:\n%s", log);
    snprintf(peer, sizeof(peer), "rank 1 runs gpuport %d.%d.%d", GPUPORT_VERSION_MAJOR,
             GPUPORT_VERSION_MINOR + 1, GPUPORT_VERSION_PATCH);
    snprintf(mine, sizeof(mine), "this rank runs %d.%d.%d", GPUPORT_VERSION_MAJOR,
             GPUPORT_VERSION_MINOR, GPUPORT_VERSION_PATCH);
    for (int r = 0; r < size; r++) {
        CHECK_MSG(run.result[r] == GPUPORT_ERR_VERSION, "%d ranks, rank %d: %s", size, r,
                  gpuport_status_string(run.result[r]));
        /* each rank's own log line (its rank and level in the line's prefix) names
         * the skewed rank and both versions */
        snprintf(tag, sizeof(tag), " gpuport r%d ERROR ", r);
        CHECK_MSG(line_has(log, tag, peer, mine),
                  "%d ranks, rank %d: no message naming rank 1 and both versions in:\n%s", size, r,
                  log);
    }
}

static void test_match(int size)
{
    run_t run = {.skew_rank = -1};
    const char *log;

    atomic_store(&destroys, 0);
    capture_begin();
    CHECK(local_run(size, create_rank, &run) == 0);
    log = capture_end();
    for (int r = 0; r < size; r++)
        CHECK_MSG(run.result[r] == GPUPORT_OK, "%d ranks, rank %d: %s\n%s", size, r,
                  gpuport_status_string(run.result[r]), log);
    CHECK(atomic_load(&destroys) == size);
    CHECK_MSG(!strstr(log, "ERROR"), "a matching run logged errors:\n%s", log);
}

int main(void)
{
    testenv_clear_gpuport();
    setenv("GPUPORT_TIMEOUT_MS", "20000", 1);
    alarm(30); /* a rank stuck in the bootstrap is a failure, not a hang */
    test_header();
    test_match(2);
    test_skew(2);
    test_skew(3);
    test_match(3);
    printf("record: all checks passed\n");
    return 0;
}
