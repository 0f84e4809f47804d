/*
 * Memory channels' host side without a GPU: what gpuport_memory_channel_create
 * and _destroy check and refuse, on both sides of a pair of processes, and
 * that a refused creation gives its id back (the GPU suite's
 * test_gpu_memchan runs the channels themselves). Host-only communicators:
 * the refusal must name GPU mode on the side that asked and reach the peer;
 * a peer that asks for a port channel instead fails with the reason; bad
 * arguments are refused before any exchange.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capture.h"
#include "check.h"
#include "gpuport/gpuport_device.h"
#include "pair_bootstrap.h"

#define REGION 65536

typedef struct side {
    gpuport_comm_t comm;
    void *src, *dst;
    gpuport_mem_t msrc, mdst;
} side_t;

static void side_open(side_t *s, gpuport_bootstrap_t *bs)
{
    memset(s, 0, sizeof(*s));
    CHECK_OK(gpuport_comm_create(bs, &s->comm));
    CHECK_OK(gpuport_mem_alloc(s->comm, REGION, &s->src));
    CHECK_OK(gpuport_mem_alloc(s->comm, REGION, &s->dst));
    memset(s->src, 0x40 + bs->rank, REGION);
    memset(s->dst, 0, REGION);
    CHECK_OK(gpuport_mem_register(s->comm, s->src, REGION, &s->msrc));
    CHECK_OK(gpuport_mem_register(s->comm, s->dst, REGION, &s->mdst));
}

/* Bad arguments: refused at once, with the argument named, nothing
 * exchanged (the peer does not take part). */
static void bad_args(side_t *s)
{
    gpuport_memory_channel_t mc = (gpuport_memory_channel_t)0x1;
    gpuport_memory_channel_dev_t dev;
    const char *log;

    capture_begin();
    CHECK_STATUS(gpuport_memory_channel_create(NULL, 0, NULL, NULL, &mc),
                 GPUPORT_ERR_INVALID_ARG);
    CHECK_STATUS(gpuport_memory_channel_create(s->comm, 0, s->msrc, s->mdst, NULL),
                 GPUPORT_ERR_INVALID_ARG);
    CHECK_STATUS(gpuport_memory_channel_create(s->comm, 2, s->msrc, s->mdst, &mc),
                 GPUPORT_ERR_INVALID_ARG);
    CHECK_STATUS(gpuport_memory_channel_create(s->comm, -1, s->msrc, s->mdst, &mc),
                 GPUPORT_ERR_INVALID_ARG);
    CHECK_STATUS(gpuport_memory_channel_create(s->comm, 0, (gpuport_mem_t)s->src, s->mdst, &mc),
                 GPUPORT_ERR_INVALID_ARG);
    CHECK_STATUS(gpuport_memory_channel_destroy(NULL), GPUPORT_ERR_INVALID_ARG);
    CHECK_STATUS(gpuport_memory_channel_device(NULL, &dev), GPUPORT_ERR_INVALID_ARG);
    log = capture_end();
    CHECK_MSG(mc == (gpuport_memory_channel_t)0x1, "a refused create wrote its handle");
    CHECK_MSG(strstr(log, "gpuport_memory_channel_create: comm (nil) is not a live communicator") &&
                  strstr(log, "gpuport_memory_channel_create: channel_p is NULL") &&
                  strstr(log, "peer 2 is not a rank of this communicator (0..1)") &&
                  strstr(log, "peer -1 is not a rank") &&
                  strstr(log, "src") && strstr(log, "is not a live registration") &&
                  strstr(log, "gpuport_memory_channel_destroy: (nil) is not a live memory channel") &&
                  strstr(log, "gpuport_memory_channel_device"),
              "log: %s", log);
}

/* Both sides host-only: each refuses on its own, naming GPU mode; then a
 * port channel between the same two still works in the id given back
 * (GPUPORT_MAX_CHANNELS=1: no other id exists). */
static int both_host_only(gpuport_bootstrap_t *bs)
{
    side_t s;
    gpuport_memory_channel_t mc = NULL;
    gpuport_channel_t ch;
    gpuport_status_t st;
    const char *log;

    side_open(&s, bs);
    if (bs->rank == 0)
        bad_args(&s);
    CHECK_OK(bs->barrier(bs->ctx));
    capture_begin();
    st = gpuport_memory_channel_create(s.comm, 1 - bs->rank, s.msrc, s.mdst, &mc);
    log = capture_end();
    CHECK_MSG(st == GPUPORT_ERR_NOT_SUPPORTED && mc == NULL, "rank %d: %s", bs->rank,
              gpuport_status_string(st));
    CHECK_MSG(strstr(log, "memory channels need GPU mode, and this rank's communicator is "
                          "host-only"),
              "rank %d: log: %s", bs->rank, log);
    CHECK_OK(gpuport_channel_create(s.comm, 1 - bs->rank, s.msrc, s.mdst, &ch));
    CHECK_OK(gpuport_channel_put_with_signal(ch, 100, 200, 1000));
    CHECK_OK(gpuport_channel_wait(ch));
    for (int i = 0; i < REGION; i++)
        CHECK_MSG(((unsigned char *)s.dst)[i] == (i >= 100 && i < 1100 ? 0x40 + (1 - bs->rank) : 0),
                  "byte %d", i);
    CHECK_OK(gpuport_channel_flush(ch));
    CHECK_OK(bs->barrier(bs->ctx));
    CHECK_OK(gpuport_channel_destroy(ch));
    CHECK_OK(gpuport_comm_destroy(s.comm));
    return 0;
}

/* Rank 0 asks for a memory channel, rank 1 for a port channel: rank 0
 * refuses (host-only) and rank 1 fails with rank 0's reason, not with a
 * channel of the wrong kind. */
static int kinds_differ(gpuport_bootstrap_t *bs)
{
    side_t s;
    gpuport_status_t st;
    const char *log;

    side_open(&s, bs);
    capture_begin();
    if (bs->rank == 0) {
        gpuport_memory_channel_t mc = NULL;
        st = gpuport_memory_channel_create(s.comm, 1, s.msrc, s.mdst, &mc);
    } else {
        gpuport_channel_t ch = NULL;
        st = gpuport_channel_create(s.comm, 0, s.msrc, s.mdst, &ch);
        CHECK_MSG(ch == NULL, "a failed create wrote its handle");
    }
    log = capture_end();
    CHECK_MSG(st == (bs->rank == 0 ? GPUPORT_ERR_NOT_SUPPORTED : GPUPORT_ERR_PEER),
              "rank %d: %s", bs->rank, gpuport_status_string(st));
    if (bs->rank == 1)
        CHECK_MSG(strstr(log, "rank 0 could not create its side of the channel: memory channels "
                              "need GPU mode"),
                  "rank 1: log: %s", log);
    CHECK_OK(gpuport_comm_destroy(s.comm));
    return 0;
}

static void run_pair(int (*fn)(gpuport_bootstrap_t *), const char *name)
{
    gpuport_bootstrap_t bs;
    pid_t child;
    int rank = pair_fork(&bs, &child);

    CHECK(rank >= 0);
    if (rank == 1)
        _exit(fn(&bs));
    CHECK_MSG(fn(&bs) == 0, "%s: parent failed", name);
    CHECK_MSG(pair_join(child) == 0, "%s: child failed", name);
    printf("PASS %s\n", name);
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    setenv("GPUPORT_GPU", "off", 1);
    setenv("GPUPORT_MAX_CHANNELS", "1", 1);
    setenv("GPUPORT_TIMEOUT_MS", "30000", 1);
    run_pair(both_host_only, "host-only: refused on both sides, id given back, bad arguments");
    run_pair(kinds_differ, "memory channel against a port channel: both fail, with the reason");
    return 0;
}
