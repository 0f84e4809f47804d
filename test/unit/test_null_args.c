/*
 * Every public call of gpuport.h and gpuport_device.h with NULL handles and
 * NULL output pointers: each returns GPUPORT_ERR_INVALID_ARG and logs a
 * message naming the call (and, for an output pointer, the argument); the
 * getters that return no status give their documented "none" values; and
 * nothing crashes. A failed gpuport_comm_create leaves NULL in *comm_p, so
 * a program that ignores its status (the README's old fragment under
 * GPUPORT_TRANSPORT=foo) meets these refusals instead of a wild handle.
 * The entry points behind the inline calls (gpuport_comm_create_v, _stats_v,
 * gpuport_channel_device_v), given this header's layouts, refuse the same.
 * The MPI bootstrap's two calls are checked by test/mpi/test_mpi_null.c.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "check.h"
#include "gpuport/gpuport_device.h"
#include "local_bootstrap.h"

/* expr must return GPUPORT_ERR_INVALID_ARG and log a line naming `call`
 * and `what` (the argument at fault; "" when the call's name is enough) */
#define REFUSED(expr, call, what)                                                               \
    do {                                                                                        \
        const char *log_;                                                                       \
        capture_begin();                                                                        \
        gpuport_status_t st_ = (expr);                                                          \
        log_ = capture_end();                                                                   \
        CHECK_MSG(st_ == GPUPORT_ERR_INVALID_ARG, "%s returned %d (%s)", #expr, (int)st_,       \
                  gpuport_status_string(st_));                                                  \
        CHECK_MSG(strstr(log_, call) && strstr(log_, what),                                     \
                  "%s: the log does not name %s and \"%s\": %s", #expr, call, what, log_);      \
    } while (0)

static int destroyed;

static gpuport_status_t fake_allgather(void *ctx, const void *send, void *recv, size_t bytes)
{
    (void)ctx;
    memcpy(recv, send, bytes);
    return GPUPORT_OK;
}

static gpuport_status_t fake_barrier(void *ctx)
{
    (void)ctx;
    return GPUPORT_OK;
}

static gpuport_status_t fake_send(void *ctx, int peer, int tag, const void *buf, size_t bytes)
{
    (void)ctx, (void)peer, (void)tag, (void)buf, (void)bytes;
    return GPUPORT_ERR_NOT_SUPPORTED;
}

static gpuport_status_t fake_recv(void *ctx, int peer, int tag, void *buf, size_t bytes)
{
    (void)ctx, (void)peer, (void)tag, (void)buf, (void)bytes;
    return GPUPORT_ERR_NOT_SUPPORTED;
}

static void fake_destroy(void *ctx)
{
    (void)ctx;
    destroyed++;
}

/* one rank alone: every exchange is a copy of its own contribution */
static gpuport_bootstrap_t fake_bootstrap(void)
{
    gpuport_bootstrap_t bs = {
        .ctx = NULL,
        .rank = 0,
        .size = 1,
        .local_rank = 0,
        .local_size = 1,
        .allgather = fake_allgather,
        .barrier = fake_barrier,
        .send = fake_send,
        .recv = fake_recv,
        .destroy = fake_destroy,
    };
    return bs;
}

/* Creation that fails leaves *comm_p NULL, and the bootstrap is destroyed
 * once, whichever argument was wrong. */
static void failed_creation(void)
{
    gpuport_bootstrap_t bs = fake_bootstrap();
    gpuport_comm_t comm = (gpuport_comm_t)&bs; /* anything but NULL */
    const char *log;
    void *p = NULL;
    gpuport_mem_t mem = NULL;
    gpuport_channel_t ch = NULL;

    REFUSED(gpuport_comm_create(NULL, &comm), "gpuport_comm_create", "bootstrap");
    CHECK_MSG(comm == NULL, "comm is %p after a failed create", (void *)comm);
    comm = (gpuport_comm_t)&bs;
    REFUSED(gpuport_comm_create_v(GPUPORT_BOOTSTRAP_LAYOUT, NULL, &comm), "gpuport_comm_create",
            "bootstrap");
    CHECK_MSG(comm == NULL, "comm is %p after a failed create", (void *)comm);

    destroyed = 0;
    REFUSED(gpuport_comm_create(&bs, NULL), "gpuport_comm_create", "comm_p");
    CHECK_MSG(destroyed == 1, "the bootstrap was destroyed %d times", destroyed);

    /* a bad value in the environment: the failure the README's fragment
     * ignored; then its next calls, with the NULL left in comm */
    destroyed = 0;
    comm = (gpuport_comm_t)&bs;
    CHECK(setenv("GPUPORT_TRANSPORT", "foo", 1) == 0);
    capture_begin();
    CHECK_STATUS(gpuport_comm_create(&bs, &comm), GPUPORT_ERR_INVALID_CONFIG);
    log = capture_end();
    CHECK(unsetenv("GPUPORT_TRANSPORT") == 0);
    CHECK_MSG(comm == NULL, "comm is %p after a failed create", (void *)comm);
    CHECK_MSG(strstr(log, "GPUPORT_TRANSPORT") && strstr(log, "foo"), "log: %s", log);
    CHECK_MSG(destroyed == 1, "the bootstrap was destroyed %d times", destroyed);
    REFUSED(gpuport_mem_alloc(comm, 4096, &p), "gpuport_mem_alloc", "comm");
    REFUSED(gpuport_mem_register(comm, &bs, sizeof(bs), &mem), "gpuport_mem_register", "comm");
    REFUSED(gpuport_channel_create(comm, 0, mem, mem, &ch), "gpuport_channel_create", "comm");
    REFUSED(gpuport_channel_put_with_signal(ch, 0, 0, 8), "gpuport_channel_put", "");
    REFUSED(gpuport_comm_destroy(comm), "gpuport_comm_destroy", "");
    CHECK(p == NULL && mem == NULL && ch == NULL);

    /* the same bootstrap makes a communicator once the value is gone */
    destroyed = 0;
    CHECK_OK(gpuport_comm_create(&bs, &comm));
    CHECK(comm != NULL);
    CHECK_OK(gpuport_comm_destroy(comm));
    CHECK_MSG(destroyed == 1, "the bootstrap was destroyed %d times", destroyed);
}

/* NULL for every handle argument */
static void null_handles(void)
{
    gpuport_comm_stats_t stats;
    gpuport_port_channel_dev_t dev;
    gpuport_mem_info_t info;
    unsigned char buf[64];
    void *p = buf;
    gpuport_mem_t mem = (gpuport_mem_t)buf;
    gpuport_channel_t ch = (gpuport_channel_t)buf;
    gpuport_peer_channel_t pch = (gpuport_peer_channel_t)buf;
    int ready = 7;

    REFUSED(gpuport_comm_destroy(NULL), "gpuport_comm_destroy", "");
    CHECK(gpuport_comm_rank(NULL) == -1);
    CHECK(gpuport_comm_size(NULL) == -1);
    CHECK(gpuport_comm_same_host(NULL, 0) == -1);
    CHECK(gpuport_comm_local_rank(NULL) == -1 && gpuport_comm_local_size(NULL) == -1);
    REFUSED(gpuport_comm_stats(NULL, &stats), "gpuport_comm_stats", "comm");
    REFUSED(gpuport_mem_alloc(NULL, 64, &p), "gpuport_mem_alloc", "comm");
    REFUSED(gpuport_mem_alloc_device(NULL, 64, &p), "gpuport_mem_alloc_device", "comm");
    REFUSED(gpuport_mem_free(NULL, buf), "gpuport_mem_free", "comm");
    REFUSED(gpuport_mem_register(NULL, buf, sizeof(buf), &mem), "gpuport_mem_register", "comm");
    REFUSED(gpuport_mem_deregister(NULL), "gpuport_mem_deregister", "");
    REFUSED(gpuport_mem_info(NULL, &info), "gpuport_mem_info", "mem");
    REFUSED(gpuport_channel_create(NULL, 0, NULL, NULL, &ch), "gpuport_channel_create", "comm");
    REFUSED(gpuport_channel_create_all(NULL, NULL, NULL, 0, &ch), "gpuport_channel_create_all",
            "comm");
    REFUSED(gpuport_peer_channel_create_all(NULL, NULL, NULL, &pch),
            "gpuport_peer_channel_create_all", "comm");
    REFUSED(gpuport_channel_destroy(NULL), "gpuport_channel_destroy", "");
    REFUSED(gpuport_channel_put(NULL, 0, 0, 8), "gpuport_channel_put", "");
    REFUSED(gpuport_channel_signal(NULL), "gpuport_channel_put/signal", "");
    REFUSED(gpuport_channel_put_with_signal(NULL, 0, 0, 8), "gpuport_channel_put", "");
    REFUSED(gpuport_channel_put_value(NULL, 0, 1), "gpuport_channel_put", "");
    REFUSED(gpuport_channel_put_value_with_signal(NULL, 0, 1), "gpuport_channel_put", "");
    REFUSED(gpuport_channel_flush(NULL), "gpuport_channel_flush", "");
    REFUSED(gpuport_channel_wait(NULL), "gpuport_channel_wait", "");
    REFUSED(gpuport_channel_poll(NULL, &ready), "gpuport_channel_poll", "");
    REFUSED(gpuport_channel_status(NULL), "gpuport_channel_status", "");
    REFUSED(gpuport_channel_device(NULL, &dev), "gpuport_channel_device", "");
    CHECK(strcmp(gpuport_channel_transport(NULL), "none") == 0);
    /* the versioned entry points: handles before layouts */
    REFUSED(gpuport_comm_stats_v(GPUPORT_STATS_LAYOUT, NULL, &stats), "gpuport_comm_stats",
            "comm");
    REFUSED(gpuport_comm_stats_v(0, NULL, &stats), "gpuport_comm_stats", "comm");
    REFUSED(gpuport_channel_device_v(GPUPORT_CHANNEL_DEV_LAYOUT, NULL, &dev),
            "gpuport_channel_device", "");
    REFUSED(gpuport_channel_device_v(0, NULL, &dev), "gpuport_channel_device", "");
    REFUSED(gpuport_mem_info_v(GPUPORT_MEM_INFO_LAYOUT, NULL, &info), "gpuport_mem_info", "mem");
    REFUSED(gpuport_mem_info_v(0, NULL, &info), "gpuport_mem_info", "mem");
    /* outputs untouched */
    CHECK(p == buf && mem == (gpuport_mem_t)buf && ch == (gpuport_channel_t)buf && ready == 7);
}

/* NULL output pointers (and NULL memory) with live handles. Rank 0 makes
 * the refused calls, so that each capture holds its own messages only;
 * rank 1 takes part in the channel. */
static int null_outputs(int rank, int size, gpuport_bootstrap_t *bs, void *arg)
{
    gpuport_comm_t comm;
    gpuport_mem_t msrc, mdst;
    gpuport_channel_t ch;
    void *src, *dst;
    int peer = 1 - rank;

    (void)size, (void)arg;
    CHECK_OK(gpuport_comm_create(bs, &comm));
    CHECK_OK(gpuport_mem_alloc(comm, 4096, &src));
    CHECK_OK(gpuport_mem_alloc(comm, 4096, &dst));
    CHECK_OK(gpuport_mem_register(comm, src, 4096, &msrc));
    CHECK_OK(gpuport_mem_register(comm, dst, 4096, &mdst));
    if (rank == 0) {
        REFUSED(gpuport_comm_stats(comm, NULL), "gpuport_comm_stats", "stats_p");
        REFUSED(gpuport_mem_alloc(comm, 64, NULL), "gpuport_mem_alloc", "ptr_p");
        REFUSED(gpuport_mem_alloc_device(comm, 64, NULL), "gpuport_mem_alloc_device", "ptr_p");
        REFUSED(gpuport_mem_free(comm, NULL), "gpuport_mem_free", "ptr");
        REFUSED(gpuport_mem_register(comm, src, 4096, NULL), "gpuport_mem_register", "mem_p");
        REFUSED(gpuport_mem_register(comm, NULL, 4096, &msrc), "gpuport_mem_register", "ptr");
        REFUSED(gpuport_mem_info(msrc, NULL), "gpuport_mem_info", "info_p");
        REFUSED(gpuport_mem_info_v(GPUPORT_MEM_INFO_LAYOUT, msrc, NULL), "gpuport_mem_info",
                "info_p");
        REFUSED(gpuport_channel_create(comm, peer, msrc, mdst, NULL), "gpuport_channel_create",
                "channel_p");
    }
    CHECK_OK(gpuport_channel_create(comm, peer, msrc, mdst, &ch));
    if (rank == 0) {
        REFUSED(gpuport_channel_poll(ch, NULL), "gpuport_channel_poll", "ready_p");
        REFUSED(gpuport_channel_device(ch, NULL), "gpuport_channel_device", "dev_p");
        REFUSED(gpuport_comm_stats_v(GPUPORT_STATS_LAYOUT, comm, NULL), "gpuport_comm_stats",
                "stats_p");
        /* none of that harmed the channel */
        CHECK_OK(gpuport_channel_status(ch));
    }
    CHECK_OK(gpuport_channel_put_with_signal(ch, 0, 0, 8));
    CHECK_OK(gpuport_channel_wait(ch));
    CHECK_OK(gpuport_channel_flush(ch));
    CHECK_OK(gpuport_channel_destroy(ch));
    CHECK_OK(gpuport_mem_deregister(msrc));
    CHECK_OK(gpuport_mem_deregister(mdst));
    CHECK_OK(gpuport_mem_free(comm, src));
    CHECK_OK(gpuport_mem_free(comm, dst));
    CHECK_OK(gpuport_comm_destroy(comm));
    return 0;
}

/* Every status of the enum has its own text (none falls to "unknown
 * status"), no two the same; a close reads as a close. */
static void every_status_named(void)
{
    static const gpuport_status_t all[] = {
        GPUPORT_OK,           GPUPORT_ERR_INVALID_ARG,   GPUPORT_ERR_INVALID_CONFIG,
        GPUPORT_ERR_OUT_OF_RANGE, GPUPORT_ERR_NOT_SUPPORTED, GPUPORT_ERR_NO_MEMORY,
        GPUPORT_ERR_NO_RESOURCE, GPUPORT_ERR_AGAIN,      GPUPORT_ERR_BUSY,
        GPUPORT_ERR_TRANSPORT, GPUPORT_ERR_PEER,         GPUPORT_ERR_CLOSED,
        GPUPORT_ERR_TIMEOUT,  GPUPORT_ERR_VERSION,       GPUPORT_ERR_SHUTDOWN,
        GPUPORT_ERR_INTERNAL};
    const size_t n = sizeof(all) / sizeof(all[0]);

    for (size_t i = 0; i < n; i++) {
        const char *t = gpuport_status_string(all[i]);
        CHECK_MSG(t && strcmp(t, "unknown status") != 0, "status %d has no text", (int)all[i]);
        for (size_t j = 0; j < i; j++)
            CHECK_MSG(strcmp(t, gpuport_status_string(all[j])) != 0,
                      "statuses %d and %d share the text \"%s\"", (int)all[i], (int)all[j], t);
    }
    CHECK(GPUPORT_ERR_CLOSED == -41);
    CHECK(strstr(gpuport_status_string(GPUPORT_ERR_CLOSED), "closed") &&
          !strstr(gpuport_status_string(GPUPORT_ERR_CLOSED), "fail"));
}

int main(void)
{
    /* the messages checked here are errors: printed unless logging is off */
    CHECK(setenv("GPUPORT_LOG_LEVEL", "warn", 1) == 0);
    CHECK(gpuport_status_string(GPUPORT_ERR_INVALID_ARG) != NULL);
    every_status_named();
    CHECK(strlen(gpuport_status_string((gpuport_status_t)-12345)) > 0);
    CHECK(gpuport_version_string() != NULL);
    null_handles();
    failed_creation();
    CHECK(local_run(2, null_outputs, NULL) == 0);
    printf("every public call refused NULL handles and NULL outputs\n");
    return 0;
}
